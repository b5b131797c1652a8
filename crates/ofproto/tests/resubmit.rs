//! `resubmit` as OVS 3.1 translates it (`ofproto-dpif.at`'s resubmit scenarios; expected lines
//! are what OVS's `ofproto/trace` ends with for the same tables): the lookup alone sees a
//! resubmit's port, the rule's actions the packet's own; only a resubmit to the same or an
//! earlier table deepens the translation (64 levels), while every rule reached counts against
//! 4096 resubmits; a trace without `in_port` enters by OFPP_NONE, which NORMAL floods from.

use std::sync::Arc;

use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;

/// br0 with its LOCAL port (datapath 100) and ports of these OpenFlow numbers (datapath the
/// same).
fn switch(ports: &[u32]) -> Arc<Ofproto> {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    let mut all = vec![("br0".to_owned(), 0xfffe, 100)];
    all.extend(ports.iter().map(|&p| (format!("p{p}"), p, p)));
    for (name, ofport, dp) in all {
        let port = OfPort {
            name,
            ofport,
            dp_port: Some(dp),
            peer: None,
            vlan: VlanMode::default(),
        };
        of.add_port("br0", port).unwrap();
    }
    of
}

fn last_line(of: &Ofproto, flow: &str) -> String {
    let t = of.trace("br0", &[flow.into()], false).unwrap();
    t.trim_end().lines().last().unwrap().to_owned()
}

#[test]
fn a_resubmit_s_port_is_the_lookup_s_only() {
    let ports: Vec<u32> = [1].into_iter().chain(10..=21).collect();
    let of = switch(&ports);
    of.add_flows(
        "br0",
        "table=0 in_port=1 priority=1000 icmp actions=output(10),resubmit(2),output(19),resubmit(3),output(21)
table=0 in_port=2 priority=1500 icmp actions=output(11),resubmit(,1),output(16),resubmit(2,1),output(18)
table=0 in_port=3 priority=2000 icmp actions=output(20)
table=1 in_port=1 priority=1000 icmp actions=output(12),resubmit(4,1),output(13),resubmit(3),output(15)
table=1 in_port=2 priority=1500 icmp actions=output(17),resubmit(,2)
table=1 in_port=3 priority=1500 icmp actions=output(14),resubmit(,2)
",
    )
    .unwrap();
    let flow = "in_port=1,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:07,dl_type=0x0800,\
                nw_src=192.168.0.1,nw_dst=192.168.0.2,nw_proto=1,nw_tos=0,nw_ttl=128,\
                nw_frag=no,icmp_type=8,icmp_code=0";
    assert_eq!(
        last_line(&of, flow),
        "Datapath actions: 10,11,12,13,14,15,16,17,18,19,20,21"
    );
}

#[test]
fn forward_resubmits_do_not_deepen_backward_ones_do() {
    let of = switch(&[]);
    let mut flows: String = (0..100)
        .map(|i| format!("table={i}, actions=resubmit(,{})\n", i + 1))
        .collect();
    flows.push_str("table=100, actions=local\n");
    of.add_flows("br0", &flows).unwrap();
    assert_eq!(
        last_line(&of, "eth_dst=ff:ff:ff:ff:ff:ff"),
        "Datapath actions: 100"
    );

    let of = switch(&[]);
    let mut flows = "table=0, actions=resubmit(,66)\n".to_owned();
    flows.extend((2..=66).map(|i| format!("table={i}, actions=resubmit(,{})\n", i - 1)));
    flows.push_str("table=1, actions=local\n");
    of.add_flows("br0", &flows).unwrap();
    let t = of
        .trace("br0", &["eth_dst=ff:ff:ff:ff:ff:ff".into()], false)
        .unwrap();
    assert!(t.ends_with("Translation failed (Recursion too deep), packet is dropped.\n"));
    assert_eq!(t.matches("over max translation depth 64").count(), 1, "{t}");
}

#[test]
fn an_exponential_chain_hits_the_resubmit_limit() {
    let of = switch(&[1]);
    let mut flows: String = (1..=64)
        .map(|i| {
            format!(
                "in_port={i}, actions=resubmit:{j}, resubmit:{j}, local\n",
                j = i + 1
            )
        })
        .collect();
    flows.push_str("in_port=65, actions=local\n");
    of.add_flows("br0", &flows).unwrap();
    let t = of.trace("br0", &["in_port=1".into()], false).unwrap();
    assert!(t.ends_with("Translation failed (Too many resubmits), packet is dropped.\n"));
    assert_eq!(t.matches("over 4096 resubmit actions").count(), 1);
}

#[test]
fn without_in_port_a_trace_enters_by_ofpp_none_and_normal_floods() {
    let of = switch(&[1, 2]);
    of.add_flows("br0", "action=normal\n").unwrap();
    let flow = "icmp,dl_src=50:54:00:00:00:05,dl_dst=50:54:00:00:00:07,nw_src=192.168.0.1,\
                nw_dst=192.168.0.2,icmp_type=8,icmp_code=0";
    let line = last_line(&of, flow);
    let mut outs: Vec<u32> = line
        .strip_prefix("Datapath actions: ")
        .unwrap()
        .split(',')
        .map(|n| n.parse().unwrap())
        .collect();
    outs.sort();
    assert_eq!(outs, [1, 2, 100]);
    // Nothing was learned from the controller's port.
    assert!(!of.fdb_show("br0").unwrap().contains("50:54:00:00:00:05"));
    // A port the bridge does not have is traced too, as OVS traces it.
    assert_eq!(last_line(&of, "in_port=7"), "Datapath actions: drop");
}
