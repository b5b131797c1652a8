//! A full connection table (`dpctl/ct-set-maxconns`, `ct-set-limits`) under a flood of new
//! connections: as OVS 3.1's `conn_not_found` does, a new connection over a limit is not
//! committed and its packet is `+trk+new` (counted: OVS's `conntrack_full`), while packets of
//! connections already in the table, committed again or not, keep their state and are never
//! refused. When the flood's connections expire, the room is given to new ones again.

use conntrack::state::*;
use conntrack::{Conntrack, CtArgs, CtCache, CtMeta, CtPacket};

mod common;
use common::ipv4_frame;

const SEC: u64 = 1000;

/// Eth/IPv4/UDP `src:sport` → `dst:dport` with a one-byte payload, checksums computed.
fn udp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
    let mut l4 = Vec::new();
    l4.extend_from_slice(&sport.to_be_bytes());
    l4.extend_from_slice(&dport.to_be_bytes());
    l4.extend_from_slice(&[0, 9, 0, 0, b'x']);
    ipv4_frame(src, dst, 17, l4, 6)
}

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 1, 0, 2];

/// Established flow `i`'s packet from A (or its reply from B).
fn est(i: u16, reply: bool) -> Vec<u8> {
    if reply {
        udp(B, 2000, A, 1024 + i)
    } else {
        udp(A, 1024 + i, B, 2000)
    }
}

/// Flood packet `i`: a source never seen before.
fn flood(i: u32) -> Vec<u8> {
    let [_, x, y, z] = i.to_be_bytes();
    udp([10, 64 | x, y, z], 5000, B, 2000)
}

struct Ct {
    ct: Conntrack,
    cache: CtCache,
}

impl Ct {
    fn new() -> Ct {
        Ct {
            ct: Conntrack::new(),
            cache: CtCache::new(),
        }
    }

    /// The state `ct(zone, commit?)` gives the frame at `now`.
    fn st(&mut self, f: &[u8], zone: u16, commit: bool, now: u64) -> u8 {
        let pkt = CtPacket {
            frame: f,
            l3: 14,
            v6: false,
            frag_l4_len: None,
            verified: false,
            natted: false,
        };
        let args = CtArgs {
            zone,
            commit,
            ..Default::default()
        };
        let mut md = CtMeta::default();
        self.ct.process(&mut self.cache, &pkt, &mut md, &args, now);
        md.state
    }

    /// Connection ids of zone `zone`'s connections from A (the established flows).
    fn est_ids(&self, zone: u16, now: u64) -> Vec<u32> {
        self.ct
            .dump(Some(zone), now)
            .iter()
            .filter(|c| c.orig.src[..4] == A)
            .map(|c| c.id)
            .collect()
    }
}

/// Two established connections (replies seen) and a flood that fills the global limit: the
/// flood's further packets are `+trk+new` and refused, the established ones stay `+est` in
/// both directions, committed again or not, and keep their connections.
#[test]
fn established_traffic_is_not_refused_at_maxconns() {
    let mut t = Ct::new();
    t.ct.set_maxconns(6);
    for i in 0..2 {
        assert_eq!(t.st(&est(i, false), 0, true, 0), TRK | NEW);
        assert_eq!(t.st(&est(i, true), 0, false, 0), TRK | EST | RPL);
    }
    let ids = t.est_ids(0, 0);
    for i in 0..10 {
        assert_eq!(t.st(&flood(i), 0, true, SEC), TRK | NEW, "flood {i}");
    }
    assert_eq!(t.ct.n_conns(), 6);
    assert_eq!(t.ct.stats().committed, 6);
    assert_eq!(t.ct.stats().limit_refused, 6);
    assert_eq!(t.ct.stats().maxconns_refused, 6);
    for round in 0..3 {
        for i in 0..2 {
            for commit in [false, true] {
                let now = (2 + round) * SEC;
                assert_eq!(t.st(&est(i, false), 0, commit, now), TRK | EST);
                assert_eq!(t.st(&est(i, true), 0, commit, now), TRK | EST | RPL);
            }
        }
    }
    assert_eq!(
        t.ct.stats().limit_refused,
        6,
        "no established packet refused"
    );
    assert_eq!(t.est_ids(0, 5 * SEC), ids);
}

/// As the `ct` pipeline's one-way flows are: a connection whose reply never came is found
/// (`+trk+new`) and committing it again at a full table neither refuses it nor replaces it.
#[test]
fn one_way_connections_are_found_at_maxconns() {
    let mut t = Ct::new();
    t.ct.set_maxconns(3);
    assert_eq!(t.st(&est(0, false), 0, true, 0), TRK | NEW);
    let ids = t.est_ids(0, 0);
    for i in 0..5 {
        t.st(&flood(i), 0, true, 0);
    }
    assert_eq!(t.ct.stats().limit_refused, 3);
    for s in 1..20 {
        assert_eq!(t.st(&est(0, false), 0, true, s * SEC), TRK | NEW);
    }
    assert_eq!(t.ct.stats().limit_refused, 3);
    assert_eq!(t.ct.stats().committed, 3);
    assert_eq!(t.est_ids(0, 20 * SEC), ids);
}

/// A zone's limit (`ct-set-limits`) full of flood: the same, and other zones are free.
#[test]
fn established_traffic_is_not_refused_at_a_zone_limit() {
    let mut t = Ct::new();
    t.ct.set_zone_limit(7, 3);
    assert_eq!(t.st(&est(0, false), 7, true, 0), TRK | NEW);
    assert_eq!(t.st(&est(0, true), 7, false, 0), TRK | EST | RPL);
    for i in 0..6 {
        assert_eq!(t.st(&flood(i), 7, true, 0), TRK | NEW);
    }
    assert_eq!(t.ct.zone_conns(7), 3);
    assert_eq!(t.ct.stats().limit_refused, 4);
    // Not the global limit's: OVS's conntrack_full does not count them.
    assert_eq!(t.ct.stats().maxconns_refused, 0);
    assert_eq!(t.st(&est(0, false), 7, true, SEC), TRK | EST);
    assert_eq!(t.ct.stats().limit_refused, 4);
    // Another zone is not full.
    assert_eq!(t.st(&flood(100), 8, true, SEC), TRK | NEW);
    assert_eq!(t.ct.zone_conns(8), 1);
}

/// When the flood's connections expire (UDP's first timeout, 60 s) while the established one
/// is kept alive by its traffic, their room goes to new connections and the established
/// connection is still the same one.
#[test]
fn expired_flood_frees_the_table_and_established_traffic_goes_on() {
    let mut t = Ct::new();
    t.ct.set_maxconns(4);
    assert_eq!(t.st(&est(0, false), 0, true, 0), TRK | NEW);
    assert_eq!(t.st(&est(0, true), 0, false, 0), TRK | EST | RPL);
    let ids = t.est_ids(0, 0);
    for i in 0..8 {
        t.st(&flood(i), 0, true, 0);
    }
    assert_eq!(t.ct.n_conns(), 4);
    for s in (10..=70).step_by(10) {
        let now = s * SEC;
        assert_eq!(t.st(&est(0, false), 0, true, now), TRK | EST, "at {s} s");
        assert_eq!(
            t.st(&est(0, true), 0, true, now),
            TRK | EST | RPL,
            "at {s} s"
        );
        // The tracker's clean-up, as OVS's clean thread runs it.
        t.ct.sweep(now);
    }
    assert_eq!(
        t.ct.n_conns(),
        1,
        "the flood expired, the established one did not"
    );
    assert_eq!(t.est_ids(0, 70 * SEC), ids);
    for i in 100..103 {
        assert_eq!(t.st(&flood(i), 0, true, 71 * SEC), TRK | NEW);
    }
    assert_eq!(t.ct.n_conns(), 4);
    let refused = t.ct.stats().limit_refused;
    assert_eq!(t.st(&flood(200), 0, true, 71 * SEC), TRK | NEW);
    assert_eq!(t.ct.stats().limit_refused, refused + 1);
    assert_eq!(t.st(&est(0, false), 0, true, 72 * SEC), TRK | EST);
}

/// A flood at the global limit, then at a zone's, watched from another thread as
/// `ct-get-nconns`, `memory/show` and `ct-get-limits` watch it: the counts never read more than
/// the limits or the connections, not even for the instant a refused commit is being counted.
#[test]
fn counts_never_read_past_the_limits_while_commits_are_refused() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let mut t = Ct::new();
    t.ct.set_maxconns(4);
    t.ct.set_zone_limit(7, 2);
    for i in 0..4 {
        t.st(&flood(i), if i < 2 { 7 } else { 0 }, true, 0);
    }
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(7)), (4, 2));
    let Ct { ct, mut cache } = t;
    // Commits of new connections into `zone`, each refused; the most connections, in all and
    // in `zone`, that another thread read meanwhile.
    let mut flood_into = |zone: u16| {
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let watcher = s.spawn(|| {
                let (mut most, mut most_in_zone) = (0, 0);
                loop {
                    let finished = done.load(Relaxed);
                    most = most.max(ct.n_conns());
                    most_in_zone = most_in_zone.max(ct.zone_conns(zone));
                    if finished {
                        return (most, most_in_zone);
                    }
                }
            });
            let args = CtArgs {
                zone,
                commit: true,
                ..Default::default()
            };
            for i in 0..100_000u32 {
                let frame = flood(10 + i % 1000);
                let pkt = CtPacket {
                    frame: &frame,
                    l3: 14,
                    v6: false,
                    frag_l4_len: None,
                    verified: false,
                    natted: false,
                };
                let mut md = CtMeta::default();
                ct.process(&mut cache, &pkt, &mut md, &args, SEC);
                assert_eq!(md.state, TRK | NEW);
            }
            done.store(true, Relaxed);
            watcher.join().unwrap()
        })
    };
    assert_eq!(flood_into(0), (4, 2), "refused by the global limit");
    assert_eq!(ct.stats().maxconns_refused, 100_000);
    ct.set_maxconns(1000);
    assert_eq!(flood_into(7), (4, 2), "refused by the zone's limit");
    assert_eq!(ct.stats().maxconns_refused, 100_000);
    assert_eq!(ct.n_conns(), 4);
}
