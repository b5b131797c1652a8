//! The connection tracker's management commands on a running switch: datapath flows added
//! with `dpctl/add-flow` commit a replayed capture's connections with
//! `ct(commit,zone=5,mark=0x2a/0xffffffff)`, then `dpctl/dump-conntrack`, `ct-stats-show`,
//! `ct-bkts`, `flush-conntrack`, the limits, maxconns, TCP sequence checking and timeout
//! policy commands are checked through `flowpath ctl`, and `dump-conntrack` through the stock
//! `ovs-appctl` too when it is installed.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{Reap, csum, scratch_dir, start_switch};
use conntrack::frag::{FragConfig, FragStatus};
use conntrack::ipf_format::format_status;

fn pseudo_sum(src: &[u8], dst: &[u8], proto: u8, len: usize) -> u32 {
    let mut p = Vec::new();
    p.extend_from_slice(src);
    p.extend_from_slice(dst);
    p.extend_from_slice(&(len as u32).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, proto]);
    p.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum()
}

/// An Ethernet frame of `proto` with `l4` (its checksum field at `csum_at` filled in).
fn frame(v6: bool, proto: u8, src: &str, dst: &str, mut l4: Vec<u8>, csum_at: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    if v6 {
        let (s, d) = (
            src.parse::<std::net::Ipv6Addr>().unwrap().octets(),
            dst.parse::<std::net::Ipv6Addr>().unwrap().octets(),
        );
        let c = csum(&l4, pseudo_sum(&s, &d, proto, l4.len()));
        l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        f.extend_from_slice(&[proto, 64]);
        f.extend_from_slice(&s);
        f.extend_from_slice(&d);
    } else {
        let (s, d) = (
            src.parse::<std::net::Ipv4Addr>().unwrap().octets(),
            dst.parse::<std::net::Ipv4Addr>().unwrap().octets(),
        );
        let c = if proto == 1 {
            csum(&l4, 0)
        } else {
            let mut p = Vec::new();
            p.extend_from_slice(&s);
            p.extend_from_slice(&d);
            p.extend_from_slice(&[0, proto]);
            p.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            csum(&l4, u32::from(!csum(&p, 0)))
        };
        l4[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
        let mut h = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0];
        h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        h.extend_from_slice(&s);
        h.extend_from_slice(&d);
        let hc = csum(&h, 0);
        h[10..12].copy_from_slice(&hc.to_be_bytes());
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&h);
    }
    f.extend_from_slice(&l4);
    f
}

fn udp(v6: bool, src: &str, dst: &str, sport: u16, dport: u16) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&[0, 12, 0, 0, b'd', b'a', b't', b'a']);
    frame(v6, 17, src, dst, u, 6)
}

fn tcp_syn(src: &str, dst: &str, sport: u16, dport: u16) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    // seq 1000, no ack, data offset 6 (one option word: window scale 7), SYN, window 8192.
    t.extend_from_slice(&[0, 0, 3, 0xe8, 0, 0, 0, 0, 0x60, 0x02, 0x20, 0, 0, 0, 0, 0]);
    t.extend_from_slice(&[1, 3, 3, 7]);
    frame(false, 6, src, dst, t, 16)
}

fn echo(v6: bool, src: &str, dst: &str, id: u16) -> Vec<u8> {
    let mut e = vec![if v6 { 128 } else { 8 }, 0, 0, 0];
    e.extend_from_slice(&id.to_be_bytes());
    e.extend_from_slice(&[0, 1, b'p', b'i', b'n', b'g']);
    frame(v6, if v6 { 58 } else { 1 }, src, dst, e, 2)
}

/// What the capture's packets make, as OVS prints them (zone 5, mark 42).
const EXPECTED: [&str; 6] = [
    "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=50001,dport=9001),reply=(src=10.1.1.2,dst=10.1.1.1,sport=9001,dport=50001),zone=5,mark=42",
    "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=50002,dport=9002),reply=(src=10.1.1.2,dst=10.1.1.1,sport=9002,dport=50002),zone=5,mark=42",
    "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=1049,type=8,code=0),reply=(src=10.1.1.2,dst=10.1.1.1,id=1049,type=0,code=0),zone=5,mark=42",
    "tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=40001,dport=8001),reply=(src=10.1.1.2,dst=10.1.1.1,sport=8001,dport=40001),zone=5,mark=42,protoinfo=(state=SYN_SENT)",
    "udp,orig=(src=fc00::1,dst=fc00::2,sport=50012,dport=9002),reply=(src=fc00::2,dst=fc00::1,sport=9002,dport=50012),zone=5,mark=42",
    "icmpv6,orig=(src=fc00::1,dst=fc00::2,id=1184,type=128,code=0),reply=(src=fc00::2,dst=fc00::1,id=1184,type=129,code=0),zone=5,mark=42",
];

fn write_capture(path: &Path) {
    let frames = [
        udp(false, "10.1.1.1", "10.1.1.2", 50001, 9001),
        udp(false, "10.1.1.1", "10.1.1.2", 50002, 9002),
        echo(false, "10.1.1.1", "10.1.1.2", 1049),
        tcp_syn("10.1.1.1", "10.1.1.2", 40001, 8001),
        udp(true, "fc00::1", "fc00::2", 50012, 9002),
        echo(true, "fc00::1", "fc00::2", 1184),
    ];
    write_pcap(path, &frames);
}

/// A capture of `frames`, one a millisecond.
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = netdev::pcap::PcapWriter::create(path).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(i as u64 * 1000, f).unwrap();
    }
    w.finish().unwrap();
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

struct Switch {
    rundir: std::path::PathBuf,
    _child: Reap,
}

impl Switch {
    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_flowpath"))
            .arg("ctl")
            .arg("--rundir")
            .arg(&self.rundir)
            .args(args)
            .output()
            .unwrap()
    }

    /// The reply of a command that must succeed.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.ctl(args);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{args:?}: {err}");
        out
    }

    /// The error message of a command that must fail as ovs-appctl does (exit 2).
    fn fails(&self, args: &[&str]) -> String {
        let o = self.ctl(args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {out}");
        assert!(err.contains("server returned an error"), "{err}");
        err.lines().next().unwrap_or_default().to_string()
    }

    fn dump(&self, args: &[&str]) -> BTreeSet<String> {
        let mut a = vec!["dpctl/dump-conntrack"];
        a.extend_from_slice(args);
        self.ok(&a).lines().map(str::to_owned).collect()
    }
}

/// A switch in `dir` whose port p0 replays capture `pcap` (in `dir`) and p1 is a sink, with
/// `sections` (TOML) in its configuration. Until the test's own flows are in, one flow catches
/// (and drops) everything the replay port receives, so that no upcall installs a flow of its
/// own.
fn start(dir: &Path, pcap: &str, sections: &str) -> Switch {
    let cfg = dir.join("sw.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[datapath]
dp-flows = ["in_port(p0), actions:drop"]
{sections}
[[bridge]]
name = "br0"
flows = []

[[bridge.port]]
name = "p0"
type = "replay"
options = {{ pcap = "{pcap}" }}

[[bridge.port]]
name = "p1"
type = "sink"
"#
        ),
    )
    .unwrap();
    let rundir = dir.join("run");
    let child = start_switch(&cfg, &rundir);
    Switch {
        rundir,
        _child: child,
    }
}

const CT_ACTIONS: &str = "ct(commit,zone=5,mark=0x2a/0xffffffff),p1";
const IPV4: &str = "in_port(p0),eth_type(0x0800),ipv4(frag=no)";
const IPV6: &str = "in_port(p0),eth_type(0x86dd),ipv6(frag=no)";

#[test]
fn conntrack_commands_on_a_running_switch() {
    let (dir, _rm) = scratch_dir("flowpath-ct-cmds");
    write_capture(&dir.join("in.pcap"));
    let sw = start(&dir, "in.pcap", "");

    assert_eq!(sw.ok(&["dpctl/dump-conntrack"]), "");
    sw.ok(&["dpctl/add-flow", IPV4, CT_ACTIONS]);
    sw.ok(&["dpctl/add-flow", IPV6, CT_ACTIONS]);
    sw.ok(&["dpctl/del-flow", "in_port(p0)"]);
    let flows = sw.ok(&["dpctl/dump-flows"]);
    assert!(
        flows.contains("actions:ct(commit,zone=5,mark=0x2a/0xffffffff),2"),
        "{flows}"
    );

    let expected: BTreeSet<String> = EXPECTED.iter().map(|s| s.to_string()).collect();
    let t = Instant::now();
    while sw.dump(&[]) != expected {
        assert!(t.elapsed() < Duration::from_secs(20), "{:#?}", sw.dump(&[]));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(sw.dump(&["zone=5"]), expected);
    assert_eq!(sw.dump(&["netdev@flowpath", "zone=5"]), expected);
    assert!(sw.dump(&["zone=0"]).is_empty());

    // -m: the id and the status after the tuples; -s: the seconds left, within the class.
    for l in sw.dump(&["-m"]) {
        let (head, tail) = l.split_once("),id=").unwrap_or_else(|| panic!("{l}"));
        let (id, rest) = tail.split_once(',').unwrap();
        assert!(id.parse::<u32>().is_ok(), "{l}");
        assert!(rest.starts_with("zone=5,status=0,mark=42"), "{l}");
        assert!(
            expected.iter().any(|e| e.starts_with(&format!("{head}),"))),
            "{l}"
        );
    }
    for l in sw.dump(&["-s"]) {
        let (_, tail) = l
            .split_once(",zone=5,timeout=")
            .unwrap_or_else(|| panic!("{l}"));
        let (secs, rest) = tail.split_once(',').unwrap();
        let secs: u32 = secs.parse().unwrap();
        let class = if l.starts_with("tcp") { 30 } else { 60 };
        assert!(secs <= class && secs + 5 >= class, "{l}");
        assert!(rest.starts_with("mark=42"), "{l}");
    }
    assert_eq!(
        sw.fails(&["dpctl/dump-conntrack", "zone=abc"]),
        "datapath not found"
    );
    assert_eq!(
        sw.fails(&["dpctl/dump-conntrack", "-x"]),
        "Unrecognized option -x"
    );

    // The stock ovs-appctl gets the same replies.
    if Command::new("ovs-appctl").arg("--version").output().is_ok() {
        let sock = sw.rundir.join("flowpath.ctl");
        let appctl = |args: &[&str]| {
            Command::new("ovs-appctl")
                .arg("-t")
                .arg(&sock)
                .args(args)
                .output()
                .unwrap()
        };
        let o = appctl(&["dpctl/dump-conntrack"]);
        assert!(o.status.success(), "{:?}", text(&o));
        assert_eq!(text(&o).0, sw.ok(&["dpctl/dump-conntrack"]));
        let o = appctl(&["dpctl/ct-stats-show", "-m", "zone=5"]);
        assert_eq!(text(&o).0, sw.ok(&["dpctl/ct-stats-show", "-m", "zone=5"]));
        let o = appctl(&["dpctl/dump-conntrack", "bogus"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            text(&o).1.starts_with("datapath not found\n"),
            "{:?}",
            text(&o)
        );
        let o = appctl(&["list-commands"]);
        assert!(
            text(&o)
                .0
                .contains("  dpctl/dump-conntrack    [-m] [-s] [dp] [zone=N]\n")
        );
    } else {
        eprintln!("ovs-appctl is not on PATH: its part skipped");
    }

    assert_eq!(
        sw.ok(&["dpctl/ct-stats-show", "-m"]),
        "Connections Stats:\n    Total: 6\n  TCP: 1\n    Conn per TCP states:\n\t  [SYN_SENT]=1\n  UDP: 3\n  ICMP: 1\n  ICMPV6: 1\n"
    );
    assert_eq!(
        sw.ok(&["dpctl/ct-stats-show", "zone=7"]),
        "Connections Stats:\n    Total: 0\n"
    );
    assert_eq!(sw.ok(&["dpctl/ct-get-nconns"]), "6\n");
    let b = sw.ok(&["dpctl/ct-bkts"]);
    assert!(
        b.starts_with("Total Buckets: 256\nCurrent Connections: 6\n\n+-----------+"),
        "{b}"
    );

    // Limits, maxconns, sequence checking, timeout policies: set, read back, undo.
    assert_eq!(sw.ok(&["dpctl/ct-get-limits"]), "default limit=0\n");
    sw.ok(&["dpctl/ct-set-limits", "default=100", "zone=5,limit=10"]);
    assert_eq!(
        sw.ok(&["dpctl/ct-get-limits"]),
        "default limit=100\nzone=5,limit=10,count=6\n"
    );
    assert_eq!(
        sw.ok(&["dpctl/ct-get-limits", "zone=5,7"]),
        "default limit=100\nzone=5,limit=10,count=6\nzone=7,limit=100,count=0\n"
    );
    assert_eq!(
        sw.fails(&["dpctl/ct-set-limits", "zone=5"]),
        "failed to parse zone limit"
    );
    sw.ok(&["dpctl/ct-del-limits", "zone=5"]);
    sw.ok(&["dpctl/ct-set-limits", "default=0"]);
    assert_eq!(sw.ok(&["dpctl/ct-get-limits"]), "default limit=0\n");

    assert_eq!(sw.ok(&["dpctl/ct-get-maxconns"]), "3000000\n");
    assert_eq!(
        sw.ok(&["dpctl/ct-set-maxconns", "1000"]),
        "setting maxconns successful\n"
    );
    assert_eq!(
        sw.ok(&["dpctl/ct-get-maxconns", "netdev@flowpath"]),
        "1000\n"
    );
    assert_eq!(
        sw.fails(&["dpctl/ct-set-maxconns", "abc"]),
        "maxconns missing or malformed"
    );
    assert_eq!(
        sw.fails(&["dpctl/ct-set-maxconns"]),
        "\"dpctl/ct-set-maxconns\" command requires at least 1 arguments"
    );
    sw.ok(&["dpctl/ct-set-maxconns", "3000000"]);

    assert_eq!(
        sw.ok(&["dpctl/ct-disable-tcp-seq-chk"]),
        "disabling TCP sequence checking successful\n"
    );
    assert_eq!(
        sw.ok(&["dpctl/ct-get-tcp-seq-chk"]),
        "TCP sequence checking: disabled\n"
    );
    sw.ok(&["dpctl/ct-enable-tcp-seq-chk"]);
    assert_eq!(
        sw.ok(&["dpctl/ct-get-tcp-seq-chk"]),
        "TCP sequence checking: enabled\n"
    );

    sw.ok(&[
        "dpctl/ct-set-timeout-policy",
        "zone=5",
        "udp_first=7,icmp_first=5",
    ]);
    let p = sw.ok(&["dpctl/ct-get-timeout-policy", "zone=5"]);
    assert!(
        p.starts_with("Zone:5, Timeout Policies: icmp_first=5 icmp_reply=30 ")
            && p.contains(" udp_first=7 "),
        "{p}"
    );
    sw.ok(&["dpctl/ct-del-timeout-policy", "zone=5"]);
    assert_eq!(
        sw.fails(&["dpctl/ct-del-timeout-policy", "zone=5"]),
        "zone id 5 does not exist"
    );

    // No more commits (the catch-all drop back, the ct flows out), then flush.
    sw.ok(&["dpctl/add-flow", "in_port(p0)", "drop"]);
    sw.ok(&["dpctl/del-flow", IPV4]);
    sw.ok(&["dpctl/del-flow", IPV6]);
    assert_eq!(
        sw.fails(&[
            "dpctl/flush-conntrack",
            "ct_nw_src=10.1.1.1,ct_nw_dst=10.1.1.2,ct_nw_proto=17,ct_tp_src=50002,ct_tp_dst=9002"
        ]),
        "failed to flush conntrack",
        "an exact tuple is looked up in zone 0 unless given"
    );
    sw.ok(&[
        "dpctl/flush-conntrack",
        "zone=5",
        "ct_nw_src=10.1.1.1,ct_nw_dst=10.1.1.2,ct_nw_proto=17,ct_tp_src=50002,ct_tp_dst=9002",
    ]);
    let mut left = expected.clone();
    left.remove(EXPECTED[1]);
    assert_eq!(sw.dump(&[]), left);
    // A partial tuple, reply direction only: the ICMPv6 connection.
    sw.ok(&[
        "dpctl/flush-conntrack",
        "zone=5",
        "",
        "ct_ipv6_src=fc00::2,ct_nw_proto=58",
    ]);
    left.remove(EXPECTED[5]);
    assert_eq!(sw.dump(&[]), left);
    assert_eq!(
        sw.fails(&["dpctl/flush-conntrack", "zone=5", "ct_tp_src=80"]),
        "port is set without protocol"
    );
    sw.ok(&["dpctl/flush-conntrack", "netdev@flowpath", "zone=5"]);
    assert_eq!(sw.ok(&["dpctl/dump-conntrack"]), "");
    assert_eq!(sw.ok(&["dpctl/ct-get-nconns"]), "0\n");

    sw.ok(&["exit"]);
}

/// The IP fragments of `whole` (an Ethernet frame from [`frame`]), `size` bytes of data each
/// (a multiple of 8); `take` of them, all when `None`.
fn fragments(whole: &[u8], id: u32, size: usize, take: Option<usize>) -> Vec<Vec<u8>> {
    let v6 = whole[12..14] == [0x86, 0xdd];
    let (hlen, proto) = if v6 { (40, whole[20]) } else { (20, whole[23]) };
    let l4 = &whole[14 + hlen..];
    let chunks: Vec<&[u8]> = l4.chunks(size).collect();
    let n = take.unwrap_or(chunks.len());
    let mut out = Vec::new();
    for (i, data) in chunks.iter().enumerate().take(n) {
        let offset = i * size;
        let more = i + 1 < chunks.len();
        let mut f = whole[..14].to_vec();
        if v6 {
            let mut h = whole[14..54].to_vec();
            h[4..6].copy_from_slice(&((8 + data.len()) as u16).to_be_bytes());
            h[6] = 44;
            f.extend_from_slice(&h);
            f.extend_from_slice(&[proto, 0]);
            f.extend_from_slice(&((offset as u16) | u16::from(more)).to_be_bytes());
            f.extend_from_slice(&id.to_be_bytes());
        } else {
            let mut h = whole[14..34].to_vec();
            h[2..4].copy_from_slice(&((20 + data.len()) as u16).to_be_bytes());
            h[4..6].copy_from_slice(&(id as u16).to_be_bytes());
            let flags = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
            h[6..8].copy_from_slice(&flags.to_be_bytes());
            h[10..12].copy_from_slice(&[0, 0]);
            let c = csum(&h, 0);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&h);
        }
        f.extend_from_slice(data);
        out.push(f);
    }
    out
}

/// A UDP datagram with `len` bytes of data.
fn udp_len(v6: bool, src: &str, dst: &str, sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + len) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend((0..len).map(|i| i as u8));
    frame(v6, 17, src, dst, u, 6)
}

/// The `[conntrack]` section the switch of [`conntrack_configuration_and_ipf_commands`]
/// starts with.
const CT_CONFIG: &str = r#"
[conntrack]
maxconns = 5000
tcp_seq_chk = false
default_limit = 100
ipf_min_frag_v4 = 500
ipf_max_nfrags = 2000

[conntrack.default_timeouts]
udp_first = 45

[[conntrack.zone]]
zone = 5
limit = 10
tcp_established = 3600
udp_single = 33
"#;

/// The fragment reassembly that configuration sets up.
fn ipf_configured() -> FragConfig {
    FragConfig {
        max_frags: 2000,
        min_frag_size_v4: 500,
        ..FragConfig::default()
    }
}

/// `ipf-get-status` (`-m`: with `lists`) of reassembly `config` before any fragment, in the
/// library's format (checked against OVS's in `conntrack::ipf_format`'s tests).
fn ipf_status(config: FragConfig, lists: bool) -> String {
    let st = FragStatus {
        config,
        ..FragStatus::default()
    };
    format_status(&st, lists)
}

/// The counter `name` (`v4 frags accepted`) of an `ipf-get-status` reply.
fn ipf_counter(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(": "))
        .unwrap_or_else(|| panic!("no {name} in {status}"))
        .parse()
        .unwrap()
}

#[test]
fn conntrack_configuration_and_ipf_commands() {
    let (dir, _rm) = scratch_dir("flowpath-ct-config");
    // A UDP datagram in 3 IPv4 fragments and one in 2 IPv6 fragments, the first fragment of a
    // datagram that never completes, and a non-last fragment under the configured minimum.
    let mut frames = fragments(
        &udp_len(false, "10.1.1.1", "10.1.1.2", 5000, 6000, 1192),
        77,
        480,
        None,
    );
    frames.extend(fragments(
        &udp_len(true, "fc00::1", "fc00::2", 5000, 6000, 2000),
        0x5151,
        1232,
        None,
    ));
    frames.extend(fragments(
        &udp_len(false, "10.1.1.51", "10.1.1.12", 5, 6, 3000),
        4242,
        480,
        Some(1),
    ));
    frames.extend(fragments(
        &udp_len(false, "10.1.1.52", "10.1.1.12", 5, 6, 400),
        4343,
        96,
        Some(1),
    ));
    assert_eq!(frames.len(), 7);
    write_pcap(&dir.join("frags.pcap"), &frames);
    let sw = start(&dir, "frags.pcap", CT_CONFIG);

    // The configured values, through the commands that show them.
    assert_eq!(sw.ok(&["dpctl/ct-get-maxconns"]), "5000\n");
    assert_eq!(
        sw.ok(&["dpctl/ct-get-tcp-seq-chk"]),
        "TCP sequence checking: disabled\n"
    );
    assert_eq!(
        sw.ok(&["dpctl/ct-get-limits"]),
        "default limit=100\nzone=5,limit=10,count=0\n"
    );
    let p = sw.ok(&["dpctl/ct-get-timeout-policy", "zone=5"]);
    assert!(
        p.starts_with("Zone:5, Timeout Policies: ")
            && p.contains(" tcp_established=3600 ")
            && p.contains(" udp_first=45 ")
            && p.ends_with(" udp_single=33\n"),
        "{p}"
    );
    let p = sw.ok(&["dpctl/ct-get-timeout-policy"]);
    assert!(
        p.starts_with("Default, Timeout Policies: ")
            && p.contains(" tcp_established=86400 ")
            && p.contains(" udp_first=45 "),
        "{p}"
    );
    let status = ipf_status(ipf_configured(), false);
    assert_eq!(sw.ok(&["dpctl/ipf-get-status"]), status);
    assert_eq!(
        sw.ok(&["dpctl/ipf-get-status", "netdev@flowpath", "-m"]),
        ipf_status(ipf_configured(), true)
    );

    // The settings round-trip, with OVS's replies and errors.
    assert_eq!(
        sw.ok(&["dpctl/ipf-set-disabled", "v4"]),
        "disabling fragmentation reassembly successful\n"
    );
    assert_eq!(
        sw.ok(&["dpctl/ipf-set-min-frag", "v6", "1000"]),
        "setting minimum fragment size successful\n"
    );
    assert_eq!(
        sw.ok(&["dpctl/ipf-set-max-nfrags", "netdev@flowpath", "3000"]),
        "setting maximum fragments successful\n"
    );
    let changed = ipf_status(
        FragConfig {
            enabled_v4: false,
            max_frags: 3000,
            min_frag_size_v6: 1000,
            ..ipf_configured()
        },
        false,
    );
    assert_eq!(sw.ok(&["dpctl/ipf-get-status"]), changed);
    assert_eq!(
        sw.fails(&["dpctl/ipf-set-min-frag", "v4", "300"]),
        "requested minimum fragment size too small; see documentation"
    );
    assert_eq!(
        sw.fails(&["dpctl/ipf-set-min-frag", "v7", "1000"]),
        "parameter missing: v4 for IPv4 or v6 for IPv6"
    );
    assert_eq!(
        sw.fails(&["dpctl/ipf-set-max-nfrags", "5001"]),
        "setting maximum fragments failed"
    );
    assert_eq!(
        sw.fails(&["dpctl/ipf-set-enabled", "v5"]),
        "parameter missing: 'v4' for IPv4 or 'v6' for IPv6"
    );
    assert_eq!(
        sw.fails(&["dpctl/ipf-set-enabled"]),
        "\"dpctl/ipf-set-enabled\" command requires at least 1 arguments"
    );
    assert_eq!(
        sw.fails(&["dpctl/ipf-get-status", "bogus"]),
        "datapath not found"
    );
    assert_eq!(sw.ok(&["dpctl/ipf-get-status"]), changed);
    sw.ok(&["dpctl/ipf-set-enabled", "v4"]);
    sw.ok(&["dpctl/ipf-set-min-frag", "v6", "1280"]);
    sw.ok(&["dpctl/ipf-set-max-nfrags", "2000"]);
    assert_eq!(sw.ok(&["dpctl/ipf-get-status"]), status);

    // Fragments through ct(): reassembled, counted, tracked.
    let ct = "ct(commit,zone=5),p1";
    sw.ok(&["dpctl/add-flow", "in_port(p0),eth_type(0x0800)", ct]);
    sw.ok(&["dpctl/add-flow", "in_port(p0),eth_type(0x86dd)", ct]);
    sw.ok(&["dpctl/del-flow", "in_port(p0)"]);
    let waiting = "(src=10.1.1.51,dst=10.1.1.12,recirc_id=0,ip_id=4242,dl_type=0x800,zone=5,\
                   nw_proto=17,num_fragments=1,state=first frag)\n";
    let t = Instant::now();
    loop {
        let st = sw.ok(&["dpctl/ipf-get-status", "-m"]);
        let done = ipf_counter(&st, "v4 frags completed") >= 3
            && ipf_counter(&st, "v6 frags completed") >= 2
            && ipf_counter(&st, "v4 frags too small") >= 1
            && ipf_counter(&st, "num frag") >= 1
            && st.ends_with(&format!("\n        Fragment Lists:\n\n{waiting}"));
        if done {
            assert!(ipf_counter(&st, "v4 frags accepted") >= 4, "{st}");
            assert!(ipf_counter(&st, "v6 frags accepted") >= 2, "{st}");
            assert_eq!(ipf_counter(&st, "v4 frags completed") % 3, 0, "{st}");
            assert_eq!(ipf_counter(&st, "v6 frags completed") % 2, 0, "{st}");
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{st}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let conns = sw.dump(&["zone=5"]);
    for want in [
        "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=5000,dport=6000),reply=(src=10.1.1.2,dst=10.1.1.1,sport=6000,dport=5000),zone=5",
        "udp,orig=(src=fc00::1,dst=fc00::2,sport=5000,dport=6000),reply=(src=fc00::2,dst=fc00::1,sport=6000,dport=5000),zone=5",
    ] {
        assert!(conns.contains(want), "{conns:#?}");
    }
    // The replay repeats each datagram from one side: udp_single, from zone 5's policy.
    for l in sw.dump(&["-s", "zone=5"]) {
        let secs: u32 = l
            .split_once(",timeout=")
            .and_then(|(_, t)| t.split(',').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{l}"));
        assert!(secs <= 33 && secs + 5 >= 33, "{l}");
    }
    sw.ok(&["exit"]);
}
