//! Mutated tunnel packets through `tnl_pop`: no input panics, and in a PMD every packet is
//! either decapsulated (and forwarded by its second pass) or counted as a drop.
//!
//! The seeds are the outer frames of `testdata/actions/DECAP` (every tunnel kind and underlay,
//! good and bad); each case flips, inserts and removes bytes, cuts or pads the frame, and pops
//! it as each tunnel kind.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use datapath::dpif::parse_megaflow;
use datapath::packet::{Batch, Packet, Pool, TnlMd};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq, key_metadata};
use datapath::port::{RxQueue, TxQueue};
use datapath::tunnel::{TunnelKind, tnl_pop};
use flow::FlowKey;
use flow::odp::PortNames;
use proptest::prelude::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/actions")
}

/// The outer frames of every DECAP case.
fn seeds() -> Vec<Vec<u8>> {
    let dir = fixtures();
    std::fs::read_to_string(dir.join("DECAP"))
        .expect("testdata/actions/DECAP")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let b = std::fs::read(dir.join(f[3])).unwrap();
            b[40..].to_vec()
        })
        .collect()
}

const KINDS: [TunnelKind; 3] = [TunnelKind::VXLAN, TunnelKind::GENEVE, TunnelKind::Gre];

#[derive(Clone, Debug)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
    Pad(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    // Most edits land in the outer headers (the first ~100 bytes).
    prop_oneof![
        6 => (0usize..100, any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        1 => (0usize..100, any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        1 => (0usize..100).prop_map(Edit::Remove),
        1 => (0usize..160).prop_map(Edit::Truncate),
        1 => (0usize..40).prop_map(Edit::Pad),
    ]
}

fn mutate(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut f = seed.to_vec();
    for e in edits {
        match *e {
            Edit::Flip(i, b) if i < f.len() => f[i] ^= b | 1,
            Edit::Insert(i, b) if i <= f.len() => f.insert(i, b),
            Edit::Remove(i) if i < f.len() => {
                f.remove(i);
            }
            Edit::Truncate(n) => f.truncate(n),
            Edit::Pad(n) => f.extend(std::iter::repeat_n(0, n)),
            _ => {}
        }
    }
    f
}

/// Extraction then `tnl_pop`, as the PMD runs them; then the next pass's key.
fn pop_once(frame: &[u8], kind: TunnelKind) -> Result<Packet, datapath::tunnel::TnlPopDrop> {
    let mut p = Packet::from_slice(frame);
    let mut key = FlowKey::new();
    key_metadata(&p, &mut key);
    let x = flow::extract(p.data(), &mut key);
    p.meta.l2_5 = x.layers.l2_5;
    p.meta.l3 = x.layers.l3;
    p.meta.l4 = x.layers.l4;
    tnl_pop(&mut p, kind)?;
    key_metadata(&p, &mut key);
    flow::extract(p.data(), &mut key);
    Ok(p)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Any mutation of any seed, popped as any kind: a result, never a panic; a popped packet
    /// is part of the frame and carries tunnel metadata.
    #[test]
    fn mutated_frames_pop_or_fail(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 0..6),
        kind in 0usize..3,
    ) {
        let seeds = seeds();
        let frame = mutate(&seeds[which.index(seeds.len())], &edits);
        if let Ok(p) = pop_once(&frame, KINDS[kind]) {
            prop_assert!(p.len() <= frame.len());
            prop_assert_ne!(p.meta.tunnel, TnlMd::None);
        }
    }

    /// Arbitrary bytes at arbitrary offsets, as if extraction had been fooled.
    #[test]
    fn garbage_with_any_offsets(
        frame in prop::collection::vec(any::<u8>(), 0..200),
        l3 in any::<u16>(),
        packet_type in prop_oneof![Just(0u32), Just(0x1_0800), Just(0x1_86dd), any::<u32>()],
        kind in 0usize..3,
    ) {
        let mut p = Packet::from_slice(&frame);
        p.meta.l3 = if l3 % 3 == 0 { l3 } else { l3 % 64 };
        p.meta.packet_type = packet_type;
        let _ = tnl_pop(&mut p, KINDS[kind]);
    }
}

/// Frames from the test, one queue.
#[derive(Clone, Default)]
struct Feed(Arc<Mutex<Vec<Vec<u8>>>>);

impl RxQueue for Feed {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let mut q = self.0.lock().unwrap();
        let n = q.len().min(batch.room());
        for f in q.drain(..n) {
            batch.push(pool.packet_from(&f, 1));
        }
        n
    }
}

/// Counts and frees.
struct Count(Arc<Mutex<u64>>);

impl TxQueue for Count {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        *self.0.lock().unwrap() += batch.len() as u64;
        pool.free_batch(batch);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// In a PMD: every received packet is popped or counted as a `tnl_pop` drop, and every
    /// popped one makes its second pass to the output (flows for every packet type a pop can
    /// give).
    #[test]
    fn every_packet_is_popped_or_counted(
        frames in prop::collection::vec(
            (any::<prop::sample::Index>(), prop::collection::vec(edit(), 0..4)), 1..150),
        kind in 0usize..3,
        fast in any::<bool>(),
    ) {
        let seeds = seeds();
        let frames: Vec<Vec<u8>> = frames
            .iter()
            .map(|(i, e)| mutate(&seeds[i.index(seeds.len())], e))
            .collect();
        let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
        let feed = Feed::default();
        pmd.add_rxq(PolledRxq { port_no: 1, queue_id: 0, rxq: Box::new(feed.clone()), cycles: 0 });
        let sent = Arc::new(Mutex::new(0));
        pmd.add_txq(2, Box::new(Count(sent.clone())));
        pmd.add_port_txq(3, Box::new(Count(Arc::new(Mutex::new(0)))), Some(KINDS[kind]));
        let mut names = PortNames::new();
        names.insert("p0", 1);
        names.insert("p1", 2);
        names.insert("tnl", 3);
        // `fast`: the lone tnl_pop the fast path takes; otherwise one it cannot (a clone).
        let pop = if fast { "tnl_pop(tnl)" } else { "clone(tnl_pop(tnl))" };
        pmd.add_flow(parse_megaflow(&names, "in_port(p0)", pop).unwrap()).unwrap();
        for pt in ["", ",packet_type(ns=1,id=0x800)", ",packet_type(ns=1,id=0x86dd)",
                   ",packet_type(ns=1,id=0x8847)", ",packet_type(ns=1,id=0x8848)"] {
            pmd.add_flow(parse_megaflow(&names, &format!("in_port(tnl){pt}"), "p1").unwrap())
                .unwrap();
        }
        let n = frames.len() as u64;
        feed.0.lock().unwrap().extend(frames);
        for _ in 0..8 {
            pmd.poll_once();
        }
        let s = pmd.stats();
        prop_assert_eq!(s.rx_packets, n);
        prop_assert_eq!(s.tnl_pops + s.tnl_pop_dropped(), n, "{:?}", s);
        prop_assert_eq!(*sent.lock().unwrap(), s.tnl_pops, "{:?}", s);
        prop_assert_eq!(s.lost_upcalls, 0);
    }
}
