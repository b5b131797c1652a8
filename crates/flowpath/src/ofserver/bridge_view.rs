//! A bridge as OpenFlow describes it: its datapath id and features, its ports' descriptions
//! and counters, its tables' statistics, read from the switch's own state (the pipeline's
//! bridges and ports, the datapath's port counters) the way `ovs-vswitchd`'s `ofproto.c`
//! answers `OFPT_FEATURES_REQUEST`, `OFPST_PORT_DESC`, `OFPST_PORT` and `OFPST_TABLE`.
//!
//! Addresses: the LOCAL port has the bridge's `hwaddr` when one is configured; otherwise OVS
//! gives a bridge a random locally administered address when it creates it (dummy ports' own
//! `aa:55:aa:55:...` addresses are locally administered, so it never picks one of those), and
//! here the address is derived from the bridge's name instead, so that the datapath id, which
//! OVS derives from that address, stays the same across restarts. A port with a datapath side
//! has OVS's dummy address scheme, `aa:55:aa:55:` then its datapath port number.

use std::time::Instant;

use datapath::dpif::Datapath;
use datapath::port::PortCounters;
use flow::EthAddr;
use ofproto::bridge::{Bridge, OfPort};
use ofproto::syntax::OFPP_LOCAL;
use openflow::error::OfpErr;
use openflow::msgs::port::{OFPP_ANY, PhyPort};
use openflow::msgs::queue_config::QueueConfig;
use openflow::msgs::stats::{OFPQ_ALL, PortStats, QueueStats, TableStats};
use openflow::msgs::switch::{FeaturesReply, OFP10_ALL_ACTIONS, OVS_CAPABILITIES};

/// The flow tables a bridge shows: OVS's 254 (the 255th is hidden).
pub(crate) const N_TABLES: u8 = 254;

/// `max_entries` of every table, as OVS reports a table without a flow limit.
const MAX_ENTRIES: u32 = 1_000_000;

/// OpenFlow 1.0's `OFPFW10_ALL` as OVS's table statistics carry it (every wildcard, the IP
/// masks at their widest).
const OFPFW10_ALL: u64 = 0x003f_ffff;

/// The LOCAL port's Ethernet address: the configured one, else one derived from the name
/// (locally administered, unicast), as stable as the name.
pub(crate) fn bridge_mac(b: &Bridge) -> EthAddr {
    if let Some(m) = b.hwaddr {
        return m;
    }
    // FNV-1a over the name: stable across runs and builds, unlike std's hasher.
    let h = b.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
        (h ^ u64::from(c)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let mut a = [0; 6];
    a.copy_from_slice(&h.to_be_bytes()[2..]);
    a[0] = (a[0] & !1) | 2;
    EthAddr(a)
}

/// The bridge's datapath id: the configured one, else the one OVS derives from the LOCAL
/// port's address (its 48 bits).
pub(crate) fn datapath_id(b: &Bridge) -> u64 {
    if let Some(id) = b.datapath_id {
        return id;
    }
    bridge_mac(b)
        .0
        .iter()
        .fold(0u64, |id, &byte| id << 8 | u64::from(byte))
}

/// A port's Ethernet address: OVS's dummy scheme by datapath port number; a patch port (no
/// datapath side) gets one derived from its OpenFlow number the same way.
pub(crate) fn port_mac(b: &Bridge, p: &OfPort) -> EthAddr {
    if p.ofport == OFPP_LOCAL {
        return bridge_mac(b);
    }
    let n = p.dp_port.unwrap_or(p.ofport);
    let [_, _, hi, lo] = n.to_be_bytes();
    EthAddr([0xaa, 0x55, 0xaa, 0x55, hi, lo])
}

/// The description of port `p` of `b`: its configuration and link state
/// ([`ofproto::port_config`]), no features (the speed of a dummy or memory port is unknown, 0
/// as OVS reports a dummy's).
pub(crate) fn phy_port(b: &Bridge, p: &OfPort) -> PhyPort {
    let c = b.port_config(p.ofport);
    PhyPort {
        port_no: p.ofport,
        hw_addr: port_mac(b, p),
        name: p.name.clone(),
        config: c.config,
        state: c.state(),
        curr: 0,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed: 0,
        max_speed: 0,
    }
}

/// The ports of `b` (only `port` unless it is [`OFPP_ANY`]), by OpenFlow number.
pub(crate) fn phy_ports(b: &Bridge, port: u32) -> Vec<PhyPort> {
    b.ports
        .values()
        .filter(|p| port == OFPP_ANY || p.ofport == port)
        .map(|p| phy_port(b, p))
        .collect()
}

/// The features reply: OVS's capabilities and actions, 254 tables, no buffers, and the
/// ports (which only OpenFlow 1.0 to 1.2 carry).
pub(crate) fn features(b: &Bridge) -> FeaturesReply {
    FeaturesReply {
        datapath_id: datapath_id(b),
        n_buffers: 0,
        n_tables: N_TABLES,
        auxiliary_id: 0,
        capabilities: OVS_CAPABILITIES,
        actions: OFP10_ALL_ACTIONS,
        ports: phy_ports(b, OFPP_ANY),
    }
}

/// Port kinds whose device keeps only packet and byte counts, as OVS's dummy netdevs: their
/// drop and error counters are unknown (`?` in `ovs-ofctl dump-ports`).
fn counts_only(kind: &str) -> bool {
    kind == "dummy" || kind == "internal"
}

/// One port's statistics from its datapath counters; `since` is when the server started,
/// the port's age as far as the reply goes.
fn port_stats(
    p: &OfPort,
    c: Option<PortCounters>,
    kind: Option<&str>,
    since: Instant,
) -> PortStats {
    let age = since.elapsed();
    let c = c.unwrap_or_default();
    let mut s = PortStats {
        port_no: p.ofport,
        rx_packets: c.rx_packets,
        tx_packets: c.tx_packets,
        rx_bytes: c.rx_bytes,
        tx_bytes: c.tx_bytes,
        duration_sec: u32::try_from(age.as_secs()).unwrap_or(u32::MAX),
        duration_nsec: age.subsec_nanos(),
        ..PortStats::default()
    };
    if !kind.is_some_and(counts_only) {
        s.rx_dropped = c.rx_dropped;
        s.tx_dropped = c.tx_dropped;
        s.rx_errors = c.errors;
        s.tx_errors = 0;
    }
    s
}

/// Patch ports' counters by OpenFlow port number ([`ofproto::patch_stats`]).
pub(crate) type PatchCounts = std::collections::HashMap<u32, ofproto::patch_stats::PatchCounts>;

/// A patch port's statistics: what crossed the pair, the only counters OVS keeps for one
/// (`netdev_vport_get_stats()`); the others are unknown (all ones, printed `?`).
fn patch_port_stats(
    p: &OfPort,
    c: &ofproto::patch_stats::PatchCounts,
    since: Instant,
) -> PortStats {
    let mut s = port_stats(p, None, None, since);
    s.rx_packets = c.rx_packets;
    s.rx_bytes = c.rx_bytes;
    s.tx_packets = c.tx_packets;
    s.tx_bytes = c.tx_bytes;
    for f in [
        &mut s.rx_dropped,
        &mut s.tx_dropped,
        &mut s.rx_errors,
        &mut s.tx_errors,
        &mut s.rx_frame_err,
        &mut s.rx_over_err,
        &mut s.rx_crc_err,
        &mut s.collisions,
    ] {
        *f = u64::MAX;
    }
    s
}

/// The statistics of `ports` (a bridge's) that have a datapath side or are patch ports
/// (only `port` unless it is [`OFPP_ANY`]): LOCAL first, then by number, as `ovs-vswitchd`
/// lists them for a small bridge.
pub(crate) fn ports_stats(
    ports: &[OfPort],
    patch: &PatchCounts,
    dp: &Datapath,
    port: u32,
    since: Instant,
) -> Vec<PortStats> {
    let mut ports: Vec<&OfPort> = ports
        .iter()
        .filter(|p| p.dp_port.is_some() || patch.contains_key(&p.ofport))
        .filter(|p| port == OFPP_ANY || p.ofport == port)
        .collect();
    ports.sort_by_key(|p| (p.ofport != OFPP_LOCAL, p.ofport));
    ports
        .into_iter()
        .map(|p| {
            if let Some(c) = patch.get(&p.ofport).filter(|_| p.dp_port.is_none()) {
                return patch_port_stats(p, c, since);
            }
            let kind = p.dp_port.and_then(|n| dp.port_type(n));
            let kind = kind.as_deref().map(|k| k.split(':').next().unwrap_or(k));
            port_stats(p, dp.port_counters(&p.name), kind, since)
        })
        .collect()
}

/// The ports of `b` with a datapath side whose queue `queue` `port` selects, LOCAL first then
/// by number. Every port has one queue, 0, without rates, as OVS's dummy and default-QoS ports
/// report: an unknown port is `OFPQOFC_BAD_PORT`, another queue `OFPQOFC_BAD_QUEUE`.
fn queue_ports(b: &Bridge, port: u32, queue: u32) -> Result<Vec<u32>, OfpErr> {
    let mut v: Vec<u32> = b
        .ports
        .values()
        .filter(|p| p.dp_port.is_some() && (port == OFPP_ANY || p.ofport == port))
        .map(|p| p.ofport)
        .collect();
    if v.is_empty() && port != OFPP_ANY {
        return Err(OfpErr::OfpqofcBadPort);
    }
    if queue != OFPQ_ALL && queue != 0 {
        return Err(OfpErr::OfpqofcBadQueue);
    }
    v.sort_by_key(|&no| (no != OFPP_LOCAL, no));
    Ok(v)
}

/// The queues `port` and `queue` select (queue-config and queue-description requests).
pub(crate) fn queue_configs(b: &Bridge, port: u32, queue: u32) -> Result<Vec<QueueConfig>, OfpErr> {
    Ok(queue_ports(b, port, queue)?
        .into_iter()
        .map(|port| QueueConfig {
            port,
            queue: 0,
            min_rate: None,
            max_rate: None,
        })
        .collect())
}

/// The statistics of the queues `port` and `queue` select: the ports keep no counts per
/// queue, so every counter and the age are unknown, as OVS reports a dummy port's.
pub(crate) fn queues_stats(b: &Bridge, port: u32, queue: u32) -> Result<Vec<QueueStats>, OfpErr> {
    Ok(queue_ports(b, port, queue)?
        .into_iter()
        .map(|port_no| QueueStats {
            port_no,
            queue_id: 0,
            tx_bytes: u64::MAX,
            tx_packets: u64::MAX,
            tx_errors: u64::MAX,
            duration_sec: u32::MAX,
            duration_nsec: u32::MAX,
        })
        .collect())
}

/// The statistics of the 254 tables: flows in each, OVS's descriptive fields for the
/// versions that carry them.
pub(crate) fn tables_stats(b: &Bridge) -> Vec<TableStats> {
    (0..N_TABLES)
        .map(|id| (id, b.table_stats.get(usize::from(id))))
        .map(|(id, (lookup_count, matched_count))| TableStats {
            table_id: id,
            active_count: b
                .tables
                .get(usize::from(id))
                .map_or(0, |t| u32::try_from(t.len()).unwrap_or(u32::MAX)),
            lookup_count,
            matched_count,
            max_entries: MAX_ENTRIES,
            wildcards: OFPFW10_ALL,
            ..TableStats::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofproto::bridge::VlanMode;
    use openflow::msgs::port::OFPPS_LIVE;

    fn port(name: &str, ofport: u32, dp: u32) -> OfPort {
        OfPort {
            name: name.into(),
            ofport,
            dp_port: Some(dp),
            peer: None,
            vlan: VlanMode::default(),
        }
    }

    #[test]
    fn the_datapath_id_is_the_configured_one_else_the_local_ports_address() {
        let mut b = Bridge::new("br0");
        b.hwaddr = Some(EthAddr([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x01]));
        assert_eq!(datapath_id(&b), 0xaabb_ccdd_ee01);
        // A configured one comes first.
        b.datapath_id = Some(0x0102_0304_0506_0708);
        assert_eq!(datapath_id(&b), 0x0102_0304_0506_0708);
        let b = Bridge::new("br0");
        let m = bridge_mac(&b);
        assert_eq!(m.0[0] & 3, 2, "locally administered unicast: {m:?}");
        assert_eq!(bridge_mac(&Bridge::new("br0")), m);
        assert_ne!(bridge_mac(&Bridge::new("br1")), m);
    }

    #[test]
    fn ports_take_ovs_dummy_addresses_and_are_live() {
        let mut b = Bridge::new("br0");
        b.ports.insert(1, port("p1", 1, 1));
        b.ports.insert(OFPP_LOCAL, port("br0", OFPP_LOCAL, 100));
        let v = phy_ports(&b, OFPP_ANY);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].hw_addr, EthAddr([0xaa, 0x55, 0xaa, 0x55, 0, 1]));
        assert_eq!(v[0].state, OFPPS_LIVE);
        assert_eq!(v[1].hw_addr, bridge_mac(&b));
        assert_eq!(phy_ports(&b, 1).len(), 1);
        assert!(phy_ports(&b, 7).is_empty());
    }

    #[test]
    fn a_dummy_ports_drops_are_unknown_as_ovs_reports_them() {
        let p = port("p1", 1, 1);
        let c = PortCounters {
            rx_packets: 3,
            rx_dropped: 1,
            ..Default::default()
        };
        let s = port_stats(&p, Some(c), Some("dummy"), Instant::now());
        assert_eq!((s.rx_packets, s.rx_dropped), (3, u64::MAX));
        let s = port_stats(&p, Some(c), Some("afpacket"), Instant::now());
        assert_eq!((s.rx_packets, s.rx_dropped, s.tx_errors), (3, 1, 0));
    }
}
