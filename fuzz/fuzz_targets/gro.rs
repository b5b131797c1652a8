//! `datapath::gro` on bursts of TCP segments edited by the input. The invariants are in
//! `src/gro.rs`.
#![no_main]

#[path = "../src/gro.rs"]
mod gro;

libfuzzer_sys::fuzz_target!(|data: &[u8]| gro::check_gro(data));
