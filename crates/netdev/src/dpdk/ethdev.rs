//! The `dpdk` port: one DPDK ethdev, found by OVS's `dpdk-devargs` (a PCI address or a vdev
//! string such as `net_pcap0,rx_pcap=in.pcap`) and hot-plugged when DPDK does not have it yet,
//! as OVS's `netdev_dpdk_process_devargs` does. The device is detached again when the port is
//! removed, once no PMD thread holds one of its queues.
//!
//! * rx: `n_rxq` queues with RSS over IP/UDP/TCP where the device offers it; each received
//!   mbuf becomes a packet whose buffer is the mbuf (see [`super::mbuf`]).
//! * tx: one hardware queue per PMD thread while the device has them (as many as the machine
//!   has cores, plus one for the main thread); beyond that, PMD threads share queues, each
//!   queue taken under its spin lock for a burst (OVS's XPS mode).
//!   A packet in an mbuf leaves in it; other frames are copied into mbufs allocated in bulk.
//!   What the device does not take after retries is freed and counted as dropped.
//! * counters: flowpath's own per queue, plus the device's missed, no-mbuf and error counts;
//!   [`Port::xstats`] reads the driver's extended statistics.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};

use datapath::packet::{Batch, MAX_BURST, Packet, Pool};
use datapath::port::{
    Port, PortCounters, QueueStats, RxQueue, TxQueue, queue_rows, sum_queues, take_once,
};
use dpdk_sys::{FpDevInfo, FpStats, MbufHead, PKTMBUF_HEADROOM, RteMempool};

use super::eal::Eal;
use super::mbuf;
use super::{DpdkError, strerror};

/// OVS's defaults: 2048 descriptors per ring, MTU 1500.
const DEFAULT_DESC: u16 = 2048;
const DEFAULT_MTU: u16 = 1500;
/// Ethernet header, two VLAN tags and the FCS: what a frame adds to the MTU.
const FRAME_OVERHEAD: u16 = 14 + 8 + 4;
/// Mbuf data rooms are whole KB (as OVS sizes them): drivers that receive into fixed frames
/// (`net_af_packet`'s 2048-byte ring slots) need the room of the next KB up.
const DATA_ROOM_ALIGN: u16 = 1024;
/// Mbufs per lcore kept in the mempool's cache.
const POOL_CACHE: u32 = 256;

/// The options of a `dpdk` port, with OVS's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpdkPortOptions {
    /// `dpdk-devargs` (required).
    pub devargs: String,
    /// `n_rxq`: rx queues (1).
    pub n_rxq: u16,
    /// `n_rxq_desc`: rx ring size (2048).
    pub n_rxq_desc: u16,
    /// `n_txq_desc`: tx ring size (2048).
    pub n_txq_desc: u16,
    /// `mtu_request`: the MTU (1500).
    pub mtu: u16,
    /// `dpdk-lsc-interrupt`: link changes by interrupt where the device has them, rather than
    /// read when the switch looks (false, as OVS).
    pub lsc_interrupt: bool,
    /// `n_mbufs` (flowpath's own): at least this many mbufs in the port's pool, beyond what
    /// its rings need (0). For devices that keep frames of their own in mbufs: `net_pcap`
    /// with `infinite_rx=1` holds its whole capture.
    pub n_mbufs: u32,
}

impl DpdkPortOptions {
    /// The options for `devargs` with OVS's defaults.
    pub fn new(devargs: &str) -> DpdkPortOptions {
        DpdkPortOptions {
            devargs: devargs.to_owned(),
            n_rxq: 1,
            n_rxq_desc: DEFAULT_DESC,
            n_txq_desc: DEFAULT_DESC,
            mtu: DEFAULT_MTU,
            lsc_interrupt: false,
            n_mbufs: 0,
        }
    }

    /// Sets option `key` from its text (the option names above); an unknown key or a bad
    /// value is an error naming it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), DpdkError> {
        let (field, key, lo, hi): (&mut u16, &'static str, u16, u16) = match key {
            "dpdk-devargs" => {
                self.devargs = value.to_owned();
                return Ok(());
            }
            "dpdk-lsc-interrupt" => {
                self.lsc_interrupt = match value {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(DpdkError::Setting {
                            key: "dpdk-lsc-interrupt",
                            why: format!("{value:?} is not true or false"),
                        });
                    }
                };
                return Ok(());
            }
            "n_rxq" => (&mut self.n_rxq, "n_rxq", 1, 1024),
            "n_rxq_desc" => (&mut self.n_rxq_desc, "n_rxq_desc", 1, 4096),
            "n_txq_desc" => (&mut self.n_txq_desc, "n_txq_desc", 1, 4096),
            "mtu_request" => (&mut self.mtu, "mtu_request", 68, 9710),
            "n_mbufs" => {
                self.n_mbufs = value
                    .parse()
                    .ok()
                    .filter(|v| (1..=1 << 24).contains(v))
                    .ok_or_else(|| DpdkError::Setting {
                        key: "n_mbufs",
                        why: format!("{value:?} is not a number from 1 to 16777216"),
                    })?;
                return Ok(());
            }
            _ => {
                return Err(DpdkError::Setting {
                    key: "option",
                    why: format!("{key} is not an option of a dpdk port"),
                });
            }
        };
        *field = value
            .parse()
            .ok()
            .filter(|v| (lo..=hi).contains(v))
            .ok_or_else(|| DpdkError::Setting {
                key,
                why: format!("{value:?} is not a number from {lo} to {hi}"),
            })?;
        Ok(())
    }
}

/// The device and its mempool, shared by the port and its queues: closed (and detached, if
/// the port attached it) when the last of them goes.
struct Device {
    id: u16,
    probed: bool,
    pool: *mut RteMempool,
    pool_size: u32,
    devargs: String,
}

/// The ethdev ports flowpath's ports drive, by port id, with the port's name: a device is
/// driven by one port at a time.
static IN_USE: Mutex<BTreeMap<u16, String>> = Mutex::new(BTreeMap::new());

fn in_use() -> std::sync::MutexGuard<'static, BTreeMap<u16, String>> {
    IN_USE.lock().unwrap_or_else(|e| e.into_inner())
}

// SAFETY: the mempool pointer is DPDK's, usable from any thread (its ring is multi-producer,
// multi-consumer); the port id is a plain number.
unsafe impl Send for Device {}
// SAFETY: as for Send; Device has no interior state of its own.
unsafe impl Sync for Device {}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: no queue of this device is polled any more (they hold this Device); close
        // frees the mbufs in its rings.
        let r = unsafe { dpdk_sys::fp_port_close(self.id, i32::from(self.probed)) };
        if r < 0 {
            crate::log::log(
                vlog::Level::Warn,
                &format!("closing DPDK device {}: {}", self.devargs, strerror(r)),
            );
        }
        retire_pool(self.pool);
        in_use().remove(&self.id);
    }
}

/// Mempools of closed devices whose mbufs are not all back yet: packets still hold some, or
/// other ports' rings (zero copy sends an mbuf out by another port). Freed once they are
/// (OVS sweeps its mempools the same way).
struct Retired(Vec<*mut RteMempool>);

// SAFETY: mempool pointers are DPDK's, usable from any thread; the list is behind a mutex.
unsafe impl Send for Retired {}

static RETIRED: Mutex<Retired> = Mutex::new(Retired(Vec::new()));

/// Frees `pool` now if every mbuf is back, else when a later sweep finds them back; sweeps
/// the pools retired before.
fn retire_pool(pool: *mut RteMempool) {
    let mut retired = RETIRED.lock().unwrap_or_else(|e| e.into_inner());
    retired.0.push(pool);
    retired.0.retain(|&mp| {
        // SAFETY: a retired pool is alive until freed here, and freed only when no mbuf of it
        // is out (none can come back after that: nothing holds one).
        unsafe {
            if dpdk_sys::fp_pool_in_use(mp) > 0 {
                return true;
            }
            dpdk_sys::fp_pool_free(mp);
        }
        false
    });
}

/// The spin lock of one hardware tx queue, held for a burst. Uncontended (the queue is one
/// PMD's own) it costs one atomic exchange per burst; it only spins when more PMD threads
/// than the device has queues share one.
#[derive(Default)]
struct TxLock {
    held: AtomicBool,
}

impl TxLock {
    fn hold<T>(&self, f: impl FnOnce() -> T) -> T {
        while self
            .held
            .compare_exchange_weak(false, true, Acquire, Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        let r = f();
        self.held.store(false, Release);
        r
    }
}

/// A DPDK ethdev port.
pub struct DpdkPort {
    name: String,
    opts: DpdkPortOptions,
    dev: Arc<Device>,
    driver: String,
    mac: [u8; 6],
    n_txq: u16,
    /// rx and tx ring sizes as the device took them.
    descs: (u16, u16),
    /// The offloads the device took (`dpdk_sys::OL_*`).
    offloads: u32,
    /// tx queues asked for: one per core, plus one.
    requested_txq: u16,
    taken: Vec<bool>,
    txq_locks: Vec<Arc<TxLock>>,
    next_txq: usize,
    rx_stats: Vec<Arc<QueueStats>>,
    tx_stats: Vec<Arc<QueueStats>>,
    /// The longest frame the port sends: its mbufs' room after DPDK's headroom.
    max_frame: usize,
    /// The link state last read ([`Port::link_up`]), and how many times it changed.
    link_was_up: AtomicBool,
    link_resets: AtomicU64,
    /// Frames whose pending checksum the device completed (`xstats` `tx_csum_offload`).
    tx_csum_offload: Arc<AtomicU64>,
}

fn c_string(s: &str, key: &'static str) -> Result<CString, DpdkError> {
    CString::new(s).map_err(|_| DpdkError::Setting {
        key,
        why: "holds a NUL byte".to_owned(),
    })
}

impl DpdkPort {
    /// Attaches the device `opts.devargs` names, configures and starts it. DPDK must be
    /// running ([`Eal::init`]).
    pub fn open(name: &str, opts: &DpdkPortOptions) -> Result<DpdkPort, DpdkError> {
        Eal::get().ok_or(DpdkError::NotInitialized)?;
        if opts.devargs.is_empty() {
            return Err(DpdkError::Setting {
                key: "dpdk-devargs",
                why: "required: a PCI address or a vdev (net_pcap0,rx_pcap=in.pcap)".to_owned(),
            });
        }
        let devargs = c_string(&opts.devargs, "dpdk-devargs")?;
        let (mut id, mut probed) = (0u16, 0i32);
        // SAFETY: devargs is NUL-terminated; id and probed are valid for writes.
        let r = unsafe { dpdk_sys::fp_dev_attach(devargs.as_ptr(), &mut id, &mut probed) };
        if r < 0 {
            return Err(DpdkError::Devargs {
                devargs: opts.devargs.clone(),
                cause: strerror(r),
            });
        }
        if let Some(by) = in_use().get(&id) {
            // Found among the ports (so not probed now): it stays as it is.
            return Err(DpdkError::InUse {
                name: name.to_owned(),
                devargs: opts.devargs.clone(),
                by: by.clone(),
            });
        }
        let detach_on_error = |e: DpdkError| {
            if probed != 0 {
                // SAFETY: the port was attached just above and is not used by anything.
                unsafe { dpdk_sys::fp_port_close(id, 1) };
            }
            e
        };
        // SAFETY: FpDevInfo is plain data; all zero is a valid value to be overwritten.
        let mut info: FpDevInfo = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is valid for writes; `id` is an attached port.
        let r = unsafe { dpdk_sys::fp_dev_info(id, &mut info) };
        if r < 0 {
            return Err(detach_on_error(call_error("rte_eth_dev_info_get", r)));
        }
        // SAFETY: the shim NUL-terminates the driver name within its 64 bytes.
        let driver = unsafe { CStr::from_ptr(info.driver.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let n_rxq = opts.n_rxq.min(info.max_rx_queues.max(1));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let requested_txq = cores as u16 + 1;
        let n_txq = requested_txq.min(info.max_tx_queues.max(1));
        let data_room = PKTMBUF_HEADROOM
            + (opts.mtu.max(DEFAULT_MTU) + FRAME_OVERHEAD).next_multiple_of(DATA_ROOM_ALIGN);
        // Every ring full, a burst in flight per queue, and the per-lcore caches.
        let pool_size = u32::from(n_rxq) * u32::from(opts.n_rxq_desc)
            + u32::from(n_txq) * u32::from(opts.n_txq_desc)
            + (u32::from(n_rxq) + u32::from(n_txq)) * MAX_BURST as u32
            + 4 * POOL_CACHE
            + 1024
            + opts.n_mbufs;
        let pool_name = c_string(&format!("fp_mp_{id}_{}", next_pool_serial()), "mempool")?;
        // SAFETY: pool_name is NUL-terminated; the sizes fit the types DPDK takes.
        let pool = unsafe {
            dpdk_sys::fp_pool_create(
                pool_name.as_ptr(),
                pool_size,
                POOL_CACHE,
                mbuf::PRIV_SIZE,
                data_room,
                dpdk_sys::SOCKET_ID_ANY,
            )
        };
        if pool.is_null() {
            // SAFETY: reads rte_errno of this thread, set by the failed call.
            let err = unsafe { dpdk_sys::fp_errno() };
            return Err(detach_on_error(call_error("rte_pktmbuf_pool_create", -err)));
        }
        in_use().insert(id, name.to_owned());
        let dev = Arc::new(Device {
            id,
            probed: probed != 0,
            pool,
            pool_size,
            devargs: opts.devargs.clone(),
        });
        // Some devices (net_tap) want as many tx queues as rx queues: asked again with that.
        let mut n_txq = n_txq;
        let started = match start(id, n_rxq, n_txq, opts, pool) {
            Ok(d) => d,
            Err((call, r)) if call != "rte_eth_dev_configure" || n_txq == n_rxq => {
                // Dropping `dev` closes (and detaches) the device and frees the pool.
                return Err(call_error(&call, r));
            }
            Err(_) => {
                n_txq = n_rxq;
                start(id, n_rxq, n_txq, opts, pool).map_err(|(call, r)| call_error(&call, r))?
            }
        };
        Ok(DpdkPort {
            name: name.to_owned(),
            opts: opts.clone(),
            dev,
            driver,
            mac: info.mac,
            n_txq,
            descs: started.descs,
            offloads: started.offloads,
            requested_txq,
            taken: vec![false; usize::from(n_rxq)],
            txq_locks: (0..n_txq).map(|_| Arc::default()).collect(),
            next_txq: 0,
            rx_stats: (0..n_rxq).map(|_| QueueStats::shared()).collect(),
            tx_stats: (0..n_txq).map(|_| QueueStats::shared()).collect(),
            tx_csum_offload: Arc::default(),
            max_frame: usize::from(data_room - PKTMBUF_HEADROOM),
            link_was_up: AtomicBool::new(read_link(id)),
            link_resets: AtomicU64::new(0),
        })
    }

    /// The DPDK driver (`net_pcap`, `net_ixgbe`).
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// The device's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The device's tx queues: PMD threads beyond this many share them.
    pub fn n_txq(&self) -> usize {
        usize::from(self.n_txq)
    }

    /// The ethdev port id.
    pub fn port_id(&self) -> u16 {
        self.dev.id
    }

    /// Mbufs of the port's mempool that are neither free nor in a per-lcore cache: those in
    /// the device's rings and any in flight. Equal to the rings' fill once traffic stops, so
    /// a leak shows as growth.
    pub fn mbufs_in_use(&self) -> u32 {
        // SAFETY: the pool lives as long as `dev`.
        unsafe { dpdk_sys::fp_pool_in_use(self.dev.pool) }
    }

    /// The mempool's size.
    pub fn mbufs_total(&self) -> u32 {
        self.dev.pool_size
    }

    /// The device's own counters.
    pub fn device_stats(&self) -> FpStats {
        let mut s = FpStats::default();
        // SAFETY: `s` is valid for writes; the port is open.
        unsafe { dpdk_sys::fp_stats(self.dev.id, &mut s) };
        s
    }

    /// The driver's extended statistics (`rx_good_packets`, `rx_q0_packets`...), in its order.
    fn read_xstats(&self) -> Vec<(String, u64)> {
        // SAFETY: with null names the shim only counts.
        let n = unsafe {
            dpdk_sys::fp_xstats(self.dev.id, std::ptr::null_mut(), std::ptr::null_mut(), 0)
        };
        if n <= 0 {
            return Vec::new();
        }
        let mut names = vec![[0 as libc::c_char; 64]; n as usize];
        let mut values = vec![0u64; n as usize];
        // SAFETY: names and values have room for n entries, as the call is told.
        let got = unsafe {
            dpdk_sys::fp_xstats(
                self.dev.id,
                names.as_mut_ptr(),
                values.as_mut_ptr(),
                n as u32,
            )
        };
        let got = usize::try_from(got).unwrap_or(0).min(n as usize);
        names[..got]
            .iter()
            .zip(&values)
            .map(|(nm, v)| {
                // SAFETY: the shim NUL-terminates each name within its 64 bytes.
                let s = unsafe { CStr::from_ptr(nm.as_ptr()) };
                (s.to_string_lossy().into_owned(), *v)
            })
            .collect()
    }
}

/// Whether device `id`'s link is up, without waiting.
fn read_link(id: u16) -> bool {
    let (mut up, mut speed) = (0, 0);
    // SAFETY: both are valid for writes; the port is open.
    let r = unsafe { dpdk_sys::fp_link(id, &mut up, &mut speed) };
    r == 0 && up != 0
}

/// Configures and starts device `id`: the ring sizes the device took, or the DPDK call that
/// failed and its error.
fn start(
    id: u16,
    n_rxq: u16,
    n_txq: u16,
    opts: &DpdkPortOptions,
    pool: *mut RteMempool,
) -> Result<Started, (String, i32)> {
    let mut step: *const libc::c_char = std::ptr::null();
    let (mut nrxd, mut ntxd) = (opts.n_rxq_desc, opts.n_txq_desc);
    let mut offloads = dpdk_sys::OL_RX_CSUM | dpdk_sys::OL_TX_TSO | dpdk_sys::OL_TX_CSUM;
    if opts.lsc_interrupt {
        offloads |= dpdk_sys::OL_LSC;
    }
    // SAFETY: the port is attached and stopped; `pool` is a live mempool; `step`, `nrxd`,
    // `ntxd` and `offloads` are valid for writes, `step` receives a static string.
    let r = unsafe {
        dpdk_sys::fp_port_start(
            id,
            n_rxq,
            n_txq,
            &mut nrxd,
            &mut ntxd,
            opts.mtu,
            pool,
            &mut offloads,
            &mut step,
        )
    };
    if r < 0 {
        // SAFETY: the shim sets `step` to a static NUL-terminated string before each call.
        let call = unsafe { CStr::from_ptr(step) }
            .to_string_lossy()
            .into_owned();
        return Err((call, r));
    }
    Ok(Started {
        descs: (nrxd, ntxd),
        offloads,
    })
}

/// What a started device took: ring sizes (rx, tx) and offloads (`dpdk_sys::OL_*`).
struct Started {
    descs: (u16, u16),
    offloads: u32,
}

fn call_error(call: &str, err: i32) -> DpdkError {
    DpdkError::Call {
        call: call.to_owned(),
        cause: strerror(err),
    }
}

/// Mempool names must be unique in the process; a port re-added gets a new one.
fn next_pool_serial() -> usize {
    static SERIAL: AtomicUsize = AtomicUsize::new(0);
    SERIAL.fetch_add(1, Relaxed)
}

/// Gives PMD threads an lcore id the first time they touch a DPDK queue, so their mbuf
/// allocations and frees go through a per-lcore mempool cache, and takes it back when the
/// thread ends (OVS's `dpdk_attach_thread`).
fn register_thread() {
    struct Registered(bool);
    impl Drop for Registered {
        fn drop(&mut self) {
            if self.0 {
                // SAFETY: this thread registered itself below.
                unsafe { dpdk_sys::fp_thread_unregister() };
            }
        }
    }
    thread_local! {
        static REGISTERED: Registered = {
            // SAFETY: EAL is running (a queue exists); registering is per thread. A failure
            // (no lcore left) only means no mempool cache for this thread.
            Registered(unsafe { dpdk_sys::fp_thread_register() } == 0)
        };
    }
    REGISTERED.with(|_| {});
}

struct DpdkRxq {
    dev: Arc<Device>,
    q: u16,
    in_port: u32,
    stats: Arc<QueueStats>,
}

impl RxQueue for DpdkRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        register_thread();
        let want = batch.room().min(MAX_BURST);
        let mut mbufs = [std::ptr::null_mut::<MbufHead>(); MAX_BURST];
        // SAFETY: `mbufs` has room for `want` pointers; this queue is polled by this thread
        // only (each rx queue is taken once).
        let n = usize::from(unsafe {
            dpdk_sys::fp_rx_burst(self.dev.id, self.q, mbufs.as_mut_ptr(), want as u16)
        });
        let mut bytes = 0u64;
        for &m in &mbufs[..n] {
            // SAFETY: the driver handed over `m`, a valid mbuf; the packet takes it.
            bytes += unsafe { mbuf::push_packet(m, pool, self.in_port, batch) } as u64;
        }
        if n > 0 {
            self.stats.add_rx(n as u64, bytes);
        }
        n
    }
}

struct DpdkTxq {
    dev: Arc<Device>,
    q: u16,
    lock: Arc<TxLock>,
    stats: Arc<QueueStats>,
    /// The longest frame the port sends: its mbufs' room after DPDK's headroom.
    max_frame: usize,
    /// Whether the device segments TCP super-frames ([`TxQueue::tso`]), and how it bounds
    /// the segments.
    tso: bool,
    tso_limit: mbuf::TsoLimit,
    /// Whether the device completes TCP and UDP checksums ([`TxQueue::tx_csum`]), and the
    /// port's count of the frames it was handed so.
    csum: bool,
    csum_offloaded: Arc<AtomicU64>,
}

/// Tries a full burst a few times before giving up on what the device will not take.
const TX_RETRIES: usize = 4;

/// A burst being put together for the device: mbufs ready to send and their frame lengths.
struct TxBurst {
    mbufs: [*mut MbufHead; MAX_BURST],
    lens: [u16; MAX_BURST],
    n: usize,
}

impl DpdkTxq {
    /// An mbuf holding a copy of `p`'s frame, from the port's pool (`spare` holds mbufs
    /// allocated in bulk for the batch's copies); `None` when the pool has none or the frame
    /// is too long (dropped).
    fn copy_into_mbuf(
        &self,
        p: &Packet,
        spare: &mut [*mut MbufHead; MAX_BURST],
        n_spare: &mut usize,
        copies_left: usize,
    ) -> Option<*mut MbufHead> {
        let frame = p.data();
        if frame.len() > self.max_frame {
            return None;
        }
        if *n_spare == 0 {
            let k = copies_left.min(MAX_BURST);
            // SAFETY: `spare` has room for k <= MAX_BURST pointers; the pool lives with `dev`.
            if unsafe { dpdk_sys::fp_alloc_bulk(self.dev.pool, spare.as_mut_ptr(), k as u32) } != 0
            {
                return None;
            }
            *n_spare = k;
        }
        *n_spare -= 1;
        let m = spare[*n_spare];
        // SAFETY: `m` is a freshly allocated mbuf owned here.
        let head = unsafe { &mut *m };
        // SAFETY: the mbuf's buffer has max_frame bytes free from data_off, and the frame
        // fits in them.
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                head.buf_addr.add(usize::from(head.data_off)),
                frame.len(),
            );
        }
        head.data_len = frame.len() as u16;
        head.pkt_len = frame.len() as u32;
        Some(m)
    }

    /// Sends the burst under the queue's lock, retrying a few times; frees what the device
    /// did not take and counts.
    fn transmit(&mut self, b: &mut TxBurst) {
        let ready = b.n;
        let sent = self.lock.hold(|| {
            let mut sent = 0;
            for _ in 0..TX_RETRIES {
                if sent == ready {
                    break;
                }
                // SAFETY: mbufs[sent..ready] are filled mbufs owned here; the device takes
                // the first (returned) count of them. The queue is held under its lock.
                let k = unsafe {
                    dpdk_sys::fp_tx_burst(
                        self.dev.id,
                        self.q,
                        b.mbufs[sent..].as_mut_ptr(),
                        (ready - sent) as u16,
                    )
                };
                sent += usize::from(k);
            }
            sent
        });
        if sent < ready {
            // SAFETY: mbufs[sent..ready] are still owned here.
            unsafe { dpdk_sys::fp_free_bulk(b.mbufs[sent..].as_mut_ptr(), (ready - sent) as u32) };
        }
        let bytes: u64 = b.lens[..sent].iter().map(|&l| u64::from(l)).sum();
        self.stats
            .count_tx(sent as u64, bytes, (ready - sent) as u64, 0);
        b.n = 0;
    }
}

impl TxQueue for DpdkTxq {
    /// Where the device takes TCP segmentation (`net_tap` does), super-frames go to it whole,
    /// copied into a chain of mbufs.
    fn tso(&self) -> bool {
        self.tso
    }

    /// Where the device completes TCP and UDP checksums (`net_tap` does), frames whose
    /// checksum is pending go to it with the checksum flags set.
    fn tx_csum(&self) -> bool {
        self.csum
    }

    /// Packets in mbufs leave in them; the others are copied into mbufs allocated in bulk.
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        register_thread();
        let tso = self.tso;
        let chained = |p: &Packet| tso && p.meta.gso_size > 0;
        let mut copies_left = batch
            .packets()
            .iter()
            .filter(|p| !p.is_foreign() && !chained(p))
            .count();
        let mut spare = [std::ptr::null_mut::<MbufHead>(); MAX_BURST];
        let mut n_spare = 0;
        let mut b = TxBurst {
            mbufs: [std::ptr::null_mut(); MAX_BURST],
            lens: [0; MAX_BURST],
            n: 0,
        };
        let mut dropped = 0u64;
        for p in batch.drain() {
            let len = p.len();
            let m = match mbuf::mbuf_of(p, self.max_frame) {
                Ok(m) => Some(m),
                Err(None) => None,
                Err(Some(mut p)) => {
                    let m = if chained(&p) {
                        mbuf::tso_chain(&mut p, self.dev.pool, self.max_frame, self.tso_limit)
                    } else if p.meta.csum_pending() {
                        copies_left -= 1;
                        let at = mbuf::tx_csum_prepare(&mut p);
                        let m = self.copy_into_mbuf(&p, &mut spare, &mut n_spare, copies_left + 1);
                        if let (Some(m), Some(at)) = (m, at) {
                            mbuf::tx_csum(m, &at);
                            self.csum_offloaded.fetch_add(1, Relaxed);
                        }
                        m
                    } else {
                        copies_left -= 1;
                        self.copy_into_mbuf(&p, &mut spare, &mut n_spare, copies_left + 1)
                    };
                    pool.free(p);
                    m
                }
            };
            let Some(m) = m else {
                dropped += 1;
                continue;
            };
            b.mbufs[b.n] = m;
            b.lens[b.n] = len as u16;
            b.n += 1;
            if b.n == MAX_BURST {
                self.transmit(&mut b);
            }
        }
        if b.n > 0 {
            self.transmit(&mut b);
        }
        if n_spare > 0 {
            // SAFETY: the spare mbufs were allocated here and never filled or sent.
            unsafe { dpdk_sys::fp_free_bulk(spare.as_mut_ptr(), n_spare as u32) };
        }
        if dropped > 0 {
            self.stats.count_tx(0, 0, dropped, 0);
        }
    }
}

impl Port for DpdkPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "dpdk"
    }

    /// As OVS's `netdev_dpdk_get_config` words it (what `dpif/show` and `dpctl/show` print,
    /// keys sorted as they sort them).
    fn options(&self) -> String {
        let o = &self.opts;
        let on = |ol: u32| self.offloads & ol != 0;
        format!(
            "{{configured_rx_queues={}, configured_rxq_descriptors={}, configured_tx_queues={}, \
             configured_txq_descriptors={}, lsc_interrupt_mode={}, mtu={}, \
             requested_rx_queues={}, requested_rxq_descriptors={}, requested_tx_queues={}, \
             requested_txq_descriptors={}, rx_csum_offload={}, tx_tso_offload={}}}",
            self.taken.len(),
            self.descs.0,
            self.n_txq,
            self.descs.1,
            on(dpdk_sys::OL_LSC),
            o.mtu,
            o.n_rxq,
            o.n_rxq_desc,
            self.requested_txq,
            o.n_txq_desc,
            on(dpdk_sys::OL_RX_CSUM),
            on(dpdk_sys::OL_TX_TSO),
        )
    }

    fn n_rxq(&self) -> usize {
        self.taken.len()
    }

    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        take_once(&mut self.taken, q)?;
        Some(Box::new(DpdkRxq {
            dev: Arc::clone(&self.dev),
            q: q as u16,
            in_port,
            stats: Arc::clone(&self.rx_stats[q]),
        }))
    }

    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        let q = self.next_txq % usize::from(self.n_txq);
        self.next_txq += 1;
        Box::new(DpdkTxq {
            dev: Arc::clone(&self.dev),
            q: q as u16,
            lock: Arc::clone(&self.txq_locks[q]),
            stats: Arc::clone(&self.tx_stats[q]),
            max_frame: self.max_frame,
            tso: self.offloads & dpdk_sys::OL_TX_TSO != 0,
            tso_limit: mbuf::TsoLimit {
                mtu: usize::from(self.opts.mtu),
                l2_in_mtu: self.driver == "net_tap",
            },
            csum: self.offloads & dpdk_sys::OL_TX_CSUM != 0,
            csum_offloaded: Arc::clone(&self.tx_csum_offload),
        })
    }

    fn counters(&self) -> PortCounters {
        let mut c = sum_queues(&self.rx_stats, &self.tx_stats);
        let d = self.device_stats();
        c.rx_dropped += d.imissed + d.rx_nombuf;
        c.errors += d.ierrors + d.oerrors;
        c
    }

    fn queue_counters(&self) -> Vec<(String, PortCounters)> {
        queue_rows(&self.rx_stats, &self.tx_stats)
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let mut x = self.read_xstats();
        if self.offloads & dpdk_sys::OL_TX_CSUM != 0 {
            let n = self.tx_csum_offload.load(Relaxed);
            x.push(("tx_csum_offload".to_owned(), n));
        }
        x
    }

    /// Read from the device each time, as OVS's watchdog polls it; a change from what was
    /// last read counts as a link reset.
    fn link_up(&self) -> bool {
        let up = read_link(self.dev.id);
        if self.link_was_up.swap(up, Relaxed) != up {
            self.link_resets.fetch_add(1, Relaxed);
        }
        up
    }

    /// The changes [`Port::link_up`] has seen: the status refresh reads the link just before,
    /// so the device is not asked twice.
    fn link_resets(&self) -> u64 {
        self.link_resets.load(Relaxed)
    }
}
