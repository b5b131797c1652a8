//! Per-stream counters: packets and bytes sent and received, loss, reordering, duplicates, and
//! latency as a histogram with percentiles.
//!
//! Latency is kept in a log-linear histogram (as HdrHistogram does): values below 128 ns
//! each have a bucket of their own, above that every power of two is split into 128 equal
//! buckets, so a percentile read from it is within 1 % of the true value, from 0 ns to the
//! full `u64` range, in a fixed 57 KiB per stream and with no allocation while recording.

use serde::Serialize;

/// Sub-buckets per power of two (7 bits: a relative error below 2^-7).
const SUB_BITS: u32 = 7;
const SUB: usize = 1 << SUB_BITS;
/// Buckets in all: the linear range below `SUB`, then `SUB / 2` per power of two above it
/// (the top half of each range; the bottom half is the previous range).
const BUCKETS: usize = SUB + (64 - SUB_BITS as usize) * (SUB / 2);

/// Latencies in nanoseconds.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64]>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            n: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("n", &self.n)
            .field("min", &self.min)
            .field("max", &self.max)
            .finish()
    }
}

/// The bucket of `v`.
#[inline]
fn bucket(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    // v has `bits` significant bits, bits > SUB_BITS; keep the top SUB_BITS of them.
    let bits = 64 - v.leading_zeros();
    let shift = bits - SUB_BITS;
    let top = (v >> shift) as usize; // in SUB/2 .. SUB
    SUB + (shift as usize - 1) * (SUB / 2) + (top - SUB / 2)
}

/// The smallest value of bucket `b`.
fn bucket_low(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let shift = (b - SUB) / (SUB / 2) + 1;
    let top = (b - SUB) % (SUB / 2) + SUB / 2;
    (top as u64) << shift
}

/// The largest value of bucket `b`.
fn bucket_high(b: usize) -> u64 {
    if b + 1 >= BUCKETS {
        u64::MAX
    } else {
        bucket_low(b + 1) - 1
    }
}

impl Histogram {
    /// Records one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.n += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Adds `o`'s values.
    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.n += o.n;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// The value below which a share `q` (0..=1) of the values lie: the middle of the bucket
    /// holding the rank `ceil(q * n)`, clamped to the exact minimum and maximum. `None` when
    /// empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = (bucket_low(b), bucket_high(b));
                let mid = lo + (hi - lo) / 2;
                return Some(mid.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// The summary printed and written to JSON.
    pub fn summary(&self) -> Option<LatencySummary> {
        (self.n > 0).then(|| LatencySummary {
            samples: self.n,
            min_ns: self.min,
            avg_ns: (self.sum / u128::from(self.n)) as u64,
            max_ns: self.max,
            p50_ns: self.quantile(0.5).unwrap_or(0),
            p99_ns: self.quantile(0.99).unwrap_or(0),
            p999_ns: self.quantile(0.999).unwrap_or(0),
        })
    }
}

/// Latency figures of a stream, nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LatencySummary {
    pub samples: u64,
    pub min_ns: u64,
    pub avg_ns: u64,
    pub max_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
}

/// What the receiving side tracks of a stream's sequence numbers: the highest seen (extended
/// to 64 bits across the stamp's 32-bit wrap), and which of the last 64 below it arrived, to
/// tell a late packet (out of order) from a second copy (duplicate).
#[derive(Clone, Debug, Default)]
pub struct SeqTracker {
    /// Highest sequence number seen plus one (0: none yet).
    next: u64,
    /// Bit i: sequence number `next - 1 - i` was seen.
    window: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    /// Packets later than the 64-packet window: counted as out of order (may hide a
    /// duplicate).
    pub very_late: u64,
}

impl SeqTracker {
    /// Takes a received 32-bit sequence number.
    #[inline]
    pub fn see(&mut self, seq32: u32) {
        // Extend to 64 bits around what we expect next.
        let base = self.next;
        let mut s = (base & !0xffff_ffff) | u64::from(seq32);
        if s + (1 << 31) < base {
            s += 1 << 32;
        } else if s > base + (1 << 31) && s >= 1 << 32 {
            s -= 1 << 32;
        }
        if s >= self.next {
            let gap = s - self.next + 1;
            self.window = if gap >= 64 { 0 } else { self.window << gap };
            self.window |= 1;
            self.next = s + 1;
        } else {
            let back = self.next - 1 - s;
            if back >= 64 {
                self.very_late += 1;
                self.out_of_order += 1;
            } else if self.window & (1 << back) != 0 {
                self.duplicates += 1;
            } else {
                self.window |= 1 << back;
                self.out_of_order += 1;
            }
        }
    }
}

/// A stream's figures from one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StreamStats {
    pub name: String,
    pub tx_port: String,
    pub rx_port: String,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Received on another port than the stream's rx port (also in `rx_packets`).
    pub rx_elsewhere: u64,
    /// tx - rx: never negative, as duplicates are not counted as received. A frame the tx
    /// port refused (its queue full) is lost too.
    pub lost: u64,
    pub loss_pct: f64,
    pub out_of_order: u64,
    pub duplicates: u64,
    /// Offered and received rates over the sending time.
    pub tx_pps: f64,
    pub rx_pps: f64,
    /// Bits per second on the wire, Ethernet FCS, preamble and gap counted (L1).
    pub tx_l1_bps: f64,
    pub rx_l1_bps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencySummary>,
}

/// Ethernet overhead per frame outside the buffer a port holds: FCS (4), preamble and start
/// delimiter (8), inter-frame gap (12).
pub const L1_OVERHEAD: u64 = 24;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_tile_the_range() {
        for b in 0..BUCKETS - 1 {
            assert_eq!(bucket_high(b) + 1, bucket_low(b + 1), "bucket {b}");
            assert_eq!(bucket(bucket_low(b)), b);
            assert_eq!(bucket(bucket_high(b)), b);
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_of_a_uniform_spread() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        let s = h.summary().unwrap();
        assert_eq!((s.min_ns, s.max_ns, s.samples), (10, 1_000_000, 100_000));
        assert_eq!(s.avg_ns, 500_005);
        for (got, want) in [
            (s.p50_ns, 500_000),
            (s.p99_ns, 990_000),
            (s.p999_ns, 999_000),
        ] {
            let err = (got as f64 - want as f64).abs() / want as f64;
            assert!(err < 0.01, "{got} vs {want}");
        }
        assert!(Histogram::default().summary().is_none());
    }

    #[test]
    fn a_few_outliers_show_in_the_tail_only() {
        let mut h = Histogram::default();
        for _ in 0..9990 {
            h.record(5_000);
        }
        for _ in 0..10 {
            h.record(2_000_000);
        }
        let s = h.summary().unwrap();
        assert!(s.p50_ns.abs_diff(5_000) < 50 && s.p99_ns.abs_diff(5_000) < 50);
        assert!(s.p999_ns.abs_diff(5_000) < 50, "rank 9990 is still 5 us");
        assert_eq!(s.max_ns, 2_000_000);
        let mut m = Histogram::default();
        m.record(1);
        m.merge(&h);
        assert_eq!((m.count(), m.summary().unwrap().min_ns), (10_001, 1));
    }

    #[test]
    fn sequence_accounting() {
        let mut t = SeqTracker::default();
        for s in [0, 1, 2, 4, 3, 3, 5, 100, 6, 200] {
            t.see(s);
        }
        // 3 late (ooo), 3 again (dup), 6 late, more than 64 behind 100? no: 94 -> very late.
        assert_eq!((t.out_of_order, t.duplicates, t.very_late), (2, 1, 1));
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut t = SeqTracker::default();
        let mut s = u32::MAX - 5;
        // Start near the wrap: the first packet sets the base.
        for _ in 0..20 {
            t.see(s);
            s = s.wrapping_add(1);
        }
        assert_eq!((t.out_of_order, t.duplicates), (0, 0));
        t.see(u32::MAX);
        assert_eq!(
            t.duplicates, 1,
            "a number from before the wrap is a duplicate"
        );
    }

    proptest! {
        #[test]
        fn quantiles_within_one_percent(vals in proptest::collection::vec(1u64..10_000_000_000, 1..500), q in 0.0f64..1.0) {
            let mut h = Histogram::default();
            for &v in &vals { h.record(v); }
            let mut sorted = vals.clone();
            sorted.sort();
            let rank = ((q * vals.len() as f64).ceil() as usize).max(1);
            let exact = sorted[rank - 1];
            let got = h.quantile(q).unwrap();
            prop_assert!((got as f64 - exact as f64).abs() <= exact as f64 * 0.01 + 1.0, "{} vs {}", got, exact);
        }
    }
}
