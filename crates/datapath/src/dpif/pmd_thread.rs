//! The PMD threads of a running datapath: how a PMD is made (the same for the threads the
//! datapath starts with and for those a `pmd-cpu-mask` change adds), its thread's loop, and
//! the handle the main thread keeps to command it, read what it publishes and end it.
//!
//! A thread ends in one of two ways: with the whole datapath (the shared stop flag), or alone,
//! when its core leaves the core set (its own exit flag, raised once its rx queues went to
//! other PMDs). Alone, it first hands its waiting misses to the slow path and sends what they
//! output ([`Pmd::retire`]), then gives back its upcall ring's writing end, which the next PMD
//! to start reuses, so the ring's reader never has to learn of a new ring when a thread
//! replaces another.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use conntrack::frag::FragConfig;

use super::idle_wait::{IdleWait, PmdSender, SleepKnobs};
use super::{PortEntry, UpcallFactory};
use crate::doorbell::Doorbell;
use crate::flow_table::Megaflow;
use crate::meter::DpMeters;
use crate::pmd::{DropUpcalls, Pmd, PmdCmd, PmdConfig, RxqLoad, UpcallHandler};
use crate::tsc;
use crate::upcall_queue::{UpcallProducer, UpcallQueue};

/// The main thread's side of a running PMD thread.
pub(super) struct PmdHandle {
    pub(super) core_id: Option<usize>,
    pub(super) cmd: PmdSender,
    thread: Option<JoinHandle<UpcallProducer>>,
    /// Its rx queues and their load, published by the PMD (every 1024 iterations) and by the
    /// main thread after it moved queues.
    pub(super) load: Arc<Mutex<RxqLoad>>,
    /// Set by the PMD when its finite sources are exhausted and it is idle.
    pub(super) drained: Arc<AtomicBool>,
    /// Its packets for the slow path.
    pub(super) upcalls: Arc<UpcallQueue>,
    /// Raised to end this thread alone ([`PmdHandle::retire`]).
    exit: Arc<AtomicBool>,
}

/// What every PMD starts with, whether it starts with the datapath or joins it later.
pub(super) struct PmdSeed<'a> {
    /// Its settings (its `core_id` is replaced by the core it is made for).
    pub(super) config: PmdConfig,
    /// The slow path's maker; misses are dropped without one.
    pub(super) upcall: Option<&'a UpcallFactory>,
    pub(super) conntrack: &'a Arc<conntrack::Conntrack>,
    pub(super) frag: &'a FragConfig,
    /// Megaflows installed by hand (`dp-flows`, `dpctl/add-flow`), which no slow path would
    /// install again.
    pub(super) flows: &'a [Megaflow],
    pub(super) meters: &'a DpMeters,
    pub(super) bonds: &'a crate::bond::DpBonds,
}

impl PmdSeed<'_> {
    /// A PMD for `core` with the seed's settings, megaflows, meters and bonds; it has no queue yet
    /// ([`open_txqs`], then rx queues).
    pub(super) fn make(&self, core: Option<usize>) -> Result<Pmd, String> {
        let mut cfg = self.config;
        cfg.core_id = core;
        let handler: Box<dyn UpcallHandler> = match self.upcall {
            Some(make) => make(),
            None => Box::new(DropUpcalls),
        };
        let mut pmd = Pmd::new(cfg, handler);
        pmd.set_conntrack(self.conntrack.clone());
        pmd.handle(PmdCmd::SetFragConfig(self.frag.clone()));
        for (id, m) in self.meters.iter() {
            let (done, _) = channel();
            pmd.handle(PmdCmd::SetMeter(id, Some(m.clone()), done));
        }
        for (id, b) in self.bonds.iter() {
            let (done, _) = channel();
            pmd.handle(PmdCmd::SetBond(id, Some(b.clone()), done));
        }
        for f in self.flows {
            pmd.add_flow(f.clone())?;
        }
        Ok(pmd)
    }
}

/// Gives `pmd` a tx queue of its own on each of `ports`.
pub(super) fn open_txqs(pmd: &mut Pmd, ports: &mut [PortEntry]) {
    for pe in ports {
        let q = pe.port.open_txq();
        pmd.add_port_txq_counted(pe.no, q, pe.port.tunnel(), pe.gso.clone());
    }
}

/// Starts `pmd`'s thread, polling until `stop` (or its own exit), sleeping or waiting for
/// input as `knobs` say; with `ring`, its `userspace` actions write into that ring rather than
/// into the one it was made with.
pub(super) fn spawn_pmd(
    mut pmd: Pmd,
    stop: Arc<AtomicBool>,
    knobs: Arc<SleepKnobs>,
    ring: Option<UpcallProducer>,
) -> Result<PmdHandle, String> {
    if let Some(r) = ring {
        pmd.set_upcall_producer(r);
    }
    let (tx, rx) = channel();
    let bell = Arc::new(Doorbell::new().map_err(|e| format!("cannot make a PMD's eventfd: {e}"))?);
    let bell2 = bell.clone();
    let upcalls = pmd.upcall_queue();
    let core = pmd.config.core_id;
    let load = Arc::new(Mutex::new(rxq_load(&pmd)));
    let drained = Arc::new(AtomicBool::new(false));
    let exit = Arc::new(AtomicBool::new(false));
    let (load2, drained2, exit2) = (load.clone(), drained.clone(), exit.clone());
    let name = match core {
        Some(c) => format!("pmd-c{c:02}"),
        None => "pmd".to_owned(),
    };
    let thread = std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            if let Some(c) = core {
                pin_to_core(c);
            }
            let mut idle_polls = 0u32;
            let mut n: u64 = 0;
            let mut drained = false;
            let mut sleep = LoadBasedSleep::default();
            let mut idle = IdleWait::new();
            while !stop.load(Ordering::Relaxed) && !exit2.load(Ordering::Acquire) {
                let got = pmd.poll_once();
                pmd.handle_pending(&rx);
                let wait = knobs.idle_wait.load(Ordering::Relaxed);
                if !idle.after_poll(&mut pmd, got, wait, &bell2) {
                    let t = tsc::now();
                    if sleep.after_poll(got, knobs.max_sleep_us.load(Ordering::Relaxed)) {
                        pmd.count_sleep(tsc::now().saturating_sub(t));
                    }
                }
                n += 1;
                if got == 0 {
                    idle_polls = idle_polls.saturating_add(1);
                    if idle_polls > 2 && pmd.sources_exhausted() {
                        drained = true;
                        drained2.store(true, Ordering::Release);
                        // Nothing more will come: stop spinning a core.
                        std::thread::sleep(Duration::from_millis(1));
                    }
                } else {
                    idle_polls = 0;
                }
                // A source added at run time: not drained any more.
                if drained && !pmd.sources_exhausted() {
                    drained = false;
                    drained2.store(false, Ordering::Release);
                }
                if n.is_multiple_of(1024)
                    && let Ok(mut l) = load2.lock()
                {
                    *l = rxq_load(&pmd);
                }
            }
            // Drain commands that raced with the stop.
            pmd.handle_pending(&rx);
            if exit2.load(Ordering::Acquire) {
                pmd.retire();
            }
            pmd.into_upcall_producer()
        })
        .map_err(|e| format!("cannot start PMD thread: {e}"))?;
    Ok(PmdHandle {
        core_id: core,
        cmd: PmdSender::new(tx, bell),
        thread: Some(thread),
        load,
        drained,
        upcalls,
        exit,
    })
}

impl PmdHandle {
    /// Asks the PMD for its rx queues and their load now, and publishes the answer (so that
    /// `pmd-rxq-show` shows a change at once); the last published one if it does not answer.
    pub(super) fn refresh_load(&self) -> RxqLoad {
        let (tx, rx) = channel();
        if self.cmd.send(PmdCmd::RxqLoad(tx)).is_ok()
            && let Ok(l) = rx.recv_timeout(Duration::from_secs(5))
        {
            if let Ok(mut p) = self.load.lock() {
                *p = l.clone();
            }
            return l;
        }
        self.load.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Ends this thread alone (its core left the core set) once it has retired, and returns
    /// its upcall ring's writing end.
    pub(super) fn retire(mut self) -> Option<UpcallProducer> {
        self.exit.store(true, Ordering::Release);
        self.cmd.wake();
        self.join()
    }

    /// Waits for the thread to end (after `retire` or the datapath's stop).
    pub(super) fn join(&mut self) -> Option<UpcallProducer> {
        self.thread.take()?.join().ok()
    }
}

/// `pmd-maxsleep` (OVS 3.1's load-based sleep): after a poll that took fewer than half a batch
/// the thread sleeps, one microsecond longer after each such poll up to the maximum; a poll
/// that takes half a batch or more ends the sleeping. A maximum of 0 (the default) never
/// sleeps: the thread spins, as a PMD does.
#[derive(Default)]
struct LoadBasedSleep {
    us: u64,
}

/// Half of a batch: a poll that takes this many packets or more means the queues are busy.
const SLEEP_THRESH: usize = crate::packet::MAX_BURST / 2;

/// The most `pmd-maxsleep` may be, in microseconds (OVS's RCU quiesce interval).
pub const MAX_SLEEP_US: u64 = 10_000;

impl LoadBasedSleep {
    /// Sleeps as the last poll's `got` packets and the maximum say; returns whether it slept.
    fn after_poll(&mut self, got: usize, max_us: u64) -> bool {
        if max_us == 0 {
            self.us = 0;
            return false;
        }
        if got >= SLEEP_THRESH {
            self.us = 0;
        }
        let slept = self.us > 0;
        if slept {
            std::thread::sleep(Duration::from_micros(self.us));
        }
        self.us = (self.us + 1).min(max_us);
        slept
    }
}

/// What a PMD publishes for `pmd-rxq-show` and rebalancing.
fn rxq_load(pmd: &Pmd) -> RxqLoad {
    let qs = pmd.rxqs().iter();
    (
        qs.map(|q| (q.port_no, q.queue_id, q.cycles)).collect(),
        pmd.rxq_busy(),
    )
}

/// Pins the calling thread to `core`; failure (a core outside the allowed set) is reported and
/// the thread runs unpinned.
fn pin_to_core(core: usize) {
    if let Err(e) = pin_current_thread(core) {
        // Not eprintln!, which panics (here, in the new PMD thread) when stderr fails.
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr().lock(),
            "flowpath: cannot pin PMD thread to core {core}: {e}"
        );
    }
}

/// Runs the calling thread on `core` only: an error names why it cannot (a core past the
/// largest the kernel's set holds, or one outside the process's allowed set).
pub fn pin_current_thread(core: usize) -> Result<(), String> {
    if core >= rustix::thread::CpuSet::MAX_CPU {
        return Err(format!("core {core} out of range"));
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(core);
    rustix::thread::sched_setaffinity(None, &set).map_err(|e| e.to_string())
}

#[cfg(test)]
mod sleep_tests {
    use super::*;

    #[test]
    fn load_based_sleep_grows_by_a_microsecond_to_the_maximum_and_busy_polls_end_it() {
        let mut s = LoadBasedSleep::default();
        // No maximum: never sleeps.
        for _ in 0..3 {
            s.after_poll(0, 0);
            assert_eq!(s.us, 0);
        }
        // Idle polls: 1, 2, 3, then held at the maximum.
        let grown: Vec<u64> = (0..5)
            .map(|_| {
                s.after_poll(0, 3);
                s.us
            })
            .collect();
        assert_eq!(grown, [1, 2, 3, 3, 3]);
        // Fewer than half a batch keeps sleeping; half a batch or more starts again from 0.
        s.after_poll(SLEEP_THRESH - 1, 3);
        assert_eq!(s.us, 3);
        s.after_poll(SLEEP_THRESH, 3);
        assert_eq!(s.us, 1);
        // The maximum lowered to 0: back to spinning at once.
        s.after_poll(0, 0);
        assert_eq!(s.us, 0);
    }
}
