//! Header rewrites checked byte for byte against frames scapy built from scratch.
//!
//! `testdata/actions/` (made by `scripts/gen-action-fixtures.py`, scapy 2.8.0) holds, per case,
//! an input frame, OVS datapath actions in text form and the expected frame, whose checksums
//! scapy computed in full: the independent check of the incremental updates. Each case runs as
//! the datapath would: extraction fills the header offsets, the actions are parsed and compiled,
//! and the rewrites run in order. When `tshark` is installed the results must also decode
//! without expert warnings about malformed packets or bad checksums.

use std::path::{Path, PathBuf};
use std::process::Command;

use datapath::actions::{DpAction, compile};
use datapath::packet::Packet;
use datapath::rewrite::{self, RewriteError};
use flow::FlowKey;
use flow::odp::{PortNames, parse_actions};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/actions")
}

/// The frames of a classic pcap file (either byte order, micro- or nanosecond stamps).
fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(b.len() >= 24, "{}: no pcap header", path.display());
    let magic = [b[0], b[1], b[2], b[3]];
    let le = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => panic!("{}: not a pcap file", path.display()),
    };
    let u32_at = |o: usize| {
        let w = [b[o], b[o + 1], b[o + 2], b[o + 3]];
        if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        }
    };
    let mut out = Vec::new();
    let mut p = 24;
    while p + 16 <= b.len() {
        let incl = u32_at(p + 8) as usize;
        out.push(b[p + 16..p + 16 + incl].to_vec());
        p += 16 + incl;
    }
    out
}

fn one_frame(path: &Path) -> Vec<u8> {
    let mut v = read_pcap(path);
    assert_eq!(v.len(), 1, "{}: expected one frame", path.display());
    v.pop().unwrap()
}

struct Case {
    name: String,
    result: String,
    input: Vec<u8>,
    expected: Vec<u8>,
    actions: String,
}

fn cases() -> Vec<Case> {
    let dir = fixtures();
    let manifest =
        std::fs::read_to_string(dir.join("MANIFEST")).expect("testdata/actions/MANIFEST");
    manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 5, "bad manifest line: {l}");
            let mut c = Case {
                name: f[0].to_owned(),
                result: f[1].to_owned(),
                input: one_frame(&dir.join(f[2])),
                expected: one_frame(&dir.join(f[3])),
                actions: f[4].to_owned(),
            };
            with_entropy_port(&mut c);
            c
        })
        .collect()
}

/// scapy knows nothing of flowpath's entropy hash, so the fixtures' pushed UDP headers whose
/// template leaves the source port to it carry 32768, the bottom of the range. The port
/// `tnl_push` takes from the inner headers (`rewrite::entropy_hash`, tested on its own) goes in
/// its place, and the UDP checksum scapy computed is updated for it (RFC 1624).
fn with_entropy_port(c: &mut Case) {
    if !c.actions.starts_with("tnl_push(") || !c.actions.contains("udp(src=0,") {
        return;
    }
    let h = rewrite::entropy_hash(&packet(&c.input));
    let port = 32768 + ((u64::from(h) * (61000 - 32768)) >> 32) as u16;
    let e = &mut c.expected;
    let u = match [e[12], e[13]] {
        [0x08, 0x00] => 14 + 20,
        [0x86, 0xdd] => 14 + 40,
        t => panic!("{}: outer ethertype {t:02x?}", c.name),
    };
    assert_eq!(
        &e[u..u + 2],
        &[0x80, 0x00],
        "{}: fixture's source port",
        c.name
    );
    e[u..u + 2].copy_from_slice(&port.to_be_bytes());
    let old = u16::from_be_bytes([e[u + 6], e[u + 7]]);
    if old != 0 {
        let sum = u32::from(!old) + u32::from(!0x8000u16) + u32::from(port);
        let sum = (sum & 0xffff) + (sum >> 16);
        let new = !(((sum & 0xffff) + (sum >> 16)) as u16);
        e[u + 6..u + 8].copy_from_slice(&(if new == 0 { 0xffff } else { new }).to_be_bytes());
    }
}

/// `frame` as a packet with the header offsets extraction finds, as the datapath has it.
fn packet(frame: &[u8]) -> Packet {
    let mut key = FlowKey::new();
    let ex = flow::extract(frame, &mut key);
    let mut pkt = Packet::from_slice(frame);
    pkt.meta.l2_5 = ex.layers.l2_5;
    pkt.meta.l3 = ex.layers.l3;
    pkt.meta.l4 = ex.layers.l4;
    pkt
}

/// Runs `actions` on `frame` as the datapath does; returns the frame and the first rewrite
/// error, if any (later actions still run, as in OVS).
fn run(frame: &[u8], actions: &str) -> (Vec<u8>, Option<RewriteError>) {
    let (out, err, _) = run_typed(frame, actions);
    (out, err)
}

/// [`run`], with the packet type the packet ends with (0: Ethernet; after `pop_eth`, an L3
/// packet).
fn run_typed(frame: &[u8], actions: &str) -> (Vec<u8>, Option<RewriteError>, u32) {
    let mut pkt = packet(frame);
    let parsed = parse_actions(actions, &mut PortNames::new())
        .unwrap_or_else(|e| panic!("parse {actions}: {e}"));
    let compiled: Vec<DpAction> =
        compile(&parsed).unwrap_or_else(|e| panic!("compile {actions}: {e}"));
    let mut first_err = None;
    for a in &compiled {
        if let Err(e) = rewrite::apply(&mut pkt, a) {
            first_err.get_or_insert(e);
        }
    }
    (pkt.data().to_vec(), first_err, pkt.meta.packet_type)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn rewrites_match_scapy() {
    let cases = cases();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let (out, err) = run(&c.input, &c.actions);
        let got = match err {
            None => "ok".to_owned(),
            Some(e) => format!("error:{}", e.name()),
        };
        if got != c.result {
            failures.push(format!("{}: result {got}, expected {}", c.name, c.result));
        }
        if out != c.expected {
            failures.push(format!(
                "{}: {}\n  got      {}\n  expected {}",
                c.name,
                c.actions,
                hex(&out),
                hex(&c.expected)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every case's output that is an Ethernet frame (not the L3 packet `pop_eth` leaves) decodes
/// in Wireshark's dissectors without a malformed packet or a bad checksum (IPv4, TCP, UDP and
/// SCTP checksums validated).
#[test]
fn results_decode_cleanly_in_tshark() {
    if Command::new("tshark").arg("--version").output().is_err() {
        eprintln!("skipped: tshark is not installed");
        return;
    }
    let ok: Vec<(String, Vec<u8>)> = cases()
        .into_iter()
        .filter(|c| c.result == "ok")
        .map(|c| (c.name.clone(), run_typed(&c.input, &c.actions)))
        .filter(|(_, (_, _, packet_type))| *packet_type == 0)
        .map(|(name, (out, _, _))| (name, out))
        .collect();
    let path = std::env::temp_dir().join(format!("flowpath-actions-{}.pcap", std::process::id()));
    write_pcap(&path, ok.iter().map(|(_, f)| f.as_slice()));
    let r = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&path)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-o",
            "sctp.checksum:CRC-32C",
            "-Y",
            "_ws.expert.severity >= \"Warning\"",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "_ws.expert.message",
        ])
        .output()
        .expect("run tshark");
    let _ = std::fs::remove_file(&path);
    assert!(
        r.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    let text = String::from_utf8_lossy(&r.stdout);
    let bad: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let (n, msg) = l.split_once('\t')?;
            let m = msg.to_ascii_lowercase();
            let broken = ["malformed", "bad checksum", "incorrect", "bad length"]
                .iter()
                .any(|w| m.contains(w));
            let name = n.parse::<usize>().ok().and_then(|n| ok.get(n - 1))?;
            broken.then(|| format!("{}: {msg}", name.0))
        })
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A classic little-endian microsecond pcap of Ethernet frames.
fn write_pcap<'a>(path: &Path, frames: impl Iterator<Item = &'a [u8]>) {
    let mut b = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    for f in frames {
        for w in [0u32, 0, f.len() as u32, f.len() as u32] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}
