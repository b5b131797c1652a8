//! The flows `dump-flows` lists (OpenFlow flow and aggregate statistics, `ofctl/dump-flows`),
//! handed one at a time to the caller, which encodes or prints each as it comes.
//!
//! A table of 100 000 rules is walked under the pipeline's read lock, as OVS's
//! `handle_flow_stats_request()` walks its classifier: the selection (with each rule's
//! priority, found in the same pass) is ordered by table, priority (highest first) and rule,
//! then each rule is copied into one reused [`FlowSpec`] (only the words its match uses), so
//! that a dump costs no memory per rule and no copy of the whole table.

use std::time::Instant;

use super::Ofproto;
use crate::classifier::RuleId;
use crate::syntax::{FlowSpec, FlowStats};

impl Ofproto {
    /// Calls `visit` with every flow of `bridge` that `spec` selects (all with `None`), in
    /// `dump-flows` order, with its statistics; the spec handed over is reused from one call
    /// to the next.
    pub fn for_each_flow_entry(
        &self,
        bridge: &str,
        spec: Option<&FlowSpec>,
        mut visit: impl FnMut(&FlowSpec, &FlowStats),
    ) -> Result<(), String> {
        self.settle_credits();
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let now = Instant::now();
        // The selection once, as (table, priority, rule); then ordered before anything is
        // copied out of the tables.
        let mut order: Vec<(usize, u16, RuleId)> = match spec {
            Some(s) => b.select_entries_in(s, false, b.tables_version()),
            None => b
                .tables
                .iter()
                .enumerate()
                .flat_map(|(t, table)| table.iter().map(move |(id, _, p, _)| (t, p, id)))
                .collect(),
        };
        order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        let mut fs = FlowSpec {
            has_actions: true,
            ..FlowSpec::empty()
        };
        for (t, _, id) in order {
            let Some((m, prio, r)) = b.tables[t].get(id) else {
                continue;
            };
            fs.table = t as u8;
            fs.priority = prio;
            fs.cookie = r.cookie;
            fs.idle_timeout = r.idle_timeout;
            fs.hard_timeout = r.hard_timeout;
            fs.importance = r.importance;
            fs.flags = r.flags;
            m.expand_into(&mut fs.match_);
            fs.actions.clone_from(&r.actions);
            let age = now.duration_since(r.created);
            let stats = FlowStats {
                duration_sec: age.as_secs() as u32,
                duration_nsec: age.subsec_millis() * 1_000_000,
                n_packets: r.n_packets,
                n_bytes: r.n_bytes,
                idle_age: Some(now.duration_since(r.last_used()).as_secs() as u32),
                // Since the last modify (or learn's refresh), which ovs-ofctl prints when it
                // is not the flow's age.
                hard_age: Some(now.duration_since(r.modified).as_secs() as u32),
            };
            visit(&fs, &stats);
        }
        Ok(())
    }
}
