//! A write of some bits of a field is committed as a masked `set` of those bits, the value
//! under its mask (OVS's `commit()` with masked sets, ofproto-dpif.at "fragment handling -
//! actions": `set(tcp(src=42/0xff))`): the megaflow matches only those bits, so the other
//! bits differ between its packets and the action must leave them alone.

mod common;

use ofproto::ofproto::Ofproto;

fn actions(of: &Ofproto, flow: &str) -> String {
    let t = of.trace("ovs-netdev", &[flow.into()], true).unwrap();
    t.lines()
        .find_map(|l| l.strip_prefix("Datapath actions: "))
        .unwrap_or_else(|| panic!("{t}"))
        .to_owned()
}

fn tcp(src: u16) -> String {
    format!(
        "in_port(2),eth(src=50:54:00:00:00:05,dst=50:54:00:00:00:07),eth_type(0x0800),\
         ipv4(src=192.168.0.1,dst=192.168.0.2,proto=6,tos=0,ttl=64,frag=no),\
         tcp(src={src},dst=22)"
    )
}

#[test]
fn a_write_of_some_bits_of_a_port_sets_those_bits_only() {
    let of = common::switch_with_flows(2, &["tcp,actions=load:42->OXM_OF_TCP_SRC[0..7],output:1"]);
    assert_eq!(actions(&of, &tcp(33419)), "set(tcp(src=42/0xff)),1");
    // Another packet of the same megaflow: the same action.
    assert_eq!(actions(&of, &tcp(0x118b)), "set(tcp(src=42/0xff)),1");
}

#[test]
fn a_write_of_a_whole_port_sets_it_whole() {
    let of = common::switch_with_flows(2, &["tcp,actions=set_field:80->tcp_dst,output:1"]);
    assert_eq!(actions(&of, &tcp(33419)), "set(tcp(dst=80)),1");
}
