//! Flow-removed notifications (OVS's `connmgr_send_flow_removed()`): the rules with
//! `send_flow_rem` that expired or were deleted ([`ofproto::flow_removed`]) are told to every
//! connection of their bridge whose asynchronous configuration takes the reason (a service
//! connection none until it sets a `miss_send_len`), in its version's form (NXM in OpenFlow
//! 1.0 once the connection chose the NXM flow format).

use std::collections::BTreeMap;

use ofproto::flow_removed::{RemovedRule, take_removed};
use ofproto::ofproto::Ofproto;
use ofproto::syntax::FlowStats;
use openflow::conn::{ConnId, Dest, EventLoop, MsgKind};
use openflow::flow_mod::Protocol;
use openflow::flow_removed::{FlowRemoved, RemovedReason, encode_flow_removed};
use openflow::msgs::async_config::AsyncMsg;
use openflow::msgs::nicira::FlowFormat;
use openflow::nxm::TlvLens;

use super::ofconn::OfConn;

/// Sends what every bridge removed since the last call.
pub(crate) fn send_flow_removed(
    of: &Ofproto,
    conns: &BTreeMap<ConnId, OfConn>,
    ev: &mut EventLoop,
) {
    // A look first, so that the common case takes no write lock.
    let any = {
        let pipe = of.pipe.read().unwrap_or_else(|e| e.into_inner());
        pipe.bridges.iter().any(|b| !b.removed.is_empty())
    };
    if !any {
        return;
    }
    let gone: Vec<(String, TlvLens, Vec<RemovedRule>)> = {
        let mut pipe = of.pipe.write().unwrap_or_else(|e| e.into_inner());
        pipe.bridges
            .iter_mut()
            .map(|b| {
                let tlv = TlvLens::from_tlv_map(&b.tlv_map);
                (b.name.clone(), tlv, take_removed(b))
            })
            .collect()
    };
    for (bridge, tlv, rules) in gone {
        for r in rules {
            let fr = message(&r);
            for (id, c) in conns {
                if c.bridge != bridge
                    || !c.receives_async(AsyncMsg::FlowRemoved, u32::from(fr.reason.0))
                {
                    continue;
                }
                let proto = Protocol {
                    version: c.version,
                    nxm: c.flow_format == FlowFormat::Nxm,
                    table_id: false,
                };
                let mut m = Vec::new();
                if encode_flow_removed(&fr, proto, 0, &tlv, &mut m).is_ok() {
                    ev.send(Dest::Conn(*id), m, MsgKind::Async);
                }
            }
        }
    }
}

/// The notification for a removed rule.
fn message(r: &RemovedRule) -> FlowRemoved {
    let lived = r.at.saturating_duration_since(r.rule.created);
    FlowRemoved {
        match_: r.m.clone(),
        priority: r.priority,
        cookie: r.rule.cookie,
        table: Some(r.table),
        reason: RemovedReason(r.reason as u8),
        idle_timeout: r.rule.idle_timeout,
        hard_timeout: r.rule.hard_timeout,
        stats: FlowStats {
            duration_sec: lived.as_secs() as u32,
            // Milliseconds, as OVS keeps the times.
            duration_nsec: lived.subsec_millis() * 1_000_000,
            n_packets: r.rule.n_packets,
            n_bytes: r.rule.n_bytes,
            idle_age: None,
            hard_age: None,
        },
    }
}
