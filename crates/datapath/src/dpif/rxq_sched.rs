//! Rx queue scheduling (OVS's `rxq_scheduling`): which PMD thread polls which rx queue. The
//! `pmd-rxq-assign` algorithms ([`RxqAssign`]) and the reassignment that
//! `dpif-netdev/pmd-rxq-rebalance`, a `pmd-rxq-assign` change and a `pmd-cpu-mask` change run.
//!
//! A reassignment asks every PMD which queues it polls and what each cost, deals them out
//! again, and moves only the queues whose PMD changes: a PMD that keeps its queues is not
//! disturbed, and a queue that moves pauses only between its old PMD's iteration and its new
//! one's; the packets that arrive meanwhile wait in the queue. The main thread then publishes
//! the new layout, so `pmd-rxq-show` shows it at once.

use std::fmt::Write;
use std::sync::mpsc::channel;
use std::time::Duration;

use super::pmd_thread::PmdHandle;
use super::{Datapath, core_text};
use crate::pmd::{PmdCmd, PolledRxq};

/// `pmd-rxq-assign`: how rx queues are spread over PMD threads, with OVS's names and meanings
/// (ovs-vswitchd.conf.db(5)). The measured load of a queue is the TSC cycles its packets took
/// since it was last assigned; at start-up every queue measures zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxqAssign {
    /// Queues sorted by measured cycles, most first, dealt to the PMDs in turn, back and forth
    /// (0, 1, .., n-1, n-1, .., 0, 0, 1, ..) so the busiest queues land on different PMDs.
    #[default]
    Cycles,
    /// Queues sorted by measured cycles, most first, each to the PMD with the least load so
    /// far (ties to the one with fewer queues, then the lower index).
    Group,
    /// Queues in port and queue order, dealt to the PMDs in turn, ignoring load.
    RoundRobin,
}

impl RxqAssign {
    /// The knob's value: `cycles`, `group` or `roundrobin`.
    pub fn parse(s: &str) -> Result<RxqAssign, String> {
        match s {
            "cycles" => Ok(RxqAssign::Cycles),
            "group" => Ok(RxqAssign::Group),
            "roundrobin" => Ok(RxqAssign::RoundRobin),
            _ => Err(format!(
                "pmd-rxq-assign '{s}': expected cycles, group or roundrobin"
            )),
        }
    }

    /// The knob's name for this value.
    pub fn name(self) -> &'static str {
        match self {
            RxqAssign::Cycles => "cycles",
            RxqAssign::Group => "group",
            RxqAssign::RoundRobin => "roundrobin",
        }
    }

    /// The PMD index for each queue, given each queue's measured cycles in port and queue order.
    pub fn assign(self, loads: &[u64], n_pmd: usize) -> Vec<usize> {
        let n_pmd = n_pmd.max(1);
        let mut out = vec![0; loads.len()];
        if self == RxqAssign::RoundRobin {
            for (i, o) in out.iter_mut().enumerate() {
                *o = i % n_pmd;
            }
            return out;
        }
        let mut order: Vec<usize> = (0..loads.len()).collect();
        // Stable: equal loads keep port and queue order.
        order.sort_by_key(|&i| core::cmp::Reverse(loads[i]));
        let mut pmd_load = vec![0u64; n_pmd];
        let mut pmd_queues = vec![0usize; n_pmd];
        for (rank, &q) in order.iter().enumerate() {
            let p = match self {
                RxqAssign::Group => (0..n_pmd)
                    .min_by_key(|&p| (pmd_load[p], pmd_queues[p], p))
                    .unwrap_or(0),
                _ => {
                    let (round, pos) = (rank / n_pmd, rank % n_pmd);
                    if round % 2 == 0 { pos } else { n_pmd - 1 - pos }
                }
            };
            pmd_load[p] += loads[q];
            pmd_queues[p] += 1;
            out[q] = p;
        }
        out
    }
}

impl Datapath {
    /// `dpif-netdev/pmd-rxq-rebalance`: reassigns every rx queue by the `pmd-rxq-assign`
    /// algorithm using the cycles each queue took since its last assignment. Only the queues
    /// that change PMD stop being polled, between two iterations of their PMDs, for the time
    /// the handover takes; packets waiting in a queue stay there. Returns one line per queue
    /// that moved.
    pub fn rxq_rebalance(&mut self) -> String {
        self.reassign_rxqs(&[])
    }

    /// The `pmd-rxq-assign` in force.
    pub fn rxq_assign(&self) -> RxqAssign {
        self.rxq_assign
    }

    /// Deals every rx queue (those of `self.pmds` and those of `retiring`, PMDs about to end)
    /// out to `self.pmds` by `self.rxq_assign`, moving only what changes PMD, and publishes
    /// the new layout. Returns one line per queue that moved.
    pub(super) fn reassign_rxqs(&mut self, retiring: &[PmdHandle]) -> String {
        let owners: Vec<&PmdHandle> = self.pmds.iter().chain(retiring).collect();
        // (port, queue, cycles, index in `owners`) of every queue, in port and queue order.
        let mut queues = Vec::new();
        for (i, p) in owners.iter().enumerate() {
            let (qs, _) = p.refresh_load();
            queues.extend(qs.into_iter().map(|(port, q, c)| (port, q, c, i)));
        }
        queues.sort_by_key(|&(port, q, ..)| (port, q));
        let loads: Vec<u64> = queues.iter().map(|q| q.2).collect();
        let to = self.rxq_assign.assign(&loads, self.pmds.len());
        // Each PMD that loses queues hands them over (a retiring one loses them all).
        let mut moving: Vec<(usize, PolledRxq)> = Vec::new();
        for (i, p) in owners.iter().enumerate() {
            let going: Vec<(u32, usize)> = queues
                .iter()
                .zip(&to)
                .filter(|(q, t)| q.3 == i && **t != i)
                .map(|(q, _)| (q.0, q.1))
                .collect();
            if going.is_empty() {
                continue;
            }
            let (tx, rx) = channel();
            if p.cmd.send(PmdCmd::TakeRxqsOf(going, tx)).is_ok()
                && let Ok(qs) = rx.recv_timeout(Duration::from_secs(5))
            {
                for q in qs {
                    if let Some(k) = queues
                        .iter()
                        .position(|e| (e.0, e.1) == (q.port_no, q.queue_id))
                    {
                        moving.push((k, q));
                    }
                }
            }
        }
        moving.sort_by_key(|(k, _)| *k);
        let mut per_pmd: Vec<Vec<PolledRxq>> = self.pmds.iter().map(|_| Vec::new()).collect();
        let mut out = String::new();
        for (k, q) in moving {
            let (from, p) = (owners[queues[k].3], to[k]);
            let _ = writeln!(
                out,
                "port: {} queue-id: {} moved from core_id {} to core_id {}",
                self.port_name(q.port_no),
                q.queue_id,
                core_text(from.core_id),
                core_text(self.pmds[p].core_id)
            );
            per_pmd[p].push(q);
        }
        for (p, qs) in self.pmds.iter().zip(per_pmd) {
            if !qs.is_empty() {
                let _ = p.cmd.send(PmdCmd::AddRxqs(qs));
            }
        }
        for p in &self.pmds {
            p.refresh_load();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rxq_assign_algorithms() {
        let loads = [10, 50, 30, 40, 20];
        // roundrobin ignores load.
        assert_eq!(RxqAssign::RoundRobin.assign(&loads, 2), vec![0, 1, 0, 1, 0]);
        // cycles: by load 50(q1) 40(q3) 30(q2) 20(q4) 10(q0), dealt 0,1,1,0,0.
        assert_eq!(RxqAssign::Cycles.assign(&loads, 2), vec![0, 0, 1, 1, 0]);
        // group: q1->0 (50), q3->1 (40), q2->1 (70), q4->0 (70), q0->0 (tie, lower index).
        assert_eq!(RxqAssign::Group.assign(&loads, 2), vec![0, 0, 1, 1, 0]);
        let skewed = [100, 1, 1, 1, 1, 1];
        // group leaves the heavy queue alone; cycles deals the rest back and forth.
        assert_eq!(RxqAssign::Group.assign(&skewed, 2), vec![0, 1, 1, 1, 1, 1]);
        assert_eq!(RxqAssign::Cycles.assign(&skewed, 2), vec![0, 1, 1, 0, 0, 1]);
        // No history: equal loads keep port order.
        assert_eq!(RxqAssign::Cycles.assign(&[0; 4], 2), vec![0, 1, 1, 0]);
        assert_eq!(RxqAssign::Group.assign(&[0; 4], 2), vec![0, 1, 0, 1]);
        assert_eq!(RxqAssign::Cycles.assign(&[5, 6], 1), vec![0, 0]);
        assert!(RxqAssign::Cycles.assign(&[], 3).is_empty());
        for a in [RxqAssign::Cycles, RxqAssign::Group, RxqAssign::RoundRobin] {
            assert_eq!(RxqAssign::parse(a.name()), Ok(a));
        }
        assert!(
            RxqAssign::parse("cycle")
                .unwrap_err()
                .contains("expected cycles")
        );
    }
}
