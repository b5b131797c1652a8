//! `ofproto/trace`'s argument forms, as OVS 3.1 takes them (`ofproto-dpif-trace.c`,
//! `parse_flow_and_packet()`): a datapath flow alone or after the datapath's name, or a bridge
//! and an OpenFlow flow. A datapath flow after a bridge name is refused, never read as an
//! OpenFlow flow. Expected texts: OVS 3.1's `ovs-appctl ofproto/trace` for the same flows on a
//! dummy datapath with p1 and p2 at datapath and OpenFlow ports 1 and 2.

use std::sync::Arc;

use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;

fn switch() -> Arc<Ofproto> {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    for (n, o) in [("p1", 1), ("p2", 2)] {
        let port = OfPort {
            name: n.into(),
            ofport: o,
            dp_port: Some(o),
            peer: None,
            vlan: VlanMode::default(),
        };
        of.add_port("br0", port).unwrap();
    }
    of.add_flows(
        "br0",
        "in_port=1,mpls,actions=pop_mpls:0x0800,dec_ttl,output:2\n",
    )
    .unwrap();
    of
}

const ODP: &str = "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),\
                   eth_type(0x8847),mpls(label=10,tc=0,ttl=64,bos=1)";

const OVS_TRACE: &str = "\
Flow: mpls,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,\
mpls_label=10,mpls_tc=0,mpls_ttl=64,mpls_bos=1

bridge(\"br0\")
-------------
 0. mpls,in_port=1, priority 32768
    pop_mpls:0x0800

Final flow: ip,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,\
nw_src=0.0.0.0,nw_dst=0.0.0.0,nw_proto=0,nw_tos=0,nw_ecn=0,nw_ttl=0,nw_frag=no
Megaflow: recirc_id=0,eth,mpls,in_port=1,mpls_bos=1
Datapath actions: pop_mpls(eth_type=0x800),recirc(0x1)
";

#[test]
fn a_datapath_flow_after_the_datapath_name_or_alone_is_traced() {
    let of = switch();
    assert_eq!(
        of.trace("ovs-netdev", &[ODP.into()], false).unwrap(),
        OVS_TRACE
    );
    assert_eq!(of.trace(ODP, &[], false).unwrap(), OVS_TRACE);
    // Port names work in place of numbers.
    let named = ODP.replace("in_port(1)", "in_port(p1)");
    assert_eq!(of.trace("netdev", &[named], false).unwrap(), OVS_TRACE);
}

#[test]
fn a_datapath_flow_after_a_bridge_name_is_refused_not_misread() {
    let of = switch();
    assert_eq!(
        of.trace("br0", &[ODP.into()], false).unwrap_err(),
        "Cannot find the datapath"
    );
}

#[test]
fn bad_arguments_get_ovs_errors() {
    let of = switch();
    let e = of.trace(
        "ovs-netdev",
        &[ODP.replace("in_port(1)", "in_port(9)")],
        false,
    );
    assert_eq!(e.unwrap_err(), "no OpenFlow port for datapath port 9");
    let e = of.trace(&format!("recirc_id(0x9),{ODP}"), &[], false);
    assert_eq!(e.unwrap_err(), "no recirculation data for recirc_id 0x9");
    let e = of.trace("br9", &["in_port=1".into()], false);
    assert_eq!(e.unwrap_err(), "br9: unknown bridge");
    let e = of.trace("br0", &["in_port=1,nw_ttl=3".into()], false);
    assert!(e.unwrap_err().starts_with("Bad openflow flow syntax: "));
    let e = of.trace("in_port=1", &[], false).unwrap_err();
    assert_eq!(
        e,
        "syntax error at in_port=1 (or the bridge name was omitted)"
    );
    let e = of.trace("br0", &["in_port=1".into(), "--bogus".into()], false);
    assert_eq!(e.unwrap_err(), "--bogus: unknown option");
    // A packet that is not hex: OVS's `eth_from_hex()` errors.
    let e = of.trace(
        "br0",
        &["in_port=1".into(), "50540000000a 50540000000b 08 zz".into()],
        false,
    );
    assert_eq!(e.unwrap_err(), "Trailing garbage in packet data");
    let e = of.trace("br0", &["in_port=1".into(), "50540000000a".into()], false);
    assert_eq!(e.unwrap_err(), "Packet data too short for Ethernet");
}
