//! Helpers shared by the `flowpath` binary's integration tests.
#![allow(dead_code)] // Each test binary uses part of it.

use std::path::Path;
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
