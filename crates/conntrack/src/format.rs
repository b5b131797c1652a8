//! The connection tracker's management commands as OVS words them: `dpctl/dump-conntrack`,
//! `dpctl/flush-conntrack`, `dpctl/ct-stats-show`, `dpctl/ct-bkts`,
//! `dpctl/ct-{set,get}-maxconns`, `dpctl/ct-get-nconns`, `dpctl/ct-{set,get,del}-limits`,
//! `dpctl/ct-{enable,disable,get}-tcp-seq-chk`, and flowpath's own
//! `dpctl/ct-{set,get,del}-timeout-policy` (printed as `ovs-vsctl list-zone-tp` prints OVS's
//! timeout policies). The `dpctl/ipf-*` commands are in [`crate::ipf_format`].
//!
//! Argument parsing (`parse_*`) and output (`format_*`) are pure functions, checked against what
//! Open vSwitch 3.1's userspace datapath prints (`ovs-appctl dpctl/...` on `netdev@ovs-netdev`,
//! `lib/dpctl.c` and `lib/ct-dpif.c`); [`run`] joins them to a [`Conntrack`] through its public
//! API. An error is OVS's message: ovs-vswitchd replies `ovs-vswitchd: <message> (<strerror>)`,
//! and [`CmdError`] displays the `<message>` part ([`CmdError::strerror`] has the rest).
//!
//! Where OVS 3.1 misbehaves, these commands do the sensible thing instead:
//! - numbers are whole and in range: `zone=70000`, `zone=-1`, `zone=0x7` (dump, flush, stats,
//!   `ct-get-limits`) and `ct-set-maxconns 12abc` or `4294967296` are errors, where OVS wraps or
//!   reads the leading digits;
//! - `ct-get-limits zone=` and `ct-del-limits zone=` are `invalid zone` (OVS aborts);
//! - `flush-conntrack` takes the `[dp]` argument (OVS 3.1 parses it as a tuple:
//!   `field netdev@ovs-netdev missing value`), and too many arguments are `invalid arguments`;
//! - a partial tuple with `ct_nw_proto=1` (and `icmp_type`/`icmp_code`/`icmp_id`) matches ICMP
//!   connections (OVS 3.1 removes nothing), and ICMPv6 entries can be flushed (OVS aborts);
//! - `icmp_*` fields may come before `ct_nw_proto` in a tuple;
//! - `ct-stats-show` prints an `ICMPV6:` line (OVS counts ICMPv6 in `Total` only);
//! - a zone's `count` is every connection of the zone (OVS counts only those committed after
//!   the zone got its limit);
//! - `ct-{enable,disable}-tcp-seq-chk WORD` checks that WORD is this datapath (OVS ignores it);
//! - options (`-m`, `-s`, `--more`, `--statistics`) may come anywhere, not only first;
//! - `-m` prints the connection's id (OVS's userspace datapath always prints `id=0`);
//! - lines come ordered by zone and tuple, not in hash order.
//!
//! Two things the table's API does not give yet: the per-peer TCP details of `-m`
//! (`state_orig=...,flags_reply=...`; until [`ConnInfo`] carries them, `-m` prints the
//! combined `state=`), and a zone limit of 0 (in OVS an unlimited zone under a default limit;
//! here the table's 0 means "the default applies", so `zone=N,limit=0` removes the zone's own).
//!
//! **Buckets.** `dpctl/ct-bkts` counts connections per bucket of the table. OVS 3.1's table is
//! one hash map, so it reports one bucket; flowpath's table is [`SHARDS`] shards (each a hash
//! map behind its own lock, see [`crate::table`]), and a bucket here is a shard: the one that
//! holds the connection's original-direction key (its reply key is in the shard of the reply
//! tuple's hash, usually another). A bucket far above the others means a lock many connections
//! contend for.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::key::{ICMP, ICMPV6, TCP, Tuple, UDP};
use crate::table::{ConnInfo, Conntrack, SHARDS, TimeoutClass};
use crate::tcp::TcpConn;

const IGMP: u8 = 2;
const DCCP: u8 = 33;
const SCTP: u8 = 132;
const UDPLITE: u8 = 136;

/// Why a command failed; `Display` is OVS's message text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CmdError {
    #[error("Unrecognized option {0}")]
    UnrecognizedOption(String),
    #[error("datapath not found")]
    DatapathNotFound,
    #[error("invalid arguments")]
    InvalidArguments,
    #[error("failed to parse zone")]
    ParseZone,
    #[error("invalid conntrack tuple field: {0}")]
    TupleField(String),
    #[error("field {0} missing value")]
    MissingValue(String),
    #[error("failed to parse field {0}")]
    ParseField(String),
    #[error("{0} is set multiple times")]
    SetTwice(String),
    #[error("the L3 protocol does not match {0}")]
    L3Mismatch(String),
    #[error("port is set without protocol")]
    PortWithoutProtocol,
    #[error("invalid L4 fields")]
    InvalidL4,
    /// An exact tuple that is no connection's original tuple.
    #[error("failed to flush conntrack")]
    FlushNotFound,
    #[error("maxconns missing or malformed")]
    Maxconns,
    #[error("invalid default limit")]
    DefaultLimit,
    #[error("invalid zone limit field: {0}")]
    ZoneLimitField(String),
    #[error("failed to parse zone limit")]
    ZoneLimit,
    #[error("invalid argument {0}")]
    InvalidArgument(String),
    #[error("invalid zone")]
    InvalidZone,
    /// Not OVS's (its timeout policies live in OVSDB); worded as `ct-set-limits`' errors.
    #[error("invalid timeout policy field: {0}")]
    PolicyField(String),
    /// As `ovs-vsctl del-zone-tp` words it.
    #[error("zone id {0} does not exist")]
    NoPolicy(u16),
    /// `ipf-set-enabled`/`ipf-set-disabled` without `v4` or `v6`.
    #[error("parameter missing: 'v4' for IPv4 or 'v6' for IPv6")]
    IpfFamily,
    /// `ipf-set-min-frag` without `v4` or `v6` (OVS words it without the quotes here).
    #[error("parameter missing: v4 for IPv4 or v6 for IPv6")]
    IpfMinFragFamily,
    #[error("parameter missing for minimum fragment size")]
    IpfMinFragMissing,
    #[error("requested minimum fragment size too small; see documentation")]
    IpfMinFragTooSmall,
    #[error("parameter missing for maximum fragments")]
    IpfMaxFragsMissing,
    #[error("setting maximum fragments failed")]
    IpfMaxFragsFailed,
}

impl CmdError {
    /// What OVS puts in parentheses after the message, if anything.
    pub fn strerror(&self) -> Option<&'static str> {
        match self {
            CmdError::UnrecognizedOption(_) => None,
            CmdError::FlushNotFound | CmdError::NoPolicy(_) => Some("No such file or directory"),
            // OVS's ipf setters return 1 on a value out of bounds, which dpctl prints as an
            // errno.
            CmdError::IpfMinFragTooSmall | CmdError::IpfMaxFragsFailed => {
                Some("Operation not permitted")
            }
            _ => Some("Invalid argument"),
        }
    }

    /// The whole reply in OVS's shape: `PROGRAM: MESSAGE (STRERROR)`.
    pub fn ovs_text(&self, program: &str) -> String {
        match self.strerror() {
            Some(e) => format!("{program}: {self} ({e})"),
            None => self.to_string(),
        }
    }
}

/// The commands, with the usage and argument counts `list-commands` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtCommand {
    DumpConntrack,
    FlushConntrack,
    StatsShow,
    Bkts,
    SetMaxconns,
    GetMaxconns,
    GetNconns,
    SetLimits,
    GetLimits,
    DelLimits,
    EnableTcpSeqChk,
    DisableTcpSeqChk,
    GetTcpSeqChk,
    SetTimeoutPolicy,
    GetTimeoutPolicy,
    DelTimeoutPolicy,
}

impl CtCommand {
    pub const ALL: [CtCommand; 16] = [
        CtCommand::DumpConntrack,
        CtCommand::FlushConntrack,
        CtCommand::StatsShow,
        CtCommand::Bkts,
        CtCommand::SetMaxconns,
        CtCommand::GetMaxconns,
        CtCommand::GetNconns,
        CtCommand::SetLimits,
        CtCommand::GetLimits,
        CtCommand::DelLimits,
        CtCommand::EnableTcpSeqChk,
        CtCommand::DisableTcpSeqChk,
        CtCommand::GetTcpSeqChk,
        CtCommand::SetTimeoutPolicy,
        CtCommand::GetTimeoutPolicy,
        CtCommand::DelTimeoutPolicy,
    ];

    /// The control-socket command name.
    pub fn name(self) -> &'static str {
        match self {
            CtCommand::DumpConntrack => "dpctl/dump-conntrack",
            CtCommand::FlushConntrack => "dpctl/flush-conntrack",
            CtCommand::StatsShow => "dpctl/ct-stats-show",
            CtCommand::Bkts => "dpctl/ct-bkts",
            CtCommand::SetMaxconns => "dpctl/ct-set-maxconns",
            CtCommand::GetMaxconns => "dpctl/ct-get-maxconns",
            CtCommand::GetNconns => "dpctl/ct-get-nconns",
            CtCommand::SetLimits => "dpctl/ct-set-limits",
            CtCommand::GetLimits => "dpctl/ct-get-limits",
            CtCommand::DelLimits => "dpctl/ct-del-limits",
            CtCommand::EnableTcpSeqChk => "dpctl/ct-enable-tcp-seq-chk",
            CtCommand::DisableTcpSeqChk => "dpctl/ct-disable-tcp-seq-chk",
            CtCommand::GetTcpSeqChk => "dpctl/ct-get-tcp-seq-chk",
            CtCommand::SetTimeoutPolicy => "dpctl/ct-set-timeout-policy",
            CtCommand::GetTimeoutPolicy => "dpctl/ct-get-timeout-policy",
            CtCommand::DelTimeoutPolicy => "dpctl/ct-del-timeout-policy",
        }
    }

    /// The usage `list-commands` shows (OVS's, where OVS has the command).
    pub fn usage(self) -> &'static str {
        match self {
            CtCommand::DumpConntrack => "[-m] [-s] [dp] [zone=N]",
            CtCommand::FlushConntrack => "[dp] [zone=N] [ct-orig-tuple] [ct-reply-tuple]",
            CtCommand::StatsShow => "[dp] [zone=N]",
            CtCommand::Bkts => "[dp] [gt=N]",
            CtCommand::SetMaxconns => "[dp] maxconns",
            CtCommand::GetMaxconns
            | CtCommand::GetNconns
            | CtCommand::EnableTcpSeqChk
            | CtCommand::DisableTcpSeqChk
            | CtCommand::GetTcpSeqChk => "[dp]",
            CtCommand::SetLimits => "[dp] [default=L] [zone=N,limit=L]...",
            CtCommand::GetLimits => "[dp] [zone=N1[,N2]...]",
            CtCommand::DelLimits => "[dp] zone=N1[,N2]...",
            CtCommand::SetTimeoutPolicy => "[dp] zone=N|default CLASS=SECS[,CLASS=SECS]...",
            CtCommand::GetTimeoutPolicy => "[dp] [zone=N]",
            CtCommand::DelTimeoutPolicy => "[dp] zone=N",
        }
    }

    /// Fewest and most arguments, options included (OVS's counts).
    pub fn args(self) -> (usize, usize) {
        match self {
            CtCommand::DumpConntrack | CtCommand::FlushConntrack => (0, 4),
            CtCommand::StatsShow => (0, 3),
            CtCommand::Bkts | CtCommand::GetLimits | CtCommand::GetTimeoutPolicy => (0, 2),
            CtCommand::SetMaxconns | CtCommand::DelLimits | CtCommand::DelTimeoutPolicy => (1, 2),
            CtCommand::GetMaxconns
            | CtCommand::GetNconns
            | CtCommand::EnableTcpSeqChk
            | CtCommand::DisableTcpSeqChk
            | CtCommand::GetTcpSeqChk => (0, 1),
            CtCommand::SetLimits => (1, usize::MAX),
            CtCommand::SetTimeoutPolicy => (2, usize::MAX),
        }
    }
}

/// Runs `cmd` with `args` on `ct`; `dp_names` are the names the datapath answers to in the
/// optional `[dp]` argument. Returns the reply text.
pub fn run<S: AsRef<str>>(
    ct: &Conntrack,
    cmd: CtCommand,
    args: &[S],
    dp_names: &[&str],
) -> Result<String, CmdError> {
    let now = crate::now_ms();
    match cmd {
        CtCommand::DumpConntrack => {
            let a = parse_dump(args, dp_names)?;
            let mut out = String::new();
            for c in ct.dump(a.zone, now) {
                let tcp = tcp_peers_of(&c);
                out.push_str(&format_conn(&c, tcp.as_ref(), a.verbose, a.stats));
                out.push('\n');
            }
            Ok(out)
        }
        CtCommand::FlushConntrack => {
            let a = parse_flush(args, dp_names)?;
            flush(ct, &a, now)?;
            Ok(String::new())
        }
        CtCommand::StatsShow => {
            let a = parse_stats(args, dp_names)?;
            Ok(format_stats(&ct.dump(a.zone, now), a.verbose))
        }
        CtCommand::Bkts => {
            let gt = parse_bkts(args, dp_names)?;
            let mut per = vec![0u32; SHARDS];
            for c in ct.dump(None, now) {
                per[bucket_of(&c.orig)] += 1;
            }
            Ok(format_bkts(&per, gt))
        }
        CtCommand::SetMaxconns => {
            ct.set_maxconns(parse_set_maxconns(args, dp_names)?);
            Ok("setting maxconns successful".into())
        }
        CtCommand::GetMaxconns => {
            parse_dp_only(args, dp_names)?;
            Ok(ct.maxconns().to_string())
        }
        CtCommand::GetNconns => {
            parse_dp_only(args, dp_names)?;
            Ok(ct.n_conns().to_string())
        }
        CtCommand::SetLimits => {
            let a = parse_set_limits(args, dp_names)?;
            if let Some(d) = a.default {
                ct.set_default_limit(d);
            }
            for (z, l) in a.zones {
                ct.set_zone_limit(z, l);
            }
            Ok(String::new())
        }
        CtCommand::GetLimits => {
            let zones = parse_get_limits(args, dp_names)?;
            let default = ct.default_limit();
            let rows: Vec<(u16, u32, u32)> = match zones {
                None => ct
                    .zone_limits()
                    .into_iter()
                    .map(|(z, l)| (z, l, ct.zone_conns(z)))
                    .collect(),
                Some(zs) => zs
                    .into_iter()
                    .map(|z| {
                        let l = match ct.zone_limit(z) {
                            0 => default,
                            l => l,
                        };
                        (z, l, ct.zone_conns(z))
                    })
                    .collect(),
            };
            Ok(format_limits(default, &rows))
        }
        CtCommand::DelLimits => {
            for z in parse_del_limits(args, dp_names)? {
                ct.set_zone_limit(z, 0);
            }
            Ok(String::new())
        }
        CtCommand::EnableTcpSeqChk | CtCommand::DisableTcpSeqChk => {
            parse_dp_only(args, dp_names)?;
            let on = cmd == CtCommand::EnableTcpSeqChk;
            ct.set_tcp_seq_chk(on);
            Ok(format!(
                "{} TCP sequence checking successful",
                if on { "enabling" } else { "disabling" }
            ))
        }
        CtCommand::GetTcpSeqChk => {
            parse_dp_only(args, dp_names)?;
            Ok(format!(
                "TCP sequence checking: {}",
                if ct.tcp_seq_chk() {
                    "enabled"
                } else {
                    "disabled"
                }
            ))
        }
        CtCommand::SetTimeoutPolicy => {
            let a = parse_set_policy(args, dp_names)?;
            ct.set_timeouts(a.zone, &a.values);
            Ok(String::new())
        }
        CtCommand::GetTimeoutPolicy => match parse_get_policy(args, dp_names)? {
            Some(z) => Ok(format_policy(Some(z), &ct.timeouts(Some(z)))),
            None => {
                let default = ct.timeouts(None);
                let mut out = format_policy(None, &default);
                // The table does not list the zones with a policy of their own; those whose
                // timeouts differ from the default's are the ones that matter.
                for z in 0..=u16::MAX {
                    let t = ct.timeouts(Some(z));
                    if t != default {
                        out.push('\n');
                        out.push_str(&format_policy(Some(z), &t));
                    }
                }
                Ok(out)
            }
        },
        CtCommand::DelTimeoutPolicy => {
            let z = parse_del_policy(args, dp_names)?;
            if ct.del_timeouts(z) {
                Ok(String::new())
            } else {
                Err(CmdError::NoPolicy(z))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Arguments.

/// The generic dpctl options (OVS's `dpctl_unixctl_handler`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Opts {
    /// `-m`/`--more`, counted.
    pub verbosity: u32,
    /// `-s`/`--statistics`.
    pub statistics: bool,
}

/// Separates the options from the other arguments. OVS's options (`-m`, `-s`, bundled as
/// `-ms`, `--more`, `--statistics`, and `--clear`, `--may-create`, `--names`, `--no-names`,
/// which no conntrack command uses); anything else starting with `-` is refused, as OVS
/// does (`ct-set-maxconns -5` is `Unrecognized option -5`).
pub fn split_options<S: AsRef<str>>(args: &[S]) -> Result<(Opts, Vec<&str>), CmdError> {
    let mut o = Opts::default();
    let mut rest = Vec::new();
    for a in args {
        let a = a.as_ref();
        if let Some(long) = a.strip_prefix("--") {
            match long {
                "more" => o.verbosity += 1,
                "statistics" => o.statistics = true,
                "clear" | "may-create" | "names" | "no-names" => {}
                _ => return Err(CmdError::UnrecognizedOption(a.into())),
            }
        } else if a.len() > 1 && a.starts_with('-') {
            for c in a[1..].chars() {
                match c {
                    'm' => o.verbosity += 1,
                    's' => o.statistics = true,
                    _ => return Err(CmdError::UnrecognizedOption(format!("-{c}"))),
                }
            }
        } else {
            rest.push(a);
        }
    }
    Ok((o, rest))
}

/// Checks that what is left of the arguments is at most the datapath's name.
pub(crate) fn dp_only(rest: &[&str], dp_names: &[&str]) -> Result<(), CmdError> {
    match rest {
        [] => Ok(()),
        [dp] if dp_names.contains(dp) => Ok(()),
        [_] => Err(CmdError::DatapathNotFound),
        _ => Err(rest
            .iter()
            .find(|a| !dp_names.contains(a))
            .map_or(CmdError::InvalidArguments, |_| CmdError::DatapathNotFound)),
    }
}

/// `[dp]`, the commands that take nothing else.
pub fn parse_dp_only<S: AsRef<str>>(args: &[S], dp_names: &[&str]) -> Result<(), CmdError> {
    let (_, rest) = split_options(args)?;
    dp_only(&rest, dp_names)
}

/// Drops a leading datapath name.
fn skip_dp<'a>(rest: &'a [&'a str], dp_names: &[&str]) -> &'a [&'a str] {
    match rest.first() {
        Some(a) if dp_names.contains(a) => &rest[1..],
        _ => rest,
    }
}

/// A whole decimal number.
pub(crate) fn dec<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A whole number, decimal or `0x` hexadecimal (OVS's `str_to_u*`).
fn num<T: TryFrom<u64>>(s: &str) -> Option<T> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u64::from_str_radix(h, 16).ok()?
        }
        Some(_) => return None,
        None => dec::<u64>(s)?,
    };
    T::try_from(v).ok()
}

/// Takes a `KEY=N` argument (a decimal `u16`) out of `rest`. An unparsable one stays, so
/// that it is reported as OVS does, as a datapath that does not exist.
fn take_u16_arg(rest: &mut Vec<&str>, key: &str) -> Option<u16> {
    let i = rest
        .iter()
        .position(|a| a.strip_prefix(key).and_then(dec::<u16>).is_some())?;
    rest.remove(i).strip_prefix(key).and_then(dec)
}

/// Arguments of `dpctl/dump-conntrack`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DumpArgs {
    pub verbose: bool,
    pub stats: bool,
    pub zone: Option<u16>,
}

/// `[-m] [-s] [dp] [zone=N]`.
pub fn parse_dump<S: AsRef<str>>(args: &[S], dp_names: &[&str]) -> Result<DumpArgs, CmdError> {
    let (o, mut rest) = split_options(args)?;
    let zone = take_u16_arg(&mut rest, "zone=");
    dp_only(&rest, dp_names)?;
    Ok(DumpArgs {
        verbose: o.verbosity > 0,
        stats: o.statistics,
        zone,
    })
}

/// Arguments of `dpctl/ct-stats-show`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsArgs {
    pub verbose: bool,
    pub zone: Option<u16>,
}

/// `[dp] [zone=N] [-m|--more]` (and OVS's old `verbose` word).
pub fn parse_stats<S: AsRef<str>>(args: &[S], dp_names: &[&str]) -> Result<StatsArgs, CmdError> {
    let (o, mut rest) = split_options(args)?;
    let mut verbose = o.verbosity > 0;
    if let Some(i) = rest.iter().position(|a| *a == "verbose") {
        rest.remove(i);
        verbose = true;
    }
    let zone = take_u16_arg(&mut rest, "zone=");
    dp_only(&rest, dp_names)?;
    Ok(StatsArgs { verbose, zone })
}

/// `[dp] [gt=N]`: the threshold above which a bucket's count is shown.
pub fn parse_bkts<S: AsRef<str>>(args: &[S], dp_names: &[&str]) -> Result<u32, CmdError> {
    let (_, mut rest) = split_options(args)?;
    let i = rest
        .iter()
        .position(|a| a.strip_prefix("gt=").and_then(dec::<u32>).is_some());
    let gt = i.map_or(0, |i| rest.remove(i)[3..].parse().unwrap_or(0));
    dp_only(&rest, dp_names)?;
    Ok(gt)
}

/// `[dp] maxconns`.
pub fn parse_set_maxconns<S: AsRef<str>>(args: &[S], dp_names: &[&str]) -> Result<u32, CmdError> {
    let (_, rest) = split_options(args)?;
    let (n, before) = rest.split_last().ok_or(CmdError::Maxconns)?;
    dp_only(before, dp_names)?;
    dec(n).ok_or(CmdError::Maxconns)
}

/// What `dpctl/ct-set-limits` sets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitsSet {
    pub default: Option<u32>,
    pub zones: Vec<(u16, u32)>,
}

/// `[dp] [default=L] [zone=N,limit=L]...`. `default=` may come anywhere (OVS: first only).
pub fn parse_set_limits<S: AsRef<str>>(
    args: &[S],
    dp_names: &[&str],
) -> Result<LimitsSet, CmdError> {
    let (_, rest) = split_options(args)?;
    let mut out = LimitsSet::default();
    for a in skip_dp(&rest, dp_names) {
        if let Some(v) = a.strip_prefix("default=") {
            out.default = Some(num(v).ok_or(CmdError::DefaultLimit)?);
        } else {
            out.zones.push(parse_zone_limit(a)?);
        }
    }
    Ok(out)
}

/// `zone=N,limit=L` (OVS's `parse_ct_limit_zone_limit`).
fn parse_zone_limit(s: &str) -> Result<(u16, u32), CmdError> {
    let (mut zone, mut limit) = (None, None);
    for (key, value) in key_values(s) {
        if value.is_empty() {
            return Err(CmdError::MissingValue(key.into()));
        }
        match key {
            "zone" => zone = Some(num(value).ok_or(CmdError::ParseField(key.into()))?),
            "limit" => limit = Some(num(value).ok_or(CmdError::ParseField(key.into()))?),
            _ => return Err(CmdError::ZoneLimitField(key.into())),
        }
    }
    zone.zip(limit).ok_or(CmdError::ZoneLimit)
}

/// The `key=value` pairs of a comma-separated list; a pair without `=` has an empty value.
fn key_values(s: &str) -> impl Iterator<Item = (&str, &str)> {
    s.split(',')
        .filter(|kv| !kv.is_empty())
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
}

/// `zone=N1[,N2]...` (OVS's `parse_ct_limit_zones`).
fn parse_zone_list(s: &str) -> Result<Vec<u16>, CmdError> {
    let list = s
        .strip_prefix("zone=")
        .ok_or_else(|| CmdError::InvalidArgument(s.into()))?;
    let zones: Vec<u16> = list
        .split(',')
        .filter(|z| !z.is_empty())
        .map(|z| dec(z).ok_or(CmdError::InvalidZone))
        .collect::<Result<_, _>>()?;
    if zones.is_empty() {
        return Err(CmdError::InvalidZone);
    }
    Ok(zones)
}

/// `[dp] [zone=N1[,N2]...]`: `None` for every zone with a limit of its own.
pub fn parse_get_limits<S: AsRef<str>>(
    args: &[S],
    dp_names: &[&str],
) -> Result<Option<Vec<u16>>, CmdError> {
    let (_, rest) = split_options(args)?;
    match skip_dp(&rest, dp_names) {
        [] => Ok(None),
        [z] => parse_zone_list(z).map(Some),
        _ => Err(CmdError::DatapathNotFound),
    }
}

/// `[dp] zone=N1[,N2]...`.
pub fn parse_del_limits<S: AsRef<str>>(
    args: &[S],
    dp_names: &[&str],
) -> Result<Vec<u16>, CmdError> {
    let (_, rest) = split_options(args)?;
    match skip_dp(&rest, dp_names) {
        [z] => parse_zone_list(z),
        [] => Err(CmdError::InvalidArguments),
        _ => Err(CmdError::DatapathNotFound),
    }
}

/// OVS timeout-policy keys that its userspace datapath accepts and ignores; so does flowpath.
pub const IGNORED_POLICY_KEYS: [&str; 5] = [
    "tcp_close_wait",
    "tcp_last_ack",
    "tcp_retransmit",
    "tcp_syn_sent2",
    "tcp_unack",
];

/// What `dpctl/ct-set-timeout-policy` sets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicySet {
    /// `None`: the default policy.
    pub zone: Option<u16>,
    pub values: Vec<(TimeoutClass, u32)>,
}

fn parse_zone_arg(s: &str) -> Result<u16, CmdError> {
    let v = s
        .strip_prefix("zone=")
        .ok_or_else(|| CmdError::InvalidArgument(s.into()))?;
    num(v).ok_or(CmdError::InvalidZone)
}

/// `[dp] zone=N|default CLASS=SECS[,CLASS=SECS]...` (the pairs also as separate arguments).
pub fn parse_set_policy<S: AsRef<str>>(
    args: &[S],
    dp_names: &[&str],
) -> Result<PolicySet, CmdError> {
    let (_, rest) = split_options(args)?;
    let rest = skip_dp(&rest, dp_names);
    let (target, pairs) = rest.split_first().ok_or(CmdError::InvalidArguments)?;
    let zone = match *target {
        "default" => None,
        t => Some(parse_zone_arg(t)?),
    };
    let mut values = Vec::new();
    for (key, value) in pairs.iter().flat_map(|p| key_values(p)) {
        if value.is_empty() {
            return Err(CmdError::MissingValue(key.into()));
        }
        let secs: u32 = dec(value).ok_or(CmdError::ParseField(key.into()))?;
        match TimeoutClass::from_name(key) {
            Some(c) => values.push((c, secs)),
            None if IGNORED_POLICY_KEYS.contains(&key) => {}
            None => return Err(CmdError::PolicyField(key.into())),
        }
    }
    if pairs.is_empty() {
        return Err(CmdError::InvalidArguments);
    }
    Ok(PolicySet { zone, values })
}

/// `[dp] [zone=N]`.
pub fn parse_get_policy<S: AsRef<str>>(
    args: &[S],
    dp_names: &[&str],
) -> Result<Option<u16>, CmdError> {
    let (_, rest) = split_options(args)?;
    match skip_dp(&rest, dp_names) {
        [] => Ok(None),
        [z] => parse_zone_arg(z).map(Some),
        _ => Err(CmdError::DatapathNotFound),
    }
}

/// `[dp] zone=N`.
pub fn parse_del_policy<S: AsRef<str>>(args: &[S], dp_names: &[&str]) -> Result<u16, CmdError> {
    let (_, rest) = split_options(args)?;
    match skip_dp(&rest, dp_names) {
        [z] => parse_zone_arg(z),
        [] => Err(CmdError::InvalidArguments),
        _ => Err(CmdError::DatapathNotFound),
    }
}

// ---------------------------------------------------------------------------------------------
// Flushing.

/// The fields of one direction's tuple a flush matches on (OVS's `struct ofp_ct_tuple`); a
/// field not given matches anything. Addresses as in [`Tuple`] (IPv4 in the first 4 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TupleMatch {
    pub src: Option<[u8; 16]>,
    pub dst: Option<[u8; 16]>,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    pub icmp_type: Option<u8>,
    pub icmp_code: Option<u8>,
    pub icmp_id: Option<u16>,
}

impl TupleMatch {
    pub fn is_empty(&self) -> bool {
        *self == TupleMatch::default()
    }

    fn has_ports(&self) -> bool {
        self.sport.is_some() || self.dport.is_some()
    }

    fn has_icmp(&self) -> bool {
        self.icmp_type.is_some() || self.icmp_code.is_some() || self.icmp_id.is_some()
    }

    /// Whether one direction's tuple `t` has the given fields. ICMP has no ports and other
    /// protocols no ICMP fields, so such a field never matches them. The tracker keeps only
    /// code-0 ICMP queries, so the code of a connection is 0.
    pub fn matches(&self, t: &Tuple) -> bool {
        if self.src.is_some_and(|a| a != t.src) || self.dst.is_some_and(|a| a != t.dst) {
            return false;
        }
        if matches!(t.proto, ICMP | ICMPV6) {
            !self.has_ports()
                && self.icmp_type.is_none_or(|v| v == t.stype)
                && self.icmp_code.is_none_or(|v| v == 0)
                && self.icmp_id.is_none_or(|v| v == t.sport)
        } else {
            !self.has_icmp()
                && self.sport.is_none_or(|p| p == t.sport)
                && self.dport.is_none_or(|p| p == t.dport)
        }
    }
}

/// What `dpctl/flush-conntrack` removes (OVS's `struct ofp_ct_match`): the family and protocol
/// are shared by the two tuples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtMatch {
    /// IPv6 (`Some(true)`) or IPv4, from the addresses given.
    pub v6: Option<bool>,
    pub proto: Option<u8>,
    pub orig: TupleMatch,
    pub reply: TupleMatch,
}

impl CtMatch {
    pub fn is_empty(&self) -> bool {
        *self == CtMatch::default()
    }

    /// OVS's "five tuple": an original tuple with both addresses, the protocol, and both ports
    /// (ICMP: the type, code and id, 0 when not given), and no reply tuple. It names one
    /// connection, which must exist.
    pub fn is_exact(&self) -> bool {
        let o = &self.orig;
        self.reply.is_empty()
            && o.src.is_some()
            && o.dst.is_some()
            && self.proto.is_some_and(|p| {
                matches!(p, ICMP | ICMPV6) || (o.sport.is_some() && o.dport.is_some())
            })
    }

    /// For an exact match: whether `t` (with its zone) is the connection named.
    pub fn names(&self, t: &Tuple) -> bool {
        let o = &self.orig;
        let l4 = if matches!(t.proto, ICMP | ICMPV6) {
            t.stype == o.icmp_type.unwrap_or(0)
                && o.icmp_code.unwrap_or(0) == 0
                && t.sport == o.icmp_id.unwrap_or(0)
        } else {
            Some(t.sport) == o.sport && Some(t.dport) == o.dport
        };
        Some(t.proto) == self.proto
            && Some(t.src) == o.src
            && Some(t.dst) == o.dst
            && Some(t.v6) == self.v6
            && l4
    }

    /// For a partial match: whether the connection has every field given.
    pub fn matches(&self, c: &ConnInfo) -> bool {
        self.v6.is_none_or(|v| v == c.orig.v6)
            && self.proto.is_none_or(|p| p == c.orig.proto)
            && self.orig.matches(&c.orig)
            && self.reply.matches(&c.reply)
    }
}

/// Parses one tuple argument (OVS's `ofp_ct_tuple_parse`) into `tm`, with the family and
/// protocol it shares with the other tuple in `m`.
pub fn parse_ct_tuple(s: &str, m: &mut CtMatch, reply: bool) -> Result<(), CmdError> {
    let mut t = TupleMatch::default();
    let mut proto_here = false;
    for (key, value) in key_values(s) {
        if value.is_empty() {
            return Err(CmdError::MissingValue(key.into()));
        }
        let bad = || CmdError::ParseField(key.into());
        match key {
            "ct_nw_src" | "ct_nw_dst" | "ct_ipv6_src" | "ct_ipv6_dst" => {
                let v6 = key.starts_with("ct_ipv6");
                if m.v6.is_some_and(|f| f != v6) {
                    return Err(CmdError::L3Mismatch(value.into()));
                }
                let slot = if key.ends_with("src") {
                    &mut t.src
                } else {
                    &mut t.dst
                };
                if slot.is_some() {
                    return Err(CmdError::SetTwice(key.into()));
                }
                *slot = Some(if v6 {
                    value.parse::<Ipv6Addr>().map_err(|_| bad())?.octets()
                } else {
                    let mut a = [0; 16];
                    a[..4].copy_from_slice(&value.parse::<Ipv4Addr>().map_err(|_| bad())?.octets());
                    a
                });
                m.v6 = Some(v6);
            }
            "ct_nw_proto" => {
                let p: u8 = num(value).ok_or_else(bad)?;
                // The other tuple may repeat the protocol, not change it.
                if proto_here || m.proto.is_some_and(|q| q != p) {
                    return Err(CmdError::SetTwice(key.into()));
                }
                m.proto = Some(p);
                proto_here = true;
            }
            "ct_tp_src" => t.sport = Some(num(value).ok_or_else(bad)?),
            "ct_tp_dst" => t.dport = Some(num(value).ok_or_else(bad)?),
            "icmp_type" => t.icmp_type = Some(num(value).ok_or_else(bad)?),
            "icmp_code" => t.icmp_code = Some(num(value).ok_or_else(bad)?),
            "icmp_id" => t.icmp_id = Some(num(value).ok_or_else(bad)?),
            _ => return Err(CmdError::TupleField(key.into())),
        }
    }
    let icmp = m.proto.is_some_and(|p| matches!(p, ICMP | ICMPV6));
    if (t.has_icmp() && !icmp) || (t.has_ports() && icmp) {
        return Err(CmdError::InvalidL4);
    }
    if t.src.is_none() && t.dst.is_none() && m.proto.is_none() && t.has_ports() {
        return Err(CmdError::PortWithoutProtocol);
    }
    if reply {
        m.reply = t;
    } else {
        m.orig = t;
    }
    Ok(())
}

/// Arguments of `dpctl/flush-conntrack`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushArgs {
    pub zone: Option<u16>,
    pub m: CtMatch,
}

/// `[dp] [zone=N] [ct-orig-tuple [ct-reply-tuple]]`; an empty tuple argument gives no tuple
/// (to give only the reply tuple).
pub fn parse_flush<S: AsRef<str>>(args: &[S], dp_names: &[&str]) -> Result<FlushArgs, CmdError> {
    let (_, rest) = split_options(args)?;
    let mut rest = skip_dp(&rest, dp_names);
    let mut out = FlushArgs::default();
    if let Some(z) = rest.first().and_then(|a| a.strip_prefix("zone=")) {
        out.zone = Some(dec(z).ok_or(CmdError::ParseZone)?);
        rest = &rest[1..];
    }
    if rest.len() > 2 {
        return Err(CmdError::InvalidArguments);
    }
    for (i, t) in rest.iter().enumerate() {
        if !t.is_empty() {
            parse_ct_tuple(t, &mut out.m, i == 1)?;
        }
    }
    Ok(out)
}

/// Removes what `a` names: everything (of a zone), the connection of an exact tuple (in the
/// zone given, else zone 0; [`CmdError::FlushNotFound`] when there is none, also when the
/// tuple is a reply tuple), or the connections a partial match selects (in every zone
/// unless one is given).
pub fn flush(ct: &Conntrack, a: &FlushArgs, now: u64) -> Result<usize, CmdError> {
    if a.m.is_empty() {
        return Ok(ct.flush(a.zone, None));
    }
    let (zone, victims): (Option<u16>, HashSet<Tuple>) = if a.m.is_exact() {
        let zone = a.zone.unwrap_or(0);
        let v: HashSet<Tuple> = ct
            .dump(Some(zone), now)
            .into_iter()
            .filter(|c| a.m.names(&c.orig))
            .map(|c| c.orig)
            .collect();
        if v.is_empty() {
            return Err(CmdError::FlushNotFound);
        }
        (Some(zone), v)
    } else {
        let v = ct
            .dump(a.zone, now)
            .into_iter()
            .filter(|c| a.m.matches(c))
            .map(|c| c.orig)
            .collect();
        (a.zone, v)
    };
    if victims.is_empty() {
        return Ok(0);
    }
    Ok(ct.flush(zone, Some(&|t: &Tuple| victims.contains(t))))
}

// ---------------------------------------------------------------------------------------------
// Output.

/// A protocol's name in a dump (OVS's `ct_dpif_format_ipproto`).
pub fn proto_name(p: u8) -> String {
    match p {
        ICMP => "icmp".into(),
        ICMPV6 => "icmpv6".into(),
        TCP => "tcp".into(),
        UDP => "udp".into(),
        SCTP => "sctp".into(),
        UDPLITE => "udplite".into(),
        DCCP => "dccp".into(),
        IGMP => "igmp".into(),
        _ => p.to_string(),
    }
}

/// An address as `inet_ntop` writes it: IPv4 dotted; IPv6 compressed (RFC 5952), with the
/// IPv4-mapped `::ffff:a.b.c.d` and the IPv4-compatible `::a.b.c.d` forms dotted.
pub fn format_addr(a: &[u8; 16], v6: bool) -> String {
    if !v6 {
        return Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string();
    }
    let ip = Ipv6Addr::from(*a);
    let s = ip.segments();
    if s[..6] == [0; 6] && s[6] != 0 {
        return format!("::{}", Ipv4Addr::new(a[12], a[13], a[14], a[15]));
    }
    ip.to_string()
}

/// One direction's tuple (OVS's `ct_dpif_format_tuple`): `src=A,dst=B,` and `sport=P,dport=Q`,
/// or for ICMP `id=I,type=T,code=C`.
pub fn format_tuple(out: &mut String, t: &Tuple) {
    let _ = write!(
        out,
        "src={},dst={}",
        format_addr(&t.src, t.v6),
        format_addr(&t.dst, t.v6)
    );
    if matches!(t.proto, ICMP | ICMPV6) {
        let _ = write!(out, ",id={},type={},code=0", t.sport, t.stype);
    } else {
        let _ = write!(out, ",sport={},dport={}", t.sport, t.dport);
    }
}

/// The per-peer TCP details the verbose dump prints (`state_orig=...,flags_reply=...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpPeers {
    pub state_orig: &'static str,
    pub state_reply: &'static str,
    pub wscale_orig: u8,
    pub wscale_reply: u8,
    /// OVS's `CT_DPIF_TCPF_*` bits ([`crate::tcp::TCPF_WINDOW_SCALE`], ...).
    pub flags_orig: u8,
    pub flags_reply: u8,
}

impl From<&TcpConn> for TcpPeers {
    fn from(t: &TcpConn) -> TcpPeers {
        let (state_orig, state_reply) = t.peer_states();
        let (wscale_orig, wscale_reply) = t.wscales();
        let (flags_orig, flags_reply) = t.peer_flags();
        TcpPeers {
            state_orig,
            state_reply,
            wscale_orig,
            wscale_reply,
            flags_orig,
            flags_reply,
        }
    }
}

/// The per-peer TCP details of a dumped connection.
fn tcp_peers_of(c: &ConnInfo) -> Option<TcpPeers> {
    c.tcp.as_ref().map(TcpPeers::from)
}

/// OVS's TCP protocol-info flag names, by bit.
const TCP_FLAG_NAMES: [&str; 6] = [
    "WINDOW_SCALE",
    "SACK_PERM",
    "CLOSE_INIT",
    "BE_LIBERAL",
    "DATA_UNACKNOWLEDGED",
    "MAXACK_SET",
];

/// Flags as OVS's `ct_dpif_format_flags` writes them: names joined by `|`, or `0`.
fn format_tcp_flags(out: &mut String, flags: u8) {
    if flags == 0 {
        out.push('0');
        return;
    }
    let mut first = true;
    for (i, name) in TCP_FLAG_NAMES.iter().enumerate() {
        if flags & (1 << i) != 0 {
            if !first {
                out.push('|');
            }
            out.push_str(name);
            first = false;
        }
    }
    let unknown = flags & !((1 << TCP_FLAG_NAMES.len()) - 1);
    if unknown != 0 {
        let _ = write!(out, "{}0x{unknown:x}", if first { "" } else { "|" });
    }
}

/// One line of `dpctl/dump-conntrack` (OVS's `ct_dpif_format_entry`), without its newline:
/// `PROTO,orig=(...),reply=(...)[,id=][,zone=][,status=][,timeout=][,mark=][,labels=][,protoinfo=(...)]`.
/// `verbose` (`-m`) adds the id, the status and the per-peer TCP details (when `tcp` has
/// them); `stats` (`-s`) the seconds until expiry.
pub fn format_conn(c: &ConnInfo, tcp: Option<&TcpPeers>, verbose: bool, stats: bool) -> String {
    let mut s = String::with_capacity(200);
    s.push_str(&proto_name(c.orig.proto));
    s.push_str(",orig=(");
    format_tuple(&mut s, &c.orig);
    s.push_str("),reply=(");
    format_tuple(&mut s, &c.reply);
    s.push(')');
    if verbose {
        let _ = write!(s, ",id={}", c.id);
    }
    if c.orig.zone != 0 {
        let _ = write!(s, ",zone={}", c.orig.zone);
    }
    if verbose {
        // OVS's userspace datapath has no status bits to report.
        s.push_str(",status=0");
    }
    if stats {
        let _ = write!(s, ",timeout={}", c.timeout_secs);
    }
    if c.mark != 0 {
        let _ = write!(s, ",mark={}", c.mark);
    }
    if c.label != 0 {
        let _ = write!(s, ",labels=0x{:x}", c.label);
    }
    if c.orig.proto == TCP {
        match (verbose, tcp) {
            (true, Some(p)) => {
                let _ = write!(
                    s,
                    ",protoinfo=(state_orig={},state_reply={}",
                    p.state_orig, p.state_reply
                );
                if p.wscale_orig != 0 || p.wscale_reply != 0 {
                    let _ = write!(
                        s,
                        ",wscale_orig={},wscale_reply={}",
                        p.wscale_orig, p.wscale_reply
                    );
                }
                s.push_str(",flags_orig=");
                format_tcp_flags(&mut s, p.flags_orig);
                s.push_str(",flags_reply=");
                format_tcp_flags(&mut s, p.flags_reply);
                s.push(')');
            }
            _ => {
                if let Some(st) = c.tcp_state {
                    let _ = write!(s, ",protoinfo=(state={st})");
                }
            }
        }
    }
    s
}

/// OVS's TCP states in their order (`enum ct_dpif_tcp_state`), as `ct-stats-show -m` lists them.
const TCP_STATES: [&str; 11] = [
    "CLOSED",
    "LISTEN",
    "SYN_SENT",
    "SYN_RECV",
    "ESTABLISHED",
    "CLOSE_WAIT",
    "FIN_WAIT_1",
    "CLOSING",
    "LAST_ACK",
    "FIN_WAIT_2",
    "TIME_WAIT",
];

/// `dpctl/ct-stats-show`: connections per protocol (only those with any, in OVS's order, with
/// ICMPv6 after ICMP) and, verbose, TCP connections per (combined) state.
pub fn format_stats(conns: &[ConnInfo], verbose: bool) -> String {
    const LABELS: [(&str, Option<u8>); 9] = [
        ("TCP", Some(TCP)),
        ("UDP", Some(UDP)),
        ("UDPLITE", Some(UDPLITE)),
        ("SCTP", Some(SCTP)),
        ("ICMP", Some(ICMP)),
        ("ICMPV6", Some(ICMPV6)),
        ("DCCP", Some(DCCP)),
        ("IGMP", Some(IGMP)),
        ("Other", None),
    ];
    let mut per_proto = [0u32; LABELS.len()];
    let mut per_state = [0u32; TCP_STATES.len()];
    let mut other_states: Vec<(&str, u32)> = Vec::new();
    for c in conns {
        let i = LABELS
            .iter()
            .position(|(_, p)| *p == Some(c.orig.proto))
            .unwrap_or(LABELS.len() - 1);
        per_proto[i] += 1;
        if let (TCP, Some(st)) = (c.orig.proto, c.tcp_state) {
            match TCP_STATES.iter().position(|s| *s == st) {
                Some(j) => per_state[j] += 1,
                None => match other_states.iter_mut().find(|(n, _)| *n == st) {
                    Some((_, n)) => *n += 1,
                    None => other_states.push((st, 1)),
                },
            }
        }
    }
    let mut out = format!("Connections Stats:\n    Total: {}\n", conns.len());
    for (i, (label, _)) in LABELS.iter().enumerate() {
        if per_proto[i] == 0 {
            continue;
        }
        let _ = writeln!(out, "  {label}: {}", per_proto[i]);
        if i == 0 && verbose {
            out.push_str("    Conn per TCP states:\n");
            let named = TCP_STATES.iter().zip(per_state).map(|(s, n)| (*s, n));
            for (name, n) in named.chain(other_states.iter().copied()) {
                if n != 0 {
                    let _ = writeln!(out, "\t  [{name}]={n}");
                }
            }
        }
    }
    out
}

/// The bucket (table shard) of a connection: the shard of its original tuple.
pub fn bucket_of(orig: &Tuple) -> usize {
    crate::table::shard_of(orig.hash())
}

/// `dpctl/ct-bkts` (OVS's layout): the number of buckets and connections, then, when there are
/// connections, eight buckets a row with the count of each bucket holding more than `gt`
/// (others shown as `.`).
pub fn format_bkts(per_bucket: &[u32], gt: u32) -> String {
    let total: u64 = per_bucket.iter().map(|&n| u64::from(n)).sum();
    let mut out = format!(
        "Total Buckets: {}\nCurrent Connections: {total}\n\n",
        per_bucket.len()
    );
    if per_bucket.is_empty() || total == 0 {
        return out;
    }
    out.push_str("+-----------+-----------------------------------------+\n");
    out.push_str("|  Buckets  |         Connections per Buckets         |\n");
    out.push_str("+-----------+-----------------------------------------+");
    for (i, &n) in per_bucket.iter().enumerate() {
        if i % 8 == 0 {
            let _ = write!(out, "\n {i:3}..{:3}   | ", i + 7);
        }
        if n > gt {
            let _ = write!(out, "{n:5}");
        } else {
            let _ = write!(out, "{:>5}", ".");
        }
    }
    out.push_str("\n\n");
    out
}

/// `dpctl/ct-get-limits` (OVS's `ct_dpif_format_zone_limits`): the default limit, then one
/// `zone=Z,limit=L,count=C` line per row.
pub fn format_limits(default: u32, rows: &[(u16, u32, u32)]) -> String {
    let mut out = format!("default limit={default}");
    for (z, l, c) in rows {
        let _ = write!(out, "\nzone={z},limit={l},count={c}");
    }
    out.push('\n');
    out
}

/// A timeout policy as `ovs-vsctl list-zone-tp` prints one: `Zone:5, Timeout Policies: K=V ...`
/// with the keys sorted; `Default, Timeout Policies: ...` for the default policy.
pub fn format_policy(zone: Option<u16>, secs: &[u32; TimeoutClass::COUNT]) -> String {
    let mut classes = TimeoutClass::ALL;
    classes.sort_by_key(|c| c.name());
    let mut out = match zone {
        Some(z) => format!("Zone:{z}, Timeout Policies:"),
        None => "Default, Timeout Policies:".to_string(),
    };
    for c in classes {
        let _ = write!(out, " {}={}", c.name(), secs[c as usize]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{CtArgs, CtCache, CtMeta, CtPacket};

    const DP: &[&str] = &["netdev@flowpath", "flowpath", "netdev@ovs-netdev"];

    fn a4(s: &str) -> [u8; 16] {
        let mut a = [0; 16];
        a[..4].copy_from_slice(&s.parse::<Ipv4Addr>().unwrap().octets());
        a
    }

    fn a6(s: &str) -> [u8; 16] {
        s.parse::<Ipv6Addr>().unwrap().octets()
    }

    fn addr(s: &str) -> ([u8; 16], bool) {
        if s.contains(':') {
            (a6(s), true)
        } else {
            (a4(s), false)
        }
    }

    /// A connection of the reference's first capture: zone 5, mark 42, label 0x1020304,
    /// reply the reverse of the original.
    fn conn(proto: u8, src: &str, dst: &str, sport: u16, dport: u16) -> ConnInfo {
        let (s, v6) = addr(src);
        let (d, _) = addr(dst);
        let (stype, dtype) = match proto {
            ICMP => (8, 0),
            ICMPV6 => (128, 129),
            _ => (0, 0),
        };
        let orig = Tuple {
            src: s,
            dst: d,
            sport,
            dport,
            zone: 5,
            proto,
            v6,
            stype,
            dtype,
        };
        ConnInfo {
            orig,
            reply: orig.reverse(),
            id: 0,
            mark: 42,
            label: 0x1020304,
            timeout_secs: 0,
            tcp_state: (proto == TCP).then_some("ESTABLISHED"),
            tcp: None,
            class: TimeoutClass::UdpFirst,
        }
    }

    fn tcp(src: &str, dst: &str, sport: u16, dport: u16, state: &'static str) -> ConnInfo {
        ConnInfo {
            tcp_state: Some(state),
            ..conn(TCP, src, dst, sport, dport)
        }
    }

    fn peers(so: &'static str, sr: &'static str, w: (u8, u8), f: (u8, u8)) -> TcpPeers {
        TcpPeers {
            state_orig: so,
            state_reply: sr,
            wscale_orig: w.0,
            wscale_reply: w.1,
            flags_orig: f.0,
            flags_reply: f.1,
        }
    }

    const WS: u8 = crate::tcp::TCPF_WINDOW_SCALE;
    const LIB: u8 = crate::tcp::TCPF_BE_LIBERAL;

    #[test]
    fn dump_lines_match_ovs_udp_icmp_icmpv6_ipv6() {
        let udp = conn(UDP, "10.1.1.1", "10.1.1.2", 50001, 9001);
        assert_eq!(
            format_conn(&udp, None, false, false),
            "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=50001,dport=9001),reply=(src=10.1.1.2,dst=10.1.1.1,sport=9001,dport=50001),zone=5,mark=42,labels=0x1020304"
        );
        let icmp = conn(ICMP, "10.1.1.1", "10.1.1.2", 1049, 1049);
        assert_eq!(
            format_conn(&icmp, None, false, false),
            "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=1049,type=8,code=0),reply=(src=10.1.1.2,dst=10.1.1.1,id=1049,type=0,code=0),zone=5,mark=42,labels=0x1020304"
        );
        let icmp6 = conn(ICMPV6, "fc00::1", "fc00::2", 1184, 1184);
        assert_eq!(
            format_conn(&icmp6, None, false, false),
            "icmpv6,orig=(src=fc00::1,dst=fc00::2,id=1184,type=128,code=0),reply=(src=fc00::2,dst=fc00::1,id=1184,type=129,code=0),zone=5,mark=42,labels=0x1020304"
        );
        let udp6 = conn(UDP, "fc00::1", "fc00::2", 50012, 9002);
        assert_eq!(
            format_conn(&udp6, None, false, false),
            "udp,orig=(src=fc00::1,dst=fc00::2,sport=50012,dport=9002),reply=(src=fc00::2,dst=fc00::1,sport=9002,dport=50012),zone=5,mark=42,labels=0x1020304"
        );
        // RFC 5952 forms, IPv4-mapped dotted, id 65535.
        let u = conn(
            UDP,
            "2001:db8::1:0:0:1",
            "2001:db8:abcd:12:ffff:0:a:b",
            1,
            2,
        );
        assert_eq!(
            format_conn(&u, None, false, false),
            "udp,orig=(src=2001:db8::1:0:0:1,dst=2001:db8:abcd:12:ffff:0:a:b,sport=1,dport=2),reply=(src=2001:db8:abcd:12:ffff:0:a:b,dst=2001:db8::1:0:0:1,sport=2,dport=1),zone=5,mark=42,labels=0x1020304"
        );
        let t = tcp("::ffff:10.1.1.1", "fe80::1", 65535, 1, "SYN_SENT");
        assert_eq!(
            format_conn(&t, None, false, false),
            "tcp,orig=(src=::ffff:10.1.1.1,dst=fe80::1,sport=65535,dport=1),reply=(src=fe80::1,dst=::ffff:10.1.1.1,sport=1,dport=65535),zone=5,mark=42,labels=0x1020304,protoinfo=(state=SYN_SENT)"
        );
        let i = conn(ICMPV6, "2001:db8::1", "2001:db8::2", 65535, 65535);
        assert_eq!(
            format_conn(&i, None, false, false),
            "icmpv6,orig=(src=2001:db8::1,dst=2001:db8::2,id=65535,type=128,code=0),reply=(src=2001:db8::2,dst=2001:db8::1,id=65535,type=129,code=0),zone=5,mark=42,labels=0x1020304"
        );
        // inet_ntop's IPv4-compatible form.
        assert_eq!(format_addr(&a6("::10.1.1.1"), true), "::10.1.1.1");
        assert_eq!(format_addr(&a6("::1"), true), "::1");
        assert_eq!(format_addr(&a6("::"), true), "::");
    }

    #[test]
    fn dump_lines_match_ovs_tcp_zone_mark_labels() {
        let c = tcp("10.1.1.1", "10.1.1.2", 40002, 8002, "ESTABLISHED");
        assert_eq!(
            format_conn(&c, None, false, false),
            "tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=40002,dport=8002),reply=(src=10.1.1.2,dst=10.1.1.1,sport=8002,dport=40002),zone=5,mark=42,labels=0x1020304,protoinfo=(state=ESTABLISHED)"
        );
        // Zone 0, no mark, no label: none of the three printed.
        let mut u = conn(UDP, "10.1.1.11", "10.1.1.12", 3333, 7000);
        (u.orig.zone, u.reply.zone, u.mark, u.label) = (0, 0, 0, 0);
        assert_eq!(
            format_conn(&u, None, false, false),
            "udp,orig=(src=10.1.1.11,dst=10.1.1.12,sport=3333,dport=7000),reply=(src=10.1.1.12,dst=10.1.1.11,sport=7000,dport=3333)"
        );
        u.timeout_secs = 54;
        assert_eq!(
            format_conn(&u, None, false, true),
            "udp,orig=(src=10.1.1.11,dst=10.1.1.12,sport=3333,dport=7000),reply=(src=10.1.1.12,dst=10.1.1.11,sport=7000,dport=3333),timeout=54"
        );
        // Zone 7 without mark/label.
        let mut z7 = conn(UDP, "10.1.1.11", "10.1.1.12", 3333, 7777);
        (z7.orig.zone, z7.mark, z7.label) = (7, 0, 0);
        assert_eq!(
            format_conn(&z7, None, false, false),
            "udp,orig=(src=10.1.1.11,dst=10.1.1.12,sport=3333,dport=7777),reply=(src=10.1.1.12,dst=10.1.1.11,sport=7777,dport=3333),zone=7"
        );
        // The largest mark, a 128-bit label (DNAT entry).
        let mut d = tcp("10.1.1.1", "10.1.1.200", 42001, 80, "TIME_WAIT");
        d.reply.src = a4("10.1.1.2");
        d.reply.sport = 8001;
        d.mark = u32::MAX;
        d.label = 0x8000_0000_0000_0000_0000_0000_0000_0001;
        assert_eq!(
            format_conn(&d, None, false, false),
            "tcp,orig=(src=10.1.1.1,dst=10.1.1.200,sport=42001,dport=80),reply=(src=10.1.1.2,dst=10.1.1.1,sport=8001,dport=42001),zone=5,mark=4294967295,labels=0x80000000000000000000000000000001,protoinfo=(state=TIME_WAIT)"
        );
        d.timeout_secs = 29;
        let p = peers("FIN_WAIT_2", "FIN_WAIT_2", (10, 10), (WS, WS));
        assert_eq!(
            format_conn(&d, Some(&p), true, true),
            "tcp,orig=(src=10.1.1.1,dst=10.1.1.200,sport=42001,dport=80),reply=(src=10.1.1.2,dst=10.1.1.1,sport=8001,dport=42001),id=0,zone=5,status=0,timeout=29,mark=4294967295,labels=0x80000000000000000000000000000001,protoinfo=(state_orig=FIN_WAIT_2,state_reply=FIN_WAIT_2,wscale_orig=10,wscale_reply=10,flags_orig=WINDOW_SCALE,flags_reply=WINDOW_SCALE)"
        );
    }

    #[test]
    fn dump_lines_match_ovs_nat_reply_tuples() {
        // SNAT to an address and a port range; ICMP committed without mark or label.
        let mut u = conn(UDP, "10.1.1.1", "10.1.1.2", 51002, 9002);
        u.reply.dst = a4("10.1.1.101");
        u.reply.dport = 20004;
        u.label = 0;
        assert_eq!(
            format_conn(&u, None, false, false),
            "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=51002,dport=9002),reply=(src=10.1.1.2,dst=10.1.1.101,sport=9002,dport=20004),zone=5,mark=42"
        );
        u.timeout_secs = 28;
        assert_eq!(
            format_conn(&u, None, true, true),
            "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=51002,dport=9002),reply=(src=10.1.1.2,dst=10.1.1.101,sport=9002,dport=20004),id=0,zone=5,status=0,timeout=28,mark=42"
        );
        let mut i = conn(ICMP, "10.1.1.1", "10.1.1.2", 2869, 2869);
        i.reply.dst = a4("10.1.1.100");
        (i.mark, i.label) = (0, 0);
        assert_eq!(
            format_conn(&i, None, false, false),
            "icmp,orig=(src=10.1.1.1,dst=10.1.1.2,id=2869,type=8,code=0),reply=(src=10.1.1.2,dst=10.1.1.100,id=2869,type=0,code=0),zone=5"
        );
        let mut t6 = conn(ICMPV6, "fc00::1", "fc00::2", 2953, 2953);
        t6.reply.dst = a6("fc00::100");
        t6.timeout_secs = 28;
        assert_eq!(
            format_conn(&t6, None, false, true),
            "icmpv6,orig=(src=fc00::1,dst=fc00::2,id=2953,type=128,code=0),reply=(src=fc00::2,dst=fc00::100,id=2953,type=129,code=0),zone=5,timeout=28,mark=42,labels=0x1020304"
        );
    }

    #[test]
    fn dump_lines_match_ovs_verbose_and_timeouts() {
        let mut c = tcp("fc00::1", "fc00::2", 40012, 8002, "ESTABLISHED");
        c.timeout_secs = 86394;
        let p = peers("ESTABLISHED", "ESTABLISHED", (10, 10), (WS, WS));
        assert_eq!(
            format_conn(&c, None, false, true),
            "tcp,orig=(src=fc00::1,dst=fc00::2,sport=40012,dport=8002),reply=(src=fc00::2,dst=fc00::1,sport=8002,dport=40012),zone=5,timeout=86394,mark=42,labels=0x1020304,protoinfo=(state=ESTABLISHED)"
        );
        assert_eq!(
            format_conn(&c, Some(&p), true, true),
            "tcp,orig=(src=fc00::1,dst=fc00::2,sport=40012,dport=8002),reply=(src=fc00::2,dst=fc00::1,sport=8002,dport=40012),id=0,zone=5,status=0,timeout=86394,mark=42,labels=0x1020304,protoinfo=(state_orig=ESTABLISHED,state_reply=ESTABLISHED,wscale_orig=10,wscale_reply=10,flags_orig=WINDOW_SCALE,flags_reply=WINDOW_SCALE)"
        );
        // Without -s: no timeout; the per-peer details only with -m.
        assert_eq!(
            format_conn(&c, Some(&p), true, false),
            "tcp,orig=(src=fc00::1,dst=fc00::2,sport=40012,dport=8002),reply=(src=fc00::2,dst=fc00::1,sport=8002,dport=40012),id=0,zone=5,status=0,mark=42,labels=0x1020304,protoinfo=(state_orig=ESTABLISHED,state_reply=ESTABLISHED,wscale_orig=10,wscale_reply=10,flags_orig=WINDOW_SCALE,flags_reply=WINDOW_SCALE)"
        );
        assert_eq!(
            format_conn(&c, Some(&p), false, false),
            "tcp,orig=(src=fc00::1,dst=fc00::2,sport=40012,dport=8002),reply=(src=fc00::2,dst=fc00::1,sport=8002,dport=40012),zone=5,mark=42,labels=0x1020304,protoinfo=(state=ESTABLISHED)"
        );
        // SYN to a closed port, reset: one wscale non-zero prints both; flags 0.
        let r = tcp("10.1.1.1", "10.1.1.2", 40004, 8009, "TIME_WAIT");
        let p = peers("TIME_WAIT", "TIME_WAIT", (10, 0), (WS, 0));
        assert_eq!(
            format_conn(&r, Some(&p), true, false),
            "tcp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=40004,dport=8009),reply=(src=10.1.1.2,dst=10.1.1.1,sport=8009,dport=40004),id=0,zone=5,status=0,mark=42,labels=0x1020304,protoinfo=(state_orig=TIME_WAIT,state_reply=TIME_WAIT,wscale_orig=10,wscale_reply=0,flags_orig=WINDOW_SCALE,flags_reply=0)"
        );
        // No window scaling: no wscale pair.
        let s = tcp("::ffff:10.1.1.1", "fe80::1", 65535, 1, "SYN_SENT");
        let p = peers("SYN_SENT", "CLOSED", (0, 0), (0, 0));
        assert_eq!(
            format_conn(&s, Some(&p), true, false),
            "tcp,orig=(src=::ffff:10.1.1.1,dst=fe80::1,sport=65535,dport=1),reply=(src=fe80::1,dst=::ffff:10.1.1.1,sport=1,dport=65535),id=0,zone=5,status=0,mark=42,labels=0x1020304,protoinfo=(state_orig=SYN_SENT,state_reply=CLOSED,flags_orig=0,flags_reply=0)"
        );
        // Mid-stream pickup.
        let mut m = tcp("10.1.1.2", "10.1.1.1", 8002, 40002, "SYN_SENT");
        m.timeout_secs = 27;
        let p = peers("SYN_SENT", "CLOSED", (0, 0), (LIB, LIB));
        assert_eq!(
            format_conn(&m, Some(&p), true, true),
            "tcp,orig=(src=10.1.1.2,dst=10.1.1.1,sport=8002,dport=40002),reply=(src=10.1.1.1,dst=10.1.1.2,sport=40002,dport=8002),id=0,zone=5,status=0,timeout=27,mark=42,labels=0x1020304,protoinfo=(state_orig=SYN_SENT,state_reply=CLOSED,flags_orig=BE_LIBERAL,flags_reply=BE_LIBERAL)"
        );
        let mut f = String::new();
        format_tcp_flags(&mut f, WS | LIB);
        assert_eq!(f, "WINDOW_SCALE|BE_LIBERAL");
        // Until ConnInfo carries the peers, -m keeps the combined state.
        assert!(format_conn(&m, None, true, false).ends_with(",protoinfo=(state=SYN_SENT)"));
    }

    #[test]
    fn other_protocols_are_named_or_numbered() {
        let mut g = conn(47, "10.1.1.11", "10.1.1.12", 0, 0);
        g.timeout_secs = 59;
        assert_eq!(
            format_conn(&g, None, false, true),
            "47,orig=(src=10.1.1.11,dst=10.1.1.12,sport=0,dport=0),reply=(src=10.1.1.12,dst=10.1.1.11,sport=0,dport=0),zone=5,timeout=59,mark=42,labels=0x1020304"
        );
        assert_eq!(
            format_conn(
                &conn(SCTP, "10.1.1.11", "10.1.1.12", 0, 0),
                None,
                true,
                false
            ),
            "sctp,orig=(src=10.1.1.11,dst=10.1.1.12,sport=0,dport=0),reply=(src=10.1.1.12,dst=10.1.1.11,sport=0,dport=0),id=0,zone=5,status=0,mark=42,labels=0x1020304"
        );
        for (p, n) in [(UDPLITE, "udplite"), (DCCP, "dccp"), (IGMP, "igmp")] {
            assert_eq!(proto_name(p), n);
        }
        // ICMP timestamp request, tracked with its reply type.
        let mut ts = conn(ICMP, "10.1.1.11", "10.1.1.12", 79, 79);
        (ts.orig.stype, ts.orig.dtype) = (13, 14);
        ts.reply = ts.orig.reverse();
        ts.timeout_secs = 59;
        assert_eq!(
            format_conn(&ts, None, false, true),
            "icmp,orig=(src=10.1.1.11,dst=10.1.1.12,id=79,type=13,code=0),reply=(src=10.1.1.12,dst=10.1.1.11,id=79,type=14,code=0),zone=5,timeout=59,mark=42,labels=0x1020304"
        );
    }

    #[test]
    fn tcp_peers_come_from_the_tracker() {
        use crate::tcp::{SYN, Segment};
        let syn = Segment {
            seq: 1000,
            ack: 0,
            window: 8192,
            flags: SYN,
            payload_len: 0,
            wscale: Some(7),
            sack_permitted: false,
        };
        let t = TcpConn::new(&syn).unwrap();
        assert_eq!(
            TcpPeers::from(&t),
            peers("SYN_SENT", "CLOSED", (7, 0), (WS, 0))
        );
    }

    #[test]
    fn stats_match_ovs() {
        let mut all = vec![
            tcp("10.1.1.13", "10.1.1.12", 1111, 2222, "SYN_SENT"),
            conn(UDP, "10.1.1.11", "10.1.1.12", 3333, 4444),
            conn(ICMP, "10.1.1.11", "10.1.1.12", 77, 77),
            conn(UDP, "fc00::11", "fc00::12", 3333, 4444),
            tcp("fc00::1", "fc00::2", 43012, 8002, "ESTABLISHED"),
            conn(UDP, "10.1.1.11", "10.1.1.12", 3333, 7777),
            conn(ICMP, "10.1.1.11", "10.1.1.12", 78, 78),
            tcp("10.1.1.1", "10.1.1.2", 43001, 8001, "TIME_WAIT"),
            tcp("10.1.1.1", "10.1.1.2", 43003, 8003, "TIME_WAIT"),
            tcp("10.1.1.1", "10.1.1.2", 43002, 8002, "ESTABLISHED"),
            tcp("10.1.1.11", "10.1.1.12", 1111, 2222, "SYN_SENT"),
            tcp("10.1.1.11", "10.1.1.12", 1112, 2222, "SYN_SENT"),
            conn(UDP, "10.1.1.11", "10.1.1.12", 3333, 7000),
            conn(UDP, "10.1.1.1", "10.1.1.2", 53002, 9002),
        ];
        assert_eq!(
            format_stats(&all, false),
            "Connections Stats:\n    Total: 14\n  TCP: 7\n  UDP: 5\n  ICMP: 2\n"
        );
        assert_eq!(
            format_stats(&all, true),
            "Connections Stats:\n    Total: 14\n  TCP: 7\n    Conn per TCP states:\n\t  [SYN_SENT]=3\n\t  [ESTABLISHED]=2\n\t  [TIME_WAIT]=2\n  UDP: 5\n  ICMP: 2\n"
        );
        // OVS leaves ICMPv6 out of the lines (but not the total); flowpath gives it one.
        all.push(conn(ICMPV6, "fc00::11", "fc00::12", 78, 78));
        for p in [UDPLITE, SCTP, DCCP, IGMP, 47] {
            all.push(conn(p, "10.1.1.11", "10.1.1.12", 0, 0));
        }
        assert_eq!(
            format_stats(&all, true),
            "Connections Stats:\n    Total: 20\n  TCP: 7\n    Conn per TCP states:\n\t  [SYN_SENT]=3\n\t  [ESTABLISHED]=2\n\t  [TIME_WAIT]=2\n  UDP: 5\n  UDPLITE: 1\n  SCTP: 1\n  ICMP: 2\n  ICMPV6: 1\n  DCCP: 1\n  IGMP: 1\n  Other: 1\n"
        );
        assert_eq!(
            format_stats(&[], true),
            "Connections Stats:\n    Total: 0\n"
        );
    }

    #[test]
    fn bkts_match_ovs_layout() {
        assert_eq!(
            format_bkts(&[15], 0),
            "Total Buckets: 1\nCurrent Connections: 15\n\n\
             +-----------+-----------------------------------------+\n\
             |  Buckets  |         Connections per Buckets         |\n\
             +-----------+-----------------------------------------+\n   0..  7   |    15\n\n"
        );
        let mut per = vec![0u32; 16];
        (per[0], per[9], per[15]) = (3, 1, 2);
        assert_eq!(
            format_bkts(&per, 1),
            "Total Buckets: 16\nCurrent Connections: 6\n\n\
             +-----------+-----------------------------------------+\n\
             |  Buckets  |         Connections per Buckets         |\n\
             +-----------+-----------------------------------------+\n\
             \x20  0..  7   |     3    .    .    .    .    .    .    .\n\
             \x20  8.. 15   |     .    .    .    .    .    .    .    2\n\n"
        );
        assert_eq!(
            format_bkts(&[0; 256], 0),
            "Total Buckets: 256\nCurrent Connections: 0\n\n"
        );
    }

    #[test]
    fn limits_and_policies_print_as_ovs() {
        assert_eq!(format_limits(0, &[]), "default limit=0\n");
        assert_eq!(
            format_limits(200, &[(5, 10, 0), (7, 3, 0), (8, 0, 0)]),
            "default limit=200\nzone=5,limit=10,count=0\nzone=7,limit=3,count=0\nzone=8,limit=0,count=0\n"
        );
        let secs = TimeoutClass::ALL.map(|c| c.default_secs());
        assert_eq!(
            format_policy(None, &secs),
            "Default, Timeout Policies: icmp_first=60 icmp_reply=30 tcp_close=30 tcp_established=86400 tcp_fin_wait=900 tcp_syn_recv=30 tcp_syn_sent=30 tcp_time_wait=45 udp_first=60 udp_multiple=30 udp_single=60"
        );
        let mut s = secs;
        for (c, v) in [
            (TimeoutClass::IcmpFirst, 5),
            (TimeoutClass::IcmpReply, 6),
            (TimeoutClass::UdpFirst, 7),
            (TimeoutClass::UdpSingle, 8),
            (TimeoutClass::UdpMultiple, 9),
            (TimeoutClass::TcpSynSent, 11),
            (TimeoutClass::TcpSynRecv, 12),
            (TimeoutClass::TcpEstablished, 13),
            (TimeoutClass::TcpFinWait, 14),
            (TimeoutClass::TcpTimeWait, 16),
            (TimeoutClass::TcpClose, 17),
        ] {
            s[c as usize] = v;
        }
        // `ovs-vsctl list-zone-tp` of the reference, less the keys userspace ignores.
        assert_eq!(
            format_policy(Some(5), &s),
            "Zone:5, Timeout Policies: icmp_first=5 icmp_reply=6 tcp_close=17 tcp_established=13 tcp_fin_wait=14 tcp_syn_recv=12 tcp_syn_sent=11 tcp_time_wait=16 udp_first=7 udp_multiple=9 udp_single=8"
        );
    }

    #[test]
    fn errors_read_as_ovs() {
        assert_eq!(
            CmdError::DatapathNotFound.ovs_text("ovs-vswitchd"),
            "ovs-vswitchd: datapath not found (Invalid argument)"
        );
        assert_eq!(
            CmdError::FlushNotFound.ovs_text("ovs-vswitchd"),
            "ovs-vswitchd: failed to flush conntrack (No such file or directory)"
        );
        assert_eq!(
            CmdError::UnrecognizedOption("-x".into()).ovs_text("ovs-vswitchd"),
            "Unrecognized option -x"
        );
    }

    fn err<T: std::fmt::Debug>(r: Result<T, CmdError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn dump_stats_bkts_arguments() {
        assert_eq!(parse_dump::<&str>(&[], DP), Ok(DumpArgs::default()));
        let a = parse_dump(&["-m", "-s", "netdev@flowpath", "zone=5"], DP).unwrap();
        assert_eq!(
            a,
            DumpArgs {
                verbose: true,
                stats: true,
                zone: Some(5)
            }
        );
        assert_eq!(parse_dump(&["-ms", "zone=5"], DP), Ok(a));
        assert_eq!(parse_dump(&["--more", "--statistics", "zone=5"], DP), Ok(a));
        assert_eq!(parse_dump(&["zone=0"], DP).unwrap().zone, Some(0));
        assert_eq!(parse_dump(&["netdev@ovs-netdev"], DP).unwrap().zone, None);
        for bad in [
            "zone=abc",
            "zone=",
            "bogus",
            "zone=70000",
            "zone=-1",
            "zone=0x7",
        ] {
            assert_eq!(err(parse_dump(&[bad], DP)), "datapath not found", "{bad}");
        }
        assert_eq!(err(parse_dump(&["-x"], DP)), "Unrecognized option -x");
        assert_eq!(
            err(parse_dump(&["--bogus"], DP)),
            "Unrecognized option --bogus"
        );

        assert_eq!(
            parse_stats(&["-m", "zone=5"], DP),
            Ok(StatsArgs {
                verbose: true,
                zone: Some(5)
            })
        );
        assert_eq!(
            parse_stats(&["--more", "zone=5"], DP),
            parse_stats(&["verbose", "zone=5"], DP)
        );
        assert_eq!(
            parse_stats(&["netdev@ovs-netdev"], DP),
            Ok(StatsArgs::default())
        );
        assert_eq!(err(parse_stats(&["zone=abc"], DP)), "datapath not found");
        assert_eq!(err(parse_stats(&["bogus"], DP)), "datapath not found");

        assert_eq!(parse_bkts::<&str>(&[], DP), Ok(0));
        assert_eq!(parse_bkts(&["gt=0"], DP), Ok(0));
        assert_eq!(parse_bkts(&["netdev@flowpath", "gt=3"], DP), Ok(3));
        assert_eq!(err(parse_bkts(&["gt=abc"], DP)), "datapath not found");
    }

    #[test]
    fn maxconns_seq_chk_arguments() {
        assert_eq!(parse_set_maxconns(&["1000"], DP), Ok(1000));
        assert_eq!(parse_set_maxconns(&["0"], DP), Ok(0));
        assert_eq!(parse_set_maxconns(&["4294967295"], DP), Ok(u32::MAX));
        assert_eq!(
            parse_set_maxconns(&["netdev@ovs-netdev", "3000"], DP),
            Ok(3000)
        );
        for bad in ["abc", "12abc", "4294967296", "99999999999999999999", ""] {
            assert_eq!(
                err(parse_set_maxconns(&[bad], DP)),
                "maxconns missing or malformed",
                "{bad}"
            );
        }
        assert_eq!(
            err(parse_set_maxconns(&["-5"], DP)),
            "Unrecognized option -5"
        );
        assert_eq!(
            err(parse_set_maxconns(&["bogus", "3000"], DP)),
            "datapath not found"
        );
        assert_eq!(parse_dp_only::<&str>(&[], DP), Ok(()));
        assert_eq!(parse_dp_only(&["netdev@ovs-netdev"], DP), Ok(()));
        assert_eq!(err(parse_dp_only(&["bogus"], DP)), "datapath not found");
        assert_eq!(err(parse_dp_only(&["extra"], DP)), "datapath not found");
    }

    #[test]
    fn limits_arguments_and_ovs_errors() {
        assert_eq!(
            parse_set_limits(&["default=200", "zone=7,limit=3", "zone=8,limit=0"], DP),
            Ok(LimitsSet {
                default: Some(200),
                zones: vec![(7, 3), (8, 0)]
            })
        );
        assert_eq!(
            parse_set_limits(&["netdev@ovs-netdev", "zone=9,limit=9"], DP)
                .unwrap()
                .zones,
            [(9, 9)]
        );
        assert_eq!(
            parse_set_limits(&["limit=0x10,zone=0x5"], DP)
                .unwrap()
                .zones,
            [(5, 16)]
        );
        for (arg, msg) in [
            ("zone=x", "failed to parse field zone"),
            ("zone=5", "failed to parse zone limit"),
            ("zone=5,limit=abc", "failed to parse field limit"),
            ("zone=5,limit=", "field limit missing value"),
            ("zone=70000,limit=5", "failed to parse field zone"),
            ("limit=5", "failed to parse zone limit"),
            ("default=abc", "invalid default limit"),
            ("default=", "invalid default limit"),
            ("foo=1", "invalid zone limit field: foo"),
            ("bogus", "field bogus missing value"),
        ] {
            assert_eq!(err(parse_set_limits(&[arg], DP)), msg, "{arg}");
        }
        assert_eq!(
            err(parse_set_limits(&["bogus", "zone=9,limit=9"], DP)),
            "field bogus missing value"
        );

        assert_eq!(parse_get_limits::<&str>(&[], DP), Ok(None));
        assert_eq!(parse_get_limits(&["zone=5"], DP), Ok(Some(vec![5])));
        assert_eq!(
            parse_get_limits(&["zone=7,5,0"], DP),
            Ok(Some(vec![7, 5, 0]))
        );
        assert_eq!(
            parse_get_limits(&["netdev@ovs-netdev", "zone=9"], DP),
            Ok(Some(vec![9]))
        );
        for (args, msg) in [
            (&["foo"][..], "invalid argument foo"),
            (&["zone=x"], "invalid zone"),
            (&["zone=99,x"], "invalid zone"),
            (&["zone=70000"], "invalid zone"),
            (&["zone="], "invalid zone"),
            (&["bogus", "zone=9"], "datapath not found"),
        ] {
            assert_eq!(err(parse_get_limits(args, DP)), msg, "{args:?}");
        }
        assert_eq!(parse_del_limits(&["zone=7,8"], DP), Ok(vec![7, 8]));
        assert_eq!(parse_del_limits(&["zone=65535"], DP), Ok(vec![65535]));
        assert_eq!(err(parse_del_limits(&["zone=x"], DP)), "invalid zone");
        assert_eq!(err(parse_del_limits(&["zone="], DP)), "invalid zone");
        assert_eq!(
            err(parse_del_limits(&["default"], DP)),
            "invalid argument default"
        );
    }

    #[test]
    fn timeout_policy_arguments() {
        assert_eq!(
            parse_set_policy(&["zone=5", "icmp_first=5,icmp_reply=6", "tcp_close=17"], DP),
            Ok(PolicySet {
                zone: Some(5),
                values: vec![
                    (TimeoutClass::IcmpFirst, 5),
                    (TimeoutClass::IcmpReply, 6),
                    (TimeoutClass::TcpClose, 17)
                ]
            })
        );
        assert_eq!(
            parse_set_policy(
                &["netdev@flowpath", "default", "udp_first=7,tcp_last_ack=18"],
                DP
            ),
            Ok(PolicySet {
                zone: None,
                values: vec![(TimeoutClass::UdpFirst, 7)]
            })
        );
        for (args, msg) in [
            (
                &["zone=5", "bogus_key=1"][..],
                "invalid timeout policy field: bogus_key",
            ),
            (&["zone=5", "icmp_first="], "field icmp_first missing value"),
            (
                &["zone=5", "icmp_first=x"],
                "failed to parse field icmp_first",
            ),
            (&["zone=x", "icmp_first=1"], "invalid zone"),
            (&["zone=70000", "icmp_first=1"], "invalid zone"),
            (
                &["icmp_first=1", "icmp_reply=1"],
                "invalid argument icmp_first=1",
            ),
            (&["zone=5"], "invalid arguments"),
        ] {
            assert_eq!(err(parse_set_policy(args, DP)), msg, "{args:?}");
        }
        assert_eq!(parse_get_policy::<&str>(&[], DP), Ok(None));
        assert_eq!(parse_get_policy(&["zone=5"], DP), Ok(Some(5)));
        assert_eq!(err(parse_get_policy(&["zone=x"], DP)), "invalid zone");
        assert_eq!(parse_del_policy(&["flowpath", "zone=5"], DP), Ok(5));
        assert_eq!(
            err(parse_del_policy(&["default"], DP)),
            "invalid argument default"
        );
    }

    #[test]
    fn flush_arguments_and_ovs_errors() {
        let f = |args: &[&str]| parse_flush(args, DP);
        assert_eq!(f(&[]), Ok(FlushArgs::default()));
        assert_eq!(f(&["zone=5"]).unwrap().zone, Some(5));
        assert_eq!(f(&["zone=007"]).unwrap().zone, Some(7));
        assert_eq!(f(&["zone=5", ""]), f(&["zone=5"]));
        // The dp argument works (OVS 3.1 takes it for a tuple).
        assert_eq!(f(&["netdev@ovs-netdev", "zone=7"]).unwrap().zone, Some(7));

        let full = f(&[
            "zone=5",
            "ct_nw_src=10.1.1.11,ct_nw_dst=10.1.1.12,ct_nw_proto=6,ct_tp_src=1111,ct_tp_dst=2222",
        ])
        .unwrap();
        assert_eq!(full.m.v6, Some(false));
        assert_eq!(full.m.proto, Some(6));
        assert_eq!(full.m.orig.src, Some(a4("10.1.1.11")));
        assert_eq!(full.m.orig.dport, Some(2222));
        assert!(full.m.is_exact());
        let icmp = f(&["ct_nw_src=10.1.1.1,ct_nw_dst=10.1.1.2,ct_nw_proto=1,icmp_type=8,icmp_code=0,icmp_id=10"]).unwrap();
        assert_eq!(
            icmp.m.orig,
            TupleMatch {
                src: Some(a4("10.1.1.1")),
                dst: Some(a4("10.1.1.2")),
                icmp_type: Some(8),
                icmp_code: Some(0),
                icmp_id: Some(10),
                ..TupleMatch::default()
            }
        );
        assert!(icmp.m.is_exact());
        let v6 =
            f(&["ct_ipv6_src=fc00::1,ct_ipv6_dst=fc00::2,ct_nw_proto=6,ct_tp_src=1,ct_tp_dst=2"])
                .unwrap();
        assert_eq!(v6.m.v6, Some(true));
        assert_eq!(v6.m.orig.dst, Some(a6("fc00::2")));
        // Partial tuples, both tuples, a reply-only tuple.
        assert!(!f(&["zone=5", "ct_nw_src=10.1.1.11"]).unwrap().m.is_exact());
        assert!(
            !f(&["ct_nw_src=10.1.1.11,ct_nw_dst=10.1.1.12"])
                .unwrap()
                .m
                .is_exact()
        );
        let both = f(&[
            "zone=5",
            "ct_nw_src=10.1.1.11,ct_nw_dst=10.1.1.12,ct_nw_proto=6,ct_tp_src=1111,ct_tp_dst=2222",
            "ct_nw_src=10.1.1.12,ct_nw_dst=10.1.1.11,ct_nw_proto=6,ct_tp_src=2222,ct_tp_dst=1111",
        ])
        .unwrap();
        assert!(!both.m.is_exact());
        assert_eq!(both.m.reply.sport, Some(2222));
        let r = f(&["", "ct_nw_src=10.1.1.12"]).unwrap();
        assert!(r.m.orig.is_empty());
        assert_eq!(r.m.reply.src, Some(a4("10.1.1.12")));
        assert_eq!(
            f(&["zone=5", "ct_nw_proto=1,icmp_id=78"])
                .unwrap()
                .m
                .orig
                .icmp_id,
            Some(78)
        );
        assert_eq!(
            f(&["icmp_id=78,ct_nw_proto=1"]).unwrap().m.orig.icmp_id,
            Some(78)
        );
        assert_eq!(
            f(&["ct_tp_src=0x50,ct_nw_proto=6"]).unwrap().m.orig.sport,
            Some(80)
        );

        for (args, msg) in [
            (&["zone=abc"][..], "failed to parse zone"),
            (&["zone="], "failed to parse zone"),
            (&["zone=70000"], "failed to parse zone"),
            (&["zone=-1"], "failed to parse zone"),
            (&["zone=0x7"], "failed to parse zone"),
            (&["zone=5", "zone=6"], "invalid conntrack tuple field: zone"),
            (&["foo=1"], "invalid conntrack tuple field: foo"),
            (
                &["zone=5", "ct_nw_src=1.2.3"],
                "failed to parse field ct_nw_src",
            ),
            (
                &["zone=5", "ct_nw_src=10.1.1.300"],
                "failed to parse field ct_nw_src",
            ),
            (
                &["zone=5", "ct_nw_proto=abc"],
                "failed to parse field ct_nw_proto",
            ),
            (
                &["zone=5", "ct_nw_proto=256"],
                "failed to parse field ct_nw_proto",
            ),
            (
                &["zone=5", "ct_tp_src=99999"],
                "failed to parse field ct_tp_src",
            ),
            (&["zone=5", "ct_tp_src=80"], "port is set without protocol"),
            (
                &["zone=5", "ct_nw_src=10.1.1.11,ct_ipv6_dst=fc00::1"],
                "the L3 protocol does not match fc00::1",
            ),
            (
                &["ct_nw_src=10.1.1.11", "ct_ipv6_src=fc00::1"],
                "the L3 protocol does not match fc00::1",
            ),
            (
                &["zone=5", "ct_ipv6_src=zz::1"],
                "failed to parse field ct_ipv6_src",
            ),
            (&["zone=5", "icmp_type=8"], "invalid L4 fields"),
            (&["ct_nw_proto=6,icmp_type=8"], "invalid L4 fields"),
            (&["ct_nw_proto=1,ct_tp_src=8"], "invalid L4 fields"),
            (
                &["ct_nw_src=10.1.1.1,ct_nw_src=10.1.1.2"],
                "ct_nw_src is set multiple times",
            ),
            (
                &["ct_nw_proto=6,ct_nw_proto=17"],
                "ct_nw_proto is set multiple times",
            ),
            (
                &["ct_nw_proto=6", "ct_nw_proto=17"],
                "ct_nw_proto is set multiple times",
            ),
            (
                &[
                    "zone=5",
                    "ct_nw_src=10.1.1.11",
                    "ct_nw_src=10.1.1.12",
                    "ct_nw_src=10.1.1.13",
                ],
                "invalid arguments",
            ),
            (&["bogus@dp"], "field bogus@dp missing value"),
            (&["ovs-netdev", "zone=7"], "field ovs-netdev missing value"),
            (&["ct_nw_src"], "field ct_nw_src missing value"),
            (&["ct_nw_src="], "field ct_nw_src missing value"),
        ] {
            assert_eq!(err(f(args)), msg, "{args:?}");
        }
        // The same protocol in both tuples is fine.
        assert!(f(&["ct_nw_proto=6", "ct_nw_proto=6"]).is_ok());
    }

    // -- Against a real table: populate it with packets, then run the commands. ----------------

    fn ipv4_frame(proto: u8, src: &str, dst: &str, l4: &[u8]) -> Vec<u8> {
        let mut f = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0];
        f[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        f.extend_from_slice(&src.parse::<Ipv4Addr>().unwrap().octets());
        f.extend_from_slice(&dst.parse::<Ipv4Addr>().unwrap().octets());
        f.extend_from_slice(l4);
        f
    }

    fn ipv6_frame(proto: u8, src: &str, dst: &str, l4: &[u8]) -> Vec<u8> {
        let mut f = vec![0x60, 0, 0, 0, 0, 0, proto, 64];
        f[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
        f.extend_from_slice(&a6(src));
        f.extend_from_slice(&a6(dst));
        f.extend_from_slice(l4);
        f
    }

    fn udp(sport: u16, dport: u16) -> Vec<u8> {
        let mut u = Vec::new();
        u.extend_from_slice(&sport.to_be_bytes());
        u.extend_from_slice(&dport.to_be_bytes());
        u.extend_from_slice(&[0, 9, 0, 0, b'x']);
        u
    }

    fn tcp_syn(sport: u16, dport: u16) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(&sport.to_be_bytes());
        t.extend_from_slice(&dport.to_be_bytes());
        t.extend_from_slice(&[0, 0, 3, 0xe8, 0, 0, 0, 0, 0x50, 0x02, 0x20, 0, 0, 0, 0, 0]);
        t
    }

    fn echo(ty: u8, id: u16) -> Vec<u8> {
        let mut e = vec![ty, 0, 0, 0];
        e.extend_from_slice(&id.to_be_bytes());
        e.extend_from_slice(&[0, 1]);
        e
    }

    /// Commits `frame` in `zone` with mark 42 and label 0x1020304 (as the reference's flows).
    fn commit(ct: &Conntrack, frame: &[u8], zone: u16) {
        let v6 = frame[0] >> 4 == 6;
        let args = CtArgs {
            zone,
            commit: true,
            mark: Some((42, u32::MAX)),
            label: Some((0x1020304, u128::MAX)),
            ..CtArgs::default()
        };
        let pkt = CtPacket {
            frame,
            l3: 0,
            v6,
            frag_l4_len: None,
            verified: true,
            natted: false,
        };
        let mut md = CtMeta::default();
        ct.process(&mut CtCache::new(), &pkt, &mut md, &args, crate::now_ms());
        assert_eq!(md.state & crate::state::INV, 0, "{frame:x?}");
    }

    /// The reference's flush population: zone 5 TCP x3, UDP, ICMP x2, UDPv6, ICMPv6; zone 7
    /// UDP; zone 0 UDP.
    fn populate(ct: &Conntrack) {
        let (a, b) = ("10.1.1.11", "10.1.1.12");
        commit(ct, &ipv4_frame(TCP, a, b, &tcp_syn(1111, 2222)), 5);
        commit(ct, &ipv4_frame(TCP, a, b, &tcp_syn(1112, 2222)), 5);
        commit(
            ct,
            &ipv4_frame(TCP, "10.1.1.13", b, &tcp_syn(1111, 2222)),
            5,
        );
        commit(ct, &ipv4_frame(UDP, a, b, &udp(3333, 4444)), 5);
        commit(ct, &ipv4_frame(ICMP, a, b, &echo(8, 77)), 5);
        commit(ct, &ipv4_frame(ICMP, a, b, &echo(8, 78)), 5);
        commit(
            ct,
            &ipv6_frame(UDP, "fc00::11", "fc00::12", &udp(3333, 4444)),
            5,
        );
        commit(
            ct,
            &ipv6_frame(ICMPV6, "fc00::11", "fc00::12", &echo(128, 78)),
            5,
        );
        commit(ct, &ipv4_frame(UDP, a, b, &udp(3333, 7777)), 7);
        commit(ct, &ipv4_frame(UDP, a, b, &udp(3333, 7000)), 0);
    }

    fn cmd(ct: &Conntrack, c: CtCommand, args: &[&str]) -> Result<String, CmdError> {
        run(ct, c, args, DP)
    }

    /// The remaining connections as `PROTO SRC:SPORT>DST:DPORT@ZONE`.
    fn left(ct: &Conntrack) -> Vec<String> {
        ct.dump(None, crate::now_ms())
            .iter()
            .map(|c| {
                format!(
                    "{} {}:{}>{}:{}@{}",
                    proto_name(c.orig.proto),
                    format_addr(&c.orig.src, c.orig.v6),
                    c.orig.sport,
                    format_addr(&c.orig.dst, c.orig.v6),
                    c.orig.dport,
                    c.orig.zone
                )
            })
            .collect()
    }

    fn flushed(args: &[&str]) -> (Result<String, CmdError>, Vec<String>) {
        let ct = Conntrack::new();
        populate(&ct);
        assert_eq!(ct.n_conns(), 10);
        let r = cmd(&ct, CtCommand::FlushConntrack, args);
        (r, left(&ct))
    }

    #[test]
    fn dump_of_a_real_table() {
        let ct = Conntrack::new();
        populate(&ct);
        let out = cmd(&ct, CtCommand::DumpConntrack, &["zone=5"]).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 8, "{out}");
        for want in [
            "tcp,orig=(src=10.1.1.13,dst=10.1.1.12,sport=1111,dport=2222),reply=(src=10.1.1.12,dst=10.1.1.13,sport=2222,dport=1111),zone=5,mark=42,labels=0x1020304,protoinfo=(state=SYN_SENT)",
            "icmpv6,orig=(src=fc00::11,dst=fc00::12,id=78,type=128,code=0),reply=(src=fc00::12,dst=fc00::11,id=78,type=129,code=0),zone=5,mark=42,labels=0x1020304",
            "udp,orig=(src=10.1.1.11,dst=10.1.1.12,sport=3333,dport=4444),reply=(src=10.1.1.12,dst=10.1.1.11,sport=4444,dport=3333),zone=5,mark=42,labels=0x1020304",
            "icmp,orig=(src=10.1.1.11,dst=10.1.1.12,id=77,type=8,code=0),reply=(src=10.1.1.12,dst=10.1.1.11,id=77,type=0,code=0),zone=5,mark=42,labels=0x1020304",
            "udp,orig=(src=fc00::11,dst=fc00::12,sport=3333,dport=4444),reply=(src=fc00::12,dst=fc00::11,sport=4444,dport=3333),zone=5,mark=42,labels=0x1020304",
        ] {
            assert!(lines.contains(&want), "{want}\n{out}");
        }
        assert_eq!(cmd(&ct, CtCommand::DumpConntrack, &["zone=9"]).unwrap(), "");
        // -s: the class timeout, less the time since the commit.
        let s = cmd(&ct, CtCommand::DumpConntrack, &["-s", "zone=7"]).unwrap();
        let secs: u64 = s
            .strip_prefix("udp,orig=(src=10.1.1.11,dst=10.1.1.12,sport=3333,dport=7777),reply=(src=10.1.1.12,dst=10.1.1.11,sport=7777,dport=3333),zone=7,timeout=")
            .and_then(|r| r.strip_suffix(",mark=42,labels=0x1020304\n"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{s}"));
        assert!((58..=60).contains(&secs), "{s}");
        let m = cmd(&ct, CtCommand::DumpConntrack, &["-m", "zone=0"]).unwrap();
        assert!(
            m.contains("),id=") && m.contains(",status=0,mark=42"),
            "{m}"
        );
        let st = cmd(&ct, CtCommand::StatsShow, &["-m"]).unwrap();
        assert_eq!(
            st,
            "Connections Stats:\n    Total: 10\n  TCP: 3\n    Conn per TCP states:\n\t  [SYN_SENT]=3\n  UDP: 4\n  ICMP: 2\n  ICMPV6: 1\n"
        );
        assert_eq!(
            cmd(&ct, CtCommand::StatsShow, &["zone=7"]).unwrap(),
            "Connections Stats:\n    Total: 1\n  UDP: 1\n"
        );
        let b = cmd(&ct, CtCommand::Bkts, &[]).unwrap();
        assert!(
            b.starts_with("Total Buckets: 256\nCurrent Connections: 10\n\n+---"),
            "{b}"
        );
        assert_eq!(b.lines().filter(|l| l.contains("..")).count(), 32, "{b}");
        assert_eq!(cmd(&ct, CtCommand::GetNconns, &[]).unwrap(), "10");
    }

    #[test]
    fn flush_by_zone_exact_and_partial_tuples() {
        let all = {
            let ct = Conntrack::new();
            populate(&ct);
            left(&ct)
        };
        let without = |gone: &[&str]| -> Vec<String> {
            all.iter()
                .filter(|l| !gone.contains(&l.as_str()))
                .cloned()
                .collect()
        };
        assert_eq!(flushed(&[]), (Ok(String::new()), vec![]));
        let (r, l) = flushed(&["zone=7"]);
        assert_eq!(
            (r, l),
            (
                Ok(String::new()),
                without(&["udp 10.1.1.11:3333>10.1.1.12:7777@7"])
            )
        );
        assert_eq!(flushed(&["zone=5"]).1.len(), 2);
        // An exact tuple: zone 0 unless given; must exist.
        let t =
            "ct_nw_src=10.1.1.11,ct_nw_dst=10.1.1.12,ct_nw_proto=6,ct_tp_src=1111,ct_tp_dst=2222";
        assert_eq!(flushed(&[t]).0, Err(CmdError::FlushNotFound));
        assert_eq!(
            flushed(&["zone=5", t]).1,
            without(&["tcp 10.1.1.11:1111>10.1.1.12:2222@5"])
        );
        // The reply direction's tuple names no connection.
        let r =
            "ct_nw_src=10.1.1.12,ct_nw_dst=10.1.1.11,ct_nw_proto=6,ct_tp_src=2222,ct_tp_dst=1111";
        assert_eq!(flushed(&["zone=5", r]).0, Err(CmdError::FlushNotFound));
        // ... but a reply-only partial tuple does.
        assert_eq!(
            flushed(&["zone=5", "", r]).1,
            without(&["tcp 10.1.1.11:1111>10.1.1.12:2222@5"])
        );
        // Both tuples: a filter.
        assert_eq!(
            flushed(&["zone=5", t, r]).1,
            without(&["tcp 10.1.1.11:1111>10.1.1.12:2222@5"])
        );
        // Exact ICMP tuples: type, code and id (0 when absent).
        let i = "ct_nw_src=10.1.1.11,ct_nw_dst=10.1.1.12,ct_nw_proto=1,icmp_type=8,icmp_code=0,icmp_id=77";
        assert_eq!(
            flushed(&["zone=5", i]).1,
            without(&["icmp 10.1.1.11:77>10.1.1.12:77@5"])
        );
        let i0 = "ct_nw_src=10.1.1.11,ct_nw_dst=10.1.1.12,ct_nw_proto=1,icmp_id=78";
        assert_eq!(flushed(&["zone=5", i0]).0, Err(CmdError::FlushNotFound));
        // ICMPv6 (OVS 3.1 aborts here).
        let i6 =
            "ct_ipv6_src=fc00::11,ct_ipv6_dst=fc00::12,ct_nw_proto=58,icmp_type=128,icmp_id=78";
        assert_eq!(
            flushed(&["zone=5", i6]).1,
            without(&["icmpv6 fc00::11:78>fc00::12:78@5"])
        );
        assert_eq!(
            flushed(&["zone=5", "ct_ipv6_src=fc00::11"]).1,
            without(&[
                "icmpv6 fc00::11:78>fc00::12:78@5",
                "udp fc00::11:3333>fc00::12:4444@5"
            ])
        );
        // Partial: without a zone, every zone.
        let not_from_11: Vec<String> = all
            .iter()
            .filter(|l| !l.contains(" 10.1.1.11:"))
            .cloned()
            .collect();
        assert_eq!(not_from_11.len(), 3);
        assert_eq!(flushed(&["ct_nw_src=10.1.1.11"]).1, not_from_11);
        let udp_left = flushed(&["ct_nw_proto=17"]).1;
        assert!(
            udp_left.iter().all(|l| !l.starts_with("udp")),
            "{udp_left:?}"
        );
        assert_eq!(udp_left.len(), 6);
        assert_eq!(flushed(&["zone=0", "ct_nw_proto=17"]).1.len(), 9);
        // Partial ICMP tuples work (OVS 3.1 removes nothing).
        assert_eq!(
            flushed(&["zone=5", "ct_nw_src=10.1.1.11,ct_nw_proto=1,icmp_id=78"]).1,
            without(&["icmp 10.1.1.11:78>10.1.1.12:78@5"])
        );
        assert_eq!(flushed(&["zone=5", "ct_nw_proto=1"]).1.len(), 8);
        assert_eq!(
            flushed(&["zone=5", "ct_nw_proto=1,icmp_type=0"]).1.len(),
            10
        );
        assert_eq!(
            flushed(&["zone=5", "ct_nw_dst=10.1.1.12,ct_nw_proto=6,ct_tp_dst=2222"])
                .1
                .len(),
            7
        );
        // A partial miss is no error.
        assert_eq!(
            flushed(&["zone=5", "ct_nw_src=10.1.1.99"]),
            (Ok(String::new()), all.clone())
        );
        // Errors leave the table alone.
        let (r, l) = flushed(&["zone=5", "ct_tp_src=80"]);
        assert_eq!(
            (r.unwrap_err().to_string(), l),
            ("port is set without protocol".into(), all)
        );
    }

    #[test]
    fn flush_of_a_nat_entry_takes_the_original_tuple() {
        use crate::table::{NatKind, NatSpec};
        let ct = Conntrack::new();
        let mut nat = NatSpec {
            kind: Some(NatKind::Src),
            has_addr: true,
            port_min: 20000,
            port_max: 20010,
            ..NatSpec::default()
        };
        nat.addr_min = a4("10.1.1.100");
        nat.addr_max = a4("10.1.1.100");
        let frame = ipv4_frame(UDP, "10.1.1.1", "10.1.1.2", &udp(56004, 9002));
        let args = CtArgs {
            zone: 5,
            commit: true,
            mark: Some((42, u32::MAX)),
            nat: Some(nat),
            ..CtArgs::default()
        };
        let pkt = CtPacket {
            frame: &frame,
            l3: 0,
            v6: false,
            frag_l4_len: None,
            verified: true,
            natted: false,
        };
        ct.process(
            &mut CtCache::new(),
            &pkt,
            &mut CtMeta::default(),
            &args,
            crate::now_ms(),
        );
        let out = cmd(&ct, CtCommand::DumpConntrack, &[]).unwrap();
        let c = &ct.dump(None, crate::now_ms())[0];
        let port = c.reply.dport;
        assert!((20000..=20010).contains(&port), "{out}");
        assert_eq!(
            out,
            format!(
                "udp,orig=(src=10.1.1.1,dst=10.1.1.2,sport=56004,dport=9002),reply=(src=10.1.1.2,dst=10.1.1.100,sport=9002,dport={port}),zone=5,mark=42\n"
            )
        );
        let reply = format!(
            "ct_nw_src=10.1.1.2,ct_nw_dst=10.1.1.100,ct_nw_proto=17,ct_tp_src=9002,ct_tp_dst={port}"
        );
        assert_eq!(
            cmd(&ct, CtCommand::FlushConntrack, &["zone=5", &reply]),
            Err(CmdError::FlushNotFound)
        );
        assert_eq!(
            cmd(&ct, CtCommand::FlushConntrack, &["zone=5", "", &reply]),
            Ok(String::new())
        );
        assert_eq!(ct.n_conns(), 0);
    }

    #[test]
    fn limits_maxconns_seq_chk_and_policies_round_trip() {
        let ct = Conntrack::new();
        let c = |k, a: &[&str]| cmd(&ct, k, a);
        assert_eq!(c(CtCommand::GetMaxconns, &[]).unwrap(), "3000000");
        assert_eq!(
            c(CtCommand::SetMaxconns, &["1000"]).unwrap(),
            "setting maxconns successful"
        );
        assert_eq!(
            c(CtCommand::GetMaxconns, &["netdev@ovs-netdev"]).unwrap(),
            "1000"
        );
        assert_eq!(
            c(CtCommand::GetMaxconns, &["bogus"]),
            Err(CmdError::DatapathNotFound)
        );

        assert_eq!(c(CtCommand::GetLimits, &[]).unwrap(), "default limit=0\n");
        assert_eq!(
            c(CtCommand::GetLimits, &["zone=5"]).unwrap(),
            "default limit=0\nzone=5,limit=0,count=0\n"
        );
        c(CtCommand::SetLimits, &["zone=5,limit=10"]).unwrap();
        c(CtCommand::SetLimits, &["default=100"]).unwrap();
        assert_eq!(
            c(CtCommand::GetLimits, &["zone=7,5,0"]).unwrap(),
            "default limit=100\nzone=7,limit=100,count=0\nzone=5,limit=10,count=0\nzone=0,limit=100,count=0\n"
        );
        c(
            CtCommand::SetLimits,
            &["default=200", "zone=7,limit=3", "zone=9,limit=9"],
        )
        .unwrap();
        populate(&ct);
        assert_eq!(
            c(CtCommand::GetLimits, &[]).unwrap(),
            "default limit=200\nzone=5,limit=10,count=8\nzone=7,limit=3,count=1\nzone=9,limit=9,count=0\n"
        );
        c(CtCommand::DelLimits, &["zone=7,9"]).unwrap();
        c(CtCommand::DelLimits, &["zone=9"]).unwrap();
        assert_eq!(
            c(CtCommand::GetLimits, &[]).unwrap(),
            "default limit=200\nzone=5,limit=10,count=8\n"
        );
        assert_eq!(
            c(CtCommand::GetLimits, &["zone=70000"]),
            Err(CmdError::InvalidZone)
        );

        assert_eq!(
            c(CtCommand::GetTcpSeqChk, &[]).unwrap(),
            "TCP sequence checking: enabled"
        );
        assert_eq!(
            c(CtCommand::DisableTcpSeqChk, &[]).unwrap(),
            "disabling TCP sequence checking successful"
        );
        assert!(!ct.tcp_seq_chk());
        assert_eq!(
            c(CtCommand::GetTcpSeqChk, &["netdev@ovs-netdev"]).unwrap(),
            "TCP sequence checking: disabled"
        );
        assert_eq!(
            c(CtCommand::EnableTcpSeqChk, &[]).unwrap(),
            "enabling TCP sequence checking successful"
        );
        assert!(ct.tcp_seq_chk());

        let default = c(CtCommand::GetTimeoutPolicy, &[]).unwrap();
        assert!(
            default.starts_with("Default, Timeout Policies: icmp_first=60 "),
            "{default}"
        );
        assert_eq!(default.lines().count(), 1);
        c(
            CtCommand::SetTimeoutPolicy,
            &["zone=5", "icmp_first=5,udp_first=7"],
        )
        .unwrap();
        let z5 = c(CtCommand::GetTimeoutPolicy, &["zone=5"]).unwrap();
        assert!(
            z5.starts_with("Zone:5, Timeout Policies: icmp_first=5 icmp_reply=30 ")
                && z5.contains(" udp_first=7 "),
            "{z5}"
        );
        let all = c(CtCommand::GetTimeoutPolicy, &[]).unwrap();
        assert_eq!(all, format!("{default}\n{z5}"));
        c(CtCommand::DelTimeoutPolicy, &["zone=5"]).unwrap();
        assert_eq!(
            c(CtCommand::DelTimeoutPolicy, &["zone=5"])
                .unwrap_err()
                .to_string(),
            "zone id 5 does not exist"
        );
        assert_eq!(c(CtCommand::GetTimeoutPolicy, &[]).unwrap(), default);
        c(CtCommand::SetTimeoutPolicy, &["default", "icmp_first=61"]).unwrap();
        assert_eq!(ct.timeouts(None)[TimeoutClass::IcmpFirst as usize], 61);
    }

    #[test]
    fn commands_are_registered_with_ovs_usage() {
        let names: Vec<&str> = CtCommand::ALL.iter().map(|c| c.name()).collect();
        assert!(names.contains(&"dpctl/ct-bkts"));
        assert_eq!(CtCommand::SetMaxconns.args(), (1, 2));
        assert_eq!(CtCommand::DumpConntrack.usage(), "[-m] [-s] [dp] [zone=N]");
        for c in CtCommand::ALL {
            let (lo, hi) = c.args();
            assert!(lo <= hi && c.name().starts_with("dpctl/"));
        }
    }
}
