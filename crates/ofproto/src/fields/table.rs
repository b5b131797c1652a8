//! The field table itself: one [`Field`] entry per OpenFlow field, indexed by [`FieldId`],
//! and the lookups by name.

use super::*;

use Prereq as P;
use ValueFormat as F;

const fn reg(id: FieldId, n: usize, name: &'static str, nxm: &'static [&'static str]) -> Field {
    Field::key(id, name, 0, 0)
        .at(Loc::Reg(n), 32)
        .fmt(F::Hex)
        .mask()
        .rw()
        .nxm(nxm)
}
const fn xreg(id: FieldId, n: usize, name: &'static str, nxm: &'static [&'static str]) -> Field {
    Field::key(id, name, 0, 0)
        .at(Loc::XReg(n), 64)
        .fmt(F::Hex)
        .mask()
        .rw()
        .nxm(nxm)
}
const fn xxreg(id: FieldId, n: usize, name: &'static str, nxm: &'static [&'static str]) -> Field {
    Field::key(id, name, 0, 0)
        .at(Loc::XXReg(n), 128)
        .fmt(F::Hex)
        .mask()
        .rw()
        .nxm(nxm)
}
const fn tun_md(n: usize, name: &'static str, nxm: &'static [&'static str]) -> Field {
    Field::key(FieldId(FieldId::TUN_METADATA0.0 + n as u8), name, 0, 0)
        .at(Loc::TunMetadata(n), 128)
        .fmt(F::Hex)
        .mask()
        .rw()
        .nxm(nxm)
}
/// `tun_metadata<n>`'s table entry.
macro_rules! tun_md {
    ($n:literal) => {
        tun_md(
            $n,
            concat!("tun_metadata", $n),
            &[concat!("NXM_NX_TUN_METADATA", $n)],
        )
    };
}

type Id = FieldId;

/// The table, indexed by [`FieldId`].
pub(super) static FIELDS: [Field; N_FIELDS] = [
    // Tunnel metadata of a decapsulated packet.
    Field::key(Id::TUN_ID, "tun_id", 48, 8)
        .fmt(F::Hex)
        .mask()
        .rw()
        .aka(&["tunnel_id"])
        .nxm(&["NXM_NX_TUN_ID", "OXM_OF_TUNNEL_ID"]),
    Field::key(Id::TUN_SRC, "tun_src", 56, 4)
        .fmt(F::Ipv4)
        .mask()
        .rw()
        .nxm(&["NXM_NX_TUN_IPV4_SRC"]),
    Field::key(Id::TUN_DST, "tun_dst", 60, 4)
        .fmt(F::Ipv4)
        .mask()
        .rw()
        .nxm(&["NXM_NX_TUN_IPV4_DST"]),
    Field::key(Id::TUN_IPV6_SRC, "tun_ipv6_src", 192, 16)
        .fmt(F::Ipv6)
        .mask()
        .rw()
        .nxm(&["NXM_NX_TUN_IPV6_SRC"]),
    Field::key(Id::TUN_IPV6_DST, "tun_ipv6_dst", 208, 16)
        .fmt(F::Ipv6)
        .mask()
        .rw()
        .nxm(&["NXM_NX_TUN_IPV6_DST"]),
    Field::key(Id::TUN_GBP_ID, "tun_gbp_id", 90, 2)
        .mask()
        .rw()
        .nxm(&["NXM_NX_TUN_GBP_ID"]),
    Field::key(Id::TUN_GBP_FLAGS, "tun_gbp_flags", 89, 1)
        .fmt(F::Hex)
        .mask()
        .rw()
        .nxm(&["NXM_NX_TUN_GBP_FLAGS"]),
    // OpenFlow's only public tunnel flag, `oam` (bit 0), is the datapath's OAM bit (0x08).
    Field::key(Id::TUN_FLAGS, "tun_flags", 66, 1)
        .bits(2, 1, 3)
        .fmt(F::TunFlags)
        .mask()
        .rw()
        .nxm(&["NXM_NX_TUN_FLAGS"]),
    tun_md!(0),
    tun_md!(1),
    tun_md!(2),
    tun_md!(3),
    tun_md!(4),
    tun_md!(5),
    tun_md!(6),
    tun_md!(7),
    tun_md!(8),
    tun_md!(9),
    tun_md!(10),
    tun_md!(11),
    tun_md!(12),
    tun_md!(13),
    tun_md!(14),
    tun_md!(15),
    tun_md!(16),
    tun_md!(17),
    tun_md!(18),
    tun_md!(19),
    tun_md!(20),
    tun_md!(21),
    tun_md!(22),
    tun_md!(23),
    tun_md!(24),
    tun_md!(25),
    tun_md!(26),
    tun_md!(27),
    tun_md!(28),
    tun_md!(29),
    tun_md!(30),
    tun_md!(31),
    tun_md!(32),
    tun_md!(33),
    tun_md!(34),
    tun_md!(35),
    tun_md!(36),
    tun_md!(37),
    tun_md!(38),
    tun_md!(39),
    tun_md!(40),
    tun_md!(41),
    tun_md!(42),
    tun_md!(43),
    tun_md!(44),
    tun_md!(45),
    tun_md!(46),
    tun_md!(47),
    tun_md!(48),
    tun_md!(49),
    tun_md!(50),
    tun_md!(51),
    tun_md!(52),
    tun_md!(53),
    tun_md!(54),
    tun_md!(55),
    tun_md!(56),
    tun_md!(57),
    tun_md!(58),
    tun_md!(59),
    tun_md!(60),
    tun_md!(61),
    tun_md!(62),
    tun_md!(63),
    // Pipeline and connection metadata.
    Field::key(Id::METADATA, "metadata", 0, 0)
        .at(Loc::Metadata, 64)
        .fmt(F::Hex)
        .mask()
        .rw()
        .nxm(&["OXM_OF_METADATA"]),
    // OpenFlow 1.0 16-bit port numbers in the low half of the key's 32-bit in_port.
    Field::key(Id::IN_PORT, "in_port", 0, 4)
        .bits(2, 16, 0)
        .smask(0xffff, 0xffff_ffff)
        .fmt(F::OfPort)
        .rw()
        .nxm(&["NXM_OF_IN_PORT"]),
    Field::key(Id::PKT_MARK, "pkt_mark", 76, 4)
        .fmt(F::Hex)
        .mask()
        .rw()
        .nxm(&["NXM_NX_PKT_MARK"]),
    // A 32-bit field in OpenFlow; the key keeps the 8 defined bits.
    Field::key(Id::CT_STATE, "ct_state", 88, 1)
        .bits(4, 32, 0)
        .smask(0xff, 0xff)
        .fmt(F::CtState)
        .mask()
        .nxm(&["NXM_NX_CT_STATE"]),
    Field::key(Id::CT_ZONE, "ct_zone", 84, 2)
        .fmt(F::Hex)
        .nxm(&["NXM_NX_CT_ZONE"]),
    Field::key(Id::CT_MARK, "ct_mark", 80, 4)
        .fmt(F::Hex)
        .mask()
        .rw()
        .nxm(&["NXM_NX_CT_MARK"]),
    Field::key(Id::CT_LABEL, "ct_label", 176, 16)
        .fmt(F::Hex)
        .mask()
        .rw()
        .nxm(&["NXM_NX_CT_LABEL"]),
    // The connection's original-direction tuple, set by conntrack (read-only). The IPv4
    // addresses are the first four bytes of the IPv6 ones, as the key lays them out.
    Field::key(Id::CT_NW_PROTO, "ct_nw_proto", 86, 1)
        .pre(P::Ct)
        .nxm(&["NXM_NX_CT_NW_PROTO"]),
    Field::key(Id::CT_NW_SRC, "ct_nw_src", 224, 4)
        .fmt(F::Ipv4)
        .mask()
        .pre(P::CtIpv4)
        .nxm(&["NXM_NX_CT_NW_SRC"]),
    Field::key(Id::CT_NW_DST, "ct_nw_dst", 240, 4)
        .fmt(F::Ipv4)
        .mask()
        .pre(P::CtIpv4)
        .nxm(&["NXM_NX_CT_NW_DST"]),
    Field::key(Id::CT_IPV6_SRC, "ct_ipv6_src", 224, 16)
        .fmt(F::Ipv6)
        .mask()
        .pre(P::CtIpv6)
        .nxm(&["NXM_NX_CT_IPV6_SRC"]),
    Field::key(Id::CT_IPV6_DST, "ct_ipv6_dst", 240, 16)
        .fmt(F::Ipv6)
        .mask()
        .pre(P::CtIpv6)
        .nxm(&["NXM_NX_CT_IPV6_DST"]),
    Field::key(Id::CT_TP_SRC, "ct_tp_src", 256, 2)
        .mask()
        .pre(P::Ct)
        .nxm(&["NXM_NX_CT_TP_SRC"]),
    Field::key(Id::CT_TP_DST, "ct_tp_dst", 258, 2)
        .mask()
        .pre(P::Ct)
        .nxm(&["NXM_NX_CT_TP_DST"]),
    // The hash a datapath `hash` action computed (a dp_hash select group's); matchable, never
    // written.
    Field::key(Id::DP_HASH, "dp_hash", 72, 4)
        .fmt(F::Hex)
        .mask()
        .nxm(&["NXM_NX_DP_HASH"]),
    // Which pass of the datapath this is (0 the first); matchable, never written.
    Field::key(Id::RECIRC_ID, "recirc_id", 4, 4)
        .fmt(F::Hex)
        .nxm(&["NXM_NX_RECIRC_ID"]),
    reg(Id::REG0, 0, "reg0", &["NXM_NX_REG0"]),
    reg(Id::REG1, 1, "reg1", &["NXM_NX_REG1"]),
    reg(Id::REG2, 2, "reg2", &["NXM_NX_REG2"]),
    reg(Id::REG3, 3, "reg3", &["NXM_NX_REG3"]),
    reg(Id::REG4, 4, "reg4", &["NXM_NX_REG4"]),
    reg(Id::REG5, 5, "reg5", &["NXM_NX_REG5"]),
    reg(Id::REG6, 6, "reg6", &["NXM_NX_REG6"]),
    reg(Id::REG7, 7, "reg7", &["NXM_NX_REG7"]),
    reg(Id::REG8, 8, "reg8", &["NXM_NX_REG8"]),
    reg(Id::REG9, 9, "reg9", &["NXM_NX_REG9"]),
    reg(Id::REG10, 10, "reg10", &["NXM_NX_REG10"]),
    reg(Id::REG11, 11, "reg11", &["NXM_NX_REG11"]),
    reg(Id::REG12, 12, "reg12", &["NXM_NX_REG12"]),
    reg(Id::REG13, 13, "reg13", &["NXM_NX_REG13"]),
    reg(Id::REG14, 14, "reg14", &["NXM_NX_REG14"]),
    reg(Id::REG15, 15, "reg15", &["NXM_NX_REG15"]),
    xreg(Id::XREG0, 0, "xreg0", &["OXM_OF_PKT_REG0"]),
    xreg(Id::XREG1, 1, "xreg1", &["OXM_OF_PKT_REG1"]),
    xreg(Id::XREG2, 2, "xreg2", &["OXM_OF_PKT_REG2"]),
    xreg(Id::XREG3, 3, "xreg3", &["OXM_OF_PKT_REG3"]),
    xreg(Id::XREG4, 4, "xreg4", &["OXM_OF_PKT_REG4"]),
    xreg(Id::XREG5, 5, "xreg5", &["OXM_OF_PKT_REG5"]),
    xreg(Id::XREG6, 6, "xreg6", &["OXM_OF_PKT_REG6"]),
    xreg(Id::XREG7, 7, "xreg7", &["OXM_OF_PKT_REG7"]),
    xxreg(Id::XXREG0, 0, "xxreg0", &["NXM_NX_XXREG0"]),
    xxreg(Id::XXREG1, 1, "xxreg1", &["NXM_NX_XXREG1"]),
    xxreg(Id::XXREG2, 2, "xxreg2", &["NXM_NX_XXREG2"]),
    xxreg(Id::XXREG3, 3, "xxreg3", &["NXM_NX_XXREG3"]),
    // L2.
    Field::key(Id::ETH_SRC, "eth_src", 16, 6)
        .fmt(F::Ethernet)
        .mask()
        .rw()
        .aka(&["dl_src"])
        .nxm(&["NXM_OF_ETH_SRC", "OXM_OF_ETH_SRC"]),
    Field::key(Id::ETH_DST, "eth_dst", 8, 6)
        .fmt(F::Ethernet)
        .mask()
        .rw()
        .aka(&["dl_dst"])
        .nxm(&["NXM_OF_ETH_DST", "OXM_OF_ETH_DST"]),
    Field::key(Id::ETH_TYPE, "eth_type", 14, 2)
        .fmt(F::Hex)
        .aka(&["dl_type"])
        .nxm(&["NXM_OF_ETH_TYPE", "OXM_OF_ETH_TYPE"]),
    Field::key(Id::VLAN_TCI, "vlan_tci", 22, 2)
        .fmt(F::Hex)
        .mask()
        .rw()
        .nxm(&["NXM_OF_VLAN_TCI"]),
    Field::key(Id::DL_VLAN, "dl_vlan", 22, 2)
        .bits(2, 12, 0)
        .rw(),
    // The OpenFlow 1.2 VID: the 12-bit VID plus OFPVID_PRESENT (0x1000, the CFI bit here).
    Field::key(Id::VLAN_VID, "vlan_vid", 22, 2)
        .bits(2, 12, 0)
        .smask(0x1fff, 0x1fff)
        .mask()
        .rw()
        .nxm(&["OXM_OF_VLAN_VID"]),
    Field::key(Id::DL_VLAN_PCP, "dl_vlan_pcp", 22, 2)
        .bits(1, 3, 13)
        .rw(),
    Field::key(Id::VLAN_PCP, "vlan_pcp", 22, 2)
        .bits(1, 3, 13)
        .rw()
        .pre(P::VlanVid)
        .nxm(&["OXM_OF_VLAN_PCP"]),
    // MPLS: the outermost label stack entry.
    Field::key(Id::MPLS_LABEL, "mpls_label", 96, 4)
        .bits(4, 20, 12)
        .rw()
        .pre(P::Mpls)
        .nxm(&["OXM_OF_MPLS_LABEL"]),
    Field::key(Id::MPLS_TC, "mpls_tc", 96, 4)
        .bits(1, 3, 9)
        .rw()
        .pre(P::Mpls)
        .nxm(&["OXM_OF_MPLS_TC"]),
    Field::key(Id::MPLS_BOS, "mpls_bos", 96, 4)
        .bits(1, 1, 8)
        .pre(P::Mpls)
        .nxm(&["OXM_OF_MPLS_BOS"]),
    Field::key(Id::MPLS_TTL, "mpls_ttl", 96, 4)
        .bits(1, 8, 0)
        .rw()
        .pre(P::Mpls)
        .nxm(&["NXM_NX_MPLS_TTL"]),
    // L3.
    Field::key(Id::IPV4_SRC, "ip_src", 24, 4)
        .fmt(F::Ipv4)
        .mask()
        .rw()
        .pre(P::Ipv4)
        .aka(&["nw_src"])
        .nxm(&["NXM_OF_IP_SRC", "OXM_OF_IPV4_SRC"]),
    Field::key(Id::IPV4_DST, "ip_dst", 28, 4)
        .fmt(F::Ipv4)
        .mask()
        .rw()
        .pre(P::Ipv4)
        .aka(&["nw_dst"])
        .nxm(&["NXM_OF_IP_DST", "OXM_OF_IPV4_DST"]),
    Field::key(Id::IPV6_SRC, "ipv6_src", 112, 16)
        .fmt(F::Ipv6)
        .mask()
        .rw()
        .pre(P::Ipv6)
        .nxm(&["NXM_NX_IPV6_SRC", "OXM_OF_IPV6_SRC"]),
    Field::key(Id::IPV6_DST, "ipv6_dst", 128, 16)
        .fmt(F::Ipv6)
        .mask()
        .rw()
        .pre(P::Ipv6)
        .nxm(&["NXM_NX_IPV6_DST", "OXM_OF_IPV6_DST"]),
    Field::key(Id::IPV6_LABEL, "ipv6_label", 108, 4)
        .bits(4, 20, 0)
        .smask(0xfffff, 0xffff_ffff)
        .fmt(F::Hex)
        .mask()
        .rw()
        .pre(P::Ipv6)
        .nxm(&["NXM_NX_IPV6_LABEL", "OXM_OF_IPV6_FLABEL"]),
    Field::key(Id::IP_PROTO, "nw_proto", 36, 1)
        .pre(P::IpAny)
        .aka(&["ip_proto"])
        .nxm(&["NXM_OF_IP_PROTO", "OXM_OF_IP_PROTO"]),
    // The TOS byte with the ECN bits clear (`nw_tos=184` is DSCP 46).
    Field::key(Id::IP_DSCP, "nw_tos", 37, 1)
        .smask(0xfc, 0xfc)
        .rw()
        .pre(P::IpAny)
        .nxm(&["NXM_OF_IP_TOS"]),
    Field::key(Id::IP_DSCP_SHIFTED, "ip_dscp", 37, 1)
        .bits(1, 6, 2)
        .rw()
        .pre(P::IpAny)
        .nxm(&["OXM_OF_IP_DSCP"]),
    Field::key(Id::IP_ECN, "nw_ecn", 37, 1)
        .bits(1, 2, 0)
        .rw()
        .pre(P::IpAny)
        .aka(&["ip_ecn"])
        .nxm(&["NXM_NX_IP_ECN", "OXM_OF_IP_ECN"]),
    Field::key(Id::IP_TTL, "nw_ttl", 38, 1)
        .rw()
        .pre(P::IpAny)
        .nxm(&["NXM_NX_IP_TTL"]),
    Field::key(Id::IP_FRAG, "ip_frag", 39, 1)
        .bits(1, 2, 0)
        .fmt(F::Frag)
        .mask()
        .pre(P::IpAny)
        .aka(&["nw_frag"])
        .nxm(&["NXM_NX_IP_FRAG"]),
    // ARP shares the IPv4 words: the opcode is nw_proto (16 bits in OpenFlow, 8 kept).
    Field::key(Id::ARP_OP, "arp_op", 36, 1)
        .bits(2, 16, 0)
        .smask(0xff, 0xff)
        .rw()
        .pre(P::Arp)
        .nxm(&["NXM_OF_ARP_OP", "OXM_OF_ARP_OP"]),
    Field::key(Id::ARP_SPA, "arp_spa", 24, 4)
        .fmt(F::Ipv4)
        .mask()
        .rw()
        .pre(P::Arp)
        .nxm(&["NXM_OF_ARP_SPA", "OXM_OF_ARP_SPA"]),
    Field::key(Id::ARP_TPA, "arp_tpa", 28, 4)
        .fmt(F::Ipv4)
        .mask()
        .rw()
        .pre(P::Arp)
        .nxm(&["NXM_OF_ARP_TPA", "OXM_OF_ARP_TPA"]),
    Field::key(Id::ARP_SHA, "arp_sha", 160, 6)
        .fmt(F::Ethernet)
        .mask()
        .rw()
        .pre(P::Arp)
        .nxm(&["NXM_NX_ARP_SHA", "OXM_OF_ARP_SHA"]),
    Field::key(Id::ARP_THA, "arp_tha", 168, 6)
        .fmt(F::Ethernet)
        .mask()
        .rw()
        .pre(P::Arp)
        .nxm(&["NXM_NX_ARP_THA", "OXM_OF_ARP_THA"]),
    // L4.
    Field::key(Id::TCP_SRC, "tcp_src", 32, 2)
        .mask()
        .rw()
        .pre(P::Tcp)
        .aka(&["tp_src"])
        .nxm(&["NXM_OF_TCP_SRC", "OXM_OF_TCP_SRC"]),
    Field::key(Id::TCP_DST, "tcp_dst", 34, 2)
        .mask()
        .rw()
        .pre(P::Tcp)
        .aka(&["tp_dst"])
        .nxm(&["NXM_OF_TCP_DST", "OXM_OF_TCP_DST"]),
    Field::key(Id::TCP_FLAGS, "tcp_flags", 40, 2)
        .bits(2, 12, 0)
        .smask(0x0fff, 0xffff)
        .fmt(F::TcpFlags)
        .mask()
        .pre(P::Tcp)
        .nxm(&["NXM_NX_TCP_FLAGS", "ONFOXM_ET_TCP_FLAGS"]),
    Field::key(Id::UDP_SRC, "udp_src", 32, 2)
        .mask()
        .rw()
        .pre(P::Udp)
        .nxm(&["NXM_OF_UDP_SRC", "OXM_OF_UDP_SRC"]),
    Field::key(Id::UDP_DST, "udp_dst", 34, 2)
        .mask()
        .rw()
        .pre(P::Udp)
        .nxm(&["NXM_OF_UDP_DST", "OXM_OF_UDP_DST"]),
    Field::key(Id::SCTP_SRC, "sctp_src", 32, 2)
        .mask()
        .rw()
        .pre(P::Sctp)
        .nxm(&["OXM_OF_SCTP_SRC"]),
    Field::key(Id::SCTP_DST, "sctp_dst", 34, 2)
        .mask()
        .rw()
        .pre(P::Sctp)
        .nxm(&["OXM_OF_SCTP_DST"]),
    // ICMP type and code live in the L4 port words; an exact match masks the whole word.
    Field::key(Id::ICMPV4_TYPE, "icmp_type", 32, 2)
        .bits(1, 8, 0)
        .smask(0xff, 0xffff)
        .rw()
        .pre(P::IcmpV4)
        .nxm(&["NXM_OF_ICMP_TYPE", "OXM_OF_ICMPV4_TYPE"]),
    Field::key(Id::ICMPV4_CODE, "icmp_code", 34, 2)
        .bits(1, 8, 0)
        .smask(0xff, 0xffff)
        .rw()
        .pre(P::IcmpV4)
        .nxm(&["NXM_OF_ICMP_CODE", "OXM_OF_ICMPV4_CODE"]),
    Field::key(Id::ICMPV6_TYPE, "icmpv6_type", 32, 2)
        .bits(1, 8, 0)
        .smask(0xff, 0xffff)
        .rw()
        .pre(P::IcmpV6)
        .nxm(&["NXM_NX_ICMPV6_TYPE", "OXM_OF_ICMPV6_TYPE"]),
    Field::key(Id::ICMPV6_CODE, "icmpv6_code", 34, 2)
        .bits(1, 8, 0)
        .smask(0xff, 0xffff)
        .rw()
        .pre(P::IcmpV6)
        .nxm(&["NXM_NX_ICMPV6_CODE", "OXM_OF_ICMPV6_CODE"]),
    // Neighbor discovery: the link-layer addresses share the ARP hardware-address words.
    Field::key(Id::ND_TARGET, "nd_target", 144, 16)
        .fmt(F::Ipv6)
        .mask()
        .rw()
        .pre(P::Nd)
        .nxm(&["NXM_NX_ND_TARGET", "OXM_OF_IPV6_ND_TARGET"]),
    Field::key(Id::ND_SLL, "nd_sll", 160, 6)
        .fmt(F::Ethernet)
        .mask()
        .rw()
        .pre(P::NdSolicit)
        .nxm(&["NXM_NX_ND_SLL", "OXM_OF_IPV6_ND_SLL"]),
    Field::key(Id::ND_TLL, "nd_tll", 168, 6)
        .fmt(F::Ethernet)
        .mask()
        .rw()
        .pre(P::NdAdvert)
        .nxm(&["NXM_NX_ND_TLL", "OXM_OF_IPV6_ND_TLL"]),
    // Set only by the classifier, for the flow of a complete conjunctive match.
    Field::key(Id::CONJ_ID, "conj_id", 0, 0)
        .at(Loc::ConjId, 32)
        .nxm(&["NXM_NX_CONJ_ID"]),
    // Read-only and without an NXM/OXM code in OVS: a flow may say it (ofproto/trace), a flow
    // table cannot match it.
    Field::key(Id::SKB_PRIORITY, "skb_priority", 0, 0)
        .at(Loc::SkbPriority, 32)
        .fmt(F::Hex),
];

/// Every field, in table order.
pub fn fields() -> &'static [Field] {
    &FIELDS
}

/// The field called `name` (its canonical name or an alias such as `dl_dst`, `nw_src`,
/// `tp_src`): what match keys and `set_field` targets accept.
pub fn field_by_name(name: &str) -> Option<FieldId> {
    FIELDS
        .iter()
        .find(|f| f.name == name || f.aliases.contains(&name))
        .map(|f| f.id)
}

/// The field with NXM/OXM name `name` (`NXM_OF_ETH_DST`, `OXM_OF_PKT_REG0`).
pub fn field_by_nxm_name(name: &str) -> Option<FieldId> {
    FIELDS.iter().find(|f| f.nxm.contains(&name)).map(|f| f.id)
}
