//! QoS queues through translation, compared with Open vSwitch 3.1 (`ovs-vswitchd
//! --enable-dummy`, whose userspace datapath maps queue N to `skb_priority` N): a flow's
//! `skb_priority` in `ofproto/trace`'s `Flow:` line (OVS's ofproto-dpif.at "ofproto/trace
//! command 1", whose expected lines these are), and the datapath taking the
//! `set(skb_priority(...))` that `set_queue` and `enqueue` translate to. The trace goldens
//! (`tests/data/trace/queues`) hold the whole traces.

use std::sync::Arc;

use flow::odp::PortNames;
use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;

fn switch(flows: &str) -> Arc<Ofproto> {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    for (n, o) in [("p1", 1), ("p2", 2), ("p3", 3)] {
        let port = OfPort {
            name: n.into(),
            ofport: o,
            dp_port: Some(o),
            peer: None,
            vlan: VlanMode::default(),
        };
        of.add_port("br0", port).unwrap();
    }
    of.add_flows("br0", flows).unwrap();
    of
}

fn line<'a>(trace: &'a str, prefix: &str) -> &'a str {
    trace
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} line in\n{trace}"))
}

const PKT_1TO2: &str =
    "50540000000250540000000108064500001C000100004001F98CC0A80001C0A800020800F7FF00000000";
const PKT_2TO1: &str =
    "50540000000150540000000208064500001C000100004001F98CC0A80002C0A800010800F7FF00000000";

/// A traced packet keeps the priority and mark its flow gives (datapath and OpenFlow forms).
#[test]
fn trace_flow_line_shows_skb_priority() {
    let of = switch("in_port=1,actions=output:2\nin_port=2,actions=output:1\n");
    let t = of
        .trace(
            "in_port(1),skb_priority(1),skb_mark(2)",
            &[PKT_1TO2.to_owned()],
            false,
        )
        .unwrap();
    assert_eq!(
        line(&t, "Flow: "),
        "Flow: pkt_mark=0x2,skb_priority=0x1,arp,in_port=1,vlan_tci=0x0000,\
         dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,arp_spa=0.0.0.0,arp_tpa=0.0.0.0,\
         arp_op=0,arp_sha=00:00:00:00:00:00,arp_tha=00:00:00:00:00:00"
    );
    assert_eq!(line(&t, "Datapath actions: "), "Datapath actions: 2");
    let args = [
        "in_port=2,skb_priority=2,pkt_mark=1".to_owned(),
        PKT_2TO1.to_owned(),
    ];
    let t = of.trace("br0", &args, false).unwrap();
    assert_eq!(
        line(&t, "Flow: "),
        "Flow: pkt_mark=0x1,skb_priority=0x2,arp,in_port=2,vlan_tci=0x0000,\
         dl_src=50:54:00:00:00:02,dl_dst=50:54:00:00:00:01,arp_spa=0.0.0.0,arp_tpa=0.0.0.0,\
         arp_op=0,arp_sha=00:00:00:00:00:00,arp_tha=00:00:00:00:00:00"
    );
    assert_eq!(line(&t, "Datapath actions: "), "Datapath actions: 1");
}

/// What the queue actions translate to is what the datapath compiles and installs.
#[test]
fn datapath_takes_the_priority_sets() {
    let of = switch(
        "in_port=1,actions=set_queue:5,output:2,pop_queue,output:3\n\
         in_port=2,actions=enqueue:3:7,output:1\n",
    );
    for (flow, want) in [
        (
            "in_port=1,tcp",
            "set(skb_priority(0x5)),2,set(skb_priority(0)),3",
        ),
        (
            "in_port=2,udp",
            "set(skb_priority(0x7)),3,set(skb_priority(0)),1",
        ),
    ] {
        let t = of.trace("br0", &[flow.to_owned()], false).unwrap();
        let acts = line(&t, "Datapath actions: ")
            .strip_prefix("Datapath actions: ")
            .unwrap();
        assert_eq!(acts, want);
        let parsed = flow::odp::parse_actions(acts, &mut PortNames::new()).unwrap();
        let compiled = datapath::actions::compile(&parsed).unwrap();
        assert!(
            compiled
                .iter()
                .any(|a| matches!(a, datapath::actions::DpAction::SetPriority { .. })),
            "{compiled:?}"
        );
    }
}

/// A flow table cannot match `skb_priority` (OpenFlow has no code for it), as OVS refuses.
#[test]
fn flow_tables_refuse_skb_priority_matches() {
    let of = switch("");
    assert!(
        of.add_flows("br0", "skb_priority=1,actions=drop\n")
            .is_err()
    );
}

/// The priority committed before a recirculation is the packet's in the next pass (what
/// `pop_queue` restores there), as in OVS (`tests/data/trace/queues/08.out`; its whole text
/// differs only in the conntrack tuple the trace's simulated `ct` adds to the later Flow line).
#[test]
fn a_recirculation_keeps_the_priority() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/trace/queues");
    let flows = std::fs::read_to_string(dir.join("flows.txt")).unwrap();
    let want = std::fs::read_to_string(dir.join("08.out")).unwrap();
    let of = switch(&flows);
    let cmd = std::fs::read_to_string(dir.join("08.cmd")).unwrap();
    let args: Vec<String> = cmd.split_whitespace().skip(1).map(str::to_owned).collect();
    let got = of.trace("br0", &args, false).unwrap();
    let ct_tuple =
        ",ct_nw_src=10.0.0.3,ct_nw_dst=10.0.0.1,ct_nw_proto=6,ct_tp_src=80,ct_tp_dst=40000";
    assert_eq!(got.replace(ct_tuple, ""), want);
}
