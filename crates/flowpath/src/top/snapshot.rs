//! One reading of the counters `flowpath top` shows: per PMD thread, per port, and the
//! datapath's drops by reason, with the switch's uptime at the moment of the reading.
//!
//! The running switch builds it ([`Snapshot::read`]) and sends it as JSON in reply to
//! `top/snapshot` (see `top_cmd`); `flowpath top` decodes it and turns two of them into rates
//! (`rates`). Counters are totals as the datapath keeps them; nothing here is a rate, so a
//! reading taken at any time is as good as another.

use datapath::dpif::Datapath;
use datapath::pmd::{PmdStats, Stage};
use serde::{Deserialize, Serialize};

/// Every counter `flowpath top` draws, read at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Seconds since the switch started, when the counters were read (the clock rates are
    /// measured with, so that the time a reply takes to travel does not count).
    pub uptime_secs: f64,
    /// Megaflows the PMD threads hold, summed over the threads (`dpctl/show`'s `flows`).
    pub megaflows: u64,
    /// The names of the stages in [`PmdSample::stage_cycles`], in pipeline order.
    pub stages: Vec<String>,
    /// One entry per PMD thread.
    pub pmds: Vec<PmdSample>,
    /// One entry per datapath port, in the datapath's order.
    pub ports: Vec<PortSample>,
    /// Packets the datapath dropped, by reason (summed over the PMD threads), every reason
    /// listed even at zero.
    pub drops: Vec<DropCount>,
}

/// One PMD thread's counters (`pmd-perf-show`'s and `pmd-stage-show`'s).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PmdSample {
    /// The core it is pinned to, if any.
    pub core_id: Option<usize>,
    /// TSC cycles of iterations that received packets.
    pub busy_cycles: u64,
    /// TSC cycles of iterations that received nothing.
    pub idle_cycles: u64,
    /// Packets received from its rx queues.
    pub rx_packets: u64,
    /// Packets it handed to tx queues.
    pub tx_packets: u64,
    /// Cycles by stage, in the order of [`Snapshot::stages`].
    pub stage_cycles: Vec<u64>,
    /// Passes served by the EMC, the simple match or the decap fast path (the exact tiers in
    /// front of the classifier).
    pub emc_hits: u64,
    /// Passes served by the megaflow classifier.
    pub megaflow_hits: u64,
    /// Passes that went to the slow path (upcalls, successful or lost).
    pub upcalls: u64,
}

/// One port's counters (`port/stats`' totals) and link state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortSample {
    /// The port's name.
    pub name: String,
    /// Whether its link is up.
    pub link_up: bool,
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes of the packets received.
    pub rx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes of the packets sent.
    pub tx_bytes: u64,
    /// Packets lost on receive plus packets that did not go out.
    pub dropped: u64,
    /// Receive and send errors.
    pub errors: u64,
}

/// Packets dropped for one reason.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DropCount {
    /// The reason, as `dpif-netdev/pmd-drop-show` and the tunnel drop counters name it.
    pub reason: String,
    /// Packets dropped for it.
    pub packets: u64,
}

impl Snapshot {
    /// Reads `dp`'s counters now; `uptime_secs` is the switch's age, taken by the caller
    /// right after so that it stamps the counters' moment.
    pub fn read(dp: &Datapath, uptime: impl FnOnce() -> f64) -> Snapshot {
        let reports = dp.pmd_stats();
        let uptime_secs = uptime();
        let mut total = PmdStats::default();
        let pmds = reports
            .iter()
            .map(|r| {
                total += r.stats;
                PmdSample::of(r.core_id, &r.stats)
            })
            .collect();
        let ports = dp
            .link_states()
            .into_iter()
            .filter_map(|(name, link_up)| {
                let c = dp.port_counters(&name)?;
                Some(PortSample {
                    name,
                    link_up,
                    rx_packets: c.rx_packets,
                    rx_bytes: c.rx_bytes,
                    tx_packets: c.tx_packets,
                    tx_bytes: c.tx_bytes,
                    dropped: c.rx_dropped + c.tx_dropped,
                    errors: c.errors,
                })
            })
            .collect();
        Snapshot {
            uptime_secs,
            megaflows: dp.n_flows() as u64,
            stages: Stage::ALL.iter().map(|s| s.name().to_owned()).collect(),
            pmds,
            ports,
            drops: drops(&total),
        }
    }
}

impl PmdSample {
    fn of(core_id: Option<usize>, s: &PmdStats) -> PmdSample {
        PmdSample {
            core_id,
            busy_cycles: s.busy_cycles,
            idle_cycles: s.idle_cycles,
            rx_packets: s.rx_packets,
            tx_packets: s.tx_packets,
            stage_cycles: s.stage_cycles.to_vec(),
            emc_hits: s.emc_hits + s.simple_hits + s.decap_hits,
            megaflow_hits: s.megaflow_hits,
            upcalls: s.upcalls + s.lost_upcalls,
        }
    }
}

/// The datapath's drop reasons with their counts in `s` ([`PmdStats::drops`]).
fn drops(s: &PmdStats) -> Vec<DropCount> {
    s.drops()
        .map(|(reason, packets)| DropCount {
            reason: reason.to_owned(),
            packets,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datapath::tunnel::TnlPopDrop;

    #[test]
    fn every_drop_reason_is_listed_once() {
        let mut s = PmdStats {
            meter_drops: 3,
            ..PmdStats::default()
        };
        s.tnl_pop_drops[0] = 2;
        let d = drops(&s);
        assert_eq!(
            d.len(),
            5 + datapath::gso::GsoError::ALL.len()
                + TnlPopDrop::ALL.len()
                + datapath::xlate_drop::XlateDrop::ALL.len()
        );
        let mut names: Vec<&str> = d.iter().map(|d| d.reason.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), d.len());
        assert_eq!(d.iter().map(|d| d.packets).sum::<u64>(), 5);
    }

    #[test]
    fn a_snapshot_survives_json() {
        let s = Snapshot {
            uptime_secs: 12.5,
            megaflows: 7,
            stages: vec!["rx".into()],
            pmds: vec![PmdSample {
                core_id: Some(2),
                stage_cycles: vec![u64::MAX],
                ..PmdSample::default()
            }],
            ports: vec![PortSample {
                name: "p0".into(),
                link_up: true,
                ..PortSample::default()
            }],
            drops: drops(&PmdStats::default()),
        };
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Snapshot>(&text).unwrap(), s);
    }
}
