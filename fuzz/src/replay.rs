//! Replays the committed inputs of a fuzz target in plain `cargo test`: each crate's
//! `tests/fuzz_regressions.rs` path-imports this file and the target's checks, and runs the
//! checks on every file under `tests/data/fuzz/<target>/` (the crash inputs the fuzzer found,
//! and inputs that reach deep paths), naming the input that fails.

use std::path::Path;

/// Runs `check` on every input of `target` under `crate_dir/tests/data/fuzz/`, in name order.
pub fn replay(crate_dir: &str, target: &str, check: impl Fn(&[u8])) {
    let dir = Path::new(crate_dir).join("tests/data/fuzz").join(target);
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no inputs in {}", dir.display());
    for path in inputs {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let run = std::panic::AssertUnwindSafe(|| check(&data));
        if let Err(e) = std::panic::catch_unwind(run) {
            let msg = e
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| e.downcast_ref::<&str>().copied())
                .unwrap_or("");
            panic!("{target}/{}: {msg}", path.display());
        }
    }
}
