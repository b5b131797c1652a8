//! The PMD's `ct()` across passes and tables. A PMD given another connection table
//! (`Pmd::set_conntrack`) tracks in that table from its next packet: nothing of the old table's
//! (cached connections, connections waiting to be queued for expiry, the cached zone policy)
//! serves or leaks into the new one. A second `ct()` of a packet that writes the mark is not
//! skipped for the packet being tracked already.

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

/// A PMD polling [`udp_frame`] on port 1 into a sink on port 2, tracking in `ct`, with `flows`
/// (datapath flows over ports `p0` and `p1`).
fn pmd_with_flows(ct: &Arc<conntrack::Conntrack>, flows: &[(String, &str)]) -> Pmd {
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.set_conntrack(ct.clone());
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
    for (k, act) in flows {
        pmd.add_flow(parse_megaflow(&names, k, act).unwrap())
            .unwrap();
    }
    pmd
}

const PLAIN: &str = "in_port(p0),eth_type(0x0800),ipv4(frag=no)";

/// The anchor's pipeline with a mark written by the second `ct()`, on a connection committed
/// (without a mark) before the PMD saw it: the first `ct()` finds it and caches it, and the
/// second, although the packet is tracked already, still writes the mark.
#[test]
fn a_second_ct_that_writes_the_mark_is_not_skipped() {
    let ct = Arc::new(conntrack::Conntrack::new());
    let frame = udp_frame();
    let mut md = conntrack::CtMeta::default();
    let pkt = conntrack::CtPacket {
        frame: &frame,
        l3: 14,
        v6: false,
        frag_l4_len: None,
        verified: false,
        natted: false,
    };
    let commit = conntrack::CtArgs {
        commit: true,
        ..Default::default()
    };
    let now = conntrack::now_ms();
    ct.process(&mut conntrack::CtCache::new(), &pkt, &mut md, &commit, now);
    assert_eq!(ct.dump(None, now)[0].mark, 0, "committed without a mark");
    let second = "ct(commit,mark=0x2a/0xffffffff),p1";
    let mut pmd = pmd_with_flows(
        &ct,
        &[
            (format!("ct_state(-trk),{PLAIN}"), "ct,recirc(0x1)"),
            (format!("ct_state(+new+trk),recirc_id(0x1),{PLAIN}"), second),
            (format!("ct_state(+est+trk),recirc_id(0x1),{PLAIN}"), second),
        ],
    );
    for _ in 0..4 {
        pmd.poll_once();
    }
    assert!(pmd.stats().tx_packets > 0);
    let d = ct.dump(None, conntrack::now_ms());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].mark, 0x2a, "the second ct() wrote the mark");
}

#[test]
fn a_new_table_tracks_from_the_next_packet() {
    let (a, b) = (
        Arc::new(conntrack::Conntrack::new()),
        Arc::new(conntrack::Conntrack::new()),
    );
    let mut pmd = pmd_with_flows(
        &a,
        &[
            (format!("ct_state(-trk),{PLAIN}"), "ct,recirc(0x1)"),
            (
                format!("ct_state(+new+trk),recirc_id(0x1),{PLAIN}"),
                "ct(commit),p1",
            ),
            (format!("ct_state(+est+trk),recirc_id(0x1),{PLAIN}"), "p1"),
        ],
    );
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
