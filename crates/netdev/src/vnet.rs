//! The virtio-net header (virtio 1.x §5.1.6, `struct virtio_net_hdr`) that travels in front of
//! every frame on the two virtio-speaking ports: `tap` (the kernel's legacy layout, in the
//! host's byte order) and `vhostuser` (virtio 1.x, little-endian). flowpath runs on
//! little-endian x86-64 only, where the two layouts are the same bytes, so one reader and one
//! writer serve both.
//!
//! Layout: `flags` (u8), `gso_type` (u8), `hdr_len`, `gso_size`, `csum_start`,
//! `csum_offset` (u16 each), and with `VIRTIO_NET_F_MRG_RXBUF` or virtio 1.x a `num_buffers`
//! (u16) at offset 10.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use datapath::gso::{GsoError, TcpSuper};
use datapath::gso_udp::{self, UdpSuper};
use datapath::gso_ufo::{self, UfoSuper};
use datapath::packet::Packet;

use crate::csum;

/// Bytes of the header with `num_buffers` (`virtio_net_hdr_mrg_rxbuf`, and every virtio 1.x
/// device).
pub const HDR_LEN: usize = 12;
/// Bytes of the legacy header without `num_buffers`.
pub const HDR_LEN_LEGACY: usize = 10;

pub(crate) const F_NEEDS_CSUM: u8 = 1;
pub(crate) const GSO_NONE: u8 = 0;
pub(crate) const GSO_TCPV4: u8 = 1;
/// UDP fragmentation (UFO, `VIRTIO_NET_HDR_GSO_UDP`): IP fragments of `gso_size` payload.
pub(crate) const GSO_UDP: u8 = 3;
pub(crate) const GSO_TCPV6: u8 = 4;
/// UDP segmentation (USO, `VIRTIO_NET_HDR_GSO_UDP_L4`): datagrams of `gso_size` payload.
pub(crate) const GSO_UDP_L4: u8 = 5;
pub(crate) const GSO_ECN: u8 = 0x80;

/// Why a received frame's header made it a drop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RxDrop {
    /// A GSO frame of a type not taken (USO or UFO where the port does not offer it), or any
    /// GSO frame without `tso`.
    GsoType,
    /// A TCP super-frame whose `gso_size` is below [`datapath::gso::MIN_MSS`], a UDP one
    /// whose `gso_size` makes more than [`datapath::gso_udp::MAX_SEGMENTS`] datagrams, a UFO
    /// one whose `gso_size` is not a multiple of 8 or makes more than
    /// [`datapath::gso_ufo::MAX_FRAGMENTS`] fragments.
    GsoSize,
    /// A super-frame whose headers are not what its `gso_type` says: not TCP over IPv4
    /// (`TCPV4`) or IPv6 (`TCPV6`), not UDP over IP (`UDP_L4`, `UDP`), an IPv4 fragment, a
    /// header cut short.
    GsoHeader,
    /// A super-frame whose IP packet is longer than 64 KiB.
    GsoLength,
    /// A partial checksum whose offsets do not fit the frame.
    BadCsum,
}

impl RxDrop {
    const ALL: [RxDrop; 5] = [
        RxDrop::GsoType,
        RxDrop::GsoSize,
        RxDrop::GsoHeader,
        RxDrop::GsoLength,
        RxDrop::BadCsum,
    ];

    /// The name of its count in a port's `xstats`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RxDrop::GsoType => "rx_drop_gso_type",
            RxDrop::GsoSize => "rx_drop_gso_size",
            RxDrop::GsoHeader => "rx_drop_gso_header",
            RxDrop::GsoLength => "rx_drop_gso_length",
            RxDrop::BadCsum => "rx_drop_bad_csum",
        }
    }
}

/// A port's received frames dropped for their virtio-net header (also in its `rx_dropped`),
/// by reason.
#[derive(Debug, Default)]
pub(crate) struct RxDrops([AtomicU64; RxDrop::ALL.len()]);

impl RxDrops {
    pub(crate) fn count(&self, why: RxDrop) {
        self.0[why as usize].fetch_add(1, Relaxed);
    }

    /// The reasons that dropped something, with their counts, for the port's `xstats`.
    pub(crate) fn xstats(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        RxDrop::ALL
            .iter()
            .map(|&r| (r.name().to_owned(), self.0[r as usize].load(Relaxed)))
            .filter(|(_, n)| *n > 0)
    }
}

/// The super-frames a port takes from its peer: TCP ones (`tso`), UDP segmentation ones
/// (`uso`) and UDP fragmentation ones (`ufo`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RxGso {
    /// `TCPV4` and `TCPV6`.
    pub(crate) tso: bool,
    /// `UDP_L4`.
    pub(crate) uso: bool,
    /// `UDP`.
    pub(crate) ufo: bool,
}

/// Applies the received header `hdr` (at least [`HDR_LEN_LEGACY`] bytes) to the packet `p`
/// holding the frame, as [`accept_rx`] does; a super-frame gets its `gso_size` (and a UFO one
/// its mark) and must have the headers its `gso_type` says, within 64 KiB. An ordinary
/// frame's partial checksum at its TCP or UDP checksum field is left pending
/// ([`datapath::csum_pending`]); one elsewhere is completed in software. Returns whether the
/// packet is a super-frame or pending (its batch must then be marked,
/// [`datapath::packet::Batch::mark_gso`]).
#[inline(always)]
pub(crate) fn accept(hdr: &[u8], p: &mut Packet, gso: RxGso) -> Result<bool, RxDrop> {
    if hdr[1] == GSO_NONE {
        if hdr[0] & F_NEEDS_CSUM == 0 {
            return Ok(false);
        }
        return accept_partial(hdr, p, gso);
    }
    let gso_size = accept_rx(hdr, p.data_mut(), gso)?;
    if gso_size != 0 {
        p.meta.gso_size = gso_size;
        if hdr[1] & !GSO_ECN == GSO_UDP {
            let csum = [hdr[0], hdr[6], hdr[7], hdr[8], hdr[9]];
            return accept_ufo(csum, p).map(|size| size != 0);
        }
        check_super(p, hdr[1] & !GSO_ECN)?;
    }
    Ok(gso_size != 0)
}

/// [`accept`] of an ordinary frame with a partial checksum: left pending where it is the
/// frame's TCP or UDP checksum, else completed.
#[inline(never)]
fn accept_partial(hdr: &[u8], p: &mut Packet, gso: RxGso) -> Result<bool, RxDrop> {
    if at_l4_csum(hdr, p) {
        p.meta.set_csum_pending(true);
        return Ok(true);
    }
    accept_rx(hdr, p.data_mut(), gso).map(|_| false)
}

/// Whether the partial checksum `hdr` says is the frame's TCP or UDP checksum (over IPv4
/// or IPv6, the IP packet within the frame): then it can be left pending, since whoever
/// completes it finds it again from the headers.
#[inline(always)]
fn at_l4_csum(hdr: &[u8], p: &Packet) -> bool {
    let start = usize::from(u16::from_le_bytes([hdr[6], hdr[7]]));
    let offset = usize::from(u16::from_le_bytes([hdr[8], hdr[9]]));
    matches!(
        datapath::csum_pending::L4Csum::find(p.headers(), 0),
        Some(at) if at.l4 == start && at.offset == offset
    )
}

/// The header of ordinary frame `p` whose checksum is pending, for a receiver that
/// completes it: `NEEDS_CSUM` at the TCP or UDP checksum, the field set to the pseudo-header
/// sum ([`datapath::csum_pending::prepare_partial`]). `None` (frame untouched) when its
/// headers are not TCP or UDP over IP any more.
pub(crate) fn csum_hdr(p: &mut Packet) -> Option<[u8; HDR_LEN]> {
    let at = datapath::csum_pending::prepare_partial(p)?;
    let mut h = [0u8; HDR_LEN];
    h[0] = F_NEEDS_CSUM;
    h[6..8].copy_from_slice(&(at.l4 as u16).to_le_bytes());
    h[8..10].copy_from_slice(&(at.offset as u16).to_le_bytes());
    Some(h)
}

/// [`accept`] of a UFO super-frame `p` (its `gso_size` set): marked UFO when its headers are
/// UDP over IP within the bounds of [`UfoSuper::of`]; one whose datagram fits `gso_size`
/// is an ordinary frame (as Linux's `virtio_net_hdr_to_skb` has it: "too small packets are
/// not really GSO ones"), its partial checksum completed. `csum` is the header's `flags`,
/// `csum_start` and `csum_offset` (by value: the header itself stays out of memory on the
/// way of every other frame).
#[cold]
#[inline(never)]
fn accept_ufo(csum: [u8; 5], p: &mut Packet) -> Result<u16, RxDrop> {
    let u = UfoSuper::of(p).map_err(why_super)?;
    if u.fits(p) {
        p.meta.gso_size = 0;
        let mut plain = [0u8; HDR_LEN_LEGACY];
        plain[0] = csum[0];
        plain[6..10].copy_from_slice(&csum[1..]);
        return accept_rx(&plain, p.data_mut(), RxGso::default());
    }
    p.meta.set_ufo(true);
    Ok(p.meta.gso_size)
}

/// The drop reason of a super-frame refused for `e`.
pub(crate) fn why_super(e: GsoError) -> RxDrop {
    match e {
        GsoError::TooLong => RxDrop::GsoLength,
        GsoError::MssTooSmall => RxDrop::GsoSize,
        GsoError::NotTcp | GsoError::Malformed => RxDrop::GsoHeader,
    }
}

/// Whether super-frame `p` has the headers of its `gso_type` `ty` (TCP over IPv6 or IPv4,
/// UDP over either), its IP packet within 64 KiB.
#[cold]
#[inline(never)]
fn check_super(p: &Packet, ty: u8) -> Result<(), RxDrop> {
    let why = why_super;
    if ty == GSO_UDP_L4 {
        UdpSuper::of(p).map_err(why)?;
        return Ok(());
    }
    let t = TcpSuper::of(p).map_err(why)?;
    if t.ipv6 != (ty == GSO_TCPV6) {
        return Err(RxDrop::GsoHeader);
    }
    Ok(())
}

/// Applies the received header `hdr` (at least [`HDR_LEN_LEGACY`] bytes) to `frame`: a
/// partial checksum is completed in software; a super-frame (TCP taken only with `gso.tso`,
/// UDP segmentation only with `gso.uso`, UDP fragmentation only with `gso.ufo`) is left as it
/// is, its partial checksum left for the way out
/// ([`datapath::gso`], [`datapath::gso_udp`]), and its `gso_size` returned (0 for an
/// ordinary frame).
#[inline(always)]
fn accept_rx(hdr: &[u8], frame: &mut [u8], gso: RxGso) -> Result<u16, RxDrop> {
    if hdr[1] != GSO_NONE {
        let ty = hdr[1] & !GSO_ECN;
        let gso_size = u16::from_le_bytes([hdr[4], hdr[5]]);
        let (taken, min) = match ty {
            GSO_TCPV4 | GSO_TCPV6 => (gso.tso, datapath::gso::MIN_MSS),
            GSO_UDP_L4 => (gso.uso && hdr[1] & GSO_ECN == 0, 1),
            // With or without ECN, which Linux takes on UFO (and ignores).
            GSO_UDP => (gso.ufo, 1),
            _ => (false, 0),
        };
        if !taken {
            return Err(RxDrop::GsoType);
        }
        if gso_size < min {
            return Err(RxDrop::GsoSize);
        }
        return Ok(gso_size);
    }
    if hdr[0] & F_NEEDS_CSUM != 0 {
        let start = usize::from(u16::from_le_bytes([hdr[6], hdr[7]]));
        let offset = usize::from(u16::from_le_bytes([hdr[8], hdr[9]]));
        if !csum::complete(frame, start, offset) {
            return Err(RxDrop::BadCsum);
        }
    }
    Ok(0)
}

/// The header of super-frame `p` for the receiver to segment it, after making its lengths
/// and checksum field what that needs (the pseudo-header sum, Linux's `CHECKSUM_PARTIAL`
/// convention): for a TCP one `NEEDS_CSUM` at the TCP checksum, `gso_type` `TCPV4`/`TCPV6`
/// with `ECN` when the frame has CWR set; for a UDP one (only where the receiver takes USO:
/// the caller's to know) `NEEDS_CSUM` at the UDP checksum, `gso_type` `UDP_L4`; for a UFO one
/// (where the receiver takes UFO) the same with `gso_type` `UDP`; `gso_size`, `hdr_len` all
/// headers. `None` when it is neither TCP nor UDP over IP.
pub(crate) fn gso_hdr(p: &mut Packet) -> Option<[u8; HDR_LEN]> {
    let (ty, hdr_len, l4, csum_offset) = if gso_ufo::is_ufo(p) {
        let u = UfoSuper::prepare_partial(p).ok()?;
        (GSO_UDP, u.l4 + 8, u.l4, 6u16)
    } else if gso_udp::is_udp(p) {
        let u = UdpSuper::prepare_partial(p).ok()?;
        (GSO_UDP_L4, u.hdr_len(), u.l4, 6u16)
    } else {
        let t = datapath::gso::prepare_partial(p).ok()?;
        let mut ty = if t.ipv6 { GSO_TCPV6 } else { GSO_TCPV4 };
        if datapath::gso::has_cwr(p, &t) {
            ty |= GSO_ECN;
        }
        (ty, t.hdr_len, t.l4, 16)
    };
    let mut h = [0u8; HDR_LEN];
    h[0] = F_NEEDS_CSUM;
    h[1] = ty;
    h[2..4].copy_from_slice(&(hdr_len as u16).to_le_bytes());
    h[4..6].copy_from_slice(&p.meta.gso_size.to_le_bytes());
    h[6..8].copy_from_slice(&(l4 as u16).to_le_bytes());
    h[8..10].copy_from_slice(&csum_offset.to_le_bytes());
    Some(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_types_not_offered_are_refused() {
        const TSO: RxGso = RxGso {
            tso: true,
            uso: false,
            ufo: false,
        };
        const BOTH: RxGso = RxGso {
            tso: true,
            uso: true,
            ufo: false,
        };
        const UFO: RxGso = RxGso {
            tso: true,
            uso: false,
            ufo: true,
        };
        let mut f = [0u8; 60];
        let mut h = [0u8; HDR_LEN];
        assert_eq!(accept_rx(&h, &mut f, TSO), Ok(0));
        h[1] = GSO_TCPV4;
        h[4] = 0xa8;
        h[5] = 0x05;
        assert_eq!(accept_rx(&h, &mut f, TSO), Ok(1448));
        assert_eq!(
            accept_rx(&h, &mut f, RxGso::default()),
            Err(RxDrop::GsoType)
        );
        h[1] = GSO_UDP;
        assert_eq!(accept_rx(&h, &mut f, BOTH), Err(RxDrop::GsoType));
        assert_eq!(accept_rx(&h, &mut f, UFO), Ok(1448));
        h[1] = GSO_UDP | GSO_ECN;
        assert_eq!(accept_rx(&h, &mut f, UFO), Ok(1448));
        h[1] = GSO_UDP_L4;
        assert_eq!(accept_rx(&h, &mut f, TSO), Err(RxDrop::GsoType));
        assert_eq!(accept_rx(&h, &mut f, BOTH), Ok(1448));
        h[1] = GSO_UDP_L4 | GSO_ECN;
        assert_eq!(accept_rx(&h, &mut f, BOTH), Err(RxDrop::GsoType));
        h[1] = GSO_UDP_L4;
        h[4..6].fill(0);
        assert_eq!(accept_rx(&h, &mut f, BOTH), Err(RxDrop::GsoSize));
        // An MSS below what any TCP sends: 65 000 segments of a 64 KiB frame for a gso_size of 1.
        h[1] = GSO_TCPV4;
        for (mss, ok) in [(1u16, false), (47, false), (48, true)] {
            h[4..6].copy_from_slice(&mss.to_le_bytes());
            let want = if ok { Ok(mss) } else { Err(RxDrop::GsoSize) };
            assert_eq!(accept_rx(&h, &mut f, TSO), want, "gso_size {mss}");
        }
        let mut h = [0u8; HDR_LEN];
        h[0] = F_NEEDS_CSUM;
        h[6] = 58;
        h[8] = 16;
        assert_eq!(accept_rx(&h, &mut f, TSO), Err(RxDrop::BadCsum));
    }
}
