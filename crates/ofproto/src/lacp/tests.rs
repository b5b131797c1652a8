use super::*;

fn lacp(id: u8, active: bool) -> Lacp {
    let s = Settings {
        active,
        sys_id: EthAddr([2, 0, 0, 0, 0, id]),
        sys_priority: 65534,
        fast: true,
        fallback_ab: false,
    };
    let mut l = Lacp::new("bond0", s);
    let now = Instant::now();
    for (n, p) in [("p1", 1), ("p2", 2)] {
        let ms = MemberSettings {
            port_id: p,
            port_priority: 65535,
            key: 0,
        };
        l.register(n, ms, now);
        let i = l.member_index(n).unwrap();
        l.may_enable(i);
    }
    l
}

/// Delivers `from`'s PDUs to `to`, member for member.
fn deliver(txs: &[Tx], to: &mut Lacp, now: Instant) {
    for t in txs {
        let p = pdu::encode(&t.actor, &t.partner);
        to.receive(t.member, &p, now);
    }
}

#[test]
fn an_active_bond_starts_expired_then_defaults() {
    let mut a = lacp(1, true);
    let t0 = Instant::now();
    let tx = a.run(t0);
    assert_eq!(tx.len(), 2);
    assert_eq!(a.members[0].status, Status::Expired);
    assert!(a.negotiated && a.members[0].attached);
    assert!(!a.may_enable(0));
    let later = t0 + Duration::from_secs(4);
    a.run(later);
    assert_eq!(a.members[0].status, Status::Defaulted);
    assert!(!a.negotiated);
    assert_eq!(a.members[0].stats.link_defaulted, 1);
    let text = show::details(&a);
    assert!(text.contains("member: p1: defaulted detached\n"), "{text}");
}

#[test]
fn two_systems_negotiate_and_enable_their_members() {
    let mut a = lacp(1, true);
    let mut b = lacp(2, false);
    let mut now = Instant::now();
    for _ in 0..4 {
        let ta = a.run(now);
        deliver(&ta, &mut b, now);
        let tb = b.run(now);
        deliver(&tb, &mut a, now);
        now += Duration::from_millis(100);
    }
    for l in [&mut a, &mut b] {
        assert!(l.negotiated);
        for i in 0..2 {
            assert_eq!(l.members[i].status, Status::Current);
            assert!(l.may_enable(i), "{}", show::details(l));
            assert!(l.is_current(i));
        }
    }
    assert_eq!(a.members[0].partner.sys_id, EthAddr([2, 0, 0, 0, 0, 2]));
    let text = show::details(&a);
    assert!(text.contains("  status: active negotiated\n"), "{text}");
    assert!(text.contains("member: p2: current attached\n"), "{text}");
    assert!(
        text.contains(
            "  actor state: activity timeout aggregation synchronized collecting distributing\n"
        ),
        "{text}"
    );
}

#[test]
fn bad_and_marker_pdus_are_counted_and_ignored() {
    let mut a = lacp(1, true);
    let now = Instant::now();
    assert!(!a.receive(0, &[1, 1, 1], now));
    let mut p = pdu::encode(&a.actor(1), &Info::default());
    p[3] = 21;
    assert!(!a.receive(0, &p, now));
    p[0] = 2;
    assert!(!a.receive(0, &p, now));
    let s = a.members[0].stats;
    assert_eq!((s.rx, s.rx_bad, s.rx_marker), (3, 2, 1));
    assert!(show::stats(&a).contains("  RX Bad PDUs: 2\n"));
}

#[test]
fn a_pdu_from_ourselves_is_a_loop() {
    let mut a = lacp(1, true);
    let now = Instant::now();
    let tx = a.run(now);
    deliver(&tx, &mut a, now);
    a.run(now);
    assert!(!a.members[0].attached && !a.members[1].attached);
    assert!(!a.may_enable(0));
}

#[test]
fn fallback_ab_attaches_defaulted_members() {
    let mut a = lacp(1, true);
    let mut s = a.settings.clone();
    s.fallback_ab = true;
    a.configure(s);
    let t = Instant::now() + Duration::from_secs(4);
    a.run(Instant::now());
    a.run(t);
    assert_eq!(a.members[0].status, Status::Defaulted);
    assert!(a.may_enable(0) && !a.negotiated);
}
