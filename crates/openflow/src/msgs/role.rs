//! Controller roles: `OFPT_ROLE_REQUEST`/`REPLY` (OpenFlow 1.2 on, with a generation id that
//! orders elections) and Nicira's `NXT_ROLE_REQUEST`/`REPLY` for older versions, and the role
//! status a switch sends a controller whose role another one changed (`OFPT_ROLE_STATUS` from
//! 1.4, the ONF's `ONFT_ROLE_STATUS` in 1.3), as OVS's `lib/ofp-connection.c` reads and writes
//! them. A reply takes the request's form.

use super::{Reader, finish, put32, put64, start, zeros};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{Message, MsgType};

/// A controller's role, numbered as OpenFlow 1.2 numbers it (`OFPCR12_ROLE_*`; Nicira's
/// numbers are one less, and have no "no change").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Role {
    /// Ask for the current role without changing it.
    NoChange = 0,
    /// Equal: full access, every asynchronous message (OVS's default).
    Equal = 1,
    /// Primary (master): full access; the other primaries become secondaries.
    Primary = 2,
    /// Secondary (slave): read only.
    Secondary = 3,
}

impl Role {
    fn from_ofp12(r: u32) -> Result<Role, OfpErr> {
        match r {
            0 => Ok(Role::NoChange),
            1 => Ok(Role::Equal),
            2 => Ok(Role::Primary),
            3 => Ok(Role::Secondary),
            _ => Err(OfpErr::OfprrfcBadRole),
        }
    }
}

/// A role request or reply (OVS's `struct ofputil_role_request`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleMsg {
    /// The role asked for, or held.
    pub role: Role,
    /// The generation id, when the message has one (OpenFlow 1.2 on; none in a request that
    /// changes nothing or a reply that says "unknown" with all ones).
    pub generation_id: Option<u64>,
}

impl RoleMsg {
    /// Appends a role request: OpenFlow 1.2's form from 1.2 on, Nicira's before.
    pub fn encode_request(&self, version: Version, xid: u32, out: &mut Vec<u8>) {
        let t = if version >= Version::Of12 {
            MsgType::Ofpt12RoleRequest
        } else {
            MsgType::NxtRoleRequest
        };
        self.encode(t, version, xid, out);
    }

    /// Appends the reply to the role request `request`, in its form.
    pub fn encode_reply(&self, request: &Message<'_>, out: &mut Vec<u8>) -> Result<(), OfpErr> {
        let t = match request.msg_type {
            MsgType::Ofpt12RoleRequest => MsgType::Ofpt12RoleReply,
            MsgType::NxtRoleRequest => MsgType::NxtRoleReply,
            _ => return Err(OfpErr::OfpbrcBadType),
        };
        let version = super::version_of(request)?;
        self.encode(t, version, request.xid, out);
        Ok(())
    }

    fn encode(&self, t: MsgType, version: Version, xid: u32, out: &mut Vec<u8>) {
        let at = start(t, version, xid, out);
        if matches!(t, MsgType::NxtRoleRequest | MsgType::NxtRoleReply) {
            put32(out, (self.role as u32).saturating_sub(1));
        } else {
            put32(out, self.role as u32);
            zeros(out, 4);
            put64(out, self.generation_id.unwrap_or(u64::MAX));
        }
        let _ = finish(out, at);
    }

    /// Reads a role request or reply of either form; a role the form does not have is
    /// `OFPRRFC_BAD_ROLE`.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        let mut r = Reader::new(msg.body);
        match msg.msg_type {
            MsgType::Ofpt12RoleRequest | MsgType::Ofpt12RoleReply => {
                let role = Role::from_ofp12(r.u32()?)?;
                r.skip(4)?;
                let g = r.u64()?;
                let none = if msg.msg_type == MsgType::Ofpt12RoleRequest {
                    role == Role::NoChange
                } else {
                    g == u64::MAX
                };
                Ok(RoleMsg {
                    role,
                    generation_id: (!none).then_some(g),
                })
            }
            MsgType::NxtRoleRequest | MsgType::NxtRoleReply => {
                let role = match r.u32()? {
                    n @ 0..=2 => Role::from_ofp12(n + 1)?,
                    _ => return Err(OfpErr::OfprrfcBadRole),
                };
                Ok(RoleMsg {
                    role,
                    generation_id: None,
                })
            }
            _ => Err(OfpErr::OfpbrcBadType),
        }
    }
}

/// Why a controller's role changed (`OFPCRR_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RoleReason {
    /// Another controller asked to be primary.
    PrimaryRequest = 0,
    /// The switch's configuration changed.
    Config = 1,
    /// Experimenter data changed.
    Experimenter = 2,
}

/// A role status: the role a controller now has, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleStatus {
    /// The new role.
    pub role: Role,
    /// Why (a reason OVS does not know is kept as its number).
    pub reason: u8,
    /// The generation id.
    pub generation_id: u64,
}

impl RoleStatus {
    /// Appends the message (transaction id 0): none exists before OpenFlow 1.3.
    pub fn encode(
        &self,
        version: Version,
        out: &mut Vec<u8>,
    ) -> Result<(), crate::msgtype::NotInVersion> {
        let t = if version >= Version::Of14 {
            MsgType::Ofpt14RoleStatus
        } else {
            MsgType::Onft13RoleStatus
        };
        let at = t.start(version, 0, out)?;
        put32(out, self.role as u32);
        out.push(self.reason);
        zeros(out, 3);
        put64(out, self.generation_id);
        let _ = finish(out, at);
        Ok(())
    }

    /// Reads a role status; a role OpenFlow does not have is `OFPRRFC_BAD_ROLE`. Properties
    /// are ignored, as OVS ignores them.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(msg, &[MsgType::Ofpt14RoleStatus, MsgType::Onft13RoleStatus])?;
        let mut r = Reader::new(msg.body);
        let role = Role::from_ofp12(r.u32()?)?;
        let reason = r.u8()?;
        r.skip(3)?;
        Ok(RoleStatus {
            role,
            reason,
            generation_id: r.u64()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, unhex};
    use super::*;

    /// The role requests and replies of OVS's tests/ofp-print.at.
    #[test]
    fn roles_as_ovs_prints_them() {
        let cases = [
            // role=primary generation_id=3
            (
                "031800180000000200000002000000000000000000000003",
                Role::Primary,
                Some(3),
            ),
            // role=nochange
            (
                "031800180000000200000000000000000000000000000000",
                Role::NoChange,
                None,
            ),
            // NXT_ROLE_REQUEST role=primary
            (
                "0104001400000002000023200000000a00000001",
                Role::Primary,
                None,
            ),
            // role=secondary generation_id=1311768467750121360
            (
                "031900180000000200000003000000001234567890abcdef",
                Role::Secondary,
                Some(0x1234_5678_90ab_cdef),
            ),
            // NXT_ROLE_REPLY role=secondary
            (
                "0104001400000002000023200000000b00000002",
                Role::Secondary,
                None,
            ),
        ];
        for (h, role, generation_id) in cases {
            let m = unhex(h);
            let r = RoleMsg::decode(&msg(&m)).unwrap();
            assert_eq!(
                r,
                RoleMsg {
                    role,
                    generation_id
                },
                "{h}"
            );
        }
        // Requests and replies are written back the same.
        let m = unhex(cases[0].0);
        let mut out = Vec::new();
        RoleMsg::decode(&msg(&m))
            .unwrap()
            .encode_request(Version::Of12, 2, &mut out);
        assert_eq!(hex(&out), hex(&m));
        let nx = unhex(cases[2].0);
        let mut out = Vec::new();
        RoleMsg {
            role: Role::Secondary,
            generation_id: None,
        }
        .encode_reply(&msg(&nx), &mut out)
        .unwrap();
        assert_eq!(hex(&out), cases[4].0);
        // An OF1.2 reply with no generation says all ones.
        let mut out = Vec::new();
        RoleMsg {
            role: Role::Equal,
            generation_id: None,
        }
        .encode_reply(&msg(&m), &mut out)
        .unwrap();
        assert_eq!(
            hex(&out),
            "03190018000000020000000100000000ffffffffffffffff"
        );
    }

    #[test]
    fn role_reply_as_ovs_vswitchd_answers() {
        let (req, replies) = super::super::testutil::ovs_reply("role-of13");
        let req = msg(&req);
        assert_eq!(
            RoleMsg::decode(&req).unwrap(),
            RoleMsg {
                role: Role::NoChange,
                generation_id: None
            }
        );
        let mut out = Vec::new();
        RoleMsg {
            role: Role::Equal,
            generation_id: None,
        }
        .encode_reply(&req, &mut out)
        .unwrap();
        assert_eq!(out, replies[0]);
    }

    /// `OFP_ROLE_STATUS` of OVS's tests/ofp-print.at: the ONF form in 1.3, the standard one
    /// after (OVS sends them with transaction id 0; these have 0xa).
    #[test]
    fn role_status_as_ovs_prints_it() {
        for (h, v, reason, generation_id) in [
            (
                "040400200000000a 4f4e460000000777 0000000201000000 0000000000000010",
                Version::Of13,
                RoleReason::Config,
                16,
            ),
            (
                "051e00180000000a 0000000202000000 ffffffffffffffff",
                Version::Of14,
                RoleReason::Experimenter,
                u64::MAX,
            ),
        ] {
            let mut m = unhex(h);
            let rs = RoleStatus::decode(&msg(&m)).unwrap();
            assert_eq!(
                rs,
                RoleStatus {
                    role: Role::Primary,
                    reason: reason as u8,
                    generation_id,
                }
            );
            let mut out = Vec::new();
            rs.encode(v, &mut out).unwrap();
            m[7] = 0;
            assert_eq!(hex(&out), hex(&m));
        }
        let mut out = Vec::new();
        let equal = RoleStatus {
            role: Role::Equal,
            reason: 0,
            generation_id: 0,
        };
        assert!(equal.encode(Version::Of12, &mut out).is_err());
    }

    #[test]
    fn unknown_roles_are_refused() {
        let m = unhex("031800180000000200000004000000000000000000000010");
        assert_eq!(RoleMsg::decode(&msg(&m)), Err(OfpErr::OfprrfcBadRole));
        let m = unhex("0104001400000002000023200000000a00000003");
        assert_eq!(RoleMsg::decode(&msg(&m)), Err(OfpErr::OfprrfcBadRole));
    }

    #[test]
    fn every_role_round_trips() {
        for v in Version::ALL {
            for role in [Role::Equal, Role::Primary, Role::Secondary] {
                let rm = RoleMsg {
                    role,
                    generation_id: (v >= Version::Of12).then_some(7),
                };
                let mut out = Vec::new();
                rm.encode_request(v, 1, &mut out);
                assert_eq!(RoleMsg::decode(&msg(&out)).unwrap(), rm);
            }
        }
    }
}
