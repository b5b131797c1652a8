//! OpenFlow port numbers for a bridge's interfaces, handed out as `ovs-vswitchd` 3.1 hands
//! them out. An interface brings a hint: its valid `ofport_request` (1 to 65279), else the
//! `ofport` the database kept from an earlier run, so that numbers survive a restart. A hint
//! no running port holds is granted. Otherwise a cursor walks on from the last number it gave
//! (wrapping in 1..32767: the upper half is left to controllers) to a number never used, or
//! freed more than an hour ago; failing that, the number freed longest ago. A number is thus
//! not reused soon after its port went, so that flows and controllers still naming it do not
//! reach the wrong port. The bridge's own interface is LOCAL (65534) and takes no number.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The highest number a port may ask for (`OFPP_MAX` − 1: 0xff00 and up are reserved).
pub(crate) const OFPORT_MAX: i64 = 65279;

/// Numbers handed out without a request stay below this.
const AUTO_LIMIT: u32 = 32768;

/// How long a freed number rests before it counts as never used.
const REUSE_AFTER: Duration = Duration::from_secs(60 * 60);

/// A valid requested or kept number.
pub(crate) fn valid(n: Option<i64>) -> Option<u32> {
    n.filter(|n| (1..=OFPORT_MAX).contains(n)).map(|n| n as u32)
}

/// One bridge's port numbers: which are in use and when the others were freed.
#[derive(Debug, Default)]
pub(crate) struct OfportPool {
    /// The last number the cursor gave (0 before the first).
    cursor: u32,
    /// Numbers ever used: `None` while a port holds it, else when it was freed.
    usage: BTreeMap<u32, Option<Instant>>,
}

impl OfportPool {
    /// A number for a new port: `hint` if no port holds it, else the cursor's next choice;
    /// `None` when all automatic numbers are held.
    pub fn alloc(&mut self, hint: Option<u32>, now: Instant) -> Option<u32> {
        let n = match hint {
            Some(h) if i64::from(h) <= OFPORT_MAX && self.usage.get(&h) != Some(&None) => h,
            _ => self.next_free(now)?,
        };
        self.usage.insert(n, None);
        Some(n)
    }

    /// A port holds `n`, numbered elsewhere (a configuration file, a request).
    pub fn hold(&mut self, n: u32) {
        self.usage.insert(n, None);
    }

    /// The port holding `n` went.
    pub fn release(&mut self, n: u32, now: Instant) {
        if let Some(u) = self.usage.get_mut(&n) {
            *u = Some(now);
        }
    }

    fn next_free(&mut self, now: Instant) -> Option<u32> {
        let end = self.cursor;
        let mut lru: Option<(Instant, u32)> = None;
        loop {
            self.cursor += 1;
            if self.cursor >= AUTO_LIMIT {
                self.cursor = 1;
            }
            match self.usage.get(&self.cursor) {
                None => return Some(self.cursor),
                Some(Some(freed)) if now.duration_since(*freed) > REUSE_AFTER => {
                    return Some(self.cursor);
                }
                Some(Some(freed)) if lru.is_none_or(|(t, _)| *freed < t) => {
                    lru = Some((*freed, self.cursor));
                }
                Some(_) => {}
            }
            if self.cursor == end || (end == 0 && self.cursor == AUTO_LIMIT - 1) {
                return lru.map(|(_, n)| n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_number_is_not_reused_at_once() {
        let t = Instant::now();
        let mut pool = OfportPool::default();
        let got: Vec<_> = (0..3).map(|_| pool.alloc(None, t).unwrap()).collect();
        assert_eq!(got, vec![1, 2, 3]);
        pool.release(2, t);
        assert_eq!(pool.alloc(None, t), Some(4));
        assert_eq!(pool.alloc(None, t), Some(5));
        // Its database number brings a port back to the number it had.
        pool.release(4, t);
        assert_eq!(pool.alloc(Some(4), t), Some(4));
    }

    #[test]
    fn a_held_request_falls_back_to_the_cursor() {
        let t = Instant::now();
        let mut pool = OfportPool::default();
        assert_eq!(pool.alloc(valid(Some(7)), t), Some(7));
        assert_eq!(pool.alloc(valid(Some(65279)), t), Some(65279));
        assert_eq!(pool.alloc(valid(Some(7)), t), Some(1));
        assert_eq!(pool.alloc(None, t), Some(2));
        assert_eq!(valid(Some(0)), None);
        assert_eq!(valid(Some(65280)), None);
        assert_eq!(valid(Some(-1)), None);
    }

    #[test]
    fn when_all_are_used_the_longest_freed_comes_back() {
        let t = Instant::now();
        let mut pool = OfportPool::default();
        for _ in 1..AUTO_LIMIT {
            pool.alloc(None, t).unwrap();
        }
        assert_eq!(pool.alloc(None, t), None);
        pool.release(9, t);
        pool.release(3, t + Duration::from_secs(1));
        assert_eq!(pool.alloc(None, t + Duration::from_secs(2)), Some(9));
        pool.release(5, t);
        let later = t + REUSE_AFTER + Duration::from_secs(2);
        assert_eq!(pool.alloc(None, later), Some(3));
    }
}
