//! `flowpath run` as an OpenFlow switch: stock `ovs-ofctl` (with `OVS_RUNDIR` at the run
//! directory) manages bridge br0 over `br0.mgmt`, and prints what it prints against
//! `ovs-vswitchd` 3.1 for the same bridge and ports (`testdata/openflow/ovs-ofctl-br0.txt`,
//! recorded by `scripts/capture-ovs-ofctl`), once transaction ids, durations, addresses and the
//! datapath id (random in OVS) are taken out. Malformed requests get OVS's errors on a
//! connection that stays up, a client that leaves mid-message leaves the switch running, and
//! bridges added or removed at run time get or lose their listeners.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::ofctl::{
    client, compare, exchange, ofctl, ovs_ofctl_missing, port_statuses, text, unhex,
};
use common::{Reap, ctl, ok, scratch_dir, start_switch};

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
"#;

const OVS: &str = include_str!("../../../testdata/openflow/ovs-ofctl-br0.txt");

/// Commands whose output differs from OVS's for a reason of the port backends, not of the
/// OpenFlow layer: OVS's dummy ports have custom statistics.
const BACKEND_DIFFERS: &[&str] = &["-O OpenFlow14 dump-ports br0 1"];

/// Requests answered differently on purpose (none now).
const RAW_DIFFERS: &[&str] = &[];

fn sections() -> Vec<(String, Vec<String>)> {
    common::ofctl::sections(OVS)
}

/// A running switch with br0's listeners up.
fn switch(tag: &str) -> (Reap, PathBuf, common::RmDir) {
    let (dir, guard) = scratch_dir(tag);
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let rundir = dir.join("run");
    let sw = start_switch(&cfg, &rundir);
    wait_for(&rundir.join("br0.mgmt"), true);
    (sw, rundir, guard)
}

fn wait_for(path: &Path, present: bool) {
    let t = Instant::now();
    while path.exists() != present {
        assert!(t.elapsed() < Duration::from_secs(10), "{}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ovs_ofctl_prints_what_it_prints_against_ovs_vswitchd() {
    if ovs_ofctl_missing() {
        eprintln!("skipped: ovs-ofctl is not installed");
        return;
    }
    let (_sw, rundir, _g) = switch("fp-ofserver-ofctl");
    let flows = rundir.join("flows.txt");
    let mut failures = Vec::new();
    let mut compared = 0;
    for (cmd, want) in sections() {
        let cmd = cmd.as_str();
        if cmd.starts_with("raw ") {
            continue;
        }
        if cmd == "file FLOWS" {
            std::fs::write(&flows, want.join("\n") + "\n").unwrap();
            continue;
        }
        // Every command runs (some change the switch for those after), not all are compared.
        let got = text(&ofctl(
            &rundir,
            &cmd.replace("FLOWS", &flows.display().to_string()),
        ));
        if BACKEND_DIFFERS.contains(&cmd) {
            continue;
        }
        if let Some(f) = compare(cmd, &want, &got) {
            failures.push(f);
        }
        compared += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compared >= 15, "{compared}");
}

#[test]
fn malformed_requests_get_ovs_errors_and_the_connection_stays_up() {
    let (_sw, rundir, _g) = switch("fp-ofserver-raw");
    let mgmt = rundir.join("br0.mgmt");
    let mut s = client(&mgmt);
    let mut n = 0;
    for (label, lines) in sections() {
        let Some(label) = label.strip_prefix("raw ") else {
            continue;
        };
        if RAW_DIFFERS.contains(&label) {
            continue;
        }
        let got = exchange(&mut s, &unhex(&lines[0]));
        assert_eq!(got, lines[1..], "{label}");
        n += 1;
    }
    assert!(n >= 6, "{n}");
    // Still the same connection, still answering.
    assert_eq!(exchange(&mut s, &unhex("0405000800000009")).len(), 1);
}

#[test]
fn a_client_leaving_mid_request_leaves_the_switch_running() {
    let (mut sw, rundir, _g) = switch("fp-ofserver-leave");
    let mgmt = rundir.join("br0.mgmt");
    for cut in [3, 8, 20] {
        let mut s = client(&mgmt);
        // A port statistics request, cut short, then the connection closed.
        let req = unhex("04120018000000010004000000000000ffffffff00000000");
        s.write_all(&req[..cut]).unwrap();
        drop(s);
    }
    let mut s = client(&mgmt);
    let r = exchange(
        &mut s,
        &unhex("04120018000000020004000000000000ffffffff00000000"),
    );
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(sw.0.try_wait().unwrap().is_none(), "the switch exited");
}

#[test]
fn bridges_added_and_removed_at_run_time_get_and_lose_their_listeners() {
    let (_sw, rundir, _g) = switch("fp-ofserver-addbr");
    let ctl = |args: &[&str]| ok(ctl(&rundir, args));
    ctl(&["add-br", "br1"]);
    let mgmt = rundir.join("br1.mgmt");
    wait_for(&mgmt, true);
    wait_for(&rundir.join("br1.snoop"), true);
    let mut s = client(&mgmt);
    // A features request: br1's, with a datapath id of its own.
    let f1 = exchange(&mut s, &unhex("0405000800000003"));
    let f0 = exchange(
        &mut client(&rundir.join("br0.mgmt")),
        &unhex("0405000800000003"),
    );
    assert_eq!((f1.len(), f0.len()), (1, 1));
    assert_ne!(f1[0][16..32], f0[0][16..32], "datapath ids");
    ctl(&["del-br", "br1"]);
    wait_for(&mgmt, false);
    // Its connection is closed.
    let mut b = [0; 8];
    let t = Instant::now();
    loop {
        match s.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(_) => assert!(t.elapsed() < Duration::from_secs(5)),
        }
    }
}

#[test]
fn port_status_goes_only_to_connections_that_set_a_miss_send_len() {
    let (_sw, rundir, _g) = switch("fp-ofserver-async");
    let mgmt = rundir.join("br0.mgmt");
    let mut wants = client(&mgmt);
    let mut quiet = client(&mgmt);
    // OFPT_SET_CONFIG miss_send_len=65535, as ovn-controller's pinctrl sends it.
    assert!(exchange(&mut wants, &unhex("0409000c000000050000ffff")).is_empty());
    let o = Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .arg("ctl")
        .arg("--rundir")
        .arg(&rundir)
        .args(["add-port", "br0", "p3", "type=dummy", "ofport=3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    std::thread::sleep(Duration::from_millis(500));
    // OFPT_PORT_STATUS (OpenFlow 1.3: type 12), port 3: reason OFPPR_ADD, then OFPPR_MODIFY
    // once it is live, as OVS announces a port.
    let got = exchange(&mut wants, &[]);
    assert_eq!(got.len(), 2, "{got:?}");
    for (m, reason) in got.iter().zip(["00", "02"]) {
        assert_eq!(&m[2..4], "0c", "{got:?}");
        assert_eq!(&m[16..18], reason, "{got:?}");
        assert_eq!(&m[32..40], "00000003", "{got:?}");
    }
    assert!(exchange(&mut quiet, &[]).is_empty());
}

/// As `ovs-vswitchd`, the switch tells its connections of a port added or removed before the
/// command that did it returns: a barrier sent right after it is answered after the port
/// status, and a connection made right after it is not told of the port.
#[test]
fn port_status_is_sent_before_the_command_that_changed_the_port_returns() {
    let (_sw, rundir, _g) = switch("fp-ofserver-announce");
    let mgmt = rundir.join("br0.mgmt");
    let set_config = unhex("0409000c000000050000ffff");
    let mut early = client(&mgmt);
    assert!(exchange(&mut early, &set_config).is_empty());
    for round in 0..5 {
        let name = format!("p{}", 10 + round);
        let no = format!("{:08x}", 10 + round);
        ok(ctl(
            &rundir,
            &[
                "add-port",
                "br0",
                &name,
                "type=dummy",
                &format!("ofport={}", 10 + round),
            ],
        ));
        let mut late = client(&mgmt);
        let seen = port_statuses(&exchange(&mut early, &[]));
        assert_eq!(
            seen.first(),
            Some(&("00".to_owned(), no.clone())),
            "{name}: {seen:?}"
        );
        let told = port_statuses(&exchange(&mut late, &set_config));
        assert!(
            !told
                .iter()
                .any(|(reason, port)| reason == "00" && *port == no),
            "{name}: a connection made after add-port was told of it: {told:?}"
        );
        ok(ctl(&rundir, &["del-port", &name]));
        let seen = port_statuses(&exchange(&mut early, &[]));
        assert!(
            seen.contains(&("01".to_owned(), no.clone())),
            "{name}: no OFPPR_DELETE before the barrier: {seen:?}"
        );
    }
}
