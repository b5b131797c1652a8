//! Frames whose TCP or UDP checksum is pending: received with a partial checksum
//! (virtio-net `NEEDS_CSUM`, Linux's `CHECKSUM_PARTIAL`) from a port that hands such frames
//! over, and marked so ([`PacketMeta::csum_pending`](crate::packet::PacketMeta::csum_pending))
//! instead of completed in software at receive.
//!
//! As for a super-frame's ([`crate::gso`]), the checksum field of a pending frame is not
//! maintained inside the switch: header rewrites (`set_field`, NAT) may leave anything in
//! it. Whoever needs the frame with its checksum recomputes it from the headers the frame
//! has then: a port that hands partial checksums on writes the pseudo-header sum there
//! ([`prepare_partial`]) and says where the field is; every other consumer completes it
//! ([`complete`]). The headers are found again each time (Ethernet, up to [`MAX_TAGS`] VLAN tags,
//! IPv4 that is not a fragment or IPv6 with hop-by-hop, routing and destination options
//! headers, then TCP or UDP): a frame whose headers no longer parse so (an MPLS push) is
//! completed before the action that hides them.

use std::net::{Ipv4Addr, Ipv6Addr};

use wire::{IpProtocol, checksum};

use crate::packet::{Batch, Packet, Pool};

/// The most VLAN tags in front of the IP header of a frame whose pending checksum is found
/// again ([`L4Csum::find`]); a tag pushed onto a frame that has this many completes its
/// checksum first ([`complete_before_tag`]).
pub const MAX_TAGS: usize = 3;

/// Where a frame's TCP or UDP checksum is and what it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L4Csum {
    /// Offset of the IP header.
    pub l3: usize,
    /// Offset of the TCP or UDP header (where the checksum starts: `csum_start`).
    pub l4: usize,
    /// Where the IP packet ends (before any Ethernet padding).
    pub end: usize,
    /// Offset of the checksum field in the L4 header (`csum_offset`): 16 for TCP, 6 for UDP.
    pub offset: usize,
    /// IPv6 (else IPv4).
    pub ipv6: bool,
}

impl L4Csum {
    /// The TCP or UDP header of the frame `f`, whose L3 header is of `packet_type` (0:
    /// Ethernet, the frame starts at its Ethernet header; else `(1 << 16) | ethertype`, the
    /// frame starts at its L3 header). `None` for anything else (a fragment, another
    /// protocol, a header that does not fit).
    pub fn find(f: &[u8], packet_type: u32) -> Option<L4Csum> {
        if packet_type != 0 {
            return l4_of(f, 0, packet_type as u16);
        }
        let mut at = 12;
        for _ in 0..=MAX_TAGS {
            let t = f.get(at..at + 2)?;
            let ty = u16::from_be_bytes([t[0], t[1]]);
            if ty == 0x8100 || ty == 0x88a8 {
                at += 4;
                continue;
            }
            return l4_of(f, at + 2, ty);
        }
        None
    }

    /// The pseudo-header sum (folded, not inverted) of the frame `f` so found.
    pub fn pseudo(&self, f: &[u8]) -> u16 {
        let proto = if self.offset == 16 {
            IpProtocol::TCP
        } else {
            IpProtocol::UDP
        };
        let len = self.end - self.l4;
        let (l3, f) = (self.l3, f);
        if self.ipv6 {
            let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&f[o..o + 16]).expect("16"));
            checksum::pseudo_header_v6(&a(l3 + 8), &a(l3 + 24), proto, len as u32)
        } else {
            let a = |o: usize| Ipv4Addr::from(<[u8; 4]>::try_from(&f[o..o + 4]).expect("4"));
            checksum::pseudo_header_v4(&a(l3 + 12), &a(l3 + 16), proto, len as u16)
        }
    }
}

/// The L4 header of an IPv4 or IPv6 packet at `l3` of `f` (ethertype `ty`).
fn l4_of(f: &[u8], l3: usize, ty: u16) -> Option<L4Csum> {
    let (l4, end, proto, ipv6) = match ty {
        0x0800 => {
            let h = f.get(l3..l3.checked_add(20)?)?;
            let ihl = usize::from(h[0] & 0xf) * 4;
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            // A fragment never carries a partial checksum.
            if h[0] >> 4 != 4 || ihl < 20 || u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0 {
                return None;
            }
            (l3 + ihl, l3 + total, h[9], false)
        }
        0x86dd => {
            let h = f.get(l3..l3.checked_add(40)?)?;
            if h[0] >> 4 != 6 {
                return None;
            }
            let plen = usize::from(u16::from_be_bytes([h[4], h[5]]));
            let (mut l4, mut next) = (l3 + 40, h[6]);
            for _ in 0..4 {
                if !matches!(next, 0 | 43 | 60) {
                    break;
                }
                let e = f.get(l4..l4.checked_add(2)?)?;
                next = e[0];
                l4 += (usize::from(e[1]) + 1) * 8;
            }
            (l4, l3 + 40 + plen, next, true)
        }
        _ => return None,
    };
    let offset = match proto {
        6 => 16,
        17 => 6,
        _ => return None,
    };
    if end > f.len() || l4 + offset + 2 > end {
        return None;
    }
    Some(L4Csum {
        l3,
        l4,
        end,
        offset,
        ipv6,
    })
}

/// Makes pending frame `p` ready for a device that completes its checksum: the field set to
/// the pseudo-header sum of its current headers. Returns where the checksum is, for the
/// device's descriptor (`csum_start` = `l4`, `csum_offset` = `offset`); `None` (frame
/// untouched) when the headers do not parse: the caller then completes it ([`complete`]
/// drops the mark) or sends it as it is.
pub fn prepare_partial(p: &mut Packet) -> Option<L4Csum> {
    let at = L4Csum::find(p.data(), p.meta.packet_type)?;
    let f = p.data_mut();
    let s = at.pseudo(f);
    f[at.l4 + at.offset..at.l4 + at.offset + 2].copy_from_slice(&s.to_be_bytes());
    Some(at)
}

/// Completes the pending checksum of `p` in software from its current headers and drops
/// the mark: a sum of 0 is sent as 0xffff (Linux's `skb_checksum_help`). A frame whose
/// headers do not parse is left as it is (its checksum cannot be found), the mark dropped
/// all the same. Returns whether it completed it.
pub fn complete(p: &mut Packet) -> bool {
    p.meta.set_csum_pending(false);
    let Some(at) = L4Csum::find(p.data(), p.meta.packet_type) else {
        return false;
    };
    let f = p.data_mut();
    let field = at.l4 + at.offset;
    f[field..field + 2].fill(0);
    let c = match !checksum::combine(&[at.pseudo(f), checksum::data(&f[at.l4..at.end])]) {
        0 => 0xffff,
        c => c,
    };
    f[field..field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Completes every pending frame of `batch` ([`complete`]), a lent one brought in whole
/// first. Returns how many it completed.
#[inline(never)]
pub fn complete_batch(batch: &mut Batch, pool: &mut Pool) -> u64 {
    let mut n = 0;
    for p in batch.packets_mut() {
        if p.meta.csum_pending() {
            pool.materialize(p);
            n += u64::from(complete(p));
        }
    }
    n
}

/// Before a VLAN push onto `batch`: completes the pending frames that already carry
/// [`MAX_TAGS`] tags, whose headers would no longer be found behind one more. Returns how
/// many it completed.
#[inline(never)]
pub fn complete_before_tag(batch: &mut Batch, pool: &mut Pool) -> u64 {
    let mut n = 0;
    for p in batch.packets_mut() {
        if p.meta.csum_pending() && p.meta.packet_type == 0 && tags(p.data()) >= MAX_TAGS {
            pool.materialize(p);
            n += u64::from(complete(p));
        }
    }
    n
}

/// How many VLAN tags (802.1Q, 802.1ad) Ethernet frame `f` carries, up to one more than
/// [`MAX_TAGS`].
fn tags(f: &[u8]) -> usize {
    (0..=MAX_TAGS)
        .take_while(|k| {
            let at = 12 + 4 * k;
            matches!(f.get(at..at + 2), Some([0x81, 0x00] | [0x88, 0xa8]))
        })
        .count()
}

/// Whether `batch` holds a pending frame.
#[inline(never)]
pub fn has_pending(batch: &Batch) -> bool {
    batch.packets().iter().any(|p| p.meta.csum_pending())
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

    fn field(f: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([f[at], f[at + 1]])
    }

    // Vectors computed independently (Python, RFC 1071 sum over the pseudo-header and the
    // segment), as in netdev's `csum` tests.

    /// UDP/IPv4 192.168.0.1:1234 -> 192.168.0.199:53, 13 bytes of payload (odd); checksum
    /// 0xe5b4, pseudo-header sum 0x823f.
    const V4_UDP: &str = "020000000002020000000001080045000029000040004011b8abc0a80001c0\
                          a800c704d200350015000068656c6c6f20776f726c642101";
    /// TCP/IPv6 fd00::1:80 -> fd00::2:443 behind a hop-by-hop header, 3 bytes of data;
    /// checksum 0xd539, pseudo-header sum 0xfa21.
    const V6_TCP: &str = "02000000000202000000000186dd60000000001f0040fd0000000000000000\
                          00000000000001fd00000000000000000000000000000206000104000000000050\
                          01bb010203040a0b0c0d5018ffff00000000616263";
    /// UDP/IPv4 10.0.0.1:7 -> 10.0.0.2:9 whose checksum computes to 0: sent as 0xffff.
    const V4_UDP_ZERO: &str = "02000000000202000000000108004500002000000000401166cb0a000001\
                               0a00000200070009000c000071497a7a";

    /// A pending packet of `frame` with garbage in its checksum field at `at`.
    fn pending(frame: &str, at: usize) -> Packet {
        let mut f = hex(frame);
        f[at..at + 2].copy_from_slice(&[0xde, 0xad]);
        let mut p = Packet::from_slice(&f);
        p.meta.set_csum_pending(true);
        p
    }

    #[test]
    fn completes_known_vectors_whatever_the_field_held() {
        for (frame, at, want) in [
            (V4_UDP, 40, 0xe5b4),
            (V6_TCP, 78, 0xd539),
            (V4_UDP_ZERO, 40, 0xffff),
        ] {
            let mut p = pending(frame, at);
            assert!(complete(&mut p));
            assert!(!p.meta.csum_pending());
            assert_eq!(field(p.data(), at), want, "{frame}");
        }
    }

    #[test]
    fn prepares_the_pseudo_header_sum_a_device_completes() {
        for (frame, at, pseudo, start, offset) in
            [(V4_UDP, 40, 0x823f, 34, 6), (V6_TCP, 78, 0xfa21, 62, 16)]
        {
            let mut p = pending(frame, at);
            let l4 = prepare_partial(&mut p).unwrap();
            assert_eq!((l4.l4, l4.offset), (start, offset));
            assert_eq!(field(p.data(), at), pseudo);
            assert!(
                p.meta.csum_pending(),
                "still pending: a device completes it"
            );
        }
    }

    #[test]
    fn an_l3_packet_and_ethernet_padding_and_tags_are_handled() {
        // Behind 802.1ad and 802.1Q tags, with Ethernet padding after the IP packet.
        let mut f = hex(V4_UDP);
        f.splice(12..12, [0x88, 0xa8, 0, 7, 0x81, 0x00, 0, 9]);
        f.extend_from_slice(&[0xaa; 5]);
        let mut p = Packet::from_slice(&f);
        assert!(complete(&mut p));
        assert_eq!(field(p.data(), 48), 0xe5b4);
        // The same IP packet with no Ethernet header (packet_type (1, 0x0800)).
        let mut p = Packet::from_slice(&hex(V4_UDP)[14..]);
        p.meta.packet_type = (1 << 16) | 0x0800;
        assert!(complete(&mut p));
        assert_eq!(field(p.data(), 26), 0xe5b4);
    }

    #[test]
    fn what_does_not_parse_is_left_alone_and_no_longer_pending() {
        let mut cases: Vec<Vec<u8>> = vec![vec![], vec![0; 10]];
        let mut frag = hex(V4_UDP);
        frag[20] = 0x20;
        cases.push(frag);
        let mut icmp = hex(V4_UDP);
        icmp[23] = 1;
        cases.push(icmp);
        let mut v5 = hex(V6_TCP);
        v5[14] = 0x50;
        cases.push(v5);
        let v6 = hex(V6_TCP);
        for n in [20, 54, 55, 60, 75, 79] {
            cases.push(v6[..n].to_vec());
        }
        let mut long = hex(V4_UDP);
        long[16..18].copy_from_slice(&[0xff, 0xff]);
        cases.push(long);
        let mut tags = vec![0u8; 12];
        tags.extend_from_slice(&[0x81, 0, 0, 1].repeat(5));
        cases.push(tags);
        for f in cases {
            let mut p = Packet::from_slice(&f);
            p.meta.set_csum_pending(true);
            assert_eq!(prepare_partial(&mut p), None, "{f:x?}");
            assert!(!complete(&mut p), "{f:x?}");
            assert!(!p.meta.csum_pending());
            assert_eq!(p.data(), &f[..]);
        }
    }
}
