//! The datapath's control commands, as OVS's `dpctl/*` and `dpif/*` and `dpif-netdev/*`:
//! flows (`dpctl/add-flow`, `dpctl/dump-flows`, `dpif/dump-flows`), ports and counters
//! (`dpctl/show`, `port/stats`), PMD threads (`dpif-netdev/pmd-*`), conntrack and the
//! fragment reassembler (`dpctl/*conntrack*`, `dpctl/ct-*`, `dpctl/ipf-*`), and `exit`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use datapath::dpif::Datapath;
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

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
            let mut d = crate::commands::lock_dp(&dp)?;
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
        let mut g = crate::commands::lock_dp(&dp)?;
        f(&mut g, a)
    });
}

fn verbose(a: &[String]) -> bool {
    a.iter().any(|x| x == "-m" || x == "--more")
}

/// Set by `exit --cleanup`: the switch releases the kernel devices it created (its internal
/// ports' persistent TAPs) as it stops, as ovs-vswitchd deletes its ports; a plain `exit`
/// leaves them for the next run.
pub(crate) static CLEANUP: AtomicBool = AtomicBool::new(false);

/// Registers the datapath's commands; `exit` sets `stop` (and `exit --cleanup` [`CLEANUP`]).
pub fn register(
    reg: &Registry,
    dp: &Arc<Mutex<Datapath>>,
    of: &Arc<Ofproto>,
    stop: Arc<AtomicBool>,
) {
    let (dp, of) = (dp.clone(), of.clone());
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
            let dp = crate::commands::lock_dp(&dp)?;
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
    let r = |name, usage, args, f: DpCommand| register_dp(reg, &dp, name, usage, args, f);
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
        crate::coverage_cmd::DPIF_FLOW_FLUSH.inc();
        Ok(String::new())
    });
    r("dpctl/get-flow", "[-m] [dp] ufid", (1, 3), |d, a| {
        let rest: Vec<String> = a
            .iter()
            .filter(|x| *x != "-m" && *x != "--more")
            .cloned()
            .collect();
        let [.., ufid] = strip_dp(&rest, 1) else {
            return Err("usage: dpctl/get-flow [-m] [dp] ufid".into());
        };
        d.get_flow(ufid, verbose(a))
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
    r("dpif-netdev/bond-show", "[dp]", (0, 1), |d, a| {
        // OVS names the userspace datapath `ovs-netdev` here.
        if a.first().is_some_and(|n| n != "ovs-netdev") {
            return Err("please specify an existing datapath".into());
        }
        Ok(bond_show(&d.bonds()))
    });
    if let Ok(d) = dp.lock() {
        register_ct(reg, d.conntrack());
    }
    register_ipf(reg, &dp);
    let _ = reg.register("exit", "[--cleanup]", 0, 1, move |a| {
        if a.iter().any(|x| x == "--cleanup") {
            CLEANUP.store(true, Ordering::Relaxed);
        }
        stop.store(true, Ordering::Relaxed);
        Ok(String::new())
    });
}

/// `dpif-netdev/bond-show`: each bond of the datapath (`lb_output`) with the member port of
/// each bucket, as OVS's `dpif_netdev_bond_show()` prints them (nothing without a bond).
fn bond_show(bonds: &[(u32, datapath::bond::BucketMap)]) -> String {
    use std::fmt::Write;
    if bonds.is_empty() {
        return String::new();
    }
    let mut s = String::from("Bonds:\n");
    for (id, map) in bonds {
        let _ = writeln!(s, "  bond-id {id}:");
        for (bucket, member) in map.iter().enumerate() {
            let _ = writeln!(s, "    bucket {bucket} - member {member}");
        }
    }
    s
}
