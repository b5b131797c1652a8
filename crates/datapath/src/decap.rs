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
//! the hits only skip the EMC and dpcls lookups.
//!
//! The lists are kept in step with the flow table: flow install, delete, modify (actions may
//! stop or start being a lone `tnl_pop`), idle expiry, flush and port removal.

use flow::{FlowKey, Match};

use crate::actions::DpAction;
use crate::flow_table::FlowRef;

/// Most decap megaflows tracked per input port; later ones are found by the EMC and dpcls.
pub const MAX_DECAP_FLOWS: usize = 4;

/// Most mask words of a tracked megaflow (more go through the EMC and dpcls).
const MAX_WORDS: usize = 8;

/// One megaflow whose only action is `tnl_pop(port)`, in a form that is quick to test: the
/// mask's words with the masked key's.
#[derive(Clone, Debug)]
pub struct DecapFlow {
    pub flow: FlowRef,
    /// The tunnel port of its `tnl_pop`.
    pub port: u32,
    /// Words whose masked value is not zero: a key must have them.
    need: u64,
    /// The mask's words: first the `n_need` words of `need` (compared as they are), then those
    /// whose value is zero (compared when the key has them; an absent word reads as zero).
    n: usize,
    n_need: usize,
    idx: [usize; MAX_WORDS],
    mask: [u64; MAX_WORDS],
    val: [u64; MAX_WORDS],
}

impl DecapFlow {
    /// The fast-path form of megaflow `flow` (match `m`, `actions`), if it qualifies: its
    /// actions are exactly `[TnlPop(port)]` and its mask has at most 8 words.
    pub fn new(flow: FlowRef, m: &Match, actions: &[DpAction]) -> Option<DecapFlow> {
        let [DpAction::TnlPop(port)] = actions else {
            return None;
        };
        let mut bits = m.mask().map();
        if bits.count_ones() as usize > MAX_WORDS {
            return None;
        }
        let mut d = DecapFlow {
            flow,
            port: *port,
            need: 0,
            n: 0,
            n_need: 0,
            idx: [0; MAX_WORDS],
            mask: [0; MAX_WORDS],
            val: [0; MAX_WORDS],
        };
        // The match's key is stored masked.
        let mut words: Vec<(usize, u64, u64)> = Vec::with_capacity(MAX_WORDS);
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

    /// Whether `key` agrees with the megaflow on every masked bit (what `Match::matches`
    /// says): words the key lacks read as zero, so they can only match a zero value.
    #[inline(always)]
    pub fn matches(&self, key: &FlowKey) -> bool {
        let map = key.map();
        if self.need & !map != 0 {
            return false;
        }
        let n = self.n.min(MAX_WORDS);
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

/// The index in `flows` of the first that matches `key`.
#[inline(always)]
pub fn lookup(flows: &[DecapFlow], key: &FlowKey) -> Option<usize> {
    flows.iter().position(|f| f.matches(key))
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
        use proptest::prelude::*;
        let value = prop_oneof![Just(0u64), Just(u64::MAX), 0u64..4, any::<u64>()];
        proptest::collection::vec((0usize..16, value), 0..10)
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
    }
}
