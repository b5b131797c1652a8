//! Expiry of connections (OVS's expiration lists). Each connection holds its expiry time in
//! an atomic, and a lookup ignores an expired connection; connections also wait in expiry
//! queues, one list per timeout ordered by deadline, so that taking out what expired pops the
//! heads of the lists instead of scanning the table. Taking them out locks one queue, then one
//! shard at a time, so expiry never stops the table.
//!
//! Each PMD queues its commits into its own queue (one of [`EXPIRY_QUEUES`], by its cache) and
//! expires its due connections after each burst ([`Conntrack::process_batch`]), keeping them
//! for its next commits (no allocation, no free in another thread); [`Conntrack::sweep`] does
//! the same for every queue, for PMDs that are idle.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;

use super::{ConnRef, Conntrack, CtCache};

/// Expiry queues of the table: connections are spread over them by the PMD (the cache) that
/// committed them, so that a PMD takes its own queue's lock only.
pub(super) const EXPIRY_QUEUES: usize = 16;

/// How far from its tail a queued entry looks for its place among later deadlines (past that it
/// goes at the tail, and may expire late: counted until its turn, never found alive).
const QUEUE_SORT_DEPTH: usize = 64;

/// Connections a PMD's expiry takes out per burst, at most.
pub(super) const EXPIRE_PER_BURST: usize = 128;

/// How long a PMD with nothing to queue leaves its queue alone, at most, in milliseconds.
const QUEUE_RECHECK_MS: u64 = 100;

/// Queue entries a sweep takes per hold of a queue's lock.
const SWEEP_CHUNK: usize = 4096;

/// A queue entry: a connection and the deadline it was queued with.
pub(super) type Queued = (u64, ConnRef);

/// One list of an expiry queue: connections of one timeout (in milliseconds), ordered by
/// deadline, so that expiry pops from the head instead of scanning (OVS's expiration lists).
/// A connection whose expiry moved later is queued again when its old deadline comes; one
/// whose expiry moved earlier (a shorter timeout class) is queued again at once, and its old
/// entry left behind as stale ([`Conn::queued`]).
#[derive(Default)]
pub(super) struct ExpiryQueue {
    lists: Vec<(u64, VecDeque<Queued>)>,
}

impl ExpiryQueue {
    fn push(&mut self, ms: u64, deadline: u64, c: ConnRef) {
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
    pub(super) fn purge(&mut self) {
        for (_, q) in self.lists.iter_mut() {
            q.retain(|(_, c)| !c.dead.load(Relaxed));
        }
    }
}

/// After a packet of connection `c`: if its expiry moved earlier than its queue entry's
/// deadline (a shorter timeout class), it is queued again (into the PMD's `pending`).
#[inline]
pub(super) fn note_expiry(pending: &mut Vec<(u64, u64, ConnRef)>, c: &ConnRef) {
    let (exp, q) = (c.expires.load(Relaxed), c.queued.load(Relaxed));
    if exp < q && c.queued.compare_exchange(q, exp, Relaxed, Relaxed).is_ok() {
        pending.push((c.policy.ms(c.class()), exp, c.clone()));
    }
}

impl Conntrack {
    /// The PMD's side of expiry: queues the connections `cache` committed, then takes out up
    /// to `budget` due ones of its queue. Under the queue's lock only the queue is worked on;
    /// the table's shards are locked after, one at a time.
    #[inline]
    pub(super) fn expire(&self, cache: &mut CtCache, now: u64, budget: usize) {
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
        c: ConnRef,
        now: u64,
    ) -> Option<(ConnRef, bool)> {
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
        if c.traits.helper().is_some() {
            self.expectations.remove_parent(c.id);
        }
        Some((c, counted))
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
}
