//! Test support shared by the integration tests: a classic-pcap reader and a small JSON reader
//! for the sidecars written by `scripts/gen-fixtures.py` (no scapy, no extra crates at test time).
#![allow(dead_code)]

pub mod json;
pub mod pcap;

use std::path::PathBuf;

/// `testdata/pcap/` at the workspace root.
pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap")
}

/// Reads `NAME.pcap` and `NAME.json` from the fixture directory.
pub fn load(name: &str) -> (pcap::Pcap, json::Json) {
    let dir = fixture_dir();
    let bytes = std::fs::read(dir.join(format!("{name}.pcap")))
        .unwrap_or_else(|e| panic!("{name}.pcap: {e} (run scripts/gen-fixtures.py)"));
    let text = std::fs::read_to_string(dir.join(format!("{name}.json")))
        .unwrap_or_else(|e| panic!("{name}.json: {e}"));
    let pcap = pcap::Pcap::parse(&bytes).unwrap_or_else(|e| panic!("{name}.pcap: {e}"));
    let json = json::Json::parse(&text).unwrap_or_else(|e| panic!("{name}.json: {e}"));
    (pcap, json)
}

/// Decodes a hex string.
pub fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex string {s:?}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}
