//! A table's configuration: `OFPT_TABLE_MOD` (OpenFlow 1.1 on) sets it, `OFPST_TABLE_DESC`
//! (1.4 on) describes it and `OFPT_TABLE_STATUS` (1.4 on) reports a vacancy event with it, as
//! OVS's `lib/ofp-table.c` reads and writes them. What it holds changed with every version: 1.1
//! and 1.2 say what a table miss does, 1.3 nothing, 1.4 whether the table evicts flows and
//! sends vacancy events, with properties for the eviction flags and the vacancy thresholds.

use super::{Reader, finish, prop_u32, props, put_prop, put16, put32, stats_replies, zeros};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{EncodeError, Message, MsgType, NotInVersion};

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

/// The eviction flags OVS reports (`OFPTMPEF14_OTHER | IMPORTANCE | LIFETIME`).
pub const OVS_EVICTION_FLAGS: u32 = 7;

/// One table's description (`struct ofp14_table_desc` and its properties).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableDesc {
    /// The table.
    pub table_id: u8,
    /// Whether it evicts flows.
    pub eviction: bool,
    /// Whether it sends vacancy events.
    pub vacancy_events: bool,
    /// Its eviction flags, when it reports them.
    pub eviction_flags: Option<u32>,
    /// Its vacancy down and up thresholds and current vacancy, in percent, when it sends
    /// vacancy events.
    pub vacancy: Option<(u8, u8, u8)>,
}

impl TableDesc {
    /// What OVS reports for a table it has not been told to configure: no eviction, no vacancy
    /// events, every eviction flag.
    pub fn ovs(table_id: u8) -> TableDesc {
        TableDesc {
            table_id,
            eviction: false,
            vacancy_events: false,
            eviction_flags: Some(OVS_EVICTION_FLAGS),
            vacancy: None,
        }
    }

    fn put(&self, _version: Version, b: &mut Vec<u8>) {
        let start = b.len();
        put16(b, 0);
        b.push(self.table_id);
        zeros(b, 1);
        let mut config = 0;
        if self.eviction {
            config |= OFPTC14_EVICTION;
        }
        if self.vacancy_events {
            config |= OFPTC14_VACANCY_EVENTS;
        }
        put32(b, config);
        if let Some(f) = self.eviction_flags {
            put_prop(b, OFPTMPT14_EVICTION, &f.to_be_bytes());
        }
        if let (true, Some((down, up, now))) = (self.vacancy_events, self.vacancy) {
            put_prop(b, OFPTMPT14_VACANCY, &[down, up, now, 0]);
        }
        let len = (b.len() - start) as u16;
        b[start..start + 2].copy_from_slice(&len.to_be_bytes());
    }

    /// Reads one description (OVS's `ofputil_decode_table_desc`).
    fn pull(r: &mut Reader<'_>) -> Result<TableDesc, OfpErr> {
        let mut h = Reader::new(r.take(8)?);
        let len = usize::from(h.u16()?);
        if len < 8 || len - 8 > r.rest().len() {
            return Err(OfpErr::OfpbrcBadLen);
        }
        let table_id = h.u8()?;
        h.skip(1)?;
        let config = h.u32()?;
        let mut td = TableDesc {
            table_id,
            eviction: config & OFPTC14_EVICTION != 0,
            vacancy_events: config & OFPTC14_VACANCY_EVENTS != 0,
            eviction_flags: None,
            vacancy: None,
        };
        for p in props(r.take(len - 8)?) {
            let p = p?;
            match (p.kind, p.experimenter) {
                (OFPTMPT14_EVICTION, None) => td.eviction_flags = Some(prop_u32(&p)?),
                (OFPTMPT14_VACANCY, None) => {
                    let [down, up, now, _] =
                        <[u8; 4]>::try_from(p.payload).map_err(|_| OfpErr::OfpbpcBadLen)?;
                    td.vacancy = Some((down, up, now));
                }
                _ => super::unknown_prop(&p, true)?,
            }
        }
        Ok(td)
    }
}

/// Appends an `OFPST_TABLE_DESC` request (OpenFlow 1.4 on).
pub fn encode_table_desc_request(
    version: Version,
    xid: u32,
    out: &mut Vec<u8>,
) -> Result<(), NotInVersion> {
    let at = MsgType::Ofpst14TableDescRequest.start(version, xid, out)?;
    let _ = finish(out, at);
    Ok(())
}

/// The replies to the table description request `request`.
pub fn encode_table_desc_reply(
    request: &Message<'_>,
    tables: &[TableDesc],
) -> Result<Vec<Vec<u8>>, EncodeError> {
    stats_replies(request, tables, TableDesc::put)
}

/// The tables of one table description reply message.
pub fn decode_table_desc_reply(msg: &Message<'_>) -> Result<Vec<TableDesc>, OfpErr> {
    super::expect(msg, &[MsgType::Ofpst14TableDescReply])?;
    let mut r = Reader::new(msg.body);
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(TableDesc::pull(&mut r)?);
    }
    Ok(v)
}

/// Table status reason: the table's vacancy fell below its down threshold.
pub const OFPTR_VACANCY_DOWN: u8 = 3;
/// Table status reason: the table's vacancy rose above its up threshold.
pub const OFPTR_VACANCY_UP: u8 = 4;

/// `OFPT_TABLE_STATUS`: a table crossed a vacancy threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableStatus {
    /// [`OFPTR_VACANCY_DOWN`] or [`OFPTR_VACANCY_UP`].
    pub reason: u8,
    /// The table as it is now.
    pub desc: TableDesc,
}

impl TableStatus {
    /// Appends the message (transaction id 0; OpenFlow 1.4 on).
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) -> Result<(), NotInVersion> {
        let at = MsgType::Ofpt14TableStatus.start(version, 0, out)?;
        out.push(self.reason);
        zeros(out, 7);
        self.desc.put(version, out);
        let _ = finish(out, at);
        Ok(())
    }

    /// Reads a table status (OVS's `ofputil_decode_table_status`): a reason other than the
    /// two vacancy events is `OFPBPC_BAD_VALUE`.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(msg, &[MsgType::Ofpt14TableStatus])?;
        let mut r = Reader::new(msg.body);
        let reason = r.u8()?;
        if reason != OFPTR_VACANCY_DOWN && reason != OFPTR_VACANCY_UP {
            return Err(OfpErr::OfpbpcBadValue);
        }
        r.skip(7)?;
        Ok(TableStatus {
            reason,
            desc: TableDesc::pull(&mut r)?,
        })
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

    /// What a running ovs-vswitchd answers for its 254 tables.
    #[test]
    fn table_desc_as_ovs_vswitchd_answers() {
        let (req, replies) = super::super::testutil::ovs_reply("table-desc-of14");
        let mut out = Vec::new();
        encode_table_desc_request(Version::Of14, 1, &mut out).unwrap();
        assert_eq!(out, req);
        let tables = decode_table_desc_reply(&msg(&replies[0])).unwrap();
        let ovs: Vec<_> = (0..254).map(TableDesc::ovs).collect();
        assert_eq!(tables, ovs);
        let out = encode_table_desc_reply(&msg(&req), &ovs).unwrap();
        assert_eq!(out, replies);
        let mut d = TableDesc::ovs(3);
        d.vacancy_events = true;
        d.vacancy = Some((10, 20, 50));
        let out = encode_table_desc_reply(&msg(&req), &[d]).unwrap();
        assert_eq!(decode_table_desc_reply(&msg(&out[0])), Ok(vec![d]));
    }

    #[test]
    fn table_status_round_trips_and_refuses_other_reasons() {
        let ts = TableStatus {
            reason: OFPTR_VACANCY_UP,
            desc: TableDesc {
                vacancy_events: true,
                vacancy: Some((20, 80, 85)),
                ..TableDesc::ovs(7)
            },
        };
        let mut out = Vec::new();
        ts.encode(Version::Of14, &mut out).unwrap();
        assert_eq!(TableStatus::decode(&msg(&out)), Ok(ts));
        out[8] = 5;
        assert_eq!(TableStatus::decode(&msg(&out)), Err(OfpErr::OfpbpcBadValue));
        assert!(ts.encode(Version::Of13, &mut Vec::new()).is_err());
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
