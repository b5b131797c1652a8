//! Encapsulated TCP and UDP (USO) super-frames received whole (a `tap` with UDP-tunnel GSO:
//! marked `PacketMeta::tunnel_gso`, their outer headers as the kernel leaves them) through a
//! PMD: `tnl_pop` strips the outer headers once and the next pass sees the plain super-frame
//! the push carried; any other use cuts the frame as a receive-side cut would (segments or
//! datagrams), its outer headers written on every one, or hands it whole to a queue that takes
//! UDP-tunnel GSO. VXLAN and GENEVE, IPv4 and IPv6 underlay and inner packet, the outer UDP
//! checksum on and off, the outer lengths those of the whole frame or 0.

mod common;

use common::{CaptureTxq, Sent};

use datapath::actions::{DpAction, TnlTemplate};
use datapath::dpif::parse_megaflow;
use datapath::gso::GsoError;
use datapath::gso_tunnel;
use datapath::packet::{Batch, Packet, Pool, RX_CSUM_L4_GOOD};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PmdStats, PolledRxq};
use datapath::port::RxQueue;
use datapath::super_frame::Cut;
use datapath::tunnel::{TnlPopDrop, TunnelKind};
use flow::odp::PortNames;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Vxlan,
    Geneve,
}

/// The `tnl_push` action text of a tunnel of `kind` over an IPv4 or IPv6 underlay, with the
/// UDP checksum on or off.
fn push_text(kind: Kind, ipv6: bool, csum: bool) -> String {
    let (eth_type, ip, ip_len) = if ipv6 {
        let ip = "ipv6(src=fd01::1,dst=fd01::2,label=0,proto=17,tclass=0x0,hlimit=64)";
        ("0x86dd", ip, 40)
    } else {
        let ip = "ipv4(src=172.31.250.1,dst=172.31.250.2,proto=17,tos=0,ttl=64,frag=0x4000)";
        ("0x0800", ip, 20)
    };
    let csum = if csum { "0xffff" } else { "0x0" };
    let (ty, port, tnl, tlen) = match kind {
        Kind::Vxlan => (4, 4789, "vxlan(flags=0x8000000,vni=0x64)", 8),
        Kind::Geneve => (
            5,
            6081,
            "geneve(crit,vni=0x7b,options({class=0xffff,type=0x80,len=4,0xa}))",
            16,
        ),
    };
    let size = 14 + ip_len + 8 + tlen;
    format!(
        "tnl_push(tnl_port(9),header(size={size},type={ty},eth(dst=8c:dc:d4:ab:58:48,\
         src=8c:dc:d4:ab:5b:f0,dl_type={eth_type}),{ip},udp(src=0,dst={port},csum={csum}),\
         {tnl}),out_port(0))"
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

/// The inner Ethernet and IP headers of the super-frames here.
fn inner_head(ipv6: bool) -> common::IpHead {
    common::IpHead {
        ipv6,
        tos: 0x02,
        id: 0x1234,
        ..Default::default()
    }
}

/// A TCP super-frame (IPv4 or IPv6, 12 bytes of TCP options) with `payload` bytes.
fn super_frame(ipv6: bool, payload: usize) -> Vec<u8> {
    let head = inner_head(ipv6);
    let mut f = common::eth_ip(head, 6, 32 + payload);
    f.extend_from_slice(&[0x9c, 0x40, 0x13, 0x89, 0, 0, 0, 1, 0, 0, 0, 1]);
    f.extend_from_slice(&[0x80, 0x18, 0x01, 0xf5, 0xbe, 0xef, 0, 0]);
    f.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 7]);
    f.extend((0..payload).map(|i| (i.wrapping_mul(13) ^ (i >> 7)) as u8));
    f
}

/// A UDP super-frame (IPv4 or IPv6) with `payload` bytes, its datagrams to be of [`DGRAM`].
fn udp_super_frame(ipv6: bool, payload: usize) -> Vec<u8> {
    let head = inner_head(ipv6);
    let udp_len = (8 + payload) as u16;
    let mut f = common::eth_ip(head, 17, usize::from(udp_len));
    f.extend_from_slice(&[0x9c, 0x41, 0x13, 0x8a]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..payload).map(|i| (i.wrapping_mul(7) ^ (i >> 9)) as u8));
    f
}

const MSS: u16 = 1400;
/// The datagram size of the UDP super-frames.
const DGRAM: u16 = 1200;
const PAYLOAD: usize = 20_000;

/// One case: TCP or UDP inside, tunnel kind, outer IPv6, inner IPv6, outer UDP checksum,
/// outer lengths 0.
#[derive(Clone, Copy, Debug)]
struct Case {
    udp: bool,
    kind: Kind,
    outer_v6: bool,
    inner_v6: bool,
    csum: bool,
    zero_len: bool,
}

impl Case {
    /// The super-frame's `gso_size`: the MSS or the datagram size.
    fn size(&self) -> u16 {
        if self.udp { DGRAM } else { MSS }
    }
}

fn cases() -> Vec<Case> {
    let mut v = vec![];
    for udp in [false, true] {
        for kind in [Kind::Vxlan, Kind::Geneve] {
            for outer_v6 in [false, true] {
                for csum in [false, true] {
                    for zero_len in [false, true] {
                        let inner_v6 = outer_v6 != csum;
                        v.push(Case {
                            udp,
                            kind,
                            outer_v6,
                            inner_v6,
                            csum,
                            zero_len,
                        });
                    }
                }
            }
        }
    }
    v
}

/// Ones' complement sum of `d`, folded.
fn sum(d: &[u8]) -> u16 {
    let mut acc: u64 = d
        .chunks(2)
        .map(|c| u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// What a tap that took UDP-tunnel GSO hands over for case `c`: the super-frame pushed
/// whole and made ready as the kernel leaves it (outer UDP checksum the pseudo-header sum
/// when on, inner TCP or UDP checksum the pseudo-header sum), its outer lengths 0 for
/// `zero_len`; with the same super-frame in the form a push leaves (for the cut an output
/// makes).
fn received(c: Case) -> (Vec<u8>, Packet) {
    let t = template(c.kind, c.outer_v6, c.csum);
    let mut p = if c.udp {
        Packet::from_slice(&udp_super_frame(c.inner_v6, PAYLOAD))
    } else {
        Packet::from_slice(&super_frame(c.inner_v6, PAYLOAD))
    };
    p.meta.l3 = 14;
    p.meta.gso_size = c.size();
    gso_tunnel::push(&mut p, &t).unwrap();
    if c.udp {
        gso_tunnel::prepare_partial_udp(&mut p).unwrap();
    } else {
        gso_tunnel::prepare_partial(&mut p).unwrap();
    }
    let mut f = p.data().to_vec();
    if c.zero_len {
        if c.outer_v6 {
            f[18..20].fill(0);
        } else {
            f[16..18].fill(0);
            f[24..26].fill(0);
            let s = !sum(&f[14..34]);
            f[24..26].copy_from_slice(&s.to_be_bytes());
        }
        let ul4 = 14 + if c.outer_v6 { 40 } else { 20 };
        f[ul4 + 4..ul4 + 6].fill(0);
    }
    (f, p)
}

/// A frame received whole: its bytes, `gso_size`, and whether its outer checksum is on
/// (marked good).
type Received = (Vec<u8>, u16, bool);

/// Hands over its frames as a tap does an encapsulated super-frame kept whole.
struct TunnelGsoRxq {
    frames: Vec<Received>,
}

impl RxQueue for TunnelGsoRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let n = self.frames.len();
        for (f, size, csum) in self.frames.drain(..) {
            let mut p = pool.packet_from(&f, 1);
            p.meta.gso_size = size;
            p.meta.set_tunnel_gso(true);
            if csum {
                p.meta.rx_csum = RX_CSUM_L4_GOOD;
            }
            batch.push(p);
            batch.mark_gso();
        }
        n
    }
}

/// A PMD receiving `frames` whole on port 1 ("p0"), with capturing ports 2 (no TSO), 3
/// (TSO and USO) and 5 (TSO, USO and UDP-tunnel GSO), tunnel port 4 ("tnl") of `kind`, and
/// `flows`; returns what ports 2, 3 and 5 were sent, and the PMD's counters.
fn run(frames: Vec<Received>, kind: Kind, flows: &[(&str, &str)]) -> ([Sent; 3], PmdStats) {
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(TunnelGsoRxq { frames }),
        cycles: 0,
    });
    let sent: [Sent; 3] = Default::default();
    for (port, tso, tnl, s) in [
        (2, false, false, &sent[0]),
        (3, true, false, &sent[1]),
        (5, true, true, &sent[2]),
    ] {
        let q = CaptureTxq {
            tso,
            uso: tso,
            tnl,
            sent: s.clone(),
        };
        pmd.add_txq(port, Box::new(q));
    }
    let tk = match kind {
        Kind::Vxlan => TunnelKind::VXLAN,
        Kind::Geneve => TunnelKind::GENEVE,
    };
    let q = CaptureTxq {
        tso: false,
        uso: false,
        tnl: false,
        sent: Sent::default(),
    };
    pmd.add_port_txq(4, Box::new(q), Some(tk));
    let mut names = PortNames::new();
    for (name, no) in [("p0", 1), ("p2", 2), ("p3", 3), ("tnl", 4), ("p5", 5)] {
        names.insert(name, no);
    }
    for (k, a) in flows {
        pmd.add_flow(parse_megaflow(&names, k, a).unwrap()).unwrap();
    }
    for _ in 0..8 {
        pmd.poll_once();
    }
    (sent, pmd.stats())
}

fn take(s: &Sent) -> Vec<(Vec<u8>, u16)> {
    std::mem::take(&mut *s.lock().unwrap())
}

/// The segments (or datagrams) of super-frame `p` (its `l3` and `l4` at the headers to
/// segment by), the outer headers of an encapsulated one written on each.
fn segments(p: &Packet, pool: &mut Pool) -> Vec<Vec<u8>> {
    let cut = Cut::of(p).unwrap();
    (0..cut.n_segments(p))
        .map(|k| {
            let s = cut.segment(p, k, pool);
            let v = s.data().to_vec();
            pool.free(s);
            v
        })
        .collect()
}

fn assert_frames(got: &[(Vec<u8>, u16)], want: &[Vec<u8>], gso_size: u16, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: frames");
    for (k, ((g, size), w)) in got.iter().zip(want).enumerate() {
        assert_eq!(*size, gso_size, "{what}: frame {k}'s gso_size");
        let at = g.iter().zip(w).position(|(a, b)| a != b);
        assert!(
            g == w,
            "{what}: frame {k}: lengths {} {}, first difference at {at:?}",
            g.len(),
            w.len()
        );
    }
}

#[test]
fn a_received_encapsulated_super_frame_pops_whole_into_the_one_the_push_carried() {
    let mut pool = Pool::new(256, 0);
    for c in cases() {
        for (pop, csum_good) in [("tnl_pop(tnl)", true), ("clone(tnl_pop(tnl))", false)] {
            let what = format!("{c:?} {pop} rx_csum {csum_good}");
            let (f, _) = received(c);
            let tlen = template(c.kind, c.outer_v6, c.csum).header.len();
            // The inner super-frame as the push carried it (its checksum fields as made
            // ready for the device: the switch does not maintain them).
            let inner = f[tlen..].to_vec();
            let flows = [("in_port(p0)", pop), ("in_port(tnl)", "p2,p3")];
            let (sent, st) = run(vec![(f, c.size(), csum_good)], c.kind, &flows);
            assert_eq!(st.tnl_pops, 1, "{what}: {st:?}");
            assert_eq!(st.tnl_pop_dropped(), 0, "{what}");
            let size = c.size();
            assert_frames(&take(&sent[1]), std::slice::from_ref(&inner), size, &what);
            let mut p = Packet::from_slice(&inner);
            p.meta.gso_size = size;
            let want = segments(&p, &mut pool);
            assert_eq!(want.len(), PAYLOAD.div_ceil(usize::from(size)));
            assert_frames(&take(&sent[0]), &want, 0, &what);
            assert_eq!(st.gso_drops, 0, "{what}");
        }
    }
}

#[test]
fn a_received_encapsulated_super_frame_not_popped_is_cut_as_on_receive_or_goes_whole() {
    let mut pool = Pool::new(256, 0);
    for c in cases() {
        let what = format!("{c:?}");
        let (f, pushed) = received(c);
        // What cutting it on receive gives (and gave before frames were kept whole).
        let want = segments(&pushed, &mut pool);
        let (sent, st) = run(
            vec![(f.clone(), c.size(), c.csum)],
            c.kind,
            &[("in_port(p0)", "p2,p3,p5")],
        );
        assert_eq!(want.len(), PAYLOAD.div_ceil(usize::from(c.size())));
        assert_frames(&take(&sent[0]), &want, 0, &what);
        assert_frames(&take(&sent[1]), &want, 0, &what);
        // Whole to the queue that takes UDP-tunnel GSO, as received.
        assert_frames(&take(&sent[2]), &[f], c.size(), &what);
        assert_eq!((st.gso_frames, st.gso_drops), (2, 0), "{what}");
    }
}

#[test]
fn actions_on_a_received_encapsulated_super_frame_see_its_segments() {
    for udp in [false, true] {
        actions_see_segments(udp);
    }
}

/// [`actions_on_a_received_encapsulated_super_frame_see_its_segments`] with TCP or UDP
/// inside.
fn actions_see_segments(udp: bool) {
    let mut pool = Pool::new(256, 0);
    let c = Case {
        udp,
        kind: Kind::Geneve,
        outer_v6: false,
        inner_v6: false,
        csum: true,
        // As a tap hands them on: the outer lengths of the whole frame, for the extraction.
        zero_len: false,
    };
    let (f, pushed) = received(c);
    let want = segments(&pushed, &mut pool);
    let n = want.len();
    let rx = |f: &Vec<u8>| vec![(f.clone(), c.size(), true)];
    // A rewrite of the outer headers: on the whole frame, then cut at the output.
    let (sent, _) = run(
        rx(&f),
        c.kind,
        &[(
            "in_port(p0),eth_type(0x0800),ipv4(frag=no)",
            "set(ipv4(ttl=9)),p2",
        )],
    );
    let got = take(&sent[0]);
    assert_eq!(got.len(), n, "udp {udp}");
    for ((g, _), w) in got.iter().zip(&want) {
        assert_eq!(g[22], 9, "outer TTL");
        assert_eq!(sum(&g[14..34]), 0xffff, "outer IPv4 header checksum");
        assert_eq!(
            (&g[..22], &g[23..24], &g[26..]),
            (&w[..22], &w[23..24], &w[26..]),
            "udp {udp}"
        );
    }
    // A second push: each segment pushed.
    let t2 = template(Kind::Vxlan, true, false);
    let push2 = push_text(Kind::Vxlan, true, false);
    let (sent, st) = run(rx(&f), c.kind, &[("in_port(p0)", &format!("{push2},p3"))]);
    let want2: Vec<Vec<u8>> = want
        .iter()
        .map(|w| {
            let mut s = Packet::from_slice(w);
            (s.meta.l3, s.meta.l4) = (14, 34);
            datapath::rewrite::tnl_push(&mut s, &t2).unwrap();
            s.data().to_vec()
        })
        .collect();
    assert_frames(
        &take(&sent[1]),
        &want2,
        0,
        &format!("second push, udp {udp}"),
    );
    assert_eq!((st.gso_frames, st.gso_segments), (1, n as u64));
    // A controller action: the segments.
    let ctl = "userspace(pid=1,controller(reason=1,dont_send=0,continuation=0,recirc_id=1,\
               rule_cookie=0,controller_id=0,max_len=65535))";
    let (_, st) = run(rx(&f), c.kind, &[("in_port(p0)", ctl)]);
    assert_eq!(st.userspace_packets, n as u64, "udp {udp}");
}

#[test]
fn bad_received_encapsulated_super_frames_are_drops_counted_by_reason() {
    let c = Case {
        udp: false,
        kind: Kind::Vxlan,
        outer_v6: false,
        inner_v6: false,
        csum: false,
        zero_len: false,
    };
    let (f, _) = received(c);
    // A VXLAN reserved byte set: the pop refuses it.
    let mut bad_vxlan = f.clone();
    bad_vxlan[14 + 20 + 8 + 7] = 1;
    for pop in ["tnl_pop(tnl)", "clone(tnl_pop(tnl))"] {
        let flows = [("in_port(p0)", pop), ("in_port(tnl)", "p2,p3")];
        let (sent, st) = run(vec![(bad_vxlan.clone(), MSS, false)], c.kind, &flows);
        assert!(take(&sent[0]).is_empty() && take(&sent[1]).is_empty());
        assert_eq!(st.tnl_pops, 0);
        assert_eq!(st.tnl_pop_drops[TnlPopDrop::BadHeader as usize], 1, "{pop}");
    }
    // Neither TCP nor UDP inside (ICMP): the output cannot cut it.
    let mut not_tcp = f.clone();
    not_tcp[50 + 14 + 9] = 1;
    let flows = [("in_port(p0)", "p2,p5")];
    let (sent, st) = run(vec![(not_tcp, MSS, false)], c.kind, &flows);
    assert!(take(&sent[0]).is_empty() && take(&sent[2]).is_empty());
    assert_eq!(st.gso_drops, 2);
    assert_eq!(st.gso_drop_reasons[GsoError::NotTcp.index()], 2);
    // A UDP one whose datagram size makes more than 128 datagrams (Linux's
    // UDP_MAX_SEGMENTS): neither cut nor handed whole.
    let (u, _) = received(Case { udp: true, ..c });
    let (sent, st) = run(vec![(u, 100, false)], c.kind, &flows);
    assert!(take(&sent[0]).is_empty() && take(&sent[2]).is_empty());
    assert_eq!(st.gso_drops, 2);
    assert_eq!(st.gso_drop_reasons[GsoError::MssTooSmall.index()], 2);
    // A GENEVE frame popped as VXLAN: not VXLAN.
    let (f, _) = received(Case {
        kind: Kind::Geneve,
        ..c
    });
    let mut pmd_flows = vec![("in_port(p0)", "tnl_pop(tnl)")];
    pmd_flows.push(("in_port(tnl)", "p2"));
    let (sent, st) = run(vec![(f, MSS, false)], c.kind, &pmd_flows);
    assert_eq!(take(&sent[0]).len(), 0);
    assert_eq!(st.tnl_pop_drops[TnlPopDrop::BadHeader as usize], 1);
}
