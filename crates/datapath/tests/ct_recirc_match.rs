//! The pass after `ct()` and `recirc` of a whole burst that one megaflow found: most packets
//! are matched from the first one's megaflow and their connection metadata alone (the
//! metadata match, `pmd/tiers/recirc_meta.rs`). What it must keep: a packet of another
//! connection state, mark or field of the later pass's megaflows finds its own megaflow, in
//! any place of the burst; a connection whose state changes between bursts changes megaflow;
//! a megaflow replaced between bursts is the one found; the recirculated megaflow counts its
//! packets, bytes and last use, and the pass counts as a pass (`pmd-stats-show`), as OVS
//! shows them. A burst the metadata match finds whole in one megaflow runs that megaflow's
//! actions at once, and its next pass right after (`Pmd::input`): a packet mark only the later
//! pass looks at still tells packets apart, and a recirculation loop still ends at the depth
//! limit, counted.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use datapath::dpif::parse_megaflow;
use datapath::packet::{Batch, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::{RxQueue, TxQueue};
use flow::odp::PortNames;

/// Delivers one burst per poll, then nothing.
struct Bursts(VecDeque<Vec<Vec<u8>>>);

impl RxQueue for Bursts {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let Some(burst) = self.0.pop_front() else {
            return 0;
        };
        for f in &burst {
            batch.push(pool.packet_from(f, 1));
        }
        burst.len()
    }
}

/// Delivers one burst per poll, each packet with its packet mark, then nothing.
struct MarkedBursts(VecDeque<Vec<(Vec<u8>, u32)>>);

impl RxQueue for MarkedBursts {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let Some(burst) = self.0.pop_front() else {
            return 0;
        };
        for (f, mark) in &burst {
            let mut p = pool.packet_from(f, 1);
            p.meta.pkt_mark = *mark;
            batch.push(p);
        }
        burst.len()
    }
}

/// Records the IPv4 source of every packet it is sent.
struct Sources(Arc<Mutex<Vec<u8>>>);

impl TxQueue for Sources {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let mut s = self.0.lock().unwrap();
        for p in batch.packets() {
            s.push(p.data()[29]);
        }
        pool.free_batch(batch);
    }
}

/// Ethernet / IPv4 / UDP 10.0.0.`src`:`sport` -> 10.0.0.`dst`:`dport`, the IPv4 checksum
/// filled, no UDP checksum.
fn udp(src: u8, dst: u8, sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    let ip = [
        0x45, 0, 0, 46, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, src, 10, 0, 0, dst,
    ];
    f.extend_from_slice(&ip);
    let sum = !wire::checksum::data(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 26, 0, 0]);
    f.resize(60, 0);
    f
}

/// 10.0.0.`src`:1000 -> 10.0.0.2:2000.
fn from(src: u8) -> Vec<u8> {
    udp(src, 2, 1000, 2000)
}

/// The reply of `from(1)`.
fn reply() -> Vec<u8> {
    udp(2, 1, 2000, 1000)
}

/// The sources each of ports `p1` and `p2` was sent (last byte of the address).
type Sent = [Arc<Mutex<Vec<u8>>>; 2];

/// A PMD polling `bursts` on port 1 (`p0`), tracking in `ct`, sending on ports 2 and 3 (`p1`,
/// `p2`), with `flows`; what each port was sent.
fn pmd(
    ct: &Arc<conntrack::Conntrack>,
    bursts: Vec<Vec<Vec<u8>>>,
    flows: &[(String, &str)],
) -> (Pmd, PortNames, Sent) {
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.set_conntrack(ct.clone());
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(Bursts(bursts.into())),
        cycles: 0,
    });
    let sent: Sent = Default::default();
    pmd.add_txq(2, Box::new(Sources(sent[0].clone())));
    pmd.add_txq(3, Box::new(Sources(sent[1].clone())));
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p1", 2);
    names.insert("p2", 3);
    for (k, act) in flows {
        pmd.add_flow(parse_megaflow(&names, k, act).unwrap())
            .unwrap();
    }
    (pmd, names, sent)
}

fn taken(s: &Arc<Mutex<Vec<u8>>>) -> Vec<u8> {
    std::mem::take(&mut *s.lock().unwrap())
}

const PLAIN: &str = "in_port(p0),eth_type(0x0800),ipv4(frag=no)";

/// The first pass: `ct`, then recirculation. Each test runs with both forms: one the simple
/// match finds (a batch of keys without packet fields for the pass after, which the simple
/// match finds again: `tiers/simple.rs`) and one that looks at the source network (whole
/// keys, for the metadata match).
fn first_passes() -> [(String, &'static str); 2] {
    let not_simple = "in_port(p0),eth_type(0x0800),ipv4(src=10.0.0.0/255.255.255.0,frag=no)";
    [
        (format!("ct_state(-trk),{PLAIN}"), "ct,recirc(0x1)"),
        (format!("ct_state(-trk),{not_simple}"), "ct,recirc(0x1)"),
    ]
}

/// Whether `first` is the first pass the simple match finds.
fn simple(first: &(String, &str)) -> bool {
    !first.0.contains("src=")
}

/// A burst of connections with different marks (one committed with mark 1 before, one
/// never committed): each packet goes by its own mark, whichever packet comes first.
#[test]
fn packets_of_another_mark_in_the_burst_find_their_own_megaflow() {
    for first in first_passes() {
        let ct = Arc::new(conntrack::Conntrack::new());
        let commit = conntrack::CtArgs {
            commit: true,
            mark: Some((1, u32::MAX)),
            ..Default::default()
        };
        common::commit_frame(&ct, &from(3), &commit);
        let bursts = vec![
            vec![from(1), from(3), from(1), from(3)],
            vec![from(3), from(1), from(1), from(1)],
            vec![from(1), from(1), from(1), from(3)],
        ];
        let mark = |m: u32| format!("ct_state(+trk),ct_mark({m:#x}),recirc_id(0x1),{PLAIN}");
        let (mut pmd, _, sent) = pmd(
            &ct,
            bursts,
            &[first.clone(), (mark(0), "p1"), (mark(1), "p2")],
        );
        for _ in 0..4 {
            pmd.poll_once();
        }
        assert_eq!(
            pmd.stats().lost_upcalls,
            0,
            "every packet matched a megaflow"
        );
        assert_eq!(
            taken(&sent[0]),
            [1; 8],
            "the unmarked connection's packets to p1"
        );
        assert_eq!(
            taken(&sent[1]),
            [3; 4],
            "the marked connection's packets to p2"
        );
    }
}

/// The later pass's megaflows look at a field the first pass's does not (the IPv4 source):
/// a packet whose connection state is the first packet's still goes by its own source.
#[test]
fn a_field_only_the_later_pass_looks_at_is_still_compared() {
    for first in first_passes() {
        let ct = Arc::new(conntrack::Conntrack::new());
        let bursts = vec![
            vec![from(1), from(3), from(1), from(3)],
            vec![from(3), from(3), from(1), from(3)],
        ];
        let src = |s: u8| {
            format!(
                "ct_state(+new+trk),recirc_id(0x1),in_port(p0),eth_type(0x0800),ipv4(src=10.0.0.{s},frag=no)"
            )
        };
        let (mut pmd, _, sent) = pmd(
            &ct,
            bursts,
            &[first.clone(), (src(1), "p1"), (src(3), "p2")],
        );
        for _ in 0..3 {
            pmd.poll_once();
        }
        assert_eq!(
            pmd.stats().lost_upcalls,
            0,
            "every packet matched a megaflow"
        );
        assert_eq!(taken(&sent[0]), [1; 3], "10.0.0.1 to p1");
        assert_eq!(taken(&sent[1]), [3; 5], "10.0.0.3 to p2");
    }
}

/// `+new` while the connection is one-way (committed by the second pass), `+est` (and the
/// reply `+est+rpl`) once a reply was seen: the same connection's packets change megaflow
/// between bursts, and within a burst whose first packet comes before the reply.
#[test]
fn a_connection_whose_state_changes_between_bursts_changes_megaflow() {
    for first in first_passes() {
        let ct = Arc::new(conntrack::Conntrack::new());
        let bursts = vec![
            vec![from(1); 4],
            vec![from(1), reply(), from(1), from(1)],
            vec![from(1); 4],
        ];
        let (mut pmd, _, sent) = pmd(
            &ct,
            bursts,
            &[
                first.clone(),
                (
                    format!("ct_state(+new+trk),recirc_id(0x1),{PLAIN}"),
                    "ct(commit),p1",
                ),
                (format!("ct_state(+est+trk),recirc_id(0x1),{PLAIN}"), "p2"),
            ],
        );
        pmd.poll_once();
        assert_eq!(taken(&sent[0]), [1; 4], "+new to p1");
        assert!(taken(&sent[1]).is_empty());
        pmd.poll_once();
        assert_eq!(taken(&sent[0]), [1], "+new before the reply");
        assert_eq!(
            taken(&sent[1]),
            [2, 1, 1],
            "the reply and what follows, +est, to p2"
        );
        pmd.poll_once();
        assert!(taken(&sent[0]).is_empty());
        assert_eq!(taken(&sent[1]), [1; 4], "+est to p2");
        assert_eq!(pmd.stats().lost_upcalls, 0);
    }
}

/// The recirculated megaflow counts every packet of the pass, its bytes and its last use, as
/// `dpctl/dump-flows` shows them; every pass counts as one (`pmd-stats-show`'s passes per
/// packet), every packet as a megaflow hit in each pass, and once as recirculated.
#[test]
fn the_recirculated_megaflow_and_the_passes_count_every_packet() {
    for first in first_passes() {
        let ct = Arc::new(conntrack::Conntrack::new());
        let bursts = vec![vec![from(1); 8], vec![from(1); 8], vec![from(1); 8]];
        let second = format!("ct_state(+new+trk),recirc_id(0x1),{PLAIN}");
        let (mut pmd, names, sent) = pmd(&ct, bursts, &[first.clone(), (second.clone(), "p1")]);
        for _ in 0..3 {
            pmd.poll_once();
        }
        assert_eq!(taken(&sent[0]).len(), 24);
        let want = parse_megaflow(&names, &second, "p1").unwrap().m;
        let dump = pmd.dump();
        let d = dump
            .iter()
            .find(|d| d.flow.m == want)
            .expect("the recirculated megaflow");
        assert_eq!(d.flow.stats.packets, 24);
        assert_eq!(d.flow.stats.bytes, 24 * 60);
        assert!(d.used_secs.is_some(), "used");
        let s = pmd.stats();
        assert_eq!(s.batches, 6, "two passes a burst");
        // Simple match hits when the simple match found the first pass.
        let hits = [s.megaflow_hits, s.simple_hits];
        let want = if simple(&first) { [0, 48] } else { [48, 0] };
        assert_eq!(hits, want, "a hit a packet in each pass");
        assert_eq!(s.recirculations, 24);
        assert_eq!(s.lost_upcalls, 0);
    }
}

/// The later pass's megaflow deleted, and then installed again with other actions, between
/// bursts: the packets miss while it is gone and go by the new actions after.
#[test]
fn a_megaflow_replaced_between_bursts_is_the_one_found() {
    for first in first_passes() {
        let ct = Arc::new(conntrack::Conntrack::new());
        let bursts = vec![vec![from(1); 4], vec![from(1); 4], vec![from(1); 4]];
        let second = format!("ct_state(+new+trk),recirc_id(0x1),{PLAIN}");
        let (mut pmd, names, sent) = pmd(&ct, bursts, &[first.clone(), (second.clone(), "p1")]);
        pmd.poll_once();
        assert_eq!(taken(&sent[0]).len(), 4);
        let m = parse_megaflow(&names, &second, "p1").unwrap().m;
        assert!(pmd.del_flow(&m).is_some());
        pmd.poll_once();
        assert_eq!(pmd.stats().lost_upcalls, 4, "missed while it was gone");
        assert!(taken(&sent[0]).is_empty() && taken(&sent[1]).is_empty());
        pmd.add_flow(parse_megaflow(&names, &second, "p2").unwrap())
            .unwrap();
        pmd.poll_once();
        assert!(taken(&sent[0]).is_empty());
        assert_eq!(taken(&sent[1]).len(), 4, "by the new actions");
        assert_eq!(pmd.stats().lost_upcalls, 4);
    }
}

/// A commit that writes the mark: the next pass sees the mark it wrote, on the burst that
/// first writes it and on the later ones, whose commit finds it written already.
#[test]
fn the_pass_after_a_commit_sees_the_mark_it_wrote() {
    for first in first_passes() {
        let ct = Arc::new(conntrack::Conntrack::new());
        let bursts = vec![vec![from(1); 4], vec![from(1); 4], vec![from(1); 4]];
        let mark = |m: u32| format!("ct_state(+trk),ct_mark({m:#x}),recirc_id(0x2),{PLAIN}");
        let (mut pmd, _, sent) = pmd(
            &ct,
            bursts,
            &[
                first.clone(),
                (
                    format!("ct_state(+trk),recirc_id(0x1),{PLAIN}"),
                    "ct(commit,mark=0x2a/0xffffffff),recirc(0x2)",
                ),
                (mark(0x2a), "p1"),
                (mark(0), "p2"),
            ],
        );
        for n in [4, 8, 12] {
            pmd.poll_once();
            assert_eq!(
                sent[0].lock().unwrap().len(),
                n,
                "with the mark written, to p1"
            );
            assert!(sent[1].lock().unwrap().is_empty());
        }
        assert_eq!(pmd.stats().lost_upcalls, 0);
        assert_eq!(ct.dump(None, conntrack::now_ms())[0].mark, 0x2a);
    }
}

/// The later pass's megaflows look at the packet mark, the first pass's does not: packets of
/// one connection state go by their own mark, in any place of the burst.
#[test]
fn a_packet_mark_only_the_later_pass_looks_at_is_still_compared() {
    for first in first_passes() {
        let ct = Arc::new(conntrack::Conntrack::new());
        let (mut pmd, _, sent) = pmd(&ct, vec![], &[]);
        let mut names = PortNames::new();
        names.insert("p0", 1);
        names.insert("p1", 2);
        names.insert("p2", 3);
        let mark = |m: u32| format!("skb_mark({m:#x}),ct_state(+new+trk),recirc_id(0x1),{PLAIN}");
        let (k, a) = first.clone();
        for (k, a) in [(k, a), (mark(0), "p1"), (mark(7), "p2")] {
            pmd.add_flow(parse_megaflow(&names, &k, a).unwrap())
                .unwrap();
        }
        let bursts = vec![
            vec![(from(1), 0), (from(1), 7), (from(1), 0), (from(1), 7)],
            vec![(from(1), 7), (from(1), 7), (from(1), 7), (from(1), 0)],
            vec![(from(1), 0); 4],
        ];
        pmd.add_rxq(PolledRxq {
            port_no: 1,
            queue_id: 1,
            rxq: Box::new(MarkedBursts(bursts.into())),
            cycles: 0,
        });
        for _ in 0..4 {
            pmd.poll_once();
        }
        assert_eq!(
            pmd.stats().lost_upcalls,
            0,
            "every packet matched a megaflow"
        );
        assert_eq!(taken(&sent[0]).len(), 7, "mark 0 to p1");
        assert_eq!(taken(&sent[1]).len(), 5, "mark 7 to p2");
    }
}

/// A megaflow that recirculates to itself: each burst goes round until the depth limit, each
/// pass counted, each packet recirculated eight times and then dropped, counted.
#[test]
fn a_recirculation_loop_ends_at_the_depth_limit() {
    for first in first_passes() {
        let ct = Arc::new(conntrack::Conntrack::new());
        let bursts = vec![vec![from(1); 8], vec![from(1); 8]];
        let again = format!("ct_state(+trk),recirc_id(0x1),{PLAIN}");
        let (mut pmd, _, sent) = pmd(&ct, bursts, &[first.clone(), (again, "recirc(0x1)")]);
        for _ in 0..3 {
            pmd.poll_once();
        }
        assert!(taken(&sent[0]).is_empty() && taken(&sent[1]).is_empty());
        let s = pmd.stats();
        assert_eq!(s.recirculations, 2 * 8 * 8, "eight times each packet");
        assert_eq!(s.recirc_depth_drops, 16, "each packet at the limit");
        assert_eq!(s.batches, 2 * 9, "nine passes a burst");
        let hits = [s.megaflow_hits, s.simple_hits];
        let want = if simple(&first) { [0, 144] } else { [144, 0] };
        assert_eq!(hits, want, "a hit a packet in each pass");
        assert_eq!(s.lost_upcalls, 0);
    }
}

/// `ct(nat)` translates a burst's packets to two networks: the later pass's megaflows tell
/// them apart by the translated source on bits the first pass's megaflow also looks at (its
/// untranslated network). The keys `ct(nat)` made again are compared there, not taken as the
/// first packet's.
#[test]
fn translated_packets_go_by_their_new_source_in_the_pass_after() {
    let ct = Arc::new(conntrack::Conntrack::new());
    let bursts = vec![
        vec![from(1), from(3), from(1), from(3)],
        vec![from(1), from(3), from(1), from(3)],
        vec![from(3), from(1), from(1), from(1)],
    ];
    let src = |state: &str, id: u32, src: &str| {
        format!(
            "ct_state({state}),recirc_id({id:#x}),in_port(p0),eth_type(0x0800),ipv4(src={src},frag=no)"
        )
    };
    let net = |n: &str| format!("{n}/255.255.255.0");
    let (mut pmd, _, sent) = pmd(
        &ct,
        bursts,
        &[
            (src("-trk", 0, &net("10.0.0.0")), "ct(nat),recirc(0x1)"),
            // Not translated yet: to the commit, whose translation applies at once, and out
            // of the port the translated packets do not take.
            (src("+new+trk", 1, &net("10.0.0.0")), "recirc(0x2)"),
            (
                src("+new+trk", 2, "10.0.0.1"),
                "ct(commit,nat(src=10.2.0.1)),p2",
            ),
            (
                src("+new+trk", 2, "10.0.0.3"),
                "ct(commit,nat(src=10.3.0.3)),p1",
            ),
            // Translated by the first pass.
            (src("+new+trk", 1, &net("10.2.0.0")), "p1"),
            (src("+new+trk", 1, &net("10.3.0.0")), "p2"),
        ],
    );
    pmd.poll_once();
    assert_eq!(taken(&sent[0]), [3, 3], "committed, translated to 10.3.0.3");
    assert_eq!(taken(&sent[1]), [1, 1], "committed, translated to 10.2.0.1");
    for _ in 0..3 {
        pmd.poll_once();
    }
    assert_eq!(taken(&sent[0]), [1; 5], "10.2.0.1 to p1");
    assert_eq!(taken(&sent[1]), [3; 3], "10.3.0.3 to p2");
    assert_eq!(
        pmd.stats().lost_upcalls,
        0,
        "every packet matched a megaflow"
    );
}
