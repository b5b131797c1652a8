//! A bridge's Geneve option (TLV) map as `ovs-ofctl add-tlv-map`, `del-tlv-map` and
//! `dump-tlv-map` and `NXT_TLV_TABLE_MOD` change and show it (OVS's `handle_tlv_table_mod()`):
//! additions fail as [`crate::tun_md::TunTable::add`] says, and a deletion of a field that a
//! flow matches or writes fails as [`TlvModError::InUse`] (OVS's `NXTTMFC_INVALID_TLV_DEL`).

use std::fmt::Write;

use super::Ofproto;
use crate::fields::{FieldId, N_TUN_METADATA, Subfield};
use crate::learn::{LearnDst, LearnSrc};
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

    /// A `tun_metadata` subfield past its mapped length in the actions of `spec` (see
    /// [`crate::bridge::Bridge::tun_md_overrun`]).
    pub fn tun_md_overrun(&self, bridge: &str, spec: &crate::syntax::FlowSpec) -> Option<usize> {
        self.read().bridge(bridge)?.tun_md_overrun(spec)
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
    let mut used = 0;
    for_each_field(actions, &mut |f, _| used |= bit(f));
    used
}

/// Calls `visit` with each field `actions` read or write, with the subfield when the action
/// names one (`move`, `output:`, `push`/`pop`, `multipath`, `bundle_load`, `learn`...),
/// nested actions included.
fn for_each_field(actions: &[OfAction], visit: &mut impl FnMut(FieldId, Option<Subfield>)) {
    fn sf(visit: &mut impl FnMut(FieldId, Option<Subfield>), s: Subfield) {
        visit(s.field, Some(s));
    }
    for a in actions {
        match a {
            OfAction::SetField { field, .. } | OfAction::SetTunMetadata { field, .. } => {
                visit(*field, None)
            }
            OfAction::RegMove { src, dst } => {
                sf(visit, *src);
                sf(visit, *dst);
            }
            OfAction::OutputReg { src, .. } => sf(visit, *src),
            OfAction::StackPush(s) | OfAction::StackPop(s) => sf(visit, *s),
            OfAction::CheckPktLarger { dst, .. } => sf(visit, *dst),
            OfAction::Multipath(m) => sf(visit, m.dst),
            OfAction::Bundle(b) => {
                if let Some(d) = b.dst {
                    sf(visit, d);
                }
            }
            OfAction::Learn(l) => {
                for spec in &l.specs {
                    if let LearnSrc::Field(s) = spec.src {
                        sf(visit, s);
                    }
                    if let LearnDst::Match(d) | LearnDst::Load(d) = spec.dst {
                        sf(visit, d);
                    }
                }
                if let Some(d) = l.result_dst {
                    sf(visit, d);
                }
            }
            OfAction::Clone(inner) | OfAction::WriteActions(inner) => for_each_field(inner, visit),
            OfAction::Ct(ct) => {
                if let crate::syntax::CtZone::Field(z) = ct.zone {
                    sf(visit, z);
                }
                for_each_field(&ct.actions, visit);
            }
            _ => {}
        }
    }
}

impl crate::bridge::Bridge {
    /// A `tun_metadata` subfield the flow's actions name that reaches past the bytes the
    /// bridge's TLV map gives the field (OVS refuses such a flow mod with
    /// `OFPBAC_BAD_SET_LEN`): the field's number.
    pub fn tun_md_overrun(&self, spec: &crate::syntax::FlowSpec) -> Option<usize> {
        let mut bad = None;
        for_each_field(&spec.actions, &mut |f, s| {
            if let (crate::fields::Loc::TunMetadata(n), Some(s)) = (f.field().loc, s)
                && let Some(m) = self.tlv_map.get(n)
                && s.ofs + s.n_bits > u32::from(m.len) * 8
            {
                bad.get_or_insert(n);
            }
        });
        bad
    }
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

    /// OVS's ofproto.at "flow mod with tunnel metadata": every action that names a field is
    /// checked against the map, unmapped fields and bits past the mapped length refused.
    #[test]
    fn actions_naming_unmapped_or_too_long_tunnel_metadata_are_refused() {
        let _g = crate::tun_md::test_serial();
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        of.add_tlv_map("br0", "{class=0xffff,type=0,len=4}->tun_metadata0")
            .unwrap();
        of.add_flow("br0", "in_port=1,actions=move:tun_metadata0[0..31]->reg0[]")
            .unwrap();
        for (actions, error) in [
            ("move:tun_metadata0[32..63]->reg0[]", "OFPBAC_BAD_SET_LEN"),
            ("pop:tun_metadata0[32..63]", "OFPBAC_BAD_SET_LEN"),
            ("output:tun_metadata0[32..63]", "OFPBAC_BAD_SET_LEN"),
            (
                "multipath(eth_src,50,modulo_n,1,0,tun_metadata1[0..31])",
                "NXFMFC_INVALID_TLV_FIELD",
            ),
            (
                "multipath(eth_src,50,modulo_n,1,0,tun_metadata0[32..63])",
                "OFPBAC_BAD_SET_LEN",
            ),
            (
                "bundle_load(eth_src,50,hrw,ofport,tun_metadata1[0..31],members:4,8)",
                "NXFMFC_INVALID_TLV_FIELD",
            ),
            (
                "learn(tun_metadata1[0..31]=reg0[0..31])",
                "NXFMFC_INVALID_TLV_FIELD",
            ),
            (
                "learn(tun_metadata0[32..63]=reg0[0..31])",
                "OFPBAC_BAD_SET_LEN",
            ),
            (
                "clone(move:tun_metadata1[0..31]->reg0[0..31])",
                "NXFMFC_INVALID_TLV_FIELD",
            ),
            (
                "ct(commit,zone=tun_metadata0[32..47])",
                "OFPBAC_BAD_SET_LEN",
            ),
        ] {
            let e = of
                .add_flow("br0", &format!("ip,in_port=2,actions={actions}"))
                .unwrap_err();
            assert!(e.contains(error), "{actions}: {e}");
        }
    }
}
