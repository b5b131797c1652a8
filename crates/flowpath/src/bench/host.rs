//! `flowpath bench host`: what the machine itself charges for the two things a vhost-user
//! round trip is made of besides the switch's own work, and for the memory a large
//! connection table reads, so that a PVP or conntrack figure can be read against its host:
//! - a cache line's round trip between two cores: one thread writes a line, the other, on the
//!   other core, sees the write and answers on the same line, and the first sees the answer
//!   (what a ring index, a descriptor or a buffer costs when the PMD and the guest both touch
//!   it; the PMD runs on core 1 and the guest on core 0 in `flowpath bench pvp`);
//! - `memcpy`'s cost for 1518-byte frames from working sets of the sizes PVP copies between
//!   (a few frames into a ring of guest buffers, 1000 distinct frames, and memory far beyond
//!   the caches): the physical limit of a copying round trip at that size;
//! - what a line read at random from memory far beyond the caches costs (on huge pages, as
//!   conntrack's connections and cache buckets are): one after another, each waiting for the
//!   last (the latency), and a burst's worth asked for at once and then read (how many misses
//!   the core keeps in flight): the bounds of a table whose packets each read lines at random;
//!   and a burst's worth of pairs, a line and then the line it names, as a packet of a large
//!   connection table reads its cache bucket and then its connection (with the first lines
//!   from all the memory, and from a few MiB that a cache may keep).
//!
//! Timings, like every benchmark: noisy on a shared machine; the minimum and median of many
//! windows are reported. Nothing here is used by the switch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;
use datapath::tsc;

/// Round trips a ping-pong window is made of.
const PING_PONGS_PER_WINDOW: u64 = 20_000;
/// The frame size PVP's large-frame cells copy (FCS excluded).
pub const COPY_FRAME: usize = 1514;
/// Room each frame has in a working set (a pool buffer's data room).
const SLOT: usize = 2048;

/// The line the two threads pass back and forth, alone in its 128 bytes (the adjacent-line
/// prefetcher pairs lines).
#[repr(align(128))]
struct Line(AtomicU64);

/// A cache line's round trip between two cores, in TSC cycles.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LineRoundTrip {
    pub cores: (usize, usize),
    pub windows: usize,
    pub min: f64,
    pub median: f64,
    /// The 90th percentile of the windows: a hypervisor that moves a vCPU shows here.
    pub p90: f64,
}

/// One working set's copy cost.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CopyCost {
    pub name: &'static str,
    /// Bytes of distinct frames copied from, and of buffers copied into.
    pub source_bytes: usize,
    pub destination_bytes: usize,
    /// TSC cycles per 1514-byte copy (median of the windows) and the bandwidth it makes.
    pub cycles_per_copy: f64,
    pub gbytes_per_second: f64,
}

/// The whole report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostReport {
    pub tsc_hz: u64,
    /// The core's own clock while it runs a dependent chain, in GHz (median of windows): a
    /// TSC cycle is a fixed time, and how much work a core does in it depends on the clock
    /// the host gives the vCPU, so cycles-per-packet figures of two hosts compare only
    /// through it.
    pub core_ghz: f64,
    pub line_round_trip: Option<LineRoundTrip>,
    /// Why the round trip was not measured (one core only, or a core not allowed).
    pub line_round_trip_skipped: Option<String>,
    pub copies: Vec<CopyCost>,
    pub random_lines: RandomLines,
}

/// Lines read at random from [`RANDOM_BYTES`] on huge pages, in TSC cycles a line (medians of
/// windows).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RandomLines {
    pub bytes: usize,
    /// Whether the memory was advised onto huge pages (the kernel may still not give them).
    pub huge_pages: bool,
    /// Each line's address read from the line before: the latency of a miss.
    pub dependent: f64,
    /// [`RANDOM_BURST`] lines asked for (prefetched), then read: a miss's share with a burst's
    /// worth in flight.
    pub burst: f64,
    /// [`RANDOM_BURST`] lines asked for, then each the line it names, then those read: a
    /// pair's share (a cache bucket, then the connection it names).
    pub pairs: f64,
    /// The same with the first line of each pair from the first `cached_first_bytes` of the
    /// memory (a bucket array small enough for a cache to keep).
    pub pairs_cached_first: f64,
    pub cached_first_bytes: usize,
    /// The same with the first lines from the first [`RANDOM_FIRST_FROM`] bytes (those below
    /// `bytes`): bytes, cycles a pair. What a cache's buckets of that size cost a packet with
    /// the connection each names.
    pub pairs_first_from: Vec<(usize, f64)>,
    /// A stream of random lines, each asked for a fixed number of reads before its own (one
    /// request a read, as a packet path that asks for each packet's line that many packets
    /// ahead): reads ahead ([`RANDOM_STREAM_AHEAD`]), cycles a line.
    pub stream_ahead: Vec<(usize, f64)>,
}

/// Measures for about `seconds` in all, the round trip between cores `a` and `b`.
pub fn run(a: usize, b: usize, seconds: f64) -> anyhow::Result<HostReport> {
    if !(seconds > 0.0 && seconds <= 600.0) {
        bail!("--seconds must be in (0, 600]");
    }
    let half = Duration::from_secs_f64(seconds / 2.0);
    let (line_round_trip, line_round_trip_skipped) =
        match line_round_trip(a, b, half, PING_PONGS_PER_WINDOW) {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        };
    Ok(HostReport {
        tsc_hz: tsc::hz(),
        core_ghz: core_ghz(Duration::from_millis(200)),
        line_round_trip,
        line_round_trip_skipped,
        copies: copy_costs(half),
        // Each of its series of windows a sixteenth of the time, at most a quarter second.
        random_lines: random_lines(
            RANDOM_BYTES,
            Duration::from_secs_f64((seconds / 16.0).min(0.25)),
        ),
    })
}

fn pin(core: usize) -> anyhow::Result<()> {
    datapath::dpif::pin_current_thread(core)
        .map_err(|e| anyhow::anyhow!("cannot run on core {core}: {e}"))
}

/// Ping-pong over one line between a thread on core `a` and one on core `b` for `span`, in
/// windows of `per_window` round trips.
fn line_round_trip(
    a: usize,
    b: usize,
    span: Duration,
    per_window: u64,
) -> anyhow::Result<LineRoundTrip> {
    if a == b {
        bail!("the two cores must differ");
    }
    let line = Arc::new(Line(AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let (l2, s2) = (Arc::clone(&line), Arc::clone(&stop));
    // The answering thread: every odd value it sees, it answers with the next even one.
    let answer = std::thread::Builder::new().name("host-pong".into()).spawn(
        move || -> anyhow::Result<()> {
            pin(b)?;
            let mut seen = 0;
            while !s2.load(Ordering::Relaxed) {
                let v = l2.0.load(Ordering::Acquire);
                if v != seen && !v.is_multiple_of(2) {
                    l2.0.store(v + 1, Ordering::Release);
                    seen = v;
                }
                std::hint::spin_loop();
            }
            Ok(())
        },
    )?;
    let asked = std::thread::Builder::new().name("host-ping".into()).spawn(
        move || -> anyhow::Result<Vec<f64>> {
            let r = pin(a).map(|()| ping(&line, span, per_window));
            stop.store(true, Ordering::Relaxed);
            r
        },
    )?;
    let windows = asked
        .join()
        .map_err(|_| anyhow::anyhow!("ping thread panicked"))?;
    answer
        .join()
        .map_err(|_| anyhow::anyhow!("pong thread panicked"))??;
    let mut windows = windows?;
    if windows.is_empty() {
        bail!("no window completed in {span:?} (is core {b} running anything else?)");
    }
    windows.sort_by(f64::total_cmp);
    Ok(LineRoundTrip {
        cores: (a, b),
        windows: windows.len(),
        min: windows[0],
        median: windows[windows.len() / 2],
        p90: windows[windows.len() * 9 / 10],
    })
}

/// The asking side: windows of round trips until `span` has passed; each window's cycles a
/// round trip. A window the answering thread does not finish within `span` is not counted.
fn ping(line: &Line, span: Duration, per_window: u64) -> Vec<f64> {
    let end = Instant::now() + span;
    let mut next = 1u64;
    let mut windows = Vec::new();
    'windows: while Instant::now() < end {
        let t0 = tsc::now();
        for _ in 0..per_window {
            line.0.store(next, Ordering::Release);
            let mut spins = 0u64;
            while line.0.load(Ordering::Acquire) != next + 1 {
                std::hint::spin_loop();
                spins += 1;
                if spins.is_multiple_of(65_536) && Instant::now() >= end {
                    break 'windows;
                }
            }
            next += 2;
        }
        windows.push(tsc::now().wrapping_sub(t0) as f64 / per_window as f64);
    }
    windows
}

/// Iterations of [`core_ghz`]'s chain a window.
const CHAIN_STEPS: u64 = 1 << 20;
/// Core cycles one step of the chain takes: an `or` (1 cycle) and a 64-bit multiply (3
/// cycles' latency on the x86 cores of these hosts, AMD Zen 2 to 5 and Intel since Sandy
/// Bridge), each waiting for the one before (a product of the value with itself, which no
/// compiler folds into a closed form as it can an affine recurrence).
const CHAIN_STEP_CYCLES: f64 = 4.0;

/// The core clock in GHz: a dependent chain's known cycles against the TSC.
fn core_ghz(span: Duration) -> f64 {
    let hz = tsc::hz() as f64;
    let end = Instant::now() + span;
    let mut windows = Vec::new();
    let mut x = std::hint::black_box(3u64);
    while windows.len() < 3 || Instant::now() < end {
        let t0 = tsc::now();
        for _ in 0..CHAIN_STEPS {
            x = x.wrapping_mul(x | 1);
        }
        let dt = tsc::now().wrapping_sub(t0).max(1) as f64;
        windows.push(CHAIN_STEPS as f64 * CHAIN_STEP_CYCLES / dt * hz / 1e9);
        x = std::hint::black_box(x);
    }
    windows.sort_by(f64::total_cmp);
    windows[windows.len() / 2]
}

/// The working sets: (name, distinct source frames, destination buffers).
const WORKING_SETS: &[(&str, usize, usize)] = &[
    ("8 frames into 256 buffers (pvp, 8 flows)", 8, 256),
    ("1000 frames into 256 buffers (pvp, 1000 flows)", 1000, 256),
    ("64 MiB into 64 MiB (memory)", 32_768, 32_768),
];

fn copy_costs(span: Duration) -> Vec<CopyCost> {
    let hz = tsc::hz() as f64;
    let each = span / WORKING_SETS.len() as u32;
    WORKING_SETS
        .iter()
        .map(|&(name, sources, buffers)| {
            let cycles = copy_cost(sources, buffers, each);
            CopyCost {
                name,
                source_bytes: sources * SLOT,
                destination_bytes: buffers * SLOT,
                cycles_per_copy: cycles,
                gbytes_per_second: COPY_FRAME as f64 * hz / cycles / 1e9,
            }
        })
        .collect()
}

/// Median cycles per 1514-byte copy, frames taken in turn from `sources` slots into
/// `buffers` slots, over windows for about `span`.
fn copy_cost(sources: usize, buffers: usize, span: Duration) -> f64 {
    let src: Vec<u8> = (0..sources * SLOT).map(|i| i as u8).collect();
    // Written once before the windows (not zeroed memory the kernel maps on first touch),
    // so that no window pays page faults.
    let mut dst = vec![1u8; buffers * SLOT];
    let per_window = sources.max(buffers).max(4096);
    let (mut s, mut d) = (0, 0);
    let cycles = windows(span, || {
        for _ in 0..per_window {
            let from = &src[s * SLOT..s * SLOT + COPY_FRAME];
            dst[d * SLOT..d * SLOT + COPY_FRAME].copy_from_slice(from);
            s = if s + 1 == sources { 0 } else { s + 1 };
            d = if d + 1 == buffers { 0 } else { d + 1 };
        }
        std::hint::black_box(&mut dst);
    });
    cycles / per_window as f64
}

/// Memory the random lines are read from: far beyond any cache, about conntrack's cache
/// buckets and connections at a million connections.
const RANDOM_BYTES: usize = 256 << 20;
/// Lines asked for at once: a burst of packets' worth.
const RANDOM_BURST: usize = 32;
/// Where the first lines of [`RandomLines::pairs_cached_first`] are: about what a large
/// L3 keeps of a table whose other reads stream through it.
const RANDOM_CACHED_FIRST: usize = 4 << 20;
/// Larger arrays of first lines: a PMD's connection cache at a million connections (16 MiB)
/// and as it was (64 MiB, a bucket per connection).
const RANDOM_FIRST_FROM: [usize; 2] = [16 << 20, 64 << 20];
/// How far ahead of its read each line of [`RandomLines::stream_ahead`] is asked for: a burst
/// of packets (the ahead-of-time requests of a `ct()` over one burst), and four.
const RANDOM_STREAM_AHEAD: [usize; 2] = [RANDOM_BURST, 4 * RANDOM_BURST];
/// Reads a window of random lines is made of.
const RANDOM_PER_WINDOW: usize = 1 << 16;

/// A line of the random-read probe: the index of the next line of the chain.
#[derive(Default)]
#[repr(align(64))]
struct ChainLine(usize);

/// [`RandomLines`] over `bytes` of memory, each of its four measures for about `span`.
fn random_lines(bytes: usize, span: Duration) -> RandomLines {
    let n = (bytes / size_of::<ChainLine>()).max(2);
    let mut lines = hugemem::HugeSlice::<ChainLine>::new(n);
    // Every line in one ring, in a shuffled order (each line holds the next one's index),
    // written before the windows so that none pays a page fault.
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..n).rev() {
        let j = (xorshift(&mut rng) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    for w in 0..n {
        lines[order[w]].0 = order[(w + 1) % n];
    }
    drop(order);
    let mut at = 0;
    let dependent = windows(span, || {
        for _ in 0..RANDOM_PER_WINDOW {
            at = lines[at].0;
        }
        std::hint::black_box(at);
    });
    let cached = (RANDOM_CACHED_FIRST / size_of::<ChainLine>()).clamp(1, n);
    let mut burst = |first: usize, hops: usize| random_bursts(&lines, first, hops, &mut rng, span);
    let pairs_first_from = RANDOM_FIRST_FROM
        .iter()
        .map(|b| b / size_of::<ChainLine>())
        .filter(|&first| first < n)
        .map(|first| (first * size_of::<ChainLine>(), burst(first, 1)))
        .collect();
    let (burst, pairs, pairs_cached_first) = (burst(n, 0), burst(n, 1), burst(cached, 1));
    let stream_ahead = RANDOM_STREAM_AHEAD
        .iter()
        .map(|&ahead| (ahead, random_stream(&lines, ahead, &mut rng, span)))
        .collect();
    RandomLines {
        bytes: n * size_of::<ChainLine>(),
        huge_pages: lines.advised_huge(),
        dependent: dependent / RANDOM_PER_WINDOW as f64,
        burst,
        pairs,
        pairs_cached_first,
        cached_first_bytes: cached * size_of::<ChainLine>(),
        pairs_first_from,
        stream_ahead,
    }
}

/// TSC cycles a line of a stream of lines picked at random among all of `lines`, each asked
/// for `ahead` reads before it is read (medians of windows for about `span`).
fn random_stream(lines: &[ChainLine], ahead: usize, rng: &mut u64, span: Duration) -> f64 {
    // A random line's index by multiplying and shifting, not dividing: a division a read
    // would be a cost of its own beside a line's share of the memory's time.
    let len = lines.len() as u128;
    let mut pick = || ((u128::from(xorshift(rng)) * len) >> 64) as usize;
    // The lines asked for and not yet read, oldest at `next`.
    let mut asked: Vec<usize> = (0..ahead.max(1)).map(|_| pick()).collect();
    let mut next = 0;
    let mut sum = 0usize;
    let cycles = windows(span, || {
        for _ in 0..RANDOM_PER_WINDOW {
            let p = pick();
            flow::hash::prefetch(&lines[p]);
            sum = sum.wrapping_add(lines[std::mem::replace(&mut asked[next], p)].0);
            next = if next + 1 == asked.len() { 0 } else { next + 1 };
        }
        std::hint::black_box(sum);
    });
    cycles / RANDOM_PER_WINDOW as f64
}

/// TSC cycles a line, or a chain of `hops` more, of [`RANDOM_BURST`] lines picked at random
/// among `lines[..first]` asked for at once, then (`hops` times) the lines they name asked
/// for, then the last read (medians of windows for about `span`).
fn random_bursts(
    lines: &[ChainLine],
    first: usize,
    hops: usize,
    rng: &mut u64,
    span: Duration,
) -> f64 {
    let mut sum = 0usize;
    let cycles = windows(span, || {
        for _ in 0..RANDOM_PER_WINDOW / RANDOM_BURST {
            let mut picked = [0usize; RANDOM_BURST];
            for p in &mut picked {
                *p = (xorshift(rng) % first as u64) as usize;
                flow::hash::prefetch(&lines[*p]);
            }
            for _ in 0..hops {
                for p in &mut picked {
                    *p = lines[*p].0;
                    flow::hash::prefetch(&lines[*p]);
                }
            }
            for p in picked {
                sum = sum.wrapping_add(lines[p].0);
            }
        }
        std::hint::black_box(sum);
    });
    cycles / RANDOM_PER_WINDOW as f64
}

/// The median TSC cycles of `window` over about `span` (at least three windows, the first
/// not counted: it warms what it touches).
fn windows(span: Duration, mut window: impl FnMut()) -> f64 {
    window();
    let end = Instant::now() + span;
    let mut cycles = Vec::new();
    while cycles.len() < 3 || Instant::now() < end {
        let t0 = tsc::now();
        window();
        cycles.push(tsc::now().wrapping_sub(t0) as f64);
    }
    cycles.sort_by(f64::total_cmp);
    cycles[cycles.len() / 2]
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// The report as text.
pub fn report(r: &HostReport) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "TSC: {:.3} GHz; core clock under a dependent chain: {:.2} GHz\n",
        r.tsc_hz as f64 / 1e9,
        r.core_ghz
    );
    match (&r.line_round_trip, &r.line_round_trip_skipped) {
        (Some(l), _) => {
            let _ = writeln!(
                s,
                "cache line round trip, cores {} and {}: {:.0} cycles (min of {} windows), median {:.0}, 90th percentile {:.0}",
                l.cores.0, l.cores.1, l.min, l.windows, l.median, l.p90
            );
        }
        (None, why) => {
            let _ = writeln!(
                s,
                "cache line round trip: not measured: {}",
                why.as_deref().unwrap_or("?")
            );
        }
    }
    for c in &r.copies {
        let _ = writeln!(
            s,
            "memcpy of {} bytes, {}: {:.0} cycles, {:.1} GB/s",
            COPY_FRAME, c.name, c.cycles_per_copy, c.gbytes_per_second
        );
    }
    let r = &r.random_lines;
    let _ = writeln!(
        s,
        "random 64-byte lines of {} MiB{}: {:.0} cycles each one after another, {:.1} each {} asked for at once; \
         a line then the line it names, {} pairs at once: {:.1} a pair, {:.1} with the first lines from {} MiB",
        r.bytes >> 20,
        if r.huge_pages { " (huge pages)" } else { "" },
        r.dependent,
        r.burst,
        RANDOM_BURST,
        RANDOM_BURST,
        r.pairs,
        r.pairs_cached_first,
        r.cached_first_bytes >> 20,
    );
    list_line(
        &mut s,
        "a pair with the first lines from more",
        &r.pairs_first_from,
        |bytes, c| format!("{c:.1} from {} MiB", bytes >> 20),
    );
    list_line(
        &mut s,
        "a stream of random lines, each asked for before its read",
        &r.stream_ahead,
        |n, c| format!("{c:.1} each {n} reads ahead"),
    );
    s
}

/// Appends to `s` an indented line of `heading` and `items`, each (size, cycles) written by
/// `item` and joined by commas; nothing when there are none.
fn list_line(
    s: &mut String,
    heading: &str,
    items: &[(usize, f64)],
    item: impl Fn(usize, f64) -> String,
) {
    if items.is_empty() {
        return;
    }
    let items: Vec<String> = items.iter().map(|&(n, c)| item(n, c)).collect();
    s.push_str(&format!("  {heading}: {}\n", items.join(", ")));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_measured_and_bad_windows_refused() {
        assert!(run(1, 0, 0.0).is_err());
        assert!(run(1, 0, 1e9).is_err());
        let ghz = core_ghz(Duration::from_millis(20));
        assert!(ghz.is_finite() && ghz > 0.0, "{ghz}");
        let costs = copy_costs(Duration::from_millis(30));
        assert_eq!(costs.len(), WORKING_SETS.len());
        for c in &costs {
            assert!(
                c.cycles_per_copy > 0.0 && c.gbytes_per_second > 0.0,
                "{c:?}"
            );
        }
    }

    #[test]
    fn random_lines_are_measured() {
        // 4 MiB: beyond a core's own caches, small enough for a test.
        let r = random_lines(4 << 20, Duration::from_millis(20));
        assert_eq!(r.bytes, 4 << 20);
        assert!(r.dependent > 0.0 && r.burst > 0.0, "{r:?}");
        assert!(r.pairs > 0.0 && r.pairs_cached_first > 0.0, "{r:?}");
        assert_eq!(r.cached_first_bytes, RANDOM_CACHED_FIRST);
        // None of the larger arrays fits 4 MiB.
        assert!(r.pairs_first_from.is_empty(), "{r:?}");
        let ahead: Vec<usize> = r.stream_ahead.iter().map(|&(n, _)| n).collect();
        assert_eq!(ahead, RANDOM_STREAM_AHEAD, "{r:?}");
        assert!(r.stream_ahead.iter().all(|&(_, c)| c > 0.0), "{r:?}");
        assert!(
            report(&HostReport {
                tsc_hz: 1,
                core_ghz: 1.0,
                line_round_trip: None,
                line_round_trip_skipped: Some("test".into()),
                copies: Vec::new(),
                random_lines: r,
            })
            .contains("random 64-byte lines of 4 MiB")
        );
    }

    #[test]
    fn a_round_trip_needs_two_cores() {
        assert!(line_round_trip(0, 0, Duration::from_millis(10), 100).is_err());
        // On the machine's first two cores when it has them: both threads answer, so
        // windows complete (how long they take is not judged; small windows, so that a
        // loaded machine that runs the two threads in turn still finishes some).
        if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
            let r = line_round_trip(1, 0, Duration::from_secs(2), 100).unwrap();
            assert!(
                r.windows >= 1 && r.min > 0.0 && r.min <= r.median && r.median <= r.p90,
                "{r:?}"
            );
        }
    }
}
