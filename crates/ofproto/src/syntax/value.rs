//! Field values in flow syntax: parsing (OVS's `mf_parse()`) and printing (`mf_format()` and
//! the helpers of `match_format()`).

use std::fmt::Write;

use crate::fields::{Field, ValueFormat, ones};

use super::lex::{NumError, parse_int_prefix};
use super::ports::{PortNames, format_port, parse_port};

// Flag names by bit, as OVS prints them: the datapath flow format's tables serve OpenFlow too
// (tunnel flags in OVS's `FLOW_TNL_F_*` numbering).
pub(crate) use flow::odp::{CT_STATE_FLAGS as CT_STATE_NAMES, TCP_FLAG_NAMES, TUN_FLAG_NAMES};

/// `ip_frag` keywords: (name, mask, value) in OVS's order (`all_frags[]`).
const FRAGS: [(&str, u8, u8); 7] = [
    ("no", 3, 0),
    ("first", 3, 1),
    ("later", 3, 3),
    ("no", 1, 0),
    ("yes", 1, 1),
    ("not_later", 2, 0),
    ("later", 2, 2),
];

fn num_reason(e: NumError) -> String {
    match e {
        NumError::Range => "out of range".to_string(),
        NumError::Syntax => "not a number".to_string(),
    }
}

/// Parses a value (and optional `/mask`) for `field`. Returns `(value, mask)` in field space,
/// the mask all-ones over the field's width when none is given; `*` is a wildcard. The error
/// is the reason, for [`super::SyntaxError::BadValue`].
pub(crate) fn parse_field_value(
    field: &Field,
    s: &str,
    names: &dyn PortNames,
) -> Result<(u128, u128), String> {
    let full = field.full_mask();
    if s == "*" {
        return Ok((0, 0));
    }
    let (v, m) = match field.format {
        ValueFormat::Decimal | ValueFormat::Hex => {
            let (v, rest) = parse_int_prefix(s, field.n_bytes).map_err(num_reason)?;
            match rest.strip_prefix('/') {
                None if rest.is_empty() => (v, full),
                None => return Err("not a number".to_string()),
                Some(m) => match parse_int_prefix(m, field.n_bytes).map_err(num_reason)? {
                    (m, "") => (v, m),
                    _ => return Err("bad mask".to_string()),
                },
            }
        }
        ValueFormat::Ethernet => {
            let (v, m) = match s.split_once('/') {
                Some((v, m)) => (parse_eth(v), parse_eth(m)),
                None => (parse_eth(s), Some(full)),
            };
            match (v, m) {
                (Some(v), Some(m)) => (v, m),
                _ => return Err("invalid Ethernet address".to_string()),
            }
        }
        ValueFormat::Ipv4 => parse_ipv4_masked(s)?,
        ValueFormat::Ipv6 => parse_ipv6_masked(s)?,
        ValueFormat::OfPort => match parse_port(s, names) {
            Some(p) => (u128::from(p), full),
            None => return Err("unknown port".to_string()),
        },
        ValueFormat::Frag => match FRAGS.iter().find(|(n, _, _)| n.eq_ignore_ascii_case(s)) {
            Some(&(_, m, v)) => (u128::from(v), u128::from(m | 0xfc)),
            None => {
                return Err(
                    "unknown fragment type (valid types are no, yes, first, later, not_later)"
                        .to_string(),
                );
            }
        },
        ValueFormat::TcpFlags => {
            let (v, m) = parse_flags(s, TCP_FLAG_NAMES, 0x0fff, "TCP")?;
            (u128::from(v), u128::from(m) & full)
        }
        ValueFormat::TunFlags => {
            let (v, m) = parse_flags(s, TUN_FLAG_NAMES, 0x1, "tunnel")?;
            (u128::from(v), u128::from(m) & full)
        }
        ValueFormat::CtState => {
            let (v, m) = parse_flags(s, CT_STATE_NAMES, 0xff, "ct_state")?;
            (u128::from(v), u128::from(m) & full)
        }
    };
    if !field.maskable && m != 0 && m & full != full {
        return Err("field is not maskable".to_string());
    }
    Ok((v, m & full))
}

fn parse_eth(s: &str) -> Option<u128> {
    let mut v = 0u128;
    let mut n = 0;
    for part in s.split(':') {
        if part.is_empty() || part.len() > 2 {
            return None;
        }
        v = (v << 8) | u128::from(u8::from_str_radix(part, 16).ok()?);
        n += 1;
    }
    (n == 6).then_some(v)
}

/// A dotted-quad IPv4 address with decimal octets.
pub(crate) fn parse_ipv4(s: &str) -> Option<u32> {
    let mut v = 0u32;
    let mut n = 0;
    for part in s.split('.') {
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let o: u32 = part.parse().ok()?;
        if o > 255 {
            return None;
        }
        v = (v << 8) | o;
        n += 1;
    }
    (n == 4).then_some(v)
}

fn parse_prefix_len(s: &str, max: u32) -> Option<u32> {
    if s.is_empty() || s.len() > 3 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|&n| n <= max)
}

fn parse_ipv4_masked(s: &str) -> Result<(u128, u128), String> {
    let bad = || "invalid IP address".to_string();
    let (ip, mask) = match s.split_once('/') {
        None => (parse_ipv4(s).ok_or_else(bad)?, u32::MAX),
        Some((ip, m)) => {
            let ip = parse_ipv4(ip).ok_or_else(bad)?;
            if let Some(mask) = parse_ipv4(m) {
                (ip, mask)
            } else if m.bytes().all(|b| b.is_ascii_digit()) && !m.is_empty() {
                let n = parse_prefix_len(m, 32)
                    .ok_or_else(|| "IPv4 network prefix bits not between 0 and 32".to_string())?;
                (ip, if n == 0 { 0 } else { u32::MAX << (32 - n) })
            } else {
                return Err(bad());
            }
        }
    };
    Ok((u128::from(ip), u128::from(mask)))
}

/// An IPv6 address as `inet_pton()` takes it.
pub(crate) fn parse_ipv6(s: &str) -> Option<u128> {
    s.parse::<std::net::Ipv6Addr>().ok().map(u128::from)
}

fn parse_ipv6_masked(s: &str) -> Result<(u128, u128), String> {
    let bad = || "invalid IPv6 address".to_string();
    match s.split_once('/') {
        None => Ok((parse_ipv6(s).ok_or_else(bad)?, u128::MAX)),
        Some((ip, m)) => {
            let ip = parse_ipv6(ip).ok_or_else(bad)?;
            if let Some(n) = parse_prefix_len(m, 128) {
                Ok((ip, if n == 0 { 0 } else { u128::MAX << (128 - n) }))
            } else if m.bytes().all(|b| b.is_ascii_digit()) && !m.is_empty() {
                Err("IPv6 network prefix bits not between 0 and 128".to_string())
            } else {
                Ok((
                    ip,
                    parse_ipv6(m).ok_or_else(|| "invalid IPv6 mask".to_string())?,
                ))
            }
        }
    }
}

/// OVS's `parse_flags()`: `V/M` numbers, `+name-name` (masked), or `name|name|N` (exact).
/// Returns (flags, mask), the mask all-ones (32 bits) for the exact forms.
pub(crate) fn parse_flags(
    s: &str,
    names: &[(u32, &str)],
    allowed: u32,
    what: &str,
) -> Result<(u32, u32), String> {
    let unknown = || format!("unknown {what} flag(s)");
    if let Some((v, m)) = s.split_once('/') {
        let parse = |x: &str| super::lex::parse_uint(x, u128::from(u32::MAX)).ok();
        let (Some(v), Some(m)) = (parse(v), parse(m)) else {
            return Err(unknown());
        };
        let (v, m) = (v as u32, m as u32);
        if v & !allowed != 0 || m & !allowed != 0 {
            return Err(unknown());
        }
        return Ok((v, m));
    }
    if s.starts_with('+') || s.starts_with('-') {
        let (mut flags, mut mask) = (0u32, 0u32);
        let mut rest = s;
        while !rest.is_empty() {
            let set = match rest.as_bytes()[0] {
                b'+' => true,
                b'-' => false,
                _ => return Err(format!("{what} flags must be preceded by '+' or '-'")),
            };
            rest = &rest[1..];
            let end = rest.find(['+', '-']).unwrap_or(rest.len());
            let name = &rest[..end];
            let &(bit, _) = names.iter().find(|(_, n)| *n == name).ok_or_else(unknown)?;
            if mask & bit != 0 {
                return Err(format!("each {what} flag can be specified only once"));
            }
            if bit & allowed == 0 {
                return Err(unknown());
            }
            if set {
                flags |= bit;
            }
            mask |= bit;
            rest = &rest[end..];
        }
        return Ok((flags, mask));
    }
    let mut flags = 0u32;
    for part in s.split('|') {
        if part.is_empty() {
            if s.is_empty() {
                break;
            }
            return Err(unknown());
        }
        let bit = if let Ok(n) = super::lex::parse_uint(part, u128::from(u32::MAX)) {
            n as u32
        } else {
            names
                .iter()
                .find(|(_, n)| *n == part)
                .ok_or_else(unknown)?
                .0
        };
        if bit & !allowed != 0 {
            return Err(unknown());
        }
        flags |= bit;
    }
    Ok((flags, u32::MAX))
}

/// `ds_put_hex()`: the value in hexadecimal without leading zeros, `0` for zero.
pub(crate) fn put_hex(out: &mut String, v: u128) {
    if v == 0 {
        out.push('0');
    } else {
        let _ = write!(out, "{v:#x}");
    }
}

/// `%#x`: `0` for zero, `0x..` otherwise.
pub(crate) fn hash_x(v: u128) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
}

/// Appends an Ethernet address held in the low 48 bits of `v`.
pub(crate) fn put_eth(out: &mut String, v: u128) {
    let b = v.to_be_bytes();
    let _ = write!(
        out,
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[10], b[11], b[12], b[13], b[14], b[15]
    );
}

/// `eth_format_masked()`.
pub(crate) fn put_eth_masked(out: &mut String, v: u128, m: u128) {
    put_eth(out, v);
    if m != ones(48) {
        out.push('/');
        put_eth(out, m);
    }
}

pub(crate) fn put_ipv4(out: &mut String, v: u32) {
    let b = v.to_be_bytes();
    let _ = write!(out, "{}.{}.{}.{}", b[0], b[1], b[2], b[3]);
}

/// `ip_format_masked()`: CIDR masks as `/n`, others as a dotted quad.
pub(crate) fn put_ipv4_masked(out: &mut String, v: u32, m: u32) {
    put_ipv4(out, v);
    if m != u32::MAX {
        let x = !m;
        if x & x.wrapping_add(1) == 0 {
            let _ = write!(out, "/{}", 32 - m.trailing_zeros());
        } else {
            out.push('/');
            put_ipv4(out, m);
        }
    }
}

/// An IPv6 address as glibc's `inet_ntop()` writes it (RFC 5952 compression, and an embedded
/// IPv4 address for `::a.b.c.d` and `::ffff:a.b.c.d`).
pub(crate) fn put_ipv6(out: &mut String, v: u128) {
    let words: [u16; 8] = std::array::from_fn(|i| (v >> (112 - 16 * i)) as u16);
    let (mut best_base, mut best_len) = (usize::MAX, 0);
    let mut i = 0;
    while i < 8 {
        if words[i] == 0 {
            let start = i;
            while i < 8 && words[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                (best_base, best_len) = (start, i - start);
            }
        } else {
            i += 1;
        }
    }
    if best_len < 2 {
        best_base = usize::MAX;
    }
    for (i, &w) in words.iter().enumerate() {
        if best_base != usize::MAX && i >= best_base && i < best_base + best_len {
            if i == best_base {
                out.push(':');
            }
            continue;
        }
        if i != 0 {
            out.push(':');
        }
        if i == 6 && best_base == 0 && (best_len == 6 || (best_len == 5 && words[5] == 0xffff)) {
            put_ipv4(out, v as u32);
            return;
        }
        let _ = write!(out, "{w:x}");
    }
    if best_base != usize::MAX && best_base + best_len == 8 {
        out.push(':');
    }
}

/// `ipv6_format_masked()`.
pub(crate) fn put_ipv6_masked(out: &mut String, v: u128, m: u128) {
    put_ipv6(out, v);
    if m != u128::MAX {
        let x = !m;
        if x & x.wrapping_add(1) == 0 {
            let _ = write!(out, "/{}", 128 - m.trailing_zeros());
        } else {
            out.push('/');
            put_ipv6(out, m);
        }
    }
}

/// `format_flags()`: names joined by `|` from the lowest bit, `0` for none.
pub(crate) fn put_flags(out: &mut String, names: &[(u32, &str)], flags: u32) {
    if flags == 0 {
        out.push('0');
        return;
    }
    let mut bad = 0;
    let mut first = true;
    let mut f = flags;
    while f != 0 {
        let bit = f & f.wrapping_neg();
        f &= !bit;
        match names.iter().find(|(b, _)| *b == bit) {
            Some((_, n)) => {
                if !first {
                    out.push('|');
                }
                out.push_str(n);
                first = false;
            }
            None => bad |= bit,
        }
    }
    if bad != 0 {
        if !first {
            out.push('|');
        }
        let _ = write!(out, "{bad:#x}");
    }
}

/// `format_flags_masked()` without the name: all flags when `mask == max`, `0/0` for an empty
/// mask, else `+name-name` from the lowest masked bit.
pub(crate) fn put_flags_masked(
    out: &mut String,
    names: &[(u32, &str)],
    flags: u32,
    mask: u32,
    max: u32,
) {
    if mask == max {
        put_flags(out, names, flags);
        return;
    }
    if mask == 0 {
        out.push_str("0/0");
        return;
    }
    let mut m = mask;
    while m != 0 {
        let bit = m & m.wrapping_neg();
        m &= !bit;
        out.push(if flags & bit != 0 { '+' } else { '-' });
        match names.iter().find(|(b, _)| *b == bit) {
            Some((_, n)) => out.push_str(n),
            None => out.push_str("[Unknown]"),
        }
    }
}

/// OVS's `mf_format()`: a field value (and mask, unless exact) as `set_field` prints it.
pub(crate) fn put_field_value(
    out: &mut String,
    field: &Field,
    v: u128,
    m: u128,
    names: &dyn PortNames,
) {
    let full = field.full_mask();
    if m == 0 {
        out.push_str("ANY");
        return;
    }
    let mask = (m != full).then_some(m);
    match field.format {
        ValueFormat::OfPort if mask.is_none() => format_port(out, v as u32, names),
        ValueFormat::Hex | ValueFormat::Decimal | ValueFormat::OfPort => {
            if field.format == ValueFormat::Hex {
                put_hex(out, v);
            } else {
                let _ = write!(out, "{}", v as u64);
            }
            if let Some(m) = mask {
                out.push('/');
                put_hex(out, m);
            }
        }
        ValueFormat::Ethernet => put_eth_masked(out, v, mask.unwrap_or(ones(48))),
        ValueFormat::Ipv4 => put_ipv4_masked(out, v as u32, mask.unwrap_or(full) as u32),
        ValueFormat::Ipv6 => put_ipv6_masked(out, v, mask.unwrap_or(u128::MAX)),
        ValueFormat::Frag => {
            let (v, m) = (v as u8 & 3, mask.unwrap_or(0xff) as u8 & 3);
            match FRAGS.iter().find(|&&(_, fm, fv)| fm == m && fv == v & m) {
                Some((n, _, _)) => out.push_str(n),
                None => out.push_str("<error>"),
            }
        }
        ValueFormat::TcpFlags => put_flags_masked(
            out,
            TCP_FLAG_NAMES,
            v as u32,
            mask.unwrap_or(0xffff) as u32 & 0xfff,
            0xfff,
        ),
        ValueFormat::TunFlags => put_flags_masked(
            out,
            TUN_FLAG_NAMES,
            v as u32,
            mask.unwrap_or(0xffff) as u32 & 1,
            1,
        ),
        ValueFormat::CtState => put_flags_masked(
            out,
            CT_STATE_NAMES,
            v as u32,
            mask.unwrap_or(u128::from(u32::MAX)) as u32,
            0xffff,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldId;
    use crate::syntax::ports::NoPortNames;

    fn ipv6(s: &str) -> String {
        let mut out = String::new();
        put_ipv6(&mut out, parse_ipv6(s).unwrap());
        out
    }

    #[test]
    fn ipv6_like_glibc() {
        assert_eq!(ipv6("::"), "::");
        assert_eq!(ipv6("::1"), "::1");
        assert_eq!(ipv6("2001:db8::1"), "2001:db8::1");
        assert_eq!(ipv6("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1");
        assert_eq!(ipv6("2001:0:1:2:3:4:5:6"), "2001:0:1:2:3:4:5:6");
        assert_eq!(ipv6("::ffff:1.2.3.4"), "::ffff:1.2.3.4");
        assert_eq!(ipv6("::1.2.3.4"), "::1.2.3.4");
        assert_eq!(ipv6("fe80::"), "fe80::");
        assert_eq!(ipv6("ffff:ffff:ffff:ffff::"), "ffff:ffff:ffff:ffff::");
    }

    #[test]
    fn values_by_format() {
        let f = |id: FieldId, s: &str| parse_field_value(id.field(), s, &NoPortNames);
        assert_eq!(f(FieldId::IP_TTL, "300"), Err("out of range".to_string()));
        assert_eq!(f(FieldId::IP_TTL, "64"), Ok((64, 0xff)));
        assert_eq!(
            f(FieldId::IPV4_DST, "10.1.0.0/16"),
            Ok((0x0a01_0000, 0xffff_0000))
        );
        assert_eq!(
            f(FieldId::IPV4_DST, "10.1.0.0/255.0.255.0"),
            Ok((0x0a01_0000, 0xff00_ff00))
        );
        assert!(f(FieldId::IPV4_DST, "10.1.0.0/33").is_err());
        assert!(f(FieldId::IPV4_DST, "10.1.0").is_err());
        assert_eq!(
            f(FieldId::ETH_DST, "00:11:22:33:44:55"),
            Ok((0x0011_2233_4455, ones(48)))
        );
        assert_eq!(
            f(FieldId::ETH_DST, "01:00:00:00:00:00/01:00:00:00:00:00"),
            Ok((0x0100_0000_0000, 0x0100_0000_0000))
        );
        assert_eq!(
            f(FieldId::IPV6_SRC, "2001:db8::/32").unwrap().1,
            u128::MAX << 96
        );
        assert_eq!(f(FieldId::IN_PORT, "LOCAL"), Ok((0xfffe, 0xffff)));
        assert_eq!(f(FieldId::IP_FRAG, "later"), Ok((3, 0xff)));
        assert_eq!(f(FieldId::TCP_FLAGS, "+syn-ack"), Ok((2, 0x12)));
        assert_eq!(f(FieldId::TCP_FLAGS, "syn|ack"), Ok((0x12, 0xffff)));
        assert_eq!(f(FieldId::TCP_FLAGS, "0x002/0x012"), Ok((2, 0x12)));
        assert!(f(FieldId::TCP_FLAGS, "+syn+syn").is_err());
        assert!(f(FieldId::TCP_FLAGS, "+bogus").is_err());
        assert_eq!(f(FieldId::CT_STATE, "+trk+new"), Ok((0x21, 0x21)));
        assert_eq!(f(FieldId::CT_STATE, "trk|new"), Ok((0x21, 0xffff_ffff)));
        assert_eq!(f(FieldId::TUN_FLAGS, "+oam"), Ok((1, 1)));
        assert!(f(FieldId::TUN_FLAGS, "+df").is_err());
        assert_eq!(f(FieldId::REG0, "0x5/0xf"), Ok((5, 0xf)));
        assert_eq!(f(FieldId::REG0, "*"), Ok((0, 0)));
        assert_eq!(
            f(FieldId::IP_TTL, "5/0xf"),
            Err("field is not maskable".to_string())
        );
    }

    #[test]
    fn printing_helpers() {
        let mut s = String::new();
        put_ipv4_masked(&mut s, 0x0a01_0000, 0xffff_0000);
        s.push(' ');
        put_ipv4_masked(&mut s, 0x0a00_0001, 0xff00_00ff);
        s.push(' ');
        put_flags_masked(&mut s, TCP_FLAG_NAMES, 2, 0x12, 0xfff);
        s.push(' ');
        put_flags(&mut s, CT_STATE_NAMES, 0x21);
        s.push(' ');
        put_hex(&mut s, 0);
        s.push(' ');
        put_hex(&mut s, 0x0102);
        assert_eq!(
            s,
            "10.1.0.0/16 10.0.0.1/255.0.0.255 +syn-ack new|trk 0 0x102"
        );
    }
}
