//! Instruction counts (valgrind/callgrind, via gungraun) of what a frame received with a
//! partial checksum costs the switch, on a burst of 32 full-size TCP/IPv4 frames (1514 bytes,
//! 1460 of payload); divide by 32 for instructions per frame:
//! - `csum_complete_1500`: its checksum completed in software ([`csum_pending::complete`]),
//!   what receive did to every such frame before it could stay pending, and what an output
//!   that cannot hand it on partial still does;
//! - `csum_pending_1500`: its checksum left pending and handed on partial: the headers found
//!   at receive ([`L4Csum::find`], which checks the virtio-net offsets) and the pseudo-header
//!   sum written at transmit ([`csum_pending::prepare_partial`]), what a `tap`, a vhost guest
//!   with `GUEST_CSUM` or a DPDK device with checksum offload costs.

use std::hint::black_box;

use datapath::csum_pending::{self, L4Csum};
use datapath::packet::Packet;
use gungraun::{library_benchmark, library_benchmark_group, main};

const BATCH: usize = 32;

/// A burst of pending TCP/IPv4 frames of 1514 bytes.
fn frames() -> Vec<Packet> {
    let mut f = vec![0u8; 1514];
    f[..14].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00]);
    f[14..34].copy_from_slice(&[
        0x45, 0, 0x05, 0xdc, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f[34..54].copy_from_slice(&[
        0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    for (i, b) in f[54..].iter_mut().enumerate() {
        *b = (i * 7) as u8;
    }
    (0..BATCH)
        .map(|_| {
            let mut p = Packet::from_slice(&f);
            p.meta.set_csum_pending(true);
            p
        })
        .collect()
}

#[library_benchmark]
#[bench::csum_complete_1500(frames())]
fn complete(mut frames: Vec<Packet>) -> Vec<Packet> {
    for p in &mut frames {
        assert!(csum_pending::complete(black_box(p)));
    }
    frames
}

#[library_benchmark]
#[bench::csum_pending_1500(frames())]
fn pending(mut frames: Vec<Packet>) -> Vec<Packet> {
    for p in &mut frames {
        let at = L4Csum::find(black_box(&*p).headers(), 0);
        assert_eq!(at.map(|a| (a.l4, a.offset)), Some((34, 16)));
        assert!(csum_pending::prepare_partial(p).is_some());
    }
    frames
}

library_benchmark_group!(name = csum; benchmarks = complete, pending);
main!(library_benchmark_groups = csum);
