//! `scripts/pvp-guest-ceiling`: one short round with DPDK's vhost library as the switch and
//! one with this build's `flowpath bench pvp`, each feeding `dpdk-testpmd` as the VM. The
//! table's row must carry a rate the VM sent back past each switch, and a share its ring
//! turned away: a run in which either switch passed nothing, or whose output the script could
//! not read (a DPDK whose `testpmd` prints its statistics differently), fails. No rate is
//! checked against another. Skipped, with the reason, without root, `dpdk-testpmd` or
//! `taskset`.

use std::path::Path;
use std::process::Command;

/// Whether `tool` is in `PATH`.
fn found(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

#[test]
fn both_switches_get_frames_back_from_the_vm() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP pvp_guest_ceiling: needs root (DPDK's runtime directory)");
        return;
    }
    for t in ["dpdk-testpmd", "taskset"] {
        if !found(t) {
            eprintln!(
                "SKIP pvp_guest_ceiling: {t} is missing (Debian packages dpdk-dev, util-linux)"
            );
            return;
        }
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pvp-guest-ceiling");
    let out = Command::new(script)
        .args(["-n", "1", "-t", "1", "-b", env!("CARGO_BIN_EXE_flowpath")])
        .output()
        .expect("run scripts/pvp-guest-ceiling");
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
