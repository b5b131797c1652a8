//! The OpenFlow 1.1+ action set (OpenFlow 1.5.1 §5.6, OVS's `ofpacts_execute_action_set()`):
//! what `write_actions` may put in it and the order it runs in when the pipeline ends.
//!
//! Actions of the action set fall into three kinds. Some may usefully appear once and run in a
//! fixed order (`strip_vlan`, `pop_mpls`, `decap`, `encap`, `push_mpls`, `push_vlan`, `dec_ttl`,
//! `dec_mpls_ttl`; the last one written counts). Field writes and moves, queue and tunnel
//! settings run after them, all of them, in the order written. Then one *final* action runs, the one of highest
//! rank present (`ct`, `ct_clear`, `resubmit`, `output`, `group`; the last written of that
//! rank): without a final action, the action set does nothing at all. Anything else is not
//! allowed in an action set (a switch refuses it with `OFPBAC_BAD_TYPE`).

use crate::syntax::OfAction;

/// Where an action goes in the action set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// One of the actions that run once, in this order.
    Slot(u8),
    /// A final action of this rank (the highest present runs).
    Final(u8),
    /// A field write or move: all run, in order.
    SetOrMove,
}

/// The number of [`Class::Slot`]s.
const N_SLOTS: usize = 8;

fn classify(a: &OfAction) -> Option<Class> {
    Some(match a {
        OfAction::StripVlan => Class::Slot(0),
        OfAction::PopMpls(_) => Class::Slot(1),
        OfAction::Decap(_) => Class::Slot(2),
        OfAction::Encap(_) => Class::Slot(3),
        OfAction::PushMpls(_) => Class::Slot(4),
        OfAction::PushVlan(_) => Class::Slot(5),
        OfAction::DecTtl(_) => Class::Slot(6),
        OfAction::DecMplsTtl => Class::Slot(7),
        OfAction::Ct(_) => Class::Final(0),
        OfAction::CtClear => Class::Final(1),
        OfAction::Resubmit { .. } => Class::Final(2),
        OfAction::Output { .. } => Class::Final(3),
        OfAction::Group(_) => Class::Final(4),
        OfAction::SetField { .. }
        | OfAction::RegMove { .. }
        | OfAction::SetEthSrc(_)
        | OfAction::SetEthDst(_)
        | OfAction::SetIpDscp(_)
        | OfAction::SetIpv4Src(_)
        | OfAction::SetIpv4Dst(_)
        | OfAction::SetL4SrcPort(_)
        | OfAction::SetL4DstPort(_)
        | OfAction::SetMplsLabel(_)
        | OfAction::SetMplsTc(_)
        | OfAction::SetMplsTtl(_)
        | OfAction::SetQueue(_)
        | OfAction::SetTunnel { .. }
        | OfAction::SetVlanPcp(_)
        | OfAction::SetVlanVid(_) => Class::SetOrMove,
        _ => return None,
    })
}

/// Whether `write_actions` may carry `a`.
pub fn allowed_in_action_set(a: &OfAction) -> bool {
    classify(a).is_some()
}

/// The actions the action set `set` (everything written to it, in order) runs, in the order
/// it runs them; empty when it holds no final action.
pub fn execute_order(set: &[OfAction]) -> Vec<OfAction> {
    let mut slots: [Option<&OfAction>; N_SLOTS] = [None; N_SLOTS];
    let mut final_action: Option<(u8, &OfAction)> = None;
    let mut writes = Vec::new();
    for a in set {
        match classify(a) {
            Some(Class::Slot(i)) => slots[usize::from(i)] = Some(a),
            // The last final action of the highest rank runs.
            Some(Class::Final(rank)) if final_action.is_none_or(|(r, _)| rank >= r) => {
                final_action = Some((rank, a));
            }
            Some(Class::Final(_)) => {}
            Some(Class::SetOrMove) => writes.push(a),
            None => {}
        }
    }
    let Some((_, last)) = final_action else {
        return Vec::new();
    };
    slots
        .into_iter()
        .flatten()
        .chain(writes)
        .chain(std::iter::once(last))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::{FlowKind, NoPortNames, format_actions, parse_flow};

    fn run(set: &str) -> String {
        let flow = parse_flow(&format!("ip,actions={set}"), FlowKind::Add, &NoPortNames).unwrap();
        let mut s = String::new();
        format_actions(&mut s, &execute_order(&flow.actions), &NoPortNames);
        s
    }

    #[test]
    fn the_action_set_runs_in_the_specification_s_order() {
        // OVS 3.1's trace of the same action set: "action set is: pop_vlan,push_vlan:0x8100,
        // dec_ttl,set_field:00:00:00:00:00:01->eth_src,set_queue:3,output:1".
        assert_eq!(
            run(
                "dec_ttl,output:2,mod_dl_src:00:00:00:00:00:01,set_queue:3,push_vlan:0x8100,\
                 strip_vlan,output:1"
            ),
            "strip_vlan,push_vlan:0x8100,dec_ttl,mod_dl_src:00:00:00:00:00:01,set_queue:3,\
             output:1"
        );
        // The final action of highest rank wins; without one nothing runs.
        assert_eq!(run("output:1,resubmit(,2),ct_clear"), "output:1");
        assert_eq!(run("dec_ttl,load:1->NXM_NX_REG0[]"), "drop");
        assert!(!allowed_in_action_set(&OfAction::Note(vec![1])));
        assert!(!allowed_in_action_set(&OfAction::Clone(vec![])));
    }
}
