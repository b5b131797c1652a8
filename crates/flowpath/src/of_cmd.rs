//! Control commands of the OpenFlow layer: `ofproto/trace`, the `ovs-ofctl`-like flow table
//! commands (`ofctl/add-flow` and friends, which `flowpath ofctl` sends), `fdb/show`, and
//! bridge and patch-port management (`add-br`, `del-br`, `add-port`, `del-port`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use datapath::dpif::Datapath;

use ofproto::bridge::VlanMode;
use ofproto::ofproto::Ofproto;
use unixctl::Registry;

use crate::port_ops::PortBackend;
use crate::vswitchd::ofport::OfportPool;

/// Splits a leading `--strict` off `args`.
fn strict(args: &[String]) -> (bool, &[String]) {
    match args.first() {
        Some(a) if a == "--strict" => (true, &args[1..]),
        _ => (false, args),
    }
}

/// `tnl/egress_port_range [MIN MAX]`, as OVS's: with no argument, the range of UDP source
/// ports pushed tunnel headers take; with two, sets it (in either order; each must be 1 to
/// 65535, else `Invalid min.` or `Invalid max.` and nothing changes, OVS's replies). The
/// datapath's flows are flushed, so that each is compiled again with the new range.
fn egress_port_range(dp: &Mutex<Datapath>, a: &[String]) -> Result<String, String> {
    use datapath::rewrite::{egress_port_range, set_egress_port_range};
    match a {
        [] => {
            let (min, max) = egress_port_range();
            Ok(format!("Tunnel UDP source port range: {min}-{max}\n"))
        }
        [min, max] => {
            let Some(min) = atoi_port(min) else {
                return Ok("Invalid min.\n".into());
            };
            let Some(max) = atoi_port(max) else {
                return Ok("Invalid max.\n".into());
            };
            set_egress_port_range(min, max);
            dp.lock().map_err(|_| "datapath lock poisoned")?.del_flows();
            crate::coverage_cmd::DPIF_FLOW_FLUSH.inc();
            Ok("OK\n".into())
        }
        _ => Err("usage: tnl/egress_port_range [min max]".into()),
    }
}

/// A port number as OVS's `atoi()` reads one (leading blanks, a sign, then digits up to the
/// first other character), when it is 1 to 65535.
fn atoi_port(s: &str) -> Option<u16> {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let v: u64 = t[..digits.min(6)].parse().ok()?;
    let v = if digits > 6 { u64::MAX } else { v };
    (!neg && (1..=65535).contains(&v)).then_some(v as u16)
}

/// Registers the OpenFlow commands.
pub fn register(reg: &Registry, of: &Arc<Ofproto>, dp: &Arc<Mutex<Datapath>>, base: &Path) {
    let r = |name: &str, usage: &str, min: usize, max: usize, f: OfCommand| {
        let of = of.clone();
        let _ = reg.register(name, usage, min, max, move |a| f(&of, a));
    };
    r(
        "ofproto/trace",
        "{[dp_name] odp_flow | bridge br_flow} [OPTIONS...] [-generate|packet]",
        1,
        8,
        |of, a| {
            // `-generate` may come anywhere, as with ovs-appctl.
            let generate = a.iter().any(|x| x == "-generate" || x == "--generate");
            let a: Vec<String> = a
                .iter()
                .filter(|x| *x != "-generate" && *x != "--generate")
                .cloned()
                .collect();
            let [first, rest @ ..] = a.as_slice() else {
                return Err("Syntax error".into());
            };
            of.trace(first, rest, generate)
        },
    );
    r(
        "ofproto/trace-packet-out",
        "[-consistent] {[dp_name] odp_flow | bridge br_flow} [OPTIONS...] [-generate|packet] \
         actions",
        2,
        9,
        |of, a| of.trace_packet_out(a),
    );
    r("ofctl/add-flow", "BRIDGE FLOW", 2, 2, |of, a| {
        of.add_flow(&a[0], &a[1]).map(|_| String::new())
    });
    r("ofctl/add-flows", "BRIDGE FLOWS-TEXT", 2, 2, |of, a| {
        of.add_flows(&a[0], &a[1]).map(|_| String::new())
    });
    r(
        "ofctl/mod-flows",
        "[--strict] BRIDGE FLOW",
        2,
        3,
        |of, a| {
            let (s, a) = strict(a);
            let [bridge, flow] = a else {
                return Err("usage: ofctl/mod-flows [--strict] BRIDGE FLOW".into());
            };
            of.mod_flows(bridge, flow, s).map(|_| String::new())
        },
    );
    r(
        "ofctl/del-flows",
        "[--strict] BRIDGE [FLOW]",
        1,
        3,
        |of, a| {
            let (s, a) = strict(a);
            match a {
                [bridge] => of.del_flows(bridge, None, s),
                [bridge, flow] => of.del_flows(bridge, Some(flow), s),
                _ => return Err("usage: ofctl/del-flows [--strict] BRIDGE [FLOW]".into()),
            }
            .map(|_| String::new())
        },
    );
    r("ofctl/dump-flows", "BRIDGE [FLOW]", 1, 2, |of, a| {
        of.dump_flows(&a[0], a.get(1).map(String::as_str))
    });
    r("ofctl/show", "BRIDGE", 1, 1, |of, a| of.show(&a[0]));
    r("fdb/show", "BRIDGE", 1, 1, |of, a| of.fdb_show(&a[0]));
    r("ofctl/add-tlv-map", "BRIDGE MAP", 2, 2, |of, a| {
        of.add_tlv_map(&a[0], &a[1]).map(|_| String::new())
    });
    r("ofctl/del-tlv-map", "BRIDGE [MAP]", 1, 2, |of, a| {
        of.del_tlv_map(&a[0], a.get(1).map(String::as_str))
            .map(|_| String::new())
    });
    r("ofctl/dump-tlv-map", "BRIDGE", 1, 1, |of, a| {
        of.dump_tlv_map(&a[0])
    });
    r("tnl/ports/show", "[-v]", 0, 1, |of, a| {
        Ok(of.tnl_ports_show(a.first().is_some_and(|v| v == "-v")))
    });
    // OVS names the routing commands ovs/route/*; both spellings work.
    for name in ["tnl/route/add", "ovs/route/add"] {
        r(name, "PREFIX/LEN BRIDGE [GATEWAY]", 2, 3, |of, a| {
            of.route_add(&a[0], &a[1], a.get(2).map(String::as_str))
                .map(|_| "OK\n".to_owned())
        });
    }
    for name in ["tnl/route/del", "ovs/route/del"] {
        r(name, "PREFIX/LEN", 1, 1, |of, a| {
            of.route_del(&a[0]).map(|_| "OK\n".to_owned())
        });
    }
    for name in ["tnl/route/show", "ovs/route/show"] {
        r(name, "", 0, 0, |of, _| Ok(of.route_show()));
    }
    for name in ["tnl/neigh/set", "tnl/arp/set"] {
        r(name, "DEVICE IP MAC", 3, 3, |of, a| {
            of.neigh_set(&a[0], &a[1], &a[2]).map(|_| "OK\n".to_owned())
        });
    }
    for name in ["tnl/neigh/show", "tnl/arp/show"] {
        r(name, "", 0, 0, |of, _| Ok(of.neigh_show()));
    }
    for name in ["tnl/neigh/flush", "tnl/arp/flush"] {
        r(name, "", 0, 0, |of, _| {
            of.neigh_flush();
            Ok("OK\n".to_owned())
        });
    }
    let dp2 = dp.clone();
    let _ = reg.register("tnl/egress_port_range", "min max", 0, 2, move |a| {
        egress_port_range(&dp2, a)
    });
    let (of2, dp2) = (of.clone(), dp.clone());
    let _ = reg.register("add-br", "BRIDGE", 1, 1, move |a| {
        crate::port_ops::add_bridge(&of2, &dp2, &a[0], None)?;
        crate::port_ops::announce(&of2);
        Ok(String::new())
    });
    let ofports = Ofports::default();
    let (of2, dp2, base2, ofports2) = (of.clone(), dp.clone(), base.to_path_buf(), ofports.clone());
    let _ = reg.register(
        "add-port",
        "BRIDGE PORT type=TYPE [options:KEY=VALUE]... [ofport=N] [tag=N] [trunks=A,B] [vlan_mode=MODE]",
        3,
        12,
        move |a| {
            add_port(&of2, &dp2, &base2, &ofports2, a)?;
            crate::port_ops::announce(&of2);
            Ok(String::new())
        },
    );
    let (of2, dp2, ofports2) = (of.clone(), dp.clone(), ofports.clone());
    let _ = reg.register("del-br", "BRIDGE", 1, 1, move |a| {
        crate::port_ops::del_bridge(&of2, &dp2, &a[0])?;
        crate::port_ops::announce(&of2);
        locked_ofports(&ofports2).remove(&a[0]);
        Ok(String::new())
    });
    let (of2, dp2) = (of.clone(), dp.clone());
    let _ = reg.register("del-port", "PORT", 1, 1, move |a| {
        let held = port_of(&of2, &a[0]);
        crate::port_ops::del_port(&of2, &dp2, &a[0], true)?;
        crate::port_ops::announce(&of2);
        if let Some((bridge, n)) = held {
            let mut pools = locked_ofports(&ofports);
            let pool = pools.entry(bridge).or_default();
            pool.hold(n);
            pool.release(n, Instant::now());
        }
        Ok(String::new())
    });
}

/// The OpenFlow port numbers of each bridge's ports that `add-port` numbers itself, handed
/// out as `ovs-vswitchd` hands them out ([`OfportPool`]): a number `del-port` freed is not
/// given again at once.
type Ofports = Arc<Mutex<HashMap<String, OfportPool>>>;

fn locked_ofports(o: &Ofports) -> std::sync::MutexGuard<'_, HashMap<String, OfportPool>> {
    o.lock().unwrap_or_else(|e| e.into_inner())
}

/// The bridge and OpenFlow number of port `name`.
fn port_of(of: &Ofproto, name: &str) -> Option<(String, u32)> {
    let p = of.pipe.read().ok()?;
    p.bridges
        .iter()
        .find_map(|b| b.port_number(name).map(|n| (b.name.clone(), n)))
}

type OfCommand = fn(&Ofproto, &[String]) -> Result<String, String>;

/// `add-port BRIDGE PORT type=TYPE [options:KEY=VALUE]... [ofport=N] [tag=N] [trunks=A,B] [vlan_mode=MODE]`:
/// the port types and options of the configuration file (`type=patch options:peer=NAME`,
/// `type=pcap options:rx_pcap=FILE`, ...; relative paths are taken from the configuration
/// file's directory).
fn add_port(
    of: &Ofproto,
    dp: &Mutex<Datapath>,
    base: &Path,
    ofports: &Ofports,
    a: &[String],
) -> Result<(), String> {
    let (bridge, name) = (&a[0], &a[1]);
    let mut kind = None;
    let mut peer = None;
    let mut ofport = None;
    let mut vlan = VlanMode::default();
    let mut options = std::collections::BTreeMap::new();
    for kv in &a[2..] {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("'{kv}': expected KEY=VALUE"))?;
        let num = |v: &str| {
            v.parse::<u32>()
                .map_err(|_| format!("'{kv}': not a number"))
        };
        match k {
            "type" => kind = Some(v.to_owned()),
            "options:peer" => peer = Some(v.to_owned()),
            k if k.starts_with("options:") => {
                let value = match v.parse::<i64>() {
                    Ok(n) => toml::Value::Integer(n),
                    Err(_) => toml::Value::String(v.to_owned()),
                };
                options.insert(k["options:".len()..].to_owned(), value);
            }
            "ofport" | "ofport_request" => ofport = Some(num(v)?),
            "tag" => vlan.tag = Some(num(v)?.try_into().map_err(|_| "tag out of range")?),
            "trunks" => {
                for t in v.split(',') {
                    vlan.trunks
                        .push(num(t)?.try_into().map_err(|_| "trunk out of range")?);
                }
            }
            "vlan_mode" => {
                vlan.mode = Some(
                    ofproto::bridge::PortVlanMode::parse(v)
                        .ok_or_else(|| format!("vlan_mode {v}: unknown mode"))?,
                );
            }
            _ => return Err(format!("unknown setting '{k}'")),
        }
    }
    let kind = kind.ok_or("add-port needs type=TYPE")?;
    if let Some(p) = &peer {
        options.insert("peer".into(), toml::Value::String(p.clone()));
    }
    let conf = crate::config::PortConf {
        name: name.clone(),
        kind: kind.clone(),
        ofport,
        options,
        tag: vlan.tag,
        trunks: vlan.trunks.clone(),
        vlan_mode: vlan.mode.map(|m| m.name().to_owned()),
    };
    crate::config::check_port(&conf).map_err(|e| format!("port '{name}': {e}"))?;
    let ofport = match ofport {
        Some(n) => n,
        None => {
            let p = of.pipe.read().map_err(|_| "pipeline lock poisoned")?;
            let b = p
                .bridge(bridge)
                .ok_or_else(|| format!("no bridge named {bridge}"))?;
            let mut pools = locked_ofports(ofports);
            let pool = pools.entry(bridge.clone()).or_default();
            // The ports the configuration or an `ofport=N` numbered hold theirs.
            for n in b.ports.keys() {
                pool.hold(*n);
            }
            pool.alloc(None, Instant::now())
                .ok_or("no free OpenFlow port number")?
        }
    };
    let backend = if crate::config::TUNNEL_TYPES.contains(&kind.as_str()) {
        let t = crate::config::tunnel_config(&conf).map_err(|e| format!("port '{name}': {e}"))?;
        PortBackend::Tunnel(t)
    } else if kind == "patch" {
        PortBackend::Patch(peer.unwrap_or_default())
    } else if kind == "internal" {
        return Err(
            "the internal port comes with its bridge (add-br, or the configuration)".into(),
        );
    } else {
        PortBackend::Device(
            crate::switch::open_port(&conf, None, base).map_err(|e| format!("{e:#}"))?,
        )
    };
    crate::port_ops::add_port(of, dp, bridge, name, ofport, vlan, backend)
}
