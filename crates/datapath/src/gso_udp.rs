//! UDP segmentation offload (USO, Linux's `SKB_GSO_UDP_L4`, virtio's `GSO_UDP_L4`): software
//! segmentation of UDP super-frames.
//!
//! A UDP super-frame is a UDP/IPv4 or UDP/IPv6 packet whose
//! [`PacketMeta::gso_size`](crate::packet::PacketMeta::gso_size) is not zero: what a socket
//! with `UDP_SEGMENT` (or a guest that negotiated `HOST_USO`) hands a device that takes USO,
//! before it is cut into datagrams. Its UDP payload is a run of datagrams of `gso_size`
//! bytes each (the last one shorter or equal); each segment is one whole UDP datagram with its
//! own UDP header, as Linux's `__udp_gso_segment` makes them: the IP and UDP headers repeated,
//! IPv4 total length, identification (+1 per segment) and header checksum, IPv6 payload
//! length, UDP length and a full UDP checksum (`0xffff` for a sum of 0), whatever the
//! super-frame's own UDP length and checksum fields held (a tap leaves the pseudo-header sum
//! of the whole datagram there, `CHECKSUM_PARTIAL`).
//!
//! A super-frame that would make more than [`MAX_SEGMENTS`] datagrams (Linux's
//! `UDP_MAX_SEGMENTS`: no socket sends one) has too small a `gso_size`
//! ([`GsoError::MssTooSmall`]). Through a VXLAN or GENEVE push, a UDP super-frame is
//! encapsulated whole and cut after it ([`crate::gso_tunnel`]), as a TCP one. Segments are
//! pool packets, so segmentation allocates nothing once the pool is warm.

use core::net::{Ipv4Addr, Ipv6Addr};

use wire::IpProtocol;
use wire::checksum;

use crate::gso::{GsoError, ip_l4, ipv4_header_checksum, set_ip_len, set16};
use crate::packet::{Packet, Pool};

/// The most datagrams one super-frame may make (Linux's `UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = 128;

/// Where a UDP super-frame's headers are, as found by [`UdpSuper::of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpSuper {
    /// Offset of the IP header.
    pub l3: usize,
    /// Offset of the UDP header.
    pub l4: usize,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
    /// UDP payload bytes per datagram (`gso_size`).
    pub size: usize,
}

impl UdpSuper {
    /// The IP and UDP headers of UDP super-frame `p` (of either kind: segmentation or
    /// fragmentation, [`crate::gso_ufo`]) and its `gso_size`, its UDP header within the frame
    /// and its IP packet within 64 KiB: `NotTcp` for no super-frame or one not UDP over IPv4
    /// or IPv6 (or an IPv4 fragment), `Malformed`, `TooLong`.
    pub(crate) fn headers(p: &Packet) -> Result<UdpSuper, GsoError> {
        let size = usize::from(p.meta.gso_size);
        if size == 0 {
            return Err(GsoError::NotTcp);
        }
        let (l3, l4, ipv6) = ip_l4(p, IpProtocol::UDP)?;
        let len = p.len();
        if l4 + 8 > len {
            return Err(GsoError::Malformed);
        }
        let ip_len = len - l3 - if ipv6 { 40 } else { 0 };
        if ip_len > usize::from(u16::MAX) {
            return Err(GsoError::TooLong);
        }
        Ok(UdpSuper { l3, l4, ipv6, size })
    }

    /// Finds the IP and UDP headers of super-frame `p` (as [`crate::gso::TcpSuper::of`] finds
    /// a TCP one's). `NotTcp` (not a super-frame of a kind the switch takes) when `p` is not
    /// UDP over IPv4 or IPv6, or an IPv4 fragment.
    pub fn of(p: &Packet) -> Result<UdpSuper, GsoError> {
        let t = UdpSuper::headers(p)?;
        if t.n_segments(p) > MAX_SEGMENTS {
            return Err(GsoError::MssTooSmall);
        }
        Ok(t)
    }

    /// Bytes of the headers every datagram repeats: Ethernet to the end of the UDP header.
    pub fn hdr_len(&self) -> usize {
        self.l4 + 8
    }

    /// Number of datagrams `p` makes: its UDP payload in pieces of `size`, at least one.
    pub fn n_segments(&self, p: &Packet) -> usize {
        (p.len() - self.hdr_len()).div_ceil(self.size).max(1)
    }

    /// Datagram `k` (from 0) of super-frame `p`, in a buffer from `pool`, with `p`'s metadata
    /// (and tunnel metadata) and `gso_size` 0. `k` must be below [`Self::n_segments`].
    pub fn segment(&self, p: &Packet, k: usize, pool: &mut Pool) -> Packet {
        let d = p.data();
        let hl = self.hdr_len();
        let start = (hl + k * self.size).min(d.len());
        let end = (start + self.size).min(d.len());
        let mut s = pool.packet_from_parts(&d[..hl], &d[start..end], p.meta.in_port);
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
        let udp_len = (f.len() - l4) as u16;
        set16(f, l4 + 4, udp_len);
        set16(f, l4 + 6, 0);
        let sum = checksum::combine(&[
            udp_pseudo(f, l3, self.ipv6, udp_len),
            checksum::data(&f[l4..]),
        ]);
        let c = !sum;
        set16(f, l4 + 6, if c == 0 { 0xffff } else { c });
        s
    }

    /// Makes super-frame `p` ready for a device that segments it: IPv4 total length (and
    /// header checksum) or IPv6 payload length, and the UDP length for the whole frame, the
    /// UDP checksum field set to the pseudo-header sum of the whole datagram (not inverted),
    /// as Linux's `CHECKSUM_PARTIAL` for `SKB_GSO_UDP_L4` has it. Returns where the headers
    /// are, for the device's offload descriptor (`csum_start` = `l4`, `csum_offset` 6).
    pub fn prepare_partial(p: &mut Packet) -> Result<UdpSuper, GsoError> {
        let t = UdpSuper::of(p)?;
        let (l3, l4) = (t.l3, t.l4);
        let f = p.data_mut();
        set_ip_len(f, l3, t.ipv6);
        if !t.ipv6 {
            ipv4_header_checksum(f, l3, l4);
        }
        let udp_len = (f.len() - l4) as u16;
        set16(f, l4 + 4, udp_len);
        set16(f, l4 + 6, udp_pseudo(f, l3, t.ipv6, udp_len));
        Ok(t)
    }
}

/// Whether super-frame `p` is a UDP segmentation one (else TCP, UFO
/// ([`crate::gso_ufo`]), or not one the switch takes).
#[inline(never)]
pub fn is_udp(p: &Packet) -> bool {
    p.meta.gso_size != 0 && !p.meta.ufo() && ip_l4(p, IpProtocol::UDP).is_ok()
}

/// The UDP pseudo-header sum of the datagram whose IP header is at `l3` of `f`.
pub(crate) fn udp_pseudo(f: &[u8], l3: usize, ipv6: bool, udp_len: u16) -> u16 {
    if ipv6 {
        let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&f[o..o + 16]).expect("16"));
        checksum::pseudo_header_v6(&a(l3 + 8), &a(l3 + 24), IpProtocol::UDP, u32::from(udp_len))
    } else {
        let a = |o: usize| Ipv4Addr::from(<[u8; 4]>::try_from(&f[o..o + 4]).expect("4"));
        checksum::pseudo_header_v4(&a(l3 + 12), &a(l3 + 16), IpProtocol::UDP, udp_len)
    }
}
