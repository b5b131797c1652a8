//! `vhostuser` and `vhostuserclient` ports: a VM (QEMU's `-netdev vhost-user`) or a DPDK
//! application (`net_virtio_user`) attaches to the switch over a unix socket and the two
//! exchange frames through the guest's virtio-net split rings in shared memory.
//!
//! # Roles
//! flowpath is the vhost-user *back-end* (the device); the VM or application is the
//! front-end (the driver). Type `vhostuser` listens on the socket and the front-end connects;
//! type `vhostuserclient` connects to a socket the front-end serves (QEMU's `server=on`,
//! virtio_user's `server=1`) and, when there is none or the peer goes away, tries again every
//! [`RECONNECT`] until there is: either side can restart without the other.
//!
//! # Control and data
//! A control thread per port speaks the vhost-user protocol (rust-vmm's `vhost` crate decodes
//! the messages; this module's `Handler` acts on them): it maps the guest memory the
//! front-end shares (`SET_MEM_TABLE`, one `mmap` per region through `vm-memory`), learns each
//! vring's size, addresses, base and eventfds, and when a vring is complete and enabled it
//! builds a `virtio-queue` [`Queue`] on that memory and puts it in the vring's slot. Vring
//! `2k + 1` (the guest's transmit ring) is rx queue `k` of the port; vring `2k` (the guest's
//! receive ring) takes what the port's tx queues send.
//!
//! The PMD thread that owns a queue polls its ring with guest notifications suppressed
//! (`VRING_USED_F_NO_NOTIFY`: the guest never kicks); the call eventfd is written only after a
//! burst that used descriptors and only when the guest has not suppressed interrupts
//! (`VRING_AVAIL_F_NO_INTERRUPT`, which a polling DPDK driver sets). A slot is a mutex around
//! the ring, as DPDK's vhost library keeps an access lock per virtqueue: the data path holds
//! it for one burst (uncontended: the control thread takes it only to swap the ring in or out
//! when the front-end reconfigures it); an rx poll that finds it taken skips that poll rather
//! than wait. Memory regions are reference counted: they are unmapped when the last ring
//! built on them is dropped, never under a PMD.
//!
//! Frames: a received chain is the virtio-net header ([`crate::vnet`]) then the frame,
//! copied into a pool buffer; partial checksums are completed, TCP super-frames (with `tso`)
//! become one packet with `gso_size` set. A sent frame takes as many of the guest's receive
//! chains as it needs (`VIRTIO_NET_F_MRG_RXBUF`, the header's `num_buffers` says how many);
//! when the guest has not posted enough, the frame is dropped and counted in the queue's
//! `tx_dropped` (the guest ring is full), and nothing of it is used. The switch segments
//! super-frames before they reach a vhost port (guest TSO is not offered).
//!
//! # Features
//! Offered: `VERSION_1`, `MRG_RXBUF`, `MQ` and `CTRL_VQ` (the control queue stays with the
//! front-end, as with every vhost-user net device), `RING_INDIRECT_DESC`, `IN_ORDER` (chains
//! are used in the order they were made available, in both directions), `CSUM`,
//! `HOST_TSO4/6` and `HOST_ECN` with `tso` (the guest may hand over partial checksums and TCP
//! super-frames), `MAC` and `MTU` when configured, and the vhost-user `PROTOCOL_FEATURES`
//! with `MQ`, `REPLY_ACK` and (with a MAC or MTU) `CONFIG`. Split rings only: `virtio-queue`
//! does not process packed rings, so `RING_PACKED` is not offered.
//!
//! # Bad guests
//! Everything the guest wrote is read through `vm-memory`'s bounds-checked accessors, so a
//! descriptor pointing outside the mapped regions is an error, never a stray read or write. A
//! chain that loops or is longer than the ring, that points outside guest memory, that has a
//! write-only buffer where the device reads (or the reverse), a header shorter than
//! [`vnet::HDR_LEN`], or an available index more than a ring ahead, takes the ring out of
//! service: the queue counts an error and a reset (`port/stats`, `dpif/show`), and the ring
//! stays idle until the front-end sets it up again (a new `SET_VRING_*` sequence or a
//! reconnect). A front-end that closes mid-message is a disconnect like any other.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;
use std::time::Duration;

use datapath::packet::{Batch, LENT_HEAD, MAX_BURST, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};
use vhost::vhost_user::message::{
    VhostTransferStateDirection, VhostTransferStatePhase, VhostUserConfigFlags, VhostUserInflight,
    VhostUserLog, VhostUserMemoryRegion, VhostUserProtocolFeatures, VhostUserShMemConfig,
    VhostUserSharedMsg, VhostUserSingleMemoryRegion, VhostUserVringAddrFlags, VhostUserVringState,
};
use vhost::vhost_user::{
    BackendReqHandler, Error as VuError, GpuBackend, Result as VuResult,
    VhostUserBackendReqHandlerMut,
};
use virtio_queue::{Queue, QueueT};
use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion,
    GuestRegionMmap, MemoryRegionAddress, MmapRegion,
};
use wire::EthernetAddress;

pub use crate::afpacket::PortError;
use crate::afpacket::{flag, unknown_option};
use crate::vnet;

/// How often a `vhostuserclient` port tries to connect while there is no peer.
pub const RECONNECT: Duration = Duration::from_millis(250);
/// Largest ring the back-end takes (the virtio maximum for a split ring).
const MAX_RING: u16 = 32768;
/// Most descriptors one frame may span (in one chain, or over merged chains).
const MAX_SEGS: usize = 64;
/// Largest frame taken from a guest: a TCP super-frame's 64 KiB plus headers (with the
/// virtio-net header, still a pool's large buffer).
const MAX_FRAME: usize = datapath::packet::LARGE_ROOM - vnet::HDR_LEN;
/// `VRING_AVAIL_F_NO_INTERRUPT`: the driver does not want to be signalled.
pub(crate) const AVAIL_F_NO_INTERRUPT: u16 = 1;

// Feature bits (virtio 1.x §5.1.3, §6; vhost-user's own bit 30).
pub(crate) const F_CSUM: u64 = 1 << 0;
pub(crate) const F_MTU: u64 = 1 << 3;
pub(crate) const F_MAC: u64 = 1 << 5;
pub(crate) const F_HOST_TSO4: u64 = 1 << 11;
pub(crate) const F_HOST_TSO6: u64 = 1 << 12;
pub(crate) const F_HOST_ECN: u64 = 1 << 13;
pub(crate) const F_MRG_RXBUF: u64 = 1 << 15;
pub(crate) const F_STATUS: u64 = 1 << 16;
pub(crate) const F_CTRL_VQ: u64 = 1 << 17;
pub(crate) const F_MQ: u64 = 1 << 22;
pub(crate) const F_INDIRECT_DESC: u64 = 1 << 28;
pub(crate) const F_PROTOCOL_FEATURES: u64 = 1 << 30;
pub(crate) const F_VERSION_1: u64 = 1 << 32;
pub(crate) const F_IN_ORDER: u64 = 1 << 35;

/// Names of the feature bits `dpif/show` and a `virtio_user` port's `options()` print.
const FEATURE_NAMES: &[(u64, &str)] = &[
    (F_CSUM, "CSUM"),
    (F_MTU, "MTU"),
    (F_MAC, "MAC"),
    (F_HOST_TSO4, "HOST_TSO4"),
    (F_HOST_TSO6, "HOST_TSO6"),
    (F_HOST_ECN, "HOST_ECN"),
    (F_MRG_RXBUF, "MRG_RXBUF"),
    (F_STATUS, "STATUS"),
    (F_CTRL_VQ, "CTRL_VQ"),
    (F_MQ, "MQ"),
    (F_INDIRECT_DESC, "INDIRECT_DESC"),
    (F_PROTOCOL_FEATURES, "PROTOCOL_FEATURES"),
    (F_VERSION_1, "VERSION_1"),
    (F_IN_ORDER, "IN_ORDER"),
];

/// Options of a `vhostuser` / `vhostuserclient` port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VhostOptions {
    /// The socket (`vhost-server-path`): created by a `vhostuser` port (default
    /// `$TMPDIR/flowpath/PORT`), connected to by a `vhostuserclient` one (required).
    pub path: Option<PathBuf>,
    /// Connect to the socket rather than listen on it (`vhostuserclient`).
    pub client: bool,
    /// Queue pairs offered (`n_rxq`, default 1): the port has this many rx queues.
    pub queues: usize,
    /// MTU told to the guest (`mtu_request`), with `VIRTIO_NET_F_MTU`.
    pub mtu: Option<u16>,
    /// MAC address told to the guest (`mac`), with `VIRTIO_NET_F_MAC`.
    pub mac: Option<[u8; 6]>,
    /// Offer `CSUM` (`csum_offload`, default true): the guest may send partial checksums,
    /// which rx completes.
    pub csum_offload: bool,
    /// Offer `HOST_TSO4/6` (`tso`, default true, only with `csum_offload`): the guest may send
    /// TCP super-frames.
    pub tso: bool,
}

impl Default for VhostOptions {
    fn default() -> Self {
        VhostOptions {
            path: None,
            client: false,
            queues: 1,
            mtu: None,
            mac: None,
            csum_offload: true,
            tso: true,
        }
    }
}

impl VhostOptions {
    /// Option names [`VhostOptions::set`] takes.
    pub const KEYS: &'static [&'static str] = &[
        "vhost-server-path",
        "n_rxq",
        "mtu_request",
        "mac",
        "csum_offload",
        "tso",
    ];

    /// Options for port type `kind` (`vhostuser` or `vhostuserclient`).
    pub fn for_kind(kind: &str) -> Result<VhostOptions, PortError> {
        let client = match kind {
            "vhostuser" => false,
            "vhostuserclient" => true,
            _ => {
                return Err(PortError::BadOption(format!(
                    "'{kind}' is not a vhost type"
                )));
            }
        };
        Ok(VhostOptions {
            client,
            ..VhostOptions::default()
        })
    }

    /// Sets option `key` from its text form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), PortError> {
        let bad = |what: &str| PortError::BadOption(format!("{key}: '{value}' {what}"));
        match key {
            "vhost-server-path" => {
                if value.is_empty() {
                    return Err(bad("is empty"));
                }
                self.path = Some(PathBuf::from(value));
            }
            "n_rxq" => self.queues = value.trim().parse().map_err(|_| bad("is not a number"))?,
            "mtu_request" => {
                self.mtu = Some(value.trim().parse().map_err(|_| bad("is not a number"))?)
            }
            "mac" => self.mac = Some(mac_option(value).ok_or_else(|| bad("is not a MAC address"))?),
            "csum_offload" => self.csum_offload = flag(key, value)?,
            "tso" => self.tso = flag(key, value)?,
            _ => return Err(unknown_option(key, self.kind(), Self::KEYS)),
        }
        Ok(())
    }

    /// Checks the values without opening anything.
    pub fn check(&self) -> Result<(), PortError> {
        if !(1..=16).contains(&self.queues) {
            return Err(PortError::BadOption(format!(
                "n_rxq: {} is not between 1 and 16",
                self.queues
            )));
        }
        if let Some(m) = self.mtu
            && !(68..=9702).contains(&m)
        {
            return Err(PortError::BadOption(format!(
                "mtu_request: {m} is not between 68 and 9702"
            )));
        }
        if self.client && self.path.is_none() {
            return Err(PortError::BadOption(
                "type vhostuserclient needs option vhost-server-path (the socket the VM or \
                 application serves)"
                    .into(),
            ));
        }
        Ok(())
    }

    fn kind(&self) -> &'static str {
        if self.client {
            "vhostuserclient"
        } else {
            "vhostuser"
        }
    }

    /// The socket path for port `name`.
    pub fn socket(&self, name: &str) -> PathBuf {
        self.path
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("flowpath").join(name))
    }

    /// The virtio features offered.
    fn features(&self) -> u64 {
        // `IN_ORDER`: both directions use chains in the order they were made available (a
        // frame that does not fit gives its chains back unused), which DPDK's vhost library
        // offers too; a DPDK guest then takes its cheaper in-order paths.
        let mut f = F_VERSION_1
            | F_MRG_RXBUF
            | F_CTRL_VQ
            | F_MQ
            | F_INDIRECT_DESC
            | F_IN_ORDER
            | F_PROTOCOL_FEATURES;
        if self.csum_offload {
            f |= F_CSUM;
            if self.tso {
                f |= F_HOST_TSO4 | F_HOST_TSO6 | F_HOST_ECN;
            }
        }
        if self.mac.is_some() {
            f |= F_MAC;
        }
        if self.mtu.is_some() {
            f |= F_MTU;
        }
        if self.mac.is_some() || self.mtu.is_some() {
            f |= F_STATUS;
        }
        f
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        let mut p = VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK;
        if self.mac.is_some() || self.mtu.is_some() {
            p |= VhostUserProtocolFeatures::CONFIG;
        }
        p
    }
}

/// The value of option `mac` (of either end of vhost-user): a MAC address as
/// [`EthernetAddress`] reads it, white space around it ignored.
pub(crate) fn mac_option(value: &str) -> Option<[u8; 6]> {
    value.trim().parse::<EthernetAddress>().ok().map(|a| a.0)
}

/// The text form of the feature bits in `f`.
pub(crate) fn feature_names(f: u64) -> String {
    let mut s = String::new();
    for &(bit, name) in FEATURE_NAMES {
        if f & bit != 0 {
            if !s.is_empty() {
                s.push('|');
            }
            s.push_str(name);
        }
    }
    let rest = FEATURE_NAMES.iter().fold(f, |r, (bit, _)| r & !bit);
    if rest != 0 {
        let _ = write!(s, "{}{rest:#x}", if s.is_empty() { "" } else { "|" });
    }
    s
}

/// Guest memory regions as host pointers, for copying frames: `vm-memory`'s generic
/// accessors (`read_slice`, `write_slice`) walk a slice iterator per call and cost several
/// hundred cycles per frame, so the data path checks bounds itself and copies with `memcpy`.
/// A buffer that straddles two regions (legal, rare) takes `vm-memory`'s way instead.
struct HostMap {
    /// (guest address, length, host address) of each region.
    regions: Box<[(u64, u64, *mut u8)]>,
}

// SAFETY: the pointers are into shared mappings owned by the `Arc<GuestMemoryMmap>` of the
// ring that holds this map (built from it, dropped with it), so they are valid wherever the
// ring is; every access checks its bounds against the region first.
unsafe impl Send for HostMap {}

impl HostMap {
    fn new(mem: &GuestMemoryMmap) -> HostMap {
        HostMap {
            regions: mem
                .iter()
                .filter_map(|r| {
                    let host = r.get_host_address(MemoryRegionAddress(0)).ok()?;
                    Some((r.start_addr().0, r.len(), host))
                })
                .collect(),
        }
    }

    /// The host address of the `len` guest bytes at `addr`, if they lie in one region.
    #[inline]
    fn at(&self, addr: u64, len: usize) -> Option<*mut u8> {
        for &(start, size, host) in &*self.regions {
            let off = addr.wrapping_sub(start);
            if addr >= start && off < size && len as u64 <= size - off {
                // In bounds: `off + len <= size`.
                return Some(host.wrapping_add(off as usize));
            }
        }
        None
    }

    /// Copies guest bytes at `addr` into `dst`.
    #[inline]
    fn read(&self, mem: &GuestMemoryMmap, addr: u64, dst: &mut [u8]) -> Result<(), ()> {
        match self.at(addr, dst.len()) {
            // SAFETY: `p` is valid for `dst.len()` bytes of a live mapping (see `at` and the
            // type's invariant); guest memory is never a Rust allocation, so it cannot
            // overlap `dst`. The guest may write it concurrently, as with any device DMA: the
            // frame is then garbage, never unsafety for the switch.
            Some(p) => unsafe {
                copy_frame(dst.as_mut_ptr(), p.cast_const(), dst.len());
                Ok(())
            },
            None => mem.read_slice(dst, GuestAddress(addr)).map_err(|_| ()),
        }
    }

    /// Copies `src` into guest memory at `addr`.
    #[inline]
    fn write(&self, mem: &GuestMemoryMmap, addr: u64, src: &[u8]) -> Result<(), ()> {
        match self.at(addr, src.len()) {
            // SAFETY: as in `read`, with `p` valid for `src.len()` bytes of a writable shared
            // mapping.
            Some(p) => unsafe {
                copy_frame(p, src.as_ptr(), src.len());
                Ok(())
            },
            None => mem.write_slice(src, GuestAddress(addr)).map_err(|_| ()),
        }
    }
}

/// Copies `len` bytes from `src` to `dst` as a frame copy wants it: up to 256 bytes with two
/// overlapping fixed-size moves inline (a 64-byte frame and its header are two 64-byte
/// moves), longer with `memcpy`. The call and size dispatch of `memcpy` cost as much as the
/// moves of a small frame.
///
/// # Safety
/// `src` is valid for reading and `dst` for writing `len` bytes, and the two do not overlap.
#[inline(always)]
unsafe fn copy_frame(dst: *mut u8, src: *const u8, len: usize) {
    /// The first and the last `N` bytes (`N <= len <= 2 * N`).
    #[inline(always)]
    unsafe fn ends<const N: usize>(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: `N <= len`, so both ranges lie inside the caller's `len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, N);
            std::ptr::copy_nonoverlapping(src.add(len - N), dst.add(len - N), N);
        }
    }
    // SAFETY: the caller's contract, and each arm's `N` is at most `len`.
    unsafe {
        match len {
            16..=32 => ends::<16>(dst, src, len),
            33..=64 => ends::<32>(dst, src, len),
            65..=128 => ends::<64>(dst, src, len),
            129..=256 => ends::<128>(dst, src, len),
            _ => std::ptr::copy_nonoverlapping(src, dst, len),
        }
    }
}

/// How [`Ring::send`] copies a frame of more than 256 bytes from a switch buffer into one guest
/// buffer (a lent frame's rest, and a frame spread over several guest buffers, are copied as
/// before). Which is faster depends on the host: on one Intel host `rep movsb` made a
/// 1518-byte PVP round trip 7-9 % cheaper, on another 10 % dearer (`docs/performance.md`, session 17). [`CopyChooser`] picks
/// per queue by timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LongCopy {
    /// `memcpy` (glibc's vector loop at these sizes).
    Vector = 0,
    /// The `rep movsb` string instruction.
    RepMovsb = 1,
}

/// [`copy_frame`], with frames longer than 256 bytes copied as `how` says.
///
/// # Safety
/// As [`copy_frame`].
#[inline(always)]
unsafe fn copy_frame_with(dst: *mut u8, src: *const u8, len: usize, how: LongCopy) {
    #[cfg(target_arch = "x86_64")]
    if how == LongCopy::RepMovsb && len > 256 {
        // SAFETY: the caller's contract: `src` is valid for reading and `dst` for writing
        // `len` bytes, not overlapping. `rep movsb` copies exactly `rcx` bytes forward from
        // `rsi` to `rdi` (the direction flag is clear, as the ABI requires at every call) and
        // touches no other memory, no stack and no flags the compiler relies on.
        unsafe {
            core::arch::asm!(
                "rep movsb",
                inout("rcx") len => _,
                inout("rdi") dst => _,
                inout("rsi") src => _,
                options(nostack, preserves_flags)
            );
        }
        return;
    }
    let _ = how;
    // SAFETY: the caller's contract.
    unsafe { copy_frame(dst, src, len) }
}

/// Chooses, for one transmit queue, how long frames are copied into guest memory
/// ([`LongCopy`]) by timing the queue's own sends: the two ways take turns for
/// [`CopyChooser::WINDOWS`] windows of [`CopyChooser::WINDOW`] sends, then the one with fewer
/// TSC cycles per byte sent is kept for [`CopyChooser::SETTLE`] sends, and the trial starts
/// again (the load, the guest and the host change). Sends are timed only during a trial.
#[derive(Clone, Debug)]
pub(crate) struct CopyChooser {
    how: LongCopy,
    trial: bool,
    /// Sends timed in the current window, and windows done in the trial.
    sends: u32,
    windows: u32,
    /// Per way (indexed by `LongCopy as usize`): cycles and bytes in the trial.
    cycles: [u64; 2],
    bytes: [u64; 2],
    /// Sends since the last trial ended.
    settled: u64,
}

impl CopyChooser {
    pub(crate) const WINDOW: u32 = 256;
    pub(crate) const WINDOWS: u32 = 8;
    pub(crate) const SETTLE: u64 = 1 << 18;
    /// Whether there is a choice: `rep movsb` is an x86-64 instruction.
    const TRIES: bool = cfg!(target_arch = "x86_64");

    pub(crate) fn new() -> CopyChooser {
        CopyChooser {
            how: LongCopy::Vector,
            trial: Self::TRIES,
            sends: 0,
            windows: 0,
            cycles: [0; 2],
            bytes: [0; 2],
            settled: 0,
        }
    }

    /// The way to copy now.
    #[inline]
    pub(crate) fn how(&self) -> LongCopy {
        self.how
    }

    /// Whether the next send is to be timed.
    #[inline]
    pub(crate) fn timing(&self) -> bool {
        self.trial
    }

    /// Counts a send: during a trial, one that took `cycles` and sent `bytes` (a send that
    /// sent nothing does not count). Returns the way chosen when this send ends a trial.
    #[inline]
    pub(crate) fn record(&mut self, cycles: u64, bytes: u64) -> Option<LongCopy> {
        if !self.trial {
            self.settled += 1;
            if self.settled >= Self::SETTLE && Self::TRIES {
                self.trial = true;
                self.how = LongCopy::Vector;
            }
            return None;
        }
        if bytes == 0 {
            return None;
        }
        let i = self.how as usize;
        self.cycles[i] += cycles;
        self.bytes[i] += bytes;
        self.sends += 1;
        if self.sends < Self::WINDOW {
            return None;
        }
        self.sends = 0;
        self.windows += 1;
        if self.windows < Self::WINDOWS {
            self.how = match self.how {
                LongCopy::Vector => LongCopy::RepMovsb,
                LongCopy::RepMovsb => LongCopy::Vector,
            };
            return None;
        }
        // Cycles per byte, compared without division: c0/b0 <= c1/b1.
        let [c0, c1] = self.cycles.map(u128::from);
        let [b0, b1] = self.bytes.map(u128::from);
        self.how = if c1 * b0 < c0 * b1 {
            LongCopy::RepMovsb
        } else {
            LongCopy::Vector
        };
        self.trial = false;
        self.windows = 0;
        self.cycles = [0; 2];
        self.bytes = [0; 2];
        self.settled = 0;
        Some(self.how)
    }
}

/// Stores a virtio-net header of `hdr_len` bytes ([`vnet::HDR_LEN`] or
/// [`vnet::HDR_LEN_LEGACY`]) at `dst`: no offloads, `num_buffers` (which the legacy header
/// does not have) as given; unless `dst` already holds that header, which is then left as it
/// is. A DPDK guest's receive buffers mostly come back holding the header this wrote into them
/// the time before (its virtio driver reads it and, transmitting from the same buffer,
/// rewrites only the fields that differ), and its header ends where a cache line does, the
/// frame starting on the next. Left unwritten, the header's line then stays clean and shared
/// between the two cores; stored again, it moved to the switch's core at every frame, and the
/// guest missed on it when it read `num_buffers`. DPDK's vhost library compares first for the
/// same reason. (Where header and frame share a line, as in a Linux guest's buffers, the
/// frame's copy takes the line anyway and the compare gains nothing.)
///
/// # Safety
/// `dst` is valid for reading and writing `hdr_len` bytes.
#[inline(always)]
unsafe fn put_hdr(dst: *mut u8, hdr_len: usize, num_buffers: u16) {
    /// Stores `v` at `at` unless the `N` bytes there equal it already.
    ///
    /// # Safety
    /// `at` is valid for reading and writing `N` bytes.
    #[inline(always)]
    unsafe fn store_if_new<const N: usize>(at: *mut u8, v: [u8; N]) {
        let at = at.cast::<[u8; N]>();
        // SAFETY: the caller's contract: one fixed-size load, at most one fixed-size store.
        // The guest may write the bytes concurrently, as with any device DMA: the header it
        // then reads is its own doing, never unsafety for the switch.
        unsafe {
            if std::ptr::read_unaligned(at) != v {
                std::ptr::write_unaligned(at, v);
            }
        }
    }
    let mut h = [0u8; vnet::HDR_LEN];
    h[10..12].copy_from_slice(&num_buffers.to_le_bytes());
    // SAFETY: the caller's contract, `hdr_len` bytes (the legacy header is the first 10 of
    // the 12, all zero).
    unsafe {
        if hdr_len == vnet::HDR_LEN {
            store_if_new(dst, h);
        } else {
            store_if_new::<{ vnet::HDR_LEN_LEGACY }>(dst, [0; vnet::HDR_LEN_LEGACY]);
        }
    }
}

/// A started vring: the queue state and what it needs, owned by its slot.
struct Ring {
    /// Which ring this is, of every ring started in the process ([`RING_IDS`]).
    id: u64,
    q: SplitRing,
    mem: Arc<GuestMemoryMmap>,
    /// `mem` as host pointers, for the frame copies.
    host: HostMap,
    /// The call eventfd, written when the guest wants an interrupt.
    call: Option<Arc<File>>,
    /// Bytes of the virtio-net header in front of each frame.
    hdr_len: usize,
    /// Receive: TCP super-frames are taken.
    tso: bool,
    /// Send: a frame may take several chains (`MRG_RXBUF`).
    mrg: bool,
}

/// The next [`Ring::id`].
static RING_IDS: AtomicU64 = AtomicU64::new(1);

/// Chains of a guest's transmit ring whose frames a receive burst lent to the PMD
/// ([`Pool::packet_lent`]) instead of copying them: they go back to the used ring when the PMD
/// releases them ([`RxQueue::release`]), and their memory stays mapped until then, even if the
/// ring is reset meanwhile.
#[derive(Default)]
struct Lent {
    heads: [u16; MAX_BURST],
    n: usize,
    /// The ring they are of ([`Ring::id`]).
    ring: u64,
    /// That ring's memory while `n > 0`.
    mem: Option<Arc<GuestMemoryMmap>>,
}

impl Lent {
    /// Forgets the chains (their ring is gone) and lets their memory go.
    fn forget(&mut self) {
        self.n = 0;
        self.mem = None;
    }
}

/// What went wrong on a ring: the guest broke the virtio rules.
#[derive(Debug)]
struct BadRing(&'static str);

/// Most bytes of one buffer prefetched ahead of its copy: a small frame whole (with the
/// header in front of it, two lines), the front of a large one (the hardware prefetcher
/// follows a long copy by itself).
const PREFETCH_SPAN: usize = 256;

/// Prefetches every cache line of the `len` bytes at `p` (`len > 0`).
#[inline(always)]
fn prefetch_span<const WRITE: bool>(p: *const u8, len: usize) {
    let skew = p as usize & 63;
    let line = p.wrapping_sub(skew);
    for k in 0..(skew + len).div_ceil(64) {
        flow::hash::prefetch_addr::<WRITE>(line.wrapping_add(64 * k));
    }
}

/// A descriptor (virtio 1.x §2.7.5).
#[derive(Clone, Copy)]
struct Desc {
    addr: u64,
    len: u32,
    flags: u16,
    next: u16,
}

const DESC_F_NEXT: u16 = 1;
const DESC_F_WRITE: u16 = 2;
const DESC_F_INDIRECT: u16 = 4;

/// A split virtqueue (virtio 1.x §2.7) as the device side polls it, over host pointers into
/// the guest's memory. `virtio-queue` checks the ring's layout when it starts
/// ([`Queue::is_valid`], alignment and size); per packet this does what its `AvailIter`,
/// `DescriptorChain` and `add_used` do, through pointers checked once per area at start
/// rather than a bounds-checked `vm-memory` access per field, which cost several times as much
/// per frame (docs/performance.md, PVP). The used index is published once per burst, as
/// DPDK's vhost library does.
#[derive(Clone, Copy)]
struct SplitRing {
    /// A power of two (`Queue::try_set_size` checks it).
    size: u16,
    /// `size` descriptors of 16 bytes.
    desc: *const u8,
    /// Flags, index, `size` entries.
    avail: *const u8,
    /// Flags, index, `size` elements of 8 bytes.
    used: *mut u8,
    next_avail: u16,
    next_used: u16,
}

// SAFETY: the pointers are into the guest memory mappings that the `Ring` holding this ring
// keeps alive (its `Arc<GuestMemoryMmap>`); each area was checked at start to lie inside one
// mapping and to be aligned for the atomic accesses made to it.
unsafe impl Send for SplitRing {}

impl SplitRing {
    /// The ring `q` describes (addresses already checked by `q.is_valid`), in `host`.
    fn new(q: &Queue, host: &HostMap) -> Result<SplitRing, String> {
        let size = q.size();
        let n = usize::from(size);
        let area = |addr: u64, len: usize, align: usize, what: &str| {
            host.at(addr, len)
                .filter(|p| (*p as usize).is_multiple_of(align))
                .ok_or_else(|| format!("the {what} at {addr:#x} is not in one memory region"))
        };
        Ok(SplitRing {
            size,
            desc: area(q.desc_table(), 16 * n, 16, "descriptor table")?.cast_const(),
            avail: area(q.avail_ring(), 6 + 2 * n, 2, "available ring")?.cast_const(),
            used: area(q.used_ring(), 6 + 8 * n, 4, "used ring")?,
            next_avail: q.next_avail(),
            next_used: q.next_used(),
        })
    }

    fn next_avail(&self) -> u16 {
        self.next_avail
    }

    #[cfg(test)]
    fn next_used(&self) -> u16 {
        self.next_used
    }

    /// The driver's available index (acquire: the entries before it are written).
    #[inline]
    fn avail_idx(&self) -> u16 {
        // SAFETY: `avail + 2` is 2-aligned and inside the checked area; the guest writes it
        // concurrently, hence the atomic access.
        let idx = unsafe { AtomicU16::from_ptr(self.avail.add(2).cast_mut().cast()) };
        u16::from_le(idx.load(Acquire))
    }

    /// The driver's available-ring flags.
    #[inline]
    fn avail_flags(&self) -> u16 {
        // SAFETY: as in `avail_idx`, at the area's start.
        let f = unsafe { AtomicU16::from_ptr(self.avail.cast_mut().cast()) };
        u16::from_le(f.load(Relaxed))
    }

    /// The head the driver put in available slot `i` (read after `avail_idx` said it is there).
    #[inline]
    fn avail_entry(&self, i: u16) -> u16 {
        let at = 4 + 2 * usize::from(i & (self.size - 1));
        // SAFETY: `at + 2 <= 4 + 2 * size`, inside the checked area.
        u16::from_le(unsafe { std::ptr::read_volatile(self.avail.add(at).cast::<u16>()) })
    }

    /// Descriptor `i` of the table at `table` (`i` below the table's size).
    #[inline]
    fn desc(table: *const u8, i: u16) -> Desc {
        // SAFETY: callers pass a table checked to hold more than `i` descriptors; 16-byte
        // descriptors of a table at a 16-aligned address (a direct table) or any address (an
        // indirect one: hence the unaligned read).
        let b: [u8; 16] =
            unsafe { std::ptr::read_unaligned(table.add(16 * usize::from(i)).cast::<[u8; 16]>()) };
        Desc {
            addr: u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            len: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            flags: u16::from_le_bytes([b[12], b[13]]),
            next: u16::from_le_bytes([b[14], b[15]]),
        }
    }

    /// Walks the chain at `head`, handing each buffer (address, length) to `f`; every buffer
    /// must be device-writable (`write`) or device-readable (not `write`). Returns the number
    /// of buffers.
    fn walk(
        &self,
        host: &HostMap,
        head: u16,
        write: bool,
        mut f: impl FnMut(u64, u32),
    ) -> Result<usize, BadRing> {
        const LOOP: BadRing = BadRing("descriptor chain loops or leaves the ring");
        let (mut table, mut tsize, mut i) = (self.desc, self.size, head);
        let (mut indirect, mut count, mut in_table) = (false, 0usize, 0usize);
        if head >= self.size {
            return Err(LOOP);
        }
        loop {
            let d = Self::desc(table, i);
            if d.flags & DESC_F_INDIRECT != 0 {
                if indirect {
                    return Err(BadRing("indirect descriptor inside an indirect table"));
                }
                let n = d.len as usize / 16;
                if d.len % 16 != 0 || n == 0 || n > usize::from(u16::MAX) {
                    return Err(BadRing("indirect table of a bad length"));
                }
                table = host
                    .at(d.addr, d.len as usize)
                    .ok_or(BadRing("indirect table outside guest memory"))?
                    .cast_const();
                (tsize, i, indirect, in_table) = (n as u16, 0, true, 0);
                continue;
            }
            if (d.flags & DESC_F_WRITE != 0) != write {
                return Err(BadRing(if write {
                    "read-only buffer in a receive chain"
                } else {
                    "write-only buffer in a transmit chain"
                }));
            }
            f(d.addr, d.len);
            count += 1;
            in_table += 1;
            if d.flags & DESC_F_NEXT == 0 {
                return Ok(count);
            }
            i = d.next;
            if i >= tsize || in_table >= usize::from(tsize) {
                return Err(LOOP);
            }
        }
    }

    /// Starts loading what the next `n` available chains need: their available entries and
    /// descriptors (read here, so that a burst's misses on lines the guest wrote on its own
    /// core overlap rather than each waiting in turn), the first `span(j)` bytes of chain
    /// `j`'s first buffer (at most [`PREFETCH_SPAN`]; for writing when `WRITE`, as a send
    /// does, but for its first `read_first` bytes, which a send reads before it decides to write
    /// them: [`put_hdr`]) and, for writing, the used elements the burst will fill.
    #[inline]
    fn prefetch<const WRITE: bool>(
        &self,
        host: &HostMap,
        n: usize,
        read_first: usize,
        mut span: impl FnMut(usize) -> usize,
    ) {
        let n = n.min(MAX_BURST);
        // First every chain's head, with its descriptor's line prefetched, then the
        // descriptors: a descriptor's load waits on its head's, and one loop of both kept
        // few of the burst's misses in flight at once.
        let mut heads = [0u16; MAX_BURST];
        for (j, h) in heads[..n].iter_mut().enumerate() {
            *h = self.avail_entry(self.next_avail.wrapping_add(j as u16));
            if *h < self.size {
                flow::hash::prefetch_addr::<false>(self.desc.wrapping_add(16 * usize::from(*h)));
            }
        }
        for (j, &head) in heads[..n].iter().enumerate() {
            if head < self.size {
                let d = Self::desc(self.desc, head);
                let want = span(j);
                let len = want.min(d.len as usize).min(PREFETCH_SPAN);
                // Read first only where the send compares before it stores: one writable
                // buffer holding header and frame (elsewhere the header is stored whole).
                let first = if d.flags == DESC_F_WRITE && d.len as usize >= want {
                    read_first
                } else {
                    0
                };
                if len > first
                    && let Some(b) = host.at(d.addr, len)
                {
                    if first > 0 {
                        prefetch_span::<false>(b, first);
                    }
                    prefetch_span::<WRITE>(b.wrapping_add(first), len - first);
                }
            }
        }
        if n > 0 {
            // The used elements, up to the ring's end (a wrapped burst's rest is not worth
            // the arithmetic).
            let first = usize::from(self.next_used & (self.size - 1));
            let k = n.min(usize::from(self.size) - first);
            // SAFETY: elements `first .. first + k` are inside the checked used area.
            let p = unsafe { self.used.add(4 + 8 * first) };
            prefetch_span::<true>(p, 8 * k);
        }
    }

    /// Records chain `head` as used with `len` bytes written.
    #[inline]
    fn put_used(&mut self, head: u16, len: u32) {
        let at = 4 + 8 * usize::from(self.next_used & (self.size - 1));
        let mut e = [0u8; 8];
        e[..4].copy_from_slice(&u32::from(head).to_le_bytes());
        e[4..].copy_from_slice(&len.to_le_bytes());
        // SAFETY: `at + 8 <= 4 + 8 * size`, inside the checked area.
        unsafe { std::ptr::write_volatile(self.used.add(at).cast::<[u8; 8]>(), e) };
        self.next_used = self.next_used.wrapping_add(1);
    }

    /// Publishes the used elements recorded so far (release: they are written first).
    #[inline]
    fn publish_used(&self) {
        // SAFETY: `used + 2` is 2-aligned (the area is 4-aligned) and inside it.
        let idx = unsafe { AtomicU16::from_ptr(self.used.add(2).cast()) };
        idx.store(self.next_used.to_le(), Release);
    }
}

impl Ring {
    /// The ring `q` describes, on `mem`.
    fn start(
        q: &Queue,
        mem: Arc<GuestMemoryMmap>,
        call: Option<Arc<File>>,
        hdr_len: usize,
        tso: bool,
        mrg: bool,
    ) -> Result<Ring, String> {
        let host = HostMap::new(&mem);
        Ok(Ring {
            id: RING_IDS.fetch_add(1, Relaxed),
            q: SplitRing::new(q, &host)?,
            host,
            mem,
            call,
            hdr_len,
            tso,
            mrg,
        })
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
    fn give_back(&mut self, lent: &mut Lent) {
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
    fn recv(
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
        q.prefetch::<false>(&self.host, todo, 0, |_| usize::MAX);
        let hdr_len = self.hdr_len;
        let mut segs = [(0u64, 0u32); MAX_SEGS];
        let mut added = 0;
        let mut result = Ok(());
        for _ in 0..todo {
            let head = q.avail_entry(q.next_avail);
            q.next_avail = q.next_avail.wrapping_add(1);
            // The usual chain: one readable buffer holding header and frame, in one region.
            let single = if head < q.size {
                let d = SplitRing::desc(q.desc, head);
                let len = d.len as usize;
                if d.flags == 0 && (hdr_len + 14..=hdr_len + MAX_FRAME).contains(&len) {
                    self.host.at(d.addr, len).map(|src| (src, len))
                } else {
                    None
                }
            } else {
                None
            };
            if let Some((src, len)) = single
                && len - hdr_len > LENT_HEAD
            {
                let mut hdr = [0u8; vnet::HDR_LEN];
                // SAFETY: `src` is valid for `len >= hdr_len + 14` bytes (`HostMap::at`), more
                // than the header's.
                unsafe {
                    std::ptr::copy_nonoverlapping(src.cast_const(), hdr.as_mut_ptr(), hdr.len())
                };
                if hdr[0] & vnet::F_NEEDS_CSUM == 0 && hdr[1] == vnet::GSO_NONE {
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
                        q.put_used(head, 0);
                        added += 1;
                    }
                    counts[0] += 1;
                    counts[1] += p.len() as u64;
                    batch.push(p);
                    continue;
                }
            }
            let mut p = if let Some((src, len)) = single {
                q.put_used(head, 0);
                added += 1;
                let mut p = pool.packet_with_len(len, in_port);
                // SAFETY: `src` is valid for `len` bytes of a live mapping (`HostMap::at`),
                // the packet's `len` bytes are its own, and guest memory is never a Rust
                // allocation. The guest may write it concurrently, as with any device DMA:
                // the frame is then garbage, never unsafety for the switch.
                unsafe { copy_frame(p.data_mut().as_mut_ptr(), src.cast_const(), len) };
                p
            } else {
                let (mut n, mut total, mut too_many) = (0usize, 0usize, false);
                let walked = q.walk(&self.host, head, false, |addr, len| {
                    if n == MAX_SEGS {
                        too_many = true;
                    } else {
                        segs[n] = (addr, len);
                        n += 1;
                        total += len as usize;
                    }
                });
                if let Err(e) = walked {
                    result = Err(e);
                    break;
                }
                // The chain goes back whatever becomes of its frame.
                q.put_used(head, 0);
                added += 1;
                if too_many {
                    result = Err(BadRing("transmit chain of too many buffers"));
                    break;
                }
                if total < hdr_len + 14 || total - hdr_len > MAX_FRAME {
                    counts[2] += 1;
                    continue;
                }
                // Header and frame in one copy; the header is then cut off the front.
                let mut p = pool.packet_with_len(total, in_port);
                if gather(&self.host, &self.mem, &segs[..n], p.data_mut()).is_err() {
                    pool.free(p);
                    result = Err(BadRing("buffer outside guest memory"));
                    break;
                }
                p
            };
            // A fixed-size copy (the frame is longer than any header); what the legacy
            // header does not have is zero.
            let mut hdr = [0u8; vnet::HDR_LEN];
            hdr.copy_from_slice(&p.data()[..vnet::HDR_LEN]);
            if hdr_len < vnet::HDR_LEN {
                hdr[vnet::HDR_LEN_LEGACY..].fill(0);
            }
            p.pull_front(hdr_len);
            match vnet::accept_rx(&hdr, p.data_mut(), self.tso) {
                Ok(gso) => {
                    if gso != 0 {
                        p.meta.gso_size = gso;
                        batch.mark_gso();
                    }
                    counts[0] += 1;
                    counts[1] += p.len() as u64;
                    batch.push(p);
                }
                Err(_) => {
                    pool.free(p);
                    counts[2] += 1;
                }
            }
        }
        self.q = q;
        self.complete(added);
        result
    }

    /// Sends every packet of `batch` into the guest's receive ring; counts into `counts`
    /// (packets, bytes, dropped).
    ///
    /// A lent packet's frame is copied from its buffer and from where it is lent
    /// ([`Pool::lent_tail`]), or brought into its buffer first when it takes several buffers.
    fn send(
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
            usize::from(avail.wrapping_sub(q.next_avail)).min(packets.len()),
            hdr_len,
            |j| hdr_len + packets[j].len(),
        );
        let mut added = 0;
        let mut result = Ok(());
        let mut empty = false;
        // The buffers a frame goes to: (address, length, chain), and the chains (filled up to
        // `n` and `n_heads` for each frame, never cleared).
        let mut segs = [(0u64, 0u32, 0u16); MAX_SEGS];
        let mut heads = [0u16; MAX_SEGS];
        let mut used = [0u32; MAX_SEGS];
        for p in batch.packets_mut() {
            if result.is_err() || empty {
                counts[2] += 1;
                continue;
            }
            let frame_len = p.len();
            let need = self.hdr_len + frame_len;
            // The usual case: the next chain is one writable buffer, in one region, that
            // holds header and frame.
            if q.next_avail != avail {
                let head = q.avail_entry(q.next_avail);
                if head < q.size {
                    let d = SplitRing::desc(q.desc, head);
                    if d.flags == DESC_F_WRITE
                        && d.len as usize >= need
                        && let Some(dst) = self.host.at(d.addr, need)
                    {
                        // The header (all zero but `num_buffers`, 1) is compared and, if
                        // need be, stored straight from registers ([`put_hdr`]): written to
                        // the packet's headroom and copied with the frame, it was read back
                        // before its stores had left the store buffer, which then waited for
                        // every earlier store to guest memory.
                        //
                        // SAFETY: `dst` is valid for `need` bytes of a live, writable shared
                        // mapping (`HostMap::at`), header then frame; the packet's buffer is
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
                        q.put_used(head, need as u32);
                        added += 1;
                        counts[0] += 1;
                        counts[1] += frame_len as u64;
                        continue;
                    }
                }
            }
            pool.materialize(p);
            let start = q.next_avail;
            let mut n = 0;
            let mut n_heads = 0;
            let mut cap = 0usize;
            let mut fits = true;
            while cap < need {
                if q.next_avail == avail {
                    // The guest has posted no more buffers: the rest of the burst is dropped
                    // without looking again.
                    fits = false;
                    empty = true;
                    break;
                }
                if n_heads == MAX_SEGS || (n_heads == 1 && !self.mrg) {
                    // Too many buffers for one frame, or a single buffer too small for it:
                    // this frame cannot go, the next may.
                    fits = false;
                    break;
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
                    result = Err(e);
                } else if k > MAX_SEGS {
                    result = Err(BadRing("receive chain of too many buffers"));
                } else if chain_cap < self.hdr_len {
                    result = Err(BadRing("receive buffer shorter than the virtio-net header"));
                }
                if result.is_err() {
                    break;
                }
            }
            if result.is_err() {
                counts[2] += 1;
                continue;
            }
            if !fits {
                // Nothing of it is used: the chains taken go back to the available ring.
                q.next_avail = start;
                counts[2] += 1;
                continue;
            }
            let mut hdr = [0u8; vnet::HDR_LEN];
            hdr[10..12].copy_from_slice(&(n_heads as u16).to_le_bytes());
            let hdr = &hdr[..self.hdr_len];
            used[..n_heads].fill(0);
            // The header goes in the packet's headroom (the packet is done with after this),
            // so that header and frame are one copy.
            let copied = if p.headroom() >= hdr.len() {
                p.push_front(hdr.len()).copy_from_slice(hdr);
                scatter(&self.host, &self.mem, &segs[..n], &[], p.data(), &mut used)
            } else {
                scatter(&self.host, &self.mem, &segs[..n], hdr, p.data(), &mut used)
            };
            if copied.is_err() {
                result = Err(BadRing("buffer outside guest memory"));
                counts[2] += 1;
                continue;
            }
            for (i, &h) in heads[..n_heads].iter().enumerate() {
                q.put_used(h, used[i]);
            }
            added += n_heads;
            counts[0] += 1;
            counts[1] += frame_len as u64;
        }
        self.q = q;
        self.complete(added);
        result
    }
}

/// Copies the buffers `segs` of guest memory into `out` (their lengths add up to its).
fn gather(
    host: &HostMap,
    mem: &GuestMemoryMmap,
    segs: &[(u64, u32)],
    out: &mut [u8],
) -> Result<(), ()> {
    let mut off = 0usize;
    for &(addr, len) in segs {
        let len = len as usize;
        host.read(mem, addr, &mut out[off..off + len])?;
        off += len;
    }
    Ok(())
}

/// Copies `hdr` then `frame` into the guest buffers `segs` (address, length, chain), adding
/// what each chain received to `used[chain]`.
fn scatter(
    host: &HostMap,
    mem: &GuestMemoryMmap,
    segs: &[(u64, u32, u16)],
    hdr: &[u8],
    frame: &[u8],
    used: &mut [u32],
) -> Result<(), ()> {
    let mut parts = [hdr, frame];
    let mut part = 0;
    for &(addr, len, chain) in segs {
        let (mut addr, mut room) = (addr, len as usize);
        while room > 0 && part < 2 {
            let src = parts[part];
            let k = room.min(src.len());
            if k > 0 {
                host.write(mem, addr, &src[..k])?;
                used[chain as usize] += k as u32;
                addr = addr.wrapping_add(k as u64);
                room -= k;
            }
            parts[part] = &src[k..];
            if parts[part].is_empty() {
                part += 1;
            }
        }
        if part == 2 {
            break;
        }
    }
    Ok(())
}

/// What the port and its queues share with the control thread.
struct Shared {
    name: String,
    /// One slot per vring: `2k` the guest's receive ring, `2k + 1` its transmit ring.
    slots: Box<[Mutex<Option<Ring>>]>,
    rx_stats: Vec<Arc<QueueStats>>,
    tx_stats: Vec<Arc<QueueStats>>,
    /// Leading guest receive rings that are started: tx queue `k` sends on ring
    /// `k mod n_tx_rings`.
    n_tx_rings: AtomicUsize,
    /// Rings taken out of service for breaking the virtio rules.
    resets: AtomicU64,
    /// The transmit queues' [`CopyChooser`] trials ended, how many chose `rep movsb`, and the
    /// last one's choice (`LongCopy as u64`), for `dpif/show`.
    copy_trials: AtomicU64,
    copy_movsb: AtomicU64,
    copy_last: AtomicU64,
    status: Mutex<Status>,
    stop: AtomicBool,
    /// The current connection, to shut it down when the port closes.
    conn: Mutex<Option<UnixStream>>,
}

/// What `dpif/show` tells of the connection.
#[derive(Clone, Debug, Default)]
struct Status {
    connected: bool,
    features: u64,
    protocol: u64,
    /// Vrings started.
    started: usize,
    connections: u64,
}

/// Locks `m`, whatever a thread that panicked holding it left.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Locks `m` if no other thread holds it: a PMD's rx poll skips a ring the control thread has
/// (a poll later is as good), rather than wait.
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::WouldBlock) => None,
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
    }
}

impl Shared {
    /// Takes ring `i` out of its slot (waiting for a PMD's burst on it to end).
    fn take(&self, i: usize) -> Option<Ring> {
        lock(&self.slots[i]).take()
    }

    fn update_started(&self) {
        let started: Vec<bool> = self.slots.iter().map(|s| lock(s).is_some()).collect();
        let lead = started.iter().step_by(2).take_while(|s| **s).count();
        self.n_tx_rings.store(lead, Relaxed);
        lock(&self.status).started = started.iter().filter(|s| **s).count();
    }

    #[cold]
    fn bad_ring(&self, slot: &mut Option<Ring>, vring: usize, why: &str, stats: &QueueStats) {
        *slot = None;
        stats.errors.fetch_add(1, Relaxed);
        self.resets.fetch_add(1, Relaxed);
        eprintln!(
            "flowpath: vhost port '{}': vring {vring} reset: {why}; idle until the guest sets \
             it up again",
            self.name
        );
    }
}

/// Per-vring configuration as the front-end gives it.
struct VringConf {
    num: u16,
    /// Front-end virtual addresses of the descriptor table, available and used rings.
    addr: Option<(u64, u64, u64)>,
    base: u16,
    kicked: bool,
    /// Enabled unless the front-end said otherwise. The protocol has rings start disabled
    /// once `PROTOCOL_FEATURES` is negotiated, but QEMU (7.2) sends its `SET_VRING_ENABLE`s
    /// before `SET_FEATURES`, which rust-vmm's handler refuses unseen (`InactiveFeature`):
    /// starting disabled would leave a QEMU guest's rings stopped for good. DPDK's vhost
    /// library, which applies those messages, ends in the same state.
    enabled: bool,
    call: Option<Arc<File>>,
}

impl Default for VringConf {
    fn default() -> Self {
        VringConf {
            num: 0,
            addr: None,
            base: 0,
            kicked: false,
            enabled: true,
            call: None,
        }
    }
}

/// One guest memory region: where the front-end has it and its guest address.
#[derive(Clone, Copy)]
struct Region {
    user: u64,
    gpa: u64,
    size: u64,
}

/// The back-end side of one connection.
struct Handler {
    shared: Arc<Shared>,
    opts: VhostOptions,
    acked: u64,
    protocol: u64,
    mem: Option<Arc<GuestMemoryMmap>>,
    regions: Vec<Region>,
    vrings: Vec<VringConf>,
}

impl Handler {
    fn new(shared: Arc<Shared>, opts: VhostOptions) -> Handler {
        let n = shared.slots.len();
        Handler {
            shared,
            opts,
            acked: 0,
            protocol: 0,
            mem: None,
            regions: Vec::new(),
            vrings: (0..n).map(|_| VringConf::default()).collect(),
        }
    }

    fn vring(&mut self, index: u32) -> VuResult<&mut VringConf> {
        self.vrings
            .get_mut(index as usize)
            .ok_or(VuError::InvalidParam)
    }

    fn gpa(&self, user: u64) -> Option<u64> {
        self.regions
            .iter()
            .find(|r| user >= r.user && user - r.user < r.size)
            .map(|r| user - r.user + r.gpa)
    }

    /// Stops vring `i`: its ring leaves the slot and its position is kept as the base.
    fn stop(&mut self, i: usize) {
        if let Some(r) = self.shared.take(i) {
            self.vrings[i].base = r.q.next_avail();
        }
    }

    /// Stops vring `i` and starts it again on the current configuration if it is complete,
    /// kicked and enabled.
    fn restart(&mut self, i: usize) {
        self.stop(i);
        let ring = match self.build(i) {
            Ok(r) => r,
            Err(why) => {
                if !why.is_empty() {
                    eprintln!(
                        "flowpath: vhost port '{}': vring {i} not started: {why}",
                        self.shared.name
                    );
                }
                None
            }
        };
        if ring.is_some() {
            *lock(&self.shared.slots[i]) = ring;
        }
        self.shared.update_started();
    }

    fn restart_all(&mut self) {
        for i in 0..self.vrings.len() {
            self.restart(i);
        }
    }

    fn stop_all(&mut self) {
        for i in 0..self.vrings.len() {
            self.stop(i);
        }
        self.shared.update_started();
    }

    /// The ring of vring `i`, `None` when it is not ready; an error (with a reason worth
    /// telling, or empty) when its configuration is unusable.
    fn build(&self, i: usize) -> Result<Option<Ring>, String> {
        let v = &self.vrings[i];
        let (Some(mem), Some((desc, avail, used))) = (&self.mem, v.addr) else {
            return Ok(None);
        };
        if !v.kicked || !v.enabled || v.num == 0 {
            return Ok(None);
        }
        let gpa = |a: u64, what: &str| {
            self.gpa(a)
                .ok_or_else(|| format!("{what} address {a:#x} is outside guest memory"))
        };
        let mut q = Queue::new(MAX_RING).map_err(|e| e.to_string())?;
        q.try_set_size(v.num)
            .map_err(|e| format!("size {}: {e}", v.num))?;
        q.try_set_desc_table_address(GuestAddress(gpa(desc, "descriptor table")?))
            .map_err(|e| e.to_string())?;
        q.try_set_avail_ring_address(GuestAddress(gpa(avail, "available ring")?))
            .map_err(|e| e.to_string())?;
        q.try_set_used_ring_address(GuestAddress(gpa(used, "used ring")?))
            .map_err(|e| e.to_string())?;
        q.set_next_avail(v.base);
        q.set_next_used(v.base);
        q.set_event_idx(false);
        q.set_ready(true);
        if !q.is_valid(&**mem) {
            return Err("its rings do not lie in guest memory".into());
        }
        q.disable_notification(&**mem).map_err(|e| e.to_string())?;
        // A front-end that reconnects with rings already in use (DPDK's virtio_user in server
        // mode) still says base 0: the used index in guest memory is where the ring is, as
        // DPDK's vhost library and QEMU take it.
        let used = q
            .used_idx(&**mem, std::sync::atomic::Ordering::Acquire)
            .map_err(|e| e.to_string())?
            .0;
        if used != v.base {
            eprintln!(
                "flowpath: vhost port '{}': vring {i}: base {} but the used index is {used}; \
                 resuming from the used index",
                self.shared.name, v.base
            );
            q.set_next_avail(used);
            q.set_next_used(used);
        }
        let hdr_len = if self.acked & (F_VERSION_1 | F_MRG_RXBUF) != 0 {
            vnet::HDR_LEN
        } else {
            vnet::HDR_LEN_LEGACY
        };
        Ring::start(
            &q,
            mem.clone(),
            v.call.clone(),
            hdr_len,
            self.acked & (F_HOST_TSO4 | F_HOST_TSO6) != 0,
            self.acked & F_MRG_RXBUF != 0,
        )
        .map(Some)
    }

    fn map(regions: &[VhostUserMemoryRegion], files: Vec<File>) -> Result<GuestMemoryMmap, String> {
        if regions.len() != files.len() || regions.is_empty() {
            return Err(format!(
                "{} memory regions with {} descriptors",
                regions.len(),
                files.len()
            ));
        }
        let mut out = Vec::with_capacity(regions.len());
        for (r, f) in regions.iter().zip(files) {
            let size = usize::try_from(r.memory_size).map_err(|e| e.to_string())?;
            let m = MmapRegion::from_file(FileOffset::new(f, r.mmap_offset), size)
                .map_err(|e| format!("mmap of a {size}-byte region: {e}"))?;
            out.push(
                GuestRegionMmap::new(m, GuestAddress(r.guest_phys_addr))
                    .ok_or("a memory region wraps the address space")?,
            );
        }
        GuestMemoryMmap::from_regions(out).map_err(|e| e.to_string())
    }

    fn unsupported<T>(&self, what: &'static str) -> VuResult<T> {
        Err(VuError::InvalidOperation(what))
    }
}

impl VhostUserBackendReqHandlerMut for Handler {
    fn set_owner(&mut self) -> VuResult<()> {
        Ok(())
    }

    fn reset_owner(&mut self) -> VuResult<()> {
        self.stop_all();
        self.acked = 0;
        Ok(())
    }

    fn reset_device(&mut self) -> VuResult<()> {
        self.reset_owner()
    }

    fn get_features(&mut self) -> VuResult<u64> {
        Ok(self.opts.features())
    }

    fn set_features(&mut self, features: u64) -> VuResult<()> {
        if features & !self.opts.features() != 0 {
            return Err(VuError::InvalidParam);
        }
        self.acked = features;
        if features & F_PROTOCOL_FEATURES == 0 {
            // Without vhost-user protocol features a ring is enabled once it is kicked.
            for v in &mut self.vrings {
                v.enabled = true;
            }
        }
        lock(&self.shared.status).features = features;
        self.restart_all();
        Ok(())
    }

    fn set_mem_table(
        &mut self,
        ctx: &[VhostUserMemoryRegion],
        files: Vec<File>,
        _postcopy_listening: Option<bool>,
    ) -> VuResult<Option<Vec<u64>>> {
        let mem = Self::map(ctx, files).map_err(|e| {
            eprintln!(
                "flowpath: vhost port '{}': SET_MEM_TABLE: {e}",
                self.shared.name
            );
            VuError::InvalidParam
        })?;
        self.stop_all();
        self.regions = ctx
            .iter()
            .map(|r| Region {
                user: r.user_addr,
                gpa: r.guest_phys_addr,
                size: r.memory_size,
            })
            .collect();
        self.mem = Some(Arc::new(mem));
        self.restart_all();
        Ok(None)
    }

    fn set_vring_num(&mut self, index: u32, num: u32) -> VuResult<()> {
        if num == 0 || num > u32::from(MAX_RING) || !num.is_power_of_two() {
            return Err(VuError::InvalidParam);
        }
        self.vring(index)?.num = num as u16;
        self.restart(index as usize);
        Ok(())
    }

    fn set_vring_addr(
        &mut self,
        index: u32,
        _flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        _log: u64,
    ) -> VuResult<()> {
        self.vring(index)?.addr = Some((descriptor, available, used));
        self.restart(index as usize);
        Ok(())
    }

    fn set_vring_base(&mut self, index: u32, base: u32) -> VuResult<()> {
        self.vring(index)?;
        self.stop(index as usize);
        self.vrings[index as usize].base = base as u16;
        self.restart(index as usize);
        Ok(())
    }

    fn get_vring_base(&mut self, index: u32) -> VuResult<VhostUserVringState> {
        self.vring(index)?;
        let i = index as usize;
        self.stop(i);
        // GET_VRING_BASE stops the ring until it is kicked again.
        self.vrings[i].kicked = false;
        self.shared.update_started();
        Ok(VhostUserVringState::new(
            index,
            u32::from(self.vrings[i].base),
        ))
    }

    fn set_vring_kick(&mut self, index: u8, _fd: Option<File>) -> VuResult<()> {
        // The ring is polled: the kick eventfd itself is never read.
        self.vring(u32::from(index))?.kicked = true;
        self.restart(usize::from(index));
        Ok(())
    }

    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> VuResult<()> {
        self.vring(u32::from(index))?.call = fd.map(Arc::new);
        if lock(&self.shared.slots[usize::from(index)]).is_some() {
            self.restart(usize::from(index));
        }
        Ok(())
    }

    fn set_vring_err(&mut self, index: u8, _fd: Option<File>) -> VuResult<()> {
        self.vring(u32::from(index))?;
        Ok(())
    }

    fn get_protocol_features(&mut self) -> VuResult<VhostUserProtocolFeatures> {
        Ok(self.opts.protocol_features())
    }

    fn set_protocol_features(&mut self, features: u64) -> VuResult<()> {
        self.protocol = features;
        lock(&self.shared.status).protocol = features;
        Ok(())
    }

    fn get_queue_num(&mut self) -> VuResult<u64> {
        Ok(self.opts.queues as u64)
    }

    fn set_vring_enable(&mut self, index: u32, enable: bool) -> VuResult<()> {
        self.vring(index)?.enabled = enable;
        self.restart(index as usize);
        Ok(())
    }

    fn get_config(
        &mut self,
        offset: u32,
        size: u32,
        _flags: VhostUserConfigFlags,
    ) -> VuResult<Vec<u8>> {
        // struct virtio_net_config: mac, status (LINK_UP), max_virtqueue_pairs, mtu.
        let mut c = [0u8; 12];
        c[..6].copy_from_slice(&self.opts.mac.unwrap_or_default());
        c[6..8].copy_from_slice(&1u16.to_le_bytes());
        c[8..10].copy_from_slice(&(self.opts.queues as u16).to_le_bytes());
        c[10..12].copy_from_slice(&self.opts.mtu.unwrap_or(1500).to_le_bytes());
        let (o, s) = (offset as usize, size as usize);
        let mut out = vec![0u8; s];
        if o < c.len() {
            let k = s.min(c.len() - o);
            out[..k].copy_from_slice(&c[o..o + k]);
        }
        Ok(out)
    }

    fn set_config(
        &mut self,
        _offset: u32,
        _buf: &[u8],
        _flags: VhostUserConfigFlags,
    ) -> VuResult<()> {
        // The network device's configuration is read-only for the driver.
        Ok(())
    }

    fn set_gpu_socket(&mut self, _gpu_backend: GpuBackend) -> VuResult<()> {
        self.unsupported("GPU_SET_SOCKET")
    }

    fn get_shared_object(&mut self, _uuid: VhostUserSharedMsg) -> VuResult<File> {
        self.unsupported("GET_SHARED_OBJECT")
    }

    fn get_inflight_fd(&mut self, _i: &VhostUserInflight) -> VuResult<(VhostUserInflight, File)> {
        self.unsupported("GET_INFLIGHT_FD")
    }

    fn set_inflight_fd(&mut self, _i: &VhostUserInflight, _file: File) -> VuResult<()> {
        self.unsupported("SET_INFLIGHT_FD")
    }

    fn get_max_mem_slots(&mut self) -> VuResult<u64> {
        self.unsupported("GET_MAX_MEM_SLOTS")
    }

    fn add_mem_region(
        &mut self,
        _region: &VhostUserSingleMemoryRegion,
        _fd: File,
        _postcopy_listening: Option<bool>,
    ) -> VuResult<Option<u64>> {
        self.unsupported("ADD_MEM_REG")
    }

    fn remove_mem_region(&mut self, _region: &VhostUserSingleMemoryRegion) -> VuResult<()> {
        self.unsupported("REM_MEM_REG")
    }

    fn set_device_state_fd(
        &mut self,
        _direction: VhostTransferStateDirection,
        _phase: VhostTransferStatePhase,
        _fd: File,
    ) -> VuResult<Option<File>> {
        self.unsupported("SET_DEVICE_STATE_FD")
    }

    fn check_device_state(&mut self) -> VuResult<()> {
        self.unsupported("CHECK_DEVICE_STATE")
    }

    fn get_shmem_config(&mut self) -> VuResult<VhostUserShMemConfig> {
        self.unsupported("GET_SHMEM_CONFIG")
    }

    fn set_log_base(&mut self, _log: &VhostUserLog, _file: File) -> VuResult<()> {
        self.unsupported("SET_LOG_BASE")
    }
}

/// A `vhostuser` or `vhostuserclient` port.
pub struct VhostPort {
    name: String,
    opts: VhostOptions,
    socket: PathBuf,
    shared: Arc<Shared>,
    rxq_taken: Vec<bool>,
    n_txq: usize,
    control: Option<JoinHandle<()>>,
}

impl VhostPort {
    /// Opens port `name`: a `vhostuser` port binds its socket now (an error names the path
    /// and the reason); a `vhostuserclient` port starts trying to connect. Either way the
    /// guest may come and go from then on.
    pub fn open(name: &str, opts: VhostOptions) -> Result<VhostPort, PortError> {
        opts.check()?;
        let socket = opts.socket(name);
        let io_err = |what: String| move |source| PortError::Io { what, source };
        let listener = if opts.client {
            None
        } else {
            Some(listen(&socket, "vhost-server-path")?)
        };
        let stats = |n| (0..n).map(|_| QueueStats::shared()).collect::<Vec<_>>();
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            slots: (0..2 * opts.queues).map(|_| Mutex::new(None)).collect(),
            rx_stats: stats(opts.queues),
            tx_stats: stats(opts.queues),
            n_tx_rings: AtomicUsize::new(0),
            resets: AtomicU64::new(0),
            copy_trials: AtomicU64::new(0),
            copy_movsb: AtomicU64::new(0),
            copy_last: AtomicU64::new(0),
            status: Mutex::new(Status::default()),
            stop: AtomicBool::new(false),
            conn: Mutex::new(None),
        });
        let control = {
            let (shared, opts, socket) = (shared.clone(), opts.clone(), socket.clone());
            std::thread::Builder::new()
                .name(format!("vhost-{name}"))
                .spawn(move || control(&shared, &opts, &socket, listener))
                .map_err(io_err("starting the vhost-user thread".into()))?
        };
        Ok(VhostPort {
            name: name.to_owned(),
            rxq_taken: vec![false; opts.queues],
            opts,
            socket,
            shared,
            n_txq: 0,
            control: Some(control),
        })
    }

    /// The socket's path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Whether a front-end is connected.
    pub fn connected(&self) -> bool {
        lock(&self.shared.status).connected
    }

    /// Vrings started (ready for traffic): twice the queue pairs in use.
    pub fn started_vrings(&self) -> usize {
        lock(&self.shared.status).started
    }

    /// Rings taken out of service for breaking the virtio rules.
    pub fn resets(&self) -> u64 {
        self.shared.resets.load(Relaxed)
    }

    /// Connections accepted or made so far.
    pub fn connections(&self) -> u64 {
        lock(&self.shared.status).connections
    }
}

/// Binds the socket at `path` for a port that listens (an error names option `key`, `path`
/// and the reason). A socket left by an earlier run is replaced; anything else at the path is
/// not.
pub(crate) fn listen(path: &Path, key: &str) -> Result<UnixListener, PortError> {
    let io_err = |what: String| move |source| PortError::Io { what, source };
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !m.file_type().is_socket() {
            return Err(PortError::BadOption(format!(
                "{key}: {} exists and is not a socket",
                path.display()
            )));
        }
        std::fs::remove_file(path).map_err(io_err(format!(
            "removing the old socket {}",
            path.display()
        )))?;
    }
    let l = UnixListener::bind(path).map_err(io_err(format!("listening on {}", path.display())))?;
    l.set_nonblocking(true)
        .map_err(io_err(format!("listening on {}", path.display())))?;
    Ok(l)
}

/// Stops a port's control thread: tells it to (`stop`), shuts its connection down so that a
/// read it is blocked in returns, and waits for it.
pub(crate) fn stop_control(
    stop: &AtomicBool,
    conn: &Mutex<Option<UnixStream>>,
    control: Option<JoinHandle<()>>,
) {
    stop.store(true, Relaxed);
    if let Some(c) = lock(conn).as_ref() {
        let _ = c.shutdown(std::net::Shutdown::Both);
    }
    if let Some(t) = control {
        let _ = t.join();
    }
}

impl Drop for VhostPort {
    fn drop(&mut self) {
        stop_control(&self.shared.stop, &self.shared.conn, self.control.take());
        for i in 0..self.shared.slots.len() {
            self.shared.take(i);
        }
        if !self.opts.client {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

/// Sleeps `d` in small steps; false when the port is closing (`stop`).
pub(crate) fn nap(stop: &AtomicBool, d: Duration) -> bool {
    let step = Duration::from_millis(20);
    let mut left = d;
    while !stop.load(Relaxed) {
        if left.is_zero() {
            return true;
        }
        let s = left.min(step);
        std::thread::sleep(s);
        left -= s;
    }
    false
}

/// The control thread: waits for (or makes) a connection, serves it until it ends, and
/// starts over until the port closes.
fn control(
    shared: &Arc<Shared>,
    opts: &VhostOptions,
    socket: &Path,
    listener: Option<UnixListener>,
) {
    let mut peer = Peer::new("vhost", &shared.name, listener, socket);
    while !shared.stop.load(Relaxed) {
        let Some(stream) = peer.next(&shared.stop) else {
            continue;
        };
        if stream.set_nonblocking(false).is_err() {
            continue;
        }
        serve(shared, opts, stream);
    }
}

/// Where a control thread finds its peer: accepted on a listening socket or, without one,
/// connected to `path`.
pub(crate) struct Peer<'a> {
    /// `vhost` or `virtio_user`, for the log lines.
    kind: &'static str,
    name: &'a str,
    listener: Option<UnixListener>,
    path: &'a Path,
    /// The "waiting" line was printed since the last connection.
    told_waiting: bool,
}

impl<'a> Peer<'a> {
    pub(crate) fn new(
        kind: &'static str,
        name: &'a str,
        listener: Option<UnixListener>,
        path: &'a Path,
    ) -> Peer<'a> {
        Peer {
            kind,
            name,
            listener,
            path,
            told_waiting: false,
        }
    }

    /// Whether the port listens (rather than connects).
    pub(crate) fn listens(&self) -> bool {
        self.listener.is_some()
    }

    /// The next connection; `None` (after a nap) when there is none yet, or the port is
    /// closing (`stop`): the caller checks and asks again.
    pub(crate) fn next(&mut self, stop: &AtomicBool) -> Option<UnixStream> {
        let (kind, name) = (self.kind, self.name);
        let stream = match &self.listener {
            Some(l) => match l.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    nap(stop, Duration::from_millis(20));
                    return None;
                }
                Err(e) => {
                    eprintln!("flowpath: {kind} port '{name}': accept: {e}");
                    nap(stop, RECONNECT);
                    return None;
                }
            },
            None => match UnixStream::connect(self.path) {
                Ok(s) => s,
                Err(e) => {
                    if !self.told_waiting {
                        self.told_waiting = true;
                        eprintln!(
                            "flowpath: {kind} port '{name}': waiting for {} ({e}); retrying \
                             every {} ms",
                            self.path.display(),
                            RECONNECT.as_millis()
                        );
                    }
                    nap(stop, RECONNECT);
                    return None;
                }
            },
        };
        self.told_waiting = false;
        Some(stream)
    }
}

/// Serves one connection until the front-end goes away (or breaks the protocol) or the port
/// closes; then every ring of it is stopped and its memory released.
fn serve(shared: &Arc<Shared>, opts: &VhostOptions, stream: UnixStream) {
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    *lock(&shared.conn) = Some(clone);
    if shared.stop.load(Relaxed) {
        return;
    }
    {
        let mut st = lock(&shared.status);
        *st = Status {
            connected: true,
            connections: st.connections + 1,
            ..Status::default()
        };
    }
    eprintln!("flowpath: vhost port '{}': connected", shared.name);
    let handler = Arc::new(Mutex::new(Handler::new(shared.clone(), opts.clone())));
    let mut req = BackendReqHandler::from_stream(stream, handler.clone());
    let why = loop {
        if shared.stop.load(Relaxed) {
            break None;
        }
        match req.handle_request() {
            Ok(()) => {}
            Err(VuError::Disconnected | VuError::PartialMessage) => break None,
            Err(VuError::SocketBroken(e)) if e.kind() == io::ErrorKind::ConnectionReset => {
                break None;
            }
            // DPDK's virtio_user (22.11) in server mode, on a reconnection, stops the old
            // device on the new connection first: SET_VRING_ENABLE before any SET_FEATURES,
            // which rust-vmm's handler refuses (InactiveFeature) after reading the whole
            // message. Nothing is owed to the front-end (no REPLY_ACK yet): carry on.
            Err(VuError::InactiveFeature(f)) => {
                eprintln!(
                    "flowpath: vhost port '{}': ignoring a request that needs feature {f:?} \
                     before it was negotiated",
                    shared.name
                );
            }
            Err(e) => break Some(e),
        }
    };
    drop(req);
    *lock(&shared.conn) = None;
    lock(&handler).stop_all();
    drop(handler);
    lock(&shared.status).connected = false;
    match why {
        Some(e) if !shared.stop.load(Relaxed) => eprintln!(
            "flowpath: vhost port '{}': closing the connection: {e}",
            shared.name
        ),
        _ => eprintln!("flowpath: vhost port '{}': disconnected", shared.name),
    }
}

/// Rx queue `k`: the guest's transmit ring, vring `2k + 1`.
struct VhostRxq {
    shared: Arc<Shared>,
    vring: usize,
    in_port: u32,
    stats: Arc<QueueStats>,
    /// The chains the last burst lent.
    lent: Lent,
}

impl RxQueue for VhostRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let Some(mut slot) = try_lock(&self.shared.slots[self.vring]) else {
            return 0;
        };
        let Some(ring) = slot.as_mut() else {
            // The ring is gone: nothing lent from it can go back, and its memory may go.
            self.lent.forget();
            return 0;
        };
        let before = batch.len();
        let mut counts = [0u64; 3];
        if let Err(BadRing(why)) = ring.recv(pool, batch, self.in_port, &mut counts, &mut self.lent)
        {
            self.shared
                .bad_ring(&mut slot, self.vring, why, &self.stats);
        }
        drop(slot);
        self.stats.count_rx(counts[0], counts[1], counts[2], 0);
        batch.len() - before
    }

    fn release(&mut self) {
        if self.lent.n == 0 {
            return;
        }
        // When the control thread has the ring, the next `recv` gives the chains back.
        let Some(mut slot) = try_lock(&self.shared.slots[self.vring]) else {
            return;
        };
        match slot.as_mut() {
            Some(ring) => ring.give_back(&mut self.lent),
            None => self.lent.forget(),
        }
    }
}

/// Tx queue `k`: sends on the guest's receive ring `k mod n` of the `n` started ones.
struct VhostTxq {
    shared: Arc<Shared>,
    k: usize,
    copy: CopyChooser,
}

impl TxQueue for VhostTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let n = self.shared.n_tx_rings.load(Relaxed);
        let mut counts = [0u64; 3];
        // Counted on the guest receive ring used (the queue's own when none is started).
        let pair = if n == 0 {
            self.k % self.shared.tx_stats.len()
        } else {
            self.k % n
        };
        let stats = &self.shared.tx_stats[pair];
        if n == 0 {
            counts[2] = batch.len() as u64;
        } else {
            let vring = 2 * pair;
            let mut slot = lock(&self.shared.slots[vring]);
            match slot.as_mut() {
                Some(ring) => {
                    let t0 = self.copy.timing().then(datapath::tsc::now);
                    let sent = ring.send(batch, &mut counts, pool, self.copy.how());
                    let cycles = t0.map_or(0, |t0| datapath::tsc::now().wrapping_sub(t0));
                    if let Some(how) = self.copy.record(cycles, counts[1]) {
                        let sh = &self.shared;
                        sh.copy_trials.fetch_add(1, Relaxed);
                        sh.copy_movsb
                            .fetch_add(u64::from(how == LongCopy::RepMovsb), Relaxed);
                        sh.copy_last.store(how as u64, Relaxed);
                    }
                    if let Err(BadRing(why)) = sent {
                        self.shared.bad_ring(&mut slot, vring, why, stats);
                    }
                }
                None => counts[2] = batch.len() as u64,
            }
        }
        pool.free_batch(batch);
        stats.count_tx(counts[0], counts[1], counts[2], 0);
    }

    fn takes_lent(&self) -> bool {
        true
    }
}

impl Port for VhostPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        self.opts.kind()
    }

    fn options(&self) -> String {
        let st = lock(&self.shared.status).clone();
        let mut s = format!("{{vhost-server-path={}", self.socket.display());
        if self.opts.queues != 1 {
            let _ = write!(s, ", n_rxq={}", self.opts.queues);
        }
        if let Some(m) = self.opts.mtu {
            let _ = write!(s, ", mtu_request={m}");
        }
        if let Some(m) = self.opts.mac {
            let _ = write!(s, ", mac={}", EthernetAddress(m));
        }
        if st.connected {
            let _ = write!(
                s,
                ", status=connected, queues={}/{}, features={:#x} ({})",
                st.started.div_ceil(2),
                self.opts.queues,
                st.features,
                feature_names(st.features)
            );
        } else {
            s.push_str(", status=disconnected");
        }
        let resets = self.resets();
        if resets > 0 {
            let _ = write!(s, ", ring_resets={resets}");
        }
        let trials = self.shared.copy_trials.load(Relaxed);
        if trials > 0 {
            let last = if self.shared.copy_last.load(Relaxed) == LongCopy::RepMovsb as u64 {
                "rep_movsb"
            } else {
                "vector"
            };
            let _ = write!(
                s,
                ", long_copy={last} ({} of {trials} trials chose rep_movsb)",
                self.shared.copy_movsb.load(Relaxed)
            );
        }
        s.push('}');
        s
    }

    fn n_rxq(&self) -> usize {
        self.rxq_taken.len()
    }

    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        datapath::port::take_once(&mut self.rxq_taken, q)?;
        Some(Box::new(VhostRxq {
            shared: self.shared.clone(),
            vring: 2 * q + 1,
            in_port,
            stats: self.shared.rx_stats[q].clone(),
            lent: Lent::default(),
        }))
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        let k = self.n_txq;
        self.n_txq += 1;
        Box::new(VhostTxq {
            shared: self.shared.clone(),
            k,
            copy: CopyChooser::new(),
        })
    }

    fn counters(&self) -> PortCounters {
        datapath::port::sum_queues(&self.shared.rx_stats, &self.shared.tx_stats)
    }

    fn queue_counters(&self) -> Vec<(String, PortCounters)> {
        datapath::port::queue_rows(&self.shared.rx_stats, &self.shared.tx_stats)
    }

    fn link_up(&self) -> bool {
        self.connected() && self.started_vrings() > 0
    }
}

#[cfg(test)]
#[path = "vhost_tests.rs"]
mod tests;
