//! What the tests of build's parts share: templates that cover every layer kind and the ways
//! they nest, a checksum and length verifier written apart from the builder (plain RFC 1071
//! sums over bytes), and a reference builder that makes any packet of a stream the slow,
//! obvious way, to compare the fast paths with.

use std::net::{Ipv4Addr, Ipv6Addr};

use wire::EthernetAddress;

use super::layer::is_tunnel_udp;
use super::*;
use crate::stamp::{STAMP_LEN, Stamp};

fn mac(s: &str) -> EthernetAddress {
    parse_mac_addr(s).unwrap()
}

pub(super) fn eth(src: &str, dst: &str) -> Layer {
    Layer::Eth(Eth {
        src: mac(src),
        dst: mac(dst),
        ethertype: None,
    })
}

fn v4(src: &str, dst: &str) -> Layer {
    Layer::Ipv4(Ipv4 {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        ..Ipv4::default()
    })
}

fn v6(src: &str, dst: &str) -> Layer {
    Layer::Ipv6(Ipv6 {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        ..Ipv6::default()
    })
}

fn udp(sport: u16, dport: u16) -> Layer {
    Layer::Udp(Udp {
        sport: Some(sport),
        dport: Some(dport),
        checksum: true,
    })
}

pub(super) fn unhex(s: &str) -> Vec<u8> {
    parse_hex(s).unwrap()
}

/// Templates covering every layer kind and the ways they nest.
pub(super) fn combos() -> Vec<Template> {
    let e1 = || eth("00:00:00:00:00:01", "00:00:00:00:00:02");
    let e2 = || eth("52:54:00:12:34:01", "52:54:00:12:34:02");
    let geneve = || {
        let mut g = Geneve {
            vni: 3,
            ..Geneve::default()
        };
        g.push_option(0x0102, 0x80, &[0, 3, 0, 2]).unwrap();
        Layer::Geneve(g)
    };
    let nock = |sport, dport| {
        Layer::Udp(Udp {
            sport: Some(sport),
            dport: Some(dport),
            checksum: false,
        })
    };
    let mpls = |label| {
        Layer::Mpls(Mpls {
            label,
            tc: 0,
            ttl: 4,
        })
    };
    vec![
        Template::new(vec![e1(), v4("10.0.0.1", "10.0.0.2"), udp(1024, 2000)]),
        Template::new(vec![
            e1(),
            Layer::Vlan(Vlan {
                vid: 10,
                pcp: 5,
                ..Vlan::default()
            }),
            v6("2001:db8::1", "2001:db8::2"),
            Layer::Tcp(Tcp {
                flags: 0x18,
                ..Tcp::default()
            }),
        ]),
        Template::new(vec![
            e1(),
            v4("10.1.2.9", "10.1.2.8"),
            Layer::Udp(Udp {
                sport: Some(49152),
                ..Udp::default()
            }),
            Layer::Vxlan(Vxlan {
                vni: 100,
                gbp: None,
            }),
            e2(),
            v4("192.168.1.1", "192.168.2.16"),
            udp(1024, 2000),
        ]),
        Template::new(vec![
            e1(),
            Layer::Vlan(Vlan {
                vid: 177,
                ..Vlan::default()
            }),
            v4("172.17.2.160", "172.17.2.60"),
            Layer::Udp(Udp {
                sport: Some(57025),
                ..Udp::default()
            }),
            geneve(),
            e2(),
            v4("192.168.1.61", "192.168.1.16"),
            udp(1024, 2000),
        ]),
        Template::new(vec![
            e1(),
            v4("10.0.0.1", "10.0.0.2"),
            Layer::Gre(Gre {
                key: Some(7),
                ..Gre::default()
            }),
            mpls(100),
            mpls(200),
            v4("192.168.0.1", "192.168.0.2"),
            udp(1, 2),
        ]),
        Template::new(vec![
            e1(),
            v6("2001:db8::1", "2001:db8::2"),
            Layer::Udp(Udp::default()),
            Layer::Vxlan(Vxlan { vni: 42, gbp: None }),
            e2(),
            v6("fd00::1", "fd00::2"),
            Layer::Tcp(Tcp::default()),
        ]),
        Template::new(vec![
            e1(),
            v4("10.0.0.1", "10.0.0.2"),
            Layer::Gre(Gre {
                key: Some(0x01020304),
                checksum: true,
                ..Gre::default()
            }),
            v6("fd00::1", "fd00::2"),
            nock(5, 6),
        ]),
        Template::new(vec![
            e1(),
            Layer::Ipv4(Ipv4 {
                options: vec![0x94, 0x04, 0, 0],
                tos: 0xb8,
                ..Ipv4::default()
            }),
            Layer::Tcp(Tcp {
                options: vec![2, 4, 5, 0xb4, 1],
                ..Tcp::default()
            }),
        ]),
        Template::new(vec![
            e1(),
            Layer::Vlan(Vlan {
                vid: 100,
                tpid: 0x88a8,
                ..Vlan::default()
            }),
            Layer::Vlan(Vlan {
                vid: 200,
                ..Vlan::default()
            }),
            v4("10.0.0.1", "10.0.0.2"),
            v4("10.9.0.1", "10.9.0.2"),
            nock(7, 8),
        ]),
        Template::new(vec![e1(), mpls(16), v4("10.0.0.1", "10.0.0.2"), udp(3, 4)]),
        Template::new(vec![
            e1(),
            v6("2001:db8::1", "2001:db8::2"),
            Layer::Gre(Gre {
                checksum: true,
                ..Gre::default()
            }),
            e2(),
            v4("10.0.0.1", "10.0.0.2"),
            Layer::Tcp(Tcp::default()),
        ]),
        Template::new(vec![
            e1(),
            v4("10.0.0.1", "10.0.0.2"),
            Layer::Udp(Udp::default()),
            Layer::Geneve(Geneve::default()),
            v6("fd00::1", "fd00::2"),
            nock(9, 10),
        ]),
    ]
}

// An independent checksum verifier: plain RFC 1071 sums over bytes.

fn naive_sum(parts: &[&[u8]]) -> u16 {
    let mut all = Vec::new();
    for p in parts {
        all.extend_from_slice(p);
    }
    if all.len() % 2 == 1 {
        all.push(0);
    }
    let mut s: u64 = all
        .chunks(2)
        .map(|w| u64::from(w[0]) << 8 | u64::from(w[1]))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Walks `frame` as `layers` says and checks every length and checksum.
pub(super) fn verify(layers: &[Layer], frame: &[u8]) -> Result<(), String> {
    let n = frame.len();
    let be16 = |o: usize| u16::from_be_bytes([frame[o], frame[o + 1]]);
    let mut offs = vec![0];
    for l in layers {
        offs.push(offs.last().unwrap() + l.header_len());
    }
    for (i, l) in layers.iter().enumerate() {
        let (o, h) = (offs[i], l.header_len());
        match l {
            Layer::Ipv4(_) => {
                if naive_sum(&[&frame[o..o + h]]) != 0xffff {
                    return Err(format!("layer {i}: IPv4 header checksum"));
                }
                if usize::from(be16(o + 2)) != n - o {
                    return Err(format!("layer {i}: IPv4 total length"));
                }
            }
            Layer::Ipv6(_) if usize::from(be16(o + 4)) != n - o - 40 => {
                return Err(format!("layer {i}: IPv6 payload length"));
            }
            Layer::Udp(_) | Layer::Tcp(_) => {
                let udp = matches!(l, Layer::Udp(_));
                if udp && usize::from(be16(o + 4)) != n - o {
                    return Err(format!("layer {i}: UDP length"));
                }
                if udp && be16(o + 6) == 0 {
                    // No checksum.
                    continue;
                }
                let len = (n - o) as u32;
                let proto = if udp { 17u8 } else { 6 };
                let mut pseudo: Vec<u8> = Vec::new();
                if let Layer::Ipv4(_) = layers[i - 1] {
                    pseudo.extend_from_slice(&frame[offs[i - 1] + 12..offs[i - 1] + 20]);
                    pseudo.extend_from_slice(&[0, proto]);
                    pseudo.extend_from_slice(&(len as u16).to_be_bytes());
                } else {
                    pseudo.extend_from_slice(&frame[o - 32..o]);
                    pseudo.extend_from_slice(&len.to_be_bytes());
                    pseudo.extend_from_slice(&[0, 0, 0, proto]);
                }
                if naive_sum(&[&pseudo, &frame[o..]]) != 0xffff {
                    let what = if udp { "UDP" } else { "TCP" };
                    return Err(format!("layer {i}: {what} checksum"));
                }
            }
            Layer::Gre(g) if g.checksum && naive_sum(&[&frame[o..]]) != 0xffff => {
                return Err(format!("layer {i}: GRE checksum"));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Sets a field of a layer, as the builder would have it for a flow.
fn set(l: &mut Layer, f: FieldKind, v: u128) {
    use FieldKind as F;
    let m = |v: u128| {
        let b = v.to_be_bytes();
        EthernetAddress(b[10..16].try_into().unwrap())
    };
    match (f, l) {
        (F::EthSrc, Layer::Eth(e)) => e.src = m(v),
        (F::EthDst, Layer::Eth(e)) => e.dst = m(v),
        (F::VlanVid, Layer::Vlan(x)) => x.vid = v as u16,
        (F::VlanPcp, Layer::Vlan(x)) => x.pcp = v as u8,
        (F::Ipv4Src, Layer::Ipv4(x)) => x.src = Ipv4Addr::from_bits(v as u32),
        (F::Ipv4Dst, Layer::Ipv4(x)) => x.dst = Ipv4Addr::from_bits(v as u32),
        (F::Ipv4Tos, Layer::Ipv4(x)) => x.tos = v as u8,
        (F::Ipv4Ttl, Layer::Ipv4(x)) => x.ttl = v as u8,
        (F::Ipv6Src, Layer::Ipv6(x)) => x.src = Ipv6Addr::from_bits(v),
        (F::Ipv6Dst, Layer::Ipv6(x)) => x.dst = Ipv6Addr::from_bits(v),
        (F::Ipv6Fl, Layer::Ipv6(x)) => x.fl = v as u32,
        (F::UdpSport, Layer::Udp(x)) => x.sport = Some(v as u16),
        (F::UdpDport, Layer::Udp(x)) => x.dport = Some(v as u16),
        (F::TcpSport, Layer::Tcp(x)) => x.sport = v as u16,
        (F::TcpDport, Layer::Tcp(x)) => x.dport = v as u16,
        (F::VxlanVni, Layer::Vxlan(x)) => x.vni = v as u32,
        (F::GeneveVni, Layer::Geneve(x)) => x.vni = v as u32,
        (F::GreKey, Layer::Gre(x)) => x.key = Some(v as u32),
        (F::MplsLabel, Layer::Mpls(x)) => x.label = v as u32,
        (f, l) => panic!("{f:?} not in {l:?}"),
    }
}

/// Packet `k` of `spec` built the slow, obvious way: the template with the flow's values
/// set, emitted whole, then the stamp written and every checksum recomputed.
pub(super) fn reference(spec: &FrameSpec, k: u64, stamp: &Stamp) -> Vec<u8> {
    let mut tpl = if spec.reversed {
        spec.template.reversed()
    } else {
        spec.template.clone()
    };
    let layout = tpl.layout();
    let plans = spec.plans(&tpl, &layout).unwrap();
    let flow = k % spec.flows;
    for (v, p) in spec.vary.iter().zip(&plans) {
        let kind = v.field.field.layer();
        let li = spec
            .template
            .layers
            .iter()
            .enumerate()
            .filter(|(_, l)| l.kind() == kind)
            .nth(v.field.index)
            .unwrap()
            .0;
        let tunnel = is_tunnel_udp(&spec.template.layers, li);
        let f = if spec.reversed && !(kind == LayerKind::Udp && tunnel) {
            v.field.field.swapped()
        } else {
            v.field.field
        };
        set(&mut tpl.layers[li], f, p.value(flow, spec.seed));
    }
    let cycle = spec.sizes.cycle();
    let size = cycle[(k % cycle.len() as u64) as usize];
    let len = size - FCS_LEN;
    if spec.stamp {
        let h = tpl.header_len();
        tpl.payload.resize(len - h, 0);
        tpl.payload[len - h - STAMP_LEN..].copy_from_slice(&stamp.to_bytes());
    }
    tpl.emit(&layout, len, false)
}

pub(super) fn vary(field: &str, op: VaryOp, from: Option<u128>, to: Option<u128>) -> Vary {
    Vary {
        field: field.parse().unwrap(),
        op,
        from,
        to,
    }
}
