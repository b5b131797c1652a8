//! The time-stamp counter: how the PMD counts cycles per stage. These machines have no hardware
//! performance counters, and the TSC is invariant (constant rate, 2.6 GHz here), so TSC cycles
//! are the unit of every cycles-per-packet figure, as in OVS's `pmd-perf-show`.

/// Reads the time-stamp counter (0 on targets without one).
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` reads a counter register; it has no memory effects and no
        // preconditions beyond running on x86-64, which the `cfg` guarantees. It is unsafe in
        // `core::arch` only because it is a raw intrinsic.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// What one [`now`] costs in TSC cycles, measured once over 100000 back-to-back reads: the
/// price of the per-stage accounting, which reads the counter a fixed number of times per batch.
pub fn read_cost() -> f64 {
    use std::sync::OnceLock;
    static COST: OnceLock<f64> = OnceLock::new();
    *COST.get_or_init(|| {
        const N: u64 = 100_000;
        let t0 = now();
        let mut last = t0;
        for _ in 0..N {
            last = core::hint::black_box(now());
        }
        last.wrapping_sub(t0) as f64 / N as f64
    })
}

/// TSC ticks per second, measured once against the monotonic clock over ~20 ms.
pub fn hz() -> u64 {
    use std::sync::OnceLock;
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let (t0, c0) = (std::time::Instant::now(), now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (dt, dc) = (t0.elapsed(), now().wrapping_sub(c0));
        if dc == 0 {
            1_000_000_000
        } else {
            (dc as f64 / dt.as_secs_f64()) as u64
        }
    })
}
