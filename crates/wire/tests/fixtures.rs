//! Every packet of every fixture pcap (written by `scripts/gen-fixtures.py`) is dissected with
//! the `wire` views, layer by layer, and compared with what scapy recorded in the JSON sidecar:
//! layer names and offsets, field values, checksums (verified, and equal to scapy's), and, for each
//! header, `Repr::parse` followed by `emit` (and checksum fill) reproduces the original bytes.
//! Broken packets must fail at the layer, offset and with the error the sidecar names.

mod common;

use common::json::Json;
use common::unhex;
use std::result::Result;
use wire::checksum;
use wire::consts::{GENEVE_PORT, VXLAN_PORT};
use wire::ipv6::{Ipv6ExtHeader, Ipv6FragmentHeader, walk_ext_headers};
use wire::*;

#[derive(Clone, Copy, Debug)]
enum L3 {
    V4(Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr),
}

/// What a layer needs to know about the layers around it.
#[derive(Clone, Copy, Debug)]
struct Ctx {
    l3: Option<L3>,
    /// Inside an IP fragment: the upper-layer checksum cannot be verified.
    fragment: bool,
    /// Inside the quoted datagram of an ICMP error: scapy names layers `IPerror`, `UDPerror`…
    quoted: bool,
}

/// Where a dissection stopped: layer name, offset, error.
type Fail = (&'static str, usize, Error);

struct Walk<'a> {
    what: String,
    frame: &'a [u8],
    expected: Vec<&'a Json>,
    next: usize,
}

impl<'a> Walk<'a> {
    /// Claims the next scapy layer, which must be `name` at `off`; returns its JSON entry.
    fn layer(&mut self, name: &str, off: usize) -> &'a Json {
        let e = *self.expected.get(self.next).unwrap_or_else(|| {
            panic!(
                "{}: found {name} at {off}, scapy has no more layers",
                self.what
            )
        });
        assert_eq!(
            (e.s("name"), e.u("offset") as usize),
            (name, off),
            "{}: layer {} differs",
            self.what,
            self.next
        );
        self.next += 1;
        e
    }

    fn ctx(&self, name: &str) -> String {
        format!("{}: {name}", self.what)
    }
}

fn q(name: &'static str, quoted: bool) -> &'static str {
    if !quoted {
        return name;
    }
    match name {
        "IP" => "IPerror",
        "IPv6" => "IPerrorv6",
        "UDP" => "UDPerror",
        "TCP" => "TCPerror",
        "ICMP" => "ICMPerror",
        n => n,
    }
}

/// Emits into a copy of `orig` whose first `hdr_len` bytes are scrambled, runs `fix` (checksum
/// fill), and requires the exact original bytes back.
fn reemit(what: &str, orig: &[u8], hdr_len: usize, emit: impl FnOnce(&mut [u8])) {
    let mut buf = orig.to_vec();
    for b in &mut buf[..hdr_len] {
        *b ^= 0xa5;
    }
    emit(&mut buf);
    assert_eq!(
        buf, orig,
        "{what}: parse -> emit does not reproduce the bytes"
    );
}

fn raw(w: &mut Walk, buf: &[u8], off: usize) -> Result<(), Fail> {
    if !buf.is_empty() {
        let e = w.layer("Raw", off);
        assert_eq!(unhex(e.at("fields").s("load")), buf, "{}", w.ctx("Raw"));
    }
    Ok(())
}

fn by_ethertype(w: &mut Walk, et: EtherType, buf: &[u8], off: usize) -> Result<(), Fail> {
    match et {
        EtherType::VLAN => vlan(w, "Dot1Q", buf, off),
        EtherType::QINQ => vlan(w, "Dot1AD", buf, off),
        EtherType::ARP => arp(w, buf, off),
        EtherType::IPV4 => ipv4(w, buf, off, false),
        EtherType::IPV6 => ipv6(w, buf, off),
        EtherType::MPLS_UNICAST => mpls(w, buf, off),
        EtherType::TEB => ether(w, buf, off),
        _ => raw(w, buf, off),
    }
}

fn ether(w: &mut Walk, buf: &[u8], off: usize) -> Result<(), Fail> {
    let f = EthernetFrame::new_checked(buf).map_err(|e| ("Ether", off, e))?;
    let e = w.layer("Ether", off).at("fields");
    assert_eq!(f.dst_addr().to_string(), e.s("dst"));
    assert_eq!(f.src_addr().to_string(), e.s("src"));
    assert_eq!(u64::from(f.ethertype().0), e.u("type"));
    let r = EthernetRepr::parse(&f).unwrap();
    reemit("Ether", &buf[..14], 14, |b| {
        r.emit(&mut EthernetFrame::new_unchecked(b))
    });
    by_ethertype(w, f.ethertype(), f.payload(), off + 14)
}

fn vlan(w: &mut Walk, name: &'static str, buf: &[u8], off: usize) -> Result<(), Fail> {
    let t = VlanTag::new_checked(buf).map_err(|e| (name, off, e))?;
    let e = w.layer(name, off).at("fields");
    assert_eq!(u64::from(t.pcp()), e.u("prio"));
    assert_eq!(u64::from(t.dei()), e.u("dei"));
    assert_eq!(u64::from(t.vid()), e.u("vlan"));
    assert_eq!(u64::from(t.ethertype().0), e.u("type"));
    let r = VlanRepr::parse(&t).unwrap();
    reemit(name, &buf[..4], 4, |b| {
        r.emit(&mut VlanTag::new_unchecked(b))
    });
    by_ethertype(w, t.ethertype(), t.payload(), off + 4)
}

fn mpls(w: &mut Walk, buf: &[u8], off: usize) -> Result<(), Fail> {
    let m = MplsEntry::new_checked(buf).map_err(|e| ("MPLS", off, e))?;
    let e = w.layer("MPLS", off).at("fields");
    assert_eq!(u64::from(m.label()), e.u("label"));
    assert_eq!(u64::from(m.tc()), e.u("cos"));
    assert_eq!(u64::from(m.bottom_of_stack()), e.u("s"));
    assert_eq!(u64::from(m.ttl()), e.u("ttl"));
    let r = MplsRepr::parse(&m).unwrap();
    reemit("MPLS", &buf[..4], 4, |b| {
        r.emit(&mut MplsEntry::new_unchecked(b))
    });
    let p = m.payload();
    if !m.bottom_of_stack() {
        return mpls(w, p, off + 4);
    }
    // MPLS does not say what it carries; like scapy (and OVS), look at the IP version nibble.
    match p.first().map(|b| b >> 4) {
        Some(4) => ipv4(w, p, off + 4, false),
        Some(6) => ipv6(w, p, off + 4),
        _ => raw(w, p, off + 4),
    }
}

fn arp(w: &mut Walk, buf: &[u8], off: usize) -> Result<(), Fail> {
    let a = ArpPacket::new_checked(buf).map_err(|e| ("ARP", off, e))?;
    let e = w.layer("ARP", off).at("fields");
    let r = ArpRepr::parse(&a).unwrap();
    assert_eq!(u64::from(a.hardware_type()), e.u("hwtype"));
    assert_eq!(u64::from(a.protocol_type().0), e.u("ptype"));
    assert_eq!(
        (u64::from(a.hardware_len()), u64::from(a.protocol_len())),
        (e.u("hwlen"), e.u("plen"))
    );
    assert_eq!(u64::from(r.operation.0), e.u("op"));
    assert_eq!(r.source_hardware_addr.to_string(), e.s("hwsrc"));
    assert_eq!(r.source_protocol_addr.to_string(), e.s("psrc"));
    assert_eq!(r.target_hardware_addr.to_string(), e.s("hwdst"));
    assert_eq!(r.target_protocol_addr.to_string(), e.s("pdst"));
    reemit("ARP", &buf[..28], 28, |b| {
        r.emit(&mut ArpPacket::new_unchecked(b))
    });
    Ok(())
}

fn ipv4(w: &mut Walk, buf: &[u8], off: usize, quoted: bool) -> Result<(), Fail> {
    let name = q("IP", quoted);
    let p = Ipv4Packet::new_checked(buf).map_err(|e| (name, off, e))?;
    let layer = w.layer(name, off);
    let e = layer.at("fields");
    assert_eq!(u64::from(p.version()), e.u("version"));
    assert_eq!(p.header_len() as u64, e.u("ihl") * 4);
    assert_eq!(u64::from(p.dscp() << 2 | p.ecn()), e.u("tos"));
    assert_eq!(u64::from(p.total_len()), e.u("len"));
    assert_eq!(u64::from(p.ident()), e.u("id"));
    let flags = u64::from(p.more_frags())
        | u64::from(p.dont_frag()) << 1
        | u64::from(p.reserved_flag()) << 2;
    assert_eq!(flags, e.u("flags"));
    assert_eq!(u64::from(p.frag_offset()), e.u("frag"));
    assert_eq!(u64::from(p.ttl()), e.u("ttl"));
    assert_eq!(u64::from(p.protocol().0), e.u("proto"));
    assert_eq!(u64::from(p.checksum()), e.u("chksum"));
    assert_eq!(p.src_addr().to_string(), e.s("src"));
    assert_eq!(p.dst_addr().to_string(), e.s("dst"));
    assert_eq!(p.options(), unhex(layer.s("options_hex")));
    assert!(p.verify_checksum(), "{}", w.ctx("IPv4 checksum"));
    let r = Ipv4Repr::parse(&p).unwrap();
    let hl = p.header_len();
    reemit(name, &buf[..hl], hl, |b| {
        r.emit(&mut Ipv4Packet::new_unchecked(b))
    });
    let ctx = Ctx {
        l3: Some(L3::V4(p.src_addr(), p.dst_addr())),
        fragment: p.is_fragment(),
        quoted,
    };
    if p.frag_offset() != 0 {
        // A later fragment: no upper-layer header.
        return raw(w, p.payload(), off + hl);
    }
    upper(w, p.protocol(), p.payload(), off + hl, ctx)
}

fn ipv6(w: &mut Walk, buf: &[u8], off: usize) -> Result<(), Fail> {
    let p = Ipv6Packet::new_checked(buf).map_err(|e| ("IPv6", off, e))?;
    let e = w.layer("IPv6", off).at("fields");
    assert_eq!(u64::from(p.version()), e.u("version"));
    assert_eq!(u64::from(p.traffic_class()), e.u("tc"));
    assert_eq!(u64::from(p.flow_label()), e.u("fl"));
    assert_eq!(u64::from(p.payload_len()), e.u("plen"));
    assert_eq!(u64::from(p.next_header().0), e.u("nh"));
    assert_eq!(u64::from(p.hop_limit()), e.u("hlim"));
    assert_eq!(p.src_addr().to_string(), e.s("src"));
    assert_eq!(p.dst_addr().to_string(), e.s("dst"));
    let r = Ipv6Repr::parse(&p).unwrap();
    reemit("IPv6", &buf[..40], 40, |b| {
        r.emit(&mut Ipv6Packet::new_unchecked(b))
    });

    // Walk the extension headers one view at a time, then compare with the chain walker.
    let payload = p.payload();
    let base = off + 40;
    let (mut nh, mut at, mut frag) = (p.next_header(), 0usize, None);
    loop {
        let rest = &payload[at..];
        let name = match nh {
            IpProtocol::HOPOPT => "IPv6ExtHdrHopByHop",
            IpProtocol::IPV6_ROUTE => "IPv6ExtHdrRouting",
            IpProtocol::IPV6_OPTS => "IPv6ExtHdrDestOpt",
            IpProtocol::IPV6_FRAG => "IPv6ExtHdrFragment",
            _ => break,
        };
        if nh == IpProtocol::IPV6_FRAG {
            let h = Ipv6FragmentHeader::new_checked(rest).map_err(|e| (name, base + at, e))?;
            let e = w.layer(name, base + at).at("fields");
            assert_eq!(u64::from(h.next_header().0), e.u("nh"));
            assert_eq!(u64::from(h.frag_offset()), e.u("offset"));
            assert_eq!(u64::from(h.more_frags()), e.u("m"));
            assert_eq!(u64::from(h.ident()), e.u("id"));
            let r = wire::Ipv6FragmentRepr::parse(&h).unwrap();
            reemit(name, &rest[..8], 8, |b| {
                r.emit(&mut Ipv6FragmentHeader::new_unchecked(b))
            });
            frag = Some(r);
            nh = h.next_header();
            at += 8;
            if h.frag_offset() != 0 {
                break;
            }
            continue;
        }
        let h = Ipv6ExtHeader::new_checked(rest).map_err(|e| (name, base + at, e))?;
        let e = w.layer(name, base + at).at("fields");
        assert_eq!(u64::from(h.next_header().0), e.u("nh"));
        assert_eq!(h.header_len() as u64, (e.u("len") + 1) * 8);
        if nh == IpProtocol::IPV6_ROUTE {
            assert_eq!(u64::from(h.routing_type()), e.u("type"));
            assert_eq!(u64::from(h.segments_left()), e.u("segleft"));
        } else {
            // Options as scapy lists them, byte for byte.
            let mut want = Vec::new();
            for o in e.arr("options") {
                want.extend(unhex(o.s("hex")));
            }
            let mut got = Vec::new();
            for o in h.options_iter() {
                let o = o.unwrap();
                got.push(o.option_type);
                if o.option_type != 0 {
                    got.push(o.data.len() as u8);
                    got.extend_from_slice(o.data);
                }
            }
            assert_eq!(got, want, "{}", w.ctx(name));
        }
        let hl = h.header_len();
        let r = Ipv6ExtHeaderRepr::parse(&Ipv6ExtHeader::new_unchecked(rest)).unwrap();
        reemit(name, &rest[..hl], hl, |b| {
            r.emit(&mut Ipv6ExtHeader::new_unchecked(b))
        });
        nh = h.next_header();
        at += hl;
    }
    let chain = walk_ext_headers(p.next_header(), payload).unwrap();
    assert_eq!(
        (chain.next_header, chain.l4_offset, chain.fragment),
        (nh, at, frag)
    );
    assert_eq!(chain, p.ext_chain().unwrap());
    let ctx = Ctx {
        l3: Some(L3::V6(p.src_addr(), p.dst_addr())),
        fragment: frag.is_some(),
        quoted: false,
    };
    if frag.is_some_and(|f| f.frag_offset != 0) {
        return raw(w, &payload[at..], base + at);
    }
    upper(w, nh, &payload[at..], base + at, ctx)
}

fn upper(w: &mut Walk, proto: IpProtocol, buf: &[u8], off: usize, ctx: Ctx) -> Result<(), Fail> {
    match (proto, ctx.l3) {
        (IpProtocol::TCP, _) => tcp(w, buf, off, ctx),
        (IpProtocol::UDP, _) => udp(w, buf, off, ctx),
        (IpProtocol::ICMP, Some(L3::V4(..))) => icmpv4(w, buf, off, ctx),
        (IpProtocol::ICMPV6, Some(L3::V6(s, d))) => icmpv6(w, buf, off, s, d),
        (IpProtocol::SCTP, _) => sctp(w, buf, off),
        (IpProtocol::GRE, _) => gre(w, buf, off),
        _ => raw(w, buf, off),
    }
}

fn tcp(w: &mut Walk, buf: &[u8], off: usize, ctx: Ctx) -> Result<(), Fail> {
    let name = q("TCP", ctx.quoted);
    let t = TcpPacket::new_checked(buf).map_err(|e| (name, off, e))?;
    let layer = w.layer(name, off);
    let e = layer.at("fields");
    assert_eq!(u64::from(t.src_port()), e.u("sport"));
    assert_eq!(u64::from(t.dst_port()), e.u("dport"));
    assert_eq!(u64::from(t.seq_number()), e.u("seq"));
    assert_eq!(u64::from(t.ack_number()), e.u("ack"));
    assert_eq!(t.header_len() as u64, e.u("dataofs") * 4);
    assert_eq!(u64::from(t.reserved()), e.u("reserved"));
    assert_eq!(u64::from(t.flags().bits()), e.u("flags"));
    assert_eq!(u64::from(t.window_len()), e.u("window"));
    assert_eq!(u64::from(t.checksum()), e.u("chksum"));
    assert_eq!(u64::from(t.urgent_at()), e.u("urgptr"));
    assert_eq!(t.options(), unhex(layer.s("options_hex")));
    let r = TcpRepr::parse(&t).unwrap();
    // Typed options agree with scapy's decoding.
    for o in e.arr("options") {
        let Json::Arr(kv) = o else {
            panic!("option {o:?}")
        };
        match (&kv[0], &kv[1]) {
            (Json::Str(k), Json::Int(v)) if k == "MSS" => assert_eq!(r.mss(), Some(*v as u16)),
            (Json::Str(k), Json::Int(v)) if k == "WScale" => {
                assert_eq!(r.window_scale(), Some(*v as u8))
            }
            (Json::Str(k), _) if k == "SAckOK" => assert!(r.sack_permitted()),
            (Json::Str(k), Json::Arr(ts)) if k == "Timestamp" => {
                let [Json::Int(a), Json::Int(b)] = ts.as_slice() else {
                    panic!()
                };
                assert_eq!(r.timestamps(), Some((*a as u32, *b as u32)));
            }
            (Json::Str(k), Json::Arr(edges)) if k == "SAck" => {
                let sack = r.options_iter().find_map(|o| match o {
                    Ok(wire::TcpOption::Sack(b)) => Some(b),
                    _ => None,
                });
                let got: Vec<i64> = sack
                    .unwrap()
                    .iter()
                    .flat_map(|(a, b)| [i64::from(a), i64::from(b)])
                    .collect();
                let want: Vec<i64> = edges
                    .iter()
                    .map(|j| match j {
                        Json::Int(n) => *n,
                        _ => panic!(),
                    })
                    .collect();
                assert_eq!(got, want);
            }
            _ => {}
        }
    }
    let check = !ctx.fragment && !ctx.quoted;
    let l3 = ctx.l3.unwrap();
    if check {
        let ok = match l3 {
            L3::V4(s, d) => t.verify_checksum_v4(&s, &d),
            L3::V6(s, d) => t.verify_checksum_v6(&s, &d),
        };
        assert!(ok, "{}", w.ctx("TCP checksum"));
    }
    let hl = t.header_len();
    reemit(name, buf, hl, |b| {
        let mut p = TcpPacket::new_unchecked(b);
        r.emit(&mut p);
        match (check, l3) {
            (false, _) => p.set_checksum(t.checksum()),
            (true, L3::V4(s, d)) => p.fill_checksum_v4(&s, &d),
            (true, L3::V6(s, d)) => p.fill_checksum_v6(&s, &d),
        }
    });
    raw(w, t.payload(), off + hl)
}

fn udp(w: &mut Walk, buf: &[u8], off: usize, ctx: Ctx) -> Result<(), Fail> {
    let name = q("UDP", ctx.quoted);
    let u = UdpPacket::new_checked(buf).map_err(|e| (name, off, e))?;
    let e = w.layer(name, off).at("fields");
    assert_eq!(u64::from(u.src_port()), e.u("sport"));
    assert_eq!(u64::from(u.dst_port()), e.u("dport"));
    assert_eq!(u64::from(u.len()), e.u("len"));
    assert_eq!(u64::from(u.checksum()), e.u("chksum"));
    let l3 = ctx.l3.unwrap();
    let len = usize::from(u.len());
    if !ctx.fragment {
        let ok = match l3 {
            L3::V4(s, d) => u.verify_checksum_v4(&s, &d),
            L3::V6(s, d) => u.verify_checksum_v6(&s, &d),
        };
        assert!(ok, "{}", w.ctx("UDP checksum"));
    }
    let r = UdpRepr::parse(&u).unwrap();
    reemit(name, &buf[..len], 8, |b| {
        let mut p = UdpPacket::new_unchecked(b);
        r.emit(&mut p);
        match (u.checksum() != 0 && !ctx.fragment, l3) {
            (false, _) => p.set_checksum(u.checksum()),
            (true, L3::V4(s, d)) => p.fill_checksum_v4(&s, &d),
            (true, L3::V6(s, d)) => p.fill_checksum_v6(&s, &d),
        }
    });
    let payload = u.payload();
    match u.dst_port() {
        VXLAN_PORT if !ctx.quoted => vxlan(w, payload, off + 8),
        GENEVE_PORT if !ctx.quoted => geneve(w, payload, off + 8),
        _ => raw(w, payload, off + 8),
    }
}

fn icmpv4(w: &mut Walk, buf: &[u8], off: usize, ctx: Ctx) -> Result<(), Fail> {
    let name = q("ICMP", ctx.quoted);
    let p = Icmpv4Packet::new_checked(buf).map_err(|e| (name, off, e))?;
    let e = w.layer(name, off).at("fields");
    assert_eq!(u64::from(p.msg_type()), e.u("type"));
    assert_eq!(u64::from(p.msg_code()), e.u("code"));
    assert_eq!(u64::from(p.checksum()), e.u("chksum"));
    let r = Icmpv4Repr::parse(&p).unwrap();
    match r {
        Icmpv4Repr::EchoRequest { ident, seq_no } | Icmpv4Repr::EchoReply { ident, seq_no } => {
            assert_eq!(
                (u64::from(ident), u64::from(seq_no)),
                (e.u("id"), e.u("seq"))
            );
        }
        Icmpv4Repr::DstUnreachable { next_hop_mtu, .. } => {
            assert_eq!(u64::from(next_hop_mtu), e.u("nexthopmtu"))
        }
        Icmpv4Repr::TimeExceeded { code } => assert_eq!(u64::from(code), e.u("code")),
        Icmpv4Repr::Other { .. } => panic!("{}: unexpected generic ICMP {r:?}", w.what),
    }
    let check = !ctx.fragment && !ctx.quoted;
    if check {
        assert!(p.verify_checksum(), "{}", w.ctx("ICMP checksum"));
    }
    reemit(name, buf, 8, |b| {
        let mut q = Icmpv4Packet::new_unchecked(b);
        r.emit(&mut q);
        if check {
            q.fill_checksum()
        } else {
            q.set_checksum(p.checksum())
        }
    });
    match r {
        Icmpv4Repr::DstUnreachable { .. } | Icmpv4Repr::TimeExceeded { .. } => {
            ipv4(w, p.payload(), off + 8, true)
        }
        _ => raw(w, p.payload(), off + 8),
    }
}

fn icmpv6(w: &mut Walk, buf: &[u8], off: usize, src: Ipv6Addr, dst: Ipv6Addr) -> Result<(), Fail> {
    let name = match buf.first() {
        Some(128) => "ICMPv6EchoRequest",
        Some(129) => "ICMPv6EchoReply",
        Some(135) => "ICMPv6ND_NS",
        Some(136) => "ICMPv6ND_NA",
        _ => "ICMPv6Unknown",
    };
    let p = Icmpv6Packet::new_checked(buf).map_err(|e| (name, off, e))?;
    let e = w.layer(name, off).at("fields");
    assert_eq!(u64::from(p.msg_type()), e.u("type"));
    assert_eq!(u64::from(p.msg_code()), e.u("code"));
    assert_eq!(u64::from(p.checksum()), e.u("cksum"));
    assert!(
        p.verify_checksum(&src, &dst),
        "{}",
        w.ctx("ICMPv6 checksum")
    );
    let r = Icmpv6Repr::parse(&p).unwrap();
    let mut opts_at = None;
    match r {
        Icmpv6Repr::EchoRequest { ident, seq_no } | Icmpv6Repr::EchoReply { ident, seq_no } => {
            assert_eq!(
                (u64::from(ident), u64::from(seq_no)),
                (e.u("id"), e.u("seq"))
            );
            assert_eq!(p.payload(), unhex(e.s("data")));
        }
        Icmpv6Repr::NeighborSolicit { target_addr, .. } => {
            assert_eq!(target_addr.to_string(), e.s("tgt"));
            opts_at = Some(24);
        }
        Icmpv6Repr::NeighborAdvert {
            router,
            solicited,
            override_,
            target_addr,
            ..
        } => {
            assert_eq!(target_addr.to_string(), e.s("tgt"));
            let f = (
                u64::from(router),
                u64::from(solicited),
                u64::from(override_),
            );
            assert_eq!(f, (e.u("R"), e.u("S"), e.u("O")));
            opts_at = Some(24);
        }
        Icmpv6Repr::Other { .. } => panic!("{}: unexpected generic ICMPv6 {r:?}", w.what),
    }
    let hl = r.buffer_len();
    reemit(name, buf, hl, |b| {
        let mut q = Icmpv6Packet::new_unchecked(b);
        r.emit(&mut q);
        q.fill_checksum(&src, &dst);
    });
    if let Some(mut at) = opts_at {
        for o in p.nd_options_iter() {
            let o = o.unwrap();
            let oname = match o.option_type {
                1 => "ICMPv6NDOptSrcLLAddr",
                2 => "ICMPv6NDOptDstLLAddr",
                _ => "ICMPv6NDOptUnknown",
            };
            let e = w.layer(oname, off + at).at("fields");
            assert_eq!(u64::from(o.option_type), e.u("type"));
            assert_eq!((o.data.len() as u64 + 2) / 8, e.u("len"));
            assert_eq!(o.lladdr().unwrap().to_string(), e.s("lladdr"));
            at += o.data.len() + 2;
        }
    }
    Ok(())
}

fn sctp(w: &mut Walk, buf: &[u8], off: usize) -> Result<(), Fail> {
    let p = SctpPacket::new_checked(buf).map_err(|e| ("SCTP", off, e))?;
    let e = w.layer("SCTP", off).at("fields");
    assert_eq!(u64::from(p.src_port()), e.u("sport"));
    assert_eq!(u64::from(p.dst_port()), e.u("dport"));
    assert_eq!(u64::from(p.verification_tag()), e.u("tag"));
    // scapy shows the field read big-endian; the CRC value is the byte-swapped reading.
    assert_eq!(u64::from(p.checksum().swap_bytes()), e.u("chksum"));
    assert!(p.verify_checksum(), "{}", w.ctx("SCTP CRC32C"));
    let r = SctpRepr::parse(&p).unwrap();
    reemit("SCTP", buf, 12, |b| {
        let mut q = SctpPacket::new_unchecked(b);
        r.emit(&mut q);
        q.fill_checksum();
    });
    let mut at = 12;
    for c in p.chunks() {
        let c = c.unwrap();
        let cname = match c.chunk_type {
            0 => "SCTPChunkData",
            1 => "SCTPChunkInit",
            3 => "SCTPChunkSACK",
            11 => "SCTPChunkCookieAck",
            _ => "SCTPChunkUnknown",
        };
        let e = w.layer(cname, off + at).at("fields");
        assert_eq!(u64::from(c.chunk_type), e.u("type"));
        assert_eq!(c.length() as u64, e.u("len"));
        if c.chunk_type == 0 {
            assert_eq!(&c.value[12..], unhex(e.s("data")));
        }
        at += c.length().next_multiple_of(4);
    }
    Ok(())
}

fn gre(w: &mut Walk, buf: &[u8], off: usize) -> Result<(), Fail> {
    let g = GrePacket::new_checked(buf).map_err(|e| ("GRE", off, e))?;
    let e = w.layer("GRE", off).at("fields");
    assert_eq!(u64::from(g.checksum_present()), e.u("chksum_present"));
    assert_eq!(u64::from(g.routing_present()), e.u("routing_present"));
    assert_eq!(u64::from(g.key_present()), e.u("key_present"));
    assert_eq!(u64::from(g.seq_present()), e.u("seqnum_present"));
    assert_eq!(u64::from(g.version()), e.u("version"));
    assert_eq!(u64::from(g.protocol_type().0), e.u("proto"));
    assert_eq!(
        g.checksum().map(u64::from),
        e.get("chksum").map(|_| e.u("chksum"))
    );
    assert_eq!(g.key().map(u64::from), e.get("key").map(|_| e.u("key")));
    assert_eq!(
        g.sequence().map(u64::from),
        e.get("sequence_number").map(|_| e.u("sequence_number"))
    );
    assert!(g.verify_checksum(), "{}", w.ctx("GRE checksum"));
    let r = GreRepr::parse(&g).unwrap();
    let hl = g.header_len();
    reemit("GRE", buf, hl, |b| {
        let mut q = GrePacket::new_unchecked(b);
        r.emit(&mut q);
        q.fill_checksum();
    });
    by_ethertype(w, g.protocol_type(), g.payload(), off + hl)
}

fn vxlan(w: &mut Walk, buf: &[u8], off: usize) -> Result<(), Fail> {
    let v = VxlanPacket::new_checked(buf).map_err(|e| ("VXLAN", off, e))?;
    let e = w.layer("VXLAN", off).at("fields");
    assert_eq!(u64::from(v.flags()), e.u("flags"));
    assert_eq!(u64::from(v.vni()), e.u("vni"));
    let r = VxlanRepr::parse(&v).unwrap();
    match r.gbp {
        Some(g) => {
            let gpflags = u64::from(g.dont_learn) << 6 | u64::from(g.policy_applied) << 3;
            assert_eq!(gpflags, e.u("gpflags"));
            assert_eq!(u64::from(g.group_policy_id), e.u("gpid"));
        }
        None => assert!(e.get("gpid").is_none()),
    }
    reemit("VXLAN", &buf[..8], 8, |b| {
        r.emit(&mut VxlanPacket::new_unchecked(b))
    });
    ether(w, v.payload(), off + 8)
}

fn geneve(w: &mut Walk, buf: &[u8], off: usize) -> Result<(), Fail> {
    let g = GenevePacket::new_checked(buf).map_err(|e| ("GENEVE", off, e))?;
    let layer = w.layer("GENEVE", off);
    let e = layer.at("fields");
    assert_eq!(u64::from(g.version()), e.u("version"));
    assert_eq!(g.options_len() as u64, e.u("optionlen") * 4);
    assert_eq!(
        (u64::from(g.oam()), u64::from(g.critical())),
        (e.u("oam"), e.u("critical"))
    );
    assert_eq!(u64::from(g.protocol_type().0), e.u("proto"));
    assert_eq!(u64::from(g.vni()), e.u("vni"));
    assert_eq!(g.options(), unhex(layer.s("options_hex")));
    let mine: Vec<_> = g.options_iter().map(Result::unwrap).collect();
    // The seeds give scapy the options as raw bytes; the other fixtures as GeneveOptions.
    if let Json::Arr(theirs) = e.at("options") {
        assert_eq!(mine.len(), theirs.len());
        for (m, t) in mine.iter().zip(theirs) {
            let t = t.at("fields");
            assert_eq!(u64::from(m.class), t.u("classid"));
            assert_eq!(u64::from(m.option_type), t.u("type"));
            assert_eq!(m.data.len() as u64, t.u("length") * 4);
            assert_eq!(m.data, unhex(t.s("data")));
            assert_eq!(m.critical(), t.u("type") & 0x80 != 0);
        }
    }
    let r = GeneveRepr::parse(&g).unwrap();
    let hl = g.header_len();
    reemit("GENEVE", &buf[..hl], hl, |b| {
        r.emit(&mut GenevePacket::new_unchecked(b))
    });
    by_ethertype(w, g.protocol_type(), g.payload(), off + hl)
}

/// Checks one fixture file; returns the number of layers compared.
fn check_fixture(name: &str) -> usize {
    let (pcap, side) = common::load(name);
    assert_eq!(pcap.linktype, 1, "{name}: Ethernet link type");
    assert_eq!(side.s("file"), format!("{name}.pcap"));
    assert_eq!(
        pcap.nanosecond,
        side.at("nanosecond") == &Json::Bool(true),
        "{name}: magic"
    );
    assert_eq!(
        pcap.big_endian,
        side.at("big_endian") == &Json::Bool(true),
        "{name}: byte order"
    );
    let packets = side.arr("packets");
    assert_eq!(pcap.records.len(), packets.len(), "{name}: packet count");
    let mut layers = 0;
    for (k, (rec, exp)) in pcap.records.iter().zip(packets).enumerate() {
        assert_eq!(rec.ts_nanos, k as u64 * 1000, "{name}#{k}: timestamp");
        assert_eq!(rec.data.len() as u64, exp.u("len"), "{name}#{k}: length");
        assert_eq!(rec.orig_len as usize, rec.data.len());
        let expected: Vec<&Json> = exp
            .arr("layers")
            .iter()
            .filter(|l| l.s("name") != "Padding")
            .collect();
        let mut w = Walk {
            what: format!("{name}#{k}"),
            frame: &rec.data,
            expected,
            next: 0,
        };
        let frame = w.frame;
        let res = ether(&mut w, frame, 0);
        match (res, exp.get("expect_error")) {
            (Ok(()), None) => {}
            (Err((layer, off, err)), Some(x)) => {
                assert_eq!(layer, x.s("layer"), "{}: failing layer", w.what);
                assert_eq!(off as u64, x.u("offset"), "{}: failing offset", w.what);
                assert_eq!(format!("{err:?}"), x.s("error"), "{}: error", w.what);
            }
            (Ok(()), Some(x)) => panic!("{}: parsed, but scapy fixture expects {x:?}", w.what),
            (Err(f), None) => panic!("{}: failed with {f:?}", w.what),
        }
        assert_eq!(
            w.next,
            w.expected.len(),
            "{}: scapy has layers we did not reach",
            w.what
        );
        layers += w.next;
    }
    layers
}

macro_rules! fixtures {
    ($($name:ident = $file:literal,)*) => {
        $(
            #[test]
            fn $name() {
                assert!(check_fixture($file) > 0);
            }
        )*

        /// Every pcap in testdata/pcap has a test above, so a new fixture cannot be skipped.
        #[test]
        fn every_fixture_is_tested() {
            let known = [$($file),*];
            let mut found = 0;
            for entry in std::fs::read_dir(common::fixture_dir()).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "pcap") {
                    let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
                    assert!(known.contains(&stem.as_str()), "{stem}.pcap has no test");
                    found += 1;
                }
            }
            assert_eq!(found, known.len());
        }
    };
}

fixtures! {
    seed_plain = "plain_8",
    seed_vxlan_l3vpn = "vxlan_l3vpn_8",
    seed_vxlan_l3vpn_csum0 = "vxlan_l3vpn_csum0_8",
    seed_mplsogre = "mplsogre_8",
    seed_geneve = "geneve_8",
    seed_geneve_csum0 = "geneve_csum0_8",
    arp_fixtures = "arp",
    vlan_fixtures = "vlan",
    mpls_fixtures = "mpls",
    ipv4_fixtures = "ipv4",
    ipv6_fixtures = "ipv6",
    tcp_fixtures = "tcp",
    udp_fixtures = "udp",
    sctp_fixtures = "sctp",
    gre_fixtures = "gre",
    vxlan_fixtures = "vxlan",
    geneve_fixtures = "geneve",
    truncated_fixtures = "truncated",
}

/// The seed packets carry exactly what the anchor's generator put in them.
#[test]
fn seed_specifics() {
    let (pcap, _) = common::load("mplsogre_8");
    let labels: Vec<u32> = pcap
        .records
        .iter()
        .map(|r| {
            let eth = EthernetFrame::new_checked(&r.data[..]).unwrap();
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            let g = GrePacket::new_checked(ip.payload()).unwrap();
            assert_eq!(
                (g.key(), g.protocol_type()),
                (Some(0), EtherType::MPLS_UNICAST)
            );
            let m = MplsEntry::new_checked(g.payload()).unwrap();
            assert!(m.bottom_of_stack() && m.ttl() == 4);
            m.label()
        })
        .collect();
    assert_eq!(labels, [812, 813, 814, 815, 812, 813, 814, 815]);

    for (file, csum0) in [("vxlan_l3vpn_8", false), ("vxlan_l3vpn_csum0_8", true)] {
        for r in common::load(file).0.records {
            let eth = EthernetFrame::new_checked(&r.data[..]).unwrap();
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            let u = UdpPacket::new_checked(ip.payload()).unwrap();
            assert_eq!(u.checksum() == 0, csum0, "{file}");
            assert_eq!(VxlanPacket::new_checked(u.payload()).unwrap().vni(), 100);
        }
    }
    for r in common::load("geneve_8").0.records {
        let eth = EthernetFrame::new_checked(&r.data[..]).unwrap();
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        let u = UdpPacket::new_checked(ip.payload()).unwrap();
        let g = GenevePacket::new_checked(u.payload()).unwrap();
        let o = g.options_iter().next().unwrap().unwrap();
        assert_eq!(
            (o.class, o.option_type, o.data),
            (0x0102, 0x80, &[0, 3, 0, 2][..])
        );
    }
    for r in common::load("plain_8").0.records {
        assert_eq!(r.data.len(), 60, "64 B on the wire minus FCS");
    }
}

/// Incremental checksum updates on real packets: rewriting addresses and ports the way NAT and
/// `set_field` actions do gives the same checksums as recomputing them.
#[test]
fn incremental_rewrite_on_fixtures() {
    let mut rewritten = 0;
    for name in ["tcp", "udp", "plain_8"] {
        for r in common::load(name).0.records {
            let mut b = r.data.clone();
            let eth = EthernetFrame::new_checked(&b[..]).unwrap();
            if eth.ethertype() != EtherType::IPV4 {
                continue;
            }
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            let (hl, tl, proto, old_src) = (
                ip.header_len(),
                usize::from(ip.total_len()),
                ip.protocol(),
                ip.src_addr(),
            );
            let new_src = Ipv4Addr::new(198, 51, 100, 7);
            let l4_csum_at = 14 + hl + if proto == IpProtocol::TCP { 16 } else { 6 };
            let old_l4 = u16::from_be_bytes([b[l4_csum_at], b[l4_csum_at + 1]]);
            // IP header: address change.
            let mut ipm = Ipv4Packet::new_unchecked(&mut b[14..14 + tl]);
            let c = checksum::update32(ipm.checksum(), old_src.to_bits(), new_src.to_bits());
            ipm.set_src_addr(new_src);
            ipm.set_checksum(c);
            assert!(ipm.verify_checksum());
            // L4: address (pseudo-header) and source port change.
            let l4 = &mut b[14 + hl..14 + tl];
            let old_port = u16::from_be_bytes([l4[0], l4[1]]);
            if proto == IpProtocol::UDP && old_l4 == 0 {
                continue;
            }
            let c = checksum::update32(old_l4, old_src.to_bits(), new_src.to_bits());
            let c = checksum::update16(c, old_port, 4242);
            l4[..2].copy_from_slice(&4242u16.to_be_bytes());
            let at = l4_csum_at - 14 - hl;
            l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
            let ok = if proto == IpProtocol::TCP {
                TcpPacket::new_checked(&l4[..])
                    .unwrap()
                    .verify_checksum_v4(&new_src, &ip_dst(&r.data))
            } else {
                UdpPacket::new_checked(&l4[..])
                    .unwrap()
                    .verify_checksum_v4(&new_src, &ip_dst(&r.data))
            };
            assert!(ok, "{name}: incremental L4 checksum");
            rewritten += 1;
        }
    }
    assert!(rewritten > 15);
}

fn ip_dst(frame: &[u8]) -> Ipv4Addr {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    Ipv4Packet::new_checked(eth.payload()).unwrap().dst_addr()
}
