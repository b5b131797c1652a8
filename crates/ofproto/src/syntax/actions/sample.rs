//! `sample(...)` (ovs-actions(7), OVS's `NXAST_SAMPLE`, `SAMPLE2`, `SAMPLE3`): a packet
//! sampled with a probability out of 65535 and sent to an IPFIX collector set, with the
//! observation domain and point to report, optionally the port whose tunnel to report and the
//! direction. Parsed and printed here as `ovs-ofctl` does.

use std::fmt::Write;

use crate::syntax::SyntaxError;
use crate::syntax::lex::KeyValues;
use crate::syntax::ports::{OFPP_ANY, PortNames, format_port, parse_port};

use super::OfAction;

/// Which way a sampled packet was going (`ingress`, `egress`; none by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SampleDirection {
    #[default]
    Default,
    Ingress,
    Egress,
}

/// A `sample` action.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sample {
    /// Packets sampled out of 65535 (never 0).
    pub probability: u16,
    pub collector_set_id: u32,
    pub obs_domain_id: u32,
    pub obs_point_id: u32,
    /// The port whose egress tunnel is reported, `OFPP_NONE` (0xffff) for none.
    pub sampling_port: u32,
    pub direction: SampleDirection,
    /// The smallest encoding to send it in: 1 for `NXAST_SAMPLE`, 2 for `NXAST_SAMPLE2`, 3 for
    /// `NXAST_SAMPLE3` (OVS sends a sample as it received it, or the smallest that carries
    /// its fields).
    pub form: u8,
}

fn bad(arg: &str, reason: impl Into<String>) -> SyntaxError {
    SyntaxError::BadAction {
        action: "sample".to_string(),
        arg: arg.to_string(),
        reason: reason.into(),
    }
}

/// OVS's `parse_SAMPLE()`.
pub(super) fn parse_sample(arg: &str, names: &dyn PortNames) -> Result<OfAction, SyntaxError> {
    let mut s = Sample {
        probability: 0,
        collector_set_id: 0,
        obs_domain_id: 0,
        obs_point_id: 0,
        sampling_port: OFPP_ANY,
        direction: SampleDirection::Default,
        form: 1,
    };
    let u32_of = |v: &str| {
        crate::syntax::lex::parse_uint(v, u32::MAX.into())
            .map(|n| n as u32)
            .map_err(|_| bad(v, format!("invalid numeric format {v}")))
    };
    for (k, v) in KeyValues::new(arg) {
        match k {
            "probability" => {
                let p = crate::syntax::lex::parse_uint(v, 0xffff)
                    .map_err(|_| bad(v, format!("invalid probability \"{v}\"")))?;
                if p == 0 {
                    return Err(bad(v, format!("invalid probability value \"{v}\"")));
                }
                s.probability = p as u16;
            }
            "collector_set_id" => s.collector_set_id = u32_of(v)?,
            "obs_domain_id" => s.obs_domain_id = u32_of(v)?,
            "obs_point_id" => s.obs_point_id = u32_of(v)?,
            "sampling_port" => {
                s.sampling_port =
                    parse_port(v, names).ok_or_else(|| bad(v, format!("{v}: unknown port")))?;
            }
            "ingress" => s.direction = SampleDirection::Ingress,
            "egress" => s.direction = SampleDirection::Egress,
            _ => {
                return Err(bad(
                    k,
                    format!("invalid key \"{k}\" in \"sample\" argument"),
                ));
            }
        }
    }
    if s.probability == 0 {
        return Err(bad(
            arg,
            "non-zero \"probability\" must be specified on sample",
        ));
    }
    Ok(OfAction::Sample(Box::new(s)))
}

/// OVS's `format_SAMPLE()`.
pub(super) fn format_sample(out: &mut String, s: &Sample, names: &dyn PortNames) {
    let _ = write!(
        out,
        "sample(probability={},collector_set_id={},obs_domain_id={},obs_point_id={}",
        s.probability, s.collector_set_id, s.obs_domain_id, s.obs_point_id
    );
    if s.sampling_port != OFPP_ANY {
        out.push_str(",sampling_port=");
        format_port(out, s.sampling_port, names);
    }
    match s.direction {
        SampleDirection::Ingress => out.push_str(",ingress"),
        SampleDirection::Egress => out.push_str(",egress"),
        SampleDirection::Default => {}
    }
    out.push(')');
}
