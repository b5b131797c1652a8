//! NXM and OXM: the type-length-value field encoding of matches (Nicira's `nx_match`, and
//! OpenFlow 1.2+'s `ofp_match` of type `OFPMT_OXM`), and the field headers that `set_field`,
//! `reg_load`, `move` and `output_reg` use to name fields.
//!
//! A header is 32 bits: a 16-bit class, a 7-bit field number, a has-mask bit and an 8-bit
//! payload length; an experimenter class (0xffff) adds a 32-bit experimenter id, counted in the
//! length. The classes are `NXM_OF_` (0x0000) and `NXM_NX_` (0x0001), Nicira's own; the
//! OpenFlow basic class (0x8000, `OXM_OF_`); the packet registers (0x8001, `OXM_OF_PKT_REG`);
//! and the experimenters ONF (`ONFOXM_ET_`) and Nicira (`NXOXM_ET_`).
//!
//! One table ([`FIELD_HEADERS`]) lists, for every field of [`ofproto::fields`] that OVS gives a
//! header, each header with the first OpenFlow version that may use it (OVS's `meta-flow.h`).
//! Encoding picks, as OVS does, the newest header the version allows (NXM, "version 0", takes
//! the Nicira header, or the only one there is), puts the fields in OVS's order
//! (`nx_put_raw()`), and so gives the bytes `ovs-ofctl` sends. Decoding accepts every known
//! header in any version and checks what OVS checks, with OVS's errors: lengths
//! (`OFPBMC_BAD_LEN`), unknown fields (`OFPBMC_BAD_FIELD`), 1-bits outside the mask
//! (`OFPBMC_BAD_WILDCARDS`), masks on unmaskable fields (`OFPBMC_BAD_MASK`), values out of range
//! (`OFPBMC_BAD_VALUE`), prerequisites (`OFPBMC_BAD_PREREQ`) and repeats (`OFPBMC_DUP_FIELD`).
//!
//! Tunnel metadata has no fixed width: a bridge's TLV map gives it ([`TlvLens`]); without one
//! it travels as wide as its mask needs, and a header naming it without a value (in `move`,
//! `output_reg`, `ct`'s zone) carries OVS's 124 bytes.
//!
//! Fields OVS knows that the pipeline does not model yet (`dp_hash`,
//! `actset_output`, `xxreg4`..`7`, the ERSPAN, GTP-U and NSH fields) are
//! refused as unknown (`OFPBMC_BAD_FIELD`). `packet_type` is accepted when it says Ethernet,
//! the only packets the pipeline matches, and written, as OVS writes it, when a match says
//! Ethernet only through fields it cannot write.

use ofproto::fields::{self, Field, FieldId, N_TUN_METADATA, Prereq, ones, read_storage};
use ofproto::pipekey::{PipeKey, PipeMask, PipeMatch};

use crate::be::be_n;
use crate::error::OfpErr;
use crate::header::{ONF_VENDOR_ID, Version};

/// `NXM_OF_`: Nicira's class for the OpenFlow 1.0 fields.
pub const OFPXMC_NXM_0: u16 = 0x0000;
/// `NXM_NX_`: Nicira's class for its own fields.
pub const OFPXMC_NXM_1: u16 = 0x0001;
/// `OXM_OF_`: the OpenFlow basic class.
pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;
/// `OXM_OF_PKT_REG<N>`: the packet registers (OpenFlow 1.5's 64-bit `xreg`s).
pub const OFPXMC_PACKET_REGS: u16 = 0x8001;
/// An experimenter class: a 32-bit experimenter id follows the header.
pub const OFPXMC_EXPERIMENTER: u16 = 0xffff;

/// `OFPMT_OXM`: the type of an OpenFlow 1.2+ `ofp_match` that holds OXM fields.
pub const OFPMT_OXM: u16 = 1;

/// `NXM_NX_COOKIE`: the pseudo-field of NXT_FLOW_MOD and NXST_FLOW requests that matches
/// cookies (class 1, field 30, 8 bytes).
const NXM_NX_COOKIE: (u16, u8) = (OFPXMC_NXM_1, 30);

/// `OXM_OF_PACKET_TYPE`: accepted when it names Ethernet (namespace 0, type 0), and written
/// when a match says Ethernet only through fields it cannot write.
const OXM_OF_PACKET_TYPE: (u16, u8) = (OFPXMC_OPENFLOW_BASIC, 44);

/// An NXM or OXM field header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OxmHeader {
    /// The class (`OFPXMC_*`).
    pub class: u16,
    /// The field number within the class (7 bits).
    pub field: u8,
    /// Whether a mask follows the value.
    pub hasmask: bool,
    /// The payload length: value and mask, plus the 4-byte experimenter id in that class.
    pub length: u8,
    /// The experimenter id, for [`OFPXMC_EXPERIMENTER`]; 0 otherwise.
    pub experimenter: u32,
}

impl OxmHeader {
    /// The header of a field whose value is `width` bytes.
    pub fn new(id: WireId, width: usize, hasmask: bool) -> OxmHeader {
        let exp_len = if id.class == OFPXMC_EXPERIMENTER {
            4
        } else {
            0
        };
        let n = if hasmask { 2 * width } else { width };
        OxmHeader {
            class: id.class,
            field: id.field,
            hasmask,
            length: (exp_len + n).min(255) as u8,
            experimenter: id.experimenter,
        }
    }

    /// Reads a header at the start of `buf`; `OFPBMC_BAD_LEN` if `buf` is too short for it or
    /// its length cannot hold its experimenter id.
    pub fn parse(buf: &[u8]) -> Result<OxmHeader, OfpErr> {
        let h = buf.first_chunk::<4>().ok_or(OfpErr::OfpbmcBadLen)?;
        let h = u32::from_be_bytes(*h);
        let mut out = OxmHeader {
            class: (h >> 16) as u16,
            field: ((h >> 9) & 0x7f) as u8,
            hasmask: h & 0x100 != 0,
            length: h as u8,
            experimenter: 0,
        };
        if out.class == OFPXMC_EXPERIMENTER {
            let e = buf.get(4..8).ok_or(OfpErr::OfpbmcBadLen)?;
            out.experimenter = u32::from_be_bytes([e[0], e[1], e[2], e[3]]);
            if out.length < 4 {
                return Err(OfpErr::OfpbmcBadLen);
            }
        }
        Ok(out)
    }

    /// The header's own size on the wire: 4, or 8 with an experimenter id.
    pub fn header_len(&self) -> usize {
        if self.class == OFPXMC_EXPERIMENTER {
            8
        } else {
            4
        }
    }

    /// The bytes of value and mask that follow the header.
    pub fn payload_len(&self) -> usize {
        usize::from(self.length) - (self.header_len() - 4)
    }

    /// The width of the value (half the payload when a mask follows).
    pub fn value_len(&self) -> usize {
        if self.hasmask {
            self.payload_len() / 2
        } else {
            self.payload_len()
        }
    }

    /// Which field the header names, whatever its mask and length.
    pub fn id(&self) -> WireId {
        WireId {
            class: self.class,
            field: self.field,
            experimenter: self.experimenter,
        }
    }

    /// Appends the header (and experimenter id) to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        let h = (u32::from(self.class) << 16)
            | (u32::from(self.field & 0x7f) << 9)
            | (u32::from(self.hasmask) << 8)
            | u32::from(self.length);
        out.extend_from_slice(&h.to_be_bytes());
        if self.class == OFPXMC_EXPERIMENTER {
            out.extend_from_slice(&self.experimenter.to_be_bytes());
        }
    }
}

/// A field's identity on the wire: class, field number and experimenter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WireId {
    pub class: u16,
    pub field: u8,
    pub experimenter: u32,
}

/// One header a field may travel under.
#[derive(Clone, Copy, Debug)]
pub struct FieldHeader {
    /// The field.
    pub field: FieldId,
    /// The header's class, number and experimenter.
    pub id: WireId,
    /// The width of the value, in bytes (0: variable, for tunnel metadata).
    pub width: u8,
    /// The first wire version that uses this header (0: NXM, usable everywhere).
    pub since: u8,
}

const fn h(field: FieldId, class: u16, num: u8, width: u8, since: u8) -> FieldHeader {
    FieldHeader {
        field,
        id: WireId {
            class,
            field: num,
            experimenter: 0,
        },
        width,
        since,
    }
}

const fn onf(field: FieldId, num: u8, width: u8, since: u8) -> FieldHeader {
    FieldHeader {
        field,
        id: WireId {
            class: OFPXMC_EXPERIMENTER,
            field: num,
            experimenter: ONF_VENDOR_ID,
        },
        width,
        since,
    }
}

/// An experimenter OXM of Nicira's (`NXOXM_ET_*`).
const fn nx_exp(field: FieldId, num: u8, width: u8, since: u8) -> FieldHeader {
    FieldHeader {
        field,
        id: WireId {
            class: OFPXMC_EXPERIMENTER,
            field: num,
            experimenter: crate::header::NX_VENDOR_ID,
        },
        width,
        since,
    }
}

/// The `since` of a header read but never written.
const NEVER: u8 = u8::MAX;

const NX0: u16 = OFPXMC_NXM_0;
const NX1: u16 = OFPXMC_NXM_1;
const OXM: u16 = OFPXMC_OPENFLOW_BASIC;
const REGS: u16 = OFPXMC_PACKET_REGS;
const OF12: u8 = 3;
const OF13: u8 = 4;
const OF15: u8 = 6;

type F = FieldId;

/// Every field header, grouped by field, each field's headers oldest first (OVS's
/// `meta-flow.h`). `in_port` in OXM is 32 bits (OpenFlow 1.1+ port numbers).
pub static FIELD_HEADERS: &[FieldHeader] = &[
    h(F::TUN_ID, NX1, 16, 8, 0),
    h(F::TUN_ID, OXM, 38, 8, OF13),
    h(F::TUN_SRC, NX1, 31, 4, 0),
    h(F::TUN_DST, NX1, 32, 4, 0),
    h(F::TUN_IPV6_SRC, NX1, 109, 16, 0),
    h(F::TUN_IPV6_DST, NX1, 110, 16, 0),
    h(F::TUN_GBP_ID, NX1, 38, 2, 0),
    h(F::TUN_GBP_FLAGS, NX1, 39, 1, 0),
    h(F::TUN_FLAGS, NX1, 104, 2, 0),
    h(FieldId::tun_metadata(0), NX1, 40, 0, 0),
    h(FieldId::tun_metadata(1), NX1, 41, 0, 0),
    h(FieldId::tun_metadata(2), NX1, 42, 0, 0),
    h(FieldId::tun_metadata(3), NX1, 43, 0, 0),
    h(FieldId::tun_metadata(4), NX1, 44, 0, 0),
    h(FieldId::tun_metadata(5), NX1, 45, 0, 0),
    h(FieldId::tun_metadata(6), NX1, 46, 0, 0),
    h(FieldId::tun_metadata(7), NX1, 47, 0, 0),
    h(FieldId::tun_metadata(8), NX1, 48, 0, 0),
    h(FieldId::tun_metadata(9), NX1, 49, 0, 0),
    h(FieldId::tun_metadata(10), NX1, 50, 0, 0),
    h(FieldId::tun_metadata(11), NX1, 51, 0, 0),
    h(FieldId::tun_metadata(12), NX1, 52, 0, 0),
    h(FieldId::tun_metadata(13), NX1, 53, 0, 0),
    h(FieldId::tun_metadata(14), NX1, 54, 0, 0),
    h(FieldId::tun_metadata(15), NX1, 55, 0, 0),
    h(FieldId::tun_metadata(16), NX1, 56, 0, 0),
    h(FieldId::tun_metadata(17), NX1, 57, 0, 0),
    h(FieldId::tun_metadata(18), NX1, 58, 0, 0),
    h(FieldId::tun_metadata(19), NX1, 59, 0, 0),
    h(FieldId::tun_metadata(20), NX1, 60, 0, 0),
    h(FieldId::tun_metadata(21), NX1, 61, 0, 0),
    h(FieldId::tun_metadata(22), NX1, 62, 0, 0),
    h(FieldId::tun_metadata(23), NX1, 63, 0, 0),
    h(FieldId::tun_metadata(24), NX1, 64, 0, 0),
    h(FieldId::tun_metadata(25), NX1, 65, 0, 0),
    h(FieldId::tun_metadata(26), NX1, 66, 0, 0),
    h(FieldId::tun_metadata(27), NX1, 67, 0, 0),
    h(FieldId::tun_metadata(28), NX1, 68, 0, 0),
    h(FieldId::tun_metadata(29), NX1, 69, 0, 0),
    h(FieldId::tun_metadata(30), NX1, 70, 0, 0),
    h(FieldId::tun_metadata(31), NX1, 71, 0, 0),
    h(FieldId::tun_metadata(32), NX1, 72, 0, 0),
    h(FieldId::tun_metadata(33), NX1, 73, 0, 0),
    h(FieldId::tun_metadata(34), NX1, 74, 0, 0),
    h(FieldId::tun_metadata(35), NX1, 75, 0, 0),
    h(FieldId::tun_metadata(36), NX1, 76, 0, 0),
    h(FieldId::tun_metadata(37), NX1, 77, 0, 0),
    h(FieldId::tun_metadata(38), NX1, 78, 0, 0),
    h(FieldId::tun_metadata(39), NX1, 79, 0, 0),
    h(FieldId::tun_metadata(40), NX1, 80, 0, 0),
    h(FieldId::tun_metadata(41), NX1, 81, 0, 0),
    h(FieldId::tun_metadata(42), NX1, 82, 0, 0),
    h(FieldId::tun_metadata(43), NX1, 83, 0, 0),
    h(FieldId::tun_metadata(44), NX1, 84, 0, 0),
    h(FieldId::tun_metadata(45), NX1, 85, 0, 0),
    h(FieldId::tun_metadata(46), NX1, 86, 0, 0),
    h(FieldId::tun_metadata(47), NX1, 87, 0, 0),
    h(FieldId::tun_metadata(48), NX1, 88, 0, 0),
    h(FieldId::tun_metadata(49), NX1, 89, 0, 0),
    h(FieldId::tun_metadata(50), NX1, 90, 0, 0),
    h(FieldId::tun_metadata(51), NX1, 91, 0, 0),
    h(FieldId::tun_metadata(52), NX1, 92, 0, 0),
    h(FieldId::tun_metadata(53), NX1, 93, 0, 0),
    h(FieldId::tun_metadata(54), NX1, 94, 0, 0),
    h(FieldId::tun_metadata(55), NX1, 95, 0, 0),
    h(FieldId::tun_metadata(56), NX1, 96, 0, 0),
    h(FieldId::tun_metadata(57), NX1, 97, 0, 0),
    h(FieldId::tun_metadata(58), NX1, 98, 0, 0),
    h(FieldId::tun_metadata(59), NX1, 99, 0, 0),
    h(FieldId::tun_metadata(60), NX1, 100, 0, 0),
    h(FieldId::tun_metadata(61), NX1, 101, 0, 0),
    h(FieldId::tun_metadata(62), NX1, 102, 0, 0),
    h(FieldId::tun_metadata(63), NX1, 103, 0, 0),
    h(F::METADATA, OXM, 2, 8, OF12),
    h(F::IN_PORT, NX0, 0, 2, 0),
    h(F::IN_PORT, OXM, 0, 4, OF12),
    h(F::PKT_MARK, NX1, 33, 4, 0),
    h(F::CT_STATE, NX1, 105, 4, 0),
    h(F::CT_ZONE, NX1, 106, 2, 0),
    h(F::CT_MARK, NX1, 107, 4, 0),
    h(F::CT_LABEL, NX1, 108, 16, 0),
    h(F::CT_NW_PROTO, NX1, 119, 1, 0),
    h(F::CT_NW_SRC, NX1, 120, 4, 0),
    h(F::CT_NW_DST, NX1, 121, 4, 0),
    h(F::CT_IPV6_SRC, NX1, 122, 16, 0),
    h(F::CT_IPV6_DST, NX1, 123, 16, 0),
    h(F::CT_TP_SRC, NX1, 124, 2, 0),
    h(F::CT_TP_DST, NX1, 125, 2, 0),
    h(F::DP_HASH, NX1, 35, 4, 0),
    // OVS reads its experimenter OXM (`NXOXM_ET_DP_HASH`) but writes the NXM header in every
    // version.
    nx_exp(F::DP_HASH, 0, 4, NEVER),
    h(F::RECIRC_ID, NX1, 36, 4, 0),
    h(F::CONJ_ID, NX1, 37, 4, 0),
    h(F::REG0, NX1, 0, 4, 0),
    h(F::REG1, NX1, 1, 4, 0),
    h(F::REG2, NX1, 2, 4, 0),
    h(F::REG3, NX1, 3, 4, 0),
    h(F::REG4, NX1, 4, 4, 0),
    h(F::REG5, NX1, 5, 4, 0),
    h(F::REG6, NX1, 6, 4, 0),
    h(F::REG7, NX1, 7, 4, 0),
    h(F::REG8, NX1, 8, 4, 0),
    h(F::REG9, NX1, 9, 4, 0),
    h(F::REG10, NX1, 10, 4, 0),
    h(F::REG11, NX1, 11, 4, 0),
    h(F::REG12, NX1, 12, 4, 0),
    h(F::REG13, NX1, 13, 4, 0),
    h(F::REG14, NX1, 14, 4, 0),
    h(F::REG15, NX1, 15, 4, 0),
    h(F::XREG0, REGS, 0, 8, OF13),
    h(F::XREG1, REGS, 1, 8, OF13),
    h(F::XREG2, REGS, 2, 8, OF13),
    h(F::XREG3, REGS, 3, 8, OF13),
    h(F::XREG4, REGS, 4, 8, OF13),
    h(F::XREG5, REGS, 5, 8, OF13),
    h(F::XREG6, REGS, 6, 8, OF13),
    h(F::XREG7, REGS, 7, 8, OF13),
    h(F::XXREG0, NX1, 111, 16, 0),
    h(F::XXREG1, NX1, 112, 16, 0),
    h(F::XXREG2, NX1, 113, 16, 0),
    h(F::XXREG3, NX1, 114, 16, 0),
    h(F::ETH_SRC, NX0, 2, 6, 0),
    h(F::ETH_SRC, OXM, 4, 6, OF12),
    h(F::ETH_DST, NX0, 1, 6, 0),
    h(F::ETH_DST, OXM, 3, 6, OF12),
    h(F::ETH_TYPE, NX0, 3, 2, 0),
    h(F::ETH_TYPE, OXM, 5, 2, OF12),
    h(F::VLAN_TCI, NX0, 4, 2, 0),
    h(F::VLAN_VID, OXM, 6, 2, OF12),
    h(F::VLAN_PCP, OXM, 7, 1, OF12),
    h(F::MPLS_LABEL, OXM, 34, 4, OF12),
    h(F::MPLS_TC, OXM, 35, 1, OF12),
    h(F::MPLS_BOS, OXM, 36, 1, OF13),
    h(F::MPLS_TTL, NX1, 30, 1, 0),
    h(F::IPV4_SRC, NX0, 7, 4, 0),
    h(F::IPV4_SRC, OXM, 11, 4, OF12),
    h(F::IPV4_DST, NX0, 8, 4, 0),
    h(F::IPV4_DST, OXM, 12, 4, OF12),
    h(F::IPV6_SRC, NX1, 19, 16, 0),
    h(F::IPV6_SRC, OXM, 26, 16, OF12),
    h(F::IPV6_DST, NX1, 20, 16, 0),
    h(F::IPV6_DST, OXM, 27, 16, OF12),
    h(F::IPV6_LABEL, NX1, 27, 4, 0),
    h(F::IPV6_LABEL, OXM, 28, 4, OF12),
    h(F::IP_PROTO, NX0, 6, 1, 0),
    h(F::IP_PROTO, OXM, 10, 1, OF12),
    h(F::IP_DSCP, NX0, 5, 1, 0),
    h(F::IP_DSCP_SHIFTED, OXM, 8, 1, OF12),
    h(F::IP_ECN, NX1, 28, 1, 0),
    h(F::IP_ECN, OXM, 9, 1, OF12),
    h(F::IP_TTL, NX1, 29, 1, 0),
    h(F::IP_FRAG, NX1, 26, 1, 0),
    h(F::ARP_OP, NX0, 15, 2, 0),
    h(F::ARP_OP, OXM, 21, 2, OF12),
    h(F::ARP_SPA, NX0, 16, 4, 0),
    h(F::ARP_SPA, OXM, 22, 4, OF12),
    h(F::ARP_TPA, NX0, 17, 4, 0),
    h(F::ARP_TPA, OXM, 23, 4, OF12),
    h(F::ARP_SHA, NX1, 17, 6, 0),
    h(F::ARP_SHA, OXM, 24, 6, OF12),
    h(F::ARP_THA, NX1, 18, 6, 0),
    h(F::ARP_THA, OXM, 25, 6, OF12),
    h(F::TCP_SRC, NX0, 9, 2, 0),
    h(F::TCP_SRC, OXM, 13, 2, OF12),
    h(F::TCP_DST, NX0, 10, 2, 0),
    h(F::TCP_DST, OXM, 14, 2, OF12),
    h(F::TCP_FLAGS, NX1, 34, 2, 0),
    onf(F::TCP_FLAGS, 42, 2, OF13),
    h(F::TCP_FLAGS, OXM, 42, 2, OF15),
    h(F::UDP_SRC, NX0, 11, 2, 0),
    h(F::UDP_SRC, OXM, 15, 2, OF12),
    h(F::UDP_DST, NX0, 12, 2, 0),
    h(F::UDP_DST, OXM, 16, 2, OF12),
    h(F::SCTP_SRC, OXM, 17, 2, OF12),
    h(F::SCTP_DST, OXM, 18, 2, OF12),
    h(F::ICMPV4_TYPE, NX0, 13, 1, 0),
    h(F::ICMPV4_TYPE, OXM, 19, 1, OF12),
    h(F::ICMPV4_CODE, NX0, 14, 1, 0),
    h(F::ICMPV4_CODE, OXM, 20, 1, OF12),
    h(F::ICMPV6_TYPE, NX1, 21, 1, 0),
    h(F::ICMPV6_TYPE, OXM, 29, 1, OF12),
    h(F::ICMPV6_CODE, NX1, 22, 1, 0),
    h(F::ICMPV6_CODE, OXM, 30, 1, OF12),
    h(F::ND_TARGET, NX1, 23, 16, 0),
    h(F::ND_TARGET, OXM, 31, 16, OF12),
    h(F::ND_SLL, NX1, 24, 6, 0),
    h(F::ND_SLL, OXM, 32, 6, OF12),
    h(F::ND_TLL, NX1, 25, 6, 0),
    h(F::ND_TLL, OXM, 33, 6, OF12),
];

/// The header OVS uses for `field` in wire version `version` (0 for NXM): the newest one the
/// version allows, else the field's first (OVS's `nxm_field_by_mf_id()`). `None` for a field
/// with no header (`dl_vlan`, `dl_vlan_pcp`).
pub fn field_header(field: FieldId, version: u8) -> Option<&'static FieldHeader> {
    let mut best = None;
    for &fh in headers_of(field) {
        if best.is_none() || version >= fh.since {
            best = Some(fh);
        }
    }
    best
}

/// The headers of `field` in [`FIELD_HEADERS`], in its order (a match's encoding looks them
/// up for every field it writes, so they are indexed by field once).
fn headers_of(field: FieldId) -> &'static [&'static FieldHeader] {
    static BY_FIELD: std::sync::OnceLock<Vec<Vec<&'static FieldHeader>>> =
        std::sync::OnceLock::new();
    let by_field = BY_FIELD.get_or_init(|| {
        let n = FIELD_HEADERS
            .iter()
            .map(|fh| fh.field.index() + 1)
            .max()
            .unwrap_or(0);
        let mut v = vec![Vec::new(); n];
        for fh in FIELD_HEADERS {
            v[fh.field.index()].push(fh);
        }
        v
    });
    by_field.get(field.index()).map_or(&[], Vec::as_slice)
}

/// The width OVS gives a tunnel metadata field that no TLV map sizes: its largest option, 124
/// bytes. A header that names such a field without a value (`move`, `output_reg`, `ct`'s zone)
/// carries this length.
pub const TUN_METADATA_FULL_LEN: usize = 124;

/// The field a header names, if the pipeline knows it and the header's value width is the
/// field's (for tunnel metadata, whose width the TLV map sets, any width up to
/// [`TUN_METADATA_FULL_LEN`]).
pub fn field_by_header(hdr: &OxmHeader) -> Option<&'static FieldHeader> {
    let id = hdr.id();
    let fh = FIELD_HEADERS.iter().find(|fh| fh.id == id)?;
    let w = hdr.value_len();
    let ok = if fh.width == 0 {
        w <= TUN_METADATA_FULL_LEN
    } else {
        w == usize::from(fh.width)
    };
    ok.then_some(fh)
}

/// The header OVS uses for `field` in an action of wire version `version`: as in a match,
/// except that `in_port` is always `NXM_OF_IN_PORT` (16 bits), since OpenFlow forbids writing
/// `OXM_OF_IN_PORT`.
pub fn action_header(field: FieldId, version: u8) -> Option<&'static FieldHeader> {
    field_header(field, if field == F::IN_PORT { 0 } else { version })
}

/// The header that names `field` in an action without a value: the field's own width, or
/// [`TUN_METADATA_FULL_LEN`] for tunnel metadata.
pub fn bare_header(field: FieldId, version: u8) -> Option<OxmHeader> {
    let fh = action_header(field, version)?;
    let width = match fh.width {
        0 => TUN_METADATA_FULL_LEN,
        w => usize::from(w),
    };
    Some(OxmHeader::new(fh.id, width, false))
}

/// The last 16 bytes of a value wider than the pipeline keeps (tunnel metadata up to 124
/// bytes), if the bytes before them are zero.
pub(crate) fn low16(b: &[u8]) -> Option<&[u8]> {
    let cut = b.len().saturating_sub(16);
    b[..cut].iter().all(|&x| x == 0).then_some(&b[cut..])
}

/// The value width of tunnel metadata `tun_metadata<n>` on the wire, as the bridge's TLV map
/// (`add-tlv-map`) sets it: 0 where nothing is mapped (then the width the field's place has,
/// if another bridge gives it one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlvLens(pub [u8; N_TUN_METADATA]);

impl Default for TlvLens {
    fn default() -> Self {
        TlvLens([0; N_TUN_METADATA])
    }
}

impl TlvLens {
    /// The widths a bridge's TLV map (`add-tlv-map`) gives its tunnel metadata fields.
    pub fn from_tlv_map(map: &ofproto::tun_md::TunTable) -> TlvLens {
        let mut lens = TlvLens::default();
        for (n, m) in map.iter() {
            lens.0[n] = m.len;
        }
        lens
    }
}

/// Appends `value` as `width` big-endian bytes.
fn put_be(out: &mut Vec<u8>, value: u128, width: usize) {
    out.extend_from_slice(&value.to_be_bytes()[16 - width.min(16)..]);
}

/// Appends one entry: header, value and (when `mask` is given) mask, `width` bytes each.
pub fn put_entry(out: &mut Vec<u8>, id: WireId, width: usize, value: u128, mask: Option<u128>) {
    OxmHeader::new(id, width, mask.is_some()).write(out);
    put_be(out, value, width);
    if let Some(m) = mask {
        put_be(out, m, width);
    }
}

/// Where the bits of `field` stand in a match: the value and mask in field space, the mask as
/// the field's own storage bits (so that `in_port`, `icmp_type` and `ipv6_label` count their
/// whole words), and whether the mask is exact.
struct Matched {
    value: u128,
    mask: u128,
    exact: bool,
}

fn matched(f: &Field, m: &PipeMatch) -> Option<Matched> {
    // Most fields of a match are not in it: its mask's word map says so without a read.
    if f.loc
        .key_words()
        .is_some_and(|w| m.mask().dp.map() & w == 0)
    {
        return None;
    }
    let sm = read_storage(&m.mask().dp, &m.mask().meta, f.loc) & f.exact_mask;
    if sm == 0 {
        return None;
    }
    let sv = read_storage(&m.key().dp, &m.key().meta, f.loc) & f.exact_mask;
    Some(Matched {
        value: sv >> f.shift,
        mask: sm >> f.shift,
        exact: sm == f.exact_mask || !f.maskable,
    })
}

/// Whether OVS gives `field` a prerequisite (`MFP_ETHERNET` or deeper, or a tracked
/// connection): a match on any of them says the packet is Ethernet (`packet_type`), which OVS
/// writes out when no entry it writes implies it.
fn says_ethernet(field: FieldId) -> bool {
    (field >= F::ETH_SRC && field != F::CONJ_ID)
        || matches!(
            field,
            F::CT_NW_PROTO
                | F::CT_NW_SRC
                | F::CT_NW_DST
                | F::CT_IPV6_SRC
                | F::CT_IPV6_DST
                | F::CT_TP_SRC
                | F::CT_TP_DST
        )
}

/// Puts `field` if the match has any of its bits, under the header of `version`; whether it
/// did.
fn put_field(out: &mut Vec<u8>, version: u8, field: FieldId, m: &PipeMatch) -> bool {
    let f = field.field();
    let Some(x) = matched(f, m) else {
        return false;
    };
    let Some(fh) = field_header(field, version) else {
        return false;
    };
    // Flag fields whose storage here is narrower than their OpenFlow width are always masked,
    // as OVS's flag syntax (`+trk`, `+oam`) makes them.
    let always_masked = matches!(field, F::CT_STATE | F::TUN_FLAGS);
    let exact = x.exact && !always_masked;
    let value = if field == F::IN_PORT && fh.width == 4 {
        port_to_ofp11(x.value as u16)
    } else {
        x.value
    };
    let mask = (!exact).then_some(x.mask & f.value_mask());
    put_entry(out, fh.id, usize::from(fh.width), value, mask);
    true
}

/// An OpenFlow 1.0 port number as OpenFlow 1.1+ writes it (the reserved ports move from
/// 0xff00.. to 0xffffff00..).
pub fn port_to_ofp11(port: u16) -> u128 {
    if port >= 0xff00 {
        u128::from(u32::from(port) + 0xffff_0000)
    } else {
        u128::from(port)
    }
}

/// An OpenFlow 1.1+ port number as OpenFlow 1.0's 16 bits, if it has one.
pub fn port_from_ofp11(port: u32) -> Option<u16> {
    if port < 0xff00 {
        Some(port as u16)
    } else if port >= 0xffff_ff00 {
        Some((port - 0xffff_0000) as u16)
    } else {
        None
    }
}

fn put_tun_metadata(out: &mut Vec<u8>, version: u8, m: &PipeMatch, tlv: &TlvLens) {
    for n in 0..N_TUN_METADATA {
        if !ofproto::tun_md::present(&m.mask().meta, n) {
            continue;
        }
        let Some(fh) = field_header(FieldId::tun_metadata(n), version) else {
            continue;
        };
        let (v, len) = ofproto::tun_md::value(&m.key().dp, &m.key().meta, n);
        let (mk, _) = ofproto::tun_md::value(&m.mask().dp, &m.mask().meta, n);
        // As wide as the bridge's map says; unmapped, as the mask needs (OVS's dynamic
        // allocation).
        let z = match usize::from(tlv.0[n]) {
            w if w > 0 => len.saturating_sub(w),
            _ if ofproto::tun_md::mapped(n) => 0,
            _ => mk[..len]
                .iter()
                .take_while(|&&b| b == 0)
                .count()
                .min(len - 1),
        };
        let (v, mk) = (&v[z..len], &mk[z..len]);
        let exact = mk.iter().all(|&b| b == 0xff);
        OxmHeader::new(fh.id, v.len(), !exact).write(out);
        out.extend_from_slice(v);
        if !exact {
            out.extend_from_slice(mk);
        }
    }
}

const ETH_TYPE_IP: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;
const ETH_TYPE_ARP: u16 = 0x0806;
const ETH_TYPE_RARP: u16 = 0x8035;

/// Adds a tunnel metadata entry to a match being read: a value longer than its place is
/// `OFPBMC_BAD_VALUE` (whether the bridge maps the field is the flow mod's check).
fn pull_tun_metadata(
    f: &Field,
    key: &mut PipeKey,
    mask: &mut PipeMask,
    vb: &[u8],
    mb: Option<&[u8]>,
) -> Result<(), OfpErr> {
    if f.is_matched(mask) {
        return Err(OfpErr::OfpbmcDupField);
    }
    // Unmapped, an exact value keeps its wire width: N bytes are an N-byte mask.
    let ones = [0xffu8; fields::TUN_METADATA_MAX_LEN];
    let mapped = matches!(f.loc, fields::Loc::TunMetadata(n) if ofproto::tun_md::mapped(n));
    let mb = match mb {
        None if !mapped => ones.get(..vb.len()),
        mb => mb,
    };
    f.match_tun_md_bytes(key, mask, vb, mb)
        .map_err(|_| OfpErr::OfpbmcBadValue)
}

/// Appends the fields of `m` as NXM (`version` 0) or as the OXM of wire version `version`, in
/// OVS's order, with an `NXM_NX_COOKIE` entry when `cookie_mask` is not zero. Returns the number
/// of bytes appended (no padding). A catch-all match appends nothing.
pub fn put_raw(
    out: &mut Vec<u8>,
    version: u8,
    m: &PipeMatch,
    cookie: u64,
    cookie_mask: u64,
    tlv: &TlvLens,
) -> usize {
    let start = out.len();
    let (k, mk) = (&m.key().dp, &m.mask().dp);
    let oxm = version != 0;
    // Whether an entry written so far says the packet is Ethernet.
    let implied = std::cell::Cell::new(false);
    let put = |out: &mut Vec<u8>, f: FieldId| {
        if put_field(out, version, f, m) && says_ethernet(f) {
            implied.set(true);
        }
    };

    put(out, F::DP_HASH);
    put(out, F::RECIRC_ID);
    put(out, F::CONJ_ID);
    put(out, F::IN_PORT);
    put(out, F::ETH_SRC);
    put(out, F::ETH_DST);
    put(out, F::ETH_TYPE);

    if oxm {
        put(out, F::VLAN_VID);
        // The PCP goes with a VID that says "802.1Q header present" (its prerequisite on
        // reading). OVS writes it for any VID bits, even without that bit (a `vlan_tci`
        // match no packet has, from NXM), and then cannot read its own match back.
        if k.vlan_tci() & 0x1000 != 0 && mk.vlan_tci() & 0xe000 != 0 {
            put(out, F::VLAN_PCP);
        }
    } else {
        put(out, F::VLAN_TCI);
    }

    let dl_type = k.eth_type();
    if dl_type == 0x8847 || dl_type == 0x8848 {
        for f in [F::MPLS_TC, F::MPLS_BOS, F::MPLS_TTL, F::MPLS_LABEL] {
            put(out, f);
        }
    }

    if dl_type == ETH_TYPE_IP || dl_type == ETH_TYPE_IPV6 {
        if dl_type == ETH_TYPE_IP {
            put(out, F::IPV4_SRC);
            put(out, F::IPV4_DST);
        } else {
            put(out, F::IPV6_SRC);
            put(out, F::IPV6_DST);
        }
        put(out, F::IP_FRAG);
        put(out, if oxm { F::IP_DSCP_SHIFTED } else { F::IP_DSCP });
        put(out, F::IP_ECN);
        put(out, F::IP_TTL);
        put(out, F::IPV6_LABEL);
        if mk.nw_proto() != 0 {
            put(out, F::IP_PROTO);
            let icmp6 = dl_type == ETH_TYPE_IPV6 && k.nw_proto() == 58;
            match k.nw_proto() {
                6 => [F::TCP_SRC, F::TCP_DST, F::TCP_FLAGS]
                    .into_iter()
                    .for_each(|f| put(out, f)),
                17 => [F::UDP_SRC, F::UDP_DST]
                    .into_iter()
                    .for_each(|f| put(out, f)),
                132 => [F::SCTP_SRC, F::SCTP_DST]
                    .into_iter()
                    .for_each(|f| put(out, f)),
                1 if dl_type == ETH_TYPE_IP => {
                    put(out, F::ICMPV4_TYPE);
                    put(out, F::ICMPV4_CODE);
                }
                58 if icmp6 => {
                    put(out, F::ICMPV6_TYPE);
                    put(out, F::ICMPV6_CODE);
                    let t = k.tp_src();
                    if (t == 135 || t == 136) && k.tp_dst() == 0 {
                        put(out, F::ND_TARGET);
                        put(out, if t == 135 { F::ND_SLL } else { F::ND_TLL });
                    }
                }
                _ => {}
            }
        }
    } else if dl_type == ETH_TYPE_ARP || dl_type == ETH_TYPE_RARP {
        for f in [F::ARP_OP, F::ARP_SPA, F::ARP_TPA, F::ARP_SHA, F::ARP_THA] {
            put(out, f);
        }
    }

    for f in [
        F::TUN_ID,
        F::TUN_FLAGS,
        F::TUN_SRC,
        F::TUN_DST,
        F::TUN_IPV6_SRC,
        F::TUN_IPV6_DST,
        F::TUN_GBP_ID,
        F::TUN_GBP_FLAGS,
    ] {
        put(out, f);
    }
    put_tun_metadata(out, version, m, tlv);

    if version < OF15 {
        (0..16).for_each(|i| put(out, FieldId::reg(i)));
    } else {
        (0..8).for_each(|i| put(out, FieldId::xreg(i)));
    }

    put(out, F::PKT_MARK);
    for f in [F::CT_STATE, F::CT_ZONE, F::CT_MARK, F::CT_LABEL] {
        put(out, f);
    }
    // The tuple's IPv4 and IPv6 addresses share storage: the flow's family says which.
    if dl_type == ETH_TYPE_IPV6 {
        put(out, F::CT_IPV6_SRC);
        put(out, F::CT_IPV6_DST);
    } else {
        put(out, F::CT_NW_SRC);
        put(out, F::CT_NW_DST);
    }
    if F::CT_NW_PROTO.field().get(m.key()) != 0 {
        for f in [F::CT_NW_PROTO, F::CT_TP_SRC, F::CT_TP_DST] {
            put(out, f);
        }
    }
    put(out, F::METADATA);

    if cookie_mask != 0 {
        let id = WireId {
            class: NXM_NX_COOKIE.0,
            field: NXM_NX_COOKIE.1,
            experimenter: 0,
        };
        let masked = cookie_mask != u64::MAX;
        put_entry(
            out,
            id,
            8,
            u128::from(cookie & cookie_mask),
            masked.then_some(u128::from(cookie_mask)),
        );
    }
    // A match on packet fields none of whose entries went out (a VLAN PCP without a VID in
    // OXM) still says Ethernet: OVS then writes packet_type=(0,0) first.
    let ethernet = || {
        fields::fields()
            .iter()
            .any(|f| says_ethernet(f.id) && f.is_matched(m.mask()))
    };
    if !implied.get() && ethernet() {
        let mut pt = Vec::with_capacity(8);
        put_entry(
            &mut pt,
            WireId {
                class: OXM_OF_PACKET_TYPE.0,
                field: OXM_OF_PACKET_TYPE.1,
                experimenter: 0,
            },
            4,
            0,
            None,
        );
        out.splice(start..start, pt);
    }
    out.len() - start
}

fn pad8(out: &mut Vec<u8>, from: usize) {
    let n = (out.len() - from).next_multiple_of(8) - (out.len() - from);
    out.resize(out.len() + n, 0);
}

/// Appends `m` as an `nx_match` padded to 8 bytes (NXT_FLOW_MOD, NXST_FLOW) with the cookie
/// pseudo-field when `cookie_mask` is not zero; returns the unpadded length (`match_len`).
pub fn put_nx_match(
    out: &mut Vec<u8>,
    m: &PipeMatch,
    cookie: u64,
    cookie_mask: u64,
    tlv: &TlvLens,
) -> usize {
    let start = out.len();
    let n = put_raw(out, 0, m, cookie, cookie_mask, tlv);
    pad8(out, start);
    n
}

/// Appends `m` as an OpenFlow 1.2+ `ofp_match` of type `OFPMT_OXM` for `version`: type, length
/// (header and fields, unpadded), the fields, padding to 8 bytes. Returns the bytes appended.
pub fn put_oxm_match(out: &mut Vec<u8>, version: Version, m: &PipeMatch, tlv: &TlvLens) -> usize {
    let start = out.len();
    out.extend_from_slice(&OFPMT_OXM.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    let n = put_raw(out, version.wire(), m, 0, 0, tlv);
    let len = (4 + n) as u16;
    out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    pad8(out, start);
    out.len() - start
}

/// A decoded match with the cookie pseudo-field of NXM requests (0/0 when absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NxMatch {
    pub match_: PipeMatch,
    pub cookie: u64,
    pub cookie_mask: u64,
}

/// Whether the value's bits fit the field (OVS's `mf_is_value_valid()`).
pub(crate) fn value_ok(field: FieldId, v: u128) -> bool {
    let limit: u128 = match field {
        F::IP_DSCP => return v & !0xfc == 0,
        F::IP_DSCP_SHIFTED => 0x3f,
        F::IP_ECN | F::IP_FRAG => 3,
        F::TCP_FLAGS => 0x0fff,
        F::ARP_OP => 0xff,
        F::VLAN_VID => 0x1fff,
        F::VLAN_PCP | F::MPLS_TC => 7,
        F::IPV6_LABEL | F::MPLS_LABEL => 0xfffff,
        F::MPLS_BOS | F::TUN_FLAGS => 1,
        F::CT_STATE => 0xff,
        _ => return true,
    };
    v <= limit
}

/// Decodes the fields of an `nx_match` or OXM list (`p`, no padding), as OVS's `nx_pull_raw()`
/// does with strict checks; `allow_cookie` accepts the `NXM_NX_COOKIE` pseudo-field.
pub fn pull_raw(p: &[u8], allow_cookie: bool) -> Result<NxMatch, OfpErr> {
    let mut key = PipeKey::new();
    let mut mask = PipeMask::new();
    let (mut cookie, mut cookie_mask) = (0u64, 0u64);
    let mut rest = p;
    while !rest.is_empty() {
        let hdr = OxmHeader::parse(rest)?;
        rest = &rest[hdr.header_len()..];
        let payload = rest.get(..hdr.payload_len()).ok_or(OfpErr::OfpbmcBadLen)?;
        rest = &rest[hdr.payload_len()..];
        let w = hdr.value_len();
        let (vb, mb) = if hdr.hasmask {
            (&payload[..w], Some(&payload[w..2 * w]))
        } else {
            (payload, None)
        };
        if let Some(mb) = mb
            && vb.iter().zip(mb).any(|(v, m)| v & !m != 0)
        {
            return Err(OfpErr::OfpbmcBadWildcards);
        }
        let is_cookie = hdr.id()
            == WireId {
                class: NXM_NX_COOKIE.0,
                field: NXM_NX_COOKIE.1,
                experimenter: 0,
            }
            && w == 8;
        if is_cookie && allow_cookie {
            if cookie_mask != 0 {
                return Err(OfpErr::OfpbmcDupField);
            }
            cookie = be_n(vb) as u64;
            cookie_mask = mb.map_or(u64::MAX, |m| be_n(m) as u64);
            continue;
        }
        if (hdr.class, hdr.field) == OXM_OF_PACKET_TYPE && hdr.experimenter == 0 && w == 4 {
            // Ethernet (namespace 0, type 0) is what every flow here matches.
            if mb.is_some() || be_n(vb) != 0 {
                return Err(OfpErr::OfpbmcBadValue);
            }
            continue;
        }
        let fh = field_by_header(&hdr).ok_or(OfpErr::OfpbmcBadField)?;
        let f = fh.field.field();
        if f.id.is_tun_metadata() {
            pull_tun_metadata(f, &mut key, &mut mask, vb, mb)?;
            continue;
        }
        let mb = match mb {
            Some(m) => Some(low16(m).ok_or(OfpErr::OfpbmcBadValue)?),
            None => None,
        };
        let w = vb.len();
        let value = be_n(vb);
        let full = ones(8 * w as u32);
        let m = mb.map_or(full, be_n);
        if !f.maskable && m != 0 && m != full {
            return Err(OfpErr::OfpbmcBadMask);
        }
        let (field, value, m) = if fh.field == F::IN_PORT && w == 4 {
            let p = port_from_ofp11(value as u32).ok_or(OfpErr::OfpbmcBadValue)?;
            (F::IN_PORT, u128::from(p), 0xffff)
        } else if f.id.is_tun_metadata() {
            // Keep the wire width: an exact value of N bytes is an N-byte mask.
            (fh.field, value, m)
        } else if m == full {
            (fh.field, value, f.full_mask())
        } else {
            (fh.field, value, m)
        };
        if !value_ok(field, value) {
            return Err(OfpErr::OfpbmcBadValue);
        }
        let f = field.field();
        // OVS asks only for a tracked connection here; whether the tuple's addresses fit the
        // flow's IP version is the flow_mod's check (`ct_tuple_consistent`).
        let prereq = match f.prereq {
            Prereq::CtIpv4 | Prereq::CtIpv6 => Prereq::Ct,
            p => p,
        };
        if !prereq.is_met_match(&key, &mask) {
            return Err(OfpErr::OfpbmcBadPrereq);
        }
        if f.is_matched(&mask) {
            return Err(OfpErr::OfpbmcDupField);
        }
        let m = if f.id.is_tun_metadata() && mb.is_none() {
            ones(8 * w as u32)
        } else {
            m
        };
        f.match_set(&mut key, &mut mask, value, m)
            .map_err(|_| OfpErr::OfpbmcBadValue)?;
    }
    Ok(NxMatch {
        match_: PipeMatch::new(&key, &mask),
        cookie,
        cookie_mask,
    })
}

/// Whether a match's conntrack tuple addresses fit its IP version (OVS's check in
/// `ofputil_decode_flow_mod()`): IPv4 addresses only in IPv4 flows, IPv6 ones only in IPv6
/// flows. The two share storage here, so an IPv4 flow may only use the first four bytes.
pub fn ct_tuple_consistent(m: &PipeMatch) -> bool {
    let mask = m.mask();
    let any = [F::CT_IPV6_SRC, F::CT_IPV6_DST]
        .iter()
        .any(|f| f.field().is_matched(mask));
    let beyond_v4 = [F::CT_IPV6_SRC, F::CT_IPV6_DST]
        .iter()
        .any(|f| f.field().get_mask(mask) & !(0xffff_ffffu128 << 96) != 0);
    match m.key().dp.eth_type() {
        0x86dd => true,
        0x0800 => !beyond_v4,
        _ => !any,
    }
}

/// Decodes an `nx_match` of `match_len` bytes at the start of `buf`, which holds it padded to
/// 8 bytes (NXT_FLOW_MOD, NXST_FLOW). Returns the match and the bytes consumed (padded).
pub fn pull_nx_match(
    buf: &[u8],
    match_len: usize,
    allow_cookie: bool,
) -> Result<(NxMatch, usize), OfpErr> {
    let padded = match_len.next_multiple_of(8);
    if buf.len() < padded {
        return Err(OfpErr::OfpbmcBadLen);
    }
    Ok((pull_raw(&buf[..match_len], allow_cookie)?, padded))
}

/// Decodes an OpenFlow 1.2+ `ofp_match` of type `OFPMT_OXM` at the start of `buf`; returns the
/// match and the bytes it takes, padding included.
pub fn pull_oxm_match(buf: &[u8]) -> Result<(PipeMatch, usize), OfpErr> {
    let hdr = buf.get(..4).ok_or(OfpErr::OfpbmcBadLen)?;
    let (ty, len) = (
        u16::from_be_bytes([hdr[0], hdr[1]]),
        usize::from(u16::from_be_bytes([hdr[2], hdr[3]])),
    );
    if len < 4 {
        return Err(OfpErr::OfpbmcBadLen);
    }
    if ty != OFPMT_OXM {
        return Err(OfpErr::OfpbmcBadType);
    }
    let padded = len.next_multiple_of(8);
    if buf.len() < padded {
        return Err(OfpErr::OfpbmcBadLen);
    }
    let m = pull_raw(&buf[4..len], false)?;
    Ok((m.match_, padded))
}

#[cfg(test)]
#[path = "nxm_tests.rs"]
pub(crate) mod tests;
