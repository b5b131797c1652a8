//! The datapath's knobs from Open_vSwitch `other_config` (`pmd-cpu-mask`,
//! `emc-insert-inv-prob`, `pmd-rxq-assign`, `max-idle`, `flow-limit`, `vlan-limit`,
//! `pmd-maxsleep`...) and flowpath's `pmd-idle-wait`, and the
//! connection tracker's zone timeout policies (`Datapath.ct_zones` -> `CT_Zone` ->
//! `CT_Timeout_Policy`), applied to the running datapath when they change, and flowpath's own
//! `metrics-listen` (the Prometheus endpoint's `IP:PORT`), and DPDK's `dpdk-*` settings. Knobs OVS has and flowpath does not
//! use are logged once as ignored.

use std::collections::BTreeMap;

use datapath::dpif::{Datapath, RxqAssign, default_pmd_cores, parse_cpu_mask};

use super::log;
use crate::metrics::Metrics;

/// Knobs OVS reads that mean nothing to flowpath (its upcalls run in the PMD threads and its
/// revalidator in the main thread).
const IGNORED: &[&str] = &["n-handler-threads", "n-revalidator-threads"];

/// Whether idle PMDs block on their non-PMD ports (flowpath's own knob; `[datapath]
/// pmd_idle_wait` in a configuration file).
pub(crate) const PMD_IDLE_WAIT: &str = "pmd-idle-wait";

/// The Prometheus endpoint's address (flowpath's own knob; `[metrics] listen` in a
/// configuration file).
pub(crate) const METRICS_LISTEN: &str = "metrics-listen";
const VLAN_LIMIT: &str = "vlan-limit";

/// What was applied last, to apply only changes.
#[derive(Debug, Default)]
pub(crate) struct Knobs {
    other_config: BTreeMap<String, String>,
    ct_zones: BTreeMap<u16, BTreeMap<String, i64>>,
    /// `metrics-listen` as last applied (`None` before the first time).
    metrics_listen: Option<Option<String>>,
    /// `vlan-limit` as last applied (`None` before the first time).
    vlan_limit: Option<Option<String>>,
    /// Whether `dpdk-init` was acted on (DPDK starts once; changing it needs a restart, as
    /// in OVS).
    dpdk_tried: bool,
}

impl Knobs {
    /// Starts DPDK the first time `other_config:dpdk-init` is `true` or `try`, before the
    /// ports are opened; a failure is logged as an error naming its cause, and `dpdk` ports
    /// then fail one by one.
    pub fn apply_dpdk(&mut self, other_config: &BTreeMap<String, String>) {
        let s = crate::dpdk::DpdkSettings::from_keys(|k| other_config.get(k).cloned());
        if self.dpdk_tried || !s.wanted() {
            return;
        }
        self.dpdk_tried = true;
        if let Err(e) = crate::dpdk::start(&s) {
            log(vlog::Level::Err, &format!("{e:#}"));
        }
    }

    /// Moves the metrics endpoint where `other_config:metrics-listen` says (nowhere without
    /// it) when that changed; a bad address or one that cannot be listened on is logged and
    /// leaves the endpoint off.
    pub fn apply_metrics(&mut self, metrics: &Metrics, other_config: &BTreeMap<String, String>) {
        let v = other_config.get(METRICS_LISTEN).cloned();
        if self.metrics_listen.as_ref() == Some(&v) {
            return;
        }
        let addr = match v.as_deref().map(crate::metrics::parse_listen).transpose() {
            Ok(a) => a,
            Err(e) => {
                log(
                    vlog::Level::Warn,
                    &format!("other_config:{METRICS_LISTEN}: {e}; the metrics endpoint is off"),
                );
                None
            }
        };
        // Failures are logged by the endpoint.
        let _ = metrics.set_listen(addr);
        self.metrics_listen = Some(v);
    }

    /// Sets how many VLAN headers the datapath parses from `other_config:vlan-limit` the
    /// first time and when it changed: OVS's default 1 without it, 0 for as many as the key
    /// holds (2); a value that is no integer is logged and taken as 1 (OVS's smap_get_int()
    /// takes the default).
    fn apply_vlan_limit(&mut self, other_config: &BTreeMap<String, String>) {
        let v = other_config.get(VLAN_LIMIT).cloned();
        if self.vlan_limit.as_ref() == Some(&v) {
            return;
        }
        let limit = match v.as_deref().map(str::parse::<i64>) {
            None => 1,
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                let s = v.as_deref().unwrap_or_default();
                log(
                    vlog::Level::Warn,
                    &format!("other_config:{VLAN_LIMIT}={s}: expected an integer; using 1"),
                );
                1
            }
        };
        flow::vlan_limit::set_vlan_limit(limit);
        self.vlan_limit = Some(v);
    }

    /// Applies the knobs of `other_config` that changed since the last call (a knob removed
    /// goes back to OVS's default); a bad value is logged and leaves the knob as it was.
    pub fn apply(&mut self, dp: &mut Datapath, other_config: &BTreeMap<String, String>) {
        self.apply_vlan_limit(other_config);
        let old = std::mem::take(&mut self.other_config);
        for (key, default) in [
            ("pmd-cpu-mask", None),
            ("pmd-rxq-assign", Some("cycles")),
            ("emc-insert-inv-prob", Some("100")),
            ("flow-limit", Some("200000")),
            ("max-idle", Some("10000")),
            ("pmd-maxsleep", Some("0")),
            (PMD_IDLE_WAIT, Some("true")),
            ("bundle-idle-timeout", Some("0")),
        ] {
            let v = other_config.get(key).map(String::as_str);
            if v == old.get(key).map(String::as_str) {
                continue;
            }
            if let Err(e) = apply_knob(dp, key, v.or(default)) {
                log(
                    vlog::Level::Warn,
                    &format!("other_config:{key}={}: {e}", v.unwrap_or("")),
                );
            }
        }
        for k in IGNORED {
            if other_config.contains_key(*k) && other_config.get(*k) != old.get(*k) {
                log(
                    vlog::Level::Info,
                    &format!(
                        "other_config:{k}: ignored (flowpath's upcalls run in its PMD threads)"
                    ),
                );
            }
        }
        self.other_config = other_config.clone();
    }

    /// Sets each zone's timeout policy and drops the policies of zones that lost theirs. OVS's
    /// classes that flowpath's tracker does not have (`tcp_syn_sent2`, `tcp_close_wait`,
    /// `tcp_last_ack`, `tcp_retransmit`, `tcp_unack`) are logged and left out.
    pub fn apply_ct_zones(
        &mut self,
        ct: &conntrack::Conntrack,
        zones: &BTreeMap<u16, BTreeMap<String, i64>>,
    ) {
        if *zones == self.ct_zones {
            return;
        }
        for zone in self.ct_zones.keys() {
            if !zones.contains_key(zone) {
                ct.del_timeouts(*zone);
            }
        }
        for (zone, timeouts) in zones {
            if self.ct_zones.get(zone) == Some(timeouts) {
                continue;
            }
            let mut values = Vec::new();
            for (class, secs) in timeouts {
                match (
                    conntrack::TimeoutClass::from_name(class),
                    u32::try_from(*secs),
                ) {
                    (Some(c), Ok(s)) => values.push((c, s)),
                    _ => log(
                        vlog::Level::Warn,
                        &format!("ct zone {zone}: timeout {class}={secs} is not supported"),
                    ),
                }
            }
            ct.del_timeouts(*zone);
            ct.set_timeouts(Some(*zone), &values);
        }
        self.ct_zones = zones.clone();
    }
}

/// Sets one knob to `value` (`None`: the knob's default where it has no single value).
fn apply_knob(dp: &mut Datapath, key: &str, value: Option<&str>) -> Result<(), String> {
    let number = |v: Option<&str>| -> Result<u64, String> {
        v.unwrap_or("")
            .parse::<u64>()
            .map_err(|_| "not a number".to_owned())
    };
    match key {
        // Seconds; 0 is OVS's default of 10.
        "bundle-idle-timeout" => {
            crate::ofserver::set_bundle_idle_timeout(number(value)?);
            Ok(())
        }
        "pmd-cpu-mask" => {
            let cores = match value {
                Some(m) => parse_cpu_mask(m)?.into_iter().map(Some).collect(),
                // One PMD, as OVS's single-NUMA default.
                None => default_pmd_cores(1),
            };
            dp.set_pmd_cores(cores)
        }
        "pmd-rxq-assign" => {
            let moved = dp.set_rxq_assign(RxqAssign::parse(value.unwrap_or("cycles"))?);
            if !moved.is_empty() {
                log(vlog::Level::Info, moved.trim_end());
            }
            Ok(())
        }
        "emc-insert-inv-prob" => {
            let n = u32::try_from(number(value)?).map_err(|_| "out of range".to_owned())?;
            dp.set_emc_insert_inv_prob(n);
            Ok(())
        }
        "flow-limit" => {
            dp.set_flow_limit(number(value)? as usize);
            Ok(())
        }
        "pmd-maxsleep" => {
            let us = dp.set_pmd_max_sleep(number(value)?);
            log(
                vlog::Level::Info,
                &format!("PMD max sleep request is {us} usecs."),
            );
            let state = if us > 0 { "enabled" } else { "disabled" };
            log(
                vlog::Level::Info,
                &format!("PMD load based sleeps are {state}."),
            );
            Ok(())
        }
        PMD_IDLE_WAIT => {
            let on = match value {
                Some("true") => true,
                Some("false") => false,
                _ => return Err("expected true or false".to_owned()),
            };
            dp.set_pmd_idle_wait(on);
            let state = if on { "wait on" } else { "busy-poll" };
            log(
                vlog::Level::Info,
                &format!("PMD threads {state} idle queues of non-PMD port types."),
            );
            Ok(())
        }
        "max-idle" => {
            dp.set_max_idle(number(value)?);
            Ok(())
        }
        _ => Ok(()),
    }
}
