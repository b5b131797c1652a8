//! The decap fast path: per PMD and input port, the few installed megaflows whose whole action
//! list is `tnl_pop(PORT)`, tested against each packet right after extraction.
//!
//! A tunnel endpoint's underlay port sees mostly packets of a handful of such megaflows (one
//! per tunnel type and local address: `..,ipv4(dst=10.1.2.8,proto=17),udp(dst=4789)` →
//! `tnl_pop(vxlan_sys_4789)`). A masked compare of a megaflow's few mask words costs less than
//! an EMC probe, and a hit needs no EMC entry. Any installed megaflow is a correct answer for
//! every packet it matches (megaflows do not overlap), so a hit here is what the EMC or dpcls
//! would have found. When every packet of a batch hits, the PMD pops them in place and the
//! batch runs its next pass at once as received on the tunnel port, without going through
//! the flow grouping, the actions and the recirculation queue (see `Pmd::process`); otherwise
//! the hits only skip the EMC and dpcls lookups. Before all that, a batch just received is
//! tried with no extraction at all ([`lookup_outer`], `Pmd::decap_rx`).
//!
//! The same compare serves the simple match ([`SimpleFlow`]): megaflows that look at no packet
//! field but the ethertype, VLAN TCI and fragment flags, found from a plain frame's metadata
//! alone.
//!
//! The lists are kept in step with the flow table: flow install, delete, modify (actions may
//! stop or start being a lone `tnl_pop`, or qualify for the simple match), idle expiry, flush
//! and port removal.

use flow::key::PACKET_WORDS;
use flow::{FlowKey, Match};

use crate::actions::DpAction;
use crate::flow_table::FlowRef;

/// Most decap megaflows tracked per input port; later ones are found by the EMC and dpcls.
pub const MAX_DECAP_FLOWS: usize = 4;

/// Most mask words of a tracked megaflow (more go through the EMC and dpcls).
const MAX_WORDS: usize = 8;

/// Most mask words of a linear-match megaflow. A GENEVE tunnel's inner megaflow has 9 (its
/// option's 8 bytes straddle two key words), and one with an IPv6 underlay 4 more than its
/// IPv4 twin. Megaflows of at most [`MAX_WORDS`] keep the shorter compare, whose loops the
/// compiler unrolls: a 12-word compare for every megaflow cost VXLAN's decap 22 instructions
/// a packet (`scripts/insns-check`), while GENEVE's inner pass saves its hash and EMC probe,
/// about 125.
const MAX_LINEAR_WORDS: usize = 12;

/// Some of a megaflow's mask words with the masked key's, in a form that is quick to test
/// against a key.
#[derive(Clone, Debug)]
struct MaskedWords<const N: usize = MAX_WORDS> {
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
    fn new(m: &Match, words: u64) -> Option<MaskedWords<N>> {
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
    fn matches(&self, key: &FlowKey) -> bool {
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

/// One megaflow whose only action is `tnl_pop(port)`, in a form that is quick to test.
#[derive(Clone, Debug)]
pub struct DecapFlow {
    pub flow: FlowRef,
    /// The tunnel port of its `tnl_pop`.
    pub port: u32,
    words: MaskedWords,
    /// Its compare on a frame just received, before extraction, if it has one.
    outer: Option<OuterWords>,
}

/// Key words a frame just received and of the common shape has: word 0 (in_port and
/// recirc_id, its only metadata) and packet words 1 to 5 ([`flow::ipv4_fast_words`]).
pub const OUTER_WORDS: usize = 6;

/// A decap megaflow's compare on the words [`flow::ipv4_fast_words`] gives for a frame just
/// received, with no key: the outer pass of a tunnel's packets then writes no key, and is
/// one load and compare per word. Such a frame's key holds words 0 to 5 at most (word 5 only
/// with TCP flags), every other word reading as zero; so a megaflow that wants zero in every
/// word above 5 matches the key exactly when these six words do, with word 5 zero when
/// absent. Megaflows wanting more (a tunnel's inner pass, an IPv6 underlay) have none.
#[derive(Clone, Copy, Debug)]
struct OuterWords {
    mask: [u64; OUTER_WORDS],
    val: [u64; OUTER_WORDS],
}

impl OuterWords {
    fn new(m: &Match) -> Option<OuterWords> {
        // The match's key is stored masked: above word 5 it must be all zeros.
        let mut above = m.mask().map() & !((1 << OUTER_WORDS) - 1);
        while above != 0 {
            let i = above.trailing_zeros() as usize;
            above &= above - 1;
            if m.key().word(i) != 0 {
                return None;
            }
        }
        let mut o = OuterWords {
            mask: [0; OUTER_WORDS],
            val: [0; OUTER_WORDS],
        };
        for i in 0..OUTER_WORDS {
            o.mask[i] = m.mask().word(i);
            o.val[i] = m.key().word(i);
        }
        Some(o)
    }

    #[inline(always)]
    fn matches(&self, w: &[u64; OUTER_WORDS]) -> bool {
        let mut diff = 0;
        for ((w, m), v) in w.iter().zip(&self.mask).zip(&self.val) {
            diff |= (w & m) ^ v;
        }
        diff == 0
    }
}

impl DecapFlow {
    /// The fast-path form of megaflow `flow` (match `m`, `actions`), if it qualifies: its
    /// actions are exactly `[TnlPop(port)]` and its mask has at most 8 words.
    pub fn new(flow: FlowRef, m: &Match, actions: &[DpAction]) -> Option<DecapFlow> {
        let [DpAction::TnlPop(port)] = actions else {
            return None;
        };
        Some(DecapFlow {
            flow,
            port: *port,
            words: MaskedWords::new(m, u64::MAX)?,
            outer: OuterWords::new(m),
        })
    }

    /// Whether `key` agrees with the megaflow on every masked bit (what `Match::matches`
    /// says): words the key lacks read as zero, so they can only match a zero value.
    #[inline(always)]
    pub fn matches(&self, key: &FlowKey) -> bool {
        self.words.matches(key)
    }
}

/// The index in `flows` of the first that matches `key`.
#[inline(always)]
pub fn lookup(flows: &[DecapFlow], key: &FlowKey) -> Option<usize> {
    flows.iter().position(|f| f.matches(key))
}

/// The index in `flows` of the first that matches a frame just received whose key words 0 to
/// 5 are `w` (see `OuterWords`); a megaflow without that compare is never found here.
#[inline(always)]
pub fn lookup_outer(flows: &[DecapFlow], w: &[u64; OUTER_WORDS]) -> Option<usize> {
    flows
        .iter()
        .position(|f| f.outer.as_ref().is_some_and(|o| o.matches(w)))
}

/// One megaflow of the simple match: it looks at no packet field but those of
/// [`flow::simple_fields`], and every frame [`flow::extract_simple`] takes has the values it
/// wants there. So such a frame matches it exactly when its metadata words do, and the
/// frame's other header fields need not be put in the key, hashed or looked up in the EMC.
/// (OVS's userspace datapath has the same idea, `dp_netdev_simple_match`, only while its EMC
/// and SMC are off.) Its actions must not need the key's other words or the packet's hash:
/// no recirculation (which may hand the keys to the next pass), `ct`, `hash`, `tnl_pop` or
/// `clone`. `tnl_push` may be among them: its UDP source port comes from the inner headers
/// ([`crate::rewrite::entropy_hash`]), not from the hash.
#[derive(Clone, Debug)]
pub struct SimpleFlow {
    pub flow: FlowRef,
    /// The mask's metadata words.
    words: MaskedWords,
}

impl SimpleFlow {
    /// The simple-match form of megaflow `flow` (match `m`, `actions`), if it qualifies.
    pub fn new(flow: FlowRef, m: &Match, actions: &[DpAction]) -> Option<SimpleFlow> {
        let plain = actions.iter().all(|a| {
            matches!(
                a,
                DpAction::Output(_)
                    | DpAction::Trunc(_)
                    | DpAction::Userspace
                    | DpAction::PushVlan { .. }
                    | DpAction::PopVlan
                    | DpAction::PushMpls { .. }
                    | DpAction::PopMpls { .. }
                    | DpAction::SetMpls { .. }
                    | DpAction::PushEthPopMpls { .. }
                    | DpAction::SetEth(_)
                    | DpAction::PushEth { .. }
                    | DpAction::PopEth
                    | DpAction::SetIpv4(_)
                    | DpAction::SetIpv6(_)
                    | DpAction::SetL4(_)
                    | DpAction::TnlPush(_)
            )
        });
        if !plain {
            return None;
        }
        // The packet fields it looks at: only the simple ones, with the values every simple
        // frame has there.
        let fields = flow::simple_fields();
        let mut frame = FlowKey::new();
        frame.set_eth_type(flow::extract::SIMPLE_ETH_TYPE);
        let mut bits = m.mask().map() & PACKET_WORDS;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let mask = m.mask().raw_word(i);
            if mask & !fields.word(i) != 0 || frame.word(i) & mask != m.key().word(i) {
                return None;
            }
        }
        Some(SimpleFlow {
            flow,
            words: MaskedWords::new(m, !PACKET_WORDS)?,
        })
    }

    /// Whether a frame that [`flow::extract_simple`] took, with `key` as it left it, matches.
    #[inline(always)]
    pub fn matches(&self, key: &FlowKey) -> bool {
        self.words.matches(key)
    }
}

/// The first of `flows` that matches `key` (see [`SimpleFlow::matches`]).
#[inline(always)]
pub fn lookup_simple(flows: &[SimpleFlow], key: &FlowKey) -> Option<FlowRef> {
    flows.iter().find(|f| f.matches(key)).map(|f| f.flow)
}

/// Most megaflows a port may have for the linear match ([`LinearMatch`]).
pub const MAX_LINEAR_FLOWS: usize = 8;

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
/// or dpcls. (Comparing each megaflow in turn, as a list of four labels was tried in session
/// 17, cost more than the EMC: `docs/performance.md`.)
#[derive(Clone, Debug)]
pub struct LinearMatch {
    /// The megaflows, in the order of `vals`.
    flows: Vec<FlowRef>,
    /// The first megaflow's match: its mask is every megaflow's, and its values are theirs
    /// but in the differing word.
    shape: Option<Box<Match>>,
    /// The compare of the words the megaflows share (all of them while there is one).
    words: Option<LinearWords>,
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
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Forgets every megaflow.
    pub fn clear(&mut self) {
        self.flows.clear();
        self.shape = None;
        self.words = None;
        self.apart = None;
    }

    /// Adds megaflow `flow` (match `m`) if it fits: there is room, its mask is small enough
    /// and the others', and its values differ from theirs in the one word they differ in (or,
    /// with one megaflow held, in one word). Returns whether it was added.
    pub fn push(&mut self, flow: FlowRef, m: &Match) -> bool {
        let n = self.flows.len();
        if n >= MAX_LINEAR_FLOWS {
            return false;
        }
        let Some(shape) = &self.shape else {
            let Some(words) = LinearWords::new(m, u64::MAX) else {
                return false;
            };
            self.words = Some(words);
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
                let Some(w) = LinearWords::new(shape, shape.mask().map() & !(1 << d)) else {
                    return false;
                };
                vals[0] = shape.key().word(d);
                (d, Some(w))
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
        if let Some(w) = words {
            self.words = Some(w);
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
    pub fn remove(&mut self, flow: FlowRef) {
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
        self.shape = Some(Box::new(m));
        self.apart = None;
    }

    /// The megaflow `key` matches, if any (what `Match::matches` says of each).
    #[inline(always)]
    pub fn lookup(&self, key: &FlowKey) -> Option<FlowRef> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use flow::Mask;

    #[test]
    fn matches_as_the_match_does() {
        let mut k = FlowKey::new();
        k.set_in_port(1)
            .set_eth_type(0x0800)
            .set_nw_dst([10, 1, 2, 8].into())
            .set_nw_proto(17)
            .set_tp_dst(4789);
        let mut m = Mask::new();
        m.set_in_port(u32::MAX)
            .set_recirc_id(u32::MAX)
            .set_packet_type(u32::MAX)
            .set_eth_type(0xffff)
            .set_nw_dst([255, 255, 255, 255].into())
            .set_nw_proto(0xff)
            .set_tp_dst(0xffff);
        let mt = Match::new(&k, &m);
        let r = FlowRef {
            idx: 3,
            generation: 1,
        };
        assert!(DecapFlow::new(r, &mt, &[DpAction::Output(2)]).is_none());
        assert!(DecapFlow::new(r, &mt, &[DpAction::TnlPop(4), DpAction::Output(2)]).is_none());
        let d = DecapFlow::new(r, &mt, &[DpAction::TnlPop(4)]).unwrap();
        assert_eq!(d.port, 4);
        let mut probe = k.clone();
        probe.set_tp_src(49152).set_nw_src([10, 1, 2, 9].into());
        assert!(d.matches(&probe) && mt.matches(&probe));
        // packet_type is masked exactly and absent (zero) in an Ethernet key: still a match.
        assert_eq!(probe.map() & (1 << 11), 0);
        for change in [
            |k: &mut FlowKey| {
                k.set_tp_dst(4790);
            },
            |k: &mut FlowKey| {
                k.set_in_port(2);
            },
            |k: &mut FlowKey| {
                k.set_packet_type(1 << 16 | 0x800);
            },
            |k: &mut FlowKey| {
                k.clear_words(1 << 4);
            },
        ] {
            let mut p = probe.clone();
            change(&mut p);
            assert!(!d.matches(&p) && !mt.matches(&p), "{p:?}");
        }
        assert_eq!(lookup(&[d.clone(), d], &probe), Some(0));
    }

    fn words() -> impl proptest::strategy::Strategy<Value = Vec<(usize, u64)>> {
        words_of(16, 10)
    }

    /// Up to `most` (word index below `below`, value) pairs.
    fn words_of(
        below: usize,
        most: usize,
    ) -> impl proptest::strategy::Strategy<Value = Vec<(usize, u64)>> {
        use proptest::prelude::*;
        let value = prop_oneof![Just(0u64), Just(u64::MAX), 0u64..4, any::<u64>()];
        proptest::collection::vec((0usize..below, value), 0..most)
    }

    fn build(w: &[(usize, u64)]) -> flow::FlowWords {
        let mut f = flow::FlowWords::new();
        for &(i, v) in w {
            f.set_word(i, v);
        }
        f
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// The fast path's compare says what `Match::matches` says, absent words included.
        #[test]
        fn agrees_with_match(kw in words(), mw in words(), pw in words(), copy: bool) {
            let mt = Match::new(&FlowKey(build(&kw)), &Mask(build(&mw)));
            let r = FlowRef { idx: 0, generation: 1 };
            let Some(d) = DecapFlow::new(r, &mt, &[DpAction::TnlPop(1)]) else {
                return Ok(());
            };
            let mut probe = if copy { FlowKey(build(&kw)) } else { FlowKey::new() };
            for &(i, v) in &pw {
                probe.set_word(i, v);
            }
            // Stale bytes in absent words must not count.
            probe.clear_words(0b1010_1010);
            proptest::prop_assert_eq!(d.matches(&probe), mt.matches(&probe));
        }

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
            let r = FlowRef { idx: 0, generation: 1 };
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
            proptest::prop_assert_eq!(l.lookup(&probe).is_some(), mt.matches(&probe));
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
                let r = FlowRef { idx: j as u32, generation: 1 };
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
                let r = FlowRef { idx: 99, generation: 1 };
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
                    proptest::prop_assert_eq!(l.lookup(&key), want);
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

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// The compare on a frame just received finds what extraction and the megaflow
        /// compare find, for every frame it takes; a megaflow wanting more than it can see
        /// has no such compare, and is never found by it.
        #[test]
        fn outer_agrees_with_extract_and_match(
            hdr in proptest::collection::vec(proptest::prelude::any::<u8>(), 54),
            proto in proptest::sample::select(vec![17u8, 6, 47]),
            frag in proptest::sample::select(vec![0u16, 0x4000, 0x2000]),
            masks in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just(0u64),
                    proptest::strategy::Just(u64::MAX),
                    proptest::prelude::any::<u64>(),
                ],
                6,
            ),
            above in words_of(40, 3),
            flips in proptest::collection::vec((0usize..54, 1u8..=255), 0..3),
            other_port: bool,
        ) {
            // An Ethernet/IPv4 frame of the common shape, the megaflow's source.
            let mut f = hdr.clone();
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[16..18].copy_from_slice(&40u16.to_be_bytes());
            f[20..22].copy_from_slice(&frag.to_be_bytes());
            f[23] = proto;
            f[46] = 0x50 | (f[46] & 0x0f);
            let mut k = FlowKey::new();
            k.set_in_port(2);
            flow::extract(&f, &mut k);
            let mut mw = flow::FlowWords::new();
            for (i, &m) in masks.iter().enumerate() {
                mw.set_word(i, m);
            }
            for &(i, v) in &above {
                mw.set_word(i, v);
                // Half the time what the source's key has there (zero: a wanted absence).
                if v & 1 == 0 {
                    k.set_word(i, v);
                }
            }
            let mt = Match::new(&k, &Mask(mw));
            let r = FlowRef { idx: 0, generation: 1 };
            let d = DecapFlow::new(r, &mt, &[DpAction::TnlPop(9)]).unwrap();
            let flows = [d];

            // A frame received: the source with a few bytes changed.
            let mut g = f.clone();
            for &(at, x) in &flips {
                g[at] ^= x;
            }
            let mut key = FlowKey::new();
            key.set_in_port(if other_port { 3 } else { 2 });
            let w0 = key.word(0);
            flow::extract(&g, &mut key);
            let by_key = lookup(&flows, &key);
            proptest::prop_assert_eq!(by_key.is_some(), mt.matches(&key));
            if let Some(([w1, w2, w3, w4, w5], _)) = flow::ipv4_fast_words(&g) {
                let by_words = lookup_outer(&flows, &[w0, w1, w2, w3, w4, w5]);
                if flows[0].outer.is_some() {
                    proptest::prop_assert_eq!(by_words, by_key);
                } else {
                    proptest::prop_assert_eq!(by_words, None);
                    // It has none only when it wants a word above 5 that is not zero.
                    let hi = mt.mask().map() & !0x3f;
                    proptest::prop_assert!(
                        (0..64).any(|i| hi & (1 << i) != 0 && mt.key().word(i) != 0)
                    );
                }
            }
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
        let r = FlowRef {
            idx: 1,
            generation: 1,
        };
        let mut l = LinearMatch::default();
        assert!(l.push(r, &mt), "a linear megaflow");
        assert_eq!(l.lookup(&k), Some(r));
        let mut other = opt;
        other[7] = 3;
        let mut k2 = k.clone();
        k2.set_tun_geneve_opts(&other);
        assert!(l.lookup(&k2).is_none() && !mt.matches(&k2));
        // Every word counts, the ninth too (the zero-valued ones come last).
        let mut l3 = k.clone();
        l3.set_packet_type(1 << 16 | 0x0800);
        assert!(l.lookup(&l3).is_none() && !mt.matches(&l3));
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
        let r = |idx| FlowRef { idx, generation: 1 };
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
            assert_eq!(l.lookup(kept.key()), Some(r(1 - gone)));
            assert_eq!(l.lookup(next.key()), Some(r(2)));
            assert_eq!(l.lookup(flow(9, 443).key()), None);
        }
    }

    /// A simple megaflow: `in_port`, `recirc_id` and `packet_type` exact, and the given
    /// ethertype, VLAN TCI and fragment flags matched exactly where `Some`.
    fn simple_match(
        in_port: u32,
        recirc_id: u32,
        eth_type: Option<u16>,
        vlan_tci: Option<u16>,
        frag: Option<u8>,
    ) -> Match {
        let mut k = FlowKey::new();
        let mut m = Mask::new();
        k.set_in_port(in_port).set_recirc_id(recirc_id);
        m.set_in_port(u32::MAX)
            .set_recirc_id(u32::MAX)
            .set_packet_type(u32::MAX);
        if let Some(t) = eth_type {
            k.set_eth_type(t);
            m.set_eth_type(0xffff);
        }
        if let Some(t) = vlan_tci {
            k.set_vlan_tci(t);
            m.set_vlan_tci(0xffff);
        }
        if let Some(f) = frag {
            k.set_nw_frag(f);
            m.set_nw_frag(0xff);
        }
        Match::new(&k, &m)
    }

    #[test]
    fn simple_flows_are_what_the_simple_match_can_find() {
        let r = FlowRef {
            idx: 1,
            generation: 1,
        };
        let out = [DpAction::Output(2)];
        let ipv4 = simple_match(1, 0, Some(0x0800), None, Some(0));
        assert!(SimpleFlow::new(r, &ipv4, &out).is_some());
        assert!(SimpleFlow::new(r, &simple_match(1, 0, None, None, None), &[]).is_some());
        // Another ethertype, a tag, a fragment: never a simple frame.
        for m in [
            simple_match(1, 0, Some(0x86dd), None, None),
            simple_match(1, 0, Some(0x0800), Some(0x1005), None),
            simple_match(1, 0, Some(0x0800), None, Some(1)),
        ] {
            assert!(SimpleFlow::new(r, &m, &out).is_none(), "{m:?}");
        }
        // A field the simple match does not read.
        let mut k = ipv4.key().clone();
        let mut mask = ipv4.mask().clone();
        k.set_nw_proto(17);
        mask.set_nw_proto(0xff);
        assert!(SimpleFlow::new(r, &Match::new(&k, &mask), &out).is_none());
        // Actions that need the key's other words or the hash.
        for a in [
            DpAction::Recirc(1),
            DpAction::Hash {
                sym: false,
                basis: 0,
            },
            DpAction::TnlPop(3),
            DpAction::CtClear,
            DpAction::Clone(Box::new([DpAction::Output(2)])),
        ] {
            assert!(
                SimpleFlow::new(r, &ipv4, &[a.clone(), DpAction::Output(2)]).is_none(),
                "{a:?}"
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// On any frame the simple extraction takes, a simple megaflow matches exactly when
        /// the megaflow matches the frame's whole key.
        #[test]
        fn simple_match_agrees_with_the_whole_key(
            eth_type in proptest::sample::select(vec![0x0800u16, 0x0800, 0x86dd, 0x8100, 0x0806]),
            vhl in proptest::sample::select(vec![0x45u8, 0x45, 0x46]),
            frag in proptest::sample::select(vec![0u16, 0, 0x4000, 0x2000, 0x0010]),
            proto in proptest::sample::select(vec![6u8, 17, 1, 47]),
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 60..100),
            port in 1u32..3,
            recirc in 0u32..2,
            m_port in 1u32..3,
            m_recirc in 0u32..2,
            m_eth in proptest::sample::select(vec![None, Some(0x0800u16), Some(0x86dd)]),
            m_vlan in proptest::sample::select(vec![None, Some(0u16)]),
            m_frag in proptest::sample::select(vec![None, Some(0u8), Some(1)]),
        ) {
            let mut f = vec![0u8; 14];
            f[..12].copy_from_slice(&body[..12]);
            f[12..14].copy_from_slice(&eth_type.to_be_bytes());
            let mut ip = body[12..].to_vec();
            ip[0] = vhl;
            let tot = ip.len() as u16;
            ip[2..4].copy_from_slice(&tot.to_be_bytes());
            ip[6..8].copy_from_slice(&frag.to_be_bytes());
            ip[9] = proto;
            if proto == 6 {
                ip[32] = 0x50; // TCP data offset 5
            }
            f.extend(ip);

            let mt = simple_match(m_port, m_recirc, m_eth, m_vlan, m_frag);
            let r = FlowRef { idx: 0, generation: 1 };
            let Some(sf) = SimpleFlow::new(r, &mt, &[DpAction::Output(2)]) else {
                return Ok(());
            };
            let mut whole = FlowKey::new();
            whole.set_in_port(port).set_recirc_id(recirc);
            let mut part = whole.clone();
            flow::extract(&f, &mut whole);
            if flow::extract_simple(&f, &mut part).is_some() {
                proptest::prop_assert_eq!(sf.matches(&part), mt.matches(&whole));
            }
        }
    }
}
