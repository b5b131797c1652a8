//! LACP on a Port of one Interface (OVS's `port_configure_lacp()` in `vswitchd/bridge.c` with
//! `bundle_set()` in `ofproto-dpif.c`, which give such a port LACP and no bond): the interface
//! speaks LACP as a bond member would, shows in `lacp/show` and `lacp_current`, and its
//! OpenFlow port is live only while LACP lets it carry traffic (OVS's `may_enable_port()`).
//! NORMAL forwards through it whatever LACP says, as OVS's, which checks LACP only for bonds.

use std::time::Instant;

use flow::EthAddr;

use crate::bond_lacp::LacpConfig;
use crate::lacp::{Lacp, pdu};

/// A single-interface Port's LACP configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LacpPortConfig {
    /// The Port's name (LACP's name in `lacp/show`).
    pub name: String,
    /// Its interface's name.
    pub member: String,
    /// Its interface's Ethernet address, the LACPDUs' source.
    pub mac: EthAddr,
    /// The settings, with the one member's (a `port_id` of 0: its OpenFlow port).
    pub lacp: LacpConfig,
}

/// A single-interface Port running LACP.
#[derive(Clone, Debug)]
pub struct LacpPort {
    pub config: LacpPortConfig,
    pub lacp: Lacp,
    /// The interface's OpenFlow port, once it has one.
    pub ofport: Option<u32>,
    /// The carrier seen at the last run.
    pub carrier: Option<bool>,
    /// Whether LACP lets the interface carry traffic (with its carrier up).
    pub may_enable: bool,
    /// LACPDUs due: (OpenFlow port, frame).
    pub tx: Vec<(u32, Vec<u8>)>,
}

impl LacpPort {
    pub fn new(config: LacpPortConfig) -> LacpPort {
        LacpPort {
            lacp: Lacp::new(&config.name, config.lacp.settings.clone()),
            config,
            ofport: None,
            carrier: None,
            may_enable: false,
            tx: Vec::new(),
        }
    }

    /// Carries the LACP state of `old` (the same Port before a change of settings) over.
    pub fn keep_state(&mut self, old: &LacpPort) {
        self.lacp = old.lacp.clone();
        self.lacp.configure(self.config.lacp.settings.clone());
        self.lacp.retain(&[self.config.member.as_str()]);
        self.ofport = old.ofport;
        self.carrier = old.carrier;
        self.may_enable = old.may_enable;
    }

    /// Runs LACP with the interface's OpenFlow port `ofport` and `carrier` (OVS's `port_run()`
    /// then `bundle_run()`): carrier changes, the member's settings, timers, the LACPDUs due.
    /// Whether the port may carry traffic now.
    pub fn run(&mut self, now: Instant, ofport: Option<u32>, carrier: bool) -> bool {
        self.ofport = ofport;
        let Some(port) = ofport else {
            self.may_enable = false;
            return false;
        };
        let mut s = self
            .config
            .lacp
            .members
            .first()
            .copied()
            .unwrap_or_default();
        if s.port_id == 0 {
            s.port_id = u16::try_from(port).unwrap_or(u16::MAX);
        }
        self.lacp.register(&self.config.member, s, now);
        let l = self.lacp.member_index(&self.config.member).unwrap_or(0);
        if self.carrier.is_some_and(|c| c != carrier) {
            self.lacp.carrier_changed(l, carrier, now);
        }
        self.carrier = Some(carrier);
        // Asked only while the carrier is up, LACP takes it as up (OVS asks before it runs
        // LACP, which then may send); asked again after, for what this run decided.
        let may = |lacp: &mut Lacp| carrier && lacp.may_enable(l);
        may(&mut self.lacp);
        for t in self.lacp.run(now) {
            self.tx
                .push((port, pdu::compose(self.config.mac, &t.actor, &t.partner)));
        }
        self.may_enable = may(&mut self.lacp);
        self.may_enable
    }

    /// A slow-protocols frame the interface received: to LACP. Whether the port may now
    /// carry traffic.
    pub fn receive(&mut self, frame: &[u8], now: Instant) -> bool {
        let Some(l) = self.lacp.member_index(&self.config.member) else {
            return false;
        };
        self.lacp.receive(l, pdu::after_ethernet(frame), now)
    }

    /// `lacp_current` of interface `name`: `None` when it is not this port's.
    pub fn lacp_current(&self, name: &str) -> Option<bool> {
        let l = self.lacp.member_index(name)?;
        Some(self.lacp.is_current(l))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::lacp::pdu::{Info, state};
    use crate::lacp::{MemberSettings, Settings};

    fn mac(n: u8) -> EthAddr {
        EthAddr([2, 0, 0, 0, 0, n])
    }

    fn port(active: bool) -> LacpPort {
        LacpPort::new(LacpPortConfig {
            name: "p1".into(),
            member: "p1".into(),
            mac: mac(1),
            lacp: LacpConfig {
                settings: Settings {
                    active,
                    sys_id: mac(9),
                    sys_priority: u16::MAX,
                    fast: true,
                    fallback_ab: false,
                },
                members: vec![MemberSettings::default()],
            },
        })
    }

    fn partner_frame(us: &Info) -> Vec<u8> {
        let actor = Info {
            sys_priority: 100,
            sys_id: mac(7),
            key: 3,
            port_priority: 1,
            port_id: 1,
            state: state::ACTIVITY | state::AGGREGATION | state::SYNC | state::COLLECTING,
        };
        pdu::compose(mac(7), &actor, us)
    }

    #[test]
    fn an_active_port_speaks_first_and_may_carry_traffic_once_its_partner_is_in_sync() {
        let mut p = port(true);
        let now = Instant::now();
        assert!(!p.run(now, Some(5), true));
        assert_eq!(p.tx.len(), 1, "an active port speaks first");
        assert_eq!(p.tx[0].0, 5);
        assert_eq!(p.lacp.members[0].settings.port_id, 5);
        assert_eq!(p.lacp_current("p1"), Some(true), "expired at first");
        let later = now + Duration::from_secs(7);
        p.run(later, Some(5), true);
        assert_eq!(p.lacp_current("p1"), Some(false), "defaulted");
        let us = p.lacp.actor(0);
        p.receive(&partner_frame(&us), later);
        assert_eq!(p.lacp.members[0].stats.rx, 1);
        assert!(p.run(later, Some(5), true));
        assert!(p.lacp.negotiated);
        assert!(!p.run(later, Some(5), false), "no carrier, no traffic");
        assert_eq!(p.lacp.members[0].stats.carrier_changed, 1);
        assert_eq!(p.lacp_current("p2"), None);
    }

    #[test]
    fn a_passive_port_waits_for_its_partner_and_a_port_without_number_stays_down() {
        let mut p = port(false);
        assert!(!p.run(Instant::now(), None, true));
        assert!(p.tx.is_empty());
        p.run(Instant::now(), Some(1), true);
        assert!(p.tx.is_empty(), "passive: silent until the partner speaks");
        assert!(!p.receive(&[0; 10], Instant::now()));
        assert_eq!(p.lacp.members[0].stats.rx_bad, 1);
    }
}
