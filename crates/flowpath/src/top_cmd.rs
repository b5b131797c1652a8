//! `top/snapshot` (beyond OVS): every counter `flowpath top` draws — per PMD thread, per port,
//! drops by reason, megaflows — and the switch's uptime, in one JSON object, so that the view
//! reads one reply a second instead of parsing several reports' text.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use datapath::dpif::Datapath;
use unixctl::Registry;

use crate::top::snapshot::Snapshot;

/// Registers `top/snapshot`; the switch's uptime counts from now.
pub fn register(reg: &Registry, dp: &Arc<Mutex<Datapath>>) {
    let started = Instant::now();
    let dp = dp.clone();
    let _ = reg.register("top/snapshot", "", 0, 0, move |_| {
        let dp = crate::commands::lock_dp(&dp)?;
        let snap = Snapshot::read(&dp, || started.elapsed().as_secs_f64());
        serde_json::to_string(&snap).map_err(|e| e.to_string())
    });
}
