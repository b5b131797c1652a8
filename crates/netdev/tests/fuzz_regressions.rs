//! Replays the committed inputs of the `pcap_file`, `vhost_ring` and `vhost_msg` fuzz targets
//! (`tests/data/fuzz/<target>/*`) through the checks the targets run, which live in
//! `fuzz/src/<target>.rs`, path-imported here so that both use one copy.

#[path = "../../../fuzz/src/pcap_file.rs"]
mod pcap_file;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;
#[path = "../../../fuzz/src/vhost_msg.rs"]
mod vhost_msg;
#[path = "../../../fuzz/src/vhost_ring.rs"]
mod vhost_ring;

#[test]
fn pcap_file_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "pcap_file",
        pcap_file::check_pcap_file,
    );
}

#[test]
fn vhost_ring_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "vhost_ring",
        vhost_ring::check_vhost_ring,
    );
}

#[test]
fn vhost_msg_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "vhost_msg",
        vhost_msg::check_vhost_msg,
    );
}
