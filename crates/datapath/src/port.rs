//! The port abstraction between the datapath and port backends (`netdev`).
//!
//! A port is split into queues so that each PMD thread owns what it polls and sends on, with
//! no lock on the per-packet path: every rx queue is taken by exactly one PMD, and every PMD
//! opens a tx queue of its own on every port it may output to. Counters live in shared
//! [`QueueStats`] updated once per burst with relaxed atomics, so the main thread can read them
//! while traffic flows.
//!
//! A port that terminates a tunnel says which ([`Port::tunnel`], a [`TunnelKind`]): the
//! datapath's `tnl_pop` to it decapsulates as that kind says ([`crate::tunnel`]).

use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::packet::{Batch, Pool};

/// Receives bursts for one PMD.
pub trait RxQueue: Send {
    /// Appends up to `batch.room()` received packets to `batch`; returns how many. A queue
    /// that delivers TCP super-frames (`gso_size > 0`) marks the batch
    /// ([`Batch::mark_gso`]).
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize;

    /// For finite sources (a pcap file read once): whether everything has been delivered.
    fn exhausted(&self) -> bool {
        false
    }

    /// Gives back what the last [`RxQueue::recv`] lent ([`Pool::packet_lent`]). The PMD calls
    /// it once every packet of that burst is sent, dropped or materialized and the pool's
    /// lending has ended ([`Pool::end_lending`]), before it polls the queue again.
    fn release(&mut self) {}

    /// A descriptor that poll(2) reports readable once [`RxQueue::recv`] has something to
    /// return, for the queues of the port kinds OVS polls from its main thread rather than
    /// from a PMD (a Linux interface through `AF_PACKET`, a tap, an internal port, a dummy):
    /// a PMD whose every queue has one blocks on them while idle instead of spinning a core
    /// (`pmd-idle-wait`). `None`, the default, for queues that must be busy-polled (vhost-user,
    /// AF_XDP, DPDK, replays), as OVS's PMD ports are, and for a queue that has lost its
    /// device.
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Whether polling this queue when it is empty is a system call (a tap's `read(2)` that
    /// finds nothing) rather than a look at memory the kernel shares: a PMD whose queues all
    /// are of that kind waits for input sooner once idle (`pmd-idle-wait`), since spinning on
    /// them costs a system call per queue and pass and takes the core from whoever shares it.
    fn empty_poll_is_syscall(&self) -> bool {
        false
    }
}

/// Sends bursts for one PMD.
pub trait TxQueue: Send {
    /// Sends every packet of `batch`, leaving it empty; buffers that are done with go back to
    /// `pool`. Packets the port cannot take are dropped and counted.
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool);

    /// Pushes out anything the queue buffers (files, rings).
    fn flush(&mut self) {}

    /// Whether the queue takes TCP super-frames (packets with `gso_size > 0`) whole and has
    /// them segmented further on (a `tap` hands them to the kernel with their segmentation
    /// metadata). For the other queues, the default, the datapath segments super-frames in
    /// software before they reach [`TxQueue::send`] ([`crate::gso`]). Asked once, when the
    /// queue joins a PMD.
    fn tso(&self) -> bool {
        false
    }

    /// Whether the queue also takes UDP super-frames ([`crate::gso_udp`]) whole, as
    /// [`TxQueue::tso`] says of TCP ones (only asked when that says yes). The default: the
    /// datapath cuts them into datagrams before they reach [`TxQueue::send`].
    fn uso(&self) -> bool {
        false
    }

    /// Whether the queue also takes UDP fragmentation super-frames ([`crate::gso_ufo`])
    /// whole, as [`TxQueue::tso`] says of TCP ones (only asked when that says yes). The
    /// default: the datapath cuts them into IP fragments before they reach [`TxQueue::send`].
    fn ufo(&self) -> bool {
        false
    }

    /// Whether the queue also takes encapsulated TCP super-frames ([`crate::gso_tunnel`]:
    /// VXLAN or GENEVE pushed onto a super-frame) whole, as [`TxQueue::tso`] says of plain
    /// ones (only asked when that says yes; a `tap` whose kernel took UDP-tunnel GSO), and
    /// encapsulated UDP ones when [`TxQueue::uso`] says yes too. The
    /// default: the datapath segments them after the push before they reach
    /// [`TxQueue::send`].
    fn tnl_gso(&self) -> bool {
        false
    }

    /// Whether [`TxQueue::send`] takes lent packets ([`Pool::packet_lent`]): it reads the rest
    /// of such a frame from [`Pool::lent_tail`] or brings it in first ([`Pool::materialize`]).
    /// Other queues are never handed one. Asked once, when the queue joins a PMD.
    fn takes_lent(&self) -> bool {
        false
    }

    /// Whether [`TxQueue::send`] takes frames whose TCP or UDP checksum is pending
    /// ([`crate::csum_pending`]) and has it completed further on (a `tap` hands them to the
    /// kernel as `NEEDS_CSUM`, a DPDK port to a device with checksum offload). For the other
    /// queues, the default, the datapath completes them in software first. Asked once, when
    /// the queue joins a PMD.
    fn tx_csum(&self) -> bool {
        false
    }
}

/// Counters of one queue (or of a whole port, when summed).
#[derive(Debug, Default)]
pub struct QueueStats {
    /// Packets received.
    pub rx_packets: AtomicU64,
    /// Bytes of the packets received.
    pub rx_bytes: AtomicU64,
    /// Packets the backend lost on receive (ring overruns, frames it could not take).
    pub rx_dropped: AtomicU64,
    /// Packets sent.
    pub tx_packets: AtomicU64,
    /// Bytes of the packets sent.
    pub tx_bytes: AtomicU64,
    /// Packets given to send that did not go out (ring full, link down, write failed).
    pub tx_dropped: AtomicU64,
    /// Receive and send errors (malformed descriptors, failed system calls), in either direction.
    pub errors: AtomicU64,
}

impl QueueStats {
    /// A new set of zero counters to share between a queue and its readers.
    pub fn shared() -> Arc<QueueStats> {
        Arc::new(QueueStats::default())
    }

    /// Counts a received burst.
    #[inline]
    pub fn add_rx(&self, packets: u64, bytes: u64) {
        self.rx_packets.fetch_add(packets, Relaxed);
        self.rx_bytes.fetch_add(bytes, Relaxed);
    }

    /// Counts a sent burst.
    #[inline]
    pub fn add_tx(&self, packets: u64, bytes: u64) {
        self.tx_packets.fetch_add(packets, Relaxed);
        self.tx_bytes.fetch_add(bytes, Relaxed);
    }

    /// Counts what one receive call did: packets and bytes received, packets dropped, errors;
    /// zero counts touch nothing.
    #[inline]
    pub fn count_rx(&self, packets: u64, bytes: u64, dropped: u64, errors: u64) {
        if packets > 0 {
            self.add_rx(packets, bytes);
        }
        self.count_losses(&self.rx_dropped, dropped, errors);
    }

    /// Counts what one send call did, as [`QueueStats::count_rx`].
    #[inline]
    pub fn count_tx(&self, packets: u64, bytes: u64, dropped: u64, errors: u64) {
        if packets > 0 {
            self.add_tx(packets, bytes);
        }
        self.count_losses(&self.tx_dropped, dropped, errors);
    }

    #[inline]
    fn count_losses(&self, dropped_counter: &AtomicU64, dropped: u64, errors: u64) {
        if dropped > 0 {
            dropped_counter.fetch_add(dropped, Relaxed);
        }
        if errors > 0 {
            self.errors.fetch_add(errors, Relaxed);
        }
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> PortCounters {
        PortCounters {
            rx_packets: self.rx_packets.load(Relaxed),
            rx_bytes: self.rx_bytes.load(Relaxed),
            rx_dropped: self.rx_dropped.load(Relaxed),
            tx_packets: self.tx_packets.load(Relaxed),
            tx_bytes: self.tx_bytes.load(Relaxed),
            tx_dropped: self.tx_dropped.load(Relaxed),
            errors: self.errors.load(Relaxed),
        }
    }
}

/// A plain copy of [`QueueStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Packets received.
    pub rx_packets: u64,
    /// Bytes of the packets received.
    pub rx_bytes: u64,
    /// Packets the backend lost on receive (ring overruns, frames it could not take).
    pub rx_dropped: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes of the packets sent.
    pub tx_bytes: u64,
    /// Packets given to send that did not go out (ring full, link down, write failed).
    pub tx_dropped: u64,
    /// Receive and send errors (malformed descriptors, failed system calls), in either direction.
    pub errors: u64,
}

impl core::ops::AddAssign for PortCounters {
    fn add_assign(&mut self, o: PortCounters) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.rx_dropped += o.rx_dropped;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.tx_dropped += o.tx_dropped;
        self.errors += o.errors;
    }
}

/// For ports that keep [`QueueStats`] per queue: the rows of `port/stats` (`rx0`, `rx1`..,
/// `tx0`..) in queue order.
pub fn queue_rows(rx: &[Arc<QueueStats>], tx: &[Arc<QueueStats>]) -> Vec<(String, PortCounters)> {
    let rows = |kind: &str, qs: &[Arc<QueueStats>]| {
        qs.iter()
            .enumerate()
            .map(|(i, q)| (format!("{kind}{i}"), q.snapshot()))
            .collect::<Vec<_>>()
    };
    let mut out = rows("rx", rx);
    out.extend(rows("tx", tx));
    out
}

/// For [`Port::take_rxq`]: marks rx queue `q` of `taken` as taken; `None` if it already was
/// or there is no such queue.
pub fn take_once(taken: &mut [bool], q: usize) -> Option<()> {
    let t = taken.get_mut(q)?;
    if *t {
        return None;
    }
    *t = true;
    Some(())
}

/// The sum of the counters of queues `rx` and `tx`.
pub fn sum_queues(rx: &[Arc<QueueStats>], tx: &[Arc<QueueStats>]) -> PortCounters {
    let mut c = PortCounters::default();
    for q in rx.iter().chain(tx) {
        c += q.snapshot();
    }
    c
}

/// A port backend.
pub trait Port: Send {
    /// The port's name (`p0`, `vm1`).
    fn name(&self) -> &str;

    /// Its type as the configuration names it (`replay`, `sink`, `pcap`).
    fn kind(&self) -> &'static str;

    /// Its options as `dpif/show` prints them (`{rx_pcap=in.pcap}`), empty for none.
    fn options(&self) -> String {
        String::new()
    }

    /// Number of rx queues (0 for a port that only sends).
    fn n_rxq(&self) -> usize;

    /// Takes rx queue `q`, which stamps `in_port` on what it receives. Each queue can be
    /// taken once; `None` after that or for a bad index.
    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>>;

    /// Opens a tx queue for one PMD thread.
    fn open_txq(&mut self) -> Box<dyn TxQueue>;

    /// Whether OVS polls such a port from its main thread rather than a PMD (its
    /// `dummy-internal`). A PMD polls its queue here all the same, but `pmd-rxq-show`, which
    /// lists PMD queues only in OVS, leaves it out.
    fn main_thread_polled(&self) -> bool {
        false
    }

    /// The port's counters, summed over its queues.
    fn counters(&self) -> PortCounters;

    /// Counters per queue, named as `port/stats` prints them (`rx0`, `tx1`...), for ports
    /// that keep them apart; empty when the port has only its totals.
    fn queue_counters(&self) -> Vec<(String, PortCounters)> {
        Vec::new()
    }

    /// The device's extended statistics (DPDK's xstats: `rx_good_packets`, `rx_q0_bytes`...)
    /// in the driver's order, for ports whose device keeps its own; empty for the others.
    /// Read on the main thread, for `port/stats` and `dpctl/show -s`.
    fn xstats(&self) -> Vec<(String, u64)> {
        Vec::new()
    }

    /// Whether the port's link is up. A kernel-backed port whose interface went away says
    /// false until it has reattached; the others are always up.
    fn link_up(&self) -> bool {
        true
    }

    /// How many times the link went up or down since the port opened, as far as the switch
    /// saw ([`Port::link_up`] notices a change; OVS's `link_resets`). 0 for ports that do
    /// not follow their link.
    fn link_resets(&self) -> u64 {
        0
    }

    /// The tunnel this port terminates, for a tunnel's virtual port (`vxlan_sys_4789`):
    /// `tnl_pop` to it decapsulates as this kind says. `None` for other ports.
    fn tunnel(&self) -> Option<TunnelKind> {
        None
    }

    /// The switch goes away for good (`exit --cleanup`, as ovs-vswitchd's, which deletes its
    /// ports): a kernel device the port created and keeps beyond its own life (a persistent
    /// TAP) is made to go when the port closes. Nothing for the other ports.
    fn release_device(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The kind of a tunnel port, with what identifies its traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    /// VXLAN on this UDP destination port (4789 by default).
    Vxlan {
        /// The UDP port the tunnel's packets are sent to and received on.
        dst_port: u16,
    },
    /// GENEVE on this UDP destination port (6081 by default).
    Geneve {
        /// The UDP port the tunnel's packets are sent to and received on.
        dst_port: u16,
    },
    /// GRE (IP protocol 47).
    Gre,
}

/// VXLAN's IANA port.
pub const VXLAN_PORT: u16 = 4789;
/// GENEVE's IANA port.
pub const GENEVE_PORT: u16 = 6081;

impl TunnelKind {
    /// VXLAN on its IANA port.
    pub const VXLAN: TunnelKind = TunnelKind::Vxlan {
        dst_port: VXLAN_PORT,
    };
    /// GENEVE on its IANA port.
    pub const GENEVE: TunnelKind = TunnelKind::Geneve {
        dst_port: GENEVE_PORT,
    };

    /// The type name OVS uses (`vxlan`, `geneve`, `gre`).
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::Vxlan { .. } => "vxlan",
            TunnelKind::Geneve { .. } => "geneve",
            TunnelKind::Gre => "gre",
        }
    }

    /// OVS's name for the datapath port of this kind: `vxlan_sys_4789`, `genev_sys_6081`,
    /// `gre_sys` (one port per type and UDP port, shared by every tunnel of the kind).
    pub fn default_port_name(self) -> String {
        match self {
            TunnelKind::Vxlan { dst_port } => format!("vxlan_sys_{dst_port}"),
            TunnelKind::Geneve { dst_port } => format!("genev_sys_{dst_port}"),
            TunnelKind::Gre => "gre_sys".to_owned(),
        }
    }
}
