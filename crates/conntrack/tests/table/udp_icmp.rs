//! The connection table's tests of UDP and ICMP (helpers in `../table.rs`).

use super::*;

// ---------------------------------------------------------------------------------------------
// UDP
// ---------------------------------------------------------------------------------------------

/// §3a: the first packet is `+new` and, without commit, leaves nothing behind.
#[test]
fn udp_first_packet_is_new_and_not_committed() {
    let mut t = Ct::new();
    let (md, rw) = t.run(&udp_ab(), &track(5), 0);
    assert_state!(md.state, TRK | NEW);
    assert_eq!(rw, None);
    assert_eq!(md.orig, tuple(UDP, a(), 3333, b(), 4444, 5));
    assert_eq!((md.mark, md.label), (0, 0));
    assert!(t.dump(0).is_empty());
    assert_eq!(t.ct.n_conns(), 0);
    // Again, still nothing: and the reply of nothing is `+new`, not `+rpl`.
    assert_state!(t.st(&udp_ab(), &track(5), 10), TRK | NEW);
    assert_state!(t.st(&udp_ba(), &track(5), 20), TRK | NEW);
    assert!(t.dump(20).is_empty());
    assert_eq!(t.ct.stats().committed, 0);
}

/// §3a: one-way UDP stays `+new` after commit; the reply is `+est+rpl`, after which the
/// original direction is `+est`.
#[test]
fn udp_commit_oneway_new_reply_est() {
    let mut t = Ct::new();
    assert_state!(t.st(&udp_ab(), &commit(5), 0), TRK | NEW);
    let d = t.dump(0);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].orig, tuple(UDP, a(), 3333, b(), 4444, 5));
    assert_eq!(d[0].reply, tuple(UDP, b(), 4444, a(), 3333, 5));
    assert_eq!(t.ct.n_conns(), 1);
    assert_eq!(t.ct.zone_conns(5), 1);
    assert_eq!(t.ct.stats().committed, 1);
    // More packets one way: still +new, with or without commit, and no second entry.
    assert_state!(t.st(&udp_ab(), &track(5), 100), TRK | NEW);
    assert_state!(t.st(&udp_ab(), &commit(5), 200), TRK | NEW);
    assert_eq!(t.dump(200).len(), 1);
    assert_eq!(t.ct.stats().committed, 1);
    // The reply.
    let (md, _) = t.run(&udp_ba(), &track(5), 300);
    assert_state!(md.state, TRK | EST | RPL);
    assert_eq!(
        md.orig,
        tuple(UDP, a(), 3333, b(), 4444, 5),
        "ct_orig is the original direction"
    );
    assert_state!(t.st(&udp_ab(), &track(5), 400), TRK | EST);
    assert_state!(t.st(&udp_ba(), &track(5), 500), TRK | EST | RPL);
    assert_eq!(t.ct.n_conns(), 1);
}

/// `n` port pairs (source, destination) whose UDP tuples from a to b in zone 5 share a bucket
/// of a new PMD cache, and those tuples' frames.
fn ports_of_one_bucket(n: usize) -> (Vec<(u16, u16)>, Vec<Vec<u8>>) {
    let orig = |(sport, dport)| tuple(UDP, a(), sport, b(), dport, 5);
    let sizing = CtCache::new();
    let bucket = |p| sizing.bucket_of(orig(p).hash());
    let target = bucket((1, 1));
    let ports: Vec<(u16, u16)> = (1..=64)
        .flat_map(|dport| (1..=u16::MAX).map(move |sport| (sport, dport)))
        .filter(|&p| bucket(p) == target)
        .take(n)
        .collect();
    assert_eq!(ports.len(), n, "enough tuples of one bucket");
    let ab = ports
        .iter()
        .map(|&(s, d)| build(a(), b(), &udp(s, d, b"a")))
        .collect();
    (ports, ab)
}

use crate::common::batch;

/// Connections whose tuples share a bucket of the PMD's lookup cache, three times as many as
/// it holds: each is found in both directions through `process_batch`, whether the cache took
/// it in or not. A packet says where its connection is cached (`conn_ref`) only when it is,
/// and `recheck` finds it there only then; the others went to the table.
#[test]
fn connections_beyond_a_cache_bucket() {
    let n = 3 * conntrack::CACHE_WAYS;
    let orig = |(sport, dport)| tuple(UDP, a(), sport, b(), dport, 5);
    let (ports, ab) = ports_of_one_bucket(n);
    let ba: Vec<Vec<u8>> = ports
        .iter()
        .map(|&(s, d)| build(b(), a(), &udp(d, s, b"c")))
        .collect();
    let ct = Conntrack::new();
    let mut cache = CtCache::new();
    let run = |cache: &mut CtCache, frames: &[Vec<u8>], args: &CtArgs, now| {
        batch(&ct, cache, frames, args, now)
    };
    for md in run(&mut cache, &ab, &commit(5), 0) {
        assert_state!(md.state, TRK | NEW);
    }
    assert_eq!((ct.n_conns() as usize, ct.stats().committed), (n, n as u64));
    let (mut cached, mut not) = (0, 0);
    let mut check = |cache: &CtCache, mds: &[CtMeta], want: u8, now| {
        for (md, &p) in mds.iter().zip(&ports) {
            assert_state!(md.state, want);
            assert_eq!(md.orig, orig(p));
            let again = ct.recheck(cache, md.conn_ref, &md.orig, &track(5), false, now);
            if md.conn_ref == 0 {
                not += 1;
                assert_eq!(again, None, "not cached: {p:?}");
            } else if again.is_some() {
                cached += 1;
            }
        }
    };
    for round in 1..=3 {
        let mds = run(&mut cache, &ab, &track(5), round * SEC);
        check(&cache, &mds, TRK | NEW, round * SEC);
    }
    let mds = run(&mut cache, &ba, &track(5), 4 * SEC);
    check(&cache, &mds, TRK | EST | RPL, 4 * SEC);
    let mds = run(&mut cache, &ab, &track(5), 5 * SEC);
    check(&cache, &mds, TRK | EST, 5 * SEC);
    assert!(cached > 0 && not > 0, "cached {cached}, not cached {not}");
    assert_eq!(ct.n_conns() as usize, n);
    assert_counts(&ct, 5 * SEC);
}

/// A bucket full of connections, one of which expires: the PMD takes it out of its cache, and
/// the entries after it in the bucket move up, so that the others are still found there (a
/// lookup stops at the first free way) and none goes to the table.
#[test]
fn a_bucket_stays_packed_when_a_connection_in_it_expires() {
    let (_, frames) = ports_of_one_bucket(conntrack::CACHE_WAYS);
    let n = frames.len();
    // The fourth committed is in the middle of the bucket (the latest first), and the only
    // one not refreshed.
    let middle = 3;
    let others: Vec<Vec<u8>> = (frames.iter().enumerate())
        .filter(|&(i, _)| i != middle)
        .map(|(_, f)| f.clone())
        .collect();
    let ct = Conntrack::new();
    ct.set_timeouts(
        Some(5),
        &[
            (TimeoutClass::UdpFirst, 10),
            (TimeoutClass::UdpSingle, 10),
            (TimeoutClass::UdpMultiple, 10),
        ],
    );
    let mut cache = CtCache::new();
    let run = |cache: &mut CtCache, frames: &[Vec<u8>], args: &CtArgs, now| {
        batch(&ct, cache, frames, args, now)
    };
    run(&mut cache, &frames, &commit(5), 0);
    assert_eq!(ct.n_conns() as usize, n);
    run(&mut cache, &others, &track(5), 5 * SEC);
    // The middle one expired at 10 s: taken out after this burst.
    run(&mut cache, &others, &track(5), 12 * SEC);
    assert_eq!(ct.n_conns() as usize, n - 1);
    let before = cache.table_lookups();
    for md in run(&mut cache, &others, &track(5), 13 * SEC) {
        assert_state!(md.state, TRK | NEW);
        assert_ne!(md.conn_ref, 0, "cached: {:?}", md.orig);
    }
    assert_eq!(cache.table_lookups(), before, "no lookup went to the table");
}

/// A packet's `conn_ref` is its own: `process_batch` writes the metadata into slots that may
/// hold an earlier packet's, and a packet of no cached connection (here: not committed) must
/// not keep the earlier one's reference, or a later `ct(commit)` would take it for tracked
/// and not commit.
#[test]
fn conn_ref_is_not_left_from_an_earlier_packet() {
    let ct = Conntrack::new();
    let mut cache = CtCache::new();
    let f = udp_ab();
    let mut out = vec![(CtMeta::default(), None)];
    ct.process_batch(&mut cache, &[packet(&f)], &mut out, &commit(5), 0);
    assert_ne!(out[0].0.conn_ref, 0, "committed and cached");
    let g = build(a(), b(), &udp(3334, 4444, b"a"));
    ct.process_batch(&mut cache, &[packet(&g)], &mut out, &track(5), 10);
    assert_state!(out[0].0.state, TRK | NEW);
    assert_eq!(out[0].0.conn_ref, 0, "no connection");
}

/// The same packet in another zone is another connection.
#[test]
fn udp_zones_are_separate() {
    let mut t = Ct::new();
    assert_state!(t.st(&udp_ab(), &commit(1), 0), TRK | NEW);
    assert_state!(
        t.st(&udp_ba(), &track(2), 10),
        TRK | NEW,
        "zone 2 knows nothing"
    );
    assert_state!(t.st(&udp_ba(), &track(1), 20), TRK | EST | RPL);
    assert_state!(t.st(&udp_ab(), &commit(2), 30), TRK | NEW);
    assert_eq!(t.ct.dump(Some(1), 30).len(), 1);
    assert_eq!(t.ct.dump(Some(2), 30).len(), 1);
    assert_eq!(t.ct.dump(Some(3), 30).len(), 0);
    assert_eq!(
        (t.ct.zone_conns(1), t.ct.zone_conns(2), t.ct.n_conns()),
        (1, 1, 2)
    );
    // Zone 2's connection has not seen its reply; zone 1's has.
    assert_state!(t.st(&udp_ab(), &track(2), 40), TRK | NEW);
    assert_state!(t.st(&udp_ab(), &track(1), 50), TRK | EST);
    // The largest zone works too.
    assert_state!(t.st(&udp_ab(), &commit(u16::MAX), 60), TRK | NEW);
    assert_eq!(t.ct.zone_conns(u16::MAX), 1);
}

/// §3a/§3b: udp_first 60 s, udp_single 60 s (more packets one way), udp_multiple 30 s (after a
/// reply); `timeout_secs` counts down; an expired connection is not found (the packet is
/// `+new` again) and `sweep` removes and counts it.
#[test]
fn udp_timeout_classes_and_expiry() {
    let mut t = Ct::new();
    t.st(&udp_ab(), &commit(0), 0);
    let d = t.dump(0);
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::UdpFirst, 60)
    );
    assert_eq!(
        t.dump(1)[0].timeout_secs,
        59,
        "whole seconds, truncated (OVS prints 59)"
    );
    t.st(&udp_ab(), &track(0), 10 * SEC);
    let d = t.dump(10 * SEC);
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::UdpSingle, 60)
    );
    t.st(&udp_ba(), &track(0), 20 * SEC);
    let d = t.dump(20 * SEC);
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::UdpMultiple, 30)
    );
    // Alive until 50 s, gone at 50 s.
    assert_eq!(t.dump(50 * SEC - 1).len(), 1);
    assert_eq!(t.ct.sweep(50 * SEC - 1), 0);
    assert!(t.dump(50 * SEC).is_empty());
    assert_state!(
        t.st(&udp_ba(), &track(0), 50 * SEC),
        TRK | NEW,
        "expired: not a reply any more"
    );
    assert_eq!(t.ct.n_conns(), 1, "counted until swept");
    assert_eq!(t.ct.sweep(50 * SEC), 1);
    assert_eq!(t.ct.stats().expired, 1);
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(0)), (0, 0));
    assert_eq!(t.ct.sweep(100 * SEC), 0, "counted once");
}

/// A one-way flow refreshed by each packet lives 60 s after its last packet.
#[test]
fn udp_oneway_refresh_extends_life() {
    let mut t = Ct::new();
    t.st(&udp_ab(), &commit(0), 0);
    for i in 1..=5u64 {
        assert_state!(t.st(&udp_ab(), &track(0), i * 50 * SEC), TRK | NEW);
    }
    assert_eq!(t.dump(250 * SEC)[0].timeout_secs, 60);
    assert_eq!(t.dump(310 * SEC - 1).len(), 1);
    assert!(t.dump(310 * SEC).is_empty());
}

/// Timeout policies per zone (§4): a zone's policy applies to its connections, others keep the
/// defaults; changing the policy is seen at the connection's next packet.
#[test]
fn udp_timeout_policy_per_zone() {
    let mut t = Ct::new();
    t.ct.set_timeouts(
        Some(7),
        &[(TimeoutClass::UdpFirst, 5), (TimeoutClass::UdpMultiple, 2)],
    );
    t.st(&udp_ab(), &commit(7), 0);
    t.st(&udp_ab(), &commit(0), 0);
    assert_eq!(t.ct.dump(Some(7), 0)[0].timeout_secs, 5);
    assert_eq!(t.ct.dump(Some(0), 0)[0].timeout_secs, 60);
    t.st(&udp_ba(), &track(7), 1000);
    assert_eq!(t.ct.dump(Some(7), 1000)[0].timeout_secs, 2);
    t.ct.set_timeouts(Some(7), &[(TimeoutClass::UdpMultiple, 9)]);
    t.st(&udp_ba(), &track(7), 2000);
    assert_eq!(t.ct.dump(Some(7), 2000)[0].timeout_secs, 9);
    assert_eq!(t.ct.timeouts(Some(7))[TimeoutClass::UdpFirst as usize], 5);
    assert_eq!(t.ct.timeouts(Some(8))[TimeoutClass::UdpFirst as usize], 60);
    assert!(t.ct.del_timeouts(7));
    assert!(!t.ct.del_timeouts(7));
    t.ct.flush(None, None);
    t.st(&udp_ab(), &commit(7), 3000);
    assert_eq!(
        t.ct.dump(Some(7), 3000)[0].timeout_secs,
        60,
        "back to the default policy"
    );
}

/// A connection's expiry moves at its first packet of each 1024 ms period, or when its timeout
/// class changes: a policy changed in between reaches it in the next period, and a packet
/// later in a period leaves the expiry where its period's first packet put it.
#[test]
fn expiry_moves_once_a_period_and_on_a_class_change() {
    let mut t = Ct::new();
    t.ct.set_timeouts(Some(7), &[(TimeoutClass::UdpSingle, 20)]);
    t.st(&udp_ab(), &commit(7), 0);
    // Period 0 (0-1023 ms): a second packet one way changes the class, so the expiry moves.
    t.st(&udp_ab(), &track(7), 100);
    let d = t.ct.dump(Some(7), 100);
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::UdpSingle, 20)
    );
    // The policy changes; a packet of the same class in the same period keeps the expiry.
    t.ct.set_timeouts(Some(7), &[(TimeoutClass::UdpSingle, 9)]);
    t.st(&udp_ab(), &track(7), 600);
    assert_eq!(
        t.ct.dump(Some(7), 600)[0].timeout_secs,
        19,
        "20 s from 100 ms: 19.5 s left"
    );
    // The next period's first packet reads the policy.
    t.st(&udp_ab(), &track(7), 1100);
    assert_eq!(t.ct.dump(Some(7), 1100)[0].timeout_secs, 9);
    // Later in the period: the expiry stays 9 s from 1100 ms.
    t.st(&udp_ab(), &track(7), 2000);
    assert_eq!(t.ct.dump(Some(7), 10_099).len(), 1);
    assert!(t.ct.dump(Some(7), 10_100).is_empty());
    // The reply changes the class at once (30 s by default), whatever the period.
    t.st(&udp_ab(), &commit(7), 10_000);
    t.st(&udp_ba(), &track(7), 10_001);
    let d = t.ct.dump(Some(7), 10_001);
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::UdpMultiple, 30)
    );
}

/// OVS: "Port 0 is invalid" (`extract_l4_udp`/`extract_l4_tcp` return false for a zero port).
#[test]
fn udp_port_zero_is_invalid_like_ovs() {
    let mut t = Ct::new();
    let f = build(a(), b(), &udp(0, 4444, b"x"));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    let f = build(a(), b(), &tcp(1111, 0, "S", 1, 0, 100));
    assert_state!(t.st(&f, &commit(0), 0), TRK | INV);
    assert_eq!(t.ct.n_conns(), 0);
}

/// §3a: protocols without ports (GRE, SCTP, ...) are tracked by OVS as "other" (ports 0):
/// `+new` on the first packet, an entry on commit, `+est+rpl` for the reply.
#[test]
fn other_protocol_gre_tracked_like_ovs() {
    let mut t = Ct::new();
    let gre = |s, d| {
        build(
            s,
            d,
            &L4 {
                proto: 47,
                bytes: b"\x00\x00\x08\x00abcd".to_vec(),
                csum_at: None,
            },
        )
    };
    assert_state!(t.st(&gre(a(), b()), &commit(5), 0), TRK | NEW);
    assert_eq!(t.dump(0).len(), 1);
    assert_state!(t.st(&gre(b(), a()), &track(5), 1), TRK | EST | RPL);
}

// ---------------------------------------------------------------------------------------------
// ICMP
// ---------------------------------------------------------------------------------------------

/// §3a: echo request `+new`, 60 s; reply `+est+rpl`, 30 s; the key holds the types.
#[test]
fn icmp4_echo_request_reply() {
    let mut t = Ct::new();
    let req = build(a(), b(), &echo(8, 77, 1));
    let rep = build(b(), a(), &echo(0, 77, 1));
    assert_state!(t.st(&req, &commit(5), 0), TRK | NEW);
    let d = t.dump(0);
    assert_eq!(d.len(), 1);
    assert_eq!(
        (d[0].orig.proto, d[0].orig.stype, d[0].orig.dtype),
        (ICMP, 8, 0)
    );
    assert_eq!((d[0].orig.sport, d[0].orig.dport), (77, 77));
    assert_eq!((d[0].reply.stype, d[0].reply.dtype), (0, 8));
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::IcmpFirst, 60)
    );
    // A second request before the reply: still +new (CT_UPDATE_VALID_NEW).
    assert_state!(t.st(&req, &track(5), 10), TRK | NEW);
    assert_state!(t.st(&rep, &track(5), 20), TRK | EST | RPL);
    let d = t.dump(20);
    assert_eq!(
        (d[0].class, d[0].timeout_secs),
        (TimeoutClass::IcmpReply, 30)
    );
    assert_state!(t.st(&req, &track(5), 30), TRK | EST);
    // Another id is another connection.
    assert_state!(
        t.st(&build(b(), a(), &echo(0, 78, 1)), &track(5), 40),
        TRK | INV
    );
}

/// §3a, IPv6: echo request/reply (128/129).
#[test]
fn icmp6_echo_request_reply() {
    let mut t = Ct::new();
    let req = build(a6(), b6(), &echo(128, 78, 1));
    let rep = build(b6(), a6(), &echo(129, 78, 1));
    assert_state!(t.st(&req, &commit(5), 0), TRK | NEW);
    let d = t.dump(0);
    assert_eq!(
        (
            d[0].orig.proto,
            d[0].orig.v6,
            d[0].orig.stype,
            d[0].orig.dtype
        ),
        (ICMPV6, true, 128, 129)
    );
    assert_state!(t.st(&rep, &track(5), 1), TRK | EST | RPL);
    assert_eq!(t.dump(1)[0].timeout_secs, 30);
}

/// An echo reply with no request is `+inv` (it may not create a connection), with or without
/// commit; so are echo with a non-zero code and an address-mask request (§3a).
#[test]
fn icmp_reply_without_request_is_invalid() {
    let mut t = Ct::new();
    assert_state!(
        t.st(&build(b(), a(), &echo(0, 77, 1)), &commit(5), 0),
        TRK | INV
    );
    assert_state!(
        t.st(&build(b6(), a6(), &echo(129, 77, 1)), &commit(5), 0),
        TRK | INV
    );
    assert_state!(
        t.st(
            &build(a(), b(), &icmp(8, 1, [0, 1, 0, 1], &[])),
            &commit(5),
            0
        ),
        TRK | INV
    );
    assert_state!(
        t.st(
            &build(a(), b(), &icmp(17, 0, [0, 1, 0, 1], &[0; 4])),
            &commit(5),
            0
        ),
        TRK | INV
    );
    // ND (neighbour solicitation) is not tracked.
    assert_state!(
        t.st(
            &build(a6(), b6(), &icmp(135, 0, [0; 4], &[0; 16])),
            &commit(5),
            0
        ),
        TRK | INV
    );
    assert_eq!(t.ct.n_conns(), 0);
    assert!(t.dump(0).is_empty());
    // ICMP timestamp request (13) is tracked, reply type 14.
    assert_state!(
        t.st(
            &build(a(), b(), &icmp(13, 0, [0, 79, 0, 0], &[0; 12])),
            &commit(5),
            0
        ),
        TRK | NEW
    );
    assert_eq!(t.dump(0)[0].reply.stype, 14);
}

/// A committed UDP connection, `+rel` ICMP errors about it: from the responder (destination
/// unreachable: reply direction), from a router on the way, and from the originator about a
/// reply packet (original direction, no `+rpl`). The connection's mark comes along.
#[test]
fn icmp4_error_related_to_udp() {
    let mut t = Ct::new();
    let args = CtArgs {
        mark: Some((42, u32::MAX)),
        ..commit(5)
    };
    t.st(&udp_ab(), &args, 0);
    let unreach = build(b(), a(), &icmp_err(3, 3, &quote(&udp_ab(), 8)));
    let (md, rw) = t.run(&unreach, &track(5), 10);
    assert_state!(md.state, TRK | REL | RPL);
    assert_eq!(md.mark, 42);
    assert_eq!(md.orig, tuple(UDP, a(), 3333, b(), 4444, 5));
    assert_eq!(rw, None);
    // From a router (TTL exceeded): the error goes to the inner packet's source.
    let ttl = build(ip("10.9.9.9"), a(), &icmp_err(11, 0, &quote(&udp_ab(), 8)));
    assert_state!(t.st(&ttl, &track(5), 20), TRK | REL | RPL);
    // A quoting more than 8 bytes is fine.
    let long = build(b(), a(), &icmp_err(3, 3, &quote(&udp_ab(), 9)));
    assert_state!(t.st(&long, &track(5), 30), TRK | REL | RPL);
    // From the originator about the reply: original direction.
    let back = build(a(), b(), &icmp_err(3, 3, &quote(&udp_ba(), 8)));
    assert_state!(t.st(&back, &track(5), 40), TRK | REL);
    // No entry of its own, the connection's state unchanged (still one-way: +new).
    assert_eq!(t.dump(40).len(), 1);
    assert_state!(t.st(&udp_ab(), &track(5), 50), TRK | NEW);
    // In another zone it is unrelated.
    assert_state!(t.st(&unreach, &track(6), 60), TRK | INV);
}

/// ICMP error about an echo request: related too.
#[test]
fn icmp4_error_related_to_echo() {
    let mut t = Ct::new();
    let req = build(a(), b(), &echo(8, 77, 1));
    t.st(&req, &commit(0), 0);
    let err = build(b(), a(), &icmp_err(3, 1, &quote(&req, 8)));
    assert_state!(t.st(&err, &track(0), 1), TRK | REL | RPL);
}

/// An established TCP connection and an ICMP "fragmentation needed" about one of its segments,
/// quoting the IP header and the first 8 bytes of TCP (RFC 792; `ICMP_ERROR_DATA_L4_LEN` in
/// OVS), or the whole TCP header (what Linux sends): `+rel+rpl`. IPv6 packet-too-big quoting
/// the whole segment likewise.
///
/// `key::l4` requires 20 bytes of an embedded TCP header while `ipv4_inner`/`ipv6_inner` hand
/// it `l4_len: 8`, so an ICMP error about TCP is never related.
#[test]
fn icmp_error_related_to_tcp() {
    let mut t = Ct::new();
    tcp_handshake(&mut t, 0, a(), b());
    let seg = build(
        a(),
        b(),
        &tcp_opts(1111, 2222, "PA", 1001, 5001, 64, &[], b"hello"),
    );
    for n in [8, 20, 25] {
        let err = build(b(), a(), &icmp_err(3, 4, &quote(&seg, n)));
        assert_state!(
            t.st(&err, &track(5), 100),
            TRK | REL | RPL,
            "{n} bytes of TCP quoted"
        );
    }
    let mut t = Ct::new();
    tcp_handshake(&mut t, 0, a6(), b6());
    let seg = build(
        a6(),
        b6(),
        &tcp_opts(1111, 2222, "PA", 1001, 5001, 64, &[], b"hello"),
    );
    let ptb = build(b6(), a6(), &icmp(2, 0, [0, 0, 5, 0], &quote(&seg, 25)));
    assert_state!(
        t.st(&ptb, &track(5), 100),
        TRK | REL | RPL,
        "IPv6 packet too big"
    );
}

/// ICMPv6 destination unreachable about UDP.
#[test]
fn icmp6_error_related_to_udp() {
    let mut t = Ct::new();
    let u = build(a6(), b6(), &udp(3333, 4444, b"a"));
    t.st(&u, &commit(5), 0);
    let err = build(b6(), a6(), &icmp_err(1, 4, &quote(&u, 9)));
    assert_state!(t.st(&err, &track(5), 1), TRK | REL | RPL);
    let r = build(b6(), a6(), &udp(4444, 3333, b"r"));
    let back = build(a6(), b6(), &icmp_err(1, 4, &quote(&r, 9)));
    assert_state!(t.st(&back, &track(5), 2), TRK | REL);
}

/// ICMP errors quoting a packet of no connection are `+inv` (`related_unknown`); an error not
/// sent to the quoted packet's source is `+inv` too.
#[test]
fn icmp_error_unrelated_is_invalid() {
    let mut t = Ct::new();
    let unreach = build(b(), a(), &icmp_err(3, 3, &quote(&udp_ab(), 8)));
    assert_state!(t.st(&unreach, &commit(5), 0), TRK | INV);
    assert_eq!(t.ct.stats().related_unknown, 1);
    assert!(
        t.dump(0).is_empty(),
        "an ICMP error never creates a connection"
    );
    t.st(&udp_ab(), &commit(5), 1);
    // Sent to someone other than the inner source.
    let wrong = build(b(), ip("10.1.1.99"), &icmp_err(3, 3, &quote(&udp_ab(), 8)));
    assert_state!(t.st(&wrong, &track(5), 2), TRK | INV);
    assert_eq!(t.invalid(Invalid::L4), 1);
    // Other ports.
    let other = build(
        b(),
        a(),
        &icmp_err(3, 3, &quote(&build(a(), b(), &udp(3333, 4445, b"a")), 8)),
    );
    assert_state!(t.st(&other, &track(5), 3), TRK | INV);
    assert_eq!(t.ct.stats().related_unknown, 2);
    // An ICMP error quoting an ICMP error is not related to anything.
    let nested = build(b(), a(), &icmp_err(3, 3, &quote(&unreach, 8)));
    assert_state!(t.st(&nested, &track(5), 4), TRK | INV);
}

/// Embedded headers cut short: inner IP header incomplete, fewer than 8 bytes of L4, an inner
/// later fragment; all `+inv` without touching the connection.
#[test]
fn icmp_error_truncated_embedded_headers() {
    let mut t = Ct::new();
    t.st(&udp_ab(), &commit(5), 0);
    let full = quote(&udp_ab(), 8);
    for cut in [0, 10, 19, 20, 24, 27] {
        let err = build(b(), a(), &icmp_err(3, 3, &full[..cut]));
        assert_state!(t.st(&err, &track(5), 1), TRK | INV, "quote of {cut} bytes");
    }
    let mut later = full.clone();
    later[6..8].copy_from_slice(&0x0010u16.to_be_bytes());
    let err = build(b(), a(), &icmp_err(3, 3, &later));
    assert_state!(t.st(&err, &track(5), 1), TRK | INV, "inner later fragment");
    // Inner IHL beyond what is quoted.
    let mut ihl = full.clone();
    ihl[0] = 0x4f;
    let err = build(b(), a(), &icmp_err(3, 3, &ihl));
    assert_state!(t.st(&err, &track(5), 1), TRK | INV, "inner IHL 60");
    // ICMPv6 error with a short inner IPv6 header.
    let u6 = build(a6(), b6(), &udp(3333, 4444, b"a"));
    let err = build(b6(), a6(), &icmp_err(1, 4, &quote(&u6, 8)[..30]));
    assert_state!(t.st(&err, &track(5), 1), TRK | INV);
    // The ICMP header itself cut: 4 bytes.
    let mut f = build(b(), a(), &icmp(3, 3, [0; 4], &[]));
    f.truncate(f.len() - 4);
    f[ETH + 3] -= 4;
    fix_ip4_csum(&mut f);
    assert_state!(t.st(&f, &track(5), 1), TRK | INV);
    assert_eq!(t.ct.stats().related_unknown, 0);
    assert_state!(
        t.st(&udp_ab(), &track(5), 2),
        TRK | NEW,
        "connection untouched"
    );
}

/// OVS looks an ICMP error up by the *reversed* quoted tuple (`conn_key_reverse` in
/// `extract_l4_icmp`): for a SNATed connection the responder's error quotes the translated
/// packet (`N:n -> B`), whose reverse is the connection's reply key. The table looks up the
/// quoted tuple as is, which is no key of a NATed connection: `+inv` instead of `+rel+rpl`.
#[test]
fn icmp_error_related_to_snat_connection() {
    let mut t = Ct::new();
    let args = with_nat(commit(5), snat("10.0.0.100", "10.0.0.100", 0, 0));
    let (md, rw) = t.run(&udp_ab(), &args, 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    let (n, np) = rw.unwrap().src.unwrap();
    let n = Ip::V4(n[..4].try_into().unwrap());
    // The packet as it left, translated; the error comes back to the translated address.
    let on_wire = build(n, b(), &udp(np, 4444, b"a"));
    let err = build(b(), n, &icmp_err(3, 3, &quote(&on_wire, 8)));
    let (md, rw) = t.run(&err, &with_nat(track(5), nat_only()), 10);
    assert_state!(md.state, TRK | REL | RPL | SNAT);
    // Translated back as a reply: the outer destination, and the quoted packet's source.
    assert_eq!(
        rw,
        Some(NatRewrite {
            src: None,
            dst: Some((a().key(), 3333)),
            alg: None,
            icmp_error: true
        })
    );
    // Without nat: related, nothing to translate.
    let (md, rw) = t.run(&err, &track(5), 11);
    assert_state!(md.state, TRK | REL | RPL);
    assert_eq!(rw, None);
}
