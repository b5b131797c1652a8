/*
 * The C side of flowpath's DPDK bindings. DPDK's fast-path calls (rx/tx burst, mbuf bulk
 * alloc/free) are static inline in its headers, so they are compiled here into ordinary
 * functions that Rust can call; the control path (port configuration with RSS, MTU, stats,
 * xstats, hot plug) takes plain arguments so that Rust never mirrors DPDK's large structures.
 * The _Static_asserts pin every mbuf offset that src/lib.rs reads: a DPDK whose layout differs
 * fails the build instead of corrupting packets.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_version.h>

_Static_assert(sizeof(struct rte_mbuf) == 128, "rte_mbuf size");
_Static_assert(offsetof(struct rte_mbuf, buf_addr) == 0, "buf_addr");
_Static_assert(offsetof(struct rte_mbuf, data_off) == 16, "data_off");
_Static_assert(offsetof(struct rte_mbuf, refcnt) == 18, "refcnt");
_Static_assert(offsetof(struct rte_mbuf, nb_segs) == 20, "nb_segs");
_Static_assert(offsetof(struct rte_mbuf, port) == 22, "port");
_Static_assert(offsetof(struct rte_mbuf, ol_flags) == 24, "ol_flags");
_Static_assert(offsetof(struct rte_mbuf, packet_type) == 32, "packet_type");
_Static_assert(offsetof(struct rte_mbuf, pkt_len) == 36, "pkt_len");
_Static_assert(offsetof(struct rte_mbuf, data_len) == 40, "data_len");
_Static_assert(offsetof(struct rte_mbuf, hash) == 44, "hash");
_Static_assert(offsetof(struct rte_mbuf, buf_len) == 54, "buf_len");
_Static_assert(offsetof(struct rte_mbuf, pool) == 56, "pool");
_Static_assert(offsetof(struct rte_mbuf, next) == 64, "next");
_Static_assert(RTE_PKTMBUF_HEADROOM == 128, "RTE_PKTMBUF_HEADROOM");
_Static_assert(RTE_ETH_NAME_MAX_LEN <= 64, "port name length");

int fp_errno(void) { return rte_errno; }

const char *fp_strerror(int err) { return rte_strerror(err); }

const char *fp_version(void) { return rte_version(); }

int fp_eal_init(int argc, char **argv) { return rte_eal_init(argc, argv); }

int fp_thread_register(void) { return rte_thread_register(); }

void fp_thread_unregister(void) { rte_thread_unregister(); }

/* Fast path. */

uint16_t fp_rx_burst(uint16_t port, uint16_t q, struct rte_mbuf **v, uint16_t n)
{
    return rte_eth_rx_burst(port, q, v, n);
}

uint16_t fp_tx_burst(uint16_t port, uint16_t q, struct rte_mbuf **v, uint16_t n)
{
    return rte_eth_tx_burst(port, q, v, n);
}

int fp_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **v, unsigned n)
{
    return rte_pktmbuf_alloc_bulk(mp, v, n);
}

void fp_free_bulk(struct rte_mbuf **v, unsigned n) { rte_pktmbuf_free_bulk(v, n); }

void fp_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }

_Static_assert(RTE_MBUF_F_RX_IP_CKSUM_MASK == ((1ULL << 4) | (1ULL << 7)), "rx ip cksum mask");
_Static_assert(RTE_MBUF_F_RX_IP_CKSUM_GOOD == (1ULL << 7), "rx ip cksum good");
_Static_assert(RTE_MBUF_F_RX_L4_CKSUM_MASK == ((1ULL << 3) | (1ULL << 8)), "rx l4 cksum mask");
_Static_assert(RTE_MBUF_F_RX_L4_CKSUM_GOOD == (1ULL << 8), "rx l4 cksum good");

/*
 * Asks the device to segment TCP super-frame chain `m` (headers in its first segment): the
 * header lengths and the MSS in the mbuf's tx offload fields, the TSO flags, and the TCP
 * checksum field set to the pseudo-header's sum without the length, as DPDK's TSO wants it.
 * `l3_len` is the IP header's length, `ipv6` whether it is IPv6.
 */
void fp_tx_tso(struct rte_mbuf *m, uint16_t l2_len, uint16_t l3_len, uint16_t l4_len,
               uint16_t mss, int ipv6)
{
    m->l2_len = l2_len;
    m->l3_len = l3_len;
    m->l4_len = l4_len;
    m->tso_segsz = mss;
    char *l3 = rte_pktmbuf_mtod_offset(m, char *, l2_len);
    struct rte_tcp_hdr *tcp = (struct rte_tcp_hdr *)(l3 + l3_len);
    if (ipv6) {
        m->ol_flags = RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_IPV6 | RTE_MBUF_F_TX_TCP_CKSUM;
        tcp->cksum = rte_ipv6_phdr_cksum((struct rte_ipv6_hdr *)l3, m->ol_flags);
    } else {
        struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)l3;
        m->ol_flags = RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM
                      | RTE_MBUF_F_TX_TCP_CKSUM;
        ip->hdr_checksum = 0;
        tcp->cksum = rte_ipv4_phdr_cksum(ip, m->ol_flags);
    }
}

/*
 * Asks the device to complete the TCP (`udp` 0) or UDP checksum of single-segment frame `m`,
 * whose checksum field holds the pseudo-header sum already: the header lengths in the mbuf's
 * tx offload fields and the checksum flags (no IPv4 header checksum: the frame's is right).
 */
void fp_tx_csum(struct rte_mbuf *m, uint16_t l2_len, uint16_t l3_len, int ipv6, int udp)
{
    m->l2_len = l2_len;
    m->l3_len = l3_len;
    m->ol_flags = (ipv6 ? RTE_MBUF_F_TX_IPV6 : RTE_MBUF_F_TX_IPV4)
                  | (udp ? RTE_MBUF_F_TX_UDP_CKSUM : RTE_MBUF_F_TX_TCP_CKSUM);
}

/* Mempools. */

struct rte_mempool *fp_pool_create(const char *name, unsigned n, unsigned cache,
                                   uint16_t priv_size, uint16_t data_room, int socket)
{
    return rte_pktmbuf_pool_create(name, n, cache, priv_size, data_room, socket);
}

void fp_pool_free(struct rte_mempool *mp) { rte_mempool_free(mp); }

unsigned fp_pool_avail(const struct rte_mempool *mp) { return rte_mempool_avail_count(mp); }

unsigned fp_pool_in_use(const struct rte_mempool *mp) { return rte_mempool_in_use_count(mp); }

/* Devices. */

/*
 * Finds the ethdev port that `devargs` names (a PCI address or a vdev string), probing the
 * device when it is not there yet. Returns 0 and sets *port and *probed (1 when this call
 * attached the device, so that closing the port should detach it), or a negative errno.
 */
int fp_dev_attach(const char *devargs, uint16_t *port, int *probed)
{
    struct rte_dev_iterator it;
    uint16_t id;

    *probed = 0;
    RTE_ETH_FOREACH_MATCHING_DEV(id, devargs, &it) {
        rte_eth_iterator_cleanup(&it);
        *port = id;
        return 0;
    }
    int err = rte_dev_probe(devargs);
    if (err < 0)
        return err;
    RTE_ETH_FOREACH_MATCHING_DEV(id, devargs, &it) {
        rte_eth_iterator_cleanup(&it);
        *port = id;
        *probed = 1;
        return 0;
    }
    return -ENODEV;
}

/* What flowpath needs to know of a device before configuring it. */
struct fp_dev_info {
    uint16_t max_rx_queues;
    uint16_t max_tx_queues;
    uint16_t max_mtu;
    uint8_t mac[6];
    char driver[64];
};

int fp_dev_info(uint16_t port, struct fp_dev_info *out)
{
    struct rte_eth_dev_info info;
    struct rte_ether_addr mac;
    int err = rte_eth_dev_info_get(port, &info);
    if (err < 0)
        return err;
    out->max_rx_queues = info.max_rx_queues;
    out->max_tx_queues = info.max_tx_queues;
    out->max_mtu = info.max_mtu;
    memset(out->driver, 0, sizeof out->driver);
    if (info.driver_name)
        strncpy(out->driver, info.driver_name, sizeof out->driver - 1);
    err = rte_eth_macaddr_get(port, &mac);
    if (err < 0)
        memset(out->mac, 0, 6);
    else
        memcpy(out->mac, mac.addr_bytes, 6);
    return 0;
}

/* Offloads fp_port_start enables where the device has them. */
#define FP_OL_RX_CSUM 1u /* rx IPv4, UDP and TCP checksums verified */
#define FP_OL_TX_TSO 2u  /* tx TCP segmentation with IPv4 and TCP checksums, chained mbufs */
#define FP_OL_LSC 4u     /* link state change interrupts */
#define FP_OL_TX_CSUM 8u /* tx TCP and UDP checksums */

/*
 * Configures and starts a port: RSS over IP/UDP/TCP as far as the device offers it, `nrxq`
 * rx and `ntxq` tx queues of the given ring sizes (sizes the device adjusts), rx buffers
 * from `mp`, MTU `mtu` (0 keeps the device's), promiscuous and all-multicast on, and of the
 * offloads *offloads asks for (FP_OL_*) those the device has. *nrxd and *ntxd come back as the
 * device adjusted them, *offloads as the offloads enabled. Returns 0 or a negative errno; *step says
 * which step failed (for the error message).
 */
int fp_port_start(uint16_t port, uint16_t nrxq, uint16_t ntxq, uint16_t *nrxd, uint16_t *ntxd,
                  uint16_t mtu, struct rte_mempool *mp, uint32_t *offloads, const char **step)
{
    struct rte_eth_dev_info info;
    struct rte_eth_conf conf;
    int err;

    *step = "rte_eth_dev_info_get";
    err = rte_eth_dev_info_get(port, &info);
    if (err < 0)
        return err;
    memset(&conf, 0, sizeof conf);
    uint64_t rss = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP) & info.flow_type_rss_offloads;
    if (nrxq > 1 && rss) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf = rss;
    }
    if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
    uint32_t want = *offloads;
    *offloads = 0;
    const uint64_t rx_csum = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM
                             | RTE_ETH_RX_OFFLOAD_TCP_CKSUM;
    if ((want & FP_OL_RX_CSUM) && (info.rx_offload_capa & rx_csum) == rx_csum) {
        conf.rxmode.offloads |= rx_csum;
        *offloads |= FP_OL_RX_CSUM;
    }
    const uint64_t tso = RTE_ETH_TX_OFFLOAD_TCP_TSO | RTE_ETH_TX_OFFLOAD_MULTI_SEGS
                         | RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
    if ((want & FP_OL_TX_TSO) && (info.tx_offload_capa & tso) == tso) {
        conf.txmode.offloads |= tso;
        *offloads |= FP_OL_TX_TSO;
    }
    const uint64_t tx_csum = RTE_ETH_TX_OFFLOAD_TCP_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
    if ((want & FP_OL_TX_CSUM) && (info.tx_offload_capa & tx_csum) == tx_csum) {
        conf.txmode.offloads |= tx_csum;
        *offloads |= FP_OL_TX_CSUM;
    }
    if ((want & FP_OL_LSC) && (*info.dev_flags & RTE_ETH_DEV_INTR_LSC)) {
        conf.intr_conf.lsc = 1;
        *offloads |= FP_OL_LSC;
    }
    *step = "rte_eth_dev_configure";
    err = rte_eth_dev_configure(port, nrxq, ntxq, &conf);
    if (err < 0)
        return err;
    if (mtu) {
        *step = "rte_eth_dev_set_mtu";
        err = rte_eth_dev_set_mtu(port, mtu);
        if (err < 0 && err != -ENOTSUP)
            return err;
    }
    *step = "rte_eth_dev_adjust_nb_rx_tx_desc";
    err = rte_eth_dev_adjust_nb_rx_tx_desc(port, nrxd, ntxd);
    if (err < 0)
        return err;
    int socket = rte_eth_dev_socket_id(port);
    if (socket < 0)
        socket = SOCKET_ID_ANY;
    *step = "rte_eth_rx_queue_setup";
    for (uint16_t q = 0; q < nrxq; q++) {
        err = rte_eth_rx_queue_setup(port, q, *nrxd, socket, NULL, mp);
        if (err < 0)
            return err;
    }
    *step = "rte_eth_tx_queue_setup";
    for (uint16_t q = 0; q < ntxq; q++) {
        err = rte_eth_tx_queue_setup(port, q, *ntxd, socket, NULL);
        if (err < 0)
            return err;
    }
    *step = "rte_eth_dev_start";
    err = rte_eth_dev_start(port);
    if (err < 0)
        return err;
    /* Not every vdev has a promiscuous or multicast mode; a switch port wants them where
     * they exist. */
    (void)rte_eth_promiscuous_enable(port);
    (void)rte_eth_allmulticast_enable(port);
    return 0;
}

/* Stops and closes a port, and detaches its device when `detach` (flowpath probed it). */
int fp_port_close(uint16_t port, int detach)
{
    struct rte_eth_dev_info info;
    struct rte_device *dev = NULL;
    if (rte_eth_dev_info_get(port, &info) == 0)
        dev = info.device;
    (void)rte_eth_dev_stop(port);
    int err = rte_eth_dev_close(port);
    if (err < 0)
        return err;
    if (detach && dev)
        return rte_dev_remove(dev);
    return 0;
}

/* Link state without waiting: *up 0/1, *speed in Mbps. */
int fp_link(uint16_t port, int *up, uint32_t *speed)
{
    struct rte_eth_link link;
    memset(&link, 0, sizeof link);
    int err = rte_eth_link_get_nowait(port, &link);
    if (err < 0)
        return err;
    *up = link.link_status == RTE_ETH_LINK_UP;
    *speed = link.link_speed;
    return 0;
}

/* The device's basic counters, in this order. */
struct fp_stats {
    uint64_t ipackets, opackets, ibytes, obytes, imissed, ierrors, oerrors, rx_nombuf;
};

int fp_stats(uint16_t port, struct fp_stats *out)
{
    struct rte_eth_stats s;
    int err = rte_eth_stats_get(port, &s);
    if (err < 0)
        return err;
    out->ipackets = s.ipackets;
    out->opackets = s.opackets;
    out->ibytes = s.ibytes;
    out->obytes = s.obytes;
    out->imissed = s.imissed;
    out->ierrors = s.ierrors;
    out->oerrors = s.oerrors;
    out->rx_nombuf = s.rx_nombuf;
    return 0;
}

/*
 * Extended statistics: fills up to `n` names (64 bytes each, NUL-terminated) and values;
 * returns how many the device has (which may be more than `n`: call again with room), or a
 * negative errno.
 */
int fp_xstats(uint16_t port, char (*names)[64], uint64_t *values, unsigned n)
{
    int total = rte_eth_xstats_get_names(port, NULL, 0);
    if (total < 0 || (unsigned)total > n || names == NULL)
        return total;
    if (total == 0)
        return 0;
    /* Big NICs have thousands of xstats: on the heap, not the stack. */
    struct rte_eth_xstat_name *nm = calloc(total, sizeof *nm);
    struct rte_eth_xstat *xs = calloc(total, sizeof *xs);
    int ret = -ENOMEM;
    if (!nm || !xs)
        goto out;
    int got = rte_eth_xstats_get_names(port, nm, total);
    ret = got;
    if (got < 0)
        goto out;
    int vals = rte_eth_xstats_get(port, xs, total);
    ret = vals;
    if (vals < 0)
        goto out;
    if (vals > got)
        vals = got;
    _Static_assert(sizeof nm[0].name == 64, "xstat name size");
    for (int i = 0; i < vals; i++) {
        memcpy(names[i], nm[xs[i].id < (uint64_t)got ? xs[i].id : (uint64_t)i].name, 64);
        names[i][63] = 0;
        values[i] = xs[i].value;
    }
    ret = vals;
out:
    free(nm);
    free(xs);
    return ret;
}

uint16_t fp_port_count(void) { return rte_eth_dev_count_avail(); }
