//! `dp_hash` as a match field: a rule picks packets by the bits of the hash a datapath `hash`
//! action computed (as a dp_hash select group's next pass does), and the megaflow depends on
//! those bits only.

use flow::FlowKey;
use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;
use ofproto::xlate::translate;

fn port(name: &str, ofport: u32) -> OfPort {
    OfPort {
        name: name.into(),
        ofport,
        dp_port: Some(ofport),
        peer: None,
        vlan: VlanMode::default(),
    }
}

#[test]
fn rules_match_dp_hash_under_their_mask() {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    for (n, o) in [("p1", 1), ("p2", 2), ("p3", 3)] {
        of.add_port("br0", port(n, o)).unwrap();
    }
    of.add_flows(
        "br0",
        "priority=10,dp_hash=0x2/0x3,actions=output:2\n\
         priority=10,dp_hash=0x1/0x3,actions=output:3\n\
         priority=0,actions=drop\n",
    )
    .unwrap();
    let dump = of.dump_flows("br0", None).unwrap();
    assert!(dump.contains("dp_hash=0x2/0x3 actions=output:2"), "{dump}");
    let pass = |hash: u32| {
        let mut k = FlowKey::new();
        k.set_in_port(1).set_dp_hash(hash);
        translate(&of.pipe.read().unwrap(), &k, false, None)
    };
    let out = |hash| flow::odp::format_actions(&pass(hash).actions, None);
    assert_eq!(out(0x16), "2");
    assert_eq!(out(0xfd), "3");
    assert_eq!(pass(0x4).actions, []);
    assert_eq!(pass(0x16).mask.dp_hash(), 0x3);
}
