//! NORMAL through bonds ([`crate::bond`]): a bond is one bundle, learned and flooded as one
//! port, its input admitted or refused by the bond, its output to the member the bond picks.

use super::*;
use crate::bond::Bond;
use flow::odp::HashAlg;

/// The `symmetric_l3l4+udp` fields (OVS's `NX_HASH_FIELDS_SYMMETRIC_L3L4_UDP`), which a
/// balance-tcp bond hashes.
const L3L4_UDP: u16 = 3;

impl Ctx<'_> {
    /// The bond port `port` is a member of, with the member's index.
    pub(super) fn bond_member(&self, port: u32) -> Option<(&Bond, usize)> {
        self.br()
            .bonds
            .iter()
            .find_map(|b| b.member_on(port).map(|i| (b, i)))
    }

    /// The recirculation id and hash basis of the bond of member `port` when its output
    /// recirculates (OVS's `bond_update_post_recirc_rules()`), and whether it does so with
    /// the datapath's `lb_output` action instead.
    pub(super) fn bond_recirc(&self, port: u32) -> Option<(u32, u32, bool)> {
        let (b, _) = self.bond_member(port)?;
        b.may_recirc()
            .then_some((b.recirc_id, b.config.basis, b.use_lb_output()))
    }

    /// Outputs through a recirculating bond: the datapath hashes the 5-tuple and the next
    /// pass, with the bond's recirculation id, outputs to the bucket's member; with `lb`, the
    /// datapath's `lb_output(ID)` does both in this pass, from the bond's buckets the
    /// datapath was given ([`crate::ofproto::Ofproto::lb_output_tables`]).
    pub(super) fn bond_recirc_output(&mut self, id: u32, basis: u32, lb: bool) {
        self.commit();
        if lb {
            self.out.push(Action::LbOutput(id));
            return;
        }
        self.out.push(Action::Hash {
            alg: HashAlg::L4,
            basis,
        });
        self.out.push(Action::Recirc(id));
    }

    /// The post-recirculation pass of bond `name` (its frozen state's user data after
    /// [`crate::bond::RECIRC_STATE_PREFIX`]): out of the member of the packet's `dp_hash`
    /// bucket, the megaflow matching the bucket's bits of `dp_hash`. Traced as OVS's rule
    /// for the bucket in its internal table 254.
    pub(super) fn bond_post_recirc(&mut self, name: &[u8]) {
        let mask = crate::bond::BUCKETS as u32 - 1;
        let m = self.wc.dp.dp_hash();
        self.wc.dp.set_dp_hash(m | mask);
        let dp_hash = self.flow.dp.dp_hash();
        let Some((bi, bond)) =
            (self.br().bonds.iter().enumerate()).find(|(_, b)| b.config.name.as_bytes() == name)
        else {
            return;
        };
        let id = bond.recirc_id;
        let Some(port) = bond.member_for_dp_hash(dp_hash).and_then(|m| m.ofport) else {
            return;
        };
        let bucket = (dp_hash & mask) as usize;
        self.res.bond_buckets.push((self.bridge, bi, bucket));
        let rule = self.trace_add(
            NodeKind::Table,
            format_args!(
                "254. recirc_id={id:#x},dp_hash={:#x}/{mask:#x}, priority 20",
                dp_hash & mask
            ),
        );
        self.under(rule, |c| {
            let out = c.trace_add(NodeKind::Action, format_args!("output:{port}"));
            c.under(out, |c| c.output_port(port, false));
        });
    }

    /// The port NORMAL learns and compares `port` as: its bond's one port, or itself.
    pub(super) fn bundle_port(&self, port: u32) -> u32 {
        self.bond_member(port)
            .and_then(|(b, _)| b.bundle_port())
            .unwrap_or(port)
    }

    /// The name NORMAL gives `port` in its trace: its bond's, or its own.
    pub(super) fn bundle_label(&self, port: u32) -> String {
        match self.bond_member(port) {
            Some((b, _)) => b.config.name.clone(),
            None => port_label(self.br(), port),
        }
    }

    /// Whether the bond `in_port` belongs to (if any) admits the frame (OVS's
    /// `is_admissible()`); notes why not.
    pub(super) fn bond_admits(&mut self, in_port: u32, vlan: u16) -> bool {
        let dst = self.flow.dp.eth_dst();
        let Some(verdict) = self.bond_member(in_port).map(|(b, i)| b.admits(i, dst)) else {
            return true;
        };
        match verdict {
            Some(true) => true,
            Some(false) => {
                self.note("bonding refused admissibility, dropping");
                false
            }
            None => {
                let src = self.flow.dp.eth_src();
                let learned = self
                    .br()
                    .mac
                    .lock()
                    .ok()
                    .and_then(|m| m.lookup(src, vlan, self.now));
                let moved = learned.is_some_and(|p| p != self.bundle_port(in_port));
                if moved && !self.is_gratuitous_arp() {
                    self.note("SLB bond thinks this packet looped back, dropping");
                    return false;
                }
                true
            }
        }
    }

    /// OVS's `is_gratuitous_arp()`: a broadcast ARP reply, or request for its own sender.
    fn is_gratuitous_arp(&mut self) -> bool {
        let f = &self.flow.dp;
        if f.eth_type() != 0x0806 || f.eth_dst() != EthAddr::BROADCAST {
            return false;
        }
        let w = self.wc.dp.nw_proto();
        self.wc.dp.set_nw_proto(w | 0xff);
        let f = &self.flow.dp;
        if f.nw_proto() == 2 {
            return true;
        }
        let (src, dst) = (f.nw_src(), f.nw_dst());
        self.wc
            .dp
            .set_nw_src(std::net::Ipv4Addr::BROADCAST)
            .set_nw_dst(std::net::Ipv4Addr::BROADCAST);
        f.nw_proto() == 1 && src == dst
    }

    /// The OpenFlow port NORMAL outputs to for `port` with output VID `vid`: the member its
    /// bond picks (none when no member is enabled), or `port` itself.
    /// A balance-tcp bond hashes the flow's addresses, protocol and ports (the megaflow then
    /// matches them), unless it recirculates (`unmask` false), when the pick only tells
    /// whether any member is usable.
    pub(super) fn bond_output_port(&mut self, port: u32, vid: u16, unmask: bool) -> Option<u32> {
        let mut hashed = false;
        let mut slb_bucket = None;
        let out = match self.bond_member(port) {
            Some((b, _)) => {
                let flow = &self.flow;
                let src = flow.dp.eth_src();
                if b.output_mode() == Some(crate::bond::BondMode::BalanceSlb) {
                    let h = crate::bond::hash_mac(src, vid, b.config.basis);
                    slb_bucket = Some(h as usize % crate::bond::BUCKETS);
                }
                b.output_member(src, vid, |basis| {
                    hashed = true;
                    super::flow_hash::flow_hash_fields(flow, L3L4_UDP, basis as u16)
                })
                .and_then(|m| m.ofport)
            }
            None => Some(port),
        };
        if let (Some(h), Some(_)) = (slb_bucket, out) {
            let bond = self
                .br()
                .bonds
                .iter()
                .position(|b| b.member_on(port).is_some());
            if let Some(bi) = bond {
                self.res.bond_buckets.push((self.bridge, bi, h));
            }
        }
        if hashed && unmask {
            super::flow_hash::mask_hash_fields(&self.flow, &mut self.wc, L3L4_UDP);
        }
        out
    }
}
