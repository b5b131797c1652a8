//! With the feature `link` (what `netdev`'s feature `dpdk` turns on): compiles `shim.c`
//! against the system's DPDK (>= 22.11), found with `pkg-config libdpdk`, and links DPDK's
//! shared libraries; the PMDs are plugins that DPDK's EAL loads itself. Without it, nothing:
//! the crate is then only declarations, so that building the whole workspace does not need
//! DPDK.

use std::process::Command;

fn pkg_config(args: &[&str]) -> String {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("libdpdk")
        .output()
        .unwrap_or_else(|e| {
            panic!("dpdk-sys: cannot run pkg-config ({e}): install pkg-config and libdpdk-dev")
        });
    if !out.status.success() {
        panic!(
            "dpdk-sys: `pkg-config {} libdpdk` failed: install libdpdk-dev (DPDK >= 22.11)\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8(out.stdout).expect("pkg-config prints UTF-8")
}

fn main() {
    if std::env::var_os("CARGO_FEATURE_LINK").is_none() {
        return;
    }
    println!("cargo:rerun-if-changed=shim.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    pkg_config(&["--atleast-version=22.11"]);
    let mut cc = cc::Build::new();
    cc.file("shim.c")
        .warnings(true)
        .flag_if_supported("-Wno-unused-parameter");
    // The cflags come as they are: `-include rte_config.h` and `-march=...` are needed, and
    // they are not `-I` paths.
    let cflags = pkg_config(&["--cflags"]);
    let mut flags = cflags.split_whitespace();
    while let Some(f) = flags.next() {
        if let Some(dir) = f.strip_prefix("-I") {
            cc.include(dir);
        } else if f == "-include" {
            let file = flags.next().expect("-include takes a file");
            cc.flag("-include").flag(file);
        } else {
            cc.flag(f);
        }
    }
    cc.compile("flowpath_dpdk_shim");
    for f in pkg_config(&["--libs"]).split_whitespace() {
        if let Some(dir) = f.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = f.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={lib}");
        }
    }
}
