//! The actions stage: a megaflow's compiled actions ([`DpAction`]) run on a whole group of
//! packets (OVS's `dp_netdev_execute_actions`). Header rewrites and `tnl_push` are
//! [`crate::rewrite`]'s, over the group; outputs go to the tx batches ([`super::output`]);
//! `ct()` is in [`super::ct`], `recirc` and `tnl_pop` in [`super::recirc`]; `clone` and
//! outputs that are not the last action run on copies. A pass that may hold super-frames
//! pushes TCP ones whole through a UDP tunnel's `tnl_push` followed by outputs only
//! ([`crate::gso_tunnel`]: segmented at the output), and segments them before any other
//! `tnl_push`, as it does a group holding a UDP super-frame ([`crate::gso_udp`]) before any
//! `tnl_push`; one received encapsulated whole ([`crate::gso_tunnel`]) is cut, its outer
//! headers on each segment, before an action that needs the frame as it would leave
//! (`userspace`, `tnl_push`, MPLS or Ethernet pushes and pops). Such a pass also completes
//! pending checksums ([`crate::csum_pending`]) before
//! the actions that hand the frame's bytes on or hide its headers: `userspace`, `tnl_push`
//! (the inner checksum must be whole before encapsulation), `tnl_pop` (which checks the outer
//! UDP checksum), MPLS pushes, and a truncating output. Header rewrites keep the mark: the
//! checksum is computed from the headers the frame leaves with. Cycles under `actions`;
//! drops by reason (`action_drops`, `rewrite_errors`, GSO).

use crate::actions::{DpAction, TnlTemplate};
use crate::packet::{Batch, MAX_BURST, Packet};
use crate::super_frame::Cut;

use super::Pmd;
use super::output::{has_gso, has_received};

/// Emptied copy batches a PMD keeps for reuse (nesting of clones rarely goes deeper).
pub(super) const SPARE_BATCHES: usize = 8;

impl Pmd {
    /// Runs `actions` on every packet of `batch`, consuming the batch.
    pub(super) fn execute(&mut self, actions: &[DpAction], batch: &mut Batch) {
        self.execute_with(actions, batch, None, false);
    }

    /// [`Self::execute`], with a truncation pending from earlier actions. `whole`: `batch` is
    /// the pass's whole batch in order, so its keys are still in `keys` (a recirculation may
    /// hand them to the next pass while nothing else than `ct()` ran, which makes a translated
    /// packet's key again).
    pub(super) fn execute_with(
        &mut self,
        actions: &[DpAction],
        batch: &mut Batch,
        mut trunc: Option<u32>,
        whole: bool,
    ) {
        let last = actions.len().saturating_sub(1);
        // Whether `batch` is still the pass's batch with the headers its keys were made from.
        let mut pristine = whole;
        for (ai, a) in actions.iter().enumerate() {
            if batch.is_empty() {
                break;
            }
            let consume = ai == last;
            match a {
                // A super-frame received encapsulated is cut (its outer headers written on
                // each segment) before an action that needs the frame as it would leave.
                _ if self.pass_gso && cuts_received(a) && has_received(batch) => {
                    self.segment_and_execute(&actions[ai..], batch, trunc);
                    break;
                }
                DpAction::Output(port) => {
                    self.output(*port, batch, consume, trunc.take());
                }
                DpAction::LbOutput(id) => {
                    if self.pass_gso && trunc.is_some() {
                        self.complete_pending(batch);
                    }
                    self.lb_output(*id, batch, consume, trunc.take());
                }
                DpAction::Trunc(len) => trunc = Some(*len),
                DpAction::Userspace(userdata) => {
                    if self.pass_gso {
                        self.complete_pending(batch);
                    }
                    self.stats.userspace_packets += batch.len() as u64;
                    for p in batch.packets() {
                        self.upcall_queue.push(p, userdata);
                    }
                }
                DpAction::Recirc(id) => self.recirculate(*id, batch, consume, pristine),
                DpAction::Ct(args) => {
                    // Keys without packet fields need nothing made again.
                    let rekey = pristine && self.pass_keys == super::extract::PassKeys::Full;
                    pristine &= self.conntrack(args, batch, rekey);
                }
                DpAction::CtClear => {
                    for p in batch.packets_mut() {
                        crate::ct::clear(p);
                    }
                }
                DpAction::TnlPop(port) => {
                    if self.pass_gso {
                        self.complete_pending(batch);
                    }
                    self.tnl_pop(*port, batch, consume);
                }
                // Super-frames through a tunnel push: whole when only outputs follow (TCP
                // and USO ones), else as their segments.
                DpAction::TnlPush(t) if self.pass_gso && has_gso(batch) => {
                    self.complete_pending(batch);
                    if trunc.is_none()
                        && crate::gso_tunnel::keeps_whole(t)
                        && only_outputs(&actions[ai + 1..])
                        && !has_ufo_super(batch)
                    {
                        self.push_super_frames(t, batch);
                    } else {
                        self.segment_and_execute(&actions[ai..], batch, trunc);
                        break;
                    }
                }
                DpAction::TnlPush(t) => {
                    if self.pass_gso {
                        self.complete_pending(batch);
                    }
                    self.stats.rewrite_errors +=
                        crate::rewrite::tnl_push_batch(batch.packets_mut(), t);
                }
                DpAction::Clone(sub) => {
                    let mut copy = self.copy_batch(batch, None);
                    self.execute(sub, &mut copy);
                    self.recycle(copy);
                }
                DpAction::Meter(id) => {
                    self.stats.meter_drops += self.meters.run(*id, batch, &mut self.pool) as u64;
                }
                DpAction::Drop(why) => {
                    self.stats.xlate_drops[*why as usize] += batch.len() as u64;
                    self.pool.free_batch(batch);
                }
                DpAction::CheckPktLen { size, gt, le } => {
                    self.check_pkt_len(*size, gt, le, batch, consume);
                }
                DpAction::Hash { sym, basis } => {
                    for p in batch.packets_mut() {
                        p.meta.dp_hash = crate::rewrite::dp_hash_l4(p, *sym, *basis);
                    }
                }
                header => {
                    if self.pass_gso && hides_l3(header) {
                        self.complete_pending(batch);
                    } else if self.pass_gso && matches!(header, DpAction::PushVlan { .. }) {
                        crate::csum_pending::complete_before_tag(batch, &mut self.pool);
                    }
                    self.stats.rewrite_errors +=
                        crate::rewrite::apply_batch(batch.packets_mut(), header);
                }
            }
            pristine &= matches!(a, DpAction::Ct(_));
        }
        if !batch.is_empty() {
            // The actions ended without handing the packets on: a drop.
            self.stats.action_drops += batch.len() as u64;
            self.pool.free_batch(batch);
        }
    }

    /// Replaces the super-frames of `batch` by their segments and runs `actions` on the
    /// result, [`MAX_BURST`] packets at a time as they are made (so that no more than a
    /// burst of segments waits at once); leaves `batch` empty. Slow path of a pass with
    /// super-frames.
    #[inline(never)]
    pub(super) fn segment_and_execute(
        &mut self,
        actions: &[DpAction],
        batch: &mut Batch,
        trunc: Option<u32>,
    ) {
        #[allow(clippy::unwrap_or_default)]
        let mut b = self.spare.pop().unwrap_or_else(Batch::new);
        for mut p in batch.drain() {
            if p.meta.gso_size == 0 {
                self.execute_when_full(actions, &mut b, p, trunc);
                continue;
            }
            if let Err(e) = crate::gso_tunnel::settle_received(&mut p) {
                self.stats.count_gso_drop(e);
                self.pool.free(p);
                continue;
            }
            match Cut::of(&p) {
                Ok(cut) => {
                    let n = cut.n_segments(&p);
                    for k in 0..n {
                        let s = cut.segment(&p, k, &mut self.pool);
                        self.execute_when_full(actions, &mut b, s, trunc);
                    }
                    self.stats.gso_frames += 1;
                    self.stats.gso_segments += n as u64;
                }
                Err(e) => self.stats.count_gso_drop(e),
            }
            self.pool.free(p);
        }
        if !b.is_empty() {
            self.execute_with(actions, &mut b, trunc, false);
        }
        self.recycle(b);
    }

    /// `tnl_push` of `t` on a batch with super-frames: each super-frame encapsulated whole
    /// ([`crate::gso_tunnel::push`]; refused ones dropped, counted by reason), the other
    /// packets pushed as always. Slow path of a pass with super-frames.
    #[inline(never)]
    fn push_super_frames(&mut self, t: &TnlTemplate, batch: &mut Batch) {
        #[allow(clippy::unwrap_or_default)]
        let mut b = self.spare.pop().unwrap_or_else(Batch::new);
        for mut p in batch.drain() {
            if p.meta.gso_size == 0 {
                self.stats.rewrite_errors +=
                    u64::from(crate::rewrite::tnl_push(&mut p, t).is_err());
                b.push(p);
                continue;
            }
            match crate::gso_tunnel::push(&mut p, t) {
                Ok(()) => {
                    self.stats.gso_encapsulated += 1;
                    b.push(p);
                }
                Err(e) => {
                    self.stats.count_gso_drop(e);
                    self.pool.free(p);
                }
            }
        }
        std::mem::swap(batch, &mut b);
        self.recycle(b);
    }

    /// Adds `p` to `b`, and runs `actions` on `b` once it is full.
    #[inline]
    fn execute_when_full(
        &mut self,
        actions: &[DpAction],
        b: &mut Batch,
        p: Packet,
        trunc: Option<u32>,
    ) {
        b.push(p);
        if b.len() >= MAX_BURST {
            self.execute_with(actions, b, trunc, false);
        }
    }

    /// Copies of a batch's packets (optionally truncated), in new pool buffers, with their
    /// metadata and tunnel metadata. A truncated copy of a super-frame is an ordinary packet.
    pub(super) fn copy_batch(&mut self, batch: &Batch, trunc: Option<u32>) -> Batch {
        // Not `unwrap_or_default`: a default Batch is empty and unallocated (what
        // `mem::take` leaves behind for free), and would then grow by reallocations.
        #[allow(clippy::unwrap_or_default)]
        let mut out = self.spare.pop().unwrap_or_else(Batch::new);
        match trunc {
            None => {
                for p in batch.packets() {
                    out.push(self.pool.copy_of(p, p.len()));
                }
            }
            Some(t) => {
                for p in batch.packets() {
                    let mut c = self.pool.copy_of(p, t as usize);
                    if c.len() < p.len() {
                        c.meta.gso_size = 0;
                    }
                    out.push(c);
                }
            }
        }
        out
    }

    /// Completes the pending checksums of `batch` in software ([`crate::csum_pending`]).
    #[inline(never)]
    pub(super) fn complete_pending(&mut self, batch: &mut Batch) {
        if crate::csum_pending::has_pending(batch) {
            crate::csum_pending::complete_batch(batch, &mut self.pool);
        }
    }

    /// Keeps an emptied batch for the next copy (its packets, if any, go back to the pool).
    pub(super) fn recycle(&mut self, mut b: Batch) {
        if !b.is_empty() {
            self.pool.free_batch(&mut b);
        }
        if self.spare.len() < SPARE_BATCHES {
            self.spare.push(b);
        }
    }
}

/// Whether header action `a` hides the IP header from whoever would complete a pending
/// checksum later ([`crate::csum_pending`]): an MPLS push.
fn hides_l3(a: &DpAction) -> bool {
    matches!(a, DpAction::PushMpls { .. } | DpAction::AddMpls { .. })
}

/// Whether action `a` needs a super-frame received encapsulated cut first: one that hands
/// the frame's bytes on (`userspace`), encapsulates it again (`tnl_push`), or moves or hides
/// its outer IP header (MPLS, a pushed or popped Ethernet header). The others work on the
/// whole frame: outputs (which cut it or hand it whole, [`super::output`]), `tnl_pop`,
/// recirculation, `ct()` and the rewrites of its outer headers' fields.
fn cuts_received(a: &DpAction) -> bool {
    matches!(
        a,
        DpAction::Userspace(_)
            | DpAction::TnlPush(_)
            | DpAction::PushMpls { .. }
            | DpAction::AddMpls { .. }
            | DpAction::PopMpls { .. }
            | DpAction::SetMpls { .. }
            | DpAction::PushEthPopMpls { .. }
            | DpAction::PushEth { .. }
            | DpAction::PopEth
    )
}

/// Whether `actions` are outputs to ports and nothing else: what may follow a push that
/// keeps super-frames whole.
fn only_outputs(actions: &[DpAction]) -> bool {
    actions.iter().all(|a| matches!(a, DpAction::Output(_)))
}

/// Whether `batch` holds a UDP fragmentation (UFO) super-frame (fragmented before a tunnel
/// push: Linux takes none inside a tunnel; TCP and USO ones are encapsulated whole).
#[inline(never)]
fn has_ufo_super(batch: &Batch) -> bool {
    batch.packets().iter().any(crate::gso_ufo::is_ufo)
}
