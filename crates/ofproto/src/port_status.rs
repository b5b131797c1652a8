//! Port changes announced before the command that made them returns. `ovs-vswitchd` sends
//! a port's `OFPT_PORT_STATUS` in the main-loop turn that adds, removes or changes it, before
//! `ovs-vsctl` sees its `cur_cfg`: a controller connected then hears of the change before the
//! answer to anything it asks next (a barrier), and one that connects afterwards is not told
//! of it. Whatever changes ports (the control commands, the OVSDB reconfiguration) calls
//! [`PortStatusSync::announce`] once it is done; the OpenFlow server, registered with
//! [`PortStatusSync::serve`], compares the ports with what it last told its connections on
//! its next turn, sends what changed and answers ([`PortStatusSync::answered`]).

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Requests for announcements, and the server that answers them.
#[derive(Default)]
pub struct PortStatusSync {
    state: Mutex<State>,
    answered: Condvar,
}

#[derive(Default)]
struct State {
    /// The number of the latest request.
    requested: u64,
    /// Requests up to this one are answered.
    answered: u64,
    /// Makes the server's loop turn; `None` while no server runs.
    wake: Option<Box<dyn Fn() + Send + Sync>>,
}

impl PortStatusSync {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers the server; `wake` makes its loop turn.
    pub fn serve(&self, wake: Box<dyn Fn() + Send + Sync>) {
        self.state().wake = Some(wake);
    }

    /// The server stops: waiting callers return, later ones do not wait.
    pub fn stop_serving(&self) {
        let mut s = self.state();
        s.wake = None;
        s.answered = s.requested;
        self.answered.notify_all();
    }

    /// The latest request not answered yet, for the server to answer once it has synced.
    pub fn pending(&self) -> Option<u64> {
        let s = self.state();
        (s.requested > s.answered).then_some(s.requested)
    }

    /// The server has sent what changed up to request `upto` ([`Self::pending`]'s).
    pub fn answered(&self, upto: u64) {
        let mut s = self.state();
        s.answered = s.answered.max(upto);
        self.answered.notify_all();
    }

    /// Asks the server to send what changed in the ports so far and waits until it has, at
    /// most `timeout`. Whether it has: `false` when no server runs or it did not answer in
    /// time (the changes then go out on its next turn of its own). Not to be called with the
    /// pipeline's or the datapath's lock held: the server takes both to sync.
    pub fn announce(&self, timeout: Duration) -> bool {
        let mut s = self.state();
        if s.wake.is_none() {
            return false;
        }
        s.requested += 1;
        let mine = s.requested;
        if let Some(wake) = &s.wake {
            wake();
        }
        let deadline = Instant::now() + timeout;
        while s.answered < mine {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            s = self
                .answered
                .wait_timeout(s, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn without_a_server_nothing_waits() {
        let p = PortStatusSync::default();
        assert!(!p.announce(Duration::from_secs(10)));
        assert_eq!(p.pending(), None);
    }

    #[test]
    fn an_announcement_waits_for_the_servers_answer() {
        let p = Arc::new(PortStatusSync::default());
        let wakes = Arc::new(AtomicUsize::new(0));
        let w = wakes.clone();
        p.serve(Box::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        }));
        let server = {
            let p = p.clone();
            std::thread::spawn(move || {
                loop {
                    if let Some(n) = p.pending() {
                        p.answered(n);
                        return n;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        assert!(p.announce(Duration::from_secs(10)));
        assert_eq!(server.join().unwrap(), 1);
        assert_eq!(wakes.load(Ordering::Relaxed), 1);
        assert_eq!(p.pending(), None);
    }

    #[test]
    fn a_server_that_does_not_answer_is_waited_for_no_longer_than_asked() {
        let p = PortStatusSync::default();
        p.serve(Box::new(|| {}));
        let t = Instant::now();
        assert!(!p.announce(Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert_eq!(p.pending(), Some(1));
        p.stop_serving();
        assert_eq!(p.pending(), None);
        assert!(!p.announce(Duration::from_secs(10)));
    }
}
