//! Meters of the userspace datapath: the `meter(ID)` action's rate limiters (OVS's
//! `dp_meter` of `dpif-netdev.c`), configured by the slow path and run by the PMD threads.
//!
//! A meter has up to [`MAX_BANDS`] drop bands, each a token bucket of `rate` (packets/s or
//! kb/s, as the meter says) and depth `burst` (packets or kilobits; a burst of 0 is the rate,
//! as OVS makes it). Each packet takes tokens from every band that has enough; the packet
//! exceeds the bands that have not, is counted by the one of them with the highest rate (the
//! band that "fires"), and is dropped. OVS's userspace datapath knows drop bands only.
//!
//! # Sharing the rate over PMD threads
//! The rate is the meter's, whichever PMDs its packets arrive on. Each band's tokens are an
//! atomic pool shared by the PMDs ([`DpMeter`]); the pool is refilled by the first PMD that
//! comes after time passed (a compare-and-swap on the refill time: the loser uses what the
//! winner added). A PMD takes what a whole batch needs from the pool at once into its own
//! bucket ([`PmdMeters`]) and spends it packet by packet, so a batch costs one refill and one
//! atomic take per band, no lock and no allocation. Tokens a PMD took for packets that another
//! band then dropped stay in its bucket for its next batch: the meter passes in total at most
//! what its rate and burst allow plus, per PMD, one batch's worth of such tokens (at most
//! [`crate::packet::MAX_BURST`] packets, or as many bits), which is the tolerance.
//!
//! Counters are per PMD (packets and bytes in, and per band, packets and bytes dropped) and
//! are summed on read ([`MeterCounters`]). Datapath meter ids are small numbers handed out
//! from 0 ([`DpMeters::free_id`]), as OVS's `id_pool` does, not the OpenFlow meter ids.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::packet::{Batch, Pool};

/// The most meters (OVS's `MAX_METERS` of the userspace datapath).
pub const MAX_METERS: u32 = 262_144;
/// The most bands of a meter (OVS's `MAX_BANDS`).
pub const MAX_BANDS: usize = 8;

/// Token units per packet (packets/s meters) or per kilobit (kb/s meters): a band's bucket
/// gains `rate` units a nanosecond either way, and holds at most `burst` times this.
const UNITS: u64 = 1_000_000_000;
/// Token units per bit of a kb/s meter.
const UNITS_PER_BIT: u64 = UNITS / 1000;

/// One band of a datapath meter: a drop band.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandConfig {
    /// Packets/s or kb/s above which packets are dropped (not 0).
    pub rate: u32,
    /// Bucket depth in packets or kilobits (0: the rate).
    pub burst: u32,
}

/// A datapath meter's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterConfig {
    /// Rates in packets/s (`pktps`); kb/s otherwise.
    pub pktps: bool,
    /// Its bands, 1 to [`MAX_BANDS`].
    pub bands: Vec<BandConfig>,
}

/// Why the datapath refuses a meter (OVS's `dpif_netdev_meter_set()` reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeterError {
    /// The id is not below [`MAX_METERS`], or none is free.
    #[error("meter id out of range or none free")]
    OutOfMeters,
    /// No band, or more than [`MAX_BANDS`].
    #[error("a meter has 1 to {MAX_BANDS} bands")]
    BadBands,
    /// A band's rate is 0.
    #[error("a band's rate must not be 0")]
    BadRate,
}

/// Packets and bytes a meter saw, and, per band, those the band dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MeterCounters {
    /// Packets that went through the meter.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Per band: packets and bytes it dropped.
    pub bands: Vec<(u64, u64)>,
}

impl MeterCounters {
    fn add(&mut self, o: &MeterCounters) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        if self.bands.len() < o.bands.len() {
            self.bands.resize(o.bands.len(), (0, 0));
        }
        for (a, b) in self.bands.iter_mut().zip(&o.bands) {
            a.0 += b.0;
            a.1 += b.1;
        }
    }
}

/// One band's shared tokens.
#[derive(Debug)]
struct SharedBand {
    rate: u64,
    /// Bucket depth in token units.
    depth: u64,
    tokens: AtomicU64,
}

/// A meter as the PMDs share it: configuration, and each band's pool of tokens (see the
/// module documentation). Made by [`DpMeter::new`]; replaced, not changed, when the meter is
/// set again (its buckets start full and its counters at zero, as OVS's).
#[derive(Debug)]
pub struct DpMeter {
    pktps: bool,
    bands: Box<[SharedBand]>,
    /// When the pools were last refilled, in nanoseconds since `epoch`.
    refilled_ns: AtomicU64,
    epoch: Instant,
    /// The most nanoseconds a refill counts: enough to fill the deepest bucket.
    max_delta_ns: u64,
    /// What [`DpMeter::admit`] (the slow path's use) counted: packets, bytes, then per band
    /// packets and bytes dropped.
    slow: [AtomicU64; 2 + 2 * MAX_BANDS],
}

impl DpMeter {
    /// A meter with full buckets.
    pub fn new(config: &MeterConfig) -> Result<DpMeter, MeterError> {
        if config.bands.is_empty() || config.bands.len() > MAX_BANDS {
            return Err(MeterError::BadBands);
        }
        if config.bands.iter().any(|b| b.rate == 0) {
            return Err(MeterError::BadRate);
        }
        let bands: Box<[SharedBand]> = config
            .bands
            .iter()
            .map(|b| {
                let burst = if b.burst == 0 { b.rate } else { b.burst };
                let depth = u64::from(burst) * UNITS;
                SharedBand {
                    rate: u64::from(b.rate),
                    depth,
                    tokens: AtomicU64::new(depth),
                }
            })
            .collect();
        let max_delta_ns = bands
            .iter()
            .map(|b| b.depth / b.rate + 1)
            .max()
            .unwrap_or(0);
        Ok(DpMeter {
            pktps: config.pktps,
            bands,
            refilled_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            max_delta_ns,
            slow: Default::default(),
        })
    }

    /// Number of bands.
    pub fn n_bands(&self) -> usize {
        self.bands.len()
    }

    /// Token units a packet of `len` bytes costs.
    #[inline]
    fn cost(&self, len: usize) -> u64 {
        if self.pktps {
            UNITS
        } else {
            len as u64 * 8 * UNITS_PER_BIT
        }
    }

    /// Adds the tokens earned since the last refill, once per elapsed interval whichever PMD
    /// comes first.
    #[inline]
    fn refill(&self) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        let last = self.refilled_ns.load(Ordering::Relaxed);
        if now <= last
            || self
                .refilled_ns
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let dt = (now - last).min(self.max_delta_ns);
        for b in self.bands.iter() {
            let add = dt.saturating_mul(b.rate);
            let _ = b
                .tokens
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |t| {
                    Some(t.saturating_add(add).min(b.depth))
                });
        }
    }

    /// Takes up to `want` token units of band `i`: what it got.
    #[inline]
    fn take(&self, i: usize, want: u64) -> u64 {
        let mut got = 0;
        let _ = self.bands[i]
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |t| {
                got = t.min(want);
                Some(t - got)
            });
        got
    }

    /// Takes `cost` token units of band `i` if it has them all.
    #[inline]
    fn take_whole(&self, i: usize, cost: u64) -> bool {
        self.bands[i]
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |t| t.checked_sub(cost))
            .is_ok()
    }

    /// Whether one packet of `len` bytes passes the meter, outside the PMDs (the slow path's
    /// packets, e.g. a controller action's `meter_id`): takes its tokens from the shared pools
    /// and counts it as the PMDs would.
    pub fn admit(&self, len: usize) -> bool {
        self.refill();
        let cost = self.cost(len);
        let mut fired: Option<usize> = None;
        for i in 0..self.bands.len() {
            if !self.take_whole(i, cost)
                && fired.is_none_or(|f| self.bands[i].rate > self.bands[f].rate)
            {
                fired = Some(i);
            }
        }
        self.slow[0].fetch_add(1, Ordering::Relaxed);
        self.slow[1].fetch_add(len as u64, Ordering::Relaxed);
        if let Some(f) = fired {
            self.slow[2 + 2 * f].fetch_add(1, Ordering::Relaxed);
            self.slow[3 + 2 * f].fetch_add(len as u64, Ordering::Relaxed);
        }
        fired.is_none()
    }

    /// Adds what a PMD counted to the meter's own counters (the PMD is going away: its core
    /// left the core set), so that the meter's totals do not go back.
    fn keep_counters(&self, c: &MeterCounters) {
        self.slow[0].fetch_add(c.packets, Ordering::Relaxed);
        self.slow[1].fetch_add(c.bytes, Ordering::Relaxed);
        for (b, (p, n)) in c.bands.iter().enumerate().take(self.bands.len()) {
            self.slow[2 + 2 * b].fetch_add(*p, Ordering::Relaxed);
            self.slow[3 + 2 * b].fetch_add(*n, Ordering::Relaxed);
        }
    }

    /// What [`DpMeter::admit`] counted, and what PMDs that went away had counted.
    pub fn slow_counters(&self) -> MeterCounters {
        let n = |i: usize| self.slow[i].load(Ordering::Relaxed);
        MeterCounters {
            packets: n(0),
            bytes: n(1),
            bands: (0..self.bands.len())
                .map(|b| (n(2 + 2 * b), n(3 + 2 * b)))
                .collect(),
        }
    }
}

/// One PMD's side of a meter: its buckets (tokens taken from the shared pools, not spent yet)
/// and its counters.
struct PmdMeter {
    shared: Arc<DpMeter>,
    local: [u64; MAX_BANDS],
    counters: MeterCounters,
}

/// A PMD's meters, by datapath meter id.
#[derive(Default)]
pub struct PmdMeters {
    by_id: Vec<Option<PmdMeter>>,
}

impl PmdMeters {
    /// Sets (`Some`) or removes meter `id` (a command from the main thread: it may allocate).
    pub fn set(&mut self, id: u32, meter: Option<Arc<DpMeter>>) {
        let i = id as usize;
        if self.by_id.len() <= i {
            if meter.is_none() {
                return;
            }
            self.by_id.resize_with(i + 1, || None);
        }
        self.by_id[i] = meter.map(|shared| PmdMeter {
            counters: MeterCounters {
                bands: vec![(0, 0); shared.n_bands()],
                ..MeterCounters::default()
            },
            shared,
            local: [0; MAX_BANDS],
        });
    }

    /// The PMD is going away: each meter keeps what it counted here, and forgets this side.
    pub(crate) fn retire(&mut self) {
        for m in std::mem::take(&mut self.by_id).into_iter().flatten() {
            m.shared.keep_counters(&m.counters);
        }
    }

    /// This PMD's counters of meter `id`.
    pub fn counters(&self, id: u32) -> Option<MeterCounters> {
        Some(self.by_id.get(id as usize)?.as_ref()?.counters.clone())
    }

    /// Runs meter `id` on `batch`: drops the packets a band fires on, keeping the others in
    /// order; returns how many it dropped. An unknown meter passes everything (as OVS's: a
    /// flow may outlive its meter until it is revalidated).
    pub fn run(&mut self, id: u32, batch: &mut Batch, pool: &mut Pool) -> usize {
        let Some(Some(m)) = self.by_id.get_mut(id as usize) else {
            return 0;
        };
        let shared = &*m.shared;
        shared.refill();
        let pkts = batch.packets_mut();
        let mut need = 0u64;
        for p in pkts.iter() {
            need += shared.cost(p.len());
        }
        let n_bands = shared.bands.len();
        for b in 0..n_bands {
            if m.local[b] < need {
                m.local[b] += shared.take(b, need - m.local[b]);
            }
        }
        // Each packet in order: the bands it exceeds, the fastest of them fires and drops it.
        let mut kept = 0;
        for i in 0..pkts.len() {
            let len = pkts[i].len();
            let cost = shared.cost(len);
            let mut fired = usize::MAX;
            for b in 0..n_bands {
                if m.local[b] >= cost {
                    m.local[b] -= cost;
                } else if fired == usize::MAX || shared.bands[b].rate > shared.bands[fired].rate {
                    fired = b;
                }
            }
            m.counters.packets += 1;
            m.counters.bytes += len as u64;
            if fired == usize::MAX {
                pkts.swap(kept, i);
                kept += 1;
            } else {
                let c = &mut m.counters.bands[fired];
                c.0 += 1;
                c.1 += len as u64;
            }
        }
        let dropped = pkts.len() - kept;
        if dropped > 0 {
            batch.free_from(kept, pool);
        }
        dropped
    }
}

/// The datapath's meters: the shared halves the PMDs were given, by id, and the free ids.
#[derive(Default)]
pub struct DpMeters {
    by_id: Vec<Option<Arc<DpMeter>>>,
}

impl DpMeters {
    /// The lowest free meter id (OVS's `id_pool_alloc_id`), which [`DpMeters::set`] then
    /// takes.
    pub fn free_id(&self) -> Result<u32, MeterError> {
        let i = self
            .by_id
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.by_id.len());
        u32::try_from(i)
            .ok()
            .filter(|&i| i < MAX_METERS)
            .ok_or(MeterError::OutOfMeters)
    }

    /// Makes meter `id` as `config` says (replacing any meter of that id): the shared half to
    /// hand to every PMD.
    pub fn set(&mut self, id: u32, config: &MeterConfig) -> Result<Arc<DpMeter>, MeterError> {
        if id >= MAX_METERS {
            return Err(MeterError::OutOfMeters);
        }
        let m = Arc::new(DpMeter::new(config)?);
        let i = id as usize;
        if self.by_id.len() <= i {
            self.by_id.resize_with(i + 1, || None);
        }
        self.by_id[i] = Some(m.clone());
        Ok(m)
    }

    /// Forgets meter `id`; whether it existed.
    pub fn del(&mut self, id: u32) -> bool {
        let gone = self
            .by_id
            .get_mut(id as usize)
            .and_then(Option::take)
            .is_some();
        while self.by_id.last().is_some_and(Option::is_none) {
            self.by_id.pop();
        }
        gone
    }

    /// Every meter, by id (for a PMD that starts while they exist).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &Arc<DpMeter>)> {
        self.by_id
            .iter()
            .enumerate()
            .filter_map(|(i, m)| Some((i as u32, m.as_ref()?)))
    }

    /// Meter `id`'s shared half.
    pub fn get(&self, id: u32) -> Option<&Arc<DpMeter>> {
        self.by_id.get(id as usize)?.as_ref()
    }

    /// Sums `per_pmd` counters of meter `id` with what it counted outside the PMDs.
    pub fn total(&self, id: u32, per_pmd: &[Option<MeterCounters>]) -> Option<MeterCounters> {
        let m = self.get(id)?;
        let mut c = m.slow_counters();
        for p in per_pmd.iter().flatten() {
            c.add(p);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(pool: &mut Pool, n: usize, len: usize) -> Batch {
        let mut b = Batch::new();
        for _ in 0..n {
            b.push(pool.packet_with_len(len, 1));
        }
        b
    }

    fn pktps(rate: u32, burst: u32) -> MeterConfig {
        MeterConfig {
            pktps: true,
            bands: vec![BandConfig { rate, burst }],
        }
    }

    #[test]
    fn a_full_bucket_passes_the_burst_then_drops() {
        let mut pool = Pool::new(256, 0);
        let mut dp = DpMeters::default();
        assert_eq!(dp.free_id(), Ok(0));
        let m = dp.set(0, &pktps(10, 20)).unwrap();
        assert_eq!(dp.free_id(), Ok(1));
        let mut pmd = PmdMeters::default();
        pmd.set(0, Some(m));
        let mut b = batch(&mut pool, 32, 60);
        let dropped = pmd.run(0, &mut b, &mut pool);
        // 20 packets of burst, and what 10 pkt/s earned while the test ran (well under one).
        assert_eq!((dropped, b.len()), (12, 20));
        let c = pmd.counters(0).unwrap();
        assert_eq!(c.packets, 32);
        assert_eq!(c.bytes, 32 * 60);
        assert_eq!(c.bands, vec![(12, 12 * 60)]);
        pool.free_batch(&mut b);
        // An unknown meter passes everything.
        let mut b = batch(&mut pool, 4, 60);
        assert_eq!(pmd.run(7, &mut b, &mut pool), 0);
        assert_eq!(b.len(), 4);
        pool.free_batch(&mut b);
    }

    #[test]
    fn kbps_bands_count_bits_and_the_fastest_exceeded_band_fires() {
        let mut pool = Pool::new(256, 0);
        let mut dp = DpMeters::default();
        // 8 kbit of burst in the slow band is 10 packets of 100 bytes; 16 kbit in the other.
        let cfg = MeterConfig {
            pktps: false,
            bands: vec![
                BandConfig { rate: 1, burst: 8 },
                BandConfig { rate: 2, burst: 16 },
            ],
        };
        let m = dp.set(3, &cfg).unwrap();
        let mut pmd = PmdMeters::default();
        pmd.set(3, Some(m));
        let mut b = batch(&mut pool, 30, 100);
        assert_eq!(pmd.run(3, &mut b, &mut pool), 20);
        let c = pmd.counters(3).unwrap();
        // Packets 10-19 exceed band 0 only; 20-29 both, and band 1 (rate 2) fires.
        assert_eq!(c.bands, vec![(10, 1000), (10, 1000)]);
        pool.free_batch(&mut b);
    }

    #[test]
    fn the_rate_is_shared_by_the_pmds() {
        let mut pool = Pool::new(256, 0);
        let mut dp = DpMeters::default();
        let m = dp.set(0, &pktps(1000, 40)).unwrap();
        let mut a = PmdMeters::default();
        let mut b = PmdMeters::default();
        a.set(0, Some(m.clone()));
        b.set(0, Some(m));
        let mut x = batch(&mut pool, 32, 60);
        let mut y = batch(&mut pool, 32, 60);
        let t = Instant::now();
        let dropped = a.run(0, &mut x, &mut pool) + b.run(0, &mut y, &mut pool);
        let earned = (t.elapsed().as_secs_f64() * 1000.0).ceil() as usize + 1;
        let passed = 64 - dropped;
        assert!((40..=40 + earned).contains(&passed), "{passed}");
        pool.free_batch(&mut x);
        pool.free_batch(&mut y);
    }

    #[test]
    fn refused_configurations_and_ids() {
        let mut dp = DpMeters::default();
        assert_eq!(
            dp.set(MAX_METERS, &pktps(1, 0)).err(),
            Some(MeterError::OutOfMeters)
        );
        assert_eq!(dp.set(0, &pktps(0, 0)).err(), Some(MeterError::BadRate));
        let none = MeterConfig {
            pktps: true,
            bands: vec![],
        };
        assert_eq!(dp.set(0, &none).err(), Some(MeterError::BadBands));
        dp.set(0, &pktps(1, 0)).unwrap();
        dp.set(1, &pktps(1, 0)).unwrap();
        assert!(dp.del(0));
        assert!(!dp.del(0));
        assert_eq!(dp.free_id(), Ok(0));
    }

    #[test]
    fn admit_shares_the_buckets_and_counts() {
        let mut dp = DpMeters::default();
        let m = dp.set(0, &pktps(1, 2)).unwrap();
        assert!(m.admit(60));
        assert!(m.admit(60));
        assert!(!m.admit(60));
        let c = dp.total(0, &[]).unwrap();
        assert_eq!((c.packets, c.bands.clone()), (3, vec![(1, 60)]));
    }
}
