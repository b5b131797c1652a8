//! Meter mods and meter requests against a bridge's [`MeterTable`], as OVS's `ofproto.c`
//! handles them: each OpenFlow meter gets a datapath meter (the lowest free datapath id, as
//! OVS's `id_pool`), which is set again when the meter is modified (its buckets full and its
//! counters from zero, as the userspace datapath's) and removed with it; the rules whose
//! actions use a deleted meter go with it, and megaflows are revalidated.
//!
//! Locking: the caller holds the datapath (`&mut Datapath`), which serializes meter changes;
//! the pipeline's lock is never held while the PMDs are asked to change or count a meter, as a
//! PMD may be waiting for that lock in an upcall.

use std::time::Instant;

use datapath::dpif::Datapath;

use super::Ofproto;
use crate::bridge::Bridge;
use crate::meter::{
    Meter, MeterConfig, MeterModError, MeterStats, OFPM13_ALL, check_id_and_bands, datapath_config,
    rule_meter,
};
use crate::syntax::OfAction;

impl Bridge {
    /// Whether every meter `actions` use exists (OVS's `ofproto_check_ofpacts()`).
    pub fn check_meters(&self, actions: &[OfAction]) -> Result<(), MeterModError> {
        match rule_meter(actions) {
            Some(id) if self.meters.get(id).is_none() => Err(MeterModError::InvalidMeter),
            _ => Ok(()),
        }
    }

    /// Removes the rules whose actions use meter `id`; returns how many.
    fn del_flows_of_meter(&mut self, id: u32) -> usize {
        let mut gone = Vec::new();
        for (t, table) in self.tables.iter().enumerate() {
            gone.extend(
                table
                    .iter()
                    .filter(|(_, _, _, r)| rule_meter(&r.actions) == Some(id))
                    .map(|(rid, ..)| (t, rid)),
            );
        }
        let removed: Vec<_> = gone
            .into_iter()
            .filter_map(|(t, rid)| self.remove_rule(t, rid).map(|(_, _, r)| r))
            .collect();
        crate::ofproto::flush_learned_rules(self, &removed);
        removed.len()
    }

    /// How many rules use meter `id`.
    fn n_flows_of_meter(&self, id: u32) -> u32 {
        self.tables
            .iter()
            .flat_map(|t| t.iter())
            .filter(|(_, _, _, r)| rule_meter(&r.actions) == Some(id))
            .count() as u32
    }
}

impl Ofproto {
    /// The checks of a meter mod before the table changes, then the datapath meter of
    /// `config`'s meter, if it exists.
    fn meter_mod_target(
        &self,
        bridge: &str,
        config: &MeterConfig,
    ) -> Result<Option<u32>, MeterModError> {
        check_id_and_bands(config)?;
        let p = self.read();
        let b = p.bridge(bridge).ok_or(MeterModError::InvalidMeter)?;
        Ok(b.meters.dp_id(config.meter_id))
    }

    /// `OFPMC13_ADD`: `OFPMMFC_METER_EXISTS` if the id is taken, else the datapath's checks.
    pub fn add_meter(
        &self,
        dp: &mut Datapath,
        bridge: &str,
        config: &MeterConfig,
    ) -> Result<(), MeterModError> {
        if self.meter_mod_target(bridge, config)?.is_some() {
            return Err(MeterModError::MeterExists);
        }
        let dp_id = dp.meter_free_id()?;
        dp.meter_set(dp_id, &datapath_config(config)?)?;
        let mut p = self.write();
        match p.bridge_mut(bridge) {
            Some(b) => b.meters.insert(Meter {
                config: config.clone(),
                dp_id,
                created: Instant::now(),
            }),
            // The bridge went meanwhile.
            None => {
                drop(p);
                dp.meter_del(dp_id);
                return Err(MeterModError::InvalidMeter);
            }
        }
        Ok(())
    }

    /// `OFPMC13_MODIFY`: `OFPMMFC_UNKNOWN_METER` if there is no such meter, else the
    /// datapath's checks; the datapath meter keeps its id.
    pub fn modify_meter(
        &self,
        dp: &mut Datapath,
        bridge: &str,
        config: &MeterConfig,
    ) -> Result<(), MeterModError> {
        let dp_id = self
            .meter_mod_target(bridge, config)?
            .ok_or(MeterModError::UnknownMeter)?;
        dp.meter_set(dp_id, &datapath_config(config)?)?;
        if let Some(b) = self.write().bridge_mut(bridge) {
            b.meters.update(config.meter_id, config.clone());
        }
        Ok(())
    }

    /// `OFPMC13_DELETE` of meter `id` ([`OFPM13_ALL`]: every meter; 0: none), with the rules
    /// that use it. Never fails: deleting what does not exist is no error. Returns how many
    /// rules went.
    pub fn del_meter(&self, dp: &mut Datapath, bridge: &str, id: u32) -> usize {
        // It deletes rules: serialized with every other change of the flow tables.
        let _serial = self.flow_mods();
        let mut p = self.write();
        let Some(b) = p.bridge_mut(bridge) else {
            return 0;
        };
        let ids = match id {
            0 => Vec::new(),
            OFPM13_ALL => b.meters.ids(),
            id => vec![id],
        };
        let mut n = 0;
        let mut gone = Vec::new();
        for id in ids {
            if let Some(m) = b.meters.remove(id) {
                n += b.del_flows_of_meter(id);
                gone.push(m.dp_id);
            }
        }
        drop(p);
        if !gone.is_empty() {
            self.changed();
        }
        for dp_id in gone {
            dp.meter_del(dp_id);
        }
        n
    }

    /// The configuration of meter `id` ([`OFPM13_ALL`]: of every meter, in OVS's order);
    /// `OFPMMFC_UNKNOWN_METER` for a meter that does not exist.
    pub fn meter_configs(&self, bridge: &str, id: u32) -> Result<Vec<MeterConfig>, MeterModError> {
        let p = self.read();
        let b = p.bridge(bridge).ok_or(MeterModError::UnknownMeter)?;
        if id == OFPM13_ALL {
            return Ok(b.meters.iter().map(|m| m.config.clone()).collect());
        }
        let m = b.meters.get(id).ok_or(MeterModError::UnknownMeter)?;
        Ok(vec![m.config.clone()])
    }

    /// The statistics of meter `id` ([`OFPM13_ALL`]: of every meter, in OVS's order): the
    /// datapath's counters, the rules that use it and its age.
    pub fn meter_stats(
        &self,
        dp: &Datapath,
        bridge: &str,
        id: u32,
    ) -> Result<Vec<MeterStats>, MeterModError> {
        // What the table says, then the datapath's counters without the pipeline's lock.
        let meters: Vec<(Meter, u32)> = {
            let p = self.read();
            let b = p.bridge(bridge).ok_or(MeterModError::UnknownMeter)?;
            let chosen: Vec<&Meter> = if id == OFPM13_ALL {
                b.meters.iter().collect()
            } else {
                vec![b.meters.get(id).ok_or(MeterModError::UnknownMeter)?]
            };
            chosen
                .into_iter()
                .map(|m| (m.clone(), b.n_flows_of_meter(m.config.meter_id)))
                .collect()
        };
        let now = Instant::now();
        Ok(meters
            .into_iter()
            .map(|(m, flow_count)| {
                let c = dp.meter_stats(m.dp_id).unwrap_or_default();
                let age = now.duration_since(m.created);
                let n_bands = m.config.bands.len();
                MeterStats {
                    meter_id: m.config.meter_id,
                    flow_count,
                    packet_in_count: c.packets,
                    byte_in_count: c.bytes,
                    duration_sec: age.as_secs() as u32,
                    // Milliseconds, as OVS keeps a meter's creation time.
                    duration_nsec: age.subsec_millis() * 1_000_000,
                    bands: (0..n_bands)
                        .map(|i| c.bands.get(i).copied().unwrap_or_default())
                        .collect(),
                }
            })
            .collect())
    }

    /// Whether the meters `actions` use exist in `bridge` (a flow naming another is refused,
    /// `OFPMMFC_INVALID_METER`).
    pub fn check_meters(&self, bridge: &str, actions: &[OfAction]) -> Result<(), MeterModError> {
        let p = self.read();
        match p.bridge(bridge) {
            Some(b) => b.check_meters(actions),
            None => Ok(()),
        }
    }

    /// The datapath meter of `bridge`'s OpenFlow meter `id`.
    pub fn meter_dp_id(&self, bridge: &str, id: u32) -> Option<u32> {
        self.read().bridge(bridge)?.meters.dp_id(id)
    }

    /// Whether `bridge`'s meter `id` admits one more packet of `len` bytes sent outside the
    /// PMDs (a packet-in of a controller action with `meter_id`, or of the `controller`
    /// meter): takes its tokens from the buckets the PMDs share and counts it in the meter's
    /// statistics. A meter the bridge lacks admits everything, as OVS lets such packet-ins
    /// through.
    pub fn meter_admits(&self, dp: &Datapath, bridge: &str, id: u32, len: usize) -> bool {
        self.meter_dp_id(bridge, id)
            .and_then(|n| dp.meter(n))
            .is_none_or(|m| m.admit(len))
    }
}
