//! UDP segmentation of super-frames (`datapath::gso_udp`, USO), alone and in a PMD: every
//! header field of every datagram is checked against values computed here (IPv4 total length,
//! identification +1 per datagram, flags, TTL, header checksum; IPv6 payload length; UDP
//! ports, length and checksum), and the payload put back together; bad super-frames are
//! refused by reason; in a PMD a UDP super-frame goes whole only to a queue that takes USO,
//! is segmented for the others (after a tunnel push, as `gso_tunnel_udp.rs` checks), and
//! is counted by kind.

mod common;

use common::VecRxq;

use std::sync::{Arc, Mutex};

use datapath::dpif::parse_megaflow;
use datapath::gso::GsoError;
use datapath::gso_udp::{MAX_SEGMENTS, UdpSuper};
use datapath::packet::{Batch, Packet, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::TxQueue;
use datapath::tx_gso::TxGsoStats;
use flow::odp::PortNames;

/// How a test super-frame looks.
#[derive(Clone, Copy)]
struct Shape {
    ipv6: bool,
    vlan: bool,
    payload: usize,
    ip_id: u16,
}

impl Shape {
    fn v4(payload: usize) -> Shape {
        Shape {
            ipv6: false,
            vlan: false,
            payload,
            ip_id: 0xfffe,
        }
    }
    fn v6(payload: usize) -> Shape {
        Shape {
            ipv6: true,
            ..Shape::v4(payload)
        }
    }
    fn l3(&self) -> usize {
        if self.vlan { 18 } else { 14 }
    }
    fn l4(&self) -> usize {
        self.l3() + if self.ipv6 { 40 } else { 20 }
    }
}

fn payload_byte(i: usize) -> u8 {
    (i.wrapping_mul(13) ^ (i >> 7)) as u8
}

const SRC6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const DST6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// A UDP super-frame (Ethernet, optional VLAN tag, IPv4 with DF or IPv6, UDP 40000 -> 5201)
/// whose UDP length and checksum fields hold garbage, as a partial sum looks to the switch.
fn super_frame(s: &Shape) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    if s.vlan {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
    }
    let udp_len = 8 + s.payload;
    if s.ipv6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(udp_len as u16).to_be_bytes());
        f.extend_from_slice(&[17, 64]);
        f.extend_from_slice(&SRC6);
        f.extend_from_slice(&DST6);
    } else {
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        f.extend_from_slice(&((20 + udp_len) as u16).to_be_bytes());
        f.extend_from_slice(&s.ip_id.to_be_bytes());
        f.extend_from_slice(&[0x40, 0, 64, 17, 0xde, 0xad, 10, 0, 0, 1, 10, 0, 0, 2]);
    }
    f.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51, 0xbe, 0xef, 0x12, 0x34]);
    f.extend((0..s.payload).map(payload_byte));
    f
}

fn super_packet(s: &Shape, size: u16) -> Packet {
    let mut p = Packet::from_slice(&super_frame(s));
    p.meta.l3 = s.l3() as u16;
    p.meta.gso_size = size;
    p
}

/// The ones' complement sum of `d` (folded, not inverted).
fn sum(d: &[u8]) -> u32 {
    let mut s: u32 = d
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s
}

fn be16(f: &[u8], at: usize) -> usize {
    usize::from(u16::from_be_bytes([f[at], f[at + 1]]))
}

/// Checks every header field of datagrams `segs` of super-frame shape `s` cut at `size`;
/// panics on the first difference.
fn verify(s: &Shape, size: usize, segs: &[Vec<u8>]) {
    let n = s.payload.div_ceil(size).max(1);
    assert_eq!(segs.len(), n, "datagram count");
    let orig = super_frame(s);
    let (l3, l4) = (s.l3(), s.l4());
    let mut data = Vec::new();
    for (k, f) in segs.iter().enumerate() {
        let len = if k + 1 == n {
            s.payload - k * size
        } else {
            size
        };
        assert_eq!(f.len(), l4 + 8 + len, "datagram {k} length");
        assert_eq!(&f[..l3], &orig[..l3], "datagram {k}: Ethernet header");
        if s.ipv6 {
            assert_eq!(
                &f[l3..l3 + 4],
                &orig[l3..l3 + 4],
                "datagram {k}: version, class, flow"
            );
            assert_eq!(be16(f, l3 + 4), 8 + len, "datagram {k}: payload length");
            assert_eq!(
                &f[l3 + 6..l4],
                &orig[l3 + 6..l4],
                "datagram {k}: next, hops, addresses"
            );
        } else {
            assert_eq!(be16(f, l3 + 2), 20 + 8 + len, "datagram {k}: total length");
            let id = s.ip_id.wrapping_add(k as u16);
            assert_eq!(
                be16(f, l3 + 4),
                usize::from(id),
                "datagram {k}: identification"
            );
            assert_eq!(
                &f[l3 + 6..l3 + 10],
                &[0x40, 0, 64, 17],
                "datagram {k}: DF, TTL, UDP"
            );
            assert_eq!(
                &f[l3 + 12..l4],
                &orig[l3 + 12..l4],
                "datagram {k}: addresses"
            );
            assert_eq!(
                sum(&f[l3..l4]),
                0xffff,
                "datagram {k}: IPv4 header checksum"
            );
        }
        assert_eq!(
            &f[l4..l4 + 4],
            &[0x9c, 0x40, 0x14, 0x51],
            "datagram {k}: ports"
        );
        assert_eq!(be16(f, l4 + 4), 8 + len, "datagram {k}: UDP length");
        assert_ne!(be16(f, l4 + 6), 0, "datagram {k}: a UDP checksum");
        let mut pseudo = Vec::new();
        if s.ipv6 {
            pseudo.extend_from_slice(&SRC6);
            pseudo.extend_from_slice(&DST6);
            pseudo.extend_from_slice(&((8 + len) as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
        } else {
            pseudo.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2, 0, 17]);
            pseudo.extend_from_slice(&((8 + len) as u16).to_be_bytes());
        }
        pseudo.extend_from_slice(&f[l4..]);
        assert_eq!(sum(&pseudo), 0xffff, "datagram {k}: UDP checksum");
        data.extend_from_slice(&f[l4 + 8..]);
    }
    assert_eq!(data, &orig[l4 + 8..], "the payload put back together");
}

fn segment_all(s: &Shape, size: u16) -> Vec<Vec<u8>> {
    let p = super_packet(s, size);
    let t = UdpSuper::of(&p).expect("a UDP super-frame");
    let mut pool = Pool::new(64, 0);
    (0..t.n_segments(&p))
        .map(|k| {
            let seg = t.segment(&p, k, &mut pool);
            assert_eq!(seg.meta.gso_size, 0);
            seg.data().to_vec()
        })
        .collect()
}

#[test]
fn ipv4_datagrams_with_a_short_last_one_and_the_identification_wrapping() {
    let s = Shape::v4(8192 * 7 + 100);
    verify(&s, 8192, &segment_all(&s, 8192));
    let s = Shape {
        vlan: true,
        ..Shape::v4(1400 * 10)
    };
    verify(&s, 1400, &segment_all(&s, 1400));
}

#[test]
fn ipv6_datagrams_a_multiple_of_the_size_and_not() {
    for payload in [1452 * 9, 1452 * 9 + 1, 60_000] {
        let s = Shape::v6(payload);
        verify(&s, 1452, &segment_all(&s, 1452));
    }
}

#[test]
fn a_super_frame_no_longer_than_its_size_is_one_datagram() {
    for s in [Shape::v4(500), Shape::v6(0)] {
        verify(&s, 1400, &segment_all(&s, 1400));
    }
}

#[test]
fn a_super_frame_without_extraction_is_found_after_its_ethernet_header() {
    let s = Shape {
        vlan: true,
        ..Shape::v6(3000)
    };
    let mut p = super_packet(&s, 1000);
    p.meta.l3 = datapath::packet::NO_OFS;
    let t = UdpSuper::of(&p).unwrap();
    assert_eq!((t.l3, t.l4, t.ipv6, t.size), (18, 58, true, 1000));
}

#[test]
fn bad_super_frames_are_refused_by_reason() {
    // A gso_size that makes more datagrams than a socket may send at once.
    let s = Shape::v4(MAX_SEGMENTS * 100);
    assert!(UdpSuper::of(&super_packet(&s, 100)).is_ok());
    assert_eq!(
        UdpSuper::of(&super_packet(&s, 99)),
        Err(GsoError::MssTooSmall)
    );
    assert_eq!(
        UdpSuper::of(&super_packet(&s, 1)),
        Err(GsoError::MssTooSmall)
    );
    // Not UDP: TCP, an IPv4 fragment, not IP.
    let mut f = super_frame(&Shape::v4(3000));
    f[23] = 6;
    let refused = |f: &[u8]| {
        let mut p = Packet::from_slice(f);
        p.meta.gso_size = 1000;
        UdpSuper::of(&p)
    };
    assert_eq!(refused(&f), Err(GsoError::NotTcp));
    let mut f = super_frame(&Shape::v4(3000));
    f[20] = 0x20; // more fragments
    assert_eq!(refused(&f), Err(GsoError::NotTcp));
    let mut f = super_frame(&Shape::v4(3000));
    f[12] = 0x08;
    f[13] = 0x06;
    assert_eq!(refused(&f), Err(GsoError::NotTcp));
    // The UDP header past the end of the frame.
    let f = super_frame(&Shape::v4(0));
    assert_eq!(refused(&f[..f.len() - 3]), Err(GsoError::Malformed));
    let f = super_frame(&Shape::v6(0));
    assert_eq!(refused(&f[..50]), Err(GsoError::Malformed));
    // An IP packet over 64 KiB.
    let s = Shape::v4(65_535 - 28 + 1);
    assert_eq!(
        UdpSuper::of(&super_packet(&s, 8192)),
        Err(GsoError::TooLong)
    );
    // gso_size 0: not a super-frame.
    assert_eq!(
        UdpSuper::of(&super_packet(&Shape::v4(10), 0)),
        Err(GsoError::NotTcp)
    );
}

#[test]
fn prepare_partial_leaves_the_pseudo_header_sum_of_the_whole_datagram() {
    for s in [Shape::v4(20_000), Shape::v6(20_000)] {
        let mut p = super_packet(&s, 1400);
        UdpSuper::prepare_partial(&mut p).unwrap();
        let f = p.data();
        let l4 = s.l4();
        assert_eq!(be16(f, l4 + 4), 8 + 20_000);
        let mut pseudo = Vec::new();
        if s.ipv6 {
            pseudo.extend_from_slice(&SRC6);
            pseudo.extend_from_slice(&DST6);
            pseudo.extend_from_slice(&(20_008u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
        } else {
            assert_eq!(sum(&f[14..34]), 0xffff);
            pseudo.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2, 0, 17]);
            pseudo.extend_from_slice(&(20_008u16).to_be_bytes());
        }
        assert_eq!(be16(f, l4 + 6), sum(&pseudo) as usize);
    }
}

// ---- In a PMD ----

/// Keeps what it is sent: each batch as (frame, gso_size) pairs.
type Sent = Arc<Mutex<Vec<Vec<(Vec<u8>, u16)>>>>;

struct CaptureTxq {
    tso: bool,
    uso: bool,
    sent: Sent,
}

impl TxQueue for CaptureTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let b = batch
            .packets()
            .iter()
            .map(|p| (p.data().to_vec(), p.meta.gso_size))
            .collect();
        self.sent.lock().unwrap().push(b);
        pool.free_batch(batch);
    }
    fn tso(&self) -> bool {
        self.tso
    }
    fn uso(&self) -> bool {
        self.uso
    }
}

/// A PMD receiving `frames` on port 1 (p0), with capturing ports 2 (no offload), 3 (TSO
/// only) and 4 (TSO and USO), their counters, and `flows`; runs until everything is through.
fn run_pmd(
    frames: Vec<(Vec<u8>, u16)>,
    flows: &[(&str, &str)],
) -> ([Sent; 3], [Arc<TxGsoStats>; 3], Pmd) {
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(VecRxq { frames, next: 0 }),
        cycles: 0,
    });
    let sent: [Sent; 3] = Default::default();
    let counters: [Arc<TxGsoStats>; 3] = Default::default();
    let mut names = PortNames::new();
    names.insert("p0", 1);
    for (i, (tso, uso)) in [(false, false), (true, false), (true, true)]
        .into_iter()
        .enumerate()
    {
        let no = i as u32 + 2;
        let q = CaptureTxq {
            tso,
            uso,
            sent: sent[i].clone(),
        };
        pmd.add_port_txq_counted(no, Box::new(q), None, counters[i].clone());
        names.insert(&format!("p{no}"), no);
    }
    for (k, a) in flows {
        pmd.add_flow(parse_megaflow(&names, k, a).unwrap()).unwrap();
    }
    for _ in 0..10 {
        pmd.poll_once();
    }
    (sent, counters, pmd)
}

fn frames_of(s: &Sent) -> Vec<(Vec<u8>, u16)> {
    s.lock().unwrap().iter().flatten().cloned().collect()
}

#[test]
fn a_udp_super_frame_goes_whole_only_to_a_queue_that_takes_uso() {
    let s = Shape::v4(8192 * 6);
    let (sent, counters, pmd) = run_pmd(
        vec![(super_frame(&s), 8192)],
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "p2,p3,p4")],
    );
    for (i, what) in [(0, "no offload"), (1, "TSO only")] {
        let got = frames_of(&sent[i]);
        assert!(got.iter().all(|(_, g)| *g == 0), "{what}: datagrams");
        let segs: Vec<Vec<u8>> = got.into_iter().map(|(f, _)| f).collect();
        verify(&s, 8192, &segs);
        assert_eq!(
            counters[i].udp.get(),
            (0, 1, 6),
            "{what}: counted segmented"
        );
        assert_eq!(counters[i].get(), (0, 0, 0), "{what}: no TCP counted");
    }
    assert_eq!(
        frames_of(&sent[2]),
        vec![(super_frame(&s), 8192)],
        "USO: whole"
    );
    assert_eq!(counters[2].udp.get(), (1, 0, 0));
    let st = pmd.stats();
    assert_eq!((st.gso_frames, st.gso_segments, st.gso_drops), (2, 12, 0));
}

#[test]
fn a_udp_super_frame_is_pushed_whole_and_cut_at_an_output_without_tunnel_gso() {
    let push = "tnl_push(tnl_port(9),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,\
                src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,\
                tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),\
                vxlan(flags=0x8000000,vni=0x64)),out_port(0))";
    let s = Shape::v6(1452 * 40 + 7);
    let actions = format!("{push},p4");
    let (sent, counters, pmd) = run_pmd(
        vec![(super_frame(&s), 1452)],
        &[("in_port(p0),eth_type(0x86dd),ipv6(frag=no)", &actions)],
    );
    let segs: Vec<Vec<u8>> = frames_of(&sent[2])
        .into_iter()
        .map(|(f, g)| {
            assert_eq!(g, 0);
            assert_eq!(&f[12..14], &[0x08, 0x00]);
            assert_eq!(be16(&f, 16), f.len() - 14, "outer IPv4 total length");
            assert_eq!(be16(&f, 38), f.len() - 34, "outer UDP length");
            f[50..].to_vec()
        })
        .collect();
    verify(&s, 1452, &segs);
    let st = pmd.stats();
    assert_eq!(
        (st.gso_frames, st.gso_segments, st.gso_encapsulated),
        (1, 41, 1)
    );
    // Encapsulated whole, cut by the port that takes USO but not UDP-tunnel GSO.
    assert_eq!(counters[2].udp.get(), (0, 1, 41));
}

#[test]
fn a_bad_udp_super_frame_is_a_counted_drop_and_costs_only_itself() {
    let s = Shape::v4(8192 * 2);
    let frames = vec![(super_frame(&s), 1), (super_frame(&s), 8192)];
    let (sent, _, pmd) = run_pmd(
        frames,
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "p2")],
    );
    let segs: Vec<Vec<u8>> = frames_of(&sent[0]).into_iter().map(|(f, _)| f).collect();
    verify(&s, 8192, &segs);
    let st = pmd.stats();
    assert_eq!(st.gso_drops, 1);
    assert_eq!(st.gso_drop_reasons[GsoError::MssTooSmall.index()], 1);
}
