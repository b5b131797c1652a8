//! The `tap` port: a Linux TAP device (Documentation/networking/tuntap.rst), the host side
//! of a VM's NIC or a namespace's interface. What the kernel sends out of the device is what
//! the port receives, and what the port sends comes into the kernel as received on it.
//!
//! # Opening
//! [`TapPort::open`] opens `/dev/net/tun` and `TUNSETIFF`s the name with `IFF_TAP |
//! IFF_NO_PI | IFF_VNET_HDR` (and `IFF_MULTI_QUEUE` with more than one queue, one descriptor
//! per queue): this creates the device, or attaches to an existing one of that name (a
//! persistent device made with `ip tuntap add ... mode tap`, with `multi_queue` for
//! `n_rxq > 1`). With `netns=NAME` the device is looked up (or created) in namespace
//! `/run/netns/NAME`, so a tap that was moved into a namespace is found again after a
//! restart. The port then sets the link up. Descriptors are non-blocking.
//!
//! # Offloads and the virtio-net header
//! Every frame crosses the descriptor behind a 12-byte `virtio_net_hdr` (24 bytes with
//! UDP-tunnel GSO, below; `TUNSETVNETHDRSZ`,
//! in the host's byte order: the legacy layout). The port advertises checksum offload
//! (`TUNSETOFFLOAD` with `TUN_F_CSUM`, option `csum_offload`, default on): the kernel then
//! hands over frames of the local stack with a partial TCP/UDP checksum
//! (`VIRTIO_NET_HDR_F_NEEDS_CSUM`, `csum_start`/`csum_offset`). One at the frame's TCP or
//! UDP checksum field is left pending ([`datapath::csum_pending`]): completed only where it
//! leaves the switch by a port that cannot hand it on partial; any other is completed in
//! software at rx; a header whose offsets do not fit the frame is a counted `rx_dropped`.
//!
//! With option `tso` (default on, and only with `csum_offload`: the kernel ties TSO to it) the
//! port also advertises TCP segmentation offload (`TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN`):
//! the kernel then hands over TCP super-frames of up to 64 KiB (`gso_type` `TCPV4` or `TCPV6`,
//! possibly with the `ECN` bit, and `gso_size` the MSS). Each becomes one packet with
//! [`PacketMeta::gso_size`](datapath::packet::PacketMeta::gso_size) set (in a large pool
//! buffer, which the read wrote it into: no copy), and its batch is marked as holding one. Its partial TCP checksum is *not*
//! completed: whichever way it leaves the switch recomputes it ([`datapath::gso`]), which
//! saves a pass over 64 KiB. With `tso` the port also asks for UDP segmentation offload
//! (`TUN_F_USO4 | TUN_F_USO6`, Linux 6.2 and later; an older kernel refuses it and the port
//! goes on without): the kernel then hands over UDP super-frames (`gso_type` `UDP_L4`, from a
//! socket with `UDP_SEGMENT`), taken the same way ([`datapath::gso_udp`]); with it off the
//! kernel cuts them into datagrams before the tap. UFO (`gso_type` `UDP`, which Linux never
//! hands a tap reader), any GSO frame with `tso` off, a TCP `gso_size` below
//! [`datapath::gso::MIN_MSS`] and a UDP one that makes more than
//! [`datapath::gso_udp::MAX_SEGMENTS`] datagrams are dropped (counted in `rx_dropped` and
//! by reason in `xstats`, logged once per queue).
//!
//! Transmit writes a header in front of each frame with `writev(2)`: zero (no offload
//! requested) for an ordinary packet; with `csum_offload` (the tx queue says
//! [`TxQueue::tx_csum`]), for a frame whose checksum is pending `NEEDS_CSUM` at its TCP or
//! UDP checksum with the field set to the pseudo-header sum of its current headers; for a
//! super-frame (the tx queue says [`TxQueue::tso`] when `tso` is on, so the datapath hands
//! super-frames over whole)
//! `NEEDS_CSUM` with `csum_start` at the TCP header and `csum_offset` 16, the TCP checksum
//! field set to the pseudo-header sum (Linux's `CHECKSUM_PARTIAL` convention), `gso_type`
//! `TCPV4`/`TCPV6` (with `ECN` when the frame has CWR set), `gso_size` and `hdr_len` (all
//! headers): the kernel segments it, if it has to, on its way on. A UDP super-frame goes
//! whole the same way when the kernel took USO ([`TxQueue::uso`]; `NEEDS_CSUM` at the UDP
//! checksum, `csum_offset` 6, the field the pseudo-header sum of the whole datagram,
//! `gso_type` `UDP_L4`); else the datapath cuts it into datagrams first. A UFO super-frame
//! ([`datapath::gso_ufo`]) goes whole the same way (`gso_type` `UDP`) when the kernel takes UFO
//! writes (it accepts `TUN_F_UFO`: Linux 4.14 and later, which then fragments it in software
//! if it must); else the datapath cuts it into IP fragments first. A super-frame that is
//! neither TCP nor UDP over IP is a counted `tx_dropped`. With `tso` off the datapath segments super-frames
//! (from other ports) in software before they reach the queue.
//!
//! With `tso` the port also asks for UDP-tunnel GSO (`TUN_F_UDP_TUNNEL_GSO |
//! TUN_F_UDP_TUNNEL_GSO_CSUM`, Linux 6.17 and later; an older kernel refuses it and the port
//! goes on without). Granted, every frame crosses behind the longer tunnel header
//! ([`vnet_tnl::HDR_LEN`] bytes, `TUNSETVNETHDRSZ`), and a TCP or UDP (USO) super-frame the
//! datapath encapsulated whole in VXLAN or GENEVE ([`datapath::gso_tunnel`],
//! [`TxQueue::tnl_gso`]) is written whole: inner `gso_type` (`TCPV4`/`TCPV6` or `UDP_L4`)
//! OR-ed with the outer IP version's tunnel bit, `csum_start` at the inner TCP or UDP header,
//! the outer UDP and inner IP header offsets, and with the tunnel's
//! UDP checksum on, flag `UDP_TUNNEL_CSUM` with the outer checksum field the outer
//! pseudo-header sum ([`vnet_tnl`]); the kernel cuts it if it must. One whose outer lengths
//! do not fit 16 bits is cut by the datapath first. The kernel may then also hand the reader
//! encapsulated super-frames (from a VXLAN device routed into the tap, or a bridge from
//! another switch's underlay): a TCP or UDP (USO) one in VXLAN or GENEVE goes into the
//! datapath whole (counted in `xstats rx_tnl_gso_whole` or `rx_tnl_uso_whole`), popped once
//! or cut where it leaves ([`datapath::gso_tunnel`]); one behind another tunnel header, or
//! whose outer lengths pass 16 bits, is cut into its segments on receive (`rx_tnl_gso_cut`,
//! `rx_tnl_gso_cut_segments`; bad offsets are counted drops).
//!
//! With `tso` and option `gro` (default on) the TCP segments of each connection in a transmit
//! burst (up to eight connections at once, their segments interleaved or not) are first
//! merged into super-frames by Linux's GRO rules ([`datapath::gro`]): what arrives segmented (from a tunnel, an AF_PACKET or AF_XDP port)
//! reaches the kernel in one write per super-frame instead of one per segment. `port/stats`
//! counts them (`xstats tx_gro_frames`, `tx_gro_segments`). The frames sent with their
//! checksum pending are `xstats tx_csum_partial`.
//!
//! # Queues
//! Each rx queue reads its own descriptor, one `read(2)` per frame (the tun interface has no
//! batched read), copying the frame into a pool buffer. A tx queue (one per PMD) writes on
//! the descriptor of queue `k mod n_rxq` for the `k`-th tx queue opened: tun takes concurrent
//! writes on one descriptor from several threads, each `write` being a frame of its own.
//!
//! # A deleted device
//! A tap exists as long as the port holds its descriptors, unless someone deletes it
//! (`ip link del`). Its descriptors then fail (`EBADFD`): the queue counts an error, drops
//! what it was sending, and from then on, at most every 100 ms, reopens its queue as
//! [`TapPort::open`] does, which re-creates the device (in the same namespace, set up; its
//! addresses are gone, as for any new interface) or attaches to one of that name created in
//! the meantime. Nothing of this is on the packet path while the device is fine.
//! [`TapPort::link_up`] asks the kernel whether the device exists, is up and has carrier.

use std::fmt::Write as _;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use datapath::packet::{BUF_ROOM, Batch, MAX_BURST, Packet, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};

pub use crate::afpacket::PortError;
use crate::afpacket::{RECHECK, due, flag};
use crate::{netns, vnet, vnet_tnl};

/// Bytes of the virtio-net header in front of every frame (`virtio_net_hdr_mrg_rxbuf`).
pub const VNET_HDR_LEN: usize = vnet::HDR_LEN;

/// Largest frame read whole: the largest tap MTU plus Ethernet and VLAN headers.
const MAX_FRAME: usize = 65536 + 32;

/// Options of a `tap` port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapOptions {
    /// Device name (`ifname`); the port's name when `None`.
    pub ifname: Option<String>,
    /// Number of queues (`n_rxq`, default 1); more than one makes (or needs) a multi-queue
    /// device.
    pub n_rxq: usize,
    /// Network namespace of the device (`netns`); the current one when `None`.
    pub netns: Option<String>,
    /// Let the kernel hand over partial checksums, completed by rx (`csum_offload`, default
    /// true).
    pub csum_offload: bool,
    /// TCP segmentation offload both ways (`tso`, default true): the kernel hands over TCP
    /// super-frames (with `csum_offload` only), and super-frames are sent to it whole for it
    /// to segment.
    pub tso: bool,
    /// Generic receive offload on transmit (`gro`, default true, with `tso`): a connection's
    /// TCP segments that continue each other in a burst go to the kernel as one super-frame
    /// ([`datapath::gro`]), one write where there were dozens.
    pub gro: bool,
    /// Keep the device when the port closes (`persist`, default true): a restarted switch
    /// finds it again with its namespace, addresses and routes, and so do the hosts using it.
    /// `ip link del NAME` removes it.
    pub persist: bool,
}

impl Default for TapOptions {
    fn default() -> Self {
        TapOptions {
            ifname: None,
            n_rxq: 1,
            netns: None,
            csum_offload: true,
            tso: true,
            gro: true,
            persist: true,
        }
    }
}

impl TapOptions {
    /// Option names [`TapOptions::set`] takes.
    pub const KEYS: &'static [&'static str] = &[
        "ifname",
        "n_rxq",
        "netns",
        "csum_offload",
        "tso",
        "gro",
        "persist",
    ];

    /// Sets option `key` from its text form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), PortError> {
        match key {
            "ifname" => self.ifname = Some(value.to_owned()),
            "netns" => self.netns = (!value.is_empty()).then(|| value.to_owned()),
            "n_rxq" => {
                self.n_rxq = value.trim().parse().map_err(|_| {
                    PortError::BadOption(format!("n_rxq: '{value}' is not a number"))
                })?
            }
            "csum_offload" => self.csum_offload = flag(key, value)?,
            "tso" => self.tso = flag(key, value)?,
            "gro" => self.gro = flag(key, value)?,
            "persist" => self.persist = flag(key, value)?,
            _ => {
                return Err(PortError::BadOption(format!(
                    "unknown option '{key}' for type tap (known: {})",
                    Self::KEYS.join(", ")
                )));
            }
        }
        Ok(())
    }
}

impl TapOptions {
    /// Checks the values for a port called `name` without opening anything.
    pub fn check(&self, name: &str) -> Result<(), PortError> {
        if !(1..=64).contains(&self.n_rxq) {
            return Err(PortError::BadOption(format!(
                "n_rxq: {} is not between 1 and 64",
                self.n_rxq
            )));
        }
        netns::check_names(
            self.ifname.as_deref().unwrap_or(name),
            self.netns.as_deref(),
        )
        .map_err(PortError::BadOption)
    }
}

/// The device and the current descriptor of each of its queues, shared by the port and its
/// queues. The lock is taken only to open or reopen a queue.
struct TapDev {
    ifname: String,
    netns: Option<String>,
    multi: bool,
    csum_offload: bool,
    tso: bool,
    /// The kernel took UDP segmentation offload (`TUN_F_USO4 | TUN_F_USO6`) with `tso`.
    uso: AtomicBool,
    /// The kernel takes UFO writes (it accepted `TUN_F_UFO`).
    ufo: AtomicBool,
    /// The kernel took UDP-tunnel GSO (`TUN_F_UDP_TUNNEL_GSO` and its `_CSUM`) with `tso`:
    /// every frame crosses behind the tunnel header ([`vnet_tnl::HDR_LEN`] bytes).
    tnl: AtomicBool,
    persist: bool,
    /// A datagram socket in the device's namespace, for ioctls by name.
    ctl: OwnedFd,
    fds: Mutex<Vec<Arc<OwnedFd>>>,
}

/// `TUNSETOFFLOAD` bits of UDP-tunnel GSO (Linux's `if_tun.h`, 6.17 and later).
const TUN_F_UDP_TUNNEL_GSO: libc::c_uint = 0x080;
const TUN_F_UDP_TUNNEL_GSO_CSUM: libc::c_uint = 0x100;

/// Bytes of the virtio-net header on a device that took UDP-tunnel GSO (`tnl`) or not.
fn hdr_len(tnl: bool) -> usize {
    if tnl { vnet_tnl::HDR_LEN } else { VNET_HDR_LEN }
}

/// `TUNSETOFFLOAD` of `offload` on `fd`.
fn set_offload(fd: &OwnedFd, offload: libc::c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value.
    if unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETOFFLOAD,
            offload as libc::c_ulong,
        )
    } < 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn ioctl_ptr<T>(fd: &OwnedFd, req: libc::Ioctl, arg: &mut T) -> io::Result<()> {
    // SAFETY: each request used with this (TUNSETIFF, TUNSETVNETHDRSZ) reads or writes one
    // value of the type given, which `arg` points to.
    if unsafe { libc::ioctl(fd.as_raw_fd(), req, arg as *mut T) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl TapDev {
    /// Opens one queue of the device: creates the device or attaches to it.
    fn open_queue(&self) -> io::Result<OwnedFd> {
        let mut flags = libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR;
        if self.multi {
            flags |= libc::IFF_MULTI_QUEUE;
        }
        let fd = netns::run_in_opt(self.netns.as_deref(), || {
            // SAFETY: opens a path given as a NUL-terminated literal; the result is checked.
            let raw = unsafe {
                libc::open(
                    c"/dev/net/tun".as_ptr(),
                    libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
                )
            };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `raw` was just opened and nothing else owns it.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let mut r = netns::ifreq(&self.ifname)?;
            r.ifr_ifru.ifru_flags = flags as libc::c_short;
            ioctl_ptr(&fd, libc::TUNSETIFF, &mut r)?;
            Ok(fd)
        })?;
        // Both ways: a device left persistent by an earlier run goes with this port when
        // `persist` is off.
        // SAFETY: TUNSETPERSIST takes its argument by value.
        if unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                libc::TUNSETPERSIST,
                libc::c_ulong::from(self.persist),
            )
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        let offload = match (self.csum_offload, self.tso) {
            (true, true) => {
                libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN
            }
            (true, false) => libc::TUN_F_CSUM,
            (false, _) => 0,
        };
        // UFO with TSO where the kernel takes UFO writes (Linux 4.14 and later, which accept
        // `TUN_F_UFO` and fragment what is written with `gso_type` UDP in software; they
        // never hand one to the reader).
        let uso = self.csum_offload && self.tso;
        let ufo = uso && set_offload(&fd, offload | libc::TUN_F_UFO).is_ok();
        self.ufo.store(ufo, Relaxed);
        let offload = if ufo {
            offload | libc::TUN_F_UFO
        } else {
            offload
        };
        // USO with TSO where the kernel has it (Linux 6.2 and later): refused (EINVAL) by
        // older ones, which then get TSO alone.
        let with_uso = offload | libc::TUN_F_USO4 | libc::TUN_F_USO6;
        let offload = if uso && set_offload(&fd, with_uso).is_ok() {
            self.uso.store(true, Relaxed);
            with_uso
        } else {
            self.uso.store(false, Relaxed);
            set_offload(&fd, offload)?;
            offload
        };
        // UDP-tunnel GSO with TSO where the kernel has it (Linux 6.17 and later): refused
        // (EINVAL) by older ones. Granted, tun reads and writes the longer tunnel header.
        let with_tnl = offload | TUN_F_UDP_TUNNEL_GSO | TUN_F_UDP_TUNNEL_GSO_CSUM;
        let tnl = uso && set_offload(&fd, with_tnl).is_ok();
        self.tnl.store(tnl, Relaxed);
        let mut sz = hdr_len(tnl) as libc::c_int;
        ioctl_ptr(&fd, libc::TUNSETVNETHDRSZ, &mut sz)?;
        Ok(fd)
    }

    fn set_up(&self) -> io::Result<()> {
        netns::set_up(self.ctl.as_fd(), &self.ifname)
    }

    /// The descriptor of queue `q` in place of `old`, which failed: the one another queue
    /// already reopened, or a new one; and the device set up (again: whoever reopened it
    /// may have failed to). An error of that last step is returned with the descriptor,
    /// which works anyway.
    fn recover(&self, q: usize, old: &Arc<OwnedFd>) -> io::Result<(Arc<OwnedFd>, io::Result<()>)> {
        let mut fds = self.fds.lock().unwrap_or_else(|e| e.into_inner());
        let fd = if Arc::ptr_eq(&fds[q], old) {
            let fd = Arc::new(self.open_queue()?);
            fds[q] = fd.clone();
            fd
        } else {
            fds[q].clone()
        };
        drop(fds);
        Ok((fd, self.set_up()))
    }
}

/// A port on a TAP device.
pub struct TapPort {
    name: String,
    opts: TapOptions,
    dev: Arc<TapDev>,
    rxq_taken: Vec<bool>,
    rx_stats: Vec<Arc<QueueStats>>,
    tx_stats: Vec<Arc<QueueStats>>,
    /// Super-frames the tx queues made of segments, and the segments they took.
    gro_frames: Arc<AtomicU64>,
    gro_segments: Arc<AtomicU64>,
    /// Frames the tx queues handed to the kernel with their checksum pending (`NEEDS_CSUM`).
    csum_partial: Arc<AtomicU64>,
    /// Encapsulated super-frames received, handed on whole or cut ([`vnet_tnl::Rx`]).
    tnl_rx: Arc<vnet_tnl::RxCounts>,
    /// Frames the rx queues dropped for their virtio-net header, by reason.
    rx_drops: Arc<vnet::RxDrops>,
}

impl TapPort {
    /// Opens (creating it if needed) the device's queues and sets it up.
    pub fn open(name: &str, opts: &TapOptions) -> Result<TapPort, PortError> {
        opts.check(name)?;
        let ifname = opts.ifname.clone().unwrap_or_else(|| name.to_owned());
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
        let dev = TapDev {
            ifname: ifname.clone(),
            netns: opts.netns.clone(),
            multi: opts.n_rxq > 1,
            csum_offload: opts.csum_offload,
            tso: opts.tso,
            uso: AtomicBool::new(false),
            ufo: AtomicBool::new(false),
            tnl: AtomicBool::new(false),
            persist: opts.persist,
            ctl,
            fds: Mutex::new(Vec::new()),
        };
        let mut fds = Vec::with_capacity(opts.n_rxq);
        for q in 0..opts.n_rxq {
            let fd = dev.open_queue().map_err(|e| {
                let what = format!("tap '{ifname}' queue {q}");
                match e.raw_os_error() {
                    Some(libc::EINVAL) => PortError::BadOption(format!(
                        "{what}: '{ifname}' exists but is not a tap device of this kind \
                         (not a tap, or multi_queue differs from n_rxq > 1)"
                    )),
                    Some(libc::EBUSY) => PortError::BadOption(format!(
                        "{what}: '{ifname}' is in use (a single-queue tap opened elsewhere)"
                    )),
                    _ => PortError::os(what, e, "CAP_NET_ADMIN"),
                }
            })?;
            fds.push(Arc::new(fd));
        }
        *dev.fds.lock().unwrap_or_else(|e| e.into_inner()) = fds;
        dev.set_up()
            .map_err(|e| PortError::os(format!("setting '{ifname}' up"), e, "CAP_NET_ADMIN"))?;
        Ok(TapPort {
            name: name.to_owned(),
            opts: TapOptions {
                ifname: Some(ifname),
                ..opts.clone()
            },
            dev: Arc::new(dev),
            rxq_taken: vec![false; opts.n_rxq],
            rx_stats: (0..opts.n_rxq).map(|_| QueueStats::shared()).collect(),
            tx_stats: Vec::new(),
            gro_frames: Arc::default(),
            csum_partial: Arc::default(),
            tnl_rx: Arc::default(),
            gro_segments: Arc::default(),
            rx_drops: Arc::default(),
        })
    }

    /// Whether the device exists, is up and has carrier (asks the kernel).
    pub fn link_up(&self) -> bool {
        netns::is_running(self.dev.ctl.as_fd(), &self.dev.ifname)
    }

    /// Gives the device Ethernet address `mac` and the addresses `addrs` (the bridge's own
    /// port: the host uses the bridge's address through it). IPv4: the first address (the
    /// ioctl interface sets one); IPv6: all of them.
    pub fn set_addresses(
        &self,
        mac: Option<[u8; 6]>,
        addrs: &[(std::net::IpAddr, u8)],
    ) -> Result<(), PortError> {
        let d = &self.dev;
        let err =
            |what: &str, e| PortError::os(format!("{what} of '{}'", d.ifname), e, "CAP_NET_ADMIN");
        if let Some(mac) = mac {
            netns::set_mac(d.ctl.as_fd(), &d.ifname, mac)
                .map_err(|e| err("Ethernet address", e))?;
        }
        if let Some((std::net::IpAddr::V4(a), len)) = addrs.iter().find(|(a, _)| a.is_ipv4()) {
            netns::set_ipv4(d.ctl.as_fd(), &d.ifname, *a, *len)
                .map_err(|e| err("IPv4 address", e))?;
        }
        for (a, len) in addrs {
            if let std::net::IpAddr::V6(a) = a {
                netns::add_ipv6(d.netns.as_deref(), &d.ifname, *a, *len)
                    .map_err(|e| err("IPv6 address", e))?;
            }
        }
        Ok(())
    }

    /// Whether the kernel took UDP-tunnel GSO (Linux 6.17 and later, with `tso`): encapsulated
    /// TCP super-frames go to it whole.
    pub fn tunnel_gso(&self) -> bool {
        self.opts.tso && self.dev.tnl.load(Relaxed)
    }

    /// The device's name.
    pub fn ifname(&self) -> &str {
        &self.dev.ifname
    }

    fn fd(&self, q: usize) -> Arc<OwnedFd> {
        self.dev.fds.lock().unwrap_or_else(|e| e.into_inner())[q].clone()
    }
}

/// A queue's hold on its descriptor, and recovery when the device went away.
struct Link {
    dev: Arc<TapDev>,
    q: usize,
    fd: Arc<OwnedFd>,
    dead: bool,
    retry_at: Instant,
}

impl Link {
    /// The descriptor failed with `errno`: true (and the queue is dead until reopened) when
    /// that means the device is gone.
    #[cold]
    fn failed(&mut self, errno: i32) -> bool {
        if matches!(errno, libc::EBADFD | libc::ENODEV | libc::ENXIO) {
            self.dead = true;
            self.retry_at = Instant::now() + RECHECK;
            return true;
        }
        false
    }

    /// While dead, every [`RECHECK`]: tries to reopen. True when alive.
    #[cold]
    fn revive(&mut self, stats: &QueueStats) -> bool {
        if !due(&mut self.retry_at) {
            return false;
        }
        match self.dev.recover(self.q, &self.fd) {
            Ok((fd, up)) => {
                if up.is_err() {
                    stats.errors.fetch_add(1, Relaxed);
                }
                self.fd = fd;
                self.dead = false;
                true
            }
            Err(_) => {
                stats.errors.fetch_add(1, Relaxed);
                false
            }
        }
    }
}

struct TapRxq {
    link: Link,
    /// The virtio-net header of each read.
    scratch: Box<[u8]>,
    /// A large pool buffer the next read lands in: a frame longer than an ordinary buffer
    /// takes (a super-frame) is handed on in it, with no copy; a shorter one is copied into an
    /// ordinary buffer and this one waits for the next read.
    landing: Option<Packet>,
    in_port: u32,
    stats: Arc<QueueStats>,
    gso_warned: bool,
    /// Super-frames welcome: TCP ones with `tso` and `csum_offload` on, UDP ones too when
    /// the kernel took USO.
    gso: vnet::RxGso,
    drops: Arc<vnet::RxDrops>,
    /// Bytes of the virtio-net header ([`hdr_len`]).
    hdr_len: usize,
    /// A UDP-tunnel super-frame received, whose segments go on in the next bursts.
    tunnel: Option<vnet_tnl::RxTunnel>,
    /// Encapsulated super-frames handed on whole or cut (`xstats rx_tnl_*`).
    tnl_rx: Arc<vnet_tnl::RxCounts>,
}

impl TapRxq {
    #[cold]
    fn gso_frame(&mut self) {
        if !self.gso_warned {
            self.gso_warned = true;
            crate::log::log(
                vlog::Level::Warn,
                &format!(
                    "tap '{}': dropping GSO frames of a type not taken (only TCP segmentation \
                     offload is, with option tso, and an MSS of at least {})",
                    self.link.dev.ifname,
                    datapath::gso::MIN_MSS
                ),
            );
        }
    }
}

impl TapRxq {
    /// Hands on segments of the UDP-tunnel super-frame received, as many as `batch` takes
    /// (ordinary frames, their checksums complete: the batch needs no mark); returns their
    /// count and bytes.
    #[cold]
    #[inline(never)]
    fn drain_tunnel(&mut self, pool: &mut Pool, batch: &mut Batch) -> (usize, u64) {
        let Some(t) = &mut self.tunnel else {
            return (0, 0);
        };
        let got = t.drain(pool, batch);
        if t.done() {
            let t = self.tunnel.take().expect("checked");
            pool.free(t.into_packet());
        }
        got
    }

    /// A frame `p` received with a UDP-tunnel `gso_type` (the header in the scratch buffer):
    /// into `batch` whole (an encapsulated TCP or USO super-frame, counted in
    /// `rx_tnl_gso_whole` or `rx_tnl_uso_whole`) or cut into segments ([`vnet_tnl`], counted
    /// in `rx_tnl_gso_cut`), the first of them into `batch` (count and bytes returned); `None`
    /// when dropped (counted by reason).
    #[cold]
    #[inline(never)]
    fn tunnel_frame(
        &mut self,
        p: Packet,
        pool: &mut Pool,
        batch: &mut Batch,
    ) -> Option<(usize, u64)> {
        let hdr = &self.scratch[..self.hdr_len];
        let taken = if self.gso.tso && self.hdr_len == vnet_tnl::HDR_LEN {
            vnet_tnl::accept(hdr, p)
        } else {
            Err((vnet::RxDrop::GsoType, p))
        };
        if let Ok(rx) = &taken {
            self.tnl_rx.count(rx);
        }
        match taken {
            Ok(vnet_tnl::Rx::Whole { p, .. }) => {
                let bytes = p.len() as u64;
                batch.push(p);
                batch.mark_gso();
                Some((1, bytes))
            }
            Ok(vnet_tnl::Rx::Cut(t)) => {
                self.tunnel = Some(t);
                Some(self.drain_tunnel(pool, batch))
            }
            Err((e, p)) => {
                pool.free(p);
                self.drops.count(e);
                if e == vnet::RxDrop::GsoType {
                    self.gso_frame();
                }
                None
            }
        }
    }
}

impl RxQueue for TapRxq {
    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        // Segments of a tunnel super-frame still to hand on: nothing to wait for.
        (!self.link.dead && self.tunnel.is_none()).then(|| self.link.fd.as_fd())
    }

    fn empty_poll_is_syscall(&self) -> bool {
        true
    }

    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        if self.link.dead && !self.link.revive(&self.stats) {
            return 0;
        }
        let (mut n, mut bytes, mut dropped) = (0usize, 0u64, 0u64);
        if self.tunnel.is_some() {
            (n, bytes) = self.drain_tunnel(pool, batch);
        }
        let hl = self.hdr_len;
        while batch.room() > 0 && self.tunnel.is_none() {
            let mut land = self
                .landing
                .take()
                .unwrap_or_else(|| pool.packet_with_len(MAX_FRAME, self.in_port));
            let iov = [
                libc::iovec {
                    iov_base: self.scratch.as_mut_ptr().cast(),
                    iov_len: hl,
                },
                libc::iovec {
                    iov_base: land.data_mut().as_mut_ptr().cast(),
                    iov_len: land.len(),
                },
            ];
            // SAFETY: both iovecs point to live buffers of the lengths given (the header
            // scratch and the landing packet's frame), which nothing else uses meanwhile.
            let r = unsafe { libc::readv(self.link.fd.as_raw_fd(), iov.as_ptr(), 2) };
            if r < 0 {
                self.landing = Some(land);
                let e = io::Error::last_os_error().raw_os_error().unwrap_or(0);
                match e {
                    libc::EAGAIN => {}
                    libc::EINTR => continue,
                    _ => {
                        self.stats.errors.fetch_add(1, Relaxed);
                        self.link.failed(e);
                    }
                }
                break;
            }
            let len = r as usize;
            if len < hl + 14 {
                self.landing = Some(land);
                dropped += 1;
                continue;
            }
            let flen = len - hl;
            let mut p = if flen <= BUF_ROOM {
                let p = pool.packet_from(&land.data()[..flen], self.in_port);
                self.landing = Some(land);
                p
            } else {
                land.truncate(flen);
                land
            };
            let hdr = &self.scratch[..hl];
            if hdr[1] & vnet_tnl::GSO_UDP_TUNNEL != 0 {
                match self.tunnel_frame(p, pool, batch) {
                    Some((k, b)) => (n, bytes) = (n + k, bytes + b),
                    None => dropped += 1,
                }
                continue;
            }
            match vnet::accept(hdr, &mut p, self.gso) {
                Ok(false) => {}
                Ok(true) => batch.mark_gso(),
                Err(e) => {
                    pool.free(p);
                    self.drops.count(e);
                    if e == vnet::RxDrop::GsoType {
                        self.gso_frame();
                    }
                    dropped += 1;
                    continue;
                }
            }
            bytes += p.len() as u64;
            batch.push(p);
            n += 1;
        }
        self.stats.count_rx(n as u64, bytes, dropped, 0);
        n
    }
}

/// The header written in front of an ordinary frame: no offload (as many bytes of it as
/// the device's header has).
static ZERO_HDR: [u8; vnet_tnl::HDR_LEN] = [0; vnet_tnl::HDR_LEN];

struct TapTxq {
    link: Link,
    stats: Arc<QueueStats>,
    /// Super-frames go to the kernel whole (`tso`).
    tso: bool,
    /// UDP super-frames go to the kernel whole too (it took USO).
    uso: bool,
    /// UFO super-frames go to the kernel whole too (it takes UFO writes).
    ufo: bool,
    /// Encapsulated TCP and UDP super-frames go to the kernel whole too (it took UDP-tunnel
    /// GSO).
    tnl: bool,
    /// Bytes of the virtio-net header ([`hdr_len`]).
    hdr_len: usize,
    /// Frames whose checksum is pending go to the kernel as `NEEDS_CSUM` (`csum_offload`),
    /// counted here.
    csum: bool,
    csum_partial: Arc<AtomicU64>,
    /// With `gro`: where a burst's packets go while their segments merge (room for a burst),
    /// and the port's counters of what merged.
    gro: Option<(Vec<Packet>, Arc<AtomicU64>, Arc<AtomicU64>)>,
}

/// The header of super-frame `p`: an encapsulated one's tunnel header where the kernel took
/// UDP-tunnel GSO (`tnl`; else the datapath segmented it before), a plain one's in the first
/// [`VNET_HDR_LEN`] bytes.
fn gso_hdr(p: &mut Packet, tnl: bool) -> Option<[u8; vnet_tnl::HDR_LEN]> {
    if tnl && datapath::gso_tunnel::is_encapsulated(p) {
        return vnet_tnl::gso_hdr(p);
    }
    let h = vnet::gso_hdr(p)?;
    let mut full = [0u8; vnet_tnl::HDR_LEN];
    full[..h.len()].copy_from_slice(&h);
    Some(full)
}

impl TxQueue for TapTxq {
    fn tso(&self) -> bool {
        self.tso
    }

    fn uso(&self) -> bool {
        self.uso
    }

    fn ufo(&self) -> bool {
        self.ufo
    }

    fn tnl_gso(&self) -> bool {
        self.tnl
    }

    fn tx_csum(&self) -> bool {
        self.csum
    }

    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        if batch.is_empty() {
            return;
        }
        if self.link.dead && !self.link.revive(&self.stats) {
            self.stats.tx_dropped.fetch_add(batch.len() as u64, Relaxed);
            pool.free_batch(batch);
            return;
        }
        if let Some((scratch, frames, segments)) = &mut self.gro {
            let m = datapath::gro::coalesce(batch, pool, scratch);
            if m.frames > 0 {
                frames.fetch_add(m.frames, Relaxed);
                segments.fetch_add(m.segments, Relaxed);
            }
        }
        let (mut sent, mut bytes, mut dropped, mut errors) = (0u64, 0u64, 0u64, 0u64);
        let mut partial = 0u64;
        let pkts = batch.packets_mut();
        let mut i = 0;
        while i < pkts.len() {
            let mut gso = [0u8; vnet_tnl::HDR_LEN];
            let hdr: &[u8] = if pkts[i].meta.gso_size == 0 && !pkts[i].meta.csum_pending() {
                &ZERO_HDR
            } else if pkts[i].meta.gso_size == 0 {
                // Headers that no longer parse as TCP or UDP over IP: sent as they are.
                match vnet::csum_hdr(&mut pkts[i]) {
                    Some(h) => {
                        partial += 1;
                        gso[..h.len()].copy_from_slice(&h);
                        &gso
                    }
                    None => &ZERO_HDR,
                }
            } else {
                match gso_hdr(&mut pkts[i], self.tnl) {
                    Some(h) => {
                        gso = h;
                        &gso
                    }
                    None => {
                        dropped += 1;
                        i += 1;
                        continue;
                    }
                }
            };
            let p = &pkts[i];
            let iov = [
                libc::iovec {
                    iov_base: hdr.as_ptr() as *mut libc::c_void,
                    iov_len: self.hdr_len,
                },
                libc::iovec {
                    iov_base: p.data().as_ptr() as *mut libc::c_void,
                    iov_len: p.len(),
                },
            ];
            // SAFETY: both iovecs point to live buffers of the lengths given, which the
            // kernel only reads.
            let r = unsafe { libc::writev(self.link.fd.as_raw_fd(), iov.as_ptr(), 2) };
            if r >= 0 {
                sent += 1;
                bytes += p.len() as u64;
                i += 1;
                continue;
            }
            let e = io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if e == libc::EINTR {
                continue;
            }
            if self.link.failed(e) {
                errors += 1;
                dropped += (pkts.len() - i) as u64;
                break;
            }
            // Full, too large, or refused: this frame is lost.
            dropped += 1;
            if !matches!(
                e,
                libc::EAGAIN | libc::ENOBUFS | libc::EINVAL | libc::EMSGSIZE
            ) {
                errors += 1;
            }
            i += 1;
        }
        self.stats.count_tx(sent, bytes, dropped, errors);
        if partial > 0 {
            self.csum_partial.fetch_add(partial, Relaxed);
        }
        pool.free_batch(batch);
    }
}

impl Port for TapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "tap"
    }

    fn options(&self) -> String {
        let o = &self.opts;
        let mut s = format!("{{ifname={}", self.dev.ifname);
        if o.n_rxq != 1 {
            let _ = write!(s, ", n_rxq={}", o.n_rxq);
        }
        if let Some(n) = &o.netns {
            let _ = write!(s, ", netns={n}");
        }
        if !o.csum_offload {
            s.push_str(", csum_offload=false");
        }
        if !o.tso {
            s.push_str(", tso=false");
        }
        if !o.gro {
            s.push_str(", gro=false");
        }
        if !o.persist {
            s.push_str(", persist=false");
        }
        s.push('}');
        s
    }

    fn n_rxq(&self) -> usize {
        self.rxq_taken.len()
    }

    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        datapath::port::take_once(&mut self.rxq_taken, q)?;
        Some(Box::new(TapRxq {
            link: Link {
                dev: self.dev.clone(),
                q,
                fd: self.fd(q),
                dead: false,
                retry_at: Instant::now(),
            },
            scratch: vec![0u8; vnet_tnl::HDR_LEN].into_boxed_slice(),
            landing: None,
            in_port,
            stats: self.rx_stats[q].clone(),
            gso_warned: false,
            gso: vnet::RxGso {
                tso: self.opts.tso && self.opts.csum_offload,
                uso: self.dev.uso.load(Relaxed),
                // Linux never hands a tap reader UFO: a counted drop if it ever came.
                ufo: false,
            },
            drops: self.rx_drops.clone(),
            hdr_len: hdr_len(self.dev.tnl.load(Relaxed)),
            tunnel: None,
            tnl_rx: self.tnl_rx.clone(),
        }))
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        let q = self.tx_stats.len() % self.rxq_taken.len();
        let stats = QueueStats::shared();
        self.tx_stats.push(stats.clone());
        Box::new(TapTxq {
            link: Link {
                dev: self.dev.clone(),
                q,
                fd: self.fd(q),
                dead: false,
                retry_at: Instant::now(),
            },
            stats,
            tso: self.opts.tso,
            uso: self.opts.tso && self.dev.uso.load(Relaxed),
            ufo: self.opts.tso && self.dev.ufo.load(Relaxed),
            tnl: self.opts.tso && self.dev.tnl.load(Relaxed),
            hdr_len: hdr_len(self.dev.tnl.load(Relaxed)),
            csum: self.opts.csum_offload,
            csum_partial: self.csum_partial.clone(),
            gro: (self.opts.tso && self.opts.gro).then(|| {
                (
                    Vec::with_capacity(MAX_BURST),
                    self.gro_frames.clone(),
                    self.gro_segments.clone(),
                )
            }),
        })
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let mut x: Vec<(String, u64)> = self.rx_drops.xstats().collect();
        if self.opts.tso && self.opts.gro {
            x.push(("tx_gro_frames".to_owned(), self.gro_frames.load(Relaxed)));
            let segments = self.gro_segments.load(Relaxed);
            x.push(("tx_gro_segments".to_owned(), segments));
        }
        if self.opts.csum_offload {
            let n = self.csum_partial.load(Relaxed);
            x.push(("tx_csum_partial".to_owned(), n));
        }
        if self.dev.tnl.load(Relaxed) {
            x.extend(self.tnl_rx.xstats());
        }
        x
    }

    fn counters(&self) -> PortCounters {
        datapath::port::sum_queues(&self.rx_stats, &self.tx_stats)
    }

    fn queue_counters(&self) -> Vec<(String, PortCounters)> {
        datapath::port::queue_rows(&self.rx_stats, &self.tx_stats)
    }

    fn release_device(&mut self) -> io::Result<()> {
        let fd = self.fd(0);
        // SAFETY: TUNSETPERSIST takes its argument by value; `fd` is an open tap queue.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETPERSIST, 0 as libc::c_ulong) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn link_up(&self) -> bool {
        TapPort::link_up(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_privilege_the_error_names_the_capability() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            eprintln!("SKIP without_privilege_the_error_names_the_capability: runs as root");
            return;
        }
        let e = TapPort::open("fpt-noperm0", &TapOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("needs root or CAP_NET_ADMIN"), "{e}");
    }

    #[test]
    fn the_gro_option_is_a_flag_on_by_default() {
        let mut o = TapOptions::default();
        assert!(o.gro);
        o.set("gro", "false").unwrap();
        assert!(!o.gro);
        assert!(o.set("gro", "sometimes").is_err());
        assert!(TapOptions::KEYS.contains(&"gro"));
    }

    #[test]
    fn options_parse() {
        let mut o = TapOptions::default();
        o.set("n_rxq", "4").unwrap();
        o.set("netns", "vm1").unwrap();
        o.set("csum_offload", "no").unwrap();
        o.set("persist", "false").unwrap();
        o.set("tso", "false").unwrap();
        assert_eq!(o.n_rxq, 4);
        assert!(!o.csum_offload && !o.persist && !o.tso);
        assert!(o.set("persist", "maybe").is_err());
        assert!(o.set("mtu", "9000").is_err());
        let e = TapPort::open("x", &TapOptions { n_rxq: 0, ..o })
            .err()
            .unwrap();
        assert!(e.to_string().contains("n_rxq"), "{e}");
    }
}
