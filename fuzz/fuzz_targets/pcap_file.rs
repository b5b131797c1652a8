//! The pcap reader (netdev's `pcap` ports, `flowpath gen`'s `pcap =` templates) on arbitrary files,
//! read in pieces of a size the first byte picks: records before the damage, then one error, and
//! what reads writes and reads back the same. The invariants are in `src/pcap_file.rs`.
#![no_main]

#[path = "../src/pcap_file.rs"]
mod pcap_file;

libfuzzer_sys::fuzz_target!(|data: &[u8]| pcap_file::check_pcap_file(data));
