//! Learning packets of bonds (OVS's `bond_compose_learning_packet()`): after a bond's active
//! member changes, one RARP from each address the bridge learned elsewhere, tagged with its
//! VLAN, goes out of the new active member, so the switch on the other side of the bond
//! relearns at once where those hosts are.

use std::sync::Mutex;

use datapath::dpif::Datapath;
use flow::EthAddr;
use ofproto::ofproto::Ofproto;

/// A RARP request from `mac` (`compose_rarp()`), with an 802.1Q tag when `vlan` is not 0.
pub(crate) fn rarp(mac: EthAddr, vlan: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(46);
    f.extend_from_slice(&EthAddr::BROADCAST.0);
    f.extend_from_slice(&mac.0);
    if vlan != 0 {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&(vlan & 0xfff).to_be_bytes());
    }
    f.extend_from_slice(&0x8035u16.to_be_bytes());
    // Ethernet, IPv4, 6- and 4-byte addresses, "request reverse".
    f.extend_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 3]);
    f.extend_from_slice(&mac.0);
    f.extend_from_slice(&[0; 4]);
    f.extend_from_slice(&mac.0);
    f.extend_from_slice(&[0; 4]);
    f
}

/// Sends every LACPDU and learning packet the bonds owe.
pub(crate) fn send(of: &Ofproto, dp: &Mutex<Datapath>) {
    for (bridge, port, frame) in of.take_lacp_pdus() {
        let _ = super::send_from_local_to(of, dp, &bridge, port, false, frame);
    }
    for lp in of.take_learning_packets() {
        for (mac, vlan) in lp.addrs {
            let _ = super::send_from_local_to(of, dp, &lp.bridge, lp.port, false, rarp(mac, vlan));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rarp_is_ovs_s_compose_rarp() {
        let mac = EthAddr([0x50, 0x54, 0, 0, 0, 1]);
        let f = rarp(mac, 0);
        assert_eq!(f.len(), 42);
        assert_eq!(&f[12..14], &[0x80, 0x35]);
        assert_eq!(&f[20..22], &[0, 3]);
        let t = rarp(mac, 10);
        assert_eq!(&t[12..16], &[0x81, 0, 0, 10]);
        assert_eq!(t.len(), 46);
    }
}
