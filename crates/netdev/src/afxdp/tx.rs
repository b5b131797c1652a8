//! Sending on an AF_XDP socket: a burst takes completed frames back, copies packets into free
//! tx frames and kicks the kernel; and the port's tx queue, which locks a socket's tx side once
//! per burst and, when the socket's interface went away, rebuilds it once it is back.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use datapath::packet::{Batch, Pool};
use datapath::port::{QueueStats, TxQueue};

use super::attach::Shared;
use super::if_xdp::XdpDesc;
use super::lock;
use super::ring::Ring;
use super::slot::Slot;
use super::xsk::{Xsk, wakeup};
use crate::afpacket::due;

pub(super) struct TxSide {
    pub(super) xsk: Arc<Xsk>,
    pub(super) tx: Ring<XdpDesc>,
    pub(super) comp: Ring<u64>,
    /// Addresses of the tx frames not in flight (capacity: every tx frame; never grows).
    pub(super) free: Vec<u64>,
    pub(super) frame_size: u64,
    /// The tx frames are `tx_start..tx_end` in the UMEM.
    pub(super) tx_start: u64,
    pub(super) tx_end: u64,
    /// Completions the kernel gave with an address that is not one of our tx frames, not
    /// yet counted by a queue.
    pub(super) bad: u64,
}

// SAFETY: the ring pointers point into mappings owned by `xsk`, which this value keeps alive;
// a tx side is used under its mutex only, and it touches only the tx frames of the UMEM,
// which no rx side touches.
unsafe impl Send for TxSide {}

/// How a kick ended.
pub(super) enum Kick {
    /// The kernel took everything (or needs no kick).
    Done,
    /// Descriptors are left for a later kick (`EAGAIN`, `EBUSY`, `ENOBUFS`, link down).
    Pending,
    /// The socket is no longer bound (`ENXIO`): its interface went away.
    Gone,
    /// Another error.
    Error,
}

/// `sendto` calls one kick makes at most: in copy mode the kernel sends a batch (32) per call
/// and answers `EAGAIN` while descriptors are left, so this bounds a kick to one call per
/// batch of frames queued, not per frame.
const KICK_CALLS: usize = 8;

/// What one `TxSide::send` did.
pub(super) struct Sent {
    packets: u64,
    bytes: u64,
    dropped: u64,
    errors: u64,
    pending: bool,
    /// The socket's interface is gone (see [`Kick::Gone`]).
    gone: bool,
}

impl TxSide {
    /// Takes the completed frames back. An address that is not one of our tx frames (a
    /// kernel bug) is counted and never reused: frames are written at the addresses on the
    /// free list.
    fn reap(&mut self) {
        let (idx, n) = self.comp.peek(self.comp.size);
        for i in 0..n {
            let a = self.comp.read(idx.wrapping_add(i)) & !(self.frame_size - 1);
            if (self.tx_start..self.tx_end).contains(&a) && self.free.len() < self.free.capacity() {
                self.free.push(a);
            } else {
                self.bad += 1;
            }
        }
        self.comp.release(n);
    }

    /// Makes the kernel send what the tx ring holds: one `sendto`, repeated (at most
    /// [`KICK_CALLS`]) only while the kernel answers `EAGAIN` with descriptors left.
    pub(super) fn kick(&mut self) -> Kick {
        for _ in 0..KICK_CALLS {
            if self.tx.outstanding() == 0 || !self.tx.needs_wakeup() {
                return Kick::Done;
            }
            if wakeup(self.xsk.fd.as_raw_fd(), true) >= 0 {
                // Copy mode sent what it could; zero-copy drivers send asynchronously.
                break;
            }
            match io::Error::last_os_error().raw_os_error() {
                // More left (copy mode's batch limit), or the completion ring is full, or
                // the device was busy: take completions back and go on.
                Some(libc::EAGAIN | libc::EBUSY) => self.reap(),
                Some(libc::ENOBUFS | libc::ENETDOWN) => return Kick::Pending,
                // Unbound: the kernel unbinds a socket whose interface is unregistered.
                Some(libc::ENXIO | libc::ENODEV) => return Kick::Gone,
                _ => return Kick::Error,
            }
        }
        if self.tx.outstanding() == 0 {
            Kick::Done
        } else {
            Kick::Pending
        }
    }

    /// Queues the packets of `batch` and kicks once. Packets that do not fit (no ring slot
    /// or no free frame: the kernel is not keeping up) or are empty or larger than a frame
    /// are dropped.
    fn send(&mut self, batch: &Batch) -> Sent {
        self.reap();
        let pkts = batch.packets();
        let want = u32::try_from(pkts.len()).unwrap_or(u32::MAX);
        let (idx, slots) = self.tx.reserve(want);
        let (mut n, mut bytes, mut dropped) = (0u32, 0u64, 0u64);
        for p in pkts {
            let data = p.data();
            if data.is_empty() || data.len() as u64 > self.frame_size || n == slots {
                dropped += 1;
                continue;
            }
            let Some(addr) = self.free.pop() else {
                dropped += 1;
                continue;
            };
            // SAFETY: `addr` is a tx frame (`tx_start..tx_end`, frame aligned: checked before
            // it entered the free list), so `addr + frame_size` is inside the UMEM mapping,
            // and `data` is at most `frame_size` bytes. The frame is not in flight (it is on
            // the free list), so the kernel does not read it, and no rx side touches tx
            // frames.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    self.xsk.umem.ptr.add(addr as usize),
                    data.len(),
                )
            };
            self.tx.write(
                idx.wrapping_add(n),
                XdpDesc {
                    addr,
                    len: data.len() as u32,
                    options: 0,
                },
            );
            n += 1;
            bytes += data.len() as u64;
        }
        self.tx.submit(n);
        let (pending, error, gone) = match self.kick() {
            Kick::Done => (false, false, false),
            Kick::Pending => (true, false, false),
            Kick::Error => (true, true, false),
            Kick::Gone => (false, false, true),
        };
        Sent {
            packets: u64::from(n),
            bytes,
            dropped,
            errors: u64::from(error) + std::mem::take(&mut self.bad),
            pending,
            gone,
        }
    }
}

pub(super) struct AfXdpTxq {
    pub(super) slot: Arc<Slot>,
    pub(super) shared: Arc<Shared>,
    /// Held while this queue lives: tells the port which tx sides are in use.
    pub(super) _user: Arc<()>,
    pub(super) stats: Arc<QueueStats>,
    pub(super) pending: bool,
    /// While the socket is gone: when to look for the interface again.
    pub(super) retry_at: Instant,
}

impl AfXdpTxq {
    /// The socket is gone: at most every [`RECHECK`](crate::afpacket::RECHECK), re-attaches to
    /// the interface if it is back and rebuilds the socket.
    #[cold]
    fn recover(&mut self) {
        if !due(&mut self.retry_at) {
            return;
        }
        let (generation, ifindex, mode) = self.shared.refresh();
        self.slot.sync(&self.shared, generation, ifindex, mode);
    }
}

impl TxQueue for AfXdpTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        if !batch.is_empty() {
            // One lock per burst (uncontended unless the tx side is shared).
            let mut st = lock(&self.slot.state);
            if st.tx.is_none() {
                drop(st);
                self.recover();
                st = lock(&self.slot.state);
            }
            let mut s = match st.tx.as_mut() {
                Some(side) => side.send(batch),
                None => Sent {
                    packets: 0,
                    bytes: 0,
                    dropped: batch.len() as u64,
                    errors: 0,
                    pending: false,
                    gone: false,
                },
            };
            if s.gone {
                // What was queued is lost with the socket; stop touching it.
                st.lose(&self.shared.map, &self.slot);
                self.retry_at = Instant::now();
                s.dropped += s.packets;
                (s.packets, s.bytes) = (0, 0);
            }
            drop(st);
            self.pending = s.pending;
            self.stats.count_tx(s.packets, s.bytes, s.dropped, s.errors);
        }
        pool.free_batch(batch);
    }

    fn flush(&mut self) {
        if self.pending {
            let mut st = lock(&self.slot.state);
            let Some(s) = st.tx.as_mut() else {
                self.pending = false;
                return;
            };
            s.reap();
            let k = s.kick();
            let bad = std::mem::take(&mut s.bad);
            self.pending = matches!(k, Kick::Pending | Kick::Error);
            if matches!(k, Kick::Gone) {
                st.lose(&self.shared.map, &self.slot);
                self.retry_at = Instant::now();
            }
            if bad > 0 {
                self.stats.errors.fetch_add(bad, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake_kernel::*;
    use super::*;

    #[test]
    fn bad_completions_are_counted_and_never_reused() {
        let (tx_map, tx) = fake_ring::<XdpDesc>(4);
        let (comp_map, mut comp) = fake_ring::<u64>(4);
        let (tx_cons, comp_prod) = (tx.consumer, comp.producer);
        let xsk = fake_xsk(2, 2, vec![tx_map, comp_map]);
        let (start, end) = (u64::from(2 * FS), u64::from(4 * FS));
        let mut free = Vec::with_capacity(2);
        free.extend([start, start + u64::from(FS)]);
        let mut side = TxSide {
            xsk,
            tx,
            comp: {
                // The "kernel" completes: an rx frame, an address outside the UMEM, and a
                // tx frame twice (the free list is full already).
                for (i, a) in [0, 1 << 40, start, start + 10].into_iter().enumerate() {
                    comp.write(i as u32, a);
                }
                comp
            },
            free,
            frame_size: u64::from(FS),
            tx_start: start,
            tx_end: end,
            bad: 0,
        };
        kernel_store(comp_prod, 4);
        side.reap();
        assert_eq!(side.free, [start, start + u64::from(FS)]);
        assert_eq!(side.bad, 4);

        // Three packets, one too large for a frame; two frames, four slots. The fake tx ring
        // does not ask for a wakeup, so the kick makes no system call.
        let mut pool = Pool::new(8, 0);
        let mut batch = Batch::new();
        batch.push(pool.packet_from(&[1; 60], 0));
        batch.push(pool.packet_from(&[2; 3000], 0));
        batch.push(pool.packet_from(&[3; 70], 0));
        batch.push(pool.packet_from(&[4; 80], 0));
        let s = side.send(&batch);
        assert_eq!((s.packets, s.bytes, s.dropped, s.errors), (2, 130, 2, 4));
        assert!(!s.pending, "no wakeup asked: nothing to kick again");
        assert_eq!(side.tx.outstanding(), 2);
        assert!(side.free.is_empty());

        // A consumer index ahead of the producer (nonsense): no room, no panic.
        kernel_store(tx_cons, 1_000);
        let s = side.send(&batch);
        assert_eq!((s.packets, s.dropped), (0, 4));
        pool.free_batch(&mut batch);
    }
}
