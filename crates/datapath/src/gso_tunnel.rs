//! TCP and UDP (USO) super-frames through a UDP tunnel push (VXLAN, GENEVE; IPv4 or IPv6
//! underlay): the super-frame is encapsulated once, whole, and cut into segments after the
//! push, as Linux's `skb_udp_tunnel_segment` cuts an encapsulated GSO packet (the inner
//! segments as `tcp_gso_segment` or `__udp_gso_segment` makes them, the outer headers
//! repeated in front of each). The inner kind is an [`Inner`]; a UFO super-frame is
//! fragmented before the push (Linux takes no UFO inside a tunnel).
//!
//! # An encapsulated super-frame
//! [`push`] writes the tunnel header in front of a super-frame (the same [`tnl_push`] every
//! packet gets: outer addresses, entropy source port and ECN from the inner headers) and
//! leaves the packet's [`PacketMeta::l3`](crate::packet::PacketMeta::l3) and `l4` at the
//! *inner* IP and TCP (or UDP) headers, the ones [`TcpSuper`] (or [`UdpSuper`]) segments
//! by; `gso_size` stays the MSS (or datagram size).
//! The outer IP header is the one after the frame's Ethernet header, so a super-frame whose
//! `l3` lies further on is an encapsulated one ([`is_encapsulated`]). Only a push whose
//! remaining actions are outputs keeps a super-frame whole (nothing in between parses the
//! frame again and moves `l3` back to the outer header); any other is preceded by
//! segmentation, as before.
//!
//! The whole frame's outer lengths: a 64 KiB inner packet plus 50 or more bytes of tunnel
//! headers does not fit IPv4's total length, IPv6's payload length or UDP's length. The whole
//! frame holds each length when it fits in 16 bits and 0 when it does not (Linux's
//! convention for its GSO packets beyond 64 KiB, whose length is the buffer's), the IPv4
//! header checksum computed over what it holds. Nothing reads them before segmentation, which
//! writes every segment's own.
//!
//! # The segments
//! Each segment of an encapsulated super-frame ([`Outer::fix`], after
//! [`TcpSuper::segment`] made the inner headers): outer IPv4 total length and header checksum
//! (the identification as pushed: a tunnel port numbers every packet it pushes alike), or
//! IPv6 payload length; outer UDP length; outer UDP checksum 0 when the push left it 0 (the
//! port's `csum` off, OVS's default for VXLAN and GENEVE over IPv4), else computed by local
//! checksum offload (RFC 7606 §2.2's LCO, Linux's `lco_csum`): the inner TCP checksum being
//! complete, the sum of the inner TCP segment is the complement of its pseudo-header sum, so
//! only the outer pseudo-header and the bytes from the UDP header to the inner TCP header are
//! summed, not the payload a second time. The same holds of an inner UDP datagram, whose
//! checksum [`UdpSuper::segment`] completes ([`Outer::fix_udp`]). The tunnel header is the
//! pushed one, unchanged.
//!
//! # Received whole
//! A tap that took UDP-tunnel GSO hands over an encapsulated TCP or UDP (USO) super-frame
//! whole (`netdev::vnet_tnl`): one packet marked
//! [`PacketMeta::tunnel_gso`](crate::packet::PacketMeta::tunnel_gso) ([`is_received`]), its
//! outer lengths the whole frame's. Extraction and the lookup see its outer headers, as they
//! would a packet's; its `l3` and `l4` are theirs, so the inner offsets are not kept but found
//! again in the frame when needed ([`inner_l3_after`]: VXLAN's or GENEVE's header, then the
//! inner Ethernet header), which the receiving port checked against the kernel's
//! `inner_nh_offset`. What becomes of it:
//! - `tnl_pop` strips the outer headers once ([`crate::tunnel`]): the outer lengths and the
//!   outer UDP checksum (a pseudo-header sum) are those of a GSO frame and are neither read
//!   nor verified; every other check stays. The next pass sees the plain TCP or USO
//!   super-frame the push carried (mark cleared), which goes whole to a queue that takes its
//!   kind (TSO; USO for a UDP one: a `tap` whose kernel took it, a guest with `GUEST_USO4/6`)
//!   and is cut at the output otherwise ([`crate::gso`], [`crate::gso_udp`]).
//! - An output first makes it what [`push`] leaves ([`settle_received`]: `l3`, `l4` at the
//!   inner headers, mark cleared), then, as for a pushed one, hands it whole to a queue that
//!   takes UDP-tunnel GSO when its lengths fit, and otherwise cuts it with the outer headers
//!   written on each segment ([`Outer::fix`], [`Outer::fix_udp`]): the segments (datagrams)
//!   a cut on receive made.
//! - Rewrites of its outer headers' fields (`set(ipv4(...))`, `set(udp(...))`, Ethernet)
//!   apply to the whole frame; the segments' outer lengths and checksums are written after.
//!   `tnl_pop`, recirculation and `ct()` take it whole too.
//! - An action that needs the frame as it would leave (`userspace`, another `tnl_push`, an
//!   MPLS or Ethernet push or pop) runs on its segments: the pass cuts it first.
//! - Megaflow statistics count it as one packet of its whole length, as a plain super-frame
//!   from a tap with TSO.
//!
//! A frame whose headers no longer allow this (neither TCP nor UDP inside, or a UDP one that
//! would make more than [`crate::gso_udp::MAX_SEGMENTS`] datagrams) is a counted `gso_*`
//! drop; a pop that fails is a counted `tunnel_pop_*` drop.
//!
//! # Whole to a device
//! A queue that takes UDP-tunnel GSO ([`crate::port::TxQueue::tnl_gso`]: a `tap` on Linux
//! 6.17 and later) gets an encapsulated super-frame whole when its outer lengths fit 16 bits
//! ([`fits_whole`]), made ready by [`prepare_partial`] (inner headers as for a plain
//! super-frame, outer lengths of the whole frame, the outer UDP checksum field the outer
//! pseudo-header sum when the checksum is on, as Linux's `SKB_GSO_UDP_TUNNEL_CSUM` has it);
//! an inner UDP one by [`prepare_partial_udp`] (the inner UDP checksum field the inner
//! pseudo-header sum, as for a plain USO super-frame).

use core::net::{Ipv4Addr, Ipv6Addr};

use wire::IpProtocol;
use wire::checksum;

use crate::actions::TnlTemplate;
use crate::gso::{
    GsoError, TcpSuper, ethernet_l3, ipv4_header_checksum, pseudo, set_ip_len, set16,
};
pub use crate::gso_inner::Inner;
use crate::gso_udp::{UdpSuper, udp_pseudo};
use crate::packet::{NO_OFS, Packet};
use crate::rewrite::tnl_push;

/// Whether a push of `t` can keep super-frames whole: a UDP tunnel (VXLAN, GENEVE), whose
/// segments need nothing of the tunnel header but its lengths and checksum.
pub fn keeps_whole(t: &TnlTemplate) -> bool {
    t.udp_ofs.is_some() && t.erspan.is_none() && t.gre_csum_ofs.is_none()
}

/// Pushes the tunnel header of `t` in front of super-frame `p` and leaves it whole, an
/// encapsulated super-frame (module documentation). A frame that is not a super-frame
/// [`Inner::of`] takes (TCP or USO), or one already encapsulated, is refused and left as it
/// was.
pub fn push(p: &mut Packet, t: &TnlTemplate) -> Result<(), GsoError> {
    if is_encapsulated(p) {
        return Err(GsoError::NotTcp);
    }
    let inner = Inner::of(p)?;
    let hl = t.header.len();
    tnl_push(p, t).map_err(|_| GsoError::Malformed)?;
    let f = p.data_mut();
    let len = f.len();
    let ol3 = t.ip_ofs;
    let fit = |n: usize| u16::try_from(n).unwrap_or(0);
    if t.ipv6 {
        set16(f, ol3 + 4, fit(len - ol3 - 40));
    } else {
        set16(f, ol3 + 2, fit(len - ol3));
        let ihl = usize::from(f[ol3] & 0xf) * 4;
        ipv4_header_checksum(f, ol3, ol3 + ihl);
    }
    if let Some(u) = t.udp_ofs {
        set16(f, u + 4, fit(len - u));
    }
    p.meta.l3 = (inner.l3() + hl) as u16;
    p.meta.l4 = (inner.l4() + hl) as u16;
    Ok(())
}

/// Whether encapsulated super-frame `p` can go whole to a device that segments it (a `tap`
/// that took UDP-tunnel GSO): its outer IP and UDP lengths fit in 16 bits (a receiver's
/// stack drops a UDP datagram whose length field is 0).
pub fn fits_whole(p: &Packet) -> bool {
    Outer::l3_of(p).is_some_and(|l3| {
        let ip = p.len() - l3;
        let ipv6 = p.data()[l3] >> 4 == 6;
        (if ipv6 { ip.saturating_sub(40) } else { ip }) <= usize::from(u16::MAX)
    })
}

/// Makes encapsulated super-frame `p` ready for a device that segments it (virtio's
/// UDP-tunnel GSO, Linux's `SKB_GSO_UDP_TUNNEL`): the inner headers as
/// [`crate::gso::prepare_partial`] leaves a plain super-frame's (the inner TCP checksum
/// field the pseudo-header sum); the outer IP and UDP lengths of the whole frame (and the
/// IPv4 header checksum); an outer UDP checksum that is on ([`Outer::csum`]) set to the outer
/// pseudo-header sum (not inverted), which the device completes for each segment. Returns
/// the inner and outer headers, for the device's offload descriptor. `TooLong` when the outer
/// lengths do not fit ([`fits_whole`]).
pub fn prepare_partial(p: &mut Packet) -> Result<(TcpSuper, Outer), GsoError> {
    settle_received(p)?;
    let inner = crate::gso::prepare_partial(p)?;
    let outer = prepare_outer(p, inner.l3)?;
    Ok((inner, outer))
}

/// [`prepare_partial`] of an encapsulated UDP super-frame (USO in a tunnel, Linux's
/// `SKB_GSO_UDP_L4 | SKB_GSO_UDP_TUNNEL`): the inner headers as
/// [`UdpSuper::prepare_partial`] leaves a plain one's (the inner UDP checksum field the
/// inner pseudo-header sum), the outer ones as for TCP.
pub fn prepare_partial_udp(p: &mut Packet) -> Result<(UdpSuper, Outer), GsoError> {
    settle_received(p)?;
    let inner = UdpSuper::prepare_partial(p)?;
    let outer = prepare_outer(p, inner.l3)?;
    Ok((inner, outer))
}

/// The outer half of [`prepare_partial`]: the outer headers around the inner IP header at
/// `inner_l3`, their lengths those of the whole frame, an outer UDP checksum that is on the
/// outer pseudo-header sum.
fn prepare_outer(p: &mut Packet, inner_l3: usize) -> Result<Outer, GsoError> {
    let outer = Outer::around(p, inner_l3)?.ok_or(GsoError::NotTcp)?;
    if !fits_whole(p) {
        return Err(GsoError::TooLong);
    }
    let f = p.data_mut();
    let udp_len = outer.fix_lengths(f);
    if outer.csum {
        set16(f, outer.l4 + 6, outer.udp_pseudo(f, udp_len));
    }
    Ok(outer)
}

/// Whether super-frame `p` is encapsulated: its `l3` lies beyond the IP header that follows
/// its Ethernet header, or it was received so ([`is_received`]).
#[inline]
pub fn is_encapsulated(p: &Packet) -> bool {
    p.meta.gso_size != 0
        && (p.meta.tunnel_gso()
            || p.meta.l3 != NO_OFS && Outer::l3_of(p).is_some_and(|o| o < usize::from(p.meta.l3)))
}

/// Whether `p` is an encapsulated TCP or UDP (USO) super-frame received whole, its `l3` and
/// `l4` still the outer headers' ([`PacketMeta::tunnel_gso`](crate::packet::PacketMeta::tunnel_gso)).
#[inline]
pub fn is_received(p: &Packet) -> bool {
    p.meta.gso_size != 0 && p.meta.tunnel_gso()
}

/// The offset of the inner IP header of the encapsulated frame `d` whose outer UDP header is
/// at `udp`: after the tunnel header (GENEVE's 8 bytes and its options when its protocol
/// field holds Transparent Ethernet Bridging, 0x6558, where VXLAN's reserved bytes are 0;
/// VXLAN's 8 bytes otherwise), the inner Ethernet header and up to two VLAN tags. `None`
/// when `d` ends first or the inner Ethernet header is not followed by IP.
pub fn inner_l3_after(d: &[u8], udp: usize) -> Option<usize> {
    let t = d.get(udp + 8..udp + 16)?;
    let tunnel = if u16::from_be_bytes([t[2], t[3]]) == 0x6558 {
        8 + usize::from(t[0] & 0x3f) * 4
    } else {
        8
    };
    let eth = udp + 8 + tunnel;
    let l3 = eth + ethernet_l3(d.get(eth..)?).ok()?;
    matches!(d.get(l3)? >> 4, 4 | 6).then_some(l3)
}

/// Writes the outer IP length (and IPv4 header checksum) and UDP length of encapsulated
/// super-frame `p`, whose outer headers `outer` found, as those of the whole frame: what a
/// receiver does to a frame it keeps whole, whose lengths the sender may have left 0, so that
/// its outer headers parse as a packet's. `TooLong` (nothing written) when they do not fit
/// ([`fits_whole`]).
pub fn set_outer_lengths(p: &mut Packet, outer: &Outer) -> Result<(), GsoError> {
    if !fits_whole(p) {
        return Err(GsoError::TooLong);
    }
    outer.fix_lengths(p.data_mut());
    Ok(())
}

/// Makes an encapsulated super-frame received whole ([`is_received`]) what [`push`] leaves:
/// `l3` and `l4` at the inner IP and TCP or UDP headers, found in the frame
/// ([`inner_l3_after`], then [`Inner::of`]), the mark cleared; then [`Outer::around`],
/// [`prepare_partial`] (or [`prepare_partial_udp`]) and the segmentation take it as they take
/// a pushed one. Anything else is left as it is. An error (the mark cleared) when its headers
/// are no longer those of TCP or UDP in a UDP tunnel: the caller drops it.
pub fn settle_received(p: &mut Packet) -> Result<(), GsoError> {
    if !is_received(p) {
        return Ok(());
    }
    p.meta.set_tunnel_gso(false);
    let outer = Outer::around(p, p.len())?.ok_or(GsoError::NotTcp)?;
    let l3 = inner_l3_after(p.data(), outer.l4).ok_or(GsoError::Malformed)?;
    p.meta.l3 = l3 as u16;
    let inner = Inner::of(p)?;
    p.meta.l4 = inner.l4() as u16;
    Ok(())
}

/// The outer IP and UDP headers of an encapsulated super-frame, as each segment repeats them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outer {
    /// Offset of the outer IP header.
    pub l3: usize,
    /// Offset of the outer UDP header.
    pub l4: usize,
    /// The outer IP header is IPv6 (else IPv4).
    pub ipv6: bool,
    /// The segments carry a UDP checksum (the pushed one is not 0).
    pub csum: bool,
}

impl Outer {
    /// The outer headers of super-frame `p`, whose inner headers `inner` found; `None` when
    /// `p` is not encapsulated, an error when its outer headers are not IP and UDP.
    pub fn of(p: &Packet, inner: &TcpSuper) -> Result<Option<Outer>, GsoError> {
        Self::around(p, inner.l3)
    }

    /// The outer headers of super-frame `p` whose inner IP header is at `inner_l3` (of any
    /// transport), as [`Outer::of`] finds them.
    pub fn around(p: &Packet, inner_l3: usize) -> Result<Option<Outer>, GsoError> {
        let Some(l3) = Self::l3_of(p).filter(|&o| o < inner_l3) else {
            return Ok(None);
        };
        let d = p.data();
        let (l4, ipv6) = match d[l3] >> 4 {
            4 => {
                let h = d.get(l3..l3 + 20).ok_or(GsoError::Malformed)?;
                if h[9] != IpProtocol::UDP.0 {
                    return Err(GsoError::NotTcp);
                }
                (l3 + usize::from(h[0] & 0xf) * 4, false)
            }
            _ => {
                let h = d.get(l3..l3 + 40).ok_or(GsoError::Malformed)?;
                if h[6] != IpProtocol::UDP.0 {
                    return Err(GsoError::NotTcp);
                }
                (l3 + 40, true)
            }
        };
        if l4 < l3 + 20 || l4 + 8 > inner_l3 {
            return Err(GsoError::Malformed);
        }
        let csum = d[l4 + 6] | d[l4 + 7] != 0;
        Ok(Some(Outer { l3, l4, ipv6, csum }))
    }

    /// The offset of the IP header after `p`'s Ethernet header, if it has one.
    fn l3_of(p: &Packet) -> Option<usize> {
        let d = p.data();
        let l3 = ethernet_l3(d).ok()?;
        matches!(d.get(l3)? >> 4, 4 | 6).then_some(l3)
    }

    /// Writes the outer lengths and checksums of segment `s`, whose inner headers `inner`
    /// describes and are complete (its TCP checksum included), and points its `l3` and `l4`
    /// at the outer headers.
    pub fn fix(&self, s: &mut Packet, inner: &TcpSuper) {
        self.fix_lco(s, inner.l4, |f| pseudo(f, inner.l3, inner.l4, inner.ipv6));
    }

    /// [`Outer::fix`] of a datagram of a UDP super-frame, whose inner headers `inner`
    /// describes and are complete (its UDP checksum included, as [`UdpSuper::segment`] makes
    /// it): the outer UDP checksum by local checksum offload too.
    pub fn fix_udp(&self, s: &mut Packet, inner: &UdpSuper) {
        self.fix_lco(s, inner.l4, |f| {
            udp_pseudo(f, inner.l3, inner.ipv6, (f.len() - inner.l4) as u16)
        });
    }

    /// Writes the outer lengths and checksum of segment `s` whose inner transport header
    /// (at `inner_l4`) has a complete checksum, `inner_pseudo` giving its pseudo-header sum:
    /// the inner segment then sums to the complement of that.
    #[inline]
    fn fix_lco(&self, s: &mut Packet, inner_l4: usize, inner_pseudo: impl Fn(&[u8]) -> u16) {
        let (l3, l4) = (self.l3, self.l4);
        let f = s.data_mut();
        let udp_len = self.fix_lengths(f);
        if self.csum {
            set16(f, l4 + 6, 0);
            let ph = self.udp_pseudo(f, udp_len);
            let sum = if (inner_l4 - l4).is_multiple_of(2) {
                let inner = !inner_pseudo(f);
                checksum::combine(&[checksum::data(&f[l4..inner_l4]), inner])
            } else {
                checksum::data(&f[l4..])
            };
            let c = !checksum::combine(&[ph, sum]);
            set16(f, l4 + 6, if c == 0 { 0xffff } else { c });
        }
        s.meta.l3 = l3 as u16;
        s.meta.l4 = l4 as u16;
    }

    /// Writes segment `f`'s outer IP length (and IPv4 header checksum) and UDP length, which
    /// it returns.
    fn fix_lengths(&self, f: &mut [u8]) -> u16 {
        let (l3, l4) = (self.l3, self.l4);
        set_ip_len(f, l3, self.ipv6);
        if !self.ipv6 {
            ipv4_header_checksum(f, l3, l4);
        }
        let udp_len = (f.len() - l4) as u16;
        set16(f, l4 + 4, udp_len);
        udp_len
    }

    fn udp_pseudo(&self, f: &[u8], udp_len: u16) -> u16 {
        let l3 = self.l3;
        if self.ipv6 {
            let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&f[o..o + 16]).expect("16"));
            let (src, dst) = (a(l3 + 8), a(l3 + 24));
            checksum::pseudo_header_v6(&src, &dst, IpProtocol::UDP, u32::from(udp_len))
        } else {
            let a = |o: usize| Ipv4Addr::from(<[u8; 4]>::try_from(&f[o..o + 4]).expect("4"));
            checksum::pseudo_header_v4(&a(l3 + 12), &a(l3 + 16), IpProtocol::UDP, udp_len)
        }
    }
}
