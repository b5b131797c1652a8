//! The exact-match cache (EMC) of a PMD thread, as OVS's userspace datapath has it
//! (`lib/dpif-netdev-dfc.h`, `emc_lookup()` / `emc_insert()` in `dpif-netdev.c`).
//!
//! [`EMC_ENTRIES`] = 8192 entries, 2-way: the 32-bit key hash (`Extracted::hash`, i.e.
//! [`FlowKey::hash`](flow::FlowWords::hash)) is cut into two 13-bit segments, each naming one
//! candidate slot. An entry holds a packet key, the flow handle it resolved to and the key's hash.
//! A lookup hits only if the stored hash is equal **and** the whole key compares equal
//! representation-exactly (same presence map, same present words, as [`flow::FlowWords::exact_eq`];
//! sound because extraction is deterministic), so it never returns a flow for another key. Because
//! the whole key is compared, the EMC is exact on every field, metadata included.
//!
//! # Layout
//! The stored hashes sit in their own array (32 KiB), apart from the entries: a probe reads two
//! hashes from it and touches an entry only when a hash agrees, so misses (the common case when
//! many flows thrash the cache) cost no entry cache lines. An entry is 128 bytes, aligned to a
//! cache line: presence map, flow handle, and up to [`EMC_KEY_WORDS`] = 14 present key words in
//! presence order; the first line holds the map, the handle and the first 6 words, which is all
//! of an in_port + Ethernet/IPv4/L4 key. Keys with more present words (rare: IPv6 over an IPv6
//! tunnel) are not cached. Total: [`Emc::memory_bytes`] = 1 MiB + 32 KiB per PMD (OVS's EMC is
//! ~4.9 MB).
//!
//! # Insertion
//! Probabilistic, as OVS since `4c30b24602c3`: [`Emc::insert`] stores with probability
//! 1/`insert_inv_prob` (default [`DEFAULT_INSERT_INV_PROB`] = 100; 1 = always; 0 = EMC disabled:
//! lookups miss and inserts do nothing), drawn from a per-EMC xorshift64* generator (not the
//! TSC, whose low bits repeat across a burst). Victim: the slot already holding the key, else an
//! empty slot, else the one with the smaller stored hash (a cheap pseudo-random choice, OVS's).
//!
//! # Invalidation
//! The EMC never holds a reference that keeps a flow alive; entries hold a `Copy` handle `F`.
//! The intended handle is a flow-table index plus a generation number that the flow table bumps
//! when it deletes the flow at that index (so a reused index gets a new handle). Every lookup
//! takes a `live` predicate and treats an entry whose flow is no longer live as empty (and
//! clears it), which is OVS's `!flow->dead` check: the datapath reads the flow on a hit anyway,
//! so the check costs no extra cache miss, and deleting a megaflow is O(1) with no sweep.
//! Because generations wrap, [`Emc::sweep`] clears dead entries incrementally (a few per PMD
//! housekeeping round, like OVS's `emc_cache_slow_sweep()`), bounding how long a stale entry
//! survives. For handles without generations, [`Emc::remove_flow`] / [`Emc::retain`] sweep the
//! whole table explicitly.
#![forbid(unsafe_code)]

use flow::FlowKey;

/// Number of entries (OVS's `EM_FLOW_HASH_ENTRIES`).
pub const EMC_ENTRIES: usize = 1 << EMC_SHIFT;
/// Bits of the hash per candidate slot (OVS's `EM_FLOW_HASH_SHIFT`).
const EMC_SHIFT: u32 = 13;
const EMC_MASK: u32 = EMC_ENTRIES as u32 - 1;
/// Most present key words an entry stores; keys with more are not cached.
pub const EMC_KEY_WORDS: usize = 14;
/// Default of `emc-insert-inv-prob`: insert one miss in 100.
pub const DEFAULT_INSERT_INV_PROB: u32 = 100;

/// The presence map of an empty entry. No cached key has it: it names 64 words and a cached key
/// has at most [`EMC_KEY_WORDS`].
const EMPTY_MAP: u64 = u64::MAX;

/// One cached key and its flow: two cache lines.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Entry<F> {
    map: u64,
    flow: F,
    /// The key's present words, in map order; unused tail words are zero.
    words: [u64; EMC_KEY_WORDS],
}

impl<F: Copy + Default> Entry<F> {
    #[inline]
    fn is_empty(&self) -> bool {
        self.map == EMPTY_MAP
    }

    /// Representation-exact comparison with `key`, which has at most [`EMC_KEY_WORDS`] present
    /// words (so it never equals an empty entry's map).
    #[inline(always)]
    fn holds(&self, key: &FlowKey) -> bool {
        if self.map != key.map() {
            return false;
        }
        let mut bits = self.map;
        let mut diff = 0;
        for &w in &self.words {
            if bits == 0 {
                break;
            }
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            diff |= key.raw_word(i) ^ w;
        }
        diff == 0
    }
}

/// The exact-match cache of one PMD thread. `F` is the flow handle (at most 8 bytes; see the
/// module documentation for the intended index + generation handle).
pub struct Emc<F> {
    /// The stored hash of every slot.
    hashes: Box<[u32; EMC_ENTRIES]>,
    entries: Box<[Entry<F>; EMC_ENTRIES]>,
    /// Occupied entries.
    len: usize,
    inv_prob: u32,
    /// Insert when the next random number is at most this (`u32::MAX / inv_prob`).
    insert_min: u32,
    rng: u64,
    /// Next slot [`Emc::sweep`] looks at.
    sweep_pos: usize,
}

impl<F: Copy + Default + PartialEq> Default for Emc<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Copy + Default + PartialEq> Emc<F> {
    /// An empty EMC with insertion probability 1/[`DEFAULT_INSERT_INV_PROB`] and a fixed seed.
    pub fn new() -> Self {
        Self::with_seed(0x5eed_0fe3)
    }

    /// An empty EMC whose insertion draws start from `seed` (e.g. the PMD's core id).
    pub fn with_seed(seed: u64) -> Self {
        const {
            assert!(core::mem::size_of::<F>() <= 8 && core::mem::align_of::<F>() <= 8);
            assert!(core::mem::size_of::<Entry<F>>() == 128);
        }
        let empty = Entry {
            map: EMPTY_MAP,
            flow: F::default(),
            words: [0; EMC_KEY_WORDS],
        };
        let entries: Box<[Entry<F>; EMC_ENTRIES]> = vec![empty; EMC_ENTRIES]
            .into_boxed_slice()
            .try_into()
            .unwrap_or_else(|_| unreachable!());
        let hashes: Box<[u32; EMC_ENTRIES]> = vec![0; EMC_ENTRIES]
            .into_boxed_slice()
            .try_into()
            .unwrap_or_else(|_| unreachable!());
        let mut emc = Emc {
            hashes,
            entries,
            len: 0,
            inv_prob: 0,
            insert_min: 0,
            // splitmix64 of the seed: any seed, 0 included, gives a good non-zero state.
            rng: splitmix64(seed) | 1,
            sweep_pos: 0,
        };
        emc.set_insert_inv_prob(DEFAULT_INSERT_INV_PROB);
        emc
    }

    /// Bytes of table memory: the entries plus the hash array.
    pub const fn memory_bytes() -> usize {
        core::mem::size_of::<[Entry<F>; EMC_ENTRIES]>() + core::mem::size_of::<[u32; EMC_ENTRIES]>()
    }

    /// Sets `emc-insert-inv-prob`: insert with probability 1/`n`; 1 always; 0 disables the EMC.
    pub fn set_insert_inv_prob(&mut self, n: u32) {
        self.inv_prob = n;
        self.insert_min = u32::MAX.checked_div(n).unwrap_or(0);
    }

    /// The current `emc-insert-inv-prob`.
    pub fn insert_inv_prob(&self) -> u32 {
        self.inv_prob
    }

    /// Whether lookups and inserts are on (`insert_inv_prob != 0`).
    pub fn is_enabled(&self) -> bool {
        self.inv_prob != 0
    }

    /// Occupied entries (`emc entries` of `pmd-perf-show`; dead ones count until cleared).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is occupied.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The two candidate slots of `hash`.
    #[inline(always)]
    fn slots(hash: u32) -> [usize; 2] {
        [
            (hash & EMC_MASK) as usize,
            ((hash >> EMC_SHIFT) & EMC_MASK) as usize,
        ]
    }

    #[inline(always)]
    fn cacheable(key: &FlowKey) -> bool {
        key.map().count_ones() as usize <= EMC_KEY_WORDS
    }

    fn clear_slot(&mut self, slot: usize) {
        let e = &mut self.entries[slot];
        if !e.is_empty() {
            e.map = EMPTY_MAP;
            self.len -= 1;
        }
    }

    /// The flow cached for `key` (whose [`FlowKey::hash`](flow::FlowWords::hash) is `hash`), if its
    /// flow is still `live`. An entry whose flow is no longer live is cleared and reported as a
    /// miss.
    #[inline]
    pub fn lookup(
        &mut self,
        key: &FlowKey,
        hash: u32,
        mut live: impl FnMut(F) -> bool,
    ) -> Option<F> {
        if self.inv_prob == 0 || !Self::cacheable(key) {
            return None;
        }
        for slot in Self::slots(hash) {
            if self.hashes[slot] == hash && self.entries[slot].holds(key) {
                let flow = self.entries[slot].flow;
                if live(flow) {
                    return Some(flow);
                }
                self.clear_slot(slot);
                return None;
            }
        }
        None
    }

    /// [`Self::lookup`] for each key of a batch (`keys[i]` with hash `hashes[i]`, result in
    /// `out[i]`); returns the number of hits.
    ///
    /// # Panics
    /// If the three slices differ in length.
    pub fn lookup_batch(
        &mut self,
        keys: &[&FlowKey],
        hashes: &[u32],
        out: &mut [Option<F>],
        mut live: impl FnMut(F) -> bool,
    ) -> usize {
        assert!(keys.len() == hashes.len() && keys.len() == out.len());
        let mut hits = 0;
        for ((k, &h), o) in keys.iter().zip(hashes).zip(out.iter_mut()) {
            *o = self.lookup(k, h, &mut live);
            hits += usize::from(o.is_some());
        }
        hits
    }

    /// Caches `key` (hash `hash`) → `flow` with probability 1/`insert_inv_prob`; returns whether
    /// it did. Keys with more than [`EMC_KEY_WORDS`] present words are never cached.
    #[inline]
    pub fn insert(&mut self, key: &FlowKey, hash: u32, flow: F) -> bool {
        if self.inv_prob == 0 || self.next_random() > self.insert_min {
            return false;
        }
        self.insert_now(key, hash, flow)
    }

    fn insert_now(&mut self, key: &FlowKey, hash: u32, flow: F) -> bool {
        if !Self::cacheable(key) {
            return false;
        }
        let [a, b] = Self::slots(hash);
        for slot in [a, b] {
            if self.hashes[slot] == hash && self.entries[slot].holds(key) {
                self.entries[slot].flow = flow;
                return true;
            }
        }
        let victim = if self.entries[a].is_empty() {
            a
        } else if self.entries[b].is_empty() || self.hashes[b] < self.hashes[a] {
            b
        } else {
            a
        };
        if self.entries[victim].is_empty() {
            self.len += 1;
        }
        let e = &mut self.entries[victim];
        e.map = key.map();
        e.flow = flow;
        e.words = [0; EMC_KEY_WORDS];
        let mut bits = e.map;
        for w in &mut e.words {
            if bits == 0 {
                break;
            }
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            *w = key.raw_word(i);
        }
        self.hashes[victim] = hash;
        true
    }

    /// Clears the entries whose flow `keep` rejects; returns how many it cleared. A full sweep
    /// (8192 entries): for batches of deletions of handles that have no generation.
    pub fn retain(&mut self, mut keep: impl FnMut(F) -> bool) -> usize {
        let mut cleared = 0;
        for slot in 0..EMC_ENTRIES {
            let e = &self.entries[slot];
            if !e.is_empty() && !keep(e.flow) {
                self.clear_slot(slot);
                cleared += 1;
            }
        }
        cleared
    }

    /// Clears every entry that resolves to `flow`; returns how many.
    pub fn remove_flow(&mut self, flow: F) -> usize {
        self.retain(|f| f != flow)
    }

    /// Looks at the next `n` slots (round robin) and clears those whose flow is no longer
    /// `live`; returns how many it cleared. Called a little at a time from PMD housekeeping, it
    /// bounds the life of stale entries, so a flow-table generation that wraps cannot resurrect
    /// one.
    pub fn sweep(&mut self, n: usize, mut live: impl FnMut(F) -> bool) -> usize {
        let mut cleared = 0;
        for _ in 0..n.min(EMC_ENTRIES) {
            let slot = self.sweep_pos;
            self.sweep_pos = (slot + 1) % EMC_ENTRIES;
            let e = &self.entries[slot];
            if !e.is_empty() && !live(e.flow) {
                self.clear_slot(slot);
                cleared += 1;
            }
        }
        cleared
    }

    /// Empties the cache.
    pub fn clear(&mut self) {
        for e in self.entries.iter_mut() {
            e.map = EMPTY_MAP;
        }
        self.len = 0;
    }

    /// xorshift64* (Vigna): a few instructions, good enough for a coin flip per insertion.
    #[inline(always)]
    fn next_random(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
}

fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

// Two cache lines per entry with a 4- or 8-byte handle; 1 MiB of entries plus 32 KiB of hashes.
const _: () = assert!(core::mem::size_of::<Entry<u32>>() == 128);
const _: () = assert!(core::mem::size_of::<Entry<u64>>() == 128);
const _: () = assert!(Emc::<u64>::memory_bytes() == (1 << 20) + (32 << 10));
