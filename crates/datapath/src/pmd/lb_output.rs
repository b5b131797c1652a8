//! The `lb_output(ID)` action (OVS's `dp_execute_lb_output_action`): each packet to the
//! member port of its bucket in bond ID's table ([`crate::bond`]), the bucket being the low
//! bits of its 5-tuple hash; the bucket's packets and bytes are counted for the slow path's
//! rebalancing. A bond the datapath does not know sends nothing (the packets go on, and are
//! dropped if this was the last action); a packet whose bucket has no member, or whose
//! member has no port here, is dropped (`action_drops`).

use crate::bond::BUCKETS;
use crate::packet::Batch;

use super::Pmd;
use super::output::put_one;

impl Pmd {
    /// Sends `batch`'s packets (copies unless `consume` and nothing truncates) to the members
    /// of bond `id`.
    pub(super) fn lb_output(
        &mut self,
        id: u32,
        batch: &mut Batch,
        consume: bool,
        trunc: Option<u32>,
    ) {
        if self.bonds.get_mut(id).is_none() {
            return;
        }
        let mut src = if consume && trunc.is_none() {
            std::mem::take(batch)
        } else {
            self.copy_batch(batch, trunc)
        };
        let Some(bond) = self.bonds.get_mut(id) else {
            return;
        };
        for p in src.drain() {
            let bucket = crate::rewrite::dp_hash_l4(&p, false, 0) as usize & (BUCKETS - 1);
            let port = bond.members[bucket] as usize;
            let Some(Some(tx)) = self.txs.get_mut(port) else {
                self.stats.action_drops += 1;
                self.pool.free(p);
                continue;
            };
            bond.packets[bucket] += 1;
            bond.bytes[bucket] += p.len() as u64;
            put_one(tx, p, &mut self.pool, &mut self.stats);
        }
        if consume && trunc.is_none() {
            *batch = src;
        } else {
            self.recycle(src);
        }
    }
}
