//! Every bridge's LOCAL port is a datapath port, as in OVS's userspace datapath: `dpif/show`
//! lists it with its number, and what NORMAL floods reaches it (OVS 3.1 on its dummy datapath:
//! `br0 65534/100: (dummy-internal)`, and an ARP broadcast from p1 floods to `2,100`). With
//! `--enable-dummy` it receives what `netdev-dummy/receive` injects, as OVS's dummy-internal.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{Reap, scratch_dir, start_switch};

fn ctl(rundir: &Path, args: &[&str]) -> String {
    let o: Output = Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .arg("ctl")
        .arg("--rundir")
        .arg(rundir)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout).unwrap()
}

const CONFIG: &str = r#"
[[bridge]]
name = "br0"
flows = ["actions=NORMAL"]

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
fn the_local_port_is_a_datapath_port_that_flooding_reaches() {
    let (dir, _rm) = scratch_dir("fp-local-port");
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let run = dir.join("run");
    let _sw = start_switch(&cfg, &run);
    let show = ctl(&run, &["dpif/show"]);
    assert!(show.contains("    br0 65534/100: (internal)\n"), "{show}");
    ctl(
        &run,
        &[
            "netdev-dummy/receive",
            "p1",
            "in_port(1),eth(src=50:54:00:00:00:01,dst=ff:ff:ff:ff:ff:ff),eth_type(0x0806),\
             arp(sip=10.0.0.1,tip=10.0.0.2,op=1,sha=50:54:00:00:00:01,tha=00:00:00:00:00:00)",
        ],
    );
    let t = Instant::now();
    let flows = loop {
        let f = ctl(&run, &["dpif/dump-flows", "br0"]);
        if f.contains("actions:") {
            break f;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{f}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let actions = flows.trim_end().rsplit_once("actions:").unwrap().1;
    let mut outs: Vec<&str> = actions.split(',').collect();
    outs.sort();
    assert_eq!(outs, ["100", "2"], "{flows}");
    // A bridge made at run time gets its LOCAL port too, numbered as OVS's dummy datapath
    // numbers it (100 plus the number in a `br` name); a dummy port takes its name's number.
    ctl(&run, &["add-br", "br1"]);
    ctl(&run, &["add-port", "br1", "p10", "type=dummy"]);
    let show = ctl(&run, &["dpif/show"]);
    assert!(show.contains("    br1 65534/101: (internal)\n"), "{show}");
    assert!(show.contains("    p10 1/10: (dummy)\n"), "{show}");
    ctl(&run, &["del-br", "br1"]);
    assert!(!ctl(&run, &["dpif/show"]).contains("br1"));
}

/// OVS's ofproto-dpif.at "flow stats": packets injected into br0 itself go through the
/// pipeline and are counted in the flow they hit (OVS 3.1: `n_packets=10, n_bytes=1180`).
#[test]
fn with_enable_dummy_the_local_port_receives_injected_packets() {
    let (dir, _rm) = scratch_dir("fp-local-rx");
    let cfg = dir.join("sw.toml");
    std::fs::write(
        &cfg,
        "[[bridge]]\nname = \"br0\"\nflows = [\"ip,actions=NORMAL\"]\n",
    )
    .unwrap();
    let run = dir.join("run");
    let _sw = Reap(
        Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .args(["run", "--enable-dummy", "--config"])
            .arg(&cfg)
            .arg("--rundir")
            .arg(&run)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    while !run.join("flowpath.ctl").exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no control socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let packet = "in_port(0),eth(src=50:54:00:00:00:07,dst=50:54:00:00:00:05),eth_type(0x0800),\
                  ipv4(src=192.168.0.2,dst=192.168.0.1,proto=6,tos=0,ttl=64,frag=no)";
    for _ in 0..10 {
        ctl(&run, &["netdev-dummy/receive", "br0", packet]);
    }
    ctl(&run, &["revalidator/purge"]);
    let flows = ctl(&run, &["ofctl/dump-flows", "br0"]);
    assert!(flows.contains("n_packets=10, n_bytes=1180,"), "{flows}");
    // OVS polls its dummy-internal ports from its main thread: no PMD queue to show.
    let rxqs = ctl(&run, &["dpif-netdev/pmd-rxq-show"]);
    assert!(!rxqs.contains("br0"), "{rxqs}");
}
