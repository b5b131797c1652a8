//! Helpers shared by the integration tests: a private temporary directory and a registry with a
//! few commands.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use unixctl::Registry;

/// A fresh directory under the system temp dir, removed with everything in it on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        // Short names: socket paths must fit in sun_path.
        let dir = std::env::temp_dir().join(format!(
            "uctl-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn sock(&self) -> PathBuf {
        self.0.join("t.ctl")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `echo ARG...` joins its arguments with spaces, `fail [TEXT]` answers an error, `add A B`
/// adds two integers (or fails to parse them).
pub fn registry() -> Registry {
    let r = Registry::new("flowpath (test) 0.1.0");
    r.register("echo", "[ARG]...", 0, usize::MAX, |a| Ok(a.join(" ")))
        .unwrap();
    r.register("fail", "[TEXT]", 0, 1, |a| {
        Err(a.first().cloned().unwrap_or_else(|| "it failed".into()))
    })
    .unwrap();
    r.register("dpif/add", "A B", 2, 2, |a| {
        let n = |s: &String| s.parse::<i64>().map_err(|e| format!("{s}: {e}"));
        Ok((n(&a[0])? + n(&a[1])?).to_string())
    })
    .unwrap();
    r
}
