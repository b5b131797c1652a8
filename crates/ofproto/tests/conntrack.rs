//! Conntrack pipelines through translation, as OVS's ofproto-dpif translates them: `ct(...)`
//! into the datapath's `ct(...)`, `ct(table=N)` into a recirculation whose frozen state the
//! next pass thaws, the megaflows of both passes (checked against the `dpif/dump-flows` lines
//! OVS printed for the same pipeline, `ct_1000.txt` of the reference dumps), and
//! `ofproto/trace` following the recirculation.

use std::sync::Arc;

use flow::FlowKey;
use flow::odp::{DpFlow, KeyAttrs, PortNames};
use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;
use ofproto::xlate::{XlateOut, translate};

fn port(name: &str, ofport: u32, dp: u32) -> OfPort {
    OfPort {
        name: name.into(),
        ofport,
        dp_port: Some(dp),
        peer: None,
        vlan: VlanMode::default(),
    }
}

/// br0 with p0 (OpenFlow 1, datapath 3) and p1 (OpenFlow 2, datapath 2), as in the reference
/// dumps.
fn switch(flows: &str) -> Arc<Ofproto> {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    of.add_port("br0", port("p0", 1, 3)).unwrap();
    of.add_port("br0", port("p1", 2, 2)).unwrap();
    of.add_flows("br0", flows).unwrap();
    of
}

/// An Ethernet/IPv4/UDP or TCP frame.
fn frame(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16) -> Vec<u8> {
    let mut p = vec![
        0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0, 0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48, 8, 0,
    ];
    let l4_len: u16 = if proto == 6 { 20 } else { 8 };
    let total = 20 + l4_len + 18;
    p.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        1,
        0,
        0,
        64,
        proto,
    ]);
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    if proto == 6 {
        p.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        p.extend_from_slice(&[0, (l4_len + 18) as u8, 0, 0]);
    }
    p.resize(14 + usize::from(total), 0);
    p
}

/// The datapath key of `frame` arriving on datapath port `dp_port`.
fn key(frame: &[u8], dp_port: u32) -> FlowKey {
    let mut k = FlowKey::new();
    k.set_in_port(dp_port);
    flow::extract(frame, &mut k);
    k
}

/// The reference dumps' packet: 10.0.0.1:1349 -> 10.1.0.2:2000, UDP, in on p0.
fn anchor_packet() -> FlowKey {
    key(&frame([10, 0, 0, 1], [10, 1, 0, 2], 17, 1349, 2000), 3)
}

/// What the datapath gives the next pass after `ct`: the recirculation id, the state, the
/// zone, and for a valid connection the original-direction tuple (`orig`: the packet's own,
/// or the reverse for a reply).
fn after_ct(k: &FlowKey, recirc_id: u32, state: u8, zone: u16, orig: Option<&FlowKey>) -> FlowKey {
    let mut k = k.clone();
    k.set_recirc_id(recirc_id)
        .set_ct_state(state)
        .set_ct_zone(zone);
    if let Some(o) = orig {
        k.set_ct_nw_proto(o.nw_proto())
            .set_ct_tp_src(o.tp_src())
            .set_ct_tp_dst(o.tp_dst());
        k.set_ct_nw_src(o.nw_src());
        k.set_ct_nw_dst(o.nw_dst());
    }
    k
}

fn xlate(of: &Ofproto, k: &FlowKey) -> XlateOut {
    translate(&of.pipe.read().unwrap(), k, true, None)
}

fn acts(x: &XlateOut) -> String {
    if x.actions.is_empty() {
        "drop".into()
    } else {
        flow::odp::format_actions(&x.actions, None)
    }
}

/// The megaflow as `dpif/dump-flows` prints it (without statistics), and verbose with port
/// names as `dpctl/dump-flows -m` does.
fn dump(k: &FlowKey, x: &XlateOut, verbose: bool) -> String {
    let f = DpFlow {
        key: k.clone(),
        mask: x.mask.clone(),
        attrs: KeyAttrs::megaflow(k, &x.mask),
        actions: x.actions.clone(),
        ..DpFlow::default()
    };
    let mut names = PortNames::new();
    names.insert("p0", 3);
    names.insert("p1", 2);
    f.format(verbose.then_some(&names), Some(verbose))
}

const ANCHOR: &str = "table=0,ip,ct_state=-trk,actions=ct(table=1)\n\
                      table=1,ip,ct_state=+trk+new,actions=ct(commit),output:2\n\
                      table=1,ip,ct_state=+trk+est,actions=output:2\n";

const TRK: u8 = flow::key::ct_state::TRK;
const NEW: u8 = flow::key::ct_state::NEW;
const EST: u8 = flow::key::ct_state::EST;
const RPL: u8 = flow::key::ct_state::RPL;
const INV: u8 = flow::key::ct_state::INV;

#[test]
fn anchor_pipeline_dumps_as_ovs_dumped_it() {
    let of = switch(ANCHOR);
    let k = anchor_packet();
    let x = xlate(&of, &k);
    // ct_1000.txt, `ovs-appctl dpif/dump-flows br0`, without the statistics.
    assert_eq!(
        dump(&k, &x, false),
        "ct_state(-trk),recirc_id(0),in_port(3),packet_type(ns=0,id=0),eth_type(0x0800),\
         ipv4(frag=no), actions:ct,recirc(0x1)"
    );
    let k2 = after_ct(&k, 1, TRK | NEW, 0, Some(&k));
    let x2 = xlate(&of, &k2);
    assert_eq!(
        dump(&k2, &x2, false),
        "ct_state(+new+trk),recirc_id(0x1),in_port(3),packet_type(ns=0,id=0),\
         eth_type(0x0800),ipv4(frag=no), actions:ct(commit),2"
    );
    // And `dpctl/dump-flows -m` (without ufid, statistics and dp-extra-info): every
    // metadata attribute with its zero mask, the tuple of the tracked pass.
    assert_eq!(
        dump(&k, &x, true),
        "skb_priority(0/0),skb_mark(0/0),ct_state(0/0x20),ct_zone(0/0),ct_mark(0/0),\
         ct_label(0/0),recirc_id(0),dp_hash(0/0),in_port(p0),packet_type(ns=0,id=0),\
         eth(src=8c:dc:d4:ab:58:48/00:00:00:00:00:00,dst=8c:dc:d4:ab:5b:f0/00:00:00:00:00:00),\
         eth_type(0x0800),ipv4(src=10.0.0.1/0.0.0.0,dst=10.1.0.2/0.0.0.0,proto=17/0,tos=0/0,\
         ttl=64/0,frag=no),udp(src=1349/0,dst=2000/0), actions:ct,recirc(0x1)"
    );
    assert_eq!(
        dump(&k2, &x2, true),
        "skb_priority(0/0),skb_mark(0/0),ct_state(0x21/0x21),ct_zone(0/0),ct_mark(0/0),\
         ct_label(0/0),ct_tuple4(src=10.0.0.1/0.0.0.0,dst=10.1.0.2/0.0.0.0,proto=17/0,\
         tp_src=1349/0,tp_dst=2000/0),recirc_id(0x1),dp_hash(0/0),in_port(p0),\
         packet_type(ns=0,id=0),eth(src=8c:dc:d4:ab:58:48/00:00:00:00:00:00,\
         dst=8c:dc:d4:ab:5b:f0/00:00:00:00:00:00),eth_type(0x0800),ipv4(src=10.0.0.1/0.0.0.0,\
         dst=10.1.0.2/0.0.0.0,proto=17/0,tos=0/0,ttl=64/0,frag=no),udp(src=1349/0,dst=2000/0), \
         actions:ct(commit),p1"
    );
    // An established connection's pass consults what decided it.
    let k3 = after_ct(&k, 1, TRK | EST, 0, Some(&k));
    let x3 = xlate(&of, &k3);
    assert_eq!(acts(&x3), "2");
    assert_eq!(x3.mask.ct_state(), TRK | NEW | EST);
}

#[test]
fn the_same_frozen_state_gets_the_same_id() {
    let of = switch(
        "table=0,ip,in_port=1,actions=ct(table=1,zone=5)\n\
         table=0,ip,in_port=2,actions=ct(table=1,zone=5)\n\
         table=0,priority=40000,ip,in_port=1,nw_src=10.0.0.9,actions=load:0x7->NXM_NX_REG0[],\
         ct(table=1,zone=5)\n",
    );
    let a = key(&frame([10, 0, 0, 1], [10, 1, 0, 2], 17, 1, 2), 3);
    let b = key(&frame([10, 0, 0, 2], [10, 1, 0, 3], 6, 3, 4), 3);
    let c = key(&frame([10, 1, 0, 2], [10, 0, 0, 1], 17, 2, 1), 2);
    let d = key(&frame([10, 0, 0, 9], [10, 1, 0, 2], 17, 1, 2), 3);
    // Ids start at 1; other packets of the same port freeze the same state.
    assert_eq!(acts(&xlate(&of, &a)), "ct(zone=5),recirc(0x1)");
    assert_eq!(acts(&xlate(&of, &b)), "ct(zone=5),recirc(0x1)");
    // Another input port, or other registers, is another state.
    assert_eq!(acts(&xlate(&of, &c)), "ct(zone=5),recirc(0x2)");
    assert_eq!(acts(&xlate(&of, &d)), "ct(zone=5),recirc(0x3)");
    // Translating again (revalidation) finds the same ids.
    let again = translate(&of.pipe.read().unwrap(), &a, false, None);
    assert_eq!(acts(&again), "ct(zone=5),recirc(0x1)");
    let p = of.pipe.read().unwrap();
    let st = p.recirc.get(3).unwrap();
    assert_eq!((st.bridge.as_str(), st.table, st.in_port), ("br0", 1, 1));
    assert_eq!(st.meta.regs[0], 7);
    assert!(st.conntracked);
    assert_eq!(p.recirc.stats().ids, 3);
}

#[test]
fn a_later_pass_resumes_with_the_frozen_registers_and_port() {
    let of = switch(
        "table=0,ip,actions=load:0x2a->NXM_NX_REG3[],ct(table=4)\n\
         table=4,ip,ct_state=+trk,reg3=0x2a,in_port=1,actions=output:2\n",
    );
    let k = anchor_packet();
    let x = xlate(&of, &k);
    assert_eq!(acts(&x), "ct,recirc(0x1)");
    let x2 = xlate(&of, &after_ct(&k, 1, TRK | NEW, 0, Some(&k)));
    assert_eq!(acts(&x2), "2");
    // Registers never reach the datapath: the recirc id stands for them.
    assert_eq!(x2.mask.recirc_id(), u32::MAX);
    assert_eq!(x2.final_flow.meta.regs[3], 0x2a);
}

#[test]
fn an_unknown_recirc_id_is_a_counted_drop_with_a_note() {
    let of = switch(ANCHOR);
    let k = after_ct(&anchor_packet(), 0x42, TRK | NEW, 0, None);
    let x = xlate(&of, &k);
    assert!(x.actions.is_empty());
    assert_eq!(x.failed, Some("No recirculation context"));
    assert_eq!(
        x.error.as_deref(),
        Some("Recirculation context not found for ID 42")
    );
    // The drop megaflow is for this id only.
    assert_eq!(x.mask.recirc_id(), u32::MAX);
    assert_eq!(of.recirc_stats().unknown_ids, 1);
    let t = of
        .trace(
            "br0",
            &["recirc_id=0x42,in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.1.0.2".into()],
            false,
        )
        .unwrap();
    assert!(
        t.contains(
            "bridge(\"br0\")\n-------------\n     >>>> Recirculation context not found for ID 42 \
             <<<<\n"
        ),
        "{t}"
    );
    assert!(
        t.contains("Megaflow: recirc_id=0x42,eth,ip,in_port=1,nw_frag=no\n"),
        "{t}"
    );
    assert!(
        t.ends_with(
            "Datapath actions: drop\nTranslation failed (No recirculation context), packet \
             is dropped.\n"
        ),
        "{t}"
    );
    assert_eq!(of.recirc_stats().unknown_ids, 2);
}

#[test]
fn trace_follows_the_recirculation_with_the_default_ct_state() {
    let of = switch(ANCHOR);
    let flow = "in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.1.0.2,nw_ttl=64,tp_src=1349,tp_dst=2000";
    let t = of.trace("br0", &[flow.into()], false).unwrap();
    let want = "\
Flow: udp,in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,nw_src=10.0.0.1,nw_dst=10.1.0.2,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=1349,tp_dst=2000

bridge(\"br0\")
-------------
 0. ct_state=-trk,ip, priority 32768
    ct(table=1)
    drop
     -> A clone of the packet is forked to recirculate. The forked pipeline will be resumed at table 1.
     -> Sets the packet to an untracked state, and clears all the conntrack fields.

Final flow: unchanged
Megaflow: recirc_id=0,ct_state=-trk,eth,ip,in_port=1,nw_frag=no
Datapath actions: ct,recirc(0x1)

===============================================================================
recirc(0x1) - resume conntrack with default ct_state=trk|new (use --ct-next to customize)
===============================================================================

Flow: recirc_id=0x1,ct_state=new|trk,ct_nw_src=10.0.0.1,ct_nw_dst=10.1.0.2,ct_nw_proto=17,ct_tp_src=1349,ct_tp_dst=2000,eth,udp,in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,nw_src=10.0.0.1,nw_dst=10.1.0.2,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=1349,tp_dst=2000

bridge(\"br0\")
-------------
    thaw
        Resuming from table 1
 1. ct_state=+new+trk,ip, priority 32768
    ct(commit)
    drop
     -> Sets the packet to an untracked state, and clears all the conntrack fields.
    output:2

Final flow: recirc_id=0x1,eth,udp,in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,dl_dst=00:00:00:00:00:00,nw_src=10.0.0.1,nw_dst=10.1.0.2,nw_tos=0,nw_ecn=0,nw_ttl=64,nw_frag=no,tp_src=1349,tp_dst=2000
Megaflow: recirc_id=0x1,ct_state=+new+trk,eth,ip,in_port=1,nw_frag=no
Datapath actions: ct(commit),2
";
    assert_eq!(t, want);
}

#[test]
fn trace_ct_next_says_what_each_recirculation_sees() {
    // Two recirculations: zone 1, then zone 2 from table 1.
    let of = switch(
        "table=0,ip,actions=ct(table=1,zone=1)\n\
         table=1,ip,ct_state=+trk+est,ct_zone=1,actions=ct(table=2,zone=2)\n\
         table=2,ip,ct_state=+trk+new,ct_zone=2,actions=output:2\n\
         table=2,ip,ct_state=+trk+est,ct_zone=2,actions=drop\n",
    );
    let flow = "in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.1.0.2,tp_src=1,tp_dst=80";
    let args = |v: &[&str]| -> Vec<String> {
        std::iter::once(flow)
            .chain(v.iter().copied())
            .map(String::from)
            .collect()
    };
    let t = of
        .trace(
            "br0",
            &args(&["--ct-next", "trk,est", "--ct-next", "trk|new"]),
            false,
        )
        .unwrap();
    assert!(
        t.contains("recirc(0x1) - resume conntrack with ct_state=est|trk\n"),
        "{t}"
    );
    assert!(
        t.contains("recirc(0x2) - resume conntrack with ct_state=new|trk\n"),
        "{t}"
    );
    assert!(
        t.contains("Flow: recirc_id=0x2,ct_state=new|trk,ct_zone=2,"),
        "{t}"
    );
    assert!(
        t.contains("Megaflow: recirc_id=0x1,ct_state=+est+trk,ct_zone=1,eth,ip,in_port=1,nw_frag=no\nDatapath actions: ct(zone=2),recirc(0x2)\n"),
        "{t}"
    );
    assert!(t.ends_with("Datapath actions: 2\n"), "{t}");
    // Only the first is given: the second takes the default.
    let t = of
        .trace("br0", &args(&["--ct-next", "trk,est"]), false)
        .unwrap();
    assert!(
        t.contains(
            "recirc(0x2) - resume conntrack with default ct_state=trk|new (use --ct-next to \
             customize)\n"
        ),
        "{t}"
    );
    // OVS's checks of the state.
    assert_eq!(
        of.trace("br0", &args(&["--ct-next", "new,est,trk"]), false),
        Err(
            "new|est|trk: invalid connection state: \"new\" and \"est\" are mutually exclusive"
                .into()
        )
    );
    assert_eq!(
        of.trace("br0", &args(&["--ct-next", "est"]), false),
        Err("est: invalid connection state: If \"trk\" is unset, no other flags are set".into())
    );
    assert_eq!(
        of.trace("br0", &args(&["--ct-next", "bogus"]), false),
        Err("bogus: unknown connection tracking state flag".into())
    );
    assert_eq!(
        of.trace("br0", &args(&["--ct-next"]), false),
        Err("Missing argument for option --ct-next".into())
    );
}

/// A security group: everything goes through conntrack in zone 5; new connections are
/// allowed from p0 only and marked, established ones both ways, invalid ones dropped.
const SECURITY_GROUP: &str = "\
table=0,priority=100,ip,actions=ct(table=1,zone=5)
table=1,priority=100,ip,ct_state=+trk+inv,actions=drop
table=1,priority=50,ip,ct_state=+trk+new,in_port=1,actions=ct(commit,zone=5,exec(set_field:1->ct_mark)),output:2
table=1,priority=50,ip,ct_state=+trk+new,in_port=2,actions=drop
table=1,priority=40,ip,ct_state=+trk+est,in_port=1,actions=output:2
table=1,priority=40,ip,ct_state=+trk+est,in_port=2,actions=output:1
";

#[test]
fn security_group_pipeline() {
    let of = switch(SECURITY_GROUP);
    let out = key(&frame([10, 0, 0, 1], [10, 1, 0, 2], 6, 40000, 80), 3);
    let back = key(&frame([10, 1, 0, 2], [10, 0, 0, 1], 6, 80, 40000), 2);

    // First passes: conntrack in zone 5 and recirculate; one id per input port.
    let x = xlate(&of, &out);
    assert_eq!(acts(&x), "ct(zone=5),recirc(0x1)");
    assert_eq!(
        dump(&out, &x, false),
        "recirc_id(0),in_port(3),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), \
         actions:ct(zone=5),recirc(0x1)"
    );
    assert_eq!(acts(&xlate(&of, &back)), "ct(zone=5),recirc(0x2)");

    // A new connection from p0 is committed with its mark and goes to p1.
    let k = after_ct(&out, 1, TRK | NEW, 5, Some(&out));
    let x = xlate(&of, &k);
    assert_eq!(acts(&x), "ct(commit,zone=5,mark=0x1/0xffffffff),2");
    assert_eq!(
        dump(&k, &x, false),
        "ct_state(+new-inv+trk),recirc_id(0x1),in_port(3),packet_type(ns=0,id=0),\
         eth_type(0x0800),ipv4(frag=no), actions:ct(commit,zone=5,mark=0x1/0xffffffff),2"
    );
    // A new connection from p1 is dropped; the reply of an established one goes to p0.
    let k = after_ct(&back, 2, TRK | NEW, 5, Some(&back));
    assert_eq!(acts(&xlate(&of, &k)), "drop");
    let k = after_ct(&back, 2, TRK | EST | RPL, 5, Some(&out));
    let x = xlate(&of, &k);
    assert_eq!(acts(&x), "3");
    assert_eq!(x.mask.ct_state(), TRK | INV | NEW | EST);
    // Invalid packets are dropped, whichever port.
    let k = after_ct(&out, 1, TRK | INV, 5, None);
    assert_eq!(acts(&xlate(&of, &k)), "drop");
    // Conntrack's zone, mark and tuple stay wildcarded: no rule looked at them.
    assert_eq!(
        (x.mask.ct_zone(), x.mask.ct_mark(), x.mask.ct_nw_proto()),
        (0, 0, 0)
    );
}

#[test]
fn tables_that_consult_conntrack_fields_unwildcard_them() {
    let of = switch(
        "table=0,ip,actions=ct(table=1)\n\
         table=1,priority=10,ip,ct_state=+trk+est,ct_mark=0x1,actions=output:2\n\
         table=1,priority=9,ip,ct_state=+trk+est,ct_label=0x5/0xff,actions=output:2\n\
         table=1,priority=8,ip,ct_state=+trk+est,ct_zone=3,ct_nw_dst=10.1.0.0/16,\
         ct_nw_proto=17,ct_tp_dst=2000,actions=output:2\n\
         table=1,priority=0,actions=drop\n",
    );
    let k = anchor_packet();
    assert_eq!(acts(&xlate(&of, &k)), "ct,recirc(0x1)");
    let mut k2 = after_ct(&k, 1, TRK | EST, 3, Some(&k));
    k2.set_ct_label(0x6);
    let x = xlate(&of, &k2);
    assert_eq!(acts(&x), "2");
    assert_eq!(
        dump(&k2, &x, false),
        "ct_state(+est+trk),ct_zone(0x3),ct_mark(0),ct_label(0x6/0xff),\
         ct_tuple4(dst=10.1.0.2/255.255.0.0,proto=17,tp_dst=2000),recirc_id(0x1),in_port(3),\
         packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), actions:2"
    );
    // A different mark takes the first rule; only the bits that decided are exact.
    let mut k3 = k2.clone();
    k3.set_ct_mark(1);
    let x = xlate(&of, &k3);
    assert_eq!(
        dump(&k3, &x, false),
        "ct_state(+est+trk),ct_mark(0x1),recirc_id(0x1),in_port(3),\
         packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), actions:2"
    );
}

#[test]
fn nested_ct_actions_become_ct_options() {
    let cases = [
        (
            "ct(commit,exec(set_field:1->ct_mark,set_field:0x5/0xff->ct_label))",
            "ct(commit,mark=0x1/0xffffffff,label=0x5/0xff)",
        ),
        (
            "ct(commit,exec(load:0x3->NXM_NX_CT_MARK[4..7]))",
            "ct(commit,mark=0x30/0xf0)",
        ),
        (
            "ct(commit,force,zone=7,exec(set_field:0x1234->ct_label))",
            "ct(force_commit,zone=7,label=0x1234)",
        ),
        ("ct(commit,alg=tftp)", "ct(commit,helper=tftp)"),
        ("ct(nat)", "ct(nat)"),
        (
            "ct(commit,nat(src=192.0.2.10))",
            "ct(commit,nat(src=192.0.2.10))",
        ),
        (
            "ct(commit,nat(src=10.0.0.1-10.0.0.9:1000-2000,random))",
            "ct(commit,nat(src=10.0.0.1-10.0.0.9:1000-2000,random))",
        ),
        (
            "ct(commit,nat(dst=10.0.0.5:80,persistent))",
            "ct(commit,nat(dst=10.0.0.5:80,persistent))",
        ),
        (
            "load:0x1234->NXM_NX_REG0[],ct(zone=NXM_NX_REG0[0..15])",
            "ct(zone=4660)",
        ),
    ];
    for (ofacts, want) in cases {
        let of = switch(&format!("udp,actions={ofacts},output:2"));
        let x = xlate(&of, &anchor_packet());
        assert_eq!(acts(&x), format!("{want},2"), "{ofacts}");
    }
    // The helper of an FTP connection.
    let of = switch("tcp,actions=ct(commit,alg=ftp),output:2");
    let k = key(&frame([10, 0, 0, 1], [10, 1, 0, 2], 6, 40000, 21), 3);
    assert_eq!(acts(&xlate(&of, &k)), "ct(commit,helper=ftp),2");
    // Changes before ct are committed first; the ct_mark bits written are not a consulted
    // field of the packet.
    let of =
        switch("udp,actions=mod_nw_dst:10.9.9.9,ct(commit,exec(set_field:1->ct_mark)),output:2");
    let x = xlate(&of, &anchor_packet());
    assert_eq!(
        acts(&x),
        "set(ipv4(dst=10.9.9.9)),ct(commit,mark=0x1/0xffffffff),2"
    );
    assert_eq!(x.mask.ct_mark(), 0);
}

#[test]
fn ct_clear_is_emitted_only_after_conntrack_ran() {
    // OVS's OFPACT_CT_CLEAR: composed only in a pass conntrack ran before (a ct action
    // itself leaves its own pass untracked).
    let of = switch("table=0,ip,actions=ct_clear,ct_clear,output:2\n");
    assert_eq!(acts(&xlate(&of, &anchor_packet())), "2");
    let of = switch("table=0,ip,actions=ct(commit),ct_clear,ct_clear,output:2\n");
    assert_eq!(acts(&xlate(&of, &anchor_packet())), "ct(commit),2");
    let of = switch(
        "table=0,ip,ct_state=-trk,actions=ct(table=1)\n\
         table=1,ip,actions=ct_clear,ct_clear,output:2\n",
    );
    let k = anchor_packet();
    assert_eq!(acts(&xlate(&of, &k)), "ct,recirc(0x1)");
    let k2 = after_ct(&k, 1, TRK | NEW, 0, Some(&k));
    assert_eq!(acts(&xlate(&of, &k2)), "ct_clear,2");
}

#[test]
fn actions_after_a_fork_apply_to_the_original_packet_untracked() {
    // OVS's fork: the clone recirculates, the packet goes on with the rest of the list, its
    // conntrack fields cleared (this pass cannot know what conntrack found).
    let of = switch(
        "table=0,ip,ct_state=-trk,actions=ct(table=1),resubmit(,2)\n\
         table=2,ip,ct_state=-trk,actions=output:2\n\
         table=2,ip,ct_state=+trk,actions=drop\n",
    );
    let x = xlate(&of, &anchor_packet());
    assert_eq!(acts(&x), "ct,recirc(0x1),2");
    assert_eq!(x.mask.ct_state(), TRK);
}

#[test]
fn nat_pipeline() {
    // Source NAT for connections from p0; replies are un-NATed by ct(nat) and recirculate to
    // reach p0.
    let of = switch(
        "table=0,ip,in_port=1,actions=ct(commit,nat(src=192.0.2.10)),output:2\n\
         table=0,ip,in_port=2,actions=ct(table=1,nat)\n\
         table=1,ip,ct_state=+trk+est,actions=output:1\n\
         table=1,ip,ct_state=+trk+new,actions=drop\n",
    );
    let out = key(&frame([10, 0, 0, 1], [198, 51, 100, 7], 17, 5000, 53), 3);
    assert_eq!(acts(&xlate(&of, &out)), "ct(commit,nat(src=192.0.2.10)),2");
    let back = key(&frame([198, 51, 100, 7], [192, 0, 2, 10], 17, 53, 5000), 2);
    let x = xlate(&of, &back);
    assert_eq!(acts(&x), "ct(nat),recirc(0x1)");
    // After un-NAT the reply is addressed to 10.0.0.1 again (the datapath rewrote it).
    let mut reply = key(&frame([198, 51, 100, 7], [10, 0, 0, 1], 17, 53, 5000), 2);
    reply = after_ct(
        &reply,
        1,
        TRK | EST | RPL | flow::key::ct_state::SNAT,
        0,
        Some(&out),
    );
    assert_eq!(acts(&xlate(&of, &reply)), "3");
    // The trace of a forked NAT with a range shows the translation it assumes.
    let of = switch(
        "table=0,ip,in_port=1,actions=ct(commit,table=1,nat(dst=10.0.0.5:8080))\n\
         table=1,tcp,ct_state=+trk+new,nw_dst=10.0.0.5,tp_dst=8080,actions=output:2\n",
    );
    let t = of
        .trace(
            "br0",
            &["in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.1.0.2,tp_src=40000,tp_dst=80".into()],
            false,
        )
        .unwrap();
    assert!(
        t.contains(
            "Datapath actions: ct(commit,nat(dst=10.0.0.5:8080)),recirc(0x1)\n\n\
             ===============================================================================\n\
             recirc(0x1) - resume conntrack with default ct_state=trk|new (use --ct-next to \
             customize)\n\
             Replacing src/dst IP/ports to simulate NAT:\n \
             Initial flow: nw_src=10.0.0.1,tp_src=40000,nw_dst=10.1.0.2,tp_dst=80\n \
             Modified flow: nw_src=10.0.0.1,tp_src=40000,nw_dst=10.0.0.5,tp_dst=8080\n\
             ===============================================================================\n"
        ),
        "{t}"
    );
    assert!(t.ends_with("Datapath actions: 2\n"), "{t}");
}

#[test]
fn resubmit_ct_looks_up_the_original_direction_tuple() {
    let of = switch(
        "table=0,ip,actions=ct(table=1)\n\
         table=1,ip,ct_state=+trk+est,actions=resubmit(,2,ct)\n\
         table=2,tcp,nw_dst=10.1.0.2,tp_dst=80,actions=output:1\n\
         table=2,priority=0,actions=drop\n",
    );
    // A reply from the server: its own tuple is server to client; the connection's original
    // direction, client to server, is what table 2 matches.
    let reply = key(&frame([10, 1, 0, 2], [10, 0, 0, 1], 6, 80, 40000), 2);
    let orig = key(&frame([10, 0, 0, 1], [10, 1, 0, 2], 6, 40000, 80), 3);
    assert_eq!(acts(&xlate(&of, &reply)), "ct,recirc(0x1)");
    let k = after_ct(&reply, 1, TRK | EST | RPL, 0, Some(&orig));
    let x = xlate(&of, &k);
    assert_eq!(acts(&x), "3");
    // The consulted bits are the tuple's, not the packet's.
    assert_eq!(x.mask.ct_nw_dst(), std::net::Ipv4Addr::BROADCAST);
    assert_eq!((x.mask.ct_tp_dst(), x.mask.ct_nw_proto()), (0xffff, 0xff));
    assert_eq!(x.mask.nw_dst(), std::net::Ipv4Addr::UNSPECIFIED);
    // An untracked packet cannot resubmit(ct).
    let of = switch("table=0,ip,ct_state=+trk+est,actions=resubmit(,2,ct),output:2\n");
    let t = of
        .trace(
            "br0",
            &["in_port=1,tcp,ct_state=+trk+est,nw_src=10.0.0.1".into()],
            false,
        )
        .unwrap();
    assert!(
        t.contains(">>>> resubmit(ct) with non-tracked or non-IP packet! <<<<"),
        "{t}"
    );
}

#[test]
fn a_fork_in_a_patched_bridge_resumes_there() {
    let of = Ofproto::new();
    for b in ["br0", "br1"] {
        of.add_bridge(b).unwrap();
    }
    of.add_port("br0", port("p0", 1, 3)).unwrap();
    let patch = |name: &str, ofport: u32, peer: &str| OfPort {
        name: name.into(),
        ofport,
        dp_port: None,
        peer: Some(peer.into()),
        vlan: VlanMode::default(),
    };
    of.add_port("br0", patch("patch-a", 10, "patch-b")).unwrap();
    of.add_port("br1", patch("patch-b", 20, "patch-a")).unwrap();
    of.add_port("br1", port("p1", 2, 2)).unwrap();
    of.add_flows("br0", "ip,actions=load:0x9->NXM_NX_REG1[],output:10\n")
        .unwrap();
    of.add_flows(
        "br1",
        "table=0,ip,ct_state=+trk,actions=drop\n\
         table=0,ip,actions=ct(table=1,zone=2)\n\
         table=1,ip,ct_state=+trk+new,in_port=20,reg1=0,actions=output:2\n",
    )
    .unwrap();
    // The peer bridge sees the packet untracked, with its own registers (all zero), and the
    // fork freezes that bridge and port.
    let mut k = anchor_packet();
    k.set_ct_state(TRK | EST);
    let x = xlate(&of, &k);
    assert_eq!(acts(&x), "ct(zone=2),recirc(0x1)");
    let st = of.pipe.read().unwrap().recirc.get(1).unwrap();
    assert_eq!(
        (st.bridge.as_str(), st.in_port, st.meta.regs[1]),
        ("br1", 20, 0)
    );
    // The next pass, in on p0 in the datapath, resumes in br1 as from patch-b.
    let k2 = after_ct(&anchor_packet(), 1, TRK | NEW, 2, Some(&anchor_packet()));
    assert_eq!(acts(&xlate(&of, &k2)), "2");
    // Once the bridge is gone, the state cannot be thawed.
    of.del_bridge("br1").unwrap();
    let x = xlate(&of, &k2);
    assert_eq!(
        (acts(&x).as_str(), x.failed),
        ("drop", Some("Bridge not found"))
    );
}
