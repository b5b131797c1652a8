//! The simple match tier (OVS's `dp_netdev_simple_match`, here with the EMC on): on a port
//! with megaflows that look at no packet field but the ethertype, VLAN TCI and fragment flags
//! ([`SimpleFlow`](crate::decap::SimpleFlow)), a plain frame's megaflow is found from its metadata words alone, and the
//! frame's shape is checked by the fast extractor (`flow::extract_simple`), inside the
//! extract stage's loop: no key but its TCP flags, no hash, no EMC entry. Counted as
//! `simple_hits`, its cycles under `extract`.
//!
//! This is also where lent packets ([`crate::packet::Pool::packet_lent`]) are decided: one
//! stays lent only when the simple match sends it to an output that takes lent frames.

use crate::flow_table::FlowRef;
use crate::packet::Batch;

use super::super::Pmd;
use super::super::extract::{extract_packet, key_metadata_with, only_port_and_recirc};

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
                crate::decap::lookup_simple(flows, k)
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
                .is_some_and(|id| only_port_and_recirc(&p.meta) && p.meta.recirc_id == id);
            // The simple megaflows look at metadata words only: find one first (the key's
            // metadata words are only made when needed), then see whether the frame is of
            // the shape they take. A simple hit's key needs no more than its TCP flags.
            let found = if same {
                k.clear();
                Some(first)
            } else {
                key_metadata_with(p, k, ct_tuple);
                crate::decap::lookup_simple(flows, k)
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

    /// Brings the whole frame of every lent packet of `batch` into its buffer.
    #[cold]
    #[inline(never)]
    pub(in crate::pmd) fn materialize(&mut self, batch: &mut Batch) {
        for p in batch.packets_mut() {
            self.pool.materialize(p);
        }
    }
}
