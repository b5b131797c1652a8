//! Helpers shared by the `flowpath` binary's integration tests.
#![allow(dead_code)] // Each test binary uses part of it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `flowpath check-config FILE` on a configuration with one port `port` of `kind` and
/// `options` (a TOML inline table's body): exit code and stderr.
pub fn check_config(dir: &Path, port: &str, kind: &str, options: &str) -> (Option<i32>, String) {
    let f = dir.join("check.toml");
    std::fs::write(
        &f,
        format!(
            "[[bridge]]\nname = \"br0\"\n\n[[bridge.port]]\nname = \"{port}\"\n\
             type = \"{kind}\"\noptions = {{ {options} }}\n"
        ),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .arg("check-config")
        .arg(&f)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A scratch directory, emptied now and removed when the guard goes.
pub fn scratch_dir(name: &str) -> (PathBuf, RmDir) {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (dir.clone(), RmDir(dir))
}

/// Removes its directory on drop.
pub struct RmDir(PathBuf);

impl Drop for RmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
