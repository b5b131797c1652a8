//! Outputs and rule statistics as OVS 3.1 has them: `output(port=N,max_len=M)` truncates only
//! at a port with a datapath side, none to a patch port (an error in the trace; `ofproto-dpif.at`'s
//! truncate scenarios), and a packet that misses counts for its rules when it is translated.

use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;

fn port(name: &str, ofport: u32, dp_port: Option<u32>, peer: Option<&str>) -> OfPort {
    OfPort {
        name: name.into(),
        ofport,
        dp_port,
        peer: peer.map(String::from),
        vlan: VlanMode::default(),
    }
}

#[test]
fn truncation_needs_a_datapath_port() {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    of.add_bridge("br1").unwrap();
    of.add_port("br0", port("br0", 0xfffe, Some(100), None))
        .unwrap();
    of.add_port("br0", port("pbr0", 1, None, Some("pbr1")))
        .unwrap();
    of.add_port("br0", port("p2", 2, Some(2), None)).unwrap();
    of.add_port("br1", port("pbr1", 1, None, Some("pbr0")))
        .unwrap();
    of.add_flow("br1", "actions=NORMAL").unwrap();
    of.add_flow("br0", "actions=output(port=1,max_len=100),output:2")
        .unwrap();
    let flow = "in_port=LOCAL,dl_src=10:20:30:40:50:60";
    let t = of.trace("br0", &[flow.into()], false).unwrap();
    assert!(t.ends_with("Datapath actions: 2\n"), "{t}");
    assert!(
        t.contains("output_trunc does not support patch port 1"),
        "{t}"
    );

    of.add_flow("br0", "actions=output(port=2,max_len=100)")
        .unwrap();
    let t = of.trace("br0", &[flow.into()], false).unwrap();
    assert!(t.ends_with("Datapath actions: trunc(100),2\n"), "{t}");
}

/// A missed packet counts for the rules its translation went through at once, without a
/// revalidation, and however many misses come, the credits they queue are all applied.
#[test]
fn missed_packets_count_for_their_rules() {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    of.add_port("br0", port("p1", 1, Some(1), None)).unwrap();
    of.add_port("br0", port("p2", 2, Some(2), None)).unwrap();
    of.add_flow("br0", "in_port=1,actions=resubmit(,1)")
        .unwrap();
    of.add_flow("br0", "table=1,actions=output:2").unwrap();
    let frame = [[0x50, 0x54, 0, 0, 0, 2], [0x50, 0x54, 0, 0, 0, 1]].concat();
    let frame = [frame.as_slice(), &[0x88, 0xb5], &[0u8; 46]].concat();
    let pkt = datapath::packet::Packet::from_slice(&frame);
    let mut key = flow::FlowKey::new();
    flow::extract(&frame, &mut key);
    key.set_in_port(1);
    let mut h = of.upcall_handler();
    for _ in 0..10_000 {
        let _ = h.upcall(&key, &pkt);
    }
    let dump = of.dump_flows("br0", None).unwrap();
    assert_eq!(
        dump.matches("n_packets=10000, n_bytes=600000").count(),
        2,
        "{dump}"
    );
}
