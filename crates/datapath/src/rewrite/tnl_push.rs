//! `tnl_push`: tunnel encapsulation from the header template the action compiler built
//! ([`TnlTemplate`], OVS's `netdev_tnl_push_udp_header()` and `netdev_gre_push_header()`):
//! the template copied in front of the frame, then what depends on the packet (outer lengths,
//! the IPv4 checksum from the template's precomputed sum, an entropy UDP source port from the
//! inner headers, the outer ECN field from the inner packet's, and the UDP or GRE checksum
//! when the tunnel asks for one). The batch's variant loads the template once.

use std::sync::atomic::{AtomicU32, Ordering};

use wire::checksum;

use crate::actions::TnlTemplate;
use crate::packet::{NO_OFS, Packet};

use super::RewriteError;
use super::hash::{dp_hash_l4, fmix32, hash_l4_ipv4};
use super::ip::ip_ecn;
use super::put16;

/// OVS's default range of tunnel UDP source ports, `min..max`: 32768-61000.
pub const DEFAULT_EGRESS_PORT_RANGE: (u16, u16) = (32768, 61000);

/// The range of UDP source ports pushed tunnel headers take (`tnl/egress_port_range`), the
/// minimum in the high half and the maximum in the low one. Read when a `tnl_push` action is
/// compiled ([`TnlTemplate::build`](TnlTemplate::build)), never per packet: whoever changes it
/// flushes the datapath's flows so that they are compiled again.
static EGRESS_PORT_RANGE: AtomicU32 =
    AtomicU32::new((DEFAULT_EGRESS_PORT_RANGE.0 as u32) << 16 | DEFAULT_EGRESS_PORT_RANGE.1 as u32);

/// The tunnel UDP source port range, `(min, max)`: a pushed header's port is in `min..max`
/// (`min` itself when they are equal), as OVS's `netdev_tnl_get_src_port()` picks it.
pub fn egress_port_range() -> (u16, u16) {
    let v = EGRESS_PORT_RANGE.load(Ordering::Relaxed);
    ((v >> 16) as u16, v as u16)
}

/// Sets the tunnel UDP source port range (`tnl/egress_port_range MIN MAX`), the bounds in
/// either order as OVS takes them. Flows compiled before keep the range they were compiled with.
pub fn set_egress_port_range(a: u16, b: u16) {
    let (min, max) = (a.min(b), a.max(b));
    EGRESS_PORT_RANGE.store(u32::from(min) << 16 | u32::from(max), Ordering::Relaxed);
}

/// The entropy source port for `hash` in a template's range: the hash's high bits scaled to the
/// span, as OVS's `netdev_tnl_get_src_port()`.
#[inline(always)]
fn entropy_port(hash: u32, t: &TnlTemplate) -> u16 {
    t.port_min
        .wrapping_add(((u64::from(hash) * u64::from(t.port_span)) >> 32) as u16)
}

/// Copies a tunnel header template (`dst` and `src` of equal length): in 32-byte blocks, the
/// last one overlapping its predecessor, so the common 38- to 70-byte headers take two or
/// three unaligned vector moves instead of a call to `memcpy`.
#[inline(always)]
fn copy_header(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n < 32 || dst.len() != n {
        dst.copy_from_slice(src);
        return;
    }
    let mut at = 0;
    while at + 32 < n {
        dst[at..at + 32].copy_from_slice(&src[at..at + 32]);
        at += 32;
    }
    dst[n - 32..].copy_from_slice(&src[n - 32..]);
}

/// The hash a pushed tunnel header's UDP source port comes from ([`tnl_push`]): the inner
/// packet's addresses, IP protocol and ports, or for a frame that is not IP its Ethernet
/// addresses and type. Read from the headers rather than taken from the packet's flow hash, so
/// that a flow's packets get the same port whichever lookup found their megaflow (the simple
/// match computes no hash). For IPv4, the common case, [`dp_hash_l4`]'s in-line CRC steps
/// without its final mix (the port is the high bits scaled by a multiply, and the mix was the
/// longest part of the push's dependency chain), the ports left out of every fragment.
#[inline(always)]
pub fn entropy_hash(pkt: &Packet) -> u32 {
    entropy_hash_ecn(pkt).0
}

/// [`entropy_hash`] and [`encap_ecn`] together: for IPv4, the common case, the ECN field comes
/// from the header the hash has just read.
#[inline(always)]
fn entropy_hash_ecn(pkt: &Packet) -> (u32, u8) {
    if pkt.meta.packet_type == 0
        && let Some((h, tos)) = hash_l4_ipv4(pkt, false, 0, true)
    {
        return (h, tos & 3);
    }
    (entropy_hash_other(pkt), encap_ecn(pkt))
}

/// [`entropy_hash`] of a packet that is not IPv4, out of line.
#[inline(never)]
fn entropy_hash_other(pkt: &Packet) -> u32 {
    use flow::hash::crc32c_u64;
    let d = pkt.data();
    let l3 = usize::from(pkt.meta.l3);
    let ip = pkt.meta.l3 != NO_OFS && matches!(d.get(l3).map(|b| b >> 4), Some(4 | 6));
    match d.first_chunk::<14>() {
        Some(h) if !ip && pkt.meta.packet_type == 0 => {
            let mut w = [0u8; 8];
            w[..6].copy_from_slice(&h[8..]);
            let mut a = [0u8; 8];
            a.copy_from_slice(&h[..8]);
            fmix32(crc32c_u64(
                crc32c_u64(0, u64::from_ne_bytes(a)),
                u64::from_ne_bytes(w),
            ))
        }
        _ => dp_hash_l4(pkt, false, 0),
    }
}

/// `tnl_push`: prepends the tunnel header template, then fills in what depends on the packet:
/// the outer IP length (and IPv4 checksum, from the template's precomputed sum), the UDP
/// length, a UDP source port from the inner headers ([`entropy_hash`]) when the template has
/// none (in the template's range, [`egress_port_range`] when it was compiled), and the UDP or GRE checksum when the tunnel asks
/// for one. The errors
/// cannot happen with a template [`TnlTemplate::build`](TnlTemplate::build)
/// made (its offsets lie inside its header); they stand where a panic would otherwise be.
#[inline(always)]
pub fn tnl_push(pkt: &mut Packet, t: &TnlTemplate) -> Result<(), RewriteError> {
    tnl_push_as::<false>(pkt, t)
}

/// Whether `t` is the common shape [`tnl_push_as`] has a variant for: IPv4, UDP (VXLAN or
/// GENEVE) with an entropy source port and no checksum.
#[inline(always)]
fn udp4_entropy(t: &TnlTemplate) -> bool {
    !t.ipv6 && t.udp_ofs.is_some() && t.entropy && !t.udp_csum && t.gre_csum_ofs.is_none()
}

/// [`tnl_push`], for the shape [`udp4_entropy`] when `UDP4`: its tests of the template fold
/// away.
#[inline(always)]
fn tnl_push_as<const UDP4: bool>(pkt: &mut Packet, t: &TnlTemplate) -> Result<(), RewriteError> {
    let (ipv6, entropy) = (!UDP4 && t.ipv6, UDP4 || t.entropy);
    let udp_ofs = if UDP4 {
        Some(t.udp_ofs.unwrap_or(0))
    } else {
        t.udp_ofs
    };
    let (hash, ecn) = if entropy {
        entropy_hash_ecn(pkt)
    } else {
        (0, encap_ecn(pkt))
    };
    // An MPLS packet is not IP, whatever it carries: OVS leaves the outer ECN at 0 for it.
    let ecn = if pkt.meta.l2_5 == NO_OFS {
        t.ecn_map[usize::from(ecn & 3)]
    } else {
        0
    };
    let hl = t.header.len();
    let total = pkt.len() + hl;
    let ip = t.ip_ofs;
    let h = pkt.push_front(hl);
    copy_header(h, &t.header);
    // The template's offsets lie inside it (`TnlTemplate::build`): each header is taken as a
    // fixed-size array once, so the writes below need no bounds checks of their own.
    let l4 = if ipv6 {
        let Some(v6) = h.get_mut(ip..).and_then(|r| r.first_chunk_mut::<40>()) else {
            return Err(RewriteError::NoIpv6);
        };
        v6[4..6].copy_from_slice(&((total - ip - 40) as u16).to_be_bytes());
        v6[1] = t.ip_byte1 | ecn << 4;
        ip + 40
    } else {
        let Some(v4) = h.get_mut(ip..).and_then(|r| r.first_chunk_mut::<20>()) else {
            return Err(RewriteError::NoIpv4);
        };
        let len = (total - ip) as u16;
        v4[2..4].copy_from_slice(&len.to_be_bytes());
        v4[1] = t.ip_byte1 | ecn;
        // The template's sum with a zero length and no ECN bits, plus the length and the ECN
        // bits (the TOS byte is the low half of the header's first word), in ones' complement
        // (each carry added back, which cannot carry again): no need to read back.
        let (s, c) = t.ip_sum.overflowing_add(len);
        let (s, c) = (s + u16::from(c)).overflowing_add(u16::from(ecn));
        let s = s + u16::from(c);
        v4[10..12].copy_from_slice(&(!s).to_be_bytes());
        ip + 20
    };
    if let Some(u) = udp_ofs {
        let Some(udp) = h.get_mut(u..).and_then(|r| r.first_chunk_mut::<8>()) else {
            return Err(RewriteError::NoL4);
        };
        udp[4..6].copy_from_slice(&((total - u) as u16).to_be_bytes());
        if entropy {
            udp[0..2].copy_from_slice(&entropy_port(hash, t).to_be_bytes());
        }
    }
    if !UDP4 && let Some(e) = &t.erspan {
        erspan_fields(h, e);
    }
    if !UDP4 && (t.udp_csum || t.gre_csum_ofs.is_some()) {
        tnl_push_csum(pkt, t);
    }
    let m = &mut pkt.meta;
    m.packet_type = 0;
    m.l2_5 = NO_OFS;
    m.l3 = ip as u16;
    m.l4 = l4 as u16;
    Ok(())
}

/// Writes an ERSPAN header's per-packet fields into the pushed header `h`: the tunnel port's
/// next GRE sequence number, and for version 2 the timestamp in 100 µs units (OVS's
/// `get_erspan_ts(ERSPAN_100US)`, the low 32 bits of the wall clock in those units).
#[inline(never)]
fn erspan_fields(h: &mut [u8], e: &crate::actions::ErspanFields) {
    if let Some(seq) = h
        .get_mut(e.seq_ofs..)
        .and_then(|r| r.first_chunk_mut::<4>())
    {
        *seq = e.seq.next().to_be_bytes();
    }
    if let Some(ts) = e
        .ts_ofs
        .and_then(|o| h.get_mut(o..))
        .and_then(|r| r.first_chunk_mut::<4>())
    {
        let us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        *ts = ((us / 100) as u32).to_be_bytes();
    }
}

/// The ECN field of the IP header at the packet's L3 offset, which the pushed outer header
/// carries on ([`TnlTemplate::ecn_map`](TnlTemplate::ecn_map)); 0 for a frame
/// that is not IP. An MPLS packet's IP header is under its labels: [`tnl_push`] leaves it out.
#[inline(always)]
fn encap_ecn(pkt: &Packet) -> u8 {
    ip_ecn(pkt.data(), usize::from(pkt.meta.l3)).unwrap_or(0)
}

/// [`tnl_push`] on every packet of a batch, the template's fields loaded once; returns how
/// many it refused.
#[inline(never)]
pub fn tnl_push_batch(pkts: &mut [Packet], t: &TnlTemplate) -> u64 {
    let mut errors = 0;
    if udp4_entropy(t) {
        for p in pkts {
            errors += u64::from(tnl_push_as::<true>(p, t).is_err());
        }
    } else {
        for p in pkts {
            errors += u64::from(tnl_push(p, t).is_err());
        }
    }
    errors
}

/// [`tnl_push`] out of line, for [`apply`](super::apply): the push inlined there would make every
/// other rewrite's call dearer.
#[inline(never)]
pub(super) fn tnl_push_out_of_line(pkt: &mut Packet, t: &TnlTemplate) -> Result<(), RewriteError> {
    tnl_push(pkt, t)
}

/// The outer UDP or GRE checksum of a pushed tunnel header (`csum=true`), over the whole
/// datagram: out of line, as most tunnels go without one.
#[inline(never)]
fn tnl_push_csum(pkt: &mut Packet, t: &TnlTemplate) {
    let ip = t.ip_ofs;
    let d = pkt.data_mut();
    let total = d.len();
    if let Some(u) = t.udp_ofs
        && t.udp_csum
    {
        let len = (total - u) as u16;
        let ph = if t.ipv6 {
            let src = std::net::Ipv6Addr::from(
                <[u8; 16]>::try_from(&d[ip + 8..ip + 24]).unwrap_or_default(),
            );
            let dst = std::net::Ipv6Addr::from(
                <[u8; 16]>::try_from(&d[ip + 24..ip + 40]).unwrap_or_default(),
            );
            checksum::pseudo_header_v6(&src, &dst, wire::IpProtocol::UDP, u32::from(len))
        } else {
            let src = std::net::Ipv4Addr::new(d[ip + 12], d[ip + 13], d[ip + 14], d[ip + 15]);
            let dst = std::net::Ipv4Addr::new(d[ip + 16], d[ip + 17], d[ip + 18], d[ip + 19]);
            checksum::pseudo_header_v4(&src, &dst, wire::IpProtocol::UDP, len)
        };
        let c = !checksum::combine(&[ph, checksum::data(&d[u..])]);
        put16(d, u + 6, if c == 0 { 0xffff } else { c });
    }
    if let Some(g) = t.gre_csum_ofs {
        let c = !checksum::data(&d[g..]);
        put16(d, g + 4, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use wire::{Ipv4Addr, Ipv6Addr};

    use super::super::tests::{MACS, extracted, frame_v4, frame_v6, v4};
    use super::super::{ETH_HLEN, be16};
    use crate::actions::DpAction;

    /// A pushed header's UDP source port comes from the inner headers, not from the flow hash
    /// (which the simple match does not compute): one flow, one port, different flows apart.
    #[test]
    fn the_entropy_port_comes_from_the_inner_headers() {
        let text = "tnl_push(tnl_port(4),header(size=0,type=4,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x64)),out_port(1))";
        let acts = flow::odp::parse_actions(text, &mut flow::odp::PortNames::new()).unwrap();
        let compiled = crate::actions::compile(&acts).unwrap();
        let DpAction::TnlPush(t) = &compiled[0] else {
            panic!("not a push")
        };
        let port = |f: &[u8], hash: u32| {
            let mut p = extracted(f);
            p.meta.hash = hash;
            tnl_push(&mut p, t).unwrap();
            be16(p.data(), 34)
        };
        let a = frame_v4(false, v4(1), v4(2), 0, 64, (1000, 2000), b"", true);
        let b = frame_v4(false, v4(1), v4(2), 0, 64, (1001, 2000), b"", true);
        assert_eq!(port(&a, 1), port(&a, 0xdead_beef));
        assert_ne!(port(&a, 1), port(&b, 1));
        // A datagram's first fragment and a later one: one port (no transport ports in it).
        let mut first = a.clone();
        first[ETH_HLEN + 6] = 0x20;
        let mut later = a.clone();
        later[ETH_HLEN + 6..ETH_HLEN + 8].copy_from_slice(&[0, 0x10]);
        assert_eq!(port(&first, 1), port(&later, 1));
        assert_ne!(port(&first, 1), port(&a, 1));
        assert!((32768..61000).contains(&port(&a, 1)));
        // Not IP: the Ethernet addresses and type.
        let arp = [MACS.as_slice(), &[0x08, 0x06], &[0; 28]].concat();
        let mut arp2 = arp.clone();
        arp2[0] ^= 1;
        assert_eq!(port(&arp, 1), port(&arp, 2));
        assert_ne!(port(&arp, 1), port(&arp2, 1));
    }

    /// ERSPAN: GRE with a sequence number (flags 0x1000, protocol 0x88be or 0x22eb), the
    /// sequence counting per tunnel port across templates, the session id and index (version
    /// 1), the hardware id and direction (version 2), as OVS and Linux lay them out.
    #[test]
    fn erspan_headers_carry_a_sequence_per_tunnel_port() {
        let push = |tnl_port: u32, erspan: &str| {
            let text = format!(
                "tnl_push(tnl_port({tnl_port}),header(size=0,type=107,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=47,tos=0,ttl=64,frag=0x4000),{erspan}),out_port(1))"
            );
            let acts = flow::odp::parse_actions(&text, &mut flow::odp::PortNames::new()).unwrap();
            let compiled = crate::actions::compile(&acts).unwrap();
            let DpAction::TnlPush(t) = &compiled[0] else {
                panic!("not a push")
            };
            let f = frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"", true);
            let mut p = extracted(&f);
            tnl_push(&mut p, t).unwrap();
            let d = p.data().to_vec();
            assert_eq!(be16(&d, ETH_HLEN + 2) as usize, d.len() - ETH_HLEN);
            assert_eq!(d[ETH_HLEN + 9], 47);
            assert_eq!(wire::checksum::data(&d[ETH_HLEN..ETH_HLEN + 20]), 0xffff);
            d
        };
        let a = push(77, "erspan(ver=1,sid=0x5,idx=0x12345)");
        let b = push(77, "erspan(ver=1,sid=0x5,idx=0x12345)");
        let g = 34;
        assert_eq!(&a[g..g + 4], &[0x10, 0x00, 0x88, 0xbe]);
        let seq = |d: &[u8]| u32::from_be_bytes(d[g + 4..g + 8].try_into().unwrap());
        assert_eq!(seq(&b), seq(&a) + 1);
        assert_eq!(&a[g + 8..g + 16], &[0x10, 0, 0, 5, 0, 0x01, 0x23, 0x45]);
        assert_eq!(
            &a[g + 16..],
            &frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"", true)[..]
        );
        // Another tunnel port counts on its own.
        assert_eq!(seq(&push(78, "erspan(ver=1,sid=0x5,idx=0x1)")), 0);
        let c = push(79, "erspan(ver=2,sid=0x3ff,dir=1,hwid=0x2b)");
        assert_eq!(&c[g..g + 4], &[0x10, 0x00, 0x22, 0xeb]);
        assert_eq!(&c[g + 8..g + 12], &[0x20, 0, 0x03, 0xff]);
        // Timestamp (set), security group tag 0, then P/FT/hwid and hwid/D/Gra/O.
        assert_ne!(&c[g + 12..g + 16], &[0, 0, 0, 0]);
        assert_eq!(&c[g + 16..g + 20], &[0, 0, 0x02, 0xb8]);
    }

    /// The entropy port stays in the template's range (`tnl/egress_port_range`): its minimum
    /// for the lowest hash, below its maximum for the highest, the minimum alone for an empty span.
    #[test]
    fn entropy_ports_stay_in_the_template_s_range() {
        let mut t = vxlan_template(Ipv4Addr::new(10, 1, 2, 9), 0);
        assert_eq!((t.port_min, t.port_span), (32768, 61000 - 32768));
        (t.port_min, t.port_span) = (100, 10);
        assert_eq!(entropy_port(0, &t), 100);
        assert_eq!(entropy_port(u32::MAX, &t), 109);
        t.port_span = 0;
        assert_eq!(entropy_port(u32::MAX, &t), 100);
        (t.port_min, t.port_span) = (1, 65534);
        assert_eq!(entropy_port(u32::MAX, &t), 65534);
    }

    /// A VXLAN push template over IPv4 to `dst` with `tos`.
    fn vxlan_template(dst: Ipv4Addr, tos: u8) -> TnlTemplate {
        let text = format!(
            "tnl_push(tnl_port(4),header(size=0,type=4,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst={dst},proto=17,tos={tos},ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x64)),out_port(1))"
        );
        let acts = flow::odp::parse_actions(&text, &mut flow::odp::PortNames::new()).unwrap();
        let compiled = crate::actions::compile(&acts).unwrap();
        let DpAction::TnlPush(t) = &compiled[0] else {
            panic!("not a push")
        };
        (**t).clone()
    }

    /// The outer IPv4 checksum stays right where the ECN bits' carry meets the length's: a
    /// template whose header sums to 0xfffe, an outer length of 65535 and ECT(0), which sum
    /// to 0x1ffff (one fold of it is 0x10000, which a 16-bit checksum cannot hold).
    #[test]
    fn the_outer_checksum_carries_twice_when_it_must() {
        let base = vxlan_template(Ipv4Addr::new(10, 1, 0, 0), 0);
        let sum = !u16::from_be_bytes([base.header[24], base.header[25]]);
        assert!(sum <= 0xfffe);
        let t = vxlan_template(
            Ipv4Addr::new(10, 1, 0, 0) | Ipv4Addr::from(u32::from(0xfffe - sum)),
            0,
        );
        assert_eq!(t.ip_sum, 0xfffe);
        let inner = frame_v4(
            false,
            v4(1),
            v4(2),
            0x02,
            64,
            (1, 2),
            &vec![0; 65535 - 36 - 42],
            false,
        );
        let mut p = extracted(&inner);
        tnl_push(&mut p, &t).unwrap();
        let h = &p.data()[14..34];
        assert_eq!((be16(h, 2), h[1]), (65535, 0x02));
        assert_eq!(checksum::data(h), 0xffff);
    }

    proptest! {
        /// The outer ECN field is the inner IPv4 or IPv6 packet's, CE as ECT(0), beside the
        /// template's DSCP; a template with ECN bits of its own keeps them; the outer IPv4
        /// checksum verifies for every length and TOS.
        #[test]
        fn the_outer_ecn_comes_from_the_inner_packet(
            inner_tos in any::<u8>(),
            dscp in 0u8..64,
            own_ecn in prop_oneof![Just(0u8), 1u8..4],
            v6 in any::<bool>(),
            len in 0usize..1500,
        ) {
            let t = vxlan_template(Ipv4Addr::new(10, 1, 2, 9), dscp << 2 | own_ecn);
            let payload = vec![0x5a; len];
            let inner = if v6 {
                let mut f = frame_v6(false, Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED, (1, 2), &payload);
                f[ETH_HLEN] = 0x60 | inner_tos >> 4;
                f[ETH_HLEN + 1] = inner_tos << 4;
                f
            } else {
                frame_v4(false, v4(1), v4(2), inner_tos, 64, (1, 2), &payload, true)
            };
            let mut p = extracted(&inner);
            tnl_push(&mut p, &t).unwrap();
            // The batch's variant for this shape (IPv4, UDP, entropy) pushes the same bytes.
            prop_assert!(udp4_entropy(&t));
            let mut q = extracted(&inner);
            prop_assert_eq!(tnl_push_batch(std::slice::from_mut(&mut q), &t), 0);
            prop_assert_eq!(q.data(), p.data());
            let h = &p.data()[14..34];
            let ecn = match (own_ecn, inner_tos & 3) {
                (0, 3) => 2,
                (0, e) => e,
                (own, _) => own,
            };
            prop_assert_eq!(h[1], dscp << 2 | ecn);
            prop_assert_eq!(checksum::data(h), 0xffff);
            prop_assert_eq!(&p.data()[50..], &inner[..]);
        }
    }

    /// The header `tnl_push` prepends, field by field from the template and the frame, as a
    /// reference computed from scratch (the whole IPv4 header summed, no incremental update).
    fn pushed_reference(t: &TnlTemplate, inner: &[u8], hash: u32) -> Vec<u8> {
        let mut f = t.header.to_vec();
        f.extend_from_slice(inner);
        let total = f.len();
        let ip = t.ip_ofs;
        if t.ipv6 {
            f[ip + 4..ip + 6].copy_from_slice(&((total - ip - 40) as u16).to_be_bytes());
        } else {
            f[ip + 2..ip + 4].copy_from_slice(&((total - ip) as u16).to_be_bytes());
            f[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
            let c = !checksum::data(&f[ip..ip + 20]);
            f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
        }
        if let Some(u) = t.udp_ofs {
            f[u + 4..u + 6].copy_from_slice(&((total - u) as u16).to_be_bytes());
            if t.header[u] == 0 && t.header[u + 1] == 0 {
                let port = 32768 + ((u64::from(hash) * 28232) >> 32) as u16;
                f[u..u + 2].copy_from_slice(&port.to_be_bytes());
            }
        }
        f
    }

    proptest! {
        /// Every template shape (VXLAN, GENEVE with options, GRE, over IPv4 and IPv6; fixed or
        /// entropy source port) on inner frames of every length: the pushed bytes are the
        /// reference's, and an IPv4 outer header checksums to zero.
        #[test]
        fn tnl_push_writes_lengths_checksum_and_entropy(
            which in 0usize..6,
            len in 0usize..1600,
            hash in any::<u32>(),
            sport in prop_oneof![Just(0u16), any::<u16>()],
            csum in any::<bool>(),
        ) {
            let ipv4 = "eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,tos=0x10,ttl=64,frag=0x4000)";
            let ipv6 = "eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x86dd),ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=17,tclass=0x0,hlimit=64)";
            let uc = if csum { "0xffff" } else { "0x0" };
            let gre = if csum {
                "gre((flags=0xa000,proto=0x6558),csum=0x0,key=0x1c8)"
            } else {
                "gre((flags=0x2000,proto=0x6558),key=0x1c8)"
            };
            let (ip, l4) = match which {
                0 => (ipv4, format!("udp(src={sport},dst=4789,csum={uc}),vxlan(flags=0x8000000,vni=0x64)")),
                1 => (ipv6, format!("udp(src={sport},dst=4789,csum={uc}),vxlan(flags=0x8000000,vni=0x64)")),
                2 => (ipv4, format!("udp(src={sport},dst=6081,csum={uc}),geneve(crit,vni=0x7b,options({{class=0x102,type=0x80,len=4,0xa}}))")),
                3 => (ipv6, format!("udp(src={sport},dst=6081,csum={uc}),geneve(vni=0x7b,options({{class=0x102,type=0x80,len=8,0xa0000000b}}))")),
                4 => (ipv4, gre.to_owned()),
                _ => (ipv6, gre.to_owned()),
            };
            let (ip, l4) = if which >= 4 { (ip.replace("proto=17", "proto=47"), l4) } else { (ip.to_owned(), l4) };
            let text = format!("tnl_push(tnl_port(4),header(size=0,type=4,{ip},{l4}),out_port(1))");
            let acts = flow::odp::parse_actions(&text, &mut flow::odp::PortNames::new()).unwrap();
            let compiled = crate::actions::compile(&acts).unwrap();
            let DpAction::TnlPush(t) = &compiled[0] else { panic!("not a push: {compiled:?}") };
            let inner: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut p = Packet::from_slice(&inner);
            // The flow hash is not where the entropy comes from: the inner headers are.
            p.meta.hash = hash;
            let entropy = entropy_hash(&p);
            tnl_push(&mut p, t).unwrap();
            let want = pushed_reference(t, &inner, entropy);
            let mut got = p.data().to_vec();
            let ip = t.ip_ofs;
            if !t.ipv6 {
                prop_assert_eq!(checksum::data(&got[ip..ip + 20]), 0xffff);
            }
            // The transport checksums are checked by verifying them, then compared as zero.
            if let (Some(u), true) = (t.udp_ofs, t.udp_csum) {
                let len = (got.len() - u) as u16;
                let ph = if t.ipv6 {
                    let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&got[o..o + 16]).unwrap());
                    checksum::pseudo_header_v6(&a(ip + 8), &a(ip + 24), wire::IpProtocol::UDP, u32::from(len))
                } else {
                    let a = |o: usize| Ipv4Addr::from(<[u8; 4]>::try_from(&got[o..o + 4]).unwrap());
                    checksum::pseudo_header_v4(&a(ip + 12), &a(ip + 16), wire::IpProtocol::UDP, len)
                };
                prop_assert_eq!(checksum::combine(&[ph, checksum::data(&got[u..])]), 0xffff);
                prop_assert!(got[u + 6..u + 8] != [0, 0], "a computed zero is sent as 0xffff");
                got[u + 6..u + 8].copy_from_slice(&[0, 0]);
            }
            if let Some(g) = t.gre_csum_ofs {
                prop_assert_eq!(checksum::data(&got[g..]), 0xffff);
                got[g + 4..g + 6].copy_from_slice(&[0, 0]);
            }
            let mut want = want;
            if let (Some(u), true) = (t.udp_ofs, t.udp_csum) {
                want[u + 6..u + 8].copy_from_slice(&[0, 0]);
            }
            prop_assert_eq!(&got[..], &want[..]);
        }
    }
}
