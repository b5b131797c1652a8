//! TCP super-frames pushed whole through a UDP tunnel and segmented after the push
//! (`datapath::gso_tunnel`), alone and in a PMD. Every segment is compared byte for byte with
//! what segmenting before the push gave (each segment then pushed by itself), and every header
//! field checked with an independent decoder (etherparse) and a checksum of the test's own:
//! VXLAN and GENEVE, IPv4 and IPv6 underlay and inner packet, the UDP checksum on and off.

mod common;

use common::{CaptureTxq, Sent, VecRxq};

use std::sync::Arc;

use datapath::actions::{DpAction, TnlTemplate};
use datapath::dpif::parse_megaflow;
use datapath::gso::{GsoError, TcpSuper};
use datapath::gso_tunnel::{self, Outer};
use datapath::packet::{Packet, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::tx_gso::TxGsoStats;
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use flow::odp::PortNames;

const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const FIN: u8 = 0x01;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Vxlan,
    Geneve,
}

/// The `tnl_push` action text of a tunnel of `kind` over an IPv4 or IPv6 underlay, with the
/// UDP checksum on or off.
fn push_text(kind: Kind, ipv6: bool, csum: bool) -> String {
    let (ty, eth_type, ip, ip_len) = if ipv6 {
        (
            0x86dd,
            "0x86dd",
            "ipv6(src=fd01::1,dst=fd01::2,label=0,proto=17,tclass=0x0,hlimit=64)",
            40,
        )
    } else {
        (
            0x0800,
            "0x0800",
            "ipv4(src=172.31.250.1,dst=172.31.250.2,proto=17,tos=0,ttl=64,frag=0x4000)",
            20,
        )
    };
    let _ = ty;
    let csum = if csum { "0xffff" } else { "0x0" };
    let (vtype, port, tnl, tlen) = match kind {
        Kind::Vxlan => (4, 4789, "vxlan(flags=0x8000000,vni=0x64)".to_owned(), 8),
        Kind::Geneve => (
            5,
            6081,
            "geneve(crit,vni=0x7b,options({class=0xffff,type=0x80,len=4,0xa}))".to_owned(),
            16,
        ),
    };
    let size = 14 + ip_len + 8 + tlen;
    format!(
        "tnl_push(tnl_port(9),header(size={size},type={vtype},eth(dst=8c:dc:d4:ab:58:48,\
         src=8c:dc:d4:ab:5b:f0,dl_type={eth_type}),{ip},udp(src=0,dst={port},csum={csum}),{tnl}),\
         out_port(0))"
    )
}

fn template(kind: Kind, ipv6: bool, csum: bool) -> TnlTemplate {
    let text = push_text(kind, ipv6, csum);
    let acts = flow::odp::parse_actions(&text, &mut PortNames::new()).unwrap();
    let compiled = datapath::actions::compile(&acts).unwrap();
    let DpAction::TnlPush(t) = &compiled[0] else {
        panic!("not a push")
    };
    (**t).clone()
}

fn payload_byte(i: usize) -> u8 {
    (i.wrapping_mul(13) ^ (i >> 7)) as u8
}

/// A TCP super-frame (IPv4 or IPv6, TCP with 12 bytes of options), its TCP checksum field
/// garbage as inside the switch.
fn super_frame(ipv6: bool, payload: usize, flags: u8) -> Vec<u8> {
    let head = common::IpHead {
        ipv6,
        tos: 0x02,
        id: 0xfff0,
        csum: 0xdead,
        ..Default::default()
    };
    let mut f = common::eth_ip(head, 6, 32 + payload);
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&5001u16.to_be_bytes());
    f.extend_from_slice(&0xffff_f000u32.to_be_bytes());
    f.extend_from_slice(&0x0102_0304u32.to_be_bytes());
    f.extend_from_slice(&[0x80, flags, 0x01, 0xf5, 0xbe, 0xef, 0, 0]);
    f.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7]);
    f.extend((0..payload).map(payload_byte));
    f
}

fn super_packet(ipv6: bool, payload: usize, mss: u16) -> Packet {
    let mut p = Packet::from_slice(&super_frame(ipv6, payload, ACK | PSH | FIN));
    p.meta.l3 = 14;
    p.meta.gso_size = mss;
    p
}

/// What segmenting before the push gave: each segment pushed by itself.
fn segment_then_push(p: &Packet, t: &TnlTemplate, pool: &mut Pool) -> Vec<Vec<u8>> {
    let s = TcpSuper::of(p).unwrap();
    (0..s.n_segments(p))
        .map(|k| {
            let mut seg = s.segment(p, k, pool);
            datapath::rewrite::tnl_push(&mut seg, t).unwrap();
            let v = seg.data().to_vec();
            pool.free(seg);
            v
        })
        .collect()
}

/// The segments of encapsulated super-frame `p`, as the output makes them.
fn push_then_segment(p: &Packet, pool: &mut Pool) -> Vec<Vec<u8>> {
    let s = TcpSuper::of(p).unwrap();
    let o = Outer::of(p, &s).unwrap().expect("encapsulated");
    (0..s.n_segments(p))
        .map(|k| {
            let mut seg = s.segment(p, k, pool);
            o.fix(&mut seg, &s);
            assert_eq!(seg.meta.gso_size, 0);
            assert_eq!(usize::from(seg.meta.l3), o.l3, "l3 at the outer header");
            let v = seg.data().to_vec();
            pool.free(seg);
            v
        })
        .collect()
}

/// Ones' complement sum of `parts`, folded.
fn sum(parts: &[&[u8]]) -> u16 {
    let mut acc: u64 = 0;
    for p in parts {
        for c in p.chunks(2) {
            acc += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Checks every header field of every segment: outer IP, UDP (length, checksum or 0), the
/// tunnel header as pushed, inner IP and TCP; the payload put back together.
fn verify(
    segs: &[Vec<u8>],
    t: &TnlTemplate,
    csum: bool,
    ipv6_in: bool,
    mss: usize,
    payload: usize,
) {
    let ipv6_out = t.ipv6;
    let ol3 = 14;
    let ol4 = ol3 + if ipv6_out { 40 } else { 20 };
    let inner = t.header.len();
    assert_eq!(segs.len(), payload.div_ceil(mss));
    let mut data = Vec::new();
    for (k, f) in segs.iter().enumerate() {
        let last = k + 1 == segs.len();
        let outer = SlicedPacket::from_ethernet(f).unwrap();
        match &outer.net {
            Some(NetSlice::Ipv4(ip)) => {
                assert!(!ipv6_out);
                let h = ip.header();
                assert_eq!(
                    usize::from(h.total_len()),
                    f.len() - ol3,
                    "outer length {k}"
                );
                assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
                assert_eq!(h.identification(), 0, "outer id as pushed");
                assert!(h.dont_fragment());
                assert_eq!(h.ttl(), 64);
            }
            Some(NetSlice::Ipv6(ip)) => {
                assert!(ipv6_out);
                let h = ip.header();
                assert_eq!(usize::from(h.payload_length()), f.len() - ol3 - 40);
                assert_eq!(h.hop_limit(), 64);
            }
            _ => panic!("segment {k}: outer not IP"),
        }
        let Some(TransportSlice::Udp(udp)) = &outer.transport else {
            panic!("segment {k}: not UDP");
        };
        assert_eq!(usize::from(udp.length()), f.len() - ol4);
        assert!((32768..61000).contains(&udp.source_port()));
        let c = udp.checksum();
        if csum {
            assert_ne!(c, 0);
            let len = ((f.len() - ol4) as u16).to_be_bytes();
            let ph = if ipv6_out {
                sum(&[&f[ol3 + 8..ol3 + 40], &[0, 0], &len, &[0, 17]])
            } else {
                sum(&[&f[ol3 + 12..ol3 + 20], &[0, 17], &len])
            };
            assert_eq!(
                sum(&[&ph.to_be_bytes(), &f[ol4..]]),
                0xffff,
                "UDP checksum {k}"
            );
        } else {
            assert_eq!(c, 0, "no UDP checksum");
        }
        assert_eq!(
            &f[ol4 + 8..inner],
            &t.header[ol4 + 8..],
            "tunnel header as pushed"
        );
        assert_eq!(&f[..ol3], &t.header[..ol3], "outer Ethernet header");
        let p = SlicedPacket::from_ethernet(&f[inner..]).unwrap();
        let Some(TransportSlice::Tcp(tcp)) = &p.transport else {
            panic!("segment {k}: inner not TCP");
        };
        let want = match &p.net {
            Some(NetSlice::Ipv4(ip)) => {
                assert!(!ipv6_in);
                let h = ip.header();
                assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
                assert_eq!(usize::from(h.total_len()), f.len() - inner - 14);
                assert_eq!(h.identification(), 0xfff0u16.wrapping_add(k as u16));
                tcp.calc_checksum_ipv4(h.source(), h.destination()).unwrap()
            }
            Some(NetSlice::Ipv6(ip)) => {
                assert!(ipv6_in);
                let h = ip.header();
                assert_eq!(usize::from(h.payload_length()), f.len() - inner - 54);
                tcp.calc_checksum_ipv6(h.source(), h.destination()).unwrap()
            }
            _ => panic!("segment {k}: inner not IP"),
        };
        assert_eq!(tcp.checksum(), want, "inner TCP checksum {k}");
        assert_eq!(
            tcp.sequence_number(),
            0xffff_f000u32.wrapping_add((k * mss) as u32)
        );
        assert_eq!((tcp.fin(), tcp.psh()), (last, last), "FIN, PSH on {k}");
        data.extend_from_slice(tcp.payload());
    }
    assert!(data.iter().copied().eq((0..payload).map(payload_byte)));
}

#[test]
fn segments_after_the_push_are_those_segmenting_before_it_gave() {
    let mut pool = Pool::new(64, 0);
    for kind in [Kind::Vxlan, Kind::Geneve] {
        for ipv6_out in [false, true] {
            for csum in [false, true] {
                for ipv6_in in [false, true] {
                    let t = template(kind, ipv6_out, csum);
                    let what =
                        format!("{kind:?} ipv6 underlay {ipv6_out} csum {csum} ipv6 {ipv6_in}");
                    let p = super_packet(ipv6_in, 20_001, 1448);
                    let before = segment_then_push(&p, &t, &mut pool);
                    let mut q = super_packet(ipv6_in, 20_001, 1448);
                    gso_tunnel::push(&mut q, &t).unwrap();
                    assert!(gso_tunnel::is_encapsulated(&q), "{what}");
                    assert_eq!(q.meta.gso_size, 1448);
                    assert_eq!(usize::from(q.meta.l3), t.header.len() + 14, "{what}");
                    let after = push_then_segment(&q, &mut pool);
                    verify(&after, &t, csum, ipv6_in, 1448, 20_001);
                    assert_eq!(after, before, "{what}");
                }
            }
        }
    }
}

#[test]
fn the_whole_frame_holds_its_outer_lengths_or_0_beyond_16_bits() {
    let mut pool = Pool::new(64, 0);
    for ipv6_out in [false, true] {
        // Inner IPv4 packet of 65 532 bytes: outer lengths past 65 535.
        let t = template(Kind::Vxlan, ipv6_out, true);
        let mut q = super_packet(false, 65_480, 1448);
        gso_tunnel::push(&mut q, &t).unwrap();
        let d = q.data();
        let ol4 = if ipv6_out { 54 } else { 34 };
        if ipv6_out {
            assert_eq!(&d[18..20], &[0, 0]);
        } else {
            assert_eq!(&d[16..18], &[0, 0]);
            assert_eq!(sum(&[&d[14..34]]), 0xffff, "IPv4 header checksum");
        }
        assert_eq!(&d[ol4 + 4..ol4 + 6], &[0, 0], "UDP length");
        let segs = push_then_segment(&q, &mut pool);
        verify(&segs, &t, true, false, 1448, 65_480);
        // A smaller one holds its own.
        let mut q = super_packet(false, 3000, 1448);
        gso_tunnel::push(&mut q, &t).unwrap();
        let n = q.len();
        let d = q.data();
        assert_eq!(
            usize::from(u16::from_be_bytes([d[ol4 + 4], d[ol4 + 5]])),
            n - ol4
        );
    }
}

#[test]
fn bad_super_frames_are_refused_with_their_reason() {
    let t = template(Kind::Geneve, false, false);
    let mut p = super_packet(false, 3000, 20);
    assert_eq!(gso_tunnel::push(&mut p, &t), Err(GsoError::MssTooSmall));
    let mut f = super_frame(false, 3000, ACK);
    f[23] = 47; // GRE, neither TCP nor UDP
    let mut p = Packet::from_slice(&f);
    p.meta.gso_size = 1448;
    assert_eq!(gso_tunnel::push(&mut p, &t), Err(GsoError::NotTcp));
    let f = super_frame(false, 3000, ACK);
    let mut p = Packet::from_slice(&f[..40]);
    p.meta.gso_size = 1448;
    assert_eq!(gso_tunnel::push(&mut p, &t), Err(GsoError::Malformed));
    let mut p = super_packet(true, 65_600, 1448);
    assert_eq!(gso_tunnel::push(&mut p, &t), Err(GsoError::TooLong));
    // Pushed twice: the second is refused, the frame left as the first push made it.
    let mut p = super_packet(false, 3000, 1448);
    gso_tunnel::push(&mut p, &t).unwrap();
    let once = p.data().to_vec();
    assert_eq!(gso_tunnel::push(&mut p, &t), Err(GsoError::NotTcp));
    assert_eq!(p.data(), &once[..]);
    // An ordinary packet is not encapsulated, nor a super-frame before its push.
    assert!(!gso_tunnel::is_encapsulated(&super_packet(
        false, 3000, 1448
    )));
    assert!(!gso_tunnel::is_encapsulated(&super_packet(false, 3000, 0)));
}

// ---- In a PMD ----

/// A PMD receiving `frames` on port 1, with capturing ports 2 (no TSO) and 3 (TSO) and one
/// megaflow `actions` for IPv4; returns what ports 2 and 3 were sent.
fn run_pmd(frames: Vec<(Vec<u8>, u16)>, actions: &str) -> (Sent, Sent, Pmd) {
    let (s2, s3, pmd, _) = run_pmd_counted(frames, actions);
    (s2, s3, pmd)
}

/// [`run_pmd`], with the super-frame counters of ports 2 and 3.
fn run_pmd_counted(
    frames: Vec<(Vec<u8>, u16)>,
    actions: &str,
) -> (Sent, Sent, Pmd, [Arc<TxGsoStats>; 2]) {
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(VecRxq { frames, next: 0 }),
        cycles: 0,
    });
    let (s2, s3) = (Sent::default(), Sent::default());
    let counters: [Arc<TxGsoStats>; 2] = Default::default();
    for (port, tso, sent, c) in [(2, false, &s2, &counters[0]), (3, true, &s3, &counters[1])] {
        let sent = sent.clone();
        pmd.add_port_txq_counted(
            port,
            Box::new(CaptureTxq {
                tso,
                uso: false,
                tnl: false,
                sent,
            }),
            None,
            c.clone(),
        );
    }
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p2", 2);
    names.insert("p3", 3);
    let k = "in_port(p0),eth_type(0x0800),ipv4(frag=no)";
    pmd.add_flow(parse_megaflow(&names, k, actions).unwrap())
        .unwrap();
    for _ in 0..10 {
        pmd.poll_once();
    }
    (s2, s3, pmd, counters)
}

#[test]
fn a_pmd_pushes_a_super_frame_whole_and_segments_it_at_each_output() {
    let mut pool = Pool::new(64, 0);
    for kind in [Kind::Vxlan, Kind::Geneve] {
        let t = template(kind, false, true);
        let frame = super_frame(false, 50_000, ACK | PSH | FIN);
        let ordinary = super_frame(false, 100, ACK);
        let push = push_text(kind, false, true);
        let (s2, s3, pmd, counters) = run_pmd_counted(
            vec![
                (ordinary.clone(), 0),
                (frame.clone(), 1448),
                (ordinary.clone(), 0),
            ],
            &format!("{push},p2,p3"),
        );
        // As extraction leaves them: the entropy port hashes the TCP ports too.
        let mut p = Packet::from_slice(&frame);
        (p.meta.l3, p.meta.l4) = (14, 34);
        p.meta.gso_size = 1448;
        let mut want = vec![];
        let mut o = Packet::from_slice(&ordinary);
        (o.meta.l3, o.meta.l4) = (14, 34);
        datapath::rewrite::tnl_push(&mut o, &t).unwrap();
        want.push(o.data().to_vec());
        want.extend(segment_then_push(&p, &t, &mut pool));
        want.push(o.data().to_vec());
        // Both ports, the one with TSO too, get the segments, in order.
        for s in [&s2, &s3] {
            let got: Vec<Vec<u8>> = s
                .lock()
                .unwrap()
                .iter()
                .map(|(f, g)| {
                    assert_eq!(*g, 0);
                    f.clone()
                })
                .collect();
            assert_eq!(got.len(), want.len(), "{kind:?}");
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                let at = g.iter().zip(w).position(|(a, b)| a != b);
                assert!(
                    g == w,
                    "{kind:?} frame {k}: lengths {} {}, first difference at {at:?}",
                    g.len(),
                    w.len()
                );
            }
        }
        let st = pmd.stats();
        let n = 50_000u64.div_ceil(1448);
        assert_eq!(st.gso_encapsulated, 1);
        assert_eq!(
            (st.gso_frames, st.gso_segments, st.gso_drops),
            (2, 2 * n, 0)
        );
        // Per port: segmented, none whole (not even to the port with TSO).
        for c in &counters {
            assert_eq!(c.get(), (0, 1, n), "{kind:?}");
        }
    }
}

#[test]
fn each_port_counts_the_super_frames_it_was_sent_whole_and_segmented() {
    let frame = super_frame(false, 10_000, ACK);
    let (_, s3, _, [c2, c3]) = run_pmd_counted(vec![(frame.clone(), 1448), (frame, 1448)], "p2,p3");
    assert_eq!(c2.get(), (0, 2, 2 * 10_000u64.div_ceil(1448)));
    assert_eq!(c3.get(), (2, 0, 0));
    assert!(s3.lock().unwrap().iter().all(|(_, g)| *g == 1448));
}

#[test]
fn a_push_followed_by_more_than_outputs_segments_before_it() {
    let push = push_text(Kind::Vxlan, false, false);
    let frame = super_frame(false, 10_000, ACK);
    let (s2, _, pmd) = run_pmd(vec![(frame, 1448)], &format!("{push},set(ipv4(ttl=9)),p2"));
    let st = pmd.stats();
    assert_eq!((st.gso_encapsulated, st.gso_frames), (0, 1));
    let n = s2.lock().unwrap().len();
    assert_eq!(n, 10_000usize.div_ceil(1448));
}

#[test]
fn a_bad_super_frame_at_a_push_is_a_drop_counted_by_reason() {
    let push = push_text(Kind::Vxlan, false, false);
    let frame = super_frame(false, 10_000, ACK);
    let (s2, _, pmd) = run_pmd(vec![(frame, 20)], &format!("{push},p2"));
    assert!(s2.lock().unwrap().is_empty());
    let st = pmd.stats();
    assert_eq!(st.gso_drops, 1);
    assert_eq!(st.gso_drop_reasons[GsoError::MssTooSmall.index()], 1);
    assert!(
        st.drops()
            .any(|(name, n)| name == "gso_mss_too_small" && n == 1)
    );
}

#[test]
fn a_queue_with_udp_tunnel_gso_takes_encapsulated_super_frames_whole_when_they_fit() {
    let push = push_text(Kind::Vxlan, false, true);
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    // 10 000 bytes fit the outer lengths; 65 450 do (inner IPv4 total length 65 502) but not
    // with the 50 bytes of VXLAN over IPv4.
    let frames = vec![
        (super_frame(false, 10_000, ACK), 1448),
        (super_frame(false, 65_450, ACK), 1448),
    ];
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(VecRxq { frames, next: 0 }),
        cycles: 0,
    });
    let (s2, s3) = (Sent::default(), Sent::default());
    let counters: [Arc<TxGsoStats>; 2] = Default::default();
    for (port, tnl, sent, c) in [(2, false, &s2, &counters[0]), (3, true, &s3, &counters[1])] {
        let q = CaptureTxq {
            tso: true,
            uso: false,
            tnl,
            sent: sent.clone(),
        };
        pmd.add_port_txq_counted(port, Box::new(q), None, c.clone());
    }
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p2", 2);
    names.insert("p3", 3);
    let k = "in_port(p0),eth_type(0x0800),ipv4(frag=no)";
    let a = format!("{push},p2,p3");
    pmd.add_flow(parse_megaflow(&names, k, &a).unwrap())
        .unwrap();
    for _ in 0..10 {
        pmd.poll_once();
    }
    let (n1, n2) = (10_000u64.div_ceil(1448), 65_450u64.div_ceil(1448));
    assert_eq!(
        counters[0].get(),
        (0, 2, n1 + n2),
        "no UDP-tunnel GSO: both cut"
    );
    assert_eq!(counters[1].get(), (1, 1, n2), "the one that fits whole");
    let sent = s3.lock().unwrap();
    assert_eq!(sent.len() as u64, 1 + n2);
    let (whole, gso_size) = &sent[0];
    assert_eq!(*gso_size, 1448);
    assert_eq!(whole.len(), 50 + super_frame(false, 10_000, ACK).len());
    assert!(
        sent[1..]
            .iter()
            .all(|(f, g)| *g == 0 && f.len() <= 50 + 66 + 1448)
    );
}
