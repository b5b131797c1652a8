//! OpenFlow 1.1+ instructions (`struct ofp11_instruction`): meter (1.3 and 1.4), apply-actions,
//! clear-actions, write-actions, write-metadata and goto-table, in that order, as OVS writes
//! them. The pipeline keeps them in one list beside the actions ([`OfAction::Meter`],
//! [`OfAction::WriteMetadata`], [`OfAction::GotoTable`]); apply-actions holds everything else.
//! The action set (write-actions, clear-actions) is not modelled yet: those instructions are
//! refused as unsupported (`OFPBIC_UNSUP_INST`).

use ofproto::syntax::OfAction;

use super::{EncodeError, FlowCtx, be16, be32, be64, decode_into};
use crate::error::OfpErr;
use crate::header::Version;

const OFPIT11_GOTO_TABLE: u16 = 1;
const OFPIT11_WRITE_METADATA: u16 = 2;
const OFPIT11_WRITE_ACTIONS: u16 = 3;
const OFPIT11_APPLY_ACTIONS: u16 = 4;
const OFPIT11_CLEAR_ACTIONS: u16 = 5;
const OFPIT13_METER: u16 = 6;
const OFPIT11_EXPERIMENTER: u16 = 0xffff;

/// Decodes the instructions of an OpenFlow 1.1+ flow into the pipeline's list: meter, the
/// applied actions, write-metadata, goto-table. OpenFlow 1.0 has no instructions: its action
/// list is decoded as is.
pub fn decode_instructions(version: Version, buf: &[u8]) -> Result<Vec<OfAction>, OfpErr> {
    if version == Version::Of10 {
        return super::decode_actions(version, buf);
    }
    let (mut meter, mut apply, mut metadata, mut goto) = (None, None, None, None);
    let mut rest = buf;
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err(OfpErr::OfpbicBadLen);
        }
        let (ty, len) = (be16(rest, 0), usize::from(be16(rest, 2)));
        if len < 8 || !len.is_multiple_of(8) || len > rest.len() {
            return Err(OfpErr::OfpbicBadLen);
        }
        let b = &rest[..len];
        let fixed = |n: usize| {
            if len == n {
                Ok(())
            } else {
                Err(OfpErr::OfpbicBadLen)
            }
        };
        let dup = |seen: bool| {
            if seen {
                Err(OfpErr::OfpbicDupInst)
            } else {
                Ok(())
            }
        };
        match ty {
            OFPIT11_GOTO_TABLE => {
                fixed(8)?;
                dup(goto.is_some())?;
                goto = Some(OfAction::GotoTable(b[4]));
            }
            OFPIT11_WRITE_METADATA => {
                fixed(24)?;
                dup(metadata.is_some())?;
                metadata = Some(OfAction::WriteMetadata {
                    value: be64(b, 8),
                    mask: be64(b, 16),
                });
            }
            OFPIT11_APPLY_ACTIONS => {
                dup(apply.is_some())?;
                let mut acts = Vec::new();
                decode_into(version, &b[8..], 0, &mut acts)?;
                apply = Some(acts);
            }
            OFPIT13_METER if version >= Version::Of13 => {
                fixed(8)?;
                dup(meter.is_some())?;
                meter = Some(OfAction::Meter(be32(b, 4)));
            }
            // The action set is not modelled: the instructions are checked as OVS checks
            // them, then refused.
            OFPIT11_WRITE_ACTIONS => {
                decode_into(version, &b[8..], 0, &mut Vec::new())?;
                return Err(OfpErr::OfpbicUnsupInst);
            }
            OFPIT11_CLEAR_ACTIONS => {
                fixed(8)?;
                return Err(OfpErr::OfpbicUnsupInst);
            }
            OFPIT11_EXPERIMENTER => return Err(OfpErr::OfpbicBadExperimenter),
            _ => return Err(OfpErr::OfpbicUnknownInst),
        }
        rest = &rest[len..];
    }
    let mut out: Vec<OfAction> = meter.into_iter().collect();
    out.extend(apply.unwrap_or_default());
    out.extend(metadata);
    out.extend(goto);
    Ok(out)
}

/// Appends the instructions (OpenFlow 1.1+) or actions (1.0) that carry `actions`.
pub fn encode_instructions(
    version: Version,
    actions: &[OfAction],
    flow: FlowCtx,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if version == Version::Of10 {
        return super::encode_actions(version, actions, flow, out);
    }
    let is_insn = |a: &OfAction| {
        matches!(a, OfAction::WriteMetadata { .. } | OfAction::GotoTable(_))
            || (matches!(a, OfAction::Meter(_)) && version < Version::Of15)
    };
    for a in actions {
        if let OfAction::Meter(m) = a
            && version < Version::Of15
        {
            if version < Version::Of13 {
                return Err(super::unencodable("meter", version));
            }
            out.extend_from_slice(&OFPIT13_METER.to_be_bytes());
            out.extend_from_slice(&8u16.to_be_bytes());
            out.extend_from_slice(&m.to_be_bytes());
        }
    }
    let applied: Vec<OfAction> = actions.iter().filter(|a| !is_insn(a)).cloned().collect();
    if !applied.is_empty() {
        let at = out.len();
        out.extend_from_slice(&OFPIT11_APPLY_ACTIONS.to_be_bytes());
        out.extend_from_slice(&[0; 6]);
        super::encode_actions(version, &applied, flow, out)?;
        let len = (out.len() - at) as u16;
        out[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
    }
    for a in actions {
        if let OfAction::WriteMetadata { value, mask } = a {
            out.extend_from_slice(&OFPIT11_WRITE_METADATA.to_be_bytes());
            out.extend_from_slice(&24u16.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(&value.to_be_bytes());
            out.extend_from_slice(&mask.to_be_bytes());
        }
    }
    for a in actions {
        if let OfAction::GotoTable(t) = a {
            out.extend_from_slice(&OFPIT11_GOTO_TABLE.to_be_bytes());
            out.extend_from_slice(&8u16.to_be_bytes());
            out.extend_from_slice(&[*t, 0, 0, 0]);
        }
    }
    Ok(())
}
