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
pub(crate) const GSO_TCPV6: u8 = 4;
pub(crate) const GSO_ECN: u8 = 0x80;

/// Why a received frame's header made it a drop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RxDrop {
    /// A GSO frame of a type not taken (UDP, USO), or any GSO frame without `tso`.
    GsoType,
    /// A TCP super-frame whose `gso_size` is below [`datapath::gso::MIN_MSS`].
    GsoSize,
    /// A TCP super-frame whose headers are not what its `gso_type` says: not TCP over IPv4
    /// (`TCPV4`) or IPv6 (`TCPV6`), an IPv4 fragment, a header cut short.
    GsoHeader,
    /// A TCP super-frame whose IP packet is longer than 64 KiB.
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
    fn name(self) -> &'static str {
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

/// Applies the received header `hdr` (at least [`HDR_LEN_LEGACY`] bytes) to the packet `p`
/// holding the frame, as [`accept_rx`] does; a TCP super-frame gets its `gso_size` and must
/// have the headers its `gso_type` says, within 64 KiB. Returns the `gso_size` (0 for an
/// ordinary frame).
#[inline(always)]
pub(crate) fn accept(hdr: &[u8], p: &mut Packet, tso: bool) -> Result<u16, RxDrop> {
    let gso_size = accept_rx(hdr, p.data_mut(), tso)?;
    if gso_size != 0 {
        p.meta.gso_size = gso_size;
        check_super(p, hdr[1] & !GSO_ECN == GSO_TCPV6)?;
    }
    Ok(gso_size)
}

/// Whether super-frame `p` is TCP over IPv6 (`ipv6`) or IPv4, its IP packet within 64 KiB.
#[cold]
#[inline(never)]
fn check_super(p: &Packet, ipv6: bool) -> Result<(), RxDrop> {
    let t = TcpSuper::of(p).map_err(|e| match e {
        GsoError::TooLong => RxDrop::GsoLength,
        GsoError::MssTooSmall => RxDrop::GsoSize,
        GsoError::NotTcp | GsoError::Malformed => RxDrop::GsoHeader,
    })?;
    if t.ipv6 != ipv6 {
        return Err(RxDrop::GsoHeader);
    }
    Ok(())
}

/// Applies the received header `hdr` (at least [`HDR_LEN_LEGACY`] bytes) to `frame`: a
/// partial checksum is completed in software; a TCP super-frame (taken only with `tso`) is
/// left as it is, its partial checksum left for the way out ([`datapath::gso`]), and its MSS
/// returned (0 for an ordinary frame).
#[inline(always)]
fn accept_rx(hdr: &[u8], frame: &mut [u8], tso: bool) -> Result<u16, RxDrop> {
    if hdr[1] != GSO_NONE {
        let ty = hdr[1] & !GSO_ECN;
        let gso_size = u16::from_le_bytes([hdr[4], hdr[5]]);
        if !tso || !matches!(ty, GSO_TCPV4 | GSO_TCPV6) {
            return Err(RxDrop::GsoType);
        }
        if gso_size < datapath::gso::MIN_MSS {
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

/// The header of super-frame `p` for the receiver to segment it (`NEEDS_CSUM` at the TCP
/// checksum, `gso_type` `TCPV4`/`TCPV6` with `ECN` when the frame has CWR set, `gso_size`,
/// `hdr_len` all headers), after making its lengths and TCP checksum field what that needs
/// (the pseudo-header sum, Linux's `CHECKSUM_PARTIAL` convention); `None` when it is not TCP
/// over IP.
pub(crate) fn gso_hdr(p: &mut Packet) -> Option<[u8; HDR_LEN]> {
    let t = datapath::gso::prepare_partial(p).ok()?;
    let mut ty = if t.ipv6 { GSO_TCPV6 } else { GSO_TCPV4 };
    if datapath::gso::has_cwr(p, &t) {
        ty |= GSO_ECN;
    }
    let mut h = [0u8; HDR_LEN];
    h[0] = F_NEEDS_CSUM;
    h[1] = ty;
    h[2..4].copy_from_slice(&(t.hdr_len as u16).to_le_bytes());
    h[4..6].copy_from_slice(&p.meta.gso_size.to_le_bytes());
    h[6..8].copy_from_slice(&(t.l4 as u16).to_le_bytes());
    h[8..10].copy_from_slice(&16u16.to_le_bytes());
    Some(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_types_other_than_tcp_are_refused() {
        let mut f = [0u8; 60];
        let mut h = [0u8; HDR_LEN];
        assert_eq!(accept_rx(&h, &mut f, true), Ok(0));
        h[1] = GSO_TCPV4;
        h[4] = 0xa8;
        h[5] = 0x05;
        assert_eq!(accept_rx(&h, &mut f, true), Ok(1448));
        assert_eq!(accept_rx(&h, &mut f, false), Err(RxDrop::GsoType));
        h[1] = 3; // UDP
        assert_eq!(accept_rx(&h, &mut f, true), Err(RxDrop::GsoType));
        // An MSS below what any TCP sends: 65 000 segments of a 64 KiB frame for a gso_size of 1.
        h[1] = GSO_TCPV4;
        for (mss, ok) in [(1u16, false), (47, false), (48, true)] {
            h[4..6].copy_from_slice(&mss.to_le_bytes());
            let want = if ok { Ok(mss) } else { Err(RxDrop::GsoSize) };
            assert_eq!(accept_rx(&h, &mut f, true), want, "gso_size {mss}");
        }
        let mut h = [0u8; HDR_LEN];
        h[0] = F_NEEDS_CSUM;
        h[6] = 58;
        h[8] = 16;
        assert_eq!(accept_rx(&h, &mut f, true), Err(RxDrop::BadCsum));
    }
}
