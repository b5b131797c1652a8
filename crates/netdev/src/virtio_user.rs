//! `virtio_user` ports: the switch (or the traffic generator) as the virtio-net *driver* of a
//! vhost-user device, the part a VM's kernel or DPDK's `net_virtio_user` plays. The device is
//! any vhost-user back-end: flowpath's own `vhostuser` / `vhostuserclient` ports
//! ([`crate::vhost`]) or DPDK's vhost PMD (`net_vhost`).
//!
//! # Roles and connection
//! The port is the vhost-user *front-end*. With `server=false` it connects to the back-end's
//! socket and, while there is none or after the back-end went away, tries again every
//! [`RECONNECT`]; with `server=true` it listens on the socket and accepts the back-end (a
//! flowpath `vhostuserclient`, DPDK's vhost PMD with `client=1`), again after it leaves. A
//! control thread per port speaks the protocol through rust-vmm's `vhost` front-end
//! ([`Frontend`]); the PMD threads only touch the rings.
//!
//! Per connection (vhost-user spec, "Starting and stopping rings"): `GET_FEATURES`, the
//! protocol features when offered (`MQ` and `REPLY_ACK` are the ones taken; with `REPLY_ACK`
//! every later request is acknowledged, so a back-end that refuses one is noticed),
//! `GET_QUEUE_NUM` when more than one queue pair is asked for, `SET_OWNER`, `SET_FEATURES`
//! (`VERSION_1`, `PROTOCOL_FEATURES`, `MQ` with more than one pair: only what the back-end
//! offers), then guest memory: a fresh `memfd` mapped here, passed by `SET_MEM_TABLE` as one
//! region at guest address 0, holding every ring and every buffer. Then for each vring
//! `SET_VRING_NUM`, `_BASE` (0), `_ADDR`, `_KICK`, `_CALL` and, with protocol features,
//! `SET_VRING_ENABLE`. A connection's memory, eventfds and socket go when it ends: each ring
//! holds the memory by reference count, and the control thread takes the rings out of the
//! PMDs' hands before it lets go.
//!
//! `GET_QUEUE_NUM` is sent on the socket directly, not through [`Frontend`]: rust-vmm's
//! front-end takes the reply as its limit of vring *indexes*, while the network back-ends
//! (DPDK's vhost library, flowpath) answer in queue *pairs*, which would leave the second
//! half of the vrings unreachable.
//!
//! # Rings (virtio 1.x §2.7, split virtqueues)
//! Rx queue `k` is the device's receive virtqueue `2k`, tx queue `k` its transmit virtqueue
//! `2k + 1`. Descriptor `i` of a ring always points at buffer `i` of that ring
//! ([`BUF_LEN`] bytes), so what the device says in the used ring is an index checked
//! against the ring and a length checked against [`BUF_LEN`], never an address.
//!
//! Receive: every descriptor starts out device-writable and available; a burst reads the used
//! ring (acquire on its index), copies each frame out after the virtio-net header into a pool
//! buffer, and makes the buffers available again (release on the available index). Transmit:
//! a burst first takes back what the device used, then writes each frame behind a zeroed
//! header into a free descriptor's buffer and publishes the lot (release). A frame that does
//! not fit a buffer, or finds no free descriptor (the device is behind), is dropped and
//! counted. The driver asks for no interrupts (`VRING_AVAIL_F_NO_INTERRUPT`) and polls; it
//! kicks a ring's eventfd after publishing only when the device has not said it polls
//! (`VRING_USED_F_NO_NOTIFY`, which flowpath and DPDK's PMD set). Without `MRG_RXBUF` the
//! device puts a whole frame in one buffer: frames up to [`BUF_LEN`] less the header.
//!
//! # Misbehaving devices
//! A used index more than a ring ahead, a used id outside the ring or not held by the device,
//! a length beyond the buffer: the ring is taken from the PMD at once (counted in the queue's
//! `errors` and, by reason, in the port's options), and the control thread resets the device:
//! every ring is taken out of service, disabled and stopped (`SET_VRING_ENABLE` 0,
//! `GET_VRING_BASE`), then set up again from scratch: fresh indexes, every receive buffer
//! available again. All rings, not only the bad one: DPDK's vhost library takes one stopped
//! ring as a stopped device and resumes only the rings set up again. Frames in flight are
//! lost. Nothing the device writes can make the port read or write outside the ring's memory.
//! A back-end that closes the socket, stops answering ([`IO_TIMEOUT`]) or sends what was not
//! asked for ends the connection; the port connects or listens again.

use std::fmt::Write as _;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use datapath::packet::{Batch, MAX_BURST, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};
use vhost::vhost_user::message::VhostUserHeaderFlag;
use vhost::vhost_user::{Frontend, VhostUserFrontend, VhostUserProtocolFeatures};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::EventFd;
use wire::EthernetAddress;

pub use crate::afpacket::PortError;
use crate::afpacket::{flag, mmap_shared, unknown_option};
pub use crate::vhost::RECONNECT;
// The feature bits and the plumbing of a vhost-user port are the back-end's (`vhost`).
use crate::vhost::{
    AVAIL_F_NO_INTERRUPT, F_MQ, F_MRG_RXBUF, F_PROTOCOL_FEATURES, F_VERSION_1, Peer, feature_names,
    listen, lock, mac_option, nap, stop_control, try_lock,
};
use crate::vnet;

/// Bytes of each ring buffer: a virtio-net header and a frame of up to 2036 bytes (1514 and
/// any tags comfortably).
pub const BUF_LEN: usize = 2048;
/// Ring size when not configured: DPDK's `virtio_user` default.
pub const DEFAULT_QUEUE_SIZE: u16 = 256;
/// Largest ring (the virtio maximum for a split ring).
pub const MAX_QUEUE_SIZE: u16 = 32768;
/// Most queue pairs: vring indexes travel in 8 bits of `SET_VRING_KICK` / `_CALL`.
pub const MAX_QUEUES: usize = 128;
/// How long the back-end may take to answer a request before the connection is given up.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Shortest frame taken from the device (an Ethernet header).
const MIN_FRAME: usize = 14;
/// Page size the ring parts are aligned to (legacy devices want the used ring page-aligned).
const PAGE: usize = 4096;

/// `VRING_USED_F_NO_NOTIFY`: the device polls.
const USED_F_NO_NOTIFY: u16 = 1;
/// `VRING_DESC_F_WRITE`: a buffer the device writes.
const DESC_F_WRITE: u16 = 2;

/// vhost-user request `GET_QUEUE_NUM` and the header flags of the protocol.
const REQ_GET_QUEUE_NUM: u32 = 17;
const HDR_VERSION_1: u32 = 0x1;
const HDR_REPLY: u32 = 0x4;

/// Options of a `virtio_user` port (DPDK's `net_virtio_user` devargs by the same names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtioUserOptions {
    /// The vhost-user socket (`path`): the back-end's to connect to, or ours to listen on
    /// with `server`.
    pub path: PathBuf,
    /// Listen on `path` and accept the back-end (`server`), rather than connect to it.
    pub server: bool,
    /// Queue pairs (`queues`, default 1): the port has this many rx queues. Fewer are used
    /// when the back-end offers fewer.
    pub queues: usize,
    /// Descriptors per ring (`queue_size`, default [`DEFAULT_QUEUE_SIZE`]): a power of two.
    pub queue_size: u16,
    /// The port's MAC address (`mac`), for whoever builds frames for it; the device is not
    /// told (the switch does not filter).
    pub mac: Option<[u8; 6]>,
}

impl Default for VirtioUserOptions {
    fn default() -> Self {
        VirtioUserOptions {
            path: PathBuf::new(),
            server: false,
            queues: 1,
            queue_size: DEFAULT_QUEUE_SIZE,
            mac: None,
        }
    }
}

impl VirtioUserOptions {
    /// Option names [`VirtioUserOptions::set`] takes.
    pub const KEYS: &'static [&'static str] = &["path", "server", "queues", "queue_size", "mac"];

    /// Defaults, with the socket at `path`.
    pub fn new(path: impl Into<PathBuf>) -> VirtioUserOptions {
        VirtioUserOptions {
            path: path.into(),
            ..VirtioUserOptions::default()
        }
    }

    /// Sets option `key` from its text form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), PortError> {
        let bad = |what: &str| PortError::BadOption(format!("{key}: '{value}' {what}"));
        match key {
            "path" => {
                if value.is_empty() {
                    return Err(bad("is empty"));
                }
                self.path = PathBuf::from(value);
            }
            "server" => self.server = flag(key, value)?,
            "queues" => self.queues = value.trim().parse().map_err(|_| bad("is not a number"))?,
            "queue_size" => {
                self.queue_size = value.trim().parse().map_err(|_| bad("is not a number"))?
            }
            "mac" => self.mac = Some(mac_option(value).ok_or_else(|| bad("is not a MAC address"))?),
            _ => return Err(unknown_option(key, "virtio_user", Self::KEYS)),
        }
        Ok(())
    }

    /// Checks the values without opening anything.
    pub fn check(&self) -> Result<(), PortError> {
        if self.path.as_os_str().is_empty() {
            return Err(PortError::BadOption(
                "type virtio_user needs option path (the vhost-user socket)".into(),
            ));
        }
        if !(1..=MAX_QUEUES).contains(&self.queues) {
            return Err(PortError::BadOption(format!(
                "queues: {} is not between 1 and {MAX_QUEUES}",
                self.queues
            )));
        }
        if !self.queue_size.is_power_of_two() || !(2..=MAX_QUEUE_SIZE).contains(&self.queue_size) {
            return Err(PortError::BadOption(format!(
                "queue_size: {} is not a power of two between 2 and {MAX_QUEUE_SIZE}",
                self.queue_size
            )));
        }
        Ok(())
    }
}

/// Why a ring was taken out of service: what the device wrote that it may not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
enum BadRing {
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
    const ALL: [BadRing; 4] = [
        BadRing::UsedIdxAhead,
        BadRing::IdOutOfRange,
        BadRing::IdNotInFlight,
        BadRing::LenBeyondBuffer,
    ];

    fn name(self) -> &'static str {
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
struct Counts {
    packets: u64,
    bytes: u64,
    dropped: u64,
}

/// Where the parts of one vring lie, as offsets from the vring's start; every vring of a
/// connection has the same layout, one after the other.
#[derive(Clone, Copy, Debug)]
struct Layout {
    size: u16,
    /// `size` descriptors of 16 bytes, at offset 0.
    avail: usize,
    used: usize,
    bufs: usize,
    /// Bytes of one vring with its buffers (a multiple of [`PAGE`]).
    len: usize,
}

impl Layout {
    fn new(size: u16) -> Layout {
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
struct SharedMem {
    ptr: *mut u8,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain memory owned by this value until it drops; the pointers made
// from it are used by one thread at a time per ring (the ring's slot lock), and what the
// device does to it concurrently is accessed atomically (indexes, used elements) or copied.
unsafe impl Send for SharedMem {}
// SAFETY: as for `Send`: `&SharedMem` only hands out the address and the fd.
unsafe impl Sync for SharedMem {}

impl SharedMem {
    fn new(len: usize) -> io::Result<SharedMem> {
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
    fn addr(&self) -> u64 {
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
struct Vring {
    /// Keeps the memory mapped while the ring is in use.
    _mem: Arc<SharedMem>,
    /// A power of two.
    size: u16,
    desc: *mut u8,
    avail: *mut u8,
    used: *mut u8,
    bufs: *mut u8,
    /// Guest address of buffer 0 (buffer `i` at `+ i * BUF_LEN`).
    bufs_gpa: u64,
    hdr_len: usize,
    kick: Arc<EventFd>,
    /// The available index as published, and where the next entry goes.
    avail_idx: u16,
    /// The used index up to which elements were taken.
    used_idx: u16,
    /// Whether the device holds descriptor `i` (made available, not yet used).
    inflight: Box<[bool]>,
    /// Transmit: the descriptors the driver holds, `free[..n_free]`.
    free: Box<[u16]>,
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
    fn new(
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
    fn used_idx_now(&self) -> u16 {
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
    fn notify(&self) {
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
    fn recv(
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
    fn send(&mut self, batch: &Batch, c: &mut Counts) -> Result<(), BadRing> {
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

/// What the port and its queues share with the control thread.
struct Shared {
    name: String,
    /// One slot per vring: `2k` the device's receive ring (rx queue `k`), `2k + 1` its
    /// transmit ring.
    slots: Box<[Mutex<Option<Vring>>]>,
    /// Vrings a PMD took out of service, for the control thread to reset.
    reset: Box<[AtomicBool]>,
    rx_stats: Vec<Arc<QueueStats>>,
    tx_stats: Vec<Arc<QueueStats>>,
    /// Queue pairs in service: tx queue `k` sends on pair `k mod pairs`; 0 when there is no
    /// device.
    pairs: AtomicUsize,
    /// Rings taken out of service, by reason ([`BadRing`] order).
    bad: [AtomicU64; 4],
    /// Device resets the control thread completed.
    resets_done: AtomicU64,
    status: Mutex<Status>,
    stop: AtomicBool,
    /// The current connection, to shut it down when the port closes.
    conn: Mutex<Option<UnixStream>>,
}

/// What `options()` tells of the connection.
#[derive(Clone, Debug, Default)]
struct Status {
    connected: bool,
    features: u64,
    protocol: u64,
    pairs: usize,
    connections: u64,
}

impl Shared {
    #[cold]
    fn bad_ring(&self, slot: &mut Option<Vring>, vring: usize, why: BadRing, stats: &QueueStats) {
        *slot = None;
        stats.errors.fetch_add(1, Relaxed);
        self.bad[why as usize].fetch_add(1, Relaxed);
        self.reset[vring].store(true, Release);
        eprintln!(
            "flowpath: virtio_user port '{}': vring {vring} reset: the device wrote {}",
            self.name,
            why.name()
        );
    }

    fn resets(&self) -> u64 {
        self.bad.iter().map(|b| b.load(Relaxed)).sum()
    }
}

/// A `virtio_user` port.
pub struct VirtioUserPort {
    name: String,
    opts: VirtioUserOptions,
    shared: Arc<Shared>,
    rxq_taken: Vec<bool>,
    n_txq: usize,
    control: Option<JoinHandle<()>>,
}

impl VirtioUserPort {
    /// Opens port `name`: with `server` the socket is bound now (an error names the path and
    /// the reason); either way the control thread starts looking for the back-end, and the
    /// back-end may come and go from then on.
    pub fn open(name: &str, opts: VirtioUserOptions) -> Result<VirtioUserPort, PortError> {
        opts.check()?;
        let io_err = |what: String| move |source| PortError::Io { what, source };
        let listener = if opts.server {
            Some(listen(&opts.path, "path")?)
        } else {
            None
        };
        let stats = |n| (0..n).map(|_| QueueStats::shared()).collect::<Vec<_>>();
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            slots: (0..2 * opts.queues).map(|_| Mutex::new(None)).collect(),
            reset: (0..2 * opts.queues)
                .map(|_| AtomicBool::new(false))
                .collect(),
            rx_stats: stats(opts.queues),
            tx_stats: stats(opts.queues),
            pairs: AtomicUsize::new(0),
            bad: Default::default(),
            resets_done: AtomicU64::new(0),
            status: Mutex::new(Status::default()),
            stop: AtomicBool::new(false),
            conn: Mutex::new(None),
        });
        let control = {
            let (shared, opts) = (shared.clone(), opts.clone());
            std::thread::Builder::new()
                .name(format!("virtio-{name}"))
                .spawn(move || control(&shared, &opts, listener))
                .map_err(io_err("starting the virtio_user thread".into()))?
        };
        Ok(VirtioUserPort {
            name: name.to_owned(),
            rxq_taken: vec![false; opts.queues],
            opts,
            shared,
            n_txq: 0,
            control: Some(control),
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.opts.path
    }

    /// The configured MAC address.
    pub fn mac(&self) -> Option<[u8; 6]> {
        self.opts.mac
    }

    /// Whether a back-end is connected (its rings may not be up yet: [`Port::link_up`]).
    pub fn connected(&self) -> bool {
        lock(&self.shared.status).connected
    }

    /// Queue pairs in service: 0 without a back-end.
    pub fn active_queues(&self) -> usize {
        self.shared.pairs.load(Relaxed)
    }

    /// Connections made or accepted so far.
    pub fn connections(&self) -> u64 {
        lock(&self.shared.status).connections
    }

    /// Rings taken out of service and reset because the device broke the virtio rules.
    pub fn resets(&self) -> u64 {
        self.shared.resets()
    }

    /// The virtio features in use on the current connection (0 without one).
    pub fn features(&self) -> u64 {
        lock(&self.shared.status).features
    }
}

impl Drop for VirtioUserPort {
    fn drop(&mut self) {
        stop_control(&self.shared.stop, &self.shared.conn, self.control.take());
        for s in self.shared.slots.iter() {
            lock(s).take();
        }
        if self.opts.server {
            let _ = std::fs::remove_file(&self.opts.path);
        }
    }
}

/// The control thread: waits for (or makes) a connection, drives it until it ends, and
/// starts over until the port closes.
fn control(shared: &Arc<Shared>, opts: &VirtioUserOptions, listener: Option<UnixListener>) {
    let mut peer = Peer::new("virtio_user", &shared.name, listener, &opts.path);
    while !shared.stop.load(Relaxed) {
        let Some(stream) = peer.next(&shared.stop) else {
            continue;
        };
        match session(shared, opts, stream) {
            Ok(()) if shared.stop.load(Relaxed) => {}
            Ok(()) => eprintln!(
                "flowpath: virtio_user port '{}': back-end disconnected",
                shared.name
            ),
            Err(e) => eprintln!(
                "flowpath: virtio_user port '{}': closing the connection: {e}",
                shared.name
            ),
        }
        // A back-end that accepts and drops at once is not retried in a tight loop.
        if !peer.listens() {
            nap(&shared.stop, RECONNECT);
        }
    }
}

/// Ends a connection whichever way its session leaves: the rings leave the PMDs' hands
/// (after any burst on them), and the status says so.
struct Teardown<'a>(&'a Shared);

impl Drop for Teardown<'_> {
    fn drop(&mut self) {
        let shared = self.0;
        *lock(&shared.conn) = None;
        shared.pairs.store(0, Relaxed);
        for s in shared.slots.iter() {
            lock(s).take();
        }
        for r in shared.reset.iter() {
            r.store(false, Relaxed);
        }
        let mut st = lock(&shared.status);
        st.connected = false;
        st.pairs = 0;
        st.features = 0;
        st.protocol = 0;
    }
}

/// Drives one connection: sets the device up, puts its rings in service, then watches the
/// socket and resets rings the PMDs took out of service, until the back-end goes away or the
/// port closes.
fn session(shared: &Shared, opts: &VirtioUserOptions, stream: UnixStream) -> Result<(), String> {
    // Declared first, dropped last: after the device's memory and eventfds are released by
    // this function, the rings holding the memory leave their slots.
    let _teardown = Teardown(shared);
    let setup = |e: io::Error| format!("socket setup: {e}");
    stream.set_nonblocking(false).map_err(setup)?;
    stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(setup)?;
    stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(setup)?;
    let conn = stream.try_clone().map_err(setup)?;
    *lock(&shared.conn) = Some(conn.try_clone().map_err(setup)?);
    if shared.stop.load(Relaxed) {
        return Ok(());
    }
    {
        let mut st = lock(&shared.status);
        st.connected = true;
        st.connections += 1;
    }
    let mut dev = Device::negotiate(stream, &conn, opts)?;
    dev.start(shared)?;
    {
        let mut st = lock(&shared.status);
        st.features = dev.features;
        st.protocol = dev.protocol.bits();
        st.pairs = dev.pairs;
    }
    eprintln!(
        "flowpath: virtio_user port '{}': connected, {} queue pair(s), features {:#x}",
        shared.name, dev.pairs, dev.features
    );
    loop {
        if shared.stop.load(Relaxed) {
            return Ok(());
        }
        if !watch(&conn)? {
            return Ok(());
        }
        let mut reset = false;
        for r in shared.reset.iter() {
            reset |= r.swap(false, Acquire);
        }
        if reset {
            dev.reset(shared)?;
            shared.resets_done.fetch_add(1, Release);
            eprintln!(
                "flowpath: virtio_user port '{}': device reset, rings set up again",
                shared.name
            );
        }
    }
}

/// Waits a little for the back-end to say something; false when it went away. A back-end
/// speaks only when asked: anything else on the socket ends the connection.
fn watch(conn: &UnixStream) -> Result<bool, String> {
    let mut p = libc::pollfd {
        fd: conn.as_raw_fd(),
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let r = unsafe { libc::poll(&mut p, 1, 20) };
    if r <= 0 {
        return Ok(true);
    }
    if p.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        return Ok(false);
    }
    let mut buf = [0u8; 64];
    match (&*conn).read(&mut buf) {
        Ok(0) => Ok(false),
        Ok(_) => Err("the back-end sent a message that was not asked for".into()),
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(false),
        Err(e) => Err(format!("socket: {e}")),
    }
}

/// `GET_QUEUE_NUM` on the socket itself (see the module's introduction): the queue pairs
/// the back-end serves.
fn get_queue_num(mut conn: &UnixStream) -> Result<u64, String> {
    let e = |e: io::Error| format!("GET_QUEUE_NUM: {e}");
    let mut req = [0u8; 12];
    req[..4].copy_from_slice(&REQ_GET_QUEUE_NUM.to_le_bytes());
    req[4..8].copy_from_slice(&HDR_VERSION_1.to_le_bytes());
    conn.write_all(&req).map_err(e)?;
    let mut hdr = [0u8; 12];
    conn.read_exact(&mut hdr).map_err(e)?;
    let word = |i: usize| u32::from_le_bytes([hdr[i], hdr[i + 1], hdr[i + 2], hdr[i + 3]]);
    if word(0) != REQ_GET_QUEUE_NUM || word(4) & HDR_REPLY == 0 || word(8) != 8 {
        return Err(format!(
            "GET_QUEUE_NUM: unexpected reply (request {}, flags {:#x}, size {})",
            word(0),
            word(4),
            word(8)
        ));
    }
    let mut v = [0u8; 8];
    conn.read_exact(&mut v).map_err(e)?;
    Ok(u64::from_le_bytes(v))
}

/// The device side of one connection as the driver sees it: the protocol endpoint and what
/// was agreed, and the memory and eventfds given to the back-end.
struct Device {
    fe: Frontend,
    mem: Arc<SharedMem>,
    layout: Layout,
    pairs: usize,
    hdr_len: usize,
    features: u64,
    protocol: VhostUserProtocolFeatures,
    kicks: Vec<Arc<EventFd>>,
    /// One call eventfd for every ring: the driver polls, and never reads it.
    call: EventFd,
}

fn proto(what: &'static str) -> impl Fn(vhost::Error) -> String {
    move |e| format!("{what}: {e}")
}

impl Device {
    /// Negotiates features over `stream` (`conn` is the same socket) and shares fresh memory
    /// for `opts`' rings.
    fn negotiate(
        stream: UnixStream,
        conn: &UnixStream,
        opts: &VirtioUserOptions,
    ) -> Result<Device, String> {
        let mut fe = Frontend::from_stream(stream, 2 * opts.queues as u64);
        let offered = fe.get_features().map_err(proto("GET_FEATURES"))?;
        let mut features = offered & (F_VERSION_1 | F_PROTOCOL_FEATURES);
        let mut protocol = VhostUserProtocolFeatures::empty();
        let mut pairs = 1;
        if offered & F_PROTOCOL_FEATURES != 0 {
            let pf = fe
                .get_protocol_features()
                .map_err(proto("GET_PROTOCOL_FEATURES"))?;
            protocol = pf & (VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK);
            fe.set_protocol_features(protocol)
                .map_err(proto("SET_PROTOCOL_FEATURES"))?;
            if opts.queues > 1
                && offered & F_MQ != 0
                && protocol.contains(VhostUserProtocolFeatures::MQ)
            {
                let n = get_queue_num(conn)?;
                pairs = opts
                    .queues
                    .min(usize::try_from(n).unwrap_or(usize::MAX))
                    .max(1);
            }
            if protocol.contains(VhostUserProtocolFeatures::REPLY_ACK) {
                fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
            }
        }
        if pairs > 1 {
            features |= F_MQ;
        }
        fe.set_owner().map_err(proto("SET_OWNER"))?;
        fe.set_features(features).map_err(proto("SET_FEATURES"))?;
        let layout = Layout::new(opts.queue_size);
        let mem = SharedMem::new(2 * pairs * layout.len)
            .map_err(|e| format!("guest memory of {} bytes: {e}", 2 * pairs * layout.len))?;
        let region = VhostUserMemoryRegionInfo {
            guest_phys_addr: 0,
            memory_size: mem.len as u64,
            userspace_addr: mem.addr(),
            mmap_offset: 0,
            mmap_handle: mem.fd.as_raw_fd(),
        };
        fe.set_mem_table(&[region])
            .map_err(proto("SET_MEM_TABLE"))?;
        let eventfd = || {
            EventFd::new(libc::EFD_NONBLOCK | libc::EFD_CLOEXEC)
                .map_err(|e| format!("eventfd: {e}"))
        };
        let kicks = (0..2 * pairs)
            .map(|_| eventfd().map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Device {
            fe,
            mem: Arc::new(mem),
            layout,
            pairs,
            hdr_len: if features & (F_VERSION_1 | F_MRG_RXBUF) != 0 {
                vnet::HDR_LEN
            } else {
                vnet::HDR_LEN_LEGACY
            },
            features,
            protocol,
            kicks,
            call: eventfd()?,
        })
    }

    /// Sets vring `i` up from scratch, in memory and with the back-end.
    fn start_ring(&mut self, i: usize) -> Result<Vring, String> {
        let ring = Vring::new(
            self.mem.clone(),
            i,
            self.layout,
            i.is_multiple_of(2),
            self.hdr_len,
            self.kicks[i].clone(),
        )
        .ok_or("vring outside guest memory")?;
        let n = self.layout.size;
        self.fe
            .set_vring_num(i, n)
            .map_err(proto("SET_VRING_NUM"))?;
        self.fe
            .set_vring_base(i, 0)
            .map_err(proto("SET_VRING_BASE"))?;
        let config = VringConfigData {
            queue_max_size: n,
            queue_size: n,
            flags: 0,
            desc_table_addr: ring.desc as u64,
            used_ring_addr: ring.used as u64,
            avail_ring_addr: ring.avail as u64,
            log_addr: None,
        };
        self.fe
            .set_vring_addr(i, &config)
            .map_err(proto("SET_VRING_ADDR"))?;
        self.fe
            .set_vring_kick(i, &self.kicks[i])
            .map_err(proto("SET_VRING_KICK"))?;
        self.fe
            .set_vring_call(i, &self.call)
            .map_err(proto("SET_VRING_CALL"))?;
        if self.features & F_PROTOCOL_FEATURES != 0 {
            self.fe
                .set_vring_enable(i, true)
                .map_err(proto("SET_VRING_ENABLE"))?;
        }
        // A receive ring starts with its buffers available: a device that waits for kicks
        // learns of them now.
        ring.notify();
        Ok(ring)
    }

    /// Sets every ring up and puts it in service.
    fn start(&mut self, shared: &Shared) -> Result<(), String> {
        let n = 2 * self.pairs;
        let mut rings = Vec::with_capacity(n);
        for i in 0..n {
            rings.push(self.start_ring(i)?);
        }
        for (slot, r) in shared.slots.iter().zip(rings) {
            *lock(slot) = Some(r);
        }
        shared.pairs.store(self.pairs, Relaxed);
        Ok(())
    }

    /// Takes every ring out of service, stops it on the back-end and sets it up again from
    /// scratch. All of them, not just the one that went wrong: DPDK's vhost library takes a
    /// stopped ring (`GET_VRING_BASE`) as a stopped device, and its PMD then resumes only the
    /// rings that are set up again.
    fn reset(&mut self, shared: &Shared) -> Result<(), String> {
        shared.pairs.store(0, Relaxed);
        for s in shared.slots.iter() {
            lock(s).take();
        }
        for i in 0..2 * self.pairs {
            if self.features & F_PROTOCOL_FEATURES != 0 {
                self.fe
                    .set_vring_enable(i, false)
                    .map_err(proto("SET_VRING_ENABLE"))?;
            }
            self.fe.get_vring_base(i).map_err(proto("GET_VRING_BASE"))?;
        }
        self.start(shared)
    }
}

/// Rx queue `k`: the device's receive ring, vring `2k`.
struct VirtioRxq {
    shared: Arc<Shared>,
    vring: usize,
    in_port: u32,
    stats: Arc<QueueStats>,
}

impl RxQueue for VirtioRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let Some(mut slot) = try_lock(&self.shared.slots[self.vring]) else {
            return 0;
        };
        let Some(ring) = slot.as_mut() else { return 0 };
        let before = batch.len();
        let mut c = Counts::default();
        if let Err(why) = ring.recv(pool, batch, self.in_port, &mut c) {
            self.shared
                .bad_ring(&mut slot, self.vring, why, &self.stats);
        }
        drop(slot);
        self.stats.count_rx(c.packets, c.bytes, c.dropped, 0);
        batch.len() - before
    }
}

/// Tx queue `k`: sends on the device's transmit ring of pair `k mod n` of the `n` in service.
struct VirtioTxq {
    shared: Arc<Shared>,
    k: usize,
}

impl TxQueue for VirtioTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let n = self.shared.pairs.load(Relaxed);
        let pair = self.k
            % if n == 0 {
                self.shared.tx_stats.len()
            } else {
                n
            };
        let stats = &self.shared.tx_stats[pair];
        let mut c = Counts::default();
        let vring = 2 * pair + 1;
        let mut slot = lock(&self.shared.slots[vring]);
        match slot.as_mut() {
            Some(ring) if n > 0 => {
                if let Err(why) = ring.send(batch, &mut c) {
                    c.dropped = batch.len() as u64;
                    self.shared.bad_ring(&mut slot, vring, why, stats);
                }
            }
            _ => c.dropped = batch.len() as u64,
        }
        drop(slot);
        pool.free_batch(batch);
        stats.count_tx(c.packets, c.bytes, c.dropped, 0);
    }
}

impl Port for VirtioUserPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "virtio_user"
    }

    fn options(&self) -> String {
        let st = lock(&self.shared.status).clone();
        let mut s = format!(
            "{{path={}, mode={}",
            self.opts.path.display(),
            if self.opts.server { "server" } else { "client" }
        );
        if self.opts.queues != 1 {
            let _ = write!(s, ", queues={}", self.opts.queues);
        }
        if self.opts.queue_size != DEFAULT_QUEUE_SIZE {
            let _ = write!(s, ", queue_size={}", self.opts.queue_size);
        }
        if let Some(m) = self.opts.mac {
            let _ = write!(s, ", mac={}", EthernetAddress(m));
        }
        if st.connected {
            let _ = write!(
                s,
                ", status=connected, queue_pairs={}/{}, features={:#x} ({}), protocol_features={:#x}",
                st.pairs,
                self.opts.queues,
                st.features,
                feature_names(st.features),
                st.protocol
            );
        } else {
            s.push_str(", status=connecting");
        }
        for why in BadRing::ALL {
            let n = self.shared.bad[why as usize].load(Relaxed);
            if n > 0 {
                let _ = write!(s, ", {}={n}", why.name());
            }
        }
        s.push('}');
        s
    }

    fn n_rxq(&self) -> usize {
        self.rxq_taken.len()
    }

    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        datapath::port::take_once(&mut self.rxq_taken, q)?;
        Some(Box::new(VirtioRxq {
            shared: self.shared.clone(),
            vring: 2 * q,
            in_port,
            stats: self.shared.rx_stats[q].clone(),
        }))
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        let k = self.n_txq;
        self.n_txq += 1;
        Box::new(VirtioTxq {
            shared: self.shared.clone(),
            k,
        })
    }

    fn counters(&self) -> PortCounters {
        datapath::port::sum_queues(&self.shared.rx_stats, &self.shared.tx_stats)
    }

    fn queue_counters(&self) -> Vec<(String, PortCounters)> {
        datapath::port::queue_rows(&self.shared.rx_stats, &self.shared.tx_stats)
    }

    fn link_up(&self) -> bool {
        self.active_queues() > 0
    }
}

#[cfg(test)]
mod tests {
    //! The driver's rings against a device that [`Device`] simulates in the same memory, well
    //! behaved and not: what a hostile back-end could write into the used rings is written
    //! here directly. Then a whole port against flowpath's own back-end, with the used rings
    //! poisoned between bursts: the ring is reset through the protocol and traffic resumes.

    use super::*;
    use crate::vhost::{VhostOptions, VhostPort};

    const HDR: usize = vnet::HDR_LEN;

    /// The device half of one [`Vring`]: reads what the driver made available, writes used
    /// elements (any it likes).
    struct Device {
        desc: *mut u8,
        avail: *mut u8,
        used: *mut u8,
        bufs: *mut u8,
        bufs_gpa: u64,
        size: u16,
        last_avail: u16,
        used_idx: u16,
    }

    impl Device {
        fn of(r: &Vring) -> Device {
            Device {
                desc: r.desc,
                avail: r.avail,
                used: r.used,
                bufs: r.bufs,
                bufs_gpa: r.bufs_gpa,
                size: r.size,
                last_avail: 0,
                used_idx: 0,
            }
        }

        /// The 16-bit field at `p + off`.
        ///
        /// # Safety
        /// `p + off` is a 2-aligned field of a ring part of a ring that outlives `'a`.
        unsafe fn u16_at<'a>(p: *mut u8, off: usize) -> &'a AtomicU16 {
            // SAFETY: as the caller promises.
            unsafe { AtomicU16::from_ptr(p.add(off).cast()) }
        }

        /// The next available descriptor: (id, buffer offset from buffer 0, len, flags).
        fn take_avail(&mut self) -> Option<(u16, u64, u32, u16)> {
            // SAFETY: the available index, in the ring (alive while the test uses it).
            let idx = u16::from_le(unsafe { Self::u16_at(self.avail, 2) }.load(Acquire));
            if idx == self.last_avail {
                return None;
            }
            let slot = usize::from(self.last_avail & (self.size - 1));
            // SAFETY: entry `slot < size` of the available ring.
            let id = u16::from_le(unsafe { Self::u16_at(self.avail, 4 + 2 * slot) }.load(Relaxed));
            self.last_avail = self.last_avail.wrapping_add(1);
            // SAFETY: `id` is the driver's, below the size.
            let d: [u8; 16] = unsafe { std::ptr::read(self.desc.add(16 * usize::from(id)).cast()) };
            let addr = u64::from_le_bytes(d[..8].try_into().unwrap());
            let len = u32::from_le_bytes(d[8..12].try_into().unwrap());
            let flags = u16::from_le_bytes(d[12..14].try_into().unwrap());
            Some((id, addr - self.bufs_gpa, len, flags))
        }

        fn buf(&self, id: u16) -> *mut u8 {
            self.bufs.wrapping_add(usize::from(id) * BUF_LEN)
        }

        fn write_buf(&self, id: u16, bytes: &[u8]) {
            // SAFETY: buffer `id < size` of the ring, test data shorter than a buffer.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.buf(id), bytes.len()) };
        }

        fn read_buf(&self, id: u16, len: usize) -> Vec<u8> {
            // SAFETY: as `write_buf`.
            unsafe { std::slice::from_raw_parts(self.buf(id), len).to_vec() }
        }

        /// Writes a used element (unchecked: the test decides) and publishes it.
        fn put_used(&mut self, id: u32, len: u32) {
            let at = 4 + 8 * usize::from(self.used_idx & (self.size - 1));
            // SAFETY: inside the used ring.
            unsafe {
                AtomicU32::from_ptr(self.used.add(at).cast()).store(id.to_le(), Relaxed);
                AtomicU32::from_ptr(self.used.add(at + 4).cast()).store(len.to_le(), Relaxed);
            }
            self.used_idx = self.used_idx.wrapping_add(1);
            self.set_used_idx(self.used_idx);
        }

        fn set_used_idx(&mut self, idx: u16) {
            self.used_idx = idx;
            // SAFETY: the used index, in the ring.
            unsafe { Self::u16_at(self.used, 2) }.store(idx.to_le(), Release);
        }

        fn set_used_flags(&self, f: u16) {
            // SAFETY: the used ring's flags.
            unsafe { Self::u16_at(self.used, 0) }.store(f.to_le(), Relaxed);
        }
    }

    fn ring(size: u16, receive: bool) -> Vring {
        let layout = Layout::new(size);
        let mem = Arc::new(SharedMem::new(layout.len).unwrap());
        let kick = Arc::new(EventFd::new(libc::EFD_NONBLOCK).unwrap());
        Vring::new(mem, 0, layout, receive, HDR, kick).unwrap()
    }

    fn frame(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
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

    impl Device {
        fn write_buf_at(&self, id: u16, at: usize, bytes: &[u8]) {
            // SAFETY: `at + len` within a buffer in the tests.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.buf(id).add(at), bytes.len())
            };
        }
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

    fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
        let end = std::time::Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(
                std::time::Instant::now() < end,
                "timed out waiting for {what}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The port's queues and the back-end's, when it is flowpath's (DPDK's testpmd forwards
    /// what it gets back to the port by itself).
    struct Queues {
        vu_rx: Box<dyn RxQueue>,
        vu_tx: Box<dyn TxQueue>,
        be: Option<(Box<dyn RxQueue>, Box<dyn TxQueue>)>,
        pool: Pool,
    }

    impl Queues {
        /// Polls `rx` until a frame arrives; false after `timeout`.
        fn one(rx: &mut dyn RxQueue, pool: &mut Pool, timeout: Duration) -> Option<Vec<u8>> {
            let end = std::time::Instant::now() + timeout;
            let mut b = Batch::new();
            while std::time::Instant::now() < end {
                if rx.recv(pool, &mut b) > 0 {
                    let f = b.packets()[0].data().to_vec();
                    pool.free_batch(&mut b);
                    return Some(f);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            None
        }

        /// A frame from the port to the back-end and back: relayed by the test through
        /// flowpath's back-end, or by testpmd (`macswap`; sent again until it comes back,
        /// since the PMD drops what it forwards while it restarts its queues).
        fn round_trip(&mut self, tag: u8) {
            let f = frame(100, tag);
            let pool = &mut self.pool;
            let mut b = Batch::new();
            let end = std::time::Instant::now() + Duration::from_secs(20);
            let back = loop {
                assert!(std::time::Instant::now() < end, "no round trip");
                b.push(pool.packet_from(&f, 0));
                self.vu_tx.send(&mut b, pool);
                let Some((be_rx, be_tx)) = &mut self.be else {
                    match Self::one(&mut *self.vu_rx, pool, Duration::from_millis(50)) {
                        Some(g) => break g,
                        None => continue,
                    }
                };
                let got = Self::one(&mut **be_rx, pool, Duration::from_secs(20));
                assert_eq!(got.as_ref(), Some(&f), "at the back-end");
                b.push(pool.packet_from(&f, 0));
                be_tx.send(&mut b, pool);
                break Self::one(&mut *self.vu_rx, pool, Duration::from_secs(20))
                    .expect("the frame from the back-end");
            };
            assert_eq!(back[12..], f[12..]);
        }
    }

    /// Poisons used ring `vring` of `port` (the device is idle: nothing else writes it).
    fn poison(port: &VirtioUserPort, vring: usize, id: u32, len: u32) {
        let slot = lock(&port.shared.slots[vring]);
        let r = slot.as_ref().expect("ring in service");
        let mut d = Device::of(r);
        d.used_idx = r.used_idx_now();
        d.put_used(id, len);
    }

    /// Garbage in the transmit ring's used ring, then in the receive ring's: each is caught
    /// by the burst that reads it, the device is reset, and traffic resumes.
    fn garbage_then_traffic(vu: &VirtioUserPort, q: &mut Queues, device_up: &dyn Fn() -> bool) {
        let reset = |n| move || vu.shared.resets_done.load(Acquire) == n && device_up();
        q.round_trip(1);
        // Let a slow device finish with the frame (DPDK's PMD polls on its own).
        std::thread::sleep(Duration::from_millis(100));
        // A used id never given: the frame sent on the ring is dropped.
        poison(vu, 1, 3, 0);
        let mut b = Batch::new();
        b.push(q.pool.packet_from(&frame(60, 0), 0));
        q.vu_tx.send(&mut b, &mut q.pool);
        assert_eq!(vu.resets(), 1);
        assert_eq!(vu.counters().tx_dropped, 1);
        wait_for("the device reset", reset(1));
        q.round_trip(2);
        std::thread::sleep(Duration::from_millis(100));
        // A length beyond the buffer.
        poison(vu, 0, 0, 1 << 20);
        assert_eq!(q.vu_rx.recv(&mut q.pool, &mut b), 0);
        assert_eq!(vu.resets(), 2);
        wait_for("the device reset", reset(2));
        q.round_trip(3);
        let c = vu.counters();
        assert_eq!(c.errors, 2, "{c:?}");
        let o = vu.options();
        assert!(o.contains("used_id_not_in_flight=1"), "{o}");
        assert!(o.contains("used_len_beyond_buffer=1"), "{o}");
        assert_eq!(vu.connections(), 1, "a device reset is not a reconnection");
    }

    #[test]
    fn garbage_from_flowpaths_back_end_resets_the_device_and_traffic_resumes() {
        let dir = std::env::temp_dir().join(format!("fp-vu-unit-{}", std::process::id()));
        let sock = dir.join("be.sock");
        let mut vo = VhostOptions::for_kind("vhostuser").unwrap();
        vo.path = Some(sock.clone());
        let mut be = VhostPort::open("be", vo).unwrap();
        let mut vu = VirtioUserPort::open("vu", VirtioUserOptions::new(&sock)).unwrap();
        wait_for("the rings", || vu.link_up() && be.started_vrings() == 2);
        let mut q = Queues {
            vu_rx: vu.take_rxq(0, 2).unwrap(),
            vu_tx: vu.open_txq(),
            be: Some((be.take_rxq(0, 1).unwrap(), be.open_txq())),
            pool: Pool::new(256, 0),
        };
        garbage_then_traffic(&vu, &mut q, &|| be.started_vrings() == 2);
        assert_eq!(vu.counters().rx_packets, 3);
        drop(vu);
        drop(be);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The same against DPDK's vhost PMD (testpmd forwarding with `macswap`), whose library
    /// stops the whole device when one ring is stopped. Skipped when testpmd is missing.
    #[test]
    fn garbage_from_dpdk_vhost_resets_the_device_and_traffic_resumes() {
        use std::process::{Command, Stdio};
        let installed = Command::new("dpdk-testpmd")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !installed {
            eprintln!(
                "SKIP garbage_from_dpdk_vhost: dpdk-testpmd not installed (apt-get install dpdk)"
            );
            return;
        }
        let prefix = format!("fpvu{}", std::process::id());
        let dir = std::env::temp_dir().join(&prefix);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("vhost.sock");
        let log = std::fs::File::create(dir.join("testpmd.log")).unwrap();
        let mut pmd = Command::new("dpdk-testpmd")
            .args([
                "-l",
                "0,1",
                "--no-huge",
                "--no-shconf",
                "-m",
                "512",
                "--no-pci",
            ])
            .arg(format!("--file-prefix={prefix}"))
            .arg("--vdev")
            .arg(format!("net_vhost0,iface={},queues=1", sock.display()))
            .args(["--", "--forward-mode=macswap", "--auto-start"])
            .arg("--total-num-mbufs=16384")
            // Forwards until its standard input has a line or ends.
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut vu = VirtioUserPort::open("vu", VirtioUserOptions::new(&sock)).unwrap();
        wait_for("the rings", || vu.link_up());
        let mut q = Queues {
            vu_rx: vu.take_rxq(0, 2).unwrap(),
            vu_tx: vu.open_txq(),
            be: None,
            pool: Pool::new(256, 0),
        };
        garbage_then_traffic(&vu, &mut q, &|| true);
        drop(vu);
        let _ = pmd.kill();
        let _ = pmd.wait();
        let _ = std::fs::remove_dir_all(&dir);
        let run = std::env::var_os("XDG_RUNTIME_DIR").map_or("/var/run".into(), PathBuf::from);
        let _ = std::fs::remove_dir_all(run.join("dpdk").join(&prefix));
    }
}
