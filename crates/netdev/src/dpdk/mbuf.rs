//! Packets in mbufs, both ways: zero copy between DPDK ports.
//!
//! Every mempool of a DPDK port is made with a private area of [`MD_LEN`] bytes, so that an
//! mbuf is laid out as the switch lays out its own buffers: the `rte_mbuf` structure
//! ([`MBUF_SIZE`] bytes), then the private area, which holds the packet's tunnel and
//! connection metadata, then DPDK's headroom and the frame. A frame received into such an mbuf
//! becomes a packet whose buffer *is* the mbuf ([`Packet::from_foreign`], starting at the
//! private area); it crosses the datapath there, and a DPDK port sends it by handing the same
//! mbuf to its device ([`mbuf_of`]). Frames of other ports' buffers are copied into fresh mbufs
//! on the way out, and a DPDK-received packet that leaves by another kind of port is copied
//! there and its mbuf freed, as OVS does.
//!
//! What does not fit the model is copied, as before: chained mbufs (a jumbo frame over several
//! segments), and mbufs whose buffer is not where the layout puts it (indirect or external
//! buffers, another pool's layout).

use std::ptr::NonNull;
use std::sync::OnceLock;

use datapath::packet::{Batch, ForeignOwner, MD_LEN, Packet, Pool};
use dpdk_sys::{MBUF_SIZE, MbufHead};

/// The private area each mbuf of the ports' mempools has: the packet metadata areas.
pub(crate) const PRIV_SIZE: u16 = MD_LEN as u16;

/// Gives an mbuf back to its pool, from a packet's buffer start.
///
/// # Safety
/// `base` is `MBUF_SIZE` bytes past an mbuf that a packet owned ([`push_packet`]).
unsafe fn release(base: NonNull<u8>) {
    // SAFETY: by the contract, the mbuf structure is just before `base`, and this is the
    // one release of an mbuf the packet owned.
    unsafe { dpdk_sys::fp_free(base.as_ptr().sub(MBUF_SIZE).cast::<MbufHead>()) };
}

/// The datapath's permission to hold mbufs as packet buffers (registered once).
fn owner() -> ForeignOwner {
    static OWNER: OnceLock<ForeignOwner> = OnceLock::new();
    *OWNER.get_or_init(|| {
        ForeignOwner::register(release).expect("mbufs are the only foreign packet buffers")
    })
}

/// Appends to `batch` a packet of received mbuf `m`: the mbuf itself when the model allows,
/// else a copy in a buffer of `pool` (and `m` is freed). Returns the frame's length.
///
/// The packet is finished in its place in the batch ([`Batch::push_last`]): made whole and
/// then moved in, its receive checksum verdict, stored a byte wide, made the move's wide
/// loads wait for the store buffer to drain, once a packet (the receive's costliest load).
///
/// # Safety
/// `m` is a valid mbuf the caller owns; ownership passes to the packet (or it is freed).
#[inline]
pub(crate) unsafe fn push_packet(
    m: *mut MbufHead,
    pool: &mut Pool,
    in_port: u32,
    batch: &mut Batch,
) -> usize {
    // SAFETY: the caller owns `m`.
    let head = unsafe { &*m };
    let csum = rx_csum(head);
    let base = m.cast::<u8>().wrapping_add(MBUF_SIZE);
    let laid_out = head.buf_addr == base.wrapping_add(MD_LEN);
    if laid_out && head.nb_segs == 1 && head.refcnt == 1 {
        let start = MD_LEN + usize::from(head.data_off);
        let len = usize::from(head.data_len);
        let cap = MD_LEN + usize::from(head.buf_len);
        // SAFETY: the mbuf's private area (MD_LEN bytes, in the mempool's memory, which DPDK
        // zeroes) is followed by its buf_len-byte buffer holding the frame at data_off; the
        // packet owns the mbuf until it releases it or a port sends it. `base` is not null.
        let p = batch.push_last(unsafe {
            Packet::from_foreign(
                owner(),
                NonNull::new_unchecked(base),
                cap,
                start,
                len,
                in_port,
            )
        });
        p.meta.rx_csum = csum;
        return len;
    }
    // SAFETY: the caller owns `m` and its chain.
    let p = batch.push_last(unsafe { copy_chain(m, pool, in_port) });
    p.meta.rx_csum = csum;
    // SAFETY: nothing refers to `m` any more.
    unsafe { dpdk_sys::fp_free(m) };
    p.len()
}

/// A copy of the frame of mbuf chain `m` in a buffer of `pool`.
///
/// # Safety
/// `m` is a valid mbuf chain.
#[cold]
unsafe fn copy_chain(m: *mut MbufHead, pool: &mut Pool, in_port: u32) -> Packet {
    // SAFETY: the caller's contract.
    let len = unsafe { (*m).pkt_len } as usize;
    let mut p = pool.packet_with_len(len, in_port);
    let out = p.data_mut();
    let mut at = 0;
    let mut seg: *const MbufHead = m;
    while !seg.is_null() && at < len {
        // SAFETY: every segment of the chain is a valid mbuf owned with `m`.
        let s = unsafe { &*seg };
        let l = usize::from(s.data_len).min(len - at);
        // SAFETY: the segment holds data_len bytes at buf_addr + data_off.
        let src = unsafe { std::slice::from_raw_parts(s.buf_addr.add(usize::from(s.data_off)), l) };
        out[at..at + l].copy_from_slice(src);
        at += l;
        seg = s.next;
    }
    p.truncate(at);
    p
}

/// For a packet in an mbuf ([`push_packet`]): the mbuf, set up to send the packet's frame as
/// it is now, and now the caller's. A frame longer than `max_frame` is dropped (its mbuf
/// freed): `Err(None)`. A packet of the switch's own memory comes back: `Err(Some(p))`.
#[inline]
pub(crate) fn mbuf_of(p: Packet, max_frame: usize) -> Result<*mut MbufHead, Option<Packet>> {
    let (base, start, len) = p.into_foreign().map_err(Some)?;
    let m = base.as_ptr().wrapping_sub(MBUF_SIZE).cast::<MbufHead>();
    if len > max_frame {
        // SAFETY: the packet gave its mbuf up to us; nothing refers to it.
        unsafe { dpdk_sys::fp_free(m) };
        return Err(None);
    }
    // SAFETY: every foreign packet buffer is an mbuf's, MBUF_SIZE bytes past its structure
    // (`push_packet`); the packet gave it up, so it is ours to change. The frame lies within
    // the mbuf's buffer (the packet keeps it there), so data_off fits its u16.
    unsafe {
        let head = &mut *m;
        head.data_off = (start - MD_LEN) as u16;
        head.data_len = len as u16;
        head.pkt_len = len as u32;
        head.ol_flags = 0;
    }
    Ok(m)
}

/// How a device that segments TCP itself bounds its segments.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TsoLimit {
    /// The port's MTU.
    pub mtu: usize,
    /// Whether the device counts the Ethernet header in the MTU when it checks a segment's
    /// size: DPDK 22.11's `net_tap` refuses a super-frame whose MSS plus *all* headers exceeds
    /// its MTU (so a 1500-byte MTU and an MSS of 1448 with a 66-byte header fail), where a NIC
    /// bounds the IP packet only.
    pub l2_in_mtu: bool,
}

/// For a device that segments TCP itself: TCP super-frame `p` in a chain of mbufs of `pool`
/// (`room` bytes of frame each), set up for the device to cut into segments with their
/// checksums: of `gso_size` payload bytes, or fewer where the device's `limit` wants
/// (smaller segments than the sender's MSS are ordinary TCP). `None` when it is not TCP over
/// IP or the pool is short: the caller drops it.
pub(crate) fn tso_chain(
    p: &mut Packet,
    pool: *mut dpdk_sys::RteMempool,
    room: usize,
    limit: TsoLimit,
) -> Option<*mut MbufHead> {
    let t = datapath::gso::prepare_partial(p).ok()?;
    let bound = if limit.l2_in_mtu {
        limit.mtu
    } else {
        limit.mtu + t.l3
    };
    let mss = t.mss.min(bound.checked_sub(t.hdr_len)?);
    if mss < usize::from(datapath::gso::MIN_MSS) {
        return None;
    }
    let frame = p.data();
    let n = frame.len().div_ceil(room);
    if t.hdr_len > room || n > MAX_CHAIN {
        return None;
    }
    let mut segs = [std::ptr::null_mut::<MbufHead>(); MAX_CHAIN];
    // SAFETY: `segs` has room for n <= MAX_CHAIN pointers; `pool` is a live mempool.
    if unsafe { dpdk_sys::fp_alloc_bulk(pool, segs.as_mut_ptr(), n as u32) } != 0 {
        return None;
    }
    for (k, piece) in frame.chunks(room).enumerate() {
        // SAFETY: segs[..n] are fresh mbufs owned here, each with `room` bytes free from
        // data_off (the port's data room), and `piece` is at most `room` bytes.
        unsafe {
            let s = &mut *segs[k];
            std::ptr::copy_nonoverlapping(
                piece.as_ptr(),
                s.buf_addr.add(usize::from(s.data_off)),
                piece.len(),
            );
            s.data_len = piece.len() as u16;
            s.next = if k + 1 < n {
                segs[k + 1]
            } else {
                std::ptr::null_mut()
            };
        }
    }
    let head = segs[0];
    // SAFETY: `head` starts the chain built above, which holds the headers whole in its first
    // segment (hdr_len <= room).
    unsafe {
        (*head).nb_segs = n as u16;
        (*head).pkt_len = frame.len() as u32;
        dpdk_sys::fp_tx_tso(
            head,
            t.l3 as u16,
            (t.l4 - t.l3) as u16,
            (t.hdr_len - t.l4) as u16,
            mss as u16,
            i32::from(t.ipv6),
        );
    }
    Some(head)
}

/// Makes frame `p`, whose checksum is pending, ready for a device that completes TCP and
/// UDP checksums: the field set to the pseudo-header sum with the L4 length (what DPDK wants
/// without TSO). Returns where the headers are; `None` when the device cannot be asked (its
/// headers are no longer TCP or UDP over IP, or IPv6 extension headers, which a device sums
/// into its pseudo-header): the frame is then completed in software.
pub(crate) fn tx_csum_prepare(p: &mut Packet) -> Option<datapath::csum_pending::L4Csum> {
    let at = datapath::csum_pending::L4Csum::find(p.data(), p.meta.packet_type)
        .filter(|at| !at.ipv6 || at.l4 - at.l3 == 40);
    if at.is_none() {
        datapath::csum_pending::complete(p);
        return None;
    }
    datapath::csum_pending::prepare_partial(p)
}

/// Sets single-segment mbuf `m` for the device to complete the checksum found as `at`
/// ([`tx_csum_prepare`]).
pub(crate) fn tx_csum(m: *mut MbufHead, at: &datapath::csum_pending::L4Csum) {
    // SAFETY: `m` is a filled mbuf owned by the caller, holding the frame `at` was found in.
    unsafe {
        dpdk_sys::fp_tx_csum(
            m,
            at.l3 as u16,
            (at.l4 - at.l3) as u16,
            i32::from(at.ipv6),
            i32::from(at.offset == 6),
        );
    }
}

/// Most mbufs a super-frame takes: 64 KiB and its headers in 1 KiB pieces.
const MAX_CHAIN: usize = 72;

/// The device's verdict on received mbuf `m`'s checksums, for the packet: IPv4 header and
/// TCP/UDP checksums verified good ([`datapath::packet::RX_CSUM_IP_GOOD`],
/// [`datapath::packet::RX_CSUM_L4_GOOD`]).
#[inline]
pub(crate) fn rx_csum(head: &MbufHead) -> u8 {
    let mut v = 0;
    if head.ol_flags & dpdk_sys::RX_IP_CKSUM_MASK == dpdk_sys::RX_IP_CKSUM_GOOD {
        v |= datapath::packet::RX_CSUM_IP_GOOD;
    }
    if head.ol_flags & dpdk_sys::RX_L4_CKSUM_MASK == dpdk_sys::RX_L4_CKSUM_GOOD {
        v |= datapath::packet::RX_CSUM_L4_GOOD;
    }
    v
}
