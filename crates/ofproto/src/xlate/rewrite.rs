//! Header rewrites: `set_field` and `load` (with their fields' prerequisites), the L4 port
//! actions, and MPLS: label stack entries written, labels pushed and popped.

use flow::odp::Action;

use super::trace::NodeKind;
use super::{Ctx, MPLS_BOS, is_mpls};
use crate::fields::{Field, FieldId, Prereq};
use crate::pipekey::{PipeKey, PipeMask};

impl Ctx<'_> {
    /// `mod_tp_src`/`mod_tp_dst`: the L4 port of a TCP, UDP or SCTP packet, else nothing
    /// (the protocol is consulted either way).
    pub(super) fn set_l4(&mut self, src: bool, port: u16) {
        let proto = self.flow.dp.nw_proto();
        let et = self.flow.dp.eth_type();
        self.wc.dp.set_nw_proto(0xff);
        if (et != 0x0800 && et != 0x86dd) || !matches!(proto, 6 | 17 | 132) {
            return;
        }
        let f = match (proto, src) {
            (6, true) => FieldId::TCP_SRC,
            (6, false) => FieldId::TCP_DST,
            (17, true) => FieldId::UDP_SRC,
            (17, false) => FieldId::UDP_DST,
            (_, true) => FieldId::SCTP_SRC,
            (_, false) => FieldId::SCTP_DST,
        };
        self.set_field(f, u128::from(port), u128::MAX);
    }

    /// `set_field`/`load`: writes the field if its prerequisites hold (OVS skips the action
    /// otherwise), consulting the bits it writes (commit compares them with the packet's).
    pub(super) fn set_field(&mut self, id: FieldId, value: u128, mask: u128) {
        let f: &Field = id.field();
        if !f.prereq.is_met(&self.flow) {
            self.wc.dp.set_eth_type(0xffff);
            return;
        }
        // A write of an IP header field reads the IP protocol, changed or not (OVS's megaflows
        // show it after set_field, load and mod_nw_*; a move into the same field does not).
        if matches!(f.prereq, Prereq::Ipv4 | Prereq::Ipv6 | Prereq::IpAny) {
            self.wc.dp.set_nw_proto(0xff);
        }
        // So does a write of an ARP field its opcode, which the datapath key keeps in the
        // same place (OVS's mf_set_mask_l3_prereqs()): committing it depends on the opcode.
        if matches!(f.prereq, Prereq::Arp) && self.flow.dp.eth_type() == 0x0806 {
            self.wc.dp.set_nw_proto(0xff);
        }
        // An ND field's prerequisite reads the ICMPv6 type and code (OVS's is_nd()).
        if matches!(f.prereq, Prereq::Nd | Prereq::NdSolicit | Prereq::NdAdvert) {
            self.wc
                .dp
                .set_nw_proto(0xff)
                .set_tp_src(0xffff)
                .set_tp_dst(0xffff);
        }
        let m = mask & f.value_mask();
        let mut fm = PipeKey::new();
        f.set(&mut fm, m);
        let mut add = PipeMask::new();
        add.dp.0 = fm.dp.0.clone();
        add.meta = fm.meta;
        if m == f.value_mask() {
            f.unwildcard(&mut self.wc);
        } else {
            self.wc.union_with(&add);
        }
        f.set_masked(&mut self.flow, value, m);
    }

    pub(super) fn set_lse(&mut self, bits: u32, v: u32) {
        if !is_mpls(self.flow.dp.eth_type()) {
            return;
        }
        let lse = self.flow.dp.mpls_lse0();
        self.flow.dp.set_mpls_lse0((lse & !bits) | (v & bits));
    }

    pub(super) fn push_mpls(&mut self, eth_type: u16) {
        self.commit();
        // Every label already there is matched whole (OVS's flow_push_mpls()).
        let n = if is_mpls(self.flow.dp.eth_type()) {
            self.count_mpls_labels()
        } else {
            0
        };
        if n >= 1 {
            self.wc.dp.set_mpls_lse0(u32::MAX);
        }
        if n >= 2 {
            self.wc.dp.set_mpls_lse1(u32::MAX);
        }
        if n >= 3 {
            self.wc.dp.set_mpls_lse2(u32::MAX);
        }
        let f = &mut self.flow.dp;
        let old_et = f.eth_type();
        let lse = if is_mpls(old_et) {
            f.mpls_lse0() & !0x100
        } else {
            // As OVS: label 0 (IPv4 explicit null) or 2 (IPv6's), the TC the DSCP's low three
            // bits (OVS shifts the DSCP into the 3-bit field, which keeps those; Debian's OVS
            // gives DSCP 46 the TC 6), the TTL the IP TTL (64 when that is 0), bottom of stack.
            let (label, tc, ttl) = if matches!(old_et, 0x0800 | 0x86dd) {
                // Added to what is already matched (a rule's nw_ecn stays in the mask).
                let m = self.wc.dp.nw_tos();
                self.wc.dp.set_nw_tos(m | 0xfc).set_nw_ttl(0xff);
                let ttl = match f.nw_ttl() {
                    0 => 64,
                    t => u32::from(t),
                };
                let label = if old_et == 0x86dd { 2 } else { 0 };
                (label, u32::from(f.nw_tos() >> 2 & 7), ttl)
            } else {
                (0, 0, 64)
            };
            label << 12 | tc << 9 | 0x100 | ttl
        };
        let (l0, l1) = (f.mpls_lse0(), f.mpls_lse1());
        if is_mpls(old_et) {
            f.set_mpls_lse2(l1).set_mpls_lse1(l0);
        }
        f.set_mpls_lse0(lse).set_eth_type(eth_type);
        self.out.push(Action::PushMpls { lse, eth_type });
        self.base = self.flow.dp.clone();
    }

    /// `pop_mpls`, as OVS's `compose_mpls_pop_action()`: the bottom-of-stack bits of the
    /// labels counted and the labels that move up are what the megaflow matches; popping to a
    /// non-MPLS ethertype hides the L3 header from the rest of this pass ([`freeze`]).
    pub(super) fn pop_mpls(&mut self, eth_type: u16) {
        let n = self.count_mpls_labels();
        if n == 0 {
            return;
        }
        let f = &self.flow.dp;
        let lse = [f.mpls_lse0(), f.mpls_lse1(), f.mpls_lse2()];
        if n == lse.len() && lse[n - 1] & MPLS_BOS == 0 {
            // The label under the third is unknown: nothing can be moved up into its place.
            self.trace_add(
                NodeKind::Error,
                "dropping packet on which an MPLS pop action can't be performed as it has \
                 more MPLS LSEs than the 3 supported.",
            );
            self.res.failed = Some("Too many MPLS labels");
            self.out.clear();
            self.exit = true;
            return;
        }
        self.commit();
        if n > 1 {
            self.wc.dp.set_mpls_lse1(u32::MAX);
        }
        if n > 2 {
            self.wc.dp.set_mpls_lse2(u32::MAX);
        }
        let mut left = lse;
        left.copy_within(1..n, 0);
        left[n - 1] = 0;
        let f = &mut self.flow.dp;
        f.set_mpls_lse0(left[0])
            .set_mpls_lse1(left[1])
            .set_mpls_lse2(left[2])
            .set_eth_type(eth_type);
        self.out.push(Action::PopMpls { eth_type });
        self.base = self.flow.dp.clone();
        if !is_mpls(eth_type) {
            self.was_mpls = true;
        }
    }

    /// The packet's MPLS labels, as OVS's `flow_count_mpls_labels()`: up to the one with the
    /// bottom-of-stack bit, whose bit (and those above it) the megaflow then matches.
    pub(super) fn count_mpls_labels(&mut self) -> usize {
        if !is_mpls(self.flow.dp.eth_type()) {
            return 0;
        }
        let f = &self.flow.dp;
        let lse = [f.mpls_lse0(), f.mpls_lse1(), f.mpls_lse2()];
        let mut n = 0;
        for (i, l) in lse.into_iter().enumerate() {
            let w = &mut self.wc.dp;
            let m = [w.mpls_lse0(), w.mpls_lse1(), w.mpls_lse2()][i] | MPLS_BOS;
            match i {
                0 => w.set_mpls_lse0(m),
                1 => w.set_mpls_lse1(m),
                _ => w.set_mpls_lse2(m),
            };
            if l & MPLS_BOS != 0 {
                return i + 1;
            }
            if l != 0 {
                n += 1;
            }
        }
        n
    }
}
