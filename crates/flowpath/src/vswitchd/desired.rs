//! The configuration the database asks for, read from a snapshot of the Open_vSwitch
//! database (schema 8.3, OVS 3.1): the bridges reachable from the Open_vSwitch row with their
//! ports' interfaces, controllers and settings, the global `other_config` knobs and the
//! connection tracker's zone policies — what `bridge_reconfigure()` in `vswitchd/bridge.c`
//! reads. Nothing here touches the switch; the reconciler diffs this against what it built.

use std::collections::{BTreeMap, BTreeSet};

use ovsdb::{Db, Uuid};

/// Everything the switch should be.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Desired {
    /// The Open_vSwitch row (none before `ovs-vsctl init`).
    pub ovs: Option<Uuid>,
    /// The `next_cfg` this configuration answers: written back as `cur_cfg`.
    pub next_cfg: i64,
    /// Open_vSwitch `other_config` (the datapath's knobs).
    pub other_config: BTreeMap<String, String>,
    /// Bridges, by name.
    pub bridges: BTreeMap<String, BridgeDesired>,
    /// Interfaces that cannot be configured whatever the switch does, with their `error`
    /// (a name used twice).
    pub rejected: Vec<(Uuid, String)>,
    /// The Datapath rows Open_vSwitch `datapaths` names, by datapath type.
    pub datapaths: BTreeMap<String, Uuid>,
    /// Connection tracking zones with a timeout policy: zone -> (class name, seconds).
    pub ct_zones: BTreeMap<u16, BTreeMap<String, i64>>,
}

/// One bridge.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BridgeDesired {
    pub uuid: Uuid,
    pub name: String,
    /// `""`, `system` or `netdev` (all flowpath's datapath); anything else is refused.
    pub datapath_type: String,
    /// `standalone`, `secure` or unset.
    pub fail_mode: Option<String>,
    /// OpenFlow versions (`OpenFlow13`, ...); empty: all.
    pub protocols: Vec<String>,
    /// The Controller rows, in uuid order.
    pub controllers: Vec<ControllerDesired>,
    /// `other_config` (`hwaddr`, `datapath-id`, `disable-in-band`, ...).
    pub other_config: BTreeMap<String, String>,
    /// Every interface of every port, in port then interface uuid order.
    pub ifaces: Vec<IfaceDesired>,
    /// The Mirror rows, in uuid order.
    pub mirrors: Vec<MirrorDesired>,
    /// The Ports of more than one Interface (bonds), in uuid order.
    pub bonds: Vec<super::bonds::BondDesired>,
    /// The Ports of one Interface with `lacp` set, in uuid order.
    pub lacp_ports: Vec<super::bonds::BondDesired>,
}

/// One Mirror row: its ports named by their interfaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MirrorDesired {
    pub uuid: Uuid,
    pub config: ofproto::mirror::MirrorConfig,
}

/// One Controller row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ControllerDesired {
    pub uuid: Uuid,
    pub target: String,
    /// `inactivity_probe`, milliseconds.
    pub inactivity_probe: Option<i64>,
    /// `max_backoff`, milliseconds.
    pub max_backoff: Option<i64>,
}

/// One Interface row with the VLAN settings of its Port.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct IfaceDesired {
    pub uuid: Uuid,
    pub name: String,
    /// The name of its Port.
    pub port: String,
    /// The `type` column (`""` is a system device).
    pub kind: String,
    pub options: BTreeMap<String, String>,
    pub other_config: BTreeMap<String, String>,
    pub ofport_request: Option<i64>,
    /// The `ofport` the database holds (from this or an earlier run).
    pub db_ofport: Option<i64>,
    pub mtu_request: Option<i64>,
    pub mac: Option<String>,
    /// The Port's `tag`, `trunks`, `vlan_mode`, `cvlans` and `other_config:qinq-ethtype`.
    pub tag: Option<i64>,
    pub trunks: Vec<i64>,
    pub vlan_mode: Option<String>,
    pub cvlans: Vec<i64>,
    pub qinq_ethtype: Option<String>,
    /// The Port's `other_config:priority-tags`.
    pub priority_tags: Option<String>,
    /// The `bfd` column.
    pub bfd: BTreeMap<String, String>,
}

impl Default for IfaceDesired {
    fn default() -> IfaceDesired {
        IfaceDesired {
            uuid: Uuid(0),
            name: String::new(),
            port: String::new(),
            kind: String::new(),
            options: BTreeMap::new(),
            other_config: BTreeMap::new(),
            ofport_request: None,
            db_ofport: None,
            mtu_request: None,
            mac: None,
            tag: None,
            trunks: Vec::new(),
            vlan_mode: None,
            cvlans: Vec::new(),
            qinq_ethtype: None,
            priority_tags: None,
            bfd: BTreeMap::new(),
        }
    }
}

impl IfaceDesired {
    /// Whether this is its bridge's own interface (the LOCAL port), named as the bridge.
    pub fn is_local(&self, bridge: &str) -> bool {
        self.name == bridge
    }
}

impl Desired {
    /// Reads the configuration from a snapshot. Bridges and interfaces are taken in name and
    /// uuid order, so that the same database always gives the same result; a bridge or
    /// interface name seen twice keeps its first row, the others are rejected as OVS rejects
    /// them.
    pub fn from_db(db: &Db) -> Desired {
        let mut d = Desired::default();
        let Some((ovs, _)) = db.rows("Open_vSwitch").next() else {
            return d;
        };
        d.ovs = Some(ovs);
        d.next_cfg = db
            .get("Open_vSwitch", ovs, "next_cfg")
            .as_i64()
            .unwrap_or(0);
        d.other_config = db.get("Open_vSwitch", ovs, "other_config").string_map();
        for (dp_type, row) in db.get("Open_vSwitch", ovs, "datapaths").pairs() {
            if let (Some(t), Some(u)) = (dp_type.as_str(), row.as_uuid())
                && db.row("Datapath", u).is_some()
            {
                d.datapaths.insert(t.to_owned(), u);
                d.ct_zones.extend(ct_zones(db, u));
            }
        }
        let mut iface_names = BTreeSet::new();
        let mut bridges: Vec<BridgeDesired> = db
            .get("Open_vSwitch", ovs, "bridges")
            .uuids()
            .into_iter()
            .filter(|&b| db.row("Bridge", b).is_some())
            .map(|b| bridge(db, b))
            .collect();
        bridges.sort_by(|a, b| a.name.cmp(&b.name).then(a.uuid.cmp(&b.uuid)));
        for mut b in bridges {
            if d.bridges.contains_key(&b.name) {
                continue;
            }
            b.ifaces.retain(|i| {
                let fresh = iface_names.insert(i.name.clone());
                if !fresh {
                    d.rejected.push((
                        i.uuid,
                        format!(
                            "could not add network device {} to ofproto (File exists)",
                            i.name
                        ),
                    ));
                }
                fresh
            });
            d.bridges.insert(b.name.clone(), b);
        }
        d
    }
}

/// A Bridge row with its ports' interfaces and its controllers.
fn bridge(db: &Db, b: Uuid) -> BridgeDesired {
    let col = |c: &str| db.get("Bridge", b, c);
    let mut controllers: Vec<ControllerDesired> = col("controller")
        .uuids()
        .into_iter()
        .filter(|&c| db.row("Controller", c).is_some())
        .map(|c| ControllerDesired {
            uuid: c,
            target: db
                .get("Controller", c, "target")
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            inactivity_probe: db.get("Controller", c, "inactivity_probe").as_i64(),
            max_backoff: db.get("Controller", c, "max_backoff").as_i64(),
        })
        .collect();
    controllers.sort_by_key(|c| c.uuid);
    let mut ifaces = Vec::new();
    let mut bonds = Vec::new();
    let mut lacp_ports = Vec::new();
    let mut ports = col("ports").uuids();
    ports.sort();
    for p in ports {
        let Some(prow) = db.row_cells("Port", p) else {
            continue;
        };
        let pcol = |c: &str| prow.get(c);
        let mut members = pcol("interfaces").uuids();
        members.sort();
        members.retain(|&i| db.row("Interface", i).is_some());
        let names: Vec<String> = members
            .iter()
            .map(|&i| {
                db.get("Interface", i, "name")
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        lacp_ports.extend(super::bonds::read_lacp_port(db, p, names.clone(), &members));
        bonds.extend(super::bonds::read(db, p, names, &members));
        for i in members {
            let Some(irow) = db.row_cells("Interface", i) else {
                continue;
            };
            let icol = |c: &str| irow.get(c);
            ifaces.push(IfaceDesired {
                uuid: i,
                name: icol("name").as_str().unwrap_or_default().to_owned(),
                port: pcol("name").as_str().unwrap_or_default().to_owned(),
                kind: icol("type").as_str().unwrap_or_default().to_owned(),
                options: icol("options").string_map(),
                other_config: icol("other_config").string_map(),
                ofport_request: icol("ofport_request").as_i64(),
                db_ofport: icol("ofport").as_i64(),
                mtu_request: icol("mtu_request").as_i64(),
                mac: icol("mac").as_str().map(str::to_owned),
                tag: pcol("tag").as_i64(),
                trunks: pcol("trunks").integers(),
                vlan_mode: pcol("vlan_mode").as_str().map(str::to_owned),
                cvlans: pcol("cvlans").integers(),
                qinq_ethtype: pcol("other_config").string_map().remove("qinq-ethtype"),
                priority_tags: pcol("other_config").string_map().remove("priority-tags"),
                bfd: icol("bfd").string_map(),
            });
        }
    }
    let mut mirrors: Vec<MirrorDesired> = col("mirrors")
        .uuids()
        .into_iter()
        .filter(|&m| db.row("Mirror", m).is_some())
        .map(|m| mirror(db, m))
        .collect();
    mirrors.sort_by_key(|m| m.uuid);
    BridgeDesired {
        uuid: b,
        mirrors,
        bonds,
        lacp_ports,
        name: col("name").as_str().unwrap_or_default().to_owned(),
        datapath_type: col("datapath_type").as_str().unwrap_or_default().to_owned(),
        fail_mode: col("fail_mode").as_str().map(str::to_owned),
        protocols: col("protocols").strings(),
        controllers,
        other_config: col("other_config").string_map(),
        ifaces,
    }
}

/// A Mirror row, its Port references as the names of their interfaces (OVS mirrors whole
/// ports; flowpath's ports are their interfaces).
fn mirror(db: &Db, m: Uuid) -> MirrorDesired {
    let col = |c: &str| db.get("Mirror", m, c);
    let ifaces = |ports: Vec<Uuid>| -> BTreeSet<String> {
        ports
            .into_iter()
            .flat_map(|p| db.get("Port", p, "interfaces").uuids())
            .filter_map(|i| db.get("Interface", i, "name").as_str().map(str::to_owned))
            .collect()
    };
    let output_port = col("output_port")
        .as_uuid()
        .and_then(|p| ifaces(vec![p]).into_iter().next());
    MirrorDesired {
        uuid: m,
        config: ofproto::mirror::MirrorConfig {
            name: col("name").as_str().unwrap_or_default().to_owned(),
            select_all: col("select_all").as_bool().unwrap_or(false),
            select_src: ifaces(col("select_src_port").uuids()),
            select_dst: ifaces(col("select_dst_port").uuids()),
            select_vlan: col("select_vlan")
                .integers()
                .into_iter()
                .filter_map(|v| u16::try_from(v).ok().filter(|v| *v < 4096))
                .collect(),
            output_port,
            output_vlan: col("output_vlan")
                .as_i64()
                .and_then(|v| u16::try_from(v).ok())
                .filter(|v| (1..4096).contains(v)),
            snaplen: col("snaplen")
                .as_i64()
                .and_then(|v| u16::try_from(v).ok())
                .unwrap_or(0),
        },
    }
}

/// The zones of a Datapath row that have a timeout policy.
fn ct_zones(db: &Db, dp: Uuid) -> BTreeMap<u16, BTreeMap<String, i64>> {
    let mut zones = BTreeMap::new();
    for (zone, row) in db.get("Datapath", dp, "ct_zones").pairs() {
        let (Some(zone), Some(row)) = (zone.as_i64(), row.as_uuid()) else {
            continue;
        };
        let Ok(zone) = u16::try_from(zone) else {
            continue;
        };
        let Some(policy) = db.get("CT_Zone", row, "timeout_policy").as_uuid() else {
            continue;
        };
        let timeouts = db
            .get("CT_Timeout_Policy", policy, "timeouts")
            .pairs()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_i64()?)))
            .collect();
        zones.insert(zone, timeouts);
    }
    zones
}

#[cfg(test)]
mod tests {
    use super::*;
    use ovsdb::Schema;
    use serde_json::{Value, json};

    /// The part of the Open_vSwitch schema the reconciler reads.
    fn schema() -> Schema {
        let s = |t: &str| json!({"type": t});
        let opt = |t: &str| json!({"type": {"key": t, "min": 0, "max": 1}});
        let set = |t: &str| json!({"type": {"key": t, "min": 0, "max": "unlimited"}});
        let refs = |t: &str| json!({"type": {"key": {"type": "uuid", "refTable": t}, "min": 0, "max": "unlimited"}});
        let smap =
            json!({"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}});
        Schema::from_json(&json!({
            "name": "Open_vSwitch", "version": "8.3.1",
            "tables": {
                "Open_vSwitch": {"columns": {
                    "bridges": refs("Bridge"), "next_cfg": s("integer"), "other_config": smap,
                    "datapaths": {"type": {"key": "string", "value": {"type": "uuid", "refTable": "Datapath"}, "min": 0, "max": "unlimited"}}}},
                "Bridge": {"columns": {
                    "name": s("string"), "ports": refs("Port"), "controller": refs("Controller"),
                    "datapath_type": s("string"), "fail_mode": opt("string"),
                    "protocols": set("string"), "other_config": smap, "mirrors": refs("Mirror")}},
                "Mirror": {"columns": {
                    "name": s("string"), "select_all": s("boolean"),
                    "select_src_port": refs("Port"), "select_dst_port": refs("Port"),
                    "select_vlan": set("integer"),
                    "output_port": {"type": {"key": {"type": "uuid", "refTable": "Port"}, "min": 0, "max": 1}},
                    "output_vlan": opt("integer")}},
                "Port": {"columns": {
                    "name": s("string"), "interfaces": refs("Interface"), "tag": opt("integer"),
                    "trunks": set("integer"), "vlan_mode": opt("string"),
                    "cvlans": set("integer"), "other_config": smap}},
                "Interface": {"columns": {
                    "name": s("string"), "type": s("string"), "options": smap,
                    "other_config": smap, "ofport_request": opt("integer"),
                    "ofport": opt("integer"), "mtu_request": opt("integer"), "mac": opt("string")}},
                "Controller": {"columns": {
                    "target": s("string"), "inactivity_probe": opt("integer"),
                    "max_backoff": opt("integer")}},
                "Datapath": {"columns": {
                    "ct_zones": {"type": {"key": "integer", "value": {"type": "uuid", "refTable": "CT_Zone"}, "min": 0, "max": "unlimited"}}}},
                "CT_Zone": {"columns": {"timeout_policy": {"type": {"key": {"type": "uuid", "refTable": "CT_Timeout_Policy"}, "min": 0, "max": 1}}}},
                "CT_Timeout_Policy": {"columns": {"timeouts": {"type": {"key": "string", "value": "integer", "min": 0, "max": "unlimited"}}}}
            }
        }))
        .expect("schema")
    }

    fn u(n: u128) -> String {
        Uuid(n).to_string()
    }

    fn uref(n: u128) -> Value {
        json!(["uuid", u(n)])
    }

    /// A database: `ovs-vsctl add-br br0 -- add-port br0 p1 (tag 10, ofport_request 7) --
    /// add-port br1 p1` (a name used twice), a controller and a zone timeout policy.
    fn db() -> Db {
        let mut db = Db::new(schema());
        let new = |row: Value| json!({"new": row});
        db.apply_update(&json!({
            "Open_vSwitch": {u(1): new(json!({
                "bridges": ["set", [uref(10), uref(11)]], "next_cfg": 4,
                "other_config": ["map", [["emc-insert-inv-prob", "0"]]],
                "datapaths": ["map", [["netdev", uref(50)]]]}))},
            "Bridge": {
                u(10): new(json!({"name": "br0", "ports": ["set", [uref(20), uref(21)]],
                    "controller": uref(40), "datapath_type": "netdev", "fail_mode": "secure",
                    "other_config": ["map", [["hwaddr", "02:00:00:00:00:01"]]]})),
                u(11): new(json!({"name": "br1", "ports": uref(22)}))},
            "Port": {
                u(20): new(json!({"name": "br0", "interfaces": uref(30)})),
                u(21): new(json!({"name": "p1", "interfaces": uref(31), "tag": 10})),
                u(22): new(json!({"name": "p1", "interfaces": uref(32)}))},
            "Interface": {
                u(30): new(json!({"name": "br0", "type": "internal"})),
                u(31): new(json!({"name": "p1", "type": "dummy", "ofport_request": 7, "ofport": 7})),
                u(32): new(json!({"name": "p1"}))},
            "Controller": {u(40): new(json!({"target": "tcp:127.0.0.1:6653", "inactivity_probe": 3000}))},
            "Datapath": {u(50): new(json!({"ct_zones": ["map", [[5, uref(60)]]]}))},
            "CT_Zone": {u(60): new(json!({"timeout_policy": uref(70)}))},
            "CT_Timeout_Policy": {u(70): new(json!({"timeouts": ["map", [["tcp_established", 60]]]}))}
        }))
        .expect("update");
        db
    }

    #[test]
    fn bridges_ports_and_knobs_are_read_from_the_rows() {
        let d = Desired::from_db(&db());
        assert_eq!(d.ovs, Some(Uuid(1)));
        assert_eq!(d.next_cfg, 4);
        assert_eq!(d.other_config["emc-insert-inv-prob"], "0");
        let br0 = &d.bridges["br0"];
        assert_eq!(br0.datapath_type, "netdev");
        assert_eq!(br0.fail_mode.as_deref(), Some("secure"));
        assert_eq!(br0.other_config["hwaddr"], "02:00:00:00:00:01");
        assert_eq!(br0.controllers.len(), 1);
        assert_eq!(br0.controllers[0].inactivity_probe, Some(3000));
        let names: Vec<&str> = br0.ifaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["br0", "p1"]);
        assert!(br0.ifaces[0].is_local("br0"));
        let p1 = &br0.ifaces[1];
        assert_eq!((p1.kind.as_str(), p1.tag), ("dummy", Some(10)));
        assert_eq!((p1.ofport_request, p1.db_ofport), (Some(7), Some(7)));
        assert_eq!(d.datapaths["netdev"], Uuid(50));
        assert_eq!(d.ct_zones[&5]["tcp_established"], 60);
    }

    #[test]
    fn a_name_used_twice_keeps_its_first_row_and_the_other_is_rejected() {
        let d = Desired::from_db(&db());
        assert!(d.bridges["br1"].ifaces.is_empty());
        assert_eq!(
            d.rejected,
            vec![(
                Uuid(32),
                "could not add network device p1 to ofproto (File exists)".to_owned()
            )]
        );
    }

    #[test]
    fn an_empty_database_asks_for_nothing() {
        assert_eq!(Desired::from_db(&Db::new(schema())), Desired::default());
    }
}
