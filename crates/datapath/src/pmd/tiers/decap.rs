//! The decap fast path tier: per input port, the few installed megaflows whose whole action
//! list is `tnl_pop(PORT)` ([`DecapFlow`], at most [`MAX_DECAP_FLOWS`]), compared with each
//! key right after extraction.
//!
//! A tunnel endpoint's underlay port sees mostly packets of a handful of such megaflows (one
//! per tunnel type and local address: `..,ipv4(dst=10.1.2.8,proto=17),udp(dst=4789)` →
//! `tnl_pop(vxlan_sys_4789)`). A masked compare of a megaflow's few mask words costs less than
//! an EMC probe, and a hit needs no EMC entry; megaflows do not overlap, so a hit is what the
//! EMC or dpcls would have found. When the whole batch hits and pops to one tunnel port, it is
//! decapsulated in place and runs its next pass at once as received there, without the
//! grouping, the actions and the recirculation queue ([`Pmd::decap_in_place`]); otherwise the
//! hits only skip the later tiers. Counted as `decap_hits` (and `tnl_pops`); the lookup's
//! cycles under `emc`, the pop's under `actions`.
//!
//! A batch just received is tried first with no extraction at all ([`Pmd::decap_rx`],
//! [`lookup_outer`]): the outer pass fused into the decap, on six header words of a frame of
//! the common shape.
//!
//! The list follows the flow table (`flows.rs`): install, delete, modify (actions may stop or
//! start being a lone `tnl_pop`), idle expiry, flush and port removal.

use flow::{FlowKey, Match};

use crate::actions::DpAction;
use crate::flow_table::FlowRef;
use crate::packet::{Batch, MAX_BURST};

use super::super::extract::{meta_word, only_port_and_recirc};
use super::super::recirc::pop_one;
use super::super::{Pmd, Stage};
use super::Pass;
use super::masked_words::MaskedWords;

/// Most decap megaflows tracked per input port; later ones are found by the EMC and dpcls.
pub(in crate::pmd) const MAX_DECAP_FLOWS: usize = 4;

/// One megaflow whose only action is `tnl_pop(port)`, in a form that is quick to test.
#[derive(Clone, Debug)]
pub(in crate::pmd) struct DecapFlow {
    pub(in crate::pmd) flow: FlowRef,
    /// The tunnel port of its `tnl_pop`.
    pub(in crate::pmd) port: u32,
    words: MaskedWords,
    /// Its compare on a frame just received, before extraction, if it has one.
    outer: Option<OuterWords>,
}

/// Key words a frame just received and of the common shape has: word 0 (in_port and
/// recirc_id, its only metadata) and packet words 1 to 5 ([`flow::ipv4_fast_words`]).
pub(in crate::pmd) const OUTER_WORDS: usize = 6;

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
    pub(in crate::pmd) fn new(flow: FlowRef, m: &Match, actions: &[DpAction]) -> Option<DecapFlow> {
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
    pub(in crate::pmd) fn matches(&self, key: &FlowKey) -> bool {
        self.words.matches(key)
    }
}

/// The index in `flows` of the first that matches `key`.
#[inline(always)]
pub(in crate::pmd) fn lookup(flows: &[DecapFlow], key: &FlowKey) -> Option<usize> {
    flows.iter().position(|f| f.matches(key))
}

/// The index in `flows` of the first that matches a frame just received whose key words 0 to
/// 5 are `w` (see `OuterWords`); a megaflow without that compare is never found here.
#[inline(always)]
pub(in crate::pmd) fn lookup_outer(flows: &[DecapFlow], w: &[u64; OUTER_WORDS]) -> Option<usize> {
    flows
        .iter()
        .position(|f| f.outer.as_ref().is_some_and(|o| o.matches(w)))
}

impl Pmd {
    /// The outer pass of a batch just received on a tunnel's underlay port, fused into the
    /// decap: when every packet is a frame of the common shape whose words
    /// ([`flow::ipv4_fast_words`]) match one of the port's decap megaflows
    /// ([`lookup_outer`]), all popping to one tunnel port, they are popped in
    /// place as by the decap fast path, with no key written, no extraction and no second
    /// compare, and the tunnel port is returned for their next pass. Otherwise nothing has
    /// changed but the packets' header offsets, and the batch takes the usual way.
    #[inline]
    pub(in crate::pmd) fn decap_rx(&mut self, batch: &mut Batch, in_port: u32) -> Option<u32> {
        let c = self.cls.port(in_port)?;
        if c.decap.is_empty() {
            return None;
        }
        let t0 = self.stamp();
        let mut which = [0u8; MAX_BURST];
        let mut tcp_flags = [0u16; MAX_BURST];
        for (i, p) in batch.packets_mut().iter_mut().enumerate() {
            let m = &p.meta;
            if !only_port_and_recirc(m) || p.is_lent() {
                return None;
            }
            let w0 = meta_word(m.in_port, m.recirc_id);
            let ([w1, w2, w3, w4, w5], layers) = flow::ipv4_fast_words(p.data())?;
            which[i] = lookup_outer(&c.decap, &[w0, w1, w2, w3, w4, w5])? as u8;
            tcp_flags[i] = flow::extract::tcp_flags_of_word(w5);
            p.meta.l2_5 = layers.l2_5;
            p.meta.l3 = layers.l3;
            p.meta.l4 = layers.l4;
        }
        let n = batch.len();
        let port = self.decap_in_place(batch, in_port, &which, |_, i| tcp_flags[i])?;
        self.stats.batches += 1;
        self.count_decap_hits(n as u64);
        let t = self.stamp();
        self.add_stage(Stage::Actions, t0, t);
        Some(port)
    }

    /// The decap fast path tier: the packets no tier before found whose key matches one of
    /// the port's decap megaflows get it in `hits`. Returns the tunnel port when every packet
    /// hit and the batch was popped in place ([`Self::decap_in_place`]): its next pass
    /// starts at once, as received there.
    #[inline(always)]
    pub(in crate::pmd) fn decap_fast_path(
        &mut self,
        batch: &mut Batch,
        pass: &mut Pass,
    ) -> Option<u32> {
        if self.cls.decap(pass.in_port).is_empty() {
            return None;
        }
        let mut which = [0u8; MAX_BURST];
        // A simple packet's key is partial: whatever the decap compare says of it does not
        // count.
        let fast = self.decap_lookup(pass.in_port, pass.n, &mut which) & pass.todo;
        if fast != 0 {
            self.count_decap_hits(u64::from(fast.count_ones()));
        }
        if fast == pass.all()
            && let Some(port) =
                self.decap_in_place(batch, pass.in_port, &which, |k, i| k[i].tcp_flags())
        {
            return Some(port);
        }
        let flows = self.cls.decap(pass.in_port);
        let mut bits = fast;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.hits[i] = Some(flows[usize::from(which[i])].flow);
        }
        pass.todo &= !fast;
        None
    }

    /// Counts `n` packets the decap fast path found.
    #[inline]
    pub(in crate::pmd) fn count_decap_hits(&mut self, n: u64) {
        self.stats.decap_hits += n;
        self.count_cached(n);
    }

    /// The decap fast path's lookup: the packets of the batch (of `n`) whose key matches one
    /// of `in_port`'s decap megaflows, as a bit mask, with the megaflow's index in `which`.
    #[inline]
    pub(in crate::pmd) fn decap_lookup(
        &mut self,
        in_port: u32,
        n: usize,
        which: &mut [u8; MAX_BURST],
    ) -> u32 {
        let flows = self.cls.decap(in_port);
        let mut bits = 0u32;
        for (i, k) in self.keys[..n].iter().enumerate() {
            if let Some(j) = lookup(flows, k) {
                which[i] = j as u8;
                bits |= 1 << i;
            }
        }
        bits
    }

    /// Runs the decap megaflows `which` (indices into `in_port`'s decap list, one per packet)
    /// on the whole batch: credits their statistics, then pops every packet in place, making
    /// it arrive on the tunnel port with recirc_id 0 (dropping, counted, what does not
    /// decapsulate). Returns the tunnel port, or `None`, leaving everything as it was, when
    /// the packets pop to more than one port.
    pub(in crate::pmd) fn decap_in_place(
        &mut self,
        batch: &mut Batch,
        in_port: u32,
        which: &[u8; MAX_BURST],
        tcp_flags_of: impl Fn(&[FlowKey], usize) -> u16,
    ) -> Option<u32> {
        let n = batch.len();
        let flows = self.cls.decap(in_port);
        let port = flows[usize::from(which[0])].port;
        if which[..n]
            .iter()
            .any(|&j| flows[usize::from(j)].port != port)
        {
            return None;
        }
        // Flow statistics, once per megaflow, as a group's would be.
        let mut packets = [0u64; MAX_DECAP_FLOWS];
        let mut bytes = [0u64; MAX_DECAP_FLOWS];
        let mut tcp_flags = [0u16; MAX_DECAP_FLOWS];
        for (i, p) in batch.packets().iter().enumerate() {
            let j = usize::from(which[i]) % MAX_DECAP_FLOWS;
            packets[j] += 1;
            bytes[j] += p.len() as u64;
            tcp_flags[j] |= tcp_flags_of(&self.keys, i);
        }
        let now = self.iter_tsc;
        for (j, d) in flows.iter().enumerate() {
            if packets[j] > 0
                && let Some(f) = self.flows.get_mut(d.flow)
            {
                f.stats.packets += packets[j];
                f.stats.bytes += bytes[j];
                f.stats.used_tsc = now;
                f.stats.tcp_flags |= tcp_flags[j];
            }
        }
        // The pop checks the outer checksums: a pending one is completed first, as the
        // actions' `tnl_pop` does. The batch is still marked on receive (`decap_rx`), its
        // pass marked after (`decap_fast_path`).
        if batch.may_have_gso() || self.pass_gso {
            self.complete_pending(batch);
        }
        let kind = self.tunnel_kind(port);
        let mut dropped = 0u32;
        for (i, p) in batch.packets_mut().iter_mut().enumerate() {
            if !pop_one(&mut self.stats, p, port, kind) {
                dropped |= 1 << i;
            }
        }
        if dropped != 0 {
            batch.remove(dropped, &mut self.pool);
        }
        Some(port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::Mask;

    use super::super::masked_words::strategies::{build, words, words_of};

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
        let r = FlowRef::first(3);
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

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// The fast path's compare says what `Match::matches` says, absent words included.
        #[test]
        fn agrees_with_match(kw in words(), mw in words(), pw in words(), copy: bool) {
            let mt = Match::new(&FlowKey(build(&kw)), &Mask(build(&mw)));
            let r = FlowRef::first(0);
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
            let r = FlowRef::first(0);
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
}
