//! `dummy` ports and `netdev-dummy/receive`, as OVS's test suite drives a switch: packets
//! injected as hex or as datapath flows go through the pipeline, and the datapath flows they
//! leave are OVS 3.1's (the expected lines are OVS's `dpif/dump-flows br0` for the same flows
//! and packet, on its dummy datapath, with the statistics and recirculation id left out).

mod common;

use std::time::{Duration, Instant};

use common::{ctl, dp_flows as flows, ok, scratch_dir, start_switch};

const CONFIG: &str = r#"
[[bridge]]
name = "br0"
flows = ["in_port=1,mpls,actions=pop_mpls:0x0800,dec_ttl,output:2",
         "in_port=2,actions=output:1"]

[[bridge.port]]
name = "p1"
type = "dummy"
ofport = 1

[[bridge.port]]
name = "p2"
type = "dummy"
ofport = 2
"#;

#[test]
fn injected_packets_cross_the_pipeline_and_leave_ovs_s_datapath_flows() {
    let (dir, _rm) = scratch_dir("fp-dummy-ports");
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    // MPLS over IPv4/UDP (IP TTL 33), in hex, and an IPv4/UDP flow the other way.
    let mpls = "50540000000250540000000188470000a1404500001c00010000211185ce0a0000010a00000200\
                01000200080000";
    ok(ctl(&run, &["netdev-dummy/receive", "p1", mpls]));
    ok(ctl(
        &run,
        &[
            "netdev-dummy/receive",
            "p2",
            "in_port(2),eth(src=50:54:00:00:00:02,dst=50:54:00:00:00:01),eth_type(0x0800),\
             ipv4(src=10.0.0.2,dst=10.0.0.1,proto=17,tos=0,ttl=64,frag=no),udp(src=2,dst=1)",
        ],
    ));
    let t = Instant::now();
    while flows(&run).len() < 3 {
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", flows(&run));
        std::thread::sleep(Duration::from_millis(20));
    }
    let got = flows(&run);
    let re = |s: &str| {
        s.replace("recirc(0x1)", "recirc(ID)")
            .replace("recirc_id(0x1)", "recirc_id(ID)")
    };
    let got: Vec<String> = got.iter().map(|l| re(l)).collect();
    assert_eq!(
        got,
        [
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8847),\
             mpls(label=10/0x0,tc=0/0,ttl=64/0x0,bos=1/1), actions:pop_mpls(eth_type=0x800),\
             recirc(ID)",
            "recirc_id(0),in_port(2),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), \
             actions:1",
            "recirc_id(ID),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(proto=17,ttl=33,frag=no), actions:set(ipv4(ttl=32)),2",
        ]
    );
    let ports = ok(ctl(&run, &["ofctl/dump-ports", "br0", "2"]));
    assert_eq!(
        ports,
        "OFPST_PORT reply (xid=0x2): 1 ports\n  \
         port  2: rx pkts=1, bytes=106, drop=0, errs=0, frame=?, over=?, crc=?\n           \
         tx pkts=1, bytes=42, drop=0, errs=?, coll=?\n"
    );
    // Bad input: a clear error, and the switch goes on.
    let o = ctl(&run, &["netdev-dummy/receive", "p9", mpls]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no such dummy netdev"),
        "{o:?}"
    );
    ok(ctl(&run, &["dpif/show"]));
}

#[test]
fn with_megaflows_off_each_packet_gets_its_exact_flow() {
    let (dir, _rm) = scratch_dir("fp-dummy-exact");
    let cfg = dir.join("sw.toml");
    std::fs::write(
        &cfg,
        CONFIG.replace(
            "in_port=2,actions=output:1",
            "in_port=1,ip,actions=output:2",
        ),
    )
    .unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    assert_eq!(
        ok(ctl(&run, &["upcall/disable-megaflows"])),
        "megaflows disabled\n"
    );
    let flow = "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x0800),\
                ipv4(src=10.0.0.1,dst=10.0.0.2,proto=17,tos=0,ttl=64,frag=no),udp(src=1,dst=2)";
    ok(ctl(&run, &["netdev-dummy/receive", "p1", flow]));
    let t = Instant::now();
    while flows(&run).is_empty() {
        assert!(t.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    // OVS 3.1, the same flow table and packet after upcall/disable-megaflows.
    assert_eq!(
        flows(&run),
        [
            "skb_priority(0),skb_mark(0),ct_state(-new-est-rel-rpl-inv-trk-snat-dnat),ct_zone(0),\
          ct_mark(0),ct_label(0),recirc_id(0),dp_hash(0),in_port(1),packet_type(ns=0,id=0),\
          eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x0800),ipv4(src=10.0.0.1,\
          dst=10.0.0.2,proto=17,tos=0,ttl=64,frag=no),udp(src=1,dst=2), actions:2"
        ]
    );
    let show = ok(ctl(&run, &["upcall/show"]));
    assert!(
        show.starts_with("netdev@flowpath:\n  flows         : (current 1)"),
        "{show}"
    );
    assert_eq!(
        ok(ctl(&run, &["upcall/enable-megaflows"])),
        "megaflows enabled\n"
    );
}

/// `revalidator/wait` brings the OpenFlow rules' statistics up to date before it replies (OVS's
/// tests read `dump-flows` right after it); `revalidator/purge` also removes every datapath flow.
#[test]
fn revalidator_wait_and_purge() {
    let (dir, _rm) = scratch_dir("fp-dummy-revalidator");
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    let flow = "in_port(2),eth(src=50:54:00:00:00:02,dst=50:54:00:00:00:01),eth_type(0x0800),\
                ipv4(src=10.0.0.2,dst=10.0.0.1,proto=17,tos=0,ttl=64,frag=no),udp(src=1,dst=2)";
    ok(ctl(&run, &["netdev-dummy/receive", "p2", flow]));
    // As OVS's for a port its main thread polls, the command replies once the packet is
    // handled: its flow is there.
    assert!(!flows(&run).is_empty());
    // As in OVS, the packet that missed counts for the rule it went through, not for the
    // datapath flow it installed.
    let dump = ok(ctl(&run, &["dpif/dump-flows", "br0"]));
    assert!(dump.contains("packets:0, bytes:0, used:never,"), "{dump}");
    let rules = ok(ctl(&run, &["ofctl/dump-flows", "br0", "in_port=2"]));
    assert!(rules.contains("n_packets=1,"), "{rules}");
    ok(ctl(&run, &["netdev-dummy/receive", "p2", flow]));
    // Once the datapath has counted the second packet, one round brings it to the rule.
    let t = Instant::now();
    while !ok(ctl(&run, &["dpif/dump-flows", "br0"])).contains("packets:1,") {
        assert!(t.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ok(ctl(&run, &["revalidator/wait"])), "");
    let dump = ok(ctl(&run, &["ofctl/dump-flows", "br0", "in_port=2"]));
    assert!(dump.contains("n_packets=2,"), "{dump}");
    // dpctl/get-flow prints the flow as the dump does: terse, or with -m verbose with its ufid.
    let verbose = ok(ctl(&run, &["dpif/dump-flows", "-m", "br0"]));
    let ufid = verbose.split_whitespace().next().unwrap();
    assert!(ufid.starts_with("ufid:"), "{verbose}");
    let strip_used = |s: String| s.split(", used:").next().unwrap().to_owned();
    let terse = ok(ctl(&run, &["dpif/dump-flows", "br0"]));
    let got = ok(ctl(&run, &["dpctl/get-flow", ufid]));
    assert_eq!(strip_used(got), strip_used(terse));
    let got = ok(ctl(&run, &["dpctl/get-flow", "-m", ufid]));
    assert!(
        got.starts_with(&format!("{ufid}, skb_priority(0/0)")),
        "{got}"
    );
    assert_eq!(ok(ctl(&run, &["revalidator/purge"])), "");
    assert!(flows(&run).is_empty());
    let dump = ok(ctl(&run, &["ofctl/dump-flows", "br0", "in_port=2"]));
    assert!(dump.contains("n_packets=2,"), "{dump}");
}

const CHECK_PKT_LEN_CONFIG: &str = r#"
[[bridge]]
name = "br0"
flows = ["table=0,in_port=1,actions=check_pkt_larger(100)->NXM_NX_REG1[0],resubmit(,1)",
         "table=1,reg1=0x1,actions=output:2",
         "table=1,reg1=0x0,actions=output:3"]

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

/// `check_pkt_larger`: the datapath's `check_pkt_len` sends each packet down the branch its
/// length picks (the flow and port counts are OVS 3.1's for the same flows and packets).
#[test]
fn check_pkt_len_sends_each_packet_down_the_branch_its_length_picks() {
    let (dir, _rm) = scratch_dir("fp-check-pkt-len");
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CHECK_PKT_LEN_CONFIG).unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    // A 42-byte IPv4/UDP frame and a 142-byte one.
    let small = "50540000000250540000000108004500001c00010000401185ce0a0000010a000002000100020008\
                 0000";
    let big = format!(
        "505400000002505400000001080045000080000100004011856a0a0000010a00000200010002006c0000{}",
        "0".repeat(200)
    );
    ok(ctl(&run, &["netdev-dummy/receive", "p1", small]));
    ok(ctl(&run, &["netdev-dummy/receive", "p1", &big]));
    ok(ctl(&run, &["netdev-dummy/receive", "p1", &big]));
    let dump = ok(ctl(&run, &["dpif/dump-flows", "br0"]));
    assert!(
        dump.contains(
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), \
             packets:2, bytes:284"
        ) && dump.contains("actions:check_pkt_len(size=100,gt(2),le(3))"),
        "{dump}"
    );
    let p2 = ok(ctl(&run, &["ofctl/dump-ports", "br0", "2"]));
    assert!(p2.contains("tx pkts=2, bytes=284"), "{p2}");
    let p3 = ok(ctl(&run, &["ofctl/dump-ports", "br0", "3"]));
    assert!(p3.contains("tx pkts=1, bytes=42"), "{p3}");
}
