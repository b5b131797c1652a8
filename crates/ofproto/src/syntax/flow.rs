//! Whole flows: `[table=N,][priority=N,][cookie=V,]... MATCH actions=ACTIONS`, as
//! `ovs-ofctl add-flow(s)`/`mod-flows`/`del-flows` take them (OVS's `parse_ofp_str()`), and
//! the line `ovs-ofctl dump-flows` prints for one (`ofputil_flow_stats_format()`).

use std::fmt::{self, Write};

use crate::pipekey::PipeMatch;

use super::SyntaxError;
use super::actions::{ActionCtx, OfAction, format_actions};
use super::lex::{KeyValues, NumError, parse_decimal, parse_uint};
use super::matching::{DEFAULT_PRIORITY, MatchBuilder, format_match, match_field};
use super::ports::{NoPortNames, PortNames, parse_port};

/// Which command the flow text is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    /// `add-flow(s)`: actions required; `cookie=V` sets the cookie; `importance` allowed.
    Add,
    /// `mod-flows`/`del-flows` (strict or not): actions optional; `cookie=V/M` matches cookies,
    /// plain `cookie=V` sets the cookie of modified flows; `out_port`/`out_group` filter.
    ModOrDel,
}

/// `flow_mod` flags (`send_flow_rem`, `check_overlap`, ...).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowModFlags(pub u16);

impl FlowModFlags {
    pub const SEND_FLOW_REM: u16 = 1 << 0;
    pub const NO_PKT_COUNTS: u16 = 1 << 1;
    pub const NO_BYT_COUNTS: u16 = 1 << 2;
    pub const CHECK_OVERLAP: u16 = 1 << 3;
    pub const RESET_COUNTS: u16 = 1 << 4;

    /// (bit, keyword) in the order OVS prints them.
    const NAMES: [(u16, &'static str); 5] = [
        (Self::SEND_FLOW_REM, "send_flow_rem"),
        (Self::CHECK_OVERLAP, "check_overlap"),
        (Self::RESET_COUNTS, "reset_counts"),
        (Self::NO_PKT_COUNTS, "no_packet_counts"),
        (Self::NO_BYT_COUNTS, "no_byte_counts"),
    ];
}

/// One parsed flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// `table=`; 0 by default for [`FlowKind::Add`], 255 ("all tables") for
    /// [`FlowKind::ModOrDel`].
    pub table: u8,
    pub priority: u16,
    pub cookie: u64,
    /// Non-zero only for [`FlowKind::ModOrDel`] with `cookie=V/MASK`.
    pub cookie_mask: u64,
    /// A modify's new cookie (OVS's `new_cookie`; `None` is its all-ones "none"): the cookie of
    /// the flow it adds when it selects none and matches no cookie, and with
    /// [`Self::modify_cookie`] the cookie it gives the rules it selects.
    pub new_cookie: Option<u64>,
    /// Whether a modify changes the cookie of the rules it selects to [`Self::new_cookie`]
    /// (OVS's `modify_cookie`: `cookie=V` without a mask, or an OpenFlow 1.0 or NXM modify).
    pub modify_cookie: bool,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub importance: u16,
    pub flags: FlowModFlags,
    pub out_port: Option<u32>,
    pub out_group: Option<u32>,
    pub match_: PipeMatch,
    pub actions: Vec<OfAction>,
    /// Whether the text had `actions=` (always for [`FlowKind::Add`]; `mod-flows` needs it,
    /// `del-flows` ignores it).
    pub has_actions: bool,
}

/// Flow statistics for the `dump-flows` prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub n_packets: u64,
    pub n_bytes: u64,
    /// Seconds since the flow last matched a packet.
    pub idle_age: Option<u32>,
    /// Seconds since the flow was last modified (printed when it differs from the duration).
    pub hard_age: Option<u32>,
}

/// A problem on one line of a flow file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {error}")]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    pub error: SyntaxError,
}

fn bad_value(field: &str, value: &str, e: NumError) -> SyntaxError {
    SyntaxError::BadValue {
        field: field.to_string(),
        value: value.to_string(),
        reason: match e {
            NumError::Range => "out of range",
            NumError::Syntax => "not a number",
        }
        .to_string(),
    }
}

fn not_allowed(keyword: &str, reason: &str) -> SyntaxError {
    SyntaxError::NotAllowed {
        keyword: keyword.to_string(),
        reason: reason.to_string(),
    }
}

/// A 64-bit cookie or mask; `-1` is all ones, as `ovs-ofctl`'s `strtoull()` reads it.
fn parse_u64(field: &str, s: &str) -> Result<u64, SyntaxError> {
    if s == "-1" {
        return Ok(u64::MAX);
    }
    parse_uint(s, u64::MAX.into())
        .map(|v| v as u64)
        .map_err(|e| bad_value(field, s, e))
}

fn parse_u16(field: &str, s: &str) -> Result<u16, SyntaxError> {
    parse_uint(s, 0xffff)
        .map(|v| v as u16)
        .map_err(|e| bad_value(field, s, e))
}

/// Parses one flow as `ovs-ofctl` does for the given command. `names` resolves port names
/// (`in_port=p0`, `output:p1`); pass `&NoPortNames` for numbers only.
pub fn parse_flow(
    text: &str,
    kind: FlowKind,
    names: &dyn PortNames,
) -> Result<FlowSpec, SyntaxError> {
    // Like OVS, everything after the first "action" keyword and its '=' is the action list.
    let (match_part, act_str) = match text.find("action") {
        Some(i) => match text[i..].find('=') {
            Some(eq) => (&text[..i], Some(&text[i + eq + 1..])),
            None => return Err(SyntaxError::MissingActions),
        },
        None => (text, None),
    };
    if kind == FlowKind::Add && act_str.is_none() {
        return Err(SyntaxError::MissingActions);
    }
    let mut spec = FlowSpec {
        table: if kind == FlowKind::Add { 0 } else { 255 },
        priority: DEFAULT_PRIORITY,
        cookie: 0,
        cookie_mask: 0,
        new_cookie: None,
        modify_cookie: false,
        idle_timeout: 0,
        hard_timeout: 0,
        importance: 0,
        flags: FlowModFlags::default(),
        out_port: None,
        out_group: None,
        match_: PipeMatch::catchall(),
        actions: Vec::new(),
        has_actions: act_str.is_some(),
    };
    let mut table_given = false;
    let mut mb = MatchBuilder::default();
    for (name, value) in KeyValues::new(match_part) {
        if mb.protocol(name) {
            continue;
        }
        if let Some(&(bit, _)) = FlowModFlags::NAMES.iter().find(|(_, n)| *n == name) {
            spec.flags.0 |= bit;
            continue;
        }
        match name {
            // `eth` selects Ethernet packets, the only kind matched here; the others are
            // OVS flow-mod options without effect on parsing.
            "eth" | "no_readonly_table" | "allow_hidden_fields" => continue,
            // Statistics in `dump-flows` output, ignored so that dumps parse back.
            "duration" | "n_packets" | "n_bytes" | "idle_age" | "hard_age" => continue,
            _ => {}
        }
        if let Some(id) = match_field(name) {
            mb.field(id, name, value, names)?;
            continue;
        }
        if name.contains('[') {
            mb.subfield(name, value)?;
            continue;
        }
        let known = [
            "table",
            "priority",
            "cookie",
            "idle_timeout",
            "hard_timeout",
            "importance",
            "out_port",
            "out_group",
        ];
        if !known.contains(&name) {
            return Err(SyntaxError::UnknownField(name.to_string()));
        }
        if value.is_empty() {
            return Err(SyntaxError::BadValue {
                field: name.to_string(),
                value: String::new(),
                reason: "missing value".to_string(),
            });
        }
        match name {
            "table" => {
                spec.table = parse_decimal(value, 255)
                    .map(|t| t as u8)
                    .map_err(|e| bad_value(name, value, e))?;
                table_given = true;
            }
            "priority" => spec.priority = parse_u16(name, value)?,
            "idle_timeout" => spec.idle_timeout = parse_u16(name, value)?,
            "hard_timeout" => spec.hard_timeout = parse_u16(name, value)?,
            "importance" => {
                if kind != FlowKind::Add {
                    return Err(not_allowed(name, "only when adding flows"));
                }
                spec.importance = parse_u16(name, value)?;
            }
            "cookie" => match value.split_once('/') {
                Some((v, m)) => {
                    if kind == FlowKind::Add {
                        return Err(not_allowed(name, "flow additions cannot use a cookie mask"));
                    }
                    spec.cookie = parse_u64(name, v)?;
                    spec.cookie_mask = parse_u64(name, m)?;
                }
                None => {
                    spec.cookie = parse_u64(name, value)?;
                    // Without a mask a modify sets the cookie (a delete refuses it, see
                    // `Ofproto::del_flows`).
                    if kind != FlowKind::Add {
                        spec.new_cookie = Some(spec.cookie);
                        spec.modify_cookie = true;
                    }
                }
            },
            "out_port" => {
                if kind == FlowKind::Add {
                    return Err(not_allowed(name, "only when modifying or deleting flows"));
                }
                spec.out_port =
                    Some(
                        parse_port(value, names).ok_or_else(|| SyntaxError::BadValue {
                            field: name.to_string(),
                            value: value.to_string(),
                            reason: "unknown port".to_string(),
                        })?,
                    );
            }
            _ => {
                if kind == FlowKind::Add {
                    return Err(not_allowed(name, "only when modifying or deleting flows"));
                }
                let g = match value.to_ascii_lowercase().as_str() {
                    "all" => 0xffff_fffc,
                    "any" => 0xffff_ffff,
                    _ => parse_uint(value, u32::MAX.into())
                        .map(|v| v as u32)
                        .map_err(|e| bad_value(name, value, e))?,
                };
                spec.out_group = Some(g);
            }
        }
    }
    if kind == FlowKind::Add && spec.table == 255 {
        // OVS adds a flow for "any table" to table 0.
        spec.table = 0;
    }
    spec.match_ = mb.finish()?;
    if let Some(acts) = act_str {
        let mut ctx = ActionCtx {
            names,
            table: if table_given { spec.table } else { 255 },
            flow: spec.match_.key().clone(),
            ct_valid: crate::fields::ct_valid_match(spec.match_.key(), spec.match_.mask()),
        };
        spec.actions = ctx.parse_list(acts)?;
    }
    Ok(spec)
}

/// Parses an `add-flows` file: one flow per line, `#` starting a comment anywhere on a line,
/// blank lines skipped. Returns every flow, or every problem with its 1-based line number.
pub fn parse_flows_file(
    text: &str,
    names: &dyn PortNames,
) -> Result<Vec<FlowSpec>, Vec<LineError>> {
    let mut flows = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        if line.trim_matches([' ', '\t', '\n', '\r']).is_empty() {
            continue;
        }
        match parse_flow(line, FlowKind::Add, names) {
            Ok(f) => flows.push(f),
            Err(error) => errors.push(LineError { line: i + 1, error }),
        }
    }
    if errors.is_empty() {
        Ok(flows)
    } else {
        Err(errors)
    }
}

impl FlowSpec {
    /// The flow as a switch holds it when `ovs-ofctl` sends it in OpenFlow 1.0, its default
    /// (field writes in the forms OpenFlow 1.0 carries them: [`super::as_openflow10`]).
    pub fn as_openflow10(mut self) -> FlowSpec {
        self.actions = super::as_openflow10(&self.actions);
        self
    }

    /// The cookie a modify gives the rules it selects, when it changes theirs.
    pub fn modified_cookie(&self) -> Option<u64> {
        self.new_cookie.filter(|_| self.modify_cookie)
    }

    /// The flow a modify that selects no rule adds instead, as OVS 3.1 does when the modify
    /// has a new cookie and matches no cookie (its `modify_may_add_flow`), in table 0 when it
    /// names all tables; `None` when it adds nothing.
    pub fn added_by_modify(&self) -> Option<FlowSpec> {
        let cookie = self.new_cookie.filter(|_| self.cookie_mask == 0)?;
        Some(FlowSpec {
            table: if self.table == 255 { 0 } else { self.table },
            cookie,
            new_cookie: None,
            modify_cookie: false,
            out_port: None,
            out_group: None,
            ..self.clone()
        })
    }

    /// A flow with nothing set (table 0, priority 0, the catch-all match, no actions), to be
    /// filled in from a message or reused while walking a table.
    pub fn empty() -> FlowSpec {
        FlowSpec {
            table: 0,
            priority: 0,
            cookie: 0,
            cookie_mask: 0,
            new_cookie: None,
            modify_cookie: false,
            idle_timeout: 0,
            hard_timeout: 0,
            importance: 0,
            flags: FlowModFlags(0),
            out_port: None,
            out_group: None,
            match_: PipeMatch::catchall(),
            actions: Vec::new(),
            has_actions: false,
        }
    }

    /// The match and actions as `dump-flows` prints them: `priority=10,ip,nw_dst=10.1.0.0/16
    /// actions=mod_dl_dst:52:54:00:00:00:01,output:2`.
    pub fn format_match_actions(&self, names: &dyn PortNames) -> String {
        let mut out = String::new();
        format_match(&mut out, &self.match_, self.priority, names);
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str("actions=");
        format_actions(&mut out, &self.actions, names);
        out
    }

    /// The part of a `dump-flows` line before the match, in OVS's order: `cookie=0x1,
    /// duration=1.5s, table=3, n_packets=0, n_bytes=0, idle_timeout=10, hard_timeout=20,
    /// send_flow_rem importance=5, idle_age=1, ` (each item ends with ", ", as OVS prints it).
    /// Without `stats` this is the `--no-stats` form: the cookie and table only when non-zero.
    pub fn format_prefix(&self, stats: Option<&FlowStats>) -> String {
        let mut out = String::new();
        if stats.is_some() || self.cookie != 0 {
            let _ = write!(out, "cookie={:#x}, ", self.cookie);
        }
        if let Some(s) = stats {
            out.push_str("duration=");
            format_duration(&mut out, s.duration_sec, s.duration_nsec);
            out.push_str(", ");
        }
        if stats.is_some() || self.table != 0 {
            let _ = write!(out, "table={}, ", self.table);
        }
        if let Some(s) = stats {
            let _ = write!(out, "n_packets={}, n_bytes={}, ", s.n_packets, s.n_bytes);
        }
        if self.idle_timeout != 0 {
            let _ = write!(out, "idle_timeout={}, ", self.idle_timeout);
        }
        if self.hard_timeout != 0 {
            let _ = write!(out, "hard_timeout={}, ", self.hard_timeout);
        }
        for (bit, name) in FlowModFlags::NAMES {
            if self.flags.0 & bit != 0 {
                out.push_str(name);
                out.push(' ');
            }
        }
        if self.importance != 0 {
            let _ = write!(out, "importance={}, ", self.importance);
        }
        if let Some(s) = stats {
            if let Some(a) = s.idle_age {
                let _ = write!(out, "idle_age={a}, ");
            }
            if let Some(a) = s.hard_age.filter(|&a| a != s.duration_sec) {
                let _ = write!(out, "hard_age={a}, ");
            }
        }
        out
    }

    /// A whole `dump-flows` line (with `stats`) or `dump-flows --no-stats` line (without).
    pub fn format_dump(&self, stats: Option<&FlowStats>, names: &dyn PortNames) -> String {
        let mut out = self.format_prefix(stats);
        out.push_str(&self.format_match_actions(names));
        out
    }
}

impl fmt::Display for FlowSpec {
    /// The `dump-flows --no-stats` line, ports as numbers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.format_dump(None, &NoPortNames))
    }
}

impl fmt::Display for PipeMatch {
    /// The match as `dump-flows` prints it (without a priority).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        format_match(&mut out, self, DEFAULT_PRIORITY, &NoPortNames);
        f.write_str(&out)
    }
}

impl fmt::Display for OfAction {
    /// One action as `dump-flows` prints it (some print as several, e.g. a 128-bit `load`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        format_actions(&mut out, std::slice::from_ref(self), &NoPortNames);
        f.write_str(&out)
    }
}

/// A duration as OVS prints one (`ofp_print_duration()`): seconds, then milliseconds when the
/// fraction is a whole number of them, else as many decimals as it needs, and `s`.
pub(crate) fn format_duration(out: &mut String, sec: u32, nsec: u32) {
    let _ = write!(out, "{sec}");
    if nsec > 0 {
        let ms = nsec / 1_000_000;
        if ms * 1_000_000 == nsec {
            let _ = write!(out, ".{ms:03}");
        } else {
            let frac = format!("{nsec:09}");
            let _ = write!(out, ".{}", frac.trim_end_matches('0'));
        }
    }
    out.push('s');
}
