//! The rings against a "kernel" played by the tests: anonymous mappings laid out as the
//! kernel lays out its rings, with indexes and descriptors written by the test, including
//! ones no correct kernel writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::if_xdp::RingOffset;
use super::ring::{Mmap, Ring};
use super::xsk::Xsk;

pub(super) const FS: u32 = 2048;
pub(super) const OFF: RingOffset = RingOffset {
    producer: 0,
    consumer: 64,
    flags: 128,
    desc: 192,
};

pub(super) fn fake_ring<T: Copy>(size: u32) -> (Mmap, Ring<T>) {
    let map = Mmap::map(192 + size as usize * std::mem::size_of::<T>(), -1, 0).unwrap();
    // SAFETY: the test plays the kernel's part on this mapping, which outlives the ring
    // (both end up in the same `Xsk`).
    let ring = unsafe { Ring::new(&map, &OFF, size) }.unwrap();
    (map, ring)
}

/// Stores the kernel's index `p` (a ring's producer or consumer pointer).
pub(super) fn kernel_store(p: *const AtomicU32, v: u32) {
    // SAFETY: `p` points into a live fake ring mapping.
    unsafe { (*p).store(v, Ordering::Release) };
}

pub(super) fn kernel_load(p: *const AtomicU32) -> u32 {
    // SAFETY: as above.
    unsafe { (*p).load(Ordering::Acquire) }
}

/// An `Xsk` over `/dev/null` (never woken: the fake rings never ask for it) with a UMEM of
/// `rx_frames` then `tx_frames` frames.
pub(super) fn fake_xsk(rx_frames: u32, tx_frames: u32, rings: Vec<Mmap>) -> Arc<Xsk> {
    Arc::new(Xsk {
        fd: std::fs::File::open("/dev/null").unwrap().into(),
        umem: Mmap::map(((rx_frames + tx_frames) * FS) as usize, -1, 0).unwrap(),
        _rings: rings,
        qid: 0,
        zero_copy: false,
    })
}
