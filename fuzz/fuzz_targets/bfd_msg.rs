//! BFD control packets (ofproto's `bfd` decoder, frames and sessions), as a peer sends them.
//! The invariants are in `src/bfd_msg.rs`.
#![no_main]

#[path = "../src/bfd_msg.rs"]
mod bfd_msg;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bfd_msg::check_bfd_msg(data));
