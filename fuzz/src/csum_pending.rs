//! Checks of the `csum_pending` fuzz target, shared with the crash-regression test
//! (`crates/datapath/tests/fuzz_regressions.rs` path-imports this file).
//!
//! The input's first byte says how the frame starts (even: at its Ethernet header; odd: at an
//! IPv4 header, `packet_type` (1, 0x0800), or with bit 1 set an IPv6 one); the rest is the
//! frame, its checksum pending. [`L4Csum::find`] finds its TCP or UDP checksum or refuses
//! (never panicking); for a frame it finds:
//! - the offsets are in order inside the frame (`l3 < l4`, the field before `end`, `end` at
//!   most the frame's length);
//! - [`prepare_partial`] writes the pseudo-header sum into the field and nothing else;
//! - [`complete`] changes the field only, which then verifies over the pseudo-header and the
//!   segment (by a sum of its own here), and drops the mark.
//!
//! A frame it refuses: both leave it alone (`complete` drops the mark all the same).

use datapath::csum_pending::{L4Csum, complete, prepare_partial};
use datapath::packet::Packet;

use crate::ones_sum::sum;

fn fold(mut s: u32) -> u32 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s
}

/// Runs the checks on one input.
pub fn check_csum_pending(data: &[u8]) {
    found(data);
}

/// Runs the checks on one input; returns where the checksum is, `None` when refused.
pub fn found(data: &[u8]) -> Option<L4Csum> {
    let [how, frame @ ..] = data else {
        return None;
    };
    let packet_type = match how & 3 {
        1 => (1 << 16) | 0x0800,
        3 => (1 << 16) | 0x86dd,
        _ => 0,
    };
    let pending = || {
        let mut p = Packet::from_slice(frame);
        p.meta.packet_type = packet_type;
        p.meta.set_csum_pending(true);
        p
    };
    let Some(at) = L4Csum::find(frame, packet_type) else {
        let mut p = pending();
        assert_eq!(prepare_partial(&mut p), None);
        assert!(!complete(&mut p));
        assert!(!p.meta.csum_pending());
        assert_eq!(p.data(), frame);
        return None;
    };
    let field = at.l4 + at.offset;
    assert!(
        at.l3 < at.l4 && field + 2 <= at.end && at.end <= frame.len(),
        "{at:?}"
    );
    assert!(matches!(at.offset, 6 | 16));
    let others_kept =
        |f: &[u8]| f[..field] == frame[..field] && f[field + 2..] == frame[field + 2..];

    let mut p = pending();
    assert_eq!(prepare_partial(&mut p), Some(at));
    let f = p.data();
    assert!(others_kept(f));
    let pseudo = u32::from(at.pseudo(frame));
    assert_eq!(
        u32::from(u16::from_be_bytes([f[field], f[field + 1]])),
        pseudo
    );

    let mut p = pending();
    assert!(complete(&mut p));
    assert!(!p.meta.csum_pending());
    let f = p.data();
    assert!(others_kept(f));
    assert_eq!(fold(pseudo + sum(&f[at.l4..at.end])), 0xffff, "{at:?}");
    assert_ne!(f[field..field + 2], [0, 0], "0 goes as 0xffff");
    Some(at)
}
