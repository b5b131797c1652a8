//! Replays the committed inputs of the `stream_file` fuzz target (`tests/data/fuzz/stream_file/*`)
//! through the checks the target runs, which live in `fuzz/src/stream_file.rs`, path-imported
//! here so that both use one copy.

#[path = "../../../fuzz/src/replay.rs"]
mod replay;
#[path = "../../../fuzz/src/stream_file.rs"]
mod stream_file;

#[test]
fn stream_file_inputs() {
    replay::replay(
        env!("CARGO_MANIFEST_DIR"),
        "stream_file",
        stream_file::check_stream_file,
    );
}
