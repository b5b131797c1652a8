//! Tunnels from the command line: the L3-VPN over VXLAN configuration run over captures in
//! both directions (decapsulated frames exact; encapsulated frames checked field by field and
//! checksum), GENEVE with a TLV-mapped option and GRE carrying MPLS, the `tnl/*` commands, a
//! tunnel port added at run time, and bad tunnel packets counted as drops.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::csum;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_flowpath")
}

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("flowpath-tnl-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const PHY_MAC: [u8; 6] = [0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0];
const PEER_MAC: [u8; 6] = [0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48];

/// Ethernet + IPv4 (checksummed) + `l4` with protocol `proto`.
fn ipv4(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    l4: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[8, 0]);
    let len = (20 + l4.len()) as u16;
    let mut ip = vec![
        0x45,
        0,
        (len >> 8) as u8,
        len as u8,
        0,
        1,
        0,
        0,
        64,
        proto,
        0,
        0,
    ];
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = csum(&ip, 0);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(l4);
    f
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut u = Vec::new();
    for v in [sport, dport, len, 0] {
        u.extend_from_slice(&v.to_be_bytes());
    }
    u.extend_from_slice(payload);
    u
}

/// A tenant frame of the L3-VPN: 192.168.1.(i+1) → 192.168.2.16.
fn tenant(i: u8) -> Vec<u8> {
    ipv4(
        [0x52, 0x54, 0, 0xa0, 0x81, 1],
        [0x52, 0x54, 0, 0xa0, 0x91, 2],
        [192, 168, 1, i + 1],
        [192, 168, 2, 16],
        17,
        &udp(1024 + u16::from(i), 2000, &[i; 18]),
    )
}

/// `inner` in VXLAN (VNI `vni`) from the peer 10.1.2.9 to 10.1.2.8.
fn vxlan(vni: u32, sport: u16, inner: &[u8]) -> Vec<u8> {
    let mut v = vec![0x08, 0, 0, 0];
    v.extend_from_slice(&(vni << 8).to_be_bytes());
    v.extend_from_slice(inner);
    ipv4(
        PEER_MAC,
        PHY_MAC,
        [10, 1, 2, 9],
        [10, 1, 2, 8],
        17,
        &udp(sport, 4789, &v),
    )
}

/// Runs the switch of `d/sw.toml` until its captures are consumed; it must succeed.
fn run_until_idle(d: &Path) {
    let o = Command::new(bin())
        .args([
            "run",
            "--config",
            d.join("sw.toml").to_str().unwrap(),
            "--until-idle",
        ])
        .env("FLOWPATH_RUNDIR", d.join("run"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = netdev::pcap::PcapWriter::create(path).unwrap();
    for f in frames {
        w.write(0, f).unwrap();
    }
    w.finish().unwrap();
}

const L3VPN: &str = r#"[[bridge]]
name = "br-phy"
hwaddr = "8c:dc:d4:ab:5b:f0"
ip = ["10.1.2.8/24"]
flows = ["actions=NORMAL"]

[[bridge.port]]
name = "p0"
type = "pcap"
options = { rx_pcap = "under_in.pcap", tx_pcap = "under_out.pcap" }

[[bridge]]
name = "br-int"
flows = ["in_port=vxlan0,tun_id=100,ip,nw_dst=192.168.2.16 actions=mod_dl_dst:52:54:00:a0:91:99,output:vm0",
         "in_port=vm0 actions=set_field:100->tun_id,output:vxlan0"]

[[bridge.port]]
name = "vxlan0"
type = "vxlan"
options = { remote_ip = "10.1.2.9", key = "flow" }

[[bridge.port]]
name = "vm0"
type = "pcap"
options = { rx_pcap = "vm_in.pcap", tx_pcap = "vm_out.pcap" }

[tunnel]
neigh = ["br-phy 10.1.2.9 8c:dc:d4:ab:58:48"]
"#;

#[test]
fn l3vpn_over_vxlan_both_directions() {
    let d = dir("l3vpn");
    let under: Vec<Vec<u8>> = (0..8)
        .map(|i| vxlan(100, 49152 + u16::from(i), &tenant(i)))
        .collect();
    // The VM's replies: 192.168.2.16 → 192.168.1.x.
    let vm: Vec<Vec<u8>> = (0..5u8)
        .map(|i| {
            ipv4(
                [0x52, 0x54, 0, 0xa0, 0x91, 0x99],
                [0x52, 0x54, 0, 0xa0, 0x81, 1],
                [192, 168, 2, 16],
                [192, 168, 1, i + 1],
                17,
                &udp(2000, 1024 + u16::from(i), &[0x40 + i; 30]),
            )
        })
        .collect();
    write_pcap(&d.join("under_in.pcap"), &under);
    write_pcap(&d.join("vm_in.pcap"), &vm);
    std::fs::write(d.join("sw.toml"), L3VPN).unwrap();
    let o = Command::new(bin())
        .args(["check-config", d.join("sw.toml").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    run_until_idle(&d);

    // Decapsulated: the tenant frames, with the VM's Ethernet address.
    let got = netdev::pcap::read_file(d.join("vm_out.pcap")).unwrap();
    assert_eq!(got.len(), 8);
    for (i, g) in got.iter().enumerate() {
        let mut want = tenant(i as u8);
        want[..6].copy_from_slice(&[0x52, 0x54, 0, 0xa0, 0x91, 0x99]);
        assert_eq!(g.data, want, "frame {i}");
    }
    // Encapsulated: outer Ethernet to the neighbour, IPv4 10.1.2.8 → 10.1.2.9 with DF and a
    // valid checksum, UDP to 4789 from an entropy port, VXLAN VNI 100, the frame unchanged.
    let got = netdev::pcap::read_file(d.join("under_out.pcap")).unwrap();
    assert_eq!(got.len(), 5);
    for (g, inner) in got.iter().zip(&vm) {
        let f = &g.data;
        assert_eq!(f.len(), 50 + inner.len());
        assert_eq!(&f[..6], &PEER_MAC);
        assert_eq!(&f[6..12], &PHY_MAC);
        assert_eq!(&f[12..14], &[8, 0]);
        let ip = &f[14..34];
        assert_eq!(csum(ip, 0), 0, "IPv4 header checksum");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, f.len() - 14);
        assert_eq!(&ip[6..8], &[0x40, 0], "DF");
        assert_eq!((ip[8], ip[9]), (64, 17));
        assert_eq!(
            (&ip[12..16], &ip[16..20]),
            (&[10, 1, 2, 8][..], &[10, 1, 2, 9][..])
        );
        let u = &f[34..42];
        let sport = u16::from_be_bytes([u[0], u[1]]);
        assert!((32768..=61000).contains(&sport), "entropy port {sport}");
        assert_eq!(u16::from_be_bytes([u[2], u[3]]), 4789);
        assert_eq!(u16::from_be_bytes([u[4], u[5]]) as usize, f.len() - 34);
        assert_eq!(&f[42..50], &[0x08, 0, 0, 0, 0, 0, 100, 0]);
        assert_eq!(&f[50..], &inner[..]);
    }
    let _ = std::fs::remove_dir_all(&d);
}

fn ctl(rundir: &Path, args: &[&str]) -> String {
    let o = Command::new(bin())
        .arg("ctl")
        .arg("--rundir")
        .arg(rundir)
        .args(args)
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{args:?}: {t}");
    t
}

/// Kills the switch when the test ends, also on failure.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn tunnel_commands_and_bad_packets_on_a_running_switch() {
    let d = dir("cmds");
    // Good packets, then: a bad UDP checksum, a fragment, a wrong VNI (no rule: dropped by
    // the table, not by the pop).
    let mut under = vec![vxlan(100, 50000, &tenant(0))];
    let mut bad = vxlan(100, 50001, &tenant(1));
    bad[40] = 0x12; // a UDP checksum that cannot be right
    bad[41] = 0x34;
    under.push(bad);
    let mut frag = vxlan(100, 50002, &tenant(2));
    frag[20] = 0x20; // MF
    let c = {
        frag[24] = 0;
        frag[25] = 0;
        csum(&frag[14..34], 0)
    };
    frag[24..26].copy_from_slice(&c.to_be_bytes());
    under.push(frag);
    under.push(vxlan(101, 50003, &tenant(3)));
    write_pcap(&d.join("under_in.pcap"), &under);
    write_pcap(&d.join("vm_in.pcap"), &[]);
    let cfg = L3VPN
        .replace(
            "type = \"pcap\"\noptions = { rx_pcap = \"under_in.pcap\", tx_pcap = \"under_out.pcap\" }",
            "type = \"pcap\"\noptions = { rx_pcap = \"under_in.pcap\" }",
        )
        .replace(
            "options = { rx_pcap = \"vm_in.pcap\", tx_pcap = \"vm_out.pcap\" }",
            "options = { tx_pcap = \"vm_out.pcap\" }",
        );
    std::fs::write(d.join("sw.toml"), cfg).unwrap();
    let (_sw, run) = start(&d);
    // OVS's tnl-ports.c: the datapath port's name and number (as dpif/show gives it), and
    // with -v what it terminates instead of the counts.
    let dp = dp_port_of(&ctl(&run, &["dpif/show"]), "vxlan0");
    let ports = ctl(&run, &["tnl/ports/show"]);
    assert!(
        ports.contains(&format!("vxlan_sys_4789 ({dp}) ref_cnt=1")),
        "{ports}"
    );
    let ports = ctl(&run, &["tnl/ports/show", "-v"]);
    assert!(
        ports.contains(&format!(
            "vxlan_sys_4789 ({dp}) : eth(dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),\
             ipv4(dst=10.1.2.8,proto=17),udp(dst=4789)"
        )),
        "{ports}"
    );
    assert!(!ports.contains("ref_cnt"), "{ports}");
    let routes = ctl(&run, &["tnl/route/show"]);
    assert!(
        routes.contains("Cached: 10.1.2.0/24 dev br-phy SRC 10.1.2.8"),
        "{routes}"
    );
    ctl(
        &run,
        &["tnl/route/add", "10.9.0.0/16", "br-phy", "10.1.2.1"],
    );
    assert!(ctl(&run, &["ovs/route/show"]).contains("User: 10.9.0.0/16 dev br-phy GW 10.1.2.1"));
    ctl(
        &run,
        &["tnl/neigh/set", "br-phy", "10.1.2.1", "02:00:00:00:00:01"],
    );
    let neigh = ctl(&run, &["tnl/neigh/show"]);
    assert!(
        neigh.contains("10.1.2.9") && neigh.contains("02:00:00:00:00:01"),
        "{neigh}"
    );
    // A GENEVE tunnel at run time, with its TLV map.
    ctl(
        &run,
        &[
            "add-port",
            "br-int",
            "gnv0",
            "type=geneve",
            "options:remote_ip=10.1.2.10",
            "options:key=flow",
        ],
    );
    ctl(
        &run,
        &[
            "ofctl/add-tlv-map",
            "br-int",
            "{class=0x102,type=0x80,len=4}->tun_metadata0",
        ],
    );
    assert!(ctl(&run, &["ofctl/dump-tlv-map", "br-int"]).contains("tun_metadata0"));
    let ports = ctl(&run, &["tnl/ports/show"]);
    let dp = dp_port_of(&ctl(&run, &["dpif/show"]), "gnv0");
    assert!(
        ports.contains(&format!("genev_sys_6081 ({dp}) ref_cnt=1")),
        "{ports}"
    );
    let e = Command::new(bin())
        .args([
            "ctl",
            "--rundir",
            run.to_str().unwrap(),
            "add-port",
            "br-int",
            "g2",
            "type=geneve",
            "options:bogus=1",
        ])
        .output()
        .unwrap();
    assert!(
        !e.status.success() && text(&e).contains("bogus"),
        "{}",
        text(&e)
    );

    // Every bad pop is a counted drop with its reason; the good packet got through.
    let t = Instant::now();
    loop {
        let drops = ctl(&run, &["dpif-netdev/pmd-drop-show"]);
        let count = |reason: &str| {
            drops
                .lines()
                .find(|l| l.trim_start().starts_with(reason))
                .and_then(|l| l.split_whitespace().last())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        };
        if count("tunnel_pop_bad_checksum") == 1 && count("tunnel_pop_fragment") == 1 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{drops}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let flows = ctl(&run, &["dpif/dump-flows"]);
    assert!(flows.contains("actions:tnl_pop("), "{flows}");
    assert!(
        flows.contains("tunnel(tun_id=0x64,src=10.1.2.9,dst=10.1.2.8"),
        "{flows}"
    );
}

#[test]
fn an_unresolved_neighbour_is_asked_for_once_with_an_arp_request() {
    let d = dir("arp");
    let vm: Vec<Vec<u8>> = (0..6u8)
        .map(|i| {
            ipv4(
                [0x52, 0x54, 0, 0xa0, 0x91, 0x99],
                [0x52, 0x54, 0, 0xa0, 0x81, 1],
                [192, 168, 2, 16],
                [192, 168, 1, 1],
                17,
                &udp(2000, 1024, &[0x40 + i; 30]),
            )
        })
        .collect();
    write_pcap(&d.join("under_in.pcap"), &[]);
    write_pcap(&d.join("vm_in.pcap"), &vm);
    let cfg = L3VPN.replace("neigh = [\"br-phy 10.1.2.9 8c:dc:d4:ab:58:48\"]", "");
    assert_ne!(cfg, L3VPN);
    std::fs::write(d.join("sw.toml"), cfg).unwrap();
    run_until_idle(&d);
    // The first packet's upcall asks; the others hit its (drop) megaflow until a reply
    // teaches the neighbour.
    let got = netdev::pcap::read_file(d.join("under_out.pcap")).unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    #[rustfmt::skip]
    let want = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0, 0x08, 0x06,
        0, 1, 8, 0, 6, 4, 0, 1, 0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0, 10, 1, 2, 8,
        0, 0, 0, 0, 0, 0, 10, 1, 2, 9,
    ];
    assert_eq!(got[0].data, want);
    // An independent decoder agrees, where there is one.
    match Command::new("tshark")
        .args(["-r"])
        .arg(d.join("under_out.pcap"))
        .args([
            "-T",
            "fields",
            "-e",
            "arp.opcode",
            "-e",
            "arp.src.proto_ipv4",
        ])
        .args(["-e", "arp.dst.proto_ipv4", "-e", "_ws.expert"])
        .output()
    {
        Ok(o) if o.status.success() => {
            // Opcode, sender, target, and no expert warning.
            let out = String::from_utf8_lossy(&o.stdout);
            assert_eq!(out.trim_end_matches('\n'), "1\t10.1.2.8\t10.1.2.9\t");
        }
        _ => eprintln!(
            "SKIP an_unresolved_neighbour_is_asked_for_once_with_an_arp_request: tshark \
             decode (apt-get install tshark); the bytes were checked"
        ),
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The datapath port number `dpif/show` gives the OpenFlow port `name` (`    name OF/DP:
/// (type)`; a tunnel port has its shared tunnel datapath port's).
fn dp_port_of(show: &str, name: &str) -> u32 {
    show.lines()
        .find_map(|l| {
            let rest = l.trim_start().strip_prefix(name)?.trim_start();
            let (_, dp) = rest.split_once(':')?.0.split_once('/')?;
            dp.parse().ok()
        })
        .unwrap_or_else(|| panic!("no {name} in {show}"))
}

/// Starts `flowpath run` on `d/sw.toml` with its run directory `d/run`; waits for its control
/// socket.
fn start(d: &Path) -> (Running, PathBuf) {
    let run = d.join("run");
    let sw = Running(
        Command::new(bin())
            .args(["run", "--config", d.join("sw.toml").to_str().unwrap()])
            .arg("--rundir")
            .arg(&run)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    while !run.join("flowpath.ctl").exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no control socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    (sw, run)
}

/// The UDP source ports of the VXLAN frames written to `pcap` so far, once there are `n`.
fn vxlan_source_ports(pcap: &Path, n: usize) -> Vec<u16> {
    let t = Instant::now();
    loop {
        let got = netdev::pcap::read_file(pcap).unwrap_or_default();
        let ports: Vec<u16> = got
            .iter()
            .map(|r| &r.data)
            .filter(|f| f.len() > 50 && f[23] == 17 && f[36..38] == [0x12, 0xb5])
            .map(|f| u16::from_be_bytes([f[34], f[35]]))
            .collect();
        if ports.len() >= n {
            return ports;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{ports:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `tnl/egress_port_range`, as OVS's: prints the range (32768-61000 by default), takes a new one
/// in either order, refuses bounds outside 1-65535 with OVS's replies, and the flows already in
/// the datapath take the new range at once.
#[test]
fn egress_port_range_bounds_the_pushed_source_ports() {
    let d = dir("egress");
    let cfg = L3VPN
        .replace(
            "options = { rx_pcap = \"under_in.pcap\", tx_pcap = \"under_out.pcap\" }",
            "options = { tx_pcap = \"under_out.pcap\" }",
        )
        .replace(
            "type = \"pcap\"\noptions = { rx_pcap = \"vm_in.pcap\", tx_pcap = \"vm_out.pcap\" }",
            "type = \"dummy\"",
        );
    std::fs::write(d.join("sw.toml"), cfg).unwrap();
    let (_sw, run) = start(&d);
    let range = |args: &[&str]| {
        let mut a = vec!["tnl/egress_port_range"];
        a.extend_from_slice(args);
        ctl(&run, &a)
    };
    assert_eq!(range(&[]), "Tunnel UDP source port range: 32768-61000\n");
    // dpif/show lists a tunnel port with its own configuration, as OVS's tunnel netdev.
    let show = ctl(&run, &["dpif/show"]);
    assert!(
        show.contains(": (vxlan: key=flow, remote_ip=10.1.2.9)\n"),
        "{show}"
    );
    let hex: String = tenant(0).iter().map(|b| format!("{b:02x}")).collect();
    ctl(&run, &["netdev-dummy/receive", "vm0", &hex]);
    let under = d.join("under_out.pcap");
    let first = vxlan_source_ports(&under, 1)[0];
    assert!((32768..61000).contains(&first), "{first}");

    assert_eq!(range(&["0", "100"]), "Invalid min.\n");
    assert_eq!(range(&["100", "65536"]), "Invalid max.\n");
    assert_eq!(range(&["100", "x"]), "Invalid max.\n");
    assert!(range(&[]).contains("32768-61000"));
    assert_eq!(range(&["58", "57"]), "OK\n");
    assert_eq!(range(&[]), "Tunnel UDP source port range: 57-58\n");
    // The same flow again: its datapath flow was compiled with the old range.
    ctl(&run, &["netdev-dummy/receive", "vm0", &hex]);
    assert_eq!(vxlan_source_ports(&under, 2)[1], 57);
    let e = Command::new(bin())
        .args(["ctl", "--rundir", run.to_str().unwrap()])
        .args(["tnl/egress_port_range", "5"])
        .output()
        .unwrap();
    assert!(
        !e.status.success() && text(&e).contains("usage"),
        "{}",
        text(&e)
    );
}

/// `inner` in GENEVE (VNI `vni`, option area `opts`, version `ver`) from the peer 10.1.2.9 to
/// 10.1.2.8.
fn geneve(ver: u8, vni: u32, opts: &[u8], inner: &[u8]) -> Vec<u8> {
    let mut g = vec![ver << 6 | (opts.len() / 4) as u8, 0, 0x65, 0x58];
    g.extend_from_slice(&(vni << 8).to_be_bytes());
    g.extend_from_slice(opts);
    g.extend_from_slice(inner);
    ipv4(
        PEER_MAC,
        PHY_MAC,
        [10, 1, 2, 9],
        [10, 1, 2, 8],
        17,
        &udp(50000, 6081, &g),
    )
}

/// A GENEVE option: class, type, and a value of whole 4-byte words.
fn geneve_opt(class: u16, kind: u8, value: &[u8]) -> Vec<u8> {
    let mut o = class.to_be_bytes().to_vec();
    o.extend_from_slice(&[kind, (value.len() / 4) as u8]);
    o.extend_from_slice(value);
    o
}

const GENEVE_CHASSIS: &str = r#"[[bridge]]
name = "br-phy"
hwaddr = "8c:dc:d4:ab:5b:f0"
ip = ["10.1.2.8/24"]
flows = ["actions=NORMAL"]

[[bridge.port]]
name = "p0"
type = "dummy"

[[bridge]]
name = "br-int"
tlv-map = ["{class=0x102,type=0x80,len=4}->tun_metadata0"]
flows = ["in_port=gnv0,tun_id=5,tun_metadata0=0x30002 actions=output:vm0"]

[[bridge.port]]
name = "gnv0"
type = "geneve"
options = { remote_ip = "10.1.2.9", key = "flow" }

[[bridge.port]]
name = "vm0"
type = "dummy"
"#;

/// What OVN's peers may send that a chassis must not take: GENEVE frames with an unknown
/// critical option, an option of the wrong length, an option longer than its area, a VNI no
/// flow knows, a version other than 0, a header cut short. Each is a drop counted under its
/// reason (OVS's coverage counter names), and good frames between them get through.
#[test]
fn bad_geneve_input_is_dropped_and_counted_by_reason() {
    let d = dir("geneve-bad");
    std::fs::write(d.join("sw.toml"), GENEVE_CHASSIS).unwrap();
    let (_sw, run) = start(&d);
    let inner = tenant(0);
    let good = geneve(0, 5, &geneve_opt(0x102, 0x80, &[0, 3, 0, 2]), &inner);
    let mut cut = geneve(0, 5, &geneve_opt(0x102, 0x80, &[0, 3, 0, 2]), &inner);
    // The GENEVE header says 63 words of options: past the datagram.
    cut[42] |= 0x3f;
    let bad: Vec<(&str, Vec<u8>)> = vec![
        (
            "drop_action_invalid_tunnel_metadata",
            geneve(0, 5, &geneve_opt(0x999, 0x81, &[0, 0, 0, 1]), &inner),
        ),
        (
            "drop_action_invalid_tunnel_metadata",
            geneve(0, 5, &geneve_opt(0x102, 0x80, &[0; 8]), &inner),
        ),
        (
            "drop_action_invalid_tunnel_metadata",
            geneve(0, 5, &[0x01, 0x02, 0x80, 0x05, 0, 0, 0, 1], &inner),
        ),
        ("drop_action_of_pipeline", geneve(0, 77, &[], &inner)),
        ("tunnel_pop_bad_header", geneve(1, 5, &[], &inner)),
        ("tunnel_pop_truncated", cut),
    ];
    let hex = |f: &[u8]| f.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let receive = |f: &[u8]| {
        let out = ctl(&run, &["netdev-dummy/receive", "p0", &hex(f)]);
        assert!(!out.contains("error"), "{out}");
    };
    let counter = |name: &str| -> u64 {
        ctl(&run, &["coverage/read-counter", name])
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let pop_drop = |reason: &str| -> u64 {
        ctl(&run, &["dpif-netdev/pmd-drop-show"])
            .lines()
            .find(|l| l.trim_start().starts_with(reason))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let count = |reason: &str| {
        if reason.starts_with("tunnel_pop_") {
            pop_drop(reason)
        } else {
            counter(reason)
        }
    };
    let vm0_tx = || -> u64 {
        let s = ctl(&run, &["dpctl/show", "-s"]);
        let at = s.find("vm0").unwrap_or_else(|| panic!("{s}"));
        s[at..]
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("TX packets:"))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    receive(&good);
    let mut delivered = 1;
    for (reason, frame) in &bad {
        let before = count(reason);
        receive(frame);
        receive(&good);
        delivered += 1;
        let t = Instant::now();
        while count(reason) != before + 1 || vm0_tx() != delivered {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "{reason}: {} (was {before}), vm0 sent {}\n{}",
                count(reason),
                vm0_tx(),
                ctl(&run, &["dpif-netdev/pmd-drop-show"])
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let shown = ctl(&run, &["dpif-netdev/pmd-drop-show"]);
    assert!(
        shown.contains("translation: Invalid tunnel metadata") && shown.contains(" 3\n"),
        "{shown}"
    );
    // The megaflows of the failed translations print as OVS's: `drop`.
    let flows = ctl(&run, &["dpctl/dump-flows"]);
    assert!(flows.contains("class=0x999"), "{flows}");
    assert!(
        flows
            .lines()
            .filter(|l| l.contains("class=0x999"))
            .all(|l| l.ends_with("actions:drop")),
        "{flows}"
    );
}
