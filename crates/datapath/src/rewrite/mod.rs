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
//!
//! By header family: `l2.rs` (Ethernet, VLAN and MPLS, with `push_eth`/`pop_eth`), `ip.rs`
//! (IPv4, IPv6 and the transport ports, with their checksums), `hash.rs` (the `hash` action's
//! L4 hash) and `tnl_push.rs` (tunnel encapsulation from a header template). [`apply`] runs
//! one action on one packet, [`apply_batch`] on a group.

mod arp_nd;
mod hash;
mod ip;
mod l2;
mod nat;
mod tnl_push;

use crate::actions::DpAction;
use crate::packet::{NO_OFS, Packet};

pub use arp_nd::{set_arp, set_icmp, set_nd};
pub use hash::dp_hash_l4;
pub(crate) use ip::{ECN_CE, ECN_MASK, ip_ecn, set_ip_ecn};
pub use ip::{set_ipv4, set_ipv6, set_l4};
pub(crate) use l2::l2_end;
pub use l2::{
    add_mpls, pop_eth, pop_mpls, pop_vlan, push_eth, push_eth_pop_mpls, push_mpls, push_vlan,
    set_eth, set_mpls,
};
pub(crate) use nat::nat_ipv4_l4;
pub use tnl_push::{
    DEFAULT_EGRESS_PORT_RANGE, egress_port_range, entropy_hash, set_egress_port_range, tnl_push,
    tnl_push_batch,
};

use tnl_push::tnl_push_out_of_line;

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
    /// No Ethernet/IPv4 ARP header at `meta.l3`.
    #[error("no ARP header")]
    NoArp,
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
        RewriteError::NoArp,
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
            RewriteError::NoArp => "no_arp",
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
/// The ICMP and ICMPv6 header's fixed part: type, code, checksum.
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
        DpAction::AddMpls { lse, eth_type } => add_mpls(pkt, *lse, *eth_type),
        DpAction::PopMpls { eth_type } => pop_mpls(pkt, *eth_type),
        DpAction::SetMpls { lse, mask } => set_mpls(pkt, *lse, *mask),
        DpAction::SetIpv4(s) => set_ipv4(pkt, s),
        DpAction::SetIpv6(s) => set_ipv6(pkt, s),
        DpAction::SetL4(s) => set_l4(pkt, s),
        DpAction::SetArp(s) => set_arp(pkt, s),
        DpAction::SetIcmp(s) => set_icmp(pkt, s),
        DpAction::SetNd(s) => set_nd(pkt, s),
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
        // Nothing reads a priority (see the variant's documentation).
        DpAction::SetPriority { .. } => Ok(()),
        DpAction::SetMark { value, mask } => {
            pkt.meta.pkt_mark = (pkt.meta.pkt_mark & !mask) | value;
            Ok(())
        }
        DpAction::Output(_)
        | DpAction::LbOutput(_)
        | DpAction::TnlPop(_)
        | DpAction::Trunc(_)
        | DpAction::Recirc(_)
        | DpAction::Clone(_)
        | DpAction::CheckPktLen { .. }
        | DpAction::Drop(_)
        | DpAction::Ct(_)
        | DpAction::CtClear
        | DpAction::Meter(_)
        | DpAction::Userspace(_) => Err(NotRewrite),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use wire::{IpProtocol, Ipv4Addr, Ipv4Packet, Ipv6Addr, Ipv6Packet, TcpPacket, UdpPacket};

    use crate::actions::{IPV6_LABEL_MASK, L4Proto, SetIpv4, SetIpv6, SetL4};

    pub(super) const MACS: [u8; 12] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];

    /// A packet with its offsets filled by extraction, as the PMD hands it to the actions.
    pub(super) fn extracted(frame: &[u8]) -> Packet {
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
    pub(super) fn frame_v4(
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
    pub(super) fn frame_v6(
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
    pub(super) fn recomputed(frame: &[u8]) -> Vec<u8> {
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

    pub(super) fn v4(a: u32) -> Ipv4Addr {
        Ipv4Addr::from_bits(a)
    }

    pub(super) fn ipv4_set() -> impl Strategy<Value = SetIpv4> {
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

    pub(super) fn l4_set(proto: L4Proto) -> impl Strategy<Value = SetL4> {
        any::<[u16; 4]>().prop_map(move |a| SetL4 {
            proto,
            src: a[0] & a[1],
            src_mask: a[1],
            dst: a[2] & a[3],
            dst_mask: a[3],
        })
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
    fn error_names_are_unique() {
        let mut names: Vec<_> = RewriteError::ALL.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RewriteError::ALL.len());
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

    #[test]
    fn set_priority_leaves_the_packet_alone() {
        let frame = frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"", true);
        let mut p = extracted(&frame);
        let meta = p.meta;
        let set = DpAction::SetPriority {
            value: 0x10001,
            mask: u32::MAX,
        };
        assert_eq!(apply(&mut p, &set), Ok(()));
        assert_eq!((p.data(), p.meta), (&frame[..], meta));
    }

    #[test]
    fn set_mark_writes_the_masked_bits_of_the_packet_s_mark() {
        let frame = frame_v4(false, v4(1), v4(2), 0, 64, (1, 2), b"", true);
        let mut p = extracted(&frame);
        p.meta.pkt_mark = 0x1200;
        let set = DpAction::SetMark {
            value: 0x34,
            mask: 0xff,
        };
        assert_eq!(apply(&mut p, &set), Ok(()));
        assert_eq!((p.data(), p.meta.pkt_mark), (&frame[..], 0x1234));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

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
}
