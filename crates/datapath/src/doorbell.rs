//! A doorbell: an `eventfd(2)` one thread rings and another waits on with poll(2), among
//! other descriptors. A PMD thread that blocks while idle (`pmd-idle-wait`) has one, rung
//! when the main thread sends it a command or stops it; a `dummy` port's receive queue has
//! one, rung when frames are injected.
//!
//! Ringing is a `write(2)` of 1; the descriptor stays readable until [`Doorbell::clear`]
//! reads the count back to zero, so a ring that comes before the waiter polls is not lost.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::event::{EventfdFlags, eventfd};

/// An eventfd to wake a thread blocked in poll(2).
#[derive(Debug)]
pub struct Doorbell {
    fd: OwnedFd,
}

impl Doorbell {
    /// A doorbell that has not rung.
    pub fn new() -> io::Result<Doorbell> {
        let fd = eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)?;
        Ok(Doorbell { fd })
    }

    /// Makes the descriptor readable (until the next [`Doorbell::clear`]).
    pub fn ring(&self) {
        // Only a counter at its maximum refuses a write (EAGAIN): it is readable already.
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }

    /// Reads the count back to zero: the descriptor is not readable until the next ring.
    pub fn clear(&self) {
        let mut buf = [0u8; 8];
        // EAGAIN: it had not rung.
        let _ = rustix::io::read(&self.fd, &mut buf);
    }
}

impl AsFd for Doorbell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::event::{PollFd, PollFlags, Timespec, poll};

    fn readable(d: &Doorbell) -> bool {
        let mut fds = [PollFd::new(d, PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        poll(&mut fds, Some(&now)).expect("poll") == 1
    }

    #[test]
    fn a_ring_stays_readable_until_cleared_and_rings_do_not_pile_up_past_a_clear() {
        let d = Doorbell::new().expect("eventfd");
        assert!(!readable(&d));
        d.ring();
        d.ring();
        assert!(readable(&d));
        d.clear();
        assert!(!readable(&d));
        // A clear with nothing rung is harmless.
        d.clear();
        assert!(!readable(&d));
    }
}
