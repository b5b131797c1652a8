//! Set-up shared by ofproto's integration tests.
#![allow(dead_code)] // Each test binary uses part of it.

use std::sync::Arc;

use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;

/// A switch with bridge `br0` and ports `p1`..`pN`, each with OpenFlow and datapath port
/// number `1..=n`, and the bridge's default flows.
pub fn bridge_with_ports(n: u32) -> Arc<Ofproto> {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    for k in 1..=n {
        let p = OfPort {
            name: format!("p{k}"),
            ofport: k,
            dp_port: Some(k),
            peer: None,
            vlan: VlanMode::default(),
        };
        of.add_port("br0", p).unwrap();
    }
    of
}

/// [`bridge_with_ports`] with `flows` in place of the default flows.
pub fn switch_with_flows(n: u32, flows: &[&str]) -> Arc<Ofproto> {
    let of = bridge_with_ports(n);
    of.del_flows("br0", None, false).unwrap();
    for f in flows {
        of.add_flow("br0", f).unwrap();
    }
    of
}
