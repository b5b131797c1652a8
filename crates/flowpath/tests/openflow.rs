//! The OpenFlow pipeline from the command line: the configuration example of the README run
//! over a capture, `check-config`, and `flowpath ofctl` / `ofproto/trace` on a running switch.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap")
        .join(name)
}

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("flowpath-of-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The example of the OpenFlow issue and the README, as written.
const EXAMPLE: &str = r#"[datapath]
pmd-cpu-mask = "0x2"
emc-insert-inv-prob = 100

[[bridge]]
name = "br0"
flows = ["table=0,priority=10,ip,nw_dst=10.1.0.0/16,actions=mod_dl_dst:52:54:00:00:00:01,output:2",
         "table=0,priority=0,actions=drop"]

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
"#;

#[test]
fn the_readme_example_forwards_through_openflow() {
    let d = dir("example");
    std::fs::copy(fixture("plain_8.pcap"), d.join("in.pcap")).unwrap();
    std::fs::write(d.join("sw.toml"), EXAMPLE).unwrap();
    let cfg = d.join("sw.toml");
    let o = Command::new(bin())
        .args(["check-config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = Command::new(bin())
        .args(["run", "--config", cfg.to_str().unwrap(), "--until-idle"])
        .env("FLOWPATH_RUNDIR", d.join("run"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let got = netdev::pcap::read_file(d.join("out.pcap")).unwrap();
    let input = netdev::pcap::read_file(fixture("plain_8.pcap")).unwrap();
    assert_eq!(got.len(), input.len());
    for (g, i) in got.iter().zip(&input) {
        assert_eq!(&g.data[..6], &[0x52, 0x54, 0, 0, 0, 1]);
        assert_eq!(&g.data[6..], &i.data[6..]);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn check_config_names_bad_flows_with_their_line() {
    let d = dir("check");
    let bad = EXAMPLE
        .replace("nw_dst=10.1.0.0/16", "nw_sr=10.1.0.0/16")
        .replace("priority=0,actions=drop", "priority=0,tcp,actions=outptu:2");
    std::fs::write(d.join("bad.toml"), bad).unwrap();
    let o = Command::new(bin())
        .args(["check-config", d.join("bad.toml").to_str().unwrap()])
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("line 7:") && t.contains("unknown field 'nw_sr'"),
        "{t}"
    );
    assert!(t.contains("line 8:") && t.contains("outptu"), "{t}");
    let _ = std::fs::remove_dir_all(&d);
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

fn ofctl(rundir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("ofctl")
        .arg("--rundir")
        .arg(rundir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn ofctl_and_trace_on_a_running_switch() {
    let d = dir("ofctl");
    std::fs::copy(fixture("plain_8.pcap"), d.join("in.pcap")).unwrap();
    let cfg = EXAMPLE
        .replace(
            "type = \"pcap\"\nofport = 1\noptions = { rx_pcap = \"in.pcap\" }",
            "type = \"replay\"\nofport = 1\noptions = { pcap = \"in.pcap\" }",
        )
        .replace(
            "type = \"pcap\"\nofport = 2\noptions = { tx_pcap = \"out.pcap\" }",
            "type = \"sink\"\nofport = 2",
        )
        .replace("pmd-cpu-mask = \"0x2\"\n", "");
    std::fs::write(d.join("sw.toml"), cfg).unwrap();
    let run = d.join("run");
    let mut child = Command::new(bin())
        .args([
            "run",
            "--config",
            d.join("sw.toml").to_str().unwrap(),
            "--rundir",
            run.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !run.join("flowpath.ctl").exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no control socket");
        std::thread::sleep(Duration::from_millis(20));
    }

    // The trace of a routed packet: the rule, the /16 megaflow, the datapath actions.
    let o = ctl(
        &run,
        &[
            "ofproto/trace",
            "br0",
            "in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.1.2.3,tp_dst=2000",
        ],
    );
    let tr = text(&o);
    assert!(o.status.success(), "{tr}");
    assert!(tr.contains(" 0. ip,nw_dst=10.1.0.0/16, priority 10\n    mod_dl_dst:52:54:00:00:00:01\n    output:2\n"), "{tr}");
    assert!(tr.contains("Megaflow: recirc_id=0,eth,ip,in_port=1,dl_dst=00:00:00:00:00:00,nw_dst=10.1.0.0/16,nw_frag=no"), "{tr}");
    assert!(
        tr.contains("Datapath actions: set(eth(dst=52:54:00:00:00:01)),2"),
        "{tr}"
    );

    // The same with the packet's bytes (the first frame of the capture).
    let frame = &netdev::pcap::read_file(fixture("plain_8.pcap")).unwrap()[0].data;
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    let o = ctl(&run, &["ofproto/trace", "br0", "in_port=1", &hex]);
    let tr = text(&o);
    assert!(o.status.success(), "{tr}");
    assert!(
        tr.starts_with("Flow: udp,in_port=1,vlan_tci=0x0000,dl_src=8c:dc:d4:ab:58:48,"),
        "{tr}"
    );
    assert!(
        tr.contains("Datapath actions: set(eth(dst=52:54:00:00:00:01)),2"),
        "{tr}"
    );
    let o = ctl(&run, &["ofproto/trace", "br0", "in_port=1", "0x0g"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    // Tables change at run time; dump-flows shows the rules with counters.
    let o = ofctl(
        &run,
        &[
            "add-flow",
            "br0",
            "priority=20,udp,tp_dst=2000,actions=drop",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let flows_file = d.join("more.flows");
    std::fs::write(
        &flows_file,
        "# comment\npriority=5,arp,actions=NORMAL\n\npriority=6,ipv6,actions=drop\n",
    )
    .unwrap();
    let o = ofctl(&run, &["add-flows", "br0", flows_file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let o = ofctl(&run, &["dump-flows", "br0"]);
    let dump = text(&o);
    assert!(
        dump.contains("priority=20,udp,tp_dst=2000 actions=drop"),
        "{dump}"
    );
    assert!(dump.contains("priority=5,arp actions=NORMAL"), "{dump}");
    assert_eq!(dump.lines().count(), 5, "{dump}");
    let o = ofctl(
        &run,
        &[
            "del-flows",
            "--strict",
            "br0",
            "priority=20,udp,tp_dst=2000",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = ofctl(&run, &["dump-flows", "br0", "arp"]);
    assert_eq!(text(&o).lines().count(), 1, "{}", text(&o));

    // Bad input gets an error reply, and the switch keeps running.
    let o = ofctl(&run, &["add-flow", "br0", "nw_dst=1.2.3.4,actions=drop"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("prerequisite ip missing for nw_dst"),
        "{}",
        text(&o)
    );
    let o = ofctl(&run, &["add-flow", "br9", "actions=drop"]);
    assert_eq!(o.status.code(), Some(2));
    // A port the bridge does not have is traced (as OVS traces it), entering no datapath port.
    let o = ctl(&run, &["ofproto/trace", "br0", "in_port=7"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).ends_with("Datapath actions: drop\n"),
        "{}",
        text(&o)
    );

    // show lists the ports; bridges come and go.
    let show = text(&ofctl(&run, &["show", "br0"]));
    assert!(
        show.contains(" 1(p0): datapath port 1") && show.contains(" 2(p1): datapath port 2"),
        "{show}"
    );
    assert!(ctl(&run, &["add-br", "br9"]).status.success());
    assert_eq!(ctl(&run, &["add-br", "br9"]).status.code(), Some(2));
    let o = ctl(
        &run,
        &[
            "add-port",
            "br9",
            "pt9",
            "type=patch",
            "options:peer=nowhere",
            "tag=5",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let show = text(&ofctl(&run, &["show", "br9"]));
    assert!(
        show.contains(" 1(pt9): patch, peer=nowhere, tag=5"),
        "{show}"
    );
    assert!(ctl(&run, &["del-br", "br9"]).status.success());
    assert_eq!(ofctl(&run, &["show", "br9"]).status.code(), Some(2));

    // Ports come and go at run time: a sink joins, a rule sends to it, it counts packets;
    // then it leaves, and the switch goes on.
    let o = ctl(&run, &["add-port", "br0", "s2", "type=sink", "ofport=5"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = ofctl(
        &run,
        &["add-flow", "br0", "priority=50,udp,actions=output:s2"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let t = Instant::now();
    loop {
        let dump = text(&ofctl(&run, &["dump-flows", "br0", "udp"]));
        if dump
            .lines()
            .any(|l| l.contains("priority=50") && !l.contains("n_packets=0,"))
        {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{dump}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let show = text(&ctl(&run, &["dpif/show"]));
    assert!(show.contains("s2 "), "{show}");
    let o = ctl(&run, &["del-port", "s2"]);
    assert!(o.status.success(), "{}", text(&o));
    let show = text(&ctl(&run, &["dpif/show"]));
    assert!(!show.contains("s2 "), "{show}");
    let o = ctl(&run, &["del-port", "s2"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = ctl(
        &run,
        &[
            "add-port",
            "br0",
            "bad",
            "type=pcap",
            "options:rx_pcap=/nonexistent.pcap",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = ofctl(&run, &["del-flows", "br0", "udp"]);
    assert!(o.status.success(), "{}", text(&o));

    // `controller` sends packets to userspace; with no controller connected they are counted.
    let o = ofctl(
        &run,
        &["add-flow", "br0", "priority=60,udp,actions=controller"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let t = Instant::now();
    loop {
        let drops = text(&ctl(&run, &["dpif-netdev/pmd-drop-show"]));
        let n: u64 = drops
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("sent to userspace (controller, not connected): ")
            })
            .map_or(0, |v| v.parse().unwrap());
        if n > 0 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{drops}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = ofctl(&run, &["del-flows", "--strict", "br0", "priority=60,udp"]);
    assert!(o.status.success(), "{}", text(&o));

    // Forwarding went on: the routed rule counted packets.
    let t = Instant::now();
    loop {
        let dump = text(&ofctl(&run, &["dump-flows", "br0", "ip"]));
        if dump
            .lines()
            .any(|l| l.contains("priority=10") && !l.contains("n_packets=0,"))
        {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{dump}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = ctl(&run, &["exit"]);
    assert!(o.status.success());
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(20), "did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `flowpath bench --openflow`: the scenario's OpenFlow rules are translated on the first
/// misses, and once cached the switch forwards what the datapath-flow version forwards, through
/// the same one megaflow (no upcalls in the measured window, one subtable probe per hit).
#[test]
fn bench_runs_through_openflow_rules() {
    for (scenario, emc) in [("p2p", "on"), ("p2p_l3", "on"), ("p2p_l3", "off")] {
        let o = Command::new(bin())
            .args([
                "bench",
                scenario,
                "--flows",
                "1000",
                "--seconds",
                "0.5",
                "--emc",
                emc,
                "--openflow",
                "--json",
            ])
            .output()
            .unwrap();
        let t = text(&o);
        assert!(o.status.success(), "{t}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["forwarded_ok"], true, "{t}");
        assert_eq!(v["openflow"], true, "{t}");
        assert_eq!(v["upcalls"], 0, "{t}");
        assert_eq!(v["lost_upcalls"], 0, "{t}");
        if emc == "off" {
            assert_eq!(v["megaflow_hit_pct"], 100.0, "{t}");
            assert_eq!(v["subtable_lookups_per_hit"], 1.0, "{t}");
        }
    }
}

/// `flowpath bench ct` and `ct_nat`, with the anchor's datapath flows and through the OpenFlow
/// pipeline (ct(table=1) recirculates): every packet forwarded (with SNAT, rewritten as
/// expected), one committed connection per flow, nothing missed in the window.
#[test]
fn bench_ct_scenarios_forward_and_commit_one_connection_per_flow() {
    for scenario in ["ct", "ct_nat"] {
        for openflow in [false, true] {
            let mut args = vec![
                "bench",
                scenario,
                "--flows",
                "300",
                "--seconds",
                "0.5",
                "--json",
            ];
            if openflow {
                args.push("--openflow");
            }
            let o = Command::new(bin()).args(&args).output().unwrap();
            let t = text(&o);
            assert!(o.status.success(), "{args:?}: {t}");
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["forwarded_ok"], true, "{args:?}: {t}");
            assert_eq!(v["ct_connections"], 300, "{args:?}: {t}");
            assert_eq!(v["passes_per_packet"], 2.0, "{args:?}: {t}");
            assert_eq!(v["lost_upcalls"], 0, "{args:?}: {t}");
        }
    }
}

/// `--storm`: a second source offering never-cached flows beside the cached traffic. Every
/// storm packet is a miss (an upcall or a counted lost upcall), the cached traffic is still
/// forwarded and verified; the rate it keeps is a figure for docs/performance.md, not a test.
#[test]
fn bench_storm_offers_misses_beside_cached_traffic() {
    let o = Command::new(bin())
        .args([
            "bench",
            "p2p_l3",
            "--flows",
            "100",
            "--seconds",
            "0.5",
            "--openflow",
            "--storm",
            "20000",
            "--json",
        ])
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["forwarded_ok"], true, "{t}");
    assert_eq!(v["storm_pps"], 20000.0, "{t}");
    // Each storm packet is a miss: translated now, or waiting for the slow path's budget
    // (the cached traffic is being forwarded), never dropped.
    assert!(v["upcalls"].as_u64().unwrap() > 0, "{t}");
    assert!(v["deferred_upcalls"].as_u64().unwrap() > 0, "{t}");
    assert_eq!(v["lost_upcalls"], 0, "{t}");
    let o = Command::new(bin())
        .args(["bench", "p2p_l3", "--storm", "1000"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("--storm needs --openflow"),
        "{}",
        text(&o)
    );
    let o = Command::new(bin())
        .args(["bench", "p2p_l3", "--openflow", "--storm", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("--storm takes a rate"), "{}", text(&o));
}
