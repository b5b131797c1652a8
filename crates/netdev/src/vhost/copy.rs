//! Frame copies between switch buffers and guest memory: short frames with two overlapping
//! fixed-size moves inline, long ones with `memcpy` or `rep movsb` as a per-queue timing trial
//! finds faster on the host, and the virtio-net header written only where the guest's buffer
//! does not hold it already.

use crate::vnet;

/// Copies `len` bytes from `src` to `dst` as a frame copy wants it: up to 256 bytes with two
/// overlapping fixed-size moves inline (a 64-byte frame and its header are two 64-byte
/// moves), longer with `memcpy`. The call and size dispatch of `memcpy` cost as much as the
/// moves of a small frame.
///
/// # Safety
/// `src` is valid for reading and `dst` for writing `len` bytes, and the two do not overlap.
#[inline(always)]
pub(super) unsafe fn copy_frame(dst: *mut u8, src: *const u8, len: usize) {
    /// The first and the last `N` bytes (`N <= len <= 2 * N`).
    #[inline(always)]
    unsafe fn ends<const N: usize>(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: `N <= len`, so both ranges lie inside the caller's `len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, N);
            std::ptr::copy_nonoverlapping(src.add(len - N), dst.add(len - N), N);
        }
    }
    // SAFETY: the caller's contract, and each arm's `N` is at most `len`.
    unsafe {
        match len {
            16..=32 => ends::<16>(dst, src, len),
            33..=64 => ends::<32>(dst, src, len),
            65..=128 => ends::<64>(dst, src, len),
            129..=256 => ends::<128>(dst, src, len),
            _ => std::ptr::copy_nonoverlapping(src, dst, len),
        }
    }
}

/// How [`Ring::send`](super::vring::Ring::send) copies a frame of more than 256 bytes from a switch
/// buffer into one guest buffer (a lent frame's rest, and a frame spread over several guest
/// buffers, are copied as before). Which is faster depends on the host: on one Intel host `rep
/// movsb` made a 1518-byte PVP round trip 7-9 % cheaper, on another 10 % dearer
/// (`docs/performance.md` has the figures). [`CopyChooser`] picks per queue by timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LongCopy {
    /// `memcpy` (glibc's vector loop at these sizes).
    Vector = 0,
    /// The `rep movsb` string instruction.
    RepMovsb = 1,
}

/// [`copy_frame`], with frames longer than 256 bytes copied as `how` says.
///
/// # Safety
/// As [`copy_frame`].
#[inline(always)]
pub(super) unsafe fn copy_frame_with(dst: *mut u8, src: *const u8, len: usize, how: LongCopy) {
    #[cfg(target_arch = "x86_64")]
    if how == LongCopy::RepMovsb && len > 256 {
        // SAFETY: the caller's contract: `src` is valid for reading and `dst` for writing
        // `len` bytes, not overlapping. `rep movsb` copies exactly `rcx` bytes forward from
        // `rsi` to `rdi` (the direction flag is clear, as the ABI requires at every call) and
        // touches no other memory, no stack and no flags the compiler relies on.
        unsafe {
            core::arch::asm!(
                "rep movsb",
                inout("rcx") len => _,
                inout("rdi") dst => _,
                inout("rsi") src => _,
                options(nostack, preserves_flags)
            );
        }
        return;
    }
    let _ = how;
    // SAFETY: the caller's contract.
    unsafe { copy_frame(dst, src, len) }
}

/// Chooses, for one transmit queue, how long frames are copied into guest memory
/// ([`LongCopy`]) by timing the queue's own sends: the two ways take turns for
/// [`CopyChooser::WINDOWS`] windows of [`CopyChooser::WINDOW`] sends, then the one with fewer
/// TSC cycles per byte sent is kept for [`CopyChooser::SETTLE`] sends, and the trial starts
/// again (the load, the guest and the host change). Sends are timed only during a trial.
#[derive(Clone, Debug)]
pub(crate) struct CopyChooser {
    how: LongCopy,
    trial: bool,
    /// Sends timed in the current window, and windows done in the trial.
    sends: u32,
    windows: u32,
    /// Per way (indexed by `LongCopy as usize`): cycles and bytes in the trial.
    cycles: [u64; 2],
    bytes: [u64; 2],
    /// Sends since the last trial ended.
    settled: u64,
}

impl CopyChooser {
    pub(crate) const WINDOW: u32 = 256;
    pub(crate) const WINDOWS: u32 = 8;
    pub(crate) const SETTLE: u64 = 1 << 18;
    /// Whether there is a choice: `rep movsb` is an x86-64 instruction.
    const TRIES: bool = cfg!(target_arch = "x86_64");

    pub(crate) fn new() -> CopyChooser {
        CopyChooser {
            how: LongCopy::Vector,
            trial: Self::TRIES,
            sends: 0,
            windows: 0,
            cycles: [0; 2],
            bytes: [0; 2],
            settled: 0,
        }
    }

    /// The way to copy now.
    #[inline]
    pub(crate) fn how(&self) -> LongCopy {
        self.how
    }

    /// Whether the next send is to be timed.
    #[inline]
    pub(crate) fn timing(&self) -> bool {
        self.trial
    }

    /// Counts a send: during a trial, one that took `cycles` and sent `bytes` (a send that
    /// sent nothing does not count). Returns the way chosen when this send ends a trial.
    #[inline]
    pub(crate) fn record(&mut self, cycles: u64, bytes: u64) -> Option<LongCopy> {
        if !self.trial {
            self.settled += 1;
            if self.settled >= Self::SETTLE && Self::TRIES {
                self.trial = true;
                self.how = LongCopy::Vector;
            }
            return None;
        }
        if bytes == 0 {
            return None;
        }
        let i = self.how as usize;
        self.cycles[i] += cycles;
        self.bytes[i] += bytes;
        self.sends += 1;
        if self.sends < Self::WINDOW {
            return None;
        }
        self.sends = 0;
        self.windows += 1;
        if self.windows < Self::WINDOWS {
            self.how = match self.how {
                LongCopy::Vector => LongCopy::RepMovsb,
                LongCopy::RepMovsb => LongCopy::Vector,
            };
            return None;
        }
        // Cycles per byte, compared without division: c0/b0 <= c1/b1.
        let [c0, c1] = self.cycles.map(u128::from);
        let [b0, b1] = self.bytes.map(u128::from);
        self.how = if c1 * b0 < c0 * b1 {
            LongCopy::RepMovsb
        } else {
            LongCopy::Vector
        };
        self.trial = false;
        self.windows = 0;
        self.cycles = [0; 2];
        self.bytes = [0; 2];
        self.settled = 0;
        Some(self.how)
    }
}

/// Stores a virtio-net header of `hdr_len` bytes ([`vnet::HDR_LEN`] or
/// [`vnet::HDR_LEN_LEGACY`]) at `dst`: no offloads, `num_buffers` (which the legacy header
/// does not have) as given; unless `dst` already holds that header, which is then left as it
/// is. A DPDK guest's receive buffers mostly come back holding the header this wrote into them
/// the time before (its virtio driver reads it and, transmitting from the same buffer,
/// rewrites only the fields that differ), and its header ends where a cache line does, the
/// frame starting on the next. Left unwritten, the header's line then stays clean and shared
/// between the two cores; stored again, it moved to the switch's core at every frame, and the
/// guest missed on it when it read `num_buffers`. DPDK's vhost library compares first for the
/// same reason. (Where header and frame share a line, as in a Linux guest's buffers, the
/// frame's copy takes the line anyway and the compare gains nothing.)
///
/// # Safety
/// `dst` is valid for reading and writing `hdr_len` bytes.
#[inline(always)]
pub(super) unsafe fn put_hdr(dst: *mut u8, hdr_len: usize, num_buffers: u16) {
    /// Stores `v` at `at` unless the `N` bytes there equal it already.
    ///
    /// # Safety
    /// `at` is valid for reading and writing `N` bytes.
    #[inline(always)]
    unsafe fn store_if_new<const N: usize>(at: *mut u8, v: [u8; N]) {
        let at = at.cast::<[u8; N]>();
        // SAFETY: the caller's contract: one fixed-size load, at most one fixed-size store.
        // The guest may write the bytes concurrently, as with any device DMA: the header it
        // then reads is its own doing, never unsafety for the switch.
        unsafe {
            if std::ptr::read_unaligned(at) != v {
                std::ptr::write_unaligned(at, v);
            }
        }
    }
    let mut h = [0u8; vnet::HDR_LEN];
    h[10..12].copy_from_slice(&num_buffers.to_le_bytes());
    // SAFETY: the caller's contract, `hdr_len` bytes (the legacy header is the first 10 of
    // the 12, all zero).
    unsafe {
        if hdr_len == vnet::HDR_LEN {
            store_if_new(dst, h);
        } else {
            store_if_new::<{ vnet::HDR_LEN_LEGACY }>(dst, [0; vnet::HDR_LEN_LEGACY]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chooser` one window of sends at `cycles` each for `bytes` each; the way chosen if
    /// the window ended a trial.
    fn window(chooser: &mut CopyChooser, cycles: u64, bytes: u64) -> Option<LongCopy> {
        let mut chosen = None;
        for i in 0..CopyChooser::WINDOW {
            let c = chooser.record(cycles, bytes);
            assert!(
                c.is_none() || i == CopyChooser::WINDOW - 1,
                "chosen mid-window"
            );
            chosen = chosen.or(c);
        }
        chosen
    }

    /// Runs a whole trial of `chooser`, each way's windows at its (cycles, bytes) per send; the
    /// way chosen.
    fn trial(chooser: &mut CopyChooser, vector: (u64, u64), movsb: (u64, u64)) -> Option<LongCopy> {
        let mut chosen = None;
        for w in 0..CopyChooser::WINDOWS {
            let how = chooser.how();
            assert_eq!(how as u32, w % 2, "the ways take turns, window {w}");
            let (c, b) = match how {
                LongCopy::Vector => vector,
                LongCopy::RepMovsb => movsb,
            };
            let r = window(chooser, c, b);
            assert!(
                r.is_none() || w == CopyChooser::WINDOWS - 1,
                "chosen before the end"
            );
            chosen = r;
        }
        chosen
    }

    #[test]
    fn the_copy_chooser_keeps_the_way_with_fewer_cycles_per_byte_and_tries_again_later() {
        let mut c = CopyChooser::new();
        assert!(c.timing() && c.how() == LongCopy::Vector);
        // Sends that sent nothing do not count.
        for _ in 0..10 * CopyChooser::WINDOW {
            assert_eq!(c.record(1_000_000, 0), None);
        }
        assert!(c.timing() && c.how() == LongCopy::Vector);
        // `rep movsb` is cheaper per byte here.
        let chosen = trial(&mut c, (700, 48_000), (650, 48_000));
        assert_eq!(chosen, Some(LongCopy::RepMovsb));
        assert!(!c.timing(), "settled after the trial");
        assert_eq!(c.how(), LongCopy::RepMovsb);
        // Settled sends are not timed; after SETTLE of them a new trial starts from the vector
        // copy, and this time it wins.
        for _ in 0..CopyChooser::SETTLE {
            assert!(!c.timing() && c.how() == LongCopy::RepMovsb);
            assert_eq!(c.record(0, 48_000), None);
        }
        assert!(c.timing() && c.how() == LongCopy::Vector);
        assert_eq!(
            trial(&mut c, (640, 48_000), (650, 48_000)),
            Some(LongCopy::Vector)
        );
        assert_eq!(c.how(), LongCopy::Vector);
        // Per byte, not per send: more bytes for the same cycles is cheaper; a tie keeps vector.
        let mut c = CopyChooser::new();
        assert_eq!(
            trial(&mut c, (700, 40_000), (700, 48_000)),
            Some(LongCopy::RepMovsb)
        );
        let mut c = CopyChooser::new();
        assert_eq!(
            trial(&mut c, (700, 48_000), (700, 48_000)),
            Some(LongCopy::Vector)
        );
    }
}
