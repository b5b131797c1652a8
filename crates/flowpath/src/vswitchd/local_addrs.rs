//! A bridge's own addresses under `--ovsdb`, as `ovs-vswitchd` has them: the Ethernet address
//! is `other_config:hwaddr`, else that of the bridge's LOCAL port (the kernel device named as
//! the bridge), and the IP addresses are those the operator gave that device (`ip addr add
//! 172.31.0.1/24 dev br-phys`). They make the bridge a tunnel endpoint: the local addresses a
//! tunnel packet is terminated for, the connected routes of the tunnel routing table
//! (`ovs/route/show`) and the source of the outer headers, so OVN's GENEVE ports
//! (`remote_ip` only) find their way out through the underlay bridge.
//!
//! The kernel's addresses change without the database knowing, so they are read again on every
//! poll of the reconciler (once a second, one `getifaddrs(3)`), and a bridge's are applied when
//! they change.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::os::fd::AsFd;

use flow::EthAddr;
use netdev::ifaddrs::IfAddrs;
use ofproto::ofproto::Ofproto;

use super::desired::BridgeDesired;
use super::log;

/// What a bridge has been given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct LocalAddrs {
    /// `other_config:hwaddr` as written (to warn once about a bad one).
    hwaddr_text: Option<String>,
    mac: Option<EthAddr>,
    ips: Vec<(IpAddr, u8)>,
}

/// What bridge `name` with `other_config:hwaddr` `hwaddr_text` should have now, given the
/// kernel's interface addresses.
fn wanted(
    name: &str,
    hwaddr_text: Option<&String>,
    kernel: &BTreeMap<String, IfAddrs>,
) -> LocalAddrs {
    let hwaddr_text = hwaddr_text.cloned();
    let configured = hwaddr_text
        .as_deref()
        .and_then(|m| ofproto::tunnel::parse_mac(m).ok());
    let device = kernel.get(name);
    LocalAddrs {
        mac: configured.or_else(|| device.and_then(|d| d.mac).map(EthAddr)),
        ips: device.map(|d| d.ips.clone()).unwrap_or_default(),
        hwaddr_text,
    }
}

/// Gives bridge `b` the addresses it should have, if they are not those of `applied`, and its
/// LOCAL device `other_config:hwaddr` when that is set, as `ovs-vswitchd` sets the local
/// port's Ethernet address to the bridge's: what the kernel's stack answers ARP with must be
/// what tunnel packets are terminated for.
pub(super) fn refresh(
    b: &BridgeDesired,
    applied: &mut Option<LocalAddrs>,
    of: &Ofproto,
    kernel: &BTreeMap<String, IfAddrs>,
) {
    let want = wanted(&b.name, b.other_config.get("hwaddr"), kernel);
    let configured = want
        .hwaddr_text
        .as_deref()
        .and_then(|m| ofproto::tunnel::parse_mac(m).ok());
    if let (Some(mac), Some(dev)) = (configured, kernel.get(&b.name))
        && dev.mac.is_some_and(|m| m != mac.0)
    {
        let set = netdev::netns::control_socket(None)
            .and_then(|s| netdev::netns::set_mac(s.as_fd(), &b.name, mac.0));
        // Once per hwaddr: the next polls try again without a word.
        let first = applied.as_ref().map(|a| &a.hwaddr_text) != Some(&want.hwaddr_text);
        if let Err(e) = set
            && first
        {
            log(
                vlog::Level::Warn,
                &format!(
                    "bridge {}: setting its device's address to {mac}: {e}",
                    b.name
                ),
            );
        }
    }
    if applied.as_ref() == Some(&want) {
        return;
    }
    let text_changed = applied.as_ref().map(|a| &a.hwaddr_text) != Some(&want.hwaddr_text);
    if text_changed
        && let Some(t) = &want.hwaddr_text
        && ofproto::tunnel::parse_mac(t).is_err()
    {
        log(
            vlog::Level::Warn,
            &format!("bridge {}: invalid hwaddr", b.name),
        );
    }
    match of.set_bridge_addrs(&b.name, want.mac, want.ips.clone()) {
        Ok(()) => *applied = Some(want),
        Err(e) => log(vlog::Level::Warn, &format!("bridge {}: {e}", b.name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn want(name: &str, hwaddr: Option<&str>) -> LocalAddrs {
        wanted(name, hwaddr.map(str::to_owned).as_ref(), &kernel())
    }

    fn kernel() -> BTreeMap<String, IfAddrs> {
        let mut k = BTreeMap::new();
        k.insert(
            "br-phys".to_owned(),
            IfAddrs {
                mac: Some([0x02, 0, 0, 0, 0, 0x31]),
                ips: vec![(IpAddr::V4(Ipv4Addr::new(172, 31, 0, 1)), 24)],
            },
        );
        k
    }

    #[test]
    fn the_local_device_gives_the_bridge_its_addresses() {
        let w = want("br-phys", None);
        assert_eq!(w.mac, Some(EthAddr([0x02, 0, 0, 0, 0, 0x31])));
        assert_eq!(w.ips, vec![(IpAddr::V4(Ipv4Addr::new(172, 31, 0, 1)), 24)]);
    }

    #[test]
    fn hwaddr_wins_over_the_device_s_own() {
        let w = want("br-phys", Some("02:00:00:00:00:01"));
        assert_eq!(w.mac, Some(EthAddr([0x02, 0, 0, 0, 0, 0x01])));
        assert_eq!(w.ips.len(), 1);
    }

    #[test]
    fn a_bridge_without_its_device_has_no_address() {
        let w = want("br-int", None);
        assert_eq!((w.mac, w.ips.len()), (None, 0));
        // A bad hwaddr is no address either (and is warned about once, by `refresh`).
        let w = want("br-phys", Some("nonsense"));
        assert_eq!(w.mac, Some(EthAddr([0x02, 0, 0, 0, 0, 0x31])));
    }
}
