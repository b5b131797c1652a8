//! Timeout policies (OVS's `conntrack-tp.c`): how long a connection lives without packets,
//! per timeout class ([`TimeoutClass`]: TCP's states, UDP's and ICMP's first packet and
//! later ones), in seconds. OVS's defaults form the default policy; `dpctl/ct-set-timeout-policy`
//! gives a zone its own ([`Conntrack::set_timeouts`]). A connection keeps the policy of its
//! zone at creation, and a policy is changed in place, so the connections that hold it see a
//! change at their next packet. A PMD keeps the policy of the zone it last committed in
//! ([`CtCache`]), so that its next commits in that zone do not read the table's map of zone
//! policies under its lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use super::{Conntrack, CtCache};
use crate::tcp::TcpTimeout;

/// Timeout classes, the keys of a timeout policy (OVS's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(usize)]
pub enum TimeoutClass {
    TcpSynSent,
    TcpSynRecv,
    TcpEstablished,
    TcpFinWait,
    TcpTimeWait,
    TcpClose,
    UdpFirst,
    UdpSingle,
    UdpMultiple,
    IcmpFirst,
    IcmpReply,
}

impl TimeoutClass {
    pub const COUNT: usize = 11;
    pub const ALL: [TimeoutClass; Self::COUNT] = [
        TimeoutClass::TcpSynSent,
        TimeoutClass::TcpSynRecv,
        TimeoutClass::TcpEstablished,
        TimeoutClass::TcpFinWait,
        TimeoutClass::TcpTimeWait,
        TimeoutClass::TcpClose,
        TimeoutClass::UdpFirst,
        TimeoutClass::UdpSingle,
        TimeoutClass::UdpMultiple,
        TimeoutClass::IcmpFirst,
        TimeoutClass::IcmpReply,
    ];

    /// The policy attribute's name (`tcp_established`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TimeoutClass::TcpSynSent => "tcp_syn_sent",
            TimeoutClass::TcpSynRecv => "tcp_syn_recv",
            TimeoutClass::TcpEstablished => "tcp_established",
            TimeoutClass::TcpFinWait => "tcp_fin_wait",
            TimeoutClass::TcpTimeWait => "tcp_time_wait",
            TimeoutClass::TcpClose => "tcp_close",
            TimeoutClass::UdpFirst => "udp_first",
            TimeoutClass::UdpSingle => "udp_single",
            TimeoutClass::UdpMultiple => "udp_multiple",
            TimeoutClass::IcmpFirst => "icmp_first",
            TimeoutClass::IcmpReply => "icmp_reply",
        }
    }

    /// The class named `name`.
    pub fn from_name(name: &str) -> Option<TimeoutClass> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// OVS's default, in seconds.
    pub fn default_secs(self) -> u32 {
        match self {
            TimeoutClass::TcpSynSent => crate::tcp::default_timeout_secs(TcpTimeout::SynSent),
            TimeoutClass::TcpSynRecv => crate::tcp::default_timeout_secs(TcpTimeout::SynRecv),
            TimeoutClass::TcpEstablished => {
                crate::tcp::default_timeout_secs(TcpTimeout::Established)
            }
            TimeoutClass::TcpFinWait => crate::tcp::default_timeout_secs(TcpTimeout::FinWait),
            TimeoutClass::TcpTimeWait => crate::tcp::default_timeout_secs(TcpTimeout::TimeWait),
            TimeoutClass::TcpClose => crate::tcp::default_timeout_secs(TcpTimeout::Close),
            TimeoutClass::UdpFirst => 60,
            TimeoutClass::UdpSingle => 60,
            TimeoutClass::UdpMultiple => 30,
            TimeoutClass::IcmpFirst => 60,
            TimeoutClass::IcmpReply => 30,
        }
    }

    pub(super) fn of_tcp(t: TcpTimeout) -> TimeoutClass {
        match t {
            TcpTimeout::SynSent => TimeoutClass::TcpSynSent,
            TcpTimeout::SynRecv => TimeoutClass::TcpSynRecv,
            TcpTimeout::Established => TimeoutClass::TcpEstablished,
            TcpTimeout::FinWait => TimeoutClass::TcpFinWait,
            TcpTimeout::TimeWait => TimeoutClass::TcpTimeWait,
            TcpTimeout::Close => TimeoutClass::TcpClose,
        }
    }
}

/// A timeout policy: seconds per class. Changed in place, so connections that hold it see a
/// change at their next packet.
#[derive(Debug)]
pub struct Policy {
    secs: [AtomicU32; TimeoutClass::COUNT],
}

impl Policy {
    pub(super) fn defaults() -> Policy {
        Policy {
            secs: TimeoutClass::ALL.map(|c| AtomicU32::new(c.default_secs())),
        }
    }

    pub(super) fn ms(&self, c: TimeoutClass) -> u64 {
        u64::from(self.secs[c as usize].load(Relaxed)) * 1000
    }

    /// Seconds of each class.
    pub fn get(&self) -> [u32; TimeoutClass::COUNT] {
        std::array::from_fn(|i| self.secs[i].load(Relaxed))
    }
}

impl Conntrack {
    /// Sets timeouts of `zone`'s policy (`None`: the default policy, which every zone without
    /// its own uses). Classes not named keep their values.
    pub fn set_timeouts(&self, zone: Option<u16>, values: &[(TimeoutClass, u32)]) {
        let p = match zone {
            None => self.default_policy.clone(),
            Some(z) => {
                let mut m = self.zone_policies.write().unwrap();
                self.any_zone_policy.store(true, Relaxed);
                let p = m
                    .entry(z)
                    .or_insert_with(|| {
                        Arc::new(Policy {
                            secs: std::array::from_fn(|i| {
                                AtomicU32::new(self.default_policy.secs[i].load(Relaxed))
                            }),
                        })
                    })
                    .clone();
                self.policy_gen.fetch_add(1, Relaxed);
                p
            }
        };
        for (c, s) in values {
            p.secs[*c as usize].store(*s, Relaxed);
        }
    }

    /// Timeouts of `zone`'s policy (the default's for a zone without one).
    pub fn timeouts(&self, zone: Option<u16>) -> [u32; TimeoutClass::COUNT] {
        match zone {
            Some(z) => self.policy_of(z).get(),
            None => self.default_policy.get(),
        }
    }

    /// Removes `zone`'s own policy; its later connections use the default.
    pub fn del_timeouts(&self, zone: u16) -> bool {
        let gone = self.zone_policies.write().unwrap().remove(&zone).is_some();
        self.policy_gen.fetch_add(1, Relaxed);
        gone
    }

    /// [`Self::policy_of`] through the PMD's cache of the last zone's.
    #[inline]
    pub(super) fn policy_cached(&self, cache: &mut CtCache, zone: u16) -> Arc<Policy> {
        // The table's address tells this table's policies from another's.
        let g = (
            self as *const Conntrack as usize,
            self.policy_gen.load(Relaxed),
        );
        match &cache.policy {
            Some((z, pg, p)) if *z == zone && *pg == g => p.clone(),
            _ => {
                let p = self.policy_of(zone);
                cache.policy = Some((zone, g, p.clone()));
                p
            }
        }
    }

    fn policy_of(&self, zone: u16) -> Arc<Policy> {
        if self.any_zone_policy.load(Relaxed)
            && let Some(p) = self.zone_policies.read().unwrap().get(&zone)
        {
            return p.clone();
        }
        self.default_policy.clone()
    }
}
