//! TCP (RFC 9293) with options: MSS, window scale (RFC 7323), SACK-permitted and SACK
//! (RFC 2018), timestamps (RFC 7323); checksum over the IPv4 or IPv6 pseudo-header.

use crate::{
    Error, IpProtocol, Ipv4Addr, Ipv6Addr, OptionBytes, Result, checksum, get_u16, get_u32,
    set_u16, set_u32,
};
use core::{fmt, ops};

mod field {
    use crate::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const SEQ_NUM: Field = 4..8;
    pub const ACK_NUM: Field = 8..12;
    pub const FLAGS: Field = 12..14;
    pub const WIN_SIZE: Field = 14..16;
    pub const CHECKSUM: Field = 16..18;
    pub const URGENT: Field = 18..20;
    pub const OPTIONS: usize = 20;
}

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = field::OPTIONS;
/// Largest TCP header (data offset 15).
pub const MAX_HEADER_LEN: usize = 60;

/// Option bytes of a TCP header (up to 40).
pub type TcpOptions = OptionBytes<40>;

/// Splits a kind-length-value option at the start of `data` into its value and the rest;
/// `None` if the length is below 2 or runs past `data`. Shared with IPv4 options.
#[inline]
pub(crate) fn tlv_split(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = usize::from(*data.get(1)?);
    if len < 2 || len > data.len() {
        return None;
    }
    Some((&data[2..len], &data[len..]))
}

/// The nine TCP flag bits (the low 9 bits of header bytes 12-13).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(u16);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x001);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x002);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x004);
    /// Push.
    pub const PSH: TcpFlags = TcpFlags(0x008);
    /// Acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x010);
    /// Urgent pointer is significant.
    pub const URG: TcpFlags = TcpFlags(0x020);
    /// ECN echo (RFC 3168).
    pub const ECE: TcpFlags = TcpFlags(0x040);
    /// Congestion window reduced (RFC 3168).
    pub const CWR: TcpFlags = TcpFlags(0x080);
    /// ECN nonce (RFC 3540, historic), now AE (accurate ECN).
    pub const NS: TcpFlags = TcpFlags(0x100);

    const ALL: u16 = 0x1ff;

    /// No flags.
    #[inline]
    pub const fn empty() -> Self {
        TcpFlags(0)
    }

    /// Flags from bits; bits outside the nine flags are dropped.
    #[inline]
    pub const fn from_bits_truncate(bits: u16) -> Self {
        TcpFlags(bits & Self::ALL)
    }

    /// The flag bits.
    #[inline]
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// True if every flag of `other` is set.
    #[inline]
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// True if no flag is set.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl ops::BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & rhs.0)
    }
}

impl fmt::Display for TcpFlags {
    /// Letters in the order tcpdump and scapy use: `FSRPAUECN`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in "FSRPAUECN".chars().enumerate() {
            if self.0 & (1 << i) != 0 {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TcpFlags({self})")
    }
}

/// Option kinds (IANA "TCP Option Kind Numbers").
pub mod option {
    /// End of option list.
    pub const END: u8 = 0;
    /// No operation.
    pub const NOP: u8 = 1;
    /// Maximum segment size.
    pub const MSS: u8 = 2;
    /// Window scale.
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK permitted.
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK blocks.
    pub const SACK: u8 = 5;
    /// Timestamps.
    pub const TIMESTAMPS: u8 = 8;
}

/// The blocks of a SACK option: 1 to 4 (left edge, right edge) pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SackBlocks<'a>(&'a [u8]);

impl<'a> SackBlocks<'a> {
    /// Wraps the option value; `None` unless it is 8 to 32 bytes in whole blocks.
    pub fn new(data: &'a [u8]) -> Option<Self> {
        (!data.is_empty() && data.len() <= 32 && data.len().is_multiple_of(8))
            .then_some(SackBlocks(data))
    }

    /// Number of blocks.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len() / 8
    }

    /// Always false: a SACK option has at least one block.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The blocks as (left edge, right edge).
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + 'a {
        self.0
            .chunks_exact(8)
            .map(|c| (get_u32(c, 0..4), get_u32(c, 4..8)))
    }

    /// The value bytes.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// End of option list (the rest of the option area is padding).
    EndOfList,
    /// No operation.
    NoOperation,
    /// Maximum segment size.
    MaxSegmentSize(u16),
    /// Window scale shift count.
    WindowScale(u8),
    /// SACK permitted.
    SackPermitted,
    /// Selective acknowledgment blocks.
    Sack(SackBlocks<'a>),
    /// Timestamps (TSval, TSecr).
    Timestamps {
        /// Timestamp value.
        tsval: u32,
        /// Timestamp echo reply.
        tsecr: u32,
    },
    /// Any other kind, with its value bytes.
    Unknown {
        /// Option kind.
        kind: u8,
        /// Value bytes (without kind and length).
        data: &'a [u8],
    },
}

impl TcpOption<'_> {
    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::NoOperation => 1,
            TcpOption::MaxSegmentSize(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::Sack(b) => 2 + b.as_bytes().len(),
            TcpOption::Timestamps { .. } => 10,
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Appends the option to `options`; `Err(BadOption)` if it does not fit or an `Unknown`
    /// value is too long for the length byte.
    pub fn push_to<const N: usize>(&self, options: &mut OptionBytes<N>) -> Result<()> {
        let len = self.buffer_len();
        let mut b = [0u8; 40];
        if len > b.len() {
            return Err(Error::BadOption);
        }
        match *self {
            TcpOption::EndOfList => b[0] = option::END,
            TcpOption::NoOperation => b[0] = option::NOP,
            TcpOption::MaxSegmentSize(mss) => {
                b[..2].copy_from_slice(&[option::MSS, 4]);
                set_u16(&mut b, 2..4, mss);
            }
            TcpOption::WindowScale(s) => b[..3].copy_from_slice(&[option::WINDOW_SCALE, 3, s]),
            TcpOption::SackPermitted => b[..2].copy_from_slice(&[option::SACK_PERMITTED, 2]),
            TcpOption::Sack(blocks) => {
                b[..2].copy_from_slice(&[option::SACK, len as u8]);
                b[2..len].copy_from_slice(blocks.as_bytes());
            }
            TcpOption::Timestamps { tsval, tsecr } => {
                b[..2].copy_from_slice(&[option::TIMESTAMPS, 10]);
                set_u32(&mut b, 2..6, tsval);
                set_u32(&mut b, 6..10, tsecr);
            }
            TcpOption::Unknown { kind, data } => {
                b[..2].copy_from_slice(&[kind, len as u8]);
                b[2..len].copy_from_slice(data);
            }
        }
        options.push(&b[..len])
    }
}

/// Iterates TCP options; stops after END; yields one `Err(BadOption)` and stops on a malformed
/// option (length below 2, past the end, or a known kind with the wrong length).
#[derive(Debug, Clone)]
pub struct TcpOptionIter<'a> {
    data: &'a [u8],
}

impl<'a> TcpOptionIter<'a> {
    /// Iterates over the option bytes `data`.
    pub const fn new(data: &'a [u8]) -> Self {
        TcpOptionIter { data }
    }
}

impl<'a> Iterator for TcpOptionIter<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, rest) = self.data.split_first()?;
        match kind {
            option::END => {
                self.data = &[];
                return Some(Ok(TcpOption::EndOfList));
            }
            option::NOP => {
                self.data = rest;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let Some((value, next)) = tlv_split(self.data) else {
            self.data = &[];
            return Some(Err(Error::BadOption));
        };
        let opt = match (kind, value.len()) {
            (option::MSS, 2) => Some(TcpOption::MaxSegmentSize(get_u16(value, 0..2))),
            (option::WINDOW_SCALE, 1) => Some(TcpOption::WindowScale(value[0])),
            (option::SACK_PERMITTED, 0) => Some(TcpOption::SackPermitted),
            (option::SACK, _) => SackBlocks::new(value).map(TcpOption::Sack),
            (option::TIMESTAMPS, 8) => Some(TcpOption::Timestamps {
                tsval: get_u32(value, 0..4),
                tsecr: get_u32(value, 4..8),
            }),
            (
                option::MSS | option::WINDOW_SCALE | option::SACK_PERMITTED | option::TIMESTAMPS,
                _,
            ) => None,
            _ => Some(TcpOption::Unknown { kind, data: value }),
        };
        match opt {
            Some(o) => {
                self.data = next;
                Some(Ok(o))
            }
            None => {
                self.data = &[];
                Some(Err(Error::BadOption))
            }
        }
    }
}

/// A view of a TCP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps a buffer after `check_len`.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks: fixed header fits (`Truncated`), data offset at least 5 (`BadHeaderLength`),
    /// options fit (`Truncated`).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hlen = self.header_len();
        if hlen < HEADER_LEN {
            return Err(Error::BadHeaderLength);
        }
        if len < hlen {
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

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::SEQ_NUM)
    }

    /// Acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::ACK_NUM)
    }

    /// Header length in bytes (data offset × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::FLAGS.start] >> 4) * 4
    }

    /// The three reserved bits between data offset and NS.
    #[inline]
    pub fn reserved(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS.start] >> 1) & 0x07
    }

    /// Flags.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags::from_bits_truncate(get_u16(self.buffer.as_ref(), field::FLAGS))
    }

    /// Receive window.
    #[inline]
    pub fn window_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::WIN_SIZE)
    }

    /// Checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent_at(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::URGENT)
    }

    /// Option bytes.
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    /// Iterates the options.
    #[inline]
    pub fn options_iter(&self) -> TcpOptionIter<'_> {
        TcpOptionIter::new(self.options())
    }

    fn verify(&self, pseudo: u16) -> bool {
        checksum::combine(&[pseudo, checksum::data(self.buffer.as_ref())]) == 0xffff
    }

    /// True if the checksum is correct for the IPv4 pseudo-header; the buffer must be exactly
    /// the segment (the IP payload).
    pub fn verify_checksum_v4(&self, src: &Ipv4Addr, dst: &Ipv4Addr) -> bool {
        let len = self.buffer.as_ref().len() as u16;
        self.verify(checksum::pseudo_header_v4(src, dst, IpProtocol::TCP, len))
    }

    /// True if the checksum is correct for the IPv6 pseudo-header.
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let len = self.buffer.as_ref().len() as u32;
        self.verify(checksum::pseudo_header_v6(src, dst, IpProtocol::TCP, len))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> TcpPacket<&'a T> {
    /// Data after the header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
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

    /// Sets the sequence number.
    #[inline]
    pub fn set_seq_number(&mut self, value: u32) {
        set_u32(self.buffer.as_mut(), field::SEQ_NUM, value);
    }

    /// Sets the acknowledgment number.
    #[inline]
    pub fn set_ack_number(&mut self, value: u32) {
        set_u32(self.buffer.as_mut(), field::ACK_NUM, value);
    }

    /// Sets the header length in bytes (a multiple of 4, at most 60); keeps reserved bits and NS.
    #[inline]
    pub fn set_header_len(&mut self, value: usize) {
        let b = &mut self.buffer.as_mut()[field::FLAGS.start];
        *b = (*b & 0x0f) | (((value / 4) as u8) << 4);
    }

    /// Sets the flags; keeps data offset and reserved bits.
    #[inline]
    pub fn set_flags(&mut self, value: TcpFlags) {
        let raw = get_u16(self.buffer.as_ref(), field::FLAGS);
        set_u16(
            self.buffer.as_mut(),
            field::FLAGS,
            (raw & !TcpFlags::ALL) | value.bits(),
        );
    }

    /// Sets the window.
    #[inline]
    pub fn set_window_len(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::WIN_SIZE, value);
    }

    /// Sets the stored checksum.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the urgent pointer.
    #[inline]
    pub fn set_urgent_at(&mut self, value: u16) {
        set_u16(self.buffer.as_mut(), field::URGENT, value);
    }

    /// Option bytes, mutable.
    #[inline]
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[field::OPTIONS..end]
    }

    /// Data after the header, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }

    fn fill(&mut self, pseudo: u16) {
        self.set_checksum(0);
        let sum = checksum::combine(&[pseudo, checksum::data(self.buffer.as_ref())]);
        self.set_checksum(!sum);
    }

    /// Computes and stores the checksum with the IPv4 pseudo-header (buffer = whole segment).
    pub fn fill_checksum_v4(&mut self, src: &Ipv4Addr, dst: &Ipv4Addr) {
        let len = self.buffer.as_ref().len() as u16;
        self.fill(checksum::pseudo_header_v4(src, dst, IpProtocol::TCP, len));
    }

    /// Computes and stores the checksum with the IPv6 pseudo-header (buffer = whole segment).
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let len = self.buffer.as_ref().len() as u32;
        self.fill(checksum::pseudo_header_v6(src, dst, IpProtocol::TCP, len));
    }
}

/// The meaning of a TCP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgment number.
    pub ack_number: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Receive window.
    pub window_len: u16,
    /// Urgent pointer.
    pub urgent_at: u16,
    /// Option bytes as on the wire; `emit` pads them with zero (END) to a multiple of four.
    pub options: TcpOptions,
}

impl TcpRepr {
    /// Reads a checked segment. Does not verify the checksum; `Err(BadOption)` if an option is
    /// malformed. The reserved bits are ignored, as RFC 9293 asks of receivers.
    pub fn parse<T: AsRef<[u8]>>(packet: &TcpPacket<T>) -> Result<TcpRepr> {
        packet.check_len()?;
        for opt in packet.options_iter() {
            opt?;
        }
        Ok(TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window_len: packet.window_len(),
            urgent_at: packet.urgent_at(),
            options: TcpOptions::from_slice(packet.options())?,
        })
    }

    /// Iterates the options.
    pub fn options_iter(&self) -> TcpOptionIter<'_> {
        TcpOptionIter::new(self.options.as_slice())
    }

    /// The MSS option, if present and well formed.
    pub fn mss(&self) -> Option<u16> {
        self.options_iter().find_map(|o| match o {
            Ok(TcpOption::MaxSegmentSize(m)) => Some(m),
            _ => None,
        })
    }

    /// The window scale option, if present.
    pub fn window_scale(&self) -> Option<u8> {
        self.options_iter().find_map(|o| match o {
            Ok(TcpOption::WindowScale(s)) => Some(s),
            _ => None,
        })
    }

    /// True if SACK-permitted is present.
    pub fn sack_permitted(&self) -> bool {
        self.options_iter()
            .any(|o| o == Ok(TcpOption::SackPermitted))
    }

    /// The timestamps option (TSval, TSecr), if present.
    pub fn timestamps(&self) -> Option<(u32, u32)> {
        self.options_iter().find_map(|o| match o {
            Ok(TcpOption::Timestamps { tsval, tsecr }) => Some((tsval, tsecr)),
            _ => None,
        })
    }

    /// Header length `emit` writes: 20 plus the options rounded up to four bytes.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.options.len().next_multiple_of(4)
    }

    /// Writes the header with a zero checksum; fill it with `fill_checksum_v4/v6` once the
    /// payload is in place.
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut TcpPacket<T>) {
        let hlen = self.buffer_len();
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number);
        set_u16(
            packet.buffer.as_mut(),
            field::FLAGS,
            (((hlen / 4) as u16) << 12) | self.flags.bits(),
        );
        packet.set_window_len(self.window_len);
        packet.set_checksum(0);
        packet.set_urgent_at(self.urgent_at);
        let opts = &mut packet.buffer.as_mut()[field::OPTIONS..hlen];
        let n = self.options.len();
        opts[..n].copy_from_slice(self.options.as_slice());
        opts[n..].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SYN from 10.0.0.1:40000 to 10.0.0.2:80 with MSS 1460, SACK-permitted, timestamps,
    // NOP, window scale 7 (Linux's usual SYN), checksum computed below.
    const SYN: [u8; 40] = [
        0x9c, 0x40, 0x00, 0x50, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa,
        0xf0, 0x00, 0x00, 0x00, 0x00, // fixed header
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x7b, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn syn_options() {
        let p = TcpPacket::new_checked(&SYN[..]).unwrap();
        assert_eq!(
            (p.src_port(), p.dst_port(), p.seq_number()),
            (40000, 80, 1000)
        );
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.flags(), TcpFlags::SYN);
        assert_eq!(p.flags().to_string(), "S");
        let opts: Vec<_> = p.options_iter().map(Result::unwrap).collect();
        assert_eq!(
            opts,
            [
                TcpOption::MaxSegmentSize(1460),
                TcpOption::SackPermitted,
                TcpOption::Timestamps {
                    tsval: 123,
                    tsecr: 0
                },
                TcpOption::NoOperation,
                TcpOption::WindowScale(7),
            ]
        );
        let r = TcpRepr::parse(&p).unwrap();
        assert_eq!(
            (r.mss(), r.window_scale(), r.sack_permitted()),
            (Some(1460), Some(7), true)
        );
        assert_eq!(r.timestamps(), Some((123, 0)));
        let mut built = TcpOptions::new();
        for o in &opts {
            o.push_to(&mut built).unwrap();
        }
        assert_eq!(built, r.options);
        let mut out = [0xffu8; 40];
        r.emit(&mut TcpPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, SYN);
    }

    #[test]
    fn checksum_v4_and_v6() {
        let mut seg = SYN.to_vec();
        seg.extend_from_slice(b"hello");
        let (s, d) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut p = TcpPacket::new_unchecked(&mut seg[..]);
        p.fill_checksum_v4(&s, &d);
        assert!(p.verify_checksum_v4(&s, &d));
        assert!(!p.verify_checksum_v4(&d, &Ipv4Addr::new(10, 0, 0, 3)));
        let (s6, d6) = (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
        p.fill_checksum_v6(&s6, &d6);
        assert!(p.verify_checksum_v6(&s6, &d6));
        assert_eq!(
            TcpPacket::new_checked(&seg[..]).unwrap().payload(),
            b"hello"
        );
    }

    #[test]
    fn sack_blocks() {
        let opt = [
            0x05, 0x12, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0,
        ];
        let mut it = TcpOptionIter::new(&opt);
        let Some(Ok(TcpOption::Sack(b))) = it.next() else {
            panic!("no SACK")
        };
        assert_eq!(b.iter().collect::<Vec<_>>(), [(1, 2), (3, 4)]);
        assert_eq!(it.next(), Some(Ok(TcpOption::EndOfList)));
        assert_eq!(it.next(), None);
        // A SACK with a partial block is malformed.
        assert_eq!(
            TcpOptionIter::new(&[5, 6, 0, 0, 0, 1]).next(),
            Some(Err(Error::BadOption))
        );
    }

    #[test]
    fn malformed() {
        assert_eq!(
            TcpPacket::new_checked(&SYN[..19]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            TcpPacket::new_checked(&SYN[..39]).unwrap_err(),
            Error::Truncated
        );
        let mut b = SYN;
        b[12] = 0x40;
        assert_eq!(
            TcpPacket::new_checked(&b[..]).unwrap_err(),
            Error::BadHeaderLength
        );
        let mut b = SYN;
        b[21] = 5; // MSS with length 5
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(TcpRepr::parse(&p), Err(Error::BadOption));
        b[21] = 0; // length 0 would loop forever if accepted
        let p = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(
            p.options_iter().collect::<Vec<_>>(),
            [Err(Error::BadOption)]
        );
    }

    #[test]
    fn flags_display_and_setters() {
        let f = TcpFlags::SYN | TcpFlags::ACK | TcpFlags::NS;
        assert_eq!(f.to_string(), "SAN");
        assert!(f.contains(TcpFlags::ACK) && !f.contains(TcpFlags::FIN));
        let mut b = SYN;
        let mut p = TcpPacket::new_unchecked(&mut b[..]);
        p.set_flags(TcpFlags::FIN | TcpFlags::ACK);
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.flags(), TcpFlags::FIN | TcpFlags::ACK);
    }
}
