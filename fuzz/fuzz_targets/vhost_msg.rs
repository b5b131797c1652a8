//! A vhost-user port's control path against a hostile front-end: protocol messages with
//! arbitrary requests, sizes, flags and payloads, and memory files sent with them. The
//! invariants are in `src/vhost_msg.rs` and `crates/netdev/src/vhost/fuzzing_messages.rs`.
#![no_main]

#[path = "../src/vhost_msg.rs"]
mod vhost_msg;

libfuzzer_sys::fuzz_target!(|data: &[u8]| vhost_msg::check_vhost_msg(data));
