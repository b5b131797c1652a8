//! OpenFlow 1.0's fixed match (`struct ofp10_match`, 40 bytes): a wildcard word, then the
//! twelve fields OpenFlow 1.0 knows, IPv4 addresses wildcarded by CIDR prefix length.
//!
//! Decoding follows OVS (`ofputil_match_from_ofp10_match()` then `ofputil_normalize_match()`):
//! `dl_vlan` 0xffff means "no VLAN tag"; fields that the match's `dl_type` and `nw_proto` make
//! meaningless (an IPv4 address in a non-IP flow, ports without TCP, UDP, SCTP or ICMP) are
//! dropped rather than refused. Encoding is OVS's `ofputil_match_to_ofp10_match()`.
//!
//! A match fits OpenFlow 1.0 when that round trip keeps it ([`fits`]): no field outside the
//! twelve, Ethernet addresses and ports exact, IPv4 masks CIDR, VLAN matches OpenFlow 1.0 can
//! say. Otherwise `ovs-ofctl` uses NXM, and so must a switch replying with the flow.

use crate::be::{be_n, be16, be32};
use ofproto::fields::FieldId;
use ofproto::pipekey::{PipeKey, PipeMask, PipeMatch};

/// Size of `struct ofp10_match`.
pub const OFP10_MATCH_LEN: usize = 40;

/// `OFPFW10_IN_PORT` and the other wildcard bits.
pub const OFPFW10_IN_PORT: u32 = 1 << 0;
pub const OFPFW10_DL_VLAN: u32 = 1 << 1;
pub const OFPFW10_DL_SRC: u32 = 1 << 2;
pub const OFPFW10_DL_DST: u32 = 1 << 3;
pub const OFPFW10_DL_TYPE: u32 = 1 << 4;
pub const OFPFW10_NW_PROTO: u32 = 1 << 5;
pub const OFPFW10_TP_SRC: u32 = 1 << 6;
pub const OFPFW10_TP_DST: u32 = 1 << 7;
/// Shift of the 6-bit count of wildcarded low bits of `nw_src`.
pub const OFPFW10_NW_SRC_SHIFT: u32 = 8;
/// Shift of the 6-bit count of wildcarded low bits of `nw_dst`.
pub const OFPFW10_NW_DST_SHIFT: u32 = 14;
pub const OFPFW10_DL_VLAN_PCP: u32 = 1 << 20;
pub const OFPFW10_NW_TOS: u32 = 1 << 21;
/// Every wildcard bit.
pub const OFPFW10_ALL: u32 = (1 << 22) - 1;

/// `OFP10_VLAN_NONE`: `dl_vlan` for packets without a VLAN tag.
pub const OFP10_VLAN_NONE: u16 = 0xffff;

const VLAN_CFI: u16 = 0x1000;
const VLAN_VID_MASK: u16 = 0x0fff;
const VLAN_PCP_MASK: u16 = 0xe000;

type F = FieldId;

/// The netmask that wildcards the low `wcbits` bits (all of them from 32 on).
fn wcbits_to_netmask(wcbits: u32) -> u32 {
    let w = wcbits & 0x3f;
    if w < 32 { !((1u32 << w) - 1) } else { 0 }
}

/// The number of low bits a netmask wildcards (meaningful for CIDR masks only).
fn netmask_to_wcbits(mask: u32) -> u32 {
    if mask == 0 { 32 } else { mask.trailing_zeros() }
}

fn set(key: &mut PipeKey, mask: &mut PipeMask, f: FieldId, v: u128, m: u128) {
    // The values here come from fixed-width wire fields that fit their fields, and every
    // field is set once: match_set cannot fail.
    let _ = f.field().match_set(key, mask, v, m);
}

/// Decodes a `struct ofp10_match` as OVS decodes a flow_mod's or request's: fields the flow's
/// `dl_type` and `nw_proto` make meaningless dropped (`ofputil_normalize_match()`).
pub fn decode(b: &[u8; OFP10_MATCH_LEN]) -> PipeMatch {
    decode_as(b, true)
}

/// Decodes a `struct ofp10_match` as a switch reported it (a statistics reply, a
/// flow-removed message): every field the wildcards say is matched, as OVS prints them.
pub fn decode_reported(b: &[u8; OFP10_MATCH_LEN]) -> PipeMatch {
    decode_as(b, false)
}

fn decode_as(b: &[u8; OFP10_MATCH_LEN], normalize: bool) -> PipeMatch {
    let w = be32(b, 0) & OFPFW10_ALL;
    let (mut key, mut mask) = (PipeKey::new(), PipeMask::new());
    let dl_type = be16(b, 22);
    let nw_proto = b[25];
    let matched = |bit: u32| w & bit == 0;

    if matched(OFPFW10_IN_PORT) {
        set(&mut key, &mut mask, F::IN_PORT, be16(b, 4).into(), 0xffff);
    }
    if matched(OFPFW10_DL_SRC) {
        set(
            &mut key,
            &mut mask,
            F::ETH_SRC,
            be_n(&b[6..12]),
            (1 << 48) - 1,
        );
    }
    if matched(OFPFW10_DL_DST) {
        set(
            &mut key,
            &mut mask,
            F::ETH_DST,
            be_n(&b[12..18]),
            (1 << 48) - 1,
        );
    }
    let dl_type_matched = matched(OFPFW10_DL_TYPE);
    if dl_type_matched {
        set(&mut key, &mut mask, F::ETH_TYPE, dl_type.into(), 0xffff);
    }

    // VLAN: "no tag" is its own case, else the VID and PCP halves of the TCI.
    let dl_vlan = be16(b, 18);
    if matched(OFPFW10_DL_VLAN) && dl_vlan == OFP10_VLAN_NONE {
        set(&mut key, &mut mask, F::VLAN_TCI, 0, 0xffff);
    } else {
        let mut m = 0u16;
        if matched(OFPFW10_DL_VLAN_PCP) {
            m |= VLAN_PCP_MASK | VLAN_CFI;
        }
        if matched(OFPFW10_DL_VLAN) {
            m |= VLAN_VID_MASK | VLAN_CFI;
        }
        if m != 0 {
            let pcp = (u16::from(b[20]) << 13) & VLAN_PCP_MASK;
            let tci = (dl_vlan & VLAN_VID_MASK) | pcp | VLAN_CFI;
            set(&mut key, &mut mask, F::VLAN_TCI, (tci & m).into(), m.into());
        }
    }

    // What the flow's dl_type and nw_proto let it match (OVS's normalization).
    let t = if dl_type_matched { dl_type } else { 0 };
    let p = if matched(OFPFW10_NW_PROTO) {
        nw_proto
    } else {
        0
    };
    let (ip4, ip6) = (t == 0x0800, t == 0x86dd);
    let arp = t == 0x0806 || t == 0x8035;
    let may_nw_addr = !normalize || ip4 || arp;
    let may_nw_proto = !normalize || ip4 || ip6 || arp;
    let may_tos = !normalize || ip4 || ip6;
    let may_tp = !normalize
        || (ip4 && matches!(p, 6 | 17 | 132 | 1))
        || (ip6 && matches!(p, 6 | 17 | 132 | 58));

    if may_nw_proto && matched(OFPFW10_NW_PROTO) {
        set(&mut key, &mut mask, F::IP_PROTO, nw_proto.into(), 0xff);
    }
    if may_tos && matched(OFPFW10_NW_TOS) {
        set(
            &mut key,
            &mut mask,
            F::IP_DSCP,
            u128::from(b[24] & 0xfc),
            0xff,
        );
    }
    if may_nw_addr {
        for (shift, ofs, f) in [
            (OFPFW10_NW_SRC_SHIFT, 28, F::IPV4_SRC),
            (OFPFW10_NW_DST_SHIFT, 32, F::IPV4_DST),
        ] {
            let nm = wcbits_to_netmask(w >> shift);
            if nm != 0 {
                set(
                    &mut key,
                    &mut mask,
                    f,
                    (be32(b, ofs) & nm).into(),
                    nm.into(),
                );
            }
        }
    }
    if may_tp {
        // The whole L4 words, whichever protocol: the ports, or ICMP's type and code (the
        // TCP fields name the same storage).
        if matched(OFPFW10_TP_SRC) {
            set(&mut key, &mut mask, F::TCP_SRC, be16(b, 36).into(), 0xffff);
        }
        if matched(OFPFW10_TP_DST) {
            set(&mut key, &mut mask, F::TCP_DST, be16(b, 38).into(), 0xffff);
        }
    }
    PipeMatch::new(&key, &mask)
}

/// Reads a field's value and mask (field space) from a match.
fn vm(m: &PipeMatch, f: FieldId) -> (u128, u128) {
    let fl = f.field();
    (fl.get(m.key()), fl.get_mask(m.mask()))
}

/// Encodes `m` as a `struct ofp10_match`, as OVS does; what OpenFlow 1.0 cannot say is lost
/// (check [`fits`] first).
pub fn encode(m: &PipeMatch) -> [u8; OFP10_MATCH_LEN] {
    let mut b = [0u8; OFP10_MATCH_LEN];
    let mut w = 0u32;
    let (in_port, in_port_m) = vm(m, F::IN_PORT);
    let (dl_src, dl_src_m) = vm(m, F::ETH_SRC);
    let (dl_dst, dl_dst_m) = vm(m, F::ETH_DST);
    let (dl_type, dl_type_m) = vm(m, F::ETH_TYPE);
    let (nw_proto, nw_proto_m) = vm(m, F::IP_PROTO);
    let (nw_src, nw_src_m) = vm(m, F::IPV4_SRC);
    let (nw_dst, nw_dst_m) = vm(m, F::IPV4_DST);
    let (tos, tos_m) = vm(m, F::IP_DSCP);
    let (tp_src, tp_src_m) = vm(m, F::TCP_SRC);
    let (tp_dst, tp_dst_m) = vm(m, F::TCP_DST);
    let (tci, tci_m) = vm(m, F::VLAN_TCI);
    let (tci, tci_m) = (tci as u16, tci_m as u16);

    let wild = |cond: bool, bit: u32| if cond { bit } else { 0 };
    w |= wild(in_port_m == 0, OFPFW10_IN_PORT);
    w |= wild(dl_type_m == 0, OFPFW10_DL_TYPE);
    w |= wild(nw_proto_m == 0, OFPFW10_NW_PROTO);
    w |= netmask_to_wcbits(nw_src_m as u32) << OFPFW10_NW_SRC_SHIFT;
    w |= netmask_to_wcbits(nw_dst_m as u32) << OFPFW10_NW_DST_SHIFT;
    w |= wild(tos_m & 0xfc == 0, OFPFW10_NW_TOS);
    w |= wild(tp_src_m == 0, OFPFW10_TP_SRC);
    w |= wild(tp_dst_m == 0, OFPFW10_TP_DST);
    w |= wild(dl_src_m == 0, OFPFW10_DL_SRC);
    w |= wild(dl_dst_m == 0, OFPFW10_DL_DST);

    let (mut dl_vlan, mut dl_vlan_pcp) = (0u16, 0u8);
    if tci_m == 0 {
        w |= OFPFW10_DL_VLAN | OFPFW10_DL_VLAN_PCP;
    } else if tci_m & VLAN_CFI != 0 && tci & VLAN_CFI == 0 {
        dl_vlan = OFP10_VLAN_NONE;
    } else {
        if tci_m & VLAN_VID_MASK == 0 {
            w |= OFPFW10_DL_VLAN;
        } else {
            dl_vlan = tci & VLAN_VID_MASK;
        }
        if tci_m & VLAN_PCP_MASK == 0 {
            w |= OFPFW10_DL_VLAN_PCP;
        } else {
            dl_vlan_pcp = (tci >> 13) as u8;
        }
    }

    b[0..4].copy_from_slice(&w.to_be_bytes());
    b[4..6].copy_from_slice(&(in_port as u16).to_be_bytes());
    b[6..12].copy_from_slice(&dl_src.to_be_bytes()[10..]);
    b[12..18].copy_from_slice(&dl_dst.to_be_bytes()[10..]);
    b[18..20].copy_from_slice(&dl_vlan.to_be_bytes());
    b[20] = dl_vlan_pcp;
    b[22..24].copy_from_slice(&(dl_type as u16).to_be_bytes());
    b[24] = tos as u8 & 0xfc;
    b[25] = nw_proto as u8;
    b[28..32].copy_from_slice(&(nw_src as u32).to_be_bytes());
    b[32..36].copy_from_slice(&(nw_dst as u32).to_be_bytes());
    b[36..38].copy_from_slice(&(tp_src as u16).to_be_bytes());
    b[38..40].copy_from_slice(&(tp_dst as u16).to_be_bytes());
    b
}

/// Whether the fixed match holds every bit of `m` (a switch reporting a flow it has needs no
/// more; a controller adding one, [`fits`]).
pub fn carries(m: &PipeMatch) -> bool {
    decode_reported(&encode(m)) == *m
}

/// Whether OpenFlow 1.0's match can carry `m` unchanged (else NXM is needed). Beyond the
/// round trip, OVS gives the SCTP ports no OpenFlow 1.0 form, and keeps IPv6 flows' protocol,
/// TOS and L4 words to NXM, though the fixed match would carry them.
pub fn fits(m: &PipeMatch) -> bool {
    let mask = m.mask();
    let l4 = F::TCP_SRC.field().is_matched(mask) || F::TCP_DST.field().is_matched(mask);
    let ipv6 = m.key().dp.eth_type() == 0x86dd && F::ETH_TYPE.field().is_matched(mask);
    let ipv6_l3 = F::IP_PROTO.field().is_matched(mask) || F::IP_DSCP.field().is_matched(mask);
    if (l4 && m.key().dp.nw_proto() == 132) || (ipv6 && (l4 || ipv6_l3)) {
        return false;
    }
    decode(&encode(m)) == *m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nxm::tests::{flow_mod_fixtures, unhex};
    use ofproto::syntax::{FlowKind, NoPortNames, parse_flow};
    use proptest::prelude::*;

    fn parsed(flow: &str) -> PipeMatch {
        parse_flow(flow, FlowKind::Add, &NoPortNames)
            .unwrap()
            .match_
    }

    /// The flows `ovs-ofctl` sent as OpenFlow 1.0 flow mods decode to the flow it was given and
    /// encode back to the same 40 bytes; those it sent as NXM do not fit.
    #[test]
    fn ofp10_matches_agree_with_ovs_ofctl() {
        let mut n = 0;
        for (proto, flow, msg) in flow_mod_fixtures() {
            if proto != "OpenFlow10" {
                continue;
            }
            let want = parsed(&flow);
            if msg[1] != 14 {
                assert!(!fits(&want), "{flow} went as NXM but fits OpenFlow 1.0");
                continue;
            }
            let wire: &[u8; OFP10_MATCH_LEN] = msg[8..48].try_into().unwrap();
            assert_eq!(decode(wire), want, "{flow}");
            assert_eq!(encode(&want), *wire, "{flow}");
            assert!(fits(&want), "{flow}");
            n += 1;
        }
        assert!(n >= 10, "only {n} OpenFlow 1.0 vectors");
    }

    #[test]
    fn normalization_drops_fields_the_flow_cannot_have() {
        // nw_src=10.0.0.0/8 and tp_dst=80 with dl_type wildcarded: both dropped.
        let mut b = [0u8; OFP10_MATCH_LEN];
        let w = OFPFW10_ALL & !(OFPFW10_TP_DST) & !(0x3f << OFPFW10_NW_SRC_SHIFT)
            | (24 << OFPFW10_NW_SRC_SHIFT);
        b[0..4].copy_from_slice(&w.to_be_bytes());
        b[28] = 10;
        b[39] = 80;
        assert_eq!(decode(&b), PipeMatch::catchall());
        assert_eq!(
            decode(&unhex(&"00".repeat(40)).try_into().unwrap()),
            parsed(
                "dl_vlan=0,dl_vlan_pcp=0,in_port=0,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,dl_type=0,actions=drop"
            )
        );
    }

    #[test]
    fn what_does_not_fit() {
        for flow in [
            "reg0=1",
            "dl_src=00:00:00:00:00:01/ff:ff:ff:ff:ff:00",
            "ip,nw_src=10.0.0.1/255.0.255.0",
            "tcp,tp_dst=0x1000/0xf000",
            "vlan_tci=0x1000/0x1000",
            "ipv6,ipv6_src=::1",
            "ip,nw_ttl=3",
        ] {
            assert!(!fits(&parsed(&format!("{flow},actions=drop"))), "{flow}");
        }
        for flow in [
            "ip,nw_src=10.0.0.0/8",
            "dl_vlan=0xffff",
            "udp,tp_src=5",
            "icmp,icmp_type=3",
        ] {
            assert!(fits(&parsed(&format!("{flow},actions=drop"))), "{flow}");
        }
    }

    proptest! {
        /// Whatever 40 bytes say, decoding does not panic, and a decoded match encodes to bytes
        /// that decode the same.
        #[test]
        fn decode_encode_decode_is_stable(b in any::<[u8; OFP10_MATCH_LEN]>()) {
            let m = decode(&b);
            prop_assert_eq!(decode(&encode(&m)), m);
        }
    }
}
