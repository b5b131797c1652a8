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
//! A control thread per port speaks the vhost-user protocol (rust-vmm's `vhost` crate decodes the
//! messages; `Handler`, in `protocol.rs`, acts on them): it maps the guest memory the front-end
//! shares (`SET_MEM_TABLE`, one `mmap` per region through `vm-memory`), learns each vring's size,
//! addresses, base and eventfds, and when a vring is complete and enabled it builds a
//! `virtio-queue` [`Queue`](virtio_queue::Queue) on that memory and puts it in the vring's slot.
//! Vring `2k + 1` (the guest's transmit ring) is rx queue `k` of the port; vring `2k` (the guest's
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
//! and UDP ones (`GSO_UDP_L4`, when the guest accepted `HOST_USO`) become one packet with
//! `gso_size` set. A UDP super-frame reaches the port whole (with `tso`) and goes into the
//! guest's ring whole (`gso_type` `UDP_L4`) where the guest accepted `GUEST_USO4`/`GUEST_USO6`
//! for its IP version, else as its datagrams. A sent frame takes as many of the guest's receive
//! chains as it needs (`VIRTIO_NET_F_MRG_RXBUF`, the header's `num_buffers` says how many);
//! when the guest has not posted enough, the frame is dropped and counted in the queue's
//! `tx_dropped` (the guest ring is full), and nothing of it is used. With `tso` a TCP
//! super-frame reaches the port whole: it goes into the guest's ring whole, with a header
//! that has the guest's stack take it as one (`NEEDS_CSUM`, `gso_type`, `gso_size`), where the
//! guest accepted `GUEST_TSO4`/`GUEST_TSO6` for its IP version (and `GUEST_ECN` if it has
//! CWR set); else as its segments. Without `tso` the switch segments it before the port. With
//! `gro` too (the default), the segments of one TCP connection in a transmit burst (from a
//! tunnel, an AF_PACKET port, a guest without TSO) are merged into super-frames
//! ([`datapath::gro`], Linux's rules) for a guest that takes them; `xstats` count them
//! (`tx_gro_frames`, `tx_gro_segments`).
//!
//! # Features
//! Offered: `VERSION_1`, `MRG_RXBUF`, `MQ` and `CTRL_VQ` (the control queue stays with the
//! front-end, as with every vhost-user net device), `RING_INDIRECT_DESC`, `IN_ORDER` (chains
//! are used in the order they were made available, in both directions), `CSUM`,
//! `HOST_TSO4/6`, `HOST_ECN` and `HOST_USO` with `tso` (the guest may hand over partial
//! checksums, TCP super-frames and UDP ones), `GUEST_CSUM`, `GUEST_TSO4/6`, `GUEST_ECN` and
//! `GUEST_USO4/6` with `tso` (the guest takes TCP and UDP super-frames), `MAC` and `MTU` when
//! configured, and the vhost-user `PROTOCOL_FEATURES`
//! with `MQ`, `REPLY_ACK` and (with a MAC or MTU) `CONFIG`. Split rings only: `virtio-queue`
//! does not process packed rings, so `RING_PACKED` is not offered.
//!
//! # Bad guests
//! Everything the guest wrote is read through `vm-memory`'s bounds-checked accessors, so a
//! descriptor pointing outside the mapped regions is an error, never a stray read or write. A chain
//! that loops or is longer than the ring, that points outside guest memory, that has a write-only
//! buffer where the device reads (or the reverse), a header shorter than
//! [`vnet::HDR_LEN`](crate::vnet::HDR_LEN), or an available index more than a ring ahead, takes the
//! ring out of service: the queue counts an error and a reset (`port/stats`, `dpif/show`), and the
//! ring stays idle until the front-end sets it up again (a new `SET_VRING_*` sequence or a
//! reconnect). A front-end that closes mid-message is a disconnect like any other.

#[cfg(test)]
mod adversarial_tests;
mod copy;
mod features;
#[doc(hidden)]
pub mod fuzzing;
pub mod fuzzing_messages;
#[cfg(test)]
mod gso_tests;
mod guest_memory;
mod options;
mod protocol;
mod socket;
mod split_ring;
#[cfg(test)]
mod tests;
mod vring;

use std::fmt::Write as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;

use datapath::packet::{Batch, MAX_BURST, Packet, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};
use wire::EthernetAddress;

pub use crate::afpacket::PortError;

use self::copy::{CopyChooser, LongCopy};
pub(crate) use self::features::{
    F_MQ, F_MRG_RXBUF, F_PROTOCOL_FEATURES, F_VERSION_1, feature_names,
};
pub use self::options::VhostOptions;
pub(crate) use self::options::mac_option;
use self::protocol::control;
pub use self::socket::RECONNECT;
pub(crate) use self::socket::{Peer, listen, nap, stop_control};
pub(crate) use self::split_ring::AVAIL_F_NO_INTERRUPT;
use self::split_ring::BadRing;
use self::vring::{Lent, Ring};

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
    /// Super-frames the transmit queues made of segments ([`VhostOptions::gro`]), and the
    /// segments they took.
    gro_frames: AtomicU64,
    gro_segments: AtomicU64,
    /// Frames the rings dropped for their virtio-net header, by reason.
    rx_drops: Arc<crate::vnet::RxDrops>,
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
    /// Vrings started, and the most started at once during this connection.
    started: usize,
    most_started: usize,
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
    /// A port's shared state with `queues` queue pairs, no connection and no ring started.
    fn new(name: &str, queues: usize) -> Shared {
        let stats = |n| (0..n).map(|_| QueueStats::shared()).collect::<Vec<_>>();
        Shared {
            name: name.to_owned(),
            slots: (0..2 * queues).map(|_| Mutex::new(None)).collect(),
            rx_stats: stats(queues),
            tx_stats: stats(queues),
            n_tx_rings: AtomicUsize::new(0),
            resets: AtomicU64::new(0),
            copy_trials: AtomicU64::new(0),
            copy_movsb: AtomicU64::new(0),
            copy_last: AtomicU64::new(0),
            gro_frames: AtomicU64::new(0),
            gro_segments: AtomicU64::new(0),
            rx_drops: Arc::default(),
            status: Mutex::new(Status::default()),
            stop: AtomicBool::new(false),
            conn: Mutex::new(None),
        }
    }

    /// Takes ring `i` out of its slot (waiting for a PMD's burst on it to end).
    fn take(&self, i: usize) -> Option<Ring> {
        lock(&self.slots[i]).take()
    }

    fn update_started(&self) {
        let started: Vec<bool> = self.slots.iter().map(|s| lock(s).is_some()).collect();
        let lead = started.iter().step_by(2).take_while(|s| **s).count();
        self.n_tx_rings.store(lead, Relaxed);
        let mut st = lock(&self.status);
        st.started = started.iter().filter(|s| **s).count();
        st.most_started = st.most_started.max(st.started);
    }

    #[cold]
    fn bad_ring(&self, slot: &mut Option<Ring>, vring: usize, why: &str, stats: &QueueStats) {
        *slot = None;
        stats.errors.fetch_add(1, Relaxed);
        self.resets.fetch_add(1, Relaxed);
        crate::log::log_rl(
            &crate::log::PEER,
            vlog::Level::Warn,
            &format!(
                "vhost port '{}': vring {vring} reset: {why}; idle until the guest sets it up \
                 again",
                self.name
            ),
        );
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
    /// Whether the guest is offered TSO both ways (`csum_offload` and `tso`).
    fn offers_tso(&self) -> bool {
        self.opts.csum_offload && self.opts.tso
    }

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
        let shared = Arc::new(Shared::new(name, opts.queues));
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
    /// `GUEST_TSO4/6` are offered: super-frames come whole, and the ring sends them whole or
    /// segmented by what the guest accepted.
    tso: bool,
    /// With `gro`: where a burst's packets go while their segments merge (room for a burst).
    gro: Option<Vec<Packet>>,
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
                    if let Some(scratch) = &mut self.gro
                        && ring.takes_super_frames()
                    {
                        let m = datapath::gro::coalesce(batch, pool, scratch);
                        if m.frames > 0 {
                            self.shared.gro_frames.fetch_add(m.frames, Relaxed);
                            self.shared.gro_segments.fetch_add(m.segments, Relaxed);
                        }
                    }
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

    fn tso(&self) -> bool {
        self.tso
    }

    /// UDP super-frames too: the ring sends them whole to a guest that accepted
    /// `GUEST_USO4/6`, as datagrams to one that did not.
    fn uso(&self) -> bool {
        self.tso
    }

    /// UFO super-frames too: the ring sends them whole to a guest that accepted `GUEST_UFO`,
    /// as IP fragments to one that did not.
    fn ufo(&self) -> bool {
        self.tso
    }

    fn takes_lent(&self) -> bool {
        true
    }

    /// Frames whose checksum is pending go to a guest that accepted `GUEST_CSUM` as
    /// `NEEDS_CSUM`, completed for one that did not.
    fn tx_csum(&self) -> bool {
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
            tso: self.offers_tso(),
            gro: (self.offers_tso() && self.opts.gro).then(|| Vec::with_capacity(MAX_BURST)),
        })
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let sh = &self.shared;
        let mut x: Vec<(String, u64)> = sh.rx_drops.xstats().collect();
        if self.offers_tso() && self.opts.gro {
            x.push(("tx_gro_frames".to_owned(), sh.gro_frames.load(Relaxed)));
            x.push(("tx_gro_segments".to_owned(), sh.gro_segments.load(Relaxed)));
        }
        x
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
