//! What `dpctl/flush-conntrack` removes: the connections of a zone, the one an exact tuple
//! names, or those a partial match selects. The match and its tuples' text are OVS's
//! (`struct ofp_ct_match` and `ofp_ct_tuple_parse` in `lib/ofp-ct.c`); the flush itself goes
//! through the table's public API ([`Conntrack::flush`], [`Conntrack::dump`]).

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::CmdError;
use super::args::{dec, key_values, num, skip_dp, split_options};
use crate::key::{ICMP, ICMPV6, Tuple};
use crate::table::{ConnInfo, Conntrack};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::test_util::{DP, a4, a6, err};

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
}
