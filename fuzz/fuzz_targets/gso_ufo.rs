//! `datapath::gso_ufo` on UFO super-frames cut into IP fragments. The invariants are in
//! `src/gso_ufo.rs`.
#![no_main]

#[path = "../src/gso_ufo.rs"]
mod gso_ufo;
#[path = "../src/ones_sum.rs"]
mod ones_sum;

libfuzzer_sys::fuzz_target!(|data: &[u8]| gso_ufo::check_gso_ufo(data));
