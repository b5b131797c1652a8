//! Checks of the `vhost_msg` fuzz target, shared with the crash-regression test
//! (`crates/netdev/tests/fuzz_regressions.rs` path-imports this file), so that a committed
//! input is replayed through exactly the checks that found it.
//!
//! The input is a hostile vhost-user front-end's message stream (requests, sizes, flags,
//! payloads, and memory files of chosen sizes sent with them), which
//! [`netdev::vhost::fuzzing_messages::serve_messages`] sends to a port's control path and
//! serves to its end:
//! - the switch neither crashes (a guest memory region past the end of its file would fault
//!   when a ring is read) nor hangs;
//! - what it writes back is whole reply messages of protocol version 1;
//! - once the connection ends no ring is left started, the port says it is not connected, and
//!   it holds none of the front-end's memory files open or mapped.

use netdev::vhost::fuzzing_messages::serve_messages;

/// Runs every check on `data`.
pub fn check_vhost_msg(data: &[u8]) {
    let s = serve_messages(data);
    assert_eq!(s.started_after, 0, "rings left started: {s:?}");
    assert!(!s.connected_after, "still connected: {s:?}");
    assert_eq!(s.files_held_after, 0, "memory files left open: {s:?}");
    assert_eq!(s.mappings_after, 0, "memory files left mapped: {s:?}");
    assert!(s.replies <= s.messages, "more replies than requests: {s:?}");
}
