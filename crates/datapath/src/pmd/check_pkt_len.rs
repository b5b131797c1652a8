//! `check_pkt_len(size=N,gt(...),le(...))`: OVS's datapath action for OpenFlow's
//! `check_pkt_larger`. The batch splits by frame length; each part runs its branch's actions.
//! As the action the datapath executes last it hands the packets on; otherwise the branches
//! run on copies and the batch goes on to the next action unchanged.

use super::Pmd;
use crate::actions::DpAction;
use crate::packet::Batch;

impl Pmd {
    pub(super) fn check_pkt_len(
        &mut self,
        size: u16,
        gt: &[DpAction],
        le: &[DpAction],
        batch: &mut Batch,
        consume: bool,
    ) {
        #[allow(clippy::unwrap_or_default)]
        let mut longer = self.spare.pop().unwrap_or_else(Batch::new);
        #[allow(clippy::unwrap_or_default)]
        let mut shorter = self.spare.pop().unwrap_or_else(Batch::new);
        if consume {
            for p in batch.drain() {
                if p.len() > usize::from(size) {
                    longer.push(p);
                } else {
                    shorter.push(p);
                }
            }
        } else {
            for p in batch.packets() {
                let c = self.pool.copy_of(p, p.len());
                if p.len() > usize::from(size) {
                    longer.push(c);
                } else {
                    shorter.push(c);
                }
            }
        }
        if !longer.is_empty() {
            self.execute(gt, &mut longer);
        }
        if !shorter.is_empty() {
            self.execute(le, &mut shorter);
        }
        self.recycle(longer);
        self.recycle(shorter);
    }
}
