//! Tests of modify flow mods' cookies, as OVS 3.1 applies them: a modify with a new cookie
//! gives it to the rules it changes, and adds the flow when it selects none and matches no
//! cookie (`ovs-ofctl` sends every OpenFlow 1.0 and NXM modify with a new cookie, 0 unless
//! `cookie=V`).

use super::*;
use crate::syntax::NoPortNames;

fn switch() -> std::sync::Arc<Ofproto> {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    of.add_flow("br0", "cookie=0x1,in_port=1,actions=output:1")
        .unwrap();
    of
}

/// The flows as `cookie MATCH`, sorted.
fn cookies(of: &Ofproto) -> Vec<String> {
    let mut v: Vec<String> = of
        .flow_entries("br0", None)
        .unwrap()
        .into_iter()
        .map(|(f, _)| {
            let mut m = String::new();
            format_match(&mut m, &f.match_, f.priority, &NoPortNames);
            format!("{:#x} table={} {m}", f.cookie, f.table)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn mod_flows_with_a_cookie_changes_it() {
    // OVS's "ofproto - mod flow with cookie change" (OpenFlow 1.0 and NXM).
    let of = switch();
    of.mod_flows("br0", "cookie=0x2,in_port=1,actions=output:1", false)
        .unwrap();
    assert_eq!(cookies(&of), ["0x2 table=0 in_port=1"]);
}

#[test]
fn mod_flows_without_a_cookie_sets_0_and_adds_what_it_misses() {
    let of = switch();
    of.mod_flows("br0", "in_port=1,actions=output:2", false)
        .unwrap();
    of.mod_flows("br0", "in_port=9,actions=output:2", false)
        .unwrap();
    of.mod_flows("br0", "table=3,in_port=7,actions=output:2", true)
        .unwrap();
    assert_eq!(
        cookies(&of),
        [
            "0x0 table=0 in_port=1",
            "0x0 table=0 in_port=9",
            "0x0 table=3 in_port=7"
        ]
    );
}

#[test]
fn mod_flows_matching_a_cookie_keeps_it_and_adds_nothing() {
    let of = switch();
    of.mod_flows("br0", "cookie=0x1/-1,actions=output:2", false)
        .unwrap();
    of.mod_flows("br0", "cookie=0x5/-1,in_port=9,actions=output:2", false)
        .unwrap();
    assert_eq!(cookies(&of), ["0x1 table=0 in_port=1"]);
}

#[test]
fn a_modify_without_a_new_cookie_keeps_cookies_and_adds_nothing() {
    // As an OpenFlow 1.2+ modify arrives.
    let of = switch();
    for text in [
        "cookie=0x2,in_port=1,actions=output:2",
        "in_port=9,actions=drop",
    ] {
        let mut spec = parse_flow(text, FlowKind::ModOrDel, &NoPortNames).unwrap();
        spec.new_cookie = None;
        spec.modify_cookie = false;
        of.mod_flows_spec("br0", &spec, false).unwrap();
    }
    assert_eq!(cookies(&of), ["0x1 table=0 in_port=1"]);
}

#[test]
fn a_bundled_modify_sets_cookies_and_adds_what_it_misses() {
    let of = switch();
    let mut commit = of.begin_bundle("br0").unwrap();
    for text in [
        "cookie=0x3,in_port=1,actions=output:2",
        "cookie=0x4,in_port=9,actions=drop",
    ] {
        let spec = parse_flow(text, FlowKind::ModOrDel, &NoPortNames).unwrap();
        commit
            .flow_mod(FlowModOp::Modify { strict: false }, &spec)
            .unwrap();
    }
    commit.finish();
    assert_eq!(
        cookies(&of),
        ["0x3 table=0 in_port=1", "0x4 table=0 in_port=9"]
    );
}

#[test]
fn del_flows_refuses_to_set_a_cookie() {
    let of = switch();
    assert_eq!(
        of.del_flows("br0", Some("cookie=0x1"), false),
        Err("cannot set cookie (to match on a cookie, specify a mask, e.g. cookie=0x1/-1)".into())
    );
    assert_eq!(cookies(&of).len(), 1);
}

#[test]
fn a_modify_restarts_the_hard_age_only() {
    // OVS's "flow stats reset_counts": after mod-flows, hard_age counts from the modify
    // while the duration goes on.
    let of = switch();
    {
        let mut p = of.write();
        let b = p.bridge_mut("br0").unwrap();
        let (id, ..) = b.tables[0].iter().next().unwrap();
        let r = b.tables[0].get_mut(id).unwrap();
        r.created -= std::time::Duration::from_secs(3);
        r.modified = r.created;
    }
    let ages = |of: &Ofproto| {
        let mut v = Vec::new();
        of.for_each_flow_entry("br0", None, |_, st| v.push((st.duration_sec, st.hard_age)))
            .unwrap();
        v
    };
    assert_eq!(ages(&of), [(3, Some(3))]);
    of.mod_flows("br0", "in_port=1,actions=output:2", false)
        .unwrap();
    assert_eq!(ages(&of), [(3, Some(0))]);
}
