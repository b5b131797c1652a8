//! `flowpath run` with `type = "dpdk"` ports on DPDK's virtual devices (cargo feature
//! `dpdk`): a capture through `net_pcap` in and out byte for byte, statistics and xstats on
//! the control socket, and ports added and removed while the switch runs, a bad
//! `dpdk-devargs` failing only its port. DPDK runs on ordinary memory (`--no-huge`): the
//! host's hugepages are left alone. Without root the test prints SKIP and returns.
#![cfg(feature = "dpdk")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
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

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn dpdk_ports_forward_a_capture_and_come_and_go_at_run_time() {
    let test = "dpdk_ports_forward_a_capture_and_come_and_go_at_run_time";
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIP {test}: DPDK's EAL needs root");
        return;
    }
    let d = Dir(std::env::temp_dir().join(format!("flowpath-dpdk-{}", std::process::id())));
    std::fs::create_dir_all(&d.0).unwrap();
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap/plain_8.pcap");
    let input = netdev::pcap::read_file(&fixture).unwrap();
    let (inp, out) = (d.0.join("in.pcap"), d.0.join("out.pcap"));
    std::fs::copy(&fixture, &inp).unwrap();
    let cfg = d.0.join("sw.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[datapath]
dpdk-init = true
dpdk-extra = "--no-huge --no-pci --log-level=lib.eal:warning"
dpdk-socket-mem = "512"

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
            inp.display(),
            out.display()
        ),
    )
    .unwrap();
    let rundir = d.0.join("run");
    let mut child = Command::new(bin())
        .args(["run", "--config", cfg.to_str().unwrap(), "--rundir"])
        .arg(&rundir)
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
        assert!(t.elapsed() < Duration::from_secs(30), "no control socket");
        std::thread::sleep(Duration::from_millis(50));
    }
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
        show.contains("port 1: p0 (dpdk: dpdk-devargs=net_pcap_fr0"),
        "{show}"
    );
    assert!(
        show.contains(&format!("    rx_good_packets:{n}\n")),
        "{show}"
    );

    // A port added and removed while the switch runs; a bad one fails alone.
    let o = ctl(
        &rundir,
        &[
            "add-port",
            "br0",
            "p2",
            "type=dpdk",
            "options:dpdk-devargs=net_null_fr2,no-rx=1",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&ctl(&rundir, &["dpctl/show"])).contains("p2 (dpdk: dpdk-devargs=net_null_fr2"));
    let o = ctl(
        &rundir,
        &[
            "add-port",
            "br0",
            "p3",
            "type=dpdk",
            "options:dpdk-devargs=net_bogus9",
        ],
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("Error attaching device 'net_bogus9' to DPDK"),
        "{}",
        text(&o)
    );
    assert!(ctl(&rundir, &["del-port", "p2"]).status.success());
    // Its device went with it: the same devargs attaches again.
    let o = ctl(
        &rundir,
        &[
            "add-port",
            "br0",
            "p2",
            "type=dpdk",
            "options:dpdk-devargs=net_null_fr2,no-rx=1",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&ctl(&rundir, &["port/stats", "p0"])).contains(&format!("rx packets:{n} ")));

    assert!(ctl(&rundir, &["exit"]).status.success());
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "flowpath did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The tx device is closed on exit, which finishes its capture.
    let got = netdev::pcap::read_file(&out).unwrap();
    assert_eq!(got.len(), n);
    for (g, i) in got.iter().zip(&input) {
        assert_eq!(g.data, i.data);
    }
}

#[test]
fn check_config_knows_dpdk_options() {
    let d = Dir(std::env::temp_dir().join(format!("flowpath-dpdk-cc-{}", std::process::id())));
    std::fs::create_dir_all(&d.0).unwrap();
    let cfg = d.0.join("sw.toml");
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
