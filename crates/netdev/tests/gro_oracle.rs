//! flowpath's GRO ([`datapath::gro::coalesce`]) against Linux's own, byte for byte: the same
//! TCP segments are sent through a veth whose far end does GRO (NAPI on, the GRO flush
//! deferred as Linux's own GRO selftest sets it up: `gro_flush_timeout`,
//! `napi_defer_hard_irqs`) and captured with a packet socket after the merge, and are merged
//! by `coalesce`, the result made ready for a device that segments it as a tap or guest gets
//! it ([`datapath::gso::prepare_partial`]: lengths, IPv4 checksum, the TCP checksum field the
//! pseudo-header sum, which is what Linux's `tcp4_gro_complete` leaves there too). Each case
//! is one connection's segments in order, but the last: three connections' segments in turn,
//! which both merge each on its own (Linux hands its flows' frames up in the order of its GRO
//! lists, flowpath each in its first segment's place: compared connection by connection).
//! Skipped, with the reason, without root or python3.

mod common;

use std::process::Command;
use std::time::Duration;

use common::kernel_path::{self, Capture};
use common::{Env, ns_sh};
use datapath::packet::{Batch, Pool};
use wire::checksum;

/// A TCP/IPv4 segment of connection 10.82.0.1:40000 -> 10.82.0.2:5001 to `dst`: sequence
/// number `seq`, `len` payload bytes, TCP `flags`, IP identification `id` and TTL `ttl`, with
/// correct checksums and a timestamp option of value `tsval` (as Linux's segments have).
fn segment(dst: [u8; 6], seq: u32, len: usize, flags: u8, id: u16, ttl: u8, tsval: u32) -> Vec<u8> {
    segment_from(40000, dst, seq, len, flags, id, ttl, tsval)
}

/// [`segment`] of the connection from port `sport`.
#[allow(clippy::too_many_arguments)]
fn segment_from(
    sport: u16,
    dst: [u8; 6],
    seq: u32,
    len: usize,
    flags: u8,
    id: u16,
    ttl: u8,
    tsval: u32,
) -> Vec<u8> {
    let mut f = Vec::with_capacity(66 + len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0x82, 1, 0x08, 0x00]);
    let total = (20 + 32 + len) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(&[0x40, 0, ttl, 6, 0, 0, 10, 82, 0, 1, 10, 82, 0, 2]);
    let c = !checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&5001u16.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&7000u32.to_be_bytes());
    f.extend_from_slice(&[0x80, flags, 0x01, 0xf5, 0, 0, 0, 0]);
    // NOP, NOP, timestamp TSVAL / 2000.
    f.extend_from_slice(&[1, 1, 8, 10]);
    f.extend_from_slice(&tsval.to_be_bytes());
    f.extend_from_slice(&2000u32.to_be_bytes());
    f.extend((0..len).map(|i| (seq as usize + i) as u8));
    let tcp_len = (f.len() - 34) as u16;
    let sum = checksum::combine(&[
        checksum::pseudo_header_v4(
            &[10, 82, 0, 1].into(),
            &[10, 82, 0, 2].into(),
            wire::IpProtocol::TCP,
            tcp_len,
        ),
        checksum::data(&f[34..]),
    ]);
    f[50..52].copy_from_slice(&(!sum).to_be_bytes());
    f
}

const ACK: u8 = 0x10;
const PSH: u8 = 0x08;

/// What flowpath's GRO makes of `frames`, as a segmenting device gets it.
fn flowpath_gro(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut pool = Pool::new(64, 0);
    let mut batch = Batch::new();
    for f in frames {
        batch.push(pool.packet_from(f, 1));
    }
    let mut scratch = Vec::with_capacity(64);
    datapath::gro::coalesce(&mut batch, &mut pool, &mut scratch);
    let mut out = Vec::new();
    for mut p in batch.drain() {
        if p.meta.gso_size != 0 {
            datapath::gso::prepare_partial(&mut p).expect("a TCP super-frame");
        }
        out.push(p.data().to_vec());
        pool.free(p);
    }
    out
}

/// The MAC address of `ifname` in namespace `ns`.
fn mac(ns: &str, ifname: &str) -> [u8; 6] {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat"])
        .arg(format!("/sys/class/net/{ifname}/address"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let b: Vec<u8> = text
        .trim()
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    b.try_into().unwrap()
}

/// A UDP frame to `dst` sent ahead of each case: the receiving end's NAPI is then in its
/// deferred-flush mode when the segments come (without it the first segment went up alone).
fn warm_up(dst: [u8; 6]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0x82, 1, 0x08, 0x00]);
    f.extend_from_slice(&[
        0x45, 0, 0, 32, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 82, 0, 1, 10, 82, 0, 3,
    ]);
    let c = !checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&[0, 9, 0, 9, 0, 12, 0, 0, b'w', b'a', b'r', b'm']);
    f
}

/// TCP payload bytes in `frames` (IPv4, a 32-byte TCP header).
fn payload(frames: &[Vec<u8>]) -> usize {
    frames.iter().map(|f| f.len() - 66).sum()
}

/// What Linux's GRO makes of `frames`: sent from `ns_a`'s `a` after [`warm_up`], captured on
/// `ns_b`'s `b`. Tried again (three times at most) when the capture missed some of it.
fn linux_gro(ns_a: &str, a: &str, ns_b: &str, b: &str, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for _ in 0..3 {
        got = linux_gro_once(ns_a, a, ns_b, b, frames);
        if payload(&got) == payload(frames) {
            break;
        }
    }
    got
}

fn linux_gro_once(ns_a: &str, a: &str, ns_b: &str, b: &str, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let dst: [u8; 6] = frames[0][..6].try_into().unwrap();
    let sent: Vec<Vec<u8>> = std::iter::once(warm_up(dst))
        .chain(frames.iter().cloned())
        .collect();
    let tcp = Capture {
        proto: "0x0800",
        keep: "len(f) > 23 and f[23] == 6",
    };
    kernel_path::through((ns_a, a), (ns_b, b), false, &tcp, &sent)
}

/// The frames' sizes, for a failure's message.
fn sizes(frames: &[Vec<u8>]) -> Vec<usize> {
    frames.iter().map(Vec::len).collect()
}

#[test]
fn gro_merges_as_linux_does() {
    let test = "gro_merges_as_linux_does";
    let Some(mut env) = Env::new(test) else {
        return;
    };
    if !common::quiet(&["python3", "-c", "pass"]) || !common::quiet(&["ethtool", "--version"]) {
        eprintln!("SKIP {test}: needs python3 and ethtool");
        return;
    }
    let (na, nb) = (env.netns("ga"), env.netns("gb"));
    let (a, b) = (env.ifname("ga"), env.ifname("gb"));
    env.veth(&a, Some(&na), &b, &nb);
    // Linux's veth hands a frame to the receiver's GRO only when the sender has no TSO.
    ns_sh(&na, &["ethtool", "-K", &a, "tso", "off"]);
    // GRO on the receiving veth (NAPI), its flush deferred past the burst as Linux's own GRO
    // selftest sets it up, so that segments sent one by one meet in one GRO list.
    ns_sh(&nb, &["ethtool", "-K", &b, "gro", "on"]);
    let sys = format!("/sys/class/net/{b}");
    ns_sh(
        &nb,
        &[
            "sh",
            "-c",
            &format!(
                "echo 1000000 > {sys}/gro_flush_timeout && echo 1 > {sys}/napi_defer_hard_irqs"
            ),
        ],
    );
    std::thread::sleep(Duration::from_millis(200));
    let dst = mac(&nb, &b);
    let seg = |k: u32, len: usize, flags: u8, ttl: u8| {
        segment(
            dst,
            1000 + k * 1000,
            len,
            ACK | flags,
            100 + k as u16,
            ttl,
            1000,
        )
    };
    let cases: Vec<(&str, Vec<Vec<u8>>)> = vec![
        (
            "eight in order",
            (0..8).map(|k| seg(k, 1000, 0, 64)).collect(),
        ),
        (
            "PSH on the fifth ends the merge",
            (0..8)
                .map(|k| seg(k, 1000, if k == 4 { PSH } else { 0 }, 64))
                .collect(),
        ),
        (
            "a short segment ends the merge",
            (0..6)
                .map(|k| seg(k, if k == 3 { 500 } else { 1000 }, 0, 64))
                .collect(),
        ),
        (
            "another TTL starts another merge",
            (0..6)
                .map(|k| seg(k, 1000, 0, if k < 3 { 64 } else { 63 }))
                .collect(),
        ),
        (
            "another timestamp starts another merge",
            (0..6)
                .map(|k| {
                    let ts = if k < 3 { 1000 } else { 1001 };
                    segment(dst, 1000 + k * 1000, 1000, ACK, 100 + k as u16, 64, ts)
                })
                .collect(),
        ),
        (
            "a gap in the sequence starts another merge",
            (0..6)
                .map(|k| {
                    let seq = 1000 + k * 1000 + if k < 3 { 0 } else { 500 };
                    segment(dst, seq, 1000, ACK, 100 + k as u16, 64, 1000)
                })
                .collect(),
        ),
        (
            "three connections in turn",
            (0..12)
                .map(|k| {
                    let (c, n) = (k % 3, k / 3);
                    let id = 100 + (c * 16 + n) as u16;
                    segment_from(
                        40000 + c as u16,
                        dst,
                        1000 + n * 1000,
                        1000,
                        ACK,
                        id,
                        64,
                        1000,
                    )
                })
                .collect(),
        ),
    ];
    for (what, frames) in cases {
        let by_connection = |mut v: Vec<Vec<u8>>| {
            // Stable: each connection's frames keep their order.
            v.sort_by_key(|f| u16::from_be_bytes([f[34], f[35]]));
            v
        };
        let linux = by_connection(linux_gro(&na, &a, &nb, &b, &frames));
        let ours = by_connection(flowpath_gro(&frames));
        assert!(
            linux.len() < frames.len(),
            "{what}: Linux merged nothing ({:?}): GRO did not run on the veth",
            sizes(&linux)
        );
        assert_eq!(sizes(&ours), sizes(&linux), "{what}: the frames' sizes");
        for (k, (o, l)) in ours.iter().zip(&linux).enumerate() {
            let diff: Vec<usize> = (0..o.len()).filter(|&i| o[i] != l[i]).collect();
            assert!(
                diff.is_empty(),
                "{what}: frame {k} differs at bytes {diff:?}"
            );
        }
    }
}
