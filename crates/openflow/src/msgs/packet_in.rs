//! Packet-in messages, the switch's way of handing a packet to its controllers, in every form
//! OVS 3.1 sends (`ofputil_encode_packet_in_private()` in `lib/ofp-packet.c`):
//!
//! - OpenFlow 1.0's `OFPT_PACKET_IN`: buffer id, total length, 16-bit input port, reason;
//! - OpenFlow 1.1's: 32-bit input ports and the table;
//! - OpenFlow 1.2's: an OXM match of the packet's metadata (input port, registers, metadata,
//!   tunnel and conntrack fields); 1.3 to 1.5 add the rule's cookie;
//! - Nicira's `NXT_PACKET_IN`: the same, the match as NXM;
//! - `NXT_PACKET_IN2` (after `NXT_SET_PACKET_IN_FORMAT`): properties (packet, full length,
//!   buffer id, table, cookie, reason, metadata, the `controller` action's user data, and a
//!   continuation that `NXT_RESUME` sends back).
//!
//! `NXT_RESUME` has `NXT_PACKET_IN2`'s layout and is decoded by the same function. A
//! continuation is a nested property list (OVS's `NXCPT_*`): the bridge (a 16-byte id the
//! switch checks), whether conntrack ran, and the frozen actions as groups, each with the
//! table and cookie of the rule they came from. Its content is the switch's business; the
//! layout is OVS's, so that `ovs-ofctl` can print it.

use ofproto::pipekey::PipeMatch;
use ofproto::syntax::OfAction;

use super::{Reader, finish, prop_u32, props, put_prop, put16, put32, put64, start, zeros};
use crate::actions::{FlowCtx, decode_actions, encode_actions};
use crate::error::OfpErr;
use crate::header::Version;
use crate::msgtype::{Message, MsgType};
use crate::nxm::{self, TlvLens};

/// No buffered packet: OVS buffers none.
pub const NO_BUFFER: u32 = u32::MAX;

/// Why a packet went to the controller, as the switch knows it (OVS's `enum
/// ofp_packet_in_reason`, with its two private miss reasons); each version gets the nearest
/// code it has ([`PacketInReason::wire`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PacketInReason {
    /// `OFPR_NO_MATCH`.
    NoMatch = 0,
    /// `OFPR_ACTION`.
    Action = 1,
    /// `OFPR_INVALID_TTL`.
    InvalidTtl = 2,
    /// `OFPR_ACTION_SET` (OpenFlow 1.4).
    ActionSet = 3,
    /// `OFPR_GROUP` (OpenFlow 1.4).
    Group = 4,
    /// `OFPR_PACKET_OUT` (OpenFlow 1.4).
    PacketOut = 5,
    /// A table-miss flow's `controller` action: `no_match` from OpenFlow 1.3 on, `action`
    /// before.
    ExplicitMiss = 6,
    /// A miss with no table-miss flow (OpenFlow 1.0's default): always `no_match`.
    ImplicitMiss = 7,
}

impl PacketInReason {
    /// The reason with this internal code.
    pub fn from_code(c: u8) -> Option<PacketInReason> {
        use PacketInReason::*;
        Some(match c {
            0 => NoMatch,
            1 => Action,
            2 => InvalidTtl,
            3 => ActionSet,
            4 => Group,
            5 => PacketOut,
            6 => ExplicitMiss,
            7 => ImplicitMiss,
            _ => return None,
        })
    }

    /// The code sent in `version` (OVS's `encode_packet_in_reason()`).
    pub fn wire(self, version: Version) -> u8 {
        use PacketInReason::*;
        match self {
            NoMatch | Action | InvalidTtl => self as u8,
            ActionSet | Group | PacketOut if version < Version::Of14 => Action as u8,
            ActionSet | Group | PacketOut => self as u8,
            ExplicitMiss if version < Version::Of13 => Action as u8,
            ExplicitMiss | ImplicitMiss => NoMatch as u8,
        }
    }
}

/// The format a connection asked for (`NXT_SET_PACKET_IN_FORMAT`).
pub use super::nicira::PacketInFormat;

/// What a paused pipeline needs to go on (OVS's `struct ofputil_packet_in_private` less the
/// public packet-in).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Continuation {
    /// `NXCPT_BRIDGE`: which bridge, and which life of it, paused.
    pub bridge: [u8; 16],
    /// `NXCPT_STACK`: the values of the data stack of `push:`/`pop:`, the top first, each as
    /// its bytes (at most [`STACK_VALUE_MAX`]).
    pub stack: Vec<Vec<u8>>,
    /// `NXCPT_MIRRORS`: the mirrors that already copied the packet.
    pub mirrors: u32,
    /// `NXCPT_CONNTRACKED`: conntrack ran before the pause.
    pub conntracked: bool,
    /// `NXCPT_TABLE_ID`, `NXCPT_COOKIE` and `NXCPT_ACTIONS`: the frozen actions, in groups
    /// that each carry the table and cookie of the rule they belong to.
    pub actions: Vec<ActionGroup>,
    /// `NXCPT_ACTION_SET`: the action set.
    pub action_set: Vec<OfAction>,
    /// `NXCPT_ODP_PORT`: the datapath port the packet came in on (0: not given).
    pub odp_port: u32,
}

/// The longest value of a continuation's stack (OVS's `union mf_subvalue`).
pub const STACK_VALUE_MAX: usize = 128;

/// Actions of one rule in a continuation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActionGroup {
    pub table: u8,
    pub cookie: u64,
    pub actions: Vec<OfAction>,
}

/// A packet-in, whatever its form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIn {
    /// The packet (as sent: OVS sends whole packets).
    pub packet: Vec<u8>,
    /// Its length before any cut.
    pub total_len: u32,
    /// Always [`NO_BUFFER`] from this switch.
    pub buffer_id: u32,
    pub reason: PacketInReason,
    pub table_id: u8,
    /// The cookie of the rule whose action sent it (`u64::MAX`: none).
    pub cookie: u64,
    /// The packet's metadata, every field exact: `in_port` always, the others when not zero
    /// (OVS's `flow_get_metadata()`).
    pub metadata: PipeMatch,
    /// The `controller` action's user data (`NXT_PACKET_IN2` only).
    pub userdata: Vec<u8>,
    /// For `controller(pause)` (`NXT_PACKET_IN2` only).
    pub continuation: Option<Continuation>,
}

/// `NXT_PACKET_IN2` property types (`enum nx_packet_in2_prop_type`).
const NXPINT_PACKET: u16 = 0;
const NXPINT_FULL_LEN: u16 = 1;
const NXPINT_BUFFER_ID: u16 = 2;
const NXPINT_TABLE_ID: u16 = 3;
const NXPINT_COOKIE: u16 = 4;
const NXPINT_REASON: u16 = 5;
const NXPINT_METADATA: u16 = 6;
const NXPINT_USERDATA: u16 = 7;
const NXPINT_CONTINUATION: u16 = 8;

/// Continuation property types (`enum nx_continuation_prop_type`).
const NXCPT_BRIDGE: u16 = 0x8000;
const NXCPT_STACK: u16 = 0x8001;
const NXCPT_MIRRORS: u16 = 0x8002;
const NXCPT_CONNTRACKED: u16 = 0x8003;
const NXCPT_TABLE_ID: u16 = 0x8004;
const NXCPT_COOKIE: u16 = 0x8005;
const NXCPT_ACTIONS: u16 = 0x8006;
const NXCPT_ACTION_SET: u16 = 0x8007;
const NXCPT_ODP_PORT: u16 = 0x8008;

/// The input port of a metadata match.
fn in_port(m: &PipeMatch) -> u32 {
    m.key().dp.in_port()
}

impl PacketIn {
    /// Appends the packet-in as `format` in `version` (transaction id 0, as the switch sends
    /// asynchronous messages). Every message fits: the packet is at most what a 16-bit
    /// length leaves, else it is cut and `total_len` says so.
    pub fn encode(&self, version: Version, format: PacketInFormat, tlv: &TlvLens) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.packet.len() + 128);
        let at;
        match format {
            PacketInFormat::NxtPacketIn2 => {
                return self.encode_nxt2(version, MsgType::NxtPacketIn2, tlv);
            }
            PacketInFormat::NxtPacketIn => {
                at = start(MsgType::NxtPacketIn, version, 0, &mut out);
                put32(&mut out, self.buffer_id);
                put16(&mut out, self.total_len16());
                out.push(self.reason.wire(version));
                out.push(self.table_id);
                put64(&mut out, self.cookie);
                let len_at = out.len();
                put16(&mut out, 0);
                zeros(&mut out, 6);
                let n = nxm::put_nx_match(&mut out, &self.metadata, 0, 0, tlv);
                out[len_at..len_at + 2].copy_from_slice(&(n as u16).to_be_bytes());
                zeros(&mut out, 2);
            }
            PacketInFormat::Standard if version == Version::Of10 => {
                at = start(MsgType::Ofpt10PacketIn, version, 0, &mut out);
                put32(&mut out, self.buffer_id);
                put16(&mut out, self.total_len16());
                put16(&mut out, in_port(&self.metadata) as u16);
                out.push(self.reason.wire(version));
                out.push(0);
            }
            PacketInFormat::Standard if version == Version::Of11 => {
                at = start(MsgType::Ofpt11PacketIn, version, 0, &mut out);
                put32(&mut out, self.buffer_id);
                let port = nxm::port_to_ofp11(in_port(&self.metadata) as u16) as u32;
                put32(&mut out, port);
                put32(&mut out, port);
                put16(&mut out, self.total_len16());
                out.push(self.reason.wire(version));
                out.push(self.table_id);
            }
            PacketInFormat::Standard => {
                let t = if version >= Version::Of13 {
                    MsgType::Ofpt13PacketIn
                } else {
                    MsgType::Ofpt12PacketIn
                };
                at = start(t, version, 0, &mut out);
                put32(&mut out, self.buffer_id);
                put16(&mut out, self.total_len16());
                out.push(self.reason.wire(version));
                out.push(self.table_id);
                if version >= Version::Of13 {
                    put64(&mut out, self.cookie);
                }
                nxm::put_oxm_match(&mut out, version, &self.metadata, tlv);
                zeros(&mut out, 2);
            }
        }
        let room = usize::from(u16::MAX) - (out.len() - at);
        out.extend_from_slice(&self.packet[..self.packet.len().min(room)]);
        let _ = finish(&mut out, at);
        out
    }

    fn total_len16(&self) -> u16 {
        self.total_len.min(u32::from(u16::MAX)) as u16
    }

    /// `NXT_PACKET_IN2` or `NXT_RESUME` (`t`).
    fn encode_nxt2(&self, version: Version, t: MsgType, tlv: &TlvLens) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.packet.len() + 256);
        let at = start(t, version, 0, &mut out);
        // What the properties other than the packet may take, so that the message fits.
        let room = usize::from(u16::MAX) - 4096;
        let packet = &self.packet[..self.packet.len().min(room)];
        put_prop(&mut out, NXPINT_PACKET, packet);
        if packet.len() as u32 != self.total_len {
            put_prop(&mut out, NXPINT_FULL_LEN, &self.total_len.to_be_bytes());
        }
        if self.buffer_id != NO_BUFFER {
            put_prop(&mut out, NXPINT_BUFFER_ID, &self.buffer_id.to_be_bytes());
        }
        put_prop(&mut out, NXPINT_TABLE_ID, &[self.table_id]);
        if self.cookie != u64::MAX {
            put_nested(&mut out, NXPINT_COOKIE, &self.cookie.to_be_bytes());
        }
        put_prop(&mut out, NXPINT_REASON, &[self.reason.wire(version)]);
        let mut md = Vec::new();
        nxm::put_raw(&mut md, version.wire(), &self.metadata, 0, 0, tlv);
        put_prop(&mut out, NXPINT_METADATA, &md);
        if let Some(c) = &self.continuation {
            let mut inner = Vec::new();
            c.encode(version, &mut inner);
            if !inner.is_empty() {
                put_nested(&mut out, NXPINT_CONTINUATION, &inner);
            }
        }
        if !self.userdata.is_empty() && t == MsgType::NxtPacketIn2 {
            put_prop(&mut out, NXPINT_USERDATA, &self.userdata);
        }
        if finish(&mut out, at).is_err() {
            // Only a continuation of huge actions gets here: send the packet without it.
            let mut lean = self.clone();
            lean.continuation = None;
            return lean.encode_nxt2(version, t, tlv);
        }
        out
    }

    /// An `NXT_RESUME` that sends this packet-in's packet, metadata and continuation back.
    pub fn encode_resume(&self, version: Version, tlv: &TlvLens) -> Vec<u8> {
        self.encode_nxt2(version, MsgType::NxtResume, tlv)
    }

    /// Decodes a packet-in of any form, or an `NXT_RESUME` (OVS's
    /// `ofputil_decode_packet_in_private()` with `loose` false).
    pub fn decode(msg: &Message<'_>) -> Result<PacketIn, OfpErr> {
        let version = super::version_of(msg)?;
        let b = msg.body;
        let mut r = Reader::new(b);
        let catchall = PipeMatch::new(&Default::default(), &Default::default());
        let with_port = |port: u32| {
            let mut key = ofproto::pipekey::PipeKey::new();
            let mut mask = ofproto::pipekey::PipeMask::new();
            key.dp.set_in_port(port);
            mask.dp.set_in_port(u32::MAX);
            PipeMatch::new(&key, &mask)
        };
        let reason = |c: u8| PacketInReason::from_code(c).unwrap_or(PacketInReason::Action);
        let pi = match msg.msg_type {
            MsgType::Ofpt10PacketIn => {
                let buffer_id = r.u32()?;
                let total_len = u32::from(r.u16()?);
                let port = r.u16()?;
                let rs = r.u8()?;
                r.skip(1)?;
                let port = u32::from(port);
                PacketIn {
                    packet: r.rest().to_vec(),
                    total_len,
                    buffer_id,
                    reason: reason(rs),
                    table_id: 0,
                    cookie: u64::MAX,
                    metadata: with_port(port),
                    userdata: Vec::new(),
                    continuation: None,
                }
            }
            MsgType::Ofpt11PacketIn => {
                let buffer_id = r.u32()?;
                let port = nxm::port_from_ofp11(r.u32()?).ok_or(OfpErr::OfpbrcBadPort)?;
                let port = u32::from(port);
                r.skip(4)?;
                let total_len = u32::from(r.u16()?);
                let rs = r.u8()?;
                let table_id = r.u8()?;
                PacketIn {
                    packet: r.rest().to_vec(),
                    total_len,
                    buffer_id,
                    reason: reason(rs),
                    table_id,
                    cookie: u64::MAX,
                    metadata: with_port(port),
                    userdata: Vec::new(),
                    continuation: None,
                }
            }
            MsgType::Ofpt12PacketIn | MsgType::Ofpt13PacketIn => {
                let buffer_id = r.u32()?;
                let total_len = u32::from(r.u16()?);
                let rs = r.u8()?;
                let table_id = r.u8()?;
                let cookie = if msg.msg_type == MsgType::Ofpt13PacketIn {
                    r.u64()?
                } else {
                    u64::MAX
                };
                let (metadata, n) = nxm::pull_oxm_match(r.rest())?;
                r.skip(n)?;
                r.skip(2)?;
                PacketIn {
                    packet: r.rest().to_vec(),
                    total_len,
                    buffer_id,
                    reason: reason(rs),
                    table_id,
                    cookie,
                    metadata,
                    userdata: Vec::new(),
                    continuation: None,
                }
            }
            MsgType::NxtPacketIn => {
                let buffer_id = r.u32()?;
                let total_len = u32::from(r.u16()?);
                let rs = r.u8()?;
                let table_id = r.u8()?;
                let cookie = r.u64()?;
                let match_len = usize::from(r.u16()?);
                r.skip(6)?;
                let (m, n) = nxm::pull_nx_match(r.rest(), match_len, false)?;
                r.skip(n)?;
                r.skip(2)?;
                PacketIn {
                    packet: r.rest().to_vec(),
                    total_len,
                    buffer_id,
                    reason: reason(rs),
                    table_id,
                    cookie,
                    metadata: m.match_,
                    userdata: Vec::new(),
                    continuation: None,
                }
            }
            MsgType::NxtPacketIn2 | MsgType::NxtResume => {
                let mut pi = PacketIn {
                    packet: Vec::new(),
                    total_len: 0,
                    buffer_id: NO_BUFFER,
                    reason: PacketInReason::NoMatch,
                    table_id: 0,
                    cookie: 0,
                    metadata: catchall,
                    userdata: Vec::new(),
                    continuation: None,
                };
                for p in props(b) {
                    let p = p?;
                    if p.experimenter.is_some() {
                        return Err(OfpErr::OfpbpcBadExpType);
                    }
                    match p.kind {
                        NXPINT_PACKET => pi.packet = p.payload.to_vec(),
                        NXPINT_FULL_LEN => pi.total_len = prop_u32(&p)?,
                        NXPINT_BUFFER_ID => pi.buffer_id = prop_u32(&p)?,
                        NXPINT_TABLE_ID => pi.table_id = prop_u8(p.payload)?,
                        NXPINT_COOKIE => pi.cookie = prop_u64(p.payload)?,
                        NXPINT_REASON => pi.reason = reason(prop_u8(p.payload)?),
                        NXPINT_METADATA => {
                            pi.metadata = nxm::pull_raw(p.payload, false)?.match_;
                        }
                        NXPINT_USERDATA => pi.userdata = p.payload.to_vec(),
                        NXPINT_CONTINUATION => {
                            let inner = nested(p.payload)?;
                            pi.continuation = Some(Continuation::decode(version, inner)?);
                        }
                        _ => return Err(OfpErr::OfpbpcBadType),
                    }
                }
                if pi.packet.is_empty() {
                    return Err(OfpErr::OfpbrcBadLen);
                }
                if pi.total_len == 0 {
                    pi.total_len = pi.packet.len() as u32;
                } else if (pi.total_len as usize) < pi.packet.len() {
                    return Err(OfpErr::OfpbrcBadLen);
                }
                pi
            }
            _ => return Err(OfpErr::OfpbrcBadType),
        };
        Ok(pi)
    }
}

impl Continuation {
    /// Appends the continuation's properties (without the enclosing one).
    fn encode(&self, version: Version, out: &mut Vec<u8>) {
        if self.bridge != [0; 16] {
            put_prop(out, NXCPT_BRIDGE, &self.bridge);
        }
        for v in &self.stack {
            put_prop(out, NXCPT_STACK, v);
        }
        if self.mirrors != 0 {
            put_prop(out, NXCPT_MIRRORS, &self.mirrors.to_be_bytes());
        }
        if self.conntracked {
            put_prop(out, NXCPT_CONNTRACKED, &[]);
        }
        let (mut table, mut cookie) = (0u8, 0u64);
        for g in &self.actions {
            if g.table != table {
                put_prop(out, NXCPT_TABLE_ID, &[g.table]);
                table = g.table;
            }
            if g.cookie != cookie {
                put_nested(out, NXCPT_COOKIE, &g.cookie.to_be_bytes());
                cookie = g.cookie;
            }
            let mut a = Vec::new();
            // An action this version cannot say ends the group there: what is left of it
            // could not run as it would have, so it is not sent.
            if encode_actions(version, &g.actions, FlowCtx::default(), &mut a).is_ok()
                && !a.is_empty()
            {
                put_nested(out, NXCPT_ACTIONS, &a);
            }
        }
        let mut a = Vec::new();
        if encode_actions(version, &self.action_set, FlowCtx::default(), &mut a).is_ok()
            && !a.is_empty()
        {
            put_nested(out, NXCPT_ACTION_SET, &a);
        }
        if self.odp_port != 0 {
            put_prop(out, NXCPT_ODP_PORT, &self.odp_port.to_be_bytes());
        }
    }

    /// Decodes the properties of a continuation.
    fn decode(version: Version, b: &[u8]) -> Result<Continuation, OfpErr> {
        let mut c = Continuation::default();
        let (mut table, mut cookie) = (0u8, 0u64);
        for p in props(b) {
            let p = p?;
            if p.experimenter.is_some() {
                return Err(OfpErr::OfpbpcBadExpType);
            }
            match p.kind {
                NXCPT_BRIDGE => {
                    c.bridge = p.payload.try_into().map_err(|_| OfpErr::OfpbpcBadLen)?;
                }
                NXCPT_STACK => {
                    if p.payload.len() > STACK_VALUE_MAX {
                        return Err(OfpErr::OfpbpcBadLen);
                    }
                    c.stack.push(p.payload.to_vec());
                }
                NXCPT_MIRRORS => c.mirrors = prop_u32(&p)?,
                NXCPT_ACTION_SET => {
                    c.action_set = decode_actions(version, nested(p.payload)?)?;
                }
                NXCPT_CONNTRACKED => c.conntracked = true,
                NXCPT_TABLE_ID => table = prop_u8(p.payload)?,
                NXCPT_COOKIE => cookie = prop_u64(p.payload)?,
                NXCPT_ACTIONS => {
                    let actions = decode_actions(version, nested(p.payload)?)?;
                    c.actions.push(ActionGroup {
                        table,
                        cookie,
                        actions,
                    });
                }
                NXCPT_ODP_PORT => c.odp_port = prop_u32(&p)?,
                _ => return Err(OfpErr::OfpbpcBadType),
            }
        }
        Ok(c)
    }
}

/// A property whose content is nested properties, actions or a 64-bit value: 4 bytes of
/// padding after its header, so that what it holds is 8-byte aligned (OVS's
/// `ofpprop_start_nested()`).
fn put_nested(out: &mut Vec<u8>, kind: u16, content: &[u8]) {
    let mut p = vec![0; 4];
    p.extend_from_slice(content);
    put_prop(out, kind, &p);
}

/// What a nested property holds (after its padding).
fn nested(payload: &[u8]) -> Result<&[u8], OfpErr> {
    payload.get(4..).ok_or(OfpErr::OfpbpcBadLen)
}

fn prop_u8(p: &[u8]) -> Result<u8, OfpErr> {
    match p {
        [v] => Ok(*v),
        _ => Err(OfpErr::OfpbpcBadLen),
    }
}

/// A 64-bit property: 4 bytes of padding, then the value, 8-byte aligned (OVS's
/// `ofpprop_put_be64()`).
fn prop_u64(p: &[u8]) -> Result<u64, OfpErr> {
    let a: [u8; 8] = nested(p)?.try_into().map_err(|_| OfpErr::OfpbpcBadLen)?;
    Ok(u64::from_be_bytes(a))
}

#[cfg(test)]
#[path = "packet_in_tests.rs"]
mod tests;
