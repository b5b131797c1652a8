//! The standard OpenFlow actions: OpenFlow 1.0's numbering (`OFPAT10_*`), OpenFlow 1.1+'s
//! (`OFPAT11_*`), and Set-Field (`OFPAT12_SET_FIELD`), `copy_field` and `meter` (1.5).

use std::net::Ipv4Addr;

use flow::EthAddr;
use ofproto::fields::{FieldId, ones};
use ofproto::syntax::{OFPP_IN_PORT, OFPP_LOCAL, OFPP_MAX, OfAction, WriteForm};

use super::{EncodeError, FlowCtx, be16, be32, end_action, start_action};
use crate::be::be_n;
use crate::error::OfpErr;
use crate::header::Version;
use crate::nxm::{self, OxmHeader, port_from_ofp11, port_to_ofp11};

// OpenFlow 1.0 action types.
const OFPAT10_OUTPUT: u16 = 0;
const OFPAT10_SET_VLAN_VID: u16 = 1;
const OFPAT10_SET_VLAN_PCP: u16 = 2;
const OFPAT10_STRIP_VLAN: u16 = 3;
const OFPAT10_SET_DL_SRC: u16 = 4;
const OFPAT10_SET_DL_DST: u16 = 5;
const OFPAT10_SET_NW_SRC: u16 = 6;
const OFPAT10_SET_NW_DST: u16 = 7;
const OFPAT10_SET_NW_TOS: u16 = 8;
const OFPAT10_SET_TP_SRC: u16 = 9;
const OFPAT10_SET_TP_DST: u16 = 10;
const OFPAT10_ENQUEUE: u16 = 11;

// OpenFlow 1.1+ action types.
const OFPAT11_OUTPUT: u16 = 0;
const OFPAT11_SET_VLAN_VID: u16 = 1;
const OFPAT11_SET_VLAN_PCP: u16 = 2;
const OFPAT11_SET_DL_SRC: u16 = 3;
const OFPAT11_SET_DL_DST: u16 = 4;
const OFPAT11_SET_NW_SRC: u16 = 5;
const OFPAT11_SET_NW_DST: u16 = 6;
const OFPAT11_SET_NW_TOS: u16 = 7;
const OFPAT11_SET_NW_ECN: u16 = 8;
const OFPAT11_SET_TP_SRC: u16 = 9;
const OFPAT11_SET_TP_DST: u16 = 10;
const OFPAT11_SET_MPLS_LABEL: u16 = 13;
const OFPAT11_SET_MPLS_TC: u16 = 14;
const OFPAT11_SET_MPLS_TTL: u16 = 15;
const OFPAT11_DEC_MPLS_TTL: u16 = 16;
const OFPAT11_PUSH_VLAN: u16 = 17;
const OFPAT11_POP_VLAN: u16 = 18;
const OFPAT11_PUSH_MPLS: u16 = 19;
const OFPAT11_POP_MPLS: u16 = 20;
const OFPAT11_SET_QUEUE: u16 = 21;
const OFPAT11_GROUP: u16 = 22;
const OFPAT11_SET_NW_TTL: u16 = 23;
const OFPAT11_DEC_NW_TTL: u16 = 24;
const OFPAT12_SET_FIELD: u16 = 25;
const OFPAT15_COPY_FIELD: u16 = 28;
const OFPAT15_METER: u16 = 29;

const ETH_TYPE_VLAN_8021Q: u16 = 0x8100;

fn need(body: &[u8], len: usize) -> Result<(), OfpErr> {
    if body.len() == len {
        Ok(())
    } else {
        Err(OfpErr::OfpbacBadLen)
    }
}

fn eth(b: &[u8], i: usize) -> EthAddr {
    EthAddr(b[i..i + 6].try_into().expect("6 bytes"))
}

/// OVS's `ofpact_check_output_port()` for an OpenFlow 1.0 port number.
pub(super) fn check_output_port(port: u32) -> Result<u32, OfpErr> {
    if port < OFPP_MAX || (OFPP_IN_PORT..=OFPP_LOCAL).contains(&port) {
        Ok(port)
    } else {
        Err(OfpErr::OfpbacBadOutPort)
    }
}

fn is_vlan_ethertype(t: u16) -> bool {
    t == ETH_TYPE_VLAN_8021Q || t == 0x88a8
}

pub(super) fn is_mpls_ethertype(t: u16) -> bool {
    t == 0x8847 || t == 0x8848
}

/// Whether `ty` is an action type of `version` that the pipeline models.
pub(super) fn known(version: Version, ty: u16) -> bool {
    match version {
        Version::Of10 => ty <= OFPAT10_ENQUEUE,
        _ => {
            matches!(ty, OFPAT11_OUTPUT..=OFPAT11_SET_TP_DST | OFPAT11_SET_MPLS_LABEL..=OFPAT11_DEC_NW_TTL)
                || (ty == OFPAT12_SET_FIELD && version >= Version::Of12)
                || (matches!(ty, OFPAT15_COPY_FIELD | OFPAT15_METER) && version >= Version::Of15)
        }
    }
}

/// Decodes one standard action of type `ty` (its framing checked) into `out`.
pub(super) fn decode(
    version: Version,
    ty: u16,
    b: &[u8],
    out: &mut Vec<OfAction>,
) -> Result<(), OfpErr> {
    if version == Version::Of10 {
        decode10(ty, b, out)
    } else {
        decode11(version, ty, b, out)
    }
}

fn decode10(ty: u16, b: &[u8], out: &mut Vec<OfAction>) -> Result<(), OfpErr> {
    let a = match ty {
        OFPAT10_OUTPUT => {
            need(b, 8)?;
            OfAction::Output {
                port: check_output_port(be16(b, 4).into())?,
                max_len: be16(b, 6),
            }
        }
        OFPAT10_SET_VLAN_VID => {
            need(b, 8)?;
            let vid = be16(b, 4);
            if vid > 0x0fff {
                return Err(OfpErr::OfpbacBadArgument);
            }
            OfAction::SetVlanVid(vid)
        }
        OFPAT10_SET_VLAN_PCP => {
            need(b, 8)?;
            if b[4] > 7 {
                return Err(OfpErr::OfpbacBadArgument);
            }
            OfAction::SetVlanPcp(b[4])
        }
        OFPAT10_STRIP_VLAN => {
            need(b, 8)?;
            OfAction::StripVlan
        }
        OFPAT10_SET_DL_SRC | OFPAT10_SET_DL_DST => {
            return decode_dl(ty == OFPAT10_SET_DL_SRC, b, out);
        }
        OFPAT10_SET_NW_SRC | OFPAT10_SET_NW_DST => {
            return decode_nw(ty == OFPAT10_SET_NW_SRC, b, out);
        }
        OFPAT10_SET_NW_TOS => return decode_tos(b, out),
        OFPAT10_SET_TP_SRC | OFPAT10_SET_TP_DST => {
            return decode_tp(ty == OFPAT10_SET_TP_SRC, b, out);
        }
        OFPAT10_ENQUEUE => {
            need(b, 16)?;
            let port = u32::from(be16(b, 4));
            if port >= OFPP_MAX && port != OFPP_IN_PORT && port != OFPP_LOCAL {
                return Err(OfpErr::OfpbacBadOutPort);
            }
            OfAction::Enqueue {
                port,
                queue: be32(b, 12),
            }
        }
        _ => return Err(OfpErr::OfpbacBadType),
    };
    out.push(a);
    Ok(())
}

fn decode_dl(src: bool, b: &[u8], out: &mut Vec<OfAction>) -> Result<(), OfpErr> {
    need(b, 16)?;
    let a = eth(b, 4);
    out.push(if src {
        OfAction::SetEthSrc(a)
    } else {
        OfAction::SetEthDst(a)
    });
    Ok(())
}

fn decode_nw(src: bool, b: &[u8], out: &mut Vec<OfAction>) -> Result<(), OfpErr> {
    need(b, 8)?;
    let a = Ipv4Addr::from(be32(b, 4));
    out.push(if src {
        OfAction::SetIpv4Src(a)
    } else {
        OfAction::SetIpv4Dst(a)
    });
    Ok(())
}

fn decode_tos(b: &[u8], out: &mut Vec<OfAction>) -> Result<(), OfpErr> {
    need(b, 8)?;
    if b[4] & !0xfc != 0 {
        return Err(OfpErr::OfpbacBadArgument);
    }
    out.push(OfAction::SetIpDscp(b[4]));
    Ok(())
}

fn decode_tp(src: bool, b: &[u8], out: &mut Vec<OfAction>) -> Result<(), OfpErr> {
    need(b, 8)?;
    let p = be16(b, 4);
    out.push(if src {
        OfAction::SetL4SrcPort(p)
    } else {
        OfAction::SetL4DstPort(p)
    });
    Ok(())
}

fn decode11(version: Version, ty: u16, b: &[u8], out: &mut Vec<OfAction>) -> Result<(), OfpErr> {
    let a = match ty {
        OFPAT11_OUTPUT => {
            need(b, 16)?;
            let port = port_from_ofp11(be32(b, 4)).ok_or(OfpErr::OfpbacBadOutPort)?;
            OfAction::Output {
                port: check_output_port(port.into())?,
                max_len: be16(b, 8),
            }
        }
        OFPAT11_SET_VLAN_VID => return decode10(OFPAT10_SET_VLAN_VID, b, out),
        OFPAT11_SET_VLAN_PCP => return decode10(OFPAT10_SET_VLAN_PCP, b, out),
        OFPAT11_SET_DL_SRC | OFPAT11_SET_DL_DST => {
            return decode_dl(ty == OFPAT11_SET_DL_SRC, b, out);
        }
        OFPAT11_SET_NW_SRC | OFPAT11_SET_NW_DST => {
            return decode_nw(ty == OFPAT11_SET_NW_SRC, b, out);
        }
        OFPAT11_SET_NW_TOS => return decode_tos(b, out),
        OFPAT11_SET_NW_ECN => {
            need(b, 8)?;
            if b[4] > 3 {
                return Err(OfpErr::OfpbacBadArgument);
            }
            OfAction::SetField {
                field: FieldId::IP_ECN,
                value: b[4].into(),
                mask: 3,
                form: WriteForm::Own,
            }
        }
        OFPAT11_SET_TP_SRC | OFPAT11_SET_TP_DST => {
            return decode_tp(ty == OFPAT11_SET_TP_SRC, b, out);
        }
        OFPAT11_SET_MPLS_LABEL => {
            need(b, 8)?;
            let l = be32(b, 4);
            if l > 0xfffff {
                return Err(OfpErr::OfpbacBadArgument);
            }
            OfAction::SetMplsLabel(l)
        }
        OFPAT11_SET_MPLS_TC => {
            need(b, 8)?;
            if b[4] > 7 {
                return Err(OfpErr::OfpbacBadArgument);
            }
            OfAction::SetMplsTc(b[4])
        }
        OFPAT11_SET_MPLS_TTL => {
            need(b, 8)?;
            OfAction::SetMplsTtl(b[4])
        }
        OFPAT11_DEC_MPLS_TTL => {
            need(b, 8)?;
            OfAction::DecMplsTtl
        }
        OFPAT11_PUSH_VLAN => {
            need(b, 8)?;
            let t = be16(b, 4);
            if !is_vlan_ethertype(t) {
                return Err(OfpErr::OfpbacBadArgument);
            }
            OfAction::PushVlan(t)
        }
        OFPAT11_POP_VLAN => {
            need(b, 8)?;
            OfAction::StripVlan
        }
        OFPAT11_PUSH_MPLS => {
            need(b, 8)?;
            let t = be16(b, 4);
            if !is_mpls_ethertype(t) {
                return Err(OfpErr::OfpbacBadArgument);
            }
            OfAction::PushMpls(t)
        }
        OFPAT11_POP_MPLS => {
            need(b, 8)?;
            OfAction::PopMpls(be16(b, 4))
        }
        OFPAT11_SET_QUEUE => {
            need(b, 8)?;
            OfAction::SetQueue(be32(b, 4))
        }
        OFPAT11_GROUP => {
            need(b, 8)?;
            OfAction::Group(be32(b, 4))
        }
        OFPAT11_SET_NW_TTL => {
            need(b, 8)?;
            OfAction::SetField {
                field: FieldId::IP_TTL,
                value: b[4].into(),
                mask: 0xff,
                form: WriteForm::Own,
            }
        }
        OFPAT11_DEC_NW_TTL => {
            need(b, 8)?;
            OfAction::DecTtl(None)
        }
        OFPAT12_SET_FIELD if version >= Version::Of12 => return decode_set_field(version, b, out),
        OFPAT15_COPY_FIELD if version >= Version::Of15 => {
            return super::nicira::decode_copy_field(b, 4, 12, out);
        }
        OFPAT15_METER if version >= Version::Of15 => {
            need(b, 8)?;
            OfAction::Meter(be32(b, 4))
        }
        _ => return Err(OfpErr::OfpbacBadType),
    };
    out.push(a);
    Ok(())
}

/// The field, value and mask (field space) of the write in a Set-Field action (`set_field`:
/// OXM entry at 4, a mask only from OpenFlow 1.5) or a `reg_load2` (`set_field` false: entry at
/// 10, a mask allowed), checked in OVS's order: the header, the payload, 1-bits outside the
/// mask, the mask being allowed, zero padding after the entry, then (Set-Field only) no OXM
/// `in_port` and a valid value, and a writable field.
pub(super) fn pull_set_field(
    b: &[u8],
    set_field: bool,
    masks_ok: bool,
) -> Result<(FieldId, u128, u128), OfpErr> {
    let at = if set_field { 4 } else { 10 };
    let rest = &b[at..];
    let hdr = OxmHeader::parse(rest)?;
    let fh = match nxm::field_by_header(&hdr) {
        Some(fh) => fh,
        None if nxm::FIELD_HEADERS.iter().any(|fh| fh.id == hdr.id()) => {
            return Err(OfpErr::OfpbacBadSetLen);
        }
        None => return Err(OfpErr::OfpbacBadSetType),
    };
    let (hl, n) = (hdr.header_len(), hdr.payload_len());
    let payload = rest.get(hl..hl + n).ok_or(OfpErr::OfpbmcBadLen)?;
    let w = hdr.value_len();
    // With a mask the payload is value then mask, each `w` bytes; without, `mb` is empty.
    let (vb, mb) = payload.split_at(w);
    if hdr.hasmask && vb.iter().zip(mb).any(|(v, m)| v & !m != 0) {
        return Err(OfpErr::OfpbmcBadWildcards);
    }
    if hdr.hasmask && !masks_ok {
        return Err(OfpErr::OfpbacBadSetMask);
    }
    if rest[hl + n..].iter().any(|&x| x != 0) {
        return Err(OfpErr::OfpbacBadSetArgument);
    }
    let f = fh.field.field();
    // Tunnel metadata wider than the pipeline keeps must not use the bytes it lacks.
    let narrow = |b| nxm::low16(b).ok_or(OfpErr::OfpbacBadSetArgument);
    let mut value = be_n(narrow(vb)?);
    // An unmasked write writes the whole field (the whole option, for tunnel metadata), as
    // the text syntax says it.
    let mut mask = if hdr.hasmask {
        be_n(narrow(mb)?)
    } else {
        ones(f.n_bits)
    };
    let oxm_in_port = fh.field == FieldId::IN_PORT && w == 4;
    if set_field {
        // OpenFlow forbids setting OXM_OF_IN_PORT; the VID must say "present".
        let present = value & 0x1000 != 0 && (!hdr.hasmask || mask & 0x1000 != 0);
        let vid_absent = fh.field == FieldId::VLAN_VID && !present;
        if oxm_in_port || !nxm::value_ok(fh.field, value) || vid_absent {
            return Err(OfpErr::OfpbacBadSetArgument);
        }
    } else if oxm_in_port {
        value = port_from_ofp11(value as u32)
            .ok_or(OfpErr::OfpbacBadSetArgument)?
            .into();
        mask &= 0xffff;
    }
    if !f.writable {
        return Err(OfpErr::OfpbacBadSetArgument);
    }
    let mask = mask & ones(f.n_bits);
    Ok((fh.field, value & mask, mask))
}

/// Whether a write's mask covers every bit the field holds (`arp_op` is 16 bits in OpenFlow,
/// of which the pipeline keeps 8): a whole-field write.
pub(super) fn covers(field: FieldId, mask: u128) -> bool {
    let f = field.field();
    let vm = f.value_mask() & ones(f.n_bits);
    mask & vm == vm
}

/// A Set-Field (`set_field`) or `reg_load2` writing a tunnel metadata value longer than 16
/// bytes, unmasked: [`OfAction::SetTunMetadata`]. `None` for any other write.
pub(super) fn pull_wide_tun_md(b: &[u8], set_field: bool) -> Option<OfAction> {
    let rest = &b[if set_field { 4 } else { 10 }..];
    let hdr = OxmHeader::parse(rest).ok()?;
    let fh = nxm::field_by_header(&hdr)?;
    let (hl, w) = (hdr.header_len(), hdr.value_len());
    if !fh.field.is_tun_metadata() || hdr.hasmask {
        return None;
    }
    let vb = rest.get(hl..hl + w)?;
    if nxm::low16(vb).is_some() || rest[hl + w..].iter().any(|&x| x != 0) {
        return None;
    }
    let z = vb.iter().take_while(|&&x| x == 0).count();
    Some(OfAction::SetTunMetadata {
        field: fh.field,
        value: vb[z..].into(),
    })
}

/// Appends the entry of a wide tunnel metadata write: header and value, as long as the value.
pub(super) fn put_wide_tun_md(version: u8, field: FieldId, value: &[u8], out: &mut Vec<u8>) {
    if let Some(fh) = nxm::action_header(field, version) {
        OxmHeader::new(fh.id, value.len(), false).write(out);
        out.extend_from_slice(value);
    }
}

fn decode_set_field(version: Version, b: &[u8], out: &mut Vec<OfAction>) -> Result<(), OfpErr> {
    if let Some(a) = pull_wide_tun_md(b, true) {
        out.push(a);
        return Ok(());
    }
    let (field, value, mask) = pull_set_field(b, true, version >= Version::Of15)?;
    push_write(out, field, value, mask, WriteForm::SetField);
    Ok(())
}

/// Adds a Set-Field or `reg_load2` write in `form`, as one action (OVS keeps it whole), but
/// for the VLAN and MPLS fields, which the model holds as the actions they mean.
pub(super) fn push_write(
    out: &mut Vec<OfAction>,
    field: FieldId,
    v: u128,
    m: u128,
    form: WriteForm,
) {
    let whole = covers(field, m);
    let write = OfAction::SetField {
        field,
        value: v & m,
        mask: m,
        form,
    };
    let a = match field {
        _ if !whole => write,
        FieldId::VLAN_VID => OfAction::SetVlanVid((v & 0x0fff) as u16),
        FieldId::VLAN_PCP => OfAction::SetVlanPcp(v as u8),
        FieldId::MPLS_LABEL => OfAction::SetMplsLabel(v as u32),
        FieldId::MPLS_TC => OfAction::SetMplsTc(v as u8),
        FieldId::VLAN_TCI => {
            if v & 0x1000 != 0 {
                out.push(OfAction::SetVlanVid((v & 0x0fff) as u16));
                OfAction::SetVlanPcp(((v >> 13) & 7) as u8)
            } else {
                OfAction::StripVlan
            }
        }
        _ => write,
    };
    out.push(a);
}

/// Appends a Set-Field action for `field` (OpenFlow 1.2+): the OXM entry, with the mask when
/// it does not cover the field (OpenFlow 1.5).
pub(super) fn put_set_field(
    version: Version,
    field: FieldId,
    value: u128,
    mask: u128,
    out: &mut Vec<u8>,
) {
    let at = start_action(out, OFPAT12_SET_FIELD);
    put_oxm_entry(version.wire(), field, value, mask, out);
    end_action(out, at);
}

/// Appends the OXM entry of a write (header, value, mask when partial) in `version`'s headers.
pub(super) fn put_oxm_entry(
    version: u8,
    field: FieldId,
    value: u128,
    mask: u128,
    out: &mut Vec<u8>,
) {
    put_oxm_entry_as(version, field, value, mask, false, out);
}

/// [`put_oxm_entry`]; with `exact_bits`, the mask is partial unless it covers the field's
/// bytes, as the mask of a `reg_load` is in OVS (`nw_ecn`'s is 0x3, not 0xff).
fn put_oxm_entry_as(
    version: u8,
    field: FieldId,
    value: u128,
    mask: u128,
    exact_bits: bool,
    out: &mut Vec<u8>,
) {
    let Some(fh) = nxm::action_header(field, version) else {
        return;
    };
    // Tunnel metadata without a TLV map is as wide as the value needs (a whole-option write)
    // or as the mask says (a masked one), as OVS sizes it.
    let width = match fh.width {
        0 if covers(field, mask) => ofproto::fields::sig_bytes(value).max(1),
        0 => ofproto::fields::sig_bytes(mask).max(1),
        w => usize::from(w),
    };
    let (value, full) = if field == FieldId::IN_PORT && width == 4 {
        (port_to_ofp11(value as u16), mask & 0xffff == 0xffff)
    } else if exact_bits {
        let f = field.field();
        (
            value,
            covers(field, mask) && f.n_bits as usize >= 8 * f.n_bytes,
        )
    } else {
        (value, covers(field, mask))
    };
    let mask = (!full).then_some(mask);
    nxm::put_entry(out, fh.id, width, value, mask);
}

/// A field write as OVS's `encode_SET_FIELD()` sends it (and `encode_SET_IP_TTL()`,
/// `encode_SET_IP_ECN()` for the fields' own actions): `false` when it goes as a Nicira
/// `reg_load` or `reg_load2` instead.
fn encode_write(
    version: Version,
    field: FieldId,
    value: u128,
    mask: u128,
    form: WriteForm,
    out: &mut Vec<u8>,
) -> bool {
    let v10 = version == Version::Of10;
    let whole = covers(field, mask);
    let oxm_ok = nxm::action_header(field, version.wire()).is_some();
    // The legacy actions take the value whole; a Set-Field only the bits it sets.
    let legacy_value = value;
    let value = value & mask;
    match form {
        WriteForm::Own if field == FieldId::IP_TTL => {
            if v10 {
                return false;
            }
            put8(out, OFPAT11_SET_NW_TTL, &[value as u8]);
        }
        WriteForm::Own if field == FieldId::IP_ECN && version < Version::Of12 => {
            if v10 {
                return false;
            }
            put8(out, OFPAT11_SET_NW_ECN, &[value as u8]);
        }
        // OpenFlow 1.5 has only Set-Field, whatever the write came as. A `load` of a field
        // narrower than its bytes says its mask (`nw_ecn`: 0x3), as OVS's reg_load keeps it.
        _ if version >= Version::Of15 && oxm_ok => {
            let at = start_action(out, OFPAT12_SET_FIELD);
            let exact_bits = form == WriteForm::Load;
            put_oxm_entry_as(version.wire(), field, value, mask, exact_bits, out);
            end_action(out, at);
        }
        WriteForm::Load | WriteForm::Load2 => return false,
        WriteForm::SetField | WriteForm::Own if version < Version::Of12 => {
            return put_legacy(version, field, legacy_value, out);
        }
        _ if whole && oxm_ok => put_set_field(version, field, value, mask, out),
        _ => return false,
    }
    true
}

/// A whole-field Set-Field in OpenFlow 1.0 or 1.1 as OVS's `set_field_to_legacy_openflow()`:
/// the version's own action for the field (a mask is dropped); `false` for a `reg_load`.
fn put_legacy(version: Version, field: FieldId, value: u128, out: &mut Vec<u8>) -> bool {
    let v10 = version == Version::Of10;
    let pick = |t10: u16, t11: u16| if v10 { t10 } else { t11 };
    match field {
        FieldId::ETH_SRC | FieldId::ETH_DST => {
            let ty = if field == FieldId::ETH_SRC {
                pick(OFPAT10_SET_DL_SRC, OFPAT11_SET_DL_SRC)
            } else {
                pick(OFPAT10_SET_DL_DST, OFPAT11_SET_DL_DST)
            };
            let mut b = value.to_be_bytes()[10..16].to_vec();
            b.extend_from_slice(&[0; 6]);
            put8(out, ty, &b);
        }
        FieldId::IPV4_SRC => put8(
            out,
            pick(OFPAT10_SET_NW_SRC, OFPAT11_SET_NW_SRC),
            &(value as u32).to_be_bytes(),
        ),
        FieldId::IPV4_DST => put8(
            out,
            pick(OFPAT10_SET_NW_DST, OFPAT11_SET_NW_DST),
            &(value as u32).to_be_bytes(),
        ),
        FieldId::IP_DSCP => put8(
            out,
            pick(OFPAT10_SET_NW_TOS, OFPAT11_SET_NW_TOS),
            &[value as u8],
        ),
        FieldId::IP_DSCP_SHIFTED => put8(
            out,
            pick(OFPAT10_SET_NW_TOS, OFPAT11_SET_NW_TOS),
            &[(value as u8) << 2],
        ),
        FieldId::IP_ECN if !v10 => put8(out, OFPAT11_SET_NW_ECN, &[value as u8]),
        // OVS sends OpenFlow 1.0's numbers here in 1.1 too (`put_OFPAT_SET_TP_SRC()`).
        FieldId::TCP_SRC | FieldId::UDP_SRC => {
            put8(out, OFPAT10_SET_TP_SRC, &(value as u16).to_be_bytes())
        }
        FieldId::TCP_DST | FieldId::UDP_DST => {
            put8(out, OFPAT10_SET_TP_DST, &(value as u16).to_be_bytes())
        }
        _ => return false,
    }
    true
}

fn put8(out: &mut Vec<u8>, ty: u16, body: &[u8]) {
    let at = start_action(out, ty);
    out.extend_from_slice(body);
    end_action(out, at);
}

/// Appends the standard encoding of `a` when `version` has one; `Ok(false)` when the action is
/// a Nicira extension there.
pub(super) fn encode(
    version: Version,
    a: &OfAction,
    flow: FlowCtx,
    out: &mut Vec<u8>,
) -> Result<bool, EncodeError> {
    let v10 = version == Version::Of10;
    let sf = version >= Version::Of12;
    let set_field = |out: &mut Vec<u8>, f: FieldId, v: u128| {
        put_set_field(version, f, v, f.field().value_mask(), out)
    };
    match a {
        OfAction::Output { port, max_len } => {
            if v10 {
                let mut b = (*port as u16).to_be_bytes().to_vec();
                b.extend_from_slice(&max_len.to_be_bytes());
                put8(out, OFPAT10_OUTPUT, &b);
            } else {
                let mut b = (port_to_ofp11(*port as u16) as u32).to_be_bytes().to_vec();
                b.extend_from_slice(&max_len.to_be_bytes());
                b.extend_from_slice(&[0; 6]);
                put8(out, OFPAT11_OUTPUT, &b);
            }
        }
        OfAction::Enqueue { port, queue } => {
            if v10 {
                let mut b = (*port as u16).to_be_bytes().to_vec();
                b.extend_from_slice(&[0; 6]);
                b.extend_from_slice(&queue.to_be_bytes());
                put8(out, OFPAT10_ENQUEUE, &b);
            } else {
                // OpenFlow 1.1+ has no enqueue: OVS sends the queue, the output (whole
                // packets) and a return to the default queue.
                put8(out, OFPAT11_SET_QUEUE, &queue.to_be_bytes());
                encode(
                    version,
                    &OfAction::Output {
                        port: *port,
                        max_len: u16::MAX,
                    },
                    flow,
                    out,
                )?;
                super::nicira::encode(version, &OfAction::PopQueue, flow, out)?;
            }
        }
        OfAction::SetVlanVid(vid) => {
            if !v10 && !flow.has_vlan {
                put8(out, OFPAT11_PUSH_VLAN, &ETH_TYPE_VLAN_8021Q.to_be_bytes());
            }
            if sf {
                set_field(out, FieldId::VLAN_VID, u128::from(*vid) | 0x1000);
            } else {
                put8(out, OFPAT10_SET_VLAN_VID, &vid.to_be_bytes());
            }
        }
        OfAction::SetVlanPcp(pcp) => {
            if !v10 && !flow.has_vlan {
                put8(out, OFPAT11_PUSH_VLAN, &ETH_TYPE_VLAN_8021Q.to_be_bytes());
            }
            if sf {
                set_field(out, FieldId::VLAN_PCP, (*pcp).into());
            } else {
                put8(out, OFPAT10_SET_VLAN_PCP, &[*pcp]);
            }
        }
        OfAction::StripVlan => put8(
            out,
            if v10 {
                OFPAT10_STRIP_VLAN
            } else {
                OFPAT11_POP_VLAN
            },
            &[],
        ),
        OfAction::PushVlan(t) => {
            if v10 {
                return Err(super::unencodable("push_vlan", version));
            }
            put8(out, OFPAT11_PUSH_VLAN, &t.to_be_bytes());
        }
        OfAction::SetEthSrc(e) | OfAction::SetEthDst(e) => {
            let src = matches!(a, OfAction::SetEthSrc(_));
            if sf {
                let f = if src {
                    FieldId::ETH_SRC
                } else {
                    FieldId::ETH_DST
                };
                set_field(
                    out,
                    f,
                    e.0.iter().fold(0u128, |x, &b| (x << 8) | u128::from(b)),
                );
            } else {
                let ty = match (v10, src) {
                    (true, true) => OFPAT10_SET_DL_SRC,
                    (true, false) => OFPAT10_SET_DL_DST,
                    (false, true) => OFPAT11_SET_DL_SRC,
                    (false, false) => OFPAT11_SET_DL_DST,
                };
                let mut b = e.0.to_vec();
                b.extend_from_slice(&[0; 6]);
                put8(out, ty, &b);
            }
        }
        OfAction::SetIpv4Src(ip) | OfAction::SetIpv4Dst(ip) => {
            let src = matches!(a, OfAction::SetIpv4Src(_));
            if sf {
                let f = if src {
                    FieldId::IPV4_SRC
                } else {
                    FieldId::IPV4_DST
                };
                set_field(out, f, u32::from(*ip).into());
            } else {
                let ty = match (v10, src) {
                    (true, true) => OFPAT10_SET_NW_SRC,
                    (true, false) => OFPAT10_SET_NW_DST,
                    (false, true) => OFPAT11_SET_NW_SRC,
                    (false, false) => OFPAT11_SET_NW_DST,
                };
                put8(out, ty, &ip.octets());
            }
        }
        OfAction::SetIpDscp(tos) => {
            if sf {
                set_field(out, FieldId::IP_DSCP_SHIFTED, u128::from(*tos >> 2));
            } else {
                put8(
                    out,
                    if v10 {
                        OFPAT10_SET_NW_TOS
                    } else {
                        OFPAT11_SET_NW_TOS
                    },
                    &[*tos],
                );
            }
        }
        OfAction::SetL4SrcPort(p) | OfAction::SetL4DstPort(p) => {
            let src = matches!(a, OfAction::SetL4SrcPort(_));
            // Without a known protocol there is no field to set: OVS sends the OpenFlow 1.1
            // action in every version.
            if sf && matches!(flow.ip_proto, 6 | 17 | 132) {
                let f = match (flow.ip_proto, src) {
                    (17, true) => FieldId::UDP_SRC,
                    (17, false) => FieldId::UDP_DST,
                    (132, true) => FieldId::SCTP_SRC,
                    (132, false) => FieldId::SCTP_DST,
                    (_, true) => FieldId::TCP_SRC,
                    (_, false) => FieldId::TCP_DST,
                };
                set_field(out, f, (*p).into());
            } else {
                put8(
                    out,
                    if src {
                        OFPAT10_SET_TP_SRC
                    } else {
                        OFPAT10_SET_TP_DST
                    },
                    &p.to_be_bytes(),
                );
            }
        }
        OfAction::SetMplsLabel(l) if !v10 => {
            if sf {
                set_field(out, FieldId::MPLS_LABEL, (*l).into());
            } else {
                put8(out, OFPAT11_SET_MPLS_LABEL, &l.to_be_bytes());
            }
        }
        OfAction::SetMplsTc(tc) if !v10 => {
            if sf {
                set_field(out, FieldId::MPLS_TC, (*tc).into());
            } else {
                put8(out, OFPAT11_SET_MPLS_TC, &[*tc]);
            }
        }
        OfAction::SetMplsTtl(ttl) if !v10 => put8(out, OFPAT11_SET_MPLS_TTL, &[*ttl]),
        OfAction::DecMplsTtl if !v10 => put8(out, OFPAT11_DEC_MPLS_TTL, &[]),
        OfAction::PushMpls(t) if !v10 => put8(out, OFPAT11_PUSH_MPLS, &t.to_be_bytes()),
        OfAction::PopMpls(t) if !v10 => put8(out, OFPAT11_POP_MPLS, &t.to_be_bytes()),
        OfAction::SetQueue(q) if !v10 => put8(out, OFPAT11_SET_QUEUE, &q.to_be_bytes()),
        OfAction::Group(g) if !v10 => put8(out, OFPAT11_GROUP, &g.to_be_bytes()),
        OfAction::DecTtl(None) if !v10 => put8(out, OFPAT11_DEC_NW_TTL, &[]),
        OfAction::SetTunnel { id, .. } if sf => set_field(out, FieldId::TUN_ID, (*id).into()),
        OfAction::Meter(m) if version >= Version::Of15 => {
            put8(out, OFPAT15_METER, &m.to_be_bytes())
        }
        OfAction::SetField {
            field,
            value,
            mask,
            form,
        } => return Ok(encode_write(version, *field, *value, *mask, *form, out)),
        OfAction::SetTunMetadata { field, value } if version >= Version::Of12 => {
            let at = start_action(out, OFPAT12_SET_FIELD);
            put_wide_tun_md(version.wire(), *field, value, out);
            end_action(out, at);
        }
        _ => return Ok(false),
    }
    Ok(true)
}
