//! The OpenFlow 1.1+ action set through translation: `write_actions` adds to it, `clear_actions`
//! empties it, the pipeline's end runs it in the specification's order, also when a later
//! table has no match. The expected texts are Open vSwitch 3.1's `ofproto/trace` output for the
//! same flows (a private `ovs-vswitchd --enable-dummy`, ports p1-p3 at OpenFlow ports 1-3,
//! flows added with `ovs-ofctl -O OpenFlow13`).

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
table=0,in_port=1,actions=write_actions(output:3),goto_table:1
table=1,ip,actions=clear_actions,write_actions(dec_ttl,output:2,push_vlan:0x8100),\
write_metadata:0x5,goto_table:2
table=2,ip,actions=push:NXM_NX_REG0[],write_actions(output:3)
";

#[test]
fn the_action_set_runs_when_the_pipeline_ends() {
    let of = switch(FLOWS);
    let got = trace(
        &of,
        "in_port=1,ip,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,\
         nw_dst=10.0.0.2,nw_ttl=64",
    );
    let want = r#"Flow: ip,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_proto=0,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no

bridge("br0")
-------------
 0. in_port=1, priority 32768
    write_actions(output:3)
     -> action set is: output:3
    goto_table:1
     1. ip, priority 32768
            clear_actions
             -> action set was: output:3
            write_actions(dec_ttl,output:2,push_vlan:0x8100)
             -> action set is: push_vlan:0x8100,dec_ttl,output:2
            write_metadata:0x5
            goto_table:2
         2. ip, priority 32768
            push:NXM_NX_REG0[]
            write_actions(output:3)
             -> action set is: push_vlan:0x8100,dec_ttl,output:3
--. Executing action set:
    push_vlan:0x8100
    dec_ttl
    output:3

Final flow: ip,metadata=0x5,in_port=1,dl_vlan=0,dl_vlan_pcp=0,vlan_tci1=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_proto=0,nw_tos=0,nw_ecn=0,nw_ttl=63,nw_frag=no
Megaflow: recirc_id=0,eth,ip,in_port=1,nw_proto=0,nw_ttl=64,nw_frag=no
Datapath actions: push_vlan(vid=0,pcp=0),3
"#;
    assert_eq!(got, want, "\n{got}");
}

#[test]
fn the_action_set_runs_after_a_table_miss() {
    let of = switch(FLOWS);
    let got = trace(&of, "in_port=1,arp");
    let want = r#"Flow: arp,in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,arp_spa=0.0.0.0,arp_tpa=0.0.0.0,arp_op=0,arp_sha=00:00:00:00:00:00,arp_tha=00:00:00:00:00:00

bridge("br0")
-------------
 0. in_port=1, priority 32768
    write_actions(output:3)
     -> action set is: output:3
    goto_table:1
     1. No match.
            drop
--. Executing action set:
    output:3

Final flow: arp,in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,arp_spa=0.0.0.0,arp_tpa=0.0.0.0,arp_op=0,arp_sha=00:00:00:00:00:00,arp_tha=00:00:00:00:00:00
Megaflow: recirc_id=0,eth,arp,in_port=1
Datapath actions: 3
"#;
    assert_eq!(got, want, "\n{got}");
}
