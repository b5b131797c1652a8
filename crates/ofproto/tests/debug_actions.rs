//! OVS's test actions in translation: `debug_recirc` ends the pass with a recirculation, the
//! actions after it running in the next pass; `debug_slow` says the flow is the slow path's
//! (OVS's `ofproto-dpif.at` "resubmit with recirculation", "resubmit with tun_id",
//! "recirculation after resubmit" and "debug_slow action").

mod common;

use ofproto::ofproto::Ofproto;

fn switch(flows: &[&str]) -> std::sync::Arc<Ofproto> {
    common::switch_with_flows(3, flows)
}

const FLOW: &str = "in_port(1),eth(src=50:54:00:00:00:05,dst=50:54:00:00:00:07),\
     eth_type(0x0800),ipv4(src=192.168.0.1,dst=192.168.0.2,proto=1,tos=0,ttl=128,frag=no),\
     icmp(type=8,code=0)";

fn trace(of: &Ofproto, flow: &str) -> String {
    of.trace("ovs-netdev", &[flow.into()], true).unwrap()
}

fn line<'a>(t: &'a str, prefix: &str) -> &'a str {
    t.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in {t}"))
}

#[test]
fn debug_recirc_recirculates_and_the_rest_runs_in_the_next_pass() {
    let of = switch(&[
        "table=0,in_port=1,actions=2,load:6->NXM_NX_TUN_ID[],resubmit(,1)",
        "table=1,in_port=1,actions=debug_recirc,resubmit:55",
        "table=1,in_port=55,actions=3",
    ]);
    let first = trace(&of, FLOW);
    let acts = line(&first, "Datapath actions: ");
    let id = acts
        .strip_prefix("2,recirc(")
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{first}"));
    // A tunnel id written with no tunnel still shows, and survives the recirculation.
    assert!(line(&first, "Final flow: ").starts_with("icmp,tun_id=0x6,in_port=1,"));
    let second = trace(&of, &format!("{FLOW},recirc_id({id})"));
    assert_eq!(line(&second, "Datapath actions: "), "3", "{second}");
    assert!(
        line(&second, "Final flow: ").contains(",icmp,tun_id=0x6,in_port=1,"),
        "{second}"
    );
}

#[test]
fn debug_slow_sends_the_flow_to_the_slow_path() {
    let of = switch(&["in_port=1,actions=debug_slow,2"]);
    let t = trace(&of, FLOW);
    assert!(
        t.ends_with(
            "Datapath actions: 2\nThis flow is handled by the userspace slow path because it:\n  \
             - Uses action(s) not supported by datapath.\n"
        ),
        "{t}"
    );
    let dump = of.dump_flows("br0", None).unwrap();
    assert!(
        dump.trim_end()
            .ends_with(" in_port=1 actions=debug_slow,output:2"),
        "{dump}"
    );
}
