//! ICMPv6 (RFC 4443) and the Neighbor Discovery messages a switch looks into (RFC 4861):
//! Neighbor Solicitation and Advertisement with the Source/Target Link-Layer Address options.
//!
//! The checksum covers the IPv6 pseudo-header (RFC 8200 §8.1) with next header 58.

use crate::ethernet::EthernetAddress;
use crate::{Error, IpProtocol, Ipv6Addr, Result, checksum, get_u16, set_u16};

mod field {
    use crate::Field;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const REST: Field = 4..8;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQNO: Field = 6..8;
    pub const NA_FLAGS: usize = 4;
    pub const BODY: usize = 8;
    pub const TARGET: core::ops::Range<usize> = 8..24;
    pub const ND_OPTIONS: usize = 24;
}

/// Length of the ICMPv6 header (type, code, checksum, 4 bytes of rest).
pub const HEADER_LEN: usize = field::BODY;
/// Length of an NS/NA message without options.
pub const ND_HEADER_LEN: usize = field::ND_OPTIONS;

const NA_ROUTER: u8 = 0x80;
const NA_SOLICITED: u8 = 0x40;
const NA_OVERRIDE: u8 = 0x20;

/// Message types this module gives a meaning to.
pub mod msg_type {
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Neighbor solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;
}

/// Neighbor Discovery option types (RFC 4861 §4.6).
pub mod nd_option {
    /// Source link-layer address.
    pub const SOURCE_LLADDR: u8 = 1;
    /// Target link-layer address.
    pub const TARGET_LLADDR: u8 = 2;
}

/// One Neighbor Discovery option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdOption<'a> {
    /// Option type.
    pub option_type: u8,
    /// Option data after type and length (length × 8 − 2 bytes).
    pub data: &'a [u8],
}

impl NdOption<'_> {
    /// The link-layer address of an SLL/TLL option on Ethernet (6 data bytes), else `None`.
    #[inline]
    pub fn lladdr(&self) -> Option<EthernetAddress> {
        match self.option_type {
            nd_option::SOURCE_LLADDR | nd_option::TARGET_LLADDR => {
                EthernetAddress::from_bytes(self.data)
            }
            _ => None,
        }
    }
}

/// Iterates ND options; yields one `Err(BadOption)` and stops on a zero length (RFC 4861 §4.6
/// says to discard such packets) or an option running past the buffer.
#[derive(Debug, Clone)]
pub struct NdOptionIter<'a> {
    data: &'a [u8],
}

impl<'a> NdOptionIter<'a> {
    /// Iterates over option bytes.
    pub const fn new(data: &'a [u8]) -> Self {
        NdOptionIter { data }
    }
}

impl<'a> Iterator for NdOptionIter<'a> {
    type Item = Result<NdOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&option_type, rest) = self.data.split_first()?;
        let len = rest.first().map_or(0, |&l| usize::from(l) * 8);
        if len == 0 || len > self.data.len() {
            self.data = &[];
            return Some(Err(Error::BadOption));
        }
        let data = &self.data[2..len];
        self.data = &self.data[len..];
        Some(Ok(NdOption { option_type, data }))
    }
}

/// A view of an ICMPv6 message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }

    /// Wraps a buffer after `check_len`.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Err(Truncated)` if the buffer is shorter than the header, or, for NS/NA, than the
    /// 24 bytes that hold the target address.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || (self.is_ns_or_na() && len < ND_HEADER_LEN) {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    #[inline]
    fn is_ns_or_na(&self) -> bool {
        matches!(
            self.msg_type(),
            msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT
        )
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

    /// The four bytes after the checksum.
    #[inline]
    pub fn rest_of_header(&self) -> [u8; 4] {
        let b = &self.buffer.as_ref()[field::REST];
        [b[0], b[1], b[2], b[3]]
    }

    /// Echo identifier.
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Echo sequence number.
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }

    /// NA router flag.
    #[inline]
    pub fn router_flag(&self) -> bool {
        self.buffer.as_ref()[field::NA_FLAGS] & NA_ROUTER != 0
    }

    /// NA solicited flag.
    #[inline]
    pub fn solicited_flag(&self) -> bool {
        self.buffer.as_ref()[field::NA_FLAGS] & NA_SOLICITED != 0
    }

    /// NA override flag.
    #[inline]
    pub fn override_flag(&self) -> bool {
        self.buffer.as_ref()[field::NA_FLAGS] & NA_OVERRIDE != 0
    }

    /// The NS/NA target address; `None` if the buffer does not reach it (any other type).
    #[inline]
    pub fn target_addr(&self) -> Option<Ipv6Addr> {
        let b: [u8; 16] = self.buffer.as_ref().get(field::TARGET)?.try_into().ok()?;
        Some(Ipv6Addr::from(b))
    }

    /// The ND option bytes after the target (empty if the buffer is shorter).
    #[inline]
    pub fn nd_options(&self) -> &[u8] {
        self.buffer.as_ref().get(field::ND_OPTIONS..).unwrap_or(&[])
    }

    /// Iterates the ND options of an NS/NA.
    #[inline]
    pub fn nd_options_iter(&self) -> NdOptionIter<'_> {
        NdOptionIter::new(self.nd_options())
    }

    /// True if the checksum over the pseudo-header and the whole buffer is correct.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, b.len() as u32);
        checksum::combine(&[ph, checksum::data(b)]) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Icmpv6Packet<&'a T> {
    /// The body after the 8-byte header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::BODY..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
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

    /// Sets the four bytes after the checksum.
    #[inline]
    pub fn set_rest_of_header(&mut self, value: [u8; 4]) {
        self.buffer.as_mut()[field::REST].copy_from_slice(&value);
    }

    /// Sets the NS/NA target address.
    ///
    /// # Panics
    /// If the buffer is shorter than 24 bytes.
    #[inline]
    pub fn set_target_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::TARGET].copy_from_slice(&value.octets());
    }

    /// The body, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::BODY..]
    }

    /// Computes and stores the checksum (buffer = the whole ICMPv6 message).
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, b.len() as u32);
        let c = !checksum::combine(&[ph, checksum::data(b)]);
        self.set_checksum(c);
    }
}

/// The meaning of an ICMPv6 message header.
///
/// NS/NA carry their target and the first SLL/TLL option for Ethernet; other ND options are
/// ignored on parse, as RFC 4861 §4.6 asks, and `emit` writes only the link-layer option.
/// Echo and `Other` cover the 8-byte header; their body is the caller's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv6Repr {
    /// Echo request (type 128, code 0).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
    },
    /// Echo reply (type 129, code 0).
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
    },
    /// Neighbor solicitation (type 135, code 0).
    NeighborSolicit {
        /// Target address.
        target_addr: Ipv6Addr,
        /// Source link-layer address option.
        source_lladdr: Option<EthernetAddress>,
    },
    /// Neighbor advertisement (type 136, code 0).
    NeighborAdvert {
        /// Router flag.
        router: bool,
        /// Solicited flag.
        solicited: bool,
        /// Override flag.
        override_: bool,
        /// Target address.
        target_addr: Ipv6Addr,
        /// Target link-layer address option.
        target_lladdr: Option<EthernetAddress>,
    },
    /// Any other header (also NS/NA with a non-zero code or reserved field).
    Other {
        /// Message type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// The four bytes after the checksum.
        rest: [u8; 4],
    },
}

impl Icmpv6Repr {
    /// Reads a checked message (the checksum is not verified); `Err(BadOption)` if an ND option
    /// of an NS/NA is malformed.
    pub fn parse<T: AsRef<[u8]>>(packet: &Icmpv6Packet<T>) -> Result<Icmpv6Repr> {
        packet.check_len()?;
        let (t, code, rest) = (
            packet.msg_type(),
            packet.msg_code(),
            packet.rest_of_header(),
        );
        let lladdr = |kind: u8| -> Result<Option<EthernetAddress>> {
            let mut found = None;
            for opt in packet.nd_options_iter() {
                let opt = opt?;
                if opt.option_type == kind && found.is_none() {
                    found = opt.lladdr();
                }
            }
            Ok(found)
        };
        let target = packet.target_addr();
        Ok(match (t, code, target) {
            (msg_type::ECHO_REQUEST, 0, _) => Icmpv6Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
            },
            (msg_type::ECHO_REPLY, 0, _) => Icmpv6Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
            },
            (msg_type::NEIGHBOR_SOLICIT, 0, Some(target_addr)) if rest == [0; 4] => {
                Icmpv6Repr::NeighborSolicit {
                    target_addr,
                    source_lladdr: lladdr(nd_option::SOURCE_LLADDR)?,
                }
            }
            (msg_type::NEIGHBOR_ADVERT, 0, Some(target_addr))
                if rest[0] & 0x1f == 0 && rest[1..] == [0; 3] =>
            {
                Icmpv6Repr::NeighborAdvert {
                    router: packet.router_flag(),
                    solicited: packet.solicited_flag(),
                    override_: packet.override_flag(),
                    target_addr,
                    target_lladdr: lladdr(nd_option::TARGET_LLADDR)?,
                }
            }
            _ => Icmpv6Repr::Other {
                msg_type: t,
                code,
                rest,
            },
        })
    }

    /// Bytes `emit` writes: 8 for echo and `Other`, 24 for NS/NA plus 8 with a link-layer
    /// address option.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::NeighborSolicit {
                source_lladdr: l, ..
            }
            | Icmpv6Repr::NeighborAdvert {
                target_lladdr: l, ..
            } => ND_HEADER_LEN + if l.is_some() { 8 } else { 0 },
            _ => HEADER_LEN,
        }
    }

    /// Writes the message header (and NS/NA target and option) with a zero checksum; call
    /// `fill_checksum` once everything is in place.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv6Packet<T>) {
        let echo = |ident: u16, seq: u16| {
            let [a, b] = ident.to_be_bytes();
            let [c, d] = seq.to_be_bytes();
            [a, b, c, d]
        };
        let (t, code, rest, nd) = match *self {
            Icmpv6Repr::EchoRequest { ident, seq_no } => {
                (msg_type::ECHO_REQUEST, 0, echo(ident, seq_no), None)
            }
            Icmpv6Repr::EchoReply { ident, seq_no } => {
                (msg_type::ECHO_REPLY, 0, echo(ident, seq_no), None)
            }
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                source_lladdr,
            } => (
                msg_type::NEIGHBOR_SOLICIT,
                0,
                [0; 4],
                Some((target_addr, nd_option::SOURCE_LLADDR, source_lladdr)),
            ),
            Icmpv6Repr::NeighborAdvert {
                router,
                solicited,
                override_,
                target_addr,
                target_lladdr,
            } => {
                let flags = if router { NA_ROUTER } else { 0 }
                    | if solicited { NA_SOLICITED } else { 0 }
                    | if override_ { NA_OVERRIDE } else { 0 };
                (
                    msg_type::NEIGHBOR_ADVERT,
                    0,
                    [flags, 0, 0, 0],
                    Some((target_addr, nd_option::TARGET_LLADDR, target_lladdr)),
                )
            }
            Icmpv6Repr::Other {
                msg_type,
                code,
                rest,
            } => (msg_type, code, rest, None),
        };
        packet.set_msg_type(t);
        packet.set_msg_code(code);
        packet.set_checksum(0);
        packet.set_rest_of_header(rest);
        if let Some((target, kind, lladdr)) = nd {
            packet.set_target_addr(target);
            if let Some(mac) = lladdr {
                let o = &mut packet.buffer.as_mut()[field::ND_OPTIONS..field::ND_OPTIONS + 8];
                o[0] = kind;
                o[1] = 1;
                o[2..].copy_from_slice(&mac.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns() -> Vec<u8> {
        let mut b = vec![135, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&"fe80::1".parse::<Ipv6Addr>().unwrap().octets());
        b.extend_from_slice(&[1, 1, 0x52, 0x54, 0x00, 0x00, 0x00, 0x02]);
        b
    }

    #[test]
    fn neighbor_solicit() {
        let src: Ipv6Addr = "fe80::2".parse().unwrap();
        let dst: Ipv6Addr = "ff02::1:ff00:1".parse().unwrap();
        let mut b = ns();
        Icmpv6Packet::new_unchecked(&mut b[..]).fill_checksum(&src, &dst);
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum(&src, &dst));
        assert!(!p.verify_checksum(&dst, &dst));
        let r = Icmpv6Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Icmpv6Repr::NeighborSolicit {
                target_addr: "fe80::1".parse().unwrap(),
                source_lladdr: Some(EthernetAddress([0x52, 0x54, 0, 0, 0, 2])),
            }
        );
        assert_eq!(r.buffer_len(), 32);
        let mut out = vec![0xffu8; 32];
        let mut q = Icmpv6Packet::new_unchecked(&mut out[..]);
        r.emit(&mut q);
        q.fill_checksum(&src, &dst);
        assert_eq!(out, b);
    }

    #[test]
    fn neighbor_advert_flags() {
        let mut b = ns();
        b[0] = 136;
        b[4] = 0xe0;
        b[24] = 2;
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        let Icmpv6Repr::NeighborAdvert {
            router,
            solicited,
            override_,
            target_lladdr,
            ..
        } = Icmpv6Repr::parse(&p).unwrap()
        else {
            panic!("not an NA")
        };
        assert!(router && solicited && override_);
        assert_eq!(
            target_lladdr,
            Some(EthernetAddress([0x52, 0x54, 0, 0, 0, 2]))
        );
    }

    #[test]
    fn malformed() {
        let b = ns();
        assert_eq!(
            Icmpv6Packet::new_checked(&b[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Icmpv6Packet::new_checked(&b[..23]).unwrap_err(),
            Error::Truncated
        );
        let mut z = b.clone();
        z[25] = 0; // zero-length option
        let p = Icmpv6Packet::new_checked(&z[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(Error::BadOption));
        let mut z = b.clone();
        z[25] = 2; // runs past the buffer
        let p = Icmpv6Packet::new_checked(&z[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(Error::BadOption));
        // An 8-byte echo has no target.
        let e = [128, 0, 0, 0, 0, 1, 0, 2];
        let p = Icmpv6Packet::new_checked(&e[..]).unwrap();
        assert_eq!(p.target_addr(), None);
        assert!(p.nd_options().is_empty());
        assert_eq!(
            Icmpv6Repr::parse(&p).unwrap(),
            Icmpv6Repr::EchoRequest {
                ident: 1,
                seq_no: 2
            }
        );
    }
}
