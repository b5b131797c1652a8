//! Conjunctive matches and `learn` with packets, on `dummy` ports: what `ofproto/trace`,
//! `dpif/dump-flows` and `dump-flows` show is what OVS 3.1 shows for the same flows and packets
//! (recorded from `ovs-vswitchd --enable-dummy=override`, statistics left out): an OVN-shaped
//! ACL (`ip4.src in {...} && tcp.dst in {22, 443}`) and OVN's load-balancer hairpin learn.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{ctl, dp_flows, ok, scratch_dir, start_switch};

fn config(flows: &[&str]) -> String {
    let flows: Vec<String> = flows.iter().map(|f| format!("{f:?}")).collect();
    let mut c = format!(
        "[[bridge]]\nname = \"br0\"\nflows = [{}]\n",
        flows.join(", ")
    );
    for i in 1..=3 {
        c += &format!("\n[[bridge.port]]\nname = \"p{i}\"\ntype = \"dummy\"\nofport = {i}\n");
    }
    c
}

fn wait_for(rundir: &Path, n: usize) -> Vec<String> {
    let t = Instant::now();
    loop {
        let f = dp_flows(rundir);
        if f.len() >= n || t.elapsed() > Duration::from_secs(20) {
            return f;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `dump-flows` without statistics.
fn of_flows(rundir: &Path, filter: &str) -> Vec<String> {
    let dump = ok(ctl(rundir, &["ofctl/dump-flows", "br0", filter]));
    dump.lines()
        .map(|l| {
            let l = l.trim();
            // "cookie=0x0, duration=..., table=0, n_packets=0, n_bytes=0, idle_age=0, REST"
            let mut out = Vec::new();
            for part in l.split(", ") {
                if [
                    "duration=",
                    "n_packets=",
                    "n_bytes=",
                    "idle_age=",
                    "hard_age=",
                ]
                .iter()
                .any(|p| part.starts_with(p))
                {
                    continue;
                }
                out.push(part);
            }
            out.join(", ")
        })
        .collect()
}

const ACL: &[&str] = &[
    "priority=100,ip,nw_src=10.0.0.1,actions=conjunction(1,1/2)",
    "priority=100,ip,nw_src=10.0.0.2,actions=conjunction(1,1/2)",
    "priority=100,tcp,tp_dst=22,actions=conjunction(1,2/2)",
    "priority=100,tcp,tp_dst=443,actions=conjunction(1,2/2)",
    "priority=100,conj_id=1,ip,actions=output:2",
    "priority=1,actions=output:3",
];

fn trace(rundir: &Path, flow: &str) -> String {
    ok(ctl(rundir, &["ofproto/trace", "br0", flow]))
}

#[test]
fn a_conjunctive_acl_traces_and_caches_as_ovs() {
    let (dir, _rm) = scratch_dir("fp-conj-acl");
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, config(ACL)).unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    let flow = |src: &str, dport: u16| {
        format!("in_port=1,tcp,nw_src={src},nw_dst=10.0.0.9,tp_src=5555,tp_dst={dport}")
    };
    let t = trace(&run, &flow("10.0.0.1", 22));
    assert!(
        t.contains(
            "bridge(\"br0\")\n-------------\n 0. conj_id=1,ip, priority 100\n    output:2\n\n\
             Final flow: unchanged\n\
             Megaflow: recirc_id=0,eth,tcp,in_port=1,nw_src=10.0.0.1,nw_frag=no,tp_dst=22\n\
             Datapath actions: 2\n"
        ),
        "{t}"
    );
    let t = trace(&run, &flow("10.0.0.3", 22));
    assert!(
        t.contains(
            " 0. priority 1\n    output:3\n\nFinal flow: unchanged\n\
             Megaflow: recirc_id=0,eth,tcp,in_port=1,nw_src=10.0.0.3,nw_frag=no,tp_dst=22\n\
             Datapath actions: 3\n"
        ),
        "{t}"
    );
    let t = trace(&run, &flow("10.0.0.2", 80));
    assert!(
        t.contains(
            "Megaflow: recirc_id=0,eth,tcp,in_port=1,nw_src=10.0.0.2,nw_frag=no,\
             tp_dst=0x40/0xffc0\nDatapath actions: 3\n"
        ),
        "{t}"
    );
    let pkt = |src: &str, l4: &str| {
        format!(
            "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x0800),\
             ipv4(src={src},dst=10.0.0.9,proto={},tos=0,ttl=64,frag=no),{l4}",
            if l4.starts_with("tcp") { 6 } else { 17 }
        )
    };
    for (src, l4) in [
        ("10.0.0.1", "tcp(src=5555,dst=22)"),
        ("10.0.0.3", "tcp(src=5555,dst=22)"),
        ("10.0.0.2", "udp(src=5555,dst=443)"),
    ] {
        ok(ctl(&run, &["netdev-dummy/receive", "p1", &pkt(src, l4)]));
    }
    assert_eq!(
        wait_for(&run, 3),
        [
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(src=10.0.0.1,proto=6,frag=no),tcp(dst=22), actions:2",
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(src=10.0.0.2,proto=17,frag=no), actions:3",
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(src=10.0.0.3,proto=6,frag=no),tcp(dst=22), actions:3",
        ]
    );
}

const HAIRPIN: &[&str] = &[
    "table=0,priority=100,tcp,nw_dst=10.0.0.10,tp_dst=80,actions=learn(table=69,\
     delete_learned,cookie=0xab,OXM_OF_METADATA[],eth_type=0x800,NXM_OF_IP_SRC[],\
     ip_dst=10.0.0.10,nw_proto=6,NXM_OF_TCP_SRC[]=NXM_OF_TCP_DST[],\
     load:0x1->NXM_NX_REG10[7]),output:2",
    "table=0,priority=50,tcp,in_port=2,actions=resubmit(,69),output:1",
    "table=0,priority=10,udp,actions=learn(table=5,idle_timeout=30,limit=1,\
     result_dst=reg0[0],eth_type=0x800,nw_proto=17,NXM_OF_UDP_DST[]=NXM_OF_UDP_SRC[],\
     output:NXM_OF_IN_PORT[]),output:3",
];

#[test]
fn the_ovn_hairpin_learn_learns_traces_and_goes_as_ovs() {
    let (dir, _rm) = scratch_dir("fp-learn-hairpin");
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, config(HAIRPIN)).unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    // Without side effects a trace learns nothing.
    let t = trace(
        &run,
        "in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.10,tp_src=5555,tp_dst=80",
    );
    assert!(
        t.contains(
            " 0. tcp,nw_dst=10.0.0.10,tp_dst=80, priority 100\n    learn(table=69,\
             delete_learned,cookie=0xab,OXM_OF_METADATA[],eth_type=0x800,NXM_OF_IP_SRC[],\
             ip_dst=10.0.0.10,nw_proto=6,NXM_OF_TCP_SRC[]=NXM_OF_TCP_DST[],\
             load:0x1->NXM_NX_REG10[7])\n     >> suppressing side effects, so learn action \
             ignored\n    output:2\n\nFinal flow: unchanged\n\
             Megaflow: recirc_id=0,eth,tcp,in_port=1,nw_src=10.0.0.1,nw_dst=10.0.0.10,\
             nw_frag=no,tp_dst=80\nDatapath actions: 2\n"
        ),
        "{t}"
    );
    assert_eq!(of_flows(&run, "table=69"), Vec::<String>::new());
    // A packet learns the reply's flow.
    ok(ctl(
        &run,
        &[
            "netdev-dummy/receive",
            "p1",
            "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x0800),\
             ipv4(src=10.0.0.1,dst=10.0.0.10,proto=6,tos=0,ttl=64,frag=no),\
             tcp(src=5555,dst=80)",
        ],
    ));
    assert_eq!(
        wait_for(&run, 1),
        [
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
          ipv4(src=10.0.0.1,dst=10.0.0.10,proto=6,frag=no),tcp(dst=80), actions:2"
        ]
    );
    assert_eq!(
        of_flows(&run, "table=69"),
        [
            "cookie=0xab, table=69, tcp,metadata=0,nw_src=10.0.0.1,nw_dst=10.0.0.10,tp_src=80 \
          actions=load:0x1->NXM_NX_REG10[7]"
        ]
    );
    // With side effects, a trace learns; the limit and the result bit as OVS's.
    let udp = |sport: u16| {
        format!("in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.10,udp_src={sport},udp_dst=53")
    };
    let t = ok(ctl(&run, &["ofproto/trace", "br0", &udp(53), "-generate"]));
    assert!(
        t.contains(
            "output:NXM_OF_IN_PORT[])\n     -> table=5 udp,tp_dst=53 priority=32768 idle=30 \
             actions=output:1\n     -> NXM_NX_REG0[0] is now 0x1\n    output:3\n\n\
             Final flow: udp,reg0=0x1,in_port=1,"
        ),
        "{t}"
    );
    assert!(
        t.contains(
            "Megaflow: recirc_id=0,eth,udp,in_port=1,nw_dst=10.0.0.10,nw_frag=no,tp_src=53\n"
        ),
        "{t}"
    );
    let t = ok(ctl(&run, &["ofproto/trace", "br0", &udp(54), "-generate"]));
    assert!(
        t.contains(
            "     -> table=5 udp,tp_dst=54 priority=32768 idle=30 actions=output:1\n     \
             -> NXM_NX_REG0[0] is now 0\n     -> Limit exceeded, learn failed\n    \
             output:3\n\nFinal flow: unchanged\n"
        ),
        "{t}"
    );
    assert_eq!(
        of_flows(&run, "table=5"),
        ["cookie=0x0, table=5, idle_timeout=30, udp,tp_dst=53 actions=output:1"]
    );
    // The learned flow goes with the flow that learned it.
    ok(ctl(
        &run,
        &[
            "ofctl/del-flows",
            "br0",
            "table=0,tcp,nw_dst=10.0.0.10,tp_dst=80",
        ],
    ));
    assert_eq!(of_flows(&run, "table=69"), Vec::<String>::new());
}

#[test]
fn a_fin_shortens_the_timeouts_of_a_fin_timeout_flow_as_ovs() {
    let (dir, _rm) = scratch_dir("fp-fin-timeout");
    let cfg = dir.join("sw.toml");
    let flow = "tcp,idle_timeout=60,actions=fin_timeout(idle_timeout=5,hard_timeout=30),output:2";
    std::fs::write(&cfg, config(&[flow])).unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    let pkt = |sport: u16, flags: &str| {
        format!(
            "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x0800),\
             ipv4(src=10.0.0.1,dst=10.0.0.10,proto=6,tos=0,ttl=64,frag=no),\
             tcp(src={sport},dst=80),tcp_flags({flags})"
        )
    };
    let tcp = |rundir: &Path| {
        of_flows(rundir, "tcp")
            .into_iter()
            .filter(|l| l.contains("fin_timeout"))
            .collect::<Vec<_>>()
    };
    ok(ctl(
        &run,
        &["netdev-dummy/receive", "p1", &pkt(5555, "ack")],
    ));
    wait_for(&run, 1);
    ok(ctl(&run, &["revalidator/wait"]));
    assert_eq!(
        tcp(&run),
        [
            "cookie=0x0, table=0, idle_timeout=60, tcp actions=fin_timeout(idle_timeout=5,\
          hard_timeout=30),output:2"
        ]
    );
    // The FIN hits the megaflow; the revalidator sees its flag and applies the timeouts.
    ok(ctl(
        &run,
        &["netdev-dummy/receive", "p1", &pkt(5556, "fin")],
    ));
    ok(ctl(&run, &["revalidator/wait"]));
    ok(ctl(&run, &["revalidator/wait"]));
    assert_eq!(
        tcp(&run),
        [
            "cookie=0x0, table=0, idle_timeout=5, hard_timeout=30, tcp actions=fin_timeout(\
          idle_timeout=5,hard_timeout=30),output:2"
        ]
    );
}

/// OVS's "learning action - limit" (learn.at), with eight sources: the packets that hit
/// existing megaflows learn in the revalidator, which applies their lessons in the order the
/// packets came, so a `limit=1` keeps the first packet's flow, as upcalls in that order would
/// (it applied them in hash-map order: a random one of the eight won).
#[test]
fn a_learn_limit_keeps_the_first_packets_flow_also_from_megaflow_hits() {
    let (dir, _rm) = scratch_dir("fp-learn-limit");
    let cfg = dir.join("sw.toml");
    let flow = "table=0,in_port=1,actions=learn(table=1,dl_dst=dl_src,cookie=0x1,limit=1),2";
    std::fs::write(&cfg, config(&[flow])).unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    let receive = |src: u8| {
        let pkt = format!(
            "in_port(1),eth(src=50:54:00:00:00:{src:02x},dst=50:54:00:00:00:ff),eth_type(0x1234)"
        );
        ok(ctl(&run, &["netdev-dummy/receive", "p1", &pkt]));
    };
    for src in 1..=8 {
        receive(src);
    }
    assert_eq!(wait_for(&run, 8).len(), 8);
    assert_eq!(
        of_flows(&run, "table=1"),
        ["cookie=0x1, table=1, dl_dst=50:54:00:00:00:01 actions=drop"]
    );
    ok(ctl(&run, &["ofctl/del-flows", "br0", "table=1"]));
    ok(ctl(&run, &["revalidator/wait"]));
    for src in [5, 1, 2, 3, 4, 6, 7, 8] {
        receive(src);
    }
    ok(ctl(&run, &["revalidator/wait"]));
    ok(ctl(&run, &["revalidator/wait"]));
    assert_eq!(
        of_flows(&run, "table=1"),
        ["cookie=0x1, table=1, dl_dst=50:54:00:00:00:05 actions=drop"]
    );
}
