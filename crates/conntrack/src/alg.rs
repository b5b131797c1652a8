//! Application-layer gateways (ALGs) for FTP and TFTP: the helpers of `ct(commit,helper=ftp)`
//! and `ct(commit,helper=tftp)` (OpenFlow's `ct(alg=ftp|tftp)`), as Open vSwitch's userspace
//! conntrack has them.
//!
//! An ALG reads a *control* connection's messages to learn that a *data* connection is about to
//! start, and records an [`Expectation`] of it. The data connection's first packet finds the
//! expectation ([`Expectations::find`]) and is `+new+rel` instead of `+new`; committed, it is
//! related to its parent for its whole life: it inherits the parent's mark and label and reports
//! the parent's tuple as its original tuple, as OVS does.
//!
//! - **FTP** (RFC 959 §4.1, RFC 2428): the client's `PORT h1,h2,h3,h4,p1,p2` and
//!   `EPRT |af|addr|port|` commands (active mode: the server connects, from any port, to the
//!   client), the server's `227 ... (h1,h2,h3,h4,p1,p2)` and `229 ... (|||port|)` replies
//!   (passive mode: the client connects to the server). An expectation is keyed by the data
//!   connection's tuple without its source port ([`ExpKey`]): a server's data port is 20 by
//!   custom only, a client's is ephemeral.
//! - **NAT.** Behind NAT the address `PORT`, `EPRT` or `227` names is the untranslated one; with
//!   `ct(nat)` it is replaced by the one the peer sees ([`PayloadEdit`]). The text may change
//!   length, which shifts every later sequence number of that direction and every later
//!   acknowledgment of the other; [`SeqAdjust`] keeps the shift per direction and the sequence
//!   number where it starts.
//! - **TFTP** (RFC 1350 §4): the server answers a request from a port of its own choosing to the
//!   client's port, so a request expects the answer from any source port.
//!
//! The module decides and the caller applies: [`inspect`] reads one segment and returns what to
//! record and what to rewrite ([`AlgOutcome`]); the connection table keeps the [`Expectations`]
//! and each connection's [`SeqAdjust`], and hands the rewrite ([`AlgRewrite`]) to the datapath
//! with the NAT rewrite. Nothing here allocates per packet except an expectation's insertion.
//!
//! Differences from OVS:
//! - An expectation is used once (taken when its data connection is committed), and expires
//!   after [`EXPECT_TIMEOUT_MS`] or when its parent goes; OVS keeps it until the parent goes.
//!   The table is bounded ([`DEFAULT_MAX_EXPECTATIONS`] in all, refusals counted) and so is a
//!   parent's share ([`MAX_PER_PARENT`], the oldest is dropped), which OVS does not bound.
//! - A message must be a whole line (ending in LF) within one segment; a message split across
//!   segments is ignored ([`AlgCounter::Incomplete`]), where OVS parses the fragment it has and
//!   may call the packet invalid. Commands are read from the client and replies from the server
//!   only, on any line of the segment (OVS: the first line, from either side).
//! - `EPRT |1|` is rewritten in dotted notation (OVS writes commas there).
//! - Sequence adjustment per direction with a start point (Linux's `nf_ct_seqadj`), where OVS
//!   keeps one shift for the last direction that changed and applies it to every later packet.
//!   SACK blocks are not adjusted (neither does OVS).
//! - A parent translated both ways (SNAT and DNAT) gives its data connection both translations;
//!   OVS only the destination one. A TFTP answer is expected at the client's *translated* port
//!   and translated back to its own (OVS expects the untranslated port).

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use crate::key::{TCP, Tuple, UDP};

/// Which ALG serves a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Helper {
    Ftp = 1,
    Tftp = 2,
}

impl Helper {
    /// The helper named `name` in `ct(helper=...)`.
    pub fn from_name(name: &str) -> Option<Helper> {
        match name {
            "ftp" => Some(Helper::Ftp),
            "tftp" => Some(Helper::Tftp),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Helper::Ftp => "ftp",
            Helper::Tftp => "tftp",
        }
    }

    /// The IP protocol of the connections it serves; a commit of another protocol's connection
    /// with this helper gets none (as OVS's `ct_verify_helper`).
    pub fn proto(self) -> u8 {
        match self {
            Helper::Ftp => TCP,
            Helper::Tftp => UDP,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// FTP messages
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Payload rewrite
// ---------------------------------------------------------------------------------------------

/// Longest address text an edit writes (a full IPv6 address, RFC 5952).
pub const MAX_ADDR_TEXT: usize = 39;

/// A rewrite of the address text in a segment's payload, for NAT: the `old_len` bytes at `at`
/// (from the start of the L4 header) become, in notation `form`, the address the peer sees,
/// which is always the packet's *translated source address* (an announcement names its
/// sender; [`inspect`] asks for an edit only when that address is translated). It is not
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

// ---------------------------------------------------------------------------------------------
// Sequence adjustment
// ---------------------------------------------------------------------------------------------

/// `a` comes after `b` in sequence space (RFC 9293 §3.4, modulo 2^32).
#[inline]
fn seq_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// The shift of one direction's sequence numbers: segments that start after `pos` (as their
/// sender numbers them) move by `after`, earlier ones (retransmissions) by `before`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqShift {
    pub pos: u32,
    pub before: i32,
    pub after: i32,
}

/// The sequence adjustment of a connection whose payload an ALG resized: a [`SeqShift`] per
/// direction (`[original, reply]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqAdjust {
    pub dir: [SeqShift; 2],
}

impl SeqAdjust {
    /// Nothing to adjust.
    #[inline]
    pub fn is_zero(&self) -> bool {
        self.dir.iter().all(|s| s.before == 0 && s.after == 0)
    }

    /// Records that the segment of direction `reply` starting at `seq` (its sender's number)
    /// grew by `delta` bytes. A retransmission of the segment last resized, or of one before it,
    /// changes nothing (its resize is already counted).
    pub fn record(&mut self, reply: bool, seq: u32, delta: i32) {
        let s = &mut self.dir[usize::from(reply)];
        if delta == 0 {
            return;
        }
        if s.before == s.after || seq_after(seq, s.pos) {
            s.pos = seq;
            s.before = s.after;
            s.after = s.after.wrapping_add(delta);
        }
    }

    /// What to add to the sequence number `seq` of a segment of direction `reply`.
    #[inline]
    pub fn seq_offset(&self, reply: bool, seq: u32) -> i32 {
        let s = &self.dir[usize::from(reply)];
        if seq_after(seq, s.pos) {
            s.after
        } else {
            s.before
        }
    }

    /// What to add to the acknowledgment number `ack` of a segment of direction `reply`, which
    /// acknowledges the other direction's shifted numbers: the shift taken back.
    #[inline]
    pub fn ack_offset(&self, reply: bool, ack: u32) -> i32 {
        let s = &self.dir[usize::from(!reply)];
        let off = if seq_after(ack.wrapping_add_signed(s.before.wrapping_neg()), s.pos) {
            s.after
        } else {
            s.before
        };
        off.wrapping_neg()
    }

    /// The sender's sequence number of a segment of direction `reply` already shifted (seen
    /// again after an earlier `ct(nat)` applied the adjustment).
    #[inline]
    pub fn unshift_seq(&self, reply: bool, shifted: u32) -> u32 {
        let s = &self.dir[usize::from(reply)];
        let off = if seq_after(shifted.wrapping_add_signed(s.before.wrapping_neg()), s.pos) {
            s.after
        } else {
            s.before
        };
        shifted.wrapping_add_signed(off.wrapping_neg())
    }
}

/// What the datapath does to a TCP segment of an ALG connection under NAT: replace the address
/// text with the packet's translated source address ([`PayloadEdit`]), then add `seq` and
/// `ack` to the sequence and acknowledgment numbers. 16 bytes: it rides in every NAT rewrite.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlgRewrite {
    pub payload: Option<PayloadEdit>,
    pub seq: i32,
    pub ack: i32,
}

const _: () = assert!(core::mem::size_of::<Option<AlgRewrite>>() <= 16);

/// What an ALG keeps per connection (behind the connection's lock): the parent's original tuple
/// for a related connection, and the sequence adjustment of a control connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnAlg {
    pub parent: Option<Tuple>,
    pub adj: SeqAdjust,
}

// ---------------------------------------------------------------------------------------------
// Expectations
// ---------------------------------------------------------------------------------------------

/// How long an unused expectation lives (Linux's FTP and TFTP helpers: 5 minutes).
pub const EXPECT_TIMEOUT_MS: u64 = 300_000;

/// Default bound of the expectation table.
pub const DEFAULT_MAX_EXPECTATIONS: usize = 4096;

/// Expectations one parent may have pending; a new one beyond drops the parent's oldest.
pub const MAX_PER_PARENT: usize = 8;

/// What a data connection's first packet looks like: its tuple without the source port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExpKey {
    pub zone: u16,
    pub v6: bool,
    pub proto: u8,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub dport: u16,
}

impl ExpKey {
    /// The key a packet of tuple `t` would find.
    pub fn of(t: &Tuple) -> ExpKey {
        ExpKey {
            zone: t.zone,
            v6: t.v6,
            proto: t.proto,
            src: t.src,
            dst: t.dst,
            dport: t.dport,
        }
    }
}

/// An address (and, when it moves, port) a data connection's side is translated to.
pub type NatTo = ([u8; 16], Option<u16>);

/// The translation a data connection gets when committed with `nat`: the counterpart of its
/// parent's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpNat {
    /// Its source becomes this (its reply's destination).
    pub src: Option<NatTo>,
    /// Its destination becomes this (its reply's source).
    pub dst: Option<NatTo>,
}

/// A data connection an ALG expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub key: ExpKey,
    /// The parent's original tuple (a related connection's `ct_orig_tuple`), id, mark, label.
    pub parent: Tuple,
    pub parent_id: u32,
    pub mark: u32,
    pub label: u128,
    pub helper: Helper,
    pub nat: ExpNat,
    /// Expiry on [`crate::now_ms`]'s clock.
    pub expires: u64,
}

impl Expectation {
    /// The reply tuple of the data connection whose first packet has tuple `t`, when committed
    /// with `nat`.
    pub fn nat_reply(&self, t: &Tuple) -> Tuple {
        let mut r = t.reverse();
        if let Some((a, p)) = self.nat.dst {
            r.src = a;
            if let Some(p) = p {
                r.sport = p;
            }
        }
        if let Some((a, p)) = self.nat.src {
            r.dst = a;
            if let Some(p) = p {
                r.dport = p;
            }
        }
        r
    }
}

/// Counters of the ALGs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum AlgCounter {
    /// Expectations recorded.
    Created,
    /// An announcement repeated for a pending expectation (its expiry moved).
    Refreshed,
    /// Expectations a committed data connection used.
    Used,
    /// Expectations refused: the table was full.
    Refused,
    /// Pending expectations dropped for a newer one of the same parent.
    Evicted,
    /// Expectations that were never used.
    Expired,
    /// Expectations dropped because their parent went.
    Orphaned,
    /// Malformed announcements (packet `+inv`).
    BadMessage,
    /// Announcements cut by a segment boundary (ignored).
    Incomplete,
}

impl AlgCounter {
    pub const COUNT: usize = 9;
    pub const ALL: [AlgCounter; Self::COUNT] = [
        AlgCounter::Created,
        AlgCounter::Refreshed,
        AlgCounter::Used,
        AlgCounter::Refused,
        AlgCounter::Evicted,
        AlgCounter::Expired,
        AlgCounter::Orphaned,
        AlgCounter::BadMessage,
        AlgCounter::Incomplete,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AlgCounter::Created => "alg_exp_created",
            AlgCounter::Refreshed => "alg_exp_refreshed",
            AlgCounter::Used => "alg_exp_used",
            AlgCounter::Refused => "alg_exp_refused",
            AlgCounter::Evicted => "alg_exp_evicted",
            AlgCounter::Expired => "alg_exp_expired",
            AlgCounter::Orphaned => "alg_exp_orphaned",
            AlgCounter::BadMessage => "alg_bad_message",
            AlgCounter::Incomplete => "alg_incomplete",
        }
    }
}

/// A snapshot of the ALG counters and the expectations pending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlgStats {
    /// By [`AlgCounter::ALL`] order.
    pub counts: [u64; AlgCounter::COUNT],
    pub pending: usize,
}

impl AlgStats {
    pub fn get(&self, c: AlgCounter) -> u64 {
        self.counts[c as usize]
    }
}

/// What [`Expectations::insert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    New,
    /// The same parent's pending expectation of the key was refreshed.
    Refreshed,
    /// Another parent's expectation holds the key; it is kept (as OVS does).
    Taken,
    /// The table is full.
    Refused,
}

#[derive(Default)]
struct ExpTable {
    map: HashMap<ExpKey, Expectation>,
    /// Each parent's pending keys, oldest first.
    by_parent: HashMap<u32, Vec<ExpKey>>,
}

impl ExpTable {
    fn unlink(&mut self, e: &Expectation) {
        if let Some(v) = self.by_parent.get_mut(&e.parent_id) {
            v.retain(|k| *k != e.key);
            if v.is_empty() {
                self.by_parent.remove(&e.parent_id);
            }
        }
    }

    fn remove(&mut self, key: &ExpKey) -> Option<Expectation> {
        let e = self.map.remove(key)?;
        self.unlink(&e);
        Some(e)
    }
}

/// The expectation table, shared by all threads. A lookup of a new connection's tuple costs
/// one relaxed load while the table is empty (the usual case); otherwise a read lock, taken
/// only on the path of packets that start connections.
pub struct Expectations {
    max: AtomicUsize,
    len: AtomicUsize,
    table: RwLock<ExpTable>,
    counters: [AtomicU64; AlgCounter::COUNT],
}

impl Default for Expectations {
    fn default() -> Self {
        Self::new()
    }
}

impl Expectations {
    pub fn new() -> Expectations {
        Expectations {
            max: AtomicUsize::new(DEFAULT_MAX_EXPECTATIONS),
            len: AtomicUsize::new(0),
            table: RwLock::new(ExpTable::default()),
            counters: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Changes the bound (pending expectations over it stay until used or expired).
    pub fn set_max(&self, n: usize) {
        self.max.store(n, Relaxed);
    }

    pub fn max(&self) -> usize {
        self.max.load(Relaxed)
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len.load(Relaxed) == 0
    }

    pub fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    pub fn count(&self, c: AlgCounter) {
        self.counters[c as usize].fetch_add(1, Relaxed);
    }

    fn sync_len(&self, t: &ExpTable) {
        self.len.store(t.map.len(), Relaxed);
    }

    /// Records `e`, within the bounds.
    pub fn insert(&self, e: Expectation, now: u64) -> Inserted {
        let mut t = self.table.write().unwrap();
        if let Some(old) = t.map.get_mut(&e.key) {
            if old.parent_id == e.parent_id && old.parent == e.parent {
                *old = e;
                self.count(AlgCounter::Refreshed);
                return Inserted::Refreshed;
            }
            if old.expires > now {
                return Inserted::Taken;
            }
            let old = *old;
            t.remove(&old.key);
            self.count(AlgCounter::Expired);
        }
        if t.map.len() >= self.max.load(Relaxed) {
            // Full: make room from the expired first.
            let dead: Vec<ExpKey> = t
                .map
                .values()
                .filter(|x| x.expires <= now)
                .map(|x| x.key)
                .collect();
            for k in &dead {
                t.remove(k);
                self.count(AlgCounter::Expired);
            }
            if t.map.len() >= self.max.load(Relaxed) {
                self.sync_len(&t);
                self.count(AlgCounter::Refused);
                return Inserted::Refused;
            }
        }
        let mine = t.by_parent.entry(e.parent_id).or_default();
        mine.push(e.key);
        let oldest = (mine.len() > MAX_PER_PARENT).then(|| mine[0]);
        if let Some(k) = oldest {
            t.remove(&k);
            self.count(AlgCounter::Evicted);
        }
        t.map.insert(e.key, e);
        self.sync_len(&t);
        self.count(AlgCounter::Created);
        Inserted::New
    }

    /// The pending expectation a packet of tuple `t` finds (a copy; it stays pending).
    #[inline]
    pub fn find(&self, t: &Tuple, now: u64) -> Option<Expectation> {
        if self.is_empty() {
            return None;
        }
        let tb = self.table.read().unwrap();
        tb.map
            .get(&ExpKey::of(t))
            .filter(|e| e.expires > now)
            .copied()
    }

    /// Takes the expectation a packet of tuple `t` finds out of the table: its data connection
    /// is committed.
    pub fn take_for(&self, t: &Tuple, now: u64) -> Option<Expectation> {
        if self.is_empty() {
            return None;
        }
        let mut tb = self.table.write().unwrap();
        let e = tb.remove(&ExpKey::of(t));
        self.sync_len(&tb);
        match e {
            Some(e) if e.expires > now => {
                self.count(AlgCounter::Used);
                Some(e)
            }
            Some(_) => {
                self.count(AlgCounter::Expired);
                None
            }
            None => None,
        }
    }

    /// Drops the expectations of parent `id` (it went); returns how many.
    pub fn remove_parent(&self, id: u32) -> usize {
        if self.is_empty() {
            return 0;
        }
        let mut t = self.table.write().unwrap();
        let keys = t.by_parent.remove(&id).unwrap_or_default();
        for k in &keys {
            t.map.remove(k);
            self.count(AlgCounter::Orphaned);
        }
        self.sync_len(&t);
        keys.len()
    }

    /// Drops the expired expectations and those whose parent is gone (`parent_alive` false);
    /// returns how many. `parent_alive` is called without the table's lock held, so it may
    /// take the connection table's locks.
    pub fn sweep(&self, now: u64, parent_alive: impl Fn(&Expectation) -> bool) -> usize {
        if self.is_empty() {
            return 0;
        }
        let (mut n, live) = {
            let mut t = self.table.write().unwrap();
            let dead: Vec<ExpKey> = t
                .map
                .values()
                .filter(|e| e.expires <= now)
                .map(|e| e.key)
                .collect();
            for k in &dead {
                t.remove(k);
                self.count(AlgCounter::Expired);
            }
            self.sync_len(&t);
            let live: Vec<Expectation> = t.map.values().copied().collect();
            (dead.len(), live)
        };
        let orphans: Vec<Expectation> = live.into_iter().filter(|e| !parent_alive(e)).collect();
        if orphans.is_empty() {
            return n;
        }
        let mut t = self.table.write().unwrap();
        for e in &orphans {
            // Unless another parent's took the key meanwhile.
            if t.map
                .get(&e.key)
                .is_some_and(|x| x.parent_id == e.parent_id)
            {
                t.remove(&e.key);
                self.count(AlgCounter::Orphaned);
                n += 1;
            }
        }
        self.sync_len(&t);
        n
    }

    /// The pending expectations, ordered by key.
    pub fn list(&self) -> Vec<Expectation> {
        let t = self.table.read().unwrap();
        let mut v: Vec<Expectation> = t.map.values().copied().collect();
        v.sort_by_key(|e| {
            (
                e.key.zone,
                e.key.v6,
                e.key.proto,
                e.key.src,
                e.key.dst,
                e.key.dport,
            )
        });
        v
    }

    pub fn stats(&self) -> AlgStats {
        AlgStats {
            counts: std::array::from_fn(|i| self.counters[i].load(Relaxed)),
            pending: self.len(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Inspection
// ---------------------------------------------------------------------------------------------

/// A packet of a connection that has a helper, as [`inspect`] sees it.
#[derive(Clone, Copy, Debug)]
pub struct Control<'a> {
    pub helper: Helper,
    /// The connection's original tuple and reply tuple (after NAT).
    pub orig: &'a Tuple,
    pub reply_tuple: &'a Tuple,
    /// The connection's id, mark and label, which its expectations keep.
    pub id: u32,
    pub mark: u32,
    pub label: u128,
    /// The packet travels in the reply direction.
    pub reply: bool,
    /// Rewrite the address an announcement names (the `ct()` has `nat` and the connection is
    /// translated).
    pub nat: bool,
}

impl Control<'_> {
    /// The connection's source side is translated.
    fn snat(&self) -> bool {
        self.reply_tuple.dst != self.orig.src || self.reply_tuple.dport != self.orig.sport
    }

    /// Its destination side is translated.
    fn dnat(&self) -> bool {
        self.reply_tuple.src != self.orig.dst || self.reply_tuple.sport != self.orig.dport
    }

    fn expectation(&self, key: ExpKey, nat: ExpNat, now: u64) -> Expectation {
        Expectation {
            key,
            parent: *self.orig,
            parent_id: self.id,
            mark: self.mark,
            label: self.label,
            helper: self.helper,
            nat,
            expires: now + EXPECT_TIMEOUT_MS,
        }
    }
}

/// What [`inspect`] found in a segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlgOutcome {
    /// A malformed announcement: the packet is `+inv`.
    pub invalid: bool,
    /// An announcement cut by the segment's end (nothing recorded).
    pub incomplete: bool,
    /// The data connection to expect.
    pub expectation: Option<Expectation>,
    /// The rewrite of the announcement's address for NAT, when asked and the text changes;
    /// the new text is `edit_addr`'s, `delta` bytes longer than the old.
    pub edit: Option<PayloadEdit>,
    pub edit_addr: [u8; 16],
    pub delta: i32,
}

fn addr_bytes(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v) => {
            let mut b = [0; 16];
            b[..4].copy_from_slice(&v.octets());
            b
        }
        IpAddr::V6(v) => v.octets(),
    }
}

/// Reads a segment of a connection with a helper: `l4` is its L4 header and payload (to the end
/// of the IP datagram). For FTP, an announcement gives an expectation and, under NAT, a payload
/// edit; for TFTP, a packet of the request's direction expects the server's answer.
pub fn inspect(c: &Control<'_>, l4: &[u8], now: u64) -> AlgOutcome {
    let mut out = AlgOutcome::default();
    let (o, r) = (c.orig, c.reply_tuple);
    match c.helper {
        Helper::Tftp => {
            if c.reply || o.proto != UDP {
                return out;
            }
            // The answer: from the server, any port, to the client as the server sees it.
            let key = ExpKey::of(r);
            let mut nat = ExpNat::default();
            if c.snat() {
                nat.dst = Some((o.src, (r.dport != o.sport).then_some(o.sport)));
            }
            if c.dnat() {
                nat.src = Some((o.dst, None));
            }
            out.expectation = Some(c.expectation(key, nat, now));
        }
        Helper::Ftp => {
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
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4(s: &str) -> [u8; 16] {
        addr_bytes(IpAddr::V4(s.parse().unwrap()))
    }

    fn v6(s: &str) -> [u8; 16] {
        addr_bytes(IpAddr::V6(s.parse().unwrap()))
    }

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

    fn tuple(src: [u8; 16], sport: u16, dst: [u8; 16], dport: u16, proto: u8) -> Tuple {
        Tuple {
            src,
            dst,
            sport,
            dport,
            proto,
            v6: src[4..] != [0; 12],
            zone: 3,
            ..Tuple::default()
        }
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

    #[test]
    fn tftp_expects_answer_at_translated_port() {
        let o = tuple(v4("10.0.0.1"), 1069, v4("192.0.2.9"), 69, UDP);
        let r = tuple(v4("192.0.2.9"), 69, v4("203.0.113.1"), 2000, UDP);
        let c = Control {
            helper: Helper::Tftp,
            orig: &o,
            reply_tuple: &r,
            id: 1,
            mark: 0,
            label: 0,
            reply: false,
            nat: true,
        };
        let e = inspect(&c, &[0; 8], 0).expectation.unwrap();
        assert_eq!((e.key.src, e.key.dst, e.key.dport), (r.src, r.dst, 2000));
        assert_eq!(e.nat.dst, Some((o.src, Some(1069))));
        // The server's answer from port 3333 is translated back to the client's port.
        let answer = tuple(v4("192.0.2.9"), 3333, v4("203.0.113.1"), 2000, UDP);
        assert_eq!(ExpKey::of(&answer), e.key);
        let rr = e.nat_reply(&answer);
        assert_eq!(
            (rr.src, rr.sport, rr.dst, rr.dport),
            (o.src, 1069, v4("192.0.2.9"), 3333)
        );
        // Nothing from the server's side.
        assert!(
            inspect(&Control { reply: true, ..c }, &[0; 8], 0)
                .expectation
                .is_none()
        );
    }

    fn exp(parent_id: u32, dport: u16, expires: u64) -> Expectation {
        let o = tuple(
            v4("10.0.0.1"),
            40000 + parent_id as u16,
            v4("192.0.2.9"),
            21,
            TCP,
        );
        Expectation {
            key: ExpKey {
                dport,
                ..ExpKey::of(&o)
            },
            parent: o,
            parent_id,
            mark: 0,
            label: 0,
            helper: Helper::Ftp,
            nat: ExpNat::default(),
            expires,
        }
    }

    #[test]
    fn table_bounds_and_lifetime() {
        let x = Expectations::new();
        assert!(x.is_empty());
        x.set_max(10);
        // One parent's share is bounded: the oldest goes.
        for p in 0..(MAX_PER_PARENT as u16 + 2) {
            assert_eq!(x.insert(exp(1, 1000 + p, 100), 0), Inserted::New);
        }
        assert_eq!(x.len(), MAX_PER_PARENT);
        assert_eq!(x.stats().get(AlgCounter::Evicted), 2);
        // The same announcement again refreshes (and moves the expiry).
        assert_eq!(x.insert(exp(1, 1009, 200), 0), Inserted::Refreshed);
        // Another parent cannot take a pending key.
        assert_eq!(x.insert(exp(2, 1009, 100), 0), Inserted::Taken);
        // The table's bound refuses.
        assert_eq!(x.insert(exp(2, 1, 100), 0), Inserted::New);
        assert_eq!(x.insert(exp(2, 2, 100), 0), Inserted::New);
        assert_eq!(x.len(), 10);
        assert_eq!(x.insert(exp(3, 3, 100), 0), Inserted::Refused);
        assert_eq!(x.stats().get(AlgCounter::Refused), 1);
        // ... unless some have expired: all but 1009 have at 150.
        assert_eq!(x.insert(exp(3, 3, 300), 150), Inserted::New);
        assert_eq!(x.len(), 2);
        assert_eq!(x.stats().get(AlgCounter::Expired), 9);
        // Lookups: find keeps, take_for removes; the source port is not looked at.
        let data = |dport| Tuple {
            sport: 20,
            dport,
            ..exp(1, 0, 0).parent
        };
        assert_eq!(x.find(&data(1009), 150).map(|e| e.parent_id), Some(1));
        assert_eq!(
            x.find(
                &Tuple {
                    sport: 33,
                    ..data(1009)
                },
                150
            )
            .map(|e| e.parent_id),
            Some(1)
        );
        assert!(x.find(&data(1009), 200).is_none(), "expired");
        assert!(x.take_for(&data(1009), 150).is_some());
        assert!(x.find(&data(1009), 150).is_none());
        assert_eq!(x.stats().get(AlgCounter::Used), 1);
        // A parent's going drops its expectations; sweep drops expired ones and orphans.
        assert_eq!(x.insert(exp(4, 4, 300), 150), Inserted::New);
        assert_eq!(x.insert(exp(5, 5, 300), 150), Inserted::New);
        assert_eq!(x.remove_parent(3), 1);
        assert_eq!(x.sweep(150, |e| e.parent_id != 4), 1);
        assert_eq!(
            x.list().iter().map(|e| e.parent_id).collect::<Vec<_>>(),
            [5]
        );
        assert_eq!(x.sweep(300, |_| true), 1);
        assert!(x.is_empty());
        assert_eq!(x.stats().get(AlgCounter::Orphaned), 2);
    }

    #[test]
    fn seq_adjust_basic() {
        let mut a = SeqAdjust::default();
        assert!(a.is_zero());
        // The client's PORT at seq 1000 (20 bytes) grew by 5.
        a.record(false, 1000, 5);
        assert_eq!(
            a.seq_offset(false, 1000),
            0,
            "the resized segment keeps its number"
        );
        assert_eq!(a.seq_offset(false, 1020), 5);
        assert_eq!(a.seq_offset(false, 900), 0, "an earlier retransmission");
        // The server acknowledges 1025 (translated): 1020 for the client.
        assert_eq!(a.ack_offset(true, 1025), -5);
        assert_eq!(a.ack_offset(true, 1000), 0);
        // A retransmitted PORT does not count twice.
        a.record(false, 1000, 5);
        assert_eq!(a.seq_offset(false, 1020), 5);
        // A second PORT later shrinks by 2.
        a.record(false, 2000, -2);
        assert_eq!(a.seq_offset(false, 2000), 5);
        assert_eq!(a.seq_offset(false, 2020), 3);
        assert_eq!(a.ack_offset(true, 2025), -3);
        assert_eq!(a.unshift_seq(false, 2023), 2020);
        assert_eq!(a.seq_offset(true, 5), 0);
    }

    #[test]
    fn seq_adjust_wraps() {
        let mut a = SeqAdjust::default();
        let pos = u32::MAX - 10;
        a.record(true, pos, 7);
        let later = pos.wrapping_add(30); // wrapped past zero
        assert_eq!(a.seq_offset(true, later), 7);
        assert_eq!(a.ack_offset(false, later.wrapping_add(7)), -7);
        assert_eq!(a.unshift_seq(true, later.wrapping_add(7)), later);
        assert_eq!(a.seq_offset(true, pos.wrapping_sub(100)), 0);
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

        /// Shifting then unshifting gives the sender's number back, and an acknowledgment of
        /// shifted data maps to the sender's numbering, across wraparound.
        #[test]
        fn seq_adjust_inverse(pos: u32, d1 in -20i32..20, d2 in -20i32..20, gap in 100u32..1_000_000, len in 30u32..60, k in 0u32..10_000) {
            let mut a = SeqAdjust::default();
            a.record(false, pos, d1);
            let pos2 = pos.wrapping_add(gap);
            a.record(false, pos2, d2);
            // A segment after the second resize.
            let seq = pos2.wrapping_add(len).wrapping_add(k);
            let shifted = seq.wrapping_add_signed(a.seq_offset(false, seq));
            prop_assert_eq!(shifted, seq.wrapping_add_signed(d1 + d2));
            prop_assert_eq!(a.unshift_seq(false, shifted), seq);
            prop_assert_eq!(shifted.wrapping_add_signed(a.ack_offset(true, shifted)), seq);
            // A segment between the two resizes.
            let mid = pos.wrapping_add(len).wrapping_add(k % (gap - len));
            let s2 = mid.wrapping_add_signed(a.seq_offset(false, mid));
            prop_assert_eq!(s2, mid.wrapping_add_signed(d1));
            prop_assert_eq!(a.unshift_seq(false, s2), mid);
        }
    }
}
