//! Native tunnelling in translation: termination (`tnl_pop`) on the underlay bridge, receive
//! on the tunnel port with the tunnel metadata matched, output to a tunnel (`tnl_push` and the
//! underlay's output in one pass), GENEVE options through the TLV map, GRE with an L3 payload,
//! and the neighbour cache (set and snooped).

use std::sync::Arc;

use flow::odp::{Action, PortNames, TnlIp, TnlL4};
use flow::{EthAddr, FlowKey};
use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;
use ofproto::tunnel::{TunnelConfig, TunnelType};
use ofproto::xlate::{XlateOut, translate};

const P0: u32 = 1;
const VM0: u32 = 2;
const VM1: u32 = 3;
const TNL: u32 = 10;
const BR_PHY_MAC: &str = "8c:dc:d4:ab:5b:f0";
const PEER_MAC: &str = "8c:dc:d4:ab:58:48";

fn port(name: &str, ofport: u32, dp: Option<u32>) -> OfPort {
    OfPort {
        name: name.into(),
        ofport,
        dp_port: dp,
        peer: None,
        vlan: VlanMode::default(),
    }
}

fn opts(s: &[(&str, &str)]) -> Vec<(String, String)> {
    s.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// br-phy (LOCAL with 10.1.2.8/24, p0, NORMAL) and br-int with a tunnel of `kind` to
/// 10.1.2.9 and two VM ports.
fn switch(kind: TunnelType, tunnel_opts: &[(&str, &str)], flows: &str) -> Arc<Ofproto> {
    let of = Ofproto::new();
    of.add_bridge("br-phy").unwrap();
    of.add_port("br-phy", port("br-phy", 65534, None)).unwrap();
    of.add_port("br-phy", port("p0", 1, Some(P0))).unwrap();
    of.set_bridge_addrs(
        "br-phy",
        Some(ofproto::tunnel::parse_mac(BR_PHY_MAC).unwrap()),
        vec![("10.1.2.8".parse().unwrap(), 24)],
    )
    .unwrap();
    of.add_flow("br-phy", "actions=NORMAL").unwrap();
    of.add_bridge("br-int").unwrap();
    let mut o = opts(&[("remote_ip", "10.1.2.9")]);
    o.extend(opts(tunnel_opts));
    let t = TunnelConfig::parse(kind, &o).unwrap();
    of.add_tunnel_port("br-int", port("tnl0", 1, Some(TNL)), t)
        .unwrap();
    of.add_port("br-int", port("vm0", 2, Some(VM0))).unwrap();
    of.add_port("br-int", port("vm1", 3, Some(VM1))).unwrap();
    of.add_flows("br-int", flows).unwrap();
    of
}

fn key(text: &str) -> FlowKey {
    let mut n = PortNames::new();
    flow::odp::parse_flow(&format!("{text}, actions:drop"), &mut n)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .key
}

fn xlate(of: &Ofproto, k: &FlowKey) -> XlateOut {
    let p = of.pipe.read().unwrap();
    translate(&p, k, true, None)
}

fn acts(x: &XlateOut) -> String {
    flow::odp::format_actions(&x.actions, None)
}

const OUTER_VXLAN: &str = "in_port(1),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),\
    eth_type(0x0800),ipv4(src=10.1.2.9,dst=10.1.2.8,proto=17,tos=0,ttl=64,frag=no),\
    udp(src=49152,dst=4789)";

#[test]
fn vxlan_termination_is_one_tnl_pop_with_a_narrow_megaflow() {
    let of = switch(TunnelType::Vxlan, &[("key", "flow")], "actions=drop");
    let x = xlate(&of, &key(OUTER_VXLAN));
    assert_eq!(x.actions, vec![Action::TnlPop(TNL)], "{}", acts(&x));
    let m = &x.mask;
    // What the decision consulted: the bridge's address and the tunnel's protocol and port,
    // not the outer source port (it varies per flow by entropy).
    assert_eq!(m.nw_dst(), std::net::Ipv4Addr::BROADCAST);
    assert_eq!(m.nw_proto(), 0xff);
    assert_eq!(m.tp_dst(), 0xffff);
    assert_eq!(m.tp_src(), 0);
    assert_eq!(m.nw_src(), std::net::Ipv4Addr::UNSPECIFIED);
    // To another address of the subnet, or another UDP port: no termination.
    let other = key(&OUTER_VXLAN.replace("dst=10.1.2.8", "dst=10.1.2.7"));
    assert!(
        !xlate(&of, &other)
            .actions
            .iter()
            .any(|a| matches!(a, Action::TnlPop(_)))
    );
    let other = key(&OUTER_VXLAN.replace("dst=4789", "dst=4790"));
    assert!(
        !xlate(&of, &other)
            .actions
            .iter()
            .any(|a| matches!(a, Action::TnlPop(_)))
    );
}

const INNER: &str = "in_port(10),eth(src=52:54:00:a0:81:01,dst=52:54:00:a0:91:02),\
    eth_type(0x0800),ipv4(src=192.168.1.1,dst=192.168.2.16,proto=17,tos=0,ttl=64,frag=no),\
    udp(src=1024,dst=2000)";

#[test]
fn decapsulated_packets_match_tunnel_fields_on_the_tunnel_port() {
    let of = switch(
        TunnelType::Vxlan,
        &[("key", "flow")],
        "in_port=tnl0,tun_id=100,ip,nw_dst=192.168.2.16 actions=mod_dl_dst:52:54:00:a0:91:99,output:vm0",
    );
    let k = key(&format!(
        "tunnel(tun_id=0x64,src=10.1.2.9,dst=10.1.2.8,ttl=64,tp_src=49152,tp_dst=4789,flags(-df+csum+key)),{INNER}"
    ));
    let x = xlate(&of, &k);
    assert_eq!(
        acts(&x),
        "set(eth(dst=52:54:00:a0:91:99)),2",
        "{:?}",
        x.error
    );
    // The megaflow: tunnel id, endpoints and flags exact; outer ports and TTL not.
    assert_eq!(x.mask.tun_id(), u64::MAX);
    assert_eq!(x.mask.tun_ipv4_src(), std::net::Ipv4Addr::BROADCAST);
    assert_eq!(x.mask.tun_ipv4_dst(), std::net::Ipv4Addr::BROADCAST);
    assert_eq!(x.mask.tun_flags(), 0x07);
    assert_eq!(x.mask.tun_tp_src(), 0);
    assert_eq!(x.mask.tun_ttl(), 0);
    // Another VNI misses the rule; a packet from another endpoint finds no tunnel port.
    let k101 = key(&format!(
        "tunnel(tun_id=0x65,src=10.1.2.9,dst=10.1.2.8,flags(-df+csum+key)),{INNER}"
    ));
    assert!(xlate(&of, &k101).actions.is_empty());
    let stranger = key(&format!(
        "tunnel(tun_id=0x64,src=10.1.2.77,dst=10.1.2.8,flags(-df+csum+key)),{INNER}"
    ));
    let x = xlate(&of, &stranger);
    assert!(x.actions.is_empty());
    assert!(x.error.unwrap().contains("receive tunnel port not found"));
}

#[test]
fn a_fixed_key_tunnel_receives_only_its_key_and_beats_key_flow() {
    let of = switch(
        TunnelType::Vxlan,
        &[("key", "5")],
        "in_port=tnl0 actions=output:vm0",
    );
    let any = TunnelConfig::parse(
        TunnelType::Vxlan,
        &opts(&[("remote_ip", "flow"), ("key", "flow")]),
    )
    .unwrap();
    of.add_tunnel_port("br-int", port("tnl1", 4, Some(TNL)), any)
        .unwrap();
    of.add_flow("br-int", "in_port=tnl1 actions=output:vm1")
        .unwrap();
    let k5 = key(&format!(
        "tunnel(tun_id=0x5,src=10.1.2.9,dst=10.1.2.8,flags(-df-csum+key)),{INNER}"
    ));
    assert_eq!(acts(&xlate(&of, &k5)), "2");
    let k6 = key(&format!(
        "tunnel(tun_id=0x6,src=10.1.2.9,dst=10.1.2.8,flags(-df-csum+key)),{INNER}"
    ));
    assert_eq!(acts(&xlate(&of, &k6)), "3");
    // The same tunnel twice is refused.
    let dup = TunnelConfig::parse(
        TunnelType::Vxlan,
        &opts(&[("remote_ip", "10.1.2.9"), ("key", "5")]),
    )
    .unwrap();
    assert!(
        of.add_tunnel_port("br-int", port("tnl2", 5, Some(TNL)), dup)
            .is_err()
    );
}

const PLAIN_VM: &str = "in_port(2),eth(src=52:54:00:a0:81:01,dst=52:54:00:a0:91:02),\
    eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.1.0.2,proto=17,tos=0,ttl=64,frag=no),\
    udp(src=1024,dst=2000)";

#[test]
fn encapsulation_pushes_and_outputs_in_one_pass_once_the_neighbour_is_known() {
    let of = switch(
        TunnelType::Vxlan,
        &[("key", "flow")],
        "in_port=vm0 actions=set_field:100->tun_id,output:tnl0",
    );
    // No neighbour yet: dropped (nothing to address the frame to).
    let x = xlate(&of, &key(PLAIN_VM));
    assert!(x.actions.is_empty(), "{}", acts(&x));
    of.neigh_set("br-phy", "10.1.2.9", PEER_MAC).unwrap();
    let x = xlate(&of, &key(PLAIN_VM));
    let [Action::TnlPush(t), Action::Output(P0)] = x.actions.as_slice() else {
        panic!("{}", acts(&x));
    };
    assert_eq!(t.tnl_port, TNL);
    let h = &t.header;
    assert_eq!(h.eth_dst.to_string(), PEER_MAC);
    assert_eq!(h.eth_src.to_string(), BR_PHY_MAC);
    assert_eq!(h.size, 50);
    let TnlIp::V4 {
        src,
        dst,
        proto,
        ttl,
        frag,
        ..
    } = &h.ip
    else {
        panic!("{h:?}");
    };
    assert_eq!(
        (src.to_string(), dst.to_string()),
        ("10.1.2.8".into(), "10.1.2.9".into())
    );
    assert_eq!((*proto, *ttl, *frag), (17, 64, 0x4000));
    let TnlL4::Vxlan { udp, vni, .. } = &h.l4 else {
        panic!("{h:?}");
    };
    assert_eq!((udp.dst, udp.csum, *vni), (4789, 0, 100));
    // The megaflow does not depend on the outer packet's translation in br-phy.
    assert_eq!(x.mask.eth_dst(), EthAddr::ZERO);
    // Output then more actions: the push happens on a copy.
    let of2 = switch(
        TunnelType::Vxlan,
        &[("key", "flow"), ("csum", "true")],
        "in_port=vm0 actions=set_field:100->tun_id,output:tnl0,output:vm1",
    );
    of2.neigh_set("br-phy", "10.1.2.9", PEER_MAC).unwrap();
    let x = xlate(&of2, &key(PLAIN_VM));
    let [Action::Clone(sub), Action::Output(VM1)] = x.actions.as_slice() else {
        panic!("{}", acts(&x));
    };
    let Action::TnlPush(t) = &sub[0] else {
        panic!()
    };
    let TnlL4::Vxlan { udp, .. } = &t.header.l4 else {
        panic!()
    };
    assert_ne!(
        udp.csum, 0,
        "csum=true asks the datapath for a UDP checksum"
    );
}

#[test]
fn the_oam_flag_sets_genev_s_o_bit() {
    let of = switch(
        TunnelType::Geneve,
        &[("key", "flow")],
        "in_port=vm0 actions=output:tnl0",
    );
    of.neigh_set("br-phy", "10.1.2.9", PEER_MAC).unwrap();
    let oam = |k: &FlowKey| {
        let x = xlate(&of, k);
        let Some(Action::TnlPush(t)) = x.actions.first() else {
            panic!("{}", acts(&x));
        };
        let TnlL4::Geneve { oam, .. } = &t.header.l4 else {
            panic!("{:?}", t.header);
        };
        *oam
    };
    let mut k = key(PLAIN_VM);
    assert!(!oam(&k));
    k.set_tun_flags(flow::key::tun_flags::OAM);
    assert!(oam(&k));
}

#[test]
fn routes_choose_the_gateway_neighbour_and_unrouted_destinations_drop() {
    let of = switch(
        TunnelType::Vxlan,
        &[("key", "flow")],
        "in_port=vm0 actions=set_field:100->tun_id,set_field:10.9.0.5->tun_dst,output:tnl0",
    );
    // remote_ip is fixed in this tunnel, so tun_dst does not matter: add one with flow.
    let t = TunnelConfig::parse(
        TunnelType::Vxlan,
        &opts(&[("remote_ip", "flow"), ("key", "flow")]),
    )
    .unwrap();
    of.del_port("tnl0").unwrap();
    of.add_tunnel_port("br-int", port("tnl0", 1, Some(TNL)), t)
        .unwrap();
    assert!(xlate(&of, &key(PLAIN_VM)).actions.is_empty());
    of.route_add("10.9.0.0/16", "br-phy", Some("10.1.2.1"))
        .unwrap();
    of.neigh_set("br-phy", "10.1.2.1", "02:00:00:00:00:01")
        .unwrap();
    let x = xlate(&of, &key(PLAIN_VM));
    let [Action::TnlPush(t), Action::Output(P0)] = x.actions.as_slice() else {
        panic!("{}", acts(&x));
    };
    assert_eq!(t.header.eth_dst.to_string(), "02:00:00:00:00:01");
    let show = of.route_show();
    assert!(
        show.contains("User: 10.9.0.0/16 dev br-phy GW 10.1.2.1 SRC 10.1.2.8"),
        "{show}"
    );
}

/// The outer TOS byte: `tos=inherit` copies the inner DSCP only and the megaflow matches only
/// those bits, a fixed `tos` goes as it is, and neither puts ECN bits in the template nor in
/// the megaflow's mask: the datapath's push copies each packet's ECN field (as OVS's outer
/// header always inherits it). A fixed `tos` with ECN bits is refused, as OVS refuses it.
#[test]
fn the_outer_tos_takes_dscp_from_the_options_and_leaves_ecn_to_the_push() {
    let ecn_inner = PLAIN_VM.replace("tos=0,", "tos=0xbb,");
    for (tos, want, mask) in [("inherit", 0xb8, 0xfc), ("40", 40, 0)] {
        let of = switch(
            TunnelType::Vxlan,
            &[("key", "flow"), ("tos", tos)],
            "in_port=vm0 actions=set_field:100->tun_id,output:tnl0",
        );
        of.neigh_set("br-phy", "10.1.2.9", PEER_MAC).unwrap();
        let x = xlate(&of, &key(&ecn_inner));
        let [Action::TnlPush(t), Action::Output(P0)] = x.actions.as_slice() else {
            panic!("{}", acts(&x));
        };
        let TnlIp::V4 { tos: got, .. } = &t.header.ip else {
            panic!("{:?}", t.header);
        };
        assert_eq!(*got, want, "tos={tos}");
        assert_eq!(x.mask.nw_tos(), mask, "tos={tos}");
    }
    let refused = TunnelConfig::parse(
        TunnelType::Vxlan,
        &[("remote_ip", "10.1.2.9"), ("tos", "41")].map(|(k, v)| (k.to_owned(), v.to_owned())),
    )
    .unwrap_err();
    assert!(refused.contains("ECN part"), "{refused}");
}

/// A VXLAN switch whose VM traffic goes to the tunnel, and the peer's ARP reply to the bridge.
fn vxlan_switch_and_peer_reply() -> (Arc<Ofproto>, FlowKey) {
    let of = switch(
        TunnelType::Vxlan,
        &[("key", "flow")],
        "in_port=vm0 actions=set_field:100->tun_id,output:tnl0",
    );
    let reply = key(
        "in_port(1),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),eth_type(0x0806),\
         arp(sip=10.1.2.9,tip=10.1.2.8,op=2,sha=8c:dc:d4:ab:58:48,tha=8c:dc:d4:ab:5b:f0)",
    );
    (of, reply)
}

#[test]
fn arp_replies_to_the_bridge_teach_the_neighbour() {
    let (of, reply) = vxlan_switch_and_peer_reply();
    let x = xlate(&of, &reply);
    assert!(x.neigh_learned);
    assert!(of.neigh_show().contains("10.1.2.9"), "{}", of.neigh_show());
    assert_eq!(
        acts(&xlate(&of, &key(PLAIN_VM)))
            .matches("tnl_push")
            .count(),
        1
    );
}

#[test]
fn a_gratuitous_arp_teaches_the_neighbour_its_new_address() {
    let (of, reply) = vxlan_switch_and_peer_reply();
    assert!(xlate(&of, &reply).neigh_learned);
    // The neighbour's address changes; it announces it, broadcast, as a request and as a
    // reply (both are gratuitous: sender and target address the same).
    for (op, mac) in [(1, "02:00:00:00:00:09"), (2, "02:00:00:00:00:0a")] {
        let garp = key(&format!(
            "in_port(1),eth(src={mac},dst=ff:ff:ff:ff:ff:ff),eth_type(0x0806),\
             arp(sip=10.1.2.9,tip=10.1.2.9,op={op},sha={mac},tha=00:00:00:00:00:00)"
        ));
        assert!(xlate(&of, &garp).neigh_learned, "op {op}");
        assert!(of.neigh_show().contains(mac), "{}", of.neigh_show());
        assert!(acts(&xlate(&of, &key(PLAIN_VM))).contains(&format!("dst={mac}")));
    }
    // An ordinary request is not learned from (OVS snoops replies and gratuitous ARPs only).
    let request = key(
        "in_port(1),eth(src=02:00:00:00:00:0b,dst=ff:ff:ff:ff:ff:ff),eth_type(0x0806),\
         arp(sip=10.1.2.9,tip=10.1.2.8,op=1,sha=02:00:00:00:00:0b,tha=00:00:00:00:00:00)",
    );
    assert!(!xlate(&of, &request).neigh_learned);
    assert!(!of.neigh_show().contains("02:00:00:00:00:0b"));
}

#[test]
fn geneve_options_match_through_the_tlv_map_and_unknown_critical_ones_drop() {
    let of = switch(TunnelType::Geneve, &[("key", "flow")], "");
    let flows = "in_port=tnl0,tun_id=3,tun_metadata0=0x30002 actions=output:vm0\n\
         in_port=vm0 actions=set_field:3->tun_id,set_field:0x30002->tun_metadata0,output:tnl0";
    // A flow on a field the bridge does not map is refused, as OVS refuses it.
    let e = of.add_flows("br-int", flows).unwrap_err();
    assert!(e.contains("INVALID_TLV_FIELD"), "{e}");
    of.add_tlv_map("br-int", "{class=0x102,type=0x80,len=4}->tun_metadata0")
        .unwrap();
    of.add_flows("br-int", flows).unwrap();
    assert!(
        of.dump_tlv_map("br-int")
            .unwrap()
            .contains("0x102\t0x80\t4\ttun_metadata0")
    );
    let inner = INNER.replace("dst=192.168.2.16", "dst=192.168.1.16");
    let k = key(&format!(
        "tunnel(tun_id=0x3,src=10.1.2.9,dst=10.1.2.8,geneve({{class=0x102,type=0x80,len=4,0x30002}}),flags(-df+csum+key)),{inner}"
    ));
    let x = xlate(&of, &k);
    assert_eq!(acts(&x), "2", "{:?}", x.error);
    // The megaflow matches the raw options exactly.
    assert_eq!(x.mask.tun_geneve_len(), 0xff);
    let other = key(&format!(
        "tunnel(tun_id=0x3,src=10.1.2.9,dst=10.1.2.8,geneve({{class=0x102,type=0x80,len=4,0x30003}}),flags(-df+csum+key)),{inner}"
    ));
    assert!(xlate(&of, &other).actions.is_empty());
    // An unmapped critical option (type bit 0x80): dropped, as OVS does.
    let crit = key(&format!(
        "tunnel(tun_id=0x3,src=10.1.2.9,dst=10.1.2.8,geneve({{class=0x999,type=0x81,len=4,0x1}}),flags(-df+csum+key)),{inner}"
    ));
    let x = xlate(&of, &crit);
    assert!(x.actions.is_empty());
    assert!(x.error.unwrap().contains("critical"));
    // An unmapped non-critical one is ignored.
    let lax = key(&format!(
        "tunnel(tun_id=0x3,src=10.1.2.9,dst=10.1.2.8,geneve({{class=0x999,type=0x1,len=4,0x1}}{{class=0x102,type=0x80,len=4,0x30002}}),flags(-df+csum+key)),{inner}"
    ));
    assert_eq!(acts(&xlate(&of, &lax)), "2");
    // Encapsulation carries the option.
    of.neigh_set("br-phy", "10.1.2.9", PEER_MAC).unwrap();
    let x = xlate(&of, &key(PLAIN_VM));
    let [Action::TnlPush(t), Action::Output(P0)] = x.actions.as_slice() else {
        panic!("{}", acts(&x));
    };
    let TnlL4::Geneve {
        vni, options, crit, ..
    } = &t.header.l4
    else {
        panic!()
    };
    assert_eq!(*vni, 3);
    assert_eq!(options, &[0x01, 0x02, 0x80, 0x01, 0, 3, 0, 2]);
    assert!(*crit);
    assert_eq!(t.header.size, 50 + 8);
}

/// A 20-byte value, wider than the 16 bytes a field held before the TLV allocation.
const V20: &str = "0x0102030405060708090a0b0c0d0e0f1011121314";

/// A GENEVE switch whose bridge maps OVN's 4-byte option to `tun_metadata0` and a 20-byte one
/// to `tun_metadata40`.
fn wide_geneve_switch() -> Arc<Ofproto> {
    let of = switch(TunnelType::Geneve, &[("key", "flow")], "");
    of.add_tlv_map(
        "br-int",
        "{class=0x102,type=0x80,len=4}->tun_metadata0,{class=0x103,type=1,len=20}->tun_metadata40",
    )
    .unwrap();
    of
}

/// A field above `tun_metadata7` with an option longer than 16 bytes: matched on
/// decapsulation and sent on encapsulation whole, beside a short one.
#[test]
fn a_wide_option_above_tun_metadata7_crosses_geneve_whole() {
    let of = wide_geneve_switch();
    of.add_flows(
        "br-int",
        &format!(
            "in_port=tnl0,tun_metadata40={V20} actions=output:vm1\n\
             in_port=vm0 actions=set_field:3->tun_id,set_field:0x30002->tun_metadata0,\
             set_field:{V20}->tun_metadata40,output:tnl0"
        ),
    )
    .unwrap();
    let dump = of.dump_flows("br-int", None).unwrap();
    assert!(
        dump.contains("tun_metadata40=0x102030405060708090a0b0c0d0e0f1011121314"),
        "{dump}"
    );
    assert!(dump.contains("set_field:0x102030405060708090a0b0c0d0e0f1011121314->tun_metadata40"));
    let inner = INNER.replace("dst=192.168.2.16", "dst=192.168.1.16");
    let opts = |last: &str| {
        key(&format!(
            "tunnel(tun_id=0x3,src=10.1.2.9,dst=10.1.2.8,geneve({{class=0x102,type=0x80,len=4,0x30002}}\
             {{class=0x103,type=0x1,len=20,0x0102030405060708090a0b0c0d0e0f10111213{last}}}),\
             flags(-df+csum+key)),{inner}"
        ))
    };
    let x = xlate(&of, &opts("14"));
    assert_eq!(acts(&x), "3", "{:?}", x.error);
    assert!(xlate(&of, &opts("15")).actions.is_empty());
    of.neigh_set("br-phy", "10.1.2.9", PEER_MAC).unwrap();
    let x = xlate(&of, &key(PLAIN_VM));
    let [Action::TnlPush(t), Action::Output(P0)] = x.actions.as_slice() else {
        panic!("{}", acts(&x));
    };
    let TnlL4::Geneve { options, .. } = &t.header.l4 else {
        panic!()
    };
    let mut want = vec![0x01, 0x02, 0x80, 0x01, 0, 3, 0, 2, 0x01, 0x03, 0x01, 0x05];
    want.extend(1..=20u8);
    assert_eq!(options, &want);
    assert_eq!(t.header.size, 50 + 8 + 24);
}

/// After a recirculation the tables see the options as the first pass had them (the frozen
/// fields), not the raw options the datapath key still carries read again.
#[test]
fn tunnel_metadata_survives_a_recirculation() {
    let of = wide_geneve_switch();
    of.add_flows(
        "br-int",
        &format!(
            "in_port=tnl0,ip,tun_metadata40={V20} actions=ct(table=1)\n\
             table=1,tun_metadata0=0x30002,tun_metadata40={V20} actions=output:vm1"
        ),
    )
    .unwrap();
    let inner = INNER.replace("dst=192.168.2.16", "dst=192.168.1.16");
    let mut k = key(&format!(
        "tunnel(tun_id=0x3,src=10.1.2.9,dst=10.1.2.8,geneve({{class=0x102,type=0x80,len=4,0x30002}}\
         {{class=0x103,type=0x1,len=20,0x0102030405060708090a0b0c0d0e0f1011121314}}),\
         flags(-df+csum+key)),{inner}"
    ));
    let x = xlate(&of, &k);
    let Some(&Action::Recirc(id)) = x.actions.last() else {
        panic!("{} {:?}", acts(&x), x.error);
    };
    use flow::key::ct_state::{NEW, TRK};
    k.set_recirc_id(id).set_ct_state(TRK | NEW);
    let x = xlate(&of, &k);
    assert_eq!(acts(&x), "3", "{:?}", x.error);
}

/// `push_mpls` on an IP packet makes the label stack entry as OVS does (checked against
/// Debian's OVS by the mplsogre interop recording, whose DSCP 46 ping goes out with TC 6):
/// label 0, or 2 (IPv6 explicit null) over IPv6; TC the DSCP's low three bits; TTL the IP
/// TTL, or 64 when that is 0; bottom of stack.
#[test]
fn push_mpls_takes_tc_and_ttl_from_the_ip_header_as_ovs_does() {
    let of = switch(
        TunnelType::Gre,
        &[],
        "in_port=vm0,ip actions=push_mpls:0x8847,output:vm1\n\
         in_port=vm0,ipv6 actions=push_mpls:0x8847,output:vm1",
    );
    let lse = |k: &str| {
        let x = xlate(&of, &key(k));
        match x.actions.first() {
            Some(Action::PushMpls { lse, .. }) => *lse,
            _ => panic!("{}", acts(&x)),
        }
    };
    let v4 = |tos: u8, ttl: u8| {
        lse(&PLAIN_VM.replace("tos=0,ttl=64", &format!("tos={tos:#x},ttl={ttl}")))
    };
    // DSCP 46 (0xb8): TC 6; the ECN bits do not count.
    assert_eq!(v4(0xb9, 64), 6 << 9 | 0x100 | 64);
    assert_eq!(v4(0x20, 17), 0x100 | 17);
    assert_eq!(v4(0, 0), 0x100 | 64);
    // What the rule matched stays in the megaflow beside what push_mpls reads.
    let of_ecn = switch(
        TunnelType::Gre,
        &[],
        "in_port=vm0,ip,nw_ecn=3 actions=push_mpls:0x8847,output:vm1",
    );
    let ce = PLAIN_VM.replace("tos=0,", "tos=0x3,");
    assert_eq!(xlate(&of_ecn, &key(&ce)).mask.nw_tos(), 0xff);
    let v6 = lse(
        "in_port(2),eth(src=52:54:00:a0:81:01,dst=52:54:00:a0:91:02),eth_type(0x86dd),\
         ipv6(src=2001:db8::1,dst=2001:db8::2,label=0,proto=17,tclass=0x28,hlimit=9,frag=no),\
         udp(src=1,dst=2)",
    );
    assert_eq!(v6, 2 << 12 | 2 << 9 | 0x100 | 9);
}

#[test]
fn gre_l3_mpls_pops_in_the_same_pass_and_encapsulates_without_ethernet() {
    let of = switch(
        TunnelType::Gre,
        &[("key", "flow"), ("packet_type", "legacy_l3")],
        "in_port=tnl0,mpls,mpls_label=812 actions=pop_mpls:0x0800,mod_dl_dst:52:54:00:a0:91:10,output:vm0\n\
         in_port=vm0,ip actions=push_mpls:0x8847,set_field:812->mpls_label,output:tnl0",
    );
    // The termination is GRE's.
    let outer = key(
        "in_port(1),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),\
         ipv4(src=10.1.2.9,dst=10.1.2.8,proto=47,tos=0,ttl=64,frag=no)",
    );
    assert_eq!(xlate(&of, &outer).actions, vec![Action::TnlPop(TNL)]);
    let k = key(
        "tunnel(tun_id=0x0,src=10.1.2.9,dst=10.1.2.8,flags(-df-csum+key)),in_port(10),\
         packet_type(ns=1,id=0x8847),mpls(label=812,tc=0,ttl=4,bos=1)",
    );
    let x = xlate(&of, &k);
    assert_eq!(
        acts(&x),
        "push_eth(src=00:00:00:00:00:00,dst=52:54:00:a0:91:10),pop_mpls(eth_type=0x800),2",
        "{:?}",
        x.error
    );
    // An Ethernet payload on this legacy_l3 tunnel finds no port.
    let eth = key(&format!(
        "tunnel(tun_id=0x0,src=10.1.2.9,dst=10.1.2.8,flags(-df-csum+key)),{INNER}"
    ));
    assert!(xlate(&of, &eth).actions.is_empty());
    of.neigh_set("br-phy", "10.1.2.9", PEER_MAC).unwrap();
    let x = xlate(&of, &key(PLAIN_VM));
    let s = acts(&x);
    assert!(s.starts_with("push_mpls("), "{s}");
    let i = x
        .actions
        .iter()
        .position(|a| matches!(a, Action::TnlPush(_)))
        .unwrap();
    assert_eq!(x.actions[i - 1], Action::PopEth, "{s}");
    let Action::TnlPush(t) = &x.actions[i] else {
        panic!()
    };
    let TnlL4::Gre { proto, key, .. } = &t.header.l4 else {
        panic!()
    };
    assert_eq!((*proto, *key), (0x8847, Some(0)));
    assert_eq!(t.header.size, 14 + 20 + 8);
}

/// br-phy's address becomes fd00::8/64, and br-int gets VXLAN port `name` (ofport `ofport`,
/// key from the flow) to `remote`.
fn ipv6_underlay(of: &Ofproto, name: &str, ofport: u32, remote: &str) {
    of.set_bridge_addrs(
        "br-phy",
        Some(ofproto::tunnel::parse_mac(BR_PHY_MAC).unwrap()),
        vec![("fd00::8".parse().unwrap(), 64)],
    )
    .unwrap();
    let t6 = TunnelConfig::parse(
        TunnelType::Vxlan,
        &opts(&[("remote_ip", remote), ("key", "flow")]),
    )
    .unwrap();
    of.add_tunnel_port("br-int", port(name, ofport, Some(TNL)), t6)
        .unwrap();
}

#[test]
fn ipv6_underlay_terminates_and_encapsulates() {
    let of = switch(TunnelType::Vxlan, &[("key", "5")], "actions=drop");
    of.del_flows("br-int", None, false).unwrap();
    ipv6_underlay(&of, "tnl1", 4, "fd00::9");
    of.add_flows(
        "br-int",
        "in_port=tnl1,tun_id=7 actions=output:vm0\nin_port=vm0 actions=set_field:7->tun_id,output:tnl1",
    )
    .unwrap();
    let outer = key(
        "in_port(1),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),eth_type(0x86dd),\
         ipv6(src=fd00::9,dst=fd00::8,label=0,proto=17,tclass=0,hlimit=64,frag=no),\
         udp(src=49152,dst=4789)",
    );
    assert_eq!(xlate(&of, &outer).actions, vec![Action::TnlPop(TNL)]);
    let k = key(&format!(
        "tunnel(tun_id=0x7,ipv6_src=fd00::9,ipv6_dst=fd00::8,flags(-df-csum+key)),{INNER}"
    ));
    let x = xlate(&of, &k);
    assert_eq!(acts(&x), "2", "{:?}", x.error);
    assert_eq!(x.mask.tun_ipv6_src(), std::net::Ipv6Addr::from(u128::MAX));
    of.neigh_set("br-phy", "fd00::9", PEER_MAC).unwrap();
    let x = xlate(&of, &key(PLAIN_VM));
    let [Action::TnlPush(t), Action::Output(P0)] = x.actions.as_slice() else {
        panic!("{}", acts(&x));
    };
    let TnlIp::V6 {
        src, dst, proto, ..
    } = &t.header.ip
    else {
        panic!("{:?}", t.header)
    };
    assert_eq!(
        (src.to_string(), dst.to_string(), *proto),
        ("fd00::8".into(), "fd00::9".into(), 17)
    );
    assert_eq!((t.header.dl_type, t.header.size), (0x86dd, 70));
}

#[test]
fn an_underlay_vlan_tags_encapsulated_packets_and_terminates_tagged_ones() {
    let of = switch(
        TunnelType::Geneve,
        &[("key", "flow")],
        "in_port=vm0 actions=set_field:3->tun_id,output:tnl0",
    );
    // The local port is an access port of VLAN 177, p0 a trunk (seed 002's underlay).
    of.del_port("br-phy").unwrap();
    let mut local = port("br-phy", 65534, None);
    local.vlan.tag = Some(177);
    of.add_port("br-phy", local).unwrap();
    of.neigh_set("br-phy", "10.1.2.9", PEER_MAC).unwrap();
    let x = xlate(&of, &key(PLAIN_VM));
    let s = acts(&x);
    assert!(s.starts_with("tnl_push("), "{s}");
    assert!(s.ends_with(",push_vlan(vid=177,pcp=0),1"), "{s}");
    let tagged = key(
        "in_port(1),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),eth_type(0x8100),\
         vlan(vid=177,pcp=0),encap(eth_type(0x0800),\
         ipv4(src=10.1.2.9,dst=10.1.2.8,proto=17,tos=0,ttl=64,frag=no),udp(src=1,dst=6081))",
    );
    assert_eq!(xlate(&of, &tagged).actions, vec![Action::TnlPop(TNL)]);
    // Untagged on the trunk is VLAN 0: not the local port's VLAN, so not terminated.
    let untagged = key(
        "in_port(1),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),\
         ipv4(src=10.1.2.9,dst=10.1.2.8,proto=17,tos=0,ttl=64,frag=no),udp(src=1,dst=6081)",
    );
    assert!(!xlate(&of, &untagged).actions.contains(&Action::TnlPop(TNL)));
}

#[test]
fn unresolved_neighbours_are_asked_for_with_arp_and_nd() {
    let of = switch(
        TunnelType::Vxlan,
        &[("key", "flow")],
        "in_port=vm0 actions=set_field:100->tun_id,output:tnl0",
    );
    // Revalidation (no side effects) sends nothing.
    let p = of.pipe.read().unwrap();
    let quiet = translate(&p, &key(PLAIN_VM), false, None);
    drop(p);
    assert!(quiet.packet_outs.is_empty());
    // An upcall drops the packet and asks for 10.1.2.9 from the bridge's address, through
    // br-phy's tables as from its local port: NORMAL floods the broadcast to p0.
    let x = xlate(&of, &key(PLAIN_VM));
    assert!(x.actions.is_empty(), "{}", acts(&x));
    let [po] = x.packet_outs.as_slice() else {
        panic!("{:?}", x.packet_outs)
    };
    assert_eq!(po.actions, vec![Action::Output(P0)]);
    #[rustfmt::skip]
    let arp: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0, 0x08, 0x06,
        0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01, // Ethernet/IPv4, request
        0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0, 10, 1, 2, 8, // sender: the bridge
        0, 0, 0, 0, 0, 0, 10, 1, 2, 9, // target: the remote endpoint
    ];
    assert_eq!(po.frame, arp);

    // IPv6: a neighbour solicitation to the solicited-node group, with the source link-layer
    // address option and a valid checksum.
    of.del_port("tnl0").unwrap();
    ipv6_underlay(&of, "tnl0", 1, "fd00::12:3456");
    let x = xlate(&of, &key(PLAIN_VM));
    let [po] = x.packet_outs.as_slice() else {
        panic!("{:?}", x.packet_outs)
    };
    let f = &po.frame;
    assert_eq!(f.len(), 14 + 40 + 32);
    assert_eq!(f[..6], [0x33, 0x33, 0xff, 0x12, 0x34, 0x56]);
    assert_eq!(f[12..14], [0x86, 0xdd]);
    let ip = wire::Ipv6Packet::new_checked(&f[14..]).unwrap();
    assert_eq!(ip.src_addr().to_string(), "fd00::8");
    assert_eq!(ip.dst_addr().to_string(), "ff02::1:ff12:3456");
    assert_eq!((ip.hop_limit(), ip.payload_len()), (255, 32));
    let icmp = wire::Icmpv6Packet::new_checked(&f[54..]).unwrap();
    assert!(icmp.verify_checksum(&ip.src_addr(), &ip.dst_addr()));
    assert_eq!(
        wire::Icmpv6Repr::parse(&icmp).unwrap(),
        wire::Icmpv6Repr::NeighborSolicit {
            target_addr: "fd00::12:3456".parse().unwrap(),
            source_lladdr: Some(wire::EthernetAddress([0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0])),
        }
    );
    assert_eq!(po.actions, vec![Action::Output(P0)]);
}

/// A neighbour request that gets no answer is asked again: revalidation removes the megaflow
/// that waits for the neighbour, so the next packet's upcall sends another request (before,
/// the drop megaflow lived as long as traffic kept it alive, and the request was never
/// repeated).
#[test]
fn a_lost_neighbour_request_is_repeated_after_revalidation() {
    use datapath::dpif::{DatapathBuilder, DpConfig};
    use datapath::tunnel::{TunnelKind, TunnelPort};
    use netdev::memory::{ReplayPort, SampleSpec, SinkPort};
    use std::time::{Duration, Instant};

    let of = switch(
        TunnelType::Vxlan,
        &[("key", "flow")],
        "in_port=vm0 actions=set_field:100->tun_id,output:tnl0",
    );
    let p = of.pipe.read().unwrap();
    assert!(translate(&p, &key(PLAIN_VM), false, None).neigh_pending);
    drop(p);
    // PLAIN_VM as a frame: UDP 10.0.0.1:1024 -> 10.1.0.2:2000.
    let mut frame = vec![
        0x52, 0x54, 0, 0xa0, 0x91, 2, 0x52, 0x54, 0, 0xa0, 0x81, 1, 8, 0,
    ];
    frame.extend_from_slice(&[0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1]);
    frame.extend_from_slice(&[10, 1, 0, 2, 4, 0, 7, 208, 0, 8, 0, 0]);
    frame.resize(60, 0);
    let mut b = DatapathBuilder::new(DpConfig::default());
    let o = of.clone();
    b.set_upcall(Box::new(move || o.upcall_handler()));
    let keep = SampleSpec { max: 8, every: 1 };
    b.add_port(P0, Box::new(SinkPort::new("p0", keep))).unwrap();
    b.add_port(VM0, Box::new(ReplayPort::new("vm0", "gen", vec![frame], 1)))
        .unwrap();
    b.add_port(
        TNL,
        Box::new(TunnelPort::new(
            "vxlan_sys_4789",
            TunnelKind::Vxlan { dst_port: 4789 },
        )),
    )
    .unwrap();
    let mut dp = b.start().unwrap();
    let requests = |dp: &datapath::dpif::Datapath| dp.port_counters("p0").unwrap().tx_packets;
    let wait = |dp: &datapath::dpif::Datapath, n: u64| {
        let t = Instant::now();
        while requests(dp) < n {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "{} requests, waiting for {n}",
                requests(dp)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait(&dp, 1);
    // The replay keeps the drop megaflow busy; without an answer nothing more is sent...
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(requests(&dp), 1);
    // ...until a revalidation round.
    let r = of.revalidate(&mut dp);
    assert!(r.removed >= 1, "{r:?}");
    wait(&dp, 2);
    // With the neighbour known, the flow stays and the frames are encapsulated.
    of.neigh_set("br-phy", "10.1.2.9", PEER_MAC).unwrap();
    of.revalidate(&mut dp);
    std::thread::sleep(Duration::from_millis(100));
    let r = of.revalidate(&mut dp);
    assert_eq!(r.removed, 0, "{r:?}");
    let n = requests(&dp);
    wait(&dp, n + 1000);
    drop(dp.stop());
}

/// Decapsulation and ECN (RFC 6040 §4.2, as OVS's `tunnel - ECN decapsulation`): an outer CE
/// marks an ECN-capable inner packet CE, without consulting its IP protocol; a packet that is
/// not ECN-capable is dropped. The megaflow matches the whole outer TOS, and the inner ECN
/// field when the outer one is CE.
#[test]
fn an_outer_ce_marks_the_inner_packet_or_drops_it() {
    let of = switch(
        TunnelType::Vxlan,
        &[("key", "flow")],
        "in_port=1,actions=output:2",
    );
    let tunnelled = |outer_tos: u8, inner_tos: u8| {
        let k = key(&format!(
            "tunnel(tun_id=0x0,src=10.1.2.9,dst=10.1.2.8,tos={outer_tos:#x},ttl=64,\
             flags(key)),in_port(10),eth(src=52:54:00:a0:81:01,dst=52:54:00:a0:91:02),\
             eth_type(0x0800),ipv4(src=192.168.1.1,dst=192.168.2.16,proto=6,tos={inner_tos},\
             ttl=64,frag=no),tcp(src=8,dst=9)"
        ));
        xlate(&of, &k)
    };
    for inner in [1, 2, 3] {
        let x = tunnelled(3, inner);
        let want = if inner == 3 {
            "2"
        } else {
            "set(ipv4(tos=0x3/0x3)),2"
        };
        assert_eq!(acts(&x), want);
        assert_eq!((x.mask.tun_tos(), x.mask.nw_tos()), (0xff, 3));
        assert_eq!(x.mask.nw_proto(), 0, "{inner}");
    }
    let x = tunnelled(3, 0);
    assert!(x.actions.is_empty(), "{}", acts(&x));
    assert_eq!((x.mask.tun_tos(), x.mask.nw_tos()), (0xff, 3));
    // Not CE outside: the inner field is left alone and not matched.
    let x = tunnelled(1, 0);
    assert_eq!(acts(&x), "2");
    assert_eq!((x.mask.tun_tos(), x.mask.nw_tos()), (0xff, 0));
}

/// `tnl/neigh/set` takes any device's name, as OVS's does, and an entry goes with its device:
/// a port removed, or a bridge (with its ports) removed (OVS's `tunnel - neighbor entry add and
/// deletion`).
#[test]
fn neighbours_go_with_their_device() {
    let of = switch(TunnelType::Vxlan, &[], "actions=drop");
    for (dev, ip, mac) in [
        ("vm0", "10.0.0.1", "00:00:10:00:00:01"),
        ("br-int", "10.0.2.1", "00:00:10:00:02:01"),
        ("br-phy", "20.0.0.1", "00:00:20:00:00:01"),
        ("elsewhere", "30.0.0.1", "00:00:30:00:00:01"),
    ] {
        of.neigh_set(dev, ip, mac).unwrap();
    }
    assert_eq!(
        of.neigh_set("vm0", "10.0.0.x", "00:00:10:00:00:01")
            .unwrap_err(),
        "bad IP address"
    );
    assert_eq!(
        of.neigh_set("vm0", "10.0.0.9", "00:00:10").unwrap_err(),
        "bad MAC address"
    );
    let show = of.neigh_show();
    assert!(
        show.contains("10.0.0.1") && show.contains("30.0.0.1"),
        "{show}"
    );
    of.del_port("vm0").unwrap();
    assert!(!of.neigh_show().contains("10.0.0.1"));
    of.del_bridge("br-int").unwrap();
    let show = of.neigh_show();
    assert!(!show.contains("10.0.2.1"), "{show}");
    assert!(
        show.contains("20.0.0.1") && show.contains("30.0.0.1"),
        "{show}"
    );
}
