//! A write of an ARP field reads the ARP opcode (OVS 3.1's mf_set_mask_l3_prereqs(), Debian's
//! ofproto.at "implicit mask of ARP OPer field"): a packet of opcode 0 is not rewritten
//! (committing skips a packet without an L3 opcode), so its megaflow must not take packets
//! of other opcodes, which are.

mod common;

use ofproto::ofproto::Ofproto;

fn trace(of: &Ofproto, op: u8) -> (String, String) {
    let flow = format!(
        "in_port(1),eth(src=50:54:00:00:00:0b,dst=50:54:00:00:00:0c),eth_type(0x0806),\
         arp(sip=172.31.110.1,tip=172.31.110.25,op={op},sha=00:01:02:03:04:07,\
         tha=ff:ff:ff:ff:ff:ff)"
    );
    let t = of.trace("ovs-netdev", &[flow], true).unwrap();
    let line = |p: &str| {
        t.lines()
            .find_map(|l| l.strip_prefix(p))
            .unwrap_or_else(|| panic!("{t}"))
            .to_owned()
    };
    (line("Megaflow: "), line("Datapath actions: "))
}

#[test]
fn a_write_of_an_arp_field_matches_the_opcode() {
    let of = common::switch_with_flows(
        2,
        &["in_port=1,arp,arp_sha=00:01:02:03:04:07,actions=set_field:00:02:03:04:05:06->arp_sha,2"],
    );
    let (megaflow, actions) = trace(&of, 0);
    assert!(megaflow.contains("arp_op=0"), "{megaflow}");
    assert_eq!(actions, "2");
    let (megaflow, actions) = trace(&of, 1);
    assert!(megaflow.contains("arp_op=1"), "{megaflow}");
    assert_eq!(actions, "set(arp(sha=00:02:03:04:05:06)),2");
}
