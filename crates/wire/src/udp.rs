//! UDP (RFC 768), with the checksum over the IPv4 or IPv6 pseudo-header (RFC 8200 §8.1).
//!
//! Over IPv4 a zero checksum means "not computed" and a computed zero is sent as `0xffff`;
//! over IPv6 the checksum is mandatory (RFC 8200 §8.1; RFC 6935 tunnel exemptions aside).

use crate::{Error, IpProtocol, Ipv4Addr, Ipv6Addr, Result, checksum, get_u16, set_u16};

mod field {
    use crate::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
    pub const PAYLOAD: usize = 8;
}

/// Length of a UDP header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view of a UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps a buffer after `check_len`.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks: header fits (`Truncated`), length field at least 8 (`BadLength`), length field
    /// within the buffer (`Truncated`).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let ulen = usize::from(self.len());
        if ulen < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if len < ulen {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length field (header and payload).
    #[inline]
    pub fn len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// True if the length field says there is no payload.
    #[inline]
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    /// Checksum as stored (0: none, over IPv4).
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    fn sum(&self) -> u16 {
        checksum::data(&self.buffer.as_ref()[..usize::from(self.len())])
    }

    /// True if the checksum is absent (zero) or correct for the IPv4 pseudo-header.
    pub fn verify_checksum_v4(&self, src: &Ipv4Addr, dst: &Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let ph = checksum::pseudo_header_v4(src, dst, IpProtocol::UDP, self.len());
        checksum::combine(&[ph, self.sum()]) == 0xffff
    }

    /// True if the checksum is correct for the IPv6 pseudo-header (zero is invalid).
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::UDP, u32::from(self.len()));
        checksum::combine(&[ph, self.sum()]) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> UdpPacket<&'a T> {
    /// The payload, up to the length field.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..usize::from(self.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, value);
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, value);
    }

    /// Sets the length field.
    #[inline]
    pub fn set_len(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Sets the stored checksum.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// The payload, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[field::PAYLOAD..end]
    }

    fn fill(&mut self, pseudo: u16) {
        self.set_checksum(0);
        let c = !checksum::combine(&[pseudo, self.sum()]);
        // A computed zero is sent as all ones: zero on the wire means "no checksum".
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    /// Computes and stores the checksum with the IPv4 pseudo-header.
    pub fn fill_checksum_v4(&mut self, src: &Ipv4Addr, dst: &Ipv4Addr) {
        let len = self.len();
        self.fill(checksum::pseudo_header_v4(src, dst, IpProtocol::UDP, len));
    }

    /// Computes and stores the checksum with the IPv6 pseudo-header.
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let len = u32::from(self.len());
        self.fill(checksum::pseudo_header_v6(src, dst, IpProtocol::UDP, len));
    }
}

/// The meaning of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length (length field minus 8).
    pub payload_len: usize,
}

impl UdpRepr {
    /// Reads a checked datagram (the checksum is not verified).
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> Result<UdpRepr> {
        packet.check_len()?;
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// Bytes `emit` writes (8).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with checksum 0 ("none" over IPv4); call `fill_checksum_v4/v6` once
    /// the payload is in place to compute one.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut UdpPacket<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The seed `plain` datagram: 1024 -> 2000, 10.0.0.1 -> 10.1.0.2, checksum 0xe00a.
    const PLAIN: [u8; 8] = [0x04, 0x00, 0x07, 0xd0, 0x00, 0x08, 0xe0, 0x0a];
    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);

    #[test]
    fn seed_datagram() {
        let p = UdpPacket::new_checked(&PLAIN[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (1024, 2000, 8));
        assert!(p.verify_checksum_v4(&SRC, &DST));
        assert!(!p.verify_checksum_v4(&SRC, &Ipv4Addr::new(10, 1, 0, 3)));
        let r = UdpRepr::parse(&p).unwrap();
        let mut out = [0u8; 8];
        let mut q = UdpPacket::new_unchecked(&mut out[..]);
        r.emit(&mut q);
        assert_eq!(q.checksum(), 0);
        assert!(
            q.verify_checksum_v4(&DST, &SRC),
            "zero means no checksum over IPv4"
        );
        assert!(!q.verify_checksum_v6(&Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST));
        q.fill_checksum_v4(&SRC, &DST);
        assert_eq!(out, PLAIN);
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Choose a payload word that makes the sum 0xffff, so the checksum computes to zero.
        let mut d = [0x04, 0x00, 0x07, 0xd0, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x00];
        let ph = checksum::pseudo_header_v4(&SRC, &DST, IpProtocol::UDP, 10);
        let partial = checksum::combine(&[ph, checksum::data(&d)]);
        d[8..10].copy_from_slice(&(!partial).to_be_bytes());
        let mut p = UdpPacket::new_unchecked(&mut d[..]);
        p.fill_checksum_v4(&SRC, &DST);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum_v4(&SRC, &DST));
    }

    #[test]
    fn lengths() {
        assert_eq!(
            UdpPacket::new_checked(&PLAIN[..7]).unwrap_err(),
            Error::Truncated
        );
        let mut b = PLAIN;
        b[5] = 7;
        assert_eq!(
            UdpPacket::new_checked(&b[..]).unwrap_err(),
            Error::BadLength
        );
        b[5] = 9;
        assert_eq!(
            UdpPacket::new_checked(&b[..]).unwrap_err(),
            Error::Truncated
        );
        // Trailing bytes beyond the length field are not payload.
        let b = [0, 1, 0, 2, 0, 9, 0, 0, 0xaa, 0xbb];
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload(), &[0xaa]);
        assert!(!p.is_empty());
    }
}
