//! The Geneve option (TLV) map over OpenFlow: `NXT_TLV_TABLE_REQUEST` answered from the
//! bridge's map, `NXT_TLV_TABLE_MOD` applied to it with OVS's errors (`lib/tun-metadata.c`,
//! `tun_metadata_table_mod()`).
//!
//! The bridge maps options to `tun_metadata0` to `tun_metadata7`, values of at most 16 bytes;
//! the reply states OVS's limits (64 fields, 256 bytes), as `ofctl/dump-tlv-map` does, and a
//! mapping beyond what the bridge holds is refused as a full table.

use ofproto::bridge::Bridge;
use ofproto::fields::{N_TUN_METADATA, TUN_METADATA_MAX_LEN};
use ofproto::ofproto::Ofproto;
use ofproto::tunnel::TlvMapping;
use openflow::error::OfpErr;
use openflow::msgs::tlv::{TlvCommand, TlvMap, TlvTableMod, TlvTableReply};

/// The bridge's map as a reply.
pub(crate) fn reply(b: &Bridge) -> TlvTableReply {
    TlvTableReply {
        mappings: current(b),
        ..TlvTableReply::ovs_empty()
    }
}

fn current(b: &Bridge) -> Vec<TlvMap> {
    b.tlv_map
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            m.map(|mapping| TlvMap {
                index: i as u16,
                mapping,
            })
        })
        .collect()
}

/// The map after `t`, or OVS's error: a field already mapped is `NXTTMFC_ALREADY_MAPPED`, an
/// option mapped twice `NXTTMFC_DUP_ENTRY`, a deleted field that was not mapped
/// `NXTTMFC_INVALID_TLV_DEL`, and a field or length the bridge cannot hold
/// `NXTTMFC_TABLE_FULL`.
pub(crate) fn table_after(b: &Bridge, t: &TlvTableMod) -> Result<Vec<TlvMap>, OfpErr> {
    let mut maps = current(b);
    match t.command {
        TlvCommand::Clear => maps.clear(),
        TlvCommand::Add => {
            for m in &t.mappings {
                if maps.iter().any(|o| o.index == m.index) {
                    return Err(OfpErr::NxttmfcAlreadyMapped);
                }
                if maps
                    .iter()
                    .any(|o| o.mapping.class == m.mapping.class && o.mapping.kind == m.mapping.kind)
                {
                    return Err(OfpErr::NxttmfcDupEntry);
                }
                if usize::from(m.index) >= N_TUN_METADATA
                    || usize::from(m.mapping.len) > TUN_METADATA_MAX_LEN
                    || m.mapping.len == 0
                {
                    return Err(OfpErr::NxttmfcTableFull);
                }
                maps.push(*m);
            }
        }
        TlvCommand::Delete => {
            for m in &t.mappings {
                let i = maps
                    .iter()
                    .position(|o| o.index == m.index)
                    .ok_or(OfpErr::NxttmfcInvalidTlvDel)?;
                maps.remove(i);
            }
        }
    }
    Ok(maps)
}

/// Makes `maps` the bridge's map (through the same path as `ofctl/add-tlv-map`).
pub(crate) fn install(of: &Ofproto, bridge: &str, maps: &[TlvMap]) -> Result<(), OfpErr> {
    let text: Vec<String> = maps.iter().map(|m| text(m.index, m.mapping)).collect();
    of.del_tlv_map(bridge).map_err(|_| OfpErr::OfpbrcEperm)?;
    if !text.is_empty() {
        of.add_tlv_map(bridge, &text.join(","))
            .map_err(|_| OfpErr::NxttmfcTableFull)?;
    }
    Ok(())
}

/// A mapping in `add-tlv-map`'s syntax.
fn text(index: u16, m: TlvMapping) -> String {
    format!(
        "{{class={:#x},type={:#x},len={}}}->tun_metadata{index}",
        m.class, m.kind, m.len
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let add = tm(TlvCommand::Add, vec![map(0, 0x102, 0x80, 4)]);
        let b = |f: &dyn Fn(&Bridge) -> Result<Vec<TlvMap>, OfpErr>| {
            let p = of.pipe.read().unwrap();
            f(p.bridge("br0").unwrap())
        };
        let maps = b(&|br| table_after(br, &add)).unwrap();
        install(&of, "br0", &maps).unwrap();
        assert_eq!(b(&|br| Ok(reply(br).mappings)).unwrap(), maps);
        assert!(
            of.dump_tlv_map("br0")
                .unwrap()
                .contains("0x102\t0x80\t4\ttun_metadata0")
        );
        assert_eq!(
            b(&|br| table_after(br, &add)),
            Err(OfpErr::NxttmfcAlreadyMapped)
        );
        let dup = tm(TlvCommand::Add, vec![map(1, 0x102, 0x80, 8)]);
        assert_eq!(b(&|br| table_after(br, &dup)), Err(OfpErr::NxttmfcDupEntry));
        let far = tm(TlvCommand::Add, vec![map(9, 0x102, 0x81, 8)]);
        assert_eq!(
            b(&|br| table_after(br, &far)),
            Err(OfpErr::NxttmfcTableFull)
        );
        let del = tm(TlvCommand::Delete, vec![map(3, 0, 0, 0)]);
        assert_eq!(
            b(&|br| table_after(br, &del)),
            Err(OfpErr::NxttmfcInvalidTlvDel)
        );
        let del = tm(TlvCommand::Delete, vec![map(0, 0, 0, 0)]);
        let maps = b(&|br| table_after(br, &del)).unwrap();
        install(&of, "br0", &maps).unwrap();
        assert!(b(&|br| Ok(reply(br).mappings)).unwrap().is_empty());
    }
}
