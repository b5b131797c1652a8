//! Bonds of the userspace datapath: the `lb_output(ID)` action's tables (OVS's `tx_bonds` of
//! `dpif-netdev.c`), which let a balance-tcp bond output in one pass instead of hashing and
//! recirculating.
//!
//! The slow path gives each bond (by its id, the bond's recirculation id) the datapath port
//! of each of its [`BUCKETS`] hash buckets ([`DpBonds::set`], OVS's `dpif_bond_add()`); every
//! PMD gets the table as an `Arc` by command, so a change never stalls a PMD. A PMD sends a
//! packet to the port of bucket `hash & 0xff`, the hash being the packet's 5-tuple hash
//! ([`crate::rewrite::dp_hash_l4`] with basis 0: every packet of a connection takes the same
//! member), and counts the packets and bytes of each bucket ([`PmdBonds`]); the slow path
//! reads the bytes summed over the PMDs ([`crate::dpif::Datapath::bond_stats`], OVS's
//! `dpif_bond_stats_get()`) to rebalance.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Hash buckets of a bond (OVS's `BOND_BUCKETS`).
pub const BUCKETS: usize = 256;

/// The datapath port of no member: packets of such a bucket are dropped (OVS's `ODPP_NONE`).
pub const NO_MEMBER: u32 = u32::MAX;

/// Each bucket's member port.
pub type BucketMap = [u32; BUCKETS];

/// The bonds the slow path set, kept to seed PMDs that start later and for
/// `dpif-netdev/bond-show`.
#[derive(Default)]
pub struct DpBonds {
    by_id: BTreeMap<u32, Arc<BucketMap>>,
}

impl DpBonds {
    /// Sets bond `id`'s buckets; the table the PMDs are to be given.
    pub fn set(&mut self, id: u32, members: &BucketMap) -> Arc<BucketMap> {
        let m = Arc::new(*members);
        self.by_id.insert(id, m.clone());
        m
    }

    /// Removes bond `id`; whether it existed.
    pub fn del(&mut self, id: u32) -> bool {
        self.by_id.remove(&id).is_some()
    }

    /// Bond `id`'s buckets.
    pub fn get(&self, id: u32) -> Option<&Arc<BucketMap>> {
        self.by_id.get(&id)
    }

    /// Every bond by id, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Arc<BucketMap>)> {
        self.by_id.iter().map(|(&id, m)| (id, m))
    }
}

/// One bond as a PMD has it: the buckets' ports and what this PMD sent through each.
pub(crate) struct PmdBond {
    id: u32,
    pub(crate) members: Arc<BucketMap>,
    pub(crate) packets: Box<[u64; BUCKETS]>,
    pub(crate) bytes: Box<[u64; BUCKETS]>,
}

/// The bonds of one PMD (few: looked up by a linear scan).
#[derive(Default)]
pub struct PmdBonds {
    bonds: Vec<PmdBond>,
}

impl PmdBonds {
    /// Sets (`Some`) or removes bond `id` (a command from the main thread: it may allocate).
    /// A bond set again keeps its counters, as OVS's PMDs do when a bond's table changes.
    pub fn set(&mut self, id: u32, members: Option<Arc<BucketMap>>) {
        let at = self.bonds.iter().position(|b| b.id == id);
        match (members, at) {
            (Some(m), Some(i)) => self.bonds[i].members = m,
            (Some(m), None) => self.bonds.push(PmdBond {
                id,
                members: m,
                packets: Box::new([0; BUCKETS]),
                bytes: Box::new([0; BUCKETS]),
            }),
            (None, Some(i)) => {
                self.bonds.swap_remove(i);
            }
            (None, None) => {}
        }
    }

    /// Bond `id`, for the `lb_output` action.
    #[inline]
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut PmdBond> {
        self.bonds.iter_mut().find(|b| b.id == id)
    }

    /// The bytes this PMD sent through each bucket of bond `id`.
    pub fn bytes(&self, id: u32) -> Option<Box<[u64; BUCKETS]>> {
        self.bonds
            .iter()
            .find(|b| b.id == id)
            .map(|b| b.bytes.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bond_set_again_keeps_its_counters_and_removal_forgets_it() {
        let mut pmd = PmdBonds::default();
        let mut map = [1; BUCKETS];
        pmd.set(7, Some(Arc::new(map)));
        pmd.get_mut(7).unwrap().bytes[3] = 100;
        map[3] = 2;
        pmd.set(7, Some(Arc::new(map)));
        let b = pmd.get_mut(7).unwrap();
        assert_eq!((b.members[3], b.bytes[3]), (2, 100));
        assert_eq!(pmd.bytes(7).unwrap()[3], 100);
        pmd.set(7, None);
        assert!(pmd.bytes(7).is_none());
        pmd.set(8, None);
        assert!(pmd.get_mut(8).is_none());
    }

    #[test]
    fn the_datapath_keeps_the_tables_by_id() {
        let mut dp = DpBonds::default();
        dp.set(2, &[5; BUCKETS]);
        dp.set(1, &[NO_MEMBER; BUCKETS]);
        let ids: Vec<u32> = dp.iter().map(|(id, _)| id).collect();
        assert_eq!(ids, [1, 2]);
        assert_eq!(dp.get(2).unwrap()[0], 5);
        assert!(dp.del(2));
        assert!(!dp.del(2));
    }
}
