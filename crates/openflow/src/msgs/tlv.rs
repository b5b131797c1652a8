//! The Geneve option map: which option (class, type, length) each `tun_metadata<N>` field
//! holds. `NXT_TLV_TABLE_MOD` adds, deletes or clears mappings, `NXT_TLV_TABLE_REQUEST` asks
//! for them and `NXT_TLV_TABLE_REPLY` lists them with the switch's limits, as OVS's
//! `lib/ofp-match.c` reads and writes them. `ovn-controller` maps its option to
//! `tun_metadata0` this way before it installs a single flow.

use ofproto::tunnel::TlvMapping;

use super::{Reader, finish, put16, put32, start, zeros};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{Message, MsgType};

/// `TUN_METADATA_NUM_OPTS`: the `tun_metadata` fields OVS has, which bounds a mod's indexes.
pub const TUN_METADATA_NUM_OPTS: u16 = 64;
/// `TLV_MAX_OPT_SIZE`: the longest option value.
pub const TLV_MAX_OPT_SIZE: u8 = 124;
/// `TUN_METADATA_TOT_OPT_SIZE`: the option space OVS reports (`max_option_space`).
pub const TUN_METADATA_TOT_OPT_SIZE: u32 = 256;

/// One mapping: option → `tun_metadata<index>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlvMap {
    /// The `tun_metadata` field's number.
    pub index: u16,
    /// The option's class, type and length.
    pub mapping: TlvMapping,
}

/// What a TLV table mod does (`NXTTMC_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum TlvCommand {
    /// Add mappings (an option or field already mapped is an error).
    Add = 0,
    /// Delete the mappings of these fields.
    Delete = 1,
    /// Delete every mapping.
    Clear = 2,
}

/// `NXT_TLV_TABLE_MOD`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlvTableMod {
    /// What to do.
    pub command: TlvCommand,
    /// The mappings it is about.
    pub mappings: Vec<TlvMap>,
}

fn put_maps(maps: &[TlvMap], out: &mut Vec<u8>) {
    for m in maps {
        put16(out, m.mapping.class);
        out.push(m.mapping.kind);
        out.push(m.mapping.len);
        put16(out, m.index);
        zeros(out, 2);
    }
}

/// Reads mappings to the end of `r`: a length that is not a multiple of 4 up to 124 is
/// `NXTTMFC_BAD_OPT_LEN`, an index from `max_fields` on `NXTTMFC_BAD_FIELD_IDX`.
fn pull_maps(mut r: Reader<'_>, max_fields: u16) -> Result<Vec<TlvMap>, OfpErr> {
    let mut v = Vec::new();
    while !r.is_empty() {
        let class = r.u16()?;
        let kind = r.u8()?;
        let len = r.u8()?;
        let index = r.u16()?;
        r.skip(2)?;
        if len % 4 != 0 || len > TLV_MAX_OPT_SIZE {
            return Err(OfpErr::NxttmfcBadOptLen);
        }
        if index >= max_fields {
            return Err(OfpErr::NxttmfcBadFieldIdx);
        }
        v.push(TlvMap {
            index,
            mapping: TlvMapping { class, kind, len },
        });
    }
    Ok(v)
}

impl TlvTableMod {
    /// Appends the message.
    pub fn encode(
        &self,
        version: Version,
        xid: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), crate::msgtype::EncodeError> {
        let at = start(MsgType::NxtTlvTableMod, version, xid, out);
        put16(out, self.command as u16);
        zeros(out, 6);
        put_maps(&self.mappings, out);
        finish(out, at)
    }

    /// Reads the message; an unknown command is `NXTTMFC_BAD_COMMAND`.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(msg, &[MsgType::NxtTlvTableMod])?;
        let mut r = Reader::new(msg.body);
        let command = match r.u16()? {
            0 => TlvCommand::Add,
            1 => TlvCommand::Delete,
            2 => TlvCommand::Clear,
            _ => return Err(OfpErr::NxttmfcBadCommand),
        };
        r.skip(6)?;
        Ok(TlvTableMod {
            command,
            mappings: pull_maps(r, TUN_METADATA_NUM_OPTS)?,
        })
    }
}

/// Appends an `NXT_TLV_TABLE_REQUEST`.
pub fn encode_tlv_table_request(version: Version, xid: u32, out: &mut Vec<u8>) {
    let at = start(MsgType::NxtTlvTableRequest, version, xid, out);
    let _ = finish(out, at);
}

/// `NXT_TLV_TABLE_REPLY`: the switch's limits and current mappings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlvTableReply {
    /// Bytes of option values all mappings together may take.
    pub max_option_space: u32,
    /// The number of `tun_metadata` fields.
    pub max_fields: u16,
    /// The mappings.
    pub mappings: Vec<TlvMap>,
}

impl TlvTableReply {
    /// An empty map with OVS's limits: 256 bytes of options, 64 fields.
    pub fn ovs_empty() -> TlvTableReply {
        TlvTableReply {
            max_option_space: TUN_METADATA_TOT_OPT_SIZE,
            max_fields: TUN_METADATA_NUM_OPTS,
            mappings: Vec::new(),
        }
    }

    /// Appends the reply to the request `request`.
    pub fn encode(&self, request: &Message<'_>, out: &mut Vec<u8>) -> Result<(), OfpErr> {
        let version = super::version_of(request)?;
        let at = start(MsgType::NxtTlvTableReply, version, request.xid, out);
        put32(out, self.max_option_space);
        put16(out, self.max_fields);
        zeros(out, 10);
        put_maps(&self.mappings, out);
        finish(out, at).map_err(|_| OfpErr::OfpbrcBadLen)
    }

    /// Reads a reply; its indexes are checked against its own `max_fields`.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(msg, &[MsgType::NxtTlvTableReply])?;
        let mut r = Reader::new(msg.body);
        let max_option_space = r.u32()?;
        let max_fields = r.u16()?;
        r.skip(10)?;
        Ok(TlvTableReply {
            max_option_space,
            max_fields,
            mappings: pull_maps(r, max_fields)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, ofctl, unhex};
    use super::*;
    use crate::msgtype;
    use proptest::prelude::*;

    #[test]
    fn as_ovs_ofctl_sends_them() {
        let m = &ofctl("add-tlv-map-of15")[0];
        let t = TlvTableMod::decode(&msg(m)).unwrap();
        assert_eq!(
            t,
            TlvTableMod {
                command: TlvCommand::Add,
                mappings: vec![TlvMap {
                    index: 0,
                    mapping: TlvMapping {
                        class: 0x102,
                        kind: 0x80,
                        len: 4
                    }
                }]
            }
        );
        let mut out = Vec::new();
        t.encode(Version::Of15, 2, &mut out).unwrap();
        assert_eq!(&out, m);
        let m = &ofctl("del-tlv-map-of10")[2];
        assert_eq!(
            TlvTableMod::decode(&msg(m)).unwrap().command,
            TlvCommand::Clear
        );
        out.clear();
        encode_tlv_table_request(Version::Of10, 2, &mut out);
        assert_eq!(out, ofctl("dump-tlv-map-of10")[0]);
    }

    /// A reply `ovs-ofctl ofp-print` reads as "max option space=256 max fields=64" and one
    /// mapping, 0x102/0x80/4 to tun_metadata0.
    #[test]
    fn reply_as_ovs_prints_it() {
        let m = unhex(
            "0104002800000000 000023200000001a 0000010000400000 0000000000000000 \
             0102800400000000",
        );
        let r = TlvTableReply::decode(&msg(&m)).unwrap();
        assert_eq!((r.max_option_space, r.max_fields), (256, 64));
        assert_eq!(
            r.mappings,
            [TlvMap {
                index: 0,
                mapping: TlvMapping {
                    class: 0x102,
                    kind: 0x80,
                    len: 4
                }
            }]
        );
        let mut req = Vec::new();
        encode_tlv_table_request(Version::Of10, 0, &mut req);
        let mut out = Vec::new();
        TlvTableReply {
            mappings: r.mappings.clone(),
            ..TlvTableReply::ovs_empty()
        }
        .encode(&msg(&req), &mut out)
        .unwrap();
        assert_eq!(hex(&out), hex(&m));
    }

    #[test]
    fn empty_map_as_ovs_vswitchd_answers() {
        let (req, replies) = super::super::testutil::ovs_reply("tlv-table-of15");
        assert_eq!(
            TlvTableReply::decode(&msg(&replies[0])).unwrap(),
            TlvTableReply::ovs_empty()
        );
        let mut out = Vec::new();
        TlvTableReply::ovs_empty()
            .encode(&msg(&req), &mut out)
            .unwrap();
        assert_eq!(out, replies[0]);
    }

    #[test]
    fn bad_commands_lengths_and_indexes() {
        let mut m = Vec::new();
        let map = |index, len| TlvMap {
            index,
            mapping: TlvMapping {
                class: 1,
                kind: 2,
                len,
            },
        };
        TlvTableMod {
            command: TlvCommand::Add,
            mappings: vec![map(0, 6)],
        }
        .encode(Version::Of10, 0, &mut m)
        .unwrap();
        assert_eq!(TlvTableMod::decode(&msg(&m)), Err(OfpErr::NxttmfcBadOptLen));
        m.clear();
        TlvTableMod {
            command: TlvCommand::Add,
            mappings: vec![map(64, 4)],
        }
        .encode(Version::Of10, 0, &mut m)
        .unwrap();
        assert_eq!(
            TlvTableMod::decode(&msg(&m)),
            Err(OfpErr::NxttmfcBadFieldIdx)
        );
        m[17] = 3;
        assert_eq!(
            TlvTableMod::decode(&msg(&m)),
            Err(OfpErr::NxttmfcBadCommand)
        );
    }

    proptest! {
        #[test]
        fn mods_round_trip(cmd in 0usize..3, maps in proptest::collection::vec((0u16..64, any::<u16>(), any::<u8>(), 0u8..=31), 0..10)) {
            let t = TlvTableMod {
                command: [TlvCommand::Add, TlvCommand::Delete, TlvCommand::Clear][cmd],
                mappings: maps.into_iter().map(|(index, class, kind, l)| TlvMap {
                    index,
                    mapping: TlvMapping { class, kind, len: l * 4 },
                }).collect(),
            };
            let mut out = Vec::new();
            t.encode(Version::Of13, 1, &mut out).unwrap();
            prop_assert_eq!(TlvTableMod::decode(&msg(&out)).unwrap(), t);
        }

        #[test]
        fn random_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..64)) {
            for t in [MsgType::NxtTlvTableMod, MsgType::NxtTlvTableReply] {
                let mut m = Vec::new();
                if t.encode(Version::Of10, 0, &body, &mut m).is_ok() && let Ok(d) = msgtype::decode(&m) {
                    let _ = TlvTableMod::decode(&d);
                    let _ = TlvTableReply::decode(&d);
                }
            }
        }
    }
}
