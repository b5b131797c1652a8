//! `flowpath run` with `type = "dpdk"` ports on DPDK's virtual devices (cargo feature
//! `dpdk`): a capture through `net_pcap` in and out byte for byte, statistics and xstats on
//! the control socket, ports added and removed while the switch runs, a bad `dpdk-devargs`
//! failing only its port; and the same through `ovs-vsctl` and OVSDB, with OVS's Interface
//! `error`; two network namespaces that ping each other through the switch, one behind a
//! `net_tap` port, the other behind `net_af_packet` on a veth pair. DPDK runs on ordinary
//! memory (`--no-huge`): the host's hugepages are left alone.
//! Without root (or OVS's tools, for the OVSDB test) a test prints SKIP and returns.
#![cfg(feature = "dpdk")]

mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::netns::{Env, Names, in_ns, must, ping, tcp_transfer, wait_until};
use common::ovsdb::{Sandbox, Switch, missing, words};
use common::{Reap, ctl, scratch_dir, start_switch};

/// The EAL arguments of the tests: ordinary memory, no PCI scan, EAL's warnings only.
const EAL_EXTRA: &str = "--no-huge --no-pci --log-level=lib.eal:warning";

/// The `[datapath]` section of the tests' configurations: DPDK started with [`EAL_EXTRA`].
fn datapath() -> String {
    format!(
        "[datapath]\ndpdk-init = true\ndpdk-extra = \"{EAL_EXTRA}\"\ndpdk-socket-mem = \"512\"\n"
    )
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

fn is_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("SKIP {test}: DPDK's EAL needs root");
    }
    root
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn dpdk_ports_forward_a_capture_and_come_and_go_at_run_time() {
    let test = "dpdk_ports_forward_a_capture_and_come_and_go_at_run_time";
    if !is_root(test) {
        return;
    }
    let (dir, _rm) = scratch_dir("flowpath-dpdk-run");
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/plain_8.pcap");
    let input = netdev::pcap::read_file(&fixture).unwrap();
    let (inp, out) = (dir.join("in.pcap"), dir.join("out.pcap"));
    std::fs::copy(&fixture, &inp).unwrap();
    let cfg = dir.join("sw.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
{}
[[bridge]]
name = "br0"
flows = ["in_port=1,actions=output:2"]

[[bridge.port]]
name = "p0"
type = "dpdk"
ofport = 1
options = {{ dpdk-devargs = "net_pcap_fr0,rx_pcap={}", n_rxq_desc = 256 }}

[[bridge.port]]
name = "p1"
type = "dpdk"
ofport = 2
options = {{ dpdk-devargs = "net_pcap_fr1,tx_pcap={}" }}
"#,
            datapath(),
            inp.display(),
            out.display()
        ),
    )
    .unwrap();
    let rundir = dir.join("run");
    let switch = Running::start(&cfg, &rundir);
    let n = input.len();
    let t = Instant::now();
    let stats = loop {
        let s = text(&ctl(&rundir, &["port/stats", "p1"]));
        if s.contains(&format!("tx packets:{n} ")) || t.elapsed() > Duration::from_secs(10) {
            break s;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(stats.starts_with("p1 2: (dpdk) link up"), "{stats}");
    assert!(stats.contains(&format!("tx packets:{n} ")), "{stats}");
    assert!(stats.contains("  tx0 "), "{stats}");
    assert!(
        stats.contains(&format!("  xstats tx_good_packets:{n}\n")),
        "{stats}"
    );
    let show = text(&ctl(&rundir, &["dpctl/show", "-s"]));
    assert!(
        show.contains("port 1: p0 (dpdk: configured_rx_queues=1, configured_rxq_descriptors=256,"),
        "{show}"
    );
    assert!(
        show.contains(&format!("    rx_good_packets:{n}\n")),
        "{show}"
    );

    // A port added and removed while the switch runs; a bad one fails alone.
    let add_port = |name: &str, devargs: &str| {
        let devargs = format!("options:dpdk-devargs={devargs}");
        ctl(&rundir, &["add-port", "br0", name, "type=dpdk", &devargs])
    };
    let o = add_port("p2", "net_null_fr2,no-rx=1");
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&ctl(&rundir, &["dpctl/show"])).contains("port 3: p2 (dpdk: "));
    let o = add_port("p3", "net_bogus9");
    assert!(!o.status.success());
    assert!(
        text(&o).contains("Error attaching device 'net_bogus9' to DPDK"),
        "{}",
        text(&o)
    );
    assert!(ctl(&rundir, &["del-port", "p2"]).status.success());
    // Its device went with it: the same devargs attaches again.
    let o = add_port("p2", "net_null_fr2,no-rx=1");
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&ctl(&rundir, &["port/stats", "p0"])).contains(&format!("rx packets:{n} ")));

    switch.exit(&rundir);
    // The tx device is closed on exit, which finishes its capture.
    assert_capture_is(&out, &input);
}

#[test]
fn check_config_knows_dpdk_options() {
    let (dir, _rm) = scratch_dir("flowpath-dpdk-check");
    let cfg = dir.join("sw.toml");
    std::fs::write(
        &cfg,
        "[[bridge]]\nname = \"br0\"\n\n[[bridge.port]]\nname = \"p0\"\ntype = \"dpdk\"\n\
         options = { dpdk-devargs = \"net_null0\", n_rxq = 0 }\n",
    )
    .unwrap();
    let o = Command::new(bin())
        .args(["check-config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o).contains("n_rxq: \"0\" is not a number from 1 to 1024"),
        "{}",
        text(&o)
    );
}

#[test]
fn ovs_vsctl_adds_dpdk_interfaces_and_a_bad_one_gets_ovs_error() {
    let test = "ovs_vsctl_adds_dpdk_interfaces_and_a_bad_one_gets_ovs_error";
    if let Some(why) = missing(Switch::Flowpath) {
        eprintln!("SKIP {test}: {why}");
        return;
    }
    if !is_root(test) {
        return;
    }
    let sb = Sandbox::new("flowpath-dpdk-ovsdb", Switch::Flowpath);
    let d = sb.dir.display().to_string();
    // Not the sandbox's switch: that one makes every interface a dummy port.
    let _switch = Reap(
        Command::new(bin())
            .args(["run", "--ovsdb", &sb.db, "--rundir", &d])
            .arg(format!("--unixctl={d}/ovs-vswitchd.ctl"))
            .envs(["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"].map(|v| (v, &d)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(sb.dir.join("flowpath.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let extra = format!("other_config:dpdk-extra=\"{EAL_EXTRA}\"");
    let vsctl = |args: &[&str]| {
        let (rc, out, err) = sb.vsctl(&words(args), 20);
        assert_eq!(rc, 0, "ovs-vsctl {args:?}: {err}");
        out.trim().to_owned()
    };
    vsctl(&[
        "set",
        "Open_vSwitch",
        ".",
        "other_config:dpdk-init=true",
        &extra,
        "other_config:dpdk-socket-mem=512",
    ]);
    // The bridge's own interface is a TAP: a name of this test's own.
    let br = format!("fpdk{}", std::process::id() % 100_000);
    vsctl(&[
        "add-br",
        &br,
        "--",
        "set",
        "bridge",
        &br,
        "datapath_type=netdev",
        "--",
        "add-port",
        &br,
        "dpdk0",
        "--",
        "set",
        "Interface",
        "dpdk0",
        "type=dpdk",
        "options:dpdk-devargs=net_null_ov0,no-rx=1",
        "options:n_rxq=2",
        "--",
        "add-port",
        &br,
        "dpdk1",
        "--",
        "set",
        "Interface",
        "dpdk1",
        "type=dpdk",
        "options:dpdk-devargs=net_bogus_ov1",
    ]);
    assert_eq!(vsctl(&["get", "Interface", "dpdk0", "error"]), "[]");
    assert_eq!(vsctl(&["get", "Interface", "dpdk0", "ofport"]), "1");
    assert_eq!(
        vsctl(&["get", "Interface", "dpdk1", "error"]),
        "\"Error attaching device 'net_bogus_ov1' to DPDK\""
    );
    let dup = "options:dpdk-devargs=net_null_ov0,no-rx=1";
    vsctl(&[
        "add-port",
        &br,
        "dpdk2",
        "--",
        "set",
        "Interface",
        "dpdk2",
        "type=dpdk",
        dup,
    ]);
    assert_eq!(
        vsctl(&["get", "Interface", "dpdk2", "error"]),
        "\"'dpdk2' is trying to use device 'net_null_ov0,no-rx=1' which is already in use by \
         'dpdk0'\""
    );
    assert_eq!(
        vsctl(&["get", "Open_vSwitch", ".", "dpdk_initialized"]),
        "true"
    );
    assert!(
        vsctl(&["get", "Open_vSwitch", ".", "dpdk_version"]).starts_with("\"DPDK "),
        "{}",
        vsctl(&["get", "Open_vSwitch", ".", "dpdk_version"])
    );
    assert!(vsctl(&["get", "Open_vSwitch", ".", "iface_types"]).contains("dpdk,"));
    let show = String::from_utf8_lossy(&ctl(&sb.dir, &["dpctl/show"]).stdout).into_owned();
    assert!(
        show.contains("dpdk0 (dpdk: configured_rx_queues=2, "),
        "{show}"
    );
    vsctl(&["del-port", &br, "dpdk0"]);
    let show = String::from_utf8_lossy(&ctl(&sb.dir, &["dpctl/show"]).stdout).into_owned();
    assert!(!show.contains("dpdk0"), "{show}");
}

static NAMES: Names = Names {
    netns: "fpdk",
    dir: "flowpath-dpdk-ns",
    root_for: "DPDK's EAL, network namespaces",
    ifname_max: 15,
};

#[test]
fn namespaces_ping_through_the_switch_over_net_tap_and_net_af_packet() {
    let test = "namespaces_ping_through_the_switch_over_net_tap_and_net_af_packet";
    let Some(mut env) = Env::new(
        test,
        "dn",
        &["ip", "ping", "sysctl", "nc", "ss", "ethtool"],
        &NAMES,
    ) else {
        return;
    };
    if !std::path::Path::new("/dev/net/tun").exists() {
        eprintln!("SKIP {test}: no /dev/net/tun");
        return;
    }
    let (na, nb) = (env.netns("a"), env.netns("b"));
    let (tap, root_b, b) = (env.ifname("dt"), env.ifname("dr"), env.ifname("db"));
    // b's veth: its namespace end has the host, its root end is the switch's net_af_packet.
    must(&[
        "ip", "link", "add", &root_b, "type", "veth", "peer", "name", &b, "netns", &nb,
    ]);
    must(&[
        "sysctl",
        "-qw",
        &format!("net.ipv6.conf.{root_b}.disable_ipv6=1"),
    ]);
    must(&["ip", "link", "set", &root_b, "up"]);
    must(&["ip", "-n", &nb, "addr", "add", "10.79.0.2/24", "dev", &b]);
    must(&["ip", "-n", &nb, "link", "set", &b, "up"]);
    // b's kernel would leave TCP checksums to the veth's offload, and net_af_packet would
    // forward them unfinished (it ignores the kernel's checksum-not-ready status).
    must(&in_ns(&nb, &["ethtool", "-K", &b, "tx", "off"]));
    let tag = &env.tag;
    let cfg = env.write(
        "sw.toml",
        &format!(
            r#"
{}
[[bridge]]
name = "br0"

[[bridge.port]]
name = "pa"
type = "dpdk"
options = {{ dpdk-devargs = "net_tap_{tag},iface={tap}", n_rxq_desc = 256, n_txq_desc = 256 }}

[[bridge.port]]
name = "pb"
type = "dpdk"
options = {{ dpdk-devargs = "net_af_packet_{tag},iface={root_b}", n_rxq_desc = 256, n_txq_desc = 256 }}
"#,
            datapath()
        ),
    );
    let rundir = env.path("run");
    let _switch = start_switch(&cfg, &rundir);
    // net_tap makes its interface when the port starts; then it moves to a's namespace.
    assert!(
        wait_until(Duration::from_secs(10), || std::path::Path::new(
            "/sys/class/net"
        )
        .join(&tap)
        .exists()),
        "no {tap}"
    );
    must(&["ip", "link", "set", &tap, "netns", &na]);
    must(&in_ns(
        &na,
        &["ip", "addr", "add", "10.79.0.1/24", "dev", &tap],
    ));
    must(&in_ns(&na, &["ip", "link", "set", &tap, "up"]));
    ping(&na, "10.79.0.2", 3).unwrap();
    // 4 MB of TCP through the switch, in the mbufs the frames arrived in.
    let src = env.data_file("bulk", 4 << 20);
    tcp_transfer(&env, &src, &na, &nb, "10.79.0.2", 5001).unwrap_or_else(|e| {
        let st = |p: &str| {
            String::from_utf8_lossy(&ctl(&rundir, &["port/stats", p]).stdout).into_owned()
        };
        panic!("{e}\n{}{}", st("pa"), st("pb"))
    });
    let stats = String::from_utf8_lossy(&ctl(&rundir, &["port/stats", "pb"]).stdout).into_owned();
    assert!(
        stats.contains("  total  rx packets:") && !stats.contains("  total  rx packets:0 "),
        "{stats}"
    );
}

/// `flowpath bench --io dpdk`: the anchor's I/O (net_pcap replaying forever into net_null)
/// forwards the scenario's traffic and checks the sinks' count, for p2p and for a tunnel
/// scenario with four sinks; what it cannot run is refused with the reason.
#[test]
fn bench_runs_on_the_anchors_dpdk_io() {
    if !is_root("bench_runs_on_the_anchors_dpdk_io") {
        return;
    }
    let o = Command::new(bin())
        .args(["bench", "p2p", "--io", "dpdk", "--seconds", "1", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["forwarded_ok"], true, "{r}");
    assert!(r["sink_packets"].as_u64().unwrap() > 100_000, "{r}");
    assert!(
        r["traffic"]
            .as_str()
            .unwrap()
            .contains("DPDK net_pcap -> net_null"),
        "{r}"
    );
    // A tunnel scenario with four sinks: each a net_null, their counts added.
    let o = Command::new(bin())
        .args([
            "bench",
            "mplsogre_decap",
            "--io",
            "dpdk",
            "--seconds",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["forwarded_ok"], true, "{r}");
    assert!(r["sink_packets"].as_u64().unwrap() > 10_000, "{r}");
    for (args, why) in [
        (
            &["pvp"][..],
            "--io dpdk is for p2p, p2p_l3, the tunnel and the ct scenarios",
        ),
        (&["p2p", "--pmds", "2"][..], "--io dpdk runs one PMD"),
    ] {
        let o = Command::new(bin())
            .arg("bench")
            .args(args)
            .args(["--io", "dpdk", "--seconds", "1"])
            .output()
            .unwrap();
        assert!(
            !o.status.success() && text(&o).contains(why),
            "{}",
            text(&o)
        );
    }
}

/// A `net_memif` port with `dpdk-testpmd` as the peer (another DPDK process, its own file
/// prefix): a capture replayed into the switch goes out by the memif port, testpmd sends each
/// frame straight back (`io` forwarding on its one port), and the switch writes what returns
/// to a capture, which must equal the input byte for byte. memif needs a shared EAL
/// configuration in both processes (`--legacy-mem` for flowpath, as for OVS).
#[test]
fn net_memif_carries_frames_to_testpmd_and_back() {
    let test = "net_memif_carries_frames_to_testpmd_and_back";
    if !is_root(test) {
        return;
    }
    let Some(testpmd) = in_path("dpdk-testpmd") else {
        eprintln!("SKIP {test}: no dpdk-testpmd (Debian's dpdk package)");
        return;
    };
    let (dir, _rm) = scratch_dir("flowpath-dpdk-memif");
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/plain_8.pcap");
    let input = netdev::pcap::read_file(&fixture).unwrap();
    let (inp, out, sock) = (
        dir.join("in.pcap"),
        dir.join("out.pcap"),
        dir.join("memif.sock"),
    );
    std::fs::copy(&fixture, &inp).unwrap();
    let cfg = dir.join("sw.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[datapath]
dpdk-init = true
dpdk-extra = "{EAL_EXTRA} --legacy-mem"
dpdk-socket-mem = "512"

[[bridge]]
name = "br0"
flows = ["in_port=3,actions=output:1", "in_port=1,actions=output:2"]

[[bridge.port]]
name = "m0"
type = "dpdk"
ofport = 1
options = {{ dpdk-devargs = "net_memif0,role=server,socket={}" }}

[[bridge.port]]
name = "p2"
type = "dpdk"
ofport = 2
options = {{ dpdk-devargs = "net_pcap_mo,tx_pcap={}" }}
"#,
            sock.display(),
            out.display()
        ),
    )
    .unwrap();
    let rundir = dir.join("run");
    let switch = Running::start(&cfg, &rundir);
    // testpmd keeps its shared configuration under its prefix: removed once it is gone.
    let peer_prefix = format!("fpmemif{}", std::process::id());
    let mut peer = Command::new(testpmd)
        .args(["--no-huge", "-m", "256", "--no-pci", "--lcores", "(0,1)@0"])
        .arg(format!("--file-prefix={peer_prefix}"))
        .arg(format!(
            "--vdev=net_memif0,role=client,socket={}",
            sock.display()
        ))
        .args([
            "--log-level=lib.eal:warning",
            "--",
            "-i",
            "--total-num-mbufs=8192",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let kill_peer = KillOnDrop(peer.id());
    let mut cmds = peer.stdin.take().unwrap();
    use std::io::Write as _;
    writeln!(cmds, "set fwd io\nstart").unwrap();
    // The frames go in only once the memif connection is up: before, the port drops them.
    let up = wait_until(Duration::from_secs(20), || {
        text(&ctl(&rundir, &["port/stats", "m0"])).starts_with("m0 1: (dpdk) link up")
    });
    assert!(
        up,
        "memif never up: {}",
        text(&ctl(&rundir, &["port/stats", "m0"]))
    );
    let devargs = format!("options:dpdk-devargs=net_pcap_mi,rx_pcap={}", inp.display());
    let n = input.len();
    let (mut back, mut sent) = (false, 0);
    for _ in 0..5 {
        sent += n;
        // Its number asked for: a number freed by del-port is not handed out again at once.
        let o = ctl(
            &rundir,
            &["add-port", "br0", "p3", "type=dpdk", &devargs, "ofport=3"],
        );
        assert!(o.status.success(), "{}", text(&o));
        back = wait_until(Duration::from_secs(5), || {
            text(&ctl(&rundir, &["port/stats", "p2"])).contains(&format!("tx packets:{n} "))
        });
        // Just after the memif link comes up, the client may not take frames yet: DPDK's
        // memif drops the burst (counted in m0's tx drops), or testpmd, not forwarding yet,
        // does, and nothing comes back. Then the capture is replayed again; anything else is
        // a failure.
        let nothing_back = text(&ctl(&rundir, &["port/stats", "p2"])).contains("tx packets:0 ");
        if back || !nothing_back {
            break;
        }
        assert!(ctl(&rundir, &["del-port", "p3"]).status.success());
        std::thread::sleep(Duration::from_millis(500));
    }
    let m0 = text(&ctl(&rundir, &["port/stats", "m0"]));
    writeln!(cmds, "stop\nquit").unwrap();
    drop(cmds);
    let peer_out = peer.wait_with_output().unwrap();
    std::mem::forget(kill_peer);
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{peer_prefix}"));
    assert!(
        back,
        "not all frames came back: {m0}\ntestpmd: {}",
        text(&peer_out)
    );
    // Every frame sent to m0 is counted, sent or dropped; n came back.
    let total = m0
        .lines()
        .find(|l| l.trim_start().starts_with("total"))
        .unwrap_or("");
    let count = |key: &str, nth: usize| -> usize {
        total
            .split_whitespace()
            .filter_map(|w| w.strip_prefix(key))
            .nth(nth)
            .and_then(|v| v.parse().ok())
            .unwrap_or(usize::MAX)
    };
    // "rx packets:R bytes:B dropped:D  tx packets:T bytes:B dropped:D".
    let (tx, tx_dropped) = (count("packets:", 1), count("dropped:", 1));
    assert!(
        tx >= n && tx + tx_dropped == sent,
        "{sent} sent to m0: {m0}"
    );
    assert!(m0.contains(&format!("rx packets:{n} ")), "{m0}");
    let forwarded = String::from_utf8_lossy(&peer_out.stdout);
    assert!(
        forwarded.contains(&format!("RX-packets: {n}")),
        "testpmd: {forwarded}"
    );
    let pid = switch.exit(&rundir);
    let own = format!("/var/run/dpdk/flowpath{pid}");
    assert!(!std::path::Path::new(&own).exists(), "{own} left behind");
    assert_capture_is(&out, &input);
}

/// The path of `tool` in `PATH`.
fn in_path(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// Kills process `.0` when dropped, so that a test that fails leaves no process behind
/// (forgotten once the process was reaped).
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

/// A `flowpath run` of the tests, killed when dropped unless it was told to exit.
struct Running(Option<std::process::Child>);

impl Running {
    /// Starts `flowpath run` on `cfg` and waits for its control socket in `rundir`.
    fn start(cfg: &std::path::Path, rundir: &std::path::Path) -> Running {
        let mut child = Command::new(bin())
            .args(["run", "--config", cfg.to_str().unwrap(), "--rundir"])
            .arg(rundir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while !rundir.join("flowpath.ctl").exists() {
            if let Some(s) = child.try_wait().unwrap() {
                let o = child.wait_with_output().unwrap();
                panic!("flowpath exited ({s}): {}", text(&o));
            }
            if t.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                panic!("no control socket");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Running(Some(child))
    }

    /// Asks the switch to exit and waits until it has; its process id.
    fn exit(mut self, rundir: &std::path::Path) -> u32 {
        let mut child = self.0.take().unwrap();
        let pid = child.id();
        assert!(ctl(rundir, &["exit"]).status.success());
        let t = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if t.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                panic!("flowpath did not stop");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        pid
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A `dpdk` port on DPDK's `net_virtio_user`, the guest side of vhost-user, driving the
/// switch's own `vhostuser` port: a capture replayed into the switch goes out by the vhost
/// port into the virtio device's receive ring, is sent back by the `dpdk` port through its
/// transmit ring into the vhost port, and is written to a capture equal to the input: both
/// of the vhost port's rings carry every frame.
#[test]
fn net_virtio_user_drives_the_switchs_own_vhost_user_port() {
    let test = "net_virtio_user_drives_the_switchs_own_vhost_user_port";
    if !is_root(test) {
        return;
    }
    let (dir, _rm) = scratch_dir("flowpath-dpdk-virtio-user");
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/plain_8.pcap");
    let input = netdev::pcap::read_file(&fixture).unwrap();
    let n = input.len();
    let (inp, out, sock) = (
        dir.join("in.pcap"),
        dir.join("out.pcap"),
        dir.join("vu.sock"),
    );
    std::fs::copy(&fixture, &inp).unwrap();
    let cfg = dir.join("sw.toml");
    // The capture port p (added later) feeds v; what v sends reaches the virtio device d,
    // which the flows send back out by d (into v's receive side); what v receives goes to
    // the capture o.
    std::fs::write(
        &cfg,
        format!(
            r#"
{}
[[bridge]]
name = "br0"
flows = ["in_port=4,actions=output:1", "in_port=2,actions=in_port", "in_port=1,actions=output:3"]

[[bridge.port]]
name = "v"
type = "vhostuser"
ofport = 1
options = {{ "vhost-server-path" = "{}" }}

[[bridge.port]]
name = "d"
type = "dpdk"
ofport = 2
options = {{ dpdk-devargs = "net_virtio_user0,path={},queue_size=256" }}

[[bridge.port]]
name = "o"
type = "dpdk"
ofport = 3
options = {{ dpdk-devargs = "net_pcap_vo,tx_pcap={}" }}
"#,
            datapath(),
            sock.display(),
            sock.display(),
            out.display()
        ),
    )
    .unwrap();
    let rundir = dir.join("run");
    let switch = Running::start(&cfg, &rundir);
    let up = wait_until(Duration::from_secs(20), || {
        text(&ctl(&rundir, &["port/stats", "d"])).starts_with("d 2: (dpdk) link up")
    });
    assert!(up, "{}", text(&ctl(&rundir, &["port/stats", "d"])));
    let devargs = format!("options:dpdk-devargs=net_pcap_vi,rx_pcap={}", inp.display());
    let o = ctl(&rundir, &["add-port", "br0", "p", "type=dpdk", &devargs]);
    assert!(o.status.success(), "{}", text(&o));
    let done = wait_until(Duration::from_secs(20), || {
        text(&ctl(&rundir, &["port/stats", "o"])).contains(&format!("tx packets:{n} "))
    });
    let v = text(&ctl(&rundir, &["port/stats", "v"]));
    let d = text(&ctl(&rundir, &["port/stats", "d"]));
    assert!(done, "not every frame came through: {v}\n{d}");
    // Into the guest and back out of it: every frame crosses each ring once.
    assert!(v.contains(&format!("tx packets:{n} ")), "{v}");
    assert!(v.contains(&format!("rx packets:{n} ")), "{v}");
    assert!(d.contains(&format!("rx packets:{n} ")), "{d}");
    assert!(d.contains(&format!("tx packets:{n} ")), "{d}");
    switch.exit(&rundir);
    assert_capture_is(&out, &input);
}

/// A `dpdk` port's link follows its device: a `net_tap` port whose interface is set down
/// reads link down in `port/stats` and, through the stock `ovs-ofctl show` on the bridge's
/// management socket, `LINK_DOWN`; set up again, it is up in both.
#[test]
fn a_dpdk_ports_link_follows_its_device() {
    let test = "a_dpdk_ports_link_follows_its_device";
    if !is_root(test) {
        return;
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        eprintln!("SKIP {test}: no /dev/net/tun");
        return;
    }
    let Some(ofctl) = in_path("ovs-ofctl") else {
        eprintln!("SKIP {test}: no ovs-ofctl (Debian's openvswitch-common)");
        return;
    };
    let (dir, _rm) = scratch_dir("flowpath-dpdk-link");
    let iface = format!("fpdl{}", std::process::id() % 100_000);
    let cfg = dir.join("sw.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
{}
[[bridge]]
name = "br0"

[[bridge.port]]
name = "t0"
type = "dpdk"
ofport = 1
options = {{ dpdk-devargs = "net_tap_dl,iface={iface}" }}
"#,
            datapath()
        ),
    )
    .unwrap();
    let rundir = dir.join("run");
    let switch = Running::start(&cfg, &rundir);
    let mgmt = format!("unix:{}", rundir.join("br0.mgmt").display());
    let show = || {
        let o = Command::new(&ofctl).args(["show", &mgmt]).output().unwrap();
        text(&o)
    };
    let state = |up: bool| {
        let (stats, of) = (
            if up { "link up" } else { "link down" },
            if up {
                "state:      0\n"
            } else {
                "state:      LINK_DOWN\n"
            },
        );
        wait_until(Duration::from_secs(10), || {
            text(&ctl(&rundir, &["port/stats", "t0"])).starts_with(&format!("t0 1: (dpdk) {stats}"))
                && show().contains(of)
        })
    };
    assert!(
        state(true),
        "{}\n{}",
        text(&ctl(&rundir, &["port/stats", "t0"])),
        show()
    );
    must(&["ip", "link", "set", &iface, "down"]);
    assert!(
        state(false),
        "{}\n{}",
        text(&ctl(&rundir, &["port/stats", "t0"])),
        show()
    );
    must(&["ip", "link", "set", &iface, "up"]);
    assert!(
        state(true),
        "{}\n{}",
        text(&ctl(&rundir, &["port/stats", "t0"])),
        show()
    );
    switch.exit(&rundir);
}

/// The capture a `net_pcap` port wrote at `out` holds exactly the frames of `input`.
fn assert_capture_is(out: &std::path::Path, input: &[netdev::pcap::Record]) {
    let got = netdev::pcap::read_file(out).unwrap();
    assert_eq!(got.len(), input.len());
    for (g, i) in got.iter().zip(input) {
        assert_eq!(g.data, i.data);
    }
}
