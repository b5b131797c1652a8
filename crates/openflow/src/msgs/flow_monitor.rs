//! Flow monitors: a controller asks to be told of the changes to a switch's flow tables
//! (`NXST_FLOW_MONITOR` in OpenFlow 1.0-1.2, with NXM matches; the ONF extension's
//! `ONFST_FLOW_MONITOR` in 1.3 and the standard `OFPST_FLOW_MONITOR` in 1.4 and 1.5, with OXM
//! matches), and the switch answers with flow updates in replies of the same form: the flows
//! there at first, then each one added, modified or removed, or an abbreviation naming the
//! request of the controller's own that made the change. `NXT_FLOW_MONITOR_CANCEL` (and the
//! ONF's, or a 1.4 request with command `delete`) ends a monitor; `NXT_FLOW_MONITOR_PAUSED`
//! and `_RESUMED` (or 1.4 updates of those events) tell that updates stopped because the
//! controller fell behind and started again. Laid out as OVS's `lib/ofp-monitor.c` lays them.
//!
//! Flags and events are kept in OpenFlow 1.4's numbering ([`flags`], [`FlowUpdateEvent`]),
//! translated to and from Nicira's on the wire as OVS translates them.

use ofproto::pipekey::PipeMatch;
use ofproto::syntax::OfAction;

use super::{Reader, finish, put16, put32, put64, start, zeros};
use crate::actions::{self, EncodeError, FlowCtx};
use crate::error::OfpErr;
use crate::flow_mod::{pull_ofp11_match, put_ofp11_match};
use crate::flow_stats::OFPSF_REPLY_MORE;
use crate::header::{MAX_MESSAGE_LEN, Version};
use crate::msgtype::{Message, MsgType};
use crate::nxm::{self, TlvLens};

/// A monitor's flags, OpenFlow 1.4's `OFPFMF_*`.
pub mod flags {
    /// The flows already there, at once.
    pub const INITIAL: u16 = 1 << 0;
    /// Flows added.
    pub const ADD: u16 = 1 << 1;
    /// Flows removed.
    pub const REMOVED: u16 = 1 << 2;
    /// Flows modified.
    pub const MODIFY: u16 = 1 << 3;
    /// Updates carry the flows' actions.
    pub const INSTRUCTIONS: u16 = 1 << 4;
    /// Changes of the connection's own in full (OpenFlow 1.4 only).
    pub const NO_ABBREV: u16 = 1 << 5;
    /// Changes of the connection's own in full (Nicira's `NXFMF_OWN`).
    pub const ONLY_OWN: u16 = 1 << 6;
    /// Every flag OVS accepts in a request.
    pub const VALID: u16 = INITIAL | ADD | REMOVED | MODIFY | INSTRUCTIONS | ONLY_OWN;
}

/// `OFPFMC_*`: what a request does to the monitor it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonitorCommand {
    Add = 0,
    Modify = 1,
    Delete = 2,
}

/// No port or group to filter on (`OFPP_NONE`, `OFPG_ANY`).
pub const OFPP_NONE: u16 = 0xffff;
pub const OFPG_ANY: u32 = 0xffff_ffff;

/// One monitor of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMonitorRequest {
    pub id: u32,
    pub command: MonitorCommand,
    /// [`flags`].
    pub flags: u16,
    /// Flows that output to this port only ([`OFPP_NONE`]: any).
    pub out_port: u16,
    /// Flows that use this group only ([`OFPG_ANY`]: any).
    pub out_group: u32,
    /// One table, or 0xff for all.
    pub table: u8,
    /// Flows at least as specific as this match only.
    pub match_: PipeMatch,
}

/// `OFPFME_*`: what an update tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowUpdateEvent {
    Initial = 0,
    Added = 1,
    Removed = 2,
    Modified = 3,
}

/// A flow as an update tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowUpdateFull {
    pub event: FlowUpdateEvent,
    /// `OFPRR_*` of a removal, else 0.
    pub reason: u8,
    pub table: u8,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub cookie: u64,
    pub match_: PipeMatch,
    /// Empty when the monitor does not ask for them.
    pub actions: Vec<OfAction>,
}

/// One update of a flow monitor reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowUpdate {
    Full(Box<FlowUpdateFull>),
    /// A change the connection's own request with this transaction id made.
    Abbrev(u32),
    Paused,
    Resumed,
}

const NXFMF_OWN: u16 = 1 << 5;
const NX_REQUEST_LEN: usize = 16;
const NX_UPDATE_FULL_LEN: usize = 24;
const OFP14_UPDATE_FULL_LEN: usize = 24;

fn nx_to_flags(nx: u16) -> u16 {
    (nx & 0x1f)
        | if nx & NXFMF_OWN != 0 {
            flags::ONLY_OWN
        } else {
            0
        }
}

fn flags_to_nx(f: u16) -> u16 {
    (f & 0x1f)
        | if f & flags::ONLY_OWN != 0 {
            NXFMF_OWN
        } else {
            0
        }
}

/// Checks a request's flags as OVS does: some event asked for, nothing unknown.
fn check_flags(f: u16) -> Result<u16, OfpErr> {
    if f & (flags::ADD | flags::REMOVED | flags::MODIFY) == 0 || f & !flags::VALID != 0 {
        return Err(OfpErr::OfpmofcBadFlags);
    }
    Ok(f)
}

fn version(m: &Message<'_>) -> Result<Version, OfpErr> {
    super::version_of(m)
}

/// The monitors of a flow monitor request.
pub fn decode_flow_monitor_request(m: &Message<'_>) -> Result<Vec<FlowMonitorRequest>, OfpErr> {
    let mut r = Reader::new(m.body);
    let mut out = Vec::new();
    while !r.is_empty() {
        out.push(match m.msg_type {
            MsgType::NxstFlowMonitorRequest => pull_nx_request(&mut r)?,
            MsgType::Onfst13FlowMonitorRequest => pull_onf_request(&mut r)?,
            MsgType::Ofpst14FlowMonitorRequest => pull_ofp14_request(&mut r)?,
            _ => return Err(OfpErr::OfpbrcBadType),
        });
    }
    Ok(out)
}

fn pull_nx_request(r: &mut Reader<'_>) -> Result<FlowMonitorRequest, OfpErr> {
    if r.rest().len() < NX_REQUEST_LEN {
        return Err(OfpErr::OfpbrcBadLen);
    }
    let id = r.u32()?;
    let f = check_flags(nx_to_flags(r.u16()?))?;
    let out_port = r.u16()?;
    let match_len = usize::from(r.u16()?);
    let table = r.u8()?;
    if r.take(5)?.iter().any(|&b| b != 0) {
        return Err(OfpErr::NxbrcMustBeZero);
    }
    let (m, n) = nxm::pull_nx_match(r.rest(), match_len, false)?;
    r.skip(n)?;
    Ok(FlowMonitorRequest {
        id,
        command: MonitorCommand::Add,
        flags: f,
        out_port,
        out_group: OFPG_ANY,
        table,
        match_: m.match_,
    })
}

fn pull_onf_request(r: &mut Reader<'_>) -> Result<FlowMonitorRequest, OfpErr> {
    if r.rest().len() < NX_REQUEST_LEN {
        return Err(OfpErr::OfpbrcBadLen);
    }
    let id = r.u32()?;
    let f = check_flags(nx_to_flags(r.u16()?))?;
    let _match_len = r.u16()?;
    let out_port = port11(r.u32()?)?;
    let table = r.u8()?;
    if r.take(3)?.iter().any(|&b| b != 0) {
        return Err(OfpErr::NxbrcMustBeZero);
    }
    let (m, n) = pull_ofp11_match(r.rest())?;
    r.skip(n)?;
    Ok(FlowMonitorRequest {
        id,
        command: MonitorCommand::Add,
        flags: f,
        out_port,
        out_group: OFPG_ANY,
        table,
        match_: m,
    })
}

fn pull_ofp14_request(r: &mut Reader<'_>) -> Result<FlowMonitorRequest, OfpErr> {
    if r.rest().len() < NX_REQUEST_LEN {
        return Err(OfpErr::OfpbrcBadLen);
    }
    let id = r.u32()?;
    let out_port = port11(r.u32()?)?;
    let out_group = r.u32()?;
    let f = r.u16()?;
    let table = r.u8()?;
    let command = match r.u8()? {
        0 => MonitorCommand::Add,
        1 => MonitorCommand::Modify,
        2 => MonitorCommand::Delete,
        _ => return Err(OfpErr::OfpmofcBadCommand),
    };
    // A cancel may come without a match (as `ovs-ofctl` sends it).
    let match_ = if command == MonitorCommand::Delete && r.is_empty() {
        PipeMatch::default()
    } else {
        let (m, n) = pull_ofp11_match(r.rest())?;
        r.skip(n)?;
        m
    };
    let f = if command == MonitorCommand::Delete {
        f
    } else {
        check_flags(f)?
    };
    Ok(FlowMonitorRequest {
        id,
        command,
        flags: f,
        out_port,
        out_group,
        table,
        match_,
    })
}

/// An OpenFlow 1.1+ port as the 16 bits monitors keep.
fn port11(p: u32) -> Result<u16, OfpErr> {
    nxm::port_from_ofp11(p).ok_or(OfpErr::OfpbrcBadPort)
}

/// Appends a flow monitor request with `reqs` for `version` (OVS's
/// `ofputil_append_flow_monitor_request()`).
pub fn encode_flow_monitor_request(
    reqs: &[FlowMonitorRequest],
    version: Version,
    xid: u32,
    tlv: &TlvLens,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let t = request_type(version);
    let at = start(t, version, xid, out);
    for rq in reqs {
        let rq_at = out.len();
        match t {
            MsgType::NxstFlowMonitorRequest => {
                put32(out, rq.id);
                put16(out, flags_to_nx(rq.flags));
                put16(out, rq.out_port);
                put16(out, 0);
                out.push(rq.table);
                zeros(out, 5);
                let n = nxm::put_nx_match(out, &rq.match_, 0, 0, tlv);
                out[rq_at + 8..rq_at + 10].copy_from_slice(&(n as u16).to_be_bytes());
            }
            MsgType::Onfst13FlowMonitorRequest => {
                put32(out, rq.id);
                put16(out, flags_to_nx(rq.flags));
                put16(out, 0);
                put32(out, nxm::port_to_ofp11(rq.out_port) as u32);
                out.push(rq.table);
                zeros(out, 3);
                let m_at = out.len();
                put_ofp11_match(out, version, &rq.match_, tlv);
                let n = be16_at(out, m_at + 2);
                out[rq_at + 6..rq_at + 8].copy_from_slice(&n.to_be_bytes());
            }
            _ => {
                put32(out, rq.id);
                put32(out, nxm::port_to_ofp11(rq.out_port) as u32);
                put32(out, rq.out_group);
                put16(out, rq.flags);
                out.push(rq.table);
                out.push(rq.command as u8);
                put_ofp11_match(out, version, &rq.match_, tlv);
            }
        }
    }
    end(out, at, version)
}

/// Ends the message begun at `at` (removed when too long).
fn end(out: &mut Vec<u8>, at: usize, v: Version) -> Result<(), EncodeError> {
    finish(out, at).map_err(|_| actions::unencodable("flow monitor message", v))
}

fn be16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn request_type(v: Version) -> MsgType {
    match v {
        Version::Of10 | Version::Of11 | Version::Of12 => MsgType::NxstFlowMonitorRequest,
        Version::Of13 => MsgType::Onfst13FlowMonitorRequest,
        _ => MsgType::Ofpst14FlowMonitorRequest,
    }
}

fn reply_type(v: Version) -> MsgType {
    match v {
        Version::Of10 | Version::Of11 | Version::Of12 => MsgType::NxstFlowMonitorReply,
        Version::Of13 => MsgType::Onfst13FlowMonitorReply,
        _ => MsgType::Ofpst14FlowMonitorReply,
    }
}

/// Appends `NXT_FLOW_MONITOR_CANCEL` (ONF's in 1.3; in 1.4 and later a request with command
/// `delete`) for monitor `id`.
pub fn encode_flow_monitor_cancel(id: u32, version: Version, xid: u32, out: &mut Vec<u8>) {
    let t = match version {
        Version::Of10 | Version::Of11 | Version::Of12 => MsgType::NxtFlowMonitorCancel,
        Version::Of13 => MsgType::Onft13FlowMonitorCancel,
        // No match, as OVS's `ofputil_encode_flow_monitor_cancel()`.
        _ => MsgType::Ofpst14FlowMonitorRequest,
    };
    let at = start(t, version, xid, out);
    put32(out, id);
    if t == MsgType::Ofpst14FlowMonitorRequest {
        zeros(out, 11);
        out.push(MonitorCommand::Delete as u8);
    }
    let _ = finish(out, at);
}

/// The monitor id of a cancel (`NXT_`/`ONFT_FLOW_MONITOR_CANCEL`).
pub fn decode_flow_monitor_cancel(m: &Message<'_>) -> Result<u32, OfpErr> {
    super::expect(
        m,
        &[
            MsgType::NxtFlowMonitorCancel,
            MsgType::Onft13FlowMonitorCancel,
        ],
    )?;
    Reader::new(m.body).u32()
}

/// Appends the message that tells a monitoring connection its updates stopped (`paused`) or
/// started again: `NXT_FLOW_MONITOR_PAUSED`/`_RESUMED` (ONF's in 1.3), a flow monitor reply
/// with that event in 1.4 and later. Its transaction id is 0, as OVS's.
pub fn encode_flow_monitor_pause(paused: bool, version: Version, out: &mut Vec<u8>) {
    let t = match (version, paused) {
        (Version::Of10 | Version::Of11 | Version::Of12, true) => MsgType::NxtFlowMonitorPaused,
        (Version::Of10 | Version::Of11 | Version::Of12, false) => MsgType::NxtFlowMonitorResumed,
        (Version::Of13, true) => MsgType::Onft13FlowMonitorPaused,
        (Version::Of13, false) => MsgType::Onft13FlowMonitorResumed,
        _ => {
            let mut w = FlowUpdateWriter::new(version, 0, out);
            let u = if paused {
                FlowUpdate::Paused
            } else {
                FlowUpdate::Resumed
            };
            let _ = w.push(&u, &TlvLens::default());
            let _ = w.finish();
            return;
        }
    };
    let at = start(t, version, 0, out);
    let _ = finish(out, at);
}

/// A flow monitor reply appended one update at a time: as many messages as it takes, each but
/// the last flagged [`OFPSF_REPLY_MORE`] (OVS's `ofpmp_postappend()`).
pub struct FlowUpdateWriter<'a> {
    version: Version,
    xid: u32,
    out: &'a mut Vec<u8>,
    /// Where the message being filled starts.
    at: usize,
}

impl<'a> FlowUpdateWriter<'a> {
    /// Starts the reply's first message, with transaction id `xid` (the request's for the
    /// first reply, 0 for later updates).
    pub fn new(version: Version, xid: u32, out: &'a mut Vec<u8>) -> Self {
        let at = start(reply_type(version), version, xid, out);
        FlowUpdateWriter {
            version,
            xid,
            out,
            at,
        }
    }

    /// Appends one update, in a new message when the current one has no room for it.
    pub fn push(&mut self, u: &FlowUpdate, tlv: &TlvLens) -> Result<(), EncodeError> {
        let entry_at = self.out.len();
        if let Err(e) = put_update(self.out, self.version, u, tlv) {
            self.out.truncate(entry_at);
            return Err(e);
        }
        if self.out.len() - self.at > MAX_MESSAGE_LEN {
            let entry = self.out.split_off(entry_at);
            let at = self.at;
            self.out[at + 10..at + 12].copy_from_slice(&OFPSF_REPLY_MORE.to_be_bytes());
            end(self.out, at, self.version)?;
            self.at = start(reply_type(self.version), self.version, self.xid, self.out);
            self.out.extend_from_slice(&entry);
            if self.out.len() - self.at > MAX_MESSAGE_LEN {
                self.out.truncate(entry_at.min(self.out.len()));
                return Err(actions::unencodable("flow update", self.version));
            }
        }
        Ok(())
    }

    /// Ends the last message.
    pub fn finish(self) -> Result<(), EncodeError> {
        end(self.out, self.at, self.version)
    }
}

/// Appends one update in `v`'s form (OVS's `ofputil_append_flow_update()`).
fn put_update(
    out: &mut Vec<u8>,
    v: Version,
    u: &FlowUpdate,
    tlv: &TlvLens,
) -> Result<(), EncodeError> {
    let at = out.len();
    let nx = v < Version::Of14;
    let event: u16 = match (u, nx) {
        (FlowUpdate::Full(f), true) => match f.event {
            FlowUpdateEvent::Initial | FlowUpdateEvent::Added => 0,
            FlowUpdateEvent::Removed => 1,
            FlowUpdateEvent::Modified => 2,
        },
        (FlowUpdate::Full(f), false) => f.event as u16,
        (FlowUpdate::Abbrev(_), true) => 3,
        (FlowUpdate::Abbrev(_), false) => 4,
        (FlowUpdate::Paused, false) => 5,
        (FlowUpdate::Resumed, false) => 6,
        (FlowUpdate::Paused | FlowUpdate::Resumed, true) => {
            return Err(actions::unencodable("flow update", v));
        }
    };
    put16(out, 0);
    put16(out, event);
    match u {
        FlowUpdate::Abbrev(xid) => put32(out, *xid),
        FlowUpdate::Paused | FlowUpdate::Resumed => put32(out, 0),
        FlowUpdate::Full(f) if nx => {
            put16(out, u16::from(f.reason));
            put16(out, f.priority);
            put16(out, f.idle_timeout);
            put16(out, f.hard_timeout);
            put16(out, 0);
            out.push(f.table);
            out.push(0);
            put64(out, f.cookie);
            let n = if v == Version::Of13 {
                let m_at = out.len();
                put_ofp11_match(out, v, &f.match_, tlv);
                be16_at(out, m_at + 2)
            } else {
                nxm::put_nx_match(out, &f.match_, 0, 0, tlv) as u16
            };
            out[at + 12..at + 14].copy_from_slice(&n.to_be_bytes());
            put_actions(out, v, f)?;
        }
        FlowUpdate::Full(f) => {
            out.push(f.table);
            out.push(f.reason);
            put16(out, f.idle_timeout);
            put16(out, f.hard_timeout);
            put16(out, f.priority);
            zeros(out, 4);
            put64(out, f.cookie);
            put_ofp11_match(out, v, &f.match_, tlv);
            put_actions(out, v, f)?;
        }
    }
    let len = u16::try_from(out.len() - at).map_err(|_| actions::unencodable("flow update", v))?;
    out[at..at + 2].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

fn put_actions(out: &mut Vec<u8>, v: Version, f: &FlowUpdateFull) -> Result<(), EncodeError> {
    let ctx = FlowCtx::of(&f.match_);
    if v < Version::Of13 {
        actions::encode_actions(v, &f.actions, ctx, out)
    } else {
        actions::encode_instructions(v, &f.actions, ctx, out)
    }
}

/// The updates of a flow monitor reply, and whether more parts follow (OVS's
/// `ofputil_decode_flow_update()`).
pub fn decode_flow_update_reply(m: &Message<'_>) -> Result<(Vec<FlowUpdate>, bool), OfpErr> {
    let v = version(m)?;
    let nx = match m.msg_type {
        MsgType::NxstFlowMonitorReply | MsgType::Onfst13FlowMonitorReply => true,
        MsgType::Ofpst14FlowMonitorReply => false,
        _ => return Err(OfpErr::OfpbrcBadType),
    };
    let mut b = m.body;
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 4 {
            return Err(OfpErr::OfpbrcBadLen);
        }
        let len = usize::from(be16_at(b, 0));
        if len > b.len() || len % 8 != 0 || len < 8 {
            return Err(OfpErr::OfpbrcBadLen);
        }
        let (e, rest) = b.split_at(len);
        b = rest;
        out.push(pull_update(e, v, nx)?);
    }
    Ok((out, m.stats_flags & OFPSF_REPLY_MORE != 0))
}

fn pull_update(e: &[u8], v: Version, nx: bool) -> Result<FlowUpdate, OfpErr> {
    let event = be16_at(e, 2);
    let len = e.len();
    let simple = |u: FlowUpdate| {
        if len == 8 {
            Ok(u)
        } else {
            Err(OfpErr::OfpbrcBadLen)
        }
    };
    let xid = u32::from_be_bytes([e[4], e[5], e[6], e[7]]);
    let full_event = match (nx, event) {
        (true, 0) => FlowUpdateEvent::Added,
        (true, 1) => FlowUpdateEvent::Removed,
        (true, 2) => FlowUpdateEvent::Modified,
        (true, 3) => return simple(FlowUpdate::Abbrev(xid)),
        (false, 0) => FlowUpdateEvent::Initial,
        (false, 1) => FlowUpdateEvent::Added,
        (false, 2) => FlowUpdateEvent::Removed,
        (false, 3) => FlowUpdateEvent::Modified,
        (false, 4) => return simple(FlowUpdate::Abbrev(xid)),
        (false, 5) => return simple(FlowUpdate::Paused),
        (false, 6) => return simple(FlowUpdate::Resumed),
        _ => return Err(OfpErr::NxbrcFmBadEvent),
    };
    let fixed = if nx {
        NX_UPDATE_FULL_LEN
    } else {
        OFP14_UPDATE_FULL_LEN
    };
    if len < fixed {
        return Err(OfpErr::OfpbrcBadLen);
    }
    let mut r = Reader::new(&e[4..fixed]);
    let (reason, table, idle, hard, priority, match_len, cookie);
    if nx {
        reason = r.u16()? as u8;
        priority = r.u16()?;
        idle = r.u16()?;
        hard = r.u16()?;
        match_len = usize::from(r.u16()?);
        table = r.u8()?;
        r.skip(1)?;
        cookie = r.u64()?;
    } else {
        table = r.u8()?;
        reason = r.u8()?;
        idle = r.u16()?;
        hard = r.u16()?;
        priority = r.u16()?;
        r.skip(4)?;
        cookie = r.u64()?;
        match_len = 0;
    }
    let rest = &e[fixed..];
    let (match_, n) = if nx && v != Version::Of13 {
        let (m, n) = nxm::pull_nx_match(rest, match_len, false)?;
        (m.match_, n)
    } else {
        pull_ofp11_match(rest)?
    };
    let acts = rest.get(n..).ok_or(OfpErr::OfpbrcBadLen)?;
    let actions = if v < Version::Of13 {
        actions::decode_actions(v, acts)?
    } else {
        actions::decode_instructions(v, acts)?
    };
    Ok(FlowUpdate::Full(Box::new(FlowUpdateFull {
        event: full_event,
        reason,
        table,
        idle_timeout: idle,
        hard_timeout: hard,
        priority,
        cookie,
        match_,
        actions,
    })))
}

#[cfg(test)]
#[path = "flow_monitor_tests.rs"]
mod tests;
