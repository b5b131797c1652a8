//! `output(port=N,max_len=M)` as OVS 3.1 translates it (`ofproto-dpif.at`'s truncate
//! scenarios): a truncated output to a port with a datapath side, none to a patch port (an
//! error in the trace).

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
