//! Replays the committed inputs of the `pcap_file`, `vhost_ring`, `vhost_msg` and `vnet_tnl`
//! fuzz targets (`tests/data/fuzz/<target>/*`) through the checks the targets run, which live
//! in `fuzz/src/<target>.rs`, path-imported here so that both use one copy.

#[path = "../../../fuzz/src/pcap_file.rs"]
mod pcap_file;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;
#[path = "../../../fuzz/src/vhost_msg.rs"]
mod vhost_msg;
#[path = "../../../fuzz/src/vhost_ring.rs"]
mod vhost_ring;
#[path = "../../../fuzz/src/vnet_tnl.rs"]
mod vnet_tnl;

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

#[test]
fn vnet_tnl_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "vnet_tnl",
        vnet_tnl::check_vnet_tnl,
    );
}

#[test]
fn vnet_tnl_seeds_reach_the_segmentation() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fuzz/vnet_tnl/");
    let read = |name: &str| std::fs::read(format!("{dir}{name}")).unwrap();
    let taken = [
        ("v4_in_v4_csum", 3),
        ("v6_in_v6", 3),
        ("v6_in_v4_csum", 2),
        ("uso_in_v4_csum", 3),
    ];
    for (name, segments) in taken {
        assert_eq!(
            netdev::vnet_tnl::fuzz_rx(&read(name)),
            (segments, None),
            "{name}"
        );
    }
    let refused = netdev::vnet_tnl::fuzz_rx(&read("uso_type_on_a_tcp_frame"));
    assert_eq!(refused, (0, Some("rx_drop_gso_header")));
}
