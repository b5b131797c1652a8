//! Group mods, group descriptions and group statistics over OpenFlow, applied to and read
//! from the bridge's group table through the same [`Ofproto`] functions as the
//! `ofctl/add-group` family of control commands: `OFPT_GROUP_MOD` of every version and
//! `NXT_GROUP_MOD`, `OFPST_GROUP_DESC`/`NXST_GROUP_DESC` and `OFPST_GROUP`/`NXST_GROUP`,
//! answered in the request's form, as OVS's `handle_group_mod()` and `handle_group_request()`
//! answer them. Groups are listed by id.

use ofproto::group::GroupMod;
use ofproto::ofproto::{GroupModFailure, Ofproto};
use openflow::error::OfpErr;
use openflow::msgs::group_mod::{
    decode_group_desc_request, decode_group_mod, encode_group_desc_reply, group_err,
};
use openflow::msgs::group_stats::{self, GroupStats};
use openflow::msgtype::{self, Message};

/// Applies the group mod `msg` (header included) to `bridge`; the mod, as read, for the
/// request forwards.
pub(crate) fn group_mod(of: &Ofproto, bridge: &str, msg: &[u8]) -> Result<GroupMod, OfpErr> {
    let m = msgtype::decode(msg)?;
    let gm = decode_group_mod(&m)?;
    of.group_mod(bridge, &gm).map_err(|e| match e {
        GroupModFailure::NoBridge(_) => OfpErr::OfpbrcEperm,
        GroupModFailure::Group(g) => group_err(g),
    })?;
    Ok(gm)
}

/// Applies the group mod `msg` (header included) in its place in a bundle's commit.
pub(crate) fn stage_group_mod(
    commit: &mut ofproto::ofproto::BundleCommit<'_>,
    msg: &[u8],
) -> Result<GroupMod, OfpErr> {
    let m = msgtype::decode(msg)?;
    let gm = decode_group_mod(&m)?;
    commit.group_mod(&gm).map_err(|e| match e {
        GroupModFailure::NoBridge(_) => OfpErr::OfpbrcEperm,
        GroupModFailure::Group(g) => group_err(g),
    })?;
    Ok(gm)
}

/// Checks a group mod for a bundle: it decodes and passes OVS's checks.
pub(crate) fn check_group_mod(msg: &[u8]) -> Result<(), OfpErr> {
    let m = msgtype::decode(msg)?;
    decode_group_mod(&m).map(drop)
}

/// Whether `msg` (header included) is a group mod.
pub(crate) fn is_group_mod(msg: &[u8]) -> bool {
    msgtype::decode(msg).is_ok_and(|m| m.msg_type.kind() == msgtype::OfpType::GroupMod)
}

/// Appends the replies to the group description request `m`.
pub(crate) fn group_desc(
    of: &Ofproto,
    bridge: &str,
    m: &Message<'_>,
    out: &mut Vec<u8>,
) -> Result<(), OfpErr> {
    let id = decode_group_desc_request(m)?;
    let descs = of
        .group_descs(bridge, id)
        .map_err(|_| OfpErr::OfpbrcEperm)?;
    let replies = encode_group_desc_reply(m, &descs).map_err(|_| OfpErr::OfpbrcBadLen)?;
    replies.iter().for_each(|r| out.extend_from_slice(r));
    Ok(())
}

/// Appends the replies to the group statistics request `m` for group `id` (`OFPG_ALL`: all).
pub(crate) fn group_stats(
    of: &Ofproto,
    bridge: &str,
    m: &Message<'_>,
    id: u32,
    out: &mut Vec<u8>,
) -> Result<(), OfpErr> {
    // Settle what upcalls owe first, so that a packet just handled counts.
    of.settle_credits();
    let v: Vec<GroupStats> = of
        .group_stats(bridge, id)
        .map_err(|_| OfpErr::OfpbrcEperm)?
        .into_iter()
        .map(|s| GroupStats {
            group_id: s.group_id,
            ref_count: s.ref_count,
            packet_count: s.packets,
            byte_count: s.bytes,
            duration_sec: s.age.as_secs() as u32,
            // Milliseconds, as OVS measures.
            duration_nsec: s.age.subsec_millis() * 1_000_000,
            buckets: s.buckets,
        })
        .collect();
    let replies = group_stats::encode_group_stats_reply(m, &v).map_err(|_| OfpErr::OfpbrcBadLen)?;
    replies.iter().for_each(|r| out.extend_from_slice(r));
    Ok(())
}
