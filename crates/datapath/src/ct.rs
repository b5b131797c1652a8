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
//! [`PacketMeta`]: crate::packet::PacketMeta

use std::net::{Ipv4Addr, Ipv6Addr};

use conntrack::{CtMeta, NatRewrite, Tuple};
use flow::key::FlowKey;

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

/// Whether the packet is IPv4 (`Some(false)`), IPv6 (`Some(true)`), or neither, judged from
/// the version nibble at its L3 offset.
#[inline]
pub fn ip_version(p: &Packet) -> Option<bool> {
    let l3 = p.meta.l3;
    if l3 == NO_OFS {
        return None;
    }
    match p.data().get(usize::from(l3))? >> 4 {
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

/// For a later `ct()` in `zone` of a packet an earlier one tracked (not `+inv`), the
/// connection's cache reference and original tuple, as [`conntrack::Conntrack::recheck`]
/// takes them.
#[inline]
pub fn cached(p: &Packet, zone: u16, v6: bool) -> Option<(u32, Tuple)> {
    let m = &p.meta;
    if m.ct_state & conntrack::state::TRK == 0
        || m.ct_state & conntrack::state::INV != 0
        || m.ct_zone != zone
    {
        return None;
    }
    let a = p.ct_md();
    let conn_ref = u32::from_ne_bytes(a[CT_MD_CONN_REF..CT_MD_CONN_REF + 4].try_into().unwrap());
    if conn_ref == 0 {
        return None;
    }
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

/// Writes a connection's mark and label into the packet's metadata (a commit's writes).
#[inline]
pub fn set_mark_label(p: &mut Packet, mark: u32, label: u128) {
    let area = p.ct_md_mut();
    area[..16].copy_from_slice(&label.to_be_bytes());
    area[CT_MD_MARK..CT_MD_MARK + 4].copy_from_slice(&mark.to_ne_bytes());
}

/// Forgets the packet's connection state (`ct_clear`).
#[inline]
pub fn clear(p: &mut Packet) {
    p.meta.ct_state = 0;
    p.meta.ct_zone = 0;
}

/// Puts a tracked packet's connection fields into its flow key (`ct_state` not zero).
pub fn to_key(p: &Packet, key: &mut FlowKey) {
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
    if m.ct_state & conntrack::state::INV == 0 {
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
    let d = p.data();
    let l3 = usize::from(p.meta.l3);
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

/// Applies a NAT decision to the packet's addresses and ports, with checksum updates. `l4`:
/// the packet carries the L4 header (not a later fragment).
pub fn apply_nat(p: &mut Packet, rw: &NatRewrite, v6: bool, t: &Tuple, l4: bool) -> bool {
    let (src, dst) = (rw.src, rw.dst);
    let ok = if v6 {
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
    };
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
