//! The order in which `ovs-vswitchd` 3.1 adds the new ports of a bridge, which decides the
//! OpenFlow numbers of ports that ask for none and arrive in one transaction.
//!
//! OVS collects a bridge's wanted ports into a string hash (`bridge_collect_wanted_ports()`:
//! the Bridge row's `ports` in the order the database holds them, by uuid) and walks it twice
//! (`bridge_add_ports()`: the interfaces that request a number, then the others), so the order
//! is the hash table's: bucket by bucket, each bucket's list from its head. This reproduces that
//! table: OVS's `hash_string(name, 0)` (`hash_bytes()` over the name with Murmur3's steps, as
//! an x86-64 build without SSE 4.2, such as Debian's, computes it) and `hmap`'s growth (a
//! bucket mask of `calc_mask(n)` once `n / 2` exceeds the mask; a resize moves each bucket's
//! nodes in order to the front of their new buckets).

/// OVS's `hash_string(s, 0)`: `hash_bytes()` over the name.
fn hash_string(s: &str) -> u32 {
    ofproto::xlate::ovs_hash::hash_bytes(s.as_bytes(), 0)
}

/// `hmap`'s `calc_mask()`: at least 4 buckets once there are more than one.
fn calc_mask(n: usize) -> usize {
    let mut mask = n / 2;
    for shift in [1, 2, 4, 8, 16, 32] {
        mask |= mask >> shift;
    }
    mask | ((mask & 1) << 1)
}

/// The indexes of `names` (inserted in this order) in the order OVS's `SHASH_FOR_EACH` visits
/// them.
pub(crate) fn shash_order(names: &[&str]) -> Vec<usize> {
    let hashes: Vec<usize> = names.iter().map(|n| hash_string(n) as usize).collect();
    // Each bucket's nodes, head first.
    let mut buckets: Vec<Vec<usize>> = vec![Vec::new()];
    let mut mask = 0usize;
    for (i, &h) in hashes.iter().enumerate() {
        buckets[h & mask].insert(0, i);
        let n = i + 1;
        if n / 2 > mask {
            let new_mask = calc_mask(n);
            if new_mask > mask {
                let mut grown: Vec<Vec<usize>> = vec![Vec::new(); new_mask + 1];
                for node in buckets.into_iter().flatten() {
                    grown[hashes[node] & new_mask].insert(0, node);
                }
                buckets = grown;
                mask = new_mask;
            }
        }
    }
    buckets.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_growth_as_hmap_grows() {
        assert_eq!(calc_mask(2), 3);
        assert_eq!(calc_mask(8), 7);
        assert_eq!(calc_mask(16), 15);
        // The tail is padded with zeros: "abcd\0" differs from "abcd" only by the length.
        assert_ne!(hash_string("abcd"), hash_string("abcd\0"));
    }

    #[test]
    fn the_walk_is_by_bucket() {
        let names = [
            "br0", "d1", "i1", "pa", "pb", "pc", "vx0", "gnv0", "gre0", "vx1",
        ];
        let order = shash_order(&names);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..names.len()).collect::<Vec<_>>());
        // 8 buckets after 10 insertions (the mask grew to 3 at the 2nd, to 7 at the 8th),
        // visited in order of hash & mask.
        let bucket = |i: usize| hash_string(names[i]) as usize & 7;
        assert!(
            order.windows(2).all(|w| bucket(w[0]) <= bucket(w[1])),
            "{order:?}"
        );
    }
}
