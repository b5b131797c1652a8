//! One AF_XDP socket (XSK): its UMEM (the frame area shared with the kernel, rx frames then
//! tx frames), its rings mapped and the fill ring stocked, bound to one queue of the interface
//! in copy or zero-copy mode; what libbpf's `xsk_socket__create` and OVS's `xsk_configure` do.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use datapath::port::QueueStats;

use super::error::Fail;
use super::if_xdp::*;
use super::options::ZeroCopy;
use super::ring::{Mmap, Ring};
use super::rx::RxSide;
use super::tx::TxSide;
use crate::bpf::AttachMode;

/// An AF_XDP socket with its UMEM and ring mappings. Shared by its rx side, its tx side and
/// the port; closed when the last of them goes.
///
/// Fields drop in order: the socket first (the kernel unbinds it and stops using the rings
/// and the UMEM, whose pages it keeps pinned until its deferred release), then the mappings.
pub(super) struct Xsk {
    pub(super) fd: OwnedFd,
    pub(super) umem: Mmap,
    pub(super) _rings: Vec<Mmap>,
    pub(super) qid: u32,
    pub(super) zero_copy: bool,
}

impl Xsk {
    pub(super) fn stats(&self) -> Option<XdpStatistics> {
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
pub(super) struct XskConfig {
    pub(super) ifindex: u32,
    pub(super) qid: u32,
    pub(super) rx_frames: u32,
    pub(super) tx_frames: u32,
    pub(super) frame_size: u32,
    pub(super) ring_size: u32,
    /// With an rx ring (else tx only).
    pub(super) rx: bool,
    pub(super) zero_copy: bool,
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
pub(super) fn wakeup(fd: RawFd, tx: bool) -> isize {
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

/// [`create_xsk`] with zero-copy as `zero_copy` asks, the program running in `mode`: `auto`
/// tries zero-copy in native mode and falls back to copy.
pub(super) fn create_xsk_in_mode(
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
