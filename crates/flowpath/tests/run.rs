//! `flowpath run` as a user runs it: a configuration file, pcap ports, the control socket
//! driven by `flowpath ctl` and by the stock `ovs-appctl`, signals.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap")
        .join(name)
}

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("flowpath-run-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
    fn write(&self, f: &str, text: &str) -> PathBuf {
        let p = self.path(f);
        std::fs::write(&p, text).unwrap();
        p
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn out_text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn until_idle_runs_a_capture_through_the_flows() {
    let d = Dir::new("idle");
    std::fs::copy(fixture("plain_8.pcap"), d.path("in.pcap")).unwrap();
    let cfg = d.write(
        "sw.toml",
        r#"
[datapath]
emc-insert-inv-prob = 1
dp-flows = ["in_port(p0),eth(dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),ipv4(dst=10.1.0.0/255.255.0.0,frag=no), actions:set(eth(dst=52:54:00:00:00:01)),p1"]

[[bridge]]
name = "br0"

[[bridge.port]]
name = "p0"
type = "pcap"
ofport = 1
options = { rx_pcap = "in.pcap" }

[[bridge.port]]
name = "p1"
type = "pcap"
ofport = 2
options = { tx_pcap = "out.pcap" }
"#,
    );
    let o = Command::new(bin())
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--rundir",
            d.path("run").to_str().unwrap(),
            "--until-idle",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", out_text(&o));
    let got = netdev::pcap::read_file(d.path("out.pcap")).unwrap();
    let input = netdev::pcap::read_file(fixture("plain_8.pcap")).unwrap();
    assert_eq!(got.len(), 8);
    for (g, i) in got.iter().zip(&input) {
        assert_eq!(&g.data[..6], &[0x52, 0x54, 0, 0, 0, 1]);
        assert_eq!(&g.data[6..], &i.data[6..]);
    }
    assert!(
        !d.path("run/flowpath.ctl").exists(),
        "the socket is removed on exit"
    );
}

#[test]
fn bad_configuration_is_reported_with_its_line() {
    let d = Dir::new("badcfg");
    let cfg = d.write(
        "bad.toml",
        "[datapath]\npmd-cpu-mask = \"0x2\"\n\n[[bridge]]\nname = \"br0\"\n[[bridge.port]]\nname = \"p0\"\ntype = \"tachyon\"\n",
    );
    let o = Command::new(bin())
        .args(["run", "--config", cfg.to_str().unwrap(), "--until-idle"])
        .output()
        .unwrap();
    let (_, err) = out_text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("line 7: port 'p0': unknown type 'tachyon'"),
        "{err}"
    );

    let cfg = d.write("bad2.toml", "[[bridge]]\nname = \"br0\"\n[[bridge.port]]\nname = \"p0\"\ntype = \"pcap\"\noptions = { rx_pcap = \"missing.pcap\" }\n");
    let o = Command::new(bin())
        .args(["run", "--config", cfg.to_str().unwrap(), "--until-idle"])
        .output()
        .unwrap();
    let (_, err) = out_text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("port p0") && err.contains("missing.pcap"),
        "{err}"
    );
}

/// A switch that runs until told to stop: replay source, sink, one flow.
fn start_replay_switch(d: &Dir) -> (Child, PathBuf) {
    let cfg = common::replay_to_sink(&d.0);
    let rundir = d.path("run");
    let child = Command::new(bin())
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--rundir",
            rundir.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sock = rundir.join("flowpath.ctl");
    let t = Instant::now();
    while !sock.exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no control socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, rundir)
}

fn ctl(rundir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("ctl")
        .arg("--rundir")
        .arg(rundir)
        .args(args)
        .output()
        .unwrap()
}

fn wait_exit(mut c: Child) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = c.kill();
            panic!("flowpath did not stop");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn control_socket_manages_flows_and_reports() {
    let d = Dir::new("ctl");
    let (child, rundir) = start_replay_switch(&d);

    let o = ctl(&rundir, &["dpctl/dump-flows"]);
    let (text, err) = out_text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        text.contains("recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no), packets:"),
        "{text}"
    );
    assert!(text.contains("actions:2"), "{text}");

    // A second flow, visible in the verbose dump with names; then removed.
    let o = ctl(
        &rundir,
        &[
            "dpctl/add-flow",
            "in_port(p0),eth_type(0x86dd),ipv6(frag=no)",
            "drop",
        ],
    );
    assert!(o.status.success(), "{:?}", out_text(&o));
    let (text, _) = out_text(&ctl(&rundir, &["dpctl/dump-flows", "-m"]));
    assert!(
        text.contains("in_port(p0)") && text.contains("eth_type(0x86dd)"),
        "{text}"
    );
    assert!(
        ctl(
            &rundir,
            &[
                "dpctl/del-flow",
                "in_port(p0),eth_type(0x86dd),ipv6(frag=no)"
            ]
        )
        .status
        .success()
    );
    let (text, _) = out_text(&ctl(&rundir, &["dpctl/dump-flows"]));
    assert!(!text.contains("0x86dd"), "{text}");

    // Errors are replies with exit code 2, like ovs-appctl; the switch keeps running.
    let o = ctl(
        &rundir,
        &[
            "dpctl/add-flow",
            "in_port(p0),eth_type(0x0800),ipv4(frag=no)",
            "p1",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        out_text(&o).1.contains("already exists"),
        "{:?}",
        out_text(&o)
    );
    let o = ctl(
        &rundir,
        &[
            "dpctl/add-flow",
            "in_port(p0),eth_type(0x0800),ipv4(frag=maybe)",
            "p1",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(out_text(&o).1.contains("column"), "{:?}", out_text(&o));
    let o = ctl(&rundir, &["no/such-command"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(out_text(&o).1.contains("is not a valid command"));

    let (text, _) = out_text(&ctl(&rundir, &["dpif-netdev/pmd-stats-show"]));
    assert!(
        text.contains("packets received:") && text.contains("emc hits:"),
        "{text}"
    );
    let (text, _) = out_text(&ctl(&rundir, &["dpif-netdev/pmd-perf-show"]));
    assert!(
        text.contains("Rx packets:") && text.contains("subtbl lookups/hit"),
        "{text}"
    );
    let (text, _) = out_text(&ctl(&rundir, &["dpif-netdev/pmd-stage-show"]));
    assert!(
        text.contains("extract") && text.contains("megaflow"),
        "{text}"
    );
    let (text, _) = out_text(&ctl(&rundir, &["dpif/show"]));
    assert!(text.contains("p0 1/1: (replay:"), "{text}");
    let (text, _) = out_text(&ctl(&rundir, &["dpif-netdev/pmd-rxq-show"]));
    assert!(text.contains("port: p0"), "{text}");
    // Port counters: OVS's `dpctl/show -s` layout, and flowpath's `port/stats`.
    let (text, _) = out_text(&ctl(&rundir, &["dpctl/show", "-s"]));
    assert!(
        text.starts_with("netdev@flowpath:\n  lookups: hit:"),
        "{text}"
    );
    assert!(text.contains("  port 1: p0 (replay: "), "{text}");
    // The configured datapath flow is counted (without dumping the flows).
    let flows = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("flows: "))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(flows.is_some_and(|n| n >= 1), "{text}");
    let rx = text
        .lines()
        .skip_while(|l| !l.contains("port 1: p0"))
        .find_map(|l| l.trim().strip_prefix("RX packets:"))
        .and_then(|r| r.split(' ').next()?.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(rx > 0, "{text}");
    assert!(text.contains("TX bytes:"), "{text}");
    let (text, _) = out_text(&ctl(&rundir, &["port/stats", "p1"]));
    assert!(
        text.starts_with("p1 2: (sink) link up\n  total  rx packets:0"),
        "{text}"
    );
    let o = ctl(&rundir, &["port/stats", "nosuch"]);
    assert!(!o.status.success());
    assert!(
        out_text(&o).1.contains("no such port: nosuch"),
        "{:?}",
        out_text(&o)
    );

    assert!(ctl(&rundir, &["exit"]).status.success());
    assert!(wait_exit(child).success());
}

#[test]
fn drop_report_is_on_the_control_socket() {
    let d = Dir::new("drops");
    let (child, rundir) = start_replay_switch(&d);
    let o = ctl(&rundir, &["dpif-netdev/pmd-drop-show"]);
    let (text, err) = out_text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        text.contains("dropped:") && text.contains("malformed headers"),
        "{text}"
    );
    assert!(ctl(&rundir, &["exit"]).status.success());
    assert!(wait_exit(child).success());
}

#[test]
fn stock_ovs_appctl_drives_the_switch_or_skips() {
    if Command::new("ovs-appctl")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!(
            "SKIP stock_ovs_appctl_drives_the_switch_or_skips: ovs-appctl is not on PATH (apt-get install openvswitch-common)"
        );
        return;
    }
    let d = Dir::new("appctl");
    let (child, rundir) = start_replay_switch(&d);
    let sock = rundir.join("flowpath.ctl");
    let appctl = |args: &[&str]| {
        Command::new("ovs-appctl")
            .arg("-t")
            .arg(&sock)
            .args(args)
            .output()
            .unwrap()
    };
    let o = appctl(&["dpctl/dump-flows"]);
    assert!(o.status.success(), "{:?}", out_text(&o));
    assert!(out_text(&o).0.contains("actions:2"));
    let o = appctl(&["dpif-netdev/pmd-stats-show"]);
    assert!(
        out_text(&o).0.contains("packets received:"),
        "{:?}",
        out_text(&o)
    );
    let o = appctl(&["dpctl/del-flow", "in_port(9),eth_type(0x0800)"]);
    assert_eq!(o.status.code(), Some(2), "{:?}", out_text(&o));
    let o = appctl(&["list-commands"]);
    assert!(
        out_text(&o).0.contains("dpctl/add-flow"),
        "{:?}",
        out_text(&o)
    );

    // SIGTERM stops the switch cleanly.
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert!(wait_exit(child).success());
    assert!(!sock.exists());
}

#[test]
fn demo_runs_on_its_embedded_default_and_can_be_poked() {
    let d = Dir::new("demo");
    let rundir = d.path("run");
    let child = Command::new(bin())
        .args([
            "demo",
            "--seconds",
            "3",
            "--rundir",
            rundir.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sock = rundir.join("flowpath.ctl");
    let t = Instant::now();
    while !sock.exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no control socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The L3-VPN over VXLAN: the outer flow pops, the inner one routes to the VM, the VM's
    // replies are pushed and sent in one pass.
    let t = Instant::now();
    loop {
        let o = ctl(&rundir, &["dpctl/dump-flows"]);
        let (text, err) = out_text(&o);
        assert!(o.status.success(), "{err}");
        if text.lines().filter(|l| l.contains("actions:")).count() == 3 {
            assert!(text.contains("actions:tnl_pop("), "{text}");
            assert!(
                text.contains("tunnel(tun_id=0x64,src=10.1.2.9,dst=10.1.2.8"),
                "{text}"
            );
            assert!(text.contains("actions:tnl_push("), "{text}");
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let (text, err) = out_text(&o);
    assert!(o.status.success(), "{err}");
    let live: Vec<&str> = text.lines().filter(|l| l.contains(" Mpps ")).collect();
    assert_eq!(live.len(), 3, "{text}");
    assert!(live.iter().all(|l| !l.contains(" 0.00 Mpps")), "{text}");
    assert!(
        text.contains("Rx packets:") && text.contains("Megaflow hits:"),
        "{text}"
    );
    let lost = text
        .lines()
        .find(|l| l.contains("Lost upcalls:"))
        .and_then(|l| l.split_whitespace().nth(3));
    assert_eq!(lost, Some("0"), "every frame of the mix has a flow: {text}");
}
