//! `push:` and `pop:` through translation: the stack survives `resubmit`, a pop takes the low
//! bits of the value on top, underflow is reported and changes nothing, and the megaflow
//! matches what was pushed. The expected texts are Open vSwitch 3.1's `ofproto/trace` output
//! for the same flows (a private `ovs-vswitchd --enable-dummy`, ports p1-p3 at OpenFlow ports
//! 1-3).

use std::sync::Arc;

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

fn trace(of: &Ofproto, flow: &str) -> String {
    of.trace("br0", &[flow.to_owned()], false).unwrap()
}

const FLOWS: &str = "\
table=0,in_port=1,actions=load:0x2->NXM_NX_REG0[],push:NXM_NX_REG0[],load:0x7->NXM_NX_REG0[],\
resubmit(,1),pop:NXM_NX_REG1[0..15],output:NXM_NX_REG1[0..15],pop:NXM_NX_REG5[]
table=1,ip,actions=push:NXM_NX_REG0[0..3],pop:NXM_NX_REG2[],push:NXM_OF_ETH_SRC[],\
pop:NXM_NX_REG3[8..15],push:NXM_OF_IP_DST[],pop:NXM_NX_REG6[]
";

const PACKET: &str = "in_port=1,ip,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,\
nw_src=10.0.0.1,nw_dst=10.0.0.2";

#[test]
fn the_stack_survives_resubmit_and_traces_as_ovs() {
    let of = switch(FLOWS);
    let got = trace(&of, PACKET);
    let want = r#"Flow: ip,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_proto=0,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no

bridge("br0")
-------------
 0. in_port=1, priority 32768
    load:0x2->NXM_NX_REG0[]
    push:NXM_NX_REG0[]
    load:0x7->NXM_NX_REG0[]
    resubmit(,1)
     1. ip, priority 32768
            push:NXM_NX_REG0[0..3]
            pop:NXM_NX_REG2[]
             -> NXM_NX_REG2[] is now 0x7
            push:NXM_OF_ETH_SRC[]
            pop:NXM_NX_REG3[8..15]
             -> NXM_NX_REG3[8..15] is now 0x1
            push:NXM_OF_IP_DST[]
            pop:NXM_NX_REG6[]
             -> NXM_NX_REG6[] is now 0xa000002
    pop:NXM_NX_REG1[0..15]
     -> NXM_NX_REG1[0..15] is now 0x2
    output:NXM_NX_REG1[0..15]
     -> output port is 2
    pop:NXM_NX_REG5[]
     >>>> stack underflow <<<<

Final flow: ip,reg0=0x7,reg1=0x2,reg2=0x7,reg3=0x100,reg6=0xa000002,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_proto=0,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no
Megaflow: recirc_id=0,eth,ip,in_port=1,dl_src=50:54:00:00:00:01,nw_dst=10.0.0.2,nw_frag=no
Datapath actions: 2
"#;
    assert_eq!(got, want, "\n{got}");
}
