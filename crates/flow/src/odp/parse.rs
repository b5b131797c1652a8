//! The cursor the datapath flow parsers share, and [`ParseError`].
//!
//! Numbers follow C's `%i` as OVS scans them: `0x` prefix for hex, a leading `0` for octal,
//! decimal otherwise. Every scanner reports the byte column it failed at and what it wanted
//! there, so an operator can find the mistake in a 300-character flow line.

use std::borrow::Cow;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::key::EthAddr;

/// What went wrong, without the position.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    /// Something else was needed here.
    #[error("expected {0}")]
    Expected(Cow<'static, str>),
    /// A key attribute name OVS does not have (or this parser does not support).
    #[error("unknown key attribute '{0}'")]
    UnknownAttr(String),
    /// An action name OVS does not have (or this parser does not support).
    #[error("unknown action '{0}'")]
    UnknownAction(String),
    /// A number too large for its field.
    #[error("{what} out of range (maximum {max})")]
    OutOfRange {
        /// The field the number was for, as the message names it.
        what: &'static str,
        /// The largest value the field takes.
        max: u128,
    },
    /// `encap(`, `clone(` and friends nested too deeply.
    #[error("nesting deeper than {0} levels")]
    TooDeep(usize),
    /// A well-formed item that cannot be accepted here.
    #[error("{0}")]
    Invalid(Cow<'static, str>),
    /// A nested attribute longer than a netlink attribute can be (OVS's `E2BIG` for
    /// `nl_attr_oversized()`); the offset is the attribute's start.
    #[error("attribute too long")]
    TooLong,
}

/// A parse failure: where (byte offset, shown as a 1-based column), what was expected, and
/// what was found instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset into the parsed text.
    pub offset: usize,
    /// What was wrong.
    pub kind: ParseErrorKind,
    /// The character found at `offset`, `None` at the end of the input.
    pub found: Option<char>,
}

impl ParseError {
    /// 1-based column (counted in bytes) of the error.
    pub fn column(&self) -> usize {
        self.offset + 1
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}, found ", self.column(), self.kind)?;
        match self.found {
            Some(c) => write!(f, "'{}'", c.escape_debug()),
            None => f.write_str("end of input"),
        }
    }
}

impl std::error::Error for ParseError {}

pub(crate) type PResult<T> = Result<T, ParseError>;

/// A position in the text being parsed. It only ever advances over ASCII bytes, so `pos` is
/// always a character boundary.
pub(crate) struct Cursor<'a> {
    s: &'a str,
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(s: &'a str) -> Self {
        Cursor { s, pos: 0 }
    }

    pub(crate) fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    pub(crate) fn slice(&self, from: usize, to: usize) -> &'a str {
        &self.s[from..to]
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    pub(crate) fn peek_at(&self, k: usize) -> Option<u8> {
        self.s.as_bytes().get(self.pos + k).copied()
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }

    pub(crate) fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Consumes `lit` if the text continues with it (`lit` must be ASCII).
    pub(crate) fn eat_str(&mut self, lit: &str) -> bool {
        if self.rest().as_bytes().starts_with(lit.as_bytes()) {
            self.pos += lit.len();
            true
        } else {
            false
        }
    }

    pub(crate) fn expect(&mut self, c: u8, what: &'static str) -> PResult<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.expected(what))
        }
    }

    pub(crate) fn expect_str(&mut self, lit: &str, what: &'static str) -> PResult<()> {
        if self.eat_str(lit) {
            Ok(())
        } else {
            Err(self.expected(what))
        }
    }

    pub(crate) fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.pos += 1;
        }
    }

    /// An error at the current position.
    pub(crate) fn err(&self, kind: ParseErrorKind) -> ParseError {
        self.err_at(self.pos, kind)
    }

    pub(crate) fn err_at(&self, offset: usize, kind: ParseErrorKind) -> ParseError {
        let offset = offset.min(self.s.len());
        ParseError {
            offset,
            kind,
            found: self.s.get(offset..).and_then(|r| r.chars().next()),
        }
    }

    pub(crate) fn expected(&self, what: impl Into<Cow<'static, str>>) -> ParseError {
        self.err(ParseErrorKind::Expected(what.into()))
    }

    pub(crate) fn invalid_at(
        &self,
        offset: usize,
        what: impl Into<Cow<'static, str>>,
    ) -> ParseError {
        self.err_at(offset, ParseErrorKind::Invalid(what.into()))
    }

    /// A run of `[A-Za-z0-9_]` (attribute, action and keyword names).
    pub(crate) fn word(&mut self) -> &'a str {
        let start = self.pos;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_') {
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }

    /// A run of characters allowed in a port name: `[A-Za-z0-9_.-]`.
    pub(crate) fn name_token(&mut self) -> &'a str {
        let start = self.pos;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
        {
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }

    /// An unsigned integer in `%i` syntax, at most `max`, after any blanks and line breaks (as
    /// `%i` skips them: OVS's tests break long flows across lines). `what` names the field for
    /// errors.
    pub(crate) fn uint(&mut self, max: u128, what: &'static str) -> PResult<u128> {
        self.skip_spaces();
        let start = self.pos;
        let b = self.s.as_bytes();
        let (radix, digits_start) = if b.get(start) == Some(&b'0')
            && matches!(b.get(start + 1), Some(b'x' | b'X'))
            && b.get(start + 2).is_some_and(|c| c.is_ascii_hexdigit())
        {
            (16, start + 2)
        } else if b.get(start) == Some(&b'0')
            && b.get(start + 1).is_some_and(|c| c.is_ascii_digit())
        {
            (8, start + 1)
        } else {
            (10, start)
        };
        let mut end = digits_start;
        while b.get(end).is_some_and(|c| (*c as char).is_digit(radix)) {
            end += 1;
        }
        if end == digits_start {
            return Err(self.err(ParseErrorKind::Expected(
                format!("a number for {what}").into(),
            )));
        }
        let mut v: u128 = 0;
        for &c in &b[digits_start..end] {
            let d = (c as char).to_digit(radix).unwrap_or(0) as u128;
            v = match v.checked_mul(radix as u128).and_then(|v| v.checked_add(d)) {
                Some(v) if v <= max => v,
                _ => return Err(self.err_at(start, ParseErrorKind::OutOfRange { what, max })),
            };
        }
        if v > max {
            return Err(self.err_at(start, ParseErrorKind::OutOfRange { what, max }));
        }
        self.pos = end;
        Ok(v)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> PResult<u8> {
        Ok(self.uint(u8::MAX.into(), what)? as u8)
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> PResult<u16> {
        Ok(self.uint(u16::MAX.into(), what)? as u16)
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> PResult<u32> {
        Ok(self.uint(u32::MAX.into(), what)? as u32)
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> PResult<u64> {
        Ok(self.uint(u64::MAX.into(), what)? as u64)
    }

    /// A `0x`-prefixed hex number (`%x` as OVS prints it, prefix required).
    pub(crate) fn hex_u32(&mut self, what: &'static str) -> PResult<u32> {
        self.skip_spaces();
        let start = self.pos;
        if !self.eat_str("0x") && !self.eat_str("0X") {
            return Err(self.expected(format!("0x-prefixed hex number for {what}")));
        }
        let digits = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
            self.pos += 1;
        }
        if self.pos == digits {
            return Err(self.expected(format!("hex digits for {what}")));
        }
        u32::from_str_radix(self.slice(digits, self.pos), 16).map_err(|_| {
            self.err_at(
                start,
                ParseErrorKind::OutOfRange {
                    what,
                    max: u32::MAX.into(),
                },
            )
        })
    }

    /// Dotted-quad IPv4 address.
    pub(crate) fn ipv4(&mut self) -> PResult<Ipv4Addr> {
        let start = self.pos;
        let mut o = [0u8; 4];
        for (i, x) in o.iter_mut().enumerate() {
            if i > 0 && !self.eat(b'.') {
                self.pos = start;
                return Err(self.expected("IPv4 address"));
            }
            let d = self.pos;
            while self.peek().is_some_and(|c| c.is_ascii_digit()) && self.pos - d < 3 {
                self.pos += 1;
            }
            match self.slice(d, self.pos).parse::<u8>() {
                Ok(v) => *x = v,
                Err(_) => {
                    let at = if self.pos == d { d } else { start };
                    self.pos = start;
                    return Err(self.err_at(at, ParseErrorKind::Expected("IPv4 address".into())));
                }
            }
        }
        if self.peek().is_some_and(|c| c.is_ascii_digit()) {
            let at = start;
            self.pos = start;
            return Err(self.err_at(at, ParseErrorKind::Expected("IPv4 address".into())));
        }
        Ok(Ipv4Addr::from(o))
    }

    /// IPv6 address in any form `inet_pton` accepts.
    pub(crate) fn ipv6(&mut self) -> PResult<Ipv6Addr> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_hexdigit() || c == b':' || c == b'.')
        {
            self.pos += 1;
        }
        match self.slice(start, self.pos).parse::<Ipv6Addr>() {
            Ok(a) => Ok(a),
            Err(_) => {
                self.pos = start;
                Err(self.expected("IPv6 address"))
            }
        }
    }

    /// Ethernet address: six groups of one or two hex digits separated by ':'.
    pub(crate) fn mac(&mut self) -> PResult<EthAddr> {
        let start = self.pos;
        let mut a = [0u8; 6];
        for (i, x) in a.iter_mut().enumerate() {
            if i > 0 && !self.eat(b':') {
                let e = self.expected("':' in Ethernet address");
                self.pos = start;
                return Err(e);
            }
            let d = self.pos;
            while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) && self.pos - d < 2 {
                self.pos += 1;
            }
            if self.pos == d {
                let e = self.expected("hex digits of Ethernet address");
                self.pos = start;
                return Err(e);
            }
            *x = u8::from_str_radix(self.slice(d, self.pos), 16).unwrap_or(0);
        }
        if self
            .peek()
            .is_some_and(|c| c.is_ascii_hexdigit() || c == b':')
        {
            let e = self.expected("end of Ethernet address");
            self.pos = start;
            return Err(e);
        }
        Ok(EthAddr(a))
    }

    /// A value for a field of `out.len()` bytes, right-aligned: `0x` and any number of hex
    /// digits (OVS's `parse_int_string`), or a decimal number.
    pub(crate) fn int_bytes(&mut self, out: &mut [u8], what: &'static str) -> PResult<()> {
        out.fill(0);
        let start = self.pos;
        if self.eat_str("0x") || self.eat_str("0X") {
            let d = self.pos;
            while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                self.pos += 1;
            }
            let digits = self.slice(d, self.pos).trim_start_matches('0').as_bytes();
            if self.pos == d {
                return Err(self.expected(format!("hex digits for {what}")));
            }
            if digits.len() > out.len() * 2 {
                let max = if out.len() >= 16 {
                    u128::MAX
                } else {
                    (1u128 << (8 * out.len())) - 1
                };
                return Err(self.err_at(start, ParseErrorKind::OutOfRange { what, max }));
            }
            // Fill from the right, two digits per byte.
            let n = out.len();
            for (k, &c) in digits.iter().rev().enumerate() {
                let v = (c as char).to_digit(16).unwrap_or(0) as u8;
                let byte = &mut out[n - 1 - k / 2];
                *byte |= if k % 2 == 0 { v } else { v << 4 };
            }
            Ok(())
        } else {
            let max = if out.len() >= 8 {
                u64::MAX as u128
            } else {
                (1u128 << (8 * out.len())) - 1
            };
            let v = self.uint(max, what)?;
            let be = v.to_be_bytes();
            let n = out.len().min(16);
            let k = out.len();
            out[k - n..].copy_from_slice(&be[16 - n..]);
            Ok(())
        }
    }

    /// Text up to (not including) the `)` that balances an already-consumed `(`; stops before
    /// that `)`. Fails at the end of input.
    pub(crate) fn balanced(&mut self, what: &'static str) -> PResult<&'a str> {
        let start = self.pos;
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            match c {
                b'(' => depth += 1,
                b')' if depth == 0 => return Ok(self.slice(start, self.pos)),
                b')' => depth -= 1,
                _ => {}
            }
            self.pos += 1;
        }
        Err(self.expected(what))
    }
}

/// Writes `v` the way C's `%#x` does: `0` for zero, `0x…` otherwise.
pub(crate) fn hash_x(out: &mut String, v: u128) {
    use fmt::Write;
    if v == 0 {
        out.push('0');
    } else {
        let _ = write!(out, "{v:#x}");
    }
}

/// Writes bytes the way OVS's `ds_put_hex` does: `0x` and the value without leading zero
/// bytes (the first byte without a leading zero digit), or `0` when all are zero.
pub(crate) fn put_hex(out: &mut String, b: &[u8]) {
    use fmt::Write;
    let mut printed = false;
    for &v in b {
        if v != 0 || printed {
            if printed {
                let _ = write!(out, "{v:02x}");
            } else {
                let _ = write!(out, "0x{v:x}");
            }
            printed = true;
        }
    }
    if !printed {
        out.push('0');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_follow_percent_i() {
        let mut c = Cursor::new("0x1f,017,42,0");
        assert_eq!(c.uint(u128::MAX, "x").unwrap(), 0x1f);
        assert!(c.eat(b','));
        assert_eq!(c.uint(u128::MAX, "x").unwrap(), 0o17);
        assert!(c.eat(b','));
        assert_eq!(c.uint(u128::MAX, "x").unwrap(), 42);
        assert!(c.eat(b','));
        assert_eq!(c.uint(u128::MAX, "x").unwrap(), 0);
        assert!(c.at_end());
        // Blanks and line breaks before a number are skipped, as `%i` skips them.
        let mut c = Cursor::new("\n  17");
        assert_eq!(c.uint(u128::MAX, "x").unwrap(), 17);
        let mut c = Cursor::new("256");
        let e = c.u8("ttl").unwrap_err();
        assert_eq!(
            e.to_string(),
            "column 1: ttl out of range (maximum 255), found '2'"
        );
    }

    #[test]
    fn addresses() {
        let mut c = Cursor::new("10.0.0.1/255.255.0.0");
        assert_eq!(c.ipv4().unwrap(), Ipv4Addr::new(10, 0, 0, 1));
        assert!(c.eat(b'/'));
        assert_eq!(c.ipv4().unwrap(), Ipv4Addr::new(255, 255, 0, 0));
        assert!(Cursor::new("10.0.0").ipv4().is_err());
        assert!(Cursor::new("10.0.0.256").ipv4().is_err());
        let mut c = Cursor::new("8c:dc:d4:ab:5b:f0");
        assert_eq!(c.mac().unwrap().to_string(), "8c:dc:d4:ab:5b:f0");
        assert!(Cursor::new("8c:dc:d4:ab:5b").mac().is_err());
        let mut c = Cursor::new("fe80::1,");
        assert_eq!(c.ipv6().unwrap(), "fe80::1".parse::<Ipv6Addr>().unwrap());
    }

    #[test]
    fn int_bytes_right_aligned() {
        let mut b = [0u8; 4];
        Cursor::new("0x30002").int_bytes(&mut b, "x").unwrap();
        assert_eq!(b, [0, 3, 0, 2]);
        let mut s = String::new();
        put_hex(&mut s, &b);
        assert_eq!(s, "0x30002");
        assert!(Cursor::new("0x123456789").int_bytes(&mut b, "x").is_err());
    }
}
