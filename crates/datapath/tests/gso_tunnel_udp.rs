//! UDP super-frames (USO) pushed whole through a UDP tunnel and cut into datagrams after the
//! push (`datapath::gso_tunnel`, `datapath::gso_inner`), alone and in a PMD. Every datagram is
//! compared byte for byte with what cutting before the push gave (each datagram then pushed
//! by itself), and its lengths and checksums checked with sums of the test's own: VXLAN and
//! GENEVE, IPv4 and IPv6 underlay and inner packet, the outer UDP checksum on and off.

mod common;

use common::{CaptureTxq, Sent, VecRxq};

use std::sync::Arc;

use datapath::actions::{DpAction, TnlTemplate};
use datapath::dpif::parse_megaflow;
use datapath::gso::GsoError;
use datapath::gso_tunnel::{self, Inner, Outer};
use datapath::gso_udp::UdpSuper;
use datapath::packet::{Packet, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::tx_gso::TxGsoStats;
use flow::odp::PortNames;

/// The `tnl_push` action text of VXLAN (or GENEVE with an option) over an IPv4 or IPv6
/// underlay, with the UDP checksum on or off.
fn push_text(geneve: bool, ipv6: bool, csum: bool) -> String {
    let ip = if ipv6 {
        "eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x86dd),\
         ipv6(src=fd01::1,dst=fd01::2,label=0,proto=17,tclass=0x0,hlimit=64)"
    } else {
        "eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),\
         ipv4(src=172.31.250.1,dst=172.31.250.2,proto=17,tos=0,ttl=64,frag=0x4000)"
    };
    let csum = if csum { "0xffff" } else { "0x0" };
    let (ty, port, tnl, tlen) = if geneve {
        (
            5,
            6081,
            "geneve(crit,vni=0x7b,options({class=0xffff,type=0x80,len=4,0xa}))",
            16,
        )
    } else {
        (4, 4789, "vxlan(flags=0x8000000,vni=0x64)", 8)
    };
    let size = 14 + if ipv6 { 40 } else { 20 } + 8 + tlen;
    format!(
        "tnl_push(tnl_port(9),header(size={size},type={ty},{ip},udp(src=0,dst={port},\
         csum={csum}),{tnl}),out_port(0))"
    )
}

fn template(geneve: bool, ipv6: bool, csum: bool) -> TnlTemplate {
    let acts =
        flow::odp::parse_actions(&push_text(geneve, ipv6, csum), &mut PortNames::new()).unwrap();
    let compiled = datapath::actions::compile(&acts).unwrap();
    let DpAction::TnlPush(t) = &compiled[0] else {
        panic!("not a push")
    };
    (**t).clone()
}

fn payload_byte(i: usize) -> u8 {
    (i.wrapping_mul(29) ^ (i >> 5)) as u8
}

/// A UDP super-frame (IPv4 with DF or IPv6, UDP 40000 -> 5201) whose UDP length and checksum
/// fields hold garbage, as a partial sum looks to the switch.
fn super_frame(ipv6: bool, payload: usize) -> Vec<u8> {
    let head = common::IpHead {
        ipv6,
        id: 0xfffe,
        csum: 0xdead,
        ..Default::default()
    };
    let mut f = common::eth_ip(head, 17, 8 + payload);
    f.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51, 0xbe, 0xef, 0x12, 0x34]);
    f.extend((0..payload).map(payload_byte));
    f
}

/// [`super_frame`] as extraction leaves it: `l3` and `l4` set.
fn super_packet(ipv6: bool, payload: usize, size: u16) -> Packet {
    let mut p = Packet::from_slice(&super_frame(ipv6, payload));
    (p.meta.l3, p.meta.l4) = (14, if ipv6 { 54 } else { 34 });
    p.meta.gso_size = size;
    p
}

/// What cutting before the push gave: each datagram pushed by itself.
fn cut_then_push(p: &Packet, t: &TnlTemplate, pool: &mut Pool) -> Vec<Vec<u8>> {
    let u = UdpSuper::of(p).unwrap();
    (0..u.n_segments(p))
        .map(|k| {
            let mut s = u.segment(p, k, pool);
            datapath::rewrite::tnl_push(&mut s, t).unwrap();
            let v = s.data().to_vec();
            pool.free(s);
            v
        })
        .collect()
}

/// The datagrams of encapsulated super-frame `p`, as an output cuts them.
fn push_then_cut(p: &Packet, pool: &mut Pool) -> Vec<Vec<u8>> {
    let inner = Inner::of(p).unwrap();
    assert!(matches!(inner, Inner::Udp(_)));
    let o = Outer::around(p, inner.l3()).unwrap().expect("encapsulated");
    (0..inner.n_segments(p))
        .map(|k| {
            let s = inner.segment(p, k, &o, pool);
            assert_eq!(s.meta.gso_size, 0);
            assert_eq!(usize::from(s.meta.l3), o.l3, "l3 at the outer header");
            let v = s.data().to_vec();
            pool.free(s);
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

fn be16(f: &[u8], at: usize) -> usize {
    usize::from(u16::from_be_bytes([f[at], f[at + 1]]))
}

/// Whether the UDP checksum of the datagram at `l4` (IP header at `l3`) verifies.
fn udp_sum_ok(f: &[u8], l3: usize, l4: usize) -> bool {
    let len = ((f.len() - l4) as u16).to_be_bytes();
    let ph = if f[l3] >> 4 == 6 {
        sum(&[&f[l3 + 8..l3 + 40], &[0, 0], &len, &[0, 17]])
    } else {
        sum(&[&f[l3 + 12..l3 + 20], &[0, 17], &len])
    };
    sum(&[&ph.to_be_bytes(), &f[l4..]]) == 0xffff
}

/// Checks the lengths and checksums of every datagram, outer and inner, and the payload put
/// back together.
fn verify(segs: &[Vec<u8>], t: &TnlTemplate, ipv6_in: bool, size: usize, payload: usize) {
    let ol4 = 14 + if t.ipv6 { 40 } else { 20 };
    let il3 = t.header.len() + 14;
    let il4 = il3 + if ipv6_in { 40 } else { 20 };
    assert_eq!(segs.len(), payload.div_ceil(size));
    let mut data = Vec::new();
    for (k, f) in segs.iter().enumerate() {
        if t.ipv6 {
            assert_eq!(be16(f, 18), f.len() - 54, "outer payload length {k}");
        } else {
            assert_eq!(be16(f, 16), f.len() - 14, "outer total length {k}");
            assert_eq!(sum(&[&f[14..34]]), 0xffff, "outer header checksum {k}");
        }
        assert_eq!(be16(f, ol4 + 4), f.len() - ol4, "outer UDP length {k}");
        if t.udp_csum {
            assert!(udp_sum_ok(f, 14, ol4), "outer UDP checksum {k}");
        } else {
            assert_eq!(be16(f, ol4 + 6), 0, "no outer UDP checksum {k}");
        }
        assert_eq!(
            &f[ol4 + 8..il3 - 14],
            &t.header[ol4 + 8..],
            "tunnel header {k}"
        );
        if ipv6_in {
            assert_eq!(be16(f, il3 + 4), f.len() - il4, "inner payload length {k}");
        } else {
            assert_eq!(be16(f, il3 + 2), f.len() - il3, "inner total length {k}");
            assert_eq!(
                be16(f, il3 + 4),
                usize::from(0xfffeu16.wrapping_add(k as u16))
            );
            assert_eq!(sum(&[&f[il3..il4]]), 0xffff, "inner header checksum {k}");
        }
        assert_eq!(be16(f, il4 + 4), f.len() - il4, "inner UDP length {k}");
        assert!(udp_sum_ok(f, il3, il4), "inner UDP checksum {k}");
        data.extend_from_slice(&f[il4 + 8..]);
    }
    assert!(data.iter().copied().eq((0..payload).map(payload_byte)));
}

#[test]
fn datagrams_cut_after_the_push_are_those_cut_before_it() {
    let mut pool = Pool::new(64, 0);
    for geneve in [false, true] {
        for ipv6_out in [false, true] {
            for csum in [false, true] {
                for ipv6_in in [false, true] {
                    let what = format!(
                        "geneve {geneve} ipv6 underlay {ipv6_out} csum {csum} ipv6 {ipv6_in}"
                    );
                    let t = template(geneve, ipv6_out, csum);
                    // 1 bytes over a multiple: a last datagram of 1 byte.
                    let payload = 1400 * 20 + 1;
                    let before =
                        cut_then_push(&super_packet(ipv6_in, payload, 1400), &t, &mut pool);
                    let mut q = super_packet(ipv6_in, payload, 1400);
                    gso_tunnel::push(&mut q, &t).unwrap();
                    assert!(gso_tunnel::is_encapsulated(&q), "{what}");
                    assert_eq!(q.meta.gso_size, 1400, "{what}");
                    assert_eq!(usize::from(q.meta.l3), t.header.len() + 14, "{what}");
                    let after = push_then_cut(&q, &mut pool);
                    verify(&after, &t, ipv6_in, 1400, payload);
                    assert_eq!(after, before, "{what}");
                }
            }
        }
    }
}

#[test]
fn prepared_for_a_device_the_frame_holds_the_pseudo_header_sums() {
    for (ipv6_out, ipv6_in, csum) in [
        (false, false, true),
        (true, true, false),
        (true, false, true),
    ] {
        let t = template(false, ipv6_out, csum);
        let mut q = super_packet(ipv6_in, 9000, 1400);
        gso_tunnel::push(&mut q, &t).unwrap();
        let (inner, outer) = gso_tunnel::prepare_partial_udp(&mut q).unwrap();
        let f = q.data();
        let ol4 = 14 + if ipv6_out { 40 } else { 20 };
        assert_eq!((outer.l4, outer.ipv6, outer.csum), (ol4, ipv6_out, csum));
        assert_eq!(inner.l3, t.header.len() + 14);
        assert_eq!(be16(f, ol4 + 4), f.len() - ol4, "outer UDP length");
        assert_eq!(
            be16(f, inner.l4 + 4),
            f.len() - inner.l4,
            "inner UDP length"
        );
        // The pseudo-header sums: completing them over the frame gives valid checksums.
        let mut g = f.to_vec();
        let c = !sum(&[&g[inner.l4..]]);
        g[inner.l4 + 6..inner.l4 + 8].copy_from_slice(&c.to_be_bytes());
        assert!(udp_sum_ok(&g, inner.l3, inner.l4), "inner sum");
        if csum {
            let c = !sum(&[&g[ol4..]]);
            g[ol4 + 6..ol4 + 8].copy_from_slice(&c.to_be_bytes());
            assert!(udp_sum_ok(&g, 14, ol4), "outer sum");
        } else {
            assert_eq!(be16(f, ol4 + 6), 0);
        }
    }
    // Outer lengths past 16 bits: not for a device.
    let t = template(false, false, true);
    let mut q = super_packet(false, 65_480, 1400);
    gso_tunnel::push(&mut q, &t).unwrap();
    assert!(!gso_tunnel::fits_whole(&q));
    assert_eq!(
        gso_tunnel::prepare_partial_udp(&mut q).map(|_| ()),
        Err(GsoError::TooLong)
    );
}

#[test]
fn bad_udp_super_frames_are_refused_with_their_reason() {
    let t = template(true, false, false);
    // More than 128 datagrams.
    let mut p = super_packet(false, 3000, 20);
    assert_eq!(gso_tunnel::push(&mut p, &t), Err(GsoError::MssTooSmall));
    assert_eq!(p.data(), &super_frame(false, 3000)[..], "left as it was");
    // A UFO one: fragmented before the push, not encapsulated whole.
    let mut p = super_packet(false, 3000, 1400);
    p.meta.set_ufo(true);
    assert_eq!(gso_tunnel::push(&mut p, &t), Err(GsoError::NotTcp));
    // Cut short in its UDP header.
    let mut p = Packet::from_slice(&super_frame(false, 3000)[..38]);
    p.meta.gso_size = 1400;
    assert_eq!(gso_tunnel::push(&mut p, &t), Err(GsoError::Malformed));
}

// ---- In a PMD ----

/// A PMD receiving `frames` on port 1 with one megaflow `actions` for IPv4, capturing ports 2
/// (TSO and USO, no UDP-tunnel GSO) and 3 (all three); what they were sent, their counters.
fn run_pmd(frames: Vec<(Vec<u8>, u16)>, actions: &str) -> ([Sent; 2], [Arc<TxGsoStats>; 2], Pmd) {
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(VecRxq { frames, next: 0 }),
        cycles: 0,
    });
    let sent: [Sent; 2] = Default::default();
    let counters: [Arc<TxGsoStats>; 2] = Default::default();
    for (i, tnl) in [false, true].into_iter().enumerate() {
        let q = CaptureTxq {
            tso: true,
            uso: true,
            tnl,
            sent: sent[i].clone(),
        };
        pmd.add_port_txq_counted(i as u32 + 2, Box::new(q), None, counters[i].clone());
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
    (sent, counters, pmd)
}

#[test]
fn a_pmd_pushes_a_udp_super_frame_whole_to_a_queue_with_tunnel_gso_and_cuts_it_for_another() {
    let mut pool = Pool::new(64, 0);
    for geneve in [false, true] {
        let t = template(geneve, false, true);
        // 20 000 bytes fit the outer lengths; 65 480 do not once encapsulated (inner ones do).
        let (small, large) = (20_000, 65_480);
        let frames = vec![
            (super_frame(false, small), 1400),
            (super_frame(false, large), 1400),
        ];
        let (sent, counters, pmd) =
            run_pmd(frames, &format!("{},p2,p3", push_text(geneve, false, true)));
        let before: Vec<Vec<u8>> = [small, large]
            .iter()
            .flat_map(|&n| cut_then_push(&super_packet(false, n, 1400), &t, &mut pool))
            .collect();
        let (n1, n2) = (small.div_ceil(1400) as u64, large.div_ceil(1400) as u64);
        let got2: Vec<Vec<u8>> = sent[0]
            .lock()
            .unwrap()
            .iter()
            .map(|(f, g)| {
                assert_eq!(*g, 0, "geneve {geneve}: datagrams");
                f.clone()
            })
            .collect();
        assert_eq!(
            got2, before,
            "geneve {geneve}: cut after the push as before it"
        );
        assert_eq!(counters[0].udp.get(), (0, 2, n1 + n2), "geneve {geneve}");
        // Port 3: the one that fits whole, as the push leaves it; the other cut.
        let mut whole = super_packet(false, small, 1400);
        gso_tunnel::push(&mut whole, &t).unwrap();
        let got3 = sent[1].lock().unwrap().clone();
        assert_eq!(got3.len() as u64, 1 + n2, "geneve {geneve}");
        assert_eq!(
            got3[0],
            (whole.data().to_vec(), 1400),
            "geneve {geneve}: whole"
        );
        let rest: Vec<Vec<u8>> = got3[1..].iter().map(|(f, _)| f.clone()).collect();
        assert_eq!(rest, before[n1 as usize..], "geneve {geneve}");
        assert_eq!(counters[1].udp.get(), (1, 1, n2), "geneve {geneve}");
        for c in &counters {
            assert_eq!(c.get(), (0, 0, 0), "no TCP counted");
        }
        let st = pmd.stats();
        assert_eq!(st.gso_encapsulated, 2);
        assert_eq!(st.gso_drops, 0);
    }
}

#[test]
fn a_bad_udp_super_frame_at_a_push_is_a_drop_counted_by_reason() {
    let push = push_text(false, false, false);
    let frames = vec![
        (super_frame(false, 10_000), 20),
        (super_frame(false, 2800), 1400),
    ];
    let (sent, _, pmd) = run_pmd(frames, &format!("{push},p2"));
    assert_eq!(sent[0].lock().unwrap().len(), 2, "the good one's datagrams");
    let st = pmd.stats();
    assert_eq!((st.gso_drops, st.gso_encapsulated), (1, 1));
    assert_eq!(st.gso_drop_reasons[GsoError::MssTooSmall.index()], 1);
}
