//! Printing OpenFlow actions as `ovs-ofctl dump-flows` and `ofproto/trace` print them (OVS's
//! `ofpacts_format()`); a field write in the form it came in (OVS's `format_SET_FIELD()`).

use std::fmt::Write;
use std::net::Ipv6Addr;

use crate::fields::{FieldId, Subfield, ones};
use crate::syntax::ports::{OFPP_CONTROLLER, OFPP_MAX, PortNames, format_port};
use crate::syntax::value::{hash_x, put_field_value, put_ipv4, put_ipv6};

use super::{
    Ct, CtZone, Nat, NatAddrs, NatKind, OfAction, PacketInReason, WriteForm, load_segments,
};

/// Appends the actions as `ovs-ofctl dump-flows` prints them (`drop` when there are none).
pub fn format_actions(out: &mut String, actions: &[OfAction], names: &dyn PortNames) {
    if actions.is_empty() {
        out.push_str("drop");
        return;
    }
    for (i, a) in actions.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        format_action(out, a, names);
    }
}

fn format_load(out: &mut String, field: FieldId, value: u128, mask: u128) {
    let f = field.field();
    for (i, (ofs, n_bits)) in load_segments(mask, f.n_bits).into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let v = (value >> ofs) & ones(n_bits);
        let sf = Subfield { field, ofs, n_bits };
        let _ = write!(out, "load:{}->{sf}", hash_x(v));
    }
}

fn format_action(out: &mut String, a: &OfAction, names: &dyn PortNames) {
    match a {
        OfAction::Output { port, max_len } => {
            if *port < OFPP_MAX {
                out.push_str("output:");
            }
            format_port(out, *port, names);
            if *port == OFPP_CONTROLLER {
                let _ = write!(out, ":{max_len}");
            }
        }
        OfAction::OutputReg { src, .. } => {
            let _ = write!(out, "output:{src}");
        }
        OfAction::OutputTrunc { port, max_len } => {
            out.push_str("output(port=");
            format_port(out, *port, names);
            let _ = write!(out, ",max_len={max_len})");
        }
        OfAction::Controller(c) => {
            out.push_str("controller(");
            let start = out.len();
            if c.reason != PacketInReason::Action {
                let _ = write!(out, "reason={},", c.reason.name());
            }
            if c.max_len != u16::MAX {
                let _ = write!(out, "max_len={},", c.max_len);
            }
            if c.id != 0 {
                let _ = write!(out, "id={},", c.id);
            }
            if !c.userdata.is_empty() {
                out.push_str("userdata=");
                put_hex_dotted(out, &c.userdata);
                out.push(',');
            }
            if c.pause {
                out.push_str("pause,");
            }
            if let Some(m) = c.meter_id {
                let _ = write!(out, "meter_id={m},");
            }
            if out.len() > start {
                out.pop();
            }
            out.push(')');
        }
        OfAction::Enqueue { port, queue } => {
            out.push_str("enqueue:");
            format_port(out, *port, names);
            let _ = write!(out, ":{queue}");
        }
        OfAction::Group(g) => {
            let _ = write!(out, "group:{g}");
        }
        OfAction::SetVlanVid(v) => {
            let _ = write!(out, "mod_vlan_vid:{v}");
        }
        OfAction::SetVlanPcp(p) => {
            let _ = write!(out, "mod_vlan_pcp:{p}");
        }
        OfAction::StripVlan => out.push_str("strip_vlan"),
        OfAction::PushVlan(t) => {
            let _ = write!(out, "push_vlan:{t:#x}");
        }
        OfAction::SetEthSrc(e) => {
            let _ = write!(out, "mod_dl_src:{e}");
        }
        OfAction::SetEthDst(e) => {
            let _ = write!(out, "mod_dl_dst:{e}");
        }
        OfAction::SetIpv4Src(ip) => {
            out.push_str("mod_nw_src:");
            put_ipv4(out, (*ip).into());
        }
        OfAction::SetIpv4Dst(ip) => {
            out.push_str("mod_nw_dst:");
            put_ipv4(out, (*ip).into());
        }
        OfAction::SetIpDscp(t) => {
            let _ = write!(out, "mod_nw_tos:{t}");
        }
        OfAction::SetL4SrcPort(p) => {
            let _ = write!(out, "mod_tp_src:{p}");
        }
        OfAction::SetL4DstPort(p) => {
            let _ = write!(out, "mod_tp_dst:{p}");
        }
        OfAction::SetTunMetadata { field, value } => {
            out.push_str("set_field:");
            crate::syntax::matching::put_hex_bytes(out, value);
            let _ = write!(out, "->{}", field.field().name);
        }
        OfAction::SetField {
            field,
            value,
            mask,
            form,
        } => {
            let f = field.field();
            match form {
                WriteForm::Own if *field == FieldId::IP_TTL => {
                    let _ = write!(out, "mod_nw_ttl:{value}");
                }
                WriteForm::Own if *field == FieldId::IP_ECN => {
                    let _ = write!(out, "mod_nw_ecn:{value}");
                }
                WriteForm::Load => {
                    format_load(out, *field, *value, *mask);
                }
                _ => {
                    out.push_str("set_field:");
                    let m = if *mask == ones(f.n_bits) {
                        f.full_mask()
                    } else {
                        *mask
                    };
                    put_field_value(out, f, *value, m, names);
                    let _ = write!(out, "->{}", f.name);
                }
            }
        }
        OfAction::RegMove { src, dst } => {
            let _ = write!(out, "move:{src}->{dst}");
        }
        OfAction::DecTtl(None) => out.push_str("dec_ttl"),
        OfAction::DecTtl(Some(ids)) => {
            out.push_str("dec_ttl(");
            for (i, id) in ids.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{id}");
            }
            out.push(')');
        }
        OfAction::SetMplsLabel(l) => {
            let _ = write!(out, "set_mpls_label({l})");
        }
        OfAction::SetMplsTc(t) => {
            let _ = write!(out, "set_mpls_tc({t})");
        }
        OfAction::SetMplsTtl(t) => {
            let _ = write!(out, "set_mpls_ttl({t})");
        }
        OfAction::DecMplsTtl => out.push_str("dec_mpls_ttl"),
        OfAction::PushMpls(t) => {
            let _ = write!(out, "push_mpls:0x{t:04x}");
        }
        OfAction::PopMpls(t) => {
            let _ = write!(out, "pop_mpls:0x{t:04x}");
        }
        OfAction::Encap(pt) => {
            let _ = write!(out, "encap({})", super::packet_type::encap_name(*pt));
        }
        OfAction::Decap(super::packet_type::USE_NEXT_PROTO) => out.push_str("decap()"),
        OfAction::Decap(pt) => {
            let (ns, ty) = (pt >> 16, pt & 0xffff);
            // C's `%#x`: no prefix for zero.
            let ty = if ty == 0 {
                "0".to_string()
            } else {
                format!("{ty:#x}")
            };
            let _ = write!(out, "decap(packet_type(ns={ns},type={ty}))");
        }
        OfAction::SetTunnel { id, tun64 } => {
            let wide = *tun64 || *id > u64::from(u32::MAX);
            let _ = write!(
                out,
                "set_tunnel{}:{}",
                if wide { "64" } else { "" },
                hash_x((*id).into())
            );
        }
        OfAction::SetQueue(q) => {
            let _ = write!(out, "set_queue:{q}");
        }
        OfAction::PopQueue => out.push_str("pop_queue"),
        OfAction::FinTimeout { idle, hard } => {
            out.push_str("fin_timeout(");
            let start = out.len();
            if *idle != 0 {
                let _ = write!(out, "idle_timeout={idle},");
            }
            if *hard != 0 {
                let _ = write!(out, "hard_timeout={hard},");
            }
            if out.len() > start {
                out.pop();
            }
            out.push(')');
        }
        OfAction::Resubmit { port, table, ct } => {
            // OVS prints `resubmit:PORT` even with `ct`, which then reads back without it;
            // the parenthesized form keeps it.
            if let (Some(p), None, false) = (port, table, ct) {
                out.push_str("resubmit:");
                format_port(out, *p, names);
            } else {
                out.push_str("resubmit(");
                if let Some(p) = port {
                    format_port(out, *p, names);
                }
                out.push(',');
                if let Some(t) = table {
                    let _ = write!(out, "{t}");
                }
                if *ct {
                    out.push_str(",ct");
                }
                out.push(')');
            }
        }
        OfAction::GotoTable(t) => {
            let _ = write!(out, "goto_table:{t}");
        }
        OfAction::WriteMetadata { value, mask } => {
            let _ = write!(out, "write_metadata:{}", hash_x((*value).into()));
            if *mask != u64::MAX {
                let _ = write!(out, "/{}", hash_x((*mask).into()));
            }
        }
        OfAction::Note(data) => {
            out.push_str("note:");
            put_hex_dotted(out, data);
        }
        OfAction::Exit => out.push_str("exit"),
        OfAction::Clone(actions) => {
            out.push_str("clone(");
            format_actions(out, actions, names);
            out.push(')');
        }
        OfAction::Ct(ct) => format_ct(out, ct, names),
        OfAction::CtClear => out.push_str("ct_clear"),
        OfAction::DebugRecirc => out.push_str("debug_recirc"),
        OfAction::DebugSlow => out.push_str("debug_slow"),
        OfAction::Nat(nat) => format_nat(out, nat),
        OfAction::Meter(m) => {
            let _ = write!(out, "meter:{m}");
        }
        OfAction::Conjunction {
            id,
            clause,
            n_clauses,
        } => {
            let _ = write!(out, "conjunction({id},{}/{n_clauses})", clause + 1);
        }
        OfAction::Learn(l) => super::learn::format_learn(out, l, names),
        OfAction::StackPush(sf) => {
            let _ = write!(out, "push:{sf}");
        }
        OfAction::StackPop(sf) => {
            let _ = write!(out, "pop:{sf}");
        }
        OfAction::WriteActions(actions) => {
            out.push_str("write_actions(");
            if !actions.is_empty() {
                format_actions(out, actions, names);
            }
            out.push(')');
        }
        OfAction::ClearActions => out.push_str("clear_actions"),
        OfAction::CheckPktLarger { pkt_len, dst } => {
            let _ = write!(out, "check_pkt_larger({pkt_len})->{dst}");
        }
        OfAction::Sample(s) => super::sample::format_sample(out, s, names),
        OfAction::Multipath(m) => super::multipath::format_multipath(out, m),
        OfAction::Bundle(b) => super::bundle::format_bundle(out, b, names),
    }
}

fn put_hex_dotted(out: &mut String, data: &[u8]) {
    for (i, b) in data.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        let _ = write!(out, "{b:02x}");
    }
}

fn format_ct(out: &mut String, ct: &Ct, names: &dyn PortNames) {
    out.push_str("ct(");
    let start = out.len();
    if ct.commit {
        out.push_str("commit,");
    }
    if ct.force {
        out.push_str("force,");
    }
    if let Some(t) = ct.table {
        let _ = write!(out, "table={t},");
    }
    match ct.zone {
        CtZone::Field(sf) => {
            let _ = write!(out, "zone={sf},");
        }
        CtZone::Imm(0) => {}
        CtZone::Imm(z) => {
            let _ = write!(out, "zone={z},");
        }
    }
    let mut actions = &ct.actions[..];
    if let Some(OfAction::Nat(nat)) = actions.first() {
        format_nat(out, nat);
        out.push(',');
        actions = &actions[1..];
    }
    if !actions.is_empty() {
        out.push_str("exec(");
        format_actions(out, actions, names);
        out.push_str("),");
    }
    match ct.alg {
        0 => {}
        21 => out.push_str("alg=ftp,"),
        69 => out.push_str("alg=tftp,"),
        n => {
            let _ = write!(out, "alg={n},");
        }
    }
    if out.len() > start && out.ends_with(',') {
        out.pop();
    }
    out.push(')');
}

fn format_nat(out: &mut String, nat: &Nat) {
    out.push_str("nat");
    let Some(kind) = nat.kind else {
        return;
    };
    out.push('(');
    out.push_str(if kind == NatKind::Src { "src" } else { "dst" });
    if let Some(addrs) = nat.addrs {
        out.push('=');
        let bracket = nat.ports.is_some();
        match addrs {
            NatAddrs::V4(lo, hi) => {
                put_ipv4(out, lo.into());
                if hi != lo {
                    out.push('-');
                    put_ipv4(out, hi.into());
                }
            }
            NatAddrs::V6(lo, hi) => {
                let put = |out: &mut String, a: Ipv6Addr| {
                    if bracket {
                        out.push('[');
                    }
                    put_ipv6(out, a.into());
                    if bracket {
                        out.push(']');
                    }
                };
                put(out, lo);
                if hi != lo && hi != Ipv6Addr::UNSPECIFIED {
                    out.push('-');
                    put(out, hi);
                }
            }
        }
        if let Some((lo, hi)) = nat.ports {
            let _ = write!(out, ":{lo}");
            if hi != lo && hi != 0 {
                let _ = write!(out, "-{hi}");
            }
        }
        if nat.persistent {
            out.push_str(",persistent");
        }
        if nat.hash {
            out.push_str(",hash");
        }
        if nat.random {
            out.push_str(",random");
        }
    }
    out.push(')');
}
