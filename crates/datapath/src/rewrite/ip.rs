//! Rewrites of the IP and transport headers: `set(ipv4)` and `set(ipv6)` (addresses, TOS or
//! traffic class, TTL or hop limit, flow label), `set(tcp)`, `set(udp)` and `set(sctp)`
//! (ports), as OVS's `packet_set_ipv4()`, `packet_set_ipv6()` and `packet_set_*_port()`.
//! Checksums are updated incrementally (RFC 1624): the IPv4 header's, and the transport
//! checksum's pseudo-header part on an address change (RFC 9293 §3.1, RFC 768, RFC 8200
//! §8.1); SCTP's CRC32C is recomputed, keeping its old error. Also the ECN field (RFC 3168
//! §5), read by `tnl_push` and written by `tnl_pop`.

use wire::checksum;
use wire::{
    IpProtocol, Ipv4Addr, Ipv4Packet, Ipv6Addr, Ipv6Packet, SctpPacket, TcpPacket, UdpPacket,
};

use crate::actions::{IPV6_LABEL_MASK, L4Proto, SetIpv4, SetIpv6, SetL4};
use crate::packet::Packet;

use super::RewriteError::{self, *};
use super::{
    ICMPV6_HLEN, IPV4_HLEN, IPV6_HLEN, SCTP_HLEN, TCP_HLEN, UDP_HLEN, at, be16, masked, put16,
};

/// A transport checksum that covers the IP addresses through the pseudo-header: its offset in
/// the frame, and whether it is UDP's (0 = none; a computed 0 is sent as 0xffff).
#[derive(Clone, Copy)]
struct PseudoCsum {
    at: usize,
    udp: bool,
}

impl PseudoCsum {
    /// The checksum of the `proto` header at `l4`, if it has one over the pseudo-header and the
    /// header is all there.
    fn find(proto: IpProtocol, l4: u16, len: usize) -> Option<PseudoCsum> {
        let (need, field, udp) = match proto {
            IpProtocol::TCP => (TCP_HLEN, 16, false),
            IpProtocol::UDP => (UDP_HLEN, 6, true),
            IpProtocol::ICMPV6 => (ICMPV6_HLEN, 2, false),
            _ => return None,
        };
        at(l4, len, need).map(|o| PseudoCsum { at: o + field, udp })
    }

    /// Applies `f` to the stored checksum, keeping UDP's "no checksum" and its 0 rule.
    #[inline]
    fn update(self, d: &mut [u8], f: impl FnOnce(u16) -> u16) {
        let old = be16(d, self.at);
        if self.udp && old == 0 {
            return;
        }
        let mut new = f(old);
        if self.udp && new == 0 {
            new = 0xffff;
        }
        put16(d, self.at, new);
    }
}

/// The upper-layer protocol of the IPv6 packet at `l3` whose transport header is at `l4`, and
/// whether a routing header with segments left precedes it (the pseudo-header then holds the
/// final destination, not the header's, RFC 8200 §8.1). `None` when the extension headers do
/// not lead to `l4`.
pub(super) fn ipv6_upper(d: &[u8], l3: usize, l4: usize) -> Option<(IpProtocol, bool)> {
    let mut nh = d[l3 + 6];
    let mut p = l3 + IPV6_HLEN;
    let mut routed = false;
    while p < l4 {
        // Every extension header has at least 8 bytes.
        let h = d.get(p..p + 8)?;
        let hlen = match IpProtocol(nh) {
            IpProtocol::HOPOPT | IpProtocol::IPV6_OPTS => (h[1] as usize + 1) * 8,
            IpProtocol::IPV6_ROUTE => {
                routed |= h[3] != 0;
                (h[1] as usize + 1) * 8
            }
            IpProtocol::IPV6_FRAG => 8,
            IpProtocol::AH => (h[1] as usize + 2) * 4,
            _ => return None,
        };
        nh = h[0];
        p += hlen;
    }
    (p == l4).then_some((IpProtocol(nh), routed))
}

/// `set(ipv4(...))`: masked write of source, destination, TOS and TTL, with the header
/// checksum updated, and the TCP or UDP checksum for address changes (not on later fragments,
/// which carry no transport header).
pub fn set_ipv4(pkt: &mut Packet, s: &SetIpv4) -> Result<(), RewriteError> {
    let len = pkt.len();
    let l3 = at(pkt.meta.l3, len, IPV4_HLEN).ok_or(NoIpv4)?;
    let l4 = pkt.meta.l4;
    let d = pkt.data_mut();
    // Version and header length: the high byte of the 16-bit word TOS is the low byte of.
    let ver_ihl = d[l3];
    let mut ip = Ipv4Packet::new_unchecked(&mut d[l3..]);
    if ip.version() != 4 {
        return Err(NoIpv4);
    }
    // ICMP's checksum does not cover the addresses; a later fragment has no transport header.
    let l4_csum = match ip.protocol() {
        IpProtocol::TCP | IpProtocol::UDP if ip.frag_offset() == 0 => {
            PseudoCsum::find(ip.protocol(), l4, len)
        }
        _ => None,
    };

    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let new_src = Ipv4Addr::from_bits(masked(src.to_bits(), s.src.to_bits(), s.src_mask.to_bits()));
    let new_dst = Ipv4Addr::from_bits(masked(dst.to_bits(), s.dst.to_bits(), s.dst_mask.to_bits()));
    let mut hc = ip.checksum();
    if new_src != src {
        hc = checksum::update32(hc, src.to_bits(), new_src.to_bits());
        ip.set_src_addr(new_src);
    }
    if new_dst != dst {
        hc = checksum::update32(hc, dst.to_bits(), new_dst.to_bits());
        ip.set_dst_addr(new_dst);
    }
    let tos = ip.dscp() << 2 | ip.ecn();
    let new_tos = masked(tos, s.tos, s.tos_mask);
    if new_tos != tos {
        let vi = u16::from(ver_ihl) << 8;
        hc = checksum::update16(hc, vi | u16::from(tos), vi | u16::from(new_tos));
        ip.set_dscp(new_tos >> 2);
        ip.set_ecn(new_tos & 3);
    }
    let ttl = ip.ttl();
    let new_ttl = masked(ttl, s.ttl, s.ttl_mask);
    if new_ttl != ttl {
        // TTL is the high byte of the word it shares with the protocol.
        let p = u16::from(ip.protocol().0);
        hc = checksum::update16(hc, u16::from(ttl) << 8 | p, u16::from(new_ttl) << 8 | p);
        ip.set_ttl(new_ttl);
    }
    ip.set_checksum(hc);

    if let Some(c) = l4_csum {
        if new_src != src {
            c.update(d, |cs| {
                checksum::update32(cs, src.to_bits(), new_src.to_bits())
            });
        }
        if new_dst != dst {
            c.update(d, |cs| {
                checksum::update32(cs, dst.to_bits(), new_dst.to_bits())
            });
        }
    }
    Ok(())
}

/// `set(ipv6(...))`: masked write of source, destination, flow label, traffic class and hop
/// limit, with the TCP, UDP or ICMPv6 checksum updated for address changes. A destination
/// change behind a routing header with segments left leaves the checksum alone: it covers the
/// final destination (as OVS's `packet_set_ipv6()`).
pub fn set_ipv6(pkt: &mut Packet, s: &SetIpv6) -> Result<(), RewriteError> {
    let len = pkt.len();
    let l3 = at(pkt.meta.l3, len, IPV6_HLEN).ok_or(NoIpv6)?;
    let l4 = pkt.meta.l4;
    let d = pkt.data_mut();
    if d[l3] >> 4 != 6 {
        return Err(NoIpv6);
    }
    let upper = at(l4, len, 0).and_then(|o| ipv6_upper(d, l3, o));
    let l4_csum = upper.and_then(|(proto, _)| PseudoCsum::find(proto, l4, len));
    let routed = upper.is_some_and(|(_, r)| r);

    let mut ip = Ipv6Packet::new_unchecked(&mut d[l3..]);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let new_src = Ipv6Addr::from_bits(masked(src.to_bits(), s.src.to_bits(), s.src_mask.to_bits()));
    let new_dst = Ipv6Addr::from_bits(masked(dst.to_bits(), s.dst.to_bits(), s.dst_mask.to_bits()));
    ip.set_src_addr(new_src);
    ip.set_dst_addr(new_dst);
    let label_mask = s.label_mask & IPV6_LABEL_MASK;
    ip.set_flow_label(masked(ip.flow_label(), s.label, label_mask));
    ip.set_traffic_class(masked(ip.traffic_class(), s.tclass, s.tclass_mask));
    ip.set_hop_limit(masked(ip.hop_limit(), s.hlimit, s.hlimit_mask));

    if let Some(c) = l4_csum {
        if new_src != src {
            c.update(d, |cs| {
                checksum::update_bytes(cs, &src.octets(), &new_src.octets())
            });
        }
        if new_dst != dst && !routed {
            c.update(d, |cs| {
                checksum::update_bytes(cs, &dst.octets(), &new_dst.octets())
            });
        }
    }
    Ok(())
}

/// The transport protocol at `meta.l4`, from the IP header in front of it. `None` for a
/// non-IP packet, an IPv4 later fragment, or extension headers that do not lead to `l4`.
pub(super) fn l4_proto(d: &[u8], l3: u16, l4: usize) -> Option<IpProtocol> {
    let l3 = at(l3, d.len(), IPV4_HLEN)?;
    match d[l3] >> 4 {
        4 => {
            let ip = Ipv4Packet::new_unchecked(&d[l3..]);
            (ip.frag_offset() == 0).then(|| ip.protocol())
        }
        6 if l3 + IPV6_HLEN <= d.len() => ipv6_upper(d, l3, l4).map(|(p, _)| p),
        _ => None,
    }
}

/// Where the IP datagram at `l3` ends (its length field, within the frame): Ethernet padding
/// is not part of the transport payload.
fn ip_end(d: &[u8], l3: usize) -> usize {
    let end = match d[l3] >> 4 {
        4 => l3 + Ipv4Packet::new_unchecked(&d[l3..]).total_len() as usize,
        _ => l3 + IPV6_HLEN + Ipv6Packet::new_unchecked(&d[l3..]).payload_len() as usize,
    };
    end.min(d.len())
}

/// `set(tcp(...))`, `set(udp(...))`, `set(sctp(...))`: masked write of the ports, with the
/// TCP or UDP checksum updated, or SCTP's CRC32C recomputed over the SCTP packet.
pub fn set_l4(pkt: &mut Packet, s: &SetL4) -> Result<(), RewriteError> {
    let len = pkt.len();
    let (need, want) = match s.proto {
        L4Proto::Tcp => (TCP_HLEN, IpProtocol::TCP),
        L4Proto::Udp => (UDP_HLEN, IpProtocol::UDP),
        L4Proto::Sctp => (SCTP_HLEN, IpProtocol::SCTP),
    };
    let l4 = at(pkt.meta.l4, len, need).ok_or(NoL4)?;
    let l3 = pkt.meta.l3;
    let d = pkt.data_mut();
    match l4_proto(d, l3, l4) {
        None => return Err(NoL4),
        Some(p) if p != want => return Err(L4Mismatch),
        Some(_) => {}
    }
    match s.proto {
        L4Proto::Tcp => {
            let mut tcp = TcpPacket::new_unchecked(&mut d[l4..]);
            let (sp, dp) = (tcp.src_port(), tcp.dst_port());
            let (nsp, ndp) = (masked(sp, s.src, s.src_mask), masked(dp, s.dst, s.dst_mask));
            let mut c = tcp.checksum();
            if nsp != sp {
                c = checksum::update16(c, sp, nsp);
                tcp.set_src_port(nsp);
            }
            if ndp != dp {
                c = checksum::update16(c, dp, ndp);
                tcp.set_dst_port(ndp);
            }
            tcp.set_checksum(c);
        }
        L4Proto::Udp => {
            let mut udp = UdpPacket::new_unchecked(&mut d[l4..]);
            let (sp, dp) = (udp.src_port(), udp.dst_port());
            let (nsp, ndp) = (masked(sp, s.src, s.src_mask), masked(dp, s.dst, s.dst_mask));
            udp.set_src_port(nsp);
            udp.set_dst_port(ndp);
            let c = PseudoCsum {
                at: l4 + 6,
                udp: true,
            };
            if nsp != sp {
                c.update(d, |cs| checksum::update16(cs, sp, nsp));
            }
            if ndp != dp {
                c.update(d, |cs| checksum::update16(cs, dp, ndp));
            }
        }
        L4Proto::Sctp => {
            let l3 = l3 as usize;
            let end = ip_end(d, l3).max(l4 + SCTP_HLEN);
            let mut sctp = SctpPacket::new_unchecked(&mut d[l4..end]);
            let (sp, dp) = (sctp.src_port(), sctp.dst_port());
            let old = sctp.checksum();
            let old_correct = sctp.compute_checksum();
            sctp.set_src_port(masked(sp, s.src, s.src_mask));
            sctp.set_dst_port(masked(dp, s.dst, s.dst_mask));
            // CRC32C is affine: this is the new CRC with whatever error the old one had.
            let new = sctp.compute_checksum();
            sctp.set_checksum(old ^ old_correct ^ new);
        }
    }
    Ok(())
}

/// The ECN field (RFC 3168 §5): the low two bits of the IPv4 TOS byte or the IPv6 traffic
/// class.
pub(crate) const ECN_MASK: u8 = 3;
/// Congestion experienced.
pub(crate) const ECN_CE: u8 = 3;

/// The ECN field of the IP header at `l3` (IPv4 or IPv6 by its version nibble; IPv4 only
/// with its whole fixed header there), or None when there is none.
#[inline(always)]
pub(crate) fn ip_ecn(d: &[u8], l3: usize) -> Option<u8> {
    let h = d.get(l3..)?;
    match h.first()? >> 4 {
        4 if h.len() >= 20 => Some(h[1] & ECN_MASK),
        6 if h.len() >= 40 => Some(h[1] >> 4 & ECN_MASK),
        _ => None,
    }
}

/// Sets the ECN field of the IP header at `l3` ([`ip_ecn`] says there is one) to `ecn`,
/// updating an IPv4 header checksum.
pub(crate) fn set_ip_ecn(d: &mut [u8], l3: usize, ecn: u8) {
    match d[l3] >> 4 {
        4 => {
            let old = be16(d, l3);
            d[l3 + 1] = d[l3 + 1] & !ECN_MASK | ecn;
            let c = checksum::update16(be16(d, l3 + 10), old, be16(d, l3));
            d[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        _ => d[l3 + 1] = d[l3 + 1] & !(ECN_MASK << 4) | ecn << 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use super::super::ETH_HLEN;
    use super::super::tests::{extracted, frame_v4, frame_v6, ipv4_set, l4_set, recomputed, v4};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Incremental checksum updates equal a full recomputation.
        #[test]
        fn ipv4_incremental_checksums_equal_recompute(
            tcp: bool, udp_csum: bool, src: u32, dst: u32, tos: u8, ttl: u8, ports: (u16, u16),
            payload in proptest::collection::vec(any::<u8>(), 0..40),
            s4 in ipv4_set(), sp in l4_set(L4Proto::Tcp), both: bool,
        ) {
            let f = frame_v4(tcp, v4(src), v4(dst), tos, ttl, ports, &payload, udp_csum);
            let mut p = extracted(&f);
            set_ipv4(&mut p, &s4).unwrap();
            if both {
                let proto = if tcp { L4Proto::Tcp } else { L4Proto::Udp };
                set_l4(&mut p, &SetL4 { proto, ..sp }).unwrap();
            }
            let out = p.data();
            prop_assert!(Ipv4Packet::new_unchecked(&out[ETH_HLEN..]).verify_checksum());
            prop_assert_eq!(out, &recomputed(out)[..]);
            if !tcp && !udp_csum {
                prop_assert_eq!(UdpPacket::new_unchecked(&out[34..]).checksum(), 0);
            }
        }

        #[test]
        fn ipv6_incremental_checksums_equal_recompute(
            tcp: bool, src: u128, dst: u128, ports: (u16, u16),
            payload in proptest::collection::vec(any::<u8>(), 0..40),
            m: [u128; 2], v: [u128; 2], label: [u32; 2], sp in l4_set(L4Proto::Udp),
        ) {
            let f = frame_v6(tcp, Ipv6Addr::from_bits(src), Ipv6Addr::from_bits(dst), ports, &payload);
            let mut p = extracted(&f);
            let s6 = SetIpv6 {
                src: Ipv6Addr::from_bits(v[0] & m[0]),
                src_mask: Ipv6Addr::from_bits(m[0]),
                dst: Ipv6Addr::from_bits(v[1] & m[1]),
                dst_mask: Ipv6Addr::from_bits(m[1]),
                label: label[0] & label[1] & IPV6_LABEL_MASK,
                label_mask: label[1] & IPV6_LABEL_MASK,
                tclass: 0,
                tclass_mask: 0,
                hlimit: 1,
                hlimit_mask: 0xff,
            };
            set_ipv6(&mut p, &s6).unwrap();
            let proto = if tcp { L4Proto::Tcp } else { L4Proto::Udp };
            set_l4(&mut p, &SetL4 { proto, ..sp }).unwrap();
            let out = p.data();
            prop_assert_eq!(out, &recomputed(out)[..]);
        }
    }
}
