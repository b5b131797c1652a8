//! One entry point for a received message: its type and length checked
//! ([`msgtype::decode`]), then its body read by the codec of its family into a [`Msg`]. What
//! OVS's `handle_openflow` does before it acts, so that a connection handles a typed value (or
//! sends back the error OVS would) without knowing which codec reads which form.
//!
//! Flows, packets and groups have their own codecs: they come out as [`Msg::Other`] with
//! their checked header. An asynchronous configuration is read against the connection's
//! current one, so [`Msg::SetAsync`] and [`Msg::GetAsyncReply`] leave that to the caller
//! ([`AsyncConfig::decode`](super::async_config::AsyncConfig::decode)).

use super::bundle::{BundleAdd, BundleCtrl};
use super::ct_flush::CtFlush;
use super::group_stats::{self, GroupFeatures, GroupStats};
use super::meter::{self, MeterConfig, MeterFeatures, MeterMod, MeterRequestKind, MeterStats};
use super::nicira::{self, FlowFormat, PacketInFormat};
use super::port::{self, PhyPort, PortDescRequest, PortMod, PortStatus};
use super::queue_config::{self, QueueConfig, QueueConfigRequest};
use super::requestforward::RequestForward;
use super::role::{RoleMsg, RoleStatus};
use super::stats::{
    self, DescStats, PortStats, PortStatsRequest, QueueStats, QueueStatsRequest, TableStats,
};
use super::switch::{FeaturesReply, SwitchConfig};
use super::table_features::{self, TableFeatures};
use super::table_mod::{self, TableDesc, TableMod, TableStatus};
use super::tlv::{TlvTableMod, TlvTableReply};
use crate::error::OfpErr;
use crate::msgtype::{self, Message, MsgType, OfpType};

/// A received message, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg<'a> {
    /// `OFPT_HELLO` (its versions: [`hello::decode`](crate::hello::decode)).
    Hello,
    /// `OFPT_ERROR` (its contents: [`error::decode`](crate::error::decode)).
    Error,
    /// An echo request and its data.
    EchoRequest(&'a [u8]),
    /// An echo reply and its data.
    EchoReply(&'a [u8]),
    /// `OFPT_FEATURES_REQUEST`.
    FeaturesRequest,
    /// `OFPT_FEATURES_REPLY`.
    FeaturesReply(FeaturesReply),
    /// `OFPT_GET_CONFIG_REQUEST`.
    GetConfigRequest,
    /// `OFPT_GET_CONFIG_REPLY`.
    GetConfigReply(SwitchConfig),
    /// `OFPT_SET_CONFIG`.
    SetConfig(SwitchConfig),
    /// `OFPT_PORT_STATUS`.
    PortStatus(PortStatus),
    /// `OFPT_PORT_MOD`.
    PortMod(PortMod),
    /// `OFPT_TABLE_MOD`.
    TableMod(TableMod),
    /// `OFPT_TABLE_STATUS`.
    TableStatus(TableStatus),
    /// A barrier request.
    BarrierRequest,
    /// A barrier reply.
    BarrierReply,
    /// A role request, standard or Nicira.
    RoleRequest(RoleMsg),
    /// A role reply.
    RoleReply(RoleMsg),
    /// A role status, standard or ONF.
    RoleStatus(RoleStatus),
    /// A group or meter mod forwarded from another controller.
    RequestForward(RequestForward<'a>),
    /// A get-async request.
    GetAsyncRequest,
    /// A get-async reply: read it with the configuration it changes.
    GetAsyncReply,
    /// A set-async, standard or Nicira: read it with the configuration it changes.
    SetAsync,
    /// `OFPT_METER_MOD`.
    MeterMod(MeterMod),
    /// A bundle control.
    BundleControl(BundleCtrl),
    /// A bundled message, and its type.
    BundleAdd(BundleAdd<'a>, MsgType),
    /// `OFPST_DESC` request.
    DescRequest,
    /// `OFPST_DESC` reply.
    DescReply(DescStats),
    /// `OFPST_TABLE` request.
    TableStatsRequest,
    /// `OFPST_TABLE` reply (one message of it).
    TableStatsReply(Vec<TableStats>),
    /// `OFPST_PORT` request.
    PortStatsRequest(PortStatsRequest),
    /// `OFPST_PORT` reply (one message of it).
    PortStatsReply(Vec<PortStats>),
    /// `OFPST_QUEUE` request.
    QueueStatsRequest(QueueStatsRequest),
    /// `OFPST_QUEUE` reply (one message of it).
    QueueStatsReply(Vec<QueueStats>),
    /// A queue-config (or 1.4 queue description) request.
    QueueConfigRequest(QueueConfigRequest),
    /// A queue-config (or 1.4 queue description) reply (one message of it).
    QueueConfigReply(Vec<QueueConfig>),
    /// A group statistics request and its group.
    GroupStatsRequest(u32),
    /// A group statistics reply (one message of it).
    GroupStatsReply(Vec<GroupStats>),
    /// A group features request.
    GroupFeaturesRequest,
    /// A group features reply.
    GroupFeaturesReply(GroupFeatures),
    /// `OFPST_PORT_DESC` request.
    PortDescRequest(PortDescRequest),
    /// `OFPST_PORT_DESC` reply (one message of it).
    PortDescReply(Vec<PhyPort>),
    /// A meter statistics, configuration or features request, and the meter it is about.
    MeterRequest(MeterRequestKind, u32),
    /// `OFPST_METER` reply (one message of it).
    MeterStatsReply(Vec<MeterStats>),
    /// `OFPST_METER_CONFIG` reply (one message of it).
    MeterConfigReply(Vec<MeterConfig>),
    /// `OFPST_METER_FEATURES` reply.
    MeterFeaturesReply(MeterFeatures),
    /// `OFPST_TABLE_DESC` request.
    TableDescRequest,
    /// `OFPST_TABLE_DESC` reply (one message of it).
    TableDescReply(Vec<TableDesc>),
    /// `OFPST_TABLE_FEATURES` request: the tables it would set (none: a query).
    TableFeaturesRequest(Vec<TableFeatures>),
    /// `OFPST_TABLE_FEATURES` reply (one message of it).
    TableFeaturesReply(Vec<TableFeatures>),
    /// `NXT_SET_FLOW_FORMAT`.
    SetFlowFormat(FlowFormat),
    /// `NXT_SET_PACKET_IN_FORMAT`.
    SetPacketInFormat(PacketInFormat),
    /// `NXT_FLOW_MOD_TABLE_ID`: whether flow mods carry a table id.
    FlowModTableId(bool),
    /// `NXT_TLV_TABLE_MOD`.
    TlvTableMod(TlvTableMod),
    /// `NXT_TLV_TABLE_REQUEST`.
    TlvTableRequest,
    /// `NXT_TLV_TABLE_REPLY`.
    TlvTableReply(TlvTableReply),
    /// `NXT_CT_FLUSH_ZONE` and its zone.
    CtFlushZone(u16),
    /// `NXT_CT_FLUSH`.
    CtFlush(CtFlush),
    /// `NXT_SET_CONTROLLER_ID` and the id.
    SetControllerId(u16),
    /// `NXT_FLOW_AGE` (nothing to do).
    FlowAge,
    /// A message for another codec (flows, packets, groups...), or one flowpath does not
    /// read yet.
    Other(Message<'a>),
}

/// Reads the message `msg` (one whole message, header included): its type and length, then
/// its body, with OVS's error for whatever is malformed.
pub fn decode(msg: &[u8]) -> Result<Msg<'_>, OfpErr> {
    let m = msgtype::decode(msg)?;
    decode_body(&m)
}

/// Reads the body of a message whose type and length [`msgtype::decode`] checked.
pub fn decode_body<'a>(m: &Message<'a>) -> Result<Msg<'a>, OfpErr> {
    use OfpType as T;
    Ok(match m.msg_type.kind() {
        T::Hello => Msg::Hello,
        T::Error => Msg::Error,
        T::EchoRequest => Msg::EchoRequest(m.body),
        T::EchoReply => Msg::EchoReply(m.body),
        T::FeaturesRequest => Msg::FeaturesRequest,
        T::FeaturesReply => Msg::FeaturesReply(FeaturesReply::decode(m)?),
        T::GetConfigRequest => Msg::GetConfigRequest,
        T::GetConfigReply => Msg::GetConfigReply(SwitchConfig::decode(m)?),
        T::SetConfig => Msg::SetConfig(SwitchConfig::decode(m)?),
        T::PortStatus => Msg::PortStatus(PortStatus::decode(m)?),
        T::PortMod => Msg::PortMod(PortMod::decode(m)?),
        T::TableMod => Msg::TableMod(TableMod::decode(m)?),
        T::TableStatus => Msg::TableStatus(TableStatus::decode(m)?),
        T::BarrierRequest => Msg::BarrierRequest,
        T::BarrierReply => Msg::BarrierReply,
        T::RoleRequest => Msg::RoleRequest(RoleMsg::decode(m)?),
        T::RoleReply => Msg::RoleReply(RoleMsg::decode(m)?),
        T::RoleStatus => Msg::RoleStatus(RoleStatus::decode(m)?),
        T::Requestforward => Msg::RequestForward(RequestForward::decode(m)?),
        T::GetAsyncRequest => Msg::GetAsyncRequest,
        T::GetAsyncReply => Msg::GetAsyncReply,
        T::SetAsyncConfig => Msg::SetAsync,
        T::MeterMod => Msg::MeterMod(MeterMod::decode(m)?),
        T::BundleControl => Msg::BundleControl(BundleCtrl::decode(m)?),
        T::BundleAddMessage => {
            let (add, t) = BundleAdd::decode(m)?;
            Msg::BundleAdd(add, t)
        }
        T::DescStatsRequest => Msg::DescRequest,
        T::DescStatsReply => Msg::DescReply(DescStats::decode(m)?),
        T::TableStatsRequest => Msg::TableStatsRequest,
        T::TableStatsReply => Msg::TableStatsReply(stats::decode_table_stats_reply(m)?),
        T::PortStatsRequest => Msg::PortStatsRequest(PortStatsRequest::decode(m)?),
        T::PortStatsReply => Msg::PortStatsReply(stats::decode_port_stats_reply(m)?),
        T::QueueStatsRequest => Msg::QueueStatsRequest(QueueStatsRequest::decode(m)?),
        T::QueueStatsReply => Msg::QueueStatsReply(stats::decode_queue_stats_reply(m)?),
        T::QueueGetConfigRequest => Msg::QueueConfigRequest(QueueConfigRequest::decode(m)?),
        T::QueueGetConfigReply => Msg::QueueConfigReply(queue_config::decode_reply(m)?),
        T::GroupStatsRequest => Msg::GroupStatsRequest(group_stats::decode_group_stats_request(m)?),
        T::GroupStatsReply => Msg::GroupStatsReply(group_stats::decode_group_stats_reply(m)?),
        T::GroupFeaturesStatsRequest => Msg::GroupFeaturesRequest,
        T::GroupFeaturesStatsReply => Msg::GroupFeaturesReply(GroupFeatures::decode(m)?),
        T::PortDescStatsRequest => Msg::PortDescRequest(PortDescRequest::decode(m)?),
        T::PortDescStatsReply => Msg::PortDescReply(port::decode_port_desc_reply(m)?),
        T::MeterStatsRequest | T::MeterConfigStatsRequest | T::MeterFeaturesStatsRequest => {
            let (kind, id) = meter::decode_meter_request(m)?;
            Msg::MeterRequest(kind, id)
        }
        T::MeterStatsReply => Msg::MeterStatsReply(meter::decode_meter_stats_reply(m)?),
        T::MeterConfigStatsReply => Msg::MeterConfigReply(meter::decode_meter_config_reply(m)?),
        T::MeterFeaturesStatsReply => Msg::MeterFeaturesReply(MeterFeatures::decode(m)?),
        T::TableDescRequest => Msg::TableDescRequest,
        T::TableDescReply => Msg::TableDescReply(table_mod::decode_table_desc_reply(m)?),
        T::TableFeaturesStatsRequest => {
            Msg::TableFeaturesRequest(table_features::decode_request(m)?)
        }
        T::TableFeaturesStatsReply => Msg::TableFeaturesReply(table_features::decode_reply(m)?),
        T::SetFlowFormat => Msg::SetFlowFormat(nicira::decode_set_flow_format(m)?),
        T::SetPacketInFormat => Msg::SetPacketInFormat(nicira::decode_set_packet_in_format(m)?),
        T::FlowModTableId => Msg::FlowModTableId(nicira::decode_flow_mod_table_id(m)?),
        T::NxtTlvTableMod => Msg::TlvTableMod(TlvTableMod::decode(m)?),
        T::NxtTlvTableRequest => Msg::TlvTableRequest,
        T::NxtTlvTableReply => Msg::TlvTableReply(TlvTableReply::decode(m)?),
        T::CtFlushZone => Msg::CtFlushZone(nicira::decode_ct_flush_zone(m)?),
        T::CtFlush => Msg::CtFlush(CtFlush::decode(m)?),
        T::SetControllerId => Msg::SetControllerId(nicira::decode_set_controller_id(m)?),
        T::FlowAge => Msg::FlowAge,
        _ => Msg::Other(*m),
    })
}

#[cfg(test)]
mod tests {
    use super::super::async_config::AsyncConfig;
    use super::super::testutil::{ovs_reply, unhex};
    use super::*;
    use crate::header::Version;
    use proptest::prelude::*;

    const OFCTL: &str = include_str!("../../../../testdata/openflow/ofctl-requests.txt");

    /// Everything ovs-ofctl sent and ovs-vswitchd answered reads without error, and only the
    /// flow mods and flow monitor requests are left to other codecs.
    #[test]
    fn every_recorded_message_reads() {
        let mut n = 0;
        for (label, h) in OFCTL.lines().filter_map(|l| l.split_once('\t')) {
            let m = unhex(h);
            let d = decode(&m).unwrap_or_else(|e| panic!("{label}: {e}"));
            if let Msg::Other(o) = d {
                assert!(
                    matches!(
                        o.msg_type.kind(),
                        OfpType::FlowMod | OfpType::FlowMonitorStatsRequest
                    ),
                    "{label}"
                );
            }
            n += 1;
        }
        for label in [
            "features-of10",
            "port-desc-of15",
            "table-stats-of13",
            "get-async-of14",
        ] {
            let (req, replies) = ovs_reply(label);
            decode(&req).unwrap();
            for r in &replies {
                assert!(!matches!(decode(r).unwrap(), Msg::Other(_)), "{label}");
            }
            n += 1;
        }
        assert!(n > 60);
    }

    const OFP_PRINT_AT: &str = include_str!("../../../../testdata/openflow/ofp-print-at.txt");

    /// OVS's own ofp-print.at messages of this family: read where OVS reads them, refused
    /// with OVS's error where OVS refuses them.
    #[test]
    fn ovs_s_own_vectors_read_or_fail_as_ovs_reads_them() {
        let mut n = 0;
        let mut failures = Vec::new();
        for (h, verdict) in OFP_PRINT_AT.lines().filter_map(|l| l.split_once('\t')) {
            let m = unhex(h);
            // An asynchronous configuration is read against the connection's: a new one's.
            let read = decode(&m).and_then(|d| match d {
                Msg::SetAsync | Msg::GetAsyncReply => {
                    let basis = AsyncConfig::ovs_default(Version::from_wire(m[0]).unwrap());
                    AsyncConfig::decode(&msgtype::decode(&m)?, &basis, false).map(|_| d)
                }
                d => Ok(d),
            });
            let ours = match read {
                Ok(Msg::Other(_)) => continue,
                Ok(_) => format!("ok {}", msgtype::decode(&m).unwrap().msg_type.name()),
                Err(e) => format!("error {e}"),
            };
            if ours != verdict {
                failures.push(format!("{h}: OVS {verdict}, we {ours}"));
            }
            n += 1;
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert!(n > 80, "{n}");
    }

    proptest! {
        /// Any bytes after any valid header of any form: never a panic.
        #[test]
        fn random_bodies_never_panic(
            form in 0..MsgType::all().count(),
            v in 1u8..=6,
            body in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let t = MsgType::all().nth(form).unwrap();
            let v = crate::header::Version::from_wire(v).unwrap();
            let mut m = Vec::new();
            if t.encode(v, 1, &body, &mut m).is_ok() {
                let _ = decode(&m);
            }
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&b);
        }
    }
}
