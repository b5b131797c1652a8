//! Concurrent writers: while `ovs-vsctl --timeout=5` adds and deletes ports one call at a
//! time (so flowpath reconfigures and writes its columns all along), two Python IDL clients
//! (`python3-openvswitch`) write their own keys into the Open_vSwitch row, a bridge and its
//! ports. flowpath must never clobber a column it does not own, and no `ovs-vsctl` call may
//! time out. The check is `scripts/ovsdb-idl-writers`; this runs it against this build.
//! Skipped, with the reason printed, without OVS's tools or the Python IDL.

mod common;

use std::path::Path;
use std::process::Command;

use common::ovsdb::{Switch, missing};

/// Debian's interpreter, which has `python3-openvswitch` (another `python3` may come first on
/// PATH).
const PYTHON: &str = "/usr/bin/python3";

/// Why the Python IDL cannot be used here, if it cannot.
fn no_python_idl() -> Option<String> {
    match Command::new(PYTHON)
        .args(["-c", "import ovs.db.idl"])
        .output()
    {
        Ok(o) if o.status.success() => None,
        Ok(_) => Some(format!("{PYTHON} has no ovs.db.idl (python3-openvswitch)")),
        Err(e) => Some(format!("{PYTHON}: {e}")),
    }
}

#[test]
fn idl_writers_and_ovs_vsctl_keep_their_columns_while_flowpath_reconfigures() {
    if let Some(why) = missing(Switch::Flowpath).or_else(no_python_idl) {
        eprintln!("skipped: {why}");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ovsdb-idl-writers");
    let out = Command::new(PYTHON)
        .arg(script)
        .args(["--flowpath", env!("CARGO_BIN_EXE_flowpath")])
        .args(["--seconds", "10"])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("all writes kept"), "{text}");
    assert!(text.contains(", 0 failed"), "{text}");
}
