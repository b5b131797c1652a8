//! The upcall layer's control commands, as OVS names them: `upcall/show`,
//! `upcall/disable-megaflows` and `upcall/enable-megaflows` (OVS's test suite turns megaflows
//! off to see each packet's exact flow), and the revalidator's `revalidator/wait` and
//! `revalidator/purge`.

use std::sync::{Arc, Mutex};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

use crate::commands::lock_dp;

/// Registers the upcall commands.
pub fn register(reg: &Registry, of: &Arc<Ofproto>, dp: &Arc<Mutex<Datapath>>) {
    register_revalidator(reg, of, dp);
    let (of2, dp2) = (of.clone(), dp.clone());
    let _ = reg.register("upcall/show", "", 0, 0, move |_| {
        let d = lock_dp(&dp2)?;
        // The limit the PMDs hold now: OVSDB's `other_config:flow-limit` changes it at run
        // time.
        let (n, limit) = (d.n_flows(), d.pmd_config().flow_limit);
        drop(d);
        Ok(of2.upcall_show("netdev@flowpath", limit, n))
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
            lock_dp(&dp2)?.del_flows();
            crate::coverage_cmd::DPIF_FLOW_FLUSH.inc();
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
            let mut d = lock_dp(&dp2)?;
            of2.revalidate(&mut d);
            if purge {
                d.del_flows();
                crate::coverage_cmd::DPIF_FLOW_FLUSH.inc();
            }
            Ok(String::new())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datapath::dpif::{DatapathBuilder, DpConfig};

    #[test]
    fn upcall_show_gives_the_flow_limit_the_datapath_holds_now() {
        let mut cfg = DpConfig::default();
        cfg.pmd.flow_limit = 200_000;
        let dp = DatapathBuilder::new(cfg).start().unwrap();
        let dp = Arc::new(Mutex::new(dp));
        let reg = Registry::new("test");
        register(&reg, &Ofproto::new(), &dp);
        let show = |reg: &Registry| reg.dispatch::<&str>("upcall/show", &[]).unwrap();
        assert!(show(&reg).contains("(limit 200000)\n"), "{}", show(&reg));
        // As `other_config:flow-limit` sets it.
        dp.lock().unwrap().set_flow_limit(1234);
        assert!(show(&reg).contains("(limit 1234)\n"), "{}", show(&reg));
    }
}
