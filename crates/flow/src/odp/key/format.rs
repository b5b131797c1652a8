//! The key printer: a [`FlowKey`]/[`Mask`] pair and its [`KeyAttrs`] as OVS's
//! `odp_flow_format()` prints them (`format_odp_key_attr__()` in `lib/odp-util.c`), byte for
//! byte, in the terse form of `dpctl/dump-flows` or the verbose one of `dpctl/dump-flows -m`.
//!
//! The value/mask rules of each field are in the module documentation of [`super`]. The action
//! printer uses the same code for a `set(...)`/`set_masked(...)` action's attribute, an MPLS
//! label stack entry and a tunnel header's GENEVE options.

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::fields::{
    CT_LABEL, CT_STATE, ETH_TYPE, Field, Fmt, GBP_FIELDS, IN_PORT, MPLS_LSE0, SKB_MARK, TCP_FLAGS,
    TUN_FIELDS, f, field_list, mask_is_empty, mask_is_full, max_of, read, read_uint, single_field,
    uint, vlan_slot,
};
use super::flags::{
    CT_STATE_FLAGS, TCP_FLAG_NAMES, TUN_FLAG_NAMES, put_flags, put_flags_masked, tun_flags_to_ovs,
};
use super::{Attr, AttrItem, DpKey, KeyAttrs, MAX_ENCAP_DEPTH, tun_field};
use crate::key::{
    EthAddr, FlowKey, FlowWords, GENEVE_OPTS_MAX, GENEVE_OPTS_OFS, Mask, VLAN_CFI, nw_frag,
};
use crate::odp::names::{PortNames, put_port};
use crate::odp::parse::{hash_x, put_hex};

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

pub(super) fn chomp(out: &mut String, c: char) {
    if out.ends_with(c) {
        out.pop();
    }
}

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
    pub(super) fn is_wildcard(&self, attr: Attr, depth: u8) -> bool {
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
