//! The linear match tier: on a port whose few megaflows share one mask and differ in one key
//! word at most ([`LinearMatch`](crate::decap::LinearMatch)), a compare of the shared words and one slot picked by a
//! perfect hash of the word they differ in, instead of the EMC and dpcls. It is then the
//! port's whole classifier: a packet it does not find is a miss. Counted as megaflow hits,
//! one subtable lookup each (one mask, one subtable).
//!
//! On a port without decap megaflows, each key is compared as soon as extraction makes it, in
//! the same loop ([`Pmd::extract_linear`], cycles under `extract`); otherwise, and for a
//! recirculated batch that reuses its keys, after the decap fast path ([`Pmd::linear_match`],
//! cycles under `megaflow`).

use crate::packet::Batch;

use super::super::Pmd;
use super::super::extract::{extract_packet_unhashed, key_metadata_with};
use super::Pass;

impl Pmd {
    /// Extraction on a port whose megaflows the linear match holds and that has no decap
    /// megaflows: each key is looked up as soon as it is made, in the loop that makes it,
    /// rather than in a second loop over the batch; no hash. Returns the packets found (the
    /// pass's `early`), as a bit mask. Out of line, so that its loop has the registers to
    /// itself: in line, the spills around the call for an L3 packet's metadata words
    /// (`key_metadata_more`) cost MPLSoGRE's inner pass 7 instructions a packet.
    #[inline(never)]
    pub(in crate::pmd) fn extract_linear(
        &mut self,
        batch: &mut Batch,
        in_port: u32,
        ct_tuple: bool,
    ) -> Option<u32> {
        let Pmd {
            cls,
            keys,
            hits,
            stats,
            ..
        } = self;
        // Always there: `linear` says the port's classifier holds megaflows.
        let c = cls.port(in_port)?;
        let mut early = 0u32;
        for (i, p) in batch.packets_mut().iter_mut().enumerate() {
            let k = &mut keys[i];
            key_metadata_with(p, k, ct_tuple);
            extract_packet_unhashed(stats, p, k);
            let r = c.linear.lookup(k);
            hits[i] = r;
            early |= u32::from(r.is_some()) << i;
        }
        Some(early)
    }

    /// The linear match tier, on a port whose megaflows it holds: counts the hits extraction
    /// found, or looks up the packets no tier before found; what it does not find is a miss.
    #[inline(always)]
    pub(in crate::pmd) fn linear_match(&mut self, pass: &mut Pass) {
        if pass.looked {
            self.count_linear(pass.in_port, pass.early);
        } else if pass.linear && pass.todo != 0 {
            pass.todo = self.linear_lookup(pass.in_port, pass.todo);
        }
    }

    /// The linear match ([`LinearMatch`](crate::decap::LinearMatch)) of the packets `todo` (a bit mask) on `in_port`,
    /// whose megaflows it holds: each packet found gets its megaflow in `hits`. Returns the
    /// packets none matches, the misses.
    #[inline]
    pub(in crate::pmd) fn linear_lookup(&mut self, in_port: u32, todo: u32) -> u32 {
        let Pmd {
            cls, keys, hits, ..
        } = self;
        let Some(c) = cls.port_mut(in_port) else {
            return todo;
        };
        let mut misses = 0u32;
        let mut bits = todo;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let r = c.linear.lookup(&keys[i]);
            hits[i] = r;
            if r.is_none() {
                misses |= 1 << i;
            }
        }
        self.count_linear(in_port, todo & !misses);
        misses
    }

    /// Counts the linear match's hits `found` (a bit mask) on `in_port`.
    #[inline]
    pub(in crate::pmd) fn count_linear(&mut self, in_port: u32, found: u32) {
        let found = u64::from(found.count_ones());
        if let Some(c) = self.cls.port_mut(in_port) {
            // As the classifier counts its subtable lookups, for the hits: the megaflows
            // share one mask, one subtable.
            c.linear_lookups += found;
        }
        self.stats.megaflow_hits += found;
        self.count_cached(found);
    }
}
