//! The datapath side of connection tracking: running a batch through the shared
//! [`conntrack::Conntrack`] for a `ct()` action, carrying the result with each packet
//! ([`PacketMeta`]'s `ct_state`/`ct_zone`/`ct_mark` and the buffer's connection metadata
//! area), putting it into the next pass's flow key, and applying NAT rewrites.
//!
//! The connection metadata area holds, in the flow key's byte layout: the label (key bytes
//! 176-191) at 0, the original-direction tuple (key bytes 224-259: source, destination, L4
//! source and destination port, or ICMP type and code) at [`CT_MD_TUPLE`], and the tuple's IP
//! protocol at [`CT_MD_PROTO`], and the mark at [`CT_MD_MARK`] (not in [`PacketMeta`]: it
//! would not fit the packet's cache line).
//!
//! An ALG's rewrite rides with the NAT rewrite ([`apply_alg`]): the FTP helper may replace
//! the address text of a segment's payload, which resizes the packet.
//!
//! [`PacketMeta`]: crate::packet::PacketMeta

use std::net::{Ipv4Addr, Ipv6Addr};

use conntrack::alg::{AlgRewrite, MAX_ADDR_TEXT};
use conntrack::{CtMeta, NatRewrite, Tuple};
use flow::key::{FlowKey, Mask};

use crate::actions::{L4Proto, SetIpv4, SetIpv6, SetL4};
use crate::packet::{CT_MD_TUPLE, NO_OFS, Packet};

/// Offset of the tuple's IP protocol in the connection metadata area.
pub const CT_MD_PROTO: usize = CT_MD_TUPLE + 36;

/// Offset of the connection mark (host order) in the connection metadata area.
pub const CT_MD_MARK: usize = 56;

/// Offset of [`conntrack::CtMeta::conn_ref`] (host order) in the connection metadata area.
pub const CT_MD_CONN_REF: usize = 60;

/// Key words of the connection label.
const KEY_W_LABEL: usize = 22;
/// Key words wholly of the connection tuple (the ports share word 32 with GENEVE options).
const KEY_W_TUPLE: usize = 28;
/// The key word of the tuple's ports.
const KEY_W_TUPLE_PORTS: usize = 32;

/// Whether `ct()` may skip packet `p`'s checksum checks (IPv6 when `v6`): its TCP/UDP
/// checksum is pending (not wrong, only not there yet: Linux trusts `CHECKSUM_PARTIAL`, a
/// local stack built the headers), or the receiving device verified its checksums and found
/// them good (the L4 one, and for IPv4 the header's), which OVS's conntrack trusts too.
#[inline(always)]
pub fn csum_trusted(p: &Packet, v6: bool) -> bool {
    use crate::packet::{RX_CSUM_IP_GOOD, RX_CSUM_L4_GOOD};
    let good = p.meta.rx_csum;
    p.meta.csum_pending() || (good & RX_CSUM_L4_GOOD != 0 && (v6 || good & RX_CSUM_IP_GOOD != 0))
}

/// Whether the packet is IPv4 (`Some(false)`), IPv6 (`Some(true)`), or neither, judged from
/// the version nibble at its L3 offset.
#[inline]
pub fn ip_version(p: &Packet) -> Option<bool> {
    version_in(p.data(), p.meta.l3)
}

/// [`ip_version`] of a frame `d` whose L3 offset is `l3` (the packet's frame taken once by a
/// caller that reads it again).
#[inline(always)]
pub fn version_in(d: &[u8], l3: u16) -> Option<bool> {
    if l3 == NO_OFS {
        return None;
    }
    match d.get(usize::from(l3))? >> 4 {
        4 => Some(false),
        6 => Some(true),
        _ => None,
    }
}

/// Stores what `ct()` decided into the packet's metadata.
#[inline]
pub fn store(p: &mut Packet, md: &CtMeta) {
    p.meta.ct_state = md.state;
    p.meta.ct_zone = md.zone;
    let area = p.ct_md_mut();
    area[..16].copy_from_slice(&md.label.to_be_bytes());
    area[CT_MD_MARK..CT_MD_MARK + 4].copy_from_slice(&md.mark.to_ne_bytes());
    area[CT_MD_CONN_REF..CT_MD_CONN_REF + 4].copy_from_slice(&md.conn_ref.to_ne_bytes());
    let t = &md.orig;
    if md.state & conntrack::state::INV != 0 {
        area[CT_MD_TUPLE..CT_MD_PROTO + 1].fill(0);
        return;
    }
    let (tp_src, tp_dst) = if matches!(t.proto, 1 | 58) {
        // OVS's ct_tp_src/ct_tp_dst of an ICMP connection: the type and code of the
        // original direction's messages.
        (u16::from(t.stype), 0)
    } else {
        (t.sport, t.dport)
    };
    area[CT_MD_TUPLE..CT_MD_TUPLE + 16].copy_from_slice(&t.src);
    area[CT_MD_TUPLE + 16..CT_MD_TUPLE + 32].copy_from_slice(&t.dst);
    area[CT_MD_TUPLE + 32..CT_MD_TUPLE + 34].copy_from_slice(&tp_src.to_be_bytes());
    area[CT_MD_TUPLE + 34..CT_MD_TUPLE + 36].copy_from_slice(&tp_dst.to_be_bytes());
    area[CT_MD_PROTO] = t.proto;
}

/// Whether an earlier `ct()` in `zone` tracked the packet (not `+inv`) and found its
/// connection in the PMD's cache ([`cached`] without the tuple).
#[inline]
pub fn cached_ref(p: &Packet, zone: u16) -> bool {
    let m = &p.meta;
    m.ct_state & (conntrack::state::TRK | conntrack::state::INV) == conntrack::state::TRK
        && m.ct_zone == zone
        && p.ct_md()[CT_MD_CONN_REF..CT_MD_CONN_REF + 4] != [0; 4]
}

/// For a later `ct()` in `zone` of a packet an earlier one tracked (not `+inv`), the
/// connection's cache reference and original tuple, as [`conntrack::Conntrack::recheck`]
/// takes them.
#[inline]
pub fn cached(p: &Packet, zone: u16, v6: bool) -> Option<(u32, Tuple)> {
    if !cached_ref(p, zone) {
        return None;
    }
    let a = p.ct_md();
    let conn_ref = u32::from_ne_bytes(a[CT_MD_CONN_REF..CT_MD_CONN_REF + 4].try_into().unwrap());
    let t = CT_MD_TUPLE;
    let port = |i: usize| u16::from_be_bytes([a[i], a[i + 1]]);
    Some((
        conn_ref,
        Tuple {
            src: a[t..t + 16].try_into().unwrap(),
            dst: a[t + 16..t + 32].try_into().unwrap(),
            sport: port(t + 32),
            dport: port(t + 34),
            zone,
            proto: a[CT_MD_PROTO],
            v6,
            stype: 0,
            dtype: 0,
        },
    ))
}

/// Whether the packet's metadata show this mark and label already (what
/// [`set_mark_label`] would write).
#[inline(always)]
pub fn has_mark_and_label(p: &Packet, mark: u32, label: u128) -> bool {
    mark_and_label(p) == (mark, u128::from_ne_bytes(label.to_be_bytes()))
}

/// Whether the packet's mark and label are what `args`' commit makes of them.
#[inline(always)]
pub fn commit_shown(p: &Packet, args: &conntrack::CtArgs) -> bool {
    let (mark, stored) = mark_and_label(p);
    // The label as the connection holds it (the area has it in the flow key's byte order).
    let label = u128::from_be_bytes(stored.to_ne_bytes());
    args.mark_label_after((mark, label)) == (mark, label)
}

/// Writes a connection's mark and label into the packet's metadata (a commit's writes).
#[inline]
pub fn set_mark_label(p: &mut Packet, mark: u32, label: u128) {
    let area = p.ct_md_mut();
    area[..16].copy_from_slice(&label.to_be_bytes());
    area[CT_MD_MARK..CT_MD_MARK + 4].copy_from_slice(&mark.to_ne_bytes());
}

/// A tracked packet's connection mark and label (what [`to_key`] reads of its connection
/// metadata area besides the original tuple).
#[inline(always)]
pub fn mark_and_label(p: &Packet) -> (u32, u128) {
    let area = p.ct_md();
    let mark = u32::from_ne_bytes(area[CT_MD_MARK..CT_MD_MARK + 4].try_into().unwrap());
    let label = u128::from_ne_bytes(area[..16].try_into().unwrap());
    (mark, label)
}

/// Puts a flow key's connection fields into the packet's metadata, as [`to_key`] reads them
/// back: what a resumed continuation (`NXT_RESUME`) restores of the pass that paused (OVS's
/// `pkt_metadata_from_flow()`). No connection is cached for the packet: a later `ct()` looks
/// it up again.
pub fn from_key(p: &mut Packet, key: &FlowKey) {
    p.meta.ct_state = key.ct_state();
    p.meta.ct_zone = key.ct_zone();
    let area = p.ct_md_mut();
    area.fill(0);
    for i in 0..2 {
        area[8 * i..8 * i + 8].copy_from_slice(&key.word(KEY_W_LABEL + i).to_ne_bytes());
    }
    area[CT_MD_MARK..CT_MD_MARK + 4].copy_from_slice(&key.ct_mark().to_ne_bytes());
    for i in 0..4 {
        let at = CT_MD_TUPLE + 8 * i;
        area[at..at + 8].copy_from_slice(&key.word(KEY_W_TUPLE + i).to_ne_bytes());
    }
    area[CT_MD_TUPLE + 32..CT_MD_TUPLE + 34].copy_from_slice(&key.ct_tp_src().to_be_bytes());
    area[CT_MD_TUPLE + 34..CT_MD_TUPLE + 36].copy_from_slice(&key.ct_tp_dst().to_be_bytes());
    area[CT_MD_PROTO] = key.ct_nw_proto();
}

/// Forgets the packet's connection state (`ct_clear`).
#[inline]
pub fn clear(p: &mut Packet) {
    p.meta.ct_state = 0;
    p.meta.ct_zone = 0;
}

/// Whether a megaflow's mask looks at a connection's original tuple (`ct_nw_src`,
/// `ct_nw_dst`, `ct_ipv6_src`, `ct_ipv6_dst`, `ct_tp_src`, `ct_tp_dst`, `ct_nw_proto`): only
/// while one does must packets' keys carry it ([`to_key`]).
pub fn mask_has_tuple(mask: &Mask) -> bool {
    (0..4).any(|i| mask.word(KEY_W_TUPLE + i) != 0)
        || mask.ct_tp_src() != 0
        || mask.ct_tp_dst() != 0
        || mask.ct_nw_proto() != 0
}

/// Puts a tracked packet's connection fields into its flow key (`ct_state` not zero); the
/// original tuple only with `tuple`. Without it the key reads the tuple's fields as zero:
/// right for every megaflow whose mask does not look at them ([`mask_has_tuple`]), and it
/// keeps the key of a tracked IPv4 packet six words shorter (hashed, compared and cached by
/// the EMC in one line instead of two).
pub fn to_key(p: &Packet, key: &mut FlowKey, tuple: bool) {
    let m = &p.meta;
    key.set_ct_state(m.ct_state);
    if m.ct_zone != 0 {
        key.set_ct_zone(m.ct_zone);
    }
    let area = p.ct_md();
    let mark = u32::from_ne_bytes(area[CT_MD_MARK..CT_MD_MARK + 4].try_into().unwrap());
    if mark != 0 {
        key.set_ct_mark(mark);
    }
    let w = |i: usize| u64::from_ne_bytes(area[i..i + 8].try_into().unwrap());
    if area[..16] != [0; 16] {
        key.put_word(KEY_W_LABEL, w(0));
        key.put_word(KEY_W_LABEL + 1, w(8));
        key.mark_words(0b11 << KEY_W_LABEL);
    }
    if tuple {
        tuple_to_key(p, key);
    } else if key.map() & (1 << KEY_W_TUPLE_PORTS) != 0 {
        // The ports' word holds tunnel options too: the ports read zero.
        key.set_ct_tp_src(0);
        key.set_ct_tp_dst(0);
    }
}

/// The original tuple part of [`to_key`], for a key that was made without it (an upcall's:
/// the slow path sees every field).
pub fn tuple_to_key(p: &Packet, key: &mut FlowKey) {
    let m = &p.meta;
    let area = p.ct_md();
    let w = |i: usize| u64::from_ne_bytes(area[i..i + 8].try_into().unwrap());
    if m.ct_state & conntrack::state::TRK != 0 && m.ct_state & conntrack::state::INV == 0 {
        for i in 0..4 {
            key.put_word(KEY_W_TUPLE + i, w(CT_MD_TUPLE + 8 * i));
        }
        key.mark_words(0b1111 << KEY_W_TUPLE);
        let port = |i: usize| u16::from_be_bytes([area[i], area[i + 1]]);
        key.set_ct_tp_src(port(CT_MD_TUPLE + 32));
        key.set_ct_tp_dst(port(CT_MD_TUPLE + 34));
        key.set_ct_nw_proto(area[CT_MD_PROTO]);
    }
}

/// Writes an ICMP query's identifier (NAT of ICMP moves it like a port), with the checksum
/// updated (the identifier is not in ICMPv6's pseudo-header either).
fn set_icmp_id(p: &mut Packet, id: Option<u16>) -> bool {
    let Some(id) = id else { return true };
    let l4 = usize::from(p.meta.l4);
    let d = p.data_mut();
    let Some(h) = d.get_mut(l4..l4 + 8) else {
        return l4 == usize::from(NO_OFS);
    };
    let old = u16::from_be_bytes([h[4], h[5]]);
    if old != id {
        let c = wire::checksum::update16(u16::from_be_bytes([h[2], h[3]]), old, id);
        h[2..4].copy_from_slice(&c.to_be_bytes());
        h[4..6].copy_from_slice(&id.to_be_bytes());
    }
    true
}

/// Whether the packet is an IP fragment (IPv4 MF or offset; IPv6 with a fragment header right
/// after the fixed header, or any extension header, which the reassembler then sorts out).
#[inline]
pub fn maybe_fragment(p: &Packet, v6: bool) -> bool {
    fragment_in(p.data(), usize::from(p.meta.l3), v6)
}

/// [`maybe_fragment`] of a frame `d` whose L3 offset is `l3`.
#[inline(always)]
pub fn fragment_in(d: &[u8], l3: usize, v6: bool) -> bool {
    if v6 {
        // Common upper layers go straight on; anything else (extension headers, fragment
        // header) is looked at closely by the reassembler.
        d.get(l3 + 6)
            .is_some_and(|nh| !matches!(nh, 6 | 17 | 58 | 132 | 59))
    } else {
        d.get(l3 + 6..l3 + 8)
            .is_some_and(|f| u16::from_be_bytes([f[0], f[1]]) & 0x3fff != 0)
    }
}

/// Applies a NAT decision to the packet's addresses and ports, with checksum updates, and an
/// ALG's rewrite that comes with it. `l4`: the packet carries the L4 header (not a later
/// fragment).
pub fn apply_nat(p: &mut Packet, rw: &NatRewrite, v6: bool, t: &Tuple, l4: bool) -> bool {
    if rw.icmp_error {
        return nat_addrs(p, rw.src, rw.dst, v6) && nat_quoted(p, rw, v6);
    }
    // The common case in one pass: IPv4 TCP or UDP, no ALG edit.
    if !v6 && l4 && rw.alg.is_none() && matches!(t.proto, 6 | 17) {
        let v4 = |x: Option<([u8; 16], u16)>| {
            x.map(|(a, port)| (u32::from_be_bytes([a[0], a[1], a[2], a[3]]), port))
        };
        if crate::rewrite::nat_ipv4_l4(p, v4(rw.src), v4(rw.dst)).is_some() {
            return true;
        }
    }
    nat_general(p, rw, v6, t, l4)
}

/// After [`apply_nat`] of packet `p` by `rw` (`t` its connection's original tuple): the
/// packet's new addresses and ports into `key`, the key its pass made from it before the
/// translation ([`flow::extract::rekey_ipv4_nat`]). False when the key cannot follow the
/// translation so (IPv6, ICMP, an ICMP error's quoted packet, an ALG's edit, no L4 header):
/// it then no longer describes the packet.
#[inline]
pub fn rekey_nat(p: &Packet, rw: &NatRewrite, v6: bool, t: &Tuple, key: &mut FlowKey) -> bool {
    !v6 && !rw.icmp_error
        && rw.alg.is_none()
        && matches!(t.proto, 6 | 17)
        && p.meta.l4 != NO_OFS
        && flow::extract::rekey_ipv4_nat(
            p.data(),
            usize::from(p.meta.l3),
            usize::from(p.meta.l4),
            key,
        )
}

/// NAT through the datapath's masked `set` rewrites, for any IP version and protocol, after
/// the ALG's payload edit (not for an ICMP error: [`apply_nat`]).
pub(crate) fn nat_general(p: &mut Packet, rw: &NatRewrite, v6: bool, t: &Tuple, l4: bool) -> bool {
    // The ALG's edit first: NAT's incremental checksum updates then apply to its result.
    let alg_ok = match &rw.alg {
        Some(a) if l4 => apply_alg(p, a, rw.src.map(|(s, _)| s).as_ref(), v6),
        _ => true,
    };
    let (src, dst) = (rw.src, rw.dst);
    let ok = nat_addrs(p, src, dst, v6);
    let ok = ok && alg_ok;
    let proto = match t.proto {
        6 if l4 => L4Proto::Tcp,
        17 if l4 => L4Proto::Udp,
        1 | 58 if l4 => return ok && set_icmp_id(p, src.or(dst).map(|(_, id)| id)),
        _ => return ok,
    };
    let port = |x: Option<([u8; 16], u16)>| x.map_or((0, 0), |(_, p)| (p, 0xffff));
    let ((sp, spm), (dp, dpm)) = (port(src), port(dst));
    if spm | dpm == 0 {
        return ok;
    }
    ok && crate::rewrite::set_l4(
        p,
        &SetL4 {
            proto,
            src: sp,
            src_mask: spm,
            dst: dp,
            dst_mask: dpm,
        },
    )
    .is_ok()
}

/// Writes the IP header's source and/or destination address (the ports of `src` and `dst` are
/// not looked at), with the checksum updates the header's protocol needs.
fn nat_addrs(
    p: &mut Packet,
    src: Option<([u8; 16], u16)>,
    dst: Option<([u8; 16], u16)>,
    v6: bool,
) -> bool {
    if v6 {
        let a = |x: Option<([u8; 16], u16)>| {
            x.map_or((Ipv6Addr::UNSPECIFIED, Ipv6Addr::UNSPECIFIED), |(a, _)| {
                (Ipv6Addr::from(a), Ipv6Addr::from(u128::MAX))
            })
        };
        let ((s, sm), (d, dm)) = (a(src), a(dst));
        crate::rewrite::set_ipv6(
            p,
            &SetIpv6 {
                src: s,
                src_mask: sm,
                dst: d,
                dst_mask: dm,
                label: 0,
                label_mask: 0,
                tclass: 0,
                tclass_mask: 0,
                hlimit: 0,
                hlimit_mask: 0,
            },
        )
        .is_ok()
    } else {
        let a = |x: Option<([u8; 16], u16)>| {
            x.map_or((Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED), |(a, _)| {
                (Ipv4Addr::new(a[0], a[1], a[2], a[3]), Ipv4Addr::BROADCAST)
            })
        };
        let ((s, sm), (d, dm)) = (a(src), a(dst));
        crate::rewrite::set_ipv4(
            p,
            &SetIpv4 {
                src: s,
                src_mask: sm,
                dst: d,
                dst_mask: dm,
                tos: 0,
                tos_mask: 0,
                ttl: 0,
                ttl_mask: 0,
            },
        )
        .is_ok()
    }
}

/// The packet an ICMP error quotes (it went the other way): its source becomes `rw.dst`'s
/// address and port, its destination `rw.src`'s, with its IPv4 header checksum and, where the
/// quote holds it, its transport checksum updated; then the error's own checksum is computed
/// again over the message. False when the quote is too short for its IP header.
fn nat_quoted(p: &mut Packet, rw: &NatRewrite, v6: bool) -> bool {
    use wire::checksum;
    let (l3, l4) = (usize::from(p.meta.l3), usize::from(p.meta.l4));
    if l3 == usize::from(NO_OFS) || l4 == usize::from(NO_OFS) {
        return false;
    }
    let d = p.data_mut();
    // The message ends where the outer IP packet does (not at any Ethernet padding).
    let end = if v6 {
        d.get(l3 + 4..l3 + 6)
            .map(|b| l3 + 40 + usize::from(be16_at(b, 0)))
    } else {
        d.get(l3 + 2..l3 + 4)
            .map(|b| l3 + usize::from(be16_at(b, 0)))
    };
    let Some(end) = end.filter(|&e| e <= d.len()) else {
        return false;
    };
    let m = &mut d[..end];
    let q = l4 + 8;
    // The quoted IP header: its addresses, their length, its protocol and transport offset.
    let (sa, da, alen, proto, ql4) = if v6 {
        if m.len() < q + 40 {
            return false;
        }
        (q + 8, q + 24, 16, m[q + 6], q + 40)
    } else {
        let ihl = usize::from(m.get(q).map_or(0, |b| b & 0xf)) * 4;
        if ihl < 20 || m.len() < q + ihl {
            return false;
        }
        (q + 12, q + 16, 4, m[q + 9], q + ihl)
    };
    let (new_src, new_dst) = (rw.dst, rw.src);
    // Where the quoted transport checksum is, if quoted, and whether it covers the addresses.
    let (csum_at, pseudo) = match proto {
        6 => (ql4 + 16, true),
        17 => (ql4 + 6, true),
        1 if !v6 => (ql4 + 2, false),
        58 if v6 => (ql4 + 2, true),
        _ => (usize::MAX, false),
    };
    let quoted_csum = csum_at
        .checked_add(2)
        .filter(|&e| e <= m.len())
        .map(|_| csum_at);
    let mut csum = quoted_csum.map(|at| be16_at(m, at));
    // A UDP checksum of 0 (IPv4) means none: it stays 0.
    if proto == 17 && !v6 && csum == Some(0) {
        csum = None;
    }
    for (at, new) in [(sa, new_src), (da, new_dst)] {
        let Some((a, _)) = new else { continue };
        if pseudo && let Some(c) = &mut csum {
            *c = checksum::update_bytes(*c, &m[at..at + alen], &a[..alen]);
        }
        m[at..at + alen].copy_from_slice(&a[..alen]);
    }
    if !v6 {
        wire::Ipv4Packet::new_unchecked(&mut m[q..ql4]).fill_checksum();
    }
    // Ports (TCP, UDP) or the query identifier (ICMP echo and the like, in both "ports").
    let ports: [(usize, Option<u16>); 2] = match proto {
        6 | 17 => [(ql4, new_src.map(|x| x.1)), (ql4 + 2, new_dst.map(|x| x.1))],
        1 | 58 => [(ql4 + 4, new_src.or(new_dst).map(|x| x.1)), (0, None)],
        _ => [(0, None), (0, None)],
    };
    for (at, port) in ports {
        let Some(port) = port.filter(|_| at + 2 <= m.len()) else {
            continue;
        };
        if let Some(c) = &mut csum {
            *c = checksum::update16(*c, be16_at(m, at), port);
        }
        m[at..at + 2].copy_from_slice(&port.to_be_bytes());
    }
    if let (Some(at), Some(mut c)) = (quoted_csum, csum) {
        if proto == 17 && c == 0 {
            c = 0xffff;
        }
        m[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
    // The error's own checksum, over the whole message (ICMPv6: and its pseudo-header); the
    // quote's header was found past its 8 bytes.
    if v6 {
        let a = |at: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&m[at..at + 16]).unwrap());
        let (src, dst) = (a(l3 + 8), a(l3 + 24));
        wire::Icmpv6Packet::new_unchecked(&mut m[l4..]).fill_checksum(&src, &dst);
    } else {
        wire::Icmpv4Packet::new_unchecked(&mut m[l4..]).fill_checksum();
    }
    true
}

#[inline]
fn be16_at(d: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([d[i], d[i + 1]])
}

#[inline]
fn be32_at(d: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]])
}

/// Applies an ALG's rewrite of a TCP segment (FTP behind NAT, [`conntrack::alg`]): the
/// announced address's text is replaced by `new_src` (the packet's translated source), so the
/// packet grows or shrinks by a few bytes (the IP length follows, and the IPv4 header
/// checksum); the sequence and acknowledgment numbers move by what earlier edits of the
/// connection changed; the TCP checksum is recomputed after a payload edit, updated otherwise.
/// `false`, with nothing changed, when the packet does not hold what the rewrite names.
pub fn apply_alg(p: &mut Packet, a: &AlgRewrite, new_src: Option<&[u8; 16]>, v6: bool) -> bool {
    let (l3, l4) = (p.meta.l3, p.meta.l4);
    if l3 == NO_OFS || l4 == NO_OFS {
        return false;
    }
    let (l3, l4) = (usize::from(l3), usize::from(l4));
    let d = p.data();
    let (len_at, hdr) = if v6 { (l3 + 4, 40) } else { (l3 + 2, 20) };
    if d.len() < l4 + 20 || l4 < l3 + hdr {
        return false;
    }
    let ip_len = usize::from(be16_at(d, len_at));
    let mut end = if v6 { l3 + 40 + ip_len } else { l3 + ip_len };
    if end > d.len() || end < l4 + 20 {
        return false;
    }
    let edited = if let Some(e) = &a.payload {
        let Some(addr) = new_src else {
            return false;
        };
        let mut text = [0u8; MAX_ADDR_TEXT];
        let n = e.render(addr, &mut text);
        let (at, old) = (l4 + usize::from(e.at), usize::from(e.old_len));
        // Within the segment's payload (so `old` is at most the IP length).
        if at < l4 + 20 || at + old > end || ip_len + n - old > usize::from(u16::MAX) {
            return false;
        }
        let new_ip_len = ip_len + n - old;
        // The bytes in front of the edit move (as a VLAN push moves them), so the header
        // offsets stay; the payload after it stays where it is.
        if n > old {
            p.insert_at(at + old, n - old);
        } else if n < old {
            p.remove_at(at + n, old - n);
        }
        let d = p.data_mut();
        d[at..at + n].copy_from_slice(&text[..n]);
        d[len_at..len_at + 2].copy_from_slice(&(new_ip_len as u16).to_be_bytes());
        if !v6 {
            let c = be16_at(d, l3 + 10);
            let c = wire::checksum::update16(c, ip_len as u16, new_ip_len as u16);
            d[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        end = end + n - old;
        true
    } else {
        false
    };
    let d = p.data_mut();
    let (seq, ack) = (be32_at(d, l4 + 4), be32_at(d, l4 + 8));
    let (nseq, nack) = (
        seq.wrapping_add_signed(a.seq),
        ack.wrapping_add_signed(a.ack),
    );
    d[l4 + 4..l4 + 8].copy_from_slice(&nseq.to_be_bytes());
    d[l4 + 8..l4 + 12].copy_from_slice(&nack.to_be_bytes());
    let csum_at = l4 + 16;
    let c = if edited {
        d[csum_at..csum_at + 2].fill(0);
        let seg = &d[l4..end];
        let pseudo = if v6 {
            let a = |i: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&d[i..i + 16]).unwrap());
            wire::checksum::pseudo_header_v6(
                &a(l3 + 8),
                &a(l3 + 24),
                wire::IpProtocol::TCP,
                seg.len() as u32,
            )
        } else {
            let a = |i: usize| Ipv4Addr::from(be32_at(d, i));
            wire::checksum::pseudo_header_v4(
                &a(l3 + 12),
                &a(l3 + 16),
                wire::IpProtocol::TCP,
                seg.len() as u16,
            )
        };
        !wire::checksum::combine(&[pseudo, wire::checksum::data(seg)])
    } else {
        let c = be16_at(d, csum_at);
        let c = wire::checksum::update32(c, seq, nseq);
        wire::checksum::update32(c, ack, nack)
    };
    d[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use conntrack::alg::{AddrForm, PayloadEdit};
    use wire::checksum;

    #[test]
    fn a_key_put_into_a_packet_reads_back_the_same() {
        let mut k = FlowKey::new();
        k.set_ct_state(conntrack::state::TRK | conntrack::state::NEW)
            .set_ct_zone(5)
            .set_ct_mark(7)
            .set_ct_label(0x1234_0000_0000_0000_0000_0000_0000_5678)
            .set_ct_nw_proto(17)
            .set_ct_tp_src(1)
            .set_ct_tp_dst(2);
        k.set_ct_nw_src(std::net::Ipv4Addr::new(10, 0, 0, 1));
        k.set_ct_nw_dst(std::net::Ipv4Addr::new(10, 0, 0, 2));
        let mut p = Packet::from_slice(&[0; 60]);
        from_key(&mut p, &k);
        let mut back = FlowKey::new();
        to_key(&p, &mut back, true);
        for (a, b) in [
            (u128::from(back.ct_state()), u128::from(k.ct_state())),
            (u128::from(back.ct_zone()), 5),
            (u128::from(back.ct_mark()), 7),
            (back.ct_label(), k.ct_label()),
            (u128::from(back.ct_nw_proto()), 17),
            (u128::from(back.ct_tp_src()), 1),
            (u128::from(back.ct_tp_dst()), 2),
        ] {
            assert_eq!(a, b);
        }
        assert_eq!(back.ct_nw_src(), k.ct_nw_src());
        assert_eq!(back.ct_nw_dst(), k.ct_nw_dst());
        assert!(!cached_ref(&p, 5), "no connection is cached");
    }

    /// Ethernet, IPv4 or IPv6, and a TCP segment from `src` to `dst` carrying `payload`,
    /// checksums right; flags as scapy spells them.
    #[allow(clippy::too_many_arguments)]
    fn segment(
        src: std::net::IpAddr,
        sport: u16,
        dst: std::net::IpAddr,
        dport: u16,
        flags: &str,
        seq: u32,
        ack: u32,
        payload: &[u8],
    ) -> Packet {
        let v6 = src.is_ipv6();
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&sport.to_be_bytes());
        tcp[2..4].copy_from_slice(&dport.to_be_bytes());
        tcp[4..8].copy_from_slice(&seq.to_be_bytes());
        tcp[8..12].copy_from_slice(&ack.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = flags
            .chars()
            .map(|c| match c {
                'F' => 0x01,
                'S' => 0x02,
                'P' => 0x08,
                'A' => 0x10,
                _ => panic!("flag {c}"),
            })
            .fold(0, |a, b| a | b);
        tcp[14..16].copy_from_slice(&8192u16.to_be_bytes());
        tcp.extend_from_slice(payload);
        match (src, dst) {
            (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => {
                let mut ip = vec![0u8; 40];
                ip[0] = 0x60;
                ip[4..6].copy_from_slice(&(tcp.len() as u16).to_be_bytes());
                ip[6] = 6;
                ip[7] = 64;
                ip[8..24].copy_from_slice(&s.octets());
                ip[24..40].copy_from_slice(&d.octets());
                f.extend_from_slice(&ip);
            }
            (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) => {
                let mut ip = vec![0u8; 20];
                ip[0] = 0x45;
                ip[2..4].copy_from_slice(&((20 + tcp.len()) as u16).to_be_bytes());
                ip[8] = 64;
                ip[9] = 6;
                ip[12..16].copy_from_slice(&s.octets());
                ip[16..20].copy_from_slice(&d.octets());
                let c = !checksum::data(&ip);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                f.extend_from_slice(&ip);
            }
            _ => panic!("mixed families"),
        }
        f.extend_from_slice(&tcp);
        let mut p = Packet::from_slice(&f);
        p.meta.l3 = 14;
        p.meta.l4 = if v6 { 54 } else { 34 };
        fix_tcp_csum(&mut p, v6);
        p
    }

    /// A segment from the client (10.0.0.1 or fd00::1, port 40000) to the FTP server.
    fn frame(v6: bool, seq: u32, ack: u32, payload: &[u8]) -> Packet {
        let (c, s) = if v6 {
            ("fd00::1", "2001:db8::21")
        } else {
            ("10.0.0.1", "192.0.2.9")
        };
        segment(
            c.parse().unwrap(),
            40000,
            s.parse().unwrap(),
            21,
            "PA",
            seq,
            ack,
            payload,
        )
    }

    fn tcp_pseudo(d: &[u8], v6: bool, len: usize) -> u16 {
        if v6 {
            let a = |i: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&d[i..i + 16]).unwrap());
            checksum::pseudo_header_v6(&a(22), &a(38), wire::IpProtocol::TCP, len as u32)
        } else {
            let a = |i: usize| Ipv4Addr::from(be32_at(d, i));
            checksum::pseudo_header_v4(&a(26), &a(30), wire::IpProtocol::TCP, len as u16)
        }
    }

    fn fix_tcp_csum(p: &mut Packet, v6: bool) {
        let l4 = usize::from(p.meta.l4);
        let d = p.data_mut();
        d[l4 + 16..l4 + 18].fill(0);
        let c = !checksum::combine(&[tcp_pseudo(d, v6, d.len() - l4), checksum::data(&d[l4..])]);
        d[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
    }

    /// Lengths and checksums of the frame are right.
    fn assert_valid(p: &Packet, v6: bool) {
        let d = p.data();
        let l4 = usize::from(p.meta.l4);
        if v6 {
            assert_eq!(usize::from(be16_at(d, 18)), d.len() - 54);
        } else {
            assert_eq!(usize::from(be16_at(d, 16)), d.len() - 14);
            assert_eq!(checksum::data(&d[14..34]), 0xffff, "IPv4 header checksum");
        }
        let sum = checksum::combine(&[tcp_pseudo(d, v6, d.len() - l4), checksum::data(&d[l4..])]);
        assert_eq!(sum, 0xffff, "TCP checksum");
    }

    fn rewrite(payload: Option<PayloadEdit>, seq: i32, ack: i32) -> NatRewrite {
        NatRewrite {
            src: None,
            dst: None,
            alg: Some(AlgRewrite { payload, seq, ack }),
            icmp_error: false,
        }
    }

    fn v4key(a: [u8; 4]) -> [u8; 16] {
        let mut k = [0; 16];
        k[..4].copy_from_slice(&a);
        k
    }

    #[test]
    fn port_command_grows_with_snat() {
        let msg = b"PORT 10,0,0,1,156,65\r\n";
        let mut p = frame(false, 1000, 5000, msg);
        let edit = PayloadEdit {
            at: 20 + 5,
            old_len: 8,
            form: AddrForm::Commas,
        };
        let mut nat = rewrite(Some(edit), 3, -2);
        // The text becomes the translated source address.
        nat.src = Some((v4key([203, 0, 113, 200]), 40000));
        let t = Tuple {
            proto: 6,
            ..Tuple::default()
        };
        assert!(apply_nat(&mut p, &nat, false, &t, true));
        assert_valid(&p, false);
        let d = p.data();
        assert_eq!(&d[54..], b"PORT 203,0,113,200,156,65\r\n");
        assert_eq!(&d[26..30], &[203, 0, 113, 200]);
        assert_eq!((be32_at(d, 38), be32_at(d, 42)), (1003, 4998));
        // A later fragment (no L4 header) gets no ALG edit.
        let mut q = frame(false, 1000, 5000, msg);
        assert!(apply_nat(
            &mut q,
            &rewrite(Some(edit), 0, 0),
            false,
            &t,
            false
        ));
        assert_eq!(&q.data()[54..], msg);
        // An edit without a translated source has nothing to write: refused.
        let mut q = frame(false, 1000, 5000, msg);
        assert!(!apply_nat(
            &mut q,
            &rewrite(Some(edit), 0, 0),
            false,
            &t,
            true
        ));
        assert_eq!(&q.data()[54..], msg);
    }

    #[test]
    fn pasv_reply_shrinks_and_seq_only_updates() {
        let msg = b"227 Entering Passive Mode (172,16,100,200,39,16).\r\n";
        let mut p = frame(false, u32::MAX - 3, 7, msg);
        let edit = PayloadEdit {
            at: 20 + 27,
            old_len: 14,
            form: AddrForm::Commas,
        };
        let a = rewrite(Some(edit), 10, 0).alg.unwrap();
        assert!(apply_alg(&mut p, &a, Some(&v4key([1, 2, 3, 4])), false));
        assert_valid(&p, false);
        assert_eq!(
            &p.data()[54..],
            b"227 Entering Passive Mode (1,2,3,4,39,16).\r\n"
        );
        assert_eq!(be32_at(p.data(), 38), 6, "wrapped");
        // Sequence numbers alone: the checksum is updated incrementally.
        let mut q = frame(false, 100, 200, b"NOOP\r\n");
        assert!(apply_alg(
            &mut q,
            &rewrite(None, -7, 7).alg.unwrap(),
            None,
            false
        ));
        assert_valid(&q, false);
        assert_eq!((be32_at(q.data(), 38), be32_at(q.data(), 42)), (93, 207));
    }

    #[test]
    fn eprt_v6_grows() {
        let msg = b"EPRT |2|fd00::1|5282|\r\n";
        let mut p = frame(true, 1, 1, msg);
        let edit = PayloadEdit {
            at: 20 + 8,
            old_len: 7,
            form: AddrForm::V6,
        };
        let to = "2001:db8:ffff::1234:5678"
            .parse::<Ipv6Addr>()
            .unwrap()
            .octets();
        let a = rewrite(Some(edit), 0, 0).alg.unwrap();
        assert!(apply_alg(&mut p, &a, Some(&to), true));
        assert_valid(&p, true);
        assert_eq!(
            &p.data()[74..],
            b"EPRT |2|2001:db8:ffff::1234:5678|5282|\r\n"
        );
        // An edit beyond the segment is refused and changes nothing.
        let before = p.data().to_vec();
        let bad = PayloadEdit { at: 200, ..edit };
        let a = rewrite(Some(bad), 0, 0).alg.unwrap();
        assert!(!apply_alg(&mut p, &a, Some(&to), true));
        assert_eq!(p.data(), &before[..]);
    }

    /// The tracker decides, the datapath applies: an FTP session behind SNAT, each packet
    /// tracked by [`conntrack::Conntrack`] and rewritten by [`apply_nat`] as the PMD does.
    #[test]
    fn snat_ftp_session_through_tracker_and_rewrite() {
        use conntrack::state::{EST, NEW, SNAT, TRK};
        use conntrack::{Conntrack, CtArgs, CtCache, CtPacket, NatKind};
        let ct = Conntrack::new();
        let mut cache = CtCache::new();
        let (c, s, n) = (
            "10.0.0.1".parse().unwrap(),
            "192.0.2.9".parse().unwrap(),
            "203.0.113.200".parse().unwrap(),
        );
        let mut nat_to = [0u8; 16];
        nat_to[..4].copy_from_slice(&[203, 0, 113, 200]);
        let commit = CtArgs {
            helper: Some(conntrack::alg::Helper::Ftp),
            ..commit_nat(NatKind::Src, nat_to, 0)
        };
        let nat = nat_only();
        // Tracks and rewrites `p` as the PMD's ct() does; returns its state.
        let mut run = |p: &mut Packet, args: &CtArgs| -> u8 {
            let mut md = CtMeta::default();
            let pkt = CtPacket {
                frame: p.data(),
                l3: 14,
                v6: false,
                frag_l4_len: None,
                verified: false,
                natted: false,
            };
            let rw = ct.process(&mut cache, &pkt, &mut md, args, 1);
            if let Some(rw) = &rw {
                assert!(apply_nat(p, rw, false, &md.orig, true));
            }
            md.state
        };
        let mut syn = segment(c, 40000, s, 21, "S", 1000, 0, b"");
        assert_eq!(run(&mut syn, &commit), TRK | NEW | SNAT);
        let mut synack = segment(s, 21, n, 40000, "SA", 5000, 1001, b"");
        assert_eq!(run(&mut synack, &nat) & EST, EST);
        let mut ack = segment(c, 40000, s, 21, "A", 1001, 5001, b"");
        assert_eq!(run(&mut ack, &nat) & EST, EST);
        let mut port = segment(
            c,
            40000,
            s,
            21,
            "PA",
            1001,
            5001,
            b"PORT 10,0,0,1,156,65\r\n",
        );
        assert_eq!(run(&mut port, &nat), TRK | EST | SNAT);
        assert_valid(&port, false);
        assert_eq!(&port.data()[26..30], &[203, 0, 113, 200]);
        assert_eq!(&port.data()[54..], b"PORT 203,0,113,200,156,65\r\n");
        // The server acknowledges the 27 bytes it got; the client sees its own 22.
        let mut sack = segment(s, 21, n, 40000, "A", 5001, 1028, b"");
        assert_eq!(run(&mut sack, &nat) & EST, EST);
        assert_valid(&sack, false);
        assert_eq!(&sack.data()[30..34], &[10, 0, 0, 1]);
        assert_eq!(be32_at(sack.data(), 42), 1023);
        // The client's next command moves up by 5.
        let mut list = segment(c, 40000, s, 21, "PA", 1023, 5001, b"LIST\r\n");
        assert_eq!(run(&mut list, &nat), TRK | EST | SNAT);
        assert_valid(&list, false);
        assert_eq!(be32_at(list.data(), 38), 1028);
    }

    /// Frames made with scapy 2.x (`Ether()/IP()/UDP()/b"payload!"` and the ICMP errors
    /// quoting them): a UDP packet from 10.0.0.1:1000 (fd00::1) to 10.1.0.2:2000 (fd01::2), as
    /// sent and as translated to 10.2.0.1 (fd02::1); an error from a router about the
    /// translated packet, and the error as its sender would have got it without NAT.
    const V4_ORIG: &str = "02000000000202000000000108004500002400010000401166c50a0000010a01000203e807d0001022c27061796c6f616421";
    const V4_SENT: &str = "02000000000202000000000108004500002400010000401166c30a0200010a01000203e807d0001022c07061796c6f616421";
    const V4_ERROR: &str = "02000000000202000000000108004500004000090000400165b30a0100fe0a02000103031124000000004500002400010000401166c30a0200010a01000203e807d0001022c07061796c6f616421";
    const V4_ERROR_BACK: &str = "02000000000202000000000108004500004000090000400165b50a0100fe0a00000103031122000000004500002400010000401166c50a0000010a01000203e807d0001022c27061796c6f616421";
    const V6_ORIG: &str = "02000000000202000000000186dd6000000000101140fd000000000000000000000000000001fd01000000000000000000000000000203e807d000103cc07061796c6f616421";
    const V6_SENT: &str = "02000000000202000000000186dd6000000000101140fd020000000000000000000000000001fd01000000000000000000000000000203e807d000103cbe7061796c6f616421";
    const V6_ERROR: &str = "02000000000202000000000186dd6000000000403a40fd0100000000000000000000000000fefd0200000000000000000000000000010104924e000000006000000000101140fd020000000000000000000000000001fd01000000000000000000000000000203e807d000103cbe7061796c6f616421";
    const V6_ERROR_BACK: &str = "02000000000202000000000186dd6000000000403a40fd0100000000000000000000000000fefd00000000000000000000000000000101049250000000006000000000101140fd000000000000000000000000000001fd01000000000000000000000000000203e807d000103cc07061796c6f616421";

    /// The same for destination NAT: to 10.9.0.9:80, translated to 10.1.0.2:2000; the error
    /// goes back from 10.9.0.9, as OVS and Linux send it.
    const D4_ORIG: &str = "02000000000202000000000108004500002400010000401166b60a0000010a09000903e8005000102a337061796c6f616421";
    const D4_SENT: &str = "02000000000202000000000108004500002400010000401166c50a0000010a01000203e807d0001022c27061796c6f616421";
    const D4_ERROR: &str = "02000000000202000000000108004500004000090000400165b50a0100fe0a00000103031122000000004500002400010000401166c50a0000010a01000203e807d0001022c27061796c6f616421";
    const D4_ERROR_BACK: &str = "02000000000202000000000108004500004000090000400166a20a0900090a00000103031131000000004500002400010000401166b60a0000010a09000903e8005000102a337061796c6f616421";

    /// `ct(commit,nat(src|dst=TO[:PORT]))` (`port` 0: none).
    fn commit_nat(kind: conntrack::NatKind, to: [u8; 16], port: u16) -> conntrack::CtArgs {
        conntrack::CtArgs {
            commit: true,
            nat: Some(conntrack::NatSpec {
                kind: Some(kind),
                addr_min: to,
                addr_max: to,
                has_addr: true,
                port_min: port,
                port_max: port,
                ..conntrack::NatSpec::default()
            }),
            ..conntrack::CtArgs::default()
        }
    }

    /// `ct(nat)`.
    fn nat_only() -> conntrack::CtArgs {
        conntrack::CtArgs {
            nat: Some(conntrack::NatSpec::default()),
            ..conntrack::CtArgs::default()
        }
    }

    fn unhex(h: &str) -> Vec<u8> {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect()
    }

    /// An ICMP error about a translated connection's packet comes back as such; `ct(nat)`
    /// sends it on translated back, the packet it quotes included, byte for byte the error
    /// scapy builds for the untranslated packet.
    #[test]
    fn icmp_errors_of_a_nat_connection_are_translated_back() {
        use conntrack::state::{DNAT, NEW, REL, RPL, SNAT, TRK};
        use conntrack::{Conntrack, CtArgs, CtCache, CtPacket, NatKind};
        let mut fd02 = [0u8; 16];
        fd02[..2].copy_from_slice(&[0xfd, 0x02]);
        fd02[15] = 1;
        let (src, dst) = ((NatKind::Src, 0, SNAT), (NatKind::Dst, 2000, DNAT));
        let cases = [
            (
                false,
                [V4_ORIG, V4_SENT, V4_ERROR, V4_ERROR_BACK],
                v4key([10, 2, 0, 1]),
                src,
            ),
            (true, [V6_ORIG, V6_SENT, V6_ERROR, V6_ERROR_BACK], fd02, src),
            (
                false,
                [D4_ORIG, D4_SENT, D4_ERROR, D4_ERROR_BACK],
                v4key([10, 1, 0, 2]),
                dst,
            ),
        ];
        for (v6, [orig, sent, error, back], to, (kind, port, flag)) in cases {
            let ct = Conntrack::new();
            let mut cache = CtCache::new();
            let commit = commit_nat(kind, to, port);
            let nat = nat_only();
            let mut run = |h: &str, args: &CtArgs| -> (u8, Vec<u8>) {
                let mut p = Packet::from_slice(&unhex(h));
                p.meta.l3 = 14;
                p.meta.l4 = if v6 { 54 } else { 34 };
                let mut md = CtMeta::default();
                let pkt = CtPacket {
                    frame: p.data(),
                    l3: 14,
                    v6,
                    frag_l4_len: None,
                    verified: false,
                    natted: false,
                };
                if let Some(rw) = ct.process(&mut cache, &pkt, &mut md, args, 1) {
                    assert!(apply_nat(&mut p, &rw, v6, &md.orig, true), "v6 {v6}");
                }
                (md.state, p.data().to_vec())
            };
            let (state, out) = run(orig, &commit);
            assert_eq!((state, out), (TRK | NEW | flag, unhex(sent)), "v6 {v6}");
            let (state, out) = run(error, &nat);
            assert_eq!(state, TRK | REL | RPL | flag, "v6 {v6}");
            assert_eq!(out, unhex(back), "v6 {v6}");
        }
    }
}
