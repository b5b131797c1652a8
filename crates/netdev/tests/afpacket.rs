//! `afpacket` ports on veth pairs in network namespaces. Needs root (and `ip netns`): as any
//! other user the tests print `SKIP` and return.
//!
//! Every test makes its own namespaces and interfaces, named from the process id and the
//! test's name, and a guard deletes them however the test ends.

use std::collections::HashSet;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use datapath::packet::{Batch, Pool};
use datapath::port::{Port, RxQueue};
use netdev::afpacket::{AfPacketOptions, AfPacketPort};

mod common;
use common::*;

fn open(name: &str, ifname: &str, netns: Option<&str>, n_rxq: usize) -> AfPacketPort {
    let o = AfPacketOptions {
        ifname: Some(ifname.to_owned()),
        netns: netns.map(str::to_owned),
        n_rxq,
        ..Default::default()
    };
    AfPacketPort::open(name, &o).unwrap_or_else(|e| panic!("open {ifname}: {e}"))
}

#[test]
fn bursts_both_ways_arrive_byte_identical_and_are_not_looped_back() {
    let test = "bursts_both_ways_arrive_byte_identical_and_are_not_looped_back";
    let Some(mut env) = Env::new(test) else {
        return;
    };
    let nb = env.netns("b");
    let (a, b) = (env.ifname("a"), env.ifname("b"));
    // Port A in the root namespace, port B opened into namespace nb.
    env.veth(&a, None, &b, &nb);
    // A sends through the interface's qdisc, which shows its frames to every packet socket
    // on the interface, its own rx socket included (as PACKET_OUTGOING).
    let o = AfPacketOptions {
        ifname: Some(a.clone()),
        qdisc_bypass: false,
        ..Default::default()
    };
    let mut pa = AfPacketPort::open("pa", &o).unwrap();
    let mut pb = open("pb", &b, Some(&nb), 1);
    assert_eq!(pa.kind(), "afpacket");
    assert_eq!(pa.options(), format!("{{ifname={a}, qdisc_bypass=false}}"));
    assert_eq!(pb.options(), format!("{{ifname={b}, netns={nb}}}"));
    assert!(pa.link_up() && pb.link_up());
    let (mut ra, mut rb) = (pa.take_rxq(0, 1).unwrap(), pb.take_rxq(0, 2).unwrap());
    assert!(pa.take_rxq(0, 1).is_none(), "a queue is taken once");
    let (mut ta, mut tb) = (pa.open_txq(), pb.open_txq());
    let mut pool = Pool::new(1024, 0);

    const N: u32 = 640;
    // A to B, frames of every size from 60 to 1514 bytes.
    let sent: Vec<Vec<u8>> = (0..N)
        .map(|i| frame(i, 60 + (i as usize * 37) % 1455, &[]))
        .collect();
    let got = relay(ta.as_mut(), rb.as_mut(), &mut pool, &sent);
    assert!(
        got == sent,
        "A to B: {} of {} frames",
        got.len(),
        sent.len()
    );
    let echoed = collect(ra.as_mut(), &mut pool, 1, Duration::from_millis(50));
    assert!(
        echoed.is_empty(),
        "the sender's rx queue saw its own frames"
    );
    // And the other way, B to A.
    let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(i, 1514 - i as usize, &[])).collect();
    let got = relay(tb.as_mut(), ra.as_mut(), &mut pool, &sent);
    assert!(
        got == sent,
        "B to A: {} of {} frames",
        got.len(),
        sent.len()
    );
    assert!(collect(rb.as_mut(), &mut pool, 1, Duration::from_millis(50)).is_empty());

    let (ca, cb) = (pa.counters(), pb.counters());
    assert_eq!(ca.tx_packets, u64::from(N));
    assert_eq!(cb.tx_packets, u64::from(N));
    assert!(ca.rx_packets >= u64::from(N) && cb.rx_packets >= u64::from(N));
    assert_eq!(ca.tx_dropped + cb.tx_dropped + ca.errors + cb.errors, 0);

    // A frame larger than the MTU is a counted drop, not an error or a panic.
    send(tb.as_mut(), &mut pool, &[frame(9999, 1600, &[])]);
    assert_eq!(pb.counters().tx_dropped, 1);
}

/// What a switch sends in one go when it segments a burst of TCP super-frames for a tunnel:
/// 32 frames of 64 KiB cut into 45 segments each, about 1 440 full-sized frames. The rx
/// ring of the switch on the other end of the wire must hold them all before its PMD runs
/// again (on a shared core it may not run in between); with an 8-block ring (1 MiB, about
/// 600 such frames) the rest were lost, and each loss cost TCP a retransmission.
#[test]
fn the_default_ring_holds_the_segments_of_a_burst_of_super_frames() {
    let test = "the_default_ring_holds_the_segments_of_a_burst_of_super_frames";
    let Some(mut env) = Env::new(test) else {
        return;
    };
    let nb = env.netns("b");
    let (a, b) = (env.ifname("a"), env.ifname("b"));
    env.veth(&a, None, &b, &nb);
    sh(&["ip", "link", "set", &a, "mtu", "1600"]);
    ns_sh(&nb, &["ip", "link", "set", &b, "mtu", "1600"]);
    let mut pa = open("pa", &a, None, 1);
    let mut pb = open("pb", &b, Some(&nb), 1);
    let mut ta = pa.open_txq();
    let mut rb = pb.take_rxq(0, 2).unwrap();
    let mut pool = Pool::new(2048, 0);
    const N: u32 = 32 * 45;
    // 1514-byte frames plus a VXLAN encapsulation's 50 bytes, all sent before B polls once.
    let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(i, 1564, &[])).collect();
    for chunk in sent.chunks(32) {
        send(ta.as_mut(), &mut pool, chunk);
    }
    assert_eq!(pa.counters().tx_packets, u64::from(N), "A sent them all");
    let got = collect(rb.as_mut(), &mut pool, sent.len(), Duration::from_secs(2));
    let c = pb.counters();
    assert!(
        got == sent && c.rx_dropped == 0,
        "B received {} of {N} frames, rx_dropped {}",
        got.len(),
        c.rx_dropped
    );
}

#[test]
fn vlan_tags_are_restored_as_on_the_wire() {
    let test = "vlan_tags_are_restored_as_on_the_wire";
    let Some(mut env) = Env::new(test) else {
        return;
    };
    let (na, nb) = (env.netns("a"), env.netns("b"));
    let (a, b) = (env.ifname("a"), env.ifname("b"));
    env.veth(&a, Some(&na), &b, &nb);
    let mut pa = open("pa", &a, Some(&na), 1);
    let mut pb = open("pb", &b, Some(&nb), 1);
    let mut rb = pb.take_rxq(0, 2).unwrap();
    let mut ta = pa.open_txq();
    let mut pool = Pool::new(256, 0);
    let sent = vec![
        // 802.1Q, VLAN 100, priority 3.
        frame(1, 100, &[[0x81, 0x00, 0x60, 100]]),
        // Priority-tagged (VLAN 0).
        frame(2, 64, &[[0x81, 0x00, 0xa0, 0]]),
        // 802.1ad outer tag over an 802.1Q inner one.
        frame(3, 200, &[[0x88, 0xa8, 0x00, 7], [0x81, 0x00, 0x0f, 0xff]]),
        // Untagged.
        frame(4, 60, &[]),
        // 802.1Q, VLAN 4094, full size.
        frame(5, 1518, &[[0x81, 0x00, 0x0f, 0xfe]]),
    ];
    send(ta.as_mut(), &mut pool, &sent);
    let got = collect(rb.as_mut(), &mut pool, sent.len(), Duration::from_secs(2));
    assert_eq!(got.len(), sent.len());
    for (g, s) in got.iter().zip(&sent) {
        assert_eq!(g, s, "frame {:?}", seq_of(s));
    }
}

#[test]
fn two_queues_with_fanout_receive_everything_exactly_once() {
    let test = "two_queues_with_fanout_receive_everything_exactly_once";
    let Some(mut env) = Env::new(test) else {
        return;
    };
    let (na, nb) = (env.netns("a"), env.netns("b"));
    let (a, b) = (env.ifname("a"), env.ifname("b"));
    env.veth(&a, Some(&na), &b, &nb);
    let mut pa = open("pa", &a, Some(&na), 1);
    let mut pb = open("pb", &b, Some(&nb), 2);
    assert_eq!(pb.n_rxq(), 2);
    assert!(pb.options().contains("n_rxq=2"), "{}", pb.options());
    let mut q0 = pb.take_rxq(0, 2).unwrap();
    let mut q1 = pb.take_rxq(1, 2).unwrap();
    let mut ta = pa.open_txq();
    let mut pool = Pool::new(1024, 0);
    const N: u32 = 1024;
    let (mut seen0, mut seen1) = (Vec::new(), Vec::new());
    let mut b = Batch::new();
    for chunk in (0..N).collect::<Vec<_>>().chunks(32) {
        let frames: Vec<_> = chunk
            .iter()
            .map(|&i| udp_frame(i, (i % 64) as u16))
            .collect();
        send(ta.as_mut(), &mut pool, &frames);
        let end = Instant::now() + Duration::from_millis(300);
        while seen0.len() + seen1.len() < chunk[chunk.len() - 1] as usize + 1
            && Instant::now() < end
        {
            for (q, seen) in [(&mut q0, &mut seen0), (&mut q1, &mut seen1)] {
                q.recv(&mut pool, &mut b);
                for p in b.drain() {
                    if let Some(s) = seq_of(p.data()) {
                        seen.push(s);
                    }
                    pool.free(p);
                }
            }
        }
    }
    // Late duplicates, if any.
    for q in [&mut q0, &mut q1] {
        let extra = collect(q.as_mut(), &mut pool, 1, Duration::from_millis(30));
        assert!(extra.is_empty(), "{} extra frames", extra.len());
    }
    assert!(
        !seen0.is_empty() && !seen1.is_empty(),
        "{} / {}",
        seen0.len(),
        seen1.len()
    );
    let all: HashSet<u32> = seen0.iter().chain(&seen1).copied().collect();
    assert_eq!(seen0.len() + seen1.len(), N as usize, "each frame once");
    assert_eq!(all.len(), N as usize);
    // A flow stays on one queue.
    let flows0: HashSet<u32> = seen0.iter().map(|s| s % 64).collect();
    let flows1: HashSet<u32> = seen1.iter().map(|s| s % 64).collect();
    assert!(flows0.is_disjoint(&flows1));
}

#[test]
fn a_deleted_interface_is_reattached_when_it_comes_back() {
    let test = "a_deleted_interface_is_reattached_when_it_comes_back";
    let Some(mut env) = Env::new(test) else {
        return;
    };
    let (na, nb) = (env.netns("a"), env.netns("b"));
    let (a, b) = (env.ifname("a"), env.ifname("b"));
    env.veth(&a, Some(&na), &b, &nb);
    let mut pa = open("pa", &a, Some(&na), 2);
    let mut pb = open("pb", &b, Some(&nb), 1);
    let mut ra: Vec<_> = (0..2).map(|q| pa.take_rxq(q, 1).unwrap()).collect();
    let mut rb = pb.take_rxq(0, 2).unwrap();
    let (mut ta, mut tb) = (pa.open_txq(), pb.open_txq());
    let mut pool = Pool::new(256, 0);
    let poll_a = |pool: &mut Pool, ra: &mut Vec<Box<dyn RxQueue>>| -> usize {
        ra.iter_mut().map(|q| marked(q.as_mut(), pool)).sum()
    };

    send(tb.as_mut(), &mut pool, &[udp_frame(1, 1)]);
    let end = Instant::now() + Duration::from_secs(2);
    let mut got = 0;
    while got == 0 && Instant::now() < end {
        got += poll_a(&mut pool, &mut ra);
    }
    assert_eq!(got, 1, "traffic before the deletion");

    ns_sh(&na, &["ip", "link", "del", &a]);
    assert!(!pa.link_up() && !pb.link_up());
    // Polling and sending go on without panic or hang; the queues notice within ~100 ms.
    let end = Instant::now() + Duration::from_millis(400);
    while Instant::now() < end {
        assert_eq!(poll_a(&mut pool, &mut ra), 0);
        marked(rb.as_mut(), &mut pool);
        send(ta.as_mut(), &mut pool, &[udp_frame(2, 2)]);
        thread::sleep(Duration::from_millis(1));
    }
    let (ca, cb) = (pa.counters(), pb.counters());
    assert!(ca.errors >= 3, "rx queues and tx count the loss: {ca:?}");
    assert!(ca.tx_dropped > 0, "{ca:?}");
    assert!(cb.errors >= 1, "{cb:?}");

    // The pair comes back under the same names.
    env.veth(&a, Some(&na), &b, &nb);
    let t0 = Instant::now();
    // Carrier (IFF_RUNNING) follows shortly after the link is set up.
    while !(pa.link_up() && pb.link_up()) {
        assert!(t0.elapsed() < Duration::from_secs(2), "links stay down");
        thread::sleep(Duration::from_millis(5));
    }
    let t_up = t0.elapsed();
    // The first burst `tb` sends finds its socket bound to the old interface: it reopens at
    // once and sends the burst to the new one, losing nothing.
    let before = pb.counters();
    send(tb.as_mut(), &mut pool, &[udp_frame(9, 9)]);
    let after = pb.counters();
    assert_eq!(
        (after.tx_dropped, after.tx_packets),
        (before.tx_dropped, before.tx_packets + 1),
        "{after:?}"
    );
    let mut a_got = 0;
    let mut b_got = 0;
    let end = t0 + Duration::from_secs(3);
    let mut i = 10;
    while (a_got == 0 || b_got == 0) && Instant::now() < end {
        i += 1;
        send(tb.as_mut(), &mut pool, &[udp_frame(i, i as u16)]);
        send(ta.as_mut(), &mut pool, &[udp_frame(i, i as u16)]);
        for _ in 0..20 {
            a_got += poll_a(&mut pool, &mut ra);
            b_got += marked(rb.as_mut(), &mut pool);
            thread::sleep(Duration::from_millis(1));
        }
    }
    let took = t0.elapsed();
    assert!(
        a_got > 0 && b_got > 0,
        "no traffic after re-creation ({a_got}, {b_got})"
    );
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    eprintln!("traffic again {took:?} after re-creation (carrier after {t_up:?})");

    // Once both rx queues have reopened (each within ~100 ms), they form one fanout group
    // again: every frame arrives once, on one of them.
    thread::sleep(Duration::from_millis(300));
    for q in ra.iter_mut() {
        collect(q.as_mut(), &mut pool, usize::MAX, Duration::from_millis(20));
    }
    let frames: Vec<_> = (0..64).map(|i| udp_frame(1000 + i, i as u16)).collect();
    send(tb.as_mut(), &mut pool, &frames);
    let mut seen = Vec::new();
    let end = Instant::now() + Duration::from_secs(2);
    while seen.len() < frames.len() && Instant::now() < end {
        for q in ra.iter_mut() {
            let mut b = Batch::new();
            q.recv(&mut pool, &mut b);
            seen.extend(b.packets().iter().filter_map(|p| seq_of(p.data())));
            pool.free_batch(&mut b);
        }
    }
    for q in ra.iter_mut() {
        let late = collect(q.as_mut(), &mut pool, 1, Duration::from_millis(30));
        seen.extend(late.iter().filter_map(|f| seq_of(f)));
    }
    let distinct: HashSet<u32> = seen.iter().copied().collect();
    assert_eq!(
        (seen.len(), distinct.len()),
        (64, 64),
        "after reattaching, each frame once"
    );
}

#[test]
fn forwarding_between_two_namespaces_carries_ping_and_tcp() {
    let test = "forwarding_between_two_namespaces_carries_ping_and_tcp";
    let Some(mut env) = Env::new(test) else {
        return;
    };
    if !need(test, &[python(), "ethtool"]) {
        return;
    }
    let (na, nb, nf) = (env.netns("a"), env.netns("b"), env.netns("f"));
    let (a0, a1, b0, b1) = (
        env.ifname("a0"),
        env.ifname("a1"),
        env.ifname("b0"),
        env.ifname("b1"),
    );
    env.veth(&a0, Some(&na), &a1, &nf);
    env.veth(&b0, Some(&nb), &b1, &nf);
    ns_sh(&na, &["ip", "addr", "add", "10.77.0.1/24", "dev", &a0]);
    ns_sh(&nb, &["ip", "addr", "add", "10.77.0.2/24", "dev", &b0]);
    // Segmentation offloads off on the hosts' ends (an AF_PACKET port does not segment);
    // checksum offload stays on: partial checksums stay pending, completed by the forwarder.
    for (ns, dev) in [(&na, &a0), (&nb, &b0)] {
        ns_sh(ns, &["ethtool", "-K", dev, "tso", "off", "gso", "off"]);
    }
    let mut pa = open("pa", &a1, Some(&nf), 1);
    let mut pb = open("pb", &b1, Some(&nf), 1);
    let fwd = Forwarder::start(&mut pa, &mut pb);
    ping_and_tcp(&na, &nb, "10.77.0.2", 4 << 20);
    drop(fwd);
    let (ca, cb) = (pa.counters(), pb.counters());
    eprintln!("port a: {ca:?}\nport b: {cb:?}");
    assert!(ca.rx_packets > 2000 && cb.rx_packets > 200);
    assert_eq!(ca.errors + cb.errors, 0);
}

/// The RFC 1071 sum of `data` (big-endian words), not folded.
fn sum16(data: &[u8]) -> u32 {
    data.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

/// Whether the UDP/IPv4 frame `f` (untagged) carries a correct, non-zero UDP checksum.
fn udp4_checksum_ok(f: &[u8]) -> bool {
    let ip = &f[14..];
    let ihl = usize::from(ip[0] & 15) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let udp = &ip[ihl..total];
    let mut s = sum16(&ip[12..20]) + 17 + udp.len() as u32 + sum16(udp);
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s == 0xffff && udp[6..8] != [0, 0]
}

#[test]
fn partial_checksums_from_the_peer_stack_stay_pending_and_complete_right() {
    let test = "partial_checksums_from_the_peer_stack_stay_pending_and_complete_right";
    let Some(mut env) = Env::new(test) else {
        return;
    };
    if !need(test, &[python(), "ethtool"]) {
        return;
    }
    let (na, nb) = (env.netns("a"), env.netns("b"));
    let (a, b) = (env.ifname("a"), env.ifname("b"));
    env.veth(&a, Some(&na), &b, &nb);
    // The sender's stack leaves the UDP checksum to the device (veth's default).
    ns_sh(&nb, &["ethtool", "-K", &b, "tx", "on"]);
    ns_sh(&nb, &["ip", "addr", "add", "10.79.0.1/24", "dev", &b]);
    ns_sh(
        &nb,
        &[
            "ip",
            "neigh",
            "replace",
            "10.79.0.2",
            "lladdr",
            "02:00:00:00:00:02",
            "dev",
            &b,
        ],
    );
    let mut pa = open("pa", &a, Some(&na), 1);
    let mut ra = pa.take_rxq(0, 1).unwrap();
    let mut pool = Pool::new(256, 0);
    const SIZES: [usize; 6] = [8, 9, 17, 100, 1001, 1400];
    const SEND: &str = r#"
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i, n in enumerate(int(a) for a in sys.argv[1:]):
    p = b'FPTm' + struct.pack('!I', i) + bytes((i * 7 + j) & 0xff for j in range(n - 8))
    s.sendto(p, ('10.79.0.2', 5000))
"#;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &nb, python(), "-c", SEND]);
    cmd.args(SIZES.map(|n| n.to_string()));
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each comes pending, in a marked batch; completed as the datapath would, it is right.
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(2);
    let mut b = Batch::new();
    while got.len() < SIZES.len() && Instant::now() < end {
        ra.recv(&mut pool, &mut b);
        let marked = b.take_gso();
        for mut p in b.drain() {
            if seq_of(p.data()).is_some() {
                assert!(p.meta.csum_pending() && marked, "pending, its batch marked");
                assert!(datapath::csum_pending::complete(&mut p));
                got.push(p.data().to_vec());
            }
            pool.free(p);
        }
    }
    assert_eq!(got.len(), SIZES.len());
    for f in &got {
        assert!(f[12..14] == [0x08, 0x00] && f[23] == 17, "{f:02x?}");
        assert!(udp4_checksum_ok(f), "bad UDP checksum in {f:02x?}");
    }
    let c = pa.counters();
    assert_eq!(c.rx_dropped + c.errors, 0, "{c:?}");
}
