//! The Link Aggregation Control Protocol (IEEE 802.1AX, formerly 802.3ad) on a bond's members,
//! as `ovs-vswitchd` runs it when a Port's `lacp` is `active` or `passive` (OVS's
//! `lib/lacp.c`): each member sends LACPDUs (active, or once its partner has spoken) every
//! second (fast) or 30 seconds (slow, as the partner asks with its timeout bit), keeps what
//! its partner last said for three of those periods (current), then for three fast periods
//! more (expired), then forgets it (defaulted). A member is attached to the aggregator when
//! its partner is the same system with the same key as the best-priority member's; it may
//! carry traffic once attached with its partner in sync. The bond is "negotiated" when a
//! member is attached.

pub mod pdu;
pub mod show;

use std::time::{Duration, Instant};

use flow::EthAddr;
use pdu::{Info, Pdu, state};

/// The transmit periods, fast and slow.
const FAST_TX: Duration = Duration::from_secs(1);
const SLOW_TX: Duration = Duration::from_secs(30);
/// A partner's information lasts this many of its periods.
const RX_MULTIPLIER: u32 = 3;

/// A bond's LACP settings (OVS's `port_configure_lacp()`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `lacp=active` (else passive).
    pub active: bool,
    /// `other_config:lacp-system-id`, else the bridge's address.
    pub sys_id: EthAddr,
    /// `other_config:lacp-system-priority`, else 65534 for a bond (65535 for one link).
    pub sys_priority: u16,
    /// `other_config:lacp-time=fast`.
    pub fast: bool,
    /// `other_config:lacp-fallback-ab`.
    pub fallback_ab: bool,
}

/// A member's LACP settings (OVS's `iface_configure_lacp()`): the Interface's
/// `other_config:lacp-port-id` (0: its OpenFlow port), `lacp-port-priority` (65535) and
/// `lacp-aggregation-key` (0: the key member's port id).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberSettings {
    pub port_id: u16,
    pub port_priority: u16,
    pub key: u16,
}

/// What a member knows of its partner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Partner information up to date.
    Current,
    /// Partner information out of date.
    Expired,
    /// No partner.
    Defaulted,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Current => "current",
            Status::Expired => "expired",
            Status::Defaulted => "defaulted",
        }
    }
}

/// A member's counters (`lacp/show-stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub tx: u32,
    pub rx: u32,
    pub rx_bad: u32,
    pub rx_marker: u32,
    pub link_expired: u32,
    pub link_defaulted: u32,
    pub carrier_changed: u32,
}

/// One member.
#[derive(Clone, Debug)]
pub struct Member {
    pub name: String,
    pub settings: MemberSettings,
    pub status: Status,
    /// Attached to the aggregator: traffic may flow once the partner is in sync.
    pub attached: bool,
    pub carrier_up: bool,
    pub partner: Info,
    /// What was last sent (or what the partner last said of us): a difference is sent at once.
    ntt_actor: Info,
    /// When the next LACPDU is due (`None`: now).
    tx: Option<Instant>,
    /// When the partner's information runs out (`None`: it has).
    rx: Option<Instant>,
    pub stats: Stats,
}

/// A LACPDU to send out of member `member` (index in [`Lacp::members`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tx {
    pub member: usize,
    pub actor: Info,
    pub partner: Info,
}

/// A bond's LACP.
#[derive(Clone, Debug)]
pub struct Lacp {
    pub name: String,
    pub settings: Settings,
    pub members: Vec<Member>,
    /// The member whose key (or port id) is the aggregation key: the first registered.
    key_member: Option<usize>,
    pub negotiated: bool,
    update: bool,
}

fn expired(t: Option<Instant>, now: Instant) -> bool {
    t.is_none_or(|t| now >= t)
}

impl Lacp {
    pub fn new(name: &str, settings: Settings) -> Lacp {
        Lacp {
            name: name.to_owned(),
            settings,
            members: Vec::new(),
            key_member: None,
            negotiated: false,
            update: false,
        }
    }

    /// New settings (OVS's `lacp_configure()`).
    pub fn configure(&mut self, s: Settings) {
        let old = &self.settings;
        if old.sys_id != s.sys_id
            || old.sys_priority != s.sys_priority
            || old.fallback_ab != s.fallback_ab
        {
            self.update = true;
        }
        self.settings = s;
    }

    /// The index of member `name`.
    pub fn member_index(&self, name: &str) -> Option<usize> {
        self.members.iter().position(|m| m.name == name)
    }

    /// Adds member `name` or changes its settings (OVS's `lacp_member_register()`): a new
    /// member starts defaulted; a change of its port, priority or key makes it expired when
    /// the bond is active or negotiated.
    pub fn register(&mut self, name: &str, s: MemberSettings, now: Instant) {
        let i = match self.member_index(name) {
            Some(i) => i,
            None => {
                self.members.push(Member {
                    name: name.to_owned(),
                    settings: MemberSettings::default(),
                    status: Status::Defaulted,
                    attached: false,
                    carrier_up: false,
                    partner: Info::default(),
                    ntt_actor: Info::default(),
                    tx: None,
                    rx: None,
                    stats: Stats::default(),
                });
                self.update = true;
                let i = self.members.len() - 1;
                self.key_member.get_or_insert(i);
                i
            }
        };
        if self.members[i].settings != s {
            self.members[i].settings = s;
            self.update = true;
            if self.settings.active || self.negotiated {
                self.set_expired(i, now);
            }
        }
    }

    /// Keeps only the members named in `names` (OVS's `lacp_member_unregister()`).
    pub fn retain(&mut self, names: &[&str]) {
        let key_name = self.key_member.map(|k| self.members[k].name.clone());
        let before = self.members.len();
        self.members.retain(|m| names.contains(&m.name.as_str()));
        if self.members.len() != before {
            self.update = true;
            self.key_member = key_name
                .and_then(|n| self.member_index(&n))
                .or((!self.members.is_empty()).then_some(0));
        }
    }

    fn set_defaulted(&mut self, i: usize) {
        let m = &mut self.members[i];
        m.partner = Info::default();
        m.status = Status::Defaulted;
        self.update = true;
    }

    fn set_expired(&mut self, i: usize, now: Instant) {
        let m = &mut self.members[i];
        m.status = Status::Expired;
        m.partner.state |= state::TIMEOUT;
        m.partner.state &= !state::SYNC;
        m.rx = Some(now + FAST_TX * RX_MULTIPLIER);
    }

    /// Member `i`'s carrier went `up` or down (OVS's `lacp_member_carrier_changed()`).
    pub fn carrier_changed(&mut self, i: usize, up: bool, now: Instant) {
        if self.members[i].status == Status::Current || self.settings.active {
            self.set_expired(i, now);
        }
        let m = &mut self.members[i];
        if m.carrier_up != up {
            m.carrier_up = up;
            m.stats.carrier_changed += 1;
        }
    }

    /// A slow-protocols frame's PDU (after the Ethernet header) received on member `i`
    /// (OVS's `lacp_process_packet()`): counted; a LACPDU makes its actor our partner.
    /// Whether the member may now be enabled.
    pub fn receive(&mut self, i: usize, frame_pdu: &[u8], now: Instant) -> bool {
        self.members[i].stats.rx += 1;
        let (actor, partner) = match pdu::decode(frame_pdu) {
            Ok(Pdu::Lacp { actor, partner }) => (actor, partner),
            Ok(Pdu::Marker) => {
                self.members[i].stats.rx_marker += 1;
                return false;
            }
            Err(why) => {
                self.members[i].stats.rx_bad += 1;
                log_rl(
                    vlog::Level::Warn,
                    &format!("{}: received an unparsable LACP PDU ({why}).", self.name),
                );
                return false;
            }
        };
        if !self.members[i].carrier_up {
            let n = &self.members[i].name;
            log_rl(
                vlog::Level::Info,
                &format!("{n}: carrier state is DOWN, dropping received LACP PDU."),
            );
            return false;
        }
        let tx_rate = if self.settings.fast { FAST_TX } else { SLOW_TX };
        let m = &mut self.members[i];
        m.status = Status::Current;
        m.rx = Some(now + tx_rate * RX_MULTIPLIER);
        m.ntt_actor = partner;
        if m.partner != actor {
            m.partner = actor;
            self.update = true;
        }
        self.may_enable_now(i)
    }

    /// Attached with the partner in sync, or defaulted with fallback to active-backup.
    fn may_enable_now(&self, i: usize) -> bool {
        let m = &self.members[i];
        m.attached
            && (m.partner.state & state::SYNC != 0
                || (self.settings.fallback_ab && m.status == Status::Defaulted))
    }

    /// Whether member `i`, whose carrier is up, may carry traffic (OVS's
    /// `lacp_member_may_enable()`).
    pub fn may_enable(&mut self, i: usize) -> bool {
        self.members[i].carrier_up = true;
        self.may_enable_now(i)
    }

    /// `lacp_current` of member `i`: whether it has (or had) a partner.
    pub fn is_current(&self, i: usize) -> bool {
        self.members[i].status != Status::Defaulted
    }

    /// The aggregation key: the key member's key, or its port id.
    pub fn key(&self) -> Option<u16> {
        let k = &self.members.get(self.key_member?)?.settings;
        Some(if k.key != 0 { k.key } else { k.port_id })
    }

    /// Member `i`'s own information, as it sends it.
    pub fn actor(&self, i: usize) -> Info {
        let m = &self.members[i];
        let mut st = 0;
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        st |= flag(self.settings.active, state::ACTIVITY);
        st |= flag(self.settings.fast, state::TIMEOUT);
        st |= flag(m.attached, state::SYNC);
        st |= flag(m.status == Status::Defaulted, state::DEFAULTED);
        st |= flag(m.status == Status::Expired, state::EXPIRED);
        st |= flag(self.members.len() > 1, state::AGGREGATION);
        st |= flag(
            m.attached || !self.negotiated,
            state::COLLECTING | state::DISTRIBUTING,
        );
        Info {
            sys_priority: self.settings.sys_priority,
            sys_id: self.settings.sys_id,
            key: self.key().unwrap_or(0),
            port_priority: m.settings.port_priority,
            port_id: m.settings.port_id,
            state: st,
        }
    }

    /// The information of the system with the better priority on member `i`'s link (its
    /// own or its partner's), without key and state: members compare by it.
    fn priority(&self, i: usize) -> Info {
        let m = &self.members[i];
        let ours = (self.settings.sys_priority, self.settings.sys_id);
        let theirs = (m.partner.sys_priority, m.partner.sys_id);
        let mut p = if ours < theirs {
            self.actor(i)
        } else {
            m.partner
        };
        p.key = 0;
        p.state = 0;
        p
    }

    /// Periodic work (OVS's `lacp_run()`): partners timing out, attachment, and the
    /// LACPDUs due.
    pub fn run(&mut self, now: Instant) -> Vec<Tx> {
        for i in 0..self.members.len() {
            if !expired(self.members[i].rx, now) {
                continue;
            }
            match self.members[i].status {
                Status::Current => {
                    self.set_expired(i, now);
                    self.members[i].stats.link_expired += 1;
                }
                Status::Expired => {
                    self.set_defaulted(i);
                    self.members[i].stats.link_defaulted += 1;
                }
                Status::Defaulted => {}
            }
        }
        if self.update {
            self.update_attached();
        }
        let mut out = Vec::new();
        for i in 0..self.members.len() {
            let m = &self.members[i];
            let may_tx = m.carrier_up && (self.settings.active || m.status != Status::Defaulted);
            if !may_tx {
                continue;
            }
            let actor = self.actor(i);
            if !expired(m.tx, now) && actor.tx_equal(&m.ntt_actor) {
                continue;
            }
            let m = &mut self.members[i];
            m.ntt_actor = actor;
            m.stats.tx += 1;
            let period = if m.partner.state & state::TIMEOUT != 0 {
                FAST_TX
            } else {
                SLOW_TX
            };
            m.tx = Some(now + period);
            out.push(Tx {
                member: i,
                actor,
                partner: m.partner,
            });
        }
        out
    }

    /// Which members are attached (OVS's `lacp_update_attached()`): those whose partner is
    /// the same system with the same key as the lead's, the lead being the best-priority
    /// member that may be enabled (a current, attached one kept if there is one).
    fn update_attached(&mut self) {
        self.update = false;
        let mut lead: Option<(usize, bool, Info)> = None;
        let mut lead_current: Option<usize> = None;
        for i in 0..self.members.len() {
            let m = &self.members[i];
            if m.status == Status::Current && m.attached {
                let pri = self.priority(i);
                if lead_current.is_none() || lead.is_some_and(|(_, _, lp)| pri < lp) {
                    lead_current = Some(i);
                    lead = Some((i, true, pri));
                }
            }
        }
        let current_sys = lead_current.map(|c| self.members[c].partner.sys_id);
        for i in 0..self.members.len() {
            self.members[i].attached = false;
            if self.members[i].partner.sys_id == self.settings.sys_id {
                let n = &self.members[i].name;
                log(
                    vlog::Level::Warn,
                    &format!(
                        "member {n}: Loopback detected. Interface is connected to its own bond"
                    ),
                );
                continue;
            }
            if self.members[i].status == Status::Defaulted {
                self.members[i].attached = self.settings.fallback_ab;
                continue;
            }
            let pri = self.priority(i);
            let enable = self.may_enable_now(i);
            if current_sys.is_none_or(|s| s == self.members[i].partner.sys_id) {
                self.members[i].attached = true;
            }
            let better = match lead {
                None => true,
                Some((_, le, lp)) => (enable && !le) || (enable == le && pri < lp),
            };
            if self.members[i].attached && better {
                lead = Some((i, enable, pri));
            }
        }
        self.negotiated = lead.is_some();
        if let Some((l, _, _)) = lead {
            let lp = self.members[l].partner;
            let fallback = self.settings.fallback_ab;
            for m in &mut self.members {
                if (fallback && m.status == Status::Defaulted)
                    || m.partner.key != lp.key
                    || m.partner.sys_id != lp.sys_id
                {
                    m.attached = false;
                }
            }
        }
    }
}

fn log(level: vlog::Level, msg: &str) {
    if let Some(m) = vlog::module("lacp") {
        m.log(level, msg);
    }
}

/// What a received PDU makes LACP log: a peer sends as many as it likes, so at most 5 at
/// once and one a minute after that (OVS's rate limit for them).
fn log_rl(level: vlog::Level, msg: &str) {
    static RL: vlog::RateLimit = vlog::RateLimit::new(1, 5);
    if let Some(m) = vlog::module("lacp") {
        m.log_rl(&RL, level, msg);
    }
}

#[cfg(test)]
mod tests;
