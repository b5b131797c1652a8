//! dpcls: the megaflow classifier, as OVS's userspace datapath has it (`dpcls_lookup()` in
//! `dpif-netdev.c`, tuple space search).
//!
//! A [`Dpcls`] holds megaflows (a [`Match`] plus the caller's flow handle) grouped into
//! **subtables**, one per distinct mask. A subtable keeps only its mask's words: the mask itself
//! as a compact array, and for every rule the masked key words in one flat array (`k` words per
//! rule, where `k` is the number of words the mask uses). Its hash table maps the masked hash
//! ([`FlowKey::hash_masked`] with basis [`HASH_BASIS`]) to rule indices; a probe recomputes that
//! hash from the packet key (k CRC32C steps), finds candidates, and confirms with a compare of the
//! k masked words.
//!
//! Subtables are visited in rank order. Each counts its hits; [`Dpcls::sort_subtables`], which
//! the PMD calls once a second, re-orders them by the hits of the last interval (most first) and
//! resets the counts (OVS commit `3453b4d62`, "dpcls per in_port with sorted subtables"). New
//! subtables start at the end. [`DpclsStats`] gives the "avg. subtable lookups per megaflow hit"
//! of `dpif-netdev/pmd-stats-show`.
//!
//! # Assumptions
//! * **Megaflows do not overlap**: the datapath installs a megaflow only after a lookup missed,
//!   and ofproto builds its mask so that every packet it covers would have been translated the
//!   same way, so a packet matches at most one megaflow. The first hit is therefore *the* hit and
//!   there are no priorities. Inserting overlapping megaflows is not an error, but which of them
//!   a key finds then depends on the subtable order.
//! * One classifier per PMD thread and input port, owned by its PMD: no locks, and lookups take
//!   `&mut self` to count hits. As in OVS, the caller may leave `in_port` out of the masks it
//!   installs, since the classifier is already per port.
//!
//! The lookup path does not allocate; `insert`, `remove` and `sort_subtables` may.
#![forbid(unsafe_code)]

use flow::hash::crc32c_u64;
use flow::key::KEY_WORDS;
use flow::{FlowKey, Match};

/// Basis of the subtable hash: a rule is filed under `key.hash_masked(mask, HASH_BASIS)`.
pub const HASH_BASIS: u32 = 0;

/// How many keys [`Dpcls::lookup_batch`] resolves in one pass over the subtables (one rx burst,
/// OVS's `NETDEV_MAX_BURST`); longer slices are processed in chunks of this size.
pub const BATCH_MAX: usize = 32;

/// [`Dpcls::insert`] found a megaflow with the same match already installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a megaflow with this match is already installed")]
pub struct Exists;

/// Lookup counters of one classifier (per PMD thread; aggregate on read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DpclsStats {
    /// Keys that found a megaflow.
    pub hits: u64,
    /// Keys that found none (upcall candidates).
    pub misses: u64,
    /// For every hit, the 1-based rank of the subtable that had it, summed: the subtable probes
    /// spent on keys that hit (OVS's `PMD_STAT_MASKED_LOOKUP`).
    pub lookups: u64,
}

impl DpclsStats {
    /// "avg. subtable lookups per megaflow hit": `lookups / hits` (0 without hits). Ideally 1.
    pub fn lookups_per_hit(&self) -> f64 {
        if self.hits == 0 {
            0.0
        } else {
            self.lookups as f64 / self.hits as f64
        }
    }
}

/// What [`Dpcls::subtables`] reports about one subtable, in rank order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubtableInfo {
    /// The words the subtable's mask uses (bit `i` for word `i`).
    pub map: u64,
    /// Megaflows in the subtable.
    pub rules: usize,
    /// Hits since the last [`Dpcls::sort_subtables`].
    pub hits: u64,
}

/// The megaflow classifier of one PMD thread and input port. `F` is the caller's flow handle,
/// for instance an index into the PMD's flow table.
pub struct Dpcls<F> {
    /// In rank order: the most hit subtable of the last interval first.
    subtables: Vec<Subtable<F>>,
    stats: DpclsStats,
    /// A key's masked words while a subtable probes it (kept here so lookups need not clear a
    /// fresh buffer).
    scratch: [u64; KEY_WORDS],
}

/// All megaflows with one mask. Rule `r` is `words[r * k..(r + 1) * k]` and `flows[r]`, where
/// `k = mask.len()`; `mask[j]` is the mask's word at the `j`-th set bit of `map`.
struct Subtable<F> {
    map: u64,
    /// The index of each word of `map`, in order (spares a bit scan per word on lookups).
    idx: Box<[u8]>,
    mask: Box<[u64]>,
    words: Vec<u64>,
    flows: Vec<F>,
    table: RuleIndex,
    hits: u64,
}

/// A subtable's hash index: open addressing with linear probing over a power-of-two array of
/// slots, at most half full. A slot is `hash << 32 | (rule + 1)`, 0 when empty, so a probe reads
/// one word per candidate and compares the 32-bit hash before touching the rule's words.
/// Deletion shifts the following run back (no tombstones), so probes stop at the first empty
/// slot.
#[derive(Default)]
struct RuleIndex {
    slots: Vec<u64>,
    len: usize,
}

impl RuleIndex {
    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// Rule numbers filed under `hash`, in probe order, until `eq` accepts one.
    #[inline(always)]
    fn find(&self, hash: u32, mut eq: impl FnMut(usize) -> bool) -> Option<usize> {
        self.find_slot(hash, &mut eq)
            .map(|i| (self.slots[i] as u32 - 1) as usize)
    }

    #[inline(always)]
    fn find_slot(&self, hash: u32, eq: &mut impl FnMut(usize) -> bool) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut i = hash as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if (s >> 32) as u32 == hash && eq((s as u32 - 1) as usize) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn insert(&mut self, hash: u32, rule: usize) {
        if (self.len + 1) * 2 > self.slots.len() {
            let old = core::mem::take(&mut self.slots);
            self.slots = vec![0; (old.len() * 2).max(8)];
            for s in old.into_iter().filter(|&s| s != 0) {
                self.place(s);
            }
        }
        let rule = u32::try_from(rule + 1).expect("fewer than 2^32 - 1 megaflows per subtable");
        self.place(u64::from(hash) << 32 | u64::from(rule));
        self.len += 1;
    }

    fn place(&mut self, s: u64) {
        let mask = self.mask();
        let mut i = (s >> 32) as usize & mask;
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = s;
    }

    /// Removes the slot at `i`, shifting back the entries of its run that probed past it.
    fn remove_slot(&mut self, mut i: usize) {
        let mask = self.mask();
        self.slots[i] = 0;
        self.len -= 1;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s == 0 {
                return;
            }
            let home = (s >> 32) as usize & mask;
            // The entry at j may move to the hole at i unless its home lies cyclically in (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.slots[i] = s;
                self.slots[j] = 0;
                i = j;
            }
        }
    }

    /// Re-points the slot of `hash` holding rule `from` to rule `to`.
    fn renumber(&mut self, hash: u32, from: usize, to: usize) {
        let i = self
            .find_slot(hash, &mut |r| r == from)
            .expect("every rule has a slot");
        self.slots[i] = u64::from(hash) << 32 | (to as u64 + 1);
    }
}

impl<F: Copy> Subtable<F> {
    fn new(m: &Match) -> Self {
        let mask = m.mask();
        let map = mask.map();
        let mut words = Vec::with_capacity(map.count_ones() as usize);
        let mut idx = Vec::with_capacity(words.capacity());
        let mut bits = map;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            words.push(mask.raw_word(i));
            idx.push(i as u8);
        }
        Subtable {
            map,
            idx: idx.into_boxed_slice(),
            mask: words.into_boxed_slice(),
            words: Vec::new(),
            flows: Vec::new(),
            table: RuleIndex::default(),
            hits: 0,
        }
    }

    /// Whether this subtable's mask is `m`'s mask.
    fn has_mask(&self, m: &Match) -> bool {
        let mask = m.mask();
        if mask.map() != self.map {
            return false;
        }
        let mut bits = self.map;
        self.mask.iter().all(|&w| {
            let i = bits.trailing_zeros() as usize;
            bits &= bits.wrapping_sub(1);
            mask.raw_word(i) == w
        })
    }

    /// Writes `key`'s words under this subtable's mask to `out[..k]` and returns their hash
    /// (equal to `key.hash_masked(mask, HASH_BASIS)`).
    #[inline(always)]
    fn mask_key(&self, key: &FlowKey, out: &mut [u64; KEY_WORDS]) -> u32 {
        let mut h = HASH_BASIS;
        let words = self.idx.iter().zip(self.mask.iter()).zip(out.iter_mut());
        if key.map() & self.map == self.map {
            // The common case: the key has every word the mask uses, so read them unchecked.
            for ((&i, &mw), o) in words {
                let w = key.raw_word(i as usize) & mw;
                *o = w;
                h = crc32c_u64(h, w);
            }
        } else {
            for ((&i, &mw), o) in words {
                let w = key.word(i as usize) & mw;
                *o = w;
                h = crc32c_u64(h, w);
            }
        }
        h
    }

    /// The rule whose masked words are `words` (`k` of them, hashing to `hash`).
    #[inline(always)]
    fn find(&self, hash: u32, words: &[u64]) -> Option<usize> {
        let k = self.mask.len();
        self.table.find(hash, |r| {
            let rule = &self.words[r * k..r * k + k];
            // No early exit: k is small and the hash already agreed.
            rule.iter().zip(words).fold(0, |d, (a, b)| d | (a ^ b)) == 0
        })
    }

    /// Probes the keys of `keys` named in `pending`, writing hits to `out`; returns the hits as
    /// a bitmap. Generic in the mask's word count.
    #[inline]
    fn probe_burst(
        &self,
        keys: &[&FlowKey],
        pending: u32,
        out: &mut [Option<F>],
        scratch: &mut [u64; KEY_WORDS],
    ) -> u32 {
        let k = self.mask.len();
        let mut found = 0u32;
        let mut bits = pending;
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let hash = self.mask_key(keys[j], scratch);
            if let Some(r) = self.find(hash, &scratch[..k]) {
                out[j] = Some(self.flows[r]);
                found |= 1 << j;
            }
        }
        found
    }

    /// [`Self::probe_burst`] for a mask of exactly `K` words.
    #[inline]
    fn probe_burst_n<const K: usize>(
        &self,
        keys: &[&FlowKey],
        pending: u32,
        out: &mut [Option<F>],
    ) -> u32 {
        let (Ok(idx), Ok(mask)) = (
            <&[u8; K]>::try_from(&self.idx[..]),
            <&[u64; K]>::try_from(&self.mask[..]),
        ) else {
            unreachable!("called for a mask of {} words", self.mask.len());
        };
        let mut found = 0u32;
        let mut bits = pending;
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let key = keys[j];
            let mut w = [0u64; K];
            let mut h = HASH_BASIS;
            if key.map() & self.map == self.map {
                for t in 0..K {
                    w[t] = key.raw_word(idx[t] as usize) & mask[t];
                    h = crc32c_u64(h, w[t]);
                }
            } else {
                for t in 0..K {
                    w[t] = key.word(idx[t] as usize) & mask[t];
                    h = crc32c_u64(h, w[t]);
                }
            }
            let hit = self.table.find(h, |r| {
                let rule = &self.words[r * K..r * K + K];
                let mut d = 0;
                for t in 0..K {
                    d |= rule[t] ^ w[t];
                }
                d == 0
            });
            if let Some(r) = hit {
                out[j] = Some(self.flows[r]);
                found |= 1 << j;
            }
        }
        found
    }

    /// The masked words of `m` in this subtable's order, into `out`; returns how many.
    fn rule_words(&self, m: &Match, out: &mut [u64; KEY_WORDS]) -> usize {
        let mut bits = self.map;
        for (o, &mw) in out.iter_mut().zip(self.mask.iter()) {
            let i = bits.trailing_zeros() as usize;
            bits &= bits.wrapping_sub(1);
            *o = m.key().word(i) & mw;
        }
        self.mask.len()
    }
}

fn words_hash(words: &[u64]) -> u32 {
    words.iter().fold(HASH_BASIS, |h, &w| crc32c_u64(h, w))
}

impl<F: Copy> Default for Dpcls<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Copy> Dpcls<F> {
    /// An empty classifier.
    pub fn new() -> Self {
        Dpcls {
            subtables: Vec::new(),
            stats: DpclsStats::default(),
            scratch: [0; KEY_WORDS],
        }
    }

    /// Number of megaflows installed.
    pub fn len(&self) -> usize {
        self.subtables.iter().map(|s| s.flows.len()).sum()
    }

    /// Whether no megaflow is installed.
    pub fn is_empty(&self) -> bool {
        self.subtables.is_empty()
    }

    /// Number of subtables (distinct masks).
    pub fn n_subtables(&self) -> usize {
        self.subtables.len()
    }

    /// The subtables in rank order.
    pub fn subtables(&self) -> impl Iterator<Item = SubtableInfo> + '_ {
        self.subtables.iter().map(|s| SubtableInfo {
            map: s.map,
            rules: s.flows.len(),
            hits: s.hits,
        })
    }

    /// The handles of every megaflow installed, subtable by subtable.
    pub fn flows(&self) -> impl Iterator<Item = F> + '_ {
        self.subtables.iter().flat_map(|s| s.flows.iter().copied())
    }

    /// The lookup counters.
    pub fn stats(&self) -> DpclsStats {
        self.stats
    }

    /// Zeroes the lookup counters (not the subtables' hit counts, which rank them).
    pub fn clear_stats(&mut self) {
        self.stats = DpclsStats::default();
    }

    /// Installs the megaflow `m` with handle `flow`. A new mask gets a new subtable, ranked last.
    pub fn insert(&mut self, m: &Match, flow: F) -> Result<(), Exists> {
        let p = match self.subtables.iter().position(|s| s.has_mask(m)) {
            Some(p) => p,
            None => {
                self.subtables.push(Subtable::new(m));
                self.subtables.len() - 1
            }
        };
        let st = &mut self.subtables[p];
        let mut buf = [0u64; KEY_WORDS];
        let k = st.rule_words(m, &mut buf);
        let words = &buf[..k];
        let hash = words_hash(words);
        if st.find(hash, words).is_some() {
            return Err(Exists);
        }
        st.table.insert(hash, st.flows.len());
        st.words.extend_from_slice(words);
        st.flows.push(flow);
        Ok(())
    }

    /// Removes the megaflow whose match is exactly `m`; returns its handle. A subtable whose last
    /// rule goes is destroyed (the others keep their order).
    pub fn remove(&mut self, m: &Match) -> Option<F> {
        let p = self.subtables.iter().position(|s| s.has_mask(m))?;
        let st = &mut self.subtables[p];
        let mut buf = [0u64; KEY_WORDS];
        let k = st.rule_words(m, &mut buf);
        let hash = words_hash(&buf[..k]);
        let slot = st
            .table
            .find_slot(hash, &mut |r| st.words[r * k..r * k + k] == buf[..k])?;
        let r = (st.table.slots[slot] as u32 - 1) as usize;
        st.table.remove_slot(slot);
        let flow = st.flows.swap_remove(r);
        // The last rule moved into the hole: move its words too and repoint its slot.
        let last = st.flows.len();
        if r != last {
            st.words.copy_within(last * k..last * k + k, r * k);
            let moved = words_hash(&st.words[r * k..r * k + k]);
            st.table.renumber(moved, last, r);
        }
        st.words.truncate(last * k);
        if last == 0 {
            self.subtables.remove(p);
        }
        Some(flow)
    }

    /// The megaflow `key` matches, visiting subtables in rank order.
    ///
    /// There is no precomputed-hash parameter: each subtable hashes a different subset of the
    /// key, so the packet's hash (the EMC's) is of no use here.
    #[inline]
    pub fn lookup(&mut self, key: &FlowKey) -> Option<F> {
        for (rank, st) in self.subtables.iter_mut().enumerate() {
            let hash = st.mask_key(key, &mut self.scratch);
            if let Some(r) = st.find(hash, &self.scratch[..st.mask.len()]) {
                st.hits += 1;
                self.stats.hits += 1;
                self.stats.lookups += rank as u64 + 1;
                return Some(st.flows[r]);
            }
        }
        self.stats.misses += 1;
        None
    }

    /// Looks up every key of `keys`, writing each result to the same index of `out`; returns the
    /// number of hits. Subtables are visited in rank order and each probes only the keys still
    /// unmatched (a bitmap, as in OVS's `dpcls_lookup()`); the walk stops once all have matched.
    ///
    /// # Panics
    /// If `keys` and `out` differ in length.
    pub fn lookup_batch(&mut self, keys: &[&FlowKey], out: &mut [Option<F>]) -> usize {
        assert_eq!(keys.len(), out.len(), "one result slot per key");
        let mut hits = 0;
        for (keys, out) in keys.chunks(BATCH_MAX).zip(out.chunks_mut(BATCH_MAX)) {
            hits += self.lookup_burst(keys, out);
        }
        hits
    }

    /// [`Self::lookup_batch`] for at most [`BATCH_MAX`] keys.
    #[inline]
    fn lookup_burst(&mut self, keys: &[&FlowKey], out: &mut [Option<F>]) -> usize {
        let n = keys.len();
        debug_assert!(n <= BATCH_MAX && out.len() == n);
        out.fill(None);
        let mut pending = ((1u64 << n) - 1) as u32;
        for (rank, st) in self.subtables.iter_mut().enumerate() {
            if pending == 0 {
                break;
            }
            // As OVS does, masks of up to 5 words get a probe loop specialized for their word
            // count (fully unrolled, no bounds checks); larger ones take the generic loop.
            let found = match st.mask.len() {
                1 => st.probe_burst_n::<1>(keys, pending, out),
                2 => st.probe_burst_n::<2>(keys, pending, out),
                3 => st.probe_burst_n::<3>(keys, pending, out),
                4 => st.probe_burst_n::<4>(keys, pending, out),
                5 => st.probe_burst_n::<5>(keys, pending, out),
                _ => st.probe_burst(keys, pending, out, &mut self.scratch),
            };
            let c = u64::from(found.count_ones());
            st.hits += c;
            self.stats.lookups += c * (rank as u64 + 1);
            pending &= !found;
        }
        let missed = pending.count_ones() as usize;
        self.stats.hits += (n - missed) as u64;
        self.stats.misses += missed as u64;
        n - missed
    }

    /// Re-ranks the subtables by their hits since the last call (most first; ties keep their
    /// order) and resets the hit counts. The PMD calls this once a second.
    pub fn sort_subtables(&mut self) {
        // A stable sort: subtables without hits in this interval keep their relative order.
        self.subtables.sort_by_key(|s| core::cmp::Reverse(s.hits));
        for st in &mut self.subtables {
            st.hits = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::Mask;
    use std::net::Ipv4Addr;

    fn key(port: u32, dst: [u8; 4], tp_dst: u16) -> FlowKey {
        let mut k = FlowKey::new();
        k.set_in_port(port)
            .set_eth_type(0x0800)
            .set_nw_dst(Ipv4Addr::from(dst))
            .set_tp_dst(tp_dst);
        k
    }

    fn dst_mask(prefix: u32) -> Mask {
        let mut m = Mask::new();
        m.set_eth_type(0xffff).set_nw_dst(Ipv4Addr::from(
            u32::MAX.checked_shl(32 - prefix).unwrap_or(0),
        ));
        m
    }

    /// The probe index stays consistent through growth and back-shift deletions when runs
    /// cluster and wrap around the end of the slot array.
    #[test]
    fn rule_index_clusters_and_wraps() {
        let mut ix = RuleIndex::default();
        // Hashes whose low bits crowd the last buckets of every table size, so runs wrap.
        let hashes: Vec<u32> = (0..200u32).map(|i| (i << 16) | 0xfffe | (i & 1)).collect();
        for (r, &h) in hashes.iter().enumerate() {
            ix.insert(h, r);
        }
        let mut live: Vec<usize> = (0..hashes.len()).collect();
        let mut x = 12345u32;
        while !live.is_empty() {
            for &r in &live {
                assert_eq!(ix.find(hashes[r], |c| c == r), Some(r), "rule {r}");
            }
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let victim = live.swap_remove((x >> 8) as usize % live.len());
            let slot = ix.find_slot(hashes[victim], &mut |c| c == victim).unwrap();
            ix.remove_slot(slot);
            assert_eq!(ix.find(hashes[victim], |c| c == victim), None);
        }
        assert_eq!(ix.len, 0);
        assert!(ix.slots.iter().all(|&s| s == 0));
    }

    #[test]
    fn insert_lookup_remove() {
        let mut cls = Dpcls::<u32>::new();
        let m24 = Match::new(&key(1, [10, 0, 0, 0], 0), &dst_mask(24));
        let m16 = Match::new(&key(1, [10, 1, 0, 0], 0), &dst_mask(16));
        cls.insert(&m24, 24).unwrap();
        cls.insert(&m16, 16).unwrap();
        assert_eq!(cls.insert(&m24, 99), Err(Exists));
        assert_eq!((cls.len(), cls.n_subtables()), (2, 2));
        assert_eq!(cls.lookup(&key(5, [10, 0, 0, 7], 80)), Some(24));
        assert_eq!(cls.lookup(&key(5, [10, 1, 9, 7], 80)), Some(16));
        assert_eq!(cls.lookup(&key(5, [10, 2, 0, 7], 80)), None);
        assert_eq!(cls.remove(&m24), Some(24));
        assert_eq!(cls.remove(&m24), None);
        assert_eq!(cls.n_subtables(), 1, "empty subtable destroyed");
        assert_eq!(cls.lookup(&key(5, [10, 0, 0, 7], 80)), None);
        assert_eq!(cls.remove(&m16), Some(16));
        assert!(cls.is_empty());
        let s = cls.stats();
        assert_eq!((s.hits, s.misses), (2, 2));
    }

    #[test]
    fn subtable_hash_is_hash_masked() {
        let mut cls = Dpcls::<u32>::new();
        let mut mask = dst_mask(24);
        mask.set_ipv6_src("ffff::".parse().unwrap())
            .set_ct_tp_src(0xff00);
        let k = key(1, [10, 0, 0, 9], 7);
        let m = Match::new(&k, &mask);
        cls.insert(&m, 1).unwrap();
        let st = &cls.subtables[0];
        assert_eq!(
            st.mask_key(&k, &mut [0; KEY_WORDS]),
            k.hash_masked(m.mask(), HASH_BASIS)
        );
        let mut buf = [0; KEY_WORDS];
        let n = st.rule_words(&m, &mut buf);
        assert_eq!(words_hash(&buf[..n]), k.hash_masked(m.mask(), HASH_BASIS));
    }

    /// CRC32C without inversions is linear and `crc32c_u64(0, CRC_ZERO) == 0` (the word is the
    /// reflected polynomial), so two keys whose words differ by `CRC_ZERO << s` hash alike under
    /// any mask that covers those bits: only the word compare can tell them apart.
    const CRC_ZERO: u64 = 0x1_05ec_76f1;

    #[test]
    fn hash_collisions_are_resolved_by_the_compare() {
        assert_eq!(crc32c_u64(0, CRC_ZERO), 0);
        // Full-word fields at the mask's first, middle and last word.
        let mut mask = Mask::new();
        mask.set_tun_id(u64::MAX)
            .set_ipv6_src(u128::MAX.into())
            .set_tun_geneve_opt_bytes(244, &[0xff; 8]);
        let mut k1 = key(1, [10, 0, 0, 1], 80);
        k1.set_tun_id(7)
            .set_ipv6_src("2001:db8::1".parse().unwrap())
            .set_tun_geneve_opt_bytes(244, &[9; 8]);
        for word in [6, 14, 15, 63] {
            for shift in [0, 31] {
                let mut k2 = k1.clone();
                k2.set_word(word, k1.word(word) ^ (CRC_ZERO << shift));
                assert_eq!(k1.hash_masked(&mask, 0), k2.hash_masked(&mask, 0));
                let mut cls = Dpcls::new();
                let m1 = Match::new(&k1, &mask);
                let m2 = Match::new(&k2, &mask);
                cls.insert(&m1, 1u32).unwrap();
                assert_eq!(cls.lookup(&k2), None, "word {word}");
                cls.insert(&m2, 2).unwrap();
                assert_eq!((cls.lookup(&k1), cls.lookup(&k2)), (Some(1), Some(2)));
                assert_eq!(cls.remove(&m1), Some(1));
                assert_eq!((cls.lookup(&k1), cls.lookup(&k2)), (None, Some(2)));
            }
        }
    }

    #[test]
    fn match_all_mask_and_swap_remove() {
        let mut cls = Dpcls::<u32>::new();
        let any = Match::new(&FlowKey::new(), &Mask::new());
        cls.insert(&any, 7).unwrap();
        assert_eq!(cls.insert(&any, 8), Err(Exists));
        assert_eq!(cls.lookup(&key(1, [1, 2, 3, 4], 5)), Some(7));
        assert_eq!(cls.remove(&any), Some(7));
        // Many rules in one subtable, removed from the front so that every removal moves the
        // last rule.
        let ms: Vec<Match> = (0..100u8)
            .map(|i| Match::new(&key(1, [10, 0, i, 0], 0), &dst_mask(24)))
            .collect();
        for (i, m) in ms.iter().enumerate() {
            cls.insert(m, i as u32).unwrap();
        }
        for (i, m) in ms.iter().enumerate() {
            assert_eq!(cls.remove(m), Some(i as u32));
            for (j, _) in ms.iter().enumerate().skip(i + 1) {
                assert_eq!(cls.lookup(&key(2, [10, 0, j as u8, 1], 0)), Some(j as u32));
            }
        }
        assert!(cls.is_empty());
    }

    #[test]
    fn batch_longer_than_a_burst() {
        let mut cls = Dpcls::<u32>::new();
        for i in 0..40u8 {
            let m = Match::new(&key(1, [10, 0, i, 0], 0), &dst_mask(24));
            cls.insert(&m, u32::from(i)).unwrap();
        }
        let keys: Vec<FlowKey> = (0..70u8).map(|i| key(1, [10, 0, i, 3], 9)).collect();
        let refs: Vec<&FlowKey> = keys.iter().collect();
        let mut out = vec![Some(999); 70];
        assert_eq!(cls.lookup_batch(&refs, &mut out), 40);
        for (i, o) in out.iter().enumerate() {
            assert_eq!(*o, (i < 40).then_some(i as u32));
        }
        assert_eq!(cls.lookup_batch(&[], &mut []), 0);
    }
}
