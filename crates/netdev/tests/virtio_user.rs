//! `virtio_user` ports (the virtio-net driver side of vhost-user) against real back-ends:
//! flowpath's own `vhostuser` / `vhostuserclient` ports in this process, both modes and two
//! queue pairs; the same across five restarts of the back-end, with this process's file
//! descriptors and memory mappings counted; and DPDK's vhost PMD in `dpdk-testpmd`, which
//! forwards what the port sends back to it (skipped with a SKIP line when testpmd is not
//! installed). No root needed.
//!
//! The tests of this file run one at a time ([`serial`]): the descriptor and mapping counts
//! are process-wide, and testpmd wants a core of its own.

mod common;
mod testpmd;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use datapath::packet::{Batch, Pool};
use datapath::port::{Port, RxQueue, TxQueue};
use netdev::vhost::VhostPort;
use netdev::virtio_user::{VirtioUserOptions, VirtioUserPort};

/// Frames each way in the long exchanges.
const FRAMES: u32 = 10_000;
/// Generous: a loaded 2-core machine runs the build, both ports and maybe testpmd at once.
const DEADLINE: Duration = Duration::from_secs(20);

static ONE: Mutex<()> = Mutex::new(());

/// Holds the lock that runs this file's tests one at a time.
fn serial() -> MutexGuard<'static, ()> {
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A scratch directory for sockets, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("fpvu{}{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }

    fn sock(&self, name: &str) -> PathBuf {
        self.0.join(format!("{name}.sock"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn driver(name: &str, sock: &Path, server: bool, queues: usize) -> VirtioUserPort {
    let mut o = VirtioUserOptions::new(sock);
    o.server = server;
    o.queues = queues;
    VirtioUserPort::open(name, o).unwrap()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Both ends up: the driver's queue pairs and the back-end's vrings.
fn wait_up(vu: &VirtioUserPort, be: &VhostPort, pairs: usize) {
    wait_for("the rings to start", || {
        vu.active_queues() == pairs && be.started_vrings() == 2 * pairs
    });
}

/// `n` marked test frames of sizes spread over 60..=1514.
fn frames(n: u32, salt: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| common::frame(i ^ salt, 60 + (i as usize * 7919) % 1455, &[]))
        .collect()
}

/// Sends `frames` on `tx` a burst at a time, each burst collected from `rx` before the next.
fn exchange(
    tx: &mut dyn TxQueue,
    rx: &mut dyn RxQueue,
    pool: &mut Pool,
    frames: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    common::relay(tx, rx, pool, frames)
}

/// [`FRAMES`] frames each way between a driver and a back-end on queue pair 0: every one
/// arrives, byte for byte, in order, and both ports count them alike.
fn both_ways(vu: &mut VirtioUserPort, be: &mut VhostPort) {
    let mut pool = Pool::new(1024, 256);
    let (mut vu_rx, mut vu_tx) = (vu.take_rxq(0, 1).unwrap(), vu.open_txq());
    let (mut be_rx, mut be_tx) = (be.take_rxq(0, 2).unwrap(), be.open_txq());
    let out = frames(FRAMES, 0);
    let got = exchange(&mut *vu_tx, &mut *be_rx, &mut pool, &out);
    assert_eq!(got.len(), out.len(), "driver to back-end");
    assert!(got == out, "driver to back-end: frames differ");
    let back = frames(FRAMES, 0x5a5a);
    let got = exchange(&mut *be_tx, &mut *vu_rx, &mut pool, &back);
    assert_eq!(got.len(), back.len(), "back-end to driver");
    assert!(got == back, "back-end to driver: frames differ");
    let bytes = |f: &[Vec<u8>]| f.iter().map(|f| f.len() as u64).sum::<u64>();
    let (v, b) = (vu.counters(), be.counters());
    assert_eq!((v.tx_packets, v.tx_bytes), (u64::from(FRAMES), bytes(&out)));
    assert_eq!(
        (v.rx_packets, v.rx_bytes),
        (u64::from(FRAMES), bytes(&back))
    );
    assert_eq!((b.rx_packets, b.rx_bytes), (v.tx_packets, v.tx_bytes));
    assert_eq!((b.tx_packets, b.tx_bytes), (v.rx_packets, v.rx_bytes));
    for c in [v, b] {
        assert_eq!((c.rx_dropped, c.tx_dropped, c.errors), (0, 0, 0), "{c:?}");
    }
}

#[test]
fn client_to_a_vhostuser_port_10000_frames_each_way() {
    let _one = serial();
    let dir = Scratch::new("client");
    let sock = dir.sock("be");
    // The driver comes first and keeps trying until the back-end listens.
    let mut vu = driver("vu", &sock, false, 1);
    thread::sleep(Duration::from_millis(300));
    assert!(
        vu.options().contains("status=connecting"),
        "{}",
        vu.options()
    );
    assert!(!vu.link_up());
    let mut be = common::vhost_port("be", &sock, false, 1);
    wait_up(&vu, &be, 1);
    assert_eq!(vu.kind(), "virtio_user");
    let o = vu.options();
    assert!(
        o.contains("mode=client") && o.contains("status=connected"),
        "{o}"
    );
    assert!(o.contains("VERSION_1"), "{o}");
    both_ways(&mut vu, &mut be);
}

#[test]
fn server_to_a_vhostuserclient_port_10000_frames_each_way() {
    let _one = serial();
    let dir = Scratch::new("server");
    let sock = dir.sock("vu");
    let mut vu = driver("vu", &sock, true, 1);
    let mut be = common::vhost_port("be", &sock, true, 1);
    wait_up(&vu, &be, 1);
    assert!(vu.options().contains("mode=server"), "{}", vu.options());
    both_ways(&mut vu, &mut be);
}

/// Two queue pairs: each of the driver's tx queues lands on its own back-end rx queue, and
/// each of the back-end's on its own driver rx queue.
#[test]
fn two_queue_pairs_carry_traffic_both_ways() {
    let _one = serial();
    let dir = Scratch::new("mq");
    let sock = dir.sock("be");
    let mut be = common::vhost_port("be", &sock, false, 2);
    let mut vu = driver("vu", &sock, false, 2);
    wait_up(&vu, &be, 2);
    assert!(vu.options().contains("queue_pairs=2/2"), "{}", vu.options());
    assert!(vu.options().contains("MQ"), "{}", vu.options());
    let mut pool = Pool::new(1024, 256);
    let mut vu_rx: Vec<_> = (0..2).map(|q| vu.take_rxq(q, 1).unwrap()).collect();
    let mut be_rx: Vec<_> = (0..2).map(|q| be.take_rxq(q, 2).unwrap()).collect();
    let mut vu_tx: Vec<_> = (0..2).map(|_| vu.open_txq()).collect();
    let mut be_tx: Vec<_> = (0..2).map(|_| be.open_txq()).collect();
    for q in 0..2 {
        let out = frames(1000, q as u32 * 0x1111);
        let got = exchange(&mut *vu_tx[q], &mut *be_rx[q], &mut pool, &out);
        assert!(got == out, "driver tx queue {q} to back-end rx queue {q}");
        let got = exchange(&mut *be_tx[q], &mut *vu_rx[q], &mut pool, &out);
        assert!(got == out, "back-end tx queue {q} to driver rx queue {q}");
    }
    for (name, c) in vu.queue_counters().iter().chain(&be.queue_counters()) {
        let n = if name.starts_with("rx") {
            c.rx_packets
        } else {
            c.tx_packets
        };
        assert_eq!(n, 1000, "{name}: {c:?}");
    }
}

/// Open file descriptors and memory mappings of this process.
fn fds_and_maps() -> (usize, usize) {
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
    let maps = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count();
    (fds, maps)
}

/// The driver's side of the traffic during restarts: a thread that keeps sending unmarked
/// frames and counts the marked frames it receives.
struct Traffic {
    marked: Arc<AtomicU64>,
    _thread: common::Background,
}

impl Traffic {
    fn start(vu: &mut VirtioUserPort) -> Traffic {
        let (mut rx, mut tx) = (vu.take_rxq(0, 1).unwrap(), vu.open_txq());
        let marked = Arc::new(AtomicU64::new(0));
        let m = marked.clone();
        let thread = common::Background::spawn(move |stop| {
            let mut pool = Pool::new(1024, 256);
            let mut b = Batch::new();
            let filler = vec![0x02u8; 60];
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..8 {
                    b.push(pool.packet_from(&filler, 0));
                }
                tx.send(&mut b, &mut pool);
                rx.recv(&mut pool, &mut b);
                let n = b
                    .packets()
                    .iter()
                    .filter(|p| common::seq_of(p.data()).is_some())
                    .count();
                m.fetch_add(n as u64, Ordering::Relaxed);
                pool.free_batch(&mut b);
                thread::sleep(Duration::from_micros(200));
            }
        });
        Traffic {
            marked,
            _thread: thread,
        }
    }
}

/// With the back-end up: traffic flows both ways (the driver's filler reaches the
/// back-end's rx queue; marked frames from the back-end reach the driver).
fn traffic_flows(be: &mut VhostPort, traffic: &Traffic) {
    let mut pool = Pool::new(256, 64);
    let mut rx = be.take_rxq(0, 2).unwrap();
    let mut tx = be.open_txq();
    let mut b = Batch::new();
    let mut seen = 0;
    wait_for("the driver's traffic at the back-end", || {
        rx.recv(&mut pool, &mut b);
        seen += b.len();
        pool.free_batch(&mut b);
        seen >= 100
    });
    let before = traffic.marked.load(Ordering::Relaxed);
    for chunk in frames(64, 7).chunks(16) {
        for f in chunk {
            b.push(pool.packet_from(f, 0));
        }
        tx.send(&mut b, &mut pool);
        thread::sleep(Duration::from_millis(2));
    }
    wait_for("the back-end's frames at the driver", || {
        rx.recv(&mut pool, &mut b);
        pool.free_batch(&mut b);
        traffic.marked.load(Ordering::Relaxed) >= before + 64
    });
}

/// The back-end goes away five times mid-traffic and comes back; each time the driver finds
/// it again and traffic resumes, and nothing of an old connection stays behind.
fn restarts(server: bool) {
    let _one = serial();
    let dir = Scratch::new(if server { "rs-server" } else { "rs-client" });
    let sock = dir.sock("s");
    let mut vu = driver("vu", &sock, server, 1);
    let traffic = Traffic::start(&mut vu);
    let mut baseline = None;
    for cycle in 0..6 {
        let mut be = common::vhost_port("be", &sock, server, 1);
        wait_up(&vu, &be, 1);
        traffic_flows(&mut be, &traffic);
        let now = fds_and_maps();
        match baseline {
            None => baseline = Some(now),
            Some(b) => assert_eq!(now, b, "descriptors and mappings after restart {cycle}"),
        }
        drop(be);
        wait_for("the driver to notice", || !vu.link_up());
    }
    drop(traffic);
    let c = vu.counters();
    assert_eq!(vu.connections(), 6);
    assert_eq!((c.errors, c.rx_dropped), (0, 0), "{c:?}");
    assert!(
        c.tx_dropped > 0,
        "sending while the back-end is away drops: {c:?}"
    );
}

#[test]
fn client_survives_five_back_end_restarts_without_leaks() {
    restarts(false);
}

#[test]
fn server_survives_five_back_end_restarts_without_leaks() {
    restarts(true);
}

/// `dpdk-testpmd` with one DPDK vhost PMD port (`net_vhost0`) forwarding in `macswap` mode,
/// killed on drop. Its output goes to a file in the scratch directory, for failures.
struct VhostPmd {
    child: Child,
    log: PathBuf,
}

impl VhostPmd {
    fn spawn(t: &testpmd::Testpmd, sock: &Path, client: bool, queues: usize) -> VhostPmd {
        let log = t.dir().join("testpmd.log");
        let out = std::fs::File::create(&log).unwrap();
        let vdev = format!(
            "net_vhost0,iface={},queues={queues}{}",
            sock.display(),
            if client { ",client=1" } else { "" }
        );
        // The helper's file prefix: its drop removes DPDK's runtime directory of it.
        let child = Command::new("dpdk-testpmd")
            .args(t.eal_args())
            .args(["--vdev", &vdev, "--"])
            .args([
                "--forward-mode=macswap",
                "--auto-start",
                "--total-num-mbufs=16384",
            ])
            .arg(format!("--rxq={queues}"))
            .arg(format!("--txq={queues}"))
            // Without `-i` testpmd forwards until its standard input has a line (or ends).
            .stdin(Stdio::piped())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("dpdk-testpmd");
        VhostPmd { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for VhostPmd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What testpmd's `macswap` makes of `f`.
fn macswapped(f: &[u8]) -> Vec<u8> {
    let mut s = f.to_vec();
    s[..6].copy_from_slice(&f[6..12]);
    s[6..12].copy_from_slice(&f[..6]);
    s
}

/// Our port against testpmd's vhost PMD with `queues` queue pairs: what each of the port's
/// tx queues sends comes back, MAC addresses swapped, on the rx queue of the same pair
/// (testpmd forwards rx queue `k` to tx queue `k`).
fn against_dpdk_vhost(test: &str, server: bool, queues: usize) {
    if !common::has("dpdk-testpmd") {
        eprintln!("SKIP {test}: dpdk-testpmd not installed (apt-get install dpdk)");
        return;
    }
    let _one = serial();
    let Some(t) = testpmd::Testpmd::available(test) else {
        return;
    };
    let sock = t.dir().join("vhost.sock");
    // Either side may start first: the driver retries, DPDK's client reconnects.
    let mut vu = driver("vu", &sock, server, queues);
    let pmd = VhostPmd::spawn(&t, &sock, server, queues);
    let end = Instant::now() + Duration::from_secs(30);
    while vu.active_queues() != queues {
        assert!(
            Instant::now() < end,
            "no connection with testpmd ({}):\n{}",
            vu.options(),
            pmd.log()
        );
        thread::sleep(Duration::from_millis(20));
    }
    let mut pool = Pool::new(1024, 256);
    let mut rx: Vec<_> = (0..queues).map(|q| vu.take_rxq(q, 1).unwrap()).collect();
    let mut tx: Vec<_> = (0..queues).map(|_| vu.open_txq()).collect();
    // DPDK's vhost PMD starts its receive queues a moment before its transmit queues once
    // the device is ready (after the driver's last request): what testpmd forwards in between
    // is dropped inside it. Probe until a frame comes back, then count from there.
    let probe = common::frame(u32::MAX, 60, &[]);
    for q in 0..queues {
        let end = Instant::now() + Duration::from_secs(20);
        while common::collect(&mut *rx[q], &mut pool, 1, Duration::from_millis(10)).is_empty() {
            assert!(
                Instant::now() < end,
                "testpmd forwards nothing on queue {q}:\n{}",
                pmd.log()
            );
            common::send(&mut *tx[q], &mut pool, std::slice::from_ref(&probe));
        }
    }
    thread::sleep(Duration::from_millis(100));
    for q in &mut rx {
        common::collect(&mut **q, &mut pool, usize::MAX, Duration::from_millis(100));
    }
    let before = vu.queue_counters();
    let n = 2000 / queues as u32;
    for q in 0..queues {
        let out = frames(n, q as u32);
        let got = exchange(&mut *tx[q], &mut *rx[q], &mut pool, &out);
        let want: Vec<_> = out.iter().map(|f| macswapped(f)).collect();
        let seqs: Vec<u32> = got.iter().filter_map(|f| common::seq_of(f)).collect();
        assert_eq!(
            got.len(),
            want.len(),
            "frames back from testpmd on queue {q} (first {:?}); options {}\n{}",
            &seqs[..seqs.len().min(40)],
            vu.options(),
            pmd.log()
        );
        assert!(
            got == want,
            "frames back on queue {q} differ from the sent ones"
        );
    }
    for ((name, c), (_, b)) in vu.queue_counters().iter().zip(&before) {
        let moved = if name.starts_with("rx") {
            c.rx_packets - b.rx_packets
        } else {
            c.tx_packets - b.tx_packets
        };
        assert_eq!(moved, u64::from(n), "{name}: {c:?}");
        assert_eq!(
            (c.tx_dropped, c.rx_dropped, c.errors),
            (0, 0, 0),
            "{name}: {c:?}"
        );
    }
    drop(pmd);
    wait_for("the driver to notice testpmd is gone", || !vu.link_up());
}

#[test]
fn client_to_dpdk_vhost_pmd_macswap() {
    against_dpdk_vhost("client_to_dpdk_vhost_pmd_macswap", false, 1);
}

#[test]
fn server_to_dpdk_vhost_pmd_client_macswap() {
    against_dpdk_vhost("server_to_dpdk_vhost_pmd_client_macswap", true, 1);
}

#[test]
fn two_queue_pairs_to_dpdk_vhost_pmd_macswap() {
    against_dpdk_vhost("two_queue_pairs_to_dpdk_vhost_pmd_macswap", false, 2);
}
