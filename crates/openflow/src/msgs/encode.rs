//! The way back of [`decode`](super::decode::decode): a read [`Msg`] written again, in the
//! version, transaction id and form (standard or extension, request or reply) of the message it
//! was read from, by the encoder of its family. What makes "read, write, read again" one
//! property for every message type: the codec corpus checks OVS's own test vectors through it,
//! the property tests round-trip every type through it, and the fuzz target checks that what
//! any bytes decode to survives it unchanged.

use super::async_config;
use super::decode::Msg;
use super::group_stats;
use super::meter;
use super::nicira;
use super::port;
use super::queue_config::{self, QueueConfigRequest};
use super::stats;
use super::switch;
use super::table_features;
use super::table_mod;
use super::tlv;
use crate::header::{self, Version};
use crate::msgtype::{self, Message, MsgType};

/// Writes `msg` again as the message(s) `from` was: its version, xid and form. A reply goes
/// in the form that answers the request of `from`'s form (for a multipart reply, as many
/// messages as it takes). `None` for what has no encoder of its own: hellos, errors, the
/// asynchronous configuration (read against a connection's), and [`Msg::Other`].
pub fn encode(msg: &Msg<'_>, from: &Message<'_>) -> Option<Vec<Vec<u8>>> {
    let v = Version::from_wire(from.version)?;
    let xid = from.xid;
    let mut out = Vec::new();
    // the request a reply answers: the request form of `from`'s, with no body
    let request = || -> Option<Message<'static>> {
        let t = MsgType::all().find(|t| t.stats_reply(v) == Some(from.msg_type))?;
        Some(Message {
            msg_type: t,
            version: from.version,
            xid,
            stats_flags: 0,
            body: &[],
        })
    };
    let one = |out: Vec<u8>| Some(vec![out]);
    match msg {
        Msg::Hello | Msg::Error | Msg::SetAsync | Msg::GetAsyncReply | Msg::Other(_) => {
            return None;
        }
        Msg::EchoRequest(data) => switch::encode_echo_request(v, xid, data, &mut out),
        Msg::EchoReply(data) => {
            let mut req = Vec::new();
            switch::encode_echo_request(v, xid, data, &mut req);
            switch::encode_echo_reply(&msgtype::decode(&req).ok()?, &mut out)?;
        }
        Msg::FeaturesRequest => switch::encode_features_request(v, xid, &mut out),
        Msg::FeaturesReply(f) => f.encode(v, xid, &mut out).ok()?,
        Msg::GetConfigRequest => switch::encode_get_config_request(v, xid, &mut out),
        Msg::GetConfigReply(c) => c.encode_reply(v, xid, &mut out),
        Msg::SetConfig(c) => c.encode_set(v, xid, &mut out),
        Msg::PortStatus(p) => p.encode(v, &mut out),
        Msg::PortMod(p) => p.encode(v, xid, &mut out),
        Msg::TableMod(t) => t.encode(v, xid, &mut out).ok()?,
        Msg::TableStatus(t) => t.encode(v, &mut out).ok()?,
        Msg::BarrierRequest => switch::encode_barrier_request(v, xid, &mut out),
        Msg::BarrierReply => switch::encode_barrier_reply(v, xid, &mut out),
        Msg::RoleRequest(r) => {
            let mut req = Vec::new();
            r.encode_request(v, xid, &mut req);
            // the form of `from` (standard or Nicira) is kept
            if msgtype::decode(&req).ok()?.msg_type != from.msg_type {
                return None;
            }
            out = req;
        }
        Msg::RoleReply(r) => {
            let req = Message {
                msg_type: match from.msg_type {
                    MsgType::NxtRoleReply => MsgType::NxtRoleRequest,
                    _ => MsgType::Ofpt12RoleRequest,
                },
                ..*from
            };
            r.encode_reply(&req, &mut out).ok()?;
        }
        Msg::RoleStatus(r) => r.encode(v, &mut out).ok()?,
        Msg::RequestForward(r) => r.encode(v, &mut out).ok()?,
        Msg::GetAsyncRequest => async_config::encode_get_request(v, xid, &mut out).ok()?,
        Msg::MeterMod(m) => m.encode(v, xid, &mut out).ok()?,
        Msg::BundleControl(b) => b.encode(v, xid, &mut out).ok()?,
        Msg::BundleAdd(b, _) => b.encode(v, &mut out).ok()?,
        Msg::DescRequest => stats::encode_desc_request(v, xid, &mut out),
        Msg::DescReply(d) => return one(d.encode_reply(&request()?).ok()?),
        Msg::TableStatsRequest => stats::encode_table_stats_request(v, xid, &mut out),
        Msg::TableStatsReply(t) => return stats::encode_table_stats_reply(&request()?, t).ok(),
        Msg::PortStatsRequest(p) => p.encode(v, xid, &mut out),
        Msg::PortStatsReply(p) => return stats::encode_port_stats_reply(&request()?, p).ok(),
        Msg::QueueStatsRequest(q) => q.encode(v, xid, &mut out),
        Msg::QueueStatsReply(q) => return stats::encode_queue_stats_reply(&request()?, q).ok(),
        Msg::QueueConfigRequest(q) => q.encode(v, xid, &mut out),
        Msg::QueueConfigReply(q) => {
            // the reply names the request's port; an empty one names none that survives
            let r = QueueConfigRequest {
                port: q.first().map_or(1, |q| q.port),
                queue: stats::OFPQ_ALL,
            };
            let mut req = Vec::new();
            r.encode(v, xid, &mut req);
            return queue_config::encode_reply(&msgtype::decode(&req).ok()?, q).ok();
        }
        Msg::GroupStatsRequest(g) => group_stats::encode_group_stats_request(*g, v, xid, &mut out),
        Msg::GroupStatsReply(g) => {
            return group_stats::encode_group_stats_reply(&request()?, g).ok();
        }
        Msg::GroupFeaturesRequest => {
            group_stats::encode_group_features_request(v, xid, &mut out).ok()?
        }
        Msg::GroupFeaturesReply(g) => return one(g.encode_reply(&request()?).ok()?),
        Msg::PortDescRequest(p) => p.encode(v, xid, &mut out),
        Msg::PortDescReply(p) => return port::encode_port_desc_reply(&request()?, p).ok(),
        Msg::MeterRequest(kind, id) => {
            meter::encode_meter_request(*kind, *id, v, xid, &mut out).ok()?
        }
        Msg::MeterStatsReply(m) => return meter::encode_meter_stats_reply(&request()?, m).ok(),
        Msg::MeterConfigReply(m) => return meter::encode_meter_config_reply(&request()?, m).ok(),
        Msg::MeterFeaturesReply(m) => return one(m.encode_reply(&request()?).ok()?),
        Msg::TableDescRequest => table_mod::encode_table_desc_request(v, xid, &mut out).ok()?,
        Msg::TableDescReply(t) => return table_mod::encode_table_desc_reply(&request()?, t).ok(),
        Msg::TableFeaturesRequest(t) if t.is_empty() => {
            table_features::encode_request(v, xid, &mut out).ok()?
        }
        // a request that sets tables has no encoder: a switch only receives it
        Msg::TableFeaturesRequest(_) => return None,
        Msg::TableFeaturesReply(t) => return table_features::encode_reply(&request()?, t).ok(),
        Msg::SetFlowFormat(f) => nicira::encode_set_flow_format(*f, xid, &mut out),
        Msg::SetPacketInFormat(f) => nicira::encode_set_packet_in_format(*f, v, xid, &mut out),
        Msg::FlowModTableId(e) => nicira::encode_flow_mod_table_id(*e, v, xid, &mut out),
        Msg::TlvTableMod(t) => t.encode(v, xid, &mut out).ok()?,
        Msg::TlvTableRequest => tlv::encode_tlv_table_request(v, xid, &mut out),
        Msg::TlvTableReply(t) => t.encode(from, &mut out).ok()?,
        Msg::CtFlushZone(z) => nicira::encode_ct_flush_zone(*z, v, xid, &mut out),
        Msg::CtFlush(c) => c.encode(v, xid, &mut out),
        Msg::SetControllerId(id) => nicira::encode_set_controller_id(*id, v, xid, &mut out),
        Msg::FlowAge => {
            let at = from.msg_type.start(v, xid, &mut out).ok()?;
            header::finish(&mut out, at).ok()?;
        }
    }
    one(out)
}

#[cfg(test)]
mod tests {
    use super::super::decode::decode;
    use super::super::testutil::unhex;
    use super::*;

    const OFP_PRINT_AT: &str = include_str!("../../../../testdata/openflow/ofp-print-at.txt");
    const OFCTL: &str = include_str!("../../../../testdata/openflow/ofctl-requests.txt");
    const OVN: &str = include_str!("../../../../testdata/openflow/ovn/conversation.txt");
    const REPLIES: &str = include_str!("../../../../testdata/openflow/ovs-replies.txt");
    const STATS: [&str; 2] = [
        include_str!("../../../../testdata/openflow/stats_requests.txt"),
        include_str!("../../../../testdata/openflow/stats_replies.txt"),
    ];

    /// Every message of the corpora: OVS's ofp-print.at vectors, what ovs-ofctl sent and
    /// ovs-vswitchd answered, and what ovn-controller and ovs-vswitchd said to each other.
    fn corpus() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for text in [OFP_PRINT_AT, OFCTL, OVN, REPLIES, STATS[0], STATS[1]] {
            for l in text.lines().filter(|l| !l.starts_with('#')) {
                // the hex field: the longest of the line's fields that is all hex digits
                let hex = l
                    .split('\t')
                    .filter(|f| f.len() >= 16 && f.bytes().all(|b| b.is_ascii_hexdigit()))
                    .max_by_key(|f| f.len());
                out.extend(hex.map(unhex));
            }
        }
        out
    }

    /// The forms whose vectors are not written back to the very bytes, and why (their meaning
    /// is the same: `tests/codec_corpus.rs` has OVS print both).
    const NOT_CANONICAL: &[(&str, &str)] = &[
        (
            "OFPT_FEATURES_REPLY",
            "capability bits the version does not define are dropped",
        ),
        (
            "OFPST_PORT reply",
            "OpenFlow 1.4 port statistics: properties as OVS writes them",
        ),
        (
            "OFPT_QUEUE_GET_CONFIG_REPLY",
            "the queue property's padding as OVS writes it",
        ),
        (
            "OFPT_ROLE_REQUEST",
            "a request that changes no role: its generation id is all ones",
        ),
        (
            "ONFT_ROLE_STATUS",
            "an asynchronous message: transaction id 0, as a switch sends it",
        ),
        (
            "OFPT_ROLE_STATUS",
            "an asynchronous message: transaction id 0, as a switch sends it",
        ),
        (
            "OFPT_REQUESTFORWARD",
            "an asynchronous message: transaction id 0",
        ),
        (
            "NXT_CT_FLUSH",
            "the zone and tuple properties in the order OVS's encoder uses",
        ),
        (
            "OFPST_TABLE_FEATURES reply",
            "the multipart `more` flag is framing, not content",
        ),
    ];

    /// Whatever reads reads the same once written again, and is written back to the very
    /// bytes unless its form is in [`NOT_CANONICAL`].
    #[test]
    fn every_read_message_writes_back_to_the_same_meaning() {
        let (mut n, mut same_bytes, mut failures) = (0, 0, Vec::new());
        for m in corpus() {
            let Ok(d) = decode(&m) else { continue };
            let from = msgtype::decode(&m).unwrap();
            let Some(again) = encode(&d, &from) else {
                continue;
            };
            n += 1;
            let back: Vec<_> = again.iter().map(|b| decode(b)).collect();
            if back.len() != 1 || back[0].as_ref() != Ok(&d) {
                failures.push(format!("{}: {d:?} -> {back:?}", hex(&m)));
            } else if again[0] == m {
                same_bytes += 1;
            } else if !NOT_CANONICAL
                .iter()
                .any(|(t, _)| *t == from.msg_type.name())
            {
                failures.push(format!("{}: written back as {}", hex(&m), hex(&again[0])));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        println!("{n} written back, {same_bytes} to the same bytes");
        assert!(n > 200, "{n}");
    }

    /// The forms no corpus message is written back in here, and why.
    const NOT_WRITTEN_BACK: &[(&[&str], &str)] = &[
        (
            &["OFPT_HELLO", "OFPT_ERROR"],
            "read by hello::decode and error::decode; the connection answers them",
        ),
        (
            &[
                "OFPT_GET_ASYNC_REPLY",
                "OFPT_SET_ASYNC",
                "NXT_SET_ASYNC_CONFIG",
                "NXT_SET_ASYNC_CONFIG2",
            ],
            "read against the connection's configuration (async_config's own round trip)",
        ),
        (
            &[
                "OFPT_PACKET_IN",
                "NXT_PACKET_IN",
                "NXT_PACKET_IN2",
                "OFPT_PACKET_OUT",
                "NXT_RESUME",
            ],
            "packet-in, packet-out and continuations have no codec in this crate yet",
        ),
        (
            &[
                "OFPT_FLOW_MOD",
                "NXT_FLOW_MOD",
                "OFPT_FLOW_REMOVED",
                "NXT_FLOW_REMOVED",
                "OFPST_FLOW request",
                "NXST_FLOW request",
                "OFPST_FLOW reply",
                "NXST_FLOW reply",
                "OFPST_AGGREGATE request",
                "NXST_AGGREGATE request",
                "OFPST_AGGREGATE reply",
                "NXST_AGGREGATE reply",
            ],
            "the flow codecs' (flow_mod, flow_removed, flow_stats): tests/codec_corpus.rs and the fuzz target write them back",
        ),
        (
            &[
                "OFPT_GROUP_MOD",
                "NXT_GROUP_MOD",
                "OFPST_GROUP_DESC request",
                "NXST_GROUP_DESC request",
                "OFPST_GROUP_DESC reply",
                "NXST_GROUP_DESC reply",
            ],
            "group mods and group descriptions have no codec in this crate yet",
        ),
        (
            &[
                "OFPST_FLOW_MONITOR request",
                "ONFST_FLOW_MONITOR request",
                "NXST_FLOW_MONITOR request",
                "OFPST_FLOW_MONITOR reply",
                "ONFST_FLOW_MONITOR reply",
                "NXST_FLOW_MONITOR reply",
                "ONFT_FLOW_MONITOR_CANCEL",
                "NXT_FLOW_MONITOR_CANCEL",
                "ONFT_FLOW_MONITOR_PAUSED",
                "NXT_FLOW_MONITOR_PAUSED",
                "ONFT_FLOW_MONITOR_RESUMED",
                "NXT_FLOW_MONITOR_RESUMED",
            ],
            "msgs::flow_monitor's own codec (requests, updates, cancels, pauses): its tests and the fuzz target write them back",
        ),
        (
            &[
                "NXST_IPFIX_BRIDGE request",
                "NXST_IPFIX_BRIDGE reply",
                "NXST_IPFIX_FLOW request",
                "NXST_IPFIX_FLOW reply",
            ],
            "IPFIX statistics are not implemented",
        ),
        (
            &[
                "OFPT_TABLE_STATUS",
                "NXT_REQUESTFORWARD",
                "ONFT_REQUESTFORWARD",
                "NXT_FLOW_AGE",
            ],
            "no message of the form in the corpora (their families' property tests cover the codec)",
        ),
    ];

    /// Every form is written back from some corpus message, or listed in [`NOT_WRITTEN_BACK`]
    /// with its reason; a listed form that starts being written back must leave the list.
    #[test]
    fn every_form_is_written_back_or_listed() {
        let mut done = std::collections::BTreeSet::new();
        for m in corpus() {
            let (Ok(d), Ok(from)) = (decode(&m), msgtype::decode(&m)) else {
                continue;
            };
            if encode(&d, &from).is_some() {
                done.insert(from.msg_type.name());
            }
        }
        let listed = |name: &str| NOT_WRITTEN_BACK.iter().any(|(n, _)| n.contains(&name));
        let missing: Vec<_> = MsgType::all()
            .map(MsgType::name)
            .filter(|n| !done.contains(n) && !listed(n))
            .collect();
        let stale: Vec<_> = NOT_WRITTEN_BACK
            .iter()
            .flat_map(|(n, _)| n.iter())
            .filter(|n| done.contains(*n))
            .collect();
        assert!(
            missing.is_empty(),
            "neither written back nor listed: {missing:?}"
        );
        assert!(stale.is_empty(), "listed, but written back now: {stale:?}");
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|b| format!("{b:02x}")).collect()
    }

    proptest::proptest! {
        /// Every form's messages of the corpora with bytes of their bodies changed: what still
        /// reads is written again and reads back the same (the unchanged ones are the test
        /// above), so each form's round trip is tried on values no vector has.
        #[test]
        fn changed_corpus_messages_round_trip(
            pick: proptest::sample::Index,
            changes in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()), 1..6),
        ) {
            static ALL: std::sync::LazyLock<Vec<Vec<u8>>> = std::sync::LazyLock::new(corpus);
            let mut m = ALL[pick.index(ALL.len())].clone();
            let Ok(from) = msgtype::decode(&m) else { return Ok(()) };
            let head = m.len() - from.body.len();
            if head == m.len() {
                return Ok(());
            }
            for (at, b) in changes {
                let i = head + at.index(m.len() - head);
                m[i] = b;
            }
            let (Ok(d), Ok(from)) = (decode(&m), msgtype::decode(&m)) else { return Ok(()) };
            if let Some(again) = encode(&d, &from) {
                proptest::prop_assert_eq!(again.len(), 1);
                proptest::prop_assert_eq!(decode(&again[0]), Ok(d));
            }
        }
    }
}
