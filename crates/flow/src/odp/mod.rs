//! OVS's datapath flow text format: what `ovs-appctl dpctl/dump-flows` and `dpif/dump-flows`
//! print and what `dpctl/add-flow` accepts.
//!
//! ```text
//! [ufid:<uuid>, ]<key>[, packets:N, bytes:N, used:<secs>s|never[, flags:<tcp>]]
//!     [, offloaded:yes|partial][, dp:ovs], actions:<actions>[, dp-extra-info:<text>]
//! ```
//!
//! The printers reproduce OVS's output byte for byte (`odp_flow_format()`,
//! `dpif_flow_stats_format()` and `format_odp_actions()` in OVS's `lib/odp-util.c`,
//! `lib/dpif.c`); the parsers accept what `odp_flow_from_string()` and
//! `odp_actions_from_string()` accept, and report errors with the column and what was expected.
//! Parsing a dump line and printing it back gives the same line: a [`DpFlow`] remembers which
//! attributes appeared and whether the line was the verbose form ([`KeyAttrs`]).
//!
//! Port names ([`PortNames`]) may stand for port numbers wherever OVS allows them.

mod actions;
mod from_flow;
mod key;
mod names;
mod parse;

pub use actions::{
    Action, CtAction, CtNat, HashAlg, MAX_ACTION_DEPTH, NatKind, TnlHeader, TnlIp, TnlL4, TnlPush,
    TnlUdp, UserCookie, Userspace, format_actions, format_actions_into, parse_actions,
};
pub use key::{
    Attr, AttrItem, CT_STATE_FLAGS, DpKey, FlagTable, KeyAttrs, MAX_ENCAP_DEPTH, TCP_FLAG_NAMES,
    TUN_FLAG_NAMES, format_key_into, parse_key, tun_field, tun_flags_to_ovs,
};
pub use names::{FIRST_ALLOCATED_PORT, PortNames};
pub use parse::{ParseError, ParseErrorKind};

use std::fmt::{self, Write};

use crate::key::{FlowKey, Mask};
use parse::{Cursor, PResult};

/// How long ago a flow was last used, as `used:` prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Used {
    /// Milliseconds since the last hit.
    pub ms: u64,
    /// Decimals printed (OVS prints 3; test suites sometimes show fewer). At most 3.
    pub decimals: u8,
}

impl Used {
    /// `ms` milliseconds ago, printed as OVS does (`0.004s`).
    pub fn millis(ms: u64) -> Self {
        Used { ms, decimals: 3 }
    }
}

/// Flow statistics: `packets:N, bytes:N, used:0.004s|never[, flags:SFPRU.EC]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowStats {
    /// Packets that hit the flow (`packets:`).
    pub packets: u64,
    /// Bytes of those packets (`bytes:`).
    pub bytes: u64,
    /// `None` prints `never`.
    pub used: Option<Used>,
    /// TCP flags seen (12 bits); printed only when non-zero.
    pub tcp_flags: u16,
}

/// One datapath flow as a dump line shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DpFlow {
    /// The flow's unique id (`ufid:` prefix), as its 16 bytes in printed order.
    pub ufid: Option<[u8; 16]>,
    /// Key values. Not masked: verbose dumps show values under zero masks, and they are kept.
    pub key: FlowKey,
    /// The megaflow mask: which bits of each key field the flow matches (`value/mask` in the
    /// text; a zero mask wildcards the field).
    pub mask: Mask,
    /// What the text form needs beyond `key` and `mask`.
    pub attrs: KeyAttrs,
    /// `packets:`, `bytes:`, `used:` and `flags:`; `None` when the line has none (a flow as
    /// `dpctl/add-flow` takes it).
    pub stats: Option<FlowStats>,
    /// `offloaded:yes|partial`.
    pub offloaded: Option<String>,
    /// `dp:ovs`, `dp:tc`, ...
    pub dp: Option<String>,
    /// Empty prints as `drop`.
    pub actions: Vec<Action>,
    /// `dp-extra-info:...` (e.g. `miniflow_bits(9,2)`), kept verbatim.
    pub extra_info: Option<String>,
}

impl DpFlow {
    /// A flow with this key and actions and no statistics.
    pub fn new(key: DpKey, actions: Vec<Action>) -> Self {
        DpFlow {
            key: key.key,
            mask: key.mask,
            attrs: key.attrs,
            actions,
            ..Default::default()
        }
    }

    /// The flow's key, mask and attribute memory as one [`DpKey`].
    pub fn dp_key(&self) -> DpKey {
        DpKey {
            key: self.key.clone(),
            mask: self.mask.clone(),
            attrs: self.attrs.clone(),
        }
    }

    /// Prints the flow line. `names` turns port numbers into names (`dpctl/dump-flows -m`
    /// does); `verbose` overrides the form the flow was parsed in.
    pub fn format(&self, names: Option<&PortNames>, verbose: Option<bool>) -> String {
        let mut out = String::new();
        if let Some(u) = &self.ufid {
            put_ufid(&mut out, u);
            out.push_str(", ");
        }
        format_key_into(&mut out, &self.key, &self.mask, &self.attrs, names, verbose);
        if let Some(s) = &self.stats {
            let _ = write!(out, ", packets:{}, bytes:{}, used:", s.packets, s.bytes);
            match s.used {
                Some(u) => put_used(&mut out, u),
                None => out.push_str("never"),
            }
            if s.tcp_flags != 0 {
                out.push_str(", flags:");
                put_tcp_flags(&mut out, s.tcp_flags);
            }
        }
        if let Some(o) = &self.offloaded {
            let _ = write!(out, ", offloaded:{o}");
        }
        if let Some(d) = &self.dp {
            let _ = write!(out, ", dp:{d}");
        }
        out.push_str(", actions:");
        format_actions_into(&mut out, &self.actions, names);
        if let Some(x) = &self.extra_info {
            let _ = write!(out, ", dp-extra-info:{x}");
        }
        out
    }
}

impl fmt::Display for DpFlow {
    /// The flow line with port numbers, in the form it was parsed in.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.format(None, None))
    }
}

/// Parses one dump line (`dpctl/dump-flows [-m]`, `dpif/dump-flows`), or a flow as
/// `dpctl/add-flow` would print it (key, then `, actions:`). Unknown port names are given
/// numbers in `names`.
pub fn parse_flow(text: &str, names: &mut PortNames) -> Result<DpFlow, ParseError> {
    let mut c = Cursor::new(text);
    c.skip_spaces();
    let mut flow = DpFlow::default();
    if c.rest().starts_with("ufid:") {
        flow.ufid = Some(parse_ufid(&mut c)?);
        c.eat(b',');
        c.skip_spaces();
    }
    let mut kp = key::KeyParser::new(names);
    kp.parse_top(&mut c)?;
    let k = kp.finish();
    flow.key = k.key;
    flow.mask = k.mask;
    flow.attrs = k.attrs;

    let mut item = next_item(&mut c)?;
    if item == "packets" {
        let packets = c.u64("packets")?;
        expect_item(&mut c, "bytes")?;
        let bytes = c.u64("bytes")?;
        expect_item(&mut c, "used")?;
        let used = if c.eat_str("never") {
            None
        } else {
            Some(parse_used(&mut c)?)
        };
        let mut s = FlowStats {
            packets,
            bytes,
            used,
            tcp_flags: 0,
        };
        item = next_item(&mut c)?;
        if item == "flags" {
            s.tcp_flags = parse_tcp_flags(&mut c)?;
            item = next_item(&mut c)?;
        }
        flow.stats = Some(s);
    }
    if item == "offloaded" {
        flow.offloaded = Some(token(&mut c, "offloaded state")?);
        item = next_item(&mut c)?;
    }
    if item == "dp" {
        flow.dp = Some(token(&mut c, "datapath type")?);
        item = next_item(&mut c)?;
    }
    if item != "actions" {
        return Err(c.err_at(
            c.pos - item.len() - 1,
            ParseErrorKind::Expected("'packets:', 'dp:' or 'actions:'".into()),
        ));
    }
    flow.actions = actions::ActionParser::new(names).parse_list(&mut c, false)?;
    if c.eat_str(", dp-extra-info:") {
        let rest = c.rest().trim_end();
        if rest.is_empty() {
            return Err(c.expected("dp-extra-info text"));
        }
        flow.extra_info = Some(rest.to_owned());
        c.pos += c.rest().len();
    }
    c.skip_spaces();
    if !c.at_end() {
        return Err(c.expected("end of flow or ', dp-extra-info:'"));
    }
    Ok(flow)
}

/// `, name:` between the parts of a flow line; returns `name`.
fn next_item<'a>(c: &mut Cursor<'a>) -> PResult<&'a str> {
    if !c.eat(b',') {
        return Err(c.expected("', ' and 'actions:' after the key"));
    }
    c.skip_spaces();
    let start = c.pos;
    while c
        .peek()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        c.pos += 1;
    }
    let w = c.slice(start, c.pos);
    if w.is_empty() || !c.eat(b':') {
        c.pos = start;
        return Err(c.expected("'packets:', 'dp:' or 'actions:'"));
    }
    Ok(w)
}

fn expect_item(c: &mut Cursor<'_>, name: &'static str) -> PResult<()> {
    let at = c.pos;
    match next_item(c) {
        Ok(w) if w == name => Ok(()),
        _ => {
            c.pos = at;
            Err(c.expected(format!("', {name}:'")))
        }
    }
}

fn token(c: &mut Cursor<'_>, what: &'static str) -> PResult<String> {
    let t = c.name_token();
    if t.is_empty() {
        Err(c.expected(what))
    } else {
        Ok(t.to_owned())
    }
}

/// `ufid:xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub(crate) fn parse_ufid(c: &mut Cursor<'_>) -> PResult<[u8; 16]> {
    c.expect_str("ufid:", "'ufid:'")?;
    let mut out = [0u8; 16];
    let mut k = 0;
    for (g, len) in [8usize, 4, 4, 4, 12].into_iter().enumerate() {
        if g > 0 {
            c.expect(b'-', "'-' in ufid")?;
        }
        for _ in 0..len / 2 {
            let hi = c.peek().and_then(|b| (b as char).to_digit(16));
            let lo = c.peek_at(1).and_then(|b| (b as char).to_digit(16));
            match (hi, lo) {
                (Some(h), Some(l)) => {
                    out[k] = (h << 4 | l) as u8;
                    k += 1;
                    c.pos += 2;
                }
                (Some(_), None) => {
                    c.pos += 1;
                    return Err(c.expected("hex digit in ufid"));
                }
                _ => return Err(c.expected("hex digit in ufid")),
            }
        }
    }
    if c.peek().is_some_and(|b| b.is_ascii_hexdigit()) {
        return Err(c.expected("end of ufid"));
    }
    Ok(out)
}

/// Appends `ufid:xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, the flow id as OVS's
/// `odp_format_ufid()` prints it. `dpctl/dump-flows -m` follows it with `, ` and
/// `dpif/dump-flows -m` with a space.
pub fn put_ufid(out: &mut String, u: &[u8; 16]) {
    out.push_str("ufid:");
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        let _ = write!(out, "{b:02x}");
    }
}

/// `0.004s`: seconds with up to three decimals.
fn parse_used(c: &mut Cursor<'_>) -> PResult<Used> {
    let secs = c.u64("used seconds")?;
    let mut ms_frac = 0u64;
    let mut decimals = 0u8;
    if c.eat(b'.') {
        while let Some(d) = c.peek().filter(u8::is_ascii_digit) {
            if decimals == 3 {
                return Err(c.expected("at most three decimals in used"));
            }
            ms_frac = ms_frac * 10 + (d - b'0') as u64;
            decimals += 1;
            c.pos += 1;
        }
    }
    c.expect(b's', "'s' after used seconds")?;
    let ms = secs
        .checked_mul(1000)
        .and_then(|m| m.checked_add(ms_frac * 10u64.pow(3 - decimals as u32)))
        .ok_or_else(|| c.expected("a smaller used time"))?;
    Ok(Used { ms, decimals })
}

fn put_used(out: &mut String, u: Used) {
    let d = u.decimals.min(3) as u32;
    let unit = 10u64.pow(3 - d);
    // Round half up to the printed precision.
    let scaled = u.ms.saturating_add(unit / 2) / unit;
    let p = 10u64.pow(d);
    let _ = write!(out, "{}", scaled / p);
    if d > 0 {
        let _ = write!(out, ".{:0width$}", scaled % p, width = d as usize);
    }
    out.push('s');
}

/// Letters of `flags:` in OVS's order (`packet_format_tcp_flags()`).
const TCP_FLAG_LETTERS: [(u16, &str); 12] = [
    (0x002, "S"),
    (0x001, "F"),
    (0x008, "P"),
    (0x004, "R"),
    (0x020, "U"),
    (0x010, "."),
    (0x040, "E"),
    (0x080, "C"),
    (0x100, "N"),
    (0x200, "[200]"),
    (0x400, "[400]"),
    (0x800, "[800]"),
];

fn put_tcp_flags(out: &mut String, f: u16) {
    for (bit, s) in TCP_FLAG_LETTERS {
        if f & bit != 0 {
            out.push_str(s);
        }
    }
}

fn parse_tcp_flags(c: &mut Cursor<'_>) -> PResult<u16> {
    if c.eat_str("none") {
        return Ok(0);
    }
    let mut f = 0;
    'outer: loop {
        for (bit, s) in TCP_FLAG_LETTERS {
            if c.eat_str(s) {
                f |= bit;
                continue 'outer;
            }
        }
        break;
    }
    if f == 0 {
        return Err(c.expected("TCP flag letters (SFPRU.ECN)"));
    }
    Ok(f)
}

#[cfg(test)]
mod tests;
