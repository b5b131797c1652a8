//! Bonds: a Port of several Interfaces is one bundle for NORMAL, its members chosen per flow
//! (OVS's `ofproto/bond.c`). Each member keeps its own OpenFlow port; what a bond adds is which
//! member NORMAL outputs to and which members' input it admits.
//!
//! Modes: `active-backup` (one active member carries everything; input on the others is
//! dropped), `balance-slb` (the source MAC and VLAN pick one of 256 hash buckets, each bucket
//! a member; multicast is admitted only on the active member, and a source MAC learned
//! elsewhere is taken for a loop), `balance-tcp` (the L4 5-tuple picks the bucket; needs
//! negotiated LACP: without it, it neither sends nor admits anything, or with
//! `lacp-fallback-ab` runs as active-backup).
//!
//! LACP ([`crate::lacp`], `bond_lacp.rs`): with `lacp=active|passive` a member may be
//! enabled only while LACP says so, and a bond whose LACP is configured but not negotiated
//! drops everything (or falls back to active-backup).
//!
//! Rebalancing by load: `bond_rebalance.rs`.
//!
//! Liveness: a member may be enabled while its carrier is up; `bond_updelay` and
//! `bond_downdelay` hold the change back, and `other_config:bond-primary` is preferred as the
//! active member of an active-backup bond whenever it is enabled.

use std::time::{Duration, Instant};

use flow::EthAddr;

pub use crate::bond_lacp::LacpStatus;

/// The number of hash buckets of a balanced bond (OVS's `BOND_BUCKETS`).
pub const BUCKETS: usize = 256;

/// What the user data of a bond's recirculation state starts with (the bond's name follows).
pub const RECIRC_STATE_PREFIX: &[u8] = b"bond ";

/// `bond_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BondMode {
    ActiveBackup,
    BalanceSlb,
    BalanceTcp,
}

impl BondMode {
    /// The mode a `bond_mode` value names.
    pub fn parse(s: &str) -> Option<BondMode> {
        match s {
            "active-backup" => Some(BondMode::ActiveBackup),
            "balance-slb" => Some(BondMode::BalanceSlb),
            "balance-tcp" => Some(BondMode::BalanceTcp),
            _ => None,
        }
    }

    /// The mode's `bond_mode` value.
    pub fn name(self) -> &'static str {
        match self {
            BondMode::ActiveBackup => "active-backup",
            BondMode::BalanceSlb => "balance-slb",
            BondMode::BalanceTcp => "balance-tcp",
        }
    }

    /// Whether flows are spread over the members by hash (OVS's `bond_is_balanced()`).
    pub fn is_balanced(self) -> bool {
        self != BondMode::ActiveBackup
    }
}

/// One bond's settings, as `port_configure_bond()` in `vswitchd/bridge.c` reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BondConfig {
    /// The Port's name.
    pub name: String,
    pub mode: BondMode,
    /// The members (interface names) with their Ethernet addresses, in the Port's order.
    pub members: Vec<(String, EthAddr)>,
    /// `other_config:bond-primary` (active-backup only).
    pub primary: Option<String>,
    /// `bond_updelay` and `bond_downdelay`, milliseconds.
    pub updelay: u32,
    pub downdelay: u32,
    /// `other_config:bond-hash-basis`.
    pub basis: u32,
    /// `other_config:bond-rebalance-interval`, milliseconds (0: never).
    pub rebalance_interval: u32,
    /// `other_config:lacp-fallback-ab`.
    pub lacp_fallback_ab: bool,
    /// `other_config:all-members-active`.
    pub all_members_active: bool,
    /// `other_config:lb-output-action`: a balance-tcp bond outputs with the datapath's
    /// `lb_output` action instead of recirculating.
    pub lb_output: bool,
    /// The Port's `bond_active_slave`: the member that was active before.
    pub active_mac: Option<EthAddr>,
    /// LACP, when the Port's `lacp` is `active` or `passive`.
    pub lacp: Option<crate::bond_lacp::LacpConfig>,
}

impl BondConfig {
    /// A bond of `members` in `mode`, everything else as OVS's defaults.
    pub fn new(name: &str, mode: BondMode, members: &[(&str, EthAddr)]) -> BondConfig {
        BondConfig {
            name: name.to_owned(),
            mode,
            members: members.iter().map(|(n, m)| ((*n).to_owned(), *m)).collect(),
            primary: None,
            updelay: 0,
            downdelay: 0,
            basis: 0,
            rebalance_interval: 10_000,
            lacp_fallback_ab: false,
            all_members_active: false,
            lb_output: false,
            active_mac: None,
            lacp: None,
        }
    }
}

/// One member of a bond.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BondMember {
    pub name: String,
    pub mac: EthAddr,
    /// Its OpenFlow port, once the bridge has it.
    pub ofport: Option<u32>,
    /// NORMAL may use it.
    pub enabled: bool,
    /// Its carrier is up (OVS's `may_enable` with carrier detection).
    pub may_enable: bool,
    /// When a pending change of `enabled` takes effect (up- or downdelay).
    pub delay_expires: Option<Instant>,
    /// Its carrier when last run (LACP counts the changes).
    pub carrier: Option<bool>,
}

/// A bond and its state.
#[derive(Clone, Debug)]
pub struct Bond {
    pub config: BondConfig,
    pub members: Vec<BondMember>,
    /// The active member (index into `members`).
    pub active: Option<usize>,
    /// The address of the member last active (written back as `bond_active_slave`).
    pub active_mac: EthAddr,
    /// Each hash bucket's member (balanced modes).
    pub buckets: Vec<Option<usize>>,
    /// When a balanced bond rebalances next.
    pub next_rebalance: Instant,
    /// Each bucket's recent load in bytes (halved at each rebalancing), and the bytes its
    /// counter said at the last accounting ([`crate::bond_rebalance`]).
    pub load: Vec<u64>,
    pub(crate) counted: Vec<u64>,
    /// Log lines of what changed (`member p1: disabled`, ...), taken by the caller.
    pub events: Vec<String>,
    /// The active member changed or a member went: the peer switch should relearn the
    /// addresses behind this switch (OVS's `send_learning_packets`).
    pub send_learning_packets: bool,
    /// The bond's LACP, when configured.
    pub lacp: Option<crate::lacp::Lacp>,
    /// LACPDU frames due: (member OpenFlow port, frame), taken by the caller.
    pub lacp_tx: Vec<(u32, Vec<u8>)>,
    /// The recirculation id of a balanced bond (0: none): a balance-tcp bond outputs as
    /// `hash(l4(BASIS)),recirc(ID)` and the next pass picks the member by `dp_hash`.
    pub recirc_id: u32,
    /// Not run yet: the first run takes each member's carrier as it is, without delays (as
    /// OVS registers a member enabled when its carrier is up).
    fresh: bool,
}

impl Bond {
    /// A new bond: every member enabled, as OVS enables a member whose carrier is up.
    pub fn new(config: BondConfig, now: Instant) -> Bond {
        let members = config
            .members
            .iter()
            .map(|(name, mac)| BondMember {
                name: name.clone(),
                mac: *mac,
                ofport: None,
                enabled: false,
                may_enable: true,
                delay_expires: None,
                carrier: None,
            })
            .collect();
        let next_rebalance = now + Duration::from_millis(config.rebalance_interval.into());
        let lacp = config
            .lacp
            .as_ref()
            .map(|l| crate::lacp::Lacp::new(&config.name, l.settings.clone()));
        let mut b = Bond {
            lacp,
            lacp_tx: Vec::new(),
            recirc_id: 0,
            active_mac: config.active_mac.unwrap_or(EthAddr([0; 6])),
            config,
            members,
            active: None,
            buckets: vec![None; BUCKETS],
            next_rebalance,
            load: vec![0; BUCKETS],
            counted: vec![0; BUCKETS],
            events: Vec::new(),
            send_learning_packets: false,
            fresh: true,
        };
        for m in &mut b.members {
            m.enabled = true;
        }
        b.choose_active();
        b
    }

    /// Carries the state of `old` (the same bond before a change of settings) over: which
    /// members are enabled, the active member and the buckets of the members still there.
    pub fn keep_state(&mut self, old: &Bond) {
        self.fresh = false;
        for m in &mut self.members {
            if let Some(o) = old.members.iter().find(|o| o.name == m.name) {
                m.enabled = o.enabled;
                m.may_enable = o.may_enable;
                m.ofport = o.ofport;
                m.carrier = o.carrier;
            }
        }
        self.keep_lacp_state(old);
        if self.config.mode != BondMode::ActiveBackup {
            self.recirc_id = old.recirc_id;
        }
        self.keep_buckets(old);
        self.active_mac = old.active_mac;
        self.active = old
            .active
            .and_then(|i| self.member_index(&old.members[i].name));
        self.choose_active_if_needed();
    }

    /// Keeps the buckets of `old` (by member name) with their loads, unless a setting that
    /// makes OVS's `bond_reconfigure()` reset them changed: the mode, hash basis, rebalance
    /// interval, primary, `lacp-fallback-ab` or `lb-output-action`.
    fn keep_buckets(&mut self, old: &Bond) {
        let (c, o) = (&self.config, &old.config);
        if (c.mode, c.basis, c.rebalance_interval, &c.primary)
            != (o.mode, o.basis, o.rebalance_interval, &o.primary)
            || (c.lacp_fallback_ab, c.lb_output) != (o.lacp_fallback_ab, o.lb_output)
        {
            return;
        }
        for (b, ob) in self.buckets.iter_mut().zip(&old.buckets) {
            *b = ob.and_then(|i| {
                let name = &old.members.get(i)?.name;
                self.members.iter().position(|m| &m.name == name)
            });
        }
        self.load.clone_from(&old.load);
        self.counted.clone_from(&old.counted);
    }

    /// The index of the member called `name`.
    pub fn member_index(&self, name: &str) -> Option<usize> {
        self.members.iter().position(|m| m.name == name)
    }

    /// The index of the member on OpenFlow port `ofport`.
    pub fn member_on(&self, ofport: u32) -> Option<usize> {
        self.members.iter().position(|m| m.ofport == Some(ofport))
    }

    /// The bundle's one OpenFlow port for MAC learning: its lowest member port.
    pub fn bundle_port(&self) -> Option<u32> {
        self.members.iter().filter_map(|m| m.ofport).min()
    }

    /// Periodic work (OVS's `bond_run()`): each member's carrier (`up`) with its delays, then
    /// the active member. Whether forwarding changed.
    pub fn run(&mut self, now: Instant, up: impl Fn(&BondMember) -> bool) -> bool {
        let before = (self.enabled_set(), self.active, self.lacp_status());
        let carrier: Vec<bool> = self.members.iter().map(&up).collect();
        let link = self.run_lacp(now, &carrier);
        if std::mem::take(&mut self.fresh) {
            for (m, &l) in self.members.iter_mut().zip(&link) {
                m.may_enable = l;
                m.enabled = l;
            }
        }
        for (i, l) in link.into_iter().enumerate() {
            self.members[i].may_enable = l;
            self.link_status_update(i, now);
        }
        self.choose_active_if_needed();
        if self.config.mode.is_balanced() {
            // Only the buckets of no member or of a disabled one get an enabled member: a
            // member enabled (again) gets buckets only by rebalancing, as in OVS's
            // `bond_run()` (`bond_update_post_recirc_rules()`, `choose_output_member()`).
            self.fill_buckets();
        }
        let moved = self.rebalance(now);
        moved || before != (self.enabled_set(), self.active, self.lacp_status())
    }

    fn enabled_set(&self) -> Vec<bool> {
        self.members.iter().map(|m| m.enabled).collect()
    }

    /// A member's carrier against its state: starts or cancels a delay, and enables or
    /// disables it when the delay is over (OVS's `bond_link_status_update()`).
    fn link_status_update(&mut self, i: usize, now: Instant) {
        let (up, enabled, pending) = {
            let m = &self.members[i];
            (m.may_enable, m.enabled, m.delay_expires.is_some())
        };
        if (up == enabled) == pending {
            let name = self.members[i].name.clone();
            self.events.push(format!(
                "member {name}: link state {}",
                if up { "up" } else { "down" }
            ));
            if up == enabled {
                self.members[i].delay_expires = None;
            } else {
                let delay = if up {
                    self.config.updelay
                } else {
                    self.config.downdelay
                };
                self.members[i].delay_expires = Some(now + Duration::from_millis(delay.into()));
            }
        }
        if self.members[i].delay_expires.is_some_and(|t| now >= t) {
            self.enable_member(i, up);
        }
    }

    /// Enables or disables member `i` now (OVS's `bond_enable_member()`).
    pub fn enable_member(&mut self, i: usize, enable: bool) {
        let m = &mut self.members[i];
        m.delay_expires = None;
        if m.enabled != enable {
            m.enabled = enable;
            self.send_learning_packets |= !enable;
            self.events.push(format!(
                "member {}: {}",
                m.name,
                if enable { "enabled" } else { "disabled" }
            ));
        }
    }

    /// Chooses the active member when there is none, it is disabled, or an enabled primary
    /// is not it.
    pub fn choose_active_if_needed(&mut self) {
        let primary = self.enabled_primary();
        let active_ok = self.active.is_some_and(|i| self.members[i].enabled);
        if !active_ok || (primary.is_some() && primary != self.active) {
            self.choose_active();
        }
    }

    fn enabled_primary(&self) -> Option<usize> {
        if self.config.mode != BondMode::ActiveBackup && !self.config.lacp_fallback_ab {
            return None;
        }
        let p = self.config.primary.as_deref()?;
        self.member_index(p).filter(|&i| self.members[i].enabled)
    }

    /// OVS's `bond_choose_active_member()`: the enabled primary, else the member last
    /// active, else the first enabled member, else the one whose updelay ends first (enabled
    /// at once, there being no other).
    fn choose_active(&mut self) {
        let old = self.active;
        let last = self
            .members
            .iter()
            .position(|m| m.mac == self.active_mac && m.enabled);
        let pick = self
            .enabled_primary()
            .or(last)
            .or_else(|| self.members.iter().position(|m| m.enabled))
            .or_else(|| {
                self.members
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.may_enable && m.delay_expires.is_some())
                    .min_by_key(|(_, m)| m.delay_expires)
                    .map(|(i, _)| i)
            });
        self.active = pick;
        match pick {
            Some(i) => {
                self.send_learning_packets = true;
                if !self.members[i].enabled {
                    self.enable_member(i, true);
                }
                if old != pick {
                    self.active_mac = self.members[i].mac;
                    let name = &self.members[i].name;
                    self.events.push(format!(
                        "bond {}: active member is now {name}",
                        self.config.name
                    ));
                }
            }
            None if old.is_some() => {
                self.active_mac = EthAddr([0; 6]);
                self.events
                    .push(format!("bond {}: all members disabled", self.config.name));
            }
            None => {}
        }
    }

    /// Makes `name` the active member (`bond/set-active-member`): OVS's reply or error.
    pub fn set_active(&mut self, name: &str) -> Result<String, String> {
        let i = self.member_index(name).ok_or("no such member")?;
        if !self.members[i].enabled {
            return Err("cannot make disabled member active".into());
        }
        if self.active == Some(i) {
            return Ok("no change".into());
        }
        self.active = Some(i);
        self.send_learning_packets = true;
        self.active_mac = self.members[i].mac;
        self.events.push(format!(
            "bond {}: active member is now {name}",
            self.config.name
        ));
        Ok("done".into())
    }

    /// Moves hash bucket `hash` (decimal digits, taken modulo the number of buckets) of a
    /// balance-slb bond to member `name` (`bond/migrate`): OVS's reply or error.
    pub fn migrate(&mut self, hash: &str, name: &str) -> Result<String, String> {
        if self.config.mode != BondMode::BalanceSlb {
            return Err("not an SLB bond".into());
        }
        if !hash.bytes().all(|c| c.is_ascii_digit()) {
            return Err("bad hash".into());
        }
        let h = hash
            .bytes()
            .fold(0usize, |h, c| (h * 10 + usize::from(c - b'0')) % BUCKETS);
        let i = self.member_index(name).ok_or("no such member")?;
        if !self.members[i].enabled {
            return Err("cannot migrate to disabled member".into());
        }
        self.buckets[h] = Some(i);
        Ok("migrated".into())
    }

    /// Gives every bucket whose member is gone or disabled an enabled member, round robin
    /// over the enabled members in order.
    fn fill_buckets(&mut self) {
        let enabled: Vec<usize> = (0..self.members.len())
            .filter(|&i| self.members[i].enabled)
            .collect();
        for (n, b) in self.buckets.iter_mut().enumerate() {
            if b.is_none_or(|i| !self.members.get(i).is_some_and(|m| m.enabled)) {
                *b = (!enabled.is_empty()).then(|| enabled[n % enabled.len()]);
            }
        }
    }

    /// The member NORMAL outputs a frame from `src` in `vlan` to (OVS's
    /// `choose_output_member()`), `l4_hash` giving a balance-tcp bond its flow's 5-tuple
    /// hash; or none: no member enabled, a balance-tcp bond without negotiated LACP, or a
    /// bond whose LACP did not negotiate (without `lacp-fallback-ab`).
    pub fn output_member(
        &self,
        src: EthAddr,
        vlan: u16,
        l4_hash: impl FnOnce(u32) -> u32,
    ) -> Option<&BondMember> {
        let i = match self.output_mode()? {
            BondMode::ActiveBackup => self.active?,
            BondMode::BalanceTcp => {
                let h = l4_hash(self.config.basis) as usize % BUCKETS;
                self.buckets[h].or(self.active)?
            }
            BondMode::BalanceSlb => {
                let h = hash_mac(src, vlan, self.config.basis) as usize % BUCKETS;
                self.buckets[h].or(self.active)?
            }
        };
        self.members.get(i).filter(|m| m.enabled)
    }

    /// Whether NORMAL admits a frame to `dst` received on member `i` (OVS's
    /// `bond_check_admissibility()`): `Some(true)` admitted, `Some(false)` dropped, `None`
    /// admitted unless its source was learned on another port (balance-slb).
    pub fn admits(&self, i: usize, dst: EthAddr) -> Option<bool> {
        let fallback = self.config.lacp_fallback_ab;
        match self.lacp_status() {
            LacpStatus::Negotiated => {
                let m = &self.members[i];
                return Some(m.enabled || m.may_enable);
            }
            LacpStatus::Configured if !fallback => return Some(false),
            LacpStatus::Off if self.config.mode == BondMode::BalanceTcp => return Some(false),
            _ => {}
        }
        if dst.0[0] & 1 != 0 && self.active != Some(i) && !self.config.all_members_active {
            return Some(false);
        }
        match self.config.mode {
            BondMode::BalanceSlb => None,
            _ => Some(self.active == Some(i)),
        }
    }
}

/// OVS's `hash_mac()`: the address and VLAN as one 64-bit word, hashed with `basis`.
pub fn hash_mac(mac: EthAddr, vlan: u16, basis: u32) -> u32 {
    let addr = mac.0.iter().fold(0u64, |w, &b| (w << 8) | u64::from(b));
    let word = (u64::from(vlan) << 48) | addr;
    let h = crate::xlate::hash_add(
        crate::xlate::hash_add(basis, word as u32),
        (word >> 32) as u32,
    );
    crate::xlate::hash_finish(h, 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(n: u8) -> EthAddr {
        EthAddr([0xaa, 0x55, 0xaa, 0x55, 0, n])
    }

    fn ab(primary: Option<&str>) -> Bond {
        let mut c = BondConfig::new(
            "bond0",
            BondMode::ActiveBackup,
            &[("p1", mac(1)), ("p2", mac(2))],
        );
        c.primary = primary.map(str::to_owned);
        Bond::new(c, Instant::now())
    }

    #[test]
    fn hash_mac_is_ovs_s() {
        // What OVS 3.1's `bond/hash` answers (testdata/ovsdb/scripts/bonds.ovs).
        let m = EthAddr([0x50, 0x54, 0, 0, 0, 1]);
        assert_eq!(hash_mac(m, 0, 0) & 0xff, 144);
        assert_eq!(hash_mac(m, 10, 7) & 0xff, 70);
    }

    #[test]
    fn the_primary_is_active_and_failover_moves_to_the_other_member() {
        let mut b = ab(Some("p2"));
        assert_eq!(b.active, Some(1));
        let now = Instant::now();
        assert!(b.run(now, |m| m.name != "p2"));
        assert_eq!(b.active, Some(0));
        assert!(!b.members[1].enabled);
        assert_eq!(b.active_mac, mac(1));
        // The primary back: it is active again.
        assert!(b.run(now, |_| true));
        assert_eq!(b.active, Some(1));
    }

    #[test]
    fn a_new_bond_starts_with_its_members_carrier_whatever_the_delays() {
        let mut c = BondConfig::new(
            "bond0",
            BondMode::ActiveBackup,
            &[("p1", mac(1)), ("p2", mac(2))],
        );
        c.downdelay = 1000;
        c.primary = Some("p1".into());
        let mut b = Bond::new(c, Instant::now());
        b.run(Instant::now(), |m| m.name == "p2");
        assert_eq!((b.members[0].enabled, b.active), (false, Some(1)));
    }

    #[test]
    fn downdelay_holds_a_member_enabled_until_it_expires() {
        let mut b = ab(None);
        b.config.downdelay = 200;
        let t0 = Instant::now();
        b.run(t0, |_| true);
        assert!(!b.run(t0, |m| m.name != "p1"));
        assert!(b.members[0].enabled && b.members[0].delay_expires.is_some());
        assert!(b.run(t0 + Duration::from_millis(200), |m| m.name != "p1"));
        assert_eq!((b.members[0].enabled, b.active), (false, Some(1)));
    }

    #[test]
    fn a_disabled_member_comes_back_at_the_next_run_when_its_carrier_is_up() {
        let mut b = ab(Some("p1"));
        b.enable_member(0, false);
        b.choose_active_if_needed();
        assert_eq!(b.active, Some(1));
        b.run(Instant::now(), |_| true);
        assert_eq!((b.members[0].enabled, b.active), (true, Some(0)));
    }

    #[test]
    fn admissibility_as_ovs_s() {
        let b = ab(None);
        let uni = EthAddr([2, 0, 0, 0, 0, 1]);
        assert_eq!(b.admits(0, uni), Some(true));
        assert_eq!(b.admits(1, uni), Some(false));
        assert_eq!(b.admits(1, EthAddr::BROADCAST), Some(false));
        let mut slb = ab(None);
        slb.config.mode = BondMode::BalanceSlb;
        assert_eq!(slb.admits(1, uni), None);
        assert_eq!(slb.admits(1, EthAddr::BROADCAST), Some(false));
        let mut tcp = ab(None);
        tcp.config.mode = BondMode::BalanceTcp;
        assert_eq!(tcp.admits(0, uni), Some(false));
        assert!(tcp.output_member(uni, 0, |_| 0).is_none());
    }

    #[test]
    fn migrate_moves_a_bucket_as_ovs_s() {
        let mut b = ab(None);
        assert_eq!(b.migrate("1", "p2"), Err("not an SLB bond".into()));
        b.config.mode = BondMode::BalanceSlb;
        b.run(Instant::now(), |_| true);
        assert_eq!(b.migrate("x", "p2"), Err("bad hash".into()));
        assert_eq!(b.migrate("1", "p9"), Err("no such member".into()));
        let src = EthAddr([0x50, 0x54, 0, 0, 0, 1]);
        // 400 is bucket 144, where this source hashes.
        assert_eq!(b.migrate("400", "p2"), Ok("migrated".into()));
        assert_eq!(b.output_member(src, 0, |_| 0).unwrap().name, "p2");
        assert_eq!(b.migrate("144", "p1"), Ok("migrated".into()));
        assert_eq!(b.output_member(src, 0, |_| 0).unwrap().name, "p1");
        b.enable_member(1, false);
        assert_eq!(
            b.migrate("144", "p2"),
            Err("cannot migrate to disabled member".into())
        );
    }

    #[test]
    fn slb_spreads_sources_over_enabled_members_only() {
        let mut b = ab(None);
        b.config.mode = BondMode::BalanceSlb;
        b.run(Instant::now(), |_| true);
        let used: std::collections::BTreeSet<String> = (1..=16u8)
            .filter_map(|n| b.output_member(EthAddr([2, 0, 0, 0, 0, n]), 0, |_| 0))
            .map(|m| m.name.clone())
            .collect();
        assert_eq!(used.len(), 2);
        b.run(Instant::now(), |m| m.name == "p2");
        assert!((1..=16u8).all(|n| {
            b.output_member(EthAddr([2, 0, 0, 0, 0, n]), 0, |_| 0)
                .is_some_and(|m| m.name == "p2")
        }));
    }
}
