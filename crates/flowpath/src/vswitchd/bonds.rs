//! Bonds from the database: a Port with more than one Interface is a bond (OVS's
//! `port_configure_bond()` in `vswitchd/bridge.c`), its settings read from the Port's
//! `bond_mode`, `bond_updelay`, `bond_downdelay`, `bond_active_slave` and `other_config`
//! (`bond-primary`, `bond-hash-basis`, `bond-rebalance-interval`, `bond-detect-mode`,
//! `lb-output-action`,
//! `lacp-fallback-ab`, `all-members-active`, and for LACP `lacp-system-id`,
//! `lacp-system-priority`, `lacp-time`) with the `lacp` column and each member Interface's
//! `other_config` (`lacp-port-id`, `lacp-port-priority`, `lacp-aggregation-key`); the active
//! member's address is written back to `bond_active_slave`. A Port of one Interface with
//! `lacp` set runs LACP without a bond (OVS's `port_configure()`), with the same settings.

use std::collections::BTreeMap;

use flow::EthAddr;
use ofproto::bond::{BondConfig, BondMode};
use ofproto::bond_lacp::LacpConfig;
use ofproto::lacp::{MemberSettings, Settings};
use ofproto::lacp_port::LacpPortConfig;
use ovsdb::{Db, Uuid};

use super::desired::BridgeDesired;
use super::reconcile::Switch;

/// One bond Port as the database has it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BondDesired {
    pub uuid: Uuid,
    pub name: String,
    /// The members' interface names, in interface uuid order.
    pub members: Vec<String>,
    pub bond_mode: Option<String>,
    pub updelay: i64,
    pub downdelay: i64,
    pub active_slave: Option<String>,
    pub other_config: BTreeMap<String, String>,
    /// The `lacp` column (`active`, `passive`, `off`).
    pub lacp: Option<String>,
    /// Each member's LACP settings from its Interface's `other_config` (port id 0: its
    /// OpenFlow port).
    pub member_lacp: Vec<MemberSettings>,
}

/// The bond of Port row `p` with interfaces `members` (more than one), or none.
pub(crate) fn read(db: &Db, p: Uuid, members: Vec<String>, ifaces: &[Uuid]) -> Option<BondDesired> {
    if members.len() < 2 {
        return None;
    }
    Some(read_port(db, p, members, ifaces))
}

/// Port row `p` of one interface `members` when its `lacp` column is set (OVS runs LACP on
/// such a Port too, without a bond), or none.
pub(crate) fn read_lacp_port(
    db: &Db,
    p: Uuid,
    members: Vec<String>,
    ifaces: &[Uuid],
) -> Option<BondDesired> {
    let lacp = db.get("Port", p, "lacp");
    (members.len() == 1 && lacp.as_str().is_some()).then(|| read_port(db, p, members, ifaces))
}

/// The bond-related columns of Port row `p` with interfaces `members`.
fn read_port(db: &Db, p: Uuid, members: Vec<String>, ifaces: &[Uuid]) -> BondDesired {
    let member_lacp = ifaces
        .iter()
        .map(|&i| member_lacp(&db.get("Interface", i, "other_config").string_map()))
        .collect();
    let col = |c: &str| db.get("Port", p, c);
    BondDesired {
        uuid: p,
        name: col("name").as_str().unwrap_or_default().to_owned(),
        members,
        bond_mode: col("bond_mode").as_str().map(str::to_owned),
        updelay: col("bond_updelay").as_i64().unwrap_or(0),
        downdelay: col("bond_downdelay").as_i64().unwrap_or(0),
        active_slave: col("bond_active_slave").as_str().map(str::to_owned),
        other_config: col("other_config").string_map(),
        lacp: col("lacp").as_str().map(str::to_owned),
        member_lacp,
    }
}

/// An `other_config` integer as OVS's `smap_get_int()` reads it (0 when absent or bad).
fn int(m: &BTreeMap<String, String>, k: &str) -> i64 {
    m.get(k).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// A member's LACP settings (OVS's `iface_configure_lacp()`).
fn member_lacp(oc: &BTreeMap<String, String>) -> MemberSettings {
    let u16_in = |v: i64, lo: i64| (lo..=65535).contains(&v).then_some(v as u16);
    MemberSettings {
        port_id: u16_in(int(oc, "lacp-port-id"), 1).unwrap_or(0),
        port_priority: u16_in(int(oc, "lacp-port-priority"), 1).unwrap_or(u16::MAX),
        key: u16_in(int(oc, "lacp-aggregation-key"), 0).unwrap_or(0),
    }
}

/// The bond's LACP (OVS's `port_configure_lacp()`): `None` when `lacp` is off or absent,
/// unknown, or the system id is bad (warned about as OVS does). `bridge_mac` is the
/// default system id.
fn lacp_config(d: &BondDesired, bridge_mac: EthAddr, warn: &mut Vec<String>) -> Option<LacpConfig> {
    let name = &d.name;
    let active = match d.lacp.as_deref()? {
        "off" => return None,
        "active" => true,
        "passive" => false,
        other => {
            warn.push(format!("port {name}: unknown LACP mode {other}"));
            return None;
        }
    };
    let oc = &d.other_config;
    let sys_id = match oc.get("lacp-system-id") {
        None => bridge_mac,
        Some(s) => match ofproto::tunnel::parse_mac(s) {
            Ok(m) => m,
            Err(_) => {
                warn.push(format!(
                    "port {name}: LACP system ID ({s}) must be an Ethernet address."
                ));
                return None;
            }
        },
    };
    if sys_id == EthAddr::ZERO {
        warn.push(format!("port {name}: Invalid zero LACP system ID."));
        return None;
    }
    let prio = int(oc, "lacp-system-priority");
    let sys_priority = if (1..=65535).contains(&prio) {
        prio as u16
    } else if d.members.len() > 1 {
        // A bond (more than one link) prefers bondable links.
        u16::MAX - 1
    } else {
        u16::MAX
    };
    let settings = Settings {
        active,
        sys_id,
        sys_priority,
        fast: oc
            .get("lacp-time")
            .is_some_and(|t| t.eq_ignore_ascii_case("fast")),
        fallback_ab: oc.get("lacp-fallback-ab").is_some_and(|v| v == "true"),
    };
    Some(LacpConfig {
        settings,
        members: d.member_lacp.clone(),
    })
}

fn log(level: vlog::Level, msg: &str) {
    if let Some(m) = vlog::module("bridge") {
        m.log(level, msg);
    }
}

/// The bond's settings, with OVS's defaults; what OVS would warn about goes to `warn`.
fn config(
    d: &BondDesired,
    mac: impl Fn(&str) -> EthAddr,
    bridge_mac: EthAddr,
    warn: &mut Vec<String>,
) -> BondConfig {
    let name = &d.name;
    let mode = match d.bond_mode.as_deref() {
        None => {
            warn.push(format!(
                "port {name}: Using the default bond_mode active-backup. Note that in previous \
                 versions, the default bond_mode was balance-slb"
            ));
            BondMode::ActiveBackup
        }
        Some(s) => BondMode::parse(s).unwrap_or_else(|| {
            warn.push(format!(
                "port {name}: unknown bond_mode {s}, defaulting to active-backup"
            ));
            BondMode::ActiveBackup
        }),
    };
    let oc = |k: &str| d.other_config.get(k).map(String::as_str);
    let int = |k: &str, dflt: i64| oc(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(dflt);
    let flag = |k: &str| oc(k) == Some("true");
    if let Some(m) = oc("bond-detect-mode").filter(|m| *m != "carrier" && *m != "miimon") {
        warn.push(format!(
            "port {name}: unsupported bond-detect-mode {m}, defaulting to carrier"
        ));
    }
    let members: Vec<(&str, EthAddr)> = d.members.iter().map(|n| (n.as_str(), mac(n))).collect();
    let mut c = BondConfig::new(name, mode, &members);
    let clamp = |v: i64| u32::try_from(v.max(0)).unwrap_or(u32::MAX);
    c.updelay = clamp(d.updelay);
    c.downdelay = clamp(d.downdelay);
    c.basis = int("bond-hash-basis", 0) as u32;
    let rebalance = clamp(int("bond-rebalance-interval", 10_000));
    c.rebalance_interval = if rebalance != 0 && rebalance < 1000 {
        1000
    } else {
        rebalance
    };
    c.lacp_fallback_ab = flag("lacp-fallback-ab");
    c.lacp = lacp_config(d, bridge_mac, warn);
    c.all_members_active = flag("all-members-active");
    c.lb_output = flag("lb-output-action");
    if mode == BondMode::ActiveBackup || c.lacp_fallback_ab {
        c.primary = oc("bond-primary").map(str::to_owned);
    }
    c.active_mac = d
        .active_slave
        .as_deref()
        .and_then(|s| ofproto::tunnel::parse_mac(s).ok());
    c
}

/// Sets bridge `b`'s bonds in the switch; logs OVS's warnings when they change.
pub(crate) fn configure(b: &BridgeDesired, sw: &Switch) {
    let mut warn = Vec::new();
    let configs: Vec<BondConfig> = {
        let pipe = sw.of.pipe.read().unwrap_or_else(|e| e.into_inner());
        let ofb = pipe.bridge(&b.name);
        let mac = |name: &str| member_mac(ofb, name);
        let bridge_mac = bridge_mac(ofb);
        b.bonds
            .iter()
            .map(|d| config(d, mac, bridge_mac, &mut warn))
            .collect()
    };
    match sw.of.set_bonds(&b.name, configs) {
        Ok(true) => {
            warn.iter().for_each(|w| log(vlog::Level::Warn, w));
            crate::ofserver::sync_lb_output(sw.of, sw.dp);
        }
        Ok(false) => {}
        Err(e) => log(vlog::Level::Warn, &format!("bridge {}: {e}", b.name)),
    }
    configure_lacp_ports(b, sw);
}

/// Sets bridge `b`'s Ports of one Interface with LACP in the switch (OVS's
/// `port_configure_lacp()` for a Port without a bond); logs OVS's warnings when they change.
fn configure_lacp_ports(b: &BridgeDesired, sw: &Switch) {
    let mut warn = Vec::new();
    let configs: Vec<LacpPortConfig> = {
        let pipe = sw.of.pipe.read().unwrap_or_else(|e| e.into_inner());
        let ofb = pipe.bridge(&b.name);
        let bridge_mac = bridge_mac(ofb);
        (b.lacp_ports.iter())
            .filter_map(|d| {
                let member = d.members.first()?;
                Some(LacpPortConfig {
                    name: d.name.clone(),
                    member: member.clone(),
                    mac: member_mac(ofb, member),
                    lacp: lacp_config(d, bridge_mac, &mut warn)?,
                })
            })
            .collect()
    };
    match sw.of.set_lacp_ports(&b.name, configs) {
        Ok(true) => warn.iter().for_each(|w| log(vlog::Level::Warn, w)),
        Ok(false) => {}
        Err(e) => log(vlog::Level::Warn, &format!("bridge {}: {e}", b.name)),
    }
}

/// The bridge's address (its LOCAL port's), LACP's default system id.
fn bridge_mac(ofb: Option<&ofproto::bridge::Bridge>) -> EthAddr {
    ofb.and_then(|ob| {
        let local = ob.ports.get(&ofproto::syntax::OFPP_LOCAL)?;
        Some(crate::ofserver::port_mac(ob, local))
    })
    .unwrap_or(EthAddr::ZERO)
}

/// A member's Ethernet address: its kernel device's, else the one its OpenFlow port shows.
fn member_mac(ofb: Option<&ofproto::bridge::Bridge>, name: &str) -> EthAddr {
    let path = std::path::Path::new("/sys/class/net")
        .join(name)
        .join("address");
    if let Some(m) = std::fs::read_to_string(path)
        .ok()
        .and_then(|s| ofproto::tunnel::parse_mac(s.trim()).ok())
    {
        return m;
    }
    ofb.and_then(|b| {
        b.port_by_name(name)
            .map(|p| crate::ofserver::port_mac(b, p))
    })
    .unwrap_or(EthAddr([0; 6]))
}

/// The `bond_active_slave` of each bond Port of `b`, whose bridge in the pipeline is `ofb`:
/// `(port row, value)`.
pub(crate) fn active_slaves(
    b: &BridgeDesired,
    ofb: Option<&ofproto::bridge::Bridge>,
) -> Vec<(Uuid, Option<String>)> {
    let macs = ofb.map_or_else(Vec::new, ofproto::bridge::Bridge::bond_active_macs);
    b.bonds
        .iter()
        .map(|d| {
            let mac = macs
                .iter()
                .find(|(n, _)| *n == d.name)
                .and_then(|(_, m)| *m)
                .map(|m| m.to_string());
            (d.uuid, mac)
        })
        .collect()
}
