//! Helpers shared by the port tests (`afpacket`, `tap`, `virtio_user`, `vhost_reconnect`): a
//! guard for the namespaces and links a test makes, test frames, polling loops, a thread that
//! runs until dropped, a minimal forwarder, ping and TCP through it, and flowpath's vhost-user
//! back-end.
#![allow(dead_code)] // Each test binary uses part of it.

pub mod kernel_path;

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use std::path::Path;

use datapath::packet::{Batch, Pool};
use datapath::port::{Port, RxQueue, TxQueue};
use netdev::vhost::{VhostOptions, VhostPort};

/// Namespaces (and root-namespace links) of one test, deleted on drop.
pub struct Env {
    pub tag: String,
    pub netns: Vec<String>,
    pub links: Vec<String>,
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

pub fn quiet(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn ns_sh(ns: &str, args: &[&str]) {
    let mut v = vec!["ip", "netns", "exec", ns];
    v.extend_from_slice(args);
    sh(&v);
}

impl Env {
    /// A test environment, or `None` (with a SKIP line) when this is not root or network
    /// namespaces do not work.
    pub fn new(test: &str) -> Option<Env> {
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
        for tool in ["ip", "sysctl"] {
            if !has(tool) {
                eprintln!("SKIP {test}: no '{tool}' command");
                return None;
            }
        }
        let probe = format!("fpt-{}-p", env.tag);
        if !quiet(&["ip", "netns", "add", &probe]) {
            eprintln!("SKIP {test}: 'ip netns add' failed");
            return None;
        }
        quiet(&["ip", "netns", "del", &probe]);
        Some(env)
    }

    /// A new namespace `fpt-TAG-SUFFIX` with loopback up and IPv6 off (no stray traffic).
    pub fn netns(&mut self, suffix: &str) -> String {
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
    pub fn ifname(&self, suffix: &str) -> String {
        let n = format!("f{suffix}{}", self.tag);
        assert!(n.len() <= 15, "{n}");
        n
    }

    /// A veth pair `a` (in `ns_a`, or the root namespace) and `b` (in `ns_b`), both up.
    pub fn veth(&mut self, a: &str, ns_a: Option<&str>, b: &str, ns_b: &str) {
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

pub const MARK: [u8; 4] = *b"FPTm";

/// A test frame: Ethernet (experimental ethertype 0x88b5, optionally after `tags`), the
/// marker, a sequence number, then `len` bytes in total of a pattern.
pub fn frame(seq: u32, len: usize, tags: &[[u8; 4]]) -> Vec<u8> {
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
pub fn udp_frame(seq: u32, flow: u16) -> Vec<u8> {
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
pub fn seq_of(f: &[u8]) -> Option<u32> {
    let i = f.windows(4).position(|w| w == MARK)?;
    Some(u32::from_be_bytes(f.get(i + 4..i + 8)?.try_into().ok()?))
}

pub fn send(txq: &mut dyn TxQueue, pool: &mut Pool, frames: &[Vec<u8>]) {
    let mut b = Batch::new();
    for f in frames {
        b.push(pool.packet_from(f, 0));
    }
    txq.send(&mut b, pool);
}

/// Polls `rxq` until `want` marked frames arrived or `timeout`; returns the marked frames.
pub fn collect(
    rxq: &mut dyn RxQueue,
    pool: &mut Pool,
    want: usize,
    timeout: Duration,
) -> Vec<Vec<u8>> {
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

/// Sends `frames` on `txq` a burst at a time, collecting each burst from `rxq` (up to 2 s
/// each); returns what arrived.
pub fn relay(
    txq: &mut dyn TxQueue,
    rxq: &mut dyn RxQueue,
    pool: &mut Pool,
    frames: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for chunk in frames.chunks(32) {
        send(txq, pool, chunk);
        got.extend(collect(rxq, pool, chunk.len(), Duration::from_secs(2)));
    }
    got
}

/// One poll of `rxq`: how many marked frames it gave.
pub fn marked(rxq: &mut dyn RxQueue, pool: &mut Pool) -> usize {
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

/// A thread that runs until dropped: its body polls the stop flag it is handed, and the drop
/// raises the flag and joins the thread.
pub struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Background {
    pub fn spawn(body: impl FnOnce(&AtomicBool) + Send + 'static) -> Background {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        Background {
            stop,
            thread: Some(thread::spawn(move || body(&s))),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Forwards between two ports on a thread until dropped: the smallest switch.
pub struct Forwarder(Background);

impl Forwarder {
    pub fn start(pa: &mut dyn Port, pb: &mut dyn Port) -> Forwarder {
        let mut ends = [
            (pa.take_rxq(0, 1).unwrap(), pb.open_txq()),
            (pb.take_rxq(0, 2).unwrap(), pa.open_txq()),
        ];
        Forwarder(Background::spawn(move |stop| {
            let mut pool = Pool::new(1024, 256);
            let mut b = Batch::new();
            while !stop.load(Ordering::Relaxed) {
                let mut n = 0;
                for (rx, tx) in ends.iter_mut() {
                    n += rx.recv(&mut pool, &mut b);
                    if !b.is_empty() {
                        // As the datapath does: a pending checksum is completed for a
                        // queue that does not take it so.
                        if !tx.tx_csum() {
                            for p in b.packets_mut() {
                                if p.meta.csum_pending() {
                                    datapath::csum_pending::complete(p);
                                }
                            }
                        }
                        tx.send(&mut b, &mut pool);
                    }
                }
                if n == 0 {
                    thread::sleep(Duration::from_micros(50));
                }
            }
        }))
    }
}

/// A flowpath vhost-user back-end on socket `sock` with `queues` queue pairs: `vhostuser`
/// (listens) or, with `client`, `vhostuserclient`.
pub fn vhost_port(name: &str, sock: &Path, client: bool, queues: usize) -> VhostPort {
    let kind = if client {
        "vhostuserclient"
    } else {
        "vhostuser"
    };
    let mut o = VhostOptions::for_kind(kind).unwrap();
    o.path = Some(sock.to_owned());
    o.queues = queues;
    VhostPort::open(name, o).unwrap()
}

/// Whether command `tool` can be run (found on the path).
pub fn has(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Whether the tools `tools` are there; prints a SKIP line for `test` when one is not.
pub fn need(test: &str, tools: &[&str]) -> bool {
    for t in tools {
        if !has(t) {
            eprintln!("SKIP {test}: no '{t}' command");
            return false;
        }
    }
    true
}

/// A child process killed (and reaped) when dropped, should the test fail before it ends.
pub struct KillOnDrop(pub Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn python() -> &'static str {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// A Python one-shot ping (ICMP echo over a raw socket): true when `dst` answers.
pub const PING: &str = r#"
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

pub const TCP_SERVER: &str = r#"
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

pub const TCP_CLIENT: &str = r#"
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
pub fn ping_and_tcp(ns_a: &str, ns_b: &str, dst: &str, bytes: usize) {
    let ping = Command::new("ip")
        .args(["netns", "exec", ns_a, python(), "-c", PING, dst])
        .output()
        .unwrap();
    assert!(
        ping.status.success(),
        "ping through the forwarder: {}",
        String::from_utf8_lossy(&ping.stderr)
    );
    let mut server = KillOnDrop(Some(
        Command::new("ip")
            .args(["netns", "exec", ns_b, python(), "-c", TCP_SERVER, dst])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let client = Command::new("ip")
        .args(["netns", "exec", ns_a, python(), "-c", TCP_CLIENT, dst])
        .arg(bytes.to_string())
        .output()
        .unwrap();
    let server = server.0.take().unwrap().wait_with_output().unwrap();
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

/// Receives UDP datagrams on port 5002 of `argv[1]` until none came for a second (after the
/// first): prints their count and the SHA-256 of their payloads in order.
pub const UDP_SERVER: &str = r#"
import socket, hashlib, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind((sys.argv[1], 5002)); s.settimeout(8)
h = hashlib.sha256(); n = 0
try:
    while True:
        d = s.recv(65536); h.update(d); n += 1; s.settimeout(1)
except socket.timeout:
    pass
print(n, h.hexdigest())
"#;

/// Sends 40 UDP super-frames to `argv[1]`:5002 with `UDP_SEGMENT` (USO): 8 datagrams of
/// 1 400 bytes and one of 100 each; prints the datagrams' count and the SHA-256 of their
/// payloads in order.
pub const UDP_SEGMENT_CLIENT: &str = r#"
import socket, hashlib, random, sys, time
r = random.Random(9); h = hashlib.sha256(); n = 0
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(17, 103, 1400)  # SOL_UDP, UDP_SEGMENT
s.connect((sys.argv[1], 5002))
time.sleep(0.3)
for i in range(40):
    buf = r.randbytes(1400 * 8 + 100)
    s.send(buf)
    for k in range(0, len(buf), 1400):
        h.update(buf[k:k + 1400]); n += 1
    time.sleep(0.005)
print(n, h.hexdigest())
"#;

/// [`UDP_SEGMENT_CLIENT`] in `ns_a` sends to [`UDP_SERVER`] in `ns_b` at `dst`: what each
/// printed, once the server saw no datagram for a second.
pub fn udp_segment_exchange(
    ns_a: &str,
    ns_b: &str,
    dst: &str,
) -> (std::process::Output, std::process::Output) {
    let mut server = KillOnDrop(Some(
        Command::new("ip")
            .args(["netns", "exec", ns_b, python(), "-c", UDP_SERVER, dst])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let client = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns_a,
            python(),
            "-c",
            UDP_SEGMENT_CLIENT,
            dst,
        ])
        .output()
        .unwrap();
    let server = server.0.take().unwrap().wait_with_output().unwrap();
    (client, server)
}
