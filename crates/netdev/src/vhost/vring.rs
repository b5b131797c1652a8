//! A started vring's data path: a receive burst takes the frames of the guest's transmit ring
//! (copied into pool buffers, or lent to the PMD), a send burst puts frames into the guest's
//! receive ring (merging buffers where the guest allows it), and the guest is signalled when
//! it wants to be; what DPDK's `virtio_net.c` does for its vhost ports.

use std::fs::File;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use datapath::gso::{self, TcpSuper};
use datapath::gso_udp::UdpSuper;
use datapath::packet::{Batch, LENT_HEAD, MAX_BURST, Packet, Pool};
use datapath::super_frame::SuperFrame;
use virtio_queue::Queue;
use vm_memory::GuestMemoryMmap;

use super::copy::{LongCopy, copy_frame, copy_frame_with, put_hdr};
use super::features::{
    F_GUEST_CSUM, F_GUEST_ECN, F_GUEST_TSO4, F_GUEST_TSO6, F_GUEST_UFO, F_GUEST_USO4, F_GUEST_USO6,
    F_HOST_TSO4, F_HOST_TSO6, F_HOST_UFO, F_HOST_USO, F_MRG_RXBUF,
};
use super::guest_memory::{HostMap, gather, scatter};
use super::split_ring::{AVAIL_F_NO_INTERRUPT, BadRing, Burst, DESC_F_WRITE, SplitRing, UsedLater};
use crate::vnet;

/// Most descriptors one frame may span (in one chain, or over merged chains).
const MAX_SEGS: usize = 64;
/// Largest frame taken from a guest: a TCP super-frame's 64 KiB plus headers (with the
/// virtio-net header, still a pool's large buffer).
pub(super) const MAX_FRAME: usize = datapath::packet::LARGE_ROOM - vnet::HDR_LEN;

/// A started vring: the queue state and what it needs, owned by its slot.
pub(super) struct Ring {
    /// Which ring this is, of every ring started in the process ([`RING_IDS`]).
    pub(super) id: u64,
    pub(super) q: SplitRing,
    /// The chains of the burst being worked on.
    burst: Burst,
    pub(super) mem: Arc<GuestMemoryMmap>,
    /// `mem` as host pointers, for the frame copies.
    pub(super) host: HostMap,
    /// The call eventfd, written when the guest wants an interrupt.
    pub(super) call: Option<Arc<File>>,
    /// Bytes of the virtio-net header in front of each frame.
    pub(super) hdr_len: usize,
    /// Receive: TCP super-frames are taken.
    pub(super) tso: bool,
    /// Receive: UDP super-frames are taken (`HOST_USO`).
    uso: bool,
    /// Receive: UFO super-frames are taken (`HOST_UFO`).
    ufo: bool,
    /// Send: a frame may take several chains (`MRG_RXBUF`).
    mrg: bool,
    /// Send: the TCP super-frames the guest takes whole.
    guest_gso: GuestGso,
    /// Receive: frames dropped for their virtio-net header, by reason (the port's).
    pub(super) rx_drops: Arc<vnet::RxDrops>,
}

/// The super-frames a guest takes whole on its receive ring, from the features it accepted:
/// TCP ones with `GUEST_TSO4`/`GUEST_TSO6` (each needs `GUEST_CSUM`), and `GUEST_ECN` for one
/// with CWR set; UDP ones with `GUEST_USO4`/`GUEST_USO6` (with `GUEST_CSUM`); UFO ones with
/// `GUEST_UFO` (with `GUEST_CSUM`). Others are segmented (UFO ones fragmented) before they go
/// into its ring.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct GuestGso {
    /// `GUEST_CSUM`: frames whose checksum is pending go to it as `NEEDS_CSUM`.
    csum: bool,
    v4: bool,
    v6: bool,
    ecn: bool,
    uso4: bool,
    uso6: bool,
    ufo: bool,
}

impl GuestGso {
    /// What features `acked` let the switch send.
    pub(super) fn of(acked: u64) -> GuestGso {
        let csum = acked & F_GUEST_CSUM != 0;
        GuestGso {
            csum,
            v4: csum && acked & F_GUEST_TSO4 != 0,
            v6: csum && acked & F_GUEST_TSO6 != 0,
            ecn: acked & F_GUEST_ECN != 0,
            uso4: csum && acked & F_GUEST_USO4 != 0,
            uso6: csum && acked & F_GUEST_USO6 != 0,
            ufo: csum && acked & F_GUEST_UFO != 0,
        }
    }

    /// Whether UDP super-frame `u` goes to the guest whole.
    fn takes_udp(self, u: &UdpSuper) -> bool {
        if u.ipv6 { self.uso6 } else { self.uso4 }
    }

    /// Whether super-frame `p`, found as `t`, goes to the guest whole.
    fn takes(self, p: &Packet, t: &TcpSuper) -> bool {
        (if t.ipv6 { self.v6 } else { self.v4 }) && (self.ecn || !gso::has_cwr(p, t))
    }
}

/// What became of a frame sent into chains other than the usual one
/// ([`Ring::send_chains`]).
enum Chains {
    /// Sent, into this many chains.
    Sent(usize),
    /// It does not fit the chains the guest offers (too small, or too many buffers); the next
    /// frame may.
    NoFit,
    /// The guest has posted no more buffers.
    NoMore,
    /// The guest broke the ring's rules.
    Bad(BadRing),
}

/// How a burst goes on after a frame was sent or not.
enum Next {
    /// With the next frame.
    Go,
    /// The guest has posted no more buffers: the rest of the burst is dropped without looking
    /// again.
    Empty,
    /// The guest broke the ring's rules.
    Bad(BadRing),
}

/// Counts a frame `len` bytes long that went as `c` into `counts` (see [`Ring::send`]) and the
/// chains it took into `added`.
#[inline(always)]
fn tally(c: Chains, len: usize, counts: &mut [u64; 3], added: &mut usize) -> Next {
    match c {
        Chains::Sent(n_heads) => {
            *added += n_heads;
            counts[0] += 1;
            counts[1] += len as u64;
            return Next::Go;
        }
        Chains::NoFit => {}
        Chains::NoMore => {
            counts[2] += 1;
            return Next::Empty;
        }
        Chains::Bad(e) => {
            counts[2] += 1;
            return Next::Bad(e);
        }
    }
    counts[2] += 1;
    Next::Go
}

/// The next [`Ring::id`].
static RING_IDS: AtomicU64 = AtomicU64::new(1);

/// Chains of a guest's transmit ring whose frames a receive burst lent to the PMD
/// ([`Pool::packet_lent`]) instead of copying them: they go back to the used ring when the PMD
/// releases them ([`RxQueue::release`](datapath::port::RxQueue::release)), and their memory stays
/// mapped until then, even if the ring is reset meanwhile.
#[derive(Default)]
pub(super) struct Lent {
    pub(super) heads: [u16; MAX_BURST],
    pub(super) n: usize,
    /// The ring they are of ([`Ring::id`]).
    pub(super) ring: u64,
    /// That ring's memory while `n > 0`.
    pub(super) mem: Option<Arc<GuestMemoryMmap>>,
}

impl Lent {
    /// Forgets the chains (their ring is gone) and lets their memory go.
    pub(super) fn forget(&mut self) {
        self.n = 0;
        self.mem = None;
    }
}

impl Ring {
    /// The ring `q` describes, on `mem`.
    pub(super) fn start(
        q: &Queue,
        mem: Arc<GuestMemoryMmap>,
        call: Option<Arc<File>>,
        hdr_len: usize,
        acked: u64,
        rx_drops: Arc<vnet::RxDrops>,
    ) -> Result<Ring, String> {
        let host = HostMap::new(&mem);
        Ok(Ring {
            id: RING_IDS.fetch_add(1, Relaxed),
            q: SplitRing::new(q, &host)?,
            burst: Burst::new(),
            host,
            mem,
            call,
            hdr_len,
            tso: acked & (F_HOST_TSO4 | F_HOST_TSO6) != 0,
            uso: acked & F_HOST_USO != 0,
            ufo: acked & F_HOST_UFO != 0,
            mrg: acked & F_MRG_RXBUF != 0,
            guest_gso: GuestGso::of(acked),
            rx_drops,
        })
    }

    /// Whether the guest takes some TCP super-frames whole ([`GuestGso`]).
    pub(super) fn takes_super_frames(&self) -> bool {
        self.guest_gso.v4 || self.guest_gso.v6
    }

    /// Publishes the used elements of a burst that used `added` chains and signals the guest
    /// if it wants to be (no `VRING_AVAIL_F_NO_INTERRUPT`; read after the index is out).
    fn complete(&mut self, added: usize) {
        if added == 0 {
            return;
        }
        self.q.publish_used();
        if let Some(call) = &self.call {
            std::sync::atomic::fence(SeqCst);
            if self.q.avail_flags() & AVAIL_F_NO_INTERRUPT == 0 {
                // An eventfd write fails only when the counter would overflow, which means
                // the guest already has a signal pending.
                let _ = (&**call).write(&1u64.to_ne_bytes());
            }
        }
    }

    /// Gives the chains of `lent` back to the used ring, when they are this ring's (a ring
    /// started again since has its own state), and forgets them.
    pub(super) fn give_back(&mut self, lent: &mut Lent) {
        if lent.n > 0 && lent.ring == self.id {
            for &h in &lent.heads[..lent.n] {
                self.q.put_used(h, 0);
            }
            self.complete(lent.n);
        }
        lent.forget();
    }

    /// Receives up to `batch.room()` frames from the guest's transmit ring. Counts into
    /// `counts` (packets, bytes, dropped). A frame in one buffer that asks for no offload work
    /// is lent when `pool` lends ([`Pool::packet_lent`]): its chain is recorded in `lent`
    /// instead of going back; whatever `lent` still held goes back first.
    pub(super) fn recv(
        &mut self,
        pool: &mut Pool,
        batch: &mut Batch,
        in_port: u32,
        counts: &mut [u64; 3],
        lent: &mut Lent,
    ) -> Result<(), BadRing> {
        if lent.n > 0 {
            self.give_back(lent);
        }
        // The ring's indices live in registers for the burst: stored into the ring after each
        // frame, a wider load of one of them waited for every earlier store, among them the
        // copies into guest memory waiting for their lines.
        let mut q = self.q;
        let pending = q.avail_idx().wrapping_sub(q.next_avail);
        if pending > q.size {
            return Err(BadRing("available index more than a ring ahead"));
        }
        let todo = usize::from(pending).min(batch.room()).min(MAX_BURST);
        q.prefetch::<false>(&self.host, &mut self.burst, todo, 0, 0, |_| usize::MAX);
        let burst = &self.burst;
        let hdr_len = self.hdr_len;
        let mut added = 0;
        let mut used = UsedLater::new();
        let mut result = Ok(());
        for j in 0..todo {
            // The usual chain: one readable buffer holding header and frame, in one region.
            let (head, single) = match burst.nth(j) {
                Some(s) if (hdr_len + 14..=hdr_len + MAX_FRAME).contains(&(s.len as usize)) => {
                    (s.head, Some((s.at, s.len as usize)))
                }
                Some(s) => (s.head, None),
                None => (q.avail_entry(q.next_avail), None),
            };
            q.next_avail = q.next_avail.wrapping_add(1);
            // The header, read straight from the guest's buffer.
            let mut hdr = [0u8; vnet::HDR_LEN];
            if let Some((src, _)) = single {
                // SAFETY: `src` is valid for `len >= hdr_len + 14` bytes (`HostMap::at`), more
                // than the 12 read.
                unsafe {
                    std::ptr::copy_nonoverlapping(src.cast_const(), hdr.as_mut_ptr(), hdr.len())
                };
            }
            if let Some((src, len)) = single
                && len - hdr_len > LENT_HEAD
                && hdr[0] & vnet::F_NEEDS_CSUM == 0
                && hdr[1] == vnet::GSO_NONE
            {
                // SAFETY: the frame's `len - hdr_len` bytes after the header are in a live
                // mapping (`HostMap::at`) that `lent.mem` keeps mapped until the PMD has
                // ended the pool's lending and released the queue; guest memory is never
                // a Rust allocation.
                let p = unsafe { pool.packet_lent(src.add(hdr_len), len - hdr_len, in_port) };
                if p.is_lent() {
                    lent.heads[lent.n] = head;
                    lent.n += 1;
                    if lent.mem.is_none() {
                        lent.mem = Some(self.mem.clone());
                        lent.ring = self.id;
                    }
                    batch.mark_lent();
                } else {
                    used.push(&mut q, head, 0);
                    added += 1;
                }
                counts[0] += 1;
                counts[1] += p.len() as u64;
                batch.push(p);
                continue;
            }
            let p = if let Some((src, len)) = single {
                used.push(&mut q, head, 0);
                added += 1;
                let frame_len = len - hdr_len;
                let p = batch.push_last(pool.packet_with_len(frame_len, in_port));
                // SAFETY: `src` is valid for `len` bytes of a live mapping (`HostMap::at`), the
                // frame its last `frame_len`; the packet's `frame_len` bytes are its own, and
                // guest memory is never a Rust allocation. The guest may write it
                // concurrently, as with any device DMA: the frame is then garbage, never
                // unsafety for the switch.
                unsafe {
                    copy_frame(
                        p.data_mut().as_mut_ptr(),
                        src.add(hdr_len).cast_const(),
                        frame_len,
                    )
                };
                p
            } else {
                used.flush(&mut q);
                match self.recv_chain(&mut q, head, pool, in_port, &mut added) {
                    Ok(Some(mut p)) => {
                        // Header and frame were gathered into the packet together: a
                        // fixed-size copy of the header (the frame is longer than any), then
                        // the frame alone.
                        hdr.copy_from_slice(&p.data()[..vnet::HDR_LEN]);
                        p.pull_front(hdr_len);
                        batch.push_last(p)
                    }
                    Ok(None) => {
                        counts[2] += 1;
                        continue;
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            };
            // What the legacy header does not have is zero (the lending test above reads only
            // its first two bytes).
            if hdr_len < vnet::HDR_LEN {
                hdr[vnet::HDR_LEN_LEGACY..].fill(0);
            }
            let gso = vnet::RxGso {
                tso: self.tso,
                uso: self.uso,
                ufo: self.ufo,
            };
            match vnet::accept(&hdr, p, gso) {
                Ok(marked) => {
                    counts[0] += 1;
                    counts[1] += p.len() as u64;
                    if marked {
                        batch.mark_gso();
                    }
                }
                Err(why) => {
                    self.rx_drops.count(why);
                    if let Some(p) = batch.pop() {
                        pool.free(p);
                    }
                    counts[2] += 1;
                }
            }
        }
        used.flush(&mut q);
        self.keep_indices(&q);
        self.complete(added);
        result
    }

    /// Keeps the indices of `q`, the ring's copy a burst worked on. Only they changed, and
    /// copied whole the ring would be read wider than its indices were stored, a load that
    /// waits for every store before it (guest memory's too) to leave the store buffer.
    #[inline]
    fn keep_indices(&mut self, q: &SplitRing) {
        self.q.next_avail = q.next_avail;
        self.q.next_used = q.next_used;
    }

    /// Takes the frame of transmit chain `head`, other than the usual one-buffer chain: its
    /// buffers walked and gathered, header and frame, into a packet. The chain goes back to
    /// the used ring (counted in `added`) unless the walk itself failed. `None`: the frame's
    /// length is out of bounds (a drop).
    #[cold]
    #[inline(never)]
    fn recv_chain(
        &self,
        q: &mut SplitRing,
        head: u16,
        pool: &mut Pool,
        in_port: u32,
        added: &mut usize,
    ) -> Result<Option<Packet>, BadRing> {
        let mut segs = [(0u64, 0u32); MAX_SEGS];
        let (mut n, mut total, mut too_many) = (0usize, 0usize, false);
        q.walk(&self.host, head, false, |addr, len| {
            if n == MAX_SEGS {
                too_many = true;
            } else {
                segs[n] = (addr, len);
                n += 1;
                total += len as usize;
            }
        })?;
        // The chain goes back whatever becomes of its frame.
        q.put_used(head, 0);
        *added += 1;
        if too_many {
            return Err(BadRing("transmit chain of too many buffers"));
        }
        if total < self.hdr_len + 14 || total - self.hdr_len > MAX_FRAME {
            return Ok(None);
        }
        // Header and frame in one copy; the header is then cut off the front.
        let mut p = pool.packet_with_len(total, in_port);
        if gather(&self.host, &self.mem, &segs[..n], p.data_mut()).is_err() {
            pool.free(p);
            return Err(BadRing("buffer outside guest memory"));
        }
        Ok(Some(p))
    }

    /// Sends every packet of `batch` into the guest's receive ring; counts into `counts`
    /// (packets, bytes, dropped).
    ///
    /// A lent packet's frame is copied from its buffer and from where it is lent
    /// ([`Pool::lent_tail`]), or brought into its buffer first when it takes several buffers.
    pub(super) fn send(
        &mut self,
        batch: &mut Batch,
        counts: &mut [u64; 3],
        pool: &mut Pool,
        how: LongCopy,
    ) -> Result<(), BadRing> {
        // The indices in registers, as in `recv`.
        let mut q = self.q;
        let avail = q.avail_idx();
        if avail.wrapping_sub(q.next_avail) > q.size {
            counts[2] += batch.len() as u64;
            return Err(BadRing("available index more than a ring ahead"));
        }
        let hdr_len = self.hdr_len;
        let packets = batch.packets();
        q.prefetch::<true>(
            &self.host,
            &mut self.burst,
            usize::from(avail.wrapping_sub(q.next_avail)).min(packets.len()),
            DESC_F_WRITE,
            hdr_len,
            |j| hdr_len + packets[j].len(),
        );
        let burst = &self.burst;
        let mut added = 0;
        let mut used = UsedLater::new();
        let mut result = Ok(());
        let mut empty = false;
        for p in batch.packets_mut() {
            if result.is_err() || empty {
                counts[2] += 1;
                continue;
            }
            let frame_len = p.len();
            let need = self.hdr_len + frame_len;
            // The usual case: the next chain is one writable buffer, in one region, that
            // holds header and frame.
            if let Some(s) = burst.single(q.next_avail)
                && s.len as usize >= need
                && p.meta.gso_size == 0
                && !p.meta.csum_pending()
            {
                let (head, dst) = (s.head, s.at);
                // The header (all zero but `num_buffers`, 1) is compared and, if
                // need be, stored straight from registers ([`put_hdr`]): written to
                // the packet's headroom and copied with the frame, it was read back
                // before its stores had left the store buffer, which then waited for
                // every earlier store to guest memory.
                //
                // SAFETY: `dst` is valid for `s.len >= need` bytes of a live, writable
                // shared mapping (`HostMap::at`), header then frame; the packet's buffer is
                // never guest memory. A lent frame's rest is valid for its
                // `frame_len - LENT_HEAD` bytes until the pool's lending ends
                // (`Pool::packet_lent`); it may be this guest's memory, even (a
                // hostile guest) overlapping `dst`, hence a copy that allows it.
                unsafe {
                    put_hdr(dst, self.hdr_len, 1);
                    let dst = dst.add(self.hdr_len);
                    match pool.lent_tail(p) {
                        None => copy_frame_with(dst, p.data().as_ptr(), frame_len, how),
                        Some(tail) => {
                            copy_frame(dst, p.headers().as_ptr(), LENT_HEAD);
                            std::ptr::copy(tail, dst.add(LENT_HEAD), frame_len - LENT_HEAD);
                        }
                    }
                }
                q.next_avail = q.next_avail.wrapping_add(1);
                used.push(&mut q, head, need as u32);
                added += 1;
                counts[0] += 1;
                counts[1] += frame_len as u64;
                continue;
            }
            used.flush(&mut q);
            pool.materialize(p);
            let next = if p.meta.gso_size == 0 {
                let h = self.hdr_of(p);
                let c = self.send_chains(&mut q, avail, p, &h);
                tally(c, frame_len, counts, &mut added)
            } else {
                self.send_super(&mut q, avail, p, pool, counts, &mut added)
            };
            match next {
                Next::Go => {}
                Next::Empty => empty = true,
                Next::Bad(e) => result = Err(e),
            }
        }
        used.flush(&mut q);
        self.keep_indices(&q);
        self.complete(added);
        result
    }

    /// The header of ordinary frame `p`: `NEEDS_CSUM` for one whose checksum is pending, to a
    /// guest that accepted `GUEST_CSUM` (its checksum otherwise completed here), else none.
    #[inline]
    fn hdr_of(&self, p: &mut Packet) -> [u8; vnet::HDR_LEN] {
        if p.meta.csum_pending() {
            if self.guest_gso.csum
                && let Some(h) = vnet::csum_hdr(p)
            {
                return h;
            }
            datapath::csum_pending::complete(p);
        }
        [0; vnet::HDR_LEN]
    }

    /// Sends `p` into the chains from the available slot `q.next_avail` on (up to the
    /// driver's index `avail`), as many as the frame needs where the guest merges buffers,
    /// else one: what the usual one-buffer chain does not serve. Chains that the frame does
    /// not fit go back to the available ring.
    #[cold]
    #[inline(never)]
    fn send_chains(
        &self,
        q: &mut SplitRing,
        avail: u16,
        p: &mut Packet,
        base: &[u8; vnet::HDR_LEN],
    ) -> Chains {
        // The buffers the frame goes to: (address, length, chain), and the chains.
        let mut segs = [(0u64, 0u32, 0u16); MAX_SEGS];
        let mut heads = [0u16; MAX_SEGS];
        let mut used = [0u32; MAX_SEGS];
        let need = self.hdr_len + p.len();
        let start = q.next_avail;
        let (mut n, mut n_heads, mut cap) = (0, 0, 0usize);
        while cap < need {
            if q.next_avail == avail {
                q.next_avail = start;
                return Chains::NoMore;
            }
            if n_heads == MAX_SEGS || (n_heads == 1 && !self.mrg) {
                // Too many buffers for one frame, or a single buffer too small for it: this
                // frame cannot go, the next may.
                q.next_avail = start;
                return Chains::NoFit;
            }
            let head = q.avail_entry(q.next_avail);
            q.next_avail = q.next_avail.wrapping_add(1);
            heads[n_heads] = head;
            n_heads += 1;
            let (mut k, mut chain_cap) = (0usize, 0usize);
            let chain = (n_heads - 1) as u16;
            let walked = q.walk(&self.host, head, true, |addr, len| {
                k += 1;
                chain_cap += len as usize;
                // Past MAX_SEGS the frame has all the buffers it may take.
                if n < MAX_SEGS {
                    segs[n] = (addr, len, chain);
                    n += 1;
                    cap += len as usize;
                }
            });
            if let Err(e) = walked {
                return Chains::Bad(e);
            } else if k > MAX_SEGS {
                return Chains::Bad(BadRing("receive chain of too many buffers"));
            } else if chain_cap < self.hdr_len {
                return Chains::Bad(BadRing("receive buffer shorter than the virtio-net header"));
            }
        }
        let mut hdr = *base;
        hdr[10..12].copy_from_slice(&(n_heads as u16).to_le_bytes());
        let hdr = &hdr[..self.hdr_len];
        // The header goes in the packet's headroom (the packet is done with after this), so
        // that header and frame are one copy.
        let copied = if p.headroom() >= hdr.len() {
            p.push_front(hdr.len()).copy_from_slice(hdr);
            scatter(&self.host, &self.mem, &segs[..n], &[], p.data(), &mut used)
        } else {
            scatter(&self.host, &self.mem, &segs[..n], hdr, p.data(), &mut used)
        };
        if copied.is_err() {
            return Chains::Bad(BadRing("buffer outside guest memory"));
        }
        for (i, &h) in heads[..n_heads].iter().enumerate() {
            q.put_used(h, used[i]);
        }
        Chains::Sent(n_heads)
    }

    /// Sends super-frame `p` (counted as [`tally`] does): whole, with the virtio-net header
    /// that has the guest segment it, where the guest takes it ([`GuestGso`]); else as its
    /// segments. One that is not TCP or UDP over IP is dropped (counted).
    #[cold]
    #[inline(never)]
    fn send_super(
        &self,
        q: &mut SplitRing,
        avail: u16,
        p: &mut Packet,
        pool: &mut Pool,
        counts: &mut [u64; 3],
        added: &mut usize,
    ) -> Next {
        let (s, whole) = match SuperFrame::of(p) {
            Ok(SuperFrame::Tcp(t)) => (SuperFrame::Tcp(t), self.guest_gso.takes(p, &t)),
            Ok(SuperFrame::Udp(u)) => (SuperFrame::Udp(u), self.guest_gso.takes_udp(&u)),
            Ok(SuperFrame::Ufo(u)) => (SuperFrame::Ufo(u), self.guest_gso.ufo),
            Err(_) => {
                counts[2] += 1;
                return Next::Go;
            }
        };
        if whole {
            let Some(h) = vnet::gso_hdr(p) else {
                counts[2] += 1;
                return Next::Go;
            };
            // Counted before the header goes into the packet's headroom.
            let len = p.len();
            let c = self.send_chains(q, avail, p, &h);
            return tally(c, len, counts, added);
        }
        let n = s.n_segments(p);
        for k in 0..n {
            let mut seg = s.segment(p, k, pool);
            let len = seg.len();
            let c = self.send_chains(q, avail, &mut seg, &[0; vnet::HDR_LEN]);
            pool.free(seg);
            match tally(c, len, counts, added) {
                Next::Go => {}
                stop => {
                    counts[2] += (n - k - 1) as u64;
                    return stop;
                }
            }
        }
        Next::Go
    }
}
