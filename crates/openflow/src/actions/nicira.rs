//! Nicira's extension actions (`NXAST_*`: vendor 0x2320, a 16-bit subtype after the vendor
//! id) and the ONF's `copy_field` for OpenFlow 1.3: the same bytes in every OpenFlow version.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};

use ofproto::fields::{FieldId, Subfield};
use ofproto::syntax::{
    Controller, Ct, CtZone, Nat, NatAddrs, NatKind, OFPP_IN_PORT, OfAction, PacketInReason,
    WriteForm,
};

use super::learn;
use super::standard::{
    check_output_port, is_mpls_ethertype, pull_set_field, pull_wide_tun_md, push_write,
    put_wide_tun_md,
};
use super::{EncodeError, FlowCtx, be16, be32, be64, decode_into, end_action, start_action};
use crate::error::OfpErr;
use crate::header::{NX_VENDOR_ID, ONF_VENDOR_ID, Version};
use crate::nxm::{self, OxmHeader};

const NXAST_RESUBMIT: u16 = 1;
const NXAST_SET_TUNNEL: u16 = 2;
const NXAST_SET_QUEUE: u16 = 4;
const NXAST_POP_QUEUE: u16 = 5;
const NXAST_REG_MOVE: u16 = 6;
const NXAST_REG_LOAD: u16 = 7;
const NXAST_NOTE: u16 = 8;
const NXAST_SET_TUNNEL64: u16 = 9;
const NXAST_RESUBMIT_TABLE: u16 = 14;
const NXAST_OUTPUT_REG: u16 = 15;
const NXAST_EXIT: u16 = 17;
const NXAST_DEC_TTL: u16 = 18;
const NXAST_FIN_TIMEOUT: u16 = 19;
const NXAST_CONTROLLER: u16 = 20;
const NXAST_DEC_TTL_CNT_IDS: u16 = 21;
const NXAST_WRITE_METADATA: u16 = 22;
const NXAST_PUSH_MPLS: u16 = 23;
const NXAST_POP_MPLS: u16 = 24;
const NXAST_SET_MPLS_TTL: u16 = 25;
const NXAST_DEC_MPLS_TTL: u16 = 26;
const NXAST_SET_MPLS_LABEL: u16 = 30;
const NXAST_SET_MPLS_TC: u16 = 31;
const NXAST_OUTPUT_REG2: u16 = 32;
const NXAST_REG_LOAD2: u16 = 33;
const NXAST_CT: u16 = 35;
const NXAST_NAT: u16 = 36;
const NXAST_CONTROLLER2: u16 = 37;
const NXAST_OUTPUT_TRUNC: u16 = 39;
const NXAST_GROUP: u16 = 40;
const NXAST_CLONE: u16 = 42;
const NXAST_CT_CLEAR: u16 = 43;
const NXAST_RESUBMIT_TABLE_CT: u16 = 44;
/// `encap(...)`, `decap(...)`: OpenFlow 1.3+ only.
const NXAST_ENCAP: u16 = 46;
const NXAST_DECAP: u16 = 47;
/// OVS's test actions, which its switch takes only with `--enable-dummy` (see
/// [`enable_debug_actions`]).
const NXAST_DEBUG_SLOW: u16 = 254;
const NXAST_DEBUG_RECIRC: u16 = 255;
/// `ONFACT_RAW13_COPY_FIELD`.
const ONFACT_COPY_FIELD: u16 = 3200;

const NX_CT_F_COMMIT: u16 = 1;
const NX_CT_F_FORCE: u16 = 2;
const NX_CT_RECIRC_NONE: u8 = 0xff;

const NX_NAT_F_SRC: u16 = 1;
const NX_NAT_F_DST: u16 = 2;
const NX_NAT_F_PERSISTENT: u16 = 4;
const NX_NAT_F_PROTO_HASH: u16 = 8;
const NX_NAT_F_PROTO_RANDOM: u16 = 16;
const NX_NAT_RANGE_IPV4_MIN: u16 = 1;
const NX_NAT_RANGE_IPV4_MAX: u16 = 2;
const NX_NAT_RANGE_IPV6_MIN: u16 = 4;
const NX_NAT_RANGE_IPV6_MAX: u16 = 8;
const NX_NAT_RANGE_PROTO_MIN: u16 = 16;
const NX_NAT_RANGE_PROTO_MAX: u16 = 32;

const NXAC2PT_MAX_LEN: u16 = 0;
const NXAC2PT_CONTROLLER_ID: u16 = 1;
const NXAC2PT_REASON: u16 = 2;
const NXAC2PT_USERDATA: u16 = 3;
const NXAC2PT_PAUSE: u16 = 4;
const NXAC2PT_METER_ID: u16 = 5;

/// The packet-in reasons by number (`OFPR_*`).
const REASONS: [PacketInReason; 6] = [
    PacketInReason::NoMatch,
    PacketInReason::Action,
    PacketInReason::InvalidTtl,
    PacketInReason::ActionSet,
    PacketInReason::Group,
    PacketInReason::PacketOut,
];

fn need(b: &[u8], len: usize) -> Result<(), OfpErr> {
    if b.len() == len {
        Ok(())
    } else {
        Err(OfpErr::OfpbacBadLen)
    }
}

fn at_least(b: &[u8], len: usize) -> Result<(), OfpErr> {
    if b.len() >= len {
        Ok(())
    } else {
        Err(OfpErr::OfpbacBadLen)
    }
}

/// `ofs_nbits`: the offset in the high 10 bits, the width minus one in the low 6.
fn ofs_nbits(ofs: u32, n_bits: u32) -> u16 {
    ((ofs << 6) | (n_bits - 1)) as u16
}

/// The field a 32-bit NXM header names in an action, with OVS's error when it names none.
/// An unknown one is `OFPBAC_BAD_SET_TYPE` where OVS reads a bare 32-bit header (`reg_load`,
/// `output_reg`, `ct`'s zone) and `OFPBMC_BAD_FIELD` where it pulls one from a stream (`move`,
/// `output_reg2`), which must also not be masked (`OFPBMC_BAD_MASK`).
pub(super) fn header_field(b: &[u8], at: usize, pulled: bool) -> Result<(FieldId, usize), OfpErr> {
    let hdr = OxmHeader::parse(&b[at..]).map_err(|_| OfpErr::OfpbacBadLen)?;
    let unknown = if pulled {
        OfpErr::OfpbmcBadField
    } else {
        OfpErr::OfpbacBadSetType
    };
    let fh = nxm::field_by_header(&hdr).ok_or(unknown)?;
    // A header pulled from a stream may not be masked; a bare one's mask bit is ignored.
    if pulled && hdr.hasmask {
        return Err(OfpErr::OfpbmcBadMask);
    }
    Ok((fh.field, hdr.header_len()))
}

/// A subfield from a field and a bit range, checked against the field's width as OVS's
/// `mf_check_src()` does (`OFPBAC_BAD_SET_LEN`).
pub(super) fn subfield(field: FieldId, ofs: u32, n_bits: u32) -> Result<Subfield, OfpErr> {
    if n_bits == 0 || ofs + n_bits > field.field().n_bits {
        return Err(OfpErr::OfpbacBadSetLen);
    }
    Ok(Subfield { field, ofs, n_bits })
}

/// `NXAST_ENCAP`: a header size (ignored: 0 is "not specified" and nothing else is used),
/// the new packet type, then properties, none of which the headers flowpath encapsulates
/// take (OVS's `decode_NXAST_RAW_ENCAP()`). OVS's `encap(nsh)` is refused as a header type
/// not supported.
fn decode_encap(b: &[u8]) -> Result<OfAction, OfpErr> {
    use ofproto::syntax::packet_type::{ETHERNET, MPLS, MPLS_MC};
    if b.len() < 16 {
        return Err(OfpErr::OfpbacBadLen);
    }
    let pt = be32(b, 12);
    if !matches!(pt, ETHERNET | MPLS | MPLS_MC) {
        return Err(OfpErr::NxbacBadHeaderType);
    }
    if let Some(prop) = b.get(16..).filter(|p| !p.is_empty()) {
        // class (2), type (1), length (1, without the padding to 8).
        let len = prop.get(3).map_or(0, |&l| usize::from(l));
        if len < 4 || len.next_multiple_of(8) > prop.len() {
            return Err(OfpErr::OfpbacBadLen);
        }
        return Err(OfpErr::NxbacUnknownEdProp);
    }
    Ok(OfAction::Encap(pt))
}

/// A destination subfield: in range and writable (OVS's `mf_check_dst()`).
pub(super) fn dst_subfield(field: FieldId, ofs: u32, n_bits: u32) -> Result<Subfield, OfpErr> {
    let sf = subfield(field, ofs, n_bits)?;
    if !field.field().writable {
        return Err(OfpErr::OfpbacBadSetArgument);
    }
    Ok(sf)
}

/// Whether the switch takes OVS's test actions (`debug_recirc`, `debug_slow`) from a
/// controller; else they are refused with `OFPBAC_BAD_VENDOR_TYPE`, as OVS refuses them when
/// not started with `--enable-dummy`.
static DEBUG_ACTIONS: AtomicBool = AtomicBool::new(false);

/// Lets the switch take OVS's test actions (`debug_recirc`, `debug_slow`) from a controller
/// (OVS's `ofpact_dummy_enable()`, done by `--enable-dummy`).
pub fn enable_debug_actions() {
    DEBUG_ACTIONS.store(true, Ordering::Relaxed);
}

/// Whether a vendor action is one the pipeline models.
pub(super) fn known(version: Version, vendor: u32, subtype: u16) -> bool {
    if vendor == ONF_VENDOR_ID {
        return subtype == ONFACT_COPY_FIELD && version == Version::Of13;
    }
    match subtype {
        // Nicira forms of what OpenFlow 1.1 made standard: OpenFlow 1.0 only.
        NXAST_SET_QUEUE | NXAST_DEC_TTL | NXAST_PUSH_MPLS | NXAST_POP_MPLS | NXAST_SET_MPLS_TTL
        | NXAST_DEC_MPLS_TTL | NXAST_SET_MPLS_LABEL | NXAST_SET_MPLS_TC | NXAST_GROUP => {
            version == Version::Of10
        }
        // What OpenFlow 1.5's Set-Field and copy_field replace: up to 1.4.
        NXAST_REG_MOVE | NXAST_REG_LOAD | NXAST_REG_LOAD2 => version <= Version::Of14,
        NXAST_RESUBMIT
        | NXAST_SET_TUNNEL
        | NXAST_POP_QUEUE
        | NXAST_NOTE
        | NXAST_SET_TUNNEL64
        | NXAST_RESUBMIT_TABLE
        | NXAST_OUTPUT_REG
        | NXAST_EXIT
        | NXAST_FIN_TIMEOUT
        | NXAST_CONTROLLER
        | NXAST_DEC_TTL_CNT_IDS
        | NXAST_WRITE_METADATA
        | NXAST_OUTPUT_REG2
        | NXAST_CT
        | NXAST_NAT
        | NXAST_CONTROLLER2
        | NXAST_OUTPUT_TRUNC
        | NXAST_CLONE
        | NXAST_CT_CLEAR
        | NXAST_RESUBMIT_TABLE_CT
        | NXAST_DEBUG_RECIRC
        | NXAST_DEBUG_SLOW
        | learn::NXAST_LEARN
        | learn::NXAST_CONJUNCTION
        | learn::NXAST_LEARN2 => true,
        NXAST_ENCAP | NXAST_DECAP => version >= Version::Of13,
        super::stack::NXAST_STACK_PUSH | super::stack::NXAST_STACK_POP => true,
        super::check_pkt_larger::NXAST_CHECK_PKT_LARGER => true,
        super::multipath::NXAST_MULTIPATH => true,
        super::bundle::NXAST_BUNDLE | super::bundle::NXAST_BUNDLE_LOAD => true,
        super::sample::NXAST_SAMPLE
        | super::sample::NXAST_SAMPLE2
        | super::sample::NXAST_SAMPLE3 => true,
        _ => false,
    }
}

/// Decodes one vendor action (NX or ONF; framing and vendor checked).
pub(super) fn decode(
    version: Version,
    b: &[u8],
    depth: usize,
    out: &mut Vec<OfAction>,
) -> Result<(), OfpErr> {
    let vendor = be32(b, 4);
    let subtype = be16(b, 8);
    if vendor == ONF_VENDOR_ID {
        return if subtype == ONFACT_COPY_FIELD && version == Version::Of13 {
            decode_copy_field(b, 10, 16, out)
        } else {
            Err(OfpErr::OfpbacBadVendorType)
        };
    }
    let a = match subtype {
        NXAST_RESUBMIT => {
            need(b, 16)?;
            resubmit(be16(b, 10), 0xff, false)
        }
        NXAST_RESUBMIT_TABLE | NXAST_RESUBMIT_TABLE_CT => {
            need(b, 16)?;
            if b[13..16] != [0, 0, 0] {
                return Err(OfpErr::OfpbacBadArgument);
            }
            resubmit(be16(b, 10), b[12], subtype == NXAST_RESUBMIT_TABLE_CT)
        }
        NXAST_SET_TUNNEL => {
            need(b, 16)?;
            OfAction::SetTunnel {
                id: be32(b, 12).into(),
                tun64: false,
            }
        }
        NXAST_SET_TUNNEL64 => {
            need(b, 24)?;
            OfAction::SetTunnel {
                id: be64(b, 16),
                tun64: true,
            }
        }
        NXAST_SET_QUEUE => {
            need(b, 16)?;
            OfAction::SetQueue(be32(b, 12))
        }
        NXAST_POP_QUEUE => {
            need(b, 16)?;
            OfAction::PopQueue
        }
        NXAST_REG_MOVE => {
            at_least(b, 24)?;
            return decode_move(b, be16(b, 10), be16(b, 12), be16(b, 14), 16, out);
        }
        NXAST_REG_LOAD => {
            need(b, 24)?;
            let on = be16(b, 10);
            let (field, _) = header_field(b, 12, false)?;
            let sf = dst_subfield(field, u32::from(on >> 6), u32::from(on & 0x3f) + 1)?;
            let v = u128::from(be64(b, 16));
            if sf.n_bits < 64 && v >> sf.n_bits != 0 {
                return Err(OfpErr::OfpbacBadArgument);
            }
            return {
                super::push_set_field(out, field, v << sf.ofs, sf.mask());
                Ok(())
            };
        }
        NXAST_REG_LOAD2 => {
            at_least(b, 16)?;
            if let Some(a) = pull_wide_tun_md(b, false) {
                out.push(a);
                return Ok(());
            }
            let (field, value, mask) = pull_set_field(b, false, true)?;
            push_write(out, field, value, mask, WriteForm::Load2);
            return Ok(());
        }
        NXAST_NOTE => {
            at_least(b, 16)?;
            OfAction::Note(b[10..].to_vec())
        }
        NXAST_OUTPUT_REG | NXAST_OUTPUT_REG2 => {
            let (on, field, max_len) = if subtype == NXAST_OUTPUT_REG {
                need(b, 24)?;
                if b[18..24].iter().any(|&x| x != 0) {
                    return Err(OfpErr::OfpbacBadArgument);
                }
                (be16(b, 10), header_field(b, 12, false)?.0, be16(b, 16))
            } else {
                need(b, 24)?;
                let (field, n) = header_field(b, 14, true)?;
                if b[14 + n..].iter().any(|&x| x != 0) {
                    return Err(OfpErr::NxbrcMustBeZero);
                }
                (be16(b, 10), field, be16(b, 12))
            };
            let src = subfield(field, u32::from(on >> 6), u32::from(on & 0x3f) + 1)?;
            OfAction::OutputReg { src, max_len }
        }
        NXAST_EXIT => {
            need(b, 16)?;
            OfAction::Exit
        }
        NXAST_DEC_TTL => {
            need(b, 16)?;
            OfAction::DecTtl(None)
        }
        NXAST_DEC_TTL_CNT_IDS => {
            at_least(b, 16)?;
            let n = usize::from(be16(b, 10));
            if b[12..16] != [0; 4] {
                return Err(OfpErr::NxbrcMustBeZero);
            }
            if 16 + 2 * n > b.len() {
                return Err(OfpErr::OfpbacBadLen);
            }
            OfAction::DecTtl(Some((0..n).map(|i| be16(b, 16 + 2 * i)).collect()))
        }
        NXAST_FIN_TIMEOUT => {
            need(b, 16)?;
            OfAction::FinTimeout {
                idle: be16(b, 10),
                hard: be16(b, 12),
            }
        }
        NXAST_CONTROLLER => {
            need(b, 16)?;
            let reason = *REASONS
                .get(usize::from(b[14]))
                .ok_or(OfpErr::OfpbacBadArgument)?;
            controller(Controller {
                max_len: be16(b, 10),
                reason,
                id: be16(b, 12),
                userdata: Vec::new(),
                pause: false,
                meter_id: None,
            })
        }
        NXAST_CONTROLLER2 => decode_controller2(b)?,
        NXAST_WRITE_METADATA => {
            need(b, 32)?;
            if b[10..16].iter().any(|&x| x != 0) {
                return Err(OfpErr::NxbrcMustBeZero);
            }
            OfAction::WriteMetadata {
                value: be64(b, 16),
                mask: be64(b, 24),
            }
        }
        NXAST_ENCAP => decode_encap(b)?,
        NXAST_DECAP => {
            // No decap property is defined.
            if b.len() > 16 {
                return Err(OfpErr::NxbacUnknownEdProp);
            }
            need(b, 16)?;
            OfAction::Decap(be32(b, 12))
        }
        NXAST_PUSH_MPLS => {
            need(b, 16)?;
            let t = be16(b, 10);
            if !is_mpls_ethertype(t) {
                return Err(OfpErr::OfpbacBadArgument);
            }
            OfAction::PushMpls(t)
        }
        NXAST_POP_MPLS => {
            need(b, 16)?;
            OfAction::PopMpls(be16(b, 10))
        }
        NXAST_SET_MPLS_TTL => {
            need(b, 16)?;
            OfAction::SetMplsTtl(b[10])
        }
        NXAST_DEC_MPLS_TTL => {
            need(b, 16)?;
            OfAction::DecMplsTtl
        }
        NXAST_SET_MPLS_LABEL => {
            need(b, 16)?;
            let label = be32(b, 12);
            if label > 0xf_ffff {
                return Err(OfpErr::OfpbacBadArgument);
            }
            OfAction::SetMplsLabel(label)
        }
        NXAST_SET_MPLS_TC => {
            need(b, 16)?;
            if b[10] > 7 {
                return Err(OfpErr::OfpbacBadArgument);
            }
            OfAction::SetMplsTc(b[10])
        }
        NXAST_GROUP => {
            need(b, 16)?;
            OfAction::Group(be32(b, 12))
        }
        NXAST_OUTPUT_TRUNC => {
            need(b, 16)?;
            // Less than an Ethernet header is no truncation OVS accepts.
            let max_len = be32(b, 12);
            if max_len < 14 {
                return Err(OfpErr::OfpbacBadArgument);
            }
            OfAction::OutputTrunc {
                port: check_output_port(be16(b, 10).into())?,
                max_len,
            }
        }
        NXAST_CT => decode_ct(version, b, depth)?,
        NXAST_NAT => decode_nat(b)?,
        NXAST_CLONE => {
            at_least(b, 16)?;
            let mut inner = Vec::new();
            decode_into(version, &b[16..], depth + 1, &mut inner)?;
            super::verify_nesting(&inner, super::Outer::Clone)?;
            OfAction::Clone(inner)
        }
        NXAST_CT_CLEAR => {
            need(b, 16)?;
            OfAction::CtClear
        }
        NXAST_DEBUG_RECIRC | NXAST_DEBUG_SLOW => {
            if !DEBUG_ACTIONS.load(Ordering::Relaxed) {
                return Err(OfpErr::OfpbacBadVendorType);
            }
            need(b, 16)?;
            if subtype == NXAST_DEBUG_RECIRC {
                OfAction::DebugRecirc
            } else {
                OfAction::DebugSlow
            }
        }
        learn::NXAST_CONJUNCTION => learn::decode_conjunction(b)?,
        learn::NXAST_LEARN | learn::NXAST_LEARN2 => {
            learn::decode_learn(b, subtype == learn::NXAST_LEARN2)?
        }
        super::stack::NXAST_STACK_PUSH | super::stack::NXAST_STACK_POP => {
            super::stack::decode(b, subtype)?
        }
        super::check_pkt_larger::NXAST_CHECK_PKT_LARGER => super::check_pkt_larger::decode(b)?,
        super::multipath::NXAST_MULTIPATH => super::multipath::decode(b)?,
        super::bundle::NXAST_BUNDLE | super::bundle::NXAST_BUNDLE_LOAD => {
            super::bundle::decode(b, subtype)?
        }
        super::sample::NXAST_SAMPLE
        | super::sample::NXAST_SAMPLE2
        | super::sample::NXAST_SAMPLE3 => super::sample::decode(b, subtype)?,
        _ => return Err(OfpErr::OfpbacBadVendorType),
    };
    out.push(a);
    Ok(())
}

fn resubmit(port: u16, table: u8, ct: bool) -> OfAction {
    let port = u32::from(port);
    OfAction::Resubmit {
        port: (port != OFPP_IN_PORT).then_some(port),
        table: (table != 0xff).then_some(table),
        ct,
    }
}

/// A `controller` with only the defaults is `output:CONTROLLER`, as the text syntax has it.
fn controller(c: Controller) -> OfAction {
    if c.reason == PacketInReason::Action
        && c.id == 0
        && c.userdata.is_empty()
        && !c.pause
        && c.meter_id.is_none()
    {
        OfAction::Output {
            port: ofproto::syntax::OFPP_CONTROLLER,
            max_len: c.max_len,
        }
    } else {
        OfAction::Controller(c)
    }
}

fn decode_controller2(b: &[u8]) -> Result<OfAction, OfpErr> {
    at_least(b, 16)?;
    if b[10..16].iter().any(|&x| x != 0) {
        return Err(OfpErr::NxbrcMustBeZero);
    }
    let mut c = Controller::default();
    let mut p = &b[16..];
    while p.len() >= 4 {
        let (ty, len) = (be16(p, 0), usize::from(be16(p, 2)));
        if len < 4 || len > p.len() {
            return Err(OfpErr::OfpbpcBadLen);
        }
        let v = &p[4..len];
        let fixed = |n: usize| {
            if v.len() == n {
                Ok(())
            } else {
                Err(OfpErr::OfpbpcBadLen)
            }
        };
        match ty {
            NXAC2PT_MAX_LEN => {
                fixed(2)?;
                c.max_len = be16(v, 0);
            }
            NXAC2PT_CONTROLLER_ID => {
                fixed(2)?;
                c.id = be16(v, 0);
            }
            NXAC2PT_REASON => {
                fixed(1)?;
                c.reason = *REASONS
                    .get(usize::from(v[0]))
                    .ok_or(OfpErr::OfpbpcBadValue)?;
            }
            NXAC2PT_USERDATA => c.userdata = v.to_vec(),
            NXAC2PT_PAUSE => c.pause = true,
            NXAC2PT_METER_ID => {
                fixed(4)?;
                c.meter_id = Some(be32(v, 0));
            }
            _ => return Err(OfpErr::OfpbpcBadType),
        }
        p = &p[len.next_multiple_of(8).min(p.len())..];
    }
    Ok(controller(c))
}

/// `move`: `NXAST_REG_MOVE` (`n_bits`, `src_ofs`, `dst_ofs`, then the two headers at
/// `hdrs`), and the copy-field actions of OpenFlow 1.3 (ONF) and 1.5 with the same meaning.
fn decode_move(
    b: &[u8],
    n_bits: u16,
    src_ofs: u16,
    dst_ofs: u16,
    hdrs: usize,
    out: &mut Vec<OfAction>,
) -> Result<(), OfpErr> {
    if hdrs + 4 > b.len() {
        return Err(OfpErr::OfpbacBadLen);
    }
    let (sf, n) = header_field(b, hdrs, true)?;
    if hdrs + n + 4 > b.len() {
        return Err(OfpErr::OfpbacBadLen);
    }
    let (df, m) = header_field(b, hdrs + n, true)?;
    if b[hdrs + n + m..].iter().any(|&x| x != 0) {
        return Err(OfpErr::NxbrcMustBeZero);
    }
    let n = u32::from(n_bits);
    let src = subfield(sf, src_ofs.into(), n)?;
    let dst = dst_subfield(df, dst_ofs.into(), n)?;
    out.push(OfAction::RegMove { src, dst });
    Ok(())
}

/// `OFPAT15_COPY_FIELD` and `ONFACT_RAW13_COPY_FIELD`: `n_bits`, `src_offset`, `dst_offset`
/// at `at`, the headers at `hdrs`.
pub(super) fn decode_copy_field(
    b: &[u8],
    at: usize,
    hdrs: usize,
    out: &mut Vec<OfAction>,
) -> Result<(), OfpErr> {
    at_least(b, hdrs + 8)?;
    decode_move(b, be16(b, at), be16(b, at + 2), be16(b, at + 4), hdrs, out)
}

fn decode_ct(version: Version, b: &[u8], depth: usize) -> Result<OfAction, OfpErr> {
    at_least(b, 24)?;
    // OVS ignores flags it does not know; force needs commit.
    let flags = be16(b, 10);
    if flags & NX_CT_F_FORCE != 0 && flags & NX_CT_F_COMMIT == 0 {
        return Err(OfpErr::OfpbacBadArgument);
    }
    let zone = if be32(b, 12) != 0 {
        let (f, _) = header_field(b, 12, false)?;
        let on = be16(b, 16);
        let zone = subfield(f, u32::from(on >> 6), u32::from(on & 0x3f) + 1)?;
        // A zone is 16 bits.
        if zone.n_bits != 16 {
            return Err(OfpErr::OfpbacBadSetLen);
        }
        CtZone::Field(zone)
    } else {
        CtZone::Imm(be16(b, 16))
    };
    let table = b[18];
    let mut actions = Vec::new();
    decode_into(version, &b[24..], depth + 1, &mut actions)?;
    super::verify_nesting(&actions, super::Outer::Ct)?;
    // Without commit, only a nat without arguments.
    let commit = flags & NX_CT_F_COMMIT != 0;
    if !commit && actions.iter().any(|a| *a != OfAction::Nat(Nat::default())) {
        return Err(OfpErr::OfpbacBadArgument);
    }
    Ok(OfAction::Ct(Ct {
        commit: flags & NX_CT_F_COMMIT != 0,
        force: flags & NX_CT_F_FORCE != 0,
        table: (table != NX_CT_RECIRC_NONE).then_some(table),
        zone,
        alg: be16(b, 22),
        actions,
    }))
}

fn decode_nat(b: &[u8]) -> Result<OfAction, OfpErr> {
    at_least(b, 16)?;
    let flags = be16(b, 12);
    let present = be16(b, 14);
    let known = NX_NAT_F_SRC
        | NX_NAT_F_DST
        | NX_NAT_F_PERSISTENT
        | NX_NAT_F_PROTO_HASH
        | NX_NAT_F_PROTO_RANDOM;
    let both = |a: u16, c: u16| flags & a != 0 && flags & c != 0;
    if flags & !known != 0
        || both(NX_NAT_F_SRC, NX_NAT_F_DST)
        || both(NX_NAT_F_PROTO_HASH, NX_NAT_F_PROTO_RANDOM)
    {
        return Err(OfpErr::OfpbacBadArgument);
    }
    let mut opts = &b[16..];
    let mut take = |n: usize| -> Result<&[u8], OfpErr> {
        if opts.len() < n {
            return Err(OfpErr::OfpbacBadArgument);
        }
        let (h, t) = opts.split_at(n);
        opts = t;
        Ok(h)
    };
    let has = |bit: u16| present & bit != 0;
    let addrs = if has(NX_NAT_RANGE_IPV4_MIN) {
        if has(NX_NAT_RANGE_IPV6_MIN) || has(NX_NAT_RANGE_IPV6_MAX) {
            return Err(OfpErr::OfpbacBadArgument);
        }
        let lo = be32(take(4)?, 0);
        if lo == 0 {
            return Err(OfpErr::OfpbacBadArgument);
        }
        let hi = if has(NX_NAT_RANGE_IPV4_MAX) {
            be32(take(4)?, 0)
        } else {
            lo
        };
        if hi < lo {
            return Err(OfpErr::OfpbacBadArgument);
        }
        Some(NatAddrs::V4(Ipv4Addr::from(lo), Ipv4Addr::from(hi)))
    } else if has(NX_NAT_RANGE_IPV4_MAX) {
        return Err(OfpErr::OfpbacBadArgument);
    } else if has(NX_NAT_RANGE_IPV6_MIN) {
        let lo = u128::from_be_bytes(take(16)?.try_into().expect("16 bytes"));
        if lo == 0 {
            return Err(OfpErr::OfpbacBadArgument);
        }
        let hi = if has(NX_NAT_RANGE_IPV6_MAX) {
            u128::from_be_bytes(take(16)?.try_into().expect("16 bytes"))
        } else {
            lo
        };
        if hi < lo {
            return Err(OfpErr::OfpbacBadArgument);
        }
        Some(NatAddrs::V6(Ipv6Addr::from(lo), Ipv6Addr::from(hi)))
    } else if has(NX_NAT_RANGE_IPV6_MAX) {
        return Err(OfpErr::OfpbacBadArgument);
    } else {
        None
    };
    let ports = if has(NX_NAT_RANGE_PROTO_MIN) {
        if addrs.is_none() {
            return Err(OfpErr::OfpbacBadArgument);
        }
        let lo = be16(take(2)?, 0);
        if lo == 0 {
            return Err(OfpErr::OfpbacBadArgument);
        }
        let hi = if has(NX_NAT_RANGE_PROTO_MAX) {
            be16(take(2)?, 0)
        } else {
            lo
        };
        if hi < lo {
            return Err(OfpErr::OfpbacBadArgument);
        }
        Some((lo, hi))
    } else if has(NX_NAT_RANGE_PROTO_MAX) {
        return Err(OfpErr::OfpbacBadArgument);
    } else {
        None
    };
    let kind = if flags & NX_NAT_F_SRC != 0 {
        Some(NatKind::Src)
    } else if flags & NX_NAT_F_DST != 0 {
        Some(NatKind::Dst)
    } else {
        None
    };
    Ok(OfAction::Nat(Nat {
        kind,
        addrs,
        ports,
        persistent: flags & NX_NAT_F_PERSISTENT != 0,
        hash: flags & NX_NAT_F_PROTO_HASH != 0,
        random: flags & NX_NAT_F_PROTO_RANDOM != 0,
    }))
}

/// Begins a Nicira action with subtype `subtype`: its 10-byte header.
fn start_nx(out: &mut Vec<u8>, subtype: u16) -> usize {
    let at = start_action(out, super::OFPAT_VENDOR);
    out.extend_from_slice(&NX_VENDOR_ID.to_be_bytes());
    out.extend_from_slice(&subtype.to_be_bytes());
    at
}

/// A whole Nicira action: header, `pad` zero bytes, then `body`, padded.
pub(super) fn put_nx(out: &mut Vec<u8>, subtype: u16, pad: usize, body: &[u8]) {
    let at = start_nx(out, subtype);
    out.resize(out.len() + pad, 0);
    out.extend_from_slice(body);
    end_action(out, at);
}

/// Appends the header naming `field` in an extension action (its NXM header, or its OXM one
/// when it has none, as OVS's `nx_put_mff_header()`); `action` names the action that cannot
/// be encoded otherwise.
pub(super) fn put_field_header(
    version: Version,
    field: FieldId,
    action: &'static str,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    nxm::bare_header(field, 0)
        .ok_or_else(|| super::unencodable(action, version))?
        .write(out);
    Ok(())
}

/// The 32-bit NXM header of a field (the NXM one when it has both).
fn nxm_header(field: FieldId) -> Option<[u8; 4]> {
    let mut h = Vec::with_capacity(4);
    nxm::bare_header(field, 0)?.write(&mut h);
    h.try_into().ok()
}

/// Appends the Nicira encoding of `a`.
pub(super) fn encode(
    version: Version,
    a: &OfAction,
    flow: FlowCtx,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    match a {
        OfAction::Resubmit { port, table, ct } => {
            let p = port.unwrap_or(OFPP_IN_PORT) as u16;
            // OVS sends the table form even without a table (NXAST_RESUBMIT only echoes a
            // flow that came in that way).
            let sub = if *ct {
                NXAST_RESUBMIT_TABLE_CT
            } else {
                NXAST_RESUBMIT_TABLE
            };
            let mut body = p.to_be_bytes().to_vec();
            body.push(table.unwrap_or(0xff));
            put_nx(out, sub, 0, &body);
        }
        // OpenFlow 1.0 has no goto_table; OVS sends resubmit(,N), which is what it means there.
        OfAction::GotoTable(t) => {
            let mut body = (OFPP_IN_PORT as u16).to_be_bytes().to_vec();
            body.push(*t);
            put_nx(out, NXAST_RESUBMIT_TABLE, 0, &body);
        }
        OfAction::SetTunnel { id, tun64 } => {
            if *tun64 || *id > u64::from(u32::MAX) {
                put_nx(out, NXAST_SET_TUNNEL64, 6, &id.to_be_bytes());
            } else {
                put_nx(out, NXAST_SET_TUNNEL, 2, &(*id as u32).to_be_bytes());
            }
        }
        OfAction::SetQueue(q) => put_nx(out, NXAST_SET_QUEUE, 2, &q.to_be_bytes()),
        OfAction::PopQueue => put_nx(out, NXAST_POP_QUEUE, 0, &[]),
        OfAction::RegMove { src, dst } => encode_move(version, src, dst, out),
        OfAction::SetField {
            field,
            value,
            mask,
            form,
        } => encode_load(*field, *value, *mask, *form == WriteForm::Load2, out),
        OfAction::SetTunMetadata { field, value } => {
            let at = start_nx(out, NXAST_REG_LOAD2);
            put_wide_tun_md(0, *field, value, out);
            end_action(out, at);
        }
        OfAction::Note(n) => put_nx(out, NXAST_NOTE, 0, n),
        OfAction::OutputReg { src, max_len } => {
            let h = nxm_header(src.field).ok_or_else(|| super::unencodable("output", version))?;
            let mut body = ofs_nbits(src.ofs, src.n_bits).to_be_bytes().to_vec();
            body.extend_from_slice(&h);
            body.extend_from_slice(&max_len.to_be_bytes());
            body.extend_from_slice(&[0; 6]);
            put_nx(out, NXAST_OUTPUT_REG, 0, &body);
        }
        OfAction::Exit => put_nx(out, NXAST_EXIT, 0, &[]),
        OfAction::DecTtl(None) => put_nx(out, NXAST_DEC_TTL, 0, &[]),
        OfAction::DecTtl(Some(ids)) => {
            let mut body = (ids.len() as u16).to_be_bytes().to_vec();
            body.extend_from_slice(&[0; 4]);
            ids.iter()
                .for_each(|i| body.extend_from_slice(&i.to_be_bytes()));
            put_nx(out, NXAST_DEC_TTL_CNT_IDS, 0, &body);
        }
        OfAction::FinTimeout { idle, hard } => {
            let mut body = idle.to_be_bytes().to_vec();
            body.extend_from_slice(&hard.to_be_bytes());
            put_nx(out, NXAST_FIN_TIMEOUT, 0, &body);
        }
        OfAction::Controller(c) => encode_controller(c, out),
        OfAction::WriteMetadata { value, mask } => {
            let mut body = value.to_be_bytes().to_vec();
            body.extend_from_slice(&mask.to_be_bytes());
            put_nx(out, NXAST_WRITE_METADATA, 6, &body);
        }
        OfAction::PushMpls(t) => put_nx(out, NXAST_PUSH_MPLS, 0, &t.to_be_bytes()),
        OfAction::PopMpls(t) => put_nx(out, NXAST_POP_MPLS, 0, &t.to_be_bytes()),
        OfAction::SetMplsTtl(t) => put_nx(out, NXAST_SET_MPLS_TTL, 0, &[*t]),
        OfAction::DecMplsTtl => put_nx(out, NXAST_DEC_MPLS_TTL, 0, &[]),
        OfAction::SetMplsLabel(l) => put_nx(out, NXAST_SET_MPLS_LABEL, 2, &l.to_be_bytes()),
        OfAction::SetMplsTc(t) => put_nx(out, NXAST_SET_MPLS_TC, 0, &[*t]),
        OfAction::Group(g) => put_nx(out, NXAST_GROUP, 2, &g.to_be_bytes()),
        OfAction::OutputTrunc { port, max_len } => {
            let mut body = (*port as u16).to_be_bytes().to_vec();
            body.extend_from_slice(&max_len.to_be_bytes());
            put_nx(out, NXAST_OUTPUT_TRUNC, 0, &body);
        }
        OfAction::Ct(ct) => encode_ct(version, ct, flow, out)?,
        OfAction::Nat(n) => encode_nat(n, out),
        OfAction::Clone(inner) => {
            let at = start_nx(out, NXAST_CLONE);
            out.extend_from_slice(&[0; 6]);
            super::encode_actions(version, inner, flow, out)?;
            end_action(out, at);
        }
        OfAction::CtClear => put_nx(out, NXAST_CT_CLEAR, 0, &[]),
        OfAction::Encap(_) | OfAction::Decap(_) if version < Version::Of13 => {
            let name = if matches!(a, OfAction::Encap(_)) {
                "encap"
            } else {
                "decap"
            };
            return Err(super::unencodable(name, version));
        }
        // Header size 0: "not specified", as ovs-ofctl sends it.
        OfAction::Encap(pt) => put_nx(out, NXAST_ENCAP, 2, &pt.to_be_bytes()),
        OfAction::Decap(pt) => put_nx(out, NXAST_DECAP, 2, &pt.to_be_bytes()),
        OfAction::DebugRecirc => put_nx(out, NXAST_DEBUG_RECIRC, 0, &[]),
        OfAction::DebugSlow => put_nx(out, NXAST_DEBUG_SLOW, 0, &[]),
        // OpenFlow 1.0 has no meters: OVS leaves the instruction out of what it sends.
        OfAction::Meter(_) if version == Version::Of10 => {}
        OfAction::Meter(_) => return Err(super::unencodable("meter", version)),
        OfAction::Conjunction {
            id,
            clause,
            n_clauses,
        } => put_nx(
            out,
            learn::NXAST_CONJUNCTION,
            0,
            &learn::conjunction_body(*id, *clause, *n_clauses),
        ),
        OfAction::Learn(l) => {
            let (subtype, body) =
                learn::learn_body(l).ok_or_else(|| super::unencodable("learn", version))?;
            put_nx(out, subtype, 0, &body);
        }
        OfAction::StackPush(sf) => {
            super::stack::encode(version, super::stack::NXAST_STACK_PUSH, sf, out)?
        }
        OfAction::StackPop(sf) => {
            super::stack::encode(version, super::stack::NXAST_STACK_POP, sf, out)?
        }
        OfAction::CheckPktLarger { pkt_len, dst } => {
            super::check_pkt_larger::encode(version, *pkt_len, dst, out)?
        }
        OfAction::Sample(s) => super::sample::encode(s, out),
        OfAction::Multipath(m) => super::multipath::encode(version, m, out)?,
        OfAction::Bundle(bd) => super::bundle::encode(version, bd, out)?,
        _ => return Err(super::unencodable("action", version)),
    }
    Ok(())
}

fn encode_move(version: Version, src: &Subfield, dst: &Subfield, out: &mut Vec<u8>) {
    if version >= Version::Of15 {
        let at = start_action(out, 28);
        out.extend_from_slice(&(dst.n_bits as u16).to_be_bytes());
        out.extend_from_slice(&(src.ofs as u16).to_be_bytes());
        out.extend_from_slice(&(dst.ofs as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        for f in [src.field, dst.field] {
            if let Some(h) = nxm::bare_header(f, version.wire()) {
                h.write(out);
            }
        }
        end_action(out, at);
    } else {
        let at = start_nx(out, NXAST_REG_MOVE);
        out.extend_from_slice(&(dst.n_bits as u16).to_be_bytes());
        out.extend_from_slice(&(src.ofs as u16).to_be_bytes());
        out.extend_from_slice(&(dst.ofs as u16).to_be_bytes());
        for f in [src.field, dst.field] {
            if let Some(h) = nxm::bare_header(f, 0) {
                h.write(out);
            }
        }
        end_action(out, at);
    }
}

/// A masked write as OVS's `set_field_to_nxast()`: one `NXAST_REG_LOAD` per run of mask bits
/// (at most 64 each) for a field with a 32-bit NXM header, else (or when it came as one,
/// `load2`) one `NXAST_REG_LOAD2` (an OXM entry with its mask).
fn encode_load(field: FieldId, value: u128, mask: u128, load2: bool, out: &mut Vec<u8>) {
    let fh = nxm::field_header(field, 0);
    let simple =
        !load2 && fh.is_some_and(|fh| fh.width != 0 && fh.id.class != nxm::OFPXMC_EXPERIMENTER);
    match nxm_header(field) {
        Some(h) if simple => {
            let mut segments = Vec::new();
            super::push_set_field(&mut segments, field, value, mask);
            for s in segments {
                let OfAction::SetField { value, mask, .. } = s else {
                    continue;
                };
                let (ofs, n) = (mask.trailing_zeros(), mask.count_ones());
                let mut body = ofs_nbits(ofs, n).to_be_bytes().to_vec();
                body.extend_from_slice(&h);
                body.extend_from_slice(&((value >> ofs) as u64).to_be_bytes());
                put_nx(out, NXAST_REG_LOAD, 0, &body);
            }
        }
        _ => {
            let at = start_nx(out, NXAST_REG_LOAD2);
            super::standard::put_oxm_entry(0, field, value & mask, mask, out);
            end_action(out, at);
        }
    }
}

fn encode_controller(c: &Controller, out: &mut Vec<u8>) {
    let reason = REASONS.iter().position(|r| *r == c.reason).unwrap_or(1) as u8;
    if c.userdata.is_empty() && !c.pause && c.meter_id.is_none() {
        let mut body = c.max_len.to_be_bytes().to_vec();
        body.extend_from_slice(&c.id.to_be_bytes());
        body.push(reason);
        put_nx(out, NXAST_CONTROLLER, 0, &body);
        return;
    }
    let at = start_nx(out, NXAST_CONTROLLER2);
    out.extend_from_slice(&[0; 6]);
    let prop = |out: &mut Vec<u8>, ty: u16, v: &[u8]| {
        let p = out.len();
        out.extend_from_slice(&ty.to_be_bytes());
        out.extend_from_slice(&((4 + v.len()) as u16).to_be_bytes());
        out.extend_from_slice(v);
        out.resize(p + (4 + v.len()).next_multiple_of(8), 0);
    };
    if c.max_len != u16::MAX {
        prop(out, NXAC2PT_MAX_LEN, &c.max_len.to_be_bytes());
    }
    if c.id != 0 {
        prop(out, NXAC2PT_CONTROLLER_ID, &c.id.to_be_bytes());
    }
    if c.reason != PacketInReason::Action {
        prop(out, NXAC2PT_REASON, &[reason]);
    }
    if !c.userdata.is_empty() {
        prop(out, NXAC2PT_USERDATA, &c.userdata);
    }
    if c.pause {
        prop(out, NXAC2PT_PAUSE, &[]);
    }
    if let Some(m) = c.meter_id {
        prop(out, NXAC2PT_METER_ID, &m.to_be_bytes());
    }
    end_action(out, at);
}

fn encode_ct(
    version: Version,
    ct: &Ct,
    flow: FlowCtx,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let at = start_nx(out, NXAST_CT);
    let flags =
        if ct.commit { NX_CT_F_COMMIT } else { 0 } | if ct.force { NX_CT_F_FORCE } else { 0 };
    out.extend_from_slice(&flags.to_be_bytes());
    match ct.zone {
        CtZone::Imm(z) => {
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(&z.to_be_bytes());
        }
        CtZone::Field(sf) => {
            out.extend_from_slice(&nxm_header(sf.field).unwrap_or([0; 4]));
            out.extend_from_slice(&ofs_nbits(sf.ofs, sf.n_bits).to_be_bytes());
        }
    }
    out.push(ct.table.unwrap_or(NX_CT_RECIRC_NONE));
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&ct.alg.to_be_bytes());
    // Inside ct, writes are Set-Field from OpenFlow 1.2 on and loads before, as elsewhere.
    super::encode_actions(version, &ct.actions, flow, out)?;
    end_action(out, at);
    Ok(())
}

fn encode_nat(n: &Nat, out: &mut Vec<u8>) {
    let at = start_nx(out, NXAST_NAT);
    let mut flags = match n.kind {
        Some(NatKind::Src) => NX_NAT_F_SRC,
        Some(NatKind::Dst) => NX_NAT_F_DST,
        None => 0,
    };
    for (on, bit) in [
        (n.persistent, NX_NAT_F_PERSISTENT),
        (n.hash, NX_NAT_F_PROTO_HASH),
        (n.random, NX_NAT_F_PROTO_RANDOM),
    ] {
        if on {
            flags |= bit;
        }
    }
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&flags.to_be_bytes());
    let present_at = out.len();
    out.extend_from_slice(&[0, 0]);
    let mut present = 0u16;
    match n.addrs {
        Some(NatAddrs::V4(lo, hi)) => {
            out.extend_from_slice(&lo.octets());
            present |= NX_NAT_RANGE_IPV4_MIN;
            if hi != lo {
                out.extend_from_slice(&hi.octets());
                present |= NX_NAT_RANGE_IPV4_MAX;
            }
        }
        Some(NatAddrs::V6(lo, hi)) => {
            out.extend_from_slice(&lo.octets());
            present |= NX_NAT_RANGE_IPV6_MIN;
            if hi != lo {
                out.extend_from_slice(&hi.octets());
                present |= NX_NAT_RANGE_IPV6_MAX;
            }
        }
        None => {}
    }
    if let (Some((lo, hi)), Some(_)) = (n.ports, n.addrs) {
        out.extend_from_slice(&lo.to_be_bytes());
        present |= NX_NAT_RANGE_PROTO_MIN;
        if hi != lo {
            out.extend_from_slice(&hi.to_be_bytes());
            present |= NX_NAT_RANGE_PROTO_MAX;
        }
    }
    out[present_at..present_at + 2].copy_from_slice(&present.to_be_bytes());
    end_action(out, at);
}
