//! `check_pkt_larger(N)->DST` (OVS's `xlate_check_pkt_larger()`): the datapath decides, with
//! `check_pkt_len(size=N,gt(...),le(...))`. The rest of the action list is translated twice,
//! once with DST set to 1 (into `gt`) and once with DST 0 (into `le`), each from the state at
//! the check (flow, stack, action set), and each branch runs its own copy of the action set at
//! its end, as OVS's does. The megaflow does not depend on the length: the datapath tests it
//! for every packet.

use flow::odp::Action;

use super::Ctx;
use crate::fields::Subfield;
use crate::syntax::OfAction;

impl Ctx<'_> {
    /// Translates `check_pkt_larger(pkt_len)->dst` followed by `rest`, the actions after it
    /// in its list.
    pub(super) fn check_pkt_larger(
        &mut self,
        pkt_len: u16,
        dst: &Subfield,
        rest: &[OfAction],
        table: usize,
    ) {
        self.commit();
        let saved = (
            self.flow.clone(),
            self.base.clone(),
            self.stack.clone(),
            self.action_set.clone(),
            self.was_mpls,
            self.conntracked,
        );
        let out = std::mem::take(&mut self.out);
        let mut branches = [Vec::new(), Vec::new()];
        let mut exit = false;
        for (branch, larger) in branches.iter_mut().zip([1u128, 0]) {
            dst.write(&mut self.flow, larger);
            self.do_actions(rest, table);
            if !self.freezing {
                self.run_action_set(table);
            }
            if self.freezing {
                self.finish_freezing();
            }
            *branch = std::mem::take(&mut self.out);
            // The branch's changes are not the other's.
            self.flow.clone_from(&saved.0);
            self.base.clone_from(&saved.1);
            self.stack.clone_from(&saved.2);
            self.action_set = saved.3.clone();
            (self.was_mpls, self.conntracked) = (saved.4, saved.5);
            // What the larger branch says about exiting stands (OVS's `old_exit`).
            let branch_exit = std::mem::replace(&mut self.exit, false);
            if larger == 1 {
                exit = branch_exit;
            }
        }
        self.exit = exit;
        self.out = out;
        let [gt, le] = branches;
        self.out.push(Action::CheckPktLen {
            size: pkt_len,
            gt,
            le,
        });
    }
}
