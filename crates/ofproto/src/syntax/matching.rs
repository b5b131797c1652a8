//! The match part of a flow: parsing `field=value` items into a [`PipeMatch`] and printing a
//! match as `ovs-ofctl dump-flows` does (OVS's `match_format()`: its field order, the `ip`,
//! `tcp6`, `arp`, ... shorthands, `dl_vlan` versus `vlan_tci`, CIDR masks).

use std::fmt::Write;

use crate::fields::{FieldId, N_TUN_METADATA, Subfield, field_by_name, ones};
use crate::pipekey::{PipeKey, PipeMask, PipeMatch};

use super::SyntaxError;
use super::lex::parse_int;
use super::ports::{PortNames, format_port};
use super::value::{
    CT_STATE_NAMES, TCP_FLAG_NAMES, TUN_FLAG_NAMES, hash_x, parse_field_value, put_eth_masked,
    put_flags, put_flags_masked, put_hex, put_ipv4_masked, put_ipv6_masked,
};

/// The default flow priority (`OFP_DEFAULT_PRIORITY`), which printing leaves out.
pub const DEFAULT_PRIORITY: u16 = 32768;

/// Protocol shorthands: (keyword, dl_type, nw_proto) as OVS's `ofp_parse_protocol()` lists them.
const PROTOCOLS: [(&str, u16, u8); 17] = [
    ("ip", 0x0800, 0),
    ("ipv4", 0x0800, 0),
    ("ip4", 0x0800, 0),
    ("arp", 0x0806, 0),
    ("icmp", 0x0800, 1),
    ("tcp", 0x0800, 6),
    ("udp", 0x0800, 17),
    ("sctp", 0x0800, 132),
    ("ipv6", 0x86dd, 0),
    ("ip6", 0x86dd, 0),
    ("icmp6", 0x86dd, 58),
    ("tcp6", 0x86dd, 6),
    ("udp6", 0x86dd, 17),
    ("sctp6", 0x86dd, 132),
    ("rarp", 0x8035, 0),
    ("mpls", 0x8847, 0),
    ("mplsm", 0x8848, 0),
];

/// A match under construction: items are applied in order, as `ovs-ofctl` applies them, and
/// prerequisites are checked once all are in.
#[derive(Default)]
pub(crate) struct MatchBuilder {
    key: PipeKey,
    mask: PipeMask,
    /// Fields the text named, with the name as written, for the prerequisite check.
    used: Vec<(FieldId, String)>,
}

impl MatchBuilder {
    /// Applies a protocol shorthand; returns false if `name` is not one.
    pub(crate) fn protocol(&mut self, name: &str) -> bool {
        let Some(&(_, dl_type, proto)) = PROTOCOLS.iter().find(|p| p.0 == name) else {
            return false;
        };
        let ty = FieldId::ETH_TYPE.field();
        let _ = ty.match_set(&mut self.key, &mut self.mask, dl_type.into(), 0xffff);
        if proto != 0 {
            let f = FieldId::IP_PROTO.field();
            let _ = f.match_set(&mut self.key, &mut self.mask, proto.into(), 0xff);
            // A later `dl_type` or shorthand may leave the protocol without IP (`icmp6,mpls`).
            self.used.push((FieldId::IP_PROTO, name.to_string()));
        }
        true
    }

    /// Applies `name=value` for the field `id` (`value` empty means "any", as in OVS).
    pub(crate) fn field(
        &mut self,
        id: FieldId,
        name: &str,
        value: &str,
        names: &dyn PortNames,
    ) -> Result<(), SyntaxError> {
        let f = id.field();
        let value = if value.is_empty() { "0/0" } else { value };
        if id.is_tun_metadata()
            && let Some((v, m)) = parse_hex_bytes(value)
        {
            f.match_tun_md_bytes(&mut self.key, &mut self.mask, &v, m.as_deref())
                .map_err(|e| SyntaxError::BadValue {
                    field: name.to_string(),
                    value: value.to_string(),
                    reason: e.to_string(),
                })?;
            self.used.push((id, name.to_string()));
            return Ok(());
        }
        let (v, m) =
            parse_field_value(f, value, names).map_err(|reason| SyntaxError::BadValue {
                field: name.to_string(),
                value: value.to_string(),
                reason,
            })?;
        f.match_set(&mut self.key, &mut self.mask, v, m)
            .map_err(|e| SyntaxError::BadValue {
                field: name.to_string(),
                value: value.to_string(),
                reason: e.to_string(),
            })?;
        if m != 0 || id.is_tun_metadata() {
            self.used.push((id, name.to_string()));
        }
        Ok(())
    }

    /// Applies `FIELD[start..end]=value` (OVS's `parse_subfield()`): an integer for those bits.
    pub(crate) fn subfield(&mut self, name: &str, value: &str) -> Result<(), SyntaxError> {
        let sf = Subfield::parse(name).map_err(|reason| {
            if reason.starts_with("unknown field") {
                SyntaxError::UnknownField(name.to_string())
            } else {
                SyntaxError::BadValue {
                    field: name.to_string(),
                    value: value.to_string(),
                    reason,
                }
            }
        })?;
        let f = sf.field.field();
        let bad = |reason: &str| SyntaxError::BadValue {
            field: name.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let v = parse_int(value, f.n_bytes).map_err(|_| bad("not an integer"))?;
        if v & !ones(sf.n_bits) != 0 {
            return Err(bad(&format!("does not fit into {} bits", sf.n_bits)));
        }
        let (cur_v, cur_m) = if f.is_matched(&self.mask) {
            (
                f.get(&self.key) & f.get_mask(&self.mask),
                f.get_mask(&self.mask),
            )
        } else {
            (0, 0)
        };
        let new_v = (cur_v & !sf.mask()) | (v << sf.ofs);
        let new_m = cur_m | sf.mask();
        let new_m = if new_m == f.value_mask() {
            f.full_mask()
        } else {
            new_m
        };
        f.match_set(&mut self.key, &mut self.mask, new_v, new_m)
            .map_err(|e| bad(&e.to_string()))?;
        self.used.push((sf.field, name.to_string()));
        Ok(())
    }

    /// Checks prerequisites and builds the match.
    pub(crate) fn finish(self) -> Result<PipeMatch, SyntaxError> {
        let m = PipeMatch::new(&self.key, &self.mask);
        for (id, name) in &self.used {
            let f = id.field();
            if !f.is_matched(m.mask()) {
                continue;
            }
            let p = f.match_prereq();
            if !p.is_met_match(m.key(), m.mask()) {
                return Err(SyntaxError::MissingPrereq {
                    field: name.clone(),
                    prereq: p,
                });
            }
        }
        Ok(m)
    }
}

/// Whether `name` names a match field (`ovs-ofctl` accepts canonical names and aliases only;
/// NXM/OXM names appear in subfield syntax).
pub(crate) fn match_field(name: &str) -> Option<FieldId> {
    field_by_name(name)
}

fn put_u32_masked(out: &mut String, name: &str, v: u32, m: u32) {
    if m != 0 {
        let _ = write!(out, "{name}={}", hash_x(v.into()));
        if m != u32::MAX {
            let _ = write!(out, "/{}", hash_x(m.into()));
        }
        out.push(',');
    }
}

fn put_u64_masked(out: &mut String, name: &str, v: u64, m: u64) {
    if m != 0 {
        let _ = write!(out, "{name}={}", hash_x(v.into()));
        if m != u64::MAX {
            let _ = write!(out, "/{}", hash_x(m.into()));
        }
        out.push(',');
    }
}

/// `format_be16_masked()` / `format_uint16_masked()`: decimal when exact.
fn put_u16_masked(out: &mut String, name: &str, v: u16, m: u16) {
    if m != 0 {
        if m == u16::MAX {
            let _ = write!(out, "{name}={v},");
        } else {
            let _ = write!(out, "{name}={v:#x}/{m:#x},");
        }
    }
}

fn put_ip(out: &mut String, name: &str, v: u32, m: u32) {
    if m != 0 {
        let _ = write!(out, "{name}=");
        put_ipv4_masked(out, v, m);
        out.push(',');
    }
}

/// `tun_metadata<n>` of a match as OVS prints it: the name alone when only presence is
/// matched, the value (and a mask that is not all ones) in hexadecimal without leading zeros.
fn put_tun_metadata(out: &mut String, m: &PipeMatch, n: usize) {
    let (v, len) = crate::tun_md::value(&m.key().dp, &m.key().meta, n);
    let (mk, _) = crate::tun_md::value(&m.mask().dp, &m.mask().meta, n);
    let (v, mk) = (&v[..len], &mk[..len]);
    let _ = write!(out, "tun_metadata{n}");
    if mk.iter().any(|&b| b != 0) {
        out.push('=');
        put_hex_bytes(out, v);
        // Unmapped, the mask is implied when the value's significant bytes (at least one)
        // give it; mapped, when it is the whole option.
        let implied = if crate::tun_md::mapped(n) {
            0
        } else {
            let sig = v.iter().skip_while(|&&b| b == 0).count().max(1);
            len - sig
        };
        let exact =
            mk[..implied].iter().all(|&b| b == 0) && mk[implied..].iter().all(|&b| b == 0xff);
        if !exact {
            out.push('/');
            put_hex_bytes(out, mk);
        }
    }
    out.push(',');
}

/// Big-endian bytes as `0x...` without leading zeros (`0` when all are zero), as OVS's
/// `ds_put_hex()` writes them.
pub fn put_hex_bytes(out: &mut String, b: &[u8]) {
    let z = b.iter().take_while(|&&x| x == 0).count();
    match b.get(z) {
        None => out.push('0'),
        Some(first) => {
            let _ = write!(out, "0x{first:x}");
            for x in &b[z + 1..] {
                let _ = write!(out, "{x:02x}");
            }
        }
    }
}

/// `0xHEX[/0xHEX]` as big-endian bytes of any length (tunnel metadata up to 124 bytes);
/// `None` for any other form.
pub fn parse_hex_bytes(s: &str) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let (v, m) = match s.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (s, None),
    };
    let v = hex_bytes(v)?;
    let m = match m {
        Some(m) => Some(hex_bytes(m)?),
        None => None,
    };
    Some((v, m))
}

fn hex_bytes(s: &str) -> Option<Vec<u8>> {
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if h.is_empty() || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let padded = if h.len() % 2 == 1 {
        format!("0{h}")
    } else {
        h.to_owned()
    };
    (0..padded.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&padded[i..i + 2], 16).ok())
        .collect()
}

fn put_ipv6(out: &mut String, name: &str, v: u128, m: u128) {
    if m != 0 {
        let _ = write!(out, "{name}=");
        put_ipv6_masked(out, v, m);
        out.push(',');
    }
}

fn put_eth(out: &mut String, name: &str, v: u128, m: u128) {
    if m != 0 {
        let _ = write!(out, "{name}=");
        put_eth_masked(out, v, m);
        out.push(',');
    }
}

fn eth(w: flow::EthAddr) -> u128 {
    w.0.iter().fold(0, |acc, &b| (acc << 8) | u128::from(b))
}

/// Appends `priority` (unless default) and the match as `ovs-ofctl dump-flows` prints them.
pub fn format_match(out: &mut String, m: &PipeMatch, priority: u16, names: &dyn PortNames) {
    let start = out.len();
    let (f, w) = (&m.key().dp, &m.mask().dp);
    let (fm, wm) = (&m.key().meta, &m.mask().meta);
    if priority != DEFAULT_PRIORITY {
        let _ = write!(out, "priority={priority},");
    }
    put_u32_masked(out, "pkt_mark", f.pkt_mark(), w.pkt_mark());
    // A match on recirc_id is a megaflow's (a trace's `Megaflow:`): it then also says its
    // packet type, as OVS's `match_format()` does.
    let is_megaflow = w.recirc_id() != 0;
    put_u32_masked(out, "recirc_id", f.recirc_id(), w.recirc_id());
    put_u32_masked(out, "dp_hash", f.dp_hash(), w.dp_hash());
    if wm.conj_id != 0 {
        let _ = write!(out, "conj_id={},", fm.conj_id);
    }
    if wm.skb_priority != 0 {
        let _ = write!(out, "skb_priority={},", hash_x(fm.skb_priority.into()));
    }
    if w.ct_state() != 0 {
        out.push_str("ct_state=");
        if w.ct_state() == u8::MAX {
            put_flags(out, CT_STATE_NAMES, f.ct_state().into());
        } else {
            put_flags_masked(
                out,
                CT_STATE_NAMES,
                f.ct_state().into(),
                w.ct_state().into(),
                0xff,
            );
        }
        out.push(',');
    }
    put_u16_masked(out, "ct_zone", f.ct_zone(), w.ct_zone());
    put_u32_masked(out, "ct_mark", f.ct_mark(), w.ct_mark());
    if w.ct_label() != 0 {
        out.push_str("ct_label=");
        put_hex(out, f.ct_label());
        if w.ct_label() != u128::MAX {
            out.push('/');
            put_hex(out, w.ct_label());
        }
        out.push(',');
    }
    // The original-direction tuple. Its addresses are IPv6-wide in the key; an IPv4 tuple
    // uses their first four bytes.
    let ct_ip = |ofs: usize| {
        let mut b = [0u8; 16];
        f.bytes_at(ofs, &mut b);
        let mut m = [0u8; 16];
        w.bytes_at(ofs, &mut m);
        (u128::from_be_bytes(b), u128::from_be_bytes(m))
    };
    let v6 = f.eth_type() == 0x86dd;
    for (ofs, v4_name, v6_name) in [
        (224, "ct_nw_src", "ct_ipv6_src"),
        (240, "ct_nw_dst", "ct_ipv6_dst"),
    ] {
        let (v, m) = ct_ip(ofs);
        if v6 {
            put_ipv6(out, v6_name, v, m);
        } else {
            put_ip(out, v4_name, (v >> 96) as u32, (m >> 96) as u32);
        }
    }
    if w.ct_nw_proto() != 0 {
        let _ = write!(out, "ct_nw_proto={},", f.ct_nw_proto());
    }
    // OVS prints the ports only with ct_nw_proto; they are printed whenever matched here, so
    // that the printed flow parses back to the same match.
    put_u16_masked(out, "ct_tp_src", f.ct_tp_src(), w.ct_tp_src());
    put_u16_masked(out, "ct_tp_dst", f.ct_tp_dst(), w.ct_tp_dst());
    // A flow of another packet type than Ethernet says it too.
    if (is_megaflow || f.packet_type() != 0) && w.packet_type() != 0 {
        let (pt, pm) = (f.packet_type(), w.packet_type());
        if pt == 0 && pm == u32::MAX {
            out.push_str("eth,");
        } else {
            // OVS's put_u16_masked(): small values in decimal, `*` for a wildcard.
            let half = |v: u32, m: u32| match m {
                0 => "*".to_owned(),
                _ => {
                    let mut t = if v > 9 {
                        format!("{v:#x}")
                    } else {
                        v.to_string()
                    };
                    if m != 0xffff {
                        let _ = write!(t, "/{m:#x}");
                    }
                    t
                }
            };
            let _ = write!(
                out,
                "packet_type=({},{}),",
                half(pt >> 16, pm >> 16),
                half(pt & 0xffff, pm & 0xffff)
            );
        }
    }

    // An L3 packet's ethertype is its packet type's (OVS's get_dl_type()).
    let dl_type = match (f.packet_type(), w.packet_type()) {
        (pt, u32::MAX) if pt >> 16 == 1 => pt as u16,
        _ => f.eth_type(),
    };
    let (mut skip_type, mut skip_proto) = (false, false);
    if w.eth_type() != 0 {
        skip_type = true;
        let proto_masked = w.nw_proto() != 0;
        let shorthand = match dl_type {
            0x0800 | 0x86dd => {
                let v6 = dl_type == 0x86dd;
                let named = match (proto_masked, f.nw_proto()) {
                    (true, 1) if !v6 => Some("icmp"),
                    (true, 58) if v6 => Some("icmp6"),
                    (true, 6) => Some(if v6 { "tcp6" } else { "tcp" }),
                    (true, 17) => Some(if v6 { "udp6" } else { "udp" }),
                    (true, 132) => Some(if v6 { "sctp6" } else { "sctp" }),
                    _ => None,
                };
                skip_proto = named.is_some();
                Some(named.unwrap_or(if v6 { "ipv6" } else { "ip" }))
            }
            0x0806 => Some("arp"),
            0x8035 => Some("rarp"),
            0x8847 => Some("mpls"),
            0x8848 => Some("mplsm"),
            _ => None,
        };
        match shorthand {
            Some(s) => {
                out.push_str(s);
                out.push(',');
            }
            None => skip_type = false,
        }
    }
    for i in 0..16 {
        put_u32_masked(out, &format!("reg{i}"), fm.regs[i], wm.regs[i]);
    }

    // format_flow_tunnel()
    put_u64_masked(out, "tun_id", f.tun_id(), w.tun_id());
    put_ip(
        out,
        "tun_src",
        f.tun_ipv4_src().into(),
        w.tun_ipv4_src().into(),
    );
    put_ip(
        out,
        "tun_dst",
        f.tun_ipv4_dst().into(),
        w.tun_ipv4_dst().into(),
    );
    put_ipv6(
        out,
        "tun_ipv6_src",
        f.tun_ipv6_src().into(),
        w.tun_ipv6_src().into(),
    );
    put_ipv6(
        out,
        "tun_ipv6_dst",
        f.tun_ipv6_dst().into(),
        w.tun_ipv6_dst().into(),
    );
    put_u16_masked(out, "tun_gbp_id", f.tun_gbp_id(), w.tun_gbp_id());
    if w.tun_gbp_flags() != 0 {
        let _ = write!(out, "tun_gbp_flags={},", hash_x(f.tun_gbp_flags().into()));
    }
    if w.tun_tos() != 0 {
        let _ = write!(out, "tun_tos={:x},", f.tun_tos());
    }
    if w.tun_ttl() != 0 {
        let _ = write!(out, "tun_ttl={},", f.tun_ttl());
    }
    // From the datapath's flags: a megaflow (`ofproto/trace`) may match df, csum and key too,
    // which OVS prints (`tun_flags=-df-csum-key`); an OpenFlow rule only `oam`.
    let tun_mask = flow::odp::tun_flags_to_ovs(m.mask().dp.tun_flags());
    if tun_mask != 0 {
        let v = flow::odp::tun_flags_to_ovs(m.key().dp.tun_flags());
        out.push_str("tun_flags=");
        put_flags_masked(out, TUN_FLAG_NAMES, v, tun_mask, 0xf);
        out.push(',');
    }
    for n in 0..N_TUN_METADATA {
        if crate::tun_md::present(&m.mask().meta, n) {
            put_tun_metadata(out, m, n);
        }
    }

    put_u64_masked(out, "metadata", fm.metadata, wm.metadata);
    if w.in_port() != 0 {
        out.push_str("in_port=");
        format_port(out, f.in_port() & 0xffff, names);
        out.push(',');
    }

    // The VLAN headers, outermost first, as dl_vlan, dl_vlan1 (OVS's match_format()).
    let vlans = [
        ("", f.vlan_tci(), w.vlan_tci()),
        ("1", f.vlan2_tci(), w.vlan2_tci()),
    ];
    for (i, tci, tci_m) in vlans {
        if tci_m == 0 {
            break;
        }
        let (vid_m, pcp_m, cfi_m) = (tci_m & 0x0fff, tci_m & 0xe000, tci_m & 0x1000);
        if cfi_m != 0
            && tci & 0x1000 != 0
            && (vid_m == 0 || vid_m == 0x0fff)
            && (pcp_m == 0 || pcp_m == 0xe000)
            && (vid_m != 0 || pcp_m != 0)
        {
            if vid_m != 0 {
                let _ = write!(out, "dl_vlan{i}={},", tci & 0x0fff);
            }
            if pcp_m != 0 {
                let _ = write!(out, "dl_vlan_pcp{i}={},", tci >> 13);
            }
        } else if tci_m == 0xffff {
            let _ = write!(out, "vlan_tci{i}=0x{tci:04x},");
        } else {
            let _ = write!(out, "vlan_tci{i}=0x{tci:04x}/0x{tci_m:04x},");
        }
    }

    put_eth(out, "dl_src", eth(f.eth_src()), eth(w.eth_src()));
    put_eth(out, "dl_dst", eth(f.eth_dst()), eth(w.eth_dst()));
    if !skip_type && w.eth_type() != 0 {
        let _ = write!(out, "dl_type=0x{dl_type:04x},");
    }
    let is_arp = dl_type == 0x0806 || dl_type == 0x8035;
    if dl_type == 0x86dd {
        put_ipv6(out, "ipv6_src", f.ipv6_src().into(), w.ipv6_src().into());
        put_ipv6(out, "ipv6_dst", f.ipv6_dst().into(), w.ipv6_dst().into());
        if w.ipv6_label() != 0 {
            if w.ipv6_label() == u32::MAX {
                let _ = write!(out, "ipv6_label=0x{:05x},", f.ipv6_label());
            } else {
                let _ = write!(
                    out,
                    "ipv6_label=0x{:05x}/0x{:05x},",
                    f.ipv6_label(),
                    w.ipv6_label()
                );
            }
        }
    } else if is_arp {
        put_ip(out, "arp_spa", f.nw_src().into(), w.nw_src().into());
        put_ip(out, "arp_tpa", f.nw_dst().into(), w.nw_dst().into());
    } else {
        put_ip(out, "nw_src", f.nw_src().into(), w.nw_src().into());
        put_ip(out, "nw_dst", f.nw_dst().into(), w.nw_dst().into());
    }
    if !skip_proto && w.nw_proto() != 0 {
        let name = if is_arp { "arp_op" } else { "nw_proto" };
        let _ = write!(out, "{name}={},", f.nw_proto());
    }
    if is_arp {
        put_eth(out, "arp_sha", eth(f.arp_sha()), eth(w.arp_sha()));
        put_eth(out, "arp_tha", eth(f.arp_tha()), eth(w.arp_tha()));
    }
    if w.nw_tos() & 0xfc != 0 {
        let _ = write!(out, "nw_tos={},", f.nw_tos() & 0xfc);
    }
    if w.nw_tos() & 0x03 != 0 {
        let _ = write!(out, "nw_ecn={},", f.nw_tos() & 0x03);
    }
    if w.nw_ttl() != 0 {
        let _ = write!(out, "nw_ttl={},", f.nw_ttl());
    }
    let (lse, lse_m) = (f.mpls_lse0(), w.mpls_lse0());
    if lse_m & 0xffff_f000 != 0 {
        let _ = write!(out, "mpls_label={},", lse >> 12);
    }
    if lse_m & 0x0e00 != 0 {
        let _ = write!(out, "mpls_tc={},", (lse >> 9) & 7);
    }
    if lse_m & 0xff != 0 {
        let _ = write!(out, "mpls_ttl={},", lse & 0xff);
    }
    if lse_m & 0x100 != 0 {
        let _ = write!(out, "mpls_bos={},", (lse >> 8) & 1);
    }
    put_u32_masked_be(out, "mpls_lse1", f.mpls_lse1(), w.mpls_lse1());
    put_u32_masked_be(out, "mpls_lse2", f.mpls_lse2(), w.mpls_lse2());

    let frag = f.nw_frag();
    match w.nw_frag() & 3 {
        3 => {
            let s = match (frag & 1 != 0, frag & 2 != 0) {
                (true, true) => "later",
                (true, false) => "first",
                (false, false) => "no",
                (false, true) => "<error>",
            };
            let _ = write!(out, "nw_frag={s},");
        }
        1 => {
            let _ = write!(out, "nw_frag={},", if frag & 1 != 0 { "yes" } else { "no" });
        }
        2 => {
            let _ = write!(
                out,
                "nw_frag={},",
                if frag & 2 != 0 { "later" } else { "not_later" }
            );
        }
        _ => {}
    }
    let proto = f.nw_proto();
    if (dl_type == 0x0800 && proto == 1) || (dl_type == 0x86dd && proto == 58) {
        put_u16_masked(out, "icmp_type", f.tp_src(), w.tp_src());
        put_u16_masked(out, "icmp_code", f.tp_dst(), w.tp_dst());
        if dl_type == 0x86dd {
            put_ipv6(out, "nd_target", f.nd_target().into(), w.nd_target().into());
            put_eth(out, "nd_sll", eth(f.arp_sha()), eth(w.arp_sha()));
            put_eth(out, "nd_tll", eth(f.arp_tha()), eth(w.arp_tha()));
        }
    } else {
        put_u16_masked(out, "tp_src", f.tp_src(), w.tp_src());
        put_u16_masked(out, "tp_dst", f.tp_dst(), w.tp_dst());
    }
    if (dl_type == 0x0800 || dl_type == 0x86dd) && proto == 6 && w.tcp_flags() != 0 {
        out.push_str("tcp_flags=");
        put_flags_masked(
            out,
            TCP_FLAG_NAMES,
            f.tcp_flags().into(),
            u32::from(w.tcp_flags() & 0x0fff),
            0x0fff,
        );
        out.push(',');
    }
    if out.len() > start && out.ends_with(',') {
        out.pop();
    }
}

/// `format_be32_masked()`: decimal when exact, else `0x%08x/0x%08x`.
fn put_u32_masked_be(out: &mut String, name: &str, v: u32, m: u32) {
    if m != 0 {
        if m == u32::MAX {
            let _ = write!(out, "{name}={v},");
        } else {
            let _ = write!(out, "{name}=0x{v:08x}/0x{m:08x},");
        }
    }
}
