//! The connection table, shared by every PMD thread.
//!
//! **Layout.** A connection is reachable by two keys: its original tuple and its reply tuple
//! (the original reversed, after NAT). Both go into a hash table split into [`SHARDS`] shards,
//! each behind its own reader-writer lock, chosen by the key's hash; a connection itself is
//! shared by reference count (`ConnRef`: allocated from a slab on huge pages) with its
//! mutable state behind a mutex. Looking up an existing connection takes one
//! shard's read lock and the connection's mutex, no lock shared by all packets; creating one
//! takes two shards' write locks in turn (never two at once). This is the sharded version of
//! OVS's design (a concurrent hash map read under RCU, a mutex per connection).
//!
//! The rest of the tracker works on this table, each part in its file:
//! - `process`: the per-packet path of `ct()` ([`Conntrack::process_batch`]): a packet's
//!   connection looked up and updated by its protocol's tracker, or started on commit, with
//!   its NAT and its ALG ([`crate::alg`]);
//! - `cache`: a PMD's set-associative cache of recent lookups ([`CtCache`]), prefetched a
//!   burst at a time in a large table, so that the packets of known connections skip the
//!   shard and its lock;
//! - `expiry`: connections wait in expiry queues, one list per timeout ordered by deadline
//!   (OVS's expiration lists), which each PMD works on after its bursts and
//!   [`Conntrack::sweep`] for the idle ones;
//! - `limits`: the global limit (`ct-set-maxconns`, [`DEFAULT_MAXCONNS`]) and the per-zone
//!   ones (`ct-set-limits`) that a commit is counted against;
//! - `timeout_policy`: OVS's timeouts per class ([`TimeoutClass`]), changeable per zone;
//! - `nat`: the choice of a new connection's translation, within at most [`NAT_MAX_TRIES`]
//!   candidates, and the rewrite of its packets ([`NatRewrite`]), which the caller applies.

mod cache;
mod expiry;
mod limits;
mod nat;
mod process;
mod timeout_policy;

pub use cache::{CACHE_WAYS, CtCache};
pub use limits::DEFAULT_MAXCONNS;
pub use nat::{NAT_MAX_TRIES, NatKind, NatRewrite, NatSpec};
pub use process::{CtArgs, CtMeta, CtPacket};
pub use timeout_policy::{Policy, TimeoutClass};

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
    fence,
};
use std::sync::{Arc, Mutex, RwLock};

use crate::alg::{self, Expectations, Helper};
use crate::key::{Invalid, Tuple};
use crate::tcp::TcpConn;
use expiry::{EXPIRY_QUEUES, ExpiryQueue};

/// Shards of the table.
pub const SHARDS: usize = 256;

/// Which protocol a connection tracks, fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    Tcp,
    Udp,
    Icmp,
}

/// What changes only under the connection's lock: TCP's window state, the ALG's state. (The
/// label is written under it too, but kept in the connection: [`Conn::label`].)
#[derive(Debug, Default)]
struct Locked {
    tcp: Option<Box<TcpConn>>,
    /// A related connection's parent, a control connection's sequence adjustment.
    alg: Option<Box<alg::ConnAlg>>,
}

/// One connection. UDP and ICMP packets update it with relaxed atomics only (state, timeout
/// class, expiry); TCP segments take its lock for the window tracker; a commit that changes the
/// mark or label takes it too, so writers are serialized. The label is read without the lock
/// (a sequence lock over its two words: [`Conn::label`]), so a commit that finds the mark and
/// label as it would write them takes no lock at all.
///
/// Laid out so that a UDP or ICMP packet of the original direction reads one cache line: the
/// fields every packet reads and the original tuple come first, and the connection starts a
/// line (its slot in the connections' slab does), with its reference count in the spare bytes
/// of its last line: three lines in all ([`CONNS`]). With a million connections none of them is
/// in the CPU's caches, and what a packet costs is then mostly how many lines it reads.
#[derive(Debug)]
#[repr(C)]
struct Conn {
    /// Expiry, in [`crate::now_ms`] milliseconds.
    expires: AtomicU64,
    mark: AtomicU32,
    /// The period of `now` (milliseconds / 1024, wrapping) in which the expiry was last set
    /// from the policy: a packet of the same class in the same period leaves it as it is
    /// without reading the policy ([`Conn::touch`]).
    refreshed: AtomicU32,
    /// Removed from the table (or about to be); counted out once.
    dead: AtomicBool,
    /// A packet of the reply direction was seen (UDP, ICMP).
    reply_seen: AtomicBool,
    /// The timeout class, as `TimeoutClass as u8`.
    class: AtomicU8,
    /// Whether the label is not zero (its words are read only then).
    labeled: AtomicBool,
    traits: Traits,
    orig: Tuple,
    /// The reply direction's tuple, after NAT.
    reply: Tuple,
    /// The [`crate::state`] NAT bits its packets carry (`SNAT`, `DNAT`): those the commit asked
    /// for, even when the translation changed nothing (OVS's `conn->nat_action`: an all-zero
    /// SNAT that kept the tuple is still `+snat`), and those the tuples show. Set with the
    /// tuples, which do not change after ([`nat::Moved`]).
    nat: u8,
    /// Which sides of the original tuple the translation moved ([`nat::Moved`]).
    moved: nat::Moved,
    id: u32,
    /// The label's sequence: odd while a writer (holding the lock) changes its words.
    label_seq: AtomicU32,
    policy: Arc<Policy>,
    /// The label, low word first: written under the lock ([`Conn::store_label`]).
    label_words: [AtomicU64; 2],
    locked: Mutex<Locked>,
    /// The expiry queue the connection is in ([`Conntrack`]'s `queues`).
    queue: u8,
    /// The deadline of the connection's current entry in its expiry queue: an entry with
    /// another deadline is stale (the connection was queued again since). Last: only expiry
    /// reads it, and a packet whose expiry moved earlier.
    queued: AtomicU64,
}

/// What a connection is, fixed when it starts, in one byte of its first line: the protocol it
/// tracks, its ALG, and whether an expectation made it (`+rel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Traits(u8);

impl Traits {
    const RELATED: u8 = 1 << 4;

    fn new(kind: Kind, helper: Option<Helper>, related: bool) -> Traits {
        // Exhaustive, so that a new helper fails to compile here until `helper` decodes it.
        let h = match helper {
            None => 0,
            Some(Helper::Ftp) => 1,
            Some(Helper::Tftp) => 2,
        };
        Traits(kind as u8 | h << 2 | if related { Self::RELATED } else { 0 })
    }

    #[inline]
    fn kind(self) -> Kind {
        match self.0 & 3 {
            0 => Kind::Tcp,
            1 => Kind::Udp,
            _ => Kind::Icmp,
        }
    }

    #[inline]
    fn helper(self) -> Option<Helper> {
        match self.0 >> 2 & 3 {
            1 => Some(Helper::Ftp),
            2 => Some(Helper::Tftp),
            _ => None,
        }
    }

    #[inline]
    fn related(self) -> bool {
        self.0 & Self::RELATED != 0
    }
}

// What a UDP or ICMP packet of the original direction reads is on the connection's first line
// (the policy only when its expiry is due to move: [`Conn::touch`]); three lines in all, its
// reference count included.
const _: () = assert!(std::mem::offset_of!(Conn, orig) + std::mem::size_of::<Tuple>() <= 64);
// The reply tuple all on the second line, which a reply's prefetch asks for.
const _: () = assert!(std::mem::offset_of!(Conn, reply) >= 64);
const _: () = assert!(std::mem::offset_of!(Conn, reply) + std::mem::size_of::<Tuple>() <= 128);
const _: () = assert!(std::mem::offset_of!(Conn, moved) < 128);
const _: () = assert!(hugemem::slot_bytes::<Conn>() == 192);

/// The slab connections are allocated from, process-wide: past its first few small chunks, on
/// transparent huge pages, so that a packet's connection is rarely a TLB miss however many
/// there are (with 4 KiB pages, a million connections span 47 000 pages).
static CONNS: hugemem::Slab<Conn> = hugemem::Slab::new();

impl hugemem::Slabbed for Conn {
    fn slab() -> &'static hugemem::Slab<Conn> {
        &CONNS
    }
}

/// A shared reference to a connection (as an `Arc`, in the connections' slab).
type ConnRef = hugemem::SlabArc<Conn>;

impl Conn {
    #[inline]
    fn alive(&self, now: u64) -> bool {
        !self.dead.load(Relaxed) && self.expires.load(Relaxed) > now
    }

    fn class(&self) -> TimeoutClass {
        TimeoutClass::ALL[usize::from(self.class.load(Relaxed)) % TimeoutClass::COUNT]
    }

    /// Moves the expiry to `class`'s timeout from `now`, at the first packet of each 1024 ms
    /// period (and when the class changes): a busy connection's line is written about once a
    /// second, not by every packet, and the policy (on the connection's second line) is read
    /// only then. So the expiry lags the connection's last packet by less than 1024 ms, and a
    /// policy's new timeouts reach a connection at its first packet of the next period.
    /// Returns whether the expiry moved earlier (then the connection is queued again:
    /// `expiry::note_expiry`).
    #[inline]
    fn touch(&self, class: TimeoutClass, now: u64) -> bool {
        let period = (now >> 10) as u32;
        if self.class.load(Relaxed) != class as u8 {
            self.class.store(class as u8, Relaxed);
        } else if self.refreshed.load(Relaxed) == period {
            return false;
        }
        self.refreshed.store(period, Relaxed);
        let new = now + self.policy.ms(class);
        let cur = self.expires.load(Relaxed);
        if new != cur {
            self.expires.store(new, Relaxed);
        }
        new < cur
    }

    /// The label, without the lock: its words between two reads of the same even sequence
    /// (a sequence lock); while a writer is at them, under the lock.
    #[inline]
    fn label(&self) -> u128 {
        if !self.labeled.load(Relaxed) {
            return 0;
        }
        let seq = self.label_seq.load(Acquire);
        let v = self.label_held();
        fence(Acquire);
        if seq & 1 == 0 && self.label_seq.load(Relaxed) == seq {
            v
        } else {
            self.label_locked()
        }
    }

    #[cold]
    fn label_locked(&self) -> u128 {
        let _l = self.locked.lock().unwrap();
        self.label_held()
    }

    /// The label's words as they are: the label when the caller holds the lock (or reads
    /// them between two reads of the sequence).
    #[inline]
    fn label_held(&self) -> u128 {
        let [lo, hi] = &self.label_words;
        u128::from(lo.load(Relaxed)) | u128::from(hi.load(Relaxed)) << 64
    }

    /// Writes the label; the caller holds the connection's lock (writers are serialized).
    fn store_label(&self, label: u128) {
        let seq = self.label_seq.load(Relaxed);
        self.label_seq.store(seq.wrapping_add(1), Relaxed);
        fence(Release);
        self.label_words[0].store(label as u64, Relaxed);
        self.label_words[1].store((label >> 64) as u64, Relaxed);
        self.label_seq.store(seq.wrapping_add(2), Release);
        self.labeled.store(label != 0, Relaxed);
    }
}

/// A table entry: a connection, and which of its directions the key is.
#[derive(Clone, Debug)]
struct Entry {
    conn: ConnRef,
    reply: bool,
}

/// Hashes a [`Tuple`] by its own [`Tuple::hash`].
#[derive(Default)]
struct PassHasher(u64);

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// A table key: the tuple with its hash, which the map uses as it is, so that a lookup whose
/// caller already hashed the tuple (every packet's) does not hash it again.
#[derive(Clone, Copy, Debug, Eq)]
struct Key {
    h: u64,
    t: Tuple,
}

impl PartialEq for Key {
    #[inline]
    fn eq(&self, o: &Key) -> bool {
        self.h == o.h && self.t.same(&o.t)
    }
}

impl Key {
    #[inline]
    fn new(t: &Tuple) -> Key {
        Key { h: t.hash(), t: *t }
    }
}

impl std::hash::Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.h);
    }
}

type Map = HashMap<Key, Entry, BuildHasherDefault<PassHasher>>;

/// The shard of a tuple's hash ([`Tuple::hash`]).
#[inline]
pub fn shard_of(h: u64) -> usize {
    (h >> 32) as usize % SHARDS
}

/// Counters, relaxed atomics summed on read.
#[derive(Debug, Default)]
struct Counters {
    invalid: [AtomicU64; Invalid::COUNT],
    tcp_invalid: AtomicU64,
    related_unknown: AtomicU64,
    committed: AtomicU64,
    limit_refused: AtomicU64,
    maxconns_refused: AtomicU64,
    nat_exhausted: AtomicU64,
    insert_conflicts: AtomicU64,
    expired: AtomicU64,
}

/// A snapshot of the tracker's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CtStats {
    /// Packets marked `+inv`, by reason ([`Invalid::ALL`] order).
    pub invalid: [u64; Invalid::COUNT],
    /// TCP segments out of window or with bad flags.
    pub tcp_invalid: u64,
    /// ICMP errors for no known connection.
    pub related_unknown: u64,
    /// Connections committed.
    pub committed: u64,
    /// Commits refused by the global or a zone limit.
    pub limit_refused: u64,
    /// Of those, the commits the global limit refused (OVS's `conntrack_full`, which a zone
    /// limit's refusals do not count).
    pub maxconns_refused: u64,
    /// Commits refused because the NAT range had no free tuple.
    pub nat_exhausted: u64,
    /// Commits lost to a concurrent commit of the same tuple.
    pub insert_conflicts: u64,
    /// Connections removed by expiry.
    pub expired: u64,
}

/// A connection as the management commands show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnInfo {
    pub orig: Tuple,
    pub reply: Tuple,
    pub id: u32,
    pub mark: u32,
    pub label: u128,
    /// Seconds until expiry.
    pub timeout_secs: u64,
    /// TCP state name for `protoinfo=(state=...)`.
    pub tcp_state: Option<&'static str>,
    /// The TCP tracker's state (per-peer states, window scales, flags for `-m`).
    pub tcp: Option<TcpConn>,
    pub class: TimeoutClass,
}

/// The connection table.
pub struct Conntrack {
    shards: Box<[RwLock<Map>]>,
    n_conns: AtomicU32,
    maxconns: AtomicU32,
    zone_count: Box<[AtomicU32]>,
    /// Per-zone limit plus one; 0: none of its own (the default limit applies). A zone's own
    /// limit may be 0: no connection is committed in it (OVS).
    zone_limit: Box<[AtomicU64]>,
    /// Limit of zones without their own; 0: none.
    default_limit: AtomicU32,
    next_id: AtomicU32,
    default_policy: Arc<Policy>,
    zone_policies: RwLock<HashMap<u16, Arc<Policy>>>,
    any_zone_policy: AtomicBool,
    /// Changes of which zones have a policy (PMDs' caches of a zone's policy check it).
    policy_gen: AtomicU64,
    /// TCP sequence checks (`ct-enable-tcp-seq-chk`); off is OVS's "liberal" mode.
    tcp_seq_chk: AtomicBool,
    counters: Counters,
    expectations: Expectations,
    /// Expiry queues, and per queue the connections removed before their turn (their entries
    /// wait there until purged).
    queues: Box<[Mutex<ExpiryQueue>]>,
    removed_early: Box<[AtomicUsize]>,
}

impl Default for Conntrack {
    fn default() -> Self {
        Self::new()
    }
}

impl Conntrack {
    pub fn new() -> Conntrack {
        Conntrack {
            shards: (0..SHARDS).map(|_| RwLock::new(Map::default())).collect(),
            n_conns: AtomicU32::new(0),
            maxconns: AtomicU32::new(DEFAULT_MAXCONNS),
            zone_count: (0..=u16::MAX as usize).map(|_| AtomicU32::new(0)).collect(),
            zone_limit: (0..=u16::MAX as usize).map(|_| AtomicU64::new(0)).collect(),
            default_limit: AtomicU32::new(0),
            next_id: AtomicU32::new(1),
            default_policy: Arc::new(Policy::defaults()),
            zone_policies: RwLock::new(HashMap::new()),
            any_zone_policy: AtomicBool::new(false),
            policy_gen: AtomicU64::new(0),
            tcp_seq_chk: AtomicBool::new(true),
            counters: Counters::default(),
            expectations: Expectations::new(),
            queues: (0..EXPIRY_QUEUES).map(|_| Mutex::default()).collect(),
            removed_early: (0..EXPIRY_QUEUES).map(|_| AtomicUsize::new(0)).collect(),
        }
    }

    /// Puts both of a new connection's keys in the table; fails (taking back what it put)
    /// when either is held by another alive connection.
    fn insert(&self, conn: &ConnRef, now: u64) -> Result<(), ()> {
        use std::collections::hash_map::Entry as Slot;
        // One probe per key: an alive holder refuses; an expired, unswept one is replaced and
        // counted out here.
        let put = |t: &Tuple, reply: bool| -> bool {
            let k = Key::new(t);
            let mut map = self.shards[shard_of(k.h)].write().unwrap();
            let new = Entry {
                conn: conn.clone(),
                reply,
            };
            match map.entry(k) {
                Slot::Occupied(o) if o.get().conn.alive(now) => false,
                Slot::Occupied(mut o) => {
                    let old = o.insert(new);
                    if !old.conn.dead.swap(true, Relaxed) {
                        self.release(old.conn.orig.zone);
                        self.counters.expired.fetch_add(1, Relaxed);
                    }
                    true
                }
                Slot::Vacant(v) => {
                    v.insert(new);
                    true
                }
            }
        };
        if !put(&conn.orig, false) {
            return Err(());
        }
        if conn.reply != conn.orig && !put(&conn.reply, true) {
            self.unlink(&conn.orig, conn);
            return Err(());
        }
        Ok(())
    }

    /// Removes `t`'s entry if it is `conn`'s.
    fn unlink(&self, t: &Tuple, conn: &ConnRef) {
        let k = Key::new(t);
        let mut map = self.shards[shard_of(k.h)].write().unwrap();
        if map.get(&k).is_some_and(|e| ConnRef::ptr_eq(&e.conn, conn)) {
            map.remove(&k);
        }
    }

    /// Takes a connection out of the table and the counts.
    fn remove(&self, conn: &ConnRef) {
        if !conn.dead.swap(true, Relaxed) {
            self.release(conn.orig.zone);
            self.removed_early[usize::from(conn.queue)].fetch_add(1, Relaxed);
        }
        self.unlink(&conn.orig, conn);
        self.unlink(&conn.reply, conn);
        if conn.traits.helper().is_some() {
            self.expectations.remove_parent(conn.id);
        }
    }

    /// Whether the connection that made expectation `e` is still in the table.
    #[cold]
    fn parent_alive(&self, e: &alg::Expectation, now: u64) -> bool {
        let k = Key::new(&e.parent);
        let map = self.shards[shard_of(k.h)].read().unwrap();
        map.get(&k)
            .is_some_and(|x| x.conn.id == e.parent_id && x.conn.alive(now))
    }

    /// The ALGs' expectations: pending ones, counters, bound.
    pub fn expectations(&self) -> &Expectations {
        &self.expectations
    }

    /// Removes connections: all, those of `zone`, or the one whose original tuple (or, when
    /// no zone is given, in any zone) matches `tuple`. Returns how many.
    pub fn flush(&self, zone: Option<u16>, tuple: Option<&dyn Fn(&Tuple) -> bool>) -> usize {
        let mut victims = Vec::new();
        for shard in self.shards.iter() {
            let map = shard.read().unwrap();
            for e in map.values() {
                let c = &e.conn;
                if e.reply || zone.is_some_and(|z| z != c.orig.zone) {
                    continue;
                }
                if tuple.is_some_and(|f| !f(&c.orig)) {
                    continue;
                }
                victims.push(c.clone());
            }
        }
        for c in &victims {
            self.remove(c);
        }
        if !victims.is_empty() {
            for (q, n) in self.queues.iter().zip(self.removed_early.iter()) {
                q.lock().unwrap().purge();
                n.store(0, Relaxed);
            }
        }
        victims.len()
    }

    /// Every alive connection (optionally of one zone), ordered by zone and original tuple.
    pub fn dump(&self, zone: Option<u16>, now: u64) -> Vec<ConnInfo> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let map = shard.read().unwrap();
            for e in map.values() {
                let c = &e.conn;
                if e.reply || !c.alive(now) || zone.is_some_and(|z| z != c.orig.zone) {
                    continue;
                }
                let l = c.locked.lock().unwrap();
                out.push(ConnInfo {
                    orig: c.orig,
                    reply: c.reply,
                    id: c.id,
                    mark: c.mark.load(Relaxed),
                    label: c.label_held(),
                    timeout_secs: c.expires.load(Relaxed).saturating_sub(now) / 1000,
                    tcp_state: l.tcp.as_ref().map(|t| t.state_name()),
                    tcp: l.tcp.as_deref().cloned(),
                    class: c.class(),
                });
            }
        }
        out.sort_by_key(|i| {
            (
                i.orig.zone,
                i.orig.v6,
                i.orig.proto,
                i.orig.src,
                i.orig.dst,
                i.orig.sport,
                i.orig.dport,
                i.id,
            )
        });
        out
    }

    pub fn tcp_seq_chk(&self) -> bool {
        self.tcp_seq_chk.load(Relaxed)
    }

    pub fn set_tcp_seq_chk(&self, on: bool) {
        self.tcp_seq_chk.store(on, Relaxed);
    }

    pub fn stats(&self) -> CtStats {
        let c = &self.counters;
        CtStats {
            invalid: std::array::from_fn(|i| c.invalid[i].load(Relaxed)),
            tcp_invalid: c.tcp_invalid.load(Relaxed),
            related_unknown: c.related_unknown.load(Relaxed),
            committed: c.committed.load(Relaxed),
            limit_refused: c.limit_refused.load(Relaxed),
            maxconns_refused: c.maxconns_refused.load(Relaxed),
            nat_exhausted: c.nat_exhausted.load(Relaxed),
            insert_conflicts: c.insert_conflicts.load(Relaxed),
            expired: c.expired.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind, helper and `+rel` comes back out of the byte it is packed in.
    #[test]
    fn traits_round_trip() {
        for kind in [Kind::Tcp, Kind::Udp, Kind::Icmp] {
            for helper in [None, Some(Helper::Ftp), Some(Helper::Tftp)] {
                for related in [false, true] {
                    let t = Traits::new(kind, helper, related);
                    assert_eq!((t.kind(), t.helper(), t.related()), (kind, helper, related));
                }
            }
        }
    }
}
