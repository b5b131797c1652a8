//! A bridge's Ports of one Interface with LACP ([`crate::lacp_port`]): set by configuration,
//! run with their interface's carrier (each run also decides whether the port is live), and
//! what they receive and send.

use std::time::Instant;

use super::Ofproto;
use crate::bridge::Bridge;
use crate::lacp::Lacp;
use crate::lacp_port::{LacpPort, LacpPortConfig};

impl Ofproto {
    /// Sets bridge `bridge`'s Ports of one Interface with LACP to `configs`. A port that
    /// stays (by name) keeps its LACP state. Whether anything changed.
    pub fn set_lacp_ports(
        &self,
        bridge: &str,
        configs: Vec<LacpPortConfig>,
    ) -> Result<bool, String> {
        let now = Instant::now();
        {
            let mut p = self.write();
            let b = p
                .bridge_mut(bridge)
                .ok_or_else(|| format!("no bridge named {bridge}"))?;
            let unchanged = b.lacp_ports.len() == configs.len()
                && b.lacp_ports
                    .iter()
                    .zip(&configs)
                    .all(|(o, c)| &o.config == c);
            if unchanged {
                return Ok(false);
            }
            let old = std::mem::take(&mut b.lacp_ports);
            b.lacp_ports = configs
                .into_iter()
                .map(|c| {
                    let mut port = LacpPort::new(c);
                    if let Some(o) = old.iter().find(|o| o.config.name == port.config.name) {
                        port.keep_state(o);
                    }
                    port
                })
                .collect();
            // A port that no longer runs LACP is live again as far as LACP goes.
            for o in &old {
                let gone = !b.lacp_ports.iter().any(|n| n.ofport == o.ofport);
                if let Some(n) = o.ofport.filter(|_| gone) {
                    b.port_config.entry(n).or_default().lacp_down = false;
                }
            }
            run_bridge_lacp_ports(b, now);
        }
        self.changed();
        Ok(true)
    }

    /// Every LACP, of bonds and of single-interface Ports, in bridge order (a bridge's bonds
    /// first), for `lacp/show`.
    pub fn lacps(&self) -> Vec<Lacp> {
        let p = self.read();
        let mut out = Vec::new();
        for b in &p.bridges {
            out.extend(b.bonds.iter().filter_map(|d| d.lacp.clone()));
            out.extend(b.lacp_ports.iter().map(|l| l.lacp.clone()));
        }
        out
    }
}

impl Bridge {
    /// `lacp_current` of interface `name`: whether the LACP of its bond or single-interface
    /// Port has (or had) a partner on it; `None` without LACP. A method of the bridge: its
    /// callers already hold the pipeline.
    pub fn lacp_current(&self, name: &str) -> Option<bool> {
        (self.bonds.iter().find_map(|d| d.lacp_current(name)))
            .or_else(|| self.lacp_ports.iter().find_map(|l| l.lacp_current(name)))
    }
}

/// Runs the single-interface LACP Ports of `b`; each one's OpenFlow port is live only while
/// LACP lets it carry traffic. Whether any port's liveness changed.
pub(super) fn run_bridge_lacp_ports(b: &mut Bridge, now: Instant) -> bool {
    let mut changed = false;
    for i in 0..b.lacp_ports.len() {
        let ofport = b.port_number(&b.lacp_ports[i].config.member);
        let carrier = ofport.is_some_and(|n| !b.port_config(n).link_down);
        let may = b.lacp_ports[i].run(now, ofport, carrier);
        if let Some(n) = ofport {
            let c = b.port_config.entry(n).or_default();
            // Without carrier the port is down anyway; LACP's say counts with carrier only.
            let down = carrier && !may;
            changed |= c.lacp_down != down;
            c.lacp_down = down;
        }
    }
    changed
}

/// The single-interface LACP Port of `b` whose interface has OpenFlow port `ofport`.
pub(super) fn lacp_port_on(b: &mut Bridge, ofport: u32) -> Option<&mut LacpPort> {
    b.lacp_ports.iter_mut().find(|l| l.ofport == Some(ofport))
}
