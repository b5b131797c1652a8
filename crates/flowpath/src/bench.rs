//! `flowpath bench SCENARIO`: builds a scenario's switch in-process with a replay source and
//! sink ports, warms up, measures, and checks that the sink received what the scenario must
//! forward (the count, and sampled frames compared byte for byte with the expected output).
//!
//! Scenarios follow the OVS-DPDK anchor's definitions (same traffic, same datapath flows):
//! - `p2p`: in_port → output; the I/O floor.
//! - `p2p_l3`: `ip,nw_dst=10.1.0.0/16` → set Ethernet destination, output; the EMC/megaflow path.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context, bail};
use datapath::dpif::{DatapathBuilder, DpConfig, default_pmd_cores};
use datapath::pmd::Stage;
use netdev::memory::{ReplayPort, SampleSpec, SinkPort, plain_frames};

/// Benchmark options.
#[derive(Clone, Debug)]
pub struct BenchOpts {
    pub scenario: String,
    /// Replay this capture instead of the generated traffic (`flows` is then its frame count).
    pub pcap: Option<std::path::PathBuf>,
    pub flows: usize,
    pub frame_size: usize,
    pub seconds: f64,
    pub pmds: usize,
    pub emc: bool,
    pub json: bool,
    /// Program the switch with the scenario's OpenFlow rules (misses translated by the
    /// OpenFlow pipeline) instead of preinstalled datapath flows.
    pub openflow: bool,
    /// With `openflow`: a second source (p2) offering this many packets per second, each of a
    /// flow not seen for a while, so each is a miss: an upcall storm beside the cached traffic.
    pub storm: Option<f64>,
}

/// Fewest distinct flows the storm source cycles through (more than the default flow limit).
const STORM_FLOWS: usize = 262_144;

/// Frames from `n` distinct Ethernet sources (the storm rules make dl_src exact).
fn storm_frames(size: usize, n: usize) -> Vec<Vec<u8>> {
    let base = plain_frames(1, size).remove(0);
    (0..n)
        .map(|i| {
            let mut f = base.clone();
            let i = i as u32;
            f[6..12].copy_from_slice(&[0x02, 0xaa, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
            f
        })
        .collect()
}

/// What a scenario is made of.
struct Scenario {
    /// Input frames (one per flow).
    frames: Vec<Vec<u8>>,
    /// Datapath flows as `(key, actions)` in `dpctl/add-flow` syntax.
    dp_flows: Vec<(String, String)>,
    /// The same forwarding as OpenFlow rules of bridge br0 (p0 is port 1, p1 port 2).
    of_flows: &'static [&'static str],
    /// The frame the sink must receive for each input frame.
    expect: fn(&[u8]) -> Vec<u8>,
}

/// Scenario names.
pub const SCENARIOS: &[&str] = &["p2p", "p2p_l3"];

fn scenario(name: &str, flows: usize, size: usize) -> anyhow::Result<Scenario> {
    Ok(match name {
        "p2p" => Scenario {
            frames: plain_frames(flows, size),
            dp_flows: vec![(
                "in_port(p0),eth_type(0x0800),ipv4(frag=no)".into(),
                "p1".into(),
            )],
            of_flows: &["in_port=1,actions=output:2"],
            expect: |f| f.to_vec(),
        },
        "p2p_l3" => Scenario {
            frames: plain_frames(flows, size),
            dp_flows: vec![(
                "in_port(p0),eth(dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),\
                 ipv4(dst=10.1.0.0/255.255.0.0,frag=no)"
                    .into(),
                "set(eth(dst=52:54:00:00:00:01)),p1".into(),
            )],
            of_flows: &[
                "priority=10,ip,nw_dst=10.1.0.0/16,actions=mod_dl_dst:52:54:00:00:00:01,output:2",
                "priority=0,actions=drop",
            ],
            expect: |f| {
                let mut o = f.to_vec();
                o[..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
                o
            },
        },
        other => bail!(
            "unknown scenario '{other}' (known: {})",
            SCENARIOS.join(", ")
        ),
    })
}

/// One run's figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchResult {
    pub scenario: String,
    pub flows: usize,
    pub frame_size: usize,
    pub pmds: usize,
    pub emc: bool,
    /// Whether the OpenFlow pipeline programmed the switch (`--openflow`).
    pub openflow: bool,
    /// The offered upcall storm (`--storm`), packets per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storm_pps: Option<f64>,
    /// What the sink received per second: the cached traffic's forwarding rate.
    pub sink_mpps: f64,
    pub seconds: f64,
    pub mpps: f64,
    pub cycles_per_packet: f64,
    pub passes_per_packet: f64,
    pub emc_hit_pct: f64,
    pub megaflow_hit_pct: f64,
    pub subtable_lookups_per_hit: f64,
    pub upcalls: u64,
    pub lost_upcalls: u64,
    /// Misses that had to wait for the slow path's time budget (counted at each wait).
    pub deferred_upcalls: u64,
    pub rx_packets: u64,
    pub sink_packets: u64,
    pub samples_checked: usize,
    pub forwarded_ok: bool,
    /// Cycles per packet by stage: rx, extract, emc, megaflow, upcall, actions, tx.
    pub stage_cycles_per_packet: Vec<(String, f64)>,
    /// Of `cycles_per_packet`, what the per-stage accounting itself costs (its TSC reads).
    pub stage_accounting_cycles_per_packet: f64,
    /// Why `forwarded_ok` is false, if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Bridge br0 with p0 (OpenFlow and datapath port 1) and p1 (2), programmed with `flows`.
fn openflow_switch(
    flows: &[&str],
    storm: bool,
) -> anyhow::Result<std::sync::Arc<ofproto::ofproto::Ofproto>> {
    use ofproto::bridge::{OfPort, VlanMode};
    let of = ofproto::ofproto::Ofproto::new();
    of.add_bridge("br0").map_err(anyhow::Error::msg)?;
    let ports: &[(&str, u32)] = if storm {
        &[("p0", 1), ("p1", 2), ("p2", 3)]
    } else {
        &[("p0", 1), ("p1", 2)]
    };
    for &(name, no) in ports {
        of.add_port(
            "br0",
            OfPort {
                name: name.into(),
                ofport: no,
                dp_port: Some(no),
                peer: None,
                vlan: VlanMode::default(),
            },
        )
        .map_err(anyhow::Error::msg)?;
    }
    // The storm's packets consult their full Ethernet source (a miss in the dl_src stage of
    // the first rule), so each new source is a new megaflow, hence an upcall.
    let storm_flows: &[&str] = if storm {
        &[
            "priority=30,in_port=3,dl_src=02:ff:ff:ff:ff:ff,actions=drop",
            "priority=29,in_port=3,actions=drop",
        ]
    } else {
        &[]
    };
    for f in storm_flows.iter().chain(flows) {
        of.add_flow("br0", f)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("flow {f}"))?;
    }
    Ok(of)
}

/// Runs one benchmark.
pub fn run(o: &BenchOpts) -> anyhow::Result<BenchResult> {
    if o.flows == 0 {
        bail!("--flows must be at least 1");
    }
    if !(60..=9018).contains(&o.frame_size) {
        bail!("--frame-size must be between 60 and 9018 bytes");
    }
    let mut sc = scenario(&o.scenario, o.flows, o.frame_size)?;
    let mut flows = o.flows;
    if let Some(p) = &o.pcap {
        sc.frames = netdev::pcap::read_file(p)
            .with_context(|| format!("{}", p.display()))?
            .into_iter()
            .map(|r| r.data)
            .collect();
        if sc.frames.is_empty() {
            bail!("{}: no packets", p.display());
        }
        flows = sc.frames.len();
    }
    let expected: HashSet<Vec<u8>> = sc.frames.iter().map(|f| (sc.expect)(f)).collect();

    let mut cfg = DpConfig {
        pmd_cores: default_pmd_cores(o.pmds),
        ..DpConfig::default()
    };
    cfg.pmd.emc_insert_inv_prob = if o.emc { 100 } else { 0 };
    let mut b = DatapathBuilder::new(cfg);
    let replay = ReplayPort::new(
        "p0",
        &format!("{}x{}B", o.flows, o.frame_size),
        sc.frames,
        o.pmds.max(1),
    );
    // Keep a spread sample: enough to cover the flows without touching the steady state.
    let sink = SinkPort::new(
        "p1",
        SampleSpec {
            max: 256,
            every: 1 + (o.flows as u64 / 64),
        },
    );
    let samples = sink.samples();
    b.add_port(1, Box::new(replay))
        .map_err(anyhow::Error::msg)?;
    b.add_port(2, Box::new(sink)).map_err(anyhow::Error::msg)?;
    if o.storm.is_some() && !o.openflow {
        bail!("--storm needs --openflow (the storm is made of upcalls)");
    }
    if o.storm.is_some_and(|pps| !(pps.is_finite() && pps >= 1.0)) {
        bail!("--storm takes a rate of at least 1 packet per second");
    }
    if o.openflow {
        let of = openflow_switch(sc.of_flows, o.storm.is_some())?;
        b.set_upcall(Box::new(move || of.upcall_handler()));
    }
    if let Some(pps) = o.storm {
        // Enough distinct flows that none comes back while its megaflow could still be cached
        // (warm-up, window and the 10 s idle expiry).
        let n = ((pps * (o.seconds + 13.0)) as usize).clamp(STORM_FLOWS, 1 << 22);
        let storm = ReplayPort::new("p2", "storm", storm_frames(o.frame_size, n), 1).with_rate(pps);
        b.add_port(3, Box::new(storm)).map_err(anyhow::Error::msg)?;
    }
    let mut dp = b.start().map_err(anyhow::Error::msg)?;
    if !o.openflow {
        for (k, a) in &sc.dp_flows {
            dp.add_flow(k, a)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("flow {k} actions:{a}"))?;
        }
    }

    // Warm up: caches fill, the classifier ranks its subtables, pools stop allocating.
    std::thread::sleep(Duration::from_secs_f64((o.seconds / 3.0).clamp(0.5, 2.0)));
    let sink0 = dp.port_counters("p1").unwrap_or_default().tx_packets;
    let src0 = dp.port_counters("p0").unwrap_or_default().rx_packets;
    dp.clear_stats();
    std::thread::sleep(Duration::from_secs_f64(o.seconds));
    let secs = dp.measured_secs();
    let s = dp.total_stats();
    let sink1 = dp.port_counters("p1").unwrap_or_default().tx_packets;
    let src1 = dp.port_counters("p0").unwrap_or_default().rx_packets;
    drop(dp.stop());

    let rx = s.rx_packets.max(1) as f64;
    let passes = (s.rx_packets + s.recirculations).max(1) as f64;
    let sink_packets = sink1.saturating_sub(sink0);

    // Verification: nothing lost beyond what is in flight, every sampled frame as expected.
    let mut failure = None;
    let got = samples.lock().map(|v| v.clone()).unwrap_or_default();
    if s.rx_packets == 0 {
        failure = Some("no packets were received".to_owned());
    } else if got.is_empty() {
        failure = Some("the sink received nothing".to_owned());
    } else if let Some(bad) = got.iter().find(|f| !expected.contains(*f)) {
        failure = Some(format!(
            "the sink received an unexpected frame: {}",
            hex(bad)
        ));
    } else if (sink_packets as f64) < 0.99 * src1.saturating_sub(src0) as f64 {
        failure = Some(format!(
            "p0 received {} but the sink got only {sink_packets}",
            src1.saturating_sub(src0)
        ));
    } else if s.lost_upcalls > 0 && o.storm.is_none() {
        failure = Some(format!("{} packets missed every flow", s.lost_upcalls));
    }

    Ok(BenchResult {
        scenario: o.scenario.clone(),
        flows,
        frame_size: o.frame_size,
        pmds: o.pmds.max(1),
        emc: o.emc,
        openflow: o.openflow,
        storm_pps: o.storm,
        sink_mpps: sink_packets as f64 / secs / 1e6,
        seconds: secs,
        mpps: s.rx_packets as f64 / secs / 1e6,
        cycles_per_packet: s.busy_cycles as f64 / rx,
        passes_per_packet: passes / rx,
        emc_hit_pct: 100.0 * s.emc_hits as f64 / passes,
        megaflow_hit_pct: 100.0 * s.megaflow_hits as f64 / passes,
        subtable_lookups_per_hit: if s.megaflow_hits == 0 {
            0.0
        } else {
            s.subtable_lookups as f64 / s.megaflow_hits as f64
        },
        upcalls: s.upcalls,
        lost_upcalls: s.lost_upcalls,
        deferred_upcalls: s.deferred_upcalls,
        rx_packets: s.rx_packets,
        sink_packets,
        samples_checked: got.len(),
        forwarded_ok: failure.is_none(),
        stage_cycles_per_packet: Stage::ALL
            .iter()
            .map(|st| {
                (
                    st.name().to_owned(),
                    s.stage_cycles[*st as usize] as f64 / rx,
                )
            })
            .collect(),
        stage_accounting_cycles_per_packet: datapath::dpif::stage_accounting_cost(&s).1,
        failure,
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().take(64).fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// The human-readable report of one run.
pub fn report(r: &BenchResult) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} flows={} frame={}B pmds={} emc={}{}: {:.2} Mpps, {:.0} cycles/pkt, {:.2} passes/pkt",
        r.scenario,
        r.flows,
        r.frame_size,
        r.pmds,
        if r.emc { "on" } else { "off" },
        if r.openflow { " openflow" } else { "" },
        r.mpps,
        r.cycles_per_packet,
        r.passes_per_packet
    );
    if let Some(pps) = r.storm_pps {
        let _ = writeln!(
            o,
            "  storm: {pps:.0} new flows/s offered on p2; cached traffic delivered {:.2} Mpps",
            r.sink_mpps
        );
    }
    let _ = writeln!(
        o,
        "  hits: emc {:.1} %, megaflow {:.1} % ({:.2} subtable lookups/hit), upcalls {}, lost {}",
        r.emc_hit_pct, r.megaflow_hit_pct, r.subtable_lookups_per_hit, r.upcalls, r.lost_upcalls
    );
    let stages: Vec<String> = r
        .stage_cycles_per_packet
        .iter()
        .map(|(n, c)| format!("{n} {c:.1}"))
        .collect();
    let _ = writeln!(o, "  cycles/pkt by stage: {}", stages.join(", "));
    let _ = writeln!(
        o,
        "  stage accounting overhead: {:.1} cycles/pkt ({:.1} %)",
        r.stage_accounting_cycles_per_packet,
        100.0 * r.stage_accounting_cycles_per_packet / r.cycles_per_packet.max(1e-9)
    );
    match &r.failure {
        None => {
            let _ = writeln!(
                o,
                "  forwarded ok: {} packets to the sink, {} sampled frames as expected",
                r.sink_packets, r.samples_checked
            );
        }
        Some(f) => {
            let _ = writeln!(o, "  FORWARDING FAILED: {f}");
        }
    }
    o
}
