//! `check_pkt_larger` through translation: the datapath's `check_pkt_len` with the rest of the
//! actions translated once per branch. The expected texts are Open vSwitch 3.1's
//! `ofproto/trace` output for the same flows (a private `ovs-vswitchd --enable-dummy`, ports
//! p1-p3 at OpenFlow ports 1-3).

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

#[test]
fn both_branches_are_translated_and_the_datapath_decides() {
    let of = switch(
        "table=0,in_port=1,actions=load:1->NXM_NX_REG0[],check_pkt_larger(200)->NXM_NX_REG1[0],\
         resubmit(,1),output:3\n\
         table=1,reg1=0x1,actions=output:2\n\
         table=1,reg1=0x0,actions=mod_dl_src:00:00:00:00:00:09,output:3\n",
    );
    let got = of
        .trace(
            "br0",
            &[
                "in_port=1,ip,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,\
               nw_dst=10.0.0.2,nw_ttl=64"
                    .to_owned(),
            ],
            false,
        )
        .unwrap();
    let want = r#"Flow: ip,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_proto=0,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no

bridge("br0")
-------------
 0. in_port=1, priority 32768
    load:0x1->NXM_NX_REG0[]
    check_pkt_larger(200)->NXM_NX_REG1[0]
    resubmit(,1)
     1. reg1=0x1, priority 32768
            output:2
    output:3
    resubmit(,1)
     1. reg1=0, priority 32768
            mod_dl_src:00:00:00:00:00:09
            output:3
    output:3

Final flow: ip,reg0=0x1,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_proto=0,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no
Megaflow: recirc_id=0,eth,ip,in_port=1,dl_src=50:54:00:00:00:01,nw_frag=no
Datapath actions: check_pkt_len(size=200,gt(2,3),le(set(eth(src=00:00:00:00:00:09)),3,3))
"#;
    assert_eq!(got, want, "\n{got}");
}
