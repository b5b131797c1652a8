use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::*;
use crate::classifier::props::perturb;
use crate::pipekey::PipeMatch;

/// A test rule: its conjunction clauses (empty for an ordinary rule) and a name.
#[derive(Clone, Debug)]
struct R(Vec<(u32, u8, u8)>, &'static str);

impl Conjunctive for R {
    fn clauses(&self, f: &mut dyn FnMut(u32, u8, u8)) -> bool {
        for &(id, k, n) in &self.0 {
            f(id, k, n);
        }
        !self.0.is_empty()
    }
}

fn src(a: [u8; 4]) -> PipeMatch {
    let (mut k, mut m) = (PipeKey::new(), PipeMask::new());
    k.dp.set_eth_type(0x0800).set_nw_src(Ipv4Addr::from(a));
    m.dp.set_eth_type(0xffff).set_nw_src(Ipv4Addr::BROADCAST);
    PipeMatch::new(&k, &m)
}

fn dport(p: u16) -> PipeMatch {
    let (mut k, mut m) = (PipeKey::new(), PipeMask::new());
    k.dp.set_eth_type(0x0800).set_nw_proto(6).set_tp_dst(p);
    m.dp.set_eth_type(0xffff)
        .set_nw_proto(0xff)
        .set_tp_dst(0xffff);
    PipeMatch::new(&k, &m)
}

fn conj_id(id: u32) -> PipeMatch {
    let (mut k, mut m) = (PipeKey::new(), PipeMask::new());
    k.meta.conj_id = id;
    m.meta.conj_id = u32::MAX;
    k.dp.set_eth_type(0x0800);
    m.dp.set_eth_type(0xffff);
    PipeMatch::new(&k, &m)
}

fn packet(s: [u8; 4], proto: u8, dport: u16) -> PipeKey {
    let mut k = PipeKey::new();
    k.dp.set_eth_type(0x0800)
        .set_nw_src(Ipv4Addr::from(s))
        .set_nw_dst(Ipv4Addr::new(10, 0, 0, 9))
        .set_nw_proto(proto)
        .set_tp_src(5555)
        .set_tp_dst(dport);
    k
}

/// OVN's shape: `ip4.src in {10.0.0.1, 10.0.0.2} && tcp.dst in {22, 443}`.
fn acl() -> Classifier<R> {
    let mut c = Classifier::new();
    c.insert(src([10, 0, 0, 1]), 100, R(vec![(7, 0, 2)], "src1"));
    c.insert(src([10, 0, 0, 2]), 100, R(vec![(7, 0, 2)], "src2"));
    c.insert(dport(22), 100, R(vec![(7, 1, 2)], "22"));
    c.insert(dport(443), 100, R(vec![(7, 1, 2)], "443"));
    c.insert(conj_id(7), 100, R(vec![], "allow"));
    c.insert(PipeMatch::catchall(), 0, R(vec![], "miss"));
    c
}

fn name(c: &Classifier<R>, key: &PipeKey) -> (&'static str, PipeMask) {
    let mut k = key.clone();
    let mut wc = PipeMask::new();
    let id = c.lookup_conjunctive(&mut k, &mut wc);
    assert_eq!(k, *key, "the key is restored");
    (id.map_or("none", |id| c.get(id).unwrap().2.1), wc)
}

#[test]
fn complete_conjunction_matches_the_conj_id_flow() {
    let c = acl();
    assert_eq!(name(&c, &packet([10, 0, 0, 1], 6, 22)).0, "allow");
    assert_eq!(name(&c, &packet([10, 0, 0, 2], 6, 443)).0, "allow");
    // One clause only: lookup goes on at lower priorities.
    assert_eq!(name(&c, &packet([10, 0, 0, 3], 6, 22)).0, "miss");
    assert_eq!(name(&c, &packet([10, 0, 0, 1], 6, 80)).0, "miss");
    assert_eq!(name(&c, &packet([10, 0, 0, 1], 17, 22)).0, "miss");
}

#[test]
fn a_conjunction_flow_alone_never_matches_and_hard_matches_outrank_lower_soft_ones() {
    let mut c = acl();
    c.insert(PipeMatch::catchall(), 200, R(vec![], "high"));
    assert_eq!(name(&c, &packet([10, 0, 0, 1], 6, 22)).0, "high");
    let mut c = Classifier::new();
    c.insert(src([10, 0, 0, 1]), 100, R(vec![(1, 0, 2)], "clause"));
    assert_eq!(name(&c, &packet([10, 0, 0, 1], 6, 22)).0, "none");
    // The classifier's plain lookup sees the clause as a rule, as a dump does.
    assert!(
        c.lookup(&packet([10, 0, 0, 1], 6, 22), &mut PipeMask::new())
            .is_some()
    );
}

#[test]
fn a_lower_priority_rule_with_the_same_match_takes_over() {
    let mut c = Classifier::new();
    c.insert(src([10, 0, 0, 1]), 100, R(vec![(1, 0, 2)], "clause"));
    c.insert(src([10, 0, 0, 1]), 50, R(vec![], "same match"));
    c.insert(PipeMatch::catchall(), 10, R(vec![], "low"));
    assert_eq!(name(&c, &packet([10, 0, 0, 1], 6, 22)).0, "same match");
    assert_eq!(name(&c, &packet([10, 0, 0, 2], 6, 22)).0, "low");
}

#[test]
fn one_flow_in_several_conjunctions_and_wide_ones() {
    let mut c = Classifier::new();
    // One flow in two conjunctions.
    c.insert(src([10, 0, 0, 1]), 100, R(vec![(1, 0, 2), (2, 0, 2)], "a"));
    c.insert(dport(22), 100, R(vec![(2, 1, 2)], "b"));
    c.insert(conj_id(1), 100, R(vec![], "one"));
    c.insert(conj_id(2), 100, R(vec![], "two"));
    assert_eq!(name(&c, &packet([10, 0, 0, 1], 6, 22)).0, "two");
    // A 64-clause conjunction needs 64 soft matches at its priority before it is considered.
    let mut c = Classifier::new();
    c.insert(src([10, 0, 0, 1]), 100, R(vec![(3, 5, 64)], "a"));
    c.insert(dport(22), 100, R(vec![(3, 6, 64)], "b"));
    c.insert(conj_id(3), 100, R(vec![], "sixty-four"));
    assert_eq!(name(&c, &packet([10, 0, 0, 1], 6, 22)).0, "none");
}

#[test]
fn wildcards_cover_every_clause_consulted() {
    let c = acl();
    let (n, wc) = name(&c, &packet([10, 0, 0, 1], 6, 22));
    assert_eq!(n, "allow");
    assert_eq!(wc.dp.nw_src(), Ipv4Addr::BROADCAST);
    assert_eq!(wc.dp.tp_dst(), 0xffff);
    // A UDP packet misses the port clauses at nw_proto: the port is not consulted.
    let (n, wc) = name(&c, &packet([10, 0, 0, 1], 17, 22));
    assert_eq!(n, "miss");
    assert_eq!(wc.dp.tp_dst(), 0);
}

fn addr() -> impl Strategy<Value = [u8; 4]> {
    prop_oneof![
        Just([10, 0, 0, 1]),
        Just([10, 0, 0, 2]),
        Just([10, 0, 0, 3])
    ]
}

fn port() -> impl Strategy<Value = u16> {
    prop_oneof![Just(22u16), Just(80), Just(443)]
}

/// A rule: (kind, value, priority, conjunction id, clause, n_clauses): kind 0 a source
/// clause, 1 a port clause, 2 a conj_id flow, 3 an ordinary rule on the source.
fn rule() -> impl Strategy<Value = (u8, [u8; 4], u16, u16, u32, u8)> {
    (
        0u8..4,
        addr(),
        port(),
        prop_oneof![Just(10u16), Just(20), Just(30)],
        1u32..3,
        0u8..2,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the rules, every key that agrees with the looked-up key on the consulted
    /// bits gets the same answer: megaflows built from the wildcards are correct.
    #[test]
    fn conjunctive_wildcards_are_sound(
        rules in proptest::collection::vec(rule(), 1..12),
        keys in proptest::collection::vec((addr(), prop_oneof![Just(6u8), Just(17)], port(), addr(), port()), 1..8),
    ) {
        let mut c = Classifier::new();
        for (kind, a, p, prio, id, k) in rules {
            let (m, r) = match kind {
                0 => (src(a), R(vec![(id, k, 2)], "s")),
                1 => (dport(p), R(vec![(id, k, 2)], "p")),
                2 => (conj_id(id), R(vec![], "c")),
                _ => (src(a), R(vec![], "h")),
            };
            if c.find_exact(&m, prio).is_none() {
                c.insert(m, prio, r);
            }
        }
        for (a, proto, p, na, np) in keys {
            let key = packet(a, proto, p);
            let mut k = key.clone();
            let mut wc = PipeMask::new();
            let got = c.lookup_conjunctive(&mut k, &mut wc);
            let other = perturb(&key, &wc, &packet(na, if proto == 6 { 17 } else { 6 }, np));
            let mut k2 = other.clone();
            prop_assert_eq!(c.lookup_conjunctive(&mut k2, &mut PipeMask::new()), got);
        }
    }
}
