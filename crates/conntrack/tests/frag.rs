//! Fragment reassembly through the public API: orders, limits, refusals, expiry, and properties
//! (any split in any order completes; any input never panics and every packet comes back once).

use conntrack::frag::{Datagram, FragConfig, FragDrop, FragInfo, Reassembler, Verdict};
use proptest::prelude::*;
use wire::IpProtocol;

const L3: usize = 14;
const UDP: u8 = 17;
const TCP: u8 = 6;

/// A frame with an identity, so that tests can see every packet come back exactly once.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pkt {
    id: usize,
    bytes: Vec<u8>,
}

impl AsRef<[u8]> for Pkt {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IPv4 fragment 10.0.0.1 -> 10.0.0.2 carrying `data` at byte `offset`.
fn v4(ident: u16, proto: u8, offset: usize, more: bool, data: &[u8]) -> Vec<u8> {
    let mut f = eth(0x0800);
    let total = (20 + data.len()) as u16;
    let flg_off = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&ident.to_be_bytes());
    f.extend_from_slice(&flg_off.to_be_bytes());
    f.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(data);
    f
}

/// An IPv6 fragment 2001:db8::1 -> 2001:db8::2, with a hop-by-hop header before the fragment
/// header when `hbh`, carrying `data` at byte `offset` of the fragmentable part.
fn v6(ident: u32, next: u8, offset: usize, more: bool, data: &[u8], hbh: bool) -> Vec<u8> {
    let mut f = eth(0x86dd);
    let plen = (if hbh { 8 } else { 0 } + 8 + data.len()) as u16;
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&plen.to_be_bytes());
    f.extend_from_slice(&[if hbh { 0 } else { 44 }, 64]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    if hbh {
        // Next header fragment; one PadN option filling the 8 bytes.
        f.extend_from_slice(&[44, 0, 1, 4, 0, 0, 0, 0]);
    }
    let off_m = (offset as u16) | u16::from(more);
    f.extend_from_slice(&[next, 0]);
    f.extend_from_slice(&off_m.to_be_bytes());
    f.extend_from_slice(&ident.to_be_bytes());
    f.extend_from_slice(data);
    f
}

/// A UDP datagram's L4 bytes: an 8-byte header and `n` payload bytes.
fn udp(n: usize) -> Vec<u8> {
    let len = (8 + n) as u16;
    let mut d = vec![0x04, 0xd2, 0x16, 0x2e];
    d.extend_from_slice(&len.to_be_bytes());
    d.extend_from_slice(&[0, 0]);
    d.extend((0..n).map(|i| i as u8));
    d
}

/// Splits `data` at `cuts` (sorted multiples of 8) into IPv4 fragments.
fn split_v4(ident: u16, data: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    bounds(data.len(), cuts)
        .map(|(s, e)| v4(ident, UDP, s, e != data.len(), &data[s..e]))
        .collect()
}

/// Splits a fragmentable part (destination options, then UDP) into IPv6 fragments.
fn split_v6(ident: u32, data: &[u8], cuts: &[usize], hbh: bool) -> Vec<Vec<u8>> {
    bounds(data.len(), cuts)
        .map(|(s, e)| v6(ident, 60, s, e != data.len(), &data[s..e], hbh))
        .collect()
}

fn bounds(len: usize, cuts: &[usize]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let starts = std::iter::once(0).chain(cuts.iter().copied());
    let ends = cuts.iter().copied().chain(std::iter::once(len));
    starts.zip(ends)
}

/// Destination options (8 bytes, next header UDP) followed by a UDP datagram.
fn dstopt_udp(n: usize) -> Vec<u8> {
    let mut d = vec![UDP, 0, 1, 4, 0, 0, 0, 0];
    d.extend(udp(n));
    d
}

fn small() -> FragConfig {
    FragConfig {
        min_frag_size_v4: 0,
        min_frag_size_v6: 0,
        max_frags_per_datagram: 10_000,
        ..FragConfig::default()
    }
}

fn held(v: Verdict<Vec<u8>>) {
    assert!(matches!(v, Verdict::Held), "expected Held, got {v:?}");
}

fn complete(v: Verdict<Vec<u8>>) -> Datagram<Vec<u8>> {
    match v {
        Verdict::Complete(d) => d,
        v => panic!("expected Complete, got {v:?}"),
    }
}

fn dropped<T: std::fmt::Debug>(v: Verdict<T>, reason: FragDrop) {
    assert!(
        matches!(v, Verdict::Drop(_, r) if r == reason),
        "expected Drop({reason}), got {v:?}"
    );
}

#[test]
fn v4_first_fragment_last_completes() {
    let frags = split_v4(1, &udp(100), &[24, 64]);
    let mut r = Reassembler::new(small());
    held(r.push(frags[2].clone(), L3, false, 0, 0));
    held(r.push(frags[1].clone(), L3, false, 0, 0));
    assert_eq!(r.held(), 2);
    let d = complete(r.push(frags[0].clone(), L3, false, 0, 0));
    assert_eq!(d.frags, frags);
    assert_eq!((d.l4_ofs, d.l4_len, d.proto), (34, 108, IpProtocol::UDP));
    assert_eq!((r.held(), r.datagrams()), (0, 0));
}

#[test]
fn v6_without_extension_in_fragmentable_part() {
    let data = udp(200);
    let frags: Vec<_> = bounds(data.len(), &[80, 160])
        .map(|(s, e)| v6(9, UDP, s, e != data.len(), &data[s..e], false))
        .collect();
    let mut r = Reassembler::new(small());
    held(r.push(frags[1].clone(), L3, true, 3, 0));
    held(r.push(frags[0].clone(), L3, true, 3, 0));
    let d = complete(r.push(frags[2].clone(), L3, true, 3, 0));
    assert_eq!((d.l4_ofs, d.l4_len, d.zone), (L3 + 48, 208, 3));
}

#[test]
fn ethernet_padding_is_ignored() {
    let mut frags = split_v4(2, &udp(20), &[16]);
    // The last fragment is 34 bytes on the wire: padded to Ethernet's 60.
    frags[1].resize(60, 0xee);
    let mut r = Reassembler::new(small());
    held(r.push(frags[0].clone(), L3, false, 0, 0));
    let d = complete(r.push(frags[1].clone(), L3, false, 0, 0));
    assert_eq!(d.l4_len, 28);
}

#[test]
fn default_sizes_hold_full_fragments_and_refuse_small_ones() {
    // 1200-byte IPv4 fragments (OVS's minimum) and a small last one.
    let data = udp(2500);
    let frags = split_v4(3, &data, &[1176, 2352]);
    assert_eq!(frags[0].len() - L3, 1196);
    let mut r = Reassembler::new(FragConfig::default());
    dropped(
        r.push(frags[0].clone(), L3, false, 0, 0),
        FragDrop::TooSmall,
    );
    let frags = split_v4(3, &data, &[1184, 2368]);
    held(r.push(frags[2].clone(), L3, false, 0, 0));
    held(r.push(frags[0].clone(), L3, false, 0, 0));
    assert_eq!(
        complete(r.push(frags[1].clone(), L3, false, 0, 0)).l4_len,
        2508
    );
    assert_eq!(r.stats().v4.dropped(FragDrop::TooSmall), 1);

    // IPv6: 1280 bytes in all for a non-last fragment.
    let data = dstopt_udp(3000);
    let small6 = split_v6(4, &data, &[1224], false);
    dropped(
        r.push(small6[0].clone(), L3, true, 0, 0),
        FragDrop::TooSmall,
    );
    let frags = split_v6(4, &data, &[1232, 2464], false);
    assert_eq!(frags[0].len() - L3, 1280);
    held(r.push(frags[0].clone(), L3, true, 0, 0));
    held(r.push(frags[2].clone(), L3, true, 0, 0));
    let d = complete(r.push(frags[1].clone(), L3, true, 0, 0));
    assert_eq!((d.l4_ofs, d.l4_len), (L3 + 56, 3008));
    assert_eq!(r.stats().v6.dropped(FragDrop::TooSmall), 1);
}

#[test]
fn overlap_discards_the_whole_datagram_and_its_later_fragments() {
    for ipv6 in [false, true] {
        let data = dstopt_udp(100);
        let frags = if ipv6 {
            split_v6(5, &data, &[32, 64], true)
        } else {
            split_v4(5, &data, &[32, 64])
        };
        let overlapping = if ipv6 {
            v6(5, 60, 24, true, &data[24..48], true)
        } else {
            v4(5, UDP, 24, true, &data[24..48])
        };
        let mut r = Reassembler::new(small());
        held(r.push(frags[0].clone(), L3, ipv6, 0, 0));
        held(r.push(frags[2].clone(), L3, ipv6, 0, 0));
        match r.push(overlapping.clone(), L3, ipv6, 0, 0) {
            Verdict::DropDatagram(pkts, FragDrop::Overlap) => {
                assert_eq!(pkts, vec![frags[0].clone(), frags[2].clone(), overlapping]);
            }
            v => panic!("expected DropDatagram(overlap), got {v:?}"),
        }
        assert_eq!((r.held(), r.datagrams()), (0, 0));
        // RFC 5722: fragments not yet received are discarded too, until the deadline.
        dropped(
            r.push(frags[1].clone(), L3, ipv6, 0, 100),
            FragDrop::Discarded,
        );
        let c = r.stats().family(ipv6);
        assert_eq!(
            (c.dropped(FragDrop::Overlap), c.dropped(FragDrop::Discarded)),
            (3, 1)
        );
        // Past the deadline the key is free again.
        let mut out = Vec::new();
        r.expire(15_001, &mut out);
        assert!(out.is_empty());
        held(r.push(frags[1].clone(), L3, ipv6, 0, 15_001));
        held(r.push(frags[0].clone(), L3, ipv6, 0, 15_001));
        complete(r.push(frags[2].clone(), L3, ipv6, 0, 15_001));
    }
}

#[test]
fn same_place_different_bytes_is_an_overlap() {
    let data = udp(56);
    let frags = split_v4(6, &data, &[32]);
    let mut forged = frags[1].clone();
    *forged.last_mut().unwrap() ^= 1;
    let mut r = Reassembler::new(small());
    held(r.push(frags[1].clone(), L3, false, 0, 0));
    assert!(matches!(
        r.push(forged, L3, false, 0, 0),
        Verdict::DropDatagram(p, FragDrop::Overlap) if p.len() == 2
    ));
}

#[test]
fn fragment_containing_another_is_an_overlap() {
    let data = udp(120);
    let mut r = Reassembler::new(small());
    held(r.push(v4(7, UDP, 40, true, &data[40..56]), L3, false, 0, 0));
    assert!(matches!(
        r.push(v4(7, UDP, 32, true, &data[32..64]), L3, false, 0, 0),
        Verdict::DropDatagram(_, FragDrop::Overlap)
    ));
}

#[test]
fn last_fragment_that_moves_the_end_discards_the_datagram() {
    let data = udp(120);
    // A second last fragment ending elsewhere (extending the known total).
    let mut r = Reassembler::new(small());
    held(r.push(v4(8, UDP, 64, false, &data[64..96]), L3, false, 0, 0));
    assert!(matches!(
        r.push(v4(8, UDP, 96, false, &data[96..128]), L3, false, 0, 0),
        Verdict::DropDatagram(p, FragDrop::Inconsistent) if p.len() == 2
    ));
    // A last fragment ending before data already held (shortening).
    let mut r = Reassembler::new(small());
    held(r.push(v4(8, UDP, 64, true, &data[64..96]), L3, false, 0, 0));
    assert!(matches!(
        r.push(v4(8, UDP, 16, false, &data[16..32]), L3, false, 0, 0),
        Verdict::DropDatagram(_, FragDrop::Inconsistent)
    ));
    // A non-last fragment past the known end.
    let mut r = Reassembler::new(small());
    held(r.push(v4(8, UDP, 32, false, &data[32..64]), L3, false, 0, 0));
    assert!(matches!(
        r.push(v4(8, UDP, 64, true, &data[64..96]), L3, false, 0, 0),
        Verdict::DropDatagram(_, FragDrop::Inconsistent)
    ));
    assert_eq!(r.stats().v4.dropped(FragDrop::Inconsistent), 2);
}

#[test]
fn timeout_hands_fragments_back() {
    let frags = split_v4(9, &udp(100), &[40, 80]);
    let mut r = Reassembler::new(small());
    held(r.push(frags[0].clone(), L3, false, 0, 1000));
    held(r.push(frags[2].clone(), L3, false, 0, 9000));
    let mut out = Vec::new();
    r.expire(16_000, &mut out);
    assert!(
        out.is_empty(),
        "the deadline runs from the first fragment: 1000 + 15000"
    );
    r.expire(16_001, &mut out);
    assert_eq!(out, vec![frags[0].clone(), frags[2].clone()]);
    assert_eq!((r.held(), r.datagrams()), (0, 0));
    assert_eq!(r.stats().v4.dropped(FragDrop::Timeout), 2);
    // The missing fragment alone now starts a new datagram.
    held(r.push(frags[1].clone(), L3, false, 0, 16_002));
}

#[test]
fn expiry_skips_completed_datagrams_and_keeps_order() {
    let mut r = Reassembler::new(small());
    for i in 0..200u16 {
        let f = split_v4(i, &udp(40), &[24]);
        held(r.push(f[0].clone(), L3, false, 0, u64::from(i)));
        if i % 2 == 0 {
            complete(r.push(f[1].clone(), L3, false, 0, u64::from(i)));
        }
    }
    assert_eq!((r.held(), r.datagrams()), (100, 100));
    let mut out = Vec::new();
    r.expire(15_100, &mut out);
    // Datagrams opened at 1, 3, ..., 99 are past their deadline.
    assert_eq!(out.len(), 50);
    r.expire(u64::MAX, &mut out);
    assert_eq!((out.len(), r.held()), (100, 0));
}

#[test]
fn table_full_refuses_new_fragments() {
    let cfg = FragConfig {
        max_frags: 2,
        ..small()
    };
    let mut r = Reassembler::new(cfg);
    let a = split_v4(10, &udp(40), &[24]);
    let b = split_v4(11, &udp(40), &[24]);
    held(r.push(a[0].clone(), L3, false, 0, 0));
    held(r.push(b[0].clone(), L3, false, 0, 0));
    dropped(r.push(a[1].clone(), L3, false, 0, 0), FragDrop::TableFull);
    assert_eq!(r.held(), 2);
    // Raising the limit lets the datagram finish.
    let cfg = FragConfig {
        max_frags: 3,
        ..r.config().clone()
    };
    r.set_config(cfg);
    complete(r.push(a[1].clone(), L3, false, 0, 0));
}

#[test]
fn too_many_fragments_in_one_datagram() {
    let cfg = FragConfig {
        max_frags_per_datagram: 2,
        ..small()
    };
    let mut r = Reassembler::new(cfg);
    let f = split_v4(12, &udp(100), &[24, 48, 72]);
    held(r.push(f[0].clone(), L3, false, 0, 0));
    held(r.push(f[1].clone(), L3, false, 0, 0));
    assert!(matches!(
        r.push(f[2].clone(), L3, false, 0, 0),
        Verdict::DropDatagram(p, FragDrop::TooManyFrags) if p.len() == 3
    ));
    assert_eq!(r.held(), 0);
}

#[test]
fn too_long() {
    let mut r = Reassembler::new(small());
    // 8184 * 8 + 24 + 20 > 65535: ping of death.
    dropped(
        r.push(v4(13, UDP, 65472, false, &[0; 64]), L3, false, 0, 0),
        FragDrop::TooLong,
    );
    held(r.push(v4(13, UDP, 65472, false, &[0; 40]), L3, false, 0, 0));
    dropped(
        r.push(v6(13, UDP, 65480, false, &[0; 48], true), L3, true, 0, 0),
        FragDrop::TooLong,
    );
    // The total fits the last fragment's header but not the first fragment's, with options.
    let mut r = Reassembler::new(small());
    let last = v4(14, UDP, 65504, false, &[0; 8]);
    let mut first = v4(14, UDP, 0, true, &udp(0));
    first[L3] = 0x46;
    first.splice(L3 + 20..L3 + 20, [1, 1, 1, 1]);
    first[L3 + 3] += 4;
    held(r.push(last, L3, false, 0, 0));
    held(r.push(first, L3, false, 0, 0));
    let mut filled = 0;
    let mut outcome = None;
    for off in (8..65504).step_by(1480) {
        let end = (off + 1480).min(65504);
        let data = vec![0; end - off];
        match r.push(v4(14, UDP, off, true, &data), L3, false, 0, 0) {
            Verdict::Held => filled += 1,
            v => {
                outcome = Some(v);
                break;
            }
        }
    }
    assert!(filled > 0);
    assert!(matches!(
        outcome,
        Some(Verdict::DropDatagram(_, FragDrop::TooLong))
    ));
    assert_eq!(r.held(), 0);
}

#[test]
fn malformed() {
    let mut r = Reassembler::new(small());
    let good = v4(15, UDP, 0, true, &udp(8));
    // Truncated IP header, L3 offset past the frame, total length past the frame.
    dropped(
        r.push(good[..L3 + 12].to_vec(), L3, false, 0, 0),
        FragDrop::Malformed,
    );
    dropped(r.push(good.clone(), 100, false, 0, 0), FragDrop::Malformed);
    let mut long = good.clone();
    long[L3 + 3] += 8;
    dropped(r.push(long, L3, false, 0, 0), FragDrop::Malformed);
    // IHL below 5, wrong version.
    let mut ihl = good.clone();
    ihl[L3] = 0x44;
    dropped(r.push(ihl, L3, false, 0, 0), FragDrop::Malformed);
    dropped(r.push(good.clone(), L3, true, 0, 0), FragDrop::Malformed);
    // Non-last data not a multiple of 8; empty fragment.
    dropped(
        r.push(v4(15, UDP, 0, true, &udp(9)), L3, false, 0, 0),
        FragDrop::Malformed,
    );
    dropped(
        r.push(v4(15, UDP, 8, false, &[]), L3, false, 0, 0),
        FragDrop::Malformed,
    );
    // First fragment without a whole TCP header (RFC 1858 / RFC 7112).
    dropped(
        r.push(v4(15, TCP, 0, true, &[0; 16]), L3, false, 0, 0),
        FragDrop::Malformed,
    );
    dropped(
        r.push(v6(15, TCP, 0, true, &[0; 16], false), L3, true, 0, 0),
        FragDrop::Malformed,
    );
    // IPv6 first fragment whose destination options run past the packet.
    dropped(
        r.push(
            v6(15, 60, 0, true, &[UDP, 2, 0, 0, 0, 0, 0, 0], false),
            L3,
            true,
            0,
            0,
        ),
        FragDrop::Malformed,
    );
    // IPv6 chain cut inside the fragment header.
    let mut cut = v6(15, UDP, 8, false, &[], false);
    cut.truncate(cut.len() - 4);
    cut[L3 + 5] = 4;
    dropped(r.push(cut, L3, true, 0, 0), FragDrop::Malformed);
    assert_eq!(r.held(), 0);
    assert_eq!(r.stats().total().dropped(FragDrop::Malformed), 11);
}

#[test]
fn whole_packets_pass_with_their_l4() {
    let mut r = Reassembler::new(small());
    let whole = v4(16, UDP, 0, false, &udp(10));
    let Verdict::NotFragment(p, info) = r.push(whole.clone(), L3, false, 0, 0) else {
        panic!("whole IPv4 packet not passed through");
    };
    assert_eq!(p, whole);
    assert_eq!(
        (info.l4_ofs, info.l4_len(), info.frag, info.atomic),
        (34, 18, None, false)
    );
    let mut plain6 = v6(0, 0, 0, false, &udp(4), true);
    // Rewrite the hop-by-hop header's next header to UDP, dropping the fragment header.
    plain6[L3 + 40] = UDP;
    plain6.drain(L3 + 48..L3 + 56);
    plain6[L3 + 5] -= 8;
    let Verdict::NotFragment(_, info) = r.push(plain6, L3, true, 0, 0) else {
        panic!("whole IPv6 packet not passed through");
    };
    assert_eq!(
        (info.l4_ofs, info.l4_len(), info.proto),
        (L3 + 48, 12, IpProtocol::UDP)
    );
    assert_eq!(r.stats().total(), Default::default());
}

#[test]
fn disabled_versions_refuse_fragments() {
    let cfg = FragConfig {
        enabled_v4: false,
        ..small()
    };
    let mut r = Reassembler::new(cfg);
    dropped(
        r.push(v4(17, UDP, 8, false, &[0; 8]), L3, false, 0, 0),
        FragDrop::Disabled,
    );
    held(r.push(v6(17, UDP, 8, false, &[0; 8], false), L3, true, 0, 0));
    assert!(matches!(
        r.push(v4(17, UDP, 0, false, &udp(0)), L3, false, 0, 0),
        Verdict::NotFragment(..)
    ));
}

#[test]
fn keys_separate_zones_and_ipv4_protocols_but_not_ipv6_next_headers() {
    let f = split_v4(18, &udp(40), &[24]);
    let mut r = Reassembler::new(small());
    held(r.push(f[0].clone(), L3, false, 1, 0));
    held(r.push(f[1].clone(), L3, false, 2, 0));
    // Same id, other protocol: another datagram.
    held(r.push(v4(18, TCP, 24, false, &f[1][L3 + 20..]), L3, false, 1, 0));
    assert_eq!(r.datagrams(), 3);
    complete(r.push(f[1].clone(), L3, false, 1, 0));
    // RFC 8200 keys on source, destination and identification only.
    let data = udp(40);
    let mut r = Reassembler::new(small());
    held(r.push(v6(19, UDP, 0, true, &data[..24], false), L3, true, 0, 0));
    let d = complete(r.push(v6(19, TCP, 24, false, &data[24..], false), L3, true, 0, 0));
    assert_eq!(d.proto, IpProtocol::UDP);
}

#[test]
fn parse_reports_fragment_positions() {
    let f = v4(20, UDP, 1480, true, &[0; 8]);
    let info = FragInfo::parse(&f, L3, false).unwrap();
    let pos = info.frag.unwrap();
    assert_eq!(
        (
            pos.ident,
            pos.offset,
            pos.more,
            pos.data_ofs,
            pos.unfrag_len
        ),
        (20, 1480, true, 34, 20)
    );
    assert!(!info.is_first());
}

/// Fisher-Yates with a small LCG, so that proptest shrinks the seed rather than a permutation.
fn shuffle<X>(v: &mut [X], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.swap(i, (seed >> 33) as usize % (i + 1));
    }
}

/// Pushes `pkts` and everything left after a final expiry; checks that every packet came back
/// exactly once and that the counters account for every fragment.
fn conserve(r: &mut Reassembler<Pkt>, pkts: Vec<(Pkt, usize, bool)>) -> Vec<Datagram<Pkt>> {
    let n = pkts.len();
    let mut seen = vec![0u8; n];
    let mut whole = 0;
    let mut done = Vec::new();
    for (i, (p, l3, ipv6)) in pkts.into_iter().enumerate() {
        match r.push(p, l3, ipv6, 0, i as u64) {
            Verdict::NotFragment(p, info) => {
                assert!(info.l4_ofs <= info.ip_end && info.ip_end <= p.bytes.len());
                seen[p.id] += 1;
                whole += 1;
            }
            Verdict::Held => {}
            Verdict::Drop(p, _) => seen[p.id] += 1,
            Verdict::DropDatagram(ps, _) => ps.iter().for_each(|p| seen[p.id] += 1),
            Verdict::Complete(d) => {
                d.frags.iter().for_each(|p| seen[p.id] += 1);
                done.push(d);
            }
        }
        assert!(r.held() <= r.config().max_frags);
    }
    let mut out = Vec::new();
    r.expire(u64::MAX, &mut out);
    out.iter().for_each(|p| seen[p.id] += 1);
    assert!(
        seen.iter().all(|&s| s == 1),
        "packets lost or duplicated: {seen:?}"
    );
    assert_eq!((r.held(), r.datagrams()), (0, 0));
    let t = r.stats().total();
    assert_eq!(
        t.drops.iter().sum::<u64>() + t.completed_frags,
        (n - whole) as u64
    );
    done
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any split of a datagram into 8-byte-aligned fragments, pushed in any order, completes on
    /// the last push with the original's L4 length, fragments in offset order.
    #[test]
    fn any_split_any_order_completes(
        ipv6 in any::<bool>(),
        hbh in any::<bool>(),
        n in 0usize..1500,
        slots in prop::collection::vec(any::<bool>(), 200),
        seed in any::<u64>(),
    ) {
        let data = if ipv6 { dstopt_udp(n) } else { udp(n) };
        // The first fragment holds the whole header chain up to UDP's header.
        let min_first = if ipv6 { 16 } else { 8 };
        let cuts: Vec<usize> = slots
            .iter()
            .enumerate()
            .filter(|&(_, &on)| on)
            .map(|(i, _)| (i + 1) * 8)
            .filter(|&c| c >= min_first && c < data.len())
            .collect();
        // A single piece would not be a fragment: force at least one cut when possible.
        prop_assume!(!cuts.is_empty());
        let frags = if ipv6 { split_v6(77, &data, &cuts, hbh) } else { split_v4(77, &data, &cuts) };
        let mut order: Vec<usize> = (0..frags.len()).collect();
        shuffle(&mut order, seed);
        let mut r = Reassembler::new(small());
        let (&last, rest) = order.split_last().unwrap();
        for &i in rest {
            let v = r.push(frags[i].clone(), L3, ipv6, 0, 0);
            prop_assert!(matches!(v, Verdict::Held), "{:?}", v);
        }
        let Verdict::Complete(d) = r.push(frags[last].clone(), L3, ipv6, 0, 0) else {
            return Err(TestCaseError::fail("not complete"));
        };
        prop_assert_eq!(&d.frags, &frags);
        prop_assert_eq!(d.l4_len, 8 + n);
        let ext = if hbh && ipv6 { 8 } else { 0 };
        prop_assert_eq!(d.l4_ofs, if ipv6 { L3 + 40 + ext + 16 } else { L3 + 20 });
        prop_assert_eq!(d.proto, IpProtocol::UDP);
        prop_assert_eq!(r.held(), 0);
    }

    /// Random fragments of a few datagrams (overlapping, duplicated, contradicting, some lined up
    /// on a coarse grid so that datagrams also complete) never panic, and every packet comes back
    /// exactly once.
    #[test]
    fn random_fragments_are_conserved(
        unit in prop::sample::select(vec![8usize, 64, 136]),
        frags in prop::collection::vec(
            (any::<bool>(), 0u16..3, 0usize..40, 0usize..4, any::<bool>(), any::<bool>()),
            1..60,
        ),
        max_frags in 1usize..40,
        per in 0usize..8,
    ) {
        let data = udp(400);
        let pkts = frags
            .iter()
            .enumerate()
            .map(|(id, &(ipv6, ident, off, len, more, copy))| {
                let s = off * unit % data.len();
                let e = (s + len * unit + usize::from(!more && unit == 8)).min(data.len());
                let body = if copy { data[s..e].to_vec() } else { vec![id as u8; e - s] };
                let bytes = if ipv6 {
                    v6(u32::from(ident), UDP, s, more, &body, ident == 1)
                } else {
                    v4(ident, UDP, s, more, &body)
                };
                (Pkt { id, bytes }, L3, ipv6)
            })
            .collect();
        let cfg = FragConfig { max_frags, max_frags_per_datagram: per, ..small() };
        let mut r = Reassembler::new(cfg);
        for d in conserve(&mut r, pkts) {
            prop_assert!(d.l4_len >= 8 && !d.frags.is_empty());
        }
    }

    /// Random bytes, with the version nibble often right, never panic.
    #[test]
    fn random_bytes_never_panic(
        pkts in prop::collection::vec(
            (prop::collection::vec(any::<u8>(), 0..120), 0usize..24, any::<bool>(), any::<bool>()),
            1..40,
        ),
    ) {
        let pkts = pkts
            .into_iter()
            .enumerate()
            .map(|(id, (mut bytes, l3, ipv6, fix))| {
                if fix && l3 < bytes.len() {
                    bytes[l3] = if ipv6 { 0x60 } else { 0x45 };
                }
                (Pkt { id, bytes }, l3, ipv6)
            })
            .collect();
        conserve(&mut Reassembler::new(small()), pkts);
    }
}
