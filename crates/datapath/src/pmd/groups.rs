//! Grouping by flow (OVS's `packet_batch_per_flow` and `packet_batch_per_flow_execute`):
//! after the lookup tiers and the upcall, each packet's megaflow is in `hits`; the packets are
//! grouped by megaflow in order of first appearance, keeping each flow's packets in arrival
//! order, each group's flow statistics are updated once, and its actions run on the whole
//! group ([`super::execute`]). A burst that is all one flow runs as it is, without
//! regrouping. Cycles under `actions`.

use crate::flow_table::{FlowRef, FlowStats};
use crate::packet::{Batch, MAX_BURST, Packet};

use super::Pmd;

impl Pmd {
    /// Runs each flow's actions on its packets. Packets are grouped by flow in order of first
    /// appearance; within a flow they keep their arrival order.
    pub(super) fn execute_groups(&mut self, batch: &mut Batch, n: usize) {
        // Common case: the whole burst belongs to one flow. Run its actions on the burst as it
        // is, without regrouping.
        if n > 0 && self.hits[1..n].iter().all(|h| *h == self.hits[0]) {
            let tcp_flags = self.keys[..n].iter().fold(0, |f, k| f | k.tcp_flags());
            // Still the keys' flags if the batch recirculates with them (`keys_reusable`).
            self.keys_tcp_flags = tcp_flags;
            // The actions see the pass's batch as extracted (see `keys_reusable`).
            self.run_group(self.hits[0], batch, tcp_flags, true);
            self.end_of_pass();
            return;
        }
        debug_assert!(n <= MAX_BURST && n == batch.len());
        // Each packet's megaflow as one number, so that a group's members are found by
        // comparing them all, without a branch per packet (which megaflow a packet has is
        // what a branch predictor cannot know when flows interleave).
        let mut ids = [u64::MAX; MAX_BURST];
        for (id, h) in ids[..n].iter_mut().zip(&self.hits[..n]) {
            if let Some(r) = h {
                *id = u64::from(r.generation.get()) << 32 | u64::from(r.idx);
            }
        }
        // The groups in order of first appearance: their megaflow, TCP flags, and each
        // packet's group.
        let mut group_of = [0u8; MAX_BURST];
        let mut targets = [None; MAX_BURST];
        let mut flags = [0u16; MAX_BURST];
        let mut n_groups = 0;
        let mut done = 0u32;
        let all = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        while done != all {
            let first = (!done & all).trailing_zeros() as usize;
            let id = ids[first];
            let mut bits = 0u32;
            for (i, &x) in ids[..n].iter().enumerate() {
                bits |= u32::from(x == id) << i;
            }
            bits &= !done;
            done |= bits;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                group_of[i] = n_groups as u8;
                flags[n_groups] |= self.keys[i].tcp_flags();
            }
            targets[n_groups] = self.hits[first];
            n_groups += 1;
        }
        // One move per packet, straight into its group. (Moved out of an `Option`, as a
        // drain yields them, a packet went through a stack copy whose reload straddled two
        // of its stores: a store-forwarding stall per packet, a tenth of the MPLSoGRE
        // termination's cycles.)
        for (i, p) in batch.packets_mut().iter_mut().enumerate() {
            let g = usize::from(group_of[i]);
            self.groups[g].push(std::mem::replace(p, Packet::hollow()));
        }
        batch.drain();
        for g in 0..n_groups {
            let mut group = std::mem::take(&mut self.groups[g]);
            self.run_group(targets[g], &mut group, flags[g], false);
            debug_assert!(group.is_empty(), "a group's actions take all its packets");
            self.groups[g] = group;
        }
        self.end_of_pass();
    }

    /// Forgets what this pass's upcalls made: the temporary flows, the packets that missed.
    fn end_of_pass(&mut self) {
        for r in self.temp_flows.drain(..) {
            self.flows.remove(r);
        }
        self.upcalled.clear();
    }

    /// Updates the flow's statistics once for the group and runs its actions on it.
    /// `whole`: the group is the pass's whole batch, in order (see [`Self::execute_with`]).
    pub(super) fn run_group(
        &mut self,
        target: Option<FlowRef>,
        group: &mut Batch,
        tcp_flags: u16,
        whole: bool,
    ) {
        let actions = match target.and_then(|r| self.flows.get_mut(r)) {
            Some(f) => {
                let before = f.stats;
                f.stats.packets += group.len() as u64;
                f.stats.bytes += group.bytes();
                f.stats.used_tsc = self.iter_tsc;
                f.stats.tcp_flags |= tcp_flags;
                if !self.upcalled.is_empty() {
                    uncount_upcalled(&mut f.stats, before, target, &self.upcalled);
                }
                Some(f.actions.clone())
            }
            None => None,
        };
        match actions {
            Some(a) => self.execute_with(&a, group, None, whole),
            // Missed and not installed: waiting for the slow path, or a drop the upcall
            // already counted.
            None => {
                self.deferred_gso |= self.pass_gso;
                for p in group.drain() {
                    if p.meta.deferred() {
                        self.deferred_marked -= 1;
                        if self.running_deferred {
                            // Older than everything still waiting: back to the front.
                            self.redeferred.push(p);
                        } else {
                            self.deferred.push_back(p);
                        }
                    } else {
                        self.pool.free(p);
                    }
                }
            }
        }
    }
}

/// Takes the packets that missed out of a flow's counters ([`Pmd`]'s `upcalled`): a flow that
/// only they went through stays unused, as OVS's datapath shows it (`packets:0`,
/// `used:never`).
#[cold]
fn uncount_upcalled(
    stats: &mut FlowStats,
    before: FlowStats,
    target: Option<FlowRef>,
    upcalled: &[(FlowRef, u64)],
) {
    for &(_, len) in upcalled.iter().filter(|(r, _)| Some(*r) == target) {
        stats.packets -= 1;
        stats.bytes -= len;
    }
    if stats.packets == before.packets {
        *stats = before;
    }
}
