//! `pmd-idle-wait`: a PMD whose rx queues all have a descriptor to wait on blocks on them
//! once idle instead of spinning its core, wakes for a packet and for a command at once, and
//! spins as before when the knob is off or one of its queues must be busy-polled.

mod common;

use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::udp_frame;
use datapath::dpif::{Datapath, DatapathBuilder, DpConfig};
use datapath::packet::{Batch, Pool};
use datapath::port::{Port, PortCounters, RxQueue, TxQueue};

/// A port whose one rx queue receives the datagrams written to the other end of a socket
/// pair, and offers that socket to wait on when `waitable`; its empty poll is a system call
/// (`recv`), which it says when `syscall` (as a tap's queue does); what it is sent is counted.
struct SocketPort {
    name: String,
    rx_end: Option<UnixDatagram>,
    waitable: bool,
    syscall: bool,
    tx: Arc<AtomicU64>,
}

struct SocketRxq {
    sock: UnixDatagram,
    waitable: bool,
    syscall: bool,
    in_port: u32,
    buf: Vec<u8>,
}

impl RxQueue for SocketRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let mut n = 0;
        while batch.room() > 0 {
            match self.sock.recv(&mut self.buf) {
                Ok(len) => {
                    batch.push(pool.packet_from(&self.buf[..len], self.in_port));
                    n += 1;
                }
                Err(_) => break,
            }
        }
        n
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.waitable.then(|| self.sock.as_fd())
    }

    fn empty_poll_is_syscall(&self) -> bool {
        self.syscall
    }
}

struct CountTxq(Arc<AtomicU64>);

impl TxQueue for CountTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        self.0.fetch_add(batch.len() as u64, Ordering::Relaxed);
        pool.free_batch(batch);
    }
}

impl Port for SocketPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> &'static str {
        "socket"
    }
    fn n_rxq(&self) -> usize {
        usize::from(self.rx_end.is_some())
    }
    fn take_rxq(&mut self, _q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        let sock = self.rx_end.take()?;
        sock.set_nonblocking(true).unwrap();
        Some(Box::new(SocketRxq {
            sock,
            waitable: self.waitable,
            syscall: self.syscall,
            in_port,
            buf: vec![0; 2048],
        }))
    }
    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        Box::new(CountTxq(self.tx.clone()))
    }
    fn counters(&self) -> PortCounters {
        PortCounters {
            tx_packets: self.tx.load(Ordering::Relaxed),
            ..PortCounters::default()
        }
    }
}

/// A datapath on one PMD with a socket source (port 1) and a sink (port 2), all IPv4 from the
/// source to the sink; returns it and the source's writing end.
fn datapath(waitable: bool) -> (Datapath, UnixDatagram) {
    datapath_of(waitable, false)
}

/// [`datapath`] with queues that say their empty poll is a system call (`syscall`).
fn datapath_of(waitable: bool, syscall: bool) -> (Datapath, UnixDatagram) {
    let (a, b) = UnixDatagram::pair().unwrap();
    let mut dp = DatapathBuilder::new(DpConfig {
        pmd_cores: vec![None],
        ..DpConfig::default()
    });
    dp.add_port(
        1,
        Box::new(SocketPort {
            name: "src".into(),
            rx_end: Some(b),
            waitable,
            syscall,
            tx: Arc::default(),
        }),
    )
    .unwrap();
    dp.add_port(
        2,
        Box::new(SocketPort {
            name: "snk".into(),
            rx_end: None,
            waitable,
            syscall,
            tx: Arc::default(),
        }),
    )
    .unwrap();
    dp.add_flow("in_port(src),eth_type(0x0800),ipv4(frag=no)", "snk")
        .unwrap();
    (dp.start().unwrap(), a)
}

/// The PMD's sleep iterations and sleep cycles, and the TSC cycles it used, so far.
fn sleep_stats(dp: &Datapath) -> (u64, u64, u64) {
    let s = &dp.pmd_stats()[0].stats;
    (
        s.sleep_iterations,
        s.sleep_cycles,
        s.busy_cycles + s.idle_cycles,
    )
}

fn sink_tx(dp: &Datapath) -> u64 {
    dp.port_counters("snk").unwrap().tx_packets
}

/// Sends `n` frames into the source and waits (at most 10 s) until the sink counts them all.
fn forward(dp: &Datapath, src: &UnixDatagram, n: u64) {
    let before = sink_tx(dp);
    let frame = udp_frame(1, 2, 0);
    for _ in 0..n {
        src.send(&frame).unwrap();
    }
    let t = Instant::now();
    while sink_tx(dp) < before + n {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "frames not forwarded"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn an_idle_pmd_waits_on_its_queues_and_a_packet_or_a_command_wakes_it() {
    idle_pmd_waits_and_wakes(false);
}

/// A PMD whose queues are polled by system calls (as taps) waits sooner; it wakes the same.
#[test]
fn an_idle_pmd_of_queues_polled_by_system_calls_waits_and_wakes_alike() {
    idle_pmd_waits_and_wakes(true);
}

fn idle_pmd_waits_and_wakes(syscall: bool) {
    let (mut dp, src) = datapath_of(true, syscall);
    forward(&dp, &src, 10);
    dp.clear_stats();
    std::thread::sleep(Duration::from_millis(500));
    let (iters, slept, used) = sleep_stats(&dp);
    assert!(iters > 0, "the idle PMD never waited");
    // Waiting, it spends most of its time blocked rather than polling (a spinning PMD spends
    // all of it polling).
    assert!(
        slept > used,
        "the idle PMD polled for {used} cycles and waited for only {slept}"
    );
    // A packet wakes it: many rounds of one frame, each waking a waiting PMD.
    for _ in 0..20 {
        forward(&dp, &src, 1);
        std::thread::sleep(Duration::from_millis(2));
    }
    // A command is answered while it waits (a timed-out one would show no stats of it).
    let t = Instant::now();
    let _ = dp.pmd_stats();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "a command waited for the PMD's timeout"
    );
    let shown = dp.pmd_perf_show();
    assert!(
        shown.contains("sleep iterations:") && !shown.contains("sleep iterations:           0"),
        "{shown}"
    );
}

#[test]
fn with_the_knob_off_or_a_busy_polled_queue_the_pmd_spins() {
    for (waitable, knob) in [(true, false), (false, true)] {
        let (mut dp, src) = datapath(waitable);
        dp.set_pmd_idle_wait(knob);
        forward(&dp, &src, 10);
        dp.clear_stats();
        std::thread::sleep(Duration::from_millis(300));
        let (iters, _, _) = sleep_stats(&dp);
        assert_eq!(iters, 0, "waited with waitable={waitable} knob={knob}");
        forward(&dp, &src, 10);
    }
}

#[test]
fn turning_the_knob_on_at_run_time_makes_a_spinning_pmd_wait() {
    let (mut dp, src) = datapath(true);
    dp.set_pmd_idle_wait(false);
    forward(&dp, &src, 1);
    dp.clear_stats();
    dp.set_pmd_idle_wait(true);
    std::thread::sleep(Duration::from_millis(300));
    assert!(sleep_stats(&dp).0 > 0);
    // Stopping a waiting datapath does not wait for the wait's end.
    let t = Instant::now();
    drop(dp);
    assert!(t.elapsed() < Duration::from_secs(5));
}
