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

use std::fs::File;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use datapath::packet::{Batch, MAX_BURST, Packet, Pool};
use datapath::port::{QueueStats, RxQueue};
use proptest::prelude::*;
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

use super::copy::LongCopy;
use super::features::{F_HOST_TSO4, F_HOST_TSO6, F_IN_ORDER, F_MRG_RXBUF, F_VERSION_1};
use super::protocol::{Handler, MAX_RING, Region, VringConf};
use super::split_ring::BadRing;
use super::vring::{Lent, MAX_FRAME, Ring};
use super::{Shared, VhostOptions, VhostRxq};
use crate::vnet;

// Descriptor flags (virtio 1.x §2.7.5).
const NEXT: u16 = 1;
pub(super) const WRITE: u16 = 2;
const INDIRECT: u16 = 4;
/// `VRING_AVAIL_F_NO_INTERRUPT`.
const NO_INTERRUPT: u16 = 1;

/// Guest addresses of the ring parts (room for a 256-entry ring each) and of indirect tables.
const DESC: u64 = 0x1000;
const AVAIL: u64 = 0x3000;
const USED: u64 = 0x4000;
const ITABLE: u64 = 0x6000;
/// Buffers are placed from here up.
const BUF: u64 = 0x1_0000;
/// End of guest memory.
const MEM_END: u64 = 0x10_0000;
/// The hole of [`Guest::with_hole`].
const HOLE: (u64, u64) = (0x8_0000, 0xc_0000);

pub(super) const HDR: usize = vnet::HDR_LEN;
const HDR_LEGACY: usize = vnet::HDR_LEN_LEGACY;

/// The driver side of one split ring in its own guest memory.
pub(super) struct Guest {
    mem: Arc<GuestMemoryMmap>,
    size: u16,
    /// The available index the driver has published.
    avail_idx: u16,
    /// Where both indexes started (the `base` of `SET_VRING_BASE`).
    start: u16,
    /// Next free buffer address.
    brk: u64,
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
fn frame(len: usize, seed: u8) -> Vec<u8> {
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
        marked_gso: batch.may_have_gso(),
        counts,
    };
    pool.free_batch(&mut batch);
    rx
}

/// Runs `send` of `frames`.
fn send(ring: &mut Ring, frames: &[&[u8]]) -> (Result<(), BadRing>, [u64; 3]) {
    send_with(ring, frames, LongCopy::Vector)
}

/// Runs `send` of `frames`, long frames copied as `how` says.
fn send_with(ring: &mut Ring, frames: &[&[u8]], how: LongCopy) -> (Result<(), BadRing>, [u64; 3]) {
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
fn send_into(g: &mut Guest, b: u64, hdr_len: usize, f: &[u8]) {
    g.desc(0, b, 2048, WRITE, 0);
    g.offer(&[0]);
    let mut r = g.ring(hdr_len, false);
    let (res, counts) = send(&mut r, &[f]);
    assert!(res.is_ok());
    assert_eq!(counts, [1, f.len() as u64, 0]);
}

/// The reason of a `BadRing`; fails the test when there is none.
#[track_caller]
fn bad(res: Result<(), BadRing>) -> &'static str {
    match res {
        Err(BadRing(why)) => why,
        Ok(()) => panic!("the ring was accepted; expected BadRing"),
    }
}

// ---------------------------------------------------------------------------------------
// Guest transmit ring (`recv`): well-formed chains.
// ---------------------------------------------------------------------------------------

#[test]
fn tx_chains_of_every_shape_come_out_as_the_frames() {
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
fn lending_pool() -> Pool {
    let mut pool = Pool::new(64, 0);
    pool.allow_lending();
    pool
}

/// Runs `recv` on `r` with `pool` and `lent`, which must succeed; returns its counts.
fn lend(r: &mut Ring, pool: &mut Pool, batch: &mut Batch, lent: &mut Lent) -> [u64; 3] {
    let mut counts = [0; 3];
    assert!(r.recv(pool, batch, 7, &mut counts, lent).is_ok());
    counts
}

#[test]
fn lent_tx_frames_go_back_to_the_used_ring_only_when_given_back() {
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
fn what_a_burst_still_holds_goes_back_first_and_only_to_its_own_ring() {
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
fn a_queue_whose_ring_went_away_lets_the_lent_memory_go() {
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
fn lent_frames_are_sent_whole_into_the_guest() {
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
const COPY_LENGTHS: &[usize] = &[
    14, 19, 20, 21, 36, 51, 52, 53, 60, 64, 115, 116, 117, 200, 243, 244, 245, 500, 1514, 9000,
];

#[test]
fn single_buffer_frames_of_every_size_class_and_alignment_both_ways() {
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
fn a_receive_buffer_is_given_the_right_header_whatever_it_held() {
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
const HDR_CHILD: &str = "FLOWPATH_TEST_HDR_CHILD";

#[test]
fn a_receive_buffer_holding_its_header_already_is_not_written() {
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
fn in_order_is_offered_and_chains_are_used_in_the_order_offered() {
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
fn single_buffers_across_two_memory_regions_both_ways() {
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
fn tx_header_split_over_descriptors_and_legacy_header() {
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
fn tx_takes_no_more_chains_than_there_is_room_for() {
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
fn tx_indexes_wrap_around() {
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
fn tx_runts_and_giants_are_counted_drops() {
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
fn rx_frames_take_as_many_buffers_as_they_need() {
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
fn rx_frame_exactly_filling_a_buffer_and_chains_of_several_descriptors() {
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
fn rx_without_buffers_drops_and_consumes_nothing() {
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
fn rx_ring_running_out_drops_the_rest_of_the_burst() {
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
fn rx_without_mergeable_buffers_one_buffer_per_frame() {
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

// ---------------------------------------------------------------------------------------
// Rule breakers: each must take the ring out of service, without a panic, a hang or an
// access outside guest memory. Every shape is tried on both directions: read-only buffers
// for `recv`, write-only ones for `send`.
// ---------------------------------------------------------------------------------------

/// Sets up a fresh ring with `new`, lets `setup` write the broken chains (given the flag a
/// buffer of that direction has: 0 for transmit, `WRITE` for receive) and checks that both
/// `recv` and `send` report `BadRing`.
#[track_caller]
fn bad_both_ways(new: fn() -> Guest, setup: impl Fn(&mut Guest, u16)) {
    let mut g = new();
    setup(&mut g, 0);
    let mut r = g.ring(HDR, false);
    let rx = recv(&mut r, MAX_BURST);
    bad(rx.res);

    let mut g = new();
    setup(&mut g, WRITE);
    let mut r = g.ring(HDR, false);
    let (res, counts) = send(&mut r, &[&frame(1500, 0), &frame(60, 0)]);
    bad(res);
    // The ring is abandoned: nothing of these frames counts as sent.
    assert_eq!(counts, [0, 0, 2]);
}

fn ring8() -> Guest {
    Guest::new(8)
}

fn ring8_with_hole() -> Guest {
    Guest::with_hole(8)
}

#[test]
fn chains_that_loop() {
    // 0 -> 1 -> 0.
    bad_both_ways(ring8, |g, w| {
        g.desc(0, BUF, 2048, w | NEXT, 1);
        g.desc(1, BUF + 0x1000, 2048, w | NEXT, 0);
        g.offer(&[0]);
    });
    // A descriptor pointing at itself.
    bad_both_ways(ring8, |g, w| {
        g.desc(3, BUF, 2048, w | NEXT, 3);
        g.offer(&[3]);
    });
    // Every descriptor of the ring, then back to the first: one longer than the ring.
    bad_both_ways(ring8, |g, w| {
        for i in 0..8 {
            g.desc(i, BUF + 0x1000 * u64::from(i), 2048, w | NEXT, (i + 1) % 8);
        }
        g.offer(&[0]);
    });
}

#[test]
fn chains_that_leave_the_table() {
    for next in [8, 9, 0xffff] {
        bad_both_ways(ring8, |g, w| {
            g.desc(0, BUF, 2048, w | NEXT, next);
            g.offer(&[0]);
        });
    }
}

#[test]
fn heads_out_of_range() {
    for head in [8, 0x8000, 0xffff] {
        bad_both_ways(ring8, |g, w| {
            g.desc(0, BUF, 2048, w, 0);
            g.offer(&[head]);
        });
    }
}

#[test]
fn buffers_outside_guest_memory() {
    for addr in [MEM_END, MEM_END + 0x1000, u64::MAX - 0x7ff, u64::MAX] {
        bad_both_ways(ring8, |g, w| {
            g.desc(0, addr, 2048, w, 0);
            g.offer(&[0]);
        });
    }
    // In the hole, and running from mapped memory into the hole or off the end.
    for (addr, len) in [
        (HOLE.0, 2048),
        (HOLE.1 - 100, 2048),
        (HOLE.0 - 100, 2048),
        (MEM_END - 100, 2048),
    ] {
        bad_both_ways(ring8_with_hole, |g, w| {
            g.desc(0, addr, len, w, 0);
            g.offer(&[0]);
        });
    }
    // A good buffer, then a bad one in the same chain (the frame needs both).
    bad_both_ways(ring8_with_hole, |g, w| {
        g.desc(0, BUF, 1000, w | NEXT, 1);
        g.desc(1, HOLE.0 + 0x100, 1000, w, 0);
        g.offer(&[0]);
    });
}

#[test]
fn available_index_more_than_a_ring_ahead() {
    for ahead in [9u16, 100, 0x8000, u16::MAX] {
        bad_both_ways(ring8, |g, w| {
            for i in 0..8 {
                g.desc(i, BUF + 0x1000 * u64::from(i), 2048, w, 0);
            }
            g.offer(&[0, 1, 2, 3, 4, 5, 6, 7]);
            g.set_avail_idx(ahead);
        });
    }
    // Also from a base near the wrap, where `idx - next_avail` wraps.
    bad_both_ways(
        || Guest::new(8).starting_at(u16::MAX - 2),
        |g, w| {
            g.desc(0, BUF, 2048, w, 0);
            let idx = g.avail_idx.wrapping_add(9);
            g.set_avail_idx(idx);
        },
    );
}

#[test]
fn wrong_direction_buffers() {
    // A write-only buffer in a transmit chain, first or last.
    for flags in [(WRITE, 0), (0, WRITE)] {
        let mut g = Guest::new(4);
        let a = g.put(&[&hdr(0)[..], &frame(60, 0)].concat());
        g.desc(0, a, HDR as u32, flags.0 | NEXT, 1);
        g.desc(1, a + HDR as u64, 60, flags.1, 0);
        g.offer(&[0]);
        bad(recv(&mut g.ring(HDR, false), MAX_BURST).res);
    }
    // A read-only buffer in a receive chain, first or after writable ones.
    for flags in [(0, WRITE), (WRITE, 0)] {
        let mut g = Guest::new(4);
        let a = g.alloc(4096);
        g.desc(0, a, 2048, flags.0 | NEXT, 1);
        g.desc(1, a + 2048, 2048, flags.1, 0);
        g.offer(&[0]);
        let mut r = g.ring(HDR, false);
        bad(send(&mut r, &[&frame(3000, 0)]).0);
        // Nothing was written to the guest's read-only buffer.
        assert_eq!(g.read(a, 4096), vec![0; 4096]);
    }
    // In a chain taken only to complete a frame that needs merged buffers.
    let mut g = Guest::new(4);
    let a = g.alloc(4096);
    g.desc(0, a, 2048, WRITE, 0);
    g.desc(1, a + 2048, 2048, 0, 0);
    g.offer(&[0, 1]);
    bad(send(&mut g.ring(HDR, false), &[&frame(3000, 0)]).0);
}

// ---------------------------------------------------------------------------------------
// Indirect descriptor tables.
// ---------------------------------------------------------------------------------------

#[test]
fn indirect_tables_that_are_well_formed_work() {
    // Transmit: header and a frame over two buffers, through an indirect table.
    let f = frame(700, 3);
    let mut g = Guest::new(4);
    let (h, a, b) = (g.put(&hdr(0)), g.put(&f[..200]), g.put(&f[200..]));
    g.put_desc(ITABLE, 0, h, HDR as u32, NEXT, 2);
    g.put_desc(ITABLE, 2, a, 200, NEXT, 1);
    g.put_desc(ITABLE, 1, b, 500, 0, 0);
    g.desc(3, ITABLE, 3 * 16, INDIRECT, 0);
    g.offer(&[3]);
    let rx = recv(&mut g.ring(HDR, false), MAX_BURST);
    assert!(rx.res.is_ok());
    assert_eq!(rx.frames, std::slice::from_ref(&f));
    assert_eq!(g.used(), [(3, 0)]);

    // Receive: two 1024-byte buffers through an indirect table.
    let mut g = Guest::new(4);
    let (a, b) = (g.alloc(1024), g.alloc(1024));
    g.put_desc(ITABLE, 0, a, 1024, WRITE | NEXT, 1);
    g.put_desc(ITABLE, 1, b, 1024, WRITE, 0);
    g.desc(2, ITABLE, 2 * 16, INDIRECT, 0);
    g.offer(&[2]);
    let mut r = g.ring(HDR, false);
    let f = frame(1500, 4);
    let (res, counts) = send(&mut r, &[&f]);
    assert!(res.is_ok());
    assert_eq!(counts, [1, 1500, 0]);
    let got = [g.read(a, 1024), g.read(b, HDR + 1500 - 1024)].concat();
    assert_eq!(got, [&hdr(1)[..], &f].concat());
    assert_eq!(g.used(), [(2, 1512)]);
}

#[test]
fn indirect_tables_that_are_not() {
    // Outside guest memory or in the hole.
    for (addr, len) in [
        (MEM_END, 32),
        (u64::MAX - 15, 16),
        (HOLE.0, 32),
        (HOLE.1 - 16, 32),
    ] {
        bad_both_ways(ring8_with_hole, |g, _| {
            g.desc(0, addr, len, INDIRECT, 0);
            g.offer(&[0]);
        });
    }
    // Running off the end of memory: its first descriptor is readable and leads to the
    // second, which is not.
    for end in [HOLE.0, MEM_END] {
        bad_both_ways(ring8_with_hole, |g, w| {
            g.put_desc(end - 16, 0, BUF, 2048, w | NEXT, 1);
            g.desc(0, end - 16, 32, INDIRECT, 0);
            g.offer(&[0]);
        });
    }
    // Empty, or not a whole number of descriptors.
    for len in [0, 8, 17, 40] {
        bad_both_ways(ring8, |g, w| {
            g.put_desc(ITABLE, 0, BUF, 2048, w, 0);
            g.put_desc(ITABLE, 1, BUF + 0x1000, 2048, w, 0);
            g.put_desc(ITABLE, 2, BUF + 0x2000, 2048, w, 0);
            g.desc(0, ITABLE, len, INDIRECT, 0);
            g.offer(&[0]);
        });
    }
    // Nested: an indirect descriptor inside an indirect table (first, or after a buffer).
    bad_both_ways(ring8, |g, w| {
        g.put_desc(ITABLE + 0x100, 0, BUF, 2048, w, 0);
        g.put_desc(ITABLE, 0, ITABLE + 0x100, 16, INDIRECT, 0);
        g.desc(0, ITABLE, 16, INDIRECT, 0);
        g.offer(&[0]);
    });
    bad_both_ways(ring8, |g, w| {
        g.put_desc(ITABLE + 0x100, 0, BUF, 2048, w, 0);
        g.put_desc(ITABLE, 0, BUF + 0x1000, 1000, w | NEXT, 1);
        g.put_desc(ITABLE, 1, ITABLE + 0x100, 16, INDIRECT, 0);
        g.desc(0, ITABLE, 32, INDIRECT, 0);
        g.offer(&[0]);
    });
    // A chain inside the table that loops or leaves it.
    for next in [0, 2, 0xffff] {
        bad_both_ways(ring8, |g, w| {
            g.put_desc(ITABLE, 0, BUF, 1000, w | NEXT, 1);
            g.put_desc(ITABLE, 1, BUF + 0x1000, 1000, w | NEXT, next);
            g.desc(0, ITABLE, 32, INDIRECT, 0);
            g.offer(&[0]);
        });
    }
    // Buffers of the wrong direction inside the table.
    let mut g = Guest::new(4);
    g.put_desc(ITABLE, 0, BUF, 100, WRITE, 0);
    g.desc(0, ITABLE, 16, INDIRECT, 0);
    g.offer(&[0]);
    bad(recv(&mut g.ring(HDR, false), MAX_BURST).res);
    let mut g = Guest::new(4);
    g.put_desc(ITABLE, 0, BUF, 2048, 0, 0);
    g.desc(0, ITABLE, 16, INDIRECT, 0);
    g.offer(&[0]);
    bad(send(&mut g.ring(HDR, false), &[&frame(100, 0)]).0);
}

#[test]
fn frames_before_a_broken_chain_are_delivered() {
    // recv: the good chain's packet stays in the batch (the caller forwards it) and its
    // head is used; the broken chain after it takes the ring down.
    let mut g = Guest::new(4);
    let f = frame(80, 1);
    let a = g.put(&[&hdr(0)[..], &f].concat());
    g.desc(0, a, (HDR + 80) as u32, 0, 0);
    g.desc(1, BUF, 100, WRITE, 0);
    g.offer(&[0, 1]);
    let rx = recv(&mut g.ring(HDR, false), MAX_BURST);
    bad(rx.res);
    assert_eq!((rx.frames, rx.counts), (vec![f.clone()], [1, 80, 0]));
    assert_eq!(g.used().first(), Some(&(0, 0)));

    // send: the frame that went is used and counted; the one that met the broken chain,
    // and every later one, is a drop.
    let mut g = Guest::new(4);
    let b = g.alloc(2048);
    g.desc(0, b, 2048, WRITE, 0);
    g.desc(1, b, 2048, 0, 0);
    g.offer(&[0, 1]);
    let (res, counts) = send(&mut g.ring(HDR, false), &[&f, &f, &f]);
    bad(res);
    assert_eq!(counts, [1, 80, 2]);
    assert_eq!(g.used(), [(0, 92)]);
    assert_eq!(g.read(b, HDR + 80), [&hdr(1)[..], &f].concat());
}

#[test]
fn overlong_transmit_chain_through_an_indirect_table() {
    // An indirect table may be longer than the ring; `recv` refuses a chain of more than
    // MAX_SEGS buffers rather than walk all of it.
    let mut g = Guest::new(4);
    let n = 200u16;
    for i in 0..n {
        let flags = if i + 1 < n { NEXT } else { 0 };
        g.put_desc(ITABLE, i, BUF + 64 * u64::from(i), 64, flags, i + 1);
    }
    g.desc(0, ITABLE, 16 * u32::from(n), INDIRECT, 0);
    g.offer(&[0]);
    bad(recv(&mut g.ring(HDR, false), MAX_BURST).res);
}

// ---------------------------------------------------------------------------------------
// Known bugs: each test states what the module documents, or virtio requires, and fails
// on the code as it is; the `ignore` goes with the fix.
// ---------------------------------------------------------------------------------------

#[test]
fn rx_loop_in_a_large_ring() {
    // The transmit side catches it (as a chain of too many buffers)...
    let mut g = Guest::new(256);
    g.desc(0, BUF, 2048, NEXT, 1);
    g.desc(1, BUF + 0x1000, 2048, NEXT, 0);
    g.offer(&[0]);
    bad(recv(&mut g.ring(HDR, false), MAX_BURST).res);
    // ... the receive side writes the frame into the loop and returns it as used.
    let mut g = Guest::new(256);
    g.desc(0, BUF, 2048, WRITE | NEXT, 1);
    g.desc(1, BUF + 0x1000, 2048, WRITE | NEXT, 0);
    g.offer(&[0]);
    bad(send(&mut g.ring(HDR, false), &[&frame(100, 0)]).0);
}

#[test]
fn rx_buffer_shorter_than_the_header() {
    for first in [0u32, 8] {
        let mut g = Guest::new(4);
        let (a, b) = (g.alloc(64), g.alloc(2048));
        g.desc(0, a, first, WRITE, 0);
        g.desc(1, b, 2048, WRITE, 0);
        g.offer(&[0, 1]);
        bad(send(&mut g.ring(HDR, false), &[&frame(100, 0)]).0);
    }
}

#[test]
fn tx_bad_head_is_reported_as_such() {
    let mut g = Guest::new(8);
    g.offer(&[8]);
    let why = bad(recv(&mut g.ring(HDR, false), MAX_BURST).res);
    assert_eq!(why, "descriptor chain loops or leaves the ring");
}

/// A pipe standing for the call eventfd: what `notify` writes can be read back once the
/// ring (holding the only write end) is dropped.
fn call_pipe() -> (std::io::PipeReader, Arc<File>) {
    let (r, w) = std::io::pipe().expect("pipe");
    (r, Arc::new(File::from(OwnedFd::from(w))))
}

/// A ring with one transmit chain, `avail_flags` in the available ring and a call pipe;
/// what the call received after one `recv`.
fn calls_after_one_recv(avail_flags: u16) -> Vec<u8> {
    let mut g = Guest::new(4);
    let a = g.put(&[&hdr(0)[..], &frame(60, 0)].concat());
    g.desc(0, a, 72, 0, 0);
    g.set_avail_flags(avail_flags);
    let (mut reader, call) = call_pipe();
    let mut r = g.ring(HDR, false);
    r.call = Some(call);
    // A burst that used nothing signals nothing.
    assert!(recv(&mut r, MAX_BURST).res.is_ok());
    g.offer(&[0]);
    assert_eq!(recv(&mut r, MAX_BURST).frames.len(), 1);
    drop(r);
    let mut got = Vec::new();
    reader.read_to_end(&mut got).unwrap();
    got
}

#[test]
fn call_is_signalled_after_a_burst_that_used_descriptors() {
    assert_eq!(calls_after_one_recv(0), 1u64.to_ne_bytes());
}

#[test]
fn call_is_not_signalled_when_the_guest_suppressed_interrupts() {
    assert_eq!(calls_after_one_recv(NO_INTERRUPT), []);
}

// ---------------------------------------------------------------------------------------
// `Handler::build`: the header length and merging follow the negotiated features.
// ---------------------------------------------------------------------------------------

/// Where the test front-end "maps" guest memory (any address will do).
const USER: u64 = 0x7f00_0000_0000;

/// A handler with `acked` features whose vring 0 is `g`'s ring, complete and enabled.
/// What a port with one queue pair shares with its queues, no ring started.
fn shared() -> Arc<Shared> {
    Arc::new(Shared::new("vhost-test", 1))
}

fn handler(g: &Guest, acked: u64) -> Handler {
    let mut h = Handler::new(shared(), VhostOptions::default());
    h.acked = acked;
    h.mem = Some(g.mem.clone());
    h.regions = vec![Region {
        user: USER,
        gpa: 0,
        size: MEM_END,
    }];
    h.vrings[0] = VringConf {
        num: g.size,
        addr: Some((USER + DESC, USER + AVAIL, USER + USED)),
        base: g.start,
        kicked: true,
        enabled: true,
        call: None,
    };
    h
}

fn built(g: &Guest, acked: u64) -> Ring {
    handler(g, acked)
        .build(0)
        .expect("usable ring")
        .expect("ring ready")
}

#[test]
fn build_sets_the_header_length_from_the_features() {
    let g = Guest::new(8);
    for (acked, len) in [
        (0, HDR_LEGACY),
        (F_MRG_RXBUF, HDR),
        (F_VERSION_1, HDR),
        (F_VERSION_1 | F_MRG_RXBUF, HDR),
    ] {
        let r = built(&g, acked);
        assert_eq!((r.hdr_len, r.tso), (len, false), "features {acked:#x}");
    }
    assert!(built(&g, F_VERSION_1 | F_HOST_TSO4).tso);
}

#[test]
fn version_1_without_mrg_rxbuf_does_not_merge() {
    let mut g = Guest::new(8);
    rx_ring(&mut g, 2, 2048);
    let mut r = built(&g, F_VERSION_1);
    let (res, counts) = send(&mut r, &[&frame(3000, 0)]);
    assert!(res.is_ok());
    assert_eq!(counts, [0, 0, 1], "the frame needs two buffers");
    assert_eq!(g.used(), []);
}

// ---------------------------------------------------------------------------------------
// Property test: arbitrary rings.
// ---------------------------------------------------------------------------------------

/// Guest memory of the property test: two 64 KiB regions with a 64 KiB hole between them
/// (small, because every step compares all of it before and after). The rings and the
/// indirect tables live below [`P_BUF`] and buffers above it, so that what the device writes
/// into buffers never changes a descriptor it reads later in the same burst: the set of
/// places it may write can then be worked out from the tables before the burst.
const P_A_END: u64 = 0x1_0000;
const P_B: u64 = 0x2_0000;
const P_B_END: u64 = 0x3_0000;
const P_BUF: u64 = 0x8000;
/// Indirect-table descriptors the property test fills in at [`ITABLE`].
const P_ITABLE_LEN: u16 = 32;

#[derive(Clone, Copy, Debug)]
struct RawDesc {
    addr: u64,
    len: u32,
    flags: u16,
    next: u16,
}

#[derive(Clone, Debug)]
enum Op {
    /// `recv` with room for this many packets.
    Recv(usize),
    /// `send` of frames of these lengths.
    Send(Vec<usize>),
    /// The guest moves its available index to `next_avail + n`.
    Publish(u16),
    /// The guest rewrites a descriptor of the ring's table.
    Poke(u16, RawDesc),
}

#[derive(Clone, Debug)]
struct Scenario {
    size: u16,
    start: u16,
    ahead: u16,
    descs: Vec<RawDesc>,
    itable: Vec<RawDesc>,
    avail: Vec<u16>,
    hdr_len: usize,
    tso: bool,
    /// Buffer contents: zeros (every header acceptable) or noise from this seed.
    noise: Option<u64>,
    ops: Vec<Op>,
}

/// How a generated guest behaves: how often it writes nonsense (`chaos`: the weight of each
/// kind of nonsense against 100 for plausible values), and which way its buffers mostly go
/// (`write`: how likely a buffer is write-only), with the bursts to match (weights of
/// `recv` and `send` among the steps). A rule breaker on every chain would only ever test
/// the first check, so most cases are nearly well-behaved guests.
#[derive(Clone, Copy, Debug)]
struct Bias {
    chaos: u32,
    write: f64,
    recv: u32,
    send: u32,
}

fn bias() -> impl Strategy<Value = Bias> {
    let dirs = prop::sample::select(vec![(0.02, 6, 1), (0.98, 1, 6), (0.5, 3, 3)]);
    (prop::sample::select(vec![1u32, 5, 30]), dirs).prop_map(|(chaos, (write, recv, send))| Bias {
        chaos,
        write,
        recv,
        send,
    })
}

fn buf_addr(c: u32) -> impl Strategy<Value = u64> {
    prop_oneof![
        60 => P_BUF..P_A_END,
        40 => P_B..P_B_END,
        c => P_A_END..P_B,
        c => (0u64..128).prop_map(|d| P_A_END - d),
        c => (0u64..128).prop_map(|d| P_B_END - d),
        c => any::<u64>(),
    ]
}

fn buf_len(c: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        70 => 14u32..2100,
        30 => 0u32..40,
        c => 2100u32..0x2_0000,
        c => any::<u32>(),
    ]
}

fn itable_addr(c: u32) -> impl Strategy<Value = u64> {
    prop_oneof![
        100 => (0..P_ITABLE_LEN).prop_map(|k| ITABLE + 16 * u64::from(k)),
        c => P_A_END..P_B,
        c => (0u64..64).prop_map(|d| P_B_END - d),
        c => any::<u64>(),
    ]
}

fn itable_len(c: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        100 => (1u32..=16).prop_map(|k| 16 * k),
        c => 0u32..700,
        c => any::<u32>(),
    ]
}

/// Flags: mostly NEXT and WRITE (WRITE with probability `b.write`), now and then INDIRECT,
/// sometimes anything.
fn flags(b: Bias) -> impl Strategy<Value = u16> {
    let plausible = (
        prop::bool::weighted(0.4),
        prop::bool::weighted(b.write),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(n, w, i)| {
            let bit = |on, f| if on { f } else { 0 };
            bit(n, NEXT) | bit(w, WRITE) | bit(i, INDIRECT)
        });
    prop_oneof![100 => plausible, b.chaos => any::<u16>()]
}

fn index(size: u16, c: u32) -> impl Strategy<Value = u16> {
    prop_oneof![100 => 0..size, c => any::<u16>()]
}

/// A descriptor of a table of `size` entries; an indirect one points where indirect tables
/// are (or nowhere), any other where buffers are (or nowhere).
fn raw_desc(size: u16, b: Bias) -> impl Strategy<Value = RawDesc> {
    let c = b.chaos;
    (
        flags(b),
        buf_addr(c),
        buf_len(c),
        itable_addr(c),
        itable_len(c),
        index(size, c),
    )
        .prop_map(|(flags, a, l, ia, il, next)| {
            let (addr, len) = if flags & INDIRECT != 0 {
                (ia, il)
            } else {
                (a, l)
            };
            RawDesc {
                addr,
                len,
                flags,
                next,
            }
        })
}

/// How far ahead of the device the guest puts its available index.
fn ahead(size: u16, c: u32) -> impl Strategy<Value = u16> {
    prop_oneof![100 => 0..=size, c => size + 1..=size + 3, c => any::<u16>()]
}

fn op(size: u16, b: Bias) -> impl Strategy<Value = Op> {
    let lens = prop_oneof![
        4 => 0usize..200,
        4 => 200usize..2100,
        2 => 2100usize..9100,
        1 => Just(65_000usize),
    ];
    prop_oneof![
        b.recv => prop_oneof![2 => Just(MAX_BURST), 1 => 0..=MAX_BURST].prop_map(Op::Recv),
        b.send => prop::collection::vec(lens, 1..5).prop_map(Op::Send),
        2 => ahead(size, b.chaos).prop_map(Op::Publish),
        1 => (0..size, raw_desc(size, b)).prop_map(|(i, d)| Op::Poke(i, d)),
    ]
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let sizes = prop::sample::select(vec![1u16, 2, 4, 8, 16, 64, 128]);
    (sizes, bias()).prop_flat_map(|(size, b)| {
        let start = prop_oneof![Just(0u16), Just(u16::MAX - 2), any::<u16>()];
        let n = usize::from(size);
        (
            (
                start,
                ahead(size, b.chaos),
                prop::collection::vec(raw_desc(size, b), n),
                prop::collection::vec(raw_desc(16, b), usize::from(P_ITABLE_LEN)),
                prop::collection::vec(index(size, b.chaos), n),
            ),
            (
                prop::sample::select(vec![HDR, HDR_LEGACY]),
                any::<bool>(),
                prop_oneof![2 => Just(None), 1 => any::<u64>().prop_map(Some)],
                prop::collection::vec(op(size, b), 1..8),
            ),
        )
            .prop_map(
                move |((start, ahead, descs, itable, avail), (hdr_len, tso, noise, ops))| {
                    Scenario {
                        size,
                        start,
                        ahead,
                        descs,
                        itable,
                        avail,
                        hdr_len,
                        tso,
                        noise,
                        ops,
                    }
                },
            )
    })
}

fn put_raw(g: &Guest, table: u64, i: u16, d: RawDesc) {
    g.put_desc(table, i, d.addr, d.len, d.flags, d.next);
}

/// Descriptor `i` of the table at `table`, if it is in guest memory.
fn read_raw(mem: &GuestMemoryMmap, table: u64, i: u32) -> Option<RawDesc> {
    let mut d = [0u8; 16];
    let at = table.checked_add(16 * u64::from(i))?;
    mem.read_slice(&mut d, GuestAddress(at)).ok()?;
    Some(RawDesc {
        addr: u64::from_le_bytes(d[..8].try_into().unwrap()),
        len: u32::from_le_bytes(d[8..12].try_into().unwrap()),
        flags: u16::from_le_bytes(d[12..14].try_into().unwrap()),
        next: u16::from_le_bytes(d[14..].try_into().unwrap()),
    })
}

/// The byte length of the chain at `head` when it is well formed (the rules `virtio-queue`
/// walks it by: at most a table's worth of descriptors, one level of indirection).
fn chain_len(mem: &GuestMemoryMmap, size: u16, head: u16) -> Option<u64> {
    let (mut table, mut entries, mut i) = (DESC, u32::from(size), u32::from(head));
    let (mut ttl, mut indirect, mut total) = (u32::from(size), false, 0u64);
    loop {
        if ttl == 0 || i >= entries {
            return None;
        }
        let d = read_raw(mem, table, i)?;
        if d.flags & INDIRECT != 0 {
            if indirect || d.len % 16 != 0 || d.len / 16 > u32::from(u16::MAX) {
                return None;
            }
            (table, entries, i, ttl, indirect) = (d.addr, d.len / 16, 0, d.len / 16, true);
            continue;
        }
        total += u64::from(d.len);
        if total > u64::from(u32::MAX) {
            return None;
        }
        if d.flags & NEXT == 0 {
            return Some(total);
        }
        (i, ttl) = (u32::from(d.next), ttl - 1);
    }
}

/// Where `send` may write: the used ring and every write-only buffer the tables (and the
/// indirect tables they point to) describe.
fn writable(mem: &GuestMemoryMmap, size: u16) -> Vec<(u64, u64)> {
    let mut out = vec![(USED, USED + 4 + 8 * u64::from(size))];
    let mut add = |d: RawDesc| {
        if d.flags & (WRITE | INDIRECT) == WRITE {
            out.push((d.addr, d.addr.saturating_add(u64::from(d.len))));
        }
    };
    for i in 0..u32::from(size) {
        let d = read_raw(mem, DESC, i).unwrap();
        if d.flags & INDIRECT != 0 {
            for j in 0..(d.len / 16).min(u32::from(u16::MAX)) {
                match read_raw(mem, d.addr, j) {
                    Some(e) => add(e),
                    None => break,
                }
            }
        } else {
            add(d);
        }
    }
    out
}

/// Everything in the property test's guest memory.
fn snapshot(mem: &GuestMemoryMmap) -> Vec<u8> {
    let mut v = vec![0u8; (P_A_END + (P_B_END - P_B)) as usize];
    let (a, b) = v.split_at_mut(P_A_END as usize);
    mem.read_slice(a, GuestAddress(0)).unwrap();
    mem.read_slice(b, GuestAddress(P_B)).unwrap();
    v
}

/// Fails when a byte changed between `before` and `after` outside `allowed`.
fn check_writes(before: &[u8], after: &[u8], allowed: &[(u64, u64)]) -> Result<(), TestCaseError> {
    for (k, (x, y)) in before.chunks(64).zip(after.chunks(64)).enumerate() {
        if x == y {
            continue;
        }
        for (j, _) in x.iter().zip(y).enumerate().filter(|(_, (p, q))| p != q) {
            let off = (k * 64 + j) as u64;
            let addr = if off < P_A_END {
                off
            } else {
                off - P_A_END + P_B
            };
            prop_assert!(
                allowed.iter().any(|&(s, e)| (s..e).contains(&addr)),
                "wrote guest address {addr:#x}, in no write-only buffer nor the used ring"
            );
        }
    }
    Ok(())
}

/// Whether `lens` is a subsequence of `of` (both in order).
fn is_subsequence(lens: &[u64], of: &[u64]) -> bool {
    let mut it = of.iter();
    lens.iter().all(|l| it.any(|o| o == l))
}

fn run(s: &Scenario) -> Result<(), TestCaseError> {
    let mut g = Guest::with_ranges(
        s.size,
        &[
            (GuestAddress(0), P_A_END as usize),
            (GuestAddress(P_B), (P_B_END - P_B) as usize),
        ],
    )
    .starting_at(s.start);
    if let Some(seed) = s.noise {
        // xorshift64: cheap noise for headers and frames.
        let mut x = seed | 1;
        let mut noise = |len: u64| -> Vec<u8> {
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        };
        g.write(P_BUF, &noise(P_A_END - P_BUF));
        g.write(P_B, &noise(P_B_END - P_B));
    }
    for (i, &d) in s.descs.iter().enumerate() {
        put_raw(&g, DESC, i as u16, d);
    }
    for (i, &d) in s.itable.iter().enumerate() {
        put_raw(&g, ITABLE, i as u16, d);
    }
    for (i, &h) in s.avail.iter().enumerate() {
        g.write(AVAIL + 4 + 2 * i as u64, &h.to_le_bytes());
    }
    g.set_avail_idx(s.start.wrapping_add(s.ahead));
    let mut r = g.ring(s.hdr_len, s.tso);
    let mut pool = Pool::new(64, 0);
    let mut lending = lending_pool();
    let mut snap = None;
    for (i, op) in s.ops.iter().enumerate() {
        let (avail0, used0) = (r.q.next_avail(), r.q.next_used());
        let ok = match op {
            Op::Recv(room) => {
                // The memory as the last burst left it, unless the guest wrote to it since.
                let before = snap.take().unwrap_or_else(|| snapshot(&g.mem));
                let mut batch = Batch::new();
                for _ in *room..MAX_BURST {
                    batch.push(pool.packet_from(&[0; 14], 0));
                }
                let mut counts = [0; 3];
                // Every other burst lends, as a PMD's pool does: its frames are read whole
                // from the guest's memory and its chains given back once they are freed.
                let (pool, mut lent) = (
                    if i % 2 == 0 { &mut lending } else { &mut pool },
                    Lent::default(),
                );
                let res = r.recv(pool, &mut batch, 1, &mut counts, &mut lent);
                for p in batch.packets_mut() {
                    pool.materialize(p);
                }
                let new: Vec<u64> = batch.packets()[MAX_BURST - room..]
                    .iter()
                    .map(|p| p.len() as u64)
                    .collect();
                pool.free_batch(&mut batch);
                pool.end_lending();
                if res.is_ok() {
                    r.give_back(&mut lent);
                }
                let taken = r.q.next_avail().wrapping_sub(avail0);
                prop_assert!(new.len() <= *room, "{} packets for room {room}", new.len());
                prop_assert!(
                    usize::from(taken) <= *room,
                    "{taken} chains for room {room}"
                );
                prop_assert_eq!(counts[0], new.len() as u64);
                prop_assert_eq!(counts[1], new.iter().sum::<u64>());
                prop_assert!(counts[0] + counts[2] <= u64::from(taken));
                // Each packet is the whole of one chain taken, less the header.
                let chains: Vec<u64> = (0..taken)
                    .filter_map(|k| {
                        let slot = u64::from(avail0.wrapping_add(k) % s.size);
                        let head = u16::from_le_bytes(
                            before[(AVAIL + 4 + 2 * slot) as usize..][..2]
                                .try_into()
                                .unwrap(),
                        );
                        chain_len(&g.mem, s.size, head)
                    })
                    .map(|t| t.saturating_sub(s.hdr_len as u64))
                    .collect();
                prop_assert!(
                    new.iter().all(|&l| (14..=MAX_FRAME as u64).contains(&l)),
                    "packet lengths {new:?}"
                );
                prop_assert!(
                    is_subsequence(&new, &chains),
                    "packets of {new:?} bytes from chains of {chains:?}"
                );
                // The device wrote nothing but used elements.
                check_writes(
                    &before,
                    snap.insert(snapshot(&g.mem)),
                    &[(USED, USED + 4 + 8 * u64::from(s.size))],
                )?;
                if res.is_ok() {
                    prop_assert_eq!(counts[0] + counts[2], u64::from(taken));
                    prop_assert_eq!(r.q.next_used().wrapping_sub(used0), taken);
                }
                res.is_ok()
            }
            Op::Send(lens) => {
                let before = snap.take().unwrap_or_else(|| snapshot(&g.mem));
                let allowed = writable(&g.mem, s.size);
                let frames: Vec<Vec<u8>> = lens.iter().map(|&l| vec![0xa5; l]).collect();
                let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
                let (res, counts) = send(&mut r, &refs);
                check_writes(&before, snap.insert(snapshot(&g.mem)), &allowed)?;
                prop_assert_eq!(counts[0] + counts[2], lens.len() as u64);
                // What the used elements say was written is exactly the frames sent and
                // their headers.
                let added = r.q.next_used().wrapping_sub(used0);
                prop_assert_eq!(g.used_idx(), r.q.next_used());
                let mut sum = 0u64;
                for k in 0..added {
                    let slot = u64::from(used0.wrapping_add(k) % s.size);
                    let e = g.read(USED + 4 + 8 * slot, 8);
                    let id = u32::from_le_bytes(e[..4].try_into().unwrap());
                    prop_assert!(id < u32::from(s.size), "used id {id}");
                    sum += u64::from(u32::from_le_bytes(e[4..].try_into().unwrap()));
                }
                prop_assert_eq!(sum, counts[1] + counts[0] * s.hdr_len as u64);
                if s.hdr_len == HDR_LEGACY {
                    prop_assert_eq!(u64::from(added), counts[0], "one buffer per frame");
                }
                if res.is_ok() {
                    // Every chain taken was given back: none leaks.
                    prop_assert_eq!(r.q.next_avail().wrapping_sub(avail0), added);
                }
                res.is_ok()
            }
            Op::Publish(n) => {
                g.set_avail_idx(avail0.wrapping_add(*n));
                snap = None;
                true
            }
            Op::Poke(i, d) => {
                put_raw(&g, DESC, *i, *d);
                snap = None;
                true
            }
        };
        if !ok {
            // The caller takes the ring out of service: it is never used again.
            break;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        // No regression files: a failure prints the case to add as an example test.
        failure_persistence: None,
        // Generating a case draws thousands of numbers; ChaCha is slow in a debug build.
        rng_algorithm: proptest::test_runner::RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_rings_never_panic_hang_or_stray(s in scenario()) {
        run(&s)?;
    }
}
