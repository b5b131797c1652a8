//! `learn(...)` and `conjunction(...)` in `ovs-ofctl` syntax: parsing (OVS's `learn_parse()`
//! and `parse_CONJUNCTION()`, with the checks of `learn_check()`), and printing as
//! `learn_format()` and `format_CONJUNCTION()` do.

use std::fmt::Write;

use crate::fields::{Subfield, ones};
use crate::learn::{
    Learn, LearnDst, LearnSpec, LearnSrc, NX_LEARN_F_DELETE_LEARNED, NX_LEARN_F_SEND_FLOW_REM,
    NX_LEARN_F_WRITE_RESULT, match_subfield,
};
use crate::pipekey::{PipeKey, PipeMask};
use crate::syntax::SyntaxError;
use crate::syntax::lex::{KeyValues, parse_int, parse_int_prefix};
use crate::syntax::ports::PortNames;
use crate::syntax::value::{hash_x, parse_field_value, put_field_value};

use super::OfAction;
use super::parse::ActionCtx;

fn bad(action: &str, arg: &str, reason: impl Into<String>) -> SyntaxError {
    SyntaxError::BadAction {
        action: action.to_string(),
        arg: arg.to_string(),
        reason: reason.into(),
    }
}

/// C's `atoi()`, as OVS reads `learn`'s numbers: leading digits, anything after ignored.
fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if neg { -v } else { v }
}

/// C's `strtoull(s, NULL, 0)`: the leading number, 0 when there is none.
fn strtoull(s: &str) -> u64 {
    parse_int_prefix(s.trim_start(), 8).map_or(0, |(v, _)| v as u64)
}

/// `conjunction(ID,K/N)`: clause K (1-based) of N.
pub(super) fn parse_conjunction(arg: &str) -> Result<OfAction, SyntaxError> {
    let syntax = || {
        bad(
            "conjunction",
            arg,
            "\"conjunction\" syntax is \"conjunction(id,i/n)\"",
        )
    };
    let (id, rest) = arg.split_once(',').ok_or_else(syntax)?;
    let (k, n) = rest.split_once('/').ok_or_else(syntax)?;
    let id = parse_int(id.trim(), 4).map_err(|_| syntax())? as u32;
    let num = |s: &str| -> Result<u8, SyntaxError> {
        let s = s.trim();
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(syntax());
        }
        s.parse::<u8>().map_err(|_| syntax())
    };
    let (k, n) = (num(k)?, num(n)?);
    let reason = if n < 2 {
        "conjunction must have at least 2 clauses"
    } else if n > 64 {
        "conjunction must have at most 64 clauses"
    } else if k < 1 {
        "clause index must be positive"
    } else if k > n {
        "clause index must be less than or equal to number of clauses"
    } else {
        return Ok(OfAction::Conjunction {
            id,
            clause: k - 1,
            n_clauses: n,
        });
    };
    Err(bad("conjunction", arg, reason))
}

/// OVS's `ofpacts_verify()` rule for conjunctions: a list with one has only conjunctions and
/// notes. `names` are the keywords the actions were written with, for the error.
pub(super) fn verify_conjunctions(
    actions: &[OfAction],
    names: &[String],
) -> Result<(), SyntaxError> {
    if !actions
        .iter()
        .any(|a| matches!(a, OfAction::Conjunction { .. }))
    {
        return Ok(());
    }
    match actions
        .iter()
        .zip(names)
        .find(|(a, _)| !matches!(a, OfAction::Conjunction { .. } | OfAction::Note(_)))
    {
        Some((_, name)) => Err(bad(
            "conjunction",
            "",
            format!(
                "\"conjunction\" actions may be used along with \"note\" but not any other \
                 kind of action (such as the \"{name}\" action used here)"
            ),
        )),
        None => Ok(()),
    }
}

impl ActionCtx<'_> {
    /// `learn(...)` (OVS's `learn_parse()`), checked as `learn_check()` checks it: sources
    /// against the flow's match, match destinations against the learned match so far.
    pub(super) fn parse_learn(&self, arg: &str) -> Result<OfAction, SyntaxError> {
        let mut l = Learn::default();
        let (mut dkey, mut dmask) = (PipeKey::new(), PipeMask::new());
        for (name, value) in KeyValues::new(arg) {
            match name {
                "table" => {
                    let t = crate::syntax::lex::parse_decimal(value, 255)
                        .map_err(|_| bad("learn", value, format!("unknown table \"{value}\"")))?;
                    if t == 255 {
                        return Err(bad(
                            "learn",
                            arg,
                            "table id 255 not valid for `learn' action",
                        ));
                    }
                    l.table = t as u8;
                }
                "priority" => l.priority = atoi(value) as u16,
                "idle_timeout" => l.idle_timeout = atoi(value) as u16,
                "hard_timeout" => l.hard_timeout = atoi(value) as u16,
                "fin_idle_timeout" => l.fin_idle_timeout = atoi(value) as u16,
                "fin_hard_timeout" => l.fin_hard_timeout = atoi(value) as u16,
                "cookie" => l.cookie = strtoull(value),
                "send_flow_rem" => l.flags |= NX_LEARN_F_SEND_FLOW_REM,
                "delete_learned" => l.flags |= NX_LEARN_F_DELETE_LEARNED,
                "limit" => l.limit = atoi(value) as u32,
                "result_dst" => {
                    l.flags |= NX_LEARN_F_WRITE_RESULT;
                    let sf = Subfield::parse(value).map_err(|r| bad("learn", value, r))?;
                    if !sf.field.field().writable {
                        return Err(SyntaxError::ReadOnly(value.to_string()));
                    }
                    if sf.n_bits != 1 {
                        return Err(bad(
                            "learn",
                            value,
                            "result_dst in 'learn' action must be a single bit",
                        ));
                    }
                    l.result_dst = Some(sf);
                }
                _ => {
                    let spec = self.parse_learn_spec(arg, name, value)?;
                    // learn_check(): the destination of a match spec needs its prerequisites
                    // in what the learned match has so far.
                    if let LearnDst::Match(dst) = spec.dst {
                        let f = dst.field.field();
                        if !f.prereq.is_met(&dkey) {
                            return Err(SyntaxError::MissingPrereq {
                                field: f.name.to_string(),
                                prereq: f.prereq,
                            });
                        }
                        if let LearnSrc::Imm(v) = spec.src {
                            match_subfield(&mut dkey, &mut dmask, dst, v);
                        }
                    }
                    if let LearnDst::Load(dst) = spec.dst
                        && !dst.field.field().writable
                    {
                        return Err(SyntaxError::ReadOnly(dst.field.field().name.to_string()));
                    }
                    l.specs.push(spec);
                }
            }
        }
        Ok(OfAction::Learn(Box::new(l)))
    }

    /// A source subfield, checked against the flow's match.
    fn learn_src(&self, s: &str) -> Result<Subfield, SyntaxError> {
        let sf = Subfield::parse(s).map_err(|r| bad("learn", s, r))?;
        let f = sf.field.field();
        if !f.prereq.is_met_ct(&self.flow, self.ct_valid) {
            return Err(SyntaxError::MissingPrereq {
                field: f.name.to_string(),
                prereq: f.prereq,
            });
        }
        Ok(sf)
    }

    /// One spec: `FIELD[...]`, `FIELD[...]=SRC[...]`, `FIELD=VALUE`, `load:...->DST[...]`,
    /// `output:SRC[...]` (OVS's `learn_parse_spec()`).
    fn parse_learn_spec(
        &self,
        orig: &str,
        name: &str,
        value: &str,
    ) -> Result<LearnSpec, SyntaxError> {
        if let Ok(dst) = Subfield::parse(name) {
            no_header(orig, name, dst)?;
            let src = if value.is_empty() {
                LearnSrc::Field(self.learn_src(name)?)
            } else if let Ok(src) = Subfield::parse(value) {
                if src.n_bits != dst.n_bits {
                    return Err(bad(
                        "learn",
                        orig,
                        format!(
                            "bit widths of {name} ({}) and {value} ({}) differ",
                            src.n_bits, dst.n_bits
                        ),
                    ));
                }
                LearnSrc::Field(self.learn_src(value)?)
            } else {
                let f = dst.field.field();
                let v = if dst.ofs == 0 && dst.n_bits == f.n_bits {
                    let (v, m) = parse_field_value(f, value, self.names).map_err(|e| {
                        bad(
                            "learn",
                            orig,
                            format!("{name} value {value} cannot be parsed as a subfield or an immediate value ({e})"),
                        )
                    })?;
                    if m != f.full_mask() {
                        return Err(bad(
                            "learn",
                            orig,
                            format!("{name} value {value} must be exact"),
                        ));
                    }
                    v
                } else {
                    let v = parse_int(value, f.n_bytes).map_err(|_| {
                        bad("learn", orig, format!("{name} value {value} cannot be parsed as a subfield or an immediate value (cannot parse integer value)"))
                    })?;
                    if v & !ones(dst.n_bits) != 0 {
                        return Err(bad(
                            "learn",
                            orig,
                            format!("value {value} does not fit into {} bits", dst.n_bits),
                        ));
                    }
                    v
                };
                LearnSrc::Imm(v)
            };
            return Ok(LearnSpec {
                n_bits: dst.n_bits,
                src,
                dst: LearnDst::Match(dst),
            });
        }
        match name {
            "load" => {
                let (src, dst) = value
                    .split_once("->")
                    .ok_or_else(|| bad("learn", value, "load: missing `->'"))?;
                if src.is_empty() {
                    return Err(bad("learn", value, "load: missing source before `->'"));
                }
                let dst_text = dst;
                let dst = Subfield::parse(dst).map_err(|r| bad("learn", dst, r))?;
                let src = match parse_int(src, 16) {
                    Ok(v) => {
                        no_header(value, dst_text, dst)?;
                        if v & !ones(dst.n_bits) != 0 {
                            return Err(bad(
                                "learn",
                                value,
                                format!("value does not fit into {} bits", dst.n_bits),
                            ));
                        }
                        LearnSrc::Imm(v)
                    }
                    Err(_) => {
                        let s = self.learn_src(src)?;
                        if s.n_bits != dst.n_bits {
                            return Err(bad(
                                "learn",
                                value,
                                format!(
                                    "source field is {} bits wide but destination is {} bits wide",
                                    s.n_bits, dst.n_bits
                                ),
                            ));
                        }
                        LearnSrc::Field(s)
                    }
                };
                Ok(LearnSpec {
                    n_bits: dst.n_bits,
                    src,
                    dst: LearnDst::Load(dst),
                })
            }
            "output" => {
                let src = self.learn_src(value)?;
                Ok(LearnSpec {
                    n_bits: src.n_bits,
                    src: LearnSrc::Field(src),
                    dst: LearnDst::Output,
                })
            }
            _ => Err(bad("learn", orig, format!("unknown keyword {name}"))),
        }
    }
}

/// OVS's refusal of a field with no NXM or OXM header (`dl_vlan`, `dl_vlan_pcp`) as a match
/// destination or an immediate's destination: the wire form could not name it.
fn no_header(orig: &str, name: &str, sf: Subfield) -> Result<(), SyntaxError> {
    if sf.field.field().nxm.is_empty() {
        return Err(bad(
            "learn",
            orig,
            format!("experimenter OXM field '{name}' not supported"),
        ));
    }
    Ok(())
}

/// Prints `learn(...)` as OVS's `learn_format()`.
pub(super) fn format_learn(out: &mut String, l: &Learn, names: &dyn PortNames) {
    let _ = write!(out, "learn(table={}", l.table);
    if l.idle_timeout != 0 {
        let _ = write!(out, ",idle_timeout={}", l.idle_timeout);
    }
    if l.hard_timeout != 0 {
        let _ = write!(out, ",hard_timeout={}", l.hard_timeout);
    }
    if l.fin_idle_timeout != 0 {
        let _ = write!(out, ",fin_idle_timeout={}", l.fin_idle_timeout);
    }
    if l.fin_hard_timeout != 0 {
        let _ = write!(out, ",fin_hard_timeout={}", l.fin_hard_timeout);
    }
    if l.priority != crate::syntax::DEFAULT_PRIORITY {
        let _ = write!(out, ",priority={}", l.priority);
    }
    if l.flags & NX_LEARN_F_SEND_FLOW_REM != 0 {
        out.push_str(",send_flow_rem");
    }
    if l.flags & NX_LEARN_F_DELETE_LEARNED != 0 {
        out.push_str(",delete_learned");
    }
    if l.cookie != 0 {
        let _ = write!(out, ",cookie={:#x}", l.cookie);
    }
    if l.limit != 0 {
        let _ = write!(out, ",limit={}", l.limit);
    }
    if let Some(r) = l
        .result_dst
        .filter(|_| l.flags & NX_LEARN_F_WRITE_RESULT != 0)
    {
        let _ = write!(out, ",result_dst={r}");
    }
    for s in &l.specs {
        out.push(',');
        match (s.src, s.dst) {
            (LearnSrc::Imm(v), LearnDst::Match(dst)) => {
                let f = dst.field.field();
                if dst.ofs == 0 && dst.n_bits == f.n_bits {
                    let _ = write!(out, "{}=", f.name);
                    put_field_value(out, f, v, f.full_mask(), names);
                } else {
                    let _ = write!(out, "{dst}={}", hash_x(v));
                }
            }
            (LearnSrc::Field(src), LearnDst::Match(dst)) => {
                let _ = write!(out, "{dst}");
                if src.field != dst.field || src.ofs != dst.ofs {
                    let _ = write!(out, "={src}");
                }
            }
            (LearnSrc::Imm(v), LearnDst::Load(dst)) => {
                let _ = write!(out, "load:{}->{dst}", hash_x(v));
            }
            (LearnSrc::Field(src), LearnDst::Load(dst)) => {
                let _ = write!(out, "load:{src}->{dst}");
            }
            (LearnSrc::Field(src), LearnDst::Output) => {
                let _ = write!(out, "output:{src}");
            }
            // Not a spec OVS decodes or parses.
            (LearnSrc::Imm(v), LearnDst::Output) => {
                let _ = write!(out, "output:{}", hash_x(v));
            }
        }
    }
    out.push(')');
}
