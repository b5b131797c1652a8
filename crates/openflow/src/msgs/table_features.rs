//! Table features (OpenFlow 1.3 on): `OFPST_TABLE_FEATURES` requests, and the replies that
//! describe each table (its instructions, the tables it may go to, its actions and the fields
//! it matches and sets) as property lists, as OVS's `lib/ofp-table.c` reads and writes them.
//!
//! `ovs-ofctl` asks for them before `--bundle` and group commands in OpenFlow 1.3 on and gives
//! up if the answer is an error. OVS answers with one record per visible table (254), each
//! about 5 KB, so the reply is split across some twenty messages; [`ovs_tables`] builds that
//! answer from the lists of fields the caller's field table supports. Fields are carried as
//! their OXM/NXM headers ([`OxmId`]); which headers are known fields is the field table's
//! business, not this codec's.

use super::{Reader, get_name, put_name, put16, put32, put64, zeros};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{EncodeError, Message, MsgType, NotInVersion};

/// Property: instructions (`+1` for the table-miss flow's: every property type below has a
/// `_MISS` twin one higher, up to the set-field ones).
pub const OFPTFPT13_INSTRUCTIONS: u16 = 0;
/// Property: the tables a goto-table may name.
pub const OFPTFPT13_NEXT_TABLES: u16 = 2;
/// Property: actions in write-actions.
pub const OFPTFPT13_WRITE_ACTIONS: u16 = 4;
/// Property: actions in apply-actions.
pub const OFPTFPT13_APPLY_ACTIONS: u16 = 6;
/// Property: matchable fields (with the mask bit for arbitrarily maskable ones).
pub const OFPTFPT13_MATCH: u16 = 8;
/// Property: fields that may be wildcarded.
pub const OFPTFPT13_WILDCARDS: u16 = 10;
/// Property: fields set-field may write in write-actions.
pub const OFPTFPT13_WRITE_SETFIELD: u16 = 12;
/// Property: fields set-field may write in apply-actions.
pub const OFPTFPT13_APPLY_SETFIELD: u16 = 14;
/// The properties OpenFlow 1.3 and 1.4 require in every record (1.5: in every record that
/// has any): the eight non-miss ones.
const REQUIRED: u32 = 0x5555;

/// `OFPTT_ALL`: not a table.
const OFPTT_ALL: u8 = 0xff;
/// The length of `struct ofp13_table_features`, before the properties.
const RECORD_LEN: usize = 64;

/// A field as a table features property names it: its OXM or NXM header, with the experimenter
/// id of an experimenter OXM (class `0xffff`, 8 bytes on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OxmId {
    /// The 32-bit header (class, field, has-mask bit, length).
    pub header: u32,
    /// For an experimenter OXM, the experimenter id.
    pub experimenter: Option<u32>,
}

impl OxmId {
    /// Whether the header's has-mask bit is set.
    pub fn has_mask(self) -> bool {
        self.header & 0x100 != 0
    }

    fn put(self, out: &mut Vec<u8>) {
        put32(out, self.header);
        if let Some(e) = self.experimenter {
            put32(out, e);
        }
    }
}

/// The OXM headers of `b` (OVS's `nx_pull_header`): a partial header, or an experimenter one
/// whose length cannot hold its id, is `OFPBMC_BAD_LEN`.
fn pull_oxms(b: &[u8]) -> Result<Vec<OxmId>, OfpErr> {
    let mut r = Reader::new(b);
    let mut v = Vec::new();
    while !r.is_empty() {
        let header = r.u32().map_err(|_| OfpErr::OfpbmcBadLen)?;
        let experimenter = if header >> 16 == 0xffff {
            if header & 0xff < 4 {
                return Err(OfpErr::OfpbmcBadLen);
            }
            Some(r.u32().map_err(|_| OfpErr::OfpbmcBadLen)?)
        } else {
            None
        };
        v.push(OxmId {
            header,
            experimenter,
        });
    }
    Ok(v)
}

/// The contents of one property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PropData {
    /// Instruction (`OFPIT_*`) or action (`OFPAT_*`) types, 4 bytes each on the wire.
    Ids(Vec<u16>),
    /// Table ids.
    Tables(Vec<u8>),
    /// Fields.
    Oxms(Vec<OxmId>),
    /// A property this codec does not read (kept when decoding loosely).
    Raw(Vec<u8>),
}

/// One table features property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableFeatureProp {
    /// The property type (`OFPTFPT13_*`, or its `_MISS` twin).
    pub kind: u16,
    /// Its contents.
    pub data: PropData,
}

/// One table's features (`struct ofp13_table_features` and its properties).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableFeatures {
    /// The table.
    pub table_id: u8,
    /// OpenFlow 1.5's command (`OFPTFC15_*`: replace, modify, enable, disable); 0 before.
    pub command: u8,
    /// The table's name (empty: OVS shows its number).
    pub name: String,
    /// Metadata bits the table can match.
    pub metadata_match: u64,
    /// Metadata bits the table can write.
    pub metadata_write: u64,
    /// `OFPTC_*` capabilities (1.4 on: eviction, vacancy events).
    pub capabilities: u32,
    /// The most flows the table holds.
    pub max_entries: u32,
    /// The properties, in wire order.
    pub properties: Vec<TableFeatureProp>,
}

impl TableFeatures {
    fn put(&self, version: Version, out: &mut Vec<u8>) {
        let start = out.len();
        put16(out, 0);
        out.push(self.table_id);
        out.push(if version >= Version::Of15 {
            self.command
        } else {
            0
        });
        zeros(out, 4);
        put_name(out, &self.name, 32);
        put64(out, self.metadata_match);
        put64(out, self.metadata_write);
        put32(
            out,
            if version >= Version::Of14 {
                self.capabilities
            } else {
                0
            },
        );
        put32(out, self.max_entries);
        for p in &self.properties {
            let at = out.len();
            put16(out, p.kind);
            put16(out, 0);
            match &p.data {
                PropData::Ids(ids) => ids.iter().for_each(|&id| {
                    put16(out, id);
                    put16(out, 4);
                }),
                PropData::Tables(t) => out.extend_from_slice(t),
                PropData::Oxms(o) => o.iter().for_each(|x| x.put(out)),
                PropData::Raw(b) => out.extend_from_slice(b),
            }
            let len = (out.len() - at) as u16;
            out[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
            zeros(out, (out.len() - at).next_multiple_of(8) - (out.len() - at));
        }
        let len = (out.len() - start) as u16;
        out[start..start + 2].copy_from_slice(&len.to_be_bytes());
    }

    /// Reads one record from `r` (OVS's `ofputil_decode_table_features`). Strict (`loose`
    /// false, as a switch reads a request) unknown properties and instructions are errors;
    /// loose (as a controller reads a reply) they are kept raw or skipped.
    fn pull(version: Version, r: &mut Reader<'_>, loose: bool) -> Result<TableFeatures, OfpErr> {
        let rest = r.rest();
        if rest.len() < RECORD_LEN {
            return Err(OfpErr::OfpbpcBadLen);
        }
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        if len < RECORD_LEN || !len.is_multiple_of(8) || len > rest.len() {
            return Err(OfpErr::OfpbpcBadLen);
        }
        let mut h = Reader::new(r.take(len)?);
        h.skip(2)?;
        let table_id = h.u8()?;
        let command = h.u8()?;
        if version >= Version::Of15 && command > 3 {
            return Err(OfpErr::OfptffcBadCommand);
        }
        if table_id == OFPTT_ALL {
            return Err(OfpErr::OfptffcBadTable);
        }
        h.skip(4)?;
        let mut tf = TableFeatures {
            table_id,
            command: if version >= Version::Of15 { command } else { 0 },
            name: get_name(h.take(32)?),
            metadata_match: h.u64()?,
            metadata_write: h.u64()?,
            capabilities: h.u32()?,
            max_entries: h.u32()?,
            properties: Vec::new(),
        };
        if version < Version::Of14 {
            tf.capabilities = 0;
        }
        let mut seen = 0u32;
        for p in super::props(h.rest()) {
            let p = p?;
            if p.experimenter.is_none() && p.kind < 32 {
                if seen & 1 << p.kind != 0 {
                    return Err(OfpErr::OfptffcBadFeatures);
                }
                seen |= 1 << p.kind;
            }
            let data = match (p.kind, p.experimenter) {
                (0 | 1, None) => PropData::Ids(pull_ids(p.payload, true, loose)?),
                (2 | 3, None) => {
                    if p.payload.contains(&OFPTT_ALL) {
                        return Err(OfpErr::OfpbpcBadValue);
                    }
                    PropData::Tables(p.payload.to_vec())
                }
                (4..=7, None) => PropData::Ids(pull_ids(p.payload, false, loose)?),
                (8..=15, None) => {
                    let oxms = pull_oxms(p.payload)?;
                    if p.kind != OFPTFPT13_MATCH && oxms.iter().any(|o| o.has_mask()) {
                        return Err(OfpErr::OfpbmcBadMask);
                    }
                    PropData::Oxms(oxms)
                }
                _ => {
                    super::unknown_prop(&p, loose)?;
                    PropData::Raw(p.payload.to_vec())
                }
            };
            tf.properties.push(TableFeatureProp { kind: p.kind, data });
        }
        let missing = (seen & REQUIRED) ^ REQUIRED;
        if missing != 0 && (!tf.properties.is_empty() || version < Version::Of15) {
            return Err(OfpErr::OfptffcBadFeatures);
        }
        Ok(tf)
    }
}

/// Instruction or action ids (OVS's `ofpprop_pull__` with alignment 1): each a type and a
/// length of at least 4. Instruction types other than OpenFlow's six are
/// `OFPBIC_UNKNOWN_INST` unless `loose` (then dropped).
fn pull_ids(b: &[u8], instructions: bool, loose: bool) -> Result<Vec<u16>, OfpErr> {
    let mut r = Reader::new(b);
    let mut v = Vec::new();
    while !r.is_empty() {
        if r.rest().len() < 4 {
            return Err(OfpErr::OfpbpcBadLen);
        }
        let t = r.u16()?;
        let len = usize::from(r.u16()?);
        if len < 4 || len - 4 > r.rest().len() {
            return Err(OfpErr::OfpbpcBadLen);
        }
        r.skip(len - 4)?;
        if instructions && !(1..=6).contains(&t) {
            if loose {
                continue;
            }
            return Err(OfpErr::OfpbicUnknownInst);
        }
        v.push(t);
    }
    Ok(v)
}

/// Appends a table features request that asks for every table's features (no body).
pub fn encode_request(version: Version, xid: u32, out: &mut Vec<u8>) -> Result<(), NotInVersion> {
    let at = MsgType::Ofpst13TableFeaturesRequest.start(version, xid, out)?;
    let _ = super::finish(out, at);
    Ok(())
}

/// Reads a table features request: the tables it would configure (empty: a query). Read
/// strictly, as OVS reads what a controller asks of it.
pub fn decode_request(msg: &Message<'_>) -> Result<Vec<TableFeatures>, OfpErr> {
    super::expect(msg, &[MsgType::Ofpst13TableFeaturesRequest])?;
    pull_all(msg, false)
}

/// The records of one table features reply message, read loosely as a controller reads them.
pub fn decode_reply(msg: &Message<'_>) -> Result<Vec<TableFeatures>, OfpErr> {
    super::expect(msg, &[MsgType::Ofpst13TableFeaturesReply])?;
    pull_all(msg, true)
}

fn pull_all(msg: &Message<'_>, loose: bool) -> Result<Vec<TableFeatures>, OfpErr> {
    let version = super::version_of(msg)?;
    let mut r = Reader::new(msg.body);
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(TableFeatures::pull(version, &mut r, loose)?);
    }
    Ok(v)
}

/// The replies to the table features request `request`: one record per table, split across
/// messages between records as OVS splits them.
pub fn encode_reply(
    request: &Message<'_>,
    tables: &[TableFeatures],
) -> Result<Vec<Vec<u8>>, EncodeError> {
    super::stats_replies(request, tables, TableFeatures::put)
}

/// The action types OVS lists for write- and apply-actions in OpenFlow 1.3 on: output,
/// the MPLS TTL actions, push/pop VLAN and MPLS, set-queue, group, the IP TTL actions and
/// set-field.
pub const OVS_ACTION_IDS: [u16; 12] = [0, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25];

/// The fields a switch's tables match and set, as their headers in the version asked
/// about: what [`ovs_tables`] lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldLists {
    /// Fields set-field may write.
    pub set_fields: Vec<OxmId>,
    /// Matchable fields, the arbitrarily maskable ones with the has-mask bit.
    pub matches: Vec<OxmId>,
    /// Fields that may be wildcarded.
    pub wildcards: Vec<OxmId>,
}

/// The features OVS reports for tables `0..n_tables` in `version` (`query_tables` in OVS's
/// `ofproto/ofproto.c`): no name, all metadata bits, 1 000 000 flows; every instruction
/// (meter only before 1.5; no goto-table in the last table), any later table as the next,
/// [`OVS_ACTION_IDS`] with `fields`' set-fields for both write and apply, the same for the
/// table-miss flow, then the matchable and wildcardable fields.
pub fn ovs_tables(version: Version, n_tables: u8, fields: &FieldLists) -> Vec<TableFeatures> {
    (0..n_tables)
        .map(|id| {
            let last = id + 1 == n_tables;
            let max_inst = if version >= Version::Of15 { 5 } else { 6 };
            let first_inst = if last { 2 } else { 1 };
            let mut properties = Vec::new();
            for miss in [0, 1] {
                let p = |kind: u16, data| TableFeatureProp {
                    kind: kind + miss,
                    data,
                };
                properties.extend([
                    p(
                        OFPTFPT13_INSTRUCTIONS,
                        PropData::Ids((first_inst..=max_inst).collect()),
                    ),
                    p(
                        OFPTFPT13_NEXT_TABLES,
                        PropData::Tables((id + 1..n_tables).collect()),
                    ),
                    p(
                        OFPTFPT13_WRITE_ACTIONS,
                        PropData::Ids(OVS_ACTION_IDS.to_vec()),
                    ),
                    p(
                        OFPTFPT13_WRITE_SETFIELD,
                        PropData::Oxms(fields.set_fields.clone()),
                    ),
                    p(
                        OFPTFPT13_APPLY_ACTIONS,
                        PropData::Ids(OVS_ACTION_IDS.to_vec()),
                    ),
                    p(
                        OFPTFPT13_APPLY_SETFIELD,
                        PropData::Oxms(fields.set_fields.clone()),
                    ),
                ]);
            }
            properties.push(TableFeatureProp {
                kind: OFPTFPT13_MATCH,
                data: PropData::Oxms(fields.matches.clone()),
            });
            properties.push(TableFeatureProp {
                kind: OFPTFPT13_WILDCARDS,
                data: PropData::Oxms(fields.wildcards.clone()),
            });
            TableFeatures {
                table_id: id,
                command: 0,
                name: String::new(),
                metadata_match: u64::MAX,
                metadata_write: u64::MAX,
                capabilities: 0,
                max_entries: 1_000_000,
                properties,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, ofctl, ovs_lines as ovs, unhex};
    use super::*;
    use crate::msgtype;
    use proptest::prelude::*;

    /// OVS 3.1's answer for its 254 tables, rebuilt from the field lists of its table 0: the
    /// same records for tables 0, 1, 252 and 253, and the same split into messages.
    #[test]
    fn the_254_tables_as_ovs_answers_them() {
        for (label, v) in [
            ("table-features-of13", Version::Of13),
            ("table-features-of15", Version::Of15),
        ] {
            let req = unhex(&ovs(label, "request")[0]);
            let records = ovs(label, "table");
            let t0 = unhex(&records[0]);
            let mut m = Vec::new();
            MsgType::Ofpst13TableFeaturesReply
                .encode(v, 1, &t0, &mut m)
                .unwrap();
            let t0 = decode_reply(&msg(&m)).unwrap().remove(0);
            let oxms = |kind| match &t0.properties.iter().find(|p| p.kind == kind).unwrap().data {
                PropData::Oxms(o) => o.clone(),
                _ => unreachable!(),
            };
            let fields = FieldLists {
                set_fields: oxms(OFPTFPT13_APPLY_SETFIELD),
                matches: oxms(OFPTFPT13_MATCH),
                wildcards: oxms(OFPTFPT13_WILDCARDS),
            };
            let tables = ovs_tables(v, 254, &fields);
            let msgs = encode_reply(&msg(&req), &tables).unwrap();
            let sizes: Vec<_> = msgs.iter().map(|m| m.len().to_string()).collect();
            assert_eq!(sizes.join(","), ovs(label, "sizes")[0], "{label}");
            assert_eq!(hex(&msgs[0][..16]), ovs(label, "headers")[0]);
            for (rec, id) in records.iter().zip([0usize, 1, 252, 253]) {
                let mut b = Vec::new();
                tables[id].put(v, &mut b);
                assert_eq!(hex(&b), *rec, "{label} table {id}");
            }
            let back: Vec<_> = msgs
                .iter()
                .flat_map(|m| decode_reply(&msg(m)).unwrap())
                .collect();
            assert_eq!(back, tables);
        }
    }

    #[test]
    fn requests_as_ovs_ofctl_sends_them() {
        for label in ["bundle-add-flow-of13", "bundle-add-flow-of14"] {
            let m = &ofctl(label)[0];
            let d = msg(m);
            assert_eq!(decode_request(&d).unwrap(), vec![]);
            let mut out = Vec::new();
            encode_request(Version::from_wire(d.version).unwrap(), d.xid, &mut out).unwrap();
            assert_eq!(&out, m);
        }
        assert!(encode_request(Version::Of12, 1, &mut Vec::new()).is_err());
    }

    fn record(props: &[TableFeatureProp]) -> Vec<u8> {
        let t = TableFeatures {
            table_id: 3,
            command: 0,
            name: "t".into(),
            metadata_match: 0,
            metadata_write: 0,
            capabilities: 0,
            max_entries: 10,
            properties: props.to_vec(),
        };
        let mut b = Vec::new();
        t.put(Version::Of13, &mut b);
        let mut m = Vec::new();
        MsgType::Ofpst13TableFeaturesRequest
            .encode(Version::Of13, 1, &b, &mut m)
            .unwrap();
        m
    }

    #[test]
    fn requests_are_read_strictly() {
        let fields = FieldLists {
            set_fields: vec![OxmId {
                header: 0x8000_0606,
                experimenter: None,
            }],
            matches: vec![OxmId {
                header: 0x8000_0706,
                experimenter: None,
            }],
            wildcards: vec![],
        };
        let mut props = ovs_tables(Version::Of13, 2, &fields).remove(0).properties;
        assert!(decode_request(&msg(&record(&props))).is_ok());
        // A required property missing; one twice; an unknown instruction; a masked set-field.
        let mut p = props.clone();
        p.retain(|p| p.kind != OFPTFPT13_WILDCARDS);
        assert_eq!(
            decode_request(&msg(&record(&p))),
            Err(OfpErr::OfptffcBadFeatures)
        );
        let mut p = props.clone();
        p.push(p[0].clone());
        assert_eq!(
            decode_request(&msg(&record(&p))),
            Err(OfpErr::OfptffcBadFeatures)
        );
        props[0].data = PropData::Ids(vec![7]);
        assert_eq!(
            decode_request(&msg(&record(&props))),
            Err(OfpErr::OfpbicUnknownInst)
        );
        props[0].data = PropData::Ids(vec![1]);
        props[3].data = PropData::Oxms(vec![OxmId {
            header: 0x8000_0710,
            experimenter: None,
        }]);
        assert_eq!(
            decode_request(&msg(&record(&props))),
            Err(OfpErr::OfpbmcBadMask)
        );
        props[3].data = PropData::Tables(vec![0xff]);
        props[3].kind = OFPTFPT13_NEXT_TABLES;
        assert_eq!(
            decode_request(&msg(&record(&props))),
            Err(OfpErr::OfptffcBadFeatures)
        );
        let mut m = record(&[]);
        m[18] = 0xff;
        assert_eq!(decode_request(&msg(&m)), Err(OfpErr::OfptffcBadTable));
    }

    proptest! {
        #[test]
        fn records_round_trip(
            id in 0u8..255,
            next in proptest::collection::vec(0u8..255, 0..8),
            oxms in proptest::collection::vec((any::<u32>(), any::<u32>()), 0..8),
        ) {
            let oxms: Vec<_> = oxms.into_iter().map(|(h, e)| {
                if h >> 16 == 0xffff {
                    OxmId { header: (h | 4) & !0x100, experimenter: Some(e) }
                } else {
                    OxmId { header: h & !0x100, experimenter: None }
                }
            }).collect();
            let fields = FieldLists { set_fields: oxms.clone(), matches: oxms.clone(), wildcards: oxms };
            let mut t = ovs_tables(Version::Of15, 255, &fields).remove(usize::from(id));
            t.properties[1].data = PropData::Tables(next);
            let mut b = Vec::new();
            t.put(Version::Of15, &mut b);
            let mut m = Vec::new();
            MsgType::Ofpst13TableFeaturesReply.encode(Version::Of15, 1, &b, &mut m).unwrap();
            prop_assert_eq!(decode_reply(&msg(&m)).unwrap(), vec![t]);
        }

        #[test]
        fn random_bodies_never_panic(v in 4u8..=6, body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let v = Version::from_wire(v).unwrap();
            for t in [MsgType::Ofpst13TableFeaturesRequest, MsgType::Ofpst13TableFeaturesReply] {
                let mut m = Vec::new();
                if t.encode(v, 0, &body, &mut m).is_ok() && let Ok(d) = msgtype::decode(&m) {
                    let _ = decode_request(&d);
                    let _ = decode_reply(&d);
                }
            }
        }
    }
}
