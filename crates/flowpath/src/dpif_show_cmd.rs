//! `dpif/show`, as OVS's `ofproto-dpif` prints it: the datapath's lookups, then every bridge
//! (by name) with its ports (by name), each with its OpenFlow and datapath numbers and its
//! type: `    br0 65534/3: (internal)`, `    p1 1/1: (dummy)`, a patch port
//! `    patch0 3/none: (patch: peer=patch1)`.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

/// Registers `dpif/show`.
pub fn register(reg: &Registry, of: &Arc<Ofproto>, dp: &Arc<Mutex<Datapath>>) {
    let (of, dp) = (of.clone(), dp.clone());
    let _ = reg.register("dpif/show", "", 0, 0, move |_| {
        let bridges = of.bridge_ports();
        let dp = crate::commands::lock_dp(&dp)?;
        let (hit, missed) = dp.hit_missed();
        let mut out = format!("netdev@flowpath: hit:{hit} missed:{missed}\n");
        for (bridge, ports) in bridges {
            let _ = writeln!(out, "  {bridge}:");
            for p in ports {
                let (no, kind) = match (p.dp_port, p.peer, of.tunnel_config(&bridge, p.ofport)) {
                    // A tunnel port: its own configuration, as OVS's tunnel netdev reports it.
                    (Some(n), _, Some(t)) => (
                        n.to_string(),
                        format!("{}: {}", t.kind.name(), t.dpif_show_config()),
                    ),
                    (Some(n), _, None) => (n.to_string(), dp.port_type(n).unwrap_or_default()),
                    (None, Some(peer), _) => ("none".to_owned(), format!("patch: peer={peer}")),
                    (None, None, _) => ("none".to_owned(), String::new()),
                };
                // LOCAL (0xfffe) prints as its number, as OVS's does.
                let _ = writeln!(out, "    {} {}/{no}: ({kind})", p.name, p.ofport);
            }
        }
        Ok(out)
    });
}
