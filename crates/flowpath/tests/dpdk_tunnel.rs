//! TCP super-frames through a VXLAN push out of a `dpdk` port (cargo feature `dpdk`): host a
//! behind a flowpath `tap` port (which takes the kernel's TCP super-frames), a VXLAN tunnel to
//! host b, whose kernel VXLAN device sits on the interface of DPDK's `net_tap` behind the
//! switch's `dpdk` port. The super-frames are encapsulated whole and cut at the `dpdk` port's
//! output (DPDK 22.11's `net_tap` takes TCP segmentation but not tunnel segmentation: its
//! `tx_offload_capa` has no `VXLAN_TNL_TSO`, and its GSO library context is made for plain
//! TCP only). TCP over IPv4 and over IPv6 inside the tunnel. What reaches b's interface is
//! captured: every frame fits the MTU and has right outer IPv4, outer UDP (or none), inner
//! IPv4 and inner TCP checksums, and b's kernel counts no checksum error. DPDK runs on ordinary memory (`--no-huge`). Without root or a tool, the
//! test prints SKIP and returns.
#![cfg(feature = "dpdk")]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::netns::{Env, Names, in_ns, must, ping, tcp_transfer, wait_until};
use common::{Reap, csum, ctl, start_switch};

static NAMES: Names = Names {
    netns: "fpdt",
    dir: "flowpath-dpdk-tnl",
    root_for: "DPDK's EAL, network namespaces",
    ifname_max: 15,
};

/// The switch's underlay bridge: its address and Ethernet address; host b's underlay address
/// and Ethernet address (on the `net_tap` interface).
const PHY_IP: &str = "10.80.0.1";
const PHY_MAC: &str = "02:00:00:80:00:01";
const B_IP: &str = "10.80.0.2";
const B_MAC: &str = "02:00:00:80:00:02";

/// The sum of an IPv4 (or, with `ipv6`, IPv6) pseudo-header for L4 protocol `proto` and
/// `l4_len` bytes.
fn pseudo(ip: &[u8], proto: u8, l4_len: usize) -> u32 {
    let addrs = if ip[0] >> 4 == 6 {
        &ip[8..40]
    } else {
        &ip[12..20]
    };
    addrs
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum::<u32>()
        + u32::from(proto)
        + l4_len as u32
}

/// Checks one captured VXLAN frame from the switch: within the MTU, every checksum right.
/// The inner TCP payload length (0 for what is not TCP over IPv4 or IPv6 inside).
fn check_vxlan_frame(f: &[u8], mtu: usize) -> Result<usize, String> {
    if f.len() > 14 + mtu {
        return Err(format!("{} bytes: over the MTU", f.len()));
    }
    let ip = &f[14..34];
    if csum(ip, 0) != 0 {
        return Err("outer IPv4 header checksum".into());
    }
    let udp = &f[34..];
    if u16::from_be_bytes([ip[2], ip[3]]) as usize != f.len() - 14 {
        return Err("outer IPv4 total length".into());
    }
    if u16::from_be_bytes([udp[4], udp[5]]) as usize != udp.len() {
        return Err("outer UDP length".into());
    }
    if udp[6..8] != [0, 0] && csum(udp, pseudo(ip, 17, udp.len())) != 0 {
        return Err("outer UDP checksum".into());
    }
    let inner = &udp[16..];
    let (iip, total, proto) = match inner[12..14] {
        [8, 0] => {
            let iip = &inner[14..34];
            if csum(iip, 0) != 0 {
                return Err("inner IPv4 header checksum".into());
            }
            (
                iip,
                usize::from(u16::from_be_bytes([iip[2], iip[3]])),
                iip[9],
            )
        }
        [0x86, 0xdd] => {
            let iip = &inner[14..54];
            (
                iip,
                40 + usize::from(u16::from_be_bytes([iip[4], iip[5]])),
                iip[6],
            )
        }
        _ => return Ok(0),
    };
    if proto != 6 {
        return Ok(0);
    }
    if 14 + total != inner.len() {
        return Err("inner IP length".into());
    }
    let tcp = &inner[14 + iip.len()..];
    if csum(tcp, pseudo(iip, 6, tcp.len())) != 0 {
        return Err("inner TCP checksum".into());
    }
    Ok(tcp.len() - usize::from(tcp[12] >> 4) * 4)
}

/// `Tcp: InCsumErrors` and `Udp: InCsumErrors` of namespace `ns`'s `/proc/net/snmp`.
fn csum_errors(ns: &str) -> Vec<(String, u64)> {
    let snmp = must(&in_ns(ns, &["cat", "/proc/net/snmp"]));
    let lines: Vec<&str> = snmp.lines().collect();
    let mut out = Vec::new();
    for pair in lines.windows(2) {
        let (names, values) = (pair[0], pair[1]);
        let proto = names.split(':').next().unwrap_or("");
        if !matches!(proto, "Tcp" | "Udp") || !values.starts_with(&format!("{proto}:")) {
            continue;
        }
        let k = names.split_whitespace().position(|w| w == "InCsumErrors");
        if let Some(k) = k {
            let v = values.split_whitespace().nth(k).unwrap().parse().unwrap();
            out.push((proto.to_owned(), v));
        }
    }
    out
}

#[test]
fn tcp_super_frames_pushed_into_vxlan_are_cut_at_a_net_tap_dpdk_port() {
    let test = "tcp_super_frames_pushed_into_vxlan_are_cut_at_a_net_tap_dpdk_port";
    let Some(mut env) = Env::new(
        test,
        "vx",
        &["ip", "ping", "nc", "ss", "tcpdump", "cat", "sysctl"],
        &NAMES,
    ) else {
        return;
    };
    if !std::path::Path::new("/dev/net/tun").exists() {
        eprintln!("SKIP {test}: no /dev/net/tun");
        return;
    }
    let (na, nb) = (env.netns("a"), env.netns("b"));
    let (ta, tb, vb) = (env.ifname("ta"), env.ifname("dv"), env.ifname("vx"));
    let tag = &env.tag;
    let cfg = env.write(
        "sw.toml",
        &format!(
            r#"
[datapath]
dpdk-init = true
dpdk-extra = "--no-huge --no-pci --log-level=lib.eal:warning"
dpdk-socket-mem = "512"

[[bridge]]
name = "br-phy"
hwaddr = "{PHY_MAC}"
ip = ["{PHY_IP}/24"]
flows = ["actions=NORMAL"]

[[bridge.port]]
name = "phy"
type = "dpdk"
options = {{ dpdk-devargs = "net_tap_{tag},iface={tb}", n_rxq_desc = 256, n_txq_desc = 256 }}

[[bridge]]
name = "br-int"
flows = ["in_port=ta actions=set_field:100->tun_id,output:vxlan0",
         "in_port=vxlan0 actions=output:ta"]

[[bridge.port]]
name = "ta"
type = "tap"
options = {{ ifname = "{ta}", netns = "{na}" }}

[[bridge.port]]
name = "vxlan0"
type = "vxlan"
options = {{ remote_ip = "{B_IP}", key = "flow" }}

[tunnel]
neigh = ["br-phy {B_IP} {B_MAC}"]
"#
        ),
    );
    let rundir = env.path("run");
    let _switch = start_switch(&cfg, &rundir);
    let show = String::from_utf8_lossy(&ctl(&rundir, &["dpif/show"]).stdout).into_owned();
    assert!(show.contains("tx_tso_offload=true"), "{show}");
    assert!(
        wait_until(Duration::from_secs(10), || std::path::Path::new(
            "/sys/class/net"
        )
        .join(&tb)
        .exists()),
        "no {tb}"
    );
    // Host b: the net_tap interface as its underlay, a kernel VXLAN device over it.
    must(&["ip", "link", "set", &tb, "netns", &nb]);
    must(&in_ns(&nb, &["ip", "link", "set", &tb, "address", B_MAC]));
    must(&in_ns(
        &nb,
        &["ip", "addr", "add", &format!("{B_IP}/24"), "dev", &tb],
    ));
    must(&in_ns(&nb, &["ip", "link", "set", &tb, "up"]));
    must(&in_ns(
        &nb,
        &[
            "ip", "neigh", "replace", PHY_IP, "lladdr", PHY_MAC, "dev", &tb,
        ],
    ));
    must(&in_ns(
        &nb,
        &[
            "ip", "link", "add", &vb, "type", "vxlan", "id", "100", "remote", PHY_IP, "local",
            B_IP, "dstport", "4789", "dev", &tb,
        ],
    ));
    must(&in_ns(
        &nb,
        &["ip", "addr", "add", "10.81.0.2/24", "dev", &vb],
    ));
    must(&in_ns(&nb, &["ip", "link", "set", &vb, "up"]));
    // Host a: its segments must fit the tunnel (1450 bytes inside 1500).
    assert!(wait_until(Duration::from_secs(10), || {
        must(&in_ns(&na, &["ip", "-o", "link"])).contains(&ta)
    }));
    must(&in_ns(&na, &["ip", "link", "set", &ta, "mtu", "1450"]));
    must(&in_ns(
        &na,
        &["ip", "addr", "add", "10.81.0.1/24", "dev", &ta],
    ));
    must(&in_ns(&na, &["ip", "link", "set", &ta, "up"]));
    ping(&na, "10.81.0.2", 3).unwrap();
    // IPv6 inside the tunnel too (the namespaces have it off by default).
    for (ns, dev, addr) in [(&na, &ta, "fd81::1/64"), (&nb, &vb, "fd81::2/64")] {
        let knob = format!("net.ipv6.conf.{dev}.disable_ipv6=0");
        must(&in_ns(ns, &["sysctl", "-qw", &knob]));
        must(&in_ns(
            ns,
            &["ip", "addr", "add", addr, "dev", dev, "nodad"],
        ));
    }
    ping(&na, "fd81::2", 3).unwrap();

    let before = csum_errors(&nb);
    let cap = env.path("b.pcap");
    let cap_s = cap.to_str().unwrap().to_owned();
    let filter = format!("udp dst port 4789 and src host {PHY_IP}");
    let dump = Reap(
        Command::new("ip")
            .args(["netns", "exec", &nb, "tcpdump", "-i", &tb, "-U", "-s", "0"])
            .args(["-B", "16384"])
            .args(["-w", &cap_s, &filter])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(env.path("tcpdump.err")).unwrap())
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_until(Duration::from_secs(5), || cap.exists()),
        "tcpdump"
    );
    std::thread::sleep(Duration::from_millis(300));
    let bytes = 2 << 20;
    let src = env.data_file("bulk", bytes);
    let stats =
        |p: &str| String::from_utf8_lossy(&ctl(&rundir, &["port/stats", p]).stdout).into_owned();
    for (to, port) in [("10.81.0.2", 5001), ("fd81::2", 5002)] {
        tcp_transfer(&env, &src, &na, &nb, to, port)
            .unwrap_or_else(|e| panic!("{e}\n{}{}", stats("ta"), stats("phy")));
    }
    // libpcap hands over its ring's blocks when full or after its 1 s timeout: the last
    // frames are written once it has passed.
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill has no memory preconditions; the pid is the test's own tcpdump (`ip
    // netns exec` execs it), still running until reaped below.
    unsafe { libc::kill(dump.0.id() as i32, libc::SIGINT) };
    let mut dump = dump;
    dump.wait(Duration::from_secs(5)).unwrap();

    let frames = netdev::pcap::read_file(&cap).unwrap();
    let mut payload = 0;
    for (i, r) in frames.iter().enumerate() {
        payload += check_vxlan_frame(&r.data, 1500)
            .unwrap_or_else(|e| panic!("frame {i} of {}: {e}", frames.len()));
    }
    let err = std::fs::read_to_string(env.path("tcpdump.err")).unwrap_or_default();
    assert!(
        payload >= 2 * bytes as usize,
        "{payload} payload bytes captured\n{err}"
    );
    assert_eq!(csum_errors(&nb), before, "host b's checksum errors");
    // The super-frames crossed the push whole and were cut at the dpdk port.
    let phy = stats("phy");
    let line = phy
        .lines()
        .find(|l| l.contains("tcp super-frames tx"))
        .unwrap_or_else(|| panic!("no super-frames went out by phy:\n{phy}"));
    let n = |field: &str| -> u64 {
        let rest = &line[line.find(field).unwrap() + field.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    eprintln!(
        "{} frames captured, {payload} payload bytes; {}",
        frames.len(),
        line.trim()
    );
    assert_eq!(n("whole:"), 0, "{line}");
    assert!(
        n("segmented:") > 0 && n("segments:") > n("segmented:"),
        "{line}"
    );
    let total = phy.lines().find(|l| l.contains("total")).unwrap();
    let tx = &total[total.find("tx packets:").unwrap()..];
    assert!(
        tx.contains(" dropped:0 ") && tx.ends_with("errors:0"),
        "{phy}"
    );
}
