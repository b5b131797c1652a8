//! `scripts/pvp-guest-ceiling`: one short round with DPDK's vhost library as the switch and
//! one with this build's `flowpath bench pvp`, each feeding `dpdk-testpmd` as the VM. The
//! table's row must carry a rate the VM sent back past each switch, and a share its ring
//! turned away: a run in which either switch passed nothing, or whose output the script could
//! not read (a DPDK whose `testpmd` prints its statistics differently), fails. No rate is
//! checked against another. With a flowpath binary that runs nothing the script must fail and
//! say which switch gave no rate. Skipped, with the reason, without root, `dpdk-testpmd` or
//! `taskset`.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// One run at a time: each pins its testpmds to both cores.
static ONE: Mutex<()> = Mutex::new(());

/// Whether `tool` is in `PATH`.
fn found(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Whether the script can run here (else a SKIP line says why).
fn can_run() -> bool {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP pvp_guest_ceiling: needs root (DPDK's runtime directory)");
        return false;
    }
    for t in ["dpdk-testpmd", "taskset"] {
        if !found(t) {
            eprintln!(
                "SKIP pvp_guest_ceiling: {t} is missing (Debian packages dpdk-dev, util-linux)"
            );
            return false;
        }
    }
    true
}

/// One one-second round of the script with `flowpath` as the flowpath binary.
fn one_round(flowpath: &std::ffi::OsStr) -> std::process::Output {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pvp-guest-ceiling");
    Command::new(script)
        .args(["-n", "1", "-t", "1", "-b"])
        .arg(flowpath)
        .output()
        .expect("run scripts/pvp-guest-ceiling")
}

/// A flowpath that runs nothing (`true`): the script must fail and say which switch gave no
/// rate, not stop without a word (as it did when `flowpath bench host` failed under
/// `pipefail`) nor print a bare '-' and succeed.
#[test]
fn a_switch_without_a_rate_fails_the_run_and_says_so() {
    if !can_run() {
        return;
    }
    let Some(nothing) = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("true"))
            .find(|f| f.is_file())
    }) else {
        eprintln!("SKIP pvp_guest_ceiling: no `true` in PATH");
        return;
    };
    let out = one_round(nothing.as_os_str());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "succeeded without flowpath's rate:\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("flowpath's run gave no rate"),
        "no word of the missing rate:\n{stdout}\n{stderr}"
    );
}

#[test]
fn both_switches_get_frames_back_from_the_vm() {
    if !can_run() {
        return;
    }
    let out = one_round(env!("CARGO_BIN_EXE_flowpath").as_ref());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the script failed:\n{stdout}\n{stderr}"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| 1 |"))
        .map(|l| {
            l.split('|')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        rows.len(),
        1,
        "one round's row expected:\n{stdout}\n{stderr}"
    );
    let row = &rows[0];
    // round, line round trip, dpdk-vhost's rate and share, flowpath's rate and share.
    assert_eq!(row.len(), 6, "{stdout}");
    for (what, cell) in [("dpdk-vhost", row[2]), ("flowpath", row[4])] {
        let mpps: f64 = cell
            .parse()
            .unwrap_or_else(|_| panic!("no rate for {what}: {cell:?}\n{stdout}\n{stderr}"));
        assert!(
            mpps > 0.0,
            "the VM sent nothing back past {what}:\n{stdout}"
        );
    }
    for cell in [row[3], row[5]] {
        let share = cell.trim_end_matches(" %");
        assert!(
            share.parse::<u64>().is_ok(),
            "no share turned away: {cell:?}\n{stdout}"
        );
    }
}
