//! Connection limits: a global one (`dpctl/ct-set-maxconns`, OVS's default
//! [`DEFAULT_MAXCONNS`]) and one per zone (`dpctl/ct-set-limits`, with a default for zones
//! without their own). A commit counts its connection in ([`Conntrack::reserve`]) before it
//! is made; over a limit it is refused and counted, and the packet stays `+new` uncommitted.
//! Refusals by the global limit are also counted apart: OVS's `conntrack_full` counts those
//! only.

use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;

use super::Conntrack;

/// OVS's default global connection limit.
pub const DEFAULT_MAXCONNS: u32 = 3_000_000;

impl Conntrack {
    /// Counts a new connection in, within the limits: the zone's first, then the global one,
    /// as OVS 3.1's `conn_not_found` checks them (a commit into a full zone is not
    /// `conntrack_full`, however full the table). A count is raised only while it is under its
    /// limit, so that no reader (`ct-get-nconns`, `memory/show`, `ct-get-limits`) ever sees
    /// more connections than a limit allows; the global count is lowered again only when
    /// another thread filled the zone in between.
    pub(super) fn reserve(&self, zone: u16) -> bool {
        let zone_count = &self.zone_count[usize::from(zone)];
        let limit = self.zone_limit(zone).or(match self.default_limit() {
            0 => None,
            l => Some(l),
        });
        if limit.is_some_and(|l| zone_count.load(Relaxed) >= l) {
            return false;
        }
        if !count_in(&self.n_conns, self.maxconns.load(Relaxed)) {
            self.counters.maxconns_refused.fetch_add(1, Relaxed);
            return false;
        }
        match limit {
            None => {
                zone_count.fetch_add(1, Relaxed);
            }
            Some(l) if !count_in(zone_count, l) => {
                self.n_conns.fetch_sub(1, Relaxed);
                return false;
            }
            Some(_) => {}
        }
        true
    }

    pub(super) fn release(&self, zone: u16) {
        self.n_conns.fetch_sub(1, Relaxed);
        self.zone_count[usize::from(zone)].fetch_sub(1, Relaxed);
    }

    /// Connections in the table (committed and not yet expired or removed).
    pub fn n_conns(&self) -> u32 {
        self.n_conns.load(Relaxed)
    }

    /// Connections counted in `zone`.
    pub fn zone_conns(&self, zone: u16) -> u32 {
        self.zone_count[usize::from(zone)].load(Relaxed)
    }

    pub fn maxconns(&self) -> u32 {
        self.maxconns.load(Relaxed)
    }

    pub fn set_maxconns(&self, n: u32) {
        self.maxconns.store(n, Relaxed);
    }

    /// The default zone limit (0: none).
    pub fn default_limit(&self) -> u32 {
        self.default_limit.load(Relaxed)
    }

    pub fn set_default_limit(&self, n: u32) {
        self.default_limit.store(n, Relaxed);
    }

    /// A zone's own limit, if it has one (else the default applies). An own limit of 0 lets
    /// no connection be committed in the zone, as in OVS.
    pub fn zone_limit(&self, zone: u16) -> Option<u32> {
        match self.zone_limit[usize::from(zone)].load(Relaxed) {
            0 => None,
            l => Some((l - 1) as u32),
        }
    }

    /// Gives `zone` a limit of its own (`ct-set-limits zone=N,limit=L`).
    pub fn set_zone_limit(&self, zone: u16, n: u32) {
        self.zone_limit[usize::from(zone)].store(u64::from(n) + 1, Relaxed);
    }

    /// Takes `zone`'s own limit away: the default applies again (`ct-del-limits zone=N`).
    pub fn del_zone_limit(&self, zone: u16) {
        self.zone_limit[usize::from(zone)].store(0, Relaxed);
    }

    /// Zones with their own limit.
    pub fn zone_limits(&self) -> Vec<(u16, u32)> {
        (0..=u16::MAX)
            .filter_map(|z| Some((z, self.zone_limit(z)?)))
            .collect()
    }
}

/// Raises `count` by one if it is under `limit`.
fn count_in(count: &AtomicU32, limit: u32) -> bool {
    count
        .fetch_update(Relaxed, Relaxed, |n| (n < limit).then_some(n + 1))
        .is_ok()
}
