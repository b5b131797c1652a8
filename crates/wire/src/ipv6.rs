//! IPv6 (RFC 8200) and its extension headers: hop-by-hop options (§4.3), routing (§4.4),
//! fragment (§4.5) and destination options (§4.6).
//!
//! Hop-by-hop, routing and destination options share one layout (next header, length in 8-octet
//! units not counting the first 8, data), viewed by [`Ipv6ExtHeader`]; the fragment header has a
//! fixed 8-byte layout, viewed by [`Ipv6FragmentHeader`]. [`walk_ext_headers`] follows the chain
//! to the upper-layer protocol, which is what flow extraction needs.

use crate::{Error, IpProtocol, Ipv6Addr, Result, get_ipv6, get_u16, get_u32, set_u16, set_u32};

mod field {
    use crate::Field;
    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
    pub const PAYLOAD: usize = 40;
}

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = field::PAYLOAD;

/// A view of an IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps a buffer after `check_len`.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks: fixed header fits (`Truncated`), version is 6 (`BadVersion`), payload length
    /// within the buffer (`Truncated`). Jumbograms (payload length 0 with a jumbo option) are
    /// seen as empty.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::BadVersion);
        }
        if len < HEADER_LEN + usize::from(self.payload_len()) {
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
    fn ver_tc_flow(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }

    /// Version (6 on a checked view).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class (DSCP in the high 6 bits, ECN in the low 2).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    /// Flow label, 20 bits.
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & 0x000f_ffff
    }

    /// Payload length (everything after the fixed header, extension headers included).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Next header: the first extension header or the upper-layer protocol.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        get_ipv6(self.buffer.as_ref(), field::SRC_ADDR)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        get_ipv6(self.buffer.as_ref(), field::DST_ADDR)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6Packet<&'a T> {
    /// The payload (extension headers and upper layer), up to the payload length.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD..HEADER_LEN + usize::from(self.payload_len())]
    }

    /// Walks the extension headers of the payload; see [`walk_ext_headers`].
    #[inline]
    pub fn ext_chain(&self) -> Result<Ipv6ExtChain> {
        walk_ext_headers(self.next_header(), self.payload())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    #[inline]
    fn set_ver_tc_flow(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::VER_TC_FLOW, v);
    }

    /// Sets the version (low 4 bits).
    #[inline]
    pub fn set_version(&mut self, value: u8) {
        let v = (self.ver_tc_flow() & 0x0fff_ffff) | (u32::from(value & 0x0f) << 28);
        self.set_ver_tc_flow(v);
    }

    /// Sets the traffic class.
    #[inline]
    pub fn set_traffic_class(&mut self, value: u8) {
        let v = (self.ver_tc_flow() & 0xf00f_ffff) | (u32::from(value) << 20);
        self.set_ver_tc_flow(v);
    }

    /// Sets the flow label (low 20 bits).
    #[inline]
    pub fn set_flow_label(&mut self, value: u32) {
        let v = (self.ver_tc_flow() & 0xfff0_0000) | (value & 0x000f_ffff);
        self.set_ver_tc_flow(v);
    }

    /// Sets the payload length.
    #[inline]
    pub fn set_payload_len(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Sets the next header.
    #[inline]
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = value.0;
    }

    /// Sets the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// The payload, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[field::PAYLOAD..end]
    }
}

/// The meaning of an IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header.
    pub next_header: IpProtocol,
    /// Payload length (extension headers included).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label, 0..=0xfffff.
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Reads a checked packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// Bytes `emit` writes (40).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header (payload length truncated to 16 bits).
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        packet.set_ver_tc_flow(
            (6 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0x000f_ffff),
        );
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

mod ext_field {
    pub const NXT_HDR: usize = 0;
    pub const LENGTH: usize = 1;
    pub const DATA: usize = 2;
    pub const ROUTING_TYPE: usize = 2;
    pub const SEG_LEFT: usize = 3;
}

/// A view of a hop-by-hop options, routing, or destination options header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6ExtHeader<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6ExtHeader { buffer }
    }

    /// Wraps a buffer after checking that the whole header, as its length field says, fits.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// `Err(Truncated)` if the buffer is shorter than the header.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < 2 || len < self.header_len() {
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

    /// Next header.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[ext_field::NXT_HDR])
    }

    /// Header length in bytes: (Hdr Ext Len + 1) × 8.
    #[inline]
    pub fn header_len(&self) -> usize {
        (usize::from(self.buffer.as_ref()[ext_field::LENGTH]) + 1) * 8
    }

    /// The bytes after next header and length (options, or the routing header body).
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[ext_field::DATA..self.header_len()]
    }

    /// Routing type (meaningful for a routing header only).
    #[inline]
    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[ext_field::ROUTING_TYPE]
    }

    /// Segments left (meaningful for a routing header only).
    #[inline]
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[ext_field::SEG_LEFT]
    }

    /// Iterates the TLV options (meaningful for hop-by-hop and destination options).
    #[inline]
    pub fn options_iter(&self) -> Ipv6OptionIter<'_> {
        Ipv6OptionIter::new(self.data())
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6ExtHeader<&'a T> {
    /// Everything after this header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6ExtHeader<T> {
    /// Sets the next header.
    #[inline]
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[ext_field::NXT_HDR] = value.0;
    }

    /// Sets the header length in bytes (a multiple of 8, 8..=2048).
    #[inline]
    pub fn set_header_len(&mut self, value: usize) {
        self.buffer.as_mut()[ext_field::LENGTH] = (value / 8).saturating_sub(1) as u8;
    }

    /// Sets the segments left (routing header only).
    #[inline]
    pub fn set_segments_left(&mut self, value: u8) {
        self.buffer.as_mut()[ext_field::SEG_LEFT] = value;
    }

    /// The data bytes, mutable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[ext_field::DATA..end]
    }
}

/// The meaning of a hop-by-hop, routing or destination options header: its next header and the
/// bytes after the length field (options, or routing type, segments left and routing data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6ExtHeaderRepr<'a> {
    /// Next header.
    pub next_header: IpProtocol,
    /// Data after next header and length; `emit` zero-pads it (Pad1 options) so that the header
    /// is a multiple of 8 bytes. At most 2046 bytes.
    pub data: &'a [u8],
}

impl<'a> Ipv6ExtHeaderRepr<'a> {
    /// Reads a checked header, borrowing its data.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(header: &Ipv6ExtHeader<&'a T>) -> Result<Self> {
        header.check_len()?;
        let data = &header.buffer.as_ref()[ext_field::DATA..header.header_len()];
        Ok(Ipv6ExtHeaderRepr {
            next_header: header.next_header(),
            data,
        })
    }

    /// Bytes `emit` writes: 2 + data, rounded up to a multiple of 8.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        (ext_field::DATA + self.data.len()).next_multiple_of(8)
    }

    /// Writes the header.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut Ipv6ExtHeader<T>) {
        let len = self.buffer_len();
        header.set_next_header(self.next_header);
        header.set_header_len(len);
        let b = &mut header.buffer.as_mut()[ext_field::DATA..len];
        b[..self.data.len()].copy_from_slice(self.data);
        b[self.data.len()..].fill(0);
    }
}

/// Option types of hop-by-hop and destination options (RFC 8200 §4.2).
pub mod option {
    /// One byte of padding.
    pub const PAD1: u8 = 0;
    /// N bytes of padding.
    pub const PADN: u8 = 1;
    /// Router alert (RFC 2711).
    pub const ROUTER_ALERT: u8 = 5;
    /// Jumbo payload (RFC 2675).
    pub const JUMBO: u8 = 0xc2;
}

/// One hop-by-hop or destination option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Option<'a> {
    /// Option type (the top two bits say what to do if unrecognised).
    pub option_type: u8,
    /// Option data (empty for Pad1).
    pub data: &'a [u8],
}

/// Iterates hop-by-hop or destination options; yields one `Err(BadOption)` and stops if an
/// option runs past the data.
#[derive(Debug, Clone)]
pub struct Ipv6OptionIter<'a> {
    data: &'a [u8],
}

impl<'a> Ipv6OptionIter<'a> {
    /// Iterates over option bytes.
    pub const fn new(data: &'a [u8]) -> Self {
        Ipv6OptionIter { data }
    }
}

impl<'a> Iterator for Ipv6OptionIter<'a> {
    type Item = Result<Ipv6Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&option_type, rest) = self.data.split_first()?;
        if option_type == option::PAD1 {
            self.data = rest;
            return Some(Ok(Ipv6Option {
                option_type,
                data: &[],
            }));
        }
        // Unlike IPv4/TCP, the length counts only the data bytes.
        let Some((&len, rest)) = rest.split_first() else {
            self.data = &[];
            return Some(Err(Error::BadOption));
        };
        match rest.split_at_checked(usize::from(len)) {
            Some((data, next)) => {
                self.data = next;
                Some(Ok(Ipv6Option { option_type, data }))
            }
            None => {
                self.data = &[];
                Some(Err(Error::BadOption))
            }
        }
    }
}

mod frag_field {
    use crate::Field;
    pub const NXT_HDR: usize = 0;
    pub const RESERVED: usize = 1;
    pub const OFF_M: Field = 2..4;
    pub const IDENT: Field = 4..8;
    pub const PAYLOAD: usize = 8;
}

/// Length of the fragment header.
pub const FRAGMENT_HEADER_LEN: usize = frag_field::PAYLOAD;

/// A view of an IPv6 fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6FragmentHeader<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6FragmentHeader { buffer }
    }

    /// Wraps a buffer after checking that it holds the 8-byte header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// `Err(Truncated)` if the buffer is shorter than 8 bytes.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < FRAGMENT_HEADER_LEN {
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

    /// Next header (of the fragmentable part).
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[frag_field::NXT_HDR])
    }

    /// Fragment offset in 8-octet units.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        get_u16(self.buffer.as_ref(), frag_field::OFF_M) >> 3
    }

    /// More fragments.
    #[inline]
    pub fn more_frags(&self) -> bool {
        get_u16(self.buffer.as_ref(), frag_field::OFF_M) & 1 != 0
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u32 {
        get_u32(self.buffer.as_ref(), frag_field::IDENT)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6FragmentHeader<&'a T> {
    /// Everything after the fragment header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[frag_field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6FragmentHeader<T> {
    /// Sets the next header.
    #[inline]
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[frag_field::NXT_HDR] = value.0;
    }

    /// Sets the fragment offset in 8-octet units (low 13 bits); clears the reserved bits.
    #[inline]
    pub fn set_frag_offset(&mut self, value: u16) {
        let m = get_u16(self.buffer.as_ref(), frag_field::OFF_M) & 1;
        set_u16(self.buffer.as_mut(), frag_field::OFF_M, (value << 3) | m);
    }

    /// Sets more fragments.
    #[inline]
    pub fn set_more_frags(&mut self, value: bool) {
        let v = (get_u16(self.buffer.as_ref(), frag_field::OFF_M) & !1) | u16::from(value);
        set_u16(self.buffer.as_mut(), frag_field::OFF_M, v);
    }

    /// Sets the identification.
    #[inline]
    pub fn set_ident(&mut self, value: u32) {
        set_u32(self.buffer.as_mut(), frag_field::IDENT, value);
    }
}

/// The meaning of a fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6FragmentRepr {
    /// Next header.
    pub next_header: IpProtocol,
    /// Fragment offset in 8-octet units, 0..=8191.
    pub frag_offset: u16,
    /// More fragments.
    pub more_frags: bool,
    /// Identification.
    pub ident: u32,
}

impl Ipv6FragmentRepr {
    /// Reads a checked header (reserved fields are ignored, RFC 8200 §4.5).
    pub fn parse<T: AsRef<[u8]>>(header: &Ipv6FragmentHeader<T>) -> Result<Self> {
        header.check_len()?;
        Ok(Ipv6FragmentRepr {
            next_header: header.next_header(),
            frag_offset: header.frag_offset(),
            more_frags: header.more_frags(),
            ident: header.ident(),
        })
    }

    /// Bytes `emit` writes (8).
    #[inline]
    pub const fn buffer_len(&self) -> usize {
        FRAGMENT_HEADER_LEN
    }

    /// True for the first fragment (offset 0): only it carries the upper-layer header.
    #[inline]
    pub const fn is_first(&self) -> bool {
        self.frag_offset == 0
    }

    /// Writes the header, with zero reserved fields.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut Ipv6FragmentHeader<T>) {
        header.set_next_header(self.next_header);
        header.buffer.as_mut()[frag_field::RESERVED] = 0;
        set_u16(
            header.buffer.as_mut(),
            frag_field::OFF_M,
            ((self.frag_offset & 0x1fff) << 3) | u16::from(self.more_frags),
        );
        header.set_ident(self.ident);
    }
}

/// Where the extension-header chain of an IPv6 packet ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6ExtChain {
    /// The protocol after the last extension header walked (TCP, UDP, ICMPv6, …, or
    /// `IPV6_NONXT`, or an extension this walker does not descend into, such as AH or ESP).
    pub next_header: IpProtocol,
    /// Offset of that protocol's header from the start of the IPv6 payload (add 40 for an offset
    /// from the IPv6 header).
    pub l4_offset: usize,
    /// The fragment header, if the chain has one. For a non-first fragment
    /// (`frag_offset != 0`) the walk stops after it: what follows is not a header.
    pub fragment: Option<Ipv6FragmentRepr>,
    /// Number of extension headers walked.
    pub ext_headers: u8,
}

/// Walks the extension headers at the start of `payload` (an IPv6 payload whose first header is
/// `next_header`): hop-by-hop, routing, destination options, and fragment. `Err(Truncated)` if a
/// header runs past the payload.
///
/// The loop terminates because each step consumes at least 8 bytes of a finite buffer.
pub fn walk_ext_headers(mut next_header: IpProtocol, payload: &[u8]) -> Result<Ipv6ExtChain> {
    let mut off = 0;
    let mut fragment = None;
    let mut count: u8 = 0;
    loop {
        let rest = payload.get(off..).ok_or(Error::Truncated)?;
        match next_header {
            IpProtocol::HOPOPT | IpProtocol::IPV6_ROUTE | IpProtocol::IPV6_OPTS => {
                let h = Ipv6ExtHeader::new_checked(rest)?;
                next_header = h.next_header();
                off += h.header_len();
            }
            IpProtocol::IPV6_FRAG => {
                let f = Ipv6FragmentRepr::parse(&Ipv6FragmentHeader::new_checked(rest)?)?;
                next_header = f.next_header;
                off += FRAGMENT_HEADER_LEN;
                fragment = Some(f);
                if !f.is_first() {
                    count = count.saturating_add(1);
                    break;
                }
            }
            _ => break,
        }
        count = count.saturating_add(1);
    }
    Ok(Ipv6ExtChain {
        next_header,
        l4_offset: off,
        fragment,
        ext_headers: count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv6 header, hop-by-hop (router alert), fragment (first, MF), destination options
    /// (PadN), then 8 bytes of UDP.
    fn chain_packet() -> Vec<u8> {
        let mut p = vec![
            0x60, 0x12, 0x34, 0x56, 0x00, 0x28, 0x00,
            0x40, // ver/tc/flow, len 40, HBH, hlim 64
        ];
        p.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(&"2001:db8::2".parse::<Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(&[44, 0, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00]); // HBH: RA, PadN(0)
        p.extend_from_slice(&[60, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef]); // frag: off 0, M
        p.extend_from_slice(&[17, 1, 0x01, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // DO
        p.extend_from_slice(&[0x04, 0x00, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00]); // UDP
        p
    }

    #[test]
    fn fixed_header() {
        let b = chain_packet();
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            (p.version(), p.traffic_class(), p.flow_label()),
            (6, 0x01, 0x23456)
        );
        assert_eq!(
            (p.payload_len(), p.next_header(), p.hop_limit()),
            (40, IpProtocol::HOPOPT, 64)
        );
        assert_eq!(p.src_addr(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        let r = Ipv6Repr::parse(&p).unwrap();
        let mut out = b.clone();
        out[..40].fill(0xaa);
        r.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    #[test]
    fn chain_walk() {
        let b = chain_packet();
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        let c = p.ext_chain().unwrap();
        assert_eq!(c.next_header, IpProtocol::UDP);
        assert_eq!(c.l4_offset, 32);
        assert_eq!(c.ext_headers, 3);
        let f = c.fragment.unwrap();
        assert_eq!(
            (f.frag_offset, f.more_frags, f.ident),
            (0, true, 0xdead_beef)
        );
        assert_eq!(f.next_header, IpProtocol::IPV6_OPTS);

        // Hop-by-hop options and round trips of each header.
        let hbh = Ipv6ExtHeader::new_checked(p.payload()).unwrap();
        let opts: Vec<_> = hbh.options_iter().map(Result::unwrap).collect();
        assert_eq!(
            opts[0],
            Ipv6Option {
                option_type: option::ROUTER_ALERT,
                data: &[0, 0]
            }
        );
        assert_eq!(
            opts[1],
            Ipv6Option {
                option_type: option::PADN,
                data: &[]
            }
        );
        let r = Ipv6ExtHeaderRepr::parse(&hbh).unwrap();
        let mut out = [0u8; 8];
        r.emit(&mut Ipv6ExtHeader::new_unchecked(&mut out[..]));
        assert_eq!(out, b[40..48]);
        let fh = Ipv6FragmentHeader::new_checked(hbh.payload()).unwrap();
        let mut out = [0u8; 8];
        Ipv6FragmentRepr::parse(&fh)
            .unwrap()
            .emit(&mut Ipv6FragmentHeader::new_unchecked(&mut out[..]));
        assert_eq!(out, b[48..56]);
        let dopt = Ipv6ExtHeader::new_checked(fh.payload()).unwrap();
        assert_eq!(dopt.header_len(), 16);
        assert_eq!(dopt.next_header(), IpProtocol::UDP);
    }

    #[test]
    fn later_fragment_stops_walk() {
        let mut b = chain_packet();
        b[50] = 0x00;
        b[51] = 0xb8; // offset 23, M clear
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        let c = p.ext_chain().unwrap();
        assert_eq!(c.next_header, IpProtocol::IPV6_OPTS);
        assert_eq!(c.l4_offset, 16);
        assert!(!c.fragment.unwrap().is_first());
    }

    #[test]
    fn errors() {
        let b = chain_packet();
        assert_eq!(
            Ipv6Packet::new_checked(&b[..39]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv6Packet::new_checked(&b[..79]).unwrap_err(),
            Error::Truncated
        );
        let mut v = b.clone();
        v[0] = 0x40;
        assert_eq!(
            Ipv6Packet::new_checked(&v[..]).unwrap_err(),
            Error::BadVersion
        );
        // A destination options header whose length runs past the payload.
        assert_eq!(
            walk_ext_headers(IpProtocol::IPV6_OPTS, &[17, 1, 0, 0, 0, 0, 0, 0]),
            Err(Error::Truncated)
        );
        assert_eq!(
            walk_ext_headers(IpProtocol::IPV6_FRAG, &[17, 0, 0]),
            Err(Error::Truncated)
        );
        assert_eq!(
            walk_ext_headers(IpProtocol::HOPOPT, &[]),
            Err(Error::Truncated)
        );
        // No extension headers at all.
        let c = walk_ext_headers(IpProtocol::TCP, &[]).unwrap();
        assert_eq!(
            (c.next_header, c.l4_offset, c.ext_headers),
            (IpProtocol::TCP, 0, 0)
        );
        // An option running past the header.
        assert_eq!(
            Ipv6OptionIter::new(&[5, 4, 0]).next(),
            Some(Err(Error::BadOption))
        );
        assert_eq!(
            Ipv6OptionIter::new(&[5]).next(),
            Some(Err(Error::BadOption))
        );
    }

    #[test]
    fn ext_repr_pads() {
        let r = Ipv6ExtHeaderRepr {
            next_header: IpProtocol::TCP,
            data: &[1, 1, 0],
        };
        assert_eq!(r.buffer_len(), 8);
        let mut out = [0xffu8; 8];
        r.emit(&mut Ipv6ExtHeader::new_unchecked(&mut out[..]));
        assert_eq!(out, [6, 0, 1, 1, 0, 0, 0, 0]);
    }
}
