//! The `ovs-ofctl` flow syntax parser (ofproto's `add-flow`/`mod-flows` text) on arbitrary
//! UTF-8: whatever parses must print and re-parse to the same flow. The invariants are in
//! `src/ofctl_flow.rs`.
#![no_main]

#[path = "../src/ofctl_flow.rs"]
mod ofctl_flow;

libfuzzer_sys::fuzz_target!(|data: &[u8]| ofctl_flow::check_ofctl_flow(data));
