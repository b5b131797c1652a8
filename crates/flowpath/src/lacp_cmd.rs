//! The LACP commands, as OVS's `lib/lacp.c` registers them: `lacp/show [PORT]` and
//! `lacp/show-stats [PORT]` (every bond or Port with LACP, or one; `no such lacp object`).

use std::sync::Arc;

use ofproto::lacp::{Lacp, show};
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

/// Registers the LACP commands.
pub fn register(reg: &Registry, of: &Arc<Ofproto>) {
    for (name, print) in [
        ("lacp/show", show::details as fn(&Lacp) -> String),
        ("lacp/show-stats", show::stats),
    ] {
        let of2 = of.clone();
        let _ = reg.register(name, "[port]", 0, 1, move |args| {
            let all = of2.lacps();
            match args.first() {
                Some(port) => all
                    .iter()
                    .find(|l| &l.name == port)
                    .map(print)
                    .ok_or_else(|| "no such lacp object".to_owned()),
                None => Ok(all.iter().map(print).collect()),
            }
        });
    }
}
