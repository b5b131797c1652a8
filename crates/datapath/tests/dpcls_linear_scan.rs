//! The megaflow classifier against a linear scan over the installed megaflows, and its ranking.
//!
//! Masks are drawn over a pool of fields that spans the whole key (metadata, the first cache
//! line's packet fields, IPv6 and conntrack words, GENEVE option bytes in the last words), keys
//! from a small alphabet so that random keys hit often, and megaflows are kept non-overlapping
//! (the datapath's invariant) by rejecting any candidate that overlaps one already installed.

use datapath::dpcls::{Dpcls, Exists};
use flow::key::{FIELDS, GENEVE_OPTS_OFS};
use flow::{FlowKey, Mask, Match};
use proptest::prelude::*;

/// Byte ranges (offset, length) of the fields masks and keys use.
fn field_pool() -> Vec<(usize, usize)> {
    let named = [
        "in_port",
        "recirc_id",
        "eth_dst",
        "eth_type",
        "vlan_tci",
        "nw_src",
        "nw_dst",
        "tp_src",
        "tp_dst",
        "nw_proto",
        "nw_frag",
        "tun_id",
        "tun_ipv4_dst",
        "pkt_mark",
        "ct_state",
        "ct_zone",
        "ipv6_src",
        "ipv6_dst",
        "ct_label",
        "tun_ipv6_dst",
        "ct_tp_dst",
    ];
    let mut pool: Vec<(usize, usize)> = named
        .iter()
        .map(|n| {
            let d = FIELDS.iter().find(|d| d.name == *n).unwrap();
            (d.offset, d.len)
        })
        .collect();
    // GENEVE option bytes: words 32/33 (straddling), 45 and 63 (the key's last word).
    pool.extend([
        (GENEVE_OPTS_OFS, 8),
        (GENEVE_OPTS_OFS + 100, 4),
        (GENEVE_OPTS_OFS + 248, 4),
    ]);
    pool
}

/// A small deterministic generator for the structures proptest seeds.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A random key: each pool field present with some probability, with one of four values.
fn random_key(rng: &mut Rng, pool: &[(usize, usize)]) -> FlowKey {
    let mut k = FlowKey::new();
    // nw_dst, which every mask uses, from a space of 2^16 addresses.
    if rng.chance(95) {
        k.set_nw_dst(
            [
                rng.below(16) as u8,
                rng.below(16) as u8,
                rng.below(16) as u8,
                rng.below(16) as u8,
            ]
            .into(),
        );
    }
    for &(ofs, len) in pool {
        match rng.below(10) {
            // Absent.
            0..=3 => {}
            // Present, explicitly zero.
            4 => k.set_bytes_at(ofs, &vec![0; len]),
            _ => {
                let v = [0x01, 0x80, 0xff, 0x5a][rng.below(4)];
                let mut b = vec![v; len];
                b[len - 1] = rng.below(3) as u8;
                k.set_bytes_at(ofs, &b);
            }
        }
    }
    k
}

/// A random mask: some bits of nw_dst (as routes do, so that megaflows of different masks can
/// differ there and not overlap) and 0 to 3 pool fields, each exact, a prefix, or a few bits.
fn random_mask(rng: &mut Rng, pool: &[(usize, usize)]) -> Mask {
    let mut m = Mask::new();
    let dst = match rng.below(6) {
        4 => 0xff00_ff00,
        5 => 0x0f0f_0f0f,
        p => u32::MAX << (24 - 8 * p),
    };
    m.set_nw_dst(dst.into());
    for _ in 0..rng.below(4) {
        let (ofs, len) = pool[rng.below(pool.len())];
        let mut b = vec![0xffu8; len];
        match rng.below(4) {
            0 => {}
            1 => {
                let keep = 1 + rng.below(len);
                b[keep..].fill(0);
                b[keep - 1] = 0xf0;
            }
            2 => b.fill(0x81),
            _ => b[len - 1] = 0x03,
        }
        m.set_bytes_at(ofs, &b);
    }
    m
}

/// Whether some key matches both megaflows.
fn overlap(a: &Match, b: &Match) -> bool {
    let map = a.mask().map() & b.mask().map();
    (0..64)
        .filter(|i| map & (1 << i) != 0)
        .all(|i| (a.key().word(i) ^ b.key().word(i)) & a.mask().word(i) & b.mask().word(i) == 0)
}

/// `key` with the bits `m` matches replaced by `m`'s: a key that hits `m`.
fn force_match(key: &FlowKey, m: &Match) -> FlowKey {
    let mut k = key.clone();
    let mut bits = m.mask().map();
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let mw = m.mask().word(i);
        k.set_word(i, (key.word(i) & !mw) | m.key().word(i));
    }
    k
}

/// `crc32c_u64(0, CRC_ZERO) == 0`, and CRC32C without inversions is linear: XORing it (shifted)
/// into a fully masked word changes the masked words but not the subtable hash.
const CRC_ZERO: u64 = 0x1_05ec_76f1;

/// A key that hits `m` changed in one word `m` masks completely so that it hashes like a hit but
/// misses `m` (or `key` unchanged if `m` masks no whole word).
fn collide(key: &FlowKey, m: &Match, rng: &mut Rng) -> FlowKey {
    let hit = force_match(key, m);
    let full: Vec<usize> = (0..64).filter(|&i| m.mask().word(i) == u64::MAX).collect();
    if full.is_empty() {
        return hit;
    }
    let mut k = hit.clone();
    let i = full[rng.below(full.len())];
    let w = k.word(i) ^ (CRC_ZERO << rng.below(32));
    k.set_word(i, w);
    assert_eq!(k.hash_masked(m.mask(), 0), hit.hash_masked(m.mask(), 0));
    k
}

fn linear_scan(rules: &[(Match, u32)], key: &FlowKey) -> Option<u32> {
    let mut hits = rules.iter().filter(|(m, _)| m.matches(key));
    let hit = hits.next().map(|(_, f)| *f);
    assert!(hits.next().is_none(), "megaflows overlap");
    hit
}

/// Every lookup path agrees with the linear scan for `probes`.
fn check(
    cls: &mut Dpcls<u32>,
    rules: &[(Match, u32)],
    probes: &[FlowKey],
    rng: &mut Rng,
) -> Result<(), TestCaseError> {
    let want: Vec<Option<u32>> = probes.iter().map(|p| linear_scan(rules, p)).collect();
    for (p, w) in probes.iter().zip(&want) {
        prop_assert_eq!(cls.lookup(p), *w, "lookup of {:?}", p);
    }
    // Batches of random sizes, some longer than a burst.
    let mut start = 0;
    while start < probes.len() {
        let n = (1 + rng.below(70)).min(probes.len() - start);
        let refs: Vec<&FlowKey> = probes[start..start + n].iter().collect();
        let mut out = vec![Some(u32::MAX); n];
        let hits = cls.lookup_batch(&refs, &mut out);
        prop_assert_eq!(&out[..], &want[start..start + n]);
        prop_assert_eq!(hits, want[start..start + n].iter().flatten().count());
        start += n;
    }
    prop_assert_eq!(cls.len(), rules.len());
    let mut masks: Vec<&Mask> = rules.iter().map(|(m, _)| m.mask()).collect();
    masks.sort_by_key(|m| m.to_bytes());
    masks.dedup();
    prop_assert_eq!(
        cls.n_subtables(),
        masks.len(),
        "one subtable per mask in use"
    );
    Ok(())
}

fn probes(rng: &mut Rng, pool: &[(usize, usize)], rules: &[(Match, u32)]) -> Vec<FlowKey> {
    (0..200)
        .map(|_| {
            let k = random_key(rng, pool);
            if !rules.is_empty() && rng.chance(60) {
                let m = &rules[rng.below(rules.len())].0;
                if rng.chance(20) {
                    collide(&k, m, rng)
                } else {
                    force_match(&k, m)
                }
            } else {
                k
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn dpcls_equals_linear_scan(seed in 1u64.., n_masks in 1usize..=25, n_rules in 1usize..300) {
        let mut rng = Rng(seed);
        let pool = field_pool();
        let mut masks: Vec<Mask> = Vec::new();
        while masks.len() < n_masks {
            let m = random_mask(&mut rng, &pool);
            if !masks.contains(&m) {
                masks.push(m);
            }
        }
        let mut cls = Dpcls::new();
        let mut rules: Vec<(Match, u32)> = Vec::new();
        let mut next_flow = 0u32;
        let mut install = |cls: &mut Dpcls<u32>, rules: &mut Vec<(Match, u32)>, rng: &mut Rng| {
            let mask = &masks[rng.below(masks.len())];
            let m = Match::new(&random_key(rng, &pool), mask);
            if rules.iter().any(|(r, _)| overlap(r, &m)) {
                // Same match: the classifier must refuse it; otherwise skip the overlap.
                if let Some((_, f)) = rules.iter().find(|(r, _)| *r == m) {
                    assert_eq!(cls.insert(&m, *f), Err(Exists));
                }
                return;
            }
            next_flow += 1;
            cls.insert(&m, next_flow).unwrap();
            rules.push((m, next_flow));
        };
        for _ in 0..n_rules {
            install(&mut cls, &mut rules, &mut rng);
        }
        let ps = probes(&mut rng, &pool, &rules);
        check(&mut cls, &rules, &ps, &mut rng)?;

        // Re-rank (results must not depend on the order), remove about half, check again.
        cls.sort_subtables();
        let mut i = 0;
        while i < rules.len() {
            if rng.chance(50) {
                let (m, f) = rules.swap_remove(i);
                prop_assert_eq!(cls.remove(&m), Some(f));
                prop_assert_eq!(cls.remove(&m), None);
            } else {
                i += 1;
            }
        }
        let ps2 = probes(&mut rng, &pool, &rules);
        check(&mut cls, &rules, &ps, &mut rng)?;
        check(&mut cls, &rules, &ps2, &mut rng)?;

        // Install more into the surviving subtables and new ones, then remove everything.
        for _ in 0..n_rules / 2 {
            install(&mut cls, &mut rules, &mut rng);
        }
        cls.sort_subtables();
        let ps3 = probes(&mut rng, &pool, &rules);
        check(&mut cls, &rules, &ps3, &mut rng)?;
        for (m, f) in rules.drain(..) {
            prop_assert_eq!(cls.remove(&m), Some(f));
        }
        prop_assert!(cls.is_empty());
        prop_assert_eq!(cls.n_subtables(), 0);
        let s = cls.stats();
        prop_assert!(s.lookups >= s.hits);
    }
}

/// 20 subtables, one of them (installed last) gets every hit: one re-rank brings the average
/// subtable lookups per hit from 20 to about 1.
#[test]
fn ranking_brings_the_hot_subtable_first() {
    let mut cls = Dpcls::new();
    for j in 0..20u8 {
        // Mask j: eth_type and a /(8 + j) of nw_dst; rule j: (20 + j).0.0.0/(8 + j). The first
        // octets differ, so the megaflows do not overlap.
        let mut mask = Mask::new();
        let prefix = 8 + u32::from(j);
        mask.set_eth_type(0xffff)
            .set_nw_dst((u32::MAX << (32 - prefix)).into());
        let mut k = FlowKey::new();
        k.set_eth_type(0x0800).set_nw_dst([20 + j, 0, 0, 0].into());
        cls.insert(&Match::new(&k, &mask), u32::from(j)).unwrap();
    }
    assert_eq!(cls.n_subtables(), 20);
    // Keys in 39.0.0.0/27, the hot subtable's only rule.
    let keys: Vec<FlowKey> = (0..32u8)
        .map(|i| {
            let mut k = FlowKey::new();
            k.set_in_port(1)
                .set_eth_type(0x0800)
                .set_nw_src([10, 0, 0, 1].into())
                .set_nw_dst([39, 0, 0, i].into())
                .set_tp_src(1000 + u16::from(i));
            k
        })
        .collect();
    let refs: Vec<&FlowKey> = keys.iter().collect();
    let mut out = vec![None; refs.len()];
    let run = |cls: &mut Dpcls<u32>, out: &mut Vec<Option<u32>>| {
        for _ in 0..10 {
            assert_eq!(cls.lookup_batch(&refs, out), 32);
            assert!(out.iter().all(|o| *o == Some(19)));
            for k in &keys {
                assert_eq!(cls.lookup(k), Some(19));
            }
        }
    };

    run(&mut cls, &mut out);
    let before = cls.stats();
    assert_eq!(before.hits, 640);
    assert_eq!(before.lookups_per_hit(), 20.0, "hot subtable ranked last");

    cls.sort_subtables();
    cls.clear_stats();
    let first = cls.subtables().next().unwrap();
    assert_eq!((first.rules, first.hits), (1, 0), "hit counts reset");
    run(&mut cls, &mut out);
    let after = cls.stats();
    assert_eq!(after.hits, 640);
    assert!(
        after.lookups_per_hit() <= 1.05,
        "avg. subtable lookups per hit {} after sorting",
        after.lookups_per_hit()
    );

    // A subtable without hits in an interval keeps its place among the others (stable sort).
    let order: Vec<u64> = cls.subtables().map(|s| s.map).collect();
    cls.sort_subtables();
    assert_eq!(cls.subtables().map(|s| s.map).collect::<Vec<_>>(), order);
}
