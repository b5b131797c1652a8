//! Checks of the `vhost_ring` fuzz target, shared with the crash-regression test
//! (`crates/netdev/tests/fuzz_regressions.rs` path-imports this file), so that a committed
//! input is replayed through exactly the checks that found it.
//!
//! The input is a hostile guest's split ring (descriptor table, available ring, buffers and
//! indirect tables), which [`netdev::vhost::fuzzing::run`] lays out in guest memory of two
//! regions fenced by unmapped pages and runs one receive or send burst over:
//! - the device touches guest memory only inside the regions the front-end gave (anything
//!   else faults on the guard pages);
//! - the used ring holds no more chains than were offered, each a head of the ring;
//! - every frame taken from the guest is at most a pool's large buffer, and counted.
//!
//! Running the same ring twice gives the same outcome (nothing depends on stale state).

use netdev::vhost::fuzzing;

/// Runs every check on `data`.
pub fn check_vhost_ring(data: &[u8]) {
    let first = fuzzing::run(data);
    assert!(first.frames <= 256, "{first:?}");
    assert_eq!(fuzzing::run(data), first, "a second run differs");
}
