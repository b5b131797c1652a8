//! The linear match tier: on a port whose few megaflows share one mask and differ in one key
//! word at most ([`LinearMatch`]), a compare of the shared words and one slot picked by a
//! perfect hash of the word they differ in, instead of the EMC and dpcls. A port whose few
//! megaflows are of a few masks (a `ct()` pipeline's passes: `ct_state(-trk)` for the first,
//! `+new`/`+est` for the next; the simple match takes those that look at no packet field
//! beyond its own) has one such match per mask, tried in turn
//! ([`LinearMatches`]). It is then the port's whole classifier: a packet it does not find is
//! a miss, and its cost does not grow with the packets' flows, as the EMC's does once they
//! outnumber its entries. Counted as megaflow hits, one subtable lookup each.
//!
//! On a port without decap megaflows, each key is compared as soon as extraction makes it, in
//! the same loop ([`Pmd::extract_linear`], cycles under `extract`); otherwise, and for a
//! recirculated batch that reuses its keys, after the decap fast path ([`Pmd::linear_match`],
//! cycles under `megaflow`). The table follows the flow table (`flows.rs`), and is refilled
//! from the port's classifier when the port's megaflows fit again.

use flow::{FlowKey, Match};

use crate::flow_table::FlowRef;
use crate::packet::Batch;

use super::super::Pmd;
use super::super::extract::{extract_packet_unhashed, key_metadata_with};
use super::Pass;
use super::masked_words::MaskedWords;

/// Most mask words of a linear-match megaflow. A GENEVE tunnel's inner megaflow has 9 (its
/// option's 8 bytes straddle two key words), and one with an IPv6 underlay 4 more than its
/// IPv4 twin. Megaflows of at most [`MAX_WORDS`](super::masked_words::MAX_WORDS) keep the
/// shorter compare, whose loops the compiler unrolls: a 12-word compare for every megaflow
/// cost VXLAN's decap 22 instructions a packet (`scripts/insns-check`), while GENEVE's inner
/// pass saves its hash and EMC probe, about 125.
const MAX_LINEAR_WORDS: usize = 12;

/// Most megaflows a port may have for the linear match ([`LinearMatch`]).
pub(in crate::pmd) const MAX_LINEAR_FLOWS: usize = 8;

/// The linear match: an input port's whole classifier when its megaflows are few
/// ([`MAX_LINEAR_FLOWS`] at most), all of one mask of at most `MAX_LINEAR_WORDS` words, and
/// differ from each other in one key word at most. A tunnel port's inner pass, a VM port
/// behind a single rule, or MPLS labels (or inner destinations) to a few VMs are such ports:
/// one OpenFlow table matching the same fields gives every megaflow the same mask.
///
/// A key is compared once with the words the megaflows share; its one differing word then
/// picks a slot of a small table by a multiplicative hash chosen so that the megaflows' values
/// all land in slots of their own (a perfect hash, found when a megaflow is added), and one
/// compare with that slot's value decides. That reads a few words of the key and of a table
/// that stays in L1, with no branch on which megaflow it is, where an EMC probe reads a
/// 64-byte entry of a table spread over many cache lines and needs the key's hash; and, as the
/// table is the port's every megaflow, a key none of them matches is a miss without the EMC
/// or dpcls. (Comparing each megaflow in turn, as was tried for a list of four labels, cost
/// more than the EMC: `docs/performance.md`.)
#[derive(Clone, Debug)]
pub(in crate::pmd) struct LinearMatch {
    /// The megaflows, in the order of `vals`.
    flows: Vec<FlowRef>,
    /// The first megaflow's match: its mask is every megaflow's, and its values are theirs
    /// but in the differing word.
    shape: Option<Box<Match>>,
    /// The compare of the words the megaflows share (all of them while there is one).
    words: Option<LinearWords>,
    /// Word 0 (in_port and recirc_id) of that compare, its mask and value (both zero when it
    /// is not one of them): tried first, so that a key of another pass, which the port's
    /// other linear matches hold, is turned away by one compare.
    first_word: (u64, u64),
    /// The word the megaflows differ in, once there are two: its index and mask.
    apart: Option<(usize, u64)>,
    /// Each megaflow's masked value of that word.
    vals: [u64; MAX_LINEAR_FLOWS],
    /// The multiplier of the slot hash ([`slot_of`]).
    mul: u64,
    /// Each slot's value of the differing word, and the index of its megaflow in `flows`
    /// ([`NO_FLOW`] for an empty slot).
    slot_val: [u64; LINEAR_SLOTS],
    slot_flow: [u8; LINEAR_SLOTS],
}

/// The mask and (masked) value of word 0 of `m` among `words` (a word bit map): both zero when
/// `words` or the mask leave it out ([`LinearMatch`]'s `first_word`).
fn first_word(m: &Match, words: u64) -> (u64, u64) {
    if words & m.mask().map() & 1 == 0 {
        return (0, 0);
    }
    (m.mask().raw_word(0), m.key().word(0))
}

/// Slots of a linear match's table: twice its most megaflows, so that a multiplier putting
/// eight values in slots of their own is found in a few tries.
const LINEAR_SLOTS: usize = 16;

/// An empty slot's megaflow index (never an index of `flows`).
const NO_FLOW: u8 = u8::MAX;

/// Multipliers tried for the slot hash, in turn.
const SLOT_TRIES: u64 = 256;

/// The `t`th multiplier tried: odd, and unrelated to the others (splitmix64's finalizer of
/// `t`), so that two values which collide under one (their difference times it falls near a
/// multiple of 2^60) are unlikely to collide under the next. (Multiples of one constant are
/// not: a difference that constant maps near zero, every multiple maps near zero too.)
fn multiplier(t: u64) -> u64 {
    let mut z = t.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}

/// The slot of value `v` under multiplier `mul`: the product's top four bits, which every bit
/// of `v` can change.
#[inline(always)]
fn slot_of(v: u64, mul: u64) -> usize {
    (v.wrapping_mul(mul) >> 60) as usize
}

/// A linear match's shared words, in the short compare when they fit.
#[derive(Clone, Debug)]
enum LinearWords {
    Short(MaskedWords),
    Long(MaskedWords<MAX_LINEAR_WORDS>),
}

impl LinearWords {
    /// The words of `m`'s mask in `words` (a word bit map), if there are at most
    /// [`MAX_LINEAR_WORDS`].
    fn new(m: &Match, words: u64) -> Option<LinearWords> {
        Some(match MaskedWords::new(m, words) {
            Some(w) => LinearWords::Short(w),
            None => LinearWords::Long(MaskedWords::new(m, words)?),
        })
    }

    #[inline(always)]
    fn matches(&self, key: &FlowKey) -> bool {
        match self {
            LinearWords::Short(w) => w.matches(key),
            LinearWords::Long(w) => w.matches(key),
        }
    }
}

impl Default for LinearMatch {
    fn default() -> LinearMatch {
        LinearMatch {
            flows: Vec::with_capacity(MAX_LINEAR_FLOWS),
            shape: None,
            words: None,
            first_word: (0, 0),
            apart: None,
            vals: [0; MAX_LINEAR_FLOWS],
            mul: 1,
            slot_val: [0; LINEAR_SLOTS],
            slot_flow: [NO_FLOW; LINEAR_SLOTS],
        }
    }
}

impl LinearMatch {
    /// How many megaflows it holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.flows.len()
    }

    /// Whether it holds none.
    pub(in crate::pmd) fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Forgets every megaflow.
    pub(in crate::pmd) fn clear(&mut self) {
        self.flows.clear();
        self.shape = None;
        self.words = None;
        self.first_word = (0, 0);
        self.apart = None;
    }

    /// Adds megaflow `flow` (match `m`) if it fits: there is room, its mask is small enough
    /// and the others', and its values differ from theirs in the one word they differ in (or,
    /// with one megaflow held, in one word). Returns whether it was added.
    pub(in crate::pmd) fn push(&mut self, flow: FlowRef, m: &Match) -> bool {
        let n = self.flows.len();
        if n >= MAX_LINEAR_FLOWS {
            return false;
        }
        let Some(shape) = &self.shape else {
            let Some(words) = LinearWords::new(m, u64::MAX) else {
                return false;
            };
            self.words = Some(words);
            self.first_word = first_word(m, u64::MAX);
            self.shape = Some(Box::new(m.clone()));
            self.flows.push(flow);
            return true;
        };
        if shape.mask() != m.mask() {
            return false;
        }
        // The words whose values differ from the first megaflow's (both stored masked).
        let mut bits = m.mask().map();
        let mut differ = 0u64;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if m.key().word(i) != shape.key().word(i) {
                differ |= 1 << i;
            }
        }
        let mut vals = self.vals;
        let (d, words) = match self.apart {
            Some((d, _)) if differ & !(1 << d) == 0 => (d, None),
            None if differ.count_ones() == 1 => {
                // The second megaflow: the compare leaves out the word they differ in.
                let d = differ.trailing_zeros() as usize;
                let shared = shape.mask().map() & !(1 << d);
                let Some(w) = LinearWords::new(shape, shared) else {
                    return false;
                };
                vals[0] = shape.key().word(d);
                (d, Some((w, first_word(shape, shared))))
            }
            _ => return false,
        };
        let v = m.key().word(d);
        if vals[..n].contains(&v) {
            // The same match as one held: not a megaflow of its own.
            return false;
        }
        vals[n] = v;
        // A multiplier that gives every value a slot of its own, the one in use first.
        let found = (0..SLOT_TRIES)
            .map(|t| if t == 0 { self.mul } else { multiplier(t) })
            .find(|&mul| {
                let mut used = 0u32;
                vals[..=n].iter().all(|&x| {
                    let b = 1 << slot_of(x, mul);
                    let free = used & b == 0;
                    used |= b;
                    free
                })
            });
        let Some(mul) = found else {
            return false;
        };
        if let Some((w, f)) = words {
            self.words = Some(w);
            self.first_word = f;
            self.apart = Some((d, m.mask().raw_word(d)));
        }
        self.vals = vals;
        self.mul = mul;
        self.flows.push(flow);
        self.fill_slots();
        true
    }

    /// Puts every megaflow's value in its slot (the multiplier gives each its own).
    fn fill_slots(&mut self) {
        self.slot_val = [0; LINEAR_SLOTS];
        self.slot_flow = [NO_FLOW; LINEAR_SLOTS];
        for (j, &x) in self.vals[..self.flows.len()].iter().enumerate() {
            let s = slot_of(x, self.mul);
            self.slot_val[s] = x;
            self.slot_flow[s] = j as u8;
        }
    }

    /// Takes megaflow `flow` out, if held.
    pub(in crate::pmd) fn remove(&mut self, flow: FlowRef) {
        let Some(k) = self.flows.iter().position(|&f| f == flow) else {
            return;
        };
        let n = self.flows.len();
        self.flows.remove(k);
        self.vals.copy_within(k + 1..n, k);
        if self.flows.is_empty() {
            self.clear();
        } else if let Some((d, _)) = self.apart {
            if self.flows.len() > 1 {
                self.fill_slots();
            } else {
                self.just_one(d);
            }
        }
    }

    /// Back to one megaflow's own compare (its values in `shape`, no differing word), so that
    /// the next one may differ from it in any word, not only in word `d`, where the removed
    /// ones differed.
    fn just_one(&mut self, d: usize) {
        let Some(shape) = &self.shape else {
            self.clear();
            return;
        };
        let mut key = shape.key().clone();
        key.set_word(d, self.vals[0]);
        let m = Match::new(&key, shape.mask());
        let Some(words) = LinearWords::new(&m, u64::MAX) else {
            // Cannot happen (the shared words and word d fitted): hold none rather than a
            // megaflow without its compare.
            self.clear();
            return;
        };
        self.words = Some(words);
        self.first_word = first_word(&m, u64::MAX);
        self.shape = Some(Box::new(m));
        self.apart = None;
    }

    /// The megaflow `key` matches, if any (what `Match::matches` says of each). `GUARD`: word
    /// 0 is compared first, on its own, which turns a key of another pass away in one
    /// compare.
    #[inline(always)]
    pub(in crate::pmd) fn lookup<const GUARD: bool>(&self, key: &FlowKey) -> Option<FlowRef> {
        let (m0, v0) = self.first_word;
        if GUARD && key.word(0) & m0 != v0 {
            return None;
        }
        if !self.words.as_ref().is_some_and(|w| w.matches(key)) {
            return None;
        }
        let Some((d, mask)) = self.apart else {
            return self.flows.first().copied();
        };
        let v = key.word(d) & mask;
        let s = slot_of(v, self.mul);
        // An empty slot's index is no megaflow's.
        let j = usize::from(self.slot_flow[s]);
        if self.slot_val[s] != v {
            return None;
        }
        self.flows.get(j).copied()
    }
}

/// Most masks of a port's linear match ([`LinearMatches`]): a `ct()` pipeline's passes have
/// two or three.
pub(in crate::pmd) const MAX_LINEAR_MASKS: usize = 4;

/// A port's linear match: up to [`MAX_LINEAR_MASKS`] [`LinearMatch`]es, each of one mask,
/// holding [`MAX_LINEAR_FLOWS`] megaflows in all. A megaflow goes into the first that takes
/// it, or starts another when it is of another pass than each one held, or of the same pass
/// split by connection state ([`apart_by_pass`]): within one pass, comparing each mask in
/// turn costs more than the EMC while the flows are few (`docs/performance.md`). A key is
/// looked up in each in turn: megaflows do not overlap, so the first that finds one has the
/// megaflow. A port of one mask, the common case, pays one compare of the count for the
/// others.
#[derive(Clone, Debug, Default)]
pub(in crate::pmd) struct LinearMatches {
    /// The first match, in line: a port of one mask looks no further. Empty only when they
    /// all are.
    first: LinearMatch,
    /// The others, none of them empty.
    more: Vec<LinearMatch>,
    /// Megaflows held, in all.
    n: usize,
}

impl LinearMatches {
    /// How many megaflows it holds.
    pub(in crate::pmd) fn len(&self) -> usize {
        self.n
    }

    /// Whether it holds none.
    pub(in crate::pmd) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Forgets every megaflow.
    pub(in crate::pmd) fn clear(&mut self) {
        self.first.clear();
        self.more.clear();
        self.n = 0;
    }

    /// Adds megaflow `flow` (match `m`) if it fits: into the first match that takes it
    /// ([`LinearMatch::push`]), or into a new one if there is room for it. Returns whether
    /// it was added.
    pub(in crate::pmd) fn push(&mut self, flow: FlowRef, m: &Match) -> bool {
        if self.n >= MAX_LINEAR_FLOWS {
            return false;
        }
        let added = if self.first.is_empty() {
            self.first.push(flow, m)
        } else {
            self.first.push(flow, m)
                || self.more.iter_mut().any(|g| g.push(flow, m))
                || (1 + self.more.len() < MAX_LINEAR_MASKS
                    && std::iter::once(&self.first)
                        .chain(&self.more)
                        .all(|g| g.shape.as_ref().is_some_and(|s| apart_by_pass(s, m)))
                    && {
                        let mut g = LinearMatch::default();
                        let fits = g.push(flow, m);
                        if fits {
                            self.more.push(g);
                        }
                        fits
                    })
        };
        self.n += usize::from(added);
        added
    }

    /// Takes megaflow `flow` out, if held.
    pub(in crate::pmd) fn remove(&mut self, flow: FlowRef) {
        if self.first.flows.contains(&flow) {
            self.first.remove(flow);
            if self.first.is_empty() && !self.more.is_empty() {
                self.first = self.more.remove(0);
            }
        } else if let Some(g) = self.more.iter().position(|g| g.flows.contains(&flow)) {
            self.more[g].remove(flow);
            if self.more[g].is_empty() {
                self.more.remove(g);
            }
        } else {
            return;
        }
        self.n -= 1;
    }

    /// The megaflow `key` matches, if any (what `Match::matches` says of each).
    #[inline(always)]
    pub(in crate::pmd) fn lookup(&self, key: &FlowKey) -> Option<FlowRef> {
        let r = self.first.lookup::<false>(key);
        if r.is_some() || self.more.is_empty() {
            return r;
        }
        self.lookup_more(key)
    }

    /// [`Self::lookup`] of a key of a later pass (recirculated, its key reused): the first
    /// match, which a `ct()` pipeline's first pass has, compares word 0 (in_port, recirc_id)
    /// first, on its own. Extraction's loop (`extract_linear`) looks up without: a port of one
    /// match keeps its registers and instructions there.
    #[inline(always)]
    pub(in crate::pmd) fn lookup_later(&self, key: &FlowKey) -> Option<FlowRef> {
        let r = self.first.lookup::<true>(key);
        if r.is_some() || self.more.is_empty() {
            return r;
        }
        self.lookup_more(key)
    }

    /// [`Self::lookup`] in the matches after the first, word 0 first.
    #[inline(never)]
    fn lookup_more(&self, key: &FlowKey) -> Option<FlowRef> {
        self.more.iter().find_map(|g| g.lookup::<true>(key))
    }
}

/// Whether megaflows `a` and `b` may be in linear matches of their own on one port: they are
/// of different passes (both match the recirculation id, with different values), or of one
/// pass that a `ct()` result splits (their masks differ, in connection fields only: a
/// pipeline's `ct_state(+new+trk)` and `ct_state(+est+trk)`).
fn apart_by_pass(a: &Match, b: &Match) -> bool {
    let (ka, kb, ma, mb) = (a.key(), b.key(), a.mask(), b.mask());
    if ma.recirc_id() == u32::MAX && mb.recirc_id() == u32::MAX && ka.recirc_id() != kb.recirc_id()
    {
        return true;
    }
    let without_ct = |m: &flow::Mask| {
        let mut m = m.clone();
        m.set_ct_state(0)
            .set_ct_zone(0)
            .set_ct_mark(0)
            .set_ct_label(0);
        m
    };
    let (xa, xb) = (without_ct(ma), without_ct(mb));
    let mut words = ma.map() | mb.map();
    let mut ct_only = true;
    while words != 0 {
        let i = words.trailing_zeros() as usize;
        words &= words - 1;
        ct_only &= xa.word(i) == xb.word(i);
    }
    ct_only && ma != mb
}

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

    /// The linear match ([`LinearMatch`]) of the packets `todo` (a bit mask) on `in_port`,
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
            let r = c.linear.lookup_later(&keys[i]);
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
            // As the classifier counts its subtable lookups, for the hits: one each (a port
            // of a few masks compares more, in cycles too few to count apart).
            c.linear_lookups += found;
        }
        self.stats.megaflow_hits += found;
        self.count_cached(found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::Mask;

    use super::super::masked_words::MAX_WORDS;
    use super::super::masked_words::strategies::{build, words_of};

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// The linear match takes a megaflow of up to 12 mask words, in the short compare or
        /// the long one, and says what `Match::matches` says.
        #[test]
        fn linear_agrees_with_match(
            kw in words_of(40, 16),
            mw in words_of(40, 16),
            pw in words_of(40, 16),
            absent in proptest::prelude::any::<u64>(),
            copy: bool,
        ) {
            let mt = Match::new(&FlowKey(build(&kw)), &Mask(build(&mw)));
            let r = FlowRef::first(0);
            let mut l = LinearMatch::default();
            let n = mt.mask().map().count_ones() as usize;
            proptest::prop_assert_eq!(l.push(r, &mt), n <= MAX_LINEAR_WORDS);
            if l.is_empty() {
                return Ok(());
            }
            let long = matches!(l.words, Some(LinearWords::Long(_)));
            proptest::prop_assert_eq!(long, n > MAX_WORDS);
            let mut probe = if copy { FlowKey(build(&kw)) } else { FlowKey::new() };
            for &(i, v) in &pw {
                probe.set_word(i, v);
            }
            probe.clear_words(absent);
            proptest::prop_assert_eq!(l.lookup::<false>(&probe).is_some(), mt.matches(&probe));
            proptest::prop_assert_eq!(l.lookup::<true>(&probe).is_some(), mt.matches(&probe));
        }

        /// Megaflows of one mask that differ in one word share the linear match, and it finds
        /// the one a key matches, as `Match::matches` does; one of another mask, or differing
        /// elsewhere, is refused. Removing some keeps the others found.
        #[test]
        fn linear_match_of_several_agrees_with_match(
            kw in words_of(16, 8),
            mw in words_of(16, 14),
            apart in 0usize..16,
            apart_mask in proptest::prelude::any::<u64>(),
            vals in proptest::collection::vec(
                proptest::prop_oneof![0u64..6, proptest::prelude::any::<u64>()],
                1..12,
            ),
            stray in proptest::option::of((0usize..16, 1u64..4)),
            probes in proptest::collection::vec(
                (
                    0usize..12,
                    proptest::prelude::any::<u64>(),
                    proptest::prelude::any::<bool>(),
                    proptest::prelude::any::<bool>(),
                    proptest::prelude::any::<bool>(),
                ),
                8,
            ),
            gone in proptest::collection::vec(proptest::prelude::any::<bool>(), 12),
        ) {
            let mut mw = build(&mw);
            mw.set_word(apart, apart_mask | 0b111);
            let mask = Mask(mw);
            let base = build(&kw);
            let mut l = LinearMatch::default();
            let mut held: Vec<(FlowRef, Match)> = Vec::new();
            for (j, &v) in vals.iter().enumerate() {
                let mut k = base.clone();
                k.set_word(apart, v);
                let mt = Match::new(&FlowKey(k), &mask);
                let r = FlowRef::first(j as u32);
                let dup = held.iter().any(|(_, h)| *h == mt);
                let fits = !dup && held.len() < MAX_LINEAR_FLOWS
                    && mt.mask().map().count_ones() as usize <= MAX_LINEAR_WORDS;
                proptest::prop_assert_eq!(l.push(r, &mt), fits);
                if fits {
                    held.push((r, mt));
                }
            }
            if let Some((i, x)) = stray {
                // Another mask, or another value outside the differing word.
                let mut m2 = mask.clone();
                m2.0.set_word(i, mask.0.word(i) ^ x);
                let other_mask = Match::new(&FlowKey(base.clone()), &m2);
                let mut k2 = base.clone();
                k2.set_word(i, base.word(i) ^ x);
                let other_val = Match::new(&FlowKey(k2), &mask);
                let r = FlowRef::first(99);
                if other_mask.mask() != &mask {
                    proptest::prop_assert!(!l.push(r, &other_mask));
                }
                let d = other_val.key().word(i) != held.first().map_or(0, |h| h.1.key().word(i));
                if i != apart && d && held.len() > 1 {
                    proptest::prop_assert!(!l.push(r, &other_val));
                }
            }
            proptest::prop_assert_eq!(l.len(), held.len());
            let check = |l: &LinearMatch, held: &[(FlowRef, Match)]| {
                for &(j, x, held_value, keep_base, absent) in &probes {
                    let v = if held_value { vals[j % vals.len()] } else { x };
                    let mut k = if keep_base { base.clone() } else { flow::FlowWords::new() };
                    k.set_word(apart, v);
                    if absent {
                        // Absent, with its stale bytes left behind: it reads as zero.
                        k.clear_words(1 << apart);
                    }
                    let key = FlowKey(k);
                    let want = held.iter().find(|(_, m)| m.matches(&key)).map(|h| h.0);
                    proptest::prop_assert_eq!(l.lookup::<false>(&key), want);
                    proptest::prop_assert_eq!(l.lookup::<true>(&key), want);
                }
                Ok(())
            };
            check(&l, &held)?;
            for (j, &g) in gone.iter().enumerate() {
                if g && let Some(p) = held.iter().position(|h| h.0.idx == j as u32) {
                    l.remove(held[p].0);
                    held.remove(p);
                }
            }
            proptest::prop_assert_eq!(l.len(), held.len());
            check(&l, &held)?;
        }
    }

    /// GENEVE's inner megaflow (its option in two key words, 9 words in all) is the linear
    /// match's, and tells its option's value apart.
    #[test]
    fn a_geneve_inner_megaflow_takes_the_linear_match() {
        let mut k = FlowKey::new();
        k.set_in_port(3)
            .set_eth_type(0x0800)
            .set_nw_frag(0)
            .set_tun_id(3)
            .set_tun_ipv4_src([172, 17, 2, 160].into())
            .set_tun_ipv4_dst([172, 17, 2, 60].into())
            .set_tun_flags(flow::key::tun_flags::KEY);
        let opt = [0x01, 0x02, 0x80, 0x01, 0x00, 0x03, 0x00, 0x02];
        k.set_tun_geneve_opts(&opt);
        let mut m = Mask::new();
        m.set_in_port(u32::MAX)
            .set_recirc_id(u32::MAX)
            .set_packet_type(u32::MAX)
            .set_eth_type(0xffff)
            .set_nw_frag(0xff)
            .set_tun_id(u64::MAX)
            .set_tun_ipv4_src([255; 4].into())
            .set_tun_ipv4_dst([255; 4].into())
            .set_tun_flags(0xff)
            .set_tun_geneve_len(0xff)
            .set_tun_geneve_opt_bytes(0, &[0xff; 8]);
        let mt = Match::new(&k, &m);
        assert!(mt.mask().map().count_ones() as usize > MAX_WORDS, "{mt:?}");
        let r = FlowRef::first(1);
        let mut l = LinearMatch::default();
        assert!(l.push(r, &mt), "a linear megaflow");
        assert_eq!(l.lookup::<true>(&k), Some(r));
        let mut other = opt;
        other[7] = 3;
        let mut k2 = k.clone();
        k2.set_tun_geneve_opts(&other);
        assert!(l.lookup::<true>(&k2).is_none() && !mt.matches(&k2));
        // Every word counts, the ninth too (the zero-valued ones come last).
        let mut l3 = k.clone();
        l3.set_packet_type(1 << 16 | 0x0800);
        assert!(l.lookup::<false>(&l3).is_none() && !mt.matches(&l3));
    }

    /// A `ct()` pipeline's megaflows on one port (the first pass's `ct_state(-trk)`, the
    /// second's `+new` and `+est`, three masks) are all the linear match's, and each key finds
    /// the one `Match::matches` says; a fifth mask, or a ninth megaflow, is refused, and one
    /// taken out leaves the others found.
    #[test]
    fn a_ct_pipelines_masks_share_the_linear_match() {
        use flow::key::ct_state;
        let key = |recirc: u32, state: u8| {
            let mut k = FlowKey::new();
            k.set_in_port(1)
                .set_recirc_id(recirc)
                .set_ct_state(state)
                .set_eth_type(0x0800)
                .set_nw_frag(0);
            k
        };
        let flow = |recirc: u32, state: u8, bits: u8| {
            let mut m = Mask::new();
            m.set_in_port(u32::MAX)
                .set_recirc_id(u32::MAX)
                .set_ct_state(bits)
                .set_eth_type(0xffff)
                .set_nw_frag(0xff);
            Match::new(&key(recirc, state), &m)
        };
        let (trk, new, est) = (ct_state::TRK, ct_state::NEW, ct_state::EST);
        let flows = [
            flow(0, 0, trk),
            flow(1, trk | new, trk | new),
            flow(1, trk | est, trk | est),
        ];
        let r = FlowRef::first;
        let mut l = LinearMatches::default();
        for (j, m) in flows.iter().enumerate() {
            assert!(l.push(r(j as u32), m), "megaflow {j}");
        }
        assert_eq!(l.len(), 3);
        let probes = [
            (key(0, 0), Some(0)),
            (key(1, trk | new), Some(1)),
            (key(1, trk | est), Some(2)),
            (key(1, trk), None),
            (key(1, 0), None),
            (key(2, trk | new), None),
        ];
        for (k, want) in &probes {
            let scan = flows.iter().position(|m| m.matches(k)).map(|j| r(j as u32));
            assert_eq!(scan, want.map(r), "{k:?}");
            assert_eq!(l.lookup(k), scan, "{k:?}");
            assert_eq!(l.lookup_later(k), scan, "{k:?}");
        }
        // Of the first pass, another mask that is not a connection field's: the EMC's.
        let mut m = flows[0].mask().clone();
        m.set_nw_proto(0xff);
        assert!(!l.push(r(9), &Match::new(&key(0, 0), &m)));
        // A fourth mask fits; a fifth does not.
        assert!(l.push(r(3), &flow(2, trk | ct_state::RPL, trk | ct_state::RPL)));
        assert!(!l.push(r(4), &flow(3, trk | ct_state::INV, trk | ct_state::INV)));
        assert_eq!(l.len(), 4);
        l.remove(r(1));
        assert_eq!(l.len(), 3);
        assert_eq!(l.lookup(&key(1, trk | new)), None);
        assert_eq!(l.lookup(&key(1, trk | est)), Some(r(2)));
        assert_eq!(l.lookup(&key(0, 0)), Some(r(0)));
        // Room again for a new mask, and at most eight megaflows in all.
        assert!(l.push(r(4), &flow(3, trk | ct_state::INV, trk | ct_state::INV)));
        for j in 5..9 {
            assert!(l.push(r(j), &flow(j, 0, trk)), "megaflow {j}");
        }
        assert_eq!(l.len(), MAX_LINEAR_FLOWS);
        assert!(!l.push(r(9), &flow(9, 0, trk)));
        l.clear();
        assert!(l.is_empty() && l.lookup(&key(0, 0)).is_none());
    }

    /// Down to one megaflow, the linear match takes a next one that differs from it in another
    /// word than the one the removed megaflows differed in, and finds both.
    #[test]
    fn a_linear_match_down_to_one_takes_a_megaflow_apart_in_another_word() {
        let mut mask = Mask::new();
        mask.set_in_port(u32::MAX)
            .set_eth_type(0xffff)
            .set_nw_dst([255; 4].into())
            .set_tp_dst(0xffff);
        let flow = |dst: u8, port: u16| {
            let mut k = FlowKey::new();
            k.set_in_port(1)
                .set_eth_type(0x0800)
                .set_nw_dst([10, 0, 0, dst].into())
                .set_tp_dst(port);
            Match::new(&k, &mask)
        };
        let r = FlowRef::first;
        // A and B differ in the IPv4 destination (word 3); C differs from A in the port (4).
        let (a, b, c) = (flow(2, 80), flow(3, 80), flow(2, 443));
        for gone in [0, 1] {
            let mut l = LinearMatch::default();
            assert!(l.push(r(0), &a) && l.push(r(1), &b));
            assert!(!l.push(r(2), &c), "two words apart from B");
            l.remove(r(gone));
            let kept = if gone == 0 { &b } else { &a };
            let next = if gone == 0 { flow(3, 443) } else { c.clone() };
            assert!(l.push(r(2), &next), "one word apart from the one left");
            assert_eq!(l.lookup::<true>(kept.key()), Some(r(1 - gone)));
            assert_eq!(l.lookup::<false>(next.key()), Some(r(2)));
            assert_eq!(l.lookup::<true>(flow(9, 443).key()), None);
        }
    }
}
