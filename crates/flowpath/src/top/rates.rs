//! Rates between two [`Snapshot`]s: each counter's difference divided by the time between
//! the readings (the switch's own clock, [`Snapshot::uptime_secs`]), and the shares and
//! cycles per packet `flowpath top` draws.
//!
//! A counter that went down (`dpif-netdev/pmd-stats-clear` between the readings) counts as
//! no change; a PMD or port present only in the newer reading has no rate yet (zeros), so a
//! port added under the view does not flash its lifetime totals as one second's traffic.

use super::snapshot::{PmdSample, PortSample, Snapshot};

/// What one screen shows: rates over the last interval, and the newer reading's levels.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rates {
    /// The switch's uptime at the newer reading.
    pub uptime_secs: f64,
    /// Seconds between the two readings.
    pub secs: f64,
    /// Megaflows held now.
    pub megaflows: u64,
    /// Packets per second received, all PMDs.
    pub rx_pps: f64,
    /// Packets per second handed to tx queues, all PMDs.
    pub tx_pps: f64,
    /// Stage names, in the order of [`PmdRates::stage_cpp`].
    pub stages: Vec<String>,
    /// One entry per PMD thread of the newer reading, in its order.
    pub pmds: Vec<PmdRates>,
    /// Every port, the busiest (rx + tx packets per second) first.
    pub ports: Vec<PortRates>,
    /// Drop reasons that dropped packets in the interval, the most per second first.
    pub drops: Vec<(String, f64)>,
}

/// One PMD thread over the interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PmdRates {
    /// The core it is pinned to, if any.
    pub core_id: Option<usize>,
    /// Share of its cycles spent in iterations that received packets, in percent.
    pub busy_pct: f64,
    /// Packets per second it received.
    pub rx_pps: f64,
    /// Cycles per received packet by stage, in the order of [`Rates::stages`].
    pub stage_cpp: Vec<f64>,
    /// Cycles per received packet, all stages (`pmd-stage-show`'s total).
    pub cpp: f64,
    /// Shares of the lookups, in percent, served by the exact-match tiers (EMC, simple
    /// match, decap fast path), the megaflow classifier and the slow path.
    pub emc_pct: f64,
    pub megaflow_pct: f64,
    pub upcall_pct: f64,
}

/// One port over the interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PortRates {
    /// The port's name.
    pub name: String,
    /// Whether its link is up now.
    pub link_up: bool,
    /// Packets per second received and sent.
    pub rx_pps: f64,
    pub tx_pps: f64,
    /// Megabits per second received and sent (frames without FCS, as the port counts bytes).
    pub rx_mbps: f64,
    pub tx_mbps: f64,
    /// Packets per second dropped (receive and send).
    pub drops_ps: f64,
    /// Errors per second.
    pub errors_ps: f64,
}

impl Rates {
    /// The rates from `prev` to `cur`.
    pub fn between(prev: &Snapshot, cur: &Snapshot) -> Rates {
        let secs = cur.uptime_secs - prev.uptime_secs;
        let per_sec = |d: u64| if secs > 0.0 { d as f64 / secs } else { 0.0 };
        let pmds: Vec<PmdRates> = cur
            .pmds
            .iter()
            .enumerate()
            .map(|(i, c)| pmd_rates(matching_pmd(prev, i, c).unwrap_or(c), c, &per_sec))
            .collect();
        let mut ports: Vec<PortRates> = cur
            .ports
            .iter()
            .map(|c| {
                let p = prev.ports.iter().find(|p| p.name == c.name).unwrap_or(c);
                port_rates(p, c, &per_sec)
            })
            .collect();
        ports.sort_by(|a, b| (b.rx_pps + b.tx_pps).total_cmp(&(a.rx_pps + a.tx_pps)));
        let mut drops: Vec<(String, f64)> = cur
            .drops
            .iter()
            .map(|c| {
                let before = prev.drops.iter().find(|p| p.reason == c.reason);
                let d = before.map_or(0, |p| c.packets.saturating_sub(p.packets));
                (c.reason.clone(), per_sec(d))
            })
            .filter(|(_, r)| *r > 0.0)
            .collect();
        drops.sort_by(|a, b| b.1.total_cmp(&a.1));
        let (rx, tx) = cur
            .pmds
            .iter()
            .enumerate()
            .fold((0, 0), |(rx, tx), (i, c)| {
                let p = matching_pmd(prev, i, c).unwrap_or(c);
                (
                    rx + c.rx_packets.saturating_sub(p.rx_packets),
                    tx + c.tx_packets.saturating_sub(p.tx_packets),
                )
            });
        Rates {
            uptime_secs: cur.uptime_secs,
            secs: secs.max(0.0),
            megaflows: cur.megaflows,
            rx_pps: per_sec(rx),
            tx_pps: per_sec(tx),
            stages: cur.stages.clone(),
            pmds,
            ports,
            drops,
        }
    }
}

/// The PMD of `prev` that `c` (the `i`th of the newer reading) continues: the one at the same
/// place on the same core, else the one on the same core.
fn matching_pmd<'a>(prev: &'a Snapshot, i: usize, c: &PmdSample) -> Option<&'a PmdSample> {
    prev.pmds
        .get(i)
        .filter(|p| p.core_id == c.core_id)
        .or_else(|| {
            c.core_id?;
            prev.pmds.iter().find(|p| p.core_id == c.core_id)
        })
}

fn pmd_rates(p: &PmdSample, c: &PmdSample, per_sec: &impl Fn(u64) -> f64) -> PmdRates {
    let d = |a: u64, b: u64| b.saturating_sub(a);
    let busy = d(p.busy_cycles, c.busy_cycles);
    let idle = d(p.idle_cycles, c.idle_cycles);
    let rx = d(p.rx_packets, c.rx_packets);
    let stage_cpp: Vec<f64> = c
        .stage_cycles
        .iter()
        .enumerate()
        .map(|(i, &now)| ratio(d(p.stage_cycles.get(i).copied().unwrap_or(now), now), rx))
        .collect();
    let emc = d(p.emc_hits, c.emc_hits);
    let mf = d(p.megaflow_hits, c.megaflow_hits);
    let up = d(p.upcalls, c.upcalls);
    let lookups = emc + mf + up;
    PmdRates {
        core_id: c.core_id,
        busy_pct: 100.0 * ratio(busy, busy + idle),
        rx_pps: per_sec(rx),
        cpp: stage_cpp.iter().sum(),
        stage_cpp,
        emc_pct: 100.0 * ratio(emc, lookups),
        megaflow_pct: 100.0 * ratio(mf, lookups),
        upcall_pct: 100.0 * ratio(up, lookups),
    }
}

fn port_rates(p: &PortSample, c: &PortSample, per_sec: &impl Fn(u64) -> f64) -> PortRates {
    let d = |a: u64, b: u64| per_sec(b.saturating_sub(a));
    PortRates {
        name: c.name.clone(),
        link_up: c.link_up,
        rx_pps: d(p.rx_packets, c.rx_packets),
        tx_pps: d(p.tx_packets, c.tx_packets),
        rx_mbps: d(p.rx_bytes, c.rx_bytes) * 8.0 / 1e6,
        tx_mbps: d(p.tx_bytes, c.tx_bytes) * 8.0 / 1e6,
        drops_ps: d(p.dropped, c.dropped),
        errors_ps: d(p.errors, c.errors),
    }
}

/// `a / b`, 0 when `b` is 0.
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

#[cfg(test)]
mod tests {
    use super::super::snapshot::DropCount;
    use super::*;

    fn pmd(core: usize, rx: u64, cycles: u64) -> PmdSample {
        PmdSample {
            core_id: Some(core),
            busy_cycles: cycles,
            idle_cycles: cycles / 3,
            rx_packets: rx,
            tx_packets: rx,
            stage_cycles: vec![cycles / 2, cycles / 2],
            emc_hits: rx * 9 / 10,
            megaflow_hits: rx / 10,
            upcalls: 0,
        }
    }

    fn port(name: &str, rx: u64) -> PortSample {
        PortSample {
            name: name.into(),
            link_up: true,
            rx_packets: rx,
            rx_bytes: rx * 64,
            tx_packets: 0,
            tx_bytes: 0,
            dropped: rx / 100,
            errors: 0,
        }
    }

    fn snap(t: f64, k: u64) -> Snapshot {
        Snapshot {
            uptime_secs: t,
            megaflows: 3,
            stages: vec!["rx".into(), "tx".into()],
            pmds: vec![pmd(1, 1000 * k, 300_000 * k)],
            ports: vec![port("quiet", 10 * k), port("busy", 1000 * k)],
            drops: vec![DropCount {
                reason: "meter".into(),
                packets: 5 * k,
            }],
        }
    }

    #[test]
    fn rates_are_differences_over_the_switch_clock() {
        let r = Rates::between(&snap(10.0, 1), &snap(10.5, 3));
        assert_eq!(r.secs, 0.5);
        assert_eq!(r.rx_pps, 4000.0);
        let p = &r.pmds[0];
        assert_eq!(p.rx_pps, 4000.0);
        assert_eq!(p.busy_pct, 75.0);
        assert_eq!(p.stage_cpp, vec![150.0, 150.0]);
        assert_eq!(p.cpp, 300.0);
        assert_eq!((p.emc_pct, p.megaflow_pct, p.upcall_pct), (90.0, 10.0, 0.0));
        assert_eq!(r.ports[0].name, "busy");
        assert_eq!(r.ports[0].rx_mbps, 4000.0 * 64.0 * 8.0 / 1e6);
        assert_eq!(r.ports[0].drops_ps, 40.0);
        assert_eq!(r.drops, vec![("meter".to_owned(), 20.0)]);
    }

    #[test]
    fn cleared_counters_and_new_ports_have_no_rate() {
        let mut cur = snap(2.0, 1);
        cur.ports.push(port("new", 1_000_000));
        let r = Rates::between(&snap(1.0, 2), &cur);
        assert_eq!(r.rx_pps, 0.0);
        assert!(r.ports.iter().all(|p| p.rx_pps == 0.0), "{:?}", r.ports);
        assert!(r.drops.is_empty());
    }
}
