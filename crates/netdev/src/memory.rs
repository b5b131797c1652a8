//! In-memory ports for benchmarks and tests: `replay` (a capture held in memory and replayed
//! forever, as DPDK's `net_pcap` with `infinite_rx=1` does) and `sink` (counts and frees, as
//! `net_null` with `no-rx=1`, optionally keeping a sample for verification).
//!
//! Replay copies every frame into a fresh pool buffer on receive: the work a NIC driver does,
//! and what `net_pcap` does, so that figures compare like with like. The frames it replays lie
//! back to back, each from a cache line's start, and the next ones are asked for ahead, so that
//! what a frame costs to receive does not depend on how many distinct frames there are (a NIC
//! writes each frame into a buffer whatever the number of flows).

use std::sync::{Arc, Mutex};

use datapath::packet::{Batch, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};

/// A port that replays frames forever on each of its rx queues and drops what it is sent.
pub struct ReplayPort {
    name: String,
    source: String,
    frames: Arc<Frames>,
    rxq_taken: Vec<bool>,
    stats: Vec<Arc<QueueStats>>,
    tx_stats: Arc<QueueStats>,
    /// Packets per second per queue; `None` as fast as the PMD polls.
    rate: Option<f64>,
}

impl ReplayPort {
    /// A replay port over `frames` with `n_rxq` queues; queue `q` starts `q/n_rxq` of the way
    /// into the frames so that queues do not send identical streams. `source` names where the
    /// frames came from for `dpif/show`.
    pub fn new(name: &str, source: &str, frames: Vec<Vec<u8>>, n_rxq: usize) -> ReplayPort {
        let n_rxq = n_rxq.max(1);
        ReplayPort {
            name: name.to_owned(),
            source: source.to_owned(),
            frames: Arc::new(Frames::new(&frames)),
            rxq_taken: vec![false; n_rxq],
            stats: (0..n_rxq).map(|_| QueueStats::shared()).collect(),
            tx_stats: QueueStats::shared(),
            rate: None,
        }
    }

    /// Limits each queue to `pps` packets per second (a generator's offered load), paced by
    /// the TSC from the first poll.
    pub fn with_rate(mut self, pps: f64) -> ReplayPort {
        self.rate = (pps > 0.0).then_some(pps);
        self
    }

    /// Number of distinct frames replayed.
    pub fn n_frames(&self) -> usize {
        self.frames.len()
    }
}

/// Cache lines between the frame a queue receives and the one it asks for ahead.
const PREFETCH_LINES: usize = 16;

/// Frames stored back to back in one buffer, each from the start of a cache line, in replay
/// order: receiving them reads memory in sequence. The buffer and the spans are on huge
/// pages once they span one, as a DPDK port's mbufs are: on 4 KiB pages a million frames'
/// stream (80 MiB with their spans) took a TLB miss every 64 frames, and under the tracker's
/// misses `flowpath bench ct` at a million connections spent up to 6 cycles a packet more
/// extracting them than at 8 connections, 4-5 more in all (`docs/performance.md`).
struct Frames {
    bytes: hugemem::HugeSlice<u8>,
    /// Where frame `i` starts in `bytes` (a multiple of 64 past the first line's start), and
    /// its length.
    spans: hugemem::HugeSlice<(usize, usize)>,
}

impl Frames {
    fn new(frames: &[Vec<u8>]) -> Frames {
        let line = |n: usize| n.next_multiple_of(64);
        let total: usize = frames.iter().map(|f| line(f.len())).sum();
        // One spare line, so that the first frame can start where the allocation's address is
        // a multiple of 64.
        let mut bytes = hugemem::HugeSlice::<u8>::new(total + 64);
        let mut at = (64 - bytes.as_ptr() as usize % 64) % 64;
        let mut spans = hugemem::HugeSlice::<(usize, usize)>::new(frames.len());
        for (f, s) in frames.iter().zip(spans.iter_mut()) {
            bytes[at..at + f.len()].copy_from_slice(f);
            *s = (at, f.len());
            at += line(f.len());
        }
        Frames { bytes, spans }
    }

    fn len(&self) -> usize {
        self.spans.len()
    }

    fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Frame `i`, for a receive: the line `PREFETCH_LINES` lines past its start is asked for,
    /// and the spans' line as far ahead in theirs (wrapping is not needed: past the end it
    /// asks for nothing useful, and harmlessly). The spans are a stream of their own: left to
    /// the CPU's prefetcher, a million frames' spans (16 MiB) came from memory while
    /// conntrack's misses kept the core busy, and receiving cost 8 cycles a frame more
    /// (`docs/performance.md`). Asked for at every frame, four times a line: cheaper than
    /// picking one frame in four.
    #[inline]
    fn receive(&self, i: usize) -> &[u8] {
        const SPANS_AHEAD: usize = PREFETCH_LINES * 64 / size_of::<(usize, usize)>();
        let (at, len) = self.spans[i];
        let ahead = self.bytes.as_ptr().wrapping_add(at + PREFETCH_LINES * 64);
        flow::hash::prefetch_addr::<false>(ahead);
        let span_ahead = self.spans.as_ptr().wrapping_add(i + SPANS_AHEAD);
        flow::hash::prefetch_addr::<false>(span_ahead.cast());
        &self.bytes[at..at + len]
    }
}

struct ReplayRxq {
    frames: Arc<Frames>,
    next: usize,
    in_port: u32,
    stats: Arc<QueueStats>,
    pace: Option<Pace>,
}

/// Rate limiting of a replay queue: packets due by now, from the TSC.
struct Pace {
    ticks_per_packet: f64,
    start: u64,
    sent: u64,
}

impl RxQueue for ReplayRxq {
    #[inline]
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let n_frames = self.frames.len();
        if n_frames == 0 {
            return 0;
        }
        let mut n = batch.room();
        if let Some(p) = &mut self.pace {
            let now = datapath::tsc::now();
            if p.start == 0 {
                p.start = now;
            }
            let due = (now.saturating_sub(p.start) as f64 / p.ticks_per_packet) as u64;
            n = n.min(due.saturating_sub(p.sent) as usize);
            p.sent += n as u64;
            if n == 0 {
                return 0;
            }
        }
        let mut bytes = 0u64;
        for _ in 0..n {
            let f = self.frames.receive(self.next);
            bytes += f.len() as u64;
            batch.push(pool.packet_from(f, self.in_port));
            self.next += 1;
            if self.next == n_frames {
                self.next = 0;
            }
        }
        self.stats.add_rx(n as u64, bytes);
        n
    }
}

impl Port for ReplayPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "replay"
    }

    fn options(&self) -> String {
        match self.rate {
            Some(r) => format!(
                "{{source={}, frames={}, rate={r}pps}}",
                self.source,
                self.frames.len()
            ),
            None => format!("{{source={}, frames={}}}", self.source, self.frames.len()),
        }
    }

    fn n_rxq(&self) -> usize {
        self.rxq_taken.len()
    }

    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        datapath::port::take_once(&mut self.rxq_taken, q)?;
        let start = if self.frames.is_empty() {
            0
        } else {
            q * self.frames.len() / self.rxq_taken.len()
        };
        Some(Box::new(ReplayRxq {
            frames: self.frames.clone(),
            next: start,
            in_port,
            stats: self.stats[q].clone(),
            pace: self.rate.map(|pps| Pace {
                ticks_per_packet: datapath::tsc::hz() as f64 / pps,
                start: 0,
                sent: 0,
            }),
        }))
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        Box::new(DropTxq {
            stats: self.tx_stats.clone(),
        })
    }

    fn counters(&self) -> PortCounters {
        let mut c = self.tx_stats.snapshot();
        for s in &self.stats {
            c += s.snapshot();
        }
        c
    }
}

/// Drops what it is sent, counting it as tx drops (a replay port is a source only).
struct DropTxq {
    stats: Arc<QueueStats>,
}

impl TxQueue for DropTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        self.stats
            .tx_dropped
            .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        pool.free_batch(batch);
    }

    fn takes_lent(&self) -> bool {
        true
    }
}

/// How many frames a sink keeps for verification, and which.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleSpec {
    /// Keep at most this many frames.
    pub max: usize,
    /// Keep one frame in `every` (1 keeps each until `max`).
    pub every: u64,
}

/// Frames a sink kept, shared with whoever verifies them.
pub type Samples = Arc<Mutex<Vec<Vec<u8>>>>;

/// A port that counts what it is sent and frees it.
pub struct SinkPort {
    name: String,
    sample: SampleSpec,
    samples: Samples,
    txqs: Vec<Arc<QueueStats>>,
}

impl SinkPort {
    /// A sink; with a non-zero `sample.max` it keeps frames, readable through
    /// [`SinkPort::samples`].
    pub fn new(name: &str, sample: SampleSpec) -> SinkPort {
        SinkPort {
            name: name.to_owned(),
            sample,
            samples: Arc::new(Mutex::new(Vec::new())),
            txqs: Vec::new(),
        }
    }

    /// The frames kept so far.
    pub fn samples(&self) -> Samples {
        self.samples.clone()
    }
}

struct SinkTxq {
    stats: Arc<QueueStats>,
    sample: SampleSpec,
    samples: Samples,
    seen: u64,
    kept: usize,
}

impl TxQueue for SinkTxq {
    #[inline]
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        self.stats.add_tx(batch.len() as u64, batch.bytes());
        if self.kept < self.sample.max {
            // Only while sampling: the lock is off the steady-state path.
            for p in batch.packets_mut() {
                if self.seen.is_multiple_of(self.sample.every.max(1)) && self.kept < self.sample.max
                {
                    pool.materialize(p);
                    if let Ok(mut s) = self.samples.lock() {
                        s.push(p.data().to_vec());
                    }
                    self.kept += 1;
                }
                self.seen += 1;
            }
        }
        pool.free_batch(batch);
    }

    /// It reads a frame only to keep it (after bringing in what is lent), like a NIC whose
    /// DMA reads from where the frame is.
    fn takes_lent(&self) -> bool {
        true
    }
}

impl Port for SinkPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "sink"
    }

    fn n_rxq(&self) -> usize {
        0
    }

    fn take_rxq(&mut self, _q: usize, _in_port: u32) -> Option<Box<dyn RxQueue>> {
        None
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        let stats = QueueStats::shared();
        self.txqs.push(stats.clone());
        Box::new(SinkTxq {
            stats,
            sample: self.sample,
            samples: self.samples.clone(),
            seen: 0,
            kept: 0,
        })
    }

    fn counters(&self) -> PortCounters {
        let mut c = PortCounters::default();
        for s in &self.txqs {
            c += s.snapshot();
        }
        c
    }
}

/// The anchor's `plain_N` traffic: 10.0.0.1 → 10.1.0.2 over UDP, the flows differing in
/// (sport, dport) = (1024 + i mod 60000, 2000 + i div 60000); frames of `size` bytes including
/// the 4-byte FCS. See [`crate::anchor_traffic`], which makes every kind of the anchor's traffic.
pub fn plain_frames(n: usize, size: usize) -> Vec<Vec<u8>> {
    crate::anchor_traffic::frames(crate::anchor_traffic::TrafficKind::Plain, n, size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_frames_start_cache_lines_back_to_back() {
        let frames: Vec<Vec<u8>> = (1..=5u8).map(|i| vec![i; 50 * usize::from(i)]).collect();
        let f = Frames::new(&frames);
        let mut next = None;
        for (i, want) in frames.iter().enumerate() {
            assert_eq!(f.receive(i), &want[..]);
            let at = f.receive(i).as_ptr() as usize;
            assert_eq!(at % 64, 0, "frame {i} starts a line");
            assert!(
                next.is_none_or(|n| n == at),
                "frame {i} follows the one before"
            );
            next = Some(at + want.len().next_multiple_of(64));
        }
    }

    /// A capture of more than a huge page of frames is held on huge pages, its spans too once
    /// they span one; a small one stays on the heap.
    #[test]
    fn replay_frames_of_a_large_capture_are_on_huge_pages() {
        let large: Vec<Vec<u8>> = (0..200_000u32)
            .map(|i| i.to_be_bytes().repeat(15))
            .collect();
        let f = Frames::new(&large);
        assert!(f.bytes.advised_huge() && f.spans.advised_huge());
        assert_eq!(f.receive(199_999), &199_999u32.to_be_bytes().repeat(15)[..]);
        let small = Frames::new(&large[..100]);
        assert!(!small.bytes.advised_huge() && !small.spans.advised_huge());
    }

    #[test]
    fn replay_copies_frames_forever_and_sink_counts() {
        let frames = vec![vec![1u8; 60], vec![2u8; 70], vec![3u8; 80]];
        let mut rp = ReplayPort::new("p0", "test", frames, 1);
        let mut rxq = rp.take_rxq(0, 5).unwrap();
        assert!(rp.take_rxq(0, 5).is_none(), "a queue is taken once");
        let mut sink = SinkPort::new("p1", SampleSpec { max: 4, every: 1 });
        let mut txq = sink.open_txq();
        let mut pool = Pool::new(64, 0);
        let mut b = Batch::new();
        for _ in 0..3 {
            assert_eq!(rxq.recv(&mut pool, &mut b), 32);
            assert_eq!(b.packets()[0].meta.in_port, 5);
            txq.send(&mut b, &mut pool);
            assert!(b.is_empty());
        }
        assert_eq!(rp.counters().rx_packets, 96);
        let c = sink.counters();
        assert_eq!(c.tx_packets, 96);
        assert_eq!(c.tx_bytes, 32 * 60 + 32 * 70 + 32 * 80);
        let s = sink.samples();
        let s = s.lock().unwrap();
        assert_eq!(s.len(), 4);
        let want = [vec![1u8; 60], vec![2u8; 70], vec![3u8; 80], vec![1u8; 60]];
        assert_eq!(*s, want, "each frame whole, in order, round again");
        // Buffers recycle: one burst's worth allocated in all.
        assert_eq!(pool.allocated(), 32);
    }
}
