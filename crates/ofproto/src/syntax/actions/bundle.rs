//! `bundle(fields,basis,algorithm,ofport,members:PORT...)` and
//! `bundle_load(fields,basis,algorithm,ofport,DST,members:PORT...)` (ovs-actions(7), OVS's
//! `NXAST_BUNDLE`, `NXAST_BUNDLE_LOAD`): one live member port chosen by `active_backup` (the
//! first live one) or `hrw` (a hash of the packet's fields), output to or written to `dst`.
//! Parsed and printed here as `ovs-ofctl` does.

use std::fmt::Write;

use crate::fields::Subfield;
use crate::syntax::SyntaxError;
use crate::syntax::ports::{PortNames, format_port, parse_port};

use super::OfAction;
use super::multipath::{HASH_FIELDS, atoi, index_of};

/// The member choice algorithms (`NX_BD_ALG_*`), by number.
pub const BUNDLE_ALGORITHMS: [&str; 2] = ["active_backup", "hrw"];

/// The most members a bundle may have.
pub const BUNDLE_MAX_MEMBERS: usize = 2048;

/// A `bundle` or `bundle_load` action.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bundle {
    /// What `hrw` hashes: an index into [`HASH_FIELDS`].
    pub fields: u16,
    pub basis: u16,
    /// An index into [`BUNDLE_ALGORITHMS`].
    pub algorithm: u16,
    /// Where `bundle_load` writes the chosen port; `None` for `bundle`, which outputs to it.
    pub dst: Option<Subfield>,
    pub members: Vec<u32>,
}

/// C's `strtok_r()`: the next token of `s` from `*pos` after skipping `delims`.
fn strtok<'a>(s: &'a str, pos: &mut usize, delims: &[char]) -> Option<&'a str> {
    let rest = &s[*pos..];
    let start = rest.find(|c| !delims.contains(&c))?;
    let tok = &rest[start..];
    let len = tok.find(|c| delims.contains(&c)).unwrap_or(tok.len());
    *pos += start + len + usize::from(start + len < rest.len());
    Some(&tok[..len])
}

/// OVS's `bundle_parse()` (`load` false) and `bundle_parse_load()`.
pub(super) fn parse_bundle(
    arg: &str,
    load: bool,
    names: &dyn PortNames,
) -> Result<OfAction, SyntaxError> {
    let bad = |reason: String| SyntaxError::BadAction {
        action: if load { "bundle_load" } else { "bundle" }.to_string(),
        arg: arg.to_string(),
        reason,
    };
    let mut pos = 0;
    let mut next = |d: &[char]| strtok(arg, &mut pos, d);
    let fields = next(&[',', ' ']);
    let basis = next(&[',', ' ']);
    let algorithm = next(&[',', ' ']);
    let member_type = next(&[',', ' ']);
    let dst = if load { next(&[',', ' ']) } else { None };
    let delim = next(&[':', ' ']);
    let (Some(fields), Some(basis), Some(algorithm), Some(member_type), Some(delim)) =
        (fields, basis, algorithm, member_type, delim)
    else {
        return Err(bad(format!("{arg}: not enough arguments to bundle action")));
    };
    if !delim.eq_ignore_ascii_case("members") && !delim.eq_ignore_ascii_case("slaves") {
        return Err(bad(format!(
            "{arg}: missing member delimiter, expected `members', got `{delim}'"
        )));
    }
    let mut members = Vec::new();
    while members.len() < BUNDLE_MAX_MEMBERS {
        let Some(m) = next(&[',', ' ', '[', ']']) else {
            break;
        };
        members.push(parse_port(m, names).ok_or_else(|| bad(format!("{m}: bad port number")))?);
    }
    let fields = index_of(&HASH_FIELDS, fields)
        .ok_or_else(|| bad(format!("{arg}: unknown fields `{fields}'")))?;
    let algorithm = index_of(&BUNDLE_ALGORITHMS, algorithm)
        .ok_or_else(|| bad(format!("{arg}: unknown algorithm `{algorithm}'")))?;
    if !member_type.eq_ignore_ascii_case("ofport") {
        return Err(bad(format!("{arg}: unknown member_type `{member_type}'")));
    }
    let dst = match dst {
        Some(d) => {
            let sf = Subfield::parse(d).map_err(|r| bad(format!("{d}: {r}")))?;
            if sf.field.field().nxm.is_empty() {
                return Err(bad(format!(
                    "{arg}: experimenter OXM field '{d}' not supported"
                )));
            }
            Some(sf)
        }
        None => None,
    };
    Ok(OfAction::Bundle(Box::new(Bundle {
        fields,
        basis: atoi(basis) as u16,
        algorithm,
        dst,
        members,
    })))
}

/// OVS's `bundle_format()`.
pub(super) fn format_bundle(out: &mut String, b: &Bundle, names: &dyn PortNames) {
    let name = |t: &[&'static str], i: u16| t.get(usize::from(i)).copied().unwrap_or("<unknown>");
    let _ = write!(
        out,
        "{}({},{},{},ofport,",
        if b.dst.is_some() {
            "bundle_load"
        } else {
            "bundle"
        },
        name(&HASH_FIELDS, b.fields),
        b.basis,
        name(&BUNDLE_ALGORITHMS, b.algorithm)
    );
    if let Some(d) = &b.dst {
        let _ = write!(out, "{d},");
    }
    out.push_str("members:");
    for (i, m) in b.members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        format_port(out, *m, names);
    }
    out.push(')');
}
