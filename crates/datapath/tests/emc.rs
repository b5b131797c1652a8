//! The exact-match cache: exactness under forced hash collisions, the insertion probability,
//! disabling, victim choice and invalidation.

use std::collections::HashMap;

use datapath::emc::{EMC_KEY_WORDS, Emc};
use flow::FlowKey;
use proptest::prelude::*;

fn udp_key(port: u32, dst: u8, sport: u16) -> FlowKey {
    let mut k = FlowKey::new();
    k.set_in_port(port)
        .set_eth_type(0x0800)
        .set_nw_src([10, 0, 0, 1].into())
        .set_nw_dst([10, 1, 0, dst].into())
        .set_nw_proto(17)
        .set_tp_src(sport)
        .set_tp_dst(2000);
    k
}

fn always<F: Copy + Default + PartialEq>() -> Emc<F> {
    let mut e = Emc::new();
    e.set_insert_inv_prob(1);
    e
}

/// Keys that differ from each other in small ways the compare must see: one bit of one word, a
/// word beyond the first cache line, an explicit zero word versus an absent one, the in_port.
fn key_pool() -> Vec<FlowKey> {
    let base = udp_key(1, 2, 1000);
    let mut pool = vec![base.clone()];
    let mut k = base.clone();
    k.set_tp_src(1001);
    pool.push(k);
    let mut k = base.clone();
    k.set_in_port(2);
    pool.push(k);
    let mut k = base.clone();
    k.set_ipv6_label(0);
    pool.push(k); // explicit zero word 13
    let mut k = base.clone();
    k.set_ipv6_label(1);
    pool.push(k);
    let mut k = base.clone();
    k.set_ct_tp_dst(443);
    pool.push(k); // word 32
    let mut k = base.clone();
    k.set_tun_geneve_opt_bytes(240, &[1, 2, 3, 4]);
    pool.push(k); // word 62
    let mut k = base.clone();
    k.set_nw_dst([10, 1, 0, 3].into());
    pool.push(k);
    pool.push(FlowKey::new()); // no words at all
    let mut k = FlowKey::new();
    k.set_in_port(0);
    pool.push(k); // one zero word
    for (i, a) in pool.iter().enumerate() {
        for b in &pool[i + 1..] {
            assert!(!a.exact_eq(b), "pool keys must differ");
        }
    }
    pool
}

/// Hashes that share candidate slots (slot 0 = low 13 bits, slot 1 = next 13 bits), so keys
/// collide in slots and, with equal hashes, in the stored-hash check too.
const HASHES: [u32; 5] = [0, 1, 1 << 13, (1 << 13) | 1, 2 << 13];

#[derive(Clone, Debug)]
enum Op {
    Insert { key: usize, hash: usize, flow: u32 },
    Lookup { key: usize, hash: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..10, 0usize..HASHES.len(), 1u32..50).prop_map(|(key, hash, flow)| Op::Insert {
            key,
            hash,
            flow
        }),
        (0usize..10, 0usize..HASHES.len()).prop_map(|(key, hash)| Op::Lookup { key, hash }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Whatever is inserted under whatever (colliding) hashes, a lookup returns only the flow
    /// last inserted for exactly that key and hash, and an insert is visible right after.
    #[test]
    fn never_returns_another_keys_flow(ops in proptest::collection::vec(op(), 1..200)) {
        let pool = key_pool();
        let mut emc: Emc<u32> = always();
        let mut last: HashMap<(usize, usize), u32> = HashMap::new();
        for op in ops {
            match op {
                Op::Insert { key, hash, flow } => {
                    prop_assert!(emc.insert(&pool[key], HASHES[hash], flow));
                    last.insert((key, hash), flow);
                    prop_assert_eq!(emc.lookup(&pool[key], HASHES[hash], |_| true), Some(flow));
                }
                Op::Lookup { key, hash } => {
                    if let Some(f) = emc.lookup(&pool[key], HASHES[hash], |_| true) {
                        prop_assert_eq!(Some(&f), last.get(&(key, hash)));
                    }
                }
            }
            prop_assert!(emc.len() <= 3, "these hashes name three slots");
        }
    }
}

/// Keys whose CRC32C really collides: CRC32C without inversions is linear and
/// `crc32c_u64(0, 0x1_05ec_76f1) == 0`, so XORing that into a word keeps `FlowKey::hash`.
#[test]
fn real_hash_collisions_are_told_apart() {
    let k1 = udp_key(1, 2, 3);
    let mut emc: Emc<u32> = always();
    for word in [0, 3, 4] {
        for shift in [0, 20, 31] {
            let mut k2 = k1.clone();
            k2.set_word(word, k1.word(word) ^ (0x1_05ec_76f1 << shift));
            let h = k1.hash(0);
            assert_eq!(k2.hash(0), h);
            emc.clear();
            assert!(emc.insert(&k1, h, 1));
            assert_eq!(emc.lookup(&k2, h, |_| true), None);
            assert!(emc.insert(&k2, h, 2));
            assert_eq!(emc.lookup(&k1, h, |_| true), Some(1));
            assert_eq!(emc.lookup(&k2, h, |_| true), Some(2));
        }
    }
}

#[test]
fn insertion_probability_is_one_in_n() {
    let mut emc: Emc<u32> = Emc::with_seed(42);
    assert_eq!(emc.insert_inv_prob(), 100, "default");
    let key = udp_key(1, 2, 3);
    let h = key.hash(0);
    let inserted = (0..100_000).filter(|_| emc.insert(&key, h, 7)).count();
    // Expected 1000, standard deviation about 31: ±50 % is 16 deviations.
    assert!((500..=1500).contains(&inserted), "{inserted} of 100000");

    emc.set_insert_inv_prob(2);
    let inserted = (0..100_000).filter(|_| emc.insert(&key, h, 7)).count();
    assert!(
        (45_000..=55_000).contains(&inserted),
        "{inserted} of 100000"
    );

    emc.set_insert_inv_prob(1);
    assert!((0..1000).all(|_| emc.insert(&key, h, 7)));
}

#[test]
fn zero_disables() {
    let mut emc: Emc<u32> = always();
    let key = udp_key(1, 2, 3);
    let h = key.hash(0);
    assert!(emc.insert(&key, h, 7));
    assert_eq!(emc.lookup(&key, h, |_| true), Some(7));
    emc.set_insert_inv_prob(0);
    assert!(!emc.is_enabled());
    assert_eq!(emc.lookup(&key, h, |_| true), None, "lookups miss");
    let other = udp_key(1, 3, 3);
    assert!((0..10_000).all(|_| !emc.insert(&other, other.hash(0), 8)));
    emc.set_insert_inv_prob(1);
    assert_eq!(
        emc.lookup(&other, other.hash(0), |_| true),
        None,
        "inserts did nothing"
    );
    assert_eq!(emc.lookup(&key, h, |_| true), Some(7));
}

#[test]
fn victim_is_empty_slot_then_smaller_hash() {
    let (a, b, c) = (udp_key(1, 1, 1), udp_key(1, 2, 2), udp_key(1, 3, 3));
    let slot = |s0: u32, s1: u32| s0 | (s1 << 13);
    // c's candidates are slots 5 and 7; a sits in 5, b in 7 (each its first empty candidate).
    let hc = slot(5, 7);
    for (ha, hb, evicted) in [
        (slot(5, 100), slot(7, 200), 'a'),
        (slot(5, 300), slot(7, 200), 'b'),
    ] {
        let mut emc: Emc<u32> = always();
        assert!(emc.insert(&a, ha, 1));
        assert!(emc.insert(&b, hb, 2));
        assert_eq!(emc.len(), 2);
        assert!(emc.insert(&c, hc, 3));
        assert_eq!(emc.len(), 2, "c replaced one of them");
        assert_eq!(emc.lookup(&c, hc, |_| true), Some(3));
        let (got_a, got_b) = (emc.lookup(&a, ha, |_| true), emc.lookup(&b, hb, |_| true));
        match evicted {
            'a' => assert_eq!((got_a, got_b), (None, Some(2))),
            _ => assert_eq!((got_a, got_b), (Some(1), None)),
        }
        // Re-inserting a cached key replaces its flow in place.
        assert!(emc.insert(&c, hc, 4));
        assert_eq!((emc.lookup(&c, hc, |_| true), emc.len()), (Some(4), 2));
    }
}

#[test]
fn wide_keys_are_not_cached() {
    let mut emc: Emc<u32> = always();
    let mut k = FlowKey::new();
    for i in 0..EMC_KEY_WORDS {
        k.set_word(i * 4, i as u64);
    }
    assert!(emc.insert(&k, k.hash(0), 1));
    assert_eq!(emc.lookup(&k, k.hash(0), |_| true), Some(1));
    k.set_word(63, 9);
    assert!(!emc.insert(&k, k.hash(0), 2));
    assert_eq!(emc.lookup(&k, k.hash(0), |_| true), None);
    assert_eq!(emc.len(), 1);
}

/// The intended invalidation: handles are (flow-table index, generation) and the table bumps
/// the generation when it deletes a flow.
#[test]
fn generation_invalidates() {
    struct FlowTable {
        generation: Vec<u32>,
    }
    impl FlowTable {
        fn handle(&self, index: usize) -> u64 {
            ((index as u64) << 32) | u64::from(self.generation[index])
        }
        fn live(&self, h: u64) -> bool {
            self.generation[(h >> 32) as usize] == h as u32
        }
        fn delete(&mut self, index: usize) {
            self.generation[index] = self.generation[index].wrapping_add(1);
        }
    }
    let mut table = FlowTable {
        generation: vec![0; 4],
    };
    let mut emc: Emc<u64> = always();
    let keys: Vec<FlowKey> = (0..4).map(|i| udp_key(1, i, 80)).collect();
    for (i, k) in keys.iter().enumerate() {
        assert!(emc.insert(k, k.hash(0), table.handle(i)));
    }
    table.delete(1);
    let h1 = keys[1].hash(0);
    assert_eq!(emc.lookup(&keys[1], h1, |f| table.live(f)), None);
    assert_eq!(emc.len(), 3, "the dead entry was cleared");
    // Index 1 reused by a new flow: the old key still misses until cached again.
    assert_eq!(emc.lookup(&keys[1], h1, |f| table.live(f)), None);
    assert!(emc.insert(&keys[1], h1, table.handle(1)));
    assert_eq!(
        emc.lookup(&keys[1], h1, |f| table.live(f)),
        Some(table.handle(1))
    );

    // Incremental sweep: delete two flows, sweep the whole table in steps.
    table.delete(0);
    table.delete(3);
    let cleared: usize = (0..64).map(|_| emc.sweep(128, |f| table.live(f))).sum();
    assert_eq!(cleared, 2);
    assert_eq!(emc.len(), 2);
}

#[test]
fn explicit_removal() {
    let mut emc: Emc<u32> = always();
    let keys: Vec<FlowKey> = (0..100).map(|i| udp_key(1, i, 80)).collect();
    for (i, k) in keys.iter().enumerate() {
        emc.insert(k, k.hash(0), (i % 3) as u32);
    }
    let n = emc.len();
    let removed = emc.remove_flow(1);
    assert!(removed > 0);
    assert_eq!(emc.len(), n - removed);
    for k in &keys {
        assert_ne!(emc.lookup(k, k.hash(0), |_| true), Some(1));
    }
    assert_eq!(emc.retain(|f| f == 0) + emc.len(), n - removed);
    emc.clear();
    assert!(emc.is_empty());
    assert_eq!(emc.lookup(&keys[0], keys[0].hash(0), |_| true), None);
}

#[test]
fn memory_size() {
    // 8192 entries of 128 bytes plus 8192 stored hashes.
    assert_eq!(Emc::<u32>::memory_bytes(), 8192 * 128 + 8192 * 4);
}
