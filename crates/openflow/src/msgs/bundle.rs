//! Bundles: `OFPT_BUNDLE_CONTROL` (open, close, commit, discard and their replies) and
//! `OFPT_BUNDLE_ADD_MESSAGE` (one message to apply with the bundle) of OpenFlow 1.4 on, and the
//! ONF extension's `ONFT_BUNDLE_CONTROL`/`ONFT_BUNDLE_ADD_MESSAGE` (2300/2301) that carry the
//! same bodies in OpenFlow 1.3, as OVS's `lib/ofp-bundle.c` reads and writes them.
//!
//! A bundled message is kept as bytes: it is checked as OVS checks it (same version, a length
//! that fits, the outer transaction id, a message type that may be bundled) and decoded by its
//! own codec when the bundle is applied. `ovn-controller` sends every flow change as one atomic,
//! ordered bundle.

use super::{Reader, finish, put16, put32, start};
use crate::error::OfpErr;
use crate::header::{self, Version};
use crate::msgtype::{self, EncodeError, Message, MsgType, OfpType};

/// Bundle flag: apply all or nothing.
pub const OFPBF_ATOMIC: u16 = 1 << 0;
/// Bundle flag: apply in the order added.
pub const OFPBF_ORDERED: u16 = 1 << 1;

/// A bundle control's type (`OFPBCT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum BundleCtrlType {
    /// Open a bundle.
    OpenRequest = 0,
    /// It is open.
    OpenReply = 1,
    /// Close it: no more messages.
    CloseRequest = 2,
    /// It is closed.
    CloseReply = 3,
    /// Apply it.
    CommitRequest = 4,
    /// It is applied.
    CommitReply = 5,
    /// Drop it.
    DiscardRequest = 6,
    /// It is dropped.
    DiscardReply = 7,
}

impl BundleCtrlType {
    fn from_wire(t: u16) -> Option<BundleCtrlType> {
        use BundleCtrlType::*;
        [
            OpenRequest,
            OpenReply,
            CloseRequest,
            CloseReply,
            CommitRequest,
            CommitReply,
            DiscardRequest,
            DiscardReply,
        ]
        .get(usize::from(t))
        .copied()
    }

    /// The reply to this request (`None` for a reply).
    pub fn reply(self) -> Option<BundleCtrlType> {
        let t = self as u16;
        t.is_multiple_of(2)
            .then(|| Self::from_wire(t + 1))
            .flatten()
    }
}

/// `OFPT_BUNDLE_CONTROL` (OVS's `struct ofputil_bundle_ctrl_msg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BundleCtrl {
    /// The bundle.
    pub bundle_id: u32,
    /// What to do, or what was done.
    pub ctrl_type: BundleCtrlType,
    /// `OFPBF_*` flags.
    pub flags: u16,
}

/// The bundle form of `version`: the ONF extension's in 1.3, the standard's from 1.4 on.
fn form(version: Version, control: bool) -> Result<MsgType, EncodeError> {
    let t = match (version, control) {
        (Version::Of13, true) => MsgType::Onft13BundleControl,
        (Version::Of13, false) => MsgType::Onft13BundleAddMessage,
        (_, true) => MsgType::Ofpt14BundleControl,
        (_, false) => MsgType::Ofpt14BundleAddMessage,
    };
    if t.in_version(version) {
        Ok(t)
    } else {
        Err(msgtype::NotInVersion {
            msg_type: t,
            version,
        }
        .into())
    }
}

impl BundleCtrl {
    /// Appends the message (OpenFlow 1.3 on).
    pub fn encode(&self, version: Version, xid: u32, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let at = start(form(version, true)?, version, xid, out);
        put32(out, self.bundle_id);
        put16(out, self.ctrl_type as u16);
        put16(out, self.flags);
        finish(out, at)
    }

    /// Appends the reply to `request` (the request's form, version and transaction id, the
    /// bundle and flags as given, the type the request's reply).
    pub fn encode_reply(&self, request: &Message<'_>, out: &mut Vec<u8>) -> Result<(), OfpErr> {
        let version = super::version_of(request)?;
        // The reply's flags are 0, whatever the request's (as OVS's handle_bundle_control).
        let reply = BundleCtrl {
            ctrl_type: self.ctrl_type.reply().unwrap_or(self.ctrl_type),
            flags: 0,
            ..*self
        };
        reply
            .encode(version, request.xid, out)
            .map_err(|_| OfpErr::OfpbrcBadVersion)
    }

    /// Reads a bundle control; a type OVS does not know is `OFPBFC_BAD_TYPE` (which OVS
    /// answers when it handles the message). Properties are ignored, as OVS ignores them.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(
            msg,
            &[MsgType::Ofpt14BundleControl, MsgType::Onft13BundleControl],
        )?;
        let mut r = Reader::new(msg.body);
        let bundle_id = r.u32()?;
        let ctrl_type = BundleCtrlType::from_wire(r.u16()?).ok_or(OfpErr::OfpbfcBadType)?;
        Ok(BundleCtrl {
            bundle_id,
            ctrl_type,
            flags: r.u16()?,
        })
    }
}

/// `OFPT_BUNDLE_ADD_MESSAGE`: one message for a bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BundleAdd<'a> {
    /// The bundle.
    pub bundle_id: u32,
    /// `OFPBF_*` flags.
    pub flags: u16,
    /// The bundled message, header included.
    pub msg: &'a [u8],
}

/// Whether OVS accepts a message of this meaning in a bundle (`ofputil_is_bundlable`): flow,
/// group and port mods, and packet-outs.
pub fn is_bundlable(t: OfpType) -> bool {
    matches!(
        t,
        OfpType::PortMod | OfpType::FlowMod | OfpType::GroupMod | OfpType::PacketOut
    )
}

impl<'a> BundleAdd<'a> {
    /// Appends the message, with the bundled message's transaction id, as OVS sends it.
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let xid = header::Header::parse(self.msg).map_or(0, |h| h.xid);
        let at = start(form(version, false)?, version, xid, out);
        put32(out, self.bundle_id);
        put16(out, 0);
        put16(out, self.flags);
        out.extend_from_slice(self.msg);
        finish(out, at)
    }

    /// Reads a bundle add (OVS's `ofputil_decode_bundle_add`): the inner message must be of the
    /// same version (`OFPBFC_BAD_VERSION`), fit (`OFPBFC_MSG_BAD_LEN`), repeat the outer
    /// transaction id (`OFPBFC_MSG_BAD_XID`) and be a message OVS bundles
    /// (`OFPBFC_MSG_UNSUP`, also for one it cannot decode). Returns the inner message's type.
    pub fn decode(msg: &Message<'a>) -> Result<(Self, MsgType), OfpErr> {
        super::expect(
            msg,
            &[
                MsgType::Ofpt14BundleAddMessage,
                MsgType::Onft13BundleAddMessage,
            ],
        )?;
        let mut r = Reader::new(msg.body);
        let bundle_id = r.u32()?;
        r.skip(2)?;
        let flags = r.u16()?;
        let rest = r.rest();
        let inner = header::Header::parse(rest).ok_or(OfpErr::OfpbfcMsgBadLen)?;
        if inner.version != msg.version {
            return Err(OfpErr::OfpbfcBadVersion);
        }
        let len = usize::from(inner.length);
        if len < header::HEADER_LEN || len > rest.len() {
            return Err(OfpErr::OfpbfcMsgBadLen);
        }
        if inner.xid != msg.xid {
            return Err(OfpErr::OfpbfcMsgBadXid);
        }
        let inner_msg = &rest[..len];
        let t = msgtype::decode(inner_msg)
            .map_err(|_| OfpErr::OfpbfcMsgUnsup)?
            .msg_type;
        if !is_bundlable(t.kind()) {
            return Err(OfpErr::OfpbfcMsgUnsup);
        }
        Ok((
            BundleAdd {
                bundle_id,
                flags,
                msg: inner_msg,
            },
            t,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{msg, ofctl};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bundles_as_ovs_ofctl_sends_them() {
        for (label, v) in [
            ("bundle-add-flow-of14", Version::Of14),
            ("bundle-add-flow-of13", Version::Of13),
        ] {
            let msgs = ofctl(label);
            // table features, port desc, open, add, barrier, commit
            let open = BundleCtrl::decode(&msg(&msgs[2])).unwrap();
            assert_eq!(
                open,
                BundleCtrl {
                    bundle_id: 0,
                    ctrl_type: BundleCtrlType::OpenRequest,
                    flags: OFPBF_ATOMIC | OFPBF_ORDERED
                }
            );
            let mut out = Vec::new();
            open.encode(v, msg(&msgs[2]).xid, &mut out).unwrap();
            assert_eq!(out, msgs[2], "{label}");
            let (add, inner) = BundleAdd::decode(&msg(&msgs[3])).unwrap();
            assert_eq!(inner.kind(), OfpType::FlowMod);
            assert_eq!(
                (add.bundle_id, add.flags),
                (0, OFPBF_ATOMIC | OFPBF_ORDERED)
            );
            out.clear();
            add.encode(v, &mut out).unwrap();
            assert_eq!(out, msgs[3], "{label}");
            let commit = BundleCtrl::decode(&msg(&msgs[5])).unwrap();
            assert_eq!(commit.ctrl_type, BundleCtrlType::CommitRequest);
            // The reply takes the request's form.
            out.clear();
            commit.encode_reply(&msg(&msgs[5]), &mut out).unwrap();
            let r = msg(&out);
            assert_eq!(r.msg_type, msg(&msgs[5]).msg_type);
            // Of type the request's reply, with flags 0 whatever the request's.
            assert_ne!(commit.flags, 0);
            let reply = BundleCtrl::decode(&r).unwrap();
            assert_eq!(
                (reply.ctrl_type, reply.flags),
                (BundleCtrlType::CommitReply, 0)
            );
        }
    }

    #[test]
    fn bundled_messages_are_checked_as_ovs_checks_them() {
        let add = &ofctl("bundle-add-flow-of14")[3];
        let check = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut m = add.clone();
            f(&mut m);
            BundleAdd::decode(&msg(&m)).map(|(_, t)| t)
        };
        // Inner version, length, xid; an echo cannot be bundled.
        assert_eq!(check(&|m| m[16] = 4), Err(OfpErr::OfpbfcBadVersion));
        assert_eq!(check(&|m| m[18] = 0xff), Err(OfpErr::OfpbfcMsgBadLen));
        assert_eq!(check(&|m| m[23] ^= 1), Err(OfpErr::OfpbfcMsgBadXid));
        assert_eq!(check(&|m| m[17] = 2), Err(OfpErr::OfpbfcMsgUnsup));
        assert_eq!(check(&|m| m[17] = 0x77), Err(OfpErr::OfpbfcMsgUnsup));
        let mut short = add[..20].to_vec();
        short[3] = 20;
        assert_eq!(
            BundleAdd::decode(&msg(&short)).map(|_| ()),
            Err(OfpErr::OfpbfcMsgBadLen)
        );
        let mut bad = ofctl("bundle-add-flow-of14")[2].clone();
        bad[13] = 9;
        assert_eq!(BundleCtrl::decode(&msg(&bad)), Err(OfpErr::OfpbfcBadType));
        assert!(
            BundleCtrl {
                bundle_id: 1,
                ctrl_type: BundleCtrlType::OpenRequest,
                flags: 0
            }
            .encode(Version::Of12, 1, &mut Vec::new())
            .is_err()
        );
    }

    proptest! {
        #[test]
        fn controls_round_trip(v in 4u8..=6, id: u32, t in 0u16..8, flags: u16) {
            let v = Version::from_wire(v).unwrap();
            let c = BundleCtrl { bundle_id: id, ctrl_type: BundleCtrlType::from_wire(t).unwrap(), flags };
            let mut out = Vec::new();
            c.encode(v, 1, &mut out).unwrap();
            prop_assert_eq!(BundleCtrl::decode(&msg(&out)).unwrap(), c);
        }

        #[test]
        fn random_bodies_never_panic(v in 4u8..=6, body in proptest::collection::vec(any::<u8>(), 0..80)) {
            let v = Version::from_wire(v).unwrap();
            let mut m = Vec::new();
            if form(v, false).unwrap().encode(v, 0, &body, &mut m).is_ok() && let Ok(d) = msgtype::decode(&m) {
                let _ = BundleAdd::decode(&d);
            }
        }
    }
}
