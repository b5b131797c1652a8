//! Bridges and ports added to and removed from a running switch: the OpenFlow side (ofproto's
//! bridges and ports) and the datapath side (its port table, polled by the PMD threads) changed
//! together, in the order that keeps a packet from finding half a port. The `add-br`,
//! `add-port`, `del-br` and `del-port` control commands and the OVSDB reconciler both change
//! the switch through here; only the port touched is affected (the other ports keep their
//! queues and the PMD threads keep running).

use std::sync::Mutex;

use datapath::dpif::Datapath;
use datapath::port::Port;
use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;
use ofproto::tunnel::TunnelConfig;

use crate::commands::lock_dp as locked;

/// The longest a command that changed ports waits for the OpenFlow server to have announced
/// them: past it the announcement goes out on the server's next turn of its own.
const ANNOUNCE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Has the OpenFlow connections told of the bridges and ports changed so far, as
/// `ovs-vswitchd` tells them before its reconfiguration completes: a command or
/// reconfiguration calls this once done, with no lock held.
pub(crate) fn announce(of: &Ofproto) {
    of.port_status.announce(ANNOUNCE_WAIT);
}

/// What carries a port's packets.
pub(crate) enum PortBackend {
    /// A tunnel: its packets go through the datapath port its type and UDP port share
    /// (`vxlan_sys_4789`), made with the first such tunnel.
    Tunnel(TunnelConfig),
    /// A patch port to the port named: no datapath side.
    Patch(String),
    /// A device of its own, opened.
    Device(Box<dyn Port>),
}

/// Adds bridge `name` with its LOCAL port, whose datapath side is `local` (a device-less
/// internal port when `None`), and OVS's table of a new bridge (`priority=0 actions=NORMAL`).
pub(crate) fn add_bridge(
    of: &Ofproto,
    dp: &Mutex<Datapath>,
    name: &str,
    local: Option<Box<dyn Port>>,
) -> Result<(), String> {
    of.add_bridge(name)?;
    of.add_flow(name, crate::switch::DEFAULT_FLOW)?;
    let mut dp = locked(dp)?;
    // OVS's dummy datapath's number for `brN` (100 + N); any other bridge's LOCAL port
    // too stays clear of the numbers ports take.
    let no = match dummy_dp_port(&dp, name) {
        n if n >= 100 => n,
        _ => dp.free_port_number_from(100),
    };
    let local_port = OfPort {
        name: name.to_owned(),
        ofport: ofproto::syntax::OFPP_LOCAL,
        dp_port: Some(no),
        peer: None,
        vlan: VlanMode::default(),
    };
    if let Err(e) = of.add_port(name, local_port) {
        let _ = of.del_bridge(name);
        return Err(e);
    }
    let port = local.unwrap_or_else(|| Box::new(netdev::dummy::DummyPort::internal(name)));
    if let Err(e) = dp.add_port(no, port) {
        let _ = of.del_bridge(name);
        return Err(e);
    }
    Ok(())
}

/// Adds port `name` to `bridge` as OpenFlow port `ofport`. A port with a device is added to
/// the OpenFlow bridge before the datapath, so that its first packets find the bridge.
pub(crate) fn add_port(
    of: &Ofproto,
    dp: &Mutex<Datapath>,
    bridge: &str,
    name: &str,
    ofport: u32,
    vlan: VlanMode,
    backend: PortBackend,
) -> Result<(), String> {
    let mut of_port = OfPort {
        name: name.to_owned(),
        ofport,
        dp_port: None,
        peer: None,
        vlan,
    };
    match backend {
        PortBackend::Tunnel(t) => {
            let mut dp = locked(dp)?;
            let dp_name = t.dp_port_name();
            of_port.dp_port = Some(match dp.port_names().number(&dp_name) {
                Some(n) => n,
                None => {
                    let n = dp.free_port_number();
                    dp.add_port(n, crate::switch::tunnel_dp_port(&t))?;
                    n
                }
            });
            of.add_tunnel_port(bridge, of_port, t)
        }
        PortBackend::Patch(peer) => {
            of_port.peer = Some(peer);
            of.add_port(bridge, of_port)
        }
        PortBackend::Device(port) => {
            let mut dp = locked(dp)?;
            let no = if port.kind() == "dummy" {
                dummy_dp_port(&dp, name)
            } else {
                dp.free_port_number()
            };
            of_port.dp_port = Some(no);
            of.add_port(bridge, of_port)?;
            if let Err(e) = dp.add_port(no, port) {
                let _ = of.del_port(name);
                return Err(e);
            }
            Ok(())
        }
    }
}

/// Removes bridge `name` and releases its ports for good (their kernel devices too, as
/// ovs-vswitchd deletes a bridge's internal port with it). Removing a bridge or port closes
/// its datapath side (what was batched for it is sent first); the megaflows of its packets go
/// with it, and those that sent to it are removed by the revalidator, as their translation
/// changes.
pub(crate) fn del_bridge(of: &Ofproto, dp: &Mutex<Datapath>, name: &str) -> Result<(), String> {
    let b = of.del_bridge(name)?;
    let mut dp = locked(dp)?;
    // Its meters' datapath meters are freed for other bridges.
    for m in b.meters.iter() {
        dp.meter_del(m.dp_id);
    }
    for p in b.ports.values().filter(|p| p.dp_port.is_some()) {
        release_dp_port(&mut dp, &p.name, true)?;
    }
    Ok(())
}

/// Removes port `name` from its bridge and the datapath. With `for_good` (the port is
/// deleted, not replaced by one of the same kind), a kernel device it made and keeps beyond
/// its own life (an internal port's persistent TAP) goes with it, as ovs-vswitchd deletes an
/// internal port's device with the port.
pub(crate) fn del_port(
    of: &Ofproto,
    dp: &Mutex<Datapath>,
    name: &str,
    for_good: bool,
) -> Result<(), String> {
    let p = of.del_port(name)?;
    if p.dp_port.is_some() {
        release_dp_port(&mut *locked(dp)?, &p.name, for_good)?;
    }
    Ok(())
}

/// Closes the datapath side of a port that has left its bridge (and, `for_good`, the kernel
/// device it keeps). A tunnel port has none of its own: the datapath port named after its type
/// (`vxlan_sys_4789`) stays for the others.
fn release_dp_port(dp: &mut Datapath, name: &str, for_good: bool) -> Result<(), String> {
    if dp.port_names().number(name).is_some() {
        let mut port = dp.del_port(name)?;
        if for_good && let Err(e) = port.release_device() {
            return Err(format!("{name}: {e}"));
        }
    }
    Ok(())
}

/// The datapath port number of a device-less port added at run time, chosen as OVS's dummy
/// datapath chooses it (`dpif-netdev.c`, `choose_port()`), so that OVS's test scenarios see
/// the same numbers: the first number in the name, plus 100 for a name starting `br` (`p10`
/// is 10, a bridge `br0`'s LOCAL port 100), when it is free; else the lowest free number.
pub(crate) fn dummy_dp_port(dp: &Datapath, name: &str) -> u32 {
    let start = if name.starts_with("br") { 100 } else { 0 };
    let digits: String = name
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    if let Some(n) = digits
        .parse::<u32>()
        .ok()
        .and_then(|d| d.checked_add(start))
        && n > 0
        && n <= u32::from(u16::MAX)
        && dp.free_port_number_from(n) == n
    {
        return n;
    }
    dp.free_port_number()
}
