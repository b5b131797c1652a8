//! Conntrack's FTP and TFTP helpers on arbitrary segments: an FTP announcement rewritten for NAT
//! still announces the same port at the new address, and what the helper asks to edit lies within
//! the segment. The invariants are in `src/ct_alg.rs`.
#![no_main]

#[path = "../src/ct_alg.rs"]
mod ct_alg;

libfuzzer_sys::fuzz_target!(|data: &[u8]| ct_alg::check_ct_alg(data));
