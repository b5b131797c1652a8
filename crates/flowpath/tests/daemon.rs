//! `flowpath run` as the `ovs-vswitchd` process: `--detach` returns once the switch is ready,
//! the pidfile is OVS's (a second instance refuses; Debian's `ovs-appctl` with no `-t` finds
//! the switch through it), `--monitor` restarts a crashed switch but not a killed one, the log
//! file is reopened after rotation, and `exit` and SIGTERM leave no pidfile or socket behind.
//! Without OVS installed, the `ovs-appctl` checks are skipped.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::netns::wait_until;
use common::{Reap, one_port, scratch_dir};

fn flowpath(dir: &Path, extra: &[&str]) -> Command {
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, one_port("p1", "dummy", "")).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_flowpath"));
    c.arg("run")
        .arg("--config")
        .arg(&cfg)
        .arg("--rundir")
        .arg(dir)
        .args(extra);
    c
}

/// Runs `cmd` to its end (a `--detach` parent returns), within 30 s.
fn output(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("still running after 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// Debian's `ovs-appctl`, told nothing but `OVS_RUNDIR=dir`: it reads `dir/ovs-vswitchd.pid`
/// and connects to `dir/ovs-vswitchd.PID.ctl`.
fn appctl(dir: &Path, args: &[&str]) -> Output {
    Command::new("ovs-appctl")
        .env("OVS_RUNDIR", dir)
        .args(args)
        .output()
        .unwrap()
}

fn have_ovs_appctl() -> bool {
    let ok = Command::new("ovs-appctl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: ovs-appctl is not installed");
    }
    ok
}

fn read_pid(pidfile: &Path) -> Option<i32> {
    std::fs::read_to_string(pidfile).ok()?.trim().parse().ok()
}

/// Whether `pid` runs (a zombie waiting for a reaper does not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

fn parent_of(pid: i32) -> i32 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = s.rsplit_once(") ").unwrap().1;
    rest.split(' ').nth(1).unwrap().parse().unwrap()
}

fn signal(pid: i32, sig: &str) {
    let o = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "kill -{sig} {pid}");
}

/// Waits up to 30 s for `f`, or fails the test saying `what` did not happen.
fn wait_for(what: &str, f: impl FnMut() -> bool) {
    assert!(wait_until(Duration::from_secs(30), f), "timed out: {what}");
}

/// Kills a detached process on drop, should the test fail before it stops it.
struct KillOnDrop(Vec<i32>);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if alive(pid) {
                signal(pid, "KILL");
            }
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn detach_returns_once_ready_and_ovs_appctl_finds_the_switch_through_its_pidfile() {
    if !have_ovs_appctl() {
        return;
    }
    let (dir, _rm) = scratch_dir("fp-daemon-detach");
    let pidfile = dir.join("ovs-vswitchd.pid");
    let o = output(&mut flowpath(
        &dir,
        &["--detach", "--pidfile=ovs-vswitchd.pid", "-vconsole:off"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Returned: the pidfile and the control socket are there already.
    let pid = read_pid(&pidfile).expect("a pidfile with a pid");
    let _guard = KillOnDrop(vec![pid]);
    assert!(alive(pid));
    let sock = dir.join(format!("ovs-vswitchd.{pid}.ctl"));
    assert!(sock.exists(), "no {}", sock.display());
    // A new session: the detached switch is no longer in our process group.
    let o = appctl(&dir, &["dpif/show"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("br0"), "{}", text(&o.stdout));

    // A second instance on the same pidfile refuses, with OVS's words, and changes nothing.
    let o = output(&mut flowpath(
        &dir,
        &["--detach", "--pidfile=ovs-vswitchd.pid", "-vconsole:off"],
    ));
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "{}: already running as pid {pid}, aborting",
            pidfile.display()
        )),
        "{err}"
    );
    assert_eq!(read_pid(&pidfile), Some(pid));
    assert!(appctl(&dir, &["version"]).status.success());

    // `exit`: the switch goes, and so do its pidfile and socket.
    assert!(appctl(&dir, &["exit"]).status.success());
    wait_for("the switch to exit", || !alive(pid));
    wait_for("the pidfile to go", || !pidfile.exists());
    assert!(!sock.exists());
}

#[test]
fn a_switch_that_fails_to_start_fails_the_detaching_command() {
    let (dir, _rm) = scratch_dir("fp-daemon-fail");
    std::fs::write(dir.join("bad.toml"), "[[bridge]]\nname = 7\n").unwrap();
    let o = output(
        Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .args(["run", "--detach", "--pidfile", "--config"])
            .arg(dir.join("bad.toml"))
            .arg("--rundir")
            .arg(&dir),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("bad.toml"), "{}", text(&o.stderr));
    assert!(!dir.join("flowpath.pid").exists());
}

#[test]
fn monitor_restarts_a_crashed_switch_but_not_a_killed_one() {
    let (dir, _rm) = scratch_dir("fp-daemon-monitor");
    let pidfile = dir.join("flowpath.pid");
    let log = dir.join("flowpath.log");
    let log_arg = format!("--log-file={}", log.display());
    let o = output(&mut flowpath(
        &dir,
        &[
            "--detach",
            "--monitor",
            "--pidfile",
            &log_arg,
            "-vconsole:off",
        ],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let first = read_pid(&pidfile).unwrap();
    let monitor = parent_of(first);
    let mut guard = KillOnDrop(vec![first, monitor]);
    assert!(alive(monitor) && monitor != 1);

    // A crash: the monitor starts a new switch, which takes the stale pidfile over.
    signal(first, "SEGV");
    wait_for("a restarted switch", || {
        read_pid(&pidfile)
            .is_some_and(|p| p != first && dir.join(format!("flowpath.{p}.ctl")).exists())
    });
    let second = read_pid(&pidfile).unwrap();
    guard.0.push(second);
    assert_eq!(parent_of(second), monitor);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains(&format!(
            "|daemon_unix|ERR|1 crashes: pid {first} died, killed (Segmentation fault)"
        )),
        "{logged}"
    );
    assert!(logged.contains(", restarting\n"), "{logged}");

    // The restarted switch binds its socket just before it tells the monitor it is ready; a
    // switch killed in between counts as a failed restart, so let the monitor settle back
    // into waiting for it (where the kernel shows it, /proc/PID/wchan).
    wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(format!("/proc/{monitor}/wchan")).is_ok_and(|w| w == "do_wait")
    });
    // SIGKILL is an operator's decision, not a crash: the monitor goes too.
    signal(second, "KILL");
    wait_for("the monitor to exit", || !alive(monitor));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains(&format!(
            "|daemon_unix|INFO|pid {second} died, killed (Killed), exiting"
        )),
        "{logged}"
    );
}

#[test]
fn vlog_reopen_after_rotation_writes_a_new_file_and_sigterm_cleans_up() {
    let (dir, _rm) = scratch_dir("fp-daemon-reopen");
    let log = dir.join("sw.log");
    let log_arg = format!("--log-file={}", log.display());
    let mut sw = Reap(
        flowpath(
            &dir,
            &[
                "--pidfile=sw.pid",
                "--unixctl=sw.ctl",
                &log_arg,
                "-vconsole:off",
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let sock = dir.join("sw.ctl");
    wait_for("the control socket", || sock.exists());
    assert_eq!(read_pid(&dir.join("sw.pid")), Some(sw.0.id() as i32));
    let first = std::fs::read_to_string(&log).unwrap();
    assert!(
        first.contains(&format!("|vlog|INFO|opened log file {}\n", log.display())),
        "{first}"
    );
    // logrotate's way: rename, then ask for a reopen.
    std::fs::rename(&log, dir.join("sw.log.1")).unwrap();
    let o = Command::new("ovs-appctl")
        .arg("-t")
        .arg(&sock)
        .arg("vlog/reopen")
        .output();
    let o = match o {
        Ok(o) => o,
        // Without OVS, through `flowpath ctl`, which speaks the same protocol.
        Err(_) => {
            std::os::unix::fs::symlink(&sock, dir.join("flowpath.ctl")).unwrap();
            Command::new(env!("CARGO_BIN_EXE_flowpath"))
                .arg("ctl")
                .arg("--rundir")
                .arg(&dir)
                .arg("vlog/reopen")
                .output()
                .unwrap()
        }
    };
    assert!(o.status.success(), "{}", text(&o.stderr));
    let old = std::fs::read_to_string(dir.join("sw.log.1")).unwrap();
    assert!(old.ends_with("|vlog|INFO|closing log file\n"), "{old}");
    let new = std::fs::read_to_string(&log).unwrap();
    assert!(
        new.contains(&format!("|vlog|INFO|opened log file {}\n", log.display())),
        "{new}"
    );

    signal(sw.0.id() as i32, "TERM");
    let status = sw.wait(Duration::from_secs(20)).unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!dir.join("sw.pid").exists());
    assert!(!sock.exists());
}

#[test]
fn the_pidfile_locks_out_a_second_foreground_instance() {
    let (dir, _rm) = scratch_dir("fp-daemon-second");
    let sw = Reap(
        flowpath(&dir, &["--pidfile", "-vconsole:off"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = sw.0.id();
    let pidfile: PathBuf = dir.join("flowpath.pid");
    wait_for("the control socket", || {
        dir.join(format!("flowpath.{pid}.ctl")).exists()
    });
    // `flowpath ctl` finds the socket through the pidfile, as ovs-appctl -t flowpath would.
    let o = Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .args(["ctl", "--rundir"])
        .arg(&dir)
        .arg("version")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("flowpath "),
        "{}",
        text(&o.stdout)
    );
    let o = output(&mut flowpath(&dir, &["--pidfile"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains(&format!(
            "{}: already running as pid {pid}, aborting",
            pidfile.display()
        )),
        "{}",
        text(&o.stderr)
    );
    // --overwrite-pidfile starts anyway (as OVS's), and the pidfile becomes the newcomer's
    // (its own run directory keeps its bridges' OpenFlow sockets apart).
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let pidfile_arg = format!("--pidfile={}", pidfile.display());
    let mut second = Reap(
        flowpath(
            &other,
            &[&pidfile_arg, "--overwrite-pidfile", "-vconsole:off"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let newcomer = second.0.id() as i32;
    wait_for("the newcomer's control socket", || {
        dir.join(format!("flowpath.{newcomer}.ctl")).exists()
    });
    assert_eq!(read_pid(&pidfile), Some(newcomer));
    signal(newcomer, "TERM");
    assert!(second.wait(Duration::from_secs(20)).unwrap().success());
}

/// OVSDB mode is ovs-vswitchd's: with `--ovsdb` and no target it connects to
/// `$OVS_RUNDIR/db.sock`; `--pidfile` alone is `ovs-vswitchd.pid` there, `--log-file` alone
/// `$OVS_LOGDIR/ovs-vswitchd.log`; Debian's `ovs-vsctl` and `ovs-appctl` (no `-t`) need nothing
/// else to find it.
#[test]
fn ovsdb_mode_takes_ovs_vswitchd_file_names_and_database() {
    use common::ovsdb::{Sandbox, Switch, missing, words};
    if let Some(why) = missing(Switch::Flowpath) {
        eprintln!("skipped: {why}");
        return;
    }
    let sb = Sandbox::new("fp-daemon-ovsdb", Switch::Flowpath);
    let dir = sb.dir.clone();
    let o = output(
        Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .env("OVS_RUNDIR", &dir)
            .env("OVS_LOGDIR", &dir)
            .args(["run", "--ovsdb", "--enable-dummy", "--detach", "--pidfile"])
            .args(["--log-file", "-vconsole:off"]),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let pidfile = dir.join("ovs-vswitchd.pid");
    let pid = read_pid(&pidfile).expect("ovs-vswitchd.pid with a pid");
    let _guard = KillOnDrop(vec![pid]);
    assert!(dir.join(format!("ovs-vswitchd.{pid}.ctl")).exists());
    let (rc, _, err) = sb.vsctl(&words(common::ovsdb::ADD_BR0), 10);
    assert_eq!(rc, 0, "add-br did not complete: {err}");
    let o = appctl(&dir, &["dpif/show"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("br0"), "{}", text(&o.stdout));
    let log = std::fs::read_to_string(dir.join("ovs-vswitchd.log")).unwrap_or_default();
    assert!(log.contains("opened log file"), "{log}");
    assert!(appctl(&dir, &["exit"]).status.success());
    wait_for("the switch to exit", || !alive(pid));
    wait_for("the pidfile to go", || !pidfile.exists());
}
