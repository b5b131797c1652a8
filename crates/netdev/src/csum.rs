//! Software completion of partial (offloaded) checksums, as a NIC does for
//! `CHECKSUM_PARTIAL` (include/linux/skbuff.h; virtio 1.x 5.1.6.2): the stack has put the
//! folded (not inverted) pseudo-header sum in the checksum field, and the completion is the
//! complement of the ones' complement sum from `csum_start` to the end of the packet, stored
//! at `csum_start + csum_offset`, 0 sent as 0xffff (`skb_checksum_help`: `csum_fold(csum) ?:
//! CSUM_MANGLED_0`).

use wire::checksum;

/// Completes the partial checksum of `frame` whose summing starts at `start` and whose
/// field is at `start + offset`. False (and `frame` untouched) when the field does not
/// lie inside the frame.
pub(crate) fn complete(frame: &mut [u8], start: usize, offset: usize) -> bool {
    let Some(at) = start.checked_add(offset) else {
        return false;
    };
    let Some(field) = frame.get(at..at.saturating_add(2)) else {
        return false;
    };
    if field.len() != 2 {
        return false;
    }
    // `start <= at < frame.len()`, so the slice is in range.
    let c = match !checksum::data(&frame[start..]) {
        0 => 0xffff,
        c => c,
    };
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Where an IPv4 or IPv6 packet at `l3` of `frame` has its TCP or UDP header (after
/// IPv6 hop-by-hop, routing and destination options headers), where the IP packet ends
/// (before any Ethernet padding), and the checksum field's offset in the L4 header.
fn l4_of(frame: &[u8], l3: usize, ty: u16) -> Option<(usize, usize, usize)> {
    let (l4, end, proto) = match ty {
        0x0800 => {
            let h = frame.get(l3..l3.checked_add(20)?)?;
            let ihl = usize::from(h[0] & 0xf) * 4;
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            // A fragment never carries a partial checksum.
            if h[0] >> 4 != 4 || ihl < 20 || u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0 {
                return None;
            }
            (l3 + ihl, l3 + total, h[9])
        }
        0x86dd => {
            let h = frame.get(l3..l3.checked_add(40)?)?;
            let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
            let (mut l4, mut next) = (l3 + 40, h[6]);
            for _ in 0..4 {
                if !matches!(next, 0 | 43 | 60) {
                    break;
                }
                let e = frame.get(l4..l4.checked_add(2)?)?;
                next = e[0];
                l4 += (usize::from(e[1]) + 1) * 8;
            }
            (l4, l3 + 40 + plen, next)
        }
        _ => return None,
    };
    if end > frame.len() || l4 > end {
        return None;
    }
    match proto {
        6 => Some((l4, end, 16)),
        17 => Some((l4, end, 6)),
        _ => None,
    }
}

/// Finds the TCP or UDP header of an Ethernet frame (after up to two VLAN tags) over
/// IPv4 or IPv6 and completes its partial checksum; false for anything else (a fragment,
/// another protocol, a header that does not fit). The L4 segment ends where the IP header
/// says (not at Ethernet padding).
pub(crate) fn complete_l4(frame: &mut [u8]) -> bool {
    let mut l3 = 12;
    for _ in 0..3 {
        let Some(t) = frame.get(l3..l3 + 2) else {
            return false;
        };
        let ty = u16::from_be_bytes([t[0], t[1]]);
        if ty == 0x8100 || ty == 0x88a8 {
            l3 += 4;
            continue;
        }
        let Some((l4, end, ofs)) = l4_of(frame, l3 + 2, ty) else {
            return false;
        };
        return complete(&mut frame[..end], l4, ofs);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// `frame` with `partial` in its checksum field at `at`: what the stack hands over.
    fn partial(frame: &str, at: usize, partial: u16) -> Vec<u8> {
        let mut f = hex(frame);
        f[at..at + 2].copy_from_slice(&partial.to_be_bytes());
        f
    }

    fn field(f: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([f[at], f[at + 1]])
    }

    // Vectors computed independently (Python, RFC 1071 sum over the pseudo-header and
    // the segment); the partial value is the folded pseudo-header sum.

    /// UDP/IPv4 192.168.0.1:1234 -> 192.168.0.199:53, 13 bytes of payload (odd).
    const V4_UDP: &str = "020000000002020000000001080045000029000040004011b8abc0a80001c0\
                          a800c704d200350015000068656c6c6f20776f726c642101";
    /// TCP/IPv6 fd00::1:80 -> fd00::2:443 behind a hop-by-hop header, 3 bytes of data.
    const V6_TCP: &str = "02000000000202000000000186dd60000000001f0040fd0000000000000000\
                          00000000000001fd00000000000000000000000000000206000104000000000050\
                          01bb010203040a0b0c0d5018ffff00000000616263";
    /// UDP/IPv4 10.0.0.1:7 -> 10.0.0.2:9 whose checksum computes to 0: sent as 0xffff.
    const V4_UDP_ZERO: &str = "02000000000202000000000108004500002000000000401166cb0a000001\
                               0a00000200070009000c000071497a7a";

    #[test]
    fn completes_known_vectors() {
        let mut f = partial(V4_UDP, 40, 0x823f);
        assert!(complete_l4(&mut f));
        assert_eq!(field(&f, 40), 0xe5b4);
        // Through the virtio-net form: csum_start 34, csum_offset 6.
        let mut g = partial(V4_UDP, 40, 0x823f);
        assert!(complete(&mut g, 34, 6));
        assert_eq!(f, g);

        let mut f = partial(V6_TCP, 78, 0xfa21);
        assert!(complete_l4(&mut f));
        assert_eq!(field(&f, 78), 0xd539);

        let mut f = partial(V4_UDP_ZERO, 40, 0x1420);
        assert!(complete_l4(&mut f));
        assert_eq!(field(&f, 40), 0xffff);
    }

    #[test]
    fn ethernet_padding_and_vlan_tags_are_handled() {
        // Padding after the IP packet is not summed.
        let mut f = partial(V4_UDP, 40, 0x823f);
        f.extend_from_slice(&[0xaa; 5]);
        assert!(complete_l4(&mut f));
        assert_eq!(field(&f, 40), 0xe5b4);
        // Behind an 802.1ad and an 802.1Q tag.
        let mut f = partial(V4_UDP, 40, 0x823f);
        f.splice(12..12, [0x88, 0xa8, 0, 7, 0x81, 0x00, 0, 9]);
        assert!(complete_l4(&mut f));
        assert_eq!(field(&f, 48), 0xe5b4);
    }

    #[test]
    fn refuses_what_it_cannot_parse_without_panicking() {
        assert!(!complete_l4(&mut []));
        assert!(!complete_l4(&mut [0u8; 10]));
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!complete_l4(&mut arp));
        // IHL 15 and a total length beyond the frame; IHL below 5.
        let mut bad = vec![0u8; 40];
        bad[12..14].copy_from_slice(&[0x08, 0x00]);
        bad[14] = 0x4f;
        bad[16..18].copy_from_slice(&[0xff, 0xff]);
        bad[23] = 6;
        assert!(!complete_l4(&mut bad));
        let mut f = hex(V4_UDP);
        f[14] = 0x42;
        assert!(!complete_l4(&mut f));
        // A fragment.
        let mut f = hex(V4_UDP);
        f[20] = 0x20;
        assert!(!complete_l4(&mut f));
        // Truncated IPv6 and its extension header.
        let f = hex(V6_TCP);
        for n in [20, 54, 55, 60, 80] {
            assert!(!complete_l4(&mut f[..n].to_vec()), "{n}");
        }
        // Tags only.
        let mut tags = vec![0u8; 12];
        tags.extend_from_slice(&[0x81, 0, 0, 1].repeat(4));
        assert!(!complete_l4(&mut tags));
        // Offsets from a virtio-net header that do not fit.
        let mut b = [0u8; 8];
        assert!(!complete(&mut b, 4, 3));
        assert!(!complete(&mut b, 9, 0));
        assert!(!complete(&mut b, usize::MAX, 1));
        assert!(!complete(&mut b, 1, usize::MAX));
        assert!(!complete(&mut b, 65535, 65535));
        assert_eq!(b, [0; 8]);
        assert!(complete(&mut b, 0, 6));
        assert_eq!(b, [0, 0, 0, 0, 0, 0, 0xff, 0xff]);
    }

    #[test]
    fn any_frame_is_handled_without_panicking() {
        let mut seed = 0x1234_5678u32;
        for len in 0..200 {
            let mut f: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    seed as u8
                })
                .collect();
            if len >= 14 {
                let ty: [u8; 2] = [[0x08, 0x00], [0x86, 0xdd], [0x81, 0x00]][len % 3];
                f[12..14].copy_from_slice(&ty);
            }
            complete_l4(&mut f);
            complete(&mut f, len / 3, len / 2);
        }
    }
}
