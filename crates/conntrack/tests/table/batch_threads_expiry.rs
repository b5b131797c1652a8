//! The connection table's tests of `force`, flush and batches, concurrency, properties, expiry queues and the PMD's connection pool (helpers in `../table.rs`).

use super::*;

// ---------------------------------------------------------------------------------------------
// force, flush, batch
// ---------------------------------------------------------------------------------------------

/// `force`: a reply-direction packet with force+commit ends the connection and starts a new
/// one from its side; an original-direction packet with force keeps it.
#[test]
fn force_commit_replaces_connection() {
    let mut t = Ct::new();
    t.run(
        &udp_ab(),
        &CtArgs {
            mark: Some((1, u32::MAX)),
            ..commit(5)
        },
        0,
    );
    let id = t.dump(0)[0].id;
    let force = CtArgs {
        force: true,
        ..commit(5)
    };
    // Original direction: nothing happens.
    assert_state!(t.st(&udp_ab(), &force, 1), TRK | NEW);
    assert_eq!(t.dump(1)[0].id, id);
    // Reply direction: a new connection from B.
    let (md, _) = t.run(
        &udp_ba(),
        &CtArgs {
            mark: Some((2, u32::MAX)),
            ..force
        },
        2,
    );
    assert_state!(md.state, TRK | NEW);
    assert_eq!(md.mark, 2);
    let d = t.dump(2);
    assert_eq!(d.len(), 1);
    assert_ne!(d[0].id, id);
    assert_eq!(d[0].orig, tuple(UDP, b(), 4444, a(), 3333, 5));
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(5)), (1, 1));
    assert_state!(t.st(&udp_ab(), &track(5), 3), TRK | EST | RPL);
}

/// Flush everything, by zone, by a predicate on the original tuple (in any zone or one), and
/// counts follow.
#[test]
fn flush_by_zone_and_tuple() {
    let mut t = Ct::new();
    for z in [1, 2] {
        t.st(&udp_ab(), &commit(z), 0);
        t.st(
            &build(a(), b(), &tcp(1111, 2222, "S", 1, 0, 100)),
            &commit(z),
            0,
        );
        t.st(&build(a(), b(), &echo(8, 5, 1)), &commit(z), 0);
    }
    assert_eq!(t.ct.n_conns(), 6);
    let is_tcp = |x: &Tuple| x.proto == TCP;
    assert_eq!(t.ct.flush(Some(1), Some(&is_tcp)), 1);
    assert_eq!((t.ct.zone_conns(1), t.ct.zone_conns(2)), (2, 3));
    let port = |x: &Tuple| x.sport == 3333;
    assert_eq!(t.ct.flush(None, Some(&port)), 2);
    assert_eq!(t.ct.n_conns(), 3);
    // Matching the reply tuple only: nothing (the predicate sees the original tuple).
    let reply_side = |x: &Tuple| x.sport == 4444;
    assert_eq!(t.ct.flush(None, Some(&reply_side)), 0);
    assert_eq!(t.ct.flush(Some(2), None), 2);
    assert_eq!(t.ct.flush(Some(2), None), 0);
    assert_eq!(
        (t.ct.n_conns(), t.ct.zone_conns(1), t.ct.zone_conns(2)),
        (1, 1, 0)
    );
    // A flushed connection's packets are +new; the PMD cache does not resurrect it.
    assert_state!(t.st(&udp_ba(), &track(2), 1), TRK | NEW);
    assert_eq!(t.ct.flush(None, None), 1);
    assert_state!(
        t.st(&build(b(), a(), &echo(0, 5, 1)), &track(1), 2),
        TRK | INV
    );
    assert_eq!(t.ct.n_conns(), 0);
    assert!(t.dump(2).is_empty());
}

/// `process_batch` gives each packet what `process` would, in a table of a few connections
/// (each packet parsed and tracked in turn) and in one of more than 4096 (the connections asked
/// for ahead, a burst at a time), for a batch longer than a burst.
#[test]
fn process_batch_matches_process() {
    let mut frames: Vec<Vec<u8>> = vec![
        udp_ab(),
        udp_ab(),
        udp_ba(),
        build(a(), b(), &tcp(1111, 2222, "S", 1000, 0, 8192)),
        build(b(), a(), &tcp(2222, 1111, "SA", 5000, 1001, 8192)),
        build(b(), a(), &icmp_err(3, 3, &quote(&udp_ab(), 8))),
        build(a(), b(), &echo(0, 1, 1)),
        vec![0; 20],
    ];
    // Datagrams of connections committed before the batch (with none before: new ones).
    frames.extend((0..40).map(|i| udp_from(i * 7)));
    let args = commit(3);
    for before in [0, 5000] {
        let (mut one, batch) = (Ct::new(), Ct::new());
        let mut cache = CtCache::new();
        // Committed a packet a batch, so that both PMD caches are made the table's size.
        for i in 0..before {
            let f = udp_from(i);
            let mut out = [(CtMeta::default(), None)];
            one.ct
                .process_batch(&mut one.cache, &[packet(&f)], &mut out, &args, 0);
            batch
                .ct
                .process_batch(&mut cache, &[packet(&f)], &mut out, &args, 0);
        }
        let want: Vec<_> = frames
            .iter()
            .map(|f| {
                let mut md = CtMeta::default();
                let pkt = CtPacket {
                    v6: false,
                    ..packet_any(f)
                };
                let rw = one.ct.process(&mut one.cache, &pkt, &mut md, &args, 1);
                (md, rw)
            })
            .collect();
        // The batch takes the path of its table's size (connections asked for ahead above
        // 4096).
        assert_eq!(batch.ct.n_conns() > 4096, before > 0);
        let pkts: Vec<CtPacket<'_>> = frames
            .iter()
            .map(|f| CtPacket {
                v6: false,
                ..packet_any(f)
            })
            .collect();
        let mut out = vec![(CtMeta::default(), None); pkts.len()];
        batch
            .ct
            .process_batch(&mut cache, &pkts, &mut out, &args, 1);
        for (i, (o, w)) in out.iter().zip(&want).enumerate() {
            assert_eq!(o, w, "packet {i}, with {before} connections before");
        }
        assert_eq!(batch.ct.n_conns(), one.ct.n_conns());
    }
}

fn packet_any(f: &[u8]) -> CtPacket<'_> {
    CtPacket {
        frame: f,
        l3: ETH,
        v6: false,
        frag_l4_len: None,
        verified: false,
        natted: false,
    }
}

// ---------------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------------

/// A small xorshift, per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The frames threads share: 64 UDP flows (both directions), 32 TCP SYNs, 16 echo requests.
fn shared_frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for i in 0..64u16 {
        let s = ip(&format!("10.3.0.{}", i % 8));
        v.push(build(s, b(), &udp(1000 + i / 8, 53, b"q")));
        v.push(build(b(), s, &udp(53, 1000 + i / 8, b"r")));
    }
    for i in 0..32u16 {
        v.push(build(
            ip("10.4.0.1"),
            b(),
            &tcp(2000 + i, 80, "S", 1000, 0, 8192),
        ));
    }
    for i in 0..16u16 {
        v.push(build(ip("10.4.0.2"), b(), &echo(8, i, 1)));
    }
    v
}

/// One step of a thread of [`on_4_threads`]: the table, the thread's cache and random
/// numbers, its id, the step's number, [`shared_frames`].
type Step = fn(&Conntrack, &mut CtCache, &mut Rng, u64, u64, &[Vec<u8>]);

/// 4 threads (ids 0 to 3) each take 30 000 `step`s on `ct`, with a cache of their own and
/// random numbers from `seed(id)`; none may panic.
fn on_4_threads(ct: &Arc<Conntrack>, seed: fn(u64) -> u64, step: Step) {
    let frames = Arc::new(shared_frames());
    let threads: Vec<_> = (0..4u64)
        .map(|id| {
            let ct = ct.clone();
            let frames = frames.clone();
            std::thread::spawn(move || {
                let mut cache = CtCache::new();
                let mut rng = Rng(seed(id));
                for i in 0..30_000u64 {
                    step(&ct, &mut cache, &mut rng, id, i, &frames);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no panic");
    }
}

/// 4 threads commit, look up, flush and sweep over the same tuples (both directions, two
/// zones) with no expiry: no panic, and at the end the counts are exactly what `dump` shows,
/// and go to zero with a flush.
#[test]
fn concurrent_hammer_counts_consistent() {
    let ct = Arc::new(Conntrack::new());
    let seed = |id| 0x9e37_79b9_7f4a_7c15 ^ ((id + 1) * 0x1234_5678);
    on_4_threads(&ct, seed, |ct, cache, rng, id, i, frames| {
        let now = 1000 + i / 10;
        let r = rng.below(1000);
        if r < 3 && id == 0 {
            ct.flush(Some(1), None);
            return;
        }
        if r < 3 && id == 1 {
            let odd = |t: &Tuple| t.sport % 2 == 1;
            ct.flush(None, Some(&odd));
            return;
        }
        if r < 10 && id == 2 {
            ct.sweep(now);
            return;
        }
        let f = &frames[rng.below(frames.len() as u64) as usize];
        let args = CtArgs {
            zone: rng.below(2) as u16,
            commit: rng.below(2) == 0,
            force: rng.below(50) == 0,
            mark: Some((id as u32, 0xff)),
            ..Default::default()
        };
        let mut md = CtMeta::default();
        ct.process(cache, &packet(f), &mut md, &args, now);
        assert!(md.state & TRK != 0);
    });
    let now = 10_000;
    assert_counts(&ct, now);
    assert!(ct.n_conns() > 0);
    ct.flush(None, None);
    assert_eq!(
        (ct.n_conns(), ct.zone_conns(0), ct.zone_conns(1)),
        (0, 0, 0)
    );
    assert!(ct.dump(None, now).is_empty());
}

/// The same with short timeouts and time running, so that connections expire under the
/// threads' feet and get recommitted, swept, flushed: at the end, after everything expired,
/// every count is back to zero.
#[test]
fn concurrent_with_expiry_no_leak() {
    let ct = Arc::new(Conntrack::new());
    ct.set_timeouts(
        None,
        &[
            (TimeoutClass::UdpFirst, 1),
            (TimeoutClass::UdpSingle, 1),
            (TimeoutClass::UdpMultiple, 1),
            (TimeoutClass::IcmpFirst, 1),
            (TimeoutClass::IcmpReply, 1),
            (TimeoutClass::TcpSynSent, 1),
        ],
    );
    let seed = |id| 0x2545_f491_4f6c_dd1d ^ ((id + 7) * 0x9876_5431);
    on_4_threads(&ct, seed, |ct, cache, rng, id, i, frames| {
        let now = i / 4;
        if id == 3 && i % 100 == 0 {
            ct.sweep(now);
            return;
        }
        let f = &frames[rng.below(frames.len() as u64) as usize];
        let mut md = CtMeta::default();
        let args = commit(rng.below(2) as u16);
        ct.process(cache, &packet(f), &mut md, &args, now);
    });
    ct.sweep(1_000_000);
    assert_eq!(
        (ct.n_conns(), ct.zone_conns(0), ct.zone_conns(1)),
        (0, 0, 0)
    );
}

/// Commits of a tuple and of its reverse race (each is the other's reply key, so one of the two
/// fails its second insert) while a third thread flushes. A connection that the flush removes
/// between its two inserts is counted out twice: once by `remove` (flush), once by the
/// `release` after the failed insert in `new_conn`; `n_conns` then ends below what `dump`
/// shows (and can wrap below zero).
#[test]
fn concurrent_commit_flush_race_counts() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let pairs: Arc<Vec<(Vec<u8>, Vec<u8>)>> = Arc::new(
        (0..64u16)
            .map(|i| {
                let s = ip(&format!("10.6.0.{i}"));
                (
                    build(s, b(), &udp(7000 + i, 53, b"q")),
                    build(b(), s, &udp(53, 7000 + i, b"r")),
                )
            })
            .collect(),
    );
    let mut bad = Vec::new();
    for round in 0..30 {
        let ct = Arc::new(Conntrack::new());
        let stop = Arc::new(AtomicBool::new(false));
        let flusher = {
            let (ct, stop) = (ct.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    ct.flush(None, None);
                }
            })
        };
        let committers: Vec<_> = (0..2)
            .map(|side| {
                let (ct, pairs) = (ct.clone(), pairs.clone());
                std::thread::spawn(move || {
                    let mut cache = CtCache::new();
                    for _ in 0..40 {
                        for (o, r) in pairs.iter() {
                            let f = if side == 0 { o } else { r };
                            let mut md = CtMeta::default();
                            ct.process(&mut cache, &packet(f), &mut md, &commit(0), 0);
                        }
                    }
                })
            })
            .collect();
        for c in committers {
            c.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        flusher.join().unwrap();
        ct.sweep(0);
        let shown = ct.dump(None, 0).len();
        if ct.n_conns() as usize != shown {
            bad.push((round, ct.n_conns(), shown));
        }
    }
    assert!(bad.is_empty(), "(round, n_conns, dump): {bad:?}");
}

/// Limits hold under concurrent commits of distinct tuples: exactly the limit gets in.
#[test]
fn concurrent_zone_limit_is_exact() {
    let ct = Arc::new(Conntrack::new());
    ct.set_zone_limit(3, 50);
    let threads: Vec<_> = (0..4u32)
        .map(|id| {
            let ct = ct.clone();
            std::thread::spawn(move || {
                let mut cache = CtCache::new();
                for i in 0..100 {
                    let f = udp_from(id * 1000 + i);
                    let mut md = CtMeta::default();
                    ct.process(&mut cache, &packet(&f), &mut md, &commit(3), 0);
                    assert_state!(md.state, TRK | NEW);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(ct.zone_conns(3), 50);
    assert_eq!(ct.dump(Some(3), 0).len(), 50);
    assert_eq!(ct.stats().limit_refused, 350);
}

/// Concurrent commits of the same tuples: one connection per tuple, whoever wins.
#[test]
fn concurrent_same_tuple_commits_one_connection_each() {
    let ct = Arc::new(Conntrack::new());
    let frames: Arc<Vec<Vec<u8>>> = Arc::new((0..200).map(udp_from).collect());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let ct = ct.clone();
            let frames = frames.clone();
            std::thread::spawn(move || {
                let mut cache = CtCache::new();
                for f in frames.iter() {
                    let mut md = CtMeta::default();
                    ct.process(&mut cache, &packet(f), &mut md, &commit(0), 0);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(ct.n_conns(), 200);
    assert_eq!(ct.dump(None, 0).len(), 200);
    let s = ct.stats();
    assert_eq!(s.committed, 200);
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// Valid packets of every kind, for mutation.
fn seeds() -> Vec<Vec<u8>> {
    let mut v = vec![
        udp_ab(),
        build(
            a(),
            b(),
            &tcp_opts(1111, 2222, "S", 1000, 0, 8192, &SYN_OPTS, &[]),
        ),
        build(a(), b(), &echo(8, 1, 1)),
        build(b(), a(), &icmp_err(3, 3, &quote(&udp_ab(), 8))),
        build(
            b(),
            a(),
            &icmp_err(3, 4, &quote(&build(a(), b(), &tcp(1, 2, "A", 1, 1, 1)), 20)),
        ),
        build(a6(), b6(), &udp(1, 2, b"abc")),
        build(
            b6(),
            a6(),
            &icmp_err(1, 4, &quote(&build(a6(), b6(), &udp(1, 2, b"abc")), 11)),
        ),
        build_with(
            a6(),
            b6(),
            &tcp(1, 2, "S", 1, 0, 1),
            &opt(|o| o.exts = vec![hbh(), routing(), frag6(0, false)]),
        ),
        build_with(
            a(),
            b(),
            &udp(1, 2, b""),
            &opt(|o| o.ip_opts = vec![1, 1, 1, 0]),
        ),
    ];
    v.push(build(b6(), a6(), &icmp_err(1, 4, &quote(&v[6], 60))));
    v
}

fn nat_strategy() -> impl Strategy<Value = Option<NatSpec>> {
    prop_oneof![
        Just(None),
        Just(Some(nat_only())),
        Just(Some(snat("10.1.1.100", "10.1.1.101", 20000, 20001))),
        Just(Some(dnat("10.1.1.2", "10.1.1.2", 0, 0))),
        Just(Some(snat("fc00::100", "fc00::100", 0, 0))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random bytes at random offsets never panic `process` (nor `process_batch`).
    #[test]
    fn random_frames_never_panic(
        frame in proptest::collection::vec(any::<u8>(), 0..160),
        l3 in 0usize..200,
        v6 in any::<bool>(),
        frag in proptest::option::of(0usize..70_000),
        verified in any::<bool>(),
        commit in any::<bool>(),
        nat in nat_strategy(),
    ) {
        let ct = Conntrack::new();
        let mut cache = CtCache::new();
        let pkt = CtPacket { frame: &frame, l3, v6, frag_l4_len: frag, verified, natted: false };
        let args = CtArgs { commit, nat, zone: 1, ..Default::default() };
        let mut md = CtMeta::default();
        ct.process(&mut cache, &pkt, &mut md, &args, 0);
        prop_assert!(md.state & TRK != 0);
        let mut out = [(CtMeta::default(), None)];
        ct.process_batch(&mut cache, &[pkt], &mut out, &args, 1);
    }

    /// Valid packets with a few bytes changed, through a table that has their connections:
    /// never a panic, and an invalid packet carries no mark.
    #[test]
    fn mutated_packets_never_panic(
        which in 0usize..10,
        edits in proptest::collection::vec((0usize..200, any::<u8>()), 1..6),
        cut in 0usize..40,
        verified in any::<bool>(),
        nat in nat_strategy(),
    ) {
        let seeds = seeds();
        let ct = Conntrack::new();
        let mut cache = CtCache::new();
        for s in &seeds {
            let mut md = CtMeta::default();
            let args = CtArgs { commit: true, mark: Some((5, u32::MAX)), nat, ..Default::default() };
            ct.process(&mut cache, &packet_any2(s), &mut md, &args, 0);
        }
        let mut f = seeds[which].clone();
        for (at, v) in edits {
            if !f.is_empty() {
                let n = f.len();
                f[at % n] = v;
            }
        }
        f.truncate(f.len().saturating_sub(cut));
        let v6 = seeds[which][ETH] >> 4 == 6;
        let pkt = CtPacket { frame: &f, l3: ETH, v6, frag_l4_len: None, verified, natted: false };
        let mut md = CtMeta::default();
        ct.process(&mut cache, &pkt, &mut md, &CtArgs { commit: true, nat, ..Default::default() }, 1);
        if md.state & INV != 0 {
            prop_assert_eq!((md.mark, md.label), (0, 0));
        }
    }

    /// Random single-threaded operations over a few flows and a moving clock: after a final
    /// sweep, the counts always equal what `dump` shows.
    #[test]
    fn counts_match_dump(ops in proptest::collection::vec((0u8..6, 0usize..8, 0u64..40_000), 1..60)) {
        let ct = Conntrack::new();
        ct.set_timeouts(None, &[(TimeoutClass::UdpFirst, 10), (TimeoutClass::UdpSingle, 10), (TimeoutClass::UdpMultiple, 5)]);
        let mut cache = CtCache::new();
        let flows: Vec<(Vec<u8>, Vec<u8>)> = (0..4u16)
            .map(|i| (build(a(), b(), &udp(100 + i, 53, b"q")), build(b(), a(), &udp(53, 100 + i, b"r"))))
            .collect();
        let mut now = 0;
        for (op, f, dt) in ops {
            now += dt;
            let (o, r) = &flows[f % 4];
            let zone = (f / 4) as u16;
            let mut md = CtMeta::default();
            match op {
                0 | 1 => { ct.process(&mut cache, &packet(o), &mut md, &commit(zone), now); }
                2 => { ct.process(&mut cache, &packet(r), &mut md, &track(zone), now); }
                3 => { ct.process(&mut cache, &packet(r), &mut md, &CtArgs { force: true, ..commit(zone) }, now); }
                4 => { ct.sweep(now); }
                _ => { ct.flush(Some(zone), None); }
            }
        }
        ct.sweep(now);
        prop_assert_eq!(ct.n_conns() as usize, ct.dump(None, now).len());
        ct.sweep(now + 1_000_000);
        prop_assert_eq!((ct.n_conns(), ct.zone_conns(0), ct.zone_conns(1)), (0, 0, 0));
    }
}

fn packet_any2(f: &[u8]) -> CtPacket<'_> {
    CtPacket {
        v6: f[ETH] >> 4 == 6,
        ..packet_any(f)
    }
}

// ---------------------------------------------------------------------------------------------
// Expiry queues and the PMD's connection pool
// ---------------------------------------------------------------------------------------------

impl Ct {
    /// Runs `frames` as one burst, the PMD's way.
    fn batch(&mut self, frames: &[Vec<u8>], args: &CtArgs, now: u64) -> Vec<CtMeta> {
        let pkts: Vec<CtPacket<'_>> = frames.iter().map(|f| packet(f)).collect();
        let mut out = vec![(CtMeta::default(), None); pkts.len()];
        self.ct
            .process_batch(&mut self.cache, &pkts, &mut out, args, now);
        out.into_iter().map(|(md, _)| md).collect()
    }
}

/// A PMD expires its own connections as its bursts go (no sweep): one that expired is counted
/// out by the next burst, once, and a later sweep finds nothing left.
#[test]
fn process_batch_expires_its_own_connections() {
    let mut t = Ct::new();
    t.batch(&[udp_from(1), udp_from(2)], &commit(0), 0);
    assert_eq!(t.ct.n_conns(), 2);
    // Refreshed at 30 s: lives until 90 s; the other one until 60 s.
    t.batch(&[udp_from(1)], &commit(0), 30 * SEC);
    t.batch(&[udp_from(3)], &commit(0), 60 * SEC);
    assert_eq!((t.ct.n_conns(), t.ct.stats().expired), (2, 1));
    assert_eq!(t.dump(60 * SEC).len(), 2);
    t.batch(&[udp_from(3)], &commit(0), 90 * SEC);
    assert_eq!((t.ct.n_conns(), t.ct.stats().expired), (1, 2));
    assert_eq!(t.ct.sweep(90 * SEC), 0, "nothing left to sweep");
    assert_counts(&t.ct, 90 * SEC);
    assert_eq!(t.ct.sweep(1000 * SEC), 1);
    assert_eq!(t.ct.n_conns(), 0);
}

/// A connection reused from the PMD's pool starts clean: no mark, label or TCP state of the
/// connection it was, and the old one's tuples are gone from the table.
#[test]
fn reused_connection_starts_clean() {
    let mut t = Ct::new();
    t.ct.set_timeouts(Some(0), &[(TimeoutClass::UdpFirst, 1)]);
    let marked = CtArgs {
        mark: Some((7, u32::MAX)),
        label: Some((9, u128::MAX)),
        ..commit(0)
    };
    let md = t.batch(&[udp_ab()], &marked, 0);
    assert_eq!((md[0].mark, md[0].label), (7, 9));
    // Expired by this burst's PMD, then set up again (from the pool) for another tuple.
    t.batch(&[udp_from(5)], &track(0), 2 * SEC);
    assert_eq!(t.ct.stats().expired, 1);
    let md = t.batch(&[udp_from(5)], &commit(0), 2 * SEC);
    assert_eq!((md[0].state, md[0].mark, md[0].label), (TRK | NEW, 0, 0));
    let d = t.dump(2 * SEC);
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].mark, d[0].label), (0, 0));
    assert_state!(
        t.st(&udp_ba(), &track(0), 2 * SEC),
        TRK | NEW,
        "old reply key gone"
    );
    assert_state!(t.st(&udp_from(5), &track(0), 2 * SEC), TRK | NEW);
    assert_eq!(t.dump(2 * SEC)[0].id, d[0].id);
}

/// A connection whose timeout got shorter (a UDP reply: 60 s to 30 s) is counted out at its
/// new expiry, not at the old one, by the PMD as by a sweep.
#[test]
fn shorter_timeout_expires_on_time() {
    let mut t = Ct::new();
    t.batch(&[udp_ab()], &commit(0), 0);
    t.batch(&[udp_ba()], &track(0), 10 * SEC);
    t.batch(&[udp_from(9)], &track(0), 40 * SEC - 1);
    assert_eq!(t.ct.n_conns(), 1);
    t.batch(&[udp_from(9)], &track(0), 40 * SEC);
    assert_eq!((t.ct.n_conns(), t.ct.stats().expired), (0, 1));
}

/// Many connections of one timeout, some refreshed in the reverse order of their setup (so
/// they are queued again out of order): each is counted out once, when it expires, whether
/// the PMD or the sweep gets to it.
#[test]
fn expiry_queue_counts_each_connection_once() {
    let mut t = Ct::new();
    for i in 0..180u32 {
        t.batch(&[udp_from(i)], &commit(0), u64::from(i) * 10);
    }
    // Every third refreshed at 20 s, the last first: alive until 80 s + 180 - i ms.
    for i in (0..180u32).step_by(3).rev() {
        t.batch(&[udp_from(i)], &commit(0), 20 * SEC + u64::from(180 - i));
    }
    assert_eq!(t.ct.n_conns(), 180);
    assert_eq!(t.ct.sweep(62 * SEC), 120);
    assert_eq!(t.ct.n_conns(), 60);
    // Those with i >= 90 are due at 80 s + 90 ms.
    t.batch(&[], &track(0), 80 * SEC + 90);
    assert_eq!(t.ct.n_conns(), 30);
    assert_eq!(t.ct.sweep(80 * SEC + 90), 0);
    assert_counts(&t.ct, 80 * SEC + 90);
    assert_eq!(t.ct.sweep(80 * SEC + 180), 30);
    assert_eq!(t.ct.n_conns(), 0);
    assert_eq!(t.ct.stats().expired, 180);
}

/// `ct(commit,nat(src))` with no address (OVS's all-zero SNAT, `ct_zero_snat`): the
/// connection keeps its address and port, and is moved to another port only when its reply
/// tuple is already a connection's, as after a load balancer's DNAT to the same backend.
#[test]
fn zero_snat_moves_the_port_only_on_a_collision() {
    let mut t = Ct::new();
    let zero = NatSpec {
        kind: Some(NatKind::Src),
        ..NatSpec::default()
    };
    // Nothing collides: address and port kept, the connection is +snat.
    let f = build(a(), b(), &udp(5000, 80, b"q"));
    let (md, rw) = t.run(&f, &with_nat(commit(5), zero), 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    assert!(
        rw.is_none_or(|r| r.src.is_none_or(|s| s == (a().key(), 5000))),
        "{rw:?}"
    );
    // A DNAT to 10.9.9.9:80 from 10.1.1.1:6000 takes the reply tuple 10.9.9.9:80 -> :6000.
    let vip = build(ip("10.1.1.1"), ip("172.16.0.100"), &udp(6000, 80, b"q"));
    let (_, rw) = t.run(
        &vip,
        &with_nat(commit(5), dnat("10.9.9.9", "10.9.9.9", 80, 80)),
        1,
    );
    assert_eq!(rw.unwrap().dst, Some((ip("10.9.9.9").key(), 80)));
    // The same client straight to the backend would have that reply tuple too: it moves.
    let direct = build(ip("10.1.1.1"), ip("10.9.9.9"), &udp(6000, 80, b"q"));
    let (md, rw) = t.run(&direct, &with_nat(commit(5), zero), 2);
    assert_state!(md.state, TRK | NEW | SNAT);
    let (addr, port) = rw.unwrap().src.unwrap();
    assert_eq!(addr, ip("10.1.1.1").key());
    assert_ne!(port, 6000);
}
