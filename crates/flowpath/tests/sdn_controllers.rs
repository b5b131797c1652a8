//! Real SDN controllers driving `flowpath run` over `tcp:127.0.0.1:PORT`, as they drive
//! `ovs-vswitchd`: os-ken with a MAC-learning switch application
//! (`testdata/controllers/learning_switch_13.py`) and faucet with two VLANs and one ACL
//! (`testdata/controllers/faucet.yaml.in`), hosts in network namespaces on veth pairs whose
//! switch ends are `afpacket` ports.
//!
//! Checked: the controller connects and finishes its handshake (`controller/show`), the flows
//! it installs are in `dump-flows`, and nothing it sends is refused: `ovs-ofctl snoop` on
//! `br0.snoop` sees no `OFPT_ERROR`. faucet's flows flood within each VLAN, so its hosts ping
//! each other; the learning switch forwards only through packet-ins and packet-outs, so its
//! hosts ping each other once it has learned their ports.
//!
//! Needs root, `ip`, `ping`, `ovs-ofctl`, and the controllers, which
//! `scripts/controllers-venv` installs from PyPI into a cached virtual environment; without
//! any of them a test prints `SKIP <test>: <reason>` and returns.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Reap;
use common::netns::{Env, Names, Switch, in_ns, must, ping, slot, veth, wait_until};

static NAMES: Names = Names {
    netns: "fpk",
    dir: "flowpath-sdn",
    root_for: "network namespaces and veth pairs",
    ifname_max: 12,
};

const TOOLS: &[&str] = &["ip", "ping", "ovs-ofctl"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The controllers' virtual environment (installed on first use), or `None` after a SKIP
/// line.
fn venv(test: &str) -> Option<PathBuf> {
    let o = Command::new(repo().join("scripts/controllers-venv"))
        .stderr(Stdio::piped())
        .output();
    match o {
        Ok(o) if o.status.success() => Some(PathBuf::from(
            String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        )),
        Ok(o) => {
            eprintln!(
                "SKIP {test}: scripts/controllers-venv failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            None
        }
        Err(e) => {
            eprintln!("SKIP {test}: scripts/controllers-venv: {e}");
            None
        }
    }
}

/// `$PATH` with `dir` first.
fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut dirs = vec![dir.to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

/// A local TCP port nothing listens on.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `n` hosts `h1..hn` (10.232.0.N/24 in namespaces of their own), each on a veth pair whose
/// other end is afpacket port `pN` (OpenFlow port N) of the switch, in namespace `s`; the
/// switch's br0 has `bridge` settings and a controller at `tcp:127.0.0.1:PORT`.
fn topology(env: &mut Env, n: usize, bridge: &str, port: u16) -> (Vec<String>, PathBuf) {
    let s = env.netns("s");
    let mut hosts = Vec::new();
    let mut ports = String::new();
    for i in 1..=n {
        let h = env.netns(&format!("h{i}"));
        let (hi, si) = (env.ifname(&format!("h{i}")), env.ifname(&format!("s{i}")));
        veth(&hi, &h, &si, &s);
        must(&in_ns(
            &h,
            &["ip", "addr", "add", &format!("10.232.0.{i}/24"), "dev", &hi],
        ));
        ports += &format!(
            "\n[[bridge.port]]\nname = \"p{i}\"\ntype = \"afpacket\"\nofport = {i}\n\
             options = {{ ifname = \"{si}\", netns = \"{s}\" }}\n"
        );
        hosts.push(h);
    }
    let cfg = env.write(
        "sw.toml",
        &format!(
            "[[bridge]]\nname = \"br0\"\ncontroller = [\"tcp:127.0.0.1:{port}\"]\n{bridge}\n{ports}"
        ),
    );
    (hosts, cfg)
}

/// `ovs-ofctl snoop br0`, started before the controller so that it sees the whole exchange.
fn snoop(env: &Env) -> Reap {
    let rundir = env.path("run");
    let out = std::fs::File::create(env.path("snoop.txt")).unwrap();
    let c = Reap(
        Command::new("ovs-ofctl")
            .env("OVS_RUNDIR", &rundir)
            .args(["snoop", "br0"])
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap(),
    );
    // The snooper is accepted once it connects; give it a moment.
    std::thread::sleep(Duration::from_millis(500));
    c
}

/// Waits for the controller's handshake to end (`is_connected : true`).
fn wait_connected(sw: &Switch, what: &str, log: &Path) {
    assert!(
        wait_until(Duration::from_secs(40), || sw
            .ctl_ok(&["controller/show", "br0"])
            .contains("is_connected        : true")),
        "{what} did not connect: {}\n{what}'s log:\n{}\nflowpath's log:\n{}",
        sw.ctl_ok(&["controller/show", "br0"]),
        std::fs::read_to_string(log).unwrap_or_default(),
        sw.log()
    );
}

/// What the snooper saw: it must contain no error.
fn no_errors(env: &Env) -> String {
    let s = std::fs::read_to_string(env.path("snoop.txt")).unwrap_or_default();
    assert!(
        !s.contains("OFPT_ERROR"),
        "the switch refused something:\n{s}"
    );
    s
}

/// The flows of br0 in OpenFlow 1.3, without statistics.
fn flows(sw: &Switch) -> String {
    sw.ofctl(&["dump-flows", "br0"])
}

/// The test's environment and the controllers' virtual environment, or `None` after a SKIP
/// line.
fn prepare(test: &str, short: &str) -> Option<(Env, PathBuf)> {
    let env = Env::new(test, short, TOOLS, &NAMES)?;
    Some((env, venv(test)?))
}

fn learning_switch(test: &str, short: &str, pings: bool) {
    let Some((mut env, venv)) = prepare(test, short) else {
        return;
    };
    let _slot = slot();
    let port = free_port();
    let (hosts, cfg) = topology(
        &mut env,
        2,
        "protocols = [\"OpenFlow13\"]\nfail-mode = \"secure\"\n",
        port,
    );
    let sw = Switch::start(&env, &cfg);
    let _snoop = snoop(&env);
    let log = env.path("os-ken.log");
    let _ctl = Reap(
        Command::new(venv.join("bin/osken-manager"))
            .args(["--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port"])
            .arg(port.to_string())
            .arg(repo().join("testdata/controllers/learning_switch_13.py"))
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(env.path("os-ken.err")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_connected(&sw, "os-ken", &env.path("os-ken.err"));
    // Its table-miss flow, to the controller.
    assert!(
        wait_until(Duration::from_secs(10), || flows(&sw)
            .contains("priority=0 actions=CONTROLLER:65535")),
        "{}",
        flows(&sw)
    );
    let seen = no_errors(&env);
    assert!(seen.contains("OFPT_FEATURES_REPLY (OF1.3)"), "{seen}");
    if pings {
        // Waits for packet-in and packet-out: the learning switch learns from packet-ins.
        ping(&hosts[0], "10.232.0.2", 3).unwrap();
        assert!(
            flows(&sw).contains("priority=1,in_port=1"),
            "{}",
            flows(&sw)
        );
        no_errors(&env);
    }
}

#[test]
fn os_ken_learning_switch_connects_and_installs_its_table_miss_flow() {
    learning_switch(
        "os_ken_learning_switch_connects_and_installs_its_table_miss_flow",
        "ol",
        false,
    );
}

#[test]
fn os_ken_learning_switch_forwards_pings_between_namespaces() {
    learning_switch(
        "os_ken_learning_switch_forwards_pings_between_namespaces",
        "op",
        true,
    );
}

fn faucet(test: &str, short: &str, pings: bool) {
    let Some((mut env, venv)) = prepare(test, short) else {
        return;
    };
    let _slot = slot();
    let port = free_port();
    let (hosts, cfg) = topology(&mut env, 4, "fail-mode = \"secure\"\n", port);
    let sw = Switch::start(&env, &cfg);
    // faucet knows its switches by datapath id.
    let show = Command::new("ovs-ofctl")
        .env("OVS_RUNDIR", env.path("run"))
        .args(["show", "br0"])
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    let dpid = show
        .split("dpid:")
        .nth(1)
        .and_then(|s| s.get(..16))
        .unwrap_or_else(|| panic!("no dpid in {show}"));
    let yaml = std::fs::read_to_string(repo().join("testdata/controllers/faucet.yaml.in"))
        .unwrap()
        .replace("@DPID@", &format!("0x{dpid}"));
    let conf = env.write("faucet.yaml", &yaml);
    let _snoop = snoop(&env);
    let log = env.path("faucet.log");
    let _ctl = Reap(
        Command::new(venv.join("bin/faucet"))
            .args([
                "--ryu-ofp-listen-host",
                "127.0.0.1",
                "--ryu-ofp-tcp-listen-port",
            ])
            .arg(port.to_string())
            // faucet starts os-ken's manager by name.
            .env("PATH", path_with(&venv.join("bin")))
            .env("FAUCET_CONFIG", &conf)
            .env("FAUCET_LOG", &log)
            .env("FAUCET_EXCEPTION_LOG", env.path("faucet-exception.log"))
            .env("FAUCET_PROMETHEUS_ADDR", "127.0.0.1")
            .env("FAUCET_PROMETHEUS_PORT", free_port().to_string())
            .stdout(std::fs::File::create(env.path("faucet.out")).unwrap())
            .stderr(std::fs::File::create(env.path("faucet.err")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_connected(&sw, "faucet", &log);
    // faucet's pipeline: its VLAN table tags each port's packets with its native VLAN, the
    // ACL is on port 1; all accepted, none refused.
    assert!(
        wait_until(Duration::from_secs(20), || {
            let f = flows(&sw);
            f.contains("in_port=1") && f.contains("100") && f.contains("200")
        }),
        "{}\nfaucet's log:\n{}",
        flows(&sw),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    std::thread::sleep(Duration::from_secs(2));
    let seen = no_errors(&env);
    assert!(seen.contains("OFPT_FLOW_MOD (OF1.3)"), "{seen}");
    let flog = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!flog.contains("OFPErrorMsg"), "{flog}");
    let f = flows(&sw);
    assert!(f.contains("tp_dst=23"), "the ACL's rule: {f}");
    if pings {
        // Before faucet learns a host (from packet-ins) its flood table floods within the
        // VLAN: hosts of a VLAN reach each other, those of the other VLAN do not.
        ping(&hosts[0], "10.232.0.2", 3).unwrap();
        ping(&hosts[2], "10.232.0.4", 3).unwrap();
        assert!(ping(&hosts[0], "10.232.0.3", 2).is_err(), "VLANs are apart");
        no_errors(&env);
    }
}

#[test]
fn faucet_pipeline_of_two_vlans_and_an_acl_is_accepted() {
    faucet(
        "faucet_pipeline_of_two_vlans_and_an_acl_is_accepted",
        "fa",
        false,
    );
}

#[test]
fn faucet_switches_each_vlan_between_namespaces() {
    faucet("faucet_switches_each_vlan_between_namespaces", "fp", true);
}
