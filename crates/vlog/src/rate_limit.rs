//! Rate-limited logging, as OVS's `VLOG_*_RL`: a message site that a peer can trigger at will
//! (a malformed packet, a flood) logs at most `burst` messages at once and `per_minute` a
//! minute after that. What is dropped is counted, and the next message that goes out is
//! preceded by OVS's summary: `Dropped N log messages in last S seconds (most recently, T
//! seconds ago) due to excessive rate`. A module at `dbg` level for any destination logs
//! everything, as in OVS.

use std::sync::Mutex;
use std::time::Instant;

/// Tokens one message costs (OVS's `VLOG_MSG_TOKENS`); `per_minute` tokens come in a
/// millisecond.
const MSG_TOKENS: u64 = 60 * 1000;

/// A rate limit for one message site (a `static`).
pub struct RateLimit {
    per_minute: u64,
    burst: u64,
    state: Mutex<State>,
}

struct State {
    tokens: u64,
    last_fill: Option<Instant>,
    dropped: u32,
    first_dropped: Option<Instant>,
    last_dropped: Option<Instant>,
}

/// What [`RateLimit::admit`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Drop the message (counted).
    Drop,
    /// Log it; nothing was dropped since the last one.
    Log,
    /// Log the summary of what was dropped (count, seconds since the first and the last
    /// drop), then the message.
    LogAfterDrops(u32, u64, u64),
}

impl RateLimit {
    /// At most `per_minute` messages a minute, in bursts of at most `burst`.
    pub const fn new(per_minute: u32, burst: u32) -> RateLimit {
        RateLimit {
            per_minute: per_minute as u64,
            burst: burst as u64,
            state: Mutex::new(State {
                tokens: 0,
                last_fill: None,
                dropped: 0,
                first_dropped: None,
                last_dropped: None,
            }),
        }
    }

    /// Whether a message may go out at `now` (the bucket starts full).
    pub fn admit(&self, now: Instant) -> Admit {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let cap = self.burst.saturating_mul(MSG_TOKENS);
        s.tokens = match s.last_fill {
            None => cap,
            Some(t) => {
                let ms = now.saturating_duration_since(t).as_millis();
                let add = u64::try_from(ms).unwrap_or(u64::MAX);
                s.tokens
                    .saturating_add(add.saturating_mul(self.per_minute))
                    .min(cap)
            }
        };
        s.last_fill = Some(now);
        if s.tokens < MSG_TOKENS {
            if s.dropped == 0 {
                s.first_dropped = Some(now);
            }
            s.dropped = s.dropped.saturating_add(1);
            s.last_dropped = Some(now);
            return Admit::Drop;
        }
        s.tokens -= MSG_TOKENS;
        if s.dropped == 0 {
            return Admit::Log;
        }
        let secs = |t: Option<Instant>| t.map_or(0, |t| now.saturating_duration_since(t).as_secs());
        let a = Admit::LogAfterDrops(s.dropped, secs(s.first_dropped), secs(s.last_dropped));
        s.dropped = 0;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_then_the_rate_and_the_drops_are_summed_up() {
        let rl = RateLimit::new(1, 5);
        let t0 = Instant::now();
        for _ in 0..5 {
            assert_eq!(rl.admit(t0), Admit::Log);
        }
        for _ in 0..100 {
            assert_eq!(rl.admit(t0 + Duration::from_secs(1)), Admit::Drop);
        }
        assert_eq!(rl.admit(t0 + Duration::from_secs(59)), Admit::Drop);
        // A minute after the burst, one message's worth has come in.
        assert_eq!(
            rl.admit(t0 + Duration::from_secs(61)),
            Admit::LogAfterDrops(101, 60, 2)
        );
        assert_eq!(rl.admit(t0 + Duration::from_secs(62)), Admit::Drop);
        assert_eq!(
            rl.admit(t0 + Duration::from_secs(200)),
            Admit::LogAfterDrops(1, 138, 138)
        );
    }
}
