//! The OpenFlow field table, modelled on OVS's meta-flow (`lib/meta-flow.c`, ovs-fields(7)).
//!
//! One [`Field`] per OpenFlow field: its name and aliases (`dl_dst` for `eth_dst`, `nw_src` for
//! `ip_src`, ...), its NXM/OXM names (`NXM_OF_ETH_DST`, `OXM_OF_IPV4_DST`, ...), where it lives
//! ([`Loc`]: bytes of the [`flow::FlowKey`] in network order, or a register, `xreg`, `xxreg` or
//! `metadata` slot of [`PipeMeta`]), its width, its bit position in that
//! storage, whether it can be matched with an arbitrary mask, whether `set_field`, `load` and
//! `move` may write it, and its prerequisites.
//!
//! Values are handled as `u128` in the field's own units ("field space"): `dl_vlan` is the 12-bit
//! VID, `mpls_tc` the 3-bit traffic class, `nw_tos` the TOS byte with its two ECN bits clear.
//! Generic accessors read and write a field ([`Field::get`], [`Field::set`]), add it to a match
//! ([`Field::match_set`], OVS's `mf_set()`), and read and write bit ranges ([`Subfield`],
//! the `NXM_NX_REG0[0..3]` syntax of `load` and `move`).
//!
//! Some fields share storage, exactly as in OVS: `icmp_type` and `tp_src` are both the L4
//! source word, `arp_op` is `nw_proto`, `arp_spa` is `nw_src`, `nd_sll` is `arp_sha`, and
//! `nw_tos`, `ip_dscp` and `nw_ecn` are bits of the TOS byte.
//!
//! # VLAN
//! The key's `vlan_tci` has [`VLAN_CFI`] set when a tag is present. `dl_vlan=5` matches
//! `vlan_tci & 0x1fff == 0x1005`, `dl_vlan=0xffff` (OpenFlow 1.0's "no VLAN") matches
//! `vlan_tci == 0`, and `vlan_tci=0/0x1000` matches untagged packets, as ovs-fields(7) says.
//!
//! # Tunnel metadata
//! `tun_metadata0`..`tun_metadata63` live where the bridge's TLV map puts them
//! ([`crate::tun_md`]); a field no bridge maps has 16 bytes by its number, where an exact value
//! masks its significant bytes (OVS's dynamic allocation, as `ovs-ofctl` reads a flow without
//! a switch's table). Values are up to 124 bytes: [`Field::get`] and the
//! other `u128` accessors see their last 16 bytes, [`crate::tun_md::value`] and
//! [`Field::match_tun_md_bytes`] all of them. Presence is a bit of [`PipeMeta`]: `set_field`
//! makes a field present, and a match on a field matches its presence too (`tun_metadata0`
//! alone, a zero mask, matches only that).

use std::fmt;

use flow::FlowWords;
#[cfg(test)]
use flow::key::GENEVE_OPTS_OFS;
use flow::key::VLAN_CFI;

use crate::pipekey::{PipeKey, PipeMask, PipeMeta};

pub use crate::tun_md::{N_TUN_METADATA, TUN_METADATA_MAX_LEN};

mod tun;
pub use tun::set_tun_md_wide;
use tun::{read_tun_md, write_tun_md};

const VID_MASK: u128 = 0x0fff;
const PCP_MASK: u128 = 0xe000;
const CFI: u128 = VLAN_CFI as u128;

/// `n` one bits (all 128 when `n >= 128`).
pub const fn ones(n: u32) -> u128 {
    if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    }
}

/// Where a field's storage lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    /// `len` bytes at byte `offset` of the datapath key, big-endian.
    Key { offset: usize, len: usize },
    /// `reg<n>`.
    Reg(usize),
    /// `xreg<n>` (two registers).
    XReg(usize),
    /// `xxreg<n>` (four registers).
    XXReg(usize),
    /// The `metadata` field.
    Metadata,
    /// `tun_metadata<n>` (see the module documentation).
    TunMetadata(usize),
    /// The `conj_id` of [`PipeMeta`].
    ConjId,
    /// The `skb_priority` of [`PipeMeta`].
    SkbPriority,
}

impl Loc {
    /// Width of the storage in bits.
    pub fn bits(self) -> u32 {
        match self {
            Loc::Key { len, .. } => 8 * len as u32,
            Loc::Reg(_) | Loc::ConjId | Loc::SkbPriority => 32,
            Loc::XReg(_) | Loc::Metadata => 64,
            Loc::XXReg(_) | Loc::TunMetadata(_) => 128,
        }
    }

    /// The words of the datapath key the storage lies in (bit `i` for word `i`), or `None`
    /// when it is pipeline metadata: a key or mask none of whose words is present there reads
    /// zero, without reading.
    pub fn key_words(self) -> Option<u64> {
        let (offset, len) = match self {
            Loc::Key { offset, len } => (offset, len),
            _ => return None,
        };
        let (first, last) = (offset / 8, (offset + len - 1) / 8);
        let upto = if last >= 63 {
            u64::MAX
        } else {
            (1u64 << (last + 1)) - 1
        };
        Some(upto & u64::MAX.checked_shl(first as u32).unwrap_or(0))
    }
}

/// A field's prerequisite: what the match must pin down before the field may be matched or
/// written (OVS's `enum mf_prereqs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prereq {
    None,
    /// `dl_type=0x0800`.
    Ipv4,
    /// `dl_type=0x86dd`.
    Ipv6,
    /// IPv4 or IPv6.
    IpAny,
    /// ARP or RARP.
    Arp,
    /// IPv4/IPv6 TCP, not a later fragment.
    Tcp,
    /// IPv4/IPv6 UDP, not a later fragment.
    Udp,
    /// IPv4/IPv6 SCTP, not a later fragment.
    Sctp,
    /// TCP, UDP or SCTP (what matching on `tp_src`/`tp_dst` needs).
    L4,
    /// ICMPv4.
    IcmpV4,
    /// ICMPv6.
    IcmpV6,
    /// ICMPv4 or ICMPv6 (what matching on `icmp_type`/`icmp_code` needs).
    IcmpAny,
    /// An ICMPv6 neighbor solicitation or advertisement (type 135 or 136, code 0).
    Nd,
    /// An ICMPv6 neighbor solicitation.
    NdSolicit,
    /// An ICMPv6 neighbor advertisement.
    NdAdvert,
    /// MPLS unicast or multicast.
    Mpls,
    /// A VLAN tag (`vlan_tci` with the CFI bit).
    VlanVid,
    /// A valid connection (OVS's `MFP_CT_VALID`): the conntrack tuple fields are only
    /// meaningful for a packet conntrack has tracked and not found invalid.
    Ct,
    /// A valid connection and IPv4 (the tuple's addresses share storage with the IPv6 ones,
    /// so the family decides which fields they are).
    CtIpv4,
    /// A valid connection and IPv6.
    CtIpv6,
}

const ETH_TYPE_IP: u16 = 0x0800;
const ETH_TYPE_IPV6: u16 = 0x86dd;
const ETH_TYPE_ARP: u16 = 0x0806;
const ETH_TYPE_RARP: u16 = 0x8035;
const ETH_TYPE_MPLS: u16 = 0x8847;
const ETH_TYPE_MPLS_MCAST: u16 = 0x8848;

/// Whether a match pins conntrack state down to a valid connection (OVS's `is_ct_valid()` on a
/// match): one of the state bits only a valid connection has, or `+trk-inv`.
pub fn ct_valid_match(key: &PipeKey, mask: &PipeMask) -> bool {
    use flow::key::ct_state::{DNAT, EST, INV, NEW, REL, RPL, SNAT, TRK};
    let (st, m) = (key.dp.ct_state(), mask.dp.ct_state());
    st & (NEW | EST | REL | RPL | SNAT | DNAT) != 0
        || (st & TRK != 0 && m & INV != 0 && st & INV == 0)
}

/// Whether a packet's conntrack state is a valid connection (OVS's `is_ct_valid()` on a flow:
/// conntrack always sets `new`, `est` or `rpl` on one).
pub fn ct_valid_flow(key: &FlowWords) -> bool {
    use flow::key::ct_state::{EST, NEW, RPL};
    key.ct_state() & (NEW | EST | RPL) != 0
}

impl Prereq {
    /// Whether `key` meets the prerequisite (OVS's `mf_are_prereqs_ok()` on flow values).
    pub fn is_met(self, key: &PipeKey) -> bool {
        self.is_met_ct(key, ct_valid_flow(&key.dp))
    }

    /// Whether a match meets the prerequisite, conntrack validity judged on the match
    /// ([`ct_valid_match`]).
    pub fn is_met_match(self, key: &PipeKey, mask: &PipeMask) -> bool {
        self.is_met_ct(key, ct_valid_match(key, mask))
    }

    /// Whether `key` meets the prerequisite, with the caller's judgement of whether the
    /// conntrack state is a valid connection.
    pub fn is_met_ct(self, key: &PipeKey, ct_valid: bool) -> bool {
        let k = &key.dp;
        let dl_type = k.eth_type();
        let ip_any = dl_type == ETH_TYPE_IP || dl_type == ETH_TYPE_IPV6;
        let not_later = k.nw_frag() & flow::key::nw_frag::LATER == 0;
        let proto = |p: u8| ip_any && k.nw_proto() == p && not_later;
        let icmp4 = dl_type == ETH_TYPE_IP && k.nw_proto() == 1;
        let icmp6 = dl_type == ETH_TYPE_IPV6 && k.nw_proto() == 58;
        let nd = icmp6 && k.tp_dst() == 0;
        match self {
            Prereq::None => true,
            Prereq::Ipv4 => dl_type == ETH_TYPE_IP,
            Prereq::Ipv6 => dl_type == ETH_TYPE_IPV6,
            Prereq::IpAny => ip_any,
            Prereq::Arp => dl_type == ETH_TYPE_ARP || dl_type == ETH_TYPE_RARP,
            Prereq::Tcp => proto(6),
            Prereq::Udp => proto(17),
            Prereq::Sctp => proto(132),
            Prereq::L4 => proto(6) || proto(17) || proto(132),
            Prereq::IcmpV4 => icmp4,
            Prereq::IcmpV6 => icmp6,
            Prereq::IcmpAny => icmp4 || icmp6,
            Prereq::Nd => nd && (k.tp_src() == 135 || k.tp_src() == 136),
            Prereq::NdSolicit => nd && k.tp_src() == 135,
            Prereq::NdAdvert => nd && k.tp_src() == 136,
            Prereq::Mpls => dl_type == ETH_TYPE_MPLS || dl_type == ETH_TYPE_MPLS_MCAST,
            Prereq::VlanVid => k.vlan_tci() & VLAN_CFI != 0,
            Prereq::Ct => ct_valid,
            Prereq::CtIpv4 => ct_valid && dl_type == ETH_TYPE_IP,
            Prereq::CtIpv6 => ct_valid && dl_type == ETH_TYPE_IPV6,
        }
    }
}

impl fmt::Display for Prereq {
    /// The prerequisite in flow syntax, as error messages name it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Prereq::None => "none",
            Prereq::Ipv4 => "ip",
            Prereq::Ipv6 => "ipv6",
            Prereq::IpAny => "ip or ipv6",
            Prereq::Arp => "arp or rarp",
            Prereq::Tcp => "tcp",
            Prereq::Udp => "udp",
            Prereq::Sctp => "sctp",
            Prereq::L4 => "tcp, udp or sctp",
            Prereq::IcmpV4 => "icmp",
            Prereq::IcmpV6 => "icmp6",
            Prereq::IcmpAny => "icmp or icmp6",
            Prereq::Nd => "icmp6,icmp_type=135 or 136,icmp_code=0",
            Prereq::NdSolicit => "icmp6,icmp_type=135,icmp_code=0",
            Prereq::NdAdvert => "icmp6,icmp_type=136,icmp_code=0",
            Prereq::Mpls => "mpls or mplsm",
            Prereq::VlanVid => "vlan_tci=0x1000/0x1000",
            Prereq::Ct => {
                "ct_state of a valid connection (+trk with +new, +est, +rel, +rpl or -inv)"
            }
            Prereq::CtIpv4 => {
                "ip and ct_state of a valid connection (+trk with +new, +est, +rel, +rpl or -inv)"
            }
            Prereq::CtIpv6 => {
                "ipv6 and ct_state of a valid connection (+trk with +new, +est, +rel, +rpl or -inv)"
            }
        })
    }
}

/// How a field's value is written in flow syntax (OVS's `enum mf_string`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueFormat {
    Decimal,
    Hex,
    Ethernet,
    Ipv4,
    Ipv6,
    /// An OpenFlow port number or name.
    OfPort,
    /// `no`, `yes`, `first`, `later`, `not_later`.
    Frag,
    /// TCP flag names (`+syn-ack`, `syn|ack`) or numbers.
    TcpFlags,
    /// Tunnel flag names (`oam`).
    TunFlags,
    /// Connection-state names (`+trk+new`, `trk|new`).
    CtState,
}

/// Index of a field in the table.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldId(u8);

impl fmt::Debug for FieldId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field().name)
    }
}

impl fmt::Display for FieldId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field().name)
    }
}

macro_rules! field_ids {
    ($($id:ident),* $(,)?) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[repr(u8)]
        enum Idx { $($id,)* _N }
        impl FieldId { $(pub const $id: FieldId = FieldId(Idx::$id as u8);)* }
        /// Number of fields in the table.
        pub const N_FIELDS: usize = Idx::_N as usize;
    };
}

field_ids! {
    TUN_ID, TUN_SRC, TUN_DST, TUN_IPV6_SRC, TUN_IPV6_DST, TUN_GBP_ID, TUN_GBP_FLAGS, TUN_FLAGS,
    TUN_METADATA0, TUN_METADATA1, TUN_METADATA2, TUN_METADATA3, TUN_METADATA4, TUN_METADATA5,
    TUN_METADATA6, TUN_METADATA7, TUN_METADATA8, TUN_METADATA9, TUN_METADATA10, TUN_METADATA11,
    TUN_METADATA12, TUN_METADATA13, TUN_METADATA14, TUN_METADATA15, TUN_METADATA16,
    TUN_METADATA17, TUN_METADATA18, TUN_METADATA19, TUN_METADATA20, TUN_METADATA21,
    TUN_METADATA22, TUN_METADATA23, TUN_METADATA24, TUN_METADATA25, TUN_METADATA26,
    TUN_METADATA27, TUN_METADATA28, TUN_METADATA29, TUN_METADATA30, TUN_METADATA31,
    TUN_METADATA32, TUN_METADATA33, TUN_METADATA34, TUN_METADATA35, TUN_METADATA36,
    TUN_METADATA37, TUN_METADATA38, TUN_METADATA39, TUN_METADATA40, TUN_METADATA41,
    TUN_METADATA42, TUN_METADATA43, TUN_METADATA44, TUN_METADATA45, TUN_METADATA46,
    TUN_METADATA47, TUN_METADATA48, TUN_METADATA49, TUN_METADATA50, TUN_METADATA51,
    TUN_METADATA52, TUN_METADATA53, TUN_METADATA54, TUN_METADATA55, TUN_METADATA56,
    TUN_METADATA57, TUN_METADATA58, TUN_METADATA59, TUN_METADATA60, TUN_METADATA61,
    TUN_METADATA62, TUN_METADATA63,
    METADATA, IN_PORT, PKT_MARK, CT_STATE, CT_ZONE, CT_MARK, CT_LABEL,
    CT_NW_PROTO, CT_NW_SRC, CT_NW_DST, CT_IPV6_SRC, CT_IPV6_DST, CT_TP_SRC, CT_TP_DST,
    DP_HASH, RECIRC_ID,
    REG0, REG1, REG2, REG3, REG4, REG5, REG6, REG7, REG8, REG9, REG10, REG11, REG12, REG13,
    REG14, REG15,
    XREG0, XREG1, XREG2, XREG3, XREG4, XREG5, XREG6, XREG7,
    XXREG0, XXREG1, XXREG2, XXREG3,
    ETH_SRC, ETH_DST, ETH_TYPE, VLAN_TCI, DL_VLAN, VLAN_VID, DL_VLAN_PCP, VLAN_PCP,
    MPLS_LABEL, MPLS_TC, MPLS_BOS, MPLS_TTL,
    IPV4_SRC, IPV4_DST, IPV6_SRC, IPV6_DST, IPV6_LABEL, IP_PROTO, IP_DSCP, IP_DSCP_SHIFTED,
    IP_ECN, IP_TTL, IP_FRAG,
    ARP_OP, ARP_SPA, ARP_TPA, ARP_SHA, ARP_THA,
    TCP_SRC, TCP_DST, TCP_FLAGS, UDP_SRC, UDP_DST, SCTP_SRC, SCTP_DST,
    ICMPV4_TYPE, ICMPV4_CODE, ICMPV6_TYPE, ICMPV6_CODE,
    ND_TARGET, ND_SLL, ND_TLL,
    CONJ_ID,
    SKB_PRIORITY,
}

impl FieldId {
    /// `reg<n>` (`n` < 16).
    pub fn reg(n: usize) -> FieldId {
        FieldId(Self::REG0.0 + (n % 16) as u8)
    }
    /// `xreg<n>` (`n` < 8).
    pub fn xreg(n: usize) -> FieldId {
        FieldId(Self::XREG0.0 + (n % 8) as u8)
    }
    /// `xxreg<n>` (`n` < 4).
    pub fn xxreg(n: usize) -> FieldId {
        FieldId(Self::XXREG0.0 + (n % 4) as u8)
    }
    /// `tun_metadata<n>` (`n` < 64).
    pub const fn tun_metadata(n: usize) -> FieldId {
        FieldId(Self::TUN_METADATA0.0 + (n % N_TUN_METADATA) as u8)
    }

    /// The field's table entry.
    pub fn field(self) -> &'static Field {
        &FIELDS[self.0 as usize]
    }

    /// Position in the table.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// Whether this is one of the tunnel-metadata fields.
    pub fn is_tun_metadata(self) -> bool {
        matches!(self.field().loc, Loc::TunMetadata(_))
    }
}

/// One OpenFlow field.
#[derive(Debug)]
pub struct Field {
    pub id: FieldId,
    /// Canonical name (`eth_dst`, `ip_src`, `reg0`): what `set_field:...->NAME` prints.
    pub name: &'static str,
    /// Other names accepted as match keys and `set_field` targets (`dl_dst`, `nw_src`).
    pub aliases: &'static [&'static str],
    /// NXM/OXM names accepted in subfield syntax; the first is the one printed
    /// (`NXM_OF_ETH_DST[]`). Empty for fields without one (then the name is printed).
    pub nxm: &'static [&'static str],
    pub loc: Loc,
    /// Width of the OpenFlow value in bytes: values that do not fit are out of range.
    pub n_bytes: usize,
    /// Width in bits, as subfields (`[start..end]`) and `move` count them.
    pub n_bits: u32,
    /// Position of the value's bit 0 in the storage.
    pub shift: u32,
    /// Storage bits that hold the value (`get` and `set`).
    pub smask: u128,
    /// Storage bits an exact match masks (usually `smask`; the whole L4 port word for
    /// `icmp_type`, all 32 bits for `ipv6_label` as OVS does).
    pub exact_mask: u128,
    /// Whether arbitrary bitwise masks may be matched.
    pub maskable: bool,
    /// Whether `set_field`, `load` and `move` may write the field.
    pub writable: bool,
    pub prereq: Prereq,
    pub format: ValueFormat,
}

impl Field {
    const fn key(id: FieldId, name: &'static str, offset: usize, len: usize) -> Field {
        let bits = 8 * len as u32;
        Field {
            id,
            name,
            aliases: &[],
            nxm: &[],
            loc: Loc::Key { offset, len },
            n_bytes: len,
            n_bits: bits,
            shift: 0,
            smask: ones(bits),
            exact_mask: ones(bits),
            maskable: false,
            writable: false,
            prereq: Prereq::None,
            format: ValueFormat::Decimal,
        }
    }
    const fn at(self, loc: Loc, bits: u32) -> Field {
        Field {
            loc,
            n_bytes: bits.div_ceil(8) as usize,
            n_bits: bits,
            smask: ones(bits),
            exact_mask: ones(bits),
            ..self
        }
    }
    /// A value of `n_bytes` bytes and `bits` bits at `shift` in the storage.
    const fn bits(self, n_bytes: usize, bits: u32, shift: u32) -> Field {
        Field {
            n_bytes,
            n_bits: bits,
            shift,
            smask: ones(bits) << shift,
            exact_mask: ones(bits) << shift,
            ..self
        }
    }
    const fn smask(self, smask: u128, exact_mask: u128) -> Field {
        Field {
            smask,
            exact_mask,
            ..self
        }
    }
    const fn mask(self) -> Field {
        Field {
            maskable: true,
            ..self
        }
    }
    const fn rw(self) -> Field {
        Field {
            writable: true,
            ..self
        }
    }
    const fn pre(self, prereq: Prereq) -> Field {
        Field { prereq, ..self }
    }
    const fn fmt(self, format: ValueFormat) -> Field {
        Field { format, ..self }
    }
    const fn nxm(self, nxm: &'static [&'static str]) -> Field {
        Field { nxm, ..self }
    }
    const fn aka(self, aliases: &'static [&'static str]) -> Field {
        Field { aliases, ..self }
    }
}

mod table;
use table::FIELDS;
pub use table::{field_by_name, field_by_nxm_name, fields};

fn read_bytes(dp: &FlowWords, offset: usize, len: usize) -> u128 {
    let mut b = [0u8; 16];
    dp.bytes_at(offset, &mut b[16 - len..]);
    u128::from_be_bytes(b)
}

fn write_bytes(dp: &mut FlowWords, offset: usize, len: usize, v: u128) {
    let b = v.to_be_bytes();
    dp.set_bytes_at(offset, &b[16 - len..]);
}

/// Reads a location's storage from a key or mask.
pub fn read_storage(dp: &FlowWords, meta: &PipeMeta, loc: Loc) -> u128 {
    match loc {
        Loc::Key { offset, len } => read_bytes(dp, offset, len),
        Loc::Reg(n) => u128::from(meta.regs[n % 16]),
        Loc::XReg(n) => u128::from(meta.xreg(n)),
        Loc::XXReg(n) => meta.xxreg(n),
        Loc::Metadata => u128::from(meta.metadata),
        Loc::ConjId => u128::from(meta.conj_id),
        Loc::SkbPriority => u128::from(meta.skb_priority),
        Loc::TunMetadata(n) => read_tun_md(dp, meta, n),
    }
}

/// Writes a location's storage in a key or mask.
pub fn write_storage(dp: &mut FlowWords, meta: &mut PipeMeta, loc: Loc, v: u128) {
    match loc {
        Loc::Key { offset, len } => write_bytes(dp, offset, len, v),
        Loc::Reg(n) => meta.regs[n % 16] = v as u32,
        Loc::XReg(n) => meta.set_xreg(n, v as u64),
        Loc::XXReg(n) => meta.set_xxreg(n, v),
        Loc::Metadata => meta.metadata = v as u64,
        Loc::ConjId => meta.conj_id = v as u32,
        Loc::SkbPriority => meta.skb_priority = v as u32,
        Loc::TunMetadata(n) => write_tun_md(dp, meta, n, v),
    }
}

/// Why a field could not be added to a match.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    #[error("field is not maskable")]
    NotMaskable,
    #[error("field set more than once")]
    SetTwice,
    #[error("value has 1-bits outside the mask")]
    OutsideMask,
    #[error("value is longer than the field")]
    TooLong,
}

/// Number of significant bytes of `v` (0 for zero).
pub fn sig_bytes(v: u128) -> usize {
    (128 - v.leading_zeros() as usize).div_ceil(8)
}

impl Field {
    /// The bits a value may have (`smask` in field space).
    pub fn value_mask(&self) -> u128 {
        self.smask >> self.shift
    }

    /// All-ones over the field's OpenFlow width (`n_bytes`): an exact mask.
    pub fn full_mask(&self) -> u128 {
        ones(8 * self.n_bytes as u32)
    }

    fn storage(&self, dp: &FlowWords, meta: &PipeMeta) -> u128 {
        read_storage(dp, meta, self.loc)
    }

    /// The field's value in `key`.
    pub fn get(&self, key: &PipeKey) -> u128 {
        (self.storage(&key.dp, &key.meta) & self.smask) >> self.shift
    }

    /// The field's value in `key` as `n_bytes` big-endian bytes (OVS's `union mf_value`).
    pub fn get_bytes(&self, key: &PipeKey) -> Vec<u8> {
        let n = self.n_bytes.min(16);
        self.get(key).to_be_bytes()[16 - n..].to_vec()
    }

    /// The field's mask in `mask`, in field space.
    pub fn get_mask(&self, mask: &PipeMask) -> u128 {
        (self.storage(&mask.dp, &mask.meta) & self.smask) >> self.shift
    }

    /// Whether `mask` selects any bit of the field's storage an exact match would select.
    pub fn is_matched(&self, mask: &PipeMask) -> bool {
        if let Loc::TunMetadata(n) = self.loc {
            return crate::tun_md::present(&mask.meta, n);
        }
        self.storage(&mask.dp, &mask.meta) & self.exact_mask != 0
    }

    fn put(&self, dp: &mut FlowWords, meta: &mut PipeMeta, bits: u128, which: u128) {
        let s = read_storage(dp, meta, self.loc);
        write_storage(dp, meta, self.loc, (s & !which) | (bits & which));
    }

    /// Sets the field in `key` as `set_field` does (OVS's `mf_set_flow_value()`): `dl_vlan`,
    /// `vlan_vid` and the PCP fields also mark a tag present, `dl_vlan=0xffff` removes the tag,
    /// tunnel metadata becomes present.
    pub fn set(&self, key: &mut PipeKey, v: u128) {
        let (dp, meta) = (&mut key.dp.0, &mut key.meta);
        match self.id {
            FieldId::DL_VLAN => {
                if v == 0xffff {
                    dp.set_vlan_tci(0);
                } else {
                    self.put(dp, meta, CFI | (v & VID_MASK), CFI | VID_MASK);
                }
            }
            FieldId::VLAN_VID => self.put(dp, meta, v | CFI, CFI | VID_MASK),
            FieldId::DL_VLAN_PCP | FieldId::VLAN_PCP => {
                self.put(dp, meta, CFI | ((v & 7) << 13), CFI | PCP_MASK)
            }
            _ => {
                if let Loc::TunMetadata(n) = self.loc {
                    set_tun_md_wide(dp, meta, n, &[]);
                }
                self.put(dp, meta, v << self.shift, self.smask)
            }
        }
    }

    /// Sets the bits of the field selected by `m` to those of `v` (OVS's
    /// `mf_set_flow_value_masked()`).
    pub fn set_masked(&self, key: &mut PipeKey, v: u128, m: u128) {
        if let Loc::TunMetadata(n) = self.loc {
            if m == self.value_mask() {
                return self.set(key, v);
            }
            crate::tun_md::set_present(&mut key.meta, n);
            return self.put(&mut key.dp.0, &mut key.meta, v & m, m);
        }
        let cur = self.get(key);
        self.set(key, (cur & !m) | (v & m));
    }

    /// Marks every bit an exact match on the field would select in `mask` (translation's
    /// "consulted" bits).
    pub fn unwildcard(&self, mask: &mut PipeMask) {
        if let Loc::TunMetadata(n) = self.loc {
            crate::tun_md::set_present(&mut mask.meta, n);
            return set_tun_md_wide(
                &mut mask.dp,
                &mut mask.meta,
                n,
                &[0xff; TUN_METADATA_MAX_LEN],
            );
        }
        self.put(
            &mut mask.dp,
            &mut mask.meta,
            self.exact_mask,
            self.exact_mask,
        );
    }

    /// Adds `value`/`mask` (field space; `mask` all-ones over `n_bytes` is an exact match, zero
    /// a wildcard) for this field to a match under construction, as OVS's `mf_set()` does.
    /// `key` is not pre-masked here; [`crate::pipekey::PipeMatch::new`] does that.
    pub fn match_set(
        &self,
        key: &mut PipeKey,
        mask: &mut PipeMask,
        value: u128,
        m: u128,
    ) -> Result<(), MatchError> {
        let full = self.full_mask();
        if m & full == full {
            self.match_exact(key, mask, value)
        } else if m == 0 && !self.id.is_tun_metadata() {
            self.match_wild(key, mask);
            Ok(())
        } else if !self.maskable {
            Err(MatchError::NotMaskable)
        } else {
            self.match_masked(key, mask, value, m)
        }
    }

    fn match_exact(
        &self,
        key: &mut PipeKey,
        mask: &mut PipeMask,
        v: u128,
    ) -> Result<(), MatchError> {
        let (kd, km) = (&mut key.dp.0, &mut key.meta);
        let (md, mm) = (&mut mask.dp.0, &mut mask.meta);
        match self.id {
            FieldId::DL_VLAN => {
                if v == 0xffff {
                    self.put(kd, km, 0, 0xffff);
                    self.put(md, mm, 0xffff, 0xffff);
                } else {
                    self.put(kd, km, CFI | (v & VID_MASK), CFI | VID_MASK);
                    self.put(md, mm, CFI | VID_MASK, CFI | VID_MASK);
                }
            }
            FieldId::VLAN_VID => self.match_vid_masked(key, mask, v, CFI | VID_MASK),
            FieldId::DL_VLAN_PCP | FieldId::VLAN_PCP => {
                self.put(kd, km, CFI | ((v & 7) << 13), CFI | PCP_MASK);
                self.put(md, mm, CFI | PCP_MASK, CFI | PCP_MASK);
            }
            _ if self.id.is_tun_metadata() => return self.match_tun_md(key, mask, v, None),
            _ => {
                self.put(kd, km, v << self.shift, self.exact_mask);
                self.put(md, mm, self.exact_mask, self.exact_mask);
            }
        }
        Ok(())
    }

    fn match_wild(&self, key: &mut PipeKey, mask: &mut PipeMask) {
        let (kd, km) = (&mut key.dp.0, &mut key.meta);
        let (md, mm) = (&mut mask.dp.0, &mut mask.meta);
        let tci_mask = u128::from(md.vlan_tci());
        match self.id {
            // OVS's match_set_any_vid() / match_set_any_pcp(): keep the other half of the TCI
            // if it is matched, else match nothing of the TCI.
            FieldId::DL_VLAN | FieldId::VLAN_VID if tci_mask & PCP_MASK != 0 => {
                self.put(kd, km, 0, VID_MASK);
                self.put(md, mm, 0, VID_MASK);
            }
            FieldId::DL_VLAN_PCP | FieldId::VLAN_PCP if tci_mask & VID_MASK != 0 => {
                self.put(kd, km, 0, PCP_MASK);
                self.put(md, mm, 0, PCP_MASK);
            }
            FieldId::DL_VLAN | FieldId::VLAN_VID | FieldId::DL_VLAN_PCP | FieldId::VLAN_PCP => {
                self.put(kd, km, 0, 0xffff);
                self.put(md, mm, 0, 0xffff);
            }
            _ => {
                self.put(kd, km, 0, self.exact_mask);
                self.put(md, mm, 0, self.exact_mask);
            }
        }
    }

    fn match_masked(
        &self,
        key: &mut PipeKey,
        mask: &mut PipeMask,
        v: u128,
        m: u128,
    ) -> Result<(), MatchError> {
        match self.id {
            FieldId::VLAN_VID => {
                self.match_vid_masked(key, mask, v, m);
                Ok(())
            }
            // A mask covering the whole 20-bit label is an exact match (OVS's mf_set()).
            FieldId::IPV6_LABEL if m & 0xfffff == 0xfffff => self.match_exact(key, mask, v),
            _ if self.id.is_tun_metadata() => self.match_tun_md(key, mask, v, Some(m)),
            _ => {
                self.put(
                    &mut key.dp.0,
                    &mut key.meta,
                    (v & m) << self.shift,
                    self.smask,
                );
                self.put(&mut mask.dp.0, &mut mask.meta, m << self.shift, self.smask);
                Ok(())
            }
        }
    }

    /// OVS's `match_set_vlan_vid_masked()`: the VID and CFI bits, keeping a PCP match.
    fn match_vid_masked(&self, key: &mut PipeKey, mask: &mut PipeMask, v: u128, m: u128) {
        let m = m & (CFI | VID_MASK);
        self.put(&mut key.dp.0, &mut key.meta, v & m, CFI | VID_MASK);
        self.put(&mut mask.dp.0, &mut mask.meta, m, CFI | VID_MASK);
    }

    /// The prerequisite a match on the field needs. OVS matches `tp_src`/`tp_dst` (its names
    /// for `tcp_src`/`tcp_dst`) and the UDP and SCTP port fields in any TCP, UDP or SCTP flow,
    /// and prints ICMPv6 type and code as `icmp_type`/`icmp_code`, so matching relaxes those;
    /// actions that write a field use the strict [`Field::prereq`].
    pub fn match_prereq(&self) -> Prereq {
        match self.id {
            FieldId::TCP_SRC
            | FieldId::TCP_DST
            | FieldId::UDP_SRC
            | FieldId::UDP_DST
            | FieldId::SCTP_SRC
            | FieldId::SCTP_DST => Prereq::L4,
            FieldId::ICMPV4_TYPE
            | FieldId::ICMPV4_CODE
            | FieldId::ICMPV6_TYPE
            | FieldId::ICMPV6_CODE => Prereq::IcmpAny,
            _ => self.prereq,
        }
    }

    /// The name subfield syntax prints: the NXM/OXM name when the field has one.
    pub fn nxm_name(&self) -> &'static str {
        self.nxm.first().copied().unwrap_or(self.name)
    }
}

/// A bit range of a field: `NXM_NX_REG0[0..3]`, `reg1[16..31]`, `eth_dst[]`, `reg0[5]`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Subfield {
    pub field: FieldId,
    /// First bit (0 is the field's least significant bit).
    pub ofs: u32,
    pub n_bits: u32,
}

impl Subfield {
    /// The whole of `field`.
    pub fn whole(field: FieldId) -> Subfield {
        Subfield {
            field,
            ofs: 0,
            n_bits: field.field().n_bits,
        }
    }

    /// The subfield's bits in field space.
    pub fn mask(&self) -> u128 {
        ones(self.n_bits) << self.ofs
    }

    /// Reads the bits from `key` (right-aligned).
    pub fn read(&self, key: &PipeKey) -> u128 {
        (self.field.field().get(key) >> self.ofs) & ones(self.n_bits)
    }

    /// Writes the low `n_bits` of `v` into the bits of `key`.
    pub fn write(&self, key: &mut PipeKey, v: u128) {
        self.field
            .field()
            .set_masked(key, (v & ones(self.n_bits)) << self.ofs, self.mask());
    }

    /// Marks the subfield's storage bits in `mask` (bits translation consulted).
    pub fn unwildcard(&self, mask: &mut PipeMask) {
        let f = self.field.field();
        let bits = (self.mask() << f.shift) & f.smask;
        f.put(&mut mask.dp.0, &mut mask.meta, bits, bits);
    }

    /// Parses a subfield at the start of `s` and returns it with the rest of `s` (OVS's
    /// `mf_parse_subfield__()`): a field name (NXM/OXM name, optionally with `_W`, or a field
    /// name) then optionally `[]`, `[bit]` or `[start..end]`.
    pub fn parse_prefix(s: &str) -> Result<(Subfield, &str), String> {
        let name_len = s.find(['[', '-']).unwrap_or(s.len());
        let name = &s[..name_len];
        let nxm = name
            .strip_suffix("_W")
            .filter(|n| !n.is_empty())
            .unwrap_or(name);
        let field = field_by_nxm_name(nxm)
            .or_else(|| field_by_name(name))
            .ok_or_else(|| format!("unknown field `{name}'"))?;
        let width = field.field().n_bits;
        let mut rest = &s[name_len..];
        let (mut start, mut end) = (0u32, width - 1);
        if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']').ok_or_else(|| {
                "syntax error expecting [] or [<bit>] or [<start>..<end>]".to_string()
            })?;
            let inner = &r[..close];
            let bad = || "syntax error expecting [] or [<bit>] or [<start>..<end>]".to_string();
            if inner.is_empty() {
            } else if let Some((a, b)) = inner.split_once("..") {
                start = parse_bit(a).ok_or_else(bad)?;
                end = parse_bit(b).ok_or_else(bad)?;
            } else {
                start = parse_bit(inner).ok_or_else(bad)?;
                end = start;
            }
            rest = &r[close + 1..];
        }
        if start > end {
            return Err(format!("starting bit {start} is after ending bit {end}"));
        }
        if start >= width {
            return Err(format!(
                "starting bit {start} is not valid because field is only {width} bits wide"
            ));
        }
        if end >= width {
            return Err(format!(
                "ending bit {end} is not valid because field is only {width} bits wide"
            ));
        }
        Ok((
            Subfield {
                field,
                ofs: start,
                n_bits: end - start + 1,
            },
            rest,
        ))
    }

    /// Parses a whole string as a subfield.
    pub fn parse(s: &str) -> Result<Subfield, String> {
        let (sf, rest) = Self::parse_prefix(s)?;
        if rest.is_empty() {
            Ok(sf)
        } else {
            Err("unexpected input following field syntax".to_string())
        }
    }
}

fn parse_bit(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl fmt::Display for Subfield {
    /// OVS's `mf_format_subfield()`: `NXM_NX_REG0[]`, `NXM_NX_REG0[5]`, `NXM_NX_REG0[0..3]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = self.field.field();
        f.write_str(field.nxm_name())?;
        if self.ofs == 0 && self.n_bits == field.n_bits {
            f.write_str("[]")
        } else if self.n_bits == 1 {
            write!(f, "[{}]", self.ofs)
        } else {
            write!(f, "[{}..{}]", self.ofs, self.ofs + self.n_bits - 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipekey::PipeMatch;

    #[test]
    fn table_is_indexed_by_id() {
        for (i, f) in FIELDS.iter().enumerate() {
            assert_eq!(f.id.index(), i, "{}", f.name);
            assert!(f.n_bits > 0 && f.n_bits <= 128, "{}", f.name);
            assert_eq!(f.smask & !f.exact_mask, 0, "{}", f.name);
            assert!(f.smask >> f.shift != 0, "{}", f.name);
            if let Loc::Key { offset, len } = f.loc {
                assert!(offset + len <= GENEVE_OPTS_OFS, "{}", f.name);
                assert_eq!(f.exact_mask & !ones(8 * len as u32), 0, "{}", f.name);
            }
        }
        // Names are unique across names and aliases; NXM names too.
        let mut names: Vec<&str> = FIELDS
            .iter()
            .flat_map(|f| std::iter::once(f.name).chain(f.aliases.iter().copied()))
            .collect();
        names.sort_unstable();
        names.dedup();
        let total: usize = FIELDS.iter().map(|f| 1 + f.aliases.len()).sum();
        assert_eq!(names.len(), total);
        let mut nxm: Vec<&str> = FIELDS.iter().flat_map(|f| f.nxm.iter().copied()).collect();
        let n = nxm.len();
        nxm.sort_unstable();
        nxm.dedup();
        assert_eq!(nxm.len(), n);
    }

    #[test]
    fn lookup_by_name_alias_and_nxm() {
        assert_eq!(field_by_name("dl_dst"), Some(FieldId::ETH_DST));
        assert_eq!(field_by_name("eth_dst"), Some(FieldId::ETH_DST));
        assert_eq!(field_by_name("nw_src"), Some(FieldId::IPV4_SRC));
        assert_eq!(field_by_name("ip_dst"), Some(FieldId::IPV4_DST));
        assert_eq!(field_by_name("tp_src"), Some(FieldId::TCP_SRC));
        assert_eq!(field_by_name("reg15"), Some(FieldId::REG15));
        assert_eq!(field_by_name("nw_sr"), None);
        assert_eq!(field_by_nxm_name("NXM_OF_ETH_DST"), Some(FieldId::ETH_DST));
        assert_eq!(
            field_by_nxm_name("OXM_OF_IPV4_DST"),
            Some(FieldId::IPV4_DST)
        );
        assert_eq!(field_by_nxm_name("NXM_NX_REG0"), Some(FieldId::REG0));
        assert_eq!(field_by_nxm_name("OXM_OF_PKT_REG3"), Some(FieldId::XREG3));
    }

    #[test]
    fn bit_positions_follow_the_key_layout() {
        let mut k = PipeKey::new();
        k.dp.set_vlan_tci(0x7005);
        assert_eq!(FieldId::DL_VLAN.field().get(&k), 5);
        assert_eq!(FieldId::DL_VLAN_PCP.field().get(&k), 3);
        assert_eq!(FieldId::VLAN_VID.field().get(&k), 0x1005);
        k.dp.set_mpls_lse0((12345 << 12) | (5 << 9) | (1 << 8) | 64);
        assert_eq!(FieldId::MPLS_LABEL.field().get(&k), 12345);
        assert_eq!(FieldId::MPLS_TC.field().get(&k), 5);
        assert_eq!(FieldId::MPLS_BOS.field().get(&k), 1);
        assert_eq!(FieldId::MPLS_TTL.field().get(&k), 64);
        k.dp.set_nw_tos(0xb9);
        assert_eq!(FieldId::IP_DSCP.field().get(&k), 0xb8);
        assert_eq!(FieldId::IP_DSCP_SHIFTED.field().get(&k), 46);
        assert_eq!(FieldId::IP_ECN.field().get(&k), 1);
        k.dp.set_tp_src(3).set_tp_dst(1);
        assert_eq!(FieldId::ICMPV4_TYPE.field().get(&k), 3);
        assert_eq!(FieldId::ICMPV4_CODE.field().get(&k), 1);
        k.dp.set_tun_flags(flow::key::tun_flags::OAM | flow::key::tun_flags::CSUM);
        assert_eq!(FieldId::TUN_FLAGS.field().get(&k), 1);
        k.meta.set_xreg(0, 0x1_0000_0002);
        assert_eq!(FieldId::REG0.field().get(&k), 1);
        assert_eq!(FieldId::REG1.field().get(&k), 2);
        assert_eq!(FieldId::XREG0.field().get(&k), 0x1_0000_0002);
        assert_eq!(FieldId::XXREG0.field().get(&k), 0x1_0000_0002 << 64);
        k.dp.set_eth_dst(flow::EthAddr([1, 2, 3, 4, 5, 6]));
        assert_eq!(FieldId::ETH_DST.field().get_bytes(&k), [1, 2, 3, 4, 5, 6]);
        assert_eq!(FieldId::ARP_OP.field().get_bytes(&k), [0, 0]);
    }

    #[test]
    fn set_field_semantics() {
        let mut k = PipeKey::new();
        FieldId::DL_VLAN.field().set(&mut k, 10);
        assert_eq!(k.dp.vlan_tci(), 0x100a);
        FieldId::DL_VLAN_PCP.field().set(&mut k, 5);
        assert_eq!(k.dp.vlan_tci(), 0xb00a);
        FieldId::DL_VLAN.field().set(&mut k, 0xffff);
        assert_eq!(k.dp.vlan_tci(), 0);
        FieldId::VLAN_VID.field().set(&mut k, 7);
        assert_eq!(k.dp.vlan_tci(), 0x1007);
        FieldId::IP_DSCP_SHIFTED.field().set(&mut k, 46);
        FieldId::IP_ECN.field().set(&mut k, 2);
        assert_eq!(k.dp.nw_tos(), 0xba);
        FieldId::IPV4_DST.field().set(&mut k, 0x0a00_0001);
        assert_eq!(k.dp.nw_dst(), std::net::Ipv4Addr::new(10, 0, 0, 1));
    }

    #[test]
    fn subfields_read_and_write_bits() {
        let mut k = PipeKey::new();
        let sf = Subfield::parse("NXM_NX_REG0[4..7]").unwrap();
        sf.write(&mut k, 0xab);
        assert_eq!(k.meta.regs[0], 0xb0);
        assert_eq!(sf.read(&k), 0xb);
        let sf = Subfield::parse("reg1[16..31]").unwrap();
        sf.write(&mut k, 0x1234);
        assert_eq!(k.meta.regs[1], 0x1234_0000);
        assert_eq!(
            Subfield::parse("reg1[]").unwrap(),
            Subfield::whole(FieldId::REG1)
        );
        assert_eq!(
            Subfield::parse("reg1").unwrap(),
            Subfield::whole(FieldId::REG1)
        );
        assert_eq!(Subfield::parse("NXM_NX_REG1_W[3]").unwrap().n_bits, 1);
        let sf = Subfield::parse("OXM_OF_ETH_DST[40..47]").unwrap();
        sf.write(&mut k, 0x02);
        assert_eq!(k.dp.eth_dst().0, [2, 0, 0, 0, 0, 0]);
        let sf = Subfield::parse("NXM_OF_VLAN_TCI[0..11]").unwrap();
        sf.write(&mut k, 5);
        assert_eq!(k.dp.vlan_tci(), 5);
        assert_eq!(
            Subfield::parse("NXM_NX_REG0[0..3]").unwrap().to_string(),
            "NXM_NX_REG0[0..3]"
        );
        assert_eq!(
            Subfield::parse("reg0[5]").unwrap().to_string(),
            "NXM_NX_REG0[5]"
        );
        assert_eq!(
            Subfield::parse("eth_src").unwrap().to_string(),
            "NXM_OF_ETH_SRC[]"
        );
        assert_eq!(
            Subfield::parse("dl_vlan[0..3]").unwrap().to_string(),
            "dl_vlan[0..3]"
        );
        assert!(Subfield::parse("reg0[32]").is_err());
        assert!(Subfield::parse("reg0[3..1]").is_err());
        assert!(Subfield::parse("reg0[x]").is_err());
        assert!(Subfield::parse("nope[]").is_err());
        assert!(Subfield::parse("reg0[]x").is_err());
    }

    fn matched(f: FieldId, v: u128, m: u128) -> PipeMatch {
        let (mut k, mut mask) = (PipeKey::new(), PipeMask::new());
        f.field().match_set(&mut k, &mut mask, v, m).unwrap();
        PipeMatch::new(&k, &mask)
    }

    #[test]
    fn match_vlan_per_ovs_fields() {
        let m = matched(FieldId::DL_VLAN, 5, 0xffff);
        assert_eq!(
            (m.key().dp.vlan_tci(), m.mask().dp.vlan_tci()),
            (0x1005, 0x1fff)
        );
        let m = matched(FieldId::DL_VLAN, 0xffff, 0xffff);
        assert_eq!((m.key().dp.vlan_tci(), m.mask().dp.vlan_tci()), (0, 0xffff));
        let m = matched(FieldId::VLAN_TCI, 0, 0x1000);
        assert_eq!((m.key().dp.vlan_tci(), m.mask().dp.vlan_tci()), (0, 0x1000));
        let m = matched(FieldId::DL_VLAN_PCP, 3, 0xff);
        assert_eq!(
            (m.key().dp.vlan_tci(), m.mask().dp.vlan_tci()),
            (0x7000, 0xf000)
        );
        let mut key = PipeKey::new();
        key.dp.set_vlan_tci(0x1005);
        assert!(matched(FieldId::DL_VLAN, 5, 0xffff).matches(&key));
        assert!(!matched(FieldId::DL_VLAN, 0xffff, 0xffff).matches(&key));
        assert!(!matched(FieldId::VLAN_TCI, 0, 0x1000).matches(&key));
    }

    #[test]
    fn match_masks_and_exact_masks() {
        let m = matched(FieldId::ICMPV4_TYPE, 3, 0xff);
        assert_eq!(m.mask().dp.tp_src(), 0xffff);
        let m = matched(FieldId::IPV6_LABEL, 0x12345, 0xfffff);
        assert_eq!(m.mask().dp.ipv6_label(), 0xffff_ffff);
        let m = matched(FieldId::IPV4_DST, 0x0a01_0203, 0xffff_0000);
        assert_eq!(m.key().dp.nw_dst(), std::net::Ipv4Addr::new(10, 1, 0, 0));
        let m = matched(FieldId::MPLS_TC, 5, 0xff);
        assert_eq!(m.mask().dp.mpls_lse0(), 0xe00);
        let m = matched(FieldId::IP_ECN, 3, 0xff);
        assert_eq!((m.key().dp.nw_tos(), m.mask().dp.nw_tos()), (3, 3));
        let m = matched(FieldId::XREG1, 0x1_0000_0001, u128::from(u64::MAX));
        assert_eq!(m.mask().meta.regs[2..4], [u32::MAX, u32::MAX]);
        let (mut k, mut mask) = (PipeKey::new(), PipeMask::new());
        assert_eq!(
            FieldId::IP_TTL.field().match_set(&mut k, &mut mask, 5, 0xf),
            Err(MatchError::NotMaskable)
        );
    }

    #[test]
    fn tunnel_metadata_through_the_tlv_map() {
        let _g = crate::tun_md::test_serial();
        let f = FieldId::tun_metadata(1).field();
        // Unmapped: an exact value masks its significant bytes.
        let m = matched(FieldId::tun_metadata(1), 0x1234, u128::MAX);
        assert_eq!(f.get_mask(m.mask()), 0xffff);
        let mut t = crate::tun_md::TunTable::default();
        let m = |class, len| crate::tunnel::TlvMapping {
            class,
            kind: 0,
            len,
        };
        t.add(&[(1, m(1, 4)), (40, m(2, 32))]).unwrap();
        let m = matched(FieldId::tun_metadata(1), 0x1200, 0xff00);
        assert_eq!(f.get(m.key()), 0x1200);
        assert_eq!(f.get_mask(m.mask()), 0xff00);
        assert!(f.is_matched(m.mask()));
        let exact = matched(FieldId::tun_metadata(1), 0x1234, u128::MAX);
        assert_eq!(f.get_mask(exact.mask()), 0xffff_ffff);
        let any = matched(FieldId::tun_metadata(1), 0, 0);
        assert!(f.is_matched(any.mask()));
        assert_eq!(f.get_mask(any.mask()), 0);
        let (mut k, mut mask) = (PipeKey::new(), PipeMask::new());
        assert_eq!(
            f.match_set(&mut k, &mut mask, 0x1_0000_0000, u128::MAX),
            Err(MatchError::TooLong)
        );
        // A value longer than 16 bytes, and its last 16 through the u128 accessors.
        let wide = FieldId::tun_metadata(40).field();
        let v: Vec<u8> = (1..=32).collect();
        let (mut k, mut mask) = (PipeKey::new(), PipeMask::new());
        wide.match_tun_md_bytes(&mut k, &mut mask, &v, None)
            .unwrap();
        let wm = PipeMatch::new(&k, &mask);
        let (got, len) = crate::tun_md::value(&wm.key().dp, &wm.key().meta, 40);
        assert_eq!(&got[..len], &v[..]);
        assert_eq!(
            wide.get(wm.key()),
            u128::from_be_bytes(v[16..].try_into().unwrap())
        );
        let mut key = PipeKey::new();
        set_tun_md_wide(&mut key.dp.0, &mut key.meta, 40, &v);
        assert!(wm.matches(&key));
        wide.set_masked(&mut key, 0, 0xff);
        assert!(!wm.matches(&key));
        let (mut k, mut mask) = (PipeKey::new(), PipeMask::new());
        assert_eq!(
            f.match_set(&mut k, &mut mask, 0x1234, 0xff00),
            Err(MatchError::OutsideMask)
        );
        assert!(crate::tun_md::present(&m.key().meta, 1));
        let mut key = PipeKey::new();
        f.set(&mut key, 0x12ff);
        assert!(m.matches(&key));
        f.set(&mut key, 0x13ff);
        assert!(!m.matches(&key));
        let (mut k, mut mask) = (m.key().clone(), m.mask().clone());
        assert_eq!(
            f.match_set(&mut k, &mut mask, 1, u128::MAX),
            Err(MatchError::SetTwice)
        );
    }
}
