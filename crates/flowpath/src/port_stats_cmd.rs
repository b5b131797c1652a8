//! `ofctl/dump-ports BRIDGE [PORT]` (`flowpath ofctl dump-ports`): a bridge's port counters
//! as `ovs-ofctl dump-ports` prints OVS's port statistics reply (OpenFlow 1.0, the default):
//! the LOCAL port first, then by OpenFlow port number, and `?` for the counters a port does
//! not keep (frame, overrun and CRC errors, collisions).

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use datapath::dpif::Datapath;
use datapath::port::PortCounters;
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

use ofproto::syntax::OFPP_LOCAL;

/// Registers `ofctl/dump-ports`.
pub fn register(reg: &Registry, of: &Arc<Ofproto>, dp: &Arc<Mutex<Datapath>>) {
    let (of, dp) = (of.clone(), dp.clone());
    let _ = reg.register("ofctl/dump-ports", "BRIDGE [PORT]", 1, 2, move |a| {
        let ports = of.port_names(&a[0])?;
        let want = match a.get(1) {
            None => None,
            Some(p) => Some(port_number(p, &ports)?),
        };
        let dp = crate::commands::lock_dp(&dp)?;
        let mut rows: Vec<(u32, PortCounters)> = ports
            .iter()
            .filter(|(no, _)| want.is_none_or(|w| w == *no))
            .map(|(no, name)| (*no, dp.port_counters(name).unwrap_or_default()))
            .collect();
        rows.sort_by_key(|(no, _)| (*no != OFPP_LOCAL, *no));
        Ok(format_reply(&rows))
    });
}

/// A port given by number, name or `LOCAL`.
fn port_number(p: &str, ports: &[(u32, String)]) -> Result<u32, String> {
    if p.eq_ignore_ascii_case("local") {
        return Ok(OFPP_LOCAL);
    }
    if let Ok(n) = p.parse() {
        return Ok(n);
    }
    ports
        .iter()
        .find(|(_, name)| name == p)
        .map(|(no, _)| *no)
        .ok_or_else(|| format!("{p}: unknown port"))
}

/// The reply's text, as `ovs-ofctl` prints an `OFPST_PORT` reply.
fn format_reply(rows: &[(u32, PortCounters)]) -> String {
    let mut s = format!("OFPST_PORT reply (xid=0x2): {} ports\n", rows.len());
    for (no, c) in rows {
        let name = if *no == OFPP_LOCAL {
            "LOCAL".to_owned()
        } else {
            format!("{no:>2}")
        };
        let _ = writeln!(
            s,
            "  port {name}: rx pkts={}, bytes={}, drop={}, errs={}, frame=?, over=?, crc=?",
            c.rx_packets, c.rx_bytes, c.rx_dropped, c.errors
        );
        let _ = writeln!(
            s,
            "           tx pkts={}, bytes={}, drop={}, errs=?, coll=?",
            c.tx_packets, c.tx_bytes, c.tx_dropped
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_reads_as_ovs_ofctls() {
        let c = PortCounters {
            rx_packets: 8,
            rx_bytes: 656,
            tx_packets: 7,
            tx_bytes: 546,
            ..Default::default()
        };
        let mut rows = vec![(2, c), (OFPP_LOCAL, PortCounters::default())];
        rows.sort_by_key(|(no, _)| (*no != OFPP_LOCAL, *no));
        assert_eq!(
            format_reply(&rows),
            "OFPST_PORT reply (xid=0x2): 2 ports\n  \
             port LOCAL: rx pkts=0, bytes=0, drop=0, errs=0, frame=?, over=?, crc=?\n           \
             tx pkts=0, bytes=0, drop=0, errs=?, coll=?\n  \
             port  2: rx pkts=8, bytes=656, drop=0, errs=0, frame=?, over=?, crc=?\n           \
             tx pkts=7, bytes=546, drop=0, errs=?, coll=?\n"
        );
        let ports = vec![(1, "p1".to_owned())];
        assert_eq!(port_number("p1", &ports), Ok(1));
        assert_eq!(port_number("LOCAL", &ports), Ok(OFPP_LOCAL));
        assert_eq!(port_number("p9", &ports), Err("p9: unknown port".into()));
    }
}
