//! Native tunnelling in the OpenFlow layer, as OVS's userspace tunnelling works
//! (`ofproto-dpif-xlate.c`'s native tunnel output and termination, `tnl-ports.c`,
//! `ovs-router.c`, `tnl-neigh-cache.c`):
//!
//! - A tunnel port (`type = vxlan|geneve|gre`) is an OpenFlow port whose datapath side is a
//!   virtual port shared by every tunnel of the same type and UDP port (`vxlan_sys_4789`,
//!   `genev_sys_6081`, `gre_sys`). Packets decapsulated by the datapath arrive on it with the
//!   tunnel metadata in the key; [`TunnelConfig::receives`] picks the OpenFlow port from the
//!   outer addresses and key, exactly or through `flow` options.
//! - The underlay is a bridge whose LOCAL port has an Ethernet address (`hwaddr`) and IP
//!   addresses. A packet that the underlay bridge outputs to LOCAL, addressed to one of those
//!   addresses and to a tunnel's protocol and port, becomes `tnl_pop` instead.
//! - Output to a tunnel port builds the outer header from the port's options, the route to the
//!   remote endpoint ([`Underlay::route`]) and the neighbour's address, emits `tnl_push` and
//!   continues in the underlay bridge as a packet sent from its LOCAL port, so push and output
//!   to the physical port happen in one datapath pass.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Mutex;

use flow::EthAddr;

/// Tunnel protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TunnelType {
    Vxlan,
    Geneve,
    Gre,
    /// ERSPAN (GRE carrying mirrored frames with an ERSPAN header): sent only, for mirrors.
    Erspan,
}

impl TunnelType {
    /// The type as the configuration names it.
    pub fn parse(s: &str) -> Option<TunnelType> {
        Some(match s {
            "vxlan" => TunnelType::Vxlan,
            "geneve" => TunnelType::Geneve,
            // The IPv6 variants are the same tunnels over an IPv6 underlay.
            "gre" | "ip6gre" => TunnelType::Gre,
            "erspan" | "ip6erspan" => TunnelType::Erspan,
            _ => return None,
        })
    }

    /// `vxlan`, `geneve`, `gre`.
    pub fn name(self) -> &'static str {
        match self {
            TunnelType::Vxlan => "vxlan",
            TunnelType::Geneve => "geneve",
            TunnelType::Gre => "gre",
            TunnelType::Erspan => "erspan",
        }
    }

    /// The IANA UDP port (none for GRE).
    pub fn default_dst_port(self) -> u16 {
        match self {
            TunnelType::Vxlan => 4789,
            TunnelType::Geneve => 6081,
            TunnelType::Gre | TunnelType::Erspan => 0,
        }
    }

    /// The name of the shared datapath port, as OVS names it.
    pub fn dp_port_name(self, dst_port: u16) -> String {
        match self {
            TunnelType::Vxlan => format!("vxlan_sys_{dst_port}"),
            TunnelType::Geneve => format!("genev_sys_{dst_port}"),
            TunnelType::Gre => "gre_sys".to_owned(),
            TunnelType::Erspan => "erspan_sys".to_owned(),
        }
    }

    /// OVS's `OVS_VPORT_TYPE_*` in `tnl_push(header(tnl_type=...))`: GRE and ERSPAN have
    /// types of their own over an IPv6 underlay.
    pub fn vport_type(self, ipv6: bool) -> u32 {
        match (self, ipv6) {
            (TunnelType::Gre, false) => 3,
            (TunnelType::Gre, true) => 109,
            (TunnelType::Vxlan, _) => 4,
            (TunnelType::Geneve, _) => 5,
            (TunnelType::Erspan, false) => 107,
            (TunnelType::Erspan, true) => 108,
        }
    }

    /// GRE-based (IP protocol 47, no UDP port).
    pub fn is_gre(self) -> bool {
        matches!(self, TunnelType::Gre | TunnelType::Erspan)
    }
}

/// A tunnel option that is either fixed or taken from the flow (`remote_ip=flow`, `key=flow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowOr<T> {
    Fixed(T),
    Flow,
}

/// What a tunnel carries (`packet_type` option).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtMode {
    /// Ethernet frames (the default).
    LegacyL2,
    /// L3 packets without an Ethernet header (GRE carrying IP or MPLS); OpenFlow sees them with
    /// a dummy Ethernet header of zero addresses.
    LegacyL3,
    /// Either, as the packet says.
    Ptap,
}

/// `tos` and `ttl` options: a value or `inherit` (from the inner IP header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inherit {
    Fixed(u8),
    Inherit,
}

/// A tunnel port's options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelConfig {
    pub kind: TunnelType,
    pub remote_ip: FlowOr<IpAddr>,
    pub local_ip: Option<FlowOr<IpAddr>>,
    /// Key on receive: `None` accepts only packets without one (GRE without `key`).
    pub in_key: Option<FlowOr<u64>>,
    /// Key on send: `None` sends none (GRE without `key`).
    pub out_key: Option<FlowOr<u64>>,
    pub dst_port: u16,
    pub csum: bool,
    pub tos: Inherit,
    pub ttl: Inherit,
    pub df_default: bool,
    pub packet_type: PtMode,
    /// Whether the receive and the send key were configured (`key`, `in_key`, `out_key`), as
    /// opposed to VXLAN's and GENEVE's default of 0 (`dpif/show` prints only the former).
    pub keys_given: (bool, bool),
    /// An ERSPAN tunnel's header fields (`erspan_ver`, `erspan_idx`, `erspan_dir`,
    /// `erspan_hwid`); the key is its session id.
    pub erspan: Option<ErspanConfig>,
}

/// An ERSPAN tunnel's header fields, as OVS's options give them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErspanConfig {
    /// 1 (type II) or 2 (type III).
    pub ver: u8,
    /// Version 1's 20-bit index (hexadecimal in the options).
    pub idx: u32,
    /// Version 2's direction: 0 ingress, 1 egress.
    pub dir: u8,
    /// Version 2's 6-bit hardware id (hexadecimal).
    pub hwid: u8,
}

/// `erspan_*` option `k`'s value `v`, at most `max`, hexadecimal when `hex` (as OVS reads them).
fn parse_erspan(k: &str, v: &str, hex: bool, max: u32) -> Result<u32, String> {
    let n = if hex {
        u32::from_str_radix(v.trim_start_matches("0x").trim_start_matches("0X"), 16).ok()
    } else {
        v.parse().ok()
    };
    n.filter(|&n| n <= max)
        .ok_or_else(|| format!("invalid {k}: {v}"))
}

fn parse_ip(s: &str) -> Result<IpAddr, String> {
    s.parse()
        .map_err(|_| format!("'{s}' is not an IPv4 or IPv6 address"))
}

fn parse_key(s: &str) -> Result<FlowOr<u64>, String> {
    if s == "flow" {
        return Ok(FlowOr::Flow);
    }
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    v.map(FlowOr::Fixed)
        .map_err(|_| format!("key '{s}': expected a number or 'flow'"))
}

fn parse_bool(k: &str, v: &str) -> Result<bool, String> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{k} '{v}': expected true or false")),
    }
}

fn parse_inherit(k: &str, v: &str) -> Result<Inherit, String> {
    if v == "inherit" {
        return Ok(Inherit::Inherit);
    }
    // Decimal or hexadecimal, as OVS reads it (`tos=0xb8`).
    parse_num(v)
        .ok()
        .and_then(|n| u8::try_from(n).ok())
        .map(Inherit::Fixed)
        .ok_or_else(|| format!("{k} '{v}': expected 0-255 or 'inherit'"))
}

impl TunnelConfig {
    /// A tunnel's options from `KEY=VALUE` pairs, with OVS's defaults and checks.
    pub fn parse(kind: TunnelType, opts: &[(String, String)]) -> Result<TunnelConfig, String> {
        let mut c = TunnelConfig {
            kind,
            remote_ip: FlowOr::Flow,
            local_ip: None,
            in_key: None,
            out_key: None,
            dst_port: kind.default_dst_port(),
            csum: false,
            tos: Inherit::Fixed(0),
            ttl: Inherit::Fixed(64),
            df_default: true,
            packet_type: PtMode::LegacyL2,
            keys_given: (false, false),
            // Version 1 unless the options say (as Linux's erspan devices).
            erspan: (kind == TunnelType::Erspan).then(|| ErspanConfig {
                ver: 1,
                ..ErspanConfig::default()
            }),
        };
        let mut remote = None;
        let (mut key, mut in_key, mut out_key) = (None, None, None);
        for (k, v) in opts {
            let v = v.as_str();
            match k.as_str() {
                "remote_ip" => {
                    remote = Some(if v == "flow" {
                        FlowOr::Flow
                    } else {
                        FlowOr::Fixed(parse_ip(v)?)
                    })
                }
                "local_ip" => {
                    c.local_ip = Some(if v == "flow" {
                        FlowOr::Flow
                    } else {
                        FlowOr::Fixed(parse_ip(v)?)
                    })
                }
                "key" => key = Some(parse_key(v)?),
                "in_key" => in_key = Some(parse_key(v)?),
                "out_key" => out_key = Some(parse_key(v)?),
                "erspan_ver" | "erspan_idx" | "erspan_dir" | "erspan_hwid"
                    if c.erspan.is_some() =>
                {
                    let e = c.erspan.as_mut().expect("checked");
                    match k.as_str() {
                        "erspan_ver" => {
                            e.ver = parse_erspan(k, v, false, 2)? as u8;
                            if e.ver == 0 {
                                return Err(format!("invalid erspan version: {v}"));
                            }
                        }
                        "erspan_idx" => e.idx = parse_erspan(k, v, true, 0xf_ffff)?,
                        "erspan_dir" => e.dir = parse_erspan(k, v, false, 1)? as u8,
                        _ => e.hwid = parse_erspan(k, v, true, 0x3f)? as u8,
                    }
                }
                "dst_port" => {
                    if kind.is_gre() {
                        return Err("dst_port: GRE has no UDP port".into());
                    }
                    c.dst_port = v
                        .parse()
                        .ok()
                        .filter(|&p: &u16| p != 0)
                        .ok_or_else(|| format!("dst_port '{v}': expected 1-65535"))?;
                }
                "csum" => c.csum = parse_bool(k, v)?,
                "df_default" => c.df_default = parse_bool(k, v)?,
                "tos" => {
                    c.tos = parse_inherit(k, v)?;
                    // As OVS: the ECN bits always come from the inner packet.
                    if matches!(c.tos, Inherit::Fixed(t) if t & 3 != 0) {
                        return Err(format!(
                            "tos '{v}': the ECN part (the two low bits) must be zero; the \
                             outer ECN field always comes from the inner packet"
                        ));
                    }
                }
                "ttl" => c.ttl = parse_inherit(k, v)?,
                "packet_type" => {
                    c.packet_type = match v {
                        "legacy_l2" => PtMode::LegacyL2,
                        "legacy_l3" => PtMode::LegacyL3,
                        "ptap" => PtMode::Ptap,
                        _ => {
                            return Err(format!(
                                "packet_type '{v}': expected legacy_l2, legacy_l3 or ptap"
                            ));
                        }
                    };
                    if kind != TunnelType::Gre && c.packet_type == PtMode::LegacyL3 {
                        return Err(format!(
                            "packet_type legacy_l3 needs a GRE tunnel, not {}",
                            kind.name()
                        ));
                    }
                }
                _ => return Err(format!("unknown {} option '{k}'", kind.name())),
            }
        }
        c.remote_ip = remote.ok_or_else(|| format!("{} tunnel needs remote_ip", kind.name()))?;
        if let (FlowOr::Fixed(r), Some(FlowOr::Fixed(l))) = (c.remote_ip, c.local_ip)
            && r.is_ipv4() != l.is_ipv4()
        {
            return Err("remote_ip and local_ip are of different IP versions".into());
        }
        // `key` sets both directions; VXLAN and GENEVE always carry one (0 by default).
        let dflt = match kind {
            TunnelType::Gre | TunnelType::Erspan => None,
            _ => Some(FlowOr::Fixed(0)),
        };
        c.keys_given = (in_key.or(key).is_some(), out_key.or(key).is_some());
        c.in_key = in_key.or(key).or(dflt);
        c.out_key = out_key.or(key).or(dflt);
        Ok(c)
    }

    /// The name of the datapath port the tunnel uses.
    pub fn dp_port_name(&self) -> String {
        self.kind.dp_port_name(self.dst_port)
    }

    /// The configuration OVS's `dpif/show` prints after the port's type, sorted by key:
    /// `remote_ip=1.1.1.1`, `key=flow`, `dst_port=4341`... (OVS's `get_tunnel_config()`: only
    /// what was configured or differs from the defaults).
    pub fn dpif_show_config(&self) -> String {
        let ip = |a: &FlowOr<IpAddr>| match a {
            FlowOr::Flow => "flow".to_owned(),
            FlowOr::Fixed(a) => a.to_string(),
        };
        let key = |k: &FlowOr<u64>| match k {
            FlowOr::Flow => "flow".to_owned(),
            FlowOr::Fixed(v) => v.to_string(),
        };
        let mut o: Vec<(&str, String)> = vec![("remote_ip", ip(&self.remote_ip))];
        if let Some(l) = &self.local_ip {
            o.push(("local_ip", ip(l)));
        }
        let (i, out) = (&self.in_key, &self.out_key);
        match (i, out) {
            (Some(a), Some(b)) if a == b && self.keys_given == (true, true) => {
                o.push(("key", key(a)))
            }
            _ => {
                let given = [self.keys_given.0, self.keys_given.1];
                for ((name, k), g) in [("in_key", i), ("out_key", out)].into_iter().zip(given) {
                    if let Some(v) = k.as_ref().filter(|_| g) {
                        o.push((name, key(v)));
                    }
                }
            }
        }
        match self.ttl {
            Inherit::Inherit => o.push(("ttl", "inherit".into())),
            Inherit::Fixed(64) => {}
            Inherit::Fixed(t) => o.push(("ttl", t.to_string())),
        }
        match self.tos {
            Inherit::Inherit => o.push(("tos", "inherit".into())),
            Inherit::Fixed(0) => {}
            Inherit::Fixed(t) => o.push(("tos", format!("{t:#x}"))),
        }
        if self.dst_port != self.kind.default_dst_port() {
            o.push(("dst_port", self.dst_port.to_string()));
        }
        if self.csum {
            o.push(("csum", "true".into()));
        }
        match self.packet_type {
            PtMode::LegacyL2 => {}
            PtMode::LegacyL3 => o.push(("packet_type", "legacy_l3".into())),
            PtMode::Ptap => o.push(("packet_type", "ptap".into())),
        }
        if !self.df_default {
            o.push(("df_default", "false".into()));
        }
        o.sort();
        o.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The options as `ovs-vsctl` would list them (`{key=flow, remote_ip="10.1.2.9"}`).
    pub fn options_text(&self) -> String {
        let mut o: Vec<String> = Vec::new();
        let key = |k: &FlowOr<u64>| match k {
            FlowOr::Flow => "flow".to_owned(),
            FlowOr::Fixed(v) => v.to_string(),
        };
        if self.csum {
            o.push("csum=\"true\"".into());
        }
        if self.dst_port != self.kind.default_dst_port() {
            o.push(format!("dst_port=\"{}\"", self.dst_port));
        }
        if self.in_key == self.out_key {
            if let Some(k) = &self.in_key {
                o.push(format!("key={}", key(k)));
            }
        } else {
            if let Some(k) = &self.in_key {
                o.push(format!("in_key={}", key(k)));
            }
            if let Some(k) = &self.out_key {
                o.push(format!("out_key={}", key(k)));
            }
        }
        if let Some(l) = &self.local_ip {
            o.push(match l {
                FlowOr::Flow => "local_ip=flow".into(),
                FlowOr::Fixed(a) => format!("local_ip=\"{a}\""),
            });
        }
        match self.packet_type {
            PtMode::LegacyL2 => {}
            PtMode::LegacyL3 => o.push("packet_type=legacy_l3".into()),
            PtMode::Ptap => o.push("packet_type=ptap".into()),
        }
        o.push(match self.remote_ip {
            FlowOr::Flow => "remote_ip=flow".into(),
            FlowOr::Fixed(a) => format!("remote_ip=\"{a}\""),
        });
        format!("{{{}}}", o.join(", "))
    }

    /// How well this tunnel receives a packet with outer source `src`, outer destination
    /// `dst`, key `key` (None: the packet has none) and an L3 payload or not: `None` when it
    /// does not, else a rank where lower is more specific (OVS's `tnl_find` order: exact
    /// remote before `remote_ip=flow`, exact key before `key=flow`).
    pub fn receives(&self, src: IpAddr, dst: IpAddr, key: Option<u64>, l3: bool) -> Option<u8> {
        let mut rank = 0;
        match self.remote_ip {
            FlowOr::Fixed(r) if r != src => return None,
            FlowOr::Fixed(_) => {}
            FlowOr::Flow => rank += 4,
        }
        match self.local_ip {
            Some(FlowOr::Fixed(l)) if l != dst => return None,
            Some(FlowOr::Fixed(_)) => {}
            _ => rank += 1,
        }
        match self.in_key {
            Some(FlowOr::Fixed(k)) if key.unwrap_or(0) != k => return None,
            Some(FlowOr::Fixed(_)) => {}
            Some(FlowOr::Flow) => rank += 2,
            None if key.unwrap_or(0) != 0 => return None,
            None => {}
        }
        let pt_ok = match self.packet_type {
            PtMode::LegacyL2 => !l3,
            PtMode::LegacyL3 => l3,
            PtMode::Ptap => true,
        };
        pt_ok.then_some(rank)
    }
}

/// A GENEVE option mapped to `tun_metadata<n>` (`add-tlv-map`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlvMapping {
    pub class: u16,
    pub kind: u8,
    /// Value length in bytes (a multiple of 4, at most 124).
    pub len: u8,
}

/// Parses `{class=0x102,type=0x80,len=4}->tun_metadata0[,...]` into (slot, mapping) pairs.
pub fn parse_tlv_map(s: &str) -> Result<Vec<(usize, TlvMapping)>, String> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let body = rest
            .strip_prefix('{')
            .and_then(|r| r.split_once('}'))
            .ok_or_else(|| {
                format!("'{rest}': expected {{class=..,type=..,len=..}}->tun_metadataN")
            })?;
        let (fields, after) = body;
        let (mut class, mut kind, mut len) = (None, None, None);
        for kv in fields.split(',') {
            let (k, v) = kv
                .trim()
                .split_once('=')
                .ok_or_else(|| format!("'{kv}': expected KEY=VALUE"))?;
            let n = parse_num(v.trim())?;
            match k.trim() {
                "class" => class = Some(u16::try_from(n).map_err(|_| "class out of range")?),
                "type" => kind = Some(u8::try_from(n).map_err(|_| "type out of range")?),
                "len" => len = Some(u8::try_from(n).map_err(|_| "len out of range")?),
                k => return Err(format!("unknown TLV field '{k}'")),
            }
        }
        let (Some(class), Some(kind), Some(len)) = (class, kind, len) else {
            return Err("a TLV mapping needs class, type and len".into());
        };
        if len == 0 || len % 4 != 0 || usize::from(len) > crate::fields::TUN_METADATA_MAX_LEN {
            return Err(format!(
                "len {len}: must be a multiple of 4 from 4 to {}",
                crate::fields::TUN_METADATA_MAX_LEN
            ));
        }
        let after = after
            .trim_start()
            .strip_prefix("->")
            .ok_or("expected '->tun_metadataN' after the TLV")?
            .trim_start();
        let digits: String = after
            .strip_prefix("tun_metadata")
            .ok_or("expected tun_metadataN")?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let slot: usize = digits.parse().map_err(|_| "expected tun_metadataN")?;
        if slot >= crate::fields::N_TUN_METADATA {
            return Err(format!(
                "tun_metadata{slot}: only tun_metadata0..{} exist",
                crate::fields::N_TUN_METADATA - 1
            ));
        }
        out.push((slot, TlvMapping { class, kind, len }));
        rest = after["tun_metadata".len() + digits.len()..]
            .trim_start()
            .trim_start_matches(',')
            .trim_start();
    }
    if out.is_empty() {
        return Err("empty TLV map".into());
    }
    Ok(out)
}

fn parse_num(v: &str) -> Result<u64, String> {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => v.parse(),
    }
    .map_err(|_| format!("'{v}' is not a number"))
}

/// A route of the tunnel routing table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub prefix: IpAddr,
    pub plen: u8,
    /// The underlay bridge the route leaves through.
    pub bridge: String,
    pub gw: Option<IpAddr>,
    /// Added by `tnl/route/add` (else derived from a bridge's addresses).
    pub user: bool,
}

/// The result of a route lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteHit {
    pub bridge: String,
    /// The source address: the bridge's address on the route's network.
    pub src: IpAddr,
    /// Whose link-layer address to use: the gateway or the destination itself.
    pub next_hop: IpAddr,
}

/// A neighbour entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbour {
    pub mac: EthAddr,
    pub bridge: String,
    /// Set with `tnl/neigh/set` (else snooped from ARP/ND).
    pub user: bool,
}

/// The underlay: user routes and the neighbour cache. Connected routes come from the
/// bridges' addresses (see [`Underlay::routes`]).
#[derive(Debug, Default)]
pub struct Underlay {
    pub user_routes: Vec<Route>,
    pub neigh: Mutex<BTreeMap<IpAddr, Neighbour>>,
}

/// Whether `a` is in `prefix/plen`.
pub fn in_prefix(a: IpAddr, prefix: IpAddr, plen: u8) -> bool {
    match (a, prefix) {
        (IpAddr::V4(a), IpAddr::V4(p)) => {
            let m = if plen == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(plen.min(32)))
            };
            u32::from(a) & m == u32::from(p) & m
        }
        (IpAddr::V6(a), IpAddr::V6(p)) => {
            let m = if plen == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(plen.min(128)))
            };
            u128::from(a) & m == u128::from(p) & m
        }
        _ => false,
    }
}

/// Parses `ADDR/PLEN` (a bare address is a host route).
pub fn parse_prefix(s: &str) -> Result<(IpAddr, u8), String> {
    let (a, p) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    };
    let a = parse_ip(a)?;
    let max = if a.is_ipv4() { 32 } else { 128 };
    let plen = match p {
        Some(p) => p
            .parse::<u8>()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| format!("'{s}': bad prefix length"))?,
        None => max,
    };
    Ok((a, plen))
}

/// The underlay view of a bridge: its LOCAL port's Ethernet and IP addresses.
pub trait UnderlayBridge {
    fn name(&self) -> &str;
    fn addrs(&self) -> &[(IpAddr, u8)];
}

impl Underlay {
    /// Every route: the connected routes of the bridges' addresses (a /32 or /128 for the
    /// address itself, marked local, and its network), then the user routes.
    pub fn routes<'a, B: UnderlayBridge + 'a>(
        &self,
        bridges: impl IntoIterator<Item = &'a B>,
    ) -> Vec<(Route, Option<IpAddr>)> {
        let mut out = Vec::new();
        for b in bridges {
            for &(a, plen) in b.addrs() {
                let host = if a.is_ipv4() { 32 } else { 128 };
                out.push((
                    Route {
                        prefix: a,
                        plen: host,
                        bridge: b.name().to_owned(),
                        gw: None,
                        user: false,
                    },
                    Some(a),
                ));
                if plen < host {
                    out.push((
                        Route {
                            prefix: mask_addr(a, plen),
                            plen,
                            bridge: b.name().to_owned(),
                            gw: None,
                            user: false,
                        },
                        Some(a),
                    ));
                }
            }
        }
        out.extend(self.user_routes.iter().map(|r| (r.clone(), None)));
        out
    }

    /// The longest-prefix route to `dst` and the source address to use.
    pub fn route<'a, B: UnderlayBridge + 'a>(
        &self,
        bridges: impl IntoIterator<Item = &'a B> + Clone,
        dst: IpAddr,
    ) -> Option<RouteHit> {
        let routes = self.routes(bridges.clone());
        let (r, _) = routes
            .iter()
            .filter(|(r, _)| in_prefix(dst, r.prefix, r.plen))
            .max_by_key(|(r, _)| (r.plen, r.user))?;
        let next_hop = r.gw.unwrap_or(dst);
        let b = bridges.into_iter().find(|b| b.name() == r.bridge)?;
        // The bridge's address on the next hop's network, else its first of the family.
        let src = b
            .addrs()
            .iter()
            .find(|(a, p)| in_prefix(next_hop, *a, *p))
            .or_else(|| b.addrs().iter().find(|(a, _)| a.is_ipv4() == dst.is_ipv4()))?
            .0;
        Some(RouteHit {
            bridge: r.bridge.clone(),
            src,
            next_hop,
        })
    }

    /// `tnl/route/show` (OVS's `ovs/route/show` layout).
    pub fn show_routes<'a, B: UnderlayBridge + 'a>(
        &self,
        bridges: impl IntoIterator<Item = &'a B> + Clone,
    ) -> String {
        let mut out = String::from("Route Table:\n");
        let mut routes = self.routes(bridges.clone());
        routes.sort_by(|(a, _), (b, _)| b.plen.cmp(&a.plen).then(a.prefix.cmp(&b.prefix)));
        for (r, local) in routes {
            let src = self
                .route(bridges.clone(), r.gw.unwrap_or(r.prefix))
                .map(|h| h.src);
            let _ = write!(
                out,
                "{}: {}/{} dev {}",
                if r.user { "User" } else { "Cached" },
                r.prefix,
                r.plen,
                r.bridge
            );
            if let Some(gw) = r.gw {
                let _ = write!(out, " GW {gw}");
            }
            if let Some(s) = src {
                let _ = write!(out, " SRC {s}");
            }
            if local.is_some() && r.plen == if r.prefix.is_ipv4() { 32 } else { 128 } {
                out.push_str(" local");
            }
            out.push('\n');
        }
        out
    }

    /// `tnl/neigh/show` in OVS's layout.
    pub fn show_neigh(&self) -> String {
        let mut out = format!("{:<46}{:<20}{}\n", "IP", "MAC", "Bridge");
        out.push_str(&"=".repeat(74));
        out.push('\n');
        let n = self.neigh.lock().unwrap_or_else(|e| e.into_inner());
        for (ip, e) in n.iter() {
            let _ = writeln!(
                out,
                "{:<46}{:<20}{}",
                ip.to_string(),
                e.mac.to_string(),
                e.bridge
            );
        }
        out
    }

    /// The neighbour `ip`'s Ethernet address.
    pub fn lookup_neigh(&self, ip: IpAddr) -> Option<EthAddr> {
        let n = self.neigh.lock().unwrap_or_else(|e| e.into_inner());
        n.get(&ip).map(|e| e.mac)
    }

    /// Records a neighbour; returns whether that changed anything.
    pub fn set_neigh(&self, bridge: &str, ip: IpAddr, mac: EthAddr, user: bool) -> bool {
        let mut n = self.neigh.lock().unwrap_or_else(|e| e.into_inner());
        let e = Neighbour {
            mac,
            bridge: bridge.to_owned(),
            user,
        };
        if let Some(old) = n.get(&ip) {
            // A snooped address does not replace one the user set.
            if old.user && !user {
                return false;
            }
            if old.mac == mac && old.bridge == bridge {
                return false;
            }
        }
        n.insert(ip, e);
        true
    }

    /// Forgets the entries of device `name` (a port or bridge that goes away).
    pub fn flush_neigh_of(&self, name: &str) {
        self.neigh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, e| e.bridge != name);
    }

    /// `tnl/neigh/flush`: forgets the snooped entries and the user's.
    pub fn flush_neigh(&self) {
        self.neigh.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Parses an Ethernet address `aa:bb:cc:dd:ee:ff` (as [`wire::EthernetAddress`] reads it).
pub fn parse_mac(s: &str) -> Result<EthAddr, String> {
    s.parse::<wire::EthernetAddress>()
        .map(|a| EthAddr(a.0))
        .map_err(|_| format!("'{s}' is not an Ethernet address"))
}

/// The network address of `a/plen` (host bits cleared).
pub fn in_prefix_base(a: IpAddr, plen: u8) -> IpAddr {
    mask_addr(a, plen)
}

fn mask_addr(a: IpAddr, plen: u8) -> IpAddr {
    match a {
        IpAddr::V4(v) => {
            let m = if plen == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(plen))
            };
            IpAddr::V4(Ipv4Addr::from(u32::from(v) & m))
        }
        IpAddr::V6(v) => {
            let m = if plen == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(plen))
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(v) & m))
        }
    }
}

/// The frame that asks for the link-layer address of `target` from `src` (an address of the
/// underlay bridge, MAC `smac`): an ARP request (RFC 826; 42 bytes, as OVS composes it) for
/// IPv4, a neighbour solicitation with the source link-layer option (RFC 4861 4.3) to the
/// target's solicited-node multicast address for IPv6. Mixed address families ask with the
/// target's family and an unspecified source.
pub fn neigh_request(smac: EthAddr, src: IpAddr, target: IpAddr) -> Vec<u8> {
    use wire::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol};
    let eth = |dst: [u8; 6], ethertype, len: usize| {
        let mut f = vec![0u8; 14 + len];
        EthernetRepr {
            src_addr: EthernetAddress(smac.0),
            dst_addr: EthernetAddress(dst),
            ethertype,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        f
    };
    match target {
        IpAddr::V4(t) => {
            let spa = match src {
                IpAddr::V4(a) => a,
                IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
            };
            let arp = wire::ArpRepr {
                operation: wire::ArpOperation::REQUEST,
                source_hardware_addr: EthernetAddress(smac.0),
                source_protocol_addr: spa,
                target_hardware_addr: EthernetAddress([0; 6]),
                target_protocol_addr: t,
            };
            let mut f = eth([0xff; 6], EtherType::ARP, arp.buffer_len());
            arp.emit(&mut wire::ArpPacket::new_unchecked(&mut f[14..]));
            f
        }
        IpAddr::V6(t) => {
            let src = match src {
                IpAddr::V6(a) => a,
                IpAddr::V4(_) => Ipv6Addr::UNSPECIFIED,
            };
            let o = t.octets();
            let dst = Ipv6Addr::new(
                0xff02,
                0,
                0,
                0,
                0,
                1,
                0xff00 | u16::from(o[13]),
                u16::from_be_bytes([o[14], o[15]]),
            );
            let ns = wire::Icmpv6Repr::NeighborSolicit {
                target_addr: t,
                source_lladdr: Some(EthernetAddress(smac.0)),
            };
            let ip = wire::Ipv6Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: IpProtocol::ICMPV6,
                payload_len: ns.buffer_len(),
                hop_limit: 255,
                traffic_class: 0,
                flow_label: 0,
            };
            let mut f = eth(
                [0x33, 0x33, 0xff, o[13], o[14], o[15]],
                EtherType::IPV6,
                40 + ns.buffer_len(),
            );
            ip.emit(&mut wire::Ipv6Packet::new_unchecked(&mut f[14..54]));
            let mut icmp = wire::Icmpv6Packet::new_unchecked(&mut f[54..]);
            ns.emit(&mut icmp);
            icmp.fill_checksum(&src, &dst);
            f
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(s: &[(&str, &str)]) -> Vec<(String, String)> {
        s.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// OVS 3.1's `dpif/show` of the same four tunnel ports (`ovs-vswitchd --enable-dummy`).
    #[test]
    fn dpif_show_config_is_ovs_s() {
        let show = |kind, o: &[(&str, &str)]| {
            TunnelConfig::parse(kind, &opts(o))
                .unwrap()
                .dpif_show_config()
        };
        assert_eq!(
            show(
                TunnelType::Vxlan,
                &[
                    ("remote_ip", "1.1.1.1"),
                    ("key", "flow"),
                    ("dst_port", "4341"),
                    ("csum", "true")
                ]
            ),
            "csum=true, dst_port=4341, key=flow, remote_ip=1.1.1.1"
        );
        assert_eq!(
            show(
                TunnelType::Gre,
                &[
                    ("remote_ip", "flow"),
                    ("local_ip", "2.2.2.2"),
                    ("in_key", "5"),
                    ("tos", "inherit"),
                    ("ttl", "32"),
                    ("df_default", "false"),
                    ("packet_type", "legacy_l3")
                ]
            ),
            "df_default=false, in_key=5, local_ip=2.2.2.2, packet_type=legacy_l3, \
             remote_ip=flow, tos=inherit, ttl=32"
        );
        assert_eq!(
            show(
                TunnelType::Geneve,
                &[("remote_ip", "1.1.1.3"), ("key", "0"), ("tos", "0x20")]
            ),
            "key=0, remote_ip=1.1.1.3, tos=0x20"
        );
        assert_eq!(
            show(TunnelType::Vxlan, &[("remote_ip", "1.1.1.4")]),
            "remote_ip=1.1.1.4"
        );
    }

    #[test]
    fn options_and_defaults() {
        let c = TunnelConfig::parse(
            TunnelType::Vxlan,
            &opts(&[("remote_ip", "10.1.2.9"), ("key", "flow")]),
        )
        .unwrap();
        assert_eq!(c.dst_port, 4789);
        assert_eq!(c.in_key, Some(FlowOr::Flow));
        assert_eq!(c.dp_port_name(), "vxlan_sys_4789");
        assert_eq!(c.options_text(), "{key=flow, remote_ip=\"10.1.2.9\"}");
        let g = TunnelConfig::parse(TunnelType::Gre, &opts(&[("remote_ip", "10.1.2.9")])).unwrap();
        assert_eq!((g.in_key, g.out_key), (None, None));
        let e = |k, o: &[(&str, &str)]| TunnelConfig::parse(k, &opts(o)).unwrap_err();
        assert!(e(TunnelType::Vxlan, &[]).contains("needs remote_ip"));
        assert!(e(TunnelType::Vxlan, &[("remote_ip", "10.1.2")]).contains("not an IPv4"));
        assert!(
            e(
                TunnelType::Gre,
                &[("remote_ip", "1.1.1.1"), ("dst_port", "5")]
            )
            .contains("GRE")
        );
        assert!(
            e(
                TunnelType::Vxlan,
                &[("remote_ip", "1.1.1.1"), ("packet_type", "legacy_l3")]
            )
            .contains("needs a GRE")
        );
        assert!(e(TunnelType::Geneve, &[("remote_ip", "flow"), ("bogus", "1")]).contains("bogus"));
        // tos and ttl in decimal or hexadecimal; a byte at most.
        let t = |v: &str| {
            TunnelConfig::parse(
                TunnelType::Vxlan,
                &opts(&[("remote_ip", "1.1.1.1"), ("tos", v)]),
            )
            .map(|c| c.tos)
        };
        assert_eq!(t("0xb8"), Ok(Inherit::Fixed(0xb8)));
        assert_eq!(t("40"), Ok(Inherit::Fixed(40)));
        assert!(t("0x100").unwrap_err().contains("0-255"));
        assert!(t("0xb9").unwrap_err().contains("ECN part"));
        assert!(
            e(
                TunnelType::Vxlan,
                &[("remote_ip", "1.1.1.1"), ("local_ip", "::1")]
            )
            .contains("different IP versions")
        );
    }

    #[test]
    fn receive_ranking() {
        let exact = TunnelConfig::parse(
            TunnelType::Vxlan,
            &opts(&[("remote_ip", "10.0.0.2"), ("key", "5")]),
        )
        .unwrap();
        let any = TunnelConfig::parse(
            TunnelType::Vxlan,
            &opts(&[("remote_ip", "flow"), ("key", "flow")]),
        )
        .unwrap();
        let (s, d): (IpAddr, IpAddr) = ("10.0.0.2".parse().unwrap(), "10.0.0.1".parse().unwrap());
        assert_eq!(exact.receives(s, d, Some(5), false), Some(1));
        assert_eq!(exact.receives(s, d, Some(6), false), None);
        assert!(any.receives(s, d, Some(6), false).unwrap() > 1);
        assert_eq!(exact.receives(s, d, Some(5), true), None);
        let gre = TunnelConfig::parse(
            TunnelType::Gre,
            &opts(&[("remote_ip", "10.0.0.2"), ("packet_type", "legacy_l3")]),
        )
        .unwrap();
        assert!(gre.receives(s, d, None, true).is_some());
        assert!(gre.receives(s, d, Some(0), true).is_some());
        assert!(gre.receives(s, d, Some(7), true).is_none());
        assert!(gre.receives(s, d, None, false).is_none());
    }

    #[test]
    fn tlv_maps() {
        let m = parse_tlv_map("{class=0x102,type=0x80,len=4}->tun_metadata0").unwrap();
        assert_eq!(
            m,
            vec![(
                0,
                TlvMapping {
                    class: 0x102,
                    kind: 0x80,
                    len: 4
                }
            )]
        );
        let two = parse_tlv_map(
            "{class=0xffff,type=0,len=8}->tun_metadata1,{class=1,type=2,len=4}->tun_metadata7",
        )
        .unwrap();
        assert_eq!(two.len(), 2);
        assert!(parse_tlv_map("{class=1,type=2,len=5}->tun_metadata0").is_err());
        assert!(parse_tlv_map("{class=1,type=2,len=4}->tun_metadata64").is_err());
        assert!(parse_tlv_map("{class=1,type=2,len=124}->tun_metadata63").is_ok());
        assert!(parse_tlv_map("{class=1,type=2,len=128}->tun_metadata0").is_err());
        assert!(parse_tlv_map("{class=1,len=4}->tun_metadata0").is_err());
        assert!(parse_tlv_map("class=1").is_err());
    }

    struct B(&'static str, Vec<(IpAddr, u8)>);
    impl UnderlayBridge for B {
        fn name(&self) -> &str {
            self.0
        }
        fn addrs(&self) -> &[(IpAddr, u8)] {
            &self.1
        }
    }

    #[test]
    fn routes_and_neighbours() {
        let u = Underlay {
            user_routes: vec![Route {
                prefix: "10.9.0.0".parse().unwrap(),
                plen: 16,
                bridge: "br-phy".into(),
                gw: Some("10.1.2.1".parse().unwrap()),
                user: true,
            }],
            ..Underlay::default()
        };
        let brs = [B("br-phy", vec![("10.1.2.8".parse().unwrap(), 24)])];
        let h = u.route(&brs, "10.1.2.9".parse().unwrap()).unwrap();
        assert_eq!(h.next_hop, "10.1.2.9".parse::<IpAddr>().unwrap());
        assert_eq!(h.src, "10.1.2.8".parse::<IpAddr>().unwrap());
        let h = u.route(&brs, "10.9.3.4".parse().unwrap()).unwrap();
        assert_eq!(h.next_hop, "10.1.2.1".parse::<IpAddr>().unwrap());
        assert!(u.route(&brs, "192.0.2.1".parse().unwrap()).is_none());
        let show = u.show_routes(&brs);
        assert!(
            show.contains("Cached: 10.1.2.8/32 dev br-phy SRC 10.1.2.8 local"),
            "{show}"
        );
        assert!(
            show.contains("Cached: 10.1.2.0/24 dev br-phy SRC 10.1.2.8\n"),
            "{show}"
        );
        assert!(
            show.contains("User: 10.9.0.0/16 dev br-phy GW 10.1.2.1 SRC 10.1.2.8"),
            "{show}"
        );
        let ip = "10.1.2.9".parse().unwrap();
        let mac = EthAddr([0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48]);
        assert!(u.set_neigh("br-phy", ip, mac, true));
        assert!(!u.set_neigh("br-phy", ip, EthAddr([2; 6]), false));
        assert_eq!(u.lookup_neigh(ip), Some(mac));
        assert!(u.show_neigh().contains("10.1.2.9"));
    }
}
