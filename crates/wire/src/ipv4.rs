//! IPv4 (RFC 791), with options (RFC 791 §3.1) and fragments, and the header checksum (RFC 1071).
//!
//! `new_checked` validates version, IHL and total length against the buffer, so `payload()` is
//! exactly `total_len - header_len` bytes even when the buffer carries Ethernet padding.

use crate::{
    Error, IpProtocol, Ipv4Addr, OptionBytes, Result, checksum, get_ipv4, get_u16, set_u16,
};

mod field {
    use crate::Field;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    pub const FLG_OFF: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
    pub const OPTIONS: usize = 20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = field::OPTIONS;
/// Largest IPv4 header (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;

/// Option bytes of an IPv4 header (up to 40).
pub type Ipv4Options = OptionBytes<40>;

const FLAG_RESERVED: u16 = 0x8000;
const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// Option kinds (IANA "IP Option Numbers").
pub mod option {
    /// End of option list.
    pub const END: u8 = 0;
    /// No operation (padding between options).
    pub const NOP: u8 = 1;
    /// Record route.
    pub const RECORD_ROUTE: u8 = 7;
    /// Timestamp.
    pub const TIMESTAMP: u8 = 68;
    /// Router alert (RFC 2113).
    pub const ROUTER_ALERT: u8 = 148;
}

/// One IPv4 option: its kind (copy flag, class and number in one byte) and value bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Option<'a> {
    /// Option type octet.
    pub kind: u8,
    /// Value bytes (without kind and length); empty for END and NOP.
    pub data: &'a [u8],
}

/// Iterates the options of an IPv4 header; stops after END, yields one `Err(BadOption)` and
/// stops if a length is below 2 or runs past the option area.
#[derive(Debug, Clone)]
pub struct Ipv4OptionIter<'a> {
    data: &'a [u8],
}

impl<'a> Ipv4OptionIter<'a> {
    /// Iterates over the option bytes `data`.
    pub const fn new(data: &'a [u8]) -> Self {
        Ipv4OptionIter { data }
    }
}

impl<'a> Iterator for Ipv4OptionIter<'a> {
    type Item = Result<Ipv4Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, rest) = self.data.split_first()?;
        match kind {
            option::END => {
                self.data = &[];
                Some(Ok(Ipv4Option { kind, data: &[] }))
            }
            option::NOP => {
                self.data = rest;
                Some(Ok(Ipv4Option { kind, data: &[] }))
            }
            _ => match crate::tcp::tlv_split(self.data) {
                Some((data, next)) => {
                    self.data = next;
                    Some(Ok(Ipv4Option { kind, data }))
                }
                None => {
                    self.data = &[];
                    Some(Err(Error::BadOption))
                }
            },
        }
    }
}

/// A view of an IPv4 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer after `check_len`.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks, in order: the fixed header fits (`Truncated`), version is 4 (`BadVersion`), IHL is at
    /// least 5 (`BadHeaderLength`), the options fit (`Truncated`), total length covers the header
    /// (`BadLength`) and fits in the buffer (`Truncated`).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::BadVersion);
        }
        let hlen = self.header_len();
        if hlen < HEADER_LEN {
            return Err(Error::BadHeaderLength);
        }
        if len < hlen {
            return Err(Error::Truncated);
        }
        let total = usize::from(self.total_len());
        if total < hlen {
            return Err(Error::BadLength);
        }
        if len < total {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (4 on a checked view).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Differentiated services code point (RFC 2474).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification (RFC 3168).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length (header and payload).
    #[inline]
    pub fn total_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT)
    }

    #[inline]
    fn flg_off(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::FLG_OFF)
    }

    /// The reserved flag (must be zero).
    #[inline]
    pub fn reserved_flag(&self) -> bool {
        self.flg_off() & FLAG_RESERVED != 0
    }

    /// Don't fragment.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flg_off() & FLAG_DF != 0
    }

    /// More fragments.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.flg_off() & FLAG_MF != 0
    }

    /// Fragment offset in 8-octet units, as on the wire (multiply by 8 for bytes).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        self.flg_off() & OFFSET_MASK
    }

    /// True for any fragment (first, middle or last): MF set or a non-zero offset.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.flg_off() & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Header checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        get_ipv4(self.buffer.as_ref(), field::SRC_ADDR)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        get_ipv4(self.buffer.as_ref(), field::DST_ADDR)
    }

    /// The option bytes (between the fixed header and `header_len()`).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    /// Iterates the options.
    #[inline]
    pub fn options_iter(&self) -> Ipv4OptionIter<'_> {
        Ipv4OptionIter::new(self.options())
    }

    /// True if the header checksum is correct.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::data(&self.buffer.as_ref()[..self.header_len()]) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv4Packet<&'a T> {
    /// The payload: from the end of the header to the total length (Ethernet padding excluded).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets version (high nibble of byte 0).
    #[inline]
    pub fn set_version(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (value << 4);
    }

    /// Sets the header length in bytes (must be a multiple of 4, at most 60).
    #[inline]
    pub fn set_header_len(&mut self, value: usize) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((value / 4) as u8 & 0x0f);
    }

    /// Sets the DSCP (low 6 bits).
    #[inline]
    pub fn set_dscp(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (value << 2);
    }

    /// Sets the ECN (low 2 bits).
    #[inline]
    pub fn set_ecn(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (value & 0x03);
    }

    /// Sets the total length.
    #[inline]
    pub fn set_total_len(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Sets the identification.
    #[inline]
    pub fn set_ident(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT, value);
    }

    #[inline]
    fn set_flg_bit(&mut self, bit: u16, value: bool) {
        let v = (self.flg_off() & !bit) | if value { bit } else { 0 };
        set_u16(self.buffer.as_mut(), field::FLG_OFF, v);
    }

    /// Sets the reserved flag.
    #[inline]
    pub fn set_reserved_flag(&mut self, value: bool) {
        self.set_flg_bit(FLAG_RESERVED, value);
    }

    /// Sets don't fragment.
    #[inline]
    pub fn set_dont_frag(&mut self, value: bool) {
        self.set_flg_bit(FLAG_DF, value);
    }

    /// Sets more fragments.
    #[inline]
    pub fn set_more_frags(&mut self, value: bool) {
        self.set_flg_bit(FLAG_MF, value);
    }

    /// Sets the fragment offset in 8-octet units (low 13 bits).
    #[inline]
    pub fn set_frag_offset(&mut self, value: u16) {
        let v = (self.flg_off() & !OFFSET_MASK) | (value & OFFSET_MASK);
        set_u16(self.buffer.as_mut(), field::FLG_OFF, v);
    }

    /// Sets the TTL.
    #[inline]
    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }

    /// Sets the protocol.
    #[inline]
    pub fn set_protocol(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = value.0;
    }

    /// Sets the stored checksum.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// The option bytes, mutable.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[field::OPTIONS..end]
    }

    /// Recomputes and stores the header checksum.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::data(&self.buffer.as_ref()[..self.header_len()]);
        self.set_checksum(!sum);
    }

    /// Decrements the TTL and patches the checksum incrementally (RFC 1624), as a router does.
    /// Returns the new TTL; a TTL of zero is left alone.
    #[inline]
    pub fn decrement_ttl(&mut self) -> u8 {
        let ttl = self.ttl();
        if ttl == 0 {
            return 0;
        }
        let proto = self.buffer.as_ref()[field::PROTOCOL];
        let old = u16::from_be_bytes([ttl, proto]);
        let new = u16::from_be_bytes([ttl - 1, proto]);
        self.set_ttl(ttl - 1);
        let c = checksum::update16(self.checksum(), old, new);
        self.set_checksum(c);
        ttl - 1
    }

    /// The payload (up to the total length), mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[start..end]
    }
}

/// The meaning of an IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload.
    pub protocol: IpProtocol,
    /// Payload length (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP, 0..=63.
    pub dscp: u8,
    /// ECN, 0..=3.
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't fragment.
    pub dont_frag: bool,
    /// More fragments.
    pub more_frags: bool,
    /// Fragment offset in 8-octet units, 0..=8191.
    pub frag_offset: u16,
    /// Option bytes; `emit` pads them with END (zero) bytes to a multiple of four.
    pub options: Ipv4Options,
}

impl Ipv4Repr {
    /// Reads a checked packet. Does not verify the checksum (see `verify_checksum`);
    /// `Err(Malformed)` if the reserved flag is set, `Err(BadOption)` for malformed options.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Ipv4Repr> {
        packet.check_len()?;
        if packet.reserved_flag() {
            return Err(Error::Malformed);
        }
        for opt in packet.options_iter() {
            opt?;
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            ttl: packet.ttl(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
            options: Ipv4Options::from_slice(packet.options())?,
        })
    }

    /// Header length `emit` writes: 20 plus the options rounded up to four bytes.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.options.len().next_multiple_of(4)
    }

    /// Writes the header, including a correct checksum. The total length is
    /// `buffer_len() + payload_len`, truncated to 16 bits.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        let hlen = self.buffer_len();
        packet.set_version(4);
        packet.set_header_len(hlen);
        packet.set_dscp(self.dscp);
        packet.set_ecn(self.ecn);
        packet.set_total_len((hlen + self.payload_len) as u16);
        packet.set_ident(self.ident);
        let flg_off = if self.dont_frag { FLAG_DF } else { 0 }
            | if self.more_frags { FLAG_MF } else { 0 }
            | (self.frag_offset & OFFSET_MASK);
        set_u16(packet.buffer.as_mut(), field::FLG_OFF, flg_off);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        let opts = &mut packet.buffer.as_mut()[field::OPTIONS..hlen];
        let n = self.options.len();
        opts[..n].copy_from_slice(self.options.as_slice());
        opts[n..].fill(0);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 10.0.0.1 -> 10.1.0.2 UDP, 28 bytes total, from the seed `plain` packet, plus one byte of
    // Ethernet padding.
    const PLAIN: [u8; 29] = [
        0x45, 0x00, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x66, 0xcd, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x01, 0x00, 0x02, 0x04, 0x00, 0x07, 0xd0, 0x00, 0x08, 0x00, 0x00, 0xee,
    ];

    #[test]
    fn plain_fields() {
        let p = Ipv4Packet::new_checked(&PLAIN[..]).unwrap();
        assert_eq!((p.version(), p.header_len(), p.total_len()), (4, 20, 28));
        assert_eq!(p.protocol(), IpProtocol::UDP);
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 1, 0, 2));
        assert!(p.verify_checksum());
        assert!(!p.is_fragment());
        assert_eq!(p.payload().len(), 8, "padding is not payload");
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(r.payload_len, 8);
        let mut out = PLAIN;
        out[..20].fill(0);
        r.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, PLAIN);
    }

    #[test]
    fn options_and_fragment() {
        // IHL 6 with a router-alert option; MF set, offset 185 (1480 bytes).
        let mut h = [
            0x46, 0x00, 0x00, 0x1c, 0x12, 0x34, 0x20, 0xb9, 0x40, 0x06, 0x00, 0x00, 192, 0, 2, 1,
            192, 0, 2, 2, 0x94, 0x04, 0x00, 0x00, 0xaa, 0xbb, 0xcc, 0xdd,
        ];
        Ipv4Packet::new_unchecked(&mut h[..]).fill_checksum();
        let p = Ipv4Packet::new_checked(&h[..]).unwrap();
        assert!(p.verify_checksum());
        assert!(p.more_frags() && !p.dont_frag() && p.is_fragment());
        assert_eq!(p.frag_offset(), 185);
        let opts: Vec<_> = p.options_iter().collect();
        assert_eq!(
            opts,
            [Ok(Ipv4Option {
                kind: option::ROUTER_ALERT,
                data: &[0, 0]
            })]
        );
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(r.options.as_slice(), &[0x94, 0x04, 0, 0]);
        assert_eq!(r.buffer_len(), 24);
        let mut out = h;
        out[..24].fill(0xff);
        r.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, h);
    }

    #[test]
    fn errors() {
        assert_eq!(
            Ipv4Packet::new_checked(&PLAIN[..19]).unwrap_err(),
            Error::Truncated
        );
        let mut b = PLAIN;
        b[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            Error::BadVersion
        );
        b[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            Error::BadHeaderLength
        );
        b[0] = 0x48; // 32-byte header, 29-byte buffer
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            Error::Truncated
        );
        let mut b = PLAIN;
        b[3] = 19;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            Error::BadLength
        );
        b[3] = 30;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]).unwrap_err(),
            Error::Truncated
        );
        let mut b = PLAIN;
        b[6] = 0x80;
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p), Err(Error::Malformed));
        assert!(!p.verify_checksum());
    }

    #[test]
    fn bad_options() {
        let mut h = [0u8; 24];
        h[0] = 0x46;
        h[3] = 24;
        h[20] = 0x94;
        h[21] = 0x09; // runs past the option area
        let p = Ipv4Packet::new_checked(&h[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p), Err(Error::BadOption));
        h[21] = 0x01; // below the minimum of 2
        let p = Ipv4Packet::new_checked(&h[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p), Err(Error::BadOption));
    }

    #[test]
    fn decrement_ttl_keeps_checksum_valid() {
        let mut b = PLAIN;
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        assert_eq!(p.decrement_ttl(), 63);
        assert!(p.verify_checksum());
    }
}
