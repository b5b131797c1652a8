//! Request forwarding: a group or meter mod one controller made, forwarded to the others
//! (`OFPT_REQUESTFORWARD` from OpenFlow 1.4, the ONF's 2350 in 1.3, Nicira's 132 before), as
//! OVS's `lib/ofp-monitor.c` reads and writes it. The forwarded message is kept as bytes for
//! its own codec; a meter mod is read here to check it as OVS does.

use super::meter::MeterMod;
use super::{Reader, finish, start};
use crate::error::OfpErr;
use crate::header::{self, Version};
use crate::msgtype::{self, EncodeError, Message, MsgType, OfpType};

/// What was forwarded (`OFPRFR_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForwardReason {
    /// A group mod.
    GroupMod,
    /// A meter mod.
    MeterMod,
}

/// A forwarded request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestForward<'a> {
    /// What it is.
    pub reason: ForwardReason,
    /// The forwarded message, header included (its transaction id the original one's).
    pub msg: &'a [u8],
}

impl<'a> RequestForward<'a> {
    /// Appends the message in `version` (transaction id 0, as OVS sends it). The forwarded
    /// message must be of `version` and a whole number of 8-byte words, as group and meter
    /// mods are.
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let t = match version {
            Version::Of10 | Version::Of11 | Version::Of12 => MsgType::NxtRequestforward,
            Version::Of13 => MsgType::Onft13Requestforward,
            _ => MsgType::Ofpt14Requestforward,
        };
        let at = start(t, version, 0, out);
        out.extend_from_slice(self.msg);
        finish(out, at)
    }

    /// Reads a forwarded request (OVS's `ofputil_decode_requestforward`): the inner message
    /// must fit (`OFPBFC_MSG_BAD_LEN`), be of the same version (`OFPBRC_BAD_VERSION`), decode,
    /// and be a group or meter mod (`OFPBFC_MSG_UNSUP`).
    pub fn decode(msg: &Message<'a>) -> Result<Self, OfpErr> {
        super::expect(
            msg,
            &[
                MsgType::NxtRequestforward,
                MsgType::Onft13Requestforward,
                MsgType::Ofpt14Requestforward,
            ],
        )?;
        let inner = header::Header::parse(msg.body).ok_or(OfpErr::OfpbfcMsgBadLen)?;
        let len = usize::from(inner.length);
        if len < header::HEADER_LEN || len > msg.body.len() {
            return Err(OfpErr::OfpbfcMsgBadLen);
        }
        if inner.version != msg.version {
            return Err(OfpErr::OfpbrcBadVersion);
        }
        let bytes = Reader::new(msg.body).take(len)?;
        let m = msgtype::decode(bytes)?;
        let reason = match m.msg_type.kind() {
            OfpType::GroupMod => ForwardReason::GroupMod,
            OfpType::MeterMod => {
                MeterMod::decode(&m)?;
                ForwardReason::MeterMod
            }
            _ => return Err(OfpErr::OfpbfcMsgUnsup),
        };
        Ok(RequestForward { reason, msg: bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, unhex};
    use super::*;

    /// `OFP_REQUESTFORWARD - OF1.4` of OVS's tests/ofp-print.at: two group mods and two
    /// meter mods (OVS sends them with transaction id 0; these have 2).
    #[test]
    fn forwarded_mods_as_ovs_prints_them() {
        for (h, reason) in [
            (
                "0520001800000002050f0010020000000000000000000001",
                ForwardReason::GroupMod,
            ),
            (
                "0520001800000002050f0010020000000001010000000001",
                ForwardReason::GroupMod,
            ),
            (
                "0520001800000002051d0010020000000000000000000001",
                ForwardReason::MeterMod,
            ),
            (
                "0520001800000002051d0010020000000001010000000001",
                ForwardReason::MeterMod,
            ),
        ] {
            let mut m = unhex(h);
            let rf = RequestForward::decode(&msg(&m)).unwrap();
            assert_eq!((rf.reason, rf.msg), (reason, &m[8..]));
            let mut out = Vec::new();
            rf.encode(Version::Of14, &mut out).unwrap();
            m[7] = 0;
            assert_eq!(hex(&out), hex(&m));
        }
        // 1.3's form is the ONF's, earlier ones Nicira's.
        let inner = [4, 29, 0, 16, 0, 0, 0, 1, 0, 2, 0, 0, 0xff, 0xff, 0xff, 0xff];
        let mut out = Vec::new();
        RequestForward {
            reason: ForwardReason::MeterMod,
            msg: &inner,
        }
        .encode(Version::Of13, &mut out)
        .unwrap();
        assert_eq!(msg(&out).msg_type, MsgType::Onft13Requestforward);
        assert_eq!(RequestForward::decode(&msg(&out)).unwrap().msg, inner);
    }

    #[test]
    fn inner_messages_are_checked_as_ovs_checks_them() {
        let fwd = |inner: &[u8]| {
            let mut out = Vec::new();
            MsgType::Ofpt14Requestforward
                .encode(Version::Of14, 0, inner, &mut out)
                .unwrap();
            out
        };
        let echo = [5, 2, 0, 8, 0, 0, 0, 1];
        assert_eq!(
            RequestForward::decode(&msg(&fwd(&echo))),
            Err(OfpErr::OfpbfcMsgUnsup)
        );
        let other_version = [4, 2, 0, 8, 0, 0, 0, 1];
        assert_eq!(
            RequestForward::decode(&msg(&fwd(&other_version))),
            Err(OfpErr::OfpbrcBadVersion)
        );
        let too_long = [5, 2, 0, 16, 0, 0, 0, 1];
        assert_eq!(
            RequestForward::decode(&msg(&fwd(&too_long))),
            Err(OfpErr::OfpbfcMsgBadLen)
        );
        // A meter mod OVS would refuse is refused here too.
        let bad_meter = [5, 29, 0, 16, 0, 0, 0, 1, 0, 9, 0, 0, 0, 0, 0, 1];
        assert_eq!(
            RequestForward::decode(&msg(&fwd(&bad_meter))),
            Err(OfpErr::OfpmmfcBadCommand)
        );
    }
}
