//! Replays the committed fuzz inputs (`tests/data/fuzz/<target>/*`: crash inputs the fuzzers
//! found, and inputs that reach deep paths) through the same invariant checks the fuzz targets
//! run. The checks live in `fuzz/src/lib.rs`, path-imported here so that both use one copy.

#[allow(dead_code)]
#[path = "../../../fuzz/src/lib.rs"]
mod fuzz_checks;

use std::path::PathBuf;

/// The inputs of one fuzz target, sorted by name.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz")
        .join(target);
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no inputs in {}", dir.display());
    out
}

/// Runs `check` on every input of `target`, naming the input that fails.
fn replay(target: &str, check: fn(&[u8])) {
    for (name, data) in inputs(target) {
        if let Err(e) = std::panic::catch_unwind(|| check(&data)) {
            let msg = e
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| e.downcast_ref::<&str>().copied())
                .unwrap_or("");
            panic!("{target}/{name}: {msg}");
        }
    }
}

#[test]
fn extract_inputs() {
    replay("extract", fuzz_checks::check_extract);
}

#[test]
fn odp_parse_inputs() {
    replay("odp_parse", fuzz_checks::check_odp);
}
