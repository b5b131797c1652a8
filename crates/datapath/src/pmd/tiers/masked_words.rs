//! The compare the fast-path tiers share: some of a megaflow's mask words with the masked
//! key's ([`MaskedWords`]), tested against a key with a few loads and no branch per word,
//! saying what `Match::matches` says of those words (a word the key lacks reads as zero).

use flow::{FlowKey, Match};

/// Most mask words of a tracked megaflow (more go through the EMC and dpcls).
pub(super) const MAX_WORDS: usize = 8;

/// Some of a megaflow's mask words with the masked key's, in a form that is quick to test
/// against a key.
#[derive(Clone, Debug)]
pub(super) struct MaskedWords<const N: usize = MAX_WORDS> {
    /// Words whose masked value is not zero: a key must have them.
    need: u64,
    /// The mask's words: first the `n_need` words of `need` (compared as they are), then those
    /// whose value is zero (compared when the key has them; an absent word reads as zero).
    n: usize,
    n_need: usize,
    idx: [usize; N],
    mask: [u64; N],
    val: [u64; N],
}

impl<const N: usize> MaskedWords<N> {
    /// The words of `m`'s mask in `words` (a word bit map), if there are at most `N`.
    pub(super) fn new(m: &Match, words: u64) -> Option<MaskedWords<N>> {
        let mut bits = m.mask().map() & words;
        if bits.count_ones() as usize > N {
            return None;
        }
        let mut d = MaskedWords {
            need: 0,
            n: 0,
            n_need: 0,
            idx: [0; N],
            mask: [0; N],
            val: [0; N],
        };
        // The match's key is stored masked.
        let mut words: Vec<(usize, u64, u64)> = Vec::with_capacity(N);
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            words.push((i, m.mask().raw_word(i), m.key().word(i)));
        }
        words.sort_by_key(|&(_, _, val)| val == 0);
        for (j, &(i, mask, val)) in words.iter().enumerate() {
            (d.idx[j], d.mask[j], d.val[j]) = (i, mask, val);
            if val != 0 {
                d.need |= 1 << i;
                d.n_need += 1;
            }
        }
        d.n = words.len();
        Some(d)
    }

    /// Whether `key` agrees with these words on every masked bit (what `Match::matches`
    /// says of them): words the key lacks read as zero, so they can only match a zero value.
    #[inline(always)]
    pub(super) fn matches(&self, key: &FlowKey) -> bool {
        let map = key.map();
        if self.need & !map != 0 {
            return false;
        }
        let n = self.n.min(N);
        let n_need = self.n_need.min(n);
        let mut diff = 0;
        for j in 0..n_need {
            diff |= (key.raw_word(self.idx[j]) & self.mask[j]) ^ self.val[j];
        }
        for j in n_need..n {
            let i = self.idx[j];
            if map & (1 << i) != 0 {
                diff |= key.raw_word(i) & self.mask[j];
            }
        }
        diff == 0
    }
}

/// Strategies for the fast paths' property tests: key and mask words.
#[cfg(test)]
pub(super) mod strategies {
    pub(in crate::pmd) fn words() -> impl proptest::strategy::Strategy<Value = Vec<(usize, u64)>> {
        words_of(16, 10)
    }

    /// Up to `most` (word index below `below`, value) pairs.
    pub(in crate::pmd) fn words_of(
        below: usize,
        most: usize,
    ) -> impl proptest::strategy::Strategy<Value = Vec<(usize, u64)>> {
        use proptest::prelude::*;
        let value = prop_oneof![Just(0u64), Just(u64::MAX), 0u64..4, any::<u64>()];
        proptest::collection::vec((0usize..below, value), 0..most)
    }

    pub(in crate::pmd) fn build(w: &[(usize, u64)]) -> flow::FlowWords {
        let mut f = flow::FlowWords::new();
        for &(i, v) in w {
            f.set_word(i, v);
        }
        f
    }
}
