//! Packet buffers, per-PMD buffer pools and batches.
//!
//! A [`Packet`] owns a buffer with [`HEADROOM`] bytes in front of the frame, so that tunnel
//! encapsulation and VLAN/MPLS pushes prepend headers without moving the payload. Buffers come
//! from a [`Pool`] owned by one PMD thread and go back to it when a port has sent or dropped
//! them; after warm-up the pool recycles buffers and the per-packet path allocates nothing.
//! A [`Batch`] holds up to [`MAX_BURST`] packets, one rx burst, and keeps its capacity.
//!
//! Every buffer starts with a fixed **tunnel metadata area** of [`TNL_MD_LEN`] bytes, before
//! the headroom, which no push can reach: `tnl_pop` writes the outer headers' metadata there
//! (in the flow key's layout, see [`crate::tnl_md`]) and [`PacketMeta::tunnel`] says whether it
//! is valid. The key is rebuilt for every datapath pass, so this is how the tunnel metadata
//! follows a packet into the pass after the pop and into any later recirculation, without an
//! allocation or a wider [`Packet`]. A recycled buffer starts with `tunnel` clear, so whatever
//! stale bytes its area holds are never read; copies of a packet copy the valid part.
//!
//! After it comes the **connection metadata area** of [`CT_MD_LEN`] bytes: the connection
//! label and original-direction tuple that `ct()` found, in the flow key's layout (words 22-23
//! and 28-32) and the mark, valid when [`PacketMeta::ct_state`] is not zero. The state and
//! zone are in [`PacketMeta`] itself.
//!
//! ```text
//! buffer: | tunnel metadata (320) | ct metadata (64) | headroom (384, shrinks on push) | frame | tailroom |
//! ```
//!
//! # Size classes and TCP super-frames
//! A pool has two size classes: [`BUF_SIZE`] buffers for frames up to [`BUF_ROOM`] bytes (every
//! ordinary frame), and [`LARGE_BUF_SIZE`] buffers for frames up to [`LARGE_ROOM`] bytes: jumbo
//! frames and the TCP super-frames (up to 64 KiB of IP packet) that a TSO-capable port (a
//! `tap`) receives. Large buffers are made on demand, kept up to [`LARGE_SPARE`] of them, and
//! recycled like the small ones, so super-frames do not allocate once the pool is warm either.
//! A super-frame carries its MSS in [`PacketMeta::gso_size`]; [`crate::gso`] cuts it into
//! segments before it reaches a port that cannot.
//!
//! # Lent frames
//! A receive path whose frames sit in memory the switch may read until it says it is done
//! (a guest's transmit buffers, `vhost`) can lend the frame instead of copying it whole
//! ([`Pool::packet_lent`]): the packet's buffer gets the first [`LENT_HEAD`] bytes, every
//! header the switch parses, and the rest stays where it is. Only a pool the PMD allows to
//! ([`Pool::allow_lending`]) lends. The PMD keeps a lent packet only on its way to an output
//! whose queue copies the rest from the lender ([`crate::port::TxQueue::takes_lent`]); any
//! other use first brings the rest into the buffer ([`Pool::materialize`]). When the burst's
//! packets are sent or dropped, the PMD ends the lending ([`Pool::end_lending`]) and the rx
//! queue gives the buffers back to their owner ([`crate::port::RxQueue::release`]).

mod buf;

pub use crate::tnl_md::{TNL_MD_LEN, TnlMd};
pub use buf::{ForeignOwner, ReleaseFn};

use buf::Buf;

/// Bytes of the connection metadata area, after the tunnel metadata area: the label (16
/// bytes), the connection tuple (36 bytes, at [`CT_MD_TUPLE`]) and its protocol, and the mark
/// (layout in [`crate::ct`]).
pub const CT_MD_LEN: usize = 64;

/// Offset of the connection tuple in the connection metadata area.
pub const CT_MD_TUPLE: usize = 16;

/// Bytes before the headroom: both metadata areas (a foreign buffer's owner keeps them in
/// front of its own headroom, see [`Packet::from_foreign`]).
pub const MD_LEN: usize = TNL_MD_LEN + CT_MD_LEN;

/// Bytes reserved in front of every frame for headers pushed later: the largest `tnl_push`
/// header (Ethernet, 802.1Q, IPv6, UDP, GENEVE with 252 bytes of options: 330 bytes with a
/// tag pushed after it), rounded up. A push beyond it would grow the buffer, which the pool
/// then cannot recycle: an allocation per packet.
pub const HEADROOM: usize = 384;

/// Offset of the frame in a fresh buffer: after the tunnel metadata area and the headroom.
const FRAME_OFS: usize = MD_LEN + HEADROOM;

/// Room for the frame after the headroom in a pool buffer: a 1518-byte frame plus tunnel
/// headers. Larger frames get a buffer of their own size (not recycled).
pub const BUF_ROOM: usize = 2048;

/// Size of a pool buffer (even, as every buffer of the switch's own: see the `buf` module).
pub const BUF_SIZE: usize = FRAME_OFS + BUF_ROOM;
const _: () = assert!(BUF_SIZE.is_multiple_of(2) && LARGE_BUF_SIZE.is_multiple_of(2));

/// Room for the frame after the headroom in a large pool buffer: a 64 KiB IP packet (a TCP
/// super-frame) with its Ethernet header and tags, rounded up. Larger frames get a buffer of
/// their own size (not recycled).
pub const LARGE_ROOM: usize = 65536 + 512;

/// Size of a large pool buffer.
pub const LARGE_BUF_SIZE: usize = FRAME_OFS + LARGE_ROOM;

/// Spare large buffers a pool keeps (about 4.3 MB): a few bursts of super-frames in flight.
pub const LARGE_SPARE: usize = 64;

/// Bytes of a lent frame its packet's buffer holds ([`Pool::packet_lent`]): more than the
/// headers of any frame the simple match takes (Ethernet, IPv4 without options, TCP with the
/// largest options: 94 bytes), two cache lines.
pub const LENT_HEAD: usize = 128;

/// Largest number of packets in a batch: one rx burst.
pub const MAX_BURST: usize = 32;
// A burst's packets are sets of bits in a `u32` along the PMD's path (its groups, its
// tiers' hits and drops, `ct()`'s non-IP packets): a larger burst would lose packets from
// them without a word.
const _: () = assert!(MAX_BURST <= u32::BITS as usize);

/// Marks an absent header offset in [`PacketMeta`].
pub const NO_OFS: u16 = u16::MAX;

/// [`PacketMeta::rx_csum`]: the device verified the IPv4 header checksum.
pub const RX_CSUM_IP_GOOD: u8 = 1;
/// [`PacketMeta::rx_csum`]: the device verified the TCP or UDP checksum.
pub const RX_CSUM_L4_GOOD: u8 = 2;
/// [`PacketMeta::rx_csum`]: the TCP or UDP checksum is pending (received partial, see
/// [`crate::csum_pending`]); [`PacketMeta::csum_pending`].
pub const CSUM_L4_PENDING: u8 = 4;

/// Per-packet metadata that travels with a packet through the datapath. Read and written by:
/// rx (in_port), extraction (offsets, hash), actions (offsets after pushes and pops, recirc_id,
/// packet_type after `push_eth`/`pop_eth`), recirculation (recirc_id, depth), `tnl_pop`
/// (in_port, packet_type, tunnel; recirc_id and depth as a recirculation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// Datapath port the packet arrived on.
    pub in_port: u32,
    /// Recirculation id of the current pass; 0 on the first pass.
    pub recirc_id: u32,
    /// Hash of the packet's flow key (valid after extraction of the current pass).
    pub hash: u32,
    /// Datapath hash (`hash` action), 0 when unset.
    pub dp_hash: u32,
    /// Packet mark.
    pub pkt_mark: u32,
    /// Packet type as the key holds it: 0 for Ethernet, `(1 << 16) | ethertype` for an L3
    /// packet that starts at its L3 header (OVS's `packet_type=(1,ethertype)`, e.g. the
    /// payload of a GRE tunnel with `packet_type=legacy_l3`).
    pub packet_type: u32,
    /// Offset of the first MPLS label stack entry from the frame start.
    pub l2_5: u16,
    /// Offset of the L3 header.
    pub l3: u16,
    /// Offset of the L4 header.
    pub l4: u16,
    /// For a TCP super-frame (TSO/GSO): the MSS, the TCP payload bytes of each segment it
    /// stands for. 0 for an ordinary packet. Set by the rx queue that receives it (which marks
    /// its batch, [`Batch::mark_gso`]); kept by copies and recirculation. The TCP checksum
    /// field of a super-frame is not maintained inside the switch: whoever sends it recomputes
    /// it ([`crate::gso`]). A super-frame a `tnl_push` encapsulated whole keeps it, its `l3`
    /// and `l4` then at the inner IP and TCP headers ([`crate::gso_tunnel`]); one received
    /// encapsulated keeps them at the outer ones ([`PacketMeta::tunnel_gso`]).
    pub gso_size: u16,
    /// Recirculation depth of this pass.
    pub recirc_depth: u8,
    /// One-bit marks ([`PacketMeta::deferred`], [`PacketMeta::ufo`],
    /// [`PacketMeta::tunnel_gso`]).
    marks: u8,
    /// Whether the buffer's tunnel metadata area is valid (set by `tnl_pop`).
    pub tunnel: TnlMd,
    /// Connection state bits (`ct_state`) from the last `ct()`; 0 when untracked. When not
    /// zero, the buffer's connection metadata area is valid.
    pub ct_state: u8,
    /// Connection tracking zone of the last `ct()`.
    pub ct_zone: u16,
    /// Checksums the receiving device verified and found good ([`RX_CSUM_IP_GOOD`],
    /// [`RX_CSUM_L4_GOOD`]), or the TCP/UDP one left pending ([`CSUM_L4_PENDING`]): those of
    /// the outermost headers, so `tnl_pop` clears them. 0 when nothing was verified.
    pub rx_csum: u8,
    /// For a lent frame, its entry in the pool's table of lent frames, plus one; 0 for a frame
    /// the buffer holds whole. Only the pool sets it, and it trusts it only when the entry
    /// names the packet's buffer.
    lent: u8,
}

impl PacketMeta {
    /// Metadata of a packet just received on `in_port`.
    pub fn received(in_port: u32) -> Self {
        PacketMeta {
            in_port,
            recirc_id: 0,
            hash: 0,
            dp_hash: 0,
            pkt_mark: 0,
            packet_type: 0,
            l2_5: NO_OFS,
            l3: NO_OFS,
            l4: NO_OFS,
            gso_size: 0,
            recirc_depth: 0,
            marks: 0,
            tunnel: TnlMd::None,
            ct_state: 0,
            ct_zone: 0,
            rx_csum: 0,
            lent: 0,
        }
    }
}

/// [`PacketMeta::deferred`]'s mark.
const MARK_DEFERRED: u8 = 1;
/// [`PacketMeta::ufo`]'s mark.
const MARK_UFO: u8 = 2;
/// [`PacketMeta::tunnel_gso`]'s mark.
const MARK_TUNNEL_GSO: u8 = 4;

impl PacketMeta {
    /// The slow path had no time for this packet in its pass: it waits in the PMD's deferred
    /// queue instead of being dropped.
    #[inline]
    pub fn deferred(&self) -> bool {
        self.marks & MARK_DEFERRED != 0
    }

    /// Sets [`PacketMeta::deferred`].
    #[inline]
    pub fn set_deferred(&mut self, on: bool) {
        self.set_mark(MARK_DEFERRED, on);
    }

    /// A super-frame (`gso_size` not 0) of UDP fragmentation (UFO, [`crate::gso_ufo`]): its
    /// `gso_size` is the IP payload of each fragment. Off for TCP and UDP segmentation. Set
    /// by the rx queue that receives it; kept by copies and recirculation.
    #[inline]
    pub fn ufo(&self) -> bool {
        self.marks & MARK_UFO != 0
    }

    /// Sets [`PacketMeta::ufo`].
    #[inline]
    pub fn set_ufo(&mut self, on: bool) {
        self.set_mark(MARK_UFO, on);
    }

    /// A TCP or UDP (USO) super-frame (`gso_size` not 0) received whole inside a UDP tunnel
    /// (virtio's UDP-tunnel GSO): its `l3` and `l4` are the outer headers' (extraction's), its
    /// inner ones are found in the frame when it leaves
    /// ([`crate::gso_tunnel::settle_received`]).
    /// Set by the rx queue that receives it; kept by copies and recirculation; cleared by
    /// `tnl_pop` and by [`crate::gso_tunnel::settle_received`].
    #[inline]
    pub fn tunnel_gso(&self) -> bool {
        self.marks & MARK_TUNNEL_GSO != 0
    }

    /// Sets [`PacketMeta::tunnel_gso`].
    #[inline]
    pub fn set_tunnel_gso(&mut self, on: bool) {
        self.set_mark(MARK_TUNNEL_GSO, on);
    }

    #[inline]
    fn set_mark(&mut self, mark: u8, on: bool) {
        if on {
            self.marks |= mark;
        } else {
            self.marks &= !mark;
        }
    }
}

impl PacketMeta {
    /// Whether the frame's TCP or UDP checksum is pending: received partial from a port that
    /// hands such frames over, completed (or handed on partial) only where it leaves the
    /// switch ([`crate::csum_pending`]). Never set on a super-frame (`gso_size > 0`), whose
    /// checksum is always left to its sender.
    #[inline(always)]
    pub fn csum_pending(&self) -> bool {
        self.rx_csum & CSUM_L4_PENDING != 0
    }

    /// Marks the frame's TCP or UDP checksum pending, or not.
    #[inline(always)]
    pub fn set_csum_pending(&mut self, on: bool) {
        if on {
            self.rx_csum |= CSUM_L4_PENDING;
        } else {
            self.rx_csum &= !CSUM_L4_PENDING;
        }
    }
}

const _: () = assert!(core::mem::size_of::<PacketMeta>() <= 40);

/// A frame in a buffer with headroom.
pub struct Packet {
    buf: Buf,
    start: u32,
    len: u32,
    /// The packet's metadata.
    pub meta: PacketMeta,
}

// The packet header (buffer pointer, offsets, metadata) fits one cache line.
const _: () = assert!(core::mem::size_of::<Packet>() <= 64);

impl Packet {
    /// A packet holding a copy of `frame`, in a new buffer (tests and slow paths; the datapath
    /// allocates through a [`Pool`]).
    pub fn from_slice(frame: &[u8]) -> Packet {
        let mut buf = Buf::zeroed((FRAME_OFS + frame.len()).max(BUF_SIZE));
        buf[FRAME_OFS..FRAME_OFS + frame.len()].copy_from_slice(frame);
        Packet {
            buf,
            start: FRAME_OFS as u32,
            len: frame.len() as u32,
            meta: PacketMeta::received(0),
        }
    }

    /// A packet with no buffer (nothing allocated): what is left in a slot a packet was moved
    /// out of, until the slot is cleared.
    #[inline]
    pub fn hollow() -> Packet {
        Packet {
            buf: Buf::empty(),
            start: 0,
            len: 0,
            meta: PacketMeta::received(0),
        }
    }

    /// A packet whose buffer is a foreign owner's (a DPDK mbuf's: see the `buf` module): `cap`
    /// bytes at `base`, the metadata areas ([`MD_LEN`] bytes) first, the `len`-byte frame at
    /// offset `start`. The packet gives the buffer back to its owner when it is dropped or
    /// freed to a pool, unless a port takes it whole ([`Packet::into_foreign`]). Everything
    /// that changes the frame works as on a buffer of the switch's own; a push beyond the
    /// headroom the owner left moves the frame into a buffer of the switch's own.
    ///
    /// # Safety
    /// `base` is valid for reads and writes of `cap` initialized bytes and used by nothing else
    /// until released or taken back; `MD_LEN <= start` and `start + len <= cap`.
    #[inline]
    pub unsafe fn from_foreign(
        owner: ForeignOwner,
        base: std::ptr::NonNull<u8>,
        cap: usize,
        start: usize,
        len: usize,
        in_port: u32,
    ) -> Packet {
        debug_assert!(MD_LEN <= start && start + len <= cap);
        Packet {
            // SAFETY: the caller's contract is Buf::foreign's.
            buf: unsafe { Buf::foreign(owner, base, cap) },
            start: start as u32,
            len: len as u32,
            meta: PacketMeta::received(in_port),
        }
    }

    /// Whether the packet's buffer is a foreign owner's ([`Packet::from_foreign`]).
    #[inline]
    pub fn is_foreign(&self) -> bool {
        self.buf.is_foreign()
    }

    /// For a packet in a foreign buffer: the buffer's start, the frame's offset from it and
    /// its length, the buffer now the caller's to give back to its owner (a port that sends
    /// it as it is). A packet in a buffer of the switch's own comes back unchanged.
    #[inline]
    pub fn into_foreign(self) -> Result<(std::ptr::NonNull<u8>, usize, usize), Packet> {
        if !self.buf.is_foreign() {
            return Err(self);
        }
        let (start, len) = (self.start as usize, self.len as usize);
        let base = self.buf.into_foreign().expect("checked foreign");
        Ok((base, start, len))
    }

    /// The frame.
    #[inline]
    pub fn data(&self) -> &[u8] {
        self.not_lent();
        self.headers()
    }

    /// The frame, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.not_lent();
        &mut self.buf[self.start as usize..(self.start + self.len) as usize]
    }

    /// The frame as [`Packet::data`] gives it, except that for a lent frame
    /// ([`Pool::packet_lent`]) only the first [`LENT_HEAD`] bytes are the frame's (the rest of
    /// the slice is whatever the buffer held): for readers of the headers only.
    #[inline]
    pub fn headers(&self) -> &[u8] {
        &self.buf[self.start as usize..(self.start + self.len) as usize]
    }

    /// Whether part of the frame is still lent ([`Pool::packet_lent`]).
    #[inline]
    pub fn is_lent(&self) -> bool {
        self.meta.lent != 0
    }

    /// Checks (in debug builds) that nothing reads or changes a lent frame as if the buffer
    /// held it whole.
    #[inline(always)]
    fn not_lent(&self) {
        debug_assert!(
            self.meta.lent == 0,
            "a lent frame used before Pool::materialize"
        );
    }

    /// Frame length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the frame is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes free in front of the frame (the metadata areas are not headroom).
    #[inline]
    pub fn headroom(&self) -> usize {
        self.start as usize - MD_LEN
    }

    /// The connection metadata area (valid when `meta.ct_state` is not zero).
    #[inline]
    pub fn ct_md(&self) -> &[u8; CT_MD_LEN] {
        self.buf[TNL_MD_LEN..]
            .first_chunk::<CT_MD_LEN>()
            .expect("every buffer starts with the metadata areas")
    }

    /// The connection metadata area, writable.
    #[inline]
    pub fn ct_md_mut(&mut self) -> &mut [u8; CT_MD_LEN] {
        self.buf[TNL_MD_LEN..]
            .first_chunk_mut::<CT_MD_LEN>()
            .expect("every buffer starts with the metadata areas")
    }

    /// The tunnel metadata area (valid when `meta.tunnel` says so; layout in
    /// [`crate::tunnel`]).
    #[inline]
    pub fn tnl_md(&self) -> &[u8; TNL_MD_LEN] {
        self.buf
            .first_chunk::<TNL_MD_LEN>()
            .expect("every buffer starts with the metadata area")
    }

    /// The tunnel metadata area, writable, beside the frame: what `tnl_pop` reads from and
    /// writes to at once.
    #[inline]
    pub fn tnl_md_and_data_mut(&mut self) -> (&mut [u8; TNL_MD_LEN], &[u8]) {
        self.not_lent();
        let (md, rest) = self.buf.split_at_mut(TNL_MD_LEN);
        let s = self.start as usize - TNL_MD_LEN;
        let md = md
            .first_chunk_mut::<TNL_MD_LEN>()
            .expect("split at the area's length");
        (md, &rest[s..s + self.len as usize])
    }

    /// Copies `src`'s metadata, and the used part of its tunnel metadata area and its
    /// connection metadata area when it has them.
    pub fn copy_meta_from(&mut self, src: &Packet) {
        let lent = self.meta.lent;
        self.meta = src.meta;
        self.meta.lent = lent;
        if src.meta.tunnel != TnlMd::None {
            let n = crate::tnl_md::md_used_len(src.tnl_md());
            self.buf[..n].copy_from_slice(&src.buf[..n]);
        }
        if src.meta.ct_state != 0 {
            *self.ct_md_mut() = *src.ct_md();
        }
    }

    /// Bytes free after the frame.
    #[inline]
    pub fn tailroom(&self) -> usize {
        self.buf.len() - (self.start + self.len) as usize
    }

    /// Grows the frame by `n` bytes at the front and returns them. When the headroom is short
    /// the frame moves to a larger buffer (slow, counted by the caller as needed).
    pub fn push_front(&mut self, n: usize) -> &mut [u8] {
        self.not_lent();
        if n > self.headroom() {
            self.grow(n - self.headroom() + HEADROOM, 0);
        }
        self.start -= n as u32;
        self.len += n as u32;
        let s = self.start as usize;
        &mut self.buf[s..s + n]
    }

    /// Removes `n` bytes from the front (at most the whole frame).
    pub fn pull_front(&mut self, n: usize) {
        self.not_lent();
        let n = n.min(self.len()) as u32;
        self.start += n;
        self.len -= n;
    }

    /// Shortens the frame to `len` bytes (no effect if already shorter).
    pub fn truncate(&mut self, len: usize) {
        self.not_lent();
        self.len = self.len.min(len as u32);
    }

    /// Sets the frame length, growing into the tailroom (new bytes are whatever the buffer
    /// held; callers write them).
    pub fn set_len(&mut self, len: usize) {
        self.not_lent();
        if len > self.len() + self.tailroom() {
            self.grow(0, len - self.len() - self.tailroom());
        }
        self.len = len as u32;
    }

    /// Opens `n` bytes at offset `at` of the frame by moving the bytes before it forward
    /// (into the headroom), as a VLAN or MPLS push does; returns the new bytes.
    pub fn insert_at(&mut self, at: usize, n: usize) -> &mut [u8] {
        let at = at.min(self.len());
        self.push_front(n);
        let s = self.start as usize;
        self.buf.copy_within(s + n..s + n + at, s);
        &mut self.buf[s + at..s + at + n]
    }

    /// Removes `n` bytes at offset `at` by moving the bytes before it back, as a VLAN or MPLS
    /// pop does. Out-of-range requests are clipped.
    pub fn remove_at(&mut self, at: usize, n: usize) {
        self.not_lent();
        let at = at.min(self.len());
        let n = n.min(self.len() - at);
        let s = self.start as usize;
        self.buf.copy_within(s..s + at, s + n);
        self.start += n as u32;
        self.len -= n as u32;
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, front: usize, back: usize) {
        let mut nb = Buf::zeroed(self.buf.len() + front + back);
        let (s, l) = (self.start as usize, self.len());
        nb[..MD_LEN].copy_from_slice(&self.buf[..MD_LEN]);
        nb[s + front..s + front + l].copy_from_slice(&self.buf[s..s + l]);
        self.buf = nb;
        self.start += front as u32;
    }
}

impl AsRef<[u8]> for Packet {
    /// The frame.
    fn as_ref(&self) -> &[u8] {
        self.data()
    }
}

impl core::fmt::Debug for Packet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Packet")
            .field("len", &self.len)
            .field("meta", &self.meta)
            .finish()
    }
}

/// Buffers owned by one thread, in two size classes ([`BUF_SIZE`] and [`LARGE_BUF_SIZE`]).
/// `alloc` takes a recycled buffer of the class the frame needs when there is one; `free`
/// returns a buffer to its class unless the class already holds its cap of spare ones (`cap`
/// small ones, [`LARGE_SPARE`] large ones).
pub struct Pool {
    spare: Vec<Buf>,
    cap: usize,
    large: Vec<Buf>,
    allocated: u64,
    /// Whether [`Pool::packet_lent`] lends (the PMD's pool) or copies.
    lends: bool,
    /// The lent frames since the last [`Pool::end_lending`], in the order lent: entries up to
    /// `lent_n`, each the packet's buffer
    /// address (0 once the packet is materialized), where the rest of its frame is, and the
    /// frame's length. A freed packet's entry stays: no packet made later has its `lent` index
    /// (see [`Packet::copy_meta_from`]).
    lent: [(usize, usize, u32); MAX_BURST],
    lent_n: usize,
}

impl Pool {
    /// A pool that keeps at most `cap` spare buffers, with `prefill` of them made now. Large
    /// buffers are made when first needed.
    pub fn new(cap: usize, prefill: usize) -> Pool {
        let mut spare = Vec::with_capacity(cap);
        for _ in 0..prefill.min(cap) {
            spare.push(Buf::zeroed(BUF_SIZE));
        }
        Pool {
            spare,
            cap,
            large: Vec::with_capacity(LARGE_SPARE),
            allocated: prefill.min(cap) as u64,
            lends: false,
            lent: [(0, 0, 0); MAX_BURST],
            lent_n: 0,
        }
    }

    /// Lets [`Pool::packet_lent`] lend (for a PMD, which ends every lending when the burst is
    /// done with).
    pub fn allow_lending(&mut self) {
        self.lends = true;
    }

    /// A packet of the `len`-byte frame at `src`. When the pool lends, the frame is longer than
    /// [`LENT_HEAD`] and fewer than [`MAX_BURST`] frames are lent, only the first
    /// [`LENT_HEAD`] bytes are copied and the rest is lent ([`Packet::is_lent`]) until
    /// [`Pool::end_lending`]; otherwise the whole frame is copied.
    ///
    /// # Safety
    /// `src` is valid for reading `len` bytes until the next [`Pool::end_lending`], and does not
    /// overlap the pool's buffers. Nothing in Rust writes those bytes through a reference
    /// meanwhile; another process may (a guest writing its buffers, as a device's DMA could):
    /// the pool and the queues that read a lent frame only copy it with raw pointer copies,
    /// never through a reference, so such a frame is garbage, never unsoundness.
    #[inline]
    pub unsafe fn packet_lent(&mut self, src: *const u8, len: usize, in_port: u32) -> Packet {
        let mut p = self.packet_with_len(len, in_port);
        let lend = self.lends && len > LENT_HEAD && self.lent_n < MAX_BURST;
        let s = p.start as usize;
        if !lend {
            let dst = &mut p.buf[s..s + len];
            // SAFETY: `src` is valid for `len` bytes (the caller's contract) and is not the
            // packet's own buffer, which is `len` bytes long from `dst`.
            unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), len) };
        } else {
            // A copy of a fixed size, made in line.
            let dst = &mut p.buf[s..s + LENT_HEAD];
            // SAFETY: as above, with `LENT_HEAD < len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), LENT_HEAD) };
            self.lent[self.lent_n] = (p.buf.as_ptr() as usize, src as usize + LENT_HEAD, p.len);
            self.lent_n += 1;
            p.meta.lent = self.lent_n as u8;
        }
        p
    }

    /// The table entry of lent packet `p`, when it is one and its buffer, offset and length are
    /// what they were when it was lent (so what is read from the lender is never more than it
    /// lent).
    #[inline]
    fn lent_entry(&self, p: &Packet) -> Option<usize> {
        let i = usize::from(p.meta.lent).checked_sub(1)?;
        let &(buf, _, len) = self.lent[..self.lent_n].get(i)?;
        (buf == p.buf.as_ptr() as usize && p.start as usize == FRAME_OFS && p.len == len)
            .then_some(i)
    }

    /// Where the rest of lent packet `p`'s frame is: its bytes from [`LENT_HEAD`] on, valid for
    /// reading (with raw pointer copies, see [`Pool::packet_lent`]) until
    /// [`Pool::end_lending`]. `None` for a packet whose buffer holds its frame whole.
    #[inline]
    pub fn lent_tail(&self, p: &Packet) -> Option<*const u8> {
        self.lent_entry(p).map(|i| self.lent[i].1 as *const u8)
    }

    /// Brings the rest of a lent frame into its packet's buffer; the packet is then an
    /// ordinary one. Nothing for one that is not lent.
    #[inline]
    pub fn materialize(&mut self, p: &mut Packet) {
        if p.meta.lent != 0 {
            self.materialize_lent(p);
        }
    }

    #[cold]
    #[inline(never)]
    fn materialize_lent(&mut self, p: &mut Packet) {
        if let Some(i) = self.lent_entry(p) {
            let s = p.start as usize;
            let end = s + p.len();
            let dst = &mut p.buf[s + LENT_HEAD..end];
            // SAFETY: the entry is there, so lending has not ended: its address is valid for
            // the frame's bytes past `LENT_HEAD` (`packet_lent`'s contract), and it is not the
            // packet's buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.lent[i].1 as *const u8,
                    dst.as_mut_ptr(),
                    dst.len(),
                )
            };
            self.lent[i].0 = 0;
        }
        p.meta.lent = 0;
    }

    /// Ends lending: the lenders may take back what they lent. Returns whether anything was
    /// lent since the last call. A packet still lent then (none should be) keeps its buffer's
    /// stale bytes past [`LENT_HEAD`].
    #[inline]
    pub fn end_lending(&mut self) -> bool {
        std::mem::take(&mut self.lent_n) > 0
    }

    /// A buffer for a frame of `len` bytes: a small one when it fits.
    #[inline]
    fn buffer(&mut self, len: usize) -> Buf {
        if len <= BUF_ROOM {
            match self.spare.pop() {
                Some(b) => b,
                None => {
                    self.allocated += 1;
                    Buf::zeroed(BUF_SIZE)
                }
            }
        } else {
            self.large_buffer(len)
        }
    }

    /// A buffer for a frame longer than [`BUF_ROOM`]: a large one when it fits, else one of
    /// its own size.
    #[inline(never)]
    fn large_buffer(&mut self, len: usize) -> Buf {
        if len <= LARGE_ROOM
            && let Some(b) = self.large.pop()
        {
            return b;
        }
        self.allocated += 1;
        if len <= LARGE_ROOM {
            Buf::zeroed(LARGE_BUF_SIZE)
        } else {
            Buf::zeroed(FRAME_OFS + len)
        }
    }

    /// A packet holding a copy of `frame`: the copy a NIC driver's rx makes.
    #[inline]
    pub fn packet_from(&mut self, frame: &[u8], in_port: u32) -> Packet {
        let mut buf = self.buffer(frame.len());
        buf[FRAME_OFS..FRAME_OFS + frame.len()].copy_from_slice(frame);
        Packet {
            buf,
            start: FRAME_OFS as u32,
            len: frame.len() as u32,
            meta: PacketMeta::received(in_port),
        }
    }

    /// A packet of `len` bytes for the caller to fill through [`Packet::data_mut`] (what the
    /// buffer held before is there until then): for a receive path that copies a frame from
    /// several pieces (a virtio descriptor chain) straight into its buffer.
    #[inline]
    pub fn packet_with_len(&mut self, len: usize, in_port: u32) -> Packet {
        Packet {
            buf: self.buffer(len),
            start: FRAME_OFS as u32,
            len: len as u32,
            meta: PacketMeta::received(in_port),
        }
    }

    /// A packet holding `head` followed by `tail` (a segment: the headers of a super-frame and
    /// a slice of its payload).
    pub fn packet_from_parts(&mut self, head: &[u8], tail: &[u8], in_port: u32) -> Packet {
        let len = head.len() + tail.len();
        let mut buf = self.buffer(len);
        let (h, t) = buf[FRAME_OFS..FRAME_OFS + len].split_at_mut(head.len());
        h.copy_from_slice(head);
        t.copy_from_slice(tail);
        Packet {
            buf,
            start: FRAME_OFS as u32,
            len: len as u32,
            meta: PacketMeta::received(in_port),
        }
    }

    /// A copy of the first `len` bytes of `p` (at most its length) with its metadata and
    /// tunnel metadata: what `clone` and a non-final output or `recirc` hand on.
    #[inline]
    pub fn copy_of(&mut self, p: &Packet, len: usize) -> Packet {
        let mut c = self.packet_from(&p.data()[..len.min(p.len())], p.meta.in_port);
        c.copy_meta_from(p);
        c
    }

    /// Gives a packet's buffer back.
    #[inline]
    pub fn free(&mut self, p: Packet) {
        if p.buf.len() == BUF_SIZE {
            if self.spare.len() < self.cap {
                self.spare.push(p.buf);
            }
        } else {
            self.free_large(p.buf);
        }
    }

    /// Keeps a large buffer for reuse (a buffer of another size, or one over the cap, goes; a
    /// foreign one goes back to its owner).
    #[inline(never)]
    fn free_large(&mut self, buf: Buf) {
        if buf.len() == LARGE_BUF_SIZE && self.large.len() < LARGE_SPARE {
            self.large.push(buf);
        }
    }

    /// Frees every packet of `batch`, leaving it empty.
    #[inline]
    pub fn free_batch(&mut self, batch: &mut Batch) {
        for p in batch.pkts.drain(..) {
            self.free(p);
        }
    }

    /// Buffers allocated from the system so far (a pool that keeps growing leaks packets).
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Spare (small) buffers held.
    pub fn spare(&self) -> usize {
        self.spare.len()
    }

    /// Spare large buffers held.
    pub fn spare_large(&self) -> usize {
        self.large.len()
    }
}

/// Up to [`MAX_BURST`] packets.
#[derive(Default)]
pub struct Batch {
    pkts: Vec<Packet>,
    /// Whether the batch may hold a packet with `gso_size > 0` (see [`Batch::mark_gso`]).
    gso: bool,
    /// Whether the batch may hold a lent packet (see [`Batch::mark_lent`]).
    lent: bool,
}

impl Batch {
    /// An empty batch with room for a burst.
    pub fn new() -> Batch {
        Batch {
            pkts: Vec::with_capacity(MAX_BURST),
            gso: false,
            lent: false,
        }
    }

    /// Says that the batch may hold a TCP super-frame (a packet with `gso_size > 0`) or a
    /// frame whose checksum is pending ([`PacketMeta::csum_pending`]). An rx queue that
    /// delivers either must call it: the datapath looks for super-frames to segment, and for
    /// pending checksums to complete, only in batches so marked, so that ordinary traffic pays
    /// one test per batch.
    #[inline]
    pub fn mark_gso(&mut self) {
        self.gso = true;
    }

    /// Whether the batch was marked ([`Batch::mark_gso`]) since the mark was last taken.
    #[inline]
    pub fn may_have_gso(&self) -> bool {
        self.gso
    }

    /// Whether the batch was marked, clearing the mark.
    #[inline]
    pub fn take_gso(&mut self) -> bool {
        std::mem::take(&mut self.gso)
    }

    /// Says that the batch may hold a lent packet ([`Pool::packet_lent`]). An rx queue that
    /// lends must call it: the datapath looks for lent packets only in batches so marked.
    #[inline]
    pub fn mark_lent(&mut self) {
        self.lent = true;
    }

    /// Whether the batch was marked ([`Batch::mark_lent`]), clearing the mark.
    #[inline]
    pub fn take_lent(&mut self) -> bool {
        std::mem::take(&mut self.lent)
    }

    /// Number of packets.
    #[inline]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// Whether the batch is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Whether the batch holds [`MAX_BURST`] packets.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.pkts.len() >= MAX_BURST
    }

    /// Room left before the batch is full.
    #[inline]
    pub fn room(&self) -> usize {
        MAX_BURST.saturating_sub(self.pkts.len())
    }

    /// Appends a packet (a full batch still accepts it; callers flush at [`MAX_BURST`]).
    #[inline]
    pub fn push(&mut self, p: Packet) {
        self.pkts.push(p);
    }

    /// Appends a packet and gives it back in its place, for a receiver to finish it there:
    /// finished first and then moved in, its fields, stored narrower than the move reads them,
    /// made the move wait for every store before it to leave the store buffer.
    #[inline]
    pub fn push_last(&mut self, p: Packet) -> &mut Packet {
        self.pkts.push(p);
        let last = self.pkts.len() - 1;
        &mut self.pkts[last]
    }

    /// Removes the last packet.
    #[inline]
    pub fn pop(&mut self) -> Option<Packet> {
        self.pkts.pop()
    }

    /// The packets.
    #[inline]
    pub fn packets(&self) -> &[Packet] {
        &self.pkts
    }

    /// The packets, writable.
    #[inline]
    pub fn packets_mut(&mut self) -> &mut [Packet] {
        &mut self.pkts
    }

    /// Exchanges the batch's packets with those of `v`, without moving any packet: how a
    /// whole batch joins or leaves a queue kept as a vector.
    #[inline]
    pub fn swap_packets(&mut self, v: &mut Vec<Packet>) {
        std::mem::swap(&mut self.pkts, v);
    }

    /// Removes every packet, in order.
    #[inline]
    pub fn drain(&mut self) -> std::vec::Drain<'_, Packet> {
        self.pkts.drain(..)
    }

    /// Removes the packets whose bit is set in `bits` (bit `i` for packet `i`), keeping the
    /// others in order, and gives their buffers back to `pool`.
    pub fn remove(&mut self, bits: u32, pool: &mut Pool) {
        let mut w = 0;
        for i in 0..self.pkts.len() {
            if i >= 32 || bits & (1 << i) == 0 {
                self.pkts.swap(w, i);
                w += 1;
            }
        }
        for p in self.pkts.drain(w..) {
            pool.free(p);
        }
    }

    /// Removes the packets from `at` on and gives their buffers back to `pool`.
    pub fn free_from(&mut self, at: usize, pool: &mut Pool) {
        for p in self.pkts.drain(at.min(self.pkts.len())..) {
            pool.free(p);
        }
    }

    /// Total bytes of the packets.
    pub fn bytes(&self) -> u64 {
        self.pkts.iter().map(|p| p.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_recycles_and_stops_allocating() {
        let mut pool = Pool::new(64, 0);
        let mut b = Batch::new();
        for round in 0..10 {
            for i in 0..MAX_BURST {
                b.push(pool.packet_from(&[i as u8; 60], 1));
            }
            assert_eq!(b.packets()[5].data(), &[5u8; 60]);
            pool.free_batch(&mut b);
            assert!(b.is_empty());
            if round > 0 {
                assert_eq!(pool.allocated(), MAX_BURST as u64);
            }
        }
    }

    #[test]
    fn jumbo_frames_and_super_frames_recycle_large_buffers() {
        let mut pool = Pool::new(4, 4);
        let p = pool.packet_from(&[7u8; 9000], 2);
        assert_eq!(p.len(), 9000);
        assert_eq!(p.headroom(), HEADROOM);
        pool.free(p);
        assert_eq!(pool.spare(), 4, "a jumbo frame takes no small buffer");
        assert_eq!(
            pool.spare_large(),
            1,
            "its large buffer went back to its class"
        );
        let mut warm = 0;
        for round in 0..3 {
            let ps: Vec<Packet> = (0..LARGE_SPARE)
                .map(|i| pool.packet_from(&vec![i as u8; 65536 + 18], 1))
                .collect();
            assert_eq!(ps[5].data()[65000], 5);
            for p in ps {
                pool.free(p);
            }
            assert_eq!(pool.spare_large(), LARGE_SPARE);
            if round == 0 {
                warm = pool.allocated();
            }
            assert_eq!(pool.allocated(), warm, "recycled once warm");
        }
        // More in flight than the class keeps: the extra buffers go.
        let ps: Vec<Packet> = (0..LARGE_SPARE + 2)
            .map(|_| pool.packet_from(&[0u8; 3000], 1))
            .collect();
        for p in ps {
            pool.free(p);
        }
        assert_eq!(pool.spare_large(), LARGE_SPARE, "capped");
        // Beyond the large class: a buffer of its own, not kept.
        let p = pool.packet_from(&vec![1u8; LARGE_ROOM + 1], 1);
        assert_eq!(p.len(), LARGE_ROOM + 1);
        let before = pool.spare_large();
        pool.free(p);
        assert_eq!(pool.spare_large(), before);
        // Two parts make one frame, in the class of the whole.
        let p = pool.packet_from_parts(&[1, 2, 3], &[4, 5], 9);
        assert_eq!((p.data(), p.meta.in_port), (&[1u8, 2, 3, 4, 5][..], 9));
    }

    #[test]
    fn the_largest_tunnel_header_fits_the_headroom_and_the_buffer_recycles() {
        // Ethernet + 802.1Q + IPv6 + UDP + GENEVE with 252 bytes of options, then a VLAN tag.
        let largest = 14 + 4 + 40 + 8 + 8 + 252 + 4;
        let mut pool = Pool::new(4, 4);
        let mut p = pool.packet_from(&[7u8; 64], 1);
        p.push_front(largest).fill(1);
        assert_eq!(p.len(), 64 + largest);
        pool.free(p);
        assert_eq!(pool.spare(), 4, "the buffer went back to the pool");
    }

    #[test]
    fn push_and_pull_front() {
        let mut p = Packet::from_slice(&[1, 2, 3]);
        p.push_front(2).copy_from_slice(&[8, 9]);
        assert_eq!(p.data(), &[8, 9, 1, 2, 3]);
        p.pull_front(3);
        assert_eq!(p.data(), &[2, 3]);
        p.pull_front(10);
        assert!(p.is_empty());
        // Pushing more than the headroom moves the frame to a larger buffer.
        let mut p = Packet::from_slice(&[5; 10]);
        p.push_front(HEADROOM + 50).fill(1);
        assert_eq!(p.len(), HEADROOM + 60);
        assert_eq!(&p.data()[HEADROOM + 50..], &[5; 10]);
    }

    #[test]
    fn insert_and_remove_in_the_middle() {
        // A VLAN push after the two MAC addresses, then the pop.
        let frame: Vec<u8> = (0..20).collect();
        let mut p = Packet::from_slice(&frame);
        p.insert_at(12, 4).copy_from_slice(&[0x81, 0, 0, 10]);
        assert_eq!(&p.data()[..12], &frame[..12]);
        assert_eq!(&p.data()[12..16], &[0x81, 0, 0, 10]);
        assert_eq!(&p.data()[16..], &frame[12..]);
        p.remove_at(12, 4);
        assert_eq!(p.data(), &frame[..]);
        p.remove_at(18, 100);
        assert_eq!(p.data(), &frame[..18]);
    }

    /// A frame of `len` bytes, each its offset's low byte.
    fn counting(len: usize) -> Vec<u8> {
        (0..len).map(|i| i as u8).collect()
    }

    #[test]
    fn a_lent_frame_keeps_its_head_and_brings_the_rest_in_when_asked() {
        let frame = counting(1000);
        let mut pool = Pool::new(8, 0);
        pool.allow_lending();
        // SAFETY: `frame` outlives the lending and is not written.
        let mut p = unsafe { pool.packet_lent(frame.as_ptr(), frame.len(), 3) };
        assert!(p.is_lent());
        assert_eq!((p.len(), p.meta.in_port), (1000, 3));
        assert_eq!(&p.headers()[..LENT_HEAD], &frame[..LENT_HEAD]);
        let tail = pool.lent_tail(&p).expect("lent");
        assert_eq!(tail, frame[LENT_HEAD..].as_ptr());
        pool.materialize(&mut p);
        assert!(!p.is_lent());
        assert_eq!(pool.lent_tail(&p), None);
        assert_eq!(p.data(), &frame[..]);
        assert!(pool.end_lending());
        assert!(!pool.end_lending(), "nothing lent since");
    }

    #[test]
    fn frames_are_copied_whole_unless_lending_is_allowed_and_worth_it() {
        let big = counting(1000);
        let small = counting(LENT_HEAD);
        let mut pool = Pool::new(8, 0);
        // SAFETY: the frames outlive the pool's lending and are not written.
        let p = unsafe { pool.packet_lent(big.as_ptr(), big.len(), 0) };
        assert!(!p.is_lent(), "a pool that was not allowed to lend copies");
        assert_eq!(p.data(), &big[..]);
        assert!(!pool.end_lending());
        pool.allow_lending();
        // SAFETY: as above.
        let p = unsafe { pool.packet_lent(small.as_ptr(), small.len(), 0) };
        assert!(!p.is_lent(), "a frame of no more than the head is copied");
        assert_eq!(p.data(), &small[..]);
        assert!(!pool.end_lending());
    }

    #[test]
    fn at_most_a_burst_is_lent_and_ending_the_lending_forgets_it() {
        let frame = counting(600);
        let mut pool = Pool::new(64, 0);
        pool.allow_lending();
        // SAFETY: `frame` outlives the lending and is not written.
        let ps: Vec<Packet> = (0..=MAX_BURST)
            .map(|_| unsafe { pool.packet_lent(frame.as_ptr(), frame.len(), 0) })
            .collect();
        assert!(ps[..MAX_BURST].iter().all(Packet::is_lent));
        assert!(!ps[MAX_BURST].is_lent(), "the table is full: copied");
        assert_eq!(ps[MAX_BURST].data(), &frame[..]);
        assert!(pool.end_lending());
        // A packet (wrongly) kept past the lending is no longer read from the lender.
        assert_eq!(pool.lent_tail(&ps[0]), None);
    }

    #[test]
    fn copies_and_changed_packets_are_not_taken_for_lent_ones() {
        let frame = counting(600);
        let mut pool = Pool::new(8, 0);
        pool.allow_lending();
        // SAFETY: `frame` outlives the lending and is not written.
        let p = unsafe { pool.packet_lent(frame.as_ptr(), frame.len(), 0) };
        let mut c = pool.packet_from(&[0; 60], 0);
        c.copy_meta_from(&p);
        assert!(!c.is_lent(), "the copy's metadata does not make it lent");
        assert_eq!(pool.lent_tail(&c), None);
        // The metadata copied wholesale: the entry names another buffer.
        c.meta = p.meta;
        assert_eq!(pool.lent_tail(&c), None);
        pool.materialize(&mut c);
        assert!(!c.is_lent());
        assert_eq!(c.data(), &[0; 60]);
        // A lent packet whose length changed (nothing may do that; release builds do not
        // check) is never read past what was lent.
        let mut q = p;
        q.len += 100;
        assert_eq!(pool.lent_tail(&q), None);
        pool.materialize(&mut q);
        assert!(!q.is_lent());
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "a lent frame used before Pool::materialize")]
    fn reading_a_lent_frame_whole_is_caught_in_debug_builds() {
        let frame = counting(600);
        let mut pool = Pool::new(8, 0);
        pool.allow_lending();
        // SAFETY: `frame` outlives the lending and is not written.
        let p = unsafe { pool.packet_lent(frame.as_ptr(), frame.len(), 0) };
        let _ = p.data();
    }

    static RELEASED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// Counts releases (the test's buffers are leaked, not reused).
    unsafe fn count_release(_: std::ptr::NonNull<u8>) {
        RELEASED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// A packet in a fresh foreign buffer of `cap` bytes with 128 bytes of headroom, holding
    /// `frame`.
    fn foreign_packet(cap: usize, frame: &[u8]) -> Packet {
        let owner = ForeignOwner::register(count_release).expect("one release function");
        let mem: &'static mut [u8] = Box::leak(vec![0u8; cap].into_boxed_slice());
        let start = MD_LEN + 128;
        mem[start..start + frame.len()].copy_from_slice(frame);
        let base = std::ptr::NonNull::new(mem.as_mut_ptr()).expect("not null");
        // SAFETY: `mem` is leaked: valid, initialized and used by nothing else.
        unsafe { Packet::from_foreign(owner, base, cap, start, frame.len(), 4) }
    }

    fn released() -> usize {
        RELEASED.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn a_foreign_buffer_goes_back_to_its_owner_once_and_never_into_a_pool() {
        // One test, because the release counter is the process's.
        let frame = counting(60);
        let mut pool = Pool::new(8, 0);
        let before = released();
        let mut p = foreign_packet(4096, &frame);
        assert!(p.is_foreign());
        assert_eq!(
            (p.data(), p.headroom(), p.meta.in_port),
            (&frame[..], 128, 4)
        );
        p.push_front(50).fill(9);
        assert_eq!(p.len(), 110);
        pool.free(p);
        assert_eq!(released(), before + 1, "freed to a pool: released");
        assert_eq!((pool.spare(), pool.spare_large()), (0, 0), "and not kept");
        // Of a pool class's size: still never kept.
        pool.free(foreign_packet(BUF_SIZE, &frame));
        pool.free(foreign_packet(LARGE_BUF_SIZE, &frame));
        assert_eq!(released(), before + 3);
        assert_eq!((pool.spare(), pool.spare_large()), (0, 0));
        // Dropped: released.
        drop(foreign_packet(4096, &frame));
        assert_eq!(released(), before + 4);
        // Taken whole by a port: not released, and where it was.
        let p = foreign_packet(4096, &frame);
        let at = p.data().as_ptr();
        let (base, start, len) = p.into_foreign().expect("foreign");
        assert_eq!((start, len), (MD_LEN + 128, 60));
        assert_eq!(base.as_ptr().wrapping_add(start).cast_const(), at);
        assert_eq!(released(), before + 4);
        // A push beyond the owner's headroom moves the frame into a buffer of the switch's
        // own, and the foreign one goes back at once.
        let mut p = foreign_packet(4096, &frame);
        p.push_front(200).fill(1);
        assert!(!p.is_foreign());
        assert_eq!(&p.data()[200..], &frame[..]);
        assert_eq!(released(), before + 5);
        assert!(p.into_foreign().is_err(), "own memory is not given away");
        // A copy is the switch's own; the original keeps its buffer.
        let p = foreign_packet(4096, &frame);
        let c = pool.copy_of(&p, 60);
        assert!(!c.is_foreign());
        assert_eq!(c.data(), p.data());
        pool.free(p);
        assert_eq!(released(), before + 6);
    }

    #[test]
    fn set_len_and_truncate() {
        let mut p = Packet::from_slice(&[1; 10]);
        p.truncate(4);
        assert_eq!(p.len(), 4);
        p.set_len(BUF_SIZE);
        assert_eq!(p.len(), BUF_SIZE);
    }
}
