//! LACPDUs (ofproto's `lacp::pdu` decoder and a bond's LACP), as a partner sends them. The
//! invariants are in `src/lacp_pdu.rs`.
#![no_main]

#[path = "../src/lacp_pdu.rs"]
mod lacp_pdu;

libfuzzer_sys::fuzz_target!(|data: &[u8]| lacp_pdu::check_lacp_pdu(data));
