//! Replays the committed inputs of the `gro` fuzz target (`tests/data/fuzz/gro/*`) through
//! the checks the target runs, which live in `fuzz/src/gro.rs`, path-imported here so that
//! both use one copy.

#[path = "../../../fuzz/src/gro.rs"]
mod gro;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn gro_inputs() {
    replay::replay(env!("CARGO_MANIFEST_DIR"), "gro", gro::check_gro);
}

#[test]
fn the_inputs_reach_the_merge() {
    let input = |name: &str| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fuzz/gro/");
        std::fs::read(format!("{dir}{name}")).unwrap()
    };
    assert_eq!(gro::merged_frames(&input("whole-super-frame")), 1);
    // A flipped payload byte breaks a checksum: the run stops at that segment.
    assert_eq!(gro::merged_frames(&input("a-payload-byte-flipped")), 2);
    // The same over IPv6.
    assert_eq!(gro::merged_frames(&input("ipv6-whole-super-frame")), 1);
    assert_eq!(gro::merged_frames(&input("ipv6-a-payload-byte-flipped")), 2);
}
