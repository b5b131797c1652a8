//! The switch's control commands, all registered on one control socket: each family's
//! module registers its own (`of_cmd`: OpenFlow tables and bridges; `group_cmd`: groups;
//! `meter_cmd`: meters; `dpctl_cmd`: the datapath and conntrack; `dpif_show_cmd`,
//! `port_stats_cmd`, `upcall_cmd`, `vlog_cmd`, `dummy_cmd`).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

/// The control commands, bound to a running datapath.
pub fn registry(
    dp: Arc<Mutex<Datapath>>,
    of: Arc<Ofproto>,
    base: &Path,
    stop: Arc<AtomicBool>,
    flow_limit: usize,
) -> Registry {
    let reg = Registry::new(format!("flowpath {}", env!("CARGO_PKG_VERSION")));
    crate::of_cmd::register(&reg, &of, &dp, base);
    crate::group_cmd::register(&reg, &of);
    crate::dummy_cmd::register(&reg, &of);
    crate::meter_cmd::register(&reg, &of, &dp);
    crate::dpif_show_cmd::register(&reg, &of, &dp);
    crate::port_stats_cmd::register(&reg, &of, &dp);
    crate::upcall_cmd::register(&reg, &of, &dp, flow_limit);
    crate::vlog_cmd::register(&reg);
    crate::dpctl_cmd::register(&reg, &dp, &of, stop);
    crate::top_cmd::register(&reg, &dp);
    reg
}
