//! `datapath::gso_tunnel` on frames pushed whole into a tunnel and segmented after the push.
//! The invariants are in `src/gso_tunnel.rs`.
#![no_main]

#[path = "../src/gso_tunnel.rs"]
mod gso_tunnel;

libfuzzer_sys::fuzz_target!(|data: &[u8]| gso_tunnel::check_gso_tunnel(data));
