//! Run-time datapath reconfiguration: the `Open_vSwitch` `other_config` knobs that OVS's
//! `dpif-netdev` takes while it forwards (`pmd-cpu-mask`, `pmd-rxq-assign`,
//! `emc-insert-inv-prob`, and `flow-limit` and `max-idle`, which OVS's upcall layer applies and
//! flowpath's PMDs do), each a [`Datapath`] method the control plane calls while the PMDs run.
//!
//! Nothing here touches the packet path: each change is a message the PMDs take between two
//! iterations, as they take ports. A core set change starts the new PMD threads before it
//! takes any rx queue from the old ones, moves only the queues whose thread changes, and lets
//! a PMD that goes away first finish what it holds (its misses waiting for the slow path and
//! what they output), so a port that stays loses no packet; its queues pause only for the
//! handover. What a change keeps and drops follows OVS 3.1's `reconfigure_pmd_threads()`: a
//! PMD that stays keeps its caches and megaflows, a new one starts with empty caches and
//! counters, and a PMD that goes away takes its megaflows and counters with it (so
//! `pmd-stats-show` lists the PMDs there are, and `dpif/show`'s hit and missed counts drop by
//! what the removed PMDs counted, as in OVS). Two things are kept where OVS has no
//! equivalent: the megaflows installed by hand (`dp-flows`, `dpctl/add-flow`: they never
//! expire and no slow path would install them again) are installed on the new PMDs, and what
//! a removed PMD counted for a meter stays in the meter's totals.

use std::collections::BTreeSet;

use super::pmd_thread::{PmdHandle, PmdSeed, open_txqs, spawn_pmd};
use super::{Datapath, RxqAssign};
use crate::flow_table::Megaflow;
use crate::pmd::{PmdCmd, PmdConfig};

/// Cores for `n` PMD threads when none are configured: core 1 onwards, leaving core 0 to the
/// main thread (OVS's habit on small machines), wrapping round; core 0 on a one-core machine.
pub fn default_pmd_cores(n: usize) -> Vec<Option<usize>> {
    let ncpu = std::thread::available_parallelism().map_or(1, |c| c.get());
    (0..n.max(1))
        .map(|i| Some(if ncpu > 1 { 1 + i % (ncpu - 1) } else { 0 }))
        .collect()
}

/// Parses a `pmd-cpu-mask` such as `0x6` into core ids.
pub fn parse_cpu_mask(s: &str) -> Result<Vec<usize>, String> {
    let t = s.trim();
    let hex = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let v = u128::from_str_radix(hex, 16)
        .map_err(|_| format!("bad pmd-cpu-mask '{s}': expected hex such as 0x2"))?;
    if v == 0 {
        return Err(format!("bad pmd-cpu-mask '{s}': no core selected"));
    }
    Ok((0..128).filter(|b| v & (1u128 << b) != 0).collect())
}

impl Datapath {
    /// The cores the PMD threads run on, in the order they were given (`None`: unpinned).
    pub fn pmd_cores(&self) -> Vec<Option<usize>> {
        self.pmds.iter().map(|p| p.core_id).collect()
    }

    /// The settings a PMD runs with: the knobs as last set (its `core_id` is `None`).
    pub fn pmd_config(&self) -> PmdConfig {
        self.pmd_config
    }

    /// `pmd-cpu-mask` changed: runs one PMD thread per entry of `cores` (`None` entries are
    /// unpinned threads), as OVS's `reconfigure_pmd_threads()`. A PMD on a core that is still
    /// wanted keeps running untouched (an unpinned one stays for each `None`, in order); PMDs
    /// on the new cores start, with empty caches and counters, the megaflows installed by
    /// hand and every meter; then the rx queues are dealt out again by the `pmd-rxq-assign`
    /// in force, moving only those whose thread changes; then the PMDs of cores no longer
    /// wanted finish what they hold and end, with their megaflows and counters (see the
    /// module documentation for what is kept). Ports that stay lose no packet: their queues
    /// pause for the handover only.
    ///
    /// The same set in the same order changes nothing. An empty set, or a core given twice,
    /// is refused and changes nothing; so does a thread that cannot start. Readers of
    /// [`Datapath::upcall_queues`] should ask again afterwards: a set larger than ever before
    /// adds a ring.
    pub fn set_pmd_cores(&mut self, cores: Vec<Option<usize>>) -> Result<(), String> {
        if cores.is_empty() {
            return Err("no PMD core given".into());
        }
        let mut seen = BTreeSet::new();
        if let Some(c) = cores.iter().flatten().find(|c| !seen.insert(**c)) {
            return Err(format!("core {c} given twice"));
        }
        // Which running PMD each wanted core keeps, if any.
        let mut kept = vec![false; self.pmds.len()];
        let plan: Vec<Option<usize>> = cores
            .iter()
            .map(|c| {
                let i = (0..self.pmds.len()).find(|&i| !kept[i] && self.pmds[i].core_id == *c)?;
                kept[i] = true;
                Some(i)
            })
            .collect();
        if plan.iter().copied().eq((0..self.pmds.len()).map(Some)) {
            return Ok(());
        }
        let mut started = Vec::new();
        if plan.iter().any(Option::is_none) {
            let flows = self.static_flows();
            for (c, p) in cores.iter().zip(&plan) {
                if p.is_some() {
                    continue;
                }
                match self.start_pmd(*c, &flows) {
                    Ok(h) => started.push(h),
                    Err(e) => {
                        for h in started {
                            self.put_back_ring(h);
                        }
                        return Err(e);
                    }
                }
            }
        }
        let mut old: Vec<Option<PmdHandle>> = std::mem::take(&mut self.pmds)
            .into_iter()
            .map(Some)
            .collect();
        let mut started = started.into_iter();
        self.pmds = plan
            .iter()
            .filter_map(|p| match p {
                Some(i) => old[*i].take(),
                None => started.next(),
            })
            .collect();
        let retiring: Vec<PmdHandle> = old.into_iter().flatten().collect();
        self.reassign_rxqs(&retiring);
        for h in retiring {
            self.put_back_ring(h);
        }
        Ok(())
    }

    /// `pmd-rxq-assign` changed: from now on rx queues are dealt out by `assign`, and they are
    /// dealt out again at once (as OVS reconfigures on a change), moving only those whose PMD
    /// changes. Returns one line per queue that moved, as `pmd-rxq-rebalance`; nothing when
    /// `assign` is the one in force.
    pub fn set_rxq_assign(&mut self, assign: RxqAssign) -> String {
        if assign == self.rxq_assign {
            return String::new();
        }
        self.rxq_assign = assign;
        self.reassign_rxqs(&[])
    }

    /// `pmd-maxsleep`: the longest, in microseconds, a PMD thread sleeps between polls while
    /// its queues are nearly idle (clamped to 10 000, as OVS's); 0 spins. Every PMD, and those
    /// that start later, reads it after its next poll. Returns the value in force.
    pub fn set_pmd_max_sleep(&mut self, us: u64) -> u64 {
        let us = us.min(super::pmd_thread::MAX_SLEEP_US);
        self.sleep
            .max_sleep_us
            .store(us, std::sync::atomic::Ordering::Relaxed);
        us
    }

    /// `pmd-idle-wait` (on by default): whether a PMD whose rx queues can all be waited on
    /// (see [`crate::port::RxQueue::wait_fd`]) blocks on them once idle, rather than spinning
    /// its core. Every PMD, and those that start later, reads it after its next poll.
    pub fn set_pmd_idle_wait(&mut self, on: bool) {
        self.sleep
            .idle_wait
            .store(on, std::sync::atomic::Ordering::Relaxed);
        // A waiting PMD sees the change at once.
        for p in &self.pmds {
            p.cmd.wake();
        }
    }

    /// Sets `emc-insert-inv-prob` on every PMD (0 stops EMC insertions), and for PMDs that
    /// start later.
    pub fn set_emc_insert_inv_prob(&mut self, n: u32) {
        self.pmd_config.emc_insert_inv_prob = n;
        for p in &self.pmds {
            let _ = p.cmd.send(PmdCmd::SetEmcInsertInvProb(n));
        }
    }

    /// `flow-limit`: the most megaflows each PMD holds. Upcalls past it still process their
    /// packet but install nothing. Lowered below what a PMD holds, its megaflows go sooner,
    /// as OVS's revalidators do it: once a second those idle for 100 ms, and all of them
    /// while it holds more than twice the limit (megaflows installed by hand stay). Every PMD
    /// has it when this returns.
    pub fn set_flow_limit(&mut self, n: usize) {
        self.pmd_config.flow_limit = n;
        self.push_pmd_config();
    }

    /// The `flow-limit` every PMD has now.
    pub fn flow_limit(&self) -> usize {
        self.pmd_config.flow_limit
    }

    /// `max-idle`, in milliseconds: megaflows the slow path installed expire after this long
    /// without a packet (checked once a second; 0 keeps them). Every PMD has it when this
    /// returns.
    pub fn set_max_idle(&mut self, ms: u64) {
        self.pmd_config.max_idle_ms = ms;
        self.push_pmd_config();
    }

    /// The share of a PMD's time the slow path may take while cached packets flow (see
    /// [`crate::pmd::DEFAULT_UPCALL_SHARE_PCT`]; 100 or more lifts the budget). Every PMD has
    /// it when this returns.
    pub fn set_upcall_share_pct(&mut self, pct: u32) {
        self.pmd_config.upcall_share_pct = pct;
        self.push_pmd_config();
    }

    /// Sends the current settings to every PMD and waits until each has them.
    fn push_pmd_config(&mut self) {
        for p in &self.pmds {
            let _ = p.cmd.send(PmdCmd::SetConfig(self.pmd_config));
        }
        let _ = self.ask(PmdCmd::NFlows);
    }

    /// The megaflows installed by hand (they never expire), as the first PMD holds them:
    /// every PMD has the same.
    fn static_flows(&self) -> Vec<Megaflow> {
        let Some(p) = self.pmds.first() else {
            return Vec::new();
        };
        let (tx, rx) = std::sync::mpsc::channel();
        if p.cmd.send(PmdCmd::Dump(tx)).is_err() {
            return Vec::new();
        }
        let dump = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .unwrap_or_default();
        dump.into_iter()
            .filter(|d| !d.flow.expires)
            .map(|d| Megaflow {
                stats: Default::default(),
                ..d.flow
            })
            .collect()
    }

    /// Starts a PMD thread on `core` with the current settings, `flows`, every meter, a tx
    /// queue on every port and no rx queue, writing its upcalls into a spare ring if there
    /// is one.
    fn start_pmd(&mut self, core: Option<usize>, flows: &[Megaflow]) -> Result<PmdHandle, String> {
        let seed = PmdSeed {
            config: self.pmd_config,
            upcall: self.upcall.as_ref(),
            conntrack: &self.conntrack,
            frag: &self.frag,
            flows,
            meters: &self.meters,
            bonds: &self.bonds,
        };
        let mut pmd = seed.make(core)?;
        open_txqs(&mut pmd, &mut self.ports);
        let h = spawn_pmd(
            pmd,
            self.stop.clone(),
            self.sleep.clone(),
            self.spare_upcall_rings.pop(),
        )?;
        if !self
            .upcall_rings
            .iter()
            .any(|q| std::sync::Arc::ptr_eq(q, &h.upcalls))
        {
            self.upcall_rings.push(h.upcalls.clone());
        }
        Ok(h)
    }

    /// Ends PMD `h` (it retires first) and keeps its upcall ring for the next PMD to start.
    fn put_back_ring(&mut self, h: PmdHandle) {
        if let Some(r) = h.retire() {
            self.spare_upcall_rings.push(r);
        }
    }
}
