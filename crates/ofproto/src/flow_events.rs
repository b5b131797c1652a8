//! The changes to a bridge's flow tables as OpenFlow flow monitors report them (OVS's
//! `ofmonitor_report()`): rules added, modified (their actions changed) and removed, each with
//! the connection and request that caused it when an OpenFlow request did. A bridge keeps
//! them only while some connection monitors it ([`FlowEvents::enabled`]), up to
//! [`EVENTS_MAX`] until the OpenFlow server takes them ([`take_events`]); past that they are
//! dropped and counted, so memory stays bounded whatever happens.

use std::cell::Cell;

use crate::bridge::{Bridge, Rule};
use crate::flow_removed::RemovedReason;
use crate::pipekey::PipeMatch;
use crate::syntax::OfAction;

/// Most events a bridge keeps for the server.
pub const EVENTS_MAX: usize = 65536;

/// The OpenFlow request behind a change: its connection (the server's id) and transaction id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    pub conn: u64,
    pub xid: u32,
}

/// What happened to a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowChange {
    Added,
    /// Its actions or its cookie changed (OVS's `replace_rule_finish()`); the old actions
    /// when the actions did.
    Modified {
        old_actions: Option<Vec<OfAction>>,
    },
    Removed(RemovedReason),
}

/// One change to a rule, with the rule as it is after it (before it, for a removal).
#[derive(Clone, Debug)]
pub struct FlowEvent {
    pub change: FlowChange,
    pub table: u8,
    pub m: PipeMatch,
    pub priority: u16,
    pub rule: Rule,
    pub origin: Option<Origin>,
    /// The change it is part of: the events of one flow mod, bundle commit, group deletion,
    /// learned flow or expired rule share it, and monitors get them in one message.
    pub batch: u64,
}

/// A bridge's events not yet taken.
#[derive(Debug, Default)]
pub struct FlowEvents {
    /// Whether events are kept (some connection monitors the bridge).
    pub enabled: bool,
    events: Vec<FlowEvent>,
    /// Events dropped because the server fell [`EVENTS_MAX`] behind.
    pub dropped: u64,
    /// The current change's number ([`Bridge::begin_change`]).
    batch: u64,
}

thread_local! {
    /// The request the current thread is applying, for the events it causes.
    static ORIGIN: Cell<Option<Origin>> = const { Cell::new(None) };
}

/// Runs `f` (which applies an OpenFlow request) with the changes it makes attributed to
/// `origin`.
pub fn with_origin<R>(origin: Origin, f: impl FnOnce() -> R) -> R {
    let before = ORIGIN.with(|o| o.replace(Some(origin)));
    let r = f();
    ORIGIN.with(|o| o.set(before));
    r
}

/// The request the current thread applies, if any.
pub(crate) fn current_origin() -> Option<Origin> {
    ORIGIN.with(Cell::get)
}

impl Bridge {
    /// Starts a change of the tables that monitors are told of in one message (OVS's
    /// `ofmonitor_flush()` after each).
    pub(crate) fn begin_change(&mut self) {
        self.flow_events.batch += 1;
    }

    /// Records a change to rule `(m, priority, rule)` of table `t`, if monitored, made by
    /// the request the current thread applies ([`with_origin`]).
    pub(crate) fn note_change(
        &mut self,
        t: usize,
        rule: (&PipeMatch, u16, &Rule),
        change: FlowChange,
    ) {
        self.note_change_by(t, rule, change, current_origin());
    }

    /// [`Bridge::note_change`] for a change `origin` made (a bundle's flow mod, noted when
    /// the bundle commits).
    pub(crate) fn note_change_by(
        &mut self,
        t: usize,
        (m, priority, rule): (&PipeMatch, u16, &Rule),
        change: FlowChange,
        origin: Option<Origin>,
    ) {
        let ev = &mut self.flow_events;
        if !ev.enabled {
            return;
        }
        if ev.events.len() >= EVENTS_MAX {
            ev.dropped += 1;
            return;
        }
        ev.events.push(FlowEvent {
            change,
            table: t as u8,
            m: m.clone(),
            priority,
            rule: rule.clone(),
            origin,
            batch: ev.batch,
        });
    }
}

impl FlowEvents {
    /// Whether events wait to be taken.
    pub fn pending(&self) -> bool {
        !self.events.is_empty()
    }
}

/// The events of `b` since the last call.
pub fn take_events(b: &mut Bridge) -> Vec<FlowEvent> {
    std::mem::take(&mut b.flow_events.events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::{FlowKind, NoPortNames, parse_flow};
    use std::time::Instant;

    fn spec(s: &str) -> crate::syntax::FlowSpec {
        let kind = if s.contains("actions") {
            FlowKind::Add
        } else {
            FlowKind::ModOrDel
        };
        parse_flow(s, kind, &NoPortNames).unwrap()
    }

    #[test]
    fn changes_are_kept_only_while_monitored_with_their_origin() {
        let mut b = Bridge::new("br0");
        let now = Instant::now();
        b.add_flow(&spec("in_port=1,actions=drop"), now).unwrap();
        assert!(take_events(&mut b).is_empty(), "not monitored");
        b.flow_events.enabled = true;
        let o = Origin { conn: 3, xid: 9 };
        with_origin(o, || b.add_flow(&spec("in_port=2,actions=drop"), now)).unwrap();
        // The same actions again: no modification.
        b.mod_flows(&spec("in_port=2,actions=drop"), false, now);
        b.mod_flows(&spec("in_port=2,actions=output:1"), false, now);
        // Only the cookie: a modification too, without old actions.
        let cookie = "cookie=0x5,in_port=2,actions=output:1";
        let cookie = parse_flow(cookie, FlowKind::ModOrDel, &NoPortNames).unwrap();
        b.mod_flows(&cookie, false, now);
        b.del_flows(&spec("in_port=1"), false);
        let ev = take_events(&mut b);
        let changes: Vec<_> = ev.iter().map(|e| (&e.change, e.origin)).collect();
        assert_eq!(
            changes,
            [
                (&FlowChange::Added, Some(o)),
                (
                    &FlowChange::Modified {
                        old_actions: Some(vec![])
                    },
                    None
                ),
                (&FlowChange::Modified { old_actions: None }, None),
                (&FlowChange::Removed(RemovedReason::Delete), None),
            ]
        );
        assert!(take_events(&mut b).is_empty());
    }
}
