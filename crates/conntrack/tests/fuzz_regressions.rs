//! Replays the committed inputs of the `ct_alg` and `ipf` fuzz targets
//! (`tests/data/fuzz/<target>/*`) through the checks the targets run, which live in
//! `fuzz/src/ct_alg.rs` and `fuzz/src/ipf.rs`, path-imported here so that both use one copy.

#[path = "../../../fuzz/src/ct_alg.rs"]
mod ct_alg;
#[path = "../../../fuzz/src/ipf.rs"]
mod ipf;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn ct_alg_inputs() {
    replay::replay(env!("CARGO_MANIFEST_DIR"), "ct_alg", ct_alg::check_ct_alg);
}

#[test]
fn ipf_inputs() {
    replay::replay(env!("CARGO_MANIFEST_DIR"), "ipf", ipf::check_ipf);
}
