//! OpenFlow 1.1's fixed match (`struct ofp11_match`, an `ofp_match` of type `OFPMT_STANDARD`,
//! 88 bytes): a wildcard word for the fields that have no mask, bitwise masks (1-bits
//! wildcarded) for the Ethernet and IPv4 addresses and the metadata, and MPLS label and TC.
//!
//! Decoding and encoding follow OVS (`ofputil_match_from_ofp11_match()`,
//! `ofputil_match_to_ofp11_match()`): `dl_vlan` 0xffff is "no tag" and 0xfffe "any tag";
//! TOS, protocol and addresses count only in IPv4 (and ARP) flows, ports in TCP, UDP, SCTP and
//! ICMP ones. A match fits OpenFlow 1.1 when that round trip keeps it ([`fits`]).

use crate::be::{be_n, be16, be32};
use ofproto::fields::FieldId;
use ofproto::pipekey::{PipeKey, PipeMask, PipeMatch};

use crate::error::OfpErr;
use crate::nxm::{port_from_ofp11, port_to_ofp11};

/// Size of `struct ofp11_match`.
pub const OFP11_MATCH_LEN: usize = 88;
/// `OFPMT_STANDARD`.
pub const OFPMT_STANDARD: u16 = 0;

const OFPFW11_IN_PORT: u32 = 1 << 0;
const OFPFW11_DL_VLAN: u32 = 1 << 1;
const OFPFW11_DL_VLAN_PCP: u32 = 1 << 2;
const OFPFW11_DL_TYPE: u32 = 1 << 3;
const OFPFW11_NW_TOS: u32 = 1 << 4;
const OFPFW11_NW_PROTO: u32 = 1 << 5;
const OFPFW11_TP_SRC: u32 = 1 << 6;
const OFPFW11_TP_DST: u32 = 1 << 7;
const OFPFW11_MPLS_LABEL: u32 = 1 << 8;
const OFPFW11_MPLS_TC: u32 = 1 << 9;

/// `OFPVID11_ANY`: any packet with a VLAN tag.
const OFPVID11_ANY: u16 = 0xfffe;
/// `OFPVID11_NONE`: packets without a VLAN tag.
const OFPVID11_NONE: u16 = 0xffff;

const VLAN_CFI: u16 = 0x1000;
const VLAN_VID_MASK: u16 = 0x0fff;
const VLAN_PCP_MASK: u16 = 0xe000;

type F = FieldId;

fn set(key: &mut PipeKey, mask: &mut PipeMask, f: FieldId, v: u128, m: u128) {
    // Fixed-width wire values that fit their fields, each field set once: this cannot fail.
    let _ = f.field().match_set(key, mask, v & m, m);
}

/// Decodes a `struct ofp11_match` at the start of `b` (its type and length checked here).
pub fn decode(b: &[u8]) -> Result<PipeMatch, OfpErr> {
    let b = b.get(..OFP11_MATCH_LEN).ok_or(OfpErr::OfpbmcBadLen)?;
    if be16(b, 0) != OFPMT_STANDARD {
        return Err(OfpErr::OfpbmcBadType);
    }
    if usize::from(be16(b, 2)) != OFP11_MATCH_LEN {
        return Err(OfpErr::OfpbmcBadLen);
    }
    let wc = be32(b, 8);
    let matched = |bit: u32| wc & bit == 0;
    let (mut key, mut mask) = (PipeKey::new(), PipeMask::new());
    let (k, m) = (&mut key, &mut mask);

    if matched(OFPFW11_IN_PORT) {
        let p = port_from_ofp11(be32(b, 4)).ok_or(OfpErr::OfpbmcBadValue)?;
        set(k, m, F::IN_PORT, p.into(), 0xffff);
    }
    let eth_all = (1u128 << 48) - 1;
    let (src_m, dst_m) = (!be_n(&b[18..24]) & eth_all, !be_n(&b[30..36]) & eth_all);
    if src_m != 0 || dst_m != 0 {
        set(k, m, F::ETH_SRC, be_n(&b[12..18]), src_m);
        set(k, m, F::ETH_DST, be_n(&b[24..30]), dst_m);
    }
    if matched(OFPFW11_DL_VLAN) {
        let vid = be16(b, 36);
        let (mut tci, mut tm) = match vid {
            OFPVID11_NONE => (0, 0xffff),
            OFPVID11_ANY => (VLAN_CFI, VLAN_CFI),
            v if v < 4096 => (VLAN_CFI | v, VLAN_CFI | VLAN_VID_MASK),
            _ => return Err(OfpErr::OfpbmcBadValue),
        };
        if vid != OFPVID11_NONE && matched(OFPFW11_DL_VLAN_PCP) {
            let pcp = b[38];
            if pcp > 7 {
                return Err(OfpErr::OfpbmcBadValue);
            }
            tci |= u16::from(pcp) << 13;
            tm |= VLAN_PCP_MASK;
        }
        set(k, m, F::VLAN_TCI, tci.into(), tm.into());
    }
    let dl_type = if matched(OFPFW11_DL_TYPE) {
        let t = be16(b, 40);
        set(k, m, F::ETH_TYPE, t.into(), 0xffff);
        t
    } else {
        0
    };
    let ipv4 = dl_type == 0x0800;
    let arp = dl_type == 0x0806 || dl_type == 0x8035;
    if ipv4 && matched(OFPFW11_NW_TOS) {
        if b[42] & !0xfc != 0 {
            return Err(OfpErr::OfpbmcBadValue);
        }
        set(k, m, F::IP_DSCP, b[42].into(), 0xff);
    }
    let mut nw_proto = 0;
    if ipv4 || arp {
        if matched(OFPFW11_NW_PROTO) {
            nw_proto = b[43];
            set(k, m, F::IP_PROTO, nw_proto.into(), 0xff);
        }
        set(k, m, F::IPV4_SRC, be32(b, 44).into(), (!be32(b, 48)).into());
        set(k, m, F::IPV4_DST, be32(b, 52).into(), (!be32(b, 56)).into());
    }
    if ipv4 {
        let (src, dst) = (be16(b, 60), be16(b, 62));
        match nw_proto {
            1 => {
                for (bit, v, f) in [
                    (OFPFW11_TP_SRC, src, F::TCP_SRC),
                    (OFPFW11_TP_DST, dst, F::TCP_DST),
                ] {
                    if matched(bit) {
                        if v >= 0x100 {
                            return Err(OfpErr::OfpbmcBadField);
                        }
                        set(k, m, f, v.into(), 0xffff);
                    }
                }
            }
            6 | 17 | 132 => {
                if matched(OFPFW11_TP_SRC) {
                    set(k, m, F::TCP_SRC, src.into(), 0xffff);
                }
                if matched(OFPFW11_TP_DST) {
                    set(k, m, F::TCP_DST, dst.into(), 0xffff);
                }
            }
            _ => {}
        }
    }
    if dl_type == 0x8847 || dl_type == 0x8848 {
        if matched(OFPFW11_MPLS_LABEL) {
            set(
                k,
                m,
                F::MPLS_LABEL,
                (be32(b, 64) & 0xfffff).into(),
                0xffff_ffff,
            );
        }
        if matched(OFPFW11_MPLS_TC) {
            set(k, m, F::MPLS_TC, (b[68] & 7).into(), 0xff);
        }
    }
    let md_m = !u64::from_be_bytes(b[80..88].try_into().expect("8 bytes"));
    if md_m != 0 {
        let md = u64::from_be_bytes(b[72..80].try_into().expect("8 bytes"));
        set(k, m, F::METADATA, md.into(), md_m.into());
    }
    Ok(PipeMatch::new(&key, &mask))
}

fn vm(m: &PipeMatch, f: FieldId) -> (u128, u128) {
    let fl = f.field();
    (fl.get(m.key()), fl.get_mask(m.mask()))
}

/// Encodes `m` as a `struct ofp11_match`; what OpenFlow 1.1 cannot say is lost (check [`fits`]).
pub fn encode(m: &PipeMatch) -> [u8; OFP11_MATCH_LEN] {
    let mut b = [0u8; OFP11_MATCH_LEN];
    let mut wc = 0u32;
    let put = |b: &mut [u8], at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
    b[0..2].copy_from_slice(&OFPMT_STANDARD.to_be_bytes());
    b[2..4].copy_from_slice(&(OFP11_MATCH_LEN as u16).to_be_bytes());

    let (in_port, in_port_m) = vm(m, F::IN_PORT);
    if in_port_m == 0 {
        wc |= OFPFW11_IN_PORT;
    } else {
        put(
            &mut b,
            4,
            &(port_to_ofp11(in_port as u16) as u32).to_be_bytes(),
        );
    }
    for (f, at) in [(F::ETH_SRC, 12), (F::ETH_DST, 24)] {
        let (v, mk) = vm(m, f);
        put(&mut b, at, &v.to_be_bytes()[10..]);
        put(&mut b, at + 6, &(!mk).to_be_bytes()[10..]);
    }
    let (tci, tci_m) = vm(m, F::VLAN_TCI);
    let (tci, tci_m) = (tci as u16, tci_m as u16);
    if tci_m == 0 {
        wc |= OFPFW11_DL_VLAN | OFPFW11_DL_VLAN_PCP;
    } else if tci_m & VLAN_CFI != 0 && tci & VLAN_CFI == 0 {
        put(&mut b, 36, &OFPVID11_NONE.to_be_bytes());
        wc |= OFPFW11_DL_VLAN_PCP;
    } else {
        let vid = if tci_m & VLAN_VID_MASK == 0 {
            OFPVID11_ANY
        } else {
            tci & VLAN_VID_MASK
        };
        put(&mut b, 36, &vid.to_be_bytes());
        if tci_m & VLAN_PCP_MASK == 0 {
            wc |= OFPFW11_DL_VLAN_PCP;
        } else {
            b[38] = (tci >> 13) as u8;
        }
    }
    let (dl_type, dl_type_m) = vm(m, F::ETH_TYPE);
    if dl_type_m == 0 {
        wc |= OFPFW11_DL_TYPE;
    } else {
        put(&mut b, 40, &(dl_type as u16).to_be_bytes());
    }
    let (tos, tos_m) = vm(m, F::IP_DSCP);
    if tos_m & 0xfc == 0 {
        wc |= OFPFW11_NW_TOS;
    } else {
        b[42] = tos as u8 & 0xfc;
    }
    let (proto, proto_m) = vm(m, F::IP_PROTO);
    if proto_m == 0 {
        wc |= OFPFW11_NW_PROTO;
    } else {
        b[43] = proto as u8;
    }
    for (f, at) in [(F::IPV4_SRC, 44), (F::IPV4_DST, 52)] {
        let (v, mk) = vm(m, f);
        put(&mut b, at, &(v as u32).to_be_bytes());
        put(&mut b, at + 4, &(!(mk as u32)).to_be_bytes());
    }
    for (f, bit, at) in [
        (F::TCP_SRC, OFPFW11_TP_SRC, 60),
        (F::TCP_DST, OFPFW11_TP_DST, 62),
    ] {
        let (v, mk) = vm(m, f);
        if mk == 0 {
            wc |= bit;
        } else {
            put(&mut b, at, &(v as u16).to_be_bytes());
        }
    }
    let (label, label_m) = vm(m, F::MPLS_LABEL);
    if label_m == 0 {
        wc |= OFPFW11_MPLS_LABEL;
    } else {
        put(&mut b, 64, &(label as u32).to_be_bytes());
    }
    let (tc, tc_m) = vm(m, F::MPLS_TC);
    if tc_m == 0 {
        wc |= OFPFW11_MPLS_TC;
    } else {
        b[68] = tc as u8;
    }
    let (md, md_m) = vm(m, F::METADATA);
    put(&mut b, 72, &(md as u64).to_be_bytes());
    put(&mut b, 80, &(!(md_m as u64)).to_be_bytes());
    put(&mut b, 8, &wc.to_be_bytes());
    b
}

/// Whether OpenFlow 1.1's match can carry `m` unchanged.
pub fn fits(m: &PipeMatch) -> bool {
    decode(&encode(m)).is_ok_and(|d| d == *m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nxm::tests::flow_mod_fixtures;
    use ofproto::syntax::{FlowKind, NoPortNames, parse_flow};
    use proptest::prelude::*;

    /// The matches `ovs-ofctl` sent in OpenFlow 1.1 flow_mods decode to the flow it was given
    /// and encode back to the same 88 bytes.
    #[test]
    fn ofp11_matches_agree_with_ovs_ofctl() {
        let mut n = 0;
        for (proto, flow, msg) in flow_mod_fixtures() {
            if proto != "OpenFlow11" {
                continue;
            }
            let want = parse_flow(&flow, FlowKind::Add, &NoPortNames)
                .unwrap()
                .match_;
            let wire = &msg[48..48 + OFP11_MATCH_LEN];
            assert_eq!(decode(wire), Ok(want.clone()), "{flow}");
            assert_eq!(encode(&want), wire, "{flow}");
            assert!(fits(&want), "{flow}");
            n += 1;
        }
        assert!(n >= 15, "only {n} vectors");
    }

    #[test]
    fn what_does_not_fit_and_bad_values() {
        for flow in [
            "reg0=1",
            "ipv6,ipv6_src=::1",
            "tcp6,tp_src=1",
            "ip,nw_ttl=3",
        ] {
            let m =
                parse_flow(&format!("{flow},actions=drop"), FlowKind::Add, &NoPortNames).unwrap();
            assert!(!fits(&m.match_), "{flow}");
        }
        let mut b = encode(&PipeMatch::catchall());
        b[8..12].copy_from_slice(&(0x3ff & !OFPFW11_DL_VLAN).to_be_bytes());
        b[36..38].copy_from_slice(&5000u16.to_be_bytes());
        assert_eq!(decode(&b), Err(OfpErr::OfpbmcBadValue));
        b[0..2].copy_from_slice(&1u16.to_be_bytes());
        assert_eq!(decode(&b), Err(OfpErr::OfpbmcBadType));
        assert_eq!(decode(&b[..40]), Err(OfpErr::OfpbmcBadLen));
    }

    proptest! {
        #[test]
        fn decoded_matches_encode_back(b in proptest::collection::vec(any::<u8>(), OFP11_MATCH_LEN)) {
            let mut b = b;
            b[0..4].copy_from_slice(&[0, 0, 0, OFP11_MATCH_LEN as u8]);
            if let Ok(m) = decode(&b) {
                prop_assert_eq!(decode(&encode(&m)), Ok(m));
            }
        }
    }
}
