//! Invariant checks of the `ipf` fuzz target, shared with the crash-regression test
//! (`crates/conntrack/tests/fuzz_regressions.rs` path-imports this file), so that a committed
//! input is replayed through exactly the checks that found it.
//!
//! The input drives a [`Reassembler`] (conntrack's fragment reassembly) with a configuration
//! its first byte picks (small limits, to reach them), then a sequence of packets: each either
//! raw bytes or an IPv4 or IPv6 fragment built from a few bytes (datagram, offset, length, more
//! fragments), so that the fuzzer reaches overlaps, duplicates and completions, with time
//! moving on and expiry between packets. After every step:
//! - the reassembler holds no more fragments than its limit, and exactly the packets it was
//!   given and has not handed back: every packet comes back once (completed, refused, dropped
//!   with its datagram or expired), never twice;
//! - a completed datagram is its fragments in offset order, without gaps or overlaps, from
//!   offset 0 to a last fragment, within 65535 bytes and the per-datagram limit, and its L4
//!   length is the data after the L4 header;
//! - at the end, expiry hands back everything still held.

use std::collections::BTreeSet;

use conntrack::frag::{FragConfig, FragInfo, Reassembler, Verdict};

/// A packet with the identity of its place in the input.
#[derive(Debug, PartialEq, Eq)]
pub struct Pkt {
    id: usize,
    bytes: Vec<u8>,
}

impl AsRef<[u8]> for Pkt {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

const TIMEOUT_MS: u64 = 100;

fn config(sel: u8) -> FragConfig {
    let max_frags = [4, 16, 64, 1000][usize::from(sel & 3)];
    let per = [2, 8, 58, 1000][usize::from(sel >> 2 & 3)];
    let min = [0, 68, 400, 1280][usize::from(sel >> 4 & 3)];
    FragConfig {
        enabled_v4: sel & 0x40 == 0,
        enabled_v6: sel & 0x80 == 0,
        max_frags,
        min_frag_size_v4: min,
        min_frag_size_v6: min,
        timeout_ms: TIMEOUT_MS,
        max_frags_per_datagram: per,
    }
}

/// An IPv4 or IPv6 fragment of datagram `ident`: its data (`len` bytes at `offset`) is a
/// pattern of the datagram's bytes, so that equal ranges of two fragments hold equal bytes.
fn fragment(ipv6: bool, ident: u8, offset: usize, len: usize, more: bool, proto: u8) -> Vec<u8> {
    let data = (offset..offset + len).map(|i| (i as u8) ^ ident);
    let mut p = Vec::with_capacity(48 + len);
    if ipv6 {
        let plen = (8 + len) as u16;
        p.extend_from_slice(&[0x60, 0, 0, 0]);
        p.extend_from_slice(&plen.to_be_bytes());
        p.extend_from_slice(&[44, 64]);
        p.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        let off = ((offset / 8) as u16) << 3 | u16::from(more);
        p.extend_from_slice(&[proto, 0]);
        p.extend_from_slice(&off.to_be_bytes());
        p.extend_from_slice(&u32::from(ident).to_be_bytes());
    } else {
        let tot = (20 + len) as u16;
        let off = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
        p.extend_from_slice(&[0x45, 0]);
        p.extend_from_slice(&tot.to_be_bytes());
        p.extend_from_slice(&[0, ident]);
        p.extend_from_slice(&off.to_be_bytes());
        p.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    }
    p.extend(data);
    p
}

/// Runs every check on `data`.
pub fn check_ipf(data: &[u8]) {
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let cfg = config(sel);
    let mut r = Reassembler::<Pkt>::new(cfg.clone());
    let mut held = BTreeSet::new();
    let mut now = 0u64;
    let mut id = 0;
    let mut out = Vec::new();
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        let ipv6 = op & 1 != 0;
        let bytes = if op & 2 != 0 {
            // Raw: a length byte, then that many bytes.
            let Some((&n, tail)) = rest.split_first() else {
                break;
            };
            let n = usize::from(n).min(tail.len());
            rest = &tail[n..];
            tail[..n].to_vec()
        } else {
            // Built: datagram, offset (in 8-byte units), length, protocol.
            let Some((b, tail)) = rest.split_first_chunk::<4>() else {
                break;
            };
            rest = tail;
            let offset = usize::from(u16::from_be_bytes([b[0], b[1]]) & 0x1fff) * 8;
            let len = usize::from(b[2]) * 8 + usize::from(b[3] & 7);
            let proto = [6, 17, 1, 58][usize::from(b[3] >> 3 & 3)];
            fragment(ipv6, op >> 5 & 3, offset, len, op & 4 != 0, proto)
        };
        now += [0, 1, TIMEOUT_MS / 2, TIMEOUT_MS + 1][usize::from(op >> 3 & 3)];
        let zone = u16::from(op >> 7);
        id += 1;
        held.insert(id);
        match r.push(Pkt { id, bytes }, 0, ipv6, zone, now) {
            Verdict::Held => {}
            Verdict::NotFragment(p, info) => {
                assert!(info.frag.is_none(), "{info:?}");
                give_back(&mut held, p.id);
            }
            Verdict::Drop(p, _) => give_back(&mut held, p.id),
            Verdict::DropDatagram(ps, _) => {
                assert_eq!(
                    ps.last().map(|p| p.id),
                    Some(id),
                    "the packet that doomed it last"
                );
                for p in ps {
                    give_back(&mut held, p.id);
                }
            }
            Verdict::Complete(d) => {
                assert_eq!(d.ipv6, ipv6);
                assert_eq!(d.zone, zone);
                check_datagram(&cfg, &d.frags, d.l4_ofs, d.l4_len, ipv6);
                for p in d.frags {
                    give_back(&mut held, p.id);
                }
            }
        }
        if op & 0x18 != 0 {
            r.expire(now, &mut out);
            for p in out.drain(..) {
                give_back(&mut held, p.id);
            }
        }
        assert!(
            r.held() <= cfg.max_frags,
            "{} held, limit {}",
            r.held(),
            cfg.max_frags
        );
        assert_eq!(
            r.held(),
            held.len(),
            "held fragments and the packets not handed back"
        );
    }
    r.expire(u64::MAX, &mut out);
    for p in out.drain(..) {
        give_back(&mut held, p.id);
    }
    assert!(held.is_empty(), "never handed back: {held:?}");
    assert_eq!((r.held(), r.datagrams()), (0, 0));
}

fn give_back(held: &mut BTreeSet<usize>, id: usize) {
    assert!(held.remove(&id), "packet {id} handed back twice");
}

/// A completed datagram's fragments cover it exactly, in order.
fn check_datagram(cfg: &FragConfig, frags: &[Pkt], l4_ofs: usize, l4_len: usize, ipv6: bool) {
    assert!(!frags.is_empty() && frags.len() <= cfg.max_frags_per_datagram);
    let mut end = 0;
    let mut first_data = 0;
    for (i, p) in frags.iter().enumerate() {
        let info = FragInfo::parse(&p.bytes, 0, ipv6).expect("a held fragment parses");
        let pos = info.frag.expect("a held fragment is a fragment");
        assert_eq!(
            pos.offset,
            end,
            "fragment {i} of {}: a gap or an overlap",
            frags.len()
        );
        assert_eq!(
            pos.more,
            i + 1 < frags.len(),
            "fragment {i}: more fragments"
        );
        if i == 0 {
            first_data = pos.data_ofs;
            assert!(
                l4_ofs >= first_data && l4_ofs <= p.bytes.len(),
                "L4 at {l4_ofs}"
            );
        }
        end = pos.end();
    }
    assert!(end <= 65535, "a datagram of {end} bytes");
    assert_eq!(l4_len, end - (l4_ofs - first_data), "L4 length");
}
