//! The driver's side of a split virtqueue (virtio 1.x §2.7) in the memory it shares with the
//! device: where a vring's parts lie, the `memfd` they live in, and the receive and transmit
//! bursts, which check everything the device writes into the used ring before they act on it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicU16, AtomicU32};

use datapath::packet::{Batch, MAX_BURST, Pool};
use vmm_sys_util::eventfd::EventFd;

use crate::afpacket::mmap_shared;
use crate::vhost::AVAIL_F_NO_INTERRUPT;

/// Bytes of each ring buffer: a virtio-net header and a frame of up to 2036 bytes (1514 and
/// any tags comfortably).
pub const BUF_LEN: usize = 2048;
/// Shortest frame taken from the device (an Ethernet header).
const MIN_FRAME: usize = 14;
/// Page size the ring parts are aligned to (legacy devices want the used ring page-aligned).
const PAGE: usize = 4096;

/// `VRING_USED_F_NO_NOTIFY`: the device polls.
const USED_F_NO_NOTIFY: u16 = 1;
/// `VRING_DESC_F_WRITE`: a buffer the device writes.
const DESC_F_WRITE: u16 = 2;

/// Why a ring was taken out of service: what the device wrote that it may not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(super) enum BadRing {
    /// The used index ran more than a ring ahead of what was taken.
    UsedIdxAhead,
    /// A used element names a descriptor outside the ring.
    IdOutOfRange,
    /// A used element names a descriptor the device does not hold.
    IdNotInFlight,
    /// A used element says more bytes were written than the buffer has.
    LenBeyondBuffer,
}

impl BadRing {
    pub(super) const ALL: [BadRing; 4] = [
        BadRing::UsedIdxAhead,
        BadRing::IdOutOfRange,
        BadRing::IdNotInFlight,
        BadRing::LenBeyondBuffer,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            BadRing::UsedIdxAhead => "used_idx_ahead",
            BadRing::IdOutOfRange => "used_id_out_of_range",
            BadRing::IdNotInFlight => "used_id_not_in_flight",
            BadRing::LenBeyondBuffer => "used_len_beyond_buffer",
        }
    }
}

/// What one burst did to a queue's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) packets: u64,
    pub(super) bytes: u64,
    pub(super) dropped: u64,
}

/// Where the parts of one vring lie, as offsets from the vring's start; every vring of a
/// connection has the same layout, one after the other.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    pub(super) size: u16,
    /// `size` descriptors of 16 bytes, at offset 0.
    pub(super) avail: usize,
    pub(super) used: usize,
    pub(super) bufs: usize,
    /// Bytes of one vring with its buffers (a multiple of [`PAGE`]).
    pub(super) len: usize,
}

impl Layout {
    pub(super) fn new(size: u16) -> Layout {
        let n = usize::from(size);
        let page = |b: usize| b.div_ceil(PAGE) * PAGE;
        let avail = page(16 * n);
        // Flags, index, ring and `used_event`.
        let used = avail + page(6 + 2 * n);
        // Flags, index, ring and `avail_event`.
        let bufs = used + page(6 + 8 * n);
        Layout {
            size,
            avail,
            used,
            bufs,
            len: page(bufs + n * BUF_LEN),
        }
    }
}

/// The guest memory of one connection: a `memfd` mapped shared, which the back-end maps too.
pub(super) struct SharedMem {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
    pub(super) fd: OwnedFd,
}

// SAFETY: the mapping is plain memory owned by this value until it drops; the pointers made
// from it are used by one thread at a time per ring (the ring's slot lock), and what the
// device does to it concurrently is accessed atomically (indexes, used elements) or copied.
unsafe impl Send for SharedMem {}
// SAFETY: as for `Send`: `&SharedMem` only hands out the address and the fd.
unsafe impl Sync for SharedMem {}

impl SharedMem {
    pub(super) fn new(len: usize) -> io::Result<SharedMem> {
        // SAFETY: the name is a NUL-terminated string; the flags are valid.
        let fd = unsafe { libc::memfd_create(c"flowpath-virtio-user".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let size = libc::off_t::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: a valid fd and size.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), size) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // The whole file.
        let ptr = mmap_shared(&fd, len)?;
        Ok(SharedMem { ptr, len, fd })
    }

    /// The mapping's address in this process (the "user address" of vhost-user).
    pub(super) fn addr(&self) -> u64 {
        self.ptr as u64
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no ring is left using it (each
        // holds a reference to this value).
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// One split ring, driver side, in a connection's [`SharedMem`].
pub(super) struct Vring {
    /// Keeps the memory mapped while the ring is in use.
    _mem: Arc<SharedMem>,
    /// A power of two.
    pub(super) size: u16,
    pub(super) desc: *mut u8,
    pub(super) avail: *mut u8,
    pub(super) used: *mut u8,
    pub(super) bufs: *mut u8,
    /// Guest address of buffer 0 (buffer `i` at `+ i * BUF_LEN`).
    pub(super) bufs_gpa: u64,
    pub(super) hdr_len: usize,
    kick: Arc<EventFd>,
    /// The available index as published, and where the next entry goes.
    avail_idx: u16,
    /// The used index up to which elements were taken.
    pub(super) used_idx: u16,
    /// Whether the device holds descriptor `i` (made available, not yet used).
    inflight: Box<[bool]>,
    /// Transmit: the descriptors the driver holds, `free[..n_free]`.
    pub(super) free: Box<[u16]>,
    n_free: usize,
}

// SAFETY: the pointers are into `mem`, which the ring keeps alive; the ring is used by one
// thread at a time (its slot's lock), and every access through them is bounds-checked
// against the layout the ring was built with.
unsafe impl Send for Vring {}

impl Vring {
    /// Ring number `index` of `mem` in `layout`, set up from scratch: its parts zeroed,
    /// interrupts suppressed, and for a receive ring (`receive`) every buffer made available.
    /// The device must not be using the ring (not yet told of it, or stopped).
    pub(super) fn new(
        mem: Arc<SharedMem>,
        index: usize,
        layout: Layout,
        receive: bool,
        hdr_len: usize,
        kick: Arc<EventFd>,
    ) -> Option<Vring> {
        let base = index.checked_mul(layout.len)?;
        if base.checked_add(layout.len)? > mem.len {
            return None;
        }
        // SAFETY: `base + layout.len <= mem.len`, so every part lies in the mapping.
        let at = |off: usize| unsafe { mem.ptr.add(base + off) };
        let n = usize::from(layout.size);
        // SAFETY: descriptor table and both rings, inside the mapping (above); the device is
        // not using them.
        unsafe { std::ptr::write_bytes(at(0), 0, layout.bufs) };
        let mut ring = Vring {
            size: layout.size,
            desc: at(0),
            avail: at(layout.avail),
            used: at(layout.used),
            bufs: at(layout.bufs),
            bufs_gpa: (base + layout.bufs) as u64,
            hdr_len,
            kick,
            avail_idx: 0,
            used_idx: 0,
            inflight: vec![false; n].into_boxed_slice(),
            free: (0..layout.size).rev().collect(),
            n_free: n,
            _mem: mem,
        };
        ring.avail_flags()
            .store(AVAIL_F_NO_INTERRUPT.to_le(), Relaxed);
        if receive {
            ring.n_free = 0;
            for id in 0..layout.size {
                ring.set_desc(id, BUF_LEN as u32, DESC_F_WRITE);
                ring.put_avail(id);
            }
            ring.publish_avail();
        }
        Some(ring)
    }

    #[inline]
    fn mask(&self) -> u16 {
        self.size - 1
    }

    #[inline]
    fn avail_flags(&self) -> &AtomicU16 {
        // SAFETY: the available ring's start is page-aligned and inside the mapping; the
        // device reads it concurrently, hence the atomic.
        unsafe { AtomicU16::from_ptr(self.avail.cast()) }
    }

    /// Writes descriptor `id` (below the ring size): its own buffer, `len` bytes.
    #[inline]
    fn set_desc(&self, id: u16, len: u32, flags: u16) {
        let addr = self.bufs_gpa + u64::from(id) * BUF_LEN as u64;
        let mut d = [0u8; 16];
        d[..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        debug_assert!(id < self.size);
        // SAFETY: `id < size`: inside the descriptor table. Published to the device by the
        // release store of the available index.
        unsafe { std::ptr::write_volatile(self.desc.add(16 * usize::from(id)).cast(), d) };
    }

    /// Puts descriptor `id` in the next available slot (published by `publish_avail`).
    #[inline]
    fn put_avail(&mut self, id: u16) {
        let at = 4 + 2 * usize::from(self.avail_idx & self.mask());
        // SAFETY: `at + 2 <= 4 + 2 * size`, inside the available ring, 2-aligned.
        let e = unsafe { AtomicU16::from_ptr(self.avail.add(at).cast()) };
        e.store(id.to_le(), Relaxed);
        self.inflight[usize::from(id)] = true;
        self.avail_idx = self.avail_idx.wrapping_add(1);
    }

    /// Publishes the available entries written so far (release: descriptors, buffers and
    /// entries are written first).
    #[inline]
    fn publish_avail(&self) {
        // SAFETY: the index at `avail + 2`, 2-aligned and inside the ring.
        let idx = unsafe { AtomicU16::from_ptr(self.avail.add(2).cast()) };
        idx.store(self.avail_idx.to_le(), Release);
    }

    /// The device's used index (acquire: the elements before it are written).
    #[inline]
    pub(super) fn used_idx_now(&self) -> u16 {
        // SAFETY: the index at `used + 2`, 2-aligned and inside the ring; written by the
        // device concurrently.
        let idx = unsafe { AtomicU16::from_ptr(self.used.add(2).cast()) };
        u16::from_le(idx.load(Acquire))
    }

    /// Used element `i` (mod the ring size): (id, len), unchecked.
    #[inline]
    fn used_elem(&self, i: u16) -> (u32, u32) {
        let at = 4 + 8 * usize::from(i & self.mask());
        // SAFETY: `at + 8 <= 4 + 8 * size`, inside the used ring; the ring is page-aligned,
        // so the elements are 4-aligned. Read after the acquire of the used index.
        let (id, len) = unsafe {
            (
                AtomicU32::from_ptr(self.used.add(at).cast()),
                AtomicU32::from_ptr(self.used.add(at + 4).cast()),
            )
        };
        (
            u32::from_le(id.load(Relaxed)),
            u32::from_le(len.load(Relaxed)),
        )
    }

    /// Elements the device has used and the driver not yet taken.
    #[inline]
    fn pending_used(&self) -> Result<u16, BadRing> {
        let pending = self.used_idx_now().wrapping_sub(self.used_idx);
        if pending > self.size {
            return Err(BadRing::UsedIdxAhead);
        }
        Ok(pending)
    }

    /// Takes used element `used_idx` back: its descriptor id, checked, and its length.
    #[inline]
    fn take_used(&mut self) -> Result<(u16, u32), BadRing> {
        let (id, len) = self.used_elem(self.used_idx);
        if id >= u32::from(self.size) {
            return Err(BadRing::IdOutOfRange);
        }
        let held = &mut self.inflight[id as usize];
        if !*held {
            return Err(BadRing::IdNotInFlight);
        }
        *held = false;
        self.used_idx = self.used_idx.wrapping_add(1);
        Ok((id as u16, len))
    }

    /// Tells the device of what was published unless it polls (a full barrier first, so the
    /// flag is read after the index is out: virtio 1.x §2.7.13.3).
    #[inline]
    pub(super) fn notify(&self) {
        std::sync::atomic::fence(SeqCst);
        // SAFETY: the used ring's flags, 2-aligned and inside it.
        let flags = unsafe { AtomicU16::from_ptr(self.used.cast()) };
        if u16::from_le(flags.load(Relaxed)) & USED_F_NO_NOTIFY == 0 {
            // Fails only when the counter is about to overflow: a kick is pending anyway.
            let _ = self.kick.write(1);
        }
    }

    /// Buffer of descriptor `id` (below the ring size).
    #[inline]
    fn buf(&self, id: u16) -> *mut u8 {
        debug_assert!(id < self.size);
        // SAFETY: `id < size`: buffer `id` lies in the buffer area of the ring.
        unsafe { self.bufs.add(usize::from(id) * BUF_LEN) }
    }

    /// Receives up to `batch.room()` frames the device put in the receive ring, and gives
    /// their buffers back to it. Counts into `c`.
    pub(super) fn recv(
        &mut self,
        pool: &mut Pool,
        batch: &mut Batch,
        in_port: u32,
        c: &mut Counts,
    ) -> Result<(), BadRing> {
        let pending = self.pending_used()?;
        let todo = usize::from(pending).min(batch.room()).min(MAX_BURST);
        if todo == 0 {
            return Ok(());
        }
        let mut ids = [0u16; MAX_BURST];
        for slot in ids.iter_mut().take(todo) {
            let (id, len) = self.take_used()?;
            *slot = id;
            let len = len as usize;
            if len > BUF_LEN {
                return Err(BadRing::LenBeyondBuffer);
            }
            if len < self.hdr_len + MIN_FRAME {
                c.dropped += 1;
                continue;
            }
            let frame = len - self.hdr_len;
            let mut p = pool.packet_with_len(frame, in_port);
            // SAFETY: `hdr_len + frame = len <= BUF_LEN`: inside buffer `id`; the destination
            // is the packet's own `frame` bytes. The device no longer writes the buffer (it
            // used it), and a device that does anyway makes garbage of the frame, not of the
            // port.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.buf(id).add(self.hdr_len).cast_const(),
                    p.data_mut().as_mut_ptr(),
                    frame,
                );
            }
            c.packets += 1;
            c.bytes += frame as u64;
            batch.push(p);
        }
        // The buffers go back (descriptors unchanged) once the whole burst is checked.
        for &id in &ids[..todo] {
            self.put_avail(id);
        }
        self.publish_avail();
        self.notify();
        Ok(())
    }

    /// Takes back the transmit descriptors the device used.
    fn reclaim(&mut self) -> Result<(), BadRing> {
        for _ in 0..self.pending_used()? {
            let (id, _) = self.take_used()?;
            self.free[self.n_free] = id;
            self.n_free += 1;
        }
        Ok(())
    }

    /// Puts every frame of `batch` in the transmit ring; counts into `c`.
    pub(super) fn send(&mut self, batch: &Batch, c: &mut Counts) -> Result<(), BadRing> {
        self.reclaim()?;
        let mut sent = false;
        for p in batch.packets() {
            let len = p.len();
            if self.hdr_len + len > BUF_LEN || self.n_free == 0 {
                c.dropped += 1;
                continue;
            }
            self.n_free -= 1;
            let id = self.free[self.n_free];
            let b = self.buf(id);
            // SAFETY: `hdr_len + len <= BUF_LEN`: inside buffer `id`, which the device does
            // not hold; the source is the packet's frame.
            unsafe {
                std::ptr::write_bytes(b, 0, self.hdr_len);
                std::ptr::copy_nonoverlapping(p.data().as_ptr(), b.add(self.hdr_len), len);
            }
            self.set_desc(id, (self.hdr_len + len) as u32, 0);
            self.put_avail(id);
            c.packets += 1;
            c.bytes += len as u64;
            sent = true;
        }
        if sent {
            self.publish_avail();
            self.notify();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The driver's rings against a device that [`Device`] simulates in the same memory, well
    //! behaved and not: what a hostile back-end could write into the used rings is written
    //! here directly.

    use super::super::fake_device::{Device, frame};
    use super::*;
    use crate::vnet;

    const HDR: usize = vnet::HDR_LEN;
    fn ring(size: u16, receive: bool) -> Vring {
        let layout = Layout::new(size);
        let mem = Arc::new(SharedMem::new(layout.len).unwrap());
        let kick = Arc::new(EventFd::new(libc::EFD_NONBLOCK).unwrap());
        Vring::new(mem, 0, layout, receive, HDR, kick).unwrap()
    }
    fn recv(r: &mut Vring, pool: &mut Pool) -> (Result<(), BadRing>, Vec<Vec<u8>>, Counts) {
        let mut b = Batch::new();
        let mut c = Counts::default();
        let res = r.recv(pool, &mut b, 7, &mut c);
        let frames = b.packets().iter().map(|p| p.data().to_vec()).collect();
        pool.free_batch(&mut b);
        (res, frames, c)
    }

    fn send(r: &mut Vring, pool: &mut Pool, frames: &[Vec<u8>]) -> (Result<(), BadRing>, Counts) {
        let mut b = Batch::new();
        for f in frames {
            b.push(pool.packet_from(f, 0));
        }
        let mut c = Counts::default();
        let res = r.send(&b, &mut c);
        pool.free_batch(&mut b);
        (res, c)
    }

    /// The device fills the next available receive buffer with a header and `f`.
    fn deliver(d: &mut Device, f: &[u8]) -> u16 {
        let (id, off, len, flags) = d.take_avail().expect("a posted buffer");
        assert_eq!(
            (off, len, flags),
            (id as u64 * BUF_LEN as u64, BUF_LEN as u32, DESC_F_WRITE)
        );
        d.write_buf(id, &[0xee; HDR]);
        d.write_buf_at(id, HDR, f);
        d.put_used(u32::from(id), (HDR + f.len()) as u32);
        id
    }
    #[test]
    fn layout_parts_are_page_aligned_and_disjoint() {
        for size in [2u16, 8, 256, 1024, 32768] {
            let l = Layout::new(size);
            let n = usize::from(size);
            assert!(l.avail >= 16 * n && l.used >= l.avail + 6 + 2 * n);
            assert!(l.bufs >= l.used + 6 + 8 * n && l.len >= l.bufs + n * BUF_LEN);
            for off in [l.avail, l.used, l.bufs, l.len] {
                assert_eq!(off % PAGE, 0);
            }
        }
    }

    #[test]
    fn rx_frames_lose_their_header_and_the_buffers_go_back() {
        let mut r = ring(8, true);
        let mut d = Device::of(&r);
        let mut pool = Pool::new(64, 0);
        assert_eq!(r.avail_idx, 8, "every buffer posted");
        assert_eq!(r.avail_flags().load(Relaxed), AVAIL_F_NO_INTERRUPT);
        let frames: Vec<_> = [60, 1514, BUF_LEN - HDR]
            .iter()
            .map(|&n| frame(n, n as u8))
            .collect();
        for f in &frames {
            deliver(&mut d, f);
        }
        let (res, got, c) = recv(&mut r, &mut pool);
        assert_eq!(res, Ok(()));
        assert_eq!(got, frames);
        let bytes = frames.iter().map(|f| f.len() as u64).sum();
        assert_eq!(
            c,
            Counts {
                packets: 3,
                bytes,
                dropped: 0
            }
        );
        assert_eq!(r.avail_idx, 11, "three buffers given back");
        // The device sees them again, in the order used.
        for _ in 0..5 {
            d.take_avail().unwrap();
        }
        let again: Vec<u16> = (0..3).map(|_| d.take_avail().unwrap().0).collect();
        assert_eq!(again, [0, 1, 2]);
        assert!(d.take_avail().is_none());
    }

    #[test]
    fn rx_runts_are_dropped_and_their_buffers_reused() {
        let mut r = ring(8, true);
        let mut d = Device::of(&r);
        let mut pool = Pool::new(64, 0);
        let (id, ..) = d.take_avail().unwrap();
        d.put_used(u32::from(id), (HDR + 13) as u32);
        let (id, ..) = d.take_avail().unwrap();
        d.put_used(u32::from(id), 0);
        deliver(&mut d, &frame(60, 1));
        let (res, got, c) = recv(&mut r, &mut pool);
        assert_eq!((res, got.len()), (Ok(()), 1));
        assert_eq!(
            c,
            Counts {
                packets: 1,
                bytes: 60,
                dropped: 2
            }
        );
        assert_eq!(r.avail_idx, 11);
    }

    #[test]
    fn rx_burst_stops_at_the_batch_room() {
        let mut r = ring(64, true);
        let mut d = Device::of(&r);
        let mut pool = Pool::new(128, 0);
        for i in 0..40 {
            deliver(&mut d, &frame(64, i));
        }
        let (_, first, _) = recv(&mut r, &mut pool);
        let (_, second, _) = recv(&mut r, &mut pool);
        assert_eq!((first.len(), second.len()), (MAX_BURST, 40 - MAX_BURST));
        assert_eq!(first[0], frame(64, 0));
        assert_eq!(second[7], frame(64, 39));
    }

    #[test]
    fn tx_frames_go_behind_a_zeroed_header_and_a_full_ring_drops() {
        let mut r = ring(8, false);
        let mut d = Device::of(&r);
        let mut pool = Pool::new(64, 0);
        let frames: Vec<_> = (0..5).map(|i| frame(60 + 100 * i, i as u8)).collect();
        let (res, c) = send(&mut r, &mut pool, &frames);
        assert_eq!(res, Ok(()));
        assert_eq!((c.packets, c.dropped), (5, 0));
        for f in &frames {
            let (id, off, len, flags) = d.take_avail().unwrap();
            assert_eq!(
                (off, len as usize, flags),
                (id as u64 * BUF_LEN as u64, HDR + f.len(), 0)
            );
            let b = d.read_buf(id, len as usize);
            assert_eq!(&b[..HDR], &[0; HDR]);
            assert_eq!(&b[HDR..], &f[..]);
        }
        // Three descriptors left, nothing used yet: 3 of 5 go, 2 are dropped.
        let (_, c) = send(&mut r, &mut pool, &frames);
        assert_eq!((c.packets, c.dropped), (3, 2));
        // The device uses all eight (out of order); all eight are free again.
        let mut ids: Vec<u16> = (0..5).collect();
        for _ in 0..3 {
            ids.push(d.take_avail().unwrap().0);
        }
        for &id in ids.iter().rev() {
            d.put_used(u32::from(id), 0);
        }
        let eight: Vec<_> = (0..8).map(|i| frame(100, i)).collect();
        let (res, c) = send(&mut r, &mut pool, &eight);
        assert_eq!((res, c.packets, c.dropped), (Ok(()), 8, 0));
        // Too long for a buffer: dropped, nothing taken.
        let (_, c) = send(&mut r, &mut pool, &[frame(BUF_LEN - HDR + 1, 0)]);
        assert_eq!((c.packets, c.dropped), (0, 1));
    }

    #[test]
    fn kicks_only_when_the_device_wants_them() {
        let mut r = ring(8, false);
        let d = Device::of(&r);
        let mut pool = Pool::new(64, 0);
        let kicks = |r: &Vring| {
            let mut v = [0u8; 8];
            // SAFETY: reading 8 bytes from a nonblocking eventfd.
            let n = unsafe { libc::read(r.kick.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
            if n == 8 { u64::from_ne_bytes(v) } else { 0 }
        };
        let _ = send(&mut r, &mut pool, &[frame(60, 0)]);
        assert_eq!(kicks(&r), 1);
        d.set_used_flags(USED_F_NO_NOTIFY);
        let _ = send(&mut r, &mut pool, &[frame(60, 0)]);
        assert_eq!(kicks(&r), 0);
    }

    #[test]
    fn indexes_wrap_around() {
        let mut rx = ring(4, true);
        let mut tx = ring(4, false);
        let (mut drx, mut dtx) = (Device::of(&rx), Device::of(&tx));
        let mut pool = Pool::new(64, 0);
        for i in 0..70_000u32 {
            let f = frame(60 + (i % 64) as usize, i as u8);
            deliver(&mut drx, &f);
            let (res, got, _) = recv(&mut rx, &mut pool);
            assert_eq!(
                (res, &got[..]),
                (Ok(()), std::slice::from_ref(&f)),
                "at {i}"
            );
            let (res, c) = send(&mut tx, &mut pool, std::slice::from_ref(&f));
            assert_eq!((res, c.packets), (Ok(()), 1), "at {i}");
            let (id, _, len, _) = dtx.take_avail().unwrap();
            assert_eq!(dtx.read_buf(id, len as usize)[HDR..], f[..]);
            dtx.put_used(u32::from(id), 0);
        }
        assert_eq!(rx.used_idx, 70_000u32 as u16);
        assert_eq!(tx.avail_idx, 70_000u32 as u16);
    }

    /// A receive ring and a transmit ring after the device wrote `poison`: the error each
    /// burst reports.
    fn poisoned(poison: impl Fn(&mut Device, bool)) -> (Result<(), BadRing>, Result<(), BadRing>) {
        let mut pool = Pool::new(64, 0);
        let mut rx = ring(8, true);
        let mut d = Device::of(&rx);
        poison(&mut d, true);
        let (r1, ..) = recv(&mut rx, &mut pool);
        let mut tx = ring(8, false);
        let mut d = Device::of(&tx);
        let _ = send(&mut tx, &mut pool, &[frame(60, 1), frame(60, 2)]);
        d.take_avail().unwrap();
        d.take_avail().unwrap();
        poison(&mut d, false);
        let (r2, c) = send(&mut tx, &mut pool, &[frame(60, 3)]);
        if r2.is_err() {
            assert_eq!(c, Counts::default(), "nothing sent on a bad ring");
        }
        (r1, r2)
    }

    #[test]
    fn garbage_in_the_used_ring_is_caught() {
        use BadRing::*;
        // An id outside the ring.
        for id in [8, 9, 0xffff, 0x1_0000, u32::MAX] {
            assert_eq!(
                poisoned(|d, _| d.put_used(id, 64)),
                (Err(IdOutOfRange), Err(IdOutOfRange))
            );
        }
        // A length beyond the buffer (transmit lengths mean nothing and are not looked at).
        for len in [BUF_LEN as u32 + 1, u32::MAX] {
            assert_eq!(
                poisoned(|d, _| d.put_used(0, len)),
                (Err(LenBeyondBuffer), Ok(()))
            );
        }
        // An id the device does not hold: used twice, or never given.
        assert_eq!(
            poisoned(|d, _| {
                d.put_used(0, 64);
                d.put_used(0, 64);
            }),
            (Err(IdNotInFlight), Err(IdNotInFlight))
        );
        assert_eq!(
            poisoned(|d, rx| if !rx {
                d.put_used(5, 0)
            })
            .1,
            Err(IdNotInFlight)
        );
        // A used index running ahead, by a little or by a lot.
        for ahead in [9u16, 100, 0x8000, 0xffff] {
            assert_eq!(
                poisoned(|d, _| d.set_used_idx(ahead)),
                (Err(UsedIdxAhead), Err(UsedIdxAhead))
            );
        }
        // The good part of a burst before the garbage is kept.
        let mut pool = Pool::new(64, 0);
        let mut rx = ring(8, true);
        let mut d = Device::of(&rx);
        deliver(&mut d, &frame(60, 9));
        d.put_used(77, 60);
        let (res, got, c) = recv(&mut rx, &mut pool);
        assert_eq!((res, got.len(), c.packets), (Err(IdOutOfRange), 1, 1));
    }
}
