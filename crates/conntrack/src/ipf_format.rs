//! The fragment reassembler's management commands as OVS words them: `dpctl/ipf-set-enabled`,
//! `dpctl/ipf-set-disabled`, `dpctl/ipf-set-min-frag`, `dpctl/ipf-set-max-nfrags` and
//! `dpctl/ipf-get-status [-m]` (OVS 3.1's `lib/dpctl.c` and `lib/ipf.c`).
//!
//! Parsing ([`parse`]) and output ([`format_status`]) are pure functions; the caller owns the
//! reassemblers (one per PMD thread in the datapath), applies what [`IpfRequest::apply`]
//! gives to each of them and adds their [`FragStatus`] reports up for the status.
//!
//! OVS's six counters per IP version map onto [`FragCounters`] as [`IpfCounters::from`] says.
//! Refusals OVS does not count (reassembly disabled, malformed headers, the table full) are
//! not in them either; `dpif-netdev/pmd-drop-show` has every fragment drop.
//!
//! Where OVS 3.1 misbehaves, these commands do the sensible thing instead (as the conntrack
//! commands of [`crate::format`]):
//! - a `[dp]` word that is not this datapath is `datapath not found` for every command (OVS
//!   ignores it in `ipf-set-enabled`, `ipf-set-disabled` and `ipf-set-max-nfrags`);
//! - `v4`/`v6` and numbers are whole words (OVS reads `v4x` as `v4` and `12abc` as 12);
//! - a list's `recirc_id` is always 0: flowpath reassembles before the recirculation, keyed by
//!   zone, addresses, protocol and identification only;
//! - the settings and `max num frags` are per PMD thread: each has its own reassembler, so
//!   with N threads up to N times `max num frags` fragments may be held (`num frag` is the
//!   total).

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::format::{CmdError, dec, dp_only, split_options};
use crate::frag::{FragConfig, FragCounters, FragDrop, FragList, FragStatus};

/// The commands, with the usage and argument counts `list-commands` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpfCommand {
    SetEnabled,
    SetDisabled,
    SetMinFrag,
    SetMaxNfrags,
    GetStatus,
}

impl IpfCommand {
    pub const ALL: [IpfCommand; 5] = [
        IpfCommand::SetEnabled,
        IpfCommand::SetDisabled,
        IpfCommand::SetMinFrag,
        IpfCommand::SetMaxNfrags,
        IpfCommand::GetStatus,
    ];

    /// The control-socket command name.
    pub fn name(self) -> &'static str {
        match self {
            IpfCommand::SetEnabled => "dpctl/ipf-set-enabled",
            IpfCommand::SetDisabled => "dpctl/ipf-set-disabled",
            IpfCommand::SetMinFrag => "dpctl/ipf-set-min-frag",
            IpfCommand::SetMaxNfrags => "dpctl/ipf-set-max-nfrags",
            IpfCommand::GetStatus => "dpctl/ipf-get-status",
        }
    }

    /// OVS's usage text.
    pub fn usage(self) -> &'static str {
        match self {
            IpfCommand::SetEnabled | IpfCommand::SetDisabled => "[dp] v4|v6",
            IpfCommand::SetMinFrag => "[dp] v4|v6 minfragment",
            IpfCommand::SetMaxNfrags => "[dp] maxfrags",
            IpfCommand::GetStatus => "[dp]",
        }
    }

    /// Fewest and most arguments, options included (OVS's counts).
    pub fn args(self) -> (usize, usize) {
        match self {
            IpfCommand::SetEnabled | IpfCommand::SetDisabled | IpfCommand::SetMaxNfrags => (1, 2),
            IpfCommand::SetMinFrag => (2, 3),
            IpfCommand::GetStatus => (0, 2),
        }
    }
}

/// What a command asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpfRequest {
    /// Turn reassembly of one IP version on or off.
    SetEnabled { v6: bool, on: bool },
    /// The smallest non-last fragment of one IP version, IP header included.
    SetMinFrag { v6: bool, size: u32 },
    /// Fragments held at once.
    SetMaxNfrags(u32),
    /// The status, with the datagrams waiting when `lists`.
    GetStatus { lists: bool },
}

impl IpfRequest {
    /// The configuration after this request, within OVS's bounds ([`FragConfig::check`]), or
    /// `None` for the status. A new IPv4 minimum also sets how many fragments one datagram may
    /// have, as OVS's `ipf_set_min_frag` does.
    pub fn apply(&self, cfg: &FragConfig) -> Result<Option<FragConfig>, CmdError> {
        let mut c = cfg.clone();
        match *self {
            IpfRequest::SetEnabled { v6: false, on } => c.enabled_v4 = on,
            IpfRequest::SetEnabled { v6: true, on } => c.enabled_v6 = on,
            IpfRequest::SetMinFrag { v6, size } => {
                let size = size as usize;
                if v6 {
                    c.min_frag_size_v6 = size;
                } else {
                    c.min_frag_size_v4 = size;
                    c.max_frags_per_datagram = FragConfig::v4_frags_per_datagram(size);
                }
                c.check().map_err(|_| CmdError::IpfMinFragTooSmall)?;
            }
            IpfRequest::SetMaxNfrags(n) => {
                c.max_frags = n as usize;
                c.check().map_err(|_| CmdError::IpfMaxFragsFailed)?;
            }
            IpfRequest::GetStatus { .. } => return Ok(None),
        }
        Ok(Some(c))
    }

    /// OVS's reply to a setting that took (no newline, as OVS's).
    pub fn reply(&self) -> &'static str {
        match self {
            IpfRequest::SetEnabled { on: true, .. } => {
                "enabling fragmentation reassembly successful"
            }
            IpfRequest::SetEnabled { on: false, .. } => {
                "disabling fragmentation reassembly successful"
            }
            IpfRequest::SetMinFrag { .. } => "setting minimum fragment size successful",
            IpfRequest::SetMaxNfrags(_) => "setting maximum fragments successful",
            IpfRequest::GetStatus { .. } => "",
        }
    }
}

/// `v4` or `v6`: whether IPv6.
fn family(s: Option<&&str>) -> Option<bool> {
    match s.copied() {
        Some("v4") => Some(false),
        Some("v6") => Some(true),
        _ => None,
    }
}

/// Parses `cmd`'s arguments; `dp_names` are the names the datapath answers to in `[dp]`.
/// OVS reads the arguments from the end (the family and value last), so a missing one is
/// reported as OVS reports a bad one.
pub fn parse<S: AsRef<str>>(
    cmd: IpfCommand,
    args: &[S],
    dp_names: &[&str],
) -> Result<IpfRequest, CmdError> {
    let (opts, rest) = split_options(args)?;
    // The words the command takes come last; what is before them must be the datapath's name.
    // OVS checks that name first only where it reads it (`ipf-set-min-frag`); elsewhere a bad
    // word is reported as the word it expected (`ipf-set-enabled v4 1`: the family).
    let (before, last) = rest.split_at(rest.len().saturating_sub(1));
    match cmd {
        IpfCommand::SetEnabled | IpfCommand::SetDisabled => {
            let v6 = family(last.first()).ok_or(CmdError::IpfFamily)?;
            dp_only(before, dp_names)?;
            Ok(IpfRequest::SetEnabled {
                v6,
                on: cmd == IpfCommand::SetEnabled,
            })
        }
        IpfCommand::SetMinFrag => {
            let (before, words) = rest.split_at(rest.len().saturating_sub(2));
            dp_only(before, dp_names)?;
            let [fam, size] = words else {
                return Err(CmdError::IpfMinFragFamily);
            };
            let v6 = family(Some(fam)).ok_or(CmdError::IpfMinFragFamily)?;
            let size = dec(size).ok_or(CmdError::IpfMinFragMissing)?;
            Ok(IpfRequest::SetMinFrag { v6, size })
        }
        IpfCommand::SetMaxNfrags => {
            let n = last
                .first()
                .and_then(|n| dec(n))
                .ok_or(CmdError::IpfMaxFragsMissing)?;
            dp_only(before, dp_names)?;
            Ok(IpfRequest::SetMaxNfrags(n))
        }
        IpfCommand::GetStatus => {
            dp_only(&rest, dp_names)?;
            Ok(IpfRequest::GetStatus {
                lists: opts.verbosity > 0,
            })
        }
    }
}

/// OVS's counters of one IP version (`struct ipf`'s `n4frag_cnt`/`n6frag_cnt`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpfCounters {
    /// Fragments taken into a datagram.
    pub accepted: u64,
    /// Fragments handed on in completed datagrams (OVS's `nfrag_completed_sent`).
    pub completed: u64,
    /// Fragments of datagrams that timed out (`nfrag_expired_sent`).
    pub expired: u64,
    /// Non-last fragments under the minimum size.
    pub too_small: u64,
    /// Fragments refused for overlapping one held, exact copies included (OVS's overlap check
    /// catches those too), and the held fragments of the datagram an overlap discarded.
    pub overlapped: u64,
    /// Fragments discarded with their datagram for another reason: a contradicting end, a
    /// datagram past 65535 bytes or with too many fragments, and late fragments of a discarded
    /// datagram (OVS's `nfrag_purged` counts fragments freed from lists that went stale).
    pub purged: u64,
}

impl From<&FragCounters> for IpfCounters {
    fn from(c: &FragCounters) -> Self {
        let d = |r: FragDrop| c.dropped(r);
        IpfCounters {
            accepted: c.accepted,
            completed: c.completed_frags,
            expired: d(FragDrop::Timeout),
            too_small: d(FragDrop::TooSmall),
            overlapped: d(FragDrop::Overlap) + d(FragDrop::Duplicate),
            purged: d(FragDrop::Inconsistent)
                + d(FragDrop::TooLong)
                + d(FragDrop::TooManyFrags)
                + d(FragDrop::Discarded),
        }
    }
}

/// `dpctl/ipf-get-status [-m]`'s text: the module status, and with `lists` the datagrams
/// waiting (`st.lists`, which the caller asked the reassemblers for).
pub fn format_status(st: &FragStatus, lists: bool) -> String {
    let c = &st.config;
    let mut out = String::new();
    out.push_str("        Fragmentation Module Status\n");
    out.push_str("        ---------------------------\n");
    let _ = writeln!(out, "        v4 enabled: {}", u8::from(c.enabled_v4));
    let _ = writeln!(out, "        v6 enabled: {}", u8::from(c.enabled_v6));
    let _ = writeln!(out, "        max num frags (v4/v6): {}", c.max_frags);
    let _ = writeln!(out, "        num frag: {}", st.held);
    for (v, min, counters) in [
        ("v4", c.min_frag_size_v4, &st.stats.v4),
        ("v6", c.min_frag_size_v6, &st.stats.v6),
    ] {
        let n = IpfCounters::from(counters);
        let _ = writeln!(out, "        min {v} frag size: {min}");
        let _ = writeln!(out, "        {v} frags accepted: {}", n.accepted);
        let _ = writeln!(out, "        {v} frags completed: {}", n.completed);
        let _ = writeln!(out, "        {v} frags expired: {}", n.expired);
        let _ = writeln!(out, "        {v} frags too small: {}", n.too_small);
        let _ = writeln!(out, "        {v} frags overlapped: {}", n.overlapped);
        let _ = writeln!(out, "        {v} frags purged: {}", n.purged);
    }
    if lists {
        out.push_str("\n        Fragment Lists:\n\n");
        for l in &st.lists {
            out.push_str(&format_list(l));
            out.push('\n');
        }
    }
    out
}

/// One waiting datagram as OVS's `ipf_dump_create` prints it (no newline).
pub fn format_list(l: &FragList) -> String {
    let (src, dst) = if l.ipv6 {
        (
            Ipv6Addr::from(l.src).to_string(),
            Ipv6Addr::from(l.dst).to_string(),
        )
    } else {
        let v4 = |a: &[u8; 16]| Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string();
        (v4(&l.src), v4(&l.dst))
    };
    format!(
        "(src={src},dst={dst},recirc_id=0,ip_id={},dl_type={:#x},zone={},nw_proto={},\
         num_fragments={},state={})",
        l.ident,
        if l.ipv6 { 0x86dd } else { 0x0800 },
        l.zone,
        l.proto,
        l.n_frags,
        l.state_name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const DP: &[&str] = &["netdev@flowpath", "flowpath", "netdev@ovs-netdev"];

    fn p(cmd: IpfCommand, args: &[&str]) -> Result<IpfRequest, String> {
        parse(cmd, args, DP).map_err(|e| e.to_string())
    }

    /// `ovs-appctl dpctl/ipf-get-status` right after start (reference §10).
    const DEFAULT_STATUS: &str = "        Fragmentation Module Status
        ---------------------------
        v4 enabled: 1
        v6 enabled: 1
        max num frags (v4/v6): 1000
        num frag: 0
        min v4 frag size: 1200
        v4 frags accepted: 0
        v4 frags completed: 0
        v4 frags expired: 0
        v4 frags too small: 0
        v4 frags overlapped: 0
        v4 frags purged: 0
        min v6 frag size: 1280
        v6 frags accepted: 0
        v6 frags completed: 0
        v6 frags expired: 0
        v6 frags too small: 0
        v6 frags overlapped: 0
        v6 frags purged: 0
";

    #[test]
    fn status_is_ovs_text() {
        let st = FragStatus::default();
        assert_eq!(format_status(&st, false), DEFAULT_STATUS);
        assert_eq!(
            format_status(&st, true),
            format!("{DEFAULT_STATUS}\n        Fragment Lists:\n\n")
        );
    }

    #[test]
    fn status_with_traffic_and_lists_is_ovs_text() {
        // Reference §10, after the pings and the crafted fragments.
        let mut st = FragStatus {
            held: 2,
            ..FragStatus::default()
        };
        st.stats.v4.accepted = 10;
        st.stats.v4.completed = 3;
        st.stats.v4.completed_frags = 9;
        st.stats.v4.drops[FragDrop::TooSmall as usize] = 1;
        st.stats.v6.accepted = 10;
        st.stats.v6.completed_frags = 9;
        let a = |s: &str| {
            let mut x = [0; 16];
            match s.parse::<std::net::IpAddr>().unwrap() {
                std::net::IpAddr::V4(v) => x[..4].copy_from_slice(&v.octets()),
                std::net::IpAddr::V6(v) => x = v.octets(),
            }
            x
        };
        st.lists = vec![
            FragList {
                ipv6: false,
                src: a("10.1.1.51"),
                dst: a("10.1.1.12"),
                ident: 4242,
                zone: 5,
                proto: 17,
                n_frags: 1,
                first: true,
                last: false,
            },
            FragList {
                ipv6: true,
                src: a("fc00::51"),
                dst: a("fc00::12"),
                ident: 0x5151,
                zone: 5,
                proto: 0,
                n_frags: 1,
                first: true,
                last: false,
            },
        ];
        let want = "        Fragmentation Module Status
        ---------------------------
        v4 enabled: 1
        v6 enabled: 1
        max num frags (v4/v6): 1000
        num frag: 2
        min v4 frag size: 1200
        v4 frags accepted: 10
        v4 frags completed: 9
        v4 frags expired: 0
        v4 frags too small: 1
        v4 frags overlapped: 0
        v4 frags purged: 0
        min v6 frag size: 1280
        v6 frags accepted: 10
        v6 frags completed: 9
        v6 frags expired: 0
        v6 frags too small: 0
        v6 frags overlapped: 0
        v6 frags purged: 0

        Fragment Lists:

(src=10.1.1.51,dst=10.1.1.12,recirc_id=0,ip_id=4242,dl_type=0x800,zone=5,nw_proto=17,num_fragments=1,state=first frag)
(src=fc00::51,dst=fc00::12,recirc_id=0,ip_id=20817,dl_type=0x86dd,zone=5,nw_proto=0,num_fragments=1,state=first frag)
";
        assert_eq!(format_status(&st, true), want);
    }

    #[test]
    fn counters_map_onto_ovs_names() {
        let mut c = FragCounters::default();
        for (i, r) in FragDrop::ALL.iter().enumerate() {
            c.drops[*r as usize] = 1 << i;
        }
        let n = IpfCounters::from(&c);
        let bit = |r: FragDrop| 1u64 << (r as usize);
        assert_eq!(n.expired, bit(FragDrop::Timeout));
        assert_eq!(n.too_small, bit(FragDrop::TooSmall));
        assert_eq!(
            n.overlapped,
            bit(FragDrop::Overlap) | bit(FragDrop::Duplicate)
        );
        assert_eq!(
            n.purged,
            bit(FragDrop::Inconsistent)
                | bit(FragDrop::TooLong)
                | bit(FragDrop::TooManyFrags)
                | bit(FragDrop::Discarded)
        );
    }

    #[test]
    fn set_enabled_parses_as_ovs() {
        use IpfCommand::*;
        assert_eq!(
            p(SetEnabled, &["v4"]),
            Ok(IpfRequest::SetEnabled {
                v6: false,
                on: true
            })
        );
        assert_eq!(
            p(SetDisabled, &["v6"]),
            Ok(IpfRequest::SetEnabled {
                v6: true,
                on: false
            })
        );
        assert_eq!(
            p(SetEnabled, &["netdev@ovs-netdev", "v4"]),
            Ok(IpfRequest::SetEnabled {
                v6: false,
                on: true
            })
        );
        let fam = "parameter missing: 'v4' for IPv4 or 'v6' for IPv6";
        assert_eq!(p(SetEnabled, &["v5"]), Err(fam.into()));
        assert_eq!(p(SetEnabled, &["v4", "1"]), Err(fam.into()));
        assert_eq!(p(SetEnabled, &["-m"]), Err(fam.into()));
        assert_eq!(
            p(SetEnabled, &["bogus", "v4"]),
            Err("datapath not found".into())
        );
        assert_eq!(
            p(SetEnabled, &["-x", "v4"]),
            Err("Unrecognized option -x".into())
        );
        let r = IpfRequest::SetEnabled {
            v6: false,
            on: true,
        };
        assert_eq!(r.reply(), "enabling fragmentation reassembly successful");
        let off = IpfRequest::SetEnabled {
            v6: true,
            on: false,
        };
        assert_eq!(off.reply(), "disabling fragmentation reassembly successful");
        let c = off.apply(&FragConfig::default()).unwrap().unwrap();
        assert!(c.enabled_v4 && !c.enabled_v6);
    }

    #[test]
    fn set_min_frag_parses_and_bounds_as_ovs() {
        use IpfCommand::SetMinFrag;
        let d = FragConfig::default();
        let set = |args: &[&str]| -> Result<FragConfig, String> {
            let r = p(SetMinFrag, args)?;
            assert_eq!(r.reply(), "setting minimum fragment size successful");
            r.apply(&d)
                .map(Option::unwrap)
                .map_err(|e| e.ovs_text("ovs-vswitchd"))
        };
        let c = set(&["v4", "1000"]).unwrap();
        assert_eq!((c.min_frag_size_v4, c.min_frag_size_v6), (1000, 1280));
        // DIV_ROUND_UP(65535 - 60, 1000 - 60), as ipf_set_min_frag recomputes it.
        assert_eq!(c.max_frags_per_datagram, 70);
        assert_eq!(set(&["v6", "1100"]).unwrap().min_frag_size_v6, 1100);
        assert_eq!(set(&["v4", "400"]).unwrap().min_frag_size_v4, 400);
        assert_eq!(
            set(&["netdev@flowpath", "v6", "400"])
                .unwrap()
                .min_frag_size_v6,
            400
        );
        assert_eq!(
            set(&["v4", "300"]),
            Err(
                "ovs-vswitchd: requested minimum fragment size too small; see documentation \
                 (Operation not permitted)"
                    .into()
            )
        );
        assert_eq!(
            p(SetMinFrag, &["v4", "abc"]),
            Err("parameter missing for minimum fragment size".into())
        );
        assert_eq!(
            p(SetMinFrag, &["v7", "1000"]),
            Err("parameter missing: v4 for IPv4 or v6 for IPv6".into())
        );
        assert_eq!(
            p(SetMinFrag, &["-m", "1000"]),
            Err("parameter missing: v4 for IPv4 or v6 for IPv6".into())
        );
        assert_eq!(
            p(SetMinFrag, &["bogus", "v4", "1000"]),
            Err("datapath not found".into())
        );
        let e = parse(SetMinFrag, &["v4", "abc"], DP).unwrap_err();
        assert_eq!(
            e.ovs_text("ovs-vswitchd"),
            "ovs-vswitchd: parameter missing for minimum fragment size (Invalid argument)"
        );
    }

    #[test]
    fn set_max_nfrags_parses_and_bounds_as_ovs() {
        use IpfCommand::SetMaxNfrags;
        let d = FragConfig::default();
        let set = |args: &[&str]| -> Result<usize, String> {
            let r = p(SetMaxNfrags, args)?;
            assert_eq!(r.reply(), "setting maximum fragments successful");
            r.apply(&d)
                .map(|c| c.unwrap().max_frags)
                .map_err(|e| e.ovs_text("ovs-vswitchd"))
        };
        assert_eq!(set(&["500"]), Ok(500));
        assert_eq!(set(&["5000"]), Ok(5000));
        assert_eq!(set(&["0"]), Ok(0));
        assert_eq!(set(&["flowpath", "7"]), Ok(7));
        assert_eq!(
            set(&["5001"]),
            Err("ovs-vswitchd: setting maximum fragments failed (Operation not permitted)".into())
        );
        assert_eq!(
            p(SetMaxNfrags, &["abc"]),
            Err("parameter missing for maximum fragments".into())
        );
        assert_eq!(
            p(SetMaxNfrags, &["-m"]),
            Err("parameter missing for maximum fragments".into())
        );
        assert_eq!(
            p(SetMaxNfrags, &["bogus", "5"]),
            Err("datapath not found".into())
        );
    }

    #[test]
    fn get_status_parses_as_ovs() {
        use IpfCommand::GetStatus;
        let r = |lists| Ok(IpfRequest::GetStatus { lists });
        assert_eq!(p(GetStatus, &[]), r(false));
        assert_eq!(p(GetStatus, &["-m"]), r(true));
        assert_eq!(p(GetStatus, &["--more"]), r(true));
        assert_eq!(p(GetStatus, &["netdev@ovs-netdev", "-m"]), r(true));
        assert_eq!(p(GetStatus, &["bogus"]), Err("datapath not found".into()));
        assert_eq!(
            IpfRequest::GetStatus { lists: false }.apply(&FragConfig::default()),
            Ok(None)
        );
    }

    #[test]
    fn commands_are_listed_as_ovs_lists_them() {
        let lines: Vec<String> = IpfCommand::ALL
            .iter()
            .map(|c| format!("  {:<23} {}", c.name(), c.usage()))
            .collect();
        assert!(lines.contains(&"  dpctl/ipf-get-status    [dp]".to_string()));
        assert!(lines.contains(&"  dpctl/ipf-set-enabled   [dp] v4|v6".to_string()));
        assert!(lines.contains(&"  dpctl/ipf-set-min-frag  [dp] v4|v6 minfragment".to_string()));
        assert!(lines.contains(&"  dpctl/ipf-set-max-nfrags [dp] maxfrags".to_string()));
        assert_eq!(IpfCommand::SetMinFrag.args(), (2, 3));
    }
}
