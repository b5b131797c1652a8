//! The switch as a whole: its features (`OFPT_FEATURES_REQUEST`/`REPLY`), its configuration
//! (`OFPT_GET_CONFIG_REQUEST`/`REPLY`, `OFPT_SET_CONFIG`), barriers and echoes, as OVS's
//! `lib/ofp-switch.c` reads and writes them.
//!
//! A features reply lists the ports in OpenFlow 1.0 to 1.2; from 1.3 on it has none (the
//! controller asks for port descriptions) and carries an auxiliary connection id instead.
//! Capabilities are held as OVS's version-neutral `OFPUTIL_C_*` bits: spanning tree (1.0) and
//! group statistics (1.1 on) share wire bit 3, so each moves to its own bit.

use super::{Reader, finish, put16, put32, put64, start, version_of, zeros};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgs::port::{PhyPort, pull_ports};
use crate::msgtype::{EncodeError, Message, MsgType};

/// Capability: flow statistics.
pub const OFPUTIL_C_FLOW_STATS: u32 = 1 << 0;
/// Capability: table statistics.
pub const OFPUTIL_C_TABLE_STATS: u32 = 1 << 1;
/// Capability: port statistics.
pub const OFPUTIL_C_PORT_STATS: u32 = 1 << 2;
/// Capability (OpenFlow 1.0): 802.1D spanning tree.
pub const OFPUTIL_C_STP: u32 = 1 << 3;
/// Capability (OpenFlow 1.1 on): group statistics.
pub const OFPUTIL_C_GROUP_STATS: u32 = 1 << 4;
/// Capability: IP reassembly.
pub const OFPUTIL_C_IP_REASM: u32 = 1 << 5;
/// Capability: queue statistics.
pub const OFPUTIL_C_QUEUE_STATS: u32 = 1 << 6;
/// Capability (OpenFlow 1.0, 1.1): IP addresses matched in ARP packets.
pub const OFPUTIL_C_ARP_MATCH_IP: u32 = 1 << 7;
/// Capability (OpenFlow 1.2 on): looping ports blocked.
pub const OFPUTIL_C_PORT_BLOCKED: u32 = 1 << 8;
/// Capability (OpenFlow 1.4 on): bundles.
pub const OFPUTIL_C_BUNDLES: u32 = 1 << 9;
/// Capability (OpenFlow 1.4 on): flow monitoring.
pub const OFPUTIL_C_FLOW_MONITORING: u32 = 1 << 10;

/// The capabilities OVS's bridges report (each version sends those it has): flow, table, port,
/// queue and group statistics, bundles, and IP addresses matched in ARP.
pub const OVS_CAPABILITIES: u32 = OFPUTIL_C_FLOW_STATS
    | OFPUTIL_C_TABLE_STATS
    | OFPUTIL_C_PORT_STATS
    | OFPUTIL_C_QUEUE_STATS
    | OFPUTIL_C_GROUP_STATS
    | OFPUTIL_C_BUNDLES
    | OFPUTIL_C_ARP_MATCH_IP;

/// The capabilities whose wire bit is the same as OVS's own bit in every version.
const OFPC_COMMON: u32 = OFPUTIL_C_FLOW_STATS
    | OFPUTIL_C_TABLE_STATS
    | OFPUTIL_C_PORT_STATS
    | OFPUTIL_C_IP_REASM
    | OFPUTIL_C_QUEUE_STATS;
/// Wire bit 3: spanning tree in OpenFlow 1.0, group statistics after.
const OFPC_BIT3: u32 = 1 << 3;

/// The capability bits `version` carries in place (OVS's `ofputil_capabilities_mask`).
fn capabilities_mask(version: Version) -> u32 {
    match version {
        Version::Of10 | Version::Of11 => OFPC_COMMON | OFPUTIL_C_ARP_MATCH_IP,
        Version::Of12 | Version::Of13 => OFPC_COMMON | OFPUTIL_C_PORT_BLOCKED,
        Version::Of14 | Version::Of15 => {
            OFPC_COMMON | OFPUTIL_C_PORT_BLOCKED | OFPUTIL_C_BUNDLES | OFPUTIL_C_FLOW_MONITORING
        }
    }
}

/// The OpenFlow 1.0 action bitmap of OVS's switches: every action 1.0 has (`OFPAT10_OUTPUT`
/// to `OFPAT10_ENQUEUE`).
pub const OFP10_ALL_ACTIONS: u32 = 0xfff;

/// `OFPT_FEATURES_REPLY` (OVS's `struct ofputil_switch_features` and its ports).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeaturesReply {
    /// The datapath id.
    pub datapath_id: u64,
    /// Packets the switch can buffer for packet-ins (OVS: 0).
    pub n_buffers: u32,
    /// Flow tables (OVS: 254).
    pub n_tables: u8,
    /// The auxiliary connection id (OpenFlow 1.3 on; 0 for the main connection).
    pub auxiliary_id: u8,
    /// `OFPUTIL_C_*` bits.
    pub capabilities: u32,
    /// OpenFlow 1.0's bitmap of supported actions (`1 << OFPAT10_*`); 0 in other versions.
    pub actions: u32,
    /// The ports, which OpenFlow 1.0 to 1.2 list here (later versions: empty).
    pub ports: Vec<PhyPort>,
}

/// Appends an `OFPT_FEATURES_REQUEST`.
pub fn encode_features_request(version: Version, xid: u32, out: &mut Vec<u8>) {
    let at = start(MsgType::OfptFeaturesRequest, version, xid, out);
    let _ = finish(out, at);
}

impl FeaturesReply {
    /// Appends the reply in `version` (ports only up to 1.2; the action bitmap only in 1.0).
    /// Too many ports for one message (more than 1364 in 1.0) are an error.
    pub fn encode(&self, version: Version, xid: u32, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let t = match version {
            Version::Of10 => MsgType::Ofpt10FeaturesReply,
            Version::Of11 | Version::Of12 => MsgType::Ofpt11FeaturesReply,
            _ => MsgType::Ofpt13FeaturesReply,
        };
        let at = start(t, version, xid, out);
        put64(out, self.datapath_id);
        put32(out, self.n_buffers);
        out.push(self.n_tables);
        out.push(if version >= Version::Of13 {
            self.auxiliary_id
        } else {
            0
        });
        zeros(out, 2);
        let mut caps = self.capabilities & capabilities_mask(version);
        let bit3 = if version == Version::Of10 {
            OFPUTIL_C_STP
        } else {
            OFPUTIL_C_GROUP_STATS
        };
        if self.capabilities & bit3 != 0 {
            caps |= OFPC_BIT3;
        }
        put32(out, caps);
        put32(
            out,
            if version == Version::Of10 {
                self.actions
            } else {
                0
            },
        );
        if version <= Version::Of12 {
            for p in &self.ports {
                p.put(version, out);
            }
        }
        finish(out, at)
    }

    /// Reads a features reply (OVS's `ofputil_pull_switch_features` and the ports after).
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(
            msg,
            &[
                MsgType::Ofpt10FeaturesReply,
                MsgType::Ofpt11FeaturesReply,
                MsgType::Ofpt13FeaturesReply,
            ],
        )?;
        let version = version_of(msg)?;
        let mut r = Reader::new(msg.body);
        let datapath_id = r.u64()?;
        let n_buffers = r.u32()?;
        let n_tables = r.u8()?;
        let auxiliary_id = r.u8()?;
        r.skip(2)?;
        let wire_caps = r.u32()?;
        let wire_actions = r.u32()?;
        let mut capabilities = wire_caps & capabilities_mask(version);
        if wire_caps & OFPC_BIT3 != 0 {
            capabilities |= if msg.msg_type == MsgType::Ofpt10FeaturesReply {
                OFPUTIL_C_STP
            } else {
                OFPUTIL_C_GROUP_STATS
            };
        }
        Ok(FeaturesReply {
            datapath_id,
            n_buffers,
            n_tables,
            auxiliary_id: if msg.msg_type == MsgType::Ofpt13FeaturesReply {
                auxiliary_id
            } else {
                0
            },
            capabilities,
            actions: if msg.msg_type == MsgType::Ofpt10FeaturesReply {
                wire_actions
            } else {
                0
            },
            ports: pull_ports(version, r.rest())?,
        })
    }
}

/// How the switch treats IP fragments (`OFPC_FRAG_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u16)]
pub enum FragHandling {
    /// `normal`: no special handling.
    #[default]
    Normal = 0,
    /// `drop`: drop fragments.
    Drop = 1,
    /// `reassemble`: reassemble them.
    Reassemble = 2,
    /// `nx-match`: first fragments carry their L4 ports for matching (OVS's extension).
    NxMatch = 3,
}

/// `OFPC_FRAG_MASK`.
const OFPC_FRAG_MASK: u16 = 3;
/// `OFPC_INVALID_TTL_TO_CONTROLLER` (OpenFlow 1.1 and 1.2).
const OFPC_INVALID_TTL_TO_CONTROLLER: u16 = 1 << 2;

/// The switch configuration of `OFPT_GET_CONFIG_REPLY` and `OFPT_SET_CONFIG` (OVS's
/// `struct ofputil_switch_config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    /// Fragment handling.
    pub frag: FragHandling,
    /// Bytes of a packet a packet-in carries (and, for connections that only manage, whether
    /// they receive asynchronous messages at all: OVS sends none to a service connection whose
    /// `miss_send_len` is 0).
    pub miss_send_len: u16,
    /// Whether packets with an invalid TTL go to the controller: a flag of OpenFlow 1.0 to
    /// 1.2 only (`None` when the message's version has no such flag).
    pub invalid_ttl_to_controller: Option<bool>,
}

/// Appends an `OFPT_GET_CONFIG_REQUEST`.
pub fn encode_get_config_request(version: Version, xid: u32, out: &mut Vec<u8>) {
    let at = start(MsgType::OfptGetConfigRequest, version, xid, out);
    let _ = finish(out, at);
}

impl SwitchConfig {
    /// Appends an `OFPT_GET_CONFIG_REPLY` with transaction id `xid` (the request's).
    pub fn encode_reply(&self, version: Version, xid: u32, out: &mut Vec<u8>) {
        self.encode(MsgType::OfptGetConfigReply, version, xid, out);
    }

    /// Appends an `OFPT_SET_CONFIG`.
    pub fn encode_set(&self, version: Version, xid: u32, out: &mut Vec<u8>) {
        self.encode(MsgType::OfptSetConfig, version, xid, out);
    }

    fn encode(&self, t: MsgType, version: Version, xid: u32, out: &mut Vec<u8>) {
        let at = start(t, version, xid, out);
        let mut flags = self.frag as u16;
        if self.invalid_ttl_to_controller == Some(true) && version < Version::Of13 {
            flags |= OFPC_INVALID_TTL_TO_CONTROLLER;
        }
        put16(out, flags);
        put16(out, self.miss_send_len);
        let _ = finish(out, at);
    }

    /// Reads a get-config reply or set-config. A set-config with flags OVS does not know is
    /// `OFPSCFC_BAD_FLAGS`; a reply's unknown flags are ignored, as OVS ignores them.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(msg, &[MsgType::OfptGetConfigReply, MsgType::OfptSetConfig])?;
        let mut r = Reader::new(msg.body);
        let flags = r.u16()?;
        let miss_send_len = r.u16()?;
        let (valid, invalid_ttl) = if msg.version < Version::Of13.wire() {
            (
                OFPC_FRAG_MASK | OFPC_INVALID_TTL_TO_CONTROLLER,
                Some(flags & OFPC_INVALID_TTL_TO_CONTROLLER != 0),
            )
        } else {
            (OFPC_FRAG_MASK, None)
        };
        if msg.msg_type == MsgType::OfptSetConfig && flags & !valid != 0 {
            return Err(OfpErr::OfpscfcBadFlags);
        }
        let frag = match flags & OFPC_FRAG_MASK {
            0 => FragHandling::Normal,
            1 => FragHandling::Drop,
            2 => FragHandling::Reassemble,
            _ => FragHandling::NxMatch,
        };
        Ok(SwitchConfig {
            frag,
            miss_send_len,
            invalid_ttl_to_controller: invalid_ttl,
        })
    }
}

/// Appends a barrier request: OpenFlow 1.0's type 18, 20 after.
pub fn encode_barrier_request(version: Version, xid: u32, out: &mut Vec<u8>) {
    let t = if version == Version::Of10 {
        MsgType::Ofpt10BarrierRequest
    } else {
        MsgType::Ofpt11BarrierRequest
    };
    let at = start(t, version, xid, out);
    let _ = finish(out, at);
}

/// Appends a barrier reply: OpenFlow 1.0's type 19, 21 after.
pub fn encode_barrier_reply(version: Version, xid: u32, out: &mut Vec<u8>) {
    let t = if version == Version::Of10 {
        MsgType::Ofpt10BarrierReply
    } else {
        MsgType::Ofpt11BarrierReply
    };
    let at = start(t, version, xid, out);
    let _ = finish(out, at);
}

/// Appends the echo reply to the echo request `request`: its version, transaction id and
/// data. `None` when `request` is not an echo request.
pub fn encode_echo_reply(request: &Message<'_>, out: &mut Vec<u8>) -> Option<()> {
    if request.msg_type != MsgType::OfptEchoRequest {
        return None;
    }
    // An echo exists in every version byte; the reply is no longer than the request.
    let at = crate::header::start(
        out,
        request.version,
        crate::header::OFPT_ECHO_REPLY,
        request.xid,
    );
    out.extend_from_slice(request.body);
    let _ = crate::header::finish(out, at);
    Some(())
}

/// Appends an echo request carrying `data` (cut to fit one message).
pub fn encode_echo_request(version: Version, xid: u32, data: &[u8], out: &mut Vec<u8>) {
    let at = start(MsgType::OfptEchoRequest, version, xid, out);
    out.extend_from_slice(&data[..data.len().min(crate::header::MAX_MESSAGE_LEN - 8)]);
    let _ = finish(out, at);
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, ofctl, unhex};
    use super::*;
    use crate::msgtype;
    use proptest::prelude::*;

    /// `OFPT_FEATURES_REPLY - OF1.0` of OVS's tests/ofp-print.at.
    #[test]
    fn features_reply_of10_as_ovs_prints_it() {
        let m = unhex(
            "010600e000000001 0000505400000001 0000010002000000 0000008700000fff \
             fffe505400000001 6272300000000000 0000000000000000 0000000100000001 \
             0000000000000000 0000000000000000 0003505400000001 6574683000000000 \
             0000000000000000 0000000000000000 000002080000028f 0000028f00000000 \
             0002505400000003 6574683200000000 0000000000000000 0000000000000000 \
             000002080000028f 0000028f00000000 0001505400000002 6574683100000000 \
             0000000000000000 0000000000000000 000002080000028f 0000028f00000000",
        );
        let f = FeaturesReply::decode(&msg(&m)).unwrap();
        assert_eq!(
            (f.datapath_id, f.n_buffers, f.n_tables),
            (0x5054_0000_0001, 256, 2)
        );
        assert_eq!(
            f.capabilities,
            OFPUTIL_C_FLOW_STATS
                | OFPUTIL_C_TABLE_STATS
                | OFPUTIL_C_PORT_STATS
                | OFPUTIL_C_ARP_MATCH_IP
        );
        assert_eq!(f.actions, OFP10_ALL_ACTIONS);
        let names: Vec<_> = f
            .ports
            .iter()
            .map(|p| (p.port_no, p.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [(0xfffe, "br0"), (3, "eth0"), (2, "eth2"), (1, "eth1")]
        );
        assert_eq!(f.ports[1].curr_speed, 100_000);
        let mut out = Vec::new();
        f.encode(Version::Of10, 1, &mut out).unwrap();
        assert_eq!(hex(&out), hex(&m));
    }

    /// What OVS 3.1's netdev datapath bridge answers in OpenFlow 1.3 (`ovs-ofctl -O
    /// OpenFlow13 show`): no ports, group statistics on wire bit 3.
    #[test]
    fn features_reply_of13_has_no_ports_and_group_stats_on_bit_3() {
        let f = FeaturesReply {
            datapath_id: 0x0000_aabb_ccdd_ee01,
            n_buffers: 0,
            n_tables: 254,
            auxiliary_id: 0,
            capabilities: OFPUTIL_C_FLOW_STATS
                | OFPUTIL_C_TABLE_STATS
                | OFPUTIL_C_PORT_STATS
                | OFPUTIL_C_GROUP_STATS
                | OFPUTIL_C_QUEUE_STATS,
            actions: 0,
            ports: vec![],
        };
        let mut out = Vec::new();
        f.encode(Version::Of13, 2, &mut out).unwrap();
        assert_eq!(
            hex(&out),
            "0406002000000002 0000aabbccddee01 00000000 fe000000 0000004f 00000000"
                .replace(' ', "")
        );
        assert_eq!(FeaturesReply::decode(&msg(&out)).unwrap(), f);
    }

    /// What a running ovs-vswitchd answers: read, then written back byte for byte.
    #[test]
    fn features_and_config_as_ovs_vswitchd_answers() {
        use super::super::testutil::ovs_reply;
        for label in ["features-of10", "features-of13"] {
            let (req, replies) = ovs_reply(label);
            let f = FeaturesReply::decode(&msg(&replies[0])).unwrap();
            assert_eq!(
                (f.datapath_id, f.n_buffers, f.n_tables),
                (0xaabbccddee01, 0, 254)
            );
            let req = msg(&req);
            let mut out = Vec::new();
            f.encode(Version::from_wire(req.version).unwrap(), req.xid, &mut out)
                .unwrap();
            assert_eq!(hex(&out), hex(&replies[0]), "{label}");
            // OVS_CAPABILITIES is what each version's reply carries.
            let ovs = FeaturesReply {
                capabilities: OVS_CAPABILITIES,
                ..f.clone()
            };
            out.clear();
            ovs.encode(Version::from_wire(req.version).unwrap(), req.xid, &mut out)
                .unwrap();
            assert_eq!(hex(&out), hex(&replies[0]), "{label}");
            // OpenFlow 1.4 adds BUNDLES (OVS: "FLOW_STATS TABLE_STATS PORT_STATS GROUP_STATS
            // QUEUE_STATS BUNDLES").
            out.clear();
            ovs.encode(Version::Of14, req.xid, &mut out).unwrap();
            assert_eq!(hex(&out[24..28]), "0000024f", "{label}");
            if label == "features-of10" {
                let names: Vec<_> = f.ports.iter().map(|p| p.name.as_str()).collect();
                assert_eq!(names, ["p1", "br0"]);
            }
        }
        let (req, replies) = ovs_reply("get-config-of13");
        let c = SwitchConfig::decode(&msg(&replies[0])).unwrap();
        assert_eq!((c.frag, c.miss_send_len), (FragHandling::Normal, 0));
        let mut out = Vec::new();
        c.encode_reply(Version::Of13, msg(&req).xid, &mut out);
        assert_eq!(out, replies[0]);
    }

    #[test]
    fn requests_as_ovs_ofctl_sends_them() {
        let show = ofctl("show-of10");
        let mut out = Vec::new();
        encode_features_request(Version::Of10, 2, &mut out);
        assert_eq!(out, show[0]);
        out.clear();
        encode_get_config_request(Version::Of10, 4, &mut out);
        assert_eq!(out, show[1]);
        // set-frags reassemble: get the config, set it, barrier, get it again.
        let set = ofctl("set-frags-of13");
        let c = SwitchConfig::decode(&msg(&set[1])).unwrap();
        assert_eq!(
            c,
            SwitchConfig {
                frag: FragHandling::Reassemble,
                miss_send_len: 0xffff,
                invalid_ttl_to_controller: None
            }
        );
        out.clear();
        c.encode_set(Version::Of13, 3, &mut out);
        assert_eq!(out, set[1]);
        out.clear();
        encode_barrier_request(Version::Of13, 4, &mut out);
        assert_eq!(out, set[2]);
        // ovs-ofctl monitor sets miss_send_len to what it is told.
        for (label, v, miss) in [
            ("monitor-of10", Version::Of10, 65534),
            ("monitor-of15", Version::Of15, 128),
        ] {
            let m = &ofctl(label)[1];
            let c = SwitchConfig::decode(&msg(m)).unwrap();
            assert_eq!((c.frag, c.miss_send_len), (FragHandling::Normal, miss));
            out.clear();
            c.encode_set(v, 3, &mut out);
            assert_eq!(&out, m, "{label}");
        }
        out.clear();
        encode_barrier_request(Version::Of10, 3, &mut out);
        assert_eq!(out, ofctl("ct-flush-zone-of10")[1]);
        let probe = &ofctl("probe-of13")[0];
        out.clear();
        encode_echo_request(Version::Of13, 0, &[], &mut out);
        assert_eq!(&out, probe);
    }

    #[test]
    fn barriers_and_echo_replies() {
        let mut out = Vec::new();
        encode_barrier_reply(Version::Of10, 7, &mut out);
        assert_eq!(out, [1, 19, 0, 8, 0, 0, 0, 7]);
        out.clear();
        encode_barrier_reply(Version::Of15, 7, &mut out);
        assert_eq!(out, [6, 21, 0, 8, 0, 0, 0, 7]);
        let req = [4, 2, 0, 11, 0, 0, 0, 9, b'a', b'b', b'c'];
        out.clear();
        encode_echo_reply(&msg(&req), &mut out).unwrap();
        assert_eq!(out, [4, 3, 0, 11, 0, 0, 0, 9, b'a', b'b', b'c']);
        assert!(encode_echo_reply(&msg(&out.clone()), &mut out).is_none());
    }

    #[test]
    fn set_config_refuses_unknown_flags() {
        // OF1.3 has no invalid-TTL flag: 4 is unknown there, known in 1.0.
        let m = [4, 9, 0, 12, 0, 0, 0, 1, 0, 4, 0, 128];
        assert_eq!(SwitchConfig::decode(&msg(&m)), Err(OfpErr::OfpscfcBadFlags));
        let m = [1, 9, 0, 12, 0, 0, 0, 1, 0, 4, 0, 128];
        assert_eq!(
            SwitchConfig::decode(&msg(&m))
                .unwrap()
                .invalid_ttl_to_controller,
            Some(true)
        );
        // A reply's unknown flags are not the switch's business.
        let m = [4, 8, 0, 12, 0, 0, 0, 1, 0x80, 1, 0, 128];
        assert_eq!(
            SwitchConfig::decode(&msg(&m)).unwrap().frag,
            FragHandling::Drop
        );
    }

    proptest! {
        #[test]
        fn features_round_trip(v in 1u8..=6, dpid: u64, nb: u32, nt: u8, aux: u8, caps: u32, acts: u32) {
            let v = Version::from_wire(v).unwrap();
            let mut caps = caps & (capabilities_mask(v) | OFPUTIL_C_STP | OFPUTIL_C_GROUP_STATS);
            caps &= !if v == Version::Of10 { OFPUTIL_C_GROUP_STATS } else { OFPUTIL_C_STP };
            let f = FeaturesReply {
                datapath_id: dpid,
                n_buffers: nb,
                n_tables: nt,
                auxiliary_id: if v >= Version::Of13 { aux } else { 0 },
                capabilities: caps,
                actions: if v == Version::Of10 { acts } else { 0 },
                ports: vec![],
            };
            let mut out = Vec::new();
            f.encode(v, 1, &mut out).unwrap();
            prop_assert_eq!(FeaturesReply::decode(&msg(&out)).unwrap(), f);
        }

        #[test]
        fn config_round_trips(v in 1u8..=6, frag in 0u16..4, miss: u16, ttl: bool) {
            let v = Version::from_wire(v).unwrap();
            let c = SwitchConfig {
                frag: [FragHandling::Normal, FragHandling::Drop, FragHandling::Reassemble, FragHandling::NxMatch][usize::from(frag)],
                miss_send_len: miss,
                invalid_ttl_to_controller: (v < Version::Of13).then_some(ttl),
            };
            let mut out = Vec::new();
            c.encode_set(v, 1, &mut out);
            prop_assert_eq!(SwitchConfig::decode(&msg(&out)).unwrap(), c);
        }

        #[test]
        fn random_bodies_never_panic(v in 1u8..=6, body in proptest::collection::vec(any::<u8>(), 0..120)) {
            let v = Version::from_wire(v).unwrap();
            for t in [MsgType::Ofpt10FeaturesReply, MsgType::Ofpt11FeaturesReply, MsgType::OfptSetConfig] {
                let mut m = Vec::new();
                if t.encode(v, 0, &body, &mut m).is_ok() && let Ok(d) = msgtype::decode(&m) {
                    let _ = FeaturesReply::decode(&d);
                    let _ = SwitchConfig::decode(&d);
                }
            }
        }
    }
}
