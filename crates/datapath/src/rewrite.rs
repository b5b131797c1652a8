//! Header rewrites of the datapath actions, executed in place on a [`Packet`].
//!
//! The semantics are those of OVS's `odp_execute_actions()` (`lib/odp-execute.c`, with
//! `lib/packets.c` doing the work): VLAN tags are pushed right after the MAC addresses and popped
//! from there; MPLS label stack entries (RFC 3032) are pushed and popped between L2 (after any
//! VLAN tags) and L3, and the ethertype in front of them is rewritten; masked sets write only the
//! masked bits. Checksums are updated incrementally (RFC 1624, through `wire::checksum`): the IPv4
//! header checksum for every IPv4 field change, and the TCP, UDP and ICMPv6 checksums for address
//! changes, since their pseudo-header covers the addresses (RFC 9293 §3.1, RFC 768, RFC 8200
//! §8.1). A UDP checksum of 0 means "none" and stays 0; a result of 0 is sent as 0xffff. SCTP's
//! CRC32C (RFC 9260) has no incremental form and is recomputed, keeping any error the old value
//! had (as OVS's `packet_set_sctp_port()` does).
//!
//! Every function reads the header offsets of `packet.meta` (set by extraction, then kept current
//! by the pushes and pops here) and checks them against the frame before touching a byte. A
//! packet without the header an action needs is left unchanged and the function returns a
//! [`RewriteError`] for the caller to count; the packet then goes on with its remaining actions,
//! as in OVS, where such an action does nothing. Nothing here allocates, except a push that finds
//! the packet's headroom ([`crate::packet::HEADROOM`], 384 bytes) used up.
//!
//! An L3 packet (`meta.packet_type` of namespace 1, e.g. a GRE `legacy_l3` payload after
//! `tnl_pop`) has no Ethernet header: the actions on it refuse with
//! [`RewriteError::NotEthernet`], as OVS's find no Ethernet header and do nothing; `push_eth`
//! makes it an Ethernet frame and `pop_eth` makes a frame an L3 packet (OVS's `push_eth()` and
//! `pop_eth()` in `lib/packets.c`).
//!
//! Reads: the frame, `meta.l2_5`, `meta.l3`, `meta.l4`, `meta.packet_type`. Writes: the frame,
//! the offsets after a push or pop, `meta.packet_type` after `push_eth`, `pop_eth` and
//! `tnl_push` (and `meta.dp_hash` in [`apply`] for `hash`).

use wire::checksum;
use wire::{
    EtherType, IpProtocol, Ipv4Addr, Ipv4Packet, Ipv6Addr, Ipv6Packet, SctpPacket, TcpPacket,
    UdpPacket,
};

use crate::actions::{DpAction, IPV6_LABEL_MASK, L4Proto, SetEth, SetIpv4, SetIpv6, SetL4};
use crate::packet::{NO_OFS, Packet};

/// Why a rewrite left a packet unchanged. The packet is not dropped: the caller counts the
/// reason and goes on with the next action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[repr(u8)]
pub enum RewriteError {
    /// Shorter than an Ethernet header, or a VLAN tag cut short.
    #[error("frame shorter than its Ethernet header")]
    Runt,
    /// No MPLS label stack entry at `meta.l2_5`.
    #[error("no MPLS label stack entry")]
    NoMpls,
    /// No IPv4 header at `meta.l3`.
    #[error("no IPv4 header")]
    NoIpv4,
    /// No IPv6 header at `meta.l3`.
    #[error("no IPv6 header")]
    NoIpv6,
    /// No transport header at `meta.l4`, or too short for the one the action writes.
    #[error("no transport header")]
    NoL4,
    /// The transport header is not the protocol the action writes.
    #[error("transport protocol differs from the set action's")]
    L4Mismatch,
    /// An action on the Ethernet header (set, VLAN and MPLS push and pop, `pop_eth`) on an
    /// L3 packet (packet_type `(1, ethertype)`).
    #[error("not an Ethernet frame")]
    NotEthernet,
    /// `push_eth` on a packet that already is an Ethernet frame.
    #[error("push_eth on an Ethernet frame")]
    NotL3,
    /// Not a header rewrite: output, trunc, recirc, clone and tnl_pop are the PMD's.
    #[error("not a header rewrite action")]
    NotRewrite,
}

impl RewriteError {
    /// Every reason, in declaration order (for per-reason counter arrays).
    pub const ALL: &'static [RewriteError] = &[
        RewriteError::Runt,
        RewriteError::NoMpls,
        RewriteError::NoIpv4,
        RewriteError::NoIpv6,
        RewriteError::NoL4,
        RewriteError::L4Mismatch,
        RewriteError::NotEthernet,
        RewriteError::NotL3,
        RewriteError::NotRewrite,
    ];

    /// A short stable name for counters.
    pub fn name(self) -> &'static str {
        match self {
            RewriteError::Runt => "runt",
            RewriteError::NoMpls => "no_mpls",
            RewriteError::NoIpv4 => "no_ipv4",
            RewriteError::NoIpv6 => "no_ipv6",
            RewriteError::NoL4 => "no_l4",
            RewriteError::L4Mismatch => "l4_mismatch",
            RewriteError::NotEthernet => "not_ethernet",
            RewriteError::NotL3 => "not_l3",
            RewriteError::NotRewrite => "not_rewrite",
        }
    }
}

use RewriteError::*;

const ETH_HLEN: usize = 14;
/// Offset of the ethertype (or the outer TPID) in an Ethernet header.
const ETH_TYPE_OFS: usize = 12;
const VLAN_HLEN: usize = 4;
const MPLS_HLEN: usize = 4;
const IPV4_HLEN: usize = 20;
const IPV6_HLEN: usize = 40;
const TCP_HLEN: usize = 20;
const UDP_HLEN: usize = 8;
const SCTP_HLEN: usize = 12;
const ICMPV6_HLEN: usize = 4;
/// MPLS bottom-of-stack bit in an LSE.
const MPLS_BOS: u32 = 0x100;
/// VLAN CFI "tag present" bit, never sent on the wire by a push.
const VLAN_CFI: u16 = 0x1000;

// Network-order accessors for the few fields `wire` has no view for here (ethertypes, VLAN
// TCIs, whole LSEs, checksums addressed by frame offset).
#[inline]
fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

#[inline]
fn put16(d: &mut [u8], at: usize, v: u16) {
    d[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

#[inline]
fn put32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// `ofs` as an index when the header there has at least `need` bytes in a frame of `len`.
#[inline]
fn at(ofs: u16, len: usize, need: usize) -> Option<usize> {
    let o = ofs as usize;
    (ofs != NO_OFS && o + need <= len).then_some(o)
}

/// Moves a header offset by `delta` bytes after a push or pop in front of it. An offset that
/// would land in the removed bytes, or past what a `u16` offset can say, becomes absent.
#[inline]
fn shift(ofs: &mut u16, delta: isize, removed_below: usize) {
    if *ofs == NO_OFS {
        return;
    }
    if (*ofs as usize) < removed_below {
        *ofs = NO_OFS;
        return;
    }
    *ofs = match (*ofs as isize + delta).try_into() {
        Ok(v) if v != NO_OFS => v,
        _ => NO_OFS,
    };
}

/// `old` with the bits of `m` taken from `v`.
#[inline]
fn masked<T>(old: T, v: T, m: T) -> T
where
    T: core::ops::BitAnd<Output = T> + core::ops::BitOr<Output = T> + core::ops::Not<Output = T>,
    T: Copy,
{
    (old & !m) | (v & m)
}

#[inline]
fn is_vlan(t: u16) -> bool {
    EtherType(t).is_vlan()
}

/// Offset of the first byte after the L2 header (MACs, every VLAN tag, ethertype): where an
/// MPLS label stack begins.
pub(crate) fn l2_end(d: &[u8]) -> Option<usize> {
    if d.len() < ETH_HLEN {
        return None;
    }
    let mut p = ETH_TYPE_OFS;
    while is_vlan(be16(d, p)) {
        p += VLAN_HLEN;
        if p + 2 > d.len() {
            return None;
        }
    }
    Some(p + 2)
}

/// A transport checksum that covers the IP addresses through the pseudo-header: its offset in
/// the frame, and whether it is UDP's (0 = none; a computed 0 is sent as 0xffff).
#[derive(Clone, Copy)]
struct PseudoCsum {
    at: usize,
    udp: bool,
}

impl PseudoCsum {
    /// The checksum of the `proto` header at `l4`, if it has one over the pseudo-header and the
    /// header is all there.
    fn find(proto: IpProtocol, l4: u16, len: usize) -> Option<PseudoCsum> {
        let (need, field, udp) = match proto {
            IpProtocol::TCP => (TCP_HLEN, 16, false),
            IpProtocol::UDP => (UDP_HLEN, 6, true),
            IpProtocol::ICMPV6 => (ICMPV6_HLEN, 2, false),
            _ => return None,
        };
        at(l4, len, need).map(|o| PseudoCsum { at: o + field, udp })
    }

    /// Applies `f` to the stored checksum, keeping UDP's "no checksum" and its 0 rule.
    #[inline]
    fn update(self, d: &mut [u8], f: impl FnOnce(u16) -> u16) {
        let old = be16(d, self.at);
        if self.udp && old == 0 {
            return;
        }
        let mut new = f(old);
        if self.udp && new == 0 {
            new = 0xffff;
        }
        put16(d, self.at, new);
    }
}

/// The upper-layer protocol of the IPv6 packet at `l3` whose transport header is at `l4`, and
/// whether a routing header with segments left precedes it (the pseudo-header then holds the
/// final destination, not the header's, RFC 8200 §8.1). `None` when the extension headers do
/// not lead to `l4`.
fn ipv6_upper(d: &[u8], l3: usize, l4: usize) -> Option<(IpProtocol, bool)> {
    let mut nh = d[l3 + 6];
    let mut p = l3 + IPV6_HLEN;
    let mut routed = false;
    while p < l4 {
        // Every extension header has at least 8 bytes.
        let h = d.get(p..p + 8)?;
        let hlen = match IpProtocol(nh) {
            IpProtocol::HOPOPT | IpProtocol::IPV6_OPTS => (h[1] as usize + 1) * 8,
            IpProtocol::IPV6_ROUTE => {
                routed |= h[3] != 0;
                (h[1] as usize + 1) * 8
            }
            IpProtocol::IPV6_FRAG => 8,
            IpProtocol::AH => (h[1] as usize + 2) * 4,
            _ => return None,
        };
        nh = h[0];
        p += hlen;
    }
    (p == l4).then_some((IpProtocol(nh), routed))
}

/// `Ok` for an Ethernet frame, [`RewriteError::NotEthernet`] for an L3 packet.
#[inline]
fn ethernet(pkt: &Packet) -> Result<(), RewriteError> {
    if pkt.meta.packet_type == 0 {
        Ok(())
    } else {
        Err(NotEthernet)
    }
}

/// `push_eth(src=,dst=)`: prepends an Ethernet header to an L3 packet, with the ethertype of
/// its packet type, and makes it an Ethernet frame.
pub fn push_eth(pkt: &mut Packet, src: &[u8; 6], dst: &[u8; 6]) -> Result<(), RewriteError> {
    let pt = pkt.meta.packet_type;
    if pt >> 16 != 1 {
        return Err(NotL3);
    }
    let h = pkt.push_front(ETH_HLEN);
    h[..6].copy_from_slice(dst);
    h[6..12].copy_from_slice(src);
    h[12..14].copy_from_slice(&(pt as u16).to_be_bytes());
    let m = &mut pkt.meta;
    m.packet_type = 0;
    for o in [&mut m.l2_5, &mut m.l3, &mut m.l4] {
        shift(o, ETH_HLEN as isize, 0);
    }
    Ok(())
}

/// `push_eth` then `pop_mpls` ([`DpAction::PushEthPopMpls`]). On an L3 MPLS packet (the
/// label stack at offset 0) the four label bytes and ten bytes in front of them take the new
/// Ethernet header, and the offsets end where the two steps would put them; any other packet
/// takes the two steps.
pub fn push_eth_pop_mpls(
    pkt: &mut Packet,
    src: &[u8; 6],
    dst: &[u8; 6],
    eth_type: u16,
) -> Result<(), RewriteError> {
    let pt = pkt.meta.packet_type;
    if pt >> 16 != 1
        || !matches!(pt as u16, 0x8847 | 0x8848)
        || pkt.meta.l2_5 != 0
        || pkt.len() < MPLS_HLEN
    {
        // As the two actions run: the second also on a packet the first refused.
        let first = push_eth(pkt, src, dst);
        return pop_mpls(pkt, eth_type).and(first);
    }
    let bos = be32(pkt.data(), 0) & MPLS_BOS != 0;
    pkt.push_front(ETH_HLEN - MPLS_HLEN);
    let Some(h) = pkt.data_mut().first_chunk_mut::<ETH_HLEN>() else {
        return Err(Runt);
    };
    h[..6].copy_from_slice(dst);
    h[6..12].copy_from_slice(src);
    h[12..14].copy_from_slice(&eth_type.to_be_bytes());
    let m = &mut pkt.meta;
    m.packet_type = 0;
    let no_l3 = m.l3 == NO_OFS;
    // After push_eth every offset moves by 14; pop_mpls then removes the label at 14.
    for o in [&mut m.l3, &mut m.l4] {
        shift(o, ETH_HLEN as isize, 0);
        shift(o, -(MPLS_HLEN as isize), ETH_HLEN + MPLS_HLEN);
    }
    if bos {
        m.l2_5 = NO_OFS;
        if no_l3 {
            m.l3 = ETH_HLEN as u16;
        }
    } else {
        m.l2_5 = ETH_HLEN as u16;
    }
    Ok(())
}

/// `pop_eth`: removes the Ethernet header and any VLAN tags (everything in front of the MPLS
/// label stack or L3 header) and makes the packet an L3 packet whose packet type is the
/// ethertype that stood in front of it.
pub fn pop_eth(pkt: &mut Packet) -> Result<(), RewriteError> {
    ethernet(pkt)?;
    let d = pkt.data();
    let from = |o: u16| at(o, d.len(), 0).filter(|&o| o >= ETH_HLEN);
    let ofs = match from(pkt.meta.l2_5).or_else(|| from(pkt.meta.l3)) {
        Some(o) => o,
        None => l2_end(d).ok_or(Runt)?,
    };
    let eth_type = be16(d, ofs - 2);
    pkt.pull_front(ofs);
    let m = &mut pkt.meta;
    m.packet_type = (1 << 16) | u32::from(eth_type);
    for o in [&mut m.l2_5, &mut m.l3, &mut m.l4] {
        shift(o, -(ofs as isize), ofs);
    }
    Ok(())
}

/// `set(eth(src=,dst=))`: masked write of the MAC addresses.
pub fn set_eth(pkt: &mut Packet, s: &SetEth) -> Result<(), RewriteError> {
    ethernet(pkt)?;
    let Some(h) = pkt.data_mut().first_chunk_mut::<ETH_HLEN>() else {
        return Err(Runt);
    };
    // Both addresses at once, as an 8-byte and a 4-byte masked write prepared at compile time.
    let w = s.words();
    let lo = u64::from_ne_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
    let hi = u32::from_ne_bytes([h[8], h[9], h[10], h[11]]);
    h[..8].copy_from_slice(&((lo & !w.mask_lo) | w.val_lo).to_ne_bytes());
    h[8..12].copy_from_slice(&((hi & !w.mask_hi) | w.val_hi).to_ne_bytes());
    Ok(())
}

/// `push_vlan`: inserts a tag after the MAC addresses, in front of any tag already there.
/// `tci` is written without the CFI bit, as OVS's `eth_push_vlan()` does.
pub fn push_vlan(pkt: &mut Packet, tpid: u16, tci: u16) -> Result<(), RewriteError> {
    ethernet(pkt)?;
    if pkt.len() < ETH_HLEN {
        return Err(Runt);
    }
    let tag = pkt.insert_at(ETH_TYPE_OFS, VLAN_HLEN);
    put16(tag, 0, tpid);
    put16(tag, 2, tci & !VLAN_CFI);
    let m = &mut pkt.meta;
    for o in [&mut m.l2_5, &mut m.l3, &mut m.l4] {
        shift(o, VLAN_HLEN as isize, 0);
    }
    Ok(())
}

/// `pop_vlan`: removes the outer VLAN tag; an untagged frame is left as it is (`Ok`).
pub fn pop_vlan(pkt: &mut Packet) -> Result<(), RewriteError> {
    ethernet(pkt)?;
    let d = pkt.data();
    if d.len() < ETH_HLEN {
        return Err(Runt);
    }
    if !is_vlan(be16(d, ETH_TYPE_OFS)) {
        return Ok(());
    }
    if d.len() < ETH_HLEN + VLAN_HLEN {
        return Err(Runt);
    }
    pkt.remove_at(ETH_TYPE_OFS, VLAN_HLEN);
    let m = &mut pkt.meta;
    for o in [&mut m.l2_5, &mut m.l3, &mut m.l4] {
        shift(o, -(VLAN_HLEN as isize), ETH_HLEN + VLAN_HLEN);
    }
    Ok(())
}

/// `push_mpls`: inserts `lse` (as on the wire, TTL included) in front of the label stack, or
/// between L2 and L3 on a packet without one, and writes `eth_type` as the ethertype in front
/// of it. `eth_type` should be an MPLS ethertype (the compiler checks it).
pub fn push_mpls(pkt: &mut Packet, lse: u32, eth_type: u16) -> Result<(), RewriteError> {
    ethernet(pkt)?;
    let len = pkt.len();
    let ofs = match at(pkt.meta.l2_5, len, 0) {
        Some(o) if o >= ETH_HLEN => o,
        Some(_) => return Err(NoMpls),
        None => l2_end(pkt.data()).ok_or(Runt)?,
    };
    let entry = pkt.insert_at(ofs, MPLS_HLEN);
    put32(entry, 0, lse);
    // The bytes in front of the entry moved with the frame start: the ethertype is still just
    // before `ofs`.
    put16(pkt.data_mut(), ofs - 2, eth_type);
    let m = &mut pkt.meta;
    m.l2_5 = ofs as u16;
    shift(&mut m.l3, MPLS_HLEN as isize, 0);
    shift(&mut m.l4, MPLS_HLEN as isize, 0);
    Ok(())
}

/// `pop_mpls(eth_type=)`: removes the outer label stack entry and writes `eth_type` as the
/// ethertype in front of what follows. After the bottom entry, L3 starts where the stack was.
pub fn pop_mpls(pkt: &mut Packet, eth_type: u16) -> Result<(), RewriteError> {
    ethernet(pkt)?;
    let ofs = match at(pkt.meta.l2_5, pkt.len(), MPLS_HLEN) {
        Some(o) if o >= ETH_HLEN => o,
        _ => return Err(NoMpls),
    };
    let d = pkt.data_mut();
    let bos = be32(d, ofs) & MPLS_BOS != 0;
    put16(d, ofs - 2, eth_type);
    pkt.remove_at(ofs, MPLS_HLEN);
    let m = &mut pkt.meta;
    if bos {
        m.l2_5 = NO_OFS;
        if m.l3 == NO_OFS {
            m.l3 = ofs as u16;
        } else {
            shift(&mut m.l3, -(MPLS_HLEN as isize), ofs + MPLS_HLEN);
        }
    } else {
        shift(&mut m.l3, -(MPLS_HLEN as isize), ofs + MPLS_HLEN);
    }
    shift(&mut m.l4, -(MPLS_HLEN as isize), ofs + MPLS_HLEN);
    Ok(())
}

/// `set(mpls(...))`: masked write of the outer label stack entry.
pub fn set_mpls(pkt: &mut Packet, lse: u32, mask: u32) -> Result<(), RewriteError> {
    let ofs = at(pkt.meta.l2_5, pkt.len(), MPLS_HLEN).ok_or(NoMpls)?;
    let d = pkt.data_mut();
    let new = masked(be32(d, ofs), lse, mask);
    put32(d, ofs, new);
    Ok(())
}

/// `set(ipv4(...))`: masked write of source, destination, TOS and TTL, with the header
/// checksum updated, and the TCP or UDP checksum for address changes (not on later fragments,
/// which carry no transport header).
pub fn set_ipv4(pkt: &mut Packet, s: &SetIpv4) -> Result<(), RewriteError> {
    let len = pkt.len();
    let l3 = at(pkt.meta.l3, len, IPV4_HLEN).ok_or(NoIpv4)?;
    let l4 = pkt.meta.l4;
    let d = pkt.data_mut();
    // Version and header length: the high byte of the 16-bit word TOS is the low byte of.
    let ver_ihl = d[l3];
    let mut ip = Ipv4Packet::new_unchecked(&mut d[l3..]);
    if ip.version() != 4 {
        return Err(NoIpv4);
    }
    // ICMP's checksum does not cover the addresses; a later fragment has no transport header.
    let l4_csum = match ip.protocol() {
        IpProtocol::TCP | IpProtocol::UDP if ip.frag_offset() == 0 => {
            PseudoCsum::find(ip.protocol(), l4, len)
        }
        _ => None,
    };

    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let new_src = Ipv4Addr::from_bits(masked(src.to_bits(), s.src.to_bits(), s.src_mask.to_bits()));
    let new_dst = Ipv4Addr::from_bits(masked(dst.to_bits(), s.dst.to_bits(), s.dst_mask.to_bits()));
    let mut hc = ip.checksum();
    if new_src != src {
        hc = checksum::update32(hc, src.to_bits(), new_src.to_bits());
        ip.set_src_addr(new_src);
    }
    if new_dst != dst {
        hc = checksum::update32(hc, dst.to_bits(), new_dst.to_bits());
        ip.set_dst_addr(new_dst);
    }
    let tos = ip.dscp() << 2 | ip.ecn();
    let new_tos = masked(tos, s.tos, s.tos_mask);
    if new_tos != tos {
        let vi = u16::from(ver_ihl) << 8;
        hc = checksum::update16(hc, vi | u16::from(tos), vi | u16::from(new_tos));
        ip.set_dscp(new_tos >> 2);
        ip.set_ecn(new_tos & 3);
    }
    let ttl = ip.ttl();
    let new_ttl = masked(ttl, s.ttl, s.ttl_mask);
    if new_ttl != ttl {
        // TTL is the high byte of the word it shares with the protocol.
        let p = u16::from(ip.protocol().0);
        hc = checksum::update16(hc, u16::from(ttl) << 8 | p, u16::from(new_ttl) << 8 | p);
        ip.set_ttl(new_ttl);
    }
    ip.set_checksum(hc);

    if let Some(c) = l4_csum {
        if new_src != src {
            c.update(d, |cs| {
                checksum::update32(cs, src.to_bits(), new_src.to_bits())
            });
        }
        if new_dst != dst {
            c.update(d, |cs| {
                checksum::update32(cs, dst.to_bits(), new_dst.to_bits())
            });
        }
    }
    Ok(())
}

/// `set(ipv6(...))`: masked write of source, destination, flow label, traffic class and hop
/// limit, with the TCP, UDP or ICMPv6 checksum updated for address changes. A destination
/// change behind a routing header with segments left leaves the checksum alone: it covers the
/// final destination (as OVS's `packet_set_ipv6()`).
pub fn set_ipv6(pkt: &mut Packet, s: &SetIpv6) -> Result<(), RewriteError> {
    let len = pkt.len();
    let l3 = at(pkt.meta.l3, len, IPV6_HLEN).ok_or(NoIpv6)?;
    let l4 = pkt.meta.l4;
    let d = pkt.data_mut();
    if d[l3] >> 4 != 6 {
        return Err(NoIpv6);
    }
    let upper = at(l4, len, 0).and_then(|o| ipv6_upper(d, l3, o));
    let l4_csum = upper.and_then(|(proto, _)| PseudoCsum::find(proto, l4, len));
    let routed = upper.is_some_and(|(_, r)| r);

    let mut ip = Ipv6Packet::new_unchecked(&mut d[l3..]);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let new_src = Ipv6Addr::from_bits(masked(src.to_bits(), s.src.to_bits(), s.src_mask.to_bits()));
    let new_dst = Ipv6Addr::from_bits(masked(dst.to_bits(), s.dst.to_bits(), s.dst_mask.to_bits()));
    ip.set_src_addr(new_src);
    ip.set_dst_addr(new_dst);
    let label_mask = s.label_mask & IPV6_LABEL_MASK;
    ip.set_flow_label(masked(ip.flow_label(), s.label, label_mask));
    ip.set_traffic_class(masked(ip.traffic_class(), s.tclass, s.tclass_mask));
    ip.set_hop_limit(masked(ip.hop_limit(), s.hlimit, s.hlimit_mask));

    if let Some(c) = l4_csum {
        if new_src != src {
            c.update(d, |cs| {
                checksum::update_bytes(cs, &src.octets(), &new_src.octets())
            });
        }
        if new_dst != dst && !routed {
            c.update(d, |cs| {
                checksum::update_bytes(cs, &dst.octets(), &new_dst.octets())
            });
        }
    }
    Ok(())
}

/// The transport protocol at `meta.l4`, from the IP header in front of it. `None` for a
/// non-IP packet, an IPv4 later fragment, or extension headers that do not lead to `l4`.
fn l4_proto(d: &[u8], l3: u16, l4: usize) -> Option<IpProtocol> {
    let l3 = at(l3, d.len(), IPV4_HLEN)?;
    match d[l3] >> 4 {
        4 => {
            let ip = Ipv4Packet::new_unchecked(&d[l3..]);
            (ip.frag_offset() == 0).then(|| ip.protocol())
        }
        6 if l3 + IPV6_HLEN <= d.len() => ipv6_upper(d, l3, l4).map(|(p, _)| p),
        _ => None,
    }
}

/// Where the IP datagram at `l3` ends (its length field, within the frame): Ethernet padding
/// is not part of the transport payload.
fn ip_end(d: &[u8], l3: usize) -> usize {
    let end = match d[l3] >> 4 {
        4 => l3 + Ipv4Packet::new_unchecked(&d[l3..]).total_len() as usize,
        _ => l3 + IPV6_HLEN + Ipv6Packet::new_unchecked(&d[l3..]).payload_len() as usize,
    };
    end.min(d.len())
}

/// `set(tcp(...))`, `set(udp(...))`, `set(sctp(...))`: masked write of the ports, with the
/// TCP or UDP checksum updated, or SCTP's CRC32C recomputed over the SCTP packet.
pub fn set_l4(pkt: &mut Packet, s: &SetL4) -> Result<(), RewriteError> {
    let len = pkt.len();
    let (need, want) = match s.proto {
        L4Proto::Tcp => (TCP_HLEN, IpProtocol::TCP),
        L4Proto::Udp => (UDP_HLEN, IpProtocol::UDP),
        L4Proto::Sctp => (SCTP_HLEN, IpProtocol::SCTP),
    };
    let l4 = at(pkt.meta.l4, len, need).ok_or(NoL4)?;
    let l3 = pkt.meta.l3;
    let d = pkt.data_mut();
    match l4_proto(d, l3, l4) {
        None => return Err(NoL4),
        Some(p) if p != want => return Err(L4Mismatch),
        Some(_) => {}
    }
    match s.proto {
        L4Proto::Tcp => {
            let mut tcp = TcpPacket::new_unchecked(&mut d[l4..]);
            let (sp, dp) = (tcp.src_port(), tcp.dst_port());
            let (nsp, ndp) = (masked(sp, s.src, s.src_mask), masked(dp, s.dst, s.dst_mask));
            let mut c = tcp.checksum();
            if nsp != sp {
                c = checksum::update16(c, sp, nsp);
                tcp.set_src_port(nsp);
            }
            if ndp != dp {
                c = checksum::update16(c, dp, ndp);
                tcp.set_dst_port(ndp);
            }
            tcp.set_checksum(c);
        }
        L4Proto::Udp => {
            let mut udp = UdpPacket::new_unchecked(&mut d[l4..]);
            let (sp, dp) = (udp.src_port(), udp.dst_port());
            let (nsp, ndp) = (masked(sp, s.src, s.src_mask), masked(dp, s.dst, s.dst_mask));
            udp.set_src_port(nsp);
            udp.set_dst_port(ndp);
            let c = PseudoCsum {
                at: l4 + 6,
                udp: true,
            };
            if nsp != sp {
                c.update(d, |cs| checksum::update16(cs, sp, nsp));
            }
            if ndp != dp {
                c.update(d, |cs| checksum::update16(cs, dp, ndp));
            }
        }
        L4Proto::Sctp => {
            let l3 = l3 as usize;
            let end = ip_end(d, l3).max(l4 + SCTP_HLEN);
            let mut sctp = SctpPacket::new_unchecked(&mut d[l4..end]);
            let (sp, dp) = (sctp.src_port(), sctp.dst_port());
            let old = sctp.checksum();
            let old_correct = sctp.compute_checksum();
            sctp.set_src_port(masked(sp, s.src, s.src_mask));
            sctp.set_dst_port(masked(dp, s.dst, s.dst_mask));
            // CRC32C is affine: this is the new CRC with whatever error the old one had.
            let new = sctp.compute_checksum();
            sctp.set_checksum(old ^ old_correct ^ new);
        }
    }
    Ok(())
}

/// Finishes a CRC-folded hash (murmur3's `fmix32`): CRC32C is linear, the mix spreads it.
#[inline]
fn fmix32(mut h: u32) -> u32 {
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
/// alike ([`entropy_hash`]).
#[inline(always)]
fn hash_l4_ipv4(pkt: &Packet, sym: bool, basis: u32, whole: bool) -> Option<(u32, u8)> {
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

/// Copies a tunnel header template (`dst` and `src` of equal length): in 32-byte blocks, the
/// last one overlapping its predecessor, so the common 38- to 70-byte headers take two or
/// three unaligned vector moves instead of a call to `memcpy`.
#[inline(always)]
fn copy_header(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n < 32 || dst.len() != n {
        dst.copy_from_slice(src);
        return;
    }
    let mut at = 0;
    while at + 32 < n {
        dst[at..at + 32].copy_from_slice(&src[at..at + 32]);
        at += 32;
    }
    dst[n - 32..].copy_from_slice(&src[n - 32..]);
}

/// The hash a pushed tunnel header's UDP source port comes from ([`tnl_push`]): the inner
/// packet's addresses, IP protocol and ports, or for a frame that is not IP its Ethernet
/// addresses and type. Read from the headers rather than taken from the packet's flow hash, so
/// that a flow's packets get the same port whichever lookup found their megaflow (the simple
/// match computes no hash). For IPv4, the common case, [`dp_hash_l4`]'s in-line CRC steps
/// without its final mix (the port is the high bits scaled by a multiply, and the mix was the
/// longest part of the push's dependency chain), the ports left out of every fragment.
#[inline(always)]
pub fn entropy_hash(pkt: &Packet) -> u32 {
    entropy_hash_ecn(pkt).0
}

/// [`entropy_hash`] and [`encap_ecn`] together: for IPv4, the common case, the ECN field comes
/// from the header the hash has just read.
#[inline(always)]
fn entropy_hash_ecn(pkt: &Packet) -> (u32, u8) {
    if pkt.meta.packet_type == 0
        && let Some((h, tos)) = hash_l4_ipv4(pkt, false, 0, true)
    {
        return (h, tos & 3);
    }
    (entropy_hash_other(pkt), encap_ecn(pkt))
}

/// [`entropy_hash`] of a packet that is not IPv4, out of line.
#[inline(never)]
fn entropy_hash_other(pkt: &Packet) -> u32 {
    use flow::hash::crc32c_u64;
    let d = pkt.data();
    let l3 = usize::from(pkt.meta.l3);
    let ip = pkt.meta.l3 != NO_OFS && matches!(d.get(l3).map(|b| b >> 4), Some(4 | 6));
    match d.first_chunk::<14>() {
        Some(h) if !ip && pkt.meta.packet_type == 0 => {
            let mut w = [0u8; 8];
            w[..6].copy_from_slice(&h[8..]);
            let mut a = [0u8; 8];
            a.copy_from_slice(&h[..8]);
            fmix32(crc32c_u64(
                crc32c_u64(0, u64::from_ne_bytes(a)),
                u64::from_ne_bytes(w),
            ))
        }
        _ => dp_hash_l4(pkt, false, 0),
    }
}

/// `tnl_push`: prepends the tunnel header template, then fills in what depends on the packet:
/// the outer IP length (and IPv4 checksum, from the template's precomputed sum), the UDP
/// length, a UDP source port from the inner headers ([`entropy_hash`]) when the template has
/// none (OVS's entropy range 32768-60999), and the UDP or GRE checksum when the tunnel asks
/// for one. The errors
/// cannot happen with a template [`TnlTemplate::build`](crate::actions::TnlTemplate::build)
/// made (its offsets lie inside its header); they stand where a panic would otherwise be.
#[inline(always)]
pub fn tnl_push(pkt: &mut Packet, t: &crate::actions::TnlTemplate) -> Result<(), RewriteError> {
    tnl_push_as::<false>(pkt, t)
}

/// Whether `t` is the common shape [`tnl_push_as`] has a variant for: IPv4, UDP (VXLAN or
/// GENEVE) with an entropy source port and no checksum.
#[inline(always)]
fn udp4_entropy(t: &crate::actions::TnlTemplate) -> bool {
    !t.ipv6 && t.udp_ofs.is_some() && t.entropy && !t.udp_csum && t.gre_csum_ofs.is_none()
}

/// [`tnl_push`], for the shape [`udp4_entropy`] when `UDP4`: its tests of the template fold
/// away.
#[inline(always)]
fn tnl_push_as<const UDP4: bool>(
    pkt: &mut Packet,
    t: &crate::actions::TnlTemplate,
) -> Result<(), RewriteError> {
    let (ipv6, entropy) = (!UDP4 && t.ipv6, UDP4 || t.entropy);
    let udp_ofs = if UDP4 {
        Some(t.udp_ofs.unwrap_or(0))
    } else {
        t.udp_ofs
    };
    let (hash, ecn) = if entropy {
        entropy_hash_ecn(pkt)
    } else {
        (0, encap_ecn(pkt))
    };
    // An MPLS packet is not IP, whatever it carries: OVS leaves the outer ECN at 0 for it.
    let ecn = if pkt.meta.l2_5 == NO_OFS {
        t.ecn_map[usize::from(ecn & 3)]
    } else {
        0
    };
    let hl = t.header.len();
    let total = pkt.len() + hl;
    let ip = t.ip_ofs;
    let h = pkt.push_front(hl);
    copy_header(h, &t.header);
    // The template's offsets lie inside it (`TnlTemplate::build`): each header is taken as a
    // fixed-size array once, so the writes below need no bounds checks of their own.
    let l4 = if ipv6 {
        let Some(v6) = h.get_mut(ip..).and_then(|r| r.first_chunk_mut::<40>()) else {
            return Err(RewriteError::NoIpv6);
        };
        v6[4..6].copy_from_slice(&((total - ip - 40) as u16).to_be_bytes());
        v6[1] = t.ip_byte1 | ecn << 4;
        ip + 40
    } else {
        let Some(v4) = h.get_mut(ip..).and_then(|r| r.first_chunk_mut::<20>()) else {
            return Err(RewriteError::NoIpv4);
        };
        let len = (total - ip) as u16;
        v4[2..4].copy_from_slice(&len.to_be_bytes());
        v4[1] = t.ip_byte1 | ecn;
        // The template's sum with a zero length and no ECN bits, plus the length and the ECN
        // bits (the TOS byte is the low half of the header's first word), in ones' complement
        // (each carry added back, which cannot carry again): no need to read back.
        let (s, c) = t.ip_sum.overflowing_add(len);
        let (s, c) = (s + u16::from(c)).overflowing_add(u16::from(ecn));
        let s = s + u16::from(c);
        v4[10..12].copy_from_slice(&(!s).to_be_bytes());
        ip + 20
    };
    if let Some(u) = udp_ofs {
        let Some(udp) = h.get_mut(u..).and_then(|r| r.first_chunk_mut::<8>()) else {
            return Err(RewriteError::NoL4);
        };
        udp[4..6].copy_from_slice(&((total - u) as u16).to_be_bytes());
        if entropy {
            let port = 32768 + ((u64::from(hash) * (61000 - 32768)) >> 32) as u16;
            udp[0..2].copy_from_slice(&port.to_be_bytes());
        }
    }
    if !UDP4 && (t.udp_csum || t.gre_csum_ofs.is_some()) {
        tnl_push_csum(pkt, t);
    }
    let m = &mut pkt.meta;
    m.packet_type = 0;
    m.l2_5 = NO_OFS;
    m.l3 = ip as u16;
    m.l4 = l4 as u16;
    Ok(())
}

/// The ECN field of the IP header at the packet's L3 offset, which the pushed outer header
/// carries on ([`TnlTemplate::ecn_map`](crate::actions::TnlTemplate::ecn_map)); 0 for a frame
/// that is not IP. An MPLS packet's IP header is under its labels: [`tnl_push`] leaves it out.
#[inline(always)]
fn encap_ecn(pkt: &Packet) -> u8 {
    crate::tunnel::ip_ecn(pkt.data(), usize::from(pkt.meta.l3)).unwrap_or(0)
}

/// [`tnl_push`] on every packet of a batch, the template's fields loaded once; returns how
/// many it refused.
#[inline(never)]
pub fn tnl_push_batch(pkts: &mut [Packet], t: &crate::actions::TnlTemplate) -> u64 {
    let mut errors = 0;
    if udp4_entropy(t) {
        for p in pkts {
            errors += u64::from(tnl_push_as::<true>(p, t).is_err());
        }
    } else {
        for p in pkts {
            errors += u64::from(tnl_push(p, t).is_err());
        }
    }
    errors
}

/// [`tnl_push`] out of line, for [`apply`]: the push inlined there would make every other
/// rewrite's call dearer.
#[inline(never)]
fn tnl_push_out_of_line(
    pkt: &mut Packet,
    t: &crate::actions::TnlTemplate,
) -> Result<(), RewriteError> {
    tnl_push(pkt, t)
}

/// The outer UDP or GRE checksum of a pushed tunnel header (`csum=true`), over the whole
/// datagram: out of line, as most tunnels go without one.
#[inline(never)]
fn tnl_push_csum(pkt: &mut Packet, t: &crate::actions::TnlTemplate) {
    let ip = t.ip_ofs;
    let d = pkt.data_mut();
    let total = d.len();
    if let Some(u) = t.udp_ofs
        && t.udp_csum
    {
        let len = (total - u) as u16;
        let ph = if t.ipv6 {
            let src = std::net::Ipv6Addr::from(
                <[u8; 16]>::try_from(&d[ip + 8..ip + 24]).unwrap_or_default(),
            );
            let dst = std::net::Ipv6Addr::from(
                <[u8; 16]>::try_from(&d[ip + 24..ip + 40]).unwrap_or_default(),
            );
            checksum::pseudo_header_v6(&src, &dst, wire::IpProtocol::UDP, u32::from(len))
        } else {
            let src = std::net::Ipv4Addr::new(d[ip + 12], d[ip + 13], d[ip + 14], d[ip + 15]);
            let dst = std::net::Ipv4Addr::new(d[ip + 16], d[ip + 17], d[ip + 18], d[ip + 19]);
            checksum::pseudo_header_v4(&src, &dst, wire::IpProtocol::UDP, len)
        };
        let c = !checksum::combine(&[ph, checksum::data(&d[u..])]);
        put16(d, u + 6, if c == 0 { 0xffff } else { c });
    }
    if let Some(g) = t.gre_csum_ofs {
        let c = !checksum::data(&d[g..]);
        put16(d, g + 4, c);
    }
}

/// [`apply`] on every packet of a batch; returns how many it refused. `set(eth)`, the
/// commonest rewrite (OpenFlow's `mod_dl_dst`), is matched once for the batch and its write
/// inlined in the loop: through [`apply`]'s match on every packet it cost `vxlan_decap` 15
/// instructions a packet more (`cargo bench -p datapath --bench decap_insns`).
pub fn apply_batch(pkts: &mut [Packet], a: &DpAction) -> u64 {
    let mut errors = 0;
    match a {
        DpAction::SetEth(s) => {
            for p in pkts {
                errors += u64::from(set_eth(p, s).is_err());
            }
        }
        _ => {
            for p in pkts {
                errors += u64::from(apply(p, a).is_err());
            }
        }
    }
    errors
}

/// Executes one header rewrite, or `hash` (into `meta.dp_hash`), on a packet. Output, trunc,
/// recirc, clone, tnl_pop, ct and userspace are the PMD's to execute and return
/// [`RewriteError::NotRewrite`].
pub fn apply(pkt: &mut Packet, a: &DpAction) -> Result<(), RewriteError> {
    match a {
        DpAction::SetEth(s) => set_eth(pkt, s),
        DpAction::PushVlan { tpid, tci } => push_vlan(pkt, *tpid, *tci),
        DpAction::PopVlan => pop_vlan(pkt),
        DpAction::PushMpls { lse, eth_type } => push_mpls(pkt, *lse, *eth_type),
        DpAction::PopMpls { eth_type } => pop_mpls(pkt, *eth_type),
        DpAction::SetMpls { lse, mask } => set_mpls(pkt, *lse, *mask),
        DpAction::SetIpv4(s) => set_ipv4(pkt, s),
        DpAction::SetIpv6(s) => set_ipv6(pkt, s),
        DpAction::SetL4(s) => set_l4(pkt, s),
        DpAction::Hash { sym, basis } => {
            pkt.meta.dp_hash = dp_hash_l4(pkt, *sym, *basis);
            Ok(())
        }
        DpAction::TnlPush(t) => tnl_push_out_of_line(pkt, t),
        DpAction::PushEth { src, dst } => push_eth(pkt, src, dst),
        DpAction::PushEthPopMpls { src, dst, eth_type } => {
            push_eth_pop_mpls(pkt, src, dst, *eth_type)
        }
        DpAction::PopEth => pop_eth(pkt),
        DpAction::Output(_)
        | DpAction::TnlPop(_)
        | DpAction::Trunc(_)
        | DpAction::Recirc(_)
        | DpAction::Clone(_)
        | DpAction::Ct(_)
        | DpAction::CtClear
        | DpAction::Userspace => Err(NotRewrite),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MACS: [u8; 12] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];

    /// A packet with its offsets filled by extraction, as the PMD hands it to the actions.
    fn extracted(frame: &[u8]) -> Packet {
        let mut key = flow::FlowKey::new();
        let ex = flow::extract(frame, &mut key);
        let mut p = Packet::from_slice(frame);
        p.meta.l2_5 = ex.layers.l2_5;
        p.meta.l3 = ex.layers.l3;
        p.meta.l4 = ex.layers.l4;
        p
    }

    /// Ethernet / IPv4 (20 bytes) / TCP (20 bytes) or UDP, with correct checksums.
    #[allow(clippy::too_many_arguments)]
    fn frame_v4(
        tcp: bool,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        tos: u8,
        ttl: u8,
        ports: (u16, u16),
        payload: &[u8],
        udp_csum: bool,
    ) -> Vec<u8> {
        let l4len = if tcp { TCP_HLEN } else { UDP_HLEN } + payload.len();
        let mut f = MACS.to_vec();
        f.extend_from_slice(&[0x08, 0x00, 0x45, tos]);
        f.extend_from_slice(&((IPV4_HLEN + l4len) as u16).to_be_bytes());
        f.extend_from_slice(&[0x12, 0x34, 0, 0, ttl, if tcp { 6 } else { 17 }, 0, 0]);
        f.extend_from_slice(&src.octets());
        f.extend_from_slice(&dst.octets());
        let l4 = f.len();
        f.resize(l4 + l4len, 0);
        f[l4 + l4len - payload.len()..].copy_from_slice(payload);
        Ipv4Packet::new_unchecked(&mut f[ETH_HLEN..l4]).fill_checksum();
        put16(&mut f, l4, ports.0);
        put16(&mut f, l4 + 2, ports.1);
        if tcp {
            f[l4 + 12] = 0x50;
            f[l4 + 13] = 0x18;
            TcpPacket::new_unchecked(&mut f[l4..]).fill_checksum_v4(&src, &dst);
        } else {
            put16(&mut f, l4 + 4, l4len as u16);
            if udp_csum {
                UdpPacket::new_unchecked(&mut f[l4..]).fill_checksum_v4(&src, &dst);
            }
        }
        f
    }

    /// Ethernet / IPv6 / TCP or UDP, with a correct checksum.
    fn frame_v6(
        tcp: bool,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        ports: (u16, u16),
        payload: &[u8],
    ) -> Vec<u8> {
        let l4len = if tcp { TCP_HLEN } else { UDP_HLEN } + payload.len();
        let mut f = MACS.to_vec();
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(l4len as u16).to_be_bytes());
        f.extend_from_slice(&[if tcp { 6 } else { 17 }, 64]);
        f.extend_from_slice(&src.octets());
        f.extend_from_slice(&dst.octets());
        let l4 = f.len();
        f.resize(l4 + l4len, 0);
        f[l4 + l4len - payload.len()..].copy_from_slice(payload);
        put16(&mut f, l4, ports.0);
        put16(&mut f, l4 + 2, ports.1);
        if tcp {
            f[l4 + 12] = 0x50;
            TcpPacket::new_unchecked(&mut f[l4..]).fill_checksum_v6(&src, &dst);
        } else {
            put16(&mut f, l4 + 4, l4len as u16);
            UdpPacket::new_unchecked(&mut f[l4..]).fill_checksum_v6(&src, &dst);
        }
        f
    }

    /// The frame with every checksum computed from scratch (a UDP checksum of 0 kept as none).
    fn recomputed(frame: &[u8]) -> Vec<u8> {
        let mut f = frame.to_vec();
        if be16(&f, 12) == 0x0800 {
            let (ip, l4) = f[ETH_HLEN..].split_at_mut(IPV4_HLEN);
            let mut ip = Ipv4Packet::new_unchecked(ip);
            ip.fill_checksum();
            let (s, d) = (ip.src_addr(), ip.dst_addr());
            if ip.protocol() == IpProtocol::TCP {
                TcpPacket::new_unchecked(l4).fill_checksum_v4(&s, &d);
            } else if UdpPacket::new_unchecked(&*l4).checksum() != 0 {
                UdpPacket::new_unchecked(l4).fill_checksum_v4(&s, &d);
            }
        } else {
            let (ip, l4) = f[ETH_HLEN..].split_at_mut(IPV6_HLEN);
            let ip = Ipv6Packet::new_unchecked(ip);
            let (s, d) = (ip.src_addr(), ip.dst_addr());
            if ip.next_header() == IpProtocol::TCP {
                TcpPacket::new_unchecked(l4).fill_checksum_v6(&s, &d);
            } else {
                UdpPacket::new_unchecked(l4).fill_checksum_v6(&s, &d);
            }
        }
        f
    }

    fn v4(a: u32) -> Ipv4Addr {
        Ipv4Addr::from_bits(a)
    }

    #[test]
    fn push_and_pop_vlan_move_the_offsets() {
        let f = frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"hi", true);
        let mut p = extracted(&f);
        assert_eq!((p.meta.l3, p.meta.l4), (14, 34));
        push_vlan(&mut p, 0x8100, 0x1000 | 0x2064).unwrap();
        assert_eq!(&p.data()[12..18], &[0x81, 0x00, 0x20, 0x64, 0x08, 0x00]);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (NO_OFS, 18, 38));
        push_vlan(&mut p, 0x88a8, 7).unwrap();
        assert_eq!(
            &p.data()[12..20],
            &[0x88, 0xa8, 0, 7, 0x81, 0x00, 0x20, 0x64]
        );
        assert_eq!((p.meta.l3, p.meta.l4), (22, 42));
        pop_vlan(&mut p).unwrap();
        pop_vlan(&mut p).unwrap();
        assert_eq!(p.data(), &f[..]);
        assert_eq!((p.meta.l3, p.meta.l4), (14, 34));
        // Untagged: nothing to pop.
        pop_vlan(&mut p).unwrap();
        assert_eq!(p.data(), &f[..]);
    }

    #[test]
    fn mpls_push_pop_round_trip() {
        let f = frame_v4(true, v4(1), v4(2), 0, 64, (1, 2), b"", true);
        let mut p = extracted(&f);
        push_mpls(&mut p, 100 << 12 | 0x100 | 64, 0x8847).unwrap();
        assert_eq!(&p.data()[12..18], &[0x88, 0x47, 0x00, 0x06, 0x41, 0x40]);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (14, 18, 38));
        push_mpls(&mut p, 200 << 12 | 63, 0x8847).unwrap();
        assert_eq!((p.meta.l2_5, p.meta.l3), (14, 22));
        set_mpls(&mut p, 5, 0xff).unwrap();
        assert_eq!(&p.data()[14..18], &[0x00, 0x0c, 0x80, 0x05]);
        pop_mpls(&mut p, 0x8847).unwrap();
        assert_eq!((p.meta.l2_5, p.meta.l3), (14, 18));
        pop_mpls(&mut p, 0x0800).unwrap();
        assert_eq!(p.data(), &f[..]);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (NO_OFS, 14, 34));
        assert_eq!(pop_mpls(&mut p, 0x0800), Err(NoMpls));
    }

    #[test]
    fn pop_mpls_after_extraction_sets_l3() {
        // Extraction stops at the label stack; after the bottom entry L3 starts there.
        let mut f = MACS.to_vec();
        f.extend_from_slice(&[0x88, 0x47, 0x00, 0x06, 0x41, 0x04]);
        f.extend_from_slice(&frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"", true)[14..]);
        let mut p = extracted(&f);
        assert_eq!((p.meta.l2_5, p.meta.l3), (14, NO_OFS));
        pop_mpls(&mut p, 0x0800).unwrap();
        assert_eq!((p.meta.l2_5, p.meta.l3), (NO_OFS, 14));
        set_ipv4(
            &mut p,
            &SetIpv4 {
                src: v4(0),
                src_mask: v4(0),
                dst: v4(0),
                dst_mask: v4(0),
                tos: 0,
                tos_mask: 0,
                ttl: 9,
                ttl_mask: 0xff,
            },
        )
        .unwrap();
        assert!(Ipv4Packet::new_unchecked(&p.data()[14..]).verify_checksum());
    }

    #[test]
    fn missing_headers_leave_the_packet_alone() {
        let f = frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"a UDP payload", true);
        let set4 = SetIpv4 {
            src: v4(9),
            src_mask: v4(u32::MAX),
            dst: v4(0),
            dst_mask: v4(0),
            tos: 0,
            tos_mask: 0,
            ttl: 0,
            ttl_mask: 0,
        };
        let tcp = SetL4 {
            proto: L4Proto::Tcp,
            src: 1,
            src_mask: 0xffff,
            dst: 0,
            dst_mask: 0,
        };
        let mut p = extracted(&f);
        assert_eq!(set_l4(&mut p, &tcp), Err(L4Mismatch));
        p.meta.l3 = NO_OFS;
        assert_eq!(set_ipv4(&mut p, &set4), Err(NoIpv4));
        p.meta.l3 = (f.len() - 10) as u16;
        assert_eq!(set_ipv4(&mut p, &set4), Err(NoIpv4));
        p.meta.l4 = f.len() as u16;
        assert_eq!(
            set_l4(
                &mut p,
                &SetL4 {
                    proto: L4Proto::Udp,
                    ..tcp
                }
            ),
            Err(NoL4)
        );
        assert_eq!(set_mpls(&mut p, 0, u32::MAX), Err(NoMpls));
        assert_eq!(p.data(), &f[..]);
        let mut runt = Packet::from_slice(&f[..10]);
        assert_eq!(push_vlan(&mut runt, 0x8100, 1), Err(Runt));
        assert_eq!(push_mpls(&mut runt, 1, 0x8847), Err(Runt));
        assert_eq!(pop_vlan(&mut runt), Err(Runt));
        assert_eq!(runt.data(), &f[..10]);
    }

    #[test]
    fn pop_eth_and_push_eth_move_the_offsets_and_the_packet_type() {
        let f = frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"hi", true);
        let mut p = extracted(&f);
        push_vlan(&mut p, 0x8100, 5).unwrap();
        pop_eth(&mut p).unwrap();
        assert_eq!(p.data(), &f[ETH_HLEN..]);
        assert_eq!(p.meta.packet_type, 0x1_0800);
        assert_eq!((p.meta.l2_5, p.meta.l3, p.meta.l4), (NO_OFS, 0, 20));
        // The Ethernet actions refuse an L3 packet and leave it alone.
        let set = SetEth::new([0; 6], [0; 6], [9; 6], [0xff; 6]);
        assert_eq!(set_eth(&mut p, &set), Err(NotEthernet));
        assert_eq!(push_vlan(&mut p, 0x8100, 1), Err(NotEthernet));
        assert_eq!(pop_mpls(&mut p, 0x0800), Err(NotEthernet));
        assert_eq!(pop_eth(&mut p), Err(NotEthernet));
        assert_eq!(p.data(), &f[ETH_HLEN..]);
        // The L3 rewrites still find their headers.
        set_ipv4(
            &mut p,
            &SetIpv4 {
                src: v4(0),
                src_mask: v4(0),
                dst: v4(0),
                dst_mask: v4(0),
                tos: 0,
                tos_mask: 0,
                ttl: 3,
                ttl_mask: 0xff,
            },
        )
        .unwrap();
        assert!(Ipv4Packet::new_unchecked(p.data()).verify_checksum());
        push_eth(&mut p, &[2, 0, 0, 0, 0, 1], &[2, 0, 0, 0, 0, 2]).unwrap();
        assert_eq!(p.meta.packet_type, 0);
        assert_eq!(&p.data()[..14], &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]);
        assert_eq!((p.meta.l3, p.meta.l4), (14, 34));
        assert_eq!(push_eth(&mut p, &[0; 6], &[0; 6]), Err(NotL3));
        // Without offsets (not extracted), pop_eth finds the end of the tags itself.
        let mut q = Packet::from_slice(&p.data()[..20]);
        pop_eth(&mut q).unwrap();
        assert_eq!((q.len(), q.meta.packet_type), (6, 0x1_0800));
        let mut runt = Packet::from_slice(&[0; 10]);
        assert_eq!(pop_eth(&mut runt), Err(Runt));
    }

    #[test]
    fn error_names_are_unique() {
        let mut names: Vec<_> = RewriteError::ALL.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RewriteError::ALL.len());
    }

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

    /// A pushed header's UDP source port comes from the inner headers, not from the flow hash
    /// (which the simple match does not compute): one flow, one port, different flows apart.
    #[test]
    fn the_entropy_port_comes_from_the_inner_headers() {
        let text = "tnl_push(tnl_port(4),header(size=0,type=4,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x64)),out_port(1))";
        let acts = flow::odp::parse_actions(text, &mut flow::odp::PortNames::new()).unwrap();
        let compiled = crate::actions::compile(&acts).unwrap();
        let DpAction::TnlPush(t) = &compiled[0] else {
            panic!("not a push")
        };
        let port = |f: &[u8], hash: u32| {
            let mut p = extracted(f);
            p.meta.hash = hash;
            tnl_push(&mut p, t).unwrap();
            be16(p.data(), 34)
        };
        let a = frame_v4(false, v4(1), v4(2), 0, 64, (1000, 2000), b"", true);
        let b = frame_v4(false, v4(1), v4(2), 0, 64, (1001, 2000), b"", true);
        assert_eq!(port(&a, 1), port(&a, 0xdead_beef));
        assert_ne!(port(&a, 1), port(&b, 1));
        // A datagram's first fragment and a later one: one port (no transport ports in it).
        let mut first = a.clone();
        first[ETH_HLEN + 6] = 0x20;
        let mut later = a.clone();
        later[ETH_HLEN + 6..ETH_HLEN + 8].copy_from_slice(&[0, 0x10]);
        assert_eq!(port(&first, 1), port(&later, 1));
        assert_ne!(port(&first, 1), port(&a, 1));
        assert!((32768..61000).contains(&port(&a, 1)));
        // Not IP: the Ethernet addresses and type.
        let arp = [MACS.as_slice(), &[0x08, 0x06], &[0; 28]].concat();
        let mut arp2 = arp.clone();
        arp2[0] ^= 1;
        assert_eq!(port(&arp, 1), port(&arp, 2));
        assert_ne!(port(&arp, 1), port(&arp2, 1));
    }

    /// A VXLAN push template over IPv4 to `dst` with `tos`.
    fn vxlan_template(dst: Ipv4Addr, tos: u8) -> crate::actions::TnlTemplate {
        let text = format!(
            "tnl_push(tnl_port(4),header(size=0,type=4,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst={dst},proto=17,tos={tos},ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x64)),out_port(1))"
        );
        let acts = flow::odp::parse_actions(&text, &mut flow::odp::PortNames::new()).unwrap();
        let compiled = crate::actions::compile(&acts).unwrap();
        let DpAction::TnlPush(t) = &compiled[0] else {
            panic!("not a push")
        };
        (**t).clone()
    }

    /// The outer IPv4 checksum stays right where the ECN bits' carry meets the length's: a
    /// template whose header sums to 0xfffe, an outer length of 65535 and ECT(0), which sum
    /// to 0x1ffff (one fold of it is 0x10000, which a 16-bit checksum cannot hold).
    #[test]
    fn the_outer_checksum_carries_twice_when_it_must() {
        let base = vxlan_template(Ipv4Addr::new(10, 1, 0, 0), 0);
        let sum = !u16::from_be_bytes([base.header[24], base.header[25]]);
        assert!(sum <= 0xfffe);
        let t = vxlan_template(
            Ipv4Addr::new(10, 1, 0, 0) | Ipv4Addr::from(u32::from(0xfffe - sum)),
            0,
        );
        assert_eq!(t.ip_sum, 0xfffe);
        let inner = frame_v4(
            false,
            v4(1),
            v4(2),
            0x02,
            64,
            (1, 2),
            &vec![0; 65535 - 36 - 42],
            false,
        );
        let mut p = extracted(&inner);
        tnl_push(&mut p, &t).unwrap();
        let h = &p.data()[14..34];
        assert_eq!((be16(h, 2), h[1]), (65535, 0x02));
        assert_eq!(checksum::data(h), 0xffff);
    }

    proptest! {
        /// The outer ECN field is the inner IPv4 or IPv6 packet's, CE as ECT(0), beside the
        /// template's DSCP; a template with ECN bits of its own keeps them; the outer IPv4
        /// checksum verifies for every length and TOS.
        #[test]
        fn the_outer_ecn_comes_from_the_inner_packet(
            inner_tos in any::<u8>(),
            dscp in 0u8..64,
            own_ecn in prop_oneof![Just(0u8), 1u8..4],
            v6 in any::<bool>(),
            len in 0usize..1500,
        ) {
            let t = vxlan_template(Ipv4Addr::new(10, 1, 2, 9), dscp << 2 | own_ecn);
            let payload = vec![0x5a; len];
            let inner = if v6 {
                let mut f = frame_v6(false, Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED, (1, 2), &payload);
                f[ETH_HLEN] = 0x60 | inner_tos >> 4;
                f[ETH_HLEN + 1] = inner_tos << 4;
                f
            } else {
                frame_v4(false, v4(1), v4(2), inner_tos, 64, (1, 2), &payload, true)
            };
            let mut p = extracted(&inner);
            tnl_push(&mut p, &t).unwrap();
            // The batch's variant for this shape (IPv4, UDP, entropy) pushes the same bytes.
            prop_assert!(udp4_entropy(&t));
            let mut q = extracted(&inner);
            prop_assert_eq!(tnl_push_batch(std::slice::from_mut(&mut q), &t), 0);
            prop_assert_eq!(q.data(), p.data());
            let h = &p.data()[14..34];
            let ecn = match (own_ecn, inner_tos & 3) {
                (0, 3) => 2,
                (0, e) => e,
                (own, _) => own,
            };
            prop_assert_eq!(h[1], dscp << 2 | ecn);
            prop_assert_eq!(checksum::data(h), 0xffff);
            prop_assert_eq!(&p.data()[50..], &inner[..]);
        }
    }

    #[test]
    fn apply_sets_dp_hash_and_refuses_forwarding() {
        let mut p = extracted(&frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"", true));
        apply(
            &mut p,
            &DpAction::Hash {
                sym: false,
                basis: 0,
            },
        )
        .unwrap();
        assert_eq!(p.meta.dp_hash, dp_hash_l4(&p, false, 0));
        assert_eq!(apply(&mut p, &DpAction::Output(1)), Err(NotRewrite));
    }

    fn ipv4_set() -> impl Strategy<Value = SetIpv4> {
        (any::<[u32; 4]>(), any::<[u8; 4]>()).prop_map(|(a, b)| SetIpv4 {
            src: v4(a[0] & a[1]),
            src_mask: v4(a[1]),
            dst: v4(a[2] & a[3]),
            dst_mask: v4(a[3]),
            tos: b[0] & b[1],
            tos_mask: b[1],
            ttl: b[2] & b[3],
            ttl_mask: b[3],
        })
    }

    fn l4_set(proto: L4Proto) -> impl Strategy<Value = SetL4> {
        any::<[u16; 4]>().prop_map(move |a| SetL4 {
            proto,
            src: a[0] & a[1],
            src_mask: a[1],
            dst: a[2] & a[3],
            dst_mask: a[3],
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Incremental checksum updates equal a full recomputation.
        #[test]
        fn ipv4_incremental_checksums_equal_recompute(
            tcp: bool, udp_csum: bool, src: u32, dst: u32, tos: u8, ttl: u8, ports: (u16, u16),
            payload in proptest::collection::vec(any::<u8>(), 0..40),
            s4 in ipv4_set(), sp in l4_set(L4Proto::Tcp), both: bool,
        ) {
            let f = frame_v4(tcp, v4(src), v4(dst), tos, ttl, ports, &payload, udp_csum);
            let mut p = extracted(&f);
            set_ipv4(&mut p, &s4).unwrap();
            if both {
                let proto = if tcp { L4Proto::Tcp } else { L4Proto::Udp };
                set_l4(&mut p, &SetL4 { proto, ..sp }).unwrap();
            }
            let out = p.data();
            prop_assert!(Ipv4Packet::new_unchecked(&out[ETH_HLEN..]).verify_checksum());
            prop_assert_eq!(out, &recomputed(out)[..]);
            if !tcp && !udp_csum {
                prop_assert_eq!(UdpPacket::new_unchecked(&out[34..]).checksum(), 0);
            }
        }

        #[test]
        fn ipv6_incremental_checksums_equal_recompute(
            tcp: bool, src: u128, dst: u128, ports: (u16, u16),
            payload in proptest::collection::vec(any::<u8>(), 0..40),
            m: [u128; 2], v: [u128; 2], label: [u32; 2], sp in l4_set(L4Proto::Udp),
        ) {
            let f = frame_v6(tcp, Ipv6Addr::from_bits(src), Ipv6Addr::from_bits(dst), ports, &payload);
            let mut p = extracted(&f);
            let s6 = SetIpv6 {
                src: Ipv6Addr::from_bits(v[0] & m[0]),
                src_mask: Ipv6Addr::from_bits(m[0]),
                dst: Ipv6Addr::from_bits(v[1] & m[1]),
                dst_mask: Ipv6Addr::from_bits(m[1]),
                label: label[0] & label[1] & IPV6_LABEL_MASK,
                label_mask: label[1] & IPV6_LABEL_MASK,
                tclass: 0,
                tclass_mask: 0,
                hlimit: 1,
                hlimit_mask: 0xff,
            };
            set_ipv6(&mut p, &s6).unwrap();
            let proto = if tcp { L4Proto::Tcp } else { L4Proto::Udp };
            set_l4(&mut p, &SetL4 { proto, ..sp }).unwrap();
            let out = p.data();
            prop_assert_eq!(out, &recomputed(out)[..]);
        }

        /// Arbitrary bytes and offsets: no panic, and a failed rewrite changes nothing.
        #[test]
        fn garbage_never_panics(
            frame in proptest::collection::vec(any::<u8>(), 0..120),
            ofs: [u16; 3], which in 0usize..11, s4 in ipv4_set(), sp in l4_set(L4Proto::Sctp),
            lse: u32, l3_packet: bool,
        ) {
            let mut p = Packet::from_slice(&frame);
            if l3_packet {
                p.meta.packet_type = 1 << 16 | (lse >> 16);
            }
            // Mostly plausible offsets, sometimes anything.
            let pick = |o: u16| match o % 4 { 0 => NO_OFS, 1 => o, _ => o % 130 };
            p.meta.l2_5 = pick(ofs[0]);
            p.meta.l3 = pick(ofs[1]);
            p.meta.l4 = pick(ofs[2]);
            let s6 = SetIpv6 {
                src: Ipv6Addr::LOCALHOST, src_mask: Ipv6Addr::from_bits(u128::MAX),
                dst: Ipv6Addr::LOCALHOST, dst_mask: Ipv6Addr::from_bits(u128::MAX),
                label: 1, label_mask: IPV6_LABEL_MASK, tclass: 0, tclass_mask: 0,
                hlimit: 0, hlimit_mask: 0,
            };
            let protos = [L4Proto::Tcp, L4Proto::Udp, L4Proto::Sctp];
            let r = match which {
                0 => push_vlan(&mut p, 0x8100, lse as u16),
                1 => pop_vlan(&mut p),
                2 => push_mpls(&mut p, lse, 0x8847),
                3 => pop_mpls(&mut p, lse as u16),
                4 => set_mpls(&mut p, lse, !lse),
                5 => set_ipv4(&mut p, &s4),
                6 => set_ipv6(&mut p, &s6),
                7 => set_l4(&mut p, &SetL4 { proto: protos[lse as usize % 3], ..sp }),
                8 => push_eth(&mut p, &[1; 6], &[2; 6]),
                9 => pop_eth(&mut p),
                _ => { let _ = dp_hash_l4(&p, lse & 1 == 0, lse); Ok(()) }
            };
            if r.is_err() {
                prop_assert_eq!(p.data(), &frame[..]);
            }
        }
    }

    /// The header `tnl_push` prepends, field by field from the template and the frame, as a
    /// reference computed from scratch (the whole IPv4 header summed, no incremental update).
    fn pushed_reference(t: &crate::actions::TnlTemplate, inner: &[u8], hash: u32) -> Vec<u8> {
        let mut f = t.header.to_vec();
        f.extend_from_slice(inner);
        let total = f.len();
        let ip = t.ip_ofs;
        if t.ipv6 {
            f[ip + 4..ip + 6].copy_from_slice(&((total - ip - 40) as u16).to_be_bytes());
        } else {
            f[ip + 2..ip + 4].copy_from_slice(&((total - ip) as u16).to_be_bytes());
            f[ip + 10..ip + 12].copy_from_slice(&[0, 0]);
            let c = !checksum::data(&f[ip..ip + 20]);
            f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
        }
        if let Some(u) = t.udp_ofs {
            f[u + 4..u + 6].copy_from_slice(&((total - u) as u16).to_be_bytes());
            if t.header[u] == 0 && t.header[u + 1] == 0 {
                let port = 32768 + ((u64::from(hash) * 28232) >> 32) as u16;
                f[u..u + 2].copy_from_slice(&port.to_be_bytes());
            }
        }
        f
    }

    proptest! {
        /// Every template shape (VXLAN, GENEVE with options, GRE, over IPv4 and IPv6; fixed or
        /// entropy source port) on inner frames of every length: the pushed bytes are the
        /// reference's, and an IPv4 outer header checksums to zero.
        #[test]
        fn tnl_push_writes_lengths_checksum_and_entropy(
            which in 0usize..6,
            len in 0usize..1600,
            hash in any::<u32>(),
            sport in prop_oneof![Just(0u16), any::<u16>()],
            csum in any::<bool>(),
        ) {
            let ipv4 = "eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,tos=0x10,ttl=64,frag=0x4000)";
            let ipv6 = "eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x86dd),ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=17,tclass=0x0,hlimit=64)";
            let uc = if csum { "0xffff" } else { "0x0" };
            let gre = if csum {
                "gre((flags=0xa000,proto=0x6558),csum=0x0,key=0x1c8)"
            } else {
                "gre((flags=0x2000,proto=0x6558),key=0x1c8)"
            };
            let (ip, l4) = match which {
                0 => (ipv4, format!("udp(src={sport},dst=4789,csum={uc}),vxlan(flags=0x8000000,vni=0x64)")),
                1 => (ipv6, format!("udp(src={sport},dst=4789,csum={uc}),vxlan(flags=0x8000000,vni=0x64)")),
                2 => (ipv4, format!("udp(src={sport},dst=6081,csum={uc}),geneve(crit,vni=0x7b,options({{class=0x102,type=0x80,len=4,0xa}}))")),
                3 => (ipv6, format!("udp(src={sport},dst=6081,csum={uc}),geneve(vni=0x7b,options({{class=0x102,type=0x80,len=8,0xa0000000b}}))")),
                4 => (ipv4, gre.to_owned()),
                _ => (ipv6, gre.to_owned()),
            };
            let (ip, l4) = if which >= 4 { (ip.replace("proto=17", "proto=47"), l4) } else { (ip.to_owned(), l4) };
            let text = format!("tnl_push(tnl_port(4),header(size=0,type=4,{ip},{l4}),out_port(1))");
            let acts = flow::odp::parse_actions(&text, &mut flow::odp::PortNames::new()).unwrap();
            let compiled = crate::actions::compile(&acts).unwrap();
            let DpAction::TnlPush(t) = &compiled[0] else { panic!("not a push: {compiled:?}") };
            let inner: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut p = Packet::from_slice(&inner);
            // The flow hash is not where the entropy comes from: the inner headers are.
            p.meta.hash = hash;
            let entropy = entropy_hash(&p);
            tnl_push(&mut p, t).unwrap();
            let want = pushed_reference(t, &inner, entropy);
            let mut got = p.data().to_vec();
            let ip = t.ip_ofs;
            if !t.ipv6 {
                prop_assert_eq!(checksum::data(&got[ip..ip + 20]), 0xffff);
            }
            // The transport checksums are checked by verifying them, then compared as zero.
            if let (Some(u), true) = (t.udp_ofs, t.udp_csum) {
                let len = (got.len() - u) as u16;
                let ph = if t.ipv6 {
                    let a = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&got[o..o + 16]).unwrap());
                    checksum::pseudo_header_v6(&a(ip + 8), &a(ip + 24), wire::IpProtocol::UDP, u32::from(len))
                } else {
                    let a = |o: usize| Ipv4Addr::from(<[u8; 4]>::try_from(&got[o..o + 4]).unwrap());
                    checksum::pseudo_header_v4(&a(ip + 12), &a(ip + 16), wire::IpProtocol::UDP, len)
                };
                prop_assert_eq!(checksum::combine(&[ph, checksum::data(&got[u..])]), 0xffff);
                prop_assert!(got[u + 6..u + 8] != [0, 0], "a computed zero is sent as 0xffff");
                got[u + 6..u + 8].copy_from_slice(&[0, 0]);
            }
            if let Some(g) = t.gre_csum_ofs {
                prop_assert_eq!(checksum::data(&got[g..]), 0xffff);
                got[g + 4..g + 6].copy_from_slice(&[0, 0]);
            }
            let mut want = want;
            if let (Some(u), true) = (t.udp_ofs, t.udp_csum) {
                want[u + 6..u + 8].copy_from_slice(&[0, 0]);
            }
            prop_assert_eq!(&got[..], &want[..]);
        }
    }

    proptest! {
        /// The fused `push_eth,pop_mpls` leaves every packet as the two actions in sequence
        /// do: L3 MPLS packets with one or more labels, other L3 and Ethernet packets, any
        /// header offsets.
        #[test]
        fn push_eth_pop_mpls_is_the_two_in_sequence(
            pt in prop_oneof![
                Just(1u32 << 16 | 0x8847), Just(1 << 16 | 0x8848), Just(1 << 16 | 0x0800), Just(0u32)
            ],
            labels in 0usize..3,
            bos_first in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 0..80),
            ofs in proptest::array::uniform3(0u16..200),
            eth_type in prop_oneof![Just(0x0800u16), Just(0x8847), Just(0x86dd)],
        ) {
            let mut frame = Vec::new();
            for i in 0..labels {
                let bos = if i + 1 == labels { 1 } else { u32::from(bos_first && i == 0) };
                frame.extend_from_slice(&((812 + i as u32) << 12 | bos << 8 | 64).to_be_bytes());
            }
            frame.extend_from_slice(&body);
            let pick = |o: u16| match o % 5 { 0 => NO_OFS, 1 => 0, _ => o % 100 };
            let packet = || {
                let mut p = Packet::from_slice(&frame);
                p.meta.packet_type = pt;
                p.meta.l2_5 = pick(ofs[0]);
                p.meta.l3 = pick(ofs[1]);
                p.meta.l4 = pick(ofs[2]);
                p
            };
            let (mut a, mut b) = (packet(), packet());
            let (src, dst) = ([0, 0, 0, 0, 0, 1], [0x52, 0x54, 0, 0xa0, 0x91, 0x10]);
            let fused = push_eth_pop_mpls(&mut a, &src, &dst, eth_type);
            let first = push_eth(&mut b, &src, &dst);
            let second = pop_mpls(&mut b, eth_type);
            prop_assert_eq!(fused.is_ok(), first.is_ok() && second.is_ok());
            prop_assert_eq!(a.data(), b.data());
            let m = |p: &Packet| (p.meta.packet_type, p.meta.l2_5, p.meta.l3, p.meta.l4);
            prop_assert_eq!(m(&a), m(&b));
        }
    }
}
