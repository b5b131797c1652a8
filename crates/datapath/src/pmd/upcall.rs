//! The upcall stage: what no lookup tier found goes to the slow path ([`UpcallHandler`],
//! OVS's `handle_packet_upcall`), which returns a megaflow to install (then the packet is
//! processed with it) or nothing (dropped, counted as a lost upcall).
//!
//! Upcalls run in the PMD, so their time is budgeted: a count per iteration
//! ([`UPCALL_BUDGET`]) and, while cached traffic flows, a share of the PMD's cycles
//! ([`DEFAULT_UPCALL_SHARE_PCT`]). Misses over the budget, or behind older waiting misses,
//! wait in the deferred queue (with per-port backpressure, [`DEFER_PER_PORT`]) and run again
//! at the start of a later iteration ([`Pmd::run_deferred`]). The stage is timed whenever it
//! runs (`upcall`), apart from the sampled stages.

use flow::{FlowKey, Mask, Match};

use crate::actions::DpAction;
use crate::flow_table::{FlowStats, Megaflow};
use crate::packet::{Batch, MAX_BURST, Packet};
use crate::tsc;

use super::flows::ufid_of;
use super::tiers::Pass;
use super::{Pmd, Stage};

/// Most upcalls one iteration handles; further misses wait in the deferred queue.
pub const UPCALL_BUDGET: usize = 64;

/// Share of the PMD's time (percent) the slow path may take while the PMD also forwards cached
/// packets: upcalls spend tokens of TSC cycles that accrue at this share of elapsed time (OVS
/// runs upcalls on handler threads; here they run in the PMD, so their time is budgeted). With
/// no cached traffic there is nothing to protect and upcalls run unbudgeted.
pub const DEFAULT_UPCALL_SHARE_PCT: u32 = 10;

/// Misses that may wait for the slow path, per PMD; beyond that they are dropped and counted as
/// lost upcalls.
pub const DEFER_MAX: usize = 4096;

/// Misses one input port may have waiting before the PMD stops polling that port until they
/// are handled (backpressure: a finite source loses nothing, and other ports keep flowing).
pub const DEFER_PER_PORT: u32 = 1024;

/// A packet the slow path sends by itself while handling an upcall (OVS's packet-out from
/// translation): an ARP or neighbour solicitation for an unresolved tunnel next hop.
#[derive(Clone, Debug)]
pub struct PacketOut {
    /// The frame, from its Ethernet header.
    pub frame: Vec<u8>,
    /// The datapath port it counts as received on (`in_port` of its metadata).
    pub in_port: u32,
    /// What to do with it, compiled.
    pub actions: Vec<DpAction>,
}

/// What the slow path decides for a packet that missed every cache.
pub enum UpcallResult {
    /// Install this megaflow (the packet's key under `mask`) with these actions, and process
    /// the packet with them. `packet_outs` are sent first, once.
    Install {
        /// The megaflow's mask: which key fields translation looked at (its `in_port` is
        /// always matched).
        mask: Box<Mask>,
        /// The datapath actions as translation produced them, kept for flow dumps.
        actions: Vec<flow::odp::Action>,
        /// The same actions compiled ([`crate::actions::compile`]), which the PMD executes.
        compiled: Vec<DpAction>,
        /// Packets translation sends by itself (ARP or ND for a tunnel's next hop).
        packet_outs: Vec<PacketOut>,
        /// The megaflow's `skb_priority` mask: all ones when translation looked at the
        /// packet's QoS priority (`set_queue` and the like). The key has no priority field
        /// and every packet a port receives has priority 0, so this only decides whether dumps
        /// show `skb_priority(0)`, as OVS's do.
        skb_priority_mask: u32,
    },
    /// Drop the packet without installing anything.
    Drop,
}

/// The slow path as the datapath sees it.
pub trait UpcallHandler: Send {
    /// Decides for a missed packet with key `key`.
    fn upcall(&mut self, key: &FlowKey, pkt: &Packet) -> UpcallResult;
}

/// The handler used until a slow path is attached: every miss is dropped and counted as a lost
/// upcall.
pub struct DropUpcalls;

impl UpcallHandler for DropUpcalls {
    fn upcall(&mut self, _key: &FlowKey, _pkt: &Packet) -> UpcallResult {
        UpcallResult::Drop
    }
}

impl Pmd {
    /// Adds the slow path's share of the time since the last call to its token budget, capped
    /// at a millisecond's share so that idle time does not bank an unbounded burst.
    pub(super) fn accrue_tokens(&mut self, now: u64) {
        let share = self.config.upcall_share_pct.min(100) as i64;
        let hz = tsc::hz() as i64;
        let elapsed = now.saturating_sub(self.tokens_tsc) as i64;
        self.tokens_tsc = now;
        let cap = hz / 1000 * share / 100;
        self.upcall_tokens = (self.upcall_tokens + elapsed.min(hz) * share / 100).min(cap);
    }

    /// Whether the slow path may run now: within the iteration's count budget, and then always
    /// without cached traffic to protect, else while it has tokens.
    pub(super) fn upcall_allowed(&self) -> bool {
        self.upcalls_this_iter < UPCALL_BUDGET
            && (self.config.upcall_share_pct >= 100 || !self.protecting || self.upcall_tokens > 0)
    }

    /// Runs waiting misses through the pipeline again, oldest first, while the slow path may
    /// run; packets of one input port go as one batch.
    pub(super) fn run_deferred(&mut self) {
        while !self.deferred.is_empty() && self.upcall_allowed() {
            let in_port = self.deferred[0].meta.in_port;
            let mut b = std::mem::take(&mut self.recirc_batch);
            while b.len() < MAX_BURST
                && self
                    .deferred
                    .front()
                    .is_some_and(|p| p.meta.in_port == in_port)
            {
                let mut p = self.deferred.pop_front().expect("checked");
                p.meta.set_deferred(false);
                if let Some(c) = self.deferred_by_port.get_mut(in_port as usize) {
                    *c = c.saturating_sub(1);
                }
                b.push(p);
            }
            if self.deferred_gso {
                b.mark_gso();
            }
            self.running_deferred = true;
            self.input(&mut b, in_port, false);
            self.running_deferred = false;
            for p in self.redeferred.drain(..).rev() {
                self.deferred.push_front(p);
            }
            self.recirc_batch = b;
            // Waiting misses that recirculate or pop go on at once, as they would have.
            self.run_recirc();
            self.flush_tx();
        }
        if self.deferred.is_empty() {
            self.deferred_gso = false;
        }
    }

    /// The last act of a PMD whose core left the core set, once its rx queues went to other
    /// PMDs: the misses still waiting for the slow path are handled (no budget: there is no
    /// forwarding left to protect) and what they output is sent, so a port that stays loses
    /// none of them; the meters keep what this PMD counted.
    pub fn retire(&mut self) {
        // Each round upcalls at least one waiting miss; the bound is a guard, not a limit.
        for _ in 0..DEFER_MAX {
            if self.deferred.is_empty() {
                break;
            }
            self.upcalls_this_iter = 0;
            self.protecting = false;
            self.run_deferred();
        }
        self.flush_tx();
        self.meters.retire();
    }

    /// The upcall stage: the packets no tier found to the slow path, timed whenever there
    /// are any (their cycles are left out of the actions'). Returns when the actions' stage
    /// starts: `t3`, or the upcalls' end in an iteration whose stages are timed.
    #[inline(always)]
    pub(super) fn upcall_stage(&mut self, batch: &mut Batch, pass: &Pass, t3: u64) -> u64 {
        if pass.todo == 0 {
            return t3;
        }
        let u0 = tsc::now();
        self.upcalls(batch, pass.todo, pass.in_port);
        let u1 = tsc::now();
        self.stats.stage_cycles[Stage::Upcall as usize] += u1 - u0;
        if self.timing { u1 } else { t3 }
    }

    /// Slow path for the packets in `misses`.
    pub(super) fn upcalls(&mut self, batch: &mut Batch, mut misses: u32, in_port: u32) {
        // The slow path sees every field: the keys get the connection tuple they were made
        // without (and so does any lookup after a flow it installs matches it).
        if self.ct_tuple_flows == 0 {
            let mut bits = misses;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                crate::ct::tuple_to_key(&batch.packets()[i], &mut self.keys[i]);
            }
        }
        let mut installed = false;
        while misses != 0 {
            let i = misses.trailing_zeros() as usize;
            misses &= misses - 1;
            // A flow installed for an earlier packet of this batch may cover this one.
            if installed
                && let Some(r) = self
                    .cls
                    .get_mut(in_port)
                    .and_then(|c| c.lookup(&self.keys[i]))
            {
                self.hits[i] = Some(r);
                self.stats.megaflow_hits += 1;
                continue;
            }
            // Over budget, or behind older waiting misses (whose flows this packet may share,
            // so it must not overtake them): wait, or be dropped when the queue is full.
            let behind = !self.deferred.is_empty() && !self.running_deferred;
            if behind || !self.upcall_allowed() {
                self.defer(batch, i);
                continue;
            }
            self.upcalls_this_iter += 1;
            let t0 = tsc::now();
            // The slow path sees (and may send to a controller) the frame as it is on the
            // wire: a pending checksum is completed first.
            if batch.packets()[i].meta.csum_pending() {
                let p = &mut batch.packets_mut()[i];
                self.pool.materialize(p);
                crate::csum_pending::complete(p);
            }
            let result = self.upcall.upcall(&self.keys[i], &batch.packets()[i]);
            match result {
                UpcallResult::Drop => self.stats.lost_upcalls += 1,
                UpcallResult::Install {
                    mask,
                    actions,
                    compiled,
                    packet_outs,
                    skb_priority_mask,
                } => {
                    self.stats.upcalls += 1;
                    for po in packet_outs {
                        self.packet_out(&po);
                    }
                    let key = self.keys[i].clone();
                    let mut mask = *mask;
                    mask.set_in_port(u32::MAX);
                    let mut attrs = flow::odp::KeyAttrs::megaflow(&key, &mask);
                    attrs.skb_priority_mask |= skb_priority_mask;
                    let f = Megaflow {
                        ufid: ufid_of(&key, &mask),
                        m: Match::new(&key, &mask),
                        attrs,
                        key,
                        odp_actions: actions.into(),
                        actions: compiled.into(),
                        stats: FlowStats::default(),
                        expires: true,
                        installed_tsc: 0,
                    };
                    let len = batch.packets()[i].len() as u64;
                    match self.try_add_flow(f) {
                        Ok(r) => {
                            installed = true;
                            self.upcalled.push((r, len));
                            self.hits[i] = Some(r);
                            if self.unhashed {
                                self.hash_now(batch, 1 << i);
                            }
                            self.emc.insert(&self.keys[i], self.hashes[i], r);
                        }
                        // Over the flow limit (or a race with an identical flow): still
                        // process this packet, through a temporary entry.
                        Err((_, f)) => {
                            if self.flows.len() >= self.config.flow_limit {
                                self.stats.flow_limit_hits += 1;
                            }
                            let r = self.flows.insert(*f);
                            self.upcalled.push((r, len));
                            self.hits[i] = Some(r);
                            self.temp_flows.push(r);
                        }
                    }
                }
            }
            // The slow path's whole cost (translation and install) comes out of its budget.
            self.upcall_tokens -= (tsc::now() - t0) as i64;
        }
    }

    /// Sends a packet the slow path made (a neighbour request): its actions on a batch of one.
    /// Slow path only: the batch is made here.
    pub(super) fn packet_out(&mut self, po: &PacketOut) {
        let mut one = Batch::new();
        one.push(self.pool.packet_from(&po.frame, po.in_port));
        self.stats.packet_outs += 1;
        self.execute(&po.actions, &mut one);
    }

    /// Marks packet `i` of `batch` to wait for the slow path (its group frees it into the
    /// deferred queue), or counts it lost when the queue is full.
    pub(super) fn defer(&mut self, batch: &mut Batch, i: usize) {
        let port = batch.packets()[i].meta.in_port as usize;
        if self.deferred.len() + self.deferred_marked >= DEFER_MAX {
            self.stats.lost_upcalls += 1;
            return;
        }
        batch.packets_mut()[i].meta.set_deferred(true);
        self.deferred_marked += 1;
        if self.deferred_by_port.len() <= port {
            self.deferred_by_port.resize(port + 1, 0);
        }
        self.deferred_by_port[port] += 1;
        self.stats.deferred_upcalls += 1;
    }
}
