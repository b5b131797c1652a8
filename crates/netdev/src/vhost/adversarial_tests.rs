//! The rings' rule breakers, indirect descriptor tables, the known bugs and arbitrary rings:
//! what a broken or hostile driver can write into guest memory must take a ring out of service,
//! without a panic, a hang or an access outside guest memory. The guest-side builder and the
//! helpers are in [`super::tests`].

use std::fs::File;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use datapath::packet::{Batch, MAX_BURST, Pool};
use proptest::prelude::*;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use super::VhostOptions;
use super::features::{F_HOST_TSO4, F_MRG_RXBUF, F_VERSION_1};
use super::protocol::{Handler, Region, VringConf};
use super::tests::*;
use super::vring::{Lent, MAX_FRAME, Ring};

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
