//! The soak test: `scripts/soak 5` runs this build for five minutes with cached traffic on
//! vhost-user, AF_PACKET, AF_XDP, TAP, a conntrack NAT path and a VXLAN tunnel to the kernel's
//! VTEP while a churn driver adds and deletes a port, replaces an OpenFlow table, deletes the
//! megaflows, floods conntrack past a zone's limit, kills a VM mid-burst and hammers the
//! control socket; the script checks that nothing crashed, the cached streams lost nothing,
//! memory and descriptors stayed bounded, every port's counters add up and the control socket
//! always answered in time (docs/soak.md). Skipped, with the reason, without root or python3.

mod common;

use std::path::Path;
use std::process::Command;

use common::netns;

#[test]
fn five_minutes_of_churn_beside_cached_traffic() {
    let test = "five_minutes_of_churn_beside_cached_traffic";
    if !netns::is_root() {
        eprintln!("SKIP {test}: needs root (network namespace, veth, tap)");
        return;
    }
    if !netns::in_path("python3") {
        eprintln!("SKIP {test}: needs python3 (the control-socket prober)");
        return;
    }
    let _slot = netns::slot();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/soak");
    // A debug build, on a CI machine of 2 cores: the cached streams at 1000 packets per
    // second each. The control socket's latency is a timing, which a test suite on shared
    // cores must not judge: here only an answer slower than 2 s (a hang) fails; the report
    // gives the latencies, and the release build's 100 ms bound is what docs/soak.md's runs
    // check.
    let out = Command::new(script)
        .args([
            "5",
            "-b",
            netns::bin(),
            "--rate",
            "1000",
            "--ctl-limit",
            "2000",
        ])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{report}\n{log}");
    assert!(report.lines().any(|l| l == "result: PASS"), "{report}");
    assert!(!report.contains("FAIL"), "{report}");
}
