//! The slow path as a service: the pipeline behind a lock, the datapath's upcall handler, flow
//! table management in `ovs-ofctl` terms, `ofproto/trace`, and revalidation of the datapath's
//! megaflows when tables or MAC entries change.
//!
//! Concurrency: PMD threads translate misses under a read lock of the pipeline; management
//! commands and the revalidator take the write lock briefly. Packets that hit cached megaflows
//! never touch the lock, so changing tables never stops forwarding.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use datapath::pmd::UpcallHandler;
use flow::FlowKey;

use crate::bridge::{Bridge, OfPort};
use crate::pipe_lock::PipeLock;
use crate::pipekey::{PipeKey, PipeMask, PipeMatch, PipeMeta};
use crate::syntax::{FlowKind, FlowSpec, FlowStats, format_match, parse_flow, parse_flows_file};
use crate::tunnel::{TunnelConfig, TunnelType};
use crate::xlate::{Fork, Pipeline};

mod bfd;
mod bond;
mod bundle;
mod flow_dump;
mod group;
mod lacp_port;
mod learn;
mod meter;
#[cfg(test)]
mod modify_tests;
mod tlv;
mod trace_packet_out;
pub use tlv::TlvModError;
mod mirror;
mod tunnel_neigh;
pub use bond::LearningPackets;
pub use tunnel_neigh::NeighbourToAsk;
mod upcall;
pub use bundle::{BundleCommit, FlowModError, FlowModOp};
pub use group::{GroupCredit, GroupModFailure, GroupStatsEntry, format_group_stats};
pub(crate) use learn::{flush_learned, flush_learned_rules};
pub use upcall::DumpStats;

/// The OpenFlow layer of one switch.
#[derive(Default)]
pub struct Ofproto {
    pub pipe: PipeLock<Pipeline>,
    /// Bumped by every change that can alter a translation; the revalidator compares it.
    generation: AtomicU64,
    /// Megaflow statistics already credited to rules, by megaflow instance: its ufid and the
    /// TSC value its PMD installed it at. A flow removed and installed again has the same
    /// ufid but counts from zero, so the ufid alone would measure it against the old count.
    credited: Mutex<HashMap<(u128, u64), (u64, u64)>>,
    /// What upcalled packets owe the rules they went through (a packet that misses is counted
    /// by its translation, not by the megaflow it installs, as in OVS): applied by the next
    /// revalidation or statistics read, so that an upcall never waits for the tables' write
    /// lock.
    pending_credits: Mutex<Vec<RuleCredit>>,
    /// What upcalled packets owe the bond buckets they went out of (OVS counts the missed
    /// packet with the translation's statistics): (bridge, bond, bucket, bytes), applied
    /// with the next revalidation's.
    pending_bond_credits: Mutex<Vec<bond::BucketCredit>>,
    revalidated: AtomicU64,
    upcall: upcall::UpcallState,
    /// What upcalls learned while the tables were busy ([`learn`]).
    pending_lessons: Mutex<learn::Lessons>,
    /// Held by whatever changes the flow tables (a flow mod, a bundle's whole commit, rule
    /// expiry), so that a commit, which stages its changes in the next version across several
    /// holds of the pipeline's write lock, never interleaves with another change.
    flow_mods: Mutex<()>,
    /// The interfaces' BFD sessions.
    pub bfd: crate::bfd::Sessions,
    /// Port changes announced to the OpenFlow connections before their commands return.
    pub port_status: crate::port_status::PortStatusSync,
}

/// How many rule credits upcalls may queue before one settles them itself.
const MAX_PENDING_CREDITS: usize = 4096;

/// Packets and bytes owed to a rule (bridge, table, rule).
type RuleCredit = ((usize, usize, crate::classifier::RuleId), u64, u64);

/// What one revalidation round did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Revalidation {
    /// Megaflows examined.
    pub flows: usize,
    /// Megaflows removed because their translation changed.
    pub removed: usize,
    /// Rules removed by idle or hard timeouts.
    pub expired_rules: usize,
    /// Recirculation ids freed (no megaflow mentioned them any more).
    pub recirc_freed: usize,
}

struct Names<'a>(&'a Bridge);

impl crate::syntax::PortNames for Names<'_> {
    fn port_number(&self, name: &str) -> Option<u32> {
        self.0.port_number(name)
    }
}

impl Ofproto {
    /// An empty switch.
    pub fn new() -> Arc<Ofproto> {
        Arc::new(Ofproto::default())
    }

    pub(crate) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Records that a packet of `bytes` bytes went through `rules` in the slow path.
    pub(crate) fn owe_rules(
        &self,
        rules: &[(usize, usize, crate::classifier::RuleId)],
        bytes: u64,
    ) {
        let mut q = self
            .pending_credits
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        q.extend(rules.iter().map(|&r| (r, 1, bytes)));
        // Without a revalidator to apply them (or between its rounds under a storm of misses),
        // the queue is settled here when the tables are free, so that it stays bounded.
        if q.len() >= MAX_PENDING_CREDITS {
            drop(q);
            if let Ok(mut p) = self.pipe.try_write() {
                self.credit_rules(&mut p, Vec::new(), Instant::now());
            }
        }
    }

    /// Credits `credits` and what upcalls owe to the rules (those removed since are skipped).
    fn credit_rules(&self, p: &mut Pipeline, credits: Vec<RuleCredit>, now: Instant) {
        let owed = std::mem::take(
            &mut *self
                .pending_credits
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for ((b, t, id), pk, by) in credits.into_iter().chain(owed) {
            if let Some(rule) = p.bridges.get_mut(b).and_then(|br| br.tables[t].get_mut(id)) {
                rule.n_packets += pk;
                rule.n_bytes += by;
                rule.used = Some(now);
            }
        }
        if self.apply_lessons(p, learn::Lessons::default(), now) {
            self.changed();
        }
    }

    /// Applies what upcalls owe the rules and bond buckets: call before reading rules'
    /// statistics.
    pub fn settle_credits(&self) {
        let empty = |q: &Mutex<Vec<_>>| q.lock().unwrap_or_else(|e| e.into_inner()).is_empty();
        let pending = !self
            .pending_credits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
            || !self
                .pending_lessons
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty();
        if pending || !empty(&self.pending_bond_credits) {
            let mut p = self.write();
            self.credit_rules(&mut p, Vec::new(), Instant::now());
            self.credit_bond_buckets(&mut p.bridges, Vec::new());
        }
    }

    /// The change counter (revalidation is due when it moved).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn read(&self) -> crate::pipe_lock::ReadGuard<'_, Pipeline> {
        self.pipe.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> crate::pipe_lock::WriteGuard<'_, Pipeline> {
        self.pipe.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The right to change the flow tables (see `flow_mods`).
    fn flow_mods(&self) -> std::sync::MutexGuard<'_, ()> {
        self.flow_mods.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `add-br`.
    pub fn add_bridge(&self, name: &str) -> Result<(), String> {
        let mut p = self.write();
        if p.bridge(name).is_some() {
            return Err(format!("bridge {name} already exists"));
        }
        p.bridges.push(Bridge::new(name));
        Ok(())
    }

    /// `del-br`: the bridge's ports leave the datapath's view of the pipeline too.
    pub fn del_bridge(&self, name: &str) -> Result<Bridge, String> {
        let mut p = self.write();
        let i = p
            .bridges
            .iter()
            .position(|b| b.name == name)
            .ok_or_else(|| format!("no bridge named {name}"))?;
        let b = p.bridges.remove(i);
        // Neighbours learned or set on the bridge's ports go with them (OVS's
        // xlate_ofport_remove()).
        for port in b.ports.values() {
            p.underlay.flush_neigh_of(&port.name);
        }
        p.underlay.flush_neigh_of(&b.name);
        drop(p);
        self.changed();
        Ok(b)
    }

    /// `add-port`: `port.ofport` must be free in the bridge and the name unused.
    pub fn add_port(&self, bridge: &str, port: OfPort) -> Result<(), String> {
        let mut p = self.write();
        if p.bridges
            .iter()
            .any(|b| b.port_by_name(&port.name).is_some())
        {
            return Err(format!("a port named {} already exists", port.name));
        }
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        if port.ofport == 0
            || (port.ofport >= crate::syntax::OFPP_MAX && port.ofport != crate::syntax::OFPP_LOCAL)
        {
            return Err(format!("ofport {} out of range", port.ofport));
        }
        if b.ports.contains_key(&port.ofport) {
            return Err(format!("ofport {} is taken in {bridge}", port.ofport));
        }
        b.ports.insert(port.ofport, port);
        drop(p);
        crate::coverage::OFPROTO_UPDATE_PORT.inc();
        self.changed();
        Ok(())
    }

    /// `add-port` of a tunnel port: `port.dp_port` is the tunnel type's shared datapath port.
    pub fn add_tunnel_port(
        &self,
        bridge: &str,
        port: OfPort,
        tunnel: TunnelConfig,
    ) -> Result<(), String> {
        let ofport = port.ofport;
        {
            let p = self.read();
            // Two tunnels that would receive exactly the same packets make receive ambiguous.
            for b in &p.bridges {
                for t in b.tunnels.values() {
                    if t.dp_port_name() == tunnel.dp_port_name()
                        && t.remote_ip == tunnel.remote_ip
                        && t.local_ip == tunnel.local_ip
                        && t.in_key == tunnel.in_key
                        && t.packet_type == tunnel.packet_type
                    {
                        return Err(format!(
                            "{}: a tunnel with the same remote_ip, local_ip, key and packet_type \
                             exists",
                            port.name
                        ));
                    }
                }
            }
        }
        self.add_port(bridge, port)?;
        let mut p = self.write();
        if let Some(b) = p.bridge_mut(bridge) {
            b.tunnels.insert(ofport, tunnel);
        }
        Ok(())
    }

    /// The tunnel configuration of port `ofport` of `bridge`, if it is a tunnel port.
    pub fn tunnel_config(&self, bridge: &str, ofport: u32) -> Option<TunnelConfig> {
        self.read().bridge(bridge)?.tunnels.get(&ofport).cloned()
    }

    /// The tunnel datapath ports in use: (name, type, UDP port, datapath number).
    pub fn tunnel_dp_ports(&self) -> Vec<(String, TunnelType, u16, u32)> {
        let p = self.read();
        let mut v: Vec<_> = p
            .bridges
            .iter()
            .flat_map(|b| {
                b.tunnels.iter().filter_map(|(n, t)| {
                    let dp = b.ports.get(n)?.dp_port?;
                    Some((t.dp_port_name(), t.kind, t.dst_port, dp))
                })
            })
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Sets a bridge's local port addresses: Ethernet (`hwaddr`) and IP addresses with prefix
    /// lengths, the local tunnel endpoints and connected routes.
    pub fn set_bridge_addrs(
        &self,
        bridge: &str,
        hwaddr: Option<flow::EthAddr>,
        addrs: Vec<(std::net::IpAddr, u8)>,
    ) -> Result<(), String> {
        let mut p = self.write();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        b.hwaddr = hwaddr;
        b.addrs = addrs;
        drop(p);
        self.changed();
        Ok(())
    }

    /// Sets (or, with `None`, clears) a bridge's configured datapath id.
    pub fn set_bridge_datapath_id(&self, bridge: &str, id: Option<u64>) -> Result<(), String> {
        let mut p = self.write();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        b.datapath_id = id;
        Ok(())
    }

    /// `tnl/route/add PREFIX BRIDGE [GW]`.
    pub fn route_add(&self, prefix: &str, bridge: &str, gw: Option<&str>) -> Result<(), String> {
        let (a, plen) = crate::tunnel::parse_prefix(prefix)?;
        let gw = gw
            .map(|g| {
                g.parse::<std::net::IpAddr>()
                    .map_err(|_| format!("'{g}' is not an IP address"))
            })
            .transpose()?;
        if gw.is_some_and(|g| g.is_ipv4() != a.is_ipv4()) {
            return Err("gateway and prefix are of different IP versions".into());
        }
        let mut p = self.write();
        if p.bridge(bridge).is_none() {
            return Err(format!("no bridge named {bridge}"));
        }
        let prefix = crate::tunnel::Route {
            prefix: crate::tunnel::in_prefix_base(a, plen),
            plen,
            bridge: bridge.to_owned(),
            gw,
            user: true,
        };
        p.underlay
            .user_routes
            .retain(|r| (r.prefix, r.plen) != (prefix.prefix, prefix.plen));
        p.underlay.user_routes.push(prefix);
        drop(p);
        self.changed();
        Ok(())
    }

    /// `tnl/route/del PREFIX`.
    pub fn route_del(&self, prefix: &str) -> Result<(), String> {
        let (a, plen) = crate::tunnel::parse_prefix(prefix)?;
        let base = crate::tunnel::in_prefix_base(a, plen);
        let mut p = self.write();
        let n = p.underlay.user_routes.len();
        p.underlay
            .user_routes
            .retain(|r| (r.prefix, r.plen) != (base, plen));
        if p.underlay.user_routes.len() == n {
            return Err(format!("no user route {prefix}"));
        }
        drop(p);
        self.changed();
        Ok(())
    }

    /// `tnl/route/show`.
    pub fn route_show(&self) -> String {
        let p = self.read();
        p.underlay.show_routes(&p.bridges)
    }

    /// `tnl/neigh/set DEVICE IP MAC`, as OVS's: any device name (a bridge's, or a port's; the
    /// entry goes when the device does), `bad IP address` and `bad MAC address` errors.
    pub fn neigh_set(&self, device: &str, ip: &str, mac: &str) -> Result<(), String> {
        let ip: std::net::IpAddr = ip.parse().map_err(|_| "bad IP address".to_string())?;
        let mac = crate::tunnel::parse_mac(mac).map_err(|_| "bad MAC address".to_string())?;
        let p = self.read();
        let changed = p.underlay.set_neigh(device, ip, mac, true);
        drop(p);
        if changed {
            self.changed();
        }
        Ok(())
    }

    /// `tnl/neigh/show`.
    pub fn neigh_show(&self) -> String {
        self.read().underlay.show_neigh()
    }

    /// `tnl/neigh/flush`.
    pub fn neigh_flush(&self) {
        self.read().underlay.flush_neigh();
        self.changed();
    }

    /// `tnl/ports/show [-v]`, as OVS's `tnl-ports.c` prints it: the tunnel datapath ports
    /// listening, by name, datapath port number and how many tunnel ports share each; with
    /// `-v`, instead, what each terminates (one line per bridge address).
    pub fn tnl_ports_show(&self, verbose: bool) -> String {
        let ports = self.tunnel_dp_ports();
        let p = self.read();
        let mut out = String::from("Listening ports:\n");
        for (name, kind, dst_port, dp) in &ports {
            if !verbose {
                let n = p
                    .bridges
                    .iter()
                    .flat_map(|b| b.tunnels.values())
                    .filter(|t| t.dp_port_name() == *name)
                    .count();
                let _ = writeln!(out, "{name} ({dp}) ref_cnt={n}");
                continue;
            }
            for b in p.bridges.iter().filter(|b| b.hwaddr.is_some()) {
                for (a, _) in &b.addrs {
                    let (et, ip) = match a {
                        std::net::IpAddr::V4(v) => ("0x0800", format!("ipv4(dst={v}")),
                        std::net::IpAddr::V6(v) => ("0x86dd", format!("ipv6(dst={v}")),
                    };
                    let l4 = if *kind == TunnelType::Gre {
                        ",proto=47)".to_owned()
                    } else {
                        format!(",proto=17),udp(dst={dst_port})")
                    };
                    let _ = writeln!(
                        out,
                        "{name} ({dp}) : eth(dst={}),eth_type({et}),{ip}{l4}",
                        b.hwaddr.unwrap_or_default()
                    );
                }
            }
        }
        out
    }

    /// `del-port`: returns the removed port.
    pub fn del_port(&self, name: &str) -> Result<OfPort, String> {
        let mut p = self.write();
        let Some((bi, n)) = p
            .bridges
            .iter()
            .enumerate()
            .find_map(|(i, b)| b.port_number(name).map(|n| (i, n)))
        else {
            return Err(format!("no port named {name}"));
        };
        // The addresses learned on the port go, here and in every other bridge (OVS's
        // bundle_flush_macs(): a host seen behind it may have moved with it).
        let gone = p.bridges[bi]
            .mac
            .lock()
            .map(|mut m| m.flush_port(n))
            .unwrap_or_default();
        for other in &p.bridges {
            if let Ok(mut m) = other.mac.lock() {
                m.forget(&gone);
            }
        }
        let b = &mut p.bridges[bi];
        let port = b.ports.remove(&n).expect("found above");
        b.tunnels.remove(&n);
        b.port_config.remove(&n);
        p.underlay.flush_neigh_of(name);
        p.patch_stats.forget(name);
        drop(p);
        crate::coverage::OFPROTO_UPDATE_PORT.inc();
        self.changed();
        Ok(port)
    }

    fn parse(&self, bridge: &str, text: &str, kind: FlowKind) -> Result<FlowSpec, String> {
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        // Text goes into the switch as `ovs-ofctl` would send it, in OpenFlow 1.0.
        parse_flow(text, kind, &Names(b))
            .map(FlowSpec::as_openflow10)
            .map_err(|e| e.to_string())
    }

    /// `add-flow BRIDGE FLOW`.
    pub fn add_flow(&self, bridge: &str, text: &str) -> Result<(), String> {
        let spec = self.parse(bridge, text, FlowKind::Add)?;
        self.add_flow_spec(bridge, &spec)
    }

    /// Adds a parsed flow (`add-flow`'s, or an OpenFlow flow mod's): a rule with the same
    /// match and priority in its table is replaced.
    pub fn add_flow_spec(&self, bridge: &str, spec: &FlowSpec) -> Result<(), String> {
        let _serial = self.flow_mods();
        let mut p = self.write();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        b.add_flow(spec, Instant::now())?;
        drop(p);
        self.changed();
        Ok(())
    }

    /// `add-flows BRIDGE FILE` (the file's text): all or nothing; every problem with its line.
    pub fn add_flows(&self, bridge: &str, text: &str) -> Result<usize, String> {
        let specs = {
            let p = self.read();
            let b = p
                .bridge(bridge)
                .ok_or_else(|| format!("no bridge named {bridge}"))?;
            parse_flows_file(text, &Names(b)).map_err(|errs| {
                errs.iter()
                    .map(|e| format!("line {}: {}", e.line, e.error))
                    .collect::<Vec<_>>()
                    .join("\n")
            })?
        };
        let specs: Vec<FlowSpec> = specs.into_iter().map(FlowSpec::as_openflow10).collect();
        let _serial = self.flow_mods();
        let mut p = self.write();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let now = Instant::now();
        for s in &specs {
            b.add_flow(s, now)?;
        }
        drop(p);
        self.changed();
        Ok(specs.len())
    }

    /// Whether a rule of the table of `spec`, with its priority, overlaps its match (a flow
    /// mod's `check_overlap` test).
    pub fn overlaps(&self, bridge: &str, spec: &FlowSpec) -> Result<bool, String> {
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        Ok(b.overlaps_in(spec, b.tables_version()))
    }

    /// `mod-flows [--strict] BRIDGE FLOW`: returns how many rules changed. As `ovs-ofctl`
    /// sends it by default (NXM), a modify that matches no cookie sets one, `cookie=V` or 0.
    pub fn mod_flows(&self, bridge: &str, text: &str, strict: bool) -> Result<usize, String> {
        let mut spec = self.parse(bridge, text, FlowKind::ModOrDel)?;
        if !spec.has_actions {
            return Err("mod-flows needs actions".into());
        }
        if spec.cookie_mask == 0 && spec.new_cookie.is_none() {
            spec.new_cookie = Some(0);
            spec.modify_cookie = true;
        }
        self.mod_flows_spec(bridge, &spec, strict)
    }

    /// Gives the rules a parsed flow selects (`mod-flows`', or an OpenFlow flow mod's) its
    /// actions, and its new cookie when it sets one: returns how many rules changed. When it
    /// selects none, it adds the flow if it has a new cookie and matches no cookie, and else
    /// does nothing, no error (OVS 3.1's `modify_may_add_flow`).
    pub fn mod_flows_spec(
        &self,
        bridge: &str,
        spec: &FlowSpec,
        strict: bool,
    ) -> Result<usize, String> {
        let _serial = self.flow_mods();
        let mut p = self.write();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        // As OVS, the actions' groups are checked only when some rule is to change.
        if let Some(g) = crate::group::missing_group(&b.groups, &spec.actions)
            && !b.select(spec, strict).is_empty()
        {
            return Err(format!("OFPBAC_BAD_OUT_GROUP: no group {g}"));
        }
        b.check_meters(&spec.actions).map_err(|e| e.to_string())?;
        if let Some(add) = spec.added_by_modify()
            && b.select(spec, strict).is_empty()
        {
            b.add_flow(&add, Instant::now())?;
            drop(p);
            self.changed();
            return Ok(0);
        }
        let n = b.mod_flows(spec, strict, Instant::now());
        drop(p);
        self.changed();
        Ok(n)
    }

    /// `del-flows [--strict] BRIDGE [FLOW]`: returns how many rules went.
    pub fn del_flows(
        &self,
        bridge: &str,
        text: Option<&str>,
        strict: bool,
    ) -> Result<usize, String> {
        let spec = text
            .map(|t| self.parse(bridge, t, FlowKind::ModOrDel))
            .transpose()?;
        // `cookie=V` without a mask sets a cookie, which a delete cannot (ovs-ofctl's error).
        if let Some(s) = &spec
            && s.modify_cookie
        {
            return Err(format!(
                "cannot set cookie (to match on a cookie, specify a mask, e.g. cookie={:#x}/-1)",
                s.cookie
            ));
        }
        self.del_flows_spec(bridge, spec.as_ref(), strict)
    }

    /// Removes the rules a parsed flow selects (`del-flows`', or an OpenFlow flow mod's), or
    /// every rule: returns how many went.
    pub fn del_flows_spec(
        &self,
        bridge: &str,
        spec: Option<&FlowSpec>,
        strict: bool,
    ) -> Result<usize, String> {
        let _serial = self.flow_mods();
        let mut p = self.write();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let n = match spec {
            None => {
                crate::coverage::OFPROTO_FLUSH.inc();
                b.clear_flows()
            }
            Some(s) => b.del_flows(s, strict),
        };
        drop(p);
        self.changed();
        Ok(n)
    }

    /// Sets or clears the bridge's fail-open rule, a NORMAL rule above every flow that
    /// `dump-flows` does not show (OVS's hidden `FAIL_OPEN_PRIORITY` rule).
    pub fn set_fail_open(&self, bridge: &str, on: bool) -> Result<(), String> {
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        if b.fail_open.swap(on, Ordering::Relaxed) != on {
            drop(p);
            self.changed();
        }
        Ok(())
    }

    /// `dump-flows BRIDGE [FLOW]` in `ovs-ofctl dump-flows` format, sorted by table and then
    /// priority (highest first) as `--sort`-less OVS output tends to be.
    pub fn dump_flows(&self, bridge: &str, filter: Option<&str>) -> Result<String, String> {
        let spec = filter
            .map(|t| self.parse(bridge, t, FlowKind::ModOrDel))
            .transpose()?;
        let rows = self.flow_entries(bridge, spec.as_ref())?;
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let mut out = String::new();
        for (mut fs, stats) in rows {
            // As `ovs-ofctl dump-flows` prints NXST_FLOW replies, which carry no flags.
            fs.flags = Default::default();
            let _ = writeln!(out, " {}", fs.format_dump(Some(&stats), &Names(b)));
        }
        Ok(out)
    }

    /// The rules a parsed flow selects loosely (every rule without one), each as a flow with
    /// its statistics, by table and then priority (highest first): what `dump-flows` and
    /// OpenFlow flow statistics report.
    pub fn flow_entries(
        &self,
        bridge: &str,
        spec: Option<&FlowSpec>,
    ) -> Result<Vec<(FlowSpec, FlowStats)>, String> {
        let mut v = Vec::new();
        self.for_each_flow_entry(bridge, spec, |f, s| v.push((f.clone(), *s)))?;
        Ok(v)
    }

    /// `show BRIDGE`: its ports, as `ovs-ofctl show` lists them (names, numbers, VLAN mode).
    pub fn show(&self, bridge: &str) -> Result<String, String> {
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let mut out = format!("{}: n_tables:254, n_rules:{}\n", b.name, b.n_rules());
        for port in b.ports.values() {
            let _ = write!(out, " {}({}):", port.ofport, port.name);
            match (&port.peer, port.dp_port) {
                (Some(peer), _) => {
                    let _ = write!(out, " patch, peer={peer}");
                }
                (None, Some(dp)) => {
                    let _ = write!(out, " datapath port {dp}");
                }
                _ => {}
            }
            if let Some(t) = port.vlan.tag {
                let _ = write!(out, ", tag={t}");
            }
            if !port.vlan.trunks.is_empty() {
                let t: Vec<String> = port.vlan.trunks.iter().map(u16::to_string).collect();
                let _ = write!(out, ", trunks={}", t.join(","));
            }
            if let Some(m) = port.vlan.mode {
                let _ = write!(out, ", vlan_mode={}", m.name());
            }
            out.push('\n');
        }
        let _ = writeln!(
            out,
            " packets sent to the controller: {}",
            b.n_controller.load(Ordering::Relaxed)
        );
        Ok(out)
    }

    /// OpenFlow ports and rules over every bridge (all tables), for `memory/show`.
    pub fn n_ports_rules(&self) -> (usize, usize) {
        let p = self.read();
        p.bridges.iter().fold((0, 0), |(ports, rules), b| {
            (ports + b.ports.len(), rules + b.n_rules())
        })
    }

    /// Every bridge (by name) with its ports (by name), for `dpif/show`.
    pub fn bridge_ports(&self) -> Vec<(String, Vec<OfPort>)> {
        let p = self.read();
        let mut v: Vec<_> = p
            .bridges
            .iter()
            .map(|b| {
                let mut ports: Vec<OfPort> = b.ports.values().cloned().collect();
                ports.sort_by(|a, b| a.name.cmp(&b.name));
                (b.name.clone(), ports)
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// The OpenFlow ports of `bridge` that have a datapath port: number and name.
    pub fn port_names(&self, bridge: &str) -> Result<Vec<(u32, String)>, String> {
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("{bridge} is not a bridge or a socket"))?;
        Ok(b.ports
            .values()
            .filter(|port| port.dp_port.is_some())
            .map(|port| (port.ofport, port.name.clone()))
            .collect())
    }

    /// The names and datapath numbers of `bridge`'s ports that have a datapath side (a dump
    /// names ports one way or the other).
    pub fn dp_port_ids(&self, bridge: &str) -> Result<Vec<String>, String> {
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        Ok(b.ports
            .values()
            .filter_map(|p| p.dp_port.map(|no| [p.name.clone(), no.to_string()]))
            .flatten()
            .collect())
    }

    /// `fdb/show BRIDGE` in OVS's layout.
    pub fn fdb_show(&self, bridge: &str) -> Result<String, String> {
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let mut out = String::from(" port  VLAN  MAC                Age\n");
        let entries = b
            .mac
            .lock()
            .map(|m| m.entries(Instant::now()))
            .unwrap_or_default();
        for (port, vlan, mac, age) in entries {
            let _ = writeln!(out, "{port:>5}  {vlan:>4}  {mac}  {age:>3}");
        }
        Ok(out)
    }

    /// `ofproto/trace`, with OVS's argument forms: `[DPNAME] ODP_FLOW [PACKET_HEX]` (a
    /// datapath flow, as `dpctl/dump-flows` prints it: its `in_port` is a datapath port, which
    /// says the bridge; DPNAME is `netdev`, `ovs-netdev` or `flowpath`) or `BRIDGE BR_FLOW
    /// [PACKET_HEX]` (an OpenFlow flow, `in_port` an OpenFlow port). `first` is the first
    /// argument. With `generate`, the translation's side effects (MAC learning) happen, as with
    /// OVS's `-generate`. `--ct-next STATE` (repeatable) says which `ct_state` conntrack gives
    /// the packet for each recirculation the trace follows, in order; without it OVS's
    /// default, `trk|new`, is assumed. A flow may give `recirc_id` to trace a later pass.
    pub fn trace(&self, first: &str, args: &[String], generate: bool) -> Result<String, String> {
        self.trace_with(first, args, generate, None)
    }

    /// [`Self::trace`], the first pass running `actions` (a packet-out's) in place of the
    /// first table's lookup when given.
    pub(crate) fn trace_with(
        &self,
        first: &str,
        args: &[String],
        generate: bool,
        actions: Option<&[crate::syntax::OfAction]>,
    ) -> Result<String, String> {
        let mut ct_next = std::collections::VecDeque::new();
        let mut pos = vec![first];
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--ct-next" {
                let v = it
                    .next()
                    .ok_or_else(|| "Missing argument for option --ct-next".to_string())?;
                ct_next.push_back(parse_ct_next(v)?);
            } else if a.starts_with('-') {
                return Err(format!("{a}: unknown option"));
            } else if pos.len() == 3 {
                return Err("too many arguments".into());
            } else {
                pos.push(a.as_str());
            }
        }
        // A trailing packet, as OVS strips it: the three-argument form must end in one.
        let mut packet = None;
        if !generate && pos.len() > 1 {
            match parse_hex(pos[pos.len() - 1]) {
                Ok(bytes) => {
                    packet = Some(bytes);
                    pos.pop();
                }
                Err(e) if pos.len() > 2 => return Err(e),
                Err(_) => {}
            }
        }
        let p = self.read();
        let flow_text = pos[pos.len() - 1];
        let (bi, ofport, mut key, skb_priority) = match trace_odp_flow(&p, &pos, flow_text) {
            Some(r) => r?,
            None => trace_br_flow(&p, &pos, flow_text)?,
        };
        // A packet-out's groups must exist (OVS's `ofproto_check_ofpacts()`).
        if actions.is_some_and(|a| crate::group::missing_group(&p.bridges[bi].groups, a).is_some())
        {
            return Err("Bad actions: OFPBAC_BAD_OUT_GROUP".into());
        }
        // A datapath flow's tags past `vlan-limit` are payload (OVS's odp_flow_key_to_flow()):
        // read again from the packet it describes.
        if packet.is_none()
            && key.vlan2_tci() & flow::key::VLAN_CFI != 0
            && flow::vlan_limit::vlan_limit() < 2
        {
            packet = Some(flow::compose::compose(&key, 0));
        }
        if let Some(bytes) = &packet {
            // The packet's fields, the flow's metadata (in_port, recirc_id, pkt_mark, ...), as
            // OVS's pkt_metadata_from_flow() then flow_extract().
            let mut k = FlowKey::new();
            flow::extract(bytes, &mut k);
            let mut meta = key.map() & flow::key::METADATA_WORDS;
            while meta != 0 {
                let w = meta.trailing_zeros() as usize;
                meta &= meta - 1;
                k.set_word(w, key.word(w));
            }
            key = k;
        }
        let mut t = String::new();
        let start = (key.in_port() == ODPP_NONE && key.recirc_id() == 0).then_some((bi, ofport));
        let mut x = trace_pass(
            &p,
            &key,
            (start, Some(bi)),
            ofport,
            PipeMeta {
                skb_priority,
                ..PipeMeta::default()
            },
            (generate, actions),
            &mut t,
        );
        let mut changed = !x.learned.is_empty() || x.neigh_learned;
        // With side effects, a trace learns as the packet would.
        let mut lessons = Vec::new();
        if generate {
            lessons.push(learn::Lessons::of(&x, key.tcp_flags()));
        }
        // Then each recirculation, in the order the passes forked them (OVS's recirc queue).
        let mut queue: std::collections::VecDeque<Fork> = std::mem::take(&mut x.forks).into();
        let mut passes = 0;
        while let Some(f) = queue.pop_front() {
            passes += 1;
            if passes > 4096 {
                let _ = write!(
                    t,
                    "\n{}\nTrace reached the recirculation limit.  Stopping the trace here.\n\
                     Queued but not processed: {} recirculations.\n",
                    "=".repeat(79),
                    queue.len() + 1
                );
                break;
            }
            let _ = write!(t, "\n{}\nrecirc({:#x})", "=".repeat(79), f.recirc_id);
            let state = match ct_next.pop_front() {
                Some(s) => {
                    let mut names = String::new();
                    crate::syntax::format_ct_state(&mut names, s);
                    let _ = write!(t, " - resume conntrack with ct_state={names}");
                    s
                }
                None => {
                    t.push_str(
                        " - resume conntrack with default ct_state=trk|new (use --ct-next to \
                         customize)",
                    );
                    flow::key::ct_state::TRK | flow::key::ct_state::NEW
                }
            };
            t.push('\n');
            let mut k = f.key.clone();
            conntrack_result(&mut k, state, f.zone);
            if let Some(nat) = &f.nat {
                simulate_nat(&mut k, nat, &mut t);
            }
            let _ = writeln!(t, "{}\n", "=".repeat(79));
            let ofport = p.recirc.get(f.recirc_id).map_or(ofport, |st| st.in_port);
            let mut x = trace_pass(
                &p,
                &k,
                (None, None),
                ofport,
                f.meta,
                (generate, None),
                &mut t,
            );
            changed |= !x.learned.is_empty() || x.neigh_learned;
            if generate {
                lessons.push(learn::Lessons::of(&x, k.tcp_flags()));
            }
            queue.extend(std::mem::take(&mut x.forks));
        }
        drop(p);
        for l in lessons {
            changed |= self.learn_from(l);
        }
        if generate && changed {
            self.changed();
        }
        Ok(t)
    }

    /// The recirculation id pool's counters (ids in use, failed allocations, passes with an
    /// unknown id, ids freed).
    pub fn recirc_stats(&self) -> crate::recirc::RecircStats {
        self.read().recirc.stats()
    }

    /// An upcall handler for one PMD thread.
    pub fn upcall_handler(self: &Arc<Self>) -> Box<dyn UpcallHandler> {
        Box::new(upcall::OfUpcall(self.clone()))
    }

    /// The generation the last revalidation saw.
    pub fn revalidated_generation(&self) -> u64 {
        self.revalidated.load(Ordering::Acquire)
    }
}

/// The datapath port number of no port (OVS's `ODPP_NONE`).
const ODPP_NONE: u32 = u32::MAX;

/// One pass of `ofproto/trace`: the `Flow:` line, the tables, `Final flow:`, `Megaflow:` and
/// `Datapath actions:`, as OVS's `ofproto_trace__()` prints them. `key` is the datapath key,
/// shown with OpenFlow port `ofport` and the registers `meta` the pass starts with; `start` as
/// [`translate_in`]'s, with the bridge the flow names (whose TLV map reads its options); a
/// packet-out's `actions`, when given, run in place of the first lookup.
fn trace_pass(
    p: &Pipeline,
    key: &FlowKey,
    (start, bridge): (Option<(usize, u32)>, Option<usize>),
    ofport: u32,
    meta: PipeMeta,
    (generate, actions): (bool, Option<&[crate::syntax::OfAction]>),
    t: &mut String,
) -> crate::xlate::XlateOut {
    let mut shown = PipeKey::new();
    shown.dp = key.clone();
    shown.dp.set_in_port(ofport);
    shown.meta = meta;
    let mut flow_line = String::new();
    format_flow(&mut flow_line, &shown);
    let _ = writeln!(t, "Flow: {flow_line}");
    let x = match actions {
        Some(a) => crate::xlate::translate_actions(p, key, start, meta.skb_priority, a, Some(t)),
        None => crate::xlate::translate_with_priority(
            p,
            key,
            start,
            meta.skb_priority,
            generate,
            Some(t),
        ),
    };
    let mut final_line = String::new();
    format_flow(&mut final_line, &x.final_flow);
    // The options as the tables saw them, to compare with what they left.
    if let Some(bi) = bridge
        && key.tun_geneve_len() > 0
    {
        let table = &p.bridges[bi].tlv_map;
        let _ = crate::xlate::geneve_to_fields(table, &mut shown.dp, &mut shown.meta);
    }
    if x.final_flow.dp == shown.dp && x.final_flow.meta == shown.meta && x.actset_output.is_none() {
        t.push_str("\nFinal flow: unchanged\n");
    } else {
        let _ = writeln!(t, "\nFinal flow: {final_line}");
    }
    let mut mask = PipeMask::new();
    mask.dp = x.mask.clone();
    // An untagged packet's megaflow needs the tag-present bit, but OVS's datapath key says
    // "untagged" by its structure, and its trace prints no VLAN: do the same.
    if key.vlan_tci() & flow::key::VLAN_CFI == 0 {
        mask.dp.set_vlan_tci(0);
    }
    // Likewise for the second tag: nothing when the packet has none (OVS's xlate_wc_finish()
    // clears it), and not its mere presence, which OVS's key holds in its structure.
    if key.vlan2_tci() & flow::key::VLAN_CFI == 0 || mask.dp.vlan2_tci() == flow::key::VLAN_CFI {
        mask.dp.set_vlan2_tci(0);
    }
    mask.meta.skb_priority = x.skb_priority_mask;
    let mut mkey = PipeKey::new();
    mkey.dp = key.clone();
    mkey.dp.set_in_port(ofport);
    mkey.meta.skb_priority = meta.skb_priority;
    let mut mf = String::new();
    format_match(
        &mut mf,
        &PipeMatch::new(&mkey, &mask),
        crate::syntax::DEFAULT_PRIORITY,
        &crate::syntax::NoPortNames,
    );
    let _ = writeln!(t, "Megaflow: {mf}");
    // A slow path flow's `userspace(...)` is the upcall's doing in OVS, not translation's:
    // its trace shows the rest, and why.
    let shown: Vec<flow::odp::Action> = if x.slow_bfd || x.slow_lacp {
        x.actions
            .iter()
            .filter(|a| !matches!(a, flow::odp::Action::Userspace(_)))
            .cloned()
            .collect()
    } else {
        x.actions.clone()
    };
    let acts = if shown.is_empty() {
        "drop".to_owned()
    } else {
        flow::odp::format_actions(&shown, None)
    };
    let _ = writeln!(t, "Datapath actions: {acts}");
    if let Some(why) = x.failed {
        // Right after the actions, with no slow path explanation, as OVS prints it.
        let _ = writeln!(t, "Translation failed ({why}), packet is dropped.");
        return x;
    }
    if x.slow_bfd || x.slow_action {
        t.push_str("This flow is handled by the userspace slow path because it:\n");
        if x.slow_bfd {
            t.push_str("  - Consists of BFD packets.\n");
        }
        if x.slow_action {
            t.push_str("  - Uses action(s) not supported by datapath.\n");
        }
    }
    if x.slow_lacp {
        t.push_str(
            "This flow is handled by the userspace slow path because it:\n  \
             - Consists of LACP packets.\n",
        );
    }
    x
}

/// A `--ct-next` state: flag names separated by `,`, ` ` or `|` (`trk,est`), checked as OVS's
/// `validate_ct_state()` checks them.
fn parse_ct_next(s: &str) -> Result<u8, String> {
    use flow::key::ct_state::{EST, INV, NAMES, NEW, RPL, TRK};
    let mut st = 0u8;
    for w in s.split([',', ' ', '|']).filter(|w| !w.is_empty()) {
        let w = w.trim_start_matches('+');
        let bit = NAMES
            .iter()
            .find(|(_, n)| *n == w)
            .map(|(b, _)| *b)
            .ok_or_else(|| format!("{w}: unknown connection tracking state flag"))?;
        st |= bit;
    }
    let mut names = String::new();
    crate::syntax::format_ct_state(&mut names, st);
    if st != 0 && st & TRK == 0 {
        return Err(format!(
            "{names}: invalid connection state: If \"trk\" is unset, no other flags are set"
        ));
    }
    if st & INV != 0 && st & !(TRK | INV) != 0 {
        return Err(format!(
            "{names}: invalid connection state: when \"inv\" is set, only \"trk\" may also \
             be set"
        ));
    }
    if st & NEW != 0 && st & EST != 0 {
        return Err(format!(
            "{names}: invalid connection state: \"new\" and \"est\" are mutually exclusive"
        ));
    }
    if st & NEW != 0 && st & RPL != 0 {
        return Err(format!(
            "{names}: invalid connection state: \"new\" and \"rpy\" are mutually exclusive"
        ));
    }
    Ok(st)
}

/// What conntrack gives a traced packet's next pass: `state` and `zone`, and for a valid
/// connection the original-direction tuple, which the trace takes to be the packet's own
/// (reversed for a reply). Mark and label stay as the pipeline left them.
fn conntrack_result(k: &mut FlowKey, state: u8, zone: u16) {
    use flow::key::ct_state::RPL;
    k.set_ct_state(state).set_ct_zone(zone);
    let ip = matches!(k.eth_type(), 0x0800 | 0x86dd);
    if !ip || !crate::fields::ct_valid_flow(k) {
        return;
    }
    let rpl = state & RPL != 0;
    let (sp, dp) = (k.tp_src(), k.tp_dst());
    let (sp, dp) = if rpl { (dp, sp) } else { (sp, dp) };
    let proto = k.nw_proto();
    k.set_ct_nw_proto(proto).set_ct_tp_src(sp).set_ct_tp_dst(dp);
    if k.eth_type() == 0x0800 {
        let (s, d) = (k.nw_src(), k.nw_dst());
        let (s, d) = if rpl { (d, s) } else { (s, d) };
        k.set_ct_nw_src(s);
        k.set_ct_nw_dst(d);
    } else {
        let (s, d) = (k.ipv6_src(), k.ipv6_dst());
        let (s, d) = if rpl { (d, s) } else { (s, d) };
        k.set_ct_ipv6_src(s).set_ct_ipv6_dst(d);
    }
}

/// OVS's trace of a forked `ct(nat(...))`: the next pass sees the packet translated to the
/// first address and port of the range.
fn simulate_nat(k: &mut FlowKey, nat: &crate::syntax::Nat, t: &mut String) {
    use crate::syntax::{NatAddrs, NatKind};
    let Some(addrs) = nat.addrs else { return };
    let v6 = matches!(addrs, NatAddrs::V6(..));
    let show = |k: &FlowKey, t: &mut String| {
        if v6 {
            let _ = writeln!(
                t,
                "ipv6_src=[{}],tp_src={},ipv6_dst=[{}],tp_dst={}",
                k.ipv6_src(),
                k.tp_src(),
                k.ipv6_dst(),
                k.tp_dst()
            );
        } else {
            let _ = writeln!(
                t,
                "nw_src={},tp_src={},nw_dst={},tp_dst={}",
                k.nw_src(),
                k.tp_src(),
                k.nw_dst(),
                k.tp_dst()
            );
        }
    };
    t.push_str("Replacing src/dst IP/ports to simulate NAT:\n Initial flow: ");
    show(k, t);
    let port = nat.ports.map(|(lo, _)| lo).filter(|&p| p != 0);
    match (nat.kind, addrs) {
        (Some(NatKind::Src), NatAddrs::V4(lo, _)) => {
            k.set_nw_src(lo);
        }
        (Some(NatKind::Dst), NatAddrs::V4(lo, _)) => {
            k.set_nw_dst(lo);
        }
        (Some(NatKind::Src), NatAddrs::V6(lo, _)) => {
            k.set_ipv6_src(lo);
        }
        (Some(NatKind::Dst), NatAddrs::V6(lo, _)) => {
            k.set_ipv6_dst(lo);
        }
        (None, _) => {}
    }
    match (nat.kind, port) {
        (Some(NatKind::Src), Some(p)) => {
            k.set_tp_src(p);
        }
        (Some(NatKind::Dst), Some(p)) => {
            k.set_tp_dst(p);
        }
        _ => {}
    }
    t.push_str(" Modified flow: ");
    show(k, t);
}

/// The datapath names `ofproto/trace` takes before a datapath flow (OVS names its userspace
/// datapath's backer `netdev`, and takes an `ovs-` prefix).
const TRACE_DP_NAMES: [&str; 3] = ["netdev", "ovs-netdev", "flowpath"];

/// Where a traced flow starts: its bridge, OpenFlow input port, key (datapath in_port) and
/// `skb_priority`.
type TraceStart = (usize, u32, FlowKey, u32);

/// `ofproto/trace`'s datapath-flow form: `None` when `text` is not a datapath flow (then it
/// is an OpenFlow flow); else where it starts, or OVS's error.
fn trace_odp_flow(p: &Pipeline, pos: &[&str], text: &str) -> Option<Result<TraceStart, String>> {
    let mut names = flow::odp::PortNames::new();
    for br in &p.bridges {
        for port in br.ports.values() {
            if let Some(dp) = port.dp_port {
                names.insert(&port.name, dp);
            }
        }
    }
    let dk = flow::odp::parse_key(text, &mut names).ok()?;
    Some((|| {
        if pos.len() == 2 && !TRACE_DP_NAMES.contains(&pos[0]) {
            return Err("Cannot find the datapath".to_owned());
        }
        let key = dk.key;
        let found = if key.recirc_id() != 0 {
            let st = p.recirc.get(key.recirc_id()).ok_or_else(|| {
                format!("no recirculation data for recirc_id {:#x}", key.recirc_id())
            })?;
            p.bridges
                .iter()
                .position(|b| b.name == st.bridge)
                .map(|b| (b, st.in_port))
        } else {
            p.of_port(key.in_port())
        };
        let (b, ofport) =
            found.ok_or_else(|| format!("no OpenFlow port for datapath port {}", key.in_port()))?;
        Ok((b, ofport, key, dk.attrs.skb_priority))
    })())
}

/// `ofproto/trace`'s OpenFlow form, `BRIDGE BR_FLOW`: where it starts.
fn trace_br_flow(p: &Pipeline, pos: &[&str], text: &str) -> Result<TraceStart, String> {
    let [bridge, _] = pos else {
        // OVS names where the datapath flow stopped parsing: the attribute it could not read.
        let mut names = flow::odp::PortNames::new();
        let at = flow::odp::parse_key(text, &mut names)
            .err()
            .map_or(0, |e| e.offset.min(text.len()));
        let start = text[..at].rfind([',', '(']).map_or(0, |i| i + 1);
        let rest = &text[start..];
        return Err(format!(
            "syntax error at {rest} (or the bridge name was omitted)"
        ));
    };
    let bi = p
        .bridges
        .iter()
        .position(|b| b.name == *bridge)
        .ok_or_else(|| format!("{bridge}: unknown bridge"))?;
    let b = &p.bridges[bi];
    let spec = parse_flow(text, FlowKind::ModOrDel, &Names(b))
        .map_err(|e| format!("Bad openflow flow syntax: {e}"))?;
    // No in_port: OVS's OFPP_NONE. A port that is not the bridge's (or has no datapath side)
    // enters the datapath as ODPP_NONE, the translation told where it starts.
    let ofport = match spec.match_.mask().dp.in_port() {
        0 => crate::syntax::OFPP_ANY,
        _ => spec.match_.key().dp.in_port(),
    };
    let mut key = spec.match_.key().dp.clone();
    // Tunnel metadata enters as the datapath has it: raw options, through the bridge's map.
    let opts = crate::tun_md::to_geneve(&b.tlv_map, &key, &spec.match_.key().meta);
    crate::tun_md::clear_all(&mut key, &mut PipeMeta::default());
    key.set_tun_geneve_opts(&opts);
    key.set_in_port(
        b.ports
            .get(&ofport)
            .and_then(|p| p.dp_port)
            .unwrap_or(ODPP_NONE),
    );
    Ok((bi, ofport, key, spec.match_.key().meta.skb_priority))
}

fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    flow::hex::eth_from_hex(s).map_err(String::from)
}

/// A flow's fields as `ofproto/trace` prints them on its `Flow:` line: the match of every
/// field the packet has, exact.
pub fn format_flow(out: &mut String, key: &PipeKey) {
    let mut mask = PipeMask::new();
    let d = &mut mask.dp;
    d.set_in_port(u32::MAX);
    // An L3 packet has no Ethernet fields: it says its packet type instead.
    if key.dp.packet_type() == 0 {
        d.set_vlan_tci(0xffff)
            .set_eth_src(flow::EthAddr::BROADCAST)
            .set_eth_dst(flow::EthAddr::BROADCAST)
            .set_eth_type(0xffff);
    } else {
        d.set_packet_type(u32::MAX);
    }
    mask.meta = key.meta;
    for r in &mut mask.meta.regs {
        if *r != 0 {
            *r = u32::MAX;
        }
    }
    if mask.meta.metadata != 0 {
        mask.meta.metadata = u64::MAX;
    }
    if mask.meta.skb_priority != 0 {
        mask.meta.skb_priority = u32::MAX;
    }
    // Tunnel metadata shows with a tunnel only (OVS's flow_wildcards_init_for_packet()).
    (mask.meta.tun_md_present, mask.meta.tun_md_tail) = (0, 0);
    let k = &key.dp;
    // Context fields show when not zero (OVS's flow_format()); a later pass also shows its
    // packet type, as OVS's megaflow-style flows do.
    if k.recirc_id() != 0 {
        d.set_recirc_id(u32::MAX).set_packet_type(u32::MAX);
    }
    if k.dp_hash() != 0 {
        d.set_dp_hash(u32::MAX);
    }
    if k.pkt_mark() != 0 {
        d.set_pkt_mark(u32::MAX);
    }
    if k.ct_state() != 0 {
        d.set_ct_state(0xff);
    }
    if k.ct_zone() != 0 {
        d.set_ct_zone(0xffff);
    }
    if k.ct_mark() != 0 {
        d.set_ct_mark(u32::MAX);
    }
    if k.ct_label() != 0 {
        d.set_ct_label(u128::MAX);
    }
    let mut st = PipeMask::new();
    st.dp.set_ct_state(0xff);
    if k.ct_nw_proto() != 0 && crate::fields::ct_valid_match(key, &st) {
        d.set_ct_nw_proto(0xff)
            .set_ct_tp_src(0xffff)
            .set_ct_tp_dst(0xffff);
        if k.eth_type() == 0x86dd {
            d.set_ct_ipv6_src(std::net::Ipv6Addr::from(u128::MAX))
                .set_ct_ipv6_dst(std::net::Ipv6Addr::from(u128::MAX));
        } else {
            d.set_ct_nw_src(std::net::Ipv4Addr::BROADCAST);
            d.set_ct_nw_dst(std::net::Ipv4Addr::BROADCAST);
        }
    }
    if k.vlan_tci() & flow::key::VLAN_CFI != 0 {
        d.set_vlan2_tci(0xffff);
    }
    // The ethertype of the packet type (OVS's get_dl_type()): none for a packet type that is
    // neither Ethernet nor named by an ethertype.
    let dl_type = match k.packet_type() {
        0 => k.eth_type(),
        pt if pt >> 16 == 1 => pt as u16,
        _ => 0,
    };
    match dl_type {
        0x0800 | 0x86dd => {
            if dl_type == 0x0800 {
                d.set_nw_src(std::net::Ipv4Addr::BROADCAST)
                    .set_nw_dst(std::net::Ipv4Addr::BROADCAST);
            } else {
                d.set_ipv6_src(std::net::Ipv6Addr::from(u128::MAX))
                    .set_ipv6_dst(std::net::Ipv6Addr::from(u128::MAX))
                    .set_ipv6_label(u32::MAX);
            }
            d.set_nw_proto(0xff)
                .set_nw_tos(0xff)
                .set_nw_ttl(0xff)
                .set_nw_frag(flow::key::nw_frag::MASK);
            if matches!(k.nw_proto(), 6 | 17 | 132 | 1 | 58) {
                d.set_tp_src(0xffff).set_tp_dst(0xffff);
            }
            if k.nw_proto() == 6 {
                d.set_tcp_flags(0x0fff);
            }
            // A neighbour solicitation or advertisement shows its target and link-layer
            // addresses (OVS's flow_format() through is_nd()).
            if dl_type == 0x86dd
                && k.nw_proto() == 58
                && k.tp_dst() == 0
                && matches!(k.tp_src(), 135 | 136)
            {
                d.set_nd_target(std::net::Ipv6Addr::from(u128::MAX))
                    .set_arp_sha(flow::EthAddr::BROADCAST)
                    .set_arp_tha(flow::EthAddr::BROADCAST);
            }
        }
        0x0806 | 0x8035 => {
            d.set_nw_src(std::net::Ipv4Addr::BROADCAST)
                .set_nw_dst(std::net::Ipv4Addr::BROADCAST)
                .set_nw_proto(0xff)
                .set_arp_sha(flow::EthAddr::BROADCAST)
                .set_arp_tha(flow::EthAddr::BROADCAST);
        }
        0x8847 | 0x8848 => {
            // Every label down to the bottom of the stack.
            d.set_mpls_lse0(u32::MAX);
            if k.mpls_lse0() & 0x100 == 0 {
                d.set_mpls_lse1(u32::MAX);
                if k.mpls_lse1() & 0x100 == 0 {
                    d.set_mpls_lse2(u32::MAX);
                }
            }
        }
        _ => {}
    }
    if !k.tun_ipv4_dst().is_unspecified() || !k.tun_ipv6_dst().is_unspecified() {
        for n in 0..crate::fields::N_TUN_METADATA {
            if crate::tun_md::present(&key.meta, n) {
                crate::fields::FieldId::tun_metadata(n)
                    .field()
                    .unwildcard(&mut mask);
            }
        }
    } else if k.tun_id() != 0 {
        // A tunnel id written before any tunnel exists still shows (OVS's
        // flow_wildcards_init_for_packet()).
        mask.dp.set_tun_id(u64::MAX);
    }
    let m = PipeMatch::new(key, &mask);
    let mut s = String::new();
    format_match(
        &mut s,
        &m,
        crate::syntax::DEFAULT_PRIORITY,
        &crate::syntax::NoPortNames,
    );
    out.push_str(&s);
}
