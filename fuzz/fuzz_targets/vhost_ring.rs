//! A vhost-user port's data path against a hostile guest: descriptor chains, indirect tables
//! and buffers from arbitrary bytes, in guest memory fenced by unmapped pages. The invariants
//! are in `src/vhost_ring.rs` and `crates/netdev/src/vhost/fuzzing.rs`.
#![no_main]

#[path = "../src/vhost_ring.rs"]
mod vhost_ring;

libfuzzer_sys::fuzz_target!(|data: &[u8]| vhost_ring::check_vhost_ring(data));
