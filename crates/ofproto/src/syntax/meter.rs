//! Meters in `ovs-ofctl`'s syntax (ovs-ofctl(8) `add-meter`, OVS's
//! `parse_ofp_meter_mod_str()`): `meter=ID,FLAG...,bands=type=drop,rate=R[,burst_size=B]...`,
//! with its error texts; and meter configurations, statistics and features printed as
//! `ovs-ofctl dump-meters`, `meter-stats` and `meter-features` print them.

use std::fmt::Write;

use crate::meter::{
    MeterBand, MeterConfig, MeterStats, OFPM13_ALL, OFPM13_CONTROLLER, OFPM13_MAX, OFPM13_SLOWPATH,
    OFPMBT13_DROP, OFPMBT13_DSCP_REMARK, OFPMF13_BURST, OFPMF13_KBPS, OFPMF13_PKTPS, OFPMF13_STATS,
};

/// What a meter text is for: which parts it must or may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeterText {
    /// `add-meter` and `mod-meter`: the meter, its flags and bands.
    Mod,
    /// `del-meter`, `dump-meters`, `meter-stats`: the meter only.
    Select,
}

/// Splits off tokens as C's `strtok_r` does: skips delimiters, takes up to the next one and
/// consumes it.
struct Tokens<'a> {
    s: &'a str,
}

impl<'a> Tokens<'a> {
    fn next(&mut self, delims: &str) -> Option<&'a str> {
        let s = self.s.trim_start_matches(|c| delims.contains(c));
        if s.is_empty() {
            self.s = s;
            return None;
        }
        let end = s.find(|c| delims.contains(c)).unwrap_or(s.len());
        let tok = &s[..end];
        self.s = s.get(end + 1..).unwrap_or("");
        Some(tok)
    }
}

const NAME_DELIMS: &str = "=, \t\r\n";
const VALUE_DELIMS: &str = ", \t\r\n";

fn u32_value(v: &str) -> Result<u32, String> {
    let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => v.parse(),
    };
    n.map_err(|_| format!("invalid numeric format {v}"))
}

/// Parses a meter as `ovs-ofctl` does, with its errors. A `Select` text may be empty: every
/// meter ([`OFPM13_ALL`]).
pub fn parse_meter(text: &str, kind: MeterText) -> Result<MeterConfig, String> {
    let mut m = MeterConfig {
        meter_id: 0,
        flags: 0,
        bands: Vec::new(),
    };
    if kind == MeterText::Select && text.trim().is_empty() {
        m.meter_id = OFPM13_ALL;
        return Ok(m);
    }
    let (head, band_str) = if kind == MeterText::Mod {
        let at = text.find("band").ok_or("must specify bands")?;
        let rest = &text[at + 1..];
        let eq = rest.find('=').ok_or("must specify bands")?;
        (&text[..at], Some(&rest[eq + 1..]))
    } else {
        (text, None)
    };
    let flags = kind == MeterText::Mod;
    let mut t = Tokens { s: head };
    while let Some(name) = t.next(NAME_DELIMS) {
        let flag = match name {
            "kbps" => OFPMF13_KBPS,
            "pktps" => OFPMF13_PKTPS,
            "burst" => OFPMF13_BURST,
            "stats" => OFPMF13_STATS,
            _ => 0,
        };
        if flags && flag != 0 {
            m.flags |= flag;
            continue;
        }
        let value = t
            .next(VALUE_DELIMS)
            .ok_or_else(|| format!("field {name} missing value"))?;
        if name != "meter" {
            return Err(format!("unknown keyword {name}"));
        }
        m.meter_id = match value {
            "all" => OFPM13_ALL,
            "controller" => OFPM13_CONTROLLER,
            "slowpath" => OFPM13_SLOWPATH,
            v => {
                let id = u32_value(v)?;
                if id == 0 || id > OFPM13_MAX {
                    return Err(format!("invalid value for {name}"));
                }
                id
            }
        };
    }
    if m.meter_id == 0 {
        return Err("must specify 'meter'".into());
    }
    let Some(band_str) = band_str else {
        return Ok(m);
    };
    if m.flags == 0 {
        return Err("meter must specify either 'kbps' or 'pktps'".into());
    }
    let mut t = Tokens { s: band_str };
    while let Some(name) = t.next(NAME_DELIMS) {
        let value = t
            .next(VALUE_DELIMS)
            .ok_or_else(|| format!("field {name} missing value"))?;
        if name == "type" {
            let band_type = match value {
                "drop" => OFPMBT13_DROP,
                "dscp_remark" => OFPMBT13_DSCP_REMARK,
                v => return Err(format!("field {name} unknown value {v}")),
            };
            m.bands.push(MeterBand {
                band_type,
                rate: 0,
                burst_size: 0,
                prec_level: 0,
            });
            continue;
        }
        let Some(b) = m.bands.last_mut() else {
            return Err("band must start with the 'type' keyword".into());
        };
        match name {
            "rate" => b.rate = u32_value(value)?,
            "burst_size" => b.burst_size = u32_value(value)?,
            "prec_level" => {
                b.prec_level = value
                    .parse()
                    .map_err(|_| format!("invalid {name} \"{value}\""))?
            }
            _ => return Err(format!("unknown keyword {name}")),
        }
    }
    if m.bands.is_empty() {
        return Err("meter must have bands".into());
    }
    for b in &m.bands {
        if b.band_type == OFPMBT13_DSCP_REMARK && b.prec_level == 0 {
            return Err("'dscp_remark' band must have 'prec_level'".into());
        }
        if b.band_type != OFPMBT13_DSCP_REMARK && b.prec_level != 0 {
            return Err("Only 'dscp_remark' band may have 'prec_level'".into());
        }
        if b.rate == 0 {
            return Err("band must have 'rate'".into());
        }
        let burst = m.flags & OFPMF13_BURST != 0;
        if burst && b.burst_size == 0 {
            return Err("band must have 'burst_size' when 'burst' flag is set".into());
        }
        if !burst && b.burst_size != 0 {
            return Err("band may have 'burst_size' only when 'burst' flag is set".into());
        }
    }
    Ok(m)
}

/// `meter=ID` (or `meter:ID`): the number, or `slowpath`, `controller`, `all`.
fn format_meter_id(out: &mut String, id: u32, sep: char) {
    let _ = match id {
        id if id <= OFPM13_MAX => write!(out, "meter{sep}{id}"),
        OFPM13_SLOWPATH => write!(out, "meter{sep}slowpath"),
        OFPM13_CONTROLLER => write!(out, "meter{sep}controller"),
        OFPM13_ALL => write!(out, "meter{sep}all"),
        _ => write!(out, "meter{sep}unknown"),
    };
}

/// A meter's configuration as `ovs-ofctl dump-meters` prints it (a line for the meter, one
/// per band).
pub fn format_meter_config(m: &MeterConfig) -> String {
    let mut out = String::new();
    format_meter_id(&mut out, m.meter_id, '=');
    out.push(' ');
    for (f, name) in [
        (OFPMF13_KBPS, "kbps "),
        (OFPMF13_PKTPS, "pktps "),
        (OFPMF13_BURST, "burst "),
        (OFPMF13_STATS, "stats "),
    ] {
        if m.flags & f != 0 {
            out.push_str(name);
        }
    }
    let other = m.flags & !(OFPMF13_KBPS | OFPMF13_PKTPS | OFPMF13_BURST | OFPMF13_STATS);
    if other != 0 {
        let _ = write!(out, "flags:{other:#x} ");
    }
    out.push_str("bands=");
    for b in &m.bands {
        let _ = match b.band_type {
            OFPMBT13_DROP => write!(out, "\ntype=drop"),
            OFPMBT13_DSCP_REMARK => write!(out, "\ntype=dscp_remark"),
            t => write!(out, "\ntype={t}"),
        };
        let _ = write!(out, " rate={}", b.rate);
        if m.flags & OFPMF13_BURST != 0 {
            let _ = write!(out, " burst_size={}", b.burst_size);
        }
        if b.band_type == OFPMBT13_DSCP_REMARK {
            let _ = write!(out, " prec_level={}", b.prec_level);
        }
    }
    out.push('\n');
    out
}

/// A meter's statistics as `ovs-ofctl meter-stats` prints them.
pub fn format_meter_stats(s: &MeterStats) -> String {
    let mut out = String::new();
    format_meter_id(&mut out, s.meter_id, ':');
    let _ = write!(
        out,
        " flow_count:{} packet_in_count:{} byte_in_count:{} duration:",
        s.flow_count, s.packet_in_count, s.byte_in_count
    );
    super::flow::format_duration(&mut out, s.duration_sec, s.duration_nsec);
    out.push_str(" bands:\n");
    for (i, (p, b)) in s.bands.iter().enumerate() {
        let _ = writeln!(out, "{i}: packet_count:{p} byte_count:{b}");
    }
    out
}

/// The meter features of OVS's userspace datapath, as `ovs-ofctl meter-features` prints
/// them.
pub fn format_meter_features() -> String {
    format!(
        "max_meter:{} max_bands:{} max_color:0\nband_types: drop\ncapabilities: kbps pktps \
         burst stats\n",
        datapath::meter::MAX_METERS,
        datapath::meter::MAX_BANDS
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meters_parse_and_print_as_ovs_ofctl() {
        let m = parse_meter(
            "meter=1,pktps,burst,stats,bands=type=drop,rate=1000,burst_size=100",
            MeterText::Mod,
        )
        .unwrap();
        assert_eq!(
            format_meter_config(&m),
            "meter=1 pktps burst stats bands=\ntype=drop rate=1000 burst_size=100\n"
        );
        let m = parse_meter(
            "meter=controller kbps bands=type=drop rate=1 type=dscp_remark rate=2 prec_level=3",
            MeterText::Mod,
        )
        .unwrap();
        assert_eq!(
            format_meter_config(&m),
            "meter=controller kbps bands=\ntype=drop rate=1\ntype=dscp_remark rate=2 \
             prec_level=3\n"
        );
        assert_eq!(
            parse_meter("", MeterText::Select).unwrap().meter_id,
            OFPM13_ALL
        );
        assert_eq!(
            parse_meter("meter=7", MeterText::Select).unwrap().meter_id,
            7
        );
        let s = MeterStats {
            meter_id: 1,
            flow_count: 2,
            packet_in_count: 3,
            byte_in_count: 180,
            duration_sec: 1,
            duration_nsec: 5_000_000,
            bands: vec![(1, 60)],
        };
        assert_eq!(
            format_meter_stats(&s),
            "meter:1 flow_count:2 packet_in_count:3 byte_in_count:180 duration:1.005s \
             bands:\n0: packet_count:1 byte_count:60\n"
        );
    }

    /// The errors ovs-ofctl 3.1 gives for these.
    #[test]
    fn errors_are_ovs_ofctl_s() {
        for (text, err) in [
            (
                "meter=4,bands=type=drop,rate=0",
                "meter must specify either 'kbps' or 'pktps'",
            ),
            (
                "meter=0,kbps,bands=type=drop,rate=10",
                "invalid value for meter",
            ),
            (
                "meter=4294967295,kbps,bands=type=drop,rate=1",
                "invalid value for meter",
            ),
            ("meter=6,kbps", "must specify bands"),
            (
                "meter=7,kbps,bands=type=foo,rate=10",
                "field type unknown value foo",
            ),
            (
                "meter=1,kbps,bands=type=drop,rate=10,burst_size=5",
                "band may have 'burst_size' only when 'burst' flag is set",
            ),
            (
                "meter=2,pktps,burst,bands=type=drop,rate=10",
                "band must have 'burst_size' when 'burst' flag is set",
            ),
            (
                "meter=3,pktps,bands=type=drop,rate=10,burst_size=bad",
                "invalid numeric format bad",
            ),
            ("meter=3,pktps,bands=type=drop", "band must have 'rate'"),
            (
                "meter=3,pktps,bands=rate=10",
                "band must start with the 'type' keyword",
            ),
            (
                "meter=3,pktps,foo=1,bands=type=drop,rate=10",
                "unknown keyword foo",
            ),
            ("meter=3", "must specify bands"),
            ("kbps,bands=type=drop,rate=1", "must specify 'meter'"),
        ] {
            assert_eq!(
                parse_meter(text, MeterText::Mod).unwrap_err(),
                err,
                "{text}"
            );
        }
    }
}
