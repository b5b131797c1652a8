//! `OFPT_TABLE_MOD` (`ovs-ofctl mod-table`) and `OFPST_TABLE_DESC` (`dump-table-desc`), as
//! OVS's `table_mod()` and `query_table_desc__()`: a table mod names one table or all of them
//! (every table but the hidden last one, which refuses with `OFPTMFC_EPERM`), and changes what
//! it carries: OpenFlow 1.1 and 1.2 what a miss does, 1.4 on whether the table evicts and
//! whether it sends vacancy events, with their thresholds (0 and 0 when the request has no
//! vacancy property). The table description reports them; a table's vacancy is 100%, as the
//! tables have no flow limit.

use ofproto::ofproto::Ofproto;
use ofproto::table_config::{self, TableConfig};
use openflow::error::OfpErr;
use openflow::msgs::table_mod::{TableDesc, TableMiss, TableMod};

use super::bridge_view::N_TABLES;

/// Applies `tm` to `bridge`.
pub(crate) fn table_mod(of: &Ofproto, bridge: &str, tm: &TableMod) -> Result<(), OfpErr> {
    if tm.table_id != table_config::ALL_TABLES && tm.table_id >= N_TABLES {
        return Err(OfpErr::OfptmfcEperm);
    }
    of.table_mod(bridge, tm.table_id, |c| apply(c, tm))
        .ok_or(OfpErr::OfpbrcEperm)
}

/// What `tm` changes in one table (OVS's `table_mod__()`).
fn apply(c: &mut TableConfig, tm: &TableMod) {
    use table_config::TableMiss as Miss;
    match tm.miss {
        TableMiss::Default => {}
        TableMiss::Controller => c.miss = Miss::Controller,
        TableMiss::Continue => c.miss = Miss::Continue,
        TableMiss::Drop => c.miss = Miss::Drop,
    }
    if let Some(e) = tm.eviction {
        c.eviction = e;
    }
    if let Some(on) = tm.vacancy_events {
        c.vacancy = tm.vacancy.unwrap_or((0, 0));
        c.vacancy_events = on;
    }
}

/// The description of the bridge's tables.
pub(crate) fn table_descs(b: &ofproto::bridge::Bridge) -> Vec<TableDesc> {
    (0..N_TABLES)
        .map(|id| {
            let c = b.table_config(usize::from(id));
            TableDesc {
                eviction: c.eviction,
                vacancy_events: c.vacancy_events,
                vacancy: Some((c.vacancy.0, c.vacancy.1, 100)),
                ..TableDesc::ovs(id)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tm(table_id: u8) -> TableMod {
        TableMod {
            table_id,
            miss: TableMiss::Default,
            eviction: None,
            vacancy_events: None,
            eviction_flags: None,
            vacancy: None,
        }
    }

    #[test]
    fn a_table_mod_changes_what_it_carries_and_the_description_shows_it() {
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        let m = TableMod {
            eviction: Some(true),
            vacancy_events: Some(true),
            vacancy: Some((20, 80)),
            ..tm(1)
        };
        table_mod(&of, "br0", &m).unwrap();
        let m = TableMod {
            miss: TableMiss::Continue,
            ..tm(table_config::ALL_TABLES)
        };
        table_mod(&of, "br0", &m).unwrap();
        assert_eq!(table_mod(&of, "br0", &tm(254)), Err(OfpErr::OfptmfcEperm));
        let pipe = of.pipe.read().unwrap();
        let b = pipe.bridge("br0").unwrap();
        let d = table_descs(b);
        assert_eq!(d.len(), 254);
        let fresh = TableDesc {
            vacancy: Some((0, 0, 100)),
            ..TableDesc::ovs(0)
        };
        assert_eq!(d[0], fresh);
        assert!(d[1].eviction && d[1].vacancy_events);
        assert_eq!(d[1].vacancy, Some((20, 80, 100)));
        assert_eq!(
            b.table_config(5).miss,
            ofproto::table_config::TableMiss::Continue
        );
    }
}
