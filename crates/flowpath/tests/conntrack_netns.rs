//! Connection tracking through `flowpath run`, end to end: real TCP, UDP and ICMP between
//! network namespaces joined by `afpacket` ports, through OpenFlow pipelines that use `ct()`
//! with recirculation, `commit`, `exec(set_field:...->ct_mark)` and `nat(...)`, driven as an
//! operator would (configuration file, `flowpath ctl`), and compared with Debian's Open vSwitch
//! (`ovs-vswitchd`, userspace datapath) running the same pipeline on the same traffic.
//!
//! 1. A security group: the "vm" may open connections to "ext", replies come back as `+est`,
//!    what "ext" opens is dropped.
//! 2. A one-arm NAT on one L2 segment: SNAT of the vm's private address to a floating address,
//!    DNAT of another floating address to the vm; the peers see the translated addresses, and
//!    the rewritten checksums are right (the receiving kernels verify them: see [`host_if`]).
//! 3. The `dpctl/dump-conntrack` lines of flowpath and of OVS 3.1 after the same traffic.
//!
//! Needs root and `ip`, `ss`, `ping`, `ethtool`, `python3` (the peers are small socket programs,
//! [`PEER_PY`]), `sha256sum`, `tcpdump`; the comparison also needs `ovs-vswitchd`,
//! `ovsdb-server`, `ovs-vsctl`, `ovs-ofctl`, `ovs-appctl`, `ovsdb-tool`. Without them a test prints
//! `SKIP <test>: <reason>` on stderr and returns. So does a part of a test that needs a command
//! flowpath does not have yet (`dpctl/dump-conntrack`).
//!
//! Isolation is as in `ports_netns.rs`: every name carries the process id and a tag per test,
//! every interface lives in the test's namespaces, guards delete them (and stop OVS) however
//! the test ends, and one switch runs at a time ([`slot`]).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::netns::{
    Env, Names, Switch, check_no_ping, config, in_ns, must, no_ping, ping, run, slot, veth,
    wait_until,
};

/// Names of this binary's namespaces (`fpc-TAG-SUFFIX`) and directories.
static NAMES: Names = Names {
    netns: "fpc",
    dir: "flowpath-ctns",
    root_for: "network namespaces, veth",
    ifname_max: 15,
};

/// Tools every test uses.
const TOOLS: &[&str] = &["ip", "ss", "ping", "ethtool", "python3", "sha256sum"];

/// What the comparison with Open vSwitch needs besides [`TOOLS`].
const OVS_TOOLS: &[&str] = &[
    "ovs-vswitchd",
    "ovsdb-server",
    "ovs-vsctl",
    "ovs-ofctl",
    "ovs-appctl",
    "ovsdb-tool",
];

/// The OVSDB schema of the Debian package.
const OVS_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// Bytes each side of a TCP exchange sends.
const BULK: u64 = 4 << 20;

// ---- the test's namespaces ------------------------------------------------------------------

/// The environment of `test` ([`Env::new`]) with [`PEER_PY`] in its directory.
fn new_env(test: &str, short: &str, tools: &[&str]) -> Option<Env> {
    let env = Env::new(test, short, tools, &NAMES)?;
    env.write("peer.py", PEER_PY);
    Some(env)
}

/// The namespaces of a test: the switch's (`s`), the vm's and ext's, each host joined to `s`
/// by a veth pair (host ends `hv` and `he`, the switch's ends `sv` and `se`).
struct Hosts {
    s: String,
    vm: String,
    ext: String,
    hv: String,
    sv: String,
    he: String,
    se: String,
}

/// [`Hosts`] in `env`, the hosts' ends set up by [`host_if`] with `vm` and `ext` (address,
/// Ethernet address) and `tx_csum`.
fn hosts(env: &mut Env, vm: (&str, &str), ext: (&str, &str), tx_csum: bool) -> Hosts {
    let (s, vm_ns, ext_ns) = (env.netns("s"), env.netns("vm"), env.netns("ext"));
    let (hv, sv, he, se) = (
        env.ifname("hv"),
        env.ifname("sv"),
        env.ifname("he"),
        env.ifname("se"),
    );
    veth(&hv, &vm_ns, &sv, &s);
    veth(&he, &ext_ns, &se, &s);
    host_if(&vm_ns, &hv, vm.0, vm.1, tx_csum);
    host_if(&ext_ns, &he, ext.0, ext.1, tx_csum);
    Hosts {
        s,
        vm: vm_ns,
        ext: ext_ns,
        hv,
        sv,
        he,
        se,
    }
}

// ---- the hosts' interfaces ------------------------------------------------------------------

/// A host's interface toward the switch: Ethernet address `mac`, address `cidr`.
///
/// Offloads: no TSO/GSO (an `afpacket` port does not segment); `tx_csum` keeps transmit
/// checksum offload (the port completes partial checksums, `TP_STATUS_CSUMNOTREADY`) or turns
/// it off (OVS's userspace conntrack wants complete checksums, as its reference run did).
/// Receive checksumming is turned off so that nothing on the receive path may take a frame's
/// checksum as verified: the host's kernel checks every checksum of what the switch sends it
/// (a wrong one is dropped and counted in `/proc/net/snmp`'s `InCsumErrors`, see
/// [`checksum_errors`]), which makes the NAT test's transfers a test of the rewritten
/// checksums.
fn host_if(ns: &str, ifn: &str, cidr: &str, mac: &str, tx_csum: bool) {
    let tx = if tx_csum { "on" } else { "off" };
    must(&in_ns(
        ns,
        &[
            "ethtool", "-K", ifn, "tso", "off", "gso", "off", "rx", "off", "tx", tx,
        ],
    ));
    must(&["ip", "-n", ns, "link", "set", ifn, "address", mac]);
    must(&["ip", "-n", ns, "addr", "add", cidr, "dev", ifn]);
    must(&["ip", "-n", ns, "link", "set", ifn, "up"]);
}

/// The checksum error counters of namespace `ns` (`/proc/net/snmp`) that are not zero.
fn checksum_errors(ns: &str) -> Vec<String> {
    let snmp = must(&in_ns(ns, &["cat", "/proc/net/snmp"]));
    let lines: Vec<&str> = snmp.lines().collect();
    let mut bad = Vec::new();
    // Pairs of lines: "Tcp: Name Name ..." then "Tcp: 1 2 ...".
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let proto = names.split(':').next().unwrap_or("");
        for (n, v) in names
            .split_whitespace()
            .zip(values.split_whitespace())
            .skip(1)
        {
            let counted = matches!(n, "InCsumErrors" | "InHdrErrors");
            if counted && v != "0" {
                bad.push(format!("{proto} {n}={v}"));
            }
        }
    }
    bad
}

// ---- configuration ---------------------------------------------------------------------------

/// An `afpacket` port `name` on interface `ifn` of namespace `ns`.
fn afpacket_port(name: &str, ifn: &str, ns: &str) -> String {
    format!(
        "\n[[bridge.port]]\nname = \"{name}\"\ntype = \"afpacket\"\n\
         options = {{ ifname = \"{ifn}\", netns = \"{ns}\" }}\n"
    )
}

/// The security group of ports `vm` and `ext`: the vm opens connections (committed in zone 5
/// with mark 42), replies and later packets pass as `+est`, what `ext` opens is dropped, and
/// so is what conntrack finds invalid.
fn security_group(vm: &str, ext: &str) -> Vec<String> {
    [
        "table=0,priority=100,ip,ct_state=-trk,actions=ct(table=1,zone=5)".to_string(),
        "table=0,priority=100,arp,actions=NORMAL".to_string(),
        "table=0,priority=0,actions=drop".to_string(),
        format!(
            "table=1,priority=100,ip,ct_state=+trk+new,in_port={vm},\
             actions=ct(commit,zone=5,exec(set_field:0x2a->ct_mark)),NORMAL"
        ),
        "table=1,priority=100,ip,ct_state=+trk+est,actions=NORMAL".to_string(),
        format!("table=1,priority=100,ip,ct_state=+trk+new,in_port={ext},actions=drop"),
        "table=1,priority=200,ip,ct_state=+trk+inv,actions=drop".to_string(),
    ]
    .into()
}

// ---- Open vSwitch ----------------------------------------------------------------------------

/// A private Debian Open vSwitch: `ovsdb-server` and `ovs-vswitchd` (in namespace `ns`, the
/// userspace datapath `netdev`) with their database, sockets, pid and log files in a
/// directory of their own; stopped, and the directory removed, on drop.
struct Ovs {
    run: PathBuf,
    db: Option<common::Reap>,
    vswitchd: Option<common::Reap>,
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for (p, ctl) in [
            (self.vswitchd.take(), "vswitchd.ctl"),
            (self.db.take(), "db.ctl"),
        ] {
            let Some(mut p) = p else { continue };
            let c = self.run.join(ctl);
            let _ = run(&["ovs-appctl", "-T", "5", "-t", c.to_str().unwrap(), "exit"]);
            if p.wait(Duration::from_secs(5)).is_err() {
                eprintln!("ovs: {ctl}: killed");
            }
        }
        let _ = std::fs::remove_dir_all(&self.run);
    }
}

impl Ovs {
    /// Starts OVS with bridge br0 (`datapath_type=netdev`) in namespace `ns`, `ports` (kernel
    /// interfaces of `ns`, OpenFlow ports 1, 2, ... in order) and OpenFlow table `flows`.
    fn start(env: &Env, ns: &str, ports: &[&str], flows: &[String]) -> Result<Ovs, String> {
        let dir = env.path("ovs");
        std::fs::create_dir_all(&dir).unwrap();
        let mut ovs = Ovs {
            run: dir.clone(),
            db: None,
            vswitchd: None,
        };
        let p = |f: &str| dir.join(f).to_str().unwrap().to_owned();
        run(&["ovsdb-tool", "create", &p("conf.db"), OVS_SCHEMA])?;
        let spawn = |args: Vec<String>, ns: Option<&str>| -> Result<common::Reap, String> {
            let mut c = match ns {
                Some(ns) => {
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", ns]);
                    c.args(&args);
                    c
                }
                None => {
                    let mut c = Command::new(&args[0]);
                    c.args(&args[1..]);
                    c
                }
            };
            // Everything of this instance in its own directory, nothing in /var/run/openvswitch.
            for v in ["OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR"] {
                c.env(v, &dir);
            }
            c.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map(common::Reap)
                .map_err(|e| format!("{args:?}: {e}"))
        };
        ovs.db = Some(spawn(
            vec![
                "ovsdb-server".into(),
                p("conf.db"),
                format!("--remote=punix:{}", p("db.sock")),
                format!("--unixctl={}", p("db.ctl")),
                format!("--pidfile={}", p("ovsdb-server.pid")),
                format!("--log-file={}", p("ovsdb-server.log")),
            ],
            None,
        )?);
        if !wait_until(Duration::from_secs(10), || dir.join("db.sock").exists()) {
            return Err(format!("ovsdb-server: no socket\n{}", ovs.logs()));
        }
        let db = format!("--db=unix:{}", p("db.sock"));
        run(&["ovs-vsctl", &db, "--no-wait", "init"])?;
        ovs.vswitchd = Some(spawn(
            vec![
                "ovs-vswitchd".into(),
                format!("unix:{}", p("db.sock")),
                format!("--unixctl={}", p("vswitchd.ctl")),
                format!("--pidfile={}", p("ovs-vswitchd.pid")),
                format!("--log-file={}", p("ovs-vswitchd.log")),
            ],
            Some(ns),
        )?);
        let mut vsctl: Vec<String> = [&db, "--timeout=20", "add-br", "br0", "--", "set"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        vsctl.extend(["bridge", "br0", "datapath_type=netdev"].map(String::from));
        for (i, &port) in ports.iter().enumerate() {
            vsctl.extend(
                [
                    "--",
                    "add-port",
                    "br0",
                    port,
                    "--",
                    "set",
                    "Interface",
                    port,
                ]
                .map(String::from),
            );
            vsctl.push(format!("ofport_request={}", i + 1));
        }
        let mut args = vec!["ovs-vsctl"];
        args.extend(vsctl.iter().map(String::as_str));
        run(&args).map_err(|e| format!("{e}\n{}", ovs.logs()))?;
        let mgmt = format!("unix:{}", p("br0.mgmt"));
        let file = env.write("ovs-flows.txt", &(flows.join("\n") + "\n"));
        run(&["ovs-ofctl", "del-flows", &mgmt]).map_err(|e| format!("{e}\n{}", ovs.logs()))?;
        run(&["ovs-ofctl", "add-flows", &mgmt, file.to_str().unwrap()])
            .map_err(|e| format!("{e}\n{}", ovs.logs()))?;
        Ok(ovs)
    }

    /// `ovs-appctl COMMAND...` to ovs-vswitchd.
    fn appctl(&self, args: &[&str]) -> Result<String, String> {
        let ctl = self.run.join("vswitchd.ctl");
        let mut v = vec!["ovs-appctl", "-T", "10", "-t", ctl.to_str().unwrap()];
        v.extend_from_slice(args);
        run(&v)
    }

    fn logs(&self) -> String {
        ["ovsdb-server.log", "ovs-vswitchd.log"]
            .iter()
            .map(|f| std::fs::read_to_string(self.run.join(f)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

// ---- the peers ---------------------------------------------------------------------------------

/// The hosts' programs: `python3 peer.py MODE HOST PORT [ARG [SPORT [TIMEOUT]]]`.
/// - `tcp-serve`: listens on HOST:PORT (prints `listening`), accepts one connection (prints
///   `peer IP PORT` and `local IP PORT`); ARG `echo` echoes until the peer closes, else
///   ARG is a file to send (`-`: nothing) while receiving everything the peer sends (then
///   `got BYTES SHA256`).
/// - `tcp-connect`: connects to HOST:PORT from port SPORT (0: any) within TIMEOUT seconds
///   (else prints `timeout`, exit 3; `error ...`, exit 4), prints `local`/`peer`; ARG `hold`
///   sends `hello`, reads the echo (prints `held`) and keeps the connection until its stdin
///   closes; else the exchange of `tcp-serve`.
/// - `udp-echo`: answers one datagram on HOST:PORT. `udp-send`: sends one from SPORT, waits
///   3 s for the answer (`reply IP PORT`, else `timeout`, exit 3).
const PEER_PY: &str = r#"
import hashlib, socket, sys, threading

def exchange(s, send):
    def sender():
        if send != "-":
            with open(send, "rb") as f:
                while True:
                    b = f.read(65536)
                    if not b:
                        break
                    s.sendall(b)
        s.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=sender)
    t.start()
    h, n = hashlib.sha256(), 0
    while True:
        b = s.recv(65536)
        if not b:
            break
        h.update(b)
        n += len(b)
    t.join()
    print("got %d %s" % (n, h.hexdigest()), flush=True)

def addr(a):
    return "%s %d" % a[:2]

mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
arg = sys.argv[4] if len(sys.argv) > 4 else "-"
sport = int(sys.argv[5]) if len(sys.argv) > 5 else 0
limit = float(sys.argv[6]) if len(sys.argv) > 6 else 5.0
if mode == "tcp-serve":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(4)
    print("listening", flush=True)
    s, peer = ls.accept()
    s.settimeout(30)
    print("peer", addr(peer), flush=True)
    print("local", addr(s.getsockname()), flush=True)
    if arg == "echo":
        while True:
            b = s.recv(65536)
            if not b:
                break
            s.sendall(b)
        print("closed", flush=True)
    else:
        exchange(s, arg)
elif mode == "tcp-connect":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if sport:
        s.bind(("", sport))
    s.settimeout(limit)
    try:
        s.connect((host, port))
    except socket.timeout:
        print("timeout", flush=True)
        sys.exit(3)
    except OSError as e:
        print("error", e, flush=True)
        sys.exit(4)
    s.settimeout(30)
    print("local", addr(s.getsockname()), flush=True)
    print("peer", addr(s.getpeername()), flush=True)
    if arg == "hold":
        s.sendall(b"hello")
        got = b""
        while len(got) < 5:
            b = s.recv(5 - len(got))
            if not b:
                break
            got += b
        print("held" if got == b"hello" else "echo %r" % got, flush=True)
        sys.stdin.read()
    else:
        exchange(s, arg)
elif mode == "udp-echo":
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((host, port))
    print("listening", flush=True)
    b, peer = u.recvfrom(2048)
    u.sendto(b, peer)
    print("peer", addr(peer), flush=True)
elif mode == "udp-send":
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if sport:
        u.bind(("", sport))
    u.settimeout(3)
    u.sendto(b"ping", (host, port))
    try:
        b, peer = u.recvfrom(2048)
    except socket.timeout:
        print("timeout", flush=True)
        sys.exit(3)
    print("reply", addr(peer), flush=True)
"#;

/// A running `peer.py` in a namespace.
struct Peer {
    child: common::Reap,
    out: BufReader<ChildStdout>,
    what: String,
}

impl Peer {
    fn spawn(env: &Env, ns: &str, args: &[&str]) -> Peer {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, "python3"])
            .arg(env.path("peer.py"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = common::Reap(c.spawn().unwrap());
        let out = BufReader::new(child.0.stdout.take().unwrap());
        Peer {
            child,
            out,
            what: format!("{} in {ns}", args.join(" ")),
        }
    }

    /// The next line of output (without the newline); empty at the end.
    fn line(&mut self) -> String {
        let mut l = String::new();
        let _ = self.out.read_line(&mut l);
        l.trim_end().to_owned()
    }

    /// The next line, which must be `want`.
    fn expect(&mut self, want: &str) {
        let l = self.line();
        if l != want {
            let err = self.child.stderr();
            panic!("{}: wanted '{want}', got '{l}' {err}", self.what);
        }
    }

    /// Waits up to `limit` for the end: the rest of the output, or what went wrong.
    fn finish(mut self, limit: Duration) -> Result<String, String> {
        let s = self.child.wait(limit);
        let mut rest = String::new();
        let _ = self.out.read_to_string(&mut rest);
        match s {
            Ok(s) if s.success() => Ok(rest),
            Ok(s) => Err(format!("{}: {s}: {rest}{}", self.what, self.child.stderr())),
            Err(e) => Err(format!("{}: {e}: {rest}{}", self.what, self.child.stderr())),
        }
    }
}

/// The words after `key` on the line of `out` that starts with `key `.
fn field<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
}

/// `got BYTES SHA256` as a peer prints it for file `sent`.
fn digest(sent: &Path) -> String {
    let out = must(&["sha256sum", sent.to_str().unwrap()]);
    let sha = out.split_whitespace().next().unwrap();
    format!("{} {sha}", std::fs::metadata(sent).unwrap().len())
}

/// One TCP connection from namespace `from` to `host:port`, served in namespace `to` on
/// `listen:port`, each side sending a file to the other: both must receive the other's bytes
/// (same length and SHA-256). The server's and the client's output (`peer`, `local`).
#[allow(clippy::too_many_arguments)]
fn tcp_exchange(
    env: &Env,
    to: &str,
    listen: &str,
    from: &str,
    host: &str,
    port: u16,
    client_sends: &Path,
    server_sends: &Path,
) -> Result<(String, String), String> {
    let p = port.to_string();
    let mut server = Peer::spawn(
        env,
        to,
        &["tcp-serve", listen, &p, server_sends.to_str().unwrap()],
    );
    server.expect("listening");
    let client = Peer::spawn(
        env,
        from,
        &["tcp-connect", host, &p, client_sends.to_str().unwrap()],
    );
    let c = client.finish(Duration::from_secs(30))?;
    let s = server.finish(Duration::from_secs(10))?;
    let (want_s, want_c) = (digest(client_sends), digest(server_sends));
    if field(&s, "got") != Some(&want_s) {
        return Err(format!("server got {s:?}, the client sent {want_s}"));
    }
    if field(&c, "got") != Some(&want_c) {
        return Err(format!("client got {c:?}, the server sent {want_c}"));
    }
    Ok((s, c))
}

/// The `ct_state(...)` attributes of a datapath flow dump.
fn ct_states(dump: &str) -> Vec<&str> {
    dump.match_indices("ct_state(")
        .filter_map(|(i, _)| {
            let rest = &dump[i + "ct_state(".len()..];
            rest.find(')').map(|j| &rest[..j])
        })
        .collect()
}

/// Whether connection-state flags `s` (`-new+est+trk`) include every flag of `want` (`+est`).
fn has_flags(s: &str, want: &[&str]) -> bool {
    let mut flags = Vec::new();
    let mut start = 0;
    for (i, c) in s.char_indices().skip(1) {
        if c == '+' || c == '-' {
            flags.push(&s[start..i]);
            start = i;
        }
    }
    flags.push(&s[start..]);
    want.iter().all(|w| flags.contains(w))
}

// ---- 1. security group -----------------------------------------------------------------------

/// The vm's and ext's address and Ethernet address behind the security group.
const VM_SG: (&str, &str) = ("10.9.0.1/24", "02:00:00:09:00:01");
const EXT_SG: (&str, &str) = ("10.9.0.2/24", "02:00:00:09:00:02");

/// The vm (10.9.0.1) and ext (10.9.0.2) behind [`security_group`]: what the vm opens works
/// both ways (TCP, ICMP), what ext opens is dropped; the datapath flows show the two passes,
/// and `dpctl/dump-conntrack` the connections in zone 5 with mark 42.
#[test]
fn security_group_allows_outbound_and_blocks_inbound() {
    let test = "security_group_allows_outbound_and_blocks_inbound";
    let Some(mut env) = new_env(test, "sg", TOOLS) else {
        return;
    };
    let _slot = slot();
    let Hosts {
        s, vm, ext, sv, se, ..
    } = hosts(&mut env, VM_SG, EXT_SG, true);
    let cfg = env.write(
        "sw.toml",
        &config(
            &security_group("vm", "ext"),
            &[afpacket_port("vm", &sv, &s), afpacket_port("ext", &se, &s)],
        ),
    );
    let mut sw = Switch::start(&env, &cfg);

    // Outbound: ping and a TCP exchange, 4 MB each way.
    ping(&vm, "10.9.0.2", 3).unwrap_or_else(|e| panic!("vm to ext: {e}\n{}", sw.log()));
    let (a, b) = (env.data_file("a", BULK), env.data_file("b", BULK));
    let t = Instant::now();
    let (srv, cli) = tcp_exchange(&env, &ext, "10.9.0.2", &vm, "10.9.0.2", 7001, &a, &b)
        .unwrap_or_else(|e| panic!("TCP vm to ext: {e}\n{}", sw.log()));
    eprintln!(
        "{test}: TCP vm -> ext, {} MB each way in {:.2} s",
        BULK >> 20,
        t.elapsed().as_secs_f64()
    );
    assert_eq!(field(&srv, "peer"), field(&cli, "local"), "{srv}\n{cli}");
    // A connection held open (for the table below).
    let mut held_srv = Peer::spawn(&env, &ext, &["tcp-serve", "10.9.0.2", "8002", "echo"]);
    held_srv.expect("listening");
    let mut held = Peer::spawn(
        &env,
        &vm,
        &["tcp-connect", "10.9.0.2", "8002", "hold", "40002"],
    );
    held.expect("local 10.9.0.1 40002");
    held.expect("peer 10.9.0.2 8002");
    held.expect("held");

    // Inbound: a TCP connect to a listening vm and a ping, both unanswered.
    let mut victim = Peer::spawn(&env, &vm, &["tcp-serve", "10.9.0.1", "7100", "-"]);
    victim.expect("listening");
    let pings = no_ping(&ext, "10.9.0.1", 3);
    let intruder = Peer::spawn(
        &env,
        &ext,
        &["tcp-connect", "10.9.0.1", "7100", "-", "0", "2"],
    );
    match intruder.finish(Duration::from_secs(10)) {
        Err(e) if e.contains("exit status: 3") && e.contains("timeout") => {}
        r => panic!("ext's connection to the vm must time out: {r:?}"),
    }
    check_no_ping(pings, "ext -> vm");
    drop(victim.child);
    let rest = {
        let mut r = String::new();
        let _ = victim.out.read_to_string(&mut r);
        r
    };
    assert!(!rest.contains("peer"), "the vm accepted: {rest}");
    // The vm still reaches ext.
    ping(&vm, "10.9.0.2", 1).unwrap_or_else(|e| panic!("vm to ext afterwards: {e}"));

    // The datapath flows: the first pass (-trk, ct(zone=5),recirc), the committing pass, and
    // the established connection's pass.
    let dump = sw.ctl_ok(&["dpif/dump-flows"]);
    eprintln!("{test}: dpif/dump-flows:\n{dump}");
    let states = ct_states(&dump);
    assert!(states.contains(&"-trk"), "no ct_state(-trk) flow:\n{dump}");
    assert!(
        states.iter().any(|s| has_flags(s, &["+est", "+trk"])),
        "no ct_state(+est+trk) flow:\n{dump}"
    );
    assert!(
        states.iter().any(|s| has_flags(s, &["+new", "+trk"])),
        "no ct_state(+new+trk) flow:\n{dump}"
    );
    assert!(dump.contains("actions:ct(zone=5),recirc(0x"), "{dump}");
    assert!(
        dump.contains("ct(commit,zone=5,mark=0x2a/0xffffffff)"),
        "no committing flow with the mark:\n{dump}"
    );

    // The connection table.
    if !sw.has_command("dpctl/dump-conntrack") {
        eprintln!(
            "SKIP {test} (connection table part): flowpath has no 'dpctl/dump-conntrack' yet"
        );
    } else {
        let ct = sw.ctl_ok(&["dpctl/dump-conntrack"]);
        eprintln!("{test}: dpctl/dump-conntrack:\n{ct}");
        let lines: Vec<&str> = ct.lines().collect();
        let want_held = "tcp,orig=(src=10.9.0.1,dst=10.9.0.2,sport=40002,dport=8002),\
                         reply=(src=10.9.0.2,dst=10.9.0.1,sport=8002,dport=40002),zone=5,\
                         mark=42,protoinfo=(state=ESTABLISHED)";
        assert!(lines.contains(&want_held), "wanted {want_held} in:\n{ct}");
        let sport = field(&cli, "local").unwrap().split(' ').nth(1).unwrap();
        let bulk = format!(
            "tcp,orig=(src=10.9.0.1,dst=10.9.0.2,sport={sport},dport=7001),\
             reply=(src=10.9.0.2,dst=10.9.0.1,sport=7001,dport={sport}),zone=5,mark=42,\
             protoinfo=(state="
        );
        assert!(
            lines.iter().any(|l| l.starts_with(&bulk)),
            "wanted {bulk}...) in:\n{ct}"
        );
        assert!(
            lines.iter().any(
                |l| l.starts_with("icmp,orig=(src=10.9.0.1,dst=10.9.0.2,id=")
                    && l.ends_with(",zone=5,mark=42")
            ),
            "no ICMP entry of the vm's pings:\n{ct}"
        );
        assert!(
            !ct.contains("orig=(src=10.9.0.2,"),
            "ext's attempts were not committed:\n{ct}"
        );
        let zone0 = sw.ctl_ok(&["dpctl/dump-conntrack", "zone=0"]);
        assert_eq!(zone0, "", "nothing in zone 0");
    }
    drop(held);
    let _ = held_srv.finish(Duration::from_secs(5));

    // `dpif/dump-flows br0` shows the same flows: the bridge has all the ports.
    let all_dump = sw.ctl_ok(&["dpif/dump-flows"]);
    let all = flow_keys(&all_dump);
    let br0_dump = sw.ctl_ok(&["dpif/dump-flows", "br0"]);
    let br0 = flow_keys(&br0_dump);
    assert!(!all.is_empty());
    assert_eq!(
        br0, all,
        "dpif/dump-flows br0 lost flows of br0's ports:\n{br0_dump}"
    );
    sw.stop();
}

/// The flows of a datapath flow dump without their statistics, sorted.
fn flow_keys(dump: &str) -> Vec<&str> {
    let mut v: Vec<&str> = dump
        .lines()
        .filter_map(|l| l.split_once(", packets:").map(|(k, _)| k))
        .collect();
    v.sort();
    v
}

// ---- 2. SNAT and DNAT ------------------------------------------------------------------------

/// The vm's gateway as the vm sees it, and the floating addresses as ext sees them: addresses
/// the switch answers for with static neighbour entries, no kernel routing in between.
const GW_VM_MAC: &str = "02:00:00:09:01:fe";
const GW_EXT_MAC: &str = "02:00:00:09:02:fe";
const VM_MAC: &str = "02:00:00:09:01:01";
const EXT_MAC: &str = "02:00:00:09:02:02";

/// A one-arm NAT in zone 7 between port `vm` (10.9.1.1, private) and `ext` (10.9.2.2): what
/// the vm opens leaves with source 10.9.2.100; what ext opens to 10.9.2.200 reaches the vm at
/// 10.9.1.1. Every packet passes `ct(nat)` first (un-NAT of replies and later packets of a
/// connection); new ones are committed with their translation. The switch rewrites the
/// Ethernet addresses as a router would.
fn nat_flows() -> Vec<String> {
    let to_ext = format!("mod_dl_src:{GW_EXT_MAC},mod_dl_dst:{EXT_MAC},output:ext");
    let to_vm = format!("mod_dl_src:{GW_VM_MAC},mod_dl_dst:{VM_MAC},output:vm");
    vec![
        "table=0,priority=100,ip,in_port=vm,actions=ct(table=1,zone=7,nat)".into(),
        "table=0,priority=100,ip,in_port=ext,actions=ct(table=2,zone=7,nat)".into(),
        "table=0,priority=0,actions=drop".into(),
        format!(
            "table=1,priority=100,ip,ct_state=+trk+new,\
             actions=ct(commit,zone=7,nat(src=10.9.2.100)),{to_ext}"
        ),
        format!("table=1,priority=100,ip,ct_state=+trk+est,actions={to_ext}"),
        format!(
            "table=2,priority=100,ip,ct_state=+trk+new,nw_dst=10.9.2.200,\
             actions=ct(commit,zone=7,nat(dst=10.9.1.1)),{to_vm}"
        ),
        format!("table=2,priority=100,ip,ct_state=+trk+est,actions={to_vm}"),
    ]
}

/// `tcpdump -vv` of what arrives on `ifn` in `ns` (TCP port `port`, 40 packets).
fn tcpdump(ns: &str, ifn: &str, port: u16) -> common::Reap {
    let mut c = common::Reap(
        Command::new("ip")
            .args([
                "netns", "exec", ns, "tcpdump", "-i", ifn, "-Q", "in", "-nn", "-vv",
            ])
            .args(["-l", "-c", "40", "tcp", "port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // It has started once it says so on stderr.
    let mut err = BufReader::new(c.0.stderr.take().unwrap());
    let mut l = String::new();
    let _ = err.read_line(&mut l);
    assert!(l.contains("listening on"), "tcpdump: {l}");
    c
}

/// What `tcpdump` printed (it stops after its 40 packets; killed after 5 s otherwise).
fn tcpdump_output(mut c: common::Reap) -> String {
    let _ = c.wait(Duration::from_secs(5));
    let mut out = String::new();
    let _ = c.0.stdout.as_mut().unwrap().read_to_string(&mut out);
    out
}

/// Checks a capture: packets `from > to` (address.port prefixes), checksums verified correct,
/// none incorrect.
fn check_capture(what: &str, cap: &str, from: &str, to: &str) {
    let head: Vec<&str> = cap.lines().take(4).collect();
    eprintln!("{what}: tcpdump -vv:\n{}\n...", head.join("\n"));
    let flows: Vec<&str> = cap.lines().filter(|l| l.contains(" > ")).collect();
    assert!(
        flows
            .iter()
            .any(|l| l.trim_start().starts_with(from) && l.contains(to)),
        "{what}: no packet {from}* > {to}* in the capture:\n{cap}"
    );
    assert!(
        cap.contains("(correct)"),
        "{what}: no checksum checked:\n{cap}"
    );
    assert!(
        !cap.contains("incorrect") && !cap.contains("bad cksum"),
        "{what}: bad checksums:\n{cap}"
    );
}

#[test]
fn snat_to_floating_ip_and_dnat_back() {
    let test = "snat_to_floating_ip_and_dnat_back";
    let mut tools = TOOLS.to_vec();
    tools.push("tcpdump");
    let Some(mut env) = new_env(test, "nt", &tools) else {
        return;
    };
    let _slot = slot();
    let Hosts {
        s,
        vm,
        ext,
        hv,
        sv,
        he,
        se,
    } = hosts(
        &mut env,
        ("10.9.1.1/24", VM_MAC),
        ("10.9.2.2/24", EXT_MAC),
        true,
    );
    // The vm's default route via a gateway that does not exist but for its static ARP entry;
    // ext reaches the floating addresses in its own subnet, static entries as well.
    must(&[
        "ip",
        "-n",
        &vm,
        "neigh",
        "add",
        "10.9.1.254",
        "lladdr",
        GW_VM_MAC,
        "dev",
        &hv,
        "nud",
        "permanent",
    ]);
    must(&[
        "ip",
        "-n",
        &vm,
        "route",
        "add",
        "default",
        "via",
        "10.9.1.254",
        "dev",
        &hv,
    ]);
    for fip in ["10.9.2.100", "10.9.2.200"] {
        must(&[
            "ip",
            "-n",
            &ext,
            "neigh",
            "add",
            fip,
            "lladdr",
            GW_EXT_MAC,
            "dev",
            &he,
            "nud",
            "permanent",
        ]);
    }
    let cfg = env.write(
        "sw.toml",
        &config(
            &nat_flows(),
            &[afpacket_port("vm", &sv, &s), afpacket_port("ext", &se, &s)],
        ),
    );
    let mut sw = Switch::start(&env, &cfg);
    let (a, b) = (env.data_file("a", BULK), env.data_file("b", BULK));

    // SNAT: the vm's connection reaches ext from 10.9.2.100, the answers come back to it.
    ping(&vm, "10.9.2.2", 3).unwrap_or_else(|e| panic!("SNAT ping: {e}\n{}", sw.log()));
    let cap = tcpdump(&ext, &he, 7001);
    let (srv, cli) = tcp_exchange(&env, &ext, "10.9.2.2", &vm, "10.9.2.2", 7001, &a, &b)
        .unwrap_or_else(|e| panic!("SNAT TCP vm -> ext: {e}\n{}", sw.log()));
    let cap = tcpdump_output(cap);
    eprintln!("{test}: SNAT: ext's server: {srv}vm's client: {cli}");
    let peer = field(&srv, "peer").unwrap();
    assert!(
        peer.starts_with("10.9.2.100 "),
        "ext sees the vm as {peer}, not the floating address"
    );
    let local = field(&cli, "local").unwrap();
    assert!(local.starts_with("10.9.1.1 "), "{cli}");
    assert_eq!(field(&cli, "peer"), Some("10.9.2.2 7001"), "{cli}");
    let sport = local.split(' ').nth(1).unwrap();
    check_capture("SNAT at ext", &cap, "10.9.2.100.", "10.9.2.2.7001");

    // DNAT: ext's connection to 10.9.2.200 reaches the vm at 10.9.1.1 from ext's own address,
    // the answers come back from 10.9.2.200.
    ping(&ext, "10.9.2.200", 3).unwrap_or_else(|e| panic!("DNAT ping: {e}\n{}", sw.log()));
    let cap = tcpdump(&vm, &hv, 7002);
    let (srv, cli) = tcp_exchange(&env, &vm, "10.9.1.1", &ext, "10.9.2.200", 7002, &b, &a)
        .unwrap_or_else(|e| panic!("DNAT TCP ext -> 10.9.2.200: {e}\n{}", sw.log()));
    let cap2 = tcpdump_output(cap);
    eprintln!("{test}: DNAT: vm's server: {srv}ext's client: {cli}");
    assert_eq!(field(&srv, "local"), Some("10.9.1.1 7002"), "{srv}");
    let peer = field(&srv, "peer").unwrap();
    assert!(peer.starts_with("10.9.2.2 "), "the vm sees ext as {peer}");
    assert_eq!(field(&cli, "peer"), Some("10.9.2.200 7002"), "{cli}");
    check_capture("DNAT at the vm", &cap2, "10.9.2.2.", "10.9.1.1.7002");

    // Every checksum the kernels verified was right.
    for ns in [&vm, &ext] {
        let bad = checksum_errors(ns);
        assert!(bad.is_empty(), "checksum errors in {ns}: {bad:?}");
    }

    let dump = sw.ctl_ok(&["dpif/dump-flows"]);
    eprintln!("{test}: dpif/dump-flows:\n{dump}");
    for want in [
        "ct(zone=7,nat),recirc(0x",
        "ct(commit,zone=7,nat(src=10.9.2.100))",
        "ct(commit,zone=7,nat(dst=10.9.1.1))",
    ] {
        assert!(dump.contains(want), "no {want} in:\n{dump}");
    }
    if !sw.has_command("dpctl/dump-conntrack") {
        eprintln!(
            "SKIP {test} (connection table part): flowpath has no 'dpctl/dump-conntrack' yet"
        );
    } else {
        let ct = sw.ctl_ok(&["dpctl/dump-conntrack", "zone=7"]);
        eprintln!("{test}: dpctl/dump-conntrack zone=7:\n{ct}");
        let snat = format!(
            "tcp,orig=(src=10.9.1.1,dst=10.9.2.2,sport={sport},dport=7001),\
             reply=(src=10.9.2.2,dst=10.9.2.100,sport=7001,dport={sport}),zone=7,protoinfo=("
        );
        let dnat = "tcp,orig=(src=10.9.2.2,dst=10.9.2.200,";
        let dnat_reply = "reply=(src=10.9.1.1,dst=10.9.2.2,sport=7002,";
        assert!(
            ct.lines().any(|l| l.starts_with(&snat)),
            "no {snat} in:\n{ct}"
        );
        assert!(
            ct.lines()
                .any(|l| l.starts_with(dnat) && l.contains(dnat_reply)),
            "no {dnat}...{dnat_reply} in:\n{ct}"
        );
    }
    sw.stop();
}

// ---- 3. the same traffic through Open vSwitch ---------------------------------------------------

/// The comparison's traffic, from the vm (10.9.0.1) to ext (10.9.0.2) through the security
/// group, at fixed client ports: one ping, one UDP exchange (50002 -> 9002), one TCP
/// connection held open (40002 -> 8002); and one ping from ext that must go unanswered. The
/// peers of the held connection (it closes when they are dropped).
fn sg_traffic(env: &Env, vm: &str, ext: &str) -> Result<Vec<Peer>, String> {
    ping(vm, "10.9.0.2", 1)?;
    let mut echo = Peer::spawn(env, ext, &["udp-echo", "10.9.0.2", "9002"]);
    echo.expect("listening");
    let udp = Peer::spawn(env, vm, &["udp-send", "10.9.0.2", "9002", "-", "50002"]);
    let out = udp.finish(Duration::from_secs(5))?;
    if field(&out, "reply") != Some("10.9.0.2 9002") {
        return Err(format!("UDP: {out}"));
    }
    echo.finish(Duration::from_secs(2))?;
    let mut srv = Peer::spawn(env, ext, &["tcp-serve", "10.9.0.2", "8002", "echo"]);
    srv.expect("listening");
    let mut cli = Peer::spawn(
        env,
        vm,
        &["tcp-connect", "10.9.0.2", "8002", "hold", "40002"],
    );
    for want in ["local 10.9.0.1 40002", "peer 10.9.0.2 8002", "held"] {
        let l = cli.line();
        if l != want {
            return Err(format!("TCP: wanted '{want}', got '{l}'"));
        }
    }
    check_no_ping(no_ping(ext, "10.9.0.1", 1), "ext -> vm");
    Ok(vec![srv, cli])
}

/// A dump's lines in order, with `ID` for the numbers that differ by design: the ICMP ids
/// (chosen by `ping`) and `-m`'s connection id (OVS's userspace datapath prints 0, flowpath
/// its own id: a documented difference, `conntrack::format`). `strip_protoinfo`: without the
/// TCP `protoinfo=(...)`.
fn normalise(dump: &str, strip_protoinfo: bool) -> Vec<String> {
    let mut v: Vec<String> = dump
        .lines()
        .map(|l| {
            let l = match l.find(",protoinfo=(") {
                Some(i) if strip_protoinfo => &l[..i],
                _ => l,
            };
            let mut out = String::new();
            let mut rest = l;
            while let Some(i) = rest.find("id=") {
                // `id=` at a field's start only: the tuple's ICMP id, or the connection's.
                let before = &rest.as_bytes()[..i];
                let tuple_field = before.last() == Some(&b'(') || before.last() == Some(&b',');
                let conn_id = before.ends_with(b"),");
                out.push_str(&rest[..i + 3]);
                rest = &rest[i + 3..];
                let n = rest.bytes().take_while(u8::is_ascii_digit).count();
                let icmp_id =
                    tuple_field && l.starts_with("icmp") && rest[n..].starts_with(",type=");
                if icmp_id || conn_id {
                    out.push_str("ID");
                    rest = &rest[n..];
                }
            }
            out.push_str(rest);
            out
        })
        .collect();
    v.sort();
    v
}

/// The namespaces of one run of the comparison: the switch's (its interfaces `sv`, `se`),
/// the vm's and ext's.
fn sg_hosts(env: &mut Env) -> (String, String, String, String, String) {
    // Transmit checksum offload off for both switches: OVS's conntrack needs it.
    let h = hosts(env, VM_SG, EXT_SG, false);
    (h.s, h.vm, h.ext, h.sv, h.se)
}

#[test]
fn dump_conntrack_matches_open_vswitch() {
    let test = "dump_conntrack_matches_open_vswitch";
    let mut tools = TOOLS.to_vec();
    tools.extend_from_slice(OVS_TOOLS);
    // Two sets of namespaces, one per switch, so that the fixed client ports are fresh in the
    // second run (no TIME_WAIT of the first).
    let Some(mut env_fp) = new_env(test, "cf", &tools) else {
        return;
    };
    if !Path::new(OVS_SCHEMA).exists() {
        eprintln!("SKIP {test}: no {OVS_SCHEMA} (Debian's openvswitch-common)");
        return;
    }
    let Some(mut env_ovs) = new_env(test, "co", &tools) else {
        return;
    };
    let _slot = slot();
    let commands = ["dpctl/dump-conntrack", "dpctl/dump-conntrack -m"];

    // flowpath.
    let (s, vm, ext, sv, se) = sg_hosts(&mut env_fp);
    let cfg = env_fp.write(
        "sw.toml",
        &config(
            &security_group(&sv, &se),
            &[afpacket_port(&sv, &sv, &s), afpacket_port(&se, &se, &s)],
        ),
    );
    let mut sw = Switch::start(&env_fp, &cfg);
    let held = sg_traffic(&env_fp, &vm, &ext)
        .unwrap_or_else(|e| panic!("through flowpath: {e}\n{}", sw.log()));
    let fp: Option<Vec<Result<String, String>>> =
        sw.has_command("dpctl/dump-conntrack").then(|| {
            commands
                .iter()
                .map(|c| sw.ctl(&c.split(' ').collect::<Vec<_>>()))
                .collect()
        });
    drop(held);
    sw.stop();
    drop(sw);

    // Open vSwitch, same flows on the same addresses.
    let (s, vm, ext, sv, se) = sg_hosts(&mut env_ovs);
    let ovs = Ovs::start(&env_ovs, &s, &[&sv, &se], &security_group(&sv, &se))
        .unwrap_or_else(|e| panic!("starting OVS: {e}"));
    let held = sg_traffic(&env_ovs, &vm, &ext)
        .unwrap_or_else(|e| panic!("through OVS: {e}\n{}", ovs.logs()));
    let theirs: Vec<String> = commands
        .iter()
        .map(|c| {
            ovs.appctl(&c.split(' ').collect::<Vec<_>>())
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    drop(held);
    drop(ovs);
    eprintln!("{test}: OVS dpctl/dump-conntrack:\n{}", theirs[0]);
    // OVS itself shows what the reference says it does: the three connections of the vm.
    let ovs_lines = normalise(&theirs[0], false);
    assert_eq!(
        ovs_lines,
        [
            "icmp,orig=(src=10.9.0.1,dst=10.9.0.2,id=ID,type=8,code=0),\
             reply=(src=10.9.0.2,dst=10.9.0.1,id=ID,type=0,code=0),zone=5,mark=42",
            "tcp,orig=(src=10.9.0.1,dst=10.9.0.2,sport=40002,dport=8002),\
             reply=(src=10.9.0.2,dst=10.9.0.1,sport=8002,dport=40002),zone=5,mark=42,\
             protoinfo=(state=ESTABLISHED)",
            "udp,orig=(src=10.9.0.1,dst=10.9.0.2,sport=50002,dport=9002),\
             reply=(src=10.9.0.2,dst=10.9.0.1,sport=9002,dport=50002),zone=5,mark=42",
        ],
        "OVS's table is not what the reference shows"
    );

    let Some(ours) = fp else {
        eprintln!(
            "SKIP {test} (the comparison): flowpath has no 'dpctl/dump-conntrack' yet; \
             OVS's side ran and showed the expected table"
        );
        return;
    };
    let mut differ = Vec::new();
    for ((cmd, ours), theirs) in commands.iter().zip(&ours).zip(&theirs) {
        eprintln!("{test}: flowpath {cmd}:\n{ours:?}");
        let ours = match ours {
            Ok(o) => o,
            Err(e) => {
                differ.push(format!("{cmd}: flowpath failed: {e}"));
                continue;
            }
        };
        // `-m` prints per-peer TCP details (`state_orig=...`); a flowpath that prints the
        // combined `state=` there does not have them yet.
        let pending = cmd.ends_with("-m") && ours.contains(",protoinfo=(state=");
        if pending {
            eprintln!(
                "SKIP {test} ({cmd}, TCP protoinfo): flowpath prints no per-peer TCP details \
                 under -m yet; compared without protoinfo"
            );
        }
        let (o, t) = (normalise(ours, pending), normalise(theirs, pending));
        if o != t {
            differ.push(format!(
                "{cmd}:\nflowpath:\n{}\nOVS:\n{}",
                o.join("\n"),
                t.join("\n")
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n\n"));
}
