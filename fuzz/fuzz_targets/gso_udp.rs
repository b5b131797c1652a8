//! `datapath::gso_udp` on UDP super-frames cut into datagrams. The invariants are in
//! `src/gso_udp.rs`.
#![no_main]

#[path = "../src/gso_udp.rs"]
mod gso_udp;
#[path = "../src/ones_sum.rs"]
mod ones_sum;

libfuzzer_sys::fuzz_target!(|data: &[u8]| gso_udp::check_gso_udp(data));
