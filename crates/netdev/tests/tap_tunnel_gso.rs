//! UDP-tunnel GSO on `tap` ports (Linux 6.17 and later: `TUN_F_UDP_TUNNEL_GSO`), against the
//! kernel's own VXLAN device. Needs root (and `ip netns`): as any other user the tests print
//! `SKIP` and return; on a kernel that refuses the offload too.
//!
//! Sending: a TCP sender (or a `UDP_SEGMENT` one) in namespace A behind tap `a`; a PMD pushes
//! VXLAN onto what comes in (TCP or UDP super-frames, pushed whole) and outputs it to tap `b`,
//! whose namespace B holds a kernel VXLAN device and the receiver behind it. The super-frames
//! must reach B whole (the port's "super-frames tx whole" counter, TCP or UDP) and every byte
//! (every datagram) arrive, with no checksum error counted by B's stack. The receiver's ACKs
//! take a veth from B to A (a route for A's address only), so the PMD needs no
//! decapsulation.
//!
//! Receiving: kernel VXLAN devices on both sides of a forwarder between two taps: the sender's
//! kernel hands its tap encapsulated super-frames whole: TCP ones, and UDP ones from a
//! `UDP_SEGMENT` sender, which the port hands on whole (`xstats rx_tnl_gso_whole`,
//! `rx_tnl_uso_whole`, none cut: `rx_tnl_gso_cut`) and the other tap takes whole.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use datapath::dpif::parse_megaflow;
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::Port;
use datapath::tx_gso::TxGsoStats;
use netdev::tap::{TapOptions, TapPort};

mod common;
use common::*;

fn tap(name: &str, ifname: &str, netns: &str) -> TapPort {
    let o = TapOptions {
        ifname: Some(ifname.to_owned()),
        netns: Some(netns.to_owned()),
        ..Default::default()
    };
    TapPort::open(name, &o).unwrap_or_else(|e| panic!("open tap {ifname}: {e}"))
}

/// Two namespaces with a tap each (`a` in the first).
struct Setup {
    env: Env,
    ns: [String; 2],
    ifs: [String; 2],
    pa: TapPort,
    pb: TapPort,
}

/// The [`Setup`], or `None` with a SKIP line: not root, no `/dev/net/tun`, no python, or a
/// kernel without UDP-tunnel GSO on taps.
fn setup(test: &str) -> Option<Setup> {
    let mut env = Env::new(test)?;
    if !std::path::Path::new("/dev/net/tun").exists() {
        eprintln!("SKIP {test}: no /dev/net/tun");
        return None;
    }
    if !need(test, &[python()]) {
        return None;
    }
    let ns = [env.netns("ga"), env.netns("gb")];
    let ifs = [env.ifname("ga"), env.ifname("gb")];
    let pa = tap("a", &ifs[0], &ns[0]);
    let pb = tap("b", &ifs[1], &ns[1]);
    if !pa.tunnel_gso() || !pb.tunnel_gso() {
        eprintln!("SKIP {test}: the kernel's tap takes no UDP-tunnel GSO (Linux 6.17 and later)");
        return None;
    }
    Some(Setup {
        env,
        ns,
        ifs,
        pa,
        pb,
    })
}

/// A kernel VXLAN device `dev` in `ns` (VNI 100, port 4789, over `local` to `remote`, the
/// outer UDP checksum on or off) with MAC `mac` and address `addr`/24.
fn vxlan(ns: &str, dev: &str, local: &str, remote: &str, csum: bool, mac: &str, addr: &str) {
    let c = if csum { "udpcsum" } else { "noudpcsum" };
    ns_sh(
        ns,
        &[
            "ip", "link", "add", dev, "address", mac, "type", "vxlan", "id", "100", "local", local,
            "remote", remote, "dstport", "4789", c,
        ],
    );
    ns_sh(ns, &["ip", "addr", "add", addr, "dev", dev]);
    ns_sh(ns, &["ip", "link", "set", dev, "up"]);
}

/// In each of namespaces `ns`, on its tap of `ifs`: the underlay address 172.31.NET.N/24 and
/// a kernel VXLAN device (outer checksum on) to the other's, with host address 10.NET.0.N/24.
fn kernel_vteps(ns: [&str; 2], ifs: [&str; 2], net: u8) {
    for n in 0..2 {
        let (me, peer) = (
            format!("172.31.{net}.{}", n + 1),
            format!("172.31.{net}.{}", 2 - n),
        );
        ns_sh(
            ns[n],
            &["ip", "addr", "add", &format!("{me}/24"), "dev", ifs[n]],
        );
        let mac = format!("02:00:00:00:{net}:{:02}", n + 1);
        let addr = format!("10.{net}.0.{}/24", n + 1);
        vxlan(ns[n], "vx", &me, &peer, true, &mac, &addr);
    }
}

/// The `InCsumErrors` of namespace `ns`'s IPv4 UDP and TCP (`/proc/net/snmp`).
fn csum_errors(ns: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    let mut sum = 0;
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let field = names.split_whitespace().position(|n| n == "InCsumErrors");
        if let Some(i) = field {
            sum += values
                .split_whitespace()
                .nth(i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    sum
}

/// The `tnl_push` of VXLAN VNI 100 from 172.31.81.1 to 172.31.81.2 (Ethernet to `dst`), the
/// outer UDP checksum on or off.
fn push(dst: &str, csum: bool) -> String {
    let csum = if csum { "0xffff" } else { "0x0" };
    format!(
        "tnl_push(tnl_port(9),header(size=50,type=4,eth(dst={dst},src=02:00:00:00:81:01,\
         dl_type=0x0800),ipv4(src=172.31.81.1,dst=172.31.81.2,proto=17,tos=0,ttl=64,\
         frag=0x4000),udp(src=0,dst=4789,csum={csum}),vxlan(flags=0x8000000,vni=0x64)),\
         out_port(0))"
    )
}

/// A PMD thread: what tap `a` receives goes to tap `b` with VXLAN pushed (`actions`); `b`'s
/// super-frame counters in `gso`.
fn start_pmd(
    pa: &mut TapPort,
    pb: &mut TapPort,
    actions: &str,
    gso: Arc<TxGsoStats>,
) -> (Arc<AtomicBool>, thread::JoinHandle<()>) {
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: pa.take_rxq(0, 1).unwrap(),
        cycles: 0,
    });
    pmd.add_txq(1, pa.open_txq());
    pmd.add_port_txq_counted(2, pb.open_txq(), None, gso);
    let mut names = flow::odp::PortNames::new();
    names.insert("a", 1);
    names.insert("b", 2);
    let k = "in_port(a),eth_type(0x0800),ipv4(frag=no)";
    pmd.add_flow(parse_megaflow(&names, k, actions).unwrap())
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            if pmd.poll_once() == 0 {
                thread::sleep(Duration::from_micros(50));
            }
        }
    });
    (stop, thread)
}

fn super_frames_go_whole_into_a_kernel_vxlan(test: &str, csum: bool) {
    super_frames_of_a_kind_go_whole_into_a_kernel_vxlan(test, csum, false);
}

/// The sending test (module documentation): TCP super-frames, or UDP ones (`udp`).
fn super_frames_of_a_kind_go_whole_into_a_kernel_vxlan(test: &str, csum: bool, udp: bool) {
    let Some(Setup {
        mut env,
        ns: [na, nb],
        ifs: [ta, tb],
        mut pa,
        mut pb,
    }) = setup(test)
    else {
        return;
    };
    // A: the sender on tap a (MTU 1450: VXLAN adds 50); B: tap b with the underlay address
    // and the VXLAN device with the receiver's.
    ns_sh(&na, &["ip", "link", "set", &ta, "mtu", "1450"]);
    ns_sh(&na, &["ip", "addr", "add", "10.81.0.1/24", "dev", &ta]);
    let vx_mac = "02:00:00:00:81:02";
    let neigh = [
        "ip",
        "neigh",
        "add",
        "10.81.0.2",
        "lladdr",
        vx_mac,
        "dev",
        &ta,
    ];
    ns_sh(&na, &neigh);
    let tb_mac = "02:00:00:00:81:22";
    ns_sh(&nb, &["ip", "link", "set", &tb, "address", tb_mac]);
    ns_sh(&nb, &["ip", "addr", "add", "172.31.81.2/24", "dev", &tb]);
    vxlan(
        &nb,
        "vx",
        "172.31.81.2",
        "172.31.81.1",
        csum,
        vx_mac,
        "10.81.0.2/24",
    );
    // The way back: a veth, A's address routed through it.
    let (va, vb) = (env.ifname("va"), env.ifname("vb"));
    env.veth(&va, Some(&na), &vb, &nb);
    ns_sh(&na, &["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"]);
    ns_sh(
        &na,
        &["sysctl", "-qw", &format!("net.ipv4.conf.{va}.rp_filter=0")],
    );
    ns_sh(&nb, &["ip", "route", "add", "10.81.0.1/32", "dev", &vb]);
    let gso = Arc::new(TxGsoStats::default());
    let actions = format!("{},b", push(tb_mac, csum));
    let (stop, pmd) = start_pmd(&mut pa, &mut pb, &actions, gso.clone());
    let r = std::panic::catch_unwind(|| {
        if udp {
            udp_datagrams_all_arrive(&na, &nb, "10.81.0.2");
        } else {
            ping_and_tcp(&na, &nb, "10.81.0.2", 16 << 20);
        }
    });
    stop.store(true, Ordering::Relaxed);
    pmd.join().unwrap();
    let (ca, cb) = (pa.counters(), pb.counters());
    let (whole, segmented, segments) = if udp { gso.udp.get() } else { gso.get() };
    let kind = if udp { "UDP" } else { "TCP" };
    eprintln!(
        "port a: {ca:?}\nport b: {cb:?}\nb's {kind} super-frames: whole {whole}, segmented \
         {segmented} ({segments} segments)"
    );
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
    assert!(whole > 0, "super-frames went whole");
    assert_eq!(segmented, 0, "and none was cut");
    assert!(
        cb.tx_bytes > 1514 * cb.tx_packets,
        "{} bytes per packet",
        cb.tx_bytes / cb.tx_packets.max(1)
    );
    assert_eq!(cb.tx_dropped + cb.errors + ca.errors, 0);
    assert_eq!(csum_errors(&nb), 0, "B's stack counted checksum errors");
}

/// A `UDP_SEGMENT` sender in `na` to the receiver at `dst` in `nb`: every datagram arrives,
/// in order.
fn udp_datagrams_all_arrive(na: &str, nb: &str, dst: &str) {
    let (client, server) = udp_segment_exchange(na, nb, dst);
    let (c, s) = (
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&server.stdout),
    );
    assert!(client.status.success(), "client: {c}");
    assert!(c.starts_with("360 "), "{c}");
    assert_eq!(
        s.trim(),
        c.trim(),
        "the receiver got every datagram, in order"
    );
}

#[test]
fn udp_super_frames_go_whole_into_a_kernel_vxlan_with_the_outer_checksum() {
    super_frames_of_a_kind_go_whole_into_a_kernel_vxlan(
        "udp_super_frames_go_whole_into_a_kernel_vxlan_with_the_outer_checksum",
        true,
        true,
    );
}

#[test]
fn udp_super_frames_go_whole_into_a_kernel_vxlan_without_the_outer_checksum() {
    super_frames_of_a_kind_go_whole_into_a_kernel_vxlan(
        "udp_super_frames_go_whole_into_a_kernel_vxlan_without_the_outer_checksum",
        false,
        true,
    );
}

#[test]
fn tcp_super_frames_go_whole_into_a_kernel_vxlan_with_the_outer_checksum() {
    super_frames_go_whole_into_a_kernel_vxlan(
        "tcp_super_frames_go_whole_into_a_kernel_vxlan_with_the_outer_checksum",
        true,
    );
}

#[test]
fn tcp_super_frames_go_whole_into_a_kernel_vxlan_without_the_outer_checksum() {
    super_frames_go_whole_into_a_kernel_vxlan(
        "tcp_super_frames_go_whole_into_a_kernel_vxlan_without_the_outer_checksum",
        false,
    );
}

/// The kernel's count of packets sent on `dev` in `ns` (to the tap's reader, for a tap).
fn kernel_tx_packets(ns: &str, dev: &str) -> u64 {
    let path = format!("/sys/class/net/{dev}/statistics/tx_packets");
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", &path])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Tap `p`'s extended statistic `name`.
fn xstat(p: &TapPort, name: &str) -> u64 {
    p.xstats()
        .into_iter()
        .find(|(k, _)| k == name)
        .map_or(0, |(_, v)| v)
}

#[test]
fn encapsulated_super_frames_from_the_kernel_are_kept_whole_on_receive() {
    let test = "encapsulated_super_frames_from_the_kernel_are_kept_whole_on_receive";
    let Some(Setup {
        env: _env,
        ns: [na, nb],
        ifs: [ta, tb],
        mut pa,
        mut pb,
    }) = setup(test)
    else {
        return;
    };
    kernel_vteps([&na, &nb], [&ta, &tb], 82);
    let fwd = Forwarder::start(&mut pa, &mut pb);
    let r = std::panic::catch_unwind(|| ping_and_tcp(&na, &nb, "10.82.0.2", 16 << 20));
    drop(fwd);
    let (ca, cb) = (pa.counters(), pb.counters());
    let handed = kernel_tx_packets(&na, &ta);
    eprintln!("port a: {ca:?}\nport b: {cb:?}\nA's kernel handed tap a {handed} packets");
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
    // Each frame the kernel handed over went on as one packet: the super-frames whole,
    // counted, and written whole into tap b (which takes UDP-tunnel GSO).
    assert_eq!(
        ca.rx_packets, handed,
        "one packet for each frame handed over"
    );
    let whole = xstat(&pa, "rx_tnl_gso_whole");
    assert!(whole > 0, "super-frames kept whole: {:?}", pa.xstats());
    assert!(
        cb.tx_bytes > 1514 * cb.tx_packets,
        "{} bytes per packet",
        cb.tx_bytes / cb.tx_packets.max(1)
    );
    assert_eq!(ca.rx_dropped + ca.errors + cb.errors + cb.tx_dropped, 0);
    assert_eq!(csum_errors(&nb), 0, "B's stack counted checksum errors");
}

#[test]
fn encapsulated_udp_super_frames_from_the_kernel_are_kept_whole_on_receive() {
    let test = "encapsulated_udp_super_frames_from_the_kernel_are_kept_whole_on_receive";
    let Some(Setup {
        env: _env,
        ns: [na, nb],
        ifs: [ta, tb],
        mut pa,
        mut pb,
    }) = setup(test)
    else {
        return;
    };
    kernel_vteps([&na, &nb], [&ta, &tb], 83);
    let fwd = Forwarder::start(&mut pa, &mut pb);
    // The first datagrams resolve the neighbours (ARP on both layers): a ping first.
    let ping = Command::new("ip")
        .args(["netns", "exec", &na, python(), "-c", PING, "10.83.0.2"])
        .output()
        .unwrap();
    assert!(ping.status.success(), "ping over VXLAN");
    let handed0 = kernel_tx_packets(&na, &ta);
    let rx0 = pa.counters().rx_packets;
    let (client, server) = udp_segment_exchange(&na, &nb, "10.83.0.2");
    drop(fwd);
    let (ca, cb) = (pa.counters(), pb.counters());
    let handed = kernel_tx_packets(&na, &ta) - handed0;
    let got = ca.rx_packets - rx0;
    eprintln!(
        "port a: {ca:?}\nport b: {cb:?}\nA's kernel handed tap a {handed} packets, {got} came out"
    );
    let (c, s) = (
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&server.stdout),
    );
    assert!(client.status.success(), "client: {c}");
    assert!(c.starts_with("360 "), "{c}");
    assert_eq!(
        s.trim(),
        c.trim(),
        "the receiver got every datagram, in order"
    );
    // Each frame the kernel handed over went on as one packet, the super-frames counted and
    // written whole into tap b (which takes UDP-tunnel GSO).
    assert!(handed < 100, "super-frames came in whole: {handed} frames");
    assert_eq!(got, handed, "one packet for each frame handed over");
    let whole = xstat(&pa, "rx_tnl_uso_whole");
    assert!(whole > 0, "super-frames kept whole: {:?}", pa.xstats());
    assert_eq!(xstat(&pa, "rx_tnl_gso_cut"), 0, "none cut");
    assert!(
        cb.tx_bytes > 1514 * cb.tx_packets,
        "{} bytes per packet",
        cb.tx_bytes / cb.tx_packets.max(1)
    );
    assert_eq!(ca.rx_dropped + ca.errors + cb.errors + cb.tx_dropped, 0);
    assert_eq!(csum_errors(&nb), 0, "B's stack counted checksum errors");
}
