//! `memory/show`, as OVS's: the figures that memory use follows, `name:count` pairs sorted
//! by name on one line, those at zero left out (OVS's `memory_report()`).
//!
//! OVS's names, with flowpath's figures: `ports` and `rules` (OpenFlow ports and rules over
//! every bridge, every table), `udpif keys` (the datapath's megaflows, one per PMD that holds
//! it), `handlers` (flowpath has no handler threads: each PMD thread handles its own upcalls,
//! so the PMDs are counted), `revalidators` (one: the main thread's revalidator) and, under
//! `--ovsdb`, `idl-cells-Open_vSwitch` (the database replica's rows times columns). Then
//! flowpath's own, in the same style: `ct-connections`, `emc-entries` and `pmds`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

/// The cells of the Open_vSwitch database's replica, as the switch last read it
/// (0 without `--ovsdb`).
pub(crate) static IDL_CELLS: AtomicUsize = AtomicUsize::new(0);

/// Registers `memory/show`.
pub fn register(reg: &Registry, of: &Arc<Ofproto>, dp: &Arc<Mutex<Datapath>>) {
    let (of, dp) = (of.clone(), dp.clone());
    let _ = reg.register("memory/show", "", 0, 0, move |_| {
        let (ports, rules) = of.n_ports_rules();
        let d = crate::commands::lock_dp(&dp)?;
        let pmds = d.pmd_stats();
        let emc: usize = pmds.iter().map(|p| p.emc_entries).sum();
        let (keys, conns) = (d.n_flows(), d.conntrack().n_conns() as usize);
        drop(d);
        Ok(report(&[
            ("handlers", pmds.len()),
            ("idl-cells-Open_vSwitch", IDL_CELLS.load(Ordering::Relaxed)),
            ("ports", ports),
            ("revalidators", 1),
            ("rules", rules),
            ("udpif keys", keys),
            ("ct-connections", conns),
            ("emc-entries", emc),
            ("pmds", pmds.len()),
        ]))
    });
}

/// The figures as OVS prints them: sorted by name, `name:count` separated by spaces, zeros
/// left out.
fn report(figures: &[(&str, usize)]) -> String {
    let mut v: Vec<_> = figures.iter().filter(|(_, n)| *n > 0).collect();
    v.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = v
        .iter()
        .map(|(name, n)| format!("{name}:{n}"))
        .collect::<Vec<_>>()
        .join(" ");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_is_ovs_s_line() {
        // ovs-vswitchd 3.1 with one netdev bridge of two dummy ports.
        assert_eq!(
            report(&[
                ("rules", 5),
                ("ports", 3),
                ("udpif keys", 0),
                ("handlers", 1),
                ("revalidators", 1),
                ("idl-cells-Open_vSwitch", 210),
            ]),
            "handlers:1 idl-cells-Open_vSwitch:210 ports:3 revalidators:1 rules:5\n"
        );
        assert_eq!(
            report(&[("udpif keys", 2), ("ct-connections", 1)]),
            "ct-connections:1 udpif keys:2\n"
        );
    }
}
