//! A pass's packets are grouped by megaflow: groups run in order of first appearance, each
//! group's packets in arrival order, and each megaflow's statistics count its own packets,
//! however the flows interleave in the burst.

use std::sync::{Arc, Mutex};

use datapath::dpif::parse_megaflow;
use datapath::packet::{Batch, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::{RxQueue, TxQueue};
use flow::odp::PortNames;

/// Sends its frames once per poll.
struct Feed(Vec<Vec<u8>>);

impl RxQueue for Feed {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let n = batch.room().min(self.0.len());
        for f in &self.0[..n] {
            batch.push(pool.packet_from(f, 1));
        }
        n
    }
}

/// Keeps what it is sent.
#[derive(Clone, Default)]
struct Keep(Arc<Mutex<Vec<Vec<u8>>>>);

impl TxQueue for Keep {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let mut got = self.0.lock().unwrap();
        for p in batch.packets() {
            got.push(p.data().to_vec());
        }
        pool.free_batch(batch);
    }
}

/// An IPv4/UDP frame to port `dport`, numbered `seq` in its payload.
fn frame(dport: u16, seq: u8) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[
        0x45, 0, 0, 30, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&1000u16.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 10, 0, 0, seq, 0]);
    f
}

#[test]
fn interleaved_flows_keep_their_order_and_their_counts() {
    let mut names = PortNames::new();
    for (n, p) in [("p0", 1), ("p1", 2), ("p2", 3)] {
        names.insert(n, p);
    }
    // A different megaflow for each of 5 destination ports (32 frames, every interleaving of
    // them in turn): 1 and 2 go to p1, 3 and 4 to p2, 5 to both.
    let outs = ["p1", "p1", "p2", "p2", "p1,p2"];
    let order: Vec<u16> = (0..32u16).map(|i| 1 + (i * 7 + i / 5) % 5).collect();
    let frames: Vec<Vec<u8>> = order
        .iter()
        .enumerate()
        .map(|(i, &d)| frame(d, i as u8))
        .collect();
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(Feed(frames.clone())),
        cycles: 0,
    });
    let sinks = [Keep::default(), Keep::default()];
    pmd.add_txq(2, Box::new(sinks[0].clone()));
    pmd.add_txq(3, Box::new(sinks[1].clone()));
    for (d, out) in (1..=5u16).zip(outs) {
        let m = format!("in_port(p0),eth_type(0x0800),ipv4(proto=17,frag=no),udp(dst={d})");
        pmd.add_flow(parse_megaflow(&names, &m, out).unwrap())
            .unwrap();
    }
    pmd.poll_once();
    // Groups in order of first appearance, each in arrival order.
    let mut firsts: Vec<u16> = Vec::new();
    for &d in &order {
        if !firsts.contains(&d) {
            firsts.push(d);
        }
    }
    for (k, sink) in sinks.iter().enumerate() {
        let port = ["p1", "p2"][k];
        let want: Vec<Vec<u8>> = firsts
            .iter()
            .filter(|&&d| outs[usize::from(d) - 1].contains(port))
            .flat_map(|&d| {
                frames
                    .iter()
                    .zip(&order)
                    .filter(move |(_, o)| **o == d)
                    .map(|(f, _)| f.clone())
            })
            .collect();
        assert_eq!(*sink.0.lock().unwrap(), want, "{port}");
    }
    for d in pmd.dump() {
        let dport = d.flow.m.key().tp_dst();
        let n = order.iter().filter(|&&o| o == dport).count() as u64;
        assert_eq!(d.flow.stats.packets, n, "udp dst {dport}");
    }
    assert_eq!(pmd.dump().len(), 5);
}
