//! The stream file: which ports the generator uses and what it sends on them (TOML).
//!
//! ```toml
//! duration = 10                 # seconds, default 10
//!
//! [[port]]                      # name, type and options as flowpath's [[bridge.port]]
//! name = "p0"
//! type = "afpacket"
//! options = { interface = "veth0" }
//!
//! [[stream]]
//! name = "geneve"
//! tx = "p0"                     # the port it is sent on
//! rx = "p1"                     # where it is expected back (default: tx)
//! direction = "uni"             # or "bi": also NAME.rev, reversed, from rx to tx
//! flows = 1000                  # default 1
//! frame_size = 128              # FCS included; or "imix", or [64, 128, 1518] in turn
//! rate = "1.5Mpps"              # "800kpps", "1000pps" (or 1000), "max" (default), "50%"
//!                               # (of line_rate), "2.5Gbps" (L1: 20 B preamble and gap
//!                               # counted, as the FCS is in the frame size)
//! line_rate = "10Gbps"          # for % rates (or a number of bits per second)
//! stamp = true                  # default true: the last 16 bytes are the stamp
//! seed = 1                      # of random variation
//! layers = [                    # or hex = "..." (a whole frame), or pcap = "f.pcap"
//!   { type = "eth", src = "ec:0d:9a:44:2c:f5", dst = "3c:fd:fe:ee:4a:2c" },
//!   { type = "vlan", vid = 177 },
//!   { type = "ipv4", src = "172.17.2.160", dst = "172.17.2.60" },
//!   { type = "udp", sport = 57025 },
//!   { type = "geneve", vni = 3, options = [ { class = 0x0102, type = 0x80, data = "00030002" } ] },
//!   { type = "eth", src = "fa:16:3e:e4:0a:cf", dst = "fa:16:3e:20:ab:56" },
//!   { type = "ipv4", src = "192.168.1.61", dst = "192.168.1.16" },
//!   { type = "udp", sport = 1024, dport = 2000 },
//! ]
//! vary = [
//!   { field = "udp[1].sport", op = "inc", from = 1024, to = 2023 },
//!   { field = "ipv4[1].src", op = "random", from = "192.168.1.1", to = "192.168.1.254" },
//! ]
//! ```
//!
//! Layer keys (all optional; what is left out is derived or takes scapy's default, see
//! [`crate::build`]): `eth` src, dst, ethertype; `vlan` vid, pcp, dei, tpid (0x8100, 0x88a8),
//! ethertype; `ipv4` src, dst, ttl, tos, id, df, proto; `ipv6` src, dst, hlim, tc, fl, nh;
//! `udp` sport, dport, checksum; `tcp` sport, dport, seq, ack, flags ("SA" or a number),
//! window; `vxlan` vni; `geneve` vni, critical, oam, protocol, options (class, type, data in
//! hex); `gre` key, checksum, protocol; `mpls` label, tc, ttl. Variation: `field`
//! (`LAYER[INDEX].FIELD`), `op` (`inc`, the default, or `random`), `from`, `to`, `step`.
//!
//! Every problem is reported with its line and key; unknown keys are errors.

use std::fmt;
use std::ops::Range;
use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::build::{
    self, BuildError, Eth, FieldRef, FrameSet, FrameSize, FrameSpec, Geneve, Gre, Ipv4, Ipv6,
    Layer, LayerKind, Mpls, Tcp, Template, Udp, Vary, VaryOp, Vlan, Vxlan,
};

/// A parsed and compiled stream file.
#[derive(Clone, Debug)]
pub struct StreamFile {
    /// Sending time in seconds.
    pub duration: f64,
    /// The ports the streams use, in file order.
    pub ports: Vec<PortDecl>,
    /// The streams; a `bi` stream is two, `NAME` and `NAME.rev`.
    pub streams: Vec<Stream>,
}

/// A `[[port]]`.
#[derive(Clone, Debug)]
pub struct PortDecl {
    /// Port name, as streams name it.
    pub name: String,
    /// Port type (any of flowpath's).
    pub kind: String,
    /// Type-specific options.
    pub options: toml::Table,
    /// Line of the `[[port]]` table.
    pub line: usize,
}

/// One stream, compiled.
#[derive(Clone, Debug)]
pub struct Stream {
    /// Name (`NAME.rev` for the reverse of a `bi` stream).
    pub name: String,
    /// Its position in [`StreamFile::streams`]; stamps carry it.
    pub id: u16,
    /// Port it is sent on.
    pub tx: String,
    /// Port it is expected back on.
    pub rx: String,
    /// Sending rate.
    pub rate: Rate,
    /// Its frames.
    pub frames: FrameSet,
}

/// A sending rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// As fast as the port takes.
    Max,
    /// Packets per second.
    Pps(f64),
    /// Bits per second on the wire at layer 1: each frame counts its size (FCS included) plus
    /// 20 bytes of preamble and inter-frame gap. A percentage of `line_rate` becomes this.
    L1Bps(f64),
}

/// A problem in a stream file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamError {
    /// Line (from 1).
    pub line: usize,
    /// The key, as a path within its table (`rate`, `layers[2].vid`, `vary[0].field`); empty
    /// for syntax errors.
    pub key: String,
    /// What is wrong.
    pub message: String,
    /// The table it is in (`stream "geneve"`, `port "p0"`); empty at the top level.
    pub within: String,
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: ", self.line)?;
        if !self.within.is_empty() {
            write!(f, "{} ", self.within)?;
        }
        if !self.key.is_empty() {
            write!(f, "key \"{}\": ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for StreamError {}

/// Most streams a file can have (stamps name them with 16 bits).
pub const MAX_STREAMS: usize = 1 << 16;

/// Reads a rate: `max`, `N[k|M|G]pps`, `N[k|M|G|T]bps` (L1), `N%` of `line_rate` (bits per
/// second), or a bare number of packets per second.
pub fn parse_rate(s: &str, line_rate: Option<f64>) -> Result<Rate, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("max") {
        return Ok(Rate::Max);
    }
    if let Some(p) = t.strip_suffix('%') {
        let p: f64 = p
            .trim()
            .parse()
            .ok()
            .filter(|p: &f64| *p > 0.0 && *p <= 100.0)
            .ok_or_else(|| format!("'{s}': expected a percentage above 0 and at most 100"))?;
        let lr = line_rate.ok_or_else(|| format!("'{s}': a percentage needs line_rate"))?;
        return Ok(Rate::L1Bps(lr * p / 100.0));
    }
    let (v, unit) = number_unit(t).ok_or_else(|| rate_expected(s))?;
    let unit_l = unit.to_ascii_lowercase();
    let (scale, base) = match unit_l.as_str() {
        "" | "pps" => (1.0, "pps"),
        "kpps" => (1e3, "pps"),
        "mpps" => (1e6, "pps"),
        "gpps" => (1e9, "pps"),
        "bps" => (1.0, "bps"),
        "kbps" => (1e3, "bps"),
        "mbps" => (1e6, "bps"),
        "gbps" => (1e9, "bps"),
        "tbps" => (1e12, "bps"),
        _ => return Err(rate_expected(s)),
    };
    let v = v * scale;
    Ok(if base == "pps" {
        Rate::Pps(v)
    } else {
        Rate::L1Bps(v)
    })
}

fn rate_expected(s: &str) -> String {
    format!(
        "'{s}': expected a rate such as \"1.5Mpps\", \"800kpps\", \"1000pps\", \"2.5Gbps\", \
         \"50%\" or \"max\""
    )
}

/// A positive number and the letters after it (`"2.5 Gbps"` → (2.5, "Gbps")).
fn number_unit(t: &str) -> Option<(f64, &str)> {
    let split = t.len()
        - t.bytes()
            .rev()
            .take_while(|b| b.is_ascii_alphabetic())
            .count();
    let (n, unit) = t.split_at(split);
    let v: f64 = n.trim().parse().ok()?;
    (v.is_finite() && v > 0.0).then_some((v, unit))
}

/// Reads a bit rate (`10Gbps`, `25 Gbps`, `100Mbps`).
pub fn parse_bps(s: &str) -> Result<f64, String> {
    match parse_rate(s, None) {
        Ok(Rate::L1Bps(b)) => Ok(b),
        _ => Err(format!("'{s}': expected a bit rate such as \"10Gbps\"")),
    }
}

// --- reading the TOML --------------------------------------------------------------------------

type Val<'i> = Spanned<DeValue<'i>>;

/// Errors found so far, and the text to find their lines in.
struct Sink<'t> {
    text: &'t str,
    errs: Vec<StreamError>,
}

impl Sink<'_> {
    fn line(&self, span: &Range<usize>) -> usize {
        line_of(self.text, span.start)
    }

    fn push(&mut self, line: usize, within: &str, key: String, message: impl Into<String>) {
        self.errs.push(StreamError {
            line,
            key,
            message: message.into(),
            within: within.to_string(),
        });
    }
}

/// Line (from 1) of byte offset `ofs`.
fn line_of(text: &str, ofs: usize) -> usize {
    text.as_bytes()[..ofs.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A table being read: where it is, and the path its keys are named under.
struct Tab<'a, 'i> {
    t: &'a DeTable<'i>,
    line: usize,
    path: String,
    within: String,
}

/// `Err(())`: the problem is already reported.
type R<T> = Result<T, ()>;

impl<'a, 'i> Tab<'a, 'i> {
    fn get(&self, k: &str) -> Option<&'a Val<'i>> {
        self.t
            .iter()
            .find(|(key, _)| key.get_ref().as_ref() == k)
            .map(|(_, v)| v)
    }

    fn key(&self, k: &str) -> String {
        if self.path.is_empty() {
            k.to_string()
        } else {
            format!("{}.{k}", self.path)
        }
    }

    /// Line of key `k`'s value, or of the table.
    fn line_of(&self, s: &Sink, k: &str) -> usize {
        self.get(k).map_or(self.line, |v| s.line(&v.span()))
    }

    fn err(&self, s: &mut Sink, k: &str, message: impl Into<String>) {
        let line = self.line_of(s, k);
        s.push(line, &self.within, self.key(k), message);
    }

    /// Reports every key not in `allowed`.
    fn deny_unknown(&self, s: &mut Sink, allowed: &[&str]) -> R<()> {
        let mut ok = Ok(());
        for (k, _) in self.t.iter() {
            let name = k.get_ref().as_ref();
            if !allowed.contains(&name) {
                let line = s.line(&k.span());
                s.push(
                    line,
                    &self.within,
                    self.key(name),
                    format!("unknown key; expected one of: {}", allowed.join(", ")),
                );
                ok = Err(());
            }
        }
        ok
    }

    /// The value of `k` converted by `f`; `Ok(None)` when absent.
    fn opt<T>(
        &self,
        s: &mut Sink,
        k: &str,
        f: impl FnOnce(&'a DeValue<'i>) -> Result<T, String>,
    ) -> R<Option<T>> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => match f(v.get_ref()) {
                Ok(x) => Ok(Some(x)),
                Err(m) => {
                    self.err(s, k, m);
                    Err(())
                }
            },
        }
    }

    fn uint(&self, s: &mut Sink, k: &str, max: u64) -> R<Option<u64>> {
        self.opt(s, k, |v| as_uint(v, max))
    }

    fn string(&self, s: &mut Sink, k: &str) -> R<Option<&'a str>> {
        self.opt(s, k, as_str)
    }

    fn boolean(&self, s: &mut Sink, k: &str) -> R<Option<bool>> {
        self.opt(s, k, |v| match v {
            DeValue::Boolean(b) => Ok(*b),
            other => Err(format!("expected true or false, not {}", other.type_str())),
        })
    }
}

fn as_str<'a>(v: &'a DeValue<'_>) -> Result<&'a str, String> {
    match v {
        DeValue::String(s) => Ok(s.as_ref()),
        other => Err(format!("expected a string, not {}", other.type_str())),
    }
}

fn as_int(v: &DeValue<'_>) -> Option<i128> {
    match v {
        DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix()).ok(),
        _ => None,
    }
}

fn as_uint(v: &DeValue<'_>, max: u64) -> Result<u64, String> {
    as_int(v)
        .filter(|&i| i >= 0 && i <= i128::from(max))
        .map(|i| i as u64)
        .ok_or_else(|| match v {
            DeValue::Integer(_) => format!("expected an integer from 0 to {max}"),
            other => format!(
                "expected an integer from 0 to {max}, not {}",
                other.type_str()
            ),
        })
}

fn as_number(v: &DeValue<'_>) -> Result<f64, String> {
    match v {
        DeValue::Integer(_) => as_int(v)
            .map(|i| i as f64)
            .ok_or_else(|| "integer out of range".to_string()),
        DeValue::Float(f) => f
            .as_str()
            .parse::<f64>()
            .map_err(|_| "bad number".to_string()),
        other => Err(format!("expected a number, not {}", other.type_str())),
    }
}

fn as_table<'a, 'i>(v: &'a DeValue<'i>) -> Result<&'a DeTable<'i>, String> {
    match v {
        DeValue::Table(t) => Ok(t),
        other => Err(format!("expected a table, not {}", other.type_str())),
    }
}

fn as_array<'a, 'i>(v: &'a DeValue<'i>) -> Result<Vec<&'a Val<'i>>, String> {
    match v {
        DeValue::Array(a) => Ok(a.iter().collect()),
        other => Err(format!("expected an array, not {}", other.type_str())),
    }
}

/// Parses a stream file. Relative `pcap` paths are taken from `base_dir`.
pub fn parse(text: &str, base_dir: &Path) -> Result<StreamFile, Vec<StreamError>> {
    let doc = DeTable::parse(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        vec![StreamError {
            line,
            key: String::new(),
            message: e.message().trim().to_string(),
            within: String::new(),
        }]
    })?;
    // Plain values for port options (what the port openers take).
    let plain: toml::Table = toml::from_str(text).map_err(|e| {
        vec![StreamError {
            line: e.span().map_or(1, |s| line_of(text, s.start)),
            key: String::new(),
            message: e.message().trim().to_string(),
            within: String::new(),
        }]
    })?;
    let mut s = Sink {
        text,
        errs: Vec::new(),
    };
    let top = Tab {
        t: doc.get_ref(),
        line: 1,
        path: String::new(),
        within: String::new(),
    };
    let _ = top.deny_unknown(&mut s, &["duration", "port", "stream"]);
    let duration = match top.opt(&mut s, "duration", as_number) {
        Ok(Some(d)) if !(d.is_finite() && d > 0.0) => {
            top.err(&mut s, "duration", "expected seconds above 0");
            10.0
        }
        Ok(Some(d)) => d,
        _ => 10.0,
    };

    let ports = parse_ports(&top, &plain, &mut s);
    let mut streams = Vec::new();
    if let Ok(Some(list)) = top.opt(&mut s, "stream", as_array) {
        for (i, v) in list.into_iter().enumerate() {
            let within = format!("stream {}", i + 1);
            let t = match as_table(v.get_ref()) {
                Ok(t) => t,
                Err(m) => {
                    let line = s.line(&v.span());
                    s.push(line, &within, "stream".into(), m);
                    continue;
                }
            };
            let mut tab = Tab {
                t,
                line: s.line(&v.span()),
                path: String::new(),
                within,
            };
            if let Some(n) = tab.get("name").and_then(|v| as_str(v.get_ref()).ok()) {
                tab.within = format!("stream \"{n}\"");
            }
            parse_stream(&tab, &ports, base_dir, &mut s, &mut streams);
        }
    }

    // Names are unique (NAME.rev included), ids fit 16 bits.
    for i in 0..streams.len() {
        let (name, line, within): (&str, usize, String) = (
            &streams[i].0.name,
            streams[i].1,
            format!("stream \"{}\"", streams[i].0.name),
        );
        if streams[..i].iter().any(|(o, _)| o.name == name) {
            s.push(
                line,
                &within,
                "name".into(),
                "a stream of this name exists already",
            );
        }
    }
    if streams.len() > MAX_STREAMS {
        s.push(
            1,
            "",
            "stream".into(),
            format!("more than {MAX_STREAMS} streams"),
        );
    }
    if !s.errs.is_empty() {
        s.errs.sort_by_key(|e| e.line);
        return Err(s.errs);
    }
    Ok(StreamFile {
        duration,
        ports,
        streams: streams
            .into_iter()
            .enumerate()
            .map(|(i, (mut st, _))| {
                st.id = i as u16;
                st
            })
            .collect(),
    })
}

fn parse_ports(top: &Tab, plain: &toml::Table, s: &mut Sink) -> Vec<PortDecl> {
    let mut ports: Vec<PortDecl> = Vec::new();
    let Ok(Some(list)) = top.opt(s, "port", as_array) else {
        return ports;
    };
    let plain_ports = plain.get("port").and_then(|p| p.as_array());
    for (i, v) in list.into_iter().enumerate() {
        let line = s.line(&v.span());
        let within = format!("port {}", i + 1);
        let t = match as_table(v.get_ref()) {
            Ok(t) => t,
            Err(m) => {
                s.push(line, &within, "port".into(), m);
                continue;
            }
        };
        let mut tab = Tab {
            t,
            line,
            path: String::new(),
            within,
        };
        if let Some(n) = tab.get("name").and_then(|v| as_str(v.get_ref()).ok()) {
            tab.within = format!("port \"{n}\"");
        }
        let _ = tab.deny_unknown(s, &["name", "type", "options"]);
        let name = tab.string(s, "name").ok().flatten();
        let kind = tab.string(s, "type").ok().flatten();
        let _ = tab.opt(s, "options", as_table);
        let (Some(name), Some(kind)) = (name, kind) else {
            if tab.get("name").is_none() {
                tab.err(s, "name", "a port needs a name");
            }
            if tab.get("type").is_none() {
                tab.err(s, "type", "a port needs a type");
            }
            continue;
        };
        if name.is_empty() || ports.iter().any(|p| p.name == name) {
            tab.err(s, "name", "empty, or the name of another port");
            continue;
        }
        let options = plain_ports
            .and_then(|a| a.get(i))
            .and_then(|p| p.get("options"))
            .and_then(|o| o.as_table())
            .cloned()
            .unwrap_or_default();
        ports.push(PortDecl {
            name: name.to_string(),
            kind: kind.to_string(),
            options,
            line,
        });
    }
    ports
}

const STREAM_KEYS: &[&str] = &[
    "name",
    "tx",
    "rx",
    "direction",
    "flows",
    "frame_size",
    "rate",
    "line_rate",
    "stamp",
    "seed",
    "hex",
    "pcap",
    "layers",
    "vary",
];

/// Parses one `[[stream]]` into `out` (two streams for `bi`), with its line.
fn parse_stream(
    tab: &Tab,
    ports: &[PortDecl],
    base_dir: &Path,
    s: &mut Sink,
    out: &mut Vec<(Stream, usize)>,
) {
    let before = s.errs.len();
    let _ = tab.deny_unknown(s, STREAM_KEYS);
    let name = tab.string(s, "name").ok().flatten();
    if name.is_none() && tab.get("name").is_none() {
        tab.err(s, "name", "a stream needs a name");
    }
    if name == Some("") {
        tab.err(s, "name", "a stream needs a name");
    }
    let port = |k: &str, s: &mut Sink| -> Option<String> {
        let p = tab.string(s, k).ok().flatten()?;
        if !ports.iter().any(|d| d.name == p) {
            let known: Vec<&str> = ports.iter().map(|d| d.name.as_str()).collect();
            tab.err(
                s,
                k,
                format!(
                    "no [[port]] named \"{p}\" (ports: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            );
            return None;
        }
        Some(p.to_string())
    };
    let tx = port("tx", s);
    if tab.get("tx").is_none() {
        tab.err(s, "tx", "a stream needs tx, the port it is sent on");
    }
    let rx = if tab.get("rx").is_some() {
        port("rx", s)
    } else {
        tx.clone()
    };
    let bi = match tab.string(s, "direction") {
        Ok(None) | Ok(Some("uni")) => false,
        Ok(Some("bi")) => true,
        Ok(Some(_)) => {
            tab.err(s, "direction", "expected \"uni\" or \"bi\"");
            false
        }
        Err(()) => false,
    };
    let flows = tab.uint(s, "flows", build::MAX_FLOWS).ok().flatten();
    if flows == Some(0) {
        tab.err(s, "flows", format!("expected 1 to {}", build::MAX_FLOWS));
    }
    let line_rate = match tab.get("line_rate").map(|v| v.get_ref()) {
        None => None,
        Some(DeValue::String(l)) => match parse_bps(l) {
            Ok(b) => Some(b),
            Err(m) => {
                tab.err(s, "line_rate", m);
                None
            }
        },
        // A number: bits per second.
        Some(v) => match as_number(v) {
            Ok(b) if b.is_finite() && b > 0.0 => Some(b),
            _ => {
                tab.err(s, "line_rate", "expected a bit rate such as \"10Gbps\"");
                None
            }
        },
    };
    let rate = match tab.get("rate").map(|v| v.get_ref()) {
        None => Rate::Max,
        Some(DeValue::String(r)) => match parse_rate(r, line_rate) {
            Ok(r) => r,
            Err(m) => {
                tab.err(s, "rate", m);
                Rate::Max
            }
        },
        Some(v @ (DeValue::Integer(_) | DeValue::Float(_))) => match as_number(v) {
            Ok(p) if p.is_finite() && p > 0.0 => Rate::Pps(p),
            _ => {
                tab.err(s, "rate", "expected packets per second above 0");
                Rate::Max
            }
        },
        Some(other) => {
            tab.err(
                s,
                "rate",
                format!(
                    "expected a string such as \"1Mpps\", not {}",
                    other.type_str()
                ),
            );
            Rate::Max
        }
    };
    let stamp = tab.boolean(s, "stamp").ok().flatten().unwrap_or(true);
    let seed = tab
        .uint(s, "seed", i64::MAX as u64)
        .ok()
        .flatten()
        .unwrap_or(build::DEFAULT_SEED);
    let sizes = parse_sizes(tab, s);

    // The template: exactly one of hex, pcap, layers.
    let mut sources: Vec<&str> = ["hex", "pcap", "layers"]
        .into_iter()
        .filter(|k| tab.get(k).is_some())
        .collect();
    sources.sort_by_key(|k| tab.get(k).map(|v| v.span().start));
    let mut src_len = None;
    let template = match sources.as_slice() {
        [] => {
            tab.err(s, "layers", "a stream needs one of layers, hex or pcap");
            None
        }
        [_, second, ..] => {
            tab.err(s, second, "give only one of layers, hex and pcap");
            None
        }
        ["hex"] => tab.string(s, "hex").ok().flatten().and_then(|h| {
            let r = build::parse_hex(h)
                .map_err(BuildError::Template)
                .and_then(|b| {
                    src_len = Some(b.len());
                    Template::dissect(&b)
                });
            r.map_err(|e| tab.err(s, "hex", e.to_string())).ok()
        }),
        ["pcap"] => tab.string(s, "pcap").ok().flatten().and_then(|p| {
            match read_first_packet(&base_dir.join(p)) {
                Ok(b) => {
                    src_len = Some(b.len());
                    Template::dissect(&b)
                        .map_err(|e| tab.err(s, "pcap", e.to_string()))
                        .ok()
                }
                Err(m) => {
                    tab.err(s, "pcap", format!("{p}: {m}"));
                    None
                }
            }
        }),
        _ => parse_layers(tab, s).ok().map(Template::new),
    };
    let vary = parse_vary(tab, s);
    if s.errs.len() != before {
        return;
    }
    let (Some(name), Some(tx), Some(rx), Some(template), Ok(vary), Ok(sizes)) =
        (name, tx, rx, template, vary, sizes)
    else {
        return;
    };
    // Without frame_size, a frame template keeps its own size.
    let sizes = sizes.unwrap_or(match src_len {
        Some(n) => FrameSize::Fixed((n + build::FCS_LEN).max(build::MIN_FRAME_SIZE)),
        None => FrameSize::default(),
    });
    let spec = FrameSpec {
        template,
        sizes,
        flows: flows.unwrap_or(1),
        vary,
        seed,
        stamp,
        reversed: false,
    };
    let source = sources.first().copied().unwrap_or("layers");
    let frames = match spec.compile() {
        Ok(f) => f,
        Err(e) => {
            build_error(tab, s, source, &e);
            return;
        }
    };
    let line = tab.line;
    if bi {
        let rev = match frames.reversed() {
            Ok(r) => r,
            Err(e) => {
                build_error(tab, s, source, &e);
                return;
            }
        };
        out.push((
            Stream {
                name: name.to_string(),
                id: 0,
                tx: tx.clone(),
                rx: rx.clone(),
                rate,
                frames,
            },
            line,
        ));
        out.push((
            Stream {
                name: format!("{name}.rev"),
                id: 0,
                tx: rx,
                rx: tx,
                rate,
                frames: rev,
            },
            line,
        ));
    } else {
        out.push((
            Stream {
                name: name.to_string(),
                id: 0,
                tx,
                rx,
                rate,
                frames,
            },
            line,
        ));
    }
}

/// Reports a compile error at the key it is about.
fn build_error(tab: &Tab, s: &mut Sink, source: &str, e: &BuildError) {
    let at_sub = |s: &mut Sink, list: &str, index: usize, key: &str, msg: String| {
        let item = tab
            .get(list)
            .and_then(|v| as_array(v.get_ref()).ok())
            .and_then(|a| a.get(index).copied());
        let line = item
            .and_then(|v| {
                let t = as_table(v.get_ref()).ok()?;
                let sub = Tab {
                    t,
                    line: s.line(&v.span()),
                    path: String::new(),
                    within: String::new(),
                };
                Some(sub.line_of(s, key))
            })
            .unwrap_or_else(|| tab.line_of(s, list));
        s.push(line, &tab.within, format!("{list}[{index}].{key}"), msg);
    };
    match e {
        BuildError::Layer {
            index,
            key,
            message,
            ..
        } if source == "layers" => at_sub(s, "layers", *index, key, message.clone()),
        BuildError::Vary {
            index,
            key,
            message,
            ..
        } => at_sub(s, "vary", *index, key, message.clone()),
        BuildError::TooSmall { .. } | BuildError::Sizes(_) => {
            tab.err(s, "frame_size", e.to_string())
        }
        BuildError::Flows(_) => tab.err(s, "flows", e.to_string()),
        BuildError::Template(_) | BuildError::Layer { .. } => tab.err(s, source, e.to_string()),
    }
}

fn read_first_packet(path: &Path) -> Result<Vec<u8>, String> {
    let mut r = netdev::pcap::PcapReader::open(path).map_err(|e| e.to_string())?;
    let mut data = Vec::new();
    match r.next_into(&mut data) {
        Ok(Some(_)) => Ok(data),
        Ok(None) => Err("the capture holds no packet".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_sizes(tab: &Tab, s: &mut Sink) -> R<Option<FrameSize>> {
    let Some(v) = tab.get("frame_size") else {
        return Ok(None);
    };
    let range = |n: i128| {
        (build::MIN_FRAME_SIZE as i128..=build::MAX_FRAME_SIZE as i128)
            .contains(&n)
            .then_some(n as usize)
    };
    let expected = format!(
        "expected a size from {} to {} (FCS included), \"imix\", or a list of sizes",
        build::MIN_FRAME_SIZE,
        build::MAX_FRAME_SIZE
    );
    match v.get_ref() {
        DeValue::Integer(_) => match as_int(v.get_ref()).and_then(range) {
            Some(n) => Ok(Some(FrameSize::Fixed(n))),
            None => {
                tab.err(s, "frame_size", expected);
                Err(())
            }
        },
        DeValue::String(x) if x.as_ref() == "imix" => Ok(Some(FrameSize::Imix)),
        DeValue::Array(a) => {
            let mut out = Vec::new();
            let mut ok = true;
            for (i, e) in a.iter().enumerate() {
                match as_int(e.get_ref()).and_then(range) {
                    Some(n) => out.push(n),
                    None => {
                        let line = s.line(&e.span());
                        s.push(
                            line,
                            &tab.within,
                            tab.key(&format!("frame_size[{i}]")),
                            &expected,
                        );
                        ok = false;
                    }
                }
            }
            if ok && (out.is_empty() || out.len() > build::MAX_SIZES) {
                tab.err(
                    s,
                    "frame_size",
                    format!("expected 1 to {} sizes", build::MAX_SIZES),
                );
                ok = false;
            }
            if ok {
                Ok(Some(FrameSize::Cycle(out)))
            } else {
                Err(())
            }
        }
        _ => {
            tab.err(s, "frame_size", expected);
            Err(())
        }
    }
}

/// Keys each layer type takes (besides `type`).
fn layer_keys(k: LayerKind) -> &'static [&'static str] {
    match k {
        LayerKind::Eth => &["type", "src", "dst", "ethertype"],
        LayerKind::Vlan => &["type", "vid", "pcp", "dei", "tpid", "ethertype"],
        LayerKind::Ipv4 => &["type", "src", "dst", "ttl", "tos", "id", "df", "proto"],
        LayerKind::Ipv6 => &["type", "src", "dst", "hlim", "tc", "fl", "nh"],
        LayerKind::Udp => &["type", "sport", "dport", "checksum"],
        LayerKind::Tcp => &["type", "sport", "dport", "seq", "ack", "flags", "window"],
        LayerKind::Vxlan => &["type", "vni"],
        LayerKind::Geneve => &["type", "vni", "critical", "oam", "protocol", "options"],
        LayerKind::Gre => &["type", "key", "checksum", "protocol"],
        LayerKind::Mpls => &["type", "label", "tc", "ttl"],
    }
}

fn parse_layers(tab: &Tab, s: &mut Sink) -> R<Vec<Layer>> {
    let list = tab.opt(s, "layers", as_array)?.unwrap_or_default();
    let mut layers = Vec::new();
    let mut ok = true;
    for (i, v) in list.into_iter().enumerate() {
        let path = tab.key(&format!("layers[{i}]"));
        let t = match as_table(v.get_ref()) {
            Ok(t) => t,
            Err(m) => {
                let line = s.line(&v.span());
                s.push(line, &tab.within, path, m);
                ok = false;
                continue;
            }
        };
        let lt = Tab {
            t,
            line: s.line(&v.span()),
            path,
            within: tab.within.clone(),
        };
        match parse_layer(&lt, s) {
            Ok(l) => layers.push(l),
            Err(()) => ok = false,
        }
    }
    if layers.is_empty() && ok {
        tab.err(s, "layers", "no layers: a template starts with eth");
        return Err(());
    }
    if ok { Ok(layers) } else { Err(()) }
}

fn parse_layer(t: &Tab, s: &mut Sink) -> R<Layer> {
    let Some(kind_s) = t.string(s, "type")? else {
        t.err(s, "type", "a layer needs a type (eth, vlan, ipv4, ...)");
        return Err(());
    };
    let Some(kind) = LayerKind::from_name(kind_s) else {
        let all: Vec<&str> = LayerKind::ALL.iter().map(|k| k.name()).collect();
        t.err(
            s,
            "type",
            format!(
                "unknown layer type \"{kind_s}\"; expected one of: {}",
                all.join(", ")
            ),
        );
        return Err(());
    };
    t.deny_unknown(s, layer_keys(kind))?;
    // Each field read; any error is reported and remembered.
    let mut bad = false;
    let mut u = |k: &str, max: u64, s: &mut Sink| -> Option<u64> {
        t.uint(s, k, max).unwrap_or_else(|()| {
            bad = true;
            None
        })
    };
    let layer = match kind {
        LayerKind::Eth => {
            let d = Eth::default();
            let ethertype = u("ethertype", 0xffff, s).map(|v| v as u16);
            let src = addr(t, s, "src", build::parse_mac_addr);
            let dst = addr(t, s, "dst", build::parse_mac_addr);
            Layer::Eth(Eth {
                src: src?.unwrap_or(d.src),
                dst: dst?.unwrap_or(d.dst),
                ethertype,
            })
        }
        LayerKind::Vlan => {
            let d = Vlan::default();
            let l = Vlan {
                vid: u("vid", 4095, s).map_or(d.vid, |v| v as u16),
                pcp: u("pcp", 7, s).map_or(d.pcp, |v| v as u8),
                dei: t.boolean(s, "dei")?.unwrap_or(d.dei),
                tpid: u("tpid", 0xffff, s).map_or(d.tpid, |v| v as u16),
                ethertype: u("ethertype", 0xffff, s).map(|v| v as u16),
            };
            if !matches!(l.tpid, 0x8100 | 0x88a8 | 0x9100) {
                t.err(s, "tpid", "expected 0x8100, 0x88a8 or 0x9100");
                return Err(());
            }
            Layer::Vlan(l)
        }
        LayerKind::Ipv4 => {
            let d = Ipv4::default();
            let parse4 = |x: &str| {
                x.trim()
                    .parse()
                    .map_err(|_| format!("'{x}' is not an IPv4 address"))
            };
            let src = addr(t, s, "src", parse4);
            let dst = addr(t, s, "dst", parse4);
            Layer::Ipv4(Ipv4 {
                ttl: u("ttl", 255, s).map_or(d.ttl, |v| v as u8),
                tos: u("tos", 255, s).map_or(d.tos, |v| v as u8),
                id: u("id", 0xffff, s).map_or(d.id, |v| v as u16),
                df: t.boolean(s, "df")?.unwrap_or(false),
                proto: u("proto", 255, s).map(|v| v as u8),
                src: src?.unwrap_or(d.src),
                dst: dst?.unwrap_or(d.dst),
                ..d
            })
        }
        LayerKind::Ipv6 => {
            let d = Ipv6::default();
            let parse6 = |x: &str| {
                x.trim()
                    .parse()
                    .map_err(|_| format!("'{x}' is not an IPv6 address"))
            };
            let src = addr(t, s, "src", parse6);
            let dst = addr(t, s, "dst", parse6);
            Layer::Ipv6(Ipv6 {
                hlim: u("hlim", 255, s).map_or(d.hlim, |v| v as u8),
                tc: u("tc", 255, s).map_or(d.tc, |v| v as u8),
                fl: u("fl", 0xf_ffff, s).map_or(d.fl, |v| v as u32),
                nh: u("nh", 255, s).map(|v| v as u8),
                src: src?.unwrap_or(d.src),
                dst: dst?.unwrap_or(d.dst),
            })
        }
        LayerKind::Udp => Layer::Udp(Udp {
            sport: u("sport", 0xffff, s).map(|v| v as u16),
            dport: u("dport", 0xffff, s).map(|v| v as u16),
            checksum: t.boolean(s, "checksum")?.unwrap_or(true),
        }),
        LayerKind::Tcp => {
            let d = Tcp::default();
            let flags = t.opt(s, "flags", |v| match v {
                DeValue::String(f) => tcp_flags(f),
                other => as_uint(other, 0x1ff).map(|v| v as u16),
            })?;
            Layer::Tcp(Tcp {
                sport: u("sport", 0xffff, s).map_or(d.sport, |v| v as u16),
                dport: u("dport", 0xffff, s).map_or(d.dport, |v| v as u16),
                seq: u("seq", u32::MAX.into(), s).map_or(d.seq, |v| v as u32),
                ack: u("ack", u32::MAX.into(), s).map_or(d.ack, |v| v as u32),
                window: u("window", 0xffff, s).map_or(d.window, |v| v as u16),
                flags: flags.unwrap_or(d.flags),
                ..d
            })
        }
        LayerKind::Vxlan => Layer::Vxlan(Vxlan {
            vni: u("vni", 0xff_ffff, s).map_or(0, |v| v as u32),
            gbp: None,
        }),
        LayerKind::Geneve => {
            let mut g = Geneve {
                vni: u("vni", 0xff_ffff, s).map_or(0, |v| v as u32),
                critical: t.boolean(s, "critical")?.unwrap_or(false),
                oam: t.boolean(s, "oam")?.unwrap_or(false),
                protocol: u("protocol", 0xffff, s).map(|v| v as u16),
                options: Vec::new(),
            };
            geneve_options(t, s, &mut g)?;
            Layer::Geneve(g)
        }
        LayerKind::Gre => Layer::Gre(Gre {
            key: u("key", u32::MAX.into(), s).map(|v| v as u32),
            checksum: t.boolean(s, "checksum")?.unwrap_or(false),
            sequence: None,
            protocol: u("protocol", 0xffff, s).map(|v| v as u16),
        }),
        LayerKind::Mpls => {
            let d = Mpls::default();
            Layer::Mpls(Mpls {
                label: u("label", 0xf_ffff, s).map_or(d.label, |v| v as u32),
                tc: u("tc", 7, s).map_or(d.tc, |v| v as u8),
                ttl: u("ttl", 255, s).map_or(d.ttl, |v| v as u8),
            })
        }
    };
    if bad { Err(()) } else { Ok(layer) }
}

/// An address-valued key.
fn addr<T>(
    t: &Tab,
    s: &mut Sink,
    k: &str,
    f: impl FnOnce(&str) -> Result<T, String>,
) -> R<Option<T>> {
    t.opt(s, k, |v| f(as_str(v)?))
}

/// TCP flags as scapy writes them: letters of `FSRPAUECN`.
fn tcp_flags(f: &str) -> Result<u16, String> {
    f.chars().try_fold(0u16, |acc, c| {
        "FSRPAUECN"
            .find(c)
            .map(|i| acc | (1 << i))
            .ok_or_else(|| format!("'{c}' is not a TCP flag (letters of FSRPAUECN)"))
    })
}

fn geneve_options(t: &Tab, s: &mut Sink, g: &mut Geneve) -> R<()> {
    let Some(list) = t.opt(s, "options", as_array)? else {
        return Ok(());
    };
    let mut ok = Ok(());
    for (i, v) in list.into_iter().enumerate() {
        let path = format!("{}.options[{i}]", t.path);
        let line = s.line(&v.span());
        let Ok(ot) = as_table(v.get_ref()) else {
            s.push(
                line,
                &t.within,
                path,
                "expected a table { class, type, data }",
            );
            ok = Err(());
            continue;
        };
        let o = Tab {
            t: ot,
            line,
            path,
            within: t.within.clone(),
        };
        if o.deny_unknown(s, &["class", "type", "data"]).is_err() {
            ok = Err(());
            continue;
        }
        let class = o.uint(s, "class", 0xffff);
        let typ = o.uint(s, "type", 0xff);
        let data = o.opt(s, "data", |v| build::parse_hex(as_str(v)?));
        let (Ok(class), Ok(typ), Ok(data)) = (class, typ, data) else {
            ok = Err(());
            continue;
        };
        if let Err(m) = g.push_option(
            class.unwrap_or(0) as u16,
            typ.unwrap_or(0) as u8,
            &data.unwrap_or_default(),
        ) {
            o.err(s, "data", m);
            ok = Err(());
        }
    }
    ok
}

fn parse_vary(tab: &Tab, s: &mut Sink) -> R<Vec<Vary>> {
    let Some(list) = tab.opt(s, "vary", as_array)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut ok = Ok(());
    for (i, v) in list.into_iter().enumerate() {
        let path = tab.key(&format!("vary[{i}]"));
        let line = s.line(&v.span());
        let t = match as_table(v.get_ref()) {
            Ok(t) => t,
            Err(m) => {
                s.push(line, &tab.within, path, m);
                ok = Err(());
                continue;
            }
        };
        let vt = Tab {
            t,
            line,
            path,
            within: tab.within.clone(),
        };
        match parse_one_vary(&vt, s) {
            Ok(v) => out.push(v),
            Err(()) => ok = Err(()),
        }
    }
    ok.map(|()| out)
}

fn parse_one_vary(t: &Tab, s: &mut Sink) -> R<Vary> {
    t.deny_unknown(s, &["field", "op", "from", "to", "step"])?;
    let Some(f) = t.string(s, "field")? else {
        t.err(
            s,
            "field",
            "a variation needs a field (such as \"ipv4.src\")",
        );
        return Err(());
    };
    let field: FieldRef = f.parse().map_err(|m: String| t.err(s, "field", m))?;
    let value = |v: &DeValue| -> Result<u128, String> {
        match v {
            DeValue::String(x) => field.field.parse_value(x),
            DeValue::Integer(_) => {
                let n = as_int(v)
                    .filter(|&n| n >= 0)
                    .ok_or_else(|| "expected a value of 0 or more".to_string())?
                    as u128;
                field.field.check_value(n)?;
                Ok(n)
            }
            other => Err(format!(
                "expected a number or an address, not {}",
                other.type_str()
            )),
        }
    };
    let from = t.opt(s, "from", value);
    let to = t.opt(s, "to", value);
    let step = t.uint(s, "step", i64::MAX as u64);
    let op = match t.string(s, "op")? {
        None | Some("inc") => VaryOp::Inc {
            step: step?.unwrap_or(1),
        },
        Some("random") => {
            if t.get("step").is_some() {
                t.err(s, "step", "step is for op = \"inc\"");
                return Err(());
            }
            VaryOp::Random
        }
        Some(_) => {
            t.err(s, "op", "expected \"inc\" or \"random\"");
            return Err(());
        }
    };
    Ok(Vary {
        field,
        op,
        from: from?,
        to: to?,
    })
}

#[cfg(test)]
mod tests;
