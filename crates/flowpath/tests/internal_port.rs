//! The bridge's internal port as a TAP device: a host behind an `afpacket` port pings the
//! bridge's own address, which the switch put on the TAP (in a namespace of its own here),
//! so the kernel behind it answers; the TAP outlives a plain `exit` and goes with
//! `exit --cleanup`. Needs root and network namespaces; otherwise SKIP.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{Reap, start_switch};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

fn run(args: &[&str]) -> Output {
    Command::new(args[0]).args(&args[1..]).output().unwrap()
}

fn must(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Namespaces, a root-namespace link, the switch and its files, removed on drop.
struct Env {
    netns: Vec<String>,
    link: Option<String>,
    switch: Option<Reap>,
    dir: PathBuf,
}

impl Drop for Env {
    fn drop(&mut self) {
        drop(self.switch.take());
        if let Some(l) = &self.link {
            let _ = run(&["ip", "link", "del", l]);
        }
        for n in &self.netns {
            let _ = run(&["ip", "netns", "del", n]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ctl(rundir: &Path, args: &[&str]) -> String {
    let o = Command::new(bin())
        .arg("ctl")
        .arg("--rundir")
        .arg(rundir)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_host_pings_the_bridge_address_on_the_internal_tap() {
    let test = "a_host_pings_the_bridge_address_on_the_internal_tap";
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP {test}: needs root (network namespaces, veth, TAP)");
        return;
    }
    if Command::new("ping").arg("-V").output().is_err() {
        eprintln!("SKIP {test}: no ping (apt-get install iputils-ping)");
        return;
    }
    let id = std::process::id() % 100_000;
    let (host_ns, br_ns) = (format!("fpi-{id}-h"), format!("fpi-{id}-b"));
    let (veth_sw, veth_host, bridge) = (
        format!("fpiS{id}"),
        format!("fpiH{id}"),
        format!("fpbr{id}"),
    );
    let mut env = Env {
        netns: Vec::new(),
        link: None,
        switch: None,
        dir: std::env::temp_dir().join(format!("flowpath-internal-{id}")),
    };
    for n in [&host_ns, &br_ns] {
        if !run(&["ip", "netns", "add", n]).status.success() {
            eprintln!("SKIP {test}: 'ip netns add' failed");
            return;
        }
        env.netns.push(n.clone());
    }
    must(&[
        "ip", "link", "add", &veth_sw, "type", "veth", "peer", "name", &veth_host, "netns",
        &host_ns,
    ]);
    env.link = Some(veth_sw.clone());
    must(&["ip", "link", "set", &veth_sw, "up"]);
    let hx = |args: &[&str]| {
        let mut v = vec!["ip", "netns", "exec", &host_ns];
        v.extend_from_slice(args);
        must(&v)
    };
    hx(&["ip", "addr", "add", "10.77.0.9/24", "dev", &veth_host]);
    hx(&["ip", "link", "set", &veth_host, "up"]);

    std::fs::create_dir_all(&env.dir).unwrap();
    let cfg = env.dir.join("sw.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"[[bridge]]
name = "{bridge}"
hwaddr = "02:00:00:77:00:08"
ip = ["10.77.0.8/24"]
flows = ["actions=NORMAL"]

[[bridge.port]]
name = "p0"
type = "afpacket"
options = {{ ifname = "{veth_sw}" }}

[[bridge.port]]
name = "{bridge}"
type = "internal"
options = {{ netns = "{br_ns}" }}
"#
        ),
    )
    .unwrap();
    let rundir = env.dir.join("run");
    env.switch = Some(start_switch(&cfg, &rundir));
    // The TAP is in its namespace with the bridge's addresses.
    let addr = must(&["ip", "-n", &br_ns, "addr", "show", &bridge]);
    assert!(addr.contains("link/ether 02:00:00:77:00:08"), "{addr}");
    assert!(addr.contains("inet 10.77.0.8/24"), "{addr}");
    let show = ctl(&rundir, &["dpif/show"]);
    assert!(
        show.contains(&format!(
            "{bridge} 65534/2: (tap: ifname={bridge}, netns={br_ns})"
        )),
        "{show}"
    );
    // ARP and ICMP through NORMAL to LOCAL; the kernel behind the TAP answers.
    hx(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.77.0.8"]);
    let stats = ctl(&rundir, &["port/stats", &bridge]);
    assert!(stats.contains("link up"), "{stats}");
}

/// For a test of a TAP port in a namespace of its own: as root, a namespace `PREFIX-ID` and a
/// switch configuration with bridge `PREFIXbID` and `port` (given the bridge's and the
/// namespace's names) in a scratch directory; `None` (and the reason printed) otherwise.
fn tap_in_netns(
    test: &str,
    prefix: &str,
    port: impl Fn(&str, &str) -> String,
) -> Option<(Env, String, String, PathBuf)> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIP {test}: needs root (network namespaces, TAP)");
        return None;
    }
    let id = std::process::id() % 100_000;
    let (ns, bridge) = (format!("{prefix}-{id}"), format!("{prefix}b{id}"));
    let mut env = Env {
        netns: Vec::new(),
        link: None,
        switch: None,
        dir: std::env::temp_dir().join(format!("flowpath-{test}-{id}")),
    };
    if !run(&["ip", "netns", "add", &ns]).status.success() {
        eprintln!("SKIP {test}: 'ip netns add' failed");
        return None;
    }
    env.netns.push(ns.clone());
    std::fs::create_dir_all(&env.dir).unwrap();
    let cfg = env.dir.join("sw.toml");
    let config = format!(
        "[[bridge]]\nname = \"{bridge}\"\nflows = [\"actions=NORMAL\"]\n\n{}",
        port(&bridge, &ns)
    );
    std::fs::write(&cfg, config).unwrap();
    Some((env, ns, bridge, cfg))
}

#[test]
fn exit_cleanup_removes_the_internal_tap_plain_exit_keeps_it() {
    let Some((env, ns, bridge, cfg)) = tap_in_netns(
        "exit_cleanup_removes_the_internal_tap_plain_exit_keeps_it",
        "fpc",
        |bridge, ns| {
            format!(
                "[[bridge.port]]\nname = \"{bridge}\"\ntype = \"internal\"\n\
                 options = {{ netns = \"{ns}\" }}\n"
            )
        },
    ) else {
        return;
    };
    let rundir = env.dir.join("run");
    let exists = || {
        run(&["ip", "-n", &ns, "link", "show", &bridge])
            .status
            .success()
    };
    for (args, kept) in [(&["exit"][..], true), (&["exit", "--cleanup"][..], false)] {
        let mut sw = start_switch(&cfg, &rundir);
        assert!(exists(), "no TAP {bridge} while the switch runs");
        ctl(&rundir, args);
        sw.wait(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(exists(), kept, "TAP {bridge} after {args:?}");
        let _ = std::fs::remove_file(rundir.join("flowpath.ctl"));
    }
}

/// A port deleted while the switch runs takes the persistent TAP it made with it, as
/// ovs-vswitchd deletes an internal port's device with the port (OVN's "controller I-P handling
/// when ovs iface ofport is -1" turns an internal port into a system one and expects no device
/// left).
#[test]
fn a_deleted_port_takes_its_persistent_tap_with_it() {
    let port = format!("fpdp{}", std::process::id() % 100_000);
    let Some((env, ns, _bridge, cfg)) = tap_in_netns(
        "a_deleted_port_takes_its_persistent_tap_with_it",
        "fpd",
        |_, ns| {
            format!(
                "[[bridge.port]]\nname = \"{port}\"\ntype = \"tap\"\n\
                 options = {{ netns = \"{ns}\", persist = \"true\" }}\n"
            )
        },
    ) else {
        return;
    };
    deleting_takes_the_tap(&env, &ns, &cfg, &port, "del-port");
}

/// Starts the switch of `cfg`, checks that TAP `device` is in namespace `ns`, runs `command
/// device` and checks that the TAP is gone.
fn deleting_takes_the_tap(env: &Env, ns: &str, cfg: &Path, device: &str, command: &str) {
    let rundir = env.dir.join("run");
    let exists = || {
        run(&["ip", "-n", ns, "link", "show", device])
            .status
            .success()
    };
    let mut sw = start_switch(cfg, &rundir);
    assert!(exists(), "no TAP {device} before {command}");
    ctl(&rundir, &[command, device]);
    assert!(!exists(), "TAP {device} left after {command}");
    ctl(&rundir, &["exit"]);
    sw.wait(std::time::Duration::from_secs(10)).unwrap();
}

/// `del-br` deletes the bridge's ports for good, as ovs-vswitchd does: its internal port's TAP
/// (the bridge's own device) goes with it.
#[test]
fn a_deleted_bridge_takes_its_internal_tap_with_it() {
    let Some((env, ns, bridge, cfg)) = tap_in_netns(
        "a_deleted_bridge_takes_its_internal_tap_with_it",
        "fpr",
        |bridge, ns| {
            format!(
                "[[bridge.port]]\nname = \"{bridge}\"\ntype = \"internal\"\n\
                 options = {{ netns = \"{ns}\" }}\n"
            )
        },
    ) else {
        return;
    };
    deleting_takes_the_tap(&env, &ns, &cfg, &bridge, "del-br");
}
