//! One pass of a batch through the pipeline (OVS's `dp_netdev_input__`): extraction, the
//! lookup tiers in order, the upcall, then grouping by flow and the actions. The body of
//! [`Pmd::input`] is the list of stages; each is a function over the batch in its own file,
//! and times itself under its [`Stage`] at the stamps here.

use crate::packet::Batch;

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
        // One round for each pass; a batch the decap fast path pops whole goes round again.
        loop {
            if batch.is_empty() {
                return;
            }
            let t0 = self.stamp();
            self.stats.batches += 1;

            // Extraction, with the tiers that run in its loop (the simple match; the linear
            // match on a port without decap megaflows).
            let (reuse, lent) = (std::mem::take(&mut reuse), std::mem::take(&mut lent));
            let mut pass = self.extract(batch, in_port, reuse, lent);
            let t1 = self.stamp();
            self.add_stage(Stage::Extract, t0, t1);

            // The lookup tiers, in order, each on the packets the ones before did not find.
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
            return;
        }
    }
}
