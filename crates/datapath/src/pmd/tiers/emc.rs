//! The EMC tier: the exact-match cache ([`crate::emc`], OVS's `emc_lookup` in
//! `dfc_processing`), a full key compare at the slot the packet's hash picks, for the packets
//! no tier before found. Not on a port the linear match holds (that compare stands in for
//! it), nor when `emc-insert-inv-prob` is 0. Entries are made by the dpcls tier and the
//! upcall. Counted as `emc_hits`, its cycles under `emc`.

use crate::packet::Batch;

use super::super::Pmd;
use super::Pass;

impl Pmd {
    /// The EMC tier: looks up the packets no tier before found (hashing those extraction
    /// left without), each hit's megaflow into `hits`.
    #[inline(always)]
    pub(in crate::pmd) fn emc_lookup(&mut self, batch: &mut Batch, pass: &mut Pass) {
        if pass.linear {
            return;
        }
        let todo = pass.todo;
        if !self.emc.is_enabled() {
            for i in 0..pass.n {
                if todo & (1 << i) != 0 {
                    self.hits[i] = None;
                }
            }
            return;
        }
        if self.unhashed {
            self.hash_now(batch, todo);
        }
        let mut misses = 0u32;
        let Pmd {
            emc,
            flows,
            keys,
            hashes,
            hits,
            ..
        } = self;
        if todo == pass.all() {
            for i in 0..pass.n {
                hits[i] = emc.lookup(&keys[i], hashes[i], |r| flows.is_live(r));
                if hits[i].is_none() {
                    misses |= 1 << i;
                }
            }
        } else {
            let mut bits = todo;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                hits[i] = emc.lookup(&keys[i], hashes[i], |r| flows.is_live(r));
                if hits[i].is_none() {
                    misses |= 1 << i;
                }
            }
        }
        let emc_hits = u64::from((todo & !misses).count_ones());
        self.stats.emc_hits += emc_hits;
        self.count_cached(emc_hits);
        pass.todo = misses;
    }
}
