//! Replays the committed inputs of the `pcap_file` fuzz target (`tests/data/fuzz/pcap_file/*`)
//! through the checks the target runs, which live in `fuzz/src/pcap_file.rs`, path-imported
//! here so that both use one copy.

#[path = "../../../fuzz/src/pcap_file.rs"]
mod pcap_file;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn pcap_file_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "pcap_file",
        pcap_file::check_pcap_file,
    );
}
