//! Replays the committed inputs of the `unixctl_frame` fuzz target
//! (`tests/data/fuzz/unixctl_frame/*`) through the checks the target runs, which live in
//! `fuzz/src/unixctl_frame.rs`; the framer and the message code they drive are private to the
//! crate, so they are path-imported here as the target imports them.

#[allow(dead_code)]
#[path = "../src/framer.rs"]
mod framer;
#[allow(dead_code)]
#[path = "../src/proto.rs"]
mod proto;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;
#[path = "../../../fuzz/src/unixctl_frame.rs"]
mod unixctl_frame;

#[test]
fn unixctl_frame_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "unixctl_frame",
        unixctl_frame::check_unixctl_frame,
    );
}
