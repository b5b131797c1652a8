//! Group table management in `ovs-ofctl` terms, for the wire server's `OFPT_GROUP_MOD` and
//! group statistics and for the text control commands alike: a group mod is applied to the
//! bridge's [`GroupTable`](crate::group::GroupTable) under the pipeline's write lock, the
//! rules whose actions use a deleted group go with it (as OVS's `delete_group_start()` deletes
//! them), and the change makes the revalidator look at every megaflow again, so that flows
//! that used a group changed since follow it.

use crate::flow_removed::RemovedReason;
use std::fmt::Write;
use std::time::{Duration, Instant};

use super::{Names, Ofproto};
use crate::group::{GroupCommand, GroupDesc, GroupError, GroupMod, GroupModDone, OFPG_ALL};
use crate::syntax::group::{format_group, parse_group_mod};
use crate::xlate::Pipeline;

/// Why a group mod was not applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupModFailure {
    #[error("no bridge named {0}")]
    NoBridge(String),
    #[error("{0}")]
    Group(#[from] GroupError),
}

/// One group's statistics (OVS's `struct ofputil_group_stats`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStatsEntry {
    pub group_id: u32,
    /// Rules whose actions use the group.
    pub ref_count: u32,
    pub packets: u64,
    pub bytes: u64,
    /// How long the group has existed.
    pub age: Duration,
    /// Each bucket's (packets, bytes).
    pub buckets: Vec<(u64, u64)>,
}

/// A translation's use of a group: (bridge index, group id, bucket index or `None` for all).
pub type GroupCredit = (usize, u32, Option<usize>);

/// Credits `packets` and `bytes` to the groups a translation went through.
pub(crate) fn credit_groups(p: &Pipeline, used: &[GroupCredit], packets: u64, bytes: u64) {
    for &(b, id, bucket) in used {
        if let Some(g) = p.bridges.get(b).and_then(|br| br.groups.get(id)) {
            g.credit(bucket, packets, bytes);
        }
    }
}

impl Ofproto {
    /// Applies a group mod to `bridge` (OVS's `handle_group_mod()`), deleting the rules that
    /// use a deleted group; serialized with every other change of the flow tables.
    pub fn group_mod(&self, bridge: &str, gm: &GroupMod) -> Result<GroupModDone, GroupModFailure> {
        let _serial = self.flow_mods();
        self.group_mod_serialized(bridge, gm)
    }

    /// [`Self::group_mod`] for a caller that already holds the table-change mutex (a bundle's
    /// commit).
    pub(crate) fn group_mod_serialized(
        &self,
        bridge: &str,
        gm: &GroupMod,
    ) -> Result<GroupModDone, GroupModFailure> {
        let mut p = self.write();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| GroupModFailure::NoBridge(bridge.to_owned()))?;
        let done = b.groups.apply(gm, Instant::now())?;
        if !done.deleted.is_empty() {
            let mut dead = Vec::new();
            for (t, table) in b.tables.iter().enumerate() {
                dead.extend(
                    table
                        .iter()
                        .filter(|(_, _, _, r)| {
                            let mut used = Vec::new();
                            crate::group::groups_used(&r.actions, &mut used);
                            used.iter().any(|g| done.deleted.contains(g))
                        })
                        .map(|(id, ..)| (t, id)),
                );
            }
            let mut removed = Vec::new();
            let now = Instant::now();
            b.begin_change();
            for (t, id) in dead {
                if let Some((m, p, r)) = b.remove_rule(t, id) {
                    // OVS tells the monitors and the controllers with reason `group_delete`.
                    let why = RemovedReason::GroupDelete;
                    b.note_removed(t, (m, p, r.clone()), why, now);
                    removed.push(r);
                }
            }
            crate::ofproto::flush_learned_rules(b, &removed);
        }
        drop(p);
        self.changed();
        Ok(done)
    }

    /// The first group `actions` use that `bridge` does not have: a flow mod with such
    /// actions is refused (`OFPBAC_BAD_OUT_GROUP`).
    pub fn missing_group(&self, bridge: &str, actions: &[crate::syntax::OfAction]) -> Option<u32> {
        let p = self.read();
        let b = p.bridge(bridge)?;
        crate::group::missing_group(&b.groups, actions)
    }

    /// The description of group `group_id` of `bridge`, or of all ([`OFPG_ALL`]), by id.
    pub fn group_descs(&self, bridge: &str, group_id: u32) -> Result<Vec<GroupDesc>, String> {
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        Ok(b.groups
            .iter()
            .filter(|g| group_id == OFPG_ALL || g.group_id == group_id)
            .map(|g| g.desc())
            .collect())
    }

    /// The statistics of group `group_id` of `bridge`, or of all ([`OFPG_ALL`]), by id.
    pub fn group_stats(&self, bridge: &str, group_id: u32) -> Result<Vec<GroupStatsEntry>, String> {
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let now = Instant::now();
        // The rules that use each group (OVS's `ref_count`, the group's rule collection).
        let mut refs = std::collections::HashMap::<u32, u32>::new();
        for t in &b.tables {
            for (_, _, _, r) in t.iter() {
                let mut used = Vec::new();
                crate::group::groups_used(&r.actions, &mut used);
                used.sort_unstable();
                used.dedup();
                for g in used {
                    *refs.entry(g).or_default() += 1;
                }
            }
        }
        Ok(b.groups
            .iter()
            .filter(|g| group_id == OFPG_ALL || g.group_id == group_id)
            .map(|g| {
                let (packets, bytes) = g.counters.get();
                GroupStatsEntry {
                    group_id: g.group_id,
                    ref_count: refs.get(&g.group_id).copied().unwrap_or(0),
                    packets,
                    bytes,
                    age: now.duration_since(g.created),
                    buckets: g.bucket_counters.iter().map(|c| c.get()).collect(),
                }
            })
            .collect())
    }

    fn parse_group(
        &self,
        bridge: &str,
        text: &str,
        command: Option<GroupCommand>,
    ) -> Result<GroupMod, String> {
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let gm = parse_group_mod(text, command, &Names(b))?;
        gm.check().map_err(|e| e.to_string())?;
        Ok(gm)
    }

    /// `add-group`, `mod-group`, `insert-buckets`, `remove-buckets` and `del-groups` with one
    /// group's text, for `command`.
    pub fn group_text(
        &self,
        bridge: &str,
        command: GroupCommand,
        text: &str,
    ) -> Result<(), String> {
        let gm = self.parse_group(bridge, text, Some(command))?;
        self.group_mod(bridge, &gm)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// `add-groups BRIDGE FILE` (the file's text): one group a line, each optionally led by
    /// its command; all are checked before any is applied; returns how many.
    pub fn add_groups(&self, bridge: &str, text: &str) -> Result<usize, String> {
        let mut mods = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let gm = self
                .parse_group(bridge, line, None)
                .map_err(|e| format!("line {}: {e}", i + 1))?;
            mods.push(gm);
        }
        for gm in &mods {
            self.group_mod(bridge, gm).map_err(|e| e.to_string())?;
        }
        Ok(mods.len())
    }

    /// `dump-groups BRIDGE [GROUP]`, one group a line as `ovs-ofctl -O OpenFlow15` prints
    /// them (with bucket ids).
    pub fn dump_groups(&self, bridge: &str, group_id: u32) -> Result<String, String> {
        let descs = self.group_descs(bridge, group_id)?;
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let mut out = String::new();
        for d in &descs {
            out.push(' ');
            format_group(&mut out, d, true, false, &Names(b));
            out.push('\n');
        }
        Ok(out)
    }

    /// `dump-group-stats BRIDGE [GROUP]`, one group a line as `ovs-ofctl` prints them.
    pub fn dump_group_stats(&self, bridge: &str, group_id: u32) -> Result<String, String> {
        let mut out = String::new();
        for s in self.group_stats(bridge, group_id)? {
            out.push_str(&format_group_stats(&s));
            out.push('\n');
        }
        Ok(out)
    }
}

/// One group's statistics as `ovs-ofctl dump-group-stats` prints them (OVS's
/// `ofputil_group_stats_format()`), with its leading space.
pub fn format_group_stats(s: &GroupStatsEntry) -> String {
    let mut out = format!(" group_id={},", s.group_id);
    let _ = write!(
        out,
        "duration={}.{:03}s,",
        s.age.as_secs(),
        s.age.subsec_millis()
    );
    let _ = write!(
        out,
        "ref_count={},packet_count={},byte_count={}",
        s.ref_count, s.packets, s.bytes
    );
    for (i, (p, b)) in s.buckets.iter().enumerate() {
        let _ = write!(out, ",bucket{i}:packet_count={p},byte_count={b}");
    }
    out
}
