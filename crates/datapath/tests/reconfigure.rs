//! Run-time reconfiguration of a running datapath (`pmd-cpu-mask`, `pmd-rxq-assign`,
//! `flow-limit`, `max-idle`): PMD threads come and go while a source's four rx queues keep
//! sending to a sink, and every packet the source delivered reaches the sink; `pmd-rxq-show`
//! shows each new layout at once; the flow limit and the idle time take effect on the PMDs
//! that run.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::udp_frame;
use datapath::dpif::{Datapath, DatapathBuilder, DpConfig, RxqAssign};
use datapath::packet::{Batch, Packet, Pool};
use datapath::pmd::{UpcallHandler, UpcallResult};
use datapath::port::{Port, PortCounters, RxQueue, TxQueue};
use flow::odp::Action;
use flow::{FlowKey, Mask};

/// A port whose rx queues (if any) each send `frames` round and round, `limit` packets per
/// queue in all but never more than `gate` allows so far, and that counts what its queues
/// delivered and what it was sent (then dropped).
struct Counted {
    name: String,
    frames: Arc<Vec<Vec<u8>>>,
    taken: Vec<bool>,
    limit: u64,
    gate: Arc<AtomicU64>,
    rx: Arc<AtomicU64>,
    tx: Arc<AtomicU64>,
}

impl Counted {
    fn new(
        name: &str,
        frames: Vec<Vec<u8>>,
        n_rxq: usize,
        limit: u64,
        gate: Arc<AtomicU64>,
    ) -> Counted {
        Counted {
            name: name.to_owned(),
            frames: Arc::new(frames),
            taken: vec![false; n_rxq],
            limit,
            gate,
            rx: Arc::new(AtomicU64::new(0)),
            tx: Arc::new(AtomicU64::new(0)),
        }
    }
}

struct CountedRxq {
    frames: Arc<Vec<Vec<u8>>>,
    next: usize,
    left: u64,
    sent: u64,
    gate: Arc<AtomicU64>,
    in_port: u32,
    rx: Arc<AtomicU64>,
}

impl RxQueue for CountedRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let open = self.gate.load(Ordering::Acquire).saturating_sub(self.sent);
        let n = (batch.room() as u64).min(self.left).min(open) as usize;
        for _ in 0..n {
            batch.push(pool.packet_from(&self.frames[self.next], self.in_port));
            self.next = (self.next + 1) % self.frames.len();
        }
        self.left -= n as u64;
        self.sent += n as u64;
        self.rx.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    fn exhausted(&self) -> bool {
        self.left == 0
    }
}

struct CountedTxq(Arc<AtomicU64>);

impl TxQueue for CountedTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        self.0.fetch_add(batch.len() as u64, Ordering::Relaxed);
        pool.free_batch(batch);
    }
}

impl Port for Counted {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> &'static str {
        "counted"
    }
    fn n_rxq(&self) -> usize {
        self.taken.len()
    }
    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        datapath::port::take_once(&mut self.taken, q)?;
        Some(Box::new(CountedRxq {
            frames: self.frames.clone(),
            next: q % self.frames.len(),
            left: self.limit,
            sent: 0,
            gate: self.gate.clone(),
            in_port,
            rx: self.rx.clone(),
        }))
    }
    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        Box::new(CountedTxq(self.tx.clone()))
    }
    fn counters(&self) -> PortCounters {
        PortCounters {
            rx_packets: self.rx.load(Ordering::Relaxed),
            tx_packets: self.tx.load(Ordering::Relaxed),
            ..PortCounters::default()
        }
    }
}

/// Installs an exact megaflow sending the packet to port 2 (the sink).
struct ExactToSink;

impl UpcallHandler for ExactToSink {
    fn upcall(&mut self, _key: &FlowKey, _pkt: &Packet) -> UpcallResult {
        let actions = vec![Action::Output(2)];
        let compiled = datapath::actions::compile(&actions).unwrap();
        UpcallResult::Install {
            mask: Box::new(Mask::exact()),
            actions,
            compiled,
            packet_outs: Vec::new(),
            skb_priority_mask: 0,
        }
    }
}

/// A datapath on `cores` with a source `src` (port 1, four rx queues, `frames` round and
/// round, `limit` per queue) and a sink `snk` (port 2); with `slow_path`, misses install exact
/// megaflows to the sink, else a hand-installed megaflow sends all IPv4 to it.
fn datapath(
    cores: Vec<Option<usize>>,
    frames: Vec<Vec<u8>>,
    limit: u64,
    slow_path: bool,
    tune: impl FnOnce(&mut DpConfig),
) -> Datapath {
    let open = Arc::new(AtomicU64::new(u64::MAX));
    gated_datapath(cores, frames, limit, open, slow_path, tune)
}

/// [`datapath`] whose source queues each send no more than `gate` packets so far.
fn gated_datapath(
    cores: Vec<Option<usize>>,
    frames: Vec<Vec<u8>>,
    limit: u64,
    gate: Arc<AtomicU64>,
    slow_path: bool,
    tune: impl FnOnce(&mut DpConfig),
) -> Datapath {
    let mut cfg = DpConfig {
        pmd_cores: cores,
        rxq_assign: RxqAssign::RoundRobin,
        ..DpConfig::default()
    };
    tune(&mut cfg);
    let mut b = DatapathBuilder::new(cfg);
    b.add_port(1, Box::new(Counted::new("src", frames, 4, limit, gate)))
        .unwrap();
    b.add_port(
        2,
        Box::new(Counted::new(
            "snk",
            Vec::new(),
            0,
            0,
            Arc::new(AtomicU64::new(0)),
        )),
    )
    .unwrap();
    if slow_path {
        b.set_upcall(Box::new(|| Box::new(ExactToSink) as Box<dyn UpcallHandler>));
    } else {
        b.add_flow("in_port(src),eth_type(0x0800),ipv4(frag=no)", "snk")
            .unwrap();
    }
    b.start().unwrap()
}

fn sink_tx(dp: &Datapath) -> u64 {
    dp.port_counters("snk").unwrap().tx_packets
}

/// Waits until the sink has counted 20 000 packets more than `than`.
fn wait_for_more(dp: &Datapath, than: u64) -> u64 {
    let t = Instant::now();
    loop {
        let n = sink_tx(dp);
        if n > than + 20_000 {
            return n;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "forwarding stalled at {n}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Lets each source queue send `step` packets more and waits until the sink has all of them:
/// none is lost or held, whatever the PMDs are doing meanwhile.
fn release_and_wait(dp: &Datapath, gate: &AtomicU64, step: u64) {
    let total = 4 * (gate.fetch_add(step, Ordering::AcqRel) + step);
    wait_until(&format!("the sink counts {total}"), || sink_tx(dp) >= total);
    assert_eq!(sink_tx(dp), total, "the sink got more than the source sent");
}

/// Waits until `cond`, for at most 60 s.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(60), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The (core, queues) each PMD of `pmd-rxq-show` lists, queues as `port/queue` in order.
fn shown(show: &str) -> Vec<(String, Vec<String>)> {
    let mut pmds: Vec<(String, Vec<String>)> = Vec::new();
    for line in show.lines() {
        if let Some(core) = line.strip_prefix("pmd thread numa_id 0 core_id ") {
            pmds.push((core.trim_end_matches(':').to_owned(), Vec::new()));
        } else if let Some(rest) = line.trim().strip_prefix("port: ") {
            let w: Vec<&str> = rest.split_whitespace().collect();
            pmds.last_mut()
                .unwrap()
                .1
                .push(format!("{}/{}", w[0], w[2]));
        }
    }
    for p in &mut pmds {
        p.1.sort();
    }
    pmds
}

/// Every rx queue once, over all PMDs.
fn all_queues(show: &[(String, Vec<String>)]) -> Vec<String> {
    let mut all: Vec<String> = show.iter().flat_map(|p| p.1.clone()).collect();
    all.sort();
    all
}

const QUEUES: [&str; 4] = ["src/0", "src/1", "src/2", "src/3"];

#[test]
fn the_core_set_changes_while_forwarding_and_no_packet_is_lost() {
    let frames: Vec<Vec<u8>> = (0..64).map(|i| udp_frame(2, 2000 + i, i as u8)).collect();
    for slow_path in [false, true] {
        // The source sends in steps so that every layout forwards some of it, however fast
        // the machine.
        let gate = Arc::new(AtomicU64::new(0));
        let mut dp = gated_datapath(
            vec![Some(0)],
            frames.clone(),
            100_000,
            gate.clone(),
            slow_path,
            |_| {},
        );
        release_and_wait(&dp, &gate, 5_000);
        // One PMD, two, three, another two, one on another core: the rx queues follow.
        let steps: [&[usize]; 5] = [&[0, 1], &[0, 1, 2], &[2, 1], &[1], &[0]];
        for cores in steps {
            dp.set_pmd_cores(cores.iter().map(|&c| Some(c)).collect())
                .unwrap();
            let show = shown(&dp.pmd_rxq_show());
            let want: Vec<String> = cores.iter().map(|c| c.to_string()).collect();
            let got: Vec<String> = show.iter().map(|p| p.0.clone()).collect();
            assert_eq!(got, want, "{show:?}");
            assert_eq!(all_queues(&show), QUEUES, "{cores:?}: every queue once");
            // Round robin over the PMDs in the order given.
            for (i, (_, qs)) in show.iter().enumerate() {
                let want: Vec<String> = (i..4)
                    .step_by(cores.len())
                    .map(|q| format!("src/{q}"))
                    .collect();
                assert_eq!(*qs, want, "{cores:?}");
            }
            assert_eq!(dp.pmd_stats().len(), cores.len());
            release_and_wait(&dp, &gate, 5_000);
        }
        // The same set again changes nothing.
        dp.set_pmd_cores(vec![Some(0)]).unwrap();
        assert!(dp.set_pmd_cores(vec![]).is_err());
        assert!(dp.set_pmd_cores(vec![Some(1), Some(1)]).is_err());
        assert_eq!(dp.pmd_cores(), vec![Some(0)]);
        gate.store(u64::MAX, Ordering::Release);
        wait_until("the source ends", || dp.drained());
        let ports = dp.stop();
        let counters = |name: &str| {
            let (_, p) = ports.iter().find(|(_, p)| p.name() == name).unwrap();
            p.counters()
        };
        let (src, snk) = (counters("src"), counters("snk"));
        assert_eq!(src.rx_packets, 4 * 100_000);
        assert_eq!(src.rx_packets, snk.tx_packets, "slow path {slow_path}");
    }
}

#[test]
fn new_pmds_start_empty_and_removed_pmds_take_their_megaflows() {
    let frames: Vec<Vec<u8>> = (0..8).map(|i| udp_frame(2, 3000 + i, i as u8)).collect();
    let mut dp = datapath(vec![None], frames, u64::MAX, true, |_| {});
    wait_for_more(&dp, 0);
    let one = dp.n_flows();
    assert!(one > 0);
    // A second PMD starts with no megaflow and installs its own as its queues' packets miss.
    dp.set_pmd_cores(vec![None, None]).unwrap();
    let stats = dp.pmd_stats();
    assert!(stats[1].stats.rx_packets < stats[0].stats.rx_packets);
    wait_until("the new PMD installs megaflows", || dp.n_flows() > one);
    // Back to one PMD: the other's megaflows go with it.
    dp.set_pmd_cores(vec![None]).unwrap();
    assert!(dp.n_flows() <= one, "{}", dp.n_flows());
}

#[test]
fn the_rxq_assignment_changes_while_forwarding() {
    let frames: Vec<Vec<u8>> = (0..64).map(|i| udp_frame(2, 2000 + i, i as u8)).collect();
    let mut dp = datapath(vec![None, None], frames, u64::MAX, false, |_| {});
    let n = wait_for_more(&dp, 0);
    assert_eq!(dp.set_rxq_assign(RxqAssign::RoundRobin), "");
    dp.set_rxq_assign(RxqAssign::Group);
    assert_eq!(dp.rxq_assign(), RxqAssign::Group);
    let show = shown(&dp.pmd_rxq_show());
    assert_eq!(all_queues(&show), QUEUES);
    wait_for_more(&dp, n);
}

#[test]
fn the_flow_limit_and_the_idle_time_change_at_run_time() {
    // 50 flows, each packet a new one at first.
    let frames: Vec<Vec<u8>> = (0..50).map(|i| udp_frame(2, 4000 + i, i as u8)).collect();
    let mut dp = datapath(vec![None], frames, u64::MAX, true, |c| {
        c.pmd.flow_limit = 10;
    });
    wait_for_more(&dp, 0);
    assert_eq!(dp.n_flows(), 10);
    dp.set_flow_limit(100);
    assert_eq!(dp.pmd_config().flow_limit, 100);
    wait_until("the higher limit lets every flow in", || dp.n_flows() == 50);
    // Lowered under what is installed: the surplus goes at the next housekeeping.
    dp.set_flow_limit(5);
    wait_until("the lower limit applies", || dp.n_flows() <= 5);
    wait_for_more(&dp, sink_tx(&dp));
    assert!(dp.n_flows() <= 5);
    drop(dp);

    // max-idle: once the source is done, the megaflows go after 200 ms, not 10 s.
    let frames: Vec<Vec<u8>> = (0..20).map(|i| udp_frame(2, 5000 + i, i as u8)).collect();
    let mut dp = datapath(vec![None], frames, 1000, true, |_| {});
    wait_until("the source ends", || dp.drained());
    assert_eq!(dp.n_flows(), 20);
    dp.set_max_idle(200);
    assert_eq!(dp.pmd_config().max_idle_ms, 200);
    let t = Instant::now();
    wait_until("idle megaflows expire", || dp.n_flows() == 0);
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn upcalls_over_the_flow_limit_are_counted() {
    // 50 flows for 10 megaflows: each packet of the other 40 is an upcall the limit refuses.
    let frames: Vec<Vec<u8>> = (0..50).map(|i| udp_frame(2, 6000 + i, i as u8)).collect();
    let dp = datapath(vec![None], frames, 1000, true, |c| {
        c.pmd.flow_limit = 10;
    });
    wait_until("the source ends", || dp.drained());
    assert_eq!(dp.n_flows(), 10);
    let s = dp.total_stats();
    assert!(s.flow_limit_hits >= 40, "{}", s.flow_limit_hits);
    assert!(s.flow_limit_hits <= s.upcalls, "{s:?}");
}

/// Where each of a port's queues was closed: the name of the thread that dropped it.
type ClosedOn = Arc<std::sync::Mutex<Vec<String>>>;

fn closed_here(on: &ClosedOn) {
    let t = std::thread::current();
    on.lock()
        .unwrap()
        .push(t.name().unwrap_or("unnamed").to_owned());
}

struct NotedRxq(ClosedOn);

impl RxQueue for NotedRxq {
    fn recv(&mut self, _pool: &mut Pool, _batch: &mut Batch) -> usize {
        0
    }
}

impl Drop for NotedRxq {
    fn drop(&mut self) {
        closed_here(&self.0);
    }
}

struct NotedTxq(ClosedOn);

impl TxQueue for NotedTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        pool.free_batch(batch);
    }
}

impl Drop for NotedTxq {
    fn drop(&mut self) {
        closed_here(&self.0);
    }
}

/// A port whose queues note the thread that closes them.
struct Noted(ClosedOn, bool);

impl Port for Noted {
    fn name(&self) -> &str {
        "noted"
    }
    fn kind(&self) -> &'static str {
        "noted"
    }
    fn n_rxq(&self) -> usize {
        1
    }
    fn take_rxq(&mut self, _q: usize, _in_port: u32) -> Option<Box<dyn RxQueue>> {
        (!std::mem::replace(&mut self.1, true)).then(|| Box::new(NotedRxq(self.0.clone())) as _)
    }
    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        Box::new(NotedTxq(self.0.clone()))
    }
    fn counters(&self) -> PortCounters {
        PortCounters::default()
    }
}

/// A port deleted at run time is closed by whoever deletes it, not by the PMD threads that
/// polled it: closing a kernel socket can take tens of milliseconds (an AF_PACKET socket's
/// close waits for an RCU grace period), during which a PMD would forward nothing.
#[test]
fn a_deleted_port_s_queues_are_closed_off_the_pmd_threads() {
    let frames = vec![udp_frame(2, 7000, 1)];
    let mut dp = datapath(vec![None, None], frames, u64::MAX, false, |_| {});
    let on = ClosedOn::default();
    dp.add_port(3, Box::new(Noted(on.clone(), false))).unwrap();
    wait_for_more(&dp, sink_tx(&dp));
    let port = dp.del_port("noted").unwrap();
    drop(port);
    let here = std::thread::current().name().unwrap().to_owned();
    let on = on.lock().unwrap();
    // One rx queue, and a tx queue for each of the two PMDs.
    assert_eq!(on.len(), 3, "{on:?}");
    assert!(
        on.iter().all(|t| *t == here),
        "closed on {on:?}, not on {here}"
    );
    // The source goes on through the PMDs.
    wait_for_more(&dp, sink_tx(&dp));
}

/// A bond's `lb_output` table reaches every PMD, those that start later included, and its
/// per-bucket bytes are summed over them.
#[test]
fn a_pmd_started_later_has_the_bonds_tables() {
    let frames: Vec<Vec<u8>> = (0..8).map(|i| udp_frame(2, 3000 + i, i as u8)).collect();
    let mut dp = datapath(vec![None], frames, u64::MAX, false, |_| {});
    dp.bond_set(7, &[2; datapath::bond::BUCKETS]);
    dp.mod_flow(
        "in_port(src),eth_type(0x0800),ipv4(frag=no)",
        "lb_output(7)",
        false,
    )
    .unwrap();
    let before = sink_tx(&dp);
    wait_for_more(&dp, before);
    dp.set_pmd_cores(vec![None, None]).unwrap();
    wait_until("the new PMD outputs through the bond", || {
        dp.pmd_stats()[1].stats.tx_packets > 0
    });
    let bytes = dp.bond_stats(7).unwrap();
    assert!(bytes.iter().sum::<u64>() > 0);
    assert_eq!(dp.bonds().len(), 1);
    assert!(dp.bond_del(7));
    assert!(dp.bond_stats(7).is_none());
}
