//! The `hash` action's value (`hash(l4(basis))`, `hash(sym_l4(basis))`): addresses, IP
//! protocol and ports read from the packet's headers, CRC32C-folded and mixed; IPv4, the
//! common case, in line.

use wire::{IpProtocol, Ipv4Packet, Ipv6Packet};

use crate::packet::Packet;

use super::ip::ipv6_upper;
use super::{IPV4_HLEN, IPV6_HLEN, at, be16};

/// Finishes a CRC-folded hash (murmur3's `fmix32`): CRC32C is linear, the mix spreads it.
#[inline]
pub(super) fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// The datapath hash of `hash(l4(basis))` / `hash(sym_l4(basis))`: addresses, IP protocol and
/// ports (TCP, UDP, SCTP) read from the packet's headers. The symmetric variant folds source and
/// destination together (XOR, as OVS's `flow_hash_symmetric_l3l4()`), so both directions of a
/// connection hash alike. A non-IP packet hashes to a value of `basis` alone. Like OVS's
/// userspace `hash` action, the value is not the kernel datapath's.
#[inline]
pub fn dp_hash_l4(pkt: &Packet, sym: bool, basis: u32) -> u32 {
    match hash_l4_ipv4(pkt, sym, basis, false).map(|(h, _)| h) {
        Some(h) => fmix32(h),
        None => dp_hash_l4_general(pkt, sym, basis),
    }
}

/// [`dp_hash_l4`] of an IPv4 packet, in line, before its final mix: [`fmix32`] of it is the
/// general routine's value. `whole`: the ports count only in a packet that is not a fragment
/// at all (not even the first, which has them), so that every fragment of a datagram hashes
/// alike ([`entropy_hash`](super::entropy_hash)).
#[inline(always)]
pub(super) fn hash_l4_ipv4(pkt: &Packet, sym: bool, basis: u32, whole: bool) -> Option<(u32, u8)> {
    use flow::hash::crc32c_u64;
    let d = pkt.data();
    let l3 = at(pkt.meta.l3, d.len(), IPV4_HLEN)?;
    let ip = d[l3..].first_chunk::<IPV4_HLEN>()?;
    if ip[0] >> 4 != 4 {
        return None;
    }
    let s = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
    let t = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
    let w = if sym {
        u64::from(s ^ t)
    } else {
        u64::from(s) << 32 | u64::from(t)
    };
    let h = crc32c_u64(basis, w);
    let proto = ip[9];
    let frag = u16::from_be_bytes([ip[6], ip[7]]) & if whole { 0x3fff } else { 0x1fff };
    let ports = match at(pkt.meta.l4, d.len(), 4) {
        Some(o) if frag == 0 && matches!(proto, 6 | 17 | 132) => ports_word(d, o, sym),
        _ => 0,
    };
    Some((crc32c_u64(h, u64::from(proto) << 32 | ports), ip[1]))
}

/// [`dp_hash_l4`]'s transport word: the ports at `o`, folded together when `sym`.
#[inline(always)]
fn ports_word(d: &[u8], o: usize, sym: bool) -> u64 {
    let (s, t) = (be16(d, o), be16(d, o + 2));
    if sym {
        u64::from(s ^ t)
    } else {
        u64::from(s) << 16 | u64::from(t)
    }
}

/// [`dp_hash_l4`] of any packet, out of line.
#[inline(never)]
fn dp_hash_l4_general(pkt: &Packet, sym: bool, basis: u32) -> u32 {
    use flow::hash::crc32c_u64;
    let d = pkt.data();
    let mut h = basis;
    let l4 = pkt.meta.l4;
    let Some(l3) = at(pkt.meta.l3, d.len(), IPV4_HLEN) else {
        return fmix32(h);
    };
    // The transport protocol, and whether the header at `l4` is that protocol's.
    let (proto, has_l4) = match d[l3] >> 4 {
        4 => {
            let ip = Ipv4Packet::new_unchecked(&d[l3..]);
            let (s, t) = (ip.src_addr().to_bits(), ip.dst_addr().to_bits());
            let w = if sym {
                u64::from(s ^ t)
            } else {
                u64::from(s) << 32 | u64::from(t)
            };
            h = crc32c_u64(h, w);
            (ip.protocol(), ip.frag_offset() == 0)
        }
        6 if l3 + IPV6_HLEN <= d.len() => {
            let ip = Ipv6Packet::new_unchecked(&d[l3..]);
            let (s, t) = (ip.src_addr().to_bits(), ip.dst_addr().to_bits());
            if sym {
                let x = s ^ t;
                h = crc32c_u64(h, (x >> 64) as u64);
                h = crc32c_u64(h, x as u64);
            } else {
                for w in [s >> 64, s, t >> 64, t] {
                    h = crc32c_u64(h, w as u64);
                }
            }
            match at(l4, d.len(), 0).and_then(|o| ipv6_upper(d, l3, o)) {
                Some((p, _)) => (p, true),
                None => (ip.next_header(), false),
            }
        }
        _ => return fmix32(h),
    };
    let ports = match (proto, at(l4, d.len(), 4)) {
        (IpProtocol::TCP | IpProtocol::UDP | IpProtocol::SCTP, Some(o)) if has_l4 => {
            ports_word(d, o, sym)
        }
        _ => 0,
    };
    h = crc32c_u64(h, u64::from(proto.0) << 32 | ports);
    fmix32(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use wire::Ipv6Addr;

    use super::super::ETH_HLEN;
    use super::super::tests::{MACS, extracted, frame_v4, frame_v6, v4};

    #[test]
    fn dp_hash_symmetry() {
        let (a, b) = (v4(0x0a00_0001), v4(0x0a00_0002));
        let fwd = extracted(&frame_v4(true, a, b, 0, 64, (1000, 80), b"", true));
        let rev = extracted(&frame_v4(true, b, a, 0, 64, (80, 1000), b"", true));
        let other = extracted(&frame_v4(true, a, b, 0, 64, (1001, 80), b"", true));
        assert_eq!(dp_hash_l4(&fwd, true, 7), dp_hash_l4(&rev, true, 7));
        assert_ne!(dp_hash_l4(&fwd, false, 7), dp_hash_l4(&rev, false, 7));
        assert_ne!(dp_hash_l4(&fwd, false, 7), dp_hash_l4(&other, false, 7));
        assert_ne!(dp_hash_l4(&fwd, false, 7), dp_hash_l4(&fwd, false, 8));
        // Payload, TTL and MACs are not part of the 5-tuple.
        let same = extracted(&frame_v4(true, a, b, 4, 3, (1000, 80), b"xyz", true));
        assert_eq!(dp_hash_l4(&fwd, false, 7), dp_hash_l4(&same, false, 7));

        let (a6, b6) = (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
        let f6 = extracted(&frame_v6(false, a6, b6, (5, 6), b""));
        let r6 = extracted(&frame_v6(false, b6, a6, (6, 5), b""));
        assert_eq!(dp_hash_l4(&f6, true, 0), dp_hash_l4(&r6, true, 0));
        assert_ne!(dp_hash_l4(&f6, false, 0), dp_hash_l4(&r6, false, 0));

        // Not IP: the basis alone.
        let arp = extracted(&[MACS.as_slice(), &[0x08, 0x06], &[0; 28]].concat());
        let other_arp = extracted(&[MACS.as_slice(), &[0x08, 0x06], &[1; 28]].concat());
        assert_eq!(dp_hash_l4(&arp, false, 3), dp_hash_l4(&other_arp, false, 3));
    }

    proptest! {
        /// The in-line IPv4 hash is the general routine's, for any IPv4 header the
        /// extractor took (options, fragments, any protocol, runts).
        #[test]
        fn the_ipv4_hash_in_line_is_the_general_one(
            tcp: bool, src: u32, dst: u32, ports: (u16, u16), sym: bool, basis: u32,
            proto in prop_oneof![Just(None), any::<u8>().prop_map(Some)],
            frag in prop_oneof![Just(0u16), Just(0x4000), Just(0x2000), Just(0x1000), Just(1), any::<u16>()],
            cut in 0usize..64,
        ) {
            let mut f = frame_v4(tcp, v4(src), v4(dst), 0, 64, ports, b"payload", true);
            if let Some(p) = proto {
                f[ETH_HLEN + 9] = p;
            }
            f[ETH_HLEN + 6..ETH_HLEN + 8].copy_from_slice(&frag.to_be_bytes());
            let p = extracted(&f);
            let mut short = extracted(&f);
            short.truncate(f.len().saturating_sub(cut).max(1));
            for p in [p, short] {
                let fast = hash_l4_ipv4(&p, sym, basis, false).map(|(h, _)| fmix32(h));
                prop_assert!(fast.is_none() || fast == Some(dp_hash_l4_general(&p, sym, basis)));
            }
        }
    }
}
