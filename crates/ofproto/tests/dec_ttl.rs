//! `dec_ttl` and `dec_mpls_ttl` at a TTL of 1 send the packet to the controller and stop the
//! actions of their own rule only: a resubmit's caller goes on with its own (OVS's
//! `ofproto-dpif.at` "dec_ttl").

mod common;

use ofproto::ofproto::Ofproto;

fn switch(flows: &[&str]) -> std::sync::Arc<Ofproto> {
    common::switch_with_flows(4, flows)
}

fn actions(of: &Ofproto, flow: &str) -> String {
    let t = of.trace("ovs-netdev", &[flow.into()], true).unwrap();
    t.lines()
        .find_map(|l| l.strip_prefix("Datapath actions: "))
        .unwrap_or_else(|| panic!("{t}"))
        .to_owned()
}

const CONTROLLER: &str = "userspace(pid=0,controller(reason=2,dont_send=0,continuation=0,\
     recirc_id=1,rule_cookie=0,controller_id=0,max_len=65535))";

#[test]
fn an_expired_ttl_stops_its_rule_and_the_caller_goes_on() {
    let of = switch(&[
        "table=0,in_port=1,actions=dec_ttl,output:2,resubmit(1,1),output:4",
        "table=1,in_port=1,actions=dec_ttl,output:3",
    ]);
    let ip = |ttl: u8| {
        format!(
            "in_port(1),eth(src=50:54:00:00:00:05,dst=50:54:00:00:00:07),eth_type(0x0800),\
             ipv4(src=192.168.0.1,dst=192.168.0.2,proto=111,tos=0,ttl={ttl},frag=no)"
        )
    };
    assert_eq!(
        actions(&of, &ip(2)),
        format!("set(ipv4(ttl=1)),2,{CONTROLLER},4")
    );
    assert_eq!(
        actions(&of, &ip(3)),
        "set(ipv4(ttl=2)),2,set(ipv4(ttl=1)),3,4"
    );
}
