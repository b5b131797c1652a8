//! The megaflow classifier tier: the in_port's dpcls ([`crate::dpcls`], OVS's
//! `fast_path_processing` and `dpcls_lookup`), a batch lookup of the packets no tier before
//! found, subtables in rank order; each hit is entered in the EMC (with its insertion
//! probability). Not on a port the linear match holds. Counted as `megaflow_hits` and
//! `subtable_lookups`, its cycles under `megaflow`.

use crate::packet::MAX_BURST;

use super::super::Pmd;
use super::Pass;

impl Pmd {
    /// The dpcls tier: looks up the packets no tier before found in the in_port's
    /// classifier, each hit's megaflow into `hits` and the EMC.
    #[inline(always)]
    pub(in crate::pmd) fn dpcls_lookup(&mut self, pass: &mut Pass) {
        if pass.linear || pass.todo == 0 {
            return;
        }
        let Pmd {
            cls,
            keys,
            hits,
            emc,
            hashes,
            ..
        } = self;
        let Some(c) = cls.get_mut(pass.in_port) else {
            return;
        };
        let mut refs = [&keys[0]; MAX_BURST];
        let mut idx = [0usize; MAX_BURST];
        let mut m = 0;
        let mut bits = pass.todo;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            refs[m] = &keys[i];
            idx[m] = i;
            m += 1;
        }
        let mut out = [None; MAX_BURST];
        let found = c.lookup_batch(&refs[..m], &mut out[..m]);
        if found > 0 {
            for j in 0..m {
                if let Some(r) = out[j] {
                    let i = idx[j];
                    hits[i] = Some(r);
                    pass.todo &= !(1 << i);
                    emc.insert(&keys[i], hashes[i], r);
                }
            }
            self.stats.megaflow_hits += found as u64;
            self.count_cached(found as u64);
        }
    }
}
