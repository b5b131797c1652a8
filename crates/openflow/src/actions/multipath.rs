//! `NXAST_MULTIPATH` (`struct nx_action_multipath`, 32 bytes in every OpenFlow version): the
//! fields to hash and the basis, the algorithm, the number of links minus one and the
//! algorithm's argument, then the destination as `ofs_nbits` and a 32-bit NXM header. Checked
//! as OVS checks it: a known field set and algorithm, enough destination bits for the links,
//! then the destination itself.

use ofproto::syntax::{HASH_FIELDS, MP_ALGORITHMS, Multipath, OfAction};

use super::nicira::{dst_subfield, header_field, put_field_header, put_nx};
use super::{EncodeError, be16};
use crate::be::be32;
use crate::error::OfpErr;
use crate::header::Version;

pub(super) const NXAST_MULTIPATH: u16 = 10;

/// Decodes the action (framing, vendor and subtype checked).
pub(super) fn decode(b: &[u8]) -> Result<OfAction, OfpErr> {
    if b.len() != 32 {
        return Err(OfpErr::OfpbacBadLen);
    }
    let (fields, basis, algorithm) = (be16(b, 10), be16(b, 12), be16(b, 16));
    let max_link = be16(b, 18);
    let arg = be32(b, 20);
    let on = be16(b, 26);
    let (field, _) = header_field(b, 28, false)?;
    let n_bits = u32::from(on & 0x3f) + 1;
    let n_links = u32::from(max_link) + 1;
    let min_bits = 32 - (n_links - 1).leading_zeros();
    if usize::from(fields) >= HASH_FIELDS.len()
        || usize::from(algorithm) >= MP_ALGORITHMS.len()
        || n_bits < min_bits
    {
        return Err(OfpErr::OfpbacBadArgument);
    }
    Ok(OfAction::Multipath(Box::new(Multipath {
        fields,
        basis,
        algorithm,
        max_link,
        arg,
        dst: dst_subfield(field, u32::from(on >> 6), n_bits)?,
    })))
}

/// Appends the action.
pub(super) fn encode(
    version: Version,
    m: &Multipath,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut body = Vec::with_capacity(22);
    for v in [m.fields, m.basis, 0, m.algorithm, m.max_link] {
        body.extend_from_slice(&v.to_be_bytes());
    }
    body.extend_from_slice(&m.arg.to_be_bytes());
    body.extend_from_slice(&[0, 0]);
    let on = ((m.dst.ofs << 6) | (m.dst.n_bits - 1)) as u16;
    body.extend_from_slice(&on.to_be_bytes());
    put_field_header(version, m.dst.field, "multipath", &mut body)?;
    put_nx(out, NXAST_MULTIPATH, 0, &body);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::ovs_vectors::{assert_agrees_with_ovs, decode_error as err};
    use crate::error::OfpErr;

    #[test]
    fn multipath_decodes_and_encodes_as_ovs() {
        // What OVS 3.1's `ovs-ofctl parse-actions` decodes to the text.
        let text = "multipath(eth_src,50,modulo_n,1,0,NXM_NX_REG0[])";
        let hex = "ffff002000002320000a00000032000000000000000000000000001f00010004";
        assert_agrees_with_ovs(text, hex);
        // Unknown fields; unknown algorithm; 1 bit for 3 links.
        assert_eq!(
            err("ffff002000002320000a00070032000000000000000000000000001f00010004"),
            OfpErr::OfpbacBadArgument
        );
        assert_eq!(
            err("ffff002000002320000a00000032000000040000000000000000001f00010004"),
            OfpErr::OfpbacBadArgument
        );
        assert_eq!(
            err("ffff002000002320000a00000032000000000002000000000000000000010004"),
            OfpErr::OfpbacBadArgument
        );
    }
}
