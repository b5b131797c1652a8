//! Tests of flow statistics: `ovs-ofctl`'s requests, OVS's reply vectors, `ovs-ofctl ofp-print`
//! of encoded replies, aggregate replies and reply splitting.

use super::*;
use crate::nxm::tests::{all_forms, cut_messages, flow_mod_fixtures, ofp_print, records, unhex};
use ofproto::syntax::{FlowKind, NoPortNames, parse_flow};
use proptest::prelude::*;

/// What `ovs-ofctl dump-flows` and `dump-aggregate` send (see `scripts/gen-openflow-fixtures`),
/// decoded and encoded back.
#[test]
fn requests_agree_with_ovs_ofctl() {
    let text = include_str!("../../../../testdata/openflow/stats_requests.txt");
    let mut bad = Vec::new();
    let mut n = 0;
    for l in records(text) {
        let mut it = l.split('\t');
        let (p, f, hex) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        let (cmd, filter) = f.split_once(' ').unwrap();
        let msg = unhex(hex);
        let spec = parse_flow(filter, FlowKind::ModOrDel, &NoPortNames).unwrap();
        let want = FlowStatsRequest {
            aggregate: cmd == "dump-aggregate",
            table: spec.table,
            out_port: spec.out_port,
            out_group: spec.out_group,
            cookie: spec.cookie,
            cookie_mask: spec.cookie_mask,
            match_: spec.match_,
        };
        match decode_flow_stats_request(&msg) {
            Ok(got) if got == want => {}
            Ok(got) => bad.push(format!("{p} {f}: decoded {got:?}")),
            Err(e) => bad.push(format!("{p} {f}: {e}")),
        }
        let (proto, ..) = classify(&msg).unwrap();
        let xid = u32::from_be_bytes(msg[4..8].try_into().unwrap());
        let mut out = Vec::new();
        encode_flow_stats_request(&want, proto, xid, &TlvLens::default(), &mut out).unwrap();
        if out != msg {
            bad.push(format!("{p} {f}: encoded {out:02x?}\n  ovs {msg:02x?}"));
        }
        n += 1;
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(n >= 30, "only {n} vectors");
}

/// OVS's own reply vectors decode to flows that print as `ovs-ofctl ofp-print` prints them,
/// and encode back to the same bytes.
#[test]
fn replies_agree_with_ovs() {
    let text = include_str!("../../../../testdata/openflow/stats_replies.txt");
    let mut bad = Vec::new();
    for l in records(text) {
        let mut it = l.split('\t');
        let msg = unhex(it.next().unwrap());
        let _title = it.next().unwrap();
        let want: Vec<&str> = it.map(|l| l.trim_start()).collect();
        let (flows, more) = decode_flow_stats_reply(&msg).unwrap();
        assert!(!more);
        assert_eq!(flows.len(), want.len());
        for ((spec, st), w) in flows.iter().zip(&want) {
            let got = spec.format_dump(Some(st), &NoPortNames);
            if got != *w {
                bad.push(format!("got  {got}\nwant {w}"));
            }
        }
        let (proto, ..) = classify(&msg).unwrap();
        let xid = u32::from_be_bytes(msg[4..8].try_into().unwrap());
        let mut out = Vec::new();
        encode_flow_stats_reply(&flows, proto, xid, &TlvLens::default(), &mut out).unwrap();
        // The OpenFlow 1.0 vector has values under wildcarded fields (in_port=3 with in_port
        // wildcarded), which an encoder zeroes: there the re-encoding need only mean the same.
        let same_meaning = proto.version == Version::Of10
            && decode_flow_stats_reply(&out).map(|r| r.0) == Ok(flows.clone());
        if out != msg && !same_meaning {
            let at = out.iter().zip(&msg).position(|(a, b)| a != b).unwrap_or(0);
            let win = |b: &[u8]| b[at.saturating_sub(8)..(at + 16).min(b.len())].to_vec();
            bad.push(format!(
                "{:?}: differs at byte {at} of {}/{}: {:02x?}\n  ovs {:02x?}",
                proto.version,
                out.len(),
                msg.len(),
                win(&out),
                win(&msg)
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

fn sample_stats(i: usize) -> FlowStats {
    FlowStats {
        duration_sec: 3 + i as u32,
        duration_nsec: 500_000_000,
        n_packets: 7 * i as u64,
        n_bytes: 600 * i as u64,
        idle_age: None,
        hard_age: None,
    }
}

/// The statistics with ages, and what of them `proto`'s reply carries: both in NXM, the idle
/// time in OpenFlow 1.5, none in the others.
fn aged(i: usize, proto: Protocol) -> (FlowStats, FlowStats) {
    let sent = FlowStats {
        idle_age: Some(i as u32 % 5),
        hard_age: Some(1 + i as u32 % 3),
        ..sample_stats(i)
    };
    let carried = match (proto.version, proto.nxm) {
        (Version::Of10, true) => sent,
        (Version::Of15, _) => FlowStats {
            hard_age: None,
            ..sent
        },
        _ => FlowStats {
            idle_age: None,
            hard_age: None,
            ..sent
        },
    };
    (sent, carried)
}

/// Replies this crate encodes print, under `ovs-ofctl ofp-print`, as ofproto's own
/// `dump-flows` formatting prints the flows. Runs where `ovs-ofctl` is installed.
#[test]
fn encoded_replies_print_like_dump_flows() {
    if ofp_print(&[]).is_none() {
        eprintln!("ovs-ofctl not found: skipped");
        return;
    }
    let flows: Vec<FlowSpec> = flow_mod_fixtures()
        .into_iter()
        .filter(|(p, ..)| p == "OpenFlow10")
        .map(|(_, f, _)| parse_flow(&f, FlowKind::Add, &NoPortNames).unwrap())
        .collect();
    let mut bad = Vec::new();
    for proto in all_forms() {
        // One message per flow keeps ofp-print's output aligned with the flows.
        for (i, spec) in flows.iter().enumerate() {
            let (sent, carried) = aged(i, proto);
            let st = &sent;
            // The fixed matches only for the flows they can carry.
            let fits = match (proto.version, proto.nxm) {
                (Version::Of10, false) => crate::match10::fits(&spec.match_),
                (Version::Of11, _) => crate::match11::fits(&spec.match_),
                _ => true,
            };
            if !fits {
                continue;
            }
            let mut out = Vec::new();
            encode_flow_stats_reply(
                std::slice::from_ref(&(spec.clone(), *st)),
                proto,
                1,
                &TlvLens::default(),
                &mut out,
            )
            .unwrap();
            let text = ofp_print(&out).unwrap_or_default();
            let got = text.lines().nth(1).unwrap_or("").trim_start().to_string();
            // What the version cannot carry, OVS does not print: flags before 1.3 (none
            // here in OpenFlow 1.0), importance before 1.4, "no VLAN, any PCP" in OXM.
            let mut seen = spec.clone();
            if proto.version < Version::Of13 {
                seen.flags = FlowModFlags(0);
            }
            if proto.version < Version::Of14 {
                seen.importance = 0;
            }
            if proto.version > Version::Of10 && seen.to_string().starts_with("vlan_tci=0x0000 ") {
                continue;
            }
            // OXM cannot carry a PCP without a VID. And OVS prints a match on recirc_id as a
            // megaflow, with its packet type ("recirc_id=0x10,eth,ip"), which ofproto's
            // formatting does not.
            let text = seen.to_string();
            let pcp_only =
                proto.version > Version::Of10 && text.starts_with("vlan_tci=0x4000/0xe000");
            if pcp_only || text.contains("recirc_id=") {
                continue;
            }
            let want = seen.format_dump(Some(&carried), &NoPortNames);
            if got != want {
                bad.push(format!("{:?}\n  ovs  {got}\n  ours {want}", proto.version));
            }
        }
    }
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn aggregate_round_trips_and_long_replies_split() {
    let agg = AggregateStats {
        packet_count: 5,
        byte_count: 600,
        flow_count: 2,
    };
    for proto in all_forms() {
        let mut out = Vec::new();
        encode_aggregate_reply(&agg, proto, 9, &mut out).unwrap();
        assert_eq!(decode_aggregate_reply(&out), Ok(agg), "{proto:?}");
        // And ovs-ofctl reads it so, where installed.
        if let Some(text) = ofp_print(&out) {
            let read = text.contains("packet_count=5 byte_count=600 flow_count=2");
            assert!(read && !text.contains("***"), "{proto:?}: {text}");
        }
    }
    // 2000 flows do not fit one message.
    let spec = parse_flow(
        "ip,nw_dst=10.0.0.1,actions=output:1",
        FlowKind::Add,
        &NoPortNames,
    )
    .unwrap();
    let flows = vec![(spec, FlowStats::default()); 2000];
    let mut out = Vec::new();
    encode_flow_stats_reply(
        &flows,
        Protocol::new(Version::Of13),
        3,
        &TlvLens::default(),
        &mut out,
    )
    .unwrap();
    let mut rest = &out[..];
    let (mut n, mut parts) = (0, 0);
    while !rest.is_empty() {
        let len = crate::header::message_len(rest).unwrap().unwrap();
        let (f, more) = decode_flow_stats_reply(&rest[..len]).unwrap();
        n += f.len();
        parts += 1;
        rest = &rest[len..];
        assert_eq!(more, !rest.is_empty());
    }
    assert_eq!(n, 2000);
    assert!(parts > 1);
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), v in 1u8..7, st in 0u16..3, reply in any::<bool>()) {
        let mut m = bytes;
        if m.len() >= 24 {
            m[0] = v;
            m[1] = match (v, reply) { (1, false) => 16, (1, true) => 17, (_, false) => 18, (_, true) => 19 };
            let n = m.len() as u16;
            m[2..4].copy_from_slice(&n.to_be_bytes());
            m[8..10].copy_from_slice(&(if st == 0 { 0xffff } else { st }).to_be_bytes());
            if st == 0 {
                m[12..16].copy_from_slice(&NX_VENDOR_ID.to_be_bytes());
                m[16..20].copy_from_slice(&[0, 0, 0, 0]);
            }
        }
        let _ = decode_flow_stats_request(&m);
        let _ = decode_flow_stats_reply(&m);
        let _ = decode_aggregate_reply(&m);
        // And every prefix of it: headers cut short.
        for p in cut_messages(&m, 40) {
            let _ = decode_flow_stats_request(&p);
            let _ = decode_flow_stats_reply(&p);
            let _ = decode_aggregate_reply(&p);
        }
    }
}

/// The recorded requests mutated (`testdata/openflow/stats_request_mutations.txt`): each
/// decodes, or fails with the error, that OVS's decoder gives for the same bytes (a mutation
/// that turned it into another statistics request is left out).
#[test]
fn mutated_requests_get_ovs_s_verdict() {
    let text = include_str!("../../../../testdata/openflow/stats_request_mutations.txt");
    let mut bad = Vec::new();
    let mut n = 0;
    for l in records(text) {
        let (hex, want) = l.split_once('\t').unwrap();
        let msg = unhex(hex);
        if want == "ok" && classify(&msg).is_none() {
            continue;
        }
        let got = match decode_flow_stats_request(&msg) {
            Ok(_) => "ok",
            Err(e) => e.name(),
        };
        n += 1;
        if got != want {
            bad.push(format!("ovs {want} ours {got}: {hex}"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {n} differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// Flows with every kind of action, in NXST_FLOW replies (what `ovs-ofctl dump-flows` asks for
/// by default), print under `ovs-ofctl ofp-print` as ofproto's `dump-flows` formatting prints
/// them. Runs where `ovs-ofctl` is installed.
#[test]
fn actions_in_replies_print_like_dump_flows() {
    if ofp_print(&[]).is_none() {
        eprintln!("ovs-ofctl not found: skipped");
        return;
    }
    let text = include_str!("../../../../testdata/openflow/actions.txt");
    let mut seen = std::collections::BTreeSet::new();
    let mut bad = Vec::new();
    for l in records(text) {
        let flow = l.split('\t').nth(1).unwrap();
        let Ok(spec) = parse_flow(flow, FlowKind::Add, &NoPortNames) else {
            continue;
        };
        // goto_table travels as resubmit(,N) in OpenFlow 1.0, as OVS sends it, and prints so;
        // ofproto keeps it apart on purpose. The action set does not travel in OpenFlow 1.0.
        if !seen.insert(flow.to_string())
            || flow.contains("goto_table")
            || flow.contains("write_actions")
            || flow.contains("clear_actions")
        {
            continue;
        }
        let nxm = Protocol {
            version: Version::Of10,
            nxm: true,
            table_id: false,
        };
        let st = sample_stats(1);
        let mut out = Vec::new();
        if encode_flow_stats_reply(&[(spec.clone(), st)], nxm, 1, &TlvLens::default(), &mut out)
            .is_err()
        {
            // Actions OpenFlow 1.0 cannot carry (push_vlan, meter).
            continue;
        }
        let text = ofp_print(&out).unwrap_or_default();
        let got = text.lines().nth(1).unwrap_or("").trim_start().to_string();
        // A field write prints in the form it travels in (a `set_field` of a register goes
        // as `reg_load` in OpenFlow 1.0): what the reply's reader holds is what it decodes.
        let mut held = spec.clone();
        let mut wire = Vec::new();
        if crate::actions::encode_actions(
            Version::Of10,
            &spec.actions,
            crate::actions::FlowCtx::of(&spec.match_),
            &mut wire,
        )
        .is_ok()
            && let Ok(a) = crate::actions::decode_actions(Version::Of10, &wire)
        {
            held.actions = a;
        }
        let want = held.format_dump(Some(&st), &NoPortNames);
        if got != want {
            bad.push(format!("  ovs  {got}\n  ours {want}"));
        }
    }
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad.join("\n"));
}
