//! Control commands for a bridge's controllers, fail mode and OpenFlow versions, named and
//! answering as `ovs-vsctl`'s (`set-controller`, `get-controller`, `del-controller`,
//! `set-fail-mode`, `get-fail-mode`, `del-fail-mode`), with `set-protocols`, `get-protocols`
//! and `del-protocols` for the Bridge table's `protocols` column, and `controller/show`: each
//! controller's `is_connected`, `role` and `status`, as `ovs-vsctl list controller` shows
//! them. Changes take effect without a restart: the flow table is flushed at once where OVS
//! flushes it, the connections change on the OpenFlow server's next turn.

use std::fmt::Write as _;
use std::sync::Arc;

use ofproto::ofproto::Ofproto;
use unixctl::Registry;

use crate::ofserver::{BridgeControl, ControllerSettings, FailMode, check_target, parse_protocol};

/// Registers the commands.
pub fn register(reg: &Registry, of: &Arc<Ofproto>, settings: &ControllerSettings) {
    let change = |reg: &Registry,
                  name: &str,
                  usage: &str,
                  min: usize,
                  max: usize,
                  f: fn(&mut BridgeControl, &[String]) -> Result<(), String>| {
        let (of, settings) = (of.clone(), settings.clone());
        let _ = reg.register(name, usage, min, max, move |a| {
            let bridge = &a[0];
            known_bridge(&of, bridge)?;
            let mut c = settings.get(bridge);
            f(&mut c, &a[1..])?;
            settings.set(&of, bridge, c)?;
            Ok(String::new())
        });
    };
    change(
        reg,
        "set-controller",
        "BRIDGE [--inactivity-probe=MSECS] [--max-backoff=MSECS] TARGET...",
        2,
        64,
        set_controller,
    );
    change(reg, "del-controller", "BRIDGE", 1, 1, |c, _| {
        c.controllers.clear();
        Ok(())
    });
    change(reg, "set-fail-mode", "BRIDGE MODE", 2, 2, |c, a| {
        c.fail_mode = Some(FailMode::parse(&a[0])?);
        Ok(())
    });
    change(reg, "del-fail-mode", "BRIDGE", 1, 1, |c, _| {
        c.fail_mode = None;
        Ok(())
    });
    change(reg, "set-protocols", "BRIDGE PROTOCOL...", 2, 6, |c, a| {
        c.protocols = a
            .iter()
            .map(|p| parse_protocol(p))
            .collect::<Result<_, _>>()?;
        Ok(())
    });
    change(reg, "del-protocols", "BRIDGE", 1, 1, |c, _| {
        c.protocols.clear();
        Ok(())
    });
    let query = |reg: &Registry, name: &str, f: fn(&BridgeControl) -> String| {
        let (of, settings) = (of.clone(), settings.clone());
        let _ = reg.register(name, "BRIDGE", 1, 1, move |a| {
            known_bridge(&of, &a[0])?;
            Ok(f(&settings.get(&a[0])))
        });
    };
    query(reg, "get-controller", |c| {
        // Sorted, as ovs-vsctl prints them.
        let mut t = c.controllers.clone();
        t.sort();
        t.iter().map(|t| format!("{t}\n")).collect()
    });
    query(reg, "get-fail-mode", |c| {
        c.fail_mode
            .map(|m| format!("{}\n", m.name()))
            .unwrap_or_default()
    });
    query(reg, "get-protocols", |c| {
        c.protocols
            .iter()
            .map(|v| format!("{}\n", v.name()))
            .collect()
    });
    let (of2, settings2) = (of.clone(), settings.clone());
    let _ = reg.register("controller/show", "[BRIDGE]", 0, 1, move |a| {
        let bridges = match a.first() {
            Some(b) => {
                known_bridge(&of2, b)?;
                vec![b.clone()]
            }
            None => of2.bridge_ports().into_iter().map(|(b, _)| b).collect(),
        };
        Ok(show(&settings2, &bridges))
    });
}

/// `ovs-vsctl`'s error for a bridge it does not know.
fn known_bridge(of: &Ofproto, bridge: &str) -> Result<(), String> {
    of.port_names(bridge)
        .map(drop)
        .map_err(|_| format!("no bridge named {bridge}"))
}

/// `set-controller`'s arguments: options, then targets (each checked). As `ovs-vsctl`, which
/// makes new Controller records, an option not given is back to its default.
fn set_controller(c: &mut BridgeControl, a: &[String]) -> Result<(), String> {
    c.inactivity_probe = None;
    c.max_backoff = None;
    let mut targets = Vec::new();
    for arg in a {
        let ms = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{arg}: expected a number of milliseconds"))
        };
        if let Some(v) = arg.strip_prefix("--inactivity-probe=") {
            c.inactivity_probe = Some(ms(v)?);
        } else if let Some(v) = arg.strip_prefix("--max-backoff=") {
            c.max_backoff = Some(ms(v)?);
        } else {
            check_target(arg)?;
            targets.push(arg.clone());
        }
    }
    if targets.is_empty() {
        return Err("'set-controller' command requires at least 2 arguments".into());
    }
    c.controllers = targets;
    Ok(())
}

/// Each controller of `bridges` in `ovs-vsctl list controller`'s layout.
fn show(settings: &ControllerSettings, bridges: &[String]) -> String {
    let mut out = String::new();
    for b in bridges {
        for s in settings.status(b) {
            if !out.is_empty() {
                out.push('\n');
            }
            let status: Vec<String> = s
                .status
                .iter()
                .map(|(k, v)| format!("{k}={}", quote(v)))
                .collect();
            let _ = writeln!(out, "{:<20}: {b}", "bridge");
            let _ = writeln!(out, "{:<20}: {}", "is_connected", s.is_connected);
            let _ = writeln!(out, "{:<20}: {}", "role", s.role.unwrap_or("[]"));
            let _ = writeln!(out, "{:<20}: {{{}}}", "status", status.join(", "));
            let _ = writeln!(out, "{:<20}: \"{}\"", "target", s.target);
        }
        if settings.failing_open(b) {
            let _ = writeln!(out, "{b}: failing open");
        }
    }
    out
}

/// An OVSDB string as `ovs-vsctl` prints it: bare when it is a plain word (a number is
/// quoted, to tell it from an integer).
fn quote(v: &str) -> String {
    let word = v.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if word {
        v.to_owned()
    } else {
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_controller_replaces_targets_and_options() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut c = BridgeControl::default();
        set_controller(
            &mut c,
            &args(&["--inactivity-probe=30000", "tcp:10.0.0.1", "ptcp:6654"]),
        )
        .unwrap();
        assert_eq!(c.controllers, ["tcp:10.0.0.1", "ptcp:6654"]);
        assert_eq!(c.inactivity_probe, Some(30000));
        set_controller(&mut c, &args(&["tcp:10.0.0.2"])).unwrap();
        assert_eq!(c.controllers, ["tcp:10.0.0.2"]);
        assert_eq!(c.inactivity_probe, None);
        assert!(set_controller(&mut c, &args(&["--max-backoff=x", "tcp:10.0.0.2"])).is_err());
        assert!(set_controller(&mut c, &args(&["--max-backoff=1000"])).is_err());
    }

    #[test]
    fn status_values_are_quoted_as_ovsdb_strings() {
        assert_eq!(quote("ACTIVE"), "ACTIVE");
        assert_eq!(quote("3"), "\"3\"");
        assert_eq!(quote("Connection refused"), "\"Connection refused\"");
    }
}
