//! Translation of `learn`, `fin_timeout` and `conjunction` (OVS's `xlate_learn_action()`,
//! `xlate_fin_timeout()` and its no-op conjunction).
//!
//! Translation only reads the tables: what a packet teaches is recorded in
//! [`XlateOut::learned_flows`](super::XlateOut) as flow mods, and the slow path applies them
//! ([`crate::ofproto`]): the upcall once the packet is handled, as OVS's handler threads do, and
//! the revalidator again while the megaflow has packets (which refreshes the learned flow, as
//! OVS's translation cache does). `fin_timeout` is recorded the same way and applied when the
//! packets carry FIN or RST. The bits a learn reads are
//! consulted (the megaflow matches them), so every packet that would teach a different flow
//! misses the megaflow and is translated.

use crate::learn::Learn;
use crate::syntax::{FlowSpec, NoPortNames, format_actions, format_match};

use super::{Ctx, NodeKind};

/// A flow a packet teaches: a strict modify (an add when there is none) in `bridge`.
#[derive(Clone, Debug)]
pub struct LearnedFlow {
    /// Index of the bridge.
    pub bridge: usize,
    pub spec: FlowSpec,
    /// The learn's `limit`: at most this many flows with its cookie in its table (0: none).
    pub limit: u32,
}

/// A rule's timeouts shortened when a packet with FIN or RST passes it (`fin_timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FinTimeout {
    /// (bridge, table, rule) of the rule whose action it is.
    pub rule: (usize, usize, crate::classifier::RuleId),
    pub idle: u16,
    pub hard: u16,
}

/// TCP FIN and RST, in `tcp_flags`.
const TCP_FIN: u16 = 0x001;
const TCP_RST: u16 = 0x004;

impl FinTimeout {
    /// Whether packets with these TCP flags (OR-ed) shorten the rule's timeouts.
    pub fn applies(tcp_flags: u16) -> bool {
        tcp_flags & (TCP_FIN | TCP_RST) != 0
    }
}

impl Ctx<'_> {
    /// `learn(...)`: the flow the packet teaches, checked against the limit.
    pub(super) fn learn_action(&mut self, l: &Learn) {
        l.unwildcard(&mut self.wc);
        // A trace without side effects learns nothing (OVS's allow_side_effects); the
        // revalidator's translations, which have none either, learn again what their megaflow
        // learned, to refresh it.
        if !self.learn && self.trace.is_some() {
            self.trace_add(
                NodeKind::Warn,
                "suppressing side effects, so learn action ignored",
            );
            return;
        }
        let fm = l.execute(&self.flow);
        if self.trace.is_some() {
            let mut m = String::new();
            format_match(
                &mut m,
                &fm.match_,
                crate::syntax::DEFAULT_PRIORITY,
                &NoPortNames,
            );
            let mut s = format!("table={} {m}", fm.table);
            while s.ends_with(' ') {
                s.pop();
            }
            s += &format!(" priority={}", fm.priority);
            if fm.cookie != 0 {
                s += &format!(" cookie={:#x}", fm.cookie);
            }
            if fm.idle_timeout != 0 {
                s += &format!(" idle={}", fm.idle_timeout);
            }
            if fm.hard_timeout != 0 {
                s += &format!(" hard={}", fm.hard_timeout);
            }
            if l.flags & crate::learn::NX_LEARN_F_SEND_FLOW_REM != 0 {
                s += " send_flow_rem";
            }
            s += " actions=";
            format_actions(&mut s, &fm.actions, &NoPortNames);
            self.note(s);
        }
        let success = self.learn_allowed(&fm, l.limit);
        if let Some(r) = l.result_dst {
            r.unwildcard(&mut self.wc);
            r.write(&mut self.flow, u128::from(success));
            if self.trace.is_some() {
                self.note(format_args!(
                    "{r} is now {}",
                    if success { "0x1" } else { "0" }
                ));
            }
        }
        if success {
            self.res.learned_flows.push(LearnedFlow {
                bridge: self.bridge,
                spec: fm,
                limit: l.limit,
            });
        }
        if self.trace.is_some() && !success {
            self.note("Limit exceeded, learn failed");
        }
    }

    /// Whether `fm` may be learned under `limit` (OVS's `ofproto_flow_mod_learn()`): a flow that
    /// exists is refreshed whatever the limit; a new one only while fewer than `limit` flows
    /// with its cookie are in its table.
    fn learn_allowed(&self, fm: &FlowSpec, limit: u32) -> bool {
        if limit == 0 {
            return true;
        }
        let Some(table) = self.br().tables.get(usize::from(fm.table)) else {
            return false;
        };
        if table.find_exact(&fm.match_, fm.priority).is_some() {
            return true;
        }
        let n = table
            .iter()
            .filter(|(_, _, _, r)| r.cookie == fm.cookie)
            .count();
        n < limit as usize
    }

    /// `fin_timeout(...)`: recorded with the rule whose action it is; a FIN or RST among the
    /// packets that take this path shortens that rule's timeouts ([`FinTimeout::applies`]).
    pub(super) fn fin_timeout(&mut self, idle: u16, hard: u16) {
        self.wc.dp.set_nw_proto(0xff);
        if let Some(rule) = self.rule {
            self.res.fin_timeouts.push(FinTimeout { rule, idle, hard });
        }
    }

    /// A `conjunction` action run as an action (a packet-out can do it): nothing, with OVS's
    /// error in a trace.
    pub(super) fn conjunction_action(&mut self) {
        self.trace_add(NodeKind::Error, "executing no-op conjunction action");
    }
}
