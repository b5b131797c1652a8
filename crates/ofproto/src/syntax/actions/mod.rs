//! OpenFlow actions in `ovs-ofctl` syntax (ovs-actions(7)): the action types.
//!
//! [`OfAction`] follows OVS's `ofpact` kinds. A field write remembers the form it came in
//! ([`WriteForm`], OVS's `ofpact.raw`): `load:0x5->NXM_NX_REG0[]` and `set_field:5->reg0` are
//! the same write, printed back as written and sent as OVS sends each (`ofp-actions.c`'s
//! `encode_SET_FIELD()`); `mod_nw_ttl:9` and `set_field:9->nw_ttl` likewise, and
//! `set_field:00:00:00:00:00:01->eth_src` stays apart from `mod_dl_src`. Parsing ([`parse`])
//! still normalizes what OVS normalizes or what the model has one action for: `pop_vlan`
//! becomes `strip_vlan`, `set_field:0x1005->vlan_tci` becomes `mod_vlan_vid:5,mod_vlan_pcp:0`
//! (OVS keeps a Set-Field of the VLAN fields, which prints as `set_field:4101->vlan_tci`).
//! Printing ([`format`]) is then a direct rendering, and parsing what was printed gives the
//! same actions back.
//!
//! Actions that OpenFlow 1.0 cannot carry are kept and printed as OpenFlow 1.1+ prints them
//! (`push_vlan:0x8100`, `meter:1`, `goto_table:3`; OVS degrades the last to `resubmit(,3)`
//! over OpenFlow 1.0, which changes its meaning, so it is kept distinct here).

mod bundle;
mod format;
mod learn;
mod multipath;
mod openflow10;
mod parse;
mod sample;

use std::net::{Ipv4Addr, Ipv6Addr};

use flow::EthAddr;

use crate::fields::{FieldId, Subfield};

pub use bundle::{BUNDLE_ALGORITHMS, BUNDLE_MAX_MEMBERS, Bundle};
pub use format::format_actions;
pub use multipath::{HASH_FIELDS, MP_ALGORITHMS, Multipath};
pub use openflow10::as_openflow10;
pub(crate) use parse::ActionCtx;
pub use parse::push_set_field;
pub use sample::{Sample, SampleDirection};

/// Deepest nesting of `clone(...)` and `ct(exec(...))` accepted.
pub const MAX_NESTING: usize = 32;

/// Why the controller receives a packet (`controller(reason=...)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PacketInReason {
    NoMatch,
    Action,
    InvalidTtl,
    ActionSet,
    Group,
    PacketOut,
}

impl PacketInReason {
    const ALL: [(PacketInReason, &'static str); 6] = [
        (PacketInReason::NoMatch, "no_match"),
        (PacketInReason::Action, "action"),
        (PacketInReason::InvalidTtl, "invalid_ttl"),
        (PacketInReason::ActionSet, "action_set"),
        (PacketInReason::Group, "group"),
        (PacketInReason::PacketOut, "packet_out"),
    ];

    /// The keyword OVS uses.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(r, _)| *r == self)
            .map_or("action", |(_, n)| n)
    }
}

/// `controller(...)` with anything but the defaults (plain ones become `output:CONTROLLER`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Controller {
    pub max_len: u16,
    pub reason: PacketInReason,
    pub id: u16,
    pub userdata: Vec<u8>,
    pub pause: bool,
    pub meter_id: Option<u32>,
}

impl Default for Controller {
    /// The defaults: whole packets, reason `action`, controller id 0, no userdata, no pause, no
    /// meter (a `controller` action with all of them is `output:CONTROLLER`).
    fn default() -> Controller {
        Controller {
            max_len: u16::MAX,
            reason: PacketInReason::Action,
            id: 0,
            userdata: Vec::new(),
            pause: false,
            meter_id: None,
        }
    }
}

/// Which side `nat` rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NatKind {
    Src,
    Dst,
}

/// Address range of a `nat(src=...)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NatAddrs {
    V4(Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr),
}

/// `nat`, `nat(src)`, `nat(dst=10.0.0.1-10.0.0.9:1000-2000,random)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Nat {
    pub kind: Option<NatKind>,
    /// Addresses (min, max; equal for a single address).
    pub addrs: Option<NatAddrs>,
    /// L4 ports (min, max), only with addresses.
    pub ports: Option<(u16, u16)>,
    pub persistent: bool,
    pub hash: bool,
    pub random: bool,
}

/// The zone of a `ct` action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CtZone {
    Imm(u16),
    Field(Subfield),
}

/// `ct(...)`, kept structured so that it prints back.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ct {
    pub commit: bool,
    pub force: bool,
    /// Table to recirculate to.
    pub table: Option<u8>,
    pub zone: CtZone,
    /// ALG port: 21 (`ftp`), 69 (`tftp`), or 0.
    pub alg: u16,
    /// Nested actions: [`OfAction::Nat`] and writes of `ct_mark`/`ct_label`.
    pub actions: Vec<OfAction>,
}

/// The form a field write came in (OVS's `ofpact.raw` of an `OFPACT_SET_FIELD`, and the
/// `OFPACT_SET_IP_TTL` / `OFPACT_SET_IP_ECN` actions): how it prints and which wire action
/// carries it. Two writes of the same bits in different forms are different actions, as OVS
/// compares actions with their raw form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriteForm {
    /// `load:` or `NXAST_REG_LOAD` (and learned writes): prints as `load:` (one per run of mask
    /// bits), goes as `NXAST_REG_LOAD` up to OpenFlow 1.4 and as Set-Field in 1.5.
    Load,
    /// `NXAST_REG_LOAD2`: prints as `set_field:`, goes as `NXAST_REG_LOAD2` up to OpenFlow 1.4.
    Load2,
    /// `set_field:` or `OFPAT_SET_FIELD`: prints as `set_field:`; goes as the legacy action
    /// OpenFlow 1.0 and 1.1 have for the field (else `NXAST_REG_LOAD`), as Set-Field in 1.2 to
    /// 1.4 when it writes the whole field (else `NXAST_REG_LOAD`), and as Set-Field in 1.5.
    SetField,
    /// The field's own action: `mod_nw_ttl` (`OFPAT11_SET_NW_TTL`) of `nw_ttl`, `mod_nw_ecn`
    /// (`OFPAT11_SET_NW_ECN`) of `nw_ecn`; whole-field writes only.
    Own,
}

/// One OpenFlow action or instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OfAction {
    /// `output:N`, `NORMAL`, `IN_PORT`, `CONTROLLER:max_len`, ...
    Output {
        port: u32,
        max_len: u16,
    },
    /// `output:NXM_NX_REG0[0..15]`.
    OutputReg {
        src: Subfield,
        max_len: u16,
    },
    /// `output(port=N,max_len=M)`.
    OutputTrunc {
        port: u32,
        max_len: u32,
    },
    Controller(Controller),
    /// `enqueue:PORT:QUEUE`.
    Enqueue {
        port: u32,
        queue: u32,
    },
    Group(u32),
    /// `mod_vlan_vid:VID` (pushes a tag if there is none).
    SetVlanVid(u16),
    /// `mod_vlan_pcp:PCP` (pushes a tag if there is none).
    SetVlanPcp(u8),
    StripVlan,
    /// `push_vlan:ETHERTYPE` (OpenFlow 1.1+).
    PushVlan(u16),
    SetEthSrc(EthAddr),
    SetEthDst(EthAddr),
    SetIpv4Src(Ipv4Addr),
    SetIpv4Dst(Ipv4Addr),
    /// `mod_nw_tos:TOS`: the DSCP bits of the TOS byte (low two bits zero).
    SetIpDscp(u8),
    /// `mod_tp_src:PORT` (TCP, UDP or SCTP, whichever the packet is).
    SetL4SrcPort(u16),
    SetL4DstPort(u16),
    /// A masked write of a field, printed and encoded by its `form`: `load:` (one per
    /// contiguous run of mask bits, at most 64 bits each; `set_field:` for tunnel metadata and
    /// fields without an NXM header), `set_field:VALUE[/MASK]->FIELD`, `mod_nw_ttl:`,
    /// `mod_nw_ecn:`. `mask` is over the field's bits; `value` has no 1-bits outside it but
    /// for a `set_field` written with a mask, whose value is kept whole as OVS keeps it.
    SetField {
        field: FieldId,
        value: u128,
        mask: u128,
        form: WriteForm,
    },
    /// `set_field:VALUE->tun_metadata<n>` with a value longer than the 16 bytes of
    /// [`OfAction::SetField`] (up to 124): the value's bytes, without leading zeros.
    SetTunMetadata {
        field: FieldId,
        value: Box<[u8]>,
    },
    /// `move:SRC->DST`.
    RegMove {
        src: Subfield,
        dst: Subfield,
    },
    /// `dec_ttl`, or `dec_ttl(id,...)` with controller ids.
    DecTtl(Option<Vec<u16>>),
    SetMplsLabel(u32),
    SetMplsTc(u8),
    SetMplsTtl(u8),
    DecMplsTtl,
    PushMpls(u16),
    PopMpls(u16),
    /// `encap(ethernet)`, `encap(mpls)`, `encap(mpls_mc)` (`NXAST_ENCAP`, OpenFlow 1.3+): a
    /// new outer header, whose packet type (`(ns << 16) | type`, [`packet_type`]) the packet
    /// takes.
    Encap(u32),
    /// `decap()` (the new packet type from the removed header's next protocol,
    /// [`packet_type::USE_NEXT_PROTO`]) or `decap(packet_type(ns=N,type=T))` (`NXAST_DECAP`,
    /// OpenFlow 1.3+): removes the outer header.
    Decap(u32),
    /// `set_tunnel:ID` or `set_tunnel64:ID` (`tun64` also when the id needs more than 32 bits).
    SetTunnel {
        id: u64,
        tun64: bool,
    },
    SetQueue(u32),
    PopQueue,
    FinTimeout {
        idle: u16,
        hard: u16,
    },
    /// `resubmit:PORT`, `resubmit(PORT,TABLE[,ct])`; `None` is the current port / table.
    Resubmit {
        port: Option<u32>,
        table: Option<u8>,
        ct: bool,
    },
    GotoTable(u8),
    WriteMetadata {
        value: u64,
        mask: u64,
    },
    /// `note:HEX`, padded with zeros as OVS's encoding pads it.
    Note(Vec<u8>),
    Exit,
    Clone(Vec<OfAction>),
    Ct(Ct),
    CtClear,
    /// `debug_recirc`: OVS's test action that makes translation recirculate here.
    DebugRecirc,
    /// `debug_slow`: OVS's test action that sends the flow to the slow path.
    DebugSlow,
    /// `nat(...)`, only inside `ct`.
    Nat(Nat),
    /// `meter:N` (OpenFlow 1.3+ instruction).
    Meter(u32),
    /// `conjunction(ID,K/N)`: clause `clause` (0-based: K is `clause + 1`) of the `n_clauses`
    /// of conjunctive match `id` (ovs-fields(7) "Conjunctive Match Fields").
    Conjunction {
        id: u32,
        clause: u8,
        n_clauses: u8,
    },
    /// `learn(...)`.
    Learn(Box<crate::learn::Learn>),
    /// `push:SRC[..]`: pushes the subfield's bits on the translation's stack
    /// (`NXAST_STACK_PUSH`).
    StackPush(Subfield),
    /// `pop:DST[..]`: pops the stack's top into the subfield (`NXAST_STACK_POP`).
    StackPop(Subfield),
    /// `write_actions(...)` (OpenFlow 1.1+ instruction): actions added to the action set that
    /// runs when the pipeline ends.
    WriteActions(Vec<OfAction>),
    /// `clear_actions` (OpenFlow 1.1+ instruction): empties the action set.
    ClearActions,
    /// `check_pkt_larger(N)->DST`: the one-bit `dst` says whether the packet is longer than
    /// `pkt_len` bytes (`NXAST_CHECK_PKT_LARGER`).
    CheckPktLarger {
        pkt_len: u16,
        dst: Subfield,
    },
    /// `sample(...)`: IPFIX sampling.
    Sample(Box<Sample>),
    /// `multipath(...)`: a link chosen by a hash of the packet.
    Multipath(Box<Multipath>),
    /// `bundle(...)`, `bundle_load(...)`: a live member port chosen among several.
    Bundle(Box<Bundle>),
}

/// Packet types (OpenFlow 1.5's `packet_type`, `(namespace << 16) | type`) that `encap` and
/// `decap` name.
pub mod packet_type {
    /// An Ethernet frame.
    pub const ETHERNET: u32 = 0;
    /// An MPLS unicast packet without an Ethernet header.
    pub const MPLS: u32 = 0x1_8847;
    /// An MPLS multicast packet without an Ethernet header.
    pub const MPLS_MC: u32 = 0x1_8848;
    /// An NSH packet (OVS has `encap(nsh)`; flowpath does not).
    pub const NSH: u32 = 0x1_894f;
    /// `decap()`'s "whatever the removed header says comes next".
    pub const USE_NEXT_PROTO: u32 = 0xfffe;
    /// What a flow's packet type is after a `decap` of something other than Ethernet, as
    /// far as later actions can know before the packet is parsed again.
    pub const UNKNOWN: u32 = 0xffff_ffff;

    /// `encap(...)`'s header name for a packet type it makes.
    pub fn encap_name(pt: u32) -> &'static str {
        match pt {
            ETHERNET => "ethernet",
            NSH => "nsh",
            MPLS => "mpls",
            MPLS_MC => "mpls_mc",
            _ => "UNKNOWN",
        }
    }
}

/// OVS's `next_load_segment()`: (offset, width) of each run of 1-bits in `mask` below
/// `n_bits`, runs longer than 64 bits cut at 64.
fn load_segments(mask: u128, n_bits: u32) -> Vec<(u32, u32)> {
    let mut segs = Vec::new();
    let mut start = 0;
    while start < n_bits {
        let rest = mask.checked_shr(start).unwrap_or(0);
        if rest == 0 {
            break;
        }
        let ofs = start + rest.trailing_zeros();
        if ofs >= n_bits {
            break;
        }
        let run = (!(mask >> ofs)).trailing_zeros().min(64).min(n_bits - ofs);
        segs.push((ofs, run));
        start = ofs + run;
    }
    segs
}
