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

use hugemem::HugeSlice;

use super::expiry::{EXPIRE_PER_BURST, EXPIRY_QUEUES, Queued};
use super::{ConnRef, Entry, Policy};
use crate::key::{self, Invalid, Tuple};

/// Buckets of a PMD's lookup cache, each of [`CACHE_WAYS`] entries on one cache line: at
/// least this many (64 KiB)...
const MIN_BUCKETS: usize = 1 << 10;
/// ... and at most this many (64 MiB: 4Mi entries). In between, a power of two about the
/// table's number of connections ([`CtCache::fit`]): a bucket per connection, so that a
/// million connections' tuples (two a connection, where both directions pass) rarely crowd a
/// bucket beyond its four ways, and no more lines and pages than that, so that a small
/// table's lookups stay in few TLB entries. A tuple that does not fit its bucket goes to the
/// shared table on every packet: its shard's lock and hash table, with no prefetch, several
/// cache misses in a row (with a quarter of these buckets, at a million connections, that
/// cost `ct` twice its cycles a packet: `docs/performance.md`). Powers of two divide 2^32: a
/// packet's `conn_ref` (the low half of its tuple's hash) picks the same bucket as the whole
/// hash.
const MAX_BUCKETS: usize = 1 << 20;
const _: () = assert!(MIN_BUCKETS.is_power_of_two() && MAX_BUCKETS.is_power_of_two());
/// Entries per bucket of a PMD's lookup cache.
pub const CACHE_WAYS: usize = 4;
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

/// One line of a PMD's cache: up to [`WAYS`] entries of hashes that share the bucket, the most
/// recently taken in first. An entry is its tuple's hash with the lowest bit replaced by the
/// direction (set: the reply), and the connection.
#[derive(Clone, Default)]
#[repr(align(64))]
pub(super) struct Bucket(pub(super) [Option<(u64, ConnRef)>; WAYS]);
const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

/// Whether the tag of a [`Bucket`] entry is hash `h`'s (the direction bit aside).
#[inline]
pub(super) fn tag_is(tag: u64, h: u64) -> bool {
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
    pub(super) fn of(buckets: &[Bucket], h: u64) -> Option<&Bucket> {
        buckets.get(Bucket::index(h, buckets.len()))
    }

    /// [`CtCache::put`] on the cache's `buckets`, which are made `size` first if they are
    /// fewer (dropping what they held).
    pub(super) fn put(
        buckets: &mut HugeSlice<Bucket>,
        size: usize,
        h: u64,
        e: Entry,
    ) -> (&ConnRef, bool) {
        if buckets.len() < size {
            *buckets = HugeSlice::new(size);
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
    pub(super) fn get(&self, h: u64, t: &Tuple, now: u64) -> Option<(&ConnRef, bool)> {
        self.0.iter().flatten().find_map(|(k, c)| {
            let reply = k & 1 != 0;
            (tag_is(*k, h) && c.alive(now) && (if reply { &c.reply } else { &c.orig }).same(t))
                .then_some((c, reply))
        })
    }
}

/// A PMD's cache of recent lookups: tuple to connection, in buckets of [`WAYS`] entries by the
/// tuple's hash, each entry the hash and the table's entry (the tuple is compared against the
/// connection's own, which the packet reads anyway). A hit takes no lock and writes nothing, and
/// in a table of more than a few thousand connections a burst's buckets are prefetched before
/// its packets are tracked, and their connections a few packets ahead, so that their cache
/// misses overlap ([`Conntrack::process_batch`]). It
/// holds references, so a connection removed from the table may linger here until its entry is
/// reused; entries are checked alive before use. The buckets are allocated at the first
/// connection, and made more as the table grows (`CtCache::fit`).
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
    /// Lookups that went to the table ([`Self::admit`]).
    misses: u32,
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

    /// Which bucket holds a tuple of hash `h` ([`Tuple::hash`]) now: tuples of one bucket
    /// compete for its [`CACHE_WAYS`] entries.
    pub fn bucket_of(&self, h: u64) -> usize {
        Bucket::index(h, self.buckets.len().max(self.size))
    }

    /// Sizes the cache for a table of `conns` connections (see [`MAX_BUCKETS`]); it only
    /// grows, at its next [`Self::put`].
    #[inline]
    pub(super) fn fit(&mut self, conns: u32) {
        self.size = (conns as usize)
            .next_power_of_two()
            .clamp(self.size, MAX_BUCKETS);
    }

    /// Takes `e` in as hash `h`'s entry, first in its bucket (the last one falls out), and
    /// returns it.
    pub(super) fn put(&mut self, h: u64, e: Entry) -> (&ConnRef, bool) {
        Bucket::put(&mut self.buckets, self.size, h, e)
    }

    /// Whether the PMD's cache takes in a connection of hash `h` that was found in the table:
    /// when its bucket has room, else one time in [`ADMIT_EVERY`]. Holding a connection in the
    /// cache costs its reference count (two atomic writes: the count of the one taken in and
    /// of the one pushed out), on lines that are not in the CPU's cache when the table has far
    /// more connections than the cache has room; then most lookups go to the table, which
    /// writes nothing.
    #[inline]
    pub(super) fn admit(&mut self, h: u64) -> bool {
        self.misses = self.misses.wrapping_add(1);
        self.bucket(h).is_none_or(|b| b.0[WAYS - 1].is_none())
            || self.misses.is_multiple_of(ADMIT_EVERY)
    }

    /// Keeps a connection taken out of the table for reuse, if no other thread holds it: this
    /// cache's entries let go of it first.
    pub(super) fn recycle(&mut self, mut c: ConnRef) {
        if !self.buckets.is_empty() {
            for h in [c.orig.hash(), c.reply.hash()] {
                let i = Bucket::index(h, self.buckets.len());
                for slot in &mut self.buckets[i].0 {
                    if slot.as_ref().is_some_and(|(_, e)| ConnRef::ptr_eq(e, &c)) {
                        *slot = None;
                    }
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

    /// Asks for the line of the connection of hash `h` in its bucket, if there is one, that
    /// holds what a UDP or ICMP packet of its direction reads most of the time: the first (the
    /// state, expiry, mark and original tuple), and for the reply direction the second too (the
    /// reply tuple). The policy (read about once a second) and a TCP connection's lock are on
    /// the lines after them.
    #[inline]
    pub(super) fn prefetch_conn(&self, h: u64) {
        if let Some(b) = self.bucket(h) {
            for (k, c) in b.0.iter().flatten() {
                if tag_is(*k, h) {
                    flow::hash::prefetch(&c.expires);
                    if k & 1 != 0 {
                        flow::hash::prefetch(&c.reply);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A million connections get a bucket each: their original tuples (hashes spread as
    /// `Tuple::hash` spreads them) all but 0.4 % fit their bucket's ways (both directions: 3 %),
    /// where with a quarter of the buckets (the cap before) 18 % did not.
    #[test]
    fn a_million_connections_fit_the_cache() {
        let conns = 1_000_000u32;
        let mut c = CtCache::new();
        c.fit(conns);
        assert_eq!(c.size, 1 << 20);
        let mut per = vec![0u8; c.size];
        let mut h = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..conns {
            // splitmix64: hashes as spread as the tuples' CRC-based ones.
            h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = h;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let i = Bucket::index(z ^ (z >> 31), c.size);
            per[i] = per[i].saturating_add(1);
        }
        let beyond: u32 = per
            .iter()
            .map(|&k| u32::from(k.saturating_sub(WAYS as u8)))
            .sum();
        assert!(
            beyond * 100 < conns,
            "{beyond} of {conns} tuples beyond their bucket's ways"
        );
    }
}
