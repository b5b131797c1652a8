//! Tokens and numbers as OVS reads them.
//!
//! [`KeyValues`] splits `key=value`, `key:value`, `key(value)` and bare `key` items separated by
//! commas or white space, exactly as OVS's `ofputil_parse_key_value()`: a value after `=` or `:`
//! runs to the next comma or white space, but parentheses nest, so `ct(commit,nat(src))` and
//! `output(port=1,max_len=100)` are one item; `key(x)->y` is one item too (`load`, `move`).
//!
//! The number parsers follow C's `strtoull(s, 0)` as OVS uses it: `0x` hexadecimal, a leading `0`
//! octal, decimal otherwise. Negative numbers are rejected (OVS would wrap some of them).

/// Iterator over the `(key, value)` items of a flow or action string.
pub(crate) struct KeyValues<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> KeyValues<'a> {
    pub(crate) fn new(s: &'a str) -> Self {
        KeyValues { s, pos: 0 }
    }
}

const ITEM_DELIMS: &[u8] = b", \t\r\n";

/// Length of a value that ends at one of `delims` (or the end), skipping over balanced
/// parentheses (OVS's `parse_value()`).
fn value_len(b: &[u8], delims: &[u8]) -> usize {
    let mut n = 0;
    while n < b.len() && !delims.contains(&b[n]) {
        if b[n] == b'(' {
            let mut level = 0i32;
            loop {
                if n >= b.len() {
                    return n;
                }
                match b[n] {
                    b'(' => level += 1,
                    b')' => level -= 1,
                    _ => {}
                }
                n += 1;
                if level <= 0 {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

impl<'a> Iterator for KeyValues<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        let b = self.s.as_bytes();
        while self.pos < b.len() && ITEM_DELIMS.contains(&b[self.pos]) {
            self.pos += 1;
        }
        if self.pos >= b.len() {
            return None;
        }
        let key_start = self.pos;
        while self.pos < b.len() && !b":=(, \t\r\n".contains(&b[self.pos]) {
            self.pos += 1;
        }
        let key = &self.s[key_start..self.pos];
        let delim = b.get(self.pos).copied();
        if delim.is_some() {
            self.pos += 1;
        }
        let value_delims: &[u8] = match delim {
            Some(b':' | b'=') => ITEM_DELIMS,
            Some(b'(') => b")",
            _ => return Some((key, "")),
        };
        let start = self.pos;
        let mut end = start + value_len(&b[start..], value_delims);
        // "key(x)->y": the value is "x)->y", running to the next item delimiter.
        if delim == Some(b'(') && b.get(end) == Some(&b')') && b[end + 1..].starts_with(b"->") {
            end += value_len(&b[end..], ITEM_DELIMS);
        }
        self.pos = if end < b.len() { end + 1 } else { end };
        Some((key, &self.s[start..end]))
    }
}

/// Why a number did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NumError {
    /// Not a number (or trailing garbage).
    Syntax,
    /// Does not fit.
    Range,
}

/// Parses the longest C-style unsigned integer prefix of `s` (`0x` hex, leading-`0` octal,
/// decimal). Returns the value, whether it overflowed 128 bits, and the bytes consumed; `None` if
/// no digit was found.
fn c_uint_prefix(s: &str) -> Option<(u128, bool, usize)> {
    let b = s.as_bytes();
    let mut i = 0;
    if b.first() == Some(&b'+') {
        i = 1;
    }
    let (radix, digits_start) = if b.len() > i + 2
        && b[i] == b'0'
        && (b[i + 1] | 0x20) == b'x'
        && b[i + 2].is_ascii_hexdigit()
    {
        (16, i + 2)
    } else if b.get(i) == Some(&b'0') {
        (8, i)
    } else {
        (10, i)
    };
    let mut v: u128 = 0;
    let mut overflow = false;
    let mut j = digits_start;
    while let Some(d) = b.get(j).and_then(|&c| (c as char).to_digit(radix)) {
        match v
            .checked_mul(u128::from(radix))
            .and_then(|x| x.checked_add(u128::from(d)))
        {
            Some(x) => v = x,
            None => overflow = true,
        }
        j += 1;
    }
    if j == digits_start {
        return None;
    }
    Some((v, overflow, j))
}

/// A whole-string unsigned integer no larger than `max` (OVS's `str_to_u8`/`str_to_u16`/
/// `str_to_u32`/`str_to_u64`).
pub(crate) fn parse_uint(s: &str, max: u128) -> Result<u128, NumError> {
    match c_uint_prefix(s) {
        Some((v, overflow, n)) if n == s.len() => {
            if overflow || v > max {
                Err(NumError::Range)
            } else {
                Ok(v)
            }
        }
        _ => Err(NumError::Syntax),
    }
}

/// A whole-string decimal number (OVS's `str_to_uint(s, 10)`), for port and table numbers.
pub(crate) fn parse_decimal(s: &str, max: u128) -> Result<u128, NumError> {
    let digits = s.strip_prefix('+').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(NumError::Syntax);
    }
    match digits.parse::<u128>() {
        Ok(v) if v <= max => Ok(v),
        _ => Err(NumError::Range),
    }
}

/// OVS's `parse_int_string()`: an integer for a field `n_bytes` wide. Hexadecimal may have any
/// number of digits as long as the value fits; decimal and octal are limited to 64 bits. Returns
/// the value and the unparsed rest of `s`.
pub(crate) fn parse_int_prefix(s: &str, n_bytes: usize) -> Result<(u128, &str), NumError> {
    let limit = if n_bytes >= 16 {
        u128::MAX
    } else {
        (1u128 << (8 * n_bytes)) - 1
    };
    let b = s.as_bytes();
    if b.len() >= 2 && b[0] == b'0' && (b[1] | 0x20) == b'x' {
        let digits = b[2..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
        let hex = &s[2..2 + digits];
        let significant = hex.trim_start_matches('0');
        if significant.len() > 32 {
            return Err(NumError::Range);
        }
        let v = if significant.is_empty() {
            0
        } else {
            u128::from_str_radix(significant, 16).map_err(|_| NumError::Syntax)?
        };
        if v > limit {
            return Err(NumError::Range);
        }
        return Ok((v, &s[2 + digits..]));
    }
    match c_uint_prefix(s) {
        Some((v, overflow, n)) => {
            if overflow || v > u128::from(u64::MAX) || v > limit {
                Err(NumError::Range)
            } else {
                Ok((v, &s[n..]))
            }
        }
        None => Err(NumError::Syntax),
    }
}

/// [`parse_int_prefix`] for the whole string.
pub(crate) fn parse_int(s: &str, n_bytes: usize) -> Result<u128, NumError> {
    match parse_int_prefix(s, n_bytes)? {
        (v, "") => Ok(v),
        _ => Err(NumError::Syntax),
    }
}

/// Decodes hex digits with optional `.` separators between bytes (`01.02.03`, `010203`), as
/// `note:` and `userdata=` take them (OVS's `ofpbuf_put_hex()`).
pub(crate) fn parse_hex_bytes(s: &str) -> Option<Vec<u8>> {
    flow::hex::from_hex(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(s: &str) -> Vec<(&str, &str)> {
        KeyValues::new(s).collect()
    }

    #[test]
    fn key_values_like_ovs() {
        assert_eq!(
            items("priority=10,ip nw_dst=10.0.0.0/8, tcp"),
            [
                ("priority", "10"),
                ("ip", ""),
                ("nw_dst", "10.0.0.0/8"),
                ("tcp", "")
            ]
        );
        assert_eq!(
            items("output:1,ct(commit,nat(src=1.2.3.4)),resubmit(,3),drop"),
            [
                ("output", "1"),
                ("ct", "commit,nat(src=1.2.3.4)"),
                ("resubmit", ",3"),
                ("drop", "")
            ]
        );
        assert_eq!(
            items("load(0x1)->NXM_NX_REG0[],output:2"),
            [("load", "0x1)->NXM_NX_REG0[]"), ("output", "2")]
        );
        assert_eq!(items("move:reg0[]->reg1[]"), [("move", "reg0[]->reg1[]")]);
        assert_eq!(items("ct(commit"), [("ct", "commit")]);
        assert_eq!(items("a(("), [("a", "(")]);
        assert_eq!(items(" , "), []);
        assert_eq!(items("x="), [("x", "")]);
    }

    #[test]
    fn numbers_like_strtoull() {
        assert_eq!(parse_uint("10", 255), Ok(10));
        assert_eq!(parse_uint("0x10", 255), Ok(16));
        assert_eq!(parse_uint("010", 255), Ok(8));
        assert_eq!(parse_uint("0", 255), Ok(0));
        assert_eq!(parse_uint("300", 255), Err(NumError::Range));
        assert_eq!(parse_uint("-1", 255), Err(NumError::Syntax));
        assert_eq!(parse_uint("08", 255), Err(NumError::Syntax));
        assert_eq!(parse_uint("", 255), Err(NumError::Syntax));
        assert_eq!(parse_uint("1x", 255), Err(NumError::Syntax));
        assert_eq!(
            parse_int("0x0000000000000000000000000000000000ff", 1),
            Ok(0xff)
        );
        assert_eq!(parse_int("0x100", 1), Err(NumError::Range));
        assert_eq!(parse_int("18446744073709551616", 16), Err(NumError::Range));
        assert_eq!(parse_int_prefix("5/0xf", 4), Ok((5, "/0xf")));
        assert_eq!(parse_decimal("65534", 0xffff_ffff), Ok(65534));
        assert_eq!(parse_decimal("0x5", 0xffff_ffff), Err(NumError::Syntax));
        assert_eq!(parse_hex_bytes("01.02.0a0b"), Some(vec![1, 2, 10, 11]));
        assert_eq!(parse_hex_bytes("012"), None);
        assert_eq!(parse_hex_bytes(""), Some(vec![]));
    }
}
