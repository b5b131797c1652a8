//! What translation teaches the tables, applied by the slow path: flows `learn` adds or
//! refreshes (OVS's `ofproto_flow_mod_learn()`), timeouts `fin_timeout` shortens
//! (`ofproto_rule_reduce_timeouts()`), and the flows `delete_learned` takes away with the last
//! flow that learned them (`learned_cookies_flush()`).
//!
//! An upcall applies what its packet taught when it can take the tables' write lock at once,
//! and queues it otherwise; the queue is applied with the next statistics settlement or
//! revalidation, so that an upcall never waits for a management command.

use std::collections::HashSet;
use std::time::Instant;

use super::Ofproto;
use crate::bridge::{Bridge, Rule};
use crate::syntax::OfAction;
use crate::xlate::{FinTimeout, LearnedFlow, Pipeline, XlateOut};

/// What one translation taught: flows to learn and timeouts to shorten.
#[derive(Debug, Default)]
pub(super) struct Lessons {
    flows: Vec<LearnedFlow>,
    fins: Vec<FinTimeout>,
}

impl Lessons {
    /// What `x` taught, for packets whose TCP flags OR to `tcp_flags`.
    pub(super) fn of(x: &XlateOut, tcp_flags: u16) -> Lessons {
        Lessons {
            flows: x.learned_flows.clone(),
            fins: if FinTimeout::applies(tcp_flags) {
                x.fin_timeouts.clone()
            } else {
                Vec::new()
            },
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.fins.is_empty()
    }

    fn append(&mut self, other: Lessons) {
        self.flows.extend(other.flows);
        self.fins.extend(other.fins);
    }
}

impl Ofproto {
    /// Applies `lessons` now if the tables are free, else queues them; returns whether the
    /// tables changed (the caller revalidates).
    pub(super) fn learn_from(&self, lessons: Lessons) -> bool {
        if lessons.is_empty() {
            return false;
        }
        match self.pipe.try_write() {
            Ok(mut p) => {
                let changed = self.apply_lessons(&mut p, lessons, Instant::now());
                drop(p);
                if changed {
                    self.changed();
                }
                changed
            }
            Err(_) => {
                self.pending_lessons
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .append(lessons);
                false
            }
        }
    }

    /// Applies the queued lessons and `more` with the tables write-locked; whether they
    /// changed a table.
    pub(super) fn apply_lessons(&self, p: &mut Pipeline, more: Lessons, now: Instant) -> bool {
        let mut all = std::mem::take(
            &mut *self
                .pending_lessons
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        all.append(more);
        let mut changed = false;
        for f in all.flows {
            if let Some(b) = p.bridges.get_mut(f.bridge) {
                changed |= learn_flow(b, &f, now);
            }
        }
        for f in all.fins {
            let (b, t, id) = f.rule;
            if let Some(r) = p
                .bridges
                .get_mut(b)
                .and_then(|b| b.tables.get_mut(t)?.get_mut(id))
            {
                reduce_timeout(f.idle, &mut r.idle_timeout);
                reduce_timeout(f.hard, &mut r.hard_timeout);
            }
        }
        changed
    }
}

/// OVS's `reduce_timeout()`: a nonzero `max` caps the timeout (0, none, is capped too).
fn reduce_timeout(max: u16, timeout: &mut u16) {
    if max != 0 && (*timeout == 0 || *timeout > max) {
        *timeout = max;
    }
}

/// Adds or refreshes one learned flow; whether the table changed.
fn learn_flow(b: &mut Bridge, f: &LearnedFlow, now: Instant) -> bool {
    let fm = &f.spec;
    let Some(table) = b.tables.get_mut(usize::from(fm.table)) else {
        return false;
    };
    if let Some(id) = table.find_exact(&fm.match_, fm.priority)
        && let Some(r) = table.get_mut(id)
    {
        // A strict modify: the same flow is refreshed, a different one takes the new actions,
        // cookie and timeouts and keeps its counters.
        let same = r.actions == fm.actions
            && r.cookie == fm.cookie
            && r.idle_timeout == fm.idle_timeout
            && r.hard_timeout == fm.hard_timeout;
        r.modified = now;
        if same {
            return false;
        }
        let cookie_changed = r.cookie != fm.cookie;
        let old = std::mem::replace(&mut r.actions, fm.actions.clone());
        r.cookie = fm.cookie;
        r.idle_timeout = fm.idle_timeout;
        r.hard_timeout = fm.hard_timeout;
        r.flags = fm.flags;
        // Told to flow monitors as OVS tells a modify: when the actions or cookie changed.
        if old != r.actions || cookie_changed {
            let r = r.clone();
            b.begin_change();
            b.note_change(
                usize::from(fm.table),
                (&fm.match_, fm.priority, &r),
                crate::flow_events::FlowChange::Modified {
                    old_actions: (old != r.actions).then(|| old.clone()),
                },
            );
        }
        flush_learned(b, [old].iter().map(Vec::as_slice));
        return true;
    }
    if f.limit != 0 {
        let n = table.iter().filter(|(.., r)| r.cookie == fm.cookie).count();
        if n >= f.limit as usize {
            return false;
        }
    }
    b.add_flow(fm, now).is_ok()
}

/// The (table, cookie) of each `learn(...,delete_learned)` among `actions` (OVS's learned
/// cookies).
fn learned_cookies(actions: &[OfAction], out: &mut HashSet<(u8, u64)>) {
    for a in actions {
        if let OfAction::Learn(l) = a
            && l.delete_learned()
        {
            out.insert((l.table, l.cookie));
        }
    }
}

/// After rules with the action lists `removed` left `b` (or lost those actions), deletes the
/// flows their `learn(...,delete_learned)` actions learned: every flow with the learn's cookie
/// in its table, once no remaining rule has such a learn (OVS's `learned_cookies_flush()`).
/// Flows so deleted may have learned in their turn.
pub(crate) fn flush_learned<'a>(b: &mut Bridge, removed: impl Iterator<Item = &'a [OfAction]>) {
    let mut gone = HashSet::new();
    for actions in removed {
        learned_cookies(actions, &mut gone);
    }
    while !gone.is_empty() {
        let mut live = HashSet::new();
        for t in &b.tables {
            for (.., r) in t.iter() {
                learned_cookies(&r.actions, &mut live);
            }
        }
        let mut next = HashSet::new();
        for (table, cookie) in gone.difference(&live) {
            let t = usize::from(*table);
            let Some(tab) = b.tables.get(t) else {
                continue;
            };
            let ids: Vec<_> = tab
                .iter()
                .filter(|(.., r)| r.cookie == *cookie)
                .map(|(id, ..)| id)
                .collect();
            for id in ids {
                if let Some((m, p, r)) = b.remove_rule(t, id) {
                    learned_cookies(&r.actions, &mut next);
                    b.note_change(
                        t,
                        (&m, p, &r),
                        crate::flow_events::FlowChange::Removed(
                            crate::flow_removed::RemovedReason::Delete,
                        ),
                    );
                }
            }
        }
        gone = next;
    }
}

/// [`flush_learned`] for removed rules.
pub(crate) fn flush_learned_rules(b: &mut Bridge, removed: &[Rule]) {
    if removed
        .iter()
        .any(|r| r.actions.iter().any(|a| matches!(a, OfAction::Learn(_))))
    {
        flush_learned(b, removed.iter().map(|r| r.actions.as_slice()));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::syntax::{FlowKind, NoPortNames, parse_flow};

    fn spec(s: &str) -> crate::syntax::FlowSpec {
        parse_flow(s, FlowKind::Add, &NoPortNames).unwrap()
    }

    fn select(s: &str) -> crate::syntax::FlowSpec {
        parse_flow(s, FlowKind::ModOrDel, &NoPortNames).unwrap()
    }

    fn learned(s: &str, limit: u32) -> LearnedFlow {
        LearnedFlow {
            bridge: 0,
            spec: spec(s),
            limit,
        }
    }

    fn flows(b: &Bridge, table: usize) -> Vec<String> {
        let mut v: Vec<String> = b.tables[table]
            .iter()
            .map(|(_, m, p, r)| {
                let mut s = String::new();
                crate::syntax::format_match(&mut s, &m.expand(), p, &NoPortNames);
                format!("{s} cookie={:#x} idle={}", r.cookie, r.idle_timeout)
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_learned_flow_is_added_refreshed_modified_and_limited() {
        let mut b = Bridge::new("br0");
        let t0 = Instant::now();
        let f = learned(
            "table=5,cookie=0x7,idle_timeout=30,reg0=1,actions=output:1",
            2,
        );
        assert!(learn_flow(&mut b, &f, t0));
        // The same flow again: refreshed, not a change.
        let t1 = t0 + Duration::from_secs(3);
        assert!(!learn_flow(&mut b, &f, t1));
        let (.., r) = b.tables[5].iter().next().unwrap();
        assert_eq!(r.modified, t1);
        // Other actions: modified in place.
        let g = learned(
            "table=5,cookie=0x7,idle_timeout=30,reg0=1,actions=output:2",
            2,
        );
        assert!(learn_flow(&mut b, &g, t1));
        assert_eq!(b.n_rules(), 1);
        // The limit counts the flows with the cookie in the table.
        assert!(learn_flow(
            &mut b,
            &learned("table=5,cookie=0x7,reg0=2,actions=drop", 2),
            t1
        ));
        assert!(!learn_flow(
            &mut b,
            &learned("table=5,cookie=0x7,reg0=3,actions=drop", 2),
            t1
        ));
        assert!(learn_flow(
            &mut b,
            &learned("table=5,cookie=0x8,reg0=3,actions=drop", 2),
            t1
        ));
        assert_eq!(flows(&b, 5).len(), 3);
    }

    #[test]
    fn delete_learned_goes_with_the_last_learner_and_cascades() {
        let mut b = Bridge::new("br0");
        let now = Instant::now();
        for s in [
            "table=0,priority=2,actions=learn(table=1,delete_learned,cookie=0x1,reg0[])",
            "table=0,priority=1,actions=learn(table=1,delete_learned,cookie=0x1,reg1[])",
            "table=1,cookie=0x1,reg0=1,actions=learn(table=2,delete_learned,cookie=0x2,reg2[])",
            "table=1,cookie=0x3,reg0=2,actions=drop",
            "table=2,cookie=0x2,reg2=5,actions=drop",
        ] {
            b.add_flow(&spec(s), now).unwrap();
        }
        // One learner goes: the other keeps the learned flows.
        assert_eq!(b.del_flows(&select("table=0,priority=2"), true), 1);
        assert_eq!(flows(&b, 1).len(), 2);
        // The last goes: the flows with its cookie in its table, and what they learned.
        assert_eq!(b.del_flows(&select("table=0"), false), 1);
        assert_eq!(flows(&b, 1), ["reg0=0x2 cookie=0x3 idle=0"]);
        assert!(flows(&b, 2).is_empty());
    }

    #[test]
    fn a_learner_replaced_by_add_flow_with_the_same_learn_keeps_its_flows() {
        let mut b = Bridge::new("br0");
        let now = Instant::now();
        for s in [
            "table=0,reg0=2,actions=learn(table=1,delete_learned,cookie=0x234)",
            "table=1,cookie=0x234,reg0=6,actions=drop",
        ] {
            b.add_flow(&spec(s), now).unwrap();
        }
        // The same learn and one more action: the learned flow stays (learn.at:510).
        b.add_flow(
            &spec("table=0,reg0=2,actions=learn(table=1,delete_learned,cookie=0x234),output:2"),
            now,
        )
        .unwrap();
        assert_eq!(flows(&b, 1), ["reg0=0x6 cookie=0x234 idle=0"]);
        // A learn with another cookie: the flows of the old one go.
        b.add_flow(
            &spec("table=0,reg0=2,actions=learn(table=1,delete_learned,cookie=0x123)"),
            now,
        )
        .unwrap();
        assert!(flows(&b, 1).is_empty());
    }

    #[test]
    fn fin_timeouts_only_shorten() {
        let mut t = 0;
        reduce_timeout(5, &mut t);
        assert_eq!(t, 5);
        reduce_timeout(10, &mut t);
        assert_eq!(t, 5);
        reduce_timeout(0, &mut t);
        assert_eq!(t, 5);
        reduce_timeout(2, &mut t);
        assert_eq!(t, 2);
    }
}
