//! `OFPT_PORT_MOD` (`ovs-ofctl mod-port`), as OVS's `handle_port_mod()`: the port must be one
//! of the bridge's (`OFPPMFC_BAD_PORT`) and the request must carry its Ethernet address
//! (`OFPPMFC_BAD_HW_ADDR`), a check that it is the port meant; then the configuration bits
//! the mask names change in the pipeline ([`ofproto::port_config`]), and the connections hear
//! of it by a port status. Before OpenFlow 1.5 the connection that asked is not told (OVS's
//! `connmgr_send_port_status()`): [`PortModSources`] remembers it until the status goes out.

use std::collections::HashMap;

use ofproto::ofproto::Ofproto;
use openflow::conn::ConnId;
use openflow::error::OfpErr;
use openflow::msgs::port::PortMod;

use super::bridge_view;

/// The connection whose port mod changed each port (bridge, port number), for the port status
/// that follows.
pub(crate) type PortModSources = HashMap<(String, u32), ConnId>;

/// Applies `pm` to `bridge`; whether the port's configuration changed.
pub(crate) fn port_mod(of: &Ofproto, bridge: &str, pm: &PortMod) -> Result<bool, OfpErr> {
    {
        let pipe = of.pipe.read().unwrap_or_else(|e| e.into_inner());
        let b = pipe.bridge(bridge).ok_or(OfpErr::OfpbrcEperm)?;
        let p = b.ports.get(&pm.port_no).ok_or(OfpErr::OfppmfcBadPort)?;
        if bridge_view::port_mac(b, p) != pm.hw_addr {
            return Err(OfpErr::OfppmfcBadHwAddr);
        }
    }
    // The port went between the two holds of the lock: as if it never was.
    of.port_mod(bridge, pm.port_no, pm.config, pm.mask)
        .ok_or(OfpErr::OfppmfcBadPort)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::EthAddr;
    use ofproto::bridge::OfPort;
    use ofproto::port_config::{PC_NO_FWD, PC_PORT_DOWN};

    fn switch() -> std::sync::Arc<Ofproto> {
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        let p = OfPort {
            name: "p1".into(),
            ofport: 1,
            dp_port: Some(1),
            peer: None,
            vlan: Default::default(),
        };
        of.add_port("br0", p).unwrap();
        of
    }

    fn pm(port_no: u32, hw_addr: EthAddr, config: u32, mask: u32) -> PortMod {
        PortMod {
            port_no,
            hw_addr,
            config,
            mask,
            advertise: 0,
        }
    }

    #[test]
    fn the_port_and_its_address_must_match_before_anything_changes() {
        let of = switch();
        let addr = EthAddr([0xaa, 0x55, 0xaa, 0x55, 0, 1]);
        let bad = EthAddr([0xaa, 0x55, 0xaa, 0x55, 0, 2]);
        assert_eq!(
            port_mod(&of, "br0", &pm(2, addr, PC_NO_FWD, PC_NO_FWD)),
            Err(OfpErr::OfppmfcBadPort)
        );
        assert_eq!(
            port_mod(&of, "br0", &pm(1, bad, PC_NO_FWD, PC_NO_FWD)),
            Err(OfpErr::OfppmfcBadHwAddr)
        );
        assert_eq!(
            port_mod(&of, "br0", &pm(1, addr, PC_PORT_DOWN, PC_PORT_DOWN)),
            Ok(true)
        );
        assert_eq!(
            port_mod(&of, "br0", &pm(1, addr, PC_PORT_DOWN, PC_PORT_DOWN)),
            Ok(false)
        );
        let pipe = of.pipe.read().unwrap();
        let b = pipe.bridge("br0").unwrap();
        assert_eq!(b.port_config(1).config, PC_PORT_DOWN);
        let desc = bridge_view::phy_port(b, &b.ports[&1]);
        assert_eq!((desc.config, desc.state), (PC_PORT_DOWN, 1));
    }
}
