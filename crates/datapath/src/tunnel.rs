//! Tunnel termination: the virtual tunnel ports of the datapath (`vxlan_sys_4789`,
//! `genev_sys_6081`, `gre_sys`) and `tnl_pop`, which strips a packet's outer headers and leaves
//! their metadata for the next pass.
//!
//! Protocols: VXLAN (RFC 7348), GENEVE (RFC 8926), GRE (RFC 2784 with the key and sequence
//! number extensions of RFC 2890), over IPv4 (RFC 791) or IPv6 (RFC 8200), with OVS's
//! userspace datapath checks (`netdev_vxlan_pop_header()`, `netdev_geneve_pop_header()`,
//! `netdev_gre_pop_header()` and `ip_extract_tnl_md()` in OVS's `lib/netdev-native-tnl.c`):
//! the IPv4 header checksum is verified, IPv4 options are refused, the UDP checksum is verified
//! when it is not zero (and then sets the `csum` tunnel flag), the GRE checksum when present.
//! A popped packet's tunnel flags are those OVS 3.1 sets: `key` (VXLAN, GENEVE, GRE with a
//! key), `csum`, GENEVE's `oam`, and never `df`, whatever the outer DF bit (OVS releases after
//! 3.1 copy it).
//! Beyond OVS: fragments are refused here rather than relying on the flow's `frag=no`, the
//! outer headers may follow 802.1Q/802.1ad tags, and a GRE payload protocol other than
//! Ethernet, IPv4, IPv6 or MPLS is refused.
//!
//! An encapsulated TCP or UDP (USO) super-frame received whole
//! ([`crate::gso_tunnel::is_received`]) is popped once: its outer IP and UDP lengths (of a
//! GSO frame: the whole frame's, or 0) are not read, the datagram being the rest of the
//! frame, and its outer UDP checksum (a pseudo-header sum, each segment's to complete) is not
//! verified but sets the `csum` flag; every other check stays. The popped packet is the plain super-frame it carried.
//!
//! A tunnel port has no queues of its own: packets reach it only through `tnl_pop`, which
//! makes the decapsulated packet arrive on it (`in_port`), and nothing may output to it (its
//! tx queue counts and drops; encapsulation is `tnl_push` followed by an output to a physical
//! port).
//!
//! The metadata `tnl_pop` writes goes into the packet buffer's tunnel metadata area, in the
//! flow key's own layout ([`crate::tnl_md`]).

use std::sync::Arc;

use flow::key::tun_flags;
use wire::checksum;

use crate::packet::{Batch, NO_OFS, Packet, Pool, RX_CSUM_IP_GOOD, RX_CSUM_L4_GOOD};
pub use crate::port::{GENEVE_PORT, TunnelKind, VXLAN_PORT};
use crate::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};
use crate::rewrite::{ECN_CE, ECN_MASK, ip_ecn, l2_end, set_ip_ecn};
use crate::tnl_md::{
    MD_FLAGS, MD_GENEVE, MD_GENEVE_LEN, MD_IPV4_DST, MD_IPV4_SRC, MD_OPTS_WORDS, MD_TOS, MD_TP_DST,
    MD_TP_SRC, MD_TTL, MD_TUN_ID, MD_TUN_IPV6, TNL_MD_LEN, TnlMd, md_used_len,
};

/// A tunnel's datapath port: no rx queues, and a tx queue that counts and drops what it is
/// sent (the datapath never outputs to a tunnel port; `tnl_push` and an output to a physical
/// port encapsulate).
pub struct TunnelPort {
    name: String,
    kind: TunnelKind,
    tx: Arc<QueueStats>,
}

impl TunnelPort {
    /// A tunnel port named `name`.
    pub fn new(name: &str, kind: TunnelKind) -> TunnelPort {
        TunnelPort {
            name: name.to_owned(),
            kind,
            tx: QueueStats::shared(),
        }
    }

    /// A tunnel port with OVS's name for its kind ([`TunnelKind::default_port_name`]).
    pub fn with_default_name(kind: TunnelKind) -> TunnelPort {
        TunnelPort::new(&kind.default_port_name(), kind)
    }
}

struct DropTxq {
    stats: Arc<QueueStats>,
}

impl TxQueue for DropTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        self.stats
            .tx_dropped
            .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        pool.free_batch(batch);
    }
}

impl Port for TunnelPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        self.kind.name()
    }

    /// As OVS's `dpctl/show` prints a tunnel vport: `{packet_type=ptap}`, with the UDP port
    /// when it is not the protocol's own.
    fn options(&self) -> String {
        match self.kind {
            TunnelKind::Vxlan { dst_port } if dst_port != VXLAN_PORT => {
                format!("{{dst_port={dst_port}, packet_type=ptap}}")
            }
            TunnelKind::Geneve { dst_port } if dst_port != GENEVE_PORT => {
                format!("{{dst_port={dst_port}, packet_type=ptap}}")
            }
            _ => "{packet_type=ptap}".to_owned(),
        }
    }

    fn n_rxq(&self) -> usize {
        0
    }

    fn take_rxq(&mut self, _q: usize, _in_port: u32) -> Option<Box<dyn RxQueue>> {
        None
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        Box::new(DropTxq {
            stats: self.tx.clone(),
        })
    }

    fn counters(&self) -> PortCounters {
        self.tx.snapshot()
    }

    fn tunnel(&self) -> Option<TunnelKind> {
        Some(self.kind)
    }
}

macro_rules! drop_reasons {
    ($($(#[$doc:meta])* $v:ident => $name:literal,)*) => {
        /// Why `tnl_pop` dropped a packet; counted per PMD (`dpif-netdev/pmd-drop-show`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
        #[repr(u8)]
        pub enum TnlPopDrop {
            $($(#[$doc])* #[error($name)] $v,)*
        }

        impl TnlPopDrop {
            /// Every reason, in declaration order (for per-reason counter arrays).
            pub const ALL: &'static [TnlPopDrop] = &[$(TnlPopDrop::$v,)*];

            /// The counter's name.
            pub fn name(self) -> &'static str {
                match self {
                    $(TnlPopDrop::$v => $name,)*
                }
            }
        }
    };
}

drop_reasons! {
    /// `tnl_pop` to a port that is not a tunnel port.
    BadPort => "tunnel_pop_bad_port",
    /// Outer headers cut short: an IP or UDP length past the frame, a tunnel header or its
    /// options past the datagram.
    Truncated => "tunnel_pop_truncated",
    /// A wrong IPv4 header, UDP or GRE checksum.
    BadChecksum => "tunnel_pop_bad_checksum",
    /// Not IP, IPv4 options, a protocol other than the port's, a UDP length below 8, VXLAN
    /// flags other than I or a non-zero reserved byte, a GENEVE version other than 0, GRE
    /// routing, a version other than 0 or reserved flags.
    BadHeader => "tunnel_pop_bad_header",
    /// An IPv4 fragment (MF or an offset) or an IPv6 fragment header.
    Fragment => "tunnel_pop_fragment",
    /// A GENEVE payload other than Ethernet (0x6558); a GRE payload other than Ethernet,
    /// IPv4, IPv6 or MPLS.
    UnknownProtocol => "tunnel_pop_unknown_protocol",
    /// An outer header marked ECN CE (congestion experienced) over an inner IP packet that
    /// is not ECN-capable, which cannot carry the mark on (RFC 6040 §4.2; OVS drops it too).
    EcnCeNotEct => "tunnel_pop_ecn_ce_not_ect",
}

/// Number of [`TnlPopDrop`] reasons.
pub const N_TNL_POP_DROPS: usize = TnlPopDrop::ALL.len();

#[inline(always)]
fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

#[inline(always)]
fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

const ETH_TYPE_IPV4: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;
const ETH_TYPE_TEB: u16 = 0x6558;
const ETH_TYPE_MPLS: u16 = 0x8847;
const ETH_TYPE_MPLS_MCAST: u16 = 0x8848;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_GRE: u8 = 47;
const UDP_HLEN: usize = 8;
const VXLAN_HLEN: usize = 8;
const GENEVE_HLEN: usize = 8;
/// VXLAN's first word: the I flag and nothing else (RFC 7348 §5, OVS's `VXLAN_FLAGS`).
const VXLAN_FLAGS: u32 = 0x0800_0000;
const GRE_C: u16 = 0x8000;
const GRE_K: u16 = 0x2000;
const GRE_S: u16 = 0x1000;
/// IPv4 flags and fragment offset without DF: MF, offset.
const IP_MF_OFFSET: u16 = 0x3fff;

/// The outer IP header as `tnl_pop` reads it.
struct Outer {
    /// Offset of the header after IP (UDP or GRE).
    l4: usize,
    /// End of the IP datagram (Ethernet padding starts here); after UDP, of the UDP datagram.
    end: usize,
    proto: u8,
    tos: u8,
    ttl: u8,
    flags: u8,
    /// Ones'-complement sum of the source and destination addresses, for a UDP pseudo-header
    /// (`wire::checksum::sum_native`).
    addr_sum: u64,
    v6: bool,
}

/// Where L3 starts: the extraction's offset, or, when extraction found no sane IP header
/// there, after the Ethernet header and its tags so that the checks below name the reason.
fn l3_start(pkt: &Packet) -> Result<usize, TnlPopDrop> {
    if pkt.meta.l3 != NO_OFS {
        return Ok(usize::from(pkt.meta.l3));
    }
    if pkt.meta.packet_type != 0 {
        return match pkt.meta.packet_type as u16 {
            ETH_TYPE_IPV4 | ETH_TYPE_IPV6 => Ok(0),
            _ => Err(TnlPopDrop::BadHeader),
        };
    }
    let d = pkt.data();
    let end = l2_end(d).ok_or(TnlPopDrop::Truncated)?;
    match be16(d, end - 2) {
        ETH_TYPE_IPV4 | ETH_TYPE_IPV6 => Ok(end),
        _ => Err(TnlPopDrop::BadHeader),
    }
}

/// `N` bytes of `d` from `at`, or `Truncated`.
#[inline(always)]
fn chunk<const N: usize>(d: &[u8], at: usize) -> Result<&[u8; N], TnlPopDrop> {
    d.get(at..)
        .and_then(|s| s.first_chunk::<N>())
        .ok_or(TnlPopDrop::Truncated)
}

/// Four bytes of `h` as [`checksum::sum_native`] adds them.
#[inline(always)]
fn ne32<const N: usize>(h: &[u8; N], at: usize) -> u64 {
    u64::from(u32::from_ne_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]))
}

#[inline(always)]
fn be16_of<const N: usize>(h: &[u8; N], at: usize) -> u16 {
    u16::from_be_bytes([h[at], h[at + 1]])
}

/// Reads and checks the outer IPv4 or IPv6 header at `l3`, writing the endpoints into `md`.
/// `whole`: the packet is an encapsulated super-frame received whole, whose outer lengths
/// are not read (the datagram is the rest of the frame).
#[inline(always)]
fn outer_ip(
    d: &[u8],
    l3: usize,
    md: &mut [u8; TNL_MD_LEN],
    whole: bool,
) -> Result<Outer, TnlPopDrop> {
    use TnlPopDrop::*;
    let h = chunk::<20>(d, l3)?;
    if h[0] >> 4 == 6 {
        return outer_ipv6(d, l3, md, whole);
    }
    if h[0] >> 4 != 4 {
        return Err(BadHeader);
    }
    // Options are refused as OVS refuses them (its header templates have none).
    if h[0] != 0x45 {
        return Err(BadHeader);
    }
    if checksum::finish_native(checksum::sum_native(h)) != 0xffff {
        return Err(BadChecksum);
    }
    let tot = if whole {
        d.len() - l3
    } else {
        usize::from(be16_of(h, 2))
    };
    if tot < 20 {
        return Err(BadHeader);
    }
    if l3 + tot > d.len() {
        return Err(Truncated);
    }
    let frag = be16_of(h, 6);
    if frag & IP_MF_OFFSET != 0 {
        return Err(Fragment);
    }
    md[MD_IPV4_SRC..MD_IPV4_DST + 4].copy_from_slice(&h[12..20]);
    Ok(Outer {
        l4: l3 + 20,
        end: l3 + tot,
        proto: h[9],
        tos: h[1],
        ttl: h[8],
        flags: 0,
        addr_sum: checksum::sum_native(&h[12..20]),
        v6: false,
    })
}

/// [`outer_ip`] for IPv6, with its extension headers up to the tunnel protocol (RFC 8200 §4).
fn outer_ipv6(
    d: &[u8],
    l3: usize,
    md: &mut [u8; TNL_MD_LEN],
    whole: bool,
) -> Result<Outer, TnlPopDrop> {
    use TnlPopDrop::*;
    let h = chunk::<40>(d, l3)?;
    let end = if whole {
        d.len()
    } else {
        l3 + 40 + usize::from(be16_of(h, 4))
    };
    if end > d.len() {
        return Err(Truncated);
    }
    let mut nh = h[6];
    let mut p = l3 + 40;
    loop {
        let len = match nh {
            0 | 43 | 60 => 8 * (usize::from(chunk::<2>(d, p)?[1]) + 1),
            51 => 4 * (usize::from(chunk::<2>(d, p)?[1]) + 2),
            44 => return Err(Fragment),
            _ => break,
        };
        if p + len > end {
            return Err(Truncated);
        }
        nh = d[p];
        p += len;
    }
    md[MD_IPV4_SRC..MD_IPV4_DST + 4].fill(0);
    md[MD_TUN_IPV6..MD_TUN_IPV6 + 32].copy_from_slice(&h[8..40]);
    Ok(Outer {
        l4: p,
        end,
        proto: nh,
        tos: ((be16_of(h, 0) >> 4) & 0xff) as u8,
        ttl: h[7],
        flags: 0,
        addr_sum: checksum::sum_native(&h[8..40]),
        v6: true,
    })
}

/// What follows the tunnel header.
struct Inner {
    /// Offset of the payload.
    start: usize,
    /// Its packet type (0: Ethernet).
    packet_type: u32,
}

/// UDP, then the VXLAN (`GENEVE` false) or GENEVE header at the UDP payload. `whole`: as
/// for [`outer_ip`], and the UDP checksum, a pseudo-header sum the segments complete, is not
/// verified (it still sets the `csum` flag).
#[inline(always)]
fn udp_tunnel<const GENEVE: bool>(
    d: &[u8],
    o: &mut Outer,
    md: &mut [u8; TNL_MD_LEN],
    whole: bool,
) -> Result<Inner, TnlPopDrop> {
    use TnlPopDrop::*;
    if o.proto != IPPROTO_UDP {
        return Err(BadHeader);
    }
    let u = o.l4;
    let dg = &d[..o.end];
    // UDP and the VXLAN or GENEVE base header: both are 8 bytes.
    let h = chunk::<{ UDP_HLEN + 8 }>(dg, u)?;
    let ulen = if whole {
        o.end - u
    } else {
        usize::from(be16_of(h, 4))
    };
    if ulen < UDP_HLEN {
        return Err(BadHeader);
    }
    if u + ulen > o.end {
        return Err(Truncated);
    }
    if ulen < UDP_HLEN + 8 {
        return Err(Truncated);
    }
    o.end = u + ulen;
    if be16_of(h, 6) != 0 && !whole {
        // The pseudo-header (addresses, protocol, UDP length; RFC 768, RFC 8200 §8.1) and the
        // datagram in one sum.
        if !checksum::l4_ok_native(o.addr_sum, IPPROTO_UDP, ulen as u16, &d[u..o.end]) {
            return Err(BadChecksum);
        }
    }
    if be16_of(h, 6) != 0 {
        o.flags |= tun_flags::CSUM;
    }
    md[MD_TP_SRC..MD_TP_DST + 2].copy_from_slice(&h[..4]);
    let t = &h[UDP_HLEN..];
    let vni = u64::from(u32::from_be_bytes([t[4], t[5], t[6], t[7]]) >> 8);
    md[MD_TUN_ID..MD_TUN_ID + 8].copy_from_slice(&vni.to_be_bytes());
    o.flags |= tun_flags::KEY;
    if !GENEVE {
        if u32::from_be_bytes([t[0], t[1], t[2], t[3]]) != VXLAN_FLAGS || t[7] != 0 {
            return Err(BadHeader);
        }
        md[MD_GENEVE_LEN] = 0;
        return Ok(Inner {
            start: u + UDP_HLEN + VXLAN_HLEN,
            packet_type: 0,
        });
    }
    if t[0] >> 6 != 0 {
        return Err(BadHeader);
    }
    let opt_len = usize::from(t[0] & 0x3f) * 4;
    let opts = u + UDP_HLEN + GENEVE_HLEN;
    if opts + opt_len > o.end {
        return Err(Truncated);
    }
    if u16::from_be_bytes([t[2], t[3]]) != ETH_TYPE_TEB {
        return Err(UnknownProtocol);
    }
    if t[1] & 0x80 != 0 {
        o.flags |= tun_flags::OAM;
    }
    md[MD_GENEVE_LEN] = opt_len as u8;
    put_geneve_opts(md, d, opts, opt_len);
    Ok(Inner {
        start: opts + opt_len,
        packet_type: 0,
    })
}

/// The GRE header at the IP payload.
fn gre_tunnel(d: &[u8], o: &mut Outer, md: &mut [u8; TNL_MD_LEN]) -> Result<Inner, TnlPopDrop> {
    use TnlPopDrop::*;
    if o.proto != IPPROTO_GRE {
        return Err(BadHeader);
    }
    let g = o.l4;
    let dg = &d[..o.end];
    let h = chunk::<4>(dg, g)?;
    let flags = be16_of(h, 0);
    // Routing, the reserved bits and a version other than 0 (RFC 2784 §2.3, PPTP's version 1
    // included), as OVS refuses them.
    if flags & !(GRE_C | GRE_K | GRE_S) != 0 {
        return Err(BadHeader);
    }
    let hlen = 4 + 4 * (flags.count_ones() as usize);
    if g + hlen > o.end {
        return Err(Truncated);
    }
    let packet_type = match be16_of(h, 2) {
        ETH_TYPE_TEB => 0,
        t @ (ETH_TYPE_IPV4 | ETH_TYPE_IPV6 | ETH_TYPE_MPLS | ETH_TYPE_MPLS_MCAST) => {
            (1 << 16) | u32::from(t)
        }
        _ => return Err(UnknownProtocol),
    };
    let mut p = g + 4;
    if flags & GRE_C != 0 {
        if checksum::data(&dg[g..]) != 0xffff {
            return Err(BadChecksum);
        }
        o.flags |= tun_flags::CSUM;
        p += 4;
    }
    let key = if flags & GRE_K != 0 {
        o.flags |= tun_flags::KEY;
        u64::from(be32(dg, p))
    } else {
        0
    };
    md[MD_TUN_ID..MD_TUN_ID + 8].copy_from_slice(&key.to_be_bytes());
    md[MD_TP_SRC..MD_TP_DST + 2].fill(0);
    md[MD_GENEVE_LEN] = 0;
    Ok(Inner {
        start: g + hlen,
        packet_type,
    })
}

/// `tnl_pop` on one packet for a tunnel port of `kind`: checks the outer headers from the
/// offsets extraction left in `pkt.meta`, writes the tunnel metadata into the buffer's area
/// (`meta.tunnel`), and strips the outer headers by moving the frame start (no copy); the
/// payload's packet type goes to `meta.packet_type` (an L3 payload of GRE starts at L3). On
/// error the packet is to be dropped (its metadata area may have been written).
///
/// The common shapes (IPv4 without options, not a fragment, UDP to the end of the datagram
/// with VXLAN or GENEVE; GRE without checksum) take a straight path with one bounds check;
/// everything else, and every packet that fails a check, takes the general one, which names
/// the reason.
///
/// Reads: the frame, `meta.l3`, `meta.packet_type`. Writes: the frame bounds, the metadata
/// area, `meta.tunnel`, `meta.packet_type`, the header offsets (absent until the next pass
/// extracts). The caller sets `in_port` and `recirc_id`.
#[inline]
pub fn tnl_pop(pkt: &mut Packet, kind: TunnelKind) -> Result<(), TnlPopDrop> {
    let done = pkt.meta.l3 != NO_OFS && {
        let l3 = usize::from(pkt.meta.l3);
        match kind {
            TunnelKind::Vxlan { .. } => udp4_fast::<false>(pkt, l3),
            TunnelKind::Geneve { .. } => udp4_fast::<true>(pkt, l3),
            TunnelKind::Gre => gre4_fast(pkt, l3),
        }
    };
    if !done {
        tnl_pop_checked(pkt, kind)?;
    }
    if pkt.tnl_md()[MD_TOS] & ECN_MASK == ECN_CE {
        return ecn_decap(pkt);
    }
    Ok(())
}

/// Where a decapsulated packet's IP header starts: at once for an IP payload (`packet_type`
/// IPv4 or IPv6), after the Ethernet header and up to two VLAN tags for an Ethernet one;
/// None for anything else.
fn inner_l3(d: &[u8], packet_type: u32) -> Option<usize> {
    const IPV4: u32 = 1 << 16 | ETH_TYPE_IPV4 as u32;
    const IPV6: u32 = 1 << 16 | ETH_TYPE_IPV6 as u32;
    match packet_type {
        IPV4 | IPV6 => Some(0),
        0 => {
            let mut at = 12;
            for _ in 0..3 {
                match be16(d.get(..at + 2)?, at) {
                    ETH_TYPE_IPV4 | ETH_TYPE_IPV6 => return Some(at + 2),
                    0x8100 | 0x88a8 => at += 4,
                    _ => return None,
                }
            }
            None
        }
        _ => None,
    }
}

/// A decapsulated packet whose outer header was marked CE, as OVS treats it (RFC 6040 §4.2):
/// an ECN-capable inner IP packet takes the mark (its IPv4 checksum updated), one that is not
/// ECN-capable is dropped, anything else goes on unchanged. The inner pass then matches the
/// packet as marked, as OVS's translation does.
#[cold]
#[inline(never)]
fn ecn_decap(pkt: &mut Packet) -> Result<(), TnlPopDrop> {
    let Some(l3) = inner_l3(pkt.data(), pkt.meta.packet_type) else {
        return Ok(());
    };
    match ip_ecn(pkt.data(), l3) {
        Some(0) => Err(TnlPopDrop::EcnCeNotEct),
        Some(ECN_CE) | None => Ok(()),
        Some(_) => {
            set_ip_ecn(pkt.data_mut(), l3, ECN_CE);
            Ok(())
        }
    }
}

/// Marks `pkt` decapsulated from IPv4: the outer headers up to `start` and the bytes after
/// `end` removed, the offsets absent until the next pass extracts; a super-frame received
/// encapsulated is now the plain super-frame it carried.
#[inline(always)]
fn popped(pkt: &mut Packet, start: usize, end: usize, packet_type: u32, which: TnlMd) {
    pkt.truncate(end);
    pkt.pull_front(start);
    let m = &mut pkt.meta;
    m.set_tunnel_gso(false);
    m.rx_csum = 0;
    m.tunnel = which;
    m.packet_type = packet_type;
    m.l2_5 = NO_OFS;
    m.l3 = NO_OFS;
    m.l4 = NO_OFS;
}

/// The IPv4 header fields every tunnel copies: endpoints, TOS, TTL.
#[inline(always)]
fn md_ipv4(md: &mut [u8; TNL_MD_LEN], h: &[u8]) {
    md[MD_IPV4_SRC..MD_IPV4_DST + 4].copy_from_slice(&h[12..20]);
    md[MD_TOS] = h[1];
    md[MD_TTL] = h[8];
}

/// VXLAN (`GENEVE` false) or GENEVE over UDP over IPv4 without options: pops and returns true
/// when every check passes, leaves the packet alone and returns false otherwise (the general
/// path then decides).
#[inline(always)]
fn udp4_fast<const GENEVE: bool>(pkt: &mut Packet, l3: usize) -> bool {
    let verified = pkt.meta.rx_csum;
    let (md, d) = pkt.tnl_md_and_data_mut();
    // IPv4, UDP and the VXLAN or GENEVE base header.
    let Some(h) = d.get(l3..).and_then(|s| s.first_chunk::<36>()) else {
        return false;
    };
    let tot = usize::from(be16_of(h, 2));
    let addrs = ne32(h, 12) + ne32(h, 16);
    if h[0] != 0x45
        || h[9] != IPPROTO_UDP
        || (h[6] & 0x3f) | h[7] != 0
        || tot < 36
        || l3 + tot > d.len()
        || usize::from(be16_of(h, 24)) != tot - 20
        || (verified & RX_CSUM_IP_GOOD == 0
            && checksum::finish_native(ne32(h, 0) + ne32(h, 4) + ne32(h, 8) + addrs) != 0xffff)
    {
        return false;
    }
    let mut flags = tun_flags::KEY;
    if h[26] | h[27] != 0 && verified & RX_CSUM_L4_GOOD != 0 {
        flags |= tun_flags::CSUM;
    } else if h[26] | h[27] != 0 {
        if !checksum::l4_ok_native(addrs, IPPROTO_UDP, (tot - 20) as u16, &d[l3 + 20..l3 + tot]) {
            return false;
        }
        flags |= tun_flags::CSUM;
    }
    let t = &h[28..36];
    let opt_len = if GENEVE {
        if t[0] >> 6 != 0 || u16::from_be_bytes([t[2], t[3]]) != ETH_TYPE_TEB {
            return false;
        }
        if t[1] & 0x80 != 0 {
            flags |= tun_flags::OAM;
        }
        usize::from(t[0] & 0x3f) * 4
    } else {
        if u32::from_be_bytes([t[0], t[1], t[2], t[3]]) != VXLAN_FLAGS || t[7] != 0 {
            return false;
        }
        0
    };
    let start = l3 + 36 + opt_len;
    if start > l3 + tot {
        return false;
    }
    let vni = u64::from(u32::from_be_bytes([t[4], t[5], t[6], t[7]]) >> 8);
    md[MD_TUN_ID..MD_TUN_ID + 8].copy_from_slice(&vni.to_be_bytes());
    md_ipv4(md, h);
    md[MD_FLAGS] = flags;
    md[MD_GENEVE_LEN] = opt_len as u8;
    md[MD_TP_SRC..MD_TP_DST + 2].copy_from_slice(&h[20..24]);
    if GENEVE {
        put_geneve_opts(md, d, start - opt_len, opt_len);
    }
    popped(pkt, start, l3 + tot, 0, TnlMd::Ipv4);
    true
}

/// Puts the GENEVE options `d[opts..opts + opt_len]` (`MD_GENEVE_LEN` already says how
/// long) into the area's option words, with zeros before them (the connection tuple's ports
/// share the first option word and are not set on a decapsulated packet) and after them to
/// the end of their last word. Nothing for no options.
#[inline(always)]
fn put_geneve_opts(md: &mut [u8; TNL_MD_LEN], d: &[u8], opts: usize, opt_len: usize) {
    if opt_len == 0 || geneve_opts_short(md, d, opts, opt_len) {
        return;
    }
    md[MD_OPTS_WORDS..MD_GENEVE].fill(0);
    md[MD_GENEVE..MD_GENEVE + opt_len].copy_from_slice(&d[opts..opts + opt_len]);
    let used = md_used_len(md);
    md[MD_GENEVE + opt_len..used].fill(0);
}

/// The area's first bytes from [`MD_OPTS_WORDS`] that [`GENEVE_OPTS_SHORT`] bytes of
/// options span.
const OPTS_SPAN: usize = MD_GENEVE - MD_OPTS_WORDS + GENEVE_OPTS_SHORT;
/// Most GENEVE option bytes [`geneve_opts_short`] takes (OVN's one option is 8).
const GENEVE_OPTS_SHORT: usize = 28;
const _: () = assert!(OPTS_SPAN.is_multiple_of(8));

/// [`put_geneve_opts`] for at most [`GENEVE_OPTS_SHORT`] bytes of options, as whole words
/// from one fixed-size read (the 4 bytes before the options and what follows them, masked
/// off): no variable-length copy or fill, which cost a call to `memcpy` and one to `memset` a
/// packet. False, with nothing written, for longer options or when `d` ends before
/// [`OPTS_SPAN`] bytes from 4 bytes before the options (an inner frame that short).
#[inline(always)]
fn geneve_opts_short(md: &mut [u8; TNL_MD_LEN], d: &[u8], opts: usize, opt_len: usize) -> bool {
    let lead = MD_GENEVE - MD_OPTS_WORDS;
    if opt_len > GENEVE_OPTS_SHORT || opts < lead {
        return false;
    }
    let Some(src) = d
        .get(opts - lead..)
        .and_then(|s| s.first_chunk::<OPTS_SPAN>())
    else {
        return false;
    };
    let end = lead + opt_len;
    let words: [u8; OPTS_SPAN] =
        std::array::from_fn(|k| if k >= lead && k < end { src[k] } else { 0 });
    md[MD_OPTS_WORDS..MD_OPTS_WORDS + OPTS_SPAN].copy_from_slice(&words);
    true
}

/// GRE without checksum or sequence number over IPv4 without options: as [`udp4_fast`].
#[inline(always)]
fn gre4_fast(pkt: &mut Packet, l3: usize) -> bool {
    let verified = pkt.meta.rx_csum;
    let (md, d) = pkt.tnl_md_and_data_mut();
    // IPv4, GRE with a key.
    let Some(h) = d.get(l3..).and_then(|s| s.first_chunk::<28>()) else {
        return false;
    };
    let tot = usize::from(be16_of(h, 2));
    let gflags = be16_of(h, 20);
    let hsum = ne32(h, 0) + ne32(h, 4) + ne32(h, 8) + ne32(h, 12) + ne32(h, 16);
    if h[0] != 0x45
        || h[9] != IPPROTO_GRE
        || (h[6] & 0x3f) | h[7] != 0
        || tot < 28
        || l3 + tot > d.len()
        || gflags & !GRE_K != 0
        || (verified & RX_CSUM_IP_GOOD == 0 && checksum::finish_native(hsum) != 0xffff)
    {
        return false;
    }
    let packet_type = match be16_of(h, 22) {
        ETH_TYPE_TEB => 0,
        t @ (ETH_TYPE_IPV4 | ETH_TYPE_IPV6 | ETH_TYPE_MPLS | ETH_TYPE_MPLS_MCAST) => {
            (1 << 16) | u32::from(t)
        }
        _ => return false,
    };
    let mut flags = 0;
    let (key, start) = if gflags & GRE_K != 0 {
        flags |= tun_flags::KEY;
        (u64::from(be32(h, 24)), l3 + 28)
    } else {
        (0, l3 + 24)
    };
    md[MD_TUN_ID..MD_TUN_ID + 8].copy_from_slice(&key.to_be_bytes());
    md_ipv4(md, h);
    md[MD_FLAGS] = flags;
    md[MD_GENEVE_LEN] = 0;
    md[MD_TP_SRC..MD_TP_DST + 2].fill(0);
    popped(pkt, start, l3 + tot, packet_type, TnlMd::Ipv4);
    true
}

/// The general `tnl_pop`: every shape, and the reason for a drop.
#[inline(never)]
fn tnl_pop_checked(pkt: &mut Packet, kind: TunnelKind) -> Result<(), TnlPopDrop> {
    let whole = crate::gso_tunnel::is_received(pkt);
    let l3 = l3_start(pkt)?;
    let (md, d) = pkt.tnl_md_and_data_mut();
    let mut o = outer_ip(d, l3, md, whole)?;
    let inner = match kind {
        TunnelKind::Vxlan { .. } => udp_tunnel::<false>(d, &mut o, md, whole)?,
        TunnelKind::Geneve { .. } => udp_tunnel::<true>(d, &mut o, md, whole)?,
        TunnelKind::Gre => gre_tunnel(d, &mut o, md)?,
    };
    md[MD_TOS] = o.tos;
    md[MD_TTL] = o.ttl;
    md[MD_FLAGS] = o.flags;
    let which = if o.v6 { TnlMd::Ipv6 } else { TnlMd::Ipv4 };
    popped(pkt, inner.start, o.end, inner.packet_type, which);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::FlowKey;
    use flow::key::{GENEVE_OPTS_MAX, GENEVE_OPTS_OFS};

    use crate::tnl_md::{KEY_W_OPTS, md_to_key};

    /// A GENEVE frame over IPv4 (no UDP checksum) with `opts` and an inner frame of `inner`
    /// bytes.
    fn geneve_frame(opts: &[u8], inner: usize) -> Vec<u8> {
        let udp_len = 8 + 8 + opts.len() + inner;
        let mut f = vec![0u8; 12];
        f.extend([0x08, 0x00]);
        let mut ip = vec![0x45, 0];
        ip.extend(((20 + udp_len) as u16).to_be_bytes());
        ip.extend([0, 0, 0x40, 0, 64, IPPROTO_UDP, 0, 0]);
        ip.extend([172, 17, 2, 160, 172, 17, 2, 60]);
        let c = wire::checksum::data(&ip);
        ip[10..12].copy_from_slice(&(!c).to_be_bytes());
        f.extend(ip);
        f.extend([0xc0, 0x00]);
        f.extend(GENEVE_PORT.to_be_bytes());
        f.extend((udp_len as u16).to_be_bytes());
        f.extend([0, 0]);
        f.extend([(opts.len() / 4) as u8, 0, 0x65, 0x58, 0, 0, 3, 0]);
        f.extend(opts);
        f.extend((0..inner).map(|i| i as u8 | 0x80));
        f
    }

    /// Whatever the option length and however short the inner frame (the options' straight
    /// copy reads a fixed span past them), the next pass's key holds the options and zeros
    /// after them, over a metadata area full of stale bytes; by the straight pop (the header
    /// offsets known) and by the general one.
    #[test]
    fn geneve_options_reach_the_key_with_zeros_after_them() {
        for (n_opts, inner, l3) in (0..16usize)
            .flat_map(|n| [14, 20, 27, 28, 40, 64].map(|i| (n, i)))
            .flat_map(|(n, i)| [14, NO_OFS].map(|l3| (n, i, l3)))
        {
            let opts: Vec<u8> = (0..n_opts * 4).map(|i| 0x11 + i as u8).collect();
            let frame = geneve_frame(&opts, inner);
            let mut p = Packet::from_slice(&frame);
            p.tnl_md_and_data_mut().0.fill(0xee);
            p.meta.l3 = l3;
            tnl_pop(&mut p, TunnelKind::GENEVE).unwrap();
            assert_eq!(p.len(), inner);
            let mut k = FlowKey::new();
            md_to_key(p.tnl_md(), TnlMd::Ipv4, &mut k);
            let mut got = [0u8; GENEVE_OPTS_MAX];
            assert_eq!(k.tun_geneve_opts(&mut got), opts.len());
            assert_eq!(&got[..opts.len()], &opts[..]);
            assert_eq!(k.ct_tp_src(), 0);
            assert_eq!(k.ct_tp_dst(), 0);
            // The option words' bytes after the options.
            let words = if opts.is_empty() {
                0
            } else {
                (MD_GENEVE - MD_OPTS_WORDS + opts.len()).div_ceil(8)
            };
            let after = GENEVE_OPTS_OFS + opts.len();
            let end = KEY_W_OPTS * 8 + 8 * words;
            for ofs in after..end.max(after) {
                let b = k.word(ofs / 8).to_ne_bytes()[ofs % 8];
                assert_eq!(b, 0, "{n_opts} options, inner {inner}: byte {ofs}");
            }
            assert_eq!(k.map() >> KEY_W_OPTS, (1u64 << words) - 1);
        }
    }
}
