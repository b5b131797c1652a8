//! Checks of action encodings against bytes OVS 3.1's `ovs-ofctl parse-actions` decodes to a
//! given text: the action modules' tests share them.

use super::{FlowCtx, decode_actions, encode_actions};
use crate::error::OfpErr;
use crate::header::Version;
use crate::nxm::tests::unhex;
use ofproto::syntax::{FlowKind, NoPortNames, parse_flow};

/// Asserts that `hex` decodes to what `text` parses to and that this encodes back to `hex`, in
/// OpenFlow 1.0, 1.3 and 1.5 (the Nicira actions are the same bytes in each).
pub(super) fn assert_agrees_with_ovs(text: &str, hex: &str) {
    let want = parse_flow(&format!("actions={text}"), FlowKind::Add, &NoPortNames)
        .unwrap()
        .actions;
    for version in [Version::Of10, Version::Of13, Version::Of15] {
        assert_eq!(
            decode_actions(version, &unhex(hex)),
            Ok(want.clone()),
            "{text}"
        );
        let mut out = Vec::new();
        encode_actions(version, &want, FlowCtx::default(), &mut out).unwrap();
        assert_eq!(out, unhex(hex), "{text}");
    }
}

/// The error decoding `hex` as OpenFlow 1.0 actions.
pub(super) fn decode_error(hex: &str) -> OfpErr {
    decode_actions(Version::Of10, &unhex(hex)).unwrap_err()
}
