//! AF_XDP port on veth pairs in network namespaces (needs root; each test prints `SKIP` and
//! returns when it is not root or the kernel cannot do AF_XDP).
//!
//! Frames are sent and captured inside the namespaces by a small python3 helper (AF_PACKET
//! raw sockets, an ICMP raw socket for ping, plain TCP sockets), run with `ip netns exec`.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use datapath::packet::{Batch, MAX_BURST, Pool};
use datapath::port::{Port, RxQueue, TxQueue};
use netdev::afxdp::{AfXdpOptions, AfXdpPort, XdpMode, ZeroCopy};
use netdev::bpf::{self, AttachMode};

const PY: &str = r#"
import hashlib, os, socket, struct, sys, time
cmd = sys.argv[1]
if cmd == 'send':
    ifn, path = sys.argv[2], sys.argv[3]
    cpu = int(sys.argv[4]) if len(sys.argv) > 4 else None
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind((ifn, 0))
    if cpu is not None:
        s.setsockopt(263, 20, 1)  # PACKET_QDISC_BYPASS: tx queue = cpu
    data = open(path, 'rb').read()
    o = n = 0
    while o < len(data):
        l = struct.unpack('>H', data[o:o + 2])[0]
        f = data[o + 2:o + 2 + l]
        o += 2 + l
        while True:
            try:
                s.send(f)
                break
            except OSError:
                time.sleep(0.001)
        n += 1
        if n % 32 == 0:
            time.sleep(0.002)
    print(n, flush=True)
elif cmd == 'recv':
    ifn, path, count, tmo = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88b5))
    s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
    s.bind((ifn, 0x88b5))
    s.settimeout(0.2)
    print('ready', flush=True)
    out = bytearray()
    got = 0
    end = time.time() + tmo
    while got < count and time.time() < end:
        try:
            f, addr = s.recvfrom(65535)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        out += struct.pack('>H', len(f)) + f
        got += 1
    open(path, 'wb').write(out)
    print(got, flush=True)
elif cmd == 'ping':
    dst, count = sys.argv[2], int(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.settimeout(1.0)
    def csum(b):
        if len(b) % 2:
            b += b'\0'
        t = sum(struct.unpack('!%dH' % (len(b) // 2), b))
        t = (t >> 16) + (t & 0xffff)
        t += t >> 16
        return ~t & 0xffff
    ident = os.getpid() & 0xffff
    ok = 0
    for seq in range(count):
        payload = bytes((seq + i) & 0xff for i in range(56))
        h = struct.pack('!BBHHH', 8, 0, 0, ident, seq)
        h = struct.pack('!BBHHH', 8, 0, csum(h + payload), ident, seq)
        s.sendto(h + payload, (dst, 0))
        end = time.time() + 1.0
        while time.time() < end:
            try:
                r = s.recv(2048)
            except socket.timeout:
                break
            ihl = (r[0] & 15) * 4
            t, c, _, i, q = struct.unpack('!BBHHH', r[ihl:ihl + 8])
            if t == 0 and i == ident and q == seq and r[ihl + 8:] == payload:
                ok += 1
                break
    print(ok, flush=True)
elif cmd == 'tcpserve':
    ip, port = sys.argv[2], int(sys.argv[3])
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((ip, port))
    l.listen(1)
    l.settimeout(20)
    print('ready', flush=True)
    c, _ = l.accept()
    c.settimeout(20)
    h = hashlib.sha256()
    n = 0
    while True:
        b = c.recv(65536)
        if not b:
            break
        h.update(b)
        n += len(b)
    print(n, h.hexdigest(), flush=True)
elif cmd == 'tcpsend':
    ip, port, size = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    c = socket.create_connection((ip, port), timeout=20)
    h = hashlib.sha256()
    block = bytes((i * 31 + 7) & 0xff for i in range(65536))
    n = 0
    while n < size:
        b = block[:min(65536, size - n)]
        c.sendall(b)
        h.update(b)
        n += len(b)
    c.shutdown(socket.SHUT_WR)
    c.recv(1)
    print(n, h.hexdigest(), flush=True)
"#;

// ---- environment ---------------------------------------------------------------------------

fn skip(test: &str, reason: &str) {
    eprintln!("SKIP {test}: {reason}");
}

/// Whether the test can run here; prints SKIP when not.
fn supported(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip(test, "not root");
        return false;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        skip(test, "no `ip` command");
        return false;
    }
    if python().is_none() {
        skip(test, "no python3");
        return false;
    }
    // SAFETY: plain socket(2); closed right away.
    let fd = unsafe { libc::socket(44, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        skip(test, "no AF_XDP sockets in this kernel");
        return false;
    }
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    true
}

/// The python3 interpreter's path (looked up once).
fn python() -> Option<&'static str> {
    static PY3: OnceLock<Option<String>> = OnceLock::new();
    PY3.get_or_init(|| {
        let o = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    })
    .as_deref()
}

fn sh(args: &[&str]) -> Result<String, String> {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{args:?}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn must(args: &[&str]) -> String {
    sh(args).unwrap_or_else(|e| panic!("{e}"))
}

/// Namespaces, links and files made by one test, removed on drop (even after a failure).
struct Env {
    /// Distinguishes the test's files.
    id: &'static str,
    netns: Vec<String>,
    links: Vec<String>,
    files: Vec<PathBuf>,
    children: Vec<Child>,
}

impl Drop for Env {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for l in &self.links {
            let _ = sh(&["ip", "link", "del", l]);
        }
        for n in &self.netns {
            let _ = sh(&["ip", "netns", "del", n]);
        }
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

impl Env {
    fn new(id: &'static str) -> Env {
        Env {
            id,
            netns: Vec::new(),
            links: Vec::new(),
            files: Vec::new(),
            children: Vec::new(),
        }
    }

    /// A name unique to this process and test: `{prefix}{pid}{tag}`, at most 15 bytes.
    fn name(prefix: &str, tag: &str) -> String {
        let n = format!("{prefix}{}{tag}", std::process::id());
        assert!(n.len() <= 15, "interface name {n} too long");
        n
    }

    fn add_netns(&mut self, name: &str) {
        let _ = sh(&["ip", "netns", "del", name]);
        must(&["ip", "netns", "add", name]);
        self.netns.push(name.to_owned());
        must(&["ip", "-n", name, "link", "set", "lo", "up"]);
    }

    /// A veth pair `a`/`b` with `nq` queues; `b` moves to `b_ns`, `a` to `a_ns` when given.
    fn add_veth(&mut self, a: &str, a_ns: Option<&str>, b: &str, b_ns: &str, nq: usize) {
        let q = nq.to_string();
        let _ = sh(&["ip", "link", "del", a]);
        must(&[
            "ip",
            "link",
            "add",
            a,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            b,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
        ]);
        self.links.push(a.to_owned());
        must(&["ip", "link", "set", b, "netns", b_ns]);
        if let Some(ns) = a_ns {
            must(&["ip", "link", "set", a, "netns", ns]);
        }
        for (ifn, ns) in [(a, a_ns), (b, Some(b_ns))] {
            let mut cmd: Vec<&str> = Vec::new();
            if let Some(ns) = ns {
                cmd.extend(["ip", "netns", "exec", ns]);
            }
            if nq > 1 {
                let mut c = cmd.clone();
                c.extend(["ethtool", "-L", ifn, "rx", &q, "tx", &q]);
                must(&c);
            }
            // Locally made frames leave with their checksums computed (no CHECKSUM_PARTIAL
            // skbs, no TSO super-frames): what crosses a userspace switch must be complete.
            let mut c = cmd.clone();
            c.extend([
                "ethtool", "-K", ifn, "tx", "off", "tso", "off", "gso", "off",
            ]);
            let _ = sh(&c);
            let sysctl = format!("net.ipv6.conf.{ifn}.disable_ipv6=1");
            let mut c = cmd.clone();
            c.extend(["sysctl", "-qw", &sysctl]);
            let _ = sh(&c);
            let mut c = cmd;
            c.extend(["ip", "link", "set", ifn, "up"]);
            must(&c);
        }
    }

    fn file(&mut self, tag: &str) -> PathBuf {
        let p =
            std::env::temp_dir().join(format!("afxdp-{}-{}-{tag}", std::process::id(), self.id));
        self.files.push(p.clone());
        p
    }

    /// Starts the python helper in `ns` with `args`.
    fn py(&mut self, ns: &str, args: &[&str]) -> usize {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, python().unwrap(), "-c", PY])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        self.children.push(cmd.spawn().expect("spawn python3"));
        self.children.len() - 1
    }

    /// Next line of child `i`'s output.
    fn line(&mut self, i: usize) -> String {
        let out = self.children[i].stdout.as_mut().unwrap();
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while out.read(&mut b).unwrap_or(0) == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        String::from_utf8_lossy(&line).into_owned()
    }

    fn wait(&mut self, i: usize) -> String {
        let c = &mut self.children[i];
        let mut s = String::new();
        if let Some(o) = c.stdout.as_mut() {
            BufReader::new(o)
                .lines()
                .map_while(Result::ok)
                .for_each(|l| {
                    s.push_str(&l);
                    s.push('\n');
                });
        }
        let st = c.wait().unwrap();
        assert!(st.success(), "python helper failed: {st}");
        s.trim().to_owned()
    }
}

/// Opens a port, or says why the test cannot run (`None`) when the kernel cannot do it.
fn open(test: &str, name: &str, o: &AfXdpOptions) -> Option<AfXdpPort> {
    match AfXdpPort::open(name, o) {
        Ok(p) => Some(p),
        Err(e) if e.unsupported => {
            skip(test, &format!("AF_XDP/XDP unsupported here: {e}"));
            None
        }
        Err(e) => panic!("{e}"),
    }
}

// ---- frames --------------------------------------------------------------------------------

const ETHERTYPE: [u8; 2] = [0x88, 0xb5];

/// `n` test frames (broadcast, ethertype 0x88b5, sequence number, varied lengths 60..1513),
/// marked with `tag`.
fn frames(n: usize, tag: u8) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let len = 60 + (i * 37) % 1454;
            let mut f = vec![0xff; 6];
            f.extend([0x02, 0, 0, 0, tag, 1]);
            f.extend(ETHERTYPE);
            f.extend((i as u32).to_be_bytes());
            while f.len() < len {
                f.push((i * 7 + f.len()) as u8);
            }
            f
        })
        .collect()
}

fn write_frames(path: &PathBuf, fs: &[Vec<u8>]) {
    let mut out = Vec::new();
    for f in fs {
        out.extend((f.len() as u16).to_be_bytes());
        out.extend(f);
    }
    std::fs::write(path, out).unwrap();
}

fn read_frames(path: &PathBuf) -> Vec<Vec<u8>> {
    let d = std::fs::read(path).unwrap();
    let mut o = 0;
    let mut v = Vec::new();
    while o + 2 <= d.len() {
        let l = u16::from_be_bytes([d[o], d[o + 1]]) as usize;
        v.push(d[o + 2..o + 2 + l].to_vec());
        o += 2 + l;
    }
    v
}

fn is_test_frame(f: &[u8], tag: u8) -> bool {
    f.len() >= 18 && f[12..14] == ETHERTYPE && f[10] == tag
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort_by_key(|f| (u32::from_be_bytes([f[14], f[15], f[16], f[17]]), f.len()));
    v
}

/// Polls `rxqs` until `want` frames tagged `tag` arrived or `timeout`; returns them and how
/// many each queue delivered.
fn collect(
    rxqs: &mut [Box<dyn RxQueue>],
    tag: u8,
    want: usize,
    timeout: Duration,
) -> (Vec<Vec<u8>>, Vec<usize>) {
    let mut pool = Pool::new(256, 64);
    let mut batch = Batch::new();
    let mut got = Vec::new();
    let mut per_q = vec![0; rxqs.len()];
    let end = Instant::now() + timeout;
    while got.len() < want && Instant::now() < end {
        let mut any = false;
        for (q, rx) in rxqs.iter_mut().enumerate() {
            if rx.recv(&mut pool, &mut batch) > 0 {
                any = true;
                for p in batch.packets() {
                    if is_test_frame(p.data(), tag) {
                        got.push(p.data().to_vec());
                        per_q[q] += 1;
                    }
                }
                pool.free_batch(&mut batch);
            }
        }
        if !any {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    (got, per_q)
}

/// Sends `fs` on `tx` in bursts, paced so that the peer's backlog keeps up.
fn send_frames(tx: &mut dyn TxQueue, fs: &[Vec<u8>]) {
    let mut pool = Pool::new(256, 64);
    let mut batch = Batch::new();
    for chunk in fs.chunks(MAX_BURST) {
        for f in chunk {
            batch.push(pool.packet_from(f, 0));
        }
        tx.send(&mut batch, &mut pool);
        tx.flush();
        std::thread::sleep(Duration::from_millis(1));
    }
    for _ in 0..10 {
        tx.flush();
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Frames from the namespace to the port, byte for byte; returns the per-queue split.
fn ns_to_port(
    env: &mut Env,
    ns: &str,
    peer: &str,
    rxqs: &mut [Box<dyn RxQueue>],
    n: usize,
    tag: u8,
    cpus: &[usize],
) -> Vec<usize> {
    let fs = frames(n, tag);
    let mut idle: Vec<Vec<u8>> = Vec::new();
    let mut kids = Vec::new();
    // One sender per cpu given, each with its share of the frames.
    let shares: Vec<Vec<Vec<u8>>> = if cpus.is_empty() {
        vec![fs.clone()]
    } else {
        (0..cpus.len())
            .map(|c| fs.iter().skip(c).step_by(cpus.len()).cloned().collect())
            .collect()
    };
    for (k, share) in shares.iter().enumerate() {
        let path = env.file(&format!("tx{tag}-{k}"));
        write_frames(&path, share);
        let cpu = cpus.get(k).map(|c| c.to_string());
        let mut args = vec!["send", peer, path.to_str().unwrap()];
        if let Some(c) = &cpu {
            args.push(c);
        }
        kids.push(env.py(ns, &args));
    }
    let (got, per_q) = collect(rxqs, tag, n, Duration::from_secs(10));
    for k in kids {
        env.wait(k);
    }
    idle.extend(got);
    assert_eq!(
        idle.len(),
        n,
        "frames received from the namespace ({per_q:?} per queue)"
    );
    assert!(
        sorted(idle) == sorted(fs),
        "received frames differ from those sent"
    );
    per_q
}

/// Frames from the port's tx queues (one thread each) to the namespace, byte for byte.
fn port_to_ns(env: &mut Env, ns: &str, peer: &str, txqs: Vec<Box<dyn TxQueue>>, n: usize, tag: u8) {
    let mut txqs = txqs;
    port_to_ns_with(env, ns, peer, &mut txqs, n, tag);
}

/// [`port_to_ns`] with tx queues the caller keeps.
fn port_to_ns_with(
    env: &mut Env,
    ns: &str,
    peer: &str,
    txqs: &mut [Box<dyn TxQueue>],
    n: usize,
    tag: u8,
) {
    let fs = frames(n, tag);
    let path = env.file(&format!("rx{tag}"));
    let r = env.py(
        ns,
        &["recv", peer, path.to_str().unwrap(), &n.to_string(), "10"],
    );
    assert_eq!(env.line(r), "ready");
    let k = txqs.len();
    std::thread::scope(|s| {
        for (j, tx) in txqs.iter_mut().enumerate() {
            let share: Vec<Vec<u8>> = fs.iter().skip(j).step_by(k).cloned().collect();
            s.spawn(move || send_frames(tx.as_mut(), &share));
        }
    });
    let count = env.wait(r);
    let got = read_frames(&path);
    assert_eq!(
        got.len(),
        n,
        "frames the namespace received from the port (helper said {count})"
    );
    assert!(
        sorted(got) == sorted(fs),
        "frames in the namespace differ from those sent"
    );
}

fn xdp_attached(ns: Option<&str>, ifn: &str) -> bool {
    let mut c = vec!["ip"];
    if let Some(ns) = ns {
        c.extend(["-n", ns]);
    }
    c.extend(["-d", "link", "show", ifn]);
    let out = must(&c);
    out.contains("prog/xdp") || out.contains(" xdp")
}

// ---- tests ---------------------------------------------------------------------------------

/// One queue in `mode`: frames both ways, byte-identical; two tx queues (two PMDs) sharing the
/// one socket's tx side; counters; options; detach on drop.
fn one_queue(test: &'static str, tag: &str, mode: XdpMode) {
    if !supported(test) {
        return;
    }
    let mut env = Env::new(test);
    let ns = Env::name("fxn", tag);
    let (a, b) = (
        Env::name("fx", &format!("{tag}a")),
        Env::name("fx", &format!("{tag}b")),
    );
    env.add_netns(&ns);
    env.add_veth(&a, None, &b, &ns, 1);
    must(&["ip", "-n", &ns, "addr", "add", "10.201.0.2/24", "dev", &b]);
    let o = AfXdpOptions {
        ifname: Some(a.clone()),
        xdp_mode: mode,
        ..Default::default()
    };
    let Some(mut port) = open(test, "p0", &o) else {
        return;
    };
    let want = if mode == XdpMode::Generic {
        "generic"
    } else {
        "native"
    };
    assert_eq!(port.kind(), "afxdp");
    assert_eq!(port.n_rxq(), 1);
    assert_eq!(
        port.options(),
        format!("{{ifname={a}, xdp_mode={want}, copy}}")
    );
    let qm = port.queue_modes();
    assert_eq!(qm.len(), 1);
    assert!(!qm[0].zero_copy, "veth has no zero-copy");
    assert!(
        port.attached_with_link(),
        "kernel 5.9+ attaches with a BPF link"
    );
    assert!(xdp_attached(None, &a));

    let mut rxqs = vec![port.take_rxq(0, 7).unwrap()];
    assert!(port.take_rxq(0, 7).is_none(), "a queue is taken once");
    let n = 2000;
    ns_to_port(&mut env, &ns, &b, &mut rxqs, n, 0x11, &[]);
    let txqs = vec![port.open_txq(), port.open_txq()];
    port_to_ns(&mut env, &ns, &b, txqs, n, 0x22);

    let c = port.counters();
    eprintln!("{test}: counters {c:?}, queues {:?}", port.queue_modes());
    assert!(c.rx_packets >= n as u64);
    assert_eq!(c.tx_packets, n as u64);
    assert_eq!(c.tx_dropped, 0);
    assert_eq!(c.errors, 0);

    drop(rxqs);
    drop(port);
    assert!(!xdp_attached(None, &a), "the program is detached on drop");
}

#[test]
fn one_queue_native() {
    one_queue("one_queue_native", "n", XdpMode::Native);
}

#[test]
fn one_queue_generic() {
    one_queue("one_queue_generic", "g", XdpMode::Generic);
}

/// Two queues, native and generic: frames from two cpus of the namespace (one per peer tx
/// queue) are received across both rx queues; two PMDs send on their own tx sides. Then one rx
/// queue with two tx queues: the second gets a tx-only socket on queue 1.
fn two_queues(test: &'static str, tag: &str, mode: XdpMode) {
    if !supported(test) {
        return;
    }
    let mut env = Env::new(test);
    let ns = Env::name("fxn", tag);
    let (a, b) = (
        Env::name("fx", &format!("{tag}a")),
        Env::name("fx", &format!("{tag}b")),
    );
    env.add_netns(&ns);
    env.add_veth(&a, None, &b, &ns, 2);
    let o = AfXdpOptions {
        ifname: Some(a.clone()),
        xdp_mode: mode,
        n_rxq: 2,
        ..Default::default()
    };
    let Some(mut port) = open(test, "p1", &o) else {
        return;
    };
    let want = if mode == XdpMode::Generic {
        "generic"
    } else {
        "native"
    };
    assert_eq!(
        port.options(),
        format!("{{ifname={a}, n_rxq=2, xdp_mode={want}, copy}}")
    );
    let mut rxqs = vec![port.take_rxq(0, 1).unwrap(), port.take_rxq(1, 1).unwrap()];
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpus: Vec<usize> = (0..ncpu.min(2)).collect();
    let per_q = ns_to_port(&mut env, &ns, &b, &mut rxqs, 2000, 0x33, &cpus);
    eprintln!("{test}: frames per rx queue {per_q:?}");
    if mode == XdpMode::Native && cpus.len() == 2 {
        // veth's native XDP runs per rx queue, fed by the peer's tx queue of the same index.
        assert!(
            per_q.iter().all(|&n| n > 0),
            "both queues received: {per_q:?}"
        );
    }
    let txqs = vec![port.open_txq(), port.open_txq()];
    port_to_ns(&mut env, &ns, &b, txqs, 2000, 0x44);
    // A third PMD: no third device queue, so it shares a tx side.
    port_to_ns(&mut env, &ns, &b, vec![port.open_txq()], 300, 0x45);
    let c = port.counters();
    assert_eq!(c.tx_packets, 2300);
    assert_eq!(c.tx_dropped + c.errors, 0);
    drop(rxqs);
    drop(port);

    // One rx queue, two tx queues: the second binds a tx-only socket to queue 1.
    let o = AfXdpOptions { n_rxq: 1, ..o };
    let mut port = AfXdpPort::open("p1", &o).unwrap();
    let txqs = vec![port.open_txq(), port.open_txq()];
    let qm = port.queue_modes();
    assert_eq!(qm.len(), 2, "{qm:?}");
    assert!(qm[0].rx && !qm[1].rx && qm[1].queue_id == 1, "{qm:?}");
    port_to_ns(&mut env, &ns, &b, txqs, 1000, 0x55);
    let mut rxqs = vec![port.take_rxq(0, 1).unwrap()];
    // Frames sent on the peer's queue 1 are not redirected (no socket for queue 1 in the map):
    // only queue 0's reach the port; send from cpu 0 only.
    ns_to_port(&mut env, &ns, &b, &mut rxqs, 500, 0x66, &[0]);
}

#[test]
fn two_queues_native() {
    two_queues("two_queues_native", "N", XdpMode::Native);
}

#[test]
fn two_queues_generic() {
    two_queues("two_queues_generic", "G", XdpMode::Generic);
}

/// Zero-copy asked of veth: `auto` falls back to copy and says so; `true` is an error naming
/// the fix. Bad interface and namespace names are clear errors.
#[test]
fn zero_copy_fallback_and_errors() {
    let test = "zero_copy_fallback_and_errors";
    if !supported(test) {
        return;
    }
    let mut env = Env::new(test);
    let ns = Env::name("fxn", "z");
    let (a, b) = (Env::name("fx", "za"), Env::name("fx", "zb"));
    env.add_netns(&ns);
    env.add_veth(&a, None, &b, &ns, 1);
    let o = AfXdpOptions {
        ifname: Some(a.clone()),
        xdp_mode: XdpMode::Best,
        zero_copy: ZeroCopy::Auto,
        ..Default::default()
    };
    let Some(port) = open(test, "pz", &o) else {
        return;
    };
    assert_eq!(port.xdp_mode(), AttachMode::Native, "veth has native XDP");
    assert!(port.queue_modes().iter().all(|q| !q.zero_copy));
    assert!(
        port.options().ends_with("xdp_mode=native, copy}"),
        "{}",
        port.options()
    );
    drop(port);

    let e = AfXdpPort::open(
        "pz",
        &AfXdpOptions {
            zero_copy: ZeroCopy::On,
            ..o.clone()
        },
    )
    .err()
    .expect("veth cannot do zero-copy");
    assert!(e.to_string().contains("zero_copy"), "{e}");
    assert!(!xdp_attached(None, &a), "a failed open detaches");

    let e = AfXdpPort::open(
        "pz",
        &AfXdpOptions {
            n_rxq: 2,
            ..o.clone()
        },
    )
    .err()
    .expect("veth with one queue has no queue 1");
    assert!(e.to_string().contains("ethtool"), "{e}");
    assert!(
        !xdp_attached(None, &a),
        "an open failing on its second queue, after attaching, detaches"
    );

    let e = AfXdpPort::open("fx-no-such-if", &AfXdpOptions::default())
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("no interface 'fx-no-such-if'"),
        "{e}"
    );
    let e = AfXdpPort::open(
        "pz",
        &AfXdpOptions {
            netns: Some("fx-no-such-ns".into()),
            ..o.clone()
        },
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("fx-no-such-ns"), "{e}");
    let e = bpf::XdpProgram::load("bad", &[bpf::Insn::exit()]).unwrap_err();
    assert!(
        e.to_string().contains("verifier log: [") && e.to_string().contains("R0"),
        "{e}"
    );
    let mut bad = AfXdpOptions::default();
    assert!(bad.set("xdp_mode", "turbo").is_err());
    assert!(bad.set("frobnicate", "1").is_err());
    bad.set("xdp_mode", "generic").unwrap();
    bad.set("zero_copy", "true").unwrap();
    let e = AfXdpPort::open(&a, &bad).err().unwrap();
    assert!(e.to_string().contains("zero_copy=true needs"), "{e}");
}

/// Restart: drop and reopen works; so does opening over a program of ours left attached with
/// netlink by a run that crashed, and a foreign program is a clear error.
#[test]
fn restart_and_stale_program() {
    let test = "restart_and_stale_program";
    if !supported(test) {
        return;
    }
    let mut env = Env::new(test);
    let ns = Env::name("fxn", "r");
    let (a, b) = (Env::name("fx", "ra"), Env::name("fx", "rb"));
    env.add_netns(&ns);
    env.add_veth(&a, None, &b, &ns, 1);
    let o = AfXdpOptions {
        ifname: Some(a.clone()),
        ..Default::default()
    };
    for round in 0..3u8 {
        let Some(mut port) = open(test, "pr", &o) else {
            return;
        };
        let mut rxqs = vec![port.take_rxq(0, 1).unwrap()];
        ns_to_port(&mut env, &ns, &b, &mut rxqs, 100, 0x70 + round, &[]);
        port_to_ns(&mut env, &ns, &b, vec![port.open_txq()], 100, 0x78 + round);
        // Drop the port while its queues live on (as a PMD may): still detaches.
        drop(port);
        assert!(!xdp_attached(None, &a));
        drop(rxqs);
    }

    // A crashed run that had attached with netlink: the program stays attached.
    let ctl = netdev::netns::control_socket(None).unwrap();
    let ifindex = netdev::netns::ifindex(std::os::fd::AsFd::as_fd(&ctl), &a).unwrap() as u32;
    let map = bpf::XskMap::create(1).unwrap();
    let prog = bpf::XdpProgram::load_redirect(&map).unwrap();
    let stale = bpf::attach_netlink(&prog, ifindex, AttachMode::Generic).unwrap();
    std::mem::forget(stale);
    drop(prog);
    drop(map);
    assert!(xdp_attached(None, &a));
    let (id, m) = bpf::attached_program(ifindex).unwrap().unwrap();
    assert_eq!(m, AttachMode::Generic);
    assert_eq!(bpf::program_name(id).unwrap(), bpf::PROG_NAME);
    let mut port = AfXdpPort::open("pr", &o).expect("replaces our stale program");
    let mut rxqs = vec![port.take_rxq(0, 1).unwrap()];
    ns_to_port(&mut env, &ns, &b, &mut rxqs, 100, 0x7f, &[]);
    drop(port);
    assert!(!xdp_attached(None, &a));

    // Someone else's program: an error that names it and says how to remove it.
    let insns = [bpf::Insn::mov64_imm(0, bpf::XDP_PASS), bpf::Insn::exit()];
    let foreign = bpf::XdpProgram::load("other_prog", &insns).unwrap();
    let att = bpf::attach(&foreign, ifindex, AttachMode::Native).unwrap();
    let e = AfXdpPort::open("pr", &o).err().expect("busy interface");
    assert!(e.to_string().contains("another XDP program"), "{e}");
    drop(att);
    assert!(!xdp_attached(None, &a));
}

/// Two namespaces joined through two ports (in a third namespace, `netns=`) by a test-only
/// forwarding loop: ping, and a TCP transfer verified by checksum.
#[test]
fn forwarding_between_namespaces() {
    let test = "forwarding_between_namespaces";
    if !supported(test) {
        return;
    }
    let mut env = Env::new(test);
    let (nsa, nsb, nss) = (
        Env::name("fxn", "fa"),
        Env::name("fxn", "fb"),
        Env::name("fxn", "fs"),
    );
    for n in [&nsa, &nsb, &nss] {
        env.add_netns(n);
    }
    let (a, asw) = (Env::name("fx", "fa"), Env::name("fx", "fA"));
    let (b, bsw) = (Env::name("fx", "fb"), Env::name("fx", "fB"));
    env.add_veth(&asw, Some(&nss), &a, &nsa, 1);
    env.add_veth(&bsw, Some(&nss), &b, &nsb, 1);
    // The switch ends are in `nss`: they are gone with it (the link guard finds nothing).
    must(&["ip", "-n", &nsa, "addr", "add", "10.202.0.1/24", "dev", &a]);
    must(&["ip", "-n", &nsb, "addr", "add", "10.202.0.2/24", "dev", &b]);

    let opts = |ifn: &str| AfXdpOptions {
        ifname: Some(ifn.to_owned()),
        netns: Some(nss.clone()),
        ..Default::default()
    };
    let Some(mut pa) = open(test, "pa", &opts(&asw)) else {
        return;
    };
    let mut pb = AfXdpPort::open("pb", &opts(&bsw)).unwrap();
    assert!(
        pa.options().contains(&format!("netns={nss}")),
        "{}",
        pa.options()
    );
    assert!(xdp_attached(Some(&nss), &asw));

    /// Stops the forwarding thread when dropped, also when an assertion fails.
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stop_guard = Stop(stop.clone());
    let forwarded = Arc::new(AtomicUsize::new(0));
    let mut pairs = [
        (pa.take_rxq(0, 1).unwrap(), pb.open_txq()),
        (pb.take_rxq(0, 2).unwrap(), pa.open_txq()),
    ];
    let fwd = {
        let (stop, forwarded) = (stop.clone(), forwarded.clone());
        std::thread::spawn(move || {
            let mut pool = Pool::new(1024, 256);
            let mut batch = Batch::new();
            while !stop.load(Ordering::Relaxed) {
                let mut any = 0;
                for (rx, tx) in pairs.iter_mut() {
                    let n = rx.recv(&mut pool, &mut batch);
                    if n > 0 {
                        any += n;
                        tx.send(&mut batch, &mut pool);
                    }
                    tx.flush();
                }
                forwarded.fetch_add(any, Ordering::Relaxed);
                if any == 0 {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
        })
    };

    let p = env.py(&nsa, &["ping", "10.202.0.2", "5"]);
    let ok = env.wait(p);
    assert_eq!(ok, "5", "pings answered through the switch");

    let size = 4 << 20;
    let srv = env.py(&nsb, &["tcpserve", "10.202.0.2", "5001"]);
    assert_eq!(env.line(srv), "ready");
    let t0 = Instant::now();
    let cli = env.py(&nsa, &["tcpsend", "10.202.0.2", "5001", &size.to_string()]);
    let sent = env.wait(cli);
    let got = env.wait(srv);
    eprintln!(
        "{test}: {size} bytes over TCP in {:?}; {} frames forwarded; counters a {:?} b {:?}",
        t0.elapsed(),
        forwarded.load(Ordering::Relaxed),
        pa.counters(),
        pb.counters()
    );
    assert_eq!(sent, got, "TCP data arrived intact (length and sha256)");
    assert!(got.starts_with(&size.to_string()));

    drop(stop_guard);
    fwd.join().unwrap();
    drop(pa);
    drop(pb);
    assert!(!xdp_attached(Some(&nss), &asw));
}

/// The errors column of row `row` (`rx0`, `tx1`) of the port's per-queue counters.
fn queue_errors(port: &AfXdpPort, row: &str) -> u64 {
    port.queue_counters()
        .into_iter()
        .find(|(r, _)| r == row)
        .unwrap_or_else(|| panic!("no row {row} in {:?}", port.queue_counters()))
        .1
        .errors
}

/// The veth pair under an open port (in a namespace, `netns=`) is deleted while its queues
/// are out with their "PMDs": the port says its link is down and every queue counts one error
/// (not one per poll); the pair comes back with the same names (a new index): the port
/// re-attaches by itself (program, sockets, map) within a few polls and frames flow both ways
/// again, on the rx socket's tx side and on a tx-only socket alike. Twice.
#[test]
fn interface_deleted_and_recreated() {
    let test = "interface_deleted_and_recreated";
    if !supported(test) {
        return;
    }
    let mut env = Env::new(test);
    let (nss, nsp) = (Env::name("fxn", "ds"), Env::name("fxn", "dp"));
    env.add_netns(&nss);
    env.add_netns(&nsp);
    let (sw, peer) = (Env::name("fx", "dS"), Env::name("fx", "dP"));
    // Two queues: one rx queue, and a tx-only socket on queue 1 for the second tx queue.
    env.add_veth(&sw, Some(&nss), &peer, &nsp, 2);
    let o = AfXdpOptions {
        ifname: Some(sw.clone()),
        netns: Some(nss.clone()),
        ..Default::default()
    };
    let Some(mut port) = open(test, "pd", &o) else {
        return;
    };
    let mut rxqs = vec![port.take_rxq(0, 1).unwrap()];
    let mut txqs = vec![port.open_txq(), port.open_txq()];
    let qm = port.queue_modes();
    assert!(qm.len() == 2 && qm[0].rx && !qm[1].rx, "{qm:?}");
    assert!(port.link_up());
    ns_to_port(&mut env, &nsp, &peer, &mut rxqs, 200, 0x80, &[0]);
    port_to_ns_with(&mut env, &nsp, &peer, &mut txqs, 200, 0x81);
    let first_index = port.interface().1;

    let mut pool = Pool::new(256, 64);
    let mut batch = Batch::new();
    // What a PMD does for a while: polls, and sends a few frames on each tx queue.
    let mut pmd = |rxqs: &mut [Box<dyn RxQueue>], txqs: &mut [Box<dyn TxQueue>], d: Duration| {
        let end = Instant::now() + d;
        let junk = frames(4, 0x7e);
        while Instant::now() < end {
            for rx in rxqs.iter_mut() {
                rx.recv(&mut pool, &mut batch);
                pool.free_batch(&mut batch);
            }
            for tx in txqs.iter_mut() {
                for f in &junk {
                    batch.push(pool.packet_from(f, 0));
                }
                tx.send(&mut batch, &mut pool);
                tx.flush();
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    };

    for round in 1..=2u64 {
        must(&["ip", "-n", &nsp, "link", "del", &peer]);
        assert!(
            !port.link_up(),
            "round {round}: link down once the pair is gone"
        );
        // An error on every queue within a few checks, and only one however long it polls.
        pmd(&mut rxqs, &mut txqs, Duration::from_millis(600));
        for row in ["rx0", "tx0", "tx1"] {
            assert_eq!(
                queue_errors(&port, row),
                round,
                "round {round}: {row}: {:?}",
                port.queue_counters()
            );
        }
        assert!(!port.link_up());
        assert_eq!(
            port.interface().1,
            0,
            "nothing attached while the interface is gone"
        );

        // The pair again, same names: a new index.
        env.add_veth(&sw, Some(&nss), &peer, &nsp, 2);
        let t = Instant::now();
        while !port.link_up() && t.elapsed() < Duration::from_secs(3) {
            pmd(&mut rxqs, &mut txqs, Duration::from_millis(10));
        }
        let took = t.elapsed();
        eprintln!("{test}: round {round}: link up again after {took:?}");
        assert!(
            port.link_up(),
            "round {round}: not re-attached 3 s after the pair came back"
        );
        let (_, index) = port.interface();
        assert!(
            index != 0 && index != first_index,
            "a new interface index: {index}"
        );
        assert!(
            xdp_attached(Some(&nss), &sw),
            "the program is on the new interface"
        );
        assert!(port.attached_with_link());
        ns_to_port(
            &mut env,
            &nsp,
            &peer,
            &mut rxqs,
            200,
            0x82 + round as u8 * 2,
            &[0],
        );
        port_to_ns_with(
            &mut env,
            &nsp,
            &peer,
            &mut txqs,
            200,
            0x83 + round as u8 * 2,
        );
        for row in ["rx0", "tx0", "tx1"] {
            assert_eq!(
                queue_errors(&port, row),
                round,
                "{:?}",
                port.queue_counters()
            );
        }
    }
    drop(port);
    assert!(
        !xdp_attached(Some(&nss), &sw),
        "the program is detached on drop"
    );
    drop(rxqs);
    drop(txqs);
}
