//! Recirculation (OVS's `dp_netdev_recirculate`): packets that must pass again, after
//! `recirc` or `tnl_pop`, queue here and run another pass in the same iteration, as batches
//! of consecutive packets that share an in_port ([`Pmd::run_recirc`]); after `tnl_pop` a
//! packet is classified as received on the tunnel port. A burst recirculated whole with its
//! headers untouched becomes the queue by swap, and its next pass reuses its keys
//! (`keys_reusable`); nothing queued before it, [`Pmd::input`] runs that pass at once
//! ([`Pmd::recirc_whole_now`]). Depth is limited to [`MAX_RECIRC_DEPTH`] (`recirc_depth_drops`).

use crate::packet::{Batch, MAX_BURST, Packet};
use crate::tunnel::{TnlPopDrop, TunnelKind};

use super::{Pmd, PmdStats};

/// Deepest recirculation (OVS's `MAX_RECIRC_DEPTH`).
pub const MAX_RECIRC_DEPTH: u8 = 8;

impl Pmd {
    /// Runs the packets queued for another pass (recirculated or decapsulated), in order, as
    /// batches of consecutive packets that share an in_port: after `tnl_pop` a packet is
    /// classified as received on the tunnel port, not on the port it came in by.
    pub(super) fn run_recirc(&mut self) {
        while !self.recirc.is_empty() {
            let in_port = self.recirc[0].meta.in_port;
            let take = self
                .recirc
                .iter()
                .take(MAX_BURST)
                .take_while(|p| p.meta.in_port == in_port)
                .count();
            let mut b = std::mem::take(&mut self.recirc_batch);
            let whole = take == self.recirc.len() && b.is_empty();
            let reuse = self.keys_reusable.take() == Some(take) && whole;
            if whole {
                // The whole queue is one batch: it becomes the batch, no packet moved.
                b.swap_packets(&mut self.recirc);
            } else {
                for p in self.recirc.drain(..take) {
                    b.push(p);
                }
            }
            if self.recirc_gso {
                b.mark_gso();
            }
            self.input(&mut b, in_port, reuse);
            self.recirc_batch = b;
        }
        self.recirc_gso = false;
    }

    /// After a pass of `batch` (now empty): if the pass recirculated its whole batch, with
    /// its keys, and nothing was queued before it (`keys_reusable`), takes that batch back
    /// from the queue for its next pass, which [`Self::input`] runs at once. It is what
    /// [`Self::run_recirc`] would run next, the same way: only its queueing is saved. Not
    /// while waiting misses run (`running_deferred`), whose recirculations run after them.
    pub(super) fn recirc_whole_now(&mut self, batch: &mut Batch) -> bool {
        let Some(n) = self.keys_reusable else {
            return false;
        };
        if n != self.recirc.len() || n > MAX_BURST || !batch.is_empty() || self.running_deferred {
            return false;
        }
        self.keys_reusable = None;
        batch.swap_packets(&mut self.recirc);
        // As `run_recirc` marks the batch it takes from a queue that may hold super-frames;
        // the queue is empty now, and so is what it may hold.
        self.pass_gso = std::mem::take(&mut self.recirc_gso);
        true
    }

    /// Queues packets for another pass with `recirc_id`.
    /// `pristine`: `batch` is the pass's batch with the headers its keys were made from.
    pub(super) fn recirculate(
        &mut self,
        id: u32,
        batch: &mut Batch,
        consume: bool,
        pristine: bool,
    ) {
        // Common case: the whole batch goes on, none of it too deep, with nothing queued
        // before it: its packets become the queue where they are (and, pristine, the next
        // pass takes their keys from this one's).
        if consume
            && self.recirc.is_empty()
            && batch
                .packets()
                .iter()
                .all(|p| p.meta.recirc_depth < MAX_RECIRC_DEPTH)
        {
            for p in batch.packets_mut() {
                p.meta.recirc_depth += 1;
                p.meta.recirc_id = id;
            }
            self.recirc_gso |= self.pass_gso;
            self.stats.recirculations += batch.len() as u64;
            // Keys of which some hold packet fields and some do not serve no next pass.
            let keys = self.pass_keys;
            self.keys_reusable =
                (pristine && keys != super::extract::PassKeys::Mixed).then_some(batch.len());
            self.keys_simple = keys == super::extract::PassKeys::Simple;
            // Pristine, the batch is its pass's whole batch, which one megaflow found: the
            // pass's hits are still that megaflow's.
            self.keys_flow = self.hits[0];
            batch.swap_packets(&mut self.recirc);
            return;
        }
        let mut src = if consume {
            std::mem::take(batch)
        } else {
            self.copy_batch(batch, None)
        };
        self.recirc_gso |= self.pass_gso;
        for mut p in src.drain() {
            if p.meta.recirc_depth >= MAX_RECIRC_DEPTH {
                self.stats.recirc_depth_drops += 1;
                self.pool.free(p);
                continue;
            }
            p.meta.recirc_depth += 1;
            p.meta.recirc_id = id;
            self.stats.recirculations += 1;
            self.recirc.push(p);
        }
        if consume {
            *batch = src;
        } else {
            self.recycle(src);
        }
    }

    /// `tnl_pop(port)`: decapsulates each packet as `port`'s tunnel kind says and queues it
    /// for another pass as received on `port`, with recirc_id 0; drops (counted by reason)
    /// what does not decapsulate.
    pub(super) fn tnl_pop(&mut self, port: u32, batch: &mut Batch, consume: bool) {
        let kind = self.tunnel_kind(port);
        let mut src = if consume {
            std::mem::take(batch)
        } else {
            self.copy_batch(batch, None)
        };
        self.recirc_gso |= self.pass_gso;
        for mut p in src.drain() {
            if pop_one(&mut self.stats, &mut p, port, kind) {
                self.recirc.push(p);
            } else {
                self.pool.free(p);
            }
        }
        if consume {
            *batch = src;
        } else {
            self.recycle(src);
        }
    }
}

/// Decapsulates one packet for another pass as received on tunnel port `port` (recirc_id 0,
/// one level deeper), counting the pop; false when it is dropped (too deep, or `tnl_pop`
/// refused it, counted by reason). The one per-packet step of both the `tnl_pop` action and
/// the in-place decap fast path.
pub(super) fn pop_one(
    stats: &mut PmdStats,
    p: &mut Packet,
    port: u32,
    kind: Option<TunnelKind>,
) -> bool {
    if p.meta.recirc_depth >= MAX_RECIRC_DEPTH {
        stats.recirc_depth_drops += 1;
        return false;
    }
    let popped = match kind {
        Some(k) => crate::tunnel::tnl_pop(p, k),
        None => Err(TnlPopDrop::BadPort),
    };
    if let Err(e) = popped {
        stats.tnl_pop_drops[e as usize] += 1;
        return false;
    }
    let m = &mut p.meta;
    m.in_port = port;
    m.recirc_id = 0;
    m.recirc_depth += 1;
    stats.tnl_pops += 1;
    true
}
