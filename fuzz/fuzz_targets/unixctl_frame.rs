//! The control socket's (unixctl) JSON-RPC framing and request parsing on arbitrary bytes, as
//! a client could send them. The framer and the message code are path-imported from
//! `crates/unixctl/src`, where they are private; the invariants are in `src/unixctl_frame.rs`.
#![no_main]

#[allow(dead_code)]
#[path = "../../crates/unixctl/src/framer.rs"]
mod framer;
#[allow(dead_code)]
#[path = "../../crates/unixctl/src/proto.rs"]
mod proto;
#[path = "../src/unixctl_frame.rs"]
mod unixctl_frame;

libfuzzer_sys::fuzz_target!(|data: &[u8]| unixctl_frame::check_unixctl_frame(data));
