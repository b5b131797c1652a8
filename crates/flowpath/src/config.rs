//! The TOML configuration: datapath knobs under OVS's names, bridges and their ports.
//!
//! ```toml
//! [datapath]
//! pmd-cpu-mask = "0x2"
//! emc-insert-inv-prob = 100
//! flow-limit = 200000
//! max-idle = 10000                 # ms
//! pmd-rxq-assign = "cycles"        # or "group", "roundrobin"
//! # Datapath flows in dpctl/add-flow syntax, installed before traffic starts (until the
//! # OpenFlow layer exists, this is how a switch is programmed).
//! dp-flows = ["in_port(p0),eth_type(0x0800),ipv4(frag=no), actions:p1"]
//!
//! [[bridge]]
//! name = "br0"
//!
//! [[bridge.port]]
//! name = "p0"
//! type = "pcap"
//! ofport = 1
//! options = { rx_pcap = "in.pcap" }
//!
//! [conntrack]
//! maxconns = 100000
//! tcp_seq_chk = true
//! default_limit = 0                # connections per zone without a limit of its own; 0: none
//! ipf_v4 = true                    # fragment reassembly in front of ct()
//! ipf_v6 = true
//! ipf_min_frag_v4 = 1200           # smallest non-last fragment, IP header included (>= 400)
//! ipf_min_frag_v6 = 1280
//! ipf_max_nfrags = 1000            # fragments held at once, per PMD thread (<= 5000)
//!
//! [conntrack.default_timeouts]     # seconds, by timeout class
//! udp_first = 60
//!
//! [[conntrack.zone]]
//! zone = 5
//! limit = 1000
//! tcp_established = 3600
//!
//! [metrics]
//! listen = "127.0.0.1:9477"        # the Prometheus endpoint, GET /metrics (docs/metrics.md)
//! ```
//!
//! Datapath port numbers are given in order of appearance, from 1. Relative paths in port
//! options are relative to the configuration file. Every problem is reported with its line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub datapath: DatapathSection,
    #[serde(default)]
    pub bridge: Vec<Bridge>,
    #[serde(default)]
    pub tunnel: TunnelSection,
    #[serde(default)]
    pub conntrack: ConntrackSection,
    #[serde(default)]
    pub metrics: MetricsSection,
}

/// `[metrics]`: the Prometheus endpoint (off without `listen`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// `IP:PORT` to serve `GET /metrics` on.
    pub listen: Option<String>,
}

impl MetricsSection {
    /// The address to listen on, checked by [`parse`].
    pub fn listen_addr(&self) -> Option<std::net::SocketAddr> {
        self.listen
            .as_deref()
            .and_then(|a| crate::metrics::parse_listen(a).ok())
    }
}

/// `[conntrack]`: the connection tracker's and the fragment reassembler's settings, applied
/// when the switch starts (the `dpctl/ct-*` and `dpctl/ipf-*` commands change them while it
/// runs). Keys are OVS's words: the timeout classes are `ovs-vsctl add-zone-tp`'s.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConntrackSection {
    /// Most connections in the table (`ct-set-maxconns`; default 3000000).
    pub maxconns: Option<u32>,
    /// TCP sequence checking (`ct-enable-tcp-seq-chk`; default on).
    pub tcp_seq_chk: Option<bool>,
    /// The limit of zones without one of their own (`ct-set-limits default=L`; 0: none).
    pub default_limit: Option<u32>,
    /// The default timeout policy's seconds by class (`ct-set-timeout-policy default ...`).
    #[serde(default)]
    pub default_timeouts: toml::Table,
    /// `[[conntrack.zone]]`: `zone`, optional `limit`, and timeout classes (checked in
    /// [`parse`]).
    #[serde(default)]
    pub zone: Vec<toml::Table>,
    /// IPv4 fragment reassembly (`ipf-set-enabled v4`; default on).
    pub ipf_v4: Option<bool>,
    /// IPv6 fragment reassembly (default on).
    pub ipf_v6: Option<bool>,
    /// Smallest IPv4 non-last fragment, IP header included (`ipf-set-min-frag v4`; 1200).
    pub ipf_min_frag_v4: Option<u32>,
    /// Smallest IPv6 non-last fragment (1280).
    pub ipf_min_frag_v6: Option<u32>,
    /// Fragments held at once by each PMD thread's reassembler (`ipf-set-max-nfrags`; 1000).
    pub ipf_max_nfrags: Option<u32>,
}

/// One `[[conntrack.zone]]` entry, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtZone {
    pub zone: u16,
    /// The zone's own connection limit (`ct-set-limits zone=N,limit=L`; 0: no connection is
    /// committed in the zone).
    pub limit: Option<u32>,
    /// The zone's timeout policy, the classes not given taken from the default policy.
    pub timeouts: Vec<(conntrack::TimeoutClass, u32)>,
}

/// Where in `[conntrack]` a problem is, to find its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CtTable {
    Main,
    DefaultTimeouts,
    /// The n-th `[[conntrack.zone]]` (from 0).
    Zone(usize),
}

/// A problem in `[conntrack]`: where, which key, what.
#[derive(Debug)]
struct CtProblem {
    table: CtTable,
    key: String,
    message: String,
}

/// A whole number in `0..=max`.
fn ct_number(v: &toml::Value, max: u32) -> Option<u32> {
    v.as_integer()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n <= max)
}

/// The timeout classes' names, for messages.
fn timeout_class_names() -> String {
    conntrack::TimeoutClass::ALL
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads one timeout `key = value` of a policy (`what` names it in messages).
fn ct_timeout(
    what: &str,
    key: &str,
    v: &toml::Value,
) -> Result<(conntrack::TimeoutClass, u32), String> {
    let class = conntrack::TimeoutClass::from_name(key)
        .ok_or_else(|| format!("{what}: unknown timeout class '{key}'"))?;
    let secs = ct_number(v, u32::MAX)
        .ok_or_else(|| format!("{what}: {key} = {v}: expected seconds (0-4294967295)"))?;
    Ok((class, secs))
}

impl ConntrackSection {
    /// The default policy's timeouts.
    pub fn default_timeout_values(&self) -> Vec<(conntrack::TimeoutClass, u32)> {
        self.default_timeouts
            .iter()
            .filter_map(|(k, v)| ct_timeout("", k, v).ok())
            .collect()
    }

    /// The fragment reassembly settings: OVS's defaults with what is given.
    pub fn frag_config(&self) -> conntrack::frag::FragConfig {
        let mut c = conntrack::frag::FragConfig::default();
        if let Some(on) = self.ipf_v4 {
            c.enabled_v4 = on;
        }
        if let Some(on) = self.ipf_v6 {
            c.enabled_v6 = on;
        }
        if let Some(n) = self.ipf_min_frag_v4 {
            c.min_frag_size_v4 = n as usize;
            // As `dpctl/ipf-set-min-frag v4` (OVS's `ipf_set_min_frag`).
            c.max_frags_per_datagram =
                conntrack::frag::FragConfig::v4_frags_per_datagram(c.min_frag_size_v4);
        }
        if let Some(n) = self.ipf_min_frag_v6 {
            c.min_frag_size_v6 = n as usize;
        }
        if let Some(n) = self.ipf_max_nfrags {
            c.max_frags = n as usize;
        }
        c
    }

    /// Sets the connection tracker's knobs, the default policy, then each zone's limit and
    /// policy (a zone's policy starts from the default's, as `ct-set-timeout-policy` does).
    pub fn apply(&self, ct: &conntrack::Conntrack) {
        if let Some(n) = self.maxconns {
            ct.set_maxconns(n);
        }
        if let Some(on) = self.tcp_seq_chk {
            ct.set_tcp_seq_chk(on);
        }
        if let Some(n) = self.default_limit {
            ct.set_default_limit(n);
        }
        let d = self.default_timeout_values();
        if !d.is_empty() {
            ct.set_timeouts(None, &d);
        }
        for z in self.check_zones().0 {
            if let Some(l) = z.limit {
                ct.set_zone_limit(z.zone, l);
            }
            if !z.timeouts.is_empty() {
                ct.set_timeouts(Some(z.zone), &z.timeouts);
            }
        }
    }

    /// The zone entries that are right, and the problems of the others.
    fn check_zones(&self) -> (Vec<CtZone>, Vec<CtProblem>) {
        let mut zones: Vec<CtZone> = Vec::new();
        let mut problems = Vec::new();
        for (i, t) in self.zone.iter().enumerate() {
            let table = CtTable::Zone(i);
            let mut problem = |key: &str, message: String| {
                problems.push(CtProblem {
                    table,
                    key: key.to_owned(),
                    message,
                })
            };
            let zone = match t.get("zone") {
                None => {
                    problem(
                        "zone",
                        format!("conntrack zone entry {}: needs zone", i + 1),
                    );
                    continue;
                }
                Some(v) => match ct_number(v, u32::from(u16::MAX)) {
                    Some(z) => z as u16,
                    None => {
                        problem(
                            "zone",
                            format!(
                                "conntrack zone entry {}: zone = {v}: expected a zone (0-65535)",
                                i + 1
                            ),
                        );
                        continue;
                    }
                },
            };
            if zones.iter().any(|z| z.zone == zone) {
                problem("zone", format!("conntrack zone {zone}: given twice"));
                continue;
            }
            let what = format!("conntrack zone {zone}");
            let mut entry = CtZone {
                zone,
                limit: None,
                timeouts: Vec::new(),
            };
            let mut ok = true;
            for (k, v) in t {
                match k.as_str() {
                    "zone" => {}
                    "limit" => match ct_number(v, u32::MAX) {
                        Some(l) => entry.limit = Some(l),
                        None => {
                            ok = false;
                            problem(
                                k,
                                format!(
                                    "{what}: limit = {v}: expected connections \
                                     (0-4294967295; 0: none committed)"
                                ),
                            );
                        }
                    },
                    _ => match ct_timeout(&what, k, v) {
                        Ok(c) => entry.timeouts.push(c),
                        Err(m) => {
                            ok = false;
                            let m = if conntrack::TimeoutClass::from_name(k).is_none() {
                                format!(
                                    "{what}: unknown key '{k}' (known: zone, limit, {})",
                                    timeout_class_names()
                                )
                            } else {
                                m
                            };
                            problem(k, m);
                        }
                    },
                }
            }
            if ok {
                zones.push(entry);
            }
        }
        (zones, problems)
    }

    /// Every problem, for [`parse`].
    fn problems(&self) -> Vec<CtProblem> {
        let mut out = Vec::new();
        for (k, v) in &self.default_timeouts {
            if let Err(mut message) = ct_timeout("conntrack default_timeouts", k, v) {
                if conntrack::TimeoutClass::from_name(k).is_none() {
                    message.push_str(&format!(" (known: {})", timeout_class_names()));
                }
                out.push(CtProblem {
                    table: CtTable::DefaultTimeouts,
                    key: k.clone(),
                    message,
                });
            }
        }
        let lbound = conntrack::frag::FragConfig::MIN_FRAG_SIZE_LBOUND;
        for (key, v) in [
            ("ipf_min_frag_v4", self.ipf_min_frag_v4),
            ("ipf_min_frag_v6", self.ipf_min_frag_v6),
        ] {
            if let Some(v) = v
                && (v as usize) < lbound
            {
                out.push(CtProblem {
                    table: CtTable::Main,
                    key: key.into(),
                    message: format!(
                        "conntrack: {key} = {v}: below {lbound}, the smallest OVS allows"
                    ),
                });
            }
        }
        let ubound = conntrack::frag::FragConfig::MAX_FRAGS_UBOUND;
        if let Some(v) = self.ipf_max_nfrags
            && v as usize > ubound
        {
            out.push(CtProblem {
                table: CtTable::Main,
                key: "ipf_max_nfrags".into(),
                message: format!(
                    "conntrack: ipf_max_nfrags = {v}: above {ubound}, the largest OVS allows"
                ),
            });
        }
        out.extend(self.check_zones().1);
        out
    }
}

/// The line of `key = ...` in the `[conntrack]` table `t`, else the table's header line (a
/// key missing), else the first `key =` anywhere (an inline table).
fn ct_key_line(text: &str, t: CtTable, key: &str) -> Option<usize> {
    let is_key = |l: &str| {
        l.trim_start()
            .strip_prefix(key)
            .is_some_and(|r| r.trim_start().starts_with('='))
    };
    let mut zones_seen = 0;
    let mut header = None;
    for (i, l) in text.lines().enumerate() {
        let h: String = l
            .split('#')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        if h.starts_with('[') {
            if header.is_some() {
                break;
            }
            let here = match (t, h.as_str()) {
                (CtTable::Main, "[conntrack]") => true,
                (CtTable::DefaultTimeouts, "[conntrack.default_timeouts]") => true,
                (CtTable::Zone(n), "[[conntrack.zone]]") => {
                    zones_seen += 1;
                    zones_seen == n + 1
                }
                _ => false,
            };
            header = here.then_some(i + 1);
            continue;
        }
        if header.is_some() && is_key(l) {
            return Some(i + 1);
        }
    }
    header.or_else(|| text.lines().position(is_key).map(|i| i + 1))
}

/// `[tunnel]`: the underlay's routes and neighbours, as `tnl/route/add` and `tnl/neigh/set`
/// take them. Connected routes come from the bridges' `ip` addresses.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunnelSection {
    /// `PREFIX/LEN BRIDGE [GATEWAY]`.
    #[serde(default)]
    pub route: Vec<String>,
    /// `BRIDGE IP MAC`.
    #[serde(default)]
    pub neigh: Vec<String>,
}

/// `[datapath]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DatapathSection {
    #[serde(default)]
    pub pmd_cpu_mask: Option<String>,
    #[serde(default = "default_emc")]
    pub emc_insert_inv_prob: u32,
    #[serde(default = "default_flow_limit")]
    pub flow_limit: usize,
    #[serde(default = "default_max_idle")]
    pub max_idle: u64,
    #[serde(default)]
    pub pmd_rxq_assign: Option<String>,
    /// `pmd-maxsleep`: microseconds a PMD thread may sleep between polls while its queues
    /// are nearly idle (OVS 3.1's load-based sleep; at most 10 000). 0, the default, spins.
    #[serde(default)]
    pub pmd_maxsleep: u64,
    /// `pmd-idle-wait`: a PMD thread whose rx queues are all of the port kinds OVS polls from
    /// its main thread (`afpacket`, `tap`, internal, `dummy`) blocks on them once idle instead
    /// of spinning its core. On by default; `false` busy-polls them as any PMD queue.
    #[serde(default = "default_true")]
    pub pmd_idle_wait: bool,
    #[serde(default)]
    pub dp_flows: Vec<String>,
    /// `dpdk-init`: `true` or `"try"` start DPDK (cargo feature `dpdk`).
    #[serde(default)]
    pub dpdk_init: Option<toml::Value>,
    /// `dpdk-extra`: more EAL arguments.
    #[serde(default)]
    pub dpdk_extra: Option<String>,
    /// `dpdk-socket-mem`: MB of memory per NUMA socket (`"1024,0"`).
    #[serde(default)]
    pub dpdk_socket_mem: Option<String>,
    /// `dpdk-hugepage-dir`: the hugetlbfs mount DPDK uses.
    #[serde(default)]
    pub dpdk_hugepage_dir: Option<String>,
    /// `dpdk-lcore-mask`: the cores of DPDK's own threads (`"0x1"`).
    #[serde(default)]
    pub dpdk_lcore_mask: Option<String>,
}

impl DatapathSection {
    /// The DPDK settings, by OVS's names.
    pub(crate) fn dpdk_settings(&self) -> crate::dpdk::DpdkSettings {
        crate::dpdk::DpdkSettings::from_keys(|k| match k {
            "dpdk-init" => self.dpdk_init.as_ref().map(|v| match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
            "dpdk-extra" => self.dpdk_extra.clone(),
            "dpdk-socket-mem" => self.dpdk_socket_mem.clone(),
            "dpdk-hugepage-dir" => self.dpdk_hugepage_dir.clone(),
            "dpdk-lcore-mask" => self.dpdk_lcore_mask.clone(),
            _ => None,
        })
    }
}

impl Default for DatapathSection {
    fn default() -> Self {
        DatapathSection {
            pmd_cpu_mask: None,
            emc_insert_inv_prob: default_emc(),
            flow_limit: default_flow_limit(),
            max_idle: default_max_idle(),
            pmd_rxq_assign: None,
            pmd_maxsleep: 0,
            pmd_idle_wait: true,
            dp_flows: Vec::new(),
            dpdk_init: None,
            dpdk_extra: None,
            dpdk_socket_mem: None,
            dpdk_hugepage_dir: None,
            dpdk_lcore_mask: None,
        }
    }
}

fn default_true() -> bool {
    true
}

fn default_emc() -> u32 {
    100
}
fn default_flow_limit() -> usize {
    200_000
}
fn default_max_idle() -> u64 {
    10_000
}

/// `[[bridge]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bridge {
    pub name: String,
    #[serde(default)]
    pub port: Vec<PortConf>,
    /// OpenFlow flows in `ovs-ofctl add-flow` syntax. Without `flows` and `flows-file` the
    /// bridge has OVS's default table, `priority=0,actions=NORMAL`; `flows = []` is an empty
    /// table (everything dropped).
    #[serde(default)]
    pub flows: Option<Vec<String>>,
    /// A file of flows in `ovs-ofctl add-flows` syntax (relative to the configuration file),
    /// added after `flows`.
    #[serde(default, rename = "flows-file")]
    pub flows_file: Option<String>,
    /// Ethernet address of the bridge's LOCAL port (tunnel endpoint).
    #[serde(default)]
    pub hwaddr: Option<String>,
    /// The bridge's OpenFlow datapath id, 16 hex digits not all zero, as OVS's
    /// `other_config:datapath-id`; by default the LOCAL port's Ethernet address.
    #[serde(default, rename = "datapath-id")]
    pub datapath_id: Option<String>,
    /// IP addresses (`ADDR/LEN`) of the bridge's LOCAL port: local tunnel endpoints and
    /// connected routes.
    #[serde(default)]
    pub ip: Vec<String>,
    /// GENEVE option mappings, as `ovs-ofctl add-tlv-map` takes them.
    #[serde(default, rename = "tlv-map")]
    pub tlv_map: Vec<String>,
    /// OpenFlow controllers, as OVS's `Controller` targets: `tcp:IP[:PORT]` and `unix:PATH`
    /// (the switch connects), `ptcp:[PORT][:IP]` and `punix:PATH` (it listens).
    #[serde(default)]
    pub controller: Vec<String>,
    /// The OpenFlow versions every connection of the bridge may use (`OpenFlow10` to
    /// `OpenFlow15`); empty: all.
    #[serde(default)]
    pub protocols: Vec<String>,
    /// `standalone` (OVS's default) or `secure`.
    #[serde(default, rename = "fail-mode")]
    pub fail_mode: Option<String>,
    /// Milliseconds of silence before a controller connection is probed, as OVS's
    /// `inactivity_probe` (5000; 0: never).
    #[serde(default, rename = "inactivity-probe")]
    pub inactivity_probe: Option<u64>,
    /// Longest wait in milliseconds between attempts to reconnect to a controller, as OVS's
    /// `max_backoff` (8000).
    #[serde(default, rename = "max-backoff")]
    pub max_backoff: Option<u64>,
}

/// `[[bridge.port]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConf {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub ofport: Option<u32>,
    #[serde(default)]
    pub options: BTreeMap<String, toml::Value>,
    /// Access port in this VLAN (OVS's `tag`).
    #[serde(default)]
    pub tag: Option<u16>,
    /// Trunk port carrying these VLANs (OVS's `trunks`; empty: all).
    #[serde(default)]
    pub trunks: Vec<u16>,
    /// OVS's `vlan_mode`: `access`, `trunk`, `native-tagged`, `native-untagged`,
    /// `dot1q-tunnel` (an 802.1ad outer tag of VLAN `tag` on every customer VLAN) (default:
    /// access with a tag, else trunk).
    #[serde(default)]
    pub vlan_mode: Option<String>,
}

/// A port of the configuration with the numbers it gets.
pub struct NumberedPort<'a> {
    pub bridge: &'a Bridge,
    pub port: &'a PortConf,
    /// OpenFlow port number: `ofport`, else its position in the bridge from 1.
    pub ofport: u32,
    /// Datapath port number: the ports with a device of their own (the internal port's is a
    /// TAP) in order of appearance, from 1; then one per tunnel type and UDP port, shared by
    /// its tunnels (`vxlan_sys_4789`); none for patch ports.
    pub dp_port: Option<u32>,
}

/// Port types that are tunnels.
pub const TUNNEL_TYPES: &[&str] = &["vxlan", "geneve", "gre", "ip6gre", "erspan", "ip6erspan"];

impl Config {
    /// Every port with its OpenFlow and datapath numbers: the one place they are decided.
    pub fn ports(&self) -> Vec<NumberedPort<'_>> {
        let mut no = 0;
        let mut out = Vec::new();
        let mut tunnels: Vec<(usize, String)> = Vec::new();
        for bridge in &self.bridge {
            for (i, port) in bridge.port.iter().enumerate() {
                if TUNNEL_TYPES.contains(&port.kind.as_str()) {
                    tunnels.push((
                        out.len(),
                        tunnel_config(port)
                            .map_or_else(|_| port.kind.clone(), |t| t.dp_port_name()),
                    ));
                }
                let own = port.kind != "patch" && !TUNNEL_TYPES.contains(&port.kind.as_str());
                let dp_port = own.then(|| {
                    no += 1;
                    no
                });
                out.push(NumberedPort {
                    bridge,
                    port,
                    ofport: Bridge::ofport_of(port, i),
                    dp_port,
                });
            }
        }
        let mut shared: Vec<(String, u32)> = Vec::new();
        for (i, name) in tunnels {
            let n = match shared.iter().find(|(s, _)| *s == name) {
                Some((_, n)) => *n,
                None => {
                    no += 1;
                    shared.push((name, no));
                    no
                }
            };
            out[i].dp_port = Some(n);
        }
        out
    }

    /// The bridges whose LOCAL port has no device (no `internal` port in the configuration),
    /// with the datapath port number each LOCAL port gets: after every number [`Config::ports`]
    /// gives, in the order of the bridges. OVS's userspace datapath makes every bridge's LOCAL
    /// port a datapath port, so flooding reaches it and its number names it.
    ///
    /// A bridge named `br` and a number (`br0`) takes 100 plus that number when it is free, as
    /// OVS's dummy datapath numbers it, so that OVS's test scenarios see the same numbers.
    pub fn local_ports(&self) -> Vec<(&Bridge, u32)> {
        let mut used: Vec<u32> = self.ports().iter().filter_map(|p| p.dp_port).collect();
        let mut next = used.iter().max().copied().unwrap_or(0) + 1;
        let mut out = Vec::new();
        for b in self
            .bridge
            .iter()
            .filter(|b| !b.port.iter().any(|p| p.kind == "internal"))
        {
            let wanted = b
                .name
                .strip_prefix("br")
                .and_then(|d| d.parse::<u32>().ok())
                .and_then(|d| d.checked_add(100))
                .filter(|n| !used.contains(n));
            let no = wanted.unwrap_or_else(|| {
                while used.contains(&next) {
                    next += 1;
                }
                next
            });
            used.push(no);
            out.push((b, no));
        }
        out
    }
}

impl Bridge {
    /// The OpenFlow number of the `i`-th port (from 0): `ofport`, else `i + 1`; LOCAL
    /// (65534) for the bridge's internal port.
    fn ofport_of(p: &PortConf, i: usize) -> u32 {
        if p.kind == "internal" {
            return ofproto::syntax::OFPP_LOCAL;
        }
        p.ofport.unwrap_or(i as u32 + 1)
    }

    /// Ports whose OpenFlow number is out of OVS's `ofport_request` range (1 to 65279) or is
    /// another port's, given or taken by position.
    fn ofport_errors(&self, text: &str) -> Vec<ConfigError> {
        let mut errs = Vec::new();
        let mut taken: BTreeMap<u32, &str> = BTreeMap::new();
        for (i, p) in self.port.iter().enumerate() {
            let o = Bridge::ofport_of(p, i);
            let line = || find_line(text, &format!("\"{}\"", p.name));
            if p.ofport.is_some_and(|o| o == 0 || o >= OFPP_MAX) {
                errs.push(ConfigError {
                    line: line(),
                    message: format!("port '{}': ofport {o} is not in 1 to 65279", p.name),
                });
            } else if let Some(other) = taken.insert(o, &p.name) {
                let how = if p.ofport.is_some() {
                    ""
                } else {
                    " (by its position)"
                };
                errs.push(ConfigError {
                    line: line(),
                    message: format!(
                        "port '{}': OpenFlow port {o}{how} is also port '{other}''s in bridge \
                         '{}'; give it another ofport",
                        p.name, self.name
                    ),
                });
            }
        }
        errs
    }
}

/// OpenFlow 1.0's first reserved port number: port numbers stay below it.
const OFPP_MAX: u32 = 0xff00;

/// A tunnel port's options as `KEY=VALUE` strings.
pub fn option_strings(p: &PortConf) -> Vec<(String, String)> {
    p.options
        .iter()
        .map(|(k, v)| {
            let v = match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// A tunnel port's configuration.
pub fn tunnel_config(p: &PortConf) -> Result<ofproto::tunnel::TunnelConfig, String> {
    let kind = ofproto::tunnel::TunnelType::parse(&p.kind)
        .ok_or_else(|| format!("'{}' is not a tunnel type", p.kind))?;
    ofproto::tunnel::TunnelConfig::parse(kind, &option_strings(p))
}

/// A datapath id as OVS reads `other_config:datapath-id` (`dpid_from_string()`): exactly 16
/// hex digits, not all zero.
pub fn parse_dpid(s: &str) -> Option<u64> {
    if s.len() != 16 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok().filter(|&id| id != 0)
}

/// Parses `ADDR/LEN` addresses of a bridge.
pub fn bridge_addrs(b: &Bridge) -> Result<Vec<(std::net::IpAddr, u8)>, String> {
    b.ip.iter()
        .map(|a| {
            if !a.contains('/') {
                return Err(format!("ip '{a}': expected ADDR/LEN"));
            }
            ofproto::tunnel::parse_prefix(a)
        })
        .collect()
}

/// A configuration problem, with the line it is on when known.
#[derive(Debug)]
pub struct ConfigError {
    pub line: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "line {l}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Line (1-based) of byte offset `ofs` in `text`.
fn line_of(text: &str, ofs: usize) -> usize {
    text[..ofs.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// The key whose value starts at byte `ofs` (`key = VALUE`, also inside an inline table), to
/// name it in a message about the value.
fn key_before(text: &str, ofs: usize) -> Option<&str> {
    let before = text.get(..ofs)?;
    let line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
    let k = line.trim_end().strip_suffix('=')?;
    let k = k.rsplit(['{', ',']).next()?.trim();
    let bare = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    (!k.is_empty() && k.chars().all(bare)).then_some(k)
}

/// The line on which `needle` first appears after `from`, for errors found after parsing.
fn find_line(text: &str, needle: &str) -> Option<usize> {
    text.find(needle).map(|o| line_of(text, o))
}

/// The lines (from 1) of port `name`'s `name = "..."` entry in a `[[bridge.port]]` table and
/// of that table's `options`, for errors found after parsing.
fn port_lines(text: &str, name: &str) -> (Option<usize>, Option<usize>) {
    let want = format!("name=\"{name}\"");
    let squeeze = |l: &str| l.split_whitespace().collect::<String>();
    let mut in_port = false;
    let mut found = None;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t.starts_with('[') {
            if found.is_some() {
                break;
            }
            in_port = t.starts_with("[[bridge.port]]");
            continue;
        }
        if in_port && found.is_none() && squeeze(t) == want {
            found = Some(i + 1);
        } else if found.is_some() && t.starts_with("options") {
            return (found, Some(i + 1));
        }
    }
    (
        found.or_else(|| find_line(text, &format!("\"{name}\""))),
        None,
    )
}

/// Parses and checks a configuration file's text. `base` is the directory relative paths are
/// taken from.
pub fn parse(text: &str) -> Result<Config, Vec<ConfigError>> {
    let cfg: Config = toml::from_str(text).map_err(|e| {
        let message = match e.span().and_then(|s| key_before(text, s.start)) {
            Some(k) if !e.message().contains(k) => format!("{k}: {}", e.message()),
            _ => e.message().to_owned(),
        };
        vec![ConfigError {
            line: e.span().map(|s| line_of(text, s.start)),
            message,
        }]
    })?;
    let mut errs = Vec::new();
    let mut names = std::collections::HashSet::new();
    let mut bridges = std::collections::HashSet::new();
    for b in &cfg.bridge {
        let at = find_line(text, &format!("\"{}\"", b.name));
        if b.name.is_empty() || !bridges.insert(b.name.clone()) {
            errs.push(ConfigError {
                line: at,
                message: format!("bridge name '{}' is empty or used twice", b.name),
            });
        }
        if let Some(h) = &b.hwaddr
            && let Err(e) = ofproto::tunnel::parse_mac(h)
        {
            errs.push(ConfigError {
                line: find_line(text, h),
                message: format!("bridge '{}': hwaddr: {e}", b.name),
            });
        }
        if let Some(d) = &b.datapath_id
            && parse_dpid(d).is_none()
        {
            errs.push(ConfigError {
                line: find_line(text, d),
                message: format!(
                    "bridge '{}': datapath-id: '{d}' is not 16 hex digits, not all zero",
                    b.name
                ),
            });
        }
        if let Err(e) = bridge_addrs(b) {
            errs.push(ConfigError {
                line: find_line(text, "ip"),
                message: format!("bridge '{}': {e}", b.name),
            });
        }
        if !b.ip.is_empty() && b.hwaddr.is_none() {
            errs.push(ConfigError {
                line: at,
                message: format!(
                    "bridge '{}': ip needs hwaddr (the local port's Ethernet address)",
                    b.name
                ),
            });
        }
        if let Err(e) = crate::ofserver::BridgeControl::from_config(b) {
            errs.push(ConfigError {
                line: at,
                message: format!("bridge '{}': {e}", b.name),
            });
        }
        // The bridge's map, held while its flows are read, gives its fields their lengths.
        let mut tlv = ofproto::tun_md::TunTable::default();
        for m in &b.tlv_map {
            let added = ofproto::tunnel::parse_tlv_map(m)
                .and_then(|maps| tlv.add(&maps).map_err(|e| e.to_string()));
            if let Err(e) = added {
                errs.push(ConfigError {
                    line: find_line(text, m),
                    message: format!("bridge '{}': tlv-map '{m}': {e}", b.name),
                });
            }
        }
        for p in b.port.iter().filter(|p| p.kind == "internal") {
            if p.name != b.name {
                errs.push(ConfigError {
                    line: find_line(text, &format!("\"{}\"", p.name)),
                    message: format!(
                        "port '{}': the internal port is the bridge's local port and takes the \
                         bridge's name '{}'",
                        p.name, b.name
                    ),
                });
            }
        }
        let port_no = |n: &str| {
            b.port
                .iter()
                .enumerate()
                .find(|(_, p)| p.name == n)
                .map(|(i, p)| Bridge::ofport_of(p, i))
        };
        for f in b.flows.iter().flatten() {
            if let Err(e) = ofproto::syntax::parse_flow(f, ofproto::syntax::FlowKind::Add, &port_no)
            {
                errs.push(ConfigError {
                    line: find_line(text, f),
                    message: format!("bridge '{}': flow '{f}': {e}", b.name),
                });
            }
        }
        for p in &b.port {
            if let Some(t) = p.tag
                && t > 4095
            {
                errs.push(ConfigError {
                    line: find_line(text, &format!("\"{}\"", p.name)),
                    message: format!("port '{}': tag {t} is not a VLAN id (0-4095)", p.name),
                });
            }
            if let Some(t) = p.trunks.iter().find(|&&t| t > 4095) {
                errs.push(ConfigError {
                    line: find_line(text, &format!("\"{}\"", p.name)),
                    message: format!("port '{}': trunk {t} is not a VLAN id (0-4095)", p.name),
                });
            }
            if let Some(m) = p
                .vlan_mode
                .as_deref()
                .filter(|m| ofproto::bridge::PortVlanMode::parse(m).is_none())
            {
                errs.push(ConfigError {
                    line: find_line(text, &format!("\"{}\"", p.name)),
                    message: format!(
                        "port '{}': vlan_mode {m}: expected access, trunk, native-tagged, \
                         native-untagged or dot1q-tunnel",
                        p.name
                    ),
                });
            }
        }
        errs.extend(b.ofport_errors(text));
        for p in &b.port {
            let (at, options_at) = port_lines(text, &p.name);
            if !names.insert(p.name.clone()) {
                errs.push(ConfigError {
                    line: at,
                    message: format!("port name '{}' is used twice", p.name),
                });
            }
            if let Err(m) = check_port(p) {
                errs.push(ConfigError {
                    line: options_at.or(at),
                    message: format!("port '{}': {m}", p.name),
                });
            }
        }
    }
    if let Some(m) = &cfg.datapath.pmd_cpu_mask
        && let Err(e) = datapath::dpif::parse_cpu_mask(m)
    {
        errs.push(ConfigError {
            line: find_line(text, "pmd-cpu-mask"),
            message: e,
        });
    }
    if let Some(a) = &cfg.metrics.listen
        && let Err(e) = crate::metrics::parse_listen(a)
    {
        let from = text.find("[metrics]").unwrap_or(0);
        errs.push(ConfigError {
            line: text[from..].find("listen").map(|o| line_of(text, from + o)),
            message: format!("metrics: listen: {e}"),
        });
    }
    if let Some(a) = &cfg.datapath.pmd_rxq_assign
        && let Err(message) = datapath::dpif::RxqAssign::parse(a)
    {
        errs.push(ConfigError {
            line: find_line(text, "pmd-rxq-assign"),
            message,
        });
    }
    for f in &cfg.datapath.dp_flows {
        if split_dp_flow(f).is_none() {
            errs.push(ConfigError {
                line: find_line(text, f),
                message: format!("dp-flows entry '{f}': expected 'KEY, actions:ACTIONS'"),
            });
        }
    }
    let bridge_known = |n: &str| cfg.bridge.iter().any(|b| b.name == n);
    for r in &cfg.tunnel.route {
        let w: Vec<&str> = r.split_whitespace().collect();
        let ok = match w.as_slice() {
            [p, b] | [p, b, _] => ofproto::tunnel::parse_prefix(p)
                .and_then(|_| {
                    if bridge_known(b) {
                        Ok(())
                    } else {
                        Err(format!("no bridge '{b}'"))
                    }
                })
                .and_then(|_| match w.get(2) {
                    Some(g) => g
                        .parse::<std::net::IpAddr>()
                        .map(|_| ())
                        .map_err(|_| format!("gateway '{g}' is not an IP address")),
                    None => Ok(()),
                }),
            _ => Err("expected 'PREFIX/LEN BRIDGE [GATEWAY]'".into()),
        };
        if let Err(e) = ok {
            errs.push(ConfigError {
                line: find_line(text, r),
                message: format!("tunnel route '{r}': {e}"),
            });
        }
    }
    for p in cfg.conntrack.problems() {
        errs.push(ConfigError {
            line: ct_key_line(text, p.table, &p.key),
            message: p.message,
        });
    }
    for n in &cfg.tunnel.neigh {
        let ok = match n.split_whitespace().collect::<Vec<_>>().as_slice() {
            [b, ip, mac] => {
                if !bridge_known(b) {
                    Err(format!("no bridge '{b}'"))
                } else if ip.parse::<std::net::IpAddr>().is_err() {
                    Err(format!("'{ip}' is not an IP address"))
                } else {
                    ofproto::tunnel::parse_mac(mac).map(|_| ())
                }
            }
            _ => Err("expected 'BRIDGE IP MAC'".into()),
        };
        if let Err(e) = ok {
            errs.push(ConfigError {
                line: find_line(text, n),
                message: format!("tunnel neigh '{n}': {e}"),
            });
        }
    }
    if errs.is_empty() { Ok(cfg) } else { Err(errs) }
}

/// Options each port type takes.
pub(crate) fn check_port(p: &PortConf) -> Result<(), String> {
    let allowed: &[&str] = match p.kind.as_str() {
        "pcap" => &["rx_pcap", "tx_pcap"],
        "replay" => &["pcap", "n_rxq"],
        "sink" | "gen" | "dummy" => &[],
        "patch" => &["peer"],
        "afpacket" | "afxdp" | "tap" | "internal" => return kernel_port_options(p).map(|_| ()),
        "vhostuser" | "vhostuserclient" => {
            return vhost_options(p, Path::new("")).map(|_| ());
        }
        t if TUNNEL_TYPES.contains(&t) => return tunnel_config(p).map(|_| ()),
        "dpdk" => return crate::dpdk::check_options(&option_strings(p)),
        other => {
            return Err(format!(
                "unknown type '{other}' (known: afpacket, afxdp, tap, vhostuser, \
                 vhostuserclient, dpdk, pcap, replay, sink, dummy, gen, patch, internal, vxlan, \
                 geneve, gre)"
            ));
        }
    };
    for k in p.options.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(format!(
                "unknown option '{k}' for type {} (known: {})",
                p.kind,
                allowed.join(", ")
            ));
        }
    }
    if p.kind == "replay" && !p.options.contains_key("pcap") {
        return Err("type replay needs option pcap".into());
    }
    if p.kind == "patch" && opt_str(p, "peer").is_none() {
        return Err("type patch needs option peer".into());
    }
    if p.kind == "pcap" && p.options.is_empty() {
        return Err("type pcap needs rx_pcap, tx_pcap or both".into());
    }
    Ok(())
}

/// The options of a port on a kernel interface.
pub enum KernelPortOptions {
    AfPacket(netdev::afpacket::AfPacketOptions),
    AfXdp(netdev::afxdp::AfXdpOptions),
    Tap(netdev::tap::TapOptions),
}

/// The options of an `afpacket`, `afxdp`, `tap` or `internal` (a TAP named as its bridge)
/// port, names and values checked without opening anything (what `check-config` can tell
/// before `run`).
pub fn kernel_port_options(p: &PortConf) -> Result<KernelPortOptions, String> {
    let opts = option_strings(p);
    let e = |e: netdev::afpacket::PortError| e.to_string();
    let names = |ifname: &Option<String>, netns: &Option<String>| {
        netdev::netns::check_names(ifname.as_deref().unwrap_or(&p.name), netns.as_deref())
    };
    Ok(match p.kind.as_str() {
        "afpacket" => {
            let mut o = netdev::afpacket::AfPacketOptions::default();
            for (k, v) in &opts {
                o.set(k, v).map_err(e)?;
            }
            o.check().map_err(e)?;
            names(&o.ifname, &o.netns)?;
            KernelPortOptions::AfPacket(o)
        }
        "afxdp" => {
            let mut o = netdev::afxdp::AfXdpOptions::default();
            for (k, v) in &opts {
                o.set(k, v)?;
            }
            o.validate()?;
            names(&o.ifname, &o.netns)?;
            KernelPortOptions::AfXdp(o)
        }
        "tap" | "internal" => {
            let mut o = netdev::tap::TapOptions::default();
            for (k, v) in &opts {
                if p.kind == "internal" && k == "ifname" {
                    return Err("the internal port's device takes the bridge's name".into());
                }
                o.set(k, v).map_err(e)?;
            }
            o.check(&p.name).map_err(e)?;
            KernelPortOptions::Tap(o)
        }
        other => return Err(format!("'{other}' is not a kernel port type")),
    })
}

/// The options of a `vhostuser` or `vhostuserclient` port, checked without opening anything;
/// a relative `vhost-server-path` is taken from `base` (the configuration's directory).
pub fn vhost_options(p: &PortConf, base: &Path) -> Result<netdev::vhost::VhostOptions, String> {
    let e = |e: netdev::afpacket::PortError| e.to_string();
    let mut o = netdev::vhost::VhostOptions::for_kind(&p.kind).map_err(e)?;
    for (k, v) in &option_strings(p) {
        o.set(k, v).map_err(e)?;
    }
    o.check().map_err(e)?;
    o.path = o.path.map(|f| base.join(f));
    Ok(o)
}

/// Splits `KEY, actions:ACTIONS` (or `KEY actions:ACTIONS`).
pub fn split_dp_flow(s: &str) -> Option<(&str, &str)> {
    let i = s.rfind("actions:")?;
    let key = s[..i].trim_end().trim_end_matches(',').trim();
    let actions = s[i + "actions:".len()..].trim();
    (!key.is_empty() && !actions.is_empty()).then_some((key, actions))
}

/// A string option.
pub fn opt_str<'a>(p: &'a PortConf, key: &str) -> Option<&'a str> {
    p.options.get(key).and_then(|v| v.as_str())
}

/// A path option, resolved against `base`.
pub fn opt_path(p: &PortConf, key: &str, base: &Path) -> Option<PathBuf> {
    opt_str(p, key).map(|s| base.join(s))
}

#[cfg(test)]
mod tests;
