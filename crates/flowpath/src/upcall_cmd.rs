//! The upcall layer's control commands, as OVS names them: `upcall/show`,
//! `upcall/disable-megaflows` and `upcall/enable-megaflows` (OVS's test suite turns megaflows
//! off to see each packet's exact flow), and the revalidator's `revalidator/wait` and
//! `revalidator/purge`.

use std::sync::{Arc, Mutex};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

/// Registers the upcall commands; `flow_limit` is the datapath's (`flow-limit`).
pub fn register(reg: &Registry, of: &Arc<Ofproto>, dp: &Arc<Mutex<Datapath>>, flow_limit: usize) {
    register_revalidator(reg, of, dp);
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

/// Registers `revalidator/wait` (a revalidation round, done before the reply: every megaflow
/// checked against the tables as they are, the OpenFlow rules' statistics brought up to date)
/// and `revalidator/purge` (that round, then every datapath flow removed), as OVS's.
fn register_revalidator(reg: &Registry, of: &Arc<Ofproto>, dp: &Arc<Mutex<Datapath>>) {
    for (name, purge) in [("revalidator/wait", false), ("revalidator/purge", true)] {
        let (of2, dp2) = (of.clone(), dp.clone());
        let _ = reg.register(name, "", 0, 0, move |_| {
            let mut d = lock(&dp2)?;
            of2.revalidate(&mut d);
            if purge {
                d.del_flows();
            }
            Ok(String::new())
        });
    }
}

fn lock(dp: &Arc<Mutex<Datapath>>) -> Result<std::sync::MutexGuard<'_, Datapath>, String> {
    dp.lock().map_err(|_| "datapath lock poisoned".to_string())
}
