//! Replays the committed inputs of the `config_toml` fuzz target
//! (`tests/data/fuzz/config_toml/*`) through the checks the target runs, which live in
//! `fuzz/src/config_toml.rs`, path-imported here so that both use one copy.

#[path = "../../../fuzz/src/config_toml.rs"]
mod config_toml;
#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn config_toml_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "config_toml",
        config_toml::check_config_toml,
    );
}
