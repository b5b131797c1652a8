//! Flow statistics: the flow and aggregate requests and replies that `ovs-ofctl dump-flows` and
//! `dump-aggregate` exchange, in OpenFlow 1.0 (`OFPST_FLOW`, `OFPST_AGGREGATE`), Nicira's NXM
//! form (`NXST_FLOW`, `NXST_AGGREGATE`) and OpenFlow 1.2+'s multipart messages
//! (`OFPMP_FLOW`, `OFPMP_AGGREGATE`; OpenFlow 1.5 carries the counters as OXS statistics),
//! mapped to the pipeline's [`FlowSpec`] and [`FlowStats`] as OVS's `ofp-flow.c` does.
//!
//! A reply that does not fit one message is split, each part but the last flagged "more"
//! (`OFPSF_REPLY_MORE`).

use crate::be::{be16, be32, be64};
use ofproto::pipekey::PipeMatch;
use ofproto::syntax::{FlowModFlags, FlowSpec, FlowStats, OFPP_ANY};

use crate::actions::{self, EncodeError, FlowCtx};
use crate::error::OfpErr;
use crate::flow_mod::{
    OFPG_ANY, OFPTT_ALL, Protocol, body, empty_spec, flags_from_wire, flags_to_wire,
    pull_ofp11_match, put_ofp11_match,
};
use crate::header::{self, MAX_MESSAGE_LEN, NX_VENDOR_ID, Version};
use crate::match10::{self, OFP10_MATCH_LEN};
use crate::nxm::{self, TlvLens, port_from_ofp11, port_to_ofp11};

/// `OFPT10_STATS_REQUEST` / `_REPLY` (OpenFlow 1.0).
const OFPT10_STATS_REQUEST: u8 = 16;
const OFPT10_STATS_REPLY: u8 = 17;
/// `OFPT11_STATS_REQUEST` / `OFPT13_MULTIPART_REQUEST` and the replies (1.1+).
const OFPT11_STATS_REQUEST: u8 = 18;
const OFPT11_STATS_REPLY: u8 = 19;
/// `OFPST_FLOW`, `OFPST_AGGREGATE`, and the vendor statistics type.
const OFPST_FLOW: u16 = 1;
const OFPST_AGGREGATE: u16 = 2;
const OFPST_VENDOR: u16 = 0xffff;
/// `NXST_FLOW` and `NXST_AGGREGATE`.
const NXST_FLOW: u32 = 0;
const NXST_AGGREGATE: u32 = 1;
/// `OFPSF_REPLY_MORE`: more parts of the reply follow.
pub const OFPSF_REPLY_MORE: u16 = 1;

/// OXS (OpenFlow 1.5 statistics) fields of the basic class 0x8002.
const OXS_CLASS: u16 = 0x8002;
const OXS_DURATION: u8 = 0;
const OXS_IDLE_TIME: u8 = 1;
const OXS_FLOW_COUNT: u8 = 3;
const OXS_PACKET_COUNT: u8 = 4;
const OXS_BYTE_COUNT: u8 = 5;

/// A flow or aggregate statistics request: which flows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStatsRequest {
    /// Whether the totals are wanted (`dump-aggregate`) rather than each flow.
    pub aggregate: bool,
    /// The table, [`OFPTT_ALL`] for all.
    pub table: u8,
    /// Only flows that output to this port.
    pub out_port: Option<u32>,
    /// Only flows that output to this group (OpenFlow 1.1+).
    pub out_group: Option<u32>,
    /// Only flows whose cookie matches under `cookie_mask`.
    pub cookie: u64,
    pub cookie_mask: u64,
    /// Only flows this match covers.
    pub match_: PipeMatch,
}

/// The totals of an aggregate reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AggregateStats {
    pub packet_count: u64,
    pub byte_count: u64,
    pub flow_count: u32,
}

fn too_long(v: Version) -> EncodeError {
    EncodeError {
        action: "statistics message",
        version: v.number(),
    }
}

/// Begins a statistics message: its header and the statistics header (with the Nicira vendor
/// header in NXM), returns where it starts.
fn start_stats(
    out: &mut Vec<u8>,
    proto: Protocol,
    reply: bool,
    aggregate: bool,
    xid: u32,
) -> usize {
    let v = proto.version;
    let ty = match (v == Version::Of10, reply) {
        (true, false) => OFPT10_STATS_REQUEST,
        (true, true) => OFPT10_STATS_REPLY,
        (false, false) => OFPT11_STATS_REQUEST,
        (false, true) => OFPT11_STATS_REPLY,
    };
    let at = header::start(out, v.wire(), ty, xid);
    let st = if aggregate {
        OFPST_AGGREGATE
    } else {
        OFPST_FLOW
    };
    if v == Version::Of10 && proto.nxm {
        out.extend_from_slice(&OFPST_VENDOR.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
        let sub = if aggregate { NXST_AGGREGATE } else { NXST_FLOW };
        out.extend_from_slice(&sub.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
    } else {
        out.extend_from_slice(&st.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        if v > Version::Of10 {
            out.extend_from_slice(&[0; 4]);
        }
    }
    at
}

/// The length of the statistics header(s) of `proto`.
fn stats_hdr_len(proto: Protocol) -> usize {
    match (proto.version, proto.nxm) {
        (Version::Of10, true) => 24,
        (Version::Of10, false) => 12,
        _ => 16,
    }
}

/// Appends a flow or aggregate statistics request.
pub fn encode_flow_stats_request(
    req: &FlowStatsRequest,
    proto: Protocol,
    xid: u32,
    tlv: &TlvLens,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let v = proto.version;
    crate::flow_mod::check_fits(proto, &req.match_, false)?;
    let at = start_stats(out, proto, false, req.aggregate, xid);
    let port16 = req.out_port.map_or(OFPP_ANY as u16, |p| p as u16);
    if v == Version::Of10 && proto.nxm {
        out.extend_from_slice(&port16.to_be_bytes());
        let len_at = out.len();
        out.extend_from_slice(&[0, 0, req.table, 0, 0, 0]);
        let n = nxm::put_nx_match(out, &req.match_, req.cookie, req.cookie_mask, tlv);
        out[len_at..len_at + 2].copy_from_slice(&(n as u16).to_be_bytes());
    } else if v == Version::Of10 {
        out.extend_from_slice(&match10::encode(&req.match_));
        out.extend_from_slice(&[req.table, 0]);
        out.extend_from_slice(&port16.to_be_bytes());
    } else {
        out.extend_from_slice(&[req.table, 0, 0, 0]);
        out.extend_from_slice(&(port_to_ofp11(port16) as u32).to_be_bytes());
        out.extend_from_slice(&req.out_group.unwrap_or(OFPG_ANY).to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&(req.cookie & req.cookie_mask).to_be_bytes());
        out.extend_from_slice(&req.cookie_mask.to_be_bytes());
        put_ofp11_match(out, v, &req.match_, tlv);
    }
    header::finish(out, at).map_err(|_| too_long(v))
}

/// Which statistics message `msg` is: (protocol, reply, aggregate, flags), or `None` for one
/// that is not a flow or aggregate statistics message.
pub fn classify(msg: &[u8]) -> Option<(Protocol, bool, bool, u16)> {
    stats_kind(msg).ok()
}

/// [`classify`] with OVS's errors: a statistics header cut short (`OFPBRC_BAD_LEN`), a vendor
/// that is not Nicira's (`OFPBRC_BAD_VENDOR`), a Nicira subtype or statistics type that is not
/// flow or aggregate (`OFPBRC_BAD_SUBTYPE`, `OFPBRC_BAD_STAT`).
fn stats_kind(msg: &[u8]) -> Result<(Protocol, bool, bool, u16), OfpErr> {
    let v = Version::from_wire(*msg.first().ok_or(OfpErr::OfpbrcBadLen)?)
        .ok_or(OfpErr::OfpbrcBadVersion)?;
    let ty = *msg.get(1).ok_or(OfpErr::OfpbrcBadLen)?;
    let reply = match (v, ty) {
        (Version::Of10, OFPT10_STATS_REQUEST) => false,
        (Version::Of10, OFPT10_STATS_REPLY) => true,
        (_, OFPT11_STATS_REQUEST) if v > Version::Of10 => false,
        (_, OFPT11_STATS_REPLY) if v > Version::Of10 => true,
        _ => return Err(OfpErr::OfpbrcBadType),
    };
    let h = msg.get(..12).ok_or(OfpErr::OfpbrcBadLen)?;
    let (st, flags) = (be16(h, 8), be16(h, 10));
    let mut proto = Protocol::new(v);
    let aggregate = match st {
        OFPST_FLOW => false,
        OFPST_AGGREGATE => true,
        OFPST_VENDOR if v == Version::Of10 => {
            let h = msg.get(..24).ok_or(OfpErr::OfpbrcBadLen)?;
            if be32(h, 12) != NX_VENDOR_ID {
                return Err(OfpErr::OfpbrcBadVendor);
            }
            proto.nxm = true;
            match be32(h, 16) {
                NXST_FLOW => false,
                NXST_AGGREGATE => true,
                _ => return Err(OfpErr::OfpbrcBadSubtype),
            }
        }
        _ => return Err(OfpErr::OfpbrcBadStat),
    };
    Ok((proto, reply, aggregate, flags))
}

/// Decodes a flow or aggregate statistics request (header included).
pub fn decode_flow_stats_request(msg: &[u8]) -> Result<FlowStatsRequest, OfpErr> {
    let m = body(msg)?;
    let (proto, reply, aggregate, _) = stats_kind(m)?;
    if reply {
        return Err(OfpErr::OfpbrcBadType);
    }
    // OVS's `ofpraw` checks: the statistics header and fixed request whole, anything after it
    // (a match) in 8-byte units; OpenFlow 1.0's request is exactly its fixed size.
    let b = m.get(stats_hdr_len(proto)..).ok_or(OfpErr::OfpbrcBadLen)?;
    let fixed = match (proto.version, proto.nxm) {
        (Version::Of10, true) => 8,
        (Version::Of10, false) => OFP10_MATCH_LEN + 4,
        _ => 32,
    };
    let whole = if proto.version == Version::Of10 && !proto.nxm {
        b.len() == fixed
    } else {
        b.len() >= fixed && (b.len() - fixed).is_multiple_of(8)
    };
    if !whole {
        return Err(OfpErr::OfpbrcBadLen);
    }
    let mut req = FlowStatsRequest {
        aggregate,
        table: OFPTT_ALL,
        out_port: None,
        out_group: None,
        cookie: 0,
        cookie_mask: 0,
        match_: PipeMatch::catchall(),
    };
    let port16 = |p: u16| (u32::from(p) != OFPP_ANY).then_some(u32::from(p));
    match proto.version {
        Version::Of10 if proto.nxm => {
            if b.len() < 8 {
                return Err(OfpErr::OfpbrcBadLen);
            }
            req.out_port = port16(be16(b, 0));
            req.table = b[4];
            let (nm, _) = nxm::pull_nx_match(&b[8..], usize::from(be16(b, 2)), true)?;
            req.match_ = nm.match_;
            req.cookie = nm.cookie;
            req.cookie_mask = nm.cookie_mask;
        }
        Version::Of10 => {
            if b.len() != OFP10_MATCH_LEN + 4 {
                return Err(OfpErr::OfpbrcBadLen);
            }
            let mb: &[u8; OFP10_MATCH_LEN] = b[..OFP10_MATCH_LEN].try_into().expect("40 bytes");
            req.match_ = match10::decode(mb);
            req.table = b[40];
            req.out_port = port16(be16(b, 42));
        }
        _ => {
            if b.len() < 32 {
                return Err(OfpErr::OfpbrcBadLen);
            }
            req.table = b[0];
            let p = port_from_ofp11(be32(b, 4)).ok_or(OfpErr::OfpbacBadOutPort)?;
            req.out_port = port16(p);
            let g = be32(b, 8);
            req.out_group = (g != OFPG_ANY).then_some(g);
            req.cookie = be64(b, 16);
            req.cookie_mask = be64(b, 24);
            req.match_ = pull_ofp11_match(&b[32..])?.0;
        }
    }
    Ok(req)
}

/// Appends one OXS statistic (OpenFlow 1.5).
fn put_oxs(out: &mut Vec<u8>, field: u8, value: &[u8]) {
    out.extend_from_slice(&OXS_CLASS.to_be_bytes());
    out.push(field << 1);
    out.push(value.len() as u8);
    out.extend_from_slice(value);
}

fn duration_bytes(sec: u32, nsec: u32) -> [u8; 8] {
    let mut b = [0; 8];
    b[..4].copy_from_slice(&sec.to_be_bytes());
    b[4..].copy_from_slice(&nsec.to_be_bytes());
    b
}

/// Appends an `ofp_oxs_stat` block: reserved, length, the statistics, padding.
pub(crate) fn put_oxs_stats(out: &mut Vec<u8>, fill: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    fill(out);
    let len = (out.len() - at) as u16;
    out[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
    out.resize(at + (out.len() - at).next_multiple_of(8), 0);
}

/// The OXS statistics at the start of `b`: (duration, idle time, flow count, packets, bytes),
/// and the bytes they take with padding.
#[allow(clippy::type_complexity)]
pub(crate) fn pull_oxs_stats(
    b: &[u8],
) -> Result<((u32, u32), Option<u32>, u32, u64, u64, usize), OfpErr> {
    if b.len() < 4 {
        return Err(OfpErr::OfpbrcBadLen);
    }
    let len = usize::from(be16(b, 2));
    let padded = len.next_multiple_of(8);
    if len < 4 || padded > b.len() {
        return Err(OfpErr::OfpbrcBadLen);
    }
    let (mut dur, mut idle, mut flows, mut pkts, mut bytes) = ((0, 0), None, 0, 0, 0);
    let mut p = &b[4..len];
    while !p.is_empty() {
        if p.len() < 4 {
            return Err(OfpErr::OfpbrcBadLen);
        }
        let (class, field, n) = (be16(p, 0), p[2] >> 1, usize::from(p[3]));
        let v = p.get(4..4 + n).ok_or(OfpErr::OfpbrcBadLen)?;
        if class != OXS_CLASS {
            return Err(OfpErr::OfpbrcBadStat);
        }
        let want = match field {
            OXS_DURATION | OXS_IDLE_TIME | OXS_PACKET_COUNT | OXS_BYTE_COUNT => 8,
            OXS_FLOW_COUNT => 4,
            _ => return Err(OfpErr::OfpbrcBadStat),
        };
        if n != want {
            return Err(OfpErr::OfpbrcBadLen);
        }
        match field {
            OXS_DURATION => dur = (be32(v, 0), be32(v, 4)),
            OXS_IDLE_TIME => idle = Some(be32(v, 0)),
            OXS_FLOW_COUNT => flows = be32(v, 0),
            OXS_PACKET_COUNT => pkts = be64(v, 0),
            _ => bytes = be64(v, 0),
        }
        p = &p[4 + n..];
    }
    Ok((dur, idle, flows, pkts, bytes, padded))
}

/// The flags of a flow in a reply: there from OpenFlow 1.3 on.
fn reply_flags(flags: FlowModFlags, v: Version) -> u16 {
    if v < Version::Of13 {
        0
    } else {
        flags_to_wire(flags, v)
    }
}

/// Appends one flow's entry of a flow statistics reply.
fn put_flow_entry(
    out: &mut Vec<u8>,
    proto: Protocol,
    spec: &FlowSpec,
    st: &FlowStats,
    tlv: &TlvLens,
) -> Result<(), EncodeError> {
    let v = proto.version;
    crate::flow_mod::check_fits(proto, &spec.match_, true)?;
    let at = out.len();
    out.extend_from_slice(&[0, 0]);
    let times = |out: &mut Vec<u8>| {
        out.extend_from_slice(&spec.priority.to_be_bytes());
        out.extend_from_slice(&spec.idle_timeout.to_be_bytes());
        out.extend_from_slice(&spec.hard_timeout.to_be_bytes());
    };
    let counts = |out: &mut Vec<u8>| {
        out.extend_from_slice(&st.n_packets.to_be_bytes());
        out.extend_from_slice(&st.n_bytes.to_be_bytes());
    };
    if v == Version::Of15 {
        out.extend_from_slice(&[0, 0, spec.table, 0]);
        times(out);
        out.extend_from_slice(&reply_flags(spec.flags, v).to_be_bytes());
        out.extend_from_slice(&spec.importance.to_be_bytes());
        out.extend_from_slice(&spec.cookie.to_be_bytes());
        nxm::put_oxm_match(out, v, &spec.match_, tlv);
        put_oxs_stats(out, |out| {
            put_oxs(
                out,
                OXS_DURATION,
                &duration_bytes(st.duration_sec, st.duration_nsec),
            );
            if let Some(idle) = st.idle_age {
                put_oxs(out, OXS_IDLE_TIME, &duration_bytes(idle, 0));
            }
            put_oxs(out, OXS_PACKET_COUNT, &st.n_packets.to_be_bytes());
            put_oxs(out, OXS_BYTE_COUNT, &st.n_bytes.to_be_bytes());
        });
    } else if v > Version::Of10 {
        out.extend_from_slice(&[spec.table, 0]);
        out.extend_from_slice(&duration_bytes(st.duration_sec, st.duration_nsec));
        times(out);
        out.extend_from_slice(&reply_flags(spec.flags, v).to_be_bytes());
        let importance = if v >= Version::Of14 {
            spec.importance
        } else {
            0
        };
        out.extend_from_slice(&importance.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&spec.cookie.to_be_bytes());
        counts(out);
        put_ofp11_match(out, v, &spec.match_, tlv);
    } else if proto.nxm {
        out.extend_from_slice(&[spec.table, 0]);
        out.extend_from_slice(&duration_bytes(st.duration_sec, st.duration_nsec));
        times(out);
        let len_at = out.len();
        out.extend_from_slice(&[0, 0]);
        // Ages travel plus one, 0 meaning unknown.
        let age = |a: Option<u32>| a.map_or(0, |a| a.saturating_add(1).min(0xffff) as u16);
        out.extend_from_slice(&age(st.idle_age).to_be_bytes());
        out.extend_from_slice(&age(st.hard_age).to_be_bytes());
        out.extend_from_slice(&spec.cookie.to_be_bytes());
        counts(out);
        let n = nxm::put_nx_match(out, &spec.match_, 0, 0, tlv);
        out[len_at..len_at + 2].copy_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.extend_from_slice(&[spec.table, 0]);
        out.extend_from_slice(&match10::encode(&spec.match_));
        out.extend_from_slice(&duration_bytes(st.duration_sec, st.duration_nsec));
        times(out);
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&spec.cookie.to_be_bytes());
        counts(out);
    }
    actions::encode_instructions(v, &spec.actions, FlowCtx::of(&spec.match_), out)?;
    let len = u16::try_from(out.len() - at).map_err(|_| too_long(v))?;
    out[at..at + 2].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Appends the flow statistics reply for `flows`: as many messages as it takes, each but the
/// last flagged [`OFPSF_REPLY_MORE`].
pub fn encode_flow_stats_reply(
    flows: &[(FlowSpec, FlowStats)],
    proto: Protocol,
    xid: u32,
    tlv: &TlvLens,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut w = FlowStatsWriter::new(proto, xid, tlv, out);
    for (spec, st) in flows {
        w.push(spec, st)?;
    }
    w.finish()
}

/// A flow statistics reply appended one flow at a time, for a switch that walks its tables
/// without copying them out: as many messages as it takes, each but the last flagged
/// [`OFPSF_REPLY_MORE`] ([`encode_flow_stats_reply`] for flows at hand).
pub struct FlowStatsWriter<'a> {
    proto: Protocol,
    xid: u32,
    tlv: &'a TlvLens,
    out: &'a mut Vec<u8>,
    /// Where the message being filled starts.
    at: usize,
}

impl<'a> FlowStatsWriter<'a> {
    /// Starts the reply's first message.
    pub fn new(proto: Protocol, xid: u32, tlv: &'a TlvLens, out: &'a mut Vec<u8>) -> Self {
        let at = start_stats(out, proto, true, false, xid);
        FlowStatsWriter {
            proto,
            xid,
            tlv,
            out,
            at,
        }
    }

    /// Appends one flow, in a new message when the current one has no room for it.
    pub fn push(&mut self, spec: &FlowSpec, st: &FlowStats) -> Result<(), EncodeError> {
        let (proto, v) = (self.proto, self.proto.version);
        let out = &mut *self.out;
        let entry_at = out.len();
        put_flow_entry(out, proto, spec, st, self.tlv)?;
        if out.len() - self.at > MAX_MESSAGE_LEN {
            // Move the entry into a new part.
            if entry_at - self.at == stats_hdr_len(proto) + header::HEADER_LEN {
                return Err(too_long(v));
            }
            let entry = out.split_off(entry_at);
            let at = self.at;
            out[at + 10..at + 12].copy_from_slice(&OFPSF_REPLY_MORE.to_be_bytes());
            header::finish(out, at).map_err(|_| too_long(v))?;
            self.at = start_stats(out, proto, true, false, self.xid);
            out.extend_from_slice(&entry);
        }
        Ok(())
    }

    /// Ends the last message.
    pub fn finish(self) -> Result<(), EncodeError> {
        header::finish(self.out, self.at).map_err(|_| too_long(self.proto.version))
    }
}

/// Decodes a flow statistics reply: each flow with its statistics, and whether more parts
/// follow.
pub fn decode_flow_stats_reply(msg: &[u8]) -> Result<(Vec<(FlowSpec, FlowStats)>, bool), OfpErr> {
    let m = body(msg)?;
    let (proto, reply, aggregate, flags) = stats_kind(m)?;
    if !reply || aggregate {
        return Err(OfpErr::OfpbrcBadType);
    }
    let v = proto.version;
    let mut b = m.get(stats_hdr_len(proto)..).ok_or(OfpErr::OfpbrcBadLen)?;
    let mut flows = Vec::new();
    while !b.is_empty() {
        if b.len() < 2 {
            return Err(OfpErr::OfpbrcBadLen);
        }
        let len = usize::from(be16(b, 0));
        let min = match (v, proto.nxm) {
            (Version::Of15, _) => 24,
            (Version::Of10, false) => 88,
            _ => 48,
        };
        if len < min || len > b.len() {
            return Err(OfpErr::OfpbrcBadLen);
        }
        flows.push(decode_flow_entry(proto, &b[..len])?);
        b = &b[len..];
    }
    Ok((flows, flags & OFPSF_REPLY_MORE != 0))
}

fn decode_flow_entry(proto: Protocol, e: &[u8]) -> Result<(FlowSpec, FlowStats), OfpErr> {
    let v = proto.version;
    let mut spec = FlowSpec {
        has_actions: true,
        ..empty_spec()
    };
    let mut st = FlowStats::default();
    let acts = if v == Version::Of15 {
        spec.table = e[4];
        spec.priority = be16(e, 6);
        spec.idle_timeout = be16(e, 8);
        spec.hard_timeout = be16(e, 10);
        spec.flags = flags_from_wire(be16(e, 12), v)?;
        spec.importance = be16(e, 14);
        spec.cookie = be64(e, 16);
        let (m, used) = nxm::pull_oxm_match(&e[24..])?;
        spec.match_ = m;
        let (dur, idle, _, pkts, bytes, n) = pull_oxs_stats(&e[24 + used..])?;
        (st.duration_sec, st.duration_nsec) = dur;
        st.idle_age = idle;
        st.n_packets = pkts;
        st.n_bytes = bytes;
        &e[24 + used + n..]
    } else if v > Version::Of10 {
        spec.table = e[2];
        st.duration_sec = be32(e, 4);
        st.duration_nsec = be32(e, 8);
        spec.priority = be16(e, 12);
        spec.idle_timeout = be16(e, 14);
        spec.hard_timeout = be16(e, 16);
        if v >= Version::Of13 {
            spec.flags = flags_from_wire(be16(e, 18), v)?;
        }
        if v >= Version::Of14 {
            spec.importance = be16(e, 20);
        }
        spec.cookie = be64(e, 24);
        st.n_packets = be64(e, 32);
        st.n_bytes = be64(e, 40);
        let (m, used) = pull_ofp11_match(&e[48..])?;
        spec.match_ = m;
        &e[48 + used..]
    } else if proto.nxm {
        spec.table = e[2];
        st.duration_sec = be32(e, 4);
        st.duration_nsec = be32(e, 8);
        spec.priority = be16(e, 12);
        spec.idle_timeout = be16(e, 14);
        spec.hard_timeout = be16(e, 16);
        let match_len = usize::from(be16(e, 18));
        let age = |a: u16| a.checked_sub(1).map(u32::from);
        st.idle_age = age(be16(e, 20));
        st.hard_age = age(be16(e, 22));
        spec.cookie = be64(e, 24);
        st.n_packets = be64(e, 32);
        st.n_bytes = be64(e, 40);
        let (nm, used) = nxm::pull_nx_match(&e[48..], match_len, false)?;
        spec.match_ = nm.match_;
        &e[48 + used..]
    } else {
        spec.table = e[2];
        let mb: &[u8; OFP10_MATCH_LEN] = e[4..44].try_into().expect("40 bytes");
        spec.match_ = match10::decode_reported(mb);
        st.duration_sec = be32(e, 44);
        st.duration_nsec = be32(e, 48);
        spec.priority = be16(e, 52);
        spec.idle_timeout = be16(e, 54);
        spec.hard_timeout = be16(e, 56);
        spec.cookie = be64(e, 64);
        st.n_packets = be64(e, 72);
        st.n_bytes = be64(e, 80);
        &e[88..]
    };
    spec.actions = actions::decode_instructions(v, acts)?;
    Ok((spec, st))
}

/// Appends an aggregate statistics reply.
pub fn encode_aggregate_reply(
    agg: &AggregateStats,
    proto: Protocol,
    xid: u32,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let at = start_stats(out, proto, true, true, xid);
    if proto.version == Version::Of15 {
        put_oxs_stats(out, |out| {
            put_oxs(out, OXS_FLOW_COUNT, &agg.flow_count.to_be_bytes());
            put_oxs(out, OXS_PACKET_COUNT, &agg.packet_count.to_be_bytes());
            put_oxs(out, OXS_BYTE_COUNT, &agg.byte_count.to_be_bytes());
        });
    } else {
        out.extend_from_slice(&agg.packet_count.to_be_bytes());
        out.extend_from_slice(&agg.byte_count.to_be_bytes());
        out.extend_from_slice(&agg.flow_count.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
    }
    header::finish(out, at).map_err(|_| too_long(proto.version))
}

/// Decodes an aggregate statistics reply.
pub fn decode_aggregate_reply(msg: &[u8]) -> Result<AggregateStats, OfpErr> {
    let m = body(msg)?;
    let (proto, reply, aggregate, _) = stats_kind(m)?;
    if !reply || !aggregate {
        return Err(OfpErr::OfpbrcBadType);
    }
    let b = m.get(stats_hdr_len(proto)..).ok_or(OfpErr::OfpbrcBadLen)?;
    if proto.version == Version::Of15 {
        let (_, _, flow_count, packet_count, byte_count, _) = pull_oxs_stats(b)?;
        return Ok(AggregateStats {
            packet_count,
            byte_count,
            flow_count,
        });
    }
    if b.len() != 24 {
        return Err(OfpErr::OfpbrcBadLen);
    }
    Ok(AggregateStats {
        packet_count: be64(b, 0),
        byte_count: be64(b, 8),
        flow_count: be32(b, 16),
    })
}

#[cfg(test)]
mod tests;
