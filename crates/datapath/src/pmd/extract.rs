//! The extract stage: each packet's flow key, from the metadata words it carries between
//! passes (in_port, recirc_id, dp_hash, mark, packet type, tunnel metadata, connection) and
//! its headers (`flow::extract`), with its hash and header offsets (OVS's
//! `miniflow_extract` in `dfc_processing`).
//!
//! Which way a batch takes depends on its port's lookup tiers: the simple match and the
//! linear match run inside extraction's loop (`tiers/simple.rs`, `tiers/linear.rs`); a port
//! whose packets the decap fast path or the linear match finds gets keys without a hash,
//! made later only for the packets that go on to the EMC ([`Pmd::hash_now`]); a batch
//! recirculated whole with its headers untouched takes its keys from the pass before.
//!
//! Reads the frame and `PacketMeta`; writes `keys`, `hashes`, and each packet's `hash` and
//! header offsets (`l2_5`, `l3`, `l4`); counts malformed packets by reason.

use flow::FlowKey;

use crate::packet::{Batch, MAX_BURST, Packet, PacketMeta, TnlMd};

use super::tiers::Pass;
use super::{Pmd, PmdStats};

/// What a pass's keys hold, for a next pass that takes them (`keys_reusable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PassKeys {
    /// Each packet's whole key.
    Full,
    /// Each packet's metadata words and TCP flags alone: the simple match found every packet.
    Simple,
    /// Some of each: no next pass may take them.
    Mixed,
}

impl PassKeys {
    /// The keys of a pass of `n` packets whose `simple` ones the simple match found.
    #[inline(always)]
    fn of(simple: u32, n: usize) -> PassKeys {
        if simple == 0 {
            PassKeys::Full
        } else if u64::from(simple) == (1u64 << n) - 1 {
            PassKeys::Simple
        } else {
            PassKeys::Mixed
        }
    }
}

impl Pmd {
    /// The extract stage of a pass of `batch` on `in_port`, with the tiers that run in its
    /// loop; returns the pass's lookup state for the tiers after. `reuse`: the batch may take
    /// its keys from the pass before ([`Self::input`]), whose packets were all found in
    /// megaflow `keys_flow`; `lent`: it may hold lent packets,
    /// which stay lent only on their way to an output that takes them.
    #[inline(always)]
    pub(super) fn extract(
        &mut self,
        batch: &mut Batch,
        in_port: u32,
        reuse: bool,
        lent: bool,
    ) -> Pass {
        let n = batch.len();
        self.unhashed = false;
        self.pass_keys = PassKeys::Full;
        let ct_tuple = self.ct_tuple_flows != 0;
        let linear = self.cls.is_linear(in_port);
        let mut reusing = reuse && n <= MAX_BURST;
        if reusing && self.keys_simple {
            // Keys without packet fields: the simple match again, or the batch extracted
            // whole (as one that takes no keys).
            if let Some(simple) = self.extract_simple_reused(batch, in_port, ct_tuple) {
                self.pass_keys = PassKeys::of(simple, n);
                return Pass::new(in_port, n, linear, simple, None);
            }
            reusing = false;
        }
        let first = if reusing {
            None
        } else {
            self.simple_batch(batch, in_port, ct_tuple)
        };
        // Lent packets stay lent only on their way to an output that takes them.
        let mut keep = false;
        if lent {
            keep = first.is_some_and(|f| self.sends_lent(f));
            if !keep {
                self.materialize(batch);
            }
        }
        let (mut simple, mut early) = (0, None);
        if reusing {
            early = self.extract_reused(batch, in_port, ct_tuple, linear);
        } else if let Some(first) = first {
            simple = self.extract_simple_batch(batch, in_port, ct_tuple, first, keep);
            self.pass_keys = PassKeys::of(simple, n);
        } else if linear && self.cls.decap(in_port).is_empty() {
            self.unhashed = true;
            early = self.extract_linear(batch, in_port, ct_tuple);
        } else if linear || !self.cls.decap(in_port).is_empty() {
            // The hash is for the EMC alone: on a port whose packets the decap fast path
            // or the linear match finds, only those they do not find get one, later.
            self.unhashed = true;
            for (i, p) in batch.packets_mut().iter_mut().enumerate() {
                let k = &mut self.keys[i];
                key_metadata_with(p, k, ct_tuple);
                extract_packet_unhashed(&mut self.stats, p, k);
            }
        } else {
            for (i, p) in batch.packets_mut().iter_mut().enumerate() {
                let k = &mut self.keys[i];
                key_metadata_with(p, k, ct_tuple);
                self.hashes[i] = extract_packet(&mut self.stats, p, k);
            }
        }
        Pass::new(in_port, n, linear, simple, early)
    }

    /// Extraction of a batch recirculated whole with its headers untouched (out of line: the
    /// first pass's extraction keeps its registers): on a port whose megaflows the linear match
    /// holds, the metadata match (`tiers/recirc_meta.rs`), whose hits it returns; else, or
    /// when that does not apply, the keys from the pass before ([`Self::reuse_keys`]).
    #[inline(never)]
    fn extract_reused(
        &mut self,
        batch: &mut Batch,
        in_port: u32,
        ct_tuple: bool,
        linear: bool,
    ) -> Option<u32> {
        // As in `extract`: a port whose packets the decap fast path or the linear match finds
        // hashes only those they do not find, later.
        let no_decap = self.cls.decap(in_port).is_empty();
        self.unhashed = linear || !no_decap;
        let early = match self.keys_flow {
            Some(from) if linear && no_decap && !ct_tuple => {
                self.recirc_meta_match(batch, in_port, from)
            }
            _ => None,
        };
        if early.is_none() {
            self.reuse_keys(batch, ct_tuple, !self.unhashed);
        }
        early
    }

    /// The keys of a batch recirculated whole with its headers untouched, from the pass
    /// before: each key's metadata words made again, and its hash if `hash` (else it is made
    /// by [`Self::hash_now`] for the packets that need one).
    #[inline(always)]
    pub(super) fn reuse_keys(&mut self, batch: &mut Batch, ct_tuple: bool, hash: bool) {
        for (i, p) in batch.packets_mut().iter_mut().enumerate() {
            let k = &mut self.keys[i];
            k.clear_words(!flow::key::PACKET_WORDS);
            key_metadata_add(p, k, ct_tuple);
            if !hash {
                continue;
            }
            let h = pass_hash(k.hash(0), p.meta.recirc_depth);
            p.meta.hash = h;
            self.hashes[i] = h;
        }
    }

    /// Hashes the keys of the packets `bits` of a pass extracted without ([`Self::unhashed`]),
    /// for the EMC.
    #[inline(never)]
    pub(super) fn hash_now(&mut self, batch: &mut Batch, mut bits: u32) {
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let p = &mut batch.packets_mut()[i];
            let h = pass_hash(self.keys[i].hash(0), p.meta.recirc_depth);
            p.meta.hash = h;
            self.hashes[i] = h;
        }
    }
}

/// A packet's hash in a pass: its key's, mixed with the recirculation depth.
#[inline(always)]
pub(super) fn pass_hash(key_hash: u32, depth: u8) -> u32 {
    key_hash ^ u32::from(depth).wrapping_mul(0x9e37_79b9)
}

/// Writes the metadata words of `p`'s key (in_port, recirc_id, dp_hash, mark, packet type,
/// tunnel, connection) into `key`, clearing the rest: what a pass's extraction starts from.
#[inline(always)]
pub fn key_metadata(p: &Packet, key: &mut FlowKey) {
    key_metadata_with(p, key, true);
}

/// [`key_metadata`], with the connection's original tuple only if `ct_tuple` (see
/// [`crate::ct::to_key`]).
#[inline(always)]
pub(super) fn key_metadata_with(p: &Packet, key: &mut FlowKey, ct_tuple: bool) {
    key.clear();
    key_metadata_add(p, key, ct_tuple);
}

/// [`key_metadata_with`] into a key that has no metadata words.
#[inline(always)]
pub(super) fn key_metadata_add(p: &Packet, key: &mut FlowKey, ct_tuple: bool) {
    let m = &p.meta;
    key.set_word(0, meta_word(m.in_port, m.recirc_id));
    if !only_port_and_recirc(m) {
        key_metadata_more(p, key, ct_tuple);
    }
}

/// Whether a packet's metadata words are in_port and recirc_id alone (one test for the common
/// case).
#[inline(always)]
pub(super) fn only_port_and_recirc(m: &PacketMeta) -> bool {
    (m.dp_hash | m.pkt_mark | m.packet_type) == 0 && m.tunnel == TnlMd::None && m.ct_state == 0
}

/// The rest of [`key_metadata_with`], for a packet that has more than in_port and recirc_id.
#[inline(never)]
fn key_metadata_more(p: &Packet, key: &mut FlowKey, ct_tuple: bool) {
    let m = &p.meta;
    if m.dp_hash != 0 {
        key.set_dp_hash(m.dp_hash);
    }
    if m.pkt_mark != 0 {
        key.set_pkt_mark(m.pkt_mark);
    }
    if m.packet_type != 0 {
        key.set_packet_type(m.packet_type);
    }
    if m.tunnel != TnlMd::None {
        crate::tnl_md::md_to_key(p.tnl_md(), m.tunnel, key);
    }
    // After the tunnel words: the connection tuple's ports share a word with GENEVE options.
    if m.ct_state != 0 {
        crate::ct::to_key(p, key, ct_tuple);
    }
}

/// Extracts packet `p`'s key into `k` (whose metadata is made), counts a malformed packet,
/// sets the packet's header offsets and hash, and returns the hash.
#[inline(always)]
pub(super) fn extract_packet(stats: &mut PmdStats, p: &mut Packet, k: &mut FlowKey) -> u32 {
    let x = flow::extract(p.data(), k);
    let h = pass_hash(x.hash, p.meta.recirc_depth);
    take_extracted(stats, p, &x, h);
    h
}

/// [`extract_packet`] without the hash (0).
#[inline(always)]
pub(super) fn extract_packet_unhashed(stats: &mut PmdStats, p: &mut Packet, k: &mut FlowKey) {
    let x = flow::extract_unhashed(p.data(), k);
    take_extracted(stats, p, &x, 0);
}

/// Counts a malformed packet and sets the packet's header offsets and `hash`.
#[inline(always)]
fn take_extracted(stats: &mut PmdStats, p: &mut Packet, x: &flow::Extracted, hash: u32) {
    if let Some(m) = x.malformed {
        stats.malformed[m as usize] += 1;
    }
    p.meta.hash = hash;
    p.meta.l2_5 = x.layers.l2_5;
    p.meta.l3 = x.layers.l3;
    p.meta.l4 = x.layers.l4;
}

/// Word 0 of a key: in_port and recirc_id, in network byte order.
#[inline(always)]
pub(super) fn meta_word(in_port: u32, recirc_id: u32) -> u64 {
    // The two fields' bytes in memory order, as two 32-bit halves of the word.
    let (a, b) = (
        u64::from(u32::from_ne_bytes(in_port.to_be_bytes())),
        u64::from(u32::from_ne_bytes(recirc_id.to_be_bytes())),
    );
    if cfg!(target_endian = "little") {
        a | b << 32
    } else {
        a << 32 | b
    }
}
