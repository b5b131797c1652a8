//! `tap` ports on TAP devices in network namespaces. Needs root (and `ip netns`): as any
//! other user the tests print `SKIP` and return.
//!
//! The far end of a tap is the namespace's stack, or an `afpacket` port opened on the same
//! device inside the namespace (what the kernel sends out of the tap is what the tap port
//! receives). Every test makes its own namespaces and devices, named from the process id and
//! the test's name, and a guard deletes them however the test ends.

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use datapath::packet::{Batch, Pool};
use datapath::port::{Port, RxQueue, TxQueue};
use netdev::afpacket::{AfPacketOptions, AfPacketPort};
use netdev::tap::{TapOptions, TapPort};

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
    let Some(mut env) = Env::new("tap_bursts") else {
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
    let mut got = Vec::new();
    for chunk in sent.chunks(32) {
        send(tf.as_mut(), &mut pool, chunk);
        got.extend(collect(
            rt.as_mut(),
            &mut pool,
            chunk.len(),
            Duration::from_secs(2),
        ));
    }
    assert!(
        got == sent,
        "kernel to port: {} of {} frames",
        got.len(),
        sent.len()
    );

    // Port to kernel, seen by the far end's packet socket (which restores stripped tags).
    let mut got = Vec::new();
    for chunk in sent.chunks(32) {
        send(tt.as_mut(), &mut pool, chunk);
        got.extend(collect(
            rf.as_mut(),
            &mut pool,
            chunk.len(),
            Duration::from_secs(2),
        ));
    }
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
    let Some(mut env) = Env::new("tap_create") else {
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
    let Some(mut env) = Env::new("tap_mq") else {
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
    let Some(mut env) = Env::new("tap_deleted") else {
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
    let Some(mut env) = Env::new("tap_forward") else {
        return;
    };
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
    assert!(ca.rx_packets > 2000 && cb.rx_packets > 200);
    assert_eq!(ca.errors + cb.errors + ca.rx_dropped + cb.rx_dropped, 0);
}

#[test]
fn the_bridge_port_tap_takes_the_bridges_ethernet_and_ip_addresses() {
    let Some(mut env) = Env::new("tap_addrs") else {
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
