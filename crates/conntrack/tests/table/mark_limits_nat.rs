//! The connection table's tests of mark and label, limits, NAT (helpers in `../table.rs`).

use super::*;

// ---------------------------------------------------------------------------------------------
// Mark and label
// ---------------------------------------------------------------------------------------------

/// §1/§2: mark and label set on commit (with masks) are on every later packet of the
/// connection, both directions; later commits merge under their masks.
#[test]
fn mark_label_on_commit_with_masks() {
    let mut t = Ct::new();
    let args = CtArgs {
        mark: Some((0x2a, 0xff)),
        label: Some((0x0102_0304, u128::MAX)),
        ..commit(5)
    };
    let (md, _) = t.run(&udp_ab(), &args, 0);
    assert_eq!(
        (md.mark, md.label),
        (0x2a, 0x0102_0304),
        "the committing packet sees them"
    );
    let (md, _) = t.run(&udp_ab(), &track(5), 1);
    assert_eq!((md.mark, md.label), (0x2a, 0x0102_0304));
    let (md, _) = t.run(&udp_ba(), &track(5), 2);
    assert_eq!((md.mark, md.label), (0x2a, 0x0102_0304));
    // Masked update: only the masked bits change.
    let args = CtArgs {
        mark: Some((0xfff0_0f00, 0x0000_0f0f)),
        label: Some((1u128 << 127 | 0xff, 1u128 << 127 | 0x0f)),
        ..commit(5)
    };
    let (md, _) = t.run(&udp_ba(), &args, 3);
    assert_eq!(md.mark, 0x0f20);
    assert_eq!(md.label, 1u128 << 127 | 0x0102_030f);
    let d = t.dump(3);
    assert_eq!((d[0].mark, d[0].label), (0xf20, 1u128 << 127 | 0x0102_030f));
    // Max mark.
    t.run(
        &udp_ab(),
        &CtArgs {
            mark: Some((u32::MAX, u32::MAX)),
            ..commit(5)
        },
        4,
    );
    assert_eq!(t.run(&udp_ba(), &track(5), 5).0.mark, u32::MAX);
}

/// Mark and label need commit: on an existing connection a `ct()` without commit leaves them;
/// on a packet of no connection nothing is set (and nothing remembered).
#[test]
fn mark_label_not_set_without_commit() {
    let mut t = Ct::new();
    let no_commit = CtArgs {
        mark: Some((7, u32::MAX)),
        label: Some((9, u128::MAX)),
        ..track(5)
    };
    let (md, _) = t.run(&udp_ab(), &no_commit, 0);
    assert_eq!((md.mark, md.label), (0, 0));
    t.st(&udp_ab(), &commit(5), 1);
    let (md, _) = t.run(&udp_ab(), &no_commit, 2);
    assert_eq!((md.mark, md.label), (0, 0));
    assert_eq!((t.dump(2)[0].mark, t.dump(2)[0].label), (0, 0));
}

/// Packets read a connection's label without its lock while commits change it: each reads
/// one of the labels written, never half of one and half of another (the label's two words),
/// and a commit that finds the label as it would write it leaves it.
#[test]
fn a_label_read_while_commits_write_it_is_whole() {
    const A: u128 = u64::MAX as u128;
    const B: u128 = A << 64;
    let ct = Conntrack::new();
    let f = udp_ab();
    let label = |v: u128| CtArgs {
        label: Some((v, u128::MAX)),
        ..commit(5)
    };
    let run = |cache: &mut CtCache, args: &CtArgs| {
        let mut md = CtMeta::default();
        ct.process(cache, &packet(&f), &mut md, args, 0);
        md
    };
    assert_eq!(run(&mut CtCache::new(), &label(A)).label, A);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut cache = CtCache::new();
            for i in 0..20_000 {
                let v = if i % 2 == 0 { B } else { A };
                assert_eq!(run(&mut cache, &label(v)).label, v);
            }
        });
        let mut cache = CtCache::new();
        for _ in 0..20_000 {
            let l = run(&mut cache, &track(5)).label;
            assert!(l == A || l == B, "a torn label: {l:#x}");
        }
    });
    let mut cache = CtCache::new();
    let l = run(&mut cache, &track(5)).label;
    assert_eq!(
        run(&mut cache, &label(l)).label,
        l,
        "a commit of the same label"
    );
    assert_eq!(ct.dump(None, 0)[0].label, l);
}

/// A refused commit (limit) does not hand the packet a mark it asked for.
#[test]
fn mark_not_reported_when_commit_refused() {
    let mut t = Ct::new();
    t.ct.set_maxconns(0);
    let args = CtArgs {
        mark: Some((7, u32::MAX)),
        label: Some((9, u128::MAX)),
        ..commit(5)
    };
    let (md, _) = t.run(&udp_ab(), &args, 0);
    assert_state!(md.state, TRK | NEW);
    assert_eq!((md.mark, md.label), (0, 0));
}

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

/// §7a: with the table full, commits are refused: the packet stays `+new`, no entry, counted;
/// freeing space (flush) lets commits in again.
#[test]
fn maxconns_refuses_and_recovers() {
    let mut t = Ct::new();
    assert_eq!(t.ct.maxconns(), 3_000_000);
    t.ct.set_maxconns(2);
    for i in 0..3 {
        assert_state!(t.st(&udp_from(i), &commit(5), 0), TRK | NEW);
    }
    assert_eq!(t.ct.n_conns(), 2);
    assert_eq!(t.dump(0).len(), 2);
    assert_eq!(t.ct.stats().limit_refused, 1);
    assert_eq!(t.ct.stats().committed, 2);
    // The refused flow's second packet is still +new and refused again.
    assert_state!(t.st(&udp_from(2), &commit(5), 1), TRK | NEW);
    assert_eq!(t.ct.stats().limit_refused, 2);
    assert_eq!(t.ct.flush(None, None), 2);
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(5)), (0, 0));
    assert_state!(t.st(&udp_from(2), &commit(5), 2), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 1);
    t.ct.set_maxconns(0);
    assert_state!(t.st(&udp_from(3), &commit(5), 3), TRK | NEW);
    assert_eq!(t.ct.n_conns(), 1);
}

/// §8a: a zone limit of 3 keeps the zone at 3 connections; other zones are not affected; a
/// default limit applies to zones without their own; flush and expiry bring counts back.
#[test]
fn zone_limits_and_default() {
    let mut t = Ct::new();
    t.ct.set_zone_limit(5, 3);
    for i in 0..5 {
        assert_state!(t.st(&udp_from(i), &commit(5), 0), TRK | NEW);
    }
    for i in 0..5 {
        t.st(&udp_from(i), &commit(6), 0);
    }
    assert_eq!((t.ct.zone_conns(5), t.ct.zone_conns(6)), (3, 5));
    assert_eq!(t.ct.dump(Some(5), 0).len(), 3);
    assert_eq!(t.ct.stats().limit_refused, 2);
    assert_eq!(t.ct.zone_limits(), vec![(5, 3)]);
    t.ct.set_default_limit(1);
    for i in 10..13 {
        t.st(&udp_from(i), &commit(9), 0);
    }
    assert_eq!(t.ct.zone_conns(9), 1);
    t.st(&udp_from(20), &commit(5), 0);
    assert_eq!(t.ct.zone_conns(5), 3, "own limit, not the default");
    // Flushing zone 5 frees it.
    assert_eq!(t.ct.flush(Some(5), None), 3);
    assert_eq!(t.ct.zone_conns(5), 0);
    for i in 30..33 {
        assert_state!(t.st(&udp_from(i), &commit(5), 1), TRK | NEW);
    }
    assert_eq!(t.ct.zone_conns(5), 3);
    // Expiry frees everything.
    assert!(t.ct.sweep(3600 * SEC) >= 9);
    assert_eq!(t.ct.n_conns(), 0);
    for z in [5, 6, 9] {
        assert_eq!(t.ct.zone_conns(z), 0, "zone {z}");
    }
}

/// A zone's own limit of 0 lets no connection in, whatever the default (OVS's userspace
/// datapath: `count >= limit` refuses); taking it away gives the zone the default again.
#[test]
fn a_zone_limit_of_zero_refuses_every_commit() {
    let mut t = Ct::new();
    t.ct.set_default_limit(10);
    t.ct.set_zone_limit(5, 0);
    for i in 0..3 {
        assert_state!(t.st(&udp_from(i), &commit(5), 0), TRK | NEW);
    }
    assert_eq!((t.ct.zone_conns(5), t.ct.n_conns()), (0, 0));
    assert_eq!(t.ct.stats().limit_refused, 3);
    assert_eq!(t.ct.stats().maxconns_refused, 0);
    assert_eq!(t.ct.zone_limit(5), Some(0));
    assert_eq!(t.ct.zone_limits(), vec![(5, 0)]);
    t.ct.del_zone_limit(5);
    assert_eq!(t.ct.zone_limit(5), None);
    assert_eq!(t.ct.zone_limits(), vec![]);
    assert_state!(t.st(&udp_from(0), &commit(5), 1), TRK | NEW);
    assert_eq!(t.ct.zone_conns(5), 1);
    // With no default either, the zone has no limit at all.
    t.ct.set_default_limit(0);
    for i in 1..20 {
        t.st(&udp_from(i), &commit(5), 1);
    }
    assert_eq!(t.ct.zone_conns(5), 20);
}

/// Re-committing a tuple whose connection expired but was not swept yet (a common case: a
/// flow that pauses longer than its timeout) overwrites both table keys of the old
/// connection (`insert`'s `put` replaces an expired entry without counting it out), so no
/// later sweep ever finds it: `n_conns` and the zone count leak one per occurrence, until the
/// limits refuse everything.
#[test]
fn no_count_leak_when_recommitting_after_expiry() {
    let mut t = Ct::new();
    t.st(&udp_ab(), &commit(5), 0);
    // Expired at 60 s; the same flow comes back before any sweep.
    assert_state!(t.st(&udp_ab(), &commit(5), 61 * SEC), TRK | NEW);
    assert_eq!(
        t.dump(61 * SEC).len(),
        1,
        "committed again (the old one no longer counts)"
    );
    assert_counts(&t.ct, 61 * SEC);
    t.ct.sweep(1000 * SEC);
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(5)), (0, 0), "leaked");
    assert_eq!(t.ct.stats().expired, 2);
}

/// A swept connection frees its place under the global limit.
#[test]
fn sweep_frees_global_limit() {
    let mut t = Ct::new();
    t.ct.set_maxconns(1);
    t.st(&udp_from(1), &commit(0), 0);
    t.ct.sweep(61 * SEC);
    assert_state!(t.st(&udp_from(2), &commit(0), 61 * SEC), TRK | NEW);
    assert_eq!(t.dump(61 * SEC).len(), 1);
}

// ---------------------------------------------------------------------------------------------
// NAT
// ---------------------------------------------------------------------------------------------

fn v4(k: [u8; 16]) -> [u8; 4] {
    k[..4].try_into().unwrap()
}

/// §2: SNAT to an address range with a port range. The committing packet and later original
/// packets are rewritten to (address, port) from the ranges; the reply (addressed to the
/// translation) is rewritten back; `+snat` on all of them under `ct(nat)`; without `nat` the
/// packet is tracked but not translated.
#[test]
fn snat_address_and_port_range() {
    let mut t = Ct::new();
    let src = ip("10.1.1.1");
    let dst = ip("10.1.1.2");
    let spec = snat("10.1.1.100", "10.1.1.101", 20000, 20010);
    let orig = build(src, dst, &udp(51001, 9001, b"q"));
    let (md, rw) = t.run(&orig, &with_nat(commit(5), spec), 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    let rw = rw.expect("a rewrite");
    assert_eq!(rw.dst, None);
    let (n, np) = rw.src.unwrap();
    assert!([[10, 1, 1, 100], [10, 1, 1, 101]].contains(&v4(n)), "{n:?}");
    assert!((20000..=20010).contains(&np), "{np}");
    assert_eq!(
        md.orig,
        tuple(UDP, src, 51001, dst, 9001, 5),
        "ct_orig is pre-NAT"
    );
    let d = t.dump(0);
    assert_eq!(d[0].orig, tuple(UDP, src, 51001, dst, 9001, 5));
    assert_eq!(d[0].reply, tuple(UDP, dst, 9001, Ip::V4(v4(n)), np, 5));
    // The reply, to the translated address.
    let reply = build(dst, Ip::V4(v4(n)), &udp(9001, np, b"r"));
    let (md, rw) = t.run(&reply, &with_nat(track(5), nat_only()), 1);
    assert_state!(md.state, TRK | EST | RPL | SNAT);
    assert_eq!(
        rw,
        Some(NatRewrite {
            src: None,
            dst: Some((src.key(), 51001)),
            alg: None,
            icmp_error: false
        })
    );
    // Original direction again.
    let (md, rw) = t.run(&orig, &with_nat(track(5), nat_only()), 2);
    assert_state!(md.state, TRK | EST | SNAT);
    assert_eq!(
        rw,
        Some(NatRewrite {
            src: Some((n, np)),
            dst: None,
            alg: None,
            icmp_error: false
        })
    );
    // Without nat: tracked, not translated, no +snat.
    let (md, rw) = t.run(&orig, &track(5), 3);
    assert_state!(md.state, TRK | EST);
    assert_eq!(rw, None);
    // The untranslated reply (to the real source) is another flow.
    let raw_reply = build(dst, src, &udp(9001, 51001, b"r"));
    assert_state!(t.st(&raw_reply, &track(5), 4), TRK | NEW);
}

/// §2: DNAT of a TCP connection to `10.1.1.2:8001`; the reply from the real server is
/// translated back to the address the client used.
#[test]
fn dnat_tcp() {
    let mut t = Ct::new();
    let c = ip("10.1.1.1");
    let vip = ip("10.1.1.200");
    let srv = ip("10.1.1.2");
    let args = CtArgs {
        mark: Some((u32::MAX, u32::MAX)),
        label: Some((1u128 << 127 | 1, u128::MAX)),
        ..with_nat(commit(5), dnat("10.1.1.2", "10.1.1.2", 8001, 8001))
    };
    let syn = build(c, vip, &tcp(42001, 80, "S", 1000, 0, 8192));
    let (md, rw) = t.run(&syn, &args, 0);
    assert_state!(md.state, TRK | NEW | DNAT);
    assert_eq!(
        rw,
        Some(NatRewrite {
            src: None,
            dst: Some((srv.key(), 8001)),
            alg: None,
            icmp_error: false
        })
    );
    let d = t.dump(0);
    assert_eq!(d[0].reply, tuple(TCP, srv, 8001, c, 42001, 5));
    let synack = build(srv, c, &tcp(8001, 42001, "SA", 5000, 1001, 8192));
    let (md, rw) = t.run(&synack, &with_nat(track(5), nat_only()), 1);
    assert_state!(md.state, TRK | EST | RPL | DNAT);
    assert_eq!(
        rw,
        Some(NatRewrite {
            src: Some((vip.key(), 80)),
            dst: None,
            alg: None,
            icmp_error: false
        })
    );
    assert_eq!((md.mark, md.label), (u32::MAX, 1u128 << 127 | 1));
}

/// §2: SNAT to an address without ports keeps the source port when it is free; a second
/// client using the same port to the same server gets another port.
#[test]
fn snat_keeps_port_when_free() {
    let mut t = Ct::new();
    let spec = snat("10.1.1.100", "10.1.1.100", 0, 0);
    let c1 = build(ip("10.1.1.1"), b(), &tcp(41002, 8002, "S", 1, 0, 100));
    let (_, rw) = t.run(&c1, &with_nat(commit(5), spec), 0);
    assert_eq!(rw.unwrap().src, Some((ip("10.1.1.100").key(), 41002)));
    let c2 = build(ip("10.1.1.3"), b(), &tcp(41002, 8002, "S", 1, 0, 100));
    let (md, rw) = t.run(&c2, &with_nat(commit(5), spec), 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    let (n, p) = rw.unwrap().src.unwrap();
    assert_eq!(v4(n), [10, 1, 1, 100]);
    assert_ne!(p, 41002);
    assert!(p >= 1024);
    let d = t.dump(0);
    assert_ne!(d[0].reply, d[1].reply);
    assert_eq!(t.ct.n_conns(), 2);
}

/// A tiny range, 1 address and 2 ports, and 3 connections: the third is refused
/// (`nat_exhausted`, `+inv`), without leaking counts; the first two keep working.
#[test]
fn nat_exhaustion_tiny_range() {
    let mut t = Ct::new();
    let spec = snat("10.1.1.100", "10.1.1.100", 20000, 20001);
    let mut ports = Vec::new();
    for i in 0..2u16 {
        let f = build(ip("10.1.1.1"), b(), &udp(40000 + i, 53, b"q"));
        let (md, rw) = t.run(&f, &with_nat(commit(5), spec), 0);
        assert_state!(md.state, TRK | NEW | SNAT);
        ports.push(rw.unwrap().src.unwrap().1);
    }
    ports.sort();
    assert_eq!(ports, vec![20000, 20001]);
    let f = build(ip("10.1.1.1"), b(), &udp(40002, 53, b"q"));
    let (md, rw) = t.run(&f, &with_nat(commit(5), spec), 0);
    assert_state!(md.state, TRK | INV);
    assert_eq!(rw, None);
    assert_eq!(t.ct.stats().nat_exhausted, 1);
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(5)), (2, 2));
    assert_eq!(t.dump(0).len(), 2);
    t.ct.flush(None, None);
    assert_eq!((t.ct.n_conns(), t.ct.zone_conns(5)), (0, 0));
    // Freed: the third gets in.
    let (md, _) = t.run(&f, &with_nat(commit(5), spec), 1);
    assert_state!(md.state, TRK | NEW | SNAT);
}

/// A port range of 2 where the source port is the range's first port: the second client with
/// that same port must get the other port of the range. `nat_pick` tries "the original port on
/// every address" as candidates 0..n_addr and then *skips* candidates 0..n_addr of the
/// address/port walk, which for one address is the walk's first port: when the hash puts
/// that at the original port, port 20001 is never tried and the commit fails although it is
/// free. Several clients, so that some hash lands on it.
#[test]
fn nat_small_port_range_finds_the_free_port() {
    let spec = snat("10.1.1.100", "10.1.1.100", 20000, 20001);
    let mut failed = Vec::new();
    for i in 2..34u8 {
        let mut t = Ct::new();
        let first = build(ip("10.1.1.1"), b(), &udp(20000, 53, b"q"));
        let (_, rw) = t.run(&first, &with_nat(commit(5), spec), 0);
        assert_eq!(rw.unwrap().src.unwrap().1, 20000, "kept: free and in range");
        let second = build(ip(&format!("10.1.1.{i}")), b(), &udp(20000, 53, b"q"));
        let (md, rw) = t.run(&second, &with_nat(commit(5), spec), 0);
        if md.state & INV != 0 {
            failed.push(i);
        } else {
            assert_eq!(rw.unwrap().src.unwrap().1, 20001);
        }
    }
    assert!(
        failed.is_empty(),
        "clients 10.1.1.{failed:?} found no port although 20001 was free"
    );
}

/// DNAT to an address without a port, when two connections would get the same reply tuple
/// (the same client port to two virtual IPs with the same backend): OVS keeps the service
/// port and changes the *source* port (`nat_get_unique_tuple`: "tries to find a source port in
/// the ephemeral range"). The table's fallback walks the ephemeral range on the DNAT side,
/// i.e. rewrites the destination to a random port of the backend.
#[test]
fn dnat_conflict_keeps_service_port() {
    let mut t = Ct::new();
    let c = ip("10.1.1.1");
    let spec = dnat("10.1.1.2", "10.1.1.2", 0, 0);
    let s1 = build(c, ip("10.1.1.200"), &tcp(5000, 80, "S", 1, 0, 100));
    let (_, rw) = t.run(&s1, &with_nat(commit(5), spec), 0);
    assert_eq!(rw.unwrap().dst, Some((ip("10.1.1.2").key(), 80)));
    let s2 = build(c, ip("10.1.1.201"), &tcp(5000, 80, "S", 1, 0, 100));
    let (md, rw) = t.run(&s2, &with_nat(commit(5), spec), 0);
    assert_state!(md.state & !SNAT, TRK | NEW | DNAT);
    let rw = rw.unwrap();
    assert_eq!(
        rw.dst,
        Some((ip("10.1.1.2").key(), 80)),
        "the backend's service port"
    );
}

/// ICMP behind SNAT: two hosts pinging the same server with the same echo id through one
/// address. OVS translates the ICMP id like a port (`pat_proto` includes ICMP,
/// `nat_get_unique_l4` with `peer_port`); the table never changes the id, so the second ping
/// has no free tuple and is refused.
#[test]
fn snat_icmp_same_id_two_hosts() {
    let mut t = Ct::new();
    let spec = snat("10.1.1.100", "10.1.1.100", 0, 0);
    let p1 = build(ip("10.1.1.1"), b(), &echo(8, 7, 1));
    let p2 = build(ip("10.1.1.3"), b(), &echo(8, 7, 1));
    assert_state!(
        t.run(&p1, &with_nat(commit(5), spec), 0).0.state,
        TRK | NEW | SNAT
    );
    let (md, _) = t.run(&p2, &with_nat(commit(5), spec), 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    assert_eq!(t.ct.stats().nat_exhausted, 0);
    assert_eq!(t.ct.n_conns(), 2);
}

/// `ct(nat)` (no range) on a connection committed without NAT does nothing; `ct(commit,nat)`
/// without a kind commits plainly; `nat(src=..)` on an existing connection does not add a
/// translation.
#[test]
fn nat_without_range_is_a_no_op() {
    let mut t = Ct::new();
    let (md, rw) = t.run(&udp_ab(), &with_nat(commit(5), nat_only()), 0);
    assert_state!(md.state, TRK | NEW);
    assert_eq!(rw, None);
    assert_eq!(t.ct.n_conns(), 1);
    let (md, rw) = t.run(&udp_ba(), &with_nat(track(5), nat_only()), 1);
    assert_state!(md.state, TRK | EST | RPL);
    assert_eq!(rw, None);
    let later = with_nat(commit(5), snat("10.1.1.100", "10.1.1.100", 0, 0));
    let (md, rw) = t.run(&udp_ab(), &later, 2);
    assert_state!(md.state, TRK | EST);
    assert_eq!(rw, None);
    assert_eq!(t.dump(2)[0].reply, tuple(UDP, b(), 4444, a(), 3333, 5));
}

/// `persistent`: the same source gets the same translated address, whatever its ports and
/// destination.
#[test]
fn nat_persistent_same_address_for_same_source() {
    let mut t = Ct::new();
    let spec = NatSpec {
        persistent: true,
        ..snat("10.5.0.0", "10.5.0.255", 0, 0)
    };
    let mut addrs = std::collections::BTreeSet::new();
    for i in 0..40u16 {
        let f = build(
            ip("10.1.1.1"),
            ip(&format!("10.9.0.{}", i % 7)),
            &udp(30000 + i, 53 + i, b"q"),
        );
        let (_, rw) = t.run(&f, &with_nat(commit(5), spec), 0);
        addrs.insert(v4(rw.unwrap().src.unwrap().0));
    }
    assert_eq!(addrs.len(), 1, "{addrs:?}");
    // Different sources spread over the range.
    let mut others = std::collections::BTreeSet::new();
    for i in 2..40u8 {
        let f = build(ip(&format!("10.1.1.{i}")), b(), &udp(30000, 53, b"q"));
        let (_, rw) = t.run(&f, &with_nat(commit(5), spec), 0);
        others.insert(v4(rw.unwrap().src.unwrap().0));
    }
    assert!(others.len() > 1);
}

/// IPv6 SNAT (§2): `fc00::100`.
#[test]
fn snat_ipv6() {
    let mut t = Ct::new();
    let spec = snat("fc00::100", "fc00::100", 0, 0);
    let f = build(ip("fc00::1"), ip("fc00::2"), &udp(51012, 9002, b"q"));
    let (md, rw) = t.run(&f, &with_nat(commit(5), spec), 0);
    assert_state!(md.state, TRK | NEW | SNAT);
    assert_eq!(rw.unwrap().src, Some((ip("fc00::100").key(), 51012)));
    let r = build(ip("fc00::2"), ip("fc00::100"), &udp(9002, 51012, b"r"));
    let (md, rw) = t.run(&r, &with_nat(track(5), nat_only()), 1);
    assert_state!(md.state, TRK | EST | RPL | SNAT);
    assert_eq!(rw.unwrap().dst, Some((ip("fc00::1").key(), 51012)));
}

/// A second `ct()` in the same zone after the packet was translated (e.g. `ct(commit,nat(..))`
/// then `ct(commit,exec(set_field:..->ct_label))`, as OVN pipelines do). OVS finds the
/// connection from the translated packet (`initial_conn_lookup` with `natted`: looks up the
/// reversed key and flips the direction). The table ignores the state the packet carries and
/// looks up the translated tuple, which is no key: the packet is `+new`, loses the mark, and
/// with commit a second, bogus connection is created.
#[test]
fn second_ct_after_nat_finds_the_connection() {
    let mut t = Ct::new();
    let args = CtArgs {
        mark: Some((7, u32::MAX)),
        ..with_nat(commit(5), snat("10.1.1.100", "10.1.1.100", 20000, 20000))
    };
    let mut md = CtMeta::default();
    let rw =
        t.ct.process(&mut t.cache, &packet(&udp_ab()), &mut md, &args, 0)
            .unwrap();
    let (n, np) = rw.src.unwrap();
    // The packet after the rewrite, carrying its metadata into the next ct().
    let natted = build(Ip::V4(v4(n)), b(), &udp(np, 4444, b"a"));
    // The datapath says so when the packet's state has +snat/+dnat in the same zone.
    assert_ne!(md.state & (SNAT | DNAT), 0);
    let pkt = CtPacket {
        verified: true,
        natted: true,
        ..packet(&natted)
    };
    t.ct.process(&mut t.cache, &pkt, &mut md, &commit(5), 1);
    assert_eq!(t.ct.n_conns(), 1, "{:?}", t.dump(1));
    assert_eq!(md.mark, 7);
    assert_eq!(md.orig, tuple(UDP, a(), 3333, b(), 4444, 5));
}
