//! Fail open's hidden rule (OVS's `fail-open.c`): while a standalone bridge has lost its
//! controllers for long enough, table 0 holds a NORMAL rule at `FAIL_OPEN_PRIORITY`, above any
//! priority OpenFlow can give, so that the bridge switches as a learning bridge whatever its
//! flows say. It is not an OpenFlow flow: `dump-flows` does not show it, `ofproto/trace` does.

use super::*;

/// OVS's `FAIL_OPEN_PRIORITY`: above every OpenFlow priority (at most 65535).
pub(crate) const FAIL_OPEN_PRIORITY: u32 = 0xf0f0f0;

impl Ctx<'_> {
    /// The hidden rule matched (it matches every packet): NORMAL.
    pub(super) fn fail_open_rule(&mut self) {
        let node = self.trace_add(
            NodeKind::Table,
            format_args!(" 0. priority {FAIL_OPEN_PRIORITY}"),
        );
        let actions = [OfAction::Output {
            port: OFPP_NORMAL,
            max_len: 0,
        }];
        self.under(node, |c| c.do_actions(&actions, 0));
    }
}
