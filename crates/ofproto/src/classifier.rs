//! The OpenFlow table classifier: rules with priorities over [`PipeMatch`]es, looked up by tuple
//! space search, and the record of which key bits a lookup consulted.
//!
//! A lookup does two jobs: find the highest-priority rule that matches a key, and say which
//! bits of the key the answer depended on (OR-ed into a caller's [`PipeMask`], the *wildcards*).
//! The second job decides how wide the datapath's megaflows are, so the classifier works to
//! consult as few bits as it can, with the three techniques of OVS's classifier
//! (`lib/classifier.c`):
//!
//! * **Subtables in priority order.** Rules are grouped by mask; subtables are visited from the
//!   highest `max_priority` down, and the walk stops once the best match found outranks every
//!   rule of the remaining subtables, which are then never consulted.
//! * **Staged lookup.** Each subtable also indexes its rules by the cumulative stages of its
//!   mask: metadata, then L2, then L3, then everything (L4). A key that is not in a stage's index
//!   misses the subtable having consulted only that stage's bits, so a UDP packet that misses a
//!   `tcp,tp_dst=80` subtable on `nw_proto` does not unwildcard `tp_dst`.
//! * **Prefix tries.** For `nw_src`, `nw_dst`, `ipv6_src`, `ipv6_dst`, `tp_src` and `tp_dst`, a
//!   binary trie holds the prefix of every rule whose mask on that field is a prefix. Before
//!   probing a subtable whose mask has a prefix of length L on such a field, the key's value is
//!   walked down the trie: if no rule of the table has a prefix of length L that matches it, the
//!   subtable cannot match, and only the bits the walk examined are consulted (so a table of
//!   `/16` and `/24` routes yields `/16`-wide megaflows for addresses outside every `/24`).
//!   A trie is used only when the key meets the field's prerequisite (IPv4 or ARP for `nw_*`,
//!   IPv6 for `ipv6_*`, TCP, UDP or SCTP for `tp_*`), whose fields are then consulted too.
//!
//! Rules are identified by [`RuleId`]s (slab indices, reused after removal). A rule with the
//! same match and priority as an existing one is a duplicate: [`Classifier::find_exact`] finds
//! it, so the caller can replace it as OpenFlow's add semantics require.
//!
//! **Versions.** As in OVS's classifier, every rule is visible from the [`Version`] it was
//! added in up to (not including) the version it is removed in, and lookups see the rules of
//! one version: [`Classifier::lookup`] the table's published version, [`Classifier::lookup_in`]
//! any. A bundle stages its changes in the next version ([`Classifier::insert_in`],
//! [`Classifier::hide_in`]) while packets go on seeing the current one, and its commit
//! publishes that version in one step ([`Classifier::set_version`]); a failed bundle takes its
//! staged rules out and un-hides the rules it hid, leaving the table as it was. Rules staged
//! but not yet visible still take part in the subtables, stage indexes and tries: they can only
//! make a lookup consult more bits, never fewer, so the wildcards stay sound.

use std::collections::HashMap;

use flow::key::FIELDS;

use crate::pipekey::{PipeKey, PipeMask, PipeMatch, PipeMeta};

mod compact;
mod conjunction;
pub use compact::CompactMatch;
pub use conjunction::Conjunctive;

/// A rule's handle in its classifier.
pub type RuleId = usize;

#[cfg(test)]
thread_local! {
    /// Rules examined by this thread's classifier operations, for the tests that bound the
    /// work of a flow mod by operation counts rather than time.
    pub(crate) static VISITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts one rule examined (tests only; nothing in other builds).
#[inline(always)]
fn visit() {
    #[cfg(test)]
    VISITS.with(|v| v.set(v.get() + 1));
}

/// A version of a table's contents (OVS's `ovs_version_t`): lookups see the rules visible in
/// one version.
pub type Version = u64;

/// The removal version of a rule not being removed.
pub const VERSION_NEVER: Version = Version::MAX;

/// Fields with a prefix trie: (name in the flow key layout, width in bits).
const TRIE_FIELDS: [(&str, u32); 6] = [
    ("nw_src", 32),
    ("nw_dst", 32),
    ("ipv6_src", 128),
    ("ipv6_dst", 128),
    ("tp_src", 16),
    ("tp_dst", 16),
];

/// The lookup stage of each trie field (2 = L3, 3 = L4).
const TRIE_STAGE: [usize; TRIE_FIELDS.len()] = [2, 2, 2, 2, 3, 3];

/// Lookup stages: every field of the flow key layout belongs to one (metadata otherwise).
const L2_FIELDS: &[&str] = &[
    "eth_dst",
    "eth_type",
    "eth_src",
    "vlan_tci",
    "vlan_tpid",
    "vlan2_tpid",
    "vlan2_tci",
    "mpls_lse0",
    "mpls_lse1",
    "mpls_lse2",
];
const L3_FIELDS: &[&str] = &[
    "nw_src",
    "nw_dst",
    "nw_proto",
    "nw_tos",
    "nw_ttl",
    "nw_frag",
    "ipv6_label",
    "ipv6_src",
    "ipv6_dst",
    "nd_target",
    "arp_sha",
    "arp_tha",
    "tcp_flags",
];
const L4_FIELDS: &[&str] = &["tp_src", "tp_dst"];

fn field(name: &str) -> (usize, usize) {
    let d = FIELDS
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("flow key field {name}"));
    (d.offset, d.len)
}

/// The mask with every bit of the named fields set.
fn region(names: &[&str]) -> PipeMask {
    let mut m = PipeMask::new();
    for n in names {
        let (ofs, len) = field(n);
        m.dp.set_bytes_at(ofs, &[0xff; 16][..len]);
    }
    m
}

/// Bitwise AND of two masks.
fn and(a: &PipeMask, b: &PipeMask) -> PipeMask {
    let mut out = PipeMask::new();
    let mut m = a.dp.map() & b.dp.map();
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        let v = a.dp.word(i) & b.dp.word(i);
        if v != 0 {
            out.dp.set_word(i, v);
        }
    }
    out.meta = a.meta.and(&b.meta);
    out
}

/// Whether every bit of `a` is in `b` (`==` on masks compares values, so absent and zero words
/// are alike).
fn subset(a: &PipeMask, b: &PipeMask) -> bool {
    and(a, b) == *a
}

/// The cumulative stage regions: metadata; + L2; + L3 (L4 is the whole mask).
fn stage_regions() -> &'static [PipeMask; 3] {
    use std::sync::OnceLock;
    static R: OnceLock<[PipeMask; 3]> = OnceLock::new();
    R.get_or_init(|| {
        let packet: Vec<&str> = L2_FIELDS
            .iter()
            .chain(L3_FIELDS)
            .chain(L4_FIELDS)
            .copied()
            .collect();
        // Metadata: every byte of the layout that is not a packet field, plus registers.
        let mut meta = PipeMask::new();
        for w in 0..flow::key::KEY_WORDS {
            meta.dp.set_word(w, u64::MAX);
        }
        let pkt = region(&packet);
        for w in 0..flow::key::KEY_WORDS {
            meta.dp.set_word(w, !pkt.dp.word(w));
        }
        meta.meta = PipeMeta {
            regs: [u32::MAX; 16],
            metadata: u64::MAX,
            conj_id: u32::MAX,
            skb_priority: u32::MAX,
            tun_md_present: u64::MAX,
            tun_md_tail: u32::MAX,
        };
        let mut l2 = meta.clone();
        l2.union_with(&region(L2_FIELDS));
        let mut l3 = l2.clone();
        l3.union_with(&region(L3_FIELDS));
        [meta, l2, l3]
    })
}

/// Hash of `key` under `mask` (registers included).
fn hash_masked(key: &PipeKey, mask: &PipeMask) -> u64 {
    let mut h = u64::from(key.dp.hash_masked(&mask.dp, 0));
    let m = key.meta.and(&mask.meta);
    if !m.is_zero() {
        for r in m.regs {
            h = (h ^ u64::from(r)).wrapping_mul(0x100_0000_01b3);
        }
        h = (h ^ m.metadata).wrapping_mul(0x100_0000_01b3);
        h = (h ^ u64::from(m.conj_id)).wrapping_mul(0x100_0000_01b3);
        h = (h ^ m.tun_md_present).wrapping_mul(0x100_0000_01b3);
        h = (h ^ u64::from(m.tun_md_tail)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// A field's value (up to 128 bits, left-aligned at bit 127) from a flow key or mask.
fn read_field(w: &flow::FlowWords, ofs: usize, nbits: u32) -> u128 {
    let mut b = [0u8; 16];
    let len = nbits as usize / 8;
    w.bytes_at(ofs, &mut b[..len]);
    u128::from_be_bytes(b)
}

/// The prefix length of a (left-aligned) mask, if it is a prefix.
fn prefix_len(m: u128) -> Option<u32> {
    let l = m.leading_ones();
    (l == 128 || m << l == 0).then_some(l)
}

/// A binary trie of prefixes (values left-aligned in a u128). A node no prefix ends at or
/// below is unlinked when its last prefix goes and reused by the next insert, so the trie
/// holds the prefixes of the rules there now, however many came and went.
#[derive(Clone, Default)]
struct Trie {
    /// Node 0 is the root. `child` 0 means none.
    nodes: Vec<TrieNode>,
    /// Unlinked nodes, for reuse.
    free: Vec<u32>,
}

#[derive(Clone, Copy, Default)]
struct TrieNode {
    child: [u32; 2],
    /// Prefixes ending here.
    here: u32,
    /// Prefixes ending here or below.
    below: u32,
}

fn bit(v: u128, i: u32) -> usize {
    ((v >> (127 - i)) & 1) as usize
}

impl Trie {
    fn insert(&mut self, v: u128, plen: u32) {
        if self.nodes.is_empty() {
            self.nodes.push(TrieNode::default());
        }
        let mut n = 0usize;
        self.nodes[0].below += 1;
        for i in 0..plen {
            let b = bit(v, i);
            let c = self.nodes[n].child[b];
            n = if c == 0 {
                let c = match self.free.pop() {
                    Some(c) => {
                        self.nodes[c as usize] = TrieNode::default();
                        c as usize
                    }
                    None => {
                        self.nodes.push(TrieNode::default());
                        self.nodes.len() - 1
                    }
                };
                self.nodes[n].child[b] = c as u32;
                c
            } else {
                c as usize
            };
            self.nodes[n].below += 1;
        }
        self.nodes[n].here += 1;
    }

    fn remove(&mut self, v: u128, plen: u32) {
        let mut n = 0usize;
        self.nodes[0].below -= 1;
        // The first node of the path left with no prefix, and its parent: it and the rest
        // of the path below it are unlinked (nothing else hangs there: every other node
        // under it went when its own last prefix did).
        let mut cut: Option<(usize, usize)> = None;
        for i in 0..plen {
            let parent = n;
            n = self.nodes[n].child[bit(v, i)] as usize;
            self.nodes[n].below -= 1;
            if cut.is_none() && self.nodes[n].below == 0 {
                cut = Some((parent, i as usize));
            }
        }
        self.nodes[n].here -= 1;
        if let Some((parent, depth)) = cut {
            let b = bit(v, depth as u32);
            let mut c = self.nodes[parent].child[b];
            self.nodes[parent].child[b] = 0;
            for i in depth as u32 + 1..=plen {
                self.free.push(c);
                if i < plen {
                    c = self.nodes[c as usize].child[bit(v, i)];
                }
            }
        }
    }

    fn child(&self, n: usize, b: usize) -> Option<usize> {
        let c = self.nodes[n].child[b] as usize;
        (c != 0 && self.nodes[c].below > 0).then_some(c)
    }

    /// Walks `v` down the trie: the prefix lengths (bit `l - 1` for length `l`) of the rules
    /// whose prefix matches `v`, and how many leading bits of `v` the walk had to examine to
    /// know that no other prefix matches.
    fn lookup(&self, v: u128, nbits: u32) -> (u128, u32) {
        let mut plens = 0u128;
        if self.nodes.is_empty() || self.nodes[0].below == 0 {
            return (0, 0);
        }
        let mut n = 0usize;
        let mut depth = 0;
        loop {
            if depth > 0 && self.nodes[n].here > 0 {
                plens |= 1 << (depth - 1);
            }
            if depth == nbits {
                return (plens, nbits);
            }
            let b = bit(v, depth);
            match self.child(n, b) {
                Some(c) => {
                    n = c;
                    depth += 1;
                }
                // Nothing longer exists at all: the bits so far decided it.
                None if self.child(n, 1 - b).is_none() => return (plens, depth),
                // Longer prefixes exist, but on the other side of this bit.
                None => return (plens, depth + 1),
            }
        }
    }
}

struct Entry<T> {
    m: CompactMatch,
    priority: u16,
    value: T,
    /// Visible in versions `added..removed`.
    added: Version,
    removed: Version,
}

impl<T> Entry<T> {
    fn visible_in(&self, v: Version) -> bool {
        self.added <= v && v < self.removed
    }
}

struct Subtable {
    mask: PipeMask,
    /// Cumulative stage masks that add bits before the full mask, with their stage (0
    /// metadata, 1 L2, 2 L3) and the count of rules per stage hash.
    stages: Vec<(usize, PipeMask, HashMap<u64, u32>)>,
    /// Full-mask hash → rule ids, highest priority first.
    rules: HashMap<u64, Vec<RuleId>>,
    n_rules: usize,
    /// How many rules of each priority: the highest is `max_priority`, kept without a scan
    /// of the rules when one goes.
    priorities: std::collections::BTreeMap<u16, u32>,
    max_priority: u16,
    /// Per trie field: the prefix length of this mask on it (0 when not matched or not a
    /// prefix: such subtables are not pruned by that trie).
    plens: [u32; TRIE_FIELDS.len()],
}

impl Subtable {
    fn new(mask: &PipeMask) -> Subtable {
        let mut stages = Vec::new();
        let mut prev = PipeMask::new();
        for (i, r) in stage_regions().iter().enumerate() {
            let s = and(mask, r);
            if !subset(&s, &prev) && !subset(mask, &s) {
                stages.push((i, s.clone(), HashMap::new()));
                prev = s;
            }
        }
        let mut plens = [0; TRIE_FIELDS.len()];
        for (p, (name, nbits)) in plens.iter_mut().zip(TRIE_FIELDS) {
            let (ofs, _) = field(name);
            *p = prefix_len(read_field(&mask.dp, ofs, nbits)).unwrap_or(0);
        }
        Subtable {
            mask: mask.clone(),
            stages,
            rules: HashMap::new(),
            n_rules: 0,
            priorities: Default::default(),
            max_priority: 0,
            plens,
        }
    }
}

/// The prerequisite of each trie field: whether `key` meets it, having consulted the fields
/// that decide it.
fn trie_prereq(t: usize, key: &PipeKey, wc: &mut PipeMask) -> bool {
    let et = key.dp.eth_type();
    wc.dp.set_eth_type(0xffff);
    match t {
        0 | 1 => et == 0x0800 || et == 0x0806,
        2 | 3 => et == 0x86dd,
        _ => {
            if et != 0x0800 && et != 0x86dd {
                return false;
            }
            wc.dp.set_nw_proto(0xff);
            matches!(key.dp.nw_proto(), 6 | 17 | 132)
        }
    }
}

/// An OpenFlow table's rules. `T` is the caller's per-rule data (actions, counters).
pub struct Classifier<T> {
    entries: Vec<Option<Entry<T>>>,
    free: Vec<RuleId>,
    /// Highest `max_priority` first.
    subtables: Vec<Subtable>,
    tries: [Trie; TRIE_FIELDS.len()],
    len: usize,
    /// The version [`Self::lookup`] sees: the published one.
    version: Version,
}

impl<T> Default for Classifier<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Classifier<T> {
    /// An empty table.
    pub fn new() -> Self {
        Classifier {
            entries: Vec::new(),
            free: Vec::new(),
            subtables: Vec::new(),
            tries: Default::default(),
            len: 0,
            version: 0,
        }
    }

    /// The published version: what [`Self::lookup`], [`Self::iter`] and [`Self::find_exact`]
    /// see, and what [`Self::insert`] adds in.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Publishes `v`: from now on lookups see the rules visible in it.
    pub fn set_version(&mut self, v: Version) {
        self.version = v;
    }

    /// Number of rules (those staged in or hidden from a later version included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table has no rule.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of subtables (distinct masks).
    pub fn n_subtables(&self) -> usize {
        self.subtables.len()
    }

    /// The rule `id`: its match, priority and data.
    pub fn get(&self, id: RuleId) -> Option<(&CompactMatch, u16, &T)> {
        visit();
        let e = self.entries.get(id)?.as_ref()?;
        Some((&e.m, e.priority, &e.value))
    }

    /// The data of rule `id`, mutably.
    pub fn get_mut(&mut self, id: RuleId) -> Option<&mut T> {
        Some(&mut self.entries.get_mut(id)?.as_mut()?.value)
    }

    /// Every rule of the published version, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (RuleId, &CompactMatch, u16, &T)> + '_ {
        self.iter_in(self.version)
    }

    /// Every rule visible in version `v`, in no particular order.
    pub fn iter_in(
        &self,
        v: Version,
    ) -> impl Iterator<Item = (RuleId, &CompactMatch, u16, &T)> + '_ {
        self.entries.iter().enumerate().filter_map(move |(i, e)| {
            visit();
            e.as_ref()
                .filter(|e| e.visible_in(v))
                .map(|e| (i, &e.m, e.priority, &e.value))
        })
    }

    /// The rules visible in version `v` whose match is at least as specific as `m` (OpenFlow's
    /// loose selection: every bit `m` matches, the rule matches with the same value), in no
    /// particular order. See [`Self::for_each_selected`].
    pub fn select_in(&self, m: &PipeMatch, v: Version) -> Vec<RuleId> {
        let mut out = Vec::new();
        self.for_each_selected(m, v, |id, _, _| out.push(id));
        out
    }

    /// Calls `f` with each rule visible in version `v` whose match is at least as specific as
    /// `m` (its id, priority and data). Only the subtables whose mask covers `m`'s are
    /// searched, by hash when the mask is `m`'s own; when the subtables to search whole hold
    /// most of the table (a dump, a delete of every `ip` flow), the rules are walked in id
    /// order instead, which reads the rule slots one after the other rather than at random.
    pub fn for_each_selected(&self, m: &PipeMatch, v: Version, mut f: impl FnMut(RuleId, u16, &T)) {
        let whole: usize = self
            .subtables
            .iter()
            .filter(|st| st.mask != *m.mask() && subset(m.mask(), &st.mask))
            .map(|st| st.n_rules)
            .sum();
        if whole > self.len / 2 {
            for (id, e) in self.entries.iter().enumerate() {
                visit();
                if let Some(e) = e
                    && e.visible_in(v)
                    && e.m.selected_by(m)
                {
                    f(id, e.priority, &e.value);
                }
            }
            return;
        }
        for st in &self.subtables {
            if !subset(m.mask(), &st.mask) {
                continue;
            }
            let ids: Box<dyn Iterator<Item = &RuleId>> = if st.mask == *m.mask() {
                Box::new(
                    st.rules
                        .get(&hash_masked(m.key(), m.mask()))
                        .into_iter()
                        .flatten(),
                )
            } else {
                Box::new(st.rules.values().flatten())
            };
            for &id in ids {
                visit();
                let e = self.entries[id].as_ref().expect("indexed rules exist");
                if e.visible_in(v) && e.m.selected_by(m) {
                    f(id, e.priority, &e.value);
                }
            }
        }
    }

    /// The rule of the published version with exactly this match and priority.
    pub fn find_exact(&self, m: &PipeMatch, priority: u16) -> Option<RuleId> {
        self.find_exact_in(m, priority, self.version)
    }

    /// The rule visible in version `v` with exactly this match and priority.
    pub fn find_exact_in(&self, m: &PipeMatch, priority: u16, v: Version) -> Option<RuleId> {
        let st = self.subtables.iter().find(|s| s.mask == *m.mask())?;
        let h = hash_masked(m.key(), m.mask());
        st.rules.get(&h)?.iter().copied().find(|&id| {
            visit();
            let e = self.entries[id].as_ref().expect("indexed rules exist");
            e.priority == priority && e.visible_in(v) && e.m.is(m)
        })
    }

    /// Whether rule `id` is visible in version `v`.
    pub fn visible_in(&self, id: RuleId, v: Version) -> bool {
        self.entries
            .get(id)
            .and_then(Option::as_ref)
            .is_some_and(|e| e.visible_in(v))
    }

    /// Hides rule `id` from version `v` on (a bundle's delete or replacement, staged);
    /// [`VERSION_NEVER`] makes it visible again (the bundle failed).
    pub fn hide_in(&mut self, id: RuleId, v: Version) {
        if let Some(Some(e)) = self.entries.get_mut(id) {
            e.removed = v;
        }
    }

    /// Adds a rule visible in the published version on (the caller handles duplicates, see
    /// [`Self::find_exact`]).
    pub fn insert(&mut self, m: PipeMatch, priority: u16, value: T) -> RuleId {
        self.insert_in(m, priority, value, self.version)
    }

    /// Adds a rule visible from version `v` on: staged, while `v` is later than the published
    /// version.
    pub fn insert_in(&mut self, m: PipeMatch, priority: u16, value: T, v: Version) -> RuleId {
        let p = match self.subtables.iter().position(|s| s.mask == *m.mask()) {
            Some(p) => p,
            None => {
                self.subtables.push(Subtable::new(m.mask()));
                self.subtables.len() - 1
            }
        };
        let id = self.free.pop().unwrap_or_else(|| {
            self.entries.push(None);
            self.entries.len() - 1
        });
        let st = &mut self.subtables[p];
        for (_, sm, counts) in &mut st.stages {
            *counts.entry(hash_masked(m.key(), sm)).or_insert(0) += 1;
        }
        let list = st.rules.entry(hash_masked(m.key(), m.mask())).or_default();
        let entries = &self.entries;
        let pos = list
            .iter()
            .position(|&r| entries[r].as_ref().is_some_and(|e| e.priority < priority))
            .unwrap_or(list.len());
        list.insert(pos, id);
        st.n_rules += 1;
        *st.priorities.entry(priority).or_insert(0) += 1;
        let raised = priority > st.max_priority;
        st.max_priority = st.max_priority.max(priority);
        for (t, (name, nbits)) in TRIE_FIELDS.iter().enumerate() {
            if st.plens[t] > 0 {
                let (ofs, _) = field(name);
                self.tries[t].insert(read_field(&m.key().dp, ofs, *nbits), st.plens[t]);
            }
        }
        self.entries[id] = Some(Entry {
            m: CompactMatch::new(&m),
            priority,
            value,
            added: v,
            removed: VERSION_NEVER,
        });
        self.len += 1;
        if raised || st.n_rules == 1 {
            self.resort_subtable(p);
        }
        id
    }

    /// Removes rule `id`; returns its match, priority and data.
    pub fn remove(&mut self, id: RuleId) -> Option<(PipeMatch, u16, T)> {
        self.take(id).map(|(m, p, v)| (m.expand(), p, v))
    }

    /// [`Self::remove`], the match returned as stored.
    fn take(&mut self, id: RuleId) -> Option<(CompactMatch, u16, T)> {
        let e = self.entries.get_mut(id)?.take()?;
        let m = e.m.expand();
        self.free.push(id);
        self.len -= 1;
        let p = self
            .subtables
            .iter()
            .position(|s| s.mask == *m.mask())
            .expect("a rule's subtable exists");
        let st = &mut self.subtables[p];
        for (_, sm, counts) in &mut st.stages {
            let h = hash_masked(m.key(), sm);
            if let Some(c) = counts.get_mut(&h) {
                *c -= 1;
                if *c == 0 {
                    counts.remove(&h);
                }
            }
        }
        let h = hash_masked(m.key(), m.mask());
        if let Some(list) = st.rules.get_mut(&h) {
            list.retain(|&r| r != id);
            if list.is_empty() {
                st.rules.remove(&h);
            }
        }
        for (t, (name, nbits)) in TRIE_FIELDS.iter().enumerate() {
            if st.plens[t] > 0 {
                let (ofs, _) = field(name);
                self.tries[t].remove(read_field(&m.key().dp, ofs, *nbits), st.plens[t]);
            }
        }
        st.n_rules -= 1;
        if let Some(c) = st.priorities.get_mut(&e.priority) {
            *c -= 1;
            if *c == 0 {
                st.priorities.remove(&e.priority);
            }
        }
        if st.n_rules == 0 {
            self.subtables.remove(p);
        } else {
            let max = st.priorities.keys().next_back().copied().unwrap_or(0);
            if max != st.max_priority {
                st.max_priority = max;
                self.resort_subtable(p);
            }
        }
        Some((e.m, e.priority, e.value))
    }

    /// Removes the rules `ids` (those that exist), as [`Self::remove`] one by one would, and
    /// returns their matches (as stored), priorities and data in that order. When they are most of the
    /// table (`del-flows ip` of a big table), the subtables' indexes are filtered and the
    /// tries rebuilt from the rules left, rather than each rule taken out of each index: a
    /// removal alone costs a hash-table probe and a trie path per prefix field, cache misses
    /// all.
    pub fn remove_many(&mut self, ids: &[RuleId]) -> Vec<(CompactMatch, u16, T)> {
        if ids.len() * 2 <= self.len {
            return ids.iter().filter_map(|&id| self.take(id)).collect();
        }
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            if let Some(e) = self.entries.get_mut(id).and_then(Option::take) {
                self.free.push(id);
                self.len -= 1;
                out.push((e.m, e.priority, e.value));
            }
        }
        self.reindex();
        out
    }

    /// Drops the rules gone from `entries` from every subtable's indexes (their lists keep
    /// their order), drops the subtables left empty, puts the rest back in `max_priority`
    /// order (a stable sort: equals keep their order) and rebuilds the tries.
    fn reindex(&mut self) {
        // One bit a rule slot (a byte each made a chunk big enough that freeing it had glibc
        // consolidate the free lists of the rules just dropped, in this call).
        let mut live = vec![0u64; self.entries.len().div_ceil(64)];
        for (id, e) in self.entries.iter().enumerate() {
            if e.is_some() {
                live[id / 64] |= 1 << (id % 64);
            }
        }
        let live = |id: RuleId| live[id / 64] & (1 << (id % 64)) != 0;
        self.tries = Default::default();
        let entries = &self.entries;
        for st in &mut self.subtables {
            st.rules.retain(|_, list| {
                list.retain(|&id| live(id));
                !list.is_empty()
            });
            for (_, _, counts) in &mut st.stages {
                counts.clear();
            }
            st.priorities.clear();
            st.n_rules = 0;
            for &id in st.rules.values().flatten() {
                let e = entries[id].as_ref().expect("indexed rules exist");
                let m = e.m.expand();
                for (_, sm, counts) in &mut st.stages {
                    *counts.entry(hash_masked(m.key(), sm)).or_insert(0) += 1;
                }
                for (t, (name, nbits)) in TRIE_FIELDS.iter().enumerate() {
                    if st.plens[t] > 0 {
                        let (ofs, _) = field(name);
                        self.tries[t].insert(read_field(&m.key().dp, ofs, *nbits), st.plens[t]);
                    }
                }
                *st.priorities.entry(e.priority).or_insert(0) += 1;
                st.n_rules += 1;
            }
            st.max_priority = st.priorities.keys().next_back().copied().unwrap_or(0);
        }
        self.subtables.retain(|st| st.n_rules > 0);
        self.subtables
            .sort_by_key(|st| std::cmp::Reverse(st.max_priority));
    }

    /// Moves subtable `p`, whose `max_priority` changed, to its place in the order (highest
    /// first; among equals, the longest there stays first, as a stable sort keeps them).
    fn resort_subtable(&mut self, mut p: usize) {
        let s = &mut self.subtables;
        while p > 0 && s[p - 1].max_priority < s[p].max_priority {
            s.swap(p - 1, p);
            p -= 1;
        }
        while p + 1 < s.len() && s[p + 1].max_priority > s[p].max_priority {
            s.swap(p, p + 1);
            p += 1;
        }
    }

    /// The highest-priority rule of the published version matching `key`; ORs into `wc` every
    /// bit of `key` the answer depended on. Conjunctive rules are ordinary rules here;
    /// [`Self::lookup_conjunctive`] gives them their meaning.
    pub fn lookup(&self, key: &PipeKey, wc: &mut PipeMask) -> Option<RuleId> {
        self.lookup_in(key, self.version, wc)
    }

    /// [`Self::lookup`] among the rules visible in version `v`.
    pub fn lookup_in(&self, key: &PipeKey, version: Version, wc: &mut PipeMask) -> Option<RuleId> {
        self.lookup_pass(key, version, wc, &mut |_, _| false)
            .map(|(id, _)| id)
    }

    /// The main loop of a lookup among the rules visible in `version`: the highest-priority
    /// *hard* match and its priority. The best match of each subtable visited is offered to
    /// `soft` first: when it takes it (a conjunctive rule, [`conjunction`]), the match is not
    /// a hard one and the walk goes on.
    fn lookup_pass(
        &self,
        key: &PipeKey,
        version: Version,
        wc: &mut PipeMask,
        soft: &mut dyn FnMut(RuleId, &Entry<T>) -> bool,
    ) -> Option<(RuleId, u16)> {
        let mut best: Option<(RuleId, u16)> = None;
        // Trie walks, done on first use: (prereq met, plens, checkbits).
        let mut walks: [Option<(bool, u128, u32)>; TRIE_FIELDS.len()] = Default::default();
        'subtables: for st in &self.subtables {
            if best.is_some_and(|(_, p)| p >= st.max_priority) {
                break;
            }
            // Staged lookup, with each trie consulted at its field's stage (OVS's order): a key
            // that misses an earlier stage never consults the later fields.
            let mut tried = 0;
            for (stage, sm, counts) in st
                .stages
                .iter()
                .map(|(i, m, c)| (*i, m, Some(c)))
                .chain([(3, &st.mask, None)])
            {
                while tried < TRIE_FIELDS.len() && TRIE_STAGE[tried] <= stage {
                    let t = tried;
                    tried += 1;
                    let l = st.plens[t];
                    if l == 0 {
                        continue;
                    }
                    let (name, nbits) = TRIE_FIELDS[t];
                    let (ok, plens, checkbits) = *walks[t].get_or_insert_with(|| {
                        if !trie_prereq(t, key, wc) {
                            return (false, 0, 0);
                        }
                        let (ofs, _) = field(name);
                        let (p, c) = self.tries[t].lookup(read_field(&key.dp, ofs, nbits), nbits);
                        (true, p, c)
                    });
                    if ok && plens & (1 << (l - 1)) == 0 {
                        // No rule of the table has a prefix of this length that matches: the
                        // subtable cannot match, as the first `checkbits` bits show.
                        let (ofs, _) = field(name);
                        let bits = u128::MAX.checked_shl(128 - checkbits).unwrap_or(0);
                        let len = nbits as usize / 8;
                        let mut cur = [0u8; 16];
                        wc.dp.bytes_at(ofs, &mut cur[..len]);
                        for (c, b) in cur.iter_mut().zip(bits.to_be_bytes()) {
                            *c |= b;
                        }
                        wc.dp.set_bytes_at(ofs, &cur[..len]);
                        continue 'subtables;
                    }
                }
                if let Some(counts) = counts
                    && !counts.contains_key(&hash_masked(key, sm))
                {
                    wc.union_with(sm);
                    continue 'subtables;
                }
            }
            wc.union_with(&st.mask);
            if let Some(list) = st.rules.get(&hash_masked(key, &st.mask)) {
                for &id in list {
                    let e = self.entries[id].as_ref().expect("indexed rules exist");
                    if best.is_some_and(|(_, p)| p >= e.priority) {
                        break;
                    }
                    if e.visible_in(version) && e.m.matches(key) {
                        if !soft(id, e) {
                            best = Some((id, e.priority));
                        }
                        break;
                    }
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn route(dst: [u8; 4], plen: u32) -> PipeMatch {
        let mut k = PipeKey::new();
        k.dp.set_eth_type(0x0800).set_nw_dst(Ipv4Addr::from(dst));
        let mut m = PipeMask::new();
        m.dp.set_eth_type(0xffff)
            .set_nw_dst(Ipv4Addr::from(u32::MAX.checked_shl(32 - plen).unwrap_or(0)));
        PipeMatch::new(&k, &m)
    }

    fn ip_key(dst: [u8; 4]) -> PipeKey {
        let mut k = PipeKey::new();
        k.dp.set_eth_type(0x0800)
            .set_nw_dst(Ipv4Addr::from(dst))
            .set_nw_src(Ipv4Addr::new(1, 2, 3, 4))
            .set_nw_proto(17)
            .set_tp_dst(53);
        k
    }

    fn nw_dst_plen(wc: &PipeMask) -> u32 {
        prefix_len(u128::from(u32::from(wc.dp.nw_dst())) << 96).unwrap()
    }

    /// A table whose rules keep changing (routes replaced, rules of other addresses each
    /// time) keeps its trie's size to the prefixes it holds now, not every one it ever held.
    #[test]
    fn removed_prefixes_give_their_trie_nodes_back() {
        let mut c = Classifier::new();
        let keep = c.insert(route([10, 0, 0, 0], 8), 8, 0);
        for round in 0..50u8 {
            let ids: Vec<_> = (0..=255u8)
                .map(|i| c.insert(route([10, round, i, 1], 32), 32, 1))
                .collect();
            for id in ids {
                c.remove(id);
            }
        }
        // The /8 alone: its 8 nodes and the root, give or take the last round's reuse.
        let nodes = c.tries[0].nodes.len() + c.tries[1].nodes.len();
        assert!(nodes <= 1 + 8 + 32 * 256, "{nodes} trie nodes for one /8");
        let mut wc = PipeMask::new();
        assert_eq!(c.lookup(&ip_key([10, 9, 9, 9]), &mut wc), Some(keep));
        assert_eq!(nw_dst_plen(&wc), 8);
    }

    /// A delete of most of a big table leaves tries the size of the rules left.
    #[test]
    fn removing_most_rules_at_once_gives_their_trie_nodes_back() {
        let mut c = Classifier::new();
        let keep = c.insert(route([10, 0, 0, 0], 8), 8, 0);
        let ids: Vec<_> = (0..4096u32)
            .map(|i| c.insert(route([10, 1, (i >> 8) as u8, i as u8], 32), 32, 1))
            .collect();
        assert_eq!(c.remove_many(&ids).len(), 4096);
        assert_eq!(c.len(), 1);
        let nodes = c.tries[0].nodes.len() + c.tries[1].nodes.len();
        assert!(nodes <= 1 + 8, "{nodes} trie nodes for one /8");
        let mut wc = PipeMask::new();
        assert_eq!(c.lookup(&ip_key([10, 1, 2, 3]), &mut wc), Some(keep));
        assert_eq!(nw_dst_plen(&wc), 8);
    }

    #[test]
    fn routes_yield_prefix_wide_wildcards() {
        let mut c = Classifier::new();
        let r16 = c.insert(route([10, 1, 0, 0], 16), 16, "16");
        let r24 = c.insert(route([10, 2, 3, 0], 24), 24, "24");
        let r0 = c.insert(route([0, 0, 0, 0], 0), 0, "default");

        // Outside every /24: the /24 subtable is pruned by the trie.
        let mut wc = PipeMask::new();
        assert_eq!(c.lookup(&ip_key([10, 1, 9, 9]), &mut wc), Some(r16));
        assert_eq!(nw_dst_plen(&wc), 16);
        assert_eq!(wc.dp.nw_src(), Ipv4Addr::UNSPECIFIED);
        assert_eq!(wc.dp.tp_dst(), 0);

        let mut wc = PipeMask::new();
        assert_eq!(c.lookup(&ip_key([10, 2, 3, 7]), &mut wc), Some(r24));
        assert_eq!(nw_dst_plen(&wc), 24);

        // Matches only the default route: just enough bits to rule out 10.1/16 and 10.2.3/24.
        let mut wc = PipeMask::new();
        assert_eq!(c.lookup(&ip_key([192, 168, 0, 1]), &mut wc), Some(r0));
        assert!(nw_dst_plen(&wc) <= 16, "{:?}", wc.dp.nw_dst());

        // After removal, the /24 no longer exists.
        c.remove(r24);
        let mut wc = PipeMask::new();
        assert_eq!(c.lookup(&ip_key([10, 2, 3, 7]), &mut wc), Some(r0));
        assert!(nw_dst_plen(&wc) <= 16);
    }

    #[test]
    fn staged_lookup_stops_at_the_stage_that_misses() {
        let mut c = Classifier::new();
        let mut k = PipeKey::new();
        k.dp.set_eth_type(0x0800).set_nw_proto(6).set_tp_dst(80);
        let mut m = PipeMask::new();
        m.dp.set_eth_type(0xffff)
            .set_nw_proto(0xff)
            .set_tp_dst(0xffff);
        let web = c.insert(PipeMatch::new(&k, &m), 100, ());
        let any = c.insert(route([0, 0, 0, 0], 0), 1, ());
        let mut wc = PipeMask::new();
        // UDP: misses at the L3 stage, so tp_dst is not consulted.
        assert_eq!(c.lookup(&ip_key([10, 0, 0, 1]), &mut wc), Some(any));
        assert_eq!(wc.dp.nw_proto(), 0xff);
        assert_eq!(wc.dp.tp_dst(), 0);
        let mut key = ip_key([10, 0, 0, 1]);
        key.dp.set_nw_proto(6).set_tp_dst(80);
        let mut wc = PipeMask::new();
        assert_eq!(c.lookup(&key, &mut wc), Some(web));
        assert_eq!(wc.dp.tp_dst(), 0xffff);
    }

    #[test]
    fn priorities_and_registers() {
        let mut c = Classifier::new();
        let mut k = PipeKey::new();
        k.meta.regs[0] = 7;
        let mut m = PipeMask::new();
        m.meta.regs[0] = u32::MAX;
        let reg = c.insert(PipeMatch::new(&k, &m), 50, ());
        let low = c.insert(PipeMatch::catchall(), 0, ());
        let high = c.insert(PipeMatch::catchall(), 60, ());
        let mut key = PipeKey::new();
        key.meta.regs[0] = 7;
        let mut wc = PipeMask::new();
        assert_eq!(c.lookup(&key, &mut wc), Some(high));
        // The priority-60 catch-all outranks everything: nothing was consulted.
        assert!(wc.is_catchall());
        c.remove(high);
        let mut wc = PipeMask::new();
        assert_eq!(c.lookup(&key, &mut wc), Some(reg));
        assert_eq!(wc.meta.regs[0], u32::MAX);
        key.meta.regs[0] = 8;
        assert_eq!(c.lookup(&key, &mut PipeMask::new()), Some(low));
        assert_eq!(c.find_exact(&PipeMatch::catchall(), 0), Some(low));
        assert_eq!(c.find_exact(&PipeMatch::catchall(), 1), None);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    /// A field value or mask drawn from a small space, so rules and keys collide often.
    #[derive(Clone, Debug)]
    struct Spec {
        in_port: Option<u32>,
        eth_type: Option<u16>,
        nw_dst: Option<(u32, u32)>,
        nw_src: Option<(u32, u32)>,
        nw_proto: Option<u8>,
        tp_dst: Option<(u16, u16)>,
        reg0: Option<u32>,
    }

    fn addr() -> impl Strategy<Value = u32> {
        prop_oneof![
            Just(0x0a01_0000u32),
            Just(0x0a01_0100),
            Just(0x0a02_0304),
            Just(0xc0a8_0001),
            any::<u32>()
        ]
    }

    fn prefix() -> impl Strategy<Value = u32> {
        prop_oneof![Just(8u32), Just(16), Just(24), Just(32), 1u32..=32]
            .prop_map(|l| u32::MAX << (32 - l))
    }

    fn spec() -> impl Strategy<Value = Spec> {
        (
            proptest::option::of(1u32..4),
            proptest::option::of(prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x0806)]),
            proptest::option::of((addr(), prefix())),
            proptest::option::of((addr(), prefix())),
            proptest::option::of(prop_oneof![Just(6u8), Just(17)]),
            proptest::option::of((
                prop_oneof![Just(53u16), Just(80), Just(443), any::<u16>()],
                prop_oneof![Just(0xffffu16), Just(0xff00), Just(0xfff0)],
            )),
            proptest::option::of(0u32..3),
        )
            .prop_map(
                |(in_port, eth_type, nw_dst, nw_src, nw_proto, tp_dst, reg0)| Spec {
                    in_port,
                    eth_type,
                    nw_dst,
                    nw_src,
                    nw_proto,
                    tp_dst,
                    reg0,
                },
            )
    }

    fn to_match(s: &Spec) -> PipeMatch {
        let (mut k, mut m) = (PipeKey::new(), PipeMask::new());
        if let Some(p) = s.in_port {
            k.dp.set_in_port(p);
            m.dp.set_in_port(u32::MAX);
        }
        if let Some(e) = s.eth_type {
            k.dp.set_eth_type(e);
            m.dp.set_eth_type(0xffff);
        }
        if let Some((v, mk)) = s.nw_dst {
            k.dp.set_nw_dst(Ipv4Addr::from(v));
            m.dp.set_nw_dst(Ipv4Addr::from(mk));
        }
        if let Some((v, mk)) = s.nw_src {
            k.dp.set_nw_src(Ipv4Addr::from(v));
            m.dp.set_nw_src(Ipv4Addr::from(mk));
        }
        if let Some(p) = s.nw_proto {
            k.dp.set_nw_proto(p);
            m.dp.set_nw_proto(0xff);
        }
        if let Some((v, mk)) = s.tp_dst {
            k.dp.set_tp_dst(v);
            m.dp.set_tp_dst(mk);
        }
        if let Some(r) = s.reg0 {
            k.meta.regs[0] = r;
            m.meta.regs[0] = u32::MAX;
        }
        PipeMatch::new(&k, &m)
    }

    fn to_key(s: &Spec) -> PipeKey {
        let mut k = PipeKey::new();
        k.dp.set_in_port(s.in_port.unwrap_or(1))
            .set_eth_type(s.eth_type.unwrap_or(0x0800))
            .set_nw_dst(Ipv4Addr::from(s.nw_dst.map_or(0x0a01_0203, |x| x.0)))
            .set_nw_src(Ipv4Addr::from(s.nw_src.map_or(0x0102_0304, |x| x.0)))
            .set_nw_proto(s.nw_proto.unwrap_or(17))
            .set_tp_dst(s.tp_dst.map_or(53, |x| x.0));
        k.meta.regs[0] = s.reg0.unwrap_or(0);
        k
    }

    /// `key` with every bit outside `wc` replaced by the bits of `noise`.
    pub(super) fn perturb(key: &PipeKey, wc: &PipeMask, noise: &PipeKey) -> PipeKey {
        let mut out = PipeKey::new();
        for i in 0..flow::key::KEY_WORDS {
            let (k, n, w) = (key.dp.word(i), noise.dp.word(i), wc.dp.word(i));
            let v = (k & w) | (n & !w);
            if v != 0 {
                out.dp.set_word(i, v);
            }
        }
        for r in 0..16 {
            let w = wc.meta.regs[r];
            out.meta.regs[r] = (key.meta.regs[r] & w) | (noise.meta.regs[r] & !w);
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The lookup finds what a scan by priority finds, and every key that agrees with the
        /// looked-up key on the consulted bits gets the same answer: the wildcards are sound,
        /// which is what makes the megaflows built from them correct.
        #[test]
        fn lookup_is_a_scan_and_wildcards_are_sound(
            rules in proptest::collection::vec(spec(), 1..24),
            keys in proptest::collection::vec((spec(), spec()), 1..16),
            removals in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let mut c = Classifier::new();
            let mut ids = Vec::new();
            for (i, r) in rules.iter().enumerate() {
                // Distinct priorities: equal-priority overlaps are unordered in OpenFlow.
                let m = to_match(r);
                let p = (i as u16) * 7 % 101 + (i as u16) * 101;
                ids.push((c.insert(m.clone(), p, i), m, p));
            }
            for ix in removals {
                if ids.len() > 1 {
                    let (id, _, _) = ids.swap_remove(ix.index(ids.len()));
                    prop_assert!(c.remove(id).is_some());
                }
            }
            for (ks, noise) in &keys {
                let key = to_key(ks);
                let scan = ids
                    .iter()
                    .filter(|(_, m, _)| m.matches(&key))
                    .max_by_key(|(_, _, p)| *p)
                    .map(|(id, _, _)| *id);
                let mut wc = PipeMask::new();
                let got = c.lookup(&key, &mut wc);
                prop_assert_eq!(got, scan);
                let other = perturb(&key, &wc, &to_key(noise));
                let mut wc2 = PipeMask::new();
                prop_assert_eq!(c.lookup(&other, &mut wc2), got, "wildcards {:?}", wc);
            }
        }

        /// Removing most of a table at once (indexes filtered, tries rebuilt) leaves a table
        /// that answers every lookup as one the same rules were removed from one by one, with
        /// the same wildcards, and whose rule ids are taken up again in the same order.
        #[test]
        fn removing_most_rules_at_once_is_removing_them_one_by_one(
            rules in proptest::collection::vec(spec(), 2..24),
            keys in proptest::collection::vec(spec(), 1..16),
            kept in proptest::collection::vec(any::<bool>(), 24),
        ) {
            let (mut bulk, mut single) = (Classifier::new(), Classifier::new());
            for (i, r) in rules.iter().enumerate() {
                let p = (i as u16) * 7 % 101 + (i as u16) * 101;
                bulk.insert(to_match(r), p, i);
                single.insert(to_match(r), p, i);
            }
            // Most go: every other rule, and those `kept` does not keep.
            let gone: Vec<RuleId> = (0..rules.len()).filter(|&i| i % 2 == 0 || !kept[i]).collect();
            let taken: Vec<_> = bulk
                .remove_many(&gone)
                .into_iter()
                .map(|(m, p, v)| (m.expand(), p, v))
                .collect();
            let one_by_one: Vec<_> = gone.iter().filter_map(|&id| single.remove(id)).collect();
            prop_assert_eq!(taken, one_by_one);
            prop_assert_eq!(bulk.len(), single.len());
            prop_assert_eq!(bulk.n_subtables(), single.n_subtables());
            for k in &keys {
                let key = to_key(k);
                let (mut wa, mut wb) = (PipeMask::new(), PipeMask::new());
                prop_assert_eq!(bulk.lookup(&key, &mut wa), single.lookup(&key, &mut wb));
                prop_assert_eq!(wa, wb);
            }
            let m = to_match(&rules[0]);
            prop_assert_eq!(bulk.insert(m.clone(), 1, 99), single.insert(m, 1, 99));
        }
    }
}
