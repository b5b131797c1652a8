//! The switch's control commands, all registered on one control socket: each family's
//! module registers its own (`of_cmd`: OpenFlow tables and bridges; `group_cmd`: groups;
//! `meter_cmd`: meters; `dpctl_cmd`: the datapath and conntrack; `dpif_show_cmd`,
//! `port_stats_cmd`, `upcall_cmd`, `vlog_cmd`, `dummy_cmd`; `coverage_cmd` and `memory_cmd`:
//! OVS's `coverage/show` and `memory/show`).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

/// The datapath, locked for a command (a poisoned lock is the command's error).
pub(crate) fn lock_dp(dp: &Mutex<Datapath>) -> Result<std::sync::MutexGuard<'_, Datapath>, String> {
    dp.lock().map_err(|_| "datapath lock poisoned".to_string())
}

/// The control commands, bound to a running datapath.
pub fn registry(
    dp: Arc<Mutex<Datapath>>,
    of: Arc<Ofproto>,
    base: &Path,
    stop: Arc<AtomicBool>,
) -> Registry {
    let reg = Registry::new(format!("flowpath {}", env!("CARGO_PKG_VERSION")));
    crate::of_cmd::register(&reg, &of, &dp, base);
    crate::group_cmd::register(&reg, &of);
    crate::dummy_cmd::register(&reg, &of);
    crate::meter_cmd::register(&reg, &of, &dp);
    crate::dpif_show_cmd::register(&reg, &of, &dp);
    crate::port_stats_cmd::register(&reg, &of, &dp);
    crate::upcall_cmd::register(&reg, &of, &dp);
    crate::bfd_cmd::register(&reg, &of);
    crate::lacp_cmd::register(&reg, &of);
    crate::bond_cmd::register(&reg, &of);
    crate::vlog_cmd::register(&reg);
    crate::coverage_cmd::register(&reg, &dp);
    crate::memory_cmd::register(&reg, &of, &dp);
    crate::dpctl_cmd::register(&reg, &dp, &of, stop);
    crate::top_cmd::register(&reg, &dp);
    reg
}
