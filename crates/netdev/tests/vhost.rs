//! `vhostuser` / `vhostuserclient` ports against DPDK's `dpdk-testpmd` with a `net_virtio_user`
//! port (the front-end a VM's driver would be), both modes, no hugepages, no root. Skipped with
//! a SKIP line when `dpdk-testpmd` is not installed (Debian's `dpdk-dev`).

mod testpmd;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use datapath::packet::{Batch, Pool};
use datapath::port::Port;
use netdev::vhost::{VhostOptions, VhostPort};
use testpmd::Testpmd;

fn port(name: &str, dir: &std::path::Path, client: bool) -> VhostPort {
    let mut o = VhostOptions::for_kind(if client {
        "vhostuserclient"
    } else {
        "vhostuser"
    })
    .unwrap();
    o.path = Some(dir.join(format!("{name}.sock")));
    VhostPort::open(name, o).unwrap()
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Polls rx queue 0 of `port` on a thread until `stop`, freeing what it receives.
fn drain(port: &mut VhostPort, stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    let mut rxq = port.take_rxq(0, 1).unwrap();
    thread::spawn(move || {
        let mut pool = Pool::new(1024, 256);
        let mut batch = Batch::new();
        while !stop.load(Ordering::Relaxed) {
            if rxq.recv(&mut pool, &mut batch) == 0 {
                std::hint::spin_loop();
            }
            pool.free_batch(&mut batch);
        }
    })
}

/// Waits until the port's rx count stops moving (the guest's ring is drained).
fn settle(port: &VhostPort) -> u64 {
    let mut last = u64::MAX;
    loop {
        thread::sleep(Duration::from_millis(200));
        let now = port.counters().rx_packets;
        if now == last {
            return now;
        }
        last = now;
    }
}

#[test]
fn server_mode_txonly_into_the_port_counts_match() {
    let Some(t) = Testpmd::available("server_mode_txonly") else {
        return;
    };
    let dir = t.dir();
    let mut p = port("vu-tx", &dir, false);
    let stop = Arc::new(AtomicBool::new(false));
    let rx = drain(&mut p, stop.clone());
    let mut pmd = t.spawn(&format!("path={}", p.socket().display()));
    wait_for("the rings to start", 20, || p.started_vrings() == 2);
    assert!(p.options().contains("status=connected"), "{}", p.options());
    pmd.cmd("set fwd txonly");
    pmd.cmd("start");
    thread::sleep(Duration::from_millis(1500));
    pmd.cmd("stop");
    let got = settle(&p);
    let stats = pmd.port_stats();
    stop.store(true, Ordering::Relaxed);
    rx.join().unwrap();
    pmd.quit();
    let c = p.counters();
    assert!(stats.tx_packets > 0, "testpmd sent nothing");
    assert_eq!(got, stats.tx_packets, "received vs testpmd's TX-packets");
    assert_eq!(c.rx_dropped, 0);
    assert_eq!(c.errors, 0);
    assert_eq!(c.rx_bytes, stats.tx_bytes);
}

#[test]
fn client_mode_port_into_testpmd_rxonly_counts_match() {
    let Some(t) = Testpmd::available("client_mode_rxonly") else {
        return;
    };
    let dir = t.dir();
    let sock = dir.join("vu-rx.sock");
    // The port comes first and keeps trying until testpmd serves the socket.
    let mut p = port("vu-rx", &dir, true);
    let mut pmd = t.spawn(&format!("path={},server=1", sock.display()));
    pmd.cmd("set fwd rxonly");
    pmd.cmd("start");
    wait_for("the rings to start", 20, || p.started_vrings() == 2);
    let mut txq = p.open_txq();
    let mut pool = Pool::new(1024, 256);
    let frame = {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f
    };
    let total = 200_000u64;
    let mut sent = 0u64;
    let mut dropped = 0;
    while sent < total {
        let mut b = Batch::new();
        for _ in 0..32 {
            b.push(pool.packet_from(&frame, 0));
        }
        sent += 32;
        txq.send(&mut b, &mut pool);
        // A burst the guest had no room for at all: let testpmd catch up (on a loaded machine
        // it may get little CPU), so that most bursts carry frames, as the copy trial's
        // 2048 timed sends need.
        let now = p.counters().tx_dropped;
        if now - dropped == 32 {
            thread::sleep(Duration::from_micros(100));
        }
        dropped = now;
    }
    thread::sleep(Duration::from_millis(500));
    pmd.cmd("stop");
    let stats = pmd.port_stats();
    pmd.quit();
    let c = p.counters();
    assert_eq!(c.tx_packets + c.tx_dropped, total);
    assert!(c.tx_packets > 0, "{c:?}");
    assert_eq!(
        stats.rx_packets, c.tx_packets,
        "testpmd's RX-packets vs sent"
    );
    assert_eq!(stats.rx_bytes, c.tx_bytes);
    // The queue's first trial of the two ways to copy long frames ended (2048 timed sends;
    // these short frames go the same way under both) and `dpif/show` tells its choice.
    let o = p.options();
    assert!(
        o.contains("long_copy=") && o.contains("of 1 trials chose rep_movsb"),
        "{o}"
    );
}

/// Two queue pairs: testpmd's txonly sends on both of its transmit queues, each a guest
/// transmit ring polled as one rx queue of the port; and the port's two tx queues (two PMDs'
/// worth) land on both guest receive rings.
#[test]
fn multiqueue_both_queue_pairs_carry_traffic() {
    let Some(t) = Testpmd::available("multiqueue") else {
        return;
    };
    let dir = t.dir();
    let mut o = VhostOptions::for_kind("vhostuser").unwrap();
    o.path = Some(dir.join("vu-mq.sock"));
    o.queues = 2;
    let mut p = VhostPort::open("vu-mq", o).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut rxqs = vec![p.take_rxq(0, 1).unwrap(), p.take_rxq(1, 1).unwrap()];
    let rx = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut pool = Pool::new(1024, 256);
            let mut batch = Batch::new();
            while !stop.load(Ordering::Relaxed) {
                for q in &mut rxqs {
                    q.recv(&mut pool, &mut batch);
                    pool.free_batch(&mut batch);
                }
            }
        })
    };
    let mut pmd = t.spawn_n(&format!("path={}", p.socket().display()), 2);
    wait_for("four rings to start", 20, || p.started_vrings() == 4);
    assert!(p.options().contains("queues=2/2"), "{}", p.options());
    pmd.cmd("set fwd txonly");
    pmd.cmd("start");
    thread::sleep(Duration::from_millis(1000));
    pmd.cmd("stop");
    let got = settle(&p);
    let sent = pmd.port_stats();
    let q = p.queue_counters();
    let rx_of = |name: &str| q.iter().find(|(n, _)| n == name).unwrap().1.rx_packets;
    assert!(rx_of("rx0") > 0 && rx_of("rx1") > 0, "{q:?}");
    assert_eq!(got, sent.tx_packets);

    // The other way: two tx queues, one per guest receive ring.
    pmd.cmd("set fwd rxonly");
    pmd.cmd("start");
    let mut pool = Pool::new(1024, 256);
    let frame = vec![0x02u8; 60];
    for txq in [p.open_txq(), p.open_txq()].iter_mut() {
        for _ in 0..100 {
            let mut b = Batch::new();
            for _ in 0..8 {
                b.push(pool.packet_from(&frame, 0));
            }
            txq.send(&mut b, &mut pool);
        }
    }
    thread::sleep(Duration::from_millis(300));
    pmd.cmd("stop");
    let after = pmd.port_stats();
    stop.store(true, Ordering::Relaxed);
    rx.join().unwrap();
    pmd.quit();
    let q = p.queue_counters();
    let tx_of = |name: &str| q.iter().find(|(n, _)| n == name).unwrap().1.tx_packets;
    assert!(tx_of("tx0") > 0 && tx_of("tx1") > 0, "{q:?}");
    assert_eq!(after.rx_packets, tx_of("tx0") + tx_of("tx1"), "{q:?}");
}
