//! Nicira extension messages that set how a connection talks (`NXT_SET_FLOW_FORMAT`,
//! `NXT_SET_PACKET_IN_FORMAT`, `NXT_FLOW_MOD_TABLE_ID`, `NXT_SET_CONTROLLER_ID`) or act once
//! (`NXT_CT_FLUSH_ZONE`), as OVS's `lib/ofp-protocol.c`, `ofp-packet.c` and
//! `ofproto/ofproto.c` read them.
//!
//! `ovs-ofctl` sends the first before any flow command in OpenFlow 1.0 (the NXM flow format is
//! what lets `dump-flows` show Nicira's fields), `ovn-controller` the second to receive
//! `NXT_PACKET_IN2`, and the last for every conntrack zone it takes over.

use super::{Reader, finish, put16, put32, start, zeros};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{Message, MsgType};

/// A flow format (`enum nx_flow_format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum FlowFormat {
    /// `NXFF_OPENFLOW10`: OpenFlow 1.0's matches.
    OpenFlow10 = 0,
    /// `NXFF_NXM`: Nicira's extensible matches.
    Nxm = 2,
}

/// Appends an `NXT_SET_FLOW_FORMAT` (an OpenFlow 1.0 message).
pub fn encode_set_flow_format(format: FlowFormat, xid: u32, out: &mut Vec<u8>) {
    let at = start(MsgType::NxtSetFlowFormat, Version::Of10, xid, out);
    put32(out, format as u32);
    let _ = finish(out, at);
}

/// Reads an `NXT_SET_FLOW_FORMAT`; another format is `OFPBRC_EPERM`, as OVS answers it.
pub fn decode_set_flow_format(msg: &Message<'_>) -> Result<FlowFormat, OfpErr> {
    super::expect(msg, &[MsgType::NxtSetFlowFormat])?;
    match Reader::new(msg.body).u32()? {
        0 => Ok(FlowFormat::OpenFlow10),
        2 => Ok(FlowFormat::Nxm),
        _ => Err(OfpErr::OfpbrcEperm),
    }
}

/// How packet-ins reach a connection (`enum ofputil_packet_in_format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum PacketInFormat {
    /// `NXPIF_STANDARD`: the version's `OFPT_PACKET_IN`.
    Standard = 0,
    /// `NXPIF_NXT_PACKET_IN`: Nicira's `NXT_PACKET_IN`.
    NxtPacketIn = 1,
    /// `NXPIF_NXT_PACKET_IN2`: `NXT_PACKET_IN2`, with continuations.
    NxtPacketIn2 = 2,
}

/// Appends an `NXT_SET_PACKET_IN_FORMAT`.
pub fn encode_set_packet_in_format(
    format: PacketInFormat,
    version: Version,
    xid: u32,
    out: &mut Vec<u8>,
) {
    let at = start(MsgType::NxtSetPacketInFormat, version, xid, out);
    put32(out, format as u32);
    let _ = finish(out, at);
}

/// Reads an `NXT_SET_PACKET_IN_FORMAT`; an unknown format is `OFPBRC_EPERM`.
pub fn decode_set_packet_in_format(msg: &Message<'_>) -> Result<PacketInFormat, OfpErr> {
    super::expect(msg, &[MsgType::NxtSetPacketInFormat])?;
    match Reader::new(msg.body).u32()? {
        0 => Ok(PacketInFormat::Standard),
        1 => Ok(PacketInFormat::NxtPacketIn),
        2 => Ok(PacketInFormat::NxtPacketIn2),
        _ => Err(OfpErr::OfpbrcEperm),
    }
}

/// Appends an `NXT_FLOW_MOD_TABLE_ID`: whether the high byte of an OpenFlow 1.0 flow mod's
/// command is a table id.
pub fn encode_flow_mod_table_id(enable: bool, version: Version, xid: u32, out: &mut Vec<u8>) {
    let at = start(MsgType::NxtFlowModTableId, version, xid, out);
    out.push(u8::from(enable));
    zeros(out, 7);
    let _ = finish(out, at);
}

/// Reads an `NXT_FLOW_MOD_TABLE_ID`: any non-zero byte enables.
pub fn decode_flow_mod_table_id(msg: &Message<'_>) -> Result<bool, OfpErr> {
    super::expect(msg, &[MsgType::NxtFlowModTableId])?;
    Ok(Reader::new(msg.body).u8()? != 0)
}

/// Appends an `NXT_CT_FLUSH_ZONE`: flush conntrack zone `zone`.
pub fn encode_ct_flush_zone(zone: u16, version: Version, xid: u32, out: &mut Vec<u8>) {
    let at = start(MsgType::NxtCtFlushZone, version, xid, out);
    zeros(out, 6);
    put16(out, zone);
    let _ = finish(out, at);
}

/// Reads an `NXT_CT_FLUSH_ZONE`'s zone; non-zero padding is `NXBRC_MUST_BE_ZERO`.
pub fn decode_ct_flush_zone(msg: &Message<'_>) -> Result<u16, OfpErr> {
    super::expect(msg, &[MsgType::NxtCtFlushZone])?;
    zone_or_id(msg)
}

/// Appends an `NXT_SET_CONTROLLER_ID`: the id packet-ins to this connection carry.
pub fn encode_set_controller_id(id: u16, version: Version, xid: u32, out: &mut Vec<u8>) {
    let at = start(MsgType::NxtSetControllerId, version, xid, out);
    zeros(out, 6);
    put16(out, id);
    let _ = finish(out, at);
}

/// Reads an `NXT_SET_CONTROLLER_ID`'s id; non-zero padding is `NXBRC_MUST_BE_ZERO`.
pub fn decode_set_controller_id(msg: &Message<'_>) -> Result<u16, OfpErr> {
    super::expect(msg, &[MsgType::NxtSetControllerId])?;
    zone_or_id(msg)
}

/// The 16-bit value after six bytes that must be zero (`struct nx_zone_id`,
/// `struct nx_controller_id`).
fn zone_or_id(msg: &Message<'_>) -> Result<u16, OfpErr> {
    let mut r = Reader::new(msg.body);
    if r.take(6)?.iter().any(|&b| b != 0) {
        return Err(OfpErr::NxbrcMustBeZero);
    }
    r.u16()
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{msg, ofctl};
    use super::*;

    #[test]
    fn as_ovs_ofctl_sends_them() {
        let m = &ofctl("del-tlv-map-of10")[0];
        assert_eq!(decode_set_flow_format(&msg(m)), Ok(FlowFormat::Nxm));
        let mut out = Vec::new();
        encode_set_flow_format(FlowFormat::Nxm, 2, &mut out);
        assert_eq!(&out, m);
        // ovs-ofctl monitor asks for NXT_PACKET_IN2 in every version.
        for (label, v) in [
            ("monitor-of10", Version::Of10),
            ("monitor-of15", Version::Of15),
        ] {
            let m = &ofctl(label)[3];
            assert_eq!(
                decode_set_packet_in_format(&msg(m)),
                Ok(PacketInFormat::NxtPacketIn2)
            );
            let mut out = Vec::new();
            encode_set_packet_in_format(PacketInFormat::NxtPacketIn2, v, 5, &mut out);
            assert_eq!(&out, m, "{label}");
        }
        let m = &ofctl("ct-flush-zone-of10")[0];
        assert_eq!(decode_ct_flush_zone(&msg(m)), Ok(5));
        out.clear();
        encode_ct_flush_zone(5, Version::Of10, 2, &mut out);
        assert_eq!(&out, m);
    }

    #[test]
    fn formats_round_trip_and_unknown_ones_are_refused() {
        for f in [
            PacketInFormat::Standard,
            PacketInFormat::NxtPacketIn,
            PacketInFormat::NxtPacketIn2,
        ] {
            let mut out = Vec::new();
            encode_set_packet_in_format(f, Version::Of15, 1, &mut out);
            assert_eq!(decode_set_packet_in_format(&msg(&out)), Ok(f));
            out[19] = 3;
            assert_eq!(
                decode_set_packet_in_format(&msg(&out)),
                Err(OfpErr::OfpbrcEperm)
            );
        }
        let mut out = Vec::new();
        encode_set_flow_format(FlowFormat::OpenFlow10, 1, &mut out);
        assert_eq!(
            decode_set_flow_format(&msg(&out)),
            Ok(FlowFormat::OpenFlow10)
        );
        out[19] = 1;
        assert_eq!(decode_set_flow_format(&msg(&out)), Err(OfpErr::OfpbrcEperm));
        for on in [false, true] {
            out.clear();
            encode_flow_mod_table_id(on, Version::Of10, 1, &mut out);
            assert_eq!(out.len(), 24);
            assert_eq!(decode_flow_mod_table_id(&msg(&out)), Ok(on));
        }
        out.clear();
        encode_set_controller_id(9, Version::Of13, 1, &mut out);
        assert_eq!(decode_set_controller_id(&msg(&out)), Ok(9));
        out[16] = 1;
        assert_eq!(
            decode_set_controller_id(&msg(&out)),
            Err(OfpErr::NxbrcMustBeZero)
        );
        out.clear();
        encode_ct_flush_zone(7, Version::Of13, 1, &mut out);
        out[16] = 1;
        assert_eq!(
            decode_ct_flush_zone(&msg(&out)),
            Err(OfpErr::NxbrcMustBeZero)
        );
    }
}
