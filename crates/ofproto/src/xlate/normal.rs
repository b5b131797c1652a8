//! The `NORMAL` action (OVS's `xlate_normal()`): VLAN input and output by port mode (access,
//! trunk, native, dot1q-tunnel), MAC learning and flooding.

use super::*;
use crate::bridge::{PortVlanMode, PriorityTags, VlanHdr, XVlan};

/// The VLAN headers of `k`, outermost first, up to the first that is not an 802.1Q or
/// 802.1ad tag (OVS's `xvlan_extract()`).
pub(super) fn flow_xvlan(k: &FlowKey) -> XVlan {
    let mut x = XVlan::default();
    let hdrs = [
        (k.vlan_tpid(), k.vlan_tci()),
        (k.vlan2_tpid(), k.vlan2_tci()),
    ];
    for (slot, (tpid, tci)) in x.iter_mut().zip(hdrs) {
        // A key built from a match has no TPID for an 802.1Q tag.
        let tpid = if tpid == 0 { 0x8100 } else { tpid };
        if !matches!(tpid, 0x8100 | 0x88a8) || tci & flow::key::VLAN_CFI == 0 {
            break;
        }
        *slot = VlanHdr {
            tpid,
            vid: tci & 0xfff,
            pcp: tci & 0xe000,
        };
    }
    x
}

/// Writes VLAN headers `x` into `k` (OVS's `xvlan_put()`): a header with neither VID nor
/// PCP is none, unless `always` keeps one that has a TPID.
fn put_xvlan(k: &mut FlowKey, x: &XVlan, always: bool) {
    let hdr = |h: &VlanHdr| match h.vid | h.pcp {
        0 if !(always && h.tpid != 0) => (0, 0),
        tci => (
            if h.tpid == 0 { 0x8100 } else { h.tpid },
            tci | flow::key::VLAN_CFI,
        ),
    };
    let ((t0, c0), (t1, c1)) = (hdr(&x[0]), hdr(&x[1]));
    k.set_vlan_tpid(t0)
        .set_vlan_tci(c0)
        .set_vlan2_tpid(t1)
        .set_vlan2_tci(c1);
}

/// Whether `port` is the ingress a controller gives its own packets (OVS's OFPP_NONE and
/// OFPP_CONTROLLER): NORMAL takes them on a trunk of every VLAN and learns nothing from them.
fn from_controller(port: u32) -> bool {
    matches!(port, OFPP_ANY | OFPP_CONTROLLER)
}

impl Ctx<'_> {
    /// The VLAN headers of the packet as NORMAL sees them on input port `port` (its VLAN is
    /// the outer one), or why it is dropped (OVS's wording).
    pub(super) fn input_xvlan(&mut self, port: u32) -> Result<XVlan, String> {
        // The VID and whether there is a tag; the PCP only matters when a tag is rewritten.
        let w = self.wc.dp.vlan_tci();
        self.wc.dp.set_vlan_tci(w | 0x1fff);
        let x = flow_xvlan(&self.flow.dp);
        // Whether a tagged frame has a second tag decides where it may go (an access port
        // takes no customer tag): OVS's datapath key says so by its structure, flowpath's by
        // this bit.
        if self.flow.dp.vlan_tci() & flow::key::VLAN_CFI != 0 {
            let w = self.wc.dp.vlan2_tci();
            self.wc.dp.set_vlan2_tci(w | flow::key::VLAN_CFI);
        }
        let Some(p) = self.br().ports.get(&port) else {
            // A controller's own traffic (OFPP_NONE, OFPP_CONTROLLER) is a trunk of every
            // VLAN, as OVS's `ofpp_none_bundle`.
            if from_controller(port) {
                return Ok(x);
            }
            return Err(format!("no port {port}"));
        };
        // A bond's member is named as its bond (OVS names the bundle).
        let name = self.bundle_label(port);
        let mode = &p.vlan;
        let vid = x[0].vid;
        if mode.input_vlan(vid).is_some() {
            return Ok(mode.input_translate(&x));
        }
        Err(match mode.kind() {
            PortVlanMode::Access => format!(
                "dropping VLAN {vid} tagged packet received on port {name} configured as VLAN \
                 {} access port",
                mode.native()
            ),
            PortVlanMode::Dot1qTunnel => format!(
                "dropping VLAN {vid} packet received on dot1q-tunnel port {name} that \
                 excludes this VLAN"
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
        let xvlan = match self.input_xvlan(in_port) {
            Ok(x) => x,
            Err(why) => {
                self.trace_add(NodeKind::Error, why);
                self.trace_add(
                    NodeKind::Warn,
                    "disallowed VLAN VID for this input port, dropping",
                );
                return;
            }
        };
        let vlan = xvlan[0].vid;
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
                self.normal_output(p, &xvlan);
            }
            None => {
                self.note("no learned MAC for destination, flooding");
                self.flood(Some(&xvlan), false);
            }
        }
    }

    /// Outputs to `port` for NORMAL a frame with VLAN headers `xvlan` (as the bridge sees
    /// them): tagging or untagging as the port's VLAN mode says (OVS's `output_normal()`).
    pub(super) fn normal_output(&mut self, port: u32, xvlan: &XVlan) {
        let Some(mode) = self.br().ports.get(&port).map(|p| p.vlan.clone()) else {
            return;
        };
        if !mode.includes(xvlan) {
            return;
        }
        // A tunnel that lists customer VLANs looked at the inner tag (OVS unwildcards it only
        // for the tunnels it outputs to).
        if mode.kind() == PortVlanMode::Dot1qTunnel && !mode.cvlans.is_empty() {
            self.wc.dp.set_vlan2_tci(0xffff);
        }
        let mut out = mode.output_translate(xvlan);
        // With priority tags the outer tag keeps the priority the frame came with.
        if mode.priority_tags != PriorityTags::Never {
            out[0].pcp = self.flow.dp.vlan_tci() & 0xe000;
        }
        // A bond outputs to the member it picks; none enabled, nothing is sent.
        let recirc = self.bond_recirc(port);
        let Some(port) = self.bond_output_port(port, out[0].vid, recirc.is_none()) else {
            return;
        };
        let d = &self.flow.dp;
        let saved = (d.vlan_tpid(), d.vlan_tci(), d.vlan2_tpid(), d.vlan2_tci());
        put_xvlan(
            &mut self.flow.dp,
            &out,
            mode.priority_tags == PriorityTags::Always,
        );
        match recirc {
            Some((id, basis, lb)) => self.bond_recirc_output(id, basis, lb),
            None => self.output_port(port, false),
        }
        self.flow
            .dp
            .set_vlan_tpid(saved.0)
            .set_vlan_tci(saved.1)
            .set_vlan2_tpid(saved.2)
            .set_vlan2_tci(saved.3);
    }

    /// FLOOD/ALL (`vlan` None) or NORMAL's flooding of a frame with VLAN headers `vlan`:
    /// every port but the input and, unless `all`, those with `no_flood` (OVS's
    /// `flood_packets()`).
    pub(super) fn flood(&mut self, vlan: Option<&XVlan>, all: bool) {
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
