//! `vhostuser` / `vhostuserclient` ports across restarts of either side, at the port level:
//! DPDK's `dpdk-testpmd` with a `net_virtio_user` port is the front-end (a VM's driver), and is
//! killed with SIGKILL (a crashed VM) or the port is closed and opened again, 20 times. Each
//! time traffic must resume, and nothing of a connection may outlive it: this process's open
//! file descriptors (`/proc/self/fd`: the guest memory's file, the call eventfds, the socket)
//! and memory mappings (`/proc/self/maps`: the guest memory regions) are the same after cycle
//! 20 as after cycle 1. Skipped with a SKIP line when `dpdk-testpmd` is not installed.
//!
//! testpmd sends 1000-byte frames, which the port lends (`Pool::packet_lent`) to a poller
//! that reads each whole from guest memory and releases the queue as a PMD does: a lent
//! frame's memory must stay mapped until then, whenever the guest goes away.
//!
//! The counts are exact, without slack. What else lives in this process holds still during a
//! test: testpmd's output readers are joined when it is killed, the polling thread and the
//! port's control thread stay (or are joined with the port), and the tests of this file run
//! one at a time (the testpmd lock): the test harness starts its next test's thread when one
//! ends, which is before the next one's first cycle is over.

mod common;
mod testpmd;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use datapath::packet::{Batch, Pool};
use datapath::port::Port;
use netdev::vhost::VhostPort;
use testpmd::{Running, Testpmd};

const CYCLES: usize = 20;
/// Generous: a loaded 2-core machine runs testpmd, the port and the build at once.
const DEADLINE: Duration = Duration::from_secs(20);

/// Waits until `f` holds, at most [`DEADLINE`]; `what` and `ctx()` describe a failure.
fn wait_for(what: &str, mut f: impl FnMut() -> bool, ctx: impl Fn() -> String) {
    let end = Instant::now() + DEADLINE;
    while !f() {
        assert!(
            Instant::now() < end,
            "timed out waiting for {what}\n{}",
            ctx()
        );
        thread::sleep(Duration::from_millis(5));
    }
}

/// Frames the pollers were lent, over the process.
static LENT: AtomicU64 = AtomicU64::new(0);

/// Polls rx queue 0 of `port` on a thread until the returned guard is dropped, as a PMD does:
/// every frame it was lent is read whole from guest memory, then what it receives is freed,
/// the lending ended and the queue released.
fn poller(port: &mut VhostPort) -> common::Background {
    let mut rxq = port.take_rxq(0, 1).unwrap();
    common::Background::spawn(move |stop| {
        let mut pool = Pool::new(1024, 256);
        pool.allow_lending();
        let mut batch = Batch::new();
        while !stop.load(Ordering::Relaxed) {
            if rxq.recv(&mut pool, &mut batch) == 0 {
                // Not a spin: testpmd needs the cores more than this loop does.
                thread::sleep(Duration::from_micros(200));
            }
            for p in batch.packets_mut() {
                if p.is_lent() {
                    LENT.fetch_add(1, Ordering::Relaxed);
                    pool.materialize(p);
                }
            }
            pool.free_batch(&mut batch);
            if pool.end_lending() {
                rxq.release();
            }
        }
    })
}

/// testpmd sending 1000-byte frames (long enough to be lent) on `devargs`' port.
fn sender(t: &Testpmd, devargs: &str) -> Running {
    t.spawn_with(
        devargs,
        1,
        &["--forward-mode=txonly", "--auto-start", "--txpkts=1000"],
    )
}

/// This process's open descriptors (number → what it is) and memory mappings (one line of
/// `/proc/self/maps` each, addresses and all).
#[derive(PartialEq, Eq)]
struct Resources {
    fds: BTreeMap<String, String>,
    maps: Vec<String>,
}

fn fds() -> BTreeMap<String, String> {
    // The directory stream itself is a descriptor too, the same one each time.
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let target = std::fs::read_link(e.path()).unwrap_or_default();
            Some((
                e.file_name().to_string_lossy().into_owned(),
                target.display().to_string(),
            ))
        })
        .collect()
}

impl Resources {
    /// A consistent snapshot. A `vhostuserclient` port without a peer opens a socket for each
    /// connection attempt (every 250 ms) and closes it when `connect` fails: a snapshot taken
    /// during the few microseconds that socket exists would count it, so the descriptors are
    /// read on both sides of the mappings and the snapshot is taken again when they differ.
    fn now() -> Resources {
        for _ in 0..10 {
            let a = fds();
            let maps: Vec<String> = std::fs::read_to_string("/proc/self/maps")
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect();
            if fds() == a {
                return Resources { fds: a, maps };
            }
        }
        panic!("the descriptor table never held still");
    }

    /// What changed from `before` to `self`, for a failure message.
    fn diff(&self, before: &Resources) -> String {
        let mut s = format!(
            "descriptors: {} -> {}; mappings: {} -> {}\n",
            before.fds.len(),
            self.fds.len(),
            before.maps.len(),
            self.maps.len()
        );
        for (k, v) in &self.fds {
            if before.fds.get(k) != Some(v) {
                s += &format!("  + fd {k} -> {v}\n");
            }
        }
        for (k, v) in &before.fds {
            if self.fds.get(k) != Some(v) {
                s += &format!("  - fd {k} -> {v}\n");
            }
        }
        for m in &self.maps {
            if !before.maps.contains(m) {
                s += &format!("  + {m}\n");
            }
        }
        for m in &before.maps {
            if !self.maps.contains(m) {
                s += &format!("  - {m}\n");
            }
        }
        s
    }
}

/// Open descriptors counted by target, inode numbers (`pipe:[123]`) dropped.
fn fd_kinds(fds: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for t in fds.values() {
        let kind = match t.find(":[") {
            Some(i) if t.ends_with(']') => format!("{}:[]", &t[..i]),
            _ => t.clone(),
        };
        *kinds.entry(kind).or_insert(0) += 1;
    }
    kinds
}

/// Asserts that the descriptors and the number of mappings are what they were after cycle 1.
/// (Mappings are compared by number: a heap that grew changes a line's addresses, not the
/// count; a leaked guest region adds a line per cycle.)
///
/// Descriptors are compared as kinds of target (a pipe's or socket's inode number dropped),
/// counted, not by number: a testpmd restarted after DPDK's bug comes with new pipes, which may
/// take other numbers and have other inodes, and are no leak.
fn assert_no_growth(what: &str, first: &Resources, last: &Resources) {
    assert!(
        fd_kinds(&last.fds) == fd_kinds(&first.fds) && last.maps.len() == first.maps.len(),
        "{what}: after cycle 1 vs after cycle {CYCLES}: {}",
        last.diff(first)
    );
}

fn rx(p: &VhostPort) -> u64 {
    p.counters().rx_packets
}

/// One front-end lifetime against a port that stays: testpmd (client or `server=1`) starts
/// sending, the port receives, testpmd is killed, the port sees it gone.
fn crash_cycle(t: &Testpmd, p: &VhostPort, devargs: &str, cycle: usize) {
    let before = rx(p);
    let connections = p.connections();
    let t0 = Instant::now();
    let pmd = sender(t, devargs);
    let out = || pmd.output();
    wait_for(
        &format!("traffic in cycle {cycle}"),
        || rx(p) > before || p.resets() > 0,
        || format!("port: {} (rx {})\ntestpmd:\n{}", p.options(), rx(p), out()),
    );
    let t1 = t0.elapsed();
    assert_eq!(
        p.resets(),
        0,
        "cycle {cycle}: {}\ntestpmd:\n{}",
        p.options(),
        out()
    );
    assert_eq!(p.connections(), connections + 1, "cycle {cycle}");
    assert!(p.options().contains("status=connected"), "{}", p.options());
    pmd.kill();
    let t2 = t0.elapsed();
    wait_for(
        &format!("the port to see testpmd gone in cycle {cycle}"),
        || !p.connected(),
        || p.options(),
    );
    eprintln!(
        "cycle {cycle}: traffic after {t1:?}, testpmd killed after {t2:?}, seen gone after {:?}",
        t0.elapsed()
    );
    assert_eq!(p.started_vrings(), 0, "cycle {cycle}: rings left started");
    assert!(
        p.options().contains("status=disconnected"),
        "{}",
        p.options()
    );
}

/// `CYCLES` testpmd crashes against a port in `client` mode or not: traffic each time, no
/// descriptor or mapping more after the last cycle than after the first.
fn survives_testpmd_crashes(test: &str, client: bool) {
    let Some(t) = Testpmd::available(test) else {
        return;
    };
    let sock = t.dir().join("vu.sock");
    let mut p = common::vhost_port("vu", &sock, client, 1);
    let _poll = poller(&mut p);
    let devargs = if client {
        format!("path={},server=1", sock.display())
    } else {
        format!("path={}", sock.display())
    };
    let mut first = None;
    for cycle in 1..=CYCLES {
        if client {
            // A killed testpmd leaves its socket behind, and virtio_user's server mode does
            // not bind over one ("Address already in use; remove it and try again"): what
            // QEMU or a VM manager does, the test does. The port keeps trying meanwhile.
            let _ = std::fs::remove_file(&sock);
        }
        crash_cycle(&t, &p, &devargs, cycle);
        if cycle == 1 {
            first = Some(Resources::now());
        }
    }
    let last = Resources::now();
    assert_no_growth(test, first.as_ref().unwrap(), &last);
    assert_eq!(p.connections(), CYCLES as u64);
    let c = p.counters();
    assert_eq!((c.rx_dropped, c.errors, p.resets()), (0, 0, 0), "{c:?}");
    assert!(
        LENT.load(Ordering::Relaxed) > 0,
        "testpmd's frames were lent"
    );
}

#[test]
fn server_port_survives_20_testpmd_crashes_without_leaking() {
    let _serial = testpmd::serial();
    survives_testpmd_crashes("server_port_survives_20_testpmd_crashes", false);
}

#[test]
fn client_port_survives_20_testpmd_server_crashes_without_leaking() {
    let _serial = testpmd::serial();
    survives_testpmd_crashes("client_port_survives_20_testpmd_server_crashes", true);
}

#[test]
fn client_port_closed_and_reopened_20_times_against_one_testpmd() {
    let _serial = testpmd::serial();
    let test = "client_port_closed_and_reopened_20_times";
    let Some(t) = Testpmd::available(test) else {
        return;
    };
    let sock = t.dir().join("vu-re.sock");
    // testpmd stays for the whole test: a server that the port leaves and comes back to.
    let mut pmd: Option<Running> = None;
    let mut first = None;
    let mut restarts = 0;
    for cycle in 1..=CYCLES {
        let mut restarted = false;
        let mut p = common::vhost_port("vu-re", &sock, true, 1);
        let poll = poller(&mut p);
        if pmd.is_none() {
            pmd = Some(sender(&t, &format!("path={},server=1", sock.display())));
        }
        let t0 = Instant::now();
        // DPDK 22.11's virtio_user server sometimes stops listening after a client leaves
        // ("vhost_user_server_disconnect(): Expected valid Vhost FD", then every connect is
        // refused): a testpmd bug, not the port's. Then testpmd is restarted, at most twice in
        // a run, and the port must find the new one.
        let end = Instant::now() + DEADLINE;
        while rx(&p) == 0 && p.resets() == 0 && Instant::now() < end {
            thread::sleep(Duration::from_millis(5));
        }
        if rx(&p) == 0
            && p.resets() == 0
            && pmd
                .as_ref()
                .unwrap()
                .output()
                .contains("Expected valid Vhost FD")
            && restarts < 2
        {
            restarts += 1;
            eprintln!("cycle {cycle}: testpmd stopped listening (DPDK); restarting it");
            drop(pmd.take());
            // A killed testpmd leaves its socket file behind, and a new one will not bind
            // over it ("Address already in use; remove it and try again").
            let _ = std::fs::remove_file(&sock);
            pmd = Some(sender(&t, &format!("path={},server=1", sock.display())));
            restarted = true;
        }
        let tp = pmd.as_ref().unwrap();
        // A ring the port took out of service would never carry anything: stop waiting then.
        wait_for(
            &format!("traffic in cycle {cycle}"),
            || rx(&p) > 0 || p.resets() > 0,
            || format!("port: {}\ntestpmd:\n{}", p.options(), tp.output()),
        );
        eprintln!("cycle {cycle}: traffic after {:?}", t0.elapsed());
        assert_eq!(
            p.resets(),
            0,
            "cycle {cycle}: the port reset a ring of the reconnected testpmd: {}\ntestpmd:\n{}",
            p.options(),
            tp.output()
        );
        // One connection: testpmd took the port back at the first try (unless it had to be
        // restarted, when the port may have met the dying one first).
        if !restarted {
            assert_eq!(p.connections(), 1, "cycle {cycle}: {}", p.options());
        }
        assert!(p.options().contains("status=connected"), "{}", p.options());
        drop(poll);
        drop(p);
        if cycle == 1 {
            first = Some(Resources::now());
        }
    }
    let last = Resources::now();
    assert_no_growth(test, first.as_ref().unwrap(), &last);
    let mut pmd = pmd.unwrap();
    // testpmd is still forwarding: it took every reconnection (but the restarts above).
    let s = pmd.port_stats();
    assert!(s.tx_packets > 0, "{}", pmd.output());
    pmd.quit();
}
