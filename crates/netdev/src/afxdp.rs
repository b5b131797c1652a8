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
//!   datapath owns its buffers) and gives the frame straight back to the fill ring.
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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use datapath::packet::{Batch, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};

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
    /// Network namespace the interface lives in (`netns=NAME` for `/run/netns/NAME`).
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
            "netns" => self.netns = Some(value.to_owned()),
            _ => {
                return Err(format!(
                    "unknown afxdp option '{key}' (ifname, n_rxq, xdp_mode, zero_copy, \
                     n_frames, frame_size, ring_size, netns)"
                ));
            }
        }
        Ok(())
    }

    fn validate(&self) -> Result<(), String> {
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
/// running `u32`s; the kernel's are read with acquire and ours published with release.
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
    /// The ring of `size` entries mapped at `map` with offsets `off`.
    ///
    /// # Safety
    /// `map` must be the kernel's mapping of this ring, laid out as `off` says and holding
    /// `size` entries of `T`; it must outlive the ring.
    unsafe fn new(map: &Mmap, off: &RingOffset, size: u32) -> Ring<T> {
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS for this mapping and lie inside it;
        // the kernel aligns the indexes (u32) and the descriptors (u64/xdp_desc).
        unsafe {
            let base = map.ptr;
            let producer = base.add(off.producer as usize) as *const AtomicU32;
            let consumer = base.add(off.consumer as usize) as *const AtomicU32;
            Ring {
                producer,
                consumer,
                flags: base.add(off.flags as usize) as *const AtomicU32,
                descs: base.add(off.desc as usize) as *mut T,
                mask: size - 1,
                size,
                cached_prod: (*producer).load(Ordering::Acquire),
                cached_cons: (*consumer).load(Ordering::Acquire),
            }
        }
    }

    fn flags(&self) -> u32 {
        // SAFETY: `flags` points into the live ring mapping (see `new`).
        unsafe { (*self.flags).load(Ordering::Relaxed) }
    }

    /// Consumer side: index of the first available entry and how many (at most `max`).
    #[inline]
    fn peek(&mut self, max: u32) -> (u32, u32) {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail < max {
            // SAFETY: `producer` points into the live ring mapping.
            self.cached_prod = unsafe { (*self.producer).load(Ordering::Acquire) };
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        (self.cached_cons, avail.min(max))
    }

    /// Consumer side: gives `n` entries back to the kernel.
    #[inline]
    fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        // SAFETY: `consumer` points into the live ring mapping.
        unsafe { (*self.consumer).store(self.cached_cons, Ordering::Release) };
    }

    /// Producer side: index of the first free entry and how many are free (at most `max`).
    #[inline]
    fn reserve(&mut self, max: u32) -> (u32, u32) {
        let mut free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        if free < max {
            // SAFETY: `consumer` points into the live ring mapping.
            self.cached_cons = unsafe { (*self.consumer).load(Ordering::Acquire) };
            free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        }
        (self.cached_prod, free.min(max))
    }

    /// Producer side: publishes `n` entries written after the producer index.
    #[inline]
    fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        // SAFETY: `producer` points into the live ring mapping.
        unsafe { (*self.producer).store(self.cached_prod, Ordering::Release) };
    }

    /// Producer side: entries published that the kernel has not consumed yet.
    fn outstanding(&mut self) -> u32 {
        // SAFETY: `consumer` points into the live ring mapping.
        self.cached_cons = unsafe { (*self.consumer).load(Ordering::Acquire) };
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    #[inline]
    fn read(&self, idx: u32) -> T {
        // SAFETY: `idx & mask` is below `size`, the number of entries in the mapping; the
        // entry is ours to read (between the consumer index and the producer index we read).
        unsafe { self.descs.add((idx & self.mask) as usize).read() }
    }

    #[inline]
    fn write(&mut self, idx: u32, v: T) {
        // SAFETY: `idx & mask` is below `size`; the entry is free (reserved, not yet
        // published), so the kernel does not read it concurrently.
        unsafe { self.descs.add((idx & self.mask) as usize).write(v) }
    }
}

// ---- sockets -------------------------------------------------------------------------------

/// An AF_XDP socket with its UMEM and ring mappings. Shared by its rx side, its tx side and
/// the port; closed when the last of them goes.
struct Xsk {
    fd: OwnedFd,
    umem: Mmap,
    _rings: Vec<Mmap>,
    qid: u32,
    zero_copy: bool,
}

impl Xsk {
    fn stats(&self) -> Option<XdpStatistics> {
        let mut s = XdpStatistics::default();
        let mut len = std::mem::size_of::<XdpStatistics>() as libc::socklen_t;
        // SAFETY: `s` is a writable `xdp_statistics` of the length passed.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                SOL_XDP,
                XDP_STATISTICS,
                &mut s as *mut XdpStatistics as *mut libc::c_void,
                &mut len,
            )
        };
        (r == 0).then_some(s)
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

fn getsockopt<T: Default>(fd: RawFd, opt: libc::c_int) -> io::Result<T> {
    let mut v = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is a writable value of the size passed.
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
        Ok(v)
    }
}

/// Creates, maps and binds one socket in the calling thread's namespace; returns it with its
/// rx side (when `cfg.rx`) and tx side.
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
    let n_frames = cfg.rx_frames + cfg.tx_frames;
    let umem_len = n_frames as usize * cfg.frame_size as usize;
    let umem = Mmap::map(umem_len, -1, 0)
        .map_err(|e| Fail::io(format!("mmap of a {umem_len}-byte UMEM"), &e))?;
    let reg = UmemReg {
        addr: umem.ptr as u64,
        len: umem_len as u64,
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
    let off: MmapOffsets =
        getsockopt(fdr, XDP_MMAP_OFFSETS).map_err(|e| ring_err("XDP_MMAP_OFFSETS", e))?;

    let desc = std::mem::size_of::<XdpDesc>();
    let map_ring = |o: &RingOffset, n: u32, esz: usize, pgoff: libc::off_t, what: &str| {
        Mmap::map(o.desc as usize + n as usize * esz, fdr, pgoff)
            .map_err(|e| ring_err(&format!("mmap of the {what} ring"), e))
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
    // Each mapping below is the kernel's ring of the size set above, laid out as
    // XDP_MMAP_OFFSETS says; the mappings move into `Xsk`, which both sides keep alive.
    // SAFETY: as just said, for the fill ring.
    let mut fill: Ring<u64> = unsafe { Ring::new(&fill_map, &off.fr, fill_size) };
    // SAFETY: as above.
    let comp: Ring<u64> = unsafe { Ring::new(&comp_map, &off.cr, comp_size) };
    // SAFETY: as above.
    let tx: Ring<XdpDesc> = unsafe { Ring::new(&tx_map, &off.tx, tx_size) };
    // SAFETY: as above.
    let rx: Option<Ring<XdpDesc>> = rx_map
        .as_ref()
        .map(|m| unsafe { Ring::new(m, &off.rx, rx_size) });

    // Every rx frame starts in the fill ring, which has room for all of them.
    if cfg.rx {
        let (idx, n) = fill.reserve(cfg.rx_frames);
        for i in 0..n {
            fill.write(
                idx.wrapping_add(i),
                u64::from(i) * u64::from(cfg.frame_size),
            );
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
    let opts: u32 = getsockopt(fdr, XDP_OPTIONS).unwrap_or(0);
    let mut rings = vec![fill_map, comp_map, tx_map];
    rings.extend(rx_map);
    let xsk = Arc::new(Xsk {
        fd,
        umem,
        _rings: rings,
        qid: q,
        zero_copy: opts & XDP_OPTIONS_ZEROCOPY != 0,
    });
    let chunk_mask = !(u64::from(cfg.frame_size) - 1);
    let rx_side = rx.map(|rx| RxSide {
        xsk: xsk.clone(),
        rx,
        fill,
        chunk_mask,
        stash: Vec::with_capacity(cfg.rx_frames as usize),
        in_port: 0,
        stats: QueueStats::shared(),
    });
    let first_tx = u64::from(cfg.rx_frames);
    let tx_side = TxSide {
        xsk: xsk.clone(),
        tx,
        comp,
        free: (0..u64::from(cfg.tx_frames))
            .rev()
            .map(|i| (first_tx + i) * u64::from(cfg.frame_size))
            .collect(),
        chunk_mask,
        frame_size: cfg.frame_size,
    };
    Ok((xsk, rx_side, tx_side))
}

// ---- rx ------------------------------------------------------------------------------------

struct RxSide {
    xsk: Arc<Xsk>,
    rx: Ring<XdpDesc>,
    fill: Ring<u64>,
    chunk_mask: u64,
    /// Frames received whose fill-ring slot was not free yet (never by construction: the fill
    /// ring has room for every rx frame; kept so that a frame can never be lost).
    stash: Vec<u64>,
    in_port: u32,
    stats: Arc<QueueStats>,
}

// SAFETY: the ring pointers point into mappings owned by `xsk`, which this value keeps alive;
// an rx side is used by one thread at a time (it is moved, never shared).
unsafe impl Send for RxSide {}

impl RxSide {
    fn wake(&self) {
        // SAFETY: a zero-length non-blocking receive on our socket: only a wakeup.
        unsafe {
            libc::recvfrom(
                self.xsk.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }
}

impl RxQueue for RxSide {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        if !self.stash.is_empty() {
            let (idx, k) = self.fill.reserve(self.stash.len() as u32);
            for i in 0..k {
                let a = self.stash.pop().unwrap_or(0);
                self.fill.write(idx.wrapping_add(i), a);
            }
            self.fill.submit(k);
        }
        let room = batch.room() as u32;
        if room == 0 {
            return 0;
        }
        let (idx, n) = self.rx.peek(room);
        if n == 0 {
            if self.fill.flags() & XDP_RING_NEED_WAKEUP != 0 {
                self.wake();
            }
            return 0;
        }
        let (fidx, fk) = self.fill.reserve(n);
        let umem = &self.xsk.umem;
        let (mut bytes, mut bad) = (0u64, 0u64);
        for i in 0..n {
            let d = self.rx.read(idx.wrapping_add(i));
            let (a, l) = (d.addr as usize, d.len as usize);
            if l > 0 && a.checked_add(l).is_some_and(|end| end <= umem.len) {
                // SAFETY: the frame lies inside the UMEM (checked) and is ours until its
                // address goes back to the fill ring below; the kernel does not write it.
                let frame = unsafe { std::slice::from_raw_parts(umem.ptr.add(a), l) };
                batch.push(pool.packet_from(frame, self.in_port));
                bytes += l as u64;
            } else {
                bad += 1;
            }
            let chunk = d.addr & self.chunk_mask;
            if i < fk {
                self.fill.write(fidx.wrapping_add(i), chunk);
            } else if chunk < umem.len as u64 {
                self.stash.push(chunk);
            }
        }
        self.rx.release(n);
        self.fill.submit(fk);
        let got = n - bad as u32;
        self.stats.add_rx(u64::from(got), bytes);
        if bad > 0 {
            self.stats.errors.fetch_add(bad, Ordering::Relaxed);
        }
        got as usize
    }
}

// ---- tx ------------------------------------------------------------------------------------

struct TxSide {
    xsk: Arc<Xsk>,
    tx: Ring<XdpDesc>,
    comp: Ring<u64>,
    /// Addresses of the tx frames not in flight.
    free: Vec<u64>,
    chunk_mask: u64,
    frame_size: u32,
}

// SAFETY: the ring pointers point into mappings owned by `xsk`, which this value keeps alive;
// a tx side is used under its mutex only.
unsafe impl Send for TxSide {}

/// How a kick ended.
enum Kick {
    /// The kernel took everything (or needs no kick).
    Done,
    /// Descriptors are left for a later kick (`EAGAIN`, `EBUSY`, `ENOBUFS`, link down).
    Pending,
    /// Another error.
    Error,
}

impl TxSide {
    /// Takes the completed frames back.
    fn reap(&mut self) {
        let (idx, n) = self.comp.peek(self.comp.size);
        for i in 0..n {
            let a = self.comp.read(idx.wrapping_add(i)) & self.chunk_mask;
            if self.free.len() < self.free.capacity() {
                self.free.push(a);
            }
        }
        self.comp.release(n);
    }

    /// Makes the kernel send what the tx ring holds.
    fn kick(&mut self) -> Kick {
        for _ in 0..8 {
            std::sync::atomic::fence(Ordering::SeqCst);
            if self.tx.flags() & XDP_RING_NEED_WAKEUP == 0 {
                return Kick::Done;
            }
            // SAFETY: a zero-length non-blocking send on our socket: only a wakeup.
            let r = unsafe {
                libc::sendto(
                    self.xsk.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r >= 0 {
                if self.tx.outstanding() == 0 {
                    return Kick::Done;
                }
                continue;
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN | libc::EBUSY) => {
                    // Copy mode sends one batch per call and says EAGAIN when more is left.
                    if self.tx.outstanding() == 0 {
                        return Kick::Done;
                    }
                    self.reap();
                }
                Some(libc::ENOBUFS | libc::ENETDOWN | libc::ENXIO) => return Kick::Pending,
                _ => return Kick::Error,
            }
        }
        if self.tx.outstanding() == 0 {
            Kick::Done
        } else {
            Kick::Pending
        }
    }

    /// Queues the packets of `batch` and kicks; returns (sent, bytes, dropped, pending, error).
    fn send(&mut self, batch: &Batch) -> (u64, u64, u64, bool, bool) {
        self.reap();
        let pkts = batch.packets();
        let want = pkts.len() as u32;
        let (mut idx, mut slots) = self.tx.reserve(want);
        let (mut n, mut bytes, mut dropped) = (0u32, 0u64, 0u64);
        let mut retried = false;
        for (i, p) in pkts.iter().enumerate() {
            let len = p.len();
            if len == 0 || len > self.frame_size as usize {
                dropped += 1;
                continue;
            }
            if (n == slots || self.free.is_empty()) && !retried {
                // Out of ring slots or frames: push out what is queued, take completions.
                retried = true;
                self.tx.submit(n);
                let _ = self.kick();
                self.reap();
                (idx, slots) = self.tx.reserve(want - i as u32);
                n = 0;
            }
            let Some(addr) = (n < slots).then(|| self.free.pop()).flatten() else {
                dropped += 1;
                continue;
            };
            let umem = &self.xsk.umem;
            debug_assert!(addr as usize + len <= umem.len);
            // SAFETY: `addr` is a free tx frame of `frame_size` bytes inside the UMEM (frames
            // on the free list are not in flight, so the kernel does not read them) and `len`
            // is at most `frame_size`.
            unsafe {
                std::ptr::copy_nonoverlapping(p.data().as_ptr(), umem.ptr.add(addr as usize), len)
            };
            self.tx.write(
                idx.wrapping_add(n),
                XdpDesc {
                    addr,
                    len: len as u32,
                    options: 0,
                },
            );
            n += 1;
            bytes += len as u64;
        }
        self.tx.submit(n);
        let sent = pkts.len() as u64 - dropped;
        let (pending, error) = match self.kick() {
            Kick::Done => (false, false),
            Kick::Pending => (true, false),
            Kick::Error => (true, true),
        };
        (sent, bytes, dropped, pending, error)
    }
}

struct AfXdpTxq {
    side: Arc<Mutex<TxSide>>,
    stats: Arc<QueueStats>,
    pending: bool,
}

impl TxQueue for AfXdpTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        if !batch.is_empty() {
            let (sent, bytes, dropped, pending, error) = {
                let mut s = self.side.lock().unwrap_or_else(|e| e.into_inner());
                s.send(batch)
            };
            self.pending = pending;
            self.stats.add_tx(sent, bytes);
            if dropped > 0 {
                self.stats.tx_dropped.fetch_add(dropped, Ordering::Relaxed);
            }
            if error {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        pool.free_batch(batch);
    }

    fn flush(&mut self) {
        if self.pending {
            let mut s = self.side.lock().unwrap_or_else(|e| e.into_inner());
            s.reap();
            self.pending = !matches!(s.kick(), Kick::Done);
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

struct TxSlot {
    side: Arc<Mutex<TxSide>>,
    xsk: Arc<Xsk>,
}

/// A port on a kernel interface through AF_XDP sockets.
pub struct AfXdpPort {
    // Declared first: dropped (detached) before everything else.
    attachment: Option<XdpAttachment>,
    map: XskMap,
    _prog: XdpProgram,
    name: String,
    ifname: String,
    ifindex: u32,
    opts: AfXdpOptions,
    mode: AttachMode,
    rxqs: Vec<Option<RxSide>>,
    rx_stats: Vec<Arc<QueueStats>>,
    rx_xsks: Vec<Arc<Xsk>>,
    tx_slots: Vec<TxSlot>,
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

fn open_in_ns(ifname: &str, o: &AfXdpOptions) -> Result<Opened, Fail> {
    let ifindex = bpf::ifindex(ifname).map_err(|e| {
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
        let mut f = Fail::bpf(&e, "; use a port of type=afpacket");
        f.unsupported |= e.errno() == Some(libc::EPERM);
        f
    })?;
    let enospc = |mut f: Fail| {
        if f.errno == Some(libc::ENOSPC) {
            f.msg.push_str(
                " (veth: native XDP needs at least as many rx queues on this end as the peer \
                 has tx queues; see `ethtool -l`, `ethtool -L IF rx N`)",
            );
        }
        f
    };
    let attach = |mode| attach_replacing(&prog, ifindex, ifname, mode).map_err(enospc);
    let (attachment, mode) = match o.xdp_mode {
        XdpMode::Native => (
            attach(AttachMode::Native).map_err(|mut f| {
                f.msg = format!(
                    "cannot attach XDP in native mode to {ifname}: {}{FALLBACK_HINT}",
                    f.msg
                );
                f
            })?,
            AttachMode::Native,
        ),
        XdpMode::Generic => (
            attach(AttachMode::Generic).map_err(|mut f| {
                f.msg = format!(
                    "cannot attach XDP in generic mode to {ifname}: {}; use a port of \
                     type=afpacket",
                    f.msg
                );
                f
            })?,
            AttachMode::Generic,
        ),
        XdpMode::Best => match attach(AttachMode::Native) {
            Ok(a) => (a, AttachMode::Native),
            Err(native) => match attach(AttachMode::Generic) {
                Ok(a) => (a, AttachMode::Generic),
                Err(mut f) => {
                    f.msg = format!(
                        "cannot attach XDP to {ifname}: native mode: {}; generic mode: {}; use a \
                         port of type=afpacket",
                        native.msg, f.msg
                    );
                    return Err(f);
                }
            },
        },
    };
    let half = o.n_frames / 2;
    let mut rx = Vec::with_capacity(o.n_rxq);
    for q in 0..o.n_rxq as u32 {
        let mut cfg = XskConfig {
            ifindex,
            qid: q,
            rx_frames: half,
            tx_frames: o.n_frames - half,
            frame_size: o.frame_size,
            ring_size: o.ring_size,
            rx: true,
            zero_copy: false,
        };
        let try_zc = match o.zero_copy {
            ZeroCopy::On => true,
            ZeroCopy::Auto => mode == AttachMode::Native,
            ZeroCopy::Off => false,
        };
        let made = if try_zc {
            cfg.zero_copy = true;
            match create_xsk(&cfg) {
                Ok(x) => Ok(x),
                Err(f) if o.zero_copy == ZeroCopy::On => Err(f),
                Err(_) => {
                    // A fresh socket: a failed bind leaves the old one unusable.
                    cfg.zero_copy = false;
                    create_xsk(&cfg)
                }
            }
        } else {
            create_xsk(&cfg)
        };
        let (xsk, rxs, txs) = made?;
        map.set(q, xsk.fd.as_raw_fd())
            .map_err(|e| Fail::bpf(&e, ""))?;
        let rxs = rxs.ok_or_else(|| Fail {
            msg: "internal: rx socket without rx ring".into(),
            errno: None,
            unsupported: false,
        })?;
        rx.push((xsk, rxs, txs));
    }
    Ok(Opened {
        attachment,
        map,
        prog,
        ifindex,
        mode,
        rx,
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
        opts.validate().map_err(|msg| {
            err(Fail {
                msg,
                errno: None,
                unsupported: false,
            })
        })?;
        let ifname = opts.ifname.clone().unwrap_or_else(|| name.to_owned());
        let opened =
            crate::netns::run_in_opt(opts.netns.as_deref(), || Ok(open_in_ns(&ifname, opts)))
                .map_err(|e| err(Fail::io("network namespace", &e)))?
                .map_err(err)?;
        let mut port = AfXdpPort {
            attachment: Some(opened.attachment),
            map: opened.map,
            _prog: opened.prog,
            name: name.to_owned(),
            ifname,
            ifindex: opened.ifindex,
            opts: opts.clone(),
            mode: opened.mode,
            rxqs: Vec::new(),
            rx_stats: Vec::new(),
            rx_xsks: Vec::new(),
            tx_slots: Vec::new(),
            tx_stats: Vec::new(),
            n_txq: 0,
            extra_ok: true,
        };
        for (xsk, rxs, txs) in opened.rx {
            port.rx_stats.push(rxs.stats.clone());
            port.rxqs.push(Some(rxs));
            port.rx_xsks.push(xsk.clone());
            port.tx_slots.push(TxSlot {
                side: Arc::new(Mutex::new(txs)),
                xsk,
            });
        }
        Ok(port)
    }

    /// Mode of each socket: the rx queues' in queue order, then any tx-only ones.
    pub fn queue_modes(&self) -> Vec<QueueMode> {
        self.tx_slots
            .iter()
            .enumerate()
            .map(|(i, s)| QueueMode {
                queue_id: s.xsk.qid,
                xdp_mode: self.mode,
                zero_copy: s.xsk.zero_copy,
                rx: i < self.rx_xsks.len(),
            })
            .collect()
    }

    /// Where the program runs.
    pub fn xdp_mode(&self) -> AttachMode {
        self.mode
    }

    /// Whether the program is attached through a BPF link (else netlink).
    pub fn attached_with_link(&self) -> bool {
        self.attachment.as_ref().is_some_and(XdpAttachment::is_link)
    }

    /// The interface's name and index (in its namespace).
    pub fn interface(&self) -> (&str, u32) {
        (&self.ifname, self.ifindex)
    }

    /// The kernel's counters of each socket, in [`AfXdpPort::queue_modes`] order.
    pub fn kernel_stats(&self) -> Vec<XdpStatistics> {
        self.tx_slots
            .iter()
            .map(|s| s.xsk.stats().unwrap_or_default())
            .collect()
    }

    /// Opens a tx-only socket on the next unused queue id, if the device has it.
    fn extra_tx_slot(&mut self) -> Option<usize> {
        if !self.extra_ok {
            return None;
        }
        let qid = self.tx_slots.len() as u32;
        let o = &self.opts;
        let cfg = XskConfig {
            ifindex: self.ifindex,
            qid,
            rx_frames: 0,
            tx_frames: o.n_frames / 2,
            frame_size: o.frame_size,
            ring_size: o.ring_size,
            rx: false,
            zero_copy: false,
        };
        let made = crate::netns::run_in_opt(o.netns.as_deref(), || Ok(create_xsk(&cfg).ok()));
        match made {
            Ok(Some((xsk, _, txs))) => {
                self.tx_slots.push(TxSlot {
                    side: Arc::new(Mutex::new(txs)),
                    xsk,
                });
                Some(self.tx_slots.len() - 1)
            }
            _ => {
                self.extra_ok = false;
                None
            }
        }
    }
}

impl Drop for AfXdpPort {
    fn drop(&mut self) {
        // Detach first, so that nothing is redirected to sockets about to close.
        drop(self.attachment.take());
        for x in &self.rx_xsks {
            let _ = self.map.remove(x.qid);
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
        let o = &self.opts;
        let mut parts = Vec::new();
        if self.ifname != self.name {
            parts.push(format!("ifname={}", self.ifname));
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
        parts.push(format!("xdp_mode={}", mode_name(self.mode)));
        let zc = self.rx_xsks.iter().filter(|x| x.zero_copy).count();
        parts.push(
            if zc == 0 {
                "copy"
            } else if zc == self.rx_xsks.len() {
                "zero-copy"
            } else {
                "zero-copy/copy"
            }
            .to_owned(),
        );
        format!("{{{}}}", parts.join(", "))
    }

    fn n_rxq(&self) -> usize {
        self.rxqs.len()
    }

    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        let mut rx = self.rxqs.get_mut(q)?.take()?;
        rx.in_port = in_port;
        Some(Box::new(rx))
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        let k = self.n_txq;
        self.n_txq += 1;
        // A tx side nobody uses yet (rx sockets' first, then tx-only ones opened earlier),
        // else a new tx-only socket, else the least used one.
        let unused = self
            .tx_slots
            .iter()
            .position(|s| Arc::strong_count(&s.side) == 1);
        let slot = unused.or_else(|| self.extra_tx_slot()).unwrap_or_else(|| {
            (0..self.tx_slots.len())
                .min_by_key(|&i| (Arc::strong_count(&self.tx_slots[i].side), i))
                .unwrap_or(k % self.tx_slots.len().max(1))
        });
        let stats = QueueStats::shared();
        self.tx_stats.push(stats.clone());
        Box::new(AfXdpTxq {
            side: self.tx_slots[slot].side.clone(),
            stats,
            pending: false,
        })
    }

    fn counters(&self) -> PortCounters {
        let mut c = PortCounters::default();
        for s in self.rx_stats.iter().chain(&self.tx_stats) {
            c += s.snapshot();
        }
        // Drops the kernel counted on the sockets: rx ring full, no fill frame, bad
        // descriptors.
        for k in self.kernel_stats() {
            c.rx_dropped += k.rx_dropped + k.rx_ring_full + k.rx_invalid_descs;
            c.tx_dropped += k.tx_invalid_descs;
        }
        c
    }
}
