//! The connection table, shared by every PMD thread.
//!
//! **Layout.** A connection is reachable by two keys: its original tuple and its reply tuple
//! (the original reversed, after NAT). Both go into a hash table split into [`SHARDS`] shards,
//! each behind its own reader-writer lock, chosen by the key's hash; a connection itself is an
//! `Arc` with its mutable state behind a mutex. Looking up an existing connection takes one
//! shard's read lock and the connection's mutex, no lock shared by all packets; creating one
//! takes two shards' write locks in turn (never two at once). This is the sharded version of
//! OVS's design (a concurrent hash map read under RCU, a mutex per connection).
//!
//! **Expiry.** Each connection holds its expiry time in an atomic, and a lookup ignores an
//! expired connection. Connections also wait in expiry queues, one list per timeout ordered by
//! deadline (OVS's expiration lists): taking out what expired pops the heads of the lists
//! instead of scanning the table, and locks one queue, then one shard at a time, so expiry
//! never stops the table. Each PMD queues its commits into its own queue (one of 16, by its
//! cache) and expires its due connections after each burst ([`Conntrack::process_batch`]), keeping them for its
//! next commits (no allocation, no free in another thread); [`Conntrack::sweep`] does the
//! same for every queue, for PMDs that are idle. A PMD also keeps a set-associative cache of
//! recent lookups ([`CtCache`]), prefetched a burst at a time, so that the packets of known
//! connections skip the shard and its lock.
//!
//! **Limits.** A global limit (`ct-set-maxconns`, OVS's default 3000000) and per-zone limits
//! (`ct-set-limits`, with a default for zones without their own); a commit over a limit is
//! refused and counted, and the packet stays `+new` uncommitted.
//!
//! **Timeouts** are OVS's defaults per class ([`TimeoutClass`]), changeable per zone
//! (timeout policies); a connection keeps the policy of its zone at creation.
//!
//! **NAT** (`nat(src=...)`/`nat(dst=...)` on commit) picks an address and port in the range
//! that makes the reply tuple unique, tries at most [`NAT_MAX_TRIES`] candidates, and refuses
//! the connection (counted, packet `+inv`) when none is free. Later packets of the
//! connection in a `ct(nat)` are translated both ways; the caller applies the rewrite.
//!
//! **ALGs** (`helper=ftp|tftp`, [`crate::alg`]): a connection committed with a helper has its
//! packets read for announcements of data connections, which become expectations; a new
//! connection that an expectation names is `+rel`, related to its parent. Under NAT the FTP
//! helper also rewrites the announced address and the table keeps the sequence adjustment the
//! rewrite calls for ([`NatRewrite::alg`]).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed,
};
use std::sync::{Arc, Mutex, RwLock};

use crate::alg::{self, Expectations, Helper};
use crate::key::{self, ICMP, ICMPV6, Invalid, TCP, Tuple, UDP};
use crate::state::*;
use crate::tcp::{Segment, TcpConn, TcpTimeout, Update};

/// Shards of the table.
pub const SHARDS: usize = 256;

/// OVS's default global connection limit.
pub const DEFAULT_MAXCONNS: u32 = 3_000_000;

/// Candidate (address, port) pairs a NAT allocation tries before it gives up.
pub const NAT_MAX_TRIES: u32 = 4096;

/// Timeout classes, the keys of a timeout policy (OVS's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum TimeoutClass {
    TcpSynSent,
    TcpSynRecv,
    TcpEstablished,
    TcpFinWait,
    TcpTimeWait,
    TcpClose,
    UdpFirst,
    UdpSingle,
    UdpMultiple,
    IcmpFirst,
    IcmpReply,
}

impl TimeoutClass {
    pub const COUNT: usize = 11;
    pub const ALL: [TimeoutClass; Self::COUNT] = [
        TimeoutClass::TcpSynSent,
        TimeoutClass::TcpSynRecv,
        TimeoutClass::TcpEstablished,
        TimeoutClass::TcpFinWait,
        TimeoutClass::TcpTimeWait,
        TimeoutClass::TcpClose,
        TimeoutClass::UdpFirst,
        TimeoutClass::UdpSingle,
        TimeoutClass::UdpMultiple,
        TimeoutClass::IcmpFirst,
        TimeoutClass::IcmpReply,
    ];

    /// The policy attribute's name (`tcp_established`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TimeoutClass::TcpSynSent => "tcp_syn_sent",
            TimeoutClass::TcpSynRecv => "tcp_syn_recv",
            TimeoutClass::TcpEstablished => "tcp_established",
            TimeoutClass::TcpFinWait => "tcp_fin_wait",
            TimeoutClass::TcpTimeWait => "tcp_time_wait",
            TimeoutClass::TcpClose => "tcp_close",
            TimeoutClass::UdpFirst => "udp_first",
            TimeoutClass::UdpSingle => "udp_single",
            TimeoutClass::UdpMultiple => "udp_multiple",
            TimeoutClass::IcmpFirst => "icmp_first",
            TimeoutClass::IcmpReply => "icmp_reply",
        }
    }

    /// The class named `name`.
    pub fn from_name(name: &str) -> Option<TimeoutClass> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// OVS's default, in seconds.
    pub fn default_secs(self) -> u32 {
        match self {
            TimeoutClass::TcpSynSent => crate::tcp::default_timeout_secs(TcpTimeout::SynSent),
            TimeoutClass::TcpSynRecv => crate::tcp::default_timeout_secs(TcpTimeout::SynRecv),
            TimeoutClass::TcpEstablished => {
                crate::tcp::default_timeout_secs(TcpTimeout::Established)
            }
            TimeoutClass::TcpFinWait => crate::tcp::default_timeout_secs(TcpTimeout::FinWait),
            TimeoutClass::TcpTimeWait => crate::tcp::default_timeout_secs(TcpTimeout::TimeWait),
            TimeoutClass::TcpClose => crate::tcp::default_timeout_secs(TcpTimeout::Close),
            TimeoutClass::UdpFirst => 60,
            TimeoutClass::UdpSingle => 60,
            TimeoutClass::UdpMultiple => 30,
            TimeoutClass::IcmpFirst => 60,
            TimeoutClass::IcmpReply => 30,
        }
    }

    fn of_tcp(t: TcpTimeout) -> TimeoutClass {
        match t {
            TcpTimeout::SynSent => TimeoutClass::TcpSynSent,
            TcpTimeout::SynRecv => TimeoutClass::TcpSynRecv,
            TcpTimeout::Established => TimeoutClass::TcpEstablished,
            TcpTimeout::FinWait => TimeoutClass::TcpFinWait,
            TcpTimeout::TimeWait => TimeoutClass::TcpTimeWait,
            TcpTimeout::Close => TimeoutClass::TcpClose,
        }
    }
}

/// A timeout policy: seconds per class. Changed in place, so connections that hold it see a
/// change at their next packet.
#[derive(Debug)]
pub struct Policy {
    secs: [AtomicU32; TimeoutClass::COUNT],
}

impl Policy {
    fn defaults() -> Policy {
        Policy {
            secs: TimeoutClass::ALL.map(|c| AtomicU32::new(c.default_secs())),
        }
    }

    fn ms(&self, c: TimeoutClass) -> u64 {
        u64::from(self.secs[c as usize].load(Relaxed)) * 1000
    }

    /// Seconds of each class.
    pub fn get(&self) -> [u32; TimeoutClass::COUNT] {
        std::array::from_fn(|i| self.secs[i].load(Relaxed))
    }
}

/// Source or destination NAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NatKind {
    Src,
    Dst,
}

/// The `nat(...)` of a `ct` action. `kind: None` (plain `nat`) translates packets of
/// connections that already have a translation and sets up none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NatSpec {
    pub kind: Option<NatKind>,
    /// Address range, inclusive, in the packet's family (IPv4 in the first four bytes).
    pub addr_min: [u8; 16],
    pub addr_max: [u8; 16],
    /// Whether a range was given (else the address is kept and only the port may change).
    pub has_addr: bool,
    /// Port range, inclusive; 0 for none.
    pub port_min: u16,
    pub port_max: u16,
    /// Same translated address for the same source address (no ports in the hash).
    pub persistent: bool,
    /// Random starting point instead of a hash of the tuple.
    pub random: bool,
}

/// The arguments of one `ct()` action.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtArgs {
    pub zone: u16,
    pub commit: bool,
    pub force: bool,
    /// Set the connection's mark: value, mask.
    pub mark: Option<(u32, u32)>,
    /// Set the connection's label: value, mask.
    pub label: Option<(u128, u128)>,
    pub nat: Option<NatSpec>,
    /// The ALG a committed connection gets (`helper=ftp|tftp`).
    pub helper: Option<Helper>,
}

/// Connection metadata a packet carries: what `ct()` wrote, what later passes match.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtMeta {
    /// [`crate::state`] bits; 0 when never tracked.
    pub state: u8,
    pub zone: u16,
    pub mark: u32,
    pub label: u128,
    /// The connection's original-direction tuple (valid when `state` has TRK without INV).
    pub orig: Tuple,
    /// Where the PMD's cache holds the packet's connection (the low 32 bits of the hash of
    /// the tuple it was found by); 0 when it has none. A later `ct()` of the same packet in
    /// the same zone can take the connection from there ([`Conntrack::recheck`]).
    pub conn_ref: u32,
}

/// A rewrite NAT asks of the packet: new source and/or destination address and port (the port
/// is left alone for ICMP).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatRewrite {
    pub src: Option<([u8; 16], u16)>,
    pub dst: Option<([u8; 16], u16)>,
    /// For a TCP connection with the FTP helper: the payload edit (which writes the new `src`
    /// address) and the sequence adjustment.
    pub alg: Option<alg::AlgRewrite>,
    /// The packet is an ICMP error about a packet of the connection: `src` and `dst` are for
    /// its outer header (addresses only), and the packet it quotes, which went the other way,
    /// takes `dst` as its source and `src` as its destination (addresses and ports), as
    /// OVS's `reverse_nat_packet` does.
    pub icmp_error: bool,
}

/// Which protocol a connection tracks, fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Tcp,
    Udp,
    Icmp,
}

/// What changes only under the connection's lock: TCP's window state, and the label.
#[derive(Debug, Default)]
struct Locked {
    tcp: Option<Box<TcpConn>>,
    label: u128,
    /// A related connection's parent, a control connection's sequence adjustment.
    alg: Option<Box<alg::ConnAlg>>,
}

/// One connection. UDP and ICMP packets update it with relaxed atomics only (state, timeout
/// class, expiry); TCP segments take its lock for the window tracker; a commit that writes the
/// mark or label takes it too, so writers are serialized.
///
/// Laid out so that a packet of the original direction touches one cache line: the fields
/// every packet reads and the original tuple come first, and the connection starts a line
/// (`align(64)` also keeps the `Arc`'s counts off it).
#[derive(Debug)]
#[repr(C, align(64))]
struct Conn {
    /// Expiry, in [`crate::now_ms`] milliseconds.
    expires: AtomicU64,
    mark: AtomicU32,
    id: u32,
    /// Removed from the table (or about to be); counted out once.
    dead: AtomicBool,
    /// A packet of the reply direction was seen (UDP, ICMP).
    reply_seen: AtomicBool,
    /// The timeout class, as `TimeoutClass as u8`.
    class: AtomicU8,
    /// Whether the label is not zero (it is read under the lock only then).
    labeled: AtomicBool,
    orig: Tuple,
    /// The reply direction's tuple, after NAT.
    reply: Tuple,
    kind: Kind,
    /// The connection's ALG, and whether an expectation made it (`+rel`).
    helper: Option<Helper>,
    related: bool,
    policy: Arc<Policy>,
    locked: Mutex<Locked>,
    /// The expiry queue the connection is in ([`Conntrack`]'s `queues`).
    queue: u8,
    /// The deadline of the connection's current entry in its expiry queue: an entry with
    /// another deadline is stale (the connection was queued again since). Last: only expiry
    /// reads it, and a packet whose expiry moved earlier.
    queued: AtomicU64,
}

// What a packet of the original direction reads is on the connection's first line, and the
// policy (which a packet's expiry update reads) on the line next to it (the pair of lines the
// CPU fetches together); three lines in all.
const _: () = assert!(std::mem::offset_of!(Conn, orig) + std::mem::size_of::<Tuple>() <= 64);
const _: () = assert!(std::mem::offset_of!(Conn, policy) < 128);
const _: () = assert!(std::mem::size_of::<Conn>() <= 192);

impl Conn {
    #[inline]
    fn alive(&self, now: u64) -> bool {
        !self.dead.load(Relaxed) && self.expires.load(Relaxed) > now
    }

    fn class(&self) -> TimeoutClass {
        TimeoutClass::ALL[usize::from(self.class.load(Relaxed)) % TimeoutClass::COUNT]
    }

    /// Moves the expiry to `class`'s timeout from `now`. Skipped when it would move by less
    /// than a second, so a busy connection's line is not written by every packet. Returns
    /// whether it moved earlier (then the connection is queued again: [`CtCache::note_expiry`]).
    #[inline]
    fn touch(&self, class: TimeoutClass, now: u64) -> bool {
        if self.class.load(Relaxed) != class as u8 {
            self.class.store(class as u8, Relaxed);
        }
        let new = now + self.policy.ms(class);
        let cur = self.expires.load(Relaxed);
        if new >= cur + 1000 || new < cur {
            self.expires.store(new, Relaxed);
        }
        new < cur
    }

    #[inline]
    fn label(&self) -> u128 {
        if self.labeled.load(Relaxed) {
            self.label_locked()
        } else {
            0
        }
    }

    #[cold]
    fn label_locked(&self) -> u128 {
        self.locked.lock().unwrap().label
    }

    fn nat_flags(&self) -> u8 {
        let mut f = 0;
        if self.kind == Kind::Icmp {
            // The identifier is in both "ports": a moved one is the source's NAT.
            let dnat = self.reply.src != self.orig.dst;
            if self.reply.dst != self.orig.src || (self.reply.dport != self.orig.sport && !dnat) {
                f |= SNAT;
            }
            if dnat {
                f |= DNAT;
            }
            return f;
        }
        if self.reply.dst != self.orig.src || self.reply.dport != self.orig.sport {
            f |= SNAT;
        }
        if self.reply.src != self.orig.dst || self.reply.sport != self.orig.dport {
            f |= DNAT;
        }
        f
    }
}

/// A table entry: a connection, and which of its directions the key is.
#[derive(Clone, Debug)]
struct Entry {
    conn: Arc<Conn>,
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    h: u64,
    t: Tuple,
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

/// Expiry queues of the table: connections are spread over them by the PMD (the cache) that
/// committed them, so that a PMD takes its own queue's lock only.
const EXPIRY_QUEUES: usize = 16;

/// How far from its tail a queued entry looks for its place among later deadlines (past that it
/// goes at the tail, and may expire late: counted until its turn, never found alive).
const QUEUE_SORT_DEPTH: usize = 64;

/// Connections a PMD's expiry takes out per burst, at most.
const EXPIRE_PER_BURST: usize = 128;

/// How long a PMD with nothing to queue leaves its queue alone, at most, in milliseconds.
const QUEUE_RECHECK_MS: u64 = 100;

/// Queue entries a sweep takes per hold of a queue's lock.
const SWEEP_CHUNK: usize = 4096;

/// Connections a PMD keeps for reuse.
const POOL_MAX: usize = 1024;

/// A queue entry: a connection and the deadline it was queued with.
type Queued = (u64, Arc<Conn>);

/// One list of an expiry queue: connections of one timeout (in milliseconds), ordered by
/// deadline, so that expiry pops from the head instead of scanning (OVS's expiration lists).
/// A connection whose expiry moved later is queued again when its old deadline comes; one
/// whose expiry moved earlier (a shorter timeout class) is queued again at once, and its old
/// entry left behind as stale ([`Conn::queued`]).
#[derive(Default)]
struct ExpiryQueue {
    lists: Vec<(u64, VecDeque<Queued>)>,
}

impl ExpiryQueue {
    fn push(&mut self, ms: u64, deadline: u64, c: Arc<Conn>) {
        let i = match self.lists.iter().position(|(m, _)| *m == ms) {
            Some(i) => i,
            None => {
                self.lists.push((ms, VecDeque::new()));
                self.lists.len() - 1
            }
        };
        let q = &mut self.lists[i].1;
        // Nearly always at the tail: deadlines of one timeout grow with the clock.
        let mut at = q.len();
        while at > 0 && q.len() - at < QUEUE_SORT_DEPTH && q[at - 1].0 > deadline {
            at -= 1;
        }
        if at == q.len() {
            q.push_back((deadline, c));
        } else {
            q.insert(at, (deadline, c));
        }
    }

    /// Takes entries whose deadline has come (at most `budget`) into `out`; the earliest
    /// first within a list.
    fn pop_due(&mut self, now: u64, budget: usize, out: &mut Vec<Queued>) {
        for (_, q) in self.lists.iter_mut() {
            while out.len() < budget
                && let Some((d, _)) = q.front()
                && *d <= now
            {
                out.extend(q.pop_front());
            }
        }
    }

    /// The earliest deadline at the head of a list.
    fn next_due(&self) -> u64 {
        self.lists
            .iter()
            .filter_map(|(_, q)| q.front().map(|e| e.0))
            .min()
            .unwrap_or(u64::MAX)
    }

    fn len(&self) -> usize {
        self.lists.iter().map(|(_, q)| q.len()).sum()
    }

    /// Drops the entries of removed connections.
    fn purge(&mut self) {
        for (_, q) in self.lists.iter_mut() {
            q.retain(|(_, c)| !c.dead.load(Relaxed));
        }
    }
}

/// Counters, relaxed atomics summed on read.
#[derive(Debug, Default)]
struct Counters {
    invalid: [AtomicU64; Invalid::COUNT],
    tcp_invalid: AtomicU64,
    related_unknown: AtomicU64,
    committed: AtomicU64,
    limit_refused: AtomicU64,
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
    /// Commits refused because the NAT range had no free tuple.
    pub nat_exhausted: u64,
    /// Commits lost to a concurrent commit of the same tuple.
    pub insert_conflicts: u64,
    /// Connections removed by expiry.
    pub expired: u64,
}

/// A packet as the tracker sees it.
#[derive(Clone, Copy, Debug)]
pub struct CtPacket<'a> {
    /// The frame.
    pub frame: &'a [u8],
    /// Offset of its IPv4 or IPv6 header.
    pub l3: usize,
    pub v6: bool,
    /// For the first fragment of a reassembled datagram: the datagram's L4 length.
    pub frag_l4_len: Option<usize>,
    /// Its headers and checksums were checked by an earlier `ct()` (skip the checks).
    pub verified: bool,
    /// An earlier `ct()` in the same zone translated it (NAT): look it up by its connection's
    /// translated tuple.
    pub natted: bool,
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

/// How a packet reaches [`Conntrack`]'s `update`, for the ALGs.
#[derive(Clone, Copy, Debug)]
enum AlgView<'a> {
    /// As it arrived: its TCP header and payload, which a helper reads.
    Fresh(&'a [u8]),
    /// Translated, ALG adjustments included, by an earlier `ct(nat)` of the zone: not read or
    /// adjusted again.
    Natted,
    /// Not read: not TCP, or the first fragment of a reassembled datagram (adjusted only).
    Skip,
}

/// The connection table.
pub struct Conntrack {
    shards: Box<[RwLock<Map>]>,
    n_conns: AtomicU32,
    maxconns: AtomicU32,
    zone_count: Box<[AtomicU32]>,
    /// Per-zone limit; 0: the default limit applies.
    zone_limit: Box<[AtomicU32]>,
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

/// Buckets of a PMD's lookup cache, each of [`CACHE_WAYS`] entries on one cache line: at
/// least this many (64 KiB)...
const MIN_BUCKETS: usize = 1 << 10;
/// ... and at most this many (4 MiB: 256Ki entries, room for a busy host's connections; of
/// 100,000 connections' original directions, 2 % find no room). In between, a power of two
/// about the table's number of connections ([`CtCache::fit`]): a bucket per connection
/// (rarely more than four tuples share one), and no more lines and pages than that, so that a
/// small table's lookups stay in few TLB entries. Powers of two divide 2^32: a packet's
/// `conn_ref` (the low half of its tuple's hash) picks the same bucket as the whole hash.
const MAX_BUCKETS: usize = 1 << 16;
const _: () = assert!(MIN_BUCKETS.is_power_of_two() && MAX_BUCKETS.is_power_of_two());
/// Entries per bucket of a PMD's lookup cache.
pub const CACHE_WAYS: usize = 4;
use CACHE_WAYS as WAYS;

/// A connection found in the table pushes another out of a full bucket of the PMD's cache one
/// time in this many ([`CtCache::admit`]).
const ADMIT_EVERY: u32 = 4;

/// One line of a PMD's cache: up to [`WAYS`] entries of hashes that share the bucket, the most
/// recently taken in first. An entry is its tuple's hash with the lowest bit replaced by the
/// direction (set: the reply), and the connection.
#[derive(Clone, Default)]
#[repr(align(64))]
struct Bucket([Option<(u64, Arc<Conn>)>; WAYS]);
const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

/// Whether the tag of a [`Bucket`] entry is hash `h`'s (the direction bit aside).
#[inline]
fn tag_is(tag: u64, h: u64) -> bool {
    (tag ^ h) & !1 == 0
}

impl Bucket {
    /// The index of hash `h`'s bucket among `n` (a power of two, or 0: then none).
    #[inline]
    fn index(h: u64, n: usize) -> usize {
        (h as usize) & n.wrapping_sub(1)
    }

    /// Hash `h`'s bucket among `buckets` (none before the first connection).
    #[inline]
    fn of(buckets: &[Bucket], h: u64) -> Option<&Bucket> {
        buckets.get(Bucket::index(h, buckets.len()))
    }

    /// [`CtCache::put`] on the cache's `buckets`, which are made `size` first if they are
    /// fewer (dropping what they held).
    fn put(buckets: &mut Vec<Bucket>, size: usize, h: u64, e: Entry) -> (&Arc<Conn>, bool) {
        if buckets.len() < size {
            *buckets = vec![Bucket::default(); size];
        }
        let i = Bucket::index(h, buckets.len());
        let b = &mut buckets[i].0;
        b.rotate_right(1);
        let (_, c) = b[0].insert((h & !1 | u64::from(e.reply), e.conn));
        (c, e.reply)
    }

    /// The connection of hash `h` whose tuple of the direction is `t`, alive, and whether
    /// `t` is its reply direction.
    #[inline(always)]
    fn get(&self, h: u64, t: &Tuple, now: u64) -> Option<(&Arc<Conn>, bool)> {
        self.0.iter().flatten().find_map(|(k, c)| {
            let reply = k & 1 != 0;
            (tag_is(*k, h) && c.alive(now) && (if reply { &c.reply } else { &c.orig }) == t)
                .then_some((c, reply))
        })
    }
}

/// After a packet of connection `c`: if its expiry moved earlier than its queue entry's
/// deadline (a shorter timeout class), it is queued again (into the PMD's `pending`).
#[inline]
fn note_expiry(pending: &mut Vec<(u64, u64, Arc<Conn>)>, c: &Arc<Conn>) {
    let (exp, q) = (c.expires.load(Relaxed), c.queued.load(Relaxed));
    if exp < q && c.queued.compare_exchange(q, exp, Relaxed, Relaxed).is_ok() {
        pending.push((c.policy.ms(c.class()), exp, c.clone()));
    }
}

/// A PMD's cache of recent lookups: tuple to connection, in buckets of [`WAYS`] entries by the
/// tuple's hash, each entry the hash and the table's entry (the tuple is compared against the
/// connection's own, which the packet reads anyway). A hit takes no lock and writes nothing, and
/// a burst's buckets and connections are prefetched before its packets are tracked, so that
/// their cache misses overlap ([`Conntrack::process_batch`]). It holds references, so a
/// connection removed from the table may linger here until its entry is reused; entries are
/// checked alive before use. The buckets are allocated at the first connection, and made more
/// as the table grows ([`Self::fit`]).
///
/// It is also the PMD's side of expiry: the connections it committed go into one expiry queue
/// of the table (`queue`), first into `pending` and then, once per call, into the queue under
/// its lock; [`Conntrack::process_batch`] expires the queue's due connections, and keeps those
/// no other thread holds in `pool`, to be reused by the next commits: setting up a connection
/// allocates nothing, and a connection is freed by the thread that made it.
pub struct CtCache {
    buckets: Vec<Bucket>,
    /// How many buckets there should be ([`Self::fit`]).
    size: usize,
    /// Scratch of [`Conntrack::process_batch`].
    parsed: Vec<Result<key::Parsed, Invalid>>,
    queue: usize,
    /// Connections to queue: timeout, deadline, connection.
    pending: Vec<(u64, u64, Arc<Conn>)>,
    /// Scratch of expiry.
    due: Vec<Queued>,
    pool: Vec<Arc<Conn>>,
    /// Lookups that went to the table ([`Self::admit`]).
    misses: u32,
    /// When the PMD looks at its queue next, with nothing to queue (its earliest deadline, or
    /// a little later than it last looked: another thread may queue into it).
    next_due: u64,
    /// The policy of the zone of the last commit: zone, the table's `policy_gen`, policy.
    policy: Option<(u16, (usize, u64), Arc<Policy>)>,
}

impl Default for CtCache {
    fn default() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        CtCache {
            buckets: Vec::new(),
            size: MIN_BUCKETS,
            parsed: Vec::with_capacity(32),
            queue: NEXT.fetch_add(1, Relaxed) % EXPIRY_QUEUES,
            pending: Vec::with_capacity(64),
            due: Vec::with_capacity(EXPIRE_PER_BURST),
            pool: Vec::new(),
            misses: 0,
            next_due: 0,
            policy: None,
        }
    }
}

impl CtCache {
    pub fn new() -> CtCache {
        CtCache::default()
    }

    /// The bucket of hash `h` (none before the first connection).
    #[inline]
    fn bucket(&self, h: u64) -> Option<&Bucket> {
        Bucket::of(&self.buckets, h)
    }

    /// Which bucket holds a tuple of hash `h` ([`Tuple::hash`]) now: tuples of one bucket
    /// compete for its [`CACHE_WAYS`] entries.
    pub fn bucket_of(&self, h: u64) -> usize {
        Bucket::index(h, self.buckets.len().max(self.size))
    }

    /// Sizes the cache for a table of `conns` connections (see [`MAX_BUCKETS`]); it only
    /// grows, at its next [`Self::put`].
    #[inline]
    fn fit(&mut self, conns: u32) {
        self.size = (conns as usize)
            .next_power_of_two()
            .clamp(self.size, MAX_BUCKETS);
    }

    /// Takes `e` in as hash `h`'s entry, first in its bucket (the last one falls out), and
    /// returns it.
    fn put(&mut self, h: u64, e: Entry) -> (&Arc<Conn>, bool) {
        Bucket::put(&mut self.buckets, self.size, h, e)
    }

    /// Whether the PMD's cache takes in a connection of hash `h` that was found in the table:
    /// when its bucket has room, else one time in [`ADMIT_EVERY`]. Holding a connection in the
    /// cache costs its reference count (two atomic writes: the count of the one taken in and
    /// of the one pushed out), on lines that are not in the CPU's cache when the table has far
    /// more connections than the cache has room; then most lookups go to the table, which
    /// writes nothing.
    #[inline]
    fn admit(&mut self, h: u64) -> bool {
        self.misses = self.misses.wrapping_add(1);
        self.bucket(h).is_none_or(|b| b.0[WAYS - 1].is_none())
            || self.misses.is_multiple_of(ADMIT_EVERY)
    }

    /// Keeps a connection taken out of the table for reuse, if no other thread holds it: this
    /// cache's entries let go of it first.
    fn recycle(&mut self, mut c: Arc<Conn>) {
        if !self.buckets.is_empty() {
            for h in [c.orig.hash(), c.reply.hash()] {
                let i = Bucket::index(h, self.buckets.len());
                for slot in &mut self.buckets[i].0 {
                    if slot.as_ref().is_some_and(|(_, e)| Arc::ptr_eq(e, &c)) {
                        *slot = None;
                    }
                }
            }
        }
        if self.pool.len() < POOL_MAX && Arc::get_mut(&mut c).is_some() {
            self.pool.push(c);
        }
    }

    /// Asks for the bucket of hash `h` ahead of its use (a burst's buckets first, then their
    /// connections: [`Self::prefetch_conn`]).
    #[inline]
    fn prefetch_bucket(&self, h: u64) {
        if let Some(b) = self.bucket(h) {
            flow::hash::prefetch(b);
        }
    }

    /// Asks for the first two lines of the connection of hash `h` in its bucket, if there is
    /// one: what a packet of either direction reads (the tuples, state and expiry, and the
    /// policy an expiry update reads).
    #[inline]
    fn prefetch_conn(&self, h: u64) {
        if let Some(b) = self.bucket(h) {
            for (k, c) in b.0.iter().flatten() {
                if tag_is(*k, h) {
                    flow::hash::prefetch(&c.expires);
                    flow::hash::prefetch(&c.policy);
                }
            }
        }
    }
}

impl Conntrack {
    pub fn new() -> Conntrack {
        Conntrack {
            shards: (0..SHARDS).map(|_| RwLock::new(Map::default())).collect(),
            n_conns: AtomicU32::new(0),
            maxconns: AtomicU32::new(DEFAULT_MAXCONNS),
            zone_count: (0..=u16::MAX as usize).map(|_| AtomicU32::new(0)).collect(),
            zone_limit: (0..=u16::MAX as usize).map(|_| AtomicU32::new(0)).collect(),
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

    /// Tracks one packet under `args`. Writes the packet's connection metadata into `md` and
    /// returns the NAT rewrite to apply, if any.
    pub fn process(
        &self,
        cache: &mut CtCache,
        pkt: &CtPacket<'_>,
        md: &mut CtMeta,
        args: &CtArgs,
        now: u64,
    ) -> Option<NatRewrite> {
        let parsed = Self::parse(pkt, args.zone);
        let mut rw = None;
        self.process_parsed(cache, pkt, &parsed, md, &mut rw, args, now);
        if !cache.pending.is_empty() {
            self.expire(cache, now, 0);
        }
        rw
    }

    /// [`Self::process`] for a batch, in two steps: every packet's headers are parsed and its
    /// cache slot and connection are touched first, so that their cache misses overlap, then
    /// each packet is tracked. `out[i]` receives packet `i`'s metadata and rewrite.
    pub fn process_batch(
        &self,
        cache: &mut CtCache,
        pkts: &[CtPacket<'_>],
        out: &mut [(CtMeta, Option<NatRewrite>)],
        args: &CtArgs,
        now: u64,
    ) {
        const MAX: usize = 32;
        // The cache's scratch vector keeps its capacity: nothing is allocated per burst.
        cache.fit(self.n_conns.load(Relaxed));
        let mut parsed = std::mem::take(&mut cache.parsed);
        for (chunk, outs) in pkts.chunks(MAX).zip(out.chunks_mut(MAX)) {
            parsed.clear();
            for pkt in chunk {
                let p = Self::parse(pkt, args.zone);
                if let Ok(p) = &p {
                    cache.prefetch_bucket(p.hash);
                }
                parsed.push(p);
            }
            for p in parsed.iter().flatten() {
                cache.prefetch_conn(p.hash);
            }
            for ((pkt, o), p) in chunk.iter().zip(outs.iter_mut()).zip(&parsed) {
                let (md, nat) = o;
                self.process_parsed(cache, pkt, p, md, nat, args, now);
            }
        }
        cache.parsed = parsed;
        self.expire(cache, now, EXPIRE_PER_BURST);
    }

    /// The PMD's side of expiry: queues the connections `cache` committed, then takes out up
    /// to `budget` due ones of its queue. Under the queue's lock only the queue is worked on;
    /// the table's shards are locked after, one at a time.
    #[inline]
    fn expire(&self, cache: &mut CtCache, now: u64, budget: usize) {
        if cache.pending.is_empty() && now < cache.next_due {
            return;
        }
        let mut due = std::mem::take(&mut cache.due);
        {
            let mut q = self.queues[cache.queue].lock().unwrap();
            for (ms, deadline, c) in cache.pending.drain(..) {
                q.push(ms, deadline, c);
            }
            q.pop_due(now, budget, &mut due);
            cache.next_due = q.next_due().min(now + QUEUE_RECHECK_MS);
        }
        for (deadline, c) in due.drain(..) {
            if let Some((c, _)) = self.expire_one(cache.queue, deadline, c, now) {
                cache.recycle(c);
            }
        }
        cache.due = due;
    }

    /// A queue entry whose deadline came: dropped when stale, queued again when the
    /// connection's expiry moved later, else its connection taken out of the table. Returns
    /// the connection when it was taken out, and whether this counted it out (it was not
    /// removed already).
    fn expire_one(
        &self,
        queue: usize,
        deadline: u64,
        c: Arc<Conn>,
        now: u64,
    ) -> Option<(Arc<Conn>, bool)> {
        if c.queued.load(Relaxed) != deadline {
            return None;
        }
        let exp = c.expires.load(Relaxed);
        if exp > now && !c.dead.load(Relaxed) {
            c.queued.store(exp, Relaxed);
            let ms = c.policy.ms(c.class());
            self.queues[queue].lock().unwrap().push(ms, exp, c);
            return None;
        }
        let counted = !c.dead.swap(true, Relaxed);
        if counted {
            self.release(c.orig.zone);
            self.counters.expired.fetch_add(1, Relaxed);
        }
        // Its keys (one may be another's already: an expired key is replaced in place).
        self.unlink(&c.orig, &c);
        self.unlink(&c.reply, &c);
        if c.helper.is_some() {
            self.expectations.remove_parent(c.id);
        }
        Some((c, counted))
    }

    #[inline(always)]
    fn parse(pkt: &CtPacket<'_>, zone: u16) -> Result<key::Parsed, Invalid> {
        key::parse(
            pkt.frame,
            pkt.l3,
            pkt.v6,
            zone,
            pkt.frag_l4_len,
            !pkt.verified,
        )
    }

    /// Tracks one parsed packet: its metadata into `md`, the NAT rewrite it needs (if any)
    /// into `nat` (out-parameters: what they hold is moved once, not through return values).
    #[allow(clippy::too_many_arguments)]
    fn process_parsed(
        &self,
        cache: &mut CtCache,
        pkt: &CtPacket<'_>,
        parsed: &Result<key::Parsed, Invalid>,
        md: &mut CtMeta,
        nat: &mut Option<NatRewrite>,
        args: &CtArgs,
        now: u64,
    ) {
        md.zone = args.zone;
        // Set again below when the connection is cached (`md` may hold an earlier packet's).
        md.conn_ref = 0;
        *nat = None;
        let p = match parsed {
            Ok(p) => p,
            Err(e) => {
                self.counters.invalid[*e as usize].fetch_add(1, Relaxed);
                self.invalid(md);
                return;
            }
        };
        let t = &p.tuple;
        if p.related {
            // An ICMP error: the connection of the packet it carries, in the other direction.
            let r = t.reverse();
            let found = self.with_conn(cache, &r, r.hash(), now, |c, reply, _, _| {
                md.state = TRK | REL | if reply { RPL } else { 0 };
                md.mark = c.mark.load(Relaxed);
                md.label = c.label();
                md.orig = c.orig;
                // NAT: the error, and the packet it quotes, are translated as the connection's
                // own packets of their directions are.
                let f = c.nat_flags();
                if args.nat.is_some() && f != 0 {
                    md.state |= f;
                    *nat = Some(NatRewrite {
                        icmp_error: true,
                        ..rewrite_for(c, reply)
                    });
                }
            });
            if found.is_none() {
                self.counters.related_unknown.fetch_add(1, Relaxed);
                self.invalid(md);
            }
            return;
        }
        // A TCP segment, and what an ALG reads of it (not a datagram's first fragment alone).
        let mut view = AlgView::Skip;
        let seg = if t.proto == TCP {
            let b = &pkt.frame[p.l4..(p.l4 + p.l4_len).min(pkt.frame.len())];
            if pkt.frag_l4_len.is_none() {
                view = AlgView::Fresh(b);
            }
            match Segment::parse_with_len(b, p.l4_len) {
                Some(s) => Some(s),
                None => {
                    self.counters.invalid[Invalid::L4 as usize].fetch_add(1, Relaxed);
                    self.invalid(md);
                    return;
                }
            }
        } else {
            None
        };
        if pkt.natted {
            // An earlier ct() of this zone translated the packet: its tuple is the other
            // direction's, reversed. It is tracked, not translated again.
            let r = t.reverse();
            let tracked = self.with_conn(cache, &r, r.hash(), now, |c, reply, _, pending| {
                let mut earlier = false;
                // Not translated again: the rewrite is dropped.
                let ok = self.update(
                    c,
                    !reply,
                    seg.as_ref(),
                    md,
                    &mut None,
                    args,
                    now,
                    AlgView::Natted,
                    &mut earlier,
                );
                if earlier {
                    note_expiry(pending, c);
                }
                ok
            });
            if tracked == Some(true) {
                return;
            }
        }
        let found = self.with_conn(
            cache,
            t,
            p.hash,
            now,
            #[inline(always)]
            |c, reply, cached, pending| {
                // `force`: a connection seen from this side is started anew from here.
                if reply && args.force && args.commit {
                    return Some(c.clone());
                }
                let mut earlier = false;
                if self.update(
                    c,
                    reply,
                    seg.as_ref(),
                    md,
                    nat,
                    args,
                    now,
                    view,
                    &mut earlier,
                ) {
                    if earlier {
                        note_expiry(pending, c);
                    }
                    md.conn_ref = if cached { p.hash as u32 } else { 0 };
                    None
                } else {
                    // The segment reopens a closed TCP connection: start a new one.
                    Some(c.clone())
                }
            },
        );
        let stale = match found {
            Some(None) => return,
            Some(Some(c)) => Some(c),
            None => None,
        };
        if let Some(c) = stale {
            self.remove(&c);
        }
        *nat = self.new_conn(cache, p, seg.as_ref(), md, args, now);
    }

    /// A later `ct()` of a packet an earlier `ct()` of this zone already tracked (its
    /// connection at `conn_ref` in the cache, its original tuple `orig`): as OVS's kernel
    /// datapath does for a packet whose connection is cached, the packet is not tracked again;
    /// a commit only writes the mark and label. Returns the connection's mark and label, or
    /// `None` when the connection is not at hand (or the action asks for NAT or `force`): then
    /// [`Self::process`] the packet.
    #[inline]
    pub fn recheck(
        &self,
        cache: &CtCache,
        conn_ref: u32,
        orig: &Tuple,
        args: &CtArgs,
        now: u64,
    ) -> Option<(u32, u128)> {
        if conn_ref == 0 || args.nat.is_some() || args.force {
            return None;
        }
        // The number of buckets divides 2^32, so the bucket is the same as the full hash's.
        let (_, c) = cache
            .bucket(u64::from(conn_ref))?
            .0
            .iter()
            .flatten()
            .find(|(k, _)| tag_is(u64::from(*k as u32), u64::from(conn_ref)))?;
        if !c.alive(now) || c.orig != *orig {
            return None;
        }
        if args.commit && (args.mark.is_some() || args.label.is_some()) {
            self.set_mark_label(c, args);
        }
        Some((c.mark.load(Relaxed), c.label()))
    }

    fn invalid(&self, md: &mut CtMeta) -> Option<NatRewrite> {
        md.state = TRK | INV;
        md.mark = 0;
        md.label = 0;
        md.conn_ref = 0;
        None
    }

    /// Runs `f` on the alive connection of `t` (hash `h`): the connection, whether `t` is its
    /// reply direction, whether the PMD's cache holds it (at `h`'s slot: a later `ct()` of the
    /// packet finds it there, [`Self::recheck`]), and the cache's list of connections to queue
    /// for expiry. `None` when there is none. A cache hit takes no lock and no reference
    /// count; on a miss `f` runs under the read lock of the table's shard, and the connection
    /// goes into the cache only as [`CtCache::admit`] says.
    #[inline]
    fn with_conn<R>(
        &self,
        cache: &mut CtCache,
        t: &Tuple,
        h: u64,
        now: u64,
        f: impl FnOnce(&Arc<Conn>, bool, bool, &mut Vec<(u64, u64, Arc<Conn>)>) -> R,
    ) -> Option<R> {
        if let Some((c, reply)) = Bucket::of(&cache.buckets, h).and_then(|b| b.get(h, t, now)) {
            return Some(f(c, reply, true, &mut cache.pending));
        }
        let map = self.shards[shard_of(h)].read().unwrap();
        let e = map.get(&Key { h, t: *t }).filter(|e| e.conn.alive(now))?;
        if !cache.admit(h) {
            return Some(f(&e.conn, e.reply, false, &mut cache.pending));
        }
        let e = e.clone();
        drop(map);
        let (c, reply) = Bucket::put(&mut cache.buckets, cache.size, h, e);
        Some(f(c, reply, true, &mut cache.pending))
    }

    /// A packet of an existing connection: its metadata into `md`, its NAT rewrite (if any)
    /// into `nat`. False when the packet reopens the connection (TCP); then neither is
    /// written.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn update(
        &self,
        c: &Conn,
        reply: bool,
        seg: Option<&Segment>,
        md: &mut CtMeta,
        nat: &mut Option<NatRewrite>,
        args: &CtArgs,
        now: u64,
        view: AlgView<'_>,
        earlier: &mut bool,
    ) -> bool {
        let mut alg_rw = None;
        let est = match c.kind {
            Kind::Tcp => {
                let arrived = *seg.expect("TCP packets come with their segment");
                let mut seg = arrived;
                let mut l = c.locked.lock().unwrap();
                // An ALG resized earlier payload: the tracker sees each sender's own numbering.
                let adj = l.alg.as_deref().map(|a| a.adj).filter(|a| !a.is_zero());
                if let Some(a) = &adj {
                    match view {
                        AlgView::Natted => seg.seq = a.unshift_seq(reply, seg.seq),
                        _ if seg.flags & crate::tcp::ACK != 0 => {
                            seg.ack = seg.ack.wrapping_add_signed(a.ack_offset(reply, seg.ack));
                        }
                        _ => {}
                    }
                }
                let tcp = l.tcp.as_mut().expect("a TCP connection has its state");
                match tcp.update(&seg, reply, !self.tcp_seq_chk.load(Relaxed)) {
                    Update::Valid => {
                        let class = TimeoutClass::of_tcp(tcp.timeout());
                        if tcp.timer_refreshed() {
                            *earlier |= c.touch(class, now);
                        } else {
                            c.class.store(class as u8, Relaxed);
                        }
                        let est = tcp.established();
                        if c.helper.is_some() || adj.is_some() {
                            let translate = args.nat.is_some() && c.nat_flags() != 0;
                            match self.alg_tcp(c, &mut l, reply, &arrived, view, translate, now) {
                                Ok(rw) => alg_rw = rw,
                                Err(()) => {
                                    drop(l);
                                    self.invalid(md);
                                    return true;
                                }
                            }
                        }
                        est
                    }
                    Update::Invalid => {
                        drop(l);
                        self.counters.tcp_invalid.fetch_add(1, Relaxed);
                        self.invalid(md);
                        return true;
                    }
                    Update::Reopen => return false,
                }
            }
            Kind::Udp | Kind::Icmp => {
                let seen = reply || c.reply_seen.load(Relaxed);
                if reply && !c.reply_seen.load(Relaxed) {
                    c.reply_seen.store(true, Relaxed);
                }
                let class = match (c.kind, seen) {
                    (Kind::Udp, true) => TimeoutClass::UdpMultiple,
                    (Kind::Udp, false) => TimeoutClass::UdpSingle,
                    (_, true) => TimeoutClass::IcmpReply,
                    (_, false) => TimeoutClass::IcmpFirst,
                };
                *earlier |= c.touch(class, now);
                if c.helper == Some(Helper::Tftp) && !reply {
                    self.tftp_expect(c, now);
                }
                seen
            }
        };
        let mut state = TRK | if est { EST } else { NEW };
        if reply {
            state |= RPL;
        }
        // A related connection keeps its parent's mark and label (OVS).
        if args.commit && (args.mark.is_some() || args.label.is_some()) && !c.related {
            self.set_mark_label(c, args);
        }
        md.mark = c.mark.load(Relaxed);
        md.label = c.label();
        md.orig = c.orig;
        if c.related {
            state |= REL;
            md.orig = Self::parent_of(c);
        }
        if args.nat.is_some() {
            let f = c.nat_flags();
            if f != 0 {
                state |= f;
                *nat = Some(NatRewrite {
                    alg: alg_rw,
                    ..rewrite_for(c, reply)
                });
            }
        }
        md.state = state;
        true
    }

    /// The FTP helper's part of a valid TCP segment of `c` (whose lock is `l`): an
    /// announcement is recorded as an expectation; when the packet is translated
    /// (`translate`), the announced address is rewritten and the sequence numbers adjusted.
    /// `Err` for a malformed announcement (the packet is `+inv`).
    #[allow(clippy::too_many_arguments)]
    #[cold]
    fn alg_tcp(
        &self,
        c: &Conn,
        l: &mut Locked,
        reply: bool,
        seg: &Segment,
        view: AlgView<'_>,
        translate: bool,
        now: u64,
    ) -> Result<Option<alg::AlgRewrite>, ()> {
        let (mut edit, mut delta) = (None, 0);
        if let AlgView::Fresh(l4) = view
            && c.helper == Some(Helper::Ftp)
            && seg.payload_len != 0
        {
            let ctl = alg::Control {
                helper: Helper::Ftp,
                orig: &c.orig,
                reply_tuple: &c.reply,
                id: c.id,
                mark: c.mark.load(Relaxed),
                label: l.label,
                reply,
                nat: translate,
            };
            let out = alg::inspect(&ctl, l4, now);
            if out.invalid {
                self.expectations.count(alg::AlgCounter::BadMessage);
                return Err(());
            }
            if out.incomplete {
                self.expectations.count(alg::AlgCounter::Incomplete);
            }
            if let Some(e) = out.expectation {
                self.expectations.insert(e, now);
            }
            (edit, delta) = (out.edit, out.delta);
        }
        if !translate || matches!(view, AlgView::Natted) {
            return Ok(None);
        }
        let a = l.alg.get_or_insert_with(Default::default);
        if edit.is_some() {
            a.adj.record(reply, seg.seq, delta);
        }
        if edit.is_none() && a.adj.is_zero() {
            return Ok(None);
        }
        Ok(Some(alg::AlgRewrite {
            payload: edit,
            seq: a.adj.seq_offset(reply, seg.seq),
            ack: if seg.flags & crate::tcp::ACK != 0 {
                a.adj.ack_offset(reply, seg.ack)
            } else {
                0
            },
        }))
    }

    /// The TFTP helper: a packet of the request's direction expects the server's answer.
    #[cold]
    fn tftp_expect(&self, c: &Conn, now: u64) {
        let ctl = alg::Control {
            helper: Helper::Tftp,
            orig: &c.orig,
            reply_tuple: &c.reply,
            id: c.id,
            mark: c.mark.load(Relaxed),
            label: c.label(),
            reply: false,
            nat: false,
        };
        if let Some(e) = alg::inspect(&ctl, &[], now).expectation {
            self.expectations.insert(e, now);
        }
    }

    /// A related connection's parent's original tuple (what it reports as its own).
    #[cold]
    fn parent_of(c: &Conn) -> Tuple {
        let l = c.locked.lock().unwrap();
        l.alg.as_ref().and_then(|a| a.parent).unwrap_or(c.orig)
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

    /// A commit's `mark` and `label` writes, serialized by the connection's lock.
    fn set_mark_label(&self, c: &Conn, args: &CtArgs) {
        let mut l = c.locked.lock().unwrap();
        if let Some((v, m)) = args.mark {
            let cur = c.mark.load(Relaxed);
            c.mark.store((cur & !m) | (v & m), Relaxed);
        }
        if let Some((v, m)) = args.label {
            l.label = (l.label & !m) | (v & m);
            c.labeled.store(l.label != 0, Relaxed);
        }
    }

    /// A packet of no connection: `+new`, and committed when asked.
    fn new_conn(
        &self,
        cache: &mut CtCache,
        p: &key::Parsed,
        seg: Option<&Segment>,
        md: &mut CtMeta,
        args: &CtArgs,
        now: u64,
    ) -> Option<NatRewrite> {
        let (t, h) = (&p.tuple, p.hash);
        // The protocol state of a connection this packet starts, if it may start one.
        let start = || -> Option<(Kind, Option<Box<TcpConn>>, TimeoutClass)> {
            Some(match t.proto {
                TCP => {
                    let c = TcpConn::new(seg?)?;
                    let class = TimeoutClass::of_tcp(c.timeout());
                    (Kind::Tcp, Some(Box::new(c)), class)
                }
                ICMP | ICMPV6 if key::icmp_is_request(t) => {
                    (Kind::Icmp, None, TimeoutClass::IcmpFirst)
                }
                ICMP | ICMPV6 => return None,
                // UDP, and other protocols tracked by addresses alone (OVS's "other").
                _ => (Kind::Udp, None, TimeoutClass::UdpFirst),
            })
        };
        if start().is_none() {
            let c = if t.proto == TCP {
                &self.counters.tcp_invalid
            } else {
                &self.counters.invalid[Invalid::Unsupported as usize]
            };
            c.fetch_add(1, Relaxed);
            return self.invalid(md);
        }
        // An expectation names the connection: it is related to the expectation's parent.
        let exp = if self.expectations.is_empty() {
            None
        } else {
            self.expectations
                .find(t, now)
                .filter(|e| self.parent_alive(e, now))
        };
        md.state = TRK | NEW | if exp.is_some() { REL } else { 0 };
        md.mark = exp.map_or(0, |e| e.mark);
        md.label = exp.map_or(0, |e| e.label);
        md.orig = exp.map_or(*t, |e| e.parent);
        if !args.commit {
            return None;
        }
        if !self.reserve(t.zone) {
            self.counters.limit_refused.fetch_add(1, Relaxed);
            return None;
        }
        let policy = self.policy_cached(cache, t.zone);
        let nat = args.nat.filter(|n| n.kind.is_some() && exp.is_none());
        // A related connection is translated as its parent's counterpart, by any `nat`.
        let exp_nat = exp.filter(|_| args.nat.is_some());
        let helper = args.helper.filter(|h| h.proto() == t.proto);
        // A second try only for NAT: a concurrent commit may have taken the tuple picked.
        for attempt in 0..if nat.is_some() { 2 } else { 1 } {
            let mut reply = t.reverse();
            if let Some(e) = &exp_nat {
                reply = e.nat_reply(t);
            }
            if let Some(n) = &nat {
                match self.nat_pick(t, n, now, attempt) {
                    Some(r) => reply = r,
                    None => {
                        self.release(t.zone);
                        self.counters.nat_exhausted.fetch_add(1, Relaxed);
                        return self.invalid(md);
                    }
                }
            }
            let (kind, tcp, class) = start().expect("checked above");
            let ms = policy.ms(class);
            let id = self.next_id.fetch_add(1, Relaxed);
            let (mark, label) = exp.map_or((0, 0), |e| (e.mark, e.label));
            let alg = (exp.is_some() || helper.is_some()).then(|| {
                Box::new(alg::ConnAlg {
                    parent: exp.map(|e| e.parent),
                    ..Default::default()
                })
            });
            // A connection of the PMD's pool is set up in place: no allocation.
            let mut pooled = cache.pool.pop();
            let conn = if let Some(c) = pooled.as_mut().and_then(Arc::get_mut) {
                c.orig = *t;
                c.reply = reply;
                c.id = id;
                c.kind = kind;
                c.helper = helper;
                c.related = exp.is_some();
                *c.expires.get_mut() = now + ms;
                c.queue = cache.queue as u8;
                *c.queued.get_mut() = now + ms;
                *c.dead.get_mut() = false;
                *c.reply_seen.get_mut() = false;
                *c.class.get_mut() = class as u8;
                *c.mark.get_mut() = mark;
                *c.labeled.get_mut() = label != 0;
                if !Arc::ptr_eq(&c.policy, &policy) {
                    c.policy = policy.clone();
                }
                let l = c
                    .locked
                    .get_mut()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                l.tcp = tcp;
                l.label = label;
                l.alg = alg;
                pooled.expect("a pooled connection")
            } else {
                Arc::new(Conn {
                    orig: *t,
                    reply,
                    id,
                    kind,
                    helper,
                    related: exp.is_some(),
                    expires: AtomicU64::new(now + ms),
                    queue: cache.queue as u8,
                    queued: AtomicU64::new(now + ms),
                    dead: AtomicBool::new(false),
                    reply_seen: AtomicBool::new(false),
                    class: AtomicU8::new(class as u8),
                    mark: AtomicU32::new(mark),
                    labeled: AtomicBool::new(label != 0),
                    policy: policy.clone(),
                    locked: Mutex::new(Locked { tcp, label, alg }),
                })
            };
            if exp.is_none() && (args.mark.is_some() || args.label.is_some()) {
                self.set_mark_label(&conn, args);
            }
            md.mark = conn.mark.load(Relaxed);
            md.label = conn.label();
            if self.insert(&conn, now).is_err() {
                if conn.dead.swap(true, Relaxed) && !self.reserve(t.zone) {
                    // A flush counted this one out already and no room is left.
                    self.counters.limit_refused.fetch_add(1, Relaxed);
                    md.mark = 0;
                    md.label = 0;
                    return None;
                }
                continue;
            }
            self.counters.committed.fetch_add(1, Relaxed);
            cache.pending.push((ms, now + ms, conn.clone()));
            if exp.is_some() {
                self.expectations.take_for(t, now);
            }
            if helper == Some(Helper::Tftp) {
                self.tftp_expect(&conn, now);
            }
            let nat_flags = conn.nat_flags();
            let rw = ((nat.is_some() || exp_nat.is_some()) && nat_flags != 0)
                .then(|| rewrite_for(&conn, false));
            cache.put(h, Entry { conn, reply: false });
            md.conn_ref = h as u32;
            if rw.is_some() {
                md.state |= nat_flags;
            }
            return rw;
        }
        self.release(t.zone);
        self.counters.insert_conflicts.fetch_add(1, Relaxed);
        md.mark = 0;
        md.label = 0;
        None
    }

    /// Puts both of a new connection's keys in the table; fails (taking back what it put)
    /// when either is held by another alive connection.
    fn insert(&self, conn: &Arc<Conn>, now: u64) -> Result<(), ()> {
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
    fn unlink(&self, t: &Tuple, conn: &Arc<Conn>) {
        let k = Key::new(t);
        let mut map = self.shards[shard_of(k.h)].write().unwrap();
        if map.get(&k).is_some_and(|e| Arc::ptr_eq(&e.conn, conn)) {
            map.remove(&k);
        }
    }

    /// Takes a connection out of the table and the counts.
    fn remove(&self, conn: &Arc<Conn>) {
        if !conn.dead.swap(true, Relaxed) {
            self.release(conn.orig.zone);
            self.removed_early[usize::from(conn.queue)].fetch_add(1, Relaxed);
        }
        self.unlink(&conn.orig, conn);
        self.unlink(&conn.reply, conn);
        if conn.helper.is_some() {
            self.expectations.remove_parent(conn.id);
        }
    }

    /// Counts a new connection in, within the limits.
    fn reserve(&self, zone: u16) -> bool {
        let max = self.maxconns.load(Relaxed);
        if self.n_conns.fetch_add(1, Relaxed) >= max {
            self.n_conns.fetch_sub(1, Relaxed);
            return false;
        }
        let z = usize::from(zone);
        let limit = match self.zone_limit[z].load(Relaxed) {
            0 => self.default_limit.load(Relaxed),
            l => l,
        };
        if self.zone_count[z].fetch_add(1, Relaxed) >= limit && limit != 0 {
            self.zone_count[z].fetch_sub(1, Relaxed);
            self.n_conns.fetch_sub(1, Relaxed);
            return false;
        }
        true
    }

    fn release(&self, zone: u16) {
        self.n_conns.fetch_sub(1, Relaxed);
        self.zone_count[usize::from(zone)].fetch_sub(1, Relaxed);
    }

    /// [`Self::policy_of`] through the PMD's cache of the last zone's.
    #[inline]
    fn policy_cached(&self, cache: &mut CtCache, zone: u16) -> Arc<Policy> {
        // The table's address tells this table's policies from another's.
        let g = (
            self as *const Conntrack as usize,
            self.policy_gen.load(Relaxed),
        );
        match &cache.policy {
            Some((z, pg, p)) if *z == zone && *pg == g => p.clone(),
            _ => {
                let p = self.policy_of(zone);
                cache.policy = Some((zone, g, p.clone()));
                p
            }
        }
    }

    fn policy_of(&self, zone: u16) -> Arc<Policy> {
        if self.any_zone_policy.load(Relaxed)
            && let Some(p) = self.zone_policies.read().unwrap().get(&zone)
        {
            return p.clone();
        }
        self.default_policy.clone()
    }

    /// A reply tuple for a new connection of `t` translated by `n` that no alive connection
    /// holds, trying at most [`NAT_MAX_TRIES`] candidates from a starting point chosen by
    /// hash (or at random, or by source address only when persistent).
    fn nat_pick(&self, t: &Tuple, n: &NatSpec, now: u64, salt: u32) -> Option<Tuple> {
        let src_nat = n.kind == Some(NatKind::Src);
        // Address range as offsets from addr_min (IPv4 or the low 64 bits of IPv6).
        let (amin, amax) = if n.has_addr {
            (addr_low(&n.addr_min, t.v6), addr_low(&n.addr_max, t.v6))
        } else {
            let a = if src_nat { &t.src } else { &t.dst };
            (addr_low(a, t.v6), addr_low(a, t.v6))
        };
        let n_addr = amax.saturating_sub(amin).saturating_add(1);
        let orig_port = if src_nat { t.sport } else { t.dport };
        // ICMP queries are told apart by their identifier, which NAT moves like a port.
        let icmp = matches!(t.proto, ICMP | ICMPV6);
        let has_ports = matches!(t.proto, TCP | UDP) || icmp;
        let (pmin, pmax) = if !has_ports {
            (orig_port, orig_port)
        } else if n.port_min != 0 {
            (n.port_min, n.port_max.max(n.port_min))
        } else {
            (orig_port, orig_port)
        };
        let n_port = u64::from(pmax - pmin) + 1;
        let seed = if n.random {
            random_u64()
        } else {
            let mut k = *t;
            if n.persistent {
                k.sport = 0;
                k.dport = 0;
                if src_nat {
                    k.dst = [0; 16];
                } else {
                    k.src = [0; 16];
                }
            }
            k.hash() ^ u64::from(salt).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        };
        let total = n_addr.saturating_mul(n_port);
        let a0 = seed % n_addr;
        let p0 = (seed >> 32) % n_port;
        // The original port first when it is in range (OVS keeps ports where it can).
        let keep = orig_port >= pmin && orig_port <= pmax && !n.random;
        let tries = total.min(u64::from(NAT_MAX_TRIES));
        let mut extra_ports: &[(u16, u16)] = &[];
        // Without a port range, a taken port falls back to other ports, as OVS does.
        const FALLBACK: [(u16, u16); 1] = [(1024, 65535)];
        if has_ports && n.port_min == 0 {
            extra_ports = &FALLBACK;
        }
        // `client`: the port is the client's source port (a DNAT without a port range that
        // collides keeps the service's port, as OVS does, and moves the client's).
        let try_one = |a_off: u64, port: u16, client: bool| -> Option<Tuple> {
            let addr = addr_with_low(
                if n.has_addr {
                    &n.addr_min
                } else if src_nat {
                    &t.src
                } else {
                    &t.dst
                },
                t.v6,
                amin + a_off,
            );
            let mut r = t.reverse();
            if icmp {
                r.sport = port;
                r.dport = port;
            }
            if icmp {
                if src_nat {
                    r.dst = addr;
                } else {
                    r.src = addr;
                }
            } else if src_nat {
                r.dst = addr;
                if has_ports {
                    r.dport = port;
                }
            } else {
                r.src = addr;
                if has_ports && client {
                    r.dport = port;
                } else if has_ports {
                    r.sport = port;
                }
            }
            let k = Key::new(&r);
            let map = self.shards[shard_of(k.h)].read().unwrap();
            match map.get(&k) {
                Some(e) if e.conn.alive(now) => None,
                _ => Some(r),
            }
        };
        if keep {
            for k in 0..n_addr.min(tries) {
                if let Some(r) = try_one((a0 + k) % n_addr, orig_port, false) {
                    return Some(r);
                }
            }
        }
        for i in 0..tries {
            let a_off = (a0 + i / n_port) % n_addr;
            let port = pmin + ((p0 + i) % n_port) as u16;
            if let Some(r) = try_one(a_off, port, false) {
                return Some(r);
            }
        }
        for &(lo, hi) in extra_ports {
            let span = u64::from(hi - lo) + 1;
            for i in 0..u64::from(NAT_MAX_TRIES) {
                let port = lo + ((seed.rotate_left(17) + i) % span) as u16;
                if let Some(r) = try_one((a0 + i) % n_addr, port, !src_nat) {
                    return Some(r);
                }
            }
        }
        None
    }

    /// Removes expired connections; returns how many. Pops the due entries of each expiry
    /// queue in turn (one queue's lock at a time, and no shard's while it holds it), so it
    /// costs what expires, not what the table holds. The PMDs expire their own queues as they
    /// go ([`Self::process_batch`]); this catches up for those that are idle.
    pub fn sweep(&self, now: u64) -> usize {
        let mut n = 0;
        let mut due = Vec::new();
        for (i, queue) in self.queues.iter().enumerate() {
            // In chunks, so that a PMD queueing its commits never waits long for the lock.
            loop {
                {
                    let mut q = queue.lock().unwrap();
                    // Entries of connections removed before their turn, when they are many.
                    let early = self.removed_early[i].load(Relaxed);
                    if early > 1024 && early > q.len() / 8 {
                        self.removed_early[i].fetch_sub(early, Relaxed);
                        q.purge();
                    }
                    q.pop_due(now, SWEEP_CHUNK, &mut due);
                }
                let last = due.len() < SWEEP_CHUNK;
                for (deadline, c) in due.drain(..) {
                    n += usize::from(self.expire_one(i, deadline, c, now).is_some_and(|(_, x)| x));
                }
                if last {
                    break;
                }
            }
        }
        // Expectations expire too, and go with their parent.
        self.expectations.sweep(now, |e| self.parent_alive(e, now));
        n
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
                    label: l.label,
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

    /// Connections in the table (committed and not yet expired or removed).
    pub fn n_conns(&self) -> u32 {
        self.n_conns.load(Relaxed)
    }

    /// Connections counted in `zone`.
    pub fn zone_conns(&self, zone: u16) -> u32 {
        self.zone_count[usize::from(zone)].load(Relaxed)
    }

    pub fn maxconns(&self) -> u32 {
        self.maxconns.load(Relaxed)
    }

    pub fn set_maxconns(&self, n: u32) {
        self.maxconns.store(n, Relaxed);
    }

    /// The default zone limit (0: none).
    pub fn default_limit(&self) -> u32 {
        self.default_limit.load(Relaxed)
    }

    pub fn set_default_limit(&self, n: u32) {
        self.default_limit.store(n, Relaxed);
    }

    /// A zone's own limit (0: the default applies).
    pub fn zone_limit(&self, zone: u16) -> u32 {
        self.zone_limit[usize::from(zone)].load(Relaxed)
    }

    pub fn set_zone_limit(&self, zone: u16, n: u32) {
        self.zone_limit[usize::from(zone)].store(n, Relaxed);
    }

    /// Zones with their own limit.
    pub fn zone_limits(&self) -> Vec<(u16, u32)> {
        (0..=u16::MAX)
            .filter_map(|z| match self.zone_limit(z) {
                0 => None,
                l => Some((z, l)),
            })
            .collect()
    }

    pub fn tcp_seq_chk(&self) -> bool {
        self.tcp_seq_chk.load(Relaxed)
    }

    pub fn set_tcp_seq_chk(&self, on: bool) {
        self.tcp_seq_chk.store(on, Relaxed);
    }

    /// Sets timeouts of `zone`'s policy (`None`: the default policy, which every zone without
    /// its own uses). Classes not named keep their values.
    pub fn set_timeouts(&self, zone: Option<u16>, values: &[(TimeoutClass, u32)]) {
        let p = match zone {
            None => self.default_policy.clone(),
            Some(z) => {
                let mut m = self.zone_policies.write().unwrap();
                self.any_zone_policy.store(true, Relaxed);
                let p = m
                    .entry(z)
                    .or_insert_with(|| {
                        Arc::new(Policy {
                            secs: std::array::from_fn(|i| {
                                AtomicU32::new(self.default_policy.secs[i].load(Relaxed))
                            }),
                        })
                    })
                    .clone();
                self.policy_gen.fetch_add(1, Relaxed);
                p
            }
        };
        for (c, s) in values {
            p.secs[*c as usize].store(*s, Relaxed);
        }
    }

    /// Timeouts of `zone`'s policy (the default's for a zone without one).
    pub fn timeouts(&self, zone: Option<u16>) -> [u32; TimeoutClass::COUNT] {
        match zone {
            Some(z) => self.policy_of(z).get(),
            None => self.default_policy.get(),
        }
    }

    /// Removes `zone`'s own policy; its later connections use the default.
    pub fn del_timeouts(&self, zone: u16) -> bool {
        let gone = self.zone_policies.write().unwrap().remove(&zone).is_some();
        self.policy_gen.fetch_add(1, Relaxed);
        gone
    }

    pub fn stats(&self) -> CtStats {
        let c = &self.counters;
        CtStats {
            invalid: std::array::from_fn(|i| c.invalid[i].load(Relaxed)),
            tcp_invalid: c.tcp_invalid.load(Relaxed),
            related_unknown: c.related_unknown.load(Relaxed),
            committed: c.committed.load(Relaxed),
            limit_refused: c.limit_refused.load(Relaxed),
            nat_exhausted: c.nat_exhausted.load(Relaxed),
            insert_conflicts: c.insert_conflicts.load(Relaxed),
            expired: c.expired.load(Relaxed),
        }
    }
}

/// The rewrite of a packet of `c` travelling in the original (`reply == false`) or reply
/// direction: its tuple becomes the other direction's tuple reversed.
fn rewrite_for(c: &Conn, reply: bool) -> NatRewrite {
    let (now, want) = if reply {
        (c.reply, c.orig.reverse())
    } else {
        (c.orig, c.reply.reverse())
    };
    NatRewrite {
        src: (now.src != want.src || now.sport != want.sport).then_some((want.src, want.sport)),
        dst: (now.dst != want.dst || now.dport != want.dport).then_some((want.dst, want.dport)),
        alg: None,
        icmp_error: false,
    }
}

/// The low bits of an address that NAT ranges step through: all of IPv4, the low 64 of IPv6.
fn addr_low(a: &[u8; 16], v6: bool) -> u64 {
    if v6 {
        u64::from_be_bytes(a[8..16].try_into().unwrap())
    } else {
        u64::from(u32::from_be_bytes(a[..4].try_into().unwrap()))
    }
}

fn addr_with_low(base: &[u8; 16], v6: bool, low: u64) -> [u8; 16] {
    let mut a = *base;
    if v6 {
        a[8..16].copy_from_slice(&low.to_be_bytes());
    } else {
        a[..4].copy_from_slice(&(low as u32).to_be_bytes());
    }
    a
}

/// A random number for `nat(random)`: xorshift over the clock and a counter (not for
/// security; spreading ports is all it does).
fn random_u64() -> u64 {
    static STATE: AtomicU64 = AtomicU64::new(0x2545_f491_4f6c_dd1d);
    let mut x = STATE.fetch_add(0x9e37_79b9_7f4a_7c15, Relaxed)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}
