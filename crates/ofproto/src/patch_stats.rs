//! Patch ports' counters. A patch port has no device: a packet "sent" by one end is received
//! by its peer inside translation (`xlate::Ctx::output_port`), so the datapath counts nothing
//! for either. As `ovs-vswitchd` does (`patch_port_output()` crediting both ends' netdevs
//! with the packets a translation carried across), the packets and bytes of every megaflow
//! that crosses a patch pair are counted here as sent by one end and received by the other:
//! the missed packet when it is translated, the megaflow's packets when the revalidator reads
//! its statistics. Counters are kept by interface name (OVS's interface names are unique
//! across bridges) and go with the port.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::xlate::Pipeline;

/// One patch port's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PatchCounts {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

/// The counters of every patch port, by name.
#[derive(Debug, Default)]
pub struct PatchStats {
    counts: Mutex<HashMap<String, PatchCounts>>,
}

impl PatchStats {
    /// Port `name`'s counters (zero for a port nothing crossed yet).
    pub fn get(&self, name: &str) -> PatchCounts {
        self.lock().get(name).copied().unwrap_or_default()
    }

    /// Forgets the counters of ports that are no longer patch ports of `p`'s bridges, so that
    /// a port deleted and added again starts from zero, as a new port does in OVS.
    pub fn prune(&self, p: &Pipeline) {
        self.lock().retain(|name, _| {
            p.bridges
                .iter()
                .any(|b| b.port_by_name(name).is_some_and(|port| port.peer.is_some()))
        });
    }

    /// Forgets port `name`'s counters (it is being deleted): a port added again under the
    /// name before the next [`PatchStats::prune`] starts from zero too.
    pub fn forget(&self, name: &str) {
        self.lock().remove(name);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PatchCounts>> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Credits the patch pairs a megaflow crossed, `crossed` as (bridge index, OpenFlow port of
/// the sending end), with its packets: sent by that end, received by its peer.
pub(crate) fn credit_patches(p: &Pipeline, crossed: &[(usize, u32)], packets: u64, bytes: u64) {
    if crossed.is_empty() {
        return;
    }
    let mut counts = p.patch_stats.lock();
    for &(b, ofport) in crossed {
        let Some(port) = p.bridges.get(b).and_then(|br| br.ports.get(&ofport)) else {
            continue;
        };
        let Some(peer) = port.peer.as_deref() else {
            continue;
        };
        let tx = entry(&mut counts, &port.name);
        tx.tx_packets += packets;
        tx.tx_bytes += bytes;
        let rx = entry(&mut counts, peer);
        rx.rx_packets += packets;
        rx.rx_bytes += bytes;
    }
}

/// Port `name`'s counters, made on its first crossing (the name is copied only then: this
/// runs for every megaflow through a patch pair each revalidation round).
fn entry<'a>(counts: &'a mut HashMap<String, PatchCounts>, name: &str) -> &'a mut PatchCounts {
    if !counts.contains_key(name) {
        counts.insert(name.to_owned(), PatchCounts::default());
    }
    counts.get_mut(name).expect("inserted above")
}

#[cfg(test)]
mod tests {
    use crate::bridge::{OfPort, VlanMode};
    use crate::ofproto::Ofproto;

    fn patch(name: &str, ofport: u32, peer: &str) -> OfPort {
        OfPort {
            name: name.into(),
            ofport,
            dp_port: None,
            peer: Some(peer.into()),
            vlan: VlanMode::default(),
        }
    }

    #[test]
    fn a_patch_port_deleted_and_added_again_at_once_starts_from_zero() {
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        of.add_bridge("br1").unwrap();
        of.add_port("br0", patch("pa", 2, "pb")).unwrap();
        of.add_port("br1", patch("pb", 2, "pa")).unwrap();
        {
            let p = of.pipe.read().unwrap();
            super::credit_patches(&p, &[(0, 2)], 3, 318);
        }
        assert_eq!(of.pipe.read().unwrap().patch_stats.get("pb").rx_packets, 3);
        // No revalidation round (which prunes) between the two.
        of.del_port("pb").unwrap();
        of.add_port("br1", patch("pb", 2, "pa")).unwrap();
        let pb = of.pipe.read().unwrap().patch_stats.get("pb");
        assert_eq!(pb, super::PatchCounts::default());
    }
}
