//! `dpif/dump-flows` on a running switch, line for line as OVS 3.1 prints it for the same rules
//! and packets: a megaflow shows the values of the packet that installed it under its mask
//! (`ipv4(src=10.0.0.2/255.255.255.252)`, and `dst=10.0.0.5/0.0.0.0` with `-m`), a GENEVE
//! packet's tunnel key has the flags OVS 3.1 sets on receive (no `df`), and the command prints
//! no `flow-dump from` lines (only `dpctl/dump-flows` does), a verbose line starting `ufid:UUID `
//! without `dp:ovs`.
//!
//! The expected lines were printed by Debian's OVS 3.1 (`ovs-vswitchd --enable-dummy`, ports of
//! type dummy, packets given with `ovs-appctl netdev-dummy/receive PORT HEX` of the frames
//! below); flowpath gets the same frames from capture ports. Statistics differ (OVS's dummy
//! receive counts none) and ufids are random, so both are left out of the comparison.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{scratch_dir, start_switch};

fn ctl(rundir: &Path, args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .arg("ctl")
        .arg("--rundir")
        .arg(rundir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn write_pcap(path: &Path, hex: &str) {
    let mut w = netdev::pcap::PcapWriter::create(path).unwrap();
    w.write(0, &bytes(hex)).unwrap();
    w.finish().unwrap();
}

/// A dump line without its statistics (`packets:.., bytes:.., used:..[, flags:..]`) and with
/// the ufid's value hidden (its place and the separator after it kept).
fn comparable(line: &str) -> String {
    let mut l = line.to_owned();
    if let Some(rest) = l.strip_prefix("ufid:") {
        l = format!("ufid:<ufid>{}", &rest[36..]);
    }
    match (l.find(", packets:"), l.find(", actions:")) {
        (Some(a), Some(b)) => format!("{}{}", &l[..a], &l[b..]),
        _ => l,
    }
}

/// The lines of `args`' dump once it has `n` of them (10 s at most), comparable and sorted.
fn dump(rundir: &Path, args: &[&str], n: usize) -> Vec<String> {
    let t = Instant::now();
    loop {
        let text = ctl(rundir, args);
        let mut lines: Vec<String> = text.lines().map(comparable).collect();
        if lines.len() >= n {
            lines.sort();
            return lines;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{args:?}:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn sorted(lines: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = lines.iter().map(|l| comparable(l)).collect();
    v.sort();
    v
}

/// UDP 10.0.0.2:1 -> 10.0.0.5:2, TTL 33, on p2.
const UDP4: &str =
    "50540000000250540000000108004500001c00010000211185ca0a0000020a000005000100020008ebd4";
/// TCP SYN [2001:db8::1]:80 -> [2001:db8::2]:8080 on p1.
const TCP6_SYN: &str = "50540000000150540000000286dd600000000014064020010db8000000000000000000000001\
                        20010db800000000000000000000000200501f90000000000000000050022000148e0000";
/// TCP 10.0.0.3:1000 -> 10.0.0.1:2000 without flags, from 50:54:00:00:00:03, on p3.
const TCP4_NO_FLAGS: &str = "50540000000150540000000308004500002800000000400666cd0a0000030a000001\
                             03e807d000000000000000005000000090290000";

const MASKED: &str = r#"[[bridge]]
name = "br0"
flows = ["in_port=2,ip,nw_src=10.0.0.0/30,actions=output:1",
         "in_port=1,tcp6,ipv6_src=2001:db8::/64,tp_dst=0x1f00/0xff00,actions=output:2",
         "in_port=3,dl_src=50:54:00:00:00:00/ff:ff:ff:00:00:00,actions=output:1"]

[[bridge.port]]
name = "p1"
type = "pcap"
ofport = 1
options = { rx_pcap = "p1.pcap" }

[[bridge.port]]
name = "p2"
type = "pcap"
ofport = 2
options = { rx_pcap = "p2.pcap" }

[[bridge.port]]
name = "p3"
type = "pcap"
ofport = 3
options = { rx_pcap = "p3.pcap" }
"#;

#[test]
fn masked_fields_print_the_first_packets_values() {
    let (d, _rm) = scratch_dir("flowpath-dump-masked");
    write_pcap(&d.join("p1.pcap"), TCP6_SYN);
    write_pcap(&d.join("p2.pcap"), UDP4);
    write_pcap(&d.join("p3.pcap"), TCP4_NO_FLAGS);
    std::fs::write(d.join("sw.toml"), MASKED).unwrap();
    let run = d.join("run");
    let _sw = start_switch(&d.join("sw.toml"), &run);

    // ovs-appctl dpif/dump-flows br0
    assert_eq!(
        dump(&run, &["dpif/dump-flows", "br0"], 3),
        sorted(&[
            "recirc_id(0),in_port(2),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(src=10.0.0.2/255.255.255.252,frag=no), packets:0, bytes:0, used:never, actions:1",
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x86dd),ipv6(src=2001:db8::1/ffff:ffff:ffff:ffff::,proto=6,frag=no),tcp(dst=8080/0xff00), packets:0, bytes:0, used:never, actions:2",
            "recirc_id(0),in_port(3),packet_type(ns=0,id=0),eth(src=50:54:00:00:00:03/ff:ff:ff:00:00:00),eth_type(0x0800),ipv4(frag=no), packets:0, bytes:0, used:never, actions:1",
        ])
    );
    // ovs-appctl dpif/dump-flows -m br0
    assert_eq!(
        dump(&run, &["dpif/dump-flows", "-m", "br0"], 3),
        sorted(&[
            "ufid:4365c2bf-c5a9-4a35-9a2d-72dfabd54a72 skb_priority(0/0),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),ct_mark(0/0),ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(p2),packet_type(ns=0,id=0),eth(src=50:54:00:00:00:01/00:00:00:00:00:00,dst=50:54:00:00:00:02/00:00:00:00:00:00),eth_type(0x0800),ipv4(src=10.0.0.2/255.255.255.252,dst=10.0.0.5/0.0.0.0,proto=17/0,tos=0/0,ttl=33/0,frag=no),udp(src=1/0,dst=2/0), packets:0, bytes:0, used:never, actions:p1",
            "ufid:c7dcc8ba-2772-42fc-bd53-4d46f286ca8d skb_priority(0/0),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),ct_mark(0/0),ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(p1),packet_type(ns=0,id=0),eth(src=50:54:00:00:00:02/00:00:00:00:00:00,dst=50:54:00:00:00:01/00:00:00:00:00:00),eth_type(0x86dd),ipv6(src=2001:db8::1/ffff:ffff:ffff:ffff::,dst=2001:db8::2/::,label=0/0,proto=6,tclass=0/0,hlimit=64/0,frag=no),tcp(src=80/0,dst=8080/0xff00),tcp_flags(0/0), packets:0, bytes:0, used:never, actions:p2",
            "ufid:40100c1c-1dbe-4c8f-8915-8bef91724a5d skb_priority(0/0),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),ct_mark(0/0),ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(p3),packet_type(ns=0,id=0),eth(src=50:54:00:00:00:03/ff:ff:ff:00:00:00,dst=50:54:00:00:00:01/00:00:00:00:00:00),eth_type(0x0800),ipv4(src=10.0.0.3/0.0.0.0,dst=10.0.0.1/0.0.0.0,proto=6/0,tos=0/0,ttl=64/0,frag=no),tcp(src=1000/0,dst=2000/0), packets:0, bytes:0, used:never, actions:p1",
        ])
    );
    // `--no-names` keeps the verbose form with port numbers; without a bridge, every flow.
    let numbered = dump(&run, &["dpif/dump-flows", "-m", "--no-names", "br0"], 3);
    assert!(
        numbered
            .iter()
            .all(|l| l.contains("in_port(") && !l.contains("in_port(p"))
    );
    assert_eq!(dump(&run, &["dpif/dump-flows"], 3).len(), 3);
    // `dpctl/dump-flows` is the one with a line per PMD before its flows.
    let dpctl = ctl(&run, &["dpctl/dump-flows", "-m"]);
    assert!(
        dpctl.starts_with("flow-dump from pmd on cpu core: "),
        "{dpctl}"
    );
    assert!(dpctl.contains("ipv4(src=10.0.0.2/255.255.255.252,dst=10.0.0.5/0.0.0.0,"));
}

/// An ICMP echo reply from 30.0.0.1 to 30.0.0.2 in GENEVE (VNI 123, one option
/// {class=0xffff,type=0x80,len=4,0xa}, UDP checksum 0) from 1.1.2.92:12424 to 1.1.2.88:6081,
/// the outer IPv4 header with DF set.
const GENEVE_DF: &str = "aa55aa550000001b213cab6408004500006600004000401133d20101025c01010258\
                         308817c1005200000200655800007b00ffff80010000000afe71d883724fbeb6f4e1494a\
                         08004500002c0000000040013ecf1e0000011e0000020000fffb00030001000000000000\
                         00000000000000000000";

const GENEVE: &str = r#"[[bridge]]
name = "br0"
hwaddr = "aa:55:aa:55:00:00"
ip = ["1.1.2.88/24"]
flows = ["actions=NORMAL"]

[[bridge.port]]
name = "p0"
type = "pcap"
ofport = 1
options = { rx_pcap = "p0.pcap" }

[[bridge]]
name = "int-br"
tlv-map = ["{class=0xffff,type=0x80,len=4}->tun_metadata0"]
flows = ["tun_metadata0=0xa,actions=5"]

[[bridge.port]]
name = "t2"
type = "geneve"
ofport = 2
options = { remote_ip = "1.1.2.92", key = "123" }

[[bridge.port]]
name = "vm0"
type = "sink"
ofport = 5
"#;

#[test]
fn a_geneve_packets_tunnel_key_is_ovs_3_1s() {
    let (d, _rm) = scratch_dir("flowpath-dump-geneve");
    write_pcap(&d.join("p0.pcap"), GENEVE_DF);
    std::fs::write(d.join("sw.toml"), GENEVE).unwrap();
    let run = d.join("run");
    let _sw = start_switch(&d.join("sw.toml"), &run);

    // ovs-appctl dpif/dump-flows -m int-br (OVS numbers the GENEVE port 6081, flowpath
    // otherwise: the verbose form, with names, is the same).
    assert_eq!(
        dump(&run, &["dpif/dump-flows", "-m", "int-br"], 1),
        sorted(&[
            "ufid:4bd65b9b-d79c-4559-954e-46597fd1b26a skb_priority(0/0),tunnel(tun_id=0x7b,src=1.1.2.92,dst=1.1.2.88,ttl=64/0,tp_src=12424/0,tp_dst=6081/0,geneve({class=0xffff,type=0x80,len=4,0xa}),flags(-df-csum+key)),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),ct_mark(0/0),ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(genev_sys_6081),packet_type(ns=0,id=0),eth(src=be:b6:f4:e1:49:4a/00:00:00:00:00:00,dst=fe:71:d8:83:72:4f/00:00:00:00:00:00),eth_type(0x0800),ipv4(src=30.0.0.1/0.0.0.0,dst=30.0.0.2/0.0.0.0,proto=1/0,tos=0/0,ttl=64/0,frag=no),icmp(type=0/0,code=0/0), packets:0, bytes:0, used:never, actions:vm0",
        ])
    );
    // ovs-appctl dpif/dump-flows int-br: the tunnel key.
    let plain = dump(&run, &["dpif/dump-flows", "int-br"], 1);
    assert!(
        plain[0].starts_with(
            "tunnel(tun_id=0x7b,src=1.1.2.92,dst=1.1.2.88,\
             geneve({class=0xffff,type=0x80,len=4,0xa}),flags(-df-csum+key)),recirc_id(0),"
        ),
        "{plain:?}"
    );
    // ovs-appctl dpif/dump-flows -m br0
    assert_eq!(
        dump(&run, &["dpif/dump-flows", "-m", "br0"], 1),
        sorted(&[
            "ufid:6bd86402-b4ec-4824-aad3-b51d9a7bd2fd skb_priority(0/0),skb_mark(0/0),ct_state(0/0),ct_zone(0/0),ct_mark(0/0),ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(p0),packet_type(ns=0,id=0),eth(src=00:1b:21:3c:ab:64,dst=aa:55:aa:55:00:00),eth_type(0x0800),ipv4(src=1.1.2.92/0.0.0.0,dst=1.1.2.88,proto=17,tos=0/0,ttl=64/0,frag=no),udp(src=12424/0,dst=6081), packets:0, bytes:0, used:never, actions:tnl_pop(genev_sys_6081)",
        ])
    );
}
