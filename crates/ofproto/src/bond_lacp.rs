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
        self.config.mode.is_balanced()
            && !(self.config.lacp_fallback_ab && self.lacp_status() == LacpStatus::Configured)
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
        let link: Vec<bool> = self
            .members
            .iter()
            .zip(carrier)
            .map(|(m, &c)| {
                c && lacp
                    .member_index(&m.name)
                    .is_some_and(|l| lacp.may_enable(l))
            })
            .collect();
        for t in lacp.run(now) {
            let name = &lacp.members[t.member].name;
            if let Some(m) = self.members.iter().find(|m| &m.name == name)
                && let Some(port) = m.ofport
            {
                let frame = pdu::compose(m.mac, &t.actor, &t.partner);
                self.lacp_tx.push((port, frame));
            }
        }
        link
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
        let mut at = 12;
        while frame.len() >= at + 2
            && matches!([frame[at], frame[at + 1]], [0x81, 0] | [0x88, 0xa8])
        {
            at += 4;
        }
        let pdu = frame.get(at + 2..).unwrap_or_default();
        if lacp.receive(l, pdu, now) {
            self.members[i].may_enable = true;
        }
        true
    }

    /// `lacp_current` of member `name`: `None` without LACP.
    pub fn lacp_current(&self, name: &str) -> Option<bool> {
        let l = self.lacp.as_ref()?;
        Some(l.member_index(name).is_some_and(|i| l.is_current(i)))
    }
}
