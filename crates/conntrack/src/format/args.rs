//! The arguments of the connection tracker's `dpctl/*` commands, parsed as OVS's `lib/dpctl.c`
//! parses them (the generic options of `dpctl_unixctl_handler`, then each command's own):
//! pure functions from the argument list to what the command acts on, or to OVS's error.
//! The tuples of `dpctl/flush-conntrack` are parsed beside the match they make (`flush`).

use super::CmdError;
use crate::table::TimeoutClass;

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
pub(super) fn skip_dp<'a>(rest: &'a [&'a str], dp_names: &[&str]) -> &'a [&'a str] {
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
pub(super) fn num<T: TryFrom<u64>>(s: &str) -> Option<T> {
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
pub(super) fn key_values(s: &str) -> impl Iterator<Item = (&str, &str)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_util::{DP, err};

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
}
