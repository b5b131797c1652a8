//! `flowpath run` with OpenFlow controllers, as `ovs-vswitchd` runs them: a controller that
//! goes away and comes back is reconnected with OVS's backoff, a silent one is probed and
//! dropped at OVS's interval, the fail modes give the flow tables and the forwarding OVS's give
//! (fail open included, seen through `ofproto/trace` on dummy ports), settings change at run
//! time, Unix-domain controllers are confined to the run directory with OVS's error, and the
//! bridges' sockets are owner-only. The controllers here are minimal ones written in the test:
//! they speak the handshake and what each check needs.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::netns::wait_until;
use common::ofctl::{ovs_ofctl_missing, read_msg};
use common::{Reap, RmDir, scratch_dir};

const PORTS: &str = r#"
[[bridge.port]]
name = "p1"
type = "dummy"
ofport = 1

[[bridge.port]]
name = "p2"
type = "dummy"
ofport = 2
"#;

/// A switch whose stderr (its log) goes to a file.
struct Switch {
    _proc: Reap,
    rundir: PathBuf,
    log: PathBuf,
    _dir: RmDir,
}

impl Switch {
    /// `flowpath run` with br0 configured by `bridge` (TOML keys of `[[bridge]]`) and ports
    /// p1, p2, once br0's listener is up.
    fn start(tag: &str, bridge: &str) -> Switch {
        let (dir, guard) = scratch_dir(tag);
        let cfg = dir.join("sw.toml");
        std::fs::write(
            &cfg,
            format!("[[bridge]]\nname = \"br0\"\n{bridge}\n{PORTS}"),
        )
        .unwrap();
        let rundir = dir.join("run");
        let log = dir.join("log");
        let child: Child = Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .args(["run", "--config"])
            .arg(&cfg)
            .arg("--rundir")
            .arg(&rundir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let sw = Switch {
            _proc: Reap(child),
            rundir,
            log,
            _dir: guard,
        };
        assert!(
            wait_until(Duration::from_secs(20), || sw
                .rundir
                .join("br0.mgmt")
                .exists()),
            "no br0.mgmt: {}",
            sw.log()
        );
        sw
    }

    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .arg("ctl")
            .arg("--rundir")
            .arg(&self.rundir)
            .args(args)
            .output()
            .unwrap()
    }

    fn ctl_ok(&self, args: &[&str]) -> String {
        let o = self.ctl(args);
        assert!(o.status.success(), "{args:?}: {o:?}");
        String::from_utf8(o.stdout).unwrap()
    }

    /// `ctl` that must fail: its error text.
    fn ctl_err(&self, args: &[&str]) -> String {
        let o = self.ctl(args);
        assert!(!o.status.success(), "{args:?}: {o:?}");
        String::from_utf8(o.stderr).unwrap()
    }

    /// The flows of br0, as `flowpath ofctl dump-flows` prints them, without statistics.
    fn flows(&self) -> Vec<String> {
        let o = Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .args(["ofctl", "--rundir"])
            .arg(&self.rundir)
            .args(["dump-flows", "br0"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .filter(|l| l.contains("actions="))
            .map(|l| {
                l.split(", ")
                    .filter(|f| {
                        ![
                            "duration=",
                            "n_packets=",
                            "n_bytes=",
                            "idle_age=",
                            "cookie=",
                            "table=",
                        ]
                        .iter()
                        .any(|p| f.trim().starts_with(p))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
                    .trim()
                    .to_owned()
            })
            .collect()
    }

    /// `ofproto/trace` of a broadcast from p1: its final datapath actions.
    fn forwarding(&self) -> String {
        let t = self.trace();
        t.lines()
            .find_map(|l| l.strip_prefix("Datapath actions: "))
            .unwrap_or_else(|| panic!("no datapath actions: {t}"))
            .to_owned()
    }

    fn trace(&self) -> String {
        self.ctl_ok(&[
            "ofproto/trace",
            "br0",
            "in_port=1,dl_src=00:00:00:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff",
        ])
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn show(&self) -> String {
        self.ctl_ok(&["controller/show", "br0"])
    }
}

/// A local TCP port nothing listens on (for now).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An OpenFlow 1.3 message with no body.
fn msg13(msg_type: u8, xid: u32) -> Vec<u8> {
    let mut m = vec![4, msg_type, 0, 8];
    m.extend_from_slice(&xid.to_be_bytes());
    m
}

const HELLO: u8 = 0;
const ECHO_REQUEST: u8 = 2;
const ECHO_REPLY: u8 = 3;
const BARRIER_REQUEST: u8 = 20;
const BARRIER_REPLY: u8 = 21;

/// Accepts the switch's connection (within `limit`) and exchanges hellos, as a controller
/// that speaks OpenFlow 1.3.
fn accept_switch(l: &TcpListener, limit: Duration) -> TcpStream {
    l.set_nonblocking(true).unwrap();
    let t = Instant::now();
    let mut s = loop {
        match l.accept() {
            Ok((s, _)) => break s,
            Err(_) if t.elapsed() < limit => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("the switch did not connect within {limit:?}: {e}"),
        }
    };
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(&msg13(HELLO, 1)).unwrap();
    let hello = read_msg(&mut s).unwrap();
    assert_eq!(hello[1], HELLO, "{hello:?}");
    s
}

#[test]
fn a_controller_that_goes_away_and_comes_back_is_reconnected_with_backoff() {
    let port = free_port();
    let sw = Switch::start(
        "fp-ctrl-backoff",
        &format!("controller = [\"tcp:127.0.0.1:{port}\"]\nmax-backoff = 4000\n"),
    );
    // Nothing listens: the switch backs off, and says why.
    assert!(
        wait_until(Duration::from_secs(5), || sw.show().contains("last_error")),
        "{}",
        sw.show()
    );
    let show = sw.show();
    assert!(show.contains("state=BACKOFF"), "{show}");
    assert!(show.contains("is_connected        : false"), "{show}");
    assert!(show.contains("role                : []"), "{show}");
    assert!(show.contains("last_error=\"Connection refused\""), "{show}");
    assert!(show.contains(&format!("target              : \"tcp:127.0.0.1:{port}\"")));
    // The controller comes up: the switch connects within its longest wait.
    let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let s = accept_switch(&l, Duration::from_secs(6));
    assert!(
        wait_until(Duration::from_secs(2), || sw
            .show()
            .contains("is_connected        : true")),
        "{}",
        sw.show()
    );
    assert!(sw.show().contains("state=ACTIVE"), "{}", sw.show());
    assert!(
        sw.show().contains("role                : other"),
        "{}",
        sw.show()
    );
    // It goes away after longer than the last wait (4 s): the switch tries again after 1 s;
    // then each time it comes back it is dropped at once, and the waits double up to
    // max_backoff (4 s).
    std::thread::sleep(Duration::from_millis(4500));
    drop(s);
    let gone = Instant::now();
    let mut times = Vec::new();
    for _ in 0..4 {
        let s = accept_switch(&l, Duration::from_secs(10));
        times.push(Instant::now());
        drop(s);
    }
    let first = (times[0] - gone).as_secs_f64();
    assert!(first > 0.7 && first < 1.8, "first wait {first} s");
    let gaps: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    for (gap, want) in gaps.iter().zip([2.0, 4.0, 4.0]) {
        assert!(
            *gap > want - 0.5 && *gap < want + 1.0,
            "waits {gaps:?}, expected about 2, 4, 4 s"
        );
    }
}

#[test]
fn a_silent_controller_is_probed_then_dropped_at_ovs_interval() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    // OVS's default probe interval, 5 s.
    let sw = Switch::start(
        "fp-ctrl-probe",
        &format!("controller = [\"tcp:127.0.0.1:{port}\"]\n"),
    );
    let mut s = accept_switch(&l, Duration::from_secs(5));
    let t = Instant::now();
    let echo = read_msg(&mut s).unwrap();
    let probed = t.elapsed().as_secs_f64();
    assert_eq!(echo[1], ECHO_REQUEST, "{echo:?}");
    assert!(probed > 4.5 && probed < 6.5, "probed after {probed} s");
    // Not answered: the connection goes after as long again.
    let mut b = [0; 64];
    let n = s.read(&mut b).unwrap_or(0);
    let dropped = t.elapsed().as_secs_f64();
    assert_eq!(n, 0, "expected the connection to end: {:?}", &b[..n]);
    assert!(dropped > 9.5 && dropped < 11.5, "dropped after {dropped} s");
    assert!(
        sw.log().is_empty() || !sw.log().contains("panicked"),
        "{}",
        sw.log()
    );
}

#[test]
fn a_controller_that_answers_probes_stays_connected() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let sw = Switch::start(
        "fp-ctrl-echo",
        &format!("controller = [\"tcp:127.0.0.1:{port}\"]\ninactivity-probe = 1000\n"),
    );
    let mut s = accept_switch(&l, Duration::from_secs(5));
    let t = Instant::now();
    let mut echoes = 0;
    while t.elapsed() < Duration::from_secs(4) {
        let m = read_msg(&mut s).unwrap();
        assert_eq!(m[1], ECHO_REQUEST, "{m:?}");
        let mut reply = m.clone();
        reply[1] = ECHO_REPLY;
        s.write_all(&reply).unwrap();
        echoes += 1;
    }
    assert!((2..=5).contains(&echoes), "{echoes} probes in 4 s");
    assert!(
        sw.show().contains("is_connected        : true"),
        "{}",
        sw.show()
    );
}

#[test]
fn secure_mode_drops_table_misses_and_adds_no_flow() {
    let sw = Switch::start("fp-ctrl-secure", "fail-mode = \"secure\"\n");
    assert_eq!(sw.flows(), Vec::<String>::new());
    assert_eq!(sw.forwarding(), "drop");
    assert_eq!(sw.ctl_ok(&["get-fail-mode", "br0"]), "secure\n");
    // With a controller that is not there, still nothing: secure never fails open.
    let port = free_port();
    let target = format!("tcp:127.0.0.1:{port}");
    sw.ctl_ok(&["set-controller", "br0", "--inactivity-probe=1000", &target]);
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(sw.flows(), Vec::<String>::new());
    assert_eq!(sw.forwarding(), "drop");
}

#[test]
fn standalone_mode_switches_alone_without_controllers() {
    let sw = Switch::start("fp-ctrl-standalone", "");
    assert_eq!(sw.flows(), ["priority=0 actions=NORMAL"]);
    assert_eq!(sw.forwarding(), "100,2");
    assert_eq!(sw.ctl_ok(&["get-fail-mode", "br0"]), "");
}

#[test]
fn standalone_mode_fails_open_when_its_controllers_are_gone_and_recovers() {
    let port = free_port();
    let sw = Switch::start(
        "fp-ctrl-failopen",
        &format!(
            "controller = [\"tcp:127.0.0.1:{port}\"]\ninactivity-probe = 1000\n\
             flows = [\"priority=5,actions=drop\"]\n"
        ),
    );
    // Controllers configured: no NORMAL flow; the configured flow decides.
    assert_eq!(sw.flows(), ["priority=5 actions=drop"]);
    assert_eq!(sw.forwarding(), "drop");
    // Three probe intervals (3 s) without a controller: the flows are flushed and every
    // packet is switched as NORMAL by a rule dump-flows does not show.
    assert!(
        wait_until(Duration::from_secs(6), || sw.forwarding() == "100,2"),
        "{}",
        sw.trace()
    );
    assert!(
        sw.trace().contains(" 0. priority 15790320"),
        "{}",
        sw.trace()
    );
    assert_eq!(sw.flows(), Vec::<String>::new());
    assert!(sw.log().contains("failing open"), "{}", sw.log());
    assert!(sw.show().contains("failing open"), "{}", sw.show());
    // A controller connects: connected is not enough, it must be admitted (send something
    // beyond the handshake).
    let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let mut s = accept_switch(&l, Duration::from_secs(6));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(sw.forwarding(), "100,2");
    s.write_all(&msg13(BARRIER_REQUEST, 7)).unwrap();
    loop {
        let m = read_msg(&mut s).unwrap();
        if m[1] == BARRIER_REPLY {
            break;
        }
        if m[1] == ECHO_REQUEST {
            let mut r = m.clone();
            r[1] = ECHO_REPLY;
            s.write_all(&r).unwrap();
        }
    }
    assert!(
        wait_until(Duration::from_secs(2), || sw.forwarding() == "drop"),
        "{}",
        sw.trace()
    );
    assert!(
        sw.log().contains("No longer in fail-open mode"),
        "{}",
        sw.log()
    );
    assert_eq!(sw.flows(), Vec::<String>::new());
}

#[test]
fn settings_change_at_run_time_with_ovs_flushes() {
    let sw = Switch::start("fp-ctrl-runtime", "");
    assert_eq!(sw.flows(), ["priority=0 actions=NORMAL"]);
    let of = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .args(["ofctl", "--rundir"])
            .arg(&sw.rundir)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    };
    of(&["add-flow", "br0", "priority=9,in_port=2,actions=drop"]);
    // A new fail mode on a bridge without controllers flushes every flow.
    sw.ctl_ok(&["set-fail-mode", "br0", "secure"]);
    assert_eq!(sw.flows(), Vec::<String>::new());
    assert_eq!(sw.forwarding(), "drop");
    of(&["add-flow", "br0", "priority=9,in_port=2,actions=drop"]);
    // The same mode again changes nothing.
    sw.ctl_ok(&["set-fail-mode", "br0", "secure"]);
    assert_eq!(sw.flows(), ["priority=9,in_port=2 actions=drop"]);
    sw.ctl_ok(&["del-fail-mode", "br0"]);
    assert_eq!(sw.flows(), ["priority=0 actions=NORMAL"]);
    assert_eq!(
        sw.ctl_err(&["set-fail-mode", "br0", "open"]),
        "fail-mode must be \"standalone\" or \"secure\"\n\
         flowpath: "
            .to_owned()
            + &format!(
                "{}: server returned an error\n",
                sw.rundir.join("flowpath.ctl").display()
            )
    );
    // The first controller flushes; so does the last one going.
    let port = free_port();
    let target = format!("tcp:127.0.0.1:{port}");
    of(&["add-flow", "br0", "priority=9,in_port=2,actions=drop"]);
    sw.ctl_ok(&["set-controller", "br0", &target, "ptcp:0:127.0.0.1"]);
    assert_eq!(sw.flows(), Vec::<String>::new());
    assert_eq!(
        sw.ctl_ok(&["get-controller", "br0"]),
        format!("ptcp:0:127.0.0.1\n{target}\n")
    );
    of(&["add-flow", "br0", "priority=9,in_port=2,actions=drop"]);
    // Another set of controllers, still some: no flush.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let target2 = format!("tcp:127.0.0.1:{}", l.local_addr().unwrap().port());
    sw.ctl_ok(&["set-controller", "br0", &target2]);
    assert_eq!(sw.flows(), ["priority=9,in_port=2 actions=drop"]);
    let _s = accept_switch(&l, Duration::from_secs(3));
    sw.ctl_ok(&["del-controller", "br0"]);
    assert_eq!(sw.flows(), ["priority=0 actions=NORMAL"]);
    assert_eq!(sw.ctl_ok(&["get-controller", "br0"]), "");
    // Bad targets and bridges get ovs-vsctl's words.
    assert!(
        sw.ctl_err(&["set-controller", "br0", "udp:1.2.3.4"])
            .starts_with("target type \"udp:1.2.3.4\" is possibly erroneous\n")
    );
    assert!(
        sw.ctl_err(&["get-controller", "br9"])
            .starts_with("no bridge named br9\n"),
        "{}",
        sw.ctl_err(&["get-controller", "br9"])
    );
    assert!(
        sw.ctl_err(&["set-protocols", "br0", "OpenFlow16"])
            .starts_with("constraint violation: OpenFlow16 is not one of the allowed values")
    );
}

#[test]
fn protocols_apply_to_every_connection_of_the_bridge() {
    if ovs_ofctl_missing() {
        eprintln!("skipped: ovs-ofctl is not installed");
        return;
    }
    let sw = Switch::start("fp-ctrl-protocols", "protocols = [\"OpenFlow13\"]\n");
    let ofctl = |args: &[&str]| {
        Command::new("ovs-ofctl")
            .env("OVS_RUNDIR", &sw.rundir)
            .args(args)
            .output()
            .unwrap()
    };
    let o = ofctl(&["show", "br0"]);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("version negotiation failed"),
        "{o:?}"
    );
    assert!(ofctl(&["-O", "OpenFlow13", "show", "br0"]).status.success());
    assert_eq!(sw.ctl_ok(&["get-protocols", "br0"]), "OpenFlow13\n");
    // Changed at run time: the listener takes the new versions.
    sw.ctl_ok(&["set-protocols", "br0", "OpenFlow10", "OpenFlow13"]);
    assert!(wait_until(Duration::from_secs(2), || ofctl(&[
        "show", "br0"
    ])
    .status
    .success()));
    sw.ctl_ok(&["del-protocols", "br0"]);
    assert!(wait_until(Duration::from_secs(2), || ofctl(&[
        "-O",
        "OpenFlow15",
        "show",
        "br0"
    ])
    .status
    .success()));
}

#[test]
fn unix_controllers_are_confined_to_the_run_directory() {
    let sw = Switch::start(
        "fp-ctrl-confine",
        "controller = [\"punix:/tmp/fp-ctrl-elsewhere.sock\", \"unix:/tmp/fp-ctrl-x.sock\"]\n",
    );
    let rundir = sw.rundir.display().to_string();
    assert!(
        wait_until(Duration::from_secs(3), || sw
            .log()
            .contains("Not connecting")),
        "{}",
        sw.log()
    );
    let log = sw.log();
    assert!(
        log.contains(&format!(
            "|bridge|ERR|bridge br0: Not adding Unix domain socket controller \
             \"punix:/tmp/fp-ctrl-elsewhere.sock\" due to possibility of overwriting local \
             files. Instead, specify path in permitted format \"punix:{rundir}/br0.*\" or \
             connect to \"unix:{rundir}/br0.mgmt\" (which is always available without special \
             configuration)."
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "|bridge|ERR|bridge br0: Not connecting to socket controller \
             \"unix:/tmp/fp-ctrl-x.sock\" due to possibility for remote exploit.  Instead, \
             specify socket in permitted directory \"unix:{rundir}/\" or connect to \
             \"unix:{rundir}/br0.mgmt\" (which is always available without special \
             configuration)."
        )),
        "{log}"
    );
    assert!(!Path::new("/tmp/fp-ctrl-elsewhere.sock").exists());
    assert_eq!(sw.show(), "");
    // Refused targets count as no controller: the bridge keeps its NORMAL flow.
    assert_eq!(sw.flows(), ["priority=0 actions=NORMAL"]);
    // A listener in the permitted form is made, owner-only, and serves.
    let path = format!("{rundir}/br0.controller");
    sw.ctl_ok(&["set-controller", "br0", &format!("punix:{path}")]);
    assert!(wait_until(Duration::from_secs(3), || Path::new(&path).exists()));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
    if !ovs_ofctl_missing() {
        let o = Command::new("ovs-ofctl")
            .args(["show", &format!("unix:{path}")])
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    // Listed, with nothing to say of it (OVS has no connection state for a listener), and
    // a listener is no controller: the NORMAL flow stays.
    assert!(
        sw.show()
            .contains(&format!("target              : \"punix:{path}\"")),
        "{}",
        sw.show()
    );
    assert_eq!(sw.flows(), ["priority=0 actions=NORMAL"]);
}

#[test]
fn the_bridge_sockets_are_owner_only() {
    let sw = Switch::start("fp-ctrl-perms", "");
    for f in ["br0.mgmt", "br0.snoop", "flowpath.ctl"] {
        // The control socket and the snoop listener may come a moment after br0.mgmt.
        assert!(
            wait_until(Duration::from_secs(20), || sw.rundir.join(f).exists()),
            "no {f}"
        );
        let m = std::fs::metadata(sw.rundir.join(f)).unwrap();
        assert_eq!(
            m.permissions().mode() & 0o077,
            0,
            "{f}: {:o}",
            m.permissions().mode()
        );
    }
}
