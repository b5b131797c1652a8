//! Committing the flow to the packet (OVS's `commit_odp_actions()`): the `set(...)`,
//! `push_vlan`/`pop_vlan`, `push_eth` and friends that make the packet as the datapath has it
//! equal to the flow translation has changed, emitted before any action that sends or looks
//! at the packet.

use super::*;

impl Ctx<'_> {
    /// Emits the datapath actions that make the packet (`base`) equal to the flow.
    pub(super) fn commit(&mut self) {
        // An L3 packet that OpenFlow handles as Ethernet (from a legacy_l3 tunnel) gets its
        // Ethernet header first.
        if self.base.packet_type() != 0 && self.flow.dp.packet_type() == 0 {
            let (src, dst) = (self.flow.dp.eth_src(), self.flow.dp.eth_dst());
            self.out.push(Action::PushEth { src, dst });
            self.base
                .set_packet_type(0)
                .set_eth_src(src)
                .set_eth_dst(dst)
                .set_eth_type(self.flow.dp.eth_type());
        }
        // An Ethernet frame that translation made an L3 packet (`decap()`) loses its header.
        if self.base.packet_type() == 0 && self.flow.dp.packet_type() >> 16 == 1 {
            self.out.push(Action::PopEth);
            self.base
                .set_packet_type(self.flow.dp.packet_type())
                .set_eth_src(EthAddr::default())
                .set_eth_dst(EthAddr::default());
        }
        // Addresses set after a push_eth that nothing has used yet go into the push (as OVS
        // commits the push with the final addresses).
        let (bs, bd) = (self.base.eth_src(), self.base.eth_dst());
        let (fs, fd) = (self.flow.dp.eth_src(), self.flow.dp.eth_dst());
        if (bs, bd) != (fs, fd)
            && let Some(i) = self
                .out
                .iter()
                .rposition(|a| matches!(a, Action::PushEth { .. }))
            && self.out[i + 1..].iter().all(|a| {
                matches!(
                    a,
                    Action::PopMpls { .. }
                        | Action::PushMpls { .. }
                        | Action::PopVlan
                        | Action::PushVlan { .. }
                )
            })
        {
            self.out[i] = Action::PushEth { src: fs, dst: fd };
            self.base.set_eth_src(fs).set_eth_dst(fd);
        }
        let (b, f) = (&self.base, &self.flow.dp);
        let mut acts = Vec::new();
        // Ethernet addresses.
        acts.extend(diff_set(
            b,
            f,
            &self.wc.dp,
            Attr::Eth,
            &["eth_src", "eth_dst"],
        ));
        // VLAN: the headers under those that differ stay; those that differ are popped
        // (their whole tag then matters) and the flow's pushed, innermost first (OVS's
        // commit_vlan_action()).
        let (bh, fh) = (vlan_hdrs(b), vlan_hdrs(f));
        let (mut bn, mut fh_n) = (vlan_count(&bh), vlan_count(&fh));
        while bn > 0 && fh_n > 0 && bh[bn - 1] == fh[fh_n - 1] {
            bn -= 1;
            fh_n -= 1;
        }
        for i in (0..bn).rev() {
            acts.push(Action::PopVlan);
            if i == 0 {
                self.wc.dp.set_vlan_tci(0xffff);
            } else {
                self.wc.dp.set_vlan2_tci(0xffff);
            }
        }
        for &(tpid, tci) in fh[..fh_n].iter().rev() {
            acts.push(Action::PushVlan { tpid, tci });
        }
        // Labels the packet has and the flow does not (it came back from a patch port's peer
        // bridge, which pushed them): popped, the last one to the flow's ethertype (OVS's
        // commit_mpls_action()).
        if is_mpls(b.eth_type()) && !is_mpls(f.eth_type()) {
            let lse = [b.mpls_lse0(), b.mpls_lse1(), b.mpls_lse2()];
            let n = lse
                .iter()
                .position(|l| l & MPLS_BOS != 0)
                .map_or(3, |i| i + 1);
            for i in 1..=n {
                let eth_type = if i < n { 0x8847 } else { f.eth_type() };
                acts.push(Action::PopMpls { eth_type });
            }
        }
        // MPLS label stack entry: folded into a push just emitted, else a set of the fields
        // that changed.
        if is_mpls(f.eth_type())
            && b.mpls_lse0() != f.mpls_lse0()
            && let Some(Action::PushMpls { lse, .. } | Action::AddMpls { lse, .. }) =
                self.out.last_mut()
        {
            *lse = f.mpls_lse0();
        } else if is_mpls(f.eth_type()) && b.mpls_lse0() != f.mpls_lse0() {
            let mut k = FlowKey::new();
            let mut m = Mask::new();
            k.set_mpls_lse0(f.mpls_lse0());
            let d = b.mpls_lse0() ^ f.mpls_lse0();
            let fields = [0xffff_f000u32, 0xe00, 0x100, 0xff];
            m.set_mpls_lse0(
                fields
                    .iter()
                    .filter(|&&fm| d & fm != 0)
                    .fold(0, |a, &fm| a | fm),
            );
            let mut a = set_action(Attr::Mpls, k, m);
            if let Action::Set(d) = &mut a {
                d.attrs.mpls_lses = 1;
            }
            acts.push(a);
        }
        // IPv4 / IPv6: only with an L3 header (OVS checks nw_proto, consulting it).
        let (l3_attr, l3_fields): (Attr, &[&str]) = match f.eth_type() {
            0x0800 => (Attr::Ipv4, &["nw_src", "nw_dst", "nw_tos", "nw_ttl"]),
            0x86dd => (
                Attr::Ipv6,
                &["ipv6_src", "ipv6_dst", "ipv6_label", "nw_tos", "nw_ttl"],
            ),
            _ => (Attr::Ipv4, &[]),
        };
        // Committing reads no protocol: the actions that write IP header fields consult it
        // (`Ctx::set_field`).
        if f.nw_proto() != 0 {
            acts.extend(diff_set(b, f, &self.wc.dp, l3_attr, l3_fields));
            // A neighbour discovery message's target and link-layer addresses (OVS's
            // commit_set_nd_action()), and an ARP packet's fields, the opcode in nw_proto
            // (commit_set_arp_action()).
            if f.eth_type() == 0x86dd && b.nw_proto() == 58 {
                acts.extend(diff_set(
                    b,
                    f,
                    &self.wc.dp,
                    Attr::Nd,
                    &["nd_target", "arp_sha", "arp_tha"],
                ));
            } else if f.eth_type() == 0x0806 {
                acts.extend(diff_set(
                    b,
                    f,
                    &self.wc.dp,
                    Attr::Arp,
                    &["nw_src", "nw_dst", "nw_proto", "arp_sha", "arp_tha"],
                ));
            }
        }
        // Transport ports.
        let l4_attr = match (f.eth_type(), f.nw_proto()) {
            (0x0800 | 0x86dd, 6) => Some(Attr::Tcp),
            (0x0800 | 0x86dd, 17) => Some(Attr::Udp),
            (0x0800 | 0x86dd, 132) => Some(Attr::Sctp),
            _ => None,
        };
        acts.extend(
            l4_attr.and_then(|attr| diff_set(b, f, &self.wc.dp, attr, &["tp_src", "tp_dst"])),
        );
        if let Some(a) = icmp_set(b, f) {
            // The whole attribute is committed, so both its fields are matched.
            self.wc.dp.set_tp_src(0xffff).set_tp_dst(0xffff);
            acts.push(a);
        }
        // Priority (QoS queue), then packet mark.
        let mark = diff_set(b, f, &self.wc.dp, Attr::SkbMark, &["pkt_mark"]);
        acts.extend(self.commit_priority());
        acts.extend(mark);
        self.out.extend(acts);
        self.base = self.flow.dp.clone();
        // The in_port of `base` is the datapath's; keep comparing packet fields only.
    }
}

/// The `set(attr(...))` that turns `base` into `flow` on the named key fields (OVS's
/// `commit()` with masked sets): each field that differs is written under what translation
/// un-wildcarded of it (`wc`), the bits it read or wrote, as the megaflow matches the others
/// and must not change them; a field with nothing un-wildcarded is written whole, where the
/// TOS byte is two fields, DSCP and ECN, and the IPv6 label is its 20 bits. The value written
/// is the flow's under the mask. `None` when nothing differs.
pub(super) fn diff_set(
    base: &FlowKey,
    flow: &FlowKey,
    wc: &Mask,
    attr: Attr,
    fields: &[&str],
) -> Option<Action> {
    let mut k = FlowKey::new();
    let mut m = Mask::new();
    for name in fields {
        let d = flow::key::FIELDS
            .iter()
            .find(|d| d.name == *name)
            .expect("a field of the key layout");
        let (mut old, mut new, mut read) = ([0u8; 16], [0u8; 16], [0u8; 16]);
        base.bytes_at(d.offset, &mut old[..d.len]);
        flow.bytes_at(d.offset, &mut new[..d.len]);
        if old == new {
            continue;
        }
        let mut ones = [0xffu8; 16];
        match *name {
            "nw_tos" => {
                let x = old[0] ^ new[0];
                ones[0] = (if x & 0xfc != 0 { 0xfc } else { 0 }) | (if x & 3 != 0 { 3 } else { 0 });
            }
            "ipv6_label" => ones[..4].copy_from_slice(&0xfffffu32.to_be_bytes()),
            _ => {}
        }
        wc.bytes_at(d.offset, &mut read[..d.len]);
        if read[..d.len].iter().any(|&b| b != 0) {
            for (o, r) in ones.iter_mut().zip(read) {
                *o = if *name == "nw_tos" { r } else { *o & r };
            }
        }
        for (v, o) in new.iter_mut().zip(ones) {
            *v &= o;
        }
        k.set_bytes_at(d.offset, &new[..d.len]);
        m.set_bytes_at(d.offset, &ones[..d.len]);
    }
    (!m.is_zero()).then(|| set_action(attr, k, m))
}

/// The `set(icmp(type,code))` or `set(icmpv6(...))` that gives the packet the flow's ICMP type
/// and code (kept in the port fields), both written whenever either differs (OVS's
/// commit_set_icmp_action() commits the attribute whole).
fn icmp_set(base: &FlowKey, flow: &FlowKey) -> Option<Action> {
    let attr = match (flow.eth_type(), flow.nw_proto()) {
        (0x0800, 1) => Attr::Icmp,
        (0x86dd, 58) => Attr::Icmpv6,
        _ => return None,
    };
    let (t, c) = (flow.tp_src(), flow.tp_dst());
    if (base.tp_src(), base.tp_dst()) == (t, c) {
        return None;
    }
    let mut k = FlowKey::new();
    let mut m = Mask::new();
    k.set_tp_src(t).set_tp_dst(c);
    m.set_tp_src(0xff).set_tp_dst(0xff);
    Some(set_action(attr, k, m))
}

pub(super) fn set_action(attr: Attr, key: FlowKey, mask: Mask) -> Action {
    let mut attrs = KeyAttrs::default();
    attrs.push(attr, 0);
    Action::Set(Box::new(DpKey { key, mask, attrs }))
}

/// The VLAN headers of `k` as (TPID, TCI), outermost first; a TPID of 0 is 802.1Q's (a key
/// built from a match has none).
fn vlan_hdrs(k: &FlowKey) -> [(u16, u16); 2] {
    let tpid = |t: u16| if t == 0 { 0x8100 } else { t };
    [
        (tpid(k.vlan_tpid()), k.vlan_tci()),
        (tpid(k.vlan2_tpid()), k.vlan2_tci()),
    ]
}

/// How many of `hdrs` are present (OVS's flow_count_vlan_headers()).
fn vlan_count(hdrs: &[(u16, u16); 2]) -> usize {
    hdrs.iter()
        .take_while(|(_, tci)| tci & flow::key::VLAN_CFI != 0)
        .count()
}
