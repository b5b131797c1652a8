//! A port's BFD session in translation, as OVS's: the session's control packets leave the
//! tables for the slow path (`userspace(pid=0,slow_path(bfd))`, a megaflow that matches what
//! told them apart), other packets go through the tables; a port whose session does not
//! forward is not live, so fast-failover groups and `bundle` pass it over.

mod common;

use ofproto::bfd::{Config, RxFilter};
use ofproto::ofproto::Ofproto;

fn switch() -> std::sync::Arc<Ofproto> {
    let of = common::bridge_with_ports(3);
    of.add_flow("br0", "actions=output:2").unwrap();
    of
}

fn rx(kv: &[(&str, &str)]) -> Option<RxFilter> {
    let mut m: std::collections::BTreeMap<String, String> = kv
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    m.insert("enable".into(), "true".into());
    Config::from_column(&m).map(|c| c.rx_filter())
}

fn trace(of: &Ofproto, flow: &str) -> (String, String) {
    let t = of.trace("br0", &[flow.into()], false).unwrap();
    let get = |p: &str| {
        t.lines()
            .find_map(|l| l.strip_prefix(p))
            .unwrap_or_else(|| panic!("{t}"))
            .to_owned()
    };
    (get("Megaflow: "), get("Datapath actions: "))
}

const BFD: &str =
    "in_port=1,udp,nw_src=169.254.1.0,nw_dst=169.254.1.1,nw_ttl=255,tp_src=49152,tp_dst=3784";

#[test]
fn a_sessions_packets_go_to_the_slow_path_and_others_to_the_tables() {
    let of = switch();
    assert_eq!(trace(&of, BFD).1, "2");
    assert_eq!(of.set_bfd_rx("br0", 1, rx(&[])), Some(true));
    let (mega, acts) = trace(&of, BFD);
    // OVS's trace: table 0 looked up, nothing run, the slow path said; the upcall installs
    // the slow path action.
    assert_eq!(acts, "drop");
    let t = of.trace("br0", &[BFD.into()], false).unwrap();
    assert!(t.contains("\n 0. priority 32768\n"), "{t}");
    assert!(
        t.ends_with(
            "Datapath actions: drop\nThis flow is handled by the userspace slow path because \
             it:\n  - Consists of BFD packets.\n"
        ),
        "{t}"
    );
    assert_eq!(upcall_actions(&of), "userspace(pid=0,slow_path(bfd))");
    assert!(
        mega.contains("udp") && mega.contains("tp_dst=3784"),
        "{mega}"
    );
    assert!(!mega.contains("nw_dst"), "{mega}");
    // Another UDP port, another input port: the tables.
    assert_eq!(trace(&of, &BFD.replace("3784", "3785")).1, "2");
    assert_eq!(trace(&of, &BFD.replace("in_port=1", "in_port=3")).1, "2");
    // bfd_src_ip and check_tnl_key narrow what is the session's.
    of.set_bfd_rx(
        "br0",
        1,
        rx(&[("bfd_src_ip", "10.0.0.1"), ("check_tnl_key", "true")]),
    );
    let (mega, acts) = trace(&of, BFD);
    assert_eq!(acts, "2");
    assert!(mega.contains("nw_dst=169.254.1.1"), "{mega}");
    let (_, acts) = trace(&of, &BFD.replace("169.254.1.1", "10.0.0.1"));
    assert_eq!(acts, "drop");
    let (_, acts) = trace(
        &of,
        &format!("tun_id=5,{}", BFD.replace("169.254.1.1", "10.0.0.1")),
    );
    assert_eq!(acts, "2");
    assert_eq!(of.set_bfd_rx("br0", 1, None), Some(true));
    assert_eq!(trace(&of, BFD).1, "2");
    assert_eq!(of.set_bfd_rx("br0", 9, None), None);
}

#[test]
fn a_port_whose_session_does_not_forward_is_not_live() {
    let of = switch();
    of.add_groups(
        "br0",
        "group_id=1,type=ff,bucket=watch_port:2,output:2,bucket=watch_port:3,output:3",
    )
    .unwrap();
    of.add_flow("br0", "priority=40000,in_port=1,actions=group:1")
        .unwrap();
    let acts = |of: &Ofproto| trace(of, "in_port=1,dl_dst=50:54:00:00:00:02").1;
    assert_eq!(acts(&of), "2");
    of.set_bfd_rx("br0", 2, rx(&[]));
    assert_eq!(of.set_bfd_forwarding("br0", 2, false), Some(true));
    assert_eq!(acts(&of), "3");
    assert_eq!(of.set_bfd_forwarding("br0", 2, true), Some(true));
    assert_eq!(acts(&of), "2");
    of.set_bfd_forwarding("br0", 2, false);
    // BFD off: the port is live again.
    of.set_bfd_rx("br0", 2, None);
    assert_eq!(acts(&of), "2");
}

/// The datapath actions an upcall of the BFD packet installs.
fn upcall_actions(of: &Ofproto) -> String {
    let mut k = flow::FlowKey::new();
    k.set_in_port(1)
        .set_eth_type(0x0800)
        .set_nw_src([169, 254, 1, 0].into())
        .set_nw_dst([169, 254, 1, 1].into())
        .set_nw_proto(17)
        .set_nw_ttl(255)
        .set_tp_src(49152)
        .set_tp_dst(3784);
    let p = of.pipe.read().unwrap();
    let x = ofproto::xlate::translate(&p, &k, false, None);
    flow::odp::format_actions(&x.actions, None)
}
