//! `check_pkt_larger` with packets: the datapath's `check_pkt_len` sends each packet down the
//! branch its length picks. The expected datapath flow and port counts are Open vSwitch 3.1's
//! for the same flows and packets (a private `ovs-vswitchd --enable-dummy`, `ovs-appctl
//! netdev-dummy/receive`, `dpif/dump-flows`, `ovs-ofctl dump-ports`).

mod common;

use std::path::Path;
use std::process::{Command, Output};

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

#[test]
fn packets_take_the_branch_their_length_picks() {
    let (dir, _rm) = scratch_dir("fp-check-pkt-len");
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
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
