//! QoS queue actions on a running switch: packets injected on `dummy` ports through flows with
//! `set_queue`, `pop_queue` and `enqueue` are forwarded, and the datapath flows they leave are
//! OVS 3.1's (the expected lines are OVS's `dpif/dump-flows br0` for the same flows and
//! packets on its dummy datapath, statistics left out; the port counters are its
//! `ovs-ofctl dump-ports`).

mod common;

use std::time::{Duration, Instant};

use common::{ctl, dp_flows as flows, ok, scratch_dir, start_switch};

const CONFIG: &str = r#"
[[bridge]]
name = "br0"
flows = ["in_port=1,actions=set_queue:5,output:2,pop_queue,output:3",
         "in_port=2,actions=enqueue:3:7,output:1"]

[[bridge.port]]
name = "p1"
type = "dummy"
ofport = 1

[[bridge.port]]
name = "p2"
type = "dummy"
ofport = 2

[[bridge.port]]
name = "p3"
type = "dummy"
ofport = 3
"#;

#[test]
fn queue_actions_forward_and_leave_ovs_s_datapath_flows() {
    let (dir, _rm) = scratch_dir("fp-queues");
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    for (port, flow) in [
        (
            "p1",
            "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x0800),\
             ipv4(src=10.0.0.1,dst=10.0.0.2,proto=17,tos=0,ttl=64,frag=no),udp(src=1,dst=2)",
        ),
        (
            "p2",
            "in_port(2),eth(src=50:54:00:00:00:02,dst=50:54:00:00:00:01),eth_type(0x0800),\
             ipv4(src=10.0.0.2,dst=10.0.0.1,proto=17,tos=0,ttl=64,frag=no),udp(src=2,dst=1)",
        ),
    ] {
        ok(ctl(&run, &["netdev-dummy/receive", port, flow]));
    }
    let t = Instant::now();
    while flows(&run).len() < 2 {
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", flows(&run));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        flows(&run),
        [
            "skb_priority(0),recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(frag=no), actions:set(skb_priority(0x5)),2,set(skb_priority(0)),3",
            "skb_priority(0),recirc_id(0),in_port(2),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(frag=no), actions:set(skb_priority(0x7)),3,set(skb_priority(0)),1",
        ]
    );
    let ports = ok(ctl(&run, &["ofctl/dump-ports", "br0", "3"]));
    assert_eq!(
        ports,
        "OFPST_PORT reply (xid=0x2): 1 ports\n  \
         port  3: rx pkts=0, bytes=0, drop=0, errs=0, frame=?, over=?, crc=?\n           \
         tx pkts=2, bytes=212, drop=0, errs=?, coll=?\n"
    );
}
