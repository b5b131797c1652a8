//! Asking for tunnel next hops ahead of traffic: when a tunnel port's remote becomes
//! routable (a port added, an address given to the underlay bridge's device) and its next
//! hop's Ethernet address is unknown, the switch sends the ARP request or neighbour
//! solicitation at once, from the underlay bridge, instead of when the first packet needs it.
//! `ovs-vswitchd` asks only on demand and drops the packets that find no entry; asking ahead
//! spares those first packets (a mirror's first copies, a tunnel's first pings). The reply is
//! snooped as any other; an unanswered next hop is asked again at most once a second.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;

/// How often one next hop is asked for while it does not answer.
const RETRY: Duration = Duration::from_secs(1);

/// The next hops asked for, and when.
#[derive(Default)]
pub(crate) struct TunnelNeighbours {
    asked: HashMap<IpAddr, Instant>,
}

impl TunnelNeighbours {
    /// Asks for every unresolved tunnel next hop not asked for in the last second.
    pub fn solicit(&mut self, of: &Ofproto, dp: &Mutex<Datapath>) {
        let now = Instant::now();
        let todo = of.unresolved_tunnel_neighbours();
        self.asked.retain(|ip, at| {
            now.duration_since(*at) < RETRY && todo.iter().any(|n| n.next_hop == *ip)
        });
        for n in todo {
            if self.asked.contains_key(&n.next_hop) {
                continue;
            }
            let frame = ofproto::tunnel::neigh_request(n.smac, n.src, n.next_hop);
            if crate::ofserver::send_from_local(of, dp, &n.bridge, frame).is_ok() {
                self.asked.insert(n.next_hop, now);
            }
        }
    }
}
