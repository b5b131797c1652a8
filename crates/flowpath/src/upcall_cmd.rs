//! The upcall layer's control commands, as OVS names them: `upcall/show`,
//! `upcall/disable-megaflows` and `upcall/enable-megaflows` (OVS's test suite turns megaflows
//! off to see each packet's exact flow).

use std::sync::{Arc, Mutex};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

/// Registers the upcall commands; `flow_limit` is the datapath's (`flow-limit`).
pub fn register(reg: &Registry, of: &Arc<Ofproto>, dp: &Arc<Mutex<Datapath>>, flow_limit: usize) {
    let (of2, dp2) = (of.clone(), dp.clone());
    let _ = reg.register("upcall/show", "", 0, 0, move |_| {
        let n = lock(&dp2)?.n_flows();
        Ok(of2.upcall_show("netdev@flowpath", flow_limit, n))
    });
    for (name, on) in [
        ("upcall/disable-megaflows", false),
        ("upcall/enable-megaflows", true),
    ] {
        let (of2, dp2) = (of.clone(), dp.clone());
        let _ = reg.register(name, "", 0, 0, move |_| {
            // As OVS: every datapath flow goes, so the next packets install flows of the new
            // kind.
            of2.set_megaflows(on);
            lock(&dp2)?.del_flows();
            Ok(format!(
                "megaflows {}\n",
                if on { "enabled" } else { "disabled" }
            ))
        });
    }
}

fn lock(dp: &Arc<Mutex<Datapath>>) -> Result<std::sync::MutexGuard<'_, Datapath>, String> {
    dp.lock().map_err(|_| "datapath lock poisoned".to_string())
}
