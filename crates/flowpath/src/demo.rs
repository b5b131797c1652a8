//! `flowpath demo [--seconds N] [--rundir DIR]`: the switch on its embedded default, needing no
//! NIC, no root and no configuration. A replay port sends a built-in traffic mix (the seed
//! scenarios' frames as received: plain UDP over 1000 flows, VXLAN L3-VPN, GENEVE with the OVN
//! option, MPLSoGRE, and ARP) through datapath flows to three sinks; a line per second shows the
//! rate, cycles per packet and cache hit rates, and the run ends with `pmd-perf-show`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use datapath::dpif::{DatapathBuilder, DpConfig, default_pmd_cores};
use netdev::memory::{ReplayPort, SampleSpec, SinkPort, plain_frames};
use netdev::pcap::PcapReader;

use crate::extract_cmd::SAMPLE;

/// The demo's datapath flows: UDP (plain, VXLAN, GENEVE) has its Ethernet destination rewritten
/// and goes to `vm1`; GRE goes to `vm2`; ARP to `vm3`.
const FLOWS: &[(&str, &str)] = &[
    (
        "in_port(phy0),eth_type(0x0800),ipv4(proto=17,frag=no)",
        "set(eth(dst=52:54:00:00:00:01)),vm1",
    ),
    (
        "in_port(phy0),eth_type(0x0800),ipv4(proto=47,frag=no)",
        "vm2",
    ),
    ("in_port(phy0),eth_type(0x0806)", "vm3"),
];

/// The traffic mix: 1000 plain UDP flows plus the seed captures built into the binary.
fn traffic() -> anyhow::Result<Vec<Vec<u8>>> {
    let mut frames = plain_frames(1000, 64);
    for (name, bytes) in SAMPLE {
        if !matches!(*name, "vxlan_l3vpn_8" | "geneve_8" | "mplsogre_8" | "arp") {
            continue;
        }
        for r in PcapReader::new(*bytes)? {
            let f = r?.data;
            // ARP in a VLAN tag is not in the demo's flows.
            if f.len() >= 14 && f[12..14] == [0x81, 0x00] {
                continue;
            }
            frames.push(f);
        }
    }
    Ok(frames)
}

fn lock(
    dp: &Arc<Mutex<datapath::dpif::Datapath>>,
) -> anyhow::Result<std::sync::MutexGuard<'_, datapath::dpif::Datapath>> {
    dp.lock().map_err(|_| anyhow!("datapath lock poisoned"))
}

/// Runs the demo.
pub fn run(seconds: u64, rundir: Option<&Path>, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let cfg = DpConfig {
        pmd_cores: default_pmd_cores(1),
        ..DpConfig::default()
    };
    let mut b = DatapathBuilder::new(cfg);
    let frames = traffic()?;
    let n_frames = frames.len();
    b.add_port(
        1,
        Box::new(ReplayPort::new("phy0", "built-in mix", frames, 1)),
    )
    .map_err(|e| anyhow!(e))?;
    for (no, name) in [(2, "vm1"), (3, "vm2"), (4, "vm3")] {
        b.add_port(no, Box::new(SinkPort::new(name, SampleSpec::default())))
            .map_err(|e| anyhow!(e))?;
    }
    for (k, a) in FLOWS {
        b.add_flow(k, a).map_err(|e| anyhow!("{k}: {e}"))?;
    }
    let dp = Arc::new(Mutex::new(b.start().map_err(|e| anyhow!(e))?));
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
                crate::run_cmd::registry(
                    dp.clone(),
                    ofproto::ofproto::Ofproto::new(),
                    d,
                    stop.clone(),
                ),
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
        "flowpath demo: replay port phy0 ({n_frames} frames: 1000 UDP flows, VXLAN, GENEVE, MPLSoGRE, ARP) -> vm1, vm2, vm3; one PMD; {seconds} s"
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
        let pct = |a: u64, b: u64| {
            if rx == 0 {
                0.0
            } else {
                100.0 * (a - b) as f64 / rx as f64
            }
        };
        writeln!(
            out,
            "{second:>3}s  {:6.2} Mpps  {:5.0} cycles/pkt  emc {:5.1} %  megaflow {:5.1} %  lost {}",
            rx as f64 / dt / 1e6,
            if rx == 0 {
                0.0
            } else {
                (now.busy_cycles - prev.busy_cycles) as f64 / rx as f64
            },
            pct(now.emc_hits, prev.emc_hits),
            pct(now.megaflow_hits, prev.megaflow_hits),
            now.lost_upcalls - prev.lost_upcalls,
        )?;
        out.flush()?;
        prev = now;
    }
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
