//! `pmd-idle-wait`: a PMD thread whose rx queues all belong to port kinds OVS polls from its
//! main thread (Linux interfaces through `AF_PACKET`, taps, internal and dummy ports) blocks
//! in poll(2) on their descriptors once it has been idle for [`IDLE_BEFORE_WAIT_US`]
//! ([`SYSCALL_IDLE_BEFORE_WAIT_US`] when every queue's empty poll is a system call: taps and
//! internal ports), instead of spinning a core, as `ovs-vswitchd` waits on such ports rather than polling them from a
//! PMD. Under load it never waits (a poll that receives anything resets the idle time); a
//! PMD with one busy-polled queue (vhost-user, AF_XDP, DPDK, a replay) never waits, as OVS's
//! PMDs never do.
//!
//! The thread's [`Doorbell`] is among the descriptors: the main thread rings it with every
//! command it sends ([`PmdSender`]) and when it stops the thread, so that a command is
//! handled at once. A wait lasts at most until the PMD's next housekeeping and never longer
//! than [`MAX_WAIT_MS`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc::{SendError, Sender};

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::doorbell::Doorbell;
use crate::pmd::{Pmd, PmdCmd};
use crate::tsc;

/// How long a PMD must have received nothing before it waits, in microseconds: long enough
/// that a steady stream never makes it wait, short enough that an idle switch sharing its
/// core with guests or other switches gives the core back at once.
const IDLE_BEFORE_WAIT_US: u64 = 50;

/// The same for a PMD whose every queue is polled by a system call (taps, internal ports):
/// between the frames of a TCP stream of super-frames through taps (one every 30-80 us) the
/// PMDs polled empty taps with nine reads in ten and a third of their time at 50 us; at 10 us
/// they take about a quarter less CPU per byte (docs/performance.md, "Where the time goes").
/// An `AF_PACKET` queue's empty poll only reads its ring: there, waiting that soon cost
/// small packets a tenth of their rate.
const SYSCALL_IDLE_BEFORE_WAIT_US: u64 = 10;

/// The longest one wait lasts, in milliseconds (then the PMD polls and may wait again): what
/// a wake-up the kernel failed to give would cost at worst, as OVS's longest load-based sleep
/// (`pmd-maxsleep` 10 000 us).
const MAX_WAIT_MS: u64 = 10;

/// The knobs of sleeping every PMD thread reads after each poll.
#[derive(Debug)]
pub(super) struct SleepKnobs {
    /// `pmd-maxsleep`, microseconds (0: never sleeps).
    pub(super) max_sleep_us: AtomicU64,
    /// `pmd-idle-wait` (on by default).
    pub(super) idle_wait: AtomicBool,
}

impl Default for SleepKnobs {
    fn default() -> Self {
        SleepKnobs {
            max_sleep_us: AtomicU64::new(0),
            idle_wait: AtomicBool::new(true),
        }
    }
}

/// The main thread's way to send a PMD a command: it goes into the PMD's channel and rings
/// its doorbell, so that a PMD waiting for input handles it at once.
pub(super) struct PmdSender {
    tx: Sender<PmdCmd>,
    bell: Arc<Doorbell>,
}

impl PmdSender {
    pub(super) fn new(tx: Sender<PmdCmd>, bell: Arc<Doorbell>) -> PmdSender {
        PmdSender { tx, bell }
    }

    /// Sends `cmd` and wakes the PMD.
    pub(super) fn send(&self, cmd: PmdCmd) -> Result<(), SendError<PmdCmd>> {
        self.tx.send(cmd)?;
        self.bell.ring();
        Ok(())
    }

    /// Wakes the PMD (to see its stop or exit flag).
    pub(super) fn wake(&self) {
        self.bell.ring();
    }
}

/// A PMD thread's idle time.
pub(super) struct IdleWait {
    /// TSC of the first empty poll of the current idle stretch (0: not idle).
    idle_since: u64,
    /// Ticks of [`IDLE_BEFORE_WAIT_US`].
    before_wait: u64,
    /// Ticks of [`SYSCALL_IDLE_BEFORE_WAIT_US`].
    before_wait_syscall: u64,
    /// Ticks of [`MAX_WAIT_MS`].
    max_wait: u64,
}

impl IdleWait {
    pub(super) fn new() -> IdleWait {
        let hz = tsc::hz();
        IdleWait {
            idle_since: 0,
            before_wait: hz / 1_000_000 * IDLE_BEFORE_WAIT_US,
            before_wait_syscall: hz / 1_000_000 * SYSCALL_IDLE_BEFORE_WAIT_US,
            max_wait: hz / 1000 * MAX_WAIT_MS,
        }
    }

    /// After a poll that received `got` packets: when waiting is `enabled`, the PMD has been
    /// idle long enough (shorter when its queues are polled by system calls) and may wait ([`Pmd::wait_fds`]), blocks until one of its queues or
    /// its doorbell is readable, or until its next housekeeping (counted as a sleep
    /// iteration). Returns whether it waited.
    pub(super) fn after_poll(
        &mut self,
        pmd: &mut Pmd,
        got: usize,
        enabled: bool,
        bell: &Doorbell,
    ) -> bool {
        if got > 0 || !enabled {
            self.idle_since = 0;
            return false;
        }
        let now = tsc::now();
        if self.idle_since == 0 {
            self.idle_since = now;
            return false;
        }
        let before_wait = if pmd.polls_by_syscall() {
            self.before_wait_syscall
        } else {
            self.before_wait
        };
        if now.saturating_sub(self.idle_since) < before_wait {
            return false;
        }
        if !wait(pmd, now, self.max_wait, bell) {
            return false;
        }
        pmd.count_sleep(tsc::now().saturating_sub(now));
        // The next idle stretch starts with the next empty poll.
        self.idle_since = 0;
        true
    }
}

/// Blocks until one of `pmd`'s queues or `bell` is readable, for at most `max_wait` ticks
/// and not past the PMD's next housekeeping; false when the PMD may not wait.
fn wait(pmd: &Pmd, now: u64, max_wait: u64, bell: &Doorbell) -> bool {
    let mut fds: Vec<PollFd<'_>> = Vec::new();
    let Some(deadline) = pmd.wait_fds(&mut fds) else {
        return false;
    };
    let ticks = deadline.saturating_sub(now).min(max_wait);
    if ticks == 0 {
        return false;
    }
    fds.push(PollFd::new(bell, PollFlags::IN));
    let ns = u128::from(ticks) * 1_000_000_000 / u128::from(tsc::hz().max(1));
    let timeout = Timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    };
    // EINTR or a failure: the PMD polls again at once, as after a wake.
    let _ = poll(&mut fds, Some(&timeout));
    bell.clear();
    true
}
