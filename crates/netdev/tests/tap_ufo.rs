//! A UFO super-frame ([`datapath::gso_ufo`]) written whole to a `tap` whose kernel takes UFO
//! writes (it accepts `TUN_F_UFO`: Linux 4.14 and later): the namespace's UDP socket gets the
//! whole datagram from one write; a tap without `tso` does not take them whole (the datapath
//! then fragments them). Needs root: as any other user the test prints `SKIP` and returns.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use datapath::packet::{Batch, Pool};
use datapath::port::Port;
use netdev::tap::{TapOptions, TapPort};
use wire::checksum;

mod common;
use common::*;

/// Receives one UDP datagram on `ADDR`:5201: prints `ready`, then its length and whether its
/// bytes are the test's pattern.
const UDP_RECEIVER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 5201))
s.settimeout(5)
print("ready", flush=True)
d, _ = s.recvfrom(1 << 17)
print(len(d), d == bytes((i * 7) & 255 for i in range(len(d))), flush=True)
"#;

/// A UDP/IPv4 datagram of `payload` bytes from 10.86.0.2 to 10.86.0.1:5201, to `dst`.
fn datagram(dst: [u8; 6], payload: usize) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0x86, 2, 0x08, 0x00, 0x45, 0]);
    let udp_len = (8 + payload) as u16;
    f.extend_from_slice(&(20 + udp_len).to_be_bytes());
    f.extend_from_slice(&[
        0x77, 0x77, 0x40, 0, 64, 17, 0, 0, 10, 86, 0, 2, 10, 86, 0, 1,
    ]);
    let c = !checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&5201u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..payload).map(|i| (i * 7) as u8));
    f
}

/// Whether the running kernel is Linux `major.minor` or later.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = r
        .trim()
        .split(['.', '-'])
        .map(|x| x.parse::<u32>().unwrap_or(0));
    (v.next().unwrap_or(0), v.next().unwrap_or(0)) >= (major, minor)
}

fn mac_of(ns: &str, dev: &str) -> [u8; 6] {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat"])
        .arg(format!("/sys/class/net/{dev}/address"))
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    let b: Vec<u8> = s
        .trim()
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    b.try_into().unwrap()
}

#[test]
fn a_ufo_super_frame_is_written_whole_to_a_tap_whose_kernel_takes_ufo() {
    let test = "a_ufo_super_frame_is_written_whole_to_a_tap_whose_kernel_takes_ufo";
    let Some(mut env) = Env::new(test) else {
        return;
    };
    if !std::path::Path::new("/dev/net/tun").exists() {
        eprintln!("SKIP {test}: no /dev/net/tun");
        return;
    }
    if !need(test, &[python()]) {
        return;
    }
    let ns = env.netns("uf");
    let (t, plain) = (env.ifname("uf"), env.ifname("ug"));
    let open = |ifname: &str, tso: bool| {
        let o = TapOptions {
            ifname: Some(ifname.to_owned()),
            netns: Some(ns.clone()),
            tso,
            ..Default::default()
        };
        TapPort::open(ifname, &o).unwrap_or_else(|e| panic!("open tap {ifname}: {e}"))
    };
    let mut without_tso = open(&plain, false);
    let q = without_tso.open_txq();
    assert!(
        !q.tso() && !q.ufo(),
        "no tso: super-frames fragmented before"
    );
    drop(q);
    let mut port = open(&t, true);
    let mut txq = port.open_txq();
    if !kernel_at_least(4, 14) {
        eprintln!("SKIP {test}: the kernel takes no UFO writes (Linux before 4.14)");
        return;
    }
    assert!(
        txq.tso() && txq.ufo(),
        "the kernel takes UFO: whole to the tap"
    );
    ns_sh(&ns, &["ip", "addr", "add", "10.86.0.1/24", "dev", &t]);
    let mut rx = KillOnDrop(Some(
        Command::new("ip")
            .args(["netns", "exec", &ns, python(), "-c", UDP_RECEIVER])
            .arg("10.86.0.1")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let mut out = BufReader::new(rx.0.as_mut().unwrap().stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let mut pool = Pool::new(8, 0);
    let mut p = pool.packet_from(&datagram(mac_of(&ns, &t), 4000), 1);
    p.meta.gso_size = 1480;
    p.meta.set_ufo(true);
    let mut batch = Batch::new();
    batch.push(p);
    txq.send(&mut batch, &mut pool);
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(
        line.trim(),
        "4000 True",
        "the whole datagram, its checksum good"
    );
    let c = port.counters();
    assert_eq!((c.tx_packets, c.tx_dropped), (1, 0), "one write: {c:?}");
}
