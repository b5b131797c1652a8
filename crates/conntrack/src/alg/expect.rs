//! The expectation table of the ALGs (OVS's `alg_expectations`, Linux's
//! `nf_conntrack_expect`): the data connections that a helper read the announcement of and
//! that have not started yet. A new connection's first packet looks itself up here
//! ([`Expectations::find`]) and, found, is `+rel` to the connection that announced it; its
//! commit takes the expectation out ([`Expectations::take_for`]).
//!
//! An expectation is keyed by the data connection's tuple without its source port
//! ([`ExpKey`]): a server's data port is 20 by custom only, a client's is ephemeral. The table
//! is bounded in all ([`DEFAULT_MAX_EXPECTATIONS`]) and per parent ([`MAX_PER_PARENT`]), an
//! expectation lives [`EXPECT_TIMEOUT_MS`] at most, and every one goes with its parent.

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use super::Helper;
use crate::key::Tuple;

/// How long an unused expectation lives (Linux's FTP and TFTP helpers: 5 minutes).
pub const EXPECT_TIMEOUT_MS: u64 = 300_000;

/// Default bound of the expectation table.
pub const DEFAULT_MAX_EXPECTATIONS: usize = 4096;

/// Expectations one parent may have pending; a new one beyond drops the parent's oldest.
pub const MAX_PER_PARENT: usize = 8;

/// What a data connection's first packet looks like: its tuple without the source port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExpKey {
    pub zone: u16,
    pub v6: bool,
    pub proto: u8,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub dport: u16,
}

impl ExpKey {
    /// The key a packet of tuple `t` would find.
    pub fn of(t: &Tuple) -> ExpKey {
        ExpKey {
            zone: t.zone,
            v6: t.v6,
            proto: t.proto,
            src: t.src,
            dst: t.dst,
            dport: t.dport,
        }
    }
}

/// An address (and, when it moves, port) a data connection's side is translated to.
pub type NatTo = ([u8; 16], Option<u16>);

/// The translation a data connection gets when committed with `nat`: the counterpart of its
/// parent's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpNat {
    /// Its source becomes this (its reply's destination).
    pub src: Option<NatTo>,
    /// Its destination becomes this (its reply's source).
    pub dst: Option<NatTo>,
}

/// A data connection an ALG expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub key: ExpKey,
    /// The parent's original tuple (a related connection's `ct_orig_tuple`), id, mark, label.
    pub parent: Tuple,
    pub parent_id: u32,
    pub mark: u32,
    pub label: u128,
    pub helper: Helper,
    pub nat: ExpNat,
    /// Expiry on [`crate::now_ms`]'s clock.
    pub expires: u64,
}

impl Expectation {
    /// The reply tuple of the data connection whose first packet has tuple `t`, when committed
    /// with `nat`.
    pub fn nat_reply(&self, t: &Tuple) -> Tuple {
        let mut r = t.reverse();
        if let Some((a, p)) = self.nat.dst {
            r.src = a;
            if let Some(p) = p {
                r.sport = p;
            }
        }
        if let Some((a, p)) = self.nat.src {
            r.dst = a;
            if let Some(p) = p {
                r.dport = p;
            }
        }
        r
    }
}

/// Counters of the ALGs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum AlgCounter {
    /// Expectations recorded.
    Created,
    /// An announcement repeated for a pending expectation (its expiry moved).
    Refreshed,
    /// Expectations a committed data connection used.
    Used,
    /// Expectations refused: the table was full.
    Refused,
    /// Pending expectations dropped for a newer one of the same parent.
    Evicted,
    /// Expectations that were never used.
    Expired,
    /// Expectations dropped because their parent went.
    Orphaned,
    /// Malformed announcements (packet `+inv`).
    BadMessage,
    /// Announcements cut by a segment boundary (ignored).
    Incomplete,
}

impl AlgCounter {
    pub const COUNT: usize = 9;
    pub const ALL: [AlgCounter; Self::COUNT] = [
        AlgCounter::Created,
        AlgCounter::Refreshed,
        AlgCounter::Used,
        AlgCounter::Refused,
        AlgCounter::Evicted,
        AlgCounter::Expired,
        AlgCounter::Orphaned,
        AlgCounter::BadMessage,
        AlgCounter::Incomplete,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AlgCounter::Created => "alg_exp_created",
            AlgCounter::Refreshed => "alg_exp_refreshed",
            AlgCounter::Used => "alg_exp_used",
            AlgCounter::Refused => "alg_exp_refused",
            AlgCounter::Evicted => "alg_exp_evicted",
            AlgCounter::Expired => "alg_exp_expired",
            AlgCounter::Orphaned => "alg_exp_orphaned",
            AlgCounter::BadMessage => "alg_bad_message",
            AlgCounter::Incomplete => "alg_incomplete",
        }
    }
}

/// A snapshot of the ALG counters and the expectations pending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlgStats {
    /// By [`AlgCounter::ALL`] order.
    pub counts: [u64; AlgCounter::COUNT],
    pub pending: usize,
}

impl AlgStats {
    pub fn get(&self, c: AlgCounter) -> u64 {
        self.counts[c as usize]
    }
}

/// What [`Expectations::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    New,
    /// The same parent's pending expectation of the key was refreshed.
    Refreshed,
    /// Another parent's expectation holds the key; it is kept (as OVS does).
    Taken,
    /// The table is full.
    Refused,
}

#[derive(Default)]
struct ExpTable {
    map: HashMap<ExpKey, Expectation>,
    /// Each parent's pending keys, oldest first.
    by_parent: HashMap<u32, Vec<ExpKey>>,
}

impl ExpTable {
    fn unlink(&mut self, e: &Expectation) {
        if let Some(v) = self.by_parent.get_mut(&e.parent_id) {
            v.retain(|k| *k != e.key);
            if v.is_empty() {
                self.by_parent.remove(&e.parent_id);
            }
        }
    }

    fn remove(&mut self, key: &ExpKey) -> Option<Expectation> {
        let e = self.map.remove(key)?;
        self.unlink(&e);
        Some(e)
    }
}

/// The expectation table, shared by all threads. A lookup of a new connection's tuple costs
/// one relaxed load while the table is empty (the usual case); otherwise a read lock, taken
/// only on the path of packets that start connections.
pub struct Expectations {
    max: AtomicUsize,
    len: AtomicUsize,
    table: RwLock<ExpTable>,
    counters: [AtomicU64; AlgCounter::COUNT],
}

impl Default for Expectations {
    fn default() -> Self {
        Self::new()
    }
}

impl Expectations {
    pub fn new() -> Expectations {
        Expectations {
            max: AtomicUsize::new(DEFAULT_MAX_EXPECTATIONS),
            len: AtomicUsize::new(0),
            table: RwLock::new(ExpTable::default()),
            counters: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Changes the bound (pending expectations over it stay until used or expired).
    pub fn set_max(&self, n: usize) {
        self.max.store(n, Relaxed);
    }

    pub fn max(&self) -> usize {
        self.max.load(Relaxed)
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len.load(Relaxed) == 0
    }

    pub fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    pub fn count(&self, c: AlgCounter) {
        self.counters[c as usize].fetch_add(1, Relaxed);
    }

    fn sync_len(&self, t: &ExpTable) {
        self.len.store(t.map.len(), Relaxed);
    }

    /// Records `e`, within the bounds.
    pub fn insert(&self, e: Expectation, now: u64) -> Inserted {
        let mut t = self.table.write().unwrap();
        if let Some(old) = t.map.get_mut(&e.key) {
            if old.parent_id == e.parent_id && old.parent == e.parent {
                *old = e;
                self.count(AlgCounter::Refreshed);
                return Inserted::Refreshed;
            }
            if old.expires > now {
                return Inserted::Taken;
            }
            let old = *old;
            t.remove(&old.key);
            self.count(AlgCounter::Expired);
        }
        if t.map.len() >= self.max.load(Relaxed) {
            // Full: make room from the expired first.
            let dead: Vec<ExpKey> = t
                .map
                .values()
                .filter(|x| x.expires <= now)
                .map(|x| x.key)
                .collect();
            for k in &dead {
                t.remove(k);
                self.count(AlgCounter::Expired);
            }
            if t.map.len() >= self.max.load(Relaxed) {
                self.sync_len(&t);
                self.count(AlgCounter::Refused);
                return Inserted::Refused;
            }
        }
        let mine = t.by_parent.entry(e.parent_id).or_default();
        mine.push(e.key);
        let oldest = (mine.len() > MAX_PER_PARENT).then(|| mine[0]);
        if let Some(k) = oldest {
            t.remove(&k);
            self.count(AlgCounter::Evicted);
        }
        t.map.insert(e.key, e);
        self.sync_len(&t);
        self.count(AlgCounter::Created);
        Inserted::New
    }

    /// The pending expectation a packet of tuple `t` finds (a copy; it stays pending).
    #[inline]
    pub fn find(&self, t: &Tuple, now: u64) -> Option<Expectation> {
        if self.is_empty() {
            return None;
        }
        let tb = self.table.read().unwrap();
        tb.map
            .get(&ExpKey::of(t))
            .filter(|e| e.expires > now)
            .copied()
    }

    /// Takes the expectation a packet of tuple `t` finds out of the table: its data connection
    /// is committed.
    pub fn take_for(&self, t: &Tuple, now: u64) -> Option<Expectation> {
        if self.is_empty() {
            return None;
        }
        let mut tb = self.table.write().unwrap();
        let e = tb.remove(&ExpKey::of(t));
        self.sync_len(&tb);
        match e {
            Some(e) if e.expires > now => {
                self.count(AlgCounter::Used);
                Some(e)
            }
            Some(_) => {
                self.count(AlgCounter::Expired);
                None
            }
            None => None,
        }
    }

    /// Drops the expectations of parent `id` (it went); returns how many.
    pub fn remove_parent(&self, id: u32) -> usize {
        if self.is_empty() {
            return 0;
        }
        let mut t = self.table.write().unwrap();
        let keys = t.by_parent.remove(&id).unwrap_or_default();
        for k in &keys {
            t.map.remove(k);
            self.count(AlgCounter::Orphaned);
        }
        self.sync_len(&t);
        keys.len()
    }

    /// Drops the expired expectations and those whose parent is gone (`parent_alive` false);
    /// returns how many. `parent_alive` is called without the table's lock held, so it may
    /// take the connection table's locks.
    pub fn sweep(&self, now: u64, parent_alive: impl Fn(&Expectation) -> bool) -> usize {
        if self.is_empty() {
            return 0;
        }
        let (mut n, live) = {
            let mut t = self.table.write().unwrap();
            let dead: Vec<ExpKey> = t
                .map
                .values()
                .filter(|e| e.expires <= now)
                .map(|e| e.key)
                .collect();
            for k in &dead {
                t.remove(k);
                self.count(AlgCounter::Expired);
            }
            self.sync_len(&t);
            let live: Vec<Expectation> = t.map.values().copied().collect();
            (dead.len(), live)
        };
        let orphans: Vec<Expectation> = live.into_iter().filter(|e| !parent_alive(e)).collect();
        if orphans.is_empty() {
            return n;
        }
        let mut t = self.table.write().unwrap();
        for e in &orphans {
            // Unless another parent's took the key meanwhile.
            if t.map
                .get(&e.key)
                .is_some_and(|x| x.parent_id == e.parent_id)
            {
                t.remove(&e.key);
                self.count(AlgCounter::Orphaned);
                n += 1;
            }
        }
        self.sync_len(&t);
        n
    }

    /// The pending expectations, ordered by key.
    pub fn list(&self) -> Vec<Expectation> {
        let t = self.table.read().unwrap();
        let mut v: Vec<Expectation> = t.map.values().copied().collect();
        v.sort_by_key(|e| {
            (
                e.key.zone,
                e.key.v6,
                e.key.proto,
                e.key.src,
                e.key.dst,
                e.key.dport,
            )
        });
        v
    }

    pub fn stats(&self) -> AlgStats {
        AlgStats {
            counts: std::array::from_fn(|i| self.counters[i].load(Relaxed)),
            pending: self.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alg::test_util::{tuple, v4};
    use crate::key::TCP;

    fn exp(parent_id: u32, dport: u16, expires: u64) -> Expectation {
        let o = tuple(
            v4("10.0.0.1"),
            40000 + parent_id as u16,
            v4("192.0.2.9"),
            21,
            TCP,
        );
        Expectation {
            key: ExpKey {
                dport,
                ..ExpKey::of(&o)
            },
            parent: o,
            parent_id,
            mark: 0,
            label: 0,
            helper: Helper::Ftp,
            nat: ExpNat::default(),
            expires,
        }
    }

    #[test]
    fn table_bounds_and_lifetime() {
        let x = Expectations::new();
        assert!(x.is_empty());
        x.set_max(10);
        // One parent's share is bounded: the oldest goes.
        for p in 0..(MAX_PER_PARENT as u16 + 2) {
            assert_eq!(x.insert(exp(1, 1000 + p, 100), 0), Inserted::New);
        }
        assert_eq!(x.len(), MAX_PER_PARENT);
        assert_eq!(x.stats().get(AlgCounter::Evicted), 2);
        // The same announcement again refreshes (and moves the expiry).
        assert_eq!(x.insert(exp(1, 1009, 200), 0), Inserted::Refreshed);
        // Another parent cannot take a pending key.
        assert_eq!(x.insert(exp(2, 1009, 100), 0), Inserted::Taken);
        // The table's bound refuses.
        assert_eq!(x.insert(exp(2, 1, 100), 0), Inserted::New);
        assert_eq!(x.insert(exp(2, 2, 100), 0), Inserted::New);
        assert_eq!(x.len(), 10);
        assert_eq!(x.insert(exp(3, 3, 100), 0), Inserted::Refused);
        assert_eq!(x.stats().get(AlgCounter::Refused), 1);
        // ... unless some have expired: all but 1009 have at 150.
        assert_eq!(x.insert(exp(3, 3, 300), 150), Inserted::New);
        assert_eq!(x.len(), 2);
        assert_eq!(x.stats().get(AlgCounter::Expired), 9);
        // Lookups: find keeps, take_for removes; the source port is not looked at.
        let data = |dport| Tuple {
            sport: 20,
            dport,
            ..exp(1, 0, 0).parent
        };
        assert_eq!(x.find(&data(1009), 150).map(|e| e.parent_id), Some(1));
        assert_eq!(
            x.find(
                &Tuple {
                    sport: 33,
                    ..data(1009)
                },
                150
            )
            .map(|e| e.parent_id),
            Some(1)
        );
        assert!(x.find(&data(1009), 200).is_none(), "expired");
        assert!(x.take_for(&data(1009), 150).is_some());
        assert!(x.find(&data(1009), 150).is_none());
        assert_eq!(x.stats().get(AlgCounter::Used), 1);
        // A parent's going drops its expectations; sweep drops expired ones and orphans.
        assert_eq!(x.insert(exp(4, 4, 300), 150), Inserted::New);
        assert_eq!(x.insert(exp(5, 5, 300), 150), Inserted::New);
        assert_eq!(x.remove_parent(3), 1);
        assert_eq!(x.sweep(150, |e| e.parent_id != 4), 1);
        assert_eq!(
            x.list().iter().map(|e| e.parent_id).collect::<Vec<_>>(),
            [5]
        );
        assert_eq!(x.sweep(300, |_| true), 1);
        assert!(x.is_empty());
        assert_eq!(x.stats().get(AlgCounter::Orphaned), 2);
    }
}
