//! In-process links: two ports joined back to back by a pair of single-producer
//! single-consumer rings, one each way, so that the generator on its thread and the switch's
//! PMD on its own exchange packets with no copy, no lock and no system call, as a NIC pair
//! cabled back to back would. `flowpath gen --switch CONFIG` joins the switch's `gen` ports
//! to the stream file's `switch` ports with them.
//!
//! A frame moves as the packet that holds it: the receiving thread frees its buffer into its
//! own pool. The generator allocates what it sends and frees what comes back, the switch
//! the other way round, so in a steady forwarding run both pools stay level.
//!
//! A full ring drops what does not fit, counted as `tx_dropped` of the sending side.

use std::sync::Arc;

use datapath::packet::{Batch, Packet, PacketMeta, Pool};
use datapath::port::{Port, PortCounters, QueueStats, RxQueue, TxQueue};
use rtrb::{Consumer, Producer, RingBuffer};

/// Packets a ring holds (each way).
pub const RING: usize = 4096;

/// One side of a link.
pub struct LinkPort {
    name: String,
    kind: &'static str,
    rx: Option<Consumer<Packet>>,
    tx: Option<Producer<Packet>>,
    rx_stats: Arc<QueueStats>,
    tx_stats: Arc<QueueStats>,
}

/// A link named `name`: (the switch's side, of type `gen`; the generator's side, of type
/// `switch`).
pub fn link(name: &str) -> (LinkPort, LinkPort) {
    let (a_tx, b_rx) = RingBuffer::new(RING);
    let (b_tx, a_rx) = RingBuffer::new(RING);
    let side = |kind, rx, tx| LinkPort {
        name: name.to_owned(),
        kind,
        rx: Some(rx),
        tx: Some(tx),
        rx_stats: QueueStats::shared(),
        tx_stats: QueueStats::shared(),
    };
    (side("gen", a_rx, a_tx), side("switch", b_rx, b_tx))
}

impl Port for LinkPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn n_rxq(&self) -> usize {
        1
    }
    fn take_rxq(&mut self, q: usize, in_port: u32) -> Option<Box<dyn RxQueue>> {
        if q != 0 {
            return None;
        }
        Some(Box::new(LinkRx {
            ring: self.rx.take()?,
            stats: self.rx_stats.clone(),
            in_port,
        }))
    }
    /// The ring has one producer: the first tx queue gets it, later ones drop everything.
    fn open_txq(&mut self) -> Box<dyn TxQueue> {
        Box::new(LinkTx {
            ring: self.tx.take(),
            stats: self.tx_stats.clone(),
        })
    }
    fn counters(&self) -> PortCounters {
        let mut c = self.rx_stats.snapshot();
        c += self.tx_stats.snapshot();
        c
    }
}

struct LinkRx {
    ring: Consumer<Packet>,
    stats: Arc<QueueStats>,
    in_port: u32,
}

impl RxQueue for LinkRx {
    /// Takes a whole burst at once: the ring's index moves once per burst, not per packet.
    fn recv(&mut self, _pool: &mut Pool, batch: &mut Batch) -> usize {
        let n = self.ring.slots().min(batch.room());
        if n == 0 {
            return 0;
        }
        let Ok(chunk) = self.ring.read_chunk(n) else {
            return 0;
        };
        let mut bytes = 0;
        let first = batch.len();
        for mut p in chunk {
            p.meta = PacketMeta::received(self.in_port);
            bytes += p.len() as u64;
            batch.push(p);
        }
        // The frames were written on the other thread's core: read a byte of each line the
        // next stage will read (headers, the tail's stamp) back to back, so that their cache
        // misses overlap rather than come one per packet in the stages after.
        let mut touch = 0u8;
        for p in &batch.packets()[first..] {
            let d = p.data();
            touch ^= d.first().copied().unwrap_or(0) ^ d.last().copied().unwrap_or(0);
        }
        std::hint::black_box(touch);
        self.stats.count_rx(n as u64, bytes, 0, 0);
        n
    }
}

struct LinkTx {
    ring: Option<Producer<Packet>>,
    stats: Arc<QueueStats>,
}

impl TxQueue for LinkTx {
    /// Puts what fits into the ring in one chunk (one index update); the rest is dropped.
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let fits = batch.len().min(self.ring.as_ref().map_or(0, |r| r.slots()));
        let (mut sent, mut bytes) = (0, 0);
        let mut drain = batch.drain();
        if fits > 0
            && let Some(chunk) = self
                .ring
                .as_mut()
                .and_then(|r| r.write_chunk_uninit(fits).ok())
        {
            let taken = drain
                .by_ref()
                .take(fits)
                .inspect(|p| bytes += p.len() as u64);
            sent = chunk.fill_from_iter(taken) as u64;
        }
        let mut dropped = 0;
        for p in drain {
            dropped += 1;
            pool.free(p);
        }
        self.stats.count_tx(sent, bytes, dropped, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_both_ways_and_a_full_ring_drops() {
        let (mut sw, mut g) = link("p0");
        assert_eq!((sw.kind(), g.kind()), ("gen", "switch"));
        let mut sw_rx = sw.take_rxq(0, 3).unwrap();
        let mut g_rx = g.take_rxq(0, 1).unwrap();
        assert!(g.take_rxq(0, 1).is_none());
        let mut sw_tx = sw.open_txq();
        let mut g_tx = g.open_txq();
        let mut pool = Pool::new(64, 0);
        let mut b = Batch::new();
        b.push(pool.packet_from(&[1; 60], 0));
        g_tx.send(&mut b, &mut pool);
        let mut got = Batch::new();
        assert_eq!(sw_rx.recv(&mut pool, &mut got), 1);
        assert_eq!(got.packets()[0].meta.in_port, 3);
        sw_tx.send(&mut got, &mut pool);
        assert_eq!(g_rx.recv(&mut pool, &mut got), 1);
        assert_eq!(got.packets()[0].data(), &[1; 60]);
        pool.free_batch(&mut got);
        // Fill the ring.
        for _ in 0..RING / 32 + 1 {
            let mut b = Batch::new();
            for _ in 0..32 {
                b.push(pool.packet_from(&[2; 60], 0));
            }
            g_tx.send(&mut b, &mut pool);
        }
        let c = g.counters();
        assert_eq!((c.tx_packets, c.tx_dropped), (1 + RING as u64, 32));
        // A second tx queue on the same side has no ring: it drops.
        let mut extra = g.open_txq();
        let mut b = Batch::new();
        b.push(pool.packet_from(&[3; 60], 0));
        extra.send(&mut b, &mut pool);
        assert_eq!(g.counters().tx_dropped, 33);
    }
}
