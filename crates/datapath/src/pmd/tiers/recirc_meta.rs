//! The metadata match of a recirculated batch: the linear match of a pass that takes its keys
//! from the pass before (its whole batch, found in one megaflow, sent on by `recirc` after
//! `ct()` without NAT, its headers untouched), on a port whose megaflows the linear match
//! holds and that has no decap megaflows.
//!
//! Every packet's key matched that megaflow (`from`) in the pass before, and its packet words
//! have not changed since. So a packet whose metadata words (in_port, recirc_id, dp_hash,
//! mark, packet type, connection state, zone, mark and label) are the first packet's matches
//! the megaflow the first packet's key finds (`to`) as soon as it agrees with `to` on the
//! words of `to`'s mask that `from`'s does not cover: it agrees on the others with the first
//! packet, as both agree with `from`. Those words are none when both passes match the same
//! headers (the anchor's `ct` pipeline), one when the later pass looks at a field more (OVN's
//! `ipv4(proto=17)`). Such a packet's key keeps its metadata words of the pass before (only
//! its TCP flags are read after the lookup, and a next pass makes them again), and is not
//! compared with the port's masks in turn. A packet whose metadata differ (a connection in
//! another state, another zone's mark) gets its metadata words and the whole linear match,
//! as does every packet when the first one finds no megaflow (it then misses, as before).
//!
//! Megaflow hits as the linear match's, one subtable lookup each; cycles under `extract`.
//! The pass is counted, and its megaflow's statistics updated, as for any other pass.

use flow::Match;
use flow::key::PACKET_WORDS;

use crate::flow_table::FlowRef;
use crate::packet::{Batch, TnlMd};

use super::super::Pmd;
use super::super::extract::{key_metadata_add, same_key_metadata};
use super::masked_words::MaskedWords;

/// For a pair of megaflows, one a batch was found in and the one its next pass finds: the
/// words of the second's mask that the first's does not cover, which a packet of the batch
/// must still agree with ([`Pmd::recirc_meta_match`]).
#[derive(Clone, Debug)]
pub(in crate::pmd) struct MetaSplit {
    from: FlowRef,
    to: FlowRef,
    /// `None` when they are too many for the short compare (the metadata match is then not
    /// used for this pair).
    rest: Option<MaskedWords>,
}

impl MetaSplit {
    /// The split of `to` (match `t`) after `from` (match `f`).
    fn new(from: FlowRef, f: &Match, to: FlowRef, t: &Match) -> MetaSplit {
        let (fm, tm) = (f.mask(), t.mask());
        let mut bits = tm.map() & PACKET_WORDS;
        let mut uncovered = 0u64;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let covered = if fm.map() & (1 << i) != 0 {
                fm.raw_word(i)
            } else {
                0
            };
            if tm.raw_word(i) & !covered != 0 {
                uncovered |= 1 << i;
            }
        }
        MetaSplit {
            from,
            to,
            rest: MaskedWords::new(t, uncovered),
        }
    }
}

impl Pmd {
    /// The metadata match (see the module's text) of a batch whose keys are the pass before's,
    /// all found in megaflow `from`, on `in_port`. Returns the packets found (the pass's
    /// `early`, each one's megaflow in `hits`), or `None` when the match does not apply: the
    /// caller then makes every key's metadata words and runs the linear match.
    #[inline(never)]
    pub(in crate::pmd) fn recirc_meta_match(
        &mut self,
        batch: &Batch,
        in_port: u32,
        from: FlowRef,
    ) -> Option<u32> {
        let Pmd {
            cls,
            keys,
            hits,
            flows,
            meta_split,
            ..
        } = self;
        let pkts = batch.packets();
        let p0 = pkts.first()?;
        if p0.meta.tunnel != TnlMd::None {
            return None;
        }
        let linear = &cls.port(in_port)?.linear;
        let k0 = &mut keys[0];
        k0.clear_words(!PACKET_WORDS);
        key_metadata_add(p0, k0, false);
        let to = linear.lookup_later(k0)?;
        if !meta_split
            .as_ref()
            .is_some_and(|s| s.from == from && s.to == to)
        {
            let (f, t) = (flows.get(from)?, flows.get(to)?);
            *meta_split = Some(MetaSplit::new(from, &f.m, to, &t.m));
        }
        let rest = meta_split.as_ref()?.rest.as_ref()?;
        hits[0] = Some(to);
        let mut found = 1u32;
        for (i, p) in pkts.iter().enumerate().skip(1) {
            let k = &mut keys[i];
            let r = if same_key_metadata(p0, p) && rest.matches(k) {
                Some(to)
            } else {
                k.clear_words(!PACKET_WORDS);
                key_metadata_add(p, k, false);
                linear.lookup_later(k)
            };
            hits[i] = r;
            found |= u32::from(r.is_some()) << i;
        }
        Some(found)
    }
}
