//! The remaining OpenFlow actions through translation, compared with Open vSwitch 3.1: the
//! expected texts are OVS's `ofproto/trace` output (whole, or its "Final flow", "Megaflow" and
//! "Datapath actions" lines) for the same flows and packets, on a private `ovs-vswitchd
//! --enable-dummy` with ports p1-p3 at OpenFlow ports 1-3 (flows with instructions added with
//! `ovs-ofctl -O OpenFlow13`).
//!
//! - `push:`/`pop:`: the stack survives `resubmit`, a pop takes the low bits of the value on
//!   top, underflow is reported and changes nothing, the megaflow matches what was pushed;
//! - the action set: `write_actions` adds to it, `clear_actions` empties it, the pipeline's end
//!   runs it in the specification's order, also after a table miss;
//! - `check_pkt_larger`: the datapath's `check_pkt_len`, the rest of the actions translated
//!   once per branch;
//! - `multipath`: the link each field set and algorithm picks, and the megaflow;
//! - `bundle`, `bundle_load`: the member each algorithm picks among the live ones (ports 5, 7
//!   and 9 do not exist).

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

/// The lines of the traces of `packets` that start with one of `kinds`.
fn trace_lines(of: &Ofproto, packets: &[&str], kinds: &[&str]) -> String {
    let mut got = String::new();
    for p in packets {
        for l in trace(of, p).lines() {
            if kinds.iter().any(|k| l.starts_with(k)) {
                got.push_str(l);
                got.push('\n');
            }
        }
    }
    got
}

/// Compares line by line, for a readable failure.
fn assert_lines(got: &str, want: &str) {
    for (g, w) in got.lines().zip(want.lines()) {
        assert_eq!(g, w);
    }
    assert_eq!(got.lines().count(), want.lines().count());
}

// push: and pop:.

const STACK_FLOWS: &str = "\
table=0,in_port=1,actions=load:0x2->NXM_NX_REG0[],push:NXM_NX_REG0[],load:0x7->NXM_NX_REG0[],\
resubmit(,1),pop:NXM_NX_REG1[0..15],output:NXM_NX_REG1[0..15],pop:NXM_NX_REG5[]
table=1,ip,actions=push:NXM_NX_REG0[0..3],pop:NXM_NX_REG2[],push:NXM_OF_ETH_SRC[],\
pop:NXM_NX_REG3[8..15],push:NXM_OF_IP_DST[],pop:NXM_NX_REG6[]
";

const STACK_PACKET: &str = "in_port=1,ip,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,\
nw_src=10.0.0.1,nw_dst=10.0.0.2";

#[test]
fn the_stack_survives_resubmit_and_traces_as_ovs() {
    let of = switch(STACK_FLOWS);
    let got = trace(&of, STACK_PACKET);
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

// The action set.

const ACTION_SET_FLOWS: &str = "\
table=0,in_port=1,actions=write_actions(output:3),goto_table:1
table=1,ip,actions=clear_actions,write_actions(dec_ttl,output:2,push_vlan:0x8100),\
write_metadata:0x5,goto_table:2
table=2,ip,actions=push:NXM_NX_REG0[],write_actions(output:3)
";

#[test]
fn the_action_set_runs_when_the_pipeline_ends() {
    let of = switch(ACTION_SET_FLOWS);
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
    let of = switch(ACTION_SET_FLOWS);
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

// check_pkt_larger.

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

// multipath.

/// Every hash field set and algorithm, each into its own register.
const MULTIPATH_FLOW: &str = "\
    in_port=1,actions=multipath(eth_src,50,modulo_n,7,0,NXM_NX_REG0[]),\
    multipath(symmetric_l4,50,hash_threshold,7,0,NXM_NX_REG1[]),\
    multipath(symmetric_l3l4,1,hrw,7,0,NXM_NX_REG2[]),\
    multipath(symmetric_l3l4+udp,2,iter_hash,7,9,NXM_NX_REG3[]),\
    multipath(nw_src,3,modulo_n,1000,0,NXM_NX_REG4[]),\
    multipath(nw_dst,4,hrw,100,0,NXM_NX_REG5[]),\
    multipath(symmetric_l3,5,hash_threshold,65536,0,NXM_NX_REG6[]),\
    multipath(symmetric_l4,6,iter_hash,13,0,NXM_NX_REG7[]),\
    multipath(symmetric_l3l4+udp,7,modulo_n,1000,0,NXM_NX_REG8[]),\
    multipath(eth_src,8,hrw,64,0,NXM_NX_REG9[])";

const PACKETS: [&str; 5] = [
    "in_port=1,tcp,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1234,tp_dst=80",
    "in_port=1,udp,dl_src=50:54:00:00:00:07,dl_dst=50:54:00:00:00:02,nw_src=192.168.1.9,nw_dst=10.9.0.2,udp_src=53,udp_dst=5353",
    "in_port=1,tcp6,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:03,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::2,tp_src=1,tp_dst=2",
    "in_port=1,arp,dl_src=50:54:00:00:00:05,dl_dst=ff:ff:ff:ff:ff:ff,dl_vlan=5",
    "in_port=1,icmp,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:06,nw_src=1.2.3.4,nw_dst=4.3.2.1,icmp_type=8,icmp_code=0",
];

/// MULTIPATH_OVS's "Final flow" and "Megaflow" lines for each packet, in order.
const MULTIPATH_OVS: &str = "\
Final flow: tcp,reg0=0x3,reg1=0x4,reg2=0x2,reg3=0x5,reg4=0x12f,reg5=0x5b,reg6=0x6278,reg7=0xb,reg8=0x227,reg9=0x13,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=1234,tp_dst=80,tcp_flags=0\n\
Megaflow: recirc_id=0,eth,tcp,in_port=1,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_frag=no,tp_src=1234,tp_dst=80\n\
Final flow: udp,reg0=0x4,reg1=0x4,reg2=0x3,reg3=0x3,reg4=0x2d9,reg5=0x43,reg6=0xaa25,reg7=0x4,reg8=0x3a3,reg9=0x14,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:07,dl_dst=50:54:00:00:00:02,nw_src=192.168.1.9,nw_dst=10.9.0.2,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=53,tp_dst=5353\n\
Megaflow: recirc_id=0,eth,udp,in_port=1,dl_src=50:54:00:00:00:07,dl_dst=50:54:00:00:00:02,nw_src=192.168.1.9,nw_dst=10.9.0.2,nw_frag=no,tp_src=53,tp_dst=5353\n\
Final flow: tcp6,reg0=0x3,reg1=0x5,reg3=0x6,reg4=0x2fd,reg5=0x38,reg6=0x534c,reg7=0xb,reg8=0x137,reg9=0x13,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:03,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::2,ipv6_label=0x00000,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=1,tp_dst=2,tcp_flags=0\n\
Megaflow: recirc_id=0,eth,tcp6,in_port=1,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:03,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::2,nw_frag=no,tp_src=1,tp_dst=2\n\
Final flow: arp,reg0=0x2,reg1=0x4,reg2=0x6,reg3=0x1,reg4=0x3,reg5=0x3d,reg6=0x5735,reg7=0x7,reg8=0xf4,reg9=0x3e,in_port=1,dl_vlan=5,dl_vlan_pcp=0,vlan_tci1=0x0000,dl_src=50:54:00:00:00:05,dl_dst=ff:ff:ff:ff:ff:ff,arp_spa=0.0.0.0,arp_tpa=0.0.0.0,arp_op=0,arp_sha=00:00:00:00:00:00,arp_tha=00:00:00:00:00:00\n\
Megaflow: recirc_id=0,eth,arp,in_port=1,dl_vlan=5,dl_src=50:54:00:00:00:05,dl_dst=ff:ff:ff:ff:ff:ff\n\
Final flow: icmp,reg0=0x2,reg1=0x1,reg2=0x5,reg3=0x6,reg4=0x8a,reg5=0x40,reg6=0x39e7,reg7=0x6,reg8=0x3c7,reg9=0x3e,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:06,nw_src=1.2.3.4,nw_dst=4.3.2.1,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,icmp_type=8,icmp_code=0\n\
Megaflow: recirc_id=0,eth,icmp,in_port=1,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:06,nw_src=1.2.3.4,nw_dst=4.3.2.1,nw_frag=no,icmp_type=0x8/0xff,icmp_code=0x0/0xff\n\
";

#[test]
fn multipath_picks_the_links_ovs_picks() {
    let of = switch(MULTIPATH_FLOW);
    let got = trace_lines(&of, &PACKETS, &["Final flow:", "Megaflow:"]);
    assert_lines(&got, MULTIPATH_OVS);
}

// bundle and bundle_load.

const BUNDLE_FLOW: &str = "\
    in_port=1,actions=bundle_load(eth_src,0,hrw,ofport,NXM_NX_REG0[],members:1,2,3,5),\
    bundle_load(symmetric_l4,7,hrw,ofport,NXM_NX_REG1[0..15],members:5,3,2),\
    bundle_load(nw_src,100,active_backup,ofport,NXM_NX_REG2[],members:7,5,2,1),\
    bundle_load(symmetric_l3l4+udp,9,hrw,ofport,NXM_NX_REG3[],members:9),\
    bundle_load(symmetric_l3,9,hrw,ofport,NXM_NX_REG4[],members:2),\
    bundle(symmetric_l3l4,3,hrw,ofport,members:2,3)";

/// BUNDLE_OVS's lines for each packet, in order.
const BUNDLE_OVS: &str = "\
Final flow: tcp,reg0=0x1,reg1=0x2,reg2=0x2,reg3=0xffff,reg4=0x2,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=1234,tp_dst=80,tcp_flags=0\n\
Megaflow: recirc_id=0,eth,tcp,in_port=1,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_frag=no,tp_src=1234,tp_dst=80\n\
Datapath actions: 2\n\
Final flow: udp,reg0=0x3,reg1=0x2,reg2=0x2,reg3=0xffff,reg4=0x2,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:07,dl_dst=50:54:00:00:00:02,nw_src=192.168.1.9,nw_dst=10.9.0.2,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=53,tp_dst=5353\n\
Megaflow: recirc_id=0,eth,udp,in_port=1,dl_src=50:54:00:00:00:07,dl_dst=50:54:00:00:00:02,nw_src=192.168.1.9,nw_dst=10.9.0.2,nw_frag=no\n\
Datapath actions: 2\n\
Final flow: tcp6,reg0=0x1,reg1=0x3,reg2=0x2,reg3=0xffff,reg4=0x2,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:03,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::2,ipv6_label=0x00000,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,tp_src=1,tp_dst=2,tcp_flags=0\n\
Megaflow: recirc_id=0,eth,tcp6,in_port=1,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:03,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::2,nw_frag=no,tp_src=1,tp_dst=2\n\
Datapath actions: 3\n\
Final flow: arp,reg0=0x2,reg1=0x2,reg2=0x2,reg3=0xffff,reg4=0x2,in_port=1,dl_vlan=5,dl_vlan_pcp=0,vlan_tci1=0x0000,dl_src=50:54:00:00:00:05,dl_dst=ff:ff:ff:ff:ff:ff,arp_spa=0.0.0.0,arp_tpa=0.0.0.0,arp_op=0,arp_sha=00:00:00:00:00:00,arp_tha=00:00:00:00:00:00\n\
Megaflow: recirc_id=0,eth,arp,in_port=1,dl_vlan=5,dl_src=50:54:00:00:00:05,dl_dst=ff:ff:ff:ff:ff:ff\n\
Datapath actions: 3\n\
Final flow: icmp,reg0=0x2,reg1=0x2,reg2=0x2,reg3=0xffff,reg4=0x2,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:06,nw_src=1.2.3.4,nw_dst=4.3.2.1,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no,icmp_type=8,icmp_code=0\n\
Megaflow: recirc_id=0,eth,icmp,in_port=1,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:06,nw_src=1.2.3.4,nw_dst=4.3.2.1,nw_frag=no,icmp_type=0x8/0xff,icmp_code=0x0/0xff\n\
Datapath actions: 2\n\
";

#[test]
fn bundle_picks_the_members_ovs_picks() {
    let of = switch(BUNDLE_FLOW);
    let got = trace_lines(
        &of,
        &PACKETS,
        &["Final flow:", "Megaflow:", "Datapath actions:"],
    );
    assert_lines(&got, BUNDLE_OVS);
}
