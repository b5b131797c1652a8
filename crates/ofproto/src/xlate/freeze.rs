//! Freezing translation for a later datapath pass (OVS's "freezing", in
//! `ofproto-dpif-xlate.c`).
//!
//! Some actions need what the current pass cannot see. After `pop_mpls` to a non-MPLS
//! ethertype, the key this pass was made from has no L3 header (the datapath extracted the
//! packet as MPLS), so `dec_ttl`, a write of an L3 or L4 field, a lookup in another table or
//! anything else that reads beyond L2 must wait until the datapath has popped the label and
//! extracted the packet again. Translation then *freezes*: the action that needs the header and
//! every action after it, at every level of nesting (`resubmit`s whose rules have actions left),
//! are kept in order in the frozen state, with `unroll_xlate` markers recording the table and
//! cookie of the rule each came from; this pass ends with `recirc(ID)`, and the next pass thaws
//! the state and runs the frozen actions in place of a table lookup.

use std::fmt::Write as _;

use flow::odp::Action;

use super::{Ctx, NodeKind, OfAction};
use crate::fields::Prereq;
use crate::recirc::{FrozenAction, FrozenState};
use crate::syntax::format_actions;

/// Whether `a` needs the packet's L3 header or more, so that after an MPLS pop it must run in
/// the next pass (OVS's `recirc_for_mpls()`: outputs and L2 writes do not, the rest does).
fn needs_l3(a: &OfAction) -> bool {
    match a {
        OfAction::Output { .. }
        | OfAction::OutputTrunc { .. }
        | OfAction::OutputReg { .. }
        | OfAction::Enqueue { .. }
        | OfAction::SetVlanVid(_)
        | OfAction::SetVlanPcp(_)
        | OfAction::SetEthSrc(_)
        | OfAction::SetEthDst(_)
        | OfAction::SetTunnel { .. }
        | OfAction::SetQueue(_)
        | OfAction::Group(_) => false,
        OfAction::SetField { field, .. } => !matches!(
            field.field().prereq,
            Prereq::None
                | Prereq::Mpls
                | Prereq::VlanVid
                | Prereq::Ct
                | Prereq::CtIpv4
                | Prereq::CtIpv6
        ),
        _ => true,
    }
}

impl Ctx<'_> {
    /// Before `a` runs: freeze when an MPLS pop earlier in this pass hid the header `a` needs.
    pub(super) fn recirc_for_mpls(&mut self, a: &OfAction) {
        if !self.exit && self.was_mpls && needs_l3(a) {
            self.trigger_freeze();
        }
    }

    /// Ends this pass's translation here; what is left is frozen as the levels unwind.
    pub(super) fn trigger_freeze(&mut self) {
        self.exit = true;
        self.freezing = true;
    }

    /// Freezes `rest`, the actions of a rule in `table` that did not run in this pass (OVS's
    /// `freeze_unroll_actions()`): actions whose effects name the rule's table or cookie (an
    /// output may become a packet-in; `resubmit(,N)` without a table is relative to it) get an
    /// `unroll_xlate` marker first; `goto_table` becomes the `resubmit` it amounts to.
    pub(super) fn freeze_unroll(&mut self, rest: &[OfAction], table: usize) {
        for a in rest {
            match a {
                OfAction::Output { .. }
                | OfAction::OutputReg { .. }
                | OfAction::OutputTrunc { .. }
                | OfAction::Group(_)
                | OfAction::Controller(_)
                | OfAction::DecMplsTtl
                | OfAction::DecTtl(_)
                | OfAction::Resubmit { table: None, .. } => self.freeze_put_unroll(table),
                OfAction::GotoTable(t) => {
                    self.frozen.push(FrozenAction::Of(OfAction::Resubmit {
                        port: None,
                        table: Some(*t),
                        ct: false,
                    }));
                    continue;
                }
                OfAction::Note(_) => continue,
                _ => {}
            }
            self.frozen.push(FrozenAction::Of(a.clone()));
        }
    }

    /// Records the current rule's table and cookie unless the last marker already says them.
    fn freeze_put_unroll(&mut self, table: usize) {
        let (table, cookie) = (table as u8, self.rule_cookie);
        let last = self.frozen_unroll.and_then(|i| self.frozen.get(i));
        if last != Some(&FrozenAction::Unroll { table, cookie }) {
            self.frozen_unroll = Some(self.frozen.len());
            self.frozen.push(FrozenAction::Unroll { table, cookie });
        }
    }

    /// Ends a frozen translation (OVS's `finish_freezing()`): commits what is pending, interns
    /// the frozen state and emits `recirc(ID)`, then lets translation go on as if nothing had
    /// been frozen (a clone or patch port continues with the actions after it).
    pub(super) fn finish_freezing(&mut self) {
        if let Some(p) = self.pause.take() {
            let actions = std::mem::take(&mut self.frozen);
            self.freezing = false;
            self.frozen_unroll = None;
            return self.finish_pause(p, actions);
        }
        self.commit();
        let state = FrozenState {
            bridge: self.br().name.clone(),
            table: 0,
            in_port: self.flow.dp.in_port(),
            meta: self.flow.meta,
            tunnel: crate::recirc::tunnel_snapshot(&self.flow.dp),
            conntracked: self.conntracked,
            actions: std::mem::take(&mut self.frozen),
            stack: self.stack.clone(),
            action_set: self.action_set.actions.clone(),
            userdata: Vec::new(),
            mirrors: self.mirrors,
            packet_out: false,
        };
        self.freezing = false;
        self.frozen_unroll = None;
        let hash = self.pending_hash.take();
        match self.pipe.recirc.intern(state) {
            Some(id) => {
                // A `dp_hash` select group's hash comes just before (`xlate/group.rs`).
                self.out.extend(hash);
                self.out.push(Action::Recirc(id));
            }
            None => {
                self.trace_add(NodeKind::Error, "Failed to allocate recirculation id");
                self.res.failed = Some("No recirculation context");
            }
        }
    }

    /// Runs the actions a thawed state froze, in place of a lookup in `table`.
    pub(super) fn run_frozen(&mut self, actions: &[FrozenAction], mut table: usize) {
        for (i, fa) in actions.iter().enumerate() {
            if self.exit || self.res.failed.is_some() {
                if self.freezing {
                    self.frozen.extend_from_slice(&actions[i..]);
                }
                return;
            }
            match fa {
                FrozenAction::Of(a) => self.do_actions(std::slice::from_ref(a), table),
                FrozenAction::Unroll { table: t, cookie } => {
                    self.trace_add(NodeKind::Action, format_frozen(std::slice::from_ref(fa)));
                    table = usize::from(*t);
                    self.table_id = *t;
                    self.rule_cookie = *cookie;
                    let cookie = if *cookie == 0 {
                        "0".to_owned()
                    } else {
                        format!("{cookie:#x}")
                    };
                    self.trace_add(
                        NodeKind::Action,
                        format_args!("restored state: table={t}, cookie={cookie}"),
                    );
                }
            }
        }
    }
}

/// Frozen actions as OVS prints them (`resubmit(,1),unroll_xlate(table=0, cookie=0),output:2`).
pub(super) fn format_frozen(actions: &[FrozenAction]) -> String {
    let mut s = String::new();
    for (i, fa) in actions.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        match fa {
            FrozenAction::Of(a) => {
                format_actions(&mut s, std::slice::from_ref(a), &crate::syntax::NoPortNames)
            }
            FrozenAction::Unroll { table, cookie } => {
                let _ = write!(s, "unroll_xlate(table={table}, cookie={cookie})");
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldId;

    #[test]
    fn l2_writes_and_outputs_run_before_the_freeze_and_l3_work_after() {
        assert!(!needs_l3(&OfAction::Output {
            port: 2,
            max_len: 0
        }));
        assert!(!needs_l3(&OfAction::SetEthDst(Default::default())));
        assert!(needs_l3(&OfAction::DecTtl(None)));
        assert!(needs_l3(&OfAction::GotoTable(1)));
        let set = |field| OfAction::SetField {
            field,
            value: 0,
            mask: u128::MAX,
            form: crate::syntax::WriteForm::SetField,
        };
        assert!(needs_l3(&set(FieldId::IPV4_DST)));
        assert!(!needs_l3(&set(FieldId::ETH_SRC)));
        assert!(!needs_l3(&set(FieldId::reg(0))));
    }
}
