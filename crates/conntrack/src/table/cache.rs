//! A PMD's connection cache ([`CtCache`]): a set-associative cache of recent lookups in front
//! of the shared table, so that the packets of known connections skip the shard and its lock.
//! In a table of more than a few thousand connections, a burst's buckets are prefetched before
//! its packets are tracked, and each packet's connection a few packets before its turn
//! ([`Conntrack::process_batch`]; a smaller table stays in the core's caches). The cache is also
//! where a PMD keeps its side of expiry: the connections it committed and has yet to queue, and
//! those it took out and may reuse.
//!
//! [`Conntrack::process_batch`]: super::Conntrack::process_batch

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use hugemem::{ArcRef, HugeSlice, TaggedArc};

use super::expiry::{EXPIRE_PER_BURST, EXPIRY_QUEUES, Queued};
use super::{Conn, ConnRef, Entry, Policy};
use crate::key::{self, Invalid, Tuple};

/// Buckets of a PMD's lookup cache, each of [`CACHE_WAYS`] entries on one cache line: at
/// least this many (64 KiB)...
const MIN_BUCKETS: usize = 1 << 10;
/// ... and at most this many (64 MiB: 8Mi entries). In between, a bucket per connection up to
/// [`SPARSE_BUCKETS`], and past it a power of two about a quarter of the table's number of
/// connections ([`CtCache::fit`]): two entries a connection, so that a million connections'
/// original tuples rarely crowd a bucket beyond its eight ways (0.7 % of them), in a quarter
/// of the lines a bucket per connection took (16 MiB at a million): the bucket is the first
/// of the two random lines a packet of a large table reads, and the fewer lines the buckets
/// span, the more of them the CPU's last-level cache keeps (on the Intel class a bucket and
/// its connection cost about a third less from 16 MiB than from 64 MiB in `flowpath bench
/// host`; in `flowpath bench ct`, whose frames and connections pass through the same cache,
/// the difference is within the noise: `docs/performance.md`).
/// Where both directions pass (four tuples a bucket, 12 % beyond the ways) the cache doubles
/// its buckets when too many lookups go to the table ([`CtCache::fit`]). A tuple that does
/// not fit its bucket goes to the shared table on every packet: its shard's lock and hash
/// table, with no prefetch, several cache misses in a row. Powers of two divide 2^32: a
/// packet's `conn_ref` (the low half of its tuple's hash) picks the same bucket as the whole
/// hash, and holds its tag ([`tag_of`]).
const MAX_BUCKETS: usize = 1 << 20;
const _: () = assert!(MIN_BUCKETS.is_power_of_two() && MAX_BUCKETS.is_power_of_two());
/// Up to this many buckets (4 MiB), a bucket per connection: the buckets a table of that size
/// reads stay in the CPU's caches, and the fewer entries a bucket holds the fewer a lookup
/// passes over; past it, ...
const SPARSE_BUCKETS: usize = 1 << 16;
/// ... a bucket per this many connections (but never fewer buckets than that), before the
/// cache spreads ([`CtCache::fit`]).
const CONNS_PER_BUCKET: usize = 4;
/// How many times the cache may double its buckets beyond [`CONNS_PER_BUCKET`]'s sizing.
const MAX_SPREAD: u32 = 2;
/// Packets between two looks at how many lookups went to the table ([`CtCache::fit`]) ...
const SPREAD_WINDOW: u32 = 1 << 16;
/// ... and the share of them (one in this many) beyond which the cache spreads.
const SPREAD_WHEN_ONE_IN: u32 = 32;
/// Entries per bucket of a PMD's lookup cache.
pub const CACHE_WAYS: usize = 8;
use CACHE_WAYS as WAYS;

/// A connection found in the table pushes another out of a full bucket of the PMD's cache one
/// time in this many ([`CtCache::admit`]): rarely, because each push sends the connection
/// pushed out to the table at its next packet, where the tuples of a bucket of more than
/// [`CACHE_WAYS`] take turns (at a million connections 1.2 % of the packets went to the table
/// with one time in 4, 0.8 % never pushing out); often enough that a bucket full of idle
/// connections takes in an active one after a few of its packets.
const ADMIT_EVERY: u32 = 16;

/// Connections a PMD keeps for reuse.
const POOL_MAX: usize = 1024;

/// The tag of a tuple of hash `h` in its bucket: 16 bits of the low half of the hash (which a
/// packet's `conn_ref` keeps), of which at least 12 are not the bucket's index.
#[inline(always)]
pub(super) fn tag_of(h: u64) -> u16 {
    (h >> 16) as u16
}

/// One line of a PMD's cache: up to [`WAYS`] entries of hashes that share the bucket, the most
/// recently taken in first. An entry is the connection, its tuple's tag ([`tag_of`]) and the
/// direction (set: the reply), in one word.
#[derive(Default)]
#[repr(align(64))]
pub(super) struct Bucket(pub(super) [Option<TaggedArc<Conn>>; WAYS]);
const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

impl Bucket {
    /// The index of hash `h`'s bucket among `n` (a power of two, or 0: then none).
    #[inline]
    fn index(h: u64, n: usize) -> usize {
        (h as usize) & n.wrapping_sub(1)
    }

    /// Hash `h`'s bucket among `buckets` (none before the first connection).
    #[inline]
    pub(super) fn of(buckets: &[Bucket], h: u64) -> Option<&Bucket> {
        buckets.get(Bucket::index(h, buckets.len()))
    }

    /// [`CtCache::put`] on the cache's `buckets`, which are made `size` first if they are
    /// fewer (dropping what they held). `e` back when the cache cannot hold it (its address
    /// leaves no room for the tag: [`TaggedArc::new`]).
    pub(super) fn put(
        buckets: &mut HugeSlice<Bucket>,
        size: usize,
        h: u64,
        e: Entry,
    ) -> Result<(ArcRef<'_, Conn>, bool), Entry> {
        if buckets.len() < size {
            *buckets = HugeSlice::new(size);
        }
        let reply = e.reply;
        let way = TaggedArc::new(e.conn, tag_of(h), reply).map_err(|conn| Entry { conn, reply })?;
        let i = Bucket::index(h, buckets.len());
        let b = &mut buckets[i].0;
        // The new entry goes first and those before the first free way move down one; an
        // entry of the same tag (most likely the tuple's earlier connection, which a new one
        // replaced) ends the move and falls out, where otherwise it would stay to be passed
        // over by each lookup until pushed out.
        let tag = way.tag();
        let mut moving = b[0].take();
        for w in &mut b[1..] {
            if moving.as_ref().is_none_or(|m| m.tag() == tag) {
                break;
            }
            moving = std::mem::replace(w, moving);
        }
        drop(moving);
        Ok((b[0].insert(way).arc(), reply))
    }

    /// The connection of hash `h` whose tuple of the direction is `t`, alive, and whether
    /// `t` is its reply direction.
    #[inline(always)]
    pub(super) fn get(&self, h: u64, t: &Tuple, now: u64) -> Option<(ArcRef<'_, Conn>, bool)> {
        let tag = tag_of(h);
        self.ways().find_map(|w| {
            if w.tag() != tag {
                return None;
            }
            let (c, reply) = (w.arc(), w.flag());
            (c.alive(now) && (if reply { &c.reply } else { &c.orig }).same(t)).then_some((c, reply))
        })
    }

    /// The bucket's entries, most recent first: they are packed at its start (a free way
    /// ends them).
    #[inline(always)]
    fn ways(&self) -> impl Iterator<Item = &TaggedArc<Conn>> {
        self.0.iter().map_while(Option::as_ref)
    }

    /// The connection of the original tuple of `conn_ref` (a packet's: the low half of its
    /// tuple's hash) in this bucket, if any: the first of the tag (the caller compares the
    /// tuple).
    #[inline]
    pub(super) fn orig_of(&self, conn_ref: u32) -> Option<ArcRef<'_, Conn>> {
        let tag = tag_of(u64::from(conn_ref));
        self.ways().find(|w| w.tag() == tag).map(|w| w.arc())
    }
}

/// A PMD's cache of recent lookups: tuple to connection, in buckets of [`WAYS`] entries by the
/// tuple's hash, each entry the connection, a tag of the hash and the direction in one word
/// (the tuple is compared against the connection's own, which the packet reads anyway). A
/// hit takes no lock and writes nothing, and in a table of more than a few thousand
/// connections a burst's buckets are prefetched before its packets are tracked, and their
/// connections a few packets ahead, so that their cache misses overlap
/// ([`Conntrack::process_batch`]). It holds references, so a connection removed from the
/// table may linger here until its entry is reused; entries are checked alive before use.
/// The buckets are allocated at the first connection, and made more as the table grows
/// (`CtCache::fit`).
///
/// It is also the PMD's side of expiry: the connections it committed go into one expiry queue
/// of the table (`queue`), first into `pending` and then, once per call, into the queue under
/// its lock; [`Conntrack::process_batch`] expires the queue's due connections, and keeps those
/// no other thread holds in `pool`, to be reused by the next commits: setting up a connection
/// allocates nothing, and a connection is freed by the thread that made it.
///
/// [`Conntrack::process_batch`]: super::Conntrack::process_batch
pub struct CtCache {
    /// On huge pages once they span one (from 32 768 buckets): a packet's bucket is then
    /// rarely a TLB miss.
    pub(super) buckets: HugeSlice<Bucket>,
    /// How many buckets there should be ([`Self::fit`]).
    pub(super) size: usize,
    /// Scratch of [`super::Conntrack::process_batch`]: a burst's parsed packets, each written
    /// over what an earlier burst left in its place (never emptied: placeholders cost a burst
    /// a dozen stores a packet).
    pub(super) parsed: Vec<Result<key::Parsed, Invalid>>,
    pub(super) queue: usize,
    /// Connections to queue: timeout, deadline, connection.
    pub(super) pending: Vec<(u64, u64, ConnRef)>,
    /// Scratch of expiry.
    pub(super) due: Vec<Queued>,
    pub(super) pool: Vec<ConnRef>,
    /// Lookups that went to the table ([`Self::admit`]), wrapping.
    misses: u32,
    /// Of those since the last look ([`Self::fit`]), the ones whose bucket was full.
    recent_misses: u32,
    /// Packets tracked since the last look at `recent_misses` ([`Self::fit`]).
    tracked: u32,
    /// How many times the buckets were doubled for lookups that went to the table.
    spread: u32,
    /// When the PMD looks at its queue next, with nothing to queue (its earliest deadline, or
    /// a little later than it last looked: another thread may queue into it).
    pub(super) next_due: u64,
    /// The policy of the zone of the last commit: zone, the table's `policy_gen`, policy.
    pub(super) policy: Option<(u16, (usize, u64), Arc<Policy>)>,
}

impl Default for CtCache {
    fn default() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        CtCache {
            buckets: HugeSlice::default(),
            size: MIN_BUCKETS,
            parsed: vec![Err(Invalid::L3); super::process::BURST],
            queue: NEXT.fetch_add(1, Relaxed) % EXPIRY_QUEUES,
            pending: Vec::with_capacity(64),
            due: Vec::with_capacity(EXPIRE_PER_BURST),
            pool: Vec::new(),
            misses: 0,
            recent_misses: 0,
            tracked: 0,
            spread: 0,
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
    pub(super) fn bucket(&self, h: u64) -> Option<&Bucket> {
        Bucket::of(&self.buckets, h)
    }

    /// How many lookups of this PMD went to the shared table and found a connection there
    /// (wrapping): each one the cache did not answer.
    pub fn table_lookups(&self) -> u32 {
        self.misses
    }

    /// Which bucket holds a tuple of hash `h` ([`Tuple::hash`]) now: tuples of one bucket
    /// compete for its [`CACHE_WAYS`] entries.
    pub fn bucket_of(&self, h: u64) -> usize {
        Bucket::index(h, self.buckets.len().max(self.size))
    }

    /// Sizes the cache for a table of `conns` connections (see [`MAX_BUCKETS`]), before a
    /// burst of `pkts` packets; it only grows, at its next [`Self::put`]. Once in
    /// [`SPREAD_WINDOW`] packets it looks at how many of their lookups went to the table for
    /// want of room in their bucket ([`Self::admit`]): more than one in
    /// [`SPREAD_WHEN_ONE_IN`], and the buckets are doubled (at most
    /// [`MAX_SPREAD`] times), as where both directions of every connection pass.
    #[inline]
    pub(super) fn fit(&mut self, conns: u32, pkts: usize) {
        self.tracked = self.tracked.saturating_add(pkts as u32);
        if self.tracked >= SPREAD_WINDOW {
            if self.recent_misses > self.tracked / SPREAD_WHEN_ONE_IN && self.spread < MAX_SPREAD {
                self.spread += 1;
            }
            (self.tracked, self.recent_misses) = (0, 0);
        }
        let per_conn = (conns as usize).next_power_of_two();
        let want = per_conn
            .min(SPARSE_BUCKETS)
            .max(per_conn / CONNS_PER_BUCKET);
        self.size = (want << self.spread).clamp(self.size, MAX_BUCKETS);
    }

    /// Takes `e` in as hash `h`'s entry, first in its bucket (an entry of the same tag, or else
    /// the last one, falls out); `e` back when the cache cannot hold it.
    pub(super) fn put(&mut self, h: u64, e: Entry) -> Result<(), Entry> {
        Bucket::put(&mut self.buckets, self.size, h, e).map(drop)
    }

    /// Whether the PMD's cache takes in a connection of hash `h` that was found in the table:
    /// when its bucket has room, else one time in [`ADMIT_EVERY`]. Holding a connection in the
    /// cache costs its reference count (two atomic writes: the count of the one taken in and
    /// of the one pushed out), on lines that are not in the CPU's cache when the table has far
    /// more connections than the cache has room; then most lookups go to the table, which
    /// writes nothing. A lookup that went to the table though its bucket had room (the
    /// cache empty after it grew, or the connection not seen before by this PMD) is no sign of
    /// too few buckets: only those of full buckets count towards spreading them ([`Self::fit`]).
    #[inline]
    pub(super) fn admit(&mut self, h: u64) -> bool {
        self.misses = self.misses.wrapping_add(1);
        if self.bucket(h).is_none_or(|b| b.0[WAYS - 1].is_none()) {
            return true;
        }
        self.recent_misses = self.recent_misses.saturating_add(1);
        self.misses.is_multiple_of(ADMIT_EVERY)
    }

    /// Keeps a connection taken out of the table for reuse, if no other thread holds it: this
    /// cache's entries let go of it first.
    pub(super) fn recycle(&mut self, mut c: ConnRef) {
        if !self.buckets.is_empty() {
            for h in [c.orig.hash(), c.reply.hash()] {
                let i = Bucket::index(h, self.buckets.len());
                let b = &mut self.buckets[i].0;
                // The entries after it move up, so that they stay packed.
                if let Some(at) = b
                    .iter()
                    .position(|w| w.as_ref().is_some_and(|w| w.refers_to(&c)))
                {
                    b[at] = None;
                    b[at..].rotate_left(1);
                }
            }
        }
        if self.pool.len() < POOL_MAX && ConnRef::get_mut(&mut c).is_some() {
            self.pool.push(c);
        }
    }

    /// Asks for the bucket of hash `h` ahead of its use (a burst's buckets first, then their
    /// connections: [`Self::prefetch_conn`]).
    #[inline]
    pub(super) fn prefetch_bucket(&self, h: u64) {
        if let Some(b) = self.bucket(h) {
            flow::hash::prefetch(b);
        }
    }

    /// Asks for the line of the connection of hash `h` in its bucket, if there is one (the
    /// first entry of its tag: the one a lookup finds but for a rare second tuple of the same
    /// tag in the bucket), that holds what a UDP or ICMP packet of its direction reads most
    /// of the time: the first (the state, expiry, mark and original tuple), and for the reply
    /// direction the second too (the reply tuple). The policy (read about once a second) and a
    /// TCP connection's lock are on the lines after them.
    #[inline]
    pub(super) fn prefetch_conn(&self, h: u64) {
        if let Some(b) = self.bucket(h) {
            let tag = tag_of(h);
            if let Some(w) = b.ways().find(|w| w.tag() == tag) {
                let c = w.arc();
                flow::hash::prefetch(&c.expires);
                if w.flag() {
                    flow::hash::prefetch(&c.reply);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buckets' entries of `tuples` hashes (spread as `Tuple::hash` spreads them) beyond
    /// their bucket's ways, with `buckets` buckets.
    fn beyond_ways(tuples: u32, buckets: usize) -> u32 {
        let mut per = vec![0u8; buckets];
        let mut h = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..tuples {
            // splitmix64: hashes as spread as the tuples' CRC-based ones.
            h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = h;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let i = Bucket::index(z ^ (z >> 31), buckets);
            per[i] = per[i].saturating_add(1);
        }
        per.iter()
            .map(|&k| u32::from(k.saturating_sub(WAYS as u8)))
            .sum()
    }

    /// A million connections get a bucket for four: their original tuples all but 0.7 % fit
    /// their bucket's ways (16 MiB of buckets); where both directions pass, 12 % do not, and
    /// once the lookups that go to the table show it, the cache doubles its buckets, after
    /// which 0.7 % do not.
    #[test]
    fn a_million_connections_fit_the_cache() {
        // Small tables get a bucket per connection, up to 4 MiB of them.
        for (conns, buckets) in [(8, MIN_BUCKETS), (2000, 2048), (100_000, SPARSE_BUCKETS)] {
            let mut c = CtCache::new();
            c.fit(conns, 0);
            assert_eq!(c.size, buckets, "{conns} connections");
        }
        let conns = 1_000_000u32;
        let mut c = CtCache::new();
        c.fit(conns, 0);
        assert_eq!(c.size, 1 << 18);
        assert_eq!(c.size * size_of::<Bucket>(), 16 << 20);
        let beyond = beyond_ways(conns, c.size);
        assert!(
            beyond * 100 < conns,
            "{beyond} of {conns} tuples beyond their bucket's ways"
        );
        let both = beyond_ways(2 * conns, c.size);
        assert!(
            both * 10 > 2 * conns,
            "{both} of both directions' tuples beyond the ways"
        );
        // Lookups that went to the table with room in their bucket (here no buckets yet, as
        // in a cache that just grew) do not count.
        for _ in 0..SPREAD_WINDOW {
            assert!(c.admit(1));
        }
        c.fit(conns, SPREAD_WINDOW as usize);
        assert_eq!(c.size, 1 << 18);
        // A window of packets of which 1 in 40 went to the table for want of room: no
        // spreading.
        c.recent_misses = SPREAD_WINDOW / 40;
        c.fit(conns, SPREAD_WINDOW as usize);
        assert_eq!(c.size, 1 << 18);
        // One of 1 in 8 (as `both`): the buckets double, and then hold both directions.
        c.recent_misses = SPREAD_WINDOW / 8;
        c.fit(conns, SPREAD_WINDOW as usize);
        assert_eq!(c.size, 1 << 19);
        let both = beyond_ways(2 * conns, c.size);
        assert!(both * 100 < 2 * conns, "{both} beyond, spread");
        // At most `MAX_SPREAD` times.
        for _ in 0..4 {
            c.recent_misses = SPREAD_WINDOW / 8;
            c.fit(conns, SPREAD_WINDOW as usize);
        }
        assert_eq!(c.size, 1 << 20);
    }
}
