//! Which asynchronous messages a connection receives, by role and reason: OpenFlow 1.3's
//! `OFPT_GET_ASYNC_REQUEST`/`REPLY` and `OFPT_SET_ASYNC` (three pairs of masks), 1.4's with one
//! property per message type and role, and Nicira's `NXT_SET_ASYNC_CONFIG` (1.3's masks) and
//! `NXT_SET_ASYNC_CONFIG2` (1.4's properties) for earlier versions, as OVS's
//! `lib/ofp-connection.c` reads and writes them.
//!
//! A mask has bit `1 << reason` for each reason the connection wants the message for. Masks are
//! held as OVS holds them: besides the wire reasons, a packet-in mask that asks for table misses
//! (`OFPR_NO_MATCH`) also has OVS's own "explicit miss" bit, and before OpenFlow 1.3 its
//! "implicit miss" bit, which the wire never carries.

use super::{Reader, finish, put_prop, put32, start, version_of};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{Message, MsgType};

/// An asynchronous message type, as OVS indexes masks (`enum ofputil_async_msg_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncMsg {
    /// Packet-ins, by `OFPR_*` reason.
    PacketIn = 0,
    /// Port status, by `OFPPR_*` reason.
    PortStatus = 1,
    /// Flow removed, by `OFPRR_*` reason.
    FlowRemoved = 2,
    /// Role status (1.4), by `OFPCRR_*` reason.
    RoleStatus = 3,
    /// Table status (1.4), by `OFPTR_*` reason.
    TableStatus = 4,
    /// Request forward (1.4), by `OFPRFR_*` reason.
    RequestForward = 5,
}

/// Every message type, in OVS's order.
const ALL: [AsyncMsg; 6] = [
    AsyncMsg::PacketIn,
    AsyncMsg::PortStatus,
    AsyncMsg::FlowRemoved,
    AsyncMsg::RoleStatus,
    AsyncMsg::TableStatus,
    AsyncMsg::RequestForward,
];

/// The message types OpenFlow 1.3's masks lack, which need `NXT_SET_ASYNC_CONFIG2` before 1.4.
pub const OAM_EXTENSIONS: u32 = 1 << AsyncMsg::RoleStatus as u32
    | 1 << AsyncMsg::TableStatus as u32
    | 1 << AsyncMsg::RequestForward as u32;

/// `OFPR_NO_MATCH`: a table miss.
const OFPR_NO_MATCH: u32 = 0;
/// OVS's own packet-in reason: a miss sent by an explicit table-miss flow.
pub const OFPR_EXPLICIT_MISS: u32 = 6;
/// OVS's own packet-in reason: a miss with no table-miss flow (before OpenFlow 1.3).
pub const OFPR_IMPLICIT_MISS: u32 = 7;

/// The reasons a mask may hold in versions before 1.4, then from 1.4 on (OVS's `async_props`).
fn allowed(oam: AsyncMsg, version: Version) -> u32 {
    let (a10, a14) = match oam {
        AsyncMsg::PacketIn => (0x07, 0x3f),
        AsyncMsg::PortStatus => (0x07, 0x07),
        AsyncMsg::FlowRemoved => (0x3f, 0x3f),
        AsyncMsg::RoleStatus => (0x07, 0x07),
        AsyncMsg::TableStatus => (0x18, 0x18),
        AsyncMsg::RequestForward => (0x03, 0x03),
    };
    if version >= Version::Of14 { a14 } else { a10 }
}

/// A connection's asynchronous message configuration (OVS's `struct ofputil_async_cfg`):
/// masks for the primary (and equal) role and for the secondary role.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AsyncConfig {
    /// Masks when primary or equal, indexed by [`AsyncMsg`].
    pub primary: [u32; 6],
    /// Masks when secondary.
    pub secondary: [u32; 6],
}

impl AsyncConfig {
    /// What OVS gives a new connection of `version` (`ofputil_async_cfg_default`): packet-ins
    /// for misses and actions (not invalid TTLs) and flow removals when primary, port status
    /// in both roles.
    pub fn ovs_default(version: Version) -> AsyncConfig {
        let mut pin = 0x3f & !(1 << 2) | 1 << OFPR_EXPLICIT_MISS;
        if version <= Version::Of12 {
            pin |= 1 << OFPR_IMPLICIT_MISS;
        }
        let flow_removed = match version {
            Version::Of14 | Version::Of15 => 0x3f,
            Version::Of13 => 0x0f,
            _ => 0x07,
        };
        let mut c = AsyncConfig::default();
        c.primary[AsyncMsg::PacketIn as usize] = pin;
        c.primary[AsyncMsg::PortStatus as usize] = 0x07;
        c.secondary[AsyncMsg::PortStatus as usize] = 0x07;
        c.primary[AsyncMsg::FlowRemoved as usize] = flow_removed;
        c
    }

    /// The wire mask for `oam` in `role` (only the reasons `version` has).
    fn wire_mask(&self, oam: AsyncMsg, primary: bool, version: Version) -> u32 {
        let m = if primary {
            self.primary[oam as usize]
        } else {
            self.secondary[oam as usize]
        };
        m & allowed(oam, version)
    }

    /// Sets the mask for `oam` in `role` from the wire (OVS's `decode_async_mask`): reasons
    /// `version` lacks are `OFPACFC_INVALID` unless `loose`, then dropped.
    fn set_wire_mask(
        &mut self,
        oam: AsyncMsg,
        primary: bool,
        mut mask: u32,
        version: Version,
        loose: bool,
    ) -> Result<(), OfpErr> {
        let ok = allowed(oam, version);
        if mask & !ok != 0 {
            if !loose {
                return Err(OfpErr::OfpacfcInvalid);
            }
            mask &= ok;
        }
        if oam == AsyncMsg::PacketIn && mask & 1 << OFPR_NO_MATCH != 0 {
            mask |= 1 << OFPR_EXPLICIT_MISS;
            if version < Version::Of13 {
                mask |= 1 << OFPR_IMPLICIT_MISS;
            }
        }
        if primary {
            self.primary[oam as usize] = mask;
        } else {
            self.secondary[oam as usize] = mask;
        }
        Ok(())
    }

    /// Appends the configuration as a body: 1.3's three pairs of masks, or 1.4's properties
    /// for the types in `oams` (bits `1 << AsyncMsg`).
    fn put(&self, props: bool, version: Version, oams: u32, out: &mut Vec<u8>) {
        if !props {
            for oam in [
                AsyncMsg::PacketIn,
                AsyncMsg::PortStatus,
                AsyncMsg::FlowRemoved,
            ] {
                put32(out, self.wire_mask(oam, true, version));
                put32(out, self.wire_mask(oam, false, version));
            }
            return;
        }
        for oam in ALL.into_iter().filter(|&o| oams & 1 << o as u32 != 0) {
            for primary in [false, true] {
                let kind = 2 * oam as u16 + u16::from(primary);
                put_prop(
                    out,
                    kind,
                    &self.wire_mask(oam, primary, version).to_be_bytes(),
                );
            }
        }
    }

    /// Appends a set-async in `version` for the message types in `oams`: 1.4's
    /// `OFPT_SET_ASYNC` from 1.4 on; before, `NXT_SET_ASYNC_CONFIG2` when `oams` has a type
    /// only 1.4 knows, else 1.3's `OFPT_SET_ASYNC` or, before 1.3, `NXT_SET_ASYNC_CONFIG`.
    pub fn encode_set(&self, version: Version, xid: u32, oams: u32, out: &mut Vec<u8>) {
        let t = if version >= Version::Of14 {
            MsgType::Ofpt14SetAsync
        } else if oams & OAM_EXTENSIONS != 0 {
            MsgType::NxtSetAsyncConfig2
        } else if version == Version::Of13 {
            MsgType::Ofpt13SetAsync
        } else {
            MsgType::NxtSetAsyncConfig
        };
        let at = start(t, version, xid, out);
        let props = matches!(t, MsgType::Ofpt14SetAsync | MsgType::NxtSetAsyncConfig2);
        self.put(props, version, oams, out);
        let _ = finish(out, at);
    }

    /// Appends the reply to the get-async request `request`: every type, in its version's form.
    pub fn encode_get_reply(&self, request: &Message<'_>, out: &mut Vec<u8>) -> Result<(), OfpErr> {
        let version = version_of(request)?;
        let t = if version < Version::Of14 {
            MsgType::Ofpt13GetAsyncReply
        } else {
            MsgType::Ofpt14GetAsyncReply
        };
        if !t.in_version(version) {
            return Err(OfpErr::OfpbrcBadVersion);
        }
        let at = start(t, version, request.xid, out);
        self.put(t == MsgType::Ofpt14GetAsyncReply, version, u32::MAX, out);
        let _ = finish(out, at);
        Ok(())
    }

    /// Reads a set-async or get-async reply of any form (OVS's
    /// `ofputil_decode_set_async_config`). 1.3's masks replace the whole configuration and
    /// drop reasons they may not have; 1.4's properties change `basis` one mask at a time, and
    /// unless `loose` a reason the version lacks is `OFPACFC_INVALID` and an unknown property
    /// `OFPACFC_UNSUPPORTED`.
    pub fn decode(msg: &Message<'_>, basis: &AsyncConfig, loose: bool) -> Result<Self, OfpErr> {
        let version = version_of(msg)?;
        match msg.msg_type {
            MsgType::Ofpt13SetAsync | MsgType::NxtSetAsyncConfig | MsgType::Ofpt13GetAsyncReply => {
                let mut c = AsyncConfig::default();
                let mut r = Reader::new(msg.body);
                for oam in [
                    AsyncMsg::PacketIn,
                    AsyncMsg::PortStatus,
                    AsyncMsg::FlowRemoved,
                ] {
                    for primary in [true, false] {
                        c.set_wire_mask(oam, primary, r.u32()?, version, true)?;
                    }
                }
                Ok(c)
            }
            MsgType::Ofpt14SetAsync
            | MsgType::Ofpt14GetAsyncReply
            | MsgType::NxtSetAsyncConfig2 => {
                let mut c = *basis;
                for p in super::props(msg.body) {
                    let p = p?;
                    let oam = ALL.get(usize::from(p.kind / 2)).filter(|_| p.kind < 12);
                    match (oam, p.kind) {
                        (Some(&oam), _) => {
                            let mask = super::prop_u32(&p)?;
                            c.set_wire_mask(oam, p.kind % 2 == 1, mask, version, loose)?;
                        }
                        (None, 0xfffe..) if !loose => return Err(OfpErr::OfpbpcBadExpType),
                        (None, _) if !loose => return Err(OfpErr::OfpacfcUnsupported),
                        (None, _) => {}
                    }
                }
                Ok(c)
            }
            _ => Err(OfpErr::OfpbrcBadType),
        }
    }
}

/// Appends a get-async request: 1.3's form, or 1.4's from 1.4 on (none exists before 1.3).
pub fn encode_get_request(
    version: Version,
    xid: u32,
    out: &mut Vec<u8>,
) -> Result<(), crate::msgtype::NotInVersion> {
    let t = if version >= Version::Of14 {
        MsgType::Ofpt14GetAsyncRequest
    } else {
        MsgType::Ofpt13GetAsyncRequest
    };
    let at = t.start(version, xid, out)?;
    let _ = finish(out, at);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, unhex};
    use super::*;
    use crate::msgtype;
    use proptest::prelude::*;

    /// `OFPT_SET_ASYNC - OF1.3` and `NXT_SET_ASYNC_CONFIG` of OVS's tests/ofp-print.at: bit 12
    /// of the packet-in masks is silently dropped.
    #[test]
    fn legacy_masks_as_ovs_prints_them() {
        for h in [
            "041c002000000000 0000100500001007 0000000300000007 0000000000000003",
            "0104002800000000 0000232000000013 0000100500001007 0000000300000007 \
             0000000000000003",
        ] {
            let m = unhex(h);
            let c = AsyncConfig::decode(&msg(&m), &AsyncConfig::default(), false).unwrap();
            // no_match invalid_ttl (+ OVS's explicit miss, and implicit before 1.3).
            let implicit = if m[0] < 4 { 1 << OFPR_IMPLICIT_MISS } else { 0 };
            assert_eq!(
                c.primary[0],
                0x05 | 1 << OFPR_EXPLICIT_MISS | implicit,
                "{h}"
            );
            assert_eq!(c.secondary[0], 0x07 | 1 << OFPR_EXPLICIT_MISS | implicit);
            assert_eq!((c.primary[1], c.secondary[1]), (3, 7));
            assert_eq!((c.primary[2], c.secondary[2]), (0, 3));
            let mut out = Vec::new();
            let v = Version::from_wire(m[0]).unwrap();
            c.encode_set(v, 0, 0b111, &mut out);
            let mut want = m.clone();
            // Written back without bit 12.
            let at = want.len() - 24;
            want[at + 2] = 0;
            want[at + 6] = 0;
            assert_eq!(hex(&out), hex(&want));
        }
    }

    /// `OFPT_SET_ASYNC_CONFIG` (OF1.4) of OVS's tests/ofp-print.at, and its two errors.
    #[test]
    fn properties_as_ovs_reads_them() {
        let ok = "051c003800000002 0000000800000005 0001000800000002 0002000800000002 \
                  0003000800000005 000400080000001c 0005000800000005";
        let c = AsyncConfig::decode(&msg(&unhex(ok)), &AsyncConfig::default(), false).unwrap();
        assert_eq!(c.primary[0], 2);
        assert_eq!(c.secondary[0], 5 | 1 << OFPR_EXPLICIT_MISS);
        assert_eq!((c.primary[1], c.primary[2]), (5, 5));
        let invalid = ok.replacen("0000000800000005", "0000000800000040", 1);
        assert_eq!(
            AsyncConfig::decode(&msg(&unhex(&invalid)), &c, false),
            Err(OfpErr::OfpacfcInvalid)
        );
        let unsupported = ok.replacen("0001000800000002", "0011000800000002", 1);
        assert_eq!(
            AsyncConfig::decode(&msg(&unhex(&unsupported)), &c, false),
            Err(OfpErr::OfpacfcUnsupported)
        );
        assert!(AsyncConfig::decode(&msg(&unhex(&unsupported)), &c, true).is_ok());
    }

    #[test]
    fn requests_and_replies_take_their_version_s_form() {
        let mut out = Vec::new();
        encode_get_request(Version::Of13, 3, &mut out).unwrap();
        assert!(encode_get_request(Version::Of12, 3, &mut Vec::new()).is_err());
        assert_eq!(out, [4, 26, 0, 8, 0, 0, 0, 3]);
        let mut reply = Vec::new();
        let d = AsyncConfig::ovs_default(Version::Of13);
        d.encode_get_reply(&msg(&out), &mut reply).unwrap();
        assert_eq!(msg(&reply).msg_type, MsgType::Ofpt13GetAsyncReply);
        // OpenFlow 1.4's action reasons do not exist in 1.3's masks (OVS reports them as
        // OFPR_ACTION in the packet-ins themselves).
        let back = AsyncConfig::decode(&msg(&reply), &d, false).unwrap();
        assert_eq!(back.primary[0], 0x03 | 1 << OFPR_EXPLICIT_MISS);
        assert_eq!(
            (&back.primary[1..], back.secondary),
            (&d.primary[1..], d.secondary)
        );
        out.clear();
        encode_get_request(Version::Of15, 3, &mut out).unwrap();
        reply.clear();
        let d = AsyncConfig::ovs_default(Version::Of15);
        d.encode_get_reply(&msg(&out), &mut reply).unwrap();
        assert_eq!(reply.len(), 8 + 12 * 8);
        assert_eq!(
            AsyncConfig::decode(&msg(&reply), &AsyncConfig::default(), false).unwrap(),
            d
        );
    }

    /// A new connection's configuration as a running ovs-vswitchd reports it.
    #[test]
    fn defaults_as_ovs_vswitchd_answers() {
        for (label, v) in [
            ("get-async-of13", Version::Of13),
            ("get-async-of14", Version::Of14),
        ] {
            let (req, replies) = super::super::testutil::ovs_reply(label);
            let mut out = Vec::new();
            AsyncConfig::ovs_default(v)
                .encode_get_reply(&msg(&req), &mut out)
                .unwrap();
            assert_eq!(hex(&out), hex(&replies[0]), "{label}");
        }
    }

    proptest! {
        #[test]
        fn set_async_round_trips(v in 1u8..=6, p: [u32; 6], s: [u32; 6], ext: bool) {
            let v = Version::from_wire(v).unwrap();
            let oams = if ext { u32::MAX } else { 0b111 };
            let mut c = AsyncConfig::default();
            for (i, oam) in ALL.into_iter().enumerate() {
                if oams & 1 << i != 0 {
                    c.set_wire_mask(oam, true, p[i], v, true).unwrap();
                    c.set_wire_mask(oam, false, s[i], v, true).unwrap();
                }
            }
            let mut out = Vec::new();
            c.encode_set(v, 1, oams, &mut out);
            prop_assert_eq!(AsyncConfig::decode(&msg(&out), &AsyncConfig::default(), false).unwrap(), c);
        }

        #[test]
        fn random_bodies_never_panic(v in 1u8..=6, body in proptest::collection::vec(any::<u8>(), 0..80)) {
            let v = Version::from_wire(v).unwrap();
            for t in [MsgType::Ofpt14SetAsync, MsgType::NxtSetAsyncConfig2, MsgType::Ofpt13SetAsync] {
                let mut m = Vec::new();
                if t.encode(v, 0, &body, &mut m).is_ok() && let Ok(d) = msgtype::decode(&m) {
                    let _ = AsyncConfig::decode(&d, &AsyncConfig::default(), false);
                }
            }
        }
    }
}
