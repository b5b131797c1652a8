//! Differential test of `flow::extract` against etherparse, an independent packet parser: random
//! Ethernet II frames (0-3 VLAN tags, IPv4 with options and fragments, IPv6 with extension
//! headers, TCP with options, UDP, other protocols), with lying length fields, Ethernet padding
//! and truncation, plus frames from etherparse's own `PacketBuilder`.
//!
//! etherparse's strict `SlicedPacket` decides where a frame stops being well formed; the layers
//! before that point are read from its `LaxSlicedPacket`, and OVS's rules turn them into the
//! fields the flow key must hold (`expected`). Every place where OVS's semantics differ from
//! etherparse's view is handled explicitly below, with the OVS rule it follows.

use std::net::{Ipv4Addr, Ipv6Addr};

use etherparse::err::Layer;
use etherparse::err::packet::SliceError;
use etherparse::{
    Ipv6ExtensionSlice, LaxLinkExtSlice, LaxNetSlice, LaxSlicedPacket, LinkSlice, PacketBuilder,
    SlicedPacket, TcpSlice, TransportSlice, UdpHeaderSlice, VlanId,
};
use flow::key::{VLAN_CFI, nw_frag};
use flow::{EthAddr, FlowKey, extract};
use proptest::prelude::*;
use proptest::sample::Index;

/// The key fields both parsers understand.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fields {
    eth_dst: [u8; 6],
    eth_src: [u8; 6],
    eth_type: u16,
    vlan_tpid: u16,
    vlan_tci: u16,
    vlan2_tpid: u16,
    vlan2_tci: u16,
    nw_src: Ipv4Addr,
    nw_dst: Ipv4Addr,
    ipv6_src: Ipv6Addr,
    ipv6_dst: Ipv6Addr,
    ipv6_label: u32,
    nw_proto: u8,
    nw_tos: u8,
    nw_ttl: u8,
    nw_frag: u8,
    tp_src: u16,
    tp_dst: u16,
    tcp_flags: u16,
}

impl Default for Fields {
    fn default() -> Self {
        Fields {
            eth_dst: [0; 6],
            eth_src: [0; 6],
            eth_type: 0,
            vlan_tpid: 0,
            vlan_tci: 0,
            vlan2_tpid: 0,
            vlan2_tci: 0,
            nw_src: Ipv4Addr::UNSPECIFIED,
            nw_dst: Ipv4Addr::UNSPECIFIED,
            ipv6_src: Ipv6Addr::UNSPECIFIED,
            ipv6_dst: Ipv6Addr::UNSPECIFIED,
            ipv6_label: 0,
            nw_proto: 0,
            nw_tos: 0,
            nw_ttl: 0,
            nw_frag: 0,
            tp_src: 0,
            tp_dst: 0,
            tcp_flags: 0,
        }
    }
}

fn ours(pkt: &[u8]) -> Fields {
    let mut k = FlowKey::new();
    extract(pkt, &mut k);
    let EthAddr(eth_dst) = k.eth_dst();
    let EthAddr(eth_src) = k.eth_src();
    Fields {
        eth_dst,
        eth_src,
        eth_type: k.eth_type(),
        vlan_tpid: k.vlan_tpid(),
        vlan_tci: k.vlan_tci(),
        vlan2_tpid: k.vlan2_tpid(),
        vlan2_tci: k.vlan2_tci(),
        nw_src: k.nw_src(),
        nw_dst: k.nw_dst(),
        ipv6_src: k.ipv6_src(),
        ipv6_dst: k.ipv6_dst(),
        ipv6_label: k.ipv6_label(),
        nw_proto: k.nw_proto(),
        nw_tos: k.nw_tos(),
        nw_ttl: k.nw_ttl(),
        nw_frag: k.nw_frag(),
        tp_src: k.tp_src(),
        tp_dst: k.tp_dst(),
        tcp_flags: k.tcp_flags(),
    }
}

/// How far OVS's extraction gets, from the layer where etherparse's strict parse fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Reach {
    /// Runt frame: no packet field at all.
    Nothing,
    /// Ethernet and complete VLAN tags only: a cut-short tag, or an IP header or length that
    /// fails OVS's sanity check, contributes nothing.
    L2,
    /// A bad IPv6 extension header: OVS has already stored the addresses and flow label, but
    /// not protocol, traffic class or hop limit (`miniflow_extract` jumps to `out`).
    Ipv6Addrs,
    /// A bad TCP header: the L3 fields, ports and flags zero.
    L3,
    /// A UDP header etherparse rejects for its length field; OVS ignores that field and keys
    /// the ports whenever 8 bytes are there.
    UdpIgnoringLength,
    /// Well formed as far as etherparse parses.
    All,
}

fn reach_of(e: &SliceError) -> Reach {
    let by_layer = |l: Layer| match l {
        Layer::Ethernet2Header => Reach::Nothing,
        Layer::VlanHeader
        | Layer::IpHeader
        | Layer::Ipv4Header
        | Layer::Ipv4Packet
        | Layer::Ipv6Header
        | Layer::Ipv6Packet => Reach::L2,
        Layer::Ipv6ExtHeader
        | Layer::Ipv6HopByHopHeader
        | Layer::Ipv6DestOptionsHeader
        | Layer::Ipv6RouteHeader
        | Layer::Ipv6FragHeader
        | Layer::IpAuthHeader => Reach::Ipv6Addrs,
        Layer::UdpHeader | Layer::UdpPayload => Reach::UdpIgnoringLength,
        Layer::TcpHeader => Reach::L3,
        other => panic!("layer {other:?} is not generated"),
    };
    match e {
        SliceError::Len(l) => by_layer(l.layer),
        SliceError::Ip(_) | SliceError::Ipv4(_) | SliceError::Ipv6(_) => Reach::L2,
        SliceError::Ipv6Exts(_) => Reach::Ipv6Addrs,
        SliceError::Tcp(_) => Reach::L3,
        other => panic!("error {other:?} is not generated"),
    }
}

const TCP: u8 = 6;
const UDP: u8 = 17;
const IPV6_FRAG: u8 = 44;

/// TCP flags as OVS keys them: the 12 bits after the data offset. etherparse has getters for
/// the nine defined flags; the three reserved bits above NS come from its raw header slice.
fn tcp_flags(t: &TcpSlice) -> u16 {
    let bits = [
        (t.fin(), 0x001),
        (t.syn(), 0x002),
        (t.rst(), 0x004),
        (t.psh(), 0x008),
        (t.ack(), 0x010),
        (t.urg(), 0x020),
        (t.ece(), 0x040),
        (t.cwr(), 0x080),
        (t.ns(), 0x100),
    ];
    let reserved = ((t.header_slice()[12] & 0x0e) as u16) << 8;
    bits.iter()
        .filter(|(set, _)| *set)
        .fold(reserved, |f, (_, b)| f | b)
}

/// Ports (and flags) of the transport header at the start of `payload`, parsed with
/// etherparse's header parsers the way OVS takes them: TCP needs a data offset of at least 5
/// words within the payload, UDP only 8 bytes (the length field is not looked at).
fn l4_from_payload(proto: u8, payload: &[u8], f: &mut Fields) {
    match proto {
        TCP => {
            if let Ok(t) = TcpSlice::from_slice(payload) {
                (f.tp_src, f.tp_dst, f.tcp_flags) =
                    (t.source_port(), t.destination_port(), tcp_flags(&t));
            }
        }
        UDP => {
            if let Ok(u) = UdpHeaderSlice::from_slice(payload) {
                (f.tp_src, f.tp_dst) = (u.source_port(), u.destination_port());
            }
        }
        _ => {}
    }
}

/// The fields OVS's rules give, from etherparse's parse of `pkt`.
fn expected(pkt: &[u8]) -> Fields {
    let mut reach = match SlicedPacket::from_ethernet(pkt) {
        Ok(_) => Reach::All,
        Err(e) => reach_of(&e),
    };
    let mut f = Fields::default();
    if reach == Reach::Nothing {
        return f;
    }
    let lax = LaxSlicedPacket::from_ethernet(pkt).expect("a full Ethernet header");
    let Some(LinkSlice::Ethernet2(eth)) = &lax.link else {
        panic!("no Ethernet header: {lax:?}");
    };
    f.eth_dst = eth.destination();
    f.eth_src = eth.source();

    // VLAN tags: each tag's TPID is the ethertype field before it.
    let mut tpid = eth.ether_type().0;
    let mut tags = Vec::new();
    for ext in &lax.link_exts {
        let LaxLinkExtSlice::Vlan(v) = ext else {
            panic!("MACsec is not generated");
        };
        // OVS's TCI: PCP and VID as on the wire, the CFI/DEI bit replaced by its "tag present"
        // marker (the DEI value is not kept).
        let tci = ((v.priority_code_point().value() as u16) << 13)
            | v.vlan_identifier().value()
            | VLAN_CFI;
        tags.push((tpid, tci));
        tpid = v.ether_type().0;
    }
    if tags.len() == 3 {
        // OVS parses two tags (FLOW_MAX_VLAN_HEADERS); the third tag's TPID stands as the
        // ethertype and the frame's L3 is not looked at. etherparse reads up to three.
        tpid = tags[2].0;
        tags.truncate(2);
        reach = Reach::L2;
    }
    // The ethertype is the one after the last complete tag: for a cut-short tag, its TPID.
    f.eth_type = tpid;
    if let Some(&(t, tci)) = tags.first() {
        (f.vlan_tpid, f.vlan_tci) = (t, tci);
    }
    if let Some(&(t, tci)) = tags.get(1) {
        (f.vlan2_tpid, f.vlan2_tci) = (t, tci);
    }
    if reach == Reach::L2 {
        return f;
    }

    let later;
    let proto;
    let payload;
    match lax.net.as_ref() {
        Some(LaxNetSlice::Ipv4(ip)) => {
            let h = ip.header();
            f.nw_src = h.source_addr();
            f.nw_dst = h.destination_addr();
            assert!(
                reach >= Reach::L3,
                "IPv4 options are not parsed as extensions"
            );
            f.nw_tos = (h.dcp().value() << 2) | h.ecn().value();
            f.nw_ttl = h.ttl();
            // OVS: any fragment has MF set or a non-zero offset (DF and the reserved bit do not
            // count); a later fragment has a non-zero offset.
            later = h.fragments_offset().value() != 0;
            if h.is_fragmenting_payload() {
                f.nw_frag = nw_frag::ANY | if later { nw_frag::LATER } else { 0 };
            }
            proto = h.protocol().0;
            f.nw_proto = proto;
            payload = ip.payload().payload;
        }
        Some(LaxNetSlice::Ipv6(ip)) => {
            let h = ip.header();
            f.ipv6_src = h.source_addr();
            f.ipv6_dst = h.destination_addr();
            f.ipv6_label = h.flow_label().value();
            if reach == Reach::Ipv6Addrs {
                return f;
            }
            f.nw_tos = h.traffic_class();
            f.nw_ttl = h.hop_limit();
            let mut frag = None;
            for ext in ip.extensions().clone() {
                if let Ipv6ExtensionSlice::Fragment(fh) = ext {
                    let s = fh.slice();
                    frag = Some((
                        u16::from_be_bytes([s[2], s[3]]),
                        fh.fragment_offset().value(),
                    ));
                }
            }
            // OVS: a fragment header marks a fragment when any bit of its offset-and-flags word
            // is set, the two reserved bits included (etherparse looks at MF and the offset
            // only), and an atomic fragment (all zero) is not a fragment at all.
            let (offlg, offset) = frag.unwrap_or((0, 0));
            later = offset != 0;
            if offlg != 0 {
                f.nw_frag = nw_frag::ANY | if later { nw_frag::LATER } else { 0 };
            }
            proto = ip.payload().ip_number.0;
            // OVS keys a later IPv6 fragment with the fragment header as its protocol
            // (`parse_ipv6_ext_hdrs__`: nw_proto = IPPROTO_FRAGMENT); etherparse gives the
            // fragment header's next header.
            f.nw_proto = if later { IPV6_FRAG } else { proto };
            payload = ip.payload().payload;
        }
        // An ethertype neither parser looks into: the L2 fields are all.
        None => return f,
        Some(other) => panic!("{other:?} is not generated"),
    }

    // A later fragment has no transport header.
    if later {
        return f;
    }
    match reach {
        Reach::All => match &lax.transport {
            Some(TransportSlice::Tcp(t)) => {
                (f.tp_src, f.tp_dst, f.tcp_flags) =
                    (t.source_port(), t.destination_port(), tcp_flags(t));
            }
            Some(TransportSlice::Udp(u)) => {
                (f.tp_src, f.tp_dst) = (u.source_port(), u.destination_port());
            }
            Some(other) => panic!("transport {other:?} is not generated"),
            // etherparse does not parse the transport header of a first fragment (MF set,
            // offset 0); OVS does, within the fragment.
            None => l4_from_payload(proto, payload, &mut f),
        },
        Reach::UdpIgnoringLength => l4_from_payload(proto, payload, &mut f),
        _ => {}
    }
    f
}

fn check(pkt: &[u8]) -> Result<(), TestCaseError> {
    let want = expected(pkt);
    let got = ours(pkt);
    prop_assert_eq!(got, want, "packet {:02x?}", pkt);
    Ok(())
}

/// What a generated frame holds; the bytes come from [`Spec::build`].
#[derive(Clone, Debug)]
struct Spec {
    /// TPID is 802.1ad (0x88a8) when true, else 802.1Q; and the TCI.
    vlans: Vec<(bool, u16)>,
    /// 0: IPv4, 1: IPv6, 2: an ethertype neither parser looks into.
    l3: u8,
    ipv4_opt_words: usize,
    frag: usize,
    /// Bits: hop-by-hop, destination options, routing, authentication, fragment.
    ipv6_exts: u8,
    proto: u8,
    tcp_opt_words: usize,
    /// A TCP data offset other than the header's real one.
    tcp_doff: Option<u8>,
    tcp_flags: u16,
    /// A UDP length field other than the real one.
    udp_len: Option<u16>,
    payload: usize,
    /// Bytes the IP length field claims less than there are (the rest reads as padding).
    len_lie: usize,
    padding: usize,
    /// Where to cut the frame short.
    cut: Option<Index>,
    /// Values for addresses, identifiers, options and payload.
    noise: Vec<u8>,
}

/// IPv4 flags-and-offset words: none, DF, first fragment, middle, last (`offset` a random
/// non-zero fragment offset), reserved bit.
fn ipv4_frag(kind: usize, offset: u16) -> u16 {
    [0, 0x4000, 0x2000, 0x2000 | offset, offset, 0x8000][kind]
}

/// IPv6 fragment offset-and-flags words: atomic, first, middle, last, reserved bits only.
fn ipv6_offlg(kind: usize, offset: u16) -> u16 {
    [0, 0x0001, (offset << 3) | 1, offset << 3, 0x0006][kind % 5]
}

fn spec() -> impl Strategy<Value = Spec> {
    let vlans = prop_oneof![
        6 => prop::collection::vec((any::<bool>(), any::<u16>()), 0..=2),
        1 => prop::collection::vec((any::<bool>(), any::<u16>()), 3),
    ];
    let lie = prop_oneof![3 => Just(0usize), 1 => 1usize..=40];
    (
        (
            vlans,
            0u8..=2,
            prop_oneof![Just(0usize), 1usize..=10],
            0usize..6,
            0u8..32,
        ),
        (
            prop::sample::select(vec![TCP, UDP, TCP, UDP, 47, 50, 59]),
            0usize..=10,
            prop::option::weighted(0.1, 0u8..16),
            0u16..0x1000,
            prop::option::weighted(0.1, any::<u16>()),
            0usize..40,
        ),
        (
            lie,
            0usize..=24,
            prop::option::weighted(0.2, any::<Index>()),
            prop::collection::vec(any::<u8>(), 160),
        ),
    )
        .prop_map(
            |(
                (vlans, l3, ipv4_opt_words, frag, ipv6_exts),
                (proto, tcp_opt_words, tcp_doff, tcp_flags, udp_len, payload),
                (len_lie, padding, cut, noise),
            )| Spec {
                vlans,
                l3,
                ipv4_opt_words,
                frag,
                ipv6_exts,
                proto,
                tcp_opt_words,
                tcp_doff,
                tcp_flags,
                udp_len,
                payload,
                len_lie,
                padding,
                cut,
                noise,
            },
        )
}

impl Spec {
    /// A non-zero 13-bit fragment offset; half the time a single bit, so that each bit of the
    /// field is seen alone.
    fn frag_offset(&self) -> u16 {
        let n = &self.noise;
        if n[28] & 1 == 0 {
            1 << (n[27] % 13)
        } else {
            (u16::from_be_bytes([n[26], n[27]]) & 0x1fff).max(1)
        }
    }

    fn build(&self) -> Vec<u8> {
        let n = &self.noise;
        let mut p = n[..12].to_vec();
        for &(qinq, tci) in &self.vlans {
            p.extend_from_slice(if qinq { &[0x88, 0xa8] } else { &[0x81, 0x00] });
            p.extend_from_slice(&tci.to_be_bytes());
        }
        let l4 = self.l4();
        match self.l3 {
            0 => {
                p.extend_from_slice(&[0x08, 0x00]);
                let mut ip = vec![0x40 | (5 + self.ipv4_opt_words as u8), n[12], 0, 0];
                ip.extend_from_slice(&n[13..15]);
                ip.extend_from_slice(&ipv4_frag(self.frag, self.frag_offset()).to_be_bytes());
                ip.extend_from_slice(&[n[15], self.proto, n[16], n[17]]);
                ip.extend_from_slice(&n[18..26]);
                ip.extend_from_slice(&n[100..100 + 4 * self.ipv4_opt_words]);
                ip.extend(l4);
                let tot = ip.len().saturating_sub(self.len_lie) as u16;
                ip[2..4].copy_from_slice(&tot.to_be_bytes());
                p.extend(ip);
            }
            1 => {
                p.extend_from_slice(&[0x86, 0xdd]);
                // Extension headers in RFC 8200 order, the fragment header last: etherparse
                // rejects a hop-by-hop header that is not first, and it stops at no fragment
                // header (OVS stops at a later fragment's), so an extension after the fragment
                // header would be read differently by design.
                let kinds: Vec<u8> = [(1, 0u8), (2, 60), (4, 43), (8, 51), (16, IPV6_FRAG)]
                    .iter()
                    .filter(|(bit, _)| self.ipv6_exts & bit != 0)
                    .map(|&(_, t)| t)
                    .collect();
                let mut exts = Vec::new();
                for (i, &t) in kinds.iter().enumerate() {
                    let nh = kinds.get(i + 1).copied().unwrap_or(self.proto);
                    let r = &n[40 + 8 * i..];
                    match t {
                        IPV6_FRAG => {
                            exts.extend_from_slice(&[nh, 0]);
                            exts.extend_from_slice(
                                &ipv6_offlg(self.frag, self.frag_offset()).to_be_bytes(),
                            );
                            exts.extend_from_slice(&r[..4]);
                        }
                        51 => {
                            // Authentication header: length in 4-byte units minus 2; etherparse
                            // rejects a zero length field, which OVS would accept.
                            let units = 1 + r[0] % 4;
                            exts.extend_from_slice(&[nh, units]);
                            exts.extend_from_slice(&n[100..100 + (units as usize + 2) * 4 - 2]);
                        }
                        _ => {
                            let units = r[0] % 3;
                            exts.extend_from_slice(&[nh, units]);
                            exts.extend_from_slice(&n[100..100 + (units as usize + 1) * 8 - 2]);
                        }
                    }
                }
                let first = kinds.first().copied().unwrap_or(self.proto);
                let (tc, label) = (n[12], u32::from_be_bytes([0, n[13] & 0x0f, n[14], n[15]]));
                let vtcfl = (6 << 28) | ((tc as u32) << 20) | label;
                let mut ip = vtcfl.to_be_bytes().to_vec();
                // etherparse reads a zero payload length as a jumbogram (RFC 2675) taking the
                // rest of the frame, without looking for the jumbo option; OVS takes it
                // literally. A lie never brings the length to zero.
                let plen = (exts.len() + l4.len()).saturating_sub(self.len_lie).max(1);
                ip.extend_from_slice(&(plen as u16).to_be_bytes());
                ip.extend_from_slice(&[first, n[16]]);
                ip.extend_from_slice(&n[60..92]);
                ip.extend(exts);
                ip.extend(l4);
                p.extend(ip);
            }
            _ => {
                let ty = [0x88cc_u16, 0x9000, 0x0842, 0x88b5][n[12] as usize % 4];
                p.extend_from_slice(&ty.to_be_bytes());
                p.extend(l4);
            }
        }
        p.extend_from_slice(&n[130..130 + self.padding]);
        if let Some(cut) = &self.cut {
            p.truncate(cut.index(p.len() + 1));
        }
        p
    }

    fn l4(&self) -> Vec<u8> {
        let n = &self.noise;
        let payload = &n[92..92 + self.payload.min(n.len() - 92)];
        let mut l4 = Vec::new();
        match self.proto {
            TCP => {
                l4.extend_from_slice(&n[20..32]);
                let doff = self.tcp_doff.unwrap_or(5 + self.tcp_opt_words as u8);
                l4.push((doff << 4) | (self.tcp_flags >> 8) as u8);
                l4.push(self.tcp_flags as u8);
                l4.extend_from_slice(&n[32..38]);
                l4.extend_from_slice(&n[100..100 + 4 * self.tcp_opt_words]);
            }
            UDP => {
                l4.extend_from_slice(&n[20..24]);
                let len = self.udp_len.unwrap_or((8 + payload.len()) as u16);
                l4.extend_from_slice(&len.to_be_bytes());
                l4.extend_from_slice(&n[24..26]);
            }
            _ => {}
        }
        l4.extend_from_slice(payload);
        l4
    }
}

/// A frame from etherparse's `PacketBuilder`: optional 802.1Q or QinQ, IPv4 or IPv6, TCP with
/// flags and options or UDP.
#[derive(Clone, Debug)]
struct Built {
    vlans: u8,
    vids: (u16, u16),
    ipv6: bool,
    tcp: Option<(u8, Vec<u8>)>,
    ttl: u8,
    ports: (u16, u16),
    payload: Vec<u8>,
    addrs: Vec<u8>,
}

fn built() -> impl Strategy<Value = Built> {
    (
        0u8..3,
        (0u16..4096, 0u16..4096),
        any::<bool>(),
        prop::option::of((
            any::<u8>(),
            prop::collection::vec(any::<u8>(), 0..=10).prop_map(
                // Options as NOPs ending in an end-of-list, padded by the builder.
                |v| {
                    v.iter()
                        .map(|b| if b % 4 == 0 { 0 } else { 1 })
                        .collect::<Vec<u8>>()
                },
            ),
        )),
        any::<u8>(),
        any::<(u16, u16)>(),
        prop::collection::vec(any::<u8>(), 0..64),
        prop::collection::vec(any::<u8>(), 44),
    )
        .prop_map(
            |(vlans, vids, ipv6, tcp, ttl, ports, payload, addrs)| Built {
                vlans,
                vids,
                ipv6,
                tcp,
                ttl,
                ports,
                payload,
                addrs,
            },
        )
}

impl Built {
    fn build(&self) -> Vec<u8> {
        let a = &self.addrs;
        let mac = |o: usize| -> [u8; 6] { a[o..o + 6].try_into().unwrap() };
        let vid = |v: u16| VlanId::try_new(v).unwrap();
        let eth = PacketBuilder::ethernet2(mac(0), mac(6));
        let (s4, d4): ([u8; 4], [u8; 4]) =
            (a[12..16].try_into().unwrap(), a[16..20].try_into().unwrap());
        let (s6, d6): ([u8; 16], [u8; 16]) =
            (a[12..28].try_into().unwrap(), a[28..44].try_into().unwrap());
        // Each builder step is its own type: spell out the six combinations.
        let ip = match (self.vlans, self.ipv6) {
            (0, false) => eth.ipv4(s4, d4, self.ttl),
            (0, true) => eth.ipv6(s6, d6, self.ttl),
            (1, false) => eth.single_vlan(vid(self.vids.0)).ipv4(s4, d4, self.ttl),
            (1, true) => eth.single_vlan(vid(self.vids.0)).ipv6(s6, d6, self.ttl),
            (_, false) => eth
                .double_vlan(vid(self.vids.0), vid(self.vids.1))
                .ipv4(s4, d4, self.ttl),
            (_, true) => eth
                .double_vlan(vid(self.vids.0), vid(self.vids.1))
                .ipv6(s6, d6, self.ttl),
        };
        let mut out = Vec::new();
        match &self.tcp {
            Some((flags, opts)) => {
                let mut t = ip.tcp(self.ports.0, self.ports.1, 1, 1024);
                for (bit, set) in [(0x01, 0), (0x02, 1), (0x04, 2), (0x08, 3)] {
                    if flags & bit != 0 {
                        t = match set {
                            0 => t.fin(),
                            1 => t.syn(),
                            2 => t.rst(),
                            _ => t.psh(),
                        };
                    }
                }
                if flags & 0x10 != 0 {
                    t = t.ack(7);
                }
                if flags & 0x20 != 0 {
                    t = t.urg(1);
                }
                if flags & 0x40 != 0 {
                    t = t.ece();
                }
                if flags & 0x80 != 0 {
                    t = t.cwr();
                }
                let mut o = opts.clone();
                o.resize(o.len().div_ceil(4) * 4, 0);
                t.options_raw(&o)
                    .unwrap()
                    .write(&mut out, &self.payload)
                    .unwrap();
            }
            None => ip
                .udp(self.ports.0, self.ports.1)
                .write(&mut out, &self.payload)
                .unwrap(),
        }
        out
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Generated frames, well formed or not.
    #[test]
    fn extract_agrees_with_etherparse(spec in spec()) {
        check(&spec.build())?;
    }

    /// Frames built by etherparse itself, also cut short and padded.
    #[test]
    fn extract_agrees_on_packet_builder_frames(
        b in built(),
        pad in prop::collection::vec(any::<u8>(), 0..20),
        cut in prop::option::weighted(0.2, any::<Index>()),
    ) {
        let mut p = b.build();
        p.extend(pad);
        if let Some(cut) = cut {
            p.truncate(cut.index(p.len() + 1));
        }
        check(&p)?;
    }
}

/// The IPv6 fragment rules OVS has and etherparse does not share, on fixed frames.
#[test]
fn ipv6_fragment_header_rules() {
    let frame = |offlg: u16| {
        let mut p = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd];
        p.extend_from_slice(&[0x60, 0, 0, 0, 0, 16, IPV6_FRAG, 64]);
        p.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        p.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        p.extend_from_slice(&[UDP, 0]);
        p.extend_from_slice(&offlg.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 9]);
        p.extend_from_slice(&[0x04, 0x00, 0x00, 0x35, 0, 8, 0, 0]);
        p
    };
    // (offset-and-flags, nw_frag, nw_proto, ports)
    let cases = [
        (0x0000, 0, UDP, (1024, 53)),
        (0x0001, nw_frag::ANY, UDP, (1024, 53)),
        (0x0006, nw_frag::ANY, UDP, (1024, 53)),
        (0x0028, nw_frag::ANY | nw_frag::LATER, IPV6_FRAG, (0, 0)),
    ];
    for (offlg, frag, proto, ports) in cases {
        let p = frame(offlg);
        let got = ours(&p);
        assert_eq!(got, expected(&p), "offlg {offlg:#06x}");
        assert_eq!(
            (got.nw_frag, got.nw_proto, (got.tp_src, got.tp_dst)),
            (frag, proto, ports),
            "offlg {offlg:#06x}"
        );
    }
}
