//! `flowpath top` against a running switch: a replay source forwarding to a sink, two screens
//! half a second apart written to a pipe, and the view's end when the switch goes away.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{Reap, replay_to_sink, scratch_dir, start_switch};

/// A switch forwarding the 8-packet capture from replay port p0, endlessly, to sink p1.
fn forwarding_switch(dir: &Path) -> (Reap, PathBuf) {
    let rundir = dir.join("run");
    (start_switch(&replay_to_sink(dir), &rundir), rundir)
}

fn top(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .arg("top")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The figure in column `col` (whitespace-separated) of the line starting with `name `.
fn column<'a>(block: &'a str, name: &str, col: usize) -> &'a str {
    let line = block
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} row in:\n{block}"));
    line.split_whitespace().nth(col).unwrap()
}

#[test]
fn two_screens_show_the_ports_and_their_rates() {
    let (dir, _rm) = scratch_dir("flowpath-top");
    let (_switch, rundir) = forwarding_switch(&dir);
    let o = top(&[
        "-n",
        "2",
        "--interval",
        "0.5",
        "--rundir",
        rundir.to_str().unwrap(),
    ]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Not a terminal: plain blocks, no escapes, separated by a line of dashes.
    assert!(!text.contains('\x1b'), "{text:?}");
    let blocks: Vec<&str> = text.split(&format!("{}\n", "-".repeat(80))).collect();
    assert_eq!(blocks.len(), 2, "{text}");
    for b in blocks {
        assert!(b.starts_with("flowpath top  up "), "{b}");
        assert!(b.contains("1 PMD "), "{b}");
        assert!(b.lines().all(|l| l.chars().count() <= 80), "{b}");
        // p0 receives and p1 sends, at a rate; every packet goes out.
        assert_ne!(column(b, "p0", 1), "0", "{b}");
        assert_ne!(column(b, "p1", 2), "0", "{b}");
        assert!(b.contains("drops/s: none"), "{b}");
    }
}

#[test]
fn the_view_ends_when_the_switch_goes_away() {
    let (dir, _rm) = scratch_dir("flowpath-top-gone");
    let (mut switch, rundir) = forwarding_switch(&dir);
    let sock = rundir.join("flowpath.ctl");
    // -t names the socket itself, as ovs-appctl's does; --once draws one screen.
    let o = top(&["-t", sock.to_str().unwrap(), "--once", "--interval", "0.1"]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        String::from_utf8(o.stdout)
            .unwrap()
            .matches("flowpath top")
            .count(),
        1
    );

    let view = Reap(
        Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .args(["top", "--interval", "0.1", "-t", sock.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(500));
    let _ = switch.0.kill();
    let _ = switch.0.wait();
    let mut view = view;
    let status = view.wait(Duration::from_secs(10)).unwrap();
    let err = view.stderr();
    assert!(!status.success(), "{err}");
    assert!(err.contains("went away"), "{err}");

    // No switch at all: said so, as `flowpath ctl` says it.
    let o = top(&["--rundir", rundir.to_str().unwrap(), "--once"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("is flowpath running?"), "{err}");
}
