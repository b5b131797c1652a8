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
//! ([`complete`]). The headers are found again each time (Ethernet, up to three VLAN tags,
//! IPv4 that is not a fragment or IPv6 with hop-by-hop, routing and destination options
//! headers, then TCP or UDP): a frame whose headers no longer parse so (an MPLS push) is
//! completed before the action that hides them.

use std::net::{Ipv4Addr, Ipv6Addr};

use wire::{IpProtocol, checksum};

use crate::packet::{Batch, Packet, Pool};

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
        for _ in 0..4 {
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

/// Whether `batch` holds a pending frame.
#[inline(never)]
pub fn has_pending(batch: &Batch) -> bool {
    batch.packets().iter().any(|p| p.meta.csum_pending())
}
