//! Receiving on an AF_XDP socket: a burst copies each frame the rx ring hands over into a pool
//! packet and gives its UMEM frame straight back to the fill ring; and the port's rx queue,
//! which also checks every ~100 ms that the socket's interface is still the one it is bound
//! to.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

use datapath::packet::{Batch, Pool};
use datapath::port::{QueueStats, RxQueue};

use super::attach::Shared;
use super::if_xdp::XdpDesc;
use super::lock;
use super::ring::Ring;
use super::slot::Slot;
use super::xsk::{Xsk, wakeup};
use crate::afpacket::due;

/// Polls of an rx queue between two clock reads.
const POLLS_PER_CLOCK: u32 = 64;

pub(super) struct RxSide {
    pub(super) xsk: Arc<Xsk>,
    pub(super) rx: Ring<XdpDesc>,
    pub(super) fill: Ring<u64>,
    pub(super) frame_size: u64,
    /// End of the rx frames in the UMEM: rx frames are `0..rx_end`, tx frames after.
    pub(super) rx_end: u64,
    /// Frames received whose fill-ring slot was not free yet (never by construction: the fill
    /// ring has room for every rx frame; kept so that a frame is not lost). Never grows past
    /// its capacity (the number of rx frames).
    pub(super) stash: Vec<u64>,
    pub(super) in_port: u32,
    pub(super) stats: Arc<QueueStats>,
}

// SAFETY: the ring pointers point into mappings owned by `xsk`, which this value keeps alive;
// an rx side is used by one thread at a time (it is moved, never shared), and it touches only
// the rx frames of the UMEM, which no tx side touches.
unsafe impl Send for RxSide {}

/// Where an rx descriptor's frame is: its chunk (the frame's start, to give back to the fill
/// ring) when that is one of the rx frames, and whether the data (`addr..addr + len`) lies
/// inside that one frame and is not empty.
#[inline]
fn rx_frame(d: &XdpDesc, frame_size: u64, rx_end: u64) -> Option<(u64, bool)> {
    let off = d.addr & (frame_size - 1);
    let chunk = d.addr - off;
    (chunk < rx_end).then(|| (chunk, d.len > 0 && off + u64::from(d.len) <= frame_size))
}

impl RxQueue for RxSide {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        if !self.stash.is_empty() {
            let (idx, k) = self.fill.reserve(self.stash.len() as u32);
            for i in 0..k {
                let a = self.stash.pop().unwrap_or_default();
                self.fill.write(idx.wrapping_add(i), a);
            }
            self.fill.submit(k);
        }
        let room = u32::try_from(batch.room()).unwrap_or(u32::MAX);
        if room == 0 {
            return 0;
        }
        let (idx, n) = self.rx.peek(room);
        if n == 0 {
            if self.fill.needs_wakeup() {
                wakeup(self.xsk.fd.as_raw_fd(), false);
            }
            return 0;
        }
        let (fidx, fk) = self.fill.reserve(n);
        let mut filled = 0;
        let (mut got, mut bytes, mut bad) = (0u32, 0u64, 0u64);
        for i in 0..n {
            let d = self.rx.read(idx.wrapping_add(i));
            // A descriptor is checked before its frame is read or recycled: a chunk that is
            // not one of our rx frames (a tx frame, or outside the UMEM) must never reach
            // the fill ring, where the kernel would write into it.
            let Some((chunk, data_ok)) = rx_frame(&d, self.frame_size, self.rx_end) else {
                bad += 1;
                continue;
            };
            if data_ok {
                // SAFETY: `addr..addr + len` lies inside one rx frame (checked above), hence
                // inside the UMEM mapping (`rx_end` <= its length). The frame is ours: the
                // kernel released it through the rx ring (acquired in `peek`) and writes it
                // again only after we hand its chunk back through the fill ring below.
                let frame = unsafe {
                    std::slice::from_raw_parts(
                        self.xsk.umem.ptr.add(d.addr as usize),
                        d.len as usize,
                    )
                };
                batch.push(pool.packet_from(frame, self.in_port));
                got += 1;
                bytes += u64::from(d.len);
            } else {
                bad += 1;
            }
            if filled < fk {
                self.fill.write(fidx.wrapping_add(filled), chunk);
                filled += 1;
            } else if self.stash.len() < self.stash.capacity() {
                self.stash.push(chunk);
            }
        }
        self.rx.release(n);
        self.fill.submit(filled);
        self.stats.count_rx(u64::from(got), bytes, 0, bad);
        got as usize
    }
}

/// An rx queue: the rx side of its slot's socket, checked on every ~100 ms.
pub(super) struct AfXdpRxq {
    pub(super) side: Option<RxSide>,
    pub(super) slot: Arc<Slot>,
    pub(super) shared: Arc<Shared>,
    pub(super) in_port: u32,
    pub(super) stats: Arc<QueueStats>,
    /// The slot's epoch `side` belongs to.
    pub(super) epoch: u64,
    /// Where `side`'s socket is bound; 0 without one.
    pub(super) ifindex: u32,
    pub(super) polls: u32,
    pub(super) next_check: Instant,
}

impl AfXdpRxq {
    /// Every ~100 ms: checks that the interface bearing the name is still the one the socket
    /// is bound to (one `ioctl`); if not (or with no socket), re-attaches and rebuilds the
    /// socket when the interface is back. Then takes the slot's new rx side, if any (the
    /// socket may also have been rebuilt by a tx queue).
    #[cold]
    fn housekeep(&mut self) {
        if !due(&mut self.next_check) {
            return;
        }
        if self.side.is_none() || self.shared.lookup() != Some(self.ifindex) {
            let (generation, ifindex, mode) = self.shared.refresh();
            self.slot.sync(&self.shared, generation, ifindex, mode);
        }
        let mut st = lock(&self.slot.state);
        if st.epoch != self.epoch {
            self.epoch = st.epoch;
            self.side = st.rx.take().map(|mut s| {
                s.in_port = self.in_port;
                s.stats = self.stats.clone();
                s
            });
            self.ifindex = if self.side.is_some() { st.ifindex } else { 0 };
        }
    }
}

impl RxQueue for AfXdpRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(POLLS_PER_CLOCK) {
            self.housekeep();
        }
        match &mut self.side {
            Some(s) => s.recv(pool, batch),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake_kernel::*;
    use super::*;

    #[test]
    fn bad_rx_descriptors_are_counted_and_never_recycled_outside_rx_frames() {
        let (rx_map, mut rx) = fake_ring::<XdpDesc>(8);
        let (fill_map, fill) = fake_ring::<u64>(8);
        let (rx_prod, fill_prod) = (rx.producer, fill.producer);
        let xsk = fake_xsk(4, 4, vec![rx_map, fill_map]);
        let rx_end = u64::from(4 * FS);
        let good = XdpDesc {
            addr: 256,
            len: 60,
            options: 0,
        };
        // SAFETY: writes the first 60 bytes of data of rx frame 0 (inside the UMEM).
        unsafe { std::ptr::write_bytes(xsk.umem.ptr.add(256), 0xab, 60) };
        let descs = [
            good,
            // A tx frame.
            XdpDesc {
                addr: rx_end,
                ..good
            },
            // Outside the UMEM.
            XdpDesc {
                addr: 1 << 40,
                ..good
            },
            // Crosses into the next frame.
            XdpDesc {
                addr: u64::from(FS) + 2000,
                len: 100,
                options: 0,
            },
            XdpDesc {
                addr: u64::from(2 * FS),
                len: 0,
                options: 0,
            },
            XdpDesc {
                addr: u64::from(3 * FS) + 256,
                len: u32::MAX,
                options: 0,
            },
        ];
        for (i, d) in descs.iter().enumerate() {
            rx.write(i as u32, *d);
        }
        kernel_store(rx_prod, descs.len() as u32);
        let mut side = RxSide {
            xsk,
            rx,
            fill,
            frame_size: u64::from(FS),
            rx_end,
            stash: Vec::with_capacity(4),
            in_port: 3,
            stats: QueueStats::shared(),
        };
        let (mut pool, mut batch) = (Pool::new(64, 0), Batch::new());
        assert_eq!(side.recv(&mut pool, &mut batch), 1);
        assert_eq!(batch.packets()[0].data(), &[0xab; 60]);
        let c = side.stats.snapshot();
        assert_eq!((c.rx_packets, c.rx_bytes, c.errors), (1, 60, 5));
        // The four rx frames went back to the fill ring; the tx frame and the address outside
        // the UMEM did not.
        assert_eq!(kernel_load(fill_prod), 4);
        let back: Vec<u64> = (0..4).map(|i| side.fill.read(i)).collect();
        assert_eq!(
            back,
            [0, u64::from(FS), u64::from(2 * FS), u64::from(3 * FS)]
        );
        pool.free_batch(&mut batch);

        // A producer index far ahead: at most a batch is read, nothing panics, and whatever
        // is recycled is an rx frame.
        kernel_store(rx_prod, 6 + 1_000_000);
        for _ in 0..4 {
            side.recv(&mut pool, &mut batch);
            pool.free_batch(&mut batch);
        }
        let prod = kernel_load(fill_prod);
        for i in 0..8 {
            assert!(side.fill.read(prod.wrapping_sub(i)) < rx_end);
        }
        assert!(side.stash.len() <= side.stash.capacity());
    }
}
