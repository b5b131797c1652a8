//! A rule's match as the classifier stores it: only the words of the key its mask uses.
//!
//! A [`PipeMatch`] holds its key and mask at full width (two 512-byte flow key layouts and the
//! pipeline metadata, over a kilobyte), of which a rule's match uses a few words: an `ip` rule
//! on two addresses uses three of the 64. A table of 100 000 such rules stored at full width
//! takes well over 100 MB, and a walk of it (a dump, a delete) misses the cache on every rule.
//! [`CompactMatch`] keeps the words the mask uses, key and mask side by side, and the metadata
//! only when the mask has some, as a datapath subtable keeps only its mask's words
//! (OVS's `struct minimatch`). It converts back to a [`PipeMatch`] exactly.

use crate::pipekey::{PipeKey, PipeMatch, PipeMeta};

/// A [`PipeMatch`] in the words its mask uses. Two compact matches are equal exactly when
/// the matches they hold are.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CompactMatch {
    /// Bit `i` set: word `i` of the mask is not zero.
    map: u64,
    /// For each word of `map`, lowest first: the (masked) key's word, then the mask's.
    words: Box<[u64]>,
    /// The registers, `metadata` and `conj_id`, (key, mask), when the mask has any.
    meta: Option<Box<(PipeMeta, PipeMeta)>>,
}

impl CompactMatch {
    /// The words of `m` its mask uses.
    pub fn new(m: &PipeMatch) -> CompactMatch {
        let (k, mk) = (&m.key().dp, &m.mask().dp);
        let mut map = 0u64;
        let mut words = Vec::with_capacity(2 * mk.map().count_ones() as usize);
        for (i, w) in used_words(mk) {
            map |= 1 << i;
            words.extend([k.word(i) & w, w]);
        }
        let mask_meta = m.mask().meta;
        CompactMatch {
            map,
            words: words.into_boxed_slice(),
            meta: (!mask_meta.is_zero()).then(|| Box::new((m.key().meta, mask_meta))),
        }
    }

    /// (word index, key word, mask word) of each word the mask uses, lowest first.
    fn pairs(&self) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        let mut bits = self.map;
        self.words.chunks_exact(2).map(move |kw| {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            (i, kw[0], kw[1])
        })
    }

    /// (key, mask) of word `i`: zeros for a word the mask does not use.
    fn word(&self, i: usize) -> (u64, u64) {
        let bit = 1u64 << (i & 63);
        if self.map & bit == 0 {
            return (0, 0);
        }
        let at = 2 * (self.map & (bit - 1)).count_ones() as usize;
        (self.words[at], self.words[at + 1])
    }

    /// The key and mask metadata (zeros when the mask has none).
    fn meta(&self) -> (PipeMeta, PipeMeta) {
        self.meta.as_deref().copied().unwrap_or_default()
    }

    /// The `tun_metadata` fields whose presence the match matches (bit `n`).
    pub fn tun_md_matched(&self) -> u64 {
        self.meta.as_deref().map_or(0, |(_, m)| m.tun_md_present)
    }

    /// Whether the match matches every key.
    pub fn is_catchall(&self) -> bool {
        self.map == 0 && self.meta.is_none()
    }

    /// The full-width match.
    pub fn expand(&self) -> PipeMatch {
        let mut m = PipeMatch::catchall();
        self.expand_into(&mut m);
        m
    }

    /// Makes `out` the full-width match, reusing its storage (only the words the match uses
    /// are written).
    pub fn expand_into(&self, out: &mut PipeMatch) {
        let (key, mask) = out.parts_mut();
        key.dp.clear();
        mask.dp.clear();
        for (i, k, m) in self.pairs() {
            key.dp.set_word(i, k);
            mask.dp.set_word(i, m);
        }
        (key.meta, mask.meta) = self.meta();
    }

    /// Whether `key` agrees with the match on every masked bit.
    pub fn matches(&self, key: &PipeKey) -> bool {
        if !self.pairs().all(|(i, k, m)| key.dp.word(i) & m == k) {
            return false;
        }
        match self.meta.as_deref() {
            Some((k, m)) => key.meta.and(m) == *k,
            None => true,
        }
    }

    /// Whether this is the match `m`.
    pub fn is(&self, m: &PipeMatch) -> bool {
        let (k, mk) = (&m.key().dp, &m.mask().dp);
        let mut map = 0u64;
        for (i, w) in used_words(mk) {
            map |= 1 << i;
            if self.word(i) != (k.word(i) & w, w) {
                return false;
            }
        }
        map == self.map && self.meta() == (m.key().meta, m.mask().meta)
    }

    /// Whether a flow mod's match `spec` selects this match loosely (OpenFlow's non-strict
    /// selection): every bit `spec` matches, this matches too, with the same value.
    pub fn selected_by(&self, spec: &PipeMatch) -> bool {
        let (sk, sm) = (&spec.key().dp, &spec.mask().dp);
        let mut bits = sm.map();
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let w = sm.word(i);
            let (rk, rm) = self.word(i);
            if w & !rm != 0 || rk & w != sk.word(i) {
                return false;
            }
        }
        let sw = spec.mask().meta;
        if sw.is_zero() {
            return true;
        }
        let (rk, rw) = self.meta();
        let sk = spec.key().meta;
        rw.and(&sw) == sw && rk.and(&sw) == sk
    }
}

/// The words of mask `mk` that are not zero, with their indexes, lowest first.
fn used_words(mk: &flow::Mask) -> impl Iterator<Item = (usize, u64)> + '_ {
    let mut bits = mk.map();
    std::iter::from_fn(move || {
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let w = mk.word(i);
            if w != 0 {
                return Some((i, w));
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipekey::PipeMask;
    use std::net::Ipv4Addr;

    fn ip_match(src: [u8; 4], dst: [u8; 4], dst_len: u32, reg0: Option<u32>) -> PipeMatch {
        let mut k = PipeKey::new();
        k.dp.set_eth_type(0x0800)
            .set_nw_src(Ipv4Addr::from(src))
            .set_nw_dst(Ipv4Addr::from(dst));
        let mut m = PipeMask::new();
        m.dp.set_eth_type(0xffff)
            .set_nw_src(Ipv4Addr::from(u32::MAX))
            .set_nw_dst(Ipv4Addr::from(
                u32::MAX.checked_shl(32 - dst_len).unwrap_or(0),
            ));
        if let Some(r) = reg0 {
            k.meta.regs[0] = r;
            m.meta.regs[0] = u32::MAX;
        }
        PipeMatch::new(&k, &m)
    }

    #[test]
    fn a_compact_match_is_the_match_it_was_made_from() {
        for m in [
            PipeMatch::catchall(),
            ip_match([192, 168, 1, 2], [10, 1, 2, 3], 32, None),
            ip_match([192, 168, 1, 2], [10, 1, 2, 3], 16, Some(7)),
        ] {
            let c = CompactMatch::new(&m);
            assert_eq!(c.expand(), m);
            assert!(c.is(&m));
            // Expanding into a match that held another leaves nothing of it behind.
            let mut reused = ip_match([1, 1, 1, 1], [2, 2, 2, 2], 8, Some(9));
            c.expand_into(&mut reused);
            assert_eq!(reused, m);
        }
        let a = ip_match([192, 168, 1, 2], [10, 1, 2, 3], 32, None);
        let b = ip_match([192, 168, 1, 2], [10, 1, 2, 4], 32, None);
        let c = ip_match([192, 168, 1, 2], [10, 1, 2, 3], 32, Some(0));
        assert!(!CompactMatch::new(&a).is(&b));
        assert!(
            !CompactMatch::new(&a).is(&c),
            "a register matched on zero is matched"
        );
        assert_ne!(CompactMatch::new(&a), CompactMatch::new(&c));
        assert_eq!(CompactMatch::new(&a), CompactMatch::new(&a.clone()));
    }

    #[test]
    fn a_compact_match_matches_and_is_selected_as_the_full_one() {
        let rules = [
            ip_match([192, 168, 1, 2], [10, 1, 2, 3], 32, None),
            ip_match([192, 168, 1, 2], [10, 1, 0, 0], 16, Some(7)),
            PipeMatch::catchall(),
        ];
        let mut key = PipeKey::new();
        key.dp
            .set_eth_type(0x0800)
            .set_nw_src(Ipv4Addr::new(192, 168, 1, 2))
            .set_nw_dst(Ipv4Addr::new(10, 1, 2, 3))
            .set_tp_dst(80);
        let specs = [
            PipeMatch::catchall(),
            ip_match([192, 168, 1, 2], [10, 1, 0, 0], 16, None),
            ip_match([192, 168, 1, 2], [10, 1, 2, 3], 32, None),
            ip_match([192, 168, 1, 2], [10, 1, 0, 0], 16, Some(7)),
            ip_match([192, 168, 1, 2], [10, 1, 0, 0], 16, Some(8)),
        ];
        for regs in [0, 7] {
            key.meta.regs[0] = regs;
            for r in &rules {
                assert_eq!(CompactMatch::new(r).matches(&key), r.matches(&key), "{r:?}");
            }
        }
        for r in &rules {
            for s in &specs {
                assert_eq!(
                    CompactMatch::new(r).selected_by(s),
                    crate::bridge::selects(s, 0, false, r, 0),
                    "{s:?} selecting {r:?}"
                );
            }
        }
    }
}
