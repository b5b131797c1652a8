//! Request forwarding, as OVS's `connmgr_send_requestforward()`: a group or meter mod that one
//! connection made is sent to the bridge's other connections that asked for it (the
//! `requestforward` asynchronous message, by reason, in their role's mask), re-encoded in each
//! one's OpenFlow version inside `OFPT_REQUESTFORWARD` (1.4 on), the ONF's form (1.3) or
//! Nicira's (before), with the request's transaction id. Meter mods go only to OpenFlow 1.3
//! and later connections, which have meters.

use std::collections::BTreeMap;

use ofproto::group::GroupMod;
use openflow::conn::ConnId;
use openflow::header::Version;
use openflow::msgs::async_config::AsyncMsg;
use openflow::msgs::group_mod::encode_group_mod;
use openflow::msgs::meter::MeterMod;
use openflow::msgs::requestforward::{ForwardReason, RequestForward};

use super::ofconn::OfConn;

/// What was forwarded.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Forwarded<'a> {
    /// A group mod that succeeded.
    Group(&'a GroupMod),
    /// A meter mod that succeeded.
    Meter(&'a MeterMod),
}

impl Forwarded<'_> {
    fn reason(self) -> ForwardReason {
        match self {
            Forwarded::Group(_) => ForwardReason::GroupMod,
            Forwarded::Meter(_) => ForwardReason::MeterMod,
        }
    }

    /// The modification in `version` with transaction id `xid`; `None` when it cannot be
    /// written in that version.
    fn encode(self, version: Version, xid: u32) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        match self {
            Forwarded::Group(gm) => encode_group_mod(version, xid, gm, &mut out).ok()?,
            Forwarded::Meter(mm) => mm.encode(version, xid, &mut out).ok()?,
        }
        Some(out)
    }
}

/// The request forwards of `what`, made by connection `source` on `bridge` with transaction
/// id `xid`, for the connections in `conns` that receive them, appended to `outbox`.
pub(crate) fn forward(
    conns: &BTreeMap<ConnId, OfConn>,
    source: ConnId,
    bridge: &str,
    xid: u32,
    what: Forwarded<'_>,
    outbox: &mut Vec<(ConnId, Vec<u8>)>,
) {
    for (id, version) in recipients(conns, source, bridge, what.reason()) {
        if let Some(m) = message(version, xid, what) {
            outbox.push((id, m));
        }
    }
}

/// The connections of `conns` on `bridge` but `source` that receive request forwards for
/// `reason` (meter mods only from OpenFlow 1.3 on), with their versions.
pub(crate) fn recipients(
    conns: &BTreeMap<ConnId, OfConn>,
    source: ConnId,
    bridge: &str,
    reason: ForwardReason,
) -> Vec<(ConnId, Version)> {
    conns
        .iter()
        .filter(|(id, c)| **id != source && c.bridge == bridge)
        .filter(|(_, c)| reason != ForwardReason::MeterMod || c.version >= Version::Of13)
        .filter(|(_, c)| c.receives_async(AsyncMsg::RequestForward, reason as u32))
        .map(|(id, c)| (*id, c.version))
        .collect()
}

/// The request forward of `what` (transaction id `xid`) in `version`.
pub(crate) fn message(version: Version, xid: u32, what: Forwarded<'_>) -> Option<Vec<u8>> {
    let inner = what.encode(version, xid)?;
    let mut m = Vec::new();
    let rf = RequestForward {
        reason: what.reason(),
        msg: &inner,
    };
    rf.encode(version, &mut m).ok()?;
    Some(m)
}
