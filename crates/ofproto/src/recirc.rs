//! Recirculation ids and the frozen translation state they stand for (OVS's
//! `ofproto-dpif-rid.c`).
//!
//! When translation must continue after the datapath has done something the current pass
//! cannot see (conntrack, for `ct(table=N)`), it *freezes* what the rest of the pipeline needs
//! (bridge, table to resume at, input port, registers and metadata, tunnel metadata, whether
//! conntrack ran) and asks the datapath to `recirc(ID)`: the packet comes back as a new pass
//! with `recirc_id=ID`, whose upcall *thaws* the state and resumes at that table.
//!
//! Ids are interned: the same frozen state always gets the same id, so the megaflows and EMC
//! entries of both passes stay stable across upcalls and revalidation. Ids start at 1 (0 is a
//! packet's first pass) and count up; a freed id is not handed out again until the 32-bit space
//! wraps.
//!
//! Lifetime: OVS reference-counts an id from every datapath flow whose translation made it
//! and frees it a grace period after the last reference goes. Here the revalidator tells the
//! table which ids the installed megaflows mention ([`RecircIds::sweep`]); an id no megaflow
//! mentions and no translation used for [`RECIRC_GRACE`] is freed. The table is bounded
//! ([`RecircIds::DEFAULT_CAPACITY`]): when it is full, allocation fails, is counted, and the
//! translation drops the packet, as OVS does when it cannot allocate an id.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::pipekey::PipeMeta;
use crate::syntax::OfAction;

/// How long an id no megaflow mentions is kept after its last use, so that packets still in
/// flight between two passes (or waiting for an upcall) find their state.
pub const RECIRC_GRACE: Duration = Duration::from_secs(2);

/// What translation needs to resume after a recirculation (OVS's `struct frozen_state` with
/// the parts this translation has: no action set, stack, mirrors or frozen actions exist here).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FrozenState {
    /// The bridge to resume in, by name (bridges are not renumbered, but may go).
    pub bridge: String,
    /// The table to resume at.
    pub table: u8,
    /// The OpenFlow input port as the pipeline had it (a patch port's peer, a resubmit's).
    pub in_port: u32,
    /// Registers and `metadata`.
    pub meta: PipeMeta,
    /// The tunnel metadata the pipeline had (with GENEVE options in their `tun_metadata`
    /// slots), [`TUNNEL_BYTES`] bytes; `None` when the packet had no tunnel.
    pub tunnel: Option<Box<[u8]>>,
    /// Conntrack ran before the freeze: the next pass's conntrack fields are valid.
    pub conntracked: bool,
    /// The actions the next pass runs in place of a lookup in `table` (OVS's frozen
    /// `ofpacts`): the rest of the action lists that were running when translation froze, the
    /// innermost first. Empty for a fork that resumes with a table lookup (`ct(table=N)`).
    pub actions: Vec<FrozenAction>,
    /// The data stack of `push:` and `pop:` (OVS freezes it too).
    pub stack: Vec<u8>,
    /// The action set (OVS freezes it too).
    pub action_set: Vec<OfAction>,
    /// For a packet-in, the `controller` action's user data (OVS's frozen `userdata`).
    pub userdata: Vec<u8>,
    /// The mirrors that have already copied the packet (OVS freezes them too).
    pub mirrors: u32,
    /// The actions are an `OFPT_PACKET_OUT`'s: translated with no rule (cookie all ones) and
    /// with packet-ins of reason `OFPR_PACKET_OUT` (OVS's `in_packet_out`).
    pub packet_out: bool,
}

/// One of the actions frozen for the next pass.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FrozenAction {
    /// An OpenFlow action, run as it would have run.
    Of(OfAction),
    /// The table and cookie of the rule whose actions follow (OVS's `unroll_xlate`): what a
    /// packet-in or a `resubmit` relative to the current table sees.
    Unroll { table: u8, cookie: u64 },
}

/// The key byte ranges of tunnel metadata (offset, length): tunnel id, IPv4 endpoints, TOS,
/// TTL, flags, option length and UDP ports; VXLAN GBP; IPv6 endpoints; GENEVE options.
pub const TUNNEL_RANGES: [(usize, usize); 4] = [
    (48, 24),
    (89, 3),
    (192, 32),
    (flow::key::GENEVE_OPTS_OFS, flow::key::GENEVE_OPTS_MAX),
];

/// Total length of [`TUNNEL_RANGES`].
pub const TUNNEL_BYTES: usize = 24 + 3 + 32 + flow::key::GENEVE_OPTS_MAX;

/// The tunnel metadata of `k` ([`TUNNEL_RANGES`]), or `None` when it has no tunnel.
pub fn tunnel_snapshot(k: &flow::FlowWords) -> Option<Box<[u8]>> {
    let mut out = vec![0u8; TUNNEL_BYTES];
    let mut at = 0;
    for (ofs, len) in TUNNEL_RANGES {
        k.bytes_at(ofs, &mut out[at..at + len]);
        at += len;
    }
    out.iter().any(|&b| b != 0).then(|| out.into_boxed_slice())
}

/// Writes tunnel metadata taken by [`tunnel_snapshot`] into `k` (zeros for `None`).
pub fn tunnel_restore(k: &mut flow::FlowWords, t: Option<&[u8]>) {
    let zero = [0u8; TUNNEL_BYTES];
    let t = t.unwrap_or(&zero);
    let mut at = 0;
    for (ofs, len) in TUNNEL_RANGES {
        k.set_bytes_at(ofs, &t[at..at + len]);
        at += len;
    }
}

struct Entry {
    state: Arc<FrozenState>,
    /// Last time a translation made or thawed it, or a sweep found a megaflow mentioning it.
    used: Instant,
}

struct Inner {
    by_state: HashMap<Arc<FrozenState>, u32>,
    by_id: HashMap<u32, Entry>,
    /// The next id to try.
    next: u32,
}

/// The recirculation id pool: frozen states interned to ids.
pub struct RecircIds {
    inner: Mutex<Inner>,
    capacity: usize,
    alloc_failures: AtomicU64,
    unknown: AtomicU64,
    freed: AtomicU64,
}

/// The pool's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecircStats {
    /// Ids allocated now.
    pub ids: usize,
    /// Allocations refused because the pool was full (the packets were dropped).
    pub alloc_failures: u64,
    /// Passes that arrived with an id no state has (dropped).
    pub unknown_ids: u64,
    /// Ids freed by sweeps.
    pub freed: u64,
}

impl Default for RecircIds {
    fn default() -> Self {
        Self::with_capacity(Self::DEFAULT_CAPACITY)
    }
}

impl RecircIds {
    /// Most ids allocated at once by default: more than the datapath's default flow limit
    /// (200 000 megaflows per PMD), each of which mentions at most a few ids.
    pub const DEFAULT_CAPACITY: usize = 1 << 18;

    /// A pool of at most `capacity` ids.
    pub fn with_capacity(capacity: usize) -> Self {
        RecircIds {
            inner: Mutex::new(Inner {
                by_state: HashMap::new(),
                by_id: HashMap::new(),
                next: 1,
            }),
            capacity,
            alloc_failures: AtomicU64::new(0),
            unknown: AtomicU64::new(0),
            freed: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The id of `state`, allocating one if the state is new; `None` (counted) when the pool
    /// is full.
    pub fn intern(&self, state: FrozenState) -> Option<u32> {
        let now = Instant::now();
        let mut g = self.lock();
        if let Some(&id) = g.by_state.get(&state) {
            if let Some(e) = g.by_id.get_mut(&id) {
                e.used = now;
            }
            return Some(id);
        }
        if g.by_id.len() >= self.capacity {
            self.alloc_failures.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        // Ids count up, skipping 0 and any still in use after a wrap.
        let mut id = g.next;
        while id == 0 || g.by_id.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        g.next = id.wrapping_add(1);
        let state = Arc::new(state);
        g.by_state.insert(state.clone(), id);
        g.by_id.insert(id, Entry { state, used: now });
        Some(id)
    }

    /// The frozen state of `id`; an unknown id is counted.
    pub fn thaw(&self, id: u32) -> Option<Arc<FrozenState>> {
        let mut g = self.lock();
        match g.by_id.get_mut(&id) {
            Some(e) => {
                e.used = Instant::now();
                Some(e.state.clone())
            }
            None => {
                self.unknown.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// The frozen state of `id`, without counting or touching it (for display).
    pub fn get(&self, id: u32) -> Option<Arc<FrozenState>> {
        self.lock().by_id.get(&id).map(|e| e.state.clone())
    }

    /// Frees the ids that no megaflow mentions (`in_use` are those that some do) and that no
    /// translation used for [`RECIRC_GRACE`]; returns how many went.
    pub fn sweep(&self, in_use: &HashSet<u32>, now: Instant) -> usize {
        let mut g = self.lock();
        let mut gone = Vec::new();
        for (&id, e) in g.by_id.iter_mut() {
            if in_use.contains(&id) {
                e.used = now;
            } else if now.saturating_duration_since(e.used) >= RECIRC_GRACE {
                gone.push(id);
            }
        }
        for id in &gone {
            if let Some(e) = g.by_id.remove(id) {
                g.by_state.remove(&e.state);
            }
        }
        self.freed.fetch_add(gone.len() as u64, Ordering::Relaxed);
        gone.len()
    }

    /// The counters.
    pub fn stats(&self) -> RecircStats {
        RecircStats {
            ids: self.lock().by_id.len(),
            alloc_failures: self.alloc_failures.load(Ordering::Relaxed),
            unknown_ids: self.unknown.load(Ordering::Relaxed),
            freed: self.freed.load(Ordering::Relaxed),
        }
    }
}

/// The recirculation ids a datapath action list mentions (`recirc(ID)`, also inside `clone`,
/// `sample`, `check_pkt_len` and `dec_ttl`, and the frozen state of a `controller(...)`
/// cookie, which its packet-ins read).
pub fn ids_in_actions(actions: &[flow::odp::Action], out: &mut HashSet<u32>) {
    use flow::odp::Action;
    for a in actions {
        match a {
            Action::Recirc(id) => {
                out.insert(*id);
            }
            Action::Clone(sub) | Action::DecTtl(sub) | Action::Sample { actions: sub, .. } => {
                ids_in_actions(sub, out)
            }
            Action::CheckPktLen { gt, le, .. } => {
                ids_in_actions(gt, out);
                ids_in_actions(le, out);
            }
            Action::Userspace(u) => {
                if let flow::odp::UserCookie::Text(t) = &u.cookie
                    && let Some(id) = controller_recirc_id(t)
                {
                    out.insert(id);
                }
            }
            _ => {}
        }
    }
}

/// The `recirc_id` of a `controller(...)` cookie's text.
fn controller_recirc_id(cookie: &str) -> Option<u32> {
    let inner = cookie.strip_prefix("controller(")?;
    inner
        .split([',', ')'])
        .find_map(|kv| kv.strip_prefix("recirc_id="))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_controller_cookie_keeps_its_frozen_state() {
        assert_eq!(
            controller_recirc_id(
                "controller(reason=1,dont_send=0,continuation=0,recirc_id=7,max_len=9)"
            ),
            Some(7)
        );
        assert_eq!(controller_recirc_id("slow_path(match)"), None);
    }

    fn state(table: u8, reg0: u32) -> FrozenState {
        let mut meta = PipeMeta::default();
        meta.regs[0] = reg0;
        FrozenState {
            bridge: "br0".into(),
            table,
            in_port: 1,
            meta,
            tunnel: None,
            conntracked: true,
            actions: Vec::new(),
            stack: Vec::new(),
            action_set: Vec::new(),
            userdata: Vec::new(),
            mirrors: 0,
            packet_out: false,
        }
    }

    #[test]
    fn the_same_state_gets_the_same_id_and_ids_start_at_one() {
        let ids = RecircIds::default();
        assert_eq!(ids.intern(state(1, 0)), Some(1));
        assert_eq!(ids.intern(state(2, 0)), Some(2));
        assert_eq!(ids.intern(state(1, 0)), Some(1));
        assert_eq!(ids.intern(state(1, 7)), Some(3));
        assert_eq!(ids.thaw(2).unwrap().table, 2);
        assert!(ids.thaw(9).is_none());
        let s = ids.stats();
        assert_eq!((s.ids, s.unknown_ids, s.alloc_failures), (3, 1, 0));
    }

    #[test]
    fn a_full_pool_refuses_and_counts() {
        let ids = RecircIds::with_capacity(2);
        assert!(ids.intern(state(1, 1)).is_some());
        assert!(ids.intern(state(1, 2)).is_some());
        assert_eq!(ids.intern(state(1, 3)), None);
        // A known state still gets its id.
        assert_eq!(ids.intern(state(1, 2)), Some(2));
        assert_eq!(ids.stats().alloc_failures, 1);
    }

    #[test]
    fn sweeps_free_unused_ids_after_the_grace_period_and_ids_are_not_reused() {
        let ids = RecircIds::default();
        let a = ids.intern(state(1, 1)).unwrap();
        let b = ids.intern(state(1, 2)).unwrap();
        let now = Instant::now();
        // Within the grace period nothing goes.
        assert_eq!(ids.sweep(&HashSet::new(), now), 0);
        // Later, the id a megaflow mentions stays and the other goes.
        let later = now + RECIRC_GRACE + Duration::from_millis(1);
        assert_eq!(ids.sweep(&HashSet::from([a]), later), 1);
        assert!(ids.get(a).is_some() && ids.get(b).is_none());
        // The freed state comes back with a new id.
        assert_eq!(ids.intern(state(1, 2)), Some(3));
        assert_eq!(ids.stats().freed, 1);
    }

    #[test]
    fn ids_are_found_in_nested_actions() {
        let acts = flow::odp::parse_actions(
            "ct,recirc(0x1),clone(recirc(0x2)),check_pkt_len(size=100,gt(recirc(3)),le(drop))",
            &mut flow::odp::PortNames::new(),
        )
        .unwrap();
        let mut ids = HashSet::new();
        ids_in_actions(&acts, &mut ids);
        assert_eq!(ids, HashSet::from([1, 2, 3]));
    }

    #[test]
    fn tunnel_metadata_round_trips() {
        let mut k = flow::FlowKey::new();
        assert!(tunnel_snapshot(&k).is_none());
        k.set_tun_id(5)
            .set_tun_ipv4_dst(std::net::Ipv4Addr::new(10, 0, 0, 1))
            .set_tun_gbp_id(7);
        let t = tunnel_snapshot(&k).unwrap();
        let mut k2 = flow::FlowKey::new();
        k2.set_nw_src(std::net::Ipv4Addr::new(1, 2, 3, 4));
        tunnel_restore(&mut k2, Some(&t));
        assert_eq!(
            (k2.tun_id(), k2.tun_ipv4_dst(), k2.tun_gbp_id()),
            (5, std::net::Ipv4Addr::new(10, 0, 0, 1), 7)
        );
        assert_eq!(k2.nw_src(), std::net::Ipv4Addr::new(1, 2, 3, 4));
        tunnel_restore(&mut k2, None);
        assert_eq!(k2.tun_id(), 0);
    }
}
