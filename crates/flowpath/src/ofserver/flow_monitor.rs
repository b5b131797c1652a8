//! Flow monitors (OVS's `ofmonitor`s): a connection asks to be told of the changes to its
//! bridge's flow tables (`ovs-ofctl monitor BRIDGE watch:...`), filtered by table, output
//! port, group and match. The request is answered with the flows there already (when it asks
//! for them); then every change the bridge logs ([`ofproto::flow_events`]) goes to each
//! connection whose monitors take it, in one update message per change (a flow mod's, a
//! bundle commit's, a group deletion's, a learned flow's, an expired rule's), as OVS's
//! `ofmonitor_report()` and `ofmonitor_flush()` send them: a change a connection's own request
//! made is abbreviated to that request's transaction id, once per message, unless one of its
//! monitors asked for its own changes in full.
//!
//! Updates are never dropped. A connection with more than [`PAUSE_BYTES`] of them waiting to
//! be sent is paused, as OVS pauses it (`NXT_FLOW_MONITOR_PAUSED`, or the 1.4 event): from
//! then on it is told only of the removal of flows that were there before the pause; once all
//! that waited is sent, it is resumed with the flows added or modified meanwhile (those still
//! there) and `NXT_FLOW_MONITOR_RESUMED`.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

use ofproto::bridge::{Bridge, Rule, selects};
use ofproto::flow_events::{FlowChange, FlowEvent, take_events};
use ofproto::flow_removed::RemovedReason;
use ofproto::ofproto::Ofproto;
use ofproto::pipekey::PipeMatch;
use openflow::conn::ConnId;
use openflow::error::OfpErr;
use openflow::header::Version;
use openflow::msgs::flow_monitor::{
    FlowMonitorRequest, FlowUpdate, FlowUpdateEvent, FlowUpdateFull, FlowUpdateWriter,
    MonitorCommand, OFPG_ANY, OFPP_NONE, decode_flow_monitor_cancel, decode_flow_monitor_request,
    encode_flow_monitor_pause, flags,
};
use openflow::msgtype::Message;
use openflow::nxm::TlvLens;

use super::ofconn::OfConn;

/// One monitor of a connection.
#[derive(Clone, Debug)]
struct Monitor {
    /// [`flags`].
    flags: u16,
    out_port: Option<u32>,
    out_group: Option<u32>,
    /// One table, or 0xff for all.
    table: u8,
    m: PipeMatch,
}

impl Monitor {
    fn new(rq: &FlowMonitorRequest) -> Monitor {
        Monitor {
            flags: rq.flags,
            out_port: (rq.out_port != OFPP_NONE).then_some(u32::from(rq.out_port)),
            out_group: (rq.out_group != OFPG_ANY).then_some(rq.out_group),
            table: rq.table,
            m: rq.match_.clone(),
        }
    }

    /// Whether rule `(m, priority, rule)` of table `t` is one this monitor watches (OVS's
    /// `ofproto_collect_ofmonitor_refresh_rule()` and `ofmonitor_report()` filters);
    /// `old_actions` are the rule's actions before a modification, which count for the
    /// output port too.
    fn watches(
        &self,
        t: u8,
        (m, priority, rule): (&PipeMatch, u16, &Rule),
        old_actions: Option<&[ofproto::syntax::OfAction]>,
    ) -> bool {
        (self.table == 0xff || self.table == t)
            && self.out_port.is_none_or(|p| {
                rule.outputs_to(p)
                    || old_actions.is_some_and(|a| {
                        Rule {
                            actions: a.to_vec(),
                            ..rule.clone()
                        }
                        .outputs_to(p)
                    })
            })
            && self
                .out_group
                .is_none_or(|g| ofproto::group::uses_group(&rule.actions, g))
            && selects(&self.m, 0, false, m, priority)
    }
}

/// Queued update bytes past which a connection's monitors pause (OVS's 128 KiB).
pub(crate) const PAUSE_BYTES: usize = 128 * 1024;

/// A rule's identity while a connection is paused: (table, priority, hash of the match).
type RuleKey = (u8, u16, u64);

/// The rules a paused connection missed: added (`true`) or modified since the pause, with
/// their matches (a bucket per hash).
type Missed = HashMap<RuleKey, Vec<(PipeMatch, bool)>>;

/// One connection's monitors, and what it missed while paused.
#[derive(Clone, Debug, Default)]
struct ConnMonitors {
    monitors: BTreeMap<u32, Monitor>,
    paused: Option<Missed>,
}

/// Every connection's monitors.
#[derive(Debug, Default)]
pub(crate) struct FlowMonitors {
    by_conn: HashMap<ConnId, ConnMonitors>,
}

fn rule_key(t: u8, m: &PipeMatch, p: u16) -> RuleKey {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let (k, mk) = (m.key(), m.mask());
    for i in 0..flow::key::KEY_WORDS {
        h.write_u64(k.dp.word(i));
        h.write_u64(mk.dp.word(i));
    }
    k.meta.hash(&mut h);
    mk.meta.hash(&mut h);
    (t, p, h.finish())
}

impl FlowMonitors {
    /// Answers a flow monitor request of connection `c`: its monitors added, changed or
    /// deleted all or none (OVS's `handle_flow_monitor_request()`), then the reply with the
    /// flows the new monitors want at once.
    pub(crate) fn request(
        &mut self,
        of: &Ofproto,
        c: ConnId,
        conn: &OfConn,
        m: &Message<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), OfpErr> {
        let reqs = decode_flow_monitor_request(m)?;
        let mut state = self.by_conn.get(&c).cloned().unwrap_or_default();
        let mine = &mut state.monitors;
        let mut added = Vec::new();
        for rq in &reqs {
            if rq.table != 0xff && usize::from(rq.table) >= ofproto::bridge::N_TABLES {
                return Err(OfpErr::OfpbrcBadTableId);
            }
            match rq.command {
                MonitorCommand::Add => {
                    if mine.contains_key(&rq.id) {
                        return Err(OfpErr::OfpmofcMonitorExists);
                    }
                }
                MonitorCommand::Modify | MonitorCommand::Delete => {
                    if mine.remove(&rq.id).is_none() {
                        return Err(OfpErr::OfpmofcUnknownMonitor);
                    }
                }
            }
            if rq.command != MonitorCommand::Delete {
                mine.insert(rq.id, Monitor::new(rq));
                added.push(rq.id);
            }
        }
        let mut pipe = of.pipe.write().unwrap_or_else(|e| e.into_inner());
        let b = pipe.bridge_mut(&conn.bridge).ok_or(OfpErr::OfpbrcEperm)?;
        let tlv = TlvLens::from_tlv_map(&b.tlv_map);
        let initial: Vec<&Monitor> = added
            .iter()
            .filter_map(|id| mine.get(id))
            .filter(|mon| mon.flags & flags::INITIAL != 0)
            .collect();
        let mut w = FlowUpdateWriter::new(conn.version, m.xid, out);
        for u in initial_updates(b, &initial) {
            w.push(&u, &tlv).map_err(|_| OfpErr::OfpbrcBadLen)?;
        }
        w.finish().map_err(|_| OfpErr::OfpbrcBadLen)?;
        if !mine.is_empty() {
            b.flow_events.enabled = true;
        }
        self.by_conn.insert(c, state);
        Ok(())
    }

    /// `NXT_FLOW_MONITOR_CANCEL` (or the ONF's) of connection `c`.
    pub(crate) fn cancel(&mut self, c: ConnId, m: &Message<'_>) -> Result<(), OfpErr> {
        let id = decode_flow_monitor_cancel(m)?;
        self.by_conn
            .get_mut(&c)
            .and_then(|st| st.monitors.remove(&id))
            .map(drop)
            .ok_or(OfpErr::OfpmofcUnknownMonitor)
    }

    /// Forgets the monitors of a connection that ended.
    pub(crate) fn forget(&mut self, c: ConnId) {
        self.by_conn.remove(&c);
    }

    /// Takes the changes every bridge logged and composes, for each connection whose monitors
    /// take some, its update message (OVS's `ofmonitor_report()` then `ofmonitor_flush()`).
    /// A bridge nobody monitors any more stops logging.
    pub(crate) fn updates(
        &mut self,
        of: &Ofproto,
        conns: &BTreeMap<ConnId, OfConn>,
    ) -> Vec<(ConnId, Vec<u8>)> {
        self.by_conn.retain(|_, st| !st.monitors.is_empty());
        let watched = |bridge: &str| {
            self.by_conn
                .keys()
                .any(|c| conns.get(c).is_some_and(|o| o.bridge == bridge))
        };
        // A look first, so that the common case takes no write lock.
        let any = {
            let pipe = of.pipe.read().unwrap_or_else(|e| e.into_inner());
            pipe.bridges
                .iter()
                .any(|b| b.flow_events.enabled && (b.flow_events.pending() || !watched(&b.name)))
        };
        if !any {
            return Vec::new();
        }
        let mut taken = Vec::new();
        {
            let mut pipe = of.pipe.write().unwrap_or_else(|e| e.into_inner());
            for b in pipe.bridges.iter_mut().filter(|b| b.flow_events.enabled) {
                let events = take_events(b);
                if !watched(&b.name) {
                    b.flow_events.enabled = false;
                    continue;
                }
                if !events.is_empty() {
                    taken.push((b.name.clone(), TlvLens::from_tlv_map(&b.tlv_map), events));
                }
            }
        }
        let mut out = Vec::new();
        for (c, st) in &mut self.by_conn {
            let Some(conn) = conns.get(c) else { continue };
            for (_, tlv, events) in taken.iter().filter(|(b, ..)| *b == conn.bridge) {
                if let Some(msg) = compose(*c, conn.version, st, events, tlv) {
                    out.push((*c, msg));
                }
            }
        }
        out
    }

    /// OVS's flow control of monitors (`ofmonitor_flush()`, `ofmonitor_resume()`): a
    /// connection with more than [`PAUSE_BYTES`] of updates waiting (`backlog` gives
    /// (messages, bytes) waiting) is paused; a paused one with nothing waiting is resumed with
    /// the flows added or modified meanwhile. Returns the messages to send: (connection,
    /// message, whether it counts as a monitor update).
    pub(crate) fn flow_control(
        &mut self,
        of: &Ofproto,
        conns: &BTreeMap<ConnId, OfConn>,
        backlog: impl Fn(ConnId) -> Option<(usize, usize)>,
    ) -> Vec<(ConnId, Vec<u8>, bool)> {
        let mut out = Vec::new();
        for (c, st) in &mut self.by_conn {
            if let (Some(conn), Some(b)) = (conns.get(c), backlog(*c))
                && let Some((m, update)) = control(of, conn, st, b)
            {
                out.push((*c, m, update));
            }
        }
        out
    }

    /// Whether connection `c`'s monitors are paused.
    pub(crate) fn is_paused(&self, c: ConnId) -> bool {
        self.by_conn.get(&c).is_some_and(|st| st.paused.is_some())
    }

    /// Resumes connection `c` at once if it is paused and nothing waits for it (`backlog`),
    /// appending the refresh to `out`: done before a request of its is answered, so that the
    /// refresh comes before the reply (a barrier's, say).
    pub(crate) fn resume_drained(
        &mut self,
        of: &Ofproto,
        c: ConnId,
        conn: &OfConn,
        backlog: (usize, usize),
        out: &mut Vec<u8>,
    ) {
        if let Some(st) = self.by_conn.get_mut(&c)
            && st.paused.is_some()
            && let Some((m, _)) = control(of, conn, st, backlog)
        {
            out.extend_from_slice(&m);
        }
    }
}

/// The flow control of one connection with `backlog` (messages, bytes) of updates waiting:
/// the message that pauses or resumes it, and whether that counts as a monitor update.
fn control(
    of: &Ofproto,
    conn: &OfConn,
    st: &mut ConnMonitors,
    (msgs, bytes): (usize, usize),
) -> Option<(Vec<u8>, bool)> {
    let mut m = Vec::new();
    if st.paused.is_none() && bytes > PAUSE_BYTES {
        st.paused = Some(Missed::new());
        encode_flow_monitor_pause(true, conn.version, &mut m);
        return Some((m, true));
    }
    if msgs != 0 {
        return None;
    }
    let missed = st.paused.take()?;
    let pipe = of.pipe.read().unwrap_or_else(|e| e.into_inner());
    if let Some(b) = pipe.bridge(&conn.bridge) {
        let tlv = TlvLens::from_tlv_map(&b.tlv_map);
        let mut w = FlowUpdateWriter::new(conn.version, 0, &mut m);
        for u in resume_updates(b, &st.monitors, missed) {
            let _ = w.push(&u, &tlv);
        }
        let _ = w.finish();
    }
    encode_flow_monitor_pause(false, conn.version, &mut m);
    Some((m, false))
}

/// The refresh of a paused connection (OVS's `ofmonitor_collect_resume_rules()`): each rule
/// added or modified while it was paused that is still there and that a monitor watching
/// such changes takes, as added or modified, in table order and then by priority.
fn resume_updates(
    b: &Bridge,
    monitors: &BTreeMap<u32, Monitor>,
    missed: Missed,
) -> Vec<FlowUpdate> {
    let mut rules: Vec<(u8, u16, PipeMatch, bool)> = missed
        .into_iter()
        .flat_map(|((t, p, _), v)| v.into_iter().map(move |(m, added)| (t, p, m, added)))
        .collect();
    rules.sort_by_key(|&(t, p, ..)| (t, std::cmp::Reverse(p)));
    let mut out = Vec::new();
    for (t, p, m, added) in rules {
        let Some(table) = b.tables.get(usize::from(t)) else {
            continue;
        };
        let Some((_, _, r)) = table.find_exact(&m, p).and_then(|id| table.get(id)) else {
            continue;
        };
        let update = if added {
            flags::ADD | flags::MODIFY
        } else {
            flags::MODIFY
        };
        let f = monitors
            .values()
            .filter(|mon| mon.flags & update != 0 && mon.watches(t, (&m, p, r), None))
            .fold(0, |f, mon| f | mon.flags);
        if f != 0 {
            let event = if added {
                FlowUpdateEvent::Added
            } else {
                FlowUpdateEvent::Modified
            };
            out.push(full(event, 0, t, (&m, p, r), f & flags::INSTRUCTIONS != 0));
        }
    }
    out
}

/// The initial updates for `monitors` (OVS's `ofproto_collect_ofmonitor_initial_rules()`):
/// each rule one of them watches, once, in table order and then by priority, highest first.
fn initial_updates(b: &Bridge, monitors: &[&Monitor]) -> Vec<FlowUpdate> {
    if monitors.is_empty() {
        return Vec::new();
    }
    let v = b.tables_version();
    let mut out = Vec::new();
    for (t, table) in b.tables.iter().enumerate() {
        let mut rules: Vec<_> = table
            .iter_in(v)
            .filter_map(|(id, m, p, r)| {
                let m = m.expand();
                let wanted: Vec<&&Monitor> = monitors
                    .iter()
                    .filter(|mon| mon.watches(t as u8, (&m, p, r), None))
                    .collect();
                let actions = wanted
                    .iter()
                    .any(|mon| mon.flags & flags::INSTRUCTIONS != 0);
                (!wanted.is_empty()).then_some((p, id, m, r, actions))
            })
            .collect();
        rules.sort_by_key(|&(p, id, ..)| (std::cmp::Reverse(p), id));
        for (p, _, m, r, actions) in rules {
            out.push(full(
                FlowUpdateEvent::Initial,
                0,
                t as u8,
                (&m, p, r),
                actions,
            ));
        }
    }
    out
}

/// A full update for a rule.
fn full(
    event: FlowUpdateEvent,
    reason: u8,
    table: u8,
    (m, priority, r): (&PipeMatch, u16, &Rule),
    actions: bool,
) -> FlowUpdate {
    FlowUpdate::Full(Box::new(FlowUpdateFull {
        event,
        reason,
        table,
        idle_timeout: r.idle_timeout,
        hard_timeout: r.hard_timeout,
        priority,
        cookie: r.cookie,
        match_: m.clone(),
        actions: if actions {
            r.actions.clone()
        } else {
            Vec::new()
        },
    }))
}

/// The update message of connection `c` (monitors and pause `st`, version `v`) for
/// `events`, if any of them concerns it. A paused connection is told only of the removal of
/// flows that were there before the pause, in full; what else changed is noted for its
/// resumption.
fn compose(
    c: ConnId,
    v: Version,
    st: &mut ConnMonitors,
    events: &[FlowEvent],
    tlv: &TlvLens,
) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    // One message per change (a flow mod's, an expired rule's...), as OVS flushes them.
    for batch in events.chunk_by(|a, b| a.batch == b.batch) {
        let mut msg = Vec::new();
        let mut w = FlowUpdateWriter::new(v, 0, &mut msg);
        let mut n = 0;
        let mut abbreviated = false;
        for e in batch {
            let Some(u) = update_for(c, st, e, &mut abbreviated) else {
                continue;
            };
            if w.push(&u, tlv).is_ok() {
                n += 1;
            }
        }
        if w.finish().is_ok() && n > 0 {
            out.extend_from_slice(&msg);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The update of connection `c` (monitors and pause `st`) for event `e`, if its monitors take
/// it: in full, or abbreviated to the request's xid for the connection's own change (once per
/// message: `abbreviated` says whether it was).
fn update_for(
    c: ConnId,
    st: &mut ConnMonitors,
    e: &FlowEvent,
    abbreviated: &mut bool,
) -> Option<FlowUpdate> {
    let (event, reason, update, old) = match &e.change {
        FlowChange::Added => (FlowUpdateEvent::Added, 0, flags::ADD, None),
        FlowChange::Modified { old_actions } => (
            FlowUpdateEvent::Modified,
            0,
            flags::MODIFY,
            old_actions.as_deref(),
        ),
        FlowChange::Removed(why) => (
            FlowUpdateEvent::Removed,
            reason_code(*why),
            flags::REMOVED,
            None,
        ),
    };
    let rule = (&e.m, e.priority, &e.rule);
    if let Some(missed) = st.paused.as_mut()
        && paused_skips(missed, e)
    {
        return None;
    }
    let f = st
        .monitors
        .values()
        .filter(|mon| mon.flags & update != 0 && mon.watches(e.table, rule, old))
        .fold(0, |f, mon| f | mon.flags);
    if f == 0 {
        return None;
    }
    let own = e.origin.filter(|o| o.conn == c.0 && st.paused.is_none());
    match own {
        Some(o) if f & flags::ONLY_OWN == 0 => {
            if std::mem::replace(abbreviated, true) {
                return None;
            }
            Some(FlowUpdate::Abbrev(o.xid))
        }
        _ => Some(full(
            event,
            reason,
            e.table,
            rule,
            f & flags::INSTRUCTIONS != 0,
        )),
    }
}

/// For a paused connection: whether event `e` is left out (noted in `missed` for the
/// resumption when it adds or modifies a flow, forgotten when it removes one added since the
/// pause).
fn paused_skips(missed: &mut Missed, e: &FlowEvent) -> bool {
    let bucket = missed
        .entry(rule_key(e.table, &e.m, e.priority))
        .or_default();
    let at = bucket.iter().position(|(m, _)| *m == e.m);
    match &e.change {
        FlowChange::Added | FlowChange::Modified { .. } => {
            // The last change counts: a flow added and then modified since the pause is a
            // modified one, as OVS's modification makes a new rule never reported added.
            let added = matches!(e.change, FlowChange::Added);
            match at {
                Some(i) => bucket[i].1 = added,
                None => bucket.push((e.m.clone(), added)),
            }
            true
        }
        FlowChange::Removed(_) => at.is_some_and(|i| bucket.remove(i).1),
    }
}

/// `OFPRR_*` of a removal.
fn reason_code(why: RemovedReason) -> u8 {
    why as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofproto::flow_events::FlowEvent;
    use ofproto::syntax::{FlowKind, NoPortNames, parse_flow};

    fn event(flow: &str, change: FlowChange) -> FlowEvent {
        let s = parse_flow(flow, FlowKind::Add, &NoPortNames).unwrap();
        FlowEvent {
            change,
            table: s.table,
            m: s.match_.clone(),
            priority: s.priority,
            batch: 0,
            rule: Rule {
                cookie: 0,
                actions: s.actions.clone(),
                idle_timeout: 0,
                hard_timeout: 0,
                importance: 0,
                flags: s.flags,
                created: std::time::Instant::now(),
                modified: std::time::Instant::now(),
                n_packets: 0,
                n_bytes: 0,
                used: None,
            },
            origin: None,
        }
    }

    #[test]
    fn a_paused_connection_keeps_what_it_missed_and_only_removals_of_older_flows() {
        let mut missed = Missed::new();
        let old = "priority=5,in_port=1,actions=drop";
        let new = "priority=6,in_port=2,actions=drop";
        let removed = FlowChange::Removed(RemovedReason::Delete);
        // A flow there before the pause: its modification is kept, its removal is told.
        assert!(paused_skips(
            &mut missed,
            &event(old, FlowChange::Modified { old_actions: None })
        ));
        assert!(!paused_skips(&mut missed, &event(old, removed.clone())));
        // A flow added since: its removal is not told, and it is forgotten.
        assert!(paused_skips(&mut missed, &event(new, FlowChange::Added)));
        assert!(paused_skips(&mut missed, &event(new, removed.clone())));
        assert!(missed.values().all(Vec::is_empty));
        // Added then modified: a modified one on resumption, as OVS's.
        paused_skips(&mut missed, &event(new, FlowChange::Added));
        paused_skips(
            &mut missed,
            &event(new, FlowChange::Modified { old_actions: None }),
        );
        let kept: Vec<bool> = missed.values().flatten().map(|(_, added)| *added).collect();
        assert_eq!(kept, [false]);
    }
}
