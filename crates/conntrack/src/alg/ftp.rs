//! The FTP helper (RFC 959 §4.1, RFC 2428): reads a control connection's segments for the
//! announcements of data connections — the client's `PORT h1,h2,h3,h4,p1,p2` and
//! `EPRT |af|addr|port|` (active mode), the server's `227 ... (h1,h2,h3,h4,p1,p2)` and
//! `229 ... (|||port|)` replies (passive mode) — and turns one into an expectation of the data
//! connection and, behind NAT, into a rewrite of the address it names ([`PayloadEdit`]), as
//! OVS's userspace conntrack and Linux's `nf_conntrack_ftp` do.
//!
//! Parsing is pure and bounded: a message is a whole line within one segment, its numbers are
//! checked digit by digit, and a malformed announcement is reported ([`FtpParse::Invalid`])
//! for the packet to be `+inv`.

use std::fmt::{self, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{AlgOutcome, Control, ExpKey, ExpNat, addr_bytes};
use crate::key::TCP;

/// An FTP message that announces a data connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FtpKind {
    /// `PORT h1,h2,h3,h4,p1,p2` (client, active mode, IPv4).
    Port,
    /// `EPRT <d>af<d>addr<d>port<d>` (client, active mode).
    Eprt,
    /// `227 ... h1,h2,h3,h4,p1,p2` (server, passive mode, IPv4).
    Pasv,
    /// `229 ... (<d><d><d>port<d>)` (server, passive mode; no address).
    Epsv,
}

/// How an address is written in a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrForm {
    /// `h1,h2,h3,h4` (`PORT`, `227`).
    Commas,
    /// `a.b.c.d` (`EPRT |1|`).
    Dotted,
    /// RFC 5952 text (`EPRT |2|`).
    V6,
}

/// A parsed announcement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FtpAnnounce {
    pub kind: FtpKind,
    /// The address named (`None` for `229`, which names the control connection's peer).
    pub addr: Option<IpAddr>,
    pub port: u16,
    /// Offset and length of the address text in the payload, and its notation.
    pub addr_text: Option<(usize, usize, AddrForm)>,
}

/// What a segment of an FTP control connection holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FtpParse {
    /// No announcement.
    Other,
    /// An announcement starts but its line does not end in this segment.
    Incomplete,
    /// A malformed announcement (the packet is `+inv`, as OVS has it).
    Invalid,
    Found(FtpAnnounce),
}

/// Whether `line` starts with `word` (ASCII, any case) followed by a space.
fn starts_word(line: &[u8], word: &[u8]) -> bool {
    line.len() > word.len()
        && line[..word.len()].eq_ignore_ascii_case(word)
        && line[word.len()] == b' '
}

/// The message kinds a side sends: commands from the client, replies from the server.
fn kind_of(line: &[u8], from_client: bool) -> Option<FtpKind> {
    if from_client {
        if starts_word(line, b"PORT") {
            return Some(FtpKind::Port);
        }
        if starts_word(line, b"EPRT") {
            return Some(FtpKind::Eprt);
        }
    } else {
        if starts_word(line, b"227") {
            return Some(FtpKind::Pasv);
        }
        if starts_word(line, b"229") {
            return Some(FtpKind::Epsv);
        }
    }
    None
}

/// Reads a decimal number of 1 to `max_digits` digits at `*i`, advancing past it.
fn number(s: &[u8], i: &mut usize, max_digits: usize) -> Option<u32> {
    let start = *i;
    let mut v: u32 = 0;
    while let Some(c) = s.get(*i).filter(|c| c.is_ascii_digit()) {
        if *i - start == max_digits {
            return None;
        }
        v = v * 10 + u32::from(c - b'0');
        *i += 1;
    }
    (*i > start).then_some(v)
}

/// Six comma-separated numbers `h1,h2,h3,h4,p1,p2` at `at` of `line` (RFC 959 §4.1.2), each
/// 0-255: the address, the address text's span, the port.
fn host_port(line: &[u8], at: usize) -> Option<(Ipv4Addr, (usize, usize), u16)> {
    let mut i = at;
    let mut n = [0u8; 6];
    let mut addr_end = at;
    for (k, slot) in n.iter_mut().enumerate() {
        if k > 0 {
            if line.get(i) != Some(&b',') {
                return None;
            }
            i += 1;
        }
        *slot = u8::try_from(number(line, &mut i, 3)?).ok()?;
        if k == 3 {
            addr_end = i;
        }
    }
    let port = u16::from(n[4]) << 8 | u16::from(n[5]);
    Some((
        Ipv4Addr::new(n[0], n[1], n[2], n[3]),
        (at, addr_end - at),
        port,
    ))
}

/// The RFC 2428 delimiter: any printable ASCII character but a digit (a digit would make the
/// fields ambiguous).
fn delimiter(c: u8) -> bool {
    (33..=126).contains(&c) && !c.is_ascii_digit()
}

fn port_number(s: &[u8], i: &mut usize) -> Option<u16> {
    u16::try_from(number(s, i, 5)?).ok().filter(|&p| p != 0)
}

/// Parses one complete line (without its line end) of kind `kind`. Offsets are in the line.
fn parse_line(line: &[u8], kind: FtpKind, v6: bool) -> Option<FtpAnnounce> {
    let mut i = match kind {
        FtpKind::Port | FtpKind::Eprt => 4,
        FtpKind::Pasv | FtpKind::Epsv => 3,
    };
    while line.get(i) == Some(&b' ') {
        i += 1;
    }
    match kind {
        FtpKind::Port | FtpKind::Pasv => {
            let at = if kind == FtpKind::Port {
                i
            } else {
                // "227 Entering Passive Mode (h1,...)": the numbers follow the parenthesis;
                // some servers write them without one ("227 =h1,..."): the first digit then.
                match line[i..].iter().position(|&c| c == b'(') {
                    Some(p) => i + p + 1,
                    None => i + line[i..].iter().position(u8::is_ascii_digit)?,
                }
            };
            let (addr, (a, n), port) = host_port(line, at)?;
            (port != 0).then_some(FtpAnnounce {
                kind,
                addr: Some(IpAddr::V4(addr)),
                port,
                addr_text: Some((a, n, AddrForm::Commas)),
            })
        }
        FtpKind::Eprt => {
            // EPRT <d><af><d><addr><d><port><d>
            let d = *line.get(i).filter(|&&c| delimiter(c))?;
            i += 1;
            let af = number(line, &mut i, 1)?;
            if line.get(i) != Some(&d) || af != if v6 { 2 } else { 1 } {
                return None;
            }
            i += 1;
            let a = i;
            let len = line[a..].iter().position(|&c| c == d)?;
            let text = std::str::from_utf8(&line[a..a + len]).ok()?;
            let (addr, form) = if v6 {
                (IpAddr::V6(text.parse::<Ipv6Addr>().ok()?), AddrForm::V6)
            } else {
                (IpAddr::V4(text.parse::<Ipv4Addr>().ok()?), AddrForm::Dotted)
            };
            i = a + len + 1;
            let port = port_number(line, &mut i)?;
            (line.get(i) == Some(&d)).then_some(FtpAnnounce {
                kind,
                addr: Some(addr),
                port,
                addr_text: Some((a, len, form)),
            })
        }
        FtpKind::Epsv => {
            // 229 Entering Extended Passive Mode (<d><d><d><port><d>)
            i += line[i..].iter().position(|&c| c == b'(')? + 1;
            let d = *line.get(i).filter(|&&c| delimiter(c))?;
            if line.get(i + 1) != Some(&d) || line.get(i + 2) != Some(&d) {
                return None;
            }
            i += 3;
            let port = port_number(line, &mut i)?;
            (line.get(i) == Some(&d)).then_some(FtpAnnounce {
                kind,
                addr: None,
                port,
                addr_text: None,
            })
        }
    }
}

/// Reads an FTP control connection's segment payload for an announcement: commands when it
/// comes from the client, replies when from the server. The first complete line that is one
/// decides; an IPv4-only message (`PORT`, `227`) on an IPv6 control connection is not one.
pub fn parse_ftp(payload: &[u8], from_client: bool, v6: bool) -> FtpParse {
    let mut start = 0;
    while start < payload.len() {
        let rest = &payload[start..];
        let (raw, complete) = match rest.iter().position(|&c| c == b'\n') {
            Some(n) => (&rest[..n], true),
            None => (rest, false),
        };
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if let Some(kind) = kind_of(line, from_client)
            && !(v6 && matches!(kind, FtpKind::Port | FtpKind::Pasv))
        {
            if !complete {
                return FtpParse::Incomplete;
            }
            return match parse_line(line, kind, v6) {
                Some(mut a) => {
                    if let Some((at, n, f)) = a.addr_text {
                        a.addr_text = Some((start + at, n, f));
                    }
                    FtpParse::Found(a)
                }
                None => FtpParse::Invalid,
            };
        }
        if !complete {
            // A line cut short that could still become an announcement ("POR", "227").
            let words: [&[u8]; 2] = if from_client {
                [b"PORT ", b"EPRT "]
            } else {
                [b"227 ", b"229 "]
            };
            let could_be = |w: &[u8]| {
                let n = line.len().min(w.len());
                line[..n].eq_ignore_ascii_case(&w[..n])
            };
            if !line.is_empty() && words.iter().any(|w| could_be(w)) {
                return FtpParse::Incomplete;
            }
            break;
        }
        start += raw.len() + 1;
    }
    FtpParse::Other
}

/// Longest address text an edit writes (a full IPv6 address, RFC 5952).
pub const MAX_ADDR_TEXT: usize = 39;

/// A rewrite of the address text in a segment's payload, for NAT: the `old_len` bytes at `at`
/// (from the start of the L4 header) become, in notation `form`, the address the peer sees,
/// which is always the packet's *translated source address* (an announcement names its
/// sender; [`inspect`](super::inspect) asks for an edit only when that address is translated). It is not
/// carried here, to keep the rewrite the tracker returns per packet small: the datapath takes
/// it from the NAT rewrite. The packet grows or shrinks by [`PayloadEdit::delta`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PayloadEdit {
    pub at: u16,
    pub old_len: u16,
    pub form: AddrForm,
}

/// A `fmt::Write` into a fixed buffer.
struct Cursor<'a> {
    buf: &'a mut [u8],
    n: usize,
}

impl fmt::Write for Cursor<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let b = s.as_bytes();
        let dst = self
            .buf
            .get_mut(self.n..self.n + b.len())
            .ok_or(fmt::Error)?;
        dst.copy_from_slice(b);
        self.n += b.len();
        Ok(())
    }
}

impl PayloadEdit {
    /// Writes the text of `addr` (IPv4 in the first four bytes) into `out`; returns its length.
    pub fn render(&self, addr: &[u8; 16], out: &mut [u8; MAX_ADDR_TEXT]) -> usize {
        let mut c = Cursor { buf: out, n: 0 };
        let a = addr;
        // Cannot fail: the longest text fits MAX_ADDR_TEXT.
        let _ = match self.form {
            AddrForm::Commas => write!(c, "{},{},{},{}", a[0], a[1], a[2], a[3]),
            AddrForm::Dotted => write!(c, "{}.{}.{}.{}", a[0], a[1], a[2], a[3]),
            AddrForm::V6 => write!(c, "{}", Ipv6Addr::from(*a)),
        };
        c.n
    }

    /// How many bytes longer the payload gets with `addr` written (negative: shorter).
    pub fn delta(&self, addr: &[u8; 16]) -> i32 {
        let mut t = [0; MAX_ADDR_TEXT];
        self.render(addr, &mut t) as i32 - i32::from(self.old_len)
    }

    /// `l4` (an L4 header and its payload) with `addr` written: for tests and slow paths, the
    /// datapath edits its buffer in place. `None` when the text is not within `l4`.
    pub fn apply_to(&self, l4: &[u8], addr: &[u8; 16]) -> Option<Vec<u8>> {
        let (at, old) = (usize::from(self.at), usize::from(self.old_len));
        let tail = l4.get(at + old..)?;
        let mut t = [0; MAX_ADDR_TEXT];
        let n = self.render(addr, &mut t);
        let mut v = Vec::with_capacity(l4.len() + n);
        v.extend_from_slice(&l4[..at]);
        v.extend_from_slice(&t[..n]);
        v.extend_from_slice(tail);
        Some(v)
    }
}

/// The FTP part of [`super::inspect`]: an announcement in the segment `l4` (its TCP header and
/// payload) gives an expectation and, under NAT, a payload edit.
pub(super) fn inspect(c: &Control<'_>, l4: &[u8], now: u64) -> AlgOutcome {
    let mut out = AlgOutcome::default();
    let (o, r) = (c.orig, c.reply_tuple);
    if o.proto != TCP || l4.len() < 20 {
        return out;
    }
    let doff = usize::from(l4[12] >> 4) * 4;
    if doff < 20 {
        return out;
    }
    let Some(payload) = l4.get(doff..).filter(|p| !p.is_empty()) else {
        return out;
    };
    let a = match parse_ftp(payload, !c.reply, o.v6) {
        FtpParse::Other => return out,
        FtpParse::Incomplete => {
            out.incomplete = true;
            return out;
        }
        FtpParse::Invalid => {
            out.invalid = true;
            return out;
        }
        FtpParse::Found(a) => a,
    };
    // The address named must be the sender's, untranslated or translated (no bouncing
    // a data connection to a third host, RFC 2577 §3); the replacement is the one the
    // peer sees.
    let (own, seen) = if c.reply {
        (r.src, o.dst)
    } else {
        (o.src, r.dst)
    };
    if let Some(addr) = a.addr {
        let b = addr_bytes(addr);
        if b != own && b != seen {
            out.invalid = true;
            return out;
        }
    }
    let (key, nat) = if c.reply {
        // Passive: the client connects to the server as it knows it.
        let key = ExpKey {
            dport: a.port,
            ..ExpKey::of(o)
        };
        let nat = ExpNat {
            src: c.snat().then_some((r.dst, None)),
            dst: c.dnat().then_some((r.src, None)),
        };
        (key, nat)
    } else {
        // Active: the server connects to the client as it knows it.
        let key = ExpKey {
            dport: a.port,
            ..ExpKey::of(r)
        };
        let nat = ExpNat {
            src: c.dnat().then_some((o.dst, None)),
            dst: c.snat().then_some((o.src, None)),
        };
        (key, nat)
    };
    out.expectation = Some(c.expectation(key, nat, now));
    // Only when the sender's address is translated: the replacement is then the
    // packet's translated source, which the datapath writes.
    if c.nat
        && seen != own
        && let Some((ofs, n, form)) = a.addr_text
        && let (Ok(at), Ok(old_len)) = (u16::try_from(doff + ofs), u16::try_from(n))
    {
        let e = PayloadEdit { at, old_len, form };
        let mut t = [0; MAX_ADDR_TEXT];
        let len = e.render(&seen, &mut t);
        if payload[ofs..ofs + n] != t[..len] {
            out.edit = Some(e);
            out.edit_addr = seen;
            out.delta = len as i32 - n as i32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alg::test_util::{tuple, v4, v6};
    use crate::alg::{Helper, inspect};
    use proptest::prelude::*;

    fn found(p: FtpParse) -> FtpAnnounce {
        match p {
            FtpParse::Found(a) => a,
            other => panic!("{other:?}"),
        }
    }

    fn text_at(payload: &[u8], a: &FtpAnnounce) -> String {
        let (at, n, _) = a.addr_text.unwrap();
        String::from_utf8(payload[at..at + n].to_vec()).unwrap()
    }

    #[test]
    fn port_rfc959() {
        // RFC 959 §4.1.2: "PORT h1,h2,h3,h4,p1,p2".
        let p = b"PORT 192,168,1,2,7,138\r\n";
        let a = found(parse_ftp(p, true, false));
        assert_eq!(a.kind, FtpKind::Port);
        assert_eq!(a.addr, Some("192.168.1.2".parse().unwrap()));
        assert_eq!(a.port, 7 * 256 + 138);
        assert_eq!(text_at(p, &a), "192,168,1,2");
        // Lower case, several spaces, leading zeros, bare LF.
        let p = b"port  010,001,001,002,0,21\n";
        let a = found(parse_ftp(p, true, false));
        assert_eq!(a.addr, Some("10.1.1.2".parse().unwrap()));
        assert_eq!(a.port, 21);
        assert_eq!(text_at(p, &a), "010,001,001,002");
        // After another command in the same segment.
        let p = b"TYPE I\r\nPORT 10,0,0,1,4,1\r\n";
        let a = found(parse_ftp(p, true, false));
        assert_eq!(text_at(p, &a), "10,0,0,1");
        assert_eq!(a.port, 1025);
    }

    #[test]
    fn pasv_reply_variants() {
        for (p, text) in [
            (
                &b"227 Entering Passive Mode (192,168,1,2,195,149).\r\n"[..],
                "192,168,1,2",
            ),
            (
                b"227 Entering Passive Mode 192,168,1,2,195,149\r\n",
                "192,168,1,2",
            ),
            (b"227 =192,168,1,2,195,149\r\n", "192,168,1,2"),
            // The v2 in the text is not the address: the parenthesis is looked for first.
            (b"227 Passive v2 (192,168,1,2,195,149)\r\n", "192,168,1,2"),
        ] {
            let a = found(parse_ftp(p, false, false));
            assert_eq!(a.kind, FtpKind::Pasv);
            assert_eq!(a.port, 195 * 256 + 149, "{}", String::from_utf8_lossy(p));
            assert_eq!(text_at(p, &a), text);
        }
    }

    #[test]
    fn eprt_rfc2428() {
        // RFC 2428 §2 examples.
        let p = b"EPRT |1|132.235.1.2|6275|\r\n";
        let a = found(parse_ftp(p, true, false));
        assert_eq!((a.kind, a.port), (FtpKind::Eprt, 6275));
        assert_eq!(text_at(p, &a), "132.235.1.2");
        assert_eq!(a.addr_text.unwrap().2, AddrForm::Dotted);
        let p = b"EPRT |2|1080::8:800:200C:417A|5282|\r\n";
        let a = found(parse_ftp(p, true, true));
        assert_eq!(a.addr, Some("1080::8:800:200c:417a".parse().unwrap()));
        assert_eq!(a.port, 5282);
        assert_eq!(text_at(p, &a), "1080::8:800:200C:417A");
        // Another delimiter.
        let p = b"EPRT !2!::1!21!\r\n";
        assert_eq!(found(parse_ftp(p, true, true)).port, 21);
        // The family must be the control connection's (OVS).
        assert_eq!(
            parse_ftp(b"EPRT |2|::1|21|\r\n", true, false),
            FtpParse::Invalid
        );
        assert_eq!(
            parse_ftp(b"EPRT |1|1.2.3.4|21|\r\n", true, true),
            FtpParse::Invalid
        );
    }

    #[test]
    fn epsv_rfc2428() {
        let p = b"229 Entering Extended Passive Mode (|||6446|)\r\n";
        let a = found(parse_ftp(p, false, true));
        assert_eq!(
            (a.kind, a.port, a.addr, a.addr_text),
            (FtpKind::Epsv, 6446, None, None)
        );
        assert_eq!(found(parse_ftp(p, false, false)).port, 6446);
        assert_eq!(
            found(parse_ftp(b"229 ok (!!!1!)\r\n", false, false)).port,
            1
        );
        assert_eq!(
            parse_ftp(b"229 ok (||6446|)\r\n", false, false),
            FtpParse::Invalid
        );
    }

    #[test]
    fn not_announcements() {
        for (p, client) in [
            (&b"USER anonymous\r\n"[..], true),
            (b"PORTS 1,2,3,4,5,6\r\n", true),
            (b"220 Welcome\r\n", false),
            (b"227-multi\r\n", false),
            // A reply from the client, a command from the server.
            (b"227 (1,2,3,4,5,6)\r\n", true),
            (b"PORT 1,2,3,4,5,6\r\n", false),
            (b"", true),
        ] {
            assert_eq!(parse_ftp(p, client, false), FtpParse::Other, "{p:?}");
        }
        // IPv4 forms on IPv6 are ignored (OVS).
        assert_eq!(
            parse_ftp(b"PORT 1,2,3,4,5,6\r\n", true, true),
            FtpParse::Other
        );
    }

    #[test]
    fn garbage_is_invalid() {
        for p in [
            &b"PORT 256,1,1,1,1,1\r\n"[..],
            b"PORT 1,1,1,1,1\r\n",
            b"PORT 1,1,1,1,1,1000\r\n",
            b"PORT 1,1,1,1,0,0\r\n",
            b"PORT a,b,c,d,e,f\r\n",
            b"PORT 1111,1,1,1,1,1\r\n",
            b"EPRT |1|1.2.3|21|\r\n",
            b"EPRT |1|1.2.3.4|70000|\r\n",
            b"EPRT |1|1.2.3.4|21\r\n",
            b"EPRT 1|1.2.3.4|21|\r\n",
            b"EPRT |3|1.2.3.4|21|\r\n",
            b"EPRT \xff1\xff1.2.3.4\xff21\xff\r\n",
        ] {
            assert_eq!(parse_ftp(p, true, false), FtpParse::Invalid, "{p:?}");
        }
        assert_eq!(
            parse_ftp(b"227 no numbers\r\n", false, false),
            FtpParse::Invalid
        );
    }

    #[test]
    fn split_commands_are_incomplete() {
        let whole = b"PORT 10,0,0,1,4,1\r\n";
        for cut in 1..whole.len() - 1 {
            let (a, b) = whole.split_at(cut);
            assert_eq!(parse_ftp(a, true, false), FtpParse::Incomplete, "{cut}");
            // The second part alone is no announcement: its line does not start one.
            assert!(
                matches!(
                    parse_ftp(b, true, false),
                    FtpParse::Other | FtpParse::Incomplete
                ),
                "{cut}"
            );
        }
        assert_eq!(parse_ftp(b"NOOP\r\nPO", true, false), FtpParse::Incomplete);
        assert_eq!(parse_ftp(b"NOOP\r\nQU", true, false), FtpParse::Other);
    }

    /// A TCP header of 20 bytes followed by `payload`.
    fn seg(payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 20];
        v[12] = 5 << 4;
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn active_ftp_with_snat() {
        // Client 10.0.0.1:40000 -> server 192.0.2.9:21, SNAT to 203.0.113.200 (longer text).
        let o = tuple(v4("10.0.0.1"), 40000, v4("192.0.2.9"), 21, TCP);
        let r = tuple(v4("192.0.2.9"), 21, v4("203.0.113.200"), 40000, TCP);
        let c = Control {
            helper: Helper::Ftp,
            orig: &o,
            reply_tuple: &r,
            id: 7,
            mark: 5,
            label: 9,
            reply: false,
            nat: true,
        };
        let l4 = seg(b"PORT 10,0,0,1,156,65\r\n");
        let out = inspect(&c, &l4, 1000);
        assert!(!out.invalid);
        let e = out.expectation.unwrap();
        // From the server (any port) to the client's translated address and its port.
        assert_eq!(e.key.src, v4("192.0.2.9"));
        assert_eq!(e.key.dst, v4("203.0.113.200"));
        assert_eq!(e.key.dport, 156 * 256 + 65);
        assert_eq!((e.parent, e.parent_id, e.mark, e.label), (o, 7, 5, 9));
        assert_eq!(e.nat.dst, Some((v4("10.0.0.1"), None)));
        assert_eq!(e.nat.src, None);
        // The data connection's reply goes to the client's own address.
        let data = tuple(v4("192.0.2.9"), 20, v4("203.0.113.200"), 40001, TCP);
        assert_eq!(ExpKey::of(&data), e.key);
        let rr = e.nat_reply(&data);
        assert_eq!(
            (rr.src, rr.sport, rr.dst, rr.dport),
            (v4("10.0.0.1"), 40001, v4("192.0.2.9"), 20)
        );
        let edit = out.edit.unwrap();
        assert_eq!(out.edit_addr, r.dst);
        assert_eq!(
            out.delta,
            "203,0,113,200".len() as i32 - "10,0,0,1".len() as i32
        );
        assert_eq!(edit.delta(&r.dst), out.delta);
        let new = edit.apply_to(&l4, &r.dst).unwrap();
        assert_eq!(&new[20..], b"PORT 203,0,113,200,156,65\r\n");
        assert_eq!(new.len() as i32 - l4.len() as i32, out.delta);
        // Without nat: the expectation only.
        let out = inspect(&Control { nat: false, ..c }, &l4, 1000);
        assert!(out.expectation.is_some() && out.edit.is_none());
        // A third host's address is refused.
        let out = inspect(&c, &seg(b"PORT 10,0,0,99,156,65\r\n"), 1000);
        assert!(out.invalid && out.expectation.is_none());
    }

    #[test]
    fn passive_ftp_with_dnat_shrinks() {
        // Client 198.51.100.7 -> VIP 1.2.3.4:21, DNAT to server 172.16.100.200:21.
        let o = tuple(v4("198.51.100.7"), 50000, v4("1.2.3.4"), 21, TCP);
        let r = tuple(v4("172.16.100.200"), 21, v4("198.51.100.7"), 50000, TCP);
        let c = Control {
            helper: Helper::Ftp,
            orig: &o,
            reply_tuple: &r,
            id: 1,
            mark: 0,
            label: 0,
            reply: true,
            nat: true,
        };
        let l4 = seg(b"227 Entering Passive Mode (172,16,100,200,39,16).\r\n");
        let out = inspect(&c, &l4, 0);
        let e = out.expectation.unwrap();
        assert_eq!(
            (e.key.src, e.key.dst, e.key.dport),
            (o.src, o.dst, 39 * 256 + 16)
        );
        assert_eq!(e.nat.dst, Some((r.src, None)));
        let edit = out.edit.unwrap();
        assert_eq!((out.delta, out.edit_addr), (-7, o.dst));
        assert_eq!(
            &edit.apply_to(&l4, &o.dst).unwrap()[20..],
            b"227 Entering Passive Mode (1,2,3,4,39,16).\r\n"
        );
    }

    #[test]
    fn eprt_v6_with_snat() {
        let o = tuple(v6("fd00::1"), 40000, v6("2001:db8::21"), 21, TCP);
        let r = tuple(
            v6("2001:db8::21"),
            21,
            v6("2001:db8:ffff::1234:5678"),
            40000,
            TCP,
        );
        let c = Control {
            helper: Helper::Ftp,
            orig: &o,
            reply_tuple: &r,
            id: 1,
            mark: 0,
            label: 0,
            reply: false,
            nat: true,
        };
        let l4 = seg(b"EPRT |2|fd00::1|5282|\r\n");
        let out = inspect(&c, &l4, 0);
        assert_eq!(out.expectation.unwrap().key.dport, 5282);
        let new = out.edit.unwrap().apply_to(&l4, &r.dst).unwrap();
        assert_eq!(&new[20..], b"EPRT |2|2001:db8:ffff::1234:5678|5282|\r\n");
        // 229 names no address: an expectation, no edit.
        let c2 = Control { reply: true, ..c };
        let out = inspect(
            &c2,
            &seg(b"229 Entering Extended Passive Mode (|||6446|)\r\n"),
            0,
        );
        assert_eq!(out.expectation.unwrap().key.dport, 6446);
        assert_eq!(out.edit, None);
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), client: bool, six: bool) {
            let _ = parse_ftp(&bytes, client, six);
        }

        #[test]
        fn parse_never_panics_on_near_misses(
            head in prop::sample::select(vec!["PORT ", "EPRT ", "227 ", "229 ", "port "]),
            body in "[0-9,|().:a-fA-F !]{0,60}",
            end in prop::sample::select(vec!["", "\r\n", "\n", "\r"]),
            client: bool,
            six: bool,
        ) {
            let s = format!("{head}{body}{end}");
            let r = parse_ftp(s.as_bytes(), client, six);
            if let FtpParse::Found(a) = r && let Some((at, n, _)) = a.addr_text {
                prop_assert!(at + n <= s.len());
            }
        }

        #[test]
        fn port_round_trip(a: [u8; 4], port in 1u16.., cut in 0usize..40) {
            let s = format!("PORT {},{},{},{},{},{}\r\n", a[0], a[1], a[2], a[3], port >> 8, port & 0xff);
            let got = found(parse_ftp(s.as_bytes(), true, false));
            prop_assert_eq!(got.addr, Some(IpAddr::V4(Ipv4Addr::from(a))));
            prop_assert_eq!(got.port, port);
            // Cut anywhere before the line end, it is incomplete, never invalid or found.
            let cut = cut.min(s.len() - 2).max(1);
            prop_assert_eq!(parse_ftp(&s.as_bytes()[..cut], true, false), FtpParse::Incomplete);
        }

        #[test]
        fn eprt_round_trip(a: [u8; 16], port in 1u16..) {
            let ip = Ipv6Addr::from(a);
            let s = format!("EPRT |2|{ip}|{port}|\r\n");
            let got = found(parse_ftp(s.as_bytes(), true, true));
            prop_assert_eq!(got.addr, Some(IpAddr::V6(ip)));
            prop_assert_eq!(got.port, port);
        }

        /// A rewrite changes the length by `delta` and the message then names the new address
        /// and the same port.
        #[test]
        fn rewrite_round_trip(from: [u8; 4], to: [u8; 4], port in 1u16.., pasv: bool) {
            let (f, t) = (Ipv4Addr::from(from), Ipv4Addr::from(to));
            let commas = f.to_string().replace('.', ",");
            let (hi, lo) = (port >> 8, port & 0xff);
            let msg = if pasv {
                format!("227 Entering Passive Mode ({commas},{hi},{lo}).\r\n")
            } else {
                format!("PORT {commas},{hi},{lo}\r\n")
            };
            let l4 = seg(msg.as_bytes());
            let a = found(parse_ftp(&l4[20..], !pasv, false));
            let (at, n, form) = a.addr_text.unwrap();
            let e = PayloadEdit { at: (20 + at) as u16, old_len: n as u16, form };
            let to = addr_bytes(IpAddr::V4(t));
            let new = e.apply_to(&l4, &to).unwrap();
            prop_assert_eq!(new.len() as i64 - l4.len() as i64, i64::from(e.delta(&to)));
            let b = found(parse_ftp(&new[20..], !pasv, false));
            prop_assert_eq!(b.addr, Some(IpAddr::V4(t)));
            prop_assert_eq!(b.port, port);
        }
    }
}
