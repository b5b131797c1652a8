//! Descriptor-chain handling of [`super::Ring`] against adversarial rings.
//!
//! The guest half of a split ring is written byte by byte into a `GuestMemoryMmap` by the
//! [`Guest`] builder below rather than through `virtio-queue`'s own mock: the point is to put
//! into memory exactly what a broken or hostile driver could, including what the mock refuses
//! to build. The device half is a [`Ring`] set up the way `Handler::build` sets one up, so the
//! tests exercise `Ring::recv` (guest transmit ring) and `Ring::send` (guest receive ring) as
//! the PMD threads call them.
//!
//! Layout of guest memory (all tests): descriptor table at [`DESC`], available ring at
//! [`AVAIL`], used ring at [`USED`], room for indirect tables at [`ITABLE`]; buffers above
//! [`BUF`]. Tests that need a hole use [`Guest::with_hole`].

use std::sync::Arc;

use datapath::packet::{Batch, MAX_BURST, Packet, Pool};
use datapath::port::{QueueStats, RxQueue};
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

use super::copy::LongCopy;
use super::features::{F_HOST_TSO4, F_HOST_TSO6, F_IN_ORDER, F_MRG_RXBUF};
use super::protocol::MAX_RING;
use super::split_ring::BadRing;
use super::vring::{Lent, MAX_FRAME, Ring};
use super::{Shared, VhostOptions, VhostRxq};
use crate::vnet;

// Descriptor flags (virtio 1.x §2.7.5).
pub(super) const NEXT: u16 = 1;
pub(super) const WRITE: u16 = 2;
pub(super) const INDIRECT: u16 = 4;
/// `VRING_AVAIL_F_NO_INTERRUPT`.
pub(super) const NO_INTERRUPT: u16 = 1;

/// Guest addresses of the ring parts (room for a 256-entry ring each) and of indirect tables.
pub(super) const DESC: u64 = 0x1000;
pub(super) const AVAIL: u64 = 0x3000;
pub(super) const USED: u64 = 0x4000;
pub(super) const ITABLE: u64 = 0x6000;
/// Buffers are placed from here up.
pub(super) const BUF: u64 = 0x1_0000;
/// End of guest memory.
pub(super) const MEM_END: u64 = 0x10_0000;
/// The hole of [`Guest::with_hole`].
pub(super) const HOLE: (u64, u64) = (0x8_0000, 0xc_0000);

pub(super) const HDR: usize = vnet::HDR_LEN;
pub(super) const HDR_LEGACY: usize = vnet::HDR_LEN_LEGACY;

/// The driver side of one split ring in its own guest memory.
pub(super) struct Guest {
    pub(super) mem: Arc<GuestMemoryMmap>,
    pub(super) size: u16,
    /// The available index the driver has published.
    pub(super) avail_idx: u16,
    /// Where both indexes started (the `base` of `SET_VRING_BASE`).
    pub(super) start: u16,
    /// Next free buffer address.
    pub(super) brk: u64,
}

impl Guest {
    /// A ring of `size` entries in 1 MiB of contiguous guest memory.
    pub(super) fn new(size: u16) -> Guest {
        Guest::with_ranges(size, &[(GuestAddress(0), MEM_END as usize)])
    }

    /// Like [`Guest::new`] with [`HOLE`] not mapped.
    pub(super) fn with_hole(size: u16) -> Guest {
        Guest::with_ranges(
            size,
            &[
                (GuestAddress(0), HOLE.0 as usize),
                (GuestAddress(HOLE.1), (MEM_END - HOLE.1) as usize),
            ],
        )
    }

    pub(super) fn with_ranges(size: u16, ranges: &[(GuestAddress, usize)]) -> Guest {
        let mem = GuestMemoryMmap::from_ranges(ranges).expect("guest memory");
        Guest {
            mem: Arc::new(mem),
            size,
            avail_idx: 0,
            start: 0,
            brk: BUF,
        }
    }

    /// Starts both ring indexes at `idx`, as after `SET_VRING_BASE idx`.
    pub(super) fn starting_at(mut self, idx: u16) -> Guest {
        self.start = idx;
        self.set_avail_idx(idx);
        self.write(USED + 2, &idx.to_le_bytes());
        self
    }

    /// Writes entry `i` of the descriptor table at `table`.
    pub(super) fn put_desc(&self, table: u64, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let mut d = [0u8; 16];
        d[..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        d[14..].copy_from_slice(&next.to_le_bytes());
        self.write(table + 16 * u64::from(i), &d);
    }

    /// Writes descriptor `i` of the ring's own table.
    pub(super) fn desc(&self, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        self.put_desc(DESC, i, addr, len, flags, next);
    }

    /// Publishes chains with heads `heads`.
    pub(super) fn offer(&mut self, heads: &[u16]) {
        for &h in heads {
            let slot = u64::from(self.avail_idx % self.size);
            self.write(AVAIL + 4 + 2 * slot, &h.to_le_bytes());
            self.avail_idx = self.avail_idx.wrapping_add(1);
        }
        self.set_avail_idx(self.avail_idx);
    }

    pub(super) fn set_avail_idx(&mut self, idx: u16) {
        self.avail_idx = idx;
        self.write(AVAIL + 2, &idx.to_le_bytes());
    }

    pub(super) fn set_avail_flags(&self, flags: u16) {
        self.write(AVAIL, &flags.to_le_bytes());
    }

    pub(super) fn used_idx(&self) -> u16 {
        u16::from_le_bytes(self.read(USED + 2, 2).try_into().unwrap())
    }

    /// The used elements (id, len) the device added since [`Guest::start`].
    pub(super) fn used(&self) -> Vec<(u32, u32)> {
        let n = self.used_idx().wrapping_sub(self.start);
        (0..n)
            .map(|k| {
                let slot = u64::from(self.start.wrapping_add(k) % self.size);
                let e = self.read(USED + 4 + 8 * slot, 8);
                (
                    u32::from_le_bytes(e[..4].try_into().unwrap()),
                    u32::from_le_bytes(e[4..].try_into().unwrap()),
                )
            })
            .collect()
    }

    pub(super) fn write(&self, addr: u64, bytes: &[u8]) {
        self.mem
            .write_slice(bytes, GuestAddress(addr))
            .expect("test writes inside guest memory");
    }

    pub(super) fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.mem
            .read_slice(&mut v, GuestAddress(addr))
            .expect("test reads inside guest memory");
        v
    }

    /// A fresh `len`-byte buffer (zeroed), cache-line aligned.
    pub(super) fn alloc(&mut self, len: usize) -> u64 {
        let a = self.brk;
        self.brk = (a + len as u64 + 63) & !63;
        assert!(self.brk <= HOLE.0, "test buffers stay below the hole");
        a
    }

    /// A fresh buffer holding `bytes`.
    pub(super) fn put(&mut self, bytes: &[u8]) -> u64 {
        let a = self.alloc(bytes.len());
        self.write(a, bytes);
        a
    }

    /// Makes descriptor `i` one readable buffer holding header `h` and `frame` (DPDK's virtio
    /// PMD's transmit chain).
    pub(super) fn single(&mut self, i: u16, h: &[u8], frame: &[u8]) {
        let a = self.put(&[h, frame].concat());
        self.desc(i, a, (h.len() + frame.len()) as u32, 0, 0);
    }

    /// The device's view of the ring, set up as `Handler::build` does it, for a front-end
    /// that sends TCP super-frames (`tso`) and takes none.
    pub(super) fn ring(&self, hdr_len: usize, tso: bool) -> Ring {
        let tso = if tso { F_HOST_TSO4 | F_HOST_TSO6 } else { 0 };
        self.ring_acked(hdr_len, tso | if hdr_len == HDR { F_MRG_RXBUF } else { 0 })
    }

    /// The device's view of the ring, for a front-end that accepted features `acked`.
    pub(super) fn ring_acked(&self, hdr_len: usize, acked: u64) -> Ring {
        let mut q = Queue::new(MAX_RING).unwrap();
        q.try_set_size(self.size).unwrap();
        q.try_set_desc_table_address(GuestAddress(DESC)).unwrap();
        q.try_set_avail_ring_address(GuestAddress(AVAIL)).unwrap();
        q.try_set_used_ring_address(GuestAddress(USED)).unwrap();
        q.set_next_avail(self.start);
        q.set_next_used(self.start);
        q.set_event_idx(false);
        q.set_ready(true);
        assert!(q.is_valid(&*self.mem));
        q.disable_notification(&*self.mem).unwrap();
        Ring::start(&q, self.mem.clone(), None, hdr_len, acked, Arc::default()).unwrap()
    }
}

/// A frame of `len` bytes whose content depends on `seed` (any content will do: the zero
/// virtio-net header asks for nothing to be done to it).
pub(super) fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A virtio-net header with `num_buffers` = `n` (0 for a transmitted frame).
pub(super) fn hdr(n: u16) -> [u8; HDR] {
    let mut h = [0u8; HDR];
    h[10..].copy_from_slice(&n.to_le_bytes());
    h
}

/// What one `recv` burst gave.
pub(super) struct Rx {
    pub(super) res: Result<(), BadRing>,
    pub(super) frames: Vec<Vec<u8>>,
    pub(super) gso: Vec<u16>,
    /// Each packet's UFO mark.
    pub(super) ufo: Vec<bool>,
    /// Each frame's checksum left pending.
    pub(super) pending: Vec<bool>,
    pub(super) marked_gso: bool,
    pub(super) counts: [u64; 3],
}

/// Runs `recv` with room for `room` packets (the rest of the batch already full).
pub(super) fn recv(ring: &mut Ring, room: usize) -> Rx {
    let mut pool = Pool::new(64, 0);
    let mut batch = Batch::new();
    for _ in room..MAX_BURST {
        batch.push(pool.packet_from(&[0; 14], 0));
    }
    let before = batch.len();
    let mut counts = [0; 3];
    let res = ring.recv(&mut pool, &mut batch, 7, &mut counts, &mut Lent::default());
    let new = &batch.packets()[before..];
    assert!(new.iter().all(|p| p.meta.in_port == 7));
    let rx = Rx {
        res,
        frames: new.iter().map(|p| p.data().to_vec()).collect(),
        gso: new.iter().map(|p| p.meta.gso_size).collect(),
        ufo: new.iter().map(|p| p.meta.ufo()).collect(),
        pending: new.iter().map(|p| p.meta.csum_pending()).collect(),
        marked_gso: batch.may_have_gso(),
        counts,
    };
    pool.free_batch(&mut batch);
    rx
}

/// Runs `send` of `frames`.
pub(super) fn send(ring: &mut Ring, frames: &[&[u8]]) -> (Result<(), BadRing>, [u64; 3]) {
    send_with(ring, frames, LongCopy::Vector)
}

/// Runs `send` of `frames`, long frames copied as `how` says.
pub(super) fn send_with(
    ring: &mut Ring,
    frames: &[&[u8]],
    how: LongCopy,
) -> (Result<(), BadRing>, [u64; 3]) {
    let mut pool = Pool::new(64, 0);
    let mut batch = Batch::new();
    for f in frames {
        batch.push(pool.packet_from(f, 0));
    }
    let mut counts = [0; 3];
    let res = ring.send(&mut batch, &mut counts, &mut pool, how);
    pool.free_batch(&mut batch);
    (res, counts)
}

/// Offers the writable 2048-byte buffer at `b` as chain 0 and sends `f` into it with a header
/// of `hdr_len` bytes: the frame goes, nothing is dropped.
#[track_caller]
pub(super) fn send_into(g: &mut Guest, b: u64, hdr_len: usize, f: &[u8]) {
    g.desc(0, b, 2048, WRITE, 0);
    g.offer(&[0]);
    let mut r = g.ring(hdr_len, false);
    let (res, counts) = send(&mut r, &[f]);
    assert!(res.is_ok());
    assert_eq!(counts, [1, f.len() as u64, 0]);
}

/// The reason of a `BadRing`; fails the test when there is none.
#[track_caller]
pub(super) fn bad(res: Result<(), BadRing>) -> &'static str {
    match res {
        Err(BadRing(why)) => why,
        Ok(()) => panic!("the ring was accepted; expected BadRing"),
    }
}

// ---------------------------------------------------------------------------------------
// Guest transmit ring (`recv`): well-formed chains.
// ---------------------------------------------------------------------------------------

#[test]
pub(super) fn tx_chains_of_every_shape_come_out_as_the_frames() {
    let mut g = Guest::new(8);
    let (f1, f2, f3) = (frame(60, 1), frame(1514, 2), frame(900, 3));
    // Header in its own descriptor, frame in the next (Linux virtio_net without
    // `any_header_sg`).
    let h = g.put(&hdr(0));
    let a = g.put(&f1);
    g.desc(5, h, HDR as u32, NEXT, 3);
    g.desc(3, a, f1.len() as u32, 0, 0);
    // Header and frame in one descriptor (DPDK's virtio PMD).
    let b = g.put(&[&hdr(0)[..], &f2].concat());
    g.desc(0, b, (HDR + f2.len()) as u32, 0, 0);
    // Header, then the frame over three descriptors, in no particular order in the table.
    let h3 = g.put(&hdr(0));
    let (c1, c2, c3) = (g.put(&f3[..100]), g.put(&f3[100..101]), g.put(&f3[101..]));
    g.desc(7, h3, HDR as u32, NEXT, 1);
    g.desc(1, c1, 100, NEXT, 6);
    g.desc(6, c2, 1, NEXT, 2);
    g.desc(2, c3, 799, 0, 4);
    g.offer(&[5, 0, 7]);

    let mut r = g.ring(HDR, false);
    let rx = recv(&mut r, MAX_BURST);
    assert!(rx.res.is_ok());
    assert_eq!(rx.frames, [f1, f2, f3]);
    assert_eq!(rx.counts, [3, 60 + 1514 + 900, 0]);
    assert_eq!(rx.gso, [0, 0, 0]);
    // Every head back, in order; a transmit buffer is used with length 0.
    assert_eq!(g.used(), [(5, 0), (0, 0), (7, 0)]);
    assert_eq!(r.q.next_avail(), 3);
    assert_eq!(r.q.next_used(), 3);

    // Nothing more until the guest publishes more.
    let rx = recv(&mut r, MAX_BURST);
    assert!(rx.res.is_ok());
    assert!(rx.frames.is_empty());
    assert_eq!(rx.counts, [0, 0, 0]);
}

/// A pool that lends, as a PMD's does.
pub(super) fn lending_pool() -> Pool {
    let mut pool = Pool::new(64, 0);
    pool.allow_lending();
    pool
}

/// Runs `recv` on `r` with `pool` and `lent`, which must succeed; returns its counts.
pub(super) fn lend(r: &mut Ring, pool: &mut Pool, batch: &mut Batch, lent: &mut Lent) -> [u64; 3] {
    let mut counts = [0; 3];
    assert!(r.recv(pool, batch, 7, &mut counts, lent).is_ok());
    counts
}

#[test]
pub(super) fn lent_tx_frames_go_back_to_the_used_ring_only_when_given_back() {
    let mut g = Guest::new(8);
    let (big, small, csum) = (frame(1514, 1), frame(100, 2), frame(900, 3));
    // A long frame asking for nothing (lent), a short one (copied: all of it is the head)
    // and a long one with a checksum to complete (copied: the switch writes it).
    let mut h = hdr(0);
    h[0] = vnet::F_NEEDS_CSUM;
    h[6..8].copy_from_slice(&34u16.to_le_bytes());
    h[8..10].copy_from_slice(&6u16.to_le_bytes());
    g.single(0, &hdr(0), &big);
    g.single(1, &hdr(0), &small);
    g.single(2, &h, &csum);
    g.offer(&[0, 1, 2]);
    let mut r = g.ring(HDR, false);
    let mut pool = lending_pool();
    let (mut batch, mut lent) = (Batch::new(), Lent::default());
    assert_eq!(
        lend(&mut r, &mut pool, &mut batch, &mut lent),
        [3, 1514 + 100 + 900, 0]
    );
    let lents: Vec<bool> = batch.packets().iter().map(Packet::is_lent).collect();
    assert_eq!(lents, [true, false, false]);
    assert!(batch.take_lent(), "the batch says it may hold lent frames");
    assert_eq!(g.used(), [(1, 0), (2, 0)], "the copied frames' chains only");
    assert_eq!(batch.packets()[1].data(), &small[..]);
    assert_eq!(r.q.next_avail(), 3);

    // The lent frame is whole through the pool, from guest memory.
    pool.materialize(&mut batch.packets_mut()[0]);
    assert_eq!(batch.packets()[0].data(), &big[..]);
    pool.free_batch(&mut batch);
    assert!(pool.end_lending());
    r.give_back(&mut lent);
    assert_eq!(g.used(), [(1, 0), (2, 0), (0, 0)]);
    assert_eq!((lent.n, lent.mem.is_none()), (0, true));
    r.give_back(&mut lent);
    assert_eq!(g.used().len(), 3, "given back once");
}

#[test]
pub(super) fn what_a_burst_still_holds_goes_back_first_and_only_to_its_own_ring() {
    let mut g = Guest::new(8);
    let f = frame(600, 4);
    for i in 0..4u16 {
        g.single(i, &hdr(0), &f);
    }
    g.offer(&[0, 1]);
    let mut r = g.ring(HDR, false);
    let mut pool = lending_pool();
    let (mut batch, mut lent) = (Batch::new(), Lent::default());
    lend(&mut r, &mut pool, &mut batch, &mut lent);
    assert_eq!((lent.n, g.used().len()), (2, 0));
    pool.free_batch(&mut batch);
    pool.end_lending();
    // Not released (the control thread had the ring): the next burst gives them back first.
    g.offer(&[2]);
    lend(&mut r, &mut pool, &mut batch, &mut lent);
    assert_eq!(g.used(), [(0, 0), (1, 0)]);
    assert_eq!(lent.heads[..lent.n], [2]);
    pool.free_batch(&mut batch);
    pool.end_lending();
    // The ring is started again meanwhile (a new `Ring`): the old ring's chain is not
    // written into the new one's used ring.
    let mut again = g.ring(HDR, false);
    again.give_back(&mut lent);
    assert_eq!(g.used(), [(0, 0), (1, 0)]);
    assert_eq!((lent.n, lent.mem.is_none()), (0, true));
}

#[test]
pub(super) fn a_queue_whose_ring_went_away_lets_the_lent_memory_go() {
    let mut g = Guest::new(8);
    g.single(0, &hdr(0), &frame(600, 5));
    g.offer(&[0]);
    let shared = shared();
    *shared.slots[1].lock().unwrap() = Some(g.ring(HDR, false));
    let mut q = VhostRxq {
        shared: shared.clone(),
        vring: 1,
        in_port: 7,
        stats: QueueStats::shared(),
        lent: Lent::default(),
    };
    let (mut pool, mut batch) = (lending_pool(), Batch::new());
    assert_eq!(q.recv(&mut pool, &mut batch), 1);
    assert!(batch.packets()[0].is_lent());
    pool.free_batch(&mut batch);
    assert!(pool.end_lending());
    let held = Arc::strong_count(&g.mem);
    {
        // The control thread has the ring (taking it down): the release cannot give back.
        let mut slot = shared.slots[1].lock().unwrap();
        q.release();
        assert_eq!(q.lent.n, 1);
        *slot = None;
    }
    assert_eq!(
        Arc::strong_count(&g.mem),
        held - 1,
        "the ring's reference went"
    );
    assert_eq!(q.recv(&mut pool, &mut batch), 0);
    assert_eq!(Arc::strong_count(&g.mem), held - 2, "and the lent chain's");
    assert_eq!(q.lent.n, 0);
    assert!(
        g.used().is_empty(),
        "nothing went back to a ring that is gone"
    );
}

#[test]
pub(super) fn lent_frames_are_sent_whole_into_the_guest() {
    let f = frame(1000, 9);
    // One buffer that holds header and frame (the copy from buffer and lender), and two
    // merged ones (the frame brought in first).
    for bufs in [vec![2048u32], vec![600, 600]] {
        let mut g = Guest::new(8);
        let addrs: Vec<u64> = bufs.iter().map(|&l| g.alloc(l as usize)).collect();
        for (i, (&a, &l)) in addrs.iter().zip(&bufs).enumerate() {
            g.desc(i as u16, a, l, WRITE, 0);
        }
        let heads: Vec<u16> = (0..bufs.len() as u16).collect();
        g.offer(&heads);
        let mut r = g.ring(HDR, false);
        let mut pool = lending_pool();
        let mut batch = Batch::new();
        // SAFETY: `f` outlives the lending and is not written.
        batch.push(unsafe { pool.packet_lent(f.as_ptr(), f.len(), 0) });
        assert!(batch.packets()[0].is_lent());
        let mut counts = [0; 3];
        assert!(
            r.send(&mut batch, &mut counts, &mut pool, LongCopy::Vector)
                .is_ok()
        );
        assert_eq!(counts, [1, 1000, 0], "{bufs:?}");
        let got: Vec<u8> = g
            .used()
            .iter()
            .map(|&(id, len)| g.read(addrs[id as usize], len as usize))
            .collect::<Vec<_>>()
            .concat();
        assert_eq!(got.len(), HDR + f.len(), "{bufs:?}");
        assert_eq!(&got[HDR..], &f[..], "{bufs:?}");
        pool.free_batch(&mut batch);
        pool.end_lending();
    }
}

/// Frame lengths around every size class of the single-buffer copy (`copy_frame`: 16, 32,
/// 64, 128 and 256 bytes with the header) and beyond.
pub(super) const COPY_LENGTHS: &[usize] = &[
    14, 19, 20, 21, 36, 51, 52, 53, 60, 64, 115, 116, 117, 200, 243, 244, 245, 500, 1514, 9000,
];

#[test]
pub(super) fn single_buffer_frames_of_every_size_class_and_alignment_both_ways() {
    // One descriptor per frame, as DPDK's virtio PMD posts them: the path without a chain
    // walk. Each frame at every offset in a cache line, so that the copies and prefetches
    // start and end anywhere; the bytes around each buffer stay untouched.
    for &len in COPY_LENGTHS {
        for skew in [0u64, 1, 13, 52, 63] {
            let mut g = Guest::new(4);
            let f = frame(len, len as u8 ^ skew as u8);
            let t = g.alloc(HDR + len + 128) + skew;
            g.write(t, &[&hdr(0)[..], &f].concat());
            g.desc(0, t, (HDR + len) as u32, 0, 0);
            g.offer(&[0]);
            let mut r = g.ring(HDR, true);
            let rx = recv(&mut r, MAX_BURST);
            assert!(rx.res.is_ok());
            assert_eq!(
                rx.frames,
                std::slice::from_ref(&f),
                "recv of {len} bytes at +{skew}"
            );
            assert_eq!(rx.counts, [1, len as u64, 0]);
            assert_eq!(g.used(), [(0, 0)]);

            // Both ways of copying a long frame into the guest.
            for how in [LongCopy::Vector, LongCopy::RepMovsb] {
                let mut g = Guest::new(4);
                let room = HDR + len + 64;
                let b = g.alloc(room + 128) + skew;
                g.write(b - 1, &[0x5a; 1]);
                g.write(b + room as u64, &[0x5a; 1]);
                g.desc(0, b, room as u32, WRITE, 0);
                g.offer(&[0]);
                let mut r = g.ring(HDR, false);
                let (res, counts) = send_with(&mut r, &[&f], how);
                assert!(res.is_ok());
                let what = format!("send of {len} bytes at +{skew}, {how:?}");
                assert_eq!(counts, [1, len as u64, 0], "{what}");
                assert_eq!(g.read(b, HDR + len), [&hdr(1)[..], &f].concat(), "{what}");
                assert_eq!(g.read(b + (HDR + len) as u64, 64), vec![0; 64], "{what}");
                assert_eq!(
                    (g.read(b - 1, 1), g.read(b + room as u64, 1)),
                    (vec![0x5a], vec![0x5a]),
                    "{what}"
                );
                assert_eq!(g.used(), [(0, (HDR + len) as u32)]);
            }
        }
    }
}

#[test]
pub(super) fn a_receive_buffer_is_given_the_right_header_whatever_it_held() {
    // Stale bytes where the header goes (a buffer the guest used for something else): the
    // header is written whole, for both header lengths; a buffer that holds the header
    // already keeps it.
    for hdr_len in [HDR, HDR_LEGACY] {
        for stale in [0xffu8, 0x00, 0x01] {
            let mut g = Guest::new(4);
            let f = frame(60, stale);
            let b = g.alloc(2048);
            g.write(b, &[stale; 2048]);
            if stale == 0x01 {
                g.write(b, &hdr(1)[..hdr_len]);
            }
            send_into(&mut g, b, hdr_len, &f);
            let want = if hdr_len == HDR {
                hdr(1).to_vec()
            } else {
                vec![0; HDR_LEGACY]
            };
            let what = format!("header of {hdr_len} bytes over {stale:#x}");
            assert_eq!(g.read(b, hdr_len), want, "{what}");
            assert_eq!(g.read(b + hdr_len as u64, 60), f, "{what}");
        }
    }
}

/// Set in the child process [`a_receive_buffer_holding_its_header_already_is_not_written`]
/// runs its check in.
pub(super) const HDR_CHILD: &str = "FLOWPATH_TEST_HDR_CHILD";

#[test]
pub(super) fn a_receive_buffer_holding_its_header_already_is_not_written() {
    // The header's bytes are left as they are when they are what would be written, so that
    // the guest's cache line stays clean (`put_hdr`). Checked with the header alone on a page
    // made read-only, the frame on the next: a store to the header faults. The fault would
    // kill the test binary, so the check runs in a child process of it, which this test
    // starts and whose exit it judges.
    if std::env::var_os(HDR_CHILD).is_none() {
        let name = "vhost::tests::a_receive_buffer_holding_its_header_already_is_not_written";
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--test-threads=1", "--nocapture"])
            .env(HDR_CHILD, "1")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.contains("test result: ok. 1 passed"),
            "the child check failed ({}): {said}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    // SAFETY: sysconf reads a constant of the system.
    let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    // A page boundary for any page size up to 128 KiB, inside guest memory, clear of the rings.
    const PAGE: u64 = 0x2_0000;
    assert!(page_size <= PAGE && PAGE - page_size >= ITABLE + 0x1000);
    for hdr_len in [HDR, HDR_LEGACY] {
        let mut g = Guest::new(4);
        let f = frame(60, 7);
        let b = PAGE - hdr_len as u64;
        // The 12-byte header with `num_buffers` 1, the legacy one all zero.
        let want = &hdr(1)[..hdr_len];
        g.write(b, want);
        let page = g
            .mem
            .get_host_address(GuestAddress(PAGE - page_size))
            .unwrap()
            .cast::<libc::c_void>();
        let len = page_size as usize;
        // The rings are below the page, so setting them up does not touch it.
        //
        // SAFETY: `page` starts a page of the test's own anonymous guest mapping (guest memory
        // starts page-aligned at guest address 0); only its protection changes, and back
        // before the test reads it.
        assert_eq!(unsafe { libc::mprotect(page, len, libc::PROT_READ) }, 0);
        send_into(&mut g, b, hdr_len, &f);
        // SAFETY: as above.
        assert_eq!(
            unsafe { libc::mprotect(page, len, libc::PROT_READ | libc::PROT_WRITE) },
            0
        );
        assert_eq!(g.read(b, hdr_len + 60), [want, &f].concat());
    }
}

#[test]
pub(super) fn in_order_is_offered_and_chains_are_used_in_the_order_offered() {
    assert_ne!(VhostOptions::default().features() & F_IN_ORDER, 0);
    // Without mergeable buffers a frame too large for the next buffer is dropped and gives
    // that chain back unused; the next frame takes it: used in the order made available.
    let mut g = Guest::new(8);
    for i in [3u16, 1, 6] {
        let b = g.alloc(200);
        g.desc(i, b, 200, WRITE, 0);
    }
    g.offer(&[3, 1, 6]);
    let mut r = g.ring(HDR_LEGACY, false);
    let (small, big) = (frame(100, 1), frame(500, 2));
    let (res, counts) = send(&mut r, &[&small, &big, &small, &small]);
    assert!(res.is_ok());
    assert_eq!(counts, [3, 300, 1]);
    let l = (HDR_LEGACY + 100) as u32;
    assert_eq!(g.used(), [(3, l), (1, l), (6, l)]);
}

#[test]
pub(super) fn single_buffers_across_two_memory_regions_both_ways() {
    // Two regions back to back: a buffer over the boundary is in no one mapping, so it is
    // copied piecewise through `vm-memory` rather than through one host pointer.
    let mid = 0x8_0000u64;
    let ranges = [
        (GuestAddress(0), mid as usize),
        (GuestAddress(mid), (MEM_END - mid) as usize),
    ];
    let f = frame(300, 9);
    let mut g = Guest::with_ranges(4, &ranges);
    let t = mid - 100;
    g.write(t, &[&hdr(0)[..], &f].concat());
    g.desc(0, t, (HDR + f.len()) as u32, 0, 0);
    g.offer(&[0]);
    let mut r = g.ring(HDR, false);
    assert!(r.host.at(t, HDR + f.len()).is_none());
    let rx = recv(&mut r, MAX_BURST);
    assert!(rx.res.is_ok());
    assert_eq!(rx.frames, std::slice::from_ref(&f));

    let mut g = Guest::with_ranges(4, &ranges);
    send_into(&mut g, t, HDR, &f);
    assert_eq!(g.read(t, HDR + f.len()), [&hdr(1)[..], &f].concat());
    assert_eq!(g.used(), [(0, (HDR + f.len()) as u32)]);
}

#[test]
pub(super) fn tx_header_split_over_descriptors_and_legacy_header() {
    let f = frame(100, 9);
    // The 12-byte header over two descriptors, the second also holding the frame's start.
    let mut g = Guest::new(4);
    let a = g.put(&hdr(0)[..5]);
    let b = g.put(&[&hdr(0)[5..], &f[..30]].concat());
    let c = g.put(&f[30..]);
    g.desc(0, a, 5, NEXT, 1);
    g.desc(1, b, 37, NEXT, 2);
    g.desc(2, c, 70, 0, 0);
    g.offer(&[0]);
    let rx = recv(&mut g.ring(HDR, false), MAX_BURST);
    assert!(rx.res.is_ok());
    assert_eq!(rx.frames, std::slice::from_ref(&f));

    // A legacy device (neither VERSION_1 nor MRG_RXBUF): a 10-byte header.
    let mut g = Guest::new(4);
    let a = g.put(&[&[0u8; HDR_LEGACY][..], &f].concat());
    g.desc(0, a, (HDR_LEGACY + f.len()) as u32, 0, 0);
    g.offer(&[0]);
    let rx = recv(&mut g.ring(HDR_LEGACY, false), MAX_BURST);
    assert!(rx.res.is_ok());
    assert_eq!(rx.frames, [f]);
}

#[test]
pub(super) fn tx_takes_no_more_chains_than_there_is_room_for() {
    // A full ring: the available index exactly one ring ahead is allowed.
    let mut g = Guest::new(4);
    for i in 0..4u16 {
        let a = g.put(&[&hdr(0)[..], &frame(60, i as u8)].concat());
        g.desc(i, a, 72, 0, 0);
    }
    g.offer(&[0, 1, 2, 3]);
    let mut r = g.ring(HDR, false);
    let rx = recv(&mut r, 3);
    assert!(rx.res.is_ok());
    assert_eq!(rx.frames.len(), 3);
    assert_eq!(r.q.next_avail(), 3);
    // A full batch takes nothing.
    let rx = recv(&mut r, 0);
    assert!(rx.res.is_ok());
    assert_eq!((rx.frames.len(), r.q.next_avail()), (0, 3));
    let rx = recv(&mut r, MAX_BURST);
    assert_eq!(rx.frames, [frame(60, 3)]);
    assert_eq!(g.used(), [(0, 0), (1, 0), (2, 0), (3, 0)]);
}

#[test]
pub(super) fn tx_indexes_wrap_around() {
    let mut g = Guest::new(4).starting_at(u16::MAX - 1);
    for i in 0..4u16 {
        let a = g.put(&[&hdr(0)[..], &frame(64, i as u8)].concat());
        g.desc(i, a, 76, 0, 0);
    }
    g.offer(&[2, 3, 0, 1]);
    assert_eq!(g.avail_idx, 2);
    let mut r = g.ring(HDR, false);
    let rx = recv(&mut r, MAX_BURST);
    assert!(rx.res.is_ok());
    let want: Vec<_> = [2u8, 3, 0, 1].iter().map(|&i| frame(64, i)).collect();
    assert_eq!(rx.frames, want);
    assert_eq!(g.used(), [(2, 0), (3, 0), (0, 0), (1, 0)]);
    assert_eq!((r.q.next_avail(), g.used_idx()), (2, 2));
}

#[test]
pub(super) fn tx_runts_and_giants_are_counted_drops() {
    // The code chose to drop (and give back) chains too short for a header and an Ethernet
    // header, or longer than the largest frame, rather than take the ring down: the guest
    // broke no ring rule, and nothing outside the chain is read.
    let mut g = Guest::new(8);
    let hdr_only = g.put(&hdr(0));
    g.desc(0, hdr_only, HDR as u32, 0, 0);
    g.desc(1, hdr_only, 0, 0, 0); // zero-length chain
    let short = g.put(&[&hdr(0)[..], &[0; 13]].concat());
    g.desc(2, short, (HDR + 13) as u32, 0, 0);
    // Longer than MAX_FRAME: never read, so it may even run past the end of memory.
    g.desc(3, BUF, (HDR + MAX_FRAME + 1) as u32, 0, 0);
    g.desc(4, MEM_END - 16, u32::MAX, 0, 0);
    let ok = g.put(&[&hdr(0)[..], &frame(14, 0)].concat());
    g.desc(5, ok, (HDR + 14) as u32, 0, 0);
    g.offer(&[0, 1, 2, 3, 4, 5]);
    let mut r = g.ring(HDR, false);
    let rx = recv(&mut r, MAX_BURST);
    assert!(rx.res.is_ok());
    assert_eq!(rx.frames, [frame(14, 0)]);
    assert_eq!(rx.counts, [1, 14, 5]);
    assert_eq!(g.used().len(), 6);
}

// ---------------------------------------------------------------------------------------
// Guest receive ring (`send`): well-formed chains.
// ---------------------------------------------------------------------------------------

/// A receive ring of `n` single-descriptor chains of `len` bytes each; their addresses.
pub(super) fn rx_ring(g: &mut Guest, n: u16, len: u32) -> Vec<u64> {
    let bufs: Vec<u64> = (0..n).map(|_| g.alloc(len as usize)).collect();
    for (i, &b) in bufs.iter().enumerate() {
        g.desc(i as u16, b, len, WRITE, 0);
    }
    g.offer(&(0..n).collect::<Vec<_>>());
    bufs
}

#[test]
pub(super) fn rx_frames_take_as_many_buffers_as_they_need() {
    let mut g = Guest::new(8);
    let bufs = rx_ring(&mut g, 4, 2048);
    let mut r = g.ring(HDR, false);
    let (f1, f2) = (frame(100, 1), frame(3000, 2));
    let (res, counts) = send(&mut r, &[&f1, &f2]);
    assert!(res.is_ok());
    assert_eq!(counts, [2, 3100, 0]);
    // 100 bytes: one buffer, num_buffers 1.
    assert_eq!(g.read(bufs[0], HDR), hdr(1));
    assert_eq!(g.read(bufs[0] + HDR as u64, 100), f1);
    // 3000 bytes: two buffers, num_buffers 2, the header only in the first.
    assert_eq!(g.read(bufs[1], HDR), hdr(2));
    let got = [
        g.read(bufs[1] + HDR as u64, 2048 - HDR),
        g.read(bufs[2], 3000 - (2048 - HDR)),
    ];
    assert_eq!(got.concat(), f2);
    assert_eq!(g.used(), [(0, 112), (1, 2048), (2, 3012 - 2048)]);
    assert_eq!((r.q.next_avail(), r.q.next_used()), (3, 3));
    // The untouched fourth buffer is still zero.
    assert_eq!(g.read(bufs[3], 2048), vec![0; 2048]);
}

#[test]
pub(super) fn rx_frame_exactly_filling_a_buffer_and_chains_of_several_descriptors() {
    let mut g = Guest::new(4);
    let a = g.alloc(2048);
    g.desc(0, a, 2048, WRITE, 0);
    // A chain of three 512-byte buffers.
    let c: Vec<u64> = (0..3).map(|_| g.alloc(512)).collect();
    g.desc(1, c[0], 512, WRITE | NEXT, 3);
    g.desc(3, c[1], 512, WRITE | NEXT, 2);
    g.desc(2, c[2], 512, WRITE, 0);
    g.offer(&[0, 1]);
    let mut r = g.ring(HDR, false);
    let (f1, f2) = (frame(2048 - HDR, 1), frame(1000, 2));
    let (res, counts) = send(&mut r, &[&f1, &f2]);
    assert!(res.is_ok());
    assert_eq!(counts, [2, 2036 + 1000, 0]);
    assert_eq!(g.read(a, 2048), [&hdr(1)[..], &f1].concat());
    let got: Vec<u8> = c.iter().flat_map(|&b| g.read(b, 512)).collect();
    assert_eq!(&got[..HDR + 1000], &[&hdr(1)[..], &f2].concat()[..]);
    assert_eq!(g.used(), [(0, 2048), (1, 1012)]);
}

#[test]
pub(super) fn rx_without_buffers_drops_and_consumes_nothing() {
    // No buffers at all.
    let mut g = Guest::new(8).starting_at(100);
    let mut r = g.ring(HDR, false);
    let (res, counts) = send(&mut r, &[&frame(100, 0)]);
    assert!(res.is_ok());
    assert_eq!(counts, [0, 0, 1]);
    assert_eq!((r.q.next_avail(), g.used_idx()), (100, 100));

    // One buffer, too small for the frame: it stays available, unwritten, for a later one.
    let bufs = rx_ring(&mut g, 1, 2048);
    let (res, counts) = send(&mut r, &[&frame(3000, 0)]);
    assert!(res.is_ok());
    assert_eq!(counts, [0, 0, 1]);
    assert_eq!((r.q.next_avail(), g.used_idx()), (100, 100));
    assert_eq!(g.read(bufs[0], 2048), vec![0; 2048]);
    let (res, counts) = send(&mut r, &[&frame(500, 0)]);
    assert!(res.is_ok());
    assert_eq!(counts, [1, 500, 0]);
    assert_eq!(g.used(), [(0, 512)]);
}

#[test]
pub(super) fn rx_ring_running_out_drops_the_rest_of_the_burst() {
    let mut g = Guest::new(8);
    let bufs = rx_ring(&mut g, 2, 2048);
    let mut r = g.ring(HDR, false);
    let (f1, f2, f3) = (frame(100, 1), frame(5000, 2), frame(200, 3));
    // f2 needs three buffers and finds one: the ring is found empty, so f2 and the rest of
    // the burst are dropped without looking again (as DPDK's vhost library does), and the
    // buffer f2 looked at stays available, unwritten.
    let (res, counts) = send(&mut r, &[&f1, &f2, &f3]);
    assert!(res.is_ok());
    assert_eq!(counts, [1, 100, 2]);
    assert_eq!(g.used(), [(0, 112)]);
    assert_eq!(r.q.next_avail(), 1);
    assert_eq!(g.read(bufs[1], 2048), vec![0; 2048]);
    // The next burst finds it.
    let (res, counts) = send(&mut r, &[&f3]);
    assert!(res.is_ok());
    assert_eq!(counts, [1, 200, 0]);
    assert_eq!(g.used(), [(0, 112), (1, 212)]);
    assert_eq!(g.read(bufs[1], HDR + 200), [&hdr(1)[..], &f3].concat());
}

#[test]
pub(super) fn rx_without_mergeable_buffers_one_buffer_per_frame() {
    let mut g = Guest::new(4);
    let bufs = rx_ring(&mut g, 2, 1024);
    let mut r = g.ring(HDR_LEGACY, false);
    // Would need two buffers: dropped, and nothing consumed.
    let (res, counts) = send(&mut r, &[&frame(2000, 0)]);
    assert!(res.is_ok());
    assert_eq!(counts, [0, 0, 1]);
    assert_eq!((r.q.next_avail(), g.used_idx()), (0, 0));
    assert_eq!(g.read(bufs[0], 1024), vec![0; 1024]);
    // A legacy header has no num_buffers: the frame follows the 10 bytes.
    let f = frame(500, 4);
    let (res, counts) = send(&mut r, &[&f]);
    assert!(res.is_ok());
    assert_eq!(counts, [1, 500, 0]);
    assert_eq!(
        g.read(bufs[0], HDR_LEGACY + 500),
        [&[0u8; HDR_LEGACY][..], &f].concat()
    );
    assert_eq!(g.used(), [(0, 510)]);
}

/// What a port with one queue pair shares with its queues, no ring started.
pub(super) fn shared() -> Arc<Shared> {
    Arc::new(Shared::new("vhost-test", 1))
}
