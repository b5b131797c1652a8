//! The difference between the configuration the database asks for ([`Desired`]) and what the
//! switch runs ([`Applied`]), applied as the smallest change: a bridge that went is removed
//! with its ports; a port whose row changed (type, options, VLANs, number) is removed and
//! added again; every other port is left alone, so it keeps forwarding and the PMD threads
//! keep running. A port that cannot be opened gets its error and the rest still applies; it is
//! tried again on the next change, as `bridge_reconfigure()` does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Instant;

use datapath::dpif::Datapath;
use ofproto::bridge::{PortVlanMode, PriorityTags, VlanMode};
use ofproto::ofproto::Ofproto;
use ofproto::syntax::OFPP_LOCAL;
use ovsdb::Uuid;

use crate::config::parse_dpid;
use crate::ofserver::{BridgeControl, ControllerSettings, FailMode, parse_protocol};
use crate::port_ops;

use super::desired::{BridgeDesired, Desired, IfaceDesired};
use super::iface_types::{self, TypeContext};
use super::local_addrs::{self, LocalAddrs};
use super::log;
use super::ofport::{self, OfportPool};
use super::port_order;

/// The datapath types flowpath's datapath stands for.
pub(crate) const DATAPATH_TYPES: &[&str] = &["netdev", "system"];

/// The switch the reconciler changes.
pub(crate) struct Switch<'a> {
    pub of: &'a Ofproto,
    pub dp: &'a Mutex<Datapath>,
    pub controllers: &'a ControllerSettings,
}

/// What one interface became.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum IfaceOutcome {
    /// Running as this OpenFlow port.
    Up(u32),
    /// Not running: its `error`.
    Failed(String),
}

/// What the switch runs, as the reconciler built it.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    bridges: BTreeMap<String, AppliedBridge>,
    /// Every interface's outcome at the last reconfiguration, by row.
    pub outcomes: BTreeMap<Uuid, IfaceOutcome>,
    /// The `error` of interfaces that run but cannot work yet (a patch port without its
    /// peer), by row.
    pub notes: BTreeMap<Uuid, String>,
    /// The interfaces added to the switch since the last status write, by row.
    pub added: BTreeSet<Uuid>,
}

#[derive(Debug, Default)]
struct AppliedBridge {
    /// Its own Ethernet and IP addresses, as last given (`local_addrs`).
    local: Option<LocalAddrs>,
    /// The datapath id configured (`other_config:datapath-id`), as applied.
    datapath_id: Option<u64>,
    ports: BTreeMap<String, AppliedPort>,
    ofports: OfportPool,
}

/// A running port and the row it was built from.
#[derive(Debug)]
struct AppliedPort {
    row: IfaceDesired,
    ofport: u32,
}

/// Whether a running port still is what the row asks for (apart from its number, checked
/// on its own, and the database's copy of it).
fn same_port(running: &IfaceDesired, wanted: &IfaceDesired) -> bool {
    let strip = |i: &IfaceDesired| IfaceDesired {
        uuid: Uuid(0),
        db_ofport: None,
        ofport_request: None,
        ..i.clone()
    };
    strip(running) == strip(wanted)
}

impl Applied {
    /// Changes the switch into what `d` asks for; every interface's outcome lands in
    /// `self.outcomes`.
    /// Gives each running bridge the addresses of its LOCAL port's kernel device (and
    /// `other_config:hwaddr`) where they changed: called on every poll, as the kernel's
    /// addresses change outside the database.
    pub fn refresh_local_addrs(&mut self, d: &Desired, sw: &Switch) {
        let kernel = match netdev::ifaddrs::interface_addresses() {
            Ok(k) => k,
            Err(e) => {
                log(
                    vlog::Level::Warn,
                    &format!("reading interface addresses: {e}"),
                );
                return;
            }
        };
        for b in d.bridges.values() {
            if let Some(ab) = self.bridges.get_mut(&b.name) {
                local_addrs::refresh(b, &mut ab.local, sw.of, &kernel);
            }
        }
    }

    pub fn reconcile(&mut self, d: &Desired, sw: &Switch, ctx: &TypeContext) {
        let previous = std::mem::take(&mut self.outcomes);
        // First everything that goes, so that a name moving between bridges is free.
        let gone: Vec<String> = self
            .bridges
            .keys()
            .filter(|b| !d.bridges.get(*b).is_some_and(supported))
            .cloned()
            .collect();
        for b in gone {
            log(vlog::Level::Info, &format!("bridge {b}: deleted"));
            if let Err(e) = port_ops::del_bridge(sw.of, sw.dp, &b) {
                log(vlog::Level::Warn, &format!("bridge {b}: {e}"));
            }
            sw.controllers.remove(&b);
            self.bridges.remove(&b);
        }
        for b in d.bridges.values().filter(|b| supported(b)) {
            self.remove_stale_ports(b, sw);
        }
        for b in d.bridges.values() {
            if !supported(b) {
                let e = format!(
                    "could not open datapath for bridge {} of type {}",
                    b.name, b.datapath_type
                );
                for i in &b.ifaces {
                    self.outcomes
                        .insert(i.uuid, IfaceOutcome::Failed(e.clone()));
                }
                continue;
            }
            self.add_bridge(b, sw, ctx);
            self.add_ports(b, sw, ctx);
            self.configure_bridge(b, sw);
        }
        for (u, e) in &d.rejected {
            self.outcomes.insert(*u, IfaceOutcome::Failed(e.clone()));
        }
        self.notes = self.patch_notes(d);
        for (u, o) in &self.outcomes {
            if let IfaceOutcome::Failed(e) = o
                && previous.get(u) != Some(o)
            {
                log(vlog::Level::Warn, e);
            }
        }
    }

    /// OVS keeps a patch port whose peer is not a running patch port naming it back, and
    /// says so in its `error`.
    fn patch_notes(&self, d: &Desired) -> BTreeMap<Uuid, String> {
        let mut patches = BTreeMap::new();
        for b in d.bridges.values() {
            for i in b.ifaces.iter().filter(|i| i.kind == "patch") {
                if matches!(self.outcomes.get(&i.uuid), Some(IfaceOutcome::Up(_)))
                    && let Some(peer) = i.options.get("peer")
                {
                    let dp_type = match b.datapath_type.as_str() {
                        "" => "system",
                        t => t,
                    };
                    patches.insert(i.name.as_str(), (peer.as_str(), i.uuid, dp_type));
                }
            }
        }
        patches
            .iter()
            .filter(|(name, (peer, ..))| patches.get(peer).is_none_or(|(back, ..)| back != *name))
            .map(|(_, (peer, u, dp_type))| {
                (
                    *u,
                    format!("No usable peer '{peer}' exists in '{dp_type}' datapath."),
                )
            })
            .collect()
    }

    /// Removes the ports of a bridge that its rows no longer ask for, or ask for differently,
    /// and frees their numbers. As `bridge_delete_or_reconfigure_ports()` does, a port whose
    /// `ofport_request` changed goes (to come back with it), and so does a port holding that
    /// number, unless that port asked for the same number.
    fn remove_stale_ports(&mut self, b: &BridgeDesired, sw: &Switch) {
        let Some(ab) = self.bridges.get_mut(&b.name) else {
            return;
        };
        let wanted: BTreeMap<&str, &IfaceDesired> =
            b.ifaces.iter().map(|i| (i.name.as_str(), i)).collect();
        let holder: BTreeMap<u32, &str> = ab
            .ports
            .iter()
            .map(|(name, p)| (p.ofport, name.as_str()))
            .collect();
        let mut stale = BTreeSet::new();
        for (name, p) in &ab.ports {
            let Some(row) = wanted
                .get(name.as_str())
                .filter(|row| same_port(&p.row, row))
            else {
                stale.insert(name.clone());
                continue;
            };
            let Some(request) = ofport::valid(row.ofport_request) else {
                continue;
            };
            if p.ofport == OFPP_LOCAL || p.ofport == request {
                continue;
            }
            match holder.get(&request) {
                None => {
                    stale.insert(name.clone());
                }
                Some(victim) => {
                    let victim_request = wanted
                        .get(victim)
                        .and_then(|v| ofport::valid(v.ofport_request));
                    if victim_request != Some(request) {
                        stale.insert((*victim).to_owned());
                        stale.insert(name.clone());
                    }
                }
            }
        }
        let now = Instant::now();
        for name in stale {
            log(
                vlog::Level::Info,
                &format!("bridge {}: deleted interface {name}", b.name),
            );
            // Gone from the database, or another type now: its device goes too (an internal
            // port's TAP), as ovs-vswitchd's; replaced by one of the same type, it stays (the
            // addresses the host gave it with it).
            let for_good = match (wanted.get(name.as_str()), ab.ports.get(&name)) {
                (Some(row), Some(p)) => row.kind != p.row.kind,
                _ => true,
            };
            if let Err(e) = port_ops::del_port(sw.of, sw.dp, &name, for_good) {
                log(vlog::Level::Warn, &format!("port {name}: {e}"));
            }
            if let Some(p) = ab.ports.remove(&name) {
                ab.ofports.release(p.ofport, now);
            }
        }
    }

    /// Makes a bridge that does not run yet, with its LOCAL port.
    fn add_bridge(&mut self, b: &BridgeDesired, sw: &Switch, ctx: &TypeContext) {
        if self.bridges.contains_key(&b.name) {
            return;
        }
        let local = iface_types::open_local(&b.name, ctx);
        let error = local.as_ref().err().cloned();
        match port_ops::add_bridge(sw.of, sw.dp, &b.name, local.ok()) {
            Ok(()) => {
                log(vlog::Level::Info, &format!("bridge {}: added", b.name));
                let mut ab = AppliedBridge::default();
                if let Some(i) = b.ifaces.iter().find(|i| i.is_local(&b.name)) {
                    self.added.insert(i.uuid);
                    ab.ports.insert(
                        i.name.clone(),
                        AppliedPort {
                            row: i.clone(),
                            ofport: OFPP_LOCAL,
                        },
                    );
                }
                self.bridges.insert(b.name.clone(), ab);
                if let (Some(e), Some(i)) = (error, b.ifaces.iter().find(|i| i.is_local(&b.name))) {
                    self.outcomes.insert(i.uuid, IfaceOutcome::Failed(e));
                }
            }
            Err(e) => {
                log(vlog::Level::Err, &format!("bridge {}: {e}", b.name));
            }
        }
    }

    /// Adds the ports of a bridge that do not run yet: first those that request a number,
    /// so that no other port takes it, then the others.
    fn add_ports(&mut self, b: &BridgeDesired, sw: &Switch, ctx: &TypeContext) {
        let Some(ab) = self.bridges.get_mut(&b.name) else {
            for i in &b.ifaces {
                let e = format!("could not open datapath for bridge {}", b.name);
                self.outcomes.insert(i.uuid, IfaceOutcome::Failed(e));
            }
            return;
        };
        let requested = |i: &&IfaceDesired| ofport::valid(i.ofport_request).is_some();
        let walk = ovs_port_walk(&b.ifaces);
        let order = walk
            .iter()
            .copied()
            .filter(requested)
            .chain(walk.iter().copied().filter(|i| !requested(i)));
        let now = Instant::now();
        for i in order {
            if i.is_local(&b.name) {
                // Its datapath side came with the bridge; a failed TAP has its error already.
                self.outcomes
                    .entry(i.uuid)
                    .or_insert(IfaceOutcome::Up(OFPP_LOCAL));
                continue;
            }
            if let Some(p) = ab.ports.get(&i.name) {
                self.outcomes.insert(i.uuid, IfaceOutcome::Up(p.ofport));
                continue;
            }
            let added = iface_types::open(i, ctx).and_then(|backend| {
                let hint = ofport::valid(i.ofport_request).or(ofport::valid(i.db_ofport));
                let fail =
                    |e: &str| format!("could not add network device {} to ofproto ({e})", i.name);
                let n = ab
                    .ofports
                    .alloc(hint, now)
                    .ok_or_else(|| fail("No space left on device"))?;
                port_ops::add_port(sw.of, sw.dp, &b.name, &i.name, n, vlan(i), backend)
                    .map(|()| n)
                    .map_err(|e| {
                        ab.ofports.release(n, now);
                        fail(&e.to_string())
                    })
            });
            match added {
                Ok(n) => {
                    self.added.insert(i.uuid);
                    log(
                        vlog::Level::Info,
                        &format!("bridge {}: added interface {} on port {n}", b.name, i.name),
                    );
                    ab.ports.insert(
                        i.name.clone(),
                        AppliedPort {
                            row: i.clone(),
                            ofport: n,
                        },
                    );
                    self.outcomes.insert(i.uuid, IfaceOutcome::Up(n));
                }
                Err(e) => {
                    self.outcomes.insert(i.uuid, IfaceOutcome::Failed(e));
                }
            }
        }
    }

    /// The bridge's own settings: its datapath id and its controllers, fail mode and versions.
    fn configure_bridge(&mut self, b: &BridgeDesired, sw: &Switch) {
        let Some(ab) = self.bridges.get_mut(&b.name) else {
            return;
        };
        let dpid = b
            .other_config
            .get("datapath-id")
            .and_then(|s| parse_dpid(s));
        if dpid != ab.datapath_id {
            if let Err(e) = sw.of.set_bridge_datapath_id(&b.name, dpid) {
                log(vlog::Level::Warn, &format!("bridge {}: {e}", b.name));
            }
            ab.datapath_id = dpid;
        }
        let mirrors = b
            .mirrors
            .iter()
            .filter(|m| {
                let has_output = m.config.output_port.is_some() || m.config.output_vlan.is_some();
                if !has_output {
                    log(
                        vlog::Level::Warn,
                        &format!(
                            "bridge {}: mirror {} does not specify output; ignoring",
                            b.name, m.config.name
                        ),
                    );
                }
                has_output
            })
            .map(|m| m.config.clone())
            .collect();
        match sw.of.set_mirrors(&b.name, mirrors) {
            Ok(refused) => {
                for name in refused {
                    log(
                        vlog::Level::Warn,
                        &format!("bridge {}: mirror {name}: too many mirrors", b.name),
                    );
                }
            }
            Err(e) => log(vlog::Level::Warn, &format!("bridge {}: {e}", b.name)),
        }
        super::bonds::configure(b, sw);
        let control = bridge_control(b);
        if control != sw.controllers.get(&b.name)
            && let Err(e) = sw.controllers.set(sw.of, &b.name, control)
        {
            log(vlog::Level::Warn, &format!("bridge {}: {e}", b.name));
        }
    }
}

/// Whether flowpath's datapath serves a bridge of this type.
fn supported(b: &BridgeDesired) -> bool {
    b.datapath_type.is_empty() || DATAPATH_TYPES.contains(&b.datapath_type.as_str())
}

/// A bridge's interfaces (`ifaces`, port by port in the database's order) in the order
/// `ovs-vswitchd` walks its wanted ports ([`port_order`]), each port's interfaces in theirs.
fn ovs_port_walk(ifaces: &[IfaceDesired]) -> Vec<&IfaceDesired> {
    let mut ports: Vec<(&str, Vec<&IfaceDesired>)> = Vec::new();
    for i in ifaces {
        match ports.last_mut() {
            Some((name, members)) if *name == i.port => members.push(i),
            _ => ports.push((&i.port, vec![i])),
        }
    }
    let names: Vec<&str> = ports.iter().map(|(n, _)| *n).collect();
    port_order::shash_order(&names)
        .into_iter()
        .flat_map(|k| ports[k].1.iter().copied())
        .collect()
}

/// A port's VLAN settings, read as OVS's `port_configure()` does: a tag outside 0..=4095 is
/// none, VLANs outside it are left out, an unknown mode is a trunk, `qinq-ethtype` is
/// 802.1ad unless it says `802.1q`, and `priority-tags` is `never` unless it says
/// `if-nonzero`, `true` or `always`.
fn vlan(i: &IfaceDesired) -> VlanMode {
    let tag = i
        .tag
        .and_then(|t| u16::try_from(t).ok())
        .filter(|&t| t <= 4095);
    let mode = i.vlan_mode.as_deref().map(|m| {
        PortVlanMode::parse(m).unwrap_or_else(|| {
            log(
                vlog::Level::Warn,
                &format!(
                    "port {}: unknown VLAN mode {m}, falling back to trunk mode",
                    i.port
                ),
            );
            PortVlanMode::Trunk
        })
    });
    if mode.is_none() && tag.is_some() && !(i.trunks.is_empty() && i.cvlans.is_empty()) {
        log(
            vlog::Level::Warn,
            &format!("port {}: ignoring trunks in favor of implicit vlan", i.port),
        );
    }
    let vlans = |v: &[i64]| -> Vec<u16> {
        v.iter()
            .filter_map(|&t| u16::try_from(t).ok())
            .filter(|&t| t <= 4095)
            .collect()
    };
    VlanMode {
        mode,
        tag,
        trunks: vlans(&i.trunks),
        cvlans: vlans(&i.cvlans),
        qinq_tpid: match i.qinq_ethtype.as_deref() {
            Some("802.1q") => 0x8100,
            _ => 0,
        },
        priority_tags: PriorityTags::parse(i.priority_tags.as_deref().unwrap_or_default()),
    }
}

/// A bridge's controller settings from its row and its Controller rows (the probe and backoff
/// of the first controller that sets them: flowpath has them per bridge).
fn bridge_control(b: &BridgeDesired) -> BridgeControl {
    let protocols = b
        .protocols
        .iter()
        .filter_map(|p| match parse_protocol(p) {
            Ok(v) => Some(v),
            Err(e) => {
                log(vlog::Level::Warn, &format!("bridge {}: {e}", b.name));
                None
            }
        })
        .collect();
    let fail_mode = b.fail_mode.as_deref().and_then(|m| FailMode::parse(m).ok());
    let ms = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
    BridgeControl {
        controllers: b.controllers.iter().map(|c| c.target.clone()).collect(),
        protocols,
        fail_mode,
        inactivity_probe: b.controllers.iter().find_map(|c| ms(c.inactivity_probe)),
        max_backoff: b.controllers.iter().find_map(|c| ms(c.max_backoff)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_datapath_id_is_16_hex_digits_not_all_zero() {
        assert_eq!(
            super::parse_dpid("0000feedfacef00d"),
            Some(0xfeed_face_f00d)
        );
        assert_eq!(
            super::parse_dpid("0000FEEDFACEF00D"),
            Some(0xfeed_face_f00d)
        );
        for bad in [
            "",
            "feedfacef00d",
            "0x00feedfacef00d",
            "000000000000000g",
            "0000000000000000",
        ] {
            assert_eq!(super::parse_dpid(bad), None, "{bad}");
        }
    }

    #[test]
    fn port_vlan_columns_are_read_as_ovs_reads_them() {
        use ofproto::bridge::PortVlanMode;
        let port = |tag: Option<i64>, mode: &str, cvlans: &[i64], ethtype: Option<&str>| {
            super::vlan(&super::IfaceDesired {
                tag,
                vlan_mode: (!mode.is_empty()).then(|| mode.to_owned()),
                cvlans: cvlans.to_vec(),
                qinq_ethtype: ethtype.map(str::to_owned),
                ..super::IfaceDesired::default()
            })
        };
        let q = port(Some(100), "dot1q-tunnel", &[10, 4096, -1, 20], None);
        assert_eq!(q.kind(), PortVlanMode::Dot1qTunnel);
        assert_eq!((q.tag, q.cvlans.as_slice()), (Some(100), &[10, 20][..]));
        assert_eq!(q.tunnel_tpid(), 0x88a8);
        let dot1q = port(Some(100), "dot1q-tunnel", &[], Some("802.1q"));
        assert_eq!(dot1q.tunnel_tpid(), 0x8100);
        // Anything but 802.1q is 802.1ad.
        assert_eq!(port(None, "", &[], Some("802.1x")).tunnel_tpid(), 0x88a8);
        // A tag out of range is none; an unknown mode is a trunk.
        assert_eq!(port(Some(4096), "", &[], None).kind(), PortVlanMode::Trunk);
        assert_eq!(
            port(Some(5), "bogus", &[], None).kind(),
            PortVlanMode::Trunk
        );
    }
}
