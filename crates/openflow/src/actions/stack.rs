//! `NXAST_STACK_PUSH` and `NXAST_STACK_POP` (`struct nx_action_stack`, 24 bytes in every
//! OpenFlow version): the bit offset, then the field's NXM or OXM header, the number of bits
//! and zeros. A push reads its subfield, a pop writes it, each checked as OVS's
//! `mf_check_src()` and `mf_check_dst()` check one without a match.

use ofproto::fields::Subfield;
use ofproto::syntax::OfAction;

use super::nicira::{dst_subfield, header_field, put_nx, subfield};
use super::{EncodeError, be16};
use crate::error::OfpErr;
use crate::header::Version;
use crate::nxm;

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
    let hdr = nxm::bare_header(sf.field, 0).ok_or_else(|| {
        super::unencodable(
            if subtype == NXAST_STACK_PUSH {
                "push"
            } else {
                "pop"
            },
            version,
        )
    })?;
    hdr.write(&mut body);
    body.extend_from_slice(&(sf.n_bits as u16).to_be_bytes());
    // The action is 24 bytes whatever the header's size.
    body.resize(14, 0);
    put_nx(out, subtype, 0, &body);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{FlowCtx, decode_actions, encode_actions};
    use crate::error::OfpErr;
    use crate::header::Version;
    use crate::nxm::tests::unhex;
    use ofproto::syntax::{FlowKind, NoPortNames, parse_flow};

    fn actions(text: &str) -> Vec<ofproto::syntax::OfAction> {
        parse_flow(&format!("actions={text}"), FlowKind::Add, &NoPortNames)
            .unwrap()
            .actions
    }

    /// Bytes OVS 3.1's `ovs-ofctl parse-actions` decodes to the text (in every version).
    const VECTORS: [(&str, &str); 3] = [
        (
            "push:NXM_NX_REG0[]",
            "ffff001800002320001b0000000100040020000000000000",
        ),
        (
            "pop:NXM_NX_REG1[3..18]",
            "ffff001800002320001c0003000102040010000000000000",
        ),
        (
            "pop:NXM_OF_ETH_SRC[]",
            "ffff001800002320001c0000000004060030000000000000",
        ),
    ];

    #[test]
    fn stack_actions_decode_and_encode_as_ovs() {
        for version in [Version::Of10, Version::Of13, Version::Of15] {
            for (text, hex) in VECTORS {
                let wire = unhex(hex);
                assert_eq!(decode_actions(version, &wire), Ok(actions(text)), "{text}");
                let mut out = Vec::new();
                encode_actions(version, &actions(text), FlowCtx::default(), &mut out).unwrap();
                assert_eq!(out, wire, "{text}");
            }
        }
    }

    #[test]
    fn malformed_stack_actions_get_ovs_errors() {
        let err = |hex: &str| decode_actions(Version::Of10, &unhex(hex)).unwrap_err();
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
