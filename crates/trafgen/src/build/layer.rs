//! The headers a [`Template`](super::Template) is made of: one type per protocol (Ethernet,
//! 802.1Q/802.1ad, IPv4, IPv6, UDP, TCP, VXLAN, GENEVE, GRE, MPLS), each with scapy's defaults
//! for the fields left out, the [`Layer`] that holds any of them, and the rules that tie a layer
//! to the next: which kinds may follow which, and what a header derives from the layer after it
//! (EtherType, IP protocol, UDP ports before a tunnel).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use wire::geneve::GeneveOptions;
use wire::{EtherType, EthernetAddress, GeneveOption, IpProtocol, TcpFlags, VxlanGbp};

/// Bytes of an Ethernet II header.
pub(super) const ETH_LEN: usize = wire::ethernet::HEADER_LEN;

/// Ethernet II header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eth {
    /// Source address (default 00:00:00:00:00:00).
    pub src: EthernetAddress,
    /// Destination address (default ff:ff:ff:ff:ff:ff).
    pub dst: EthernetAddress,
    /// EtherType; `None`: from the next layer (0x9000 when there is none, as scapy).
    pub ethertype: Option<u16>,
}

impl Default for Eth {
    fn default() -> Self {
        Eth {
            src: EthernetAddress([0; 6]),
            dst: EthernetAddress::BROADCAST,
            ethertype: None,
        }
    }
}

/// An 802.1Q tag (or 802.1ad with `tpid` 0x88a8). Its TPID is written by the layer before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vlan {
    /// VLAN id (default 1, as scapy's `Dot1Q`).
    pub vid: u16,
    /// Priority code point.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// Tag protocol identifier: 0x8100 (default) or 0x88a8 (QinQ outer tag).
    pub tpid: u16,
    /// EtherType of what follows; `None`: from the next layer (0 when there is none).
    pub ethertype: Option<u16>,
}

impl Default for Vlan {
    fn default() -> Self {
        Vlan {
            vid: 1,
            pcp: 0,
            dei: false,
            tpid: 0x8100,
            ethertype: None,
        }
    }
}

/// IPv4 header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ipv4 {
    /// Source (default 127.0.0.1).
    pub src: Ipv4Addr,
    /// Destination (default 127.0.0.1).
    pub dst: Ipv4Addr,
    /// Time to live (default 64).
    pub ttl: u8,
    /// Type of service byte (DSCP and ECN).
    pub tos: u8,
    /// Identification (default 1).
    pub id: u16,
    /// Don't fragment.
    pub df: bool,
    /// More fragments (kept from dissected frames).
    pub mf: bool,
    /// Fragment offset in 8-byte units (kept from dissected frames).
    pub frag_offset: u16,
    /// Protocol; `None`: from the next layer (0 when there is none).
    pub proto: Option<u8>,
    /// Option bytes (kept from dissected frames), at most 40.
    pub options: Vec<u8>,
}

impl Default for Ipv4 {
    fn default() -> Self {
        Ipv4 {
            src: Ipv4Addr::LOCALHOST,
            dst: Ipv4Addr::LOCALHOST,
            ttl: 64,
            tos: 0,
            id: 1,
            df: false,
            mf: false,
            frag_offset: 0,
            proto: None,
            options: Vec::new(),
        }
    }
}

/// IPv6 fixed header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ipv6 {
    /// Source (default ::1).
    pub src: Ipv6Addr,
    /// Destination (default ::1).
    pub dst: Ipv6Addr,
    /// Hop limit (default 64).
    pub hlim: u8,
    /// Traffic class.
    pub tc: u8,
    /// Flow label, 20 bits.
    pub fl: u32,
    /// Next header; `None`: from the next layer (59, no next header, when there is none).
    pub nh: Option<u8>,
}

impl Default for Ipv6 {
    fn default() -> Self {
        Ipv6 {
            src: Ipv6Addr::LOCALHOST,
            dst: Ipv6Addr::LOCALHOST,
            hlim: 64,
            tc: 0,
            fl: 0,
            nh: None,
        }
    }
}

/// UDP header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Udp {
    /// Source port; `None`: 4789 before VXLAN, else 53.
    pub sport: Option<u16>,
    /// Destination port; `None`: 4789 before VXLAN, 6081 before GENEVE, else 53.
    pub dport: Option<u16>,
    /// Compute the checksum (default); `false` sends 0, "no checksum".
    pub checksum: bool,
}

impl Default for Udp {
    fn default() -> Self {
        Udp {
            sport: None,
            dport: None,
            checksum: true,
        }
    }
}

/// TCP header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tcp {
    /// Source port (default 20).
    pub sport: u16,
    /// Destination port (default 80).
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flags, 9 bits (default 0x002, SYN).
    pub flags: u16,
    /// Window (default 8192).
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Option bytes (kept from dissected frames), at most 40.
    pub options: Vec<u8>,
}

impl Default for Tcp {
    fn default() -> Self {
        Tcp {
            sport: 20,
            dport: 80,
            seq: 0,
            ack: 0,
            flags: TcpFlags::SYN.bits(),
            window: 8192,
            urgent: 0,
            options: Vec::new(),
        }
    }
}

/// VXLAN header (RFC 7348; flags 0x08).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Vxlan {
    /// VNI, 24 bits.
    pub vni: u32,
    /// Group-based policy fields (kept from dissected frames).
    pub gbp: Option<VxlanGbp>,
}

/// GENEVE header (RFC 8926).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Geneve {
    /// VNI, 24 bits.
    pub vni: u32,
    /// C: critical options present.
    pub critical: bool,
    /// O: OAM packet.
    pub oam: bool,
    /// Protocol type; `None`: from the next layer (0x6558, Ethernet, when there is none).
    pub protocol: Option<u16>,
    /// The option TLVs as on the wire (see [`Geneve::push_option`]).
    pub options: Vec<u8>,
}

impl Geneve {
    /// Appends an option (class, type with the critical bit as its high bit, data of a
    /// multiple of 4 bytes up to 124).
    pub fn push_option(&mut self, class: u16, option_type: u8, data: &[u8]) -> Result<(), String> {
        let mut o = GeneveOptions::from_slice(&self.options)
            .map_err(|_| "too many option bytes".to_string())?;
        GeneveOption {
            class,
            option_type,
            reserved: 0,
            data,
        }
        .push_to(&mut o)
        .map_err(|_| {
            format!(
                "option data of {} bytes: expected a multiple of 4 up to 124, and at most 252 \
                 option bytes in all",
                data.len()
            )
        })?;
        self.options = o.as_slice().to_vec();
        Ok(())
    }
}

/// GRE header (RFC 2784, key and sequence number of RFC 2890).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Gre {
    /// Key, when present.
    pub key: Option<u32>,
    /// Carry a checksum.
    pub checksum: bool,
    /// Sequence number, when present (kept from dissected frames).
    pub sequence: Option<u32>,
    /// Protocol type; `None`: from the next layer (0 when there is none).
    pub protocol: Option<u16>,
}

/// One MPLS label stack entry; bottom of stack is set on the last of consecutive entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mpls {
    /// Label, 20 bits (default 3, as scapy).
    pub label: u32,
    /// Traffic class, 3 bits.
    pub tc: u8,
    /// Time to live (default 0, as scapy).
    pub ttl: u8,
}

impl Default for Mpls {
    fn default() -> Self {
        Mpls {
            label: 3,
            tc: 0,
            ttl: 0,
        }
    }
}

/// One header of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layer {
    /// Ethernet.
    Eth(Eth),
    /// 802.1Q / 802.1ad tag.
    Vlan(Vlan),
    /// IPv4.
    Ipv4(Ipv4),
    /// IPv6.
    Ipv6(Ipv6),
    /// UDP.
    Udp(Udp),
    /// TCP.
    Tcp(Tcp),
    /// VXLAN.
    Vxlan(Vxlan),
    /// GENEVE.
    Geneve(Geneve),
    /// GRE.
    Gre(Gre),
    /// MPLS label stack entry.
    Mpls(Mpls),
}

/// The kinds of [`Layer`], named as in stream files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayerKind {
    /// `eth`
    Eth,
    /// `vlan`
    Vlan,
    /// `ipv4`
    Ipv4,
    /// `ipv6`
    Ipv6,
    /// `udp`
    Udp,
    /// `tcp`
    Tcp,
    /// `vxlan`
    Vxlan,
    /// `geneve`
    Geneve,
    /// `gre`
    Gre,
    /// `mpls`
    Mpls,
}

impl LayerKind {
    /// Every kind.
    pub const ALL: [LayerKind; 10] = [
        LayerKind::Eth,
        LayerKind::Vlan,
        LayerKind::Ipv4,
        LayerKind::Ipv6,
        LayerKind::Udp,
        LayerKind::Tcp,
        LayerKind::Vxlan,
        LayerKind::Geneve,
        LayerKind::Gre,
        LayerKind::Mpls,
    ];

    /// The name in stream files.
    pub const fn name(self) -> &'static str {
        match self {
            LayerKind::Eth => "eth",
            LayerKind::Vlan => "vlan",
            LayerKind::Ipv4 => "ipv4",
            LayerKind::Ipv6 => "ipv6",
            LayerKind::Udp => "udp",
            LayerKind::Tcp => "tcp",
            LayerKind::Vxlan => "vxlan",
            LayerKind::Geneve => "geneve",
            LayerKind::Gre => "gre",
            LayerKind::Mpls => "mpls",
        }
    }

    /// The kind of that name.
    pub fn from_name(s: &str) -> Option<LayerKind> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Which kinds may directly follow this one.
    pub(super) fn may_carry(self, next: LayerKind) -> bool {
        use LayerKind as K;
        match self {
            K::Eth | K::Vlan => matches!(next, K::Vlan | K::Ipv4 | K::Ipv6 | K::Mpls),
            K::Ipv4 | K::Ipv6 => matches!(next, K::Ipv4 | K::Ipv6 | K::Udp | K::Tcp | K::Gre),
            K::Udp => matches!(next, K::Vxlan | K::Geneve),
            K::Tcp => false,
            K::Vxlan => next == K::Eth,
            K::Geneve | K::Gre => matches!(next, K::Eth | K::Ipv4 | K::Ipv6 | K::Mpls),
            K::Mpls => matches!(next, K::Mpls | K::Ipv4 | K::Ipv6 | K::Eth),
        }
    }
}

impl fmt::Display for LayerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Layer {
    /// Its kind.
    pub fn kind(&self) -> LayerKind {
        match self {
            Layer::Eth(_) => LayerKind::Eth,
            Layer::Vlan(_) => LayerKind::Vlan,
            Layer::Ipv4(_) => LayerKind::Ipv4,
            Layer::Ipv6(_) => LayerKind::Ipv6,
            Layer::Udp(_) => LayerKind::Udp,
            Layer::Tcp(_) => LayerKind::Tcp,
            Layer::Vxlan(_) => LayerKind::Vxlan,
            Layer::Geneve(_) => LayerKind::Geneve,
            Layer::Gre(_) => LayerKind::Gre,
            Layer::Mpls(_) => LayerKind::Mpls,
        }
    }

    /// Header length in bytes.
    pub fn header_len(&self) -> usize {
        match self {
            Layer::Eth(_) => ETH_LEN,
            Layer::Vlan(_) | Layer::Mpls(_) => 4,
            Layer::Ipv4(l) => 20 + l.options.len().next_multiple_of(4),
            Layer::Ipv6(_) => 40,
            Layer::Udp(_) | Layer::Vxlan(_) => 8,
            Layer::Tcp(l) => 20 + l.options.len().next_multiple_of(4),
            Layer::Geneve(l) => 8 + l.options.len().next_multiple_of(4),
            Layer::Gre(l) => {
                4 + 4
                    * (usize::from(l.checksum)
                        + usize::from(l.key.is_some())
                        + usize::from(l.sequence.is_some()))
            }
        }
    }

    /// How an Ethernet, VLAN, GRE or GENEVE header names this layer as its payload.
    pub(super) fn ethertype(&self) -> Option<u16> {
        match self {
            Layer::Vlan(v) => Some(v.tpid),
            Layer::Ipv4(_) => Some(EtherType::IPV4.0),
            Layer::Ipv6(_) => Some(EtherType::IPV6.0),
            Layer::Mpls(_) => Some(EtherType::MPLS_UNICAST.0),
            Layer::Eth(_) => Some(EtherType::TEB.0),
            _ => None,
        }
    }

    /// How an IP header names this layer as its payload.
    pub(super) fn ip_protocol(&self) -> Option<u8> {
        match self {
            Layer::Udp(_) => Some(IpProtocol::UDP.0),
            Layer::Tcp(_) => Some(IpProtocol::TCP.0),
            Layer::Gre(_) => Some(IpProtocol::GRE.0),
            Layer::Ipv4(_) => Some(IpProtocol::IPV4.0),
            Layer::Ipv6(_) => Some(IpProtocol::IPV6.0),
            _ => None,
        }
    }

    /// A value out of range for its field, as (field, message).
    pub(super) fn check(&self) -> Result<(), (&'static str, String)> {
        fn max(field: &'static str, v: u64, m: u64) -> Result<(), (&'static str, String)> {
            if v > m {
                return Err((field, format!("{v} is out of range 0..={m}")));
            }
            Ok(())
        }
        match self {
            Layer::Vlan(v) => {
                max("vid", v.vid.into(), 4095)?;
                max("pcp", v.pcp.into(), 7)?;
                if !matches!(v.tpid, 0x8100 | 0x88a8 | 0x9100) {
                    return Err((
                        "tpid",
                        format!("{:#06x}: expected 0x8100, 0x88a8 or 0x9100", v.tpid),
                    ));
                }
            }
            Layer::Ipv4(l) => {
                max("frag_offset", l.frag_offset.into(), 8191)?;
                max("options", l.options.len() as u64, 40)?;
            }
            Layer::Ipv6(l) => max("fl", l.fl.into(), 0xf_ffff)?,
            Layer::Tcp(l) => {
                max("flags", l.flags.into(), 0x1ff)?;
                max("options", l.options.len() as u64, 40)?;
            }
            Layer::Vxlan(l) => max("vni", l.vni.into(), 0xff_ffff)?,
            Layer::Geneve(l) => {
                max("vni", l.vni.into(), 0xff_ffff)?;
                max("options", l.options.len() as u64, 252)?;
            }
            Layer::Mpls(l) => {
                max("label", l.label.into(), 0xf_ffff)?;
                max("tc", l.tc.into(), 7)?;
            }
            Layer::Eth(_) | Layer::Udp(_) | Layer::Gre(_) => {}
        }
        Ok(())
    }
}

/// UDP ports as sent, derived as scapy does from what follows.
pub(super) fn udp_ports(u: &Udp, next: Option<&Layer>) -> (u16, u16) {
    let (s, d) = match next {
        Some(Layer::Vxlan(_)) => (wire::consts::VXLAN_PORT, wire::consts::VXLAN_PORT),
        Some(Layer::Geneve(_)) => (53, wire::consts::GENEVE_PORT),
        _ => (53, 53),
    };
    (u.sport.unwrap_or(s), u.dport.unwrap_or(d))
}

/// True for a UDP layer that carries a tunnel (its ports are not swapped in a reversed stream).
pub(super) fn is_tunnel_udp(layers: &[Layer], i: usize) -> bool {
    matches!(layers.get(i), Some(Layer::Udp(_)))
        && matches!(layers.get(i + 1), Some(Layer::Vxlan(_) | Layer::Geneve(_)))
}
