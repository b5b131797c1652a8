//! `datapath::csum_pending` on arbitrary frames with a pending checksum. The invariants are in
//! `src/csum_pending.rs`.
#![no_main]

#[path = "../src/csum_pending.rs"]
mod csum_pending;
#[path = "../src/ones_sum.rs"]
mod ones_sum;

libfuzzer_sys::fuzz_target!(|data: &[u8]| csum_pending::check_csum_pending(data));
