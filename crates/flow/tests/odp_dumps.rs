//! Datapath flow text format against real OVS output: every flow line captured from OVS-DPDK
//! (`dpif/dump-flows`, `dpctl/dump-flows -m`, `tnl/ports/show -v`) must parse and print back
//! byte-identical; plus property tests (print ∘ parse = id) and error columns.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use flow::odp::{
    Action, Attr, DpFlow, DpKey, KeyAttrs, PortNames, TnlIp, TnlL4, format_actions, parse_actions,
    parse_flow, parse_key, tun_field,
};
use flow::{EthAddr, FlowKey, Mask};
use proptest::prelude::*;

fn dump_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ovs-dpdk-dumps")
}

/// The flow lines of a dump file: (kind, line), kind "flow" or "tnl" (a bare key).
fn flow_lines(text: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut section = "";
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            section = if h.starts_with("ovs-appctl dpif/dump-flows")
                || h.starts_with("ovs-appctl dpctl/dump-flows")
            {
                "flow"
            } else if h.starts_with("ovs-appctl tnl/ports/show -v") {
                "tnl"
            } else {
                ""
            };
            continue;
        }
        if line.is_empty()
            || line.starts_with("flow-dump from")
            || line.starts_with("Listening ports")
        {
            continue;
        }
        match section {
            "flow" => out.push(("flow", line.to_owned())),
            "tnl" => {
                // `vxlan_sys_4789 (2) : eth(...),...`
                let (_, key) = line.split_once(" : ").expect("tnl/ports line");
                out.push(("tnl", key.to_owned()));
            }
            _ => {}
        }
    }
    out
}

#[test]
fn every_dump_line_round_trips() {
    let mut files: Vec<_> = std::fs::read_dir(dump_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 35);
    let mut n = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut names = PortNames::new();
        for (kind, line) in flow_lines(&text) {
            let printed = if kind == "flow" {
                let f = parse_flow(&line, &mut names)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{line}", path.display()));
                f.format(Some(&names), None)
            } else {
                let k = parse_key(&line, &mut names)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{line}", path.display()));
                k.format(Some(&names), None)
            };
            assert_eq!(printed, line, "{}", path.display());
            n += 1;
        }
    }
    // 35 files; each has at least one dpif and one dpctl line.
    assert!(n >= 35 * 3, "only {n} lines");
}

fn file_flows(name: &str) -> (Vec<DpFlow>, PortNames) {
    let text = std::fs::read_to_string(dump_dir().join(name)).unwrap();
    let mut names = PortNames::new();
    let flows = flow_lines(&text)
        .into_iter()
        .filter(|(k, _)| *k == "flow")
        .map(|(_, l)| parse_flow(&l, &mut names).unwrap())
        .collect();
    (flows, names)
}

#[test]
fn vxlan_decap_flow_is_sensible() {
    let (flows, names) = file_flows("vxlan_decap_8.txt");
    let f = &flows[0];
    assert!(!f.attrs.verbose);
    assert_eq!(f.key.tun_id(), 0x64);
    assert_eq!(f.mask.tun_id(), u64::MAX);
    assert_eq!(f.key.tun_ipv4_src(), Ipv4Addr::new(10, 1, 2, 9));
    assert_eq!(f.key.in_port(), 2);
    assert_eq!(f.key.nw_dst(), Ipv4Addr::new(192, 168, 2, 16));
    assert_eq!(f.mask.nw_src(), Ipv4Addr::UNSPECIFIED);
    assert_eq!(f.stats.unwrap().packets, 95058783);
    match &f.actions[..] {
        [Action::Set(k), Action::Output(3)] => {
            assert_eq!(k.key.eth_dst(), EthAddr([0x52, 0x54, 0, 0xa0, 0x91, 0x99]));
            assert_eq!(k.mask.eth_src(), EthAddr::ZERO);
        }
        a => panic!("{a:?}"),
    }
    // The verbose line: ports by name, zero masks kept with their values.
    let v = flows
        .iter()
        .find(|f| f.ufid.is_some() && f.attrs.contains(Attr::Tunnel))
        .unwrap();
    assert!(v.attrs.verbose);
    assert_eq!(v.key.in_port(), names.number("vxlan_sys_4789").unwrap());
    assert_eq!(v.key.tun_ttl(), 64);
    assert_eq!(v.mask.tun_ttl(), 0);
    assert_eq!(v.key.eth_src(), EthAddr([0x52, 0x54, 0, 0xa0, 0x81, 0x01]));
    assert_eq!(v.mask.eth_src(), EthAddr::ZERO);
    assert_eq!(v.extra_info.as_deref(), Some("miniflow_bits(9,2)"));
    assert_eq!(v.dp.as_deref(), Some("ovs"));
}

#[test]
fn p2p_l3_mask_is_a_prefix() {
    let (flows, _) = file_flows("p2p_l3_1000.txt");
    for f in &flows {
        assert_eq!(f.key.nw_dst(), Ipv4Addr::new(10, 1, 0, 2));
        assert_eq!(f.mask.nw_dst(), Ipv4Addr::new(255, 255, 0, 0));
    }
}

#[test]
fn mplsogre_and_geneve_and_encap_fields() {
    let (flows, _) = file_flows("mplsogre_decap_8.txt");
    let f = &flows[0];
    assert_eq!(f.key.packet_type(), (1 << 16) | 0x8847);
    assert_eq!(f.key.mpls_lse0() >> 12, 815);
    assert_eq!(f.mask.mpls_lse0(), 0xfffff000 | 0x100);
    assert_eq!(f.key.mpls_lse0() & 0xff, 4);
    assert!(matches!(f.actions[1], Action::PopMpls { eth_type: 0x800 }));

    let (flows, _) = file_flows("geneve_decap_8.txt");
    let mut opts = [0u8; 252];
    let n = flows[0].key.tun_geneve_opts(&mut opts);
    assert_eq!(
        &opts[..n],
        &[0x01, 0x02, 0x80, 0x01, 0x00, 0x03, 0x00, 0x02]
    );

    let (flows, _) = file_flows("vxlan_encap_8.txt");
    let Action::TnlPush(t) = &flows[0].actions[0] else {
        panic!()
    };
    assert_eq!(t.tnl_port, 2);
    assert_eq!(t.out_port, 3);
    assert_eq!(t.header.size, 50);
    assert!(matches!(
        t.header.ip,
        TnlIp::V4 {
            ttl: 64,
            frag: 0x4000,
            proto: 17,
            ..
        }
    ));
    assert!(matches!(
        t.header.l4,
        TnlL4::Vxlan {
            vni: 0x64,
            flags: 0x8000000,
            ..
        }
    ));
    assert_eq!(flows[0].mask.nw_tos(), 0x3);

    let (flows, _) = file_flows("ct_8.txt");
    assert_eq!(flows[0].key.ct_state(), 0x21);
    assert_eq!(flows[0].mask.ct_state(), 0x21);
    assert_eq!(flows[1].mask.ct_state(), 0x20);
    assert_eq!(flows[2].key.ct_tp_dst(), 2000);
}

/// The two examples of the design notes (§3.5), from OVS's test suite.
#[test]
fn design_examples_round_trip() {
    let mut names = PortNames::new();
    for line in [
        "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth(src=00:06:07:08:09:0a,dst=00:01:02:03:04:05),eth_type(0x8100),vlan(vid=1000,pcp=5/0x0),encap(eth_type(0x0800),ipv4(frag=no)), packets:1, bytes:64, used:0.0s, actions:1",
        "recirc_id(0x1),in_port(2),ct_state(+rpl+trk),ct_label(0x1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), actions:1",
    ] {
        let f = parse_flow(line, &mut names).unwrap();
        assert_eq!(f.to_string(), line);
    }
    let f = parse_flow(
        "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth(src=00:06:07:08:09:0a,dst=00:01:02:03:04:05),eth_type(0x8100),vlan(vid=1000,pcp=5/0x0),encap(eth_type(0x0800),ipv4(frag=no)), packets:1, bytes:64, used:0.0s, actions:1",
        &mut names,
    )
    .unwrap();
    assert_eq!(f.key.vlan_tpid(), 0x8100);
    assert_eq!(f.key.vlan_tci(), 0x1000 | 1000 | (5 << 13));
    assert_eq!(f.mask.vlan_tci(), 0x1fff);
    assert_eq!(f.key.eth_type(), 0x0800);
    assert_eq!(f.mask.eth_type(), 0xffff);
}

// ---------------------------------------------------------------------------------------------
// Errors name the right column.

#[test]
fn errors_name_the_column() {
    let mut n = PortNames::new();
    let cases: &[(&str, usize, &str)] = &[
        ("in_port(1),foo(2)", 12, "unknown key attribute 'foo'"),
        (
            "in_port(1),ipv4(src=10.0.0.300)",
            21,
            "expected IPv4 address",
        ),
        (
            "eth(src=00:11:22:33:44)",
            23,
            "expected ':' in Ethernet address",
        ),
        (
            "ipv4(src=10.0.0.1,dst=10.0.0.2",
            31,
            "expected ',' or ')' after ipv4 field",
        ),
        (
            "ipv4(src=10.0.0.1x)",
            18,
            "expected ',' or ')' after ipv4 field, found 'x'",
        ),
        ("ipv4(ttl=256)", 10, "ttl out of range (maximum 255)"),
        (
            "ipv4(bogus=1)",
            6,
            "expected ipv4 field (src, dst, proto, tos, ttl, frag)",
        ),
        (
            "in_port(1),eth_type(0x0800)x",
            28,
            "expected ',' and another key attribute",
        ),
        ("vlan(vid=4096)", 10, "vid out of range"),
        (
            "eth_type(0x8100),vlan(vid=1),encap(eth_type(0x8100),vlan(vid=2),encap(vlan(vid=3)))",
            71,
            "more than two VLAN tags",
        ),
    ];
    for &(text, col, msg) in cases {
        let e = parse_key(text, &mut n).expect_err(text);
        assert_eq!(e.column(), col, "{text}: {e}");
        assert!(e.to_string().contains(msg), "{text}: {e}");
        assert!(e.to_string().starts_with(&format!("column {col}: ")), "{e}");
    }
    let acts: &[(&str, usize, &str)] = &[
        ("1,frobnicate(3)", 3, "unknown action 'frobnicate'"),
        (
            "set(eth(dst=52:54:00:a0:91:99),2",
            31,
            "expected ')' closing action",
        ),
        ("push_vlan(vid=1,pcp=9)", 21, "pcp out of range"),
        ("recirc(0x1", 11, "found end of input"),
        ("ct(commit,zone=70000)", 16, "zone out of range"),
        (
            "tnl_push(tnl_port(2),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv5(",
            108,
            "expected ipv4( or ipv6(",
        ),
    ];
    for &(text, col, msg) in acts {
        let e = parse_actions(text, &mut n).expect_err(text);
        assert_eq!(e.column(), col, "{text}: {e}");
        assert!(e.to_string().contains(msg), "{text}: {e}");
    }
    let e = parse_flow(
        "in_port(1), packets:1, bytes:2, used:never, actions:bad(",
        &mut n,
    )
    .unwrap_err();
    assert_eq!(e.column(), 53, "{e}");
    let e = parse_flow("in_port(1) actions:1", &mut n).unwrap_err();
    assert_eq!(e.column(), 11, "{e}");
}

#[test]
fn nesting_is_bounded() {
    let mut n = PortNames::new();
    let deep = format!("{}1{}", "clone(".repeat(17), ")".repeat(17));
    let e = parse_actions(&deep, &mut n).unwrap_err();
    assert!(e.to_string().contains("nesting deeper than 16"), "{e}");
    let ok = format!("{}1{}", "clone(".repeat(16), ")".repeat(16));
    assert_eq!(
        format_actions(&parse_actions(&ok, &mut n).unwrap(), None),
        ok
    );
    // Deep garbage never panics or overflows the stack.
    let bomb = "clone(".repeat(100_000);
    assert!(parse_actions(&bomb, &mut n).is_err());
    let bomb = "encap(".repeat(100_000);
    assert!(parse_key(&bomb, &mut n).is_err());
}

// ---------------------------------------------------------------------------------------------
// Property tests: random flows print, parse back equal, and print again identically.

/// Attributes the generator may use at depth 0, with a function filling key and mask.
fn l3l4() -> impl Strategy<Value = (Vec<Attr>, u8)> {
    prop_oneof![
        Just((vec![Attr::Ipv4, Attr::Tcp, Attr::TcpFlags], 0)),
        Just((vec![Attr::Ipv4, Attr::Udp], 0)),
        Just((vec![Attr::Ipv4, Attr::Icmp], 0)),
        Just((vec![Attr::Ipv6, Attr::Sctp], 0)),
        Just((vec![Attr::Ipv6, Attr::Icmpv6, Attr::Nd], 0)),
        Just((vec![Attr::Arp], 0)),
        Just((vec![Attr::Mpls], 1)),
        Just((vec![Attr::Mpls], 2)),
        Just((vec![Attr::Mpls], 3)),
        Just((vec![], 0)),
    ]
}

/// A random value/mask for every field of the key (the printer only looks at the attributes'
/// fields). `exactish` masks are all-ones or random; non-verbose flows need non-zero masks on
/// everything they print, so masks are forced non-zero there.
fn random_words() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    (
        proptest::collection::vec(any::<u8>(), 260),
        proptest::collection::vec(0u8..4, 260),
    )
}

/// The random choices behind one generated flow.
struct Gen {
    /// Which metadata attributes appear.
    meta: Vec<bool>,
    /// L3/L4 attributes and the MPLS label count.
    l3: (Vec<Attr>, u8),
    vlans: u8,
    verbose: bool,
    /// Key bytes 0..260 and per-byte mask choices.
    kb: Vec<u8>,
    mk: Vec<u8>,
    actions: Vec<Action>,
    stats: Option<(u64, u64, Option<u64>, u16)>,
}

fn build_flow(g: Gen) -> DpFlow {
    let Gen {
        meta,
        l3,
        vlans,
        verbose,
        kb,
        mk,
        actions,
        stats,
    } = g;
    let mut key = FlowKey::new();
    let mut mask = Mask::new();
    key.set_bytes_at(0, &kb);
    // Mask bytes: 0 → zero, 1 → ones, 2 → the key byte's bits, 3 → 0xf0.
    let mb: Vec<u8> = mk
        .iter()
        .zip(&kb)
        .map(|(m, k)| [0, 0xff, *k | 1, 0xf0][*m as usize])
        .collect();
    mask.set_bytes_at(0, &mb);
    let mut attrs = KeyAttrs {
        verbose,
        ..Default::default()
    };
    let meta_attrs = [
        Attr::SkbPriority,
        Attr::Tunnel,
        Attr::SkbMark,
        Attr::CtState,
        Attr::CtZone,
        Attr::CtMark,
        Attr::CtLabel,
        Attr::CtTuple4,
        Attr::RecircId,
        Attr::DpHash,
    ];
    for (a, on) in meta_attrs.iter().zip(&meta) {
        if *on {
            attrs.push(*a, 0);
        }
    }
    attrs.skb_priority = u32::from_be_bytes([kb[0], kb[1], kb[2], kb[3]]);
    attrs.skb_priority_mask = u32::from_be_bytes([mb[4], mb[5], mb[6], mb[7]]);
    attrs.tun_fields = u16::from_be_bytes([kb[8], kb[9]]) & 0x0fff & !tun_field::GENEVE;
    attrs
        .push(Attr::InPort, 0)
        .push(Attr::PacketType, 0)
        .push(Attr::Eth, 0);
    let (l3attrs, lses) = l3;
    for d in 0..vlans {
        attrs
            .push(Attr::EthType, d)
            .push(Attr::Vlan, d)
            .push(Attr::Encap, d);
        // Present tags have CFI set, as OVS keys do.
        let ofs = if d == 0 { 22 } else { 46 };
        let tci = u16::from_be_bytes([kb[ofs], kb[ofs + 1]]) | 0x1000;
        key.set_bytes_at(ofs, &tci.to_be_bytes());
    }
    attrs.push(Attr::EthType, vlans);
    for a in l3attrs {
        attrs.push(a, vlans);
    }
    attrs.mpls_lses = lses.max(1);
    // GENEVE options: two well-formed options.
    if meta[1] && kb[10] & 1 == 1 {
        attrs.tun_fields |= tun_field::GENEVE;
        let opts = [
            0x01, 0x02, 0x80, 0x01, kb[11], kb[12], kb[13], kb[14], 0xff, 0xff, 0x05, 0x00,
        ];
        key.set_tun_geneve_opts(&opts);
        let m = [
            0xff, 0xff, mb[15], 0x1f, mb[16], mb[17], mb[18], mb[19], 0xff, 0x00, 0xff, 0x1f,
        ];
        mask.set_tun_geneve_opt_bytes(0, &m);
        mask.set_tun_geneve_len(0xff);
    }
    // TCP flags are 12 bits, the flow label 20 bits in the text.
    let (tf, tm) = (key.tcp_flags() & 0xfff, mask.tcp_flags() & 0xfff);
    key.set_tcp_flags(tf);
    mask.set_tcp_flags(tm);
    let (kl, ml) = (key.ipv6_label() & 0xfffff, mask.ipv6_label() & 0xfffff);
    key.set_ipv6_label(kl);
    mask.set_ipv6_label(ml);
    // Fields OVS's text cannot carry: canonicalize so the parsed flow compares equal.
    normalize(&mut key, &mut mask, &mut attrs);
    DpFlow {
        ufid: if verbose { Some([kb[20]; 16]) } else { None },
        key,
        mask,
        attrs,
        stats: stats.map(|(p, b, u, f)| flow::odp::FlowStats {
            packets: p,
            bytes: b,
            used: u.map(flow::odp::Used::millis),
            tcp_flags: f & 0xfff,
        }),
        offloaded: None,
        dp: if verbose { Some("ovs".into()) } else { None },
        actions,
        extra_info: if verbose {
            Some("miniflow_bits(4,1)".into())
        } else {
            None
        },
    }
}

/// Makes a random key/mask representable: what the text form prints is what the parser
/// reads back. Done by printing and parsing once; the property is then that this is a fixed
/// point, which exercises every printer against the parser.
fn normalize(key: &mut FlowKey, mask: &mut Mask, attrs: &mut KeyAttrs) {
    let dk = DpKey {
        key: key.clone(),
        mask: mask.clone(),
        attrs: attrs.clone(),
    };
    let text = dk.format(None, None);
    let mut n = PortNames::new();
    let back = parse_key(&text, &mut n).unwrap_or_else(|e| panic!("{e}\n{text}"));
    *key = back.key;
    *mask = back.mask;
    // Non-verbose output drops wildcarded attributes.
    let verbose = attrs.verbose;
    *attrs = back.attrs;
    attrs.verbose = verbose;
}

fn action_strategy() -> impl Strategy<Value = Action> {
    let leaf = prop_oneof![
        (0u32..70000).prop_map(Action::Output),
        any::<u32>().prop_map(Action::Recirc),
        any::<u32>().prop_map(Action::Meter),
        any::<u32>().prop_map(Action::Trunc),
        Just(Action::PopVlan),
        Just(Action::CtClear),
        Just(Action::PopEth),
        (any::<u16>(), 0u16..0x1fff).prop_map(|(tpid, t)| Action::PushVlan {
            tpid: if tpid & 1 == 0 { 0x8100 } else { 0x88a8 },
            tci: t | 0x1000
        }),
        (any::<u32>(), any::<u16>()).prop_map(|(lse, eth_type)| Action::PushMpls { lse, eth_type }),
        any::<u16>().prop_map(|eth_type| Action::PopMpls { eth_type }),
        (any::<[u8; 6]>(), any::<[u8; 6]>()).prop_map(|(s, d)| Action::PushEth {
            src: EthAddr(s),
            dst: EthAddr(d)
        }),
        (any::<bool>(), any::<u32>()).prop_map(|(s, basis)| Action::Hash {
            alg: if s {
                flow::odp::HashAlg::SymL4
            } else {
                flow::odp::HashAlg::L4
            },
            basis
        }),
        (
            any::<bool>(),
            any::<u16>(),
            proptest::option::of(any::<(u32, u32)>())
        )
            .prop_map(|(commit, zone, mark)| {
                Action::Ct(Box::new(flow::odp::CtAction {
                    commit,
                    zone,
                    mark,
                    ..Default::default()
                }))
            }),
        any::<[u8; 6]>().prop_map(|mac| {
            // A masked set: only the destination.
            let mut k = FlowKey::new();
            k.set_eth_dst(EthAddr(mac));
            let mut m = Mask::new();
            m.set_eth_dst(EthAddr::BROADCAST);
            Action::Set(Box::new(DpKey {
                key: k,
                mask: m,
                attrs: KeyAttrs::from_attrs(&[Attr::Eth]),
            }))
        }),
        (any::<[u32; 2]>(), any::<[u8; 3]>(), 0u8..3).prop_map(|(ip, b, frag)| {
            // A plain set: every field exact.
            let mut k = FlowKey::new();
            k.set_nw_src(Ipv4Addr::from(ip[0]))
                .set_nw_dst(Ipv4Addr::from(ip[1]));
            k.set_nw_proto(b[0])
                .set_nw_tos(b[1])
                .set_nw_ttl(b[2])
                .set_nw_frag([0, 1, 3][frag as usize]);
            let mut m = Mask::new();
            for f in ["nw_src", "nw_dst", "nw_proto", "nw_tos", "nw_ttl"] {
                m.set_field_exact(f);
            }
            m.set_nw_frag(3);
            Action::Set(Box::new(DpKey {
                key: k,
                mask: m,
                attrs: KeyAttrs::from_attrs(&[Attr::Ipv4]),
            }))
        }),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Action::Clone),
            (
                0u16..,
                proptest::collection::vec(inner.clone(), 0..3),
                proptest::collection::vec(inner, 0..3)
            )
                .prop_map(|(size, gt, le)| Action::CheckPktLen { size, gt, le }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_flows_round_trip(
        meta in proptest::collection::vec(any::<bool>(), 10),
        l3 in l3l4(),
        vlans in 0u8..3,
        verbose in any::<bool>(),
        (kb, mk) in random_words(),
        actions in proptest::collection::vec(action_strategy(), 0..5),
        stats in proptest::option::of((any::<u64>(), any::<u64>(), proptest::option::of(0u64..100_000_000), any::<u16>())),
    ) {
        let f = build_flow(Gen { meta, l3, vlans, verbose, kb, mk, actions, stats });
        let text = f.to_string();
        let mut names = PortNames::new();
        let g = parse_flow(&text, &mut names).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(g.to_string(), text.clone());
        // The parser infers the form; a verbose flow with nothing verbose-only in it prints
        // the same either way.
        let mut g2 = g.clone();
        g2.attrs.verbose = f.attrs.verbose;
        prop_assert_eq!(&g2, &f, "{}", text);
    }

    #[test]
    fn parser_never_panics(s in "[a-z_0-9(),=/:.+\\-{} ]{0,200}") {
        let mut n = PortNames::new();
        let _ = parse_flow(&s, &mut n);
        let _ = parse_key(&s, &mut n);
        let _ = parse_actions(&s, &mut n);
    }

    #[test]
    fn mutated_dump_lines_never_panic(idx in 0usize..2000, cut in 0usize..400, byte in any::<u8>()) {
        let text = std::fs::read_to_string(dump_dir().join("vxlan_encap_8.txt")).unwrap();
        let lines = flow_lines(&text);
        let (_, line) = &lines[idx % lines.len()];
        let mut b = line.clone().into_bytes();
        let i = cut % b.len();
        b[i] = byte;
        if let Ok(s) = String::from_utf8(b) {
            let mut n = PortNames::new();
            let _ = parse_flow(&s, &mut n);
        }
    }
}

#[test]
fn wildcarded_mpls_attribute_marks_the_verbose_form() {
    // A whole mpls() with zero masks only appears in verbose output; printing it back must
    // keep it (found by the random round-trip property).
    let line =
        "in_port(1),eth_type(0x8847),mpls(label=0/0x0,tc=0/0,ttl=0/0x0,bos=0/0), actions:drop";
    let f = flow::odp::parse_flow(line, &mut flow::odp::PortNames::new()).unwrap();
    assert!(f.attrs.verbose);
    assert!(
        f.format(None, None)
            .contains("mpls(label=0/0x0,tc=0/0,ttl=0/0x0,bos=0/0)"),
        "{}",
        f.format(None, None)
    );
}
