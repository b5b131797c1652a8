//! Replays the committed inputs of the `ofctl_flow`, `bfd_msg` and `lacp_pdu` fuzz targets
//! (`tests/data/fuzz/<target>/*`) through the checks the targets run, which live in
//! `fuzz/src/<target>.rs`, path-imported here so that both use one copy.

#[path = "../../../fuzz/src/ofctl_flow.rs"]
mod ofctl_flow;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn ofctl_flow_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "ofctl_flow",
        ofctl_flow::check_ofctl_flow,
    );
}

#[path = "../../../fuzz/src/bfd_msg.rs"]
mod bfd_msg;

#[test]
fn bfd_msg_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "bfd_msg",
        bfd_msg::check_bfd_msg,
    );
}

#[path = "../../../fuzz/src/lacp_pdu.rs"]
mod lacp_pdu;

#[test]
fn lacp_pdu_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "lacp_pdu",
        lacp_pdu::check_lacp_pdu,
    );
}
