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
use crate::bridge::{N_TABLES, Rule};
use crate::classifier::{RuleId, VERSION_NEVER, Version};
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
    /// An add with `check_overlap` overlaps a rule of its priority (`OFPFMFC_OVERLAP`).
    Overlap,
}

impl fmt::Display for FlowModError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FlowModError::NoBridge => "no such bridge",
            FlowModError::BadTableId => "table id out of range",
            FlowModError::Overlap => "the flow overlaps a flow of the same priority",
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
        let mut p = self.of.write();
        let b = p.bridge_mut(&self.bridge).ok_or(FlowModError::NoBridge)?;
        let v = self.version;
        let now = Instant::now();
        match op {
            FlowModOp::Add => {
                let t = usize::from(spec.table);
                if t >= N_TABLES {
                    return Err(FlowModError::BadTableId);
                }
                if spec.flags.0 & FlowModFlags::CHECK_OVERLAP != 0 && b.overlaps_in(spec, v) {
                    return Err(FlowModError::Overlap);
                }
                if let Some(old) = b.tables[t].find_exact_in(&spec.match_, spec.priority, v) {
                    b.tables[t].hide_in(old, v);
                    self.staged.push(Staged::Hidden(t, old));
                }
                let rule = Rule::from_spec(spec, now);
                let id = b.insert_rule(t, spec.match_.clone(), spec.priority, rule, v);
                self.staged.push(Staged::Added(t, id));
            }
            FlowModOp::Modify { strict } => {
                for (t, id) in b.select_in(spec, strict, v) {
                    let (m, priority, old) = b.tables[t].get(id).expect("selected rules exist");
                    let (m, mut rule) = (m.clone(), old.clone());
                    rule.actions = spec.actions.clone();
                    rule.modified = now;
                    b.tables[t].hide_in(id, v);
                    self.staged.push(Staged::Hidden(t, id));
                    let new = b.insert_rule(t, m, priority, rule, v);
                    self.staged.push(Staged::Added(t, new));
                }
            }
            FlowModOp::Delete { strict } => {
                for (t, id) in b.select_in(spec, strict, v) {
                    b.tables[t].hide_in(id, v);
                    self.staged.push(Staged::Hidden(t, id));
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
            for s in staged {
                if let Staged::Hidden(t, id) = s {
                    b.remove_rule(t, id);
                }
            }
        }
        drop(p);
        self.of.changed();
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
                Staged::Added(t, id) => b.remove_rule(t, id),
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
