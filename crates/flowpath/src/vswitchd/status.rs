//! The write-back: one transaction with what `ovs-vswitchd` writes after a reconfiguration
//! (`vswitchd/bridge.c`): `Open_vSwitch.cur_cfg` (the `next_cfg` the reconfiguration saw, so
//! `ovs-vsctl` stops waiting), `datapath_types`, `iface_types`; every Interface's `ofport`
//! (-1 when it failed) and `error`, `mtu`, `mac_in_use`, `link_state`, `admin_state`,
//! `ifindex`, `bfd_status` and, every few seconds, `statistics`; `Bridge.datapath_id`; `Controller`'s
//! `is_connected`, `role` and `status`; `Datapath.capabilities`.
//!
//! OVS's write discipline: only these columns, each `update` by `_uuid`, only what differs
//! from the database's copy (so an unchanged switch writes nothing), and the transaction ends
//! with an assert of the `ovs_vswitchd` lock. `external_ids` is never written.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use datapath::dpif::Datapath;
use datapath::port::PortCounters;
use ofproto::ofproto::Ofproto;
use ovsdb::{Atom, Datum, Db, Uuid, ops};
use serde_json::Value;

use crate::ofserver::ControllerSettings;

use super::LOCK;
use super::desired::{Desired, IfaceDesired};
use super::iface_types::{DummyLevel, IFACE_TYPES, is_kernel_kind};
use super::reconcile::{Applied, DATAPATH_TYPES, IfaceOutcome};

/// What the write-back reads besides the database.
pub(crate) struct StatusSources<'a> {
    pub of: &'a Ofproto,
    pub dp: &'a Datapath,
    pub controllers: &'a ControllerSettings,
    /// Kernel-backed types are dummy ports (`--enable-dummy`).
    pub dummy: DummyLevel,
    /// Whether to write the interfaces' statistics this time.
    pub statistics: bool,
}

/// Collects the updates, keeping only the columns that differ from `db`.
struct Txn<'a> {
    db: &'a Db,
    ops: Vec<Value>,
}

impl Txn<'_> {
    fn update(&mut self, table: &str, uuid: Uuid, cols: Vec<(&str, Datum)>) {
        let Some(row) = self.db.row_cells(table, uuid) else {
            return;
        };
        // Compared in place: every pass looks at every interface, so no copy of what the
        // row holds (a column the replica lacks has the schema's default).
        let changed: Vec<(&str, Datum)> =
            cols.into_iter().filter(|(c, v)| row.get(c) != v).collect();
        if !changed.is_empty() {
            self.ops.push(ops::update(table, uuid, &changed));
        }
    }
}

/// The transaction's operations (the lock assert last), or none when the database already
/// says everything.
pub(crate) fn status_ops(
    db: &Db,
    d: &Desired,
    applied: &Applied,
    src: &StatusSources,
) -> Vec<Value> {
    let Some(ovs) = d.ovs else {
        return Vec::new();
    };
    let mut t = Txn {
        db,
        ops: Vec::new(),
    };
    let strings = |v: &[&str]| Datum::set(v.iter().map(|s| Atom::String((*s).into())).collect());
    let (dpdk_initialized, dpdk_version) = crate::dpdk::status();
    t.update(
        "Open_vSwitch",
        ovs,
        vec![
            ("cur_cfg", Datum::integer(d.next_cfg)),
            ("datapath_types", strings(DATAPATH_TYPES)),
            ("iface_types", strings(IFACE_TYPES)),
            ("dpdk_initialized", Datum::boolean(dpdk_initialized)),
            ("dpdk_version", Datum::string(&dpdk_version)),
        ],
    );
    let links: HashMap<String, bool> = src.dp.link_states().into_iter().collect();
    let resets: HashMap<String, u64> = src.dp.link_resets().into_iter().collect();
    let pipe = src.of.pipe.read().unwrap_or_else(|e| e.into_inner());
    for b in d.bridges.values() {
        let ofb = pipe.bridge(&b.name);
        let dpid = ofb.map(|ofb| format!("{:016x}", crate::ofserver::datapath_id(ofb)));
        if let Some(dpid) = dpid {
            t.update(
                "Bridge",
                b.uuid,
                vec![
                    ("datapath_id", Datum::string(&dpid)),
                    // What OVS's userspace datapath reports.
                    ("datapath_version", Datum::string("<built-in>")),
                ],
            );
        }
        for i in &b.ifaces {
            let cols = match applied.outcomes.get(&i.uuid) {
                Some(IfaceOutcome::Up(n)) => {
                    let mac = ofb
                        .and_then(|ofb| ofb.ports.get(n).map(|p| (ofb, p)))
                        .map(|(ofb, p)| crate::ofserver::port_mac(ofb, p).to_string());
                    // A new interface gets its statistics with its number, as OVS writes them
                    // in the reconfiguration's transaction; the others at the next refresh.
                    let statistics = src.statistics || applied.added.contains(&i.uuid);
                    let link_up = links.get(&i.name).copied().unwrap_or(true);
                    let link = (link_up, resets.get(&i.name).copied().unwrap_or(0));
                    let patch = (i.kind == "patch").then(|| pipe.patch_stats.get(&i.name));
                    let mut cols = up_columns(i, *n, mac, link, statistics, patch, src);
                    cols.push(("lacp_current", lacp_current(ofb, &i.name)));
                    if let Some(e) = applied.notes.get(&i.uuid)
                        && let Some(c) = cols.iter_mut().find(|c| c.0 == "error")
                    {
                        c.1 = Datum::string(e);
                    }
                    cols
                }
                Some(IfaceOutcome::Failed(e)) => failed_columns(Some(e)),
                None => failed_columns(None),
            };
            t.update("Interface", i.uuid, cols);
        }
        for (port, mac) in super::bonds::active_slaves(b, ofb) {
            let v = mac.map_or(Datum::Empty, |m| Datum::string(&m));
            t.update("Port", port, vec![("bond_active_slave", v)]);
        }
        if src.statistics
            && let Some(ofb) = ofb
        {
            mirror_statistics(&mut t, b, ofb);
        }
        let status = src.controllers.status(&b.name);
        for c in &b.controllers {
            let s = status.iter().find(|s| s.target == c.target);
            let connected = s.is_some_and(|s| s.is_connected);
            let role = s.and_then(|s| s.role);
            let map: BTreeMap<String, String> = s
                .map(|s| {
                    s.status
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), v.clone()))
                        .collect()
                })
                .unwrap_or_default();
            t.update(
                "Controller",
                c.uuid,
                vec![
                    ("is_connected", Datum::boolean(connected)),
                    ("role", role.map_or(Datum::Empty, Datum::string)),
                    ("status", Datum::from_string_map(&map)),
                ],
            );
        }
    }
    drop(pipe);
    let caps = Datum::from_string_map(&super::capabilities::capabilities());
    for (dp_type, row) in &d.datapaths {
        if dp_type.is_empty() || DATAPATH_TYPES.contains(&dp_type.as_str()) {
            t.update("Datapath", *row, vec![("capabilities", caps.clone())]);
        }
    }
    if t.ops.is_empty() {
        return t.ops;
    }
    t.ops.push(ops::assert_lock(LOCK));
    t.ops
}

/// Each mirror's `statistics` (`tx_packets`, `tx_bytes`), as OVS refreshes them with the
/// interfaces'.
fn mirror_statistics(
    t: &mut Txn,
    b: &super::desired::BridgeDesired,
    ofb: &ofproto::bridge::Bridge,
) {
    for m in &b.mirrors {
        let Some(ofm) = ofb.mirrors.iter().find(|o| o.config == m.config) else {
            continue;
        };
        let (packets, bytes) = ofm.counters();
        let int = |v: u64| Atom::Integer(i64::try_from(v).unwrap_or(i64::MAX));
        let pairs = vec![
            (Atom::String("tx_bytes".into()), int(bytes)),
            (Atom::String("tx_packets".into()), int(packets)),
        ];
        t.update("Mirror", m.uuid, vec![("statistics", Datum::Map(pairs))]);
    }
}

/// The columns of a running interface (`link`: whether its link is up, and its link resets).
fn up_columns(
    i: &IfaceDesired,
    ofport: u32,
    of_mac: Option<String>,
    (link_up, link_resets): (bool, u64),
    statistics: bool,
    patch: Option<ofproto::patch_stats::PatchCounts>,
    src: &StatusSources,
) -> Vec<(&'static str, Datum)> {
    let dummy = src.dummy.is_dummy(&i.kind);
    let kernel = !dummy && is_kernel_kind(&i.kind);
    let sys = |attr: &str| -> Option<String> {
        let p = Path::new("/sys/class/net").join(&i.name).join(attr);
        std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned())
    };
    let mac = kernel
        .then(|| sys("address"))
        .flatten()
        .or_else(|| i.mac.clone())
        .or(of_mac);
    let mtu = kernel
        .then(|| sys("mtu").and_then(|m| m.parse::<i64>().ok()))
        .flatten()
        .or(i.mtu_request)
        .unwrap_or(1500);
    let updown = |up: bool| Datum::string(if up { "up" } else { "down" });
    let mut cols = vec![
        ("ofport", Datum::integer(i64::from(ofport))),
        ("error", Datum::Empty),
        ("admin_state", updown(true)),
        ("link_state", updown(link_up)),
        // A patch port has no device and no MTU, as OVS's.
        (
            "mtu",
            if i.kind == "patch" {
                Datum::Empty
            } else {
                Datum::integer(mtu)
            },
        ),
        (
            "mac_in_use",
            mac.map_or(Datum::Empty, |m| Datum::string(&m)),
        ),
        // Counted by the ports that follow their link (DPDK's); 0 for the others.
        ("link_resets", Datum::integer(link_resets as i64)),
        ("bfd_status", bfd_status(src.of, &i.name)),
    ];
    // 0 where there is no kernel device, as OVS.
    let ifindex = kernel
        .then(|| sys("ifindex").and_then(|n| n.parse::<i64>().ok()))
        .flatten()
        .unwrap_or(0);
    cols.push(("ifindex", Datum::integer(ifindex)));
    let counters = if statistics && patch.is_none() {
        src.dp.port_counters(&i.name)
    } else {
        None
    };
    if let Some(pc) = patch.filter(|_| statistics) {
        // What crossed the patch pair, the only counters OVS keeps for a patch port.
        let stats = [
            ("rx_bytes", pc.rx_bytes),
            ("rx_packets", pc.rx_packets),
            ("tx_bytes", pc.tx_bytes),
            ("tx_packets", pc.tx_packets),
        ];
        cols.push(("statistics", statistics_map(&stats)));
    } else if let Some(c) = counters {
        let stats = if dummy {
            dummy_statistics(&c)
        } else {
            // OVS's key names; flowpath counts errors of both directions as one, shown as
            // rx_errors.
            vec![
                ("rx_packets", c.rx_packets),
                ("rx_bytes", c.rx_bytes),
                ("rx_dropped", c.rx_dropped),
                ("rx_errors", c.errors),
                ("tx_packets", c.tx_packets),
                ("tx_bytes", c.tx_bytes),
                ("tx_dropped", c.tx_dropped),
            ]
        };
        cols.push(("statistics", statistics_map(&stats)));
    }
    cols
}

/// An interface's `statistics` column: counters by OVS's key names.
fn statistics_map(stats: &[(&str, u64)]) -> Datum {
    let mut pairs: Vec<(Atom, Atom)> = stats
        .iter()
        .map(|(k, v)| {
            (
                Atom::String((*k).to_owned()),
                Atom::Integer(i64::try_from(*v).unwrap_or(i64::MAX)),
            )
        })
        .collect();
    pairs.sort_by(|a, b| a.0.ovsdb_cmp(&b.0));
    Datum::Map(pairs)
}

/// The statistics of a dummy interface, with the keys OVS's dummy netdev reports: the four
/// counters it keeps, its one rx and one tx queue's, and its two test counters (each counts
/// the packets received).
fn dummy_statistics(c: &PortCounters) -> Vec<(&'static str, u64)> {
    vec![
        ("rx_packets", c.rx_packets),
        ("rx_bytes", c.rx_bytes),
        ("tx_packets", c.tx_packets),
        ("tx_bytes", c.tx_bytes),
        ("rx_custom_packets_1", c.rx_packets),
        ("rx_custom_packets_2", c.rx_packets),
        ("rx_q0_packets", c.rx_packets),
        ("rx_q0_bytes", c.rx_bytes),
        ("tx_q0_packets", c.tx_packets),
        ("tx_q0_bytes", c.tx_bytes),
    ]
}

/// The columns of an interface that does not run: `ofport` -1, its error, the status
/// columns cleared (`iface_clear_db_record()`).
fn failed_columns(error: Option<&String>) -> Vec<(&'static str, Datum)> {
    vec![
        ("ofport", Datum::integer(-1)),
        ("error", error.map_or(Datum::Empty, |e| Datum::string(e))),
        ("admin_state", Datum::Empty),
        ("link_state", Datum::Empty),
        ("mtu", Datum::Empty),
        ("mac_in_use", Datum::Empty),
        ("ifindex", Datum::Empty),
        ("link_resets", Datum::Empty),
        // Map columns: cleared with an empty map (an empty set is a syntax error to them).
        ("statistics", Datum::Map(Vec::new())),
        ("status", Datum::Map(Vec::new())),
        ("bfd_status", Datum::Map(Vec::new())),
        ("lacp_current", Datum::Empty),
    ]
}

/// The interface's `lacp_current`: whether its LACP (its bond's or its Port's) has (or had) a
/// partner on it, empty without LACP.
fn lacp_current(ofb: Option<&ofproto::bridge::Bridge>, name: &str) -> Datum {
    ofb.and_then(|b| b.lacp_current(name))
        .map_or(Datum::Empty, Datum::boolean)
}

/// The interface's `bfd_status`: its BFD session's state, empty without one (OVS's
/// `bfd_get_status()`).
fn bfd_status(of: &Ofproto, name: &str) -> Datum {
    let map: BTreeMap<String, String> = of
        .bfd
        .status(name)
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    Datum::from_string_map(&map)
}
