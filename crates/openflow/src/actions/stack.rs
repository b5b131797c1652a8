//! `NXAST_STACK_PUSH` and `NXAST_STACK_POP` (`struct nx_action_stack`, 24 bytes in every
//! OpenFlow version): the bit offset, then the field's NXM or OXM header, the number of bits
//! and zeros. A push reads its subfield, a pop writes it, each checked as OVS's
//! `mf_check_src()` and `mf_check_dst()` check one without a match.

use ofproto::fields::Subfield;
use ofproto::syntax::OfAction;

use super::nicira::{dst_subfield, header_field, put_field_header, put_nx, subfield};
use super::{EncodeError, be16};
use crate::error::OfpErr;
use crate::header::Version;

pub(super) const NXAST_STACK_PUSH: u16 = 27;
pub(super) const NXAST_STACK_POP: u16 = 28;

/// Decodes a stack action (framing, vendor and subtype checked).
pub(super) fn decode(b: &[u8], subtype: u16) -> Result<OfAction, OfpErr> {
    if b.len() != 24 {
        return Err(OfpErr::OfpbacBadLen);
    }
    let ofs = u32::from(be16(b, 10));
    // The header is pulled from the 12 bytes after the offset: an experimenter OXM header
    // takes 8 of them.
    let (field, n) = header_field(b, 12, true)?;
    if 12 + n + 2 > b.len() {
        return Err(OfpErr::OfpbacBadLen);
    }
    let n_bits = u32::from(be16(b, 12 + n));
    if b[12 + n + 2..].iter().any(|&x| x != 0) {
        return Err(OfpErr::NxbrcMustBeZero);
    }
    Ok(if subtype == NXAST_STACK_PUSH {
        OfAction::StackPush(subfield(field, ofs, n_bits)?)
    } else {
        OfAction::StackPop(dst_subfield(field, ofs, n_bits)?)
    })
}

/// Appends a stack action: the field named by its NXM header (its OXM one when it has none,
/// as OVS's `nx_put_mff_header()`).
pub(super) fn encode(
    version: Version,
    subtype: u16,
    sf: &Subfield,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut body = (sf.ofs as u16).to_be_bytes().to_vec();
    let action = if subtype == NXAST_STACK_PUSH {
        "push"
    } else {
        "pop"
    };
    put_field_header(version, sf.field, action, &mut body)?;
    body.extend_from_slice(&(sf.n_bits as u16).to_be_bytes());
    // The action is 24 bytes whatever the header's size.
    body.resize(14, 0);
    put_nx(out, subtype, 0, &body);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::ovs_vectors::{assert_agrees_with_ovs, decode_error as err};
    use crate::error::OfpErr;

    #[test]
    fn stack_actions_decode_and_encode_as_ovs() {
        assert_agrees_with_ovs(
            "push:NXM_NX_REG0[]",
            "ffff001800002320001b0000000100040020000000000000",
        );
        assert_agrees_with_ovs(
            "pop:NXM_NX_REG1[3..18]",
            "ffff001800002320001c0003000102040010000000000000",
        );
        assert_agrees_with_ovs(
            "pop:NXM_OF_ETH_SRC[]",
            "ffff001800002320001c0000000004060030000000000000",
        );
    }

    #[test]
    fn malformed_stack_actions_get_ovs_errors() {
        // 33 bits of a 32-bit register.
        assert_eq!(
            err("ffff001800002320001b0000000100040021000000000000"),
            OfpErr::OfpbacBadSetLen
        );
        // Padding that is not zero.
        assert_eq!(
            err("ffff001800002320001b0000000100040020000000000001"),
            OfpErr::NxbrcMustBeZero
        );
        // A masked header.
        assert_eq!(
            err("ffff001800002320001b0000000101040020000000000000"),
            OfpErr::OfpbmcBadField
        );
        // Popping into a read-only field (ct_state).
        assert_eq!(
            err("ffff001800002320001c00000001d2040020000000000000"),
            OfpErr::OfpbacBadSetArgument
        );
        // Too short.
        assert_eq!(
            err("ffff001000002320001b000000010004"),
            OfpErr::OfpbacBadLen
        );
    }
}
