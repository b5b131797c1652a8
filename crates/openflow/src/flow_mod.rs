//! Flow table modification messages: OpenFlow 1.0's `OFPT_FLOW_MOD` (fixed match), Nicira's
//! `NXT_FLOW_MOD` (NXM match, OpenFlow 1.0 with extensions), OpenFlow 1.2+'s `OFPT_FLOW_MOD`
//! (OXM match and instructions), and `NXT_FLOW_MOD_TABLE_ID`, which lets an OpenFlow 1.0
//! flow_mod carry a table id in the high byte of its command. Each maps to and from a
//! [`FlowMod`]: the command and the pipeline's [`FlowSpec`], as OVS's
//! `ofputil_decode_flow_mod()` and `ofputil_encode_flow_mod()` do.
//!
//! OpenFlow 1.1 carries its fixed `ofp11_match` ([`crate::match11`]); later versions OXM.

use crate::be::{be16, be32, be64};
use ofproto::pipekey::PipeMatch;
use ofproto::syntax::{FlowModFlags, FlowSpec, OFPP_ANY};

use crate::actions::{self, EncodeError, FlowCtx};
use crate::error::OfpErr;
use crate::header::{self, HEADER_LEN, NX_VENDOR_ID, OFPT_EXPERIMENTER, Version};
use crate::match10::{self, OFP10_MATCH_LEN};
use crate::match11;
use crate::nxm::{self, TlvLens, port_from_ofp11, port_to_ofp11};

/// `OFPT_FLOW_MOD`, in every version.
pub const OFPT_FLOW_MOD: u8 = 14;
/// `NXT_FLOW_MOD`: Nicira's flow_mod with an NXM match.
pub const NXT_FLOW_MOD: u32 = 13;
/// `NXT_FLOW_MOD_TABLE_ID`: turns the table id in OpenFlow 1.0 flow_mod commands on or off.
pub const NXT_FLOW_MOD_TABLE_ID: u32 = 15;

/// `OFP_NO_BUFFER`: the flow_mod releases no buffered packet.
pub const NO_BUFFER: u32 = 0xffff_ffff;
/// `OFPTT_ALL`: every table (delete and modify).
pub const OFPTT_ALL: u8 = 0xff;
/// `OFPG_ANY`: no output-group filter.
pub const OFPG_ANY: u32 = 0xffff_ffff;

/// OpenFlow 1.0's "no port" (`OFPP_NONE`), the out_port of a flow_mod that filters nothing.
const OFPP10_NONE: u16 = 0xffff;

/// What a flow_mod does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FlowModCommand {
    /// `OFPFC_ADD`.
    Add = 0,
    /// `OFPFC_MODIFY`.
    Modify = 1,
    /// `OFPFC_MODIFY_STRICT`.
    ModifyStrict = 2,
    /// `OFPFC_DELETE`.
    Delete = 3,
    /// `OFPFC_DELETE_STRICT`.
    DeleteStrict = 4,
}

impl FlowModCommand {
    fn from_wire(c: u8) -> Result<FlowModCommand, OfpErr> {
        Ok(match c {
            0 => FlowModCommand::Add,
            1 => FlowModCommand::Modify,
            2 => FlowModCommand::ModifyStrict,
            3 => FlowModCommand::Delete,
            4 => FlowModCommand::DeleteStrict,
            _ => return Err(OfpErr::OfpfmfcBadCommand),
        })
    }

    fn is_delete(self) -> bool {
        matches!(self, FlowModCommand::Delete | FlowModCommand::DeleteStrict)
    }

    fn is_modify(self) -> bool {
        matches!(self, FlowModCommand::Modify | FlowModCommand::ModifyStrict)
    }
}

/// A flow_mod: its command, the flow, and the buffered packet it releases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMod {
    pub command: FlowModCommand,
    /// The flow: for [`FlowModCommand::Add`] the cookie is the new flow's; for the others a
    /// non-zero `cookie_mask` selects flows by cookie, else `cookie` is the one modified flows
    /// get.
    pub spec: FlowSpec,
    /// The buffered packet to run through the flow ([`NO_BUFFER`] for none).
    pub buffer_id: u32,
}

/// How flows travel on a connection: the OpenFlow version and, for OpenFlow 1.0, whether NXM
/// is in use (`NXT_SET_FLOW_FORMAT`) and whether commands carry a table id
/// (`NXT_FLOW_MOD_TABLE_ID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protocol {
    pub version: Version,
    /// OpenFlow 1.0 only: NXM matches (`NXT_FLOW_MOD`) instead of the fixed match.
    pub nxm: bool,
    /// OpenFlow 1.0 only: the command's high byte is the table id.
    pub table_id: bool,
}

impl Protocol {
    /// `version` with its own match; OpenFlow 1.0 without extensions.
    pub fn new(version: Version) -> Protocol {
        Protocol {
            version,
            nxm: false,
            table_id: false,
        }
    }
}

/// The flow_mod flags and their wire bits: `send_flow_rem` 1 and `check_overlap` 2 everywhere,
/// `reset_counts` 4 from 1.2 on, `no_packet_counts` 8 and `no_byte_counts` 16 from 1.3 on
/// (OVS's `ofputil_encode_flow_mod_flags()`).
const FLAG_BITS: [(u16, u16, Version); 5] = [
    (FlowModFlags::SEND_FLOW_REM, 1, Version::Of10),
    (FlowModFlags::CHECK_OVERLAP, 2, Version::Of10),
    (FlowModFlags::RESET_COUNTS, 4, Version::Of12),
    (FlowModFlags::NO_PKT_COUNTS, 8, Version::Of13),
    (FlowModFlags::NO_BYT_COUNTS, 16, Version::Of13),
];

/// The flags as `version` carries them.
pub(crate) fn flags_to_wire(flags: FlowModFlags, version: Version) -> u16 {
    FLAG_BITS
        .iter()
        .filter(|(flag, _, since)| flags.0 & flag != 0 && version >= *since)
        .fold(0, |w, (_, bit, _)| w | bit)
}

/// The flags of a flow_mod, `OFPFMFC_BAD_FLAGS` for bits the version does not define.
pub(crate) fn flags_from_wire(w: u16, version: Version) -> Result<FlowModFlags, OfpErr> {
    let mut f = 0;
    let mut known = 0;
    for (flag, bit, since) in FLAG_BITS {
        if version >= since {
            known |= bit;
            if w & bit != 0 {
                f |= flag;
            }
        }
    }
    if w & !known != 0 {
        return Err(OfpErr::OfpfmfcBadFlags);
    }
    Ok(FlowModFlags(f))
}

/// The cookie a flow_mod header carries as the new cookie (OVS's `new_cookie`): the flow's
/// cookie, or for a modify that selects by cookie all ones ("leave it"), for a delete 0.
fn new_cookie(fm: &FlowMod) -> u64 {
    let s = &fm.spec;
    match fm.command {
        FlowModCommand::Add => s.cookie,
        _ if s.cookie_mask == 0 => s.cookie,
        c if c.is_modify() => u64::MAX,
        _ => 0,
    }
}

/// Appends the flow_mod `fm` for `proto`, with transaction id `xid`; an error when the
/// protocol's match or actions cannot carry the flow (then NXM or a later version is needed).
pub fn encode_flow_mod(
    fm: &FlowMod,
    proto: Protocol,
    xid: u32,
    tlv: &TlvLens,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let s = &fm.spec;
    let v = proto.version;
    check_fits(proto, &s.match_, false)?;
    let flow = FlowCtx::of(&s.match_);
    let flags = flags_to_wire(s.flags, v);
    let start;
    if v == Version::Of10 {
        let command = tid_command(fm, proto);
        let out_port = s.out_port.map_or(OFPP10_NONE, |p| p as u16);
        if proto.nxm {
            start = header::start(out, v.wire(), OFPT_EXPERIMENTER, xid);
            out.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
            out.extend_from_slice(&NXT_FLOW_MOD.to_be_bytes());
            out.extend_from_slice(&new_cookie(fm).to_be_bytes());
            out.extend_from_slice(&command.to_be_bytes());
            put_times(out, s);
            out.extend_from_slice(&fm.buffer_id.to_be_bytes());
            out.extend_from_slice(&out_port.to_be_bytes());
            out.extend_from_slice(&flags.to_be_bytes());
            let len_at = out.len();
            out.extend_from_slice(&[0; 8]);
            let n = nxm::put_nx_match(out, &s.match_, s.cookie, s.cookie_mask, tlv);
            out[len_at..len_at + 2].copy_from_slice(&(n as u16).to_be_bytes());
        } else {
            start = header::start(out, v.wire(), OFPT_FLOW_MOD, xid);
            out.extend_from_slice(&match10::encode(&s.match_));
            out.extend_from_slice(&new_cookie(fm).to_be_bytes());
            out.extend_from_slice(&command.to_be_bytes());
            put_times(out, s);
            out.extend_from_slice(&fm.buffer_id.to_be_bytes());
            out.extend_from_slice(&out_port.to_be_bytes());
            out.extend_from_slice(&flags.to_be_bytes());
        }
    } else {
        start = header::start(out, v.wire(), OFPT_FLOW_MOD, xid);
        let (cookie, mask) = if fm.command == FlowModCommand::Add || s.cookie_mask == 0 {
            (new_cookie(fm), s.cookie_mask)
        } else {
            (s.cookie & s.cookie_mask, s.cookie_mask)
        };
        out.extend_from_slice(&cookie.to_be_bytes());
        out.extend_from_slice(&mask.to_be_bytes());
        // Modify to "all tables" goes as table 0, as OVS sends it (and delete too in 1.1).
        let table = if s.table != OFPTT_ALL || (fm.command.is_delete() && v != Version::Of11) {
            s.table
        } else {
            0
        };
        out.push(table);
        out.push(fm.command as u8);
        put_times(out, s);
        out.extend_from_slice(&fm.buffer_id.to_be_bytes());
        let out_port = s.out_port.map_or(OFPP_ANY as u16, |p| p as u16);
        out.extend_from_slice(&(port_to_ofp11(out_port) as u32).to_be_bytes());
        out.extend_from_slice(&s.out_group.unwrap_or(OFPG_ANY).to_be_bytes());
        out.extend_from_slice(&flags.to_be_bytes());
        let importance = if v >= Version::Of14 && fm.command == FlowModCommand::Add {
            s.importance
        } else {
            0
        };
        out.extend_from_slice(&importance.to_be_bytes());
        put_ofp11_match(out, v, &s.match_, tlv);
    }
    if s.has_actions || fm.command == FlowModCommand::Add {
        actions::encode_instructions(v, &s.actions, flow, out)?;
    }
    header::finish(out, start).map_err(|_| EncodeError {
        action: "flow_mod",
        version: v.number(),
    })
}

/// OpenFlow 1.0's command word: the table id in the high byte when the connection enabled it.
fn tid_command(fm: &FlowMod, proto: Protocol) -> u16 {
    let c = fm.command as u16;
    if proto.table_id {
        c | (u16::from(fm.spec.table) << 8)
    } else {
        c
    }
}

fn put_times(out: &mut Vec<u8>, s: &FlowSpec) {
    out.extend_from_slice(&s.idle_timeout.to_be_bytes());
    out.extend_from_slice(&s.hard_timeout.to_be_bytes());
    out.extend_from_slice(&s.priority.to_be_bytes());
}

/// Whether `msg` (header included) is a Nicira vendor message of subtype `subtype`.
pub fn is_nx_msg(msg: &[u8], subtype: u32) -> bool {
    msg.len() >= 16
        && msg[1] == OFPT_EXPERIMENTER
        && be32(msg, 8) == NX_VENDOR_ID
        && be32(msg, 12) == subtype
}

/// The message's bytes as its header's length says; `OFPBRC_BAD_LEN` when they are not there.
pub(crate) fn body(msg: &[u8]) -> Result<&[u8], OfpErr> {
    let h = header::Header::parse(msg).ok_or(OfpErr::OfpbrcBadLen)?;
    msg.get(..usize::from(h.length))
        .filter(|m| m.len() >= HEADER_LEN)
        .ok_or(OfpErr::OfpbrcBadLen)
}

/// Decodes a flow_mod (`OFPT_FLOW_MOD` of any version, or `NXT_FLOW_MOD`), header included.
/// `table_id` is whether the connection enabled `NXT_FLOW_MOD_TABLE_ID` (OpenFlow 1.0). The
/// checks come in OVS's order: the table, the match, the command, the actions, the flags.
pub fn decode_flow_mod(msg: &[u8], table_id: bool) -> Result<FlowMod, OfpErr> {
    let m = body(msg)?;
    let v = Version::from_wire(m[0]).ok_or(OfpErr::OfpbrcBadVersion)?;
    // The message itself: a flow_mod of its version, its fixed part whole, the rest in 8-byte
    // units (OVS's `ofpraw` checks, before anything in it is read).
    let nx = v == Version::Of10 && m[1] == OFPT_EXPERIMENTER;
    if nx {
        if m.len() < 16 {
            return Err(OfpErr::OfpbrcBadLen);
        }
        if be32(m, 8) != NX_VENDOR_ID {
            return Err(OfpErr::OfpbrcBadVendor);
        }
        if be32(m, 12) != NXT_FLOW_MOD {
            return Err(OfpErr::OfpbrcBadSubtype);
        }
    } else if m[1] != OFPT_FLOW_MOD {
        return Err(OfpErr::OfpbrcBadType);
    }
    let fixed = match (v, nx) {
        (Version::Of10, true) => 48,
        (Version::Of10, false) => 72,
        _ => 48,
    };
    if m.len() < fixed || !(m.len() - fixed).is_multiple_of(8) {
        return Err(OfpErr::OfpbrcBadLen);
    }
    let mut spec = empty_spec();
    let (raw_command, raw_flags, buffer_id, acts);
    if v == Version::Of10 {
        let at = if nx { 16 } else { 48 };
        let new_cookie = be64(m, at);
        let raw = be16(m, at + 8);
        spec.idle_timeout = be16(m, at + 10);
        spec.hard_timeout = be16(m, at + 12);
        spec.priority = be16(m, at + 14);
        buffer_id = be32(m, at + 16);
        let out_port = be16(m, at + 20);
        raw_flags = be16(m, at + 22);
        if nx {
            let (nm, used) = nxm::pull_nx_match(&m[48..], usize::from(be16(m, 40)), true)?;
            // A flow being added may set a cookie, not match one.
            if raw & 0xff == FlowModCommand::Add as u16 && nm.cookie_mask != 0 {
                return Err(OfpErr::NxbrcNxmInvalid);
            }
            spec.match_ = nm.match_;
            spec.cookie = nm.cookie;
            spec.cookie_mask = nm.cookie_mask;
            acts = &m[48 + used..];
        } else {
            let b: &[u8; OFP10_MATCH_LEN] = m[8..48].try_into().expect("40 bytes");
            spec.match_ = match10::decode(b);
            // OpenFlow 1.0 gives an exact-match rule the highest priority, whatever it says.
            if be32(m, 8) & match10::OFPFW10_ALL == 0 {
                spec.priority = u16::MAX;
            }
            acts = &m[72..];
        }
        if spec.cookie_mask == 0 && new_cookie != u64::MAX {
            spec.cookie = new_cookie;
        }
        // A modify's cookie field is the cookie the rules it changes get (all ones: none),
        // as OVS's `ofputil_decode_flow_mod()` reads OpenFlow 1.0 and NXM.
        if matches!(raw & 0xff, 1 | 2) && new_cookie != u64::MAX {
            spec.new_cookie = Some(new_cookie);
            spec.modify_cookie = true;
        }
        // Without table ids a command word above 0xff is no command at all.
        raw_command = if table_id { raw & 0xff } else { raw };
        let delete = matches!(raw_command, 3 | 4);
        spec.table = if table_id {
            (raw >> 8) as u8
        } else if raw_command == FlowModCommand::Add as u16 {
            0
        } else {
            OFPTT_ALL
        };
        if delete && out_port != OFPP10_NONE {
            spec.out_port = Some(out_port.into());
        }
    } else {
        let (pm, used) = pull_ofp11_match(&m[48..])?;
        spec.match_ = pm;
        acts = &m[48 + used..];
        let (cookie, mask) = (be64(m, 8), be64(m, 16));
        raw_command = m[25].into();
        spec.table = m[24];
        // OpenFlow 1.1 forbids "all tables" outright, later versions outside deletes.
        let delete = matches!(m[25], 3 | 4);
        if spec.table == OFPTT_ALL && (v == Version::Of11 || !delete) {
            return Err(OfpErr::OfpfmfcBadTableId);
        }
        spec.idle_timeout = be16(m, 26);
        spec.hard_timeout = be16(m, 28);
        spec.priority = be16(m, 30);
        buffer_id = be32(m, 32);
        let out_port = port_from_ofp11(be32(m, 36)).ok_or(OfpErr::OfpbacBadOutPort)?;
        let out_group = be32(m, 40);
        raw_flags = be16(m, 44);
        let add = m[25] == FlowModCommand::Add as u8;
        if v >= Version::Of14 && add {
            spec.importance = be16(m, 46);
        }
        spec.cookie = cookie;
        if !add {
            spec.cookie_mask = mask;
        }
        // In OpenFlow 1.1 only, a modify that matches no cookie adds the flow, with the
        // cookie, when it selects none; later versions change no cookie and add nothing.
        if v == Version::Of11 && matches!(m[25], 1 | 2) && mask == 0 {
            spec.new_cookie = Some(cookie);
        }
        if delete {
            if u32::from(out_port) != OFPP_ANY {
                spec.out_port = Some(out_port.into());
            }
            if out_group != OFPG_ANY {
                spec.out_group = Some(out_group);
            }
        }
    }
    if !nxm::ct_tuple_consistent(&spec.match_) {
        return Err(OfpErr::OfpbacMatchInconsistent);
    }
    let command = FlowModCommand::from_wire(u8::try_from(raw_command).unwrap_or(u8::MAX))?;
    spec.actions = actions::decode_instructions(v, acts)?;
    // OpenFlow 1.0's OFPFF_EMERG (4) is a known flag, but emergency flows are not supported,
    // as in OVS.
    let emerg = if v == Version::Of10 { raw_flags & 4 } else { 0 };
    spec.flags = flags_from_wire(raw_flags & !emerg, v)?;
    if emerg != 0 {
        return Err(if spec.idle_timeout != 0 || spec.hard_timeout != 0 {
            OfpErr::OfpfmfcBadEmergTimeout
        } else {
            OfpErr::OfpfmfcTableFull
        });
    }
    actions::check_actions(v, spec.table, &spec.actions, &spec.match_)?;
    spec.has_actions = !command.is_delete();
    Ok(FlowMod {
        command,
        spec,
        buffer_id,
    })
}

/// A flow with nothing set, to fill in from a message.
pub(crate) fn empty_spec() -> FlowSpec {
    FlowSpec::empty()
}

/// Whether `proto`'s match can carry `m`: OpenFlow 1.0 without NXM and 1.1 have fixed matches
/// that cannot say everything ([`match10::fits`], [`match11::fits`]); NXM and OXM can. A
/// switch `reporting` a flow (statistics, flow removed) only needs the bits carried.
pub(crate) fn check_fits(
    proto: Protocol,
    m: &PipeMatch,
    reporting: bool,
) -> Result<(), EncodeError> {
    let fits = match (proto.version, proto.nxm) {
        (Version::Of10, false) if reporting => match10::carries(m),
        (Version::Of10, false) => match10::fits(m),
        (Version::Of11, _) => match11::fits(m),
        _ => true,
    };
    if fits {
        Ok(())
    } else {
        Err(EncodeError {
            action: "match",
            version: proto.version.number(),
        })
    }
}

/// Appends the match of an OpenFlow 1.1+ message: OpenFlow 1.1's fixed match, else OXM.
pub(crate) fn put_ofp11_match(out: &mut Vec<u8>, v: Version, m: &PipeMatch, tlv: &TlvLens) {
    if v == Version::Of11 {
        out.extend_from_slice(&match11::encode(m));
    } else {
        nxm::put_oxm_match(out, v, m, tlv);
    }
}

/// Reads the `ofp_match` of an OpenFlow 1.1+ message, of either type (`OFPMT_STANDARD` or
/// `OFPMT_OXM`), as OVS accepts both; returns it and the bytes it takes.
pub(crate) fn pull_ofp11_match(b: &[u8]) -> Result<(PipeMatch, usize), OfpErr> {
    match b.get(..2) {
        Some([0, 0]) => Ok((match11::decode(b)?, match11::OFP11_MATCH_LEN)),
        _ => nxm::pull_oxm_match(b),
    }
}

/// Appends `NXT_FLOW_MOD_TABLE_ID` (OpenFlow 1.0): `enable` turns table ids in flow_mod
/// commands on.
pub fn encode_flow_mod_table_id(enable: bool, xid: u32, out: &mut Vec<u8>) {
    let at = header::start(out, Version::Of10.wire(), OFPT_EXPERIMENTER, xid);
    out.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
    out.extend_from_slice(&NXT_FLOW_MOD_TABLE_ID.to_be_bytes());
    out.push(u8::from(enable));
    out.extend_from_slice(&[0; 7]);
    let _ = header::finish(out, at);
}

/// Decodes `NXT_FLOW_MOD_TABLE_ID`: whether table ids are turned on.
pub fn decode_flow_mod_table_id(msg: &[u8]) -> Result<bool, OfpErr> {
    let m = body(msg)?;
    if m.len() != 24 {
        return Err(OfpErr::OfpbrcBadLen);
    }
    Ok(m[16] != 0)
}

#[cfg(test)]
mod tests;
