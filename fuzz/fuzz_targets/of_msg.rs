//! The OpenFlow message decoder on arbitrary bytes: a connection's receive path, every message
//! and flow decoder, and the action, instruction and match decoders of every version; what
//! reads must write again and read back the same. The invariants are in `src/of_msg.rs`.
#![no_main]

#[path = "../src/of_msg.rs"]
mod of_msg;

libfuzzer_sys::fuzz_target!(|data: &[u8]| of_msg::check_of_msg(data));
