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
}

/// What a scenario is made of.
struct Scenario {
    /// Input frames (one per flow).
    frames: Vec<Vec<u8>>,
    /// Datapath flows as `(key, actions)` in `dpctl/add-flow` syntax.
    dp_flows: Vec<(String, String)>,
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
    pub seconds: f64,
    pub mpps: f64,
    pub cycles_per_packet: f64,
    pub passes_per_packet: f64,
    pub emc_hit_pct: f64,
    pub megaflow_hit_pct: f64,
    pub subtable_lookups_per_hit: f64,
    pub upcalls: u64,
    pub lost_upcalls: u64,
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
    let mut dp = b.start().map_err(anyhow::Error::msg)?;
    for (k, a) in &sc.dp_flows {
        dp.add_flow(k, a)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("flow {k} actions:{a}"))?;
    }

    // Warm up: caches fill, the classifier ranks its subtables, pools stop allocating.
    std::thread::sleep(Duration::from_secs_f64((o.seconds / 3.0).clamp(0.5, 2.0)));
    let sink0 = dp.port_counters("p1").unwrap_or_default().tx_packets;
    dp.clear_stats();
    std::thread::sleep(Duration::from_secs_f64(o.seconds));
    let secs = dp.measured_secs();
    let s = dp.total_stats();
    let sink1 = dp.port_counters("p1").unwrap_or_default().tx_packets;
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
    } else if (sink_packets as f64) < 0.99 * s.rx_packets as f64 {
        failure = Some(format!(
            "received {} but the sink got only {sink_packets}",
            s.rx_packets
        ));
    } else if s.lost_upcalls > 0 {
        failure = Some(format!("{} packets missed every flow", s.lost_upcalls));
    }

    Ok(BenchResult {
        scenario: o.scenario.clone(),
        flows,
        frame_size: o.frame_size,
        pmds: o.pmds.max(1),
        emc: o.emc,
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
        "{} flows={} frame={}B pmds={} emc={}: {:.2} Mpps, {:.0} cycles/pkt, {:.2} passes/pkt",
        r.scenario,
        r.flows,
        r.frame_size,
        r.pmds,
        if r.emc { "on" } else { "off" },
        r.mpps,
        r.cycles_per_packet,
        r.passes_per_packet
    );
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
