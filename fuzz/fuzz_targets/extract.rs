//! `flow::extract` on arbitrary bytes: the first byte picks the packet's metadata, the rest is
//! the packet. The invariants are in `flow_fuzz::check_extract`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flow_fuzz::check_extract(data));
