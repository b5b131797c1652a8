//! flowpath's bindings to DPDK (22.11 and later): the functions of `shim.c`, which wraps
//! DPDK's static-inline fast path (`rte_eth_rx_burst`, `rte_eth_tx_burst`, mbuf bulk
//! allocation and free) into callable functions and offers the control path (EAL start, port
//! configuration with RSS, MTU, link, stats, xstats, hot plug) with plain arguments, plus
//! [`MbufHead`], the first cache line of an `rte_mbuf` as Rust reads it.
//!
//! The mbuf offsets are asserted twice, by `_Static_assert`s in the shim and `offset_of!`
//! here, so that a DPDK built with another layout fails the build. Everything here is raw
//! FFI; `netdev::dpdk` builds the safe port on top of it. The functions exist only with the
//! feature `link`, which compiles the shim and links DPDK.

use core::ffi::{c_char, c_int, c_uint};

/// An `rte_mempool`, only ever handled by pointer.
#[repr(C)]
pub struct RteMempool {
    _opaque: [u8; 0],
}

/// The first cache line of an `rte_mbuf` (DPDK 22.11 with `RTE_IOVA_AS_PA`).
#[repr(C)]
pub struct MbufHead {
    /// Start of the buffer (the packet data is at `buf_addr + data_off`).
    pub buf_addr: *mut u8,
    /// Bus address of the buffer.
    pub buf_iova: u64,
    /// Offset of the data from `buf_addr`.
    pub data_off: u16,
    /// Reference count.
    pub refcnt: u16,
    /// Segments in the chain.
    pub nb_segs: u16,
    /// Input port.
    pub port: u16,
    /// Offload flags (`RTE_MBUF_F_*`).
    pub ol_flags: u64,
    /// Packet type as the driver classified it.
    pub packet_type: u32,
    /// Length of the whole chain.
    pub pkt_len: u32,
    /// Length of this segment.
    pub data_len: u16,
    /// VLAN TCI (when stripped).
    pub vlan_tci: u16,
    /// RSS hash, low half of a C union.
    pub hash_lo: u32,
    /// High half of the hash union.
    pub hash_hi: u32,
    /// Outer VLAN TCI.
    pub vlan_tci_outer: u16,
    /// Size of the buffer at `buf_addr`.
    pub buf_len: u16,
    /// Pool the mbuf came from.
    pub pool: *mut RteMempool,
    /// Next segment of a chain, or null.
    pub next: *mut MbufHead,
}

const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(MbufHead, buf_addr) == 0);
    assert!(offset_of!(MbufHead, data_off) == 16);
    assert!(offset_of!(MbufHead, refcnt) == 18);
    assert!(offset_of!(MbufHead, nb_segs) == 20);
    assert!(offset_of!(MbufHead, port) == 22);
    assert!(offset_of!(MbufHead, ol_flags) == 24);
    assert!(offset_of!(MbufHead, packet_type) == 32);
    assert!(offset_of!(MbufHead, pkt_len) == 36);
    assert!(offset_of!(MbufHead, data_len) == 40);
    assert!(offset_of!(MbufHead, hash_lo) == 44);
    assert!(offset_of!(MbufHead, buf_len) == 54);
    assert!(offset_of!(MbufHead, pool) == 56);
    assert!(offset_of!(MbufHead, next) == 64);
};

/// `sizeof(struct rte_mbuf)` (asserted in the shim): an mbuf's private area, then its buffer,
/// follow the structure directly.
pub const MBUF_SIZE: usize = 128;

/// `RTE_PKTMBUF_HEADROOM` of the DPDK the shim was built against (asserted there).
pub const PKTMBUF_HEADROOM: u16 = 128;

/// Offload of [`fp_port_start`]: rx IPv4, UDP and TCP checksums verified by the device.
pub const OL_RX_CSUM: u32 = 1;
/// Offload of [`fp_port_start`]: TCP segmentation (with IPv4 and TCP checksums) on tx.
pub const OL_TX_TSO: u32 = 2;
/// Offload of [`fp_port_start`]: link state change interrupts.
pub const OL_LSC: u32 = 4;
/// Offload of [`fp_port_start`]: TCP and UDP checksums completed by the device on tx.
pub const OL_TX_CSUM: u32 = 8;

/// `RTE_MBUF_F_RX_IP_CKSUM_MASK`: the device's verdict on an rx frame's IPv4 checksum.
pub const RX_IP_CKSUM_MASK: u64 = (1 << 4) | (1 << 7);
/// `RTE_MBUF_F_RX_IP_CKSUM_GOOD`.
pub const RX_IP_CKSUM_GOOD: u64 = 1 << 7;
/// `RTE_MBUF_F_RX_L4_CKSUM_MASK`: its verdict on the TCP or UDP checksum.
pub const RX_L4_CKSUM_MASK: u64 = (1 << 3) | (1 << 8);
/// `RTE_MBUF_F_RX_L4_CKSUM_GOOD`.
pub const RX_L4_CKSUM_GOOD: u64 = 1 << 8;

/// `SOCKET_ID_ANY`.
pub const SOCKET_ID_ANY: c_int = -1;

/// What [`fp_dev_info`] reports of a device.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FpDevInfo {
    /// Most rx queues the device takes.
    pub max_rx_queues: u16,
    /// Most tx queues the device takes.
    pub max_tx_queues: u16,
    /// Largest MTU.
    pub max_mtu: u16,
    /// Its MAC address.
    pub mac: [u8; 6],
    /// The driver's name, NUL-terminated (`net_pcap`).
    pub driver: [c_char; 64],
}

/// The device's basic counters ([`fp_stats`]).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct FpStats {
    /// Packets received.
    pub ipackets: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Packets the device dropped on receive (rings full).
    pub imissed: u64,
    /// Receive errors.
    pub ierrors: u64,
    /// Send errors.
    pub oerrors: u64,
    /// Receive failures for want of an mbuf.
    pub rx_nombuf: u64,
}

unsafe extern "C" {
    /// `rte_errno` of the calling thread.
    pub fn fp_errno() -> c_int;
    /// `rte_strerror`.
    pub fn fp_strerror(err: c_int) -> *const c_char;
    /// `rte_version`.
    pub fn fp_version() -> *const c_char;
    /// `rte_eal_init`.
    pub fn fp_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    /// `rte_thread_register`: gives the calling thread an lcore id (and so a mempool cache).
    pub fn fp_thread_register() -> c_int;
    /// `rte_thread_unregister`.
    pub fn fp_thread_unregister();

    /// `rte_eth_rx_burst`.
    pub fn fp_rx_burst(port: u16, q: u16, v: *mut *mut MbufHead, n: u16) -> u16;
    /// `rte_eth_tx_burst`: the device owns the first (returned) count of `v` afterwards.
    pub fn fp_tx_burst(port: u16, q: u16, v: *mut *mut MbufHead, n: u16) -> u16;
    /// `rte_pktmbuf_alloc_bulk`: 0, or nonzero with nothing allocated.
    pub fn fp_alloc_bulk(mp: *mut RteMempool, v: *mut *mut MbufHead, n: c_uint) -> c_int;
    /// `rte_pktmbuf_free_bulk`.
    pub fn fp_free_bulk(v: *mut *mut MbufHead, n: c_uint);
    /// `rte_pktmbuf_free`: the mbuf (and the rest of its chain) back to its pool.
    pub fn fp_free(m: *mut MbufHead);
    /// Asks the device to segment TCP super-frame chain `m` into `mss`-byte segments: the
    /// tx offload fields and flags, and the pseudo-header checksum in the TCP header (which
    /// is in the first segment, after `l2_len` + `l3_len` bytes).
    pub fn fp_tx_tso(
        m: *mut MbufHead,
        l2_len: u16,
        l3_len: u16,
        l4_len: u16,
        mss: u16,
        ipv6: c_int,
    );

    /// Asks the device to complete the TCP (`udp` 0) or UDP checksum of single-segment mbuf
    /// `m`, whose checksum field holds the pseudo-header sum: the tx offload fields (`l2_len`,
    /// `l3_len`) and flags.
    pub fn fp_tx_csum(m: *mut MbufHead, l2_len: u16, l3_len: u16, ipv6: c_int, udp: c_int);

    /// `rte_pktmbuf_pool_create`.
    pub fn fp_pool_create(
        name: *const c_char,
        n: c_uint,
        cache: c_uint,
        priv_size: u16,
        data_room: u16,
        socket: c_int,
    ) -> *mut RteMempool;
    /// `rte_mempool_free`.
    pub fn fp_pool_free(mp: *mut RteMempool);
    /// `rte_mempool_avail_count`.
    pub fn fp_pool_avail(mp: *const RteMempool) -> c_uint;
    /// `rte_mempool_in_use_count`.
    pub fn fp_pool_in_use(mp: *const RteMempool) -> c_uint;

    /// Finds the port `devargs` names, probing the device if needed; `*probed` says whether
    /// this call attached it. 0 or a negative errno.
    pub fn fp_dev_attach(devargs: *const c_char, port: *mut u16, probed: *mut c_int) -> c_int;
    /// Device limits, MAC and driver name.
    pub fn fp_dev_info(port: u16, out: *mut FpDevInfo) -> c_int;
    /// Configures (RSS as offered, queues, MTU, the offloads `*offloads` asks for that the
    /// device has: [`OL_RX_CSUM`]...) and starts a port; the ring sizes and the offloads
    /// enabled come back; `*step` names the call that failed.
    pub fn fp_port_start(
        port: u16,
        nrxq: u16,
        ntxq: u16,
        nrxd: *mut u16,
        ntxd: *mut u16,
        mtu: u16,
        mp: *mut RteMempool,
        offloads: *mut u32,
        step: *mut *const c_char,
    ) -> c_int;
    /// Stops and closes a port, detaching its device when `detach`.
    pub fn fp_port_close(port: u16, detach: c_int) -> c_int;
    /// Link state and speed (Mbps), without waiting.
    pub fn fp_link(port: u16, up: *mut c_int, speed: *mut u32) -> c_int;
    /// The device's basic counters.
    pub fn fp_stats(port: u16, out: *mut FpStats) -> c_int;
    /// Extended statistics into `names`/`values` (room for `n`); returns how many the device
    /// has, or a negative errno. With `names` null it only counts.
    pub fn fp_xstats(port: u16, names: *mut [c_char; 64], values: *mut u64, n: c_uint) -> c_int;
    /// Ports available.
    pub fn fp_port_count() -> u16;
}
