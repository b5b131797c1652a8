//! A bridge's Geneve option (TLV) map as `ovs-ofctl add-tlv-map`, `del-tlv-map` and
//! `dump-tlv-map` and `NXT_TLV_TABLE_MOD` change and show it (OVS's `handle_tlv_table_mod()`):
//! additions fail as [`crate::tun_md::TunTable::add`] says, and a deletion of a field that a
//! flow matches or writes fails as [`TlvModError::InUse`] (OVS's `NXTTMFC_INVALID_TLV_DEL`).

use std::fmt::Write;

use super::Ofproto;
use crate::fields::{FieldId, N_TUN_METADATA};
use crate::syntax::OfAction;
use crate::tun_md::TunTableError;
use crate::tunnel::TlvMapping;

/// Why a TLV map change failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TlvModError {
    #[error("no bridge named {0}")]
    NoBridge(String),
    #[error(transparent)]
    Table(#[from] TunTableError),
    #[error("a flow uses tun_metadata{0}")]
    InUse(usize),
}

impl Ofproto {
    /// `add-tlv-map BRIDGE MAP`.
    pub fn add_tlv_map(&self, bridge: &str, text: &str) -> Result<(), String> {
        let maps = crate::tunnel::parse_tlv_map(text)?;
        self.tlv_add(bridge, &maps).map_err(|e| e.to_string())
    }

    /// Adds `maps` (field number, option) to the bridge's map, all or none.
    pub fn tlv_add(&self, bridge: &str, maps: &[(usize, TlvMapping)]) -> Result<(), TlvModError> {
        let mut p = self.write();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| TlvModError::NoBridge(bridge.to_owned()))?;
        b.tlv_map.add(maps)?;
        drop(p);
        self.changed();
        Ok(())
    }

    /// `del-tlv-map BRIDGE [MAP]`: removes the mappings of the fields `MAP` names, or every
    /// mapping.
    pub fn del_tlv_map(&self, bridge: &str, text: Option<&str>) -> Result<(), String> {
        let fields = match text {
            Some(t) => Some(
                crate::tunnel::parse_tlv_map(t)?
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect::<Vec<_>>(),
            ),
            None => None,
        };
        self.tlv_delete(bridge, fields.as_deref())
            .map_err(|e| e.to_string())
    }

    /// Removes the mappings of `fields` (every mapping for `None`); a field that is not mapped
    /// is no error, one that a flow uses is.
    pub fn tlv_delete(&self, bridge: &str, fields: Option<&[usize]>) -> Result<(), TlvModError> {
        let mut p = self.write();
        let b = p
            .bridge_mut(bridge)
            .ok_or_else(|| TlvModError::NoBridge(bridge.to_owned()))?;
        let all: Vec<usize> = (0..N_TUN_METADATA).collect();
        let fields = fields.unwrap_or(&all);
        let used = tun_md_in_use(b);
        if let Some(&n) = fields
            .iter()
            .find(|&&n| b.tlv_map.get(n).is_some() && used & (1 << (n % 64)) != 0)
        {
            return Err(TlvModError::InUse(n));
        }
        for &n in fields {
            b.tlv_map.delete(n);
        }
        drop(p);
        self.changed();
        Ok(())
    }

    /// A `tun_metadata` field `spec` uses that `bridge`'s TLV map does not map (see
    /// [`crate::bridge::Bridge::unmapped_tun_md`]).
    pub fn unmapped_tun_md(&self, bridge: &str, spec: &crate::syntax::FlowSpec) -> Option<usize> {
        self.read().bridge(bridge)?.unmapped_tun_md(spec)
    }

    /// `dump-tlv-map BRIDGE` in `ovs-ofctl`'s layout.
    pub fn dump_tlv_map(&self, bridge: &str) -> Result<String, String> {
        let p = self.read();
        let b = p
            .bridge(bridge)
            .ok_or_else(|| format!("no bridge named {bridge}"))?;
        let mut out = format!(
            "NXT_TLV_TABLE_REPLY (xid=0x4):\n max option space=256 max fields=64\n allocated \
             option space={}\n\n mapping table:\n class\ttype\tlength\tmatch field\n \
             -----\t----\t------\t-----------\n",
            b.tlv_map.allocated()
        );
        for (n, m) in b.tlv_map.iter() {
            let _ = writeln!(
                out,
                " {:#x}\t{:#x}\t{}\ttun_metadata{n}",
                m.class, m.kind, m.len
            );
        }
        Ok(out)
    }
}

impl crate::bridge::Bridge {
    /// A `tun_metadata` field the flow matches or writes that the bridge's TLV map does not
    /// map (OVS refuses such a flow mod with `NXFMFC_INVALID_TLV_FIELD`).
    pub fn unmapped_tun_md(&self, spec: &crate::syntax::FlowSpec) -> Option<usize> {
        let used = spec.match_.mask().meta.tun_md_present | actions_use(&spec.actions);
        (0..N_TUN_METADATA).find(|&n| used & (1 << n) != 0 && self.tlv_map.get(n).is_none())
    }
}

/// The `tun_metadata` fields the bridge's flows match or write (bit `n`).
fn tun_md_in_use(b: &crate::bridge::Bridge) -> u64 {
    let mut used = 0;
    for t in &b.tables {
        for (_, m, _, rule) in t.iter() {
            used |= m.tun_md_matched() | actions_use(&rule.actions);
        }
    }
    used
}

/// The `tun_metadata` fields `actions` write or read (bit `n`).
fn actions_use(actions: &[OfAction]) -> u64 {
    let bit = |f: FieldId| match f.field().loc {
        crate::fields::Loc::TunMetadata(n) => 1u64 << (n % 64),
        _ => 0,
    };
    actions
        .iter()
        .map(|a| match a {
            OfAction::SetField { field, .. } | OfAction::SetTunMetadata { field, .. } => {
                bit(*field)
            }
            OfAction::RegMove { src, dst } => bit(src.field) | bit(dst.field),
            OfAction::OutputReg { src, .. } => bit(src.field),
            OfAction::StackPush(sf) | OfAction::StackPop(sf) => bit(sf.field),
            OfAction::CheckPktLarger { dst, .. } => bit(dst.field),
            OfAction::Clone(inner) | OfAction::WriteActions(inner) => actions_use(inner),
            _ => 0,
        })
        .fold(0, |a, b| a | b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_a_flow_writes_is_in_use_and_unmapped_fields_are_refused() {
        let _g = crate::tun_md::test_serial();
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        of.add_tlv_map(
            "br0",
            "{class=1,type=1,len=8}->tun_metadata20,{class=1,type=2,len=4}->tun_metadata21",
        )
        .unwrap();
        of.add_flow("br0", "actions=set_field:0x1->tun_metadata20")
            .unwrap();
        assert_eq!(
            of.tlv_delete("br0", Some(&[20])),
            Err(TlvModError::InUse(20))
        );
        assert_eq!(of.tlv_delete("br0", None), Err(TlvModError::InUse(20)));
        // Field 22 is not mapped: no error, as in OVS.
        assert_eq!(of.tlv_delete("br0", Some(&[21, 22])), Ok(()));
        let e = of
            .add_flow("br0", "tun_metadata21=0x1,actions=drop")
            .unwrap_err();
        assert!(e.contains("INVALID_TLV_FIELD"), "{e}");
        assert!(
            of.dump_tlv_map("br0")
                .unwrap()
                .contains("allocated option space=8")
        );
    }
}
