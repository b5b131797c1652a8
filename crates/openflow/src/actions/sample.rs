//! `NXAST_SAMPLE` (24 bytes), `NXAST_SAMPLE2` and `NXAST_SAMPLE3` (32 bytes: a sampling port,
//! and in the third a direction): the `sample` action in every OpenFlow version. A sample is
//! sent back in the form it came in, or the smallest form that carries what it says, as OVS
//! does.

use ofproto::syntax::{OFPP_ANY, OfAction, Sample, SampleDirection};

use super::be16;
use super::nicira::put_nx;
use crate::be::be32;
use crate::error::OfpErr;

pub(super) const NXAST_SAMPLE: u16 = 29;
pub(super) const NXAST_SAMPLE2: u16 = 38;
pub(super) const NXAST_SAMPLE3: u16 = 41;

/// Decodes a sample action of `subtype` (framing, vendor and subtype checked).
pub(super) fn decode(b: &[u8], subtype: u16) -> Result<OfAction, OfpErr> {
    let len = if subtype == NXAST_SAMPLE { 24 } else { 32 };
    if b.len() != len {
        return Err(OfpErr::OfpbacBadLen);
    }
    let mut s = Sample {
        probability: be16(b, 10),
        collector_set_id: be32(b, 12),
        obs_domain_id: be32(b, 16),
        obs_point_id: be32(b, 20),
        sampling_port: OFPP_ANY,
        direction: SampleDirection::Default,
        form: 1,
    };
    if subtype != NXAST_SAMPLE {
        s.sampling_port = be16(b, 24).into();
        s.form = 2;
    }
    if subtype == NXAST_SAMPLE3 {
        if b[27..32].iter().any(|&x| x != 0) {
            return Err(OfpErr::NxbrcMustBeZero);
        }
        s.direction = match b[26] {
            0 => SampleDirection::Default,
            1 => SampleDirection::Ingress,
            2 => SampleDirection::Egress,
            _ => return Err(OfpErr::OfpbacBadArgument),
        };
        s.form = 3;
    }
    if s.probability == 0 {
        return Err(OfpErr::OfpbacBadArgument);
    }
    // Only a form larger than the fields need is worth remembering.
    let natural = if s.direction != SampleDirection::Default {
        3
    } else if s.sampling_port != OFPP_ANY {
        2
    } else {
        1
    };
    if s.form <= natural {
        s.form = 1;
    }
    Ok(OfAction::Sample(Box::new(s)))
}

/// Appends a sample action.
pub(super) fn encode(s: &Sample, out: &mut Vec<u8>) {
    let mut body = s.probability.to_be_bytes().to_vec();
    for v in [s.collector_set_id, s.obs_domain_id, s.obs_point_id] {
        body.extend_from_slice(&v.to_be_bytes());
    }
    let subtype = if s.form >= 3 || s.direction != SampleDirection::Default {
        NXAST_SAMPLE3
    } else if s.form == 2 || s.sampling_port != OFPP_ANY {
        NXAST_SAMPLE2
    } else {
        NXAST_SAMPLE
    };
    if subtype != NXAST_SAMPLE {
        body.extend_from_slice(&(s.sampling_port as u16).to_be_bytes());
        body.push(match s.direction {
            SampleDirection::Default => 0,
            SampleDirection::Ingress => 1,
            SampleDirection::Egress => 2,
        });
        body.resize(22, 0);
    }
    put_nx(out, subtype, 0, &body);
}

#[cfg(test)]
mod tests {
    use super::super::ovs_vectors::{assert_agrees_with_ovs, decode_error as err};
    use crate::error::OfpErr;

    /// Bytes OVS 3.1's `ovs-ofctl parse-actions` decodes to the text.
    const VECTORS: [(&str, &str); 3] = [
        (
            "sample(probability=12345,collector_set_id=23456,obs_domain_id=34567,obs_point_id=45678)",
            "ffff001800002320001d303900005ba0000087070000b26e",
        ),
        (
            "sample(probability=12345,collector_set_id=23456,obs_domain_id=34567,obs_point_id=45678,sampling_port=56789)",
            "ffff0020000023200026303900005ba0000087070000b26eddd5000000000000",
        ),
        (
            "sample(probability=12345,collector_set_id=23456,obs_domain_id=34567,obs_point_id=45678,sampling_port=56789,egress)",
            "ffff0020000023200029303900005ba0000087070000b26eddd5020000000000",
        ),
    ];

    #[test]
    fn sample_actions_decode_and_encode_as_ovs() {
        for (text, hex) in VECTORS {
            assert_agrees_with_ovs(text, hex);
        }
        // Probability 0; a direction that does not exist; padding not zero.
        assert_eq!(
            err("ffff001800002320001d0000000000000000000000000000"),
            OfpErr::OfpbacBadArgument
        );
        assert_eq!(
            err("ffff00200000232000293039000000000000000000000000ffff030000000000"),
            OfpErr::OfpbacBadArgument
        );
        assert_eq!(
            err("ffff00200000232000293039000000000000000000000000ffff000000000001"),
            OfpErr::NxbrcMustBeZero
        );
    }
}
