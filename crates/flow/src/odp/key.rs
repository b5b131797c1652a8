//! Key attributes of the datapath flow text format: `in_port(1),eth(...),ipv4(...)`.
//!
//! OVS prints a flow key by walking the Netlink attributes of the key and mask in the order the
//! datapath produced them (`odp_flow_format()` in `lib/odp-util.c`). The values live in a
//! [`FlowKey`]/[`Mask`] pair here; what the text needs beyond them (which attributes appeared,
//! in which order and VLAN nesting depth, which tunnel sub-fields, how many MPLS labels,
//! `skb_priority`, which the key layout has no field for, and whether the text was the verbose
//! form) is a [`KeyAttrs`].
//!
//! Value/mask printing rules, per field, as OVS does them:
//! * exact mask: `name=value`; partial mask: `name=value/mask`;
//! * all-zero mask: omitted, unless verbose (`dpctl/dump-flows -m`), then `name=value/0`;
//! * in non-verbose output an attribute whose whole mask is zero is omitted, except nested
//!   ones (`tunnel`, `encap`) and an `eth()` placeholder when no `packet_type` came before;
//! * exceptions: `frag` never prints with a zero mask, `mpls` always prints every field, `vlan`
//!   prints `vid`/`pcp` whenever the value or the mask is non-zero.

use std::borrow::Cow;
use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::names::{PortNames, put_port};
use super::parse::{Cursor, PResult, ParseErrorKind, hash_x, put_hex};
use crate::key::{
    EthAddr, FIELDS, FlowKey, FlowWords, GENEVE_OPTS_MAX, GENEVE_OPTS_OFS, Mask, VLAN_CFI, nw_frag,
    tun_flags,
};

/// Deepest `encap(` nesting: the key holds two VLAN tags.
pub const MAX_ENCAP_DEPTH: u8 = 2;

macro_rules! attrs {
    ($($(#[$doc:meta])* $v:ident = $name:literal,)*) => {
        /// A datapath key attribute (`OVS_KEY_ATTR_*`), named as the text format names it.
        /// Declaration order is the order OVS's userspace datapath emits them in.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Attr { $($(#[$doc])* $v,)* }

        impl Attr {
            /// Every attribute, in canonical order.
            pub const ALL: &'static [Attr] = &[$(Attr::$v,)*];

            /// The attribute's name in the text format.
            pub fn name(self) -> &'static str {
                match self { $(Attr::$v => $name,)* }
            }

            /// The attribute called `name`.
            pub fn from_name(name: &str) -> Option<Attr> {
                match name { $($name => Some(Attr::$v),)* _ => None }
            }
        }
    };
}

attrs! {
    /// `skb_priority(0x..)`: the Linux socket buffer priority (QoS queue selection), kept in
    /// [`KeyAttrs::skb_priority`].
    SkbPriority = "skb_priority",
    /// `tunnel(tun_id=..,src=..,dst=..,...)`: the outer headers of a decapsulated packet.
    Tunnel = "tunnel",
    /// `skb_mark(0x..)`: the packet mark (OVS's `pkt_mark`).
    SkbMark = "skb_mark",
    /// `ct_state(+trk+est)`: the connection-tracking state flags, see [`crate::key::ct_state`].
    CtState = "ct_state",
    /// `ct_zone(0x..)`: the conntrack zone the packet was last tracked in.
    CtZone = "ct_zone",
    /// `ct_mark(0x..)`: the 32-bit mark stored with the packet's connection.
    CtMark = "ct_mark",
    /// `ct_label(0x..)`: the 128-bit label stored with the packet's connection.
    CtLabel = "ct_label",
    /// `ct_tuple4(src=,dst=,proto=,tp_src=,tp_dst=)`: the original-direction tuple of the
    /// packet's IPv4 connection.
    CtTuple4 = "ct_tuple4",
    /// `ct_tuple6(...)`: the original-direction tuple of the packet's IPv6 connection.
    CtTuple6 = "ct_tuple6",
    /// `recirc_id(0x..)`: the recirculation id, 0 on a packet's first pass.
    RecircId = "recirc_id",
    /// `dp_hash(0x..)`: the hash a `hash(...)` action computed before recirculation.
    DpHash = "dp_hash",
    /// `in_port(N)`: the datapath port the packet arrived on.
    InPort = "in_port",
    /// `packet_type(ns=,id=)`: what the packet starts with; namespace 1 with an ethertype
    /// for an L3 packet without an Ethernet header.
    PacketType = "packet_type",
    /// `eth(src=,dst=)`: the Ethernet addresses.
    Eth = "eth",
    /// `eth_type(0x..)`: the ethertype, or a tag's TPID before its `encap(`.
    EthType = "eth_type",
    /// `vlan(vid=,pcp=)`: an 802.1Q/802.1ad tag's TCI.
    Vlan = "vlan",
    /// `encap(...)`: the attributes inside a VLAN tag.
    Encap = "encap",
    /// `mpls(label=,tc=,ttl=,bos=)`: the MPLS label stack entries (RFC 3032).
    Mpls = "mpls",
    /// `ipv4(src=,dst=,proto=,tos=,ttl=,frag=)`: the IPv4 header fields.
    Ipv4 = "ipv4",
    /// `ipv6(src=,dst=,label=,proto=,tclass=,hlimit=,frag=)`: the IPv6 header fields.
    Ipv6 = "ipv6",
    /// `arp(sip=,tip=,op=,sha=,tha=)`: the ARP fields (RFC 826).
    Arp = "arp",
    /// `tcp(src=,dst=)`: the TCP ports.
    Tcp = "tcp",
    /// `tcp_flags(syn|ack)`: the TCP flags, see [`TCP_FLAG_NAMES`].
    TcpFlags = "tcp_flags",
    /// `udp(src=,dst=)`: the UDP ports.
    Udp = "udp",
    /// `sctp(src=,dst=)`: the SCTP ports.
    Sctp = "sctp",
    /// `icmp(type=,code=)`: the ICMP type and code.
    Icmp = "icmp",
    /// `icmpv6(type=,code=)`: the ICMPv6 type and code.
    Icmpv6 = "icmpv6",
    /// `nd(target=,sll=,tll=)`: an IPv6 Neighbor Discovery target and link-layer address
    /// options (RFC 4861).
    Nd = "nd",
}

/// One attribute of a key, at a VLAN nesting depth (0 outside any `encap(`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttrItem {
    /// Which attribute.
    pub attr: Attr,
    /// How many `encap(` it sits inside (at most [`MAX_ENCAP_DEPTH`]).
    pub depth: u8,
}

/// Bits of [`KeyAttrs::tun_fields`]: which parts of `tunnel(...)` are present.
pub mod tun_field {
    /// `tun_id=`: the tunnel key (GRE key, VXLAN or GENEVE VNI).
    pub const TUN_ID: u16 = 1 << 0;
    /// `src=`: the outer IPv4 source.
    pub const IPV4_SRC: u16 = 1 << 1;
    /// `dst=`: the outer IPv4 destination.
    pub const IPV4_DST: u16 = 1 << 2;
    /// `ipv6_src=`: the outer IPv6 source.
    pub const IPV6_SRC: u16 = 1 << 3;
    /// `ipv6_dst=`: the outer IPv6 destination.
    pub const IPV6_DST: u16 = 1 << 4;
    /// `tos=`: the outer IPv4 TOS or IPv6 traffic class.
    pub const TOS: u16 = 1 << 5;
    /// `ttl=`: the outer IPv4 TTL or IPv6 hop limit.
    pub const TTL: u16 = 1 << 6;
    /// `tp_src=`: the outer UDP source port.
    pub const TP_SRC: u16 = 1 << 7;
    /// `tp_dst=`: the outer UDP destination port.
    pub const TP_DST: u16 = 1 << 8;
    /// `vxlan(gbp(id=,flags=))`: the VXLAN Group Based Policy extension.
    pub const VXLAN: u16 = 1 << 9;
    /// `geneve(...)`: the GENEVE options.
    pub const GENEVE: u16 = 1 << 10;
    /// `flags(-df+csum+key)`: the tunnel flags, see [`crate::key::tun_flags`].
    pub const FLAGS: u16 = 1 << 11;
}

/// What the text form of a key needs beyond its [`FlowKey`] and [`Mask`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyAttrs {
    /// The attributes, in print order. An [`Attr::Encap`] at depth `d` is followed by the
    /// attributes inside it, at depth `d + 1`.
    pub items: Vec<AttrItem>,
    /// Which `tunnel(...)` sub-fields are present ([`tun_field`] bits).
    pub tun_fields: u16,
    /// Number of label stack entries in `mpls(...)` (1 to 3).
    pub mpls_lses: u8,
    /// `skb_priority` value (the key layout has no field for it).
    pub skb_priority: u32,
    /// `skb_priority` mask.
    pub skb_priority_mask: u32,
    /// Print every field, with zero masks (`dpctl/dump-flows -m`).
    pub verbose: bool,
}

impl KeyAttrs {
    /// Depth-0 attributes in the given order.
    pub fn from_attrs(attrs: &[Attr]) -> Self {
        let mut a = KeyAttrs::default();
        for &attr in attrs {
            a.push(attr, 0);
        }
        a
    }

    /// Appends an attribute at `depth`.
    pub fn push(&mut self, attr: Attr, depth: u8) -> &mut Self {
        self.items.push(AttrItem { attr, depth });
        if attr == Attr::Mpls && self.mpls_lses == 0 {
            self.mpls_lses = 1;
        }
        self
    }

    /// Whether `attr` appears at any depth.
    pub fn contains(&self, attr: Attr) -> bool {
        self.items.iter().any(|i| i.attr == attr)
    }

    fn has_at(&self, attr: Attr, depth: u8) -> bool {
        self.items
            .iter()
            .any(|i| i.attr == attr && i.depth == depth)
    }

    /// Whether `depth` is a VLAN tag (has `vlan(` or `encap(`), so that its `eth_type(` is the
    /// tag's TPID rather than the packet's ethertype.
    fn is_tagged(&self, depth: u8) -> bool {
        depth < MAX_ENCAP_DEPTH
            && (self.has_at(Attr::Vlan, depth) || self.has_at(Attr::Encap, depth))
    }
}

/// A parsed key: values, mask and the text-form memory. What `dpctl/add-flow` takes as its
/// first argument, and what a `set(...)` action carries (with one attribute).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DpKey {
    /// The field values, unmasked.
    pub key: FlowKey,
    /// Which bits of each field matter: exact for `name=value`, the given mask for
    /// `name=value/mask`, zero for a field left out.
    pub mask: Mask,
    /// Which attributes appeared, in which order, and the rest of the text form's memory.
    pub attrs: KeyAttrs,
}

// ---------------------------------------------------------------------------------------------
// Field descriptors.

/// How a field's value and mask print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fmt {
    /// Decimal value, `%#x` mask (OVS `format_u8u`, `format_be16`).
    Dec,
    /// `%#x` value and mask (`format_u8x`, `format_be16x`, single u32 attributes).
    Hex,
    /// `0x%x` value, `%#x` mask (`format_be64`).
    Hex0x,
    Ipv4,
    Ipv6,
    Eth,
    /// IPv6 flow label: `%#x`, exact when the low 20 bits are.
    Label,
    /// `no|first|later`, never printed with a zero mask.
    Frag,
}

#[derive(Clone, Copy, Debug)]
struct Field {
    name: &'static str,
    ofs: usize,
    len: usize,
    fmt: Fmt,
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Byte offset of a key field, resolved at compile time (a typo fails the build).
const fn ofs(name: &str) -> usize {
    let mut i = 0;
    while i < FIELDS.len() {
        if str_eq(FIELDS[i].name, name) {
            return FIELDS[i].offset;
        }
        i += 1;
    }
    panic!("unknown key field")
}

const fn f(name: &'static str, ofs: usize, len: usize, fmt: Fmt) -> Field {
    Field {
        name,
        ofs,
        len,
        fmt,
    }
}

const ETH_FIELDS: &[Field] = &[
    f("src", ofs("eth_src"), 6, Fmt::Eth),
    f("dst", ofs("eth_dst"), 6, Fmt::Eth),
];
const IPV4_FIELDS: &[Field] = &[
    f("src", ofs("nw_src"), 4, Fmt::Ipv4),
    f("dst", ofs("nw_dst"), 4, Fmt::Ipv4),
    f("proto", ofs("nw_proto"), 1, Fmt::Dec),
    f("tos", ofs("nw_tos"), 1, Fmt::Hex),
    f("ttl", ofs("nw_ttl"), 1, Fmt::Dec),
    f("frag", ofs("nw_frag"), 1, Fmt::Frag),
];
const IPV6_FIELDS: &[Field] = &[
    f("src", ofs("ipv6_src"), 16, Fmt::Ipv6),
    f("dst", ofs("ipv6_dst"), 16, Fmt::Ipv6),
    f("label", ofs("ipv6_label"), 4, Fmt::Label),
    f("proto", ofs("nw_proto"), 1, Fmt::Dec),
    f("tclass", ofs("nw_tos"), 1, Fmt::Hex),
    f("hlimit", ofs("nw_ttl"), 1, Fmt::Dec),
    f("frag", ofs("nw_frag"), 1, Fmt::Frag),
];
const PORT_FIELDS: &[Field] = &[
    f("src", ofs("tp_src"), 2, Fmt::Dec),
    f("dst", ofs("tp_dst"), 2, Fmt::Dec),
];
// ICMP type and code are 8-bit; the key keeps them in the low byte of tp_src/tp_dst.
const ICMP_FIELDS: &[Field] = &[
    f("type", ofs("tp_src") + 1, 1, Fmt::Dec),
    f("code", ofs("tp_dst") + 1, 1, Fmt::Dec),
];
// The key keeps the low 8 bits of the ARP opcode in nw_proto.
const ARP_FIELDS: &[Field] = &[
    f("sip", ofs("nw_src"), 4, Fmt::Ipv4),
    f("tip", ofs("nw_dst"), 4, Fmt::Ipv4),
    f("op", ofs("nw_proto"), 1, Fmt::Dec),
    f("sha", ofs("arp_sha"), 6, Fmt::Eth),
    f("tha", ofs("arp_tha"), 6, Fmt::Eth),
];
const ND_FIELDS: &[Field] = &[
    f("target", ofs("nd_target"), 16, Fmt::Ipv6),
    f("sll", ofs("arp_sha"), 6, Fmt::Eth),
    f("tll", ofs("arp_tha"), 6, Fmt::Eth),
];
const CT_TUPLE4_FIELDS: &[Field] = &[
    f("src", ofs("ct_ipv6_src"), 4, Fmt::Ipv4),
    f("dst", ofs("ct_ipv6_dst"), 4, Fmt::Ipv4),
    f("proto", ofs("ct_nw_proto"), 1, Fmt::Dec),
    f("tp_src", ofs("ct_tp_src"), 2, Fmt::Dec),
    f("tp_dst", ofs("ct_tp_dst"), 2, Fmt::Dec),
];
// OVS prints `src_port`/`dst_port` here but parses `tp_src`/`tp_dst`; both are accepted.
const CT_TUPLE6_FIELDS: &[Field] = &[
    f("src", ofs("ct_ipv6_src"), 16, Fmt::Ipv6),
    f("dst", ofs("ct_ipv6_dst"), 16, Fmt::Ipv6),
    f("proto", ofs("ct_nw_proto"), 1, Fmt::Dec),
    f("src_port", ofs("ct_tp_src"), 2, Fmt::Dec),
    f("dst_port", ofs("ct_tp_dst"), 2, Fmt::Dec),
];
const PACKET_TYPE_FIELDS: &[Field] = &[
    f("ns", ofs("packet_type"), 2, Fmt::Dec),
    f("id", ofs("packet_type") + 2, 2, Fmt::Hex),
];
const GBP_FIELDS: &[Field] = &[
    f("id", ofs("tun_gbp_id"), 2, Fmt::Dec),
    f("flags", ofs("tun_gbp_flags"), 1, Fmt::Hex),
];
/// Scalar `tunnel(...)` fields in print order, with their presence bit.
const TUN_FIELDS: &[(u16, Field)] = &[
    (tun_field::TUN_ID, f("tun_id", ofs("tun_id"), 8, Fmt::Hex0x)),
    (
        tun_field::IPV4_SRC,
        f("src", ofs("tun_ipv4_src"), 4, Fmt::Ipv4),
    ),
    (
        tun_field::IPV4_DST,
        f("dst", ofs("tun_ipv4_dst"), 4, Fmt::Ipv4),
    ),
    (
        tun_field::IPV6_SRC,
        f("ipv6_src", ofs("tun_ipv6_src"), 16, Fmt::Ipv6),
    ),
    (
        tun_field::IPV6_DST,
        f("ipv6_dst", ofs("tun_ipv6_dst"), 16, Fmt::Ipv6),
    ),
    (tun_field::TOS, f("tos", ofs("tun_tos"), 1, Fmt::Hex)),
    (tun_field::TTL, f("ttl", ofs("tun_ttl"), 1, Fmt::Dec)),
    (
        tun_field::TP_SRC,
        f("tp_src", ofs("tun_tp_src"), 2, Fmt::Dec),
    ),
    (
        tun_field::TP_DST,
        f("tp_dst", ofs("tun_tp_dst"), 2, Fmt::Dec),
    ),
];

const SKB_MARK: Field = f("", ofs("pkt_mark"), 4, Fmt::Hex);
const RECIRC_ID: Field = f("", ofs("recirc_id"), 4, Fmt::Hex);
const DP_HASH: Field = f("", ofs("dp_hash"), 4, Fmt::Hex);
const CT_MARK: Field = f("", ofs("ct_mark"), 4, Fmt::Hex);
const CT_ZONE: Field = f("", ofs("ct_zone"), 2, Fmt::Hex);
const CT_STATE: Field = f("", ofs("ct_state"), 1, Fmt::Hex);
const CT_LABEL: Field = f("", ofs("ct_label"), 16, Fmt::Hex);
const IN_PORT: Field = f("", ofs("in_port"), 4, Fmt::Dec);
const TCP_FLAGS: Field = f("", ofs("tcp_flags"), 2, Fmt::Hex);
const ETH_TYPE: Field = f("", ofs("eth_type"), 2, Fmt::Hex);
const MPLS_LSE0: usize = ofs("mpls_lse0");

/// The fields of an attribute that is a plain list of `name=value` fields.
fn field_list(attr: Attr) -> Option<(&'static [Field], &'static str)> {
    Some(match attr {
        Attr::Eth => (ETH_FIELDS, "src, dst"),
        Attr::Ipv4 => (IPV4_FIELDS, "src, dst, proto, tos, ttl, frag"),
        Attr::Ipv6 => (IPV6_FIELDS, "src, dst, label, proto, tclass, hlimit, frag"),
        Attr::Tcp | Attr::Udp | Attr::Sctp => (PORT_FIELDS, "src, dst"),
        Attr::Icmp | Attr::Icmpv6 => (ICMP_FIELDS, "type, code"),
        Attr::Arp => (ARP_FIELDS, "sip, tip, op, sha, tha"),
        Attr::Nd => (ND_FIELDS, "target, sll, tll"),
        Attr::CtTuple4 => (CT_TUPLE4_FIELDS, "src, dst, proto, tp_src, tp_dst"),
        Attr::CtTuple6 => (CT_TUPLE6_FIELDS, "src, dst, proto, tp_src, tp_dst"),
        Attr::PacketType => (PACKET_TYPE_FIELDS, "ns, id"),
        _ => return None,
    })
}

/// The single field of a one-value attribute (`recirc_id(0x1)`).
fn single_field(attr: Attr) -> Option<Field> {
    Some(match attr {
        Attr::SkbMark => SKB_MARK,
        Attr::RecircId => RECIRC_ID,
        Attr::DpHash => DP_HASH,
        Attr::CtMark => CT_MARK,
        Attr::CtZone => CT_ZONE,
        _ => return None,
    })
}

/// VLAN slot `depth`: (tci offset, tpid offset).
fn vlan_slot(depth: u8) -> (usize, usize) {
    if depth == 0 {
        (ofs("vlan_tci"), ofs("vlan_tpid"))
    } else {
        (ofs("vlan2_tci"), ofs("vlan2_tpid"))
    }
}

fn read(w: &FlowWords, ofs: usize, len: usize) -> [u8; 16] {
    let mut b = [0u8; 16];
    w.bytes_at(ofs, &mut b[..len.min(16)]);
    b
}

fn uint(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |a, &x| (a << 8) | x as u128)
}

fn read_uint(w: &FlowWords, ofs: usize, len: usize) -> u128 {
    uint(&read(w, ofs, len)[..len])
}

fn write_uint(w: &mut FlowWords, ofs: usize, len: usize, v: u128) {
    let be = v.to_be_bytes();
    w.set_bytes_at(ofs, &be[16 - len..]);
}

fn max_of(len: usize) -> u128 {
    if len >= 16 {
        u128::MAX
    } else {
        (1u128 << (8 * len)) - 1
    }
}

fn mask_is_empty(fd: &Field, m: &[u8]) -> bool {
    m[..fd.len].iter().all(|&b| b == 0)
}

fn mask_is_full(fd: &Field, m: &[u8]) -> bool {
    match fd.fmt {
        Fmt::Label => uint(&m[..4]) & 0xfffff == 0xfffff,
        Fmt::Frag => m[0] != 0,
        _ => m[..fd.len].iter().all(|&b| b == 0xff),
    }
}

fn frag_name(v: u8) -> &'static str {
    if v & nw_frag::ANY == 0 {
        "no"
    } else if v & nw_frag::LATER != 0 {
        "later"
    } else {
        "first"
    }
}

fn put_value(out: &mut String, fmt: Fmt, b: &[u8], len: usize, is_mask: bool) {
    match fmt {
        Fmt::Dec if !is_mask => {
            let _ = write!(out, "{}", uint(&b[..len]));
        }
        Fmt::Dec | Fmt::Hex | Fmt::Label => hash_x(out, uint(&b[..len])),
        Fmt::Hex0x if !is_mask => {
            let _ = write!(out, "{:#x}", uint(&b[..len]));
        }
        Fmt::Hex0x => hash_x(out, uint(&b[..len])),
        Fmt::Ipv4 => {
            let _ = write!(out, "{}", Ipv4Addr::new(b[0], b[1], b[2], b[3]));
        }
        Fmt::Ipv6 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[..16]);
            let _ = write!(out, "{}", Ipv6Addr::from(a));
        }
        Fmt::Eth => {
            let _ = write!(out, "{}", EthAddr([b[0], b[1], b[2], b[3], b[4], b[5]]));
        }
        Fmt::Frag => out.push_str(frag_name(b[0])),
    }
}

/// OVS's `format_*()` for one field: `name=value[/mask],` or nothing.
fn put_field(out: &mut String, fd: &Field, k: &FlowWords, m: Option<&FlowWords>, verbose: bool) {
    let kb = read(k, fd.ofs, fd.len);
    let mb = m.map(|m| read(m, fd.ofs, fd.len));
    let empty = mb.as_ref().is_some_and(|mb| mask_is_empty(fd, mb));
    if fd.fmt == Fmt::Frag {
        if !empty {
            let _ = write!(out, "{}={},", fd.name, frag_name(kb[0]));
        }
        return;
    }
    if verbose || !empty {
        out.push_str(fd.name);
        out.push('=');
        put_value(out, fd.fmt, &kb, fd.len, false);
        if let Some(mb) = mb.filter(|mb| !mask_is_full(fd, mb)) {
            out.push('/');
            put_value(out, fd.fmt, &mb, fd.len, true);
        }
        out.push(',');
    }
}

fn chomp(out: &mut String, c: char) {
    if out.ends_with(c) {
        out.pop();
    }
}

// ---------------------------------------------------------------------------------------------
// Flags (`ct_state(+new+trk)`, `tcp_flags(syn|ack)`, tunnel `flags(-df+csum+key)`).

/// (bit, name) in OVS's print order (lowest bit first).
pub type FlagTable = &'static [(u32, &'static str)];

/// Connection-state flag names (`ct_state_to_string()`).
pub const CT_STATE_FLAGS: FlagTable = &[
    (0x01, "new"),
    (0x02, "est"),
    (0x04, "rel"),
    (0x08, "rpl"),
    (0x10, "inv"),
    (0x20, "trk"),
    (0x40, "snat"),
    (0x80, "dnat"),
];
/// TCP flag names (`packet_tcp_flag_to_string()`).
pub const TCP_FLAG_NAMES: FlagTable = &[
    (0x001, "fin"),
    (0x002, "syn"),
    (0x004, "rst"),
    (0x008, "psh"),
    (0x010, "ack"),
    (0x020, "urg"),
    (0x040, "ece"),
    (0x080, "cwr"),
    (0x100, "ns"),
    (0x200, "[200]"),
    (0x400, "[400]"),
    (0x800, "[800]"),
];
/// Tunnel flags with OVS's bit values (`FLOW_TNL_F_*`), which differ from [`tun_flags`].
pub const TUN_FLAG_NAMES: FlagTable = &[(0x1, "oam"), (0x2, "df"), (0x4, "csum"), (0x8, "key")];
const TUN_FLAG_MAP: [(u32, u8); 4] = [
    (0x1, tun_flags::OAM),
    (0x2, tun_flags::DONT_FRAGMENT),
    (0x4, tun_flags::CSUM),
    (0x8, tun_flags::KEY),
];

fn tun_flags_to_ovs(v: u8) -> u32 {
    TUN_FLAG_MAP
        .iter()
        .filter(|(_, ours)| v & ours != 0)
        .fold(0, |a, (o, _)| a | o)
}

fn tun_flags_from_ovs(v: u32) -> u8 {
    TUN_FLAG_MAP
        .iter()
        .filter(|(o, _)| v & o != 0)
        .fold(0, |a, (_, ours)| a | ours)
}

fn flag_name(t: FlagTable, bit: u32) -> Option<&'static str> {
    t.iter().find(|(b, _)| *b == bit).map(|(_, n)| *n)
}

/// OVS `format_flags(.., '|')`.
fn put_flags(out: &mut String, t: FlagTable, flags: u32) {
    if flags == 0 {
        out.push('0');
        return;
    }
    let mut bad = 0;
    let mut f = flags;
    while f != 0 {
        let bit = f & f.wrapping_neg();
        match flag_name(t, bit) {
            Some(n) => {
                out.push_str(n);
                out.push('|');
            }
            None => bad |= bit,
        }
        f &= !bit;
    }
    if bad != 0 {
        let _ = write!(out, "{bad:#x}|");
    }
    chomp(out, '|');
}

/// OVS `format_flags_masked()`.
fn put_flags_masked(out: &mut String, t: FlagTable, flags: u32, mask: u32, max: u32) {
    if mask == max {
        put_flags(out, t, flags);
    } else if mask == 0 {
        out.push_str("0/0");
    } else {
        let mut m = mask;
        while m != 0 {
            let bit = m & m.wrapping_neg();
            out.push(if flags & bit != 0 { '+' } else { '-' });
            out.push_str(flag_name(t, bit).unwrap_or("[Unknown]"));
            m &= !bit;
        }
    }
}

/// Parsed flags: value, mask (`u32::MAX` for the unmasked forms) and whether the numeric
/// `value/mask` form was used.
struct Flags {
    value: u32,
    mask: u32,
    numeric: bool,
}

/// OVS `parse_flags()` up to (not including) the closing ')': `V/M`, `+a-b`, or `a|b`.
fn parse_flags(
    c: &mut Cursor<'_>,
    t: FlagTable,
    allowed: u32,
    what: &'static str,
) -> PResult<Flags> {
    let start = c.pos;
    if c.peek().is_some_and(|b| b.is_ascii_digit()) {
        let v = c.u32(what)?;
        let (value, mask) = if c.eat(b'/') {
            (v, c.u32(what)?)
        } else {
            (v, u32::MAX)
        };
        if value & !allowed != 0 || (mask != u32::MAX && mask & !allowed != 0) {
            return Err(c.invalid_at(start, format!("unknown {what} flag bits")));
        }
        return Ok(Flags {
            value,
            mask,
            numeric: true,
        });
    }
    let name_at = |c: &mut Cursor<'_>| -> Option<u32> {
        // Longest name first would matter only if one name prefixed another followed by a
        // delimiter; OVS's names do not, so first match wins, as in OVS.
        for &(bit, name) in t {
            let r = c.rest().as_bytes();
            if r.starts_with(name.as_bytes())
                && matches!(r.get(name.len()), Some(b'+' | b'-' | b'|' | b')') | None)
            {
                c.pos += name.len();
                return Some(bit);
            }
        }
        None
    };
    if matches!(c.peek(), Some(b'+' | b'-')) {
        let (mut value, mut mask) = (0, 0);
        while let Some(sign @ (b'+' | b'-')) = c.peek() {
            c.pos += 1;
            let at = c.pos;
            let bit = name_at(c).ok_or_else(|| c.expected(format!("{what} flag name")))?;
            if mask & bit != 0 {
                return Err(c.invalid_at(at, format!("{what} flag given twice")));
            }
            if bit & allowed == 0 {
                return Err(c.invalid_at(at, format!("{what} flag not allowed here")));
            }
            mask |= bit;
            if sign == b'+' {
                value |= bit;
            }
        }
        return Ok(Flags {
            value,
            mask,
            numeric: false,
        });
    }
    let mut value = 0;
    while c.peek() != Some(b')') && !c.at_end() {
        let at = c.pos;
        let bit = if c.peek().is_some_and(|b| b.is_ascii_digit()) {
            let v = c.u32(what)?;
            if v & !allowed != 0 {
                return Err(c.invalid_at(at, format!("unknown {what} flag bits")));
            }
            v
        } else {
            name_at(c).ok_or_else(|| c.expected(format!("{what} flag name, '+' or '-'")))?
        };
        value |= bit;
        if !c.eat(b'|') {
            break;
        }
    }
    Ok(Flags {
        value,
        mask: u32::MAX,
        numeric: false,
    })
}

// ---------------------------------------------------------------------------------------------
// Parsing.

/// Parser state for one key (or the one attribute of a `set(...)` action).
pub(crate) struct KeyParser<'n> {
    pub(crate) out: DpKey,
    names: &'n mut PortNames,
    /// Saw something only the verbose form prints (an explicit zero mask, numeric ct_state).
    evidence: bool,
    /// `eth_type(...)` values by depth: whether each is a TPID is known only once the whole
    /// depth is parsed.
    eth_types: Vec<(u8, u16, u16)>,
}

impl<'n> KeyParser<'n> {
    pub(crate) fn new(names: &'n mut PortNames) -> Self {
        KeyParser {
            out: DpKey::default(),
            names,
            evidence: false,
            eth_types: Vec::new(),
        }
    }

    /// Completes the key: resolves `eth_type`s and decides whether the text was verbose.
    pub(crate) fn finish(mut self) -> DpKey {
        for &(depth, v, m) in &self.eth_types {
            let ofs = if self.out.attrs.is_tagged(depth) {
                vlan_slot(depth).1
            } else {
                ETH_TYPE.ofs
            };
            write_uint(&mut self.out.key, ofs, 2, v.into());
            write_uint(&mut self.out.mask, ofs, 2, m.into());
        }
        // The non-verbose form omits an attribute whose whole mask is zero (nested ones and
        // eth() aside), so such an attribute in the text is itself evidence of the verbose form:
        // `mpls(label=0/0x0,tc=0/0,...)` says so even though mpls fields print their masks.
        if !self.evidence {
            let fmt = KeyFmt {
                key: &self.out.key,
                mask: Some(&self.out.mask),
                attrs: &self.out.attrs,
                names: None,
                verbose: false,
            };
            self.evidence = self.out.attrs.items.iter().any(|it| {
                !matches!(it.attr, Attr::Tunnel | Attr::Encap | Attr::Eth)
                    && fmt.is_wildcard(it.attr, it.depth)
            });
        }
        self.out.attrs.verbose = self.evidence;
        self.out
    }

    /// Parses comma-separated attributes at depth 0 until the end of the key: the end of the
    /// input, or `, word:` (the statistics and actions that follow in a dump line).
    pub(crate) fn parse_top(&mut self, c: &mut Cursor<'_>) -> PResult<()> {
        c.skip_spaces();
        // An empty key, which OVS's `odp_flow_from_string()` accepts too: a key whose every
        // attribute is wildcarded (`udp()`) prints as nothing, and a flow line then starts
        // with `, actions:`.
        if c.at_end() || c.peek() == Some(b',') {
            return Ok(());
        }
        loop {
            self.parse_attr(c, 0)?;
            let before = c.pos;
            if !c.eat(b',') {
                return Ok(());
            }
            c.skip_spaces();
            let w = c.pos;
            let word_len = c
                .rest()
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
                .count();
            if c.peek_at(word_len) == Some(b':') && word_len > 0 {
                c.pos = before;
                return Ok(());
            }
            c.pos = w;
        }
    }

    /// Parses one `name(...)` attribute at `depth`.
    pub(crate) fn parse_attr(&mut self, c: &mut Cursor<'_>, depth: u8) -> PResult<()> {
        let start = c.pos;
        let name = c.word();
        if name.is_empty() {
            return Err(c.expected("key attribute name"));
        }
        let Some(attr) = Attr::from_name(name) else {
            return Err(c.err_at(start, ParseErrorKind::UnknownAttr(name.to_owned())));
        };
        if !c.eat(b'(') {
            return Err(c.expected(format!("'(' after {name}")));
        }
        if matches!(attr, Attr::Vlan | Attr::Encap) && depth >= MAX_ENCAP_DEPTH {
            return Err(c.invalid_at(start, "more than two VLAN tags"));
        }
        let per_depth = matches!(attr, Attr::EthType | Attr::Vlan | Attr::Encap);
        let dup = self
            .out
            .attrs
            .items
            .iter()
            .any(|i| i.attr == attr && (!per_depth || i.depth == depth));
        if dup {
            return Err(c.invalid_at(start, format!("duplicate attribute {name}")));
        }
        if let Some(other) = self
            .out
            .attrs
            .items
            .iter()
            .find(|i| shares_storage(i.attr, attr))
        {
            let msg = format!(
                "{name} conflicts with {} (they share key fields)",
                other.attr.name()
            );
            return Err(c.invalid_at(start, msg));
        }
        self.out.attrs.push(attr, depth);
        if let Some((fields, list)) = field_list(attr) {
            return self.parse_fields(c, attr, fields, list);
        }
        if let Some(fd) = single_field(attr) {
            let (v, m) = self.value_mask(c, attr.name(), fd.len)?;
            write_uint(&mut self.out.key, fd.ofs, fd.len, v);
            write_uint(&mut self.out.mask, fd.ofs, fd.len, m);
            return c.expect(b')', "')'");
        }
        match attr {
            Attr::SkbPriority => {
                let (v, m) = self.value_mask(c, attr.name(), 4)?;
                self.out.attrs.skb_priority = v as u32;
                self.out.attrs.skb_priority_mask = m as u32;
                c.expect(b')', "')'")
            }
            Attr::CtLabel => {
                let mut v = [0u8; 16];
                c.int_bytes(&mut v, "ct_label")?;
                let mut m = [0xffu8; 16];
                if c.eat(b'/') {
                    c.int_bytes(&mut m, "ct_label mask")?;
                    self.note_mask(m.iter().all(|&b| b == 0));
                }
                self.out.key.set_bytes_at(CT_LABEL.ofs, &v);
                self.out.mask.set_bytes_at(CT_LABEL.ofs, &m);
                c.expect(b')', "')'")
            }
            Attr::CtState => {
                let fl = parse_flags(c, CT_STATE_FLAGS, 0xff, "ct_state")?;
                if fl.numeric {
                    self.evidence = true;
                }
                self.out.key.set_ct_state(fl.value as u8);
                self.out.mask.set_ct_state(fl.mask as u8);
                c.expect(b')', "')' after ct_state flags")
            }
            Attr::TcpFlags => {
                let fl = parse_flags(c, TCP_FLAG_NAMES, 0x0fff, "tcp_flags")?;
                if fl.numeric && fl.mask == 0 {
                    self.evidence = true;
                }
                self.out.key.set_tcp_flags(fl.value as u16);
                self.out.mask.set_tcp_flags(fl.mask as u16);
                c.expect(b')', "')' after tcp_flags")
            }
            Attr::InPort => {
                let (v, m) = if c.peek().is_some_and(|b| b.is_ascii_digit()) {
                    self.value_mask(c, "in_port", 4)?
                } else {
                    let at = c.pos;
                    let n = c.name_token();
                    if n.is_empty() {
                        return Err(
                            c.err_at(at, ParseErrorKind::Expected("port number or name".into()))
                        );
                    }
                    (self.names.number_or_allocate(n).into(), u32::MAX.into())
                };
                write_uint(&mut self.out.key, IN_PORT.ofs, 4, v);
                write_uint(&mut self.out.mask, IN_PORT.ofs, 4, m);
                c.expect(b')', "')' after in_port")
            }
            Attr::EthType => {
                let (v, m) = self.value_mask(c, "eth_type", 2)?;
                self.eth_types.push((depth, v as u16, m as u16));
                c.expect(b')', "')' after eth_type")
            }
            Attr::Vlan => self.parse_vlan(c, depth),
            Attr::Encap => self.parse_encap(c, depth),
            Attr::Mpls => self.parse_mpls(c),
            Attr::Tunnel => self.parse_tunnel(c),
            _ => Err(c.err_at(start, ParseErrorKind::UnknownAttr(name.to_owned()))),
        }
    }

    fn note_mask(&mut self, zero: bool) {
        if zero {
            self.evidence = true;
        }
    }

    /// `V[/M]` as integers of `len` bytes; the mask defaults to all ones.
    fn value_mask(
        &mut self,
        c: &mut Cursor<'_>,
        what: &'static str,
        len: usize,
    ) -> PResult<(u128, u128)> {
        let max = max_of(len);
        let v = c.uint(max, what)?;
        if c.eat(b'/') {
            let m = c.uint(max, what)?;
            self.note_mask(m == 0);
            Ok((v, m))
        } else {
            Ok((v, max))
        }
    }

    /// One field value (and optional mask) in `fd`'s format, stored into the key and mask.
    fn parse_field_value(&mut self, c: &mut Cursor<'_>, fd: &Field) -> PResult<()> {
        let mut kb = [0u8; 16];
        let mut mb = [0u8; 16];
        let explicit;
        match fd.fmt {
            Fmt::Dec | Fmt::Hex | Fmt::Hex0x | Fmt::Label => {
                let max = if fd.fmt == Fmt::Label {
                    0xfffff
                } else {
                    max_of(fd.len)
                };
                let v = c.uint(max, fd.name)?;
                let m = if c.eat(b'/') {
                    Some(c.uint(max, fd.name)?)
                } else {
                    None
                };
                explicit = m.is_some();
                let kv = v.to_be_bytes();
                let mv = m.unwrap_or(max).to_be_bytes();
                kb[..fd.len].copy_from_slice(&kv[16 - fd.len..]);
                mb[..fd.len].copy_from_slice(&mv[16 - fd.len..]);
            }
            Fmt::Ipv4 => {
                kb[..4].copy_from_slice(&c.ipv4()?.octets());
                explicit = c.eat(b'/');
                let m = if explicit {
                    c.ipv4()?
                } else {
                    Ipv4Addr::BROADCAST
                };
                mb[..4].copy_from_slice(&m.octets());
            }
            Fmt::Ipv6 => {
                kb.copy_from_slice(&c.ipv6()?.octets());
                explicit = c.eat(b'/');
                mb = if explicit {
                    c.ipv6()?.octets()
                } else {
                    [0xff; 16]
                };
            }
            Fmt::Eth => {
                kb[..6].copy_from_slice(&c.mac()?.0);
                explicit = c.eat(b'/');
                let m = if explicit {
                    c.mac()?
                } else {
                    EthAddr::BROADCAST
                };
                mb[..6].copy_from_slice(&m.0);
            }
            Fmt::Frag => {
                let w = c.word();
                kb[0] = match w {
                    "no" => 0,
                    "first" => nw_frag::ANY,
                    "later" => nw_frag::ANY | nw_frag::LATER,
                    _ => {
                        c.pos -= w.len();
                        return Err(c.expected("frag type (no, first, later)"));
                    }
                };
                mb[0] = nw_frag::MASK;
                explicit = false;
            }
        }
        if explicit {
            self.note_mask(mb[..fd.len].iter().all(|&b| b == 0));
        }
        self.out.key.set_bytes_at(fd.ofs, &kb[..fd.len]);
        self.out.mask.set_bytes_at(fd.ofs, &mb[..fd.len]);
        Ok(())
    }

    /// `name=value` fields up to ')'. Fields not given are wildcarded.
    fn parse_fields(
        &mut self,
        c: &mut Cursor<'_>,
        attr: Attr,
        fields: &[Field],
        list: &'static str,
    ) -> PResult<()> {
        let mut seen = 0u32;
        if c.eat(b')') {
            return Ok(());
        }
        loop {
            let at = c.pos;
            let w = c.word();
            let idx = fields
                .iter()
                .position(|fd| fd.name == w)
                .or(match (attr, w) {
                    (Attr::CtTuple6, "tp_src") => Some(3),
                    (Attr::CtTuple6, "tp_dst") => Some(4),
                    _ => None,
                });
            let Some(idx) = idx.filter(|_| c.peek() == Some(b'=')) else {
                c.pos = at;
                return Err(c.expected(format!("{} field ({list})", attr.name())));
            };
            c.pos += 1;
            if seen & (1 << idx) != 0 {
                return Err(c.invalid_at(at, format!("duplicate field {w}")));
            }
            seen |= 1 << idx;
            self.parse_field_value(c, &fields[idx])?;
            if c.eat(b')') {
                return Ok(());
            }
            if !c.eat(b',') {
                return Err(c.expected(format!("',' or ')' after {} field", attr.name())));
            }
        }
    }

    fn parse_vlan(&mut self, c: &mut Cursor<'_>, depth: u8) -> PResult<()> {
        let (mut tci, mut mask) = (VLAN_CFI, VLAN_CFI);
        let mut seen = 0u8;
        if !c.eat(b')') {
            loop {
                let at = c.pos;
                let w = c.word();
                let (bit, bits, shift, what) = match w {
                    "vid" => (1, 12, 0, "vid"),
                    "pcp" => (2, 3, 13, "pcp"),
                    "cfi" => (4, 1, 12, "cfi"),
                    _ => {
                        c.pos = at;
                        return Err(c.expected("vlan field (vid, pcp, cfi)"));
                    }
                };
                if !c.eat(b'=') {
                    return Err(c.expected("'=' after vlan field name"));
                }
                if seen & bit != 0 {
                    return Err(c.invalid_at(at, format!("duplicate field {w}")));
                }
                seen |= bit;
                let max = (1u128 << bits) - 1;
                let v = c.uint(max, what)? as u16;
                let field = (max as u16) << shift;
                tci = (tci & !field) | (v << shift);
                if c.eat(b'/') {
                    let m = c.uint(max, what)? as u16;
                    // A zero mask on a zero value is something only the verbose form prints.
                    self.note_mask(m == 0 && v == 0 && w != "cfi");
                    mask = (mask & !field) | (m << shift);
                } else {
                    mask |= field;
                }
                if c.eat(b')') {
                    break;
                }
                if !c.eat(b',') {
                    return Err(c.expected("',' or ')' after vlan field"));
                }
            }
        }
        let (tci_ofs, _) = vlan_slot(depth);
        write_uint(&mut self.out.key, tci_ofs, 2, tci.into());
        write_uint(&mut self.out.mask, tci_ofs, 2, mask.into());
        Ok(())
    }

    fn parse_encap(&mut self, c: &mut Cursor<'_>, depth: u8) -> PResult<()> {
        if depth >= MAX_ENCAP_DEPTH {
            return Err(c.err(ParseErrorKind::TooDeep(MAX_ENCAP_DEPTH as usize)));
        }
        c.skip_spaces();
        if c.eat(b')') {
            return Ok(());
        }
        loop {
            self.parse_attr(c, depth + 1)?;
            if c.eat(b')') {
                return Ok(());
            }
            if !c.eat(b',') {
                return Err(c.expected("',' or ')' in encap"));
            }
            c.skip_spaces();
        }
    }

    fn parse_mpls(&mut self, c: &mut Cursor<'_>) -> PResult<()> {
        let mut lses = [(0u32, 0u32); 3];
        let mut idx = 0usize;
        let mut seen = 0u8;
        if !c.eat(b')') {
            loop {
                let at = c.pos;
                let w = c.word();
                let (bit, bits, shift) = match w {
                    "label" => (1u8, 20u32, 12u32),
                    "tc" => (2, 3, 9),
                    "ttl" => (4, 8, 0),
                    "bos" => (8, 1, 8),
                    _ => {
                        c.pos = at;
                        return Err(c.expected("mpls field (label, tc, ttl, bos)"));
                    }
                };
                if !c.eat(b'=') {
                    return Err(c.expected("'=' after mpls field name"));
                }
                // A field seen again starts the next label stack entry.
                if seen & bit != 0 {
                    seen = 0;
                    idx += 1;
                    if idx == lses.len() {
                        return Err(c.invalid_at(at, "more than three MPLS labels"));
                    }
                }
                seen |= bit;
                let max = (1u128 << bits) - 1;
                let v = c.uint(max, w_static(w))? as u32;
                let field = (max as u32) << shift;
                lses[idx].0 |= v << shift;
                if c.eat(b'/') {
                    let m = c.uint(max, w_static(w))? as u32;
                    lses[idx].1 |= m << shift;
                } else {
                    lses[idx].1 |= field;
                }
                if c.eat(b')') {
                    break;
                }
                if !c.eat(b',') {
                    return Err(c.expected("',' or ')' after mpls field"));
                }
            }
        }
        for (i, (v, m)) in lses.iter().enumerate().take(idx + 1) {
            write_uint(&mut self.out.key, MPLS_LSE0 + 4 * i, 4, (*v).into());
            write_uint(&mut self.out.mask, MPLS_LSE0 + 4 * i, 4, (*m).into());
        }
        self.out.attrs.mpls_lses = idx as u8 + 1;
        Ok(())
    }

    fn parse_tunnel(&mut self, c: &mut Cursor<'_>) -> PResult<()> {
        if c.eat(b')') {
            return Ok(());
        }
        loop {
            let at = c.pos;
            let w = c.word();
            let bit = if let Some((bit, fd)) = TUN_FIELDS.iter().find(|(_, fd)| fd.name == w) {
                if !c.eat(b'=') {
                    return Err(c.expected(format!("'=' after {w}")));
                }
                self.check_tun_dup(c, at, *bit, w)?;
                self.parse_field_value(c, fd)?;
                *bit
            } else if c.peek() == Some(b'(') {
                c.pos += 1;
                match w {
                    "flags" => {
                        self.check_tun_dup(c, at, tun_field::FLAGS, w)?;
                        let fl = parse_flags(c, TUN_FLAG_NAMES, 0xf, "tunnel flags")?;
                        if fl.numeric && fl.mask == 0 {
                            self.evidence = true;
                        }
                        self.out.key.set_tun_flags(tun_flags_from_ovs(fl.value));
                        self.out
                            .mask
                            .set_tun_flags(tun_flags_from_ovs(fl.mask & 0xf));
                        c.expect(b')', "')' after tunnel flags")?;
                        tun_field::FLAGS
                    }
                    "geneve" => {
                        self.check_tun_dup(c, at, tun_field::GENEVE, w)?;
                        self.parse_geneve_opts(c)?;
                        tun_field::GENEVE
                    }
                    "vxlan" => {
                        self.check_tun_dup(c, at, tun_field::VXLAN, w)?;
                        c.expect_str("gbp(", "'gbp(' in vxlan(")?;
                        self.parse_fields(c, Attr::Tunnel, GBP_FIELDS, "id, flags")
                            .map_err(|mut e| {
                                if let ParseErrorKind::Expected(s) = &mut e.kind {
                                    *s = Cow::Owned(s.replace("tunnel field", "vxlan gbp field"));
                                }
                                e
                            })?;
                        c.expect(b')', "')' after vxlan(gbp(...)")?;
                        tun_field::VXLAN
                    }
                    _ => {
                        return Err(c.err_at(
                            at,
                            ParseErrorKind::Invalid(
                                format!("unsupported tunnel option {w}(").into(),
                            ),
                        ));
                    }
                }
            } else {
                c.pos = at;
                return Err(c.expected(
                    "tunnel field (tun_id, src, dst, ipv6_src, ipv6_dst, tos, ttl, tp_src, tp_dst, \
                     vxlan, geneve, flags)",
                ));
            };
            self.out.attrs.tun_fields |= bit;
            if c.eat(b')') {
                return Ok(());
            }
            if !c.eat(b',') {
                return Err(c.expected("',' or ')' after tunnel field"));
            }
        }
    }

    fn check_tun_dup(&self, c: &Cursor<'_>, at: usize, bit: u16, w: &str) -> PResult<()> {
        if self.out.attrs.tun_fields & bit != 0 {
            Err(c.invalid_at(at, format!("duplicate tunnel field {w}")))
        } else {
            Ok(())
        }
    }

    /// `{class=0x102,type=0x80,len=4,0x30002}...)` (after `geneve(`).
    pub(crate) fn parse_geneve_opts(&mut self, c: &mut Cursor<'_>) -> PResult<()> {
        let mut k = [0u8; GENEVE_OPTS_MAX];
        let mut m = [0u8; GENEVE_OPTS_MAX];
        let mut len = 0usize;
        while c.peek() == Some(b'{') {
            let open = c.pos;
            c.pos += 1;
            if len + 4 > GENEVE_OPTS_MAX {
                return Err(c.invalid_at(open, "GENEVE options longer than 252 bytes"));
            }
            let o = len;
            let mut data_len = 0usize;
            let parts: [(&str, u128); 3] = [("class=", 0xffff), ("type=", 0xff), ("len=", 0xff)];
            for (i, (lit, max)) in parts.into_iter().enumerate() {
                if i > 0 {
                    c.eat(b',');
                }
                if !c.eat_str(lit) {
                    continue;
                }
                let at = c.pos;
                let what = &lit[..lit.len() - 1];
                let what = w_static(what);
                let v = c.uint(max, what)?;
                let mv = if c.eat(b'/') {
                    let mv = c.uint(max, what)?;
                    self.note_mask(mv == 0);
                    mv
                } else {
                    max
                };
                match i {
                    0 => {
                        k[o..o + 2].copy_from_slice(&(v as u16).to_be_bytes());
                        m[o..o + 2].copy_from_slice(&(mv as u16).to_be_bytes());
                    }
                    1 => {
                        k[o + 2] = v as u8;
                        m[o + 2] = mv as u8;
                    }
                    _ => {
                        if v > 124 || v % 4 != 0 || o + 4 + v as usize > GENEVE_OPTS_MAX {
                            return Err(c.invalid_at(
                                at,
                                "GENEVE option length must be a multiple of 4 up to 124",
                            ));
                        }
                        data_len = v as usize;
                        k[o + 3] = (v / 4) as u8;
                        m[o + 3] = (mv as u8) & 0x1f;
                    }
                }
            }
            if c.eat(b',') {
                c.int_bytes(&mut k[o + 4..o + 4 + data_len], "GENEVE option data")?;
                m[o + 4..o + 4 + data_len].fill(0xff);
            }
            if c.eat(b'/') {
                c.int_bytes(&mut m[o + 4..o + 4 + data_len], "GENEVE option mask")?;
                self.note_mask(data_len > 0 && m[o + 4..o + 4 + data_len].iter().all(|&b| b == 0));
            }
            c.expect(b'}', "'}' closing GENEVE option")?;
            len = o + 4 + data_len;
        }
        c.expect(b')', "'{' or ')' in geneve(")?;
        self.out.key.set_tun_geneve_opts(&k[..len]);
        self.out.mask.set_tun_geneve_opt_bytes(0, &m[..len]);
        self.out.mask.set_tun_geneve_len(0xff);
        Ok(())
    }
}

/// Whether two different attributes keep their values in the same key fields (the key has
/// one set of L3 and one of L4 fields).
fn shares_storage(a: Attr, b: Attr) -> bool {
    use Attr::*;
    const GROUPS: &[&[Attr]] = &[
        &[Ipv4, Ipv6, Arp],
        &[Tcp, Udp, Sctp, Icmp, Icmpv6],
        &[Arp, Nd],
        &[CtTuple4, CtTuple6],
    ];
    a != b && GROUPS.iter().any(|g| g.contains(&a) && g.contains(&b))
}

/// Field names used in error messages must be `'static`; map the few dynamic ones.
fn w_static(w: &str) -> &'static str {
    match w {
        "label" => "label",
        "tc" => "tc",
        "ttl" => "ttl",
        "bos" => "bos",
        "class" => "class",
        "type" => "type",
        "len" => "len",
        _ => "field",
    }
}

// ---------------------------------------------------------------------------------------------
// Printing.

/// Everything needed to print a key.
pub(crate) struct KeyFmt<'a> {
    pub(crate) key: &'a FlowWords,
    /// `None` prints values only (a `set(...)` action, or a key without mask).
    pub(crate) mask: Option<&'a FlowWords>,
    pub(crate) attrs: &'a KeyAttrs,
    pub(crate) names: Option<&'a PortNames>,
    pub(crate) verbose: bool,
}

impl KeyFmt<'_> {
    /// The whole key, OVS `odp_flow_format()`.
    pub(crate) fn write(&self, out: &mut String) {
        self.write_level(out, &self.attrs.items, 0);
    }

    fn write_level(&self, out: &mut String, items: &[AttrItem], depth: u8) {
        let mut first = true;
        let mut has_packet_type = false;
        let mut i = 0;
        while i < items.len() {
            let it = items[i];
            i += 1;
            if it.depth != depth {
                continue;
            }
            // The attributes inside an encap follow it, one level deeper.
            let inner_end = if it.attr == Attr::Encap {
                items[i..]
                    .iter()
                    .position(|x| x.depth <= depth)
                    .map_or(items.len(), |p| i + p)
            } else {
                i
            };
            let inner = &items[i..inner_end];
            i = inner_end;
            if it.attr == Attr::PacketType {
                has_packet_type = true;
            }
            let nested = matches!(it.attr, Attr::Tunnel | Attr::Encap);
            let wildcard = self.is_wildcard(it.attr, depth);
            if self.verbose || !wildcard || nested {
                if !first {
                    out.push(',');
                }
                if it.attr == Attr::Encap {
                    out.push_str("encap(");
                    if depth < MAX_ENCAP_DEPTH {
                        self.write_level(out, inner, depth + 1);
                    }
                    out.push(')');
                } else {
                    self.write_attr(out, it.attr, depth);
                }
                first = false;
            } else if it.attr == Attr::Eth && !has_packet_type {
                if !first {
                    out.push(',');
                }
                out.push_str("eth()");
                first = false;
            } else if it.attr == Attr::PacketType {
                has_packet_type = false;
            }
        }
    }

    /// The byte regions an attribute's mask covers, as fields (for the wildcard and exact
    /// tests).
    fn regions(&self, attr: Attr, depth: u8) -> Vec<Field> {
        if let Some((fields, _)) = field_list(attr) {
            return fields.to_vec();
        }
        if let Some(fd) = single_field(attr) {
            return vec![fd];
        }
        match attr {
            Attr::CtState => vec![CT_STATE],
            Attr::CtLabel => vec![CT_LABEL],
            Attr::InPort => vec![IN_PORT],
            Attr::TcpFlags => vec![TCP_FLAGS],
            Attr::EthType => vec![self.eth_type_field(depth)],
            Attr::Vlan => vec![f("", vlan_slot(depth.min(1)).0, 2, Fmt::Hex)],
            Attr::Mpls => {
                let n = self.attrs.mpls_lses.clamp(1, 3) as usize;
                (0..n)
                    .map(|i| f("", MPLS_LSE0 + 4 * i, 4, Fmt::Hex))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    fn eth_type_field(&self, depth: u8) -> Field {
        if self.attrs.is_tagged(depth) {
            f("", vlan_slot(depth).1, 2, Fmt::Hex)
        } else {
            ETH_TYPE
        }
    }

    /// Whether the attribute's whole mask is zero (OVS `odp_mask_attr_is_wildcard`).
    fn is_wildcard(&self, attr: Attr, depth: u8) -> bool {
        let Some(m) = self.mask else { return false };
        if attr == Attr::SkbPriority {
            return self.attrs.skb_priority_mask == 0;
        }
        self.regions(attr, depth)
            .iter()
            .all(|fd| mask_is_empty(fd, &read(m, fd.ofs, fd.len)))
    }

    /// Whether the attribute's mask is all ones (a `set` rather than a masked set).
    pub(crate) fn is_exact(&self, attr: Attr, depth: u8) -> bool {
        let Some(m) = self.mask else { return true };
        match attr {
            Attr::SkbPriority => self.attrs.skb_priority_mask == u32::MAX,
            Attr::Tunnel | Attr::Encap => true,
            _ => self
                .regions(attr, depth)
                .iter()
                .all(|fd| mask_is_full(fd, &read(m, fd.ofs, fd.len))),
        }
    }

    fn mask_uint(&self, ofs: usize, len: usize) -> Option<u128> {
        self.mask.map(|m| read_uint(m, ofs, len))
    }

    /// `name(...)`, OVS `format_odp_key_attr__()`.
    pub(crate) fn write_attr(&self, out: &mut String, attr: Attr, depth: u8) {
        out.push_str(attr.name());
        out.push('(');
        let k = self.key;
        if let Some((fields, _)) = field_list(attr) {
            for fd in fields {
                put_field(out, fd, k, self.mask, self.verbose);
            }
            chomp(out, ',');
            out.push(')');
            return;
        }
        match attr {
            Attr::SkbPriority
            | Attr::SkbMark
            | Attr::RecircId
            | Attr::DpHash
            | Attr::CtMark
            | Attr::CtZone => {
                let (v, m, full) = if attr == Attr::SkbPriority {
                    let m = self.mask.map(|_| self.attrs.skb_priority_mask as u128);
                    (self.attrs.skb_priority as u128, m, u32::MAX as u128)
                } else {
                    let fd = single_field(attr).unwrap_or(SKB_MARK);
                    (
                        read_uint(k, fd.ofs, fd.len),
                        self.mask_uint(fd.ofs, fd.len),
                        max_of(fd.len),
                    )
                };
                // ct_mark and ct_zone hide an empty mask unless verbose; the others cannot be
                // empty here (a wildcarded attribute is skipped).
                let hide =
                    matches!(attr, Attr::CtMark | Attr::CtZone) && !self.verbose && m == Some(0);
                if !hide {
                    hash_x(out, v);
                    if let Some(m) = m.filter(|&m| m != full) {
                        out.push('/');
                        hash_x(out, m);
                    }
                }
            }
            Attr::CtState => {
                let v = k.ct_state() as u32;
                match self.mask.map(|m| m.ct_state() as u32) {
                    // A 32-bit Netlink mask is never exact when it comes from 8 bits of state.
                    Some(m) if self.verbose => {
                        hash_x(out, v.into());
                        out.push('/');
                        hash_x(out, m.into());
                    }
                    Some(m) => put_flags_masked(out, CT_STATE_FLAGS, v, m, u32::MAX),
                    None => put_flags(out, CT_STATE_FLAGS, v),
                }
            }
            Attr::CtLabel => {
                let v = read(k, CT_LABEL.ofs, 16);
                let m = self.mask.map(|m| read(m, CT_LABEL.ofs, 16));
                if self.verbose || m.is_some_and(|m| m.iter().any(|&b| b != 0)) {
                    put_hex(out, &v);
                    if let Some(m) = m.filter(|m| m.iter().any(|&b| b != 0xff)) {
                        out.push('/');
                        put_hex(out, &m);
                    }
                }
            }
            Attr::InPort => {
                let v = k.in_port();
                match self.mask.map(|m| m.in_port()) {
                    Some(m) if m != u32::MAX => {
                        let _ = write!(out, "{v}/");
                        hash_x(out, m.into());
                    }
                    _ => put_port(out, self.names, v),
                }
            }
            Attr::TcpFlags => {
                let v = k.tcp_flags() as u32;
                match self.mask.map(|m| m.tcp_flags() as u32) {
                    Some(m) if m != 0xffff => {
                        put_flags_masked(out, TCP_FLAG_NAMES, v, m & 0x0fff, 0x0fff)
                    }
                    _ => put_flags(out, TCP_FLAG_NAMES, v),
                }
            }
            Attr::EthType => {
                let fd = self.eth_type_field(depth);
                let _ = write!(out, "0x{:04x}", read_uint(k, fd.ofs, 2));
                if let Some(m) = self.mask_uint(fd.ofs, 2).filter(|&m| m != 0xffff) {
                    let _ = write!(out, "/0x{m:04x}");
                }
            }
            Attr::Vlan => {
                let ofs = vlan_slot(depth.min(1)).0;
                let tci = read_uint(k, ofs, 2) as u16;
                let m = self.mask_uint(ofs, 2).map_or(0xffff, |m| m as u16);
                put_vlan_tci(out, tci, m, self.verbose);
            }
            Attr::Mpls => {
                let n = self.attrs.mpls_lses.clamp(1, 3) as usize;
                let exact = self.is_exact(Attr::Mpls, depth);
                for i in 0..n {
                    let v = read_uint(k, MPLS_LSE0 + 4 * i, 4) as u32;
                    match self.mask_uint(MPLS_LSE0 + 4 * i, 4).filter(|_| !exact) {
                        None => put_mpls_lse(out, v),
                        Some(m) => {
                            let m = m as u32;
                            let _ = write!(
                                out,
                                "label={}/{:#x},tc={}/{:x},ttl={}/{:#x},bos={}/{:x}",
                                v >> 12,
                                m >> 12,
                                (v >> 9) & 7,
                                (m >> 9) & 7,
                                v & 0xff,
                                m & 0xff,
                                (v >> 8) & 1,
                                (m >> 8) & 1
                            );
                        }
                    }
                    out.push(',');
                }
                chomp(out, ',');
            }
            Attr::Tunnel => self.write_tunnel(out),
            Attr::Encap => {}
            _ => {}
        }
        out.push(')');
    }

    fn write_tunnel(&self, out: &mut String) {
        let (k, m, verbose) = (self.key, self.mask, self.verbose);
        let present = self.attrs.tun_fields;
        for (bit, fd) in TUN_FIELDS {
            if present & bit != 0 {
                put_field(out, fd, k, m, verbose);
            }
        }
        if present & tun_field::VXLAN != 0 {
            out.push_str("vxlan(gbp(");
            for fd in GBP_FIELDS {
                put_field(out, fd, k, m, verbose);
            }
            chomp(out, ',');
            out.push_str(")),");
        }
        if present & tun_field::GENEVE != 0 {
            out.push_str("geneve(");
            let mut opts = [0u8; GENEVE_OPTS_MAX];
            let n = k.tun_geneve_opts(&mut opts);
            let mask = m.map(|m| {
                let mut b = [0u8; GENEVE_OPTS_MAX];
                m.bytes_at(GENEVE_OPTS_OFS, &mut b);
                b
            });
            put_geneve_opts(out, &opts[..n], mask.as_ref().map(|b| &b[..n]), verbose);
            out.push_str("),");
        }
        if present & tun_field::FLAGS != 0 {
            let v = tun_flags_to_ovs(k.tun_flags());
            match m.map(|m| tun_flags_to_ovs(m.tun_flags())) {
                Some(0) if !verbose => {}
                Some(mf) => {
                    out.push_str("flags(");
                    put_flags_masked(out, TUN_FLAG_NAMES, v, mf & 0xf, 0xf);
                    out.push_str("),");
                }
                None => {
                    out.push_str("flags(");
                    put_flags(out, TUN_FLAG_NAMES, v);
                    out.push_str("),");
                }
            }
        }
        chomp(out, ',');
    }
}

/// OVS `format_vlan_tci()`.
fn put_vlan_tci(out: &mut String, tci: u16, mask: u16, verbose: bool) {
    let (vid, mvid) = (tci & 0xfff, mask & 0xfff);
    let (pcp, mpcp) = (tci >> 13, mask >> 13);
    if verbose || vid != 0 || mvid != 0 {
        let _ = write!(out, "vid={vid}");
        if mvid != 0xfff {
            let _ = write!(out, "/0x{mvid:x}");
        }
        out.push(',');
    }
    if verbose || pcp != 0 || mpcp != 0 {
        let _ = write!(out, "pcp={pcp}");
        if mpcp != 7 {
            let _ = write!(out, "/0x{mpcp:x}");
        }
        out.push(',');
    }
    if tci & VLAN_CFI == 0 {
        out.push_str("cfi=0,");
    }
    chomp(out, ',');
}

/// OVS `format_mpls_lse()`.
pub(crate) fn put_mpls_lse(out: &mut String, lse: u32) {
    let _ = write!(
        out,
        "label={},tc={},ttl={},bos={}",
        lse >> 12,
        (lse >> 9) & 7,
        lse & 0xff,
        (lse >> 8) & 1
    );
}

/// OVS `format_geneve_opts()`: `{class=..,type=..,len=..,0xdata[/mask]}` per option.
pub(crate) fn put_geneve_opts(out: &mut String, opts: &[u8], mask: Option<&[u8]>, verbose: bool) {
    let mut o = 0;
    while o + 4 <= opts.len() {
        let data_len = (opts[o + 3] & 0x1f) as usize * 4;
        if o + 4 + data_len > opts.len() {
            let _ = write!(
                out,
                "opt len {} greater than remaining {}",
                4 + data_len,
                opts.len() - o
            );
            return;
        }
        out.push('{');
        let class = u16::from_be_bytes([opts[o], opts[o + 1]]);
        let mclass = mask.map(|m| u16::from_be_bytes([m[o], m[o + 1]]));
        put_num(
            out,
            "class",
            class.into(),
            mclass.map(Into::into),
            0xffff,
            true,
            verbose,
        );
        put_num(
            out,
            "type",
            opts[o + 2].into(),
            mask.map(|m| m[o + 2].into()),
            0xff,
            true,
            verbose,
        );
        let mlen = mask.map(|m| {
            if m[o + 3] & 0x1f == 0x1f {
                0xff
            } else {
                (m[o + 3] & 0x1f) as u128
            }
        });
        put_num(out, "len", data_len as u128, mlen, 0xff, false, verbose);
        let data = &opts[o + 4..o + 4 + data_len];
        let mdata = mask.map(|m| &m[o + 4..o + 4 + data_len]);
        if data_len > 0 && (verbose || mdata.is_none_or(|md| md.iter().any(|&b| b != 0))) {
            put_hex(out, data);
            if let Some(md) = mdata.filter(|md| md.iter().any(|&b| b != 0xff)) {
                out.push('/');
                put_hex(out, md);
            }
        } else {
            chomp(out, ',');
        }
        out.push('}');
        o += 4 + data_len;
    }
    if o < opts.len() {
        let _ = write!(out, "opt len {} less than minimum 4", opts.len() - o);
    }
}

/// An integer field with OVS's rules (hex or decimal value, `%#x` mask).
fn put_num(
    out: &mut String,
    name: &str,
    v: u128,
    m: Option<u128>,
    full: u128,
    hex: bool,
    verbose: bool,
) {
    if verbose || m != Some(0) {
        out.push_str(name);
        out.push('=');
        if hex {
            hash_x(out, v);
        } else {
            let _ = write!(out, "{v}");
        }
        if let Some(m) = m.filter(|&m| m != full) {
            out.push('/');
            hash_x(out, m);
        }
        out.push(',');
    }
}

// ---------------------------------------------------------------------------------------------
// Public entry points.

/// Parses a key as `dpctl/add-flow` takes it: `in_port(1),eth_type(0x0800),ipv4(...)`. A
/// `ufid:` prefix is accepted and ignored.
pub fn parse_key(text: &str, names: &mut PortNames) -> Result<DpKey, super::ParseError> {
    let mut c = Cursor::new(text);
    c.skip_spaces();
    if c.rest().starts_with("ufid:") {
        super::parse_ufid(&mut c)?;
        c.eat(b',');
        c.skip_spaces();
    }
    let mut p = KeyParser::new(names);
    p.parse_top(&mut c)?;
    c.skip_spaces();
    if !c.at_end() {
        return Err(c.expected("',' and another key attribute, or end of key"));
    }
    Ok(p.finish())
}

impl DpKey {
    /// Prints the key; `names` turns port numbers into names; `verbose` overrides the form the
    /// key was parsed in.
    pub fn format(&self, names: Option<&PortNames>, verbose: Option<bool>) -> String {
        let mut out = String::new();
        format_key_into(&mut out, &self.key, &self.mask, &self.attrs, names, verbose);
        out
    }
}

impl std::fmt::Display for DpKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.format(None, None))
    }
}

/// Appends the text of a key to `out`.
pub fn format_key_into(
    out: &mut String,
    key: &FlowKey,
    mask: &Mask,
    attrs: &KeyAttrs,
    names: Option<&PortNames>,
    verbose: Option<bool>,
) {
    KeyFmt {
        key,
        mask: Some(mask),
        attrs,
        names,
        verbose: verbose.unwrap_or(attrs.verbose),
    }
    .write(out);
}
