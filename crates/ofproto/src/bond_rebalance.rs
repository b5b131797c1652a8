//! Load-based rebalancing of a balanced bond (OVS's `bond_rebalance()` in `ofproto/bond.c`):
//! every `bond-rebalance-interval` milliseconds, hash buckets move from the most loaded
//! enabled member to the least loaded one while that narrows the gap by more than a tenth of
//! the way to the middle, each move logged (`bond X: shift NkB of load (with hash H) from A
//! to B (now carrying ...)`); then each bucket's load halves (a moving average). A bucket's
//! load is the bytes sent through it: for a bond that outputs with `lb_output`, what the
//! datapath counted per bucket ([`Bond::account_buckets`]). `bond/show` prints each bucket's
//! load under its member.

use std::time::{Duration, Instant};

use crate::bond::{BUCKETS, Bond};

/// Below this much more load than the least loaded member (bytes), no move is worth it.
const MIN_OVERLOAD: u64 = 100_000;

impl Bond {
    /// Adds to each bucket's load what was sent through it since the last call, given the
    /// counters' totals (`totals[i]` for bucket `i`; a total below the last one is a counter
    /// that started again, taken whole).
    pub fn account_buckets(&mut self, totals: &[u64]) {
        for (i, &t) in totals.iter().enumerate().take(BUCKETS) {
            let last = std::mem::replace(&mut self.counted[i], t);
            if self.buckets[i].is_some() {
                self.load[i] += if t >= last { t - last } else { t };
            }
        }
    }

    /// Rebalances when it is time to (see the module); whether any bucket moved.
    pub(crate) fn rebalance(&mut self, now: Instant) -> bool {
        if !self.is_balanced() || now < self.next_rebalance {
            return false;
        }
        self.next_rebalance = now + Duration::from_millis(self.config.rebalance_interval.into());
        let n = self.members.len();
        // Each member's buckets with load, heaviest first, and its total.
        let mut order: Vec<usize> = (0..BUCKETS).collect();
        order.sort_by(|&a, &b| self.load[b].cmp(&self.load[a]));
        let mut entries: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut tx = vec![0u64; n];
        for &h in &order {
            if let Some(m) = self.buckets[h].filter(|&m| m < n && self.load[h] > 0) {
                tx[m] += self.load[h];
                entries[m].push(h);
            }
        }
        // Enabled members, most loaded first.
        let mut bals: Vec<usize> = Vec::new();
        for m in (0..n).filter(|&m| self.members[m].enabled) {
            insert_bal(&mut bals, m, &tx);
        }
        let mut moved = false;
        while bals.len() > 1 {
            let (from, to) = (bals[0], bals[bals.len() - 1]);
            let overload = tx[from] - tx[to];
            if overload < tx[to] >> 5 || overload < MIN_OVERLOAD {
                break;
            }
            let picks = entries_to_migrate(&entries[from], tx[from], tx[to], &self.load);
            if picks.is_empty() {
                bals.remove(0);
                continue;
            }
            for h in picks {
                self.shift_load(h, from, to, &mut tx);
                entries[from].retain(|&e| e != h);
                for m in [from, to] {
                    bals.retain(|&b| b != m);
                    insert_bal(&mut bals, m, &tx);
                }
            }
            moved = true;
        }
        for l in &mut self.load {
            *l /= 2;
        }
        moved
    }

    /// Moves bucket `h` from member `from` to `to`, logged as OVS's `bond_shift_load()`.
    fn shift_load(&mut self, h: usize, from: usize, to: usize, tx: &mut [u64]) {
        let delta = self.load[h];
        self.events.push(format!(
            "bond {}: shift {}kB of load (with hash {h}) from {} to {} (now carrying {}kB and \
             {}kB load, respectively)",
            self.config.name,
            delta / 1024,
            self.members[from].name,
            self.members[to].name,
            (tx[from] - delta) / 1024,
            (tx[to] + delta) / 1024
        ));
        tx[from] -= delta;
        tx[to] += delta;
        self.buckets[h] = Some(to);
    }
}

/// Puts member `m` into `bals` (most loaded first), after the members of equal load.
fn insert_bal(bals: &mut Vec<usize>, m: usize, tx: &[u64]) {
    let at = bals
        .iter()
        .position(|&b| tx[m] > tx[b])
        .unwrap_or(bals.len());
    bals.insert(at, m);
}

/// The buckets to move from a member carrying `from_tx` (its loaded buckets `entries`,
/// heaviest first) to one carrying `to_tx` (OVS's `choose_entries_to_migrate()`): as many
/// as fit in half the difference, stopping within a tenth of it, or else the lightest one;
/// none unless the lighter side then gains at least that tenth, or the member has a single
/// loaded bucket.
fn entries_to_migrate(entries: &[usize], from_tx: u64, to_tx: u64, load: &[u64]) -> Vec<usize> {
    if entries.len() <= 1 {
        return Vec::new();
    }
    let ideal_delta = (from_tx + to_tx) / 2 - to_tx;
    let threshold = ideal_delta / 10;
    let mut picks = Vec::new();
    let mut delta = 0;
    for &e in entries {
        if delta + load[e] <= ideal_delta {
            picks.push(e);
            delta += load[e];
        }
        if ideal_delta - delta < threshold {
            break;
        }
    }
    if picks.is_empty() {
        let closest = entries[entries.len() - 1];
        delta = load[closest];
        picks.push(closest);
    }
    let new_low = (from_tx - delta).min(to_tx + delta);
    if new_low > to_tx && new_low - to_tx >= threshold {
        picks
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bond::{BondConfig, BondMode};
    use flow::EthAddr;

    fn balanced_bond(now: Instant) -> Bond {
        let mac = |n| EthAddr([0x50, 0x54, 0, 0, 0, n]);
        let mut c = BondConfig::new(
            "bond0",
            BondMode::BalanceSlb,
            &[("p1", mac(1)), ("p2", mac(2))],
        );
        c.rebalance_interval = 1000;
        let mut b = Bond::new(c, now);
        b.buckets.iter_mut().for_each(|x| *x = Some(0));
        b.events.clear();
        b
    }

    #[test]
    fn load_moves_to_the_idle_member_until_near_the_middle_and_then_halves() {
        let now = Instant::now();
        let mut b = balanced_bond(now);
        // Everything on p1: buckets 1..=4 with 400k, 300k, 200k, 100k bytes.
        let mut totals = vec![0; BUCKETS];
        for (h, kb) in [(1, 400), (2, 300), (3, 200), (4, 100)] {
            totals[h] = kb * 1000;
        }
        b.account_buckets(&totals);
        assert!(!b.rebalance(now), "not due yet");
        let later = now + Duration::from_millis(1000);
        assert!(b.rebalance(later));
        // Half of 1000k is 500k: 400k then 100k go (300k and 200k would overshoot).
        assert_eq!(b.buckets[1], Some(1));
        assert_eq!(b.buckets[4], Some(1));
        assert_eq!((b.buckets[2], b.buckets[3]), (Some(0), Some(0)));
        assert_eq!(
            b.events,
            [
                "bond bond0: shift 390kB of load (with hash 1) from p1 to p2 (now carrying 585kB \
                 and 390kB load, respectively)",
                "bond bond0: shift 97kB of load (with hash 4) from p1 to p2 (now carrying 488kB \
                 and 488kB load, respectively)",
            ]
        );
        assert_eq!(b.load[1], 200_000);
        // Counted again with no new bytes: nothing more to move.
        b.account_buckets(&totals);
        assert!(!b.rebalance(later + Duration::from_millis(1000)));
    }

    #[test]
    fn small_or_single_loads_stay() {
        let now = Instant::now();
        let later = now + Duration::from_millis(1000);
        let mut b = balanced_bond(now);
        let mut totals = vec![0; BUCKETS];
        totals[1] = 50_000;
        totals[2] = 40_000;
        b.account_buckets(&totals);
        assert!(!b.rebalance(later), "under 100000 bytes of difference");
        let mut b = balanced_bond(now);
        totals[1] = 5_000_000;
        totals[2] = 0;
        b.account_buckets(&totals);
        assert!(!b.rebalance(later), "one bucket alone is not split");
        let mut b = balanced_bond(now);
        b.config.rebalance_interval = 0;
        totals[2] = 5_000_000;
        b.account_buckets(&totals);
        assert!(!b.rebalance(later), "rebalancing off");
    }
}
