//! Assigned numbers: EtherTypes (IEEE 802 / IANA), IP protocol numbers (IANA "Protocol
//! Numbers"), and the UDP ports of the tunnels flowpath terminates.
//!
//! `EtherType` and `IpProtocol` are newtypes so that a protocol number can never be confused with
//! a length or a port; their associated constants can be used in `match` patterns.

use core::fmt;

/// An EtherType (or 802.1Q TPID), in host order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4 (RFC 894).
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP (RFC 826).
    pub const ARP: EtherType = EtherType(0x0806);
    /// Transparent Ethernet Bridging: an Ethernet frame follows (GRE, GENEVE).
    pub const TEB: EtherType = EtherType(0x6558);
    /// IEEE 802.1Q customer VLAN tag (C-tag).
    pub const VLAN: EtherType = EtherType(0x8100);
    /// IPv6 (RFC 2464).
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// MPLS unicast (RFC 3032).
    pub const MPLS_UNICAST: EtherType = EtherType(0x8847);
    /// MPLS multicast (RFC 5332).
    pub const MPLS_MULTICAST: EtherType = EtherType(0x8848);
    /// IEEE 802.1ad service VLAN tag (S-tag, "QinQ").
    pub const QINQ: EtherType = EtherType(0x88a8);

    /// True for the TPIDs of a VLAN tag (802.1Q or 802.1ad).
    #[inline]
    pub const fn is_vlan(self) -> bool {
        self.0 == Self::VLAN.0 || self.0 == Self::QINQ.0
    }

    /// True for the MPLS EtherTypes.
    #[inline]
    pub const fn is_mpls(self) -> bool {
        self.0 == Self::MPLS_UNICAST.0 || self.0 == Self::MPLS_MULTICAST.0
    }

    /// Values up to 1500 are IEEE 802.3 lengths, not types (values 1501..=1535 are undefined).
    #[inline]
    pub const fn is_802_3_length(self) -> bool {
        self.0 <= 1500
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04x}", self.0)
    }
}

/// An IP protocol number (IPv4 "protocol", IPv6 "next header").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// IPv6 hop-by-hop options (RFC 8200 §4.3).
    pub const HOPOPT: IpProtocol = IpProtocol(0);
    /// ICMP (RFC 792).
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// IGMP (RFC 1112).
    pub const IGMP: IpProtocol = IpProtocol(2);
    /// IPv4 encapsulated in IP (RFC 2003).
    pub const IPV4: IpProtocol = IpProtocol(4);
    /// TCP (RFC 9293).
    pub const TCP: IpProtocol = IpProtocol(6);
    /// UDP (RFC 768).
    pub const UDP: IpProtocol = IpProtocol(17);
    /// IPv6 encapsulated in IP (RFC 2473).
    pub const IPV6: IpProtocol = IpProtocol(41);
    /// IPv6 routing header (RFC 8200 §4.4).
    pub const IPV6_ROUTE: IpProtocol = IpProtocol(43);
    /// IPv6 fragment header (RFC 8200 §4.5).
    pub const IPV6_FRAG: IpProtocol = IpProtocol(44);
    /// GRE (RFC 2784).
    pub const GRE: IpProtocol = IpProtocol(47);
    /// ESP (RFC 4303).
    pub const ESP: IpProtocol = IpProtocol(50);
    /// AH (RFC 4302).
    pub const AH: IpProtocol = IpProtocol(51);
    /// ICMPv6 (RFC 4443).
    pub const ICMPV6: IpProtocol = IpProtocol(58);
    /// IPv6 "no next header" (RFC 8200 §4.7).
    pub const IPV6_NONXT: IpProtocol = IpProtocol(59);
    /// IPv6 destination options (RFC 8200 §4.6).
    pub const IPV6_OPTS: IpProtocol = IpProtocol(60);
    /// SCTP (RFC 9260).
    pub const SCTP: IpProtocol = IpProtocol(132);
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// VXLAN's IANA-assigned UDP destination port (RFC 7348 §5).
pub const VXLAN_PORT: u16 = 4789;
/// GENEVE's IANA-assigned UDP destination port (RFC 8926 §3.3).
pub const GENEVE_PORT: u16 = 6081;
/// MPLS-in-UDP destination port (RFC 7510).
pub const MPLS_UDP_PORT: u16 = 6635;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_registries() {
        assert_eq!(EtherType::IPV4.0, 0x0800);
        assert_eq!(EtherType::IPV6.0, 0x86dd);
        assert_eq!(EtherType::ARP.0, 0x0806);
        assert_eq!(EtherType::VLAN.0, 0x8100);
        assert_eq!(EtherType::QINQ.0, 0x88a8);
        assert_eq!(EtherType::MPLS_UNICAST.0, 0x8847);
        assert_eq!(EtherType::MPLS_MULTICAST.0, 0x8848);
        assert_eq!(EtherType::TEB.0, 0x6558);
        assert!(EtherType::QINQ.is_vlan() && !EtherType::IPV4.is_vlan());
        assert!(EtherType::MPLS_MULTICAST.is_mpls());
        assert!(EtherType(1500).is_802_3_length() && !EtherType(0x0600).is_802_3_length());
        assert_eq!(EtherType::IPV6.to_string(), "0x86dd");
        assert_eq!((VXLAN_PORT, GENEVE_PORT), (4789, 6081));
        assert_eq!(IpProtocol::SCTP.0, 132);
    }
}
