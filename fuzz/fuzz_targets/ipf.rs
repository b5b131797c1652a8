//! Conntrack's fragment reassembly on a sequence of arbitrary or built IPv4/IPv6 fragments: it
//! never holds more than its limit, hands every packet back once, and completes only datagrams its
//! fragments cover exactly. The invariants are in `src/ipf.rs`.
#![no_main]

#[path = "../src/ipf.rs"]
mod ipf;

libfuzzer_sys::fuzz_target!(|data: &[u8]| ipf::check_ipf(data));
