//! `flowpath run --config FILE [--rundir DIR] [--until-idle]`: the switch in the foreground,
//! with its control socket `DIR/flowpath.ctl` speaking OVS's unixctl protocol (so
//! `ovs-appctl -t DIR/flowpath.ctl COMMAND` works), stopped cleanly by SIGINT, SIGTERM or the
//! `exit` command.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow};
use datapath::dpif::{
    Datapath, DatapathBuilder, DpConfig, RxqAssign, default_pmd_cores, parse_cpu_mask,
};
use datapath::port::Port;
use netdev::memory::{ReplayPort, SampleSpec, SinkPort};
use netdev::pcap_port::PcapPort;
use unixctl::{Registry, Server};

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
        TunnelType::Gre => TunnelKind::Gre,
    };
    Box::new(TunnelPort::new(&t.dp_port_name(), kind))
}

/// The table of a new bridge, as OVS makes it (standalone fail mode): switch like a learning
/// bridge until told otherwise.
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
        if br.flows.is_none() && br.flows_file.is_none() {
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
    b.start().map_err(|e| anyhow!(e))
}

/// Drops a leading datapath name argument (`netdev@flowpath`, `flowpath`), as OVS's dpctl
/// commands accept one.
fn strip_dp(args: &[String], want: usize) -> &[String] {
    if args.len() > want
        && (args[0] == "netdev@flowpath" || args[0] == "flowpath" || args[0] == "netdev@ovs-netdev")
    {
        &args[1..]
    } else {
        args
    }
}

/// The names the datapath answers to in the `[dp]` argument of the conntrack commands (those
/// [`strip_dp`] drops).
const DP_NAMES: [&str; 3] = ["netdev@flowpath", "flowpath", "netdev@ovs-netdev"];

/// Registers the connection tracker's commands (`dpctl/dump-conntrack`, `dpctl/ct-set-limits`,
/// ...; see [`conntrack::format`]). They work on the shared table, without the datapath lock.
fn register_ct(reg: &Registry, ct: &Arc<conntrack::Conntrack>) {
    for c in conntrack::format::CtCommand::ALL {
        let ct = ct.clone();
        let (min, max) = c.args();
        let _ = reg.register(c.name(), c.usage(), min, max, move |a| {
            conntrack::format::run(&ct, c, a, &DP_NAMES).map_err(|e| e.to_string())
        });
    }
}

/// Registers the fragment reassembler's commands (`dpctl/ipf-*`, see
/// [`conntrack::ipf_format`]). Each PMD thread has its own reassembler, so they go through the
/// datapath: a setting to every PMD, the status summed over them.
fn register_ipf(reg: &Registry, dp: &Arc<Mutex<Datapath>>) {
    use conntrack::ipf_format::{self, IpfCommand};
    for c in IpfCommand::ALL {
        let dp = dp.clone();
        let (min, max) = c.args();
        let _ = reg.register(c.name(), c.usage(), min, max, move |a| {
            let req = ipf_format::parse(c, a, &DP_NAMES).map_err(|e| e.to_string())?;
            let mut d = dp
                .lock()
                .map_err(|_| "datapath lock poisoned".to_string())?;
            match req.apply(d.frag_config()).map_err(|e| e.to_string())? {
                Some(cfg) => {
                    d.set_frag_config(cfg);
                    Ok(req.reply().to_string())
                }
                None => {
                    let lists = req == ipf_format::IpfRequest::GetStatus { lists: true };
                    Ok(ipf_format::format_status(&d.frag_status(lists), lists))
                }
            }
        });
    }
}

/// A control command that works on the datapath.
type DpCommand = fn(&mut Datapath, &[String]) -> Result<String, String>;

/// Registers `f` as command `name`, run with the datapath locked (control path only; the PMD
/// threads never take this lock).
fn register_dp(
    reg: &Registry,
    dp: &Arc<Mutex<Datapath>>,
    name: &str,
    usage: &str,
    args: (usize, usize),
    f: DpCommand,
) {
    let dp = dp.clone();
    let _ = reg.register(name, usage, args.0, args.1, move |a| {
        let mut g = dp
            .lock()
            .map_err(|_| "datapath lock poisoned".to_string())?;
        f(&mut g, a)
    });
}

fn verbose(a: &[String]) -> bool {
    a.iter().any(|x| x == "-m" || x == "--more")
}

/// The control commands, bound to a running datapath.
pub fn registry(
    dp: Arc<Mutex<Datapath>>,
    of: Arc<Ofproto>,
    base: &Path,
    stop: Arc<AtomicBool>,
    flow_limit: usize,
) -> Registry {
    let reg = Registry::new(format!("flowpath {}", env!("CARGO_PKG_VERSION")));
    crate::of_cmd::register(&reg, &of, &dp, base);
    crate::dummy_cmd::register(&reg);
    crate::dpif_show_cmd::register(&reg, &of, &dp);
    crate::port_stats_cmd::register(&reg, &of, &dp);
    crate::upcall_cmd::register(&reg, &of, &dp, flow_limit);
    crate::vlog_cmd::register(&reg);
    {
        // `dpif/dump-flows [-m] [--names|--no-names] [BRIDGE]`: with a bridge, only the flows
        // of its ports; as OVS, no `flow-dump from` lines (only `dpctl/dump-flows` has them).
        let (dp, of) = (dp.clone(), of.clone());
        let usage = "[-m] [--names | --no-names] [bridge]";
        let _ = reg.register("dpif/dump-flows", usage, 0, 3, move |a| {
            let bridge = a.iter().find(|x| !x.starts_with('-'));
            let names = if a.iter().any(|x| x == "--names") {
                true
            } else if a.iter().any(|x| x == "--no-names") {
                false
            } else {
                verbose(a)
            };
            let ids = bridge.map(|b| of.dp_port_ids(b)).transpose()?;
            let dp = dp
                .lock()
                .map_err(|_| "datapath lock poisoned".to_string())?;
            // The bridge's ports by datapath number: ids are names or numbers, and a tunnel
            // port's name is not its datapath port's (`t0` is on `vxlan_sys_4789`).
            let ports: Option<Vec<u32>> = ids.map(|ids| {
                ids.iter()
                    .filter_map(|id| dp.port_names().number(id).or(id.parse().ok()))
                    .collect()
            });
            Ok(dp.dpif_dump_flows(verbose(a), names, ports.as_deref()))
        });
    }
    let r = |name, usage, args, f: DpCommand| register_dp(&reg, &dp, name, usage, args, f);
    r("dpctl/add-flow", "[dp] flow actions", (2, 3), |d, a| {
        let a = strip_dp(a, 2);
        d.add_flow(&a[0], &a[1]).map(|_| String::new())
    });
    r(
        "dpctl/mod-flow",
        "[--clear] [dp] flow actions",
        (2, 4),
        |d, a| {
            let clear = a.first().is_some_and(|x| x == "--clear");
            let a = strip_dp(if clear { &a[1..] } else { a }, 2);
            if a.len() != 2 {
                return Err("usage: dpctl/mod-flow [--clear] [dp] flow actions".into());
            }
            d.mod_flow(&a[0], &a[1], clear).map(|_| String::new())
        },
    );
    r("dpctl/del-flow", "[dp] flow", (1, 2), |d, a| {
        d.del_flow(&strip_dp(a, 1)[0]).map(|_| String::new())
    });
    r("dpctl/del-flows", "[dp]", (0, 1), |d, _| {
        d.del_flows();
        Ok(String::new())
    });
    r("dpctl/get-flow", "[dp] ufid", (1, 2), |d, a| {
        d.get_flow(&strip_dp(a, 1)[0])
    });
    r("dpctl/dump-flows", "[-m] [dp]", (0, 2), |d, a| {
        Ok(d.dump_flows(verbose(a)))
    });
    r("dpctl/show", "[-s] [dp]", (0, 2), |d, a| {
        Ok(d.dpctl_show(a.iter().any(|x| x == "-s" || x == "--statistics")))
    });
    r("port/stats", "port", (1, 1), |d, a| d.port_stats(&a[0]));
    r(
        "dpif-netdev/pmd-stats-show",
        "[-pmd core] [dp]",
        (0, 3),
        |d, _| Ok(d.pmd_stats_show()),
    );
    r(
        "dpif-netdev/pmd-perf-show",
        "[-nh] [-it iter_hist] [-ms ms_hist] [-pmd core] [dp]",
        (0, 8),
        |d, _| Ok(d.pmd_perf_show()),
    );
    r(
        "dpif-netdev/pmd-stats-clear",
        "[-pmd core] [dp]",
        (0, 3),
        |d, _| {
            d.clear_stats();
            Ok(String::new())
        },
    );
    r(
        "dpif-netdev/pmd-rxq-show",
        "[-pmd core] [-secs secs] [dp]",
        (0, 5),
        |d, _| Ok(d.pmd_rxq_show()),
    );
    r("dpif-netdev/pmd-rxq-rebalance", "[dp]", (0, 1), |d, _| {
        Ok(d.rxq_rebalance())
    });
    r("dpif-netdev/pmd-stage-show", "[dp]", (0, 1), |d, _| {
        Ok(d.pmd_stage_show())
    });
    r("dpif-netdev/pmd-drop-show", "[dp]", (0, 1), |d, _| {
        Ok(d.pmd_drop_show())
    });
    if let Ok(d) = dp.lock() {
        register_ct(&reg, d.conntrack());
    }
    register_ipf(&reg, &dp);
    let _ = reg.register("exit", "[--cleanup]", 0, 1, move |_| {
        stop.store(true, Ordering::Relaxed);
        Ok(String::new())
    });
    reg
}

/// Runs the switch until a signal, `exit`, or (with `until_idle`) the end of its finite
/// sources.
pub fn run(
    config_path: &Path,
    rundir: Option<&Path>,
    until_idle: bool,
) -> anyhow::Result<ExitCode> {
    let cfg = load(config_path)?;
    let base = config_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let rundir = rundir.map(Path::to_path_buf).unwrap_or_else(default_rundir);
    let of = build_ofproto(&cfg, &base)?;
    let dp = build(&cfg, &base, &of)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let dp = Arc::new(Mutex::new(dp));
    std::fs::create_dir_all(&rundir)
        .with_context(|| format!("run directory {}", rundir.display()))?;
    let sock = unixctl::socket_path(&rundir);
    let server = Server::bind(
        &sock,
        registry(
            dp.clone(),
            of.clone(),
            &base,
            stop.clone(),
            cfg.datapath.flow_limit,
        ),
    )
    .with_context(|| format!("control socket {}", sock.display()))?;
    eprintln!("flowpath: running; control socket {}", sock.display());

    // The revalidator.
    let mut last = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
        if until_idle && dp.lock().map(|d| d.drained()).unwrap_or(true) {
            break;
        }
        revalidate_when_due(&of, &dp, &mut last);
    }
    server.shutdown();
    let dp = Arc::try_unwrap(dp).map_err(|_| anyhow!("datapath still in use"))?;
    let dp = dp
        .into_inner()
        .map_err(|_| anyhow!("datapath lock poisoned"))?;
    drop(dp.stop());
    Ok(ExitCode::SUCCESS)
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
}
