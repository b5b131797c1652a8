//! The reconnection backoff of an active connection, with `ovs-vswitchd`'s rules (its
//! `rconn`): the first attempt is immediate; after a failure the wait doubles from 1 s up to
//! the maximum (8 s by default); a connection that stayed up longer than the current wait
//! starts again from 1 s.

use std::time::{Duration, Instant};

/// The default longest wait between attempts.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(8);

/// The shortest wait after a failure.
const MIN_BACKOFF: Duration = Duration::from_secs(1);

/// When to try again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Backoff {
    max: Duration,
    current: Duration,
    /// A disconnection at or after this instant starts the waits again from 1 s; `None`:
    /// the last attempt failed before it could connect, so the waits go on growing.
    reset_at: Option<Instant>,
}

impl Backoff {
    /// A backoff whose waits grow up to `max` (at least 1 s).
    pub(crate) fn new(max: Duration) -> Backoff {
        Backoff {
            max: max.max(MIN_BACKOFF),
            current: Duration::ZERO,
            reset_at: None,
        }
    }

    /// Changes the longest wait (at least 1 s); returns the current wait, cut to it.
    pub(crate) fn set_max(&mut self, max: Duration) -> Duration {
        self.max = max.max(MIN_BACKOFF);
        self.current = self.current.min(self.max);
        self.current
    }

    /// An attempt to connect started at `now`.
    pub(crate) fn attempt(&mut self, now: Instant) {
        self.reset_at = Some(now + self.current);
    }

    /// The attempt failed without connecting (refused at once, or timed out).
    pub(crate) fn failed(&mut self) {
        self.reset_at = None;
    }

    /// How long an attempt may take to connect and exchange hellos: the current wait, at
    /// least 1 s.
    pub(crate) fn connect_timeout(&self) -> Duration {
        self.current.max(MIN_BACKOFF)
    }

    /// The connection (or the attempt) ended at `now`: how long to wait before the next.
    pub(crate) fn disconnected(&mut self, now: Instant) -> Duration {
        self.current = if self.reset_at.is_some_and(|t| now >= t) {
            MIN_BACKOFF
        } else if self.current < self.max / 2 {
            (self.current * 2).max(MIN_BACKOFF)
        } else {
            self.max
        };
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_to_the_maximum_and_reset_after_a_long_connection() {
        let s = Duration::from_secs;
        let t0 = Instant::now();
        let mut b = Backoff::new(DEFAULT_MAX_BACKOFF);
        let mut now = t0;
        let mut waits = Vec::new();
        for _ in 0..6 {
            // Refused at once, every time.
            b.attempt(now);
            b.failed();
            let w = b.disconnected(now);
            waits.push(w.as_secs());
            now += w;
        }
        assert_eq!(waits, [1, 2, 4, 8, 8, 8]);
        // Connected for longer than the wait: back to 1 s.
        b.attempt(now);
        assert_eq!(b.disconnected(now + s(60)), s(1));
        // A connection that drops at once keeps growing the waits.
        b.attempt(now + s(61));
        assert_eq!(b.disconnected(now + s(61)), s(2));
        // A small maximum caps them; less than 1 s is 1 s.
        let mut b = Backoff::new(s(2));
        let w: Vec<u64> = (0..4)
            .map(|_| {
                b.failed();
                b.disconnected(t0).as_secs()
            })
            .collect();
        assert_eq!(w, [1, 2, 2, 2]);
        // A lower maximum cuts the current wait at once.
        let mut b = Backoff::new(DEFAULT_MAX_BACKOFF);
        for _ in 0..4 {
            b.disconnected(t0);
        }
        assert_eq!(b.set_max(s(3)), s(3));
        assert_eq!(b.disconnected(t0), s(3));
        assert_eq!(Backoff::new(Duration::ZERO).max, s(1));
    }
}
