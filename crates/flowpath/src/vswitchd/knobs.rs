//! The datapath's knobs from Open_vSwitch `other_config` (`pmd-cpu-mask`,
//! `emc-insert-inv-prob`, `pmd-rxq-assign`, `max-idle`, `flow-limit`, `vlan-limit`...) and the
//! connection tracker's zone timeout policies (`Datapath.ct_zones` -> `CT_Zone` ->
//! `CT_Timeout_Policy`), applied to the running datapath when they change. Knobs OVS has and
//! flowpath does not use are logged once as ignored.

use std::collections::BTreeMap;

use datapath::dpif::Datapath;

use super::log;

/// Knobs OVS reads that mean nothing to flowpath (its upcalls run in the PMD threads and its
/// revalidator in the main thread).
const IGNORED: &[&str] = &["n-handler-threads", "n-revalidator-threads"];

/// Knobs flowpath reads but cannot change while it runs yet.
const AT_START_ONLY: &[&str] = &["pmd-cpu-mask", "pmd-rxq-assign", "max-idle", "flow-limit"];

/// What was applied last, to apply only changes.
#[derive(Debug, Default)]
pub(crate) struct Knobs {
    other_config: BTreeMap<String, String>,
    ct_zones: BTreeMap<u16, BTreeMap<String, i64>>,
}

impl Knobs {
    /// Applies the knobs of `other_config` that changed since the last call.
    pub fn apply(&mut self, dp: &mut Datapath, other_config: &BTreeMap<String, String>) {
        let changed = |k: &str| other_config.get(k) != self.other_config.get(k);
        if changed("emc-insert-inv-prob") {
            let v = other_config.get("emc-insert-inv-prob");
            // OVS's default, 1 in 100; 0 turns insertion off.
            match v.map_or(Ok(100), |v| v.parse::<u32>()) {
                Ok(n) => dp.set_emc_insert_inv_prob(n),
                Err(_) => log(
                    vlog::Level::Warn,
                    &format!(
                        "emc-insert-inv-prob: '{}' is not a number",
                        v.map_or("", |s| s)
                    ),
                ),
            }
        }
        if changed("vlan-limit") {
            let v = other_config.get("vlan-limit").map(String::as_str);
            // flowpath's flow key always holds two VLAN headers: OVS's default (0: as many
            // as the datapath parses) and 2 mean that.
            if !matches!(v, None | Some("0") | Some("2")) {
                log(
                    vlog::Level::Warn,
                    &format!(
                        "vlan-limit={}: flowpath always parses 2 VLAN headers",
                        v.unwrap_or("")
                    ),
                );
            }
        }
        for k in AT_START_ONLY {
            if changed(k) {
                log(
                    vlog::Level::Warn,
                    &format!("other_config:{k}: not applied to the running datapath"),
                );
            }
        }
        for k in IGNORED {
            if changed(k) && other_config.contains_key(*k) {
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
