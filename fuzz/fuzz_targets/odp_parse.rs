//! The datapath flow text parsers on arbitrary UTF-8: whatever parses must print and re-parse
//! to the same text. The invariants are in `flow_fuzz::check_odp`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| flow_fuzz::check_odp(data));
