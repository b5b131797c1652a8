//! The consistency of a flow's actions with its match, as OVS checks a decoded flow_mod
//! (`ofpacts_check_consistency()`): the actions see the packet as the match and the earlier
//! actions leave it (a `push_mpls` makes it MPLS, a `push_vlan` tags it), and each must find
//! what it works on.
//!
//! Two kinds of failure, both `OFPBAC_MATCH_INCONSISTENT`: hard ones in every version (a field
//! written, moved or output without its prerequisites, `ct` or `nat` outside IP, a VID
//! Set-Field on an untagged packet), and soft ones that OpenFlow 1.0 lets through and later
//! versions refuse (`mod_nw_src` outside IPv4, a VLAN or MPLS action with no tag or label,
//! `fin_timeout` outside TCP).

use ofproto::fields::{FieldId, Prereq, Subfield, ct_valid_match};
use ofproto::pipekey::{PipeKey, PipeMask, PipeMatch};
use ofproto::syntax::{Ct, CtZone, Nat, NatAddrs, OfAction, packet_type};

use crate::error::OfpErr;
use crate::header::Version;

const VLAN_CFI: u128 = 0x1000;

/// The packet as the actions so far leave it.
#[derive(Clone)]
struct Flow {
    key: PipeKey,
    mask: PipeMask,
    /// Whether the version refuses soft inconsistencies (OpenFlow 1.1+).
    strict: bool,
    /// Whether the version carries `mod_nw_src`, `mod_nw_tos` and `mod_tp_src` (of a known
    /// protocol) as Set-Field (OpenFlow 1.2+), whose prerequisites are hard.
    set_field_wire: bool,
}

impl Flow {
    fn dl_type(&self) -> u16 {
        self.key.dp.eth_type()
    }

    fn ip_any(&self) -> bool {
        matches!(self.dl_type(), 0x0800 | 0x86dd)
    }

    fn mpls(&self) -> bool {
        matches!(self.dl_type(), 0x8847 | 0x8848)
    }

    fn has_vlan(&self) -> bool {
        FieldId::VLAN_TCI.field().get(&self.key) & VLAN_CFI != 0
    }

    fn set(&mut self, f: FieldId, v: u128) {
        f.field().set(&mut self.key, v);
    }

    /// A soft inconsistency: an error from OpenFlow 1.1 on.
    fn soft(&self, ok: bool) -> Result<(), OfpErr> {
        if ok || !self.strict {
            Ok(())
        } else {
            Err(OfpErr::OfpbacMatchInconsistent)
        }
    }

    /// A write of an L3 or L4 field by an OpenFlow 1.0 style action: hard when it travels as
    /// a Set-Field, soft otherwise.
    fn l3_write(&self, ok: bool, set_field: bool) -> Result<(), OfpErr> {
        if set_field && self.set_field_wire {
            hard(ok)
        } else {
            self.soft(ok)
        }
    }

    fn prereq(&self, p: Prereq) -> Result<(), OfpErr> {
        hard(p.is_met_match(&self.key, &self.mask))
    }

    fn subfield(&self, sf: &Subfield) -> Result<(), OfpErr> {
        self.prereq(sf.field.field().prereq)
    }
}

fn hard(ok: bool) -> Result<(), OfpErr> {
    if ok {
        Ok(())
    } else {
        Err(OfpErr::OfpbacMatchInconsistent)
    }
}

/// Checks `actions` of a flow in `table` (of a message of `version`) against its match.
pub fn check_actions(
    version: Version,
    table: u8,
    actions: &[OfAction],
    m: &PipeMatch,
) -> Result<(), OfpErr> {
    let mut flow = Flow {
        key: m.key().clone(),
        mask: m.mask().clone(),
        strict: version > Version::Of10,
        set_field_wire: version >= Version::Of12,
    };
    check_list(&mut flow, table, actions)
}

fn check_list(flow: &mut Flow, table: u8, actions: &[OfAction]) -> Result<(), OfpErr> {
    for a in actions {
        check_one(flow, table, a)?;
    }
    Ok(())
}

fn check_one(flow: &mut Flow, table: u8, a: &OfAction) -> Result<(), OfpErr> {
    match a {
        OfAction::SetVlanVid(_) | OfAction::SetVlanPcp(_) => {
            // From OpenFlow 1.1 on these only modify an existing tag.
            flow.soft(flow.has_vlan())?;
            let tci = FieldId::VLAN_TCI.field().get(&flow.key);
            flow.set(FieldId::VLAN_TCI, tci | VLAN_CFI);
        }
        OfAction::StripVlan => {
            flow.soft(flow.has_vlan())?;
            flow.set(FieldId::VLAN_TCI, 0);
        }
        OfAction::PushVlan(_) => {
            let tci = FieldId::VLAN_TCI.field().get(&flow.key);
            flow.set(FieldId::VLAN_TCI, tci | VLAN_CFI);
        }
        OfAction::SetIpv4Src(_) | OfAction::SetIpv4Dst(_) => {
            flow.l3_write(flow.dl_type() == 0x0800, true)?
        }
        OfAction::SetIpDscp(_) => flow.l3_write(flow.ip_any(), true)?,
        OfAction::DecTtl(_) => flow.soft(flow.ip_any())?,
        OfAction::FinTimeout { .. } => flow.soft(flow.key.dp.nw_proto() == 6)?,
        OfAction::SetL4SrcPort(_) | OfAction::SetL4DstPort(_) => {
            let later = flow.key.dp.nw_frag() & flow::key::nw_frag::LATER != 0;
            let l4 = matches!(flow.key.dp.nw_proto(), 6 | 17 | 132);
            flow.l3_write(flow.ip_any() && !later && l4, l4)?;
        }
        OfAction::SetMplsLabel(_)
        | OfAction::SetMplsTc(_)
        | OfAction::SetMplsTtl(_)
        | OfAction::DecMplsTtl => flow.soft(flow.mpls())?,
        OfAction::PopMpls(t) => {
            flow.soft(flow.mpls())?;
            flow.set(FieldId::ETH_TYPE, (*t).into());
        }
        OfAction::Encap(pt) => {
            // OVS's check_ENCAP(): the new packet type, its ethertype, no IP protocol
            // unless still IP.
            flow.key.dp.set_packet_type(*pt);
            if pt >> 16 == 1 {
                flow.set(FieldId::ETH_TYPE, u128::from(*pt as u16));
            }
            if !flow.ip_any() {
                flow.set(FieldId::IP_PROTO, 0);
            }
        }
        OfAction::Decap(_) => {
            // OVS's check_DECAP(): an Ethernet frame becomes the L3 packet of its ethertype;
            // what anything else becomes is known only once it is parsed again.
            let pt = if flow.key.dp.packet_type() == packet_type::ETHERNET {
                (1 << 16) | u32::from(flow.dl_type())
            } else {
                flow.set(FieldId::ETH_TYPE, 0xffff);
                packet_type::UNKNOWN
            };
            flow.key.dp.set_packet_type(pt);
        }
        OfAction::PushMpls(t) => {
            flow.set(FieldId::ETH_TYPE, (*t).into());
            // The payload is opaque now: no protocol can be assumed.
            flow.set(FieldId::IP_PROTO, 0);
        }
        OfAction::SetField { field, value, .. } => {
            flow.prereq(field.field().prereq)?;
            if *field == FieldId::VLAN_VID {
                hard(flow.has_vlan())?;
            }
            if *field == FieldId::VLAN_TCI {
                flow.set(FieldId::VLAN_TCI, *value);
            }
        }
        OfAction::RegMove { src, dst } => {
            flow.subfield(src)?;
            flow.subfield(dst)?;
        }
        OfAction::OutputReg { src, .. } => flow.subfield(src)?,
        OfAction::StackPush(sf) | OfAction::StackPop(sf) => flow.subfield(sf)?,
        OfAction::Multipath(m) => flow.subfield(&m.dst)?,
        OfAction::Bundle(bd) => {
            if let Some(d) = &bd.dst {
                flow.subfield(d)?;
            }
        }
        OfAction::Resubmit { ct: true, .. } => hard(ct_valid_match(&flow.key, &flow.mask))?,
        OfAction::Ct(ct) => check_ct(flow, table, ct)?,
        OfAction::Nat(nat) => check_nat(flow, nat)?,
        OfAction::Learn(l) => super::learn::check_learn(l, &flow.key, &flow.mask)?,
        OfAction::WriteActions(inner) => {
            // The action set is checked against the match alone, and only for what every
            // version refuses (OVS checks it with a copy of its parameters).
            let mut copy = flow.clone();
            copy.strict = false;
            check_list(&mut copy, table, inner)?;
        }
        OfAction::Clone(inner) => {
            // What happens inside a clone stays there.
            let mut copy = flow.clone();
            check_list(&mut copy, table, inner)?;
        }
        OfAction::GotoTable(t) if table != crate::flow_mod::OFPTT_ALL && *t <= table => {
            return Err(OfpErr::OfpbicBadTableId);
        }
        _ => {}
    }
    Ok(())
}

fn check_ct(flow: &Flow, table: u8, ct: &Ct) -> Result<(), OfpErr> {
    use flow::key::ct_state::INV;
    let proto = flow.key.dp.nw_proto();
    hard(
        flow.ip_any()
            && !(flow.key.dp.ct_state() & INV != 0 && ct.commit)
            && !(ct.alg == 21 && proto != 6)
            && !(ct.alg == 69 && proto != 17),
    )?;
    if let CtZone::Field(sf) = &ct.zone {
        return flow.subfield(sf);
    }
    let mut inner = flow.clone();
    check_list(&mut inner, table, &ct.actions)
}

fn check_nat(flow: &Flow, nat: &Nat) -> Result<(), OfpErr> {
    let dl_type = flow.dl_type();
    hard(
        flow.ip_any()
            && !matches!(nat.addrs, Some(NatAddrs::V4(..)) if dl_type != 0x0800)
            && !matches!(nat.addrs, Some(NatAddrs::V6(..)) if dl_type != 0x86dd),
    )
}
