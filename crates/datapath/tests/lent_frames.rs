//! Lent frames (`Pool::packet_lent`): an rx queue may hand the PMD frames of which only the
//! first `LENT_HEAD` bytes are in the packet's buffer, the rest staying in the lender's memory
//! (a guest's transmit buffers) until the burst is done. The PMD may keep them lent only on
//! their way to an output whose queue reads lent frames; for anything else it must bring the
//! whole frame in first, and every packet must come out whole and as its actions say. After
//! each burst the lending ends and the queue is released, once.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use datapath::dpif::parse_megaflow;
use datapath::packet::{Batch, LENT_HEAD, Packet, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::{RxQueue, TxQueue};
use flow::odp::PortNames;

/// Lends its frames once per poll, and counts its releases.
struct Lender {
    frames: Arc<Vec<Vec<u8>>>,
    released: Arc<AtomicUsize>,
}

impl RxQueue for Lender {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let n = batch.room().min(self.frames.len());
        for f in &self.frames[..n] {
            // SAFETY: the frames are never written and outlive the PMD (the test holds them).
            batch.push(unsafe { pool.packet_lent(f.as_ptr(), f.len(), 1) });
        }
        batch.mark_lent();
        n
    }

    fn release(&mut self) {
        self.released.fetch_add(1, Relaxed);
    }
}

/// A packet a queue was sent: whether it was still lent, and its whole frame.
type Sent = (bool, Vec<u8>);

/// What a queue was sent.
type Got = Arc<Mutex<Vec<Sent>>>;

/// Keeps what it is sent; with `lent`, it takes lent frames and reads their rest from the
/// lender, as the vhost queue does.
#[derive(Clone)]
struct Keep {
    got: Got,
    lent: bool,
}

impl TxQueue for Keep {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let mut got = self.got.lock().unwrap();
        for p in batch.packets() {
            let frame = match pool.lent_tail(p) {
                Some(tail) => {
                    let mut f = p.headers()[..LENT_HEAD].to_vec();
                    f.resize(p.len(), 0);
                    // SAFETY: the lending has not ended: `tail` is valid for the frame's bytes
                    // past the head, which are not in `f`.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            tail,
                            f[LENT_HEAD..].as_mut_ptr(),
                            p.len() - LENT_HEAD,
                        )
                    };
                    f
                }
                None => p.data().to_vec(),
            };
            got.push((p.is_lent(), frame));
        }
        pool.free_batch(batch);
    }

    fn takes_lent(&self) -> bool {
        self.lent
    }
}

/// An Ethernet/IPv4 frame of `len` bytes: `opts` words of IP options, protocol `proto` with
/// header `l4`, then a payload that counts.
fn ipv4(opts: u8, proto: u8, l4: &[u8], len: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0, 0x45 + opts, 0];
    f.extend_from_slice(&((len - 14) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 1, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend(std::iter::repeat_n(1, usize::from(opts) * 4));
    f.extend_from_slice(l4);
    while f.len() < len {
        f.push(f.len() as u8);
    }
    f
}

/// Frames longer than the head: two the simple match takes (UDP, TCP), and two that take the
/// whole extraction: UDP with an IP option (its megaflow is the others', found through the
/// EMC) and ARP.
fn frames() -> Vec<Vec<u8>> {
    let udp = [0x03, 0xe8, 0x07, 0xd0, 0x01, 0xf4, 0, 0];
    let tcp = [
        0x03, 0xe8, 0x07, 0xd0, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0,
    ];
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.resize(300, 7);
    vec![
        ipv4(0, 17, &udp, 514),
        ipv4(0, 6, &tcp, 1518),
        ipv4(1, 17, &udp, 700),
        arp,
    ]
}

const SIMPLE: &str = "in_port(p0),eth_type(0x0800),ipv4(frag=no)";

struct Rig {
    pmd: Pmd,
    frames: Arc<Vec<Vec<u8>>>,
    released: Arc<AtomicUsize>,
    /// p1 takes lent frames, p2 does not.
    p1: Got,
    p2: Got,
}

fn rig(flows: &[(&str, &str)]) -> Rig {
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p1", 2);
    names.insert("p2", 3);
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    let frames = Arc::new(frames());
    let released = Arc::new(AtomicUsize::new(0));
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(Lender {
            frames: frames.clone(),
            released: released.clone(),
        }),
        cycles: 0,
    });
    let (p1, p2) = (Got::default(), Got::default());
    for (port, got, lent) in [(2, &p1, true), (3, &p2, false)] {
        let q = Keep {
            got: got.clone(),
            lent,
        };
        pmd.add_txq(port, Box::new(q));
    }
    for (k, a) in flows {
        pmd.add_flow(parse_megaflow(&names, k, a).unwrap()).unwrap();
    }
    Rig {
        pmd,
        frames,
        released,
        p1,
        p2,
    }
}

fn take(g: &Got) -> Vec<Sent> {
    std::mem::take(&mut *g.lock().unwrap())
}

/// ARP's flow, to p2.
const OTHERS: [(&str, &str); 1] = [("in_port(p0),eth_type(0x0806)", "p2")];

#[test]
fn a_simple_output_to_a_queue_that_reads_lent_frames_keeps_them_lent() {
    let mut flows = vec![(SIMPLE, "p1")];
    flows.extend(OTHERS);
    let mut r = rig(&flows);
    for round in 1..=3 {
        r.pmd.poll_once();
        let f = &r.frames;
        assert_eq!(
            take(&r.p1),
            vec![
                (true, f[0].clone()),
                (true, f[1].clone()),
                (false, f[2].clone())
            ],
            "round {round}: the plain frames still lent, whole through the lender; the one \
             with an option brought in"
        );
        assert_eq!(
            take(&r.p2),
            vec![(false, f[3].clone())],
            "round {round}: ARP, brought in"
        );
        assert_eq!(r.released.load(Relaxed), round, "one release per burst");
    }
    assert_eq!(r.pmd.stats().simple_hits, 6);
}

#[test]
fn every_other_use_brings_the_frame_in_first() {
    let f = frames();
    let with_dst = |frame: &Vec<u8>| {
        let mut o = frame.clone();
        o[..6].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        o
    };
    let plain = || (0..3).map(|i| (false, f[i].clone())).collect::<Vec<_>>();
    let cases: [(&str, Vec<Sent>, Vec<Sent>); 4] = [
        // An output to a queue that does not read lent frames.
        ("p2", vec![], plain()),
        // A rewrite before the output.
        (
            "set(eth(dst=02:00:00:00:00:09)),p1",
            (0..3).map(|i| (false, with_dst(&f[i]))).collect(),
            vec![],
        ),
        // Two outputs, the first (which gets copies) to a queue that reads lent frames.
        ("p1,p2", plain(), plain()),
        // Another pass.
        ("recirc(0x1)", plain(), vec![]),
    ];
    for (actions, to_p1, to_p2) in cases {
        let mut flows = vec![(SIMPLE, actions), ("recirc_id(0x1),in_port(p0)", "p1")];
        flows.extend(OTHERS);
        let mut r = rig(&flows);
        r.pmd.poll_once();
        let mut want_p2 = to_p2;
        want_p2.push((false, f[3].clone()));
        assert_eq!(take(&r.p1), to_p1, "{actions}: p1");
        assert_eq!(take(&r.p2), want_p2, "{actions}: p2");
        assert_eq!(r.released.load(Relaxed), 1, "{actions}");
    }
}

#[test]
fn misses_and_drops_leave_nothing_lent() {
    // No flow for the plain frames: they miss (the upcall handler drops them); the rest go.
    let mut r = rig(&OTHERS);
    for round in 1..=2 {
        r.pmd.poll_once();
        assert!(take(&r.p1).is_empty());
        assert_eq!(take(&r.p2), vec![(false, r.frames[3].clone())]);
        assert_eq!(r.released.load(Relaxed), round);
    }
    // An explicit drop.
    let mut flows = vec![(SIMPLE, "drop")];
    flows.extend(OTHERS);
    let mut r = rig(&flows);
    r.pmd.poll_once();
    assert!(take(&r.p1).is_empty());
    assert_eq!(r.released.load(Relaxed), 1);
    assert!(!Packet::from_slice(&[0; 60]).is_lent());
}
