//! Parsing OpenFlow actions from `ovs-ofctl` text (OVS's `ofpacts_parse()`), normalized to
//! the form OpenFlow 1.0 with Nicira extensions carries them.
//!
//! Parsing also performs OVS's consistency checks (`ofpacts_check()`, `ofpacts_verify()` and
//! the checks a switch applies when decoding): prerequisites of written fields against the
//! match as earlier actions change it (`push_mpls` makes the packet MPLS), output ports,
//! instruction order, what `ct(exec(...))` and `clone(...)` may contain.

use std::net::Ipv6Addr;

use flow::EthAddr;

use crate::fields::{Field, FieldId, Subfield, ones};
use crate::pipekey::PipeKey;
use crate::syntax::SyntaxError;
use crate::syntax::lex::{
    KeyValues, NumError, parse_decimal, parse_hex_bytes, parse_int, parse_uint,
};
use crate::syntax::ports::{
    OFPP_CONTROLLER, OFPP_IN_PORT, OFPP_LOCAL, OFPP_MAX, PortNames, parse_port,
};
use crate::syntax::value::{parse_field_value, parse_ipv4};

use super::{
    Controller, Ct, CtZone, MAX_NESTING, Nat, NatAddrs, NatKind, OfAction, PacketInReason,
    WriteForm, load_segments,
};

/// What the actions are nested in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outer {
    Top,
    Clone,
    Ct,
    WriteActions,
}

/// Instruction rank for OVS's ordering rule: meter, apply-actions, write_metadata, goto_table.
fn instruction_rank(a: &OfAction) -> (u8, &'static str) {
    match a {
        OfAction::Meter(_) => (0, "meter"),
        OfAction::ClearActions => (2, "clear_actions"),
        OfAction::WriteActions(_) => (3, "write_actions"),
        OfAction::WriteMetadata { .. } => (4, "write_metadata"),
        OfAction::GotoTable(_) => (5, "goto_table"),
        _ => (1, "apply_actions"),
    }
}

/// State for parsing one action list: the match as earlier actions leave it.
pub(crate) struct ActionCtx<'a> {
    pub names: &'a dyn PortNames,
    /// The flow's table, for `goto_table` (255 when unknown).
    pub table: u8,
    /// The match's (pre-masked) key, modified as `ofpacts_check()` does.
    pub flow: PipeKey,
    /// Whether `ct_state` of the match makes conntrack fields valid (for `resubmit(..,ct)`).
    pub ct_valid: bool,
}

fn bad(action: &str, arg: &str, reason: impl Into<String>) -> SyntaxError {
    SyntaxError::BadAction {
        action: action.to_string(),
        arg: arg.to_string(),
        reason: reason.into(),
    }
}

fn num<T: TryFrom<u128>>(action: &str, arg: &str, max: u128) -> Result<T, SyntaxError> {
    match parse_uint(arg, max) {
        Ok(v) => T::try_from(v).map_err(|_| bad(action, arg, "out of range")),
        Err(NumError::Range) => Err(bad(action, arg, "out of range")),
        Err(NumError::Syntax) => Err(bad(action, arg, "not a number")),
    }
}

fn port_of(action: &str, arg: &str, names: &dyn PortNames) -> Result<u32, SyntaxError> {
    parse_port(arg, names).ok_or_else(|| bad(action, arg, "unknown port"))
}

/// OVS's `ofpact_check_output_port()`.
fn check_output_port(action: &str, arg: &str, port: u32) -> Result<(), SyntaxError> {
    if port < OFPP_MAX || (OFPP_IN_PORT..=OFPP_LOCAL).contains(&port) {
        Ok(())
    } else {
        Err(bad(action, arg, "invalid output port"))
    }
}

fn table_of(action: &str, arg: &str) -> Result<u8, SyntaxError> {
    match parse_decimal(arg, 255) {
        Ok(t) => Ok(t as u8),
        Err(_) => Err(bad(action, arg, "unknown table")),
    }
}

fn subfield_of(action: &str, arg: &str) -> Result<Subfield, SyntaxError> {
    Subfield::parse(arg).map_err(|r| bad(action, arg, r))
}

/// The Ethernet address in the low 48 bits of a field value.
pub(super) fn eth_addr(v: u128) -> EthAddr {
    let b = v.to_be_bytes();
    EthAddr([b[10], b[11], b[12], b[13], b[14], b[15]])
}

/// Pushes a masked write of `field` in the `load` form ([`WriteForm::Load`]). Fields printed
/// as `load:` are split into the loads `NXAST_REG_LOAD` carries (one per run of mask bits, at
/// most 64 bits each), as a switch hands them back.
pub fn push_set_field(out: &mut Vec<OfAction>, field: FieldId, value: u128, mask: u128) {
    let f = field.field();
    if field.is_tun_metadata() || f.nxm.is_empty() {
        out.push(OfAction::SetField {
            field,
            value: value & mask,
            mask,
            form: WriteForm::Load,
        });
        return;
    }
    for (ofs, n) in load_segments(mask, f.n_bits) {
        let m = ones(n) << ofs;
        out.push(OfAction::SetField {
            field,
            value: value & m,
            mask: m,
            form: WriteForm::Load,
        });
    }
}

/// A `set_field` of tunnel metadata with an unmasked hexadecimal value longer than 16 bytes
/// (and at most 124).
fn wide_tun_md_value(id: FieldId, value: &str) -> Option<OfAction> {
    if !id.is_tun_metadata() {
        return None;
    }
    let (v, None) = crate::syntax::matching::parse_hex_bytes(value)? else {
        return None;
    };
    let z = v.iter().take_while(|&&b| b == 0).count();
    let v = &v[z..];
    (v.len() > 16 && v.len() <= crate::fields::TUN_METADATA_MAX_LEN).then(|| {
        OfAction::SetTunMetadata {
            field: id,
            value: v.into(),
        }
    })
}

/// The CT fields only `ct(exec(...))` may write.
fn requires_ct(f: FieldId) -> bool {
    f == FieldId::CT_MARK || f == FieldId::CT_LABEL
}

impl ActionCtx<'_> {
    /// Prerequisite check of a field an action reads or writes (OVS's `mf_check_src/dst()`).
    fn check_prereq(&self, field: &Field) -> Result<(), SyntaxError> {
        self.check_prereq_named(field, field.name)
    }

    /// [`Self::check_prereq`], naming the field as the text spelled it.
    fn check_prereq_named(&self, field: &Field, name: &str) -> Result<(), SyntaxError> {
        if field.prereq.is_met_ct(&self.flow, self.ct_valid) {
            Ok(())
        } else {
            Err(SyntaxError::MissingPrereq {
                field: name.to_string(),
                prereq: field.prereq,
            })
        }
    }

    fn tci(&self) -> u16 {
        self.flow.dp.vlan_tci()
    }

    fn set_tci(&mut self, tci: u16) {
        self.flow.dp.set_vlan_tci(tci);
    }

    /// Parses an action list (the text after `actions=`).
    pub(crate) fn parse_list(&mut self, s: &str) -> Result<Vec<OfAction>, SyntaxError> {
        self.parse_nested(s, Outer::Top, 0)
    }

    fn parse_nested(
        &mut self,
        s: &str,
        outer: Outer,
        depth: usize,
    ) -> Result<Vec<OfAction>, SyntaxError> {
        if depth > MAX_NESTING {
            return Err(SyntaxError::BadAction {
                action: "actions".to_string(),
                arg: String::new(),
                reason: "nested too deeply".to_string(),
            });
        }
        let mut out = Vec::new();
        let mut drop = false;
        let mut prev: Option<(u8, &'static str)> = None;
        // The keyword each action was written with, for the conjunction rule's error.
        let mut keywords = Vec::new();
        for (key, value) in KeyValues::new(s) {
            let start = out.len();
            let lower = key.to_ascii_lowercase();
            if lower == "drop" {
                drop = true;
                continue;
            }
            self.parse_one(&lower, key, value, outer, depth, &mut out)?;
            keywords.resize(out.len(), lower.clone());
            for a in &out[start..] {
                let next = instruction_rank(a);
                if outer != Outer::Top && next.0 != 1 {
                    return Err(bad(
                        key,
                        value,
                        format!("{} instruction not allowed here", next.1),
                    ));
                }
                if let Some(p) = prev {
                    let misordered = if p.0 == 1 {
                        next.0 < p.0
                    } else {
                        next.0 <= p.0
                    };
                    if misordered {
                        return Err(if next.0 == p.0 {
                            bad(
                                key,
                                value,
                                format!("duplicate {} instruction not allowed", next.1),
                            )
                        } else {
                            bad(key, value, format!("{} must appear before {}", next.1, p.1))
                        });
                    }
                }
                prev = Some(next);
            }
        }
        super::learn::verify_conjunctions(&out, &keywords)?;
        if drop && !out.is_empty() {
            return Err(bad(
                "drop",
                "",
                "\"drop\" must not be accompanied by any other action",
            ));
        }
        Ok(out)
    }

    fn parse_one(
        &mut self,
        lower: &str,
        key: &str,
        arg: &str,
        outer: Outer,
        depth: usize,
        out: &mut Vec<OfAction>,
    ) -> Result<(), SyntaxError> {
        let names = self.names;
        let a = match lower {
            "output" | "output_reg" => self.parse_output(arg)?,
            "group" => OfAction::Group(num(key, arg, u32::MAX.into())?),
            "controller" => self.parse_controller(arg)?,
            "enqueue" => {
                let mut parts = arg.split([':', 'q', ',']).filter(|p| !p.is_empty());
                let (Some(p), Some(q)) = (parts.next(), parts.next()) else {
                    return Err(bad(
                        key,
                        arg,
                        "syntax is enqueue:PORT:QUEUE or enqueue(PORT,QUEUE)",
                    ));
                };
                let port = port_of(key, p, names)?;
                if port >= OFPP_MAX && port != OFPP_IN_PORT && port != OFPP_LOCAL {
                    return Err(bad(key, arg, "invalid output port"));
                }
                OfAction::Enqueue {
                    port,
                    queue: num(key, q, u32::MAX.into())?,
                }
            }
            "set_field" => return self.parse_set_field(arg, outer, out),
            "load" => return self.parse_load(arg, outer, out),
            "move" => self.parse_move(arg, outer)?,
            "set_vlan_vid" | "mod_vlan_vid" => {
                let vid: u16 = num(key, arg, 0xffff)?;
                if vid & !0x0fff != 0 {
                    return Err(bad(key, arg, "not a valid VLAN VID"));
                }
                self.set_tci(self.tci() | 0x1000);
                OfAction::SetVlanVid(vid)
            }
            "set_vlan_pcp" | "mod_vlan_pcp" => {
                let pcp: u8 = num(key, arg, 0xff)?;
                if pcp & !7 != 0 {
                    return Err(bad(key, arg, "not a valid VLAN PCP"));
                }
                self.set_tci(self.tci() | 0x1000);
                OfAction::SetVlanPcp(pcp)
            }
            "strip_vlan" | "pop_vlan" => {
                let inner = self.flow.dp.vlan2_tci();
                self.set_tci(inner);
                self.flow.dp.set_vlan2_tci(0);
                OfAction::StripVlan
            }
            "push_vlan" => {
                let ty: u16 = num(key, arg, 0xffff)?;
                if ty != 0x8100 && ty != 0x88a8 {
                    return Err(bad(key, arg, "not a valid VLAN ethertype"));
                }
                if self.flow.dp.vlan2_tci() & 0x1000 != 0 {
                    return Err(bad(key, arg, "too many VLAN tags"));
                }
                let outer_tci = self.tci();
                self.flow.dp.set_vlan2_tci(outer_tci);
                self.set_tci(0x1000);
                OfAction::PushVlan(ty)
            }
            "mod_dl_src" | "mod_dl_dst" => {
                let f = FieldId::ETH_SRC.field();
                let (v, m) = parse_field_value(f, arg, names).map_err(|r| bad(key, arg, r))?;
                if m != f.full_mask() {
                    return Err(bad(key, arg, "invalid Ethernet address"));
                }
                if lower == "mod_dl_src" {
                    OfAction::SetEthSrc(eth_addr(v))
                } else {
                    OfAction::SetEthDst(eth_addr(v))
                }
            }
            "mod_nw_src" | "mod_nw_dst" => {
                let ip = parse_ipv4(arg).ok_or_else(|| bad(key, arg, "invalid IP address"))?;
                if lower == "mod_nw_src" {
                    OfAction::SetIpv4Src(ip.into())
                } else {
                    OfAction::SetIpv4Dst(ip.into())
                }
            }
            "mod_nw_tos" => {
                let tos: u8 = num(key, arg, 0xff)?;
                if tos & 0x03 != 0 {
                    return Err(bad(key, arg, "not a valid TOS"));
                }
                OfAction::SetIpDscp(tos)
            }
            // OpenFlow 1.0 carries these as Nicira register loads, which the switch checks.
            "mod_nw_ecn" => {
                let ecn: u8 = num(key, arg, 0xff)?;
                if ecn & !3 != 0 {
                    return Err(bad(key, arg, "not a valid ECN"));
                }
                return self.load_action(
                    FieldId::IP_ECN,
                    ecn.into(),
                    3,
                    WriteForm::Own,
                    outer,
                    out,
                );
            }
            "mod_nw_ttl" | "set_nw_ttl" => {
                let ttl: u8 = num(key, arg, 0xff)?;
                return self.load_action(
                    FieldId::IP_TTL,
                    ttl.into(),
                    0xff,
                    WriteForm::Own,
                    outer,
                    out,
                );
            }
            "mod_tp_src" => OfAction::SetL4SrcPort(num(key, arg, 0xffff)?),
            "mod_tp_dst" => OfAction::SetL4DstPort(num(key, arg, 0xffff)?),
            "dec_ttl" => {
                if arg.is_empty() {
                    OfAction::DecTtl(None)
                } else {
                    let ids = arg
                        .split([',', ' '])
                        .filter(|s| !s.is_empty())
                        .map(|s| num::<u16>(key, s, 0xffff))
                        .collect::<Result<Vec<_>, _>>()?;
                    if ids.is_empty() {
                        return Err(bad(key, arg, "expected at least one controller id"));
                    }
                    OfAction::DecTtl(Some(ids))
                }
            }
            "set_mpls_label" => {
                let label: u32 = num(key, arg, u32::MAX.into())?;
                if label & !0xfffff != 0 {
                    return Err(bad(key, arg, "not a valid MPLS label"));
                }
                OfAction::SetMplsLabel(label)
            }
            "set_mpls_tc" => {
                let tc: u8 = num(key, arg, 0xff)?;
                if tc & !7 != 0 {
                    return Err(bad(key, arg, "not a valid MPLS TC"));
                }
                OfAction::SetMplsTc(tc)
            }
            "set_mpls_ttl" => OfAction::SetMplsTtl(num(key, arg, 0xff)?),
            "dec_mpls_ttl" => OfAction::DecMplsTtl,
            "push_mpls" => {
                let ty: u16 = num(key, arg, 0xffff)?;
                self.flow.dp.set_eth_type(ty);
                self.flow.dp.set_nw_proto(0);
                OfAction::PushMpls(ty)
            }
            "pop_mpls" => {
                let ty: u16 = num(key, arg, 0xffff)?;
                self.flow.dp.set_eth_type(ty);
                OfAction::PopMpls(ty)
            }
            "set_tunnel" | "set_tunnel64" => {
                let id: u64 = num(key, arg, u64::MAX.into())?;
                OfAction::SetTunnel {
                    id,
                    tun64: lower == "set_tunnel64" || id > u64::from(u32::MAX),
                }
            }
            "set_queue" => OfAction::SetQueue(num(key, arg, u32::MAX.into())?),
            "pop_queue" => OfAction::PopQueue,
            "fin_timeout" => {
                let (mut idle, mut hard) = (0, 0);
                for (k, v) in KeyValues::new(arg) {
                    match k {
                        "idle_timeout" => idle = num(k, v, 0xffff)?,
                        "hard_timeout" => hard = num(k, v, 0xffff)?,
                        _ => return Err(bad(key, arg, format!("invalid key '{k}'"))),
                    }
                }
                OfAction::FinTimeout { idle, hard }
            }
            "resubmit" => self.parse_resubmit(arg)?,
            "goto_table" => {
                let t = table_of(key, arg)?;
                if self.table != 255 && t <= self.table {
                    return Err(bad(key, arg, "must go to a later table"));
                }
                OfAction::GotoTable(t)
            }
            "write_metadata" => {
                let (v, m) = match arg.split_once('/') {
                    Some((v, m)) => (v, Some(m)),
                    None => (arg, None),
                };
                let value: u64 = num(key, v, u64::MAX.into())?;
                let mask = match m {
                    Some(m) => num(key, m, u64::MAX.into())?,
                    None => u64::MAX,
                };
                OfAction::WriteMetadata { value, mask }
            }
            "note" => {
                let mut data =
                    parse_hex_bytes(arg).ok_or_else(|| bad(key, arg, "bad hex digit"))?;
                // The Nicira note action is 10 bytes plus the data, padded to 8 bytes.
                let padded = (10 + data.len()).div_ceil(8) * 8 - 10;
                data.resize(padded, 0);
                OfAction::Note(data)
            }
            "exit" => OfAction::Exit,
            "clone" => {
                let mut sub = self.sub();
                OfAction::Clone(sub.parse_nested(arg, Outer::Clone, depth + 1)?)
            }
            "ct" => self.parse_ct(arg, depth)?,
            "ct_clear" => OfAction::CtClear,
            "debug_recirc" => OfAction::DebugRecirc,
            "debug_slow" => OfAction::DebugSlow,
            "nat" => {
                if outer != Outer::Ct {
                    return Err(bad(key, arg, "nat is only allowed inside ct"));
                }
                let nat = parse_nat(arg)?;
                self.check_nat(&nat)?;
                OfAction::Nat(nat)
            }
            "meter" => OfAction::Meter(num(key, arg, u32::MAX.into())?),
            "apply_actions" => {
                return Err(bad(key, arg, "apply_actions is the default instruction"));
            }
            "learn" => self.parse_learn(arg)?,
            "conjunction" => super::learn::parse_conjunction(arg)?,
            "push" => {
                let sf = subfield_of(key, arg)?;
                self.check_prereq(sf.field.field())?;
                OfAction::StackPush(sf)
            }
            "pop" => {
                let sf = subfield_of(key, arg)?;
                self.check_prereq(sf.field.field())?;
                if !sf.field.field().writable {
                    return Err(SyntaxError::ReadOnly(sf.field.field().name.to_string()));
                }
                OfAction::StackPop(sf)
            }
            "write_actions" => {
                // Checked against the match, not against what earlier actions did to it.
                let mut sub = self.sub();
                OfAction::WriteActions(sub.parse_nested(arg, Outer::WriteActions, depth + 1)?)
            }
            "clear_actions" => OfAction::ClearActions,
            "check_pkt_larger" => parse_check_pkt_larger(arg)?,
            "sample" => super::sample::parse_sample(arg, names)?,
            "bundle" | "bundle_load" => {
                let a = super::bundle::parse_bundle(arg, lower == "bundle_load", names)?;
                if let OfAction::Bundle(b) = &a {
                    if let Some(d) = &b.dst {
                        self.check_prereq(d.field.field())?;
                    }
                    for &m in &b.members {
                        if m != crate::syntax::ports::OFPP_ANY {
                            check_output_port(key, arg, m)?;
                        }
                        if m == OFPP_CONTROLLER {
                            return Err(bad(key, arg, "unsupported controller member"));
                        }
                    }
                }
                a
            }
            "multipath" => {
                let a = super::multipath::parse_multipath(arg)?;
                if let OfAction::Multipath(m) = &a {
                    self.check_prereq(m.dst.field.field())?;
                }
                a
            }
            "encap" => {
                let pt = parse_encap(key, arg)?;
                self.encap(pt);
                OfAction::Encap(pt)
            }
            "decap" => {
                let pt = parse_decap(key, arg)?;
                self.decap();
                OfAction::Decap(pt)
            }
            "dec_nsh_ttl" | "delete_field" => {
                return Err(SyntaxError::Unsupported(key.to_string()));
            }
            _ => match parse_port(key, names) {
                Some(port) => {
                    check_output_port("output", key, port)?;
                    OfAction::Output {
                        port,
                        max_len: if port == OFPP_CONTROLLER { u16::MAX } else { 0 },
                    }
                }
                None => return Err(SyntaxError::UnknownAction(key.to_string())),
            },
        };
        if outer == Outer::Ct && !matches!(a, OfAction::Nat(_) | OfAction::RegMove { .. }) {
            return Err(bad(
                "ct",
                key,
                format!("ct action doesn't support nested action {lower}"),
            ));
        }
        out.push(a);
        Ok(())
    }

    /// The match as `encap` leaves it (OVS's `check_ENCAP()`): the new packet type, its
    /// ethertype, and no IP protocol unless the packet is still IP.
    fn encap(&mut self, pt: u32) {
        let f = &mut self.flow.dp;
        f.set_packet_type(pt);
        if pt >> 16 == 1 {
            f.set_eth_type(pt as u16);
        }
        if !matches!(f.eth_type(), 0x0800 | 0x86dd) {
            f.set_nw_proto(0);
        }
    }

    /// The match as `decap` leaves it (OVS's `check_DECAP()`): an Ethernet frame becomes the
    /// L3 packet of its ethertype; anything else is unknown until parsed again.
    fn decap(&mut self) {
        let f = &mut self.flow.dp;
        if f.packet_type() == super::packet_type::ETHERNET {
            let pt = (1 << 16) | u32::from(f.eth_type());
            f.set_packet_type(pt);
        } else {
            f.set_packet_type(super::packet_type::UNKNOWN);
            f.set_eth_type(0xffff);
        }
    }

    fn sub(&self) -> ActionCtx<'_> {
        ActionCtx {
            names: self.names,
            table: self.table,
            flow: self.flow.clone(),
            ct_valid: self.ct_valid,
        }
    }

    fn parse_output(&mut self, arg: &str) -> Result<OfAction, SyntaxError> {
        if arg.contains("port") && arg.contains("max_len") {
            let (mut port, mut max_len) = (None, None);
            for (k, v) in KeyValues::new(arg) {
                match k {
                    "port" => {
                        let p = port_of("output", v, self.names)?;
                        if p > OFPP_MAX && p != OFPP_LOCAL && p != OFPP_IN_PORT {
                            return Err(bad("output", v, "unsupported truncate port"));
                        }
                        port = Some(p);
                    }
                    "max_len" => {
                        let n: u32 = num("output", v, u32::MAX.into())?;
                        if n < 14 {
                            return Err(bad("output", v, "max_len is less than the minimum 14"));
                        }
                        max_len = Some(n);
                    }
                    _ => return Err(bad("output", arg, format!("invalid key '{k}'"))),
                }
            }
            let port = port.unwrap_or(0);
            check_output_port("output", arg, port)?;
            return Ok(OfAction::OutputTrunc {
                port,
                max_len: max_len.unwrap_or(0),
            });
        }
        if let Some(port) = parse_port(arg, self.names) {
            check_output_port("output", arg, port)?;
            return Ok(OfAction::Output {
                port,
                max_len: if port == OFPP_CONTROLLER { u16::MAX } else { 0 },
            });
        }
        match Subfield::parse(arg) {
            Ok(src) => {
                self.check_prereq(src.field.field())?;
                Ok(OfAction::OutputReg {
                    src,
                    max_len: u16::MAX,
                })
            }
            Err(_) => Err(bad("output", arg, "output to unknown port")),
        }
    }

    fn parse_controller(&mut self, arg: &str) -> Result<OfAction, SyntaxError> {
        let mut c = Controller::default();
        if !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit()) {
            c.max_len = num("controller", arg, 0xffff)?;
        } else {
            for (k, v) in KeyValues::new(arg) {
                match k {
                    "reason" => {
                        c.reason = PacketInReason::ALL
                            .iter()
                            .find(|(_, n)| n.eq_ignore_ascii_case(v))
                            .map(|(r, _)| *r)
                            .ok_or_else(|| bad("controller", v, "unknown reason"))?;
                    }
                    "max_len" => c.max_len = num("controller", v, 0xffff)?,
                    "id" => c.id = num("controller", v, 0xffff)?,
                    "userdata" => {
                        c.userdata = parse_hex_bytes(v)
                            .ok_or_else(|| bad("controller", v, "bad hex digit in userdata"))?;
                    }
                    "pause" => c.pause = true,
                    "meter_id" => c.meter_id = Some(num("controller", v, u32::MAX.into())?),
                    _ => return Err(bad("controller", arg, format!("unknown key '{k}'"))),
                }
            }
        }
        if c.reason == PacketInReason::Action
            && c.id == 0
            && c.userdata.is_empty()
            && !c.pause
            && c.meter_id.is_none()
        {
            Ok(OfAction::Output {
                port: OFPP_CONTROLLER,
                max_len: c.max_len,
            })
        } else {
            Ok(OfAction::Controller(c))
        }
    }

    fn parse_resubmit(&mut self, arg: &str) -> Result<OfAction, SyntaxError> {
        let mut parts = arg.splitn(3, ',');
        let port = match parts.next().filter(|s| !s.is_empty()) {
            Some(p) => Some(port_of("resubmit", p, self.names)?),
            None => None,
        }
        .filter(|&p| p != OFPP_IN_PORT);
        let table = match parts.next().filter(|s| !s.is_empty()) {
            Some(t) => Some(table_of("resubmit", t)?),
            None => None,
        }
        .filter(|&t| t != 255);
        let ct = match parts.next().filter(|s| !s.is_empty()) {
            Some("ct") => true,
            Some(other) => return Err(bad("resubmit", other, "unknown parameter")),
            None => false,
        };
        if port.is_none() && table.is_none() {
            return Err(bad(
                "resubmit",
                arg,
                "at least one in_port or table must be specified",
            ));
        }
        if ct && !self.ct_valid {
            return Err(bad(
                "resubmit",
                arg,
                "ct needs a match on a valid connection (ct_state=+trk+est, -inv+trk, ...)",
            ));
        }
        Ok(OfAction::Resubmit { port, table, ct })
    }

    /// `load:VALUE->DST[...]`.
    fn parse_load(
        &mut self,
        arg: &str,
        outer: Outer,
        out: &mut Vec<OfAction>,
    ) -> Result<(), SyntaxError> {
        let (value, dst) = arg
            .split_once("->")
            .ok_or_else(|| bad("load", arg, "missing `->'"))?;
        if dst.is_empty() {
            return Err(bad("load", arg, "missing field name following `->'"));
        }
        let sf = subfield_of("load", dst)?;
        let f = sf.field.field();
        let v = parse_int(value, f.n_bytes)
            .map_err(|_| bad("load", arg, "cannot parse integer value"))?;
        if v & !ones(sf.n_bits) != 0 {
            return Err(bad(
                "load",
                arg,
                format!("value does not fit into {} bits", sf.n_bits),
            ));
        }
        self.load_action(
            sf.field,
            v << sf.ofs,
            sf.mask(),
            WriteForm::Load,
            outer,
            out,
        )
    }

    /// A register-load style write of `field` in `form` (`load:`, or the field's own action),
    /// with the checks OVS applies to one.
    fn load_action(
        &mut self,
        field: FieldId,
        value: u128,
        mask: u128,
        form: WriteForm,
        outer: Outer,
        out: &mut Vec<OfAction>,
    ) -> Result<(), SyntaxError> {
        let f = field.field();
        if !f.writable {
            return Err(SyntaxError::ReadOnly(f.name.to_string()));
        }
        self.check_ct_field(field, outer)?;
        self.check_set_field(f, f.name)?;
        if field == FieldId::VLAN_TCI {
            let tci = (u128::from(self.tci()) & !mask) | (value & mask);
            self.set_tci(tci as u16);
        }
        if form == WriteForm::Load {
            push_set_field(out, field, value, mask);
        } else {
            out.push(OfAction::SetField {
                field,
                value: value & mask,
                mask,
                form,
            });
        }
        Ok(())
    }

    fn check_ct_field(&self, field: FieldId, outer: Outer) -> Result<(), SyntaxError> {
        if requires_ct(field) && outer != Outer::Ct {
            return Err(SyntaxError::BadAction {
                action: "set_field".to_string(),
                arg: field.field().name.to_string(),
                reason: "cannot set CT fields outside of ct action".to_string(),
            });
        }
        if outer == Outer::Ct && !requires_ct(field) {
            return Err(SyntaxError::BadAction {
                action: "ct".to_string(),
                arg: field.field().name.to_string(),
                reason: format!(
                    "ct action doesn't support nested modification of {}",
                    field.field().name
                ),
            });
        }
        Ok(())
    }

    /// OVS's `check_SET_FIELD()`: prerequisites, and a VLAN tag for `vlan_vid`.
    fn check_set_field(&self, f: &Field, name: &str) -> Result<(), SyntaxError> {
        self.check_prereq_named(f, name)?;
        if f.id == FieldId::VLAN_VID && self.tci() & 0x1000 == 0 {
            return Err(SyntaxError::MissingPrereq {
                field: name.to_string(),
                prereq: crate::fields::Prereq::VlanVid,
            });
        }
        Ok(())
    }

    /// `set_field:VALUE[/MASK]->FIELD`: one write in the `set_field` form, but for the VLAN
    /// fields, which become the VLAN actions they mean.
    fn parse_set_field(
        &mut self,
        arg: &str,
        outer: Outer,
        out: &mut Vec<OfAction>,
    ) -> Result<(), SyntaxError> {
        let (value, key) = arg
            .split_once("->")
            .ok_or_else(|| bad("set_field", arg, "missing `->'"))?;
        if key.is_empty() {
            return Err(bad("set_field", arg, "missing field name following `->'"));
        }
        let id = crate::fields::field_by_name(key)
            .ok_or_else(|| SyntaxError::UnknownField(key.to_string()))?;
        let f = id.field();
        if !f.writable {
            return Err(SyntaxError::ReadOnly(key.to_string()));
        }
        if let Some(wide) = wide_tun_md_value(id, value) {
            out.push(wide);
            return Ok(());
        }
        let (v, m) =
            parse_field_value(f, value, self.names).map_err(|reason| SyntaxError::BadValue {
                field: key.to_string(),
                value: value.to_string(),
                reason,
            })?;
        let bad_value = |reason: &str| SyntaxError::BadValue {
            field: key.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let valid = match id {
            FieldId::DL_VLAN => 0x0fff,
            _ => f.value_mask(),
        };
        if v & !valid != 0 {
            return Err(bad_value("not a valid value for the field"));
        }
        if m == 0 {
            return Err(bad_value("mask is zero"));
        }
        self.check_ct_field(id, outer)?;
        // dl_vlan and dl_vlan_pcp have no OXM encoding (OVS mangles them); they are written as
        // the OpenFlow 1.0 actions they mean.
        match id {
            FieldId::DL_VLAN | FieldId::DL_VLAN_PCP => {}
            _ => self.check_set_field(f, key)?,
        }
        match id {
            FieldId::VLAN_TCI => {
                if v & 0x1000 != 0 {
                    out.push(OfAction::SetVlanVid((v & 0x0fff) as u16));
                    out.push(OfAction::SetVlanPcp(((v >> 13) & 7) as u8));
                } else {
                    out.push(OfAction::StripVlan);
                }
                self.set_tci(v as u16);
            }
            FieldId::VLAN_VID | FieldId::DL_VLAN => {
                out.push(OfAction::SetVlanVid((v & 0x0fff) as u16));
                self.set_tci(self.tci() | 0x1000);
            }
            FieldId::VLAN_PCP | FieldId::DL_VLAN_PCP => {
                out.push(OfAction::SetVlanPcp(v as u8));
                self.set_tci(self.tci() | 0x1000);
            }
            _ => {
                // Field space: a mask over the field's bits.
                let mask = m & ones(f.n_bits);
                if id.is_tun_metadata() && v & !m != 0 {
                    return Err(bad_value("value has 1-bits outside the mask"));
                }
                // The value is kept whole, as OVS keeps it (OpenFlow 1.0 sends a masked
                // `set_field:1.2.3.4/24->ip_dst` as `mod_nw_dst:1.2.3.4`).
                out.push(OfAction::SetField {
                    field: id,
                    value: v & ones(f.n_bits),
                    mask,
                    form: WriteForm::SetField,
                });
            }
        }
        Ok(())
    }

    fn parse_move(&mut self, arg: &str, outer: Outer) -> Result<OfAction, SyntaxError> {
        let (src, rest) = Subfield::parse_prefix(arg).map_err(|r| bad("move", arg, r))?;
        let dst = rest
            .strip_prefix("->")
            .ok_or_else(|| bad("move", arg, "missing `->' following source"))?;
        let dst = subfield_of("move", dst)?;
        if src.n_bits != dst.n_bits {
            return Err(bad(
                "move",
                arg,
                format!(
                    "source field is {} bits wide but destination is {} bits wide",
                    src.n_bits, dst.n_bits
                ),
            ));
        }
        let df = dst.field.field();
        self.check_ct_field(dst.field, outer)?;
        self.check_prereq(src.field.field())?;
        self.check_prereq(df)?;
        if !df.writable {
            return Err(SyntaxError::ReadOnly(df.name.to_string()));
        }
        Ok(OfAction::RegMove { src, dst })
    }

    fn check_nat(&self, nat: &Nat) -> Result<(), SyntaxError> {
        let dl_type = self.flow.dp.eth_type();
        let ok = match nat.addrs {
            _ if dl_type != 0x0800 && dl_type != 0x86dd => false,
            Some(NatAddrs::V4(..)) => dl_type == 0x0800,
            Some(NatAddrs::V6(..)) => dl_type == 0x86dd,
            None => true,
        };
        if ok {
            Ok(())
        } else {
            Err(SyntaxError::MissingPrereq {
                field: "nat".to_string(),
                prereq: match nat.addrs {
                    Some(NatAddrs::V6(..)) => crate::fields::Prereq::Ipv6,
                    Some(NatAddrs::V4(..)) => crate::fields::Prereq::Ipv4,
                    None => crate::fields::Prereq::IpAny,
                },
            })
        }
    }

    fn parse_ct(&mut self, arg: &str, depth: usize) -> Result<OfAction, SyntaxError> {
        let mut ct = Ct {
            commit: false,
            force: false,
            table: None,
            zone: CtZone::Imm(0),
            alg: 0,
            actions: Vec::new(),
        };
        for (k, v) in KeyValues::new(arg) {
            match k {
                "commit" => ct.commit = true,
                "force" => ct.force = true,
                "table" => {
                    let t = table_of("ct", v)?;
                    if t == 255 {
                        return Err(bad("ct", v, "invalid table 0xff"));
                    }
                    ct.table = Some(t);
                }
                "zone" => {
                    ct.zone = match parse_uint(v, 0xffff) {
                        Ok(z) => CtZone::Imm(z as u16),
                        Err(_) => {
                            let sf = subfield_of("ct", v)?;
                            self.check_prereq(sf.field.field())?;
                            CtZone::Field(sf)
                        }
                    };
                }
                "alg" => {
                    ct.alg = match v {
                        "ftp" => 21,
                        "tftp" => 69,
                        _ => return Err(bad("ct", v, "invalid conntrack helper")),
                    };
                }
                "nat" => {
                    let nat = parse_nat(v)?;
                    self.check_nat(&nat)?;
                    ct.actions.push(OfAction::Nat(nat));
                }
                "exec" => {
                    let mut sub = self.sub();
                    let nested = sub.parse_nested(v, Outer::Ct, depth + 1)?;
                    ct.actions.extend(nested);
                }
                _ => return Err(bad("ct", k, "invalid argument")),
            }
        }
        if ct.force && !ct.commit {
            return Err(bad("ct", arg, "\"force\" flag requires \"commit\" flag"));
        }
        let dl_type = self.flow.dp.eth_type();
        if dl_type != 0x0800 && dl_type != 0x86dd {
            return Err(SyntaxError::MissingPrereq {
                field: "ct".to_string(),
                prereq: crate::fields::Prereq::IpAny,
            });
        }
        if self.flow.dp.ct_state() & flow::key::ct_state::INV != 0 && ct.commit {
            return Err(bad("ct", arg, "cannot commit a connection matched as +inv"));
        }
        let proto = self.flow.dp.nw_proto();
        if (ct.alg == 21 && proto != 6) || (ct.alg == 69 && proto != 17) {
            return Err(bad(
                "ct",
                arg,
                "alg requires the matching L4 protocol (tcp for ftp, udp for tftp)",
            ));
        }
        if !ct.commit
            && ct
                .actions
                .iter()
                .any(|a| !matches!(a, OfAction::Nat(n) if *n == Nat::default()))
        {
            return Err(bad(
                "ct",
                arg,
                "requires commit flag if actions other than nat without arguments are specified",
            ));
        }
        Ok(OfAction::Ct(ct))
    }
}

/// `check_pkt_larger(N)->DST` (the lexer hands over `N)->DST`), as OVS parses it: the
/// destination first, which must be one bit, then the length.
fn parse_check_pkt_larger(arg: &str) -> Result<OfAction, SyntaxError> {
    let key = "check_pkt_larger";
    let (value, dst) = arg
        .split_once("->")
        .ok_or_else(|| bad(key, arg, format!("{arg}: missing `->'")))?;
    if dst.is_empty() {
        return Err(bad(
            key,
            arg,
            format!("{arg}: missing field name following `->'"),
        ));
    }
    let value = value.strip_suffix(')').unwrap_or(value);
    let dst = subfield_of(key, dst)?;
    if dst.n_bits != 1 {
        return Err(bad(key, arg, "Only 1-bit destination field is allowed"));
    }
    if !dst.field.field().writable {
        return Err(SyntaxError::ReadOnly(dst.field.field().name.to_string()));
    }
    Ok(OfAction::CheckPktLarger {
        pkt_len: num(key, value, 0xffff)?,
        dst,
    })
}

fn parse_nat(arg: &str) -> Result<Nat, SyntaxError> {
    let mut nat = Nat::default();
    for (k, v) in KeyValues::new(arg) {
        match k {
            "src" | "dst" => {
                if nat.kind.is_some() {
                    return Err(bad(
                        "nat",
                        arg,
                        "may only specify one of \"src\" or \"dst\"",
                    ));
                }
                nat.kind = Some(if k == "src" {
                    NatKind::Src
                } else {
                    NatKind::Dst
                });
                if !v.is_empty() {
                    parse_nat_range(v, &mut nat)?;
                }
            }
            "persistent" => nat.persistent = true,
            "hash" => nat.hash = true,
            "random" => nat.random = true,
            _ => return Err(bad("nat", k, "invalid key")),
        }
    }
    if nat.kind.is_none() && (nat.persistent || nat.hash || nat.random) {
        return Err(bad(
            "nat",
            arg,
            "flags allowed only with \"src\" or \"dst\"",
        ));
    }
    if nat.hash && nat.random {
        return Err(bad(
            "nat",
            arg,
            "both \"hash\" and \"random\" are not allowed",
        ));
    }
    // OVS prints the flags only with an address range; without one they are dropped here so
    // that the printed form parses back to the same action.
    if nat.addrs.is_none() {
        nat.persistent = false;
        nat.hash = false;
        nat.random = false;
    }
    Ok(nat)
}

/// `ADDR[-ADDR][:PORT[-PORT]]`, IPv6 addresses optionally in brackets.
fn parse_nat_range(s: &str, nat: &mut Nat) -> Result<(), SyntaxError> {
    let err = || bad("nat", s, "invalid nat range");
    let (addrs, ports) = if s.starts_with('[') || s.matches(':').count() > 1 {
        // IPv6: "[a]-[b]:p-q", "a-b" (no ports without brackets).
        let (addr_part, port_part) = match s.rfind(']') {
            Some(i) => {
                let rest = &s[i + 1..];
                match rest.strip_prefix(':') {
                    Some(p) => (&s[..=i], Some(p)),
                    None if rest.is_empty() => (s, None),
                    None => return Err(err()),
                }
            }
            None => (s, None),
        };
        let strip = |a: &str| a.trim_start_matches('[').trim_end_matches(']').to_string();
        let (lo, hi) = match addr_part
            .split_once("]-[")
            .map(|(a, b)| (format!("{a}]"), format!("[{b}")))
        {
            Some((a, b)) => (strip(&a), Some(strip(&b))),
            None => match addr_part.split_once('-') {
                Some((a, b)) => (strip(a), Some(strip(b))),
                None => (strip(addr_part), None),
            },
        };
        let lo: Ipv6Addr = lo.parse().map_err(|_| err())?;
        let hi: Ipv6Addr = match hi {
            Some(h) => h.parse().map_err(|_| err())?,
            None => lo,
        };
        if hi < lo {
            return Err(err());
        }
        (NatAddrs::V6(lo, hi), port_part)
    } else {
        let (addr_part, port_part) = match s.split_once(':') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let (lo, hi) = match addr_part.split_once('-') {
            Some((a, b)) => (a, Some(b)),
            None => (addr_part, None),
        };
        let lo = parse_ipv4(lo).ok_or_else(err)?;
        let hi = match hi {
            Some(h) => parse_ipv4(h).ok_or_else(err)?,
            None => lo,
        };
        if hi < lo {
            return Err(err());
        }
        (NatAddrs::V4(lo.into(), hi.into()), port_part)
    };
    nat.addrs = Some(addrs);
    if let Some(p) = ports {
        let (lo, hi) = match p.split_once('-') {
            Some((a, b)) => (a, Some(b)),
            None => (p, None),
        };
        let lo = parse_decimal(lo, 0xffff).map_err(|_| err())? as u16;
        let hi = match hi {
            Some(h) => parse_decimal(h, 0xffff).map_err(|_| err())? as u16,
            None => lo,
        };
        if hi < lo {
            return Err(err());
        }
        // OVS treats port 0 as "no port range".
        nat.ports = (lo != 0).then_some((lo, if hi == 0 { lo } else { hi }));
    }
    Ok(())
}

/// `encap(HEADER)`: `ethernet`, `mpls` or `mpls_mc`, none of which takes properties (OVS's
/// `parse_ENCAP()`); `nsh` is OVS's too but flowpath has no NSH.
fn parse_encap(key: &str, arg: &str) -> Result<u32, SyntaxError> {
    use super::packet_type::{ETHERNET, MPLS, MPLS_MC};
    let Some((hdr, props)) = KeyValues::new(arg).next() else {
        return Err(bad(key, arg, format!("Missing encap hdr: {arg}")));
    };
    let pt = match hdr {
        "ethernet" => ETHERNET,
        "mpls" => MPLS,
        "mpls_mc" => MPLS_MC,
        "nsh" => return Err(SyntaxError::Unsupported(format!("{key}(nsh)"))),
        _ => return Err(bad(key, arg, format!("Encap hdr not supported: {props}"))),
    };
    if let Some((prop, _)) = KeyValues::new(props).next() {
        return Err(bad(key, arg, format!("Invalid property: {prop}")));
    }
    Ok(pt)
}

/// `decap()` or `decap(packet_type(ns=N,type=T))` (OVS's `parse_DECAP()`).
fn parse_decap(key: &str, arg: &str) -> Result<u32, SyntaxError> {
    let Some((k, v)) = KeyValues::new(arg).next() else {
        return Ok(super::packet_type::USE_NEXT_PROTO);
    };
    if k != "packet_type" {
        return Err(bad(key, arg, format!("Invalid decap argument: {k}")));
    }
    let mut kv = KeyValues::new(v);
    let ns: u16 = match kv.next() {
        Some(("ns", n)) => num("ns", n, 0xffff)?,
        _ => return Err(bad(key, arg, "Missing packet_type attribute ns")),
    };
    // OFPHTN_N_TYPES: the ONF, ethertype, IP protocol, port and IPv4 option namespaces.
    if ns >= 5 {
        return Err(bad(key, arg, format!("Unsupported ns value: {ns}")));
    }
    let ty: u16 = match kv.next() {
        Some(("type", t)) => num("type", t, 0xffff)?,
        _ => return Err(bad(key, arg, "Missing packet_type attribute type")),
    };
    Ok(u32::from(ns) << 16 | u32::from(ty))
}
