//! `output:LOCAL` is an output like any other: never back to the input port, so a packet the
//! bridge's own port sent is not looped back to it (OVS's `ofproto-dpif.at` "output/flood
//! flags").

use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;

const OFPP_LOCAL: u32 = 0xfffe;

#[test]
fn output_to_local_skips_the_input_port() {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    for (name, ofport, dp) in [("br0", OFPP_LOCAL, 100), ("p1", 1, 1), ("p2", 2, 2)] {
        let p = OfPort {
            name: name.into(),
            ofport,
            dp_port: Some(dp),
            peer: None,
            vlan: VlanMode::default(),
        };
        of.add_port("br0", p).unwrap();
    }
    of.del_flows("br0", None, false).unwrap();
    of.add_flow("br0", "in_port=local,actions=local,flood")
        .unwrap();
    of.add_flow("br0", "in_port=1,actions=local").unwrap();
    let actions = |inp: u32| {
        let flow = format!(
            "in_port({inp}),eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02),eth_type(0x0900)"
        );
        let t = of.trace("ovs-netdev", &[flow], false).unwrap();
        t.lines()
            .find_map(|l| l.strip_prefix("Datapath actions: "))
            .unwrap_or_else(|| panic!("{t}"))
            .to_owned()
    };
    assert_eq!(actions(100), "1,2");
    assert_eq!(actions(1), "100");
}
