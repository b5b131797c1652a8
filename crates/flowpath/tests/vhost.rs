//! `vhostuser` and `vhostuserclient` ports through `flowpath run`, end to end: DPDK's
//! `dpdk-testpmd` with a `net_virtio_user` port is the VM (no hugepages, no root), flowpath is
//! configured by a TOML file and watched through `flowpath ctl` (`port/stats`, `dpif/show`).
//! Counts are exact: what testpmd sent is what the switch received and forwarded, what the
//! switch sent is what testpmd received. Tests that need testpmd print a SKIP line without it.

#[path = "../../netdev/tests/testpmd/mod.rs"]
mod testpmd;

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use testpmd::{Running, Testpmd};

/// Generous: a loaded 2-core machine runs testpmd, the switch and the build at once.
const DEADLINE: Duration = Duration::from_secs(20);

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap")
        .join(name)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Waits until `f` gives `Some`, at most [`DEADLINE`]; `what` and `ctx()` explain a failure.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>, ctx: impl Fn() -> String) -> T {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out waiting for {what}\n{}",
            ctx()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// A `flowpath run` on a configuration file, killed on drop; its stderr goes to a file.
struct Switch {
    child: Option<Child>,
    config: PathBuf,
    rundir: PathBuf,
    log: PathBuf,
}

impl Switch {
    /// Writes `config` to `dir/sw.toml` (relative paths in it are from `dir`) and starts it.
    fn start(dir: &Path, config: &str) -> Switch {
        let cfg = dir.join("sw.toml");
        std::fs::write(&cfg, config).unwrap();
        let mut s = Switch {
            child: None,
            config: cfg,
            rundir: dir.join("run"),
            log: dir.join("flowpath.log"),
        };
        s.restart();
        s
    }

    /// Starts the switch again on the same configuration and run directory, and waits until
    /// its control socket answers (a socket left by a killed switch does not).
    fn restart(&mut self) {
        assert!(self.child.is_none());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        self.child = Some(
            Command::new(bin())
                .arg("run")
                .arg("--config")
                .arg(&self.config)
                .arg("--rundir")
                .arg(&self.rundir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        let end = Instant::now() + DEADLINE;
        while !self.try_ctl(&["dpif/show"]).status.success() {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("flowpath exited ({st}):\n{}", self.log());
            }
            assert!(
                Instant::now() < end,
                "timed out waiting for the control socket\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills it at once (SIGKILL: no cleanup of any kind).
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// What it printed on stderr so far.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn try_ctl(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .arg("ctl")
            .arg("--rundir")
            .arg(&self.rundir)
            .args(args)
            .output()
            .unwrap()
    }

    /// `flowpath ctl ARGS`, which must succeed: its stdout.
    fn ctl(&self, args: &[&str]) -> String {
        let o = self.try_ctl(args);
        let (out, err) = text(&o);
        assert!(
            o.status.success(),
            "ctl {args:?}: {err}\nflowpath:\n{}",
            self.log()
        );
        out
    }

    /// The totals of `port/stats PORT`.
    fn stats(&self, port: &str) -> Counters {
        Counters::parse(&self.ctl(&["port/stats", port]))
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The `total` row of `port/stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counters {
    rx_packets: u64,
    rx_bytes: u64,
    rx_dropped: u64,
    tx_packets: u64,
    tx_bytes: u64,
    tx_dropped: u64,
    errors: u64,
}

impl Counters {
    /// From `  total  rx packets:N bytes:N dropped:N  tx packets:N bytes:N dropped:N  errors:N`.
    fn parse(stats: &str) -> Counters {
        let line = stats
            .lines()
            .find(|l| l.trim_start().starts_with("total "))
            .unwrap_or_else(|| panic!("no total in {stats}"));
        let n: Vec<u64> = line
            .split_whitespace()
            .filter_map(|w| w.split_once(':'))
            .map(|(_, v)| v.parse().unwrap())
            .collect();
        let [
            rx_packets,
            rx_bytes,
            rx_dropped,
            tx_packets,
            tx_bytes,
            tx_dropped,
            errors,
        ] = n[..]
        else {
            panic!("unexpected total row: {line}");
        };
        Counters {
            rx_packets,
            rx_bytes,
            rx_dropped,
            tx_packets,
            tx_bytes,
            tx_dropped,
            errors,
        }
    }
}

/// A bridge with the vhost port `vm` (of `kind`, on `vm.sock` next to the configuration),
/// `more` ports after it and `flows`. The PMD runs on core 0: testpmd forwards on core 1.
fn config(kind: &str, flows: &[&str], more: &str) -> String {
    let flows: Vec<String> = flows.iter().map(|f| format!("{f:?}")).collect();
    format!(
        r#"[datapath]
pmd-cpu-mask = "0x1"

[[bridge]]
name = "br0"
flows = [{}]

[[bridge.port]]
name = "vm"
type = "{kind}"
options = {{ "vhost-server-path" = "vm.sock" }}
{more}"#,
        flows.join(", ")
    )
}

const SINK: &str = r#"
[[bridge.port]]
name = "sink"
type = "sink"
"#;

/// Everything a failed test should show.
fn both(sw: &Switch, pmd: &Running) -> String {
    format!("flowpath:\n{}\ntestpmd:\n{}", sw.log(), pmd.output())
}

/// `dpif/show`'s line for port `vm`.
fn vm_line(sw: &Switch) -> String {
    let show = sw.ctl(&["dpif/show"]);
    show.lines()
        .find(|l| l.trim_start().starts_with("vm "))
        .unwrap_or_else(|| panic!("no vm in {show}"))
        .to_owned()
}

// ---- 1. server mode: testpmd txonly → vm → sink ------------------------------------------------

#[test]
fn vhostuser_txonly_into_the_switch_reaches_the_sink_exactly() {
    let Some(t) = Testpmd::available("vu_txonly_e2e") else {
        return;
    };
    let dir = t.dir();
    let sw = Switch::start(
        &dir,
        &config("vhostuser", &["in_port=vm,actions=output:sink"], SINK),
    );
    // The switch made the socket (relative to the configuration's directory).
    let sock = dir.join("vm.sock");
    assert!(sock.exists(), "{}", sw.log());
    let mut pmd = t.spawn(&format!("path={}", sock.display()));
    pmd.cmd("set fwd txonly");
    pmd.cmd("start");
    wait_for(
        "the sink to receive",
        || (sw.stats("sink").tx_packets >= 10_000).then_some(()),
        || both(&sw, &pmd),
    );
    pmd.cmd("stop");
    let sent = pmd.port_stats();
    assert!(sent.tx_packets > 0, "{}", both(&sw, &pmd));
    // testpmd has stopped sending; the switch drains what is left in the ring.
    let (vm, sink) = wait_for(
        "the switch to drain the guest's ring",
        || {
            let (vm, sink) = (sw.stats("vm"), sw.stats("sink"));
            (vm.rx_packets == sent.tx_packets && sink.tx_packets == sent.tx_packets)
                .then_some((vm, sink))
        },
        || {
            format!(
                "testpmd sent {sent:?}; vm {:?}; sink {:?}\n{}",
                sw.stats("vm"),
                sw.stats("sink"),
                both(&sw, &pmd)
            )
        },
    );
    eprintln!("testpmd sent {sent:?}\nvm {vm:?}\nsink {sink:?}");
    assert_eq!(vm.rx_bytes, sent.tx_bytes, "{vm:?} {sent:?}");
    assert_eq!(sink.tx_bytes, sent.tx_bytes, "{sink:?} {sent:?}");
    assert_eq!((vm.rx_dropped, vm.errors), (0, 0), "{vm:?}");
    // `dpctl/show -s` has the same count in OVS's layout.
    let show = sw.ctl(&["dpctl/show", "-s"]);
    let rx = show
        .lines()
        .skip_while(|l| !l.contains(": vm (vhostuser"))
        .find_map(|l| l.trim().strip_prefix("RX packets:"))
        .and_then(|r| r.split(' ').next()?.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{show}"));
    assert_eq!(rx, sent.tx_packets, "{show}");
    pmd.quit();
}

// ---- 2. client mode: replay → vm → testpmd rxonly ------------------------------------------

#[test]
fn vhostuserclient_replay_to_testpmd_rxonly_counts_match() {
    let Some(t) = Testpmd::available("vuc_rxonly_e2e") else {
        return;
    };
    let dir = t.dir();
    let sock = dir.join("vm.sock");
    // testpmd serves the socket and waits there for the switch.
    let mut pmd = t.spawn_fwd(&format!("path={},server=1", sock.display()), "rxonly");
    let replay = format!(
        "\n[[bridge.port]]\nname = \"p0\"\ntype = \"replay\"\noptions = {{ pcap = {:?} }}\n",
        fixture("plain_8.pcap").display().to_string()
    );
    // The replay is dropped until testpmd forwards: a virtio device flushes its receive
    // ring when it starts, and frames flushed then are in no counter of testpmd's.
    let sw = Switch::start(
        &dir,
        &config("vhostuserclient", &["in_port=p0,actions=drop"], &replay),
    );
    pmd.ready();
    let o = Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .arg("ofctl")
        .arg("--rundir")
        .arg(&sw.rundir)
        .args(["mod-flows", "br0", "in_port=p0,actions=output:vm"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    wait_for(
        "frames to reach testpmd",
        || (sw.stats("vm").tx_packets >= 10_000).then_some(()),
        || both(&sw, &pmd),
    );
    // The replay source goes (what it had batched is sent first); testpmd takes in the rest.
    sw.ctl(&["del-port", "p0"]);
    // Done when the port's counters held still over one round trip to testpmd and testpmd
    // has all of it.
    let end = Instant::now() + DEADLINE;
    let mut last = Counters::default();
    let vm = loop {
        let vm = sw.stats("vm");
        let got = pmd.port_stats().rx_packets;
        if vm == last && got == vm.tx_packets {
            break vm;
        }
        assert!(
            Instant::now() < end,
            "timed out waiting for testpmd to receive everything the switch sent: \
             testpmd {got}, vm {vm:?}\n{}",
            both(&sw, &pmd)
        );
        last = vm;
        thread::sleep(Duration::from_millis(20));
    };
    pmd.cmd("stop");
    let got = pmd.port_stats();
    eprintln!("testpmd received {got:?}\nvm {vm:?}");
    // Frames the guest had no buffers for are the port's tx drops; the others all arrived.
    assert!(vm.tx_packets > 0, "{vm:?}");
    assert_eq!(got.rx_packets, vm.tx_packets, "{got:?} {vm:?}");
    assert_eq!(got.rx_bytes, vm.tx_bytes, "{got:?} {vm:?}");
    assert_eq!(vm.errors, 0, "{vm:?}");
    assert_eq!(sw.stats("vm"), vm, "nothing more was sent");
    pmd.quit();
}

// ---- 3. what dpif/show and port/stats tell; bad configurations ----------------------------

#[test]
fn dpif_show_tells_the_connection_and_port_stats_the_link() {
    let Some(t) = Testpmd::available("vu_show_e2e") else {
        return;
    };
    let dir = t.dir();
    let sw = Switch::start(&dir, &config("vhostuser", &[], SINK));
    let sock = dir.join("vm.sock");
    let line = vm_line(&sw);
    assert!(
        line.contains(&format!(
            "vm 1/1: (vhostuser: vhost-server-path={}",
            sock.display()
        )),
        "{line}"
    );
    assert!(line.contains("status=disconnected"), "{line}");
    let stats = sw.ctl(&["port/stats", "vm"]);
    assert!(
        stats.starts_with("vm 1: (vhostuser) link down\n"),
        "{stats}"
    );
    assert!(
        stats.contains("\n  rx0 ") && stats.contains("\n  tx0 "),
        "{stats}"
    );

    let mut pmd = t.spawn(&format!("path={}", sock.display()));
    pmd.ready();
    let line = wait_for(
        "both rings to start",
        || {
            let l = vm_line(&sw);
            l.contains("queues=1/1").then_some(l)
        },
        || format!("{}\n{}", vm_line(&sw), both(&sw, &pmd)),
    );
    assert!(line.contains("status=connected"), "{line}");
    let features = line
        .split_once("features=")
        .map(|(_, f)| f)
        .unwrap_or_else(|| panic!("{line}"));
    for f in ["VERSION_1", "MRG_RXBUF"] {
        assert!(features.contains(f), "{f}: {line}");
    }
    // Not offered, so never negotiated.
    assert!(!features.contains("RING_PACKED"), "{line}");
    assert!(
        sw.ctl(&["port/stats", "vm"])
            .starts_with("vm 1: (vhostuser) link up\n"),
        "{}",
        both(&sw, &pmd)
    );
    let log = sw.log();
    assert!(log.contains("vhost port 'vm': connected"), "{log}");

    // The VM goes away: the port says so, and the switch keeps running.
    pmd.quit();
    wait_for(
        "the port to see testpmd gone",
        || vm_line(&sw).contains("status=disconnected").then_some(()),
        || format!("{}\n{}", vm_line(&sw), sw.log()),
    );
    assert!(
        sw.ctl(&["port/stats", "vm"])
            .starts_with("vm 1: (vhostuser) link down\n"),
        "{}",
        sw.log()
    );
}

/// Bad options are reported naming the port, the line and the key, by `check-config` and by
/// `run` (exit 1, no control socket left behind); a path that is not a socket is refused
/// when the port opens. Needs no testpmd.
#[test]
fn bad_vhost_configuration_is_reported() {
    let (dir, _rm) = common::scratch_dir("flowpath-vhost-bad");
    let bad = [
        (
            "vhostuserclient",
            "n_rxq = 1",
            "type vhostuserclient needs option vhost-server-path",
        ),
        (
            "vhostuser",
            "\"vhost-server-path\" = \"vm.sock\", n_rxq = 0",
            "n_rxq: 0 is not between 1 and 16",
        ),
        (
            "vhostuserclient",
            "\"vhost-server-path\" = \"vm.sock\", n_rxq = \"two\"",
            "n_rxq: 'two' is not a number",
        ),
        (
            "vhostuser",
            "\"vhost-server-path\" = \"vm.sock\", bogus = 1",
            "unknown option 'bogus' for type vhostuser",
        ),
        (
            "vhostuserclient",
            "\"vhost-server-path\" = \"vm.sock\", vhost_server_path = \"x\"",
            "unknown option 'vhost_server_path' for type vhostuserclient",
        ),
        (
            "vhostuser",
            "\"vhost-server-path\" = \"\"",
            "vhost-server-path: '' is empty",
        ),
        (
            "vhostuser",
            "mtu_request = 20000",
            "mtu_request: 20000 is not between 68 and 9702",
        ),
        (
            "vhostuser",
            "mac = \"02:00:00\"",
            "mac: '02:00:00' is not a MAC address",
        ),
        ("vhostuser", "csum_offload = \"maybe\"", "csum_offload"),
        ("vhostuser", "tso = 3", "tso"),
    ];
    for (kind, options, want) in bad {
        let (code, err) = common::check_config(&dir, "vm", kind, options);
        assert_eq!(code, Some(1), "{kind} {{ {options} }}: {err}");
        assert!(
            err.contains("line 7: port 'vm': ") && err.contains(want),
            "{kind} {{ {options} }}: want '{want}' in: {err}"
        );
    }
    // Good options pass without anything being opened (no socket is made, none needed).
    for (kind, options) in [
        ("vhostuser", ""),
        (
            "vhostuser",
            "\"vhost-server-path\" = \"vm.sock\", n_rxq = 4, mtu_request = 9000, \
             mac = \"02:00:00:00:00:01\", csum_offload = false, tso = false",
        ),
        (
            "vhostuserclient",
            "\"vhost-server-path\" = \"/nonexistent/vm.sock\", n_rxq = \"2\"",
        ),
    ] {
        let (code, err) = common::check_config(&dir, "vm", kind, options);
        assert_eq!(code, Some(0), "{kind} {{ {options} }}: {err}");
    }
    assert!(!dir.join("vm.sock").exists());

    // `run` refuses the same, and a path that exists but is not a socket.
    std::fs::write(dir.join("file"), "not a socket").unwrap();
    for (options, want) in [
        ("n_rxq = 0", "n_rxq: 0 is not between 1 and 16".to_owned()),
        (
            "\"vhost-server-path\" = \"file\"",
            format!(
                "port vm (vhostuser): vhost-server-path: {} exists and is not a socket",
                dir.join("file").display()
            ),
        ),
    ] {
        let (code, err) = common::run_fails(&dir, &common::one_port("vm", "vhostuser", options));
        assert_eq!(code, Some(1), "{options}: {err}");
        assert!(err.contains(&want), "{options}: want '{want}' in: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!dir.join("run/flowpath.ctl").exists(), "{options}");
    }
    assert!(
        std::fs::metadata(dir.join("file")).unwrap().is_file(),
        "the file is left alone"
    );
}

// ---- 4. the switch restarts under a VM that stays ---------------------------------------------

#[test]
fn vhostuserclient_traffic_resumes_after_each_switch_kill() {
    let Some(t) = Testpmd::available("vuc_restart_e2e") else {
        return;
    };
    let dir = t.dir();
    let sock = dir.join("vm.sock");
    let pmd = t.spawn_fwd(&format!("path={},server=1", sock.display()), "txonly");
    let mut sw = Switch::start(
        &dir,
        &config("vhostuserclient", &["in_port=vm,actions=output:sink"], SINK),
    );
    for round in 0..=3 {
        if round > 0 {
            // As a crash: the connection drops with the process, nothing is said to testpmd.
            sw.kill();
            sw.restart();
        }
        // A new switch counts from zero: any packet at the sink came from this connection.
        // (A ring the port took out of service would never carry anything: stop waiting.)
        let t0 = Instant::now();
        wait_for(
            &format!("traffic after restart {round}"),
            || {
                let reset = vm_line(&sw).contains("ring_resets=");
                (reset || sw.stats("sink").tx_packets > 0).then_some(())
            },
            || format!("{}\n{}", vm_line(&sw), both(&sw, &pmd)),
        );
        eprintln!("restart {round}: traffic after {:?}", t0.elapsed());
        let line = vm_line(&sw);
        assert!(
            !line.contains("ring_resets="),
            "restart {round}: the port reset a ring of the testpmd that stayed: {line}\n{}",
            both(&sw, &pmd)
        );
        let vm = sw.stats("vm");
        assert_eq!((vm.rx_dropped, vm.errors), (0, 0), "round {round}: {vm:?}");
        assert!(
            vm_line(&sw).contains("status=connected"),
            "{}",
            vm_line(&sw)
        );
    }
    let log = sw.log();
    assert_eq!(
        log.matches("vhost port 'vm': connected").count(),
        4,
        "one connection per switch:\n{log}"
    );
}

// ---- 5. a QEMU guest with Linux's virtio-net driver -------------------------------------

/// The guest (`scripts/guest-image`): the host's kernel and an initramfs of busybox and the
/// virtio modules whose init brings eth0 up as 10.99.0.2/24, runs the shell commands `job` and
/// powers off. `Err` names what is missing.
fn guest_image(dir: &Path, job: &str) -> Result<(PathBuf, PathBuf), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/guest-image");
    let job_file = dir.join("job.sh");
    std::fs::write(
        &job_file,
        format!("ip addr add 10.99.0.2/24 dev eth0\n{job}\n"),
    )
    .unwrap();
    let o = Command::new(script)
        .arg(dir)
        .arg(&job_file)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    if !o.status.success() {
        return Err(err.trim().to_owned());
    }
    Ok((PathBuf::from(out.trim()), dir.join("initrd.gz")))
}

/// Starts the guest of `kernel` and `initrd` on a virtio-net device whose vhost-user socket is
/// `dir/vm.sock`, its console in `dir/serial.txt`. Under TCG (KVM, where there is one, is not
/// needed) and with MSI-X off (`vectors=0`: QEMU 7.2 under TCG crashes binding MSI-X
/// notifiers for vhost-user), so the guest's interrupts come through the call eventfd as INTx.
fn start_guest(dir: &Path, kernel: &Path, initrd: &Path) -> Child {
    Command::new("qemu-system-x86_64")
        .args(["-machine", "q35,accel=tcg", "-cpu", "max", "-m", "256"])
        .args(["-object", "memory-backend-memfd,id=mem,size=256M,share=on"])
        .args(["-numa", "node,memdev=mem", "-kernel"])
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
        .args([
            "-append",
            "console=ttyS0 quiet panic=-1",
            "-display",
            "none",
        ])
        .arg("-serial")
        .arg(format!("file:{}", dir.join("serial.txt").display()))
        .arg("-no-reboot")
        .arg("-chardev")
        .arg(format!(
            "socket,id=c0,path={}",
            dir.join("vm.sock").display()
        ))
        .args(["-netdev", "vhost-user,id=n0,chardev=c0"])
        .args([
            "-device",
            "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56,romfile=,vectors=0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for guest `vm` to power off (killed after 240 s); how it ended (`None`: killed) and
/// its console.
fn wait_guest(mut vm: Child, dir: &Path) -> (Option<std::process::ExitStatus>, String) {
    // TCG boots in seconds on an idle machine; a loaded CI machine gets minutes.
    let end = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(s) = vm.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > end {
            let _ = vm.kill();
            let _ = vm.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(200));
    };
    let console = std::fs::read_to_string(dir.join("serial.txt")).unwrap_or_default();
    (status, console)
}

/// The kernel and initramfs of a guest that runs `job`, or `None` after a SKIP line naming
/// what is missing (QEMU, a kernel image, a static busybox).
fn guest(test: &str, dir: &Path, job: &str) -> Option<(PathBuf, PathBuf)> {
    if Command::new("qemu-system-x86_64")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIP {test}: no qemu-system-x86_64 (Debian package qemu-system-x86)");
        return None;
    }
    guest_image(dir, job)
        .map_err(|e| eprintln!("SKIP {test}: {e}"))
        .ok()
}

/// A QEMU VM with Linux's own virtio-net driver (interrupt-driven, mergeable receive
/// buffers, its own feature choices) on a `vhostuser` port pings testpmd's `icmpecho` on
/// another: ARP and ICMP both ways through NORMAL. Skipped when QEMU, a kernel image,
/// busybox or testpmd are missing.
#[test]
fn a_qemu_guest_pings_through_the_switch() {
    let test = "a_qemu_guest_pings_through_the_switch";
    let Some(t) = Testpmd::available("vu_qemu_e2e") else {
        return;
    };
    let dir = t.dir();
    let job =
        "if ping -c 5 -W 5 10.99.0.1; then echo GUEST-PING-OK; else echo GUEST-PING-FAILED; fi";
    let Some((kernel, initrd)) = guest(test, &dir, job) else {
        return;
    };
    let tp = r#"
[[bridge.port]]
name = "tp"
type = "vhostuser"
options = { "vhost-server-path" = "tp.sock" }
"#;
    let sw = Switch::start(&dir, &config("vhostuser", &["actions=NORMAL"], tp));
    let mut pmd = t.spawn_fwd(
        &format!("path={}", dir.join("tp.sock").display()),
        "icmpecho",
    );
    pmd.ready();
    let vm = start_guest(&dir, &kernel, &initrd);
    let (status, console) = wait_guest(vm, &dir);
    let stats = sw.stats("vm");
    pmd.quit();
    assert!(
        status.is_some() && console.contains("GUEST-PING-OK"),
        "guest console:\n{console}\nvm port: {stats:?}\nflowpath:\n{}",
        sw.log()
    );
    assert!(stats.rx_packets >= 6 && stats.tx_packets >= 6, "{stats:?}");
    assert_eq!((stats.errors, stats.rx_dropped), (0, 0), "{stats:?}");
}

/// Names of this binary's network namespaces and directories.
static NAMES: common::netns::Names = common::netns::Names {
    netns: "fpv",
    dir: "flowpath-vhost",
    root_for: "a network namespace and a tap",
    ifname_max: 15,
};

/// What the host behind the tap runs: connects to the guest's port `sys.argv[1]` as soon as
/// it listens, sends 4 MiB and waits for the guest to close.
const SEND_4MIB: &str = "import socket, sys, time
end = time.time() + 200
while True:
    try:
        s = socket.create_connection(('10.99.0.2', int(sys.argv[1])), timeout=5)
        break
    except OSError:
        if time.time() > end:
            sys.exit('the guest never listened')
        time.sleep(0.5)
s.sendall(b'Z' * (4 << 20))
s.shutdown(socket.SHUT_WR)
s.settimeout(120)
s.recv(1)
";

/// A QEMU guest's Linux takes TCP super-frames whole: it accepts `GUEST_TSO4/6` and
/// `GUEST_CSUM`, so the 64 KiB super-frames a host's kernel hands its `tap` port cross the
/// switch and go into the guest's ring as they are, where its stack takes them as one; 4 MiB
/// arrive in far fewer frames than the 2 900 segments they are on a wire. Then with the
/// host's TSO and GSO off its kernel hands the tap 1 448-byte segments, and the vhost port's
/// GRO merges each burst's into super-frames for the guest. One guest boot for both.
#[test]
fn a_qemu_guest_receives_tcp_super_frames_whole_and_segments_merged() {
    let test = "a_qemu_guest_receives_tcp_super_frames_whole_and_segments_merged";
    let tools = ["ip", "python3", "ethtool"];
    let Some(mut env) = common::netns::Env::new(test, "gt", &tools, &NAMES) else {
        return;
    };
    // The driver's negotiated features (a bit string, bit 0 first), then two transfers.
    let job = "for f in /sys/bus/virtio/devices/*/features; do echo GUEST-FEATURES-$(cat $f); done\n\
               n=$(nc -l -p 5001 | wc -c); echo GUEST-GOT-$n\n\
               n=$(nc -l -p 5002 | wc -c); echo GUEST-GOT-$n";
    let Some((kernel, initrd)) = guest(test, &env.dir, job) else {
        return;
    };
    let _slot = common::netns::slot();
    let host = env.netns("h");
    let tap = env.ifname("fpvt");
    let tp = format!(
        "\n[[bridge.port]]\nname = \"tp\"\ntype = \"tap\"\n\
         options = {{ ifname = \"{tap}\", netns = \"{host}\" }}\n"
    );
    let sw = Switch::start(&env.dir, &config("vhostuser", &["actions=NORMAL"], &tp));
    let up = common::netns::wait_until(DEADLINE, || {
        common::netns::run(&["ip", "-n", &host, "link", "show", &tap]).is_ok()
    });
    assert!(up, "no tap {tap} in {host}:\n{}", sw.log());
    let in_host = |args: &[&str]| common::netns::must(&common::netns::in_ns(&host, args));
    in_host(&["ip", "addr", "add", "10.99.0.1/24", "dev", &tap]);
    in_host(&["ip", "link", "set", &tap, "up"]);
    let vm = start_guest(&env.dir, &kernel, &initrd);
    let send = |port: &str| {
        let o = Command::new("ip")
            .args(["netns", "exec", &host, "python3", "-c", SEND_4MIB, port])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "sender: {}\nflowpath:\n{}",
            String::from_utf8_lossy(&o.stderr),
            sw.log()
        );
        sw.stats("vm").tx_packets
    };
    let whole = send("5001");
    in_host(&["ethtool", "-K", &tap, "tso", "off", "gso", "off"]);
    let merged = send("5002") - whole;
    let xstats = sw.ctl(&["port/stats", "vm"]);
    let (status, console) = wait_guest(vm, &env.dir);
    let stats = sw.stats("vm");
    eprintln!("{test}: 4 MiB in {whole} frames, then in {merged}\n{xstats}");
    assert!(
        status.is_some() && console.matches("GUEST-GOT-4194304").count() == 2,
        "guest console:\n{console}\nvm port: {stats:?}\nflowpath:\n{}",
        sw.log()
    );
    // GUEST_CSUM (bit 1), GUEST_TSO4 (7), GUEST_TSO6 (8).
    let features = console
        .lines()
        .find_map(|l| l.trim().strip_prefix("GUEST-FEATURES-"))
        .unwrap_or_default()
        .as_bytes();
    let on = |bit: usize| features.get(bit) == Some(&b'1');
    assert!(on(1) && on(7) && on(8), "guest features {console}");
    // Segments of 1448 bytes would be 2 897 frames; super-frames are a fraction of that.
    assert!(whole < 700, "the super-frames were cut: {whole} frames");
    assert!(
        merged < 700,
        "the segments were not merged: {merged} frames"
    );
    let gro_segments = xstats
        .lines()
        .find_map(|l| l.trim().strip_prefix("xstats tx_gro_segments:"))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(gro_segments > Some(2000), "{xstats}");
    // Frames for the guest before its driver has started its rings, or while a TCG guest is
    // slow to give buffers back, are counted drops (`tx_dropped`) that TCP sends again.
    assert_eq!(stats.errors, 0, "{stats:?}");
}

// ---- 6. the PVP benchmark scenario ----------------------------------------------------------

/// `flowpath bench pvp` starts testpmd as the VM, and what comes back to the sink is what
/// macswap makes of the replayed frames (the bench checks sampled frames byte for byte and
/// fails otherwise); the round trip's figures are there. At 1518 bytes the frames coming back
/// are lent from the guest's buffers to the sink, which brings the sampled ones in. Skipped
/// without testpmd.
#[test]
fn bench_pvp_runs_through_a_testpmd_vm() {
    let Some(_t) = Testpmd::available("bench_pvp") else {
        return;
    };
    for size in ["64", "1518"] {
        let o = Command::new(bin())
            .args(["bench", "pvp", "--flows", "8", "--seconds", "1", "--json"])
            .args(["--frame-size", size])
            .output()
            .unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "{size}: {out}\n{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["forwarded_ok"], true, "{size}: {out}");
        assert!(v["sink_packets"].as_u64().unwrap() > 0, "{size}: {out}");
        assert!(v["samples_checked"].as_u64().unwrap() > 0, "{size}: {out}");
        assert!(v["guest_ring_drops"].is_u64(), "{size}: {out}");
    }
}
