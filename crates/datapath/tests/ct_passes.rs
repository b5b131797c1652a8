//! The PMD's `ct()` across passes and tables. A PMD given another connection table
//! (`Pmd::set_conntrack`) tracks in that table from its next packet: nothing of the old table's
//! (cached connections, connections waiting to be queued for expiry, the cached zone policy)
//! serves or leaks into the new one. A second `ct()` of a packet that writes a mark the packet
//! does not show is not skipped for the packet being tracked already; one that does not write,
//! or writes what the packet shows already, keeps the first one's state for a whole burst. Keys carry a connection's original tuple
//! (`ct_tuple4`) only while a megaflow looks at it, and always to the slow path. A pass after
//! a recirculation takes its keys from the pass before only when nothing rewrote the headers
//! in between.

mod common;

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
    let rx = Box::new(Replay(udp_frame()));
    pmd_on(ct, rx, vec![(2, Box::new(Sink))], flows, upcall)
}

/// A PMD polling `rx` on port 1 (`p0`), sending on `txqs` (ports 2 and 3 are `p1` and `p2`).
fn pmd_on(
    ct: &Arc<conntrack::Conntrack>,
    rx: Box<dyn RxQueue>,
    txqs: Vec<(u32, Box<dyn TxQueue>)>,
    flows: &[(String, &str)],
    upcall: Box<dyn UpcallHandler>,
) -> Pmd {
    let mut pmd = Pmd::new(PmdConfig::default(), upcall);
    pmd.set_conntrack(ct.clone());
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: rx,
        cycles: 0,
    });
    for (port, q) in txqs {
        pmd.add_txq(port, q);
    }
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p1", 2);
    names.insert("p2", 3);
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
    let commit = conntrack::CtArgs {
        commit: true,
        ..Default::default()
    };
    common::commit_frame(&ct, &udp_frame(), &commit);
    let now = conntrack::now_ms();
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

/// Commits the connection of [`udp_frame`] with `mark` and `label`, as a PMD's first packet
/// would have.
fn commit_with(ct: &conntrack::Conntrack, mark: u32, label: u128) {
    let commit = conntrack::CtArgs {
        commit: true,
        mark: Some((mark, u32::MAX)),
        label: Some((label, u128::MAX)),
        ..Default::default()
    };
    common::commit_frame(ct, &udp_frame(), &commit);
}

/// OVN's commit of the mark and label in a pass after the `ct()` that found the connection:
/// where the packet shows what the commit makes already (`mark=0/0x1` of mark 0x2, the label
/// it has) the connection is left as it is; where it does not (`mark=0x1/0x1`), the commit
/// writes, and the next pass sees the connection's new mark either way.
#[test]
fn a_commit_the_packet_shows_already_leaves_the_connection_as_it_is() {
    for (commit, mark_after) in [("mark=0/0x1", 0x2), ("mark=0x1/0x1", 0x3)] {
        let ct = Arc::new(conntrack::Conntrack::new());
        commit_with(&ct, 0x2, 0x2a);
        let mut pmd = pmd_with_flows(
            &ct,
            &[
                (format!("ct_state(-trk),{PLAIN}"), "ct,recirc(0x1)"),
                (
                    format!("ct_state(+new+trk),recirc_id(0x1),{PLAIN}"),
                    &format!("ct(commit,{commit},label=0x2a),recirc(0x2)"),
                ),
                (
                    format!(
                        "ct_state(+new+trk),ct_mark({mark_after:#x}),ct_label(0x2a),recirc_id(0x2),{PLAIN}"
                    ),
                    "p1",
                ),
            ],
        );
        for _ in 0..8 {
            pmd.poll_once();
        }
        let s = pmd.stats();
        assert_eq!(s.tx_packets, 32, "{commit}: every packet saw its mark");
        assert_eq!(s.lost_upcalls, 0, "{commit}");
        assert_eq!(s.ct_packets, 64, "{commit}: both ct() counted every packet");
        let d = ct.dump(None, conntrack::now_ms());
        assert_eq!(
            (d.len(), d[0].mark, d[0].label),
            (1, mark_after, 0x2a),
            "{commit}"
        );
        assert_eq!(
            ct.stats().committed,
            1,
            "{commit}: the connection made once"
        );
    }
}

/// The anchor's pipeline: once the first `ct()` finds the connection in the PMD's cache, the
/// second `ct(commit)` keeps what it said for the whole burst (the packets stay `+new`, one-way
/// UDP), commits nothing again and still counts every packet it saw.
#[test]
fn a_second_ct_of_a_burst_the_first_found_keeps_its_state() {
    let ct = Arc::new(conntrack::Conntrack::new());
    let mut pmd = pmd_with_flows(
        &ct,
        &[
            (format!("ct_state(-trk),{PLAIN}"), "ct,recirc(0x1)"),
            (
                format!("ct_state(+new+trk),recirc_id(0x1),{PLAIN}"),
                "ct(commit),p1",
            ),
        ],
    );
    for _ in 0..8 {
        pmd.poll_once();
    }
    let s = pmd.stats();
    assert_eq!(
        s.tx_packets, 32,
        "every packet matched +new+trk and went out"
    );
    assert_eq!(s.lost_upcalls, 0);
    assert_eq!(s.ct_packets, 64, "both ct() counted every packet");
    assert_eq!(
        ct.stats().committed,
        1,
        "committed once, by the first burst"
    );
    assert_eq!(ct.dump(None, conntrack::now_ms()).len(), 1);
}

/// The anchor's NAT pipeline (`ct(nat)`, then `ct(commit,nat(src=...))` for `+new`): once the
/// connection is committed, the first `ct(nat)` translates each packet and the second, finding
/// it translated already, keeps its state and does not translate it again: the third pass sees
/// `+snat` and the translated source, and nothing is committed again.
#[test]
fn a_second_ct_nat_of_a_translated_packet_keeps_it() {
    let ct = Arc::new(conntrack::Conntrack::new());
    let mut pmd = pmd_with_flows(
        &ct,
        &[
            (
                format!("ct_state(-trk),recirc_id(0),{PLAIN}"),
                "ct(nat),recirc(0x1)",
            ),
            (
                format!("ct_state(+new+trk),recirc_id(0x1),{PLAIN}"),
                "ct(commit,nat(src=10.2.0.1)),recirc(0x2)",
            ),
            (
                "ct_state(+new+snat+trk),recirc_id(0x2),in_port(p0),eth_type(0x0800),\
                 ipv4(src=10.2.0.1,frag=no)"
                    .into(),
                "p1",
            ),
        ],
    );
    for _ in 0..8 {
        pmd.poll_once();
    }
    let s = pmd.stats();
    assert_eq!(s.lost_upcalls, 0, "every packet matched a flow");
    assert_eq!(s.tx_packets, 32, "translated once, +snat, and sent");
    assert_eq!(s.ct_packets, 64, "both ct() counted every packet");
    assert_eq!(s.rewrite_errors, 0);
    assert_eq!(ct.stats().committed, 1);
    let d = ct.dump(None, conntrack::now_ms());
    assert_eq!(d.len(), 1);
    assert_eq!(
        d[0].reply.dst_v4(),
        "10.2.0.1".parse::<std::net::Ipv4Addr>().unwrap()
    );
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

/// Runs [`udp_frame`] (10.0.0.1 -> 10.0.0.2) through `first` in the first pass, then a second
/// pass whose flows forward source `to` and drop source 10.0.0.1; returns the packets sent.
fn second_pass_sees_source(first: &str, to: &str) -> u64 {
    let ct = Arc::new(conntrack::Conntrack::new());
    let mut pmd = pmd_with_flows(
        &ct,
        &[
            (format!("recirc_id(0),{PLAIN}"), first),
            (
                format!("recirc_id(0x1),in_port(p0),eth_type(0x0800),ipv4(src={to},frag=no)"),
                "p1",
            ),
            (
                "recirc_id(0x1),in_port(p0),eth_type(0x0800),ipv4(src=10.0.0.1,frag=no)".into(),
                "drop",
            ),
        ],
    );
    for _ in 0..4 {
        pmd.poll_once();
    }
    let s = pmd.stats();
    assert_eq!(s.lost_upcalls, 0, "every packet matched a flow");
    s.tx_packets
}

/// Source NAT before the recirculation: the second pass matches the translated source.
#[test]
fn the_pass_after_nat_sees_the_translated_header() {
    let sent = second_pass_sees_source("ct(commit,nat(src=10.2.0.1)),recirc(0x1)", "10.2.0.1");
    assert!(sent > 0);
}

/// A rewrite before the recirculation: the second pass matches the new source.
#[test]
fn the_pass_after_a_rewrite_sees_the_new_header() {
    let sent = second_pass_sees_source("set(ipv4(src=10.3.0.1)),ct,recirc(0x1)", "10.3.0.1");
    assert!(sent > 0);
}

/// Delivers its frames once, as one burst.
struct Once(Vec<Vec<u8>>);

impl RxQueue for Once {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let n = self.0.len();
        for f in self.0.drain(..) {
            batch.push(pool.packet_from(&f, 1));
        }
        n
    }
}

/// Counts the packets it is sent, and those whose IPv4 source is not `0`.
struct BySource(std::net::Ipv4Addr, Arc<Mutex<(u64, u64)>>);

impl TxQueue for BySource {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let mut c = self.1.lock().unwrap();
        for p in batch.packets() {
            c.0 += 1;
            if p.data()[26..30] != self.0.octets() {
                c.1 += 1;
            }
        }
        pool.free_batch(batch);
    }
}

/// IPv4 `src` -> 10.0.0.2 UDP datagram `id` (1400 bytes of payload, no UDP checksum) as two
/// fragments: 1208 bytes of data (the UDP header first), then the rest.
fn udp_fragments(src: [u8; 4], id: u16) -> [Vec<u8>; 2] {
    let mut l4 = vec![0x03, 0xe8, 0x07, 0xd0];
    l4.extend_from_slice(&(8u16 + 1400).to_be_bytes());
    l4.extend_from_slice(&[0, 0]);
    l4.resize(8 + 1400, 0x5a);
    let frag = |data: &[u8], ofs: usize, more: bool| {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
        let flags = (ofs / 8) as u16 | if more { 0x2000 } else { 0 };
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&(20 + data.len() as u16).to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&flags.to_be_bytes());
        f.extend_from_slice(&[64, 17, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&[10, 0, 0, 2]);
        let sum = !wire::checksum::data(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(data);
        f
    };
    [frag(&l4[..1208], 0, true), frag(&l4[1208..], 1208, false)]
}

/// A burst whose `ct()` completes a datagram from fragments (which come back after the other
/// packets: the batch is reordered) goes through its second pass with every packet matched
/// by its own headers: each source to its own port.
#[test]
fn the_pass_after_reassembly_matches_each_packet_by_its_own_headers() {
    let ct = Arc::new(conntrack::Conntrack::new());
    let [f1, f2] = udp_fragments([10, 9, 0, 1], 7);
    let plain = udp_frame();
    let rx = Once(vec![f1, plain.clone(), f2, plain]);
    let (a, b) = (Arc::new(Mutex::new((0, 0))), Arc::new(Mutex::new((0, 0))));
    let txqs: Vec<(u32, Box<dyn TxQueue>)> = vec![
        (2, Box::new(BySource([10, 0, 0, 1].into(), a.clone()))),
        (3, Box::new(BySource([10, 9, 0, 1].into(), b.clone()))),
    ];
    let ip = |src: &str, frag: &str| {
        format!("recirc_id(0x1),in_port(p0),eth_type(0x0800),ipv4(src={src},frag={frag})")
    };
    let mut pmd = pmd_on(
        &ct,
        Box::new(rx),
        txqs,
        &[
            (
                "recirc_id(0),in_port(p0),eth_type(0x0800)".into(),
                "ct,recirc(0x1)",
            ),
            (ip("10.0.0.1", "no"), "p1"),
            (ip("10.9.0.1", "first"), "p2"),
            (ip("10.9.0.1", "later"), "p2"),
        ],
        Box::new(DropUpcalls),
    );
    pmd.poll_once();
    assert_eq!(pmd.stats().lost_upcalls, 0, "every packet matched a flow");
    assert_eq!(
        *a.lock().unwrap(),
        (2, 0),
        "the plain packets, and only they, to p1"
    );
    assert_eq!(
        *b.lock().unwrap(),
        (2, 0),
        "the fragments, and only they, to p2"
    );
}
