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
//! [`Frontend`]: vhost::vhost_user::Frontend
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

mod device;
#[cfg(test)]
mod fake_device;
mod options;
mod vring;

use std::fmt::Write as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use datapath::packet::{Batch, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};
use wire::EthernetAddress;

pub use crate::afpacket::PortError;
pub use crate::vhost::RECONNECT;
// The feature bits and the plumbing of a vhost-user port are the back-end's (`vhost`).
use crate::vhost::{feature_names, listen, lock, stop_control, try_lock};

pub use self::device::IO_TIMEOUT;
use self::device::control;
pub use self::options::{DEFAULT_QUEUE_SIZE, MAX_QUEUE_SIZE, MAX_QUEUES, VirtioUserOptions};
pub use self::vring::BUF_LEN;
use self::vring::{BadRing, Counts, Vring};

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
        crate::log::log_rl(
            &crate::log::PEER,
            vlog::Level::Warn,
            &format!(
                "virtio_user port '{}': vring {vring} reset: the device wrote {}",
                self.name,
                why.name()
            ),
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
    //! A whole port against a vhost-user back-end (flowpath's own, DPDK's vhost PMD), with the
    //! used rings poisoned between bursts: the ring is reset through the protocol and traffic
    //! resumes.

    use std::path::PathBuf;
    use std::sync::atomic::Ordering::Acquire;
    use std::time::Duration;

    use super::fake_device::{Device, frame};
    use super::*;
    use crate::vhost::{VhostOptions, VhostPort};

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
