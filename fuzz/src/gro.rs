//! Checks of the `gro` fuzz target, shared with the crash-regression test
//! (`crates/datapath/tests/fuzz_regressions.rs` path-imports this file).
//!
//! The input builds a burst as a tap's transmit queue gets it: a TCP super-frame over IPv4 or
//! IPv6 cut into segments by `datapath::gso` (the first bytes pick its payload, MSS, flags,
//! options and IP version),
//! then edited by the rest, three bytes an edit: a byte flipped in a segment (a header field,
//! the payload, a checksum), a segment dropped, repeated (as it is, or as a segment of
//! another connection: its source port changed, its checksum right) or moved, or another
//! frame put in.
//! [`datapath::gro::coalesce`] merges the burst; then
//! - nothing is lost or made up: the packets out, plus the segments merged less the frames
//!   made of them, are the packets in;
//! - every packet out takes the place of the first packet in not yet accounted for: a packet
//!   that was not merged comes out unchanged, a merged frame where its first segment was;
//! - a merged frame is a TCP super-frame whose payload is its segments' payloads in order,
//!   each segment at most its MSS, with the first segment's Ethernet header, and its
//!   segments were two or more packets of the burst with right checksums, the others later
//!   than the first and in the burst's order (other packets may be between them: segments
//!   of interleaved connections merge each).

use datapath::gro::coalesce;
use datapath::gso::TcpSuper;
use datapath::packet::{Batch, MAX_BURST, NO_OFS, Packet, Pool};
use wire::checksum;

/// The segments of a super-frame the input's first four bytes describe, then edited.
fn burst(data: &[u8], pool: &mut Pool) -> Vec<Vec<u8>> {
    let [a, b, flags, opts, edits @ ..] = data else {
        return Vec::new();
    };
    let payload = 1 + usize::from(*a) * 97;
    let mss = 48 + usize::from(*b) * 6;
    let opt_len = usize::from(opts & 3) * 4;
    let tcp_len = 20 + opt_len + payload;
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    if opts & 0x40 != 0 {
        // IPv6: version, traffic class and flow label, payload length, TCP, hop limit,
        // fd00::1 to fd00::2.
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 7]);
        f.extend_from_slice(&(tcp_len.min(65535) as u16).to_be_bytes());
        f.extend_from_slice(&[6, 64]);
        for last in [1, 2] {
            f.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]);
        }
    } else {
        f.extend_from_slice(&[8, 0, 0x45, 0]);
        f.extend_from_slice(&((20 + tcp_len).min(65535) as u16).to_be_bytes());
        f.extend_from_slice(&[
            0x12,
            0x34,
            0x40 * (opts >> 7),
            0,
            64,
            6,
            0,
            0,
            10,
            0,
            0,
            1,
            10,
            0,
            0,
            2,
        ]);
    }
    f.extend_from_slice(&[0x9c, 0x40, 0x13, 0x89, 0xff, 0xff, 0xf0, 0x00, 1, 2, 3, 4]);
    f.extend_from_slice(&[((5 + opt_len / 4) as u8) << 4, *flags, 1, 0xf5, 0, 0, 0, 0]);
    f.extend((0..opt_len).map(|i| if i % 4 == 0 { 1 } else { i as u8 }));
    f.extend((0..payload).map(|i| (i * 7 + (i >> 8)) as u8));
    let mut p = Packet::from_slice(&f);
    p.meta.gso_size = mss as u16;
    let Ok(t) = TcpSuper::of(&p) else {
        return Vec::new();
    };
    let mut segs: Vec<Vec<u8>> = (0..t.n_segments(&p).min(MAX_BURST))
        .map(|k| {
            let s = t.segment(&p, k, pool);
            let v = s.data().to_vec();
            pool.free(s);
            v
        })
        .collect();
    for e in edits.chunks_exact(3) {
        let (op, x, y) = (e[0], usize::from(e[1]), usize::from(e[2]));
        if segs.is_empty() {
            break;
        }
        let k = y % segs.len();
        match op % 5 {
            0 => {
                let at = x % segs[k].len();
                segs[k][at] ^= 1 << (op >> 5);
            }
            1 => {
                segs.remove(k);
            }
            2 if segs.len() < MAX_BURST => {
                let mut c = segs[k].clone();
                if op & 0x80 != 0 {
                    other_connection(&mut c, 1 + u16::from(op >> 5 & 3));
                }
                segs.insert(x % (segs.len() + 1), c);
            }
            3 => {
                let c = segs.remove(k);
                segs.insert(x % (segs.len() + 1), c);
            }
            4 if segs.len() < MAX_BURST => {
                segs.insert(x % (segs.len() + 1), vec![op; 14 + y % 200]);
            }
            _ => {}
        }
    }
    segs
}

/// Segment `f` made one of another connection: its TCP source port XOR `delta`, its TCP
/// checksum right again.
fn other_connection(f: &mut [u8], delta: u16) {
    let l4 = if f.get(14).is_some_and(|v| v >> 4 == 6) {
        54
    } else {
        34
    };
    if f.len() < l4 + 20 {
        return;
    }
    let port = u16::from_be_bytes([f[l4], f[l4 + 1]]) ^ delta;
    f[l4..l4 + 2].copy_from_slice(&port.to_be_bytes());
    f[l4 + 16..l4 + 18].fill(0);
    let sum = tcp_sum(f, l4);
    f[l4 + 16..l4 + 18].copy_from_slice(&(!sum).to_be_bytes());
}

/// Whether TCP segment `f` (IPv4 or IPv6 header at 14, TCP at `l4`) has a right TCP
/// checksum.
fn checksum_ok(f: &[u8], l4: usize) -> bool {
    tcp_sum(f, l4) == 0xffff
}

/// The ones' complement sum of TCP segment `f`'s pseudo-header and bytes from `l4`.
fn tcp_sum(f: &[u8], l4: usize) -> u16 {
    let pseudo = if f[14] >> 4 == 6 {
        let a = |o: usize| {
            core::net::Ipv6Addr::from(<[u8; 16]>::try_from(&f[o..o + 16]).expect("16 bytes"))
        };
        let len = (f.len() - l4) as u32;
        checksum::pseudo_header_v6(&a(22), &a(38), wire::IpProtocol::TCP, len)
    } else {
        let a = |o: usize| core::net::Ipv4Addr::new(f[o], f[o + 1], f[o + 2], f[o + 3]);
        let len = (f.len() - l4) as u16;
        checksum::pseudo_header_v4(&a(26), &a(30), wire::IpProtocol::TCP, len)
    };
    checksum::combine(&[pseudo, checksum::data(&f[l4..])])
}

/// Runs every check on `data`.
pub fn check_gro(data: &[u8]) {
    merged_frames(data);
}

/// Runs every check on `data`; the super-frames the burst merged into.
pub fn merged_frames(data: &[u8]) -> u64 {
    let mut pool = Pool::new(64, 0);
    let frames = burst(data, &mut pool);
    let mut b = Batch::new();
    for f in &frames {
        b.push(pool.packet_from(f, 1));
    }
    let mut scratch = Vec::with_capacity(MAX_BURST);
    let m = coalesce(&mut b, &mut pool, &mut scratch);
    let out: Vec<Packet> = b.drain().collect();
    assert_eq!(
        out.len() as u64 + m.segments - m.frames,
        frames.len() as u64,
        "{m:?}"
    );
    let mut used = vec![false; frames.len()];
    let mut merged = 0;
    for p in &out {
        let i = used
            .iter()
            .position(|u| !u)
            .expect("no more packets out than in");
        used[i] = true;
        if p.meta.gso_size == 0 {
            assert_eq!(p.data(), &frames[i][..], "packet {i} changed");
            continue;
        }
        merged += 1;
        let mut q = Packet::from_slice(p.data());
        q.meta.gso_size = p.meta.gso_size;
        q.meta.l3 = NO_OFS;
        let t = TcpSuper::of(&q).expect("a merged frame is a TCP super-frame");
        let payload = &p.data()[t.hdr_len..];
        // Each next segment: the first later packet not accounted for that carries the
        // frame's next bytes (an earlier one that would have been merged instead).
        // Of the frame's connection and with a right checksum: the same Ethernet header,
        // the same IP header but for what differs from segment to segment (IPv4's total
        // length, id and checksum, and the reserved flag, which Linux's GRO lets differ;
        // IPv6's payload length), the same ports. Another connection's segment, a fragment,
        // a packet of another protocol or that is not IP, or one with a wrong checksum may
        // carry the same bytes.
        let ip_fixed: &[std::ops::Range<usize>] = if t.ipv6 {
            &[0..4, 6..40]
        } else {
            &[0..2, 7..10, 12..20]
        };
        let conn = |f: &[u8]| {
            let ip = ip_fixed
                .iter()
                .flat_map(|r| &f[t.l3 + r.start..t.l3 + r.end]);
            let flags = if t.ipv6 { 0 } else { f[t.l3 + 6] & 0x7f };
            (
                f[..t.l3].to_vec(),
                ip.copied().chain([flags]).collect::<Vec<u8>>(),
                f[t.l4..t.l4 + 4].to_vec(),
            )
        };
        let own = conn(p.data());
        let seg_at = |j: usize, at: usize| {
            let f = &frames[j];
            f.len() > t.hdr_len
                && conn(f) == own
                && checksum_ok(f, t.l4)
                && payload[at..].starts_with(&f[t.hdr_len..])
        };
        assert!(seg_at(i, 0), "the frame's first segment is packet {i}");
        let (mut at, mut n, mut j) = (0, 0, i);
        loop {
            let f = &frames[j];
            let seg = &f[t.hdr_len..];
            assert!(seg.len() <= t.mss, "segment {j} longer than the MSS");
            assert!(
                checksum_ok(f, t.l4),
                "segment {j} merged with a wrong checksum"
            );
            at += seg.len();
            n += 1;
            if at == payload.len() {
                break;
            }
            j = (j + 1..frames.len())
                .find(|&k| !used[k] && seg_at(k, at))
                .unwrap_or_else(|| panic!("no packet after {j} carries the frame's bytes at {at}"));
            used[j] = true;
        }
        assert!(n >= 2, "a frame of one segment");
    }
    assert!(used.iter().all(|&u| u), "packets lost");
    assert_eq!(merged, m.frames);
    m.frames
}
