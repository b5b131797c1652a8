//! Mirroring in translation (OVS's `mirror_packet()` and `mirror_ingress_packet()`): a packet
//! received on a mirror's source port is copied when translation starts, one sent by a
//! destination port right after it is output. Each copy is the packet as it is at that
//! moment, output as NORMAL would (tagged or not for the output port's VLAN mode), or
//! flooded in the mirror's output VLAN. A mirror copies a packet once, and so do the other
//! mirrors with the same output (`ctx.mirrors`, frozen across recirculations); a patch port's
//! peer bridge has mirrors of its own.

use super::*;
use crate::bridge::XVlan;
use crate::mirror::Mirror;

impl Ctx<'_> {
    /// Whether OpenFlow port `port` of the current bridge is a mirror's output.
    pub(super) fn is_mirror_output(&self, port: u32) -> bool {
        let br = self.br();
        !br.mirrors.is_empty()
            && br
                .ports
                .get(&port)
                .is_some_and(|p| br.mirrors.iter().any(|m| m.outputs_to(&p.name)))
    }

    /// Mirrors the packet as received on `in_port` to the mirrors that select it as source.
    pub(super) fn mirror_ingress(&mut self, in_port: u32) {
        self.mirror_packet(in_port, false);
    }

    /// Mirrors the packet just sent by `port` to the mirrors that select it as destination.
    pub(super) fn mirror_egress(&mut self, port: u32) {
        self.mirror_packet(port, true);
    }

    fn mirror_packet(&mut self, port: u32, egress: bool) {
        let pipe = self.pipe;
        let br = &pipe.bridges[self.bridge];
        if br.mirrors.is_empty() {
            return;
        }
        let Some(p) = br.ports.get(&port) else {
            return;
        };
        // The VLAN headers the packet has on that port, as it arrived (OVS reads the input
        // flow); the VLAN is the outer one.
        let x = super::normal::flow_xvlan(self.key);
        let Some(vlan) = p.vlan.input_vlan(x[0].vid) else {
            return;
        };
        let xvlan = p.vlan.input_translate(&x);
        for (i, m) in br.mirrors.iter().enumerate() {
            let bit = 1u32 << i;
            let selected = if egress {
                m.selects_dst(&p.name)
            } else {
                m.selects_src(&p.name)
            };
            if self.mirrors & bit != 0 || !selected {
                continue;
            }
            if !m.config.select_vlan.is_empty() {
                let w = self.wc.dp.vlan_tci();
                self.wc.dp.set_vlan_tci(w | 0x1fff);
                if !m.config.select_vlan.contains(&vlan) {
                    continue;
                }
            }
            // Mark every mirror with this output first: the copy's own output must not be
            // mirrored to them again.
            for (j, other) in br.mirrors.iter().enumerate() {
                if j == i || other.same_output(m) {
                    self.mirrors |= 1 << j;
                }
            }
            self.res.mirrors.push((self.bridge, i));
            self.mirror_snaplen = m.config.snaplen;
            self.mirror_output(m, &xvlan);
            self.mirror_snaplen = 0;
        }
    }

    /// Sends the copy for mirror `m` of a packet with VLAN headers `xvlan` (as the bridge sees
    /// them).
    fn mirror_output(&mut self, m: &Mirror, xvlan: &XVlan) {
        let vlan = xvlan[0].vid;
        let br = &self.pipe.bridges[self.bridge];
        if let Some(out) = &m.config.output_port {
            if let Some(p) = br.ports.values().find(|p| &p.name == out) {
                self.normal_output(p.ofport, xvlan);
            }
            return;
        }
        // RSPAN: flood in the output VLAN, to every port carrying it but mirror outputs, when
        // the packet is not already in that VLAN (and is not for a reserved address).
        let Some(out_vlan) = m.config.output_vlan else {
            return;
        };
        let dst = self.flow.dp.eth_dst().0;
        let reserved = dst[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00];
        if vlan == out_vlan || reserved {
            return;
        }
        // The copy goes in the output VLAN (OVS rewrites the outer VID only).
        let mut out = *xvlan;
        out[0].vid = out_vlan;
        // The bridge's local port first, then by number (OVS's bundle order, as flooding).
        let mut ports: Vec<u32> = br
            .ports
            .values()
            .filter(|p| p.vlan.includes(&out))
            .map(|p| p.ofport)
            .collect();
        ports.sort_by_key(|&p| (p != OFPP_LOCAL, p));
        for p in ports {
            if !self.is_mirror_output(p) {
                self.normal_output(p, &out);
            }
        }
    }
}

/// Credits the mirrors a megaflow copied through with its packets.
pub(crate) fn credit_mirrors(p: &Pipeline, used: &[(usize, usize)], packets: u64, bytes: u64) {
    for &(b, i) in used {
        if let Some(m) = p.bridges.get(b).and_then(|br| br.mirrors.get(i)) {
            m.credit(packets, bytes);
        }
    }
}
