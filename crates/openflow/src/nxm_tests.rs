//! Tests of the NXM/OXM codec: the matches `ovs-ofctl` sends, OVS's errors for malformed
//! ones, and round-trip and random-input properties.

use super::*;
use ofproto::syntax::{FlowKind, NoPortNames, parse_flow};
use proptest::prelude::*;

/// `testdata/openflow/flow_mods.txt`: what `ovs-ofctl add-flow` sends (see
/// `scripts/gen-openflow-fixtures`), as (protocol, flow text, message).
pub(crate) fn flow_mod_fixtures() -> Vec<(String, String, Vec<u8>)> {
    let text = include_str!("../../../testdata/openflow/flow_mods.txt");
    records(text)
        .map(|l| {
            let mut it = l.split('\t');
            let (p, f, hex) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
            (p.to_string(), f.to_string(), unhex(hex))
        })
        .collect()
}

/// Every prefix of message `m` from its header up to `max` bytes, each with its length field
/// saying so: messages cut short, for the decoders' no-panic properties.
pub(crate) fn cut_messages(m: &[u8], max: usize) -> impl Iterator<Item = Vec<u8>> + '_ {
    (8..m.len().min(max)).map(|n| {
        let mut p = m[..n].to_vec();
        p[2..4].copy_from_slice(&(n as u16).to_be_bytes());
        p
    })
}

/// OpenFlow 1.0 with its own match and with NXM, 1.1's fixed match, 1.3's and 1.5's OXM.
pub(crate) fn all_forms() -> [crate::flow_mod::Protocol; 5] {
    [
        crate::flow_mod::Protocol::new(Version::Of10),
        crate::flow_mod::Protocol {
            version: Version::Of10,
            nxm: true,
            table_id: false,
        },
        crate::flow_mod::Protocol::new(Version::Of11),
        crate::flow_mod::Protocol::new(Version::Of13),
        crate::flow_mod::Protocol::new(Version::Of15),
    ]
}

/// Random bytes made into a message of wire version `v`: type `ty`, or (when `nx_subtype` is
/// given) a Nicira vendor message of that subtype, its length field saying how long it is.
pub(crate) fn framed(mut m: Vec<u8>, v: u8, ty: u8, nx_subtype: Option<u32>) -> Vec<u8> {
    if m.len() >= 16 {
        m[0] = v;
        m[1] = if nx_subtype.is_some() { 4 } else { ty };
        let n = m.len() as u16;
        m[2..4].copy_from_slice(&n.to_be_bytes());
        if let Some(sub) = nx_subtype {
            m[8..12].copy_from_slice(&crate::header::NX_VENDOR_ID.to_be_bytes());
            m[12..16].copy_from_slice(&sub.to_be_bytes());
        }
    }
    m
}

/// The lines of a recorded fixture file, comments and blank lines left out.
pub(crate) fn records(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
}

/// What `ovs-ofctl ofp-print` prints for `msg`, or `None` where `ovs-ofctl` is not installed
/// (the tests that ask it are then skipped).
pub(crate) fn ofp_print(msg: &[u8]) -> Option<String> {
    let hex: String = msg.iter().map(|b| format!("{b:02x}")).collect();
    let o = std::process::Command::new("ovs-ofctl")
        .args(["ofp-print", &hex])
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

pub(crate) fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn parsed(flow: &str) -> PipeMatch {
    parse_flow(flow, FlowKind::Add, &NoPortNames)
        .unwrap_or_else(|e| panic!("{flow}: {e}"))
        .match_
}

fn is_nxt_flow_mod(m: &[u8]) -> bool {
    m[0] == 1 && m[1] == 4 && m[8..16] == [0, 0, 0x23, 0x20, 0, 0, 0, 13]
}

/// Every NXM match `ovs-ofctl` sent decodes to the flow it was given, and encodes back to the
/// same bytes.
#[test]
fn nx_matches_agree_with_ovs_ofctl() {
    let mut n = 0;
    for (_, flow, msg) in flow_mod_fixtures() {
        if !is_nxt_flow_mod(&msg) {
            continue;
        }
        let match_len = usize::from(u16::from_be_bytes([msg[40], msg[41]]));
        let wire = &msg[48..];
        let (got, used) = pull_nx_match(wire, match_len, true).unwrap();
        assert_eq!(used, match_len.next_multiple_of(8));
        let want = parsed(&flow);
        assert_eq!(got.match_, want, "{flow}");
        let mut out = Vec::new();
        let len = put_nx_match(&mut out, &want, 0, 0, &TlvLens::default());
        assert_eq!(len, match_len, "{flow}");
        assert_eq!(out, wire[..used], "{flow}");
        n += 1;
    }
    assert!(n >= 30, "only {n} NXM vectors");
}

/// The same for OXM, in OpenFlow 1.2 to 1.5.
#[test]
fn oxm_matches_agree_with_ovs_ofctl() {
    let mut n = 0;
    let mut bad = Vec::new();
    for (proto, flow, msg) in flow_mod_fixtures() {
        let version = Version::from_name(&proto).unwrap();
        if version < Version::Of12 {
            continue;
        }
        let wire = &msg[48..];
        let (got, used) = match pull_oxm_match(wire) {
            Ok(x) => x,
            Err(e) => {
                bad.push(format!("{proto} {flow}: {e}"));
                continue;
            }
        };
        let want = parsed(&flow);
        // OXM cannot say "no VLAN, any PCP" apart from "no VLAN": `dl_vlan=0xffff` comes back
        // as `vlan_tci=0/0x1fff`, as it does in OVS; nor a PCP without a VID, which comes
        // back as nothing but "Ethernet".
        let lossy =
            flow.starts_with("dl_vlan=0xffff") || flow.starts_with("vlan_tci=0x5000/0xe000");
        if got != want && !lossy {
            bad.push(format!("{proto} {flow}: decoded {got:?}"));
        }
        // A lossy decoding need not encode back to the same bytes.
        let checks = if lossy {
            vec![("parsed", &want)]
        } else {
            vec![("parsed", &want), ("decoded", &got)]
        };
        for (what, m) in checks {
            let mut out = Vec::new();
            put_oxm_match(&mut out, version, m, &TlvLens::default());
            if out != wire[..used] {
                bad.push(format!(
                    "{proto} {flow}: {what} encodes as {out:02x?}, ovs-ofctl {:02x?}",
                    &wire[..used]
                ));
            }
        }
        n += 1;
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(n >= 150, "only {n} OXM vectors");
}

#[test]
fn headers_follow_ovs_per_version() {
    let hdr = |f, v| field_header(f, v).unwrap().id;
    assert_eq!(hdr(F::ETH_SRC, 0).class, OFPXMC_NXM_0);
    assert_eq!(hdr(F::ETH_SRC, 3).class, OFPXMC_OPENFLOW_BASIC);
    assert_eq!(hdr(F::TCP_FLAGS, 3).class, OFPXMC_NXM_1);
    assert_eq!(hdr(F::TCP_FLAGS, 4).experimenter, ONF_VENDOR_ID);
    assert_eq!(hdr(F::TCP_FLAGS, 6).class, OFPXMC_OPENFLOW_BASIC);
    // A field with only an OXM header uses it in NXM too.
    assert_eq!(hdr(F::METADATA, 0).class, OFPXMC_OPENFLOW_BASIC);
    assert_eq!(hdr(F::XREG1, 0).class, OFPXMC_PACKET_REGS);
    assert!(field_header(F::DL_VLAN, 4).is_none());
    // The ONF header: experimenter class, 4 bytes of id counted in the length.
    let mut out = Vec::new();
    OxmHeader::new(hdr(F::TCP_FLAGS, 4), 2, true).write(&mut out);
    assert_eq!(out, [0xff, 0xff, 0x55, 0x08, 0x4f, 0x4e, 0x46, 0x00]);
    let back = OxmHeader::parse(&out).unwrap();
    assert_eq!((back.value_len(), back.header_len()), (2, 8));
    assert_eq!(field_by_header(&back).unwrap().field, F::TCP_FLAGS);
}

fn err(hex: &str) -> OfpErr {
    pull_raw(&unhex(hex), false).unwrap_err()
}

/// Malformed matches get OVS's errors.
#[test]
fn malformed_matches_get_ovs_errors() {
    // Truncated header and payload.
    assert_eq!(err("000006"), OfpErr::OfpbmcBadLen);
    assert_eq!(err("00000602"), OfpErr::OfpbmcBadLen);
    // Unknown field (NXM_NX field 127), and a known one with a wrong length.
    assert_eq!(err("0001fe0400000001"), OfpErr::OfpbmcBadField);
    assert_eq!(err("0000060300000001"), OfpErr::OfpbmcBadField);
    // 1-bits outside the mask.
    assert_eq!(err("0000110801020304ffff0000"), OfpErr::OfpbmcBadWildcards);
    // A mask on eth_type.
    assert_eq!(err("000007040800ff00"), OfpErr::OfpbmcBadMask);
    // ip_src without eth_type=ip.
    assert_eq!(err("00000e040a000001"), OfpErr::OfpbmcBadPrereq);
    // eth_type twice.
    assert_eq!(err("000006020800000006020800"), OfpErr::OfpbmcDupField);
    // A DSCP with ECN bits.
    assert_eq!(err("00000602080000000a0103"), OfpErr::OfpbmcBadValue);
    // An OXM in_port between the OpenFlow 1.0 and 1.1 ranges.
    assert_eq!(err("80000004ffff0000"), OfpErr::OfpbmcBadValue);
    // The cookie is only allowed in NXM requests.
    assert_eq!(err("00013c080000000000000001"), OfpErr::OfpbmcBadField);
    let m = pull_raw(&unhex("00013d1000000000000000010000000000000003"), true).unwrap();
    assert_eq!((m.cookie, m.cookie_mask), (1, 3));
    // An ofp_match of another type, or too short.
    assert_eq!(
        pull_oxm_match(&unhex("0000000400000000")).unwrap_err(),
        OfpErr::OfpbmcBadType
    );
    assert_eq!(
        pull_oxm_match(&unhex("00010003")).unwrap_err(),
        OfpErr::OfpbmcBadLen
    );
    assert_eq!(
        pull_oxm_match(&unhex("0001000c80000a0208")).unwrap_err(),
        OfpErr::OfpbmcBadLen
    );
    // OXM packet_type: Ethernet is accepted, another type is not.
    assert!(pull_raw(&unhex("8000580400000000"), false).is_ok());
    assert_eq!(err("8000580400010800"), OfpErr::OfpbmcBadValue);
}

#[test]
fn tlv_map_widths() {
    // Field 63, which no other test here uses: the map's layout is the process's.
    let map =
        ofproto::tunnel::parse_tlv_map("{class=0x102,type=0x80,len=4}->tun_metadata63").unwrap();
    let mut table = ofproto::tun_md::TunTable::default();
    table.add(&map).unwrap();
    let mut want = TlvLens::default();
    want.0[63] = 4;
    assert_eq!(TlvLens::from_tlv_map(&table), want);
}

#[test]
fn tunnel_metadata_keeps_its_wire_width() {
    // NXM_NX_TUN_METADATA0 with 4 bytes, exact, and with a mask.
    for hex in [
        "0001500400001234",
        "0001510800001234ffffffff",
        "000151080000123400ffffff",
    ] {
        let m = pull_raw(&unhex(hex), false).unwrap().match_;
        let mut out = Vec::new();
        let mut lens = TlvLens::default();
        lens.0[0] = 4;
        put_raw(&mut out, 0, &m, 0, 0, &lens);
        let want = if hex == "0001510800001234ffffffff" {
            "0001500400001234"
        } else {
            hex
        };
        assert_eq!(out, unhex(want), "{hex}");
    }
}

/// The fields of a random match with its prerequisites: (eth_type, nw_proto) then fields of
/// that family with random values and masks.
fn arb_match() -> impl Strategy<Value = PipeMatch> {
    let families: Vec<(u16, u8, Vec<FieldId>)> = vec![
        (0, 0, vec![]),
        (
            0x0800,
            6,
            vec![
                F::IPV4_SRC,
                F::IPV4_DST,
                F::TCP_SRC,
                F::TCP_DST,
                F::TCP_FLAGS,
            ],
        ),
        (
            0x0800,
            17,
            vec![F::IP_DSCP, F::IP_ECN, F::IP_TTL, F::UDP_SRC, F::UDP_DST],
        ),
        (0x0800, 1, vec![F::IP_FRAG, F::ICMPV4_TYPE, F::ICMPV4_CODE]),
        (
            0x86dd,
            132,
            vec![F::IPV6_SRC, F::IPV6_DST, F::IPV6_LABEL, F::SCTP_SRC],
        ),
        (
            0x0806,
            0,
            vec![F::ARP_OP, F::ARP_SPA, F::ARP_TPA, F::ARP_SHA, F::ARP_THA],
        ),
        (
            0x8847,
            0,
            vec![F::MPLS_LABEL, F::MPLS_TC, F::MPLS_BOS, F::MPLS_TTL],
        ),
    ];
    let common = vec![
        F::IN_PORT,
        F::ETH_SRC,
        F::ETH_DST,
        F::VLAN_TCI,
        F::TUN_ID,
        F::TUN_SRC,
        F::TUN_DST,
        F::TUN_IPV6_DST,
        F::TUN_GBP_ID,
        F::TUN_FLAGS,
        F::PKT_MARK,
        F::CT_STATE,
        F::CT_ZONE,
        F::CT_MARK,
        F::CT_LABEL,
        F::DP_HASH,
        F::RECIRC_ID,
        F::METADATA,
        F::REG0,
        F::REG5,
        F::REG15,
    ];
    (
        0..families.len(),
        proptest::collection::vec(
            (0..32usize, any::<u128>(), any::<u128>(), any::<bool>()),
            0..8,
        ),
    )
        .prop_map(move |(fam, picks)| {
            let (dl, proto, ref fs) = families[fam];
            let mut key = PipeKey::new();
            let mut mask = PipeMask::new();
            if dl != 0 {
                F::ETH_TYPE
                    .field()
                    .match_set(&mut key, &mut mask, dl.into(), 0xffff)
                    .unwrap();
            }
            if proto != 0 {
                F::IP_PROTO
                    .field()
                    .match_set(&mut key, &mut mask, proto.into(), 0xff)
                    .unwrap();
            }
            for (i, v, m, exact) in picks {
                let id = if i < fs.len() {
                    fs[i]
                } else {
                    common[i % common.len()]
                };
                let f = id.field();
                if f.is_matched(&mask) {
                    continue;
                }
                let v = v & f.value_mask();
                let m = if exact || !f.maskable {
                    f.full_mask()
                } else {
                    m & f.value_mask()
                };
                let m = if id == F::CT_STATE && m == f.full_mask() {
                    0xff
                } else {
                    m
                };
                let _ = f.match_set(&mut key, &mut mask, v, m);
            }
            PipeMatch::new(&key, &mask)
        })
}

proptest! {
    #[test]
    fn encode_then_decode_gives_the_match(m in arb_match()) {
        // OXM has no vlan_tci: an arbitrary TCI mask only round-trips in NXM.
        let versions: &[u8] = if m.mask().dp.vlan_tci() != 0 { &[0] } else { &[0, 3, 4, 6] };
        for &version in versions {
            let mut out = Vec::new();
            put_raw(&mut out, version, &m, 0, 0, &TlvLens::default());
            let back = pull_raw(&out, false).map_err(|e| TestCaseError::fail(format!("{e} v{version} {out:02x?}")))?;
            prop_assert_eq!(&back.match_, &m, "version {}", version);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        let _ = pull_raw(&bytes, true);
        let _ = pull_oxm_match(&bytes);
        let _ = pull_nx_match(&bytes, bytes.len(), true);
    }

    /// Random well-framed entries (valid headers of known fields, random payloads) reach
    /// the checks past the framing without panicking.
    #[test]
    fn random_entries_never_panic(entries in proptest::collection::vec((0..FIELD_HEADERS.len(), any::<bool>(), any::<[u8; 32]>()), 0..6)) {
        let mut out = Vec::new();
        for (i, masked, payload) in entries {
            let fh = &FIELD_HEADERS[i];
            let w = if fh.width == 0 { 4 } else { usize::from(fh.width) };
            OxmHeader::new(fh.id, w, masked).write(&mut out);
            out.extend_from_slice(&payload[..if masked { 2 * w } else { w }]);
        }
        let _ = pull_raw(&out, false);
    }
}
