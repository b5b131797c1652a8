//! `multipath(fields,basis,algorithm,n_links,arg,dst)` (ovs-actions(7), OVS's
//! `NXAST_MULTIPATH`): hashes some of the packet's fields and picks one of `n_links` links
//! by an algorithm, written to `dst`. Parsed and printed here as `ovs-ofctl` does.

use std::fmt::Write;

use crate::fields::Subfield;
use crate::syntax::SyntaxError;

use super::OfAction;

/// The fields a multipath or bundle action hashes (`NX_HASH_FIELDS_*`), by number.
pub const HASH_FIELDS: [&str; 7] = [
    "eth_src",
    "symmetric_l4",
    "symmetric_l3l4",
    "symmetric_l3l4+udp",
    "nw_src",
    "nw_dst",
    "symmetric_l3",
];

/// The link choice algorithms (`NX_MP_ALG_*`), by number.
pub const MP_ALGORITHMS: [&str; 4] = ["modulo_n", "hash_threshold", "hrw", "iter_hash"];

/// A `multipath` action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Multipath {
    /// What to hash: an index into [`HASH_FIELDS`].
    pub fields: u16,
    pub basis: u16,
    /// How to pick a link: an index into [`MP_ALGORITHMS`].
    pub algorithm: u16,
    /// The number of links minus one.
    pub max_link: u16,
    /// The algorithm's argument (`iter_hash`'s modulo).
    pub arg: u32,
    pub dst: Subfield,
}

/// The index of `name` in `table`, as OVS compares these names (ignoring case).
pub(super) fn index_of(table: &[&str], name: &str) -> Option<u16> {
    table
        .iter()
        .position(|t| t.eq_ignore_ascii_case(name))
        .map(|i| i as u16)
}

/// C's `atoi()`: the leading decimal digits (after an optional sign), 0 without any.
pub(super) fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i64, |n, d| {
            n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
        });
    if neg { -n } else { n }
}

/// OVS's `multipath_parse()`.
pub(super) fn parse_multipath(arg: &str) -> Result<OfAction, SyntaxError> {
    let bad = |reason: String| SyntaxError::BadAction {
        action: "multipath".to_string(),
        arg: arg.to_string(),
        reason,
    };
    let words: Vec<&str> = arg.split([',', ' ']).filter(|w| !w.is_empty()).collect();
    let [fields, basis, algorithm, n_links, mp_arg, dst, ..] = words[..] else {
        return Err(bad(format!(
            "{arg}: not enough arguments to multipath action"
        )));
    };
    let fields = index_of(&HASH_FIELDS, fields)
        .ok_or_else(|| bad(format!("{arg}: unknown fields `{fields}'")))?;
    let algorithm = index_of(&MP_ALGORITHMS, algorithm)
        .ok_or_else(|| bad(format!("{arg}: unknown algorithm `{algorithm}'")))?;
    let n = atoi(n_links);
    if !(1..=65536).contains(&n) {
        return Err(bad(format!(
            "{arg}: n_links {n} is not in valid range 1 to 65536"
        )));
    }
    let dst = Subfield::parse(dst).map_err(|r| bad(format!("{dst}: {r}")))?;
    if dst.field.field().nxm.is_empty() {
        return Err(bad(format!(
            "{arg}: experimenter OXM field '{}' not supported",
            dst.field.field().name
        )));
    }
    if dst.n_bits < 16 && n > 1i64 << dst.n_bits {
        return Err(bad(format!(
            "{arg}: {}-bit destination field has {} possible values, less than specified \
             n_links {n}",
            dst.n_bits,
            1u32 << dst.n_bits
        )));
    }
    Ok(OfAction::Multipath(Box::new(Multipath {
        fields,
        basis: atoi(basis) as u16,
        algorithm,
        max_link: (n - 1) as u16,
        arg: atoi(mp_arg) as u32,
        dst,
    })))
}

/// OVS's `multipath_format()`.
pub(super) fn format_multipath(out: &mut String, m: &Multipath) {
    let name = |t: &[&'static str], i: u16| t.get(usize::from(i)).copied().unwrap_or("<unknown>");
    let _ = write!(
        out,
        "multipath({},{},{},{},{},{})",
        name(&HASH_FIELDS, m.fields),
        m.basis,
        name(&MP_ALGORITHMS, m.algorithm),
        u32::from(m.max_link) + 1,
        m.arg,
        m.dst
    );
}
