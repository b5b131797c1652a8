//! The PMD's `ct()` across passes and tables. A PMD given another connection table
//! (`Pmd::set_conntrack`) tracks in that table from its next packet: nothing of the old table's
//! (cached connections, connections waiting to be queued for expiry, the cached zone policy)
//! serves or leaks into the new one. A second `ct()` of a packet that writes the mark is not
//! skipped for the packet being tracked already. Keys carry a connection's original tuple
//! (`ct_tuple4`) only while a megaflow looks at it, and always to the slow path.

use std::sync::{Arc, Mutex};

use datapath::dpif::parse_megaflow;
use datapath::packet::Packet;
use datapath::packet::{Batch, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq, UpcallHandler, UpcallResult};
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
    pmd_with(ct, flows, Box::new(DropUpcalls))
}

/// [`pmd_with_flows`] with a slow path.
fn pmd_with(
    ct: &Arc<conntrack::Conntrack>,
    flows: &[(String, &str)],
    upcall: Box<dyn UpcallHandler>,
) -> Pmd {
    let mut pmd = Pmd::new(PmdConfig::default(), upcall);
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

/// The original tuple of [`udp_frame`]'s connection, as a datapath flow matches it.
const TUPLE: &str = "ct_tuple4(src=10.0.0.1,dst=10.0.0.2,proto=17,tp_src=1000,tp_dst=2000)";
/// The same with every field zero: what a key without the tuple reads.
const ZERO_TUPLE: &str = "ct_tuple4(src=0.0.0.0,dst=0.0.0.0,proto=0,tp_src=0,tp_dst=0)";

/// Runs the committed connection's packets through a second pass whose only flow matches
/// `tuple`; returns (packets sent, misses).
fn second_pass_matching(tuple: &str) -> (u64, u64) {
    let ct = Arc::new(conntrack::Conntrack::new());
    let mut pmd = pmd_with_flows(
        &ct,
        &[
            (format!("ct_state(-trk),{PLAIN}"), "ct(commit),recirc(0x1)"),
            (
                format!("ct_state(+trk),recirc_id(0x1),{tuple},{PLAIN}"),
                "p1",
            ),
        ],
    );
    for _ in 0..4 {
        pmd.poll_once();
    }
    let s = pmd.stats();
    (s.tx_packets, s.lost_upcalls)
}

/// A megaflow that matches the tuple makes keys carry it: the connection's packets match
/// their own tuple, and not a tuple of zeros (which a key without the tuple would read).
#[test]
fn a_flow_on_the_connection_tuple_sees_it() {
    let (sent, lost) = second_pass_matching(TUPLE);
    assert!(sent > 0, "matched on their tuple");
    assert_eq!(lost, 0);
    let (sent, lost) = second_pass_matching(ZERO_TUPLE);
    assert_eq!(sent, 0, "a zero tuple does not match");
    assert!(lost > 0);
}

/// Records the keys of the misses it is given, and drops them.
struct Record(Arc<Mutex<Vec<flow::FlowKey>>>);

impl UpcallHandler for Record {
    fn upcall(&mut self, key: &flow::FlowKey, _: &Packet) -> UpcallResult {
        self.0.lock().unwrap().push(key.clone());
        UpcallResult::Drop
    }
}

/// With no megaflow on the tuple (keys made without it), a miss still reaches the slow path
/// with the tuple in its key.
#[test]
fn the_slow_path_sees_the_connection_tuple() {
    let ct = Arc::new(conntrack::Conntrack::new());
    let keys = Arc::new(Mutex::new(Vec::new()));
    let mut pmd = pmd_with(
        &ct,
        &[(format!("ct_state(-trk),{PLAIN}"), "ct(commit),recirc(0x1)")],
        Box::new(Record(keys.clone())),
    );
    pmd.poll_once();
    let keys = keys.lock().unwrap();
    let k = keys.first().expect("the second pass missed");
    assert_eq!(k.recirc_id(), 1);
    assert_eq!(
        (k.ct_nw_src(), k.ct_nw_dst()),
        ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
    );
    assert_eq!(
        (k.ct_nw_proto(), k.ct_tp_src(), k.ct_tp_dst()),
        (17, 1000, 2000)
    );
}
