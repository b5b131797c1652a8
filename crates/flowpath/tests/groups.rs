//! Packets through each group type on `dummy` ports, compared with Open vSwitch 3.1: the same
//! groups, flows and packets given to `ovs-vswitchd` (dummy datapath) left the datapath flows,
//! group statistics and `ofproto/trace` output written here (statistics and recirculation
//! ids left out, and `dp_hash` values, which each datapath's own hash gives).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{scratch_dir, start_switch};

fn ctl(rundir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .arg("ctl")
        .arg("--rundir")
        .arg(rundir)
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout).unwrap()
}

const CONFIG: &str = r#"
[[bridge]]
name = "br0"

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

/// The groups of the comparison, as given to `ovs-ofctl add-group`.
const GROUPS: [&str; 5] = [
    "group_id=1,type=all,bucket=mod_dl_dst:00:00:00:00:00:07,output:2,bucket=output:3",
    "group_id=3,type=fast_failover,bucket=watch_port:5,output:2,bucket=watch_port:3,output:3",
    "group_id=4,type=select,selection_method=hash,fields(ip_src,tcp_dst),bucket=output:2,\
     bucket=output:3",
    "group_id=5,type=indirect,bucket=group:1",
    "group_id=6,type=select,bucket=output:2,bucket=output:3",
];

/// The dump's flows without statistics, sorted, with recirculation ids and `dp_hash` values
/// replaced.
fn flows(rundir: &Path) -> Vec<String> {
    let dump = ok(ctl(rundir, &["dpif/dump-flows", "br0"]));
    let mut v: Vec<String> = dump
        .lines()
        .filter(|l| l.contains(", actions:") && !l.starts_with("flow-dump"))
        .map(|l| {
            let (key, rest) = l.split_once(", packets:").unwrap();
            let actions = rest.split_once("actions:").unwrap().1;
            let mut s = format!("{key}, actions:{actions}");
            for (pat, end) in [
                ("recirc(0x", ')'),
                ("recirc_id(0x", ')'),
                ("dp_hash(0x", '/'),
            ] {
                if let Some(i) = s.find(pat) {
                    let j = i + pat.len() + s[i + pat.len()..].find(end).unwrap();
                    s.replace_range(i + pat.len()..j, "H");
                }
            }
            s
        })
        .collect();
    v.sort();
    v
}

fn packet(tp_src: u32) -> String {
    format!(
        "in_port(1),eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02),eth_type(0x0800),\
         ipv4(src=10.0.0.1,dst=10.0.0.2,proto=6,tos=0,ttl=64,frag=no),tcp(src={tp_src},dst=80)"
    )
}

/// A switch with [`GROUPS`] and a flow for each, `in_port=1,tcp,tp_src=N,actions=group:N`
/// followed by `more` actions.
fn switch_with_groups(name: &str, more: &str) -> (common::RmDir, common::Reap, PathBuf) {
    let (dir, rm) = scratch_dir(name);
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let run = dir.join("run");
    let sw = start_switch(&cfg, &run);
    for g in GROUPS {
        ok(ctl(&run, &["ofctl/add-group", "br0", g]));
    }
    for i in [1, 3, 4, 5, 6] {
        let flow = format!("in_port=1,tcp,tp_src={i},actions=group:{i}{more}");
        ok(ctl(&run, &["ofctl/add-flow", "br0", &flow]));
    }
    (rm, sw, run)
}

#[test]
fn packets_through_each_group_type_leave_ovs_s_datapath_flows() {
    let (_rm, _sw, run) = switch_with_groups("fp-groups", "");
    for i in [1, 3, 4, 5, 6] {
        ok(ctl(&run, &["netdev-dummy/receive", "p1", &packet(i)]));
    }
    let t = Instant::now();
    while flows(&run).len() < 6 {
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", flows(&run));
        std::thread::sleep(Duration::from_millis(20));
    }
    // OVS 3.1's `dpif/dump-flows br0` for the same groups, flows and packets. The dp_hash
    // group's second pass takes the bucket of its hash: OVS's took output:2, flowpath's hash
    // may take the other one.
    let mut got = flows(&run);
    let second = got.pop().unwrap();
    assert!(
        second
            == "recirc_id(0xH),dp_hash(0xH/0xf),in_port(1),packet_type(ns=0,id=0),\
                   eth_type(0x0800),ipv4(frag=no), actions:2"
            || second.ends_with("ipv4(frag=no), actions:3"),
        "{second}"
    );
    assert_eq!(
        got,
        [
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth(dst=00:00:00:00:00:02),\
             eth_type(0x0800),ipv4(proto=6,frag=no),tcp(src=1), \
             actions:set(eth(dst=00:00:00:00:00:07)),2,set(eth(dst=00:00:00:00:00:02)),3",
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth(dst=00:00:00:00:00:02),\
             eth_type(0x0800),ipv4(proto=6,frag=no),tcp(src=5), \
             actions:set(eth(dst=00:00:00:00:00:07)),2,set(eth(dst=00:00:00:00:00:02)),3",
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(proto=6,frag=no),tcp(src=3), actions:3",
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(proto=6,frag=no),tcp(src=6), actions:hash(sym_l4(0)),recirc(0xH)",
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),\
             ipv4(src=10.0.0.1,proto=6,frag=no),tcp(src=4,dst=80), actions:3",
        ]
    );
    // OVS's group statistics after those packets (group 1 counts the packet that went through
    // group 5 too); the dp_hash group's bucket is its hash's.
    let stats = ok(ctl(&run, &["ofctl/dump-group-stats", "br0"]));
    let lines: Vec<String> = stats
        .lines()
        .map(|l| {
            let (head, rest) = l.split_once(",duration=").unwrap();
            format!("{head},{}", rest.split_once(',').unwrap().1)
        })
        .collect();
    assert_eq!(
        lines[..4],
        [
            " group_id=1,ref_count=1,packet_count=2,byte_count=236,bucket0:packet_count=2,\
             byte_count=236,bucket1:packet_count=2,byte_count=236",
            " group_id=3,ref_count=1,packet_count=1,byte_count=118,bucket0:packet_count=0,\
             byte_count=0,bucket1:packet_count=1,byte_count=118",
            " group_id=4,ref_count=1,packet_count=1,byte_count=118,bucket0:packet_count=0,\
             byte_count=0,bucket1:packet_count=1,byte_count=118",
            " group_id=5,ref_count=1,packet_count=1,byte_count=118,bucket0:packet_count=1,\
             byte_count=118",
        ]
    );
    assert!(
        lines[4].starts_with(" group_id=6,ref_count=1,packet_count=1,byte_count=118,"),
        "{}",
        lines[4]
    );
    // Changing a group revalidates the datapath flows that used it: the all group's flow
    // goes, and the next packet's outputs to port 3 only.
    ok(ctl(
        &run,
        &[
            "ofctl/mod-group",
            "br0",
            "group_id=1,type=all,bucket=output:3",
        ],
    ));
    let t = Instant::now();
    loop {
        let f = flows(&run);
        if !f.iter().any(|l| l.contains("tcp(src=1), actions:set")) {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{f:?}");
        ok(ctl(&run, &["revalidator/wait"]));
    }
    ok(ctl(&run, &["netdev-dummy/receive", "p1", &packet(1)]));
    assert!(
        flows(&run)
            .iter()
            .any(|l| l.ends_with("tcp(src=1), actions:3")),
        "{:?}",
        flows(&run)
    );
}

/// `ofproto/trace` through each group type prints what OVS 3.1's prints.
#[test]
fn traces_through_groups_are_ovs_s() {
    let (_rm, _sw, run) = switch_with_groups("fp-groups-trace", ",output:1");
    let trace = |i: u32| {
        let flow = format!("in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src={i},tp_dst=2");
        let t = ok(ctl(&run, &["ofproto/trace", "br0", &flow]));
        // From the bridge to the final flow.
        let start = t.find("bridge(\"br0\")").unwrap();
        let end = t.find("\nFinal flow").unwrap();
        t[start..end].to_owned()
    };
    let head = |n: u32| {
        format!(
            "bridge(\"br0\")\n-------------\n 0. tcp,in_port=1,tp_src={n}, priority 32768\n    \
             group:{n}\n"
        )
    };
    let tail = "    output:1\n     >> skipping output to input port\n";
    assert_eq!(
        trace(1),
        format!(
            "{}    bucket 0\n            mod_dl_dst:00:00:00:00:00:07\n            \
             output:2\n    bucket 1\n            output:3\n{tail}",
            head(1)
        )
    );
    assert_eq!(
        trace(3),
        format!(
            "{}     -> bucket 0: not live due to port 5\n     -> using bucket 1\n    bucket 1\n\
             \x20           output:3\n{tail}",
            head(3)
        )
    );
    assert_eq!(
        trace(4),
        format!(
            "{}     -> bucket 0: score 24941\n     -> bucket 1: score 59\n     -> using bucket 0\n\
             \x20   bucket 0\n            output:2\n{tail}",
            head(4)
        )
    );
    assert_eq!(
        trace(5),
        format!(
            "{}    bucket 0\n            group:1\n            bucket 0\n                    \
             mod_dl_dst:00:00:00:00:00:07\n                    output:2\n            \
             bucket 1\n                    output:3\n{tail}",
            head(5)
        )
    );
    // The dp_hash group: this pass hashes and recirculates; the output after it waits for
    // the next pass.
    assert_eq!(trace(6), format!("{}     -> no live bucket\n", head(6)));
}
