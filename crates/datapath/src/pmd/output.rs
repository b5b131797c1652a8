//! The tx stage: each datapath port's tx queue and batch as a PMD sees it ([`TxSlot`]);
//! `output` hands a group to the port's batch (by swap when the batch is empty), sent when it
//! fills and at the end of each rx burst ([`Pmd::flush_tx`], OVS's
//! `dp_netdev_pmd_flush_output_packets`). A super-frame for a queue that does not segment
//! its kind (TCP: [`TxQueue::tso`]; UDP: [`TxQueue::uso`] too; UFO: [`TxQueue::ufo`] too)
//! is sent as its segments (a UFO one as its IP fragments), and
//! so is an encapsulated one ([`crate::gso_tunnel`]: segmented after the push, outer headers
//! on every segment) unless the queue takes those whole too ([`TxQueue::tnl_gso`]) and its
//! outer lengths fit ([`crate::gso_tunnel::fits_whole`]); one received encapsulated
//! ([`crate::gso_tunnel::is_received`]) likewise, once its inner headers are found
//! ([`crate::gso_tunnel::settle_received`]). A frame whose checksum is pending
//! ([`crate::csum_pending`]) is completed in software first unless the queue has its device
//! complete it ([`TxQueue::tx_csum`]). Counted as `tx_packets` and `tx_batches`, the
//! flush's cycles under `tx`.

use std::sync::Arc;

use crate::actions::DpAction;
use crate::flow_table::FlowRef;
use crate::gso_tunnel::{fits_whole, is_encapsulated, is_received, settle_received};
use crate::gso_udp;
use crate::gso_ufo;
use crate::packet::{Batch, Packet, Pool};
use crate::port::TxQueue;
use crate::super_frame::{Cut, SuperFrame};
use crate::tunnel::TunnelKind;
use crate::tx_gso::TxGsoStats;

use super::{Pmd, PmdStats, Stage};

/// A datapath port as a PMD sees it: its tx queue and batch, and its tunnel kind (the kind
/// `tnl_pop` to it decapsulates).
pub(super) struct TxSlot {
    q: Box<dyn TxQueue>,
    pub(super) batch: Batch,
    tunnel: Option<TunnelKind>,
    /// The queue takes TCP super-frames whole ([`TxQueue::tso`]).
    tso: bool,
    /// The queue takes UDP super-frames whole too ([`TxQueue::uso`]).
    uso: bool,
    /// The queue takes UFO super-frames whole too ([`TxQueue::ufo`]).
    ufo: bool,
    /// The queue takes encapsulated super-frames whole too ([`TxQueue::tnl_gso`]).
    tnl: bool,
    /// The queue takes lent packets ([`TxQueue::takes_lent`]).
    lent: bool,
    /// The queue takes frames whose checksum is pending ([`TxQueue::tx_csum`]).
    csum: bool,
    /// The port's super-frame counters.
    gso: Arc<TxGsoStats>,
}

impl TxSlot {
    /// The queue, for its port's owner to close (its batch is empty: sent before).
    pub(super) fn into_queue(self) -> Box<dyn TxQueue> {
        self.q
    }
}

impl Pmd {
    /// Sends output for `port_no` through `q`.
    pub fn add_txq(&mut self, port_no: u32, q: Box<dyn TxQueue>) {
        self.add_port_txq(port_no, q, None);
    }

    /// Sends output for `port_no` through `q`; `tnl_pop` to the port decapsulates `tunnel`.
    pub fn add_port_txq(&mut self, port_no: u32, q: Box<dyn TxQueue>, tunnel: Option<TunnelKind>) {
        self.add_port_txq_counted(port_no, q, tunnel, Arc::default());
    }

    /// [`Self::add_port_txq`], the super-frames sent counted in `gso` (the port's counters,
    /// which every PMD's queue on it shares).
    pub fn add_port_txq_counted(
        &mut self,
        port_no: u32,
        q: Box<dyn TxQueue>,
        tunnel: Option<TunnelKind>,
        gso: Arc<TxGsoStats>,
    ) {
        let i = port_no as usize;
        if self.txs.len() <= i {
            self.txs.resize_with(i + 1, || None);
        }
        let tso = q.tso();
        let uso = tso && q.uso();
        let ufo = tso && q.ufo();
        let tnl = tso && q.tnl_gso();
        let lent = q.takes_lent();
        let csum = q.tx_csum();
        self.txs[i] = Some(TxSlot {
            q,
            batch: Batch::new(),
            tunnel,
            tso,
            uso,
            ufo,
            tnl,
            lent,
            csum,
            gso,
        });
    }

    /// Hands packets to `port`'s tx batch: the originals when this is the last action and
    /// nothing truncates, copies otherwise.
    pub(super) fn output(
        &mut self,
        port: u32,
        batch: &mut Batch,
        consume: bool,
        trunc: Option<u32>,
    ) {
        if !matches!(self.txs.get(port as usize), Some(Some(_))) {
            // No such port: counted as a drop when the batch is freed.
            return;
        }
        let mut src = if consume && trunc.is_none() {
            std::mem::take(batch)
        } else {
            if self.pass_gso && trunc.is_some() {
                // A truncated copy is of the frame as it would leave whole.
                self.complete_pending(batch);
            }
            self.copy_batch(batch, trunc)
        };
        let Some(Some(tx)) = self.txs.get_mut(port as usize) else {
            return;
        };
        if self.pass_gso && !tx.csum && crate::csum_pending::has_pending(&src) {
            crate::csum_pending::complete_batch(&mut src, &mut self.pool);
        }
        if self.pass_gso && has_gso(&src) {
            if !tx.tso || has_encapsulated_not_taken(tx, &src) || has_udp_super_not_taken(tx, &src)
            {
                send_segmented(tx, &mut src, &mut self.pool, &mut self.stats);
                if consume && trunc.is_none() {
                    *batch = src;
                } else {
                    self.recycle(src);
                }
                return;
            }
            count_whole(tx, &src);
        }
        if tx.batch.is_empty() {
            // Hand the whole group over: swap buffers instead of moving packets one by one.
            std::mem::swap(&mut tx.batch, &mut src);
            if tx.batch.is_full() {
                self.stats.tx_packets += tx.batch.len() as u64;
                self.stats.tx_batches += 1;
                tx.q.send(&mut tx.batch, &mut self.pool);
            }
            if consume && trunc.is_none() {
                *batch = src;
            } else {
                self.recycle(src);
            }
            return;
        }
        for p in src.drain() {
            tx.batch.push(p);
            if tx.batch.is_full() {
                self.stats.tx_packets += tx.batch.len() as u64;
                self.stats.tx_batches += 1;
                tx.q.send(&mut tx.batch, &mut self.pool);
            }
        }
        if consume && trunc.is_none() {
            *batch = src;
        } else {
            self.recycle(src);
        }
    }

    /// The tunnel kind of datapath port `port`, if it is a tunnel port.
    pub(super) fn tunnel_kind(&self, port: u32) -> Option<TunnelKind> {
        match self.txs.get(port as usize) {
            Some(Some(slot)) => slot.tunnel,
            _ => None,
        }
    }

    /// Whether megaflow `r`'s actions are only an output to a queue that takes lent packets:
    /// the one use of a lent packet that does not need its whole frame in the buffer.
    pub(super) fn sends_lent(&self, r: FlowRef) -> bool {
        match self.flows.get(r).map(|f| &f.actions[..]) {
            Some([DpAction::Output(port)]) => {
                matches!(self.txs.get(*port as usize), Some(Some(tx)) if tx.lent)
            }
            _ => false,
        }
    }

    /// Sends every non-empty tx batch.
    pub(super) fn flush_tx(&mut self) {
        let t0 = self.stamp();
        for tx in self.txs.iter_mut().flatten() {
            if !tx.batch.is_empty() {
                self.stats.tx_packets += tx.batch.len() as u64;
                self.stats.tx_batches += 1;
                tx.q.send(&mut tx.batch, &mut self.pool);
            }
            tx.q.flush();
        }
        let t1 = self.stamp();
        self.add_stage(Stage::Tx, t0, t1);
    }
}

/// Whether `batch` holds a super-frame (asked only of batches of a pass whose rx batch
/// was marked to possibly hold one).
#[inline(never)]
pub(super) fn has_gso(batch: &Batch) -> bool {
    batch.packets().iter().any(|p| p.meta.gso_size != 0)
}

/// Counts the super-frames of `batch`, going whole to `tx`'s queue, by kind.
#[inline(never)]
fn count_whole(tx: &TxSlot, batch: &Batch) {
    for p in batch.packets().iter().filter(|p| p.meta.gso_size != 0) {
        count_one_whole(tx, p);
    }
}

/// Counts super-frame `p`, going whole to `tx`'s queue, by kind.
fn count_one_whole(tx: &TxSlot, p: &Packet) {
    if gso_ufo::is_ufo(p) {
        tx.gso.ufo.add_whole(1);
    } else if tx.uso && gso_udp::is_udp(p) {
        tx.gso.udp.add_whole(1);
    } else {
        tx.gso.add_whole(1);
    }
}

/// Whether `batch` holds a UDP super-frame of a kind `tx`'s queue does not take whole.
#[inline(never)]
fn has_udp_super_not_taken(tx: &TxSlot, batch: &Batch) -> bool {
    batch.packets().iter().any(|p| !takes_udp_kind(tx, p))
}

/// Whether `tx`'s queue takes super-frame `p` whole as far as its kind goes: a UFO one if it
/// takes UFO, a UDP segmentation one if it takes USO, any other (TCP, or not one the switch
/// takes: refused later) always.
#[inline]
fn takes_udp_kind(tx: &TxSlot, p: &Packet) -> bool {
    if gso_ufo::is_ufo(p) {
        tx.ufo
    } else {
        tx.uso || !gso_udp::is_udp(p)
    }
}

/// Whether `batch` holds a super-frame encapsulated whole by a `tnl_push` that `tx`'s queue
/// does not take whole, or one received encapsulated (each made ready, or cut, by
/// [`put_super`]).
#[inline(never)]
fn has_encapsulated_not_taken(tx: &TxSlot, batch: &Batch) -> bool {
    batch
        .packets()
        .iter()
        .any(|p| is_received(p) || is_encapsulated(p) && !takes_encapsulated(tx, p))
}

/// Whether `batch` holds a super-frame received encapsulated ([`is_received`]).
#[inline(never)]
pub(super) fn has_received(batch: &Batch) -> bool {
    batch.packets().iter().any(is_received)
}

/// Whether `tx`'s queue takes encapsulated super-frame `p` whole: it takes UDP-tunnel GSO and
/// `p`'s outer lengths fit.
#[inline]
fn takes_encapsulated(tx: &TxSlot, p: &Packet) -> bool {
    tx.tnl && fits_whole(p)
}

/// Hands the packets of `src` to `tx`'s batch, each super-frame as its segments where the
/// queue does not take it whole, sending the batch each time it fills; leaves `src` empty.
/// Super-frames that are not TCP or UDP over IP are dropped (counted).
#[inline(never)]
fn send_segmented(tx: &mut TxSlot, src: &mut Batch, pool: &mut Pool, stats: &mut PmdStats) {
    for p in src.drain() {
        put_one(tx, p, pool, stats);
    }
}

/// Adds `p` to `tx`'s batch, sending the batch when it fills.
#[inline]
fn put(tx: &mut TxSlot, p: Packet, pool: &mut Pool, stats: &mut PmdStats) {
    tx.batch.push(p);
    if tx.batch.is_full() {
        stats.tx_packets += tx.batch.len() as u64;
        stats.tx_batches += 1;
        tx.q.send(&mut tx.batch, pool);
    }
}

/// Adds the segments of super-frame `p` to `tx`'s batch, the outer headers of an
/// encapsulated one written on each (dropped, counted by reason, if it is not TCP or UDP over
/// IP, or its outer headers not IP and UDP).
#[inline(never)]
fn put_segments(tx: &mut TxSlot, p: Packet, pool: &mut Pool, stats: &mut PmdStats) {
    match Cut::of(&p) {
        Ok(cut) => {
            let n = cut.n_segments(&p);
            for k in 0..n {
                put(tx, cut.segment(&p, k, pool), pool, stats);
            }
            stats.gso_frames += 1;
            stats.gso_segments += n as u64;
            match cut.kind {
                SuperFrame::Tcp(_) => tx.gso.add_segmented(n as u64),
                SuperFrame::Udp(_) => tx.gso.udp.add_segmented(n as u64),
                SuperFrame::Ufo(_) => tx.gso.ufo.add_segmented(n as u64),
            }
        }
        Err(e) => stats.count_gso_drop(e),
    }
    pool.free(p);
}

/// Hands one packet to `tx`'s batch, as its segments when it is a super-frame the queue does
/// not take whole (an encapsulated one unless the queue takes UDP-tunnel GSO).
#[inline]
pub(super) fn put_one(tx: &mut TxSlot, p: Packet, pool: &mut Pool, stats: &mut PmdStats) {
    if p.meta.gso_size != 0 {
        put_super(tx, p, pool, stats);
    } else if p.meta.csum_pending() && !tx.csum {
        put_completed(tx, p, pool, stats);
    } else {
        put(tx, p, pool, stats);
    }
}

/// [`put_one`] of a frame whose checksum is pending, to a queue that does not take it so:
/// completed first.
#[inline(never)]
fn put_completed(tx: &mut TxSlot, mut p: Packet, pool: &mut Pool, stats: &mut PmdStats) {
    pool.materialize(&mut p);
    crate::csum_pending::complete(&mut p);
    put(tx, p, pool, stats);
}

/// [`put_one`] of a super-frame: whole to a queue that segments its kind (counted), else as
/// its segments. One received encapsulated is first made what a push leaves
/// ([`settle_received`]; dropped, counted by reason, when its headers no longer allow).
#[inline(never)]
fn put_super(tx: &mut TxSlot, mut p: Packet, pool: &mut Pool, stats: &mut PmdStats) {
    if let Err(e) = settle_received(&mut p) {
        stats.count_gso_drop(e);
        pool.free(p);
        return;
    }
    let whole_kind = !is_encapsulated(&p) || takes_encapsulated(tx, &p);
    if tx.tso && whole_kind && takes_udp_kind(tx, &p) {
        count_one_whole(tx, &p);
        put(tx, p, pool, stats);
    } else {
        put_segments(tx, p, pool, stats);
    }
}
