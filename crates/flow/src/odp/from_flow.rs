//! The attributes a packet's key has, decided from its values as OVS's
//! `odp_flow_key_from_flow()` decides them: which `OVS_KEY_ATTR_*` a datapath key of that packet
//! carries. Used to print the keys of extracted packets (`flowpath extract`) and of datapath
//! flows whose text form was not parsed from a string.

use super::key::{Attr, DpKey, KeyAttrs, MAX_ENCAP_DEPTH, tun_field};
use crate::key::{FlowKey, GENEVE_OPTS_MAX, Mask, VLAN_CFI, nw_frag, tun_flags};

const ETH_TYPE_IPV4: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;
const ETH_TYPE_ARP: u16 = 0x0806;
const ETH_TYPE_RARP: u16 = 0x8035;
const ETH_TYPE_MPLS: u16 = 0x8847;
const ETH_TYPE_MPLS_MCAST: u16 = 0x8848;

impl KeyAttrs {
    /// The attributes OVS's datapath would give a packet with this key: metadata that is set
    /// (tunnel, mark, conntrack, dp_hash), `recirc_id`, `in_port`, the packet type for L3
    /// packets, then L2 (with `encap(` per VLAN tag), L2.5, L3 and L4 as the ethertype and
    /// protocol say.
    pub fn from_flow(key: &FlowKey) -> KeyAttrs {
        let mut a = KeyAttrs::default();
        push_metadata(key, &mut a);
        if key.packet_type() != 0 {
            a.push(Attr::PacketType, 0);
        }
        push_packet(key, &mut a, true);
        a
    }

    /// The attributes OVS's userspace datapath gives the key of a datapath flow (a megaflow)
    /// of this packet: dpif-netdev supports every metadata attribute, so
    /// `odp_flow_key_from_flow()` emits `skb_priority`, `skb_mark`, `ct_state`, `ct_zone`,
    /// `ct_mark`, `ct_label`, `recirc_id`, `dp_hash`, `in_port` and `packet_type` whatever
    /// their values, `tunnel` when the packet came from one, and `ct_tuple4`/`ct_tuple6` when
    /// conntrack gave it a tuple (`ct_nw_proto` set) and it is IPv4/IPv6; then L2 to L4 as
    /// [`KeyAttrs::from_flow`], except that `tcp_flags` is there only when the packet has TCP
    /// flags or the mask matches some (OVS leaves it out of the key otherwise). Printed with
    /// the megaflow's mask, the attributes it does not match are left out
    /// (`ct_state(-trk),recirc_id(0),in_port(3),packet_type(ns=0,id=0),eth_type(0x0800),
    /// ipv4(frag=no)`), and the verbose form shows them all with zero masks.
    pub fn megaflow(key: &FlowKey, mask: &Mask) -> KeyAttrs {
        let mut a = KeyAttrs::default();
        a.push(Attr::SkbPriority, 0);
        push_tunnel(key, &mut a);
        for attr in [
            Attr::SkbMark,
            Attr::CtState,
            Attr::CtZone,
            Attr::CtMark,
            Attr::CtLabel,
        ] {
            a.push(attr, 0);
        }
        push_ct_tuple(key, &mut a);
        for attr in [Attr::RecircId, Attr::DpHash, Attr::InPort, Attr::PacketType] {
            a.push(attr, 0);
        }
        push_packet(key, &mut a, key.tcp_flags() != 0 || mask.tcp_flags() != 0);
        // The key has no skb_priority; an exact-match flow (megaflows off) matches it, 0, as
        // OVS's does, and prints it.
        if *mask == Mask::exact() {
            a.skb_priority_mask = u32::MAX;
        }
        a
    }
}

/// L2 to L4: `eth` (not for an L3 packet), VLAN tags as `encap(`, `eth_type`, then what the
/// ethertype and protocol say; `tcp_flags` after `tcp` when `tcp_flags` is true.
fn push_packet(key: &FlowKey, a: &mut KeyAttrs, tcp_flags: bool) {
    if key.packet_type() >> 16 != 1 {
        a.push(Attr::Eth, 0);
    }
    let mut depth = 0;
    for tci in [key.vlan_tci(), key.vlan2_tci()] {
        if tci & VLAN_CFI == 0 || depth >= MAX_ENCAP_DEPTH {
            break;
        }
        a.push(Attr::EthType, depth);
        a.push(Attr::Vlan, depth);
        a.push(Attr::Encap, depth);
        depth += 1;
    }
    a.push(Attr::EthType, depth);
    push_l3_l4(key, depth, a, tcp_flags);
}

impl DpKey {
    /// The key of one packet with every field exact and the attributes of
    /// [`KeyAttrs::from_flow`], e.g.
    /// `recirc_id(0),in_port(1),eth(src=..,dst=..),eth_type(0x0800),ipv4(..),udp(..)`.
    pub fn from_flow(key: &FlowKey) -> DpKey {
        DpKey {
            key: key.clone(),
            mask: Mask::exact(),
            attrs: KeyAttrs::from_flow(key),
        }
    }
}

fn push_metadata(key: &FlowKey, a: &mut KeyAttrs) {
    push_tunnel(key, a);
    if key.pkt_mark() != 0 {
        a.push(Attr::SkbMark, 0);
    }
    if key.ct_state() != 0 {
        a.push(Attr::CtState, 0);
    }
    if key.ct_zone() != 0 {
        a.push(Attr::CtZone, 0);
    }
    if key.ct_mark() != 0 {
        a.push(Attr::CtMark, 0);
    }
    if key.ct_label() != 0 {
        a.push(Attr::CtLabel, 0);
    }
    push_ct_tuple(key, a);
    a.push(Attr::RecircId, 0);
    if key.dp_hash() != 0 {
        a.push(Attr::DpHash, 0);
    }
    a.push(Attr::InPort, 0);
}

/// `ct_tuple4`/`ct_tuple6`: when conntrack gave the packet an original-direction tuple
/// (`ct_nw_proto` set) and the packet is IPv4/IPv6, as OVS's `odp_flow_key_from_flow()`.
fn push_ct_tuple(key: &FlowKey, a: &mut KeyAttrs) {
    if key.ct_nw_proto() == 0 {
        return;
    }
    match key.eth_type() {
        ETH_TYPE_IPV4 => {
            a.push(Attr::CtTuple4, 0);
        }
        ETH_TYPE_IPV6 => {
            a.push(Attr::CtTuple6, 0);
        }
        _ => {}
    }
}

/// `tunnel(...)` with the sub-fields the packet's tunnel metadata has.
fn push_tunnel(key: &FlowKey, a: &mut KeyAttrs) {
    if !key.tun_ipv4_dst().is_unspecified() || !key.tun_ipv6_dst().is_unspecified() {
        let mut f = tun_field::FLAGS | tun_field::TTL;
        if key.tun_flags() & tun_flags::KEY != 0 || key.tun_id() != 0 {
            f |= tun_field::TUN_ID;
        }
        if !key.tun_ipv4_src().is_unspecified() {
            f |= tun_field::IPV4_SRC;
        }
        if !key.tun_ipv4_dst().is_unspecified() {
            f |= tun_field::IPV4_DST;
        }
        if !key.tun_ipv6_src().is_unspecified() {
            f |= tun_field::IPV6_SRC;
        }
        if !key.tun_ipv6_dst().is_unspecified() {
            f |= tun_field::IPV6_DST;
        }
        if key.tun_tos() != 0 {
            f |= tun_field::TOS;
        }
        if key.tun_tp_src() != 0 {
            f |= tun_field::TP_SRC;
        }
        if key.tun_tp_dst() != 0 {
            f |= tun_field::TP_DST;
        }
        if key.tun_gbp_id() != 0 || key.tun_gbp_flags() != 0 {
            f |= tun_field::VXLAN;
        }
        let mut opts = [0u8; GENEVE_OPTS_MAX];
        if key.tun_geneve_opts(&mut opts) > 0 {
            f |= tun_field::GENEVE;
        }
        a.tun_fields = f;
        a.push(Attr::Tunnel, 0);
    }
}

fn push_l3_l4(key: &FlowKey, depth: u8, a: &mut KeyAttrs, tcp_flags: bool) {
    let ip = match key.eth_type() {
        ETH_TYPE_IPV4 => {
            a.push(Attr::Ipv4, depth);
            Some(false)
        }
        ETH_TYPE_IPV6 => {
            a.push(Attr::Ipv6, depth);
            Some(true)
        }
        ETH_TYPE_ARP | ETH_TYPE_RARP => {
            a.push(Attr::Arp, depth);
            None
        }
        ETH_TYPE_MPLS | ETH_TYPE_MPLS_MCAST => {
            a.push(Attr::Mpls, depth);
            a.mpls_lses = if key.mpls_lse0() & 0x100 != 0 {
                1
            } else if key.mpls_lse1() & 0x100 != 0 || key.mpls_lse2() == 0 {
                2
            } else {
                3
            };
            None
        }
        _ => None,
    };
    let Some(v6) = ip else { return };
    // A later fragment has no transport header in the key.
    if key.nw_frag() & nw_frag::LATER != 0 {
        return;
    }
    match (key.nw_proto(), v6) {
        (6, _) => {
            a.push(Attr::Tcp, depth);
            if tcp_flags {
                a.push(Attr::TcpFlags, depth);
            }
        }
        (17, _) => {
            a.push(Attr::Udp, depth);
        }
        (132, _) => {
            a.push(Attr::Sctp, depth);
        }
        (1, false) => {
            a.push(Attr::Icmp, depth);
        }
        (58, true) => {
            a.push(Attr::Icmpv6, depth);
            if key.tp_dst() == 0 && (key.tp_src() == 135 || key.tp_src() == 136) {
                a.push(Attr::Nd, depth);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract;
    use crate::odp::{PortNames, parse_key};

    fn frame(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn ipv4_udp_as_in_the_issue() {
        let p = frame(concat!(
            "8cdcd4ab5bf08cdcd4ab584808004500001c000100004011",
            "00000a0000010a010002040007d0000800000000000000000000000000000000"
        ));
        let mut k = FlowKey::new();
        k.set_in_port(1);
        extract(&p, &mut k);
        assert_eq!(
            DpKey::from_flow(&k).to_string(),
            "recirc_id(0),in_port(1),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),\
             eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.1.0.2,proto=17,tos=0,ttl=64,frag=no),\
             udp(src=1024,dst=2000)"
        );
    }

    #[test]
    fn printed_keys_parse_back_to_the_same_key() {
        let frames = [
            // 802.1Q, IPv4, TCP SYN.
            concat!(
                "0000000000020000000000018100a00a08004500002800010000400600000a0000010a000002",
                "00500051000000000000000050020000000000000000"
            ),
            // ARP request.
            "ffffffffffff000000000001080600010800060400010000000000010a0000010000000000000a000002",
            // IPv6 ICMPv6 echo.
            concat!(
                "00000000000200000000000186dd6000000000083a40fe800000000000000000000000000001",
                "fe8000000000000000000000000000028000000000000000"
            ),
        ];
        for hex in frames {
            let mut k = FlowKey::new();
            k.set_in_port(4);
            extract(&frame(hex), &mut k);
            let text = DpKey::from_flow(&k).to_string();
            let back = parse_key(&text, &mut PortNames::new()).unwrap();
            assert_eq!(back.key, k, "{text}");
            assert_eq!(back.to_string(), text);
        }
    }

    /// Every datapath flow line OVS-DPDK printed in the reference dumps (`dpif/dump-flows`
    /// and `dpctl/dump-flows -m`, tunnels and conntrack included) prints back the same when
    /// its attributes are the ones `KeyAttrs::megaflow` gives its key.
    #[test]
    fn megaflow_attributes_are_dpif_netdevs() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ovs-dpdk-dumps");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
            let mut in_dump = false;
            for line in text.lines() {
                if let Some(h) = line.strip_prefix("### ") {
                    in_dump = h.starts_with("ovs-appctl dpif/dump-flows")
                        || h.starts_with("ovs-appctl dpctl/dump-flows");
                    continue;
                }
                if !in_dump || line.is_empty() || line.starts_with("flow-dump from") {
                    continue;
                }
                let mut names = PortNames::new();
                let mut f = crate::odp::parse_flow(line, &mut names).unwrap();
                let verbose = f.attrs.verbose;
                f.attrs = KeyAttrs::megaflow(&f.key, &f.mask);
                assert_eq!(f.format(Some(&names), Some(verbose)), line);
                n += 1;
            }
        }
        assert!(n > 100, "{n} lines");
    }

    /// `tcp_flags` is in a TCP megaflow's key when the first packet had flags or the mask
    /// matches some (`tcp_flags(0/0)` after a SYN), not for a packet without flags. The lines
    /// are `ovs-appctl dpif/dump-flows -m br0` (OVS 3.1, ufid and statistics left out) after
    /// `netdev-dummy/receive` of a TCP SYN over IPv6 on p1 (rule `in_port=1,tcp6,
    /// ipv6_src=2001:db8::/64,tp_dst=0x1f00/0xff00,actions=output:2`) and of a TCP packet
    /// without flags on p3 (`in_port=3,dl_src=50:54:00:00:00:00/ff:ff:ff:00:00:00,
    /// actions=output:1`).
    #[test]
    fn tcp_flags_are_in_the_key_when_the_packet_or_the_mask_has_some() {
        let lines = [
            "skb_priority(0/0),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),ct_mark(0/0),\
             ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(p1),packet_type(ns=0,id=0),\
             eth(src=50:54:00:00:00:02/00:00:00:00:00:00,dst=50:54:00:00:00:01/00:00:00:00:00:00),\
             eth_type(0x86dd),ipv6(src=2001:db8::1/ffff:ffff:ffff:ffff::,dst=2001:db8::2/::,\
             label=0/0,proto=6,tclass=0/0,hlimit=64/0,frag=no),tcp(src=80/0,dst=8080/0xff00),\
             tcp_flags(0/0), actions:p2",
            "skb_priority(0/0),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),ct_mark(0/0),\
             ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(p3),packet_type(ns=0,id=0),\
             eth(src=50:54:00:00:00:03/ff:ff:ff:00:00:00,dst=50:54:00:00:00:01/00:00:00:00:00:00),\
             eth_type(0x0800),ipv4(src=10.0.0.3/0.0.0.0,dst=10.0.0.1/0.0.0.0,proto=6/0,tos=0/0,\
             ttl=64/0,frag=no),tcp(src=1000/0,dst=2000/0), actions:p1",
        ];
        // `tcp_flags(0/0)` does not show the value: the first packet was a SYN.
        for (line, flags) in lines.into_iter().zip([0x002, 0]) {
            let mut names = PortNames::new();
            let mut f = crate::odp::parse_flow(line, &mut names).unwrap();
            f.key.set_tcp_flags(flags);
            f.attrs = KeyAttrs::megaflow(&f.key, &f.mask);
            assert_eq!(f.format(Some(&names), Some(true)), line);
        }
        // A mask on the flags of a packet without any: there, as `tcp_flags(-syn)`.
        let mut k = FlowKey::new();
        k.set_eth_type(0x0800).set_nw_proto(6);
        let mut m = Mask::new();
        assert!(!KeyAttrs::megaflow(&k, &m).contains(Attr::TcpFlags));
        m.set_tcp_flags(0x002);
        assert!(KeyAttrs::megaflow(&k, &m).contains(Attr::TcpFlags));
    }

    #[test]
    fn a_tracked_key_has_its_tuple() {
        let mut k = FlowKey::new();
        k.set_eth_type(0x0800)
            .set_ct_state(0x21)
            .set_ct_nw_proto(17);
        let a = KeyAttrs::megaflow(&k, &Mask::new());
        assert!(a.contains(Attr::CtTuple4) && !a.contains(Attr::CtTuple6));
        assert!(KeyAttrs::from_flow(&k).contains(Attr::CtTuple4));
        k.set_eth_type(0x86dd);
        assert!(KeyAttrs::megaflow(&k, &Mask::new()).contains(Attr::CtTuple6));
        // No tuple for other packets, nor before conntrack gave one.
        k.set_eth_type(0x0806);
        assert!(!KeyAttrs::from_flow(&k).contains(Attr::CtTuple4));
        k.set_eth_type(0x0800).set_ct_nw_proto(0);
        assert!(!KeyAttrs::megaflow(&k, &Mask::new()).contains(Attr::CtTuple4));
    }
}
