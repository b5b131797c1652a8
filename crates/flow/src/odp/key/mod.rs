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
//!
//! The module is split as OVS's readers would look for it: the field descriptors that map each
//! attribute's `name=value` fields onto key bytes ([`fields`]), the flag sets
//! (`ct_state(+trk)`, `tcp_flags(syn)`, tunnel `flags(+key)`, [`flags`]), the parser
//! ([`parse`]) and the printer ([`mod@format`]). This file holds the types they share.

mod fields;
mod flags;
mod format;
mod parse;

pub use flags::{CT_STATE_FLAGS, FlagTable, TCP_FLAG_NAMES, TUN_FLAG_NAMES, tun_flags_to_ovs};
pub use format::format_key_into;
pub(crate) use format::{KeyFmt, put_geneve_opts, put_mpls_lse};
pub(crate) use parse::KeyParser;
pub use parse::parse_key;

use crate::key::{FlowKey, Mask};

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

impl DpKey {
    /// The key of the packet this describes, as OVS reads a key into a flow
    /// (`odp_flow_key_to_flow()`): an ethertype left out at the outermost level (no
    /// `eth_type(...)`, no VLAN tag) is that of the L3 attribute given, `ipv4` 0x0800, `ipv6`
    /// 0x86dd, `mpls` 0x8847, and without one 0x05ff (OVS's `FLOW_DL_TYPE_NONE`: an 802.3
    /// frame with a length field). A packet type other than Ethernet's (`packet_type(ns=1,..)`)
    /// keeps its key as it is. What `netdev-dummy/receive` composes its packet from.
    pub fn packet_key(&self) -> FlowKey {
        let mut key = self.key.clone();
        let a = &self.attrs;
        if key.packet_type() == 0 && !a.has_at(Attr::EthType, 0) && !a.is_tagged(0) {
            let l3 = [
                (Attr::Ipv4, 0x0800),
                (Attr::Ipv6, 0x86dd),
                (Attr::Mpls, 0x8847),
            ];
            let et = l3
                .iter()
                .find(|(at, _)| a.has_at(*at, 0))
                .map_or(0x05ff, |l| l.1);
            key.set_eth_type(et);
        }
        key
    }
}
