//! `NXAST_CHECK_PKT_LARGER` (`struct nx_action_check_pkt_larger`, 24 bytes in every OpenFlow
//! version): the length to compare with, the bit offset of the result, then the destination
//! field's NXM or OXM header and zeros. The destination is one bit, checked as OVS's
//! `mf_check_dst()` checks one without a match.

use ofproto::fields::Subfield;
use ofproto::syntax::OfAction;

use super::nicira::{dst_subfield, header_field, put_field_header, put_nx};
use super::{EncodeError, be16};
use crate::error::OfpErr;
use crate::header::Version;

pub(super) const NXAST_CHECK_PKT_LARGER: u16 = 49;

/// Decodes the action (framing, vendor and subtype checked).
pub(super) fn decode(b: &[u8]) -> Result<OfAction, OfpErr> {
    if b.len() != 24 {
        return Err(OfpErr::OfpbacBadLen);
    }
    let pkt_len = be16(b, 10);
    let ofs = u32::from(be16(b, 12));
    let (field, n) = header_field(b, 14, true)?;
    if b[14 + n..].iter().any(|&x| x != 0) {
        return Err(OfpErr::NxbrcMustBeZero);
    }
    Ok(OfAction::CheckPktLarger {
        pkt_len,
        dst: dst_subfield(field, ofs, 1)?,
    })
}

/// Appends the action.
pub(super) fn encode(
    version: Version,
    pkt_len: u16,
    dst: &Subfield,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut body = pkt_len.to_be_bytes().to_vec();
    body.extend_from_slice(&(dst.ofs as u16).to_be_bytes());
    put_field_header(version, dst.field, "check_pkt_larger", &mut body)?;
    body.resize(14, 0);
    put_nx(out, NXAST_CHECK_PKT_LARGER, 0, &body);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::ovs_vectors::{assert_agrees_with_ovs, decode_error as err};
    use crate::error::OfpErr;

    #[test]
    fn check_pkt_larger_decodes_and_encodes_as_ovs() {
        // What OVS 3.1's `ovs-ofctl parse-actions` decodes to the text.
        let text = "check_pkt_larger(200)->NXM_NX_REG1[0]";
        let hex = "ffff001800002320003100c8000000010204000000000000";
        assert_agrees_with_ovs(text, hex);
        // Into a read-only field; beyond the field; padding not zero.
        assert_eq!(
            err("ffff001800002320003100c800000001d204000000000000"),
            OfpErr::OfpbacBadSetArgument
        );
        assert_eq!(
            err("ffff001800002320003100c8002000010204000000000000"),
            OfpErr::OfpbacBadSetLen
        );
        assert_eq!(
            err("ffff001800002320003100c8000000010204000000000001"),
            OfpErr::NxbrcMustBeZero
        );
    }
}
