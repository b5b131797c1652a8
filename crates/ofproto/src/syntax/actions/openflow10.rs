//! What OpenFlow 1.0 with Nicira extensions makes of an action list: the actions a switch
//! holds for a flow `ovs-ofctl add-flow` sent in OpenFlow 1.0, its default. A field write
//! written as `set_field` goes as the OpenFlow 1.0 action for its field (`mod_dl_src`,
//! `mod_nw_dst`, `mod_tp_dst`, `mod_nw_tos`) or as `NXAST_REG_LOAD`, and `mod_nw_ttl` and
//! `mod_nw_ecn` as `NXAST_REG_LOAD` (OVS's `set_field_to_legacy_openflow()`,
//! `encode_SET_IP_TTL()`, `encode_SET_IP_ECN()`), which read back as those actions. Text
//! loaded straight into the switch (`add-flow`, `add-flows`, a configuration's flows) is held
//! so, as it would be had `ovs-ofctl` sent it.

use crate::fields::FieldId;

use super::parse::eth_addr;
use super::{OfAction, WriteForm, push_set_field};

/// `actions` as OpenFlow 1.0 carries them, nested lists included.
pub fn as_openflow10(actions: &[OfAction]) -> Vec<OfAction> {
    let mut out = Vec::with_capacity(actions.len());
    for a in actions {
        match a {
            OfAction::SetField {
                field,
                value,
                mask,
                form,
            } => push_write(&mut out, *field, *value, *mask, *form),
            OfAction::Clone(inner) => out.push(OfAction::Clone(as_openflow10(inner))),
            OfAction::WriteActions(inner) => out.push(OfAction::WriteActions(as_openflow10(inner))),
            OfAction::Ct(ct) => {
                let mut ct = ct.clone();
                ct.actions = as_openflow10(&ct.actions);
                out.push(OfAction::Ct(ct));
            }
            a => out.push(a.clone()),
        }
    }
    out
}

fn push_write(out: &mut Vec<OfAction>, field: FieldId, v: u128, m: u128, form: WriteForm) {
    let write = OfAction::SetField {
        field,
        value: v,
        mask: m,
        form,
    };
    // Fields without a 32-bit NXM header go as NXAST_REG_LOAD2 whatever they came as.
    let no_nxm = field.is_tun_metadata() || field.field().nxm.is_empty();
    let a = match form {
        WriteForm::Load2 => write,
        _ if no_nxm => OfAction::SetField {
            field,
            value: v,
            mask: m,
            form: WriteForm::Load2,
        },
        WriteForm::Load => write,
        WriteForm::Own => return push_set_field(out, field, v, m),
        WriteForm::SetField => match field {
            // A mask is dropped, as OVS drops it.
            FieldId::ETH_SRC => OfAction::SetEthSrc(eth_addr(v)),
            FieldId::ETH_DST => OfAction::SetEthDst(eth_addr(v)),
            FieldId::IPV4_SRC => OfAction::SetIpv4Src((v as u32).into()),
            FieldId::IPV4_DST => OfAction::SetIpv4Dst((v as u32).into()),
            FieldId::IP_DSCP => OfAction::SetIpDscp(v as u8),
            FieldId::IP_DSCP_SHIFTED => OfAction::SetIpDscp((v as u8) << 2),
            FieldId::TCP_SRC | FieldId::UDP_SRC => OfAction::SetL4SrcPort(v as u16),
            FieldId::TCP_DST | FieldId::UDP_DST => OfAction::SetL4DstPort(v as u16),
            _ => return push_set_field(out, field, v, m),
        },
    };
    out.push(a);
}

#[cfg(test)]
mod tests {
    use crate::syntax::{FlowKind, NoPortNames, format_actions, parse_flow};

    /// `actions` as written, then as OpenFlow 1.0 carries them, both printed.
    fn both(actions: &str) -> (String, String) {
        let f = parse_flow(
            &format!("tcp,actions={actions}"),
            FlowKind::Add,
            &NoPortNames,
        )
        .unwrap_or_else(|e| panic!("{actions}: {e}"));
        let (mut written, mut carried) = (String::new(), String::new());
        format_actions(&mut written, &f.actions, &NoPortNames);
        format_actions(
            &mut carried,
            &super::as_openflow10(&f.actions),
            &NoPortNames,
        );
        (written, carried)
    }

    #[test]
    fn writes_print_as_written_and_as_openflow_10_carries_them() {
        // ovs-vswitchd 3.1's dump-flows of these, added with OpenFlow 1.3 and 1.0
        // (testdata/openflow/scripts/set-field-forms.ovs).
        for (text, of10) in [
            ("load:0x5->NXM_NX_REG0[]", "load:0x5->NXM_NX_REG0[]"),
            ("set_field:0x7->reg1", "load:0x7->NXM_NX_REG1[]"),
            ("set_field:0x30/0xf0->reg2", "load:0x3->NXM_NX_REG2[4..7]"),
            ("mod_nw_ttl:9", "load:0x9->NXM_NX_IP_TTL[]"),
            ("set_field:8->nw_ttl", "load:0x8->NXM_NX_IP_TTL[]"),
            ("mod_nw_ecn:1", "load:0x1->NXM_NX_IP_ECN[]"),
            ("set_field:8081->tcp_dst", "mod_tp_dst:8081"),
            (
                "set_field:00:00:00:00:00:02->eth_src",
                "mod_dl_src:00:00:00:00:00:02",
            ),
            ("set_field:10.0.0.9->ip_src", "mod_nw_src:10.0.0.9"),
            ("set_field:10.0.0.9/24->ip_dst", "mod_nw_dst:10.0.0.9"),
        ] {
            assert_eq!(both(text), (text.to_owned(), of10.to_owned()), "{text}");
        }
    }

    #[test]
    fn writes_without_an_nxm_header_go_as_reg_load2() {
        let (written, carried) = both("load:0x1234->tun_metadata0[0..15]");
        assert_eq!(written, "load:0x1234->NXM_NX_TUN_METADATA0[0..15]");
        assert_eq!(carried, "set_field:0x1234/0xffff->tun_metadata0");
    }
}
