//! The dissector: a frame's bytes (a stream file's `hex`, a capture's first packet) read back
//! into the same [`Layer`] model a stream file describes, so that a captured frame can be a
//! template whose fields vary like any other. It reads the headers it knows, following each
//! header's next-protocol field (and, after MPLS, the first nibble, as scapy guesses), and stops
//! at the first it does not know, is malformed, or is an IP fragment's payload: the rest is
//! opaque payload.

use wire::{
    EthernetFrame, EthernetRepr, GenevePacket, GeneveRepr, GrePacket, GreRepr, Ipv4Packet,
    Ipv4Repr, Ipv6Packet, Ipv6Repr, MplsEntry, MplsRepr, TcpPacket, TcpRepr, UdpPacket, VlanRepr,
    VlanTag, VxlanPacket, VxlanRepr,
};

use super::layer::ETH_LEN;
use super::{
    BuildError, Eth, Geneve, Gre, Ipv4, Ipv6, Layer, Mpls, Tcp, Template, Udp, Vlan, Vxlan,
    parse_hex,
};

impl Template {
    /// Reads a frame (no FCS) into layers: Ethernet, VLAN, IPv4, IPv6, UDP, TCP, VXLAN (UDP
    /// port 4789), GENEVE (6081), GRE, MPLS. Where a header is not one of these, malformed, or an
    /// IP fragment's payload, the rest is opaque payload, and the header before it names it
    /// as it did. Next-protocol fields are kept as they were; lengths and checksums are not
    /// (they are recomputed), nor bytes after the end that an IP or UDP length gives
    /// (Ethernet padding).
    pub fn dissect(frame: &[u8]) -> Result<Template, BuildError> {
        if frame.len() < ETH_LEN {
            return Err(BuildError::Template(format!(
                "{} bytes are too short for an Ethernet frame",
                frame.len()
            )));
        }
        Ok(dissect(frame))
    }

    /// [`Template::dissect`] of a frame written in hex digits (spaces, colons and newlines
    /// between them are ignored).
    pub fn from_hex(s: &str) -> Result<Template, BuildError> {
        Template::dissect(&parse_hex(s).map_err(BuildError::Template)?)
    }
}

/// What the dissector expects next.
#[derive(Clone, Copy)]
enum Next {
    Eth,
    Vlan(u16),
    Ipv4,
    Ipv6,
    Udp,
    Tcp,
    Gre,
    Vxlan,
    Geneve,
    Mpls,
    AfterMpls,
    Payload,
}

/// What an Ethernet or VLAN EtherType announces.
fn l2_next(t: u16) -> Next {
    match t {
        0x8100 | 0x88a8 | 0x9100 => Next::Vlan(t),
        0x0800 => Next::Ipv4,
        0x86dd => Next::Ipv6,
        0x8847 => Next::Mpls,
        _ => Next::Payload,
    }
}

/// What a GRE or GENEVE protocol type announces.
fn tunnel_next(t: u16) -> Next {
    match t {
        0x6558 => Next::Eth,
        0x0800 => Next::Ipv4,
        0x86dd => Next::Ipv6,
        0x8847 => Next::Mpls,
        _ => Next::Payload,
    }
}

/// What an IP protocol announces.
fn ip_next(p: u8) -> Next {
    match p {
        4 => Next::Ipv4,
        41 => Next::Ipv6,
        17 => Next::Udp,
        6 => Next::Tcp,
        47 => Next::Gre,
        _ => Next::Payload,
    }
}

/// One header at the start of `b`: the layer, its length, what follows, and the end of the
/// packet if the header says where it is. `None` where `next` is not there or is malformed.
fn dissect_one(b: &[u8], next: Next) -> Option<(Layer, usize, Next, Option<usize>)> {
    Some(match next {
        Next::Payload => return None,
        Next::AfterMpls => {
            // MPLS does not say what it carries; the first nibble does (scapy's guess).
            let n = match b.first()? >> 4 {
                4 => Next::Ipv4,
                6 => Next::Ipv6,
                _ => return None,
            };
            return dissect_one(b, n);
        }
        Next::Eth => {
            let r = EthernetRepr::parse(&EthernetFrame::new_checked(b).ok()?).ok()?;
            let t = r.ethertype.0;
            let l = Layer::Eth(Eth {
                src: r.src_addr,
                dst: r.dst_addr,
                ethertype: Some(t),
            });
            (l, ETH_LEN, l2_next(t), None)
        }
        Next::Vlan(tpid) => {
            let r = VlanRepr::parse(&VlanTag::new_checked(b).ok()?).ok()?;
            let l = Layer::Vlan(Vlan {
                vid: r.vid,
                pcp: r.pcp,
                dei: r.dei,
                tpid,
                ethertype: Some(r.ethertype.0),
            });
            (l, 4, l2_next(r.ethertype.0), None)
        }
        Next::Ipv4 => {
            let p = Ipv4Packet::new_checked(b).ok()?;
            let r = Ipv4Repr::parse(&p).ok()?;
            // A fragment's payload is not a header.
            let after = if r.more_frags || r.frag_offset != 0 {
                Next::Payload
            } else {
                ip_next(r.protocol.0)
            };
            let l = Layer::Ipv4(Ipv4 {
                src: r.src_addr,
                dst: r.dst_addr,
                ttl: r.ttl,
                tos: (r.dscp << 2) | r.ecn,
                id: r.ident,
                df: r.dont_frag,
                mf: r.more_frags,
                frag_offset: r.frag_offset,
                proto: Some(r.protocol.0),
                options: r.options.as_slice().to_vec(),
            });
            (l, p.header_len(), after, Some(usize::from(p.total_len())))
        }
        Next::Ipv6 => {
            let p = Ipv6Packet::new_checked(b).ok()?;
            let r = Ipv6Repr::parse(&p).ok()?;
            let l = Layer::Ipv6(Ipv6 {
                src: r.src_addr,
                dst: r.dst_addr,
                hlim: r.hop_limit,
                tc: r.traffic_class,
                fl: r.flow_label,
                nh: Some(r.next_header.0),
            });
            let end = 40 + usize::from(p.payload_len());
            (l, 40, ip_next(r.next_header.0), Some(end))
        }
        Next::Udp => {
            let p = UdpPacket::new_checked(b).ok()?;
            let l = Layer::Udp(Udp {
                sport: Some(p.src_port()),
                dport: Some(p.dst_port()),
                checksum: p.checksum() != 0,
            });
            let after = match p.dst_port() {
                wire::consts::VXLAN_PORT => Next::Vxlan,
                wire::consts::GENEVE_PORT => Next::Geneve,
                _ => Next::Payload,
            };
            (l, 8, after, Some(usize::from(p.len())))
        }
        Next::Tcp => {
            let p = TcpPacket::new_checked(b).ok()?;
            let r = TcpRepr::parse(&p).ok()?;
            let l = Layer::Tcp(Tcp {
                sport: r.src_port,
                dport: r.dst_port,
                seq: r.seq_number,
                ack: r.ack_number,
                flags: r.flags.bits(),
                window: r.window_len,
                urgent: r.urgent_at,
                options: r.options.as_slice().to_vec(),
            });
            (l, p.header_len(), Next::Payload, None)
        }
        Next::Gre => {
            let p = GrePacket::new_checked(b).ok()?;
            let r = GreRepr::parse(&p).ok()?;
            let t = r.protocol_type.0;
            let l = Layer::Gre(Gre {
                key: r.key,
                checksum: r.checksum_present,
                sequence: r.sequence,
                protocol: Some(t),
            });
            (l, p.header_len(), tunnel_next(t), None)
        }
        Next::Vxlan => {
            let r = VxlanRepr::parse(&VxlanPacket::new_checked(b).ok()?).ok()?;
            let l = Layer::Vxlan(Vxlan {
                vni: r.vni,
                gbp: r.gbp,
            });
            (l, 8, Next::Eth, None)
        }
        Next::Geneve => {
            let p = GenevePacket::new_checked(b).ok()?;
            let r = GeneveRepr::parse(&p).ok()?;
            if p.version() != 0 {
                return None;
            }
            let t = r.protocol_type.0;
            let l = Layer::Geneve(Geneve {
                vni: r.vni,
                critical: r.critical,
                oam: r.oam,
                protocol: Some(t),
                options: r.options.as_slice().to_vec(),
            });
            (l, p.header_len(), tunnel_next(t), None)
        }
        Next::Mpls => {
            let r = MplsRepr::parse(&MplsEntry::new_checked(b).ok()?).ok()?;
            let l = Layer::Mpls(Mpls {
                label: r.label,
                tc: r.tc,
                ttl: r.ttl,
            });
            let after = if r.bottom_of_stack {
                Next::AfterMpls
            } else {
                Next::Mpls
            };
            (l, 4, after, None)
        }
    })
}

fn dissect(frame: &[u8]) -> Template {
    let mut layers: Vec<Layer> = Vec::new();
    let mut pos = 0;
    let mut end = frame.len();
    let mut next = Next::Eth;
    while let Some((layer, len, after, pkt_end)) = dissect_one(&frame[pos..end], next) {
        // Checked views keep `len` and `pkt_end` within the bytes they were given.
        layers.push(layer);
        if let Some(e) = pkt_end {
            end = (pos + e).min(end);
        }
        pos += len;
        next = after;
    }
    let end = end.clamp(pos, frame.len());
    Template {
        layers,
        payload: frame[pos..end].to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::build::MAX_FRAME_SIZE;
    use crate::build::fixtures::*;

    #[test]
    fn dissect_roundtrip() {
        for t in combos() {
            for size in [200usize, 203] {
                let f = t.build(size, false).unwrap();
                let d = Template::dissect(&f).unwrap();
                let kinds: Vec<_> = d.layers.iter().map(Layer::kind).collect();
                let want: Vec<_> = t.layers.iter().map(Layer::kind).collect();
                assert_eq!(kinds, want, "{t:?}");
                assert_eq!(d.build(size, false).unwrap(), f);
                assert_eq!(d.payload.len(), size - 4 - t.header_len());
            }
        }
    }

    #[test]
    fn dissect_stops_where_it_must() {
        let t = &combos()[0];
        let f = t.build(64, false).unwrap();
        // ARP: opaque after Ethernet, and the EtherType kept.
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let d = Template::dissect(&arp).unwrap();
        assert_eq!(d.layers.len(), 1);
        assert_eq!(d.payload, &arp[14..]);
        assert_eq!(d.build(64, false).unwrap(), arp);
        // An IPv4 fragment: UDP is not read.
        let mut frag = f.clone();
        frag[20] = 0x20;
        let d = Template::dissect(&frag).unwrap();
        assert_eq!(d.layers.len(), 2);
        // A UDP length past the IPv4 end: not UDP.
        let mut bad = f.clone();
        bad[38..40].copy_from_slice(&[0x10, 0x00]);
        assert_eq!(Template::dissect(&bad).unwrap().layers.len(), 2);
        // Ethernet padding after the IPv4 packet is dropped: 42 bytes + 18 of padding.
        let small = Template::new(t.layers.clone());
        let mut f = small.build(64, false).unwrap();
        f[16..18].copy_from_slice(&28u16.to_be_bytes());
        f[38..40].copy_from_slice(&8u16.to_be_bytes());
        let d = Template::dissect(&f).unwrap();
        assert_eq!((d.layers.len(), d.payload.len()), (3, 0));
        assert!(Template::dissect(&[0u8; 13]).is_err());
        assert!(Template::from_hex("0011").is_err());
        assert!(Template::from_hex("zz").is_err());
        // GRE with routing, VXLAN without its I flag: opaque from there.
        let f = combos()[2].build(128, false).unwrap();
        let mut nx = f.clone();
        nx[42] = 0;
        assert_eq!(Template::dissect(&nx).unwrap().layers.len(), 3);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn dissect_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(t) = Template::dissect(&b) {
                // What it reads is a valid template that builds.
                prop_assert!(t.check().is_ok());
                let _ = t.build((t.header_len() + 4).clamp(64, MAX_FRAME_SIZE), false);
            }
        }
    }
}
