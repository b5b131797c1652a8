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
//! The parts, each in its file: the arguments (`args`, as OVS's `lib/dpctl.c`), the match
//! and the flush of `dpctl/flush-conntrack` (`flush`, as OVS's `lib/ofp-ct.c`), and the
//! text of connections, statistics, limits and policies (`ct_dpif`, as OVS's
//! `lib/ct-dpif.c`); this file has the commands, their errors, and [`run`].
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
//! Two things the table's limits do not do as OVS 3.1's userspace datapath does (its own
//! `ovs-vswitchd --enable-dummy=override`, `ct(commit)` in zones 6 and 7 after
//! `ct-set-limits default=2`), both as later OVS releases do them:
//! - `default=0` takes the default limit away; in OVS 3.1 it is a limit of 0 for every zone
//!   without its own, once a default has been set (no commit in them passes);
//! - zones without their own limit: OVS 3.1 counts them together against the default limit
//!   (one count, which `ct-get-limits` shows for each such zone: two commits in zone 6 leave
//!   zone 7 none); here each zone has the default limit to itself.

mod args;
mod ct_dpif;
mod flush;

pub use args::{
    DumpArgs, IGNORED_POLICY_KEYS, LimitsSet, Opts, PolicySet, StatsArgs, parse_bkts,
    parse_del_limits, parse_del_policy, parse_dp_only, parse_dump, parse_get_limits,
    parse_get_policy, parse_set_limits, parse_set_maxconns, parse_set_policy, parse_stats,
    split_options,
};
pub(crate) use args::{dec, dp_only};
pub use ct_dpif::{
    TcpPeers, bucket_of, format_addr, format_bkts, format_conn, format_limits, format_policy,
    format_stats, format_tuple, proto_name,
};
pub use flush::{CtMatch, FlushArgs, TupleMatch, flush, parse_ct_tuple, parse_flush};

use crate::table::{Conntrack, SHARDS};
use ct_dpif::tcp_peers_of;

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
                        let l = ct.zone_limit(z).unwrap_or(default);
                        (z, l, ct.zone_conns(z))
                    })
                    .collect(),
            };
            Ok(format_limits(default, &rows))
        }
        CtCommand::DelLimits => {
            for z in parse_del_limits(args, dp_names)? {
                ct.del_zone_limit(z);
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

/// Datapath names, addresses and errors for the commands' tests.
#[cfg(test)]
mod test_util {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    pub(super) const DP: &[&str] = &["netdev@flowpath", "flowpath", "netdev@ovs-netdev"];

    pub(super) fn a4(s: &str) -> [u8; 16] {
        let mut a = [0; 16];
        a[..4].copy_from_slice(&s.parse::<Ipv4Addr>().unwrap().octets());
        a
    }

    pub(super) fn a6(s: &str) -> [u8; 16] {
        s.parse::<Ipv6Addr>().unwrap().octets()
    }

    pub(super) fn err<T: std::fmt::Debug>(r: Result<T, CmdError>) -> String {
        r.unwrap_err().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::{DP, a4, a6};
    use super::*;
    use crate::key::{ICMP, ICMPV6, TCP, UDP};
    use crate::table::{CtArgs, CtCache, CtMeta, CtPacket, TimeoutClass};
    use std::net::Ipv4Addr;

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
        // A zone's own limit of 0 is a limit (OVS's userspace datapath), listed as such.
        c(CtCommand::SetLimits, &["zone=8,limit=0"]).unwrap();
        assert_eq!(
            c(CtCommand::GetLimits, &[]).unwrap(),
            "default limit=200\nzone=5,limit=10,count=8\nzone=8,limit=0,count=0\n"
        );
        c(CtCommand::DelLimits, &["zone=8"]).unwrap();
        assert_eq!(
            c(CtCommand::GetLimits, &["zone=8"]).unwrap(),
            "default limit=200\nzone=8,limit=200,count=0\n"
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
