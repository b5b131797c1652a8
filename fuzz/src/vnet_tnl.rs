//! Checks of the `vnet_tnl` fuzz target, shared with the crash-regression test
//! (`crates/netdev/tests/fuzz_regressions.rs` path-imports this file), so that a committed
//! input is replayed through exactly the checks that found it.
//!
//! The input is what a tap that took UDP-tunnel GSO reads: the 24-byte tunnel virtio-net
//! header, then the frame. [`netdev::vnet_tnl::fuzz_rx`] receives it as the port does:
//! - a refused frame is a counted drop by reason, never a panic;
//! - an accepted one is cut into segments of at most its headers plus one MSS, whose payloads
//!   together are the super-frame's: on receive, or, for a TCP or UDP (USO) one in VXLAN or
//!   GENEVE kept whole, as an output cuts it, after `tnl_pop` as VXLAN and as GENEVE took a
//!   copy (a pop or a counted drop).
//!
//! Receiving the same input twice gives the same outcome.

use netdev::vnet_tnl::fuzz_rx;

/// Runs every check on `data`.
pub fn check_vnet_tnl(data: &[u8]) {
    let first = fuzz_rx(data);
    assert!(first.0 <= 65536, "{first:?}");
    assert_eq!(fuzz_rx(data), first, "a second run differs");
}
