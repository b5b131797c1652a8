//! The differential OpenFlow check: every `ovs-ofctl` script in `testdata/openflow/scripts/`
//! (`NAME.cmds`) runs against `flowpath run` (bridge br0 with dummy ports p1-p3 at ofports
//! 1-3, as `scripts/capture-ofctl-script` configures `ovs-vswitchd`), and each command prints
//! what it printed against `ovs-vswitchd` 3.1 (`NAME.ovs`, recorded by that script), once
//! transaction ids, durations, addresses and the datapath id are taken out; `sleep SECONDS`
//! waits (for timeouts to pass). An `appctl ARGS`
//! line runs the stock `ovs-appctl ARGS` against the switch's control socket instead;
//! `background ARGS` starts `ovs-ofctl ARGS` (a `monitor`) in the background, and
//! `background-log` (or `background-summary`), `background-send HEX`, `background-block`, `background-unblock` and
//! `background-stop` read what it printed since (after a barrier through it), send a message
//! on its connection, stop and start its reading, and stop it.
//! `OFCTL_SCRIPT=NAME` runs one script only. Scripts run four at a time, each on its own switch,
//! but for those with a `background` monitor, which run alone.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::ofctl::{compare, ofctl, ovs_ofctl_missing, sections, text};
use common::{each_at_once, running, scratch_dir, start_switch};

fn scripts_dir() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/openflow/scripts"
    ))
}

/// A script's `fail-mode` line (standalone without one) and its files (name, lines).
fn script_setup(cmds: &str) -> (String, Vec<(String, Vec<String>)>) {
    let mut mode = "standalone".to_owned();
    let mut files = Vec::new();
    let mut cur: Option<(String, Vec<String>)> = None;
    for line in cmds.lines() {
        if let Some(f) = cur.as_mut() {
            if line == "end" {
                files.push(cur.take().unwrap());
            } else {
                f.1.push(line.to_owned());
            }
            continue;
        }
        let s = line.trim();
        if let Some(m) = s.strip_prefix("fail-mode ") {
            mode = m.trim().to_owned();
        } else if let Some(n) = s.strip_prefix("file ") {
            cur = Some((n.trim().to_owned(), Vec::new()));
        }
    }
    (mode, files)
}

fn config(fail_mode: &str) -> String {
    let mut c = "[[bridge]]\nname = \"br0\"\n".to_owned();
    if fail_mode != "standalone" {
        c += &format!("fail-mode = \"{fail_mode}\"\n");
    }
    for i in 1..=3 {
        c += &format!("\n[[bridge.port]]\nname = \"p{i}\"\ntype = \"dummy\"\nofport = {i}\n");
    }
    c
}

/// Runs script `name` against a fresh switch: the differences found.
fn run_script(name: &str) -> Vec<String> {
    let cmds = std::fs::read_to_string(scripts_dir().join(format!("{name}.cmds"))).unwrap();
    let recorded = std::fs::read_to_string(scripts_dir().join(format!("{name}.ovs")))
        .unwrap_or_else(|_| panic!("{name}.ovs: run scripts/capture-ofctl-script {name}"));
    let (mode, files) = script_setup(&cmds);
    let (dir, _g) = scratch_dir(&format!("fp-ofctl-{name}"));
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, config(&mode)).unwrap();
    let rundir = dir.join("run");
    let _sw = start_switch(&cfg, &rundir);
    let t = std::time::Instant::now();
    while !rundir.join("br0.mgmt").exists() {
        assert!(t.elapsed().as_secs() < 10, "no br0.mgmt");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for (f, lines) in &files {
        std::fs::write(dir.join(f), lines.join("\n") + "\n").unwrap();
    }
    let mut diffs = Vec::new();
    let mut bg = Background::new(&dir, &rundir);
    for (cmd, want) in sections(&recorded) {
        let args: Vec<String> = cmd
            .split_whitespace()
            .map(|w| match files.iter().find(|(f, _)| f == w) {
                Some(_) => dir.join(w).display().to_string(),
                None => w.to_owned(),
            })
            .collect();
        let got = match args.split_first() {
            Some((first, rest)) if first == "sleep" => {
                let secs: f64 = rest.first().and_then(|s| s.parse().ok()).unwrap_or(0.0);
                std::thread::sleep(std::time::Duration::from_secs_f64(secs));
                Vec::new()
            }
            Some((first, rest)) if first.starts_with("background") => bg.step(first, rest),
            Some((first, rest)) if first == "appctl" => text(
                &Command::new("ovs-appctl")
                    .arg("-t")
                    .arg(rundir.join("flowpath.ctl"))
                    .args(rest)
                    .output()
                    .unwrap(),
            ),
            _ => text(&ofctl(&rundir, &args.join(" "))),
        };
        if std::env::var_os("OFCTL_SCRIPT_SHOW").is_some() {
            eprintln!("== {cmd}\n{}", got.join("\n"));
        }
        if let Some(d) = compare(&cmd, &want, &got) {
            diffs.push(format!("[{name}] {d}"));
        }
    }
    diffs
}

/// The one `ovs-ofctl` a script may run in the background (`ovs-ofctl monitor`), as
/// `scripts/capture-ofctl-script` runs it: detached, its output in a log, driven through its
/// control socket. Stopped when dropped.
struct Background {
    dir: PathBuf,
    rundir: PathBuf,
    seen: usize,
    running: bool,
}

impl Background {
    fn new(dir: &Path, rundir: &Path) -> Background {
        Background {
            dir: dir.to_path_buf(),
            rundir: rundir.to_path_buf(),
            seen: 0,
            running: false,
        }
    }

    fn appctl(&self, args: &[&str]) -> Vec<String> {
        text(
            &Command::new("ovs-appctl")
                .arg("-t")
                .arg(self.dir.join("bg.ctl"))
                .args(args)
                .output()
                .unwrap(),
        )
    }

    fn step(&mut self, what: &str, args: &[String]) -> Vec<String> {
        match what {
            "background" => {
                let log = std::fs::File::create(self.dir.join("bg.log")).unwrap();
                Command::new("ovs-ofctl")
                    .args(args)
                    .arg("--detach")
                    .arg("--no-chdir")
                    .arg(format!("--pidfile={}", self.dir.join("bg.pid").display()))
                    .arg(format!("--unixctl={}", self.dir.join("bg.ctl").display()))
                    .env("OVS_RUNDIR", &self.rundir)
                    .stdout(log.try_clone().unwrap())
                    .stderr(log)
                    .status()
                    .unwrap();
                self.running = true;
                self.seen = 0;
                self.new_lines()
            }
            "background-log" => {
                self.appctl(&["ofctl/barrier"]);
                self.new_lines()
                    .into_iter()
                    .filter(|l| !l.contains("OFPT_BARRIER_REPLY"))
                    .collect()
            }
            "background-summary" => {
                // Two barriers: a resumption that the first one raced has happened by the
                // second.
                self.appctl(&["ofctl/barrier"]);
                self.appctl(&["ofctl/barrier"]);
                let lines: Vec<String> = self
                    .new_lines()
                    .into_iter()
                    .filter(|l| !l.contains("OFPT_BARRIER_REPLY"))
                    .collect();
                summary(&lines)
            }
            "background-send" => {
                let mut a = vec!["ofctl/send"];
                a.extend(args.iter().map(String::as_str));
                self.appctl(&a)
            }
            "background-block" | "background-unblock" => {
                self.appctl(&[&what.replace("background-", "ofctl/")]);
                Vec::new()
            }
            "background-stop" => {
                self.stop();
                Vec::new()
            }
            other => panic!("unknown script line {other}"),
        }
    }

    fn new_lines(&mut self) -> Vec<String> {
        let all: Vec<String> = std::fs::read_to_string(self.dir.join("bg.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        let new = all[self.seen.min(all.len())..].to_vec();
        self.seen = all.len();
        new
    }

    /// Tells it to exit and waits until it has (its pidfile goes with it), so that the next
    /// one can start.
    fn stop(&mut self) {
        if std::mem::take(&mut self.running) {
            let pid = std::fs::read_to_string(self.dir.join("bg.pid")).unwrap_or_default();
            let pid = pid.trim().parse::<u32>().ok();
            self.appctl(&["exit"]);
            let t = std::time::Instant::now();
            while pid.is_some_and(running) && t.elapsed() < std::time::Duration::from_secs(5) {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}

/// A monitor's output where the point of a pause depends on socket buffers (as
/// `scripts/capture-ofctl-script`'s `background-summary`): every line but the updates that
/// add a flow and the update replies' header lines, then how many distinct flows were added.
fn summary(lines: &[String]) -> Vec<String> {
    let added: std::collections::BTreeSet<&String> = lines
        .iter()
        .filter(|l| l.starts_with(" event=ADDED "))
        .collect();
    let headers = [
        "NXST_FLOW_MONITOR reply",
        "ONFST_FLOW_MONITOR reply",
        "OFPST_FLOW_MONITOR reply",
    ];
    let mut kept: Vec<String> = lines
        .iter()
        .filter(|l| !l.starts_with(" event=ADDED ") && !headers.iter().any(|h| l.starts_with(h)))
        .cloned()
        .collect();
    kept.push(format!("{} flows added", added.len()));
    kept
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
fn ovs_ofctl_scripts_print_what_they_print_against_ovs_vswitchd() {
    if ovs_ofctl_missing() {
        eprintln!("skipped: ovs-ofctl is not installed");
        return;
    }
    let only = std::env::var("OFCTL_SCRIPT").ok();
    let mut names: Vec<String> = std::fs::read_dir(scripts_dir())
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().ok()?;
            n.strip_suffix(".cmds").map(str::to_owned)
        })
        .filter(|n| only.as_deref().is_none_or(|o| o == n))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no scripts");
    eprintln!("scripts: {names:?}");
    // Each script has its own switch; most of a script's time is that switch's start and the
    // round trips of its commands, which overlap when scripts run four at a time. Those with
    // a background `ovs-ofctl monitor` compare the order in which it printed what it sent and
    // what it received, which the load of other scripts can change: they run alone, after.
    // `OFCTL_SCRIPT_SHOW` prints one script at a time.
    let (alone, together): (Vec<String>, Vec<String>) = names.into_iter().partition(|n| {
        let cmds = std::fs::read_to_string(scripts_dir().join(format!("{n}.cmds"))).unwrap();
        std::env::var_os("OFCTL_SCRIPT_SHOW").is_some()
            || cmds
                .lines()
                .any(|l| l.trim_start().starts_with("background"))
    });
    let mut diffs: Vec<String> = each_at_once(&together, 4, |n| run_script(n)).concat();
    diffs.extend(alone.iter().flat_map(|n| run_script(n)));
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
