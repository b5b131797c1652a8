//! The first rule a packet meets in a patch port's peer bridge (OVS's `clone_xlate_actions()`
//! as `patch_port_output()` uses it): the peer works on its own copy of the packet, so when
//! the rule's actions do something the next commit cannot undo (`ct`, `nat`, `meter`,
//! truncation), its datapath actions go into a `clone(...)` and the bridge that sent the
//! packet goes on with the packet as it was. Field changes need no clone: the next commit
//! writes the fields back. A clone left last in the datapath actions is unwrapped at the end
//! of translation, as nothing uses the packet after it.

use super::*;

impl Ctx<'_> {
    /// Runs `actions`, the rule found in `table`, inside a datapath clone when they are the
    /// first rule of a patch port's peer bridge and cannot be undone by a commit.
    pub(super) fn peer_rule_actions(&mut self, actions: &[OfAction], table: usize) {
        if !std::mem::take(&mut self.patch_entry) || actions.iter().all(reversible) {
            self.do_actions(actions, table);
            return;
        }
        // Changes made before the clone are committed once, outside it.
        self.commit();
        let (base, out) = (self.base.clone(), std::mem::take(&mut self.out));
        let (conntracked, was_mpls) = (self.conntracked, self.was_mpls);
        self.do_actions(actions, table);
        // The action set belongs to the peer's copy of the packet too.
        if !self.freezing {
            self.run_action_set(table);
        }
        if self.freezing {
            self.finish_freezing();
        }
        let inner = std::mem::replace(&mut self.out, out);
        if !inner.is_empty() {
            self.out.push(Action::Clone(inner));
        }
        self.base = base;
        self.conntracked = conntracked;
        self.was_mpls = was_mpls;
    }
}

/// Whether the next commit undoes what `a` does to the packet (OVS's `reversible_actions()`).
fn reversible(a: &OfAction) -> bool {
    !matches!(
        a,
        OfAction::Ct(_) | OfAction::Nat(_) | OfAction::Meter(_) | OfAction::OutputTrunc { .. }
    )
}
