//! Rewrites of the control-protocol headers a slow path answers with: `set(arp(...))` (an ARP
//! request turned into a reply: opcode, addresses), `set(icmp(...))`/`set(icmpv6(...))` (an echo
//! request turned into a reply: type and code) and `set(nd(...))` (an IPv6 neighbour
//! solicitation turned into an advertisement: target and link-layer address options), as OVS's
//! `odp_set_arp()`, `packet_set_icmp()` and `packet_set_nd()` do them. The ICMP and ICMPv6
//! checksums are updated incrementally (RFC 1624); ARP has none.
//!
//! The ARP header is Ethernet/IPv4's (RFC 826: hardware type 1, protocol 0x0800, lengths 6 and
//! 4), as the key only has fields for that one. ND's link-layer address options (RFC 4861
//! §4.6.1) are written where the message carries them: the source's (type 1) and the
//! target's (type 2), each eight bytes long.

use wire::checksum;
use wire::{IpProtocol, Ipv6Addr};

use crate::actions::{SetArp, SetIcmp, SetNd};
use crate::packet::Packet;

use super::RewriteError::{self, *};
use super::ip::l4_proto;
use super::{ICMPV6_HLEN, at, be16, masked, put16};

/// An Ethernet/IPv4 ARP header's length and its fields' offsets (RFC 826).
const ARP_HLEN: usize = 28;
const ARP_OP: usize = 6;
const ARP_SHA: usize = 8;
const ARP_SPA: usize = 14;
const ARP_THA: usize = 18;
const ARP_TPA: usize = 24;

/// An ICMPv6 neighbour solicitation or advertisement: header, reserved word, target (RFC 4861
/// §4.3, §4.4).
const ND_HLEN: usize = 24;
const ND_TARGET: usize = 8;
const ND_NS: u8 = 135;
const ND_NA: u8 = 136;
const ND_OPT_SLL: u8 = 1;
const ND_OPT_TLL: u8 = 2;

fn masked_bytes<const N: usize>(old: [u8; N], v: [u8; N], m: [u8; N]) -> [u8; N] {
    core::array::from_fn(|i| masked(old[i], v[i], m[i]))
}

fn get<const N: usize>(d: &[u8], at: usize) -> [u8; N] {
    d[at..at + N].try_into().expect("N bytes")
}

/// `set(arp(...))`: masked write of the opcode and the addresses of an Ethernet/IPv4 ARP
/// packet. A whole-byte opcode mask writes the 16-bit opcode (the key keeps its low byte).
pub fn set_arp(pkt: &mut Packet, s: &SetArp) -> Result<(), RewriteError> {
    let len = pkt.len();
    let l3 = at(pkt.meta.l3, len, ARP_HLEN).ok_or(NoArp)?;
    let d = pkt.data_mut();
    let a = &mut d[l3..l3 + ARP_HLEN];
    if be16(a, 0) != 1 || be16(a, 2) != 0x0800 || a[4] != 6 || a[5] != 4 {
        return Err(NoArp);
    }
    if s.op_mask == u8::MAX {
        put16(a, ARP_OP, u16::from(s.op));
    } else if s.op_mask != 0 {
        a[ARP_OP + 1] = masked(a[ARP_OP + 1], s.op, s.op_mask);
    }
    let sha = masked_bytes(get(a, ARP_SHA), s.sha, s.sha_mask);
    a[ARP_SHA..ARP_SHA + 6].copy_from_slice(&sha);
    let spa = masked_bytes(get(a, ARP_SPA), s.sip, s.sip_mask);
    a[ARP_SPA..ARP_SPA + 4].copy_from_slice(&spa);
    let tha = masked_bytes(get(a, ARP_THA), s.tha, s.tha_mask);
    a[ARP_THA..ARP_THA + 6].copy_from_slice(&tha);
    let tpa = masked_bytes(get(a, ARP_TPA), s.tip, s.tip_mask);
    a[ARP_TPA..ARP_TPA + 4].copy_from_slice(&tpa);
    Ok(())
}

/// `set(icmp(...))`, `set(icmpv6(...))`: masked write of type and code, with the checksum
/// updated.
pub fn set_icmp(pkt: &mut Packet, s: &SetIcmp) -> Result<(), RewriteError> {
    let len = pkt.len();
    let l4 = at(pkt.meta.l4, len, ICMPV6_HLEN).ok_or(NoL4)?;
    let l3 = pkt.meta.l3;
    let d = pkt.data_mut();
    let want = if s.v6 {
        IpProtocol::ICMPV6
    } else {
        IpProtocol::ICMP
    };
    match l4_proto(d, l3, l4) {
        None => return Err(NoL4),
        Some(p) if p != want => return Err(L4Mismatch),
        Some(_) => {}
    }
    let old = be16(d, l4);
    let t = masked(d[l4], s.icmp_type, s.type_mask);
    let c = masked(d[l4 + 1], s.code, s.code_mask);
    let new = u16::from_be_bytes([t, c]);
    if new != old {
        put16(d, l4, new);
        let sum = checksum::update16(be16(d, l4 + 2), old, new);
        put16(d, l4 + 2, sum);
    }
    Ok(())
}

/// `set(nd(...))`: masked write of a neighbour solicitation's or advertisement's target and of
/// the link-layer addresses in its options, with the ICMPv6 checksum updated. Other ICMPv6
/// messages are left as they are.
pub fn set_nd(pkt: &mut Packet, s: &SetNd) -> Result<(), RewriteError> {
    let len = pkt.len();
    let l4 = at(pkt.meta.l4, len, ND_HLEN).ok_or(NoL4)?;
    let l3 = pkt.meta.l3;
    let d = pkt.data_mut();
    match l4_proto(d, l3, l4) {
        Some(IpProtocol::ICMPV6) => {}
        None => return Err(NoL4),
        Some(_) => return Err(L4Mismatch),
    }
    if !matches!(d[l4], ND_NS | ND_NA) {
        return Err(L4Mismatch);
    }
    let csum_at = l4 + 2;
    let mut sum = be16(d, csum_at);
    let t = l4 + ND_TARGET;
    let old: [u8; 16] = get(d, t);
    let new = Ipv6Addr::from_bits(
        (Ipv6Addr::from(old).to_bits() & !s.target_mask.to_bits())
            | (s.target.to_bits() & s.target_mask.to_bits()),
    )
    .octets();
    if new != old {
        sum = checksum::update_bytes(sum, &old, &new);
        d[t..t + 16].copy_from_slice(&new);
    }
    // The options, up to the end of the ICMPv6 message (the IPv6 payload, not any padding).
    let end = len.min(l3 as usize + 40 + be16(d, l3 as usize + 4) as usize);
    let mut o = l4 + ND_HLEN;
    while o + 8 <= end {
        let (kind, units) = (d[o], d[o + 1] as usize);
        if units == 0 {
            break; // RFC 4861 §4.6: a zero length is invalid; stop rather than loop
        }
        let (v, m) = match kind {
            ND_OPT_SLL => (s.sll, s.sll_mask),
            ND_OPT_TLL => (s.tll, s.tll_mask),
            _ => ([0; 6], [0; 6]),
        };
        if units == 1 && m != [0; 6] {
            let old: [u8; 6] = get(d, o + 2);
            let new = masked_bytes(old, v, m);
            if new != old {
                // The address starts at an even offset of the message (option start + 2).
                sum = checksum::update_bytes(sum, &old, &new);
                d[o + 2..o + 8].copy_from_slice(&new);
            }
        }
        o += units * 8;
    }
    put16(d, csum_at, sum);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::tests::extracted as packet;

    /// The one's-complement sum over the ICMPv6 message and its pseudo-header is all ones
    /// when the checksum is right.
    fn icmpv6_ok(f: &[u8]) -> bool {
        let l3 = 14;
        let plen = be16(f, l3 + 4) as usize;
        let mut b = Vec::new();
        b.extend_from_slice(&f[l3 + 8..l3 + 40]);
        b.extend_from_slice(&(plen as u32).to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, 58]);
        b.extend_from_slice(&f[l3 + 40..l3 + 40 + plen]);
        checksum::data(&b) == 0xffff
    }

    fn icmp4_ok(f: &[u8]) -> bool {
        checksum::data(&f[34..]) == 0xffff
    }

    fn arp_request() -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[0, 0, 0, 0, 0, 0x11, 0x08, 0x06]);
        f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&[0, 0, 0, 0, 0, 0x11, 10, 0, 0, 11]);
        f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 0, 0, 12]);
        f.resize(60, 0);
        f
    }

    #[test]
    fn an_arp_request_becomes_the_reply_ovn_answers_with() {
        let mut p = packet(&arp_request());
        let s = SetArp {
            sip: [10, 0, 0, 12],
            sip_mask: [0xff; 4],
            tip: [10, 0, 0, 11],
            tip_mask: [0xff; 4],
            op: 2,
            op_mask: 0xff,
            sha: [0, 0, 0, 0, 0, 0x12],
            sha_mask: [0xff; 6],
            tha: [0, 0, 0, 0, 0, 0x11],
            tha_mask: [0xff; 6],
        };
        set_arp(&mut p, &s).unwrap();
        let d = p.data();
        assert_eq!(&d[14 + 6..14 + 8], &[0, 2]);
        assert_eq!(&d[14 + 8..14 + 18], &[0, 0, 0, 0, 0, 0x12, 10, 0, 0, 12]);
        assert_eq!(&d[14 + 18..14 + 28], &[0, 0, 0, 0, 0, 0x11, 10, 0, 0, 11]);
        // Only the masked bits: the low byte of the target address.
        let mut p = packet(&arp_request());
        let s = SetArp {
            tip: [0, 0, 0, 99],
            tip_mask: [0, 0, 0, 0xff],
            ..SetArp::default()
        };
        set_arp(&mut p, &s).unwrap();
        let mut want = arp_request();
        want[14 + ARP_TPA + 3] = 99;
        assert_eq!(p.data(), &want[..]);
        // Not ARP, or cut short: refused, unchanged.
        let mut short = packet(&arp_request()[..30]);
        assert_eq!(set_arp(&mut short, &s), Err(NoArp));
    }

    fn echo_request_v4() -> Vec<u8> {
        let mut f = vec![0, 0, 0, 0, 0, 0x12, 0, 0, 0, 0, 0, 0x11, 8, 0];
        f.extend_from_slice(&[
            0x45, 0, 0, 28, 0, 1, 0, 0, 64, 1, 0, 0, 10, 0, 0, 11, 10, 0, 0, 1,
        ]);
        let sum = !checksum::data(&f[14..34]);
        put16(&mut f, 24, sum);
        f.extend_from_slice(&[8, 0, 0, 0, 0x12, 0x34, 0, 1]);
        let sum = !checksum::data(&f[34..]);
        put16(&mut f, 36, sum);
        f
    }

    #[test]
    fn an_echo_request_becomes_a_reply_with_its_checksum_right() {
        let mut p = packet(&echo_request_v4());
        assert!(icmp4_ok(p.data()));
        let s = SetIcmp {
            v6: false,
            icmp_type: 0,
            type_mask: 0xff,
            code: 0,
            code_mask: 0xff,
        };
        set_icmp(&mut p, &s).unwrap();
        assert_eq!(p.data()[34], 0);
        assert!(icmp4_ok(p.data()));
        // ICMPv6's set on an ICMP packet: the protocol differs.
        let mut p = packet(&echo_request_v4());
        assert_eq!(
            set_icmp(&mut p, &SetIcmp { v6: true, ..s }),
            Err(L4Mismatch)
        );
    }

    /// A neighbour solicitation for `fe80::12` from `fe80::11` with a source link-layer address
    /// option.
    fn solicitation() -> Vec<u8> {
        let mut f = vec![
            0x33, 0x33, 0xff, 0, 0, 0x12, 0, 0, 0, 0, 0, 0x11, 0x86, 0xdd,
        ];
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 32, 58, 255]);
        f.extend_from_slice(&"fe80::11".parse::<Ipv6Addr>().unwrap().octets());
        f.extend_from_slice(&"ff02::1:ff00:12".parse::<Ipv6Addr>().unwrap().octets());
        f.extend_from_slice(&[135, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&"fe80::12".parse::<Ipv6Addr>().unwrap().octets());
        f.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 0x11]);
        let mut b = Vec::new();
        b.extend_from_slice(&f[22..54]);
        b.extend_from_slice(&[0, 0, 0, 32, 0, 0, 0, 58]);
        b.extend_from_slice(&f[54..]);
        let sum = !checksum::data(&b);
        put16(&mut f, 56, sum);
        f
    }

    #[test]
    fn nd_target_and_link_layer_option_are_written_with_the_checksum() {
        let f = solicitation();
        assert!(icmpv6_ok(&f));
        let mut p = packet(&f);
        let s = SetNd {
            target: "fe80::99".parse().unwrap(),
            target_mask: Ipv6Addr::from_bits(u128::MAX),
            sll: [0, 0, 0, 0, 0, 0x77],
            sll_mask: [0xff; 6],
            tll: [0, 0, 0, 0, 0, 0x88],
            tll_mask: [0xff; 6],
        };
        set_nd(&mut p, &s).unwrap();
        let d = p.data();
        assert_eq!(
            &d[62..78],
            &"fe80::99".parse::<Ipv6Addr>().unwrap().octets()
        );
        // The message has a source option only: the tll is nowhere to go.
        assert_eq!(&d[78..86], &[1, 1, 0, 0, 0, 0, 0, 0x77]);
        assert!(icmpv6_ok(d));
        // An option of length zero ends the walk (no loop), the target is still written.
        let mut f = solicitation();
        f[79] = 0;
        let mut p = packet(&f);
        set_nd(&mut p, &s).unwrap();
        assert_eq!(&p.data()[78..86], &[1, 0, 0, 0, 0, 0, 0, 0x11]);
    }

    #[test]
    fn nd_on_an_echo_request_is_refused() {
        let mut f = solicitation();
        f[54] = 128;
        let mut p = packet(&f);
        let s = SetNd {
            target: "fe80::99".parse().unwrap(),
            target_mask: Ipv6Addr::from_bits(u128::MAX),
            sll: [0; 6],
            sll_mask: [0; 6],
            tll: [0; 6],
            tll_mask: [0; 6],
        };
        assert_eq!(set_nd(&mut p, &s), Err(L4Mismatch));
        assert_eq!(p.data(), &f[..]);
    }
}
