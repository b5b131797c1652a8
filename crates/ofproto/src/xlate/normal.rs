//! The `NORMAL` action (OVS's `xlate_normal()`): VLAN input and output by port mode (access,
//! trunk, native), MAC learning and flooding.

use super::*;
use crate::bridge::PortVlanMode;

/// Whether `port` is the ingress a controller gives its own packets (OVS's OFPP_NONE and
/// OFPP_CONTROLLER): NORMAL takes them on a trunk of every VLAN and learns nothing from them.
fn from_controller(port: u32) -> bool {
    matches!(port, OFPP_ANY | OFPP_CONTROLLER)
}

impl Ctx<'_> {
    /// The VLAN of the packet as NORMAL sees it on input port `port`, or why it is dropped
    /// (OVS's wording).
    pub(super) fn input_vlan(&mut self, port: u32) -> Result<u16, String> {
        // The VID and whether there is a tag; the PCP only matters when a tag is rewritten.
        let w = self.wc.dp.vlan_tci();
        self.wc.dp.set_vlan_tci(w | 0x1fff);
        let Some(p) = self.br().ports.get(&port) else {
            // A controller's own traffic (OFPP_NONE, OFPP_CONTROLLER) is a trunk of every
            // VLAN, as OVS's `ofpp_none_bundle`.
            if from_controller(port) {
                let tci = self.flow.dp.vlan_tci();
                return Ok(if tci & flow::key::VLAN_CFI != 0 {
                    tci & 0xfff
                } else {
                    0
                });
            }
            return Err(format!("no port {port}"));
        };
        // A bond's member is named as its bond (OVS names the bundle).
        let name = self.bundle_label(port);
        let mode = &p.vlan;
        let tci = self.flow.dp.vlan_tci();
        let vid = if tci & flow::key::VLAN_CFI != 0 {
            tci & 0xfff
        } else {
            0
        };
        mode.input_vlan(vid).ok_or_else(|| match mode.kind() {
            PortVlanMode::Access => format!(
                "dropping VLAN {vid} tagged packet received on port {name} configured as VLAN \
                 {} access port",
                mode.native()
            ),
            _ => format!(
                "dropping VLAN {vid} packet received on port {name} not configured for \
                 trunking VLAN {vid}"
            ),
        })
    }

    pub(super) fn normal(&mut self) {
        let in_port = self.flow.dp.in_port();
        self.wc
            .dp
            .set_eth_src(EthAddr::BROADCAST)
            .set_eth_dst(EthAddr::BROADCAST);
        // What arrives on a mirror's output port is not forwarded.
        if self.is_mirror_output(in_port) {
            self.trace_add(NodeKind::Warn, "input port is mirror output port, dropping");
            return;
        }
        let vlan = match self.input_vlan(in_port) {
            Ok(v) => v,
            Err(why) => {
                self.trace_add(NodeKind::Error, why);
                self.trace_add(
                    NodeKind::Warn,
                    "disallowed VLAN VID for this input port, dropping",
                );
                return;
            }
        };
        if !self.bond_admits(in_port, vlan) {
            return;
        }
        // A broadcast ARP may be gratuitous, which OVS checks before learning: its addresses
        // and opcode are consulted.
        if self.flow.dp.eth_type() == 0x0806 && self.flow.dp.eth_dst() == EthAddr::BROADCAST {
            self.wc
                .dp
                .set_nw_src(std::net::Ipv4Addr::BROADCAST)
                .set_nw_dst(std::net::Ipv4Addr::BROADCAST)
                .set_nw_proto(0xff);
        }
        self.wc
            .dp
            .set_eth_src(EthAddr::BROADCAST)
            .set_eth_dst(EthAddr::BROADCAST);
        let (src, dst) = (self.flow.dp.eth_src(), self.flow.dp.eth_dst());
        // A bond is learned as one port (its bundle).
        let in_bundle = self.bundle_port(in_port);
        if self.learn && !from_controller(in_port) {
            let br = &self.pipe.bridges[self.bridge];
            if let Ok(mut mac) = br.mac.lock()
                && mac.learn(src, vlan, in_bundle, self.now)
            {
                self.res.learned.push(self.bridge);
                let name = self.bundle_label(in_port);
                self.note(format_args!(
                    "learned that {src} is on port {name} in VLAN {vlan}"
                ));
            }
        }
        // The bridge's own address is on its local port (OVS learns it from the port's own
        // traffic; the bridge knows it from the start).
        let own = self.br().hwaddr == Some(dst) && self.br().ports.contains_key(&OFPP_LOCAL);
        let learned = if own {
            Some(OFPP_LOCAL)
        } else if dst.0[0] & 1 == 0 {
            self.br()
                .mac
                .lock()
                .ok()
                .and_then(|m| m.lookup(dst, vlan, self.now))
        } else {
            None
        };
        match learned {
            Some(p) if self.bundle_port(p) == in_bundle => {
                self.note("learned port is input port, dropping");
            }
            Some(p) if self.is_mirror_output(p) => {
                self.trace_add(NodeKind::Warn, "learned port is a mirror port, dropping");
            }
            Some(p) => {
                self.note("forwarding to learned port");
                self.normal_output(p, vlan);
            }
            None => {
                self.note("no learned MAC for destination, flooding");
                self.flood(Some(vlan), false);
            }
        }
    }

    /// Outputs to `port` for NORMAL: tagging or untagging as the port's VLAN mode says.
    pub(super) fn normal_output(&mut self, port: u32, vlan: u16) {
        let Some(mode) = self.br().ports.get(&port).map(|p| p.vlan.clone()) else {
            return;
        };
        if !mode.carries(vlan) {
            return;
        }
        let saved = (self.flow.dp.vlan_tci(), self.flow.dp.vlan_tpid());
        let vid = mode.output_vid(vlan);
        // A bond outputs to the member it picks; none enabled, nothing is sent.
        let recirc = self.bond_recirc(port);
        let Some(port) = self.bond_output_port(port, vid, recirc.is_none()) else {
            return;
        };
        if vid == 0 {
            self.flow.dp.set_vlan_tci(0).set_vlan_tpid(0);
        } else {
            let w = self.wc.dp.vlan_tci();
            self.wc.dp.set_vlan_tci(w | 0xe000);
            let pcp = saved.0 & 0xe000;
            self.flow
                .dp
                .set_vlan_tci(pcp | flow::key::VLAN_CFI | vid)
                .set_vlan_tpid(0x8100);
        }
        match recirc {
            Some((id, basis, lb)) => self.bond_recirc_output(id, basis, lb),
            None => self.output_port(port, false),
        }
        self.flow.dp.set_vlan_tci(saved.0).set_vlan_tpid(saved.1);
    }

    /// FLOOD/ALL (`vlan` None) or NORMAL's flooding within `vlan`: every port but the input
    /// and, unless `all`, those with `no_flood` (OVS's `flood_packets()`).
    pub(super) fn flood(&mut self, vlan: Option<u16>, all: bool) {
        let in_port = self.flow.dp.in_port();
        let in_bundle = self.bundle_port(in_port);
        self.wc.dp.set_in_port(u32::MAX);
        // The bridge's local port first, then by number (OVS's order).
        let mut ports: Vec<u32> = self.br().ports.keys().copied().collect();
        ports.sort_by_key(|&p| (p != OFPP_LOCAL, p));
        for p in ports {
            if p == in_port || (!all && self.br().port_config(p).config & PC_NO_FLOOD != 0) {
                continue;
            }
            // NORMAL's flooding leaves out mirror output ports (OVS's xlate_normal_flood()).
            if vlan.is_some() && self.is_mirror_output(p) {
                continue;
            }
            // NORMAL floods a bond once (at its bundle port), and never back into the bond
            // the frame came from.
            if vlan.is_some() && (self.bundle_port(p) != p || p == in_bundle) {
                continue;
            }
            match vlan {
                Some(v) => self.normal_output(p, v),
                None => self.output_port(p, false),
            }
        }
    }
}
