//! `flowpath demo [--seconds N] [--rundir DIR]`: the switch on its embedded default, needing no
//! NIC, no root and no configuration: the L3-VPN over VXLAN of seed 001 through the OpenFlow
//! pipeline. The underlay bridge br-phy (10.1.2.8) receives VXLAN from the remote VTEP 10.1.2.9
//! on `phy0` (1000 tenant flows); they are decapsulated and routed to the VM port `vm0` by
//! br-int's rules. The VM's 1000 reply flows go the other way: tunnel push to 10.1.2.9 and out
//! of `phy0` in one pass. A line per second shows the rate, cycles per packet and cache hit
//! rates; the run ends with the datapath flows and `pmd-perf-show`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use netdev::anchor_traffic::{TrafficKind, frames};
use netdev::memory::ReplayPort;

/// The demo's switch, as a configuration file would give it (its ports are replaced by
/// in-memory sources).
pub const CONFIG: &str = r#"
[[bridge]]
name = "br-phy"
hwaddr = "8c:dc:d4:ab:5b:f0"
ip = ["10.1.2.8/24"]
flows = ["actions=NORMAL"]
[[bridge.port]]
name = "phy0"
type = "sink"

[[bridge]]
name = "br-int"
flows = ["in_port=vxlan0,tun_id=100,ip,nw_dst=192.168.2.16 actions=mod_dl_dst:52:54:00:a0:91:99,output:vm0",
         "in_port=vm0,ip actions=set_field:100->tun_id,output:vxlan0"]
[[bridge.port]]
name = "vxlan0"
type = "vxlan"
options = { remote_ip = "10.1.2.9", key = "flow" }
[[bridge.port]]
name = "vm0"
type = "sink"

[tunnel]
neigh = ["br-phy 10.1.2.9 8c:dc:d4:ab:58:48"]
"#;

/// The traffic of a port: VXLAN from the remote VTEP on phy0; the VM's replies on vm0
/// (tenant 192.168.2.16 back to 192.168.1.x).
fn traffic(port: &str) -> Vec<Vec<u8>> {
    match port {
        "phy0" => frames(TrafficKind::VxlanL3vpn, 1000, 64),
        _ => frames(TrafficKind::Plain, 1000, 64)
            .into_iter()
            .map(|mut f| {
                f[..6].copy_from_slice(&[0x52, 0x54, 0, 0xa0, 0x81, 0x01]);
                f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0xa0, 0x91, 0x99]);
                f
            })
            .collect(),
    }
}

fn lock(
    dp: &Arc<Mutex<datapath::dpif::Datapath>>,
) -> anyhow::Result<std::sync::MutexGuard<'_, datapath::dpif::Datapath>> {
    dp.lock().map_err(|_| anyhow!("datapath lock poisoned"))
}

/// Runs the demo.
pub fn run(seconds: u64, rundir: Option<&Path>, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let cfg = crate::config::parse(CONFIG)
        .map_err(|e| anyhow!("the built-in configuration: {}", e[0]))?;
    let of = crate::switch::build_ofproto(&cfg, Path::new("."))?;
    let mut n_frames = 0;
    let dp = crate::switch::build_with(&cfg, &of, |p| {
        let f = traffic(&p.name);
        n_frames += f.len();
        Ok(Box::new(ReplayPort::new(&p.name, "built-in", f, 1)))
    })?;
    let dp = Arc::new(Mutex::new(dp));
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let server = match rundir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            let sock = unixctl::socket_path(d);
            let s = unixctl::Server::bind(
                &sock,
                crate::commands::registry(dp.clone(), of.clone(), d, stop.clone()),
            )?;
            writeln!(
                out,
                "control socket: {} (ovs-appctl -t {} dpctl/dump-flows)",
                sock.display(),
                sock.display()
            )?;
            Some(s)
        }
        None => None,
    };
    writeln!(
        out,
        "flowpath demo: L3-VPN over VXLAN, {n_frames} frames: phy0 (VXLAN from 10.1.2.9, 1000 flows) -> tnl_pop -> vm0, and vm0 (1000 flows) -> tnl_push -> phy0; one PMD; {seconds} s"
    )?;
    out.flush()?;

    let mut prev = lock(&dp)?.total_stats();
    let start = Instant::now();
    let mut t_prev = start;
    for second in 1..=seconds {
        let next = start + Duration::from_secs(second);
        while Instant::now() < next && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let now = lock(&dp)?.total_stats();
        let dt = t_prev.elapsed().as_secs_f64();
        t_prev = Instant::now();
        let rx = now.rx_packets - prev.rx_packets;
        // Hit rates per datapath pass (a decapsulated packet makes two lookups).
        let passes = now.passes() - prev.passes();
        let pct = |a: u64, b: u64| {
            if passes == 0 {
                0.0
            } else {
                100.0 * (a - b) as f64 / passes as f64
            }
        };
        writeln!(
            out,
            "{second:>3}s  {:6.2} Mpps  {:5.0} cycles/pkt  simple {:5.1} %  emc {:5.1} %  \
             megaflow {:5.1} %  lost {}",
            rx as f64 / dt / 1e6,
            if rx == 0 {
                0.0
            } else {
                (now.busy_cycles - prev.busy_cycles) as f64 / rx as f64
            },
            pct(now.simple_hits, prev.simple_hits),
            pct(now.emc_hits, prev.emc_hits),
            pct(now.megaflow_hits, prev.megaflow_hits),
            now.lost_upcalls - prev.lost_upcalls,
        )?;
        out.flush()?;
        prev = now;
    }
    writeln!(out)?;
    write!(out, "{}", lock(&dp)?.dump_flows(false))?;
    writeln!(out)?;
    write!(out, "{}", lock(&dp)?.pmd_perf_show())?;
    if let Some(s) = server {
        s.shutdown();
    }
    let dp = Arc::try_unwrap(dp).map_err(|_| anyhow!("datapath still in use"))?;
    drop(
        dp.into_inner()
            .map_err(|_| anyhow!("datapath lock poisoned"))?
            .stop(),
    );
    Ok(ExitCode::SUCCESS)
}
