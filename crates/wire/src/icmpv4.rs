//! ICMP for IPv4 (RFC 792), with the Path MTU field of "fragmentation needed" (RFC 1191).
//!
//! The view covers the 8-byte header (type, code, checksum, rest of header); the rest is the
//! message body (echo data, or the offending datagram's header for errors). The checksum covers
//! header and body, so it is filled after the body is in place.

use crate::{Error, Result, checksum, get_u16, set_u16};

mod field {
    use crate::Field;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const REST: Field = 4..8;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQNO: Field = 6..8;
    pub const UNUSED: Field = 4..6;
    pub const MTU: Field = 6..8;
    pub const BODY: usize = 8;
}

/// Length of the ICMP header.
pub const HEADER_LEN: usize = field::BODY;

/// Message types this module gives a meaning to.
pub mod msg_type {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 3;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
}

/// A view of an ICMPv4 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv4Packet { buffer }
    }

    /// Wraps a buffer after checking that it holds the 8-byte header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
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

    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Code.
    #[inline]
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The four rest-of-header bytes, whose meaning depends on the type.
    #[inline]
    pub fn rest_of_header(&self) -> [u8; 4] {
        let b = &self.buffer.as_ref()[field::REST];
        [b[0], b[1], b[2], b[3]]
    }

    /// Echo identifier (echo request/reply).
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Echo sequence number (echo request/reply).
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }

    /// Next-hop MTU (destination unreachable, code 4; RFC 1191).
    #[inline]
    pub fn next_hop_mtu(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::MTU)
    }

    /// True if the checksum over the whole buffer (header and body) is correct.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Icmpv4Packet<&'a T> {
    /// The body after the 8-byte header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::BODY..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Sets the message type.
    #[inline]
    pub fn set_msg_type(&mut self, value: u8) {
        self.buffer.as_mut()[field::TYPE] = value;
    }

    /// Sets the code.
    #[inline]
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Sets the stored checksum.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the four rest-of-header bytes.
    #[inline]
    pub fn set_rest_of_header(&mut self, value: [u8; 4]) {
        self.buffer.as_mut()[field::REST].copy_from_slice(&value);
    }

    /// Sets the echo identifier.
    #[inline]
    pub fn set_echo_ident(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::ECHO_IDENT, value);
    }

    /// Sets the echo sequence number.
    #[inline]
    pub fn set_echo_seq_no(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::ECHO_SEQNO, value);
    }

    /// Sets the next-hop MTU.
    #[inline]
    pub fn set_next_hop_mtu(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::MTU, value);
    }

    /// The body, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::BODY..]
    }

    /// Computes and stores the checksum over the whole buffer.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = !checksum::data(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// The meaning of an ICMPv4 header. Messages whose unused bytes are not zero, or whose code is
/// not defined for their type, parse as `Other`, so that `emit` reproduces any header exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4Repr {
    /// Echo request (type 8, code 0).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
    },
    /// Echo reply (type 0, code 0).
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
    },
    /// Destination unreachable (type 3); `next_hop_mtu` is meaningful for code 4.
    DstUnreachable {
        /// Code (0 net, 1 host, 3 port, 4 fragmentation needed, …).
        code: u8,
        /// Next-hop MTU.
        next_hop_mtu: u16,
    },
    /// Time exceeded (type 11).
    TimeExceeded {
        /// Code (0 TTL in transit, 1 reassembly).
        code: u8,
    },
    /// Any other header.
    Other {
        /// Message type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// Rest of header.
        rest: [u8; 4],
    },
}

impl Icmpv4Repr {
    /// Reads a checked header (the checksum is not verified).
    pub fn parse<T: AsRef<[u8]>>(packet: &Icmpv4Packet<T>) -> Result<Icmpv4Repr> {
        packet.check_len()?;
        let (t, code, rest) = (
            packet.msg_type(),
            packet.msg_code(),
            packet.rest_of_header(),
        );
        let unused_zero = packet.buffer.as_ref()[field::UNUSED] == [0, 0];
        Ok(match (t, code) {
            (msg_type::ECHO_REQUEST, 0) => Icmpv4Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
            },
            (msg_type::ECHO_REPLY, 0) => Icmpv4Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
            },
            (msg_type::DST_UNREACHABLE, 0..=15) if unused_zero => Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu: packet.next_hop_mtu(),
            },
            (msg_type::TIME_EXCEEDED, 0..=1) if rest == [0; 4] => Icmpv4Repr::TimeExceeded { code },
            _ => Icmpv4Repr::Other {
                msg_type: t,
                code,
                rest,
            },
        })
    }

    /// Bytes `emit` writes (8).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with a zero checksum; call `fill_checksum` once the body is in place.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv4Packet<T>) {
        let (t, code, rest) = match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no } => {
                let [a, b] = ident.to_be_bytes();
                let [c, d] = seq_no.to_be_bytes();
                (msg_type::ECHO_REQUEST, 0, [a, b, c, d])
            }
            Icmpv4Repr::EchoReply { ident, seq_no } => {
                let [a, b] = ident.to_be_bytes();
                let [c, d] = seq_no.to_be_bytes();
                (msg_type::ECHO_REPLY, 0, [a, b, c, d])
            }
            Icmpv4Repr::DstUnreachable { code, next_hop_mtu } => {
                let [c, d] = next_hop_mtu.to_be_bytes();
                (msg_type::DST_UNREACHABLE, code, [0, 0, c, d])
            }
            Icmpv4Repr::TimeExceeded { code } => (msg_type::TIME_EXCEEDED, code, [0; 4]),
            Icmpv4Repr::Other {
                msg_type,
                code,
                rest,
            } => (msg_type, code, rest),
        };
        packet.set_msg_type(t);
        packet.set_msg_code(code);
        packet.set_checksum(0);
        packet.set_rest_of_header(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Echo request id 0x1234 seq 1 with "abcd"; checksum computed by hand below.
    const ECHO: [u8; 12] = [
        8, 0, 0x00, 0x00, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd',
    ];

    #[test]
    fn echo_round_trip_and_checksum() {
        let mut b = ECHO;
        Icmpv4Packet::new_unchecked(&mut b[..]).fill_checksum();
        // 0x0800 + 0x1234 + 0x0001 + 0x6162 + 0x6364 = 0xdefb -> checksum 0x2104.
        assert_eq!(&b[2..4], &[0x21, 0x04]);
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        let r = Icmpv4Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Icmpv4Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1
            }
        );
        assert_eq!(p.payload(), b"abcd");
        let mut out = b;
        out[..8].fill(0);
        let mut q = Icmpv4Packet::new_unchecked(&mut out[..]);
        r.emit(&mut q);
        q.fill_checksum();
        assert_eq!(out, b);
    }

    #[test]
    fn unreachable_and_fallback() {
        let b = [3, 4, 0, 0, 0, 0, 0x05, 0xdc];
        let r = Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            Icmpv4Repr::DstUnreachable {
                code: 4,
                next_hop_mtu: 1500
            }
        );
        // Non-zero unused bytes: kept verbatim as Other.
        let b = [3, 4, 0, 0, 0, 1, 0x05, 0xdc];
        let r = Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            Icmpv4Repr::Other {
                msg_type: 3,
                code: 4,
                rest: [0, 1, 5, 0xdc]
            }
        );
        let mut out = [0xffu8; 8];
        r.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
        let b = [11, 0, 0, 0, 0, 0, 0, 0];
        let r = Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r, Icmpv4Repr::TimeExceeded { code: 0 });
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Icmpv4Packet::new_checked(&ECHO[..7]).unwrap_err(),
            Error::Truncated
        );
    }
}
