//! The packets a `userspace(...)` datapath action sends to the slow path (OVS's
//! `dp_netdev_upcall()` with `DPIF_UC_ACTION`, the way packet-ins for a controller leave the
//! datapath): one bounded single-producer, single-consumer ring per PMD thread.
//!
//! The PMD copies the packet (frame, metadata, tunnel and connection metadata areas) and the
//! action's user data into a slot that was allocated when the ring was made, so the hot path
//! neither allocates nor locks; a full ring drops the copy and counts it. A control-plane
//! thread drains the rings ([`UpcallQueue::drain`]) and is woken, at most once per emptying,
//! by the notifier it set ([`UpcallQueue::set_notify`]). A slow reader therefore costs the
//! switch a fixed amount of memory: [`UPCALL_QUEUE_SLOTS`] slots per PMD.
//!
//! The ring holds the packet as the datapath had it at the action (the actions before it
//! applied), so a packet-in shows the modified packet.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::packet::Packet;

/// Slots of a ring: packets a PMD may have waiting for the slow path.
pub const UPCALL_QUEUE_SLOTS: usize = 256;

/// Most bytes of a frame a slot keeps: a jumbo frame. Longer frames (TCP super-frames) are
/// cut; [`UserspaceUpcall::total_len`] still says their length.
pub const UPCALL_FRAME_ROOM: usize = 9216;

/// Most bytes of a `userspace` action's user data a slot keeps.
pub const UPCALL_USERDATA_MAX: usize = 512;

/// One packet sent to the slow path, as the consumer sees it.
pub struct UserspaceUpcall {
    /// The packet (cut to [`UPCALL_FRAME_ROOM`] bytes), with its metadata, tunnel and
    /// connection metadata.
    pub packet: Packet,
    /// The frame's length before any cut.
    pub total_len: usize,
    userdata: [u8; UPCALL_USERDATA_MAX],
    userdata_len: usize,
}

impl UserspaceUpcall {
    fn new() -> UserspaceUpcall {
        let mut packet = Packet::from_slice(&[0; UPCALL_FRAME_ROOM]);
        packet.truncate(0);
        UserspaceUpcall {
            packet,
            total_len: 0,
            userdata: [0; UPCALL_USERDATA_MAX],
            userdata_len: 0,
        }
    }

    /// The action's user data (its cookie).
    pub fn userdata(&self) -> &[u8] {
        &self.userdata[..self.userdata_len]
    }

    /// Copies `p` and `userdata` in (no allocation: the slot's buffer has the room).
    fn fill(&mut self, p: &Packet, userdata: &[u8]) {
        let n = p.len().min(UPCALL_FRAME_ROOM);
        self.packet.set_len(n);
        self.packet.data_mut().copy_from_slice(&p.data()[..n]);
        self.packet.copy_meta_from(p);
        self.total_len = p.len();
        let u = userdata.len().min(UPCALL_USERDATA_MAX);
        self.userdata[..u].copy_from_slice(&userdata[..u]);
        self.userdata_len = u;
    }
}

/// A PMD's ring of packets for the slow path.
pub struct UpcallQueue {
    slots: Box<[UnsafeCell<UserspaceUpcall>]>,
    /// The next slot to read; written by the consumer only.
    head: AtomicUsize,
    /// The next slot to write; written by the producer only.
    tail: AtomicUsize,
    /// Serializes consumers, so that the ring has one at a time.
    consumer: Mutex<()>,
    queued: AtomicU64,
    dropped: AtomicU64,
    notify: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

// SAFETY: a slot is written only by the one producer (`UpcallProducer`, not `Clone`, owned by
// one PMD) while it is outside `head..tail`, and read only by the one consumer holding
// `consumer` while it is inside; the release store of `tail` after a write and its acquire
// load before a read (and the same for `head` the other way) order the slot's accesses.
unsafe impl Sync for UpcallQueue {}

/// The counters of a ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpcallQueueStats {
    /// Packets queued.
    pub queued: u64,
    /// Packets dropped because the ring was full.
    pub dropped: u64,
}

impl UpcallQueue {
    /// A ring and the producer side that its PMD keeps.
    pub fn new() -> (Arc<UpcallQueue>, UpcallProducer) {
        let q = Arc::new(UpcallQueue {
            slots: (0..UPCALL_QUEUE_SLOTS)
                .map(|_| UnsafeCell::new(UserspaceUpcall::new()))
                .collect(),
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            consumer: Mutex::new(()),
            queued: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            notify: OnceLock::new(),
        });
        (q.clone(), UpcallProducer(q))
    }

    /// Sets what is called when a packet lands in an empty ring (to wake the consumer). Only
    /// the first call takes effect.
    pub fn set_notify(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.notify.set(f);
    }

    /// Hands every waiting packet to `f`, oldest first; returns how many.
    pub fn drain(&self, mut f: impl FnMut(&UserspaceUpcall)) -> usize {
        let _one = self.consumer.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        loop {
            let h = self.head.load(Ordering::Relaxed);
            if h == self.tail.load(Ordering::SeqCst) {
                return n;
            }
            // SAFETY: `h` is inside `head..tail`: the producer wrote the slot before its
            // release of `tail` and does not touch it again until `head` passes it; we are the
            // only consumer (`consumer` is held).
            let slot = unsafe { &*self.slots[h % UPCALL_QUEUE_SLOTS].get() };
            f(slot);
            self.head.store(h.wrapping_add(1), Ordering::SeqCst);
            n += 1;
        }
    }

    /// The ring's counters.
    pub fn stats(&self) -> UpcallQueueStats {
        UpcallQueueStats {
            queued: self.queued.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }

    /// Packets waiting now.
    pub fn len(&self) -> usize {
        self.tail
            .load(Ordering::Acquire)
            .wrapping_sub(self.head.load(Ordering::Acquire))
    }

    /// Whether no packet waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The PMD's side of its [`UpcallQueue`].
pub struct UpcallProducer(Arc<UpcallQueue>);

impl UpcallProducer {
    /// Queues a copy of `p` with `userdata`; a full ring drops it (counted). Returns whether
    /// it was queued.
    pub fn push(&mut self, p: &Packet, userdata: &[u8]) -> bool {
        let q = &*self.0;
        let t = q.tail.load(Ordering::Relaxed);
        if t.wrapping_sub(q.head.load(Ordering::Acquire)) >= UPCALL_QUEUE_SLOTS {
            q.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        // SAFETY: slot `t` is outside `head..tail` (checked just above: the ring is not full),
        // so the consumer does not read it; we are the only producer (`&mut self`, and the
        // producer is not `Clone`).
        let slot = unsafe { &mut *q.slots[t % UPCALL_QUEUE_SLOTS].get() };
        slot.fill(p, userdata);
        q.tail.store(t.wrapping_add(1), Ordering::SeqCst);
        q.queued.fetch_add(1, Ordering::Relaxed);
        // The consumer stops when it finds `head == tail`; if it had emptied the ring up to
        // this packet, it may have looked before the store above: wake it. (Both sides store
        // their index, then load the other's, sequentially consistent: one of them sees the
        // other's store.)
        if q.head.load(Ordering::SeqCst) == t
            && let Some(f) = q.notify.get()
        {
            f();
        }
        true
    }

    /// The ring this producer fills.
    pub fn queue(&self) -> &Arc<UpcallQueue> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn packets_come_out_in_order_with_their_userdata() {
        let (q, mut p) = UpcallQueue::new();
        for i in 0..5u8 {
            assert!(p.push(&Packet::from_slice(&[i; 60]), &[i, 0xaa]));
        }
        let mut seen = Vec::new();
        assert_eq!(
            q.drain(|u| seen.push((u.packet.data()[0], u.userdata().to_vec(), u.total_len))),
            5
        );
        assert_eq!(seen[3], (3, vec![3, 0xaa], 60));
        assert!(q.is_empty());
    }

    #[test]
    fn a_full_ring_drops_and_counts_and_holds_no_more() {
        let (q, mut p) = UpcallQueue::new();
        let pkt = Packet::from_slice(&[1; 100]);
        for _ in 0..UPCALL_QUEUE_SLOTS + 10 {
            p.push(&pkt, b"x");
        }
        assert_eq!(q.len(), UPCALL_QUEUE_SLOTS);
        assert_eq!(
            q.stats(),
            UpcallQueueStats {
                queued: UPCALL_QUEUE_SLOTS as u64,
                dropped: 10
            }
        );
        assert_eq!(q.drain(|_| {}), UPCALL_QUEUE_SLOTS);
        assert!(p.push(&pkt, b"x"));
    }

    #[test]
    fn long_frames_are_cut_and_their_length_kept() {
        let (q, mut p) = UpcallQueue::new();
        p.push(&Packet::from_slice(&vec![7; UPCALL_FRAME_ROOM + 100]), &[]);
        q.drain(|u| {
            assert_eq!(u.packet.len(), UPCALL_FRAME_ROOM);
            assert_eq!(u.total_len, UPCALL_FRAME_ROOM + 100);
        });
    }

    #[test]
    fn the_consumer_is_woken_once_per_emptying() {
        let (q, mut p) = UpcallQueue::new();
        let wakes = Arc::new(AtomicUsize::new(0));
        let w = wakes.clone();
        q.set_notify(Box::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        }));
        let pkt = Packet::from_slice(&[1; 60]);
        p.push(&pkt, &[]);
        p.push(&pkt, &[]);
        assert_eq!(wakes.load(Ordering::Relaxed), 1);
        q.drain(|_| {});
        p.push(&pkt, &[]);
        assert_eq!(wakes.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_producer_and_a_consumer_on_two_threads_lose_nothing_but_what_is_counted() {
        let (q, mut p) = UpcallQueue::new();
        const N: u32 = 20_000;
        let t = std::thread::spawn(move || {
            for i in 0..N {
                p.push(&Packet::from_slice(&i.to_be_bytes()), &i.to_be_bytes());
            }
        });
        let mut last = None;
        let mut got = 0u64;
        while !t.is_finished() || !q.is_empty() {
            q.drain(|u| {
                let v = u32::from_be_bytes(u.packet.data()[..4].try_into().unwrap());
                assert_eq!(u.userdata(), v.to_be_bytes());
                assert!(last.is_none_or(|l| v > l));
                last = Some(v);
                got += 1;
            });
        }
        t.join().unwrap();
        let s = q.stats();
        assert_eq!(s.queued, got);
        assert_eq!(s.queued + s.dropped, u64::from(N));
    }
}
