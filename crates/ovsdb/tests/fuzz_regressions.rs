//! Replays the committed inputs of the `ovsdb_msg` fuzz target (`tests/data/fuzz/ovsdb_msg/*`:
//! inputs that made it fail once, and streams captured from a real `ovsdb-server` that reach
//! the deep paths) through the checks the fuzz target runs, which live in
//! `fuzz/src/ovsdb_msg.rs`, path-imported here so that both use one copy.

#[allow(dead_code)]
#[path = "../../../fuzz/src/ovsdb_msg.rs"]
mod ovsdb_msg;

use std::path::PathBuf;

#[test]
fn ovsdb_msg_inputs() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz/ovsdb_msg");
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no inputs in {}", dir.display());
    for p in inputs {
        let data = std::fs::read(&p).unwrap();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Err(e) = std::panic::catch_unwind(|| ovsdb_msg::check_ovsdb_msg(&data)) {
            let msg = e
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| e.downcast_ref::<&str>().copied())
                .unwrap_or("");
            panic!("ovsdb_msg/{name}: {msg}");
        }
    }
}
