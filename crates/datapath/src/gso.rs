//! TCP segmentation offload: software segmentation of TCP super-frames, and their preparation
//! for a device that segments them itself.
//!
//! A super-frame is a TCP/IPv4 or TCP/IPv6 packet of up to 64 KiB whose
//! [`PacketMeta::gso_size`](crate::packet::PacketMeta::gso_size) (the MSS) is not zero: what a
//! kernel hands a TSO-capable device (a `tap` with `TUN_F_TSO4`/`TUN_F_TSO6`) before it is cut
//! into wire-sized segments. Inside the switch it travels whole, through lookups and actions.
//! Its TCP checksum field is *not* maintained there (the tap leaves the kernel's partial sum in
//! it, and incremental rewrites do not keep that meaningful); each way out recomputes it:
//!
//! - a port whose tx queue segments itself ([`crate::port::TxQueue::tso`]) gets the frame
//!   whole, after [`prepare_partial`]: IP lengths and the IPv4 header checksum for the whole
//!   frame, and the TCP checksum field set to the pseudo-header sum, as Linux's
//!   `CHECKSUM_PARTIAL` wants it (`virtio_net_hdr` `NEEDS_CSUM` with `csum_start` at the TCP
//!   header, `csum_offset` 16);
//! - a VXLAN or GENEVE `tnl_push` followed by outputs only encapsulates the frame whole, and
//!   every output cuts it after the push ([`crate::gso_tunnel`]); any other `tnl_push` gets
//!   the frame's segments, each pushed by itself;
//! - any other port gets the segments [`TcpSuper::segment`] makes, as Linux's
//!   `tcp_gso_segment` would: the headers repeated, the payload cut in `gso_size` pieces, IPv4
//!   total length, identification (+1 per segment) and header checksum, IPv6 payload length,
//!   TCP sequence number, flags (FIN and PSH only on the last segment, CWR only on the first)
//!   and a full TCP checksum per segment.
//!
//! Segments are pool packets, so segmentation allocates nothing once the pool is warm.

use core::net::{Ipv4Addr, Ipv6Addr};

use wire::IpProtocol;
use wire::checksum;

use crate::packet::{NO_OFS, Packet, Pool};

/// TCP flags handled per segment.
const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const CWR: u8 = 0x80;

/// The smallest MSS a super-frame may ask for: Linux's TCP never sends smaller segments
/// (`net.ipv4.tcp_min_snd_mss`, 48 by default). At most 1 366 segments come of a 64 KiB
/// super-frame; a `gso_size` of 1 would make 65 000, a buffer each.
pub const MIN_MSS: u16 = 48;

/// Why a super-frame can be neither segmented nor handed to a segmenting device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoError {
    /// Not TCP (for [`crate::gso_udp`]: UDP) over IPv4 or IPv6 where the metadata says the
    /// L3 header is (or an IPv4 fragment, or `gso_size` 0).
    NotTcp,
    /// A header runs past the end of the frame.
    Malformed,
    /// A `gso_size` below [`MIN_MSS`] (for a UDP super-frame: one that makes more than
    /// [`crate::gso_udp::MAX_SEGMENTS`] datagrams).
    MssTooSmall,
    /// The (inner) IP packet exceeds 64 KiB.
    TooLong,
}

impl GsoError {
    /// Every reason, in the order of the drop counters ([`GsoError::index`]).
    pub const ALL: [GsoError; 4] = [
        GsoError::NotTcp,
        GsoError::Malformed,
        GsoError::MssTooSmall,
        GsoError::TooLong,
    ];

    /// The reason's index in per-reason drop counters.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The reason as `dpif-netdev/pmd-drop-show` words it.
    pub fn text(self) -> &'static str {
        match self {
            GsoError::NotTcp => "super-frame not TCP or UDP over IP",
            GsoError::Malformed => "super-frame headers past its end",
            GsoError::MssTooSmall => "super-frame gso_size too small",
            GsoError::TooLong => "super-frame over 64 KiB",
        }
    }

    /// The reason as drop counters name it.
    pub fn name(self) -> &'static str {
        match self {
            GsoError::NotTcp => "gso_not_tcp",
            GsoError::Malformed => "gso_malformed",
            GsoError::MssTooSmall => "gso_mss_too_small",
            GsoError::TooLong => "gso_too_long",
        }
    }
}

/// Where a super-frame's headers are, as found by [`TcpSuper::of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSuper {
    /// Offset of the IP header.
    pub l3: usize,
    /// Offset of the TCP header.
    pub l4: usize,
    /// Bytes of all headers, from the Ethernet header to the end of the TCP options: what
    /// every segment repeats.
    pub hdr_len: usize,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
    /// TCP payload bytes per segment.
    pub mss: usize,
}

impl TcpSuper {
    /// Finds the IP and TCP headers of super-frame `p` from its L3 offset (`meta.l3`, set by
    /// extraction and kept by the actions that move headers), or, for a packet that has not
    /// been through extraction (`meta.l3` unset), after its Ethernet header and up to two
    /// VLAN tags. IPv6 hop-by-hop, routing and destination options headers are skipped.
    pub fn of(p: &Packet) -> Result<TcpSuper, GsoError> {
        let mss = usize::from(p.meta.gso_size);
        if mss == 0 {
            return Err(GsoError::NotTcp);
        }
        if mss < usize::from(MIN_MSS) {
            return Err(GsoError::MssTooSmall);
        }
        let (l3, l4, ipv6) = ip_l4(p, IpProtocol::TCP)?;
        let d = p.data();
        let th = d.get(l4..l4 + 20).ok_or(GsoError::Malformed)?;
        let doff = usize::from(th[12] >> 4) * 4;
        let hdr_len = l4 + doff;
        if doff < 20 || hdr_len > d.len() {
            return Err(GsoError::Malformed);
        }
        // IPv4's total length or IPv6's payload length must hold the whole frame's.
        let ip_len = d.len() - l3 - if ipv6 { 40 } else { 0 };
        if ip_len > usize::from(u16::MAX) {
            return Err(GsoError::TooLong);
        }
        Ok(TcpSuper {
            l3,
            l4,
            hdr_len,
            ipv6,
            mss,
        })
    }

    /// Number of segments `p` makes: its payload in pieces of `mss`, at least one.
    pub fn n_segments(&self, p: &Packet) -> usize {
        (p.len() - self.hdr_len).div_ceil(self.mss).max(1)
    }

    /// Segment `k` (from 0) of super-frame `p`, in a buffer from `pool`, with `p`'s metadata
    /// (and tunnel metadata) and `gso_size` 0. `k` must be below [`Self::n_segments`].
    pub fn segment(&self, p: &Packet, k: usize, pool: &mut Pool) -> Packet {
        let d = p.data();
        let n = self.n_segments(p);
        let start = (self.hdr_len + k * self.mss).min(d.len());
        let end = (start + self.mss).min(d.len());
        let mut s = pool.packet_from_parts(&d[..self.hdr_len], &d[start..end], p.meta.in_port);
        s.copy_meta_from(p);
        s.meta.gso_size = 0;
        let (l3, l4) = (self.l3, self.l4);
        let f = s.data_mut();
        set_ip_len(f, l3, self.ipv6);
        if !self.ipv6 {
            let id = u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]);
            set16(f, l3 + 4, id.wrapping_add(k as u16));
            ipv4_header_checksum(f, l3, l4);
        }
        let seq = u32::from_be_bytes([f[l4 + 4], f[l4 + 5], f[l4 + 6], f[l4 + 7]]);
        let seq = seq.wrapping_add((k * self.mss) as u32);
        f[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
        if k + 1 < n {
            f[l4 + 13] &= !(FIN | PSH);
        }
        if k > 0 {
            f[l4 + 13] &= !CWR;
        }
        set16(f, l4 + 16, 0);
        let sum = checksum::combine(&[pseudo(f, l3, l4, self.ipv6), checksum::data(&f[l4..])]);
        set16(f, l4 + 16, !sum);
        s
    }
}

/// Where the IP and transport headers of super-frame `p` are (`meta.l3`, or after the
/// Ethernet header and up to two VLAN tags when extraction has not set it), and whether the
/// IP header is IPv6, when the transport protocol is `proto`: `NotTcp` for another protocol,
/// an IPv4 fragment or no IP at all (the reason names TCP, the first kind of super-frame).
/// IPv6 hop-by-hop, routing and destination options headers are skipped.
pub(crate) fn ip_l4(p: &Packet, proto: IpProtocol) -> Result<(usize, usize, bool), GsoError> {
    let d = p.data();
    let l3 = match p.meta.l3 {
        NO_OFS => ethernet_l3(d)?,
        l3 => usize::from(l3),
    };
    let first = *d.get(l3).ok_or(GsoError::Malformed)?;
    match first >> 4 {
        4 => {
            let h = d.get(l3..l3 + 20).ok_or(GsoError::Malformed)?;
            let ihl = usize::from(h[0] & 0xf) * 4;
            if h[9] != proto.0 || u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0 {
                return Err(GsoError::NotTcp);
            }
            if ihl < 20 {
                return Err(GsoError::Malformed);
            }
            Ok((l3, l3 + ihl, false))
        }
        6 => {
            let h = d.get(l3..l3 + 40).ok_or(GsoError::Malformed)?;
            let (mut l4, mut next) = (l3 + 40, h[6]);
            for _ in 0..4 {
                if !matches!(next, 0 | 43 | 60) {
                    break;
                }
                let e = d.get(l4..l4 + 2).ok_or(GsoError::Malformed)?;
                next = e[0];
                l4 += (usize::from(e[1]) + 1) * 8;
            }
            if next != proto.0 {
                return Err(GsoError::NotTcp);
            }
            Ok((l3, l4, true))
        }
        _ => Err(GsoError::NotTcp),
    }
}

/// The offset of the IP header of Ethernet frame `d` (after up to two VLAN tags).
pub(crate) fn ethernet_l3(d: &[u8]) -> Result<usize, GsoError> {
    let mut at = 12;
    for _ in 0..3 {
        let t = d.get(at..at + 2).ok_or(GsoError::Malformed)?;
        match u16::from_be_bytes([t[0], t[1]]) {
            0x8100 | 0x88a8 => at += 4,
            0x0800 | 0x86dd => return Ok(at + 2),
            _ => return Err(GsoError::NotTcp),
        }
    }
    Err(GsoError::NotTcp)
}

/// Makes super-frame `p` ready for a device that segments it: IPv4 total length (and header
/// checksum) or IPv6 payload length for the whole frame, and the TCP checksum field set to the
/// pseudo-header sum (not inverted), which the device completes over the TCP header and
/// payload as for Linux's `CHECKSUM_PARTIAL`. Returns where the headers are, for the device's
/// offload descriptor (`virtio_net_hdr`: `csum_start` = `l4`, `hdr_len`, `gso_size` = `mss`).
pub fn prepare_partial(p: &mut Packet) -> Result<TcpSuper, GsoError> {
    let t = TcpSuper::of(p)?;
    let (l3, l4) = (t.l3, t.l4);
    let f = p.data_mut();
    let len = f.len();
    if t.ipv6 {
        let plen = u16::try_from(len - l3 - 40).map_err(|_| GsoError::TooLong)?;
        set16(f, l3 + 4, plen);
    } else {
        let total = u16::try_from(len - l3).map_err(|_| GsoError::TooLong)?;
        set16(f, l3 + 2, total);
        ipv4_header_checksum(f, l3, l4);
    }
    set16(f, l4 + 16, pseudo(f, l3, l4, t.ipv6));
    Ok(t)
}

/// Whether the TCP header of a super-frame found as `t` has CWR set (Linux marks such a
/// super-frame `SKB_GSO_TCP_ECN`, virtio's `VIRTIO_NET_HDR_GSO_ECN`).
pub fn has_cwr(p: &Packet, t: &TcpSuper) -> bool {
    p.data()[t.l4 + 13] & CWR != 0
}

/// The TCP pseudo-header sum of the segment `f` (its addresses, and the TCP length from `l4`
/// to the end of `f`).
pub(crate) fn pseudo(f: &[u8], l3: usize, l4: usize, ipv6: bool) -> u16 {
    let tcp_len = f.len() - l4;
    if ipv6 {
        let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&f[o..o + 16]).expect("16"));
        checksum::pseudo_header_v6(&a(l3 + 8), &a(l3 + 24), IpProtocol::TCP, tcp_len as u32)
    } else {
        let a = |o: usize| Ipv4Addr::from(<[u8; 4]>::try_from(&f[o..o + 4]).expect("4"));
        checksum::pseudo_header_v4(&a(l3 + 12), &a(l3 + 16), IpProtocol::TCP, tcp_len as u16)
    }
}

pub(crate) fn ipv4_header_checksum(f: &mut [u8], l3: usize, l4: usize) {
    set16(f, l3 + 10, 0);
    let c = !checksum::data(&f[l3..l4]);
    set16(f, l3 + 10, c);
}

/// Sets the IPv6 payload length or the IPv4 total length of the packet whose IP header is at
/// `l3` of `f` to what follows it in `f`.
pub(crate) fn set_ip_len(f: &mut [u8], l3: usize, ipv6: bool) {
    let len = f.len();
    if ipv6 {
        set16(f, l3 + 4, (len - l3 - 40) as u16);
    } else {
        set16(f, l3 + 2, (len - l3) as u16);
    }
}

#[inline]
pub(crate) fn set16(f: &mut [u8], at: usize, v: u16) {
    f[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
