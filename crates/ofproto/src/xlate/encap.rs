//! `encap(...)` and `decap(...)` (OVS's `xlate_generic_encap_action()` and
//! `xlate_generic_decap_action()`): headers added in front of the packet or taken off it,
//! changing its packet type. `encap(mpls)` makes whatever the packet is (an Ethernet frame
//! too) the payload of an L3 MPLS packet (datapath `add_mpls`), `encap(ethernet)` gives an L3
//! packet an Ethernet header (`push_eth`, at the next commit, with the addresses set by then);
//! `decap()` takes the Ethernet header off (`pop_eth`, at the next commit) or the outer MPLS
//! label (`pop_mpls`), after which the packet is parsed again in a new pass when that was the
//! last label.

use flow::odp::Action;

use super::trace::NodeKind;
use super::{Ctx, MPLS_BOS};
use crate::syntax::packet_type::{ETHERNET, MPLS, MPLS_MC};

/// Ethertype of an Ethernet frame carried whole (Transparent Ethernet Bridging).
const ETH_TYPE_TEB: u16 = 0x6558;

impl Ctx<'_> {
    /// `encap(ethernet)`, `encap(mpls)`, `encap(mpls_mc)`.
    pub(super) fn encap(&mut self, pt: u32) {
        // What is pending applies to the packet before the new header.
        self.commit();
        self.wc.dp.set_packet_type(u32::MAX);
        match pt {
            ETHERNET => self.encap_ethernet(),
            MPLS | MPLS_MC => self.encap_mpls(pt as u16),
            // Decoding and parsing take no other header.
            _ => {}
        }
    }

    /// An L3 packet gets an Ethernet header with zero addresses (until set); the commit
    /// emits the `push_eth`.
    fn encap_ethernet(&mut self) {
        let f = &mut self.flow.dp;
        let pt = f.packet_type();
        if pt >> 16 != 1 {
            self.unsupported_packet_type(
                "Dropping packet as encap(ethernet) is not supported for packet type ethernet.",
            );
            return;
        }
        f.set_packet_type(ETHERNET)
            .set_eth_src(Default::default())
            .set_eth_dst(Default::default())
            .set_eth_type(pt as u16);
    }

    /// A new label stack entry in front of the packet, as OVS's `rewrite_flow_encap_mpls()`
    /// and `flow_push_mpls()` make it: over labels already there (of an L3 MPLS packet), a
    /// copy of the top one without the bottom-of-stack bit; else label 0 (2 for IPv6), TC 0,
    /// TTL 64, bottom of stack (the packet type is MPLS already when OVS reads the IP header,
    /// so nothing of it is used).
    fn encap_mpls(&mut self, eth_type: u16) {
        let n = self.count_mpls_labels();
        if n >= 3 {
            self.too_many_labels(
                "dropping packet on which an encap MPLS action can't be performed as it would \
                 have more MPLS LSEs than the 3 supported.",
            );
            return;
        }
        // The labels of an Ethernet MPLS frame go into the payload: forgotten.
        if self.flow.dp.packet_type() == ETHERNET && self.flow.dp.eth_type() == 0x8847 {
            for k in [&mut self.flow.dp, &mut self.base] {
                k.set_mpls_lse0(0).set_mpls_lse1(0).set_mpls_lse2(0);
            }
            self.wc
                .dp
                .set_mpls_lse0(0)
                .set_mpls_lse1(0)
                .set_mpls_lse2(0);
        }
        let f = &mut self.flow.dp;
        let lse = if n > 0 {
            let w = &mut self.wc.dp;
            w.set_mpls_lse0(u32::MAX);
            if n > 1 {
                w.set_mpls_lse1(u32::MAX);
            }
            let (l0, l1) = (f.mpls_lse0(), f.mpls_lse1());
            f.set_mpls_lse2(l1).set_mpls_lse1(l0);
            l0 & !MPLS_BOS
        } else {
            let label = if f.eth_type() == 0x86dd { 2 } else { 0 };
            label << 12 | MPLS_BOS | 64
        };
        f.set_packet_type((1 << 16) | u32::from(eth_type))
            .set_mpls_lse0(lse)
            .set_eth_type(eth_type)
            .set_eth_src(Default::default())
            .set_eth_dst(Default::default());
        self.out.push(Action::AddMpls { lse, eth_type });
        self.base = self.flow.dp.clone();
    }

    /// `decap()` or `decap(packet_type(...))`. When the bottom label was popped, the packet
    /// must be parsed again before the actions after it: translation freezes.
    pub(super) fn decap(&mut self, new_pt: u32) {
        self.commit();
        let pt = self.flow.dp.packet_type();
        if pt == ETHERNET {
            self.decap_ethernet();
        } else if pt == MPLS || pt == MPLS_MC {
            self.decap_mpls(new_pt);
        } else {
            self.unsupported_packet_type(&format!(
                "Dropping packet as the decap() does not support packet type ({},{:#x})",
                pt >> 16,
                pt & 0xffff
            ));
        }
    }

    /// The Ethernet header goes (at the next commit); a tagged frame cannot lose it.
    fn decap_ethernet(&mut self) {
        let f = &mut self.flow.dp;
        if f.vlan_tci() & flow::key::VLAN_CFI != 0 {
            self.unsupported_packet_type(
                "Dropping packet, cannot decap Ethernet if VLAN is present.",
            );
            return;
        }
        let pt = (1 << 16) | u32::from(f.eth_type());
        f.set_packet_type(pt)
            .set_eth_src(Default::default())
            .set_eth_dst(Default::default());
        self.wc.dp.set_eth_type(0xffff);
    }

    /// The outer label goes: what follows is what `new_pt` says (its ethertype; an Ethernet
    /// frame, 0x6558 on the wire, for `(0,0)`). Popping the bottom label ends the pass.
    fn decap_mpls(&mut self, new_pt: u32) {
        let eth_type = match new_pt as u16 {
            0 => ETH_TYPE_TEB,
            t => t,
        };
        let f = &self.flow.dp;
        let under_third = f.mpls_lse2() & MPLS_BOS == 0;
        let n = self.count_mpls_labels();
        if n == 0 || (n == 3 && under_third) {
            // As OVS, which has set the new packet type before it finds it cannot pop.
            self.flow.dp.set_packet_type(new_pt);
            if n == 3 {
                self.too_many_labels(
                    "dropping packet on which an MPLS decap can't be performed as it has more \
                     MPLS LSEs than the 3 supported.",
                );
            }
            return;
        }
        self.pop_mpls(eth_type);
        self.flow.dp.set_packet_type(new_pt);
        self.base.set_packet_type(new_pt);
        // What pop_mpls says about L3 is for an Ethernet frame; here the next pass parses the
        // packet whole.
        self.was_mpls = false;
        if n == 1 {
            self.trigger_freeze();
        }
    }

    /// A label stack deeper than a flow holds: translation fails. The reason is traced only
    /// with a packet, as OVS reports it (`xin->packet`).
    fn too_many_labels(&mut self, why: &str) {
        if self.learn {
            self.trace_add(NodeKind::Error, why);
        }
        self.fail("Too many MPLS labels");
    }

    fn unsupported_packet_type(&mut self, why: &str) {
        self.trace_add(NodeKind::Action, why);
        self.fail("Unsupported packet type");
    }

    /// Translation fails: the packet is dropped, whatever the actions so far did.
    fn fail(&mut self, why: &'static str) {
        self.res.failed = Some(why);
        self.out.clear();
        self.exit = true;
    }
}
