//! Bounded under attack: a switch forwarding cached traffic between two vhost-user VMs while a
//! third VM attacks it (a miss storm, a connection flood, a flood of fragments that never
//! complete, a packet-in flood to a controller that stopped reading), or while its control
//! socket is flooded by clients. Each test requires what docs/soak.md states: the cached
//! traffic keeps at least 80 % of its rate, the figure the attack grows stays within its
//! configured limit, the switch's resident memory stays within [`RSS_SLACK_KIB`] of what it
//! was before the attack, what went over a limit is counted, and the switch is still running.
//!
//! The VMs are `flowpath gen`'s `virtio_user` ports, so these tests need neither root nor
//! QEMU. The cached traffic is offered at a rate a debug build forwards on a loaded machine;
//! the attack at rates well above what its limits let through.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Reap, netns, scratch_dir};

/// How far the switch's resident memory may grow over its figure before the attack (KiB).
const RSS_SLACK_KIB: u64 = 64 << 10;

/// Rate of each direction of the cached stream, packets per second.
const CACHED_PPS: u64 = 2000;

/// Seconds the attack lasts.
const ATTACK_SECS: &str = "3";

/// The switch: VMs `va` and `vb` forward to each other, VM `vs` is the attacker; `extra` is
/// added to the file (datapath and conntrack knobs; what follows a `[bridge]` line goes into
/// the bridge's table), `flows` after the cached ones.
fn switch_config(run: &Path, extra: &str, flows: &[&str]) -> String {
    let (extra, bridge_keys) = extra.split_once("[bridge]\n").unwrap_or((extra, ""));
    let mut all = vec![
        "in_port=va,actions=output:vb",
        "in_port=vb,actions=output:va",
    ];
    all.extend_from_slice(flows);
    let flows: Vec<String> = all.iter().map(|f| format!("  \"{f}\",")).collect();
    let mut s = format!(
        "{extra}\n[[bridge]]\nname = \"br0\"\n{bridge_keys}flows = [\n{}\n]\n",
        flows.join("\n")
    );
    for p in ["va", "vb", "vs"] {
        s += &format!(
            "\n[[bridge.port]]\nname = \"{p}\"\ntype = \"vhostuser\"\n\
             options = {{ \"vhost-server-path\" = \"{}\" }}\n",
            run.join(format!("{p}.sock")).display()
        );
    }
    s
}

/// The generator's ports: the VMs' sides of `va`, `vb` and `vs`.
fn gen_ports(run: &Path) -> String {
    ["a", "b", "s"]
        .iter()
        .map(|p| {
            format!(
                "[[port]]\nname = \"{p}\"\ntype = \"virtio_user\"\n\
                 options = {{ path = \"{}\", queue_size = 1024 }}\n",
                run.join(format!("v{p}.sock")).display()
            )
        })
        .collect()
}

/// The cached stream, both directions between VMs a and b, 100 flows.
fn cached_stream() -> String {
    common::udp_stream(
        "cached",
        "a",
        "b",
        &format!("{CACHED_PPS}pps"),
        "direction = \"bi\"",
    )
}

/// What one run under attack saw.
struct Outcome {
    /// (sent, received) of each direction of the cached stream.
    cached: Vec<(String, u64, u64)>,
    /// The switch's VmRSS before the attack and its largest during it (KiB).
    rss_before: u64,
    rss_max: u64,
    /// The largest value of each `memory/show` figure sampled during the attack.
    figures: std::collections::BTreeMap<String, u64>,
    /// `coverage/show` after the attack.
    coverage: String,
    /// The run directory, for more commands to the switch, still running.
    run: std::path::PathBuf,
    _switch: Reap,
}

impl Outcome {
    /// A `coverage/show` event's total.
    fn event(&self, name: &str) -> u64 {
        self.coverage
            .lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some(name)).then(|| w.last()?.parse().ok())?
            })
            .unwrap_or(0)
    }

    fn figure(&self, name: &str) -> u64 {
        self.figures.get(name).copied().unwrap_or(0)
    }

    /// The requirements every attack shares.
    fn check_bounded(&self, what: &str) {
        eprintln!(
            "{what}: cached {:?}, VmRSS {} KiB before, {} KiB at most during, memory/show at most {:?}",
            self.cached, self.rss_before, self.rss_max, self.figures
        );
        for (name, tx, rx) in &self.cached {
            assert!(*tx > 0, "{what}: {name} sent nothing");
            assert!(
                *rx * 10 >= *tx * 8,
                "{what}: cached stream {name} kept {rx} of {tx} packets (< 80 %)"
            );
        }
        assert!(
            self.rss_max <= self.rss_before + RSS_SLACK_KIB,
            "{what}: VmRSS {} KiB during the attack, {} KiB before",
            self.rss_max,
            self.rss_before
        );
    }
}

fn vm_rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// `memory/show`'s `name:count` pairs (a name may have a space: `udpif keys:3`).
fn memory_figures(run: &Path) -> Vec<(String, u64)> {
    let o = common::ctl(run, &["memory/show"]);
    let mut out = Vec::new();
    let mut name = Vec::new();
    for w in String::from_utf8_lossy(&o.stdout).split_whitespace() {
        match w.rsplit_once(':') {
            Some((k, v)) => {
                name.push(k);
                out.push((name.join(" "), v.parse().unwrap_or(0)));
                name.clear();
            }
            None => name.push(w),
        }
    }
    out
}

fn start_gen(file: &Path) -> Reap {
    Reap(
        Command::new(netns::bin())
            .arg("gen")
            .arg(file)
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Runs the switch of `extra` and `flows`, warms it with a second of cached traffic, then
/// offers the cached stream beside `attack` (a stream file's `[[stream]]` on port `s`, or
/// empty) for [`ATTACK_SECS`] while `during` runs (given the run directory) and the switch
/// is sampled every 100 ms.
fn under_attack(
    tag: &str,
    extra: &str,
    flows: &[&str],
    attack: &str,
    during: impl FnOnce(&Path) + Send,
) -> (Outcome, common::RmDir) {
    let (dir, rm) = scratch_dir(&format!("fp-attack-{tag}"));
    let run = dir.join("run");
    let cfg = dir.join("switch.toml");
    std::fs::write(&cfg, switch_config(&run, extra, flows)).unwrap();
    let mut sw = common::start_switch(&cfg, &run);
    let pid = sw.0.id();

    // Warm up: the cached flows installed, the VMs' memory mapped once.
    let warm = dir.join("warm.toml");
    std::fs::write(
        &warm,
        format!("duration = 1\n{}{}", gen_ports(&run), cached_stream()),
    )
    .unwrap();
    let mut w = start_gen(&warm);
    let status = w.wait(Duration::from_secs(30)).unwrap();
    assert!(status.success(), "{}", w.stderr());
    let rss_before = vm_rss_kib(pid);

    let f = dir.join("attack.toml");
    std::fs::write(
        &f,
        format!(
            "duration = {ATTACK_SECS}\n{}{}{attack}",
            gen_ports(&run),
            cached_stream()
        ),
    )
    .unwrap();
    let mut g = start_gen(&f);
    let mut rss_max = rss_before;
    let mut figures = std::collections::BTreeMap::new();
    std::thread::scope(|s| {
        let r = run.clone();
        let h = s.spawn(move || during(&r));
        let t = Instant::now();
        while g.0.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(60) {
            rss_max = rss_max.max(vm_rss_kib(pid));
            for (k, v) in memory_figures(&run) {
                let e = figures.entry(k).or_insert(0);
                *e = v.max(*e);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        h.join().unwrap();
    });
    let mut out = String::new();
    g.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let err = g.stderr();
    let status = g.0.wait().unwrap();
    assert!(status.success(), "gen: {err}");
    assert!(
        sw.0.try_wait().unwrap().is_none(),
        "{tag}: the switch exited during the attack"
    );
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let cached = j["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("cached"))
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["tx_packets"].as_u64().unwrap(),
                s["rx_packets"].as_u64().unwrap(),
            )
        })
        .collect();
    let coverage = common::ok(common::ctl(&run, &["coverage/show"]));
    let out = Outcome {
        cached,
        rss_before,
        rss_max,
        figures,
        coverage,
        run,
        _switch: sw,
    };
    (out, rm)
}

/// An attack stream from VM s: `flows` frames of `layers` with `vary`, at `rate`.
fn attack_stream(flows: u32, rate: &str, template: &str, vary: &str) -> String {
    format!(
        r#"
[[stream]]
name = "attack"
tx = "s"
flows = {flows}
frame_size = 64
rate = "{rate}"
stamp = false
{template}
vary = [ {vary} ]
"#
    )
}

const UDP_FROM_S: &str = r#"layers = [
  { type = "eth", src = "02:00:00:00:00:05", dst = "02:00:00:00:00:06" },
  { type = "ipv4", src = "10.9.0.1", dst = "10.9.0.2" },
  { type = "udp", sport = 1, dport = 53 },
]"#;

/// A miss storm: every attack packet has a new Ethernet source, and a rule on the source makes
/// each its own megaflow (an Ethernet address has no prefix to wildcard); the datapath's flow limit bounds them, the upcalls past it and past
/// the slow path's budget are counted.
#[test]
fn a_miss_storm_is_bounded_by_the_flow_limit() {
    let _slot = netns::slot();
    let (o, _rm) = under_attack(
        "storm",
        "[datapath]\nflow-limit = 500\n",
        &[
            "priority=10,in_port=vs,dl_src=02:00:00:00:00:01,actions=drop",
            "priority=1,in_port=vs,actions=drop",
        ],
        &attack_stream(
            100_000,
            "20kpps",
            UDP_FROM_S,
            r#"{ field = "eth.src", op = "inc", from = "02:00:01:00:00:00", to = "02:00:01:01:86:9f" }"#,
        ),
        |_| {},
    );
    o.check_bounded("miss storm");
    // The cached stream's 2 megaflows, and at most the limit's worth of the storm's.
    assert!(o.figure("udpif keys") <= 502, "{:?}", o.figures);
    assert!(o.figure("udpif keys") >= 100, "no storm: {:?}", o.figures);
    assert!(
        o.event("upcall_flow_limit_hit") + o.event("upcall_deferred") > 0,
        "{}",
        o.coverage
    );
}

/// A connection flood: every attack packet commits a new UDP connection; the tracker's
/// global limit bounds them, the commits past it are counted (`conntrack_full`).
#[test]
fn a_connection_flood_is_bounded_by_the_conntrack_limit() {
    let _slot = netns::slot();
    let (o, _rm) = under_attack(
        "ctflood",
        "[conntrack]\nmaxconns = 1000\n",
        &["in_port=vs,udp,actions=ct(commit,zone=3)"],
        &attack_stream(
            60_000,
            "20kpps",
            UDP_FROM_S,
            r#"{ field = "udp.sport", op = "inc", from = 1, to = 60000 }"#,
        ),
        |_| {},
    );
    o.check_bounded("connection flood");
    assert!(o.figure("ct-connections") <= 1000, "{:?}", o.figures);
    assert!(o.figure("ct-connections") >= 900, "{:?}", o.figures);
    assert!(o.event("conntrack_full") > 0, "{}", o.coverage);
}

/// A first fragment (more fragments, offset 0) of 508 bytes of UDP, id 1; the flood varies the
/// source address, so that each is a datagram of its own, never completed.
fn first_fragment_hex() -> String {
    let payload = 488usize;
    let total = 20 + payload;
    let mut f = vec![
        0x02,
        0,
        0,
        0,
        0,
        0x06,
        0x02,
        0,
        0,
        0,
        0,
        0x05,
        0x08,
        0x00, // Ethernet
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        1,
        0x20,
        0,
        64,
        17,
        0,
        0,
        10,
        9,
        0,
        1,
        10,
        9,
        0,
        2, // IPv4, MF, offset 0, UDP (checksum filled in by gen)
    ];
    f.extend_from_slice(&[0, 1, 0, 53, 0x03, 0xf0, 0, 0]); // UDP: 1008 bytes in all
    f.resize(14 + total, 0xab);
    f.iter().map(|b| format!("{b:02x}")).collect()
}

/// A number after `label` in a command's output.
fn number_after(text: &str, label: &str) -> u64 {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(label)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no '{label}' in {text}"))
}

/// A fragment flood: first fragments that are never completed, into ct(); the reassembler
/// holds at most its configured number of fragments (one PMD thread here), refuses the rest
/// and counts them (`dpif-netdev/pmd-drop-show`).
#[test]
fn a_fragment_flood_is_bounded_by_the_reassembly_limit() {
    let _slot = netns::slot();
    let held = std::sync::Mutex::new(0u64);
    let (o, _rm) = under_attack(
        "fragflood",
        "[conntrack]\nipf_min_frag_v4 = 400\nipf_max_nfrags = 200\n",
        &["in_port=vs,ip,actions=ct(zone=4)"],
        &attack_stream(
            60_000,
            "10kpps",
            &format!("hex = \"{}\"", first_fragment_hex()),
            r#"{ field = "ipv4.src", op = "inc", from = "10.9.0.1", to = "10.9.234.96" }"#,
        )
        .replace("frame_size = 64\n", ""),
        |run| {
            let stop = Instant::now() + Duration::from_secs_f64(ATTACK_SECS.parse().unwrap());
            while Instant::now() < stop {
                let st = common::ok(common::ctl(run, &["dpctl/ipf-get-status"]));
                let n = number_after(&st, "num frag:");
                let mut h = held.lock().unwrap();
                *h = n.max(*h);
                drop(h);
                std::thread::sleep(Duration::from_millis(100));
            }
        },
    );
    o.check_bounded("fragment flood");
    let held = *held.lock().unwrap();
    let status = common::ok(common::ctl(&o.run, &["dpctl/ipf-get-status"]));
    let drops = common::ok(common::ctl(&o.run, &["dpif-netdev/pmd-drop-show"]));
    eprintln!("fragment flood: at most {held} fragments held\n{status}{drops}");
    assert!(held <= 200, "{held} fragments held\n{status}");
    assert!(
        number_after(&status, "v4 frags accepted:") >= 100,
        "{status}"
    );
    let refused = number_after(&drops, "fragments refused or timed out (ct)");
    assert!(refused >= 1000, "{drops}");
}

/// A packet-in flood: every attack packet goes to a controller that said hello and then
/// stopped reading; the connection queues a bounded number of messages and drops the rest.
#[test]
fn a_packet_in_flood_to_a_stuck_controller_is_bounded_by_its_queue() {
    let _slot = netns::slot();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // A small receive buffer and segment size (inherited by the accepted socket) keep the
    // kernel from taking megabytes of packet-ins off the switch's queue (loopback's 64 KiB
    // segments let the sender's buffer grow to megabytes): the queue's bound is what is tested.
    for (level, opt, v) in [
        (libc::SOL_SOCKET, libc::SO_RCVBUF, 4096),
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG, 536),
    ] {
        let v: libc::c_int = v;
        // SAFETY: setsockopt on an open socket with a c_int option of its size.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&l),
                level,
                opt,
                (&raw const v).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "setsockopt {opt}");
    }
    let port = l.local_addr().unwrap().port();
    let stuck = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        // OpenFlow 1.3 hello; then the switch's hello is read and nothing more.
        c.write_all(&[4, 0, 0, 8, 0, 0, 0, 1]).unwrap();
        let mut hello = [0u8; 8];
        c.read_exact(&mut hello).unwrap();
        assert_eq!(hello[1], 0, "{hello:?}");
        std::thread::sleep(Duration::from_secs(8));
        c
    });
    let (o, _rm) = under_attack(
        "pinflood",
        &format!("[bridge]\ncontroller = [\"tcp:127.0.0.1:{port}\"]\n"),
        &["in_port=vs,actions=controller"],
        &attack_stream(
            1000,
            "20kpps",
            UDP_FROM_S,
            r#"{ field = "udp.sport", op = "inc", from = 1, to = 1000 }"#,
        ),
        |_| {},
    );
    o.check_bounded("packet-in flood");
    // The connection's queue dropped the rest, counted as OVS counts it.
    assert!(o.event("rconn_overflow") > 0, "{}", o.coverage);
    // Every attack packet went to the controller action.
    let flows = common::ok(common::ctl(
        &o.run,
        &["ofctl/dump-flows", "br0", "in_port=vs"],
    ));
    let sent = number_after(&flows.replace([',', ' '], "\n"), "n_packets=");
    assert!(sent > 10_000, "{flows}");
    drop(stuck.join().unwrap());
}

/// One JSON-RPC reply off a control-socket connection (objects are not framed: read until
/// the bytes parse).
fn read_reply(c: &mut UnixStream) -> serde_json::Value {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let n = c.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the reply");
        buf.extend_from_slice(&chunk[..n]);
        if let Ok(v) = serde_json::from_slice(&buf) {
            return v;
        }
    }
}

/// A management flood: 16 clients asking the control socket as fast as it answers, one
/// command per connection, while the cached traffic goes on; every request is answered.
#[test]
fn a_control_socket_flood_leaves_cached_traffic_and_memory_bounded() {
    let _slot = netns::slot();
    let (o, _rm) = under_attack("mgmtflood", "", &[], "", |run| {
        let sock = run.join("flowpath.ctl");
        let stop = Instant::now() + Duration::from_secs(2);
        let answered: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..16)
                .map(|i| {
                    let sock = &sock;
                    s.spawn(move || {
                        let cmds = [
                            "dpif/show",
                            "memory/show",
                            "coverage/show",
                            "dpctl/dump-flows",
                        ];
                        let mut n = 0;
                        while Instant::now() < stop {
                            let mut c = UnixStream::connect(sock).unwrap();
                            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                            let cmd = cmds[(n + i) % cmds.len()];
                            write!(c, r#"{{"id":0,"method":"{cmd}","params":[]}}"#).unwrap();
                            let reply = read_reply(&mut c);
                            assert!(reply["error"].is_null(), "{cmd}: {reply}");
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert!(answered > 16, "{answered} requests answered");
    });
    o.check_bounded("control socket flood");
}
