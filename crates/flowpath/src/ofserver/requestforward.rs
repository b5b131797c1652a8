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
    let reason = what.reason();
    for (&id, c) in conns {
        if id == source || c.bridge != bridge {
            continue;
        }
        if reason == ForwardReason::MeterMod && c.version < Version::Of13 {
            continue;
        }
        if !c.receives_async(AsyncMsg::RequestForward, reason as u32) {
            continue;
        }
        let Some(inner) = what.encode(c.version, xid) else {
            continue;
        };
        let mut m = Vec::new();
        let rf = RequestForward {
            reason,
            msg: &inner,
        };
        if rf.encode(c.version, &mut m).is_ok() {
            outbox.push((id, m));
        }
    }
}
