//! A flow table's configuration, as `OFPT_TABLE_MOD` sets it and `OFPST_TABLE_DESC` reports
//! it (OVS's `struct oftable`'s `miss_config`, `eviction` and vacancy fields,
//! `ofproto/ofproto.c`'s `table_mod__()`): what a miss does (OpenFlow 1.1 and 1.2), whether
//! the table may evict flows and whether it sends vacancy events, with their thresholds
//! (OpenFlow 1.4 on).
//!
//! What a miss does is translation's business ([`crate::xlate`]): `Continue` looks the next
//! table up, `Controller` sends the packet to the controller (unless its input port has
//! `no_packet_in`), `Drop` drops it and `Default` drops it too unless an OpenFlow 1.0 to 1.2
//! connection with controller id 0 is attached, which is sent it. Eviction and vacancy events are only recorded, to be reported: the tables have no
//! flow limit that would make either happen.

use crate::bridge::{Bridge, N_TABLES};
use crate::ofproto::Ofproto;

/// What a table miss does (OVS's `enum ofputil_table_miss`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TableMiss {
    /// The switch's default: drop (no OpenFlow 1.0 controller asks for misses here).
    #[default]
    Default,
    /// Send the packet to the controller.
    Controller,
    /// Look the next table up.
    Continue,
    /// Drop the packet.
    Drop,
}

/// One table's configuration; the default is a table as the bridge makes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableConfig {
    /// What a miss does.
    pub miss: TableMiss,
    /// The table may evict flows (OpenFlow's `OFPTC14_EVICTION`).
    pub eviction: bool,
    /// The table sends vacancy events.
    pub vacancy_events: bool,
    /// The vacancy thresholds in percent, down then up.
    pub vacancy: (u8, u8),
}

/// The table a table mod names when it means all of them (`OFPTT_ALL`).
pub const ALL_TABLES: u8 = 0xff;

impl Bridge {
    /// Table `table`'s configuration (the default for a table out of range).
    pub fn table_config(&self, table: usize) -> TableConfig {
        self.table_config.get(table).copied().unwrap_or_default()
    }
}

impl Ofproto {
    /// Says whether an OpenFlow 1.0 to 1.2 connection with controller id 0 is attached to
    /// `bridge`, whose default table misses then go to the controller, as OVS's
    /// (`connmgr_wants_packet_in_on_miss()`: OpenFlow 1.3 made a miss drop by default).
    pub fn set_miss_to_controller(&self, bridge: &str, on: bool) {
        let changed = {
            let mut p = self.pipe.write().unwrap_or_else(|e| e.into_inner());
            match p.bridge_mut(bridge) {
                Some(b) if b.miss_to_controller != on => {
                    b.miss_to_controller = on;
                    true
                }
                _ => false,
            }
        };
        // What a miss does is in the megaflows.
        if changed {
            self.changed();
        }
    }

    /// Changes the configuration of table `table` of `bridge` ([`ALL_TABLES`]: every table
    /// but the hidden last one, as OVS's `table_mod()`) with `f`. `None` when there is no such
    /// bridge or table.
    pub fn table_mod(&self, bridge: &str, table: u8, f: impl Fn(&mut TableConfig)) -> Option<()> {
        let changed = {
            let mut p = self.pipe.write().unwrap_or_else(|e| e.into_inner());
            let b = p.bridge_mut(bridge)?;
            let range = if table == ALL_TABLES {
                0..N_TABLES - 1
            } else if usize::from(table) < N_TABLES - 1 {
                usize::from(table)..usize::from(table) + 1
            } else {
                return None;
            };
            let mut changed = false;
            for c in &mut b.table_config[range] {
                let old = c.miss;
                f(c);
                changed |= c.miss != old;
            }
            changed
        };
        // What a miss does is in the megaflows.
        if changed {
            self.changed();
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_mod_changes_one_table_or_all_but_the_hidden_one() {
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        let g = of.generation();
        of.table_mod("br0", 3, |c| c.eviction = true).unwrap();
        assert_eq!(of.generation(), g, "eviction is not translation's business");
        of.table_mod("br0", ALL_TABLES, |c| c.miss = TableMiss::Continue)
            .unwrap();
        assert!(of.generation() > g);
        let p = of.pipe.read().unwrap();
        let b = p.bridge("br0").unwrap();
        assert!(b.table_config(3).eviction);
        assert!(!b.table_config(2).eviction);
        assert_eq!(b.table_config(253).miss, TableMiss::Continue);
        assert_eq!(b.table_config(254).miss, TableMiss::Default);
        drop(p);
        assert!(of.table_mod("br0", 254, |_| {}).is_none());
        assert!(of.table_mod("br1", 0, |_| {}).is_none());
    }
}
