//! A bundle's flow mods applied atomically, as OVS's `do_bundle_commit()` applies them: each
//! is *started* in the bridge's next table version (an add inserts a rule visible only from
//! that version on, a delete or a replacement hides rules from it) while packets go on being
//! translated against the published version; then the bundle either *finishes*, publishing the
//! version in every table of the bridge at once and removing the hidden rules for good, or
//! *reverts*, taking the staged rules out and un-hiding the hidden ones, so that a bundle whose
//! Nth message fails leaves the tables exactly as they were.
//!
//! The pipeline's write lock is held per message, not for the whole commit, so that upcalls go
//! on between the messages of a long commit (seeing the published version); the table-change
//! mutex, held from the first message to the publication, keeps every other change of the
//! tables (flow mods, rule expiry) out of the way.

use std::fmt;
use std::sync::MutexGuard;
use std::time::Instant;

use super::Ofproto;
use crate::bridge::{INTERNAL_TABLE, N_TABLES, Rule};
use crate::classifier::{RuleId, VERSION_NEVER, Version};
use crate::flow_events::{FlowChange, Origin, current_origin};
use crate::flow_removed::RemovedReason;
use crate::syntax::{FlowModFlags, FlowSpec};

/// What a flow mod of a bundle does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowModOp {
    /// Adds a rule, replacing one of the same match and priority.
    Add,
    /// Gives the selected rules the spec's actions (counters kept).
    Modify { strict: bool },
    /// Removes the selected rules.
    Delete { strict: bool },
}

/// Why a flow mod of a bundle failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowModError {
    /// The bridge is gone.
    NoBridge,
    /// An add names a table beyond the last (OVS's `OFPBRC_BAD_TABLE_ID`).
    BadTableId,
    /// An add names the internal table 254, which is read-only (`OFPBRC_EPERM`).
    ReadOnlyTable,
    /// An add with `check_overlap` overlaps a rule of its priority (`OFPFMFC_OVERLAP`).
    Overlap,
    /// The actions use a group the bridge does not have (`OFPBAC_BAD_OUT_GROUP`).
    BadOutGroup,
    /// The actions use a meter the bridge does not have.
    Meter(crate::meter::MeterModError),
    /// The flow uses a `tun_metadata` field the bridge's TLV map does not map
    /// (`NXFMFC_INVALID_TLV_FIELD`).
    UnmappedTlvField(usize),
    /// The actions name bits of a `tun_metadata` field past its mapped length
    /// (`OFPBAC_BAD_SET_LEN`).
    TlvFieldOverrun(usize),
}

impl fmt::Display for FlowModError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FlowModError::NoBridge => "no such bridge",
            FlowModError::BadTableId => "table id out of range",
            FlowModError::ReadOnlyTable => "table 254 is read-only",
            FlowModError::Overlap => "the flow overlaps a flow of the same priority",
            FlowModError::BadOutGroup => "the actions use a group that does not exist",
            FlowModError::Meter(e) => return write!(f, "{e}"),
            FlowModError::UnmappedTlvField(n) => {
                return write!(f, "tun_metadata{n} is not mapped");
            }
            FlowModError::TlvFieldOverrun(n) => {
                return write!(f, "the actions reach past tun_metadata{n}'s mapped length");
            }
        })
    }
}

impl std::error::Error for FlowModError {}

/// What reverting a staged change takes.
enum Staged {
    /// A rule added in the next version (table, rule).
    Added(usize, RuleId),
    /// A rule hidden from the next version.
    Hidden(usize, RuleId),
}

/// A bundle being committed to one bridge: its flow mods staged in the next version, not yet
/// visible. Dropped without [`BundleCommit::finish`], it reverts.
pub struct BundleCommit<'a> {
    of: &'a Ofproto,
    _serial: MutexGuard<'a, ()>,
    bridge: String,
    version: Version,
    staged: Vec<Staged>,
    /// What flow monitors are told once the bundle commits, in order: (table, rule, change),
    /// the rule a removal's hidden one.
    changes: Vec<(usize, RuleId, FlowChange, Option<Origin>)>,
}

impl Ofproto {
    /// Starts committing a bundle to `bridge`: until it finishes or reverts, no other change
    /// of the flow tables happens.
    pub fn begin_bundle(&self, bridge: &str) -> Result<BundleCommit<'_>, FlowModError> {
        let serial = self.flow_mods();
        let version = self
            .read()
            .bridge(bridge)
            .ok_or(FlowModError::NoBridge)?
            .tables_version()
            + 1;
        Ok(BundleCommit {
            of: self,
            _serial: serial,
            bridge: bridge.to_owned(),
            version,
            staged: Vec::new(),
            changes: Vec::new(),
        })
    }
}

impl BundleCommit<'_> {
    /// The version the bundle's changes become visible in.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Stages one flow mod: it sees the bundle's earlier ones, packets see none of them.
    pub fn flow_mod(&mut self, op: FlowModOp, spec: &FlowSpec) -> Result<(), FlowModError> {
        // A modify that selects nothing may add the flow instead (see `added_by_modify`).
        if let FlowModOp::Modify { strict } = op
            && let Some(add) = spec.added_by_modify()
        {
            let none = self
                .of
                .read()
                .bridge(&self.bridge)
                .is_some_and(|b| b.select_in(spec, strict, self.version).is_empty());
            if none {
                return self.flow_mod(FlowModOp::Add, &add);
            }
        }
        let mut p = self.of.write();
        let b = p.bridge_mut(&self.bridge).ok_or(FlowModError::NoBridge)?;
        let v = self.version;
        let now = Instant::now();
        if let Some(n) = b.unmapped_tun_md(spec) {
            return Err(FlowModError::UnmappedTlvField(n));
        }
        if let Some(n) = b.tun_md_overrun(spec) {
            return Err(FlowModError::TlvFieldOverrun(n));
        }
        if !matches!(op, FlowModOp::Delete { .. }) {
            b.check_meters(&spec.actions).map_err(FlowModError::Meter)?;
            // As OVS, a modify's groups are checked only when some rule is to change.
            if crate::group::missing_group(&b.groups, &spec.actions).is_some()
                && (op == FlowModOp::Add || !b.select_in(spec, false, v).is_empty())
            {
                return Err(FlowModError::BadOutGroup);
            }
        }
        match op {
            FlowModOp::Add => {
                let t = usize::from(spec.table);
                if t >= N_TABLES {
                    return Err(FlowModError::BadTableId);
                }
                if t == INTERNAL_TABLE {
                    return Err(FlowModError::ReadOnlyTable);
                }
                if spec.flags.0 & FlowModFlags::CHECK_OVERLAP != 0 && b.overlaps_in(spec, v) {
                    return Err(FlowModError::Overlap);
                }
                let mut rule = Rule::from_spec(spec, now);
                if let Some(old) = b.tables[t].find_exact_in(&spec.match_, spec.priority, v) {
                    if let Some((_, _, r)) = b.tables[t].get(old) {
                        rule.take_stats(r, Rule::resets_counts(spec));
                    }
                    b.tables[t].hide_in(old, v);
                    self.staged.push(Staged::Hidden(t, old));
                }
                let id = b.insert_rule(t, spec.match_.clone(), spec.priority, rule, v);
                self.staged.push(Staged::Added(t, id));
                self.changes
                    .push((t, id, FlowChange::Added, current_origin()));
            }
            FlowModOp::Modify { strict } => {
                for (t, id) in b.select_in(spec, strict, v) {
                    let (m, priority, old) = b.tables[t].get(id).expect("selected rules exist");
                    let (m, mut rule) = (m.expand(), old.clone());
                    let old_actions = std::mem::replace(&mut rule.actions, spec.actions.clone());
                    let old_cookie = rule.cookie;
                    rule.modified = now;
                    if Rule::resets_counts(spec) {
                        rule.take_stats(old, true);
                    }
                    if let Some(c) = spec.modified_cookie() {
                        rule.cookie = c;
                    }
                    b.tables[t].hide_in(id, v);
                    self.staged.push(Staged::Hidden(t, id));
                    let actions_changed = old_actions != rule.actions;
                    let changed = actions_changed || old_cookie != rule.cookie;
                    let new = b.insert_rule(t, m, priority, rule, v);
                    self.staged.push(Staged::Added(t, new));
                    if changed {
                        let old_actions = actions_changed.then_some(old_actions);
                        self.changes.push((
                            t,
                            new,
                            FlowChange::Modified { old_actions },
                            current_origin(),
                        ));
                    }
                }
            }
            FlowModOp::Delete { strict } => {
                for (t, id) in b.select_in(spec, strict, v) {
                    b.tables[t].hide_in(id, v);
                    self.staged.push(Staged::Hidden(t, id));
                    self.changes.push((
                        t,
                        id,
                        FlowChange::Removed(RemovedReason::Delete),
                        current_origin(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Publishes the bundle's version: every change becomes visible at once, to every table
    /// of the bridge; the rules it hid are removed for good.
    pub fn finish(mut self) {
        let staged = std::mem::take(&mut self.staged);
        let mut p = self.of.write();
        if let Some(b) = p.bridge_mut(&self.bridge) {
            b.set_tables_version(self.version);
            b.begin_change();
            let now = std::time::Instant::now();
            for (t, id, change, origin) in std::mem::take(&mut self.changes) {
                if let Some((m, p, r)) = b.tables[t].get(id) {
                    let (m, r) = (m.expand(), r.clone());
                    let removed = match change {
                        FlowChange::Removed(why) => Some(why),
                        _ => None,
                    };
                    b.note_change_by(t, (&m, p, &r), change, origin);
                    // A rule the bundle deleted, or whose group it deleted, is told to the
                    // controllers that asked (`send_flow_rem`), as a flow mod's deletion is.
                    if let Some(why) = removed {
                        b.keep_removed(t, (m, p, r), why, now);
                    }
                }
            }
            let mut removed = Vec::new();
            for s in staged {
                if let Staged::Hidden(t, id) = s {
                    removed.extend(b.remove_rule(t, id).map(|(_, _, r)| r));
                }
            }
            // What the removed rules learned with `delete_learned` goes with them.
            super::flush_learned_rules(b, &removed);
        }
        drop(p);
        self.of.changed();
    }

    /// Applies a group mod of the bundle, in its order: flows staged after it may use the group.
    /// Group tables are not versioned: the change is visible at once and stays if the bundle
    /// fails later. A group deleted takes the flows that use it: the published ones at once,
    /// those the bundle staged from its version on (as OVS deletes them in the bundle's).
    pub fn group_mod(
        &mut self,
        gm: &crate::group::GroupMod,
    ) -> Result<crate::group::GroupModDone, super::GroupModFailure> {
        let done = self.of.group_mod_serialized(&self.bridge, gm)?;
        if !done.deleted.is_empty() {
            self.hide_group_users(&done.deleted);
        }
        Ok(done)
    }

    /// Hides from the bundle's version the rules visible in it that use a group of `deleted`.
    fn hide_group_users(&mut self, deleted: &[u32]) {
        let mut p = self.of.write();
        let Some(b) = p.bridge_mut(&self.bridge) else {
            return;
        };
        let v = self.version;
        let mut dead = Vec::new();
        for (t, table) in b.tables.iter().enumerate() {
            dead.extend(
                table
                    .iter_in(v)
                    .filter(|(_, _, _, r)| {
                        let mut used = Vec::new();
                        crate::group::groups_used(&r.actions, &mut used);
                        used.iter().any(|g| deleted.contains(g))
                    })
                    .map(|(id, ..)| (t, id)),
            );
        }
        for (t, id) in dead {
            b.tables[t].hide_in(id, v);
            self.staged.push(Staged::Hidden(t, id));
            let removed = FlowChange::Removed(RemovedReason::GroupDelete);
            self.changes.push((t, id, removed, current_origin()));
        }
    }

    /// Undoes every staged change: the tables are as they were before the bundle.
    pub fn revert(self) {}

    fn undo(&mut self) {
        if self.staged.is_empty() {
            return;
        }
        let mut p = self.of.write();
        let Some(b) = p.bridge_mut(&self.bridge) else {
            return;
        };
        for s in self.staged.drain(..).rev() {
            match s {
                Staged::Added(t, id) => drop(b.remove_rule(t, id)),
                Staged::Hidden(t, id) => b.tables[t].hide_in(id, VERSION_NEVER),
            }
        }
    }
}

impl Drop for BundleCommit<'_> {
    fn drop(&mut self) {
        self.undo();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::pipekey::{PipeKey, PipeMask};
    use crate::syntax::{FlowKind, NoPortNames, OfAction, parse_flow};

    fn spec(text: &str, kind: FlowKind) -> FlowSpec {
        parse_flow(text, kind, &NoPortNames).unwrap()
    }

    /// The bridge's flows as `dump-flows` selects them, without their statistics.
    fn flows(of: &Ofproto) -> Vec<FlowSpec> {
        of.flow_entries("br0", None)
            .unwrap()
            .into_iter()
            .map(|(f, _)| f)
            .collect()
    }

    fn switch() -> Arc<Ofproto> {
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        for f in [
            "priority=10,ip,nw_dst=10.0.0.1,actions=output:2",
            "priority=10,ip,nw_dst=10.0.0.2,actions=output:2",
            "priority=5,arp,actions=drop",
        ] {
            of.add_flow("br0", f).unwrap();
        }
        of
    }

    #[test]
    fn a_failing_bundle_leaves_the_tables_as_they_were() {
        let of = switch();
        let before = flows(&of);
        let mut c = of.begin_bundle("br0").unwrap();
        c.flow_mod(
            FlowModOp::Add,
            &spec("priority=7,udp,actions=output:1", FlowKind::Add),
        )
        .unwrap();
        let del = spec("priority=5,arp", FlowKind::ModOrDel);
        c.flow_mod(FlowModOp::Delete { strict: true }, &del)
            .unwrap();
        let m = spec("ip,actions=output:9", FlowKind::ModOrDel);
        c.flow_mod(FlowModOp::Modify { strict: false }, &m).unwrap();
        let replace = spec(
            "priority=10,ip,nw_dst=10.0.0.1,actions=output:8",
            FlowKind::Add,
        );
        c.flow_mod(FlowModOp::Add, &replace).unwrap();
        // Not yet visible: the dump is still the published version.
        assert_eq!(flows(&of).len(), before.len());
        // The replacement staged above is what a later message of the bundle overlaps.
        let overlap = spec("check_overlap,priority=10,ip,actions=drop", FlowKind::Add);
        assert_eq!(
            c.flow_mod(FlowModOp::Add, &overlap),
            Err(FlowModError::Overlap)
        );
        // The internal table takes no flow, as OVS's (`OFPBRC_EPERM`).
        let internal = spec("table=254,actions=drop", FlowKind::Add);
        assert_eq!(
            c.flow_mod(FlowModOp::Add, &internal),
            Err(FlowModError::ReadOnlyTable)
        );
        c.revert();
        assert_eq!(flows(&of), before);
        assert!(
            of.add_flow("br0", "table=254,actions=drop")
                .unwrap_err()
                .starts_with("OFPBRC_EPERM")
        );
        let b = of.read();
        assert_eq!(
            b.bridges[0].n_rules(),
            before.len(),
            "staged rules are gone"
        );
    }

    #[test]
    fn a_committed_bundle_is_published_at_once() {
        let of = switch();
        let v0 = of.read().bridges[0].tables_version();
        let mut c = of.begin_bundle("br0").unwrap();
        c.flow_mod(
            FlowModOp::Add,
            &spec("priority=7,udp,actions=output:1", FlowKind::Add),
        )
        .unwrap();
        let del = spec("arp", FlowKind::ModOrDel);
        c.flow_mod(FlowModOp::Delete { strict: false }, &del)
            .unwrap();
        let m = spec("ip,actions=output:3", FlowKind::ModOrDel);
        c.flow_mod(FlowModOp::Modify { strict: false }, &m).unwrap();
        assert_eq!(c.version(), v0 + 1);
        c.finish();
        let got: Vec<String> = flows(&of)
            .iter()
            .map(|f| f.format_dump(None, &NoPortNames))
            .collect();
        assert_eq!(
            got,
            [
                "priority=10,ip,nw_dst=10.0.0.1 actions=output:3",
                "priority=10,ip,nw_dst=10.0.0.2 actions=output:3",
                "priority=7,udp actions=output:3",
            ]
        );
        let b = of.read();
        assert_eq!(b.bridges[0].tables_version(), v0 + 1);
        assert_eq!(b.bridges[0].n_rules(), 3, "hidden rules are removed");
    }

    #[test]
    fn a_group_deleted_in_a_bundle_takes_the_flows_the_bundle_staged_with_it() {
        use crate::syntax::group::parse_group_mod;
        let of = switch();
        let group = |text: &str| parse_group_mod(text, None, &NoPortNames).unwrap();
        let mut c = of.begin_bundle("br0").unwrap();
        c.group_mod(&group("group_id=1,type=all,bucket=output:2"))
            .unwrap();
        c.flow_mod(
            FlowModOp::Add,
            &spec("priority=7,udp,actions=group:1", FlowKind::Add),
        )
        .unwrap();
        c.group_mod(&group("delete group_id=1")).unwrap();
        c.finish();
        assert!(
            flows(&of).iter().all(|f| f.priority != 7),
            "the flow went with its group"
        );
        assert_eq!(of.read().bridges[0].n_rules(), 3);
    }

    /// The flow-removed messages `of`'s bridge has for the controllers: priority and reason.
    fn told_removed(of: &Ofproto) -> Vec<(u16, RemovedReason)> {
        let mut p = of.write();
        let b = p.bridge_mut("br0").unwrap();
        crate::flow_removed::take_removed(b)
            .into_iter()
            .map(|r| (r.priority, r.reason))
            .collect()
    }

    #[test]
    fn flows_a_bundle_deletes_are_told_as_removed() {
        let of = switch();
        of.add_flow("br0", "priority=8,tcp,send_flow_rem,actions=drop")
            .unwrap();
        let mut c = of.begin_bundle("br0").unwrap();
        c.flow_mod(
            FlowModOp::Delete { strict: false },
            &spec("tcp", FlowKind::ModOrDel),
        )
        .unwrap();
        c.finish();
        assert_eq!(told_removed(&of), [(8, RemovedReason::Delete)]);
    }

    #[test]
    fn flows_a_group_delete_takes_are_told_as_removed_for_it() {
        use crate::syntax::group::parse_group_mod;
        let of = switch();
        let group = |text: &str| parse_group_mod(text, None, &NoPortNames).unwrap();
        of.group_mod("br0", &group("group_id=1,type=all,bucket=output:2"))
            .unwrap();
        of.add_flow("br0", "priority=8,udp,send_flow_rem,actions=group:1")
            .unwrap();
        of.add_flow("br0", "priority=9,tcp,send_flow_rem,actions=group:1")
            .unwrap();
        // Outside a bundle, then inside one.
        of.group_mod("br0", &group("delete group_id=1")).unwrap();
        let mut told = told_removed(&of);
        told.sort_by_key(|t| t.0);
        let why = RemovedReason::GroupDelete;
        assert_eq!(told, [(8, why), (9, why)]);
        of.group_mod("br0", &group("group_id=2,type=all,bucket=output:2"))
            .unwrap();
        of.add_flow("br0", "priority=8,udp,send_flow_rem,actions=group:2")
            .unwrap();
        let mut c = of.begin_bundle("br0").unwrap();
        c.group_mod(&group("delete group_id=2")).unwrap();
        c.finish();
        assert_eq!(told_removed(&of), [(8, why)]);
    }

    /// The output port of the rule `key` hits in table 0, as a lookup under one read lock
    /// sees it.
    fn outputs(of: &Ofproto, keys: &[PipeKey]) -> Vec<Option<u32>> {
        let p = of.read();
        let t = &p.bridges[0].tables[0];
        keys.iter()
            .map(|k| {
                let id = t.lookup(k, &mut PipeMask::new())?;
                match t.get(id)?.2.actions.first()? {
                    OfAction::Output { port, .. } => Some(*port),
                    _ => None,
                }
            })
            .collect()
    }

    #[test]
    fn packets_see_the_old_or_the_new_table_never_a_mix() {
        let of = switch();
        let keys: Vec<PipeKey> = [1u8, 2]
            .iter()
            .map(|&d| {
                let mut k = PipeKey::new();
                k.dp.set_eth_type(0x0800)
                    .set_nw_dst(std::net::Ipv4Addr::new(10, 0, 0, d));
                k
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (of, stop, keys) = (of.clone(), stop.clone(), keys.clone());
            std::thread::spawn(move || {
                let mut looked = 0u64;
                while !stop.load(Ordering::Relaxed) || looked == 0 {
                    let o = outputs(&of, &keys);
                    assert_eq!(o[0], o[1], "a mixed table after {looked} lookups");
                    looked += 1;
                }
                looked
            })
        };
        // Each bundle moves both flows to the next port, with padding flow mods between the
        // two so that the commit holds the write lock many times while half of it is staged.
        for round in 0..50u32 {
            let port = 3 + round % 2;
            let mut c = of.begin_bundle("br0").unwrap();
            let first = format!("priority=10,ip,nw_dst=10.0.0.1,actions=output:{port}");
            c.flow_mod(FlowModOp::Add, &spec(&first, FlowKind::Add))
                .unwrap();
            for i in 0..50 {
                let pad = format!("priority=1,tcp,tp_dst={i},actions=drop");
                c.flow_mod(FlowModOp::Add, &spec(&pad, FlowKind::Add))
                    .unwrap();
            }
            let second = format!("priority=10,ip,nw_dst=10.0.0.2,actions=output:{port}");
            c.flow_mod(FlowModOp::Add, &spec(&second, FlowKind::Add))
                .unwrap();
            c.finish();
            assert_eq!(outputs(&of, &keys), [Some(port), Some(port)]);
        }
        stop.store(true, Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    }
}
