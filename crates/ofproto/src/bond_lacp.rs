//! What LACP changes in a bond (OVS's `bundle_run()` in `ofproto-dpif.c` with `bond_run()`
//! and `choose_output_member()` in `bond.c`): a member may be enabled only while its carrier
//! is up and LACP lets it; the LACP status (off, configured, negotiated) decides whether the
//! bond forwards at all, and whether a balanced bond falls back to active-backup.

use std::time::Instant;

use crate::bond::{Bond, BondMode};
use crate::lacp::{MemberSettings, Settings, pdu};

/// A bond's LACP configuration: the Port's settings and each member's (in the bond's member
/// order; a `port_id` of 0 stands for the member's OpenFlow port).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LacpConfig {
    pub settings: Settings,
    pub members: Vec<MemberSettings>,
}

/// A bond's LACP status (`bond/show`'s `lacp_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LacpStatus {
    Off,
    Configured,
    Negotiated,
}

impl LacpStatus {
    pub fn name(self) -> &'static str {
        match self {
            LacpStatus::Off => "off",
            LacpStatus::Configured => "configured",
            LacpStatus::Negotiated => "negotiated",
        }
    }
}

impl Bond {
    /// The LACP status.
    pub fn lacp_status(&self) -> LacpStatus {
        match &self.lacp {
            None => LacpStatus::Off,
            Some(l) if l.negotiated => LacpStatus::Negotiated,
            Some(_) => LacpStatus::Configured,
        }
    }

    /// A balanced bond whose LACP did not negotiate, running as active-backup
    /// (`lacp-fallback-ab`).
    pub fn falls_back_to_ab(&self) -> bool {
        self.config.lacp_fallback_ab
            && self.config.mode.is_balanced()
            && self.lacp_status() == LacpStatus::Configured
    }

    /// Whether `bond/show` prints hash buckets and the rebalance countdown (OVS's
    /// `bond_is_balanced()`).
    pub fn is_balanced(&self) -> bool {
        self.config.rebalance_interval != 0
            && self.config.mode.is_balanced()
            && !(self.config.lacp_fallback_ab && self.lacp_status() == LacpStatus::Configured)
    }

    /// Whether output recirculates (OVS's `bond_may_recirc()`): balance-tcp with its id, not
    /// falling back to active-backup.
    pub fn may_recirc(&self) -> bool {
        self.config.mode == BondMode::BalanceTcp && self.recirc_id != 0 && !self.falls_back_to_ab()
    }

    /// Whether output goes through the datapath's `lb_output` action (OVS's
    /// `bond_use_lb_output_action()`): the bond may recirculate and is configured so.
    pub fn use_lb_output(&self) -> bool {
        self.may_recirc() && self.config.lb_output
    }

    /// The member of the hash bucket of `dp_hash` (the post-recirculation pass), or none.
    pub fn member_for_dp_hash(&self, dp_hash: u32) -> Option<&crate::bond::BondMember> {
        let i = self.buckets[(dp_hash as usize) % crate::bond::BUCKETS].or(self.active)?;
        self.members.get(i).filter(|m| m.enabled)
    }

    /// The mode output follows, or none when the bond drops everything.
    pub(crate) fn output_mode(&self) -> Option<BondMode> {
        match (self.lacp_status(), self.config.mode) {
            (LacpStatus::Configured, _) if !self.config.lacp_fallback_ab => None,
            (LacpStatus::Configured, _) => Some(BondMode::ActiveBackup),
            (LacpStatus::Off, BondMode::BalanceTcp) => None,
            (_, m) => Some(m),
        }
    }

    /// Whether the peer is told of moves by learning packets: without LACP in active-backup
    /// or balance-slb, or when falling back to active-backup.
    pub fn may_send_learning_packets(&self) -> bool {
        let st = self.lacp_status();
        ((st == LacpStatus::Off && self.config.mode != BondMode::BalanceTcp)
            || (self.config.lacp_fallback_ab && st == LacpStatus::Configured))
            && self.active.is_some()
    }

    /// Carries the LACP state of `old` (the same bond before a change of settings) over.
    pub(crate) fn keep_lacp_state(&mut self, old: &Bond) {
        let (Some(new), Some(o)) = (self.lacp.as_mut(), old.lacp.as_ref()) else {
            return;
        };
        let settings = new.settings.clone();
        *new = o.clone();
        new.configure(settings);
        let names: Vec<&str> = self.members.iter().map(|m| m.name.as_str()).collect();
        new.retain(&names);
    }

    /// Runs LACP with each member's `carrier`: carrier changes, members' settings, timers,
    /// the LACPDUs due (to `lacp_tx`). Each member's link as the bond takes it: its carrier,
    /// and LACP's leave when LACP runs.
    pub(crate) fn run_lacp(&mut self, now: Instant, carrier: &[bool]) -> Vec<bool> {
        let Some(lacp) = self.lacp.as_mut() else {
            return carrier.to_vec();
        };
        let cfg = self.config.lacp.as_ref();
        for (i, m) in self.members.iter_mut().enumerate() {
            let Some(ofport) = m.ofport else { continue };
            let mut s = cfg
                .and_then(|c| c.members.get(i))
                .copied()
                .unwrap_or_default();
            if s.port_id == 0 {
                s.port_id = u16::try_from(ofport).unwrap_or(u16::MAX);
            }
            lacp.register(&m.name, s, now);
            let l = lacp.member_index(&m.name).unwrap_or_default();
            if m.carrier.is_some_and(|c| c != carrier[i]) {
                lacp.carrier_changed(l, carrier[i], now);
            }
            m.carrier = Some(carrier[i]);
        }
        // Asked only of a member whose carrier is up, LACP takes that carrier as up (OVS
        // asks before it runs LACP, which then may send on it).
        let link = |lacp: &mut crate::lacp::Lacp, members: &[crate::bond::BondMember]| {
            let may = |(m, &c): (&crate::bond::BondMember, &bool)| {
                c && lacp
                    .member_index(&m.name)
                    .is_some_and(|l| lacp.may_enable(l))
            };
            members.iter().zip(carrier).map(may).collect::<Vec<bool>>()
        };
        link(lacp, &self.members);
        for t in lacp.run(now) {
            let name = &lacp.members[t.member].name;
            if let Some(m) = self.members.iter().find(|m| &m.name == name)
                && let Some(port) = m.ofport
            {
                let frame = pdu::compose(m.mac, &t.actor, &t.partner);
                self.lacp_tx.push((port, frame));
            }
        }
        link(lacp, &self.members)
    }

    /// A slow-protocols frame received on member `i`: to LACP (its PDU after the Ethernet
    /// header and any VLAN tags). Whether the bond has LACP.
    pub fn lacp_receive(&mut self, i: usize, frame: &[u8], now: Instant) -> bool {
        let Some(lacp) = self.lacp.as_mut() else {
            return false;
        };
        let Some(l) = lacp.member_index(&self.members[i].name) else {
            return false;
        };
        if lacp.receive(l, pdu::after_ethernet(frame), now) {
            self.members[i].may_enable = true;
        }
        true
    }

    /// `lacp_current` of member `name`: `None` without LACP.
    pub fn lacp_current(&self, name: &str) -> Option<bool> {
        let l = self.lacp.as_ref()?;
        l.member_index(name).map(|i| l.is_current(i))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use flow::EthAddr;

    use super::*;
    use crate::bond::{BUCKETS, BondConfig};
    use crate::lacp::pdu::{Info, state};

    fn mac(n: u8) -> EthAddr {
        EthAddr([2, 0, 0, 0, 0, n])
    }

    fn tcp_bond(fallback: bool) -> Bond {
        let mut c = BondConfig::new(
            "bond0",
            BondMode::BalanceTcp,
            &[("p1", mac(1)), ("p2", mac(2))],
        );
        c.lacp_fallback_ab = fallback;
        c.lacp = Some(LacpConfig {
            settings: Settings {
                active: true,
                sys_id: mac(9),
                sys_priority: 65534,
                fast: true,
                fallback_ab: fallback,
            },
            members: vec![MemberSettings::default(); 2],
        });
        let mut b = Bond::new(c, Instant::now());
        b.members[0].ofport = Some(1);
        b.members[1].ofport = Some(2);
        b
    }

    /// What a partner in sync sends on member port `port`.
    fn partner_frame(port: u16, us: &Info) -> Vec<u8> {
        let actor = Info {
            sys_priority: 100,
            sys_id: mac(7),
            key: 3,
            port_priority: 1,
            port_id: port,
            state: state::ACTIVITY | state::AGGREGATION | state::SYNC | state::COLLECTING,
        };
        pdu::compose(mac(7), &actor, us)
    }

    #[test]
    fn without_negotiation_a_balance_tcp_bond_drops_then_forwards_once_negotiated() {
        let mut b = tcp_bond(false);
        let now = Instant::now();
        b.run(now, |_| true);
        assert_eq!(b.lacp_status(), LacpStatus::Negotiated);
        // Expired members are attached but their partner is not in sync: nothing usable.
        assert!(b.output_member(mac(5), 0, |_| 0).is_none());
        assert_eq!(b.lacp_tx.len(), 2, "an active bond speaks first");
        let later = now + Duration::from_secs(4);
        b.run(later, |_| true);
        assert_eq!(b.lacp_status(), LacpStatus::Configured);
        assert_eq!(b.admits(0, mac(5)), Some(false));
        assert!(b.output_member(mac(5), 0, |_| 0).is_none());
        assert!(!b.may_send_learning_packets());
        for i in 0..2 {
            let us = b.lacp.as_ref().unwrap().actor(i);
            let f = partner_frame(i as u16 + 1, &us);
            assert!(b.lacp_receive(i, &f, later));
        }
        b.run(later, |_| true);
        b.run(later, |_| true);
        assert_eq!(b.lacp_status(), LacpStatus::Negotiated);
        assert!(b.members.iter().all(|m| m.enabled));
        assert_eq!(b.admits(1, mac(5)), Some(true));
        assert_eq!(b.lacp_current("p1"), Some(true));
        assert_eq!(b.lacp_current("p9"), None);
        // Buckets spread over both members, picked by the 5-tuple hash.
        let names: std::collections::BTreeSet<&str> = (0..8u32)
            .filter_map(|h| b.output_member(mac(5), 0, |_| h))
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(names.len(), 2);
        // p2's carrier goes: its buckets go to p1, p1's stay.
        let of = |b: &Bond, h: u32| b.output_member(mac(5), 0, |_| h).map(|m| m.name.clone());
        let p1_before: Vec<u32> = (0..256)
            .filter(|&h| of(&b, h).as_deref() == Some("p1"))
            .collect();
        b.run(later, |m| m.name == "p1");
        assert!((0..256).all(|h| of(&b, h).as_deref() == Some("p1")));
        assert!(p1_before.len() >= 100);
    }

    #[test]
    fn a_member_enabled_again_gets_no_buckets_back_until_a_rebalance() {
        let mut b = tcp_bond(false);
        let now = Instant::now() + Duration::from_secs(4);
        b.run(Instant::now(), |_| true);
        b.run(now, |_| true);
        for i in 0..2 {
            let us = b.lacp.as_ref().unwrap().actor(i);
            b.lacp_receive(i, &partner_frame(i as u16 + 1, &us), now);
        }
        b.run(now, |_| true);
        let on = |b: &Bond, name: &str| {
            (0..BUCKETS)
                .filter(|&h| b.buckets[h].is_some_and(|i| b.members[i].name == name))
                .count()
        };
        assert!(on(&b, "p2") > 0);
        // p2 goes: its buckets go to p1. It comes back: as OVS's bond_run(), the buckets stay
        // where they are (only a rebalancing moves them).
        b.run(now, |m| m.name == "p1");
        assert_eq!(on(&b, "p1"), BUCKETS);
        b.run(now, |_| true);
        let us = b.lacp.as_ref().unwrap().actor(1);
        b.lacp_receive(1, &partner_frame(2, &us), now);
        b.run(now, |_| true);
        assert!(b.members.iter().all(|m| m.enabled));
        assert_eq!(on(&b, "p1"), BUCKETS);
        // Another updelay keeps them; a new hash basis spreads them afresh (OVS's
        // bond_reconfigure()).
        let mut c = b.config.clone();
        c.updelay = 10;
        let mut b2 = Bond::new(c.clone(), now);
        b2.keep_state(&b);
        b2.run(now, |_| true);
        assert_eq!(on(&b2, "p1"), BUCKETS);
        c.basis = 1;
        let mut b3 = Bond::new(c, now);
        b3.keep_state(&b2);
        b3.run(now, |_| true);
        assert_eq!(on(&b3, "p1"), BUCKETS / 2);
    }

    #[test]
    fn fallback_ab_runs_as_active_backup_without_a_partner() {
        let mut b = tcp_bond(true);
        let t = Instant::now() + Duration::from_secs(4);
        b.run(Instant::now(), |_| true);
        b.run(t, |_| true);
        assert_eq!(b.lacp_status(), LacpStatus::Configured);
        assert!(b.falls_back_to_ab() && !b.is_balanced());
        let active = b.active.unwrap();
        assert_eq!(
            b.output_member(mac(5), 0, |_| 1).map(|m| m.name.clone()),
            Some(b.members[active].name.clone())
        );
        assert_eq!(b.admits(active, mac(5)), Some(true));
        assert_eq!(b.admits(1 - active, mac(5)), Some(false));
        assert!(b.may_send_learning_packets());
    }

    #[test]
    fn lacp_off_balance_tcp_neither_sends_nor_admits() {
        let mut b = tcp_bond(true);
        b.config.lacp = None;
        b.lacp = None;
        b.run(Instant::now(), |_| true);
        assert_eq!(b.lacp_status(), LacpStatus::Off);
        assert_eq!(b.admits(0, mac(5)), Some(false));
        assert!(b.output_member(mac(5), 0, |_| 0).is_none());
    }
}
