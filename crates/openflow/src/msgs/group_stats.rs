//! Group statistics and group features: `OFPST_GROUP` and `OFPST_GROUP_FEATURES` (OpenFlow
//! 1.1 and 1.2 on) and Nicira's `NXST_GROUP` and `NXST_GROUP_FEATURES` for OpenFlow 1.0, as
//! OVS's `lib/ofp-group.c` reads and writes them (`ovs-ofctl dump-group-stats`,
//! `dump-group-features`). Group mods and descriptions carry buckets of actions and belong to
//! the action codec.

use super::{Reader, put32, put64, stats_replies, zeros};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{EncodeError, Message, MsgType, NotInVersion};

/// `OFPG_ALL`: every group.
pub const OFPG_ALL: u32 = 0xffff_fffc;

/// Appends a group statistics request for `group_id` ([`OFPG_ALL`] for all).
pub fn encode_group_stats_request(group_id: u32, version: Version, xid: u32, out: &mut Vec<u8>) {
    let t = if version == Version::Of10 {
        MsgType::NxstGroupRequest
    } else {
        MsgType::Ofpst11GroupRequest
    };
    let at = super::start(t, version, xid, out);
    put32(out, group_id);
    zeros(out, 4);
    let _ = super::finish(out, at);
}

/// Reads a group statistics request's group.
pub fn decode_group_stats_request(msg: &Message<'_>) -> Result<u32, OfpErr> {
    super::expect(
        msg,
        &[MsgType::NxstGroupRequest, MsgType::Ofpst11GroupRequest],
    )?;
    Reader::new(msg.body).u32()
}

/// One group's counters (OVS's `struct ofputil_group_stats`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStats {
    /// The group.
    pub group_id: u32,
    /// Flows and groups that point at it.
    pub ref_count: u32,
    /// Packets it processed.
    pub packet_count: u64,
    /// Bytes it processed.
    pub byte_count: u64,
    /// Seconds it has existed (1.3 and Nicira's form; `u32::MAX` when unknown).
    pub duration_sec: u32,
    /// And nanoseconds beyond.
    pub duration_nsec: u32,
    /// Each bucket's packets and bytes.
    pub buckets: Vec<(u64, u64)>,
}

impl GroupStats {
    /// The entry as `version` writes it: 1.1 and 1.2 without durations.
    fn put(&self, version: Version, b: &mut Vec<u8>) {
        let base = if matches!(version, Version::Of11 | Version::Of12) {
            32
        } else {
            40
        };
        b.extend_from_slice(&((base + 16 * self.buckets.len()) as u16).to_be_bytes());
        zeros(b, 2);
        put32(b, self.group_id);
        put32(b, self.ref_count);
        zeros(b, 4);
        put64(b, self.packet_count);
        put64(b, self.byte_count);
        if base == 40 {
            put32(b, self.duration_sec);
            put32(b, self.duration_nsec);
        }
        for &(p, by) in &self.buckets {
            put64(b, p);
            put64(b, by);
        }
    }

    /// Reads one entry (OVS's `ofputil_decode_group_stats_reply`): as there, an entry's bucket
    /// counters are its length's whole 16-byte words, and a length shorter than the fixed part
    /// is `OFPBRC_BAD_LEN`.
    fn pull(base: usize, r: &mut Reader<'_>) -> Result<GroupStats, OfpErr> {
        let mut e = Reader::new(r.take(base)?);
        let length = usize::from(e.u16()?);
        e.skip(2)?;
        let mut g = GroupStats {
            group_id: e.u32()?,
            ref_count: e.u32()?,
            packet_count: 0,
            byte_count: 0,
            duration_sec: u32::MAX,
            duration_nsec: u32::MAX,
            buckets: Vec::new(),
        };
        e.skip(4)?;
        g.packet_count = e.u64()?;
        g.byte_count = e.u64()?;
        if base == 40 {
            g.duration_sec = e.u32()?;
            g.duration_nsec = e.u32()?;
        }
        let n = length.checked_sub(base).ok_or(OfpErr::OfpbrcBadLen)? / 16;
        let mut c = Reader::new(r.take(n * 16)?);
        while !c.is_empty() {
            g.buckets.push((c.u64()?, c.u64()?));
        }
        Ok(g)
    }
}

/// The replies to the group statistics request `request` (OVS's bridges without groups send
/// one with none).
pub fn encode_group_stats_reply(
    request: &Message<'_>,
    groups: &[GroupStats],
) -> Result<Vec<Vec<u8>>, EncodeError> {
    stats_replies(request, groups, GroupStats::put)
}

/// The groups of one group statistics reply message.
pub fn decode_group_stats_reply(msg: &Message<'_>) -> Result<Vec<GroupStats>, OfpErr> {
    let base = match msg.msg_type {
        MsgType::Ofpst11GroupReply => 32,
        MsgType::NxstGroupReply | MsgType::Ofpst13GroupReply => 40,
        _ => return Err(OfpErr::OfpbrcBadType),
    };
    let mut r = Reader::new(msg.body);
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(GroupStats::pull(base, &mut r)?);
    }
    Ok(v)
}

/// The switch's group features (`struct ofp12_group_features_stats`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupFeatures {
    /// Group types, `1 << OFPGT11_*` (all, select, indirect, fast failover).
    pub types: u32,
    /// `OFPGFC_*` capabilities.
    pub capabilities: u32,
    /// The most groups of each type.
    pub max_groups: [u32; 4],
    /// The actions each type's buckets may have, as the version's bitmap (`1 << OFPAT_*`).
    pub actions: [u32; 4],
}

impl GroupFeatures {
    /// What OVS 3.1's bridges answer in `version`: the four types, select weights, liveness
    /// and chaining, 0xffffff00 groups of each; every action of OpenFlow 1.0 (through
    /// `NXST_GROUP_FEATURES`), every action of 1.1 but the TTL copies, or from 1.2 on output,
    /// group, set-field, the VLAN, TTL and MPLS actions and set-queue.
    pub fn ovs(version: Version) -> GroupFeatures {
        let actions = match version {
            Version::Of10 => 0x0000_0fff,
            // OpenFlow 1.1's numbering: all its actions but the TTL copies.
            Version::Of11 => 0x01ff_e7ff,
            _ => 0x03ff_8001,
        };
        GroupFeatures {
            types: 0xf,
            capabilities: 0x7,
            max_groups: [0xffff_ff00; 4],
            actions: [actions; 4],
        }
    }

    /// The reply to the group features request `request`.
    pub fn encode_reply(&self, request: &Message<'_>) -> Result<Vec<u8>, EncodeError> {
        let mut v = stats_replies(request, std::slice::from_ref(self), |f, _, b| {
            put32(b, f.types);
            put32(b, f.capabilities);
            f.max_groups.iter().for_each(|&m| put32(b, m));
            f.actions.iter().for_each(|&a| put32(b, a));
        })?;
        Ok(v.remove(0))
    }

    /// Reads a group features reply.
    pub fn decode(msg: &Message<'_>) -> Result<Self, OfpErr> {
        super::expect(
            msg,
            &[
                MsgType::NxstGroupFeaturesReply,
                MsgType::Ofpst12GroupFeaturesReply,
            ],
        )?;
        let mut r = Reader::new(msg.body);
        let types = r.u32()?;
        let capabilities = r.u32()?;
        let mut max_groups = [0; 4];
        for m in &mut max_groups {
            *m = r.u32()?;
        }
        let mut actions = [0; 4];
        for a in &mut actions {
            *a = r.u32()?;
        }
        Ok(GroupFeatures {
            types,
            capabilities,
            max_groups,
            actions,
        })
    }
}

/// Appends a group features request: Nicira's before 1.2, the standard one after.
pub fn encode_group_features_request(
    version: Version,
    xid: u32,
    out: &mut Vec<u8>,
) -> Result<(), NotInVersion> {
    let t = if version < Version::Of12 {
        MsgType::NxstGroupFeaturesRequest
    } else {
        MsgType::Ofpst12GroupFeaturesRequest
    };
    let at = t.start(version, xid, out)?;
    let _ = super::finish(out, at);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hex, msg, ovs_reply};
    use super::*;
    use crate::msgtype;
    use proptest::prelude::*;

    /// What a running ovs-vswitchd answers in OpenFlow 1.0 (Nicira's forms), 1.3 and 1.5.
    #[test]
    fn as_ovs_vswitchd_answers() {
        for (label, v) in [
            ("group-features-of10", Version::Of10),
            ("group-features-of13", Version::Of13),
            ("group-features-of15", Version::Of15),
        ] {
            let (req, replies) = ovs_reply(label);
            let mut out = Vec::new();
            encode_group_features_request(v, 1, &mut out).unwrap();
            assert_eq!(out, req, "{label}");
            assert_eq!(
                GroupFeatures::decode(&msg(&replies[0])),
                Ok(GroupFeatures::ovs(v))
            );
            let out = GroupFeatures::ovs(v).encode_reply(&msg(&req)).unwrap();
            assert_eq!(hex(&out), hex(&replies[0]), "{label}");
        }
        for (label, v) in [
            ("group-stats-of10", Version::Of10),
            ("group-stats-of13", Version::Of13),
        ] {
            let (req, replies) = ovs_reply(label);
            let mut out = Vec::new();
            encode_group_stats_request(OFPG_ALL, v, 1, &mut out);
            assert_eq!(out, req, "{label}");
            assert_eq!(decode_group_stats_request(&msg(&req)), Ok(OFPG_ALL));
            assert_eq!(decode_group_stats_reply(&msg(&replies[0])), Ok(vec![]));
            let out = encode_group_stats_reply(&msg(&req), &[]).unwrap();
            assert_eq!(out, replies, "{label}");
        }
    }

    proptest! {
        #[test]
        fn group_stats_round_trip(v in 1u8..=6, id: u32, counts: (u32, u64, u64), buckets in proptest::collection::vec(any::<(u64, u64)>(), 0..4)) {
            let v = Version::from_wire(v).unwrap();
            let durations = !matches!(v, Version::Of11 | Version::Of12);
            let g = GroupStats {
                group_id: id,
                ref_count: counts.0,
                packet_count: counts.1,
                byte_count: counts.2,
                duration_sec: if durations { 3 } else { u32::MAX },
                duration_nsec: if durations { 4 } else { u32::MAX },
                buckets,
            };
            let mut req = Vec::new();
            encode_group_stats_request(OFPG_ALL, v, 1, &mut req);
            let m = encode_group_stats_reply(&msg(&req), std::slice::from_ref(&g)).unwrap();
            prop_assert_eq!(decode_group_stats_reply(&msg(&m[0])).unwrap(), vec![g]);
        }

        #[test]
        fn random_bodies_never_panic(v in 1u8..=6, body in proptest::collection::vec(any::<u8>(), 0..120)) {
            let v = Version::from_wire(v).unwrap();
            for t in [MsgType::NxstGroupReply, MsgType::Ofpst11GroupReply, MsgType::Ofpst13GroupReply] {
                let mut m = Vec::new();
                if t.encode(v, 0, &body, &mut m).is_ok() && let Ok(d) = msgtype::decode(&m) {
                    let _ = decode_group_stats_reply(&d);
                }
            }
        }
    }
}
