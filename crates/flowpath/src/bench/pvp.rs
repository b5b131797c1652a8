//! `flowpath bench pvp`: physical → virtual → physical, as OVS's PVP tests run it. A replay
//! port p0 (the NIC) feeds the switch, which sends every packet to a `vhostuserclient` port
//! `vm`; behind it DPDK's `dpdk-testpmd` plays the VM (`net_virtio_user` with `server=1`,
//! forward mode `macswap`, no hugepages) and sends each packet back; the switch forwards what
//! comes back from the VM to the sink p1. Each packet crosses the switch twice.
//!
//! The switch's PMD runs on core 1 as in every scenario; testpmd's two lcores are both put on
//! core 0 (its main lcore only waits), so the VM has a core of its own as a real one would.
//! The figures that matter are the sink's rate and the switch's busy cycles per packet that
//! made the round trip (both passes, and the work on any packet the VM's full ring turned
//! away, which is counted as the guest ring's drops).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use datapath::dpif::{Datapath, DatapathBuilder, DpConfig, default_pmd_cores};
use netdev::memory::{ReplayPort, SampleSpec, SinkPort};
use netdev::vhost::{VhostOptions, VhostPort};

use super::BenchOpts;
use super::tunnel::Samples;

/// The datapath flows of the scenario (`dpctl/add-flow` syntax): NIC → VM → sink.
pub const DP_FLOWS: &[(&str, &str)] = &[
    ("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "vm"),
    ("in_port(vm),eth_type(0x0800),ipv4(frag=no)", "p1"),
];

/// What the sink receives for frame `f`: testpmd's `macswap` swapped its addresses.
pub fn expect(f: &[u8]) -> Vec<u8> {
    let mut o = f.to_vec();
    let (d, s) = o.split_at_mut(6);
    d.swap_with_slice(&mut s[..6]);
    o
}

/// The VM: a testpmd process and its socket directory, gone on drop.
pub struct Vm {
    child: Child,
    dir: PathBuf,
    /// DPDK's runtime directory for the process.
    runtime: PathBuf,
    log: Arc<Mutex<String>>,
}

impl Vm {
    /// What testpmd printed (for an error).
    fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(&self.runtime);
    }
}

/// Whether this runs as root (DPDK then keeps its runtime files under /var/run).
fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    })
}

/// Starts testpmd serving `socket` in `macswap` mode.
fn start_vm(dir: PathBuf, socket: &std::path::Path) -> anyhow::Result<Vm> {
    // All of testpmd's threads (its interrupt and telemetry threads too) stay on core 0, off
    // the PMD's core; the runtime directory DPDK makes is removed with the VM.
    let prefix = format!("flowpath-pvp-{}", std::process::id());
    let mut child = Command::new("taskset")
        .args([
            "-c",
            "0",
            "dpdk-testpmd",
            "--lcores=0@0,1@0",
            "--no-telemetry",
            "--no-huge",
            "--no-shconf",
            "-m",
            "512",
            "--no-pci",
            &format!("--file-prefix={prefix}"),
            "--vdev",
            &format!(
                "net_virtio_user0,path={},server=1,queues=1",
                socket.display()
            ),
            "--",
            "--forward-mode=macswap",
            "--auto-start",
            "--total-num-mbufs=16384",
        ])
        // testpmd runs until its standard input ends: the pipe stays open as long as it runs.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context(
            "starting dpdk-testpmd under taskset (the PVP scenario's VM; Debian package \
             dpdk-dev provides it)",
        )?;
    let log = Arc::new(Mutex::new(String::new()));
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let log = log.clone();
        std::thread::spawn(move || {
            let mut pipe = pipe;
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut l) = log.lock() {
                    l.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|_| !is_root())
        .map_or_else(|| PathBuf::from("/var/run"), PathBuf::from)
        .join("dpdk")
        .join(prefix);
    Ok(Vm {
        child,
        dir,
        runtime,
        log,
    })
}

/// Starts the PVP switch and its VM; returns when packets come back from the VM.
pub fn start(
    o: &BenchOpts,
    frames: Vec<Vec<u8>>,
    label: &str,
    sample: SampleSpec,
) -> anyhow::Result<(Datapath, Samples, Vm)> {
    if o.pmds > 1 || o.storm.is_some() || o.openflow {
        bail!("pvp: --pmds, --storm and --openflow are not for this scenario");
    }
    let dir = std::env::temp_dir().join(format!("flowpath-pvp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("{}", dir.display()))?;
    let socket = dir.join("vm.sock");
    let mut vm = start_vm(dir, &socket)?;

    let mut cfg = DpConfig {
        pmd_cores: default_pmd_cores(1),
        ..DpConfig::default()
    };
    cfg.pmd.emc_insert_inv_prob = if o.emc { 100 } else { 0 };
    let mut b = DatapathBuilder::new(cfg);
    let sink = SinkPort::new("p1", sample);
    let samples = sink.samples();
    let mut vo = VhostOptions::for_kind("vhostuserclient")?;
    vo.path = Some(socket);
    let port = VhostPort::open("vm", vo)?;
    b.add_port(1, Box::new(ReplayPort::new("p0", label, frames, 1)))
        .map_err(anyhow::Error::msg)?;
    b.add_port(2, Box::new(sink)).map_err(anyhow::Error::msg)?;
    b.add_port(3, Box::new(port)).map_err(anyhow::Error::msg)?;
    let mut dp = b.start().map_err(anyhow::Error::msg)?;
    for (k, a) in DP_FLOWS {
        dp.add_flow(k, a)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("flow {k} actions:{a}"))?;
    }
    let end = Instant::now() + Duration::from_secs(30);
    while dp.port_counters("vm").unwrap_or_default().rx_packets == 0 {
        if let Ok(Some(st)) = vm.child.try_wait() {
            bail!("dpdk-testpmd exited ({st}):\n{}", vm.log());
        }
        if Instant::now() > end {
            bail!(
                "pvp: nothing came back from the VM in 30 s; testpmd said:\n{}",
                vm.log()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((dp, samples, vm))
}
