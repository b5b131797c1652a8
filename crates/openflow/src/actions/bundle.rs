//! `NXAST_BUNDLE` and `NXAST_BUNDLE_LOAD` (`struct nx_action_bundle`: 32 bytes, then the
//! member ports, 16 bits each, padded to 8 bytes) in every OpenFlow version. Checked as OVS
//! checks them: known fields and algorithm, at most 2048 members of type `in_port`, zero
//! reserved bytes, a destination of at least 16 bits for `bundle_load` and none for `bundle`,
//! room for the members, then the destination and each member port.

use ofproto::syntax::{
    BUNDLE_ALGORITHMS, BUNDLE_MAX_MEMBERS, Bundle, HASH_FIELDS, OFPP_ANY, OFPP_CONTROLLER, OfAction,
};

use super::nicira::{dst_subfield, header_field, put_field_header, put_nx};
use super::standard::check_output_port;
use super::{EncodeError, be16};
use crate::be::be32;
use crate::error::OfpErr;
use crate::header::Version;

pub(super) const NXAST_BUNDLE: u16 = 12;
pub(super) const NXAST_BUNDLE_LOAD: u16 = 13;

/// `NXM_OF_IN_PORT`'s header: the only member type.
const MEMBER_TYPE_IN_PORT: u32 = 0x0000_0002;

/// Decodes a bundle action (framing, vendor and subtype checked).
pub(super) fn decode(b: &[u8], subtype: u16) -> Result<OfAction, OfpErr> {
    if b.len() < 32 {
        return Err(OfpErr::OfpbacBadLen);
    }
    let load = subtype == NXAST_BUNDLE_LOAD;
    let (algorithm, fields, basis) = (be16(b, 10), be16(b, 12), be16(b, 14));
    let n_members = usize::from(be16(b, 20));
    let on = be16(b, 22);
    let mut error = None;
    if usize::from(fields) >= HASH_FIELDS.len()
        || n_members > BUNDLE_MAX_MEMBERS
        || usize::from(algorithm) >= BUNDLE_ALGORITHMS.len()
        || be32(b, 16) != MEMBER_TYPE_IN_PORT
        || b[28..32] != [0; 4]
    {
        error = Some(OfpErr::OfpbacBadArgument);
    }
    let dst = if load {
        let (field, _) = header_field(b, 24, false)?;
        let n_bits = u32::from(on & 0x3f) + 1;
        if n_bits < 16 {
            error = Some(OfpErr::OfpbacBadArgument);
        }
        Some((field, u32::from(on >> 6), n_bits))
    } else {
        if on != 0 || be32(b, 24) != 0 {
            error = Some(OfpErr::OfpbacBadArgument);
        }
        None
    };
    if b.len() - 32 < 2 * n_members {
        return Err(OfpErr::OfpbacBadLen);
    }
    if let Some(e) = error {
        return Err(e);
    }
    let members: Vec<u32> = (0..n_members).map(|i| be16(b, 32 + 2 * i).into()).collect();
    let dst = match dst {
        Some((field, ofs, n_bits)) => Some(dst_subfield(field, ofs, n_bits)?),
        None => None,
    };
    for &m in &members {
        if m != OFPP_ANY {
            check_output_port(m)?;
        }
        if m == OFPP_CONTROLLER {
            return Err(OfpErr::OfpbacBadOutPort);
        }
    }
    Ok(OfAction::Bundle(Box::new(Bundle {
        fields,
        basis,
        algorithm,
        dst,
        members,
    })))
}

/// Appends a bundle action.
pub(super) fn encode(version: Version, bd: &Bundle, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let mut body = Vec::new();
    for v in [bd.algorithm, bd.fields, bd.basis] {
        body.extend_from_slice(&v.to_be_bytes());
    }
    body.extend_from_slice(&MEMBER_TYPE_IN_PORT.to_be_bytes());
    body.extend_from_slice(&(bd.members.len() as u16).to_be_bytes());
    match &bd.dst {
        Some(d) => {
            let on = ((d.ofs << 6) | (d.n_bits - 1)) as u16;
            body.extend_from_slice(&on.to_be_bytes());
            put_field_header(version, d.field, "bundle_load", &mut body)?;
        }
        None => body.extend_from_slice(&[0; 6]),
    }
    body.extend_from_slice(&[0; 4]);
    for m in &bd.members {
        body.extend_from_slice(&(*m as u16).to_be_bytes());
    }
    let subtype = if bd.dst.is_some() {
        NXAST_BUNDLE_LOAD
    } else {
        NXAST_BUNDLE
    };
    put_nx(out, subtype, 0, &body);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::ovs_vectors::{assert_agrees_with_ovs, decode_error as err};
    use crate::error::OfpErr;

    #[test]
    fn bundle_decodes_and_encodes_as_ovs() {
        // What OVS 3.1's `ovs-ofctl parse-actions` decodes to the text.
        let text = "bundle(eth_src,0,hrw,ofport,members:1,2,3)";
        let hex = "ffff002800002320000c0001000000000000000200030000000000000000000000010002\
                   00030000";
        assert_agrees_with_ovs(text, hex);
        // bundle_load into 8 bits; three members in no room; a CONTROLLER member.
        assert_eq!(
            err("ffff002800002320000d000100000000000000020003000700010004000000000001000200030000"),
            OfpErr::OfpbacBadArgument
        );
        assert_eq!(
            err("ffff002000002320000c00010000000000000002000300000000000000000000"),
            OfpErr::OfpbacBadLen
        );
        assert_eq!(
            err("ffff002800002320000c000100000000000000020002000000000000000000000001fffd00000000"),
            OfpErr::OfpbacBadOutPort
        );
    }
}
