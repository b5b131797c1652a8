//! The Geneve option (TLV) map over OpenFlow: `NXT_TLV_TABLE_REQUEST` answered from the
//! bridge's map, `NXT_TLV_TABLE_MOD` applied to it with OVS's errors (`lib/tun-metadata.c`,
//! `tun_metadata_table_mod()`, and `ofproto.c`'s `handle_tlv_table_mod()`).
//!
//! The bridge maps options to `tun_metadata0` to `tun_metadata63`, values of up to 124 bytes
//! in a 256-byte option space ([`ofproto::tun_md`]): a field already mapped is
//! `NXTTMFC_ALREADY_MAPPED`, an option mapped twice `NXTTMFC_DUP_ENTRY`, an option that does
//! not fit `NXTTMFC_TABLE_FULL`, and deleting (or clearing) a field a flow uses
//! `NXTTMFC_INVALID_TLV_DEL`. Deleting a field that is not mapped is no error.

use ofproto::bridge::Bridge;
use ofproto::ofproto::{Ofproto, TlvModError};
use ofproto::tun_md::TunTableError;
use openflow::error::OfpErr;
use openflow::msgs::tlv::{TlvCommand, TlvMap, TlvTableMod, TlvTableReply};

/// The bridge's map as a reply.
pub(crate) fn reply(b: &Bridge) -> TlvTableReply {
    TlvTableReply {
        mappings: b
            .tlv_map
            .iter()
            .map(|(n, mapping)| TlvMap {
                index: n as u16,
                mapping,
            })
            .collect(),
        ..TlvTableReply::ovs_empty()
    }
}

/// Applies `t` to the bridge's map, all of it or (with OVS's error) none.
pub(crate) fn apply(of: &Ofproto, bridge: &str, t: &TlvTableMod) -> Result<(), OfpErr> {
    let fields: Vec<usize> = t.mappings.iter().map(|m| usize::from(m.index)).collect();
    let done = match t.command {
        TlvCommand::Add => {
            let maps: Vec<_> = t
                .mappings
                .iter()
                .map(|m| (usize::from(m.index), m.mapping))
                .collect();
            of.tlv_add(bridge, &maps)
        }
        TlvCommand::Delete => of.tlv_delete(bridge, Some(&fields)),
        TlvCommand::Clear => of.tlv_delete(bridge, None),
    };
    done.map_err(|e| match e {
        TlvModError::Table(TunTableError::AlreadyMapped) => OfpErr::NxttmfcAlreadyMapped,
        TlvModError::Table(TunTableError::DupEntry) => OfpErr::NxttmfcDupEntry,
        TlvModError::Table(TunTableError::TableFull) => OfpErr::NxttmfcTableFull,
        TlvModError::InUse(_) => OfpErr::NxttmfcInvalidTlvDel,
        TlvModError::NoBridge(_) => OfpErr::OfpbrcEperm,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofproto::tunnel::TlvMapping;

    fn map(index: u16, class: u16, kind: u8, len: u8) -> TlvMap {
        TlvMap {
            index,
            mapping: TlvMapping { class, kind, len },
        }
    }

    fn tm(command: TlvCommand, mappings: Vec<TlvMap>) -> TlvTableMod {
        TlvTableMod { command, mappings }
    }

    #[test]
    fn a_mod_changes_the_map_or_fails_as_ovs_fails_it() {
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        let mappings = || {
            let p = of.pipe.read().unwrap();
            reply(p.bridge("br0").unwrap()).mappings
        };
        let add = tm(TlvCommand::Add, vec![map(0, 0x102, 0x80, 4)]);
        apply(&of, "br0", &add).unwrap();
        assert_eq!(mappings(), add.mappings);
        assert!(
            of.dump_tlv_map("br0")
                .unwrap()
                .contains("0x102\t0x80\t4\ttun_metadata0")
        );
        assert_eq!(apply(&of, "br0", &add), Err(OfpErr::NxttmfcAlreadyMapped));
        let dup = tm(TlvCommand::Add, vec![map(1, 0x102, 0x80, 8)]);
        assert_eq!(apply(&of, "br0", &dup), Err(OfpErr::NxttmfcDupEntry));
        let big = tm(
            TlvCommand::Add,
            vec![
                map(9, 0x102, 0x81, 124),
                map(10, 0x102, 0x82, 124),
                map(11, 0x102, 0x83, 8),
            ],
        );
        assert_eq!(apply(&of, "br0", &big), Err(OfpErr::NxttmfcTableFull));
        assert_eq!(mappings().len(), 1);
        let del = tm(TlvCommand::Delete, vec![map(3, 0, 0, 0)]);
        assert_eq!(apply(&of, "br0", &del), Ok(()));
        of.add_flow("br0", "tun_metadata0=0x5,actions=drop")
            .unwrap();
        let del = tm(TlvCommand::Delete, vec![map(0, 0, 0, 0)]);
        assert_eq!(apply(&of, "br0", &del), Err(OfpErr::NxttmfcInvalidTlvDel));
        let clear = tm(TlvCommand::Clear, vec![]);
        assert_eq!(apply(&of, "br0", &clear), Err(OfpErr::NxttmfcInvalidTlvDel));
        of.del_flows("br0", None, false).unwrap();
        apply(&of, "br0", &del).unwrap();
        assert!(mappings().is_empty());
    }
}
