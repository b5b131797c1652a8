//! Tests of the action codec: what `ovs-ofctl` sends in every protocol, OVS's errors, nesting
//! bounds, and round-trip and random-input properties.

use super::*;
use crate::nxm::tests::{records, unhex};
use ofproto::syntax::{FlowKind, FlowSpec, NoPortNames, parse_flow};
use proptest::prelude::*;

/// `testdata/openflow/actions.txt` (see `scripts/gen-openflow-fixtures`): the flow mods
/// `ovs-ofctl add-flow` sends for action lists in each protocol.
fn fixtures() -> Vec<(Version, String, Vec<u8>)> {
    records(include_str!("../../../../testdata/openflow/actions.txt"))
        .map(|l| {
            let mut it = l.split('\t');
            let (p, f, hex) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
            (Version::from_name(p).unwrap(), f.to_string(), unhex(hex))
        })
        .collect()
}

/// The actions (OpenFlow 1.0) or instructions of a captured flow mod.
pub(crate) fn actions_of(version: Version, msg: &[u8]) -> &[u8] {
    if msg[1] == 14 && version == Version::Of10 {
        &msg[72..]
    } else if version == Version::Of10 {
        let match_len = usize::from(u16::from_be_bytes([msg[40], msg[41]]));
        &msg[48 + match_len.next_multiple_of(8)..]
    } else {
        let len = usize::from(u16::from_be_bytes([msg[50], msg[51]]));
        &msg[48 + len.next_multiple_of(8)..]
    }
}

fn spec(flow: &str) -> Option<FlowSpec> {
    parse_flow(flow, FlowKind::Add, &NoPortNames).ok()
}

/// Where OpenFlow 1.1+ says less than the text: `mod_vlan_vid` goes as `push_vlan` (when the
/// flow has no tag) and a set-VID that does not push, which decode as such.
fn decodes_differently(version: Version, flow: &str) -> bool {
    (flow.contains("mod_vlan") && version >= Version::Of11)
        // set_tunnel is a Set-Field of tun_id from OpenFlow 1.2 on, and reads back as one.
        || (flow.contains("set_tunnel") && version >= Version::Of12)
        // OpenFlow 1.0 has no action set: ovs-ofctl leaves its instructions out.
        || ((flow.contains("write_actions") || flow.contains("clear_actions"))
            && version == Version::Of10)
}

/// Where the pipeline's model keeps less than OVS, so that one direction cannot agree.
fn known_difference(version: Version, flow: &str) -> bool {
    // OpenFlow 1.1+ sends enqueue as set_queue then output, which decodes as those.
    (flow.contains("enqueue") && version >= Version::Of11)
        // goto_table in OpenFlow 1.0 is resubmit(,N).
        || (flow.contains("goto_table") && version == Version::Of10)
        // ovs-ofctl sends a masked OpenFlow 1.5 Set-Field with the value's bits outside the
        // mask left in, which OVS itself then refuses (OFPBMC_BAD_WILDCARDS, as here); the
        // encoding here masks the value.
        || (flow.contains("fe80::1/64") && version == Version::Of15)
}

#[test]
fn actions_agree_with_ovs_ofctl() {
    let mut bad = Vec::new();
    let mut n = 0;
    for (version, flow, msg) in fixtures() {
        let wire = actions_of(version, &msg);
        let Some(s) = spec(&flow) else {
            // A flow the text syntax refuses must be refused on the wire too.
            if version > Version::Of10 {
                assert_eq!(
                    decode_instructions(version, wire),
                    Err(OfpErr::OfpbicUnsupInst),
                    "{flow}"
                );
            }
            continue;
        };
        let known = known_difference(version, &flow);
        // What OVS decodes is not what it parsed either: a field write decodes in the form
        // the wire carries (`mod_dl_src` comes back as a Set-Field from OpenFlow 1.2 on, a
        // `set_field` of a register as `reg_load` in 1.0). Such a write must still encode
        // back to the very bytes.
        let reencodes = |got: &[OfAction]| {
            let mut out = Vec::new();
            encode_instructions(version, got, FlowCtx::of(&s.match_), &mut out).is_ok()
                && out == wire
        };
        match decode_instructions(version, wire) {
            Ok(got)
                if got == s.actions
                    || known
                    || decodes_differently(version, &flow)
                    || reencodes(&got) => {}
            Ok(got) => bad.push(format!("{version} {flow}: decoded {got:?}")),
            Err(_) if known => {}
            Err(e) => bad.push(format!("{version} {flow}: {e}")),
        }
        let mut out = Vec::new();
        match encode_instructions(version, &s.actions, FlowCtx::of(&s.match_), &mut out) {
            Ok(()) if out == wire || known => {}
            Ok(()) => bad.push(format!(
                "{version} {flow}: encoded\n  {out:02x?}\n  ovs {wire:02x?}"
            )),
            Err(e) => bad.push(format!("{version} {flow}: {e}")),
        }
        n += 1;
    }
    assert!(bad.is_empty(), "{} of {n}:\n{}", bad.len(), bad.join("\n"));
    assert!(n >= 150, "only {n} vectors");
}

fn err(version: Version, hex: &str) -> OfpErr {
    decode_actions(version, &unhex(hex)).unwrap_err()
}

#[test]
fn malformed_actions_get_ovs_errors() {
    use Version::*;
    // Length not a multiple of 8, shorter than a header, longer than the list.
    assert_eq!(
        err(Of10, "0000000c000100000000000000000000"),
        OfpErr::OfpbacBadLen
    );
    assert_eq!(err(Of10, "00000004"), OfpErr::OfpbacBadLen);
    assert_eq!(err(Of10, "0000001000010000"), OfpErr::OfpbacBadLen);
    // An output of the wrong size; to a port that does not exist.
    assert_eq!(
        err(Of10, "00000010000100000000000000000000"),
        OfpErr::OfpbacBadLen
    );
    assert_eq!(err(Of10, "00000008ff000000"), OfpErr::OfpbacBadOutPort);
    assert_eq!(
        err(Of13, "0000001000ff00000000000000000000"),
        OfpErr::OfpbacBadOutPort
    );
    // Unknown standard type, vendor, Nicira subtype (11, the obsolete autopath).
    assert_eq!(err(Of10, "000c000800000000"), OfpErr::OfpbacBadType);
    assert_eq!(
        err(Of10, "ffff00100000123400010000000000000"[..32].as_ref()),
        OfpErr::OfpbacBadVendor
    );
    assert_eq!(
        err(Of10, "ffff001000002320000b000000000000"),
        OfpErr::OfpbacBadVendorType
    );
    // A Nicira action whose length cannot hold its own header (in a longer list).
    assert_eq!(
        err(Of13, "ffff000800002320000e000102000000"),
        OfpErr::OfpbacBadLen
    );
    // Set-Field exists from OpenFlow 1.2 on; with an unknown field; masked before 1.5.
    assert_eq!(
        err(Of11, "0019001080000a030800000000000000"),
        OfpErr::OfpbacBadType
    );
    assert_eq!(
        err(Of13, "001900100001fe04000000010000000000"[..32].as_ref()),
        OfpErr::OfpbacBadSetType
    );
    // A read-only field (dp_hash), as OVS's `decode_ofpat_set_field()`.
    assert_eq!(
        err(Of13, "0019001000014604000000010000000000"[..32].as_ref()),
        OfpErr::OfpbacBadSetArgument
    );
    assert_eq!(
        err(Of13, "0019001080000a030800000000000000"),
        OfpErr::OfpbacBadSetLen
    );
    // reg_load into a read-only field (ct_state), with a value wider than the bits.
    assert_eq!(
        err(Of10, "ffff001800002320000700030001d2040000000000000000"),
        OfpErr::OfpbacBadSetArgument
    );
    assert_eq!(
        err(Of10, "ffff0018000023200007000300010004000000000000001f"),
        OfpErr::OfpbacBadArgument
    );
    // move: too many bits, into a read-only field, from a field not modelled.
    assert_eq!(
        err(Of10, "ffff00180000232000060021000000000001000400010204"),
        OfpErr::OfpbacBadSetLen
    );
    assert_eq!(
        err(Of10, "ffff0018000023200006000800000000000100040001d204"),
        OfpErr::OfpbacBadSetArgument
    );
    assert_eq!(
        err(Of10, "ffff00180000232000060008000000000001fe0400010204"),
        OfpErr::OfpbmcBadField
    );
    // output_reg with non-zero padding.
    assert_eq!(
        err(Of10, "ffff001800002320000f000f0001000400000000000000ff"),
        OfpErr::OfpbacBadArgument
    );
    // Instructions: bad length, unknown, duplicate.
    let ierr = |hex: &str| decode_instructions(Of13, &unhex(hex)).unwrap_err();
    assert_eq!(ierr("0001000c03000000"), OfpErr::OfpbicBadLen);
    assert_eq!(ierr("0009000800000000"), OfpErr::OfpbicUnknownInst);
    assert_eq!(
        ierr("00010008030000000001000804000000"),
        OfpErr::OfpbicDupInst
    );
    // Clear-actions alone is a whole instruction list.
    assert_eq!(
        decode_instructions(Of13, &unhex("0005000800000000")),
        Ok(vec![OfAction::ClearActions])
    );
}

#[test]
fn nesting_is_bounded() {
    // clone(clone(...)) 40 deep.
    let mut inner: Vec<u8> = Vec::new();
    for _ in 0..40 {
        let mut a = unhex(
            "ffff00000000232000 2a000000000000"
                .replace(' ', "")
                .as_str(),
        );
        a.extend_from_slice(&inner);
        let len = a.len() as u16;
        a[2..4].copy_from_slice(&len.to_be_bytes());
        inner = a;
    }
    assert_eq!(
        decode_actions(Version::Of10, &inner).unwrap_err(),
        OfpErr::OfpbacBadArgument
    );
}

/// The actions as version `v` carries them where it says them differently: set_tunnel is a
/// Set-Field of tun_id from OpenFlow 1.2 on, and OpenFlow 1.5 has no `reg_load`: a `load`
/// comes back as a Set-Field.
fn as_carried(v: Version, actions: &[OfAction]) -> Vec<OfAction> {
    actions
        .iter()
        .map(|a| match a {
            OfAction::SetTunnel { id, .. } if v >= Version::Of12 => OfAction::SetField {
                field: ofproto::fields::FieldId::TUN_ID,
                value: (*id).into(),
                mask: u64::MAX.into(),
                form: WriteForm::SetField,
            },
            OfAction::SetField {
                field,
                value,
                mask,
                form: WriteForm::Load | WriteForm::Load2,
            } if v >= Version::Of15 => OfAction::SetField {
                field: *field,
                value: *value,
                mask: *mask,
                form: WriteForm::SetField,
            },
            OfAction::Clone(inner) => OfAction::Clone(as_carried(v, inner)),
            a => a.clone(),
        })
        .collect()
}

/// Actions of the kinds every version carries the same way (those it says differently are
/// covered by the ovs-ofctl vectors).
fn arb_action() -> impl Strategy<Value = OfAction> {
    use ofproto::fields::{FieldId, Subfield};
    use ofproto::syntax::{Controller, Ct, CtZone, Nat, NatAddrs, NatKind, PacketInReason};
    let port = prop_oneof![1u32..0xff00, Just(0xfff8u32), Just(0xfffa), Just(0xfffe)];
    let reg = (0usize..16).prop_map(FieldId::reg);
    let leaf = prop_oneof![
        (port.clone(), any::<u16>()).prop_map(|(port, max_len)| OfAction::Output { port, max_len }),
        (reg.clone(), 0u32..32, 1u32..33).prop_filter_map("range", |(f, ofs, n)| {
            (ofs + n <= 32).then(|| {
                let mask = ofproto::fields::ones(n) << ofs;
                OfAction::SetField {
                    field: f,
                    value: mask & 0x5555_5555,
                    mask,
                    form: WriteForm::Load,
                }
            })
        }),
        (reg.clone(), reg.clone(), 1u32..33).prop_map(|(a, b, n)| OfAction::RegMove {
            src: Subfield {
                field: a,
                ofs: 0,
                n_bits: n
            },
            dst: Subfield {
                field: b,
                ofs: 32 - n,
                n_bits: n
            },
        }),
        (
            proptest::option::of(1u32..0xff00),
            proptest::option::of(0u8..255),
            any::<bool>()
        )
            .prop_map(|(port, table, ct)| OfAction::Resubmit { port, table, ct }),
        any::<u32>().prop_map(OfAction::Group),
        proptest::collection::vec(any::<u16>(), 1..4).prop_map(|ids| OfAction::DecTtl(Some(ids))),
        Just(OfAction::DecTtl(None)),
        Just(OfAction::Exit),
        Just(OfAction::CtClear),
        Just(OfAction::PopQueue),
        proptest::collection::vec(any::<u8>(), 0..3).prop_map(|mut n| {
            // A note is kept with the padding its encoding adds.
            n.resize((10 + n.len()).next_multiple_of(8) - 10, 0);
            OfAction::Note(n)
        }),
        (any::<u16>(), any::<u16>()).prop_map(|(idle, hard)| OfAction::FinTimeout { idle, hard }),
        (reg.clone(), 0u32..16).prop_map(|(f, ofs)| OfAction::OutputReg {
            src: Subfield {
                field: f,
                ofs,
                n_bits: 16
            },
            max_len: 0,
        }),
        (port, any::<u32>()).prop_map(|(port, max_len)| OfAction::OutputTrunc { port, max_len }),
        (
            any::<u16>(),
            0usize..6,
            any::<u16>(),
            proptest::collection::vec(any::<u8>(), 0..5),
            any::<bool>(),
            proptest::option::of(any::<u32>())
        )
            .prop_map(|(max_len, r, id, userdata, pause, meter_id)| {
                let reason = [
                    PacketInReason::NoMatch,
                    PacketInReason::Action,
                    PacketInReason::InvalidTtl,
                    PacketInReason::ActionSet,
                    PacketInReason::Group,
                    PacketInReason::PacketOut,
                ][r];
                OfAction::Controller(Controller {
                    max_len,
                    reason,
                    id: id | 1,
                    userdata,
                    pause,
                    meter_id,
                })
            }),
        (
            any::<bool>(),
            proptest::option::of(0u8..255),
            any::<u16>(),
            any::<bool>(),
            1u32..0xffff,
            0u16..100
        )
            .prop_map(|(commit, table, zone, nat, lo, span)| {
                let actions = if nat {
                    vec![OfAction::Nat(Nat {
                        kind: Some(NatKind::Src),
                        addrs: Some(NatAddrs::V4(lo.into(), (lo + 5).into())),
                        ports: Some((1 + span, 200 + span)),
                        persistent: true,
                        hash: false,
                        random: true,
                    })]
                } else {
                    Vec::new()
                };
                // A nat with arguments needs commit, as OVS requires.
                OfAction::Ct(Ct {
                    commit: commit || nat,
                    force: false,
                    table,
                    zone: CtZone::Imm(zone),
                    alg: 0,
                    actions,
                })
            }),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        proptest::collection::vec(inner, 0..3).prop_map(OfAction::Clone)
    })
}

proptest! {
    /// What is encoded decodes to the same actions, in every version.
    #[test]
    fn encode_then_decode_gives_the_actions(acts in proptest::collection::vec(arb_action(), 0..5)) {
        for v in Version::ALL {
            let mut out = Vec::new();
            encode_instructions(v, &acts, FlowCtx::default(), &mut out).unwrap();
            prop_assert_eq!(decode_instructions(v, &out), Ok(as_carried(v, &acts)), "{:?} {:02x?}", v, out);
        }
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        for v in Version::ALL {
            let _ = decode_instructions(v, &bytes);
            let _ = decode_actions(v, &bytes);
        }
    }

    /// Random action headers with plausible lengths reach the bodies' checks without panicking.
    #[test]
    fn random_actions_never_panic(
        acts in proptest::collection::vec((0u16..30, 0u16..52, 2usize..5, any::<[u8; 40]>()), 1..4),
        nx in any::<bool>(),
    ) {
        let mut b = Vec::new();
        for (ty, sub, units, body) in acts {
            let len = 8 * units;
            if nx {
                b.extend_from_slice(&[0xff, 0xff]);
                b.extend_from_slice(&(len as u16).to_be_bytes());
                b.extend_from_slice(&[0, 0, 0x23, 0x20]);
                b.extend_from_slice(&sub.to_be_bytes());
                b.extend_from_slice(&body[..len - 10]);
            } else {
                b.extend_from_slice(&ty.to_be_bytes());
                b.extend_from_slice(&(len as u16).to_be_bytes());
                b.extend_from_slice(&body[..len - 4]);
            }
        }
        for v in Version::ALL {
            let _ = decode_actions(v, &b);
        }
    }

    /// Action headers whose lengths need not fit their kinds (a Nicira action of 8 bytes, a
    /// standard one of 40), in lists long enough to read past them, decode without panicking.
    #[test]
    fn ill_sized_actions_never_panic(
        acts in proptest::collection::vec((any::<bool>(), 0u16..60, 0u16..8, any::<[u8; 64]>()), 1..4),
    ) {
        let mut b = Vec::new();
        for (nx, ty, units, body) in acts {
            let len = usize::from(units) * 8;
            let mut a = body.to_vec();
            if nx {
                a[..10].copy_from_slice(&[0xff, 0xff, 0, 0, 0, 0, 0x23, 0x20, 0, ty as u8]);
            } else {
                a[..2].copy_from_slice(&ty.to_be_bytes());
            }
            a[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            b.extend_from_slice(&a[..len.max(8)]);
        }
        b.extend_from_slice(&[0; 32]);
        for v in Version::ALL {
            let _ = decode_actions(v, &b);
            let _ = decode_instructions(v, &b);
        }
    }

    /// What decodes, encodes back to what decodes the same.
    #[test]
    fn decoded_actions_round_trip(
        acts in proptest::collection::vec((0u16..52, 2usize..4, any::<[u8; 30]>()), 1..3),
    ) {
        let mut b = Vec::new();
        for (sub, units, body) in acts {
            let len = 8 * units;
            b.extend_from_slice(&[0xff, 0xff]);
            b.extend_from_slice(&(len as u16).to_be_bytes());
            b.extend_from_slice(&[0, 0, 0x23, 0x20]);
            b.extend_from_slice(&sub.to_be_bytes());
            b.extend_from_slice(&body[..len - 10]);
        }
        if let Ok(a) = decode_actions(Version::Of10, &b) {
            // Every version that can carry the actions carries them unchanged (with a VLAN
            // tag known to be there, so that no push_vlan is added).
            let flow = FlowCtx { ip_proto: 0, has_vlan: true };
            for v in [Version::Of10, Version::Of11, Version::Of13, Version::Of15] {
                let mut out = Vec::new();
                if encode_instructions(v, &a, flow, &mut out).is_ok() {
                    prop_assert_eq!(decode_instructions(v, &out), Ok(as_carried(v, &a)), "{:?}", v);
                }
            }
        }
    }
}

#[test]
fn debug_actions_only_with_enable_dummy() {
    // OVS's NXAST_DEBUG_RECIRC (255) and NXAST_DEBUG_SLOW (254): taken only by a switch
    // started with --enable-dummy, else OFPBAC_BAD_VENDOR_TYPE.
    let acts = [OfAction::DebugRecirc, OfAction::DebugSlow];
    let mut out = Vec::new();
    let flow = FlowCtx::of(&ofproto::pipekey::PipeMatch::catchall());
    encode_actions(Version::Of13, &acts, flow, &mut out).unwrap();
    assert_eq!(
        out,
        unhex(
            "ffff001000002320 00ff000000000000 \
             ffff001000002320 00fe000000000000"
                .replace(' ', "")
                .as_str()
        )
    );
    assert_eq!(
        decode_actions(Version::Of13, &out),
        Err(OfpErr::OfpbacBadVendorType)
    );
    enable_debug_actions();
    assert_eq!(decode_actions(Version::Of13, &out).unwrap(), acts);
}

/// `encap`/`decap` (`NXAST_ENCAP`, `NXAST_DECAP`): OpenFlow 1.3+ only, with OVS's errors
/// (checked with `ovs-ofctl parse-actions`).
#[test]
fn encap_and_decap_as_ovs_ofctl_has_them() {
    use Version::*;
    use ofproto::syntax::packet_type::{ETHERNET, MPLS, MPLS_MC, USE_NEXT_PROTO};
    for (hex, a) in [
        ("ffff001000002320002e000000018847", OfAction::Encap(MPLS)),
        ("ffff001000002320002e000000018848", OfAction::Encap(MPLS_MC)),
        (
            "ffff001000002320002e000000000000",
            OfAction::Encap(ETHERNET),
        ),
        (
            "ffff001000002320002f00000000fffe",
            OfAction::Decap(USE_NEXT_PROTO),
        ),
        (
            "ffff001000002320002f000000010800",
            OfAction::Decap(0x1_0800),
        ),
    ] {
        for v in [Of13, Of14, Of15] {
            assert_eq!(decode_actions(v, &unhex(hex)), Ok(vec![a.clone()]), "{hex}");
            let mut out = Vec::new();
            encode_actions(v, std::slice::from_ref(&a), FlowCtx::default(), &mut out).unwrap();
            assert_eq!(out, unhex(hex), "{a:?}");
        }
        for v in [Of10, Of11, Of12] {
            assert_eq!(err(v, hex), OfpErr::OfpbacBadVendorType, "{hex}");
            let mut out = Vec::new();
            let a = std::slice::from_ref(&a);
            assert!(encode_actions(v, a, FlowCtx::default(), &mut out).is_err());
        }
    }
    // A property (none is defined for these headers); a malformed one; an IPv4 header, or
    // NSH, which flowpath does not encapsulate; decap with a property.
    assert_eq!(
        err(Of13, "ffff001800002320002e0000000188470001010800000000"),
        OfpErr::NxbacUnknownEdProp
    );
    assert_eq!(
        err(Of13, "ffff001800002320002e0000000188470001010200000000"),
        OfpErr::OfpbacBadLen
    );
    assert_eq!(
        err(Of13, "ffff001000002320002e000000010800"),
        OfpErr::NxbacBadHeaderType
    );
    assert_eq!(
        err(Of13, "ffff001000002320002e00000001894f"),
        OfpErr::NxbacBadHeaderType
    );
    assert_eq!(
        err(Of13, "ffff001800002320002f0000000100000001010800000000"),
        OfpErr::NxbacUnknownEdProp
    );
}
