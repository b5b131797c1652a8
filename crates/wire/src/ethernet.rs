//! Ethernet II frames (IEEE 802.3 clause 3.2.6 "Length/Type" used as a type, RFC 894).
//!
//! The view covers destination, source and EtherType; VLAN tags that may follow the source address
//! are separate headers (`vlan`), reached when `ethertype()` is a TPID. The FCS is not part of
//! the buffers flowpath sees.

use crate::{Error, EtherType, Field, Result, get_u16, set_u16};
use core::fmt;
use core::str::FromStr;

mod field {
    use crate::Field;
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    pub const PAYLOAD: usize = 14;
}

/// Length of an Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A 48-bit IEEE MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// The address in `data`, which must be exactly six bytes (`None` otherwise).
    #[inline]
    pub fn from_bytes(data: &[u8]) -> Option<EthernetAddress> {
        data.try_into().ok().map(EthernetAddress)
    }

    /// The six octets.
    #[inline]
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// True for ff:ff:ff:ff:ff:ff.
    #[inline]
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// True when the I/G bit (least significant bit of the first octet) is set.
    #[inline]
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// True when the U/L bit says the address is locally administered.
    #[inline]
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// Reads the text form: six groups of one or two hex digits, each separated by `:` or `-`
/// (`02:00:5e:00:00:01`, `2:0:5e:0:0:1`, `02-00-5e-00-00-01`); no surrounding white space.
impl FromStr for EthernetAddress {
    type Err = Error;

    fn from_str(s: &str) -> Result<EthernetAddress> {
        let mut a = [0u8; 6];
        let mut groups = s.split([':', '-']);
        for b in &mut a {
            let g = groups.next().ok_or(Error::BadMacAddress)?;
            // Digits only: `from_str_radix` alone would also take a sign.
            if g.is_empty() || g.len() > 2 || !g.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(Error::BadMacAddress);
            }
            *b = u8::from_str_radix(g, 16).map_err(|_| Error::BadMacAddress)?;
        }
        match groups.next() {
            None => Ok(EthernetAddress(a)),
            Some(_) => Err(Error::BadMacAddress),
        }
    }
}

impl fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[inline]
pub(crate) fn get_mac(b: &[u8], f: Field) -> EthernetAddress {
    let mut a = [0u8; 6];
    a.copy_from_slice(&b[f]);
    EthernetAddress(a)
}

/// A view of an Ethernet II frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking its length; getters may panic on a short buffer.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer after checking that it holds the 14-byte header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// `Err(Truncated)` if the buffer is shorter than the header.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Header length (always 14).
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Destination MAC address.
    #[inline]
    pub fn dst_addr(&self) -> EthernetAddress {
        get_mac(self.buffer.as_ref(), field::DESTINATION)
    }

    /// Source MAC address.
    #[inline]
    pub fn src_addr(&self) -> EthernetAddress {
        get_mac(self.buffer.as_ref(), field::SOURCE)
    }

    /// EtherType (or a VLAN TPID when a tag follows).
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(get_u16(self.buffer.as_ref(), field::ETHERTYPE))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> EthernetFrame<&'a T> {
    /// Everything after the header, with the lifetime of the underlying buffer.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    #[inline]
    pub fn set_dst_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&value.0);
    }

    /// Sets the source MAC address.
    #[inline]
    pub fn set_src_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&value.0);
    }

    /// Sets the EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, value: EtherType) {
        set_u16(self.buffer.as_mut(), field::ETHERTYPE, value.0);
    }

    /// Everything after the header, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// The meaning of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source MAC address.
    pub src_addr: EthernetAddress,
    /// Destination MAC address.
    pub dst_addr: EthernetAddress,
    /// EtherType of what follows.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Bytes `emit` writes (14).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    ///
    /// # Panics
    /// If the frame's buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 18] = [
        0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0, // dst
        0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48, // src
        0x08, 0x00, // IPv4
        0xde, 0xad, 0xbe, 0xef,
    ];

    #[test]
    fn view_and_round_trip() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(f.dst_addr().to_string(), "8c:dc:d4:ab:5b:f0");
        assert_eq!(
            f.src_addr(),
            EthernetAddress([0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48])
        );
        assert_eq!(f.ethertype(), EtherType::IPV4);
        assert_eq!(f.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        let repr = EthernetRepr::parse(&f).unwrap();
        let mut out = [0u8; 18];
        out[14..].copy_from_slice(&FRAME[14..]);
        repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
        assert_eq!(out, FRAME);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            EthernetFrame::new_checked(&FRAME[..13]).unwrap_err(),
            Error::Truncated
        );
        assert!(
            EthernetFrame::new_checked(&FRAME[..14])
                .unwrap()
                .payload()
                .is_empty()
        );
    }

    #[test]
    fn address_classes() {
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        assert!(EthernetAddress([0x01, 0, 0x5e, 0, 0, 1]).is_multicast());
        assert!(EthernetAddress([0x02, 0, 0, 0, 0, 1]).is_local());
        assert!(!EthernetAddress([0x8c, 0, 0, 0, 0, 1]).is_multicast());
        assert_eq!(EthernetAddress::from_bytes(&[1, 2, 3]), None);
    }

    #[test]
    fn parse_text() {
        let want = EthernetAddress([0x02, 0x00, 0x5e, 0xab, 0xcd, 0x0f]);
        for s in [
            "02:00:5e:ab:cd:0f",
            "02:00:5E:AB:CD:0F",
            "2:0:5e:ab:cd:f",
            "02-00-5e-ab-cd-0f",
            "02:00-5e:ab-cd:0f",
        ] {
            assert_eq!(s.parse::<EthernetAddress>(), Ok(want), "{s}");
        }
        for s in [
            "",
            "02:00:00",
            "02:00:5e:ab:cd",
            "02:00:5e:ab:cd:0f:00",
            "02:00:5e:ab:cd:",
            "02::5e:ab:cd:0f",
            "002:00:5e:ab:cd:0f",
            "02:00:5e:ab:cd:0g",
            "+2:00:5e:ab:cd:0f",
            " 02:00:5e:ab:cd:0f",
            "02.00.5e.ab.cd.0f",
            "02:00:5e:ab:cd:é",
        ] {
            assert_eq!(
                s.parse::<EthernetAddress>(),
                Err(Error::BadMacAddress),
                "{s:?}"
            );
        }
    }

    proptest::proptest! {
        /// parse ∘ display = id.
        #[test]
        fn display_parses_back(a in proptest::prelude::any::<[u8; 6]>()) {
            let a = EthernetAddress(a);
            proptest::prop_assert_eq!(a.to_string().parse::<EthernetAddress>(), Ok(a));
        }
    }
}
