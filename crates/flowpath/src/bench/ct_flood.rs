//! `ct_flood` (flowpath's own): established traffic while a flood of new connections fills the
//! connection table to its limit (`dpctl/ct-set-maxconns`).
//!
//! One source, p0, offers `ct`'s traffic (the established flows, round robin) and, from the
//! start of the window, one packet in [`FLOOD_EVERY`] of a connection never seen before (the
//! flood: 10.64.0.0/10 sources, each tuple once, from Ethernet address [`FLOOD_MAC`], which
//! the OpenFlow rules [`OF_FLOWS`] tell apart so that OVS's flow counters count each source). The switch is `ct`'s: every packet is
//! tracked and committed, and the table's limit is [`LIMIT_PER_FLOW`] connections per
//! established flow, so that the flood fills the room left within the window and every later
//! flood packet is refused at the limit (`+trk+new`, not committed: OVS's `conntrack_full`),
//! which `ct`'s pipeline still forwards, as OVS's does.
//!
//! The established flows' connections are all committed during the warm-up, before the flood.
//! After the window the source stops and the sink, which counts each established flow's
//! packets apart, is drained; the run fails unless every established flow received every
//! packet offered, its connection is the one committed before the flood (none evicted or
//! committed again), no packet was `+inv`, and the table holds exactly the limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use datapath::dpif::{Datapath, DatapathBuilder, DpConfig, default_pmd_cores};
use datapath::packet::{Batch, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};
use netdev::memory::{SampleSpec, SinkPort};

use super::{BenchIo, BenchOpts, BenchResult};

/// One packet in this many is a flood packet once the flood has started.
pub const FLOOD_EVERY: u64 = 2;

/// The table's limit, per established flow: the flood may take as many connections as there
/// are established flows, then is refused.
pub const LIMIT_PER_FLOW: u32 = 2;

/// Longest the sink is given to receive what is in flight when the source stops.
const DRAIN_MAX: Duration = Duration::from_secs(2);

/// What the source sends: nothing until the switch is programmed, established flows only,
/// both, nothing once stopped.
const IDLE: u8 = 0;
const ESTABLISHED: u8 = 1;
const FLOODING: u8 = 2;
const STOPPED: u8 = 3;

/// The flood's Ethernet source.
pub const FLOOD_MAC: [u8; 6] = [0x02, 0xf1, 0x00, 0x00, 0x00, 0x01];

/// `ct`'s pipeline with the flood's packets (by Ethernet source) in rules of their own, so
/// that each source's packets are counted apart in both passes (the megaflows of OVS's
/// `dpctl/dump-flows`): an established packet counted in the first pass and not in the second
/// was lost (`+inv`, or dropped).
pub const OF_FLOWS: &[&str] = &[
    "table=0,priority=10,ip,dl_src=02:f1:00:00:00:01,ct_state=-trk,actions=ct(table=1)",
    "table=0,priority=0,ip,ct_state=-trk,actions=ct(table=1)",
    "table=1,priority=10,ip,dl_src=02:f1:00:00:00:01,ct_state=+trk+new,actions=ct(commit),output:2",
    "table=1,priority=10,ip,dl_src=02:f1:00:00:00:01,ct_state=+trk+est,actions=output:2",
    "table=1,priority=0,ip,ct_state=+trk+new,actions=ct(commit),output:2",
    "table=1,priority=0,ip,ct_state=+trk+est,actions=output:2",
];

/// Fewest flood frames in the capture `--write-pcap` writes for OVS.
const PCAP_FLOOD: usize = 50_000;

/// The first address of the flood's sources (10.64.0.0/10).
const FLOOD_NET: u32 = u32::from_be_bytes([10, 64, 0, 0]);

/// Ports per flood source address (1024..61024, as the established flows' source ports).
const FLOOD_PORTS: u64 = 60_000;

/// `ct_flood`'s figures, beside the run's.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FloodFigures {
    /// `ct-set-maxconns` for the run.
    pub ct_limit: u32,
    /// Established packets offered and forwarded in the window, and their rate at the sink.
    pub established_offered: u64,
    pub established_forwarded: u64,
    pub established_mpps: f64,
    /// Established packets offered but not received, counted per flow after the source
    /// stopped and the sink drained (the whole run, warm-up included).
    pub established_lost: u64,
    pub flows_with_loss: usize,
    /// Established flows whose connection is missing or was committed again.
    pub established_evicted: usize,
    /// Packets the tracker marked `+inv` in the window.
    pub invalid: u64,
    /// Flood packets offered in the window, connections they committed, commits refused at
    /// the limit, and the rate at which the tracker took them (committed or refused).
    pub flood_packets: u64,
    pub flood_committed: u64,
    pub flood_refused: u64,
    pub flood_mpps: f64,
    /// Seconds from the flood's start until the table held the limit (`None`: never).
    pub fill_secs: Option<f64>,
    /// Connections in the table after the run.
    pub ct_connections: u32,
}

/// Counters the source and the sink share with the run.
#[derive(Default)]
struct Shared {
    phase: AtomicU8,
    est_sent: AtomicU64,
    flood_sent: AtomicU64,
    flood_recv: AtomicU64,
    /// Packets the sink received per established flow.
    per_flow: Box<[AtomicU64]>,
}

impl Shared {
    fn est_received(&self) -> u64 {
        self.per_flow.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// Flood packet `c`: the template (established flow 0) from source 10.64.0.0 + c / 60000,
/// port 1024 + c % 60000, both checksums updated. Every `c` below 2^22 * 60000 is a distinct
/// tuple.
pub fn flood_frame(template: &[u8], c: u64, out: &mut [u8]) {
    use wire::checksum::{update16, update32};
    out.copy_from_slice(template);
    out[6..12].copy_from_slice(&FLOOD_MAC);
    let old_ip = u32::from_be_bytes(template[26..30].try_into().expect("an IPv4 frame"));
    let old_port = u16::from_be_bytes([template[34], template[35]]);
    let ip = FLOOD_NET | ((c / FLOOD_PORTS) as u32 & 0x3f_ffff);
    let port = 1024 + (c % FLOOD_PORTS) as u16;
    out[26..30].copy_from_slice(&ip.to_be_bytes());
    out[34..36].copy_from_slice(&port.to_be_bytes());
    let ip_sum = update32(u16::from_be_bytes([out[24], out[25]]), old_ip, ip);
    out[24..26].copy_from_slice(&ip_sum.to_be_bytes());
    let udp = u16::from_be_bytes([out[40], out[41]]);
    if udp != 0 {
        let c = match update16(update32(udp, old_ip, ip), old_port, port) {
            0 => 0xffff,
            c => c,
        };
        out[40..42].copy_from_slice(&c.to_be_bytes());
    }
}

/// The capture `--write-pcap` writes for OVS: established flow and flood frame alternately
/// (one in [`FLOOD_EVERY`] a flood frame), at least [`PCAP_FLOOD`] flood frames and every
/// established flow at least once. Replayed in a loop, the flood's tuples come round: the
/// first ones committed are then found, the others refused again.
pub fn pcap_frames(est: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let n = (est.len() * (FLOOD_EVERY as usize - 1)).max(PCAP_FLOOD);
    let mut out = Vec::with_capacity(n * FLOOD_EVERY as usize);
    let mut next = 0;
    for c in 0..n as u64 {
        for _ in 1..FLOOD_EVERY {
            out.push(est[next].clone());
            next = (next + 1) % est.len();
        }
        let mut f = est[0].clone();
        flood_frame(&est[0], c, &mut f);
        out.push(f);
    }
    out
}

/// The flood packet number of `f`, if it is one.
fn flood_index(f: &[u8]) -> Option<u64> {
    let ip = u32::from_be_bytes(f.get(26..30)?.try_into().ok()?);
    if ip & 0xffc0_0000 != FLOOD_NET {
        return None;
    }
    let port = u16::from_be_bytes([*f.get(34)?, *f.get(35)?]);
    Some(u64::from(ip & 0x3f_ffff) * FLOOD_PORTS + u64::from(port.checked_sub(1024)?))
}

/// The established flow of `f` (`anchor_traffic`'s plain flow numbering), if it is one.
fn flow_index(f: &[u8]) -> Option<usize> {
    if f.get(26..30)? != [10, 0, 0, 1] {
        return None;
    }
    let sport = u16::from_be_bytes([*f.get(34)?, *f.get(35)?]);
    let dport = u16::from_be_bytes([*f.get(36)?, *f.get(37)?]);
    Some(usize::from(sport.checked_sub(1024)?) + usize::from(dport.checked_sub(2000)?) * 60_000)
}

/// What the sink's sampled frames are checked against: a flood frame as the one its number
/// makes (then counted as established flow 0's frame, which is expected), anything else as it
/// is.
fn normalize(f: &[u8]) -> Vec<u8> {
    let Some(c) = flood_index(f) else {
        return f.to_vec();
    };
    let template = netdev::memory::plain_frames(1, f.len() + 4).remove(0);
    let mut want = vec![0; template.len()];
    flood_frame(&template, c, &mut want);
    if want == f { template } else { f.to_vec() }
}

/// The source: established flows round robin, and the flood interleaved once it is on.
struct FloodSource {
    est: Arc<[Box<[u8]>]>,
    shared: Arc<Shared>,
    taken: bool,
    stats: Arc<QueueStats>,
    tx_stats: Arc<QueueStats>,
}

struct FloodRxq {
    est: Arc<[Box<[u8]>]>,
    next: usize,
    sent: u64,
    flood_next: u64,
    scratch: Box<[u8]>,
    in_port: u32,
    shared: Arc<Shared>,
    stats: Arc<QueueStats>,
}

impl RxQueue for FloodRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let phase = self.shared.phase.load(Relaxed);
        if phase == IDLE || phase == STOPPED {
            return 0;
        }
        let n = batch.room();
        let (mut est, mut flood, mut bytes) = (0u64, 0u64, 0u64);
        for _ in 0..n {
            self.sent += 1;
            let f: &[u8] = if phase == FLOODING && self.sent.is_multiple_of(FLOOD_EVERY) {
                flood_frame(&self.est[0], self.flood_next, &mut self.scratch);
                self.flood_next += 1;
                flood += 1;
                &self.scratch
            } else {
                let f = &self.est[self.next];
                self.next = (self.next + 1) % self.est.len();
                est += 1;
                f
            };
            bytes += f.len() as u64;
            batch.push(pool.packet_from(f, self.in_port));
        }
        self.shared.est_sent.fetch_add(est, Relaxed);
        self.shared.flood_sent.fetch_add(flood, Relaxed);
        self.stats.add_rx(n as u64, bytes);
        n
    }
}

impl Port for FloodSource {
    fn name(&self) -> &str {
        "p0"
    }

    fn kind(&self) -> &'static str {
        "replay"
    }

    fn n_rxq(&self) -> usize {
        1
    }

    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        if q != 0 || std::mem::replace(&mut self.taken, true) {
            return None;
        }
        Some(Box::new(FloodRxq {
            est: self.est.clone(),
            next: 0,
            sent: 0,
            flood_next: 0,
            scratch: self.est[0].clone(),
            in_port,
            shared: self.shared.clone(),
            stats: self.stats.clone(),
        }))
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        Box::new(FlowSinkTxq {
            inner: None,
            shared: None,
            stats: Some(self.tx_stats.clone()),
        })
    }

    fn counters(&self) -> PortCounters {
        let mut c = self.stats.snapshot();
        c += self.tx_stats.snapshot();
        c
    }
}

/// The sink: a sampling [`SinkPort`] that also counts each established flow's packets.
struct FlowSink {
    inner: SinkPort,
    shared: Arc<Shared>,
}

/// A sink queue (with `inner`), or a source's, which drops what it is sent (with `stats`).
struct FlowSinkTxq {
    inner: Option<Box<dyn TxQueue>>,
    shared: Option<Arc<Shared>>,
    stats: Option<Arc<QueueStats>>,
}

impl TxQueue for FlowSinkTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        if let Some(s) = &self.shared {
            for p in batch.packets() {
                match flow_index(p.data()).and_then(|i| s.per_flow.get(i)) {
                    Some(c) => c.fetch_add(1, Relaxed),
                    None => s.flood_recv.fetch_add(1, Relaxed),
                };
            }
        }
        match &mut self.inner {
            Some(q) => q.send(batch, pool),
            None => {
                if let Some(st) = &self.stats {
                    st.tx_dropped.fetch_add(batch.len() as u64, Relaxed);
                }
                pool.free_batch(batch);
            }
        }
    }
}

impl Port for FlowSink {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn n_rxq(&self) -> usize {
        0
    }

    fn take_rxq(&mut self, _q: usize, _in_port: u32) -> Option<Box<dyn RxQueue>> {
        None
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        Box::new(FlowSinkTxq {
            inner: Some(self.inner.open_txq()),
            shared: Some(self.shared.clone()),
            stats: None,
        })
    }

    fn counters(&self) -> PortCounters {
        self.inner.counters()
    }
}

/// Runs `ct_flood`.
pub fn run(o: &BenchOpts) -> anyhow::Result<BenchResult> {
    if o.pmds > 1 || o.io != BenchIo::Replay || o.storm.is_some() || o.pcap.is_some() {
        bail!("ct_flood runs one PMD on its own source, without --io dpdk, --storm or --pcap");
    }
    let flows = o.flows;
    let sc = super::scenario(&o.scenario, flows, o.frame_size)?;
    let limit = u32::try_from(flows)
        .ok()
        .and_then(|n| n.checked_mul(LIMIT_PER_FLOW))
        .context("--flows is too large for ct_flood's limit")?;
    let expected = sc.frames.iter().cloned().collect();
    let shared = Arc::new(Shared {
        phase: AtomicU8::new(IDLE),
        per_flow: (0..flows).map(|_| AtomicU64::new(0)).collect(),
        ..Shared::default()
    });
    let sample = SampleSpec {
        max: 256,
        every: 1 + (flows as u64 / 64),
    };
    let sink = SinkPort::new("p1", sample);
    let samples = sink.samples();
    let mut dp = start(o, &sc, &shared, sink, limit)?;

    let ct = dp.conntrack().clone();
    let at_start = std::sync::Mutex::new(None);
    let fill = Arc::new(std::sync::Mutex::new(None));
    let start_flood = || {
        let c = ct.stats();
        let s = (
            shared.est_sent.load(Relaxed),
            shared.est_received(),
            shared.flood_sent.load(Relaxed),
            c.clone(),
        );
        *at_start.lock().unwrap() = Some(s);
        shared.phase.store(FLOODING, Relaxed);
        watch_fill(ct.clone(), limit, fill.clone());
    };
    let traffic =
        format!("plain {flows} established + 1 in {FLOOD_EVERY} new connections, limit {limit}");
    let r = super::run_measured(
        o,
        &mut dp,
        &samples,
        &expected,
        &["p1"],
        "p0",
        normalize,
        traffic,
        flows,
        &start_flood,
    );
    let (est1, sunk1, flood1, c1) = (
        shared.est_sent.load(Relaxed),
        shared.est_received(),
        shared.flood_sent.load(Relaxed),
        ct.stats(),
    );
    shared.phase.store(STOPPED, Relaxed);
    drain(&shared);
    let mut res = r?;
    let (est0, sunk0, flood0, c0) = at_start
        .into_inner()
        .unwrap()
        .context("the window never started")?;
    let secs = res.seconds.max(1e-9);
    let mut f = FloodFigures {
        ct_limit: limit,
        established_offered: est1 - est0,
        established_forwarded: sunk1 - sunk0,
        established_mpps: (sunk1 - sunk0) as f64 / secs / 1e6,
        invalid: c1.invalid.iter().sum::<u64>() + c1.tcp_invalid
            - c0.invalid.iter().sum::<u64>()
            - c0.tcp_invalid,
        flood_packets: flood1 - flood0,
        flood_committed: c1.committed - c0.committed,
        flood_refused: c1.limit_refused - c0.limit_refused,
        flood_mpps: (flood1 - flood0) as f64 / secs / 1e6,
        fill_secs: *fill.lock().unwrap(),
        ct_connections: ct.n_conns(),
        ..FloodFigures::default()
    };
    (f.established_lost, f.flows_with_loss) = losses(&shared);
    f.established_evicted = evicted(&ct, flows, c0.committed);
    if res.failure.is_none()
        && let Some(why) = failure(&f)
    {
        res.failure = Some(why);
        res.forwarded_ok = false;
    }
    res.ct_connections = Some(f.ct_connections);
    res.ct_flood = Some(f);
    drop(dp.stop());
    Ok(res)
}

/// The switch: `ct`'s flows or rules between the flood source p0 and the sink p1, under
/// `limit`.
fn start(
    o: &BenchOpts,
    sc: &super::Scenario,
    shared: &Arc<Shared>,
    sink: SinkPort,
    limit: u32,
) -> anyhow::Result<Datapath> {
    let mut cfg = DpConfig {
        pmd_cores: default_pmd_cores(1),
        ..DpConfig::default()
    };
    cfg.pmd.emc_insert_inv_prob = if o.emc { 100 } else { 0 };
    let mut b = DatapathBuilder::new(cfg);
    let source = FloodSource {
        est: sc
            .frames
            .iter()
            .map(|f| f.clone().into_boxed_slice())
            .collect(),
        shared: shared.clone(),
        taken: false,
        stats: QueueStats::shared(),
        tx_stats: QueueStats::shared(),
    };
    let sink = FlowSink {
        inner: sink,
        shared: shared.clone(),
    };
    b.add_port(1, Box::new(source))
        .map_err(anyhow::Error::msg)?;
    b.add_port(2, Box::new(sink)).map_err(anyhow::Error::msg)?;
    b.conntrack().set_maxconns(limit);
    if o.openflow {
        let of = super::openflow_switch(sc.of_flows, false)?;
        b.set_upcall(Box::new(move || of.upcall_handler()));
    }
    let mut dp = b.start().map_err(anyhow::Error::msg)?;
    if !o.openflow {
        for (k, a) in &sc.dp_flows {
            dp.add_flow(k, a)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("flow {k} actions:{a}"))?;
        }
    }
    shared.phase.store(ESTABLISHED, Relaxed);
    Ok(dp)
}

/// Notes in `fill` when the table first holds `limit` connections (polled every millisecond
/// for at most a minute).
fn watch_fill(ct: Arc<conntrack::Conntrack>, limit: u32, fill: Arc<std::sync::Mutex<Option<f64>>>) {
    let t0 = Instant::now();
    std::thread::spawn(move || {
        while t0.elapsed() < Duration::from_secs(60) {
            if ct.n_conns() >= limit {
                *fill.lock().unwrap() = Some(t0.elapsed().as_secs_f64());
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Waits until the sink received every established packet sent (or [`DRAIN_MAX`]).
fn drain(s: &Shared) {
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(20));
    while s.est_received() < s.est_sent.load(Relaxed) && t0.elapsed() < DRAIN_MAX {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Established packets lost, and the flows that lost any: flow `i` was offered its share of
/// the round robin from flow 0.
fn losses(s: &Shared) -> (u64, usize) {
    let n = s.per_flow.len() as u64;
    let sent = s.est_sent.load(Relaxed);
    let mut lost = 0;
    let mut flows = 0;
    for (i, c) in s.per_flow.iter().enumerate() {
        let offered = sent / n + u64::from((i as u64) < sent % n);
        let got = c.load(Relaxed);
        if got < offered {
            lost += offered - got;
            flows += 1;
        }
    }
    (lost, flows)
}

/// Established flows (source 10.0.0.1) whose connection is not one of the first `committed`
/// (those committed before the flood: ids count commits from 1).
fn evicted(ct: &conntrack::Conntrack, flows: usize, committed: u64) -> usize {
    let kept = ct
        .dump(Some(0), conntrack::now_ms())
        .iter()
        .filter(|c| c.orig.src[..4] == [10, 0, 0, 1] && u64::from(c.id) <= committed)
        .count();
    flows.saturating_sub(kept)
}

/// Why the run fails, if it does.
pub fn failure(f: &FloodFigures) -> Option<String> {
    if f.established_lost > 0 {
        Some(format!(
            "{} established packets were lost ({} flows)",
            f.established_lost, f.flows_with_loss
        ))
    } else if f.established_evicted > 0 {
        Some(format!(
            "{} established connections were evicted or committed again",
            f.established_evicted
        ))
    } else if f.invalid > 0 {
        Some(format!("{} packets were +inv", f.invalid))
    } else if f.ct_connections != f.ct_limit {
        Some(format!(
            "the table holds {} connections, not the limit {} (the flood did not fill it)",
            f.ct_connections, f.ct_limit
        ))
    } else {
        None
    }
}

/// `ct_flood`'s lines of the report.
pub fn report(f: &FloodFigures) -> String {
    let fill = f
        .fill_secs
        .map_or("never".to_owned(), |s| format!("in {:.3} s", s));
    format!(
        "  established: {} offered, {} forwarded in the window ({:.3} Mpps), {} lost, {} \
         connections evicted, {} +inv\n  flood: {} new connections offered ({:.3} M/s), {} \
         committed, {} refused at the limit {} (full {fill}); {} connections at the end\n",
        f.established_offered,
        f.established_forwarded,
        f.established_mpps,
        f.established_lost,
        f.established_evicted,
        f.invalid,
        f.flood_packets,
        f.flood_mpps,
        f.flood_committed,
        f.flood_refused,
        f.ct_limit,
        f.ct_connections
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flood frames are distinct tuples with valid checksums, recognized as flood frames and
    /// not as established flows; `normalize` takes them to the expected template only when
    /// they are byte for byte what their number makes.
    /// The ones'-complement sum of the pieces, folded.
    fn sum(pieces: &[&[u8]]) -> u16 {
        let mut s: u64 = pieces
            .iter()
            .flat_map(|p| p.chunks(2))
            .map(|w| u64::from(u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)])))
            .sum();
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    #[test]
    fn flood_frames_are_new_tuples_with_valid_checksums() {
        let frames = netdev::memory::plain_frames(3, 64);
        let mut seen = std::collections::HashSet::new();
        for c in [0u64, 1, 59_999, 60_000, 123_456_789] {
            let mut f = frames[0].clone();
            flood_frame(&frames[0], c, &mut f);
            assert_eq!(flood_index(&f), Some(c));
            assert_eq!(flow_index(&f), None);
            assert!(seen.insert(f[26..36].to_vec()));
            assert_eq!(
                sum(&[&f[14..34]]),
                0xffff,
                "IPv4 checksum of flood frame {c}"
            );
            let len = usize::from(u16::from_be_bytes([f[38], f[39]]));
            let pseudo = [0, 17, f[38], f[39]];
            let udp = sum(&[&f[26..34], &pseudo, &f[34..34 + len]]);
            assert_eq!(udp, 0xffff, "UDP checksum of flood frame {c}");
            assert_eq!(normalize(&f), frames[0]);
            f[50] ^= 1;
            assert_ne!(normalize(&f), frames[0]);
        }
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(flow_index(f), Some(i));
            assert_eq!(normalize(f), *f);
        }
    }

    /// OVS's capture alternates established flows (round robin) and distinct flood frames.
    #[test]
    fn pcap_alternates_established_and_flood() {
        let est = netdev::memory::plain_frames(3, 64);
        let p = pcap_frames(&est);
        assert_eq!(p.len(), 2 * PCAP_FLOOD);
        for (k, f) in p.iter().enumerate().take(1000) {
            if k % 2 == 0 {
                assert_eq!(*f, est[(k / 2) % 3]);
            } else {
                assert_eq!(flood_index(f), Some(k as u64 / 2));
                assert_eq!(f[6..12], FLOOD_MAC);
            }
        }
        assert_eq!(
            pcap_frames(&netdev::memory::plain_frames(60_000, 64)).len(),
            120_000
        );
    }

    #[test]
    fn a_lost_or_evicted_established_flow_fails_the_run() {
        let ok = FloodFigures {
            ct_limit: 20,
            ct_connections: 20,
            ..FloodFigures::default()
        };
        assert_eq!(failure(&ok), None);
        let lost = FloodFigures {
            established_lost: 3,
            flows_with_loss: 1,
            ..ok.clone()
        };
        assert!(failure(&lost).unwrap().contains("3 established packets"));
        let evicted = FloodFigures {
            established_evicted: 1,
            ..ok.clone()
        };
        assert!(failure(&evicted).unwrap().contains("evicted"));
        let unfilled = FloodFigures {
            ct_connections: 15,
            ..ok
        };
        assert!(failure(&unfilled).unwrap().contains("did not fill"));
    }
}
