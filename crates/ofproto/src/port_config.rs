//! A port's OpenFlow configuration and liveness, as OVS's `ofputil_port_config` and
//! `ofputil_port_state` hold them (`lib/ofp-port.c`, `ofproto/ofproto.c`): the `OFPPC_*` bits a
//! controller sets with `OFPT_PORT_MOD` (`ovs-ofctl mod-port`) and the link state the port's
//! device reports (a dummy port's admin state, a kernel port's carrier).
//!
//! What translation does with them ([`crate::xlate`]): `no_recv` (`no_recv_stp` for STP
//! frames) drops what the port receives; `no_fwd` drops output to it; `no_flood` leaves it
//! out of `FLOOD` and of NORMAL's flooding (not of `ALL`); a port that is down (`port_down`
//! or its link) is not live, so `fast_failover` buckets watching it and `bundle` members are
//! passed over; `no_packet_in` keeps its table misses from the controller when a table's
//! miss configuration sends them there. The bits keep OpenFlow 1.0's values, which every
//! version's `OFPT_PORT_MOD` shares.

use crate::bridge::Bridge;
use crate::ofproto::Ofproto;

/// `OFPPC_PORT_DOWN`: the port is administratively down.
pub const PC_PORT_DOWN: u32 = 1 << 0;
/// `OFPPC_NO_STP`: no 802.1D spanning tree on the port.
pub const PC_NO_STP: u32 = 1 << 1;
/// `OFPPC_NO_RECV`: drop what the port receives (but STP frames).
pub const PC_NO_RECV: u32 = 1 << 2;
/// `OFPPC_NO_RECV_STP`: drop the STP frames the port receives.
pub const PC_NO_RECV_STP: u32 = 1 << 3;
/// `OFPPC_NO_FLOOD`: leave the port out of flooding.
pub const PC_NO_FLOOD: u32 = 1 << 4;
/// `OFPPC_NO_FWD`: drop what is output to the port.
pub const PC_NO_FWD: u32 = 1 << 5;
/// `OFPPC_NO_PACKET_IN`: no packet-ins for the port's table misses.
pub const PC_NO_PACKET_IN: u32 = 1 << 6;
/// Every bit OVS keeps.
pub const PC_ALL: u32 = 0x7f;

/// `OFPPS_LINK_DOWN`: no physical link.
pub const PS_LINK_DOWN: u32 = 1 << 0;
/// `OFPPS_LIVE`: the port may be used (fast-failover groups).
pub const PS_LIVE: u32 = 1 << 2;

/// The destination address of 802.1D (STP) frames, which `no_recv_stp` rather than
/// `no_recv` governs.
pub const STP_DST: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x00];

/// One port's OpenFlow configuration, link state and BFD. The default is a port as it comes:
/// nothing set, link up, no BFD.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortConfig {
    /// The `PC_*` bits.
    pub config: u32,
    /// The port's device says its link is down.
    pub link_down: bool,
    /// The port's BFD session, when it has one: which packets are its own.
    pub bfd_rx: Option<crate::bfd::RxFilter>,
    /// The port's BFD session does not forward (OVS's `may_enable_port()`): not live.
    pub bfd_down: bool,
    /// The port's LACP (a Port of one Interface with LACP) does not let it carry traffic
    /// (OVS's `may_enable_port()`): not live.
    pub lacp_down: bool,
}

impl PortConfig {
    /// Whether the port may be used: neither administratively down nor without link (OVS's
    /// `OFPUTIL_PS_LIVE`).
    pub fn is_live(&self) -> bool {
        self.config & PC_PORT_DOWN == 0 && !self.link_down && !self.bfd_down && !self.lacp_down
    }

    /// The `OFPPS_*` state bits as OVS reports them: an administratively down port has no
    /// link either (its device is down).
    pub fn state(&self) -> u32 {
        if self.is_live() {
            PS_LIVE
        } else if self.link_down || self.config & PC_PORT_DOWN != 0 {
            PS_LINK_DOWN
        } else {
            0
        }
    }

    /// The configuration with the bits of `mask` set to those of `config` (OVS's
    /// `update_port_config()`); whether anything changed.
    pub fn apply(&mut self, config: u32, mask: u32) -> bool {
        let new = (self.config & !mask) | (config & mask & PC_ALL);
        let changed = new != self.config;
        self.config = new;
        changed
    }

    /// Whether a frame to `dl_dst` that the port receives is dropped (OVS's `may_receive()`):
    /// `no_recv_stp` governs STP frames, `no_recv` the others.
    pub fn drops_input(&self, dl_dst: [u8; 6]) -> bool {
        let bit = if dl_dst == STP_DST {
            PC_NO_RECV_STP
        } else {
            PC_NO_RECV
        };
        self.config & bit != 0
    }
}

impl Bridge {
    /// Port `ofport`'s configuration and link state (the default for a port never changed).
    pub fn port_config(&self, ofport: u32) -> PortConfig {
        self.port_config.get(&ofport).copied().unwrap_or_default()
    }

    /// Whether port `ofport` is a port of the bridge and live.
    pub fn port_live(&self, ofport: u32) -> bool {
        self.ports.contains_key(&ofport) && self.port_config(ofport).is_live()
    }
}

impl Ofproto {
    /// `OFPT_PORT_MOD`'s change: the bits of `mask` in port `ofport` of `bridge` take those of
    /// `config`. `None` when there is no such port; otherwise whether anything changed.
    pub fn port_mod(&self, bridge: &str, ofport: u32, config: u32, mask: u32) -> Option<bool> {
        let changed = {
            let mut p = self.pipe.write().unwrap_or_else(|e| e.into_inner());
            let b = p.bridge_mut(bridge)?;
            if !b.ports.contains_key(&ofport) {
                return None;
            }
            b.port_config.entry(ofport).or_default().apply(config, mask)
        };
        // Every bit but `no_stp` changes what packets do, in the megaflows.
        if changed {
            self.changed();
        }
        Some(changed)
    }

    /// Brings the port called `name` administratively up or down, as its device's admin
    /// state does (OVS's `netdev-dummy/set-admin-state`: the port's `port_down` bit follows
    /// its device's flags). `None` when no bridge has such a port; otherwise whether that
    /// changed anything.
    pub fn set_admin_state(&self, name: &str, up: bool) -> Option<bool> {
        let (bridge, ofport) = {
            let p = self.pipe.read().unwrap_or_else(|e| e.into_inner());
            p.bridges
                .iter()
                .find_map(|b| b.port_number(name).map(|n| (b.name.clone(), n)))?
        };
        let config = if up { 0 } else { PC_PORT_DOWN };
        self.port_mod(&bridge, ofport, config, PC_PORT_DOWN)
    }

    /// Records that the device of the port called `name` has its link up or down; whether
    /// that changed anything.
    pub fn set_link_state(&self, name: &str, up: bool) -> bool {
        let changed = {
            let mut p = self.pipe.write().unwrap_or_else(|e| e.into_inner());
            let Some(b) = p
                .bridges
                .iter_mut()
                .find(|b| b.port_by_name(name).is_some())
            else {
                return false;
            };
            let Some(n) = b.port_number(name) else {
                return false;
            };
            let c = b.port_config.entry(n).or_default();
            let changed = c.link_down == up;
            c.link_down = !up;
            changed
        };
        if changed {
            self.changed();
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_live_unless_down_by_config_or_link() {
        let mut c = PortConfig::default();
        assert!(c.is_live());
        assert_eq!(c.state(), PS_LIVE);
        assert!(c.apply(PC_PORT_DOWN, PC_PORT_DOWN));
        assert!(!c.is_live());
        assert_eq!(c.state(), PS_LINK_DOWN);
        assert!(
            !c.apply(PC_PORT_DOWN, PC_PORT_DOWN),
            "no change the second time"
        );
        assert!(c.apply(0, PC_PORT_DOWN));
        c.link_down = true;
        assert_eq!((c.is_live(), c.state()), (false, PS_LINK_DOWN));
    }

    #[test]
    fn only_the_masked_bits_change_and_stp_frames_have_their_own_bit() {
        let mut c = PortConfig::default();
        c.apply(PC_NO_RECV | PC_NO_FLOOD, PC_NO_RECV);
        assert_eq!(c.config, PC_NO_RECV);
        assert!(c.drops_input([0, 1, 2, 3, 4, 5]));
        assert!(!c.drops_input(STP_DST));
        c.apply(PC_NO_RECV_STP, PC_NO_RECV | PC_NO_RECV_STP);
        assert!(!c.drops_input([0, 1, 2, 3, 4, 5]));
        assert!(c.drops_input(STP_DST));
        c.apply(u32::MAX, u32::MAX);
        assert_eq!(c.config, PC_ALL);
    }

    #[test]
    fn port_mods_and_link_changes_reach_the_bridge_and_its_megaflows() {
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        let port = crate::bridge::OfPort {
            name: "p1".into(),
            ofport: 1,
            dp_port: Some(1),
            peer: None,
            vlan: Default::default(),
        };
        of.add_port("br0", port).unwrap();
        let g = of.generation();
        assert_eq!(of.port_mod("br0", 1, PC_NO_FLOOD, PC_NO_FLOOD), Some(true));
        assert_eq!(of.port_mod("br0", 1, PC_NO_FLOOD, PC_NO_FLOOD), Some(false));
        assert_eq!(of.port_mod("br0", 2, 0, PC_NO_FLOOD), None);
        assert!(of.generation() > g);
        assert_eq!(of.set_admin_state("p1", false), Some(true));
        assert_eq!(of.set_admin_state("nope", false), None);
        assert_eq!(of.set_admin_state("p1", true), Some(true));
        assert!(of.set_link_state("p1", false));
        assert!(!of.set_link_state("p1", false));
        assert!(!of.set_link_state("nope", false));
        {
            let p = of.pipe.read().unwrap();
            let b = p.bridge("br0").unwrap();
            assert!(!b.port_live(1));
            assert_eq!(b.port_config(1).config, PC_NO_FLOOD);
        }
        of.del_port("p1").unwrap();
        let p = of.pipe.read().unwrap();
        assert!(p.bridge("br0").unwrap().port_config.is_empty());
    }
}
