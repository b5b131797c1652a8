//! A PMD given another connection table (`Pmd::set_conntrack`) tracks in that table from its
//! next packet: nothing of the old table's (cached connections, connections waiting to be
//! queued for expiry, the cached zone policy) serves or leaks into the new one.

use std::sync::Arc;

use datapath::dpif::parse_megaflow;
use datapath::packet::{Batch, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::{RxQueue, TxQueue};
use flow::odp::PortNames;

/// Replays one frame forever.
struct Replay(Vec<u8>);

impl RxQueue for Replay {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let n = batch.room().min(4);
        for _ in 0..n {
            batch.push(pool.packet_from(&self.0, 1));
        }
        n
    }
}

struct Sink;

impl TxQueue for Sink {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        pool.free_batch(batch);
    }
}

/// Ethernet / IPv4 / UDP 10.0.0.1:1000 -> 10.0.0.2:2000, checksums filled.
fn udp_frame() -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    let ip = [
        0x45, 0, 0, 46, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    f.extend_from_slice(&ip);
    let sum = !wire::checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&[0x03, 0xe8, 0x07, 0xd0, 0, 26, 0, 0]);
    f.resize(60, 0);
    f
}

#[test]
fn a_new_table_tracks_from_the_next_packet() {
    let (a, b) = (
        Arc::new(conntrack::Conntrack::new()),
        Arc::new(conntrack::Conntrack::new()),
    );
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.set_conntrack(a.clone());
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(Replay(udp_frame())),
        cycles: 0,
    });
    pmd.add_txq(2, Box::new(Sink));
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p1", 2);
    let plain = "in_port(p0),eth_type(0x0800),ipv4(frag=no)";
    for (k, act) in [
        (format!("ct_state(-trk),{plain}"), "ct,recirc(0x1)"),
        (
            format!("ct_state(+new+trk),recirc_id(0x1),{plain}"),
            "ct(commit),p1",
        ),
        (format!("ct_state(+est+trk),recirc_id(0x1),{plain}"), "p1"),
    ] {
        pmd.add_flow(parse_megaflow(&names, &k, act).unwrap())
            .unwrap();
    }
    for _ in 0..8 {
        pmd.poll_once();
    }
    assert_eq!(a.n_conns(), 1, "the flow's connection, in the first table");
    let sent = pmd.stats().tx_packets;
    assert!(sent > 0);

    pmd.set_conntrack(b.clone());
    for _ in 0..8 {
        pmd.poll_once();
    }
    assert!(pmd.stats().tx_packets > sent, "forwarding goes on");
    assert_eq!(
        b.n_conns(),
        1,
        "the new table has the flow's connection: the old table's cached one did not serve"
    );
    assert!(b.stats().committed >= 1);
}
