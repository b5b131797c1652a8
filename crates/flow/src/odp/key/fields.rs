//! Field descriptors of the key attributes: where each `name=value` field of `eth(...)`,
//! `ipv4(...)`, `tunnel(...)` and the one-value attributes lives in a [`FlowKey`]'s bytes, how
//! wide it is and how its value and mask print (the role of OVS's per-attribute `format_*()` and
//! `scan_*()` tables in `lib/odp-util.c`).
//!
//! Offsets are resolved at compile time from the key layout's own field table, so a renamed key
//! field fails the build rather than printing the wrong bytes. The parser and the printer share
//! these tables, which keeps the two in step.
//!
//! [`FlowKey`]: crate::key::FlowKey

use super::{Attr, tun_field};
use crate::key::{FIELDS, FlowWords};

/// How a field's value and mask print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fmt {
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
pub(super) struct Field {
    pub(super) name: &'static str,
    pub(super) ofs: usize,
    pub(super) len: usize,
    pub(super) fmt: Fmt,
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

pub(super) const fn f(name: &'static str, ofs: usize, len: usize, fmt: Fmt) -> Field {
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
pub(super) const GBP_FIELDS: &[Field] = &[
    f("id", ofs("tun_gbp_id"), 2, Fmt::Dec),
    f("flags", ofs("tun_gbp_flags"), 1, Fmt::Hex),
];
/// Scalar `tunnel(...)` fields in print order, with their presence bit.
pub(super) const TUN_FIELDS: &[(u16, Field)] = &[
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

pub(super) const SKB_MARK: Field = f("", ofs("pkt_mark"), 4, Fmt::Hex);
const RECIRC_ID: Field = f("", ofs("recirc_id"), 4, Fmt::Hex);
const DP_HASH: Field = f("", ofs("dp_hash"), 4, Fmt::Hex);
const CT_MARK: Field = f("", ofs("ct_mark"), 4, Fmt::Hex);
const CT_ZONE: Field = f("", ofs("ct_zone"), 2, Fmt::Hex);
pub(super) const CT_STATE: Field = f("", ofs("ct_state"), 1, Fmt::Hex);
pub(super) const CT_LABEL: Field = f("", ofs("ct_label"), 16, Fmt::Hex);
pub(super) const IN_PORT: Field = f("", ofs("in_port"), 4, Fmt::Dec);
pub(super) const TCP_FLAGS: Field = f("", ofs("tcp_flags"), 2, Fmt::Hex);
pub(super) const ETH_TYPE: Field = f("", ofs("eth_type"), 2, Fmt::Hex);
pub(super) const MPLS_LSE0: usize = ofs("mpls_lse0");

/// The fields of an attribute that is a plain list of `name=value` fields.
pub(super) fn field_list(attr: Attr) -> Option<(&'static [Field], &'static str)> {
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
pub(super) fn single_field(attr: Attr) -> Option<Field> {
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
pub(super) fn vlan_slot(depth: u8) -> (usize, usize) {
    if depth == 0 {
        (ofs("vlan_tci"), ofs("vlan_tpid"))
    } else {
        (ofs("vlan2_tci"), ofs("vlan2_tpid"))
    }
}

pub(super) fn read(w: &FlowWords, ofs: usize, len: usize) -> [u8; 16] {
    let mut b = [0u8; 16];
    w.bytes_at(ofs, &mut b[..len.min(16)]);
    b
}

pub(super) fn uint(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |a, &x| (a << 8) | x as u128)
}

pub(super) fn read_uint(w: &FlowWords, ofs: usize, len: usize) -> u128 {
    uint(&read(w, ofs, len)[..len])
}

pub(super) fn write_uint(w: &mut FlowWords, ofs: usize, len: usize, v: u128) {
    let be = v.to_be_bytes();
    w.set_bytes_at(ofs, &be[16 - len..]);
}

pub(super) fn max_of(len: usize) -> u128 {
    if len >= 16 {
        u128::MAX
    } else {
        (1u128 << (8 * len)) - 1
    }
}

pub(super) fn mask_is_empty(fd: &Field, m: &[u8]) -> bool {
    m[..fd.len].iter().all(|&b| b == 0)
}

pub(super) fn mask_is_full(fd: &Field, m: &[u8]) -> bool {
    match fd.fmt {
        Fmt::Label => uint(&m[..4]) & 0xfffff == 0xfffff,
        Fmt::Frag => m[0] != 0,
        _ => m[..fd.len].iter().all(|&b| b == 0xff),
    }
}
