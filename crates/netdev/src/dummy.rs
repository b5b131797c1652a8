//! `dummy` ports: ports of no device, which receive what the control plane injects (OVS's
//! `netdev-dummy`, whose `netdev-dummy/receive` command OVS's own test suite drives) and
//! count what they are sent.
//!
//! Each port has an [`Injector`], found by the port's name ([`injector`]): a bounded queue
//! the control thread fills and the PMD that polls the port's one rx queue drains. The PMD
//! reads an atomic count first and takes the queue's lock only when frames wait, so an idle
//! dummy port costs its PMD one load per poll. As OVS's main thread waits on its dummy ports,
//! a PMD may wait on an injector's doorbell (`pmd-idle-wait`), rung by each injection and by
//! [`Injector::settle`].

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use datapath::doorbell::Doorbell;
use datapath::packet::{Batch, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};

/// Most frames an injector holds before the PMD takes them; more is refused.
pub const INJECT_LIMIT: usize = 4096;

/// The receive queue of one dummy port, filled from outside the datapath.
#[derive(Default)]
pub struct Injector {
    queue: Mutex<VecDeque<Box<[u8]>>>,
    pending: AtomicUsize,
    /// How many times the PMD has polled the port.
    polls: AtomicUsize,
    /// Rung when there is something for the PMD to do (`None`: no eventfd could be made;
    /// the PMD then never waits on this port).
    bell: Option<Doorbell>,
    /// Set with each ring, so that the PMD clears the doorbell only after one.
    rung: AtomicBool,
}

impl Injector {
    fn new() -> Injector {
        Injector {
            bell: Doorbell::new().ok(),
            ..Injector::default()
        }
    }

    /// Wakes a PMD waiting on the port.
    fn ring(&self) {
        if let Some(b) = &self.bell {
            self.rung.store(true, Ordering::SeqCst);
            b.ring();
        }
    }

    /// Clears the doorbell if it rang (before the PMD looks at the queue).
    fn clear(&self) {
        if let Some(b) = &self.bell
            && self.rung.swap(false, Ordering::SeqCst)
        {
            b.clear();
        }
    }

    /// Queues `frames` to be received, all or none: an error when they would pass
    /// [`INJECT_LIMIT`].
    pub fn inject(&self, frames: Vec<Vec<u8>>) -> Result<(), String> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() + frames.len() > INJECT_LIMIT {
            return Err(format!(
                "receive queue full ({} frames wait, at most {INJECT_LIMIT})",
                q.len()
            ));
        }
        q.extend(frames.into_iter().map(Vec::into_boxed_slice));
        self.pending.store(q.len(), Ordering::SeqCst);
        drop(q);
        self.ring();
        Ok(())
    }

    /// Frames waiting to be received.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Waits, up to `timeout`, until what was injected has been handled: taken by the PMD
    /// and the port polled once more after that (a PMD handles a batch, its upcalls and
    /// recirculations included, before it polls the port again). Returns whether it was.
    /// OVS's `netdev-dummy/receive` into a port its main thread polls replies only then, so
    /// that a command after it sees the packets' effects.
    pub fn settle(&self, timeout: std::time::Duration) -> bool {
        if self.polls.load(Ordering::Acquire) == 0 {
            return false; // no PMD polls the port (yet): nothing to wait for
        }
        let deadline = std::time::Instant::now() + timeout;
        let wait = |done: &dyn Fn() -> bool| {
            while !done() {
                if std::time::Instant::now() >= deadline {
                    return false;
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            true
        };
        if !wait(&|| self.pending() == 0) {
            return false;
        }
        let seen = self.polls.load(Ordering::Acquire);
        // A PMD waiting on the port polls it once more.
        self.ring();
        wait(&|| self.polls.load(Ordering::Acquire) > seen)
    }
}

fn registry() -> &'static Mutex<HashMap<String, Weak<Injector>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Weak<Injector>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// The injector of the dummy port named `name`, while that port exists.
pub fn injector(name: &str) -> Option<Arc<Injector>> {
    let r = registry().lock().unwrap_or_else(|e| e.into_inner());
    r.get(name).and_then(Weak::upgrade)
}

/// The names of the dummy ports that exist.
pub fn names() -> Vec<String> {
    let r = registry().lock().unwrap_or_else(|e| e.into_inner());
    r.iter()
        .filter(|(_, w)| w.strong_count() > 0)
        .map(|(n, _)| n.clone())
        .collect()
}

/// Whether bridges' device-less LOCAL ports receive injected frames (`--enable-dummy`).
static INTERNAL_RX: AtomicBool = AtomicBool::new(false);

/// From now on, a bridge's device-less LOCAL port made ([`DummyPort::internal`]) receives
/// what `netdev-dummy/receive` injects into it, as OVS's `dummy-internal` port does with
/// `--enable-dummy`. Without, such a port has no rx queue for a PMD to poll.
pub fn enable_internal_rx() {
    INTERNAL_RX.store(true, Ordering::Relaxed);
}

/// A port that receives injected frames and counts and frees what it is sent.
pub struct DummyPort {
    name: String,
    /// A bridge's LOCAL port without a device: counts what it is sent, and receives only
    /// with [`enable_internal_rx`].
    internal: bool,
    /// Whether it has an rx queue.
    receives: bool,
    injector: Arc<Injector>,
    rxq_taken: bool,
    rx_stats: Arc<QueueStats>,
    txqs: Vec<Arc<QueueStats>>,
}

impl DummyPort {
    /// A dummy port; its injector is found by `name` from now on (a port of the same name
    /// made later takes the name over).
    pub fn new(name: &str) -> DummyPort {
        let injector = Arc::new(Injector::new());
        registry()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), Arc::downgrade(&injector));
        DummyPort {
            name: name.to_owned(),
            internal: false,
            receives: true,
            injector,
            rxq_taken: false,
            rx_stats: QueueStats::shared(),
            txqs: Vec::new(),
        }
    }
}

impl DummyPort {
    /// A bridge's LOCAL port when it has no device of its own (OVS's `dummy-internal`): a
    /// datapath port what the bridge floods or outputs to LOCAL reaches, counted and freed.
    pub fn internal(name: &str) -> DummyPort {
        let mut p = DummyPort::new(name);
        p.internal = true;
        p.receives = INTERNAL_RX.load(Ordering::Relaxed);
        p
    }
}

impl Drop for DummyPort {
    fn drop(&mut self) {
        let mut r = registry().lock().unwrap_or_else(|e| e.into_inner());
        if r.get(&self.name)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&self.injector)))
        {
            r.remove(&self.name);
        }
    }
}

struct DummyRxq {
    injector: Arc<Injector>,
    in_port: u32,
    stats: Arc<QueueStats>,
}

impl RxQueue for DummyRxq {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.injector.bell.as_ref().map(AsFd::as_fd)
    }

    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        self.injector.polls.fetch_add(1, Ordering::Release);
        self.injector.clear();
        if self.injector.pending.load(Ordering::SeqCst) == 0 {
            return 0;
        }
        let mut q = self
            .injector
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let n = batch.room().min(q.len());
        let mut bytes = 0u64;
        for f in q.drain(..n) {
            bytes += f.len() as u64;
            batch.push(pool.packet_from(&f, self.in_port));
        }
        self.injector.pending.store(q.len(), Ordering::Release);
        self.stats.add_rx(n as u64, bytes);
        n
    }
}

struct DummyTxq {
    stats: Arc<QueueStats>,
}

impl TxQueue for DummyTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        self.stats.add_tx(batch.len() as u64, batch.bytes());
        pool.free_batch(batch);
    }
}

impl Port for DummyPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        if self.internal { "internal" } else { "dummy" }
    }

    fn n_rxq(&self) -> usize {
        usize::from(self.receives)
    }

    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        if q != 0 || self.rxq_taken || !self.receives {
            return None;
        }
        self.rxq_taken = true;
        Some(Box::new(DummyRxq {
            injector: self.injector.clone(),
            in_port,
            stats: self.rx_stats.clone(),
        }))
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        let stats = QueueStats::shared();
        self.txqs.push(stats.clone());
        Box::new(DummyTxq { stats })
    }

    fn main_thread_polled(&self) -> bool {
        self.internal
    }

    fn counters(&self) -> PortCounters {
        let mut c = self.rx_stats.snapshot();
        for s in &self.txqs {
            c += s.snapshot();
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injected_frames_are_received_in_order_and_the_queue_is_bounded() {
        let mut port = DummyPort::new("dummy-test-a");
        let inj = injector("dummy-test-a").unwrap();
        inj.inject(vec![vec![1; 60], vec![2; 61]]).unwrap();
        assert!(inj.inject(vec![vec![0; 60]; INJECT_LIMIT]).is_err());
        assert_eq!(inj.pending(), 2);
        let mut rxq = port.take_rxq(0, 7).unwrap();
        assert!(port.take_rxq(0, 7).is_none());
        let mut pool = Pool::new(64, 8);
        let mut batch = Batch::new();
        assert_eq!(rxq.recv(&mut pool, &mut batch), 2);
        assert_eq!(batch.packets()[1].data()[0], 2);
        assert_eq!(batch.packets()[0].meta.in_port, 7);
        assert_eq!(inj.pending(), 0);
        assert_eq!(port.counters().rx_packets, 2);
        drop(rxq);
        drop(port);
        assert!(injector("dummy-test-a").is_none());
    }

    /// `settle` returns only once the poller has taken the frames and polled again (it has
    /// handled them by then); with no poller at all it does not wait.
    #[test]
    fn settle_waits_for_the_poll_after_the_frames_were_taken() {
        use std::time::{Duration, Instant};
        let mut port = DummyPort::new("dummy-test-settle");
        let inj = injector("dummy-test-settle").unwrap();
        inj.inject(vec![vec![1; 60]]).unwrap();
        assert!(!inj.settle(Duration::from_secs(5)), "never polled: no wait");
        let mut rxq = port.take_rxq(0, 1).unwrap();
        let poller = std::thread::spawn(move || {
            let mut pool = Pool::new(64, 8);
            let mut batch = Batch::new();
            let mut got = 0;
            for _ in 0..3 {
                got += rxq.recv(&mut pool, &mut batch);
                std::thread::sleep(Duration::from_millis(100));
            }
            got
        });
        while inj.polls.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        inj.inject(vec![vec![2; 60]]).unwrap();
        let t = Instant::now();
        assert!(inj.settle(Duration::from_secs(5)));
        // Taken at the second poll at the latest, then one more poll 100 ms later.
        assert!(
            t.elapsed() >= Duration::from_millis(50),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(inj.pending(), 0);
        assert_eq!(poller.join().unwrap(), 2);
        drop(port);
    }
}
