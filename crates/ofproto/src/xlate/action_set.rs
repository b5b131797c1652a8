//! The action set during translation (OVS's `xlate_write_actions()`, `xlate_action_set()`):
//! `write_actions` adds to it, `clear_actions` empties it, and it runs once the pipeline ends
//! (in the order [`crate::action_set::execute_order`] gives), under a trace node of its own.
//! A clone starts with a copy and runs its own at its end; a patch port's peer starts with an
//! empty one and runs it before the packet comes back; freezing keeps it for the next pass.

use super::Ctx;
use super::trace::NodeKind;
use crate::action_set::execute_order;
use crate::syntax::{NoPortNames, OfAction, format_actions};

/// The action set of a translation.
#[derive(Clone, Debug, Default)]
pub(super) struct ActionSet {
    /// Everything written to it, in order.
    pub(super) actions: Vec<OfAction>,
    /// The port of its `output` while it has no `group` (OVS's `actset_output` field, which
    /// makes the final flow of a trace differ from the first).
    pub(super) output: Option<u32>,
    /// It has a `group`.
    has_group: bool,
}

impl ActionSet {
    /// Adds `set` (OVS's `xlate_write_actions__()`).
    pub(super) fn write(&mut self, set: &[OfAction]) {
        if !self.has_group {
            for a in set {
                match a {
                    OfAction::Output { port, .. } => self.output = Some(*port),
                    OfAction::Group(_) => {
                        self.output = None;
                        self.has_group = true;
                        break;
                    }
                    _ => {}
                }
            }
        }
        self.actions.extend_from_slice(set);
    }

    pub(super) fn clear(&mut self) {
        *self = ActionSet::default();
    }
}

impl Ctx<'_> {
    /// `write_actions(...)`.
    pub(super) fn write_actions(&mut self, set: &[OfAction]) {
        self.action_set.write(set);
        self.report_action_set("is");
    }

    /// `clear_actions`.
    pub(super) fn clear_actions(&mut self) {
        self.report_action_set("was");
        self.action_set.clear();
    }

    /// Traces the action set as it would run (OVS's `xlate_report_action_set()`).
    fn report_action_set(&mut self, verb: &str) {
        if self.trace.is_none() {
            return;
        }
        let list = execute_order(&self.action_set.actions);
        let text = if list.is_empty() {
            format!("action set {verb} empty")
        } else {
            let mut s = format!("action set {verb}: ");
            format_actions(&mut s, &list, &NoPortNames);
            s
        };
        self.note(text);
    }

    /// Runs the action set at the end of a pipeline, and empties it (what `output` it had is
    /// still known after).
    pub(super) fn run_action_set(&mut self, table: usize) {
        let list = execute_order(&std::mem::take(&mut self.action_set.actions));
        if list.is_empty() {
            return;
        }
        let node = self.trace_add(NodeKind::Table, "--. Executing action set:");
        let was = std::mem::replace(&mut self.in_action_set, true);
        self.under(node, |c| c.do_actions(&list, table));
        self.in_action_set = was;
    }

    /// Where a trace shows the action set of a pipeline that began under `bridge`: under the
    /// first table looked up (OVS's first lookup leaves its trace node current), else under
    /// the bridge.
    pub(super) fn action_set_node(&self, bridge: Option<usize>) -> Option<usize> {
        let (t, b) = (self.trace.as_ref()?, bridge?);
        let last = t.nodes[b].subs.last().copied();
        Some(
            last.filter(|&n| t.nodes[n].kind == NodeKind::Table)
                .unwrap_or(b),
        )
    }
}
