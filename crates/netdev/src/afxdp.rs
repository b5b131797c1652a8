//! The `afxdp` port: a kernel interface driven through AF_XDP sockets (XSKs), as OVS's
//! `netdev-afxdp` does, with the XDP redirect program of [`crate::bpf`] (no clang, no libbpf).
//!
//! # Design
//!
//! * **One XSK per rx queue.** Queue id `q` in `0..n_rxq` gets a socket bound to
//!   `(ifindex, q)` with a UMEM of its own (anonymous memory, `n_frames` frames of
//!   `frame_size` bytes). The program redirects what arrives on queue `q` to that socket
//!   through the `XSKMAP`; packets of other queues, and any packet when the map has no socket
//!   for its queue, go on to the kernel stack (`XDP_PASS`).
//! * **Rx.** The first half of a socket's UMEM frames is for receiving: all of them start in
//!   the fill ring, which has room for every one of them, so it stays full. A poll takes up to a
//!   burst from the rx ring without blocking, copies each frame into a pool packet (the
//!   datapath owns its buffers) and gives the frame straight back to the fill ring. Every
//!   descriptor is checked first: one whose data is not inside a single rx frame is counted
//!   as an error, and an address that is not an rx frame never goes to the fill ring.
//! * **Tx.** The second half of the UMEM frames is for sending, with the socket's tx and
//!   completion rings. The rx side (rx + fill rings) and the tx side (tx + completion rings) of
//!   one socket are independent single-producer/single-consumer rings over disjoint frames, so
//!   the PMD that polls queue `q` and the PMD that sends on the socket's tx side never touch the
//!   same memory. The kernel allows one UMEM per `(ifindex, queue id)` (a second socket on the
//!   same queue must share the first one's UMEM *and its fill and completion rings* with
//!   `XDP_SHARED_UMEM`, which would need a lock between PMDs), so tx queues are handed out as:
//!   1. the tx side of rx socket `k` for the `k`-th tx queue opened (`k < n_rxq`);
//!   2. then a tx-only socket with a UMEM of its own on the next unused queue id
//!      (`n_rxq`, `n_rxq + 1`, ...), in copy mode, when the device has that queue;
//!   3. else the least used existing tx side, shared.
//!
//!   Each tx side sits behind a mutex taken once per burst; it is uncontended (an atomic
//!   exchange, no system call) except in case 3, when a device has fewer queues than PMDs.
//!   A burst takes completions back, copies what fits into free tx frames and ring slots
//!   (the rest is dropped and counted, as OVS does: the kernel is not keeping up) and kicks
//!   once. Completion addresses that are not tx frames are counted as errors and never
//!   written to.
//! * **Wakeups.** Sockets are bound with `XDP_USE_NEED_WAKEUP`. The tx side kicks the kernel
//!   with `sendto(MSG_DONTWAIT)` when the tx ring asks for it (always in copy mode, where the
//!   kernel sends from within that call, at most a batch per call: the kick is repeated while
//!   it answers `EAGAIN` with descriptors left). Descriptors the kernel could not take yet are
//!   kicked again by `flush`. The rx side calls `recvfrom(MSG_DONTWAIT)` only when the fill
//!   ring asks for it (zero-copy drivers).
//! * **Modes.** `xdp_mode=best` attaches in the driver (native) and falls back to generic (SKB)
//!   mode; `native` and `generic` insist. `zero_copy=auto` binds with `XDP_ZEROCOPY` in native
//!   mode and falls back to `XDP_COPY` (veth, generic mode and most virtual devices only copy);
//!   `true` insists, `false` always copies. [`AfXdpPort::queue_modes`] says what each socket
//!   got, and `options()` shows it (`{xdp_mode=native, copy}`).
//! * **Attach and restart.** The program is attached through a BPF link where the kernel has
//!   XDP links (5.9+): it is detached when the link's descriptor closes, which also happens when
//!   the process crashes, so a restarted switch attaches again without help. On older kernels
//!   it is attached with netlink, which outlives the process: if a program is already attached
//!   and it is ours (named [`crate::bpf::PROG_NAME`], left by a crashed run), it is detached and
//!   the attach retried; any other program is an error naming it (`ip link set dev IF xdp off`
//!   removes it). Dropping the port detaches the program, then the sockets close when the last
//!   queue using them is dropped.
//! * **Interfaces that go away.** When the interface is deleted (a veth pair removed), its
//!   sockets are unbound by the kernel and never work again: a new interface of the same name
//!   has another index. The queues notice by themselves, at no cost to the packet path while
//!   the link is fine: an rx queue reads the clock every 64 polls and, every ~100 ms, looks up
//!   the interface's index by name (one `ioctl`); a tx queue sees `ENXIO` from its kick. The
//!   first queue to notice releases the program's attachment (or, when an interface of that
//!   name exists again, attaches the program to it, inside the namespace) and bumps the
//!   port's generation, under a lock taken only on this slow path; each socket is then lost
//!   (out of the map; one error counted on every queue that used it; nothing touches it any
//!   more) and, once the interface is back, rebuilt by the first of its queues to see the new
//!   generation (UMEM, rings, bind to the new index, map); the rx queue takes the new rx side
//!   at its next check. While the interface is gone, queues look for it at most every
//!   ~100 ms and tx drops what it is given. [`AfXdpPort::link_up`] says whether the interface
//!   exists, is up, has carrier, and the program and every socket are on that instance.
//! * **Namespaces.** With `netns=NAME` the interface lives in `/run/netns/NAME`: sockets, map,
//!   program and attachment are all created on a short-lived thread inside that namespace
//!   ([`crate::netns::run_in_opt`]); they keep working from any thread afterwards.
//!
//! # veth
//!
//! Observed on Linux 6.18 (and what the tests check):
//!
//! * Native XDP works on veth for rx (the program runs in veth's NAPI poll). The kernel refuses
//!   it (`ENOSPC`) while the peer has more tx queues than this end has rx queues; `best` then
//!   falls back to generic.
//! * Zero-copy is not supported: `zero_copy=auto` falls back to copy (reported as `copy`),
//!   `zero_copy=true` fails.
//! * Frames *sent* through an XSK in copy mode are built as skbs and transmitted with
//!   `dev_direct_xmit` (bypassing the qdisc), so the peer receives them through the ordinary
//!   veth path with no XDP program and no GRO on the peer. (The "peer needs an XDP program or
//!   GRO" rule concerns `XDP_TX`/`XDP_REDIRECT` into a veth, not AF_XDP tx.)
//! * A veth has one real queue pair unless created with `numrxqueues`/`numtxqueues` and raised
//!   with `ethtool -L IF rx N tx N` on both ends. In native mode a frame is received on the
//!   queue of the index of the peer tx queue that sent it; in generic mode every frame shows
//!   `rx_queue_index` 0, so only queue 0's socket receives.
//! * AF_XDP carries frames as bytes, without the skb's checksum-offload state: a namespace
//!   whose locally generated TCP/UDP goes through the switch needs `ethtool -K IF tx off` on its
//!   veth end (which also turns TSO off), or its segments arrive with partial checksums (and, in
//!   generic mode, GSO super-frames larger than a UMEM frame are dropped).

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use datapath::packet::{Batch, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};

use crate::afpacket::{RECHECK, due};
use crate::bpf::{self, AttachMode, BpfError, XdpAttachment, XdpProgram, XskMap};

// ---- linux/if_xdp.h ------------------------------------------------------------------------

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_OPTIONS: libc::c_int = 8;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_RING_NEED_WAKEUP: u32 = 1;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct XdpDesc {
    addr: u64,
    len: u32,
    options: u32,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

#[repr(C)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct XdpStatistics {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

// The structs against linux/if_xdp.h.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<XdpDesc>() == 16);
    assert!(offset_of!(XdpDesc, len) == 8);
    assert!(size_of::<SockaddrXdp>() == 16);
    assert!(offset_of!(SockaddrXdp, ifindex) == 4);
    assert!(offset_of!(SockaddrXdp, queue_id) == 8);
    assert!(offset_of!(SockaddrXdp, shared_umem_fd) == 12);
    assert!(size_of::<UmemReg>() == 32);
    assert!(offset_of!(UmemReg, chunk_size) == 16);
    assert!(offset_of!(UmemReg, headroom) == 20);
    assert!(offset_of!(UmemReg, flags) == 24);
    assert!(offset_of!(UmemReg, tx_metadata_len) == 28);
    assert!(size_of::<MmapOffsets>() == 128);
    assert!(offset_of!(MmapOffsets, fr) == 64);
    assert!(offset_of!(RingOffset, flags) == 24);
    assert!(size_of::<XdpStatistics>() == 48);
    assert!(offset_of!(XdpStatistics, tx_ring_empty_descs) == 40);
};

// ---- options -------------------------------------------------------------------------------

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpMode {
    /// Native (driver) mode where the driver has it, else generic.
    #[default]
    Best,
    /// Native (driver) mode only.
    Native,
    /// Generic (SKB) mode only: works on any interface, slower.
    Generic,
}

/// Whether sockets use zero-copy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ZeroCopy {
    /// Zero-copy where the driver supports it (native mode only), else copy.
    #[default]
    Auto,
    /// Zero-copy or fail.
    On,
    /// Always copy.
    Off,
}

/// Options of an `afxdp` port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfXdpOptions {
    /// Interface name (`ifname=`); the port's name when `None`.
    pub ifname: Option<String>,
    /// Number of rx queues, ids `0..n_rxq` (`n_rxq=`, default 1).
    pub n_rxq: usize,
    /// `xdp_mode=best|native|generic` (default `best`).
    pub xdp_mode: XdpMode,
    /// `zero_copy=auto|true|false` (default `auto`).
    pub zero_copy: ZeroCopy,
    /// UMEM frames per socket, half for rx, half for tx (`n_frames=`, default 4096).
    pub n_frames: u32,
    /// Bytes per UMEM frame, 2048 or 4096 (`frame_size=`, default 2048).
    pub frame_size: u32,
    /// Entries of the rx and tx rings, a power of two (`ring_size=`, default 2048).
    pub ring_size: u32,
    /// Network namespace the interface lives in (`netns=NAME` for `/run/netns/NAME`; empty
    /// for the current one).
    pub netns: Option<String>,
}

impl Default for AfXdpOptions {
    fn default() -> Self {
        AfXdpOptions {
            ifname: None,
            n_rxq: 1,
            xdp_mode: XdpMode::Best,
            zero_copy: ZeroCopy::Auto,
            n_frames: 4096,
            frame_size: 2048,
            ring_size: 2048,
            netns: None,
        }
    }
}

impl AfXdpOptions {
    /// Sets option `key` from its configuration text; an error names what is wrong.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let num = |v: &str| -> Result<u32, String> {
            v.parse::<u32>()
                .map_err(|_| format!("afxdp option {key}={v}: not a number"))
        };
        match key {
            "ifname" => self.ifname = Some(value.to_owned()),
            "n_rxq" => self.n_rxq = num(value)? as usize,
            "xdp_mode" => {
                self.xdp_mode = match value {
                    "best" => XdpMode::Best,
                    "native" | "native-with-zerocopy" | "drv" => XdpMode::Native,
                    "generic" | "generic-skb" | "skb" => XdpMode::Generic,
                    _ => {
                        return Err(format!(
                            "afxdp option xdp_mode={value}: expected best, native or generic"
                        ));
                    }
                }
            }
            "zero_copy" => {
                self.zero_copy = match value {
                    "auto" => ZeroCopy::Auto,
                    "true" | "on" | "yes" => ZeroCopy::On,
                    "false" | "off" | "no" => ZeroCopy::Off,
                    _ => {
                        return Err(format!(
                            "afxdp option zero_copy={value}: expected auto, true or false"
                        ));
                    }
                }
            }
            "n_frames" => self.n_frames = num(value)?,
            "frame_size" => self.frame_size = num(value)?,
            "ring_size" => self.ring_size = num(value)?,
            "netns" => self.netns = (!value.is_empty()).then(|| value.to_owned()),
            _ => {
                return Err(format!(
                    "unknown afxdp option '{key}' (ifname, n_rxq, xdp_mode, zero_copy, \
                     n_frames, frame_size, ring_size, netns)"
                ));
            }
        }
        Ok(())
    }

    /// Checks the values (ranges, sizes, combinations) without opening anything.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=256).contains(&self.n_rxq) {
            return Err(format!("n_rxq={} must be 1 to 256", self.n_rxq));
        }
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(format!(
                "frame_size={} must be 2048 or 4096",
                self.frame_size
            ));
        }
        if !(64..=1 << 20).contains(&self.n_frames) || !self.n_frames.is_multiple_of(2) {
            return Err(format!(
                "n_frames={} must be even, 64 to 1048576",
                self.n_frames
            ));
        }
        if !self.ring_size.is_power_of_two() || !(64..=1 << 16).contains(&self.ring_size) {
            return Err(format!(
                "ring_size={} must be a power of two, 64 to 65536",
                self.ring_size
            ));
        }
        if self.xdp_mode == XdpMode::Generic && self.zero_copy == ZeroCopy::On {
            return Err("zero_copy=true needs xdp_mode=native (or best)".into());
        }
        Ok(())
    }
}

// ---- errors --------------------------------------------------------------------------------

/// Why an `afxdp` port could not open.
#[derive(Debug, thiserror::Error)]
#[error("afxdp port {port}: {msg}")]
pub struct AfXdpError {
    pub port: String,
    pub msg: String,
    /// The kernel's errno, when a system call failed.
    pub errno: Option<i32>,
    /// Whether the failure means this kernel, driver or process cannot do AF_XDP at all
    /// (no AF_XDP sockets, `bpf()` not permitted, XDP not attachable), as opposed to a
    /// configuration mistake.
    pub unsupported: bool,
}

/// A failure inside the opening, before the port name is known to the message.
struct Fail {
    msg: String,
    errno: Option<i32>,
    unsupported: bool,
}

impl Fail {
    /// A failure with no errno.
    fn msg(msg: impl Into<String>) -> Fail {
        Fail {
            msg: msg.into(),
            errno: None,
            unsupported: false,
        }
    }

    /// The same, marked as meaning "this system cannot do AF_XDP".
    fn unsupported(mut self) -> Fail {
        self.unsupported = true;
        self
    }

    fn io(what: impl Into<String>, e: &io::Error) -> Fail {
        Fail {
            msg: format!("{}: {e}", what.into()),
            errno: e.raw_os_error(),
            unsupported: false,
        }
    }

    fn bpf(e: &BpfError, hint: &str) -> Fail {
        let errno = e.errno();
        let unsupported = matches!(
            errno,
            Some(libc::EPERM | libc::ENOSYS | libc::EOPNOTSUPP | libc::EACCES)
        );
        Fail {
            msg: format!("{e}{hint}"),
            errno,
            unsupported,
        }
    }
}

const FALLBACK_HINT: &str = "; use xdp_mode=generic, or a port of type=afpacket";
const AFPACKET_HINT: &str = "; use a port of type=afpacket";

// ---- memory maps and rings -----------------------------------------------------------------

/// A memory mapping, unmapped on drop.
struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; which thread touches which part of
// it is governed by the ring protocol (see the module documentation), not by the pointer.
unsafe impl Send for Mmap {}
// SAFETY: as above; shared references only read the pointer and length.
unsafe impl Sync for Mmap {}

impl Mmap {
    fn map(len: usize, fd: RawFd, offset: libc::off_t) -> io::Result<Mmap> {
        let flags = if fd < 0 {
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS
        } else {
            libc::MAP_SHARED | libc::MAP_POPULATE
        };
        // SAFETY: a fresh mapping chosen by the kernel (null hint); the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: p as *mut u8,
            len,
        })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `map`, unmapped only here.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// One of a socket's four rings, seen from user space. Consumer rings (rx, completion) own
/// their consumer index; producer rings (fill, tx) own their producer index. Indexes are free
/// running `u32`s; the kernel's are read with acquire and ours published with release, which
/// pairs with the kernel's own acquire/release (`smp_load_acquire`/`smp_store_release` in
/// `net/xdp/xsk_queue.h`): entries and frame data written before a release are seen by the
/// side that acquires the index.
///
/// The kernel's index is never trusted to be sane: a consumer sees at most `size` entries, a
/// producer at most `size` free slots, whatever the shared memory says.
struct Ring<T> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut T,
    mask: u32,
    size: u32,
    cached_prod: u32,
    cached_cons: u32,
}

impl<T: Copy> Ring<T> {
    /// The ring of `size` entries mapped at `map` with offsets `off`; an error when the
    /// offsets do not describe a ring of that size inside the mapping.
    ///
    /// # Safety
    /// `map` must be the kernel's mapping of this ring (the kernel writes only the index it
    /// owns and the entries it produces, following the ring protocol), and it must outlive
    /// the ring.
    unsafe fn new(map: &Mmap, off: &RingOffset, size: u32) -> io::Result<Ring<T>> {
        let bad = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("XDP_MMAP_OFFSETS: {what} outside the ring mapping or misaligned"),
            )
        };
        if !size.is_power_of_two() {
            return Err(bad("ring size"));
        }
        // The mapping starts on a page, so an offset aligned for the type is an aligned
        // address.
        let index_ok =
            |o: u64| o.is_multiple_of(4) && o.checked_add(4).is_some_and(|e| e <= map.len as u64);
        for (o, what) in [
            (off.producer, "producer"),
            (off.consumer, "consumer"),
            (off.flags, "flags"),
        ] {
            if !index_ok(o) {
                return Err(bad(what));
            }
        }
        let descs_end = (size as u64)
            .checked_mul(std::mem::size_of::<T>() as u64)
            .and_then(|n| n.checked_add(off.desc));
        if !off.desc.is_multiple_of(std::mem::align_of::<T>() as u64)
            || descs_end.is_none_or(|e| e > map.len as u64)
        {
            return Err(bad("descriptors"));
        }
        // SAFETY: every offset was just checked to lie inside the mapping, aligned for its
        // type (indexes u32, entries `T`), with `size` entries of `T` from `desc`; the
        // mapping is live (caller's contract).
        unsafe {
            let base = map.ptr;
            let producer = base.add(off.producer as usize) as *const AtomicU32;
            let consumer = base.add(off.consumer as usize) as *const AtomicU32;
            Ok(Ring {
                producer,
                consumer,
                flags: base.add(off.flags as usize) as *const AtomicU32,
                descs: base.add(off.desc as usize) as *mut T,
                mask: size - 1,
                size,
                cached_prod: (*producer).load(Ordering::Acquire),
                cached_cons: (*consumer).load(Ordering::Acquire),
            })
        }
    }

    /// Producer side: whether the kernel asks to be woken up (`XDP_RING_NEED_WAKEUP`). The
    /// fence orders our earlier release of the producer index before the load of the flag
    /// (a store-load order, which release/acquire alone does not give), as the kernel sets
    /// the flag and then looks at the ring again.
    fn needs_wakeup(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        // SAFETY: `flags` points into the live ring mapping, aligned (checked in `new`).
        unsafe { (*self.flags).load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0 }
    }

    /// Consumer side: index of the first available entry and how many (at most `max`).
    #[inline]
    fn peek(&mut self, max: u32) -> (u32, u32) {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail < max {
            // SAFETY: `producer` points into the live ring mapping, aligned (see `new`).
            self.cached_prod = unsafe { (*self.producer).load(Ordering::Acquire) };
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        // A producer index more than `size` ahead is nonsense: never read past one lap.
        (self.cached_cons, avail.min(self.size).min(max))
    }

    /// Consumer side: gives `n` entries back to the kernel.
    #[inline]
    fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        // SAFETY: `consumer` points into the live ring mapping, aligned (see `new`).
        unsafe { (*self.consumer).store(self.cached_cons, Ordering::Release) };
    }

    /// Producer side: free entries, given the consumer index last read.
    #[inline]
    fn free_slots(&self) -> u32 {
        // Saturating: a consumer index ahead of ours (kernel bug) means no room, not a panic.
        self.size
            .saturating_sub(self.cached_prod.wrapping_sub(self.cached_cons))
    }

    /// Producer side: index of the first free entry and how many are free (at most `max`).
    #[inline]
    fn reserve(&mut self, max: u32) -> (u32, u32) {
        if self.free_slots() < max {
            // SAFETY: `consumer` points into the live ring mapping, aligned (see `new`).
            self.cached_cons = unsafe { (*self.consumer).load(Ordering::Acquire) };
        }
        (self.cached_prod, self.free_slots().min(max))
    }

    /// Producer side: publishes `n` entries written after the producer index.
    #[inline]
    fn submit(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_prod = self.cached_prod.wrapping_add(n);
        // SAFETY: `producer` points into the live ring mapping, aligned (see `new`).
        unsafe { (*self.producer).store(self.cached_prod, Ordering::Release) };
    }

    /// Producer side: entries published that the kernel has not consumed yet.
    fn outstanding(&mut self) -> u32 {
        // SAFETY: `consumer` points into the live ring mapping, aligned (see `new`).
        self.cached_cons = unsafe { (*self.consumer).load(Ordering::Acquire) };
        self.cached_prod
            .wrapping_sub(self.cached_cons)
            .min(self.size)
    }

    /// Reads entry `idx`, which `peek` returned as available.
    #[inline]
    fn read(&self, idx: u32) -> T {
        // SAFETY: `idx & mask` is below `size`, and `size` entries of `T` lie in the mapping
        // (checked in `new`); the entry is ours to read (published by the kernel's release
        // of the producer index, which `peek` acquired; the kernel does not rewrite it before
        // we release it). A plain read of `Copy` data: any bit pattern is a valid `T` here.
        unsafe { self.descs.add((idx & self.mask) as usize).read() }
    }

    /// Writes entry `idx`, which `reserve` returned as free.
    #[inline]
    fn write(&mut self, idx: u32, v: T) {
        // SAFETY: `idx & mask` is below `size` (entries checked in `new`); the entry is free
        // (the kernel's acquire of our producer index has not covered it yet), so the kernel
        // does not read it concurrently.
        unsafe { self.descs.add((idx & self.mask) as usize).write(v) }
    }
}

// ---- sockets -------------------------------------------------------------------------------

/// An AF_XDP socket with its UMEM and ring mappings. Shared by its rx side, its tx side and
/// the port; closed when the last of them goes.
///
/// Fields drop in order: the socket first (the kernel unbinds it and stops using the rings
/// and the UMEM, whose pages it keeps pinned until its deferred release), then the mappings.
struct Xsk {
    fd: OwnedFd,
    umem: Mmap,
    _rings: Vec<Mmap>,
    qid: u32,
    zero_copy: bool,
}

impl Xsk {
    fn stats(&self) -> Option<XdpStatistics> {
        // Kernels before 5.9 fill only the first three counters (and say so through the
        // length); the others stay zero.
        getsockopt(self.fd.as_raw_fd(), XDP_STATISTICS)
            .ok()
            .map(|(s, _)| s)
    }
}

/// How long `bind` retries a queue that is busy (see `create_xsk`).
const BIND_BUSY_WAIT: std::time::Duration = std::time::Duration::from_millis(1500);

/// What a socket is created with.
struct XskConfig {
    ifindex: u32,
    qid: u32,
    rx_frames: u32,
    tx_frames: u32,
    frame_size: u32,
    ring_size: u32,
    /// With an rx ring (else tx only).
    rx: bool,
    zero_copy: bool,
}

fn setsockopt<T>(fd: RawFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a valid value of the size passed, read by the kernel only.
    let r = unsafe {
        libc::setsockopt(
            fd,
            SOL_XDP,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Reads option `opt` into a `T` (plain integers only, any bit pattern valid); returns it with
/// the length the kernel filled, which may be shorter on older kernels.
fn getsockopt<T: Default + Copy>(fd: RawFd, opt: libc::c_int) -> io::Result<(T, usize)> {
    let mut v = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is a writable value of the size passed; the kernel writes at most `len`
    // bytes and every `T` used here is a `repr(C)` struct of integers.
    let r = unsafe {
        libc::getsockopt(
            fd,
            SOL_XDP,
            opt,
            &mut v as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok((v, len as usize))
    }
}

/// A zero-length non-blocking `sendto` (tx) or `recvfrom` (rx) on `fd`: only a wakeup.
fn wakeup(fd: RawFd, tx: bool) -> isize {
    // SAFETY: no buffer and no address are passed (null with zero lengths); the call only
    // tells the kernel to look at the socket's rings.
    unsafe {
        if tx {
            libc::sendto(
                fd,
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        } else {
            libc::recvfrom(
                fd,
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }
    }
}

/// Creates, maps and binds one socket in the calling thread's namespace; returns it with its
/// rx side (when `cfg.rx`) and tx side. Frames `0..rx_frames` of the UMEM are for rx, the
/// next `tx_frames` for tx.
fn create_xsk(cfg: &XskConfig) -> Result<(Arc<Xsk>, Option<RxSide>, TxSide), Fail> {
    let q = cfg.qid;
    // SAFETY: plain socket(2); the result is checked before it is owned.
    let raw = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        let e = io::Error::last_os_error();
        let mut f = Fail::io("socket(AF_XDP)", &e);
        if matches!(e.raw_os_error(), Some(libc::EAFNOSUPPORT | libc::EPERM)) {
            f.msg.push_str(
                " (this kernel has no AF_XDP sockets, CONFIG_XDP_SOCKETS, or the process lacks \
                 CAP_NET_RAW); use a port of type=afpacket",
            );
            f.unsupported = true;
        }
        return Err(f);
    }
    // SAFETY: `raw` was just returned by socket(2) and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let fdr = fd.as_raw_fd();
    let frame_size = u64::from(cfg.frame_size);
    let rx_end = u64::from(cfg.rx_frames) * frame_size;
    let umem_end = u64::from(cfg.rx_frames + cfg.tx_frames) * frame_size;
    let umem_len = usize::try_from(umem_end)
        .map_err(|_| Fail::msg(format!("queue {q}: a {umem_end}-byte UMEM is too large")))?;
    let umem = Mmap::map(umem_len, -1, 0)
        .map_err(|e| Fail::io(format!("mmap of a {umem_len}-byte UMEM"), &e))?;
    let reg = UmemReg {
        addr: umem.ptr as u64,
        len: umem_end,
        chunk_size: cfg.frame_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    setsockopt(fdr, XDP_UMEM_REG, &reg).map_err(|e| {
        Fail::io(
            format!("queue {q}: XDP_UMEM_REG ({umem_len} bytes; raise `ulimit -l` if ENOMEM)"),
            &e,
        )
    })?;
    // The fill ring has room for every rx frame, the completion ring for every tx frame (so
    // neither can overflow), and the tx ring is no larger than the completion ring.
    let fill_size = cfg.rx_frames.max(1).next_power_of_two().max(64);
    let comp_size = cfg.tx_frames.max(1).next_power_of_two();
    let rx_size = cfg.ring_size;
    let tx_size = cfg.ring_size.min(comp_size);
    let ring_err = |what: &str, e: io::Error| Fail::io(format!("queue {q}: {what}"), &e);
    setsockopt(fdr, XDP_UMEM_FILL_RING, &fill_size).map_err(|e| ring_err("fill ring", e))?;
    setsockopt(fdr, XDP_UMEM_COMPLETION_RING, &comp_size)
        .map_err(|e| ring_err("completion ring", e))?;
    if cfg.rx {
        setsockopt(fdr, XDP_RX_RING, &rx_size).map_err(|e| ring_err("rx ring", e))?;
    }
    setsockopt(fdr, XDP_TX_RING, &tx_size).map_err(|e| ring_err("tx ring", e))?;
    let (off, off_len): (MmapOffsets, usize) =
        getsockopt(fdr, XDP_MMAP_OFFSETS).map_err(|e| ring_err("XDP_MMAP_OFFSETS", e))?;
    if off_len != std::mem::size_of::<MmapOffsets>() {
        // Kernels before 5.4 have no ring flags (and no XDP_USE_NEED_WAKEUP).
        return Err(Fail::msg(format!(
            "queue {q}: XDP_MMAP_OFFSETS without ring flags: kernel too old for AF_XDP \
             need_wakeup (5.4+); use a port of type=afpacket"
        ))
        .unsupported());
    }

    let desc = std::mem::size_of::<XdpDesc>() as u64;
    let map_ring = |o: &RingOffset, n: u32, esz: u64, pgoff: libc::off_t, what: &str| {
        let len = u64::from(n)
            .checked_mul(esz)
            .and_then(|l| l.checked_add(o.desc))
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| Fail::msg(format!("queue {q}: {what} ring offsets out of range")))?;
        Mmap::map(len, fdr, pgoff).map_err(|e| ring_err(&format!("mmap of the {what} ring"), e))
    };
    let fill_map = map_ring(&off.fr, fill_size, 8, XDP_UMEM_PGOFF_FILL_RING, "fill")?;
    let comp_map = map_ring(
        &off.cr,
        comp_size,
        8,
        XDP_UMEM_PGOFF_COMPLETION_RING,
        "completion",
    )?;
    let tx_map = map_ring(&off.tx, tx_size, desc, XDP_PGOFF_TX_RING, "tx")?;
    let rx_map = if cfg.rx {
        Some(map_ring(&off.rx, rx_size, desc, XDP_PGOFF_RX_RING, "rx")?)
    } else {
        None
    };
    let bad_ring = |what: &str, e: io::Error| ring_err(&format!("{what} ring"), e);
    // Each mapping below is the kernel's ring of the size set above (Ring::new checks the
    // offsets against it); the mappings move into `Xsk` (moving an `Mmap` does not move the
    // memory), which both sides keep alive for as long as they hold the rings.
    // SAFETY: as just said, for the fill ring.
    let mut fill: Ring<u64> =
        unsafe { Ring::new(&fill_map, &off.fr, fill_size) }.map_err(|e| bad_ring("fill", e))?;
    // SAFETY: as above, for the completion ring.
    let comp: Ring<u64> = unsafe { Ring::new(&comp_map, &off.cr, comp_size) }
        .map_err(|e| bad_ring("completion", e))?;
    // SAFETY: as above, for the tx ring.
    let tx: Ring<XdpDesc> =
        unsafe { Ring::new(&tx_map, &off.tx, tx_size) }.map_err(|e| bad_ring("tx", e))?;
    let rx: Option<Ring<XdpDesc>> = match &rx_map {
        // SAFETY: as above, for the rx ring.
        Some(m) => Some(unsafe { Ring::new(m, &off.rx, rx_size) }.map_err(|e| bad_ring("rx", e))?),
        None => None,
    };

    // Every rx frame starts in the fill ring, which has room for all of them.
    if cfg.rx {
        let (idx, n) = fill.reserve(cfg.rx_frames);
        for i in 0..n {
            fill.write(idx.wrapping_add(i), u64::from(i) * frame_size);
        }
        fill.submit(n);
    }

    let flags = XDP_USE_NEED_WAKEUP
        | if cfg.zero_copy {
            XDP_ZEROCOPY
        } else {
            XDP_COPY
        };
    let sa = SockaddrXdp {
        family: AF_XDP as u16,
        flags,
        ifindex: cfg.ifindex,
        queue_id: q,
        shared_umem_fd: 0,
    };
    // A socket just closed on this queue (a port dropped and reopened) releases the queue a
    // moment later, from a kernel work item: retry EBUSY for a while.
    let deadline = std::time::Instant::now() + BIND_BUSY_WAIT;
    let bound = loop {
        // SAFETY: `sa` is a valid sockaddr_xdp of the length passed.
        let r = unsafe {
            libc::bind(
                fdr,
                &sa as *const SockaddrXdp as *const libc::sockaddr,
                std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
            )
        };
        if r == 0 {
            break Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EBUSY) || std::time::Instant::now() >= deadline {
            break Err(e);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    if let Err(e) = bound {
        let hint = match e.raw_os_error() {
            Some(libc::EINVAL) => {
                " (does the interface have that many queues? see `ethtool -l IF`; raise with \
                 `ethtool -L IF combined N`, or for veth create it with numrxqueues/numtxqueues \
                 and `ethtool -L IF rx N tx N`)"
            }
            Some(libc::EBUSY) => {
                " (another AF_XDP socket is bound to this queue: is another switch running?)"
            }
            Some(libc::EOPNOTSUPP) if cfg.zero_copy => {
                " (the driver has no zero-copy support; use zero_copy=auto or false)"
            }
            _ => "",
        };
        let mode = if cfg.zero_copy { "zero-copy" } else { "copy" };
        return Err(Fail::io(format!("queue {q}: bind ({mode}){hint}"), &e));
    }
    let opts: u32 = getsockopt(fdr, XDP_OPTIONS).map_or(0, |(o, _)| o);
    let mut rings = vec![fill_map, comp_map, tx_map];
    rings.extend(rx_map);
    let xsk = Arc::new(Xsk {
        fd,
        umem,
        _rings: rings,
        qid: q,
        zero_copy: opts & XDP_OPTIONS_ZEROCOPY != 0,
    });
    let rx_side = rx.map(|rx| RxSide {
        xsk: xsk.clone(),
        rx,
        fill,
        frame_size,
        rx_end,
        stash: Vec::with_capacity(cfg.rx_frames as usize),
        in_port: 0,
        stats: QueueStats::shared(),
    });
    let mut free = Vec::with_capacity(cfg.tx_frames as usize);
    free.extend(
        (0..u64::from(cfg.tx_frames))
            .rev()
            .map(|i| rx_end + i * frame_size),
    );
    let tx_side = TxSide {
        xsk: xsk.clone(),
        tx,
        comp,
        free,
        frame_size,
        tx_start: rx_end,
        tx_end: umem_end,
        bad: 0,
    };
    Ok((xsk, rx_side, tx_side))
}

// ---- rx ------------------------------------------------------------------------------------

struct RxSide {
    xsk: Arc<Xsk>,
    rx: Ring<XdpDesc>,
    fill: Ring<u64>,
    frame_size: u64,
    /// End of the rx frames in the UMEM: rx frames are `0..rx_end`, tx frames after.
    rx_end: u64,
    /// Frames received whose fill-ring slot was not free yet (never by construction: the fill
    /// ring has room for every rx frame; kept so that a frame is not lost). Never grows past
    /// its capacity (the number of rx frames).
    stash: Vec<u64>,
    in_port: u32,
    stats: Arc<QueueStats>,
}

// SAFETY: the ring pointers point into mappings owned by `xsk`, which this value keeps alive;
// an rx side is used by one thread at a time (it is moved, never shared), and it touches only
// the rx frames of the UMEM, which no tx side touches.
unsafe impl Send for RxSide {}

/// Where an rx descriptor's frame is: its chunk (the frame's start, to give back to the fill
/// ring) when that is one of the rx frames, and whether the data (`addr..addr + len`) lies
/// inside that one frame and is not empty.
#[inline]
fn rx_frame(d: &XdpDesc, frame_size: u64, rx_end: u64) -> Option<(u64, bool)> {
    let off = d.addr & (frame_size - 1);
    let chunk = d.addr - off;
    (chunk < rx_end).then(|| (chunk, d.len > 0 && off + u64::from(d.len) <= frame_size))
}

impl RxQueue for RxSide {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        if !self.stash.is_empty() {
            let (idx, k) = self.fill.reserve(self.stash.len() as u32);
            for i in 0..k {
                let a = self.stash.pop().unwrap_or_default();
                self.fill.write(idx.wrapping_add(i), a);
            }
            self.fill.submit(k);
        }
        let room = u32::try_from(batch.room()).unwrap_or(u32::MAX);
        if room == 0 {
            return 0;
        }
        let (idx, n) = self.rx.peek(room);
        if n == 0 {
            if self.fill.needs_wakeup() {
                wakeup(self.xsk.fd.as_raw_fd(), false);
            }
            return 0;
        }
        let (fidx, fk) = self.fill.reserve(n);
        let mut filled = 0;
        let (mut got, mut bytes, mut bad) = (0u32, 0u64, 0u64);
        for i in 0..n {
            let d = self.rx.read(idx.wrapping_add(i));
            // A descriptor is checked before its frame is read or recycled: a chunk that is
            // not one of our rx frames (a tx frame, or outside the UMEM) must never reach
            // the fill ring, where the kernel would write into it.
            let Some((chunk, data_ok)) = rx_frame(&d, self.frame_size, self.rx_end) else {
                bad += 1;
                continue;
            };
            if data_ok {
                // SAFETY: `addr..addr + len` lies inside one rx frame (checked above), hence
                // inside the UMEM mapping (`rx_end` <= its length). The frame is ours: the
                // kernel released it through the rx ring (acquired in `peek`) and writes it
                // again only after we hand its chunk back through the fill ring below.
                let frame = unsafe {
                    std::slice::from_raw_parts(
                        self.xsk.umem.ptr.add(d.addr as usize),
                        d.len as usize,
                    )
                };
                batch.push(pool.packet_from(frame, self.in_port));
                got += 1;
                bytes += u64::from(d.len);
            } else {
                bad += 1;
            }
            if filled < fk {
                self.fill.write(fidx.wrapping_add(filled), chunk);
                filled += 1;
            } else if self.stash.len() < self.stash.capacity() {
                self.stash.push(chunk);
            }
        }
        self.rx.release(n);
        self.fill.submit(filled);
        self.stats.count_rx(u64::from(got), bytes, 0, bad);
        got as usize
    }
}

// ---- tx ------------------------------------------------------------------------------------

struct TxSide {
    xsk: Arc<Xsk>,
    tx: Ring<XdpDesc>,
    comp: Ring<u64>,
    /// Addresses of the tx frames not in flight (capacity: every tx frame; never grows).
    free: Vec<u64>,
    frame_size: u64,
    /// The tx frames are `tx_start..tx_end` in the UMEM.
    tx_start: u64,
    tx_end: u64,
    /// Completions the kernel gave with an address that is not one of our tx frames, not
    /// yet counted by a queue.
    bad: u64,
}

// SAFETY: the ring pointers point into mappings owned by `xsk`, which this value keeps alive;
// a tx side is used under its mutex only, and it touches only the tx frames of the UMEM,
// which no rx side touches.
unsafe impl Send for TxSide {}

/// How a kick ended.
enum Kick {
    /// The kernel took everything (or needs no kick).
    Done,
    /// Descriptors are left for a later kick (`EAGAIN`, `EBUSY`, `ENOBUFS`, link down).
    Pending,
    /// The socket is no longer bound (`ENXIO`): its interface went away.
    Gone,
    /// Another error.
    Error,
}

/// `sendto` calls one kick makes at most: in copy mode the kernel sends a batch (32) per call
/// and answers `EAGAIN` while descriptors are left, so this bounds a kick to one call per
/// batch of frames queued, not per frame.
const KICK_CALLS: usize = 8;

/// What one `TxSide::send` did.
struct Sent {
    packets: u64,
    bytes: u64,
    dropped: u64,
    errors: u64,
    pending: bool,
    /// The socket's interface is gone (see [`Kick::Gone`]).
    gone: bool,
}

impl TxSide {
    /// Takes the completed frames back. An address that is not one of our tx frames (a
    /// kernel bug) is counted and never reused: frames are written at the addresses on the
    /// free list.
    fn reap(&mut self) {
        let (idx, n) = self.comp.peek(self.comp.size);
        for i in 0..n {
            let a = self.comp.read(idx.wrapping_add(i)) & !(self.frame_size - 1);
            if (self.tx_start..self.tx_end).contains(&a) && self.free.len() < self.free.capacity() {
                self.free.push(a);
            } else {
                self.bad += 1;
            }
        }
        self.comp.release(n);
    }

    /// Makes the kernel send what the tx ring holds: one `sendto`, repeated (at most
    /// [`KICK_CALLS`]) only while the kernel answers `EAGAIN` with descriptors left.
    fn kick(&mut self) -> Kick {
        for _ in 0..KICK_CALLS {
            if self.tx.outstanding() == 0 || !self.tx.needs_wakeup() {
                return Kick::Done;
            }
            if wakeup(self.xsk.fd.as_raw_fd(), true) >= 0 {
                // Copy mode sent what it could; zero-copy drivers send asynchronously.
                break;
            }
            match io::Error::last_os_error().raw_os_error() {
                // More left (copy mode's batch limit), or the completion ring is full, or
                // the device was busy: take completions back and go on.
                Some(libc::EAGAIN | libc::EBUSY) => self.reap(),
                Some(libc::ENOBUFS | libc::ENETDOWN) => return Kick::Pending,
                // Unbound: the kernel unbinds a socket whose interface is unregistered.
                Some(libc::ENXIO | libc::ENODEV) => return Kick::Gone,
                _ => return Kick::Error,
            }
        }
        if self.tx.outstanding() == 0 {
            Kick::Done
        } else {
            Kick::Pending
        }
    }

    /// Queues the packets of `batch` and kicks once. Packets that do not fit (no ring slot
    /// or no free frame: the kernel is not keeping up) or are empty or larger than a frame
    /// are dropped.
    fn send(&mut self, batch: &Batch) -> Sent {
        self.reap();
        let pkts = batch.packets();
        let want = u32::try_from(pkts.len()).unwrap_or(u32::MAX);
        let (idx, slots) = self.tx.reserve(want);
        let (mut n, mut bytes, mut dropped) = (0u32, 0u64, 0u64);
        for p in pkts {
            let data = p.data();
            if data.is_empty() || data.len() as u64 > self.frame_size || n == slots {
                dropped += 1;
                continue;
            }
            let Some(addr) = self.free.pop() else {
                dropped += 1;
                continue;
            };
            // SAFETY: `addr` is a tx frame (`tx_start..tx_end`, frame aligned: checked before
            // it entered the free list), so `addr + frame_size` is inside the UMEM mapping,
            // and `data` is at most `frame_size` bytes. The frame is not in flight (it is on
            // the free list), so the kernel does not read it, and no rx side touches tx
            // frames.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    self.xsk.umem.ptr.add(addr as usize),
                    data.len(),
                )
            };
            self.tx.write(
                idx.wrapping_add(n),
                XdpDesc {
                    addr,
                    len: data.len() as u32,
                    options: 0,
                },
            );
            n += 1;
            bytes += data.len() as u64;
        }
        self.tx.submit(n);
        let (pending, error, gone) = match self.kick() {
            Kick::Done => (false, false, false),
            Kick::Pending => (true, false, false),
            Kick::Error => (true, true, false),
            Kick::Gone => (false, false, true),
        };
        Sent {
            packets: u64::from(n),
            bytes,
            dropped,
            errors: u64::from(error) + std::mem::take(&mut self.bad),
            pending,
            gone,
        }
    }
}

struct AfXdpTxq {
    slot: Arc<Slot>,
    shared: Arc<Shared>,
    /// Held while this queue lives: tells the port which tx sides are in use.
    _user: Arc<()>,
    stats: Arc<QueueStats>,
    pending: bool,
    /// While the socket is gone: when to look for the interface again.
    retry_at: Instant,
}

impl AfXdpTxq {
    /// The socket is gone: at most every [`RECHECK`], re-attaches to the interface if it is
    /// back and rebuilds the socket.
    #[cold]
    fn recover(&mut self) {
        if !due(&mut self.retry_at) {
            return;
        }
        let (generation, ifindex, mode) = self.shared.refresh();
        self.slot.sync(&self.shared, generation, ifindex, mode);
    }
}

impl TxQueue for AfXdpTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        if !batch.is_empty() {
            // One lock per burst (uncontended unless the tx side is shared).
            let mut st = lock(&self.slot.state);
            if st.tx.is_none() {
                drop(st);
                self.recover();
                st = lock(&self.slot.state);
            }
            let mut s = match st.tx.as_mut() {
                Some(side) => side.send(batch),
                None => Sent {
                    packets: 0,
                    bytes: 0,
                    dropped: batch.len() as u64,
                    errors: 0,
                    pending: false,
                    gone: false,
                },
            };
            if s.gone {
                // What was queued is lost with the socket; stop touching it.
                st.lose(&self.shared.map, &self.slot);
                self.retry_at = Instant::now();
                s.dropped += s.packets;
                (s.packets, s.bytes) = (0, 0);
            }
            drop(st);
            self.pending = s.pending;
            self.stats.count_tx(s.packets, s.bytes, s.dropped, s.errors);
        }
        pool.free_batch(batch);
    }

    fn flush(&mut self) {
        if self.pending {
            let mut st = lock(&self.slot.state);
            let Some(s) = st.tx.as_mut() else {
                self.pending = false;
                return;
            };
            s.reap();
            let k = s.kick();
            let bad = std::mem::take(&mut s.bad);
            self.pending = matches!(k, Kick::Pending | Kick::Error);
            if matches!(k, Kick::Gone) {
                st.lose(&self.shared.map, &self.slot);
                self.retry_at = Instant::now();
            }
            if bad > 0 {
                self.stats.errors.fetch_add(bad, Ordering::Relaxed);
            }
        }
    }
}

// ---- interface loss and re-attachment ------------------------------------------------------

/// Polls of an rx queue between two clock reads.
const POLLS_PER_CLOCK: u32 = 64;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The program's attachment to the current instance of the interface.
struct AttachState {
    attachment: Option<XdpAttachment>,
    /// The interface instance the program is attached to; 0 while there is none.
    ifindex: u32,
    /// Bumped whenever `ifindex` changes: sockets of an older generation are bound to an
    /// interface that is gone.
    generation: u64,
    mode: AttachMode,
    /// The port was dropped: nothing is attached or rebuilt any more.
    closed: bool,
    /// After a failed attach: when the next one may be tried.
    next_try: Instant,
}

/// What the port and its queues share.
struct Shared {
    // Declared first: dropped (detached) before the program and the map.
    state: Mutex<AttachState>,
    map: XskMap,
    prog: XdpProgram,
    ifname: String,
    opts: AfXdpOptions,
    /// A datagram socket in the interface's namespace, for ioctls by name.
    ctl: OwnedFd,
}

impl Shared {
    /// Index of the interface that bears the name now, in its namespace (one `ioctl`).
    fn lookup(&self) -> Option<u32> {
        crate::netns::ifindex(self.ctl.as_fd(), &self.ifname)
            .ok()
            .and_then(|i| u32::try_from(i).ok())
            .filter(|&i| i > 0)
    }

    /// Brings the attachment in line with the interface (slow path, taken by a queue whose
    /// socket failed or whose interface changed): when the instance the program is attached
    /// to is gone, the attachment is released and the generation bumped; when an interface
    /// of that name exists, the program is attached to it (inside the namespace, at most
    /// every [`RECHECK`] while that fails) and the generation bumped. Returns the generation,
    /// the interface index sockets are to be bound to (0: none) and the mode.
    fn refresh(&self) -> (u64, u32, AttachMode) {
        let mut st = lock(&self.state);
        if st.closed {
            return (st.generation, 0, st.mode);
        }
        let cur = self.lookup();
        if cur == Some(st.ifindex) {
            return (st.generation, st.ifindex, st.mode);
        }
        if st.ifindex != 0 {
            // Released first: a new link cannot be made while the old one holds the program
            // (and a netlink attachment is detached from the old index, which is gone).
            st.attachment = None;
            st.ifindex = 0;
            st.generation += 1;
            // The sockets of the old instance receive nothing any more.
            for q in 0..self.opts.n_rxq as u32 {
                let _ = self.map.remove(q);
            }
        }
        let now = Instant::now();
        if let Some(i) = cur
            && now >= st.next_try
        {
            let xdp_mode = self.opts.xdp_mode;
            let attached = crate::netns::run_in_opt(self.opts.netns.as_deref(), || {
                Ok(attach_mode(&self.prog, i, &self.ifname, xdp_mode))
            });
            match attached {
                Ok(Ok((a, mode))) => {
                    st.attachment = Some(a);
                    st.mode = mode;
                    st.ifindex = i;
                    st.generation += 1;
                }
                _ => st.next_try = now + RECHECK,
            }
        }
        (st.generation, st.ifindex, st.mode)
    }
}

/// One socket of the port (queue id `qid`), rebuilt when its interface comes back. Its tx
/// side is locked once per burst by the tx queues using it; the rest only on the slow path.
struct Slot {
    qid: u32,
    /// An rx queue's socket (with an rx ring, in the map); else a tx-only one.
    rx: bool,
    /// Held while the socket is (re)built, before `state`: one builder at a time.
    build: Mutex<()>,
    state: Mutex<SlotState>,
}

struct SlotState {
    /// The attachment generation the socket is (to be) built for.
    generation: u64,
    /// Bumped whenever the socket is replaced or lost: the rx queue then drops its rx side
    /// and takes the new one.
    epoch: u64,
    /// Where the socket is bound; 0 while there is none.
    ifindex: u32,
    xsk: Option<Arc<Xsk>>,
    tx: Option<TxSide>,
    /// The rx side of the socket, until the rx queue takes it.
    rx: Option<RxSide>,
    /// Whether the last socket got zero-copy.
    zero_copy: bool,
    /// Counters of the queues using the socket: each counts an error when it is lost.
    users: Vec<Arc<QueueStats>>,
    /// Kernel counters of the sockets closed so far.
    retired: XdpStatistics,
}

impl SlotState {
    fn new(generation: u64) -> SlotState {
        SlotState {
            generation,
            epoch: 0,
            ifindex: 0,
            xsk: None,
            tx: None,
            rx: None,
            zero_copy: false,
            users: Vec::new(),
            retired: XdpStatistics::default(),
        }
    }

    fn install(&mut self, ifindex: u32, (xsk, rx, tx): (Arc<Xsk>, Option<RxSide>, TxSide)) {
        self.zero_copy = xsk.zero_copy;
        self.xsk = Some(xsk);
        self.tx = Some(tx);
        self.rx = rx;
        self.ifindex = ifindex;
        self.epoch += 1;
    }

    /// The socket's interface is gone: takes it out of the map, keeps its kernel counters,
    /// lets go of it (it closes when the rx queue drops its rx side too) and counts an error
    /// on every queue that used it. Nothing when there is no socket.
    fn lose(&mut self, map: &XskMap, slot: &Slot) {
        let Some(xsk) = self.xsk.take() else {
            return;
        };
        if slot.rx {
            let _ = map.remove(slot.qid);
        }
        if let Some(k) = xsk.stats() {
            let r = &mut self.retired;
            r.rx_dropped += k.rx_dropped;
            r.rx_invalid_descs += k.rx_invalid_descs;
            r.tx_invalid_descs += k.tx_invalid_descs;
            r.rx_ring_full += k.rx_ring_full;
            r.rx_fill_ring_empty_descs += k.rx_fill_ring_empty_descs;
            r.tx_ring_empty_descs += k.tx_ring_empty_descs;
        }
        self.tx = None;
        self.rx = None;
        self.ifindex = 0;
        self.epoch += 1;
        for u in &self.users {
            u.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Slot {
    /// Creates and binds this slot's socket on `ifindex` (inside the namespace) and, for an
    /// rx socket, puts it in the map.
    fn make(
        &self,
        shared: &Shared,
        ifindex: u32,
        mode: AttachMode,
    ) -> Result<(Arc<Xsk>, Option<RxSide>, TxSide), Fail> {
        let o = &shared.opts;
        let half = o.n_frames / 2;
        let cfg = XskConfig {
            ifindex,
            qid: self.qid,
            rx_frames: if self.rx { half } else { 0 },
            tx_frames: if self.rx { o.n_frames - half } else { half },
            frame_size: o.frame_size,
            ring_size: o.ring_size,
            rx: self.rx,
            zero_copy: false,
        };
        let zc = if self.rx { o.zero_copy } else { ZeroCopy::Off };
        let made =
            crate::netns::run_in_opt(o.netns.as_deref(), || Ok(create_xsk_in_mode(cfg, zc, mode)))
                .map_err(|e| Fail::io("network namespace", &e))??;
        if self.rx {
            shared
                .map
                .set(made.0.qid, made.0.fd.as_raw_fd())
                .map_err(|e| Fail::bpf(&e, ""))?;
        }
        Ok(made)
    }

    /// Brings the socket to generation `generation` (from [`Shared::refresh`]): a socket of an older
    /// generation is lost; with an interface (`ifindex` not 0) and no socket, a new one is
    /// built. A failed build is tried again at the next call.
    fn sync(&self, shared: &Shared, generation: u64, ifindex: u32, mode: AttachMode) {
        let _build = lock(&self.build);
        {
            let mut st = lock(&self.state);
            if generation < st.generation {
                // A view older than another queue's: that queue has done the work.
                return;
            }
            if generation > st.generation {
                st.lose(&shared.map, self);
                st.generation = generation;
            }
            if st.xsk.is_some() || ifindex == 0 {
                return;
            }
        }
        // Built without the state lock, so that the tx queues are not held up meanwhile
        // (they find no tx side and drop); `build` keeps other builders out.
        if let Ok(made) = self.make(shared, ifindex, mode) {
            lock(&self.state).install(ifindex, made);
        }
    }
}

/// An rx queue: the rx side of its slot's socket, checked on every ~100 ms.
struct AfXdpRxq {
    side: Option<RxSide>,
    slot: Arc<Slot>,
    shared: Arc<Shared>,
    in_port: u32,
    stats: Arc<QueueStats>,
    /// The slot's epoch `side` belongs to.
    epoch: u64,
    /// Where `side`'s socket is bound; 0 without one.
    ifindex: u32,
    polls: u32,
    next_check: Instant,
}

impl AfXdpRxq {
    /// Every ~100 ms: checks that the interface bearing the name is still the one the socket
    /// is bound to (one `ioctl`); if not (or with no socket), re-attaches and rebuilds the
    /// socket when the interface is back. Then takes the slot's new rx side, if any (the
    /// socket may also have been rebuilt by a tx queue).
    #[cold]
    fn housekeep(&mut self) {
        if !due(&mut self.next_check) {
            return;
        }
        if self.side.is_none() || self.shared.lookup() != Some(self.ifindex) {
            let (generation, ifindex, mode) = self.shared.refresh();
            self.slot.sync(&self.shared, generation, ifindex, mode);
        }
        let mut st = lock(&self.slot.state);
        if st.epoch != self.epoch {
            self.epoch = st.epoch;
            self.side = st.rx.take().map(|mut s| {
                s.in_port = self.in_port;
                s.stats = self.stats.clone();
                s
            });
            self.ifindex = if self.side.is_some() { st.ifindex } else { 0 };
        }
    }
}

impl RxQueue for AfXdpRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(POLLS_PER_CLOCK) {
            self.housekeep();
        }
        match &mut self.side {
            Some(s) => s.recv(pool, batch),
            None => 0,
        }
    }
}

// ---- the port ------------------------------------------------------------------------------

/// What one socket of a port ended up as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueMode {
    /// Queue id the socket is bound to.
    pub queue_id: u32,
    /// Where the program runs (the same for every socket of a port).
    pub xdp_mode: AttachMode,
    /// Zero-copy (else copy).
    pub zero_copy: bool,
    /// An rx queue's socket (else a tx-only socket).
    pub rx: bool,
}

/// A port on a kernel interface through AF_XDP sockets.
pub struct AfXdpPort {
    shared: Arc<Shared>,
    name: String,
    /// The rx queues' sockets (queue ids `0..n_rxq`), then the tx-only ones.
    slots: Vec<Arc<Slot>>,
    /// Per slot: a token each tx queue on it holds (the count says how many use it).
    tx_users: Vec<Arc<()>>,
    rx_taken: Vec<bool>,
    rx_stats: Vec<Arc<QueueStats>>,
    tx_stats: Vec<Arc<QueueStats>>,
    n_txq: usize,
    /// Whether a tx-only socket on the next queue id may still be possible.
    extra_ok: bool,
}

/// What the namespace thread builds.
struct Opened {
    attachment: XdpAttachment,
    map: XskMap,
    prog: XdpProgram,
    ifindex: u32,
    mode: AttachMode,
    rx: Vec<(Arc<Xsk>, RxSide, TxSide)>,
    ctl: OwnedFd,
}

fn mode_name(m: AttachMode) -> &'static str {
    match m {
        AttachMode::Native => "native",
        AttachMode::Generic => "generic",
    }
}

/// Attaches `prog` in `mode`, replacing a program of ours left over by a crashed run.
fn attach_replacing(
    prog: &XdpProgram,
    ifindex: u32,
    ifname: &str,
    mode: AttachMode,
) -> Result<XdpAttachment, Fail> {
    let mut replaced = false;
    loop {
        match bpf::attach(prog, ifindex, mode) {
            Ok(a) => return Ok(a),
            Err(e) if !replaced && matches!(e.errno(), Some(libc::EBUSY | libc::EEXIST)) => {
                let Ok(Some((id, old_mode))) = bpf::attached_program(ifindex) else {
                    return Err(Fail::bpf(&e, FALLBACK_HINT));
                };
                let name = bpf::program_name(id).unwrap_or_default();
                if name != bpf::PROG_NAME {
                    return Err(Fail {
                        msg: format!(
                            "another XDP program ('{name}', id {id}, {} mode) is attached to \
                             {ifname}; remove it with `ip link set dev {ifname} {} off` if it \
                             is not in use",
                            mode_name(old_mode),
                            if old_mode == AttachMode::Native {
                                "xdpdrv"
                            } else {
                                "xdpgeneric"
                            },
                        ),
                        errno: e.errno(),
                        unsupported: false,
                    });
                }
                // Ours: attached with netlink by a run that crashed (a link would have gone
                // with its process). Detach it and try again. If a live process holds it
                // through a link, netlink cannot detach it: say so.
                if let Err(d) = bpf::detach_netlink(ifindex, old_mode) {
                    return Err(Fail {
                        msg: format!(
                            "{ifname} already has flowpath's XDP program (id {id}) attached and \
                             it could not be detached ({d}): is another switch using it?"
                        ),
                        errno: d.errno(),
                        unsupported: false,
                    });
                }
                replaced = true;
            }
            Err(e) => return Err(Fail::bpf(&e, "")),
        }
    }
}

/// Attaches `prog` to `ifindex` as `xdp_mode` asks (`best`: native, else generic); returns the
/// attachment and the mode it got.
fn attach_mode(
    prog: &XdpProgram,
    ifindex: u32,
    ifname: &str,
    xdp_mode: XdpMode,
) -> Result<(XdpAttachment, AttachMode), Fail> {
    let enospc = |mut f: Fail| {
        if f.errno == Some(libc::ENOSPC) {
            f.msg.push_str(
                " (veth: native XDP needs at least as many rx queues on this end as the peer \
                 has tx queues; see `ethtool -l`, `ethtool -L IF rx N`)",
            );
        }
        f
    };
    let attach = |mode| attach_replacing(prog, ifindex, ifname, mode).map_err(enospc);
    let in_mode = |mode, hint: &str, f: Fail| Fail {
        msg: format!(
            "cannot attach XDP in {} mode to {ifname}: {}{hint}",
            mode_name(mode),
            f.msg
        ),
        ..f
    };
    Ok(match xdp_mode {
        XdpMode::Native => (
            attach(AttachMode::Native)
                .map_err(|f| in_mode(AttachMode::Native, FALLBACK_HINT, f))?,
            AttachMode::Native,
        ),
        XdpMode::Generic => (
            attach(AttachMode::Generic)
                .map_err(|f| in_mode(AttachMode::Generic, AFPACKET_HINT, f))?,
            AttachMode::Generic,
        ),
        XdpMode::Best => match attach(AttachMode::Native) {
            Ok(a) => (a, AttachMode::Native),
            Err(native) => match attach(AttachMode::Generic) {
                Ok(a) => (a, AttachMode::Generic),
                Err(f) => {
                    return Err(Fail {
                        msg: format!(
                            "cannot attach XDP to {ifname}: native mode: {}; generic mode: \
                             {}{AFPACKET_HINT}",
                            native.msg, f.msg
                        ),
                        ..f
                    });
                }
            },
        },
    })
}

/// [`create_xsk`] with zero-copy as `zero_copy` asks, the program running in `mode`: `auto`
/// tries zero-copy in native mode and falls back to copy.
fn create_xsk_in_mode(
    mut cfg: XskConfig,
    zero_copy: ZeroCopy,
    mode: AttachMode,
) -> Result<(Arc<Xsk>, Option<RxSide>, TxSide), Fail> {
    let try_zc = match zero_copy {
        ZeroCopy::On => true,
        ZeroCopy::Auto => mode == AttachMode::Native,
        ZeroCopy::Off => false,
    };
    if !try_zc {
        cfg.zero_copy = false;
        return create_xsk(&cfg);
    }
    cfg.zero_copy = true;
    match create_xsk(&cfg) {
        Ok(x) => Ok(x),
        Err(f) if zero_copy == ZeroCopy::On => Err(f),
        Err(_) => {
            // A fresh socket: a failed bind leaves the old one unusable.
            cfg.zero_copy = false;
            create_xsk(&cfg)
        }
    }
}

fn open_in_ns(ifname: &str, o: &AfXdpOptions) -> Result<Opened, Fail> {
    let ctl = crate::netns::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
        .map_err(|e| Fail::io("control socket", &e))?;
    let ifindex = crate::netns::ifindex(ctl.as_fd(), ifname)
        .map(|i| i as u32)
        .map_err(|e| {
            Fail::io(
                match &o.netns {
                    Some(ns) => format!("no interface '{ifname}' in network namespace '{ns}'"),
                    None => format!("no interface '{ifname}'"),
                },
                &e,
            )
        })?;
    let map = XskMap::create(o.n_rxq as u32).map_err(|e| {
        let mut f = Fail::bpf(&e, "");
        if matches!(e.errno(), Some(libc::EPERM | libc::EINVAL | libc::ENOSYS)) {
            f.msg.push_str(
                " (bpf() not permitted or no XSKMAP in this kernel: run as root, or use a port \
                 of type=afpacket)",
            );
            f.unsupported = true;
        }
        f
    })?;
    let prog = XdpProgram::load_redirect(&map).map_err(|e| {
        let mut f = Fail::bpf(&e, AFPACKET_HINT);
        f.unsupported |= e.errno() == Some(libc::EPERM);
        f
    })?;
    // Declared before the attachment so that, on an error below (a queue that cannot bind),
    // the program is detached before the sockets already bound close, as `AfXdpPort::drop`
    // does; then the program and the map go. Everything made here is owned by a local.
    let mut rx = Vec::with_capacity(o.n_rxq);
    let (attachment, mode) = attach_mode(&prog, ifindex, ifname, o.xdp_mode)?;
    let half = o.n_frames / 2;
    for q in 0..o.n_rxq as u32 {
        let cfg = XskConfig {
            ifindex,
            qid: q,
            rx_frames: half,
            tx_frames: o.n_frames - half,
            frame_size: o.frame_size,
            ring_size: o.ring_size,
            rx: true,
            zero_copy: false,
        };
        let (xsk, rxs, txs) = create_xsk_in_mode(cfg, o.zero_copy, mode)?;
        map.set(q, xsk.fd.as_raw_fd())
            .map_err(|e| Fail::bpf(&e, ""))?;
        let rxs = rxs.ok_or_else(|| Fail::msg("internal: rx socket without rx ring"))?;
        rx.push((xsk, rxs, txs));
    }
    Ok(Opened {
        attachment,
        map,
        prog,
        ifindex,
        mode,
        rx,
        ctl,
    })
}

impl AfXdpPort {
    /// Opens port `name` on interface `opts.ifname` (default `name`): loads and attaches the
    /// redirect program and binds one socket per rx queue.
    pub fn open(name: &str, opts: &AfXdpOptions) -> Result<AfXdpPort, AfXdpError> {
        let err = |f: Fail| AfXdpError {
            port: name.to_owned(),
            msg: f.msg,
            errno: f.errno,
            unsupported: f.unsupported,
        };
        opts.validate().map_err(|msg| err(Fail::msg(msg)))?;
        let ifname = opts.ifname.clone().unwrap_or_else(|| name.to_owned());
        let opened =
            crate::netns::run_in_opt(opts.netns.as_deref(), || Ok(open_in_ns(&ifname, opts)))
                .map_err(|e| err(Fail::io("network namespace", &e)))?
                .map_err(err)?;
        let Opened {
            attachment,
            map,
            prog,
            ifindex,
            mode,
            rx,
            ctl,
        } = opened;
        let generation = 1;
        let shared = Arc::new(Shared {
            state: Mutex::new(AttachState {
                attachment: Some(attachment),
                ifindex,
                generation,
                mode,
                closed: false,
                next_try: Instant::now(),
            }),
            map,
            prog,
            ifname,
            opts: opts.clone(),
            ctl,
        });
        let mut port = AfXdpPort {
            shared,
            name: name.to_owned(),
            slots: Vec::new(),
            tx_users: Vec::new(),
            rx_taken: Vec::new(),
            rx_stats: Vec::new(),
            tx_stats: Vec::new(),
            n_txq: 0,
            extra_ok: true,
        };
        for (xsk, rxs, txs) in rx {
            let stats = QueueStats::shared();
            let mut st = SlotState::new(generation);
            st.users.push(stats.clone());
            let qid = xsk.qid;
            st.install(ifindex, (xsk, Some(rxs), txs));
            port.slots.push(Arc::new(Slot {
                qid,
                rx: true,
                build: Mutex::new(()),
                state: Mutex::new(st),
            }));
            port.tx_users.push(Arc::new(()));
            port.rx_taken.push(false);
            port.rx_stats.push(stats);
        }
        Ok(port)
    }

    /// Mode of each socket: the rx queues' in queue order, then any tx-only ones.
    pub fn queue_modes(&self) -> Vec<QueueMode> {
        let xdp_mode = self.xdp_mode();
        self.slots
            .iter()
            .map(|s| QueueMode {
                queue_id: s.qid,
                xdp_mode,
                zero_copy: lock(&s.state).zero_copy,
                rx: s.rx,
            })
            .collect()
    }

    /// Where the program runs.
    pub fn xdp_mode(&self) -> AttachMode {
        lock(&self.shared.state).mode
    }

    /// Whether the program is attached through a BPF link (else netlink).
    pub fn attached_with_link(&self) -> bool {
        lock(&self.shared.state)
            .attachment
            .as_ref()
            .is_some_and(XdpAttachment::is_link)
    }

    /// The interface's name and the index of the instance the program is attached to (in
    /// its namespace; 0 while the interface is gone).
    pub fn interface(&self) -> (&str, u32) {
        (&self.shared.ifname, lock(&self.shared.state).ifindex)
    }

    /// Whether the interface exists (by name, in its namespace), is up and has carrier, and
    /// the program and every socket of the port are on that instance of it.
    pub fn link_up(&self) -> bool {
        let sh = &self.shared;
        let Some(i) = sh.lookup() else {
            return false;
        };
        if !crate::netns::is_running(sh.ctl.as_fd(), &sh.ifname) {
            return false;
        }
        {
            let st = lock(&sh.state);
            if st.ifindex != i || st.attachment.is_none() {
                return false;
            }
        }
        self.slots.iter().all(|s| lock(&s.state).ifindex == i)
    }

    /// The kernel's counters of each socket, in [`AfXdpPort::queue_modes`] order (zero for a
    /// socket lost with its interface and not rebuilt yet).
    pub fn kernel_stats(&self) -> Vec<XdpStatistics> {
        self.slots
            .iter()
            .map(|s| {
                let xsk = lock(&s.state).xsk.clone();
                xsk.and_then(|x| x.stats()).unwrap_or_default()
            })
            .collect()
    }

    /// Opens a tx-only socket on the next unused queue id, if the device has it.
    fn extra_tx_slot(&mut self) -> Option<usize> {
        if !self.extra_ok {
            return None;
        }
        let (generation, ifindex, mode) = {
            let st = lock(&self.shared.state);
            (st.generation, st.ifindex, st.mode)
        };
        if ifindex == 0 {
            // The interface is gone: share a tx side for now.
            return None;
        }
        let slot = Slot {
            qid: self.slots.len() as u32,
            rx: false,
            build: Mutex::new(()),
            state: Mutex::new(SlotState::new(generation)),
        };
        match slot.make(&self.shared, ifindex, mode) {
            Ok(made) => {
                lock(&slot.state).install(ifindex, made);
                self.slots.push(Arc::new(slot));
                self.tx_users.push(Arc::new(()));
                Some(self.slots.len() - 1)
            }
            Err(_) => {
                self.extra_ok = false;
                None
            }
        }
    }
}

impl Drop for AfXdpPort {
    fn drop(&mut self) {
        // Detach first, so that nothing is redirected to sockets about to close; the queues
        // that live on do not re-attach.
        {
            let mut st = lock(&self.shared.state);
            st.closed = true;
            drop(st.attachment.take());
        }
        for s in self.slots.iter().filter(|s| s.rx) {
            let _ = self.shared.map.remove(s.qid);
        }
    }
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "afxdp"
    }

    fn options(&self) -> String {
        let d = AfXdpOptions::default();
        let o = &self.shared.opts;
        let ifname = &self.shared.ifname;
        let mut parts = Vec::new();
        if *ifname != self.name {
            parts.push(format!("ifname={ifname}"));
        }
        if let Some(ns) = &o.netns {
            parts.push(format!("netns={ns}"));
        }
        if o.n_rxq != d.n_rxq {
            parts.push(format!("n_rxq={}", o.n_rxq));
        }
        if o.n_frames != d.n_frames {
            parts.push(format!("n_frames={}", o.n_frames));
        }
        if o.frame_size != d.frame_size {
            parts.push(format!("frame_size={}", o.frame_size));
        }
        if o.ring_size != d.ring_size {
            parts.push(format!("ring_size={}", o.ring_size));
        }
        parts.push(format!("xdp_mode={}", mode_name(self.xdp_mode())));
        let rx_slots = self.slots.iter().filter(|s| s.rx);
        let n = rx_slots.clone().count();
        let zc = rx_slots.filter(|s| lock(&s.state).zero_copy).count();
        parts.push(
            if zc == 0 {
                "copy"
            } else if zc == n {
                "zero-copy"
            } else {
                "zero-copy/copy"
            }
            .to_owned(),
        );
        format!("{{{}}}", parts.join(", "))
    }

    fn n_rxq(&self) -> usize {
        self.rx_taken.len()
    }

    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        if std::mem::replace(self.rx_taken.get_mut(q)?, true) {
            return None;
        }
        let slot = self.slots[q].clone();
        let stats = self.rx_stats[q].clone();
        let (side, epoch, ifindex) = {
            let mut st = lock(&slot.state);
            (st.rx.take(), st.epoch, st.ifindex)
        };
        let side = side.map(|mut s| {
            s.in_port = in_port;
            s.stats = stats.clone();
            s
        });
        Some(Box::new(AfXdpRxq {
            ifindex: if side.is_some() { ifindex } else { 0 },
            side,
            slot,
            shared: self.shared.clone(),
            in_port,
            stats,
            epoch,
            polls: 0,
            next_check: Instant::now() + RECHECK,
        }))
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        let k = self.n_txq;
        self.n_txq += 1;
        // A tx side nobody uses yet (rx sockets' first, then tx-only ones opened earlier),
        // else a new tx-only socket, else the least used one.
        let unused = self.tx_users.iter().position(|u| Arc::strong_count(u) == 1);
        let slot = unused.or_else(|| self.extra_tx_slot()).unwrap_or_else(|| {
            (0..self.slots.len())
                .min_by_key(|&i| (Arc::strong_count(&self.tx_users[i]), i))
                .unwrap_or(k % self.slots.len().max(1))
        });
        let stats = QueueStats::shared();
        self.tx_stats.push(stats.clone());
        lock(&self.slots[slot].state).users.push(stats.clone());
        Box::new(AfXdpTxq {
            slot: self.slots[slot].clone(),
            shared: self.shared.clone(),
            _user: self.tx_users[slot].clone(),
            stats,
            pending: false,
            retry_at: Instant::now(),
        })
    }

    fn counters(&self) -> PortCounters {
        let mut c = datapath::port::sum_queues(&self.rx_stats, &self.tx_stats);
        // Drops the kernel counted on the sockets (the live ones and those lost with their
        // interface): rx ring full, no fill frame, bad descriptors.
        for s in &self.slots {
            let (xsk, retired) = {
                let st = lock(&s.state);
                (st.xsk.clone(), st.retired)
            };
            let live = xsk.and_then(|x| x.stats()).unwrap_or_default();
            for k in [live, retired] {
                c.rx_dropped += k.rx_dropped + k.rx_ring_full + k.rx_invalid_descs;
                c.tx_dropped += k.tx_invalid_descs;
            }
        }
        c
    }

    fn queue_counters(&self) -> Vec<(String, PortCounters)> {
        datapath::port::queue_rows(&self.rx_stats, &self.tx_stats)
    }

    fn link_up(&self) -> bool {
        AfXdpPort::link_up(self)
    }
}

#[cfg(test)]
mod tests {
    //! The rings against a "kernel" played by the test: anonymous mappings laid out as the
    //! kernel lays out its rings, with indexes and descriptors written here, including ones no
    //! correct kernel writes.

    use super::*;

    const FS: u32 = 2048;
    const OFF: RingOffset = RingOffset {
        producer: 0,
        consumer: 64,
        flags: 128,
        desc: 192,
    };

    fn fake_ring<T: Copy>(size: u32) -> (Mmap, Ring<T>) {
        let map = Mmap::map(192 + size as usize * std::mem::size_of::<T>(), -1, 0).unwrap();
        // SAFETY: the test plays the kernel's part on this mapping, which outlives the ring
        // (both end up in the same `Xsk`).
        let ring = unsafe { Ring::new(&map, &OFF, size) }.unwrap();
        (map, ring)
    }

    /// Stores the kernel's index `p` (a ring's producer or consumer pointer).
    fn kernel_store(p: *const AtomicU32, v: u32) {
        // SAFETY: `p` points into a live fake ring mapping.
        unsafe { (*p).store(v, Ordering::Release) };
    }

    fn kernel_load(p: *const AtomicU32) -> u32 {
        // SAFETY: as above.
        unsafe { (*p).load(Ordering::Acquire) }
    }

    /// An `Xsk` over `/dev/null` (never woken: the fake rings never ask for it) with a UMEM of
    /// `rx_frames` then `tx_frames` frames.
    fn fake_xsk(rx_frames: u32, tx_frames: u32, rings: Vec<Mmap>) -> Arc<Xsk> {
        Arc::new(Xsk {
            fd: std::fs::File::open("/dev/null").unwrap().into(),
            umem: Mmap::map(((rx_frames + tx_frames) * FS) as usize, -1, 0).unwrap(),
            _rings: rings,
            qid: 0,
            zero_copy: false,
        })
    }

    #[test]
    fn empty_netns_means_none() {
        let mut o = AfXdpOptions::default();
        o.set("netns", "ns1").unwrap();
        assert_eq!(o.netns.as_deref(), Some("ns1"));
        o.set("netns", "").unwrap();
        assert_eq!(o.netns, None);
    }

    #[test]
    fn ring_offsets_are_checked() {
        let map = Mmap::map(4096, -1, 0).unwrap();
        for off in [
            RingOffset { desc: 4096, ..OFF },
            RingOffset {
                producer: 4094,
                ..OFF
            },
            RingOffset { consumer: 2, ..OFF },
            RingOffset { desc: 196, ..OFF },
            RingOffset {
                flags: u64::MAX - 1,
                ..OFF
            },
        ] {
            // SAFETY: rejected before any pointer is made.
            assert!(unsafe { Ring::<XdpDesc>::new(&map, &off, 64) }.is_err());
        }
        // SAFETY: as above.
        assert!(unsafe { Ring::<XdpDesc>::new(&map, &OFF, 48) }.is_err());
        // 192 + 16 * 256 > 4096.
        // SAFETY: as above.
        assert!(unsafe { Ring::<XdpDesc>::new(&map, &OFF, 256) }.is_err());
        // SAFETY: a fake ring inside the mapping.
        assert!(unsafe { Ring::<XdpDesc>::new(&map, &OFF, 128) }.is_ok());
    }

    #[test]
    fn bad_rx_descriptors_are_counted_and_never_recycled_outside_rx_frames() {
        let (rx_map, mut rx) = fake_ring::<XdpDesc>(8);
        let (fill_map, fill) = fake_ring::<u64>(8);
        let (rx_prod, fill_prod) = (rx.producer, fill.producer);
        let xsk = fake_xsk(4, 4, vec![rx_map, fill_map]);
        let rx_end = u64::from(4 * FS);
        let good = XdpDesc {
            addr: 256,
            len: 60,
            options: 0,
        };
        // SAFETY: writes the first 60 bytes of data of rx frame 0 (inside the UMEM).
        unsafe { std::ptr::write_bytes(xsk.umem.ptr.add(256), 0xab, 60) };
        let descs = [
            good,
            // A tx frame.
            XdpDesc {
                addr: rx_end,
                ..good
            },
            // Outside the UMEM.
            XdpDesc {
                addr: 1 << 40,
                ..good
            },
            // Crosses into the next frame.
            XdpDesc {
                addr: u64::from(FS) + 2000,
                len: 100,
                options: 0,
            },
            XdpDesc {
                addr: u64::from(2 * FS),
                len: 0,
                options: 0,
            },
            XdpDesc {
                addr: u64::from(3 * FS) + 256,
                len: u32::MAX,
                options: 0,
            },
        ];
        for (i, d) in descs.iter().enumerate() {
            rx.write(i as u32, *d);
        }
        kernel_store(rx_prod, descs.len() as u32);
        let mut side = RxSide {
            xsk,
            rx,
            fill,
            frame_size: u64::from(FS),
            rx_end,
            stash: Vec::with_capacity(4),
            in_port: 3,
            stats: QueueStats::shared(),
        };
        let (mut pool, mut batch) = (Pool::new(64, 0), Batch::new());
        assert_eq!(side.recv(&mut pool, &mut batch), 1);
        assert_eq!(batch.packets()[0].data(), &[0xab; 60]);
        let c = side.stats.snapshot();
        assert_eq!((c.rx_packets, c.rx_bytes, c.errors), (1, 60, 5));
        // The four rx frames went back to the fill ring; the tx frame and the address outside
        // the UMEM did not.
        assert_eq!(kernel_load(fill_prod), 4);
        let back: Vec<u64> = (0..4).map(|i| side.fill.read(i)).collect();
        assert_eq!(
            back,
            [0, u64::from(FS), u64::from(2 * FS), u64::from(3 * FS)]
        );
        pool.free_batch(&mut batch);

        // A producer index far ahead: at most a batch is read, nothing panics, and whatever
        // is recycled is an rx frame.
        kernel_store(rx_prod, 6 + 1_000_000);
        for _ in 0..4 {
            side.recv(&mut pool, &mut batch);
            pool.free_batch(&mut batch);
        }
        let prod = kernel_load(fill_prod);
        for i in 0..8 {
            assert!(side.fill.read(prod.wrapping_sub(i)) < rx_end);
        }
        assert!(side.stash.len() <= side.stash.capacity());
    }

    #[test]
    fn bad_completions_are_counted_and_never_reused() {
        let (tx_map, tx) = fake_ring::<XdpDesc>(4);
        let (comp_map, mut comp) = fake_ring::<u64>(4);
        let (tx_cons, comp_prod) = (tx.consumer, comp.producer);
        let xsk = fake_xsk(2, 2, vec![tx_map, comp_map]);
        let (start, end) = (u64::from(2 * FS), u64::from(4 * FS));
        let mut free = Vec::with_capacity(2);
        free.extend([start, start + u64::from(FS)]);
        let mut side = TxSide {
            xsk,
            tx,
            comp: {
                // The "kernel" completes: an rx frame, an address outside the UMEM, and a
                // tx frame twice (the free list is full already).
                for (i, a) in [0, 1 << 40, start, start + 10].into_iter().enumerate() {
                    comp.write(i as u32, a);
                }
                comp
            },
            free,
            frame_size: u64::from(FS),
            tx_start: start,
            tx_end: end,
            bad: 0,
        };
        kernel_store(comp_prod, 4);
        side.reap();
        assert_eq!(side.free, [start, start + u64::from(FS)]);
        assert_eq!(side.bad, 4);

        // Three packets, one too large for a frame; two frames, four slots. The fake tx ring
        // does not ask for a wakeup, so the kick makes no system call.
        let mut pool = Pool::new(8, 0);
        let mut batch = Batch::new();
        batch.push(pool.packet_from(&[1; 60], 0));
        batch.push(pool.packet_from(&[2; 3000], 0));
        batch.push(pool.packet_from(&[3; 70], 0));
        batch.push(pool.packet_from(&[4; 80], 0));
        let s = side.send(&batch);
        assert_eq!((s.packets, s.bytes, s.dropped, s.errors), (2, 130, 2, 4));
        assert!(!s.pending, "no wakeup asked: nothing to kick again");
        assert_eq!(side.tx.outstanding(), 2);
        assert!(side.free.is_empty());

        // A consumer index ahead of the producer (nonsense): no room, no panic.
        kernel_store(tx_cons, 1_000);
        let s = side.send(&batch);
        assert_eq!((s.packets, s.dropped), (0, 4));
        pool.free_batch(&mut batch);
    }
}
