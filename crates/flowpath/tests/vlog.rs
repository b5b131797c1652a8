//! Logging as OVS's vlog: `--log-file`, `-v` specs, `vlog/set`, `vlog/list`, `vlog/reopen`,
//! and the debug line of each miss (`vlog/set dpif_netdev:dbg`), whose packet line is OVS
//! 3.1's for the same packet (`ovs-vswitchd.log` after `netdev-dummy/receive`).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Reap, ctl, scratch_dir};

const CONFIG: &str = r#"
[[bridge]]
name = "br0"
flows = ["in_port=1,actions=output:2"]

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
fn a_miss_is_logged_with_its_key_and_packet_and_the_levels_follow_vlog_set() {
    let (dir, _rm) = scratch_dir("fp-vlog");
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let run = dir.join("run");
    let _sw = Reap(
        Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .args(["run", "--config"])
            .arg(&cfg)
            .arg("--rundir")
            .arg(&run)
            .args(["--log-file", "-vconsole:off"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    while !run.join("flowpath.ctl").exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no control socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let list = String::from_utf8(ctl(&run, &["vlog/list"]).stdout).unwrap();
    assert!(
        list.contains("\ndpif_netdev        OFF       INFO       INFO\n"),
        "{list}"
    );
    let o = ctl(&run, &["vlog/set", "bogus:dbg"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no destination, level, or module \"bogus\"")
    );
    assert!(
        ctl(&run, &["vlog/set", "dpif_netdev:file:dbg"])
            .status
            .success()
    );
    let flow = "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:05),eth_type(0x0800),\
                ipv4(src=10.0.0.1,dst=10.0.0.2,proto=17,tos=0,ttl=64,frag=no),udp(src=1,dst=2)";
    assert!(
        ctl(&run, &["netdev-dummy/receive", "p1", flow])
            .status
            .success()
    );
    let log = run.join("flowpath.log");
    let t = Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("udp_csum") {
            break text;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.ends_with("|dpif_netdev|DBG|netdev@flowpath: miss upcall:"))
        .unwrap();
    assert!(
        lines[at + 1].starts_with("skb_priority(0),skb_mark(0),ct_state("),
        "{text}"
    );
    assert!(lines[at + 1].ends_with(&flow[10..]), "{text}");
    assert_eq!(
        lines[at + 2],
        "udp,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:05,nw_src=10.0.0.1,\
         nw_dst=10.0.0.2,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=1,tp_dst=2 udp_csum:755"
    );
    // Rotated away and reopened: logging goes on in a new file.
    std::fs::rename(&log, dir.join("old.log")).unwrap();
    assert!(ctl(&run, &["vlog/reopen"]).status.success());
    assert!(
        ctl(&run, &["vlog/set", "dpif_netdev:file:info"])
            .status
            .success()
    );
    assert!(log.exists());
}
