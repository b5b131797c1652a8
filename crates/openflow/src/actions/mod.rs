//! OpenFlow actions and instructions on the wire, decoded into and encoded from the pipeline's
//! [`OfAction`] list, in every version with OVS's choices (`lib/ofp-actions.c`).
//!
//! An action is a type, a length (a multiple of 8) and a body. OpenFlow 1.0 and 1.1+ number the
//! standard actions differently (`standard.rs`); Nicira's extensions (`nicira.rs`) are vendor
//! actions (type 0xffff, vendor 0x2320, a 16-bit subtype), most of them the same in every
//! version (the Nicira forms of what OpenFlow 1.1 made standard exist in 1.0 only, `reg_load`
//! and `reg_move` up to 1.4). From OpenFlow 1.1 on, a flow carries instructions
//! (`instructions.rs`) that hold the actions.
//!
//! Encoding picks what OVS sends for each version: `mod_nw_src` is `OFPAT_SET_NW_SRC` in 1.0 and
//! 1.1 and a Set-Field from 1.2 on; a field write goes by the form it came in
//! ([`WriteForm`], OVS's `encode_SET_FIELD()`): a `load` is `NXAST_REG_LOAD` up to 1.4, a
//! `set_field` the legacy action of 1.0 and 1.1 for its field, Set-Field in 1.2 to 1.4 when it
//! writes the whole field (else `NXAST_REG_LOAD`), and either is Set-Field in 1.5; `move`
//! is `NXAST_REG_MOVE` up to 1.4 and `OFPAT_COPY_FIELD` in 1.5; `in_port` is named by its
//! Nicira header in every action. An action the version cannot carry is an error
//! ([`EncodeError`]).
//!
//! Decoding checks what OVS checks, in OVS's order, with its errors: lengths
//! (`OFPBAC_BAD_LEN`), unknown types and vendors (`OFPBAC_BAD_TYPE`, `OFPBAC_BAD_VENDOR`,
//! `OFPBAC_BAD_VENDOR_TYPE`), ports (`OFPBAC_BAD_OUT_PORT`), field references
//! (`OFPBAC_BAD_SET_TYPE`, `OFPBAC_BAD_SET_LEN`, `OFPBAC_BAD_SET_ARGUMENT`), nesting
//! (`OFPBAC_BAD_ARGUMENT`); a flow_mod's actions are then checked against its match
//! (`check.rs`, `OFPBAC_MATCH_INCONSISTENT`). `learn` and `conjunction` are in `learn.rs`.
//! Actions OVS knows that the pipeline does not model yet (`encap(nsh)`, `dec_nsh_ttl`,
//! `delete_field`, `copy_ttl_in`/`out`, `push_pbb`/`pop_pbb`) are refused, as OVS refuses an
//! action it does not know.

mod bundle;
mod check;
mod check_pkt_larger;
mod instructions;
mod learn;
mod multipath;
mod nicira;
#[cfg(test)]
mod ovs_vectors;
mod sample;
mod stack;
mod standard;

pub(crate) use crate::be::{be16, be32, be64};
use ofproto::fields::FieldId;
use ofproto::syntax::{OfAction, WriteForm};

use crate::error::OfpErr;
use crate::header::Version;

pub use check::check_actions;
pub use instructions::{decode_instructions, encode_instructions};
pub use nicira::enable_debug_actions;

/// Type of a vendor (experimenter) action.
const OFPAT_VENDOR: u16 = 0xffff;

/// Deepest nesting of `clone` and `ct` accepted, as the text syntax allows.
const MAX_NESTING: usize = ofproto::syntax::MAX_NESTING;

/// An action list that a version cannot carry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{action} cannot be encoded in OpenFlow {version}")]
pub struct EncodeError {
    /// The action, as `ovs-ofctl` names it.
    pub action: &'static str,
    /// The version's number (`1.0`).
    pub version: &'static str,
}

pub(crate) fn unencodable(action: &'static str, version: Version) -> EncodeError {
    EncodeError {
        action,
        version: version.number(),
    }
}

/// What encoding needs from the flow an action list belongs to, as OVS's actions remember it
/// from the flow they were checked against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCtx {
    /// The IP protocol the match pins down (0 when none): whether `mod_tp_src` is a TCP, UDP
    /// or SCTP Set-Field.
    pub ip_proto: u8,
    /// Whether the match says the packet has a VLAN tag: if not, `mod_vlan_vid` is preceded by
    /// a `push_vlan` from OpenFlow 1.1 on.
    pub has_vlan: bool,
}

impl FlowCtx {
    /// What the match of a flow tells.
    pub fn of(m: &ofproto::pipekey::PipeMatch) -> FlowCtx {
        let (k, mk) = (&m.key().dp, &m.mask().dp);
        FlowCtx {
            ip_proto: if mk.nw_proto() != 0 { k.nw_proto() } else { 0 },
            has_vlan: mk.vlan_tci() & 0x1000 != 0 && k.vlan_tci() & 0x1000 != 0,
        }
    }
}

/// Decodes an OpenFlow action list of wire version `version` (OpenFlow 1.0's numbering for
/// 1.0, 1.1's for later ones).
pub fn decode_actions(version: Version, buf: &[u8]) -> Result<Vec<OfAction>, OfpErr> {
    let mut out = Vec::new();
    decode_into(version, buf, 0, &mut out)?;
    verify_nesting(&out, Outer::Top)?;
    Ok(out)
}

/// What an action list is nested in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outer {
    /// A flow's own actions.
    Top,
    Clone,
    Ct,
}

/// OVS's nesting rules (`ofpacts_verify_nested()`): `nat` and writes of `ct_mark` and
/// `ct_label` only inside `ct` (`OFPBAC_BAD_SET_ARGUMENT`); inside `ct` nothing else
/// (`OFPBAC_BAD_ARGUMENT`); `meter` only at the top (`OFPBAC_BAD_ARGUMENT`).
pub(crate) fn verify_nesting(actions: &[OfAction], outer: Outer) -> Result<(), OfpErr> {
    learn::verify_conjunctions(actions)?;
    for a in actions {
        let dst = match a {
            OfAction::SetField { field, .. } => Some(*field),
            OfAction::RegMove { dst, .. } => Some(dst.field),
            _ => None,
        };
        let ct_field = dst.is_some_and(|f| f == FieldId::CT_MARK || f == FieldId::CT_LABEL);
        if ct_field && outer != Outer::Ct {
            return Err(OfpErr::OfpbacBadSetArgument);
        }
        if let OfAction::Nat(_) = a {
            if outer != Outer::Ct {
                return Err(OfpErr::OfpbacBadSetArgument);
            }
            continue;
        }
        if outer == Outer::Ct && !ct_field {
            return Err(OfpErr::OfpbacBadArgument);
        }
        if matches!(a, OfAction::Meter(_)) && outer != Outer::Top {
            return Err(OfpErr::OfpbacBadArgument);
        }
    }
    Ok(())
}

/// Decodes into `out`, `depth` levels of `clone`/`ct` deep.
pub(crate) fn decode_into(
    version: Version,
    mut buf: &[u8],
    depth: usize,
    out: &mut Vec<OfAction>,
) -> Result<(), OfpErr> {
    if depth > MAX_NESTING {
        return Err(OfpErr::OfpbacBadArgument);
    }
    while !buf.is_empty() {
        // OVS's order: a whole header, a known type (or vendor and subtype), then the length.
        if buf.len() < 8 {
            return Err(OfpErr::OfpbacBadLen);
        }
        let ty = be16(buf, 0);
        let len = usize::from(be16(buf, 2));
        if ty == OFPAT_VENDOR {
            let vendor = be32(buf, 4);
            if vendor != crate::header::NX_VENDOR_ID && vendor != crate::header::ONF_VENDOR_ID {
                return Err(OfpErr::OfpbacBadVendor);
            }
            if buf.len() < 16 {
                return Err(OfpErr::OfpbacBadLen);
            }
            if !nicira::known(version, vendor, be16(buf, 8)) {
                return Err(OfpErr::OfpbacBadVendorType);
            }
            // An extension action is at least its 16-byte header.
            if len < 16 {
                return Err(OfpErr::OfpbacBadLen);
            }
            nicira::decode(version, frame(buf, len)?, depth, out)?;
        } else {
            if !standard::known(version, ty) {
                return Err(OfpErr::OfpbacBadType);
            }
            standard::decode(version, ty, frame(buf, len)?, out)?;
        }
        buf = &buf[len..];
    }
    Ok(())
}

/// The action of length `len` at the start of `buf`, checked as OVS checks the framing.
fn frame(buf: &[u8], len: usize) -> Result<&[u8], OfpErr> {
    if len < 8 || !len.is_multiple_of(8) || len > buf.len() {
        return Err(OfpErr::OfpbacBadLen);
    }
    Ok(&buf[..len])
}

/// Appends the encoding of `actions` for wire version `version`.
pub fn encode_actions(
    version: Version,
    actions: &[OfAction],
    flow: FlowCtx,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut flow = flow;
    let mut i = 0;
    while i < actions.len() {
        let a = &actions[i];
        let (merged, n) = coalesce_loads(&actions[i..]);
        i += n;
        encode_one(version, merged.as_ref().unwrap_or(a), flow, out)?;
        // OVS remembers, action by action, whether a VLAN tag is there by now.
        match a {
            OfAction::SetVlanVid(_) | OfAction::SetVlanPcp(_) | OfAction::PushVlan(_) => {
                flow.has_vlan = true
            }
            OfAction::StripVlan => flow.has_vlan = false,
            _ => {}
        }
    }
    Ok(())
}

/// The text syntax keeps a write wider than 64 bits as consecutive 64-bit `load`s of one field
/// (as OpenFlow 1.0 carries it); OVS holds it as one write, which later versions send as one
/// Set-Field. Returns that write (if `actions` starts with such a run: a write cut at a 64-bit
/// boundary after a whole 64-bit segment, followed by the rest of the field) and how many
/// actions it covers. Writes of adjacent bits that are not such a cut stay separate actions,
/// as OVS keeps them (ovn-controller sends two one-bit writes of `xxreg0` in a row).
fn coalesce_loads(actions: &[OfAction]) -> (Option<OfAction>, usize) {
    let Some(OfAction::SetField {
        field,
        value,
        mask,
        form: WriteForm::Load,
    }) = actions.first()
    else {
        return (None, 1);
    };
    let (mut v, mut m, mut n) = (*value, *mask, 1);
    for a in &actions[1..] {
        match a {
            OfAction::SetField {
                field: f,
                value: v2,
                mask: m2,
                form: WriteForm::Load,
            } if f == field
                && *m2 != 0
                && m2.trailing_zeros() == 128 - m.leading_zeros()
                && (128 - m.leading_zeros()) % 64 == 0
                && m.count_ones() >= 64 =>
            {
                v |= v2;
                m |= m2;
                n += 1;
            }
            _ => break,
        }
    }
    if n == 1 {
        return (None, 1);
    }
    let merged = OfAction::SetField {
        field: *field,
        value: v,
        mask: m,
        form: WriteForm::Load,
    };
    (Some(merged), n)
}

fn encode_one(
    version: Version,
    a: &OfAction,
    flow: FlowCtx,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if standard::encode(version, a, flow, out)? {
        return Ok(());
    }
    nicira::encode(version, a, flow, out)
}

/// Begins an action of type `ty` in `out`: its header with a length `end_action` fills in.
pub(crate) fn start_action(out: &mut Vec<u8>, ty: u16) -> usize {
    let at = out.len();
    out.extend_from_slice(&ty.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    at
}

/// Pads the action begun at `at` to 8 bytes and writes its length.
pub(crate) fn end_action(out: &mut Vec<u8>, at: usize) {
    let n = (out.len() - at).next_multiple_of(8);
    out.resize(at + n, 0);
    let n = u16::try_from(n).unwrap_or(u16::MAX);
    out[at + 2..at + 4].copy_from_slice(&n.to_be_bytes());
}

/// Splits a masked write into the writes a switch hands back (one per run of mask bits, at most
/// 64 bits each, for fields that print as `load:`), as the `ovs-ofctl` syntax does.
pub(crate) use ofproto::syntax::push_set_field;

#[cfg(test)]
mod tests;
