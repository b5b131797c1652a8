//! Rules that leave a bridge's tables with `send_flow_rem` set (OVS's
//! `ofproto_rule_send_removed()`): an idle or hard timeout passed, or a flow mod deleted them.
//! Each bridge keeps the last [`REMOVED_MAX`] such rules with why they went, until the
//! OpenFlow server takes them ([`take_removed`]) to send `OFPT_FLOW_REMOVED` to the
//! controllers that asked for it. A server that does not take them loses the oldest: memory
//! stays bounded whatever happens.

use std::time::Instant;

use crate::bridge::{Bridge, Rule};
use crate::pipekey::PipeMatch;
use crate::syntax::FlowModFlags;

/// Most removed rules a bridge keeps for the server.
pub const REMOVED_MAX: usize = 4096;

/// Why a rule went (`OFPRR_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemovedReason {
    IdleTimeout = 0,
    HardTimeout = 1,
    Delete = 2,
    /// The group its actions used was deleted.
    GroupDelete = 3,
}

/// A rule that went, as the flow-removed message tells it.
#[derive(Clone, Debug)]
pub struct RemovedRule {
    pub table: u8,
    pub m: PipeMatch,
    pub priority: u16,
    pub rule: Rule,
    pub reason: RemovedReason,
    /// When it went.
    pub at: Instant,
}

impl Bridge {
    /// Records `rule` of `table`, removed for `reason`, if it asked to be told of it.
    pub(crate) fn note_removed(
        &mut self,
        table: usize,
        (m, priority, rule): (PipeMatch, u16, Rule),
        reason: RemovedReason,
        at: Instant,
    ) {
        self.note_change(
            table,
            (&m, priority, &rule),
            crate::flow_events::FlowChange::Removed(reason),
        );
        self.keep_removed(table, (m, priority, rule), reason, at);
    }

    /// Keeps `rule` of `table`, removed for `reason`, for the flow-removed message if it asked
    /// for one (the flow monitors told already).
    pub(crate) fn keep_removed(
        &mut self,
        table: usize,
        (m, priority, rule): (PipeMatch, u16, Rule),
        reason: RemovedReason,
        at: Instant,
    ) {
        if rule.flags.0 & FlowModFlags::SEND_FLOW_REM == 0 {
            return;
        }
        if self.removed.len() >= REMOVED_MAX {
            self.removed.remove(0);
        }
        self.removed.push(RemovedRule {
            table: table as u8,
            m,
            priority,
            rule,
            reason,
            at,
        });
    }
}

/// The rules removed from `b` since the last call.
pub fn take_removed(b: &mut Bridge) -> Vec<RemovedRule> {
    std::mem::take(&mut b.removed)
}
