//! Group mods and group descriptions on the wire, as OVS's `lib/ofp-group.c` reads and writes
//! them: `OFPT_GROUP_MOD` of OpenFlow 1.1-1.4 (buckets of `struct ofp11_bucket`, numbered from
//! 0 in order), OpenFlow 1.5's own layout (bucket ids, weight and watches as bucket
//! properties, `command_bucket_id` for inserting and removing buckets, group properties) and
//! Nicira's `NXT_GROUP_MOD`, which is 1.5's layout for OpenFlow 1.0; the group description
//! requests and replies (`OFPST_GROUP_DESC`, `NXST_GROUP_DESC`) in the same two layouts.
//!
//! The one group property is Netronome's selection method (experimenter `0x0000154d`, and
//! `0x00001540` as OVS 2.4 wrote it; type 1): `hash` or `dp_hash`, a 64-bit parameter, and for
//! `hash` the fields to hash as OXM headers whose values are masks. Decoding checks what OVS
//! checks, in its order, with its errors (`OFPGMFC_BAD_BUCKET`, `OFPGMFC_BAD_WATCH`,
//! `OFPBPC_BAD_VALUE`...), then the group mod itself ([`GroupMod::check`]).

use ofproto::fields::FieldId;
use ofproto::group::{
    BUCKET_ALL, BUCKET_FIRST, BUCKET_LAST, BUCKET_MAX, Bucket, GroupCommand, GroupDesc, GroupError,
    GroupMod, GroupProps, GroupType, OFPG_ALL,
};

use super::{Prop, Reader, put_prop, put16, put32, put64, stats_replies, zeros};
use crate::actions::{self, FlowCtx, decode_actions, encode_actions};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{EncodeError, Message, MsgType};
use crate::nxm::{self, OxmHeader, port_from_ofp11, port_to_ofp11};

/// Netronome's experimenter id.
pub const NTR_VENDOR_ID: u32 = 0x0000_154d;
/// The id OVS 2.4 wrote by mistake, still read.
pub const NTR_COMPAT_VENDOR_ID: u32 = 0x0000_1540;
/// Netronome's selection method property type.
const NTRT_SELECTION_METHOD: u32 = 1;
/// An experimenter group property.
const OFPGPT15_EXPERIMENTER: u16 = 0xffff;
/// OpenFlow 1.5 bucket properties.
const OFPGBPT15_WEIGHT: u16 = 0;
const OFPGBPT15_WATCH_PORT: u16 = 1;
const OFPGBPT15_WATCH_GROUP: u16 = 2;
/// Length of the selection method name field.
const METHOD_LEN: usize = 16;

/// The error a group mod's checks give, as its `OFPGMFC_*` code.
pub fn group_err(e: GroupError) -> OfpErr {
    match e {
        GroupError::GroupExists => OfpErr::OfpgmfcGroupExists,
        GroupError::InvalidGroup => OfpErr::OfpgmfcInvalidGroup,
        GroupError::OutOfGroups => OfpErr::OfpgmfcOutOfGroups,
        GroupError::BadType => OfpErr::OfpgmfcBadType,
        GroupError::BadCommand => OfpErr::OfpgmfcBadCommand,
        GroupError::BadBucket => OfpErr::OfpgmfcBadBucket,
        GroupError::BadWatch => OfpErr::OfpgmfcBadWatch,
        GroupError::UnknownGroup => OfpErr::OfpgmfcUnknownGroup,
        GroupError::WatchUnsupported => OfpErr::OfpgmfcWatchUnsupported,
        GroupError::BucketExists => OfpErr::OfpgmfcBucketExists,
        GroupError::UnknownBucket => OfpErr::OfpgmfcUnknownBucket,
    }
}

/// Whether `version` writes groups in OpenFlow 1.5's layout (1.0's Nicira messages do too).
fn layout15(version: Version) -> bool {
    matches!(version, Version::Of10 | Version::Of15)
}

/// A port of a bucket's watch as OpenFlow 1.0's 16 bits: `OFPGMFC_BAD_WATCH` if it has none.
fn watch_port(p: u32) -> Result<u32, OfpErr> {
    port_from_ofp11(p)
        .map(u32::from)
        .ok_or(OfpErr::OfpgmfcBadWatch)
}

/// Decodes a group mod (`OFPT_GROUP_MOD` of any version, `NXT_GROUP_MOD`) and checks it as
/// OVS's `ofputil_decode_group_mod()` does.
pub fn decode_group_mod(msg: &Message<'_>) -> Result<GroupMod, OfpErr> {
    super::expect(
        msg,
        &[
            MsgType::NxtGroupMod,
            MsgType::Ofpt11GroupMod,
            MsgType::Ofpt15GroupMod,
        ],
    )?;
    let version = super::version_of(msg)?;
    let mut r = Reader::new(msg.body);
    let command = r.u16()?;
    let raw_type = r.u8()?;
    r.skip(1)?;
    let group_id = r.u32()?;
    // Commands and types are checked after the buckets, as OVS checks them.
    let t = GroupType::from_wire(raw_type).unwrap_or(GroupType::All);
    let cmd = GroupCommand::from_wire(command);
    let mut gm = GroupMod::new(cmd.unwrap_or(GroupCommand::Add), group_id);
    gm.group_type = t;
    if layout15(version) {
        let bucket_len = usize::from(r.u16()?);
        r.skip(2)?;
        gm.command_bucket_id = r.u32()?;
        let cbi = gm.command_bucket_id;
        let ok = match cmd {
            Some(GroupCommand::RemoveBucket) => {
                cbi == BUCKET_ALL || cbi <= BUCKET_MAX || cbi == BUCKET_FIRST || cbi == BUCKET_LAST
            }
            Some(GroupCommand::InsertBucket) => {
                cbi <= BUCKET_MAX || cbi == BUCKET_FIRST || cbi == BUCKET_LAST
            }
            _ => cbi == BUCKET_ALL,
        };
        if !ok {
            return Err(OfpErr::OfpgmfcBadBucket);
        }
        let rest = r.rest();
        if bucket_len > rest.len() {
            return Err(OfpErr::OfpbrcBadLen);
        }
        gm.buckets = pull_buckets15(version, &rest[..bucket_len], raw_type)?;
        gm.props = pull_group_props(&rest[bucket_len..], raw_type, command)?;
    } else {
        gm.buckets = pull_buckets11(version, r.rest())?;
        // OpenFlow 1.3.5 on: a delete carries no buckets.
        if version >= Version::Of13 && cmd == Some(GroupCommand::Delete) && !gm.buckets.is_empty() {
            return Err(OfpErr::OfpgmfcInvalidGroup);
        }
    }
    if GroupType::from_wire(raw_type).is_none() {
        return Err(OfpErr::OfpgmfcBadType);
    }
    if cmd.is_none() {
        return Err(OfpErr::OfpgmfcBadCommand);
    }
    gm.check().map_err(group_err)?;
    Ok(gm)
}

/// OpenFlow 1.1-1.4 buckets (OVS's `ofputil_pull_ofp11_buckets()`).
fn pull_buckets11(version: Version, mut b: &[u8]) -> Result<Vec<Bucket>, OfpErr> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 16 {
            return Err(OfpErr::OfpgmfcBadBucket);
        }
        let mut r = Reader::new(b);
        let len = usize::from(r.u16()?);
        if len < 16 || len > b.len() {
            return Err(OfpErr::OfpgmfcBadBucket);
        }
        let weight = r.u16()?;
        let port = r.u32()?;
        let watch_group = r.u32()?;
        let actions = decode_actions(version, &b[16..len])?;
        out.push(Bucket {
            bucket_id: out.len() as u32,
            weight,
            watch_port: watch_port(port)?,
            watch_group,
            actions,
        });
        b = &b[len..];
    }
    Ok(out)
}

/// OpenFlow 1.5 buckets (OVS's `ofputil_pull_ofp15_buckets()`); `raw_type` sets the default
/// weight (1 in a select group).
fn pull_buckets15(version: Version, mut b: &[u8], raw_type: u8) -> Result<Vec<Bucket>, OfpErr> {
    let mut out: Vec<Bucket> = Vec::new();
    while !b.is_empty() {
        if b.len() < 8 {
            return Err(OfpErr::OfpgmfcBadBucket);
        }
        let mut r = Reader::new(b);
        let len = usize::from(r.u16()?);
        let actions_len = usize::from(r.u16()?);
        let bucket_id = r.u32()?;
        if len < 8 || len > b.len() || actions_len > len - 8 {
            return Err(OfpErr::OfpgmfcBadBucket);
        }
        let actions = decode_actions(version, &b[8..8 + actions_len])?;
        let mut weight = u16::from(raw_type == GroupType::Select as u8);
        let mut port = 0xffff_ffff;
        let mut watch_group = 0xffff_ffff;
        for p in super::props(&b[8 + actions_len..len]) {
            let p = p?;
            match (p.experimenter, p.kind) {
                // Any payload that holds the value (OVS writes 4 bytes, OpenFlow says so).
                (None, OFPGBPT15_WEIGHT) => {
                    let a = p.payload.first_chunk::<2>().ok_or(OfpErr::OfpbpcBadLen)?;
                    weight = u16::from_be_bytes(*a);
                }
                (None, OFPGBPT15_WATCH_PORT) => port = super::prop_u32(&p)?,
                (None, OFPGBPT15_WATCH_GROUP) => watch_group = super::prop_u32(&p)?,
                _ => super::unknown_prop(&p, false)?,
            }
        }
        let watch_port = watch_port(port)?;
        if bucket_id > BUCKET_MAX {
            return Err(OfpErr::OfpgmfcBadBucket);
        }
        out.push(Bucket {
            bucket_id,
            weight,
            watch_port,
            watch_group,
            actions,
        });
        b = &b[len..];
    }
    let mut ids: Vec<u32> = out.iter().map(|b| b.bucket_id).collect();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        return Err(OfpErr::OfpgmfcBadBucket);
    }
    Ok(out)
}

/// OpenFlow 1.5 group properties (OVS's `parse_ofp15_group_properties()`): Netronome's
/// selection method, for an add or modify of a select group.
fn pull_group_props(b: &[u8], raw_type: u8, command: u16) -> Result<GroupProps, OfpErr> {
    let mut props = GroupProps::default();
    for p in super::props(b) {
        let p = p?;
        match p.experimenter {
            Some((NTR_VENDOR_ID | NTR_COMPAT_VENDOR_ID, NTRT_SELECTION_METHOD)) => {
                selection_method(&p, raw_type, command, &mut props)?;
            }
            _ => super::unknown_prop(&p, false)?,
        }
    }
    Ok(props)
}

fn selection_method(
    p: &Prop<'_>,
    raw_type: u8,
    command: u16,
    props: &mut GroupProps,
) -> Result<(), OfpErr> {
    match GroupType::from_wire(raw_type) {
        Some(GroupType::Select) => {}
        Some(_) => return Err(OfpErr::OfpbpcBadValue),
        None => return Err(OfpErr::OfpgmfcBadType),
    }
    match GroupCommand::from_wire(command) {
        Some(GroupCommand::Add | GroupCommand::Modify | GroupCommand::AddOrMod) => {}
        Some(_) => return Err(OfpErr::OfpbpcBadValue),
        None => return Err(OfpErr::OfpgmfcBadCommand),
    }
    // After the property's 12-byte header: 4 bytes of padding, the name, the parameter.
    if p.payload.len() < 4 + METHOD_LEN + 8 {
        return Err(OfpErr::OfpbpcBadLen);
    }
    let name = &p.payload[4..4 + METHOD_LEN];
    let end = name
        .iter()
        .position(|&c| c == 0)
        .ok_or(OfpErr::OfpbpcBadValue)?;
    let method = &name[..end];
    if method != b"hash" && method != b"dp_hash" {
        return Err(OfpErr::OfpbpcBadValue);
    }
    props.selection_method = String::from_utf8_lossy(method).into_owned();
    let mut r = Reader::new(&p.payload[4 + METHOD_LEN..]);
    props.selection_method_param = r.u64()?;
    let fields = r.rest();
    if !fields.is_empty() && method != b"hash" {
        return Err(OfpErr::OfpbpcBadValue);
    }
    props.fields = pull_field_array(fields)?;
    Ok(())
}

/// OXM headers with values that are masks (OVS's `oxm_pull_field_array()`).
fn pull_field_array(mut b: &[u8]) -> Result<Vec<(FieldId, u128)>, OfpErr> {
    let mut out: Vec<(FieldId, u128)> = Vec::new();
    while !b.is_empty() {
        let h = OxmHeader::parse(b)?;
        let total = h.header_len() + h.payload_len();
        if b.len() < total || h.hasmask {
            return Err(OfpErr::OfpbmcBadLen);
        }
        let fh = nxm::field_by_header(&h).ok_or(OfpErr::OfpbmcBadField)?;
        let value = &b[h.header_len()..total];
        let v = value
            .iter()
            .rev()
            .take(16)
            .rev()
            .fold(0u128, |a, &x| (a << 8) | u128::from(x));
        if out.iter().any(|&(f, _)| f == fh.field) {
            return Err(OfpErr::OfpbmcDupField);
        }
        if fh.field.field().value_mask() & v != v {
            return Err(OfpErr::OfpbmcBadMask);
        }
        out.push((fh.field, v));
        b = &b[total..];
    }
    out.sort_by_key(|&(f, _)| f.index());
    Ok(out)
}

/// Appends a bucket in OpenFlow 1.1's layout.
fn put_bucket11(
    version: Version,
    b: &Bucket,
    out: &mut Vec<u8>,
) -> Result<(), actions::EncodeError> {
    let at = out.len();
    zeros(out, 2);
    put16(out, b.weight);
    put32(out, port_to_ofp11(b.watch_port as u16) as u32);
    put32(out, b.watch_group);
    zeros(out, 4);
    encode_actions(version, &b.actions, FlowCtx::default(), out)?;
    let len = (out.len() - at) as u16;
    out[at..at + 2].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Appends a bucket in OpenFlow 1.5's layout: the weight property in a select group or when
/// not 0, the watches when set.
fn put_bucket15(
    version: Version,
    b: &Bucket,
    t: GroupType,
    out: &mut Vec<u8>,
) -> Result<(), actions::EncodeError> {
    let at = out.len();
    zeros(out, 4);
    put32(out, b.bucket_id);
    let acts = out.len();
    encode_actions(version, &b.actions, FlowCtx::default(), out)?;
    let actions_len = (out.len() - acts) as u16;
    if t == GroupType::Select || b.weight != 0 {
        let w = b.weight.to_be_bytes();
        put_prop(out, OFPGBPT15_WEIGHT, &[w[0], w[1], 0, 0]);
    }
    if b.watch_port != ofproto::syntax::OFPP_ANY {
        let p = port_to_ofp11(b.watch_port as u16) as u32;
        put_prop(out, OFPGBPT15_WATCH_PORT, &p.to_be_bytes());
    }
    if b.watch_group != ofproto::group::OFPG_ANY {
        put_prop(out, OFPGBPT15_WATCH_GROUP, &b.watch_group.to_be_bytes());
    }
    let len = (out.len() - at) as u16;
    out[at..at + 2].copy_from_slice(&len.to_be_bytes());
    out[at + 2..at + 4].copy_from_slice(&actions_len.to_be_bytes());
    Ok(())
}

/// Appends the selection method property, if the group has a method.
fn put_selection_method(version: Version, props: &GroupProps, out: &mut Vec<u8>) {
    if props.selection_method.is_empty() {
        return;
    }
    let at = out.len();
    put16(out, OFPGPT15_EXPERIMENTER);
    zeros(out, 2);
    put32(out, NTR_VENDOR_ID);
    put32(out, NTRT_SELECTION_METHOD);
    zeros(out, 4);
    super::put_name(out, &props.selection_method, METHOD_LEN);
    put64(out, props.selection_method_param);
    for &(f, mask) in &props.fields {
        if let Some(fh) = nxm::field_header(f, version.wire()) {
            nxm::put_entry(out, fh.id, usize::from(fh.width), mask, None);
        }
    }
    let len = out.len() - at;
    out[at + 2..at + 4].copy_from_slice(&(len as u16).to_be_bytes());
    zeros(out, len.next_multiple_of(8) - len);
}

/// Why a group mod could not be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupEncodeError {
    #[error(transparent)]
    Actions(#[from] actions::EncodeError),
    #[error(transparent)]
    Message(#[from] EncodeError),
}

/// Appends a group mod for `version` (OVS's `ofputil_encode_group_mod()`). OpenFlow 1.1-1.4
/// write the bucket commands as they are (OVS turns them into a modify with the resulting
/// buckets, which only the switch knows).
pub fn encode_group_mod(
    version: Version,
    xid: u32,
    gm: &GroupMod,
    out: &mut Vec<u8>,
) -> Result<(), GroupEncodeError> {
    let t = match version {
        Version::Of10 => MsgType::NxtGroupMod,
        Version::Of15 => MsgType::Ofpt15GroupMod,
        _ => MsgType::Ofpt11GroupMod,
    };
    let at = super::start(t, version, xid, out);
    put16(out, gm.command.wire());
    out.push(gm.group_type as u8);
    out.push(0);
    put32(out, gm.group_id);
    if layout15(version) {
        let len_at = out.len();
        zeros(out, 4);
        put32(out, gm.command_bucket_id);
        let start = out.len();
        for b in &gm.buckets {
            put_bucket15(version, b, gm.group_type, out)?;
        }
        let n = (out.len() - start) as u16;
        out[len_at..len_at + 2].copy_from_slice(&n.to_be_bytes());
        put_selection_method(version, &gm.props, out);
    } else {
        for b in &gm.buckets {
            put_bucket11(version, b, out)?;
        }
    }
    Ok(super::finish(out, at)?)
}

/// The group a description request asks for: all in OpenFlow 1.1-1.4, the one its body
/// names in 1.0 (Nicira's) and 1.5.
pub fn decode_group_desc_request(msg: &Message<'_>) -> Result<u32, OfpErr> {
    match msg.msg_type {
        MsgType::Ofpst11GroupDescRequest => Ok(OFPG_ALL),
        MsgType::NxstGroupDescRequest | MsgType::Ofpst15GroupDescRequest => {
            Reader::new(msg.body).u32()
        }
        _ => Err(OfpErr::OfpbrcBadType),
    }
}

/// Appends a group description request for `group_id` (all groups before 1.5).
pub fn encode_group_desc_request(version: Version, group_id: u32, xid: u32, out: &mut Vec<u8>) {
    let t = match version {
        Version::Of10 => MsgType::NxstGroupDescRequest,
        Version::Of15 => MsgType::Ofpst15GroupDescRequest,
        _ => MsgType::Ofpst11GroupDescRequest,
    };
    let at = super::start(t, version, xid, out);
    if layout15(version) {
        put32(out, group_id);
        zeros(out, 4);
    }
    let _ = super::finish(out, at);
}

/// Appends one description entry in `version`'s layout.
fn put_desc(
    g: &GroupDesc,
    version: Version,
    out: &mut Vec<u8>,
) -> Result<(), actions::EncodeError> {
    let at = out.len();
    zeros(out, 2);
    out.push(g.group_type as u8);
    out.push(0);
    put32(out, g.group_id);
    if layout15(version) {
        zeros(out, 8);
        let start = out.len();
        for b in &g.buckets {
            put_bucket15(version, b, g.group_type, out)?;
        }
        let n = (out.len() - start) as u16;
        out[at + 8..at + 10].copy_from_slice(&n.to_be_bytes());
        put_selection_method(version, &g.props, out);
    } else {
        for b in &g.buckets {
            put_bucket11(version, b, out)?;
        }
    }
    let len = (out.len() - at) as u16;
    out[at..at + 2].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// The replies to the group description request `request`. A group whose actions the
/// version cannot carry is left out (OVS cannot have such a group in that version).
pub fn encode_group_desc_reply(
    request: &Message<'_>,
    groups: &[GroupDesc],
) -> Result<Vec<Vec<u8>>, EncodeError> {
    stats_replies(request, groups, |g, v, out| {
        let at = out.len();
        if put_desc(g, v, out).is_err() {
            out.truncate(at);
        }
    })
}

/// The groups of one group description reply message.
pub fn decode_group_desc_reply(msg: &Message<'_>) -> Result<Vec<GroupDesc>, OfpErr> {
    super::expect(
        msg,
        &[MsgType::NxstGroupDescReply, MsgType::Ofpst11GroupDescReply],
    )?;
    let version = super::version_of(msg)?;
    let mut b = msg.body;
    let mut out = Vec::new();
    while !b.is_empty() {
        let mut r = Reader::new(b);
        let len = usize::from(r.u16()?);
        let raw_type = r.u8()?;
        r.skip(1)?;
        let group_id = r.u32()?;
        if len < 8 || len > b.len() {
            return Err(OfpErr::OfpbrcBadLen);
        }
        let entry = &b[..len];
        let group_type = GroupType::from_wire(raw_type).ok_or(OfpErr::OfpgmfcBadType)?;
        let (buckets, props) = if layout15(version) {
            let bl = usize::from(r.u16()?);
            if len < 16 || bl > len - 16 {
                return Err(OfpErr::OfpbrcBadLen);
            }
            let buckets = pull_buckets15(version, &entry[16..16 + bl], raw_type)?;
            let props = pull_group_props(&entry[16 + bl..], raw_type, 0)?;
            (buckets, props)
        } else {
            (pull_buckets11(version, &entry[8..])?, GroupProps::default())
        };
        out.push(GroupDesc {
            group_id,
            group_type,
            buckets,
            props,
        });
        b = &b[len..];
    }
    Ok(out)
}

#[cfg(test)]
#[path = "group_mod_tests.rs"]
mod tests;
