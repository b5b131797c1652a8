//! The datapath's bond tables for `lb_output` (OVS's `dpif_bond_add()`/`dpif_bond_del()`):
//! brought in line with what the bonds say (members enabled, buckets) on each periodic sync
//! and whenever the bonds are configured. Only tables that changed are sent to the PMDs.
//! Before a bond rebalances, the bytes the datapath sent through each of its buckets go to
//! its accounting (OVS's `bond_recirculation_account()` with `dpif_bond_stats_get()`).

use std::sync::Mutex;

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;

/// Sets the datapath's bond tables to the bonds' that output with `lb_output`, and removes
/// the others.
pub(crate) fn sync(of: &Ofproto, dp: &Mutex<Datapath>) {
    let want = of.lb_output_tables();
    let Ok(mut dp) = dp.lock() else {
        return;
    };
    let have = dp.bonds();
    for (id, map) in &want {
        if !have.iter().any(|(h, m)| h == id && m == map) {
            dp.bond_set(*id, map);
        }
    }
    for (id, _) in have {
        if !want.iter().any(|(w, _)| *w == id) {
            dp.bond_del(id);
        }
    }
}

/// Gives each `lb_output` bond due to rebalance what the datapath counted for its buckets.
pub(crate) fn account(of: &Ofproto, dp: &Mutex<Datapath>) {
    for id in of.lb_output_due() {
        let totals = dp.lock().ok().and_then(|d| d.bond_stats(id));
        if let Some(t) = totals {
            of.account_lb_output(id, &t);
        }
    }
}
