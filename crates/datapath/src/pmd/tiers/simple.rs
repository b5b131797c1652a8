//! The simple match tier (OVS's `dp_netdev_simple_match`, here with the EMC on): on a port
//! with megaflows that look at no packet field but the ethertype, VLAN TCI and fragment flags
//! ([`SimpleFlow`]), a plain frame's megaflow is found from its metadata words alone, and the
//! frame's shape is checked by the fast extractor (`flow::extract_simple`), inside the
//! extract stage's loop: no key but its TCP flags, no hash, no EMC entry. Counted as
//! `simple_hits`, its cycles under `extract`.
//!
//! The list follows the flow table as the decap fast path's does (`flows.rs`). This is also
//! where lent packets ([`crate::packet::Pool::packet_lent`]) are decided: one stays lent only
//! when the simple match sends it to an output that takes lent frames.

use flow::key::PACKET_WORDS;
use flow::{FlowKey, Match};

use crate::actions::DpAction;
use crate::flow_table::FlowRef;
use crate::packet::{Batch, MAX_BURST, Packet};

use super::super::Pmd;
use super::super::extract::{
    extract_packet, key_metadata_add, key_metadata_with, only_port_and_recirc,
};
use super::key_meta::KeyMeta;
use super::masked_words::MaskedWords;

/// One megaflow of the simple match: it looks at no packet field but those of
/// [`flow::simple_fields`], which every frame [`flow::extract_simple`] takes has the values
/// it wants in, and the IP protocol, whole, which is one byte of such a frame
/// ([`frame_proto`]). So such a frame matches it exactly when its metadata words (and its
/// protocol) do, and the frame's other header fields need not be put in the key, hashed or
/// looked up in the EMC. (OVS's userspace datapath has the same idea,
/// `dp_netdev_simple_match`, only while its EMC and SMC are off.) Its actions must not need
/// the key's other words or the packet's hash: no `hash`, `tnl_pop`, `clone` or `userspace`
/// (whose copy for the slow path needs the whole frame, not a lent one). `ct()` may be among
/// them (it reads the header offsets the simple match sets), and `recirc`: the next pass then
/// takes a batch whose keys hold no packet field but the TCP flags (`PassKeys::Simple`),
/// which the simple match finds again or extracts whole ([`Pmd::extract_simple_reused`]).
/// `tnl_push` may be among them: its UDP source port comes from the inner headers
/// ([`crate::rewrite::entropy_hash`]), not from the hash.
#[derive(Clone, Debug)]
pub(in crate::pmd) struct SimpleFlow {
    pub(in crate::pmd) flow: FlowRef,
    /// The mask's metadata words.
    words: MaskedWords,
    /// The IP protocol it wants, if it looks at it.
    proto: Option<u8>,
    /// It looks at the connection's mark or label.
    mark_or_label: bool,
}

impl SimpleFlow {
    /// The simple-match form of megaflow `flow` (match `m`, `actions`), if it qualifies.
    pub(in crate::pmd) fn new(
        flow: FlowRef,
        m: &Match,
        actions: &[DpAction],
    ) -> Option<SimpleFlow> {
        let plain = actions.iter().all(|a| {
            matches!(
                a,
                DpAction::Output(_)
                    | DpAction::Trunc(_)
                    | DpAction::PushVlan { .. }
                    | DpAction::PopVlan
                    | DpAction::PushMpls { .. }
                    | DpAction::AddMpls { .. }
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
                    | DpAction::Ct(_)
                    | DpAction::Recirc(_)
            )
        });
        if !plain {
            return None;
        }
        // The IP protocol, if looked at: whole, compared with the frame's.
        let proto = match m.mask().nw_proto() {
            0 => None,
            0xff => Some(m.key().nw_proto()),
            _ => return None,
        };
        let mut mask = m.mask().clone();
        mask.set_nw_proto(0);
        // The other packet fields it looks at: only the simple ones, with the values every
        // simple frame has there.
        let fields = flow::simple_fields();
        let mut frame = FlowKey::new();
        frame.set_eth_type(flow::extract::SIMPLE_ETH_TYPE);
        let mut bits = mask.map() & PACKET_WORDS;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let w = mask.raw_word(i);
            if w & !fields.word(i) != 0 || (frame.word(i) ^ m.key().word(i)) & w != 0 {
                return None;
            }
        }
        Some(SimpleFlow {
            flow,
            words: MaskedWords::new(m, !PACKET_WORDS)?,
            proto,
            mark_or_label: m.mask().ct_mark() != 0 || m.mask().ct_label() != 0,
        })
    }

    /// Whether a frame that [`flow::extract_simple`] took, of IP protocol `proto`, with `key`
    /// as it left it, matches.
    #[inline(always)]
    pub(in crate::pmd) fn matches(&self, key: &FlowKey, proto: u8) -> bool {
        self.words.matches(key) && self.proto.is_none_or(|p| p == proto)
    }
}

/// The first of `flows` that matches `key` and `proto` (see [`SimpleFlow::matches`]).
#[inline(always)]
pub(in crate::pmd) fn lookup_simple(
    flows: &[SimpleFlow],
    key: &FlowKey,
    proto: u8,
) -> Option<FlowRef> {
    flows.iter().find(|f| f.matches(key, proto)).map(|f| f.flow)
}

/// The IP protocol of a frame of the shape [`flow::extract_simple`] takes (IPv4 right after
/// an Ethernet header without tags); of another frame, a byte that does not matter (its shape
/// is refused after the lookup).
#[inline(always)]
fn frame_proto(p: &Packet) -> u8 {
    p.headers().get(14 + 9).copied().unwrap_or(0)
}

/// The protocol `first`'s megaflow wants, if it is among `flows` and looks at it.
fn proto_of(flows: &[SimpleFlow], first: FlowRef) -> Option<u8> {
    flows.iter().find(|f| f.flow == first).and_then(|f| f.proto)
}

impl Pmd {
    /// Whether the simple match may find the packets of `batch` (from `in_port`): the port has
    /// megaflows for it and the first packet's metadata matches one of them. The batch's
    /// packets mostly share their metadata, so a batch whose first packet the simple match
    /// would not find (for example the first pass of a pipeline whose simple megaflows are
    /// for a recirculation) skips trying every packet. Returns that first packet's megaflow.
    #[inline]
    pub(in crate::pmd) fn simple_batch(
        &mut self,
        batch: &Batch,
        in_port: u32,
        ct_tuple: bool,
    ) -> Option<FlowRef> {
        let flows = self.cls.simple(in_port);
        match batch.packets().first() {
            Some(p) if !flows.is_empty() => {
                let k = &mut self.keys[0];
                key_metadata_with(p, k, ct_tuple);
                lookup_simple(flows, k, frame_proto(p))
            }
            _ => None,
        }
    }

    /// Extraction for a batch the simple match may find ([`Self::simple_batch`]): each packet
    /// it finds gets its megaflow in `hits`, no key but its TCP flags, no hash, and its header
    /// offsets; every other packet is extracted whole. Returns the packets it found, as a bit
    /// mask. Out of line: the batches of ports without simple megaflows should not pay for
    /// its registers.
    ///
    /// `first`: the megaflow of the first packet's metadata. A packet whose metadata is only
    /// in_port and recirc_id, as the first's, with the first's recirc_id, has the same
    /// metadata words, so the same megaflow: it is not looked up again.
    ///
    /// `lent`: the batch may hold lent packets, which may stay lent only if `first` finds them
    /// ([`Self::sends_lent`]); the others are brought in.
    #[inline(never)]
    pub(in crate::pmd) fn extract_simple_batch(
        &mut self,
        batch: &mut Batch,
        in_port: u32,
        ct_tuple: bool,
        first: FlowRef,
        lent: bool,
    ) -> u32 {
        // Only a megaflow that looks at the protocol has each packet's compared.
        match proto_of(self.cls.simple(in_port), first) {
            None => self.extract_simple_loop::<false>(batch, in_port, ct_tuple, first, 0, lent),
            Some(q) => self.extract_simple_loop::<true>(batch, in_port, ct_tuple, first, q, lent),
        }
    }

    /// [`Self::extract_simple_batch`]'s loop; `PROTO`: `first` wants `first_proto`.
    #[inline(always)]
    fn extract_simple_loop<const PROTO: bool>(
        &mut self,
        batch: &mut Batch,
        in_port: u32,
        ct_tuple: bool,
        first: FlowRef,
        first_proto: u8,
        lent: bool,
    ) -> u32 {
        let mut simple = 0u32;
        let first_meta = batch
            .packets()
            .first()
            .filter(|p| only_port_and_recirc(&p.meta))
            .map(|p| p.meta.recirc_id);
        let Pmd {
            cls,
            keys,
            hashes,
            hits,
            stats,
            pool,
            ..
        } = self;
        let flows = cls.simple(in_port);
        let packets = batch.packets_mut();
        let n = packets.len();
        for (i, (((p, k), h), hit)) in packets
            .iter_mut()
            .zip(&mut keys[..n])
            .zip(&mut hashes[..n])
            .zip(&mut hits[..n])
            .enumerate()
        {
            let same = first_meta
                .is_some_and(|id| only_port_and_recirc(&p.meta) && p.meta.recirc_id == id)
                && (!PROTO || frame_proto(p) == first_proto);
            // The simple megaflows look at metadata words only: find one first (the key's
            // metadata words are only made when needed), then see whether the frame is of
            // the shape they take. A simple hit's key needs no more than its TCP flags.
            let found = if same {
                k.clear();
                Some(first)
            } else {
                key_metadata_with(p, k, ct_tuple);
                lookup_simple(flows, k, frame_proto(p))
            };
            // A packet still lent here stays lent only on its way to `first`'s output, which
            // takes it (`sends_lent`).
            if let Some(r) = found
                && let Some(l) = flow::extract_simple(p.headers(), k)
            {
                if lent && r != first {
                    pool.materialize(p);
                }
                // Nothing after needs the hash (see `SimpleFlow`).
                p.meta.hash = 0;
                *h = 0;
                (p.meta.l2_5, p.meta.l3, p.meta.l4) = (l.l2_5, l.l3, l.l4);
                *hit = Some(r);
                simple |= 1 << i;
            } else {
                if same {
                    key_metadata_with(p, k, ct_tuple);
                }
                if lent {
                    pool.materialize(p);
                }
                *h = extract_packet(stats, p, k);
            }
        }
        stats.simple_hits += u64::from(simple.count_ones());
        self.count_cached(u64::from(simple.count_ones()));
        simple
    }

    /// The simple match of a batch recirculated whole from a pass the simple match found
    /// whole (`PassKeys::Simple`): its keys hold no packet field but the TCP flags, and its
    /// frames are still of the shape [`flow::extract_simple`] took, with the header offsets
    /// it set (`ct()` translates addresses and ports only). A packet whose metadata and IP
    /// protocol are the first one's ([`KeyMeta`]) is in the first one's megaflow; another is
    /// looked up by its own metadata words; one the simple match does not find is extracted
    /// whole, for the tiers after. Returns the packets found, or `None`, with no key changed,
    /// when the simple match does not find the first packet (or the keys would need the
    /// connection's tuple): the caller then extracts the batch whole.
    #[inline(never)]
    pub(in crate::pmd) fn extract_simple_reused(
        &mut self,
        batch: &mut Batch,
        in_port: u32,
        ct_tuple: bool,
    ) -> Option<u32> {
        let Pmd {
            cls,
            keys,
            hashes,
            hits,
            stats,
            ..
        } = self;
        let flows = cls.simple(in_port);
        let packets = batch.packets_mut();
        let n = packets.len();
        if ct_tuple || n > MAX_BURST {
            return None;
        }
        let p0 = packets.first()?;
        let proto0 = frame_proto(p0);
        let mut k0 = FlowKey::new();
        key_metadata_add(p0, &mut k0, false);
        let first = lookup_simple(flows, &k0, proto0)?;
        // What may tell the packets' megaflows apart besides the metadata compared always.
        let protos = flows.iter().any(|f| f.proto.is_some());
        let meta = KeyMeta::of(p0, flows.iter().any(|f| f.mark_or_label));
        // The packets that agree with the first one, with no branch per packet.
        let mut simple = 0u32;
        for (i, p) in packets.iter().enumerate() {
            let same = meta.same(p) && (!protos || frame_proto(p) == proto0);
            simple |= u32::from(same) << i;
        }
        for h in &mut hits[..n] {
            *h = Some(first);
        }
        // The others: by their own metadata words, or extracted whole.
        let mut others = (((1u64 << n) - 1) as u32) & !simple;
        while others != 0 {
            let i = others.trailing_zeros() as usize;
            others &= others - 1;
            let (p, k) = (&mut packets[i], &mut keys[i]);
            k.clear_words(!PACKET_WORDS);
            key_metadata_add(p, k, false);
            hits[i] = lookup_simple(flows, k, frame_proto(p));
            if hits[i].is_some() {
                simple |= 1 << i;
            } else {
                key_metadata_with(p, k, false);
                hashes[i] = extract_packet(stats, p, k);
            }
        }
        stats.simple_hits += u64::from(simple.count_ones());
        self.count_cached(u64::from(simple.count_ones()));
        Some(simple)
    }

    /// Brings the whole frame of every lent packet of `batch` into its buffer.
    #[cold]
    #[inline(never)]
    pub(in crate::pmd) fn materialize(&mut self, batch: &mut Batch) {
        for p in batch.packets_mut() {
            self.pool.materialize(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::Mask;

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

    /// `m` with its IP protocol matched (`proto` under `mask`).
    fn with_proto(m: &Match, proto: u8, mask: u8) -> Match {
        let (mut k, mut mm) = (m.key().clone(), m.mask().clone());
        k.set_nw_proto(proto);
        mm.set_nw_proto(mask);
        Match::new(&k, &mm)
    }

    #[test]
    fn simple_flows_are_what_the_simple_match_can_find() {
        let r = FlowRef::first(1);
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
        // The IP protocol, whole: compared with the frame's.
        let udp = with_proto(&ipv4, 17, 0xff);
        let sf = SimpleFlow::new(r, &udp, &out).expect("a megaflow of one protocol");
        assert_eq!(sf.proto, Some(17));
        // Part of the protocol, or a field the simple match does not read.
        assert!(SimpleFlow::new(r, &with_proto(&ipv4, 16, 0xf0), &out).is_none());
        let mut k = ipv4.key().clone();
        let mut mask = ipv4.mask().clone();
        k.set_tp_dst(53);
        mask.set_tp_dst(0xffff);
        assert!(SimpleFlow::new(r, &Match::new(&k, &mask), &out).is_none());
        // A pipeline's passes: tracked, then recirculated.
        for a in [DpAction::Recirc(1), DpAction::Ct(Default::default())] {
            assert!(SimpleFlow::new(r, &ipv4, &[a.clone(), DpAction::Recirc(2)]).is_some());
        }
        // Actions that need the key's other words or the hash.
        for a in [
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
            m_proto in proptest::sample::select(vec![None, Some(6u8), Some(17)]),
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

            let mut mt = simple_match(m_port, m_recirc, m_eth, m_vlan, m_frag);
            if let Some(p) = m_proto {
                mt = with_proto(&mt, p, 0xff);
            }
            let r = FlowRef::first(0);
            let Some(sf) = SimpleFlow::new(r, &mt, &[DpAction::Output(2)]) else {
                return Ok(());
            };
            let mut whole = FlowKey::new();
            whole.set_in_port(port).set_recirc_id(recirc);
            let mut part = whole.clone();
            flow::extract(&f, &mut whole);
            if flow::extract_simple(&f, &mut part).is_some() {
                proptest::prop_assert_eq!(sf.matches(&part, f[23]), mt.matches(&whole));
            }
        }
    }
}
