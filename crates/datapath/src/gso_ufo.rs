//! UDP fragmentation offload (UFO, Linux's `SKB_GSO_UDP`, virtio's `GSO_UDP`): software
//! fragmentation of UFO super-frames into IP fragments, as Linux does it for what a tap, a
//! packet socket or an older guest hands it (`udp4_ufo_fragment`/`udp6_ufo_fragment` and the
//! IP header fixes of `inet_gso_segment`/`ipv6_gso_segment`).
//!
//! A UFO super-frame is one UDP datagram over IPv4 or IPv6 ([`PacketMeta::ufo`](crate::packet::PacketMeta::ufo) set,
//! `gso_size` not zero) too large for the link: it leaves as IP fragments of `gso_size`
//! bytes of IP payload each (the last one shorter or equal), the first one holding the UDP
//! header. The UDP checksum is completed over the whole datagram first (with or without
//! `NEEDS_CSUM`: `0xffff` for a sum of 0), its pseudo-header length the datagram's real one;
//! the UDP length field is left as the sender wrote it. Then:
//!
//! - IPv4: every fragment repeats the IP header (options too) with the super-frame's
//!   identification; `frag_off` is the offset in 8-byte units with MF on all but the last
//!   (DF cleared); total length and header checksum per fragment;
//! - IPv6: a fragment header (RFC 8200 §4.5) goes after the unfragmentable headers
//!   (hop-by-hop, routing, destination options not following a routing header, and
//!   destination options holding a Home Address option wherever they are), its
//!   identification chosen by the switch ([`next_ipv6_id`]: Linux draws one from a keyed hash
//!   of the addresses), M on all but the last; payload length per fragment.
//!
//! A datagram whose IP payload fits `gso_size` is sent whole (its checksum completed), as
//! Linux sends one ("too small packets are not really GSO ones"). Bounds: `gso_size` a
//! multiple of 8 (fragment offsets count 8-byte units; no sender makes another) and at most
//! [`MAX_FRAGMENTS`] fragments ([`GsoError::MssTooSmall`]), the IP packet within 64 KiB
//! ([`GsoError::TooLong`]), not an IPv4 fragment already, headers within the frame.
//! Fragments are pool packets, so fragmentation allocates nothing once the pool is warm.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use wire::IpProtocol;
use wire::checksum;

use crate::gso::{GsoError, ipv4_header_checksum, set16};
use crate::gso_udp::UdpSuper;
use crate::packet::{Packet, Pool};

/// The most fragments one super-frame may make (as many as the UDP segmentation's
/// datagrams, [`crate::gso_udp::MAX_SEGMENTS`]).
pub const MAX_FRAGMENTS: usize = 128;

/// Bytes of an IPv6 fragment header.
const FRAG_HDR: usize = 8;
/// IPv6 next-header values.
const HOP_BY_HOP: u8 = 0;
const ROUTING: u8 = 43;
const FRAGMENT: u8 = 44;
const DEST_OPTS: u8 = 60;

/// Where a UFO super-frame's headers are, as found by [`UfoSuper::of`], and what its
/// fragments share ([`UfoSuper::ready`]: the UDP checksum, the IPv6 identification).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UfoSuper {
    /// Offset of the IP header.
    pub l3: usize,
    /// Offset of the UDP header.
    pub l4: usize,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
    /// IP payload bytes per fragment (`gso_size`).
    pub size: usize,
    /// End of the unfragmentable part: the UDP header (IPv4), the first fragmentable header
    /// (IPv6), where the fragment header goes.
    pub unfrag: usize,
    /// Offset of the next-header byte that names the first fragmentable header (IPv6).
    prev_next: usize,
    /// The UDP checksum of the whole datagram.
    csum: u16,
    /// The IPv6 fragment identification.
    id: u32,
}

impl UfoSuper {
    /// Finds the IP and UDP headers of UFO super-frame `p` (from `meta.l3`, or after its
    /// Ethernet header and VLAN tags). `NotTcp` when it is not UDP over IPv4 or IPv6 or is an
    /// IPv4 fragment; `MssTooSmall` for a `gso_size` not a multiple of 8 or one that makes
    /// more than [`MAX_FRAGMENTS`]; `TooLong` past 64 KiB; `Malformed` for headers past the
    /// end.
    pub fn of(p: &Packet) -> Result<UfoSuper, GsoError> {
        let UdpSuper { l3, l4, ipv6, size } = UdpSuper::headers(p)?;
        if size % 8 != 0 {
            return Err(GsoError::MssTooSmall);
        }
        let (unfrag, prev_next) = if ipv6 {
            first_fragmentable(p.data(), l3)
        } else {
            (l4, 0)
        };
        let t = UfoSuper {
            l3,
            l4,
            ipv6,
            size,
            unfrag,
            prev_next,
            csum: 0,
            id: 0,
        };
        if t.n_fragments(p) > MAX_FRAGMENTS {
            return Err(GsoError::MssTooSmall);
        }
        Ok(t)
    }

    /// Whether `p` is sent as it is rather than in fragments: its IP payload (from the UDP
    /// header on) fits `gso_size`.
    pub fn fits(&self, p: &Packet) -> bool {
        p.len() - self.l4 <= self.size
    }

    /// Number of packets `p` makes: its fragmentable bytes in pieces of `size`, at least one.
    pub fn n_fragments(&self, p: &Packet) -> usize {
        if self.fits(p) {
            return 1;
        }
        (p.len() - self.unfrag).div_ceil(self.size)
    }

    /// The super-frame with what its fragments share: the UDP checksum of the whole datagram
    /// and, for IPv6, the identification `id`.
    pub fn with_id(mut self, p: &Packet, id: u32) -> UfoSuper {
        self.csum = udp_checksum(p.data(), self.l3, self.l4, self.ipv6);
        self.id = id;
        self
    }

    /// [`Self::with_id`] with an identification from [`next_ipv6_id`] (IPv6 only).
    pub fn ready(self, p: &Packet) -> UfoSuper {
        let id = if self.ipv6 { next_ipv6_id() } else { 0 };
        self.with_id(p, id)
    }

    /// Fragment `k` (from 0, below [`Self::n_fragments`]) of `p`, made [`Self::ready`], in a
    /// buffer from `pool`, with `p`'s metadata (and tunnel metadata), `gso_size` 0 and `ufo`
    /// off.
    pub fn fragment(&self, p: &Packet, k: usize, pool: &mut Pool) -> Packet {
        let d = p.data();
        let whole = self.fits(p);
        let (head, start) = (self.unfrag, self.unfrag + k * self.size);
        let start = start.min(d.len());
        let end = if whole {
            d.len()
        } else {
            (start + self.size).min(d.len())
        };
        let frag_hdr = if self.ipv6 && !whole { FRAG_HDR } else { 0 };
        let len = head + frag_hdr + (end - start);
        let mut s = pool.packet_with_len(len, p.meta.in_port);
        s.copy_meta_from(p);
        s.meta.gso_size = 0;
        s.meta.set_ufo(false);
        let f = s.data_mut();
        f[..head].copy_from_slice(&d[..head]);
        f[head + frag_hdr..].copy_from_slice(&d[start..end]);
        for (i, b) in self.csum.to_be_bytes().into_iter().enumerate() {
            let at = self.l4 + 6 + i;
            if (start..end).contains(&at) {
                f[at - start + head + frag_hdr] = b;
            }
        }
        let last = end == d.len();
        let offset = k * self.size;
        if self.ipv6 {
            set16(f, self.l3 + 4, (len - self.l3 - 40) as u16);
            if !whole {
                let h = &mut f[head..head + FRAG_HDR];
                h[0] = d[self.prev_next];
                h[1] = 0;
                h[2..4].copy_from_slice(&((offset as u16) | u16::from(!last)).to_be_bytes());
                h[4..8].copy_from_slice(&self.id.to_be_bytes());
                f[self.prev_next] = FRAGMENT;
            }
        } else {
            set16(f, self.l3 + 2, (len - self.l3) as u16);
            if !whole {
                let mf = if last { 0 } else { 0x2000 };
                set16(f, self.l3 + 6, (offset / 8) as u16 | mf);
            }
            ipv4_header_checksum(f, self.l3, self.l4);
        }
        s
    }

    /// Makes UFO super-frame `p` ready for a receiver that fragments it itself (a guest's
    /// `GUEST_UFO`, a tap): IP and UDP lengths for the whole datagram (and the IPv4 header
    /// checksum), the UDP checksum field the pseudo-header sum, Linux's `CHECKSUM_PARTIAL`
    /// convention (`csum_start` = `l4`, `csum_offset` 6).
    pub fn prepare_partial(p: &mut Packet) -> Result<UfoSuper, GsoError> {
        let t = UfoSuper::of(p)?;
        let (l3, l4) = (t.l3, t.l4);
        let f = p.data_mut();
        crate::gso::set_ip_len(f, l3, t.ipv6);
        if !t.ipv6 {
            ipv4_header_checksum(f, l3, l4);
        }
        let udp_len = (f.len() - l4) as u16;
        set16(f, l4 + 4, udp_len);
        set16(f, l4 + 6, udp_pseudo(f, l3, t.ipv6, (f.len() - l4) as u32));
        Ok(t)
    }
}

/// Whether `p` is a UFO super-frame (else a TCP or USO one, or an ordinary packet).
#[inline]
pub fn is_ufo(p: &Packet) -> bool {
    p.meta.gso_size != 0 && p.meta.ufo()
}

/// The identification of the next IPv6 super-frame fragmented: a 32-bit counter (one for the
/// switch) through a bijective mix, so that successive ones neither repeat (before 2^32) nor
/// follow each other; never 0.
pub fn next_ipv6_id() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let mut x = NEXT.fetch_add(1, Relaxed);
    x = (x ^ (x >> 16)).wrapping_mul(0x7feb_352d);
    x = (x ^ (x >> 15)).wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    if x == 0 { 1 } else { x }
}

/// The end of the unfragmentable headers of the IPv6 packet at `l3` of `f` (RFC 8200 §4.5:
/// hop-by-hop, routing, and destination options before the routing header or without one;
/// and, wherever they are, destination options that hold a Home Address option, which
/// RFC 6275 §6.3 puts before any fragment header), as Linux's `ip6_find_1stfragopt` finds it
/// with Mobile IPv6 built in (Debian's kernels), and the offset of the next-header byte naming
/// what follows them. `f` holds the headers up to the UDP one ([`ip_l4`] checked).
fn first_fragmentable(f: &[u8], l3: usize) -> (usize, usize) {
    let (mut at, mut prev, mut routing) = (l3 + 40, l3 + 6, false);
    loop {
        match f[prev] {
            HOP_BY_HOP => {}
            ROUTING => routing = true,
            DEST_OPTS if !routing || has_home_address(f, at) => {}
            _ => return (at, prev),
        }
        prev = at;
        at += (usize::from(f[at + 1]) + 1) * 8;
    }
}

/// The Home Address option's type (RFC 6275 §6.3).
const HOME_ADDRESS: u8 = 0xc9;

/// Whether the options header at `at` of `f` holds a Home Address option: its options walked
/// as Linux's `ipv6_find_tlv` walks them (Pad1 one byte, any other option its length and two;
/// an option's type counts before its length is checked, an option past the header ends the
/// walk unfound).
fn has_home_address(f: &[u8], at: usize) -> bool {
    let Some(end) = f.get(at + 1).map(|&n| at + (usize::from(n) + 1) * 8) else {
        return false;
    };
    let Some(opts) = f.get(at + 2..end) else {
        return false;
    };
    let mut i = 0;
    while let Some(&kind) = opts.get(i) {
        if kind == HOME_ADDRESS {
            return true;
        }
        i += match kind {
            0 => 1,
            _ => match opts.get(i + 1) {
                Some(&len) if i + 2 + usize::from(len) <= opts.len() => 2 + usize::from(len),
                _ => return false,
            },
        };
    }
    false
}

/// The UDP checksum of the whole datagram whose IP header is at `l3` of `f` and UDP header
/// at `l4`, over its real length (not the UDP length field), `0xffff` for a sum of 0.
fn udp_checksum(f: &[u8], l3: usize, l4: usize, ipv6: bool) -> u16 {
    let sum = checksum::combine(&[
        udp_pseudo(f, l3, ipv6, (f.len() - l4) as u32),
        checksum::data(&f[l4..l4 + 6]),
        checksum::data(&f[l4 + 8..]),
    ]);
    let c = !sum;
    if c == 0 { 0xffff } else { c }
}

/// The UDP pseudo-header sum for a datagram of `len` bytes whose IP header is at `l3`.
fn udp_pseudo(f: &[u8], l3: usize, ipv6: bool, len: u32) -> u16 {
    if ipv6 {
        let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&f[o..o + 16]).expect("16"));
        checksum::pseudo_header_v6(&a(l3 + 8), &a(l3 + 24), IpProtocol::UDP, len)
    } else {
        let a = |o: usize| Ipv4Addr::from(<[u8; 4]>::try_from(&f[o..o + 4]).expect("4"));
        checksum::pseudo_header_v4(&a(l3 + 12), &a(l3 + 16), IpProtocol::UDP, len as u16)
    }
}
