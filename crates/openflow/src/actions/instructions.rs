//! OpenFlow 1.1+ instructions (`struct ofp11_instruction`): meter (1.3 and 1.4), apply-actions,
//! clear-actions, write-actions, write-metadata and goto-table, in that order, as OVS writes
//! them. The pipeline keeps them in one list beside the actions ([`OfAction::Meter`],
//! [`OfAction::ClearActions`], [`OfAction::WriteActions`], [`OfAction::WriteMetadata`],
//! [`OfAction::GotoTable`]); apply-actions holds everything else. Write-actions may carry only
//! what an action set can hold (`OFPBAC_BAD_TYPE` otherwise); an empty one is not sent, and
//! OpenFlow 1.0, which has no action set, carries neither.

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
///
/// As OVS does, the instructions' framing is checked first, all of it (experimenter, size of
/// each known kind, unknown kinds, repeats, a length that runs past the list), and only then
/// their contents, in the order meter, apply-actions, clear-actions, write-actions.
pub fn decode_instructions(version: Version, buf: &[u8]) -> Result<Vec<OfAction>, OfpErr> {
    if version == Version::Of10 {
        return super::decode_actions(version, buf);
    }
    // Pass 1: framing. Slots by kind: goto, write-metadata, write, apply, clear, meter.
    let mut slots: [Option<&[u8]>; 7] = [None; 7];
    let mut rest = buf;
    while rest.len() >= 8 {
        let (ty, len) = (be16(rest, 0), usize::from(be16(rest, 2)));
        if len < 8 || !len.is_multiple_of(8) || len > rest.len() {
            break;
        }
        let b = &rest[..len];
        let (extensible, size) = match ty {
            OFPIT11_EXPERIMENTER => return Err(OfpErr::OfpbicBadExperimenter),
            OFPIT11_GOTO_TABLE | OFPIT11_CLEAR_ACTIONS | OFPIT13_METER => (false, 8),
            OFPIT11_WRITE_METADATA => (false, 24),
            OFPIT11_WRITE_ACTIONS | OFPIT11_APPLY_ACTIONS => (true, 8),
            _ => return Err(OfpErr::OfpbicUnknownInst),
        };
        if if extensible { len < size } else { len != size } {
            return Err(OfpErr::OfpbicBadLen);
        }
        // "meter" is an action, not an instruction, in OpenFlow 1.5.
        if ty == OFPIT13_METER && version >= Version::Of15 {
            return Err(OfpErr::OfpbicUnknownInst);
        }
        let slot = &mut slots[usize::from(ty)];
        if slot.is_some() {
            return Err(OfpErr::OfpbicDupInst);
        }
        *slot = Some(b);
        rest = &rest[len..];
    }
    if !rest.is_empty() {
        return Err(OfpErr::OfpbicBadLen);
    }
    // Pass 2: contents.
    let mut out = Vec::new();
    if let Some(b) = slots[usize::from(OFPIT13_METER)] {
        out.push(OfAction::Meter(be32(b, 4)));
    }
    if let Some(b) = slots[usize::from(OFPIT11_APPLY_ACTIONS)] {
        decode_into(version, &b[8..], 0, &mut out)?;
        super::verify_nesting(&out, super::Outer::Top)?;
    }
    if slots[usize::from(OFPIT11_CLEAR_ACTIONS)].is_some() {
        out.push(OfAction::ClearActions);
    }
    if let Some(b) = slots[usize::from(OFPIT11_WRITE_ACTIONS)] {
        let mut set = Vec::new();
        decode_into(version, &b[8..], 0, &mut set)?;
        if !set.iter().all(ofproto::action_set::allowed_in_action_set) {
            return Err(OfpErr::OfpbacBadType);
        }
        super::verify_nesting(&set, super::Outer::Clone)?;
        out.push(OfAction::WriteActions(set));
    }
    if let Some(b) = slots[usize::from(OFPIT11_WRITE_METADATA)] {
        out.push(OfAction::WriteMetadata {
            value: be64(b, 8),
            mask: be64(b, 16),
        });
    }
    if let Some(b) = slots[usize::from(OFPIT11_GOTO_TABLE)] {
        out.push(OfAction::GotoTable(b[4]));
    }
    Ok(out)
}

/// Appends the instructions (OpenFlow 1.1+) or actions (1.0) that carry `actions`.
pub fn encode_instructions(
    version: Version,
    actions: &[OfAction],
    flow: FlowCtx,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let is_set = |a: &OfAction| matches!(a, OfAction::WriteActions(_) | OfAction::ClearActions);
    if version == Version::Of10 {
        // OpenFlow 1.0 has no action set: its instructions are left out, as OVS leaves them.
        let actions: Vec<OfAction> = actions.iter().filter(|a| !is_set(a)).cloned().collect();
        return super::encode_actions(version, &actions, flow, out);
    }
    let is_insn = |a: &OfAction| {
        is_set(a)
            || matches!(a, OfAction::WriteMetadata { .. } | OfAction::GotoTable(_))
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
    if actions.contains(&OfAction::ClearActions) {
        out.extend_from_slice(&OFPIT11_CLEAR_ACTIONS.to_be_bytes());
        out.extend_from_slice(&[0, 8, 0, 0, 0, 0]);
    }
    for a in actions {
        if let OfAction::WriteActions(set) = a
            && !set.is_empty()
        {
            let at = out.len();
            out.extend_from_slice(&OFPIT11_WRITE_ACTIONS.to_be_bytes());
            out.extend_from_slice(&[0; 6]);
            super::encode_actions(version, set, flow, out)?;
            let len = (out.len() - at) as u16;
            out[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
        }
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
