//! TCP segmentation of super-frames (`datapath::gso`), alone and in a PMD: every segment is
//! checked with an independent decoder (etherparse): IPv4 header checksum, TCP checksum,
//! lengths, IP identification, sequence numbers, flags, and the payload put back together;
//! and segments merged back into super-frames (`datapath::gro`) by Linux's GRO rules.

mod common;

use common::VecRxq;

use std::sync::{Arc, Mutex};

use datapath::dpif::parse_megaflow;
use datapath::gso::{GsoError, TcpSuper, prepare_partial};
use datapath::packet::{Batch, MAX_BURST, Packet, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::TxQueue;
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use flow::odp::PortNames;

const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const CWR: u8 = 0x80;

/// How a test super-frame looks.
#[derive(Clone, Copy)]
struct Shape {
    ipv6: bool,
    vlan: bool,
    payload: usize,
    seq: u32,
    ip_id: u16,
    flags: u8,
}

impl Shape {
    fn v4(payload: usize) -> Shape {
        Shape {
            ipv6: false,
            vlan: false,
            payload,
            seq: 0xfffff000,
            ip_id: 0x1234,
            flags: ACK | PSH,
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
}

fn payload_byte(i: usize) -> u8 {
    (i.wrapping_mul(7) ^ (i >> 8)) as u8
}

/// A TCP super-frame (Ethernet, optional VLAN tag, IPv4 or IPv6, TCP with 12 bytes of
/// timestamp options) whose TCP checksum field holds garbage, as inside the switch.
fn super_frame(s: &Shape) -> Vec<u8> {
    let head = common::IpHead {
        ipv6: s.ipv6,
        vlan: s.vlan,
        id: s.ip_id,
        csum: 0xdead,
        ..Default::default()
    };
    let mut f = common::eth_ip(head, 6, 32 + s.payload);
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&5001u16.to_be_bytes());
    f.extend_from_slice(&s.seq.to_be_bytes());
    f.extend_from_slice(&0x0102_0304u32.to_be_bytes());
    f.extend_from_slice(&[0x80, s.flags, 0x01, 0xf5, 0xbe, 0xef, 0, 0]);
    f.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7]);
    f.extend((0..s.payload).map(payload_byte));
    f
}

fn super_packet(s: &Shape, mss: u16) -> Packet {
    let mut p = Packet::from_slice(&super_frame(s));
    p.meta.l3 = s.l3() as u16;
    p.meta.gso_size = mss;
    p
}

/// Checks `segs` against super-frame shape `s` with MSS `mss` using etherparse, and returns
/// nothing: panics on the first difference.
fn verify(s: &Shape, mss: usize, segs: &[Vec<u8>]) {
    let n = s.payload.div_ceil(mss).max(1);
    assert_eq!(segs.len(), n, "segment count");
    let mut data = Vec::new();
    for (k, seg) in segs.iter().enumerate() {
        let last = k + 1 == n;
        let p = SlicedPacket::from_ethernet(seg).unwrap_or_else(|e| panic!("segment {k}: {e}"));
        let Some(TransportSlice::Tcp(tcp)) = &p.transport else {
            panic!("segment {k}: not TCP");
        };
        match &p.net {
            Some(NetSlice::Ipv4(ip)) => {
                assert!(!s.ipv6);
                let h = ip.header();
                assert_eq!(
                    h.header_checksum(),
                    h.to_header().calc_header_checksum(),
                    "segment {k}: IPv4 header checksum"
                );
                assert_eq!(
                    usize::from(h.total_len()),
                    seg.len() - s.l3(),
                    "segment {k}"
                );
                assert_eq!(
                    h.identification(),
                    s.ip_id.wrapping_add(k as u16),
                    "IP id {k}"
                );
                assert!(h.dont_fragment());
                let want = tcp.calc_checksum_ipv4(h.source(), h.destination()).unwrap();
                assert_eq!(tcp.checksum(), want, "segment {k}: TCP checksum");
            }
            Some(NetSlice::Ipv6(ip)) => {
                assert!(s.ipv6);
                let h = ip.header();
                assert_eq!(usize::from(h.payload_length()), seg.len() - s.l3() - 40);
                let want = tcp.calc_checksum_ipv6(h.source(), h.destination()).unwrap();
                assert_eq!(tcp.checksum(), want, "segment {k}: TCP checksum");
            }
            _ => panic!("segment {k}: not IP"),
        }
        assert_eq!(
            tcp.sequence_number(),
            s.seq.wrapping_add((k * mss) as u32),
            "segment {k}: sequence number"
        );
        assert_eq!(tcp.acknowledgment_number(), 0x0102_0304);
        assert_eq!(tcp.options(), &[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7]);
        assert!(tcp.ack());
        assert_eq!(tcp.fin(), last && s.flags & FIN != 0, "FIN on segment {k}");
        assert_eq!(tcp.psh(), last && s.flags & PSH != 0, "PSH on segment {k}");
        assert_eq!(
            tcp.cwr(),
            k == 0 && s.flags & CWR != 0,
            "CWR on segment {k}"
        );
        let pl = tcp.payload();
        if last {
            assert!(pl.len() <= mss && (!pl.is_empty() || s.payload == 0));
        } else {
            assert_eq!(pl.len(), mss, "segment {k}: a full MSS");
        }
        data.extend_from_slice(pl);
    }
    assert!(
        data.iter().copied().eq((0..s.payload).map(payload_byte)),
        "payload put back together"
    );
}

fn segment_all(s: &Shape, mss: u16) -> Vec<Vec<u8>> {
    let p = super_packet(s, mss);
    let t = TcpSuper::of(&p).unwrap();
    let mut pool = Pool::new(64, 0);
    (0..t.n_segments(&p))
        .map(|k| {
            let seg = t.segment(&p, k, &mut pool);
            assert_eq!(seg.meta.gso_size, 0);
            assert_eq!(seg.meta.l3, p.meta.l3, "metadata copied");
            let v = seg.data().to_vec();
            pool.free(seg);
            v
        })
        .collect()
}

#[test]
fn ipv4_payload_not_a_multiple_of_the_mss_with_fin_psh_and_cwr() {
    let s = Shape {
        flags: ACK | PSH | FIN | CWR,
        ..Shape::v4(10_000)
    };
    let segs = segment_all(&s, 1448);
    assert_eq!(segs.len(), 7);
    verify(&s, 1448, &segs);
}

#[test]
fn ipv6_payload_a_multiple_of_the_mss_and_not() {
    for payload in [4000, 4001, 64_000] {
        let s = Shape {
            flags: ACK | PSH | CWR,
            ..Shape::v6(payload)
        };
        verify(&s, 1000, &segment_all(&s, 1000));
    }
}

#[test]
fn the_ip_id_and_the_sequence_number_wrap() {
    let s = Shape {
        ip_id: 0xfffe,
        seq: u32::MAX - 100,
        ..Shape::v4(5000)
    };
    verify(&s, 1200, &segment_all(&s, 1200));
}

#[test]
fn a_vlan_tagged_super_frame_and_one_no_longer_than_the_mss() {
    let s = Shape {
        vlan: true,
        flags: ACK | FIN | PSH,
        ..Shape::v4(9000)
    };
    verify(&s, 1460, &segment_all(&s, 1460));
    let s = Shape {
        flags: ACK | FIN | PSH | CWR,
        ..Shape::v6(700)
    };
    verify(&s, 1460, &segment_all(&s, 1460));
}

#[test]
fn what_is_not_tcp_over_ip_is_refused() {
    let s = Shape::v4(3000);
    let mut f = super_frame(&s);
    f[14 + 9] = 17; // UDP
    let mut p = Packet::from_slice(&f);
    p.meta.l3 = 14;
    p.meta.gso_size = 1000;
    assert_eq!(TcpSuper::of(&p), Err(GsoError::NotTcp));
    let mut p = super_packet(&s, 0);
    assert_eq!(TcpSuper::of(&p), Err(GsoError::NotTcp), "gso_size 0");
    p.meta.gso_size = 1000;
    p.truncate(14 + 20 + 10);
    assert_eq!(TcpSuper::of(&p), Err(GsoError::Malformed));
}

#[test]
fn without_extraction_the_headers_are_found_after_the_ethernet_header() {
    // A packet straight from an rx queue (no `meta.l3`), tagged or not.
    for s in [
        Shape::v4(3000),
        Shape {
            vlan: true,
            ..Shape::v6(3000)
        },
    ] {
        let mut p = super_packet(&s, 1000);
        p.meta.l3 = datapath::packet::NO_OFS;
        let t = TcpSuper::of(&p).unwrap();
        assert_eq!((t.l3, t.ipv6), (s.l3(), s.ipv6));
    }
}

#[test]
fn prepare_partial_leaves_the_pseudo_header_sum_for_the_device() {
    for s in [Shape::v4(20_000), Shape::v6(20_000)] {
        let mut p = super_packet(&s, 1448);
        let t = prepare_partial(&mut p).unwrap();
        assert_eq!(
            (t.l4, t.hdr_len, t.mss),
            (s.l3() + (if s.ipv6 { 40 } else { 20 }), t.l4 + 32, 1448)
        );
        // Complete the checksum as the kernel's skb_checksum_help does: the sum from the TCP
        // header to the end, the field's content included, inverted.
        let mut f = p.data().to_vec();
        let c = !wire::checksum::data(&f[t.l4..]);
        f[t.l4 + 16..t.l4 + 18].copy_from_slice(&c.to_be_bytes());
        let sp = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(TransportSlice::Tcp(tcp)) = &sp.transport else {
            panic!()
        };
        let want = match &sp.net {
            Some(NetSlice::Ipv4(ip)) => {
                let h = ip.header();
                assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
                tcp.calc_checksum_ipv4(h.source(), h.destination()).unwrap()
            }
            Some(NetSlice::Ipv6(ip)) => {
                let h = ip.header();
                tcp.calc_checksum_ipv6(h.source(), h.destination()).unwrap()
            }
            _ => panic!(),
        };
        assert_eq!(c, want);
    }
}

// ---- In a PMD ----

/// Keeps what it is sent: each batch as (frame, gso_size) pairs.
type Sent = Arc<Mutex<Vec<Vec<(Vec<u8>, u16)>>>>;

struct CaptureTxq {
    tso: bool,
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
}

/// A PMD receiving `frames` on port 1 (p0), with capturing ports 2 (p2, no TSO) and 3 (p3,
/// TSO), and `flows`; runs until everything is through. Returns what p2 and p3 were sent.
fn run_pmd(frames: Vec<(Vec<u8>, u16)>, flows: &[(&str, &str)]) -> (Sent, Sent, Pmd) {
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(VecRxq { frames, next: 0 }),
        cycles: 0,
    });
    let (s2, s3) = (Sent::default(), Sent::default());
    pmd.add_txq(
        2,
        Box::new(CaptureTxq {
            tso: false,
            sent: s2.clone(),
        }),
    );
    pmd.add_txq(
        3,
        Box::new(CaptureTxq {
            tso: true,
            sent: s3.clone(),
        }),
    );
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p2", 2);
    names.insert("p3", 3);
    for (k, a) in flows {
        pmd.add_flow(parse_megaflow(&names, k, a).unwrap()).unwrap();
    }
    for _ in 0..10 {
        pmd.poll_once();
    }
    (s2, s3, pmd)
}

fn ordinary(i: u8) -> Vec<u8> {
    let mut f = super_frame(&Shape::v4(100));
    f[14 + 4] = i; // a distinct IP id
    f
}

#[test]
fn a_pmd_segments_for_a_port_without_tso_and_not_for_one_with_it() {
    // 64 segments: more than a burst. Ordinary packets around it keep their places.
    let s = Shape {
        flags: ACK | PSH | FIN,
        ..Shape::v4(64_000)
    };
    let frames = vec![(ordinary(1), 0), (super_frame(&s), 1000), (ordinary(2), 0)];
    let (s2, s3, pmd) = run_pmd(
        frames,
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "p2,p3")],
    );
    let b2 = s2.lock().unwrap();
    assert!(
        b2.iter().all(|b| b.len() <= MAX_BURST),
        "bursts of at most 32"
    );
    let all: Vec<_> = b2.iter().flatten().cloned().collect();
    assert_eq!(all.len(), 66);
    assert!(all.iter().all(|(_, g)| *g == 0));
    assert_eq!(all[0].0, ordinary(1));
    assert_eq!(all[65].0, ordinary(2));
    let segs: Vec<Vec<u8>> = all[1..65].iter().map(|(f, _)| f.clone()).collect();
    verify(&s, 1000, &segs);
    // The TSO port got the super-frame whole.
    let all3: Vec<_> = s3.lock().unwrap().iter().flatten().cloned().collect();
    assert_eq!(all3.len(), 3);
    assert_eq!(all3[1], (super_frame(&s), 1000));
    let st = pmd.stats();
    assert_eq!((st.gso_frames, st.gso_segments, st.gso_drops), (1, 64, 0));
}

#[test]
fn a_super_frame_goes_whole_through_tnl_push_after_recirculation_and_is_segmented_at_the_output() {
    let push = "tnl_push(tnl_port(9),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,\
                src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,\
                tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),\
                vxlan(flags=0x8000000,vni=0x64)),out_port(0))";
    let s = Shape {
        flags: ACK | PSH | CWR,
        ..Shape::v6(50_000)
    };
    let second = format!("{push},p2");
    let (s2, s3, pmd) = run_pmd(
        vec![(super_frame(&s), 1440)],
        &[
            ("in_port(p0),eth_type(0x86dd),ipv6(frag=no)", "recirc(0x5)"),
            (
                "recirc_id(0x5),in_port(p0),eth_type(0x86dd),ipv6(frag=no)",
                &second,
            ),
        ],
    );
    let b2 = s2.lock().unwrap();
    assert!(b2.len() >= 2 && b2.iter().all(|b| b.len() <= MAX_BURST));
    let segs: Vec<Vec<u8>> = b2
        .iter()
        .flatten()
        .map(|(f, g)| {
            assert_eq!(*g, 0);
            // The VXLAN header (50 bytes) in front of each inner segment.
            assert_eq!(&f[12..14], &[0x08, 0x00]);
            assert_eq!(u16::from_be_bytes([f[16], f[17]]) as usize, f.len() - 14);
            f[50..].to_vec()
        })
        .collect();
    verify(&s, 1440, &segs);
    assert!(s3.lock().unwrap().is_empty());
    assert_eq!(pmd.stats().gso_segments, 50_000_u64.div_ceil(1440));
    assert_eq!(pmd.stats().gso_encapsulated, 1, "pushed whole");
}

/// A `gso_size` below what any TCP sends is refused, not cut into a buffer per byte: with a
/// `gso_size` of 1 a 50 000-byte super-frame made 50 000 segments before its `tnl_push`.
#[test]
fn an_mss_below_the_minimum_is_a_counted_drop() {
    let s = Shape::v4(3000);
    for (mss, ok) in [(1u16, false), (47, false), (48, true)] {
        let r = TcpSuper::of(&super_packet(&s, mss));
        assert_eq!(r.is_ok(), ok, "gso_size {mss}: {r:?}");
    }
    assert_eq!(
        TcpSuper::of(&super_packet(&s, 1)),
        Err(GsoError::MssTooSmall)
    );
    let push = "tnl_push(tnl_port(9),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,\
                src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,\
                tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),\
                vxlan(flags=0x8000000,vni=0x64)),out_port(0))";
    let (s2, s3, pmd) = run_pmd(
        vec![(super_frame(&Shape::v4(50_000)), 1), (ordinary(7), 0)],
        &[(
            "in_port(p0),eth_type(0x0800),ipv4(frag=no)",
            &format!("{push},p2"),
        )],
    );
    let sent: Vec<_> = s2.lock().unwrap().iter().flatten().cloned().collect();
    assert_eq!(sent.len(), 1, "only the ordinary packet");
    assert!(s3.lock().unwrap().is_empty());
    assert_eq!(pmd.stats().gso_drops, 1);
    assert_eq!(pmd.stats().gso_segments, 0);
}

#[test]
fn a_truncated_copy_of_a_super_frame_is_an_ordinary_packet() {
    let s = Shape::v4(30_000);
    let (s2, _s3, _) = run_pmd(
        vec![(super_frame(&s), 1000)],
        &[(
            "in_port(p0),eth_type(0x0800),ipv4(frag=no)",
            "trunc(200),p2,p3",
        )],
    );
    let all: Vec<_> = s2.lock().unwrap().iter().flatten().cloned().collect();
    assert_eq!(all.len(), 1);
    assert_eq!((all[0].0.len(), all[0].1), (200, 0));
}

/// The segments `datapath::gso` makes of a super-frame of shape `s` (what arrives from a
/// sender that segmented, or from a tunnel), as a batch.
fn segments_of(s: &Shape, mss: u16, pool: &mut Pool) -> Vec<Packet> {
    let p = super_packet(s, mss);
    let t = TcpSuper::of(&p).unwrap();
    (0..t.n_segments(&p))
        .map(|k| {
            let mut seg = t.segment(&p, k, pool);
            seg.meta.l3 = datapath::packet::NO_OFS;
            seg
        })
        .collect()
}

fn batch_of(pkts: Vec<Packet>) -> Batch {
    let mut b = Batch::new();
    for p in pkts {
        b.push(p);
    }
    b
}

/// A frame as a port that takes super-frames gets it: lengths and the partial checksum set.
fn prepared(p: &mut Packet) -> Vec<u8> {
    prepare_partial(p).unwrap();
    p.data().to_vec()
}

#[test]
fn gro_puts_the_segments_of_a_super_frame_back_together() {
    let mut pool = Pool::new(64, 0);
    let mut scratch = Vec::with_capacity(MAX_BURST);
    let v4 = [(20000, 1448), (1448 * 20, 1448), (3000, 1000)].map(|(p, m)| (Shape::v4(p), m));
    let v6 = [(20000, 1428), (1428 * 20, 1428), (65535 - 32, 1428)].map(|(p, m)| (Shape::v6(p), m));
    for (s, mss) in v4.into_iter().chain(v6) {
        let payload = s.payload;
        let mut b = batch_of(segments_of(&s, mss, &mut pool));
        let n = b.len() as u64;
        let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
        assert_eq!(
            (m.frames, m.segments),
            (1, n),
            "{payload}/{mss} v6 {}",
            s.ipv6
        );
        assert_eq!(b.len(), 1);
        assert!(b.may_have_gso());
        let mut got = b.drain().next().unwrap();
        assert_eq!(got.meta.gso_size, mss);
        let mut want = super_packet(&s, mss);
        assert_eq!(prepared(&mut got), prepared(&mut want), "{payload}/{mss}");
    }
}

#[test]
fn gro_merges_only_what_continues_and_keeps_everything_in_order() {
    let mut pool = Pool::new(256, 0);
    let mut scratch = Vec::with_capacity(MAX_BURST);
    let s = Shape {
        flags: ACK,
        ..Shape::v4(1448 * 8)
    };
    let segs = |pool: &mut Pool| segments_of(&s, 1448, pool);
    let arp = || Packet::from_slice(&[0xff; 60]);
    let payload_of = |b: &Batch| -> Vec<usize> {
        b.packets()
            .iter()
            .map(|p| {
                if p.meta.gso_size != 0 {
                    p.len() - 14 - 20 - 32
                } else {
                    p.len().saturating_sub(66)
                }
            })
            .collect()
    };

    // A packet of no connection in the middle does not split the run, and keeps its place
    // after the super-frame, which takes its first segment's.
    let mut v = segs(&mut pool);
    v.insert(3, arp());
    let mut b = batch_of(v);
    let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
    assert_eq!((m.frames, m.segments), (1, 8));
    assert_eq!(b.len(), 2);
    assert_eq!(b.packets()[1].data(), &[0xff; 60][..]);
    assert_eq!(payload_of(&b), [1448 * 8, 0]);

    // A segment lost on the way (a gap in the sequence numbers) ends the run.
    let mut v = segs(&mut pool);
    pool.free(v.remove(4));
    let mut b = batch_of(v);
    let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
    assert_eq!((m.frames, m.segments), (2, 7));

    // A segment whose checksum is wrong is left alone, for the receiver to drop.
    let mut v = segs(&mut pool);
    let last = v[2].len() - 1;
    v[2].data_mut()[last] ^= 0xff;
    let mut b = batch_of(v);
    let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
    assert_eq!((m.frames, m.segments), (2, 7));
    assert_eq!(b.len(), 3);
    assert_eq!(b.packets()[1].meta.gso_size, 0);

    // A first segment whose checksum is wrong starts nothing: the next one does.
    let mut v = segs(&mut pool);
    let last = v[0].len() - 1;
    v[0].data_mut()[last] ^= 0xff;
    let mut b = batch_of(v);
    let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
    assert_eq!((m.frames, m.segments), (1, 7));
    assert_eq!(b.len(), 2);

    // Another acknowledgement number, or other options (a timestamp), do not merge.
    for at in [14 + 20 + 8, 14 + 20 + 28] {
        let mut v = segs(&mut pool);
        v[5].data_mut()[at] ^= 1;
        fix_tcp_checksum(&mut v[5]);
        let mut b = batch_of(v);
        let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
        assert_eq!((m.frames, m.segments), (2, 7), "byte {at}");
    }

    // A short segment ends its super-frame; a PSH ends it too, and the flag is kept.
    let t = Shape {
        flags: ACK | PSH,
        ..Shape::v4(1448 * 3 + 100)
    };
    let mut v = segments_of(&t, 1448, &mut pool);
    v.extend(segs(&mut pool));
    let mut b = batch_of(v);
    let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
    assert_eq!((m.frames, m.segments), (2, 12));
    assert_eq!(b.packets()[0].data()[14 + 20 + 13], ACK | PSH);
    assert_eq!(b.packets()[1].data()[14 + 20 + 13], ACK);
}

/// The segments of `s` cut at `mss` as connection `sport` (each segment's TCP source port
/// set, its checksum made right again): IPv4, no tag.
fn connection(s: &Shape, mss: u16, sport: u16, pool: &mut Pool) -> Vec<Packet> {
    let mut v = segments_of(s, mss, pool);
    for p in &mut v {
        p.data_mut()[34..36].copy_from_slice(&sport.to_be_bytes());
        fix_tcp_checksum(p);
    }
    v
}

/// A batch of the first `rounds` segments of `conns` connections of `s` (source ports from
/// 41000), the connections taking turns a segment at a time.
fn in_turn(s: &Shape, conns: usize, rounds: usize, pool: &mut Pool) -> Batch {
    let mut each: Vec<Vec<Packet>> = (0..conns)
        .map(|c| connection(s, 1448, 41000 + c as u16, pool))
        .collect();
    let mut v = Vec::new();
    for _ in 0..rounds {
        for c in &mut each {
            v.push(c.remove(0));
        }
    }
    for c in each {
        for p in c {
            pool.free(p);
        }
    }
    batch_of(v)
}

/// Checks that `b`'s packets (IPv4, no tag) keep each connection's bytes in order: per TCP
/// source port, the sequence numbers rise from packet to packet, each packet starting where
/// the one before ended; returns the payload bytes per port.
fn in_order_per_connection(b: &Batch) -> std::collections::BTreeMap<u16, usize> {
    let mut next = std::collections::BTreeMap::new();
    let mut bytes = std::collections::BTreeMap::new();
    for (k, p) in b.packets().iter().enumerate() {
        let d = p.data();
        let port = u16::from_be_bytes([d[34], d[35]]);
        let seq = u32::from_be_bytes([d[38], d[39], d[40], d[41]]);
        let payload = d.len() - 34 - usize::from(d[46] >> 4) * 4;
        if let Some(&want) = next.get(&port) {
            assert_eq!(seq, want, "packet {k} of connection {port}: out of order");
        }
        next.insert(port, seq.wrapping_add(payload as u32));
        *bytes.entry(port).or_insert(0) += payload;
    }
    bytes
}

#[test]
fn gro_merges_interleaved_connections_each_in_its_order() {
    let mut pool = Pool::new(256, 0);
    let mut scratch = Vec::with_capacity(MAX_BURST);
    let s = Shape {
        flags: ACK,
        ..Shape::v4(1448 * 4)
    };
    // Three connections' segments in turn (as many streams through one tunnel arrive), and
    // a pure ACK of the second after its second segment (its sequence number the next
    // segment's, as a pure ACK's is): that one ends the second's
    // super-frame, the others go on.
    let mut conns = [40001, 40002, 40003].map(|port| connection(&s, 1448, port, &mut pool));
    let mut ack = conns[1][2].data()[..14 + 20 + 32].to_vec();
    ack[16..18].copy_from_slice(&52u16.to_be_bytes());
    let mut v = Vec::new();
    for k in 0..4 {
        for c in &mut conns {
            v.push(c.remove(0));
        }
        if k == 1 {
            v.push(Packet::from_slice(&ack));
        }
    }
    let mut b = batch_of(v);
    let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
    assert_eq!((m.frames, m.segments), (4, 12));
    let ports: Vec<u16> = b
        .packets()
        .iter()
        .map(|p| u16::from_be_bytes([p.data()[34], p.data()[35]]))
        .collect();
    assert_eq!(ports, [40001, 40002, 40003, 40002, 40002]);
    let segments: Vec<usize> = b.packets().iter().map(|p| (p.len() - 66) / 1448).collect();
    assert_eq!(segments, [4, 2, 4, 0, 2]);
    let bytes = in_order_per_connection(&b);
    assert_eq!(bytes.values().copied().collect::<Vec<_>>(), [1448 * 4; 3]);
    pool.free_batch(&mut b);

    // More connections than are merged at once: the oldest super-frame is ended to make
    // room; nothing is lost and each connection's bytes stay in order.
    let n = datapath::gro::MAX_RUNS + 1;
    let mut b = in_turn(&s, n, 3, &mut pool);
    let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
    assert_eq!(b.len() as u64 + m.segments - m.frames, 3 * n as u64);
    let bytes = in_order_per_connection(&b);
    assert_eq!(bytes.len(), n);
    assert!(bytes.values().all(|&n| n == 1448 * 3), "{bytes:?}");
    pool.free_batch(&mut b);
    // As many connections as are merged at once: each makes one super-frame.
    let mut b = in_turn(&s, n - 1, 4, &mut pool);
    let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
    assert_eq!(
        (m.frames, m.segments, b.len()),
        (n as u64 - 1, 4 * (n as u64 - 1), n - 1)
    );
    in_order_per_connection(&b);
}

fn fix_tcp_checksum(p: &mut Packet) {
    use wire::checksum;
    let f = p.data_mut();
    f[14 + 20 + 16] = 0;
    f[14 + 20 + 17] = 0;
    let src = std::net::Ipv4Addr::new(f[26], f[27], f[28], f[29]);
    let dst = std::net::Ipv4Addr::new(f[30], f[31], f[32], f[33]);
    let len = (f.len() - 34) as u16;
    let pseudo = checksum::pseudo_header_v4(&src, &dst, wire::IpProtocol::TCP, len);
    let sum = !checksum::combine(&[pseudo, checksum::data(&f[34..])]);
    f[14 + 20 + 16..14 + 20 + 18].copy_from_slice(&sum.to_be_bytes());
}

#[test]
fn gro_merges_ipv6_only_within_one_flow_and_traffic_class() {
    let mut pool = Pool::new(256, 0);
    let mut scratch = Vec::with_capacity(MAX_BURST);
    let s = Shape {
        flags: ACK,
        ..Shape::v6(1428 * 6)
    };
    // Offsets in an IPv6 segment: traffic class (high nibble of byte 0 and low of byte 1 of
    // the header), flow label, hop limit, a source address byte.
    let l3 = 14;
    for (what, at, bit) in [
        ("traffic class", l3, 0x01),
        ("flow label", l3 + 3, 0x01),
        ("hop limit", l3 + 7, 0x01),
        ("source address", l3 + 8, 0x01),
    ] {
        let mut v = segments_of(&s, 1428, &mut pool);
        v[3].data_mut()[at] ^= bit;
        fix_tcp_checksum_v6(&mut v[3]);
        let mut b = batch_of(v);
        let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
        // The changed segment starts a run of its own that nothing continues.
        assert_eq!((m.frames, m.segments), (2, 5), "{what}");
        assert_eq!(b.len(), 3, "{what}");
        pool.free_batch(&mut b);
    }
    // An extension header before TCP: not merged at all.
    let mut v = segments_of(&s, 1428, &mut pool);
    for p in &mut v {
        p.data_mut()[l3 + 6] = 60;
    }
    let mut b = batch_of(v);
    let m = datapath::gro::coalesce(&mut b, &mut pool, &mut scratch);
    assert_eq!((m.frames, b.len()), (0, 6));
}

/// Recomputes the TCP checksum of an IPv6 test segment (no VLAN tag).
fn fix_tcp_checksum_v6(p: &mut Packet) {
    use wire::checksum;
    let f = p.data_mut();
    let l4 = 14 + 40;
    f[l4 + 16] = 0;
    f[l4 + 17] = 0;
    let a = |o: usize| std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&f[o..o + 16]).unwrap());
    let (src, dst) = (a(14 + 8), a(14 + 24));
    let len = (f.len() - l4) as u32;
    let pseudo = checksum::pseudo_header_v6(&src, &dst, wire::IpProtocol::TCP, len);
    let sum = !checksum::combine(&[pseudo, checksum::data(&f[l4..])]);
    f[l4 + 16..l4 + 18].copy_from_slice(&sum.to_be_bytes());
}
