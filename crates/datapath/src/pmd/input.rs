//! One pass of a batch through the pipeline (OVS's `dp_netdev_input__`): extraction, the
//! lookup tiers in order, the upcall, then grouping by flow and the actions. The body of
//! [`Pmd::input`] is the list of stages; each is a function over the batch in its own file,
//! and times itself under its [`Stage`] at the stamps here.

use crate::flow_table::FlowRef;
use crate::packet::Batch;

use super::tiers::Pass;
use super::{Pmd, Stage};

impl Pmd {
    /// [`Self::input`] for a batch just received: first the fused outer pass of a tunnel
    /// endpoint ([`Self::decap_rx`]).
    #[inline]
    pub(super) fn input_rx(&mut self, batch: &mut Batch, in_port: u32) {
        let port = self.decap_rx(batch, in_port).unwrap_or(in_port);
        self.input(batch, port, false);
    }

    /// Runs one batch of packets that share an in_port through extraction, the lookup tiers,
    /// the upcall, grouping and the actions; leaves `batch` empty.
    ///
    /// `reuse`: the batch is the previous pass's, recirculated whole with its headers
    /// untouched (`keys_reusable`), so each packet's key is still in `keys` at its place: only
    /// its metadata words are made again (and it is hashed again, on a port that needs the
    /// hash for the EMC), instead of the packet being parsed again.
    pub(super) fn input(&mut self, batch: &mut Batch, mut in_port: u32, mut reuse: bool) {
        self.pass_gso = batch.take_gso();
        let mut lent = batch.take_lent();
        self.keys_reusable = None;
        // One round for each pass; a batch the decap fast path pops whole goes round again,
        // and so does one recirculated whole with nothing queued before it.
        loop {
            if batch.is_empty() {
                return;
            }
            let t0 = self.stamp();
            self.stats.batches += 1;

            // Extraction, with the tiers that run in its loop (the simple match; the linear
            // match on a port without decap megaflows; the metadata match of a recirculated
            // batch).
            let (reuse_now, lent) = (std::mem::take(&mut reuse), std::mem::take(&mut lent));
            let mut pass = self.extract(batch, in_port, reuse_now, lent);
            let t1 = self.stamp();
            self.add_stage(Stage::Extract, t0, t1);

            if reuse_now && let Some(to) = self.meta_whole.take() {
                // The metadata match found the whole batch in one megaflow: its actions, on
                // the batch as it is.
                self.run_whole(to, batch, &pass, t1);
            } else {
                // The lookup tiers, in order, each on the packets the ones before did not
                // find.
                if let Some(port) = self.decap_fast_path(batch, &mut pass) {
                    // The whole batch was popped in place: its next pass, as received on the
                    // tunnel port.
                    in_port = port;
                    let t = self.stamp();
                    self.add_stage(Stage::Actions, t1, t);
                    continue;
                }
                self.emc_lookup(batch, &mut pass);
                let t2 = self.stamp();
                self.add_stage(Stage::Emc, t1, t2);
                self.linear_match(&mut pass);
                self.dpcls_lookup(&mut pass);
                let t3 = self.stamp();
                self.add_stage(Stage::Megaflow, t2, t3);

                // What no tier found: the slow path.
                let t4 = self.upcall_stage(batch, &pass, t3);

                // Group by flow, keeping each flow's packets in order, and run each group's
                // actions.
                self.execute_groups(batch, pass.n);
                let t5 = self.stamp();
                self.add_stage(Stage::Actions, t4, t5);
            }
            // The batch recirculated whole, nothing queued before it: its next pass now, as
            // `run_recirc` would run it next (`recirc.rs`). `keys_reusable` is tested here as
            // well as in `recirc_whole_now`: a pass that did not recirculate (every one-pass
            // port) stops at this one test.
            if self.keys_reusable.is_none() || !self.recirc_whole_now(batch) {
                return;
            }
            reuse = true;
        }
    }

    /// The actions of megaflow `to`, which the metadata match found every packet of `batch`
    /// in (`tiers/recirc_meta.rs`), on the batch as it is: no lookup tiers, no grouping, no
    /// upcall; the hits counted as the linear match's, the TCP flags those of the keys the
    /// batch reused.
    #[inline(never)]
    fn run_whole(&mut self, to: FlowRef, batch: &mut Batch, pass: &Pass, t1: u64) {
        self.count_linear(pass.in_port, pass.all());
        // No upcall made anything to forget (`end_of_pass`): this pass made none, and the
        // one before forgot its own.
        debug_assert!(self.temp_flows.is_empty() && self.upcalled.is_empty());
        self.run_group(Some(to), batch, self.keys_tcp_flags, true);
        let t = self.stamp();
        self.add_stage(Stage::Actions, t1, t);
    }
}
