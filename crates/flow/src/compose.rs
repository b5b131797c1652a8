//! A packet made from a flow key: the inverse of [`crate::extract()`], for tests and for the
//! switch's packet-injection command (as OVS's `flow_compose()` makes the packets of
//! `netdev-dummy/receive` and `ofproto/trace -generate`).
//!
//! The packet carries every field the key has, in the form OVS composes it, so that OVS's
//! tests' byte counts and checksums come out the same: Ethernet (a length field for
//! non-Ethernet-II frames), VLAN tags (outer first), then IPv4 (no options, `MF` and a
//! fragment offset of 100 for fragments), IPv6 (no extension headers) or ARP, then TCP, UDP,
//! SCTP, ICMP or ICMPv6 (with the neighbour discovery target and link-layer address options),
//! and an L7 payload of bytes `0, 1, 2, ...` where the protocol carries one; an MPLS key gets
//! its label stack and no payload. Checksums are computed. Fields a key cannot hold (IP
//! identification, TCP sequence numbers) are zero.

use crate::key::{FlowKey, VLAN_CFI, nw_frag};

const ETH_TYPE_IP: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;
const ETH_TYPE_ARP: u16 = 0x0806;
const ETH_TYPE_RARP: u16 = 0x8035;
/// The key's ethertype for a frame with an 802.3 length field instead (OVS's
/// `FLOW_DL_TYPE_NONE`).
const DL_TYPE_NONE: u16 = 0x05ff;
const MPLS_BOS: u32 = 0x100;

/// The packet `key` describes, with `l7_len` bytes of payload where its protocol carries one
/// (UDP, TCP without SYN/FIN/RST, ICMP and ICMPv6 echo).
pub fn compose(key: &FlowKey, l7_len: usize) -> Vec<u8> {
    build(key, l7_len, 0)
}

/// The packet `key` describes, without payload, padded with zeros to `size` bytes with its
/// lengths and checksums fixed (OVS's `packet_expand()`, for `netdev-dummy/receive FLOW --len
/// N`); `None` when the headers alone are longer than `size`.
pub fn compose_sized(key: &FlowKey, size: usize) -> Option<Vec<u8>> {
    let bare = build(key, 0, 0).len();
    (bare <= size).then(|| build(key, 0, size - bare))
}

/// The packet, with `l7_len` bytes of payload where the protocol carries one and `pad` zeros
/// after everything (counted in the IP and UDP lengths and the checksums).
fn build(key: &FlowKey, l7_len: usize, pad: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(64 + l7_len + pad);
    p.extend_from_slice(&key.eth_dst().0);
    p.extend_from_slice(&key.eth_src().0);
    let et = key.eth_type();
    if et == DL_TYPE_NONE {
        p.extend_from_slice(&((14 + pad) as u16).to_be_bytes());
        p.resize(14 + pad, 0);
        return p;
    }
    for (tpid, tci) in [
        (key.vlan_tpid(), key.vlan_tci()),
        (key.vlan2_tpid(), key.vlan2_tci()),
    ] {
        if tci & VLAN_CFI != 0 {
            let tpid = if tpid == 0 { 0x8100 } else { tpid };
            p.extend_from_slice(&tpid.to_be_bytes());
            p.extend_from_slice(&(tci & !VLAN_CFI).to_be_bytes());
        }
    }
    p.extend_from_slice(&et.to_be_bytes());
    match et {
        ETH_TYPE_IP => ipv4(&mut p, key, l7_len, pad),
        ETH_TYPE_IPV6 => ipv6(&mut p, key, l7_len, pad),
        ETH_TYPE_ARP | ETH_TYPE_RARP => arp(&mut p, key),
        0x8847 | 0x8848 => mpls(&mut p, key),
        _ => {}
    }
    if !matches!(et, ETH_TYPE_IP | ETH_TYPE_IPV6) {
        p.resize(p.len() + pad, 0);
    }
    p
}

fn ipv4(p: &mut Vec<u8>, key: &FlowKey, l7_len: usize, pad: usize) {
    let l3 = p.len();
    let frag = key.nw_frag();
    let mut frag_off = 0u16;
    if frag & nw_frag::ANY != 0 {
        frag_off |= 0x2000;
        if frag & nw_frag::LATER != 0 {
            frag_off |= 100;
        }
    }
    p.extend_from_slice(&[0x45, key.nw_tos(), 0, 0, 0, 0]);
    p.extend_from_slice(&frag_off.to_be_bytes());
    p.extend_from_slice(&[key.nw_ttl(), key.nw_proto(), 0, 0]);
    p.extend_from_slice(&key.nw_src().octets());
    p.extend_from_slice(&key.nw_dst().octets());
    let l4 = p.len();
    l4_header(p, key, l7_len, pad);
    let total = (p.len() - l3) as u16;
    p[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
    let sum = !crate_checksum(&p[l3..l4], 0);
    p[l3 + 10..l3 + 12].copy_from_slice(&sum.to_be_bytes());
    let mut pseudo = Vec::with_capacity(12);
    pseudo.extend_from_slice(&key.nw_src().octets());
    pseudo.extend_from_slice(&key.nw_dst().octets());
    pseudo.extend_from_slice(&[0, key.nw_proto()]);
    pseudo.extend_from_slice(&((p.len() - l4) as u16).to_be_bytes());
    l4_checksum(p, l4, key, &pseudo);
}

fn ipv6(p: &mut Vec<u8>, key: &FlowKey, l7_len: usize, pad: usize) {
    let word = 6u32 << 28 | u32::from(key.nw_tos()) << 20 | (key.ipv6_label() & 0xf_ffff);
    p.extend_from_slice(&word.to_be_bytes());
    let plen_at = p.len();
    p.extend_from_slice(&[0, 0, key.nw_proto(), key.nw_ttl()]);
    p.extend_from_slice(&key.ipv6_src().octets());
    p.extend_from_slice(&key.ipv6_dst().octets());
    let l4 = p.len();
    l4_header(p, key, l7_len, pad);
    let plen = (p.len() - l4) as u32;
    p[plen_at..plen_at + 2].copy_from_slice(&(plen as u16).to_be_bytes());
    let mut pseudo = Vec::with_capacity(40);
    pseudo.extend_from_slice(&key.ipv6_src().octets());
    pseudo.extend_from_slice(&key.ipv6_dst().octets());
    pseudo.extend_from_slice(&plen.to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, key.nw_proto()]);
    l4_checksum(p, l4, key, &pseudo);
}

/// Whether the packet carries its L4 header: not a later fragment.
fn has_l4(key: &FlowKey) -> bool {
    key.nw_frag() & nw_frag::LATER == 0
}

fn payload(p: &mut Vec<u8>, len: usize) {
    p.extend((0..len).map(|i| i as u8));
}

/// The L4 header and payload, then `pad` zeros (a UDP length counts them).
fn l4_header(p: &mut Vec<u8>, key: &FlowKey, l7_len: usize, pad: usize) {
    let l4 = p.len();
    l4_header_only(p, key, l7_len);
    p.resize(p.len() + pad, 0);
    if has_l4(key) && key.nw_proto() == 17 && p.len() >= l4 + 8 {
        let len = (p.len() - l4) as u16;
        p[l4 + 4..l4 + 6].copy_from_slice(&len.to_be_bytes());
    }
}

fn l4_header_only(p: &mut Vec<u8>, key: &FlowKey, l7_len: usize) {
    if !has_l4(key) {
        return;
    }
    let (src, dst) = (key.tp_src().to_be_bytes(), key.tp_dst().to_be_bytes());
    match key.nw_proto() {
        6 => {
            let flags = key.tcp_flags() & 0x0fff;
            p.extend_from_slice(&src);
            p.extend_from_slice(&dst);
            p.extend_from_slice(&[0; 8]);
            p.extend_from_slice(&(5u16 << 12 | flags).to_be_bytes());
            p.extend_from_slice(&[0; 6]);
            // SYN, FIN and RST segments carry no data.
            if flags & 0x07 == 0 {
                payload(p, l7_len);
            }
        }
        17 => {
            p.extend_from_slice(&src);
            p.extend_from_slice(&dst);
            p.extend_from_slice(&((8 + l7_len) as u16).to_be_bytes());
            p.extend_from_slice(&[0, 0]);
            payload(p, l7_len);
        }
        132 => {
            p.extend_from_slice(&src);
            p.extend_from_slice(&dst);
            p.extend_from_slice(&[0; 8]);
        }
        1 => {
            let (ty, code) = (key.tp_src() as u8, key.tp_dst() as u8);
            p.extend_from_slice(&[ty, code, 0, 0, 0, 0, 0, 0]);
            if matches!(ty, 0 | 8) && code == 0 {
                payload(p, l7_len);
            }
        }
        58 => {
            let (ty, code) = (key.tp_src() as u8, key.tp_dst() as u8);
            p.extend_from_slice(&[ty, code, 0, 0, 0, 0, 0, 0]);
            if code == 0 && matches!(ty, 135 | 136) {
                p.extend_from_slice(&key.nd_target().octets());
                for (opt, mac) in [(1u8, key.arp_sha()), (2, key.arp_tha())] {
                    if mac.0 != [0; 6] {
                        p.extend_from_slice(&[opt, 1]);
                        p.extend_from_slice(&mac.0);
                    }
                }
            } else if code == 0 && matches!(ty, 128 | 129) {
                payload(p, l7_len);
            }
        }
        _ => {}
    }
}

/// Fills in the checksum of the L4 header at `l4` (pseudo-header `pseudo` where the protocol
/// covers one).
fn l4_checksum(p: &mut [u8], l4: usize, key: &FlowKey, pseudo: &[u8]) {
    if !has_l4(key) {
        return;
    }
    let at = match key.nw_proto() {
        6 => 16,
        17 => 6,
        1 | 58 => 2,
        _ => return,
    };
    if p.len() < l4 + at + 2 {
        return;
    }
    let seed = if key.nw_proto() == 1 {
        0
    } else {
        wire::checksum::data(pseudo)
    };
    let mut sum = !crate_checksum(&p[l4..], seed);
    if key.nw_proto() == 17 && sum == 0 {
        sum = 0xffff;
    }
    p[l4 + at..l4 + at + 2].copy_from_slice(&sum.to_be_bytes());
}

fn arp(p: &mut Vec<u8>, key: &FlowKey) {
    let op = u16::from(key.nw_proto());
    p.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4]);
    p.extend_from_slice(&op.to_be_bytes());
    if matches!(op, 1 | 2) {
        p.extend_from_slice(&key.arp_sha().0);
        p.extend_from_slice(&key.nw_src().octets());
        p.extend_from_slice(&key.arp_tha().0);
        p.extend_from_slice(&key.nw_dst().octets());
    } else {
        p.extend_from_slice(&[0; 20]);
    }
}

/// The label stack, down to the entry with the bottom-of-stack bit (at most three), outer
/// first; nothing after it.
fn mpls(p: &mut Vec<u8>, key: &FlowKey) {
    let lse = [key.mpls_lse0(), key.mpls_lse1(), key.mpls_lse2()];
    let n = lse
        .iter()
        .take(2)
        .position(|l| l & MPLS_BOS != 0)
        .map_or(3, |i| i + 1);
    for l in &lse[..n] {
        p.extend_from_slice(&l.to_be_bytes());
    }
}

/// The ones'-complement sum of `data` (RFC 1071) added to `seed`, folded, not inverted.
fn crate_checksum(data: &[u8], seed: u16) -> u16 {
    wire::checksum::combine(&[seed, wire::checksum::data(data)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EthAddr;

    fn base(et: u16) -> FlowKey {
        let mut k = FlowKey::new();
        k.set_eth_src(EthAddr([0x50, 0x54, 0, 0, 0, 1]))
            .set_eth_dst(EthAddr([0x50, 0x54, 0, 0, 0, 2]))
            .set_eth_type(et);
        k
    }

    /// Extracting the composed packet gives the key back (with the fields extraction adds).
    fn round_trip(k: &FlowKey, l7_len: usize) -> FlowKey {
        let pkt = compose(k, l7_len);
        let mut got = FlowKey::new();
        crate::extract(&pkt, &mut got);
        got
    }

    #[test]
    fn udp_over_ipv4_is_ovs_s_packet_with_its_checksums() {
        let mut k = base(ETH_TYPE_IP);
        k.set_nw_src([10, 0, 0, 1].into())
            .set_nw_dst([10, 0, 0, 2].into())
            .set_nw_proto(17)
            .set_nw_ttl(64)
            .set_tp_src(1)
            .set_tp_dst(2);
        let p = compose(&k, 64);
        // 14 + 20 + 8 + 64, as OVS's netdev-dummy/receive of such a flow counts it.
        assert_eq!(p.len(), 106);
        assert_eq!(crate_checksum(&p[14..34], 0), 0xffff);
        let got = round_trip(&k, 64);
        assert_eq!((got.nw_src(), got.nw_dst()), (k.nw_src(), k.nw_dst()));
        assert_eq!((got.tp_src(), got.tp_dst(), got.nw_ttl()), (1, 2, 64));
    }

    #[test]
    fn tags_labels_arp_and_nd_come_back_from_extraction() {
        let mut k = base(ETH_TYPE_IP);
        k.set_vlan_tpid(0x8100)
            .set_vlan_tci(VLAN_CFI | 5 << 13 | 1000)
            .set_nw_proto(6)
            .set_tcp_flags(0x002)
            .set_nw_ttl(9);
        let got = round_trip(&k, 64);
        assert_eq!(got.vlan_tci(), k.vlan_tci());
        assert_eq!(got.tcp_flags(), 0x002);

        let mut k = base(0x8847);
        k.set_mpls_lse0(10 << 12 | 64)
            .set_mpls_lse1(11 << 12 | MPLS_BOS | 64);
        assert_eq!(compose(&k, 64).len(), 22);
        let got = round_trip(&k, 0);
        assert_eq!(
            (got.mpls_lse0(), got.mpls_lse1()),
            (k.mpls_lse0(), k.mpls_lse1())
        );

        let mut k = base(ETH_TYPE_ARP);
        k.set_nw_proto(1)
            .set_nw_src([10, 0, 0, 1].into())
            .set_nw_dst([10, 0, 0, 2].into())
            .set_arp_sha(EthAddr([0x50, 0x54, 0, 0, 0, 1]));
        let got = round_trip(&k, 0);
        assert_eq!(
            (got.nw_proto(), got.nw_dst(), got.arp_sha()),
            (1, k.nw_dst(), k.arp_sha())
        );

        let mut k = base(ETH_TYPE_IPV6);
        k.set_ipv6_src("fe80::1".parse().unwrap())
            .set_ipv6_dst("ff02::1:ff00:2".parse().unwrap())
            .set_nw_proto(58)
            .set_nw_ttl(255)
            .set_tp_src(135)
            .set_nd_target("fe80::2".parse().unwrap())
            .set_arp_sha(EthAddr([0x50, 0x54, 0, 0, 0, 1]));
        let got = round_trip(&k, 0);
        assert_eq!(
            (got.tp_src(), got.nd_target(), got.arp_sha()),
            (135, k.nd_target(), k.arp_sha())
        );
    }

    #[test]
    fn a_sized_packet_is_padded_with_its_lengths_and_checksums_fixed() {
        let mut k = base(ETH_TYPE_IP);
        k.set_nw_proto(17)
            .set_nw_ttl(64)
            .set_tp_src(1)
            .set_tp_dst(2);
        assert_eq!(compose_sized(&k, 30), None);
        let p = compose_sized(&k, 128).unwrap();
        assert_eq!(p.len(), 128);
        assert_eq!(u16::from_be_bytes([p[16], p[17]]), 114);
        assert_eq!(u16::from_be_bytes([p[38], p[39]]), 94);
        assert_eq!(crate_checksum(&p[14..34], 0), 0xffff);
        let got = {
            let mut g = FlowKey::new();
            crate::extract(&p, &mut g);
            g
        };
        assert_eq!((got.tp_src(), got.tp_dst()), (1, 2));
    }

    #[test]
    fn later_fragments_have_no_l4_header() {
        let mut k = base(ETH_TYPE_IP);
        k.set_nw_proto(17)
            .set_nw_frag(nw_frag::ANY | nw_frag::LATER);
        assert_eq!(compose(&k, 64).len(), 34);
        assert_eq!(round_trip(&k, 64).nw_frag(), k.nw_frag());
    }
    /// What OVS 3.1's `netdev-dummy/receive p1 FLOW` sends (captured with `tx_pcap` on the
    /// port a rule outputs to), for flows of each family.
    #[test]
    fn the_packets_are_ovs_31s_byte_for_byte() {
        let cases = [
            (
                "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.0.0.2,proto=17,tos=0,ttl=64,frag=no),udp(src=1,dst=2)",
                "50540000000250540000000108004500005c000000004011668f0a0000010a0000020001000200480755000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f",
            ),
            (
                "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x8100),vlan(vid=1000,pcp=5),encap(eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.0.0.2,proto=6,tos=0,ttl=9,frag=no),tcp(src=1,dst=2),tcp_flags(syn))",
                "5054000000025054000000018100a3e80800450000280000000009069dce0a0000010a000002000100020000000000000000500200009bdd0000",
            ),
            (
                "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x86dd),ipv6(src=fe80::1,dst=ff02::1:ff00:2,label=0,proto=58,tclass=0,hlimit=255,frag=no),icmpv6(type=135,code=0),nd(target=fe80::2,sll=50:54:00:00:00:01)",
                "50540000000250540000000186dd6000000000203afffe800000000000000000000000000001ff0200000000000000000001ff00000287002c4300000000fe8000000000000000000000000000020101505400000001",
            ),
            (
                "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x0806),arp(sip=10.0.0.1,tip=10.0.0.2,op=1,sha=50:54:00:00:00:01,tha=00:00:00:00:00:00)",
                "505400000002505400000001080600010800060400015054000000010a0000010000000000000a000002",
            ),
            (
                "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.0.0.2,proto=1,tos=0,ttl=64,frag=no),icmp(type=8,code=0)",
                "50540000000250540000000108004500005c000000004001669f0a0000010a000002080013fc00000000000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f",
            ),
        ];
        for (flow, want) in cases {
            let mut names = crate::odp::PortNames::new();
            let k = crate::odp::parse_key(flow, &mut names).unwrap().key;
            let got: String = compose(&k, 64).iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(got, want, "{flow}");
        }
    }
}
