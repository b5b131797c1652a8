//! `flowpath run` on kernel interfaces, end to end: `afpacket`, `afxdp` and `tap` ports joining
//! network namespaces (veth pairs, TAP devices), driven as an operator would: a configuration
//! file, `flowpath run`, `flowpath ctl` / `flowpath ofctl`, and `ping` / `nc` in the hosts'
//! namespaces.
//!
//! Needs root and the tools `ip` and `ss` (iproute2), `ping` (iputils), `nc` (OpenBSD netcat),
//! `ethtool`: without them a test prints `SKIP <test>: <reason>` on stderr and returns (the
//! configuration checks of `bad_kernel_port_configuration_is_reported` run as any user).
//!
//! # Offloads
//! A userspace switch sees frames as bytes; what the hosts' kernels may leave to an offload has
//! to be turned off on the hosts' veth ends, as for OVS's AF_PACKET and AF_XDP ports:
//! - `afpacket`: `ethtool -K IF tso off gso off`. The port completes partial checksums
//!   (`TP_STATUS_CSUMNOTREADY`) but does not segment: a TSO/GSO super-frame from the host would
//!   be larger than the MTU of the other side (and than the ring's frame).
//! - `afxdp`: `ethtool -K IF tx off` (checksum offload, which takes TSO with it). AF_XDP carries
//!   no checksum metadata, so a host's TCP/UDP would otherwise cross with partial checksums.
//! - `tap`: nothing. The port advertises checksum offload only (completed on rx) and no
//!   segmentation offload, so the kernel segments before the device.
//!
//! # Isolation
//! Every name is made from the process id and a tag per test, and every interface lives in the
//! test's own namespaces (veth pairs and taps are created inside them), so a guard that deletes
//! the namespaces removes everything, however the test ends. The switch is a child process
//! killed by its own guard, which is dropped before the namespaces go.
//!
//! A running switch busy-polls a core (its PMD thread, on core 1 by default). The tests that run
//! one take [`slot`] for their duration, so that switches of parallel tests do not fight over
//! the cores of a small CI machine and the timings they report (restart, recovery) mean
//! something.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Reap;
use common::netns::{
    Env, Names, Switch, check_no_ping, config, in_ns, in_path, is_root, must, no_ping, ping, run,
    slot, tcp_transfer, veth, wait_until,
};

/// Names of this binary's namespaces (`fpe-TAG-SUFFIX`) and directories.
static NAMES: Names = Names {
    netns: "fpe",
    dir: "flowpath-netns",
    root_for: "network namespaces, veth, taps",
    // Room for a `.NN` VLAN suffix.
    ifname_max: 12,
};

/// Tools every traffic test uses.
const TOOLS: &[&str] = &["ip", "ss", "ping", "nc", "ethtool"];

/// Bytes of the bulk TCP transfers.
const BULK: u64 = 100 << 20;

// ---- the hosts' interfaces ------------------------------------------------------------------

/// The port types under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    AfPacket,
    AfXdp,
    Tap,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AfPacket => "afpacket",
            Kind::AfXdp => "afxdp",
            Kind::Tap => "tap",
        }
    }
}

/// A host's interface toward the switch: address `cidr`, and the offloads a port of type
/// `kind` on the other end of its veth needs off (see the module docs).
fn host_if(ns: &str, ifn: &str, cidr: &str, kind: Kind) {
    match kind {
        // No software segmentation in the afpacket port: no TSO/GSO super-frames.
        Kind::AfPacket => {
            must(&in_ns(
                ns,
                &["ethtool", "-K", ifn, "tso", "off", "gso", "off"],
            ));
        }
        // No checksum metadata through AF_XDP: checksums computed by the host (TSO goes with
        // tx checksumming).
        Kind::AfXdp => {
            must(&in_ns(ns, &["ethtool", "-K", ifn, "tx", "off"]));
        }
        Kind::Tap => {}
    }
    must(&["ip", "-n", ns, "addr", "add", cidr, "dev", ifn]);
    must(&["ip", "-n", ns, "link", "set", ifn, "up"]);
}

/// Whether this kernel has AF_XDP sockets.
fn af_xdp_supported() -> bool {
    // AF_XDP (44), SOCK_RAW (3).
    netdev::netns::socket(44, 3, 0).is_ok()
}

/// The Ethernet address of `ifn` in `ns`.
fn mac_of(ns: &str, ifn: &str) -> String {
    let out = must(&["ip", "-n", ns, "-o", "link", "show", ifn]);
    out.split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .unwrap_or_else(|| panic!("no address in {out}"))
        .to_owned()
}

// ---- configuration ---------------------------------------------------------------------------

/// One `[[bridge.port]]`: name, type, options, extra lines (`tag = 10`).
fn port(name: &str, kind: &str, options: &[(&str, &str)], extra: &str) -> String {
    let o: Vec<String> = options
        .iter()
        .map(|(k, v)| format!("{k} = \"{v}\""))
        .collect();
    format!(
        "\n[[bridge.port]]\nname = \"{name}\"\ntype = \"{kind}\"\noptions = {{ {} }}\n{extra}",
        o.join(", ")
    )
}

/// An `afpacket` port on interface `ifn` of namespace `ns`.
fn afpacket_port(name: &str, ifn: &str, ns: &str, extra: &str) -> String {
    port(name, "afpacket", &[("ifname", ifn), ("netns", ns)], extra)
}

/// The number after `field` on the first line of `text` that contains `line`.
fn number(text: &str, line: &str, field: &str) -> Option<u64> {
    let l = text.lines().find(|l| l.contains(line))?;
    let rest = &l[l.find(field)? + field.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

// ---- traffic ---------------------------------------------------------------------------------

/// Pings that must all go unanswered (3 echoes each): started together, checked together.
fn no_pings(pairs: &[(&str, &str)]) {
    let children: Vec<(String, Reap)> = pairs
        .iter()
        .map(|(ns, dst)| (format!("{ns} -> {dst}"), no_ping(ns, dst, 3)))
        .collect();
    for (what, c) in children {
        check_no_ping(c, &what);
    }
}

/// Pings `dst` from `ns` every 10 ms until the first answer, for up to `limit` (whole
/// seconds): the time from `since` to that answer.
fn first_answer(ns: &str, dst: &str, since: Instant, limit: Duration) -> Option<Duration> {
    let deadline = limit.as_secs().max(1).to_string();
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-c", "1", "-i", "0.01"])
        .args(["-w", &deadline, "-q", dst])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    o.status.success().then(|| since.elapsed())
}

fn rate(bytes: u64, d: Duration) -> String {
    format!(
        "{:.1} MB in {:.2} s ({:.0} Mbit/s)",
        bytes as f64 / 1e6,
        d.as_secs_f64(),
        bytes as f64 * 8.0 / d.as_secs_f64() / 1e6
    )
}

// ---- 1. two hosts through each port type -----------------------------------------------------

/// Hosts A and B (namespaces) joined through two ports of type `kind`: ping and a 100 MB TCP
/// transfer through NORMAL, then the same through explicit OpenFlow rules.
fn two_hosts(test: &str, short: &str, kind: Kind) {
    let Some(mut env) = Env::new(test, short, TOOLS, &NAMES) else {
        return;
    };
    if kind == Kind::AfXdp && !af_xdp_supported() {
        eprintln!("SKIP {test}: no AF_XDP sockets in this kernel");
        return;
    }
    let _slot = slot();
    let (a, b) = (env.netns("a"), env.netns("b"));
    let (ha, hb) = (env.ifname("ha"), env.ifname("hb"));
    let (ip_a, ip_b) = ("10.231.0.1", "10.231.0.2");
    let ports = if kind == Kind::Tap {
        // The switch makes the TAP devices itself, in the hosts' namespaces: the host end is
        // the tap, no veth.
        vec![
            port("p1", "tap", &[("ifname", &ha), ("netns", &a)], ""),
            port("p2", "tap", &[("ifname", &hb), ("netns", &b)], ""),
        ]
    } else {
        // veth pairs, the switch ends in a third namespace, reached with `netns=`.
        let s = env.netns("s");
        let (sa, sb) = (env.ifname("sa"), env.ifname("sb"));
        veth(&ha, &a, &sa, &s);
        veth(&hb, &b, &sb, &s);
        host_if(&a, &ha, &format!("{ip_a}/24"), kind);
        host_if(&b, &hb, &format!("{ip_b}/24"), kind);
        vec![
            port("p1", kind.name(), &[("ifname", &sa), ("netns", &s)], ""),
            port("p2", kind.name(), &[("ifname", &sb), ("netns", &s)], ""),
        ]
    };
    let cfg = env.write("sw.toml", &config(&["actions=NORMAL"], &ports));
    let mut sw = Switch::start(&env, &cfg);
    if kind == Kind::Tap {
        // The devices exist (and are up) once the switch runs; the hosts configure them.
        host_if(&a, &ha, &format!("{ip_a}/24"), kind);
        host_if(&b, &hb, &format!("{ip_b}/24"), kind);
    }
    let show = sw.ctl_ok(&["dpif/show"]);
    eprintln!("{test}: {show}");
    assert!(
        show.contains(&format!("p1 1/1: ({}:", kind.name()))
            && show.contains(&format!("p2 2/2: ({}:", kind.name())),
        "{show}"
    );

    ping(&a, ip_b, 3).unwrap_or_else(|e| panic!("NORMAL: {e}\n{}", sw.log()));
    ping(&b, ip_a, 3).unwrap_or_else(|e| panic!("NORMAL: {e}\n{}", sw.log()));
    let src = env.data_file("bulk", BULK);
    let t = tcp_transfer(&env, &src, &a, &b, ip_b, 5001).unwrap_or_else(|e| {
        panic!(
            "NORMAL, A to B: {e}\np1: {}p2: {}",
            sw.ctl_ok(&["port/stats", "p1"]),
            sw.ctl_ok(&["port/stats", "p2"])
        )
    });
    eprintln!("{test}: NORMAL, A to B: {}", rate(BULK, t));
    let st = sw.ctl_ok(&["port/stats", "p1"]);
    eprintln!("{test}: {st}");
    assert!(
        st.starts_with(&format!("p1 1: ({}) link up", kind.name())),
        "{st}"
    );
    // Bytes, not packets: a tap with TSO carries the transfer in 64 KiB super-frames.
    let rx = number(&st, "total", "bytes:").unwrap();
    assert!(rx >= BULK, "p1 received the transfer: {st}");

    // Explicit rules instead of NORMAL: the cached megaflows are revalidated away.
    sw.ofctl(&["del-flows", "br0"]);
    sw.ofctl(&["add-flow", "br0", "in_port=p1 actions=output:p2"]);
    sw.ofctl(&["add-flow", "br0", "in_port=p2 actions=output:p1"]);
    let dump = sw.ofctl(&["dump-flows", "br0"]);
    assert!(
        !dump.contains("NORMAL") && dump.lines().filter(|l| l.contains("actions=")).count() == 2,
        "{dump}"
    );
    ping(&a, ip_b, 3).unwrap_or_else(|e| panic!("OpenFlow rules: {e}\n{}", sw.log()));
    let t = tcp_transfer(&env, &src, &b, &a, ip_a, 5002)
        .unwrap_or_else(|e| panic!("OpenFlow rules, B to A: {e}"));
    eprintln!("{test}: OpenFlow rules, B to A: {}", rate(BULK, t));
    // The rules' counters (pushed from the megaflows by the revalidator, once a second) saw
    // the transfer.
    let mut dump = String::new();
    let counted = wait_until(Duration::from_secs(5), || {
        dump = sw.ofctl(&["dump-flows", "br0"]);
        number(&dump, "actions=output:1", "n_bytes=").unwrap_or(0) >= BULK
    });
    assert!(counted, "{dump}");
    eprintln!("{test}: {dump}");
    sw.stop();
}

#[test]
fn afpacket_two_hosts_normal_and_openflow() {
    two_hosts(
        "afpacket_two_hosts_normal_and_openflow",
        "pk",
        Kind::AfPacket,
    );
}

#[test]
fn afxdp_two_hosts_normal_and_openflow() {
    two_hosts("afxdp_two_hosts_normal_and_openflow", "xd", Kind::AfXdp);
}

#[test]
fn tap_two_hosts_normal_and_openflow() {
    two_hosts("tap_two_hosts_normal_and_openflow", "tp", Kind::Tap);
}

// ---- 2. VLANs --------------------------------------------------------------------------------

/// Access ports A and B in VLAN 10, C in VLAN 20, and a trunk to D carrying both (D has VLAN
/// subinterfaces): NORMAL keeps the VLANs apart and tags and untags at the trunk.
#[test]
fn vlan_access_ports_and_trunk() {
    let test = "vlan_access_ports_and_trunk";
    let Some(mut env) = Env::new(test, "vl", TOOLS, &NAMES) else {
        return;
    };
    let _slot = slot();
    let s = env.netns("s");
    let hosts: Vec<(String, String, String)> = ["a", "b", "c", "d"]
        .iter()
        .map(|h| {
            let ns = env.netns(h);
            let (hi, si) = (env.ifname(&format!("h{h}")), env.ifname(&format!("s{h}")));
            veth(&hi, &ns, &si, &s);
            (ns, hi, si)
        })
        .collect();
    let [(a, ha, sa), (b, hb, sb), (c, hc, sc), (d, hd, sd)] = &hosts[..] else {
        unreachable!()
    };
    // VLAN 10 is 10.232.10.0/24, VLAN 20 10.232.20.0/24. C also has an address in VLAN 10's
    // subnet: reachable from there only if VLAN 20 leaked into VLAN 10.
    host_if(a, ha, "10.232.10.1/24", Kind::AfPacket);
    host_if(b, hb, "10.232.10.2/24", Kind::AfPacket);
    host_if(c, hc, "10.232.20.3/24", Kind::AfPacket);
    must(&["ip", "-n", c, "addr", "add", "10.232.10.3/24", "dev", hc]);
    must(&in_ns(
        d,
        &["ethtool", "-K", hd, "tso", "off", "gso", "off"],
    ));
    must(&["ip", "-n", d, "link", "set", hd, "up"]);
    // D's end of the trunk: VLAN subinterfaces, or, on a kernel without 802.1Q devices
    // (CONFIG_VLAN_8021Q unset), a python3 responder on the trunk interface that answers ARP
    // and ping for one address per VLAN and reports the (source MAC, VLAN) pairs it saw.
    let vlan_devices = (|| {
        for (vid, ip) in [("10", "10.232.10.4/24"), ("20", "10.232.20.4/24")] {
            let sub = format!("{hd}.{vid}");
            run(&[
                "ip", "-n", d, "link", "add", "link", hd, "name", &sub, "type", "vlan", "id", vid,
            ])?;
            run(&["ip", "-n", d, "addr", "add", ip, "dev", &sub])?;
            run(&["ip", "-n", d, "link", "set", &sub, "up"])?;
        }
        Ok::<_, String>(())
    })();
    let mut responder = None;
    if let Err(e) = vlan_devices {
        if !in_path("python3") {
            eprintln!(
                "SKIP {test}: no VLAN devices here ({}) and no python3",
                e.trim()
            );
            return;
        }
        eprintln!(
            "{test}: no VLAN devices here ({}): D is a python3 responder",
            e.trim()
        );
        let mut r = Reap(
            Command::new("ip")
                .args(["netns", "exec", d, "python3", "-c", VLAN_RESPONDER, hd])
                .args(["10=10.232.10.4", "20=10.232.20.4"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        );
        let mut line = [0u8; 6];
        r.0.stdout.as_mut().unwrap().read_exact(&mut line).unwrap();
        assert_eq!(&line, b"ready\n");
        responder = Some(r);
    }
    let cfg = env.write(
        "sw.toml",
        &config(
            &["actions=NORMAL"],
            &[
                afpacket_port("pa", sa, &s, "tag = 10\n"),
                afpacket_port("pb", sb, &s, "tag = 10\n"),
                afpacket_port("pc", sc, &s, "tag = 20\n"),
                afpacket_port("pd", sd, &s, "trunks = [10, 20]\n"),
            ],
        ),
    );
    let mut sw = Switch::start(&env, &cfg);

    ping(a, "10.232.10.2", 3).unwrap_or_else(|e| panic!("A to B, VLAN 10: {e}"));
    ping(a, "10.232.10.4", 3).unwrap_or_else(|e| panic!("A to D.10 over the trunk: {e}"));
    ping(c, "10.232.20.4", 3).unwrap_or_else(|e| panic!("C to D.20 over the trunk: {e}"));
    ping(b, "10.232.10.4", 3).unwrap_or_else(|e| panic!("B to D.10 over the trunk: {e}"));
    // Same subnet, other VLAN: not even ARP gets across.
    no_pings(&[(a, "10.232.10.3"), (c, "10.232.10.1")]);
    if let Some(mut r) = responder {
        // What crossed the trunk: A and B only in VLAN 10, C only in VLAN 20.
        drop(r.0.stdin.take());
        let mut seen = String::new();
        r.0.stdout
            .as_mut()
            .unwrap()
            .read_to_string(&mut seen)
            .unwrap();
        r.wait(Duration::from_secs(5)).unwrap();
        eprintln!("{test}: the trunk carried (source, VLAN): {seen}");
        for (ns, ifn, vid) in [(a, ha, "10"), (b, hb, "10"), (c, hc, "20")] {
            let mac = mac_of(ns, ifn);
            let vids: Vec<&str> = seen
                .lines()
                .filter(|l| l.starts_with(&mac))
                .filter_map(|l| l.split_whitespace().nth(1))
                .collect();
            assert!(
                !vids.is_empty() && vids.iter().all(|v| *v == vid),
                "{mac} ({ns}) on the trunk in VLANs {vids:?}, expected only {vid}: {seen}"
            );
        }
    } else {
        no_pings(&[(d, "10.232.10.3")]);
    }
    let fdb = sw.ctl_ok(&["fdb/show", "br0"]);
    eprintln!("{test}: {fdb}");
    let vlans: Vec<&str> = fdb
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert!(
        vlans.contains(&"10")
            && vlans.contains(&"20")
            && vlans.iter().all(|v| *v == "10" || *v == "20"),
        "MACs learned in VLANs 10 and 20 only: {fdb}"
    );
    sw.stop();
}

/// D's end of the trunk where the kernel has no VLAN devices: answers ARP requests and pings
/// for `VID=IP` on frames tagged VID (from the frame or, as the kernel strips tags on receive,
/// from PACKET_AUXDATA), replying tagged; at the end of stdin, prints each (source MAC, VLAN)
/// pair it received.
const VLAN_RESPONDER: &str = r#"
import select, socket, struct, sys
ifn = sys.argv[1]
ips = {int(v): socket.inet_aton(a) for v, a in (x.split('=') for x in sys.argv[2:])}
mac = bytes.fromhex(open('/sys/class/net/%s/address' % ifn).read().strip().replace(':', ''))
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((ifn, 0))
s.setsockopt(263, 8, 1)  # PACKET_AUXDATA
def csum(b):
    if len(b) % 2:
        b += b'\0'
    t = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    t = (t >> 16) + (t & 0xffff)
    t += t >> 16
    return ~t & 0xffff
seen = set()
print('ready', flush=True)
while True:
    r, _, _ = select.select([s, sys.stdin], [], [])
    if sys.stdin in r:
        break
    f, anc, _, addr = s.recvmsg(65536, 256)
    if addr[2] == socket.PACKET_OUTGOING:
        continue
    vid = None
    for lvl, typ, d in anc:
        if lvl == 263 and typ == 8:
            st, _, _, _, _, tci, _ = struct.unpack('IIIHHHH', d[:20])
            if st & 16:  # TP_STATUS_VLAN_VALID
                vid = tci & 0xfff
    if vid is None and f[12:14] == b'\x81\x00':
        vid = struct.unpack('!H', f[14:16])[0] & 0xfff
        f = f[:12] + f[16:]
    seen.add((f[6:12].hex(':'), vid))
    ip = ips.get(vid)
    if ip is None:
        continue
    tag = b'\x81\x00' + struct.pack('!H', vid)
    if f[12:14] == b'\x08\x06' and f[20:22] == b'\x00\x01' and f[38:42] == ip:
        arp = b'\x00\x01\x08\x00\x06\x04\x00\x02' + mac + ip + f[22:32]
        s.send(f[6:12] + mac + tag + b'\x08\x06' + arp)
    elif f[12:14] == b'\x08\x00' and f[23] == 1 and f[30:34] == ip:
        h = (f[14] & 15) * 4
        icmp = bytearray(f[14 + h:14 + struct.unpack('!H', f[16:18])[0]])
        if icmp[0] != 8:
            continue
        icmp[0] = 0
        icmp[2:4] = b'\0\0'
        icmp[2:4] = struct.pack('!H', csum(bytes(icmp)))
        iph = bytearray(f[14:14 + h])
        iph[12:16], iph[16:20] = f[30:34], f[26:30]
        s.send(f[6:12] + mac + tag + b'\x08\x00' + bytes(iph) + bytes(icmp))
for m, v in sorted(seen, key=str):
    print(m, v)
"#;

// ---- 3. restart ------------------------------------------------------------------------------

/// A switch with an afpacket port (veth, switch end in a namespace through `netns=`) and a
/// persistent tap inside a host's namespace: stopped and started again with the same
/// configuration, it forwards again well within a second of its start.
#[test]
fn restart_forwards_again_within_a_second() {
    let test = "restart_forwards_again_within_a_second";
    let Some(mut env) = Env::new(test, "rs", TOOLS, &NAMES) else {
        return;
    };
    let _slot = slot();
    let (a, b, s) = (env.netns("a"), env.netns("b"), env.netns("s"));
    let (ha, sa, tb) = (env.ifname("ha"), env.ifname("sa"), env.ifname("tb"));
    veth(&ha, &a, &sa, &s);
    host_if(&a, &ha, "10.233.0.1/24", Kind::AfPacket);
    // B's interface is a tap made by its administrator (kept across switch restarts with its
    // address), opened by the switch inside B's namespace.
    must(&["ip", "-n", &b, "tuntap", "add", "dev", &tb, "mode", "tap"]);
    host_if(&b, &tb, "10.233.0.2/24", Kind::Tap);
    // Static neighbours: what is measured is the switch, not ARP's retransmit timer (a probe
    // lost while the switch is down is retried only a second later).
    let (mac_a, mac_b) = (mac_of(&a, &ha), mac_of(&b, &tb));
    must(&[
        "ip",
        "-n",
        &a,
        "neigh",
        "replace",
        "10.233.0.2",
        "lladdr",
        &mac_b,
        "dev",
        &ha,
        "nud",
        "permanent",
    ]);
    must(&[
        "ip",
        "-n",
        &b,
        "neigh",
        "replace",
        "10.233.0.1",
        "lladdr",
        &mac_a,
        "dev",
        &tb,
        "nud",
        "permanent",
    ]);
    let cfg = env.write(
        "sw.toml",
        &config(
            &["actions=NORMAL"],
            &[
                port("p1", "afpacket", &[("ifname", &sa), ("netns", &s)], ""),
                port("p2", "tap", &[("ifname", &tb), ("netns", &b)], ""),
            ],
        ),
    );
    let mut sw = Switch::start(&env, &cfg);
    ping(&a, "10.233.0.2", 3).unwrap_or_else(|e| panic!("first run: {e}\n{}", sw.log()));
    let small = env.data_file("small", 1 << 20);

    let mut times = Vec::new();
    for round in 1..=3 {
        sw.stop();
        let addr = must(&["ip", "-n", &b, "-o", "addr", "show", "dev", &tb]);
        assert!(
            addr.contains("10.233.0.2/24"),
            "the tap keeps its address: {addr}"
        );
        let t0 = Instant::now();
        sw.spawn();
        let took = first_answer(&a, "10.233.0.2", t0, Duration::from_secs(5));
        let Some(took) = took else {
            panic!(
                "round {round}: no answer 5 s after the restart\n{}",
                sw.log()
            );
        };
        sw.wait_ready();
        eprintln!(
            "{test}: round {round}: first ping answered {:.0} ms after the switch started",
            took.as_secs_f64() * 1e3
        );
        times.push(took);
        ping(&a, "10.233.0.2", 3).unwrap();
        tcp_transfer(&env, &small, &a, &b, "10.233.0.2", 5100 + round)
            .unwrap_or_else(|e| panic!("round {round}: TCP after restart: {e}"));
    }
    sw.stop();
    let worst = times.iter().max().unwrap();
    assert!(
        *worst < Duration::from_secs(1),
        "forwarding again after a restart took {times:?}"
    );
}

// ---- 4. an interface deleted and made again --------------------------------------------------

/// A host's veth pair deleted under a running switch (ports of type `kind`, the switch ends in
/// a namespace of their own): its port says `link down`, the switch and its other ports carry
/// on; the pair made again (same names and addresses): traffic flows again within a few
/// seconds, `link up`.
fn interface_deleted_and_recreated(test: &str, short: &str, kind: Kind) {
    let Some(mut env) = Env::new(test, short, TOOLS, &NAMES) else {
        return;
    };
    if kind == Kind::AfXdp && !af_xdp_supported() {
        eprintln!("SKIP {test}: no AF_XDP sockets in this kernel");
        return;
    }
    let _slot = slot();
    let s = env.netns("s");
    let mut hosts = Vec::new();
    for (i, h) in ["a", "b", "c"].iter().enumerate() {
        let ns = env.netns(h);
        let (hi, si) = (env.ifname(&format!("h{h}")), env.ifname(&format!("s{h}")));
        veth(&hi, &ns, &si, &s);
        host_if(&ns, &hi, &format!("10.234.0.{}/24", i + 1), kind);
        hosts.push((ns, hi, si));
    }
    let [(a, ha, sa), (b, _, sb), (c, _, sc)] = &hosts[..] else {
        unreachable!()
    };
    let cfg = env.write(
        "sw.toml",
        &config(
            &["actions=NORMAL"],
            &[
                port("p1", kind.name(), &[("ifname", sa), ("netns", &s)], ""),
                port("p2", kind.name(), &[("ifname", sb), ("netns", &s)], ""),
                port("p3", kind.name(), &[("ifname", sc), ("netns", &s)], ""),
            ],
        ),
    );
    let mut sw = Switch::start(&env, &cfg);
    ping(a, "10.234.0.2", 3).unwrap();
    ping(b, "10.234.0.3", 3).unwrap();
    let small = env.data_file("small", 4 << 20);

    for round in 1..=2 {
        // Deleting one end deletes the pair: the switch's end goes too.
        must(&["ip", "-n", a, "link", "del", ha]);
        let t = Instant::now();
        let mut st = String::new();
        let down = wait_until(Duration::from_secs(3), || {
            st = sw.ctl_ok(&["port/stats", "p1"]);
            st.contains("link down")
        });
        assert!(down, "round {round}: {st}");
        eprintln!(
            "{test}: round {round}: link down reported after {:.0} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        let show = sw.ctl_ok(&["dpctl/show", "-s"]);
        assert!(
            show.contains("port 1: p1") && show.contains("port 3: p3"),
            "{show}"
        );
        ping(b, "10.234.0.3", 3).unwrap_or_else(|e| panic!("B and C with p1 gone: {e}"));
        ping(c, "10.234.0.2", 3).unwrap_or_else(|e| panic!("C and B with p1 gone: {e}"));

        // The pair again, same names and address (a new Ethernet address, a new index).
        veth(ha, a, sa, &s);
        host_if(a, ha, "10.234.0.1/24", kind);
        let t = Instant::now();
        let took = first_answer(a, "10.234.0.2", t, Duration::from_secs(10));
        let Some(took) = took else {
            panic!(
                "round {round}: A cannot reach B 10 s after its interface came back\n{}\n{}",
                sw.ctl_ok(&["port/stats", "p1"]),
                sw.log()
            );
        };
        eprintln!(
            "{test}: round {round}: A reaches B {:.0} ms after its veth pair came back",
            took.as_secs_f64() * 1e3
        );
        assert!(took < Duration::from_secs(5), "{took:?}");
        let st = sw.ctl_ok(&["port/stats", "p1"]);
        assert!(st.contains("link up"), "{st}");
        ping(c, "10.234.0.1", 3).unwrap();
        tcp_transfer(&env, &small, a, c, "10.234.0.3", 5200 + round)
            .unwrap_or_else(|e| panic!("round {round}: TCP A to C: {e}"));
        let st = sw.ctl_ok(&["port/stats", "p1"]);
        eprintln!("{test}: round {round}: {st}");
        assert!(
            number(&st, "total", "errors:").unwrap() >= round as u64,
            "the loss of the interface is counted: {st}"
        );
    }
    sw.stop();
}

#[test]
fn afpacket_interface_deleted_and_recreated() {
    interface_deleted_and_recreated(
        "afpacket_interface_deleted_and_recreated",
        "ld",
        Kind::AfPacket,
    );
}

#[test]
fn afxdp_interface_deleted_and_recreated() {
    interface_deleted_and_recreated("afxdp_interface_deleted_and_recreated", "lx", Kind::AfXdp);
}

// ---- 5. bad configuration --------------------------------------------------------------------

/// Bad options are reported by `check-config` naming the port and the option (no root
/// needed); a port on an interface or namespace that does not exist makes `run` fail with a
/// message naming it, an exit code of 1 and no panic, and what it had opened before is closed.
#[test]
fn bad_kernel_port_configuration_is_reported() {
    let test = "bad_kernel_port_configuration_is_reported";
    let (dir, _rm) = common::scratch_dir("flowpath-netns-bc");

    for (kind, options, want) in [
        (
            "afpacket",
            "ifname = \"x\", n_rxq = \"x\"",
            "n_rxq: 'x' is not a number",
        ),
        (
            "afpacket",
            "ifname = \"x\", n_rxq = 0",
            "n_rxq: 0 is not between 1 and 64",
        ),
        (
            "afpacket",
            "ifname = \"x\", bogus = 1",
            "unknown option 'bogus' for type afpacket",
        ),
        (
            "afpacket",
            "ifname = \"x\", qdisc_bypass = \"maybe\"",
            "qdisc_bypass",
        ),
        (
            "afxdp",
            "ifname = \"x\", xdp_mode = \"turbo\"",
            "xdp_mode=turbo",
        ),
        ("afxdp", "ifname = \"x\", zero_copy = \"x\"", "zero_copy=x"),
        (
            "afxdp",
            "ifname = \"x\", bogus = 1",
            "unknown afxdp option 'bogus'",
        ),
        (
            "tap",
            "ifname = \"x\", csum_offload = \"x\"",
            "csum_offload",
        ),
        (
            "tap",
            "ifname = \"x\", bogus = 1",
            "unknown option 'bogus' for type tap",
        ),
    ] {
        let (code, err) = common::check_config(&dir, "p1", kind, options);
        assert_eq!(code, Some(1), "{kind} {{ {options} }}: {err}");
        assert!(
            err.contains("line 7: port 'p1': ") && err.contains(want),
            "{kind} {{ {options} }}: {err}"
        );
    }
    // Good options of every type pass without anything being opened.
    for (kind, options) in [
        (
            "afpacket",
            "ifname = \"nosuch0\", n_rxq = 2, netns = \"nosuch\", qdisc_bypass = false",
        ),
        (
            "afxdp",
            "ifname = \"nosuch0\", n_rxq = 1, xdp_mode = \"generic\", zero_copy = \"false\"",
        ),
        (
            "tap",
            "ifname = \"nosuch0\", netns = \"nosuch\", csum_offload = false",
        ),
    ] {
        let (code, err) = common::check_config(&dir, "p1", kind, options);
        assert_eq!(code, Some(0), "{kind} {{ {options} }}: {err}");
    }

    if !is_root() {
        eprintln!("SKIP {test} (run part): needs root");
        return;
    }
    let Some(mut env) = Env::new(test, "bc", &["ip"], &NAMES) else {
        return;
    };
    let missing = env.ifname("no");
    let nons = format!("fpe-{}-nosuch", env.tag);
    let one = |kind: &str, opts: &[(&str, &str)]| {
        config(&["actions=NORMAL"], &[port("p1", kind, opts, "")])
    };
    for (cfg, want) in [
        (
            one("afpacket", &[("ifname", &missing)]),
            format!("port p1 (afpacket): no interface '{missing}'"),
        ),
        (
            one("afpacket", &[("ifname", &missing), ("netns", &nons)]),
            format!("network namespace '{nons}'"),
        ),
        (
            one("afxdp", &[("ifname", &missing)]),
            format!("'{missing}'"),
        ),
        (
            one("tap", &[("ifname", &missing), ("netns", &nons)]),
            format!("network namespace '{nons}'"),
        ),
    ] {
        let (code, err) = common::run_fails(&env.dir, &cfg);
        assert_eq!(code, Some(1), "{cfg}\n{err}");
        assert!(err.contains(&want), "{cfg}\nwanted '{want}' in: {err}");
        assert!(err.lines().count() <= 3, "a short message: {err}");
    }

    // Ports opened before the one that fails are closed again: no XDP program left on the
    // veth, no AF_PACKET socket.
    let s = env.netns("s");
    let (x, y) = (env.ifname("sx"), env.ifname("sy"));
    veth(&x, &s, &y, &s);
    let cfg = config(
        &["actions=NORMAL"],
        &[
            port("p0", "afxdp", &[("ifname", &x), ("netns", &s)], ""),
            port("p1", "afpacket", &[("ifname", &missing), ("netns", &s)], ""),
        ],
    );
    let (code, err) = common::run_fails(&env.dir, &cfg);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("no interface '{missing}'")), "{err}");
    let link = must(&["ip", "-n", &s, "-d", "link", "show", &x]);
    assert!(
        !link.contains("prog/xdp"),
        "XDP program left attached: {link}"
    );
}

/// `check-config` checks option values of every kernel port type without opening anything, as
/// it does for afpacket (`n_rxq = 0` is refused there).
#[test]
fn check_config_checks_afxdp_and_tap_values() {
    let dir = std::env::temp_dir().join(format!("flowpath-netns-{}cv", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut wrong = Vec::new();
    for (kind, options) in [
        ("afxdp", "ifname = \"x\", n_rxq = 0"),
        ("afxdp", "ifname = \"x\", frame_size = 1000"),
        ("afxdp", "ifname = \"x\", ring_size = 1000"),
        ("afxdp", "ifname = \"x\", n_frames = 7"),
        (
            "afxdp",
            "ifname = \"x\", xdp_mode = \"generic\", zero_copy = \"true\"",
        ),
        ("tap", "ifname = \"x\", n_rxq = 0"),
        ("tap", "ifname = \"x\", n_rxq = 65"),
        ("afpacket", "ifname = \"abcdefghijklmnop\""),
        ("afxdp", "ifname = \"x\", netns = \"a/b\""),
        ("tap", "ifname = \"x\", netns = \"..\""),
    ] {
        let (code, err) = common::check_config(&dir, "p1", kind, options);
        if code != Some(1) || !err.contains("port 'p1'") {
            wrong.push(format!("{kind} {{ {options} }}: exit {code:?} {err}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wrong.is_empty(), "accepted:\n{}", wrong.join("\n"));
}
