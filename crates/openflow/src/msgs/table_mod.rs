//! `OFPT_TABLE_MOD` (OpenFlow 1.1 on): a table's configuration. What it configures changed
//! with every version: 1.1 and 1.2 say what a table miss does, 1.3 nothing, 1.4 whether the
//! table evicts flows and sends vacancy events (with properties for the eviction flags and
//! the vacancy thresholds), as OVS's `lib/ofp-table.c` reads and writes it.

use super::{Reader, finish, prop_u32, props, put_prop, put32, zeros};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{Message, MsgType, NotInVersion};

/// What a table miss does (OpenFlow 1.1 and 1.2's `OFPTC11_TABLE_MISS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableMiss {
    /// The version's default (the message says nothing about misses).
    Default,
    /// Send the packet to the controller.
    Controller,
    /// Go on to the next table.
    Continue,
    /// Drop the packet.
    Drop,
}

/// `OFPTC14_EVICTION`: the table may evict flows to make room.
const OFPTC14_EVICTION: u32 = 1 << 2;
/// `OFPTC14_VACANCY_EVENTS`: the table sends vacancy events.
const OFPTC14_VACANCY_EVENTS: u32 = 1 << 3;
/// Property: eviction flags.
const OFPTMPT14_EVICTION: u16 = 2;
/// Property: vacancy thresholds.
const OFPTMPT14_VACANCY: u16 = 3;

/// `OFPT_TABLE_MOD` (OVS's `struct ofputil_table_mod`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableMod {
    /// The table (`0xff` for all).
    pub table_id: u8,
    /// What a miss does (1.1, 1.2).
    pub miss: TableMiss,
    /// Whether the table evicts flows (1.4 on; `None` before).
    pub eviction: Option<bool>,
    /// Whether the table sends vacancy events (1.4 on; `None` before).
    pub vacancy_events: Option<bool>,
    /// The eviction flags property (1.4 on), when present.
    pub eviction_flags: Option<u32>,
    /// The vacancy property's down and up thresholds in percent (1.4 on), when present.
    pub vacancy: Option<(u8, u8)>,
}

impl TableMod {
    /// Appends the message (OpenFlow 1.1 on).
    pub fn encode(
        &self,
        version: Version,
        xid: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), NotInVersion> {
        let t = if version >= Version::Of14 {
            MsgType::Ofpt14TableMod
        } else {
            MsgType::Ofpt11TableMod
        };
        let at = t.start(version, xid, out)?;
        out.push(self.table_id);
        zeros(out, 3);
        let config = match version {
            Version::Of11 | Version::Of12 => match self.miss {
                TableMiss::Default | TableMiss::Controller => 0,
                TableMiss::Continue => 1,
                TableMiss::Drop => 2,
            },
            Version::Of14 | Version::Of15 => {
                let mut c = 0;
                if self.eviction == Some(true) {
                    c |= OFPTC14_EVICTION;
                }
                if self.vacancy_events == Some(true) {
                    c |= OFPTC14_VACANCY_EVENTS;
                }
                c
            }
            _ => 0,
        };
        put32(out, config);
        if version >= Version::Of14 {
            if let Some(f) = self.eviction_flags {
                put_prop(out, OFPTMPT14_EVICTION, &f.to_be_bytes());
            }
            if let Some((down, up)) = self.vacancy {
                put_prop(out, OFPTMPT14_VACANCY, &[down, up, 0, 0]);
            }
        }
        let _ = finish(out, at);
        Ok(())
    }

    /// Reads a table mod (OVS's `ofputil_decode_table_mod`): an unknown property is
    /// `OFPBRC_BAD_TYPE`, a vacancy property with thresholds out of order or over 100, or a
    /// current vacancy, `OFPBPC_BAD_VALUE`.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(msg, &[MsgType::Ofpt11TableMod, MsgType::Ofpt14TableMod])?;
        let version = super::version_of(msg)?;
        let mut r = Reader::new(msg.body);
        let table_id = r.u8()?;
        r.skip(3)?;
        let config = r.u32()?;
        let miss = match version {
            Version::Of11 | Version::Of12 => match config & 3 {
                1 => TableMiss::Continue,
                2 => TableMiss::Drop,
                _ => TableMiss::Controller,
            },
            _ => TableMiss::Default,
        };
        let v14 = version >= Version::Of14;
        let mut tm = TableMod {
            table_id,
            miss,
            eviction: v14.then_some(config & OFPTC14_EVICTION != 0),
            vacancy_events: v14.then_some(config & OFPTC14_VACANCY_EVENTS != 0),
            eviction_flags: None,
            vacancy: None,
        };
        if msg.msg_type == MsgType::Ofpt14TableMod {
            for p in props(r.rest()) {
                let p = p?;
                match (p.kind, p.experimenter) {
                    (OFPTMPT14_EVICTION, None) => tm.eviction_flags = Some(prop_u32(&p)?),
                    (OFPTMPT14_VACANCY, None) => {
                        let [down, up, vacancy, _] =
                            <[u8; 4]>::try_from(p.payload).map_err(|_| OfpErr::OfpbpcBadLen)?;
                        if down > up || up > 100 || vacancy != 0 {
                            return Err(OfpErr::OfpbpcBadValue);
                        }
                        tm.vacancy = Some((down, up));
                    }
                    _ => return Err(OfpErr::OfpbrcBadType),
                }
            }
        }
        Ok(tm)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, unhex};
    use super::*;
    use proptest::prelude::*;

    /// `OFPT_TABLE_MOD` of OVS's tests/ofp-print.at, 1.1 to 1.4.
    #[test]
    fn table_mods_as_ovs_prints_them() {
        for (h, miss, ev) in [
            ("0211001000000002 0200000000000002", TableMiss::Drop, None),
            (
                "0311001000000002 0200000000000001",
                TableMiss::Continue,
                None,
            ),
            (
                "0411001000000002 0200000000000000",
                TableMiss::Default,
                None,
            ),
            (
                "0511001000000002 0200000000000000",
                TableMiss::Default,
                Some(false),
            ),
        ] {
            let m = unhex(h);
            let tm = TableMod::decode(&msg(&m)).unwrap();
            assert_eq!(
                (tm.table_id, tm.miss, tm.eviction, tm.vacancy_events),
                (2, miss, ev, ev)
            );
            let mut out = Vec::new();
            tm.encode(Version::from_wire(m[0]).unwrap(), 2, &mut out)
                .unwrap();
            assert_eq!(hex(&out), hex(&m));
        }
    }

    #[test]
    fn properties_are_checked_as_ovs_checks_them() {
        let mut tm = TableMod {
            table_id: 1,
            miss: TableMiss::Default,
            eviction: Some(true),
            vacancy_events: Some(true),
            eviction_flags: Some(7),
            vacancy: Some((10, 90)),
        };
        let mut out = Vec::new();
        tm.encode(Version::Of15, 1, &mut out).unwrap();
        assert_eq!(TableMod::decode(&msg(&out)), Ok(tm));
        for bad in [(91, 90), (10, 101)] {
            tm.vacancy = Some(bad);
            out.clear();
            tm.encode(Version::Of14, 1, &mut out).unwrap();
            assert_eq!(TableMod::decode(&msg(&out)), Err(OfpErr::OfpbpcBadValue));
        }
        // An unknown property is OFPBRC_BAD_TYPE here, not OFPBPC_BAD_TYPE.
        let mut m = unhex("0511001800000002 0200000000000000 0009000800000000");
        m[3] = 24;
        assert_eq!(TableMod::decode(&msg(&m)), Err(OfpErr::OfpbrcBadType));
        assert!(tm.encode(Version::Of10, 1, &mut Vec::new()).is_err());
    }

    proptest! {
        #[test]
        fn table_mods_round_trip(v in 2u8..=6, id: u8, miss in 0usize..3, ev: bool, vac: bool, flags: Option<u32>, th in proptest::option::of((0u8..=100, 0u8..=100))) {
            let v = Version::from_wire(v).unwrap();
            let v14 = v >= Version::Of14;
            let tm = TableMod {
                table_id: id,
                miss: match v {
                    Version::Of11 | Version::Of12 => [TableMiss::Controller, TableMiss::Continue, TableMiss::Drop][miss],
                    _ => TableMiss::Default,
                },
                eviction: v14.then_some(ev),
                vacancy_events: v14.then_some(vac),
                eviction_flags: flags.filter(|_| v14),
                vacancy: th.map(|(a, b)| (a.min(b), a.max(b))).filter(|_| v14),
            };
            let mut out = Vec::new();
            tm.encode(v, 1, &mut out).unwrap();
            prop_assert_eq!(TableMod::decode(&msg(&out)).unwrap(), tm);
        }
    }
}
