//! Connection tracking in translation (OVS's `compose_conntrack_action()` and
//! `compose_recirculate_and_fork()`): the `ct` action with its nested `ct_mark`/`ct_label`
//! writes and `nat`, the fork that resumes the pipeline after conntrack in a later pass, and
//! the key helpers that clear or swap conntrack fields.

use super::*;

impl Ctx<'_> {
    /// `ct(...)`, as OVS's `compose_conntrack_action()`: commit what is pending, run the
    /// nested actions to learn which `ct_mark`/`ct_label` bits they write (the datapath's
    /// `mark=`/`label=`) and the `nat`, emit `ct`, fork with `table=`, then clear the
    /// conntrack fields: after `ct` this pass cannot know them.
    pub(super) fn conntrack(&mut self, ct: &Ct, table: usize) {
        let zone = match &ct.zone {
            CtZone::Imm(z) => *z,
            CtZone::Field(sf) => {
                sf.unwildcard(&mut self.wc);
                sf.read(&self.flow) as u16
            }
        };
        self.commit();
        // The nested actions' writes of ct_mark and ct_label are what the action sets: record
        // them in wildcards cleared for the purpose, then restore the consulted bits.
        let old = (self.wc.dp.ct_mark(), self.wc.dp.ct_label());
        self.wc.dp.set_ct_mark(0).set_ct_label(0);
        self.ct_nat = None;
        self.do_actions(&ct.actions, table);
        let (mark_m, label_m) = (self.wc.dp.ct_mark(), self.wc.dp.ct_label());
        self.wc.dp.set_ct_mark(old.0).set_ct_label(old.1);
        let helper = match ct.alg {
            0 => None,
            21 => Some("ftp".to_owned()),
            69 => Some("tftp".to_owned()),
            n => {
                self.trace_add(
                    NodeKind::Error,
                    format_args!("cannot serialize ct_helper {n}"),
                );
                None
            }
        };
        let f = &self.flow.dp;
        let action = flow::odp::CtAction {
            // force_commit is a commit of its own kind: the datapath takes one or the other.
            commit: ct.commit && !ct.force,
            force_commit: ct.commit && ct.force,
            zone,
            mark: (mark_m != 0).then(|| (f.ct_mark() & mark_m, mark_m)),
            label: (label_m != 0).then(|| (f.ct_label() & label_m, label_m)),
            helper,
            timeout: None,
            nat: self.ct_nat.as_ref().map(odp_nat),
        };
        self.out.push(Action::Ct(Box::new(action)));
        if let Some(t) = ct.table {
            self.conntracked = true;
            self.recirculate_and_fork(t, zone);
        }
        self.ct_nat = None;
        clear_conntrack(&mut self.flow.dp);
        self.note("Sets the packet to an untracked state, and clears all the conntrack fields.");
        self.conntracked = false;
    }

    /// Freezes the pipeline state for a pass that resumes at `table` and emits `recirc(ID)`;
    /// translation of this pass goes on (OVS's `compose_recirculate_and_fork()`).
    pub(super) fn recirculate_and_fork(&mut self, table: u8, zone: u16) {
        let state = FrozenState {
            bridge: self.br().name.clone(),
            table,
            in_port: self.flow.dp.in_port(),
            meta: self.flow.meta,
            tunnel: crate::recirc::tunnel_snapshot(&self.flow.dp),
            conntracked: self.conntracked,
            actions: Vec::new(),
            stack: self.stack.clone(),
            action_set: self.action_set.actions.clone(),
            userdata: Vec::new(),
            mirrors: self.mirrors,
            packet_out: false,
        };
        let Some(id) = self.pipe.recirc.intern(state) else {
            self.trace_add(NodeKind::Error, "Failed to allocate recirculation id");
            self.res.failed = Some("No recirculation context");
            self.exit = true;
            return;
        };
        self.out.push(Action::Recirc(id));
        if self.trace.is_some() {
            // The packet the datapath recirculates: as committed, with its own input port and
            // tunnel metadata (raw GENEVE options).
            let mut key = self.flow.dp.clone();
            key.set_in_port(self.key.in_port());
            crate::recirc::tunnel_restore(
                &mut key,
                crate::recirc::tunnel_snapshot(self.key).as_deref(),
            );
            key.set_recirc_id(id);
            self.res.forks.push(Fork {
                recirc_id: id,
                table,
                zone,
                key,
                meta: self.flow.meta,
                nat: self.ct_nat.clone(),
            });
            self.note(format_args!(
                "A clone of the packet is forked to recirculate. The forked pipeline will be \
                 resumed at table {table}."
            ));
        }
    }
}

/// Clears the conntrack fields of a key (OVS's `flow_clear_conntrack()`): state, zone, mark,
/// label and the original-direction tuple.
pub(super) fn clear_conntrack(k: &mut FlowKey) {
    k.set_ct_state(0)
        .set_ct_zone(0)
        .set_ct_mark(0)
        .set_ct_label(0)
        .set_ct_nw_proto(0)
        .set_ct_ipv6_src(std::net::Ipv6Addr::UNSPECIFIED)
        .set_ct_ipv6_dst(std::net::Ipv6Addr::UNSPECIFIED)
        .set_ct_tp_src(0)
        .set_ct_tp_dst(0);
}

/// Swaps the packet's 5-tuple with the conntrack original-direction tuple (OVS's
/// `tuple_swap_flow()`), for `resubmit(,N,ct)`; applied to the flow and to its wildcards.
pub(super) fn tuple_swap(k: &mut flow::FlowWords, ipv4: bool) {
    let (p, cp) = (k.nw_proto(), k.ct_nw_proto());
    k.set_nw_proto(cp).set_ct_nw_proto(p);
    if ipv4 {
        let (s, d, cs, cd) = (k.nw_src(), k.nw_dst(), k.ct_nw_src(), k.ct_nw_dst());
        k.set_nw_src(cs).set_nw_dst(cd);
        k.set_ct_nw_src(s);
        k.set_ct_nw_dst(d);
    } else {
        let (s, d) = (k.ipv6_src(), k.ipv6_dst());
        let (cs, cd) = (k.ct_ipv6_src(), k.ct_ipv6_dst());
        k.set_ipv6_src(cs)
            .set_ipv6_dst(cd)
            .set_ct_ipv6_src(s)
            .set_ct_ipv6_dst(d);
    }
    let (ts, td, cts, ctd) = (k.tp_src(), k.tp_dst(), k.ct_tp_src(), k.ct_tp_dst());
    k.set_tp_src(cts)
        .set_tp_dst(ctd)
        .set_ct_tp_src(ts)
        .set_ct_tp_dst(td);
}

/// The datapath `nat` of an OpenFlow `nat(...)` (OVS's `put_ct_nat()`): the range's upper
/// ends only when above the lower ones.
pub(super) fn odp_nat(n: &Nat) -> flow::odp::CtNat {
    use flow::odp::NatKind as K;
    let mut out = flow::odp::CtNat {
        kind: n.kind.map(|k| match k {
            crate::syntax::NatKind::Src => K::Src,
            crate::syntax::NatKind::Dst => K::Dst,
        }),
        ..Default::default()
    };
    if out.kind.is_none() {
        return out;
    }
    out.persistent = n.persistent;
    out.hash = n.hash;
    out.random = n.random && !n.hash;
    match n.addrs {
        Some(NatAddrs::V4(lo, hi)) => {
            out.ip_min = Some(IpAddr::V4(lo));
            out.ip_max = (hi > lo).then_some(IpAddr::V4(hi));
        }
        Some(NatAddrs::V6(lo, hi)) => {
            out.ip_min = Some(IpAddr::V6(lo));
            out.ip_max = (hi > lo).then_some(IpAddr::V6(hi));
        }
        None => {}
    }
    if let (Some(_), Some((lo, hi))) = (n.addrs, n.ports)
        && lo != 0
    {
        out.proto_min = lo;
        out.proto_max = if hi > lo { hi } else { 0 };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::NatKind;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn nat_ranges_print_as_ovs_puts_them() {
        let v4 = |a: [u8; 4]| Ipv4Addr::from(a);
        let one = Nat {
            kind: Some(NatKind::Src),
            addrs: Some(NatAddrs::V4(v4([192, 0, 2, 10]), v4([192, 0, 2, 10]))),
            ..Nat::default()
        };
        let n = odp_nat(&one);
        assert_eq!(
            (n.ip_min, n.ip_max),
            (Some(IpAddr::V4(v4([192, 0, 2, 10]))), None)
        );
        let ct = Action::Ct(Box::new(flow::odp::CtAction {
            commit: true,
            nat: Some(n),
            ..Default::default()
        }));
        assert_eq!(
            flow::odp::format_actions(&[ct], None),
            "ct(commit,nat(src=192.0.2.10))"
        );
        let range = Nat {
            kind: Some(NatKind::Dst),
            addrs: Some(NatAddrs::V6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST)),
            ports: Some((80, 80)),
            persistent: true,
            ..Nat::default()
        };
        let n = odp_nat(&range);
        assert_eq!((n.proto_min, n.proto_max, n.ip_max), (80, 0, None));
        let ct = Action::Ct(Box::new(flow::odp::CtAction {
            commit: true,
            nat: Some(n),
            ..Default::default()
        }));
        assert_eq!(
            flow::odp::format_actions(&[ct], None),
            "ct(commit,nat(dst=[::1]:80,persistent))"
        );
        // Bare `nat`: no kind, nothing else.
        assert_eq!(odp_nat(&Nat::default()), flow::odp::CtNat::default());
    }

    #[test]
    fn tuple_swap_exchanges_the_packet_and_connection_tuples() {
        let mut k = FlowKey::new();
        k.set_nw_src(Ipv4Addr::new(10, 0, 0, 2))
            .set_nw_dst(Ipv4Addr::new(10, 0, 0, 1))
            .set_nw_proto(6)
            .set_tp_src(80)
            .set_tp_dst(4000)
            .set_ct_nw_proto(6)
            .set_ct_tp_src(4000)
            .set_ct_tp_dst(80);
        k.set_ct_nw_src(Ipv4Addr::new(10, 0, 0, 1));
        k.set_ct_nw_dst(Ipv4Addr::new(10, 0, 0, 2));
        let orig = k.clone();
        tuple_swap(&mut k, true);
        assert_eq!(
            (k.nw_src(), k.nw_dst(), k.tp_src(), k.tp_dst()),
            (
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 0, 2),
                4000,
                80
            )
        );
        assert_eq!(k.ct_nw_src(), Ipv4Addr::new(10, 0, 0, 2));
        tuple_swap(&mut k, true);
        assert_eq!(k, orig);
    }
}
