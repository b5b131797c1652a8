//! The tunnel next hops whose link-layer address is not known yet, for the switch to ask for
//! before the first packet needs one ([`Ofproto::unresolved_tunnel_neighbours`]).

use std::net::IpAddr;

use flow::EthAddr;

use super::Ofproto;
use crate::tunnel::FlowOr;

/// A next hop to ask for: on underlay bridge `bridge`, from its address `src` and Ethernet
/// address `smac`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourToAsk {
    pub bridge: String,
    pub smac: EthAddr,
    pub src: IpAddr,
    pub next_hop: IpAddr,
}

impl Ofproto {
    /// The next hops of the tunnel ports with a fixed `remote_ip` that route through a bridge
    /// with an Ethernet address and whose neighbour entry is missing, each once.
    pub fn unresolved_tunnel_neighbours(&self) -> Vec<NeighbourToAsk> {
        let p = self.read();
        let mut out: Vec<NeighbourToAsk> = Vec::new();
        for br in &p.bridges {
            for t in br.tunnels.values() {
                let FlowOr::Fixed(remote) = t.remote_ip else {
                    continue;
                };
                let Some(route) = p.underlay.route(&p.bridges, remote) else {
                    continue;
                };
                if p.underlay.lookup_neigh(route.next_hop).is_some()
                    || out.iter().any(|n| n.next_hop == route.next_hop)
                {
                    continue;
                }
                let Some(smac) = p.bridge(&route.bridge).and_then(|b| b.hwaddr) else {
                    continue;
                };
                out.push(NeighbourToAsk {
                    bridge: route.bridge,
                    smac,
                    src: route.src,
                    next_hop: route.next_hop,
                });
            }
        }
        out
    }
}
