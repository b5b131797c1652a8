//! GRE (RFC 2784) with the key and sequence number extensions (RFC 2890).
//!
//! The header is 4 bytes (flags and version, protocol type) followed by the optional checksum
//! (with Reserved1), key and sequence number, in that order, each present when its bit is set.
//! The checksum covers the GRE header and payload, so the buffer must be exactly the GRE packet
//! (the outer IP payload). RFC 1701 source routing (the R bit) is refused.

use crate::{Error, EtherType, Result, checksum, get_u16, get_u32, set_u16, set_u32};

mod field {
    use crate::Field;
    pub const FLAGS: Field = 0..2;
    pub const PROTOCOL: Field = 2..4;
    pub const OPTIONAL: usize = 4;
}

/// Length of the GRE header without optional fields.
pub const HEADER_LEN: usize = field::OPTIONAL;

const FLAG_C: u16 = 0x8000;
const FLAG_R: u16 = 0x4000;
const FLAG_K: u16 = 0x2000;
const FLAG_S: u16 = 0x1000;
/// Bits 4-5 (RFC 1701 strict source route and recursion high bit): RFC 2784 §2.3 says to discard
/// packets where bits 1-5 are set; bits 1-3 are R, K and S, handled on their own.
const RESERVED0_MUST_BE_ZERO: u16 = 0x0c00;
const VERSION_MASK: u16 = 0x0007;

/// A view of a GRE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> GrePacket<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        GrePacket { buffer }
    }

    /// Wraps a buffer after `check_len`.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks: base header fits (`Truncated`), version is 0 (`BadVersion`; version 1 is PPTP's
    /// enhanced GRE), no routing (`Unsupported`), optional fields fit (`Truncated`).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 0 {
            return Err(Error::BadVersion);
        }
        if self.routing_present() {
            return Err(Error::Unsupported);
        }
        if len < self.header_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    fn flags(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::FLAGS)
    }

    /// C: checksum present.
    #[inline]
    pub fn checksum_present(&self) -> bool {
        self.flags() & FLAG_C != 0
    }

    /// R: RFC 1701 routing present (refused by `check_len`).
    #[inline]
    pub fn routing_present(&self) -> bool {
        self.flags() & FLAG_R != 0
    }

    /// K: key present.
    #[inline]
    pub fn key_present(&self) -> bool {
        self.flags() & FLAG_K != 0
    }

    /// S: sequence number present.
    #[inline]
    pub fn seq_present(&self) -> bool {
        self.flags() & FLAG_S != 0
    }

    /// The Reserved0 bits other than K and S (bits 1 and 4-12).
    #[inline]
    pub fn reserved0(&self) -> u16 {
        self.flags() & !(FLAG_C | FLAG_K | FLAG_S | VERSION_MASK)
    }

    /// Version (0 on a checked view).
    #[inline]
    pub fn version(&self) -> u8 {
        (self.flags() & VERSION_MASK) as u8
    }

    /// Protocol type of the payload.
    #[inline]
    pub fn protocol_type(&self) -> EtherType {
        EtherType(get_u16(self.buffer.as_ref(), field::PROTOCOL))
    }

    /// Header length: 4, plus 4 for each of checksum, key and sequence number.
    #[inline]
    pub fn header_len(&self) -> usize {
        let f = self.flags();
        HEADER_LEN
            + 4 * (usize::from(f & FLAG_C != 0)
                + usize::from(f & FLAG_K != 0)
                + usize::from(f & FLAG_S != 0))
    }

    #[inline]
    fn key_offset(&self) -> usize {
        HEADER_LEN + if self.checksum_present() { 4 } else { 0 }
    }

    #[inline]
    fn seq_offset(&self) -> usize {
        self.key_offset() + if self.key_present() { 4 } else { 0 }
    }

    /// The checksum field, if present.
    #[inline]
    pub fn checksum(&self) -> Option<u16> {
        let o = HEADER_LEN;
        self.checksum_present()
            .then(|| get_u16(self.buffer.as_ref(), o..o + 2))
    }

    /// The key, if present.
    #[inline]
    pub fn key(&self) -> Option<u32> {
        let o = self.key_offset();
        self.key_present()
            .then(|| get_u32(self.buffer.as_ref(), o..o + 4))
    }

    /// The sequence number, if present.
    #[inline]
    pub fn sequence(&self) -> Option<u32> {
        let o = self.seq_offset();
        self.seq_present()
            .then(|| get_u32(self.buffer.as_ref(), o..o + 4))
    }

    /// True if there is no checksum or it is correct.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        !self.checksum_present() || checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> GrePacket<&'a T> {
    /// The payload after the header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GrePacket<T> {
    /// Sets the protocol type.
    #[inline]
    pub fn set_protocol_type(&mut self, value: EtherType) {
        set_u16(self.buffer.as_mut(), field::PROTOCOL, value.0);
    }

    /// Overwrites the key; does nothing if the header has none (the flag decides the layout).
    #[inline]
    pub fn set_key(&mut self, value: u32) {
        if self.key_present() {
            let o = self.key_offset();
            set_u32(self.buffer.as_mut(), o..o + 4, value);
        }
    }

    /// Overwrites the sequence number; does nothing if the header has none.
    #[inline]
    pub fn set_sequence(&mut self, value: u32) {
        if self.seq_present() {
            let o = self.seq_offset();
            set_u32(self.buffer.as_mut(), o..o + 4, value);
        }
    }

    /// Computes and stores the checksum over header and payload, if the header has one.
    pub fn fill_checksum(&mut self) {
        if self.checksum_present() {
            let o = HEADER_LEN;
            set_u16(self.buffer.as_mut(), o..o + 2, 0);
            let c = !checksum::data(self.buffer.as_ref());
            set_u16(self.buffer.as_mut(), o..o + 2, c);
        }
    }

    /// The payload, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

/// The meaning of a GRE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GreRepr {
    /// Protocol type of the payload (TEB, IPv4, IPv6, MPLS…).
    pub protocol_type: EtherType,
    /// Whether a checksum is carried (its value is computed by `fill_checksum`).
    pub checksum_present: bool,
    /// Key (RFC 2890 §2.1).
    pub key: Option<u32>,
    /// Sequence number (RFC 2890 §2.2).
    pub sequence: Option<u32>,
}

impl GreRepr {
    /// Reads a checked header (the checksum is not verified); `Err(Malformed)` if Reserved0
    /// bits 4-5 are set (RFC 2784 §2.3). Bits 6-12 and Reserved1 are ignored on receipt.
    pub fn parse<T: AsRef<[u8]>>(packet: &GrePacket<T>) -> Result<GreRepr> {
        packet.check_len()?;
        if packet.flags() & RESERVED0_MUST_BE_ZERO != 0 {
            return Err(Error::Malformed);
        }
        Ok(GreRepr {
            protocol_type: packet.protocol_type(),
            checksum_present: packet.checksum_present(),
            key: packet.key(),
            sequence: packet.sequence(),
        })
    }

    /// Bytes `emit` writes: 4, plus 4 for each optional field.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + 4 * (usize::from(self.checksum_present)
                + usize::from(self.key.is_some())
                + usize::from(self.sequence.is_some()))
    }

    /// Writes the header with zero checksum and Reserved1; call `fill_checksum` once the
    /// payload is in place.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut GrePacket<T>) {
        let flags = if self.checksum_present { FLAG_C } else { 0 }
            | if self.key.is_some() { FLAG_K } else { 0 }
            | if self.sequence.is_some() { FLAG_S } else { 0 };
        let b = packet.buffer.as_mut();
        set_u16(b, field::FLAGS, flags);
        set_u16(b, field::PROTOCOL, self.protocol_type.0);
        let mut o = HEADER_LEN;
        if self.checksum_present {
            set_u32(b, o..o + 4, 0);
            o += 4;
        }
        if let Some(k) = self.key {
            set_u32(b, o..o + 4, k);
            o += 4;
        }
        if let Some(s) = self.sequence {
            set_u32(b, o..o + 4, s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_mplsogre_header() {
        // K set, key 0, MPLS unicast: the seed MPLSoGRE header.
        let b = [0x20, 0x00, 0x88, 0x47, 0, 0, 0, 0, 0x00, 0x32, 0xc1, 0x04];
        let p = GrePacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), 8);
        assert_eq!(p.protocol_type(), EtherType::MPLS_UNICAST);
        assert_eq!((p.checksum(), p.key(), p.sequence()), (None, Some(0), None));
        assert!(p.verify_checksum());
        assert_eq!(p.payload(), &b[8..]);
        let r = GreRepr::parse(&p).unwrap();
        let mut out = [0xffu8; 8];
        r.emit(&mut GrePacket::new_unchecked(&mut out[..]));
        assert_eq!(out, b[..8]);
    }

    #[test]
    fn all_options_and_checksum() {
        let r = GreRepr {
            protocol_type: EtherType::TEB,
            checksum_present: true,
            key: Some(0x0102_0304),
            sequence: Some(7),
        };
        assert_eq!(r.buffer_len(), 16);
        let mut b = [0u8; 20];
        b[16..].copy_from_slice(b"data");
        let mut p = GrePacket::new_unchecked(&mut b[..]);
        r.emit(&mut p);
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(&b[..4], &[0xb0, 0x00, 0x65, 0x58]);
        assert_eq!(&b[8..16], &[1, 2, 3, 4, 0, 0, 0, 7]);
        let p = GrePacket::new_checked(&b[..]).unwrap();
        assert_eq!(GreRepr::parse(&p).unwrap(), r);
        let mut bad = b;
        bad[19] ^= 1;
        assert!(!GrePacket::new_checked(&bad[..]).unwrap().verify_checksum());
    }

    #[test]
    fn errors() {
        assert_eq!(
            GrePacket::new_checked(&[0u8; 3][..]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            GrePacket::new_checked(&[0x30, 0, 8, 0, 0, 0, 0, 0][..]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            GrePacket::new_checked(&[0x00, 1, 8, 0][..]).unwrap_err(),
            Error::BadVersion
        );
        assert_eq!(
            GrePacket::new_checked(&[0x40, 0, 8, 0][..]).unwrap_err(),
            Error::Unsupported
        );
        let p = GrePacket::new_checked(&[0x08, 0, 8, 0][..]).unwrap();
        assert_eq!(GreRepr::parse(&p), Err(Error::Malformed));
        // Bits 6-12 are ignored on receipt.
        let p = GrePacket::new_checked(&[0x00, 0xf8, 8, 0][..]).unwrap();
        assert_eq!(p.reserved0(), 0x00f8);
        assert_eq!(GreRepr::parse(&p).unwrap().protocol_type, EtherType::IPV4);
    }
}
