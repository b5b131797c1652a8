//! The flow tables' lookup counters that `ovs-ofctl dump-tables` prints (`lookup=`,
//! `matched=`). As OVS's `rule_dpif_lookup_from_table()` counts them, every table a packet's
//! translation looks up (the first, a `goto_table`, a `resubmit`, a miss that continues to
//! the next table) counts the packet once, as matched when a rule was found: the missed
//! packet when it is translated, a megaflow's packets when the revalidator reads its
//! statistics (OVS credits them through its translation cache). `ofproto/trace` counts
//! nothing.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::bridge::N_TABLES;
use crate::xlate::Pipeline;

/// One table's counters.
#[derive(Debug, Default)]
pub struct TableCounts {
    lookups: AtomicU64,
    matched: AtomicU64,
}

/// The counters of a bridge's tables.
#[derive(Debug)]
pub struct TableStats {
    tables: Box<[TableCounts]>,
}

impl Default for TableStats {
    fn default() -> TableStats {
        TableStats {
            tables: (0..N_TABLES).map(|_| TableCounts::default()).collect(),
        }
    }
}

impl TableStats {
    /// Table `t`'s (lookups, matched), zero for a table beyond the last.
    pub fn get(&self, t: usize) -> (u64, u64) {
        self.tables.get(t).map_or((0, 0), |c| {
            (
                c.lookups.load(Ordering::Relaxed),
                c.matched.load(Ordering::Relaxed),
            )
        })
    }

    fn credit(&self, t: usize, matched: bool, packets: u64) {
        if let Some(c) = self.tables.get(t) {
            c.lookups.fetch_add(packets, Ordering::Relaxed);
            if matched {
                c.matched.fetch_add(packets, Ordering::Relaxed);
            }
        }
    }
}

/// A translation's lookup of a table: (bridge index, table, whether a rule matched).
pub type TableLookup = (usize, u8, bool);

/// Credits `packets` to the tables a translation looked up.
pub(crate) fn credit_tables(p: &Pipeline, lookups: &[TableLookup], packets: u64) {
    for &(b, t, matched) in lookups {
        if let Some(br) = p.bridges.get(b) {
            br.table_stats.credit(usize::from(t), matched, packets);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_and_matches_add_up_by_table() {
        let s = TableStats::default();
        s.credit(0, true, 3);
        s.credit(0, false, 2);
        s.credit(1, false, 1);
        s.credit(N_TABLES, true, 9);
        assert_eq!(s.get(0), (5, 3));
        assert_eq!(s.get(1), (1, 0));
        assert_eq!(s.get(N_TABLES), (0, 0));
    }
}
