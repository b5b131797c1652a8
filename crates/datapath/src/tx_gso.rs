//! Per-port counters of the TCP and UDP super-frames sent out of a port (`port/stats`):
//! handed whole to a queue that segments them itself ([`crate::port::TxQueue::tso`],
//! [`crate::port::TxQueue::uso`], [`crate::port::TxQueue::ufo`]), or cut into segments by
//! the switch ([`crate::gso`], [`crate::gso_tunnel`], [`crate::gso_udp`], [`crate::gso_ufo`]). Shared by the port's entry in the datapath and
//! its tx queue on every PMD; each PMD counts once per super-frame, never per packet.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Super-frames of one kind (TCP or UDP), by how they went out.
#[derive(Debug, Default)]
pub struct TxGsoCounts {
    whole: AtomicU64,
    segmented: AtomicU64,
    segments: AtomicU64,
}

impl TxGsoCounts {
    /// Counts `n` super-frames handed whole to the queue.
    #[inline]
    pub fn add_whole(&self, n: u64) {
        self.whole.fetch_add(n, Relaxed);
    }

    /// Counts a super-frame sent as `segments` segments.
    #[inline]
    pub fn add_segmented(&self, segments: u64) {
        self.segmented.fetch_add(1, Relaxed);
        self.segments.fetch_add(segments, Relaxed);
    }

    /// The counts: super-frames sent whole, super-frames segmented, their segments.
    pub fn get(&self) -> (u64, u64, u64) {
        (
            self.whole.load(Relaxed),
            self.segmented.load(Relaxed),
            self.segments.load(Relaxed),
        )
    }
}

/// Super-frames a port was sent: TCP ones (dereferenced: `add_whole`, `get`...), UDP
/// segmentation ones ([`TxGsoStats::udp`]) and UDP fragmentation ones ([`TxGsoStats::ufo`]:
/// "segments" are their IP fragments).
#[derive(Debug, Default)]
pub struct TxGsoStats {
    tcp: TxGsoCounts,
    /// The UDP segmentation (USO) super-frames' counts.
    pub udp: TxGsoCounts,
    /// The UDP fragmentation (UFO) super-frames' counts.
    pub ufo: TxGsoCounts,
}

impl core::ops::Deref for TxGsoStats {
    type Target = TxGsoCounts;

    fn deref(&self) -> &TxGsoCounts {
        &self.tcp
    }
}
