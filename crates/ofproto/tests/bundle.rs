//! `bundle` and `bundle_load` through translation: the member each algorithm picks among the
//! live ones (ports 5, 7 and 9 do not exist), and the megaflow, as Open vSwitch 3.1 computes
//! them (the expected lines are OVS's `ofproto/trace` "Final flow", "Megaflow" and "Datapath
//! actions" for the same flow and packets, on a private `ovs-vswitchd --enable-dummy` with
//! ports 1-3).

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

const FLOW: &str = "in_port=1,actions=bundle_load(eth_src,0,hrw,ofport,NXM_NX_REG0[],members:1,2,3,5),bundle_load(symmetric_l4,7,hrw,ofport,NXM_NX_REG1[0..15],members:5,3,2),bundle_load(nw_src,100,active_backup,ofport,NXM_NX_REG2[],members:7,5,2,1),bundle_load(symmetric_l3l4+udp,9,hrw,ofport,NXM_NX_REG3[],members:9),bundle_load(symmetric_l3,9,hrw,ofport,NXM_NX_REG4[],members:2),bundle(symmetric_l3l4,3,hrw,ofport,members:2,3)";

const PACKETS: [&str; 5] = [
    "in_port=1,tcp,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1234,tp_dst=80",
    "in_port=1,udp,dl_src=50:54:00:00:00:07,dl_dst=50:54:00:00:00:02,nw_src=192.168.1.9,nw_dst=10.9.0.2,udp_src=53,udp_dst=5353",
    "in_port=1,tcp6,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:03,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::2,tp_src=1,tp_dst=2",
    "in_port=1,arp,dl_src=50:54:00:00:00:05,dl_dst=ff:ff:ff:ff:ff:ff,dl_vlan=5",
    "in_port=1,icmp,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:06,nw_src=1.2.3.4,nw_dst=4.3.2.1,icmp_type=8,icmp_code=0",
];

/// OVS's lines for each packet, in order.
const OVS: &str = "\
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
    let of = switch(FLOW);
    let mut got = String::new();
    for p in PACKETS {
        let t = of.trace("br0", &[p.to_owned()], false).unwrap();
        for l in t.lines() {
            if ["Final flow:", "Megaflow:", "Datapath actions:"]
                .iter()
                .any(|s| l.starts_with(s))
            {
                got.push_str(l);
                got.push('\n');
            }
        }
    }
    let want = OVS;
    for (g, w) in got.lines().zip(want.lines()) {
        assert_eq!(g, w);
    }
    assert_eq!(got.lines().count(), want.lines().count());
}
