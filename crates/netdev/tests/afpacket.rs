//! `afpacket` ports on veth pairs in network namespaces. Needs root (and `ip netns`): as any
//! other user the tests print `SKIP` and return.
//!
//! Every test makes its own namespaces and interfaces, named from the process id and the
//! test's name, and a guard deletes them however the test ends.

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use datapath::packet::{Batch, Pool};
use datapath::port::{Port, RxQueue, TxQueue};
use netdev::afpacket::{AfPacketOptions, AfPacketPort};

/// Namespaces (and root-namespace links) of one test, deleted on drop.
struct Env {
    tag: String,
    netns: Vec<String>,
    links: Vec<String>,
}

impl Drop for Env {
    fn drop(&mut self) {
        for l in &self.links {
            let _ = quiet(&["ip", "link", "del", l]);
        }
        for n in &self.netns {
            let _ = quiet(&["ip", "netns", "del", n]);
        }
    }
}

fn quiet(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ns_sh(ns: &str, args: &[&str]) {
    let mut v = vec!["ip", "netns", "exec", ns];
    v.extend_from_slice(args);
    sh(&v);
}

impl Env {
    /// A test environment, or `None` (with a SKIP line) when this is not root or network
    /// namespaces do not work.
    fn new(test: &str) -> Option<Env> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP {test}: needs root (network namespaces, veth)");
            return None;
        }
        let mut h: u32 = 2166136261;
        for b in test.bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(16777619);
        }
        let tag = format!("{:05x}{:04x}", std::process::id() & 0xfffff, h & 0xffff);
        let env = Env {
            tag,
            netns: Vec::new(),
            links: Vec::new(),
        };
        let probe = format!("fpt-{}-p", env.tag);
        if !quiet(&["ip", "netns", "add", &probe]) {
            eprintln!("SKIP {test}: 'ip netns add' failed");
            return None;
        }
        quiet(&["ip", "netns", "del", &probe]);
        Some(env)
    }

    /// A new namespace `fpt-TAG-SUFFIX` with loopback up and IPv6 off (no stray traffic).
    fn netns(&mut self, suffix: &str) -> String {
        let n = format!("fpt-{}-{suffix}", self.tag);
        sh(&["ip", "netns", "add", &n]);
        self.netns.push(n.clone());
        ns_sh(&n, &["ip", "link", "set", "lo", "up"]);
        ns_sh(&n, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
        ns_sh(
            &n,
            &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"],
        );
        n
    }

    /// An interface name `fSUFFIX-TAG` (at most 15 bytes).
    fn ifname(&self, suffix: &str) -> String {
        let n = format!("f{suffix}{}", self.tag);
        assert!(n.len() <= 15, "{n}");
        n
    }

    /// A veth pair `a` (in `ns_a`, or the root namespace) and `b` (in `ns_b`), both up.
    fn veth(&mut self, a: &str, ns_a: Option<&str>, b: &str, ns_b: &str) {
        let mut cmd = vec!["ip", "link", "add", a];
        if let Some(n) = ns_a {
            cmd.extend(["netns", n]);
        } else {
            self.links.push(a.to_owned());
        }
        cmd.extend(["type", "veth", "peer", "name", b, "netns", ns_b]);
        sh(&cmd);
        match ns_a {
            Some(n) => ns_sh(n, &["ip", "link", "set", a, "up"]),
            None => {
                quiet(&[
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{a}.disable_ipv6=1"),
                ]);
                sh(&["ip", "link", "set", a, "up"]);
            }
        }
        ns_sh(ns_b, &["ip", "link", "set", b, "up"]);
    }
}

fn open(name: &str, ifname: &str, netns: Option<&str>, n_rxq: usize) -> AfPacketPort {
    let o = AfPacketOptions {
        ifname: Some(ifname.to_owned()),
        netns: netns.map(str::to_owned),
        n_rxq,
        ..Default::default()
    };
    AfPacketPort::open(name, &o).unwrap_or_else(|e| panic!("open {ifname}: {e}"))
}

const MARK: [u8; 4] = *b"FPTm";

/// A test frame: Ethernet (experimental ethertype 0x88b5, optionally after `tags`), the
/// marker, a sequence number, then `len` bytes in total of a pattern.
fn frame(seq: u32, len: usize, tags: &[[u8; 4]]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
    for t in tags {
        f.extend_from_slice(t);
    }
    f.extend_from_slice(&[0x88, 0xb5]);
    f.extend_from_slice(&MARK);
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((f.len() as u32 ^ seq.wrapping_mul(31)) as u8);
    }
    f
}

/// A UDP/IPv4 test frame of flow `flow` (the fanout hash spreads flows over queues).
fn udp_frame(seq: u32, flow: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00];
    let payload_len = 8 + 8;
    let total = (20 + 8 + payload_len) as u16;
    f.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[10, 9, (flow >> 8) as u8, flow as u8, 10, 9, 0, 1]);
    f.extend_from_slice(&(1000 + flow).to_be_bytes());
    f.extend_from_slice(&5000u16.to_be_bytes());
    f.extend_from_slice(&((8 + payload_len) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&MARK);
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&[0; 8]);
    f
}

/// The sequence number of a marked frame (any tags before the marker skipped).
fn seq_of(f: &[u8]) -> Option<u32> {
    let i = f.windows(4).position(|w| w == MARK)?;
    Some(u32::from_be_bytes(f.get(i + 4..i + 8)?.try_into().ok()?))
}

fn send(txq: &mut dyn TxQueue, pool: &mut Pool, frames: &[Vec<u8>]) {
    let mut b = Batch::new();
    for f in frames {
        b.push(pool.packet_from(f, 0));
    }
    txq.send(&mut b, pool);
}

/// Polls `rxq` until `want` marked frames arrived or `timeout`; returns the marked frames.
fn collect(rxq: &mut dyn RxQueue, pool: &mut Pool, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let end = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut b = Batch::new();
    while got.len() < want && Instant::now() < end {
        if rxq.recv(pool, &mut b) == 0 {
            thread::sleep(Duration::from_micros(200));
        }
        for p in b.drain() {
            if seq_of(p.data()).is_some() {
                got.push(p.data().to_vec());
            }
            pool.free(p);
        }
    }
    got
}

/// One poll of `rxq`: how many marked frames it gave.
fn marked(rxq: &mut dyn RxQueue, pool: &mut Pool) -> usize {
    let mut b = Batch::new();
    rxq.recv(pool, &mut b);
    let n = b
        .packets()
        .iter()
        .filter(|p| seq_of(p.data()).is_some())
        .count();
    pool.free_batch(&mut b);
    n
}

#[test]
fn bursts_both_ways_arrive_byte_identical_and_are_not_looped_back() {
    let Some(mut env) = Env::new("afpacket_bursts") else {
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
    let mut got = Vec::new();
    for chunk in sent.chunks(32) {
        send(ta.as_mut(), &mut pool, chunk);
        got.extend(collect(
            rb.as_mut(),
            &mut pool,
            chunk.len(),
            Duration::from_secs(2),
        ));
    }
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
    let mut got = Vec::new();
    for chunk in sent.chunks(32) {
        send(tb.as_mut(), &mut pool, chunk);
        got.extend(collect(
            ra.as_mut(),
            &mut pool,
            chunk.len(),
            Duration::from_secs(2),
        ));
    }
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

#[test]
fn vlan_tags_are_restored_as_on_the_wire() {
    let Some(mut env) = Env::new("afpacket_vlan") else {
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
    let Some(mut env) = Env::new("afpacket_fanout") else {
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
    let Some(mut env) = Env::new("afpacket_reattach") else {
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
}

/// Forwards between two ports on a thread until dropped: the smallest switch.
struct Forwarder {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Forwarder {
    fn start(pa: &mut dyn Port, pb: &mut dyn Port) -> Forwarder {
        let mut ends = [
            (pa.take_rxq(0, 1).unwrap(), pb.open_txq()),
            (pb.take_rxq(0, 2).unwrap(), pa.open_txq()),
        ];
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::spawn(move || {
            let mut pool = Pool::new(1024, 256);
            let mut b = Batch::new();
            while !s.load(Ordering::Relaxed) {
                let mut n = 0;
                for (rx, tx) in ends.iter_mut() {
                    n += rx.recv(&mut pool, &mut b);
                    if !b.is_empty() {
                        tx.send(&mut b, &mut pool);
                    }
                }
                if n == 0 {
                    thread::sleep(Duration::from_micros(50));
                }
            }
        });
        Forwarder {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn python() -> &'static str {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// A Python one-shot ping (ICMP echo over a raw socket): true when `dst` answers.
const PING: &str = r#"
import socket, struct, sys, time
dst = sys.argv[1]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(0.5)
def csum(b):
    if len(b) % 2: b += b'\0'
    t = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while t >> 16: t = (t & 0xffff) + (t >> 16)
    return ~t & 0xffff
for i in range(10):
    body = struct.pack('!BBHHH', 8, 0, 0, 0x4650, i) + b'flowpath' * 4
    body = body[:2] + struct.pack('!H', csum(body)) + body[4:]
    s.sendto(body, (dst, 0))
    try:
        while True:
            d, a = s.recvfrom(2048)
            ihl = (d[0] & 15) * 4
            if a[0] == dst and d[ihl] == 0 and d[ihl + 4:ihl + 6] == b'\x46\x50':
                print('reply', i); sys.exit(0)
    except socket.timeout:
        pass
sys.exit(1)
"#;

const TCP_SERVER: &str = r#"
import socket, hashlib, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5001)); s.listen(1); s.settimeout(8)
c, _ = s.accept(); c.settimeout(8)
h = hashlib.sha256(); n = 0
while True:
    d = c.recv(1 << 16)
    if not d: break
    h.update(d); n += len(d)
print(n, h.hexdigest())
"#;

const TCP_CLIENT: &str = r#"
import socket, hashlib, random, sys, time
data = random.Random(7).randbytes(int(sys.argv[2]))
end = time.time() + 5
while True:
    try:
        c = socket.create_connection((sys.argv[1], 5001), timeout=2); break
    except OSError:
        if time.time() > end: raise
        time.sleep(0.05)
c.settimeout(8)
c.sendall(data); c.shutdown(socket.SHUT_WR); c.recv(1)
print(len(data), hashlib.sha256(data).hexdigest())
"#;

/// Ping and a TCP transfer of `bytes` from `ns_a` to `ns_b`, which has address `dst`.
fn ping_and_tcp(ns_a: &str, ns_b: &str, dst: &str, bytes: usize) {
    let ping = Command::new("ip")
        .args(["netns", "exec", ns_a, python(), "-c", PING, dst])
        .output()
        .unwrap();
    assert!(
        ping.status.success(),
        "ping through the forwarder: {}",
        String::from_utf8_lossy(&ping.stderr)
    );
    let server = Command::new("ip")
        .args(["netns", "exec", ns_b, python(), "-c", TCP_SERVER, dst])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let client = Command::new("ip")
        .args(["netns", "exec", ns_a, python(), "-c", TCP_CLIENT, dst])
        .arg(bytes.to_string())
        .output()
        .unwrap();
    let server = server.wait_with_output().unwrap();
    let (c, s) = (
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&server.stdout),
    );
    assert!(
        client.status.success() && server.status.success(),
        "client: {c} {}; server: {s}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert_eq!(c.trim(), s.trim(), "the server got what the client sent");
    assert!(c.starts_with(&bytes.to_string()));
}

#[test]
fn forwarding_between_two_namespaces_carries_ping_and_tcp() {
    let Some(mut env) = Env::new("afpacket_forward") else {
        return;
    };
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
    // checksum offload stays on: rx completes partial checksums.
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
