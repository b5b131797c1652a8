//! The metadata match of a recirculated batch: the linear match of a pass that takes its keys
//! from the pass before (its whole batch, found in one megaflow, sent on by `recirc` after
//! `ct()`, its headers untouched but for the translations of `ct(nat)`, which made those
//! packets' keys again), on a port whose megaflows the linear match holds and that has no
//! decap megaflows.
//!
//! Every packet's key matched that megaflow (`from`) in the pass before, and its packet words
//! have not changed since but for the addresses and ports of a translated packet, which count
//! as words `from` does not cover. So a packet whose metadata words (in_port, recirc_id, dp_hash,
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
//! When every packet is the first one's, the pass runs that megaflow's actions on the batch as
//! it is (`Pmd::input`'s `run_whole`). Per packet, only the connection fields and whether a
//! tunnel is there are compared when the first megaflow's mask covers the bits of dp_hash,
//! mark and packet type the second's looks at (`recirc` gave all one recirc_id, and neither it
//! nor `ct()` changes those).
//!
//! Megaflow hits as the linear match's, one subtable lookup each; cycles under `extract`.
//! The pass is counted, and its megaflow's statistics updated, as for any other pass.

use flow::Match;
use flow::key::PACKET_WORDS;

use crate::actions::DpAction;
use crate::flow_table::FlowRef;
use crate::packet::{Batch, MAX_BURST, TnlMd};

use super::super::Pmd;
use super::super::extract::key_metadata_add;
use super::key_meta::KeyMeta;
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
    /// `rest` has words to compare.
    some_rest: bool,
    /// The second's mask looks at the connection's mark or label.
    mark_or_label: bool,
    /// The first's mask covers every bit of dp_hash, the packet mark and the packet type the
    /// second's looks at: the packets of the batch, which `ct()` and `recirc` do not change
    /// there, agree with the first packet on them, as all agreed with the first megaflow.
    fixed: bool,
}

impl MetaSplit {
    /// The split of `to` (match `t`) after `from` (match `f`). `translated`: `from`'s actions
    /// may translate (NAT) its packets, whose keys `ct()` made again there: the words of the
    /// fields a translation changes count as not covered, as the first pass matched their
    /// values from before.
    fn new(from: FlowRef, f: &Match, to: FlowRef, t: &Match, translated: bool) -> MetaSplit {
        let (fm, tm) = (f.mask(), t.mask());
        let nat = flow::extract::ipv4_nat_fields();
        let mut bits = tm.map() & PACKET_WORDS;
        let mut uncovered = 0u64;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let mut covered = if fm.map() & (1 << i) != 0 {
                fm.raw_word(i)
            } else {
                0
            };
            if translated {
                covered &= !nat.word(i);
            }
            if tm.raw_word(i) & !covered != 0 {
                uncovered |= 1 << i;
            }
        }
        MetaSplit {
            from,
            to,
            rest: MaskedWords::new(t, uncovered),
            some_rest: uncovered != 0,
            mark_or_label: tm.ct_mark() != 0 || tm.ct_label() != 0,
            fixed: tm.dp_hash() & !fm.dp_hash() == 0
                && tm.pkt_mark() & !fm.pkt_mark() == 0
                && tm.packet_type() & !fm.packet_type() == 0,
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
            meta_whole,
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
            let translated = f
                .actions
                .iter()
                .any(|a| matches!(a, DpAction::Ct(c) if c.nat.is_some()));
            *meta_split = Some(MetaSplit::new(from, &f.m, to, &t.m, translated));
        }
        let split = meta_split.as_ref()?;
        let rest = split.rest.as_ref()?;
        let some_rest = split.some_rest;
        let meta = KeyMeta::of(p0, split.mark_or_label);
        let n = pkts.len().min(keys.len()).min(hits.len()).min(MAX_BURST);
        // The packets whose metadata are the first one's, with no branch per packet; then
        // those of them that agree with the words `from` does not cover.
        let mut same = 0u32;
        if split.fixed {
            for (i, p) in pkts[..n].iter().enumerate() {
                same |= u32::from(meta.same_connection(p)) << i;
            }
        } else {
            for (i, p) in pkts[..n].iter().enumerate() {
                same |= u32::from(meta.same(p)) << i;
            }
        }
        if some_rest {
            let mut bits = same & !1;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if !rest.matches(&keys[i]) {
                    same &= !(1 << i);
                }
            }
        }
        let mut found = same | 1;
        if n == pkts.len() && found == all_of(n) {
            // Every packet is in `to`: the pass runs its actions on the batch as it is
            // (`Pmd::input`); `hits[0]` says which megaflow the batch was found in.
            hits[0] = Some(to);
            *meta_whole = Some(to);
            return Some(found);
        }
        for h in &mut hits[..n] {
            *h = Some(to);
        }
        // The others, in full.
        let mut others = all_of(n) & !found;
        while others != 0 {
            let i = others.trailing_zeros() as usize;
            others &= others - 1;
            let k = &mut keys[i];
            k.clear_words(!PACKET_WORDS);
            key_metadata_add(&pkts[i], k, false);
            let r = linear.lookup_later(k);
            hits[i] = r;
            found |= u32::from(r.is_some()) << i;
        }
        Some(found)
    }
}

/// The first `n` packets of a batch (at most [`MAX_BURST`]), as a bit mask.
#[inline(always)]
fn all_of(n: usize) -> u32 {
    ((1u64 << n) - 1) as u32
}
