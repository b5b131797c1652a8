//! The pipeline's lock: a `RwLock` whose guards remember, per thread, that the thread holds
//! it, so that a debug build refuses (panics on) a thread taking it again.
//!
//! std's `RwLock` lets a waiting writer go before new readers. A thread that takes the read
//! lock while it already holds it therefore deadlocks as soon as a writer queues between its
//! two reads: the writer waits for the first read to end, the second read waits for the
//! writer. That needs a writer at the wrong moment, so it shows rarely and only under load (it
//! once hung a chassis whose status refresh read the pipeline twice while a bundle commit
//! queued to write it). Taken twice on one thread, the lock is a bug whether or not a writer
//! came: debug builds (the test suite's) make it one at once. Release builds keep no record.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::sync::{
    LockResult, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError, TryLockResult,
};

/// A `RwLock` that a thread must not take twice (see the module documentation).
#[derive(Default)]
pub struct PipeLock<T> {
    lock: RwLock<T>,
}

/// Most pipeline locks one thread holds at once (distinct locks: each switch has its own).
const MAX_HELD: usize = 4;

thread_local! {
    /// The addresses of the pipeline locks this thread holds (debug builds).
    static HELD: Cell<[usize; MAX_HELD]> = const { Cell::new([0; MAX_HELD]) };
}

/// This thread's hold on one lock, recorded while it lives (debug builds).
struct Held(usize);

impl Held {
    /// Records that this thread holds the lock at `addr`; panics if it already does.
    fn take(addr: usize) -> Held {
        if cfg!(debug_assertions) {
            HELD.with(|h| {
                let mut held = h.get();
                assert!(
                    !held.contains(&addr),
                    "the pipeline lock taken by a thread that already holds it: a deadlock \
                     as soon as a writer waits between the two"
                );
                if let Some(free) = held.iter_mut().find(|a| **a == 0) {
                    *free = addr;
                }
                h.set(held);
            });
        }
        Held(addr)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if cfg!(debug_assertions) {
            HELD.with(|h| {
                let mut held = h.get();
                if let Some(a) = held.iter_mut().find(|a| **a == self.0) {
                    *a = 0;
                }
                h.set(held);
            });
        }
    }
}

/// A read guard of a [`PipeLock`].
pub struct ReadGuard<'a, T> {
    guard: RwLockReadGuard<'a, T>,
    _held: Held,
}

/// A write guard of a [`PipeLock`].
pub struct WriteGuard<'a, T> {
    guard: RwLockWriteGuard<'a, T>,
    _held: Held,
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// `r`'s guard (or poisoned guard) wrapped with `held`.
fn wrap<G, W>(r: LockResult<G>, held: Held, f: impl FnOnce(G, Held) -> W) -> LockResult<W> {
    match r {
        Ok(g) => Ok(f(g, held)),
        Err(e) => Err(PoisonError::new(f(e.into_inner(), held))),
    }
}

impl<T> PipeLock<T> {
    pub fn new(value: T) -> PipeLock<T> {
        PipeLock {
            lock: RwLock::new(value),
        }
    }

    fn addr(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Shared access, as `RwLock::read`; a debug build panics if this thread holds the lock.
    pub fn read(&self) -> LockResult<ReadGuard<'_, T>> {
        let held = Held::take(self.addr());
        wrap(self.lock.read(), held, |guard, _held| ReadGuard {
            guard,
            _held,
        })
    }

    /// Exclusive access, as `RwLock::write`; a debug build panics if this thread holds the
    /// lock.
    pub fn write(&self) -> LockResult<WriteGuard<'_, T>> {
        let held = Held::take(self.addr());
        wrap(self.lock.write(), held, |guard, _held| WriteGuard {
            guard,
            _held,
        })
    }

    /// Exclusive access if no one holds the lock, as `RwLock::try_write` (never blocks, so
    /// never deadlocks; a debug build still panics if this thread holds the lock).
    pub fn try_write(&self) -> TryLockResult<WriteGuard<'_, T>> {
        let held = Held::take(self.addr());
        match self.lock.try_write() {
            Ok(guard) => Ok(WriteGuard { guard, _held: held }),
            Err(TryLockError::Poisoned(e)) => {
                Err(TryLockError::Poisoned(PoisonError::new(WriteGuard {
                    guard: e.into_inner(),
                    _held: held,
                })))
            }
            Err(TryLockError::WouldBlock) => Err(TryLockError::WouldBlock),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_give_access_and_release_the_lock() {
        let l = PipeLock::new(1);
        {
            let mut w = l.write().unwrap();
            *w += 1;
        }
        assert_eq!(*l.read().unwrap(), 2);
        assert!(l.try_write().is_ok());
        let r = l.read().unwrap();
        // Another thread may read beside it, not write.
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(*l.read().unwrap(), 2);
                assert!(matches!(l.try_write(), Err(TryLockError::WouldBlock)));
            });
        });
        drop(r);
        // Two locks at once on one thread are fine.
        let m = PipeLock::new(0);
        let (_a, _b) = (l.read().unwrap(), m.write().unwrap());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "already holds it")]
    fn a_thread_reading_twice_is_refused() {
        let l = PipeLock::new(0);
        let _first = l.read().unwrap();
        let _second = l.read();
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "already holds it")]
    fn a_reader_writing_is_refused() {
        let l = PipeLock::new(0);
        let _first = l.read().unwrap();
        let _second = l.write();
    }
}
