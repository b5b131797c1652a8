//! The `afpacket` port: a Linux network interface (a veth end, a NIC the kernel drives)
//! through `AF_PACKET` sockets.
//!
//! # Receive
//! Each rx queue has a socket with a `TPACKET_V3` ring mapped into the process
//! (Documentation/networking/packet_mmap.rst): the kernel fills blocks of frames and hands a
//! block over by setting `TP_STATUS_USER` in its header; [`RxQueue::recv`] checks the status
//! word of the current block (no system call, never blocks), copies frames into pool buffers,
//! and gives a block back by storing `TP_STATUS_KERNEL`. A block that is only partly full is
//! handed over after the retire timeout (`retire_ms`, 1 ms by default). With several rx
//! queues, the sockets form a `PACKET_FANOUT_HASH` group, so each flow goes to one queue; the
//! kernel picks the group's id (`PACKET_FANOUT_FLAG_UNIQUEID`), so no other port or process
//! can share it by chance.
//!
//! What the ring shows is not always the frame as it was on the wire, and rx puts it back:
//! - the kernel strips a VLAN tag into the frame's metadata (`TP_STATUS_VLAN_VALID`,
//!   `tp_vlan_tci`, `tp_vlan_tpid`): rx re-inserts the 802.1Q (or 802.1ad) header after the
//!   MAC addresses;
//! - a frame sent by the local stack of the peer (a veth end in a namespace) may carry a
//!   partial checksum (`TP_STATUS_CSUMNOTREADY`, checksum offload): rx leaves the TCP or UDP
//!   checksum over IPv4 or IPv6 (after hop-by-hop, routing and destination options headers)
//!   pending ([`datapath::csum_pending`]: completed where the frame leaves by a port that
//!   cannot hand it on partial); one it cannot find is a counted `rx_dropped`;
//! - packets sent on the interface (`PACKET_OUTGOING`: our own transmissions, and the
//!   host's) are skipped (`PACKET_IGNORE_OUTGOING` where the kernel has it, and a check of
//!   each frame's `sll_pkttype` in any case).
//!
//! A frame larger than the ring's block (or a GSO super-frame the kernel did not segment, as
//! a veth peer with TSO/GSO on sends) is not segmented here: a truncated one is counted in
//! `rx_dropped`, and one over the MTU that the datapath then outputs to another kernel port
//! is refused there. Turn segmentation offloads off on the peer (`ethtool -K PEER tso off gso
//! off`), as for OVS's AF_PACKET ports.
//!
//! # Transmit
//! Every tx queue (one per PMD thread) has its own socket bound to the interface, with
//! `PACKET_QDISC_BYPASS` by default, and sends a burst with one `sendmmsg(2)`
//! (non-blocking). A frame the kernel refuses (larger than the MTU: `EMSGSIZE`) is counted in
//! `tx_dropped`, and so is the rest of a burst when the device's queue is full
//! (`ENOBUFS`/`EAGAIN`) or the link is down (`ENETDOWN`): no failing system call per frame.
//!
//! # Interfaces that go away
//! When the interface is deleted (a veth end removed), its sockets stop working for good: a
//! new interface of the same name has another index. The queues notice and recover by
//! themselves, at no cost to the packet path while the link is fine:
//! - rx checks its interface every ~100 ms (a clock read every 64 polls, then one `ioctl` by
//!   name, and one `getsockopt` for the ring's drop count): gone, it counts an error and
//!   closes its socket; back (same name, any index), it opens a new socket in the same
//!   namespace and traffic flows again. With several queues, the first to reopen makes a new
//!   fanout group for the new interface and the others join it;
//! - tx sees `ENXIO`/`ENODEV` from the kernel, counts an error and drops the burst, then tries
//!   to reopen on the next send, and after that at most every 100 ms while it has no socket.
//!
//! [`AfPacketPort::link_up`] asks the kernel whether the interface exists, is up and has
//! carrier.

use std::fmt::Write as _;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datapath::csum_pending::L4Csum;
use datapath::packet::{Batch, MAX_BURST, Packet, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};

use crate::netns;

/// How often a queue whose interface is gone (or an idle rx queue) checks on it.
pub const RECHECK: Duration = Duration::from_millis(100);

/// For a check made at most every [`RECHECK`]: whether it is due now (`*next` has passed),
/// moving `*next` a period on when it is.
pub(crate) fn due(next: &mut Instant) -> bool {
    let now = Instant::now();
    if now < *next {
        return false;
    }
    *next = now + RECHECK;
    true
}

/// Polls between two clock reads of an rx queue.
const POLLS_PER_CLOCK: u32 = 64;

/// Why a kernel port could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// An option had a bad value.
    #[error("{0}")]
    BadOption(String),
    /// No interface of that name (in that namespace).
    #[error("no interface '{ifname}'{}", ns_suffix(.netns))]
    NoSuchInterface {
        ifname: String,
        netns: Option<String>,
    },
    /// The process lacks a capability.
    #[error("{what}: permission denied (needs root or {cap})")]
    Permission { what: String, cap: &'static str },
    /// Any other error from the kernel.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

fn ns_suffix(netns: &Option<String>) -> String {
    match netns {
        Some(n) => format!(" in network namespace '{n}'"),
        None => String::new(),
    }
}

impl PortError {
    /// `e` while doing `what`; a permission error names the capability `cap`.
    pub(crate) fn os(what: impl Into<String>, e: io::Error, cap: &'static str) -> PortError {
        match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => PortError::Permission {
                what: what.into(),
                cap,
            },
            _ => PortError::Io {
                what: what.into(),
                source: e,
            },
        }
    }
}

/// A boolean option of a kernel port (`true`/`false`, `1`/`0`, `yes`/`no`).
pub(crate) fn flag(key: &str, value: &str) -> Result<bool, PortError> {
    match value {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(PortError::BadOption(format!(
            "{key}: '{value}' is not true or false"
        ))),
    }
}

/// The error for option `key`, which port type `kind` does not take: it lists the ones it does.
pub(crate) fn unknown_option(key: &str, kind: &str, known: &[&str]) -> PortError {
    PortError::BadOption(format!(
        "unknown option '{key}' for type {kind} (known: {})",
        known.join(", ")
    ))
}

/// Maps `len` bytes of `fd` from offset 0, shared and read-write, at an address the kernel
/// picks (the ring of a packet socket, the guest memory of a `virtio_user` port).
pub(crate) fn mmap_shared(fd: impl AsFd, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a new mapping of a descriptor that is open for the call, at an address the
    // kernel picks: it aliases no Rust object. The caller owns the mapping from here.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_fd().as_raw_fd(),
            0,
        )
    };
    if map == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(map.cast())
}

/// Options of an `afpacket` port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfPacketOptions {
    /// Interface name (`ifname`); the port's name when `None`.
    pub ifname: Option<String>,
    /// Number of rx queues (`n_rxq`, default 1); more than one form a fanout group.
    pub n_rxq: usize,
    /// Network namespace the interface lives in (`netns`, `/run/netns/NAME`); the current
    /// one when `None`.
    pub netns: Option<String>,
    /// Send without the interface's qdisc (`qdisc_bypass`, default true).
    pub qdisc_bypass: bool,
    /// Bytes of one rx ring block (`block_size`, default 128 KiB): a power of two, at least
    /// a page; also the largest frame received whole.
    pub block_size: usize,
    /// Blocks in each rx ring (`block_nr`, default 64: with the default block size 8 MiB,
    /// about 4 800 full-sized frames). A ring holds what arrives while the PMD does not run:
    /// a switch on the other end that segments one rx burst of TCP super-frames for a tunnel
    /// (32 × 64 KiB) sends about 1 440 frames at once, and a PMD on a shared core may not
    /// run between two such bursts; 8 blocks (about 600 frames) lost the rest.
    pub block_nr: usize,
    /// Milliseconds before a partly filled block is handed over (`retire_ms`, default 1).
    pub retire_ms: u32,
}

impl Default for AfPacketOptions {
    fn default() -> Self {
        AfPacketOptions {
            ifname: None,
            n_rxq: 1,
            netns: None,
            qdisc_bypass: true,
            block_size: 128 << 10,
            block_nr: 64,
            retire_ms: 1,
        }
    }
}

impl AfPacketOptions {
    /// Option names [`AfPacketOptions::set`] takes.
    pub const KEYS: &'static [&'static str] = &[
        "ifname",
        "n_rxq",
        "netns",
        "qdisc_bypass",
        "block_size",
        "block_nr",
        "retire_ms",
    ];

    /// Sets option `key` from its text form (as a configuration file gives it).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), PortError> {
        let num = |v: &str| -> Result<usize, PortError> {
            v.trim()
                .parse()
                .map_err(|_| PortError::BadOption(format!("{key}: '{v}' is not a number")))
        };
        match key {
            "ifname" => self.ifname = Some(value.to_owned()),
            "netns" => self.netns = (!value.is_empty()).then(|| value.to_owned()),
            "n_rxq" => self.n_rxq = num(value)?,
            "block_size" => self.block_size = num(value)?,
            "block_nr" => self.block_nr = num(value)?,
            "retire_ms" => self.retire_ms = num(value)? as u32,
            "qdisc_bypass" => self.qdisc_bypass = flag(key, value)?,
            _ => return Err(unknown_option(key, "afpacket", Self::KEYS)),
        }
        Ok(())
    }

    /// Checks the values (ranges, sizes) without opening anything.
    pub fn check(&self) -> Result<(), PortError> {
        let bad = |m: String| Err(PortError::BadOption(m));
        if !(1..=64).contains(&self.n_rxq) {
            return bad(format!("n_rxq: {} is not between 1 and 64", self.n_rxq));
        }
        if !self.block_size.is_power_of_two() || !(4096..=(4 << 20)).contains(&self.block_size) {
            return bad(format!(
                "block_size: {} is not a power of two from 4096 to 4 MiB",
                self.block_size
            ));
        }
        if !(2..=1024).contains(&self.block_nr) {
            return bad(format!(
                "block_nr: {} is not between 2 and 1024",
                self.block_nr
            ));
        }
        if !(1..=1000).contains(&self.retire_ms) {
            return bad(format!(
                "retire_ms: {} is not between 1 and 1000",
                self.retire_ms
            ));
        }
        Ok(())
    }
}

/// What every queue of a port needs to (re)open its socket.
struct Shared {
    ifname: String,
    netns: Option<String>,
    qdisc_bypass: bool,
    block_size: usize,
    block_nr: usize,
    retire_ms: u32,
    /// With more than one rx queue: the fanout group of the current interface instance (made
    /// by the first queue that opens on it, joined by the others; a new interface of that
    /// name gets a new group). The lock is taken only to open a ring.
    fanout: Option<Mutex<Option<FanoutGroup>>>,
    /// A datagram socket in the interface's namespace, for ioctls by name.
    ctl: OwnedFd,
}

impl Shared {
    fn ifindex(&self) -> io::Result<i32> {
        netns::ifindex(self.ctl.as_fd(), &self.ifname)
    }
}

/// A `PACKET_FANOUT_HASH` group of the port's rx sockets on interface `ifindex`.
#[derive(Clone, Copy, Debug)]
struct FanoutGroup {
    ifindex: i32,
    /// The id the kernel gave the group (`PACKET_FANOUT_FLAG_UNIQUEID`): unique in the
    /// namespace, so no other port or process can collide with it.
    id: u16,
    /// `PACKET_FANOUT_FLAG_*` the group was made with, which every member must repeat.
    flags: u32,
}

/// The `PACKET_FANOUT` argument: group id, then mode and flags in the upper half.
fn fanout_arg(id: u16, flags: u32) -> libc::c_int {
    (u32::from(id) | ((libc::PACKET_FANOUT_HASH | flags) << 16)) as libc::c_int
}

/// Puts the bound socket `fd` on interface `ifindex` in the port's fanout group: the one the
/// other queues made on that interface, or a new one (whose id is then shared).
fn join_fanout(fd: &OwnedFd, group: &Mutex<Option<FanoutGroup>>, ifindex: i32) -> io::Result<()> {
    let mut g = group.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(cur) = *g
        && cur.ifindex == ifindex
        && setsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            &fanout_arg(cur.id, cur.flags),
        )
        .is_ok()
    {
        return Ok(());
    }
    // A new group, for a new interface instance (or one whose group is gone). Not every
    // kernel has PACKET_FANOUT_FLAG_IGNORE_OUTGOING (4.20+); the per-frame check covers them.
    let mut last = io::Error::from_raw_os_error(libc::EINVAL);
    for flags in [libc::PACKET_FANOUT_FLAG_IGNORE_OUTGOING, 0] {
        let arg = fanout_arg(0, flags | libc::PACKET_FANOUT_FLAG_UNIQUEID);
        match setsockopt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg) {
            Ok(()) => {
                let mut v: libc::c_int = 0;
                let mut len = size_of::<libc::c_int>() as libc::socklen_t;
                // SAFETY: `v` and `len` describe a writable int, which PACKET_FANOUT fills
                // with the group's id, mode and flags.
                let r = unsafe {
                    libc::getsockopt(
                        fd.as_raw_fd(),
                        libc::SOL_PACKET,
                        libc::PACKET_FANOUT,
                        (&raw mut v).cast(),
                        &mut len,
                    )
                };
                if r != 0 {
                    return Err(io::Error::last_os_error());
                }
                *g = Some(FanoutGroup {
                    ifindex,
                    id: v as u16,
                    flags,
                });
                return Ok(());
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// A port on a Linux interface through `AF_PACKET` sockets.
pub struct AfPacketPort {
    name: String,
    opts: AfPacketOptions,
    shared: Arc<Shared>,
    rxqs: Vec<Option<Ring>>,
    rx_stats: Vec<Arc<QueueStats>>,
    tx_stats: Vec<Arc<QueueStats>>,
}

impl AfPacketPort {
    /// Opens the port: finds the interface and opens its rx rings (so that a missing
    /// interface or privilege is an error now, not in a PMD thread).
    pub fn open(name: &str, opts: &AfPacketOptions) -> Result<AfPacketPort, PortError> {
        opts.check()?;
        let ifname = opts.ifname.clone().unwrap_or_else(|| name.to_owned());
        netns::ifreq(&ifname).map_err(|e| PortError::BadOption(e.to_string()))?;
        let ctl = netns::control_socket(opts.netns.as_deref()).map_err(|e| {
            PortError::os(
                match &opts.netns {
                    Some(n) => format!("network namespace '{n}'"),
                    None => "control socket".into(),
                },
                e,
                "CAP_SYS_ADMIN",
            )
        })?;
        let fanout = (opts.n_rxq > 1).then(|| Mutex::new(None));
        let shared = Arc::new(Shared {
            ifname: ifname.clone(),
            netns: opts.netns.clone(),
            qdisc_bypass: opts.qdisc_bypass,
            block_size: opts.block_size,
            block_nr: opts.block_nr,
            retire_ms: opts.retire_ms,
            fanout,
            ctl,
        });
        let ifindex = shared.ifindex().map_err(|e| match e.raw_os_error() {
            Some(libc::ENODEV) => PortError::NoSuchInterface {
                ifname: ifname.clone(),
                netns: opts.netns.clone(),
            },
            _ => PortError::os(format!("interface '{ifname}'"), e, "CAP_NET_RAW"),
        })?;
        let mut rxqs = Vec::with_capacity(opts.n_rxq);
        for q in 0..opts.n_rxq {
            let ring = Ring::open(&shared, ifindex).map_err(|e| {
                PortError::os(
                    format!("AF_PACKET rx queue {q} on '{ifname}'"),
                    e,
                    "CAP_NET_RAW",
                )
            })?;
            rxqs.push(Some(ring));
        }
        Ok(AfPacketPort {
            name: name.to_owned(),
            opts: AfPacketOptions {
                ifname: Some(ifname),
                ..opts.clone()
            },
            shared,
            rxqs,
            rx_stats: (0..opts.n_rxq).map(|_| QueueStats::shared()).collect(),
            tx_stats: Vec::new(),
        })
    }

    /// Whether the interface exists, is up and has carrier (asks the kernel).
    pub fn link_up(&self) -> bool {
        netns::is_running(self.shared.ctl.as_fd(), &self.shared.ifname)
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.shared.ifname
    }
}

fn setsockopt<T>(fd: &OwnedFd, level: i32, name: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live `T` of the size given, which the kernel only reads.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn bind_ll(fd: &OwnedFd, ifindex: i32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a valid sockaddr_ll of the length given.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A packet socket created in the interface's namespace.
fn packet_socket(shared: &Shared) -> io::Result<OwnedFd> {
    netns::run_in_opt(shared.netns.as_deref(), || {
        netns::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)
    })
}

/// An rx socket and its mapped `TPACKET_V3` ring.
struct Ring {
    fd: OwnedFd,
    map: *mut u8,
    block_size: usize,
    block_nr: usize,
    ifindex: i32,
}

// SAFETY: the mapping belongs to this value alone (the kernel aside); moving it to another
// thread moves the only user-space access to it.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `map` is the mapping of `block_size * block_nr` bytes made in `open`, and
        // nothing refers to it after the ring is dropped.
        unsafe { libc::munmap(self.map.cast(), self.block_size * self.block_nr) };
    }
}

impl Ring {
    fn open(shared: &Shared, ifindex: i32) -> io::Result<Ring> {
        let fd = packet_socket(shared)?;
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V3 as libc::c_int),
        )?;
        // Not every kernel has it (4.20+); the per-frame check covers the others.
        let _ = setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1i32);
        let frame_size = 2048u32;
        let req = libc::tpacket_req3 {
            tp_block_size: shared.block_size as u32,
            tp_block_nr: shared.block_nr as u32,
            tp_frame_size: frame_size,
            tp_frame_nr: (shared.block_size as u32 / frame_size) * shared.block_nr as u32,
            tp_retire_blk_tov: shared.retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)?;
        let len = shared.block_size * shared.block_nr;
        // The ring just configured on `fd`.
        let map = mmap_shared(&fd, len)?;
        let ring = Ring {
            fd,
            map,
            block_size: shared.block_size,
            block_nr: shared.block_nr,
            ifindex,
        };
        bind_ll(&ring.fd, ifindex, libc::ETH_P_ALL as u16)?;
        // Fanout needs a bound socket.
        if let Some(group) = &shared.fanout {
            join_fanout(&ring.fd, group, ifindex)?;
        }
        Ok(ring)
    }

    /// Start of block `b` (`b < block_nr`, checked).
    #[inline]
    fn block(&self, b: usize) -> *mut u8 {
        assert!(b < self.block_nr, "block {b} of {}", self.block_nr);
        // SAFETY: `b < block_nr` (asserted), so the offset stays inside the mapping of
        // `block_size * block_nr` bytes.
        unsafe { self.map.add(b * self.block_size) }
    }

    /// The status word of block `b`, shared with the kernel.
    #[inline]
    fn status(&self, b: usize) -> &AtomicU32 {
        let p = self.block(b).wrapping_add(BLOCK_STATUS_OFS).cast::<u32>();
        // SAFETY: the word is inside the mapping (which lives as long as `self`, so as the
        // returned reference), 4-aligned (blocks are page-aligned), and only accessed
        // atomically from user space: loaded with acquire ordering before the block's
        // contents are read, stored with release ordering to hand the block back.
        unsafe { AtomicU32::from_ptr(p) }
    }

    /// A `u32` field of block `b`'s descriptor at `ofs` (a 4-aligned offset inside the
    /// descriptor, checked); read only while the block is ours.
    #[inline]
    fn block_u32(&self, b: usize, ofs: usize) -> u32 {
        assert!(ofs.is_multiple_of(4) && ofs + 4 <= BLOCK_DESC_LEN);
        // SAFETY: the field is inside the block (asserted) and so the mapping, and 4-aligned
        // (blocks are page-aligned); the block is ours (TP_STATUS_USER was loaded with
        // acquire ordering), so the kernel does not write it until it is handed back.
        unsafe { self.block(b).add(ofs).cast::<u32>().read() }
    }

    /// Kernel drops since the last call (ring full).
    fn take_drops(&self) -> u64 {
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `st` and `len` describe a writable tpacket_stats_v3.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if r == 0 { u64::from(st.tp_drops) } else { 0 }
    }
}

// Offsets in `struct tpacket_block_desc` (version, offset_to_priv, then tpacket_hdr_v1).
const BLOCK_STATUS_OFS: usize = 8;
const BLOCK_NUM_PKTS_OFS: usize = 12;
const BLOCK_FIRST_PKT_OFS: usize = 16;
/// `sizeof(struct tpacket_block_desc)`: no frame starts before it.
const BLOCK_DESC_LEN: usize = 48;
/// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`: where the `sockaddr_ll` follows.
const HDR3_LEN: usize = (size_of::<libc::tpacket3_hdr>() + 15) & !15;
/// `TPACKET3_HDRLEN`: frame header and address; the frame's data starts after them.
const HDR3_SLL_LEN: usize = HDR3_LEN + size_of::<libc::sockaddr_ll>();
/// Offset of `sll_pkttype` in `sockaddr_ll`.
const SLL_PKTTYPE_OFS: usize = 10;

struct AfPacketRxq {
    ring: Option<Ring>,
    shared: Arc<Shared>,
    /// Current block, and what is left of it when it is ours.
    block: usize,
    left: u32,
    off: usize,
    in_port: u32,
    stats: Arc<QueueStats>,
    polls: u32,
    next_check: Instant,
}

impl AfPacketRxq {
    /// Hands the current block back to the kernel and moves to the next one.
    #[inline]
    fn release(&mut self, ring_block_nr: usize) {
        if let Some(r) = &self.ring {
            r.status(self.block).store(libc::TP_STATUS_KERNEL, Release);
        }
        self.left = 0;
        self.block += 1;
        if self.block == ring_block_nr {
            self.block = 0;
        }
    }

    /// Every ~100 ms: collects the ring's drop count and checks that the interface is still
    /// the one the socket is bound to; reopens the socket when it came back.
    #[cold]
    fn housekeep(&mut self) {
        if !due(&mut self.next_check) {
            return;
        }
        if let Some(r) = &self.ring {
            let drops = r.take_drops();
            if drops > 0 {
                self.stats.rx_dropped.fetch_add(drops, Relaxed);
            }
        }
        let cur = self.ring.as_ref().map(|r| r.ifindex);
        match (self.shared.ifindex(), cur) {
            (Ok(i), Some(c)) if i == c => {}
            (Ok(i), _) => {
                // New interface of that name (or back after a loss): a new socket.
                self.ring = None;
                self.block = 0;
                self.left = 0;
                match Ring::open(&self.shared, i) {
                    Ok(r) => self.ring = Some(r),
                    Err(_) => {
                        self.stats.errors.fetch_add(1, Relaxed);
                    }
                }
            }
            (Err(_), Some(_)) => {
                // The interface is gone: its socket will never see traffic again.
                self.ring = None;
                self.block = 0;
                self.left = 0;
                self.stats.errors.fetch_add(1, Relaxed);
            }
            (Err(_), None) => {}
        }
    }
}

impl RxQueue for AfPacketRxq {
    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        // Readable once the kernel hands a block over (full, or at the retire timeout).
        self.ring.as_ref().map(|r| r.fd.as_fd())
    }

    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(POLLS_PER_CLOCK) {
            self.housekeep();
        }
        let Some(ring) = &self.ring else { return 0 };
        let (bs, nb) = (ring.block_size, ring.block_nr);
        let mut n = 0usize;
        let mut bytes = 0u64;
        let mut dropped = 0u64;
        let mut errors = 0u64;
        while batch.room() > 0 {
            let Some(ring) = &self.ring else { break };
            if self.left == 0 {
                if ring.status(self.block).load(Acquire) & libc::TP_STATUS_USER == 0 {
                    break;
                }
                self.left = ring.block_u32(self.block, BLOCK_NUM_PKTS_OFS);
                self.off = ring.block_u32(self.block, BLOCK_FIRST_PKT_OFS) as usize;
                if self.left == 0 {
                    self.release(nb);
                    continue;
                }
            }
            // The frame header and its address must lie inside the block before anything of
            // them is read (`off` comes from the kernel: the block's first-frame offset or
            // the previous frame's next offset; `bs >= 4096` leaves no underflow).
            if self.off < BLOCK_DESC_LEN || self.off > bs - HDR3_SLL_LEN {
                errors += 1;
                self.release(nb);
                continue;
            }
            let base = ring.block(self.block);
            // SAFETY: the header lies inside the block (checked above), which the kernel
            // handed to us and does not write until it is released; read unaligned, so an
            // odd offset cannot make it undefined.
            let h = unsafe {
                base.add(self.off)
                    .cast::<libc::tpacket3_hdr>()
                    .read_unaligned()
            };
            // SAFETY: inside the block, within the address checked above.
            let pkttype = unsafe { *base.add(self.off + HDR3_LEN + SLL_PKTTYPE_OFS) };
            let (mac, snap) = (usize::from(h.tp_mac), h.tp_snaplen as usize);
            // The frame must follow the header and address, and end inside the block.
            if mac < HDR3_SLL_LEN || snap > bs - self.off || mac > bs - self.off - snap {
                errors += 1;
                self.release(nb);
                continue;
            }
            if pkttype == libc::PACKET_OUTGOING {
                // Our own transmissions, or the host's: not received on this port.
            } else if snap < h.tp_len as usize || snap < 14 {
                // Truncated (larger than a block), or not even an Ethernet header.
                dropped += 1;
            } else {
                // SAFETY: `off + mac + snap <= bs`: the frame lies inside the block (checked
                // above), ours until released; the slice is dropped before that (copied).
                let frame = unsafe { std::slice::from_raw_parts(base.add(self.off + mac), snap) };
                let mut p = pool.packet_from(frame, self.in_port);
                if h.tp_status & libc::TP_STATUS_VLAN_VALID != 0 {
                    let tpid = if h.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                        h.hv1.tp_vlan_tpid
                    } else {
                        0x8100
                    };
                    let tci = h.hv1.tp_vlan_tci as u16;
                    let tag = p.insert_at(12, 4);
                    tag[..2].copy_from_slice(&tpid.to_be_bytes());
                    tag[2..].copy_from_slice(&tci.to_be_bytes());
                }
                if h.tp_status & libc::TP_STATUS_CSUMNOTREADY != 0 && !keep_pending(&mut p, batch) {
                    // A partial checksum that cannot be completed: the frame would be
                    // refused by whoever receives it.
                    pool.free(p);
                    dropped += 1;
                } else {
                    bytes += p.len() as u64;
                    batch.push(p);
                    n += 1;
                }
            }
            self.left -= 1;
            if self.left == 0 {
                self.release(nb);
            } else if h.tp_next_offset == 0 {
                errors += 1;
                self.release(nb);
            } else {
                self.off = self.off.saturating_add(h.tp_next_offset as usize);
            }
        }
        self.stats.count_rx(n as u64, bytes, dropped, errors);
        n
    }
}

/// Marks received frame `p`'s partial checksum pending ([`datapath::csum_pending`]), and its
/// batch, where it is a TCP or UDP one over IP; false for one that cannot be found.
#[inline(never)]
fn keep_pending(p: &mut Packet, batch: &mut Batch) -> bool {
    if L4Csum::find(p.data(), 0).is_none() {
        return false;
    }
    p.meta.set_csum_pending(true);
    batch.mark_gso();
    true
}

/// A tx socket bound to the interface.
struct TxSock {
    fd: OwnedFd,
}

impl TxSock {
    fn open(shared: &Shared) -> io::Result<TxSock> {
        let ifindex = shared.ifindex()?;
        let fd = packet_socket(shared)?;
        if shared.qdisc_bypass {
            setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1i32)?;
        }
        // Protocol 0: the socket sends only, and receives nothing.
        bind_ll(&fd, ifindex, 0)?;
        Ok(TxSock { fd })
    }
}

struct AfPacketTxq {
    sock: Option<TxSock>,
    shared: Arc<Shared>,
    stats: Arc<QueueStats>,
    retry_at: Instant,
}

impl AfPacketTxq {
    /// Sends `pkts` (at most [`MAX_BURST`]); returns (sent, bytes sent, dropped, errors) and,
    /// when the interface turned out to be gone, the index of the first frame not sent (the
    /// socket is then closed).
    fn send_burst(
        &mut self,
        pkts: &[datapath::packet::Packet],
    ) -> ((u64, u64, u64, u64), Option<usize>) {
        let Some(sock) = &self.sock else {
            return ((0, 0, pkts.len() as u64, 0), None);
        };
        // SAFETY: iovec and mmsghdr are plain old data; all-zero is a valid value.
        let mut iov: [libc::iovec; MAX_BURST] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; MAX_BURST] = unsafe { std::mem::zeroed() };
        for (i, p) in pkts.iter().enumerate() {
            iov[i].iov_base = p.data().as_ptr() as *mut libc::c_void;
            iov[i].iov_len = p.len();
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        let (mut sent, mut bytes, mut dropped, mut errors) = (0u64, 0u64, 0u64, 0u64);
        let mut i = 0;
        let mut gone = false;
        while i < pkts.len() {
            // SAFETY: `msgs[i..len]` are initialised headers whose iovecs point to the
            // packets' frames, alive for the call; the kernel only reads them (and writes
            // msg_len).
            let r = unsafe {
                libc::sendmmsg(
                    sock.fd.as_raw_fd(),
                    msgs.as_mut_ptr().add(i),
                    (pkts.len() - i) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                for p in &pkts[i..i + r as usize] {
                    bytes += p.len() as u64;
                }
                sent += r as u64;
                i += r as usize;
                continue;
            }
            if r == 0 {
                // Not for a non-empty vector; do not loop on it.
                dropped += (pkts.len() - i) as u64;
                errors += 1;
                break;
            }
            let e = io::Error::last_os_error().raw_os_error().unwrap_or(0);
            match e {
                libc::EINTR => continue,
                // Too large for the interface, or malformed: this frame is lost.
                libc::EMSGSIZE | libc::EINVAL => {
                    dropped += 1;
                    i += 1;
                }
                // The device's queue is full, or the link is down: the rest of the burst is
                // lost (trying each frame would be a failing system call per frame).
                libc::EAGAIN | libc::ENOBUFS | libc::ENETDOWN => {
                    dropped += (pkts.len() - i) as u64;
                    break;
                }
                // The interface is gone (perhaps already back under a new index): the caller
                // reopens and sends the rest once more.
                libc::ENXIO | libc::ENODEV => {
                    errors += 1;
                    gone = true;
                    break;
                }
                _ => {
                    dropped += 1;
                    errors += 1;
                    i += 1;
                }
            }
        }
        if gone {
            // Reopening is tried at once (the interface may be back already, under a new
            // index), then every RECHECK.
            self.sock = None;
            self.retry_at = Instant::now();
            return ((sent, bytes, dropped, errors), Some(i));
        }
        ((sent, bytes, dropped, errors), None)
    }

    #[cold]
    fn reopen(&mut self) {
        if !due(&mut self.retry_at) {
            return;
        }
        if let Ok(s) = TxSock::open(&self.shared) {
            self.sock = Some(s);
        }
    }
}

impl TxQueue for AfPacketTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        if batch.is_empty() {
            return;
        }
        if self.sock.is_none() {
            self.reopen();
        }
        let (mut sent, mut bytes, mut dropped, mut errors) = (0, 0, 0, 0);
        for chunk in batch.packets().chunks(MAX_BURST) {
            let (mut c, mut rest) = self.send_burst(chunk);
            if let Some(i) = rest.take() {
                // The socket was bound to an interface that went away. If one of that name
                // is back, the rest of the burst goes to it (once); otherwise it is lost.
                self.reopen();
                let mut again = ((0, 0, (chunk.len() - i) as u64, 0), None);
                if self.sock.is_some() {
                    again = self.send_burst(&chunk[i..]);
                }
                let ((s, b, d, e), left) = again;
                let left = left.map_or(0, |j| chunk.len() - i - j) as u64;
                c = (c.0 + s, c.1 + b, c.2 + d + left, c.3 + e);
            }
            sent += c.0;
            bytes += c.1;
            dropped += c.2;
            errors += c.3;
        }
        self.stats.count_tx(sent, bytes, dropped, errors);
        pool.free_batch(batch);
    }
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "afpacket"
    }

    fn options(&self) -> String {
        let d = AfPacketOptions::default();
        let o = &self.opts;
        let mut s = format!("{{ifname={}", self.shared.ifname);
        if o.n_rxq != d.n_rxq {
            let _ = write!(s, ", n_rxq={}", o.n_rxq);
        }
        if let Some(n) = &o.netns {
            let _ = write!(s, ", netns={n}");
        }
        if o.qdisc_bypass != d.qdisc_bypass {
            let _ = write!(s, ", qdisc_bypass={}", o.qdisc_bypass);
        }
        if o.block_size != d.block_size {
            let _ = write!(s, ", block_size={}", o.block_size);
        }
        if o.block_nr != d.block_nr {
            let _ = write!(s, ", block_nr={}", o.block_nr);
        }
        if o.retire_ms != d.retire_ms {
            let _ = write!(s, ", retire_ms={}", o.retire_ms);
        }
        s.push('}');
        s
    }

    fn n_rxq(&self) -> usize {
        self.rxqs.len()
    }

    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        let ring = self.rxqs.get_mut(q)?.take()?;
        Some(Box::new(AfPacketRxq {
            ring: Some(ring),
            shared: self.shared.clone(),
            block: 0,
            left: 0,
            off: 0,
            in_port,
            stats: self.rx_stats[q].clone(),
            polls: 0,
            next_check: Instant::now() + RECHECK,
        }))
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        let stats = QueueStats::shared();
        self.tx_stats.push(stats.clone());
        let sock = TxSock::open(&self.shared).ok();
        if sock.is_none() {
            stats.errors.fetch_add(1, Relaxed);
        }
        Box::new(AfPacketTxq {
            sock,
            shared: self.shared.clone(),
            stats,
            retry_at: Instant::now() + RECHECK,
        })
    }

    fn counters(&self) -> PortCounters {
        datapath::port::sum_queues(&self.rx_stats, &self.tx_stats)
    }

    fn queue_counters(&self) -> Vec<(String, PortCounters)> {
        datapath::port::queue_rows(&self.rx_stats, &self.tx_stats)
    }

    fn link_up(&self) -> bool {
        AfPacketPort::link_up(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_check() {
        let mut o = AfPacketOptions::default();
        o.set("ifname", "veth0").unwrap();
        o.set("n_rxq", "2").unwrap();
        o.set("qdisc_bypass", "false").unwrap();
        assert!(o.set("bogus", "1").is_err());
        assert!(o.set("n_rxq", "x").is_err());
        assert!(o.check().is_ok());
        o.block_size = 5000;
        assert!(o.check().is_err());
    }

    #[test]
    fn without_privilege_the_error_names_the_capability() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            eprintln!("SKIP without_privilege_the_error_names_the_capability: runs as root");
            return;
        }
        let e = AfPacketPort::open("lo", &AfPacketOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("needs root or CAP_NET_RAW"), "{e}");
    }

    #[test]
    fn a_missing_interface_is_a_clear_error() {
        let o = AfPacketOptions {
            ifname: Some("fpt-nosuch0".into()),
            ..Default::default()
        };
        let e = AfPacketPort::open("p0", &o).err().unwrap().to_string();
        // Without CAP_NET_RAW the control socket still works, so the name is checked first.
        assert!(e.contains("no interface 'fpt-nosuch0'"), "{e}");
        let o = AfPacketOptions {
            netns: Some("fpt-no-such-ns".into()),
            ..Default::default()
        };
        let e = AfPacketPort::open("lo", &o).err().unwrap().to_string();
        assert!(e.contains("fpt-no-such-ns"), "{e}");
    }
}
