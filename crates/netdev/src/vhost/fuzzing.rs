//! A hostile guest for the `vhost_ring` fuzz target and its regression test: one split ring
//! whose descriptor table, available ring and buffers come from arbitrary bytes, in guest
//! memory of two regions with unmapped pages around and between them, run through the data
//! path as the PMD runs it (a receive burst from the guest's transmit ring, or a send burst
//! into its receive ring).
//!
//! Guest memory is the trust boundary of a vhost-user port: a descriptor may name any address
//! and length, chain anywhere, point to an indirect table anywhere. Touching a byte outside the
//! regions the front-end shared faults on the guard pages, which the fuzzer reports as a crash;
//! [`run`] itself checks what the device tells the guest back after a receive burst (after a
//! send burst the guest's memory is whatever the guest's overlapping buffers made of it).
//!
//! Not an API: public only so that the fuzz crate and the tests outside this crate reach it.

use std::sync::Arc;

use datapath::packet::{Batch, MAX_BURST, Pool};
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

use super::copy::LongCopy;
use super::features::{
    F_GUEST_CSUM, F_GUEST_ECN, F_GUEST_TSO4, F_GUEST_TSO6, F_HOST_TSO4, F_HOST_TSO6, F_MRG_RXBUF,
};
use super::protocol::MAX_RING;
use super::vring::{Lent, MAX_FRAME, Ring};
use crate::vnet;

/// Guest regions: (guest address, length, offset in the reservation). Each is surrounded by
/// unmapped pages, and guest addresses between them are no memory at all.
const REGIONS: [(u64, usize, usize); 2] = [(0, 0x8000, 0x1000), (0x1_0000, 0x8000, 0x1_0000)];
/// The whole reservation: the regions and their guard pages.
const RESERVED: usize = 0x2_0000;

/// Ring parts, in the first region (room for a 256-entry ring).
const DESC: u64 = 0;
const AVAIL: u64 = 0x1000;
const USED: u64 = 0x1400;
/// Buffers and indirect tables the input fills, from here to the end of the first region.
const BUFS: u64 = 0x2000;

/// Bytes of input per descriptor: a 16-bit address in units of 2 bytes (so that it ranges over
/// both regions, the hole between them and past the end), a 16-bit length, flags, next.
const DESC_INPUT: usize = 6;

/// Guest memory: anonymous pages, read-write where the regions are, no access elsewhere.
struct Reservation {
    base: *mut u8,
}

impl Reservation {
    fn new() -> Reservation {
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                RESERVED,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "mmap of the guest reservation");
        for (_, len, at) in REGIONS {
            // SAFETY: `at + len` lies within the reservation just mapped.
            let rc = unsafe {
                libc::mprotect(
                    base.cast::<u8>().add(at).cast(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            assert_eq!(rc, 0, "mprotect of a guest region");
        }
        Reservation { base: base.cast() }
    }

    /// The regions as `vm-memory` guest memory.
    fn memory(&self) -> GuestMemoryMmap {
        let regions = REGIONS.iter().map(|&(gpa, len, at)| {
            // SAFETY: `base + at` starts `len` read-write bytes of a private anonymous mapping
            // that outlives the memory (`run` drops every user of it before the reservation).
            let m = unsafe {
                MmapRegion::build_raw(
                    self.base.add(at),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                )
            }
            .expect("a region of the reservation");
            GuestRegionMmap::new(m, GuestAddress(gpa)).expect("a region in the address space")
        });
        GuestMemoryMmap::from_regions(regions.collect()).expect("two disjoint regions")
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used.
        unsafe { libc::munmap(self.base.cast(), RESERVED) };
    }
}

/// The features of a guest that takes TCP super-frames.
const GUEST_TSO: u64 = F_GUEST_CSUM | F_GUEST_TSO4 | F_GUEST_TSO6 | F_GUEST_ECN;

/// What the guest's side of the ring shows after a burst.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Frames the device took from the guest (receive) or gave it (send).
    pub frames: usize,
    /// Chains the device returned in the used ring (after a receive burst; 0 after a send).
    pub used: usize,
    /// The device stopped at a broken chain.
    pub bad_ring: bool,
}

/// Runs one burst over a ring described by `data`: byte 0 picks the ring size (1 to 256), the
/// direction (bit 3: a send into the guest's receive ring), the virtio-net header size (bit
/// 4: the legacy 10 bytes), TSO (bit 5) and whether the guest takes TCP super-frames (bit
/// 6: `GUEST_TSO4/6`; a send burst holds one); bytes 1-2 are the ring indexes' start, byte 3 how
/// many chains are offered; then the descriptors (`DESC_INPUT` bytes each), the available
/// entries (one byte each) and the bytes of the buffer area. Panics when the device breaks a
/// rule the guest relies on.
pub fn run(data: &[u8]) -> Outcome {
    let mut input = data.iter().copied().chain(std::iter::repeat(0));
    let mut byte = || input.next().unwrap_or(0);
    let sel = byte();
    let size = 1u16 << (sel & 7).min(8);
    let send = sel & 8 != 0;
    let hdr_len = if sel & 16 != 0 {
        vnet::HDR_LEN_LEGACY
    } else {
        vnet::HDR_LEN
    };
    let tso = sel & 32 != 0;
    let guest_tso = sel & 64 != 0;
    let start = u16::from_le_bytes([byte(), byte()]);
    let offered = u16::from(byte());

    let guest = Reservation::new();
    let mem = Arc::new(guest.memory());
    let write = |addr: u64, b: &[u8]| {
        mem.write_slice(b, GuestAddress(addr))
            .expect("the input's layout is inside the first region");
    };
    for i in 0..u64::from(size) {
        let d: [u8; DESC_INPUT] = std::array::from_fn(|_| byte());
        let addr = u64::from(u16::from_le_bytes([d[0], d[1]])) * 2;
        let mut e = [0u8; 16];
        e[..8].copy_from_slice(&addr.to_le_bytes());
        e[8..10].copy_from_slice(&d[2..4]);
        e[12] = d[4];
        e[14] = d[5];
        write(DESC + 16 * i, &e);
    }
    for k in 0..size {
        let slot = u64::from(start.wrapping_add(k) % size);
        write(AVAIL + 4 + 2 * slot, &u16::from(byte()).to_le_bytes());
    }
    write(AVAIL + 2, &start.wrapping_add(offered).to_le_bytes());
    write(USED + 2, &start.to_le_bytes());
    let rest = data.get(4 + DESC_INPUT * usize::from(size) + usize::from(size)..);
    let rest = rest.unwrap_or_default();
    let room = REGIONS[0].1 - BUFS as usize;
    write(BUFS, &rest[..rest.len().min(room)]);

    let mut q = Queue::new(MAX_RING).expect("a queue");
    q.try_set_size(size).expect("a power of two");
    q.try_set_desc_table_address(GuestAddress(DESC))
        .expect("aligned");
    q.try_set_avail_ring_address(GuestAddress(AVAIL))
        .expect("aligned");
    q.try_set_used_ring_address(GuestAddress(USED))
        .expect("aligned");
    q.set_next_avail(start);
    q.set_next_used(start);
    q.set_ready(true);
    assert!(q.is_valid(&*mem), "the ring parts are in guest memory");
    let mut ring = Ring::start(
        &q,
        mem.clone(),
        None,
        hdr_len,
        if tso { F_HOST_TSO4 | F_HOST_TSO6 } else { 0 }
            | if hdr_len == vnet::HDR_LEN {
                F_MRG_RXBUF
            } else {
                0
            }
            | if guest_tso { GUEST_TSO } else { 0 },
        Arc::default(),
    )
    .expect("the ring parts are in one region");

    let mut pool = Pool::new(2 * MAX_BURST, 0);
    let mut batch = Batch::new();
    let mut counts = [0u64; 3];
    let res = if send {
        // Frames of sizes from 14 bytes to beyond what one buffer holds.
        for (i, len) in [14, 60, 1514, 9000, 20_000].into_iter().enumerate() {
            let f: Vec<u8> = (0..len).map(|b| (b ^ i) as u8).collect();
            batch.push(pool.packet_from(&f, 0));
        }
        // A TCP/IPv4 super-frame of 20 000 payload bytes in segments of 1 000: whole into a
        // guest that takes it, else 20 segments.
        let mut f = vec![0u8; 54 + 20_000];
        f[12] = 0x08;
        f[14] = 0x45;
        f[23] = 6;
        f[46] = 0x50;
        let mut p = pool.packet_from(&f, 0);
        p.meta.gso_size = 1000;
        batch.push(p);
        ring.send(&mut batch, &mut counts, &mut pool, LongCopy::Vector)
    } else {
        let res = ring.recv(&mut pool, &mut batch, 1, &mut counts, &mut Lent::default());
        for p in batch.packets() {
            assert!(p.len() <= MAX_FRAME, "a frame of {} bytes", p.len());
        }
        assert_eq!(counts[0], batch.len() as u64, "frames counted and taken");
        res
    };
    pool.free_batch(&mut batch);
    drop(ring);

    // The used ring: the device returned at most what was offered, each a head of the ring.
    // Only after a receive burst: in a send burst the device writes frames into whatever
    // buffers the guest offers, and a guest may offer its own used ring as one.
    let used = if send {
        0
    } else {
        used_chains(&mem, start, size, offered)
    };
    drop(mem);
    drop(guest);
    Outcome {
        frames: counts[0] as usize,
        used: usize::from(used),
        bad_ring: res.is_err(),
    }
}

/// The chains the used ring holds since `start`, checked against what was offered.
fn used_chains(mem: &GuestMemoryMmap, start: u16, size: u16, offered: u16) -> u16 {
    let mut idx = [0u8; 2];
    mem.read_slice(&mut idx, GuestAddress(USED + 2))
        .expect("in guest memory");
    let used = u16::from_le_bytes(idx).wrapping_sub(start);
    assert!(
        used <= offered.min(size),
        "{used} chains used of {offered} offered"
    );
    for k in 0..used {
        let slot = u64::from(start.wrapping_add(k) % size);
        let mut e = [0u8; 8];
        mem.read_slice(&mut e, GuestAddress(USED + 4 + 8 * slot))
            .expect("in guest memory");
        let id = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
        assert!(id < u32::from(size), "used element {k} names head {id}");
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An 8-entry ring (`sel` 3, plus `flags`), indexes from 0, `heads` offered, descriptor 0
    /// the buffer at [`BUFS`] of `len` bytes with `desc_flags`, the buffer holding `bufs`.
    fn input(flags: u8, heads: &[u8], len: u16, desc_flags: u8, bufs: &[u8]) -> Vec<u8> {
        let mut v = vec![3 | flags, 0, 0, heads.len() as u8];
        v.extend_from_slice(&((BUFS / 2) as u16).to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(&[desc_flags, 0]);
        v.resize(4 + 8 * DESC_INPUT, 0);
        v.extend_from_slice(heads);
        v.resize(4 + 8 * DESC_INPUT + 8, 0);
        v.extend_from_slice(bufs);
        v
    }

    #[test]
    fn a_well_formed_chain_is_received_and_used() {
        let frame = [vec![0u8; vnet::HDR_LEN], vec![0x5a; 60]].concat();
        let out = run(&input(0, &[0], frame.len() as u16, 0, &frame));
        assert_eq!(
            out,
            Outcome {
                frames: 1,
                used: 1,
                bad_ring: false
            }
        );
    }

    #[test]
    fn a_buffer_outside_guest_memory_is_refused() {
        // Descriptor 0 at guest address 0x9000: the hole between the regions.
        let mut v = input(0, &[0], 72, 0, &[]);
        v[4..6].copy_from_slice(&0x4800u16.to_le_bytes());
        let out = run(&v);
        assert_eq!((out.frames, out.bad_ring), (0, true), "{out:?}");
    }

    #[test]
    fn frames_go_into_writable_buffers() {
        let out = run(&input(8, &[0, 0], 2048, 2, &[]));
        assert!(out.frames >= 1 && !out.bad_ring, "{out:?}");
    }
}
