//! The meter commands of `flowpath ofctl`, as `ovs-ofctl` names them and prints their
//! results: `ofctl/add-meter BRIDGE METER`, `ofctl/mod-meter`, `ofctl/del-meter(s) BRIDGE
//! [METER]`, `ofctl/dump-meters BRIDGE [METER]`, `ofctl/meter-stats BRIDGE [METER]` and
//! `ofctl/meter-features BRIDGE`. They go through the same [`Ofproto`] meter functions as
//! OpenFlow's meter mods; a refused mod is OVS's error name (`OFPMMFC_METER_EXISTS`).

use std::sync::{Arc, Mutex};

use datapath::dpif::Datapath;
use ofproto::meter::MeterConfig;
use ofproto::ofproto::Ofproto;
use ofproto::syntax::{
    MeterText, format_meter_config, format_meter_features, format_meter_stats, parse_meter,
};
use unixctl::Registry;

type MeterCommand = fn(&Ofproto, &mut Datapath, &[String]) -> Result<String, String>;

/// The meter of `a[1]` (every meter without one) for `a[0]`, which must be a bridge.
fn selected(of: &Ofproto, a: &[String], kind: MeterText) -> Result<MeterConfig, String> {
    if of
        .pipe
        .read()
        .map_err(|_| "pipeline lock poisoned")?
        .bridge(&a[0])
        .is_none()
    {
        return Err(format!("no bridge named {}", a[0]));
    }
    parse_meter(a.get(1).map_or("", String::as_str), kind)
}

/// Registers the meter commands.
pub fn register(reg: &Registry, of: &Arc<Ofproto>, dp: &Arc<Mutex<Datapath>>) {
    let r = |name: &str, usage: &str, min: usize, max: usize, f: MeterCommand| {
        let (of, dp) = (of.clone(), dp.clone());
        let _ = reg.register(name, usage, min, max, move |a| {
            let mut dp = crate::commands::lock_dp(&dp)?;
            f(&of, &mut dp, a)
        });
    };
    r("ofctl/add-meter", "BRIDGE METER", 2, 2, |of, dp, a| {
        let m = selected(of, a, MeterText::Mod)?;
        of.add_meter(dp, &a[0], &m).map_err(|e| e.to_string())?;
        Ok(String::new())
    });
    r("ofctl/mod-meter", "BRIDGE METER", 2, 2, |of, dp, a| {
        let m = selected(of, a, MeterText::Mod)?;
        of.modify_meter(dp, &a[0], &m).map_err(|e| e.to_string())?;
        Ok(String::new())
    });
    for name in ["ofctl/del-meter", "ofctl/del-meters"] {
        r(name, "BRIDGE [METER]", 1, 2, |of, dp, a| {
            let m = selected(of, a, MeterText::Select)?;
            of.del_meter(dp, &a[0], m.meter_id);
            Ok(String::new())
        });
    }
    r("ofctl/dump-meters", "BRIDGE [METER]", 1, 2, |of, _, a| {
        let m = selected(of, a, MeterText::Select)?;
        let v = of
            .meter_configs(&a[0], m.meter_id)
            .map_err(|e| e.to_string())?;
        Ok(v.iter()
            .map(format_meter_config)
            .collect::<Vec<_>>()
            .join("\n"))
    });
    r("ofctl/meter-stats", "BRIDGE [METER]", 1, 2, |of, dp, a| {
        let m = selected(of, a, MeterText::Select)?;
        let v = of
            .meter_stats(dp, &a[0], m.meter_id)
            .map_err(|e| e.to_string())?;
        Ok(v.iter()
            .map(format_meter_stats)
            .collect::<Vec<_>>()
            .join("\n"))
    });
    r("ofctl/meter-features", "BRIDGE", 1, 1, |of, _, a| {
        selected(of, a, MeterText::Select)?;
        Ok(format_meter_features())
    });
}
