//! A switch built from its configuration: the OpenFlow bridges and ports with their numbers
//! (`build_ofproto`), the datapath with its ports opened and its PMD threads started
//! (`build`, `build_with`), the revalidator's step, and where a switch keeps its run directory.
//! `run`, `gen --switch`, the demo and the benchmarks all build their switch here.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, anyhow};
use datapath::dpif::{
    Datapath, DatapathBuilder, DpConfig, RxqAssign, default_pmd_cores, parse_cpu_mask,
};
use datapath::port::Port;
use netdev::memory::{ReplayPort, SampleSpec, SinkPort};
use netdev::pcap_port::PcapPort;
use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;

use crate::config::{self, Config, PortConf};

/// The default run directory: `$FLOWPATH_RUNDIR`, else `/run/flowpath` for root, else
/// `$XDG_RUNTIME_DIR/flowpath`, else `/tmp/flowpath-UID`.
pub fn default_rundir() -> PathBuf {
    if let Some(d) = std::env::var_os("FLOWPATH_RUNDIR") {
        return d.into();
    }
    let uid = rustix::process::getuid().as_raw();
    if uid == 0 {
        return "/run/flowpath".into();
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        return PathBuf::from(d).join("flowpath");
    }
    PathBuf::from(format!("/tmp/flowpath-{uid}"))
}

/// Reads and checks a configuration file, printing every problem.
pub fn load(path: &Path) -> anyhow::Result<Config> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    config::parse(&text).map_err(|errs| {
        let lines: Vec<String> = errs
            .iter()
            .map(|e| format!("{}: {e}", path.display()))
            .collect();
        anyhow!("bad configuration:\n{}", lines.join("\n"))
    })
}

/// Opens the device of port `p` of `bridge` (its LOCAL port takes the bridge's Ethernet and
/// IP addresses), paths relative to `base`.
pub(crate) fn open_port(
    p: &PortConf,
    bridge: Option<&config::Bridge>,
    base: &Path,
) -> anyhow::Result<Box<dyn Port>> {
    Ok(match p.kind.as_str() {
        "internal" => {
            let Ok(config::KernelPortOptions::Tap(o)) = config::kernel_port_options(p) else {
                return Err(anyhow!("port {}: bad options", p.name));
            };
            let tap = netdev::tap::TapPort::open(&p.name, &o)
                .map_err(|e| anyhow!("port {} (internal, a TAP device): {e}", p.name))?;
            if let Some(b) = bridge {
                let mac = b
                    .hwaddr
                    .as_deref()
                    .map(ofproto::tunnel::parse_mac)
                    .transpose()
                    .map_err(|e| anyhow!("bridge {}: {e}", b.name))?
                    .map(|m| m.0);
                let addrs =
                    config::bridge_addrs(b).map_err(|e| anyhow!("bridge {}: {e}", b.name))?;
                tap.set_addresses(mac, &addrs)
                    .map_err(|e| anyhow!("port {}: {e}", p.name))?;
            }
            Box::new(tap)
        }
        "pcap" => {
            let rx = config::opt_path(p, "rx_pcap", base);
            let tx = config::opt_path(p, "tx_pcap", base);
            let files: Vec<String> = rx
                .iter()
                .chain(&tx)
                .map(|f| f.display().to_string())
                .collect();
            Box::new(
                PcapPort::open(&p.name, rx.as_deref(), tx.as_deref())
                    .with_context(|| format!("port {} ({})", p.name, files.join(", ")))?,
            )
        }
        "replay" => {
            let path = config::opt_path(p, "pcap", base).context("replay needs pcap")?;
            let frames = netdev::pcap::read_file(&path)
                .with_context(|| format!("port {}: {}", p.name, path.display()))?
                .into_iter()
                .map(|r| r.data)
                .collect();
            let n_rxq = p
                .options
                .get("n_rxq")
                .and_then(|v| v.as_integer())
                .unwrap_or(1)
                .max(1) as usize;
            Box::new(ReplayPort::new(
                &p.name,
                &path.display().to_string(),
                frames,
                n_rxq,
            ))
        }
        "sink" => Box::new(SinkPort::new(&p.name, SampleSpec::default())),
        "dummy" => Box::new(netdev::dummy::DummyPort::new(&p.name)),
        "gen" => {
            return Err(anyhow!(
                "port {}: type gen is the switch's end of a link to the traffic generator in \
                 the same process; it exists only under `flowpath gen --switch CONFIG STREAMS`",
                p.name
            ));
        }
        "afpacket" | "afxdp" | "tap" => {
            use config::KernelPortOptions as K;
            let o = config::kernel_port_options(p).map_err(|e| anyhow!("port {}: {e}", p.name))?;
            let opened: Result<Box<dyn Port>, String> = match &o {
                K::AfPacket(o) => netdev::afpacket::AfPacketPort::open(&p.name, o)
                    .map(|x| Box::new(x) as Box<dyn Port>)
                    .map_err(|e| e.to_string()),
                K::AfXdp(o) => netdev::afxdp::AfXdpPort::open(&p.name, o)
                    .map(|x| Box::new(x) as Box<dyn Port>)
                    .map_err(|e| e.to_string()),
                K::Tap(o) => netdev::tap::TapPort::open(&p.name, o)
                    .map(|x| Box::new(x) as Box<dyn Port>)
                    .map_err(|e| e.to_string()),
            };
            opened.map_err(|e| anyhow!("port {} ({}): {e}", p.name, p.kind))?
        }
        "dpdk" => crate::dpdk::open_port(&p.name, &config::option_strings(p))?,
        "vhostuser" | "vhostuserclient" => {
            let o = config::vhost_options(p, base).map_err(|e| anyhow!("port {}: {e}", p.name))?;
            Box::new(
                netdev::vhost::VhostPort::open(&p.name, o)
                    .map_err(|e| anyhow!("port {} ({}): {e}", p.name, p.kind))?,
            )
        }
        other => return Err(anyhow!("port {}: unknown type {other}", p.name)),
    })
}

/// The datapath port a tunnel uses (`vxlan_sys_4789`, ...).
pub(crate) fn tunnel_dp_port(t: &ofproto::tunnel::TunnelConfig) -> Box<dyn Port> {
    use datapath::tunnel::{TunnelKind, TunnelPort};
    use ofproto::tunnel::TunnelType;
    let kind = match t.kind {
        TunnelType::Vxlan => TunnelKind::Vxlan {
            dst_port: t.dst_port,
        },
        TunnelType::Geneve => TunnelKind::Geneve {
            dst_port: t.dst_port,
        },
        // ERSPAN ports only send: their datapath port is never given anything to pop.
        TunnelType::Gre | TunnelType::Erspan => TunnelKind::Gre,
    };
    Box::new(TunnelPort::new(&t.dp_port_name(), kind))
}

/// The table of a new bridge, as OVS makes it (standalone fail mode, no controller): switch
/// like a learning bridge until told otherwise.
pub const DEFAULT_FLOW: &str = "priority=0,actions=NORMAL";

/// The OpenFlow side of a configuration: bridges, ports with their datapath port numbers
/// (given in order of appearance from 1; patch ports have none) and flows.
pub fn build_ofproto(cfg: &Config, base: &Path) -> anyhow::Result<Arc<Ofproto>> {
    let of = Ofproto::new();
    for br in &cfg.bridge {
        of.add_bridge(&br.name).map_err(|e| anyhow!(e))?;
        let hw = br
            .hwaddr
            .as_deref()
            .map(ofproto::tunnel::parse_mac)
            .transpose()
            .map_err(|e| anyhow!("bridge {}: {e}", br.name))?;
        let addrs = config::bridge_addrs(br).map_err(|e| anyhow!("bridge {}: {e}", br.name))?;
        if hw.is_some() || !addrs.is_empty() {
            of.set_bridge_addrs(&br.name, hw, addrs)
                .map_err(|e| anyhow!(e))?;
        }
        if let Some(d) = &br.datapath_id {
            let id = config::parse_dpid(d)
                .ok_or_else(|| anyhow!("bridge {}: bad datapath-id '{d}'", br.name))?;
            of.set_bridge_datapath_id(&br.name, Some(id))
                .map_err(|e| anyhow!(e))?;
        }
        for m in &br.tlv_map {
            of.add_tlv_map(&br.name, m)
                .map_err(|e| anyhow!("bridge {}: tlv-map '{m}': {e}", br.name))?;
        }
    }
    // Every bridge's LOCAL port is a datapath port; without an internal port in the
    // configuration it has no device (see `build_with`).
    for (br, no) in cfg.local_ports() {
        of.add_port(
            &br.name,
            OfPort {
                name: br.name.clone(),
                ofport: ofproto::syntax::OFPP_LOCAL,
                dp_port: Some(no),
                peer: None,
                vlan: VlanMode::default(),
            },
        )
        .map_err(|e| anyhow!("bridge {}: {e}", br.name))?;
    }
    for np in cfg.ports() {
        let p = np.port;
        let port = OfPort {
            name: p.name.clone(),
            ofport: np.ofport,
            dp_port: np.dp_port,
            peer: config::opt_str(p, "peer").map(str::to_owned),
            vlan: VlanMode {
                tag: p.tag,
                trunks: p.trunks.clone(),
                mode: p
                    .vlan_mode
                    .as_deref()
                    .and_then(ofproto::bridge::PortVlanMode::parse),
                ..VlanMode::default()
            },
        };
        if config::TUNNEL_TYPES.contains(&p.kind.as_str()) {
            let t = config::tunnel_config(p).map_err(|e| anyhow!("port {}: {e}", p.name))?;
            of.add_tunnel_port(&np.bridge.name, port, t)
        } else {
            of.add_port(&np.bridge.name, port)
        }
        .map_err(|e| anyhow!("bridge {}: {e}", np.bridge.name))?;
    }
    for r in &cfg.tunnel.route {
        let w: Vec<&str> = r.split_whitespace().collect();
        let (prefix, bridge) = match w.as_slice() {
            [p, b, ..] => (*p, *b),
            _ => {
                return Err(anyhow!(
                    "tunnel route '{r}': expected PREFIX/LEN BRIDGE [GATEWAY]"
                ));
            }
        };
        of.route_add(prefix, bridge, w.get(2).copied())
            .map_err(|e| anyhow!("tunnel route '{r}': {e}"))?;
    }
    for n in &cfg.tunnel.neigh {
        let w: Vec<&str> = n.split_whitespace().collect();
        let [bridge, ip, mac] = w.as_slice() else {
            return Err(anyhow!("tunnel neigh '{n}': expected BRIDGE IP MAC"));
        };
        of.neigh_set(bridge, ip, mac)
            .map_err(|e| anyhow!("tunnel neigh '{n}': {e}"))?;
    }
    for br in &cfg.bridge {
        // OVS's NORMAL flow is for a standalone bridge (`connmgr_flushed()`); `run` takes it
        // away again where the bridge has controllers.
        let control = crate::ofserver::BridgeControl::from_config(br)
            .map_err(|e| anyhow!("bridge {}: {e}", br.name))?;
        let standalone = control.fail_mode() == crate::ofserver::FailMode::Standalone;
        if br.flows.is_none() && br.flows_file.is_none() && standalone {
            of.add_flow(&br.name, DEFAULT_FLOW)
                .map_err(|e| anyhow!("bridge {}: {e}", br.name))?;
        }
        for f in br.flows.iter().flatten() {
            of.add_flow(&br.name, f)
                .map_err(|e| anyhow!("bridge {}: flow '{f}': {e}", br.name))?;
        }
        if let Some(file) = &br.flows_file {
            let path = base.join(file);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("bridge {}: flows-file {}", br.name, path.display()))?;
            of.add_flows(&br.name, &text)
                .map_err(|e| anyhow!("bridge {}: {}: {e}", br.name, path.display()))?;
        }
    }
    Ok(of)
}

/// Builds and starts the datapath a configuration describes, with `of` as its slow path.
pub fn build(cfg: &Config, base: &Path, of: &Arc<Ofproto>) -> anyhow::Result<Datapath> {
    build_with(cfg, of, |p| open_config_port(cfg, p, base))
}

/// Opens port `p` of `cfg` with its bridge (see [`open_port`]).
pub(crate) fn open_config_port(
    cfg: &Config,
    p: &PortConf,
    base: &Path,
) -> anyhow::Result<Box<dyn Port>> {
    let bridge = cfg
        .bridge
        .iter()
        .find(|b| b.port.iter().any(|q| std::ptr::eq(q, p)));
    open_port(p, bridge, base)
}

/// One revalidator step: when tables or MAC entries changed, and once a second anyway (rule
/// statistics, timeouts), re-checks every megaflow against a fresh translation. `last` is when
/// it last did.
pub(crate) fn revalidate_when_due(
    of: &Ofproto,
    dp: &Mutex<Datapath>,
    last: &mut std::time::Instant,
) {
    if of.generation() != of.revalidated_generation() || last.elapsed().as_secs() >= 1 {
        *last = std::time::Instant::now();
        if let Ok(mut d) = dp.lock() {
            of.revalidate(&mut d);
        }
    }
}

/// [`build`] with the ports that have a device of their own opened by `open` (the demo and
/// the benchmarks give in-memory sources and sinks).
pub fn build_with(
    cfg: &Config,
    of: &Arc<Ofproto>,
    mut open: impl FnMut(&PortConf) -> anyhow::Result<Box<dyn Port>>,
) -> anyhow::Result<Datapath> {
    let d = &cfg.datapath;
    let cores = match &d.pmd_cpu_mask {
        Some(m) => parse_cpu_mask(m)
            .map_err(|e| anyhow!(e))?
            .into_iter()
            .map(Some)
            .collect(),
        // One PMD, on core 1 when there is one, as OVS's single-NUMA default.
        None => default_pmd_cores(1),
    };
    let mut dc = DpConfig {
        pmd_cores: cores,
        ..DpConfig::default()
    };
    dc.pmd.emc_insert_inv_prob = d.emc_insert_inv_prob;
    dc.pmd.flow_limit = d.flow_limit;
    dc.pmd.max_idle_ms = d.max_idle;
    if let Some(a) = &d.pmd_rxq_assign {
        dc.rxq_assign = RxqAssign::parse(a).map_err(|e| anyhow!(e))?;
    }
    let mut b = DatapathBuilder::new(dc);
    cfg.conntrack.apply(&b.conntrack());
    b.set_frag_config(cfg.conntrack.frag_config());
    let of = of.clone();
    b.set_upcall(Box::new(move || of.upcall_handler()));
    let mut tunnels_added = Vec::new();
    for np in cfg.ports() {
        let Some(no) = np.dp_port else { continue };
        if config::TUNNEL_TYPES.contains(&np.port.kind.as_str()) {
            // One datapath port per tunnel type and UDP port, shared by its tunnels.
            if !tunnels_added.contains(&no) {
                tunnels_added.push(no);
                let t = config::tunnel_config(np.port).map_err(|e| anyhow!(e))?;
                b.add_port(no, tunnel_dp_port(&t))
                    .map_err(|e| anyhow!("port {}: {e}", t.dp_port_name()))?;
            }
            continue;
        }
        b.add_port(no, open(np.port)?)
            .map_err(|e| anyhow!("port {}: {e}", np.port.name))?;
    }
    for (br, no) in cfg.local_ports() {
        b.add_port(no, Box::new(netdev::dummy::DummyPort::internal(&br.name)))
            .map_err(|e| anyhow!("bridge {}: {e}", br.name))?;
    }
    for f in &d.dp_flows {
        let (k, a) = config::split_dp_flow(f).ok_or_else(|| anyhow!("bad dp-flows entry '{f}'"))?;
        b.add_flow(k, a)
            .map_err(|e| anyhow!("dp-flows entry '{f}': {e}"))?;
    }
    let mut dp = b.start().map_err(|e| anyhow!(e))?;
    dp.set_pmd_max_sleep(d.pmd_maxsleep);
    dp.set_pmd_idle_wait(d.pmd_idle_wait);
    Ok(dp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bridge_without_flows_gets_ovs_default_table_and_flows_empty_gets_none() {
        let cfg = config::parse(
            "[[bridge]]\nname = \"a\"\n[[bridge]]\nname = \"b\"\nflows = []\n\
             [[bridge]]\nname = \"c\"\nflows = [\"actions=drop\"]\n",
        )
        .unwrap_or_else(|e| panic!("{}", e[0]));
        let of = build_ofproto(&cfg, Path::new(".")).unwrap();
        let dump = |b| of.dump_flows(b, None).unwrap();
        assert!(
            dump("a").contains("priority=0 actions=NORMAL"),
            "{}",
            dump("a")
        );
        assert!(!dump("b").contains("actions="), "{}", dump("b"));
        let c = dump("c");
        assert!(c.contains("actions=drop") && !c.contains("NORMAL"), "{c}");
    }

    /// `datapath-id`, as OVS's `other_config:datapath-id`: the bridge's id instead of its
    /// LOCAL port's address; a value OVS would not take is the configuration's error.
    #[test]
    fn a_bridge_takes_its_configured_datapath_id() {
        let cfg = config::parse(
            "[[bridge]]\nname = \"a\"\nhwaddr = \"aa:55:aa:55:00:00\"\n\
             datapath-id = \"fedcba9876543210\"\n[[bridge]]\nname = \"b\"\n\
             hwaddr = \"aa:55:aa:55:00:01\"\n",
        )
        .unwrap_or_else(|e| panic!("{}", e[0]));
        let of = build_ofproto(&cfg, Path::new(".")).unwrap();
        let pipe = of.pipe.read().unwrap();
        let id = |b| crate::ofserver::datapath_id(pipe.bridge(b).unwrap());
        assert_eq!(id("a"), 0xfedc_ba98_7654_3210);
        assert_eq!(id("b"), 0xaa55_aa55_0001);
        for bad in [
            "0",
            "0000000000000000",
            "fedcba987654321g",
            "fedcba98765432100",
        ] {
            let e = config::parse(&format!(
                "[[bridge]]\nname = \"a\"\ndatapath-id = \"{bad}\"\n"
            ))
            .unwrap_err();
            assert!(e[0].to_string().contains("datapath-id"), "{bad}: {}", e[0]);
        }
    }
}
