//! A PMD's megaflows: install, modify, delete, flush and dump (the `PmdCmd` flow commands
//! and the upcall's install), as OVS's `dp_netdev_flow_add` and `flow_del`, and the ufid that
//! names a megaflow.
//!
//! A megaflow lives in the PMD's flow table and in its input port's classifier (dpcls); the
//! port's fast paths (decap list, simple match, linear match: [`super::tiers`]) list it too
//! when it qualifies, and every change here keeps them in step. Slow path only: these
//! functions may allocate.

use flow::{FlowKey, Mask, Match};

use super::tiers::{DecapFlow, MAX_DECAP_FLOWS, MAX_LINEAR_FLOWS, SimpleFlow};
use crate::flow_table::{FlowRef, FlowStats, Megaflow};
use crate::tsc;

use super::Pmd;

/// One megaflow as a dump shows it.
#[derive(Clone, Debug)]
pub struct FlowDump {
    /// A copy of the megaflow: match, actions, counters.
    pub flow: Megaflow,
    /// Seconds since the last hit, `None` for never.
    pub used_secs: Option<f64>,
}

impl FlowDump {
    /// A flow with its age as of TSC value `now`.
    pub(super) fn of(flow: Megaflow, now: u64) -> FlowDump {
        let used = flow.stats.used_tsc;
        let used_secs = (used != 0).then(|| now.saturating_sub(used) as f64 / tsc::hz() as f64);
        FlowDump { flow, used_secs }
    }
}

impl Pmd {
    /// Installs a megaflow. Its match must be exact on in_port (as OVS's userspace datapath
    /// requires) and new.
    pub fn add_flow(&mut self, f: Megaflow) -> Result<FlowRef, String> {
        self.try_add_flow(f).map_err(|(e, _)| e)
    }

    /// [`Self::add_flow`], handing the flow back when it cannot be installed.
    pub(super) fn try_add_flow(
        &mut self,
        mut f: Megaflow,
    ) -> Result<FlowRef, (String, Box<Megaflow>)> {
        if f.mask().in_port() != u32::MAX {
            return Err(("in_port must be matched exactly".into(), Box::new(f)));
        }
        if self.flows.len() >= self.config.flow_limit {
            return Err((
                format!("flow limit {} reached", self.config.flow_limit),
                Box::new(f),
            ));
        }
        let port = f.m.key().in_port();
        let m = f.m.clone();
        f.installed_tsc = tsc::now();
        let r = self.flows.insert(f);
        if self.cls.get_or_create(port).insert(&m, r).is_err() {
            let f = self
                .flows
                .remove(r)
                .expect("the flow was inserted just above");
            return Err(("a flow with this match already exists".into(), Box::new(f)));
        }
        if crate::ct::mask_has_tuple(m.mask()) {
            self.ct_tuple_flows += 1;
        }
        self.track_fast_paths(r);
        Ok(r)
    }

    /// Enters flow `r` in its port's decap fast path if its only action is `tnl_pop`, or in
    /// its simple match if it qualifies ([`SimpleFlow`]), and in its linear match
    /// ([`LinearMatches`](super::tiers::LinearMatches)), when it fits.
    pub(super) fn track_fast_paths(&mut self, r: FlowRef) {
        let Some(f) = self.flows.get(r) else {
            return;
        };
        let Some(c) = self.cls.port_mut(f.m.key().in_port()) else {
            return;
        };
        c.linear.push(r, &f.m);
        if let Some(d) = DecapFlow::new(r, &f.m, &f.actions) {
            if c.decap.len() < MAX_DECAP_FLOWS {
                c.decap.push(d);
            }
        } else if let Some(d) = SimpleFlow::new(r, &f.m, &f.actions)
            && c.simple.len() < MAX_DECAP_FLOWS
        {
            c.simple.push(d);
        }
    }

    /// Takes flow `r` (input port `port`) out of the decap fast path, the simple match and
    /// the linear match.
    pub(super) fn untrack_fast_paths(&mut self, r: FlowRef, port: u32) {
        if let Some(c) = self.cls.port_mut(port) {
            c.decap.retain(|d| d.flow != r);
            c.simple.retain(|d| d.flow != r);
            c.linear.remove(r);
        }
    }

    /// Finds the megaflow with exactly this match.
    pub(super) fn find(&mut self, m: &Match) -> Option<FlowRef> {
        let port = m.key().in_port();
        let r = self.cls.get_mut(port)?.lookup(m.key())?;
        let f = self.flows.get(r)?;
        (f.m == *m).then_some(r)
    }

    /// Removes the megaflow with exactly this match.
    pub fn del_flow(&mut self, m: &Match) -> Option<Megaflow> {
        let r = self.find(m)?;
        self.remove_ref(r)
    }

    pub(super) fn remove_ref(&mut self, r: FlowRef) -> Option<Megaflow> {
        let f = self.flows.remove(r)?;
        let port = f.m.key().in_port();
        if crate::ct::mask_has_tuple(f.mask()) {
            self.ct_tuple_flows -= 1;
        }
        self.untrack_fast_paths(r, port);
        if let Some(c) = self.cls.get_mut(port) {
            c.remove(&f.m);
        }
        self.refill_linear(port);
        // EMC entries naming `r` are dead by generation and are cleared on lookup.
        Some(f)
    }

    /// When `port` is down to as few megaflows as the linear match takes but it lacks some
    /// (they came while it was full, or did not fit with one since removed), lists them again,
    /// from the port's classifier.
    pub(super) fn refill_linear(&mut self, port: u32) {
        let Some(c) = self.cls.port_mut(port) else {
            return;
        };
        let n = c.dpcls.len();
        if n == 0 || n > MAX_LINEAR_FLOWS || c.linear.len() == n {
            return;
        }
        c.linear.clear();
        for r in c.dpcls.flows() {
            if let Some(f) = self.flows.get(r) {
                c.linear.push(r, &f.m);
            }
        }
    }

    /// Replaces a megaflow's actions.
    pub fn mod_flow(&mut self, new: Megaflow, clear_stats: bool) -> Result<(), String> {
        let r = self.find(&new.m).ok_or("no flow with this match")?;
        let f = self.flows.get_mut(r).ok_or("no flow with this match")?;
        f.actions = new.actions;
        f.odp_actions = new.odp_actions;
        if clear_stats {
            f.stats = FlowStats::default();
        }
        // The new actions may start or stop being a lone tnl_pop (or pop to another port).
        self.untrack_fast_paths(r, new.m.key().in_port());
        self.track_fast_paths(r);
        Ok(())
    }

    /// Removes every megaflow.
    pub fn del_flows(&mut self) -> usize {
        let refs: Vec<FlowRef> = self.flows.iter().map(|(r, _)| r).collect();
        let n = refs.len();
        for r in refs {
            self.remove_ref(r);
        }
        self.emc.clear();
        n
    }

    /// All megaflows, with seconds since last use.
    pub fn dump(&self) -> Vec<FlowDump> {
        let now = tsc::now();
        self.flows
            .iter()
            .map(|(_, f)| FlowDump::of(f.clone(), now))
            .collect()
    }
}

/// A stable 128-bit id for a megaflow, from its masked key and mask (two CRC32C lanes per half;
/// unique enough to name flows in dumps, not a security property).
pub fn ufid_of(key: &FlowKey, mask: &Mask) -> u128 {
    let mut h = [0u32; 4];
    for (lane, basis) in h
        .iter_mut()
        .zip([0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344])
    {
        *lane = key.hash_masked(mask, basis) ^ mask.hash(basis.rotate_left(7));
    }
    (u128::from(h[0]) << 96)
        | (u128::from(h[1]) << 64)
        | (u128::from(h[2]) << 32)
        | u128::from(h[3])
}
