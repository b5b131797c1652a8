//! The benchmark traffic of the project's OVS-DPDK performance anchor, frame for frame.
//!
//! The anchor measured OVS-DPDK on pcaps made by its `gen_pcaps.py` (scapy 2.8.0): one kind per
//! seed scenario, `N` parallel L4 flows each. This module makes every kind for any `N`, byte
//! for byte as scapy does (IPv4 identification 1, TTL 64, UDP checksums computed unless a kind
//! sets them to 0, padding as UDP payload), so that flowpath replays the very frames OVS was
//! measured on, and [`write_pcap`] writes them as the anchor's files, down to the header and
//! the fixed timestamps (`pcaps.sha256` of the anchor matches; see the test
//! `anchor_traffic.rs` of the `flowpath` crate).
//!
//! Flow `i` of every kind carries inner UDP ports (1024 + i mod 60000, 2000 + i div 60000);
//! what else varies with `i` is per kind (see [`TrafficKind`]). The frame size is that of the
//! innermost Ethernet frame, 4-byte FCS included, as in RFC 2544 tables and as `gen_pcaps.py`'s
//! `size`: the innermost UDP payload is zero-padded to it. For MPLSoGRE, whose inner packet has
//! no Ethernet header, it is the inner IPv4 packet's size plus 18 (the Ethernet header and FCS
//! it would have on a wire), as the anchor pads it. The anchor's sizes are all 64 (its GENEVE
//! generator takes a size but pads the inner frame to 64 regardless).

use std::fmt;
use std::io::{self, Write};

use wire::geneve::GeneveOptions;
use wire::ipv4::Ipv4Options;
use wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, GeneveOption, GenevePacket,
    GeneveRepr, GrePacket, GreRepr, IpProtocol, Ipv4Addr, Ipv4Packet, Ipv4Repr, MplsEntry,
    MplsRepr, UdpPacket, UdpRepr, VxlanPacket, VxlanRepr,
};

/// One of the anchor's kinds of traffic, named as its pcap files are (`KIND_N.pcap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrafficKind {
    /// 64-byte Eth/IPv4/UDP, 10.0.0.1 → 10.1.0.2: the p2p baseline.
    Plain,
    /// VXLAN (VNI 100) from remote VTEP 10.1.2.9 to 10.1.2.8 carrying a tenant's
    /// Eth/IPv4/UDP (192.168.1.(1 + i mod 200) → 192.168.2.16); the outer UDP source port is
    /// 49152 + i mod 1000 and the outer UDP checksum is set (seed 001, L3-VPN decap).
    VxlanL3vpn,
    /// IPv4/GRE (key 0)/MPLS (label 812 + i mod 4, TTL 4, bottom of stack)/IPv4/UDP from
    /// 10.1.2.9 to 10.1.2.8; the inner destination is 192.168.(label - 810).16 (seed 000).
    Mplsogre,
    /// GENEVE (VNI 3, one OVN option class 0x0102 type 0x80 data 0x00030002) from
    /// 172.17.2.160 to 172.17.2.60 with one fixed outer 5-tuple and the outer UDP checksum
    /// set, carrying Eth/IPv4/UDP 192.168.1.61 → 192.168.1.16 (seed 002).
    Geneve,
    /// [`TrafficKind::VxlanL3vpn`] with outer UDP checksum 0.
    VxlanL3vpnCsum0,
    /// [`TrafficKind::Geneve`] with outer UDP checksum 0.
    GeneveCsum0,
    /// Not one of the anchor's: [`TrafficKind::Mplsogre`] without the MPLS entry (GRE carries
    /// the IPv4 packet itself, to 192.168.(2 + i mod 4).16), to measure what MPLS costs on
    /// the same pipeline.
    GreIpv4,
}

impl TrafficKind {
    /// The anchor's kinds, in the order `gen_pcaps.py` lists them.
    pub const ALL: [TrafficKind; 6] = [
        TrafficKind::Plain,
        TrafficKind::VxlanL3vpn,
        TrafficKind::Mplsogre,
        TrafficKind::Geneve,
        TrafficKind::VxlanL3vpnCsum0,
        TrafficKind::GeneveCsum0,
    ];

    /// The anchor's name of the kind (its pcap files are `NAME_N.pcap`).
    pub const fn name(self) -> &'static str {
        match self {
            TrafficKind::Plain => "plain",
            TrafficKind::VxlanL3vpn => "vxlan_l3vpn",
            TrafficKind::Mplsogre => "mplsogre",
            TrafficKind::Geneve => "geneve",
            TrafficKind::VxlanL3vpnCsum0 => "vxlan_l3vpn_csum0",
            TrafficKind::GeneveCsum0 => "geneve_csum0",
            TrafficKind::GreIpv4 => "gre_ipv4",
        }
    }

    /// The kind of that name.
    pub fn from_name(name: &str) -> Option<TrafficKind> {
        Self::ALL
            .into_iter()
            .chain([TrafficKind::GreIpv4])
            .find(|k| k.name() == name)
    }
}

impl fmt::Display for TrafficKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The anchor's frame size (innermost frame, FCS included) for every kind.
pub const DEFAULT_FRAME_SIZE: usize = 64;

/// Most flows a kind can have: the inner UDP destination port, 2000 + i div 60000, must stay a
/// 16-bit number.
pub const MAX_FLOWS: usize = 60_000 * (65_536 - 2000);

/// Ethernet FCS, counted in frame sizes but not present in captures.
const FCS_LEN: usize = 4;

/// The underlay of the VXLAN and MPLSoGRE seeds: remote VTEP → br-phy.
const VTEP_REMOTE_MAC: [u8; 6] = [0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48];
const VTEP_LOCAL_MAC: [u8; 6] = [0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0];
const VTEP_REMOTE_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 2, 9);
const VTEP_LOCAL_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 2, 8);
/// The Geneve seed's underlay (TRex port → compute node).
const GENEVE_REMOTE_MAC: [u8; 6] = [0xec, 0x0d, 0x9a, 0x44, 0x2c, 0xf5];
const GENEVE_LOCAL_MAC: [u8; 6] = [0x3c, 0xfd, 0xfe, 0xee, 0x4a, 0x2c];
const GENEVE_REMOTE_IP: Ipv4Addr = Ipv4Addr::new(172, 17, 2, 160);
const GENEVE_LOCAL_IP: Ipv4Addr = Ipv4Addr::new(172, 17, 2, 60);
/// The OVN option of the Geneve seed: class 0x0102, type 0x80, 4 bytes.
const OVN_OPTION: GeneveOption<'static> = GeneveOption {
    class: 0x0102,
    option_type: 0x80,
    reserved: 0,
    data: &[0x00, 0x03, 0x00, 0x02],
};

/// One header of a frame under construction, outermost first. Lengths, EtherTypes, IP
/// protocols and checksums are derived when the frame is built.
#[derive(Clone, Copy, Debug)]
enum Layer {
    Eth {
        src: [u8; 6],
        dst: [u8; 6],
    },
    Ipv4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
    },
    Udp {
        src: u16,
        dst: u16,
        checksum: bool,
    },
    Vxlan {
        vni: u32,
    },
    Geneve {
        vni: u32,
    },
    Gre {
        key: u32,
    },
    Mpls {
        label: u32,
        ttl: u8,
    },
    /// Zero bytes (the padding up to the frame size).
    Payload(usize),
}

impl Layer {
    fn len(&self) -> usize {
        match self {
            Layer::Eth { .. } => wire::ethernet::HEADER_LEN,
            Layer::Ipv4 { .. } => wire::ipv4::HEADER_LEN,
            Layer::Udp { .. } => wire::udp::HEADER_LEN,
            Layer::Vxlan { .. } => wire::vxlan::HEADER_LEN,
            Layer::Geneve { .. } => wire::geneve::HEADER_LEN + OVN_OPTION.buffer_len(),
            Layer::Gre { .. } => wire::gre::HEADER_LEN + 4,
            Layer::Mpls { .. } => wire::mpls::HEADER_LEN,
            Layer::Payload(n) => *n,
        }
    }

    /// How an Ethernet, GRE or GENEVE header names this layer as its payload.
    fn ethertype(&self) -> EtherType {
        match self {
            Layer::Ipv4 { .. } => EtherType::IPV4,
            Layer::Mpls { .. } => EtherType::MPLS_UNICAST,
            Layer::Eth { .. } => EtherType::TEB,
            other => unreachable!("no EtherType for {other:?}"),
        }
    }

    /// How an IPv4 header names this layer as its payload.
    fn ip_protocol(&self) -> IpProtocol {
        match self {
            Layer::Udp { .. } => IpProtocol::UDP,
            Layer::Gre { .. } => IpProtocol::GRE,
            other => unreachable!("no IP protocol for {other:?}"),
        }
    }
}

/// The UDP ports of flow `i`: (1024 + i mod 60000, 2000 + i div 60000).
fn flow_ports(i: usize) -> (u16, u16) {
    assert!(i < MAX_FLOWS, "flow {i}: at most {MAX_FLOWS} flows");
    ((1024 + i % 60_000) as u16, (2000 + i / 60_000) as u16)
}

/// Frame `i` (0-based flow number) of `kind`, without FCS; `size` as in the module
/// documentation.
///
/// # Panics
/// If `i` is not below [`MAX_FLOWS`].
pub fn frame(kind: TrafficKind, i: usize, size: usize) -> Vec<u8> {
    let (sport, dport) = flow_ports(i);
    // The innermost Eth/IPv4/UDP (MPLSoGRE: IPv4/UDP, sized as if it had the Ethernet header).
    let inner_headers = wire::ethernet::HEADER_LEN + wire::ipv4::HEADER_LEN + wire::udp::HEADER_LEN;
    let pad = Layer::Payload(size.saturating_sub(FCS_LEN + inner_headers));
    let inner_udp = Layer::Udp {
        src: sport,
        dst: dport,
        checksum: true,
    };
    let tenant_src = Ipv4Addr::new(192, 168, 1, 1 + (i % 200) as u8);
    let vtep = |outer: Layer| {
        [
            Layer::Eth {
                src: VTEP_REMOTE_MAC,
                dst: VTEP_LOCAL_MAC,
            },
            Layer::Ipv4 {
                src: VTEP_REMOTE_IP,
                dst: VTEP_LOCAL_IP,
            },
            outer,
        ]
    };
    match kind {
        TrafficKind::Plain => build(&[
            Layer::Eth {
                src: VTEP_REMOTE_MAC,
                dst: VTEP_LOCAL_MAC,
            },
            Layer::Ipv4 {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 1, 0, 2),
            },
            inner_udp,
            pad,
        ]),
        TrafficKind::VxlanL3vpn | TrafficKind::VxlanL3vpnCsum0 => {
            let outer_udp = Layer::Udp {
                src: 49152 + (i % 1000) as u16,
                dst: wire::consts::VXLAN_PORT,
                checksum: kind == TrafficKind::VxlanL3vpn,
            };
            let [eth, ip, udp] = vtep(outer_udp);
            build(&[
                eth,
                ip,
                udp,
                Layer::Vxlan { vni: 100 },
                Layer::Eth {
                    src: [0x52, 0x54, 0x00, 0xa0, 0x81, 0x01],
                    dst: [0x52, 0x54, 0x00, 0xa0, 0x91, 0x02],
                },
                Layer::Ipv4 {
                    src: tenant_src,
                    dst: Ipv4Addr::new(192, 168, 2, 16),
                },
                inner_udp,
                pad,
            ])
        }
        TrafficKind::Mplsogre => {
            let label = 812 + (i % 4) as u32;
            let [eth, ip, gre] = vtep(Layer::Gre { key: 0 });
            build(&[
                eth,
                ip,
                gre,
                Layer::Mpls { label, ttl: 4 },
                Layer::Ipv4 {
                    src: tenant_src,
                    dst: Ipv4Addr::new(192, 168, (label - 810) as u8, 16),
                },
                inner_udp,
                pad,
            ])
        }
        TrafficKind::GreIpv4 => {
            let [eth, ip, gre] = vtep(Layer::Gre { key: 0 });
            build(&[
                eth,
                ip,
                gre,
                Layer::Ipv4 {
                    src: tenant_src,
                    dst: Ipv4Addr::new(192, 168, 2 + (i % 4) as u8, 16),
                },
                inner_udp,
                pad,
            ])
        }
        TrafficKind::Geneve | TrafficKind::GeneveCsum0 => build(&[
            Layer::Eth {
                src: GENEVE_REMOTE_MAC,
                dst: GENEVE_LOCAL_MAC,
            },
            Layer::Ipv4 {
                src: GENEVE_REMOTE_IP,
                dst: GENEVE_LOCAL_IP,
            },
            Layer::Udp {
                src: 57025,
                dst: wire::consts::GENEVE_PORT,
                checksum: kind == TrafficKind::Geneve,
            },
            Layer::Geneve { vni: 3 },
            Layer::Eth {
                src: [0xfa, 0x16, 0x3e, 0xe4, 0x0a, 0xcf],
                dst: [0xfa, 0x16, 0x3e, 0x20, 0xab, 0x56],
            },
            Layer::Ipv4 {
                src: Ipv4Addr::new(192, 168, 1, 61),
                dst: Ipv4Addr::new(192, 168, 1, 16),
            },
            inner_udp,
            pad,
        ]),
    }
}

/// The `n` frames (flows 0..n) of `kind`; `size` as in the module documentation.
///
/// # Panics
/// If `n` exceeds [`MAX_FLOWS`].
pub fn frames(kind: TrafficKind, n: usize, size: usize) -> Vec<Vec<u8>> {
    assert!(n <= MAX_FLOWS, "{n} flows: at most {MAX_FLOWS}");
    (0..n).map(|i| frame(kind, i, size)).collect()
}

/// Emits `layers` (outermost first) into one frame: each header through its `wire` repr, with
/// the lengths of what follows it; then the UDP checksums, innermost first, since an outer
/// checksum covers the inner one.
fn build(layers: &[Layer]) -> Vec<u8> {
    let total: usize = layers.iter().map(Layer::len).sum();
    let mut f = vec![0u8; total];
    let mut at = 0;
    // Where each UDP header is and the addresses of the IPv4 header around it.
    let mut udp_checksums: Vec<(usize, Ipv4Addr, Ipv4Addr)> = Vec::new();
    let mut ip_addrs = None;
    for (j, layer) in layers.iter().enumerate() {
        let rest = total - at;
        let next = layers.get(j + 1);
        let hdr_len = layer.len();
        let b = &mut f[at..];
        match *layer {
            Layer::Eth { src, dst } => EthernetRepr {
                src_addr: EthernetAddress(src),
                dst_addr: EthernetAddress(dst),
                ethertype: next.map_or(EtherType(0), Layer::ethertype),
            }
            .emit(&mut EthernetFrame::new_unchecked(b)),
            Layer::Ipv4 { src, dst } => {
                Ipv4Repr {
                    src_addr: src,
                    dst_addr: dst,
                    protocol: next.map_or(IpProtocol(0), Layer::ip_protocol),
                    payload_len: rest - hdr_len,
                    ttl: 64,
                    dscp: 0,
                    ecn: 0,
                    ident: 1,
                    dont_frag: false,
                    more_frags: false,
                    frag_offset: 0,
                    options: Ipv4Options::new(),
                }
                .emit(&mut Ipv4Packet::new_unchecked(b));
                ip_addrs = Some((src, dst));
            }
            Layer::Udp { src, dst, checksum } => {
                UdpRepr {
                    src_port: src,
                    dst_port: dst,
                    payload_len: rest - hdr_len,
                }
                .emit(&mut UdpPacket::new_unchecked(b));
                if checksum {
                    let (s, d) = ip_addrs.expect("UDP inside IPv4");
                    udp_checksums.push((at, s, d));
                }
            }
            Layer::Vxlan { vni } => {
                VxlanRepr { vni, gbp: None }.emit(&mut VxlanPacket::new_unchecked(b))
            }
            Layer::Geneve { vni } => {
                let mut options = GeneveOptions::new();
                OVN_OPTION
                    .push_to(&mut options)
                    .expect("one 4-byte option fits");
                GeneveRepr {
                    oam: false,
                    critical: false,
                    protocol_type: next.map_or(EtherType(0), Layer::ethertype),
                    vni,
                    options,
                }
                .emit(&mut GenevePacket::new_unchecked(b));
            }
            Layer::Gre { key } => GreRepr {
                protocol_type: next.map_or(EtherType(0), Layer::ethertype),
                checksum_present: false,
                key: Some(key),
                sequence: None,
            }
            .emit(&mut GrePacket::new_unchecked(b)),
            Layer::Mpls { label, ttl } => MplsRepr {
                label,
                tc: 0,
                bottom_of_stack: !matches!(next, Some(Layer::Mpls { .. })),
                ttl,
            }
            .emit(&mut MplsEntry::new_unchecked(b)),
            Layer::Payload(_) => {}
        }
        at += hdr_len;
    }
    for &(at, src, dst) in udp_checksums.iter().rev() {
        UdpPacket::new_unchecked(&mut f[at..]).fill_checksum_v4(&src, &dst);
    }
    f
}

/// Writes `frames` as a classic pcap file exactly as the anchor's are (scapy's `wrpcap`):
/// little-endian, microsecond timestamps, snaplen 65535, Ethernet, and frame `k` stamped at
/// `k` µs (`gen_pcaps.py`'s fixed timestamps). [`crate::pcap::PcapWriter`] writes another
/// snaplen (262144), which would make the files differ from the anchor's in one header field.
pub fn write_pcap(mut out: impl Write, frames: &[Vec<u8>]) -> io::Result<()> {
    let mut h = Vec::with_capacity(24);
    h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    h.extend_from_slice(&65535u32.to_le_bytes()); // snaplen
    h.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
    out.write_all(&h)?;
    for (k, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too long"))?;
        let mut r = [0u8; 16];
        r[0..4].copy_from_slice(&((k / 1_000_000) as u32).to_le_bytes());
        r[4..8].copy_from_slice(&((k % 1_000_000) as u32).to_le_bytes());
        r[8..12].copy_from_slice(&len.to_le_bytes());
        r[12..16].copy_from_slice(&len.to_le_bytes());
        out.write_all(&r)?;
        out.write_all(f)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_capture(kind: TrafficKind) -> Vec<Vec<u8>> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/pcap")
            .join(format!("{kind}_8.pcap"));
        crate::pcap::read_file(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .into_iter()
            .map(|r| r.data)
            .collect()
    }

    /// The repository's scapy captures of the seeds (`testdata/pcap/KIND_8.pcap`, the anchor's
    /// files for 8 flows) frame by frame, reporting the first differing byte.
    #[test]
    fn every_kind_equals_scapys_capture_of_8_flows() {
        for kind in TrafficKind::ALL {
            let want = seed_capture(kind);
            let got = frames(kind, 8, DEFAULT_FRAME_SIZE);
            assert_eq!(got.len(), want.len(), "{kind}");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let at = g.iter().zip(w).position(|(a, b)| a != b);
                assert!(
                    g == w,
                    "{kind} frame {i}: lengths {} / {}, first difference at byte {at:?}\n got  {g:02x?}\n want {w:02x?}",
                    g.len(),
                    w.len()
                );
            }
        }
    }

    #[test]
    fn frame_size_is_the_innermost_frame_with_fcs() {
        for size in [64, 300, 1518] {
            assert_eq!(frame(TrafficKind::Plain, 0, size).len(), size - 4);
            // Outer Eth/IPv4/UDP/VXLAN: 50 bytes around the inner frame.
            assert_eq!(frame(TrafficKind::VxlanL3vpn, 0, size).len(), 50 + size - 4);
            // Outer Eth/IPv4/UDP/GENEVE with the 8-byte option: 58 bytes.
            assert_eq!(frame(TrafficKind::Geneve, 0, size).len(), 58 + size - 4);
            // Eth/IPv4/GRE(key)/MPLS: 46 bytes around the inner IPv4 packet of size - 18.
            let f = frame(TrafficKind::Mplsogre, 0, size);
            assert_eq!(f.len(), 46 + size - 18);
            let inner = Ipv4Packet::new_checked(&f[46..]).unwrap();
            assert_eq!(usize::from(inner.total_len()), size - 18);
            assert!(inner.verify_checksum());
        }
        // GRE carrying the same IPv4 packet without the MPLS entry, to the label's address.
        for i in 0..4 {
            let m = frame(TrafficKind::Mplsogre, i, 300);
            let g = frame(TrafficKind::GreIpv4, i, 300);
            assert_eq!(g.len() + 4, m.len());
            // Outer headers alike but for the IPv4 length and checksum and the GRE protocol.
            assert_eq!(
                (&g[..16], &g[18..24], &g[26..36]),
                (&m[..16], &m[18..24], &m[26..36])
            );
            assert!(Ipv4Packet::new_checked(&g[14..]).unwrap().verify_checksum());
            assert_eq!((&g[36..38], &m[36..38]), (&[8, 0][..], &[0x88, 0x47][..]));
            assert_eq!(g[38..42], m[38..42], "key");
            assert_eq!(g[42..], m[46..], "the inner packet");
        }
        // Smaller than the headers: no padding, as gen_pcaps.py.
        assert_eq!(frame(TrafficKind::Plain, 0, 0).len(), 42);
    }

    #[test]
    fn checksums_verify_and_flows_differ_as_the_anchor_says() {
        let f = frame(TrafficKind::VxlanL3vpn, 60_001, 300);
        let outer = Ipv4Packet::new_checked(&f[14..]).unwrap();
        let udp = UdpPacket::new_checked(&f[34..]).unwrap();
        assert!(outer.verify_checksum());
        assert_ne!(udp.checksum(), 0);
        assert!(udp.verify_checksum_v4(&VTEP_REMOTE_IP, &VTEP_LOCAL_IP));
        assert_eq!(udp.src_port(), 49152 + 1);
        let inner_udp = UdpPacket::new_checked(&f[50 + 34..]).unwrap();
        assert_eq!((inner_udp.src_port(), inner_udp.dst_port()), (1025, 2001));
        let f0 = frame(TrafficKind::VxlanL3vpnCsum0, 60_001, 300);
        assert_eq!(UdpPacket::new_checked(&f0[34..]).unwrap().checksum(), 0);
        assert_eq!(f0[42..], f[42..], "only the outer UDP checksum differs");
        let labels: Vec<u32> = (0..5)
            .map(|i| {
                let f = frame(TrafficKind::Mplsogre, i, 64);
                MplsEntry::new_checked(&f[42..]).unwrap().label()
            })
            .collect();
        assert_eq!(labels, [812, 813, 814, 815, 812]);
    }

    #[test]
    fn pcap_header_and_timestamps_are_scapys() {
        let mut out = Vec::new();
        write_pcap(&mut out, &frames(TrafficKind::Plain, 2, 64)).unwrap();
        assert_eq!(
            out[..24],
            [
                0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0,
                0, 0
            ]
        );
        let second = 24 + 16 + 60;
        assert_eq!(
            out[second..second + 16],
            [0, 0, 0, 0, 1, 0, 0, 0, 60, 0, 0, 0, 60, 0, 0, 0]
        );
        let back: Vec<Vec<u8>> = crate::pcap::PcapReader::new(&out[..])
            .unwrap()
            .map(|r| r.unwrap().data)
            .collect();
        assert_eq!(back, frames(TrafficKind::Plain, 2, 64));
    }

    #[test]
    fn names_round_trip() {
        for k in TrafficKind::ALL {
            assert_eq!(TrafficKind::from_name(k.name()), Some(k));
        }
        assert_eq!(TrafficKind::from_name("vxlan"), None);
    }
}
