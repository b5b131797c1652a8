//! `tap` ports on TAP devices in network namespaces. Needs root (and `ip netns`): as any
//! other user the tests print `SKIP` and return.
//!
//! The far end of a tap is the namespace's stack, or an `afpacket` port opened on the same
//! device inside the namespace (what the kernel sends out of the tap is what the tap port
//! receives). Every test makes its own namespaces and devices, named from the process id and
//! the test's name, and a guard deletes them however the test ends.

use std::collections::HashSet;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use datapath::packet::{Batch, Pool};
use datapath::port::Port;
use netdev::afpacket::{AfPacketOptions, AfPacketPort};
use netdev::tap::{TapOptions, TapPort};

mod common;
use common::*;

impl Env {
    /// A persistent tap `name` made in the root namespace and moved into `ns`, as an
    /// administrator would for a VM or container.
    fn tap_moved_into(&mut self, name: &str, ns: &str) {
        sh(&["ip", "tuntap", "add", "dev", name, "mode", "tap"]);
        self.links.push(name.to_owned());
        sh(&["ip", "link", "set", name, "netns", ns]);
        self.links.pop();
    }
}
/// A PMD thread that forwards between ports `a` (1) and `b` (2), each way, until stopped.
struct Patched {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: thread::JoinHandle<datapath::pmd::Pmd>,
}

impl Patched {
    fn start(a: &mut TapPort, b: &mut TapPort) -> Patched {
        use datapath::dpif::parse_megaflow;
        use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
        use std::sync::atomic::{AtomicBool, Ordering};
        let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
        for (no, p) in [(1, a), (2, b)] {
            pmd.add_rxq(PolledRxq {
                port_no: no,
                queue_id: 0,
                rxq: p.take_rxq(0, no).unwrap(),
                cycles: 0,
            });
            pmd.add_txq(no, p.open_txq());
        }
        let mut names = flow::odp::PortNames::new();
        names.insert("a", 1);
        names.insert("b", 2);
        for (k, a) in [("in_port(a)", "b"), ("in_port(b)", "a")] {
            pmd.add_flow(parse_megaflow(&names, k, a).unwrap()).unwrap();
        }
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if pmd.poll_once() == 0 {
                    thread::sleep(Duration::from_micros(50));
                }
            }
            pmd
        });
        Patched { stop, thread }
    }

    /// Stops the thread; its PMD, for its statistics.
    fn stop(self) -> datapath::pmd::Pmd {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// [`Env::new`], and a SKIP line when there is no `/dev/net/tun`.
fn tap_env(test: &str) -> Option<Env> {
    let env = Env::new(test)?;
    if !std::path::Path::new("/dev/net/tun").exists() {
        eprintln!("SKIP {test}: no /dev/net/tun");
        return None;
    }
    Some(env)
}

fn tap(name: &str, ifname: &str, netns: &str, n_rxq: usize) -> TapPort {
    let o = TapOptions {
        ifname: Some(ifname.to_owned()),
        netns: Some(netns.to_owned()),
        n_rxq,
        ..Default::default()
    };
    TapPort::open(name, &o).unwrap_or_else(|e| panic!("open tap {ifname}: {e}"))
}

/// An `afpacket` port on the same device inside the namespace: the tap's far end.
fn far_end(ifname: &str, netns: &str) -> AfPacketPort {
    let o = AfPacketOptions {
        ifname: Some(ifname.to_owned()),
        netns: Some(netns.to_owned()),
        ..Default::default()
    };
    AfPacketPort::open("far", &o).unwrap_or_else(|e| panic!("open afpacket {ifname}: {e}"))
}

fn link_state(ns: &str, dev: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ip", "-o", "link", "show", dev])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_tap_moved_into_a_namespace_carries_bursts_both_ways() {
    let test = "a_tap_moved_into_a_namespace_carries_bursts_both_ways";
    let Some(mut env) = tap_env(test) else {
        return;
    };
    let ns = env.netns("t");
    let t = env.ifname("t");
    env.tap_moved_into(&t, &ns);
    let mut pt = tap("vm0", &t, &ns, 1);
    assert_eq!(pt.kind(), "tap");
    assert_eq!(pt.options(), format!("{{ifname={t}, netns={ns}}}"));
    assert!(
        link_state(&ns, &t).contains(",UP"),
        "the port sets the link up"
    );
    let mut far = far_end(&t, &ns);
    let (mut rt, mut tt) = (pt.take_rxq(0, 1).unwrap(), pt.open_txq());
    let (mut rf, mut tf) = (far.take_rxq(0, 2).unwrap(), far.open_txq());
    let end = Instant::now() + Duration::from_secs(2);
    while !pt.link_up() {
        assert!(Instant::now() < end, "carrier");
        thread::sleep(Duration::from_millis(5));
    }
    let mut pool = Pool::new(1024, 0);

    // Kernel to port: frames of every size, and tagged ones (the tap keeps tags in-band).
    let mut sent: Vec<Vec<u8>> = (0..600)
        .map(|i| frame(i, 60 + (i as usize * 41) % 1455, &[]))
        .collect();
    sent.push(frame(600, 100, &[[0x81, 0x00, 0x20, 10]]));
    sent.push(frame(601, 90, &[[0x88, 0xa8, 0, 5], [0x81, 0, 0, 6]]));
    let got = relay(tf.as_mut(), rt.as_mut(), &mut pool, &sent);
    assert!(
        got == sent,
        "kernel to port: {} of {} frames",
        got.len(),
        sent.len()
    );

    // Port to kernel, seen by the far end's packet socket (which restores stripped tags).
    let got = relay(tt.as_mut(), rf.as_mut(), &mut pool, &sent);
    assert!(
        got == sent,
        "port to kernel: {} of {} frames",
        got.len(),
        sent.len()
    );
    assert!(collect(rt.as_mut(), &mut pool, 1, Duration::from_millis(30)).is_empty());
    let c = pt.counters();
    assert_eq!((c.rx_packets, c.tx_packets), (602, 602), "{c:?}");
    assert_eq!(c.errors + c.tx_dropped + c.rx_dropped, 0, "{c:?}");
}

#[test]
fn a_tap_the_port_creates_lives_as_long_as_the_port() {
    let test = "a_tap_the_port_creates_lives_as_long_as_the_port";
    let Some(mut env) = tap_env(test) else {
        return;
    };
    let ns = env.netns("c");
    let t = env.ifname("c");
    let pt = tap("vm1", &t, &ns, 1);
    assert!(
        link_state(&ns, &t).contains(",UP"),
        "{}",
        link_state(&ns, &t)
    );
    assert!(
        Command::new("ip")
            .args(["link", "show", &t])
            .output()
            .unwrap()
            .stdout
            .is_empty(),
        "created inside the namespace, not in the root one"
    );
    // Persistent by default: the device outlives the port (a restarted switch finds it with
    // its addresses), and a new port attaches to it.
    drop(pt);
    assert!(
        link_state(&ns, &t).contains(",UP"),
        "a persistent tap stays: {}",
        link_state(&ns, &t)
    );
    let pt = TapPort::open(
        "vm1",
        &TapOptions {
            ifname: Some(t.clone()),
            netns: Some(ns.clone()),
            persist: false,
            ..Default::default()
        },
    )
    .unwrap();
    drop(pt);
    assert!(
        link_state(&ns, &t).is_empty(),
        "with persist=false a tap goes with its port"
    );
    // A non-tap of that name is a clear error.
    env.veth(&t, Some(&ns), &env.ifname("p"), &ns);
    let e = TapPort::open(
        "vm1",
        &TapOptions {
            ifname: Some(t.clone()),
            netns: Some(ns.clone()),
            ..Default::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("not a tap"), "{e}");
}

#[test]
fn a_multiqueue_tap_spreads_flows_over_its_queues_exactly_once() {
    let test = "a_multiqueue_tap_spreads_flows_over_its_queues_exactly_once";
    let Some(mut env) = tap_env(test) else {
        return;
    };
    let ns = env.netns("m");
    let t = env.ifname("m");
    ns_sh(
        &ns,
        &[
            "ip",
            "tuntap",
            "add",
            "dev",
            &t,
            "mode",
            "tap",
            "multi_queue",
        ],
    );
    let mut pt = tap("vm2", &t, &ns, 2);
    assert!(pt.options().contains("n_rxq=2"), "{}", pt.options());
    let mut far = far_end(&t, &ns);
    let mut qs: Vec<_> = (0..2).map(|q| pt.take_rxq(q, 1).unwrap()).collect();
    let mut txs: Vec<_> = (0..2).map(|_| pt.open_txq()).collect();
    let (mut rf, mut tf) = (far.take_rxq(0, 2).unwrap(), far.open_txq());
    let mut pool = Pool::new(1024, 0);
    const N: u32 = 1024;
    let mut seen = [Vec::new(), Vec::new()];
    let mut b = Batch::new();
    for chunk in (0..N).collect::<Vec<_>>().chunks(32) {
        let frames: Vec<_> = chunk
            .iter()
            .map(|&i| udp_frame(i, (i % 64) as u16))
            .collect();
        send(tf.as_mut(), &mut pool, &frames);
        let end = Instant::now() + Duration::from_millis(500);
        while seen[0].len() + seen[1].len() < *chunk.last().unwrap() as usize + 1
            && Instant::now() < end
        {
            for (q, s) in qs.iter_mut().zip(seen.iter_mut()) {
                q.recv(&mut pool, &mut b);
                for p in b.drain() {
                    s.extend(seq_of(p.data()));
                    pool.free(p);
                }
            }
        }
    }
    let all: HashSet<u32> = seen.iter().flatten().copied().collect();
    assert_eq!(seen[0].len() + seen[1].len(), N as usize, "each frame once");
    assert_eq!(all.len(), N as usize);
    assert!(
        !seen[0].is_empty() && !seen[1].is_empty(),
        "{} / {}",
        seen[0].len(),
        seen[1].len()
    );
    // Both tx queues write (on the two queues' descriptors).
    for (k, tx) in txs.iter_mut().enumerate() {
        let frames: Vec<_> = (0..32)
            .map(|i| frame(k as u32 * 100 + i, 80, &[]))
            .collect();
        send(tx.as_mut(), &mut pool, &frames);
        assert_eq!(
            collect(rf.as_mut(), &mut pool, 32, Duration::from_secs(2)),
            frames
        );
    }
}

#[test]
fn a_deleted_tap_comes_back_by_itself() {
    let test = "a_deleted_tap_comes_back_by_itself";
    let Some(mut env) = tap_env(test) else {
        return;
    };
    let ns = env.netns("d");
    let t = env.ifname("d");
    let mut pt = tap("vm3", &t, &ns, 1);
    let mut far = far_end(&t, &ns);
    let (mut rt, mut tt) = (pt.take_rxq(0, 1).unwrap(), pt.open_txq());
    let (mut rf, mut tf) = (far.take_rxq(0, 2).unwrap(), far.open_txq());
    let mut pool = Pool::new(256, 0);
    send(tf.as_mut(), &mut pool, &[frame(1, 60, &[])]);
    assert_eq!(
        collect(rt.as_mut(), &mut pool, 1, Duration::from_secs(2)).len(),
        1
    );

    ns_sh(&ns, &["ip", "link", "del", &t]);
    let t0 = Instant::now();
    assert!(!pt.link_up(), "gone");
    // The queues notice, count it, and re-create the device within ~100 ms.
    let mut seq = 10;
    let (mut to_port, mut to_far) = (0, 0);
    while (to_port == 0 || to_far == 0) && t0.elapsed() < Duration::from_secs(3) {
        seq += 1;
        send(tt.as_mut(), &mut pool, &[frame(seq, 70, &[])]);
        send(tf.as_mut(), &mut pool, &[frame(seq, 70, &[])]);
        for _ in 0..10 {
            to_port += marked(rt.as_mut(), &mut pool);
            to_far += marked(rf.as_mut(), &mut pool);
            thread::sleep(Duration::from_millis(1));
        }
    }
    let took = t0.elapsed();
    assert!(
        to_port > 0 && to_far > 0,
        "no traffic after the deletion ({to_port}, {to_far})"
    );
    assert!(pt.link_up());
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    let c = pt.counters();
    assert!(c.errors >= 1, "{c:?}");
    eprintln!("traffic again {took:?} after the deletion; {c:?}");
    assert!(link_state(&ns, &t).contains(",UP"));
}

#[test]
fn forwarding_between_two_namespaces_carries_ping_and_tcp() {
    let test = "forwarding_between_two_namespaces_carries_ping_and_tcp";
    let Some(mut env) = tap_env(test) else {
        return;
    };
    if !need(test, &[python()]) {
        return;
    }
    let (na, nb) = (env.netns("a"), env.netns("b"));
    let (ta, tb) = (env.ifname("ta"), env.ifname("tb"));
    env.tap_moved_into(&ta, &na);
    env.tap_moved_into(&tb, &nb);
    let mut pa = tap("vma", &ta, &na, 1);
    let mut pb = tap("vmb", &tb, &nb, 1);
    ns_sh(&na, &["ip", "addr", "add", "10.78.0.1/24", "dev", &ta]);
    ns_sh(&nb, &["ip", "addr", "add", "10.78.0.2/24", "dev", &tb]);
    let fwd = Forwarder::start(&mut pa, &mut pb);
    ping_and_tcp(&na, &nb, "10.78.0.2", 4 << 20);
    drop(fwd);
    let (ca, cb) = (pa.counters(), pb.counters());
    eprintln!("port a: {ca:?}\nport b: {cb:?}");
    // With TSO (the default) the 4 MiB come in as super-frames of up to 64 KiB: few packets.
    assert!(ca.rx_bytes > 4 << 20 && ca.rx_packets > 60 && cb.rx_packets > 20);
    assert_eq!(ca.errors + cb.errors + ca.rx_dropped + cb.rx_dropped, 0);
}

#[test]
fn the_bridge_port_tap_takes_the_bridges_ethernet_and_ip_addresses() {
    let test = "the_bridge_port_tap_takes_the_bridges_ethernet_and_ip_addresses";
    let Some(mut env) = tap_env(test) else {
        return;
    };
    let ns = env.netns("i");
    // This one wants IPv6.
    ns_sh(&ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0"]);
    ns_sh(
        &ns,
        &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=0"],
    );
    let t = env.ifname("i");
    let pt = tap("br-phy", &t, &ns, 1);
    let addrs = [
        ("10.1.2.8".parse().unwrap(), 24),
        ("fd00:1::8".parse().unwrap(), 64),
    ];
    pt.set_addresses(Some([0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0]), &addrs)
        .unwrap();
    // Again (a restart on a persistent device): already there is fine.
    pt.set_addresses(Some([0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0]), &addrs)
        .unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns, "ip", "addr", "show", &t])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("link/ether 8c:dc:d4:ab:5b:f0"), "{text}");
    assert!(text.contains("inet 10.1.2.8/24"), "{text}");
    assert!(text.contains("inet6 fd00:1::8/64"), "{text}");
}

#[test]
fn tcp_super_frames_cross_between_two_namespaces_whole() {
    // TSO stays on in both namespaces: the kernel hands the tap TCP super-frames, the
    // forwarder passes them on whole, and the other kernel takes them with their
    // segmentation metadata.
    let test = "tcp_super_frames_cross_between_two_namespaces_whole";
    let Some(mut env) = tap_env(test) else {
        return;
    };
    if !need(test, &[python()]) {
        return;
    }
    let (na, nb) = (env.netns("sa"), env.netns("sb"));
    let (ta, tb) = (env.ifname("sa"), env.ifname("sb"));
    let mut pa = tap("vma", &ta, &na, 1);
    let mut pb = tap("vmb", &tb, &nb, 1);
    ns_sh(&na, &["ip", "addr", "add", "10.79.0.1/24", "dev", &ta]);
    ns_sh(&nb, &["ip", "addr", "add", "10.79.0.2/24", "dev", &tb]);
    let fwd = Forwarder::start(&mut pa, &mut pb);
    let r = std::panic::catch_unwind(|| ping_and_tcp(&na, &nb, "10.79.0.2", 16 << 20));
    drop(fwd);
    let (ca, cb) = (pa.counters(), pb.counters());
    if let Err(e) = r {
        eprintln!("port a: {ca:?}\nport b: {cb:?}");
        std::panic::resume_unwind(e);
    }
    eprintln!(
        "port a: {ca:?} ({} bytes per packet)\nport b: {cb:?}",
        ca.rx_bytes / ca.rx_packets.max(1)
    );
    assert!(
        ca.rx_bytes > 1514 * ca.rx_packets,
        "super-frames came in: {} bytes per packet",
        ca.rx_bytes / ca.rx_packets.max(1)
    );
    assert_eq!(cb.tx_packets, ca.rx_packets, "and went out whole");
    assert_eq!(
        ca.errors + cb.errors + ca.rx_dropped + cb.rx_dropped + ca.tx_dropped + cb.tx_dropped,
        0
    );
}

#[test]
fn super_frames_for_a_tap_without_tso_are_segmented_by_the_datapath() {
    // Port a takes super-frames (tso on); port b has tso off, so the PMD segments what goes
    // out of it, and the kernel behind b checks every segment's checksums.
    let test = "super_frames_for_a_tap_without_tso_are_segmented_by_the_datapath";
    let Some(mut env) = tap_env(test) else {
        return;
    };
    if !need(test, &[python()]) {
        return;
    }
    let (na, nb) = (env.netns("ga"), env.netns("gb"));
    let (ta, tb) = (env.ifname("ga"), env.ifname("gb"));
    let mut pa = tap("vma", &ta, &na, 1);
    let mut pb = TapPort::open(
        "vmb",
        &TapOptions {
            ifname: Some(tb.clone()),
            netns: Some(nb.clone()),
            tso: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(pb.options().contains("tso=false"), "{}", pb.options());
    ns_sh(&na, &["ip", "addr", "add", "10.80.0.1/24", "dev", &ta]);
    ns_sh(&nb, &["ip", "addr", "add", "10.80.0.2/24", "dev", &tb]);
    let running = Patched::start(&mut pa, &mut pb);
    ping_and_tcp(&na, &nb, "10.80.0.2", 8 << 20);
    let pmd = running.stop();
    let st = pmd.stats();
    let (ca, cb) = (pa.counters(), pb.counters());
    eprintln!("{st:?}\nport a: {ca:?}\nport b: {cb:?}");
    assert!(
        st.gso_frames > 0 && st.gso_segments > st.gso_frames,
        "{st:?}"
    );
    assert_eq!(st.gso_drops, 0);
    assert!(cb.tx_packets > ca.rx_packets, "b sent segments");
    assert_eq!(ca.errors + cb.errors + ca.rx_dropped + cb.tx_dropped, 0);
}

#[test]
fn segments_from_a_tap_without_tso_reach_a_tap_with_tso_merged() {
    // Port a has tso off: the kernel behind it hands over MTU-sized TCP segments. Port b
    // takes super-frames, so its tx queue merges each burst's segments (GRO): the kernel
    // behind b gets fewer, larger frames, and the transfer arrives whole.
    let test = "segments_from_a_tap_without_tso_reach_a_tap_with_tso_merged";
    let Some(mut env) = tap_env(test) else {
        return;
    };
    if !need(test, &[python()]) {
        return;
    }
    let (na, nb) = (env.netns("ra"), env.netns("rb"));
    let (ta, tb) = (env.ifname("ra"), env.ifname("rb"));
    let mut pa = TapPort::open(
        "vma",
        &TapOptions {
            ifname: Some(ta.clone()),
            netns: Some(na.clone()),
            tso: false,
            ..Default::default()
        },
    )
    .unwrap();
    let mut pb = tap("vmb", &tb, &nb, 1);
    ns_sh(&na, &["ip", "addr", "add", "10.81.0.1/24", "dev", &ta]);
    ns_sh(&nb, &["ip", "addr", "add", "10.81.0.2/24", "dev", &tb]);
    let fwd = Forwarder::start(&mut pa, &mut pb);
    let r = std::panic::catch_unwind(|| ping_and_tcp(&na, &nb, "10.81.0.2", 16 << 20));
    drop(fwd);
    let (ca, cb) = (pa.counters(), pb.counters());
    let x: std::collections::HashMap<String, u64> = pb.xstats().into_iter().collect();
    if let Err(e) = r {
        eprintln!("port a: {ca:?}\nport b: {cb:?} {x:?}");
        std::panic::resume_unwind(e);
    }
    eprintln!("port a: {ca:?}\nport b: {cb:?} {x:?}");
    assert!(
        ca.rx_bytes <= 1514 * ca.rx_packets,
        "segments came in: {} bytes per packet",
        ca.rx_bytes / ca.rx_packets.max(1)
    );
    let (frames, segments) = (x["tx_gro_frames"], x["tx_gro_segments"]);
    assert!(frames > 0 && segments > 2 * frames, "{x:?}");
    assert_eq!(
        cb.tx_packets + segments - frames,
        ca.rx_packets,
        "every segment went out, merged or alone"
    );
    assert_eq!(
        ca.errors + cb.errors + ca.rx_dropped + cb.rx_dropped + ca.tx_dropped + cb.tx_dropped,
        0
    );
}

/// UDP super-frames from a `UDP_SEGMENT` sender in namespace a come in whole through tap a
/// (which offers USO) and cross to namespace b through a PMD: whole when tap b has `tso`
/// (the kernel behind it cuts them), else as datagrams the PMD makes, which the kernel behind
/// b checks (lengths, checksums) before the receiver gets every byte in order.
fn udp_super_frames_cross(test: &str, tso_b: bool) {
    let Some(mut env) = tap_env(test) else {
        return;
    };
    if !need(test, &[python()]) {
        return;
    }
    let (na, nb) = (env.netns("ua"), env.netns("ub"));
    let (ta, tb) = (env.ifname("ua"), env.ifname("ub"));
    let mut pa = tap("vma", &ta, &na, 1);
    let o = TapOptions {
        ifname: Some(tb.clone()),
        netns: Some(nb.clone()),
        tso: tso_b,
        ..Default::default()
    };
    let mut pb = TapPort::open("vmb", &o).unwrap();
    let feats = Command::new("ip")
        .args(["netns", "exec", &na, "ethtool", "-k", &ta])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if !feats.contains("tx-udp-segmentation: on") {
        eprintln!("SKIP {test}: the kernel's tap takes no USO (Linux 6.2 and later)");
        return;
    }
    ns_sh(&na, &["ip", "addr", "add", "10.81.0.1/24", "dev", &ta]);
    ns_sh(&nb, &["ip", "addr", "add", "10.81.0.2/24", "dev", &tb]);
    let running = Patched::start(&mut pa, &mut pb);
    let (client, server) = udp_segment_exchange(&na, &nb, "10.81.0.2");
    let pmd = running.stop();
    let st = pmd.stats();
    let (ca, cb) = (pa.counters(), pb.counters());
    eprintln!("{st:?}\nport a: {ca:?}\nport b: {cb:?}");
    let (c, s) = (
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&server.stdout),
    );
    assert!(
        client.status.success(),
        "client: {c} {}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert_eq!(
        s.trim(),
        c.trim(),
        "the receiver got every datagram, in order"
    );
    assert!(c.starts_with("360 "), "{c}");
    assert!(
        ca.rx_bytes > 8 * 1400 * 40,
        "super-frames came in whole: {} bytes in {} packets",
        ca.rx_bytes,
        ca.rx_packets
    );
    assert!(ca.rx_packets < 100, "{} packets", ca.rx_packets);
    if tso_b {
        assert_eq!(st.gso_frames, 0, "went out whole");
    } else {
        assert_eq!((st.gso_frames, st.gso_segments), (40, 360), "segmented");
        assert!(cb.tx_packets >= 360);
    }
    assert_eq!(
        st.gso_drops + ca.errors + cb.errors + ca.rx_dropped + cb.tx_dropped,
        0
    );
}

#[test]
fn udp_super_frames_cross_whole_to_a_tap_with_uso() {
    udp_super_frames_cross("udp_super_frames_cross_whole_to_a_tap_with_uso", true);
}

#[test]
fn udp_super_frames_for_a_tap_without_tso_are_cut_into_datagrams() {
    udp_super_frames_cross(
        "udp_super_frames_for_a_tap_without_tso_are_cut_into_datagrams",
        false,
    );
}

/// Taps a (`tso` off, so the kernel hands over MTU-sized frames with partial checksums) and
/// b (`csum_offload` as `b_csum`) between two namespaces, patched together; TCP and ping
/// across. Returns b's `xstats` and both ports' counters.
fn partial_checksums_cross(
    test: &str,
    b_csum: bool,
) -> Option<(
    std::collections::HashMap<String, u64>,
    datapath::port::PortCounters,
    datapath::port::PortCounters,
)> {
    let mut env = tap_env(test)?;
    if !need(test, &[python()]) {
        return None;
    }
    let tag = if b_csum { "pc" } else { "pn" };
    let (na, nb) = (env.netns(&format!("{tag}a")), env.netns(&format!("{tag}b")));
    let (ta, tb) = (
        env.ifname(&format!("{tag}a")),
        env.ifname(&format!("{tag}b")),
    );
    let open = |name: &str, ifname: &str, ns: &str, csum_offload: bool| {
        let o = TapOptions {
            ifname: Some(ifname.to_owned()),
            netns: Some(ns.to_owned()),
            tso: false,
            csum_offload,
            ..Default::default()
        };
        TapPort::open(name, &o).unwrap()
    };
    let mut pa = open("vma", &ta, &na, true);
    let mut pb = open("vmb", &tb, &nb, b_csum);
    let net = if b_csum { "10.83.0" } else { "10.84.0" };
    ns_sh(
        &na,
        &["ip", "addr", "add", &format!("{net}.1/24"), "dev", &ta],
    );
    ns_sh(
        &nb,
        &["ip", "addr", "add", &format!("{net}.2/24"), "dev", &tb],
    );
    let running = Patched::start(&mut pa, &mut pb);
    ping_and_tcp(&na, &nb, &format!("{net}.2"), 4 << 20);
    running.stop();
    let x = pb.xstats().into_iter().collect();
    Some((x, pa.counters(), pb.counters()))
}

#[test]
fn partial_checksums_go_from_tap_to_tap_unfinished() {
    // The kernel behind a hands over TCP segments with partial checksums; they leave b as
    // NEEDS_CSUM, not completed by the switch.
    let test = "partial_checksums_go_from_tap_to_tap_unfinished";
    let Some((x, ca, cb)) = partial_checksums_cross(test, true) else {
        return;
    };
    eprintln!("b xstats {x:?}\nport a: {ca:?}\nport b: {cb:?}");
    let partial = x["tx_csum_partial"];
    assert!(
        partial * 2 > cb.tx_packets && cb.tx_packets > 1000,
        "most of what b sent went as NEEDS_CSUM: {partial} of {}",
        cb.tx_packets
    );
    assert_eq!(ca.errors + cb.errors + ca.rx_dropped + cb.tx_dropped, 0);
}

#[test]
fn partial_checksums_for_a_tap_without_csum_offload_are_completed_by_the_datapath() {
    // b has csum_offload off: the switch completes the checksums of what a hands over, and
    // the kernel behind b checks them (a wrong one would stall the transfer).
    let test = "partial_checksums_for_a_tap_without_csum_offload_are_completed_by_the_datapath";
    let Some((x, ca, cb)) = partial_checksums_cross(test, false) else {
        return;
    };
    eprintln!("b xstats {x:?}\nport a: {ca:?}\nport b: {cb:?}");
    assert!(!x.contains_key("tx_csum_partial"), "{x:?}");
    assert!(cb.tx_packets > 1000, "{cb:?}");
    assert_eq!(ca.errors + cb.errors + ca.rx_dropped + cb.tx_dropped, 0);
}
