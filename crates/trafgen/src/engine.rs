//! The generator's loop: one thread sends every stream at its rate on its port and polls every
//! port's receive queues, matching what comes back to its stream by the stamp at the frame's
//! tail.
//!
//! Sending is paced per stream from the time-stamp counter: at each turn of the loop a stream
//! may send what its rate allowed since the start minus what it sent, at most one burst
//! ([`BURST`]) per turn, so a stream that fell behind (the thread was descheduled) catches up
//! in bursts rather than dropping its schedule. All packets of a burst carry the burst's send
//! time; a received burst is timed once when it is read, so latency has the resolution of a
//! burst's handling (tens of nanoseconds) plus the port's own batching.
//!
//! After the sending time the loop keeps receiving for the drain time, then counts what never
//! came back as lost.

use std::io::IsTerminal;
use std::time::Duration;

use datapath::packet::{Batch, MAX_BURST, Pool};
use datapath::port::{Port, PortCounters, RxQueue, TxQueue};
use datapath::tsc;
use serde::Serialize;

use crate::stamp::{Stamp, find_stamp};
use crate::stats::{Histogram, L1_OVERHEAD, SeqTracker, StreamStats};
use crate::stream::{Rate, Stream};

/// Packets a stream sends at most per turn of the loop.
pub const BURST: usize = MAX_BURST;

/// How a run goes.
#[derive(Clone, Debug)]
pub struct RunOpts {
    /// Sending time.
    pub duration: Duration,
    /// Receiving time after the last packet was sent.
    pub drain: Duration,
    /// Every stream's rate multiplied by this (the NDR search's knob); 1 for the file's rates.
    pub scale: f64,
}

impl Default for RunOpts {
    fn default() -> Self {
        RunOpts {
            duration: Duration::from_secs(10),
            drain: Duration::from_millis(200),
            scale: 1.0,
        }
    }
}

/// A port the generator uses, with its queues taken.
struct GenPort {
    name: String,
    port: Box<dyn Port>,
    rxqs: Vec<Box<dyn RxQueue>>,
    txq: Box<dyn TxQueue>,
}

/// The ports of a generator, opened once for any number of runs (the NDR search's trials).
pub struct Session {
    ports: Vec<GenPort>,
    pool: Pool,
}

/// A port's figures from one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PortStats {
    pub name: String,
    /// Frames received that carried no stamp of a stream of this run (other traffic: ARP,
    /// a peer's own packets, frames whose tail the path changed).
    pub rx_unstamped: u64,
    /// The port's own counters over the run.
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
    pub rx_dropped: u64,
}

/// The figures of one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunReport {
    /// Sending time, seconds.
    pub seconds: f64,
    pub scale: f64,
    pub streams: Vec<StreamStats>,
    pub ports: Vec<PortStats>,
    /// The longest time between two turns of the sending loop, nanoseconds: how long the
    /// generator's thread was away (descheduled, or the host took its core). After such a
    /// pause the paced streams catch up in bursts, which a port with less buffering than the
    /// pause's worth of packets drops.
    pub longest_pause_ns: u64,
}

impl RunReport {
    /// Packets sent by every stream.
    pub fn tx_packets(&self) -> u64 {
        self.streams.iter().map(|s| s.tx_packets).sum()
    }
    /// Packets of any stream received.
    pub fn rx_packets(&self) -> u64 {
        self.streams.iter().map(|s| s.rx_packets).sum()
    }
    /// Share of the sent packets lost, 0..=1.
    pub fn loss_ratio(&self) -> f64 {
        let tx = self.tx_packets();
        if tx == 0 {
            return 0.0;
        }
        self.streams.iter().map(|s| s.lost).sum::<u64>() as f64 / tx as f64
    }
}

/// What the progress callback sees once a second.
#[derive(Clone, Debug)]
pub struct Progress {
    pub elapsed: f64,
    pub sending: bool,
    /// Per stream: name, packets sent and received so far, rates over the last interval
    /// (pps), and the median latency so far.
    pub streams: Vec<StreamProgress>,
}

#[derive(Clone, Debug)]
pub struct StreamProgress {
    pub name: String,
    pub tx_packets: u64,
    pub rx_packets: u64,
    pub tx_pps: f64,
    pub rx_pps: f64,
    pub p50_ns: Option<u64>,
}

impl Progress {
    /// One line for a terminal: every stream's rates, the loss so far and the median latency.
    pub fn line(&self) -> String {
        let mut s = format!("[{:5.1}s]", self.elapsed);
        for st in &self.streams {
            let lost = st.tx_packets.saturating_sub(st.rx_packets);
            s.push_str(&format!(
                " {}: tx {} rx {} lost {}",
                st.name,
                rate_text(st.tx_pps),
                rate_text(st.rx_pps),
                lost
            ));
            if let Some(p) = st.p50_ns {
                s.push_str(&format!(" p50 {}", ns_text(p)));
            }
        }
        if !self.sending {
            s.push_str(" (draining)");
        }
        s
    }
}

/// `1.23 Mpps`, `456.0 kpps`, `12 pps`.
pub fn rate_text(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.2} Mpps", pps / 1e6)
    } else if pps >= 1e3 {
        format!("{:.1} kpps", pps / 1e3)
    } else {
        format!("{pps:.0} pps")
    }
}

/// `850 ns`, `12.4 us`, `3.20 ms`.
pub fn ns_text(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        format!("{:.1} us", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// A progress printer for the command line: a line rewritten in place on a terminal, a line
/// per second otherwise.
pub fn print_progress(p: &Progress) {
    let err = std::io::stderr();
    if err.is_terminal() {
        eprint!("\r\x1b[K{}", p.line());
    } else {
        eprintln!("{}", p.line());
    }
}

/// Ends a line [`print_progress`] left open on a terminal.
pub fn end_progress() {
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
}

/// Errors before a run starts.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("stream {stream}: no port named {port}")]
    NoPort { stream: String, port: String },
    #[error("port {0} is named twice")]
    DuplicatePort(String),
}

/// A stream while it runs.
struct Live<'a> {
    s: &'a Stream,
    tx_port: usize,
    rx_port: usize,
    /// Packets per TSC tick, or L1 bits per tick; `None`: as fast as the port takes them.
    per_tick: Option<f64>,
    bits: bool,
    /// Packets sent: the next packet's index in its stream.
    k: u64,
    tx_bytes: u64,
    tx_l1_bits: u64,
    rx_packets: u64,
    rx_bytes: u64,
    rx_elsewhere: u64,
    seqs: SeqTracker,
    lat: Histogram,
    last_tx: u64,
    last_rx: u64,
}

impl Session {
    /// Takes every rx queue of each port and opens a tx queue on it. Port names must be
    /// unique.
    pub fn new(ports: Vec<(String, Box<dyn Port>)>) -> Result<Session, EngineError> {
        let mut out: Vec<GenPort> = Vec::new();
        for (i, (name, mut port)) in ports.into_iter().enumerate() {
            if out.iter().any(|p| p.name == name) {
                return Err(EngineError::DuplicatePort(name));
            }
            let rxqs = (0..port.n_rxq())
                .filter_map(|q| port.take_rxq(q, i as u32 + 1))
                .collect();
            let txq = port.open_txq();
            out.push(GenPort {
                name,
                port,
                rxqs,
                txq,
            });
        }
        Ok(Session {
            ports: out,
            pool: Pool::new(8192, 4096),
        })
    }

    /// Waits up to `limit` for every port's link to be up (a `virtio_user` port until its
    /// back-end has set up the rings, a kernel port until its interface is there); the names
    /// of those still down.
    pub fn wait_links(&self, limit: Duration) -> Vec<String> {
        let t = std::time::Instant::now();
        loop {
            let down: Vec<String> = self
                .ports
                .iter()
                .filter(|p| !p.port.link_up())
                .map(|p| p.name.clone())
                .collect();
            if down.is_empty() || t.elapsed() >= limit {
                return down;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The ports' names, in order.
    pub fn port_names(&self) -> Vec<&str> {
        self.ports.iter().map(|p| p.name.as_str()).collect()
    }

    /// A port's `dpif/show`-style description (`afpacket {interface=veth0}`).
    pub fn port_description(&self, name: &str) -> Option<String> {
        let p = self.ports.iter().find(|p| p.name == name)?;
        let o = p.port.options();
        Some(if o.is_empty() {
            p.port.kind().to_string()
        } else {
            format!("{} {o}", p.port.kind())
        })
    }

    fn port_index(&self, stream: &str, port: &str) -> Result<usize, EngineError> {
        self.ports
            .iter()
            .position(|p| p.name == port)
            .ok_or_else(|| EngineError::NoPort {
                stream: stream.to_owned(),
                port: port.to_owned(),
            })
    }

    /// Receives and frees whatever is waiting on every port (leftovers of an earlier run).
    pub fn flush_rx(&mut self) {
        let mut batch = Batch::new();
        for p in &mut self.ports {
            for q in &mut p.rxqs {
                while q.recv(&mut self.pool, &mut batch) > 0 {
                    self.pool.free_batch(&mut batch);
                }
            }
        }
    }

    /// Sends `streams` for `o.duration`, receives until `o.drain` after, and counts.
    /// `progress` is called about once a second.
    pub fn run(
        &mut self,
        streams: &[Stream],
        o: &RunOpts,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<RunReport, EngineError> {
        let hz = tsc::hz() as f64;
        let mut live = Vec::with_capacity(streams.len());
        for s in streams {
            let (per_tick, bits) = match s.rate {
                Rate::Max => (None, false),
                Rate::Pps(p) => (Some(p * o.scale / hz), false),
                Rate::L1Bps(b) => (Some(b * o.scale / hz), true),
            };
            live.push(Live {
                s,
                tx_port: self.port_index(&s.name, &s.tx)?,
                rx_port: self.port_index(&s.name, &s.rx)?,
                per_tick,
                bits,
                k: 0,
                tx_bytes: 0,
                tx_l1_bits: 0,
                rx_packets: 0,
                rx_bytes: 0,
                rx_elsewhere: 0,
                seqs: SeqTracker::default(),
                lat: Histogram::default(),
                last_tx: 0,
                last_rx: 0,
            });
        }
        // Stamps name streams by id; map ids to positions.
        let max_id = streams.iter().map(|s| s.id as usize).max().unwrap_or(0);
        let mut by_id = vec![usize::MAX; max_id + 1];
        for (i, s) in streams.iter().enumerate() {
            by_id[s.id as usize] = i;
        }
        self.flush_rx();
        let before: Vec<PortCounters> = self.ports.iter().map(|p| p.port.counters()).collect();
        let mut unstamped = vec![0u64; self.ports.len()];

        let ns_per_tick = 1e9 / hz;
        let t0 = tsc::now();
        let send_ticks = (o.duration.as_secs_f64() * hz) as u64;
        let end_ticks = send_ticks + (o.drain.as_secs_f64() * hz) as u64;
        let tick_second = hz as u64;
        let mut next_report = tick_second;
        let mut last_report = 0u64;
        let mut batch = Batch::new();
        let mut sent_ticks = send_ticks;
        let mut prev_el = 0u64;
        let mut longest_pause = 0u64;
        loop {
            let el = tsc::now().wrapping_sub(t0);
            let sending = el < send_ticks;
            if sending {
                longest_pause = longest_pause.max(el - prev_el);
                prev_el = el;
                let tx_ns = (el as f64 * ns_per_tick) as u64;
                for l in live.iter_mut() {
                    // Packets due now (at most a burst), or for a bit rate the bits due,
                    // then sent packet by packet as sizes may differ.
                    let (n, bit_budget) = match l.per_tick {
                        None => (BURST as u64, None),
                        Some(r) => {
                            let due = (el as f64 * r) as u64;
                            if l.bits {
                                (u64::from(l.tx_l1_bits < due) * BURST as u64, Some(due))
                            } else {
                                (due.saturating_sub(l.k).min(BURST as u64), None)
                            }
                        }
                    };
                    if n == 0 {
                        continue;
                    }
                    let f = &l.s.frames;
                    // The sequence number is the packet's index in its stream (mod 2^32).
                    let stamp = |k: u64| Stamp {
                        stream: l.s.id,
                        seq: k as u32,
                        tx_ns,
                    };
                    let bytes = match bit_budget {
                        Some(b) => {
                            let mut bytes = 0;
                            let mut bits = l.tx_l1_bits;
                            while batch.room() > 0 && bits < b {
                                let k = l.k + batch.len() as u64;
                                let len =
                                    f.write_burst(k, 1, &stamp(k), &mut self.pool, &mut batch);
                                if len == 0 {
                                    break;
                                }
                                bytes += len;
                                bits += (len + L1_OVERHEAD) * 8;
                            }
                            bytes
                        }
                        None => {
                            f.write_burst(l.k, n as usize, &stamp(l.k), &mut self.pool, &mut batch)
                        }
                    };
                    let sent = batch.len() as u64;
                    l.k += sent;
                    l.tx_bytes += bytes;
                    l.tx_l1_bits += (bytes + sent * L1_OVERHEAD) * 8;
                    if !batch.is_empty() {
                        self.ports[l.tx_port].txq.send(&mut batch, &mut self.pool);
                        // A queue leaves the batch empty; make sure whatever it did not take
                        // goes back to the pool.
                        self.pool.free_batch(&mut batch);
                    }
                }
            } else if sent_ticks == send_ticks && el >= send_ticks {
                sent_ticks = el;
                for p in &mut self.ports {
                    p.txq.flush();
                }
            }
            // Receive.
            for (pi, p) in self.ports.iter_mut().enumerate() {
                for q in &mut p.rxqs {
                    if q.recv(&mut self.pool, &mut batch) == 0 {
                        continue;
                    }
                    let now_ns = (tsc::now().wrapping_sub(t0) as f64 * ns_per_tick) as u64;
                    for pkt in batch.packets() {
                        let st = find_stamp(pkt.data())
                            .and_then(|s| by_id.get(s.stream as usize).map(|&i| (s, i)))
                            .filter(|&(_, i)| i != usize::MAX);
                        let Some((stamp, i)) = st else {
                            unstamped[pi] += 1;
                            continue;
                        };
                        let l = &mut live[i];
                        let dups = l.seqs.duplicates;
                        l.seqs.see(stamp.seq);
                        if l.seqs.duplicates != dups {
                            continue;
                        }
                        l.rx_packets += 1;
                        l.rx_bytes += pkt.len() as u64;
                        if pi != l.rx_port {
                            l.rx_elsewhere += 1;
                        }
                        l.lat.record(now_ns.saturating_sub(stamp.tx_ns));
                    }
                    self.pool.free_batch(&mut batch);
                }
            }
            if el >= next_report {
                let dt = (el - last_report) as f64 / hz;
                let p = Progress {
                    elapsed: el as f64 / hz,
                    sending,
                    streams: live
                        .iter_mut()
                        .map(|l| {
                            let sp = StreamProgress {
                                name: l.s.name.clone(),
                                tx_packets: l.k,
                                rx_packets: l.rx_packets,
                                tx_pps: (l.k - l.last_tx) as f64 / dt,
                                rx_pps: (l.rx_packets - l.last_rx) as f64 / dt,
                                p50_ns: l.lat.quantile(0.5),
                            };
                            l.last_tx = l.k;
                            l.last_rx = l.rx_packets;
                            sp
                        })
                        .collect(),
                };
                progress(&p);
                last_report = el;
                next_report = el + tick_second;
            }
            if el >= end_ticks {
                break;
            }
        }
        let secs = sent_ticks as f64 / hz;
        let streams = live
            .into_iter()
            .map(|l| {
                let lost = l.k.saturating_sub(l.rx_packets);
                StreamStats {
                    name: l.s.name.clone(),
                    tx_port: l.s.tx.clone(),
                    rx_port: l.s.rx.clone(),
                    tx_packets: l.k,
                    tx_bytes: l.tx_bytes,
                    rx_packets: l.rx_packets,
                    rx_bytes: l.rx_bytes,
                    rx_elsewhere: l.rx_elsewhere,
                    lost,
                    loss_pct: if l.k == 0 {
                        0.0
                    } else {
                        lost as f64 * 100.0 / l.k as f64
                    },
                    out_of_order: l.seqs.out_of_order,
                    duplicates: l.seqs.duplicates,
                    tx_pps: l.k as f64 / secs,
                    rx_pps: l.rx_packets as f64 / secs,
                    tx_l1_bps: l.tx_l1_bits as f64 / secs,
                    rx_l1_bps: (l.rx_bytes + l.rx_packets * L1_OVERHEAD) as f64 * 8.0 / secs,
                    latency: l.lat.summary(),
                }
            })
            .collect();
        let ports = self
            .ports
            .iter()
            .zip(before)
            .zip(unstamped)
            .map(|((p, b), u)| {
                let a = p.port.counters();
                PortStats {
                    name: p.name.clone(),
                    rx_unstamped: u,
                    rx_packets: a.rx_packets - b.rx_packets,
                    tx_packets: a.tx_packets - b.tx_packets,
                    tx_dropped: a.tx_dropped - b.tx_dropped,
                    rx_dropped: a.rx_dropped - b.rx_dropped,
                }
            })
            .collect();
        Ok(RunReport {
            seconds: secs,
            scale: o.scale,
            streams,
            ports,
            longest_pause_ns: (longest_pause as f64 * ns_per_tick) as u64,
        })
    }
}

/// The report as text: a table of streams, then the ports.
pub fn report_text(r: &RunReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<16} {:>12} {:>12} {:>10} {:>8} {:>6} {:>6} {:>11} {:>11}  latency min/avg/max p50/p99/p99.9",
        "stream", "tx", "rx", "lost", "loss%", "ooo", "dup", "tx rate", "rx rate"
    );
    for st in &r.streams {
        let lat = st.latency.map_or_else(
            || "-".to_string(),
            |l| {
                format!(
                    "{}/{}/{} {}/{}/{}",
                    ns_text(l.min_ns),
                    ns_text(l.avg_ns),
                    ns_text(l.max_ns),
                    ns_text(l.p50_ns),
                    ns_text(l.p99_ns),
                    ns_text(l.p999_ns)
                )
            },
        );
        let _ = writeln!(
            s,
            "{:<16} {:>12} {:>12} {:>10} {:>8.4} {:>6} {:>6} {:>11} {:>11}  {lat}",
            st.name,
            st.tx_packets,
            st.rx_packets,
            st.lost,
            st.loss_pct,
            st.out_of_order,
            st.duplicates,
            rate_text(st.tx_pps),
            rate_text(st.rx_pps),
        );
        let _ = writeln!(
            s,
            "  on the wire (L1, FCS, preamble and gap counted): tx {:.3} Gbps, rx {:.3} Gbps",
            st.tx_l1_bps / 1e9,
            st.rx_l1_bps / 1e9
        );
        if st.rx_elsewhere > 0 {
            let _ = writeln!(
                s,
                "  ({} of them received on another port than {})",
                st.rx_elsewhere, st.rx_port
            );
        }
    }
    for p in &r.ports {
        let _ = writeln!(
            s,
            "port {}: rx {} (unstamped {}) tx {} tx_dropped {} rx_dropped {}",
            p.name, p.rx_packets, p.rx_unstamped, p.tx_packets, p.tx_dropped, p.rx_dropped
        );
    }
    let _ = writeln!(
        s,
        "sending time {:.3} s, the generator's longest pause {}",
        r.seconds,
        ns_text(r.longest_pause_ns)
    );
    s
}
