//! One-pass extraction of a [`FlowKey`] from a packet, as OVS's `miniflow_extract()` does it.
//!
//! The extractor reads L2 (Ethernet II, 802.3 LLC/SNAP, up to two 802.1Q/802.1ad tags), L2.5
//! (MPLS, up to three label stack entries kept), L3 (IPv4 with options and fragments, IPv6 with
//! hop-by-hop, routing, fragment, destination-options and AH headers, ARP/RARP) and L4 (TCP with
//! flags, UDP, SCTP, ICMP, ICMPv6 with Neighbor Discovery). Tunnel headers are not parsed here:
//! `tnl_pop` decapsulates and fills the tunnel metadata.
//!
//! It rewrites exactly the key's packet words ([`PACKET_WORDS`]) and leaves metadata words
//! (in_port, recirc_id, tunnel, conntrack) as the caller set them. Each word is assembled in a
//! register and stored whole, so the key buffer can be reused without clearing.
//!
//! Malformed input never panics and is never read out of bounds. As in OVS, a header that fails
//! its sanity check contributes nothing and parsing stops there: the key holds what was parsed
//! before (a truncated TCP header leaves the ports zero; an IPv4 header whose total length
//! exceeds the frame leaves only the Ethernet fields). The first problem found is returned as a
//! [`Malformed`] reason for the caller to count.

use crate::hash::crc32c_u64;
use crate::key::{FlowKey, PACKET_WORDS, VLAN_CFI, nw_frag};

/// Marks an absent layer offset in [`Layers`].
pub const NO_LAYER: u16 = u16::MAX;

/// Offsets of the headers found, from the start of the packet ([`NO_LAYER`] when absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layers {
    /// First MPLS label stack entry.
    pub l2_5: u16,
    /// IPv4, IPv6 or ARP header.
    pub l3: u16,
    /// TCP, UDP, SCTP, ICMP or ICMPv6 header.
    pub l4: u16,
}

impl Default for Layers {
    fn default() -> Self {
        Layers {
            l2_5: NO_LAYER,
            l3: NO_LAYER,
            l4: NO_LAYER,
        }
    }
}

macro_rules! malformed {
    ($($(#[$doc:meta])* $v:ident => $name:literal,)*) => {
        /// Why a packet's headers could not be parsed completely; counted, never fatal.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Malformed {
            $($(#[$doc])* $v,)*
        }

        impl Malformed {
            /// Every reason, in declaration order (for per-reason counter arrays).
            pub const ALL: &'static [Malformed] = &[$(Malformed::$v,)*];

            /// A short stable name for counters and summaries.
            pub fn name(self) -> &'static str {
                match self {
                    $(Malformed::$v => $name,)*
                }
            }
        }
    };
}

malformed! {
    /// Shorter than an Ethernet header (14 bytes).
    Runt => "runt",
    /// A VLAN tag cut short.
    VlanTruncated => "vlan_truncated",
    /// A third or further VLAN tag (only two are parsed; the frame's L3 is not looked at).
    VlanTooMany => "vlan_too_many",
    /// An MPLS label stack that ends without a bottom-of-stack entry.
    MplsTruncated => "mpls_truncated",
    /// Fewer bytes than an IPv4 header.
    Ipv4Truncated => "ipv4_truncated",
    /// IPv4 header length below 20 or past the frame.
    Ipv4BadHeaderLen => "ipv4_bad_header_len",
    /// IPv4 total length below the header length or past the frame.
    Ipv4BadTotalLen => "ipv4_bad_total_len",
    /// Fewer bytes than an IPv6 header.
    Ipv6Truncated => "ipv6_truncated",
    /// IPv6 payload length past the frame.
    Ipv6BadPayloadLen => "ipv6_bad_payload_len",
    /// An IPv6 extension header cut short.
    Ipv6ExtTruncated => "ipv6_ext_truncated",
    /// An ARP packet shorter than the Ethernet/IPv4 ARP layout.
    ArpTruncated => "arp_truncated",
    /// Fewer bytes than a TCP header.
    TcpTruncated => "tcp_truncated",
    /// TCP data offset below 5 words or past the segment.
    TcpBadOffset => "tcp_bad_offset",
    /// Fewer bytes than a UDP header.
    UdpTruncated => "udp_truncated",
    /// Fewer bytes than an SCTP common header.
    SctpTruncated => "sctp_truncated",
    /// Fewer bytes than an ICMP header.
    IcmpTruncated => "icmp_truncated",
    /// Fewer bytes than an ICMPv6 header.
    Icmpv6Truncated => "icmpv6_truncated",
    /// A Neighbor Solicitation or Advertisement cut short or with a bad or repeated option.
    NdInvalid => "nd_invalid",
}

/// What extraction found besides the key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    /// Header offsets, for actions that rewrite headers.
    pub layers: Layers,
    /// The first problem found, if any.
    pub malformed: Option<Malformed>,
    /// The key's datapath hash, [`FlowWords::hash`]`(0)`, computed while its words are hot.
    ///
    /// [`FlowWords::hash`]: crate::key::FlowWords::hash
    pub hash: u32,
}

/// Ethertypes the extractor dispatches on.
mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const RARP: u16 = 0x8035;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const IPV6: u16 = 0x86dd;
    pub const MPLS: u16 = 0x8847;
    pub const MPLS_MCAST: u16 = 0x8848;
    /// Values below this are 802.3 lengths.
    pub const MIN: u16 = 0x0600;
    /// OVS's ethertype for an 802.3 frame without a SNAP ethertype.
    pub const NONE: u16 = 0x05ff;
}

/// IP protocol numbers the extractor dispatches on.
mod ipproto {
    pub const HOPOPTS: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const DSTOPTS: u8 = 60;
    pub const SCTP: u8 = 132;
}

// Word indices of the packet fields (see the layout in `key.rs`).
const W_ETH_DST_TYPE: usize = 1;
const W_ETH_SRC_TCI: usize = 2;
const W_NW_ADDRS: usize = 3;
const W_NW_L4: usize = 4;
const W_TCP_VLAN2: usize = 5;
const W_MPLS01: usize = 12;
const W_MPLS2_LABEL: usize = 13;
const W_IPV6_SRC: usize = 14;
const W_IPV6_DST: usize = 16;
const W_ND_TARGET: usize = 18;
const W_SHA: usize = 20;
const W_THA: usize = 21;

#[inline(always)]
fn be16(p: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([p[o], p[o + 1]])
}

/// Eight bytes of `p` from `o` as a key word (memory order, so network order is kept).
#[inline(always)]
fn word_at(p: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&p[o..o + 8]);
    u64::from_ne_bytes(a)
}

/// A key word from its eight bytes.
#[inline(always)]
fn word(b: [u8; 8]) -> u64 {
    u64::from_ne_bytes(b)
}

/// Word [`W_ETH_DST_TYPE`] of an L3 packet of ethertype `t`: OVS keys it with the ethertype
/// and no Ethernet addresses.
#[inline(always)]
fn l3_type_word(t: u16) -> u64 {
    let t = t.to_be_bytes();
    word([0, 0, 0, 0, 0, 0, t[0], t[1]])
}

/// Replaces the last two bytes (in memory order) of the word `w`.
#[inline(always)]
fn with_tail(w: u64, tail: [u8; 2]) -> u64 {
    let t = u16::from_ne_bytes(tail) as u64;
    if cfg!(target_endian = "little") {
        (w & 0x0000_ffff_ffff_ffff) | (t << 48)
    } else {
        (w & !0xffff) | t
    }
}

/// A key word holding a MAC address (six bytes from `p[o..]`) and two more bytes. Needs eight
/// readable bytes at `o`: one load and a splice instead of eight byte moves.
#[inline(always)]
fn mac_word(p: &[u8], o: usize, tail: [u8; 2]) -> u64 {
    with_tail(word_at(p, o), tail)
}

/// A word from two 4-byte halves, each in memory order.
#[inline(always)]
fn halves(lo: [u8; 4], hi: [u8; 4]) -> u64 {
    let (lo, hi) = (u32::from_ne_bytes(lo) as u64, u32::from_ne_bytes(hi) as u64);
    if cfg!(target_endian = "little") {
        lo | (hi << 32)
    } else {
        (lo << 32) | hi
    }
}

/// The L3/L4 word: the two 16-bit port-or-type fields (`ports`: their four bytes in memory
/// order), protocol, TOS, TTL, fragment flags.
#[inline(always)]
fn l4_word(ports: u32, proto: u8, tos: u8, ttl: u8, frag: u8) -> u64 {
    halves(ports.to_ne_bytes(), [proto, tos, ttl, frag])
}

/// Extraction state: the key being written, the words stored so far (marked present at the end,
/// in one store) and the pieces of word 5, which mixes TCP flags with VLAN fields.
struct Cx<'k> {
    key: &'k mut FlowKey,
    map: u64,
    out: Extracted,
    tcp_flags: u16,
    vlan_tpid: [u16; 2],
    vlan2_tci: u16,
}

impl<'k> Cx<'k> {
    #[inline(always)]
    fn put(&mut self, i: usize, v: u64) {
        self.key.put_word(i, v);
        self.map |= 1 << i;
    }

    #[inline(always)]
    fn bad(&mut self, why: Malformed) {
        self.out.malformed = Some(why);
    }

    /// Marks the stored words present; returns the key and the result.
    #[inline(always)]
    fn finish(mut self) -> (&'k FlowKey, Extracted) {
        if self.tcp_flags != 0 || self.vlan_tpid[0] != 0 {
            let (f, a, b, c) = (
                self.tcp_flags.to_be_bytes(),
                self.vlan_tpid[0].to_be_bytes(),
                self.vlan_tpid[1].to_be_bytes(),
                self.vlan2_tci.to_be_bytes(),
            );
            self.put(
                W_TCP_VLAN2,
                word([f[0], f[1], a[0], a[1], b[0], b[1], c[0], c[1]]),
            );
        }
        self.key.mark_words(self.map);
        (self.key, self.out)
    }
}

/// Extracts the packet fields of `key` from `pkt`. Metadata words of `key` are kept; a
/// `packet_type` other than Ethernet (namespace 1, an ethertype) makes the packet start at L3.
/// Always inlined: the fast path is the datapath's per-packet work, and a call costs it.
#[inline(always)]
pub fn extract(pkt: &[u8], key: &mut FlowKey) -> Extracted {
    extract_with::<true>(pkt, key)
}

/// [`extract`] without the hash (`hash` is 0): for a lookup that needs none (a masked compare
/// against a few megaflows); [`FlowWords::hash`]`(0)` of the key gives it later if needed.
///
/// [`FlowWords::hash`]: crate::key::FlowWords::hash
#[inline(always)]
pub fn extract_unhashed(pkt: &[u8], key: &mut FlowKey) -> Extracted {
    extract_with::<false>(pkt, key)
}

#[inline(always)]
fn extract_with<const HASH: bool>(pkt: &[u8], key: &mut FlowKey) -> Extracted {
    key.clear_words(PACKET_WORDS);
    let packet_type = packet_type_of(key);
    // The common case first, entirely in registers.
    if packet_type == 0
        && let Some(out) = extract_ipv4_fast::<HASH>(pkt, key)
    {
        return out;
    }
    if packet_type == MPLS_L3
        && let Some(out) = extract_mpls_l3_fast::<HASH>(pkt, key)
    {
        return out;
    }
    if HASH {
        extract_general(pkt, key, packet_type)
    } else {
        extract_general_unhashed(pkt, key, packet_type)
    }
}

/// The packet type of an L3 MPLS packet (unicast), as a GRE tunnel with
/// `packet_type=legacy_l3` delivers the seeds' MPLSoGRE payload.
const MPLS_L3: u32 = 1 << 16 | ethertype::MPLS as u32;

/// An L3 MPLS packet whose first label stack entry is the bottom of its stack (one label: the
/// seeds' MPLSoGRE VPN labels): the ethertype word and the entry's, as the general path writes
/// them, without its per-layer dispatch. Declines (`None`) every other packet, the truncated
/// ones included, for the general path to decide.
#[inline(always)]
fn extract_mpls_l3_fast<const HASH: bool>(pkt: &[u8], key: &mut FlowKey) -> Option<Extracted> {
    let &e = pkt.first_chunk::<4>()?;
    if e[2] & 0x01 == 0 {
        return None;
    }
    key.put_word(W_ETH_DST_TYPE, l3_type_word(ethertype::MPLS));
    key.put_word(W_MPLS01, halves(e, [0; 4]));
    key.mark_words(1 << W_ETH_DST_TYPE | 1 << W_MPLS01);
    Some(Extracted {
        layers: Layers {
            l2_5: 0,
            ..Layers::default()
        },
        malformed: None,
        hash: if HASH { key.hash(0) } else { 0 },
    })
}

/// The packet type `key`'s metadata gives: word 11 (packet type with conntrack metadata) is
/// present only for recirculated or decapsulated packets, so the map is tested before it is
/// read.
#[inline(always)]
fn packet_type_of(key: &FlowKey) -> u32 {
    if key.map() & (1 << 11) != 0 {
        key.packet_type()
    } else {
        0
    }
}

/// The TCP flags of word 5 as [`ipv4_fast_words`] gives it (zero for none).
#[inline(always)]
pub fn tcp_flags_of_word(w: u64) -> u16 {
    let b = w.to_ne_bytes();
    u16::from_be_bytes([b[0], b[1]])
}

/// Word [`W_TCP_VLAN2`] holding TCP flags `flags` (and no second VLAN tag).
#[inline(always)]
fn tcp_flags_word(flags: u16) -> u64 {
    let f = flags.to_be_bytes();
    word([f[0], f[1], 0, 0, 0, 0, 0, 0])
}

/// Every frame the fast path declines: VLANs, LLC/SNAP, MPLS, IPv6, ARP, L3 packet types, IPv4
/// with options or fragments, other transports, and anything malformed.
fn extract_general(pkt: &[u8], key: &mut FlowKey, packet_type: u32) -> Extracted {
    extract_general_with::<true>(pkt, key, packet_type)
}

/// [`extract_general`] without the hash.
fn extract_general_unhashed(pkt: &[u8], key: &mut FlowKey, packet_type: u32) -> Extracted {
    extract_general_with::<false>(pkt, key, packet_type)
}

#[inline(always)]
fn extract_general_with<const HASH: bool>(
    pkt: &[u8],
    key: &mut FlowKey,
    packet_type: u32,
) -> Extracted {
    let mut cx = Cx {
        key,
        map: 0,
        out: Extracted::default(),
        tcp_flags: 0,
        vlan_tpid: [0; 2],
        vlan2_tci: 0,
    };

    let (ofs, eth_type) = if packet_type == 0 {
        match parse_l2(pkt, &mut cx) {
            Some(v) => v,
            None => return finish_hashed::<HASH>(cx),
        }
    } else {
        // An L3 packet (e.g. from a GRE tunnel with packet_type=legacy_l3): OVS keys it with
        // the ethertype taken from the packet type and no Ethernet addresses.
        if packet_type >> 16 != 1 {
            return finish_hashed::<HASH>(cx);
        }
        cx.put(W_ETH_DST_TYPE, l3_type_word(packet_type as u16));
        (0, packet_type as u16)
    };

    match eth_type {
        ethertype::IPV4 => parse_ipv4(pkt, ofs, &mut cx),
        ethertype::IPV6 => parse_ipv6(pkt, ofs, &mut cx),
        ethertype::ARP | ethertype::RARP => parse_arp(pkt, ofs, &mut cx),
        ethertype::MPLS | ethertype::MPLS_MCAST => parse_mpls(pkt, ofs, &mut cx),
        _ => {}
    }
    finish_hashed::<HASH>(cx)
}

/// Marks the words and hashes the whole key.
fn finish_hashed<const HASH: bool>(cx: Cx) -> Extracted {
    let (key, mut out) = cx.finish();
    if HASH {
        out.hash = key.hash(0);
    }
    out
}

/// Untagged Ethernet II, IPv4 with a 20-byte header, not a fragment, carrying UDP, TCP or a
/// protocol without key fields (GRE, ESP, ...): the seeds' traffic. Declines (returns `None`)
/// anything else, including every malformed frame, so that the general path decides and counts
/// it; for frames it takes, the result equals the general path's. The words are built and
/// hashed in registers, in index order, so the hash equals [`FlowWords::hash`]`(0)`.
///
/// [`FlowWords::hash`]: crate::key::FlowWords::hash
#[inline(always)]
fn extract_ipv4_fast<const HASH: bool>(pkt: &[u8], key: &mut FlowKey) -> Option<Extracted> {
    let (w, layers) = ipv4_fast_words(pkt)?;
    let [w1, w2, w3, w4, w5] = w;
    key.put_word(W_ETH_DST_TYPE, w1);
    key.put_word(W_ETH_SRC_TCI, w2);
    key.put_word(W_NW_ADDRS, w3);
    key.put_word(W_NW_L4, w4);
    let mut words = 0b1_1110;
    if w5 != 0 {
        key.put_word(W_TCP_VLAN2, w5);
        words |= 1 << W_TCP_VLAN2;
    }
    key.mark_words(words);
    if !HASH {
        return Some(Extracted {
            layers,
            malformed: None,
            hash: 0,
        });
    }

    let map = key.map();
    let mut h = 0;
    if map & 1 != 0 {
        h = crc32c_u64(h, key.raw_word(0));
    }
    h = crc32c_u64(h, w1);
    h = crc32c_u64(h, w2);
    h = crc32c_u64(h, w3);
    h = crc32c_u64(h, w4);
    if w5 != 0 {
        h = crc32c_u64(h, w5);
    }
    // Metadata words above the first cache line (tunnel, conntrack), in index order.
    let mut rest = map & !0x3f;
    while rest != 0 {
        let i = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        h = crc32c_u64(h, key.raw_word(i));
    }
    Some(Extracted {
        layers,
        malformed: None,
        hash: crc32c_u64(h, map),
    })
}

/// The packet words of a frame of the common shape (the frames the fast path of [`extract`]
/// takes: Ethernet without VLAN, IPv4 without options and not a fragment, a well-formed UDP or
/// TCP header or a transport without key fields) without a key: words 1 to 5 as [`extract`]
/// writes them, word 5 (TCP flags) zero when it writes none, and the frame's header offsets.
/// An Ethernet frame's key extracted from such a frame holds its metadata words, these, and
/// no other packet word. `None` for every other frame.
#[inline(always)]
pub fn ipv4_fast_words(pkt: &[u8]) -> Option<([u64; 5], Layers)> {
    let Ipv4Fast {
        proto,
        tcp_flags,
        ports,
        l4,
    } = ipv4_fast(pkt)?;
    let w5 = if tcp_flags != 0 {
        tcp_flags_word(tcp_flags)
    } else {
        0
    };
    Some((
        [
            mac_word(pkt, 0, [0x08, 0x00]),
            mac_word(pkt, 6, [0, 0]),
            word_at(pkt, 26),
            l4_word(ports, proto, pkt[15], pkt[22], 0),
            w5,
        ],
        ipv4_fast_layers(l4),
    ))
}

/// What [`ipv4_fast`] reads of a frame the fast path takes.
struct Ipv4Fast {
    proto: u8,
    tcp_flags: u16,
    /// The L4 ports as they lie in the frame (0 for a transport without ports).
    ports: u32,
    /// The L4 offset: 34 for UDP and TCP, none for a transport without key fields.
    l4: u16,
}

/// The frames [`extract_ipv4_fast`] takes: Ethernet without VLAN, IPv4 without options and
/// not a fragment, UDP or TCP whole enough for their key fields, or a transport without key
/// fields. Everything else is `None`.
#[inline(always)]
fn ipv4_fast(pkt: &[u8]) -> Option<Ipv4Fast> {
    if pkt.len() < 34 || pkt[12..14] != [0x08, 0x00] || pkt[14] != 0x45 {
        return None;
    }
    let tot = be16(pkt, 16) as usize;
    if tot < 20 || tot > pkt.len() - 14 || be16(pkt, 20) & 0x3fff != 0 {
        return None;
    }
    let proto = pkt[23];
    let mut tcp_flags = 0;
    let (ports, l4) = match proto {
        ipproto::UDP if tot >= 28 => (u32::from_ne_bytes([pkt[34], pkt[35], pkt[36], pkt[37]]), 34),
        ipproto::TCP if tot >= 40 => {
            let doff = ((pkt[46] >> 4) as usize) * 4;
            if doff < 20 || doff > tot - 20 {
                return None;
            }
            tcp_flags = be16(pkt, 46) & 0x0fff;
            (u32::from_ne_bytes([pkt[34], pkt[35], pkt[36], pkt[37]]), 34)
        }
        ipproto::UDP | ipproto::TCP | ipproto::SCTP | ipproto::ICMP => return None,
        _ => (0, NO_LAYER),
    };
    Some(Ipv4Fast {
        proto,
        tcp_flags,
        ports,
        l4,
    })
}

#[inline(always)]
fn ipv4_fast_layers(l4: u16) -> Layers {
    Layers {
        l2_5: NO_LAYER,
        l3: 14,
        l4,
    }
}

/// The packet fields a megaflow may look at and still be matched by the datapath's simple
/// match ([`extract_simple`]): the ethertype, the VLAN TCI and the fragment flags, whole.
pub fn simple_fields() -> crate::Mask {
    let mut m = crate::Mask::new();
    m.set_eth_type(0xffff)
        .set_vlan_tci(0xffff)
        .set_nw_frag(0xff);
    m
}

/// The ethertype of every frame [`extract_simple`] takes (its VLAN TCI and fragment flags are
/// zero).
pub const SIMPLE_ETH_TYPE: u16 = ethertype::IPV4;

/// For the datapath's simple match: when `pkt` is a frame of the common shape (what the fast
/// path of [`extract`] takes: Ethernet without VLAN, IPv4 without options and not a fragment,
/// a well-formed UDP or TCP header or a transport without key fields) and `key`'s metadata
/// says it is a frame of Ethernet, returns its header offsets and leaves `key` as [`extract`]
/// would in what the simple match needs: its metadata and TCP flags, and none of its other
/// packet words (they read as zero). Such a frame's ethertype is [`SIMPLE_ETH_TYPE`], its VLAN
/// TCI zero (no tag) and its fragment flags zero, so a megaflow that looks at no packet field
/// outside [`simple_fields`] matches it or not whatever its other bytes hold. `None` for every
/// other frame; `key` is then unchanged.
#[inline(always)]
pub fn extract_simple(pkt: &[u8], key: &mut FlowKey) -> Option<Layers> {
    if packet_type_of(key) != 0 {
        return None;
    }
    let f = ipv4_fast(pkt)?;
    key.clear_words(PACKET_WORDS);
    if f.tcp_flags != 0 {
        key.put_word(W_TCP_VLAN2, tcp_flags_word(f.tcp_flags));
        key.mark_words(1 << W_TCP_VLAN2);
    }
    Some(ipv4_fast_layers(f.l4))
}

/// The key bits a translation (NAT) of an IPv4 TCP or UDP packet changes: its addresses and
/// ports, which [`rekey_ipv4_nat`] makes again.
pub fn ipv4_nat_fields() -> crate::Mask {
    let mut m = crate::Mask::new();
    m.set_nw_src(std::net::Ipv4Addr::BROADCAST)
        .set_nw_dst(std::net::Ipv4Addr::BROADCAST)
        .set_tp_src(0xffff)
        .set_tp_dst(0xffff);
    m
}

/// After a translation (NAT) of the IPv4 TCP or UDP packet `pkt` that `key` was extracted
/// from (`l3`, `l4`: its header offsets), writes the packet's addresses and ports into `key`
/// as [`extract`] makes them, its other words kept: the key is then the translated packet's,
/// without parsing it again. False, `key` untouched, when `key` has no such words or the
/// frame is too short for them.
#[inline]
pub fn rekey_ipv4_nat(pkt: &[u8], l3: usize, l4: usize, key: &mut FlowKey) -> bool {
    let words = (1 << W_NW_ADDRS) | (1 << W_NW_L4);
    let (Some(addrs), Some(ports)) = (
        pkt.get(l3 + 12..l3 + 20).and_then(|a| a.first_chunk::<8>()),
        pkt.get(l4..l4 + 4),
    ) else {
        return false;
    };
    if key.map() & words != words {
        return false;
    }
    key.put_word(W_NW_ADDRS, word(*addrs));
    let mut w = key.raw_word(W_NW_L4).to_ne_bytes();
    w[..4].copy_from_slice(ports);
    key.put_word(W_NW_L4, word(w));
    true
}

/// Ethernet, VLAN tags and LLC/SNAP. Returns the L3 offset and the innermost ethertype.
#[inline(always)]
fn parse_l2(pkt: &[u8], cx: &mut Cx) -> Option<(usize, u16)> {
    if pkt.len() < 14 {
        cx.bad(Malformed::Runt);
        return None;
    }
    let mut ofs = 12;
    let mut tci = [0u16; 2];
    let mut n_vlan = 0;
    let mut ty = be16(pkt, 12);
    while ty == ethertype::VLAN || ty == ethertype::QINQ {
        // A tag past `vlan-limit` is payload (only a double-tagged frame reads the limit).
        if n_vlan == 1 && crate::vlan_limit::vlan_limit() < 2 {
            break;
        }
        if n_vlan == 2 {
            cx.bad(Malformed::VlanTooMany);
            break;
        }
        if pkt.len() < ofs + 6 {
            cx.bad(Malformed::VlanTruncated);
            break;
        }
        cx.vlan_tpid[n_vlan] = ty;
        tci[n_vlan] = be16(pkt, ofs + 2) | VLAN_CFI;
        n_vlan += 1;
        ofs += 4;
        ty = be16(pkt, ofs);
    }
    ofs += 2;
    // With a cut-short or third tag the TPID stands as the ethertype and L3 is not parsed, as
    // in OVS.
    let stop = cx.out.malformed.is_some();

    if ty < ethertype::MIN && !stop {
        // 802.3 length field: look for an LLC/SNAP header with an Ethernet OUI.
        ty = ethertype::NONE;
        if pkt.len() >= ofs + 8 && pkt[ofs..ofs + 6] == [0xaa, 0xaa, 0x03, 0, 0, 0] {
            let snap = be16(pkt, ofs + 6);
            if snap >= ethertype::MIN {
                ty = snap;
                ofs += 8;
            }
        }
    }

    cx.put(W_ETH_DST_TYPE, mac_word(pkt, 0, ty.to_be_bytes()));
    cx.put(W_ETH_SRC_TCI, mac_word(pkt, 6, tci[0].to_be_bytes()));
    cx.vlan2_tci = tci[1];
    if stop { None } else { Some((ofs, ty)) }
}

fn parse_mpls(pkt: &[u8], ofs: usize, cx: &mut Cx) {
    cx.out.layers.l2_5 = ofs as u16;
    // The entries are kept in registers, not in an array: stored as 4-byte entries and read
    // back as one 8-byte word, they made a load the store buffer could not forward, a stall
    // in every MPLS packet's extraction.
    let [mut lse0, mut lse1, mut lse2] = [[0u8; 4]; 3];
    let mut n = 0;
    let mut p = ofs;
    loop {
        let Some(&e) = pkt.get(p..p + 4).and_then(|e| e.first_chunk::<4>()) else {
            cx.bad(Malformed::MplsTruncated);
            break;
        };
        match n {
            0 => lse0 = e,
            1 => lse1 = e,
            2 => lse2 = e,
            _ => {}
        }
        n += 1;
        p += 4;
        if e[2] & 0x01 != 0 {
            break;
        }
    }
    if n > 0 {
        cx.put(W_MPLS01, halves(lse0, lse1));
    }
    if n > 2 {
        cx.put(W_MPLS2_LABEL, halves(lse2, [0; 4]));
    }
}

#[inline(always)]
fn parse_ipv4(pkt: &[u8], ofs: usize, cx: &mut Cx) {
    let Some(h) = pkt.get(ofs..ofs + 20) else {
        cx.bad(Malformed::Ipv4Truncated);
        return;
    };
    let avail = pkt.len() - ofs;
    // Options are rare: test for the plain 20-byte header before computing the length.
    let ihl = if h[0] == 0x45 {
        20
    } else {
        ((h[0] & 0x0f) as usize) * 4
    };
    if ihl < 20 || ihl > avail {
        cx.bad(Malformed::Ipv4BadHeaderLen);
        return;
    }
    let tot = be16(h, 2) as usize;
    if tot > avail || tot < ihl {
        cx.bad(Malformed::Ipv4BadTotalLen);
        return;
    }
    cx.out.layers.l3 = ofs as u16;
    cx.put(W_NW_ADDRS, word_at(h, 12));
    let (tos, ttl, proto) = (h[1], h[8], h[9]);
    let frag_off = be16(h, 6);
    let mut frag = 0;
    if frag_off & 0x3fff != 0 {
        frag = nw_frag::ANY;
        if frag_off & 0x1fff != 0 {
            frag |= nw_frag::LATER;
        }
    }
    // L4 ends where the IP datagram ends; Ethernet padding is not payload.
    let ports = if frag & nw_frag::LATER == 0 {
        parse_l4(pkt, ofs + ihl, ofs + tot, proto, false, cx)
    } else {
        0
    };
    cx.put(W_NW_L4, l4_word(ports, proto, tos, ttl, frag));
}

fn parse_ipv6(pkt: &[u8], ofs: usize, cx: &mut Cx) {
    let Some(h) = pkt.get(ofs..ofs + 40) else {
        cx.bad(Malformed::Ipv6Truncated);
        return;
    };
    let plen = be16(h, 4) as usize;
    if plen + 40 > pkt.len() - ofs {
        cx.bad(Malformed::Ipv6BadPayloadLen);
        return;
    }
    cx.out.layers.l3 = ofs as u16;
    cx.put(W_IPV6_SRC, word_at(h, 8));
    cx.put(W_IPV6_SRC + 1, word_at(h, 16));
    cx.put(W_IPV6_DST, word_at(h, 24));
    cx.put(W_IPV6_DST + 1, word_at(h, 32));
    let vtcfl = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    cx.put(
        W_MPLS2_LABEL,
        halves([0; 4], (vtcfl & 0x000f_ffff).to_be_bytes()),
    );
    let tclass = (vtcfl >> 20) as u8;
    let hlim = h[7];
    let end = ofs + 40 + plen;

    let mut nh = h[6];
    let mut p = ofs + 40;
    let mut frag = 0;
    loop {
        match nh {
            ipproto::HOPOPTS | ipproto::ROUTING | ipproto::DSTOPTS | ipproto::AH => {
                if p + 8 > end {
                    cx.bad(Malformed::Ipv6ExtTruncated);
                    return;
                }
                let len = if nh == ipproto::AH {
                    (pkt[p + 1] as usize + 2) * 4
                } else {
                    (pkt[p + 1] as usize + 1) * 8
                };
                if p + len > end {
                    cx.bad(Malformed::Ipv6ExtTruncated);
                    return;
                }
                nh = pkt[p];
                p += len;
            }
            ipproto::FRAGMENT => {
                if p + 8 > end {
                    cx.bad(Malformed::Ipv6ExtTruncated);
                    return;
                }
                let off_flags = be16(pkt, p + 2);
                nh = pkt[p];
                p += 8;
                // RFC 6946: an atomic fragment (offset 0, M clear) is not a fragment.
                if off_flags != 0 {
                    frag = nw_frag::ANY;
                    if off_flags & 0xfff8 != 0 {
                        // As OVS and the Linux datapath: a later fragment keys the fragment
                        // header as its protocol, since no transport header follows.
                        frag |= nw_frag::LATER;
                        nh = ipproto::FRAGMENT;
                        break;
                    }
                }
            }
            _ => break,
        }
    }
    let ports = if frag & nw_frag::LATER == 0 {
        parse_l4(pkt, p, end, nh, true, cx)
    } else {
        0
    };
    cx.put(W_NW_L4, l4_word(ports, nh, tclass, hlim, frag));
}

fn parse_arp(pkt: &[u8], ofs: usize, cx: &mut Cx) {
    let Some(a) = pkt.get(ofs..ofs + 28) else {
        cx.bad(Malformed::ArpTruncated);
        return;
    };
    cx.out.layers.l3 = ofs as u16;
    // Only Ethernet/IPv4 ARP has fields in the key.
    if be16(a, 0) != 1 || be16(a, 2) != ethertype::IPV4 || a[4] != 6 || a[5] != 4 {
        return;
    }
    let op = be16(a, 6);
    let op8 = if op <= 0xff { op as u8 } else { 0 };
    let (spa, tpa) = (&a[14..18], &a[24..28]);
    cx.put(
        W_NW_ADDRS,
        halves(
            [spa[0], spa[1], spa[2], spa[3]],
            [tpa[0], tpa[1], tpa[2], tpa[3]],
        ),
    );
    cx.put(W_NW_L4, l4_word(0, op8, 0, 0, 0));
    cx.put(W_SHA, mac_word(a, 8, [0, 0]));
    cx.put(W_THA, mac_word(a, 18, [0, 0]));
}

/// Parses the transport header at `l4` (payload ends at `end`) and returns the two 16-bit
/// port-or-type fields as they sit in the key (four bytes in memory order).
#[inline(always)]
fn parse_l4(pkt: &[u8], l4: usize, end: usize, proto: u8, ipv6: bool, cx: &mut Cx) -> u32 {
    let size = end.saturating_sub(l4);
    // Both ports as one 4-byte load, kept in memory (network) order.
    let ports = |pkt: &[u8]| -> u32 {
        let mut a = [0u8; 4];
        a.copy_from_slice(&pkt[l4..l4 + 4]);
        u32::from_ne_bytes(a)
    };
    if proto == ipproto::UDP {
        if size < 8 {
            cx.bad(Malformed::UdpTruncated);
            return 0;
        }
        cx.out.layers.l4 = l4 as u16;
        return ports(pkt);
    }
    if proto == ipproto::TCP {
        if size < 20 {
            cx.bad(Malformed::TcpTruncated);
            return 0;
        }
        let doff = ((pkt[l4 + 12] >> 4) as usize) * 4;
        if doff < 20 || doff > size {
            cx.bad(Malformed::TcpBadOffset);
            return 0;
        }
        cx.out.layers.l4 = l4 as u16;
        cx.tcp_flags = be16(pkt, l4 + 12) & 0x0fff;
        return ports(pkt);
    }
    if proto != ipproto::SCTP && proto != ipproto::ICMP && proto != ipproto::ICMPV6 {
        // GRE, ESP and the rest: no L4 fields in the key.
        return 0;
    }
    parse_l4_other(pkt, l4, end, size, proto, ipv6, cx)
}

/// SCTP, ICMP and ICMPv6: out of line, to keep the UDP and TCP path short.
fn parse_l4_other(
    pkt: &[u8],
    l4: usize,
    end: usize,
    size: usize,
    proto: u8,
    ipv6: bool,
    cx: &mut Cx,
) -> u32 {
    match proto {
        ipproto::SCTP => {
            if size < 12 {
                cx.bad(Malformed::SctpTruncated);
                return 0;
            }
            cx.out.layers.l4 = l4 as u16;
            u32::from_ne_bytes([pkt[l4], pkt[l4 + 1], pkt[l4 + 2], pkt[l4 + 3]])
        }
        ipproto::ICMP if !ipv6 => {
            if size < 8 {
                cx.bad(Malformed::IcmpTruncated);
                return 0;
            }
            cx.out.layers.l4 = l4 as u16;
            u32::from_ne_bytes([0, pkt[l4], 0, pkt[l4 + 1]])
        }
        ipproto::ICMPV6 if ipv6 => {
            if size < 8 {
                cx.bad(Malformed::Icmpv6Truncated);
                return 0;
            }
            cx.out.layers.l4 = l4 as u16;
            let (ty, code) = (pkt[l4], pkt[l4 + 1]);
            if code == 0 && (ty == 135 || ty == 136) && !parse_nd(pkt, l4, end, cx) {
                cx.bad(Malformed::NdInvalid);
            }
            u32::from_ne_bytes([0, ty, 0, code])
        }
        _ => 0,
    }
}

/// Neighbor Solicitation (135) or Advertisement (136): target and link-layer address options.
/// On a cut-short message or a bad or repeated option no ND field is set, as in OVS.
fn parse_nd(pkt: &[u8], l4: usize, end: usize, cx: &mut Cx) -> bool {
    if end < l4 + 24 {
        return false;
    }
    let mut sll: Option<&[u8]> = None;
    let mut tll: Option<&[u8]> = None;
    let mut p = l4 + 24;
    while end - p >= 8 {
        let (ty, len) = (pkt[p], pkt[p + 1] as usize * 8);
        if len == 0 || len > end - p {
            return false;
        }
        if len == 8 {
            let mac = &pkt[p + 2..p + 8];
            let slot = match ty {
                1 => &mut sll,
                2 => &mut tll,
                _ => {
                    p += len;
                    continue;
                }
            };
            if slot.is_some() {
                return false;
            }
            *slot = Some(mac);
        }
        p += len;
    }
    cx.put(W_ND_TARGET, word_at(pkt, l4 + 8));
    cx.put(W_ND_TARGET + 1, word_at(pkt, l4 + 16));
    let mac = |m: &[u8]| word([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0]);
    if let Some(m) = sll {
        cx.put(W_SHA, mac(m));
    }
    if let Some(m) = tll {
        cx.put(W_THA, mac(m));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::EthAddr;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn eth(ty: u16) -> Vec<u8> {
        let mut p = vec![
            0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0, 0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48,
        ];
        p.extend_from_slice(&ty.to_be_bytes());
        p
    }

    fn ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
        let tot = (20 + payload.len()) as u16;
        let mut h = vec![0x45, 0x00];
        h.extend_from_slice(&tot.to_be_bytes());
        h.extend_from_slice(&[0, 1, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 1, 0, 2]);
        h.extend_from_slice(payload);
        h
    }

    fn udp(sport: u16, dport: u16) -> Vec<u8> {
        let mut u = sport.to_be_bytes().to_vec();
        u.extend_from_slice(&dport.to_be_bytes());
        u.extend_from_slice(&[0, 8, 0, 0]);
        u
    }

    #[test]
    fn a_translated_packets_key_is_made_again_as_extraction_makes_it() {
        let mut tcp = 1024u16.to_be_bytes().to_vec();
        tcp.extend_from_slice(&[
            0, 80, 0, 0, 0, 9, 0, 0, 0, 0, 0x50, 0x12, 0x20, 0, 0, 0, 0, 0,
        ]);
        for (proto, l4) in [(17, udp(1024, 2000)), (6, tcp)] {
            let mut p = eth(0x0800);
            p.extend(ipv4(proto, &l4));
            p.resize(p.len().max(60), 0);
            let mut k = FlowKey::new();
            k.set_in_port(3).set_recirc_id(7);
            let x = extract(&p, &mut k);
            // Source and destination translated, as NAT writes them.
            p[26..34].copy_from_slice(&[192, 168, 5, 6, 172, 16, 0, 9]);
            p[34..38].copy_from_slice(&[0xab, 0xcd, 0x01, 0x02]);
            assert!(
                rekey_ipv4_nat(&p, x.layers.l3.into(), x.layers.l4.into(), &mut k),
                "protocol {proto}: {:?} {:x}",
                x.layers,
                k.map()
            );
            let mut fresh = FlowKey::new();
            fresh.set_in_port(3).set_recirc_id(7);
            extract(&p, &mut fresh);
            assert_eq!(k, fresh, "protocol {proto}");
            assert_eq!(k.nw_src(), Ipv4Addr::new(192, 168, 5, 6));
            assert_eq!(k.tp_src(), 0xabcd);
            // The fields it makes again are those of the mask.
            let m = ipv4_nat_fields();
            assert_eq!(m.nw_src(), Ipv4Addr::BROADCAST);
            assert_eq!((m.tp_src(), m.tp_dst(), m.nw_proto()), (0xffff, 0xffff, 0));
        }
    }

    #[test]
    fn no_key_is_made_again_without_its_words_or_its_headers() {
        let mut p = eth(0x0800);
        p.extend(ipv4(17, &udp(1024, 2000)));
        p.resize(60, 0);
        let mut k = FlowKey::new();
        k.set_in_port(1);
        let before = k.clone();
        // A key without the IPv4 words (not yet extracted).
        assert!(!rekey_ipv4_nat(&p, 14, 34, &mut k));
        assert_eq!(k, before);
        extract(&p, &mut k);
        let extracted = k.clone();
        // Headers past the frame's end.
        assert!(!rekey_ipv4_nat(&p, 14, 58, &mut k));
        assert!(!rekey_ipv4_nat(&p[..30], 14, 34, &mut k));
        assert_eq!(k, extracted);
    }

    #[test]
    fn ipv4_udp_with_padding() {
        let mut p = eth(0x0800);
        p.extend(ipv4(17, &udp(1024, 2000)));
        p.resize(60, 0);
        let mut k = FlowKey::new();
        k.set_in_port(1);
        let x = extract(&p, &mut k);
        assert_eq!(x.malformed, None);
        assert_eq!(
            x.layers,
            Layers {
                l2_5: NO_LAYER,
                l3: 14,
                l4: 34
            }
        );
        assert_eq!(k.in_port(), 1);
        assert_eq!(k.eth_dst(), EthAddr([0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0]));
        assert_eq!(k.eth_type(), 0x0800);
        assert_eq!(k.nw_src(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(k.nw_dst(), Ipv4Addr::new(10, 1, 0, 2));
        assert_eq!((k.nw_proto(), k.nw_ttl(), k.nw_frag()), (17, 64, 0));
        assert_eq!((k.tp_src(), k.tp_dst()), (1024, 2000));
        // A 64-byte IPv4/UDP frame touches only the first cache line of the key.
        assert_eq!(k.map() & !0xff, 0);
    }

    #[test]
    fn truncated_tcp_leaves_ports_zero() {
        let mut p = eth(0x0800);
        p.extend(ipv4(6, &[0x12, 0x34, 0x00, 0x50, 0, 0, 0, 0]));
        let mut k = FlowKey::new();
        let x = extract(&p, &mut k);
        assert_eq!(x.malformed, Some(Malformed::TcpTruncated));
        assert_eq!(k.nw_proto(), 6);
        assert_eq!((k.tp_src(), k.tp_dst()), (0, 0));
    }

    #[test]
    fn reused_key_forgets_previous_packet() {
        let mut tcp = eth(0x0800);
        let mut seg = vec![0u8; 20];
        seg[0..4].copy_from_slice(&[0, 80, 0x1f, 0x90]);
        seg[12] = 0x50;
        seg[13] = 0x12;
        tcp.extend(ipv4(6, &seg));
        let mut k = FlowKey::new();
        extract(&tcp, &mut k);
        assert_eq!(k.tcp_flags(), 0x12);
        let arp_like = eth(0x9000);
        extract(&arp_like, &mut k);
        assert_eq!((k.tcp_flags(), k.tp_src(), k.nw_proto()), (0, 0, 0));
        assert_eq!(k.eth_type(), 0x9000);
    }

    #[test]
    fn bad_total_length_keeps_only_l2() {
        let mut p = eth(0x0800);
        let mut ip = ipv4(17, &udp(1, 2));
        ip[3] = 200;
        p.extend(ip);
        let mut k = FlowKey::new();
        let x = extract(&p, &mut k);
        assert_eq!(x.malformed, Some(Malformed::Ipv4BadTotalLen));
        assert_eq!(k.eth_type(), 0x0800);
        assert_eq!(k.nw_src(), Ipv4Addr::UNSPECIFIED);
        assert_eq!(k.map(), 0b110);
    }

    #[test]
    fn qinq_and_truncated_vlan() {
        let mut p = eth(0x88a8);
        p.extend_from_slice(&[0x20, 0x0a, 0x81, 0x00, 0x00, 0x14, 0x08, 0x00]);
        p.extend(ipv4(17, &udp(5, 6)));
        let mut k = FlowKey::new();
        let x = extract(&p, &mut k);
        assert_eq!(x.malformed, None);
        assert_eq!((k.vlan_tpid(), k.vlan_tci()), (0x88a8, 0x200a | VLAN_CFI));
        assert_eq!((k.vlan2_tpid(), k.vlan2_tci()), (0x8100, 0x0014 | VLAN_CFI));
        assert_eq!((k.eth_type(), k.tp_dst()), (0x0800, 6));

        let mut short = eth(0x8100);
        short.extend_from_slice(&[0x00, 0x05]);
        let x = extract(&short, &mut k);
        assert_eq!(x.malformed, Some(Malformed::VlanTruncated));
        assert_eq!(k.eth_type(), 0x8100);
        assert_eq!(k.vlan_tci(), 0);
    }

    #[test]
    fn llc_snap_and_plain_802_3() {
        let mut p = eth(0x0030);
        p.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x06]);
        let mut k = FlowKey::new();
        let x = extract(&p, &mut k);
        assert_eq!(k.eth_type(), 0x0806);
        assert_eq!(x.malformed, Some(Malformed::ArpTruncated));
        let mut p = eth(0x0030);
        p.extend_from_slice(&[0x42, 0x42, 0x03, 0, 0, 0, 0, 0]);
        extract(&p, &mut k);
        assert_eq!(k.eth_type(), 0x05ff);
    }

    #[test]
    fn mpls_stack_of_four_keeps_three() {
        let mut p = eth(0x8847);
        for (i, label) in [812u32, 813, 814, 815].iter().enumerate() {
            let bos = if i == 3 { 1 } else { 0 };
            p.extend_from_slice(&((label << 12) | (bos << 8) | 64).to_be_bytes());
        }
        let mut k = FlowKey::new();
        let x = extract(&p, &mut k);
        assert_eq!(x.malformed, None);
        assert_eq!(x.layers.l2_5, 14);
        // Every entry kept whole (label, TC, bottom of stack, TTL), each in its place.
        assert_eq!(k.mpls_lse0(), 812 << 12 | 64);
        assert_eq!(k.mpls_lse1(), 813 << 12 | 64);
        assert_eq!(k.mpls_lse2(), 814 << 12 | 64);
        assert_eq!(k.nw_proto(), 0);
    }

    #[test]
    fn mpls_stack_of_one_and_two_and_cut_short() {
        let lse = |label: u32, bos: u32| ((label << 12) | (bos << 8) | 9).to_be_bytes();
        let mut one = eth(0x8847);
        one.extend_from_slice(&lse(16, 1));
        let mut k = FlowKey::new();
        assert_eq!(extract(&one, &mut k).malformed, None);
        assert_eq!((k.mpls_lse0(), k.mpls_lse1()), (16 << 12 | 1 << 8 | 9, 0));

        let mut two = eth(0x8847);
        two.extend_from_slice(&lse(16, 0));
        two.extend_from_slice(&lse(17, 1));
        let mut k = FlowKey::new();
        assert_eq!(extract(&two, &mut k).malformed, None);
        assert_eq!(
            (k.mpls_lse0(), k.mpls_lse1(), k.mpls_lse2()),
            (16 << 12 | 9, 17 << 12 | 1 << 8 | 9, 0)
        );

        // No bottom of stack before the end: what was read is kept, the cut is counted.
        let mut cut = eth(0x8847);
        cut.extend_from_slice(&lse(16, 0));
        cut.extend_from_slice(&lse(17, 0)[..3]);
        let mut k = FlowKey::new();
        assert_eq!(
            extract(&cut, &mut k).malformed,
            Some(Malformed::MplsTruncated)
        );
        assert_eq!((k.mpls_lse0(), k.mpls_lse1()), (16 << 12 | 9, 0));
    }

    #[test]
    fn l3_packet_type() {
        let mut k = FlowKey::new();
        k.set_packet_type((1 << 16) | 0x0800);
        let p = ipv4(17, &udp(7, 8));
        let x = extract(&p, &mut k);
        assert_eq!(x.layers.l3, 0);
        assert_eq!(
            (k.eth_type(), k.eth_src(), k.tp_dst()),
            (0x0800, EthAddr::ZERO, 8)
        );
    }

    #[test]
    fn ipv6_fragment_later_and_nd() {
        let mut p = eth(0x86dd);
        let mut h = vec![0x60, 0x00, 0x00, 0x01, 0, 8, 44, 64];
        h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        h.extend_from_slice(&[17, 0, 0x00, 0x08, 0, 0, 0, 1]);
        p.extend(h);
        let mut k = FlowKey::new();
        let x = extract(&p, &mut k);
        assert_eq!(x.malformed, None);
        assert_eq!(k.nw_frag(), nw_frag::ANY | nw_frag::LATER);
        assert_eq!((k.nw_proto(), k.ipv6_label()), (44, 1));
        assert_eq!(k.ipv6_dst(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());

        // Neighbor Solicitation with a source link-layer address option.
        let mut p = eth(0x86dd);
        let mut icmp = vec![135, 0, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(&"fe80::1".parse::<Ipv6Addr>().unwrap().octets());
        icmp.extend_from_slice(&[1, 1, 0, 1, 2, 3, 4, 5]);
        let mut h = vec![0x60, 0, 0, 0, 0, icmp.len() as u8, 58, 255];
        h.extend_from_slice(&[0; 32]);
        h.extend(icmp);
        p.extend(h);
        let x = extract(&p, &mut k);
        assert_eq!(x.malformed, None);
        assert_eq!((k.tp_src(), k.tp_dst()), (135, 0));
        assert_eq!(k.nd_target(), "fe80::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(k.arp_sha(), EthAddr([0, 1, 2, 3, 4, 5]));
        assert_eq!(k.arp_tha(), EthAddr::ZERO);
    }

    #[test]
    fn returned_hash_is_the_key_hash() {
        let mut k = FlowKey::new();
        let mut tcp = eth(0x0800);
        let mut seg = vec![0u8; 20];
        seg[12] = 0x50;
        seg[13] = 0x02;
        tcp.extend(ipv4(6, &seg));
        let mut vlan = eth(0x8100);
        vlan.extend_from_slice(&[0, 7, 8, 0]);
        vlan.extend(ipv4(17, &udp(1, 2)));
        for p in [tcp, vlan, eth(0x0806)] {
            for meta in [false, true] {
                k.clear();
                if meta {
                    k.set_in_port(3).set_tun_id(42).set_ct_label(7);
                }
                let x = extract(&p, &mut k);
                assert_eq!(x.hash, k.hash(0));
            }
        }
    }

    proptest::proptest! {
        /// The L3 MPLS fast path is an optimisation only: on any L3 MPLS packet (one entry or
        /// more, cut anywhere), `extract` gives what the general parser gives, with and
        /// without the hash.
        #[test]
        fn mpls_l3_fast_path_equals_general_path(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
            bos in proptest::prelude::any::<bool>(),
            mcast in proptest::prelude::any::<bool>(),
            meta in proptest::prelude::any::<bool>(),
        ) {
            let mut p = body;
            if let Some(b) = p.get_mut(2) {
                *b = if bos { *b | 1 } else { *b & !1 };
            }
            let pt = 1 << 16 | if mcast { 0x8848 } else { 0x8847 };
            let mut a = FlowKey::new();
            a.set_packet_type(pt);
            if meta {
                a.set_in_port(7).set_tun_id(5).set_tun_ipv4_src([10, 1, 2, 9].into());
            }
            let mut b = a.clone();
            let mut u = a.clone();
            let xa = extract(&p, &mut a);
            let xb = extract_general(&p, &mut b, pt);
            proptest::prop_assert!(a.exact_eq(&b), "{:?} vs {:?}", a, b);
            proptest::prop_assert_eq!(xa, xb);
            proptest::prop_assert_eq!(xa.hash, a.hash(0));
            let xu = extract_unhashed(&p, &mut u);
            proptest::prop_assert!(u.exact_eq(&a), "{:?} vs {:?}", u, a);
            proptest::prop_assert_eq!(xu, Extracted { hash: 0, ..xa });
        }

        /// The fast path is an optimisation only: on any frame, `extract` must give exactly
        /// what the general parser gives (same words, same presence map, same result).
        #[test]
        fn fast_path_equals_general_path(
            proto in proptest::sample::select(vec![6u8, 17, 47, 1, 132, 50]),
            vhl in proptest::sample::select(vec![0x45u8, 0x45, 0x46, 0x44, 0x55]),
            frag in proptest::sample::select(vec![0u16, 0x4000, 0x2000, 0x0001, 0x8000]),
            doff in 0u8..16,
            flags in 0u16..0x1000,
            l4 in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            tot_delta in -30i32..30,
            cut in 0usize..80,
            meta in proptest::prelude::any::<bool>(),
            noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 32),
        ) {
            let mut l4 = l4;
            if l4.len() > 13 {
                l4[12] = (doff << 4) | (flags >> 8) as u8;
                l4[13] = flags as u8;
            }
            let mut p = eth(0x0800);
            p[..12].copy_from_slice(&noise[..12]);
            let mut ip = ipv4(proto, &l4);
            // Random TOS, id, TTL, checksum and addresses; the fields under test are set below.
            ip[1] = noise[12];
            ip[4..6].copy_from_slice(&noise[13..15]);
            ip[8] = noise[15];
            ip[10..20].copy_from_slice(&noise[16..26]);
            ip[0] = vhl;
            ip[6..8].copy_from_slice(&frag.to_be_bytes());
            let tot = (ip.len() as i32 + tot_delta).clamp(0, 0xffff) as u16;
            ip[2..4].copy_from_slice(&tot.to_be_bytes());
            p.extend(ip);
            p.resize(p.len().max(60), 0);
            p.truncate(p.len().saturating_sub(cut));

            let mut a = FlowKey::new();
            let mut b = FlowKey::new();
            if meta {
                for k in [&mut a, &mut b] {
                    k.set_in_port(7).set_tun_id(5).set_ct_zone(3);
                }
            }
            let mut c = a.clone();
            c.set_eth_dst(EthAddr([9; 6])).set_nw_src([1, 2, 3, 4].into());
            let before = c.clone();
            let xa = extract(&p, &mut a);
            let xb = extract_general(&p, &mut b, 0);
            proptest::prop_assert!(a.exact_eq(&b), "{:?} vs {:?}", a, b);
            proptest::prop_assert_eq!(xa, xb);
            proptest::prop_assert_eq!(xa.hash, a.hash(0));
            // Without the hash: the same key and result, hash 0.
            let mut u = FlowKey::new();
            if meta {
                u.set_in_port(7).set_tun_id(5).set_ct_zone(3);
            }
            let xu = extract_unhashed(&p, &mut u);
            proptest::prop_assert!(u.exact_eq(&a), "{:?} vs {:?}", u, a);
            proptest::prop_assert_eq!(xu, Extracted { hash: 0, ..xa });

            // The simple match's extraction: where it takes a frame, the offsets, TCP flags
            // and metadata are extract's, the fields a simple megaflow may look at are the
            // constants it assumes, and no other packet word is left behind.
            match extract_simple(&p, &mut c) {
                Some(layers) => {
                    proptest::prop_assert_eq!(layers, xa.layers);
                    proptest::prop_assert!(xa.malformed.is_none());
                    proptest::prop_assert_eq!(a.eth_type(), SIMPLE_ETH_TYPE);
                    proptest::prop_assert_eq!(a.vlan_tci(), 0);
                    proptest::prop_assert_eq!(a.nw_frag(), 0);
                    proptest::prop_assert_eq!(c.tcp_flags(), a.tcp_flags());
                    proptest::prop_assert_eq!(c.map() & !PACKET_WORDS, a.map() & !PACKET_WORDS);
                    for i in 0..crate::key::KEY_WORDS {
                        if PACKET_WORDS & (1 << i) == 0 {
                            proptest::prop_assert_eq!(c.word(i), a.word(i));
                        } else if c.map() & (1 << i) != 0 {
                            proptest::prop_assert_eq!(c.word(i), a.word(i), "word {}", i);
                            proptest::prop_assert!(c.tcp_flags() != 0);
                        }
                    }
                }
                None => proptest::prop_assert!(c.exact_eq(&before)),
            }

            // The fast words without a key: where they are given, the key of an Ethernet
            // frame with only word 0 of metadata holds word 0, these (word 5 when not zero)
            // and nothing else, and the offsets are extract's.
            let mut e = FlowKey::new();
            e.set_in_port(7);
            let xe = extract(&p, &mut e);
            if let Some((w, layers)) = ipv4_fast_words(&p) {
                proptest::prop_assert_eq!(layers, xe.layers);
                proptest::prop_assert!(xe.malformed.is_none());
                let map = 0b1_1111 | u64::from(w[4] != 0) << 5;
                proptest::prop_assert_eq!(e.map(), map);
                for (i, &wi) in w.iter().enumerate() {
                    proptest::prop_assert_eq!(e.word(i + 1), wi, "word {}", i + 1);
                }
                proptest::prop_assert_eq!(tcp_flags_of_word(w[4]), e.tcp_flags());
            }
        }
    }

    #[test]
    fn simple_extraction_declines_what_it_cannot_vouch_for() {
        let mut frame = eth(0x0800);
        frame.extend(ipv4(17, &udp(1, 2)));
        let mut k = FlowKey::new();
        assert!(extract_simple(&frame, &mut k).is_some());
        // An L3 packet (decapsulated from GRE): its first bytes are not an Ethernet header.
        k.set_packet_type(1 << 16 | 0x0800);
        assert!(extract_simple(&frame, &mut k).is_none());
        k.set_packet_type(0);
        // A VLAN tag, IPv6, ARP, an IPv4 option, a fragment.
        for (at, b) in [(12, 0x81), (12, 0x86), (13, 0x06), (14, 0x46), (20, 0x20)] {
            let mut f = frame.clone();
            f[at] = b;
            assert!(extract_simple(&f, &mut k).is_none(), "byte {at} = {b:#x}");
        }
    }

    #[test]
    fn ipv6_atomic_fragment_is_not_a_fragment() {
        // RFC 6946: a fragment header with offset 0 and M clear; OVS keys it as unfragmented,
        // with the transport header parsed.
        let mut p = eth(0x86dd);
        let mut h = vec![0x60, 0, 0, 0, 0, 16, 44, 64];
        h.extend_from_slice(&[0; 32]);
        h.extend_from_slice(&[17, 0, 0, 0, 0, 0, 0, 9]);
        h.extend(udp(53, 5353));
        p.extend(h);
        let mut k = FlowKey::new();
        let x = extract(&p, &mut k);
        assert_eq!(x.malformed, None);
        assert_eq!(
            (k.nw_frag(), k.nw_proto(), k.tp_src(), k.tp_dst()),
            (0, 17, 53, 5353)
        );
    }

    #[test]
    fn every_prefix_of_a_packet_is_safe() {
        let mut p = eth(0x8100);
        p.extend_from_slice(&[0, 5, 0x08, 0x00]);
        let mut seg = vec![0u8; 24];
        seg[12] = 0x60;
        p.extend(ipv4(6, &seg));
        let mut k = FlowKey::new();
        for n in 0..=p.len() {
            extract(&p[..n], &mut k);
        }
    }
}
