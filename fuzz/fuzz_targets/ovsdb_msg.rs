//! The OVSDB client's decoding on arbitrary bytes: JSON-RPC framing, then each message's table
//! updates applied to an Open_vSwitch replica, RFC 7047 and update2 alike. The invariants are
//! in `src/ovsdb_msg.rs`.
#![no_main]

#[path = "../src/ovsdb_msg.rs"]
mod ovsdb_msg;

libfuzzer_sys::fuzz_target!(|data: &[u8]| ovsdb_msg::check_ovsdb_msg(data));
