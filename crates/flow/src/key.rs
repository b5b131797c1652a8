//! `FlowKey` and `Mask`: the datapath's flow key in a fixed layout of 8-byte words.
//!
//! The layout mirrors the fields of OVS's datapath key (`struct flow` as the userspace datapath
//! sees it): metadata (in_port, recirc_id, dp_hash, packet mark, conntrack state, tunnel metadata
//! including GENEVE options) and the packet's L2, L2.5, L3 and L4 fields. Every field sits at a
//! fixed byte offset in **network byte order**, so masking is a plain byte-wise AND and the
//! extractor can copy header bytes straight into the key (the IPv4 source and destination are one
//! 8-byte load).
//!
//! Hot fields come first: a 64-byte Ethernet/IPv4/UDP or TCP frame only touches words 0–5, which
//! are the first cache line.
//!
//! # Presence map
//! A key carries `map`, one bit per word that holds data. Words whose bit is clear read as zero,
//! whatever their bytes hold. This lets the extractor reuse a key buffer without clearing 512
//! bytes per packet, and lets hashing and exact comparison visit only the words a packet has (the
//! same idea as OVS's miniflow, with fixed positions instead of compaction). Two keys with the
//! same field values are equal under `==` even if one stores an explicit zero word and the other
//! leaves it absent; [`FlowWords::exact_eq`] is the cheaper representation-exact comparison the
//! exact-match cache uses, which is sound because extraction is deterministic.

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::hash;

/// Number of 8-byte words in a key.
pub const KEY_WORDS: usize = 64;
/// Size of a key's field storage in bytes.
pub const KEY_BYTES: usize = KEY_WORDS * 8;

/// Largest GENEVE option area (RFC 8926: the 6-bit option length in 4-byte units).
pub const GENEVE_OPTS_MAX: usize = 252;
/// Byte offset of the GENEVE option area.
pub const GENEVE_OPTS_OFS: usize = 260;

/// An Ethernet MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct EthAddr(pub [u8; 6]);

impl EthAddr {
    /// `00:00:00:00:00:00`: an absent address, and the mask that wildcards an Ethernet field.
    pub const ZERO: EthAddr = EthAddr([0; 6]);
    /// `ff:ff:ff:ff:ff:ff`: the broadcast address, and the exact mask of an Ethernet field.
    pub const BROADCAST: EthAddr = EthAddr([0xff; 6]);
}

impl fmt::Display for EthAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for EthAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A value that can live in a key field: read from and written to network-order bytes.
pub trait FieldValue: Copy + PartialEq + fmt::Debug {
    /// The zero value.
    fn zero() -> Self {
        Self::read(&[0u8; 16])
    }
    /// Width in bytes.
    const LEN: usize;
    /// Reads from exactly `LEN` bytes.
    fn read(b: &[u8]) -> Self;
    /// Writes exactly `LEN` bytes.
    fn write(self, b: &mut [u8]);
    /// The all-ones value (an exact mask for this field).
    fn ones() -> Self;
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            const LEN: usize = core::mem::size_of::<$t>();
            #[inline]
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; core::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::LEN]);
                <$t>::from_be_bytes(a)
            }
            #[inline]
            fn write(self, b: &mut [u8]) {
                b[..Self::LEN].copy_from_slice(&self.to_be_bytes());
            }
            fn ones() -> Self {
                <$t>::MAX
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64, u128);

impl FieldValue for EthAddr {
    const LEN: usize = 6;
    #[inline]
    fn read(b: &[u8]) -> Self {
        let mut a = [0u8; 6];
        a.copy_from_slice(&b[..6]);
        EthAddr(a)
    }
    #[inline]
    fn write(self, b: &mut [u8]) {
        b[..6].copy_from_slice(&self.0);
    }
    fn ones() -> Self {
        EthAddr::BROADCAST
    }
}

impl FieldValue for Ipv4Addr {
    const LEN: usize = 4;
    #[inline]
    fn read(b: &[u8]) -> Self {
        Ipv4Addr::from(u32::read(b))
    }
    #[inline]
    fn write(self, b: &mut [u8]) {
        b[..4].copy_from_slice(&self.octets());
    }
    fn ones() -> Self {
        Ipv4Addr::BROADCAST
    }
}

impl FieldValue for Ipv6Addr {
    const LEN: usize = 16;
    #[inline]
    fn read(b: &[u8]) -> Self {
        Ipv6Addr::from(u128::read(b))
    }
    #[inline]
    fn write(self, b: &mut [u8]) {
        b[..16].copy_from_slice(&self.octets());
    }
    fn ones() -> Self {
        Ipv6Addr::from(u128::MAX)
    }
}

/// Description of one field of the layout, for generic code (reference matchers, printers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldDesc {
    /// The field's name, as its accessor is called.
    pub name: &'static str,
    /// Byte offset in the key.
    pub offset: usize,
    /// Width in bytes.
    pub len: usize,
}

/// Bit flags of [`FlowWords::ct_state`], as in OVS (`ct_state(+new+trk)`).
pub mod ct_state {
    /// `+new`: the packet starts a connection conntrack has not committed yet.
    pub const NEW: u8 = 0x01;
    /// `+est`: the packet belongs to a committed connection that has seen traffic both ways.
    pub const EST: u8 = 0x02;
    /// `+rel`: the packet is related to a committed connection (an ICMP error about it, say).
    pub const REL: u8 = 0x04;
    /// `+rpl`: the packet travels in the reply direction, opposite the connection's originator.
    pub const RPL: u8 = 0x08;
    /// `+inv`: conntrack could not make sense of the packet (bad state, malformed header).
    pub const INV: u8 = 0x10;
    /// `+trk`: the packet has been through `ct()`; the other bits mean something only with it.
    pub const TRK: u8 = 0x20;
    /// `+snat`: conntrack's NAT rewrote the packet's source address or port.
    pub const SNAT: u8 = 0x40;
    /// `+dnat`: conntrack's NAT rewrote the packet's destination address or port.
    pub const DNAT: u8 = 0x80;
    /// Names in the order OVS prints them.
    pub const NAMES: [(u8, &str); 8] = [
        (NEW, "new"),
        (EST, "est"),
        (REL, "rel"),
        (RPL, "rpl"),
        (INV, "inv"),
        (TRK, "trk"),
        (SNAT, "snat"),
        (DNAT, "dnat"),
    ];
}

/// Bit flags of [`FlowWords::nw_frag`], as in OVS (`frag=no|first|later`).
pub mod nw_frag {
    /// The packet is a fragment (first or later).
    pub const ANY: u8 = 0x01;
    /// The packet is a fragment other than the first.
    pub const LATER: u8 = 0x02;
    /// Both bits: the mask of a flow that matches on `frag=` (OVS's `FLOW_NW_FRAG_MASK`).
    pub const MASK: u8 = ANY | LATER;
}

/// Bit flags of [`FlowWords::tun_flags`], as OVS prints them in `flags(-df+csum+key)`.
///
/// These are the key's own bit values; the text format uses OVS's `FLOW_TNL_F_*` values
/// ([`crate::odp::TUN_FLAG_NAMES`]) and converts.
pub mod tun_flags {
    /// `df`: the outer IPv4 header of the received tunnel packet had Don't Fragment set.
    pub const DONT_FRAGMENT: u8 = 0x01;
    /// `csum`: the outer UDP checksum or the GRE checksum (C bit) is present and was verified.
    pub const CSUM: u8 = 0x02;
    /// `key`: the tunnel header carries a key (GRE K bit, a VXLAN or GENEVE VNI), so `tun_id`
    /// holds it.
    pub const KEY: u8 = 0x04;
    /// `oam`: the GENEVE header's O bit, marking an OAM (control) packet (RFC 8926 §3.4).
    pub const OAM: u8 = 0x08;
}

/// `vlan_tci` bit that marks a tag as present (OVS's use of the CFI/DEI bit in the key).
pub const VLAN_CFI: u16 = 0x1000;

macro_rules! layout {
    ($( $(#[$doc:meta])* $name:ident, $set:ident : $t:ty = $ofs:expr; )*) => {
        /// Every field of the layout, in layout order.
        pub const FIELDS: &[FieldDesc] = &[
            $( FieldDesc { name: stringify!($name), offset: $ofs, len: <$t as FieldValue>::LEN }, )*
        ];

        impl FlowWords {
            $(
                $(#[$doc])*
                #[inline]
                pub fn $name(&self) -> $t {
                    self.get::<$t>($ofs)
                }
                #[doc = concat!("Sets [`Self::", stringify!($name), "`].")]
                #[inline]
                pub fn $set(&mut self, v: $t) -> &mut Self {
                    self.put::<$t>($ofs, v);
                    self
                }
            )*
        }
    };
}

// Word 0: in_port, recirc_id. Words 1-5: the L2-L4 fields of the common case.
// Words 6-11: tunnel and connection metadata. Words 12-21: colder packet fields.
// Words 22-32: connection label, IPv6 tunnel endpoints, connection tuple. Bytes 260-511: GENEVE
// options. Byte offsets are checked against words by `layout_is_consistent` in the tests.
layout! {
    /// Datapath input port.
    in_port, set_in_port: u32 = 0;
    /// Recirculation id; 0 for a packet's first pass.
    recirc_id, set_recirc_id: u32 = 4;
    /// Ethernet destination.
    eth_dst, set_eth_dst: EthAddr = 8;
    /// Innermost ethertype (after VLAN tags), 0x05ff for non-Ethernet-II frames without SNAP.
    eth_type, set_eth_type: u16 = 14;
    /// Ethernet source.
    eth_src, set_eth_src: EthAddr = 16;
    /// Outer VLAN TCI with [`VLAN_CFI`] set when a tag is present.
    vlan_tci, set_vlan_tci: u16 = 22;
    /// IPv4 source; ARP sender protocol address.
    nw_src, set_nw_src: Ipv4Addr = 24;
    /// IPv4 destination; ARP target protocol address.
    nw_dst, set_nw_dst: Ipv4Addr = 28;
    /// L4 source port; ICMP/ICMPv6 type.
    tp_src, set_tp_src: u16 = 32;
    /// L4 destination port; ICMP/ICMPv6 code.
    tp_dst, set_tp_dst: u16 = 34;
    /// IP protocol / IPv6 final next header; low 8 bits of the ARP opcode.
    nw_proto, set_nw_proto: u8 = 36;
    /// IPv4 TOS / IPv6 traffic class (DSCP and ECN).
    nw_tos, set_nw_tos: u8 = 37;
    /// IPv4 TTL / IPv6 hop limit.
    nw_ttl, set_nw_ttl: u8 = 38;
    /// Fragment flags, see [`nw_frag`].
    nw_frag, set_nw_frag: u8 = 39;
    /// TCP flags (12 bits).
    tcp_flags, set_tcp_flags: u16 = 40;
    /// TPID of the outer VLAN tag (0x8100 or 0x88a8).
    vlan_tpid, set_vlan_tpid: u16 = 42;
    /// TPID of the inner VLAN tag.
    vlan2_tpid, set_vlan2_tpid: u16 = 44;
    /// Inner VLAN TCI with [`VLAN_CFI`] set when present.
    vlan2_tci, set_vlan2_tci: u16 = 46;
    /// Tunnel id (VNI, GRE key, GENEVE VNI).
    tun_id, set_tun_id: u64 = 48;
    /// Outer IPv4 source of a decapsulated packet.
    tun_ipv4_src, set_tun_ipv4_src: Ipv4Addr = 56;
    /// Outer IPv4 destination of a decapsulated packet.
    tun_ipv4_dst, set_tun_ipv4_dst: Ipv4Addr = 60;
    /// Outer TOS.
    tun_tos, set_tun_tos: u8 = 64;
    /// Outer TTL.
    tun_ttl, set_tun_ttl: u8 = 65;
    /// Tunnel flags, see [`tun_flags`].
    tun_flags, set_tun_flags: u8 = 66;
    /// Length in bytes of the GENEVE options held at [`GENEVE_OPTS_OFS`].
    tun_geneve_len, set_tun_geneve_len: u8 = 67;
    /// Outer UDP source port.
    tun_tp_src, set_tun_tp_src: u16 = 68;
    /// Outer UDP destination port.
    tun_tp_dst, set_tun_tp_dst: u16 = 70;
    /// Datapath hash (`hash` action).
    dp_hash, set_dp_hash: u32 = 72;
    /// Packet mark (`skb_mark`, `pkt_mark`).
    pkt_mark, set_pkt_mark: u32 = 76;
    /// Connection mark.
    ct_mark, set_ct_mark: u32 = 80;
    /// Connection tracking zone.
    ct_zone, set_ct_zone: u16 = 84;
    /// IP protocol of the connection's original direction.
    ct_nw_proto, set_ct_nw_proto: u8 = 86;
    /// Connection state, see [`ct_state`].
    ct_state, set_ct_state: u8 = 88;
    /// VXLAN GBP flags.
    tun_gbp_flags, set_tun_gbp_flags: u8 = 89;
    /// VXLAN GBP policy id.
    tun_gbp_id, set_tun_gbp_id: u16 = 90;
    /// Packet type: `(namespace << 16) | type`; 0 is Ethernet, `(1 << 16) | ethertype` an L3 packet.
    packet_type, set_packet_type: u32 = 92;
    /// MPLS label stack entry 0 (outermost), as on the wire.
    mpls_lse0, set_mpls_lse0: u32 = 96;
    /// MPLS label stack entry 1.
    mpls_lse1, set_mpls_lse1: u32 = 100;
    /// MPLS label stack entry 2.
    mpls_lse2, set_mpls_lse2: u32 = 104;
    /// IPv6 flow label (20 bits).
    ipv6_label, set_ipv6_label: u32 = 108;
    /// IPv6 source.
    ipv6_src, set_ipv6_src: Ipv6Addr = 112;
    /// IPv6 destination.
    ipv6_dst, set_ipv6_dst: Ipv6Addr = 128;
    /// Neighbor Discovery target.
    nd_target, set_nd_target: Ipv6Addr = 144;
    /// ARP sender hardware address; ND source link-layer address.
    arp_sha, set_arp_sha: EthAddr = 160;
    /// ARP target hardware address; ND target link-layer address.
    arp_tha, set_arp_tha: EthAddr = 168;
    /// Connection label.
    ct_label, set_ct_label: u128 = 176;
    /// Outer IPv6 source of a decapsulated packet.
    tun_ipv6_src, set_tun_ipv6_src: Ipv6Addr = 192;
    /// Outer IPv6 destination of a decapsulated packet.
    tun_ipv6_dst, set_tun_ipv6_dst: Ipv6Addr = 208;
    /// Original-direction source of the connection (IPv4 in the first four bytes).
    ct_ipv6_src, set_ct_ipv6_src: Ipv6Addr = 224;
    /// Original-direction destination of the connection.
    ct_ipv6_dst, set_ct_ipv6_dst: Ipv6Addr = 240;
    /// Original-direction L4 source port of the connection.
    ct_tp_src, set_ct_tp_src: u16 = 256;
    /// Original-direction L4 destination port of the connection.
    ct_tp_dst, set_ct_tp_dst: u16 = 258;
}

/// IPv4 view of the connection tuple's source (shares storage with `ct_ipv6_src`).
const CT_NW_SRC_OFS: usize = 224;
/// IPv4 view of the connection tuple's destination.
const CT_NW_DST_OFS: usize = 240;

/// Words that hold fields of the packet itself (as opposed to metadata). Extraction rewrites
/// exactly these.
pub const PACKET_WORDS: u64 = 0b11_1110 | (0x3ff << 12);

/// Words that hold metadata: everything that is not a packet field.
pub const METADATA_WORDS: u64 = !PACKET_WORDS;

/// The storage shared by [`FlowKey`] and [`Mask`]: 512 bytes of fields plus the presence map.
#[derive(Clone)]
#[repr(C, align(64))]
pub struct FlowWords {
    bytes: [u8; KEY_BYTES],
    map: u64,
}

impl Default for FlowWords {
    fn default() -> Self {
        FlowWords {
            bytes: [0; KEY_BYTES],
            map: 0,
        }
    }
}

impl FlowWords {
    /// All fields zero (nothing present).
    pub fn new() -> Self {
        Self::default()
    }

    /// The presence map: bit `i` set when word `i` holds data.
    #[inline]
    pub fn map(&self) -> u64 {
        self.map
    }

    /// Word `i` (0 when absent), in memory byte order.
    #[inline]
    pub fn word(&self, i: usize) -> u64 {
        let i = i & (KEY_WORDS - 1);
        if self.map & (1 << i) == 0 {
            0
        } else {
            self.raw_word(i)
        }
    }

    /// Word `i` as stored, ignoring the presence map. Only meaningful for present words.
    #[inline]
    pub fn raw_word(&self, i: usize) -> u64 {
        let i = i & (KEY_WORDS - 1);
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.bytes[i * 8..i * 8 + 8]);
        u64::from_ne_bytes(a)
    }

    /// Stores word `i` and marks it present.
    #[inline]
    pub fn set_word(&mut self, i: usize, v: u64) {
        let i = i & (KEY_WORDS - 1);
        self.bytes[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
        self.map |= 1 << i;
    }

    /// Stores word `i` without marking it present: for writers that mark a batch of words at
    /// once with [`Self::mark_words`].
    #[inline]
    pub fn put_word(&mut self, i: usize, v: u64) {
        let i = i & (KEY_WORDS - 1);
        self.bytes[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
    }

    /// Marks the words in `words` present (their bytes must have been stored).
    #[inline]
    pub fn mark_words(&mut self, words: u64) {
        self.map |= words;
    }

    /// Marks the words in `words` absent.
    #[inline]
    pub fn clear_words(&mut self, words: u64) {
        self.map &= !words;
    }

    /// Makes every field zero.
    #[inline]
    pub fn clear(&mut self) {
        self.map = 0;
    }

    /// Drops words that are present but zero, so that `map` names exactly the non-zero words.
    pub fn normalize(&mut self) {
        let mut m = self.map;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if self.raw_word(i) == 0 {
                self.map &= !(1 << i);
            }
        }
    }

    /// The bytes of the field area, with absent words read as zero.
    pub fn to_bytes(&self) -> [u8; KEY_BYTES] {
        let mut out = [0u8; KEY_BYTES];
        let mut m = self.map;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            out[i * 8..i * 8 + 8].copy_from_slice(&self.bytes[i * 8..i * 8 + 8]);
        }
        out
    }

    /// Reads `len` bytes at `offset` (absent words read as zero).
    pub fn bytes_at(&self, offset: usize, out: &mut [u8]) {
        for (k, b) in out.iter_mut().enumerate() {
            let o = offset + k;
            *b = if self.map & (1 << (o / 8)) != 0 {
                self.bytes[o]
            } else {
                0
            };
        }
    }

    /// Writes bytes at `offset`, marking their words present (other bytes of those words keep
    /// their values, or become zero if the word was absent).
    pub fn set_bytes_at(&mut self, offset: usize, src: &[u8]) {
        if src.is_empty() {
            return;
        }
        let first = offset / 8;
        let last = (offset + src.len() - 1) / 8;
        for w in first..=last {
            if self.map & (1 << w) == 0 {
                self.bytes[w * 8..w * 8 + 8].fill(0);
                self.map |= 1 << w;
            }
        }
        self.bytes[offset..offset + src.len()].copy_from_slice(src);
    }

    #[inline]
    fn get<T: FieldValue>(&self, ofs: usize) -> T {
        // Fields never straddle an absent and a present word in practice, but a field may span
        // several words (IPv6 addresses), so check each.
        let first = ofs / 8;
        let last = (ofs + T::LEN - 1) / 8;
        let need = (u64::MAX >> (63 - (last - first))) << first;
        if self.map & need == need {
            T::read(&self.bytes[ofs..ofs + T::LEN])
        } else if self.map & need == 0 {
            T::zero()
        } else {
            let mut b = [0u8; 16];
            self.bytes_at(ofs, &mut b[..T::LEN]);
            T::read(&b[..T::LEN])
        }
    }

    #[inline]
    fn put<T: FieldValue>(&mut self, ofs: usize, v: T) {
        let mut b = [0u8; 16];
        v.write(&mut b[..T::LEN]);
        self.set_bytes_at(ofs, &b[..T::LEN]);
    }

    /// IPv4 view of the connection tuple's source.
    pub fn ct_nw_src(&self) -> Ipv4Addr {
        self.get(CT_NW_SRC_OFS)
    }
    /// Sets [`Self::ct_nw_src`].
    pub fn set_ct_nw_src(&mut self, a: Ipv4Addr) -> &mut Self {
        self.put(CT_NW_SRC_OFS, a);
        self
    }
    /// IPv4 view of the connection tuple's destination.
    pub fn ct_nw_dst(&self) -> Ipv4Addr {
        self.get(CT_NW_DST_OFS)
    }
    /// Sets [`Self::ct_nw_dst`].
    pub fn set_ct_nw_dst(&mut self, a: Ipv4Addr) -> &mut Self {
        self.put(CT_NW_DST_OFS, a);
        self
    }

    /// The GENEVE option area: `tun_geneve_len` bytes of options as on the wire.
    pub fn tun_geneve_opts(&self, out: &mut [u8; GENEVE_OPTS_MAX]) -> usize {
        let len = (self.tun_geneve_len() as usize).min(GENEVE_OPTS_MAX);
        self.bytes_at(GENEVE_OPTS_OFS, &mut out[..len]);
        len
    }

    /// Stores GENEVE options (as on the wire; at most [`GENEVE_OPTS_MAX`] bytes, more is cut) and
    /// their length.
    pub fn set_tun_geneve_opts(&mut self, opts: &[u8]) -> &mut Self {
        let len = opts.len().min(GENEVE_OPTS_MAX);
        self.set_bytes_at(GENEVE_OPTS_OFS, &opts[..len]);
        self.set_tun_geneve_len(len as u8);
        self
    }

    /// Sets GENEVE option bytes without touching the length field: for masks, whose option area
    /// may be wider than a key's option length.
    pub fn set_tun_geneve_opt_bytes(&mut self, offset: usize, bytes: &[u8]) -> &mut Self {
        let end = (offset + bytes.len()).min(GENEVE_OPTS_MAX);
        if offset < end {
            self.set_bytes_at(GENEVE_OPTS_OFS + offset, &bytes[..end - offset]);
        }
        self
    }

    /// Representation-exact equality: same presence map and same present words. Faster than `==`;
    /// two keys that differ only in explicit-zero versus absent words compare unequal.
    #[inline]
    pub fn exact_eq(&self, other: &FlowWords) -> bool {
        if self.map != other.map {
            return false;
        }
        let mut m = self.map;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if self.raw_word(i) != other.raw_word(i) {
                return false;
            }
        }
        true
    }

    /// CRC32C over the present words and the presence map, from `basis`.
    #[inline]
    pub fn hash(&self, basis: u32) -> u32 {
        let mut h = basis;
        let mut m = self.map;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            h = hash::crc32c_u64(h, self.raw_word(i));
        }
        hash::crc32c_u64(h, self.map)
    }

    /// Whether every field is zero.
    pub fn is_zero(&self) -> bool {
        let mut m = self.map;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if self.raw_word(i) != 0 {
                return false;
            }
        }
        true
    }
}

impl PartialEq for FlowWords {
    fn eq(&self, other: &Self) -> bool {
        let mut m = self.map | other.map;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if self.word(i) != other.word(i) {
                return false;
            }
        }
        true
    }
}
impl Eq for FlowWords {}

impl fmt::Debug for FlowWords {
    /// Lists the non-zero fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_map();
        for d in FIELDS {
            let mut b = [0u8; 16];
            self.bytes_at(d.offset, &mut b[..d.len]);
            if b[..d.len].iter().any(|&x| x != 0) {
                s.entry(&d.name, &HexBytes(&b[..d.len]));
            }
        }
        let mut opts = [0u8; GENEVE_OPTS_MAX];
        let n = self.tun_geneve_opts(&mut opts);
        if n > 0 {
            s.entry(&"tun_geneve_opts", &HexBytes(&opts[..n]));
        }
        s.finish()
    }
}

struct HexBytes<'a>(&'a [u8]);
impl fmt::Debug for HexBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

macro_rules! words_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Default, PartialEq, Eq)]
        pub struct $name(pub FlowWords);

        impl $name {
            /// All fields zero.
            pub fn new() -> Self {
                Self::default()
            }
        }
        impl core::ops::Deref for $name {
            type Target = FlowWords;
            #[inline]
            fn deref(&self) -> &FlowWords {
                &self.0
            }
        }
        impl core::ops::DerefMut for $name {
            #[inline]
            fn deref_mut(&mut self) -> &mut FlowWords {
                &mut self.0
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), " "))?;
                fmt::Debug::fmt(&self.0, f)
            }
        }
    };
}

words_newtype!(
    /// A packet's flow key: metadata plus the fields extracted from its headers.
    FlowKey
);
words_newtype!(
    /// Which bits of a [`FlowKey`] a megaflow matches: a set bit means "must be equal".
    Mask
);

impl Mask {
    /// A mask that matches every bit of every field.
    pub fn exact() -> Self {
        let mut m = Mask::new();
        for i in 0..KEY_WORDS {
            m.set_word(i, u64::MAX);
        }
        m
    }

    /// Sets every bit of the field `name` (see [`FIELDS`]); returns false for an unknown name.
    pub fn set_field_exact(&mut self, name: &str) -> bool {
        match FIELDS.iter().find(|d| d.name == name) {
            Some(d) => {
                let ones = [0xffu8; 16];
                self.set_bytes_at(d.offset, &ones[..d.len]);
                true
            }
            None => false,
        }
    }
}

/// A megaflow: a key and the mask that says which of its bits matter. The key is stored masked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    key: FlowKey,
    mask: Mask,
}

impl Match {
    /// Builds a match; the key's bits outside the mask are cleared, and zero mask words dropped.
    pub fn new(key: &FlowKey, mask: &Mask) -> Self {
        let mut mask = mask.clone();
        mask.normalize();
        let mut k = FlowKey::new();
        let mut m = mask.map();
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            k.set_word(i, key.word(i) & mask.raw_word(i));
        }
        Match { key: k, mask }
    }

    /// The masked key.
    pub fn key(&self) -> &FlowKey {
        &self.key
    }

    /// The mask.
    pub fn mask(&self) -> &Mask {
        &self.mask
    }

    /// Whether `key` agrees with this match on every masked bit.
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        let mut m = self.mask.map();
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if key.word(i) & self.mask.raw_word(i) != self.key.raw_word(i) {
                return false;
            }
        }
        true
    }
}

impl FlowKey {
    /// Hash of `self` under `mask`: CRC32C of the masked words the mask uses. Keys that agree on
    /// the mask's bits hash alike; this is what a megaflow subtable indexes by.
    #[inline]
    pub fn hash_masked(&self, mask: &Mask, basis: u32) -> u32 {
        let mut h = basis;
        let mut m = mask.map();
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            h = hash::crc32c_u64(h, self.word(i) & mask.raw_word(i));
        }
        h
    }
}

// The hot first cache line and word alignment are part of the design; keep them honest.
const _: () = assert!(core::mem::size_of::<FlowWords>() == KEY_BYTES + 64);
const _: () = assert!(core::mem::align_of::<FlowWords>() == 64);
const _: () = assert!(GENEVE_OPTS_OFS + GENEVE_OPTS_MAX == KEY_BYTES);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_consistent() {
        // Fields do not overlap (except the documented IPv4 views of ct_ipv6_*), stay inside the
        // area before the GENEVE options, and a field never straddles an 8-byte word unless it is
        // wider than a word and word-aligned.
        let mut owner = [None::<&str>; KEY_BYTES];
        for d in FIELDS {
            assert!(
                d.offset + d.len <= GENEVE_OPTS_OFS,
                "{} out of range",
                d.name
            );
            if d.len <= 8 {
                assert_eq!(
                    d.offset / 8,
                    (d.offset + d.len - 1) / 8,
                    "{} straddles",
                    d.name
                );
            } else {
                assert_eq!(d.offset % 8, 0, "{} misaligned", d.name);
            }
            for o in &mut owner[d.offset..d.offset + d.len] {
                assert!(o.is_none(), "{} overlaps {:?}", d.name, o);
                *o = Some(d.name);
            }
        }
    }

    #[test]
    fn packet_words_are_the_packet_fields() {
        const PACKET_FIELDS: &[&str] = &[
            "eth_dst",
            "eth_type",
            "eth_src",
            "vlan_tci",
            "nw_src",
            "nw_dst",
            "tp_src",
            "tp_dst",
            "nw_proto",
            "nw_tos",
            "nw_ttl",
            "nw_frag",
            "tcp_flags",
            "vlan_tpid",
            "vlan2_tpid",
            "vlan2_tci",
            "mpls_lse0",
            "mpls_lse1",
            "mpls_lse2",
            "ipv6_label",
            "ipv6_src",
            "ipv6_dst",
            "nd_target",
            "arp_sha",
            "arp_tha",
        ];
        for d in FIELDS {
            let word_bits = {
                let first = d.offset / 8;
                let last = (d.offset + d.len - 1) / 8;
                (u64::MAX >> (63 - (last - first))) << first
            };
            let is_packet = PACKET_FIELDS.contains(&d.name);
            if is_packet {
                assert_eq!(word_bits & PACKET_WORDS, word_bits, "{}", d.name);
            } else {
                assert_eq!(word_bits & PACKET_WORDS, 0, "{}", d.name);
            }
        }
    }

    #[test]
    fn accessors_round_trip_and_track_presence() {
        let mut k = FlowKey::new();
        assert_eq!(k.eth_type(), 0);
        k.set_eth_type(0x0800)
            .set_nw_src(Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(k.eth_type(), 0x0800);
        assert_eq!(k.eth_dst(), EthAddr::ZERO);
        assert_eq!(k.nw_src(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(k.map(), (1 << 1) | (1 << 3));
        // Network byte order in memory.
        assert_eq!(k.raw_word(1).to_ne_bytes()[6..8], [0x08, 0x00]);
        k.set_ipv6_src("2001:db8::1".parse().unwrap());
        assert_eq!(k.ipv6_src(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        k.clear_words(1 << 15);
        assert_eq!(k.ipv6_src(), "2001:db8::".parse::<Ipv6Addr>().unwrap());
    }

    #[test]
    fn stale_words_read_as_zero() {
        let mut k = FlowKey::new();
        k.set_tp_src(80);
        k.clear_words(PACKET_WORDS);
        assert_eq!(k.tp_src(), 0);
        // Setting a neighbour field in an absent word must not resurrect stale bytes.
        k.set_tp_dst(443);
        assert_eq!(k.tp_src(), 0);
        assert_eq!(k.tp_dst(), 443);
    }

    #[test]
    fn equality_is_semantic_exact_eq_is_not() {
        let mut a = FlowKey::new();
        let mut b = FlowKey::new();
        a.set_in_port(1);
        b.set_in_port(1);
        b.set_tp_src(0);
        assert_eq!(a, b);
        assert!(!a.exact_eq(&b));
        b.normalize();
        assert!(a.exact_eq(&b));
        assert_eq!(a.hash(0), b.hash(0));
    }

    #[test]
    fn geneve_options() {
        let mut k = FlowKey::new();
        let opts = [0x01, 0x02, 0x80, 0x01, 0x00, 0x03, 0x00, 0x02];
        k.set_tun_geneve_opts(&opts);
        let mut out = [0u8; GENEVE_OPTS_MAX];
        assert_eq!(k.tun_geneve_opts(&mut out), 8);
        assert_eq!(&out[..8], &opts);
        let big = [0xabu8; GENEVE_OPTS_MAX];
        k.set_tun_geneve_opts(&big);
        assert_eq!(k.tun_geneve_opts(&mut out), GENEVE_OPTS_MAX);
        assert_eq!(out, big);
        // The last option byte is the last byte of the key.
        assert_eq!(k.raw_word(63).to_ne_bytes()[7], 0xab);
    }

    #[test]
    fn match_and_masked_hash() {
        let mut k = FlowKey::new();
        k.set_in_port(3)
            .set_eth_type(0x0800)
            .set_nw_dst(Ipv4Addr::new(10, 1, 2, 3));
        let mut m = Mask::new();
        m.set_in_port(u32::MAX)
            .set_nw_dst(Ipv4Addr::new(255, 255, 0, 0));
        let mt = Match::new(&k, &m);
        assert_eq!(mt.key().nw_dst(), Ipv4Addr::new(10, 1, 0, 0));
        let mut k2 = k.clone();
        k2.set_nw_dst(Ipv4Addr::new(10, 1, 9, 9)).set_tp_src(7);
        assert!(mt.matches(&k2));
        assert_eq!(k.hash_masked(mt.mask(), 0), k2.hash_masked(mt.mask(), 0));
        k2.set_nw_dst(Ipv4Addr::new(10, 2, 0, 0));
        assert!(!mt.matches(&k2));
        k2.set_nw_dst(Ipv4Addr::new(10, 1, 0, 0)).set_in_port(4);
        assert!(!mt.matches(&k2));
    }

    /// Builds a FlowWords from (word index, value) pairs, some as explicit zero words.
    fn words_from(pairs: &[(usize, u64)]) -> FlowWords {
        let mut w = FlowWords::new();
        for &(i, v) in pairs {
            w.set_word(i, v);
        }
        w
    }

    /// Reference matcher: every field of the layout and every GENEVE option byte, compared
    /// byte by byte under the mask, without the word machinery.
    fn reference_matches(m: &Match, k: &FlowKey) -> bool {
        let (mk, mm) = (m.key().to_bytes(), m.mask().to_bytes());
        let kb = k.to_bytes();
        let field_ok =
            |ofs: usize, len: usize| (ofs..ofs + len).all(|b| kb[b] & mm[b] == mk[b] & mm[b]);
        FIELDS.iter().all(|d| field_ok(d.offset, d.len))
            && field_ok(GENEVE_OPTS_OFS, GENEVE_OPTS_MAX)
    }

    /// Clears the mask bytes that no field covers (layout padding): masks are built through
    /// field setters, which never select padding.
    fn clear_padding(mask: &mut Mask) {
        let mut covered = [false; KEY_BYTES];
        for d in FIELDS {
            covered[d.offset..d.offset + d.len].fill(true);
        }
        covered[GENEVE_OPTS_OFS..].fill(true);
        let bytes = mask.to_bytes();
        let mut m = Mask::new();
        for (i, c) in covered.iter().enumerate() {
            if *c && bytes[i] != 0 {
                m.set_bytes_at(i, &bytes[i..i + 1]);
            }
        }
        *mask = m;
    }

    fn sparse_words() -> impl proptest::strategy::Strategy<Value = Vec<(usize, u64)>> {
        use proptest::prelude::*;
        // Few distinct values per word so that random keys often agree with the match.
        let value = prop_oneof![
            Just(0u64),
            Just(u64::MAX),
            Just(0x0800),
            0u64..4,
            any::<u64>()
        ];
        // Mostly a handful of words, so that key, mask and probe overlap often.
        let index = prop_oneof![3 => 0usize..6, 1 => 0usize..KEY_WORDS];
        proptest::collection::vec((index, value), 0..12)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        #[test]
        fn masked_match_agrees_with_field_reference(
            kw in sparse_words(),
            mw in sparse_words(),
            pw in sparse_words(),
            copy in proptest::prelude::any::<bool>(),
        ) {
            let key = FlowKey(words_from(&kw));
            let mut mask = Mask(words_from(&mw));
            clear_padding(&mut mask);
            let m = Match::new(&key, &mask);
            // A probe key: either random or the match key with random changes.
            let mut probe = if copy { key.clone() } else { FlowKey::new() };
            for &(i, v) in &pw {
                probe.set_word(i, v);
            }
            proptest::prop_assert_eq!(m.matches(&probe), reference_matches(&m, &probe));
            proptest::prop_assert!(m.matches(&key));
            if m.matches(&probe) {
                proptest::prop_assert_eq!(
                    probe.hash_masked(m.mask(), 7),
                    key.hash_masked(m.mask(), 7)
                );
            }
        }

        #[test]
        fn equal_keys_hash_alike_after_normalize(kw in sparse_words()) {
            let a = FlowKey(words_from(&kw));
            let mut b = a.clone();
            b.normalize();
            let mut c = FlowKey::new();
            for d in FIELDS {
                let mut v = [0u8; 16];
                a.bytes_at(d.offset, &mut v[..d.len]);
                c.set_bytes_at(d.offset, &v[..d.len]);
            }
            let mut g = [0u8; GENEVE_OPTS_MAX];
            a.bytes_at(GENEVE_OPTS_OFS, &mut g);
            c.set_bytes_at(GENEVE_OPTS_OFS, &g);
            proptest::prop_assert_eq!(&a, &b);
            c.normalize();
            // Field-by-field copy equals the original wherever the layout names bytes.
            for d in FIELDS {
                let (mut x, mut y) = ([0u8; 16], [0u8; 16]);
                a.bytes_at(d.offset, &mut x[..d.len]);
                c.bytes_at(d.offset, &mut y[..d.len]);
                proptest::prop_assert_eq!(x, y, "{}", d.name);
            }
        }
    }

    #[test]
    fn mask_set_field_exact() {
        let mut m = Mask::new();
        assert!(m.set_field_exact("tp_dst"));
        assert!(!m.set_field_exact("nope"));
        assert_eq!(m.tp_dst(), 0xffff);
        assert_eq!(m.tp_src(), 0);
    }
}
