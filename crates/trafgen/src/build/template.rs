//! A [`Template`]: a stack of [`Layer`]s and a payload, checked (layer order, field ranges)
//! and emitted as a frame of any size with every derived field filled in (EtherTypes, IP
//! protocols, tunnel ports, MPLS bottom of stack, lengths) and every checksum computed,
//! innermost first. Also its reverse, for the answering direction of a bidirectional stream.

use wire::geneve::GeneveOptions;
use wire::ipv4::Ipv4Options;
use wire::tcp::TcpOptions;
use wire::{
    EtherType, EthernetFrame, EthernetRepr, GenevePacket, GeneveRepr, GrePacket, GreRepr,
    IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, MplsEntry, MplsRepr, TcpFlags,
    TcpPacket, TcpRepr, UdpPacket, UdpRepr, VlanRepr, VlanTag, VxlanPacket, VxlanRepr,
};

use super::checksum::Site;
use super::layer::{is_tunnel_udp, udp_ports};
use super::{BuildError, FCS_LEN, Layer, LayerKind, MAX_FRAME_SIZE, MIN_FRAME_SIZE};
use crate::stamp::STAMP_LEN;

/// A frame's headers and payload; lengths and checksums are computed when it is built.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Template {
    /// Headers, outermost first; the first is Ethernet.
    pub layers: Vec<Layer>,
    /// The innermost payload: cut or zero-padded to the frame size; with a stamp, its last 16
    /// bytes are the stamp.
    pub payload: Vec<u8>,
}

/// Layer positions of a template, independent of the frame size.
#[derive(Clone, Debug)]
pub(super) struct Layout {
    pub(super) offs: Vec<usize>,
    pub(super) header_len: usize,
    pub(super) sites: Vec<Site>,
}

impl Template {
    /// A template of these layers and no payload.
    pub fn new(layers: Vec<Layer>) -> Template {
        Template {
            layers,
            payload: Vec::new(),
        }
    }

    /// Bytes of headers.
    pub fn header_len(&self) -> usize {
        self.layers.iter().map(Layer::header_len).sum()
    }

    /// Checks the order and field ranges of the layers.
    pub fn check(&self) -> Result<(), BuildError> {
        let Some(first) = self.layers.first() else {
            return Err(BuildError::Template(
                "no layers: a template starts with eth".into(),
            ));
        };
        if first.kind() != LayerKind::Eth {
            return Err(BuildError::Layer {
                index: 0,
                kind: first.kind(),
                key: "type",
                message: "the first layer must be eth".into(),
            });
        }
        for (i, l) in self.layers.iter().enumerate() {
            if i > 0 {
                let prev = self.layers[i - 1].kind();
                if !prev.may_carry(l.kind()) {
                    return Err(BuildError::Layer {
                        index: i,
                        kind: l.kind(),
                        key: "type",
                        message: format!("{} cannot follow {prev}", l.kind()),
                    });
                }
            }
            l.check().map_err(|(key, message)| BuildError::Layer {
                index: i,
                kind: l.kind(),
                key,
                message,
            })?;
        }
        if self.header_len() + FCS_LEN > MAX_FRAME_SIZE {
            return Err(BuildError::Template(format!(
                "{} bytes of headers do not fit the largest frame, {MAX_FRAME_SIZE}",
                self.header_len()
            )));
        }
        Ok(())
    }

    /// The template with source and destination swapped in every layer: MAC and IP addresses,
    /// L4 ports (but for UDP carrying VXLAN or GENEVE, whose destination is the tunnel's
    /// port: its ports stay).
    pub fn reversed(&self) -> Template {
        let mut layers = self.layers.clone();
        for (i, l) in layers.iter_mut().enumerate() {
            let tunnel = is_tunnel_udp(&self.layers, i);
            let next = self.layers.get(i + 1);
            match l {
                Layer::Eth(e) => std::mem::swap(&mut e.src, &mut e.dst),
                Layer::Ipv4(l) => std::mem::swap(&mut l.src, &mut l.dst),
                Layer::Ipv6(l) => std::mem::swap(&mut l.src, &mut l.dst),
                Layer::Udp(u) if !tunnel => {
                    let (s, d) = udp_ports(u, next);
                    u.sport = Some(d);
                    u.dport = Some(s);
                }
                Layer::Tcp(t) => std::mem::swap(&mut t.sport, &mut t.dport),
                _ => {}
            }
        }
        Template {
            layers,
            payload: self.payload.clone(),
        }
    }

    pub(super) fn layout(&self) -> Layout {
        let mut offs = Vec::with_capacity(self.layers.len());
        let mut o = 0;
        for l in &self.layers {
            offs.push(o);
            o += l.header_len();
        }
        let mut sites = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            let at = offs[i];
            // Validated order: UDP, TCP and GRE follow an IP header.
            let pseudo = match i.checked_sub(1).map(|j| (&self.layers[j], offs[j])) {
                Some((Layer::Ipv4(_), ip)) => Some((ip + 12, 8)),
                Some((Layer::Ipv6(_), ip)) => Some((ip + 8, 32)),
                _ => None,
            };
            match l {
                Layer::Ipv4(_) => sites.push(Site {
                    pos: at + 10,
                    start: at,
                    end: Some(at + l.header_len()),
                    pseudo: None,
                    udp: false,
                }),
                Layer::Udp(u) if u.checksum => sites.push(Site {
                    pos: at + 6,
                    start: at,
                    end: None,
                    pseudo,
                    udp: true,
                }),
                Layer::Tcp(_) => sites.push(Site {
                    pos: at + 16,
                    start: at,
                    end: None,
                    pseudo,
                    udp: false,
                }),
                Layer::Gre(g) if g.checksum => sites.push(Site {
                    pos: at + 4,
                    start: at,
                    end: None,
                    pseudo: None,
                    udp: false,
                }),
                _ => {}
            }
        }
        Layout {
            offs,
            header_len: o,
            sites,
        }
    }

    /// The frame of `len` bytes (no FCS): headers, the payload cut or zero-padded, with
    /// `stamped` its last 16 bytes zero, every length and checksum computed. The template must
    /// be [checked](Template::check) and `len` at least its headers (and 16 with a stamp).
    pub(super) fn emit(&self, layout: &Layout, len: usize, stamped: bool) -> Vec<u8> {
        let mut f = vec![0u8; len];
        let h = layout.header_len;
        let n = self.payload.len().min(len - h);
        f[h..h + n].copy_from_slice(&self.payload[..n]);
        if stamped {
            f[len - STAMP_LEN..].fill(0);
        }
        let ls = &self.layers;
        for (i, l) in ls.iter().enumerate() {
            let o = layout.offs[i];
            let next = ls.get(i + 1);
            let rest = len - o - l.header_len();
            let b = &mut f[o..];
            match l {
                Layer::Eth(e) => EthernetRepr {
                    src_addr: e.src,
                    dst_addr: e.dst,
                    ethertype: EtherType(
                        e.ethertype
                            .or_else(|| next.and_then(Layer::ethertype))
                            .unwrap_or(0x9000),
                    ),
                }
                .emit(&mut EthernetFrame::new_unchecked(b)),
                Layer::Vlan(v) => VlanRepr {
                    pcp: v.pcp,
                    dei: v.dei,
                    vid: v.vid,
                    ethertype: EtherType(
                        v.ethertype
                            .or_else(|| next.and_then(Layer::ethertype))
                            .unwrap_or(0),
                    ),
                }
                .emit(&mut VlanTag::new_unchecked(b)),
                Layer::Ipv4(p) => Ipv4Repr {
                    src_addr: p.src,
                    dst_addr: p.dst,
                    protocol: IpProtocol(
                        p.proto
                            .or_else(|| next.and_then(Layer::ip_protocol))
                            .unwrap_or(0),
                    ),
                    payload_len: rest,
                    ttl: p.ttl,
                    dscp: p.tos >> 2,
                    ecn: p.tos & 3,
                    ident: p.id,
                    dont_frag: p.df,
                    more_frags: p.mf,
                    frag_offset: p.frag_offset,
                    options: Ipv4Options::from_slice(&p.options).unwrap_or_default(),
                }
                .emit(&mut Ipv4Packet::new_unchecked(b)),
                Layer::Ipv6(p) => Ipv6Repr {
                    src_addr: p.src,
                    dst_addr: p.dst,
                    next_header: IpProtocol(
                        p.nh.or_else(|| next.and_then(Layer::ip_protocol))
                            .unwrap_or(IpProtocol::IPV6_NONXT.0),
                    ),
                    payload_len: rest,
                    hop_limit: p.hlim,
                    traffic_class: p.tc,
                    flow_label: p.fl,
                }
                .emit(&mut Ipv6Packet::new_unchecked(b)),
                Layer::Udp(u) => {
                    let (src_port, dst_port) = udp_ports(u, next);
                    UdpRepr {
                        src_port,
                        dst_port,
                        payload_len: rest,
                    }
                    .emit(&mut UdpPacket::new_unchecked(b));
                }
                Layer::Tcp(t) => TcpRepr {
                    src_port: t.sport,
                    dst_port: t.dport,
                    seq_number: t.seq,
                    ack_number: t.ack,
                    flags: TcpFlags::from_bits_truncate(t.flags),
                    window_len: t.window,
                    urgent_at: t.urgent,
                    options: TcpOptions::from_slice(&t.options).unwrap_or_default(),
                }
                .emit(&mut TcpPacket::new_unchecked(b)),
                Layer::Vxlan(v) => VxlanRepr {
                    vni: v.vni,
                    gbp: v.gbp,
                }
                .emit(&mut VxlanPacket::new_unchecked(b)),
                Layer::Geneve(g) => GeneveRepr {
                    oam: g.oam,
                    critical: g.critical,
                    protocol_type: EtherType(
                        g.protocol
                            .or_else(|| next.and_then(Layer::ethertype))
                            .unwrap_or(EtherType::TEB.0),
                    ),
                    vni: g.vni,
                    options: GeneveOptions::from_slice(&g.options).unwrap_or_default(),
                }
                .emit(&mut GenevePacket::new_unchecked(b)),
                Layer::Gre(g) => GreRepr {
                    protocol_type: EtherType(
                        g.protocol
                            .or_else(|| next.and_then(Layer::ethertype))
                            .unwrap_or(0),
                    ),
                    checksum_present: g.checksum,
                    key: g.key,
                    sequence: g.sequence,
                }
                .emit(&mut GrePacket::new_unchecked(b)),
                Layer::Mpls(m) => MplsRepr {
                    label: m.label,
                    tc: m.tc,
                    bottom_of_stack: !matches!(next, Some(Layer::Mpls(_))),
                    ttl: m.ttl,
                }
                .emit(&mut MplsEntry::new_unchecked(b)),
            }
        }
        // Innermost first: an outer checksum covers the inner ones.
        for i in (1..ls.len()).rev() {
            let o = layout.offs[i];
            let ip = &ls[i - 1];
            let b = &mut f[o..];
            match (&ls[i], ip) {
                (Layer::Udp(u), Layer::Ipv4(p)) if u.checksum => {
                    UdpPacket::new_unchecked(b).fill_checksum_v4(&p.src, &p.dst)
                }
                (Layer::Udp(u), Layer::Ipv6(p)) if u.checksum => {
                    UdpPacket::new_unchecked(b).fill_checksum_v6(&p.src, &p.dst)
                }
                (Layer::Tcp(_), Layer::Ipv4(p)) => {
                    TcpPacket::new_unchecked(b).fill_checksum_v4(&p.src, &p.dst)
                }
                (Layer::Tcp(_), Layer::Ipv6(p)) => {
                    TcpPacket::new_unchecked(b).fill_checksum_v6(&p.src, &p.dst)
                }
                (Layer::Gre(g), _) if g.checksum => GrePacket::new_unchecked(b).fill_checksum(),
                _ => {}
            }
        }
        f
    }

    /// The frame for `frame_size` (FCS included; the buffer is 4 bytes shorter), without
    /// variation; with `stamped`, the last 16 bytes are a zero stamp.
    pub fn build(&self, frame_size: usize, stamped: bool) -> Result<Vec<u8>, BuildError> {
        self.check()?;
        check_size(frame_size, self.header_len(), stamped)?;
        Ok(self.emit(&self.layout(), frame_size - FCS_LEN, stamped))
    }
}

pub(super) fn check_size(size: usize, headers: usize, stamped: bool) -> Result<(), BuildError> {
    if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&size) {
        return Err(BuildError::Sizes(format!(
            "frame_size {size} is outside {MIN_FRAME_SIZE}..={MAX_FRAME_SIZE}"
        )));
    }
    if headers + if stamped { STAMP_LEN } else { 0 } + FCS_LEN > size {
        return Err(BuildError::TooSmall {
            size,
            headers,
            stamp: stamped,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures::*;
    use crate::build::{Ipv4, Ipv6, Udp, Vlan};

    #[test]
    fn defaults_are_scapys() {
        // Ether(src=..01, dst=..02)/IP()/UDP()/Raw(b"\0" * 18), scapy 2.8.0.
        let t = Template::new(vec![
            eth("00:00:00:00:00:01", "00:00:00:00:00:02"),
            Layer::Ipv4(Ipv4::default()),
            Layer::Udp(Udp::default()),
        ]);
        assert_eq!(
            t.build(64, false).unwrap(),
            unhex(
                "00000000000200000000000108004500002e0001000040117cbc7f0000017f00000100350035001a\
                 014e000000000000000000000000000000000000"
            )
        );
        // IP(10.0.0.1 > 10.0.0.2)/GRE(key_present=1, key=7)/MPLS(100, ttl 4)/MPLS(200, ttl 4)/
        // IP/UDP(1, 2), padded to 101 bytes with the FCS: an odd length.
        let t = &combos()[4];
        assert_eq!(
            t.build(101, false).unwrap(),
            unhex(
                "00000000000200000000000108004500005300010000402f66790a0000010a000002200088470000\
                 000700064004000c81044500002f000100004011f969c0a80001c0a8000200010002001b7e610000\
                 0000000000000000000000000000000000"
            )
        );
    }

    #[test]
    fn derived_fields() {
        let t = &combos()[2];
        let f = t.build(128, true).unwrap();
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        assert_eq!(&f[14 + 9], &17);
        // UDP to VXLAN: given source, destination 4789.
        assert_eq!(&f[34..38], &[0xc0, 0x00, 0x12, 0xb5]);
        assert_eq!(&f[42..50], &[0x08, 0, 0, 0, 0, 0, 100, 0]);
        // Without ports: both 4789, as scapy.
        let mut t = t.clone();
        t.layers[2] = Layer::Udp(Udp::default());
        let f = t.build(128, true).unwrap();
        assert_eq!(&f[34..38], &[0x12, 0xb5, 0x12, 0xb5]);
        // GENEVE: destination 6081, source 53; protocol from the next layer.
        let f = combos()[3].build(128, true).unwrap();
        assert_eq!(&f[12..18], &[0x81, 0x00, 0x00, 177, 0x08, 0x00]);
        assert_eq!(&f[38..42], &[0xde, 0xc1, 0x17, 0xc1]);
        assert_eq!(&f[46..50], &[0x02, 0x00, 0x65, 0x58]);
        let f = combos()[11].build(128, true).unwrap();
        assert_eq!(&f[34..38], &[0, 53, 0x17, 0xc1]);
        assert_eq!(&f[42..46], &[0x00, 0x00, 0x86, 0xdd]);
        // MPLS: bottom of stack on the last entry only; GRE names MPLS.
        let f = combos()[4].build(128, true).unwrap();
        assert_eq!(&f[36..38], &[0x88, 0x47]);
        assert_eq!(f[42 + 2] & 1, 0);
        assert_eq!(f[46 + 2] & 1, 1);
        // Nothing after Ethernet: 0x9000; after IPv4: 0; after IPv6: 59.
        let t = Template::new(vec![eth("00:00:00:00:00:01", "00:00:00:00:00:02")]);
        assert_eq!(&t.build(64, true).unwrap()[12..14], &[0x90, 0x00]);
        let t = Template::new(vec![
            eth("00:00:00:00:00:01", "00:00:00:00:00:02"),
            Layer::Ipv6(Ipv6::default()),
        ]);
        assert_eq!(t.build(128, true).unwrap()[20], 59);
        // QinQ: the outer tag's TPID is in the Ethernet header, the inner one's in the outer tag.
        let f = combos()[8].build(128, true).unwrap();
        assert_eq!(
            &f[12..22],
            &[0x88, 0xa8, 0, 100, 0x81, 0x00, 0, 200, 0x08, 0x00]
        );
        assert_eq!(f[22 + 9], 4);
    }

    #[test]
    fn bad_orders_and_values() {
        let e = || eth("00:00:00:00:00:01", "00:00:00:00:00:02");
        let t = Template::new(vec![e(), Layer::Udp(Udp::default())]);
        assert_eq!(
            t.check().unwrap_err().to_string(),
            "layer 1 (udp): udp cannot follow eth"
        );
        let t = Template::new(vec![Layer::Ipv4(Ipv4::default())]);
        assert!(matches!(
            t.check(),
            Err(BuildError::Layer {
                index: 0,
                key: "type",
                ..
            })
        ));
        let t = Template::new(vec![
            e(),
            Layer::Vlan(Vlan {
                vid: 4096,
                ..Vlan::default()
            }),
        ]);
        assert!(matches!(
            t.check(),
            Err(BuildError::Layer {
                index: 1,
                key: "vid",
                ..
            })
        ));
        assert!(Template::default().check().is_err());
    }
}
