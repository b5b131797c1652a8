//! NAT's rewrite of an IPv4 TCP or UDP packet in one pass: the translated source and/or
//! destination address and port written, and both checksums updated together (RFC 1624
//! eqn. 3 over every changed word: the IPv4 header's over the addresses, the transport's over
//! the addresses, through its pseudo-header, and the ports). The same result as `set_ipv4`
//! then `set_l4` with full masks (a test holds them equal), for the packets conntrack
//! translates most, at a fraction of their work: no masks to apply, no header views, one
//! checksum fold each.

use crate::packet::Packet;

use super::{IPV4_HLEN, TCP_HLEN, UDP_HLEN, at};

/// The complement sum of replacing the 32-bit word `old` by `new` (RFC 1624: `~m + m'` for
/// each of its two 16-bit halves).
#[inline(always)]
fn delta32(old: u32, new: u32) -> u64 {
    u64::from(!(old >> 16) as u16)
        + u64::from(!old as u16)
        + u64::from((new >> 16) as u16)
        + u64::from(new as u16)
}

/// The checksum `c` with the complement sum `delta` of its changed words applied
/// (`~(~c + delta)`, folded: `delta` sums at most ten 16-bit words, so two folds suffice).
#[inline(always)]
fn apply(c: u16, delta: u64) -> u16 {
    let mut acc = u64::from(!c) + delta;
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    !(acc as u16)
}

#[inline(always)]
fn get16<const N: usize>(h: &[u8; N], at: usize) -> u16 {
    u16::from_be_bytes([h[at], h[at + 1]])
}

#[inline(always)]
fn set16<const N: usize>(h: &mut [u8; N], at: usize, v: u16) {
    [h[at], h[at + 1]] = v.to_be_bytes();
}

#[inline(always)]
fn get32<const N: usize>(h: &[u8; N], at: usize) -> u32 {
    u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]])
}

/// Rewrites the IPv4 TCP or UDP packet's source to `src` and/or destination to `dst`
/// (address, port; `None`: unchanged) with its IPv4 header checksum and its transport
/// checksum updated (a UDP checksum of 0, "none", stays 0; a computed 0 is sent as 0xffff).
/// `None`, with the packet untouched, when it is not such a packet with both headers whole
/// (another version or protocol, a later fragment, a frame cut short): the caller takes the
/// general rewrites then.
#[inline]
pub(crate) fn nat_ipv4_l4(
    pkt: &mut Packet,
    src: Option<(u32, u16)>,
    dst: Option<(u32, u16)>,
) -> Option<()> {
    let len = pkt.len();
    let l3 = at(pkt.meta.l3, len, IPV4_HLEN)?;
    let l4 = at(pkt.meta.l4, len, UDP_HLEN)?;
    if l4 < l3 + IPV4_HLEN {
        return None;
    }
    let (head, tail) = pkt.data_mut().split_at_mut(l4);
    let ip: &mut [u8; IPV4_HLEN] = (&mut head[l3..l3 + IPV4_HLEN]).try_into().ok()?;
    // Version 4, no fragment offset (a later fragment carries no transport header).
    if ip[0] >> 4 != 4 || get16(ip, 6) & 0x1fff != 0 {
        return None;
    }
    match ip[9] {
        6 => {
            let tcp: &mut [u8; TCP_HLEN] = tail.get_mut(..TCP_HLEN)?.try_into().ok()?;
            rewrite::<TCP_HLEN, 16>(ip, tcp, src, dst);
        }
        17 => {
            let udp: &mut [u8; UDP_HLEN] = tail.get_mut(..UDP_HLEN)?.try_into().ok()?;
            rewrite::<UDP_HLEN, 6>(ip, udp, src, dst);
        }
        _ => return None,
    }
    Some(())
}

/// One side's address (at `addr_at` in the IPv4 header) and port (at `port_at` in the
/// transport header) written, and the complement sums of the change added to the IPv4
/// header's (`ip_delta`) and the transport checksum's (`l4_delta`).
#[inline(always)]
fn rewrite_side<const N: usize>(
    ip: &mut [u8; IPV4_HLEN],
    l4h: &mut [u8; N],
    (addr_at, port_at): (usize, usize),
    (addr, port): (u32, u16),
    ip_delta: &mut u64,
    l4_delta: &mut u64,
) {
    let a = delta32(get32(ip, addr_at), addr);
    *ip_delta += a;
    *l4_delta += a + u64::from(!get16(l4h, port_at)) + u64::from(port);
    [
        ip[addr_at],
        ip[addr_at + 1],
        ip[addr_at + 2],
        ip[addr_at + 3],
    ] = addr.to_be_bytes();
    set16(l4h, port_at, port);
}

/// Writes the addresses and ports and updates both checksums (`CSUM`: the transport
/// checksum's offset in the transport header `l4h`, of `N` bytes: UDP's 8 or TCP's 20).
#[inline(always)]
fn rewrite<const N: usize, const CSUM: usize>(
    ip: &mut [u8; IPV4_HLEN],
    l4h: &mut [u8; N],
    src: Option<(u32, u16)>,
    dst: Option<(u32, u16)>,
) {
    let udp = N == UDP_HLEN;
    let (mut ip_delta, mut l4_delta) = (0u64, 0u64);
    if let Some(to) = src {
        rewrite_side(ip, l4h, (12, 0), to, &mut ip_delta, &mut l4_delta);
    }
    if let Some(to) = dst {
        rewrite_side(ip, l4h, (16, 2), to, &mut ip_delta, &mut l4_delta);
    }
    let hc = apply(get16(ip, 10), ip_delta);
    set16(ip, 10, hc);
    let old = get16(l4h, CSUM);
    if !(udp && old == 0) {
        let new = apply(old, l4_delta);
        set16(l4h, CSUM, if udp && new == 0 { 0xffff } else { new });
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use wire::Ipv4Addr;

    use super::super::tests::{extracted, frame_v4};
    use super::*;

    /// The general rewrites with full masks: what NAT does for the other packets.
    fn general(p: &mut Packet, tcp: bool, src: Option<(u32, u16)>, dst: Option<(u32, u16)>) {
        let wide = |x: Option<(u32, u16)>| {
            x.map(|(a, port)| {
                let mut w = [0u8; 16];
                w[..4].copy_from_slice(&a.to_be_bytes());
                (w, port)
            })
        };
        let rw = conntrack::NatRewrite {
            src: wide(src),
            dst: wide(dst),
            ..Default::default()
        };
        let t = conntrack::Tuple {
            proto: if tcp { 6 } else { 17 },
            ..Default::default()
        };
        assert!(crate::ct::nat_general(p, &rw, false, &t, true));
    }

    proptest! {
        #[test]
        fn one_pass_equals_the_general_rewrites(
            tcp in any::<bool>(),
            udp_csum in any::<bool>(),
            (sa, da) in (any::<u32>(), any::<u32>()),
            (sp, dp) in (any::<u16>(), any::<u16>()),
            src in proptest::option::of((any::<u32>(), any::<u16>())),
            dst in proptest::option::of((any::<u32>(), any::<u16>())),
            payload in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let frame = frame_v4(
                tcp,
                Ipv4Addr::from_bits(sa),
                Ipv4Addr::from_bits(da),
                0,
                64,
                (sp, dp),
                &payload,
                udp_csum,
            );
            let mut want = extracted(&frame);
            general(&mut want, tcp, src, dst);
            let mut got = extracted(&frame);
            prop_assert_eq!(nat_ipv4_l4(&mut got, src, dst), Some(()));
            prop_assert_eq!(got.data(), want.data());
        }
    }

    #[test]
    fn other_packets_are_left_to_the_general_rewrites() {
        let frame = frame_v4(
            true,
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            0,
            64,
            (1, 2),
            &[],
            true,
        );
        // A later fragment: offset 1 (8 bytes).
        let mut f = frame.clone();
        f[14 + 7] = 1;
        let mut p = extracted(&frame);
        p.data_mut()[14 + 7] = 1;
        assert_eq!(nat_ipv4_l4(&mut p, Some((1, 1)), None), None);
        assert_eq!(p.data(), &f[..]);
        // ICMP.
        let mut p = extracted(&frame);
        p.data_mut()[14 + 9] = 1;
        assert_eq!(nat_ipv4_l4(&mut p, Some((1, 1)), None), None);
        // Cut short: the TCP header incomplete.
        let mut p = extracted(&frame[..14 + 20 + 10]);
        assert_eq!(nat_ipv4_l4(&mut p, None, Some((1, 1))), None);
    }
}
