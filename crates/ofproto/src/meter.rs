//! A bridge's meter table (OpenFlow 1.3's meters, as OVS's `ofproto.c` keeps them): each
//! OpenFlow meter's configuration, the datapath meter that runs it ([`datapath::meter`]) and
//! when it was made; the checks of a meter mod in OVS's order with OVS's errors, and the order
//! in which OVS lists meters.
//!
//! The userspace datapath has drop bands only: a DSCP remark band is refused
//! (`OFPMMFC_BAD_BAND`), as `ovs-vswitchd` 3.1 refuses it with its userspace datapath. A
//! meter's flows are the rules whose actions start with `meter:N`; deleting a meter deletes
//! them (`Ofproto::del_meter`), and a flow naming a meter the bridge lacks is refused
//! (`OFPMMFC_INVALID_METER`).

use std::collections::BTreeMap;
use std::time::Instant;

use crate::syntax::OfAction;

/// `OFPM13_MAX`: the last ordinary meter id.
pub const OFPM13_MAX: u32 = 0xffff_0000;
/// `OFPM13_SLOWPATH`: the meter of packets sent to the slow path.
pub const OFPM13_SLOWPATH: u32 = 0xffff_fffd;
/// `OFPM13_CONTROLLER`: the meter of packets sent to controllers.
pub const OFPM13_CONTROLLER: u32 = 0xffff_fffe;
/// `OFPM13_ALL`: every meter.
pub const OFPM13_ALL: u32 = 0xffff_ffff;

/// Meter flag: rates in kb/s.
pub const OFPMF13_KBPS: u16 = 1 << 0;
/// Meter flag: rates in packets/s.
pub const OFPMF13_PKTPS: u16 = 1 << 1;
/// Meter flag: bands have a burst size.
pub const OFPMF13_BURST: u16 = 1 << 2;
/// Meter flag: collect statistics.
pub const OFPMF13_STATS: u16 = 1 << 3;

/// Band type: drop packets over the rate.
pub const OFPMBT13_DROP: u16 = 1;
/// Band type: raise the drop precedence of the DSCP.
pub const OFPMBT13_DSCP_REMARK: u16 = 2;

/// The most bands of a meter (OVS's userspace datapath's, [`datapath::meter::MAX_BANDS`]).
pub const MAX_BANDS: usize = datapath::meter::MAX_BANDS;

/// One band of a meter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeterBand {
    /// [`OFPMBT13_DROP`] or [`OFPMBT13_DSCP_REMARK`].
    pub band_type: u16,
    /// The rate above which the band applies, in the meter's unit.
    pub rate: u32,
    /// The burst size, when the meter has [`OFPMF13_BURST`].
    pub burst_size: u32,
    /// For a DSCP remark band, how much to raise the precedence (0 otherwise).
    pub prec_level: u8,
}

/// One meter's configuration (`struct ofp13_meter_config`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterConfig {
    /// The meter.
    pub meter_id: u32,
    /// Its `OFPMF13_*` flags.
    pub flags: u16,
    /// Its bands.
    pub bands: Vec<MeterBand>,
}

/// One meter's statistics (`struct ofp13_meter_stats`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterStats {
    /// The meter.
    pub meter_id: u32,
    /// Flows that use it.
    pub flow_count: u32,
    /// Packets it saw.
    pub packet_in_count: u64,
    /// Bytes it saw.
    pub byte_in_count: u64,
    /// Seconds it has existed.
    pub duration_sec: u32,
    /// And nanoseconds beyond.
    pub duration_nsec: u32,
    /// For each band, the packets and bytes it applied to.
    pub bands: Vec<(u64, u64)>,
}

/// Why a meter mod fails: OVS's `OFPMMFC_*` error for it (displayed by its name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeterModError {
    /// `OFPMMFC_METER_EXISTS`: an add of a meter that exists.
    #[error("OFPMMFC_METER_EXISTS")]
    MeterExists,
    /// `OFPMMFC_INVALID_METER`: meter 0, or an id above `OFPM13_MAX` other than the slow path's
    /// and the controller's; also a flow naming a meter the bridge lacks.
    #[error("OFPMMFC_INVALID_METER")]
    InvalidMeter,
    /// `OFPMMFC_UNKNOWN_METER`: a modify of (or a request about) a meter that does not exist.
    #[error("OFPMMFC_UNKNOWN_METER")]
    UnknownMeter,
    /// `OFPMMFC_OUT_OF_BANDS`: more bands than the datapath has, or none.
    #[error("OFPMMFC_OUT_OF_BANDS")]
    OutOfBands,
    /// `OFPMMFC_BAD_BAND`: a band type the datapath cannot run (DSCP remark).
    #[error("OFPMMFC_BAD_BAND")]
    BadBand,
    /// `OFPMMFC_BAD_FLAGS`: no rate unit, both, or an unknown flag.
    #[error("OFPMMFC_BAD_FLAGS")]
    BadFlags,
    /// `OFPMMFC_BAD_RATE`: a band of rate 0.
    #[error("OFPMMFC_BAD_RATE")]
    BadRate,
    /// `OFPMMFC_OUT_OF_METERS`: no datapath meter left.
    #[error("OFPMMFC_OUT_OF_METERS")]
    OutOfMeters,
}

impl From<datapath::meter::MeterError> for MeterModError {
    fn from(e: datapath::meter::MeterError) -> Self {
        match e {
            datapath::meter::MeterError::OutOfMeters => MeterModError::OutOfMeters,
            datapath::meter::MeterError::BadBands => MeterModError::OutOfBands,
            datapath::meter::MeterError::BadRate => MeterModError::BadRate,
        }
    }
}

/// The checks of an add or modify before the table is looked at (OVS's
/// `handle_meter_mod()`): the id, then the number of bands.
pub fn check_id_and_bands(m: &MeterConfig) -> Result<(), MeterModError> {
    let id_ok = match m.meter_id {
        0 => false,
        OFPM13_SLOWPATH | OFPM13_CONTROLLER => true,
        id => id <= OFPM13_MAX,
    };
    if !id_ok {
        return Err(MeterModError::InvalidMeter);
    }
    if m.bands.len() > MAX_BANDS {
        return Err(MeterModError::OutOfBands);
    }
    Ok(())
}

/// The datapath meter for `m`, or the error the datapath's checks give it (OVS's
/// `dpif_meter_set()` and the userspace datapath's: rate unit, bands, rates, band types).
pub fn datapath_config(m: &MeterConfig) -> Result<datapath::meter::MeterConfig, MeterModError> {
    let unit = m.flags & (OFPMF13_KBPS | OFPMF13_PKTPS);
    if unit == 0 || unit == OFPMF13_KBPS | OFPMF13_PKTPS {
        return Err(MeterModError::BadFlags);
    }
    if m.bands.is_empty() {
        return Err(MeterModError::OutOfBands);
    }
    if m.bands.iter().any(|b| b.rate == 0) {
        return Err(MeterModError::BadRate);
    }
    if m.flags & !(OFPMF13_KBPS | OFPMF13_PKTPS | OFPMF13_BURST | OFPMF13_STATS) != 0 {
        return Err(MeterModError::BadFlags);
    }
    if m.bands.iter().any(|b| b.band_type != OFPMBT13_DROP) {
        return Err(MeterModError::BadBand);
    }
    Ok(datapath::meter::MeterConfig {
        pktps: unit == OFPMF13_PKTPS,
        bands: m
            .bands
            .iter()
            .map(|b| datapath::meter::BandConfig {
                rate: b.rate,
                burst: b.burst_size,
            })
            .collect(),
    })
}

/// A meter of the table.
#[derive(Clone, Debug)]
pub struct Meter {
    /// Its configuration as the controller gave it.
    pub config: MeterConfig,
    /// The datapath meter that runs it.
    pub dp_id: u32,
    /// When it was added (its statistics' duration).
    pub created: Instant,
}

/// A bridge's meters by OpenFlow id, with the order OVS lists them in.
#[derive(Debug, Default)]
pub struct MeterTable {
    meters: BTreeMap<u32, Meter>,
    order: HmapOrder,
}

impl MeterTable {
    /// Meter `id`.
    pub fn get(&self, id: u32) -> Option<&Meter> {
        self.meters.get(&id)
    }

    /// The datapath meter of OpenFlow meter `id` (what `meter:N` translates to).
    pub fn dp_id(&self, id: u32) -> Option<u32> {
        self.meters.get(&id).map(|m| m.dp_id)
    }

    /// Number of meters.
    pub fn len(&self) -> usize {
        self.meters.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.meters.is_empty()
    }

    /// Adds a meter (the caller checked that its id is free).
    pub fn insert(&mut self, m: Meter) {
        let id = m.config.meter_id;
        if self.meters.insert(id, m).is_none() {
            self.order.insert(id);
        }
    }

    /// Changes meter `id`'s configuration.
    pub fn update(&mut self, id: u32, config: MeterConfig) {
        if let Some(m) = self.meters.get_mut(&id) {
            m.config = config;
        }
    }

    /// Removes meter `id`.
    pub fn remove(&mut self, id: u32) -> Option<Meter> {
        let m = self.meters.remove(&id)?;
        self.order.remove(id);
        Some(m)
    }

    /// The meters, in the order `ovs-vswitchd` lists them (its hash map's).
    pub fn iter(&self) -> impl Iterator<Item = &Meter> {
        self.order.iter().filter_map(|id| self.meters.get(&id))
    }

    /// Every meter id, in listing order.
    pub fn ids(&self) -> Vec<u32> {
        self.order.iter().collect()
    }
}

/// The meter a rule's actions go through (`meter:N`, the first instruction), if any.
pub fn rule_meter(actions: &[OfAction]) -> Option<u32> {
    actions.iter().find_map(|a| match a {
        OfAction::Meter(m) => Some(*m),
        _ => None,
    })
}

/// The order in which OVS's `hmap` of meters iterates: buckets in order, each bucket's nodes
/// newest first, the buckets doubling (and their nodes re-dealt, bucket by bucket) once there
/// are more than twice as many nodes as buckets. Controllers and `ovs-ofctl` see meters listed
/// in this order, so it is kept to list them the same way.
#[derive(Debug, Default)]
struct HmapOrder {
    /// Each bucket's ids, head first; one bucket when empty.
    buckets: Vec<Vec<u32>>,
    n: usize,
}

impl HmapOrder {
    fn mask(&self) -> usize {
        self.buckets.len().max(1) - 1
    }

    fn insert(&mut self, id: u32) {
        if self.buckets.is_empty() {
            self.buckets.push(Vec::new());
        }
        let b = hash_int(id) as usize & self.mask();
        self.buckets[b].insert(0, id);
        self.n += 1;
        if self.n / 2 > self.mask() {
            let new_mask = calc_mask(self.n);
            if new_mask > self.mask() {
                let mut fresh = vec![Vec::new(); new_mask + 1];
                for id in self.buckets.iter().flatten() {
                    fresh[hash_int(*id) as usize & new_mask].insert(0, *id);
                }
                self.buckets = fresh;
            }
        }
    }

    fn remove(&mut self, id: u32) {
        for b in &mut self.buckets {
            if let Some(i) = b.iter().position(|&x| x == id) {
                b.remove(i);
                self.n -= 1;
                return;
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.buckets.iter().flatten().copied()
    }
}

/// The bucket mask for `n` nodes: half of `n` rounded up to a power of two less one, at least
/// 3 once there is more than one bucket.
fn calc_mask(n: usize) -> usize {
    let half = n / 2;
    let mask = if half == 0 {
        0
    } else {
        usize::MAX >> half.leading_zeros()
    };
    mask | ((mask & 1) << 1)
}

/// OVS's `hash_int(x, 0)`: Murmur3's mixing of the two words `x` and 0, and its finish over
/// 8 bytes.
fn hash_int(x: u32) -> u32 {
    fn add(h: u32, data: u32) -> u32 {
        let h = if data == 0 {
            h
        } else {
            h ^ data
                .wrapping_mul(0xcc9e_2d51)
                .rotate_left(15)
                .wrapping_mul(0x1b87_3593)
        };
        h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64)
    }
    let mut h = add(add(x, 0), 0) ^ 8;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(ids: &[u32]) -> MeterTable {
        let mut t = MeterTable::default();
        for &id in ids {
            t.insert(Meter {
                config: MeterConfig {
                    meter_id: id,
                    flags: OFPMF13_KBPS,
                    bands: vec![],
                },
                dp_id: 0,
                created: Instant::now(),
            });
        }
        t
    }

    #[test]
    fn meters_are_listed_as_ovs_vswitchd_lists_them() {
        // As ovs-vswitchd 3.1 answered dump-meters after adding these in this order.
        // (A table keeps its buckets when meters go, so the scripts' later dumps in
        // `testdata/openflow/scripts/meters.ovs` check the rest.)
        assert_eq!(table(&[1, 262_144, 9]).ids(), vec![262_144, 1, 9]);
        let mut t = table(&[1, 262_144, 9]);
        t.remove(1);
        assert_eq!(t.ids(), vec![262_144, 9]);
        let mut t = table(&[1, 2, 3, 4, 5, 100, 1000, 65_536, 6, 7, 8]);
        for id in [4, 100] {
            t.remove(id);
        }
        assert_eq!(t.ids(), vec![8, 65_536, 5, 1000, 7, 6, 1, 2, 3]);
        assert_eq!(calc_mask(2), 3);
        assert_eq!(calc_mask(7), 3);
        assert_eq!(calc_mask(8), 7);
    }

    #[test]
    fn checks_in_ovs_s_order() {
        let band = |t, rate| MeterBand {
            band_type: t,
            rate,
            burst_size: 0,
            prec_level: 0,
        };
        let m = |id, flags, bands: Vec<MeterBand>| MeterConfig {
            meter_id: id,
            flags,
            bands,
        };
        let e = |c: &MeterConfig| check_id_and_bands(c).and(datapath_config(c).map(drop));
        let drop1 = vec![band(OFPMBT13_DROP, 1)];
        assert_eq!(e(&m(0, 1, drop1.clone())), Err(MeterModError::InvalidMeter));
        assert_eq!(
            e(&m(OFPM13_ALL, 1, drop1.clone())),
            Err(MeterModError::InvalidMeter)
        );
        assert_eq!(e(&m(OFPM13_CONTROLLER, 1, drop1.clone())), Ok(()));
        assert_eq!(
            e(&m(1, 1, vec![band(1, 1); 9])),
            Err(MeterModError::OutOfBands)
        );
        assert_eq!(e(&m(1, 8, drop1.clone())), Err(MeterModError::BadFlags));
        assert_eq!(e(&m(1, 1, vec![])), Err(MeterModError::OutOfBands));
        assert_eq!(e(&m(1, 1, vec![band(1, 0)])), Err(MeterModError::BadRate));
        assert_eq!(
            e(&m(1, 1, vec![band(1, 5), band(OFPMBT13_DSCP_REMARK, 6)])),
            Err(MeterModError::BadBand)
        );
        let dp = datapath_config(&m(1, OFPMF13_PKTPS | OFPMF13_BURST, drop1)).unwrap();
        assert!(dp.pktps);
    }
}
