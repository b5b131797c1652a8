//! OpenFlow groups (OpenFlow 1.1+ `OFPT_GROUP_MOD`, ovs-actions(7) "Group Actions"): a bridge's
//! group table and the semantics of group mods as `ovs-vswitchd` 3.1 applies them
//! (`ofproto/ofproto.c`: add, modify, add-or-modify, delete, and OpenFlow 1.5's insert and
//! remove bucket), with OVS's errors.
//!
//! A group has a type (`all`, `select`, `indirect`, `fast_failover`), a list of buckets (each
//! with an id, a weight, the port and group whose liveness it watches, and its actions, which
//! run as an OpenFlow action set), and for select groups the selection method of Netronome's
//! group property (`selection_method=hash|dp_hash`, `fields(...)`,
//! `selection_method_param`). A select group without a method uses `dp_hash` when its weights
//! fit in 256 hash values, as OVS's `group_set_selection_method()` decides, and the slow-path
//! hash of the symmetric L4 fields otherwise.
//!
//! Counters are atomics: translation credits them under the pipeline's read lock (an upcall's
//! packet, a revalidated megaflow's new packets), so counting never waits for the write lock.
//! A modified group starts its counters again, as OVS's replacement group does; its creation
//! time stays.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::fields::FieldId;
use crate::syntax::{OFPP_ANY, OFPP_CONTROLLER, OFPP_MAX, OfAction};

/// The highest group id a group may have (`OFPG_MAX`).
pub const OFPG_MAX: u32 = 0xffff_ff00;
/// Every group (`OFPG_ALL`): a delete or a statistics request of all.
pub const OFPG_ALL: u32 = 0xffff_fffc;
/// No group (`OFPG_ANY`): a bucket that watches none.
pub const OFPG_ANY: u32 = 0xffff_ffff;
/// The highest bucket id (`OFPG15_BUCKET_MAX`).
pub const BUCKET_MAX: u32 = 0xffff_ff00;
/// Before the first bucket (`OFPG15_BUCKET_FIRST`).
pub const BUCKET_FIRST: u32 = 0xffff_fffd;
/// After the last bucket (`OFPG15_BUCKET_LAST`).
pub const BUCKET_LAST: u32 = 0xffff_fffe;
/// Every bucket (`OFPG15_BUCKET_ALL`); also a bucket whose id is still to be given.
pub const BUCKET_ALL: u32 = 0xffff_ffff;

/// The most hash values a `dp_hash` group spreads its buckets over (OVS's
/// `MAX_SELECT_GROUP_HASH_VALUES`).
pub const MAX_HASH_VALUES: u64 = 256;

/// Most groups of each type, as OVS's group features say (`0xffffff00`).
pub const MAX_GROUPS: usize = 0xffff_ff00;

/// A group's type (`OFPGT11_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupType {
    /// Every bucket, each on a copy of the packet.
    #[default]
    All = 0,
    /// One bucket, chosen by a hash.
    Select = 1,
    /// The one bucket.
    Indirect = 2,
    /// The first live bucket.
    FastFailover = 3,
}

impl GroupType {
    /// The type of wire value `t`.
    pub fn from_wire(t: u8) -> Option<GroupType> {
        Some(match t {
            0 => GroupType::All,
            1 => GroupType::Select,
            2 => GroupType::Indirect,
            3 => GroupType::FastFailover,
            _ => return None,
        })
    }

    /// The word `ovs-ofctl` prints (`ff` for fast failover).
    pub fn name(self) -> &'static str {
        match self {
            GroupType::All => "all",
            GroupType::Select => "select",
            GroupType::Indirect => "indirect",
            GroupType::FastFailover => "ff",
        }
    }
}

/// One bucket of a group (OVS's `struct ofputil_bucket`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bucket {
    /// Its id (OpenFlow 1.5; earlier versions number buckets from 0 in order);
    /// [`BUCKET_ALL`] in a group mod when none was given.
    pub bucket_id: u32,
    /// Its share of a select group's packets (0: never chosen).
    pub weight: u16,
    /// The port whose liveness the bucket's follows ([`OFPP_ANY`]: none).
    pub watch_port: u32,
    /// The group whose liveness the bucket's follows ([`OFPG_ANY`]: none).
    pub watch_group: u32,
    /// Its actions, run as an action set.
    pub actions: Vec<OfAction>,
}

impl Bucket {
    /// A bucket with `actions` and the defaults of a group of type `t`: weight 1 in a select
    /// group, 0 elsewhere, no liveness, no id yet.
    pub fn new(t: GroupType, actions: Vec<OfAction>) -> Bucket {
        Bucket {
            bucket_id: BUCKET_ALL,
            weight: u16::from(t == GroupType::Select),
            watch_port: OFPP_ANY,
            watch_group: OFPG_ANY,
            actions,
        }
    }

    /// Whether the bucket watches a port or a group (OVS's
    /// `ofputil_bucket_has_liveness()`).
    pub fn has_liveness(&self) -> bool {
        self.watch_port != OFPP_ANY || self.watch_group != OFPG_ANY
    }
}

/// The selection method of a select group (Netronome's `NTRT_SELECTION_METHOD` property).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupProps {
    /// `hash`, `dp_hash`, or empty for none.
    pub selection_method: String,
    /// The method's parameter: `hash`'s basis; for `dp_hash`, the algorithm in the high 32 bits
    /// and the basis in the low ones.
    pub selection_method_param: u64,
    /// The fields `hash` hashes, each with its mask (all ones: the whole field), in the field
    /// table's order.
    pub fields: Vec<(FieldId, u128)>,
}

/// What a group description says (`OFPST_GROUP_DESC`): a group without its counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupDesc {
    pub group_id: u32,
    pub group_type: GroupType,
    pub buckets: Vec<Bucket>,
    pub props: GroupProps,
}

/// A group mod's command (`OFPGC11_*`, `OFPGC15_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupCommand {
    Add,
    Modify,
    Delete,
    /// OVS's extension: add, or modify if it exists.
    AddOrMod,
    /// OpenFlow 1.5: insert the mod's buckets.
    InsertBucket,
    /// OpenFlow 1.5: remove a bucket.
    RemoveBucket,
}

impl GroupCommand {
    /// The command of wire value `c`.
    pub fn from_wire(c: u16) -> Option<GroupCommand> {
        Some(match c {
            0 => GroupCommand::Add,
            1 => GroupCommand::Modify,
            2 => GroupCommand::Delete,
            3 => GroupCommand::InsertBucket,
            5 => GroupCommand::RemoveBucket,
            0x8000 => GroupCommand::AddOrMod,
            _ => return None,
        })
    }

    /// Its wire value.
    pub fn wire(self) -> u16 {
        match self {
            GroupCommand::Add => 0,
            GroupCommand::Modify => 1,
            GroupCommand::Delete => 2,
            GroupCommand::InsertBucket => 3,
            GroupCommand::RemoveBucket => 5,
            GroupCommand::AddOrMod => 0x8000,
        }
    }

    /// The word `ovs-ofctl` prints for it (`ADD`, `MOD`, `DEL`, `INSERT_BUCKET`...).
    pub fn name(self) -> &'static str {
        match self {
            GroupCommand::Add => "ADD",
            GroupCommand::Modify => "MOD",
            GroupCommand::Delete => "DEL",
            GroupCommand::AddOrMod => "ADD_OR_MOD",
            GroupCommand::InsertBucket => "INSERT_BUCKET",
            GroupCommand::RemoveBucket => "REMOVE_BUCKET",
        }
    }
}

/// A group mod, whichever way it came (OVS's `struct ofputil_group_mod`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupMod {
    pub command: GroupCommand,
    pub group_id: u32,
    pub group_type: GroupType,
    /// Where buckets are inserted or which is removed ([`BUCKET_FIRST`], [`BUCKET_LAST`],
    /// [`BUCKET_ALL`] or an id).
    pub command_bucket_id: u32,
    pub buckets: Vec<Bucket>,
    pub props: GroupProps,
}

impl GroupMod {
    /// A mod of `command` for `group_id` with nothing else.
    pub fn new(command: GroupCommand, group_id: u32) -> GroupMod {
        GroupMod {
            command,
            group_id,
            group_type: GroupType::All,
            command_bucket_id: BUCKET_ALL,
            buckets: Vec::new(),
            props: GroupProps::default(),
        }
    }

    /// OVS's checks of a decoded group mod (`ofputil_check_group_mod()`): an indirect group
    /// has one bucket, only select groups weigh buckets, only select and fast-failover groups
    /// watch, and every fast-failover bucket watches something.
    pub fn check(&self) -> Result<(), GroupError> {
        if self.group_type == GroupType::Indirect
            && self.command != GroupCommand::Delete
            && self.buckets.len() != 1
        {
            return Err(GroupError::InvalidGroup);
        }
        if self.command == GroupCommand::RemoveBucket && !self.buckets.is_empty() {
            return Err(GroupError::BadBucket);
        }
        for b in &self.buckets {
            if b.weight != 0
                && self.group_type != GroupType::Select
                && self.command != GroupCommand::InsertBucket
            {
                return Err(GroupError::InvalidGroup);
            }
            match self.group_type {
                GroupType::All | GroupType::Indirect if b.has_liveness() => {
                    return Err(GroupError::WatchUnsupported);
                }
                GroupType::FastFailover if !b.has_liveness() => {
                    return Err(GroupError::InvalidGroup);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Why a group mod failed, as OVS's `OFPGMFC_*` errors say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("OFPGMFC_GROUP_EXISTS")]
    GroupExists,
    #[error("OFPGMFC_INVALID_GROUP")]
    InvalidGroup,
    #[error("OFPGMFC_OUT_OF_GROUPS")]
    OutOfGroups,
    #[error("OFPGMFC_BAD_TYPE")]
    BadType,
    #[error("OFPGMFC_BAD_COMMAND")]
    BadCommand,
    #[error("OFPGMFC_BAD_BUCKET")]
    BadBucket,
    #[error("OFPGMFC_BAD_WATCH")]
    BadWatch,
    #[error("OFPGMFC_UNKNOWN_GROUP")]
    UnknownGroup,
    #[error("OFPGMFC_WATCH_UNSUPPORTED")]
    WatchUnsupported,
    #[error("OFPGMFC_BUCKET_EXISTS")]
    BucketExists,
    #[error("OFPGMFC_UNKNOWN_BUCKET")]
    UnknownBucket,
}

/// How a select group picks its bucket (OVS's `enum group_selection_method`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// The slow path hashes the symmetric L4 fields.
    Default,
    /// The slow path hashes the group's fields.
    Hash,
    /// The datapath hashes (`hash(ALG(BASIS))`) and the next pass picks by `dp_hash & mask`.
    DpHash {
        /// `sym_l4` (1) or `l4` (0), as the datapath's hash action names them.
        symmetric: bool,
        basis: u32,
        /// The hash values used, minus one.
        mask: u32,
        /// The bucket (index) of each masked hash value.
        map: Vec<usize>,
    },
}

/// A bucket's or group's packet and byte counters.
#[derive(Debug, Default)]
pub struct Counters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
}

impl Counters {
    fn add(&self, packets: u64, bytes: u64) {
        self.packets.fetch_add(packets, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// (packets, bytes).
    pub fn get(&self) -> (u64, u64) {
        (
            self.packets.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// A group in a bridge's table.
#[derive(Debug)]
pub struct Group {
    pub group_id: u32,
    pub group_type: GroupType,
    pub buckets: Vec<Bucket>,
    pub props: GroupProps,
    pub created: Instant,
    pub modified: Instant,
    /// How a select group picks (`Default` for the other types).
    pub selection: Selection,
    pub counters: Counters,
    /// One per bucket, in order.
    pub bucket_counters: Vec<Counters>,
}

impl Group {
    fn new(gm: &GroupMod, buckets: Vec<Bucket>, now: Instant) -> Group {
        let mut g = Group {
            group_id: gm.group_id,
            group_type: gm.group_type,
            bucket_counters: buckets.iter().map(|_| Counters::default()).collect(),
            buckets,
            props: gm.props.clone(),
            created: now,
            modified: now,
            selection: Selection::Default,
            counters: Counters::default(),
        };
        if g.group_type == GroupType::Select {
            g.selection = selection(&g.buckets, &g.props);
        }
        g
    }

    /// Credits `packets` and `bytes` to the group and to bucket `bucket` (every bucket when
    /// `None`, as OVS credits an `all` group's).
    pub fn credit(&self, bucket: Option<usize>, packets: u64, bytes: u64) {
        self.counters.add(packets, bytes);
        match bucket {
            Some(i) => {
                if let Some(c) = self.bucket_counters.get(i) {
                    c.add(packets, bytes);
                }
            }
            None => self
                .bucket_counters
                .iter()
                .for_each(|c| c.add(packets, bytes)),
        }
    }

    /// What a description of the group says.
    pub fn desc(&self) -> GroupDesc {
        GroupDesc {
            group_id: self.group_id,
            group_type: self.group_type,
            buckets: self.buckets.clone(),
            props: self.props.clone(),
        }
    }

    /// The index of the bucket with id `id`.
    pub fn bucket_index(&self, id: u32) -> Option<usize> {
        self.buckets.iter().position(|b| b.bucket_id == id)
    }
}

/// OVS's choice of a select group's method (`group_set_selection_method()`).
fn selection(buckets: &[Bucket], props: &GroupProps) -> Selection {
    match props.selection_method.as_str() {
        "" => match dp_hash_map(buckets, MAX_HASH_VALUES) {
            Some((mask, map)) => Selection::DpHash {
                symmetric: true,
                basis: 0,
                mask,
                map,
            },
            None => Selection::Default,
        },
        "dp_hash" => match dp_hash_map(buckets, 0) {
            Some((mask, map)) => {
                let alg = props.selection_method_param >> 32;
                Selection::DpHash {
                    // OVS's algorithms: 0 is l4, 1 sym_l4; others fall back to l4.
                    symmetric: alg == 1,
                    basis: props.selection_method_param as u32,
                    mask,
                    map,
                }
            }
            None => Selection::Default,
        },
        "hash" if !props.fields.is_empty() => Selection::Hash,
        _ => Selection::Default,
    }
}

/// Spreads the hash values over the buckets by weight with Webster's (Sainte-Laguë) method:
/// at least 16 values, enough that the lightest bucket gets one, a power of two; `None` when
/// no bucket has weight or more than `max` (or [`MAX_HASH_VALUES`]) values would be needed.
fn dp_hash_map(buckets: &[Bucket], max: u64) -> Option<(u32, Vec<usize>)> {
    let total: u64 = buckets.iter().map(|b| u64::from(b.weight)).sum();
    let min = buckets.iter().map(|b| b.weight).filter(|&w| w > 0).min()?;
    if total == 0 {
        return None;
    }
    let n = total.div_ceil(u64::from(min)).next_power_of_two().max(16);
    if n > MAX_HASH_VALUES || (max != 0 && n > max) {
        return None;
    }
    // Each hash value goes to the bucket with the highest weight / divisor (the first on a
    // tie), whose divisor then grows by two.
    let mut divisor = vec![1u64; buckets.len()];
    let mut map = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let mut best = 0;
        for i in 1..buckets.len() {
            // w_i / d_i > w_best / d_best, without floating point.
            if u64::from(buckets[i].weight) * divisor[best]
                > u64::from(buckets[best].weight) * divisor[i]
            {
                best = i;
            }
        }
        divisor[best] += 2;
        map.push(best);
    }
    Some(((n - 1) as u32, map))
}

/// What a group mod did: the groups it removed (the rules that use them go too).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupModDone {
    pub deleted: Vec<u32>,
    /// Whether the group existed before (an add-or-modify that modified).
    pub existed: bool,
}

/// A bridge's groups, by id.
#[derive(Debug, Default)]
pub struct GroupTable {
    groups: BTreeMap<u32, Group>,
    /// How many groups of each type there are (OVS's `n_groups`), against [`MAX_GROUPS`].
    n_by_type: [usize; 4],
}

impl GroupTable {
    /// The group with id `id`.
    pub fn get(&self, id: u32) -> Option<&Group> {
        self.groups.get(&id)
    }

    /// Every group, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Group> {
        self.groups.values()
    }

    /// How many groups there are.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    fn n_of_type(&self, t: GroupType) -> usize {
        self.n_by_type[t as usize]
    }

    fn insert(&mut self, g: Group) {
        self.n_by_type[g.group_type as usize] += 1;
        if let Some(old) = self.groups.insert(g.group_id, g) {
            self.n_by_type[old.group_type as usize] -= 1;
        }
    }

    fn remove(&mut self, id: u32) {
        if let Some(old) = self.groups.remove(&id) {
            self.n_by_type[old.group_type as usize] -= 1;
        }
    }

    /// Applies a group mod (already [`GroupMod::check`]ed) as OVS's
    /// `ofproto_group_mod_start()` does.
    pub fn apply(&mut self, gm: &GroupMod, now: Instant) -> Result<GroupModDone, GroupError> {
        match gm.command {
            GroupCommand::Add => self.add(gm, now),
            GroupCommand::Modify | GroupCommand::InsertBucket | GroupCommand::RemoveBucket => {
                self.modify(gm, now)
            }
            GroupCommand::AddOrMod => {
                if self.groups.contains_key(&gm.group_id) {
                    self.modify(gm, now)
                } else {
                    self.add(gm, now)
                }
            }
            GroupCommand::Delete => {
                let deleted: Vec<u32> = if gm.group_id == OFPG_ALL {
                    self.groups.keys().copied().collect()
                } else if self.groups.contains_key(&gm.group_id) {
                    vec![gm.group_id]
                } else {
                    Vec::new()
                };
                for &id in &deleted {
                    self.remove(id);
                }
                Ok(GroupModDone {
                    existed: !deleted.is_empty(),
                    deleted,
                })
            }
        }
    }

    fn add(&mut self, gm: &GroupMod, now: Instant) -> Result<GroupModDone, GroupError> {
        if self.groups.contains_key(&gm.group_id) {
            return Err(GroupError::GroupExists);
        }
        if gm.group_id > OFPG_MAX {
            return Err(GroupError::InvalidGroup);
        }
        if self.n_of_type(gm.group_type) >= MAX_GROUPS {
            return Err(GroupError::OutOfGroups);
        }
        self.insert(Group::new(gm, numbered(&gm.buckets), now));
        Ok(GroupModDone::default())
    }

    fn modify(&mut self, gm: &GroupMod, now: Instant) -> Result<GroupModDone, GroupError> {
        let old = self
            .groups
            .get(&gm.group_id)
            .ok_or(GroupError::UnknownGroup)?;
        let mut gm = gm.clone();
        // Bucket commands keep the group's type and properties (OVS's EXT-570 rule).
        if matches!(
            gm.command,
            GroupCommand::InsertBucket | GroupCommand::RemoveBucket
        ) {
            gm.group_type = old.group_type;
            gm.props = old.props.clone();
        }
        if gm.group_id > OFPG_MAX {
            return Err(GroupError::InvalidGroup);
        }
        if old.group_type != gm.group_type && self.n_of_type(gm.group_type) >= MAX_GROUPS {
            return Err(GroupError::OutOfGroups);
        }
        let buckets = match gm.command {
            GroupCommand::InsertBucket => {
                insert_buckets(&old.buckets, &gm.buckets, gm.command_bucket_id)?
            }
            GroupCommand::RemoveBucket => remove_bucket(&old.buckets, gm.command_bucket_id)?,
            _ => numbered(&gm.buckets),
        };
        let mut g = Group::new(&gm, buckets, now);
        g.created = old.created;
        self.insert(g);
        Ok(GroupModDone {
            deleted: Vec::new(),
            existed: true,
        })
    }
}

/// A mod's buckets with ids where they had none: OpenFlow 1.1-1.4's buckets number from 0 in
/// order; a 1.5 bucket without an id (only from the text syntax) takes the lowest id no later
/// bucket of the mod has, as `ovs-ofctl` gives them.
fn numbered(buckets: &[Bucket]) -> Vec<Bucket> {
    let mut out: Vec<Bucket> = buckets.to_vec();
    for i in 0..out.len() {
        if out[i].bucket_id <= BUCKET_MAX {
            continue;
        }
        let taken: Vec<u32> = out
            .iter()
            .enumerate()
            .filter(|&(j, b)| j != i && b.bucket_id <= BUCKET_MAX)
            .map(|(_, b)| b.bucket_id)
            .collect();
        out[i].bucket_id = (0..=BUCKET_MAX).find(|id| !taken.contains(id)).unwrap_or(0);
    }
    out
}

/// OVS's `copy_buckets_for_insert_bucket()`: the new buckets go before the first, after the
/// last, or after the bucket with the given id (which must exist); no id may repeat.
fn insert_buckets(old: &[Bucket], new: &[Bucket], at: u32) -> Result<Vec<Bucket>, GroupError> {
    let pos = match at {
        BUCKET_FIRST => 0,
        BUCKET_LAST | BUCKET_ALL => old.len(),
        id => {
            old.iter()
                .position(|b| b.bucket_id == id)
                .ok_or(GroupError::UnknownBucket)?
                + 1
        }
    };
    let new = numbered(new);
    let mut ids: Vec<u32> = old.iter().chain(&new).map(|b| b.bucket_id).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        return Err(GroupError::BucketExists);
    }
    let mut out = old[..pos].to_vec();
    out.extend(new);
    out.extend_from_slice(&old[pos..]);
    Ok(out)
}

/// OVS's `copy_buckets_for_remove_bucket()`: all, the first, the last, or the bucket with the
/// given id (which must exist).
fn remove_bucket(old: &[Bucket], which: u32) -> Result<Vec<Bucket>, GroupError> {
    let skip = match which {
        BUCKET_ALL => return Ok(Vec::new()),
        BUCKET_FIRST => (!old.is_empty()).then_some(0),
        BUCKET_LAST => old.len().checked_sub(1),
        id => Some(
            old.iter()
                .position(|b| b.bucket_id == id)
                .ok_or(GroupError::UnknownBucket)?,
        ),
    };
    Ok(old
        .iter()
        .enumerate()
        .filter(|&(i, _)| Some(i) != skip)
        .map(|(_, b)| b.clone())
        .collect())
}

/// Whether a bucket's `watch_port` is one a bucket may watch (a port, `ANY` or
/// `CONTROLLER`), as `ovs-ofctl` checks it.
pub fn valid_watch_port(p: u32) -> bool {
    p < OFPP_MAX || p == OFPP_ANY || p == OFPP_CONTROLLER
}

/// The groups `actions` send to, nested actions included.
pub fn groups_used(actions: &[OfAction], out: &mut Vec<u32>) {
    for a in actions {
        match a {
            OfAction::Group(g) => out.push(*g),
            OfAction::Clone(inner) | OfAction::WriteActions(inner) => groups_used(inner, out),
            OfAction::Ct(ct) => groups_used(&ct.actions, out),
            _ => {}
        }
    }
}

/// Whether `actions` send to group `g` (the `out_group` filter of flow mods and flow
/// statistics).
pub fn uses_group(actions: &[OfAction], g: u32) -> bool {
    let mut used = Vec::new();
    groups_used(actions, &mut used);
    used.contains(&g)
}

/// The first group `actions` send to that `table` does not have (OVS refuses such a flow
/// with `OFPBAC_BAD_OUT_GROUP`).
pub fn missing_group(table: &GroupTable, actions: &[OfAction]) -> Option<u32> {
    let mut used = Vec::new();
    groups_used(actions, &mut used);
    used.into_iter().find(|g| table.get(*g).is_none())
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
