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

mod attach;
mod error;
#[cfg(test)]
mod fake_kernel;
mod if_xdp;
mod options;
mod ring;
mod rx;
mod slot;
mod tx;
mod xsk;

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};

use crate::afpacket::RECHECK;
use crate::bpf::{AttachMode, XdpAttachment, XdpProgram, XskMap};

use self::attach::{AttachState, Shared, attach_mode, mode_name};
pub use self::error::AfXdpError;
use self::error::{AFPACKET_HINT, Fail};
pub use self::if_xdp::XdpStatistics;
pub use self::options::{AfXdpOptions, XdpMode, ZeroCopy};
use self::rx::{AfXdpRxq, RxSide};
use self::slot::{Slot, SlotState};
use self::tx::{AfXdpTxq, TxSide};
use self::xsk::{Xsk, XskConfig, create_xsk_in_mode};

/// Locks `m`, whatever a thread that panicked holding it left.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

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
