//! Meter mods and meter statistics and configuration requests over OpenFlow
//! (`OFPT_METER_MOD`, `OFPMP_METER`, `OFPMP_METER_CONFIG`), applied to the bridge's meter
//! table through [`Ofproto`]'s meter functions, as `ovs-vswitchd`'s `handle_meter_mod()` and
//! `handle_meter_request()` answer them. A delete always succeeds (`ovn-controller` deletes
//! every meter when it connects). The datapath is locked first, as the revalidator locks it.

use datapath::dpif::Datapath;
use ofproto::meter::{MeterConfig, MeterModError};
use ofproto::ofproto::Ofproto;
use openflow::error::OfpErr;
use openflow::msgs::meter::{self, MeterCommand, MeterMod, MeterRequestKind};
use openflow::msgtype::{EncodeError, Message};

/// OVS's error for a refused meter mod.
pub(crate) fn ofp_err(e: MeterModError) -> OfpErr {
    match e {
        MeterModError::MeterExists => OfpErr::OfpmmfcMeterExists,
        MeterModError::InvalidMeter => OfpErr::OfpmmfcInvalidMeter,
        MeterModError::UnknownMeter => OfpErr::OfpmmfcUnknownMeter,
        MeterModError::OutOfBands => OfpErr::OfpmmfcOutOfBands,
        MeterModError::BadBand => OfpErr::OfpmmfcBadBand,
        MeterModError::BadFlags => OfpErr::OfpmmfcBadFlags,
        MeterModError::BadRate => OfpErr::OfpmmfcBadRate,
        MeterModError::OutOfMeters => OfpErr::OfpmmfcOutOfMeters,
    }
}

/// Applies a meter mod to `bridge`.
pub(crate) fn meter_mod(
    of: &Ofproto,
    dp: &mut Datapath,
    bridge: &str,
    mm: &MeterMod,
) -> Result<(), OfpErr> {
    let config = MeterConfig {
        meter_id: mm.meter_id,
        flags: mm.flags,
        bands: mm.bands.clone(),
    };
    match mm.command {
        MeterCommand::Add => of.add_meter(dp, bridge, &config).map_err(ofp_err),
        MeterCommand::Modify => of.modify_meter(dp, bridge, &config).map_err(ofp_err),
        MeterCommand::Delete => {
            of.del_meter(dp, bridge, mm.meter_id);
            Ok(())
        }
    }
}

/// Appends the replies to the meter statistics or configuration request `m` about meter
/// `id` of `bridge`.
pub(crate) fn meter_request(
    of: &Ofproto,
    dp: &Datapath,
    bridge: &str,
    m: &Message<'_>,
    kind: MeterRequestKind,
    id: u32,
    out: &mut Vec<u8>,
) -> Result<(), OfpErr> {
    let replies = match kind {
        MeterRequestKind::Stats => {
            let v = of.meter_stats(dp, bridge, id).map_err(ofp_err)?;
            meter::encode_meter_stats_reply(m, &v)
        }
        MeterRequestKind::Config => {
            let v = of.meter_configs(bridge, id).map_err(ofp_err)?;
            meter::encode_meter_config_reply(m, &v)
        }
        MeterRequestKind::Features => return Err(OfpErr::OfpbrcBadStat),
    };
    for r in replies.map_err(|_: EncodeError| OfpErr::OfpbrcBadLen)? {
        out.extend_from_slice(&r);
    }
    Ok(())
}
