//! The key parser: `in_port(1),eth(src=..,dst=..),eth_type(0x0800),ipv4(...)` into a
//! [`DpKey`], as OVS's `odp_flow_from_string()` accepts it (`parse_odp_key_mask_attr()` in
//! `lib/odp-util.c`).
//!
//! Besides values and masks, the parser records which attributes appeared, in which order and
//! `encap(` depth, and whether the text can only have come from the verbose form (an explicit
//! zero mask, a numeric `ct_state`), so that printing the key back gives the same text. It also
//! parses the one attribute of a `set(...)` action for the action parser.

use std::borrow::Cow;
use std::net::Ipv4Addr;

/// A netlink attribute's header, and the most its payload holds (OVS's `nl_attr_oversized()`).
const NLA_HDRLEN: usize = 4;
const NLA_PAYLOAD_MAX: usize = u16::MAX as usize - NLA_HDRLEN;

use super::fields::{
    CT_LABEL, ETH_TYPE, Field, Fmt, GBP_FIELDS, IN_PORT, MPLS_LSE0, TUN_FIELDS, field_list, max_of,
    single_field, vlan_slot, write_uint,
};
use super::flags::{
    CT_STATE_FLAGS, TCP_FLAG_NAMES, TUN_FLAG_NAMES, parse_flags, tun_flags_from_ovs,
};
use super::format::KeyFmt;
use super::{Attr, DpKey, MAX_ENCAP_DEPTH, tun_field};
use crate::key::{EthAddr, GENEVE_OPTS_MAX, VLAN_CFI, nw_frag};
use crate::odp::names::PortNames;
use crate::odp::parse::{Cursor, PResult, ParseErrorKind};

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
        // `ct_mark()`, `ct_zone()` and `ct_label()`: what the printer writes for a wildcard
        // (OVS hides their empty masks), read back as one.
        let hides_empty = matches!(attr, Attr::CtMark | Attr::CtZone | Attr::CtLabel);
        if hides_empty && c.peek() == Some(b')') {
            self.note_mask(true);
            return c.expect(b')', "')'");
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
            Attr::Tunnel => self.parse_tunnel(c, start),
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

    /// `tunnel(...)`'s fields, from `start` (the attribute's name) on. A field given twice is
    /// refused once the attribute ends, unless OVS's netlink encoding of it (every field its
    /// own attribute, repeats too) is then too long for a netlink attribute, which is refused
    /// as that ([`ParseErrorKind::TooLong`]) as OVS's parser does.
    fn parse_tunnel(&mut self, c: &mut Cursor<'_>, start: usize) -> PResult<()> {
        if c.eat(b')') {
            return Ok(());
        }
        let mut nl_len = 0usize;
        let mut dup = None;
        loop {
            let at = c.pos;
            let w = c.word();
            let bit = if let Some((bit, fd)) = TUN_FIELDS.iter().find(|(_, fd)| fd.name == w) {
                if !c.eat(b'=') {
                    return Err(c.expected(format!("'=' after {w}")));
                }
                if dup.is_none() {
                    dup = self.check_tun_dup(c, at, *bit, w).err();
                }
                self.parse_field_value(c, fd)?;
                nl_len += NLA_HDRLEN + fd.len.next_multiple_of(4);
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
                if nl_len > NLA_PAYLOAD_MAX {
                    return Err(c.err_at(start, ParseErrorKind::TooLong));
                }
                return dup.map_or(Ok(()), Err);
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

/// Parses a key as `dpctl/add-flow` takes it: `in_port(1),eth_type(0x0800),ipv4(...)`. A
/// `ufid:` prefix is accepted and ignored.
pub fn parse_key(text: &str, names: &mut PortNames) -> Result<DpKey, crate::odp::ParseError> {
    let mut c = Cursor::new(text);
    c.skip_spaces();
    if c.rest().starts_with("ufid:") {
        crate::odp::parse_ufid(&mut c)?;
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
