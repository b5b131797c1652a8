//! Unit tests of the flow syntax: every field of the table in a match, every action, the
//! mod/del flavour, port names, the dump-flows prefix, what parsed matches match, and
//! conjunctions and `learn` with what a learn teaches.

use std::net::Ipv4Addr;

use ofproto::fields::{FieldId, Loc, Subfield, fields};
use ofproto::pipekey::PipeKey;
use ofproto::syntax::{
    FlowKind, FlowSpec, FlowStats, NoPortNames, OfAction, PortNames, SyntaxError, WriteForm,
    parse_flow,
};

fn add(s: &str) -> FlowSpec {
    parse_flow(s, FlowKind::Add, &NoPortNames).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn err(s: &str) -> String {
    match parse_flow(s, FlowKind::Add, &NoPortNames) {
        Ok(f) => panic!("{s}: accepted as {f}"),
        Err(e) => e.to_string(),
    }
}

/// Parses `s` and checks the dump-flows printing (of the flow `ovs-ofctl` sends in OpenFlow
/// 1.0, its default) and that it parses back.
fn check(s: &str, printed: &str) {
    let f = add(s).as_openflow10();
    assert_eq!(f.to_string(), printed, "{s}");
    assert_eq!(
        add(printed).as_openflow10(),
        f,
        "{printed} does not parse back"
    );
}

/// A match on `name` with a typical value and the prerequisites it needs, and how it prints.
fn field_example(name: &str) -> Option<(String, String)> {
    let (pre, value, shown) = match name {
        "tun_id" | "tunnel_id" => ("", "0x1234", "tun_id=0x1234"),
        "tun_src" => ("", "10.0.0.1", "tun_src=10.0.0.1"),
        "tun_dst" => ("", "10.0.0.0/8", "tun_dst=10.0.0.0/8"),
        "tun_ipv6_src" => ("", "2001:db8::1", "tun_ipv6_src=2001:db8::1"),
        "tun_ipv6_dst" => ("", "2001:db8::/32", "tun_ipv6_dst=2001:db8::/32"),
        "tun_gbp_id" => ("", "7", "tun_gbp_id=7"),
        "tun_gbp_flags" => ("", "0x3", "tun_gbp_flags=0x3"),
        "tun_flags" => ("", "+oam", "tun_flags=+oam"),
        "metadata" => ("", "0x5/0xff", "metadata=0x5/0xff"),
        "conj_id" => ("", "7", "conj_id=7"),
        "skb_priority" => ("", "0x10", "skb_priority=0x10"),
        "in_port" => ("", "7", "in_port=7"),
        "pkt_mark" => ("", "0x10", "pkt_mark=0x10"),
        "ct_state" => ("", "+trk+est", "ct_state=+est+trk"),
        "ct_zone" => ("", "9", "ct_zone=9"),
        "ct_mark" => ("", "0x1/0x1", "ct_mark=0x1/0x1"),
        "ct_label" => ("", "0x100", "ct_label=0x100"),
        "ct_nw_proto" => (
            "ip,ct_state=+trk+est,",
            "17",
            "ct_state=+est+trk,ct_nw_proto=17,ip",
        ),
        "ct_nw_src" => (
            "ip,ct_state=+trk+est,",
            "10.0.0.0/8",
            "ct_state=+est+trk,ct_nw_src=10.0.0.0/8,ip",
        ),
        "ct_nw_dst" => (
            "ip,ct_state=-inv+trk,",
            "10.0.0.1",
            "ct_state=-inv+trk,ct_nw_dst=10.0.0.1,ip",
        ),
        "ct_ipv6_src" => (
            "ipv6,ct_state=+trk+new,",
            "2001:db8::/32",
            "ct_state=+new+trk,ct_ipv6_src=2001:db8::/32,ipv6",
        ),
        "ct_ipv6_dst" => (
            "ipv6,ct_state=+trk+rpl,",
            "::1",
            "ct_state=+rpl+trk,ct_ipv6_dst=::1,ipv6",
        ),
        "ct_tp_src" => (
            "tcp,ct_state=+trk+est,",
            "80",
            "ct_state=+est+trk,ct_tp_src=80,tcp",
        ),
        "ct_tp_dst" => (
            "ip,ct_state=+trk+est,",
            "0x50/0xfff0",
            "ct_state=+est+trk,ct_tp_dst=0x50/0xfff0,ip",
        ),
        "recirc_id" => ("", "5", "recirc_id=0x5"),
        "dp_hash" => ("", "0x5/0xf", "dp_hash=0x5/0xf"),
        "eth_src" | "dl_src" => ("", "00:00:00:00:00:01", "dl_src=00:00:00:00:00:01"),
        "eth_dst" | "dl_dst" => (
            "",
            "01:00:00:00:00:00/01:00:00:00:00:00",
            "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00",
        ),
        "eth_type" | "dl_type" => ("", "0x88cc", "dl_type=0x88cc"),
        "vlan_tci" => ("", "0x1000/0x1000", "vlan_tci=0x1000/0x1000"),
        "dl_vlan" => ("", "12", "dl_vlan=12"),
        "vlan_vid" => ("", "0x100c", "dl_vlan=12"),
        "dl_vlan_pcp" => ("", "5", "dl_vlan_pcp=5"),
        "vlan_pcp" => ("dl_vlan=1,", "5", "dl_vlan=1,dl_vlan_pcp=5"),
        "mpls_label" => ("mpls,", "100", "mpls,mpls_label=100"),
        "mpls_tc" => ("mpls,", "2", "mpls,mpls_tc=2"),
        "mpls_bos" => ("mpls,", "1", "mpls,mpls_bos=1"),
        "mpls_ttl" => ("mpls,", "9", "mpls,mpls_ttl=9"),
        "ip_src" | "nw_src" => ("ip,", "10.1.0.0/16", "ip,nw_src=10.1.0.0/16"),
        "ip_dst" | "nw_dst" => (
            "ip,",
            "10.0.0.1/255.0.0.255",
            "ip,nw_dst=10.0.0.1/255.0.0.255",
        ),
        "ipv6_src" => ("ipv6,", "fe80::/10", "ipv6,ipv6_src=fe80::/10"),
        "ipv6_dst" => ("ipv6,", "::1", "ipv6,ipv6_dst=::1"),
        "ipv6_label" => ("ipv6,", "0x12345", "ipv6,ipv6_label=0x12345"),
        "nw_proto" | "ip_proto" => ("ip,", "47", "ip,nw_proto=47"),
        "nw_tos" => ("ip,", "184", "ip,nw_tos=184"),
        "ip_dscp" => ("ip,", "46", "ip,nw_tos=184"),
        "nw_ecn" | "ip_ecn" => ("ip,", "1", "ip,nw_ecn=1"),
        "nw_ttl" => ("ipv6,", "255", "ipv6,nw_ttl=255"),
        "ip_frag" | "nw_frag" => ("ip,", "later", "ip,nw_frag=later"),
        "arp_op" => ("arp,", "2", "arp,arp_op=2"),
        "arp_spa" => ("arp,", "10.0.0.1", "arp,arp_spa=10.0.0.1"),
        "arp_tpa" => ("rarp,", "10.0.0.0/24", "rarp,arp_tpa=10.0.0.0/24"),
        "arp_sha" => ("arp,", "00:00:00:00:00:02", "arp,arp_sha=00:00:00:00:00:02"),
        "arp_tha" => ("arp,", "00:00:00:00:00:03", "arp,arp_tha=00:00:00:00:00:03"),
        "tcp_src" | "tp_src" => ("tcp,", "80", "tcp,tp_src=80"),
        "tcp_dst" | "tp_dst" => ("tcp6,", "0x50/0xfff0", "tcp6,tp_dst=0x50/0xfff0"),
        "tcp_flags" => ("tcp,", "+syn-ack", "tcp,tcp_flags=+syn-ack"),
        "udp_src" => ("udp,", "68", "udp,tp_src=68"),
        "udp_dst" => ("udp6,", "547", "udp6,tp_dst=547"),
        "sctp_src" => ("sctp,", "9", "sctp,tp_src=9"),
        "sctp_dst" => ("sctp6,", "10", "sctp6,tp_dst=10"),
        "icmp_type" => ("icmp,", "8", "icmp,icmp_type=8"),
        "icmp_code" => ("icmp,", "1", "icmp,icmp_code=1"),
        "icmpv6_type" => ("icmp6,", "128", "icmp6,icmp_type=128"),
        "icmpv6_code" => ("icmp6,", "2", "icmp6,icmp_code=2"),
        "nd_target" => (
            "icmp6,icmp_type=135,icmp_code=0,",
            "fe80::1",
            "icmp6,icmp_type=135,icmp_code=0,nd_target=fe80::1",
        ),
        "nd_sll" => (
            "icmp6,icmp_type=135,icmp_code=0,",
            "00:00:00:00:00:04",
            "icmp6,icmp_type=135,icmp_code=0,nd_sll=00:00:00:00:00:04",
        ),
        "nd_tll" => (
            "icmp6,icmp_type=136,icmp_code=0,",
            "00:00:00:00:00:05",
            "icmp6,icmp_type=136,icmp_code=0,nd_tll=00:00:00:00:00:05",
        ),
        _ => return None,
    };
    Some((
        format!("{pre}{name}={value},actions=drop"),
        format!("{shown} actions=drop"),
    ))
}

#[test]
fn every_field_matches_and_prints() {
    let mut missing = Vec::new();
    for f in fields() {
        for name in std::iter::once(&f.name).chain(f.aliases.iter()) {
            if let Loc::Reg(_) | Loc::XReg(_) | Loc::XXReg(_) | Loc::TunMetadata(_) = f.loc {
                continue;
            }
            match field_example(name) {
                Some((flow, printed)) => check(&flow, &printed),
                None => missing.push(*name),
            }
        }
    }
    assert!(missing.is_empty(), "no example for {missing:?}");
}

#[test]
fn registers_print_as_32_bit_registers() {
    check("reg7=0x1/0x3,actions=drop", "reg7=0x1/0x3 actions=drop");
    check(
        "xreg3=0x100000002,actions=drop",
        "reg6=0x1,reg7=0x2 actions=drop",
    );
    check(
        "xxreg3=0x1/0xff,actions=drop",
        "reg15=0x1/0xff actions=drop",
    );
    check(
        "NXM_NX_REG4[8..15]=0x12,actions=drop",
        "reg4=0x1200/0xff00 actions=drop",
    );
    check(
        "tun_metadata6=0x12,actions=drop",
        "tun_metadata6=0x12 actions=drop",
    );
    check(
        "tun_metadata6=0x0012/0xffff,actions=drop",
        "tun_metadata6=0x12/0xffff actions=drop",
    );
}

#[test]
fn vlan_fields_follow_ovs_fields() {
    let tagged = |tci: u16| {
        let mut k = PipeKey::new();
        k.dp.set_vlan_tci(tci);
        k
    };
    let m = add("dl_vlan=5,actions=drop").match_;
    assert!(m.matches(&tagged(0x1005)) && m.matches(&tagged(0x7005)));
    assert!(!m.matches(&tagged(0x0005)) && !m.matches(&tagged(0x1006)));
    let none = add("dl_vlan=0xffff,actions=drop").match_;
    assert!(none.matches(&tagged(0)) && !none.matches(&tagged(0x1000)));
    let untagged = add("vlan_tci=0/0x1000,actions=drop").match_;
    assert!(untagged.matches(&tagged(0)) && !untagged.matches(&tagged(0x1fff)));
    check(
        "dl_vlan=0xffff,actions=drop",
        "vlan_tci=0x0000 actions=drop",
    );
    check(
        "vlan_tci=0x1005,actions=drop",
        "dl_vlan=5,dl_vlan_pcp=0 actions=drop",
    );
    check(
        "dl_vlan_pcp=3,dl_vlan=5,actions=drop",
        "dl_vlan=5,dl_vlan_pcp=3 actions=drop",
    );
}

#[test]
fn matches_select_what_they_say() {
    let f = add("tcp,nw_dst=10.1.0.0/16,tp_dst=80,reg0=0x1/0x1,actions=drop");
    let mut k = PipeKey::new();
    k.dp.set_eth_type(0x0800)
        .set_nw_proto(6)
        .set_nw_dst(Ipv4Addr::new(10, 1, 2, 3))
        .set_tp_dst(80);
    k.meta.regs[0] = 3;
    assert!(f.match_.matches(&k));
    k.meta.regs[0] = 2;
    assert!(!f.match_.matches(&k));
    k.meta.regs[0] = 1;
    k.dp.set_nw_dst(Ipv4Addr::new(10, 2, 0, 0));
    assert!(!f.match_.matches(&k));
}

/// Every action kind: (input, printed).
const ACTIONS: &[(&str, &str)] = &[
    ("output:1", "output:1"),
    ("5", "output:5"),
    ("output:NXM_NX_REG0[0..15]", "output:NXM_NX_REG0[0..15]"),
    ("output(port=2,max_len=64)", "output(port=2,max_len=64)"),
    ("in_port", "IN_PORT"),
    ("normal,flood,all,local", "NORMAL,FLOOD,ALL,LOCAL"),
    ("controller", "CONTROLLER:65535"),
    ("controller:64", "CONTROLLER:64"),
    (
        "controller(reason=no_match,max_len=10,id=2,userdata=aa.bb,pause,meter_id=3)",
        "controller(reason=no_match,max_len=10,id=2,userdata=aa.bb,pause,meter_id=3)",
    ),
    ("enqueue(1,2)", "enqueue:1:2"),
    ("group:7", "group:7"),
    ("mod_vlan_vid:9", "mod_vlan_vid:9"),
    ("set_vlan_vid:9", "mod_vlan_vid:9"),
    ("mod_vlan_pcp:2", "mod_vlan_pcp:2"),
    ("strip_vlan", "strip_vlan"),
    ("pop_vlan", "strip_vlan"),
    ("push_vlan:0x88a8", "push_vlan:0x88a8"),
    ("mod_dl_src:0:0:0:0:0:1", "mod_dl_src:00:00:00:00:00:01"),
    (
        "mod_dl_dst:ff:ff:ff:ff:ff:ff",
        "mod_dl_dst:ff:ff:ff:ff:ff:ff",
    ),
    ("mod_nw_src:1.1.1.1", "mod_nw_src:1.1.1.1"),
    ("mod_nw_dst:2.2.2.2", "mod_nw_dst:2.2.2.2"),
    ("mod_nw_tos:252", "mod_nw_tos:252"),
    ("mod_tp_src:1", "mod_tp_src:1"),
    ("mod_tp_dst:2", "mod_tp_dst:2"),
    ("set_field:7->reg5", "load:0x7->NXM_NX_REG5[]"),
    (
        "set_field:0x5/0x5->reg5",
        "load:0x1->NXM_NX_REG5[0],load:0x1->NXM_NX_REG5[2]",
    ),
    (
        "set_field:0xa->tun_metadata2",
        "set_field:0xa->tun_metadata2",
    ),
    (
        "load:0xff->NXM_NX_REG1[8..15]",
        "load:0xff->NXM_NX_REG1[8..15]",
    ),
    (
        "load:1->xxreg1[]",
        "load:0x1->NXM_NX_XXREG1[0..63],load:0->NXM_NX_XXREG1[64..127]",
    ),
    (
        "move:reg0[0..7]->NXM_NX_PKT_MARK[24..31]",
        "move:NXM_NX_REG0[0..7]->NXM_NX_PKT_MARK[24..31]",
    ),
    ("dec_ttl", "dec_ttl"),
    ("dec_ttl(4,5)", "dec_ttl(4,5)"),
    ("set_mpls_label:7", "set_mpls_label(7)"),
    ("set_mpls_tc:7", "set_mpls_tc(7)"),
    ("set_mpls_ttl:7", "set_mpls_ttl(7)"),
    ("dec_mpls_ttl", "dec_mpls_ttl"),
    ("push_mpls:0x8847", "push_mpls:0x8847"),
    ("set_tunnel:0x10", "set_tunnel:0x10"),
    ("set_tunnel64:0x10", "set_tunnel64:0x10"),
    ("set_queue:1", "set_queue:1"),
    ("pop_queue", "pop_queue"),
    ("resubmit:7", "resubmit:7"),
    ("resubmit(,7)", "resubmit(,7)"),
    ("resubmit(1,7)", "resubmit(1,7)"),
    ("goto_table:9", "goto_table:9"),
    ("write_metadata:0x1/0x1", "write_metadata:0x1/0x1"),
    ("meter:1,output:1", "meter:1,output:1"),
    ("note:aa", "note:aa.00.00.00.00.00"),
    ("exit", "exit"),
    (
        "clone(dec_mpls_ttl,output:1)",
        "clone(dec_mpls_ttl,output:1)",
    ),
    ("ct_clear", "ct_clear"),
    ("drop", "drop"),
];

#[test]
fn every_action_prints_as_dump_flows() {
    for (input, printed) in ACTIONS {
        check(&format!("actions={input}"), &format!("actions={printed}"));
    }
    check(
        "tcp,actions=fin_timeout(idle_timeout=1)",
        "tcp actions=fin_timeout(idle_timeout=1)",
    );
    check(
        "mpls,actions=pop_mpls:0x0800",
        "mpls actions=pop_mpls:0x0800",
    );
    check(
        "tcp,actions=ct(commit,zone=NXM_NX_REG1[0..15],exec(set_field:1->ct_mark),alg=ftp)",
        "tcp actions=ct(commit,zone=NXM_NX_REG1[0..15],exec(load:0x1->NXM_NX_CT_MARK[]),alg=ftp)",
    );
}

#[test]
fn ct_with_alg_and_nat() {
    check(
        "tcp,actions=ct(commit,alg=ftp,nat(src=10.0.0.1-10.0.0.2:1-2,random))",
        "tcp actions=ct(commit,nat(src=10.0.0.1-10.0.0.2:1-2,random),alg=ftp)",
    );
    let f = add("tcp,actions=ct(commit,table=2,nat(dst=10.0.0.1))");
    let OfAction::Ct(ct) = &f.actions[0] else {
        panic!("{:?}", f.actions)
    };
    assert!(ct.commit);
    assert_eq!(ct.table, Some(2));
    assert!(matches!(ct.actions[..], [OfAction::Nat(_)]));
}

#[test]
fn set_field_keeps_its_form_but_for_vlan_fields() {
    // OVS keeps a `set_field` of nw_dst as a Set-Field (`mod_nw_dst` is another action).
    let f = add("ip,actions=set_field:10.0.0.1->nw_dst,set_field:0x1005->vlan_tci");
    assert_eq!(
        f.actions,
        [
            OfAction::SetField {
                field: FieldId::IPV4_DST,
                value: u32::from(Ipv4Addr::new(10, 0, 0, 1)).into(),
                mask: u32::MAX.into(),
                form: WriteForm::SetField,
            },
            OfAction::SetVlanVid(5),
            OfAction::SetVlanPcp(0),
        ]
    );
    let f = add("actions=load:0x5->reg0[0..3]");
    assert_eq!(
        f.actions,
        [OfAction::SetField {
            field: FieldId::REG0,
            value: 5,
            mask: 0xf,
            form: WriteForm::Load,
        }]
    );
}

#[test]
fn prerequisites_follow_earlier_actions() {
    // push_mpls makes the packet MPLS, so mpls_label may be set after it, not before.
    add("ip,actions=push_mpls:0x8847,set_field:5->mpls_label");
    assert_eq!(
        err("ip,actions=set_field:5->mpls_label,push_mpls:0x8847"),
        "prerequisite mpls or mplsm missing for mpls_label"
    );
    // mod_vlan_vid pushes a tag, so vlan_vid may be written after it.
    add("actions=mod_vlan_vid:5,set_field:7->vlan_vid");
    assert_eq!(
        err("actions=set_field:7->vlan_vid"),
        "prerequisite vlan_tci=0x1000/0x1000 missing for vlan_vid"
    );
    assert_eq!(
        err("actions=move:NXM_OF_IP_SRC[]->reg0[]"),
        "prerequisite ip missing for ip_src"
    );
}

#[test]
fn encap_and_decap_print_as_ovs() {
    let acts = "encap(mpls),encap(mpls_mc),encap(ethernet),decap(),\
                decap(packet_type(ns=0,type=0)),decap(packet_type(ns=1,type=0x800))";
    check(&format!("actions={acts}"), &format!("actions={acts}"));
    // encap(mpls) makes the packet MPLS: its label may be set.
    add("ip,actions=encap(mpls),set_field:5->mpls_label,encap(ethernet),output:1");
    for (bad, why) in [
        ("encap()", "Missing encap hdr"),
        ("encap(gre)", "Encap hdr not supported"),
        ("encap(mpls(ttl=3))", "Invalid property: ttl"),
        ("decap(foo)", "Invalid decap argument: foo"),
        (
            "decap(packet_type(type=0))",
            "Missing packet_type attribute ns",
        ),
        ("decap(packet_type(ns=5,type=0))", "Unsupported ns value: 5"),
        (
            "decap(packet_type(ns=1))",
            "Missing packet_type attribute type",
        ),
    ] {
        let e = err(&format!("actions={bad}"));
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn error_messages_name_token_and_reason() {
    assert_eq!(err("nw_sr=1.2.3.4,actions=drop"), "unknown field 'nw_sr'");
    assert_eq!(
        err("nw_dst=1.2.3.4,actions=drop"),
        "prerequisite ip missing for nw_dst"
    );
    assert_eq!(
        err("ip,nw_ttl=300,actions=drop"),
        "bad value '300' for nw_ttl: out of range"
    );
    assert_eq!(err("actions=outptu:1"), "unknown action 'outptu'");
    assert_eq!(err("tun_tos=16,actions=drop"), "unknown field 'tun_tos'");
    assert_eq!(err("actions=encap(nsh)"), "unsupported action 'encap(nsh)'");
    assert_eq!(err("ip"), "missing actions= (a flow to add needs actions)");
    assert_eq!(
        err("importance=x,actions=drop"),
        "bad value 'x' for importance: not a number"
    );
    assert!(matches!(
        parse_flow("actions=output:p9", FlowKind::Add, &NoPortNames),
        Err(SyntaxError::BadAction { .. })
    ));
}

#[test]
fn conntrack_tuple_fields_need_a_valid_connection_of_their_family() {
    let why = "ct_state of a valid connection (+trk with +new, +est, +rel, +rpl or -inv)";
    assert_eq!(
        err("ip,ct_nw_src=10.0.0.1,actions=drop"),
        format!("prerequisite ip and {why} missing for ct_nw_src")
    );
    // +trk alone may be an invalid connection; -inv or a state bit makes it valid.
    assert_eq!(
        err("tcp,ct_state=+trk,ct_tp_dst=80,actions=drop"),
        format!("prerequisite {why} missing for ct_tp_dst")
    );
    assert_eq!(
        err("ipv6,ct_state=+trk+est,ct_nw_dst=10.0.0.1,actions=drop"),
        format!("prerequisite ip and {why} missing for ct_nw_dst")
    );
    assert_eq!(
        err("ip,ct_state=+trk+est,ct_ipv6_src=::1,actions=drop"),
        format!("prerequisite ipv6 and {why} missing for ct_ipv6_src")
    );
    check(
        "ip,ct_state=+trk+new,ct_nw_src=10.0.0.1,ct_nw_dst=10.0.0.2,ct_nw_proto=6,ct_tp_src=1,ct_tp_dst=80,actions=drop",
        "ct_state=+new+trk,ct_nw_src=10.0.0.1,ct_nw_dst=10.0.0.2,ct_nw_proto=6,ct_tp_src=1,ct_tp_dst=80,ip actions=drop",
    );
    // The tuple is read-only.
    assert_eq!(
        err("ip,actions=set_field:10.0.0.1->ct_nw_src"),
        "field 'ct_nw_src' is read-only"
    );
    // Readable into a register where the connection is valid.
    check(
        "ip,ct_state=+trk+est,actions=move:NXM_NX_CT_NW_SRC[]->NXM_NX_REG0[]",
        "ct_state=+est+trk,ip actions=move:NXM_NX_CT_NW_SRC[]->NXM_NX_REG0[]",
    );
    assert_eq!(
        err("ip,actions=move:NXM_NX_CT_NW_SRC[]->NXM_NX_REG0[]"),
        format!("prerequisite ip and {why} missing for ct_nw_src")
    );
}

#[test]
fn flow_options_and_prefix() {
    let f = add(
        "table=2,priority=7,cookie=0xab,idle_timeout=5,hard_timeout=6,importance=9,send_flow_rem,ip,actions=drop",
    );
    assert_eq!((f.table, f.priority, f.cookie), (2, 7, 0xab));
    assert_eq!((f.idle_timeout, f.hard_timeout, f.importance), (5, 6, 9));
    assert_eq!(
        f.to_string(),
        "cookie=0xab, table=2, idle_timeout=5, hard_timeout=6, send_flow_rem importance=9, priority=7,ip actions=drop"
    );
    let stats = FlowStats {
        duration_sec: 3,
        duration_nsec: 5_000_000,
        n_packets: 10,
        n_bytes: 600,
        idle_age: Some(1),
        hard_age: Some(3),
    };
    assert_eq!(
        f.format_prefix(Some(&stats)),
        "cookie=0xab, duration=3.005s, table=2, n_packets=10, n_bytes=600, idle_timeout=5, \
         hard_timeout=6, send_flow_rem importance=9, idle_age=1, "
    );
    let plain = add("actions=drop");
    let stats = FlowStats {
        duration_nsec: 123_456_700,
        ..FlowStats::default()
    };
    assert_eq!(
        plain.format_dump(Some(&stats), &NoPortNames),
        "cookie=0x0, duration=0.1234567s, table=0, n_packets=0, n_bytes=0, actions=drop"
    );
    assert_eq!(plain.format_match_actions(&NoPortNames), "actions=drop");
}

#[test]
fn mod_and_del_flows() {
    let f = parse_flow(
        "table=1,cookie=0x5/-1,out_port=3,out_group=any,tcp,tp_dst=80",
        FlowKind::ModOrDel,
        &NoPortNames,
    )
    .unwrap();
    assert_eq!((f.table, f.cookie, f.cookie_mask), (1, 5, u64::MAX));
    assert_eq!((f.out_port, f.out_group), (Some(3), Some(0xffff_ffff)));
    assert!(!f.has_actions && f.actions.is_empty());
    let f = parse_flow("ip,actions=output:2", FlowKind::ModOrDel, &NoPortNames).unwrap();
    assert_eq!(f.table, 255);
    assert!(f.has_actions);
    assert_eq!(
        err("cookie=0x5/0xff,actions=drop"),
        "'cookie' not allowed here: flow additions cannot use a cookie mask"
    );
    assert_eq!(
        err("out_port=1,actions=drop"),
        "'out_port' not allowed here: only when modifying or deleting flows"
    );
}

struct Names;

impl PortNames for Names {
    fn port_number(&self, name: &str) -> Option<u32> {
        match name {
            "p0" => Some(1),
            "uplink" => Some(2),
            "tap 3" => Some(3),
            _ => None,
        }
    }
    fn port_name(&self, number: u32) -> Option<&str> {
        match number {
            1 => Some("p0"),
            2 => Some("uplink"),
            3 => Some("tap 3"),
            _ => None,
        }
    }
}

#[test]
fn port_names_parse_and_print() {
    let resolver = |n: &str| (n == "p0").then_some(1);
    let f = parse_flow("in_port=p0,actions=output:p0", FlowKind::Add, &resolver).unwrap();
    assert_eq!(f.to_string(), "in_port=1 actions=output:1");
    let f = parse_flow(
        "in_port=p0,actions=uplink,resubmit(\"tap 3\",1),enqueue:p0:1",
        FlowKind::Add,
        &Names,
    )
    .unwrap();
    assert_eq!(
        f.format_match_actions(&Names),
        "in_port=p0 actions=output:uplink,resubmit(\"tap 3\",1),enqueue:p0:1"
    );
    assert_eq!(
        f.format_match_actions(&NoPortNames),
        "in_port=1 actions=output:2,resubmit(3,1),enqueue:1:1"
    );
    // Reserved names and numbers.
    check(
        "in_port=LOCAL,actions=IN_PORT",
        "in_port=LOCAL actions=IN_PORT",
    );
    check(
        "in_port=65535,actions=output:65534",
        "in_port=ANY actions=LOCAL",
    );
}

#[test]
fn subfield_accessors_apply_load_and_move() {
    let mut k = PipeKey::new();
    let f = add("actions=load:0xabcd->reg3[16..31],move:NXM_NX_REG3[16..23]->NXM_OF_ETH_DST[0..7]");
    for a in &f.actions {
        match a {
            OfAction::SetField {
                field, value, mask, ..
            } => field.field().set_masked(&mut k, *value, *mask),
            OfAction::RegMove { src, dst } => {
                let v = src.read(&k);
                dst.write(&mut k, v)
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(k.meta.regs[3], 0xabcd_0000);
    assert_eq!(k.dp.eth_dst().0, [0, 0, 0, 0, 0, 0xcd]);
    let sf = Subfield::parse("NXM_NX_REG3[16..31]").unwrap();
    assert_eq!(sf.read(&k), 0xabcd);
}

// Conjunctions, conj_id and learn, as `ovs-ofctl parse-flow` (OVS 3.1) prints and refuses them.

#[test]
fn conjunctions_print_as_ovs_and_go_only_with_notes() {
    check(
        "ip,actions=conjunction(1,2/3)",
        "ip actions=conjunction(1,2/3)",
    );
    check(
        "ip,actions=conjunction(0x10 , 1 / 2),note:01",
        "ip actions=conjunction(16,1/2),note:01.00.00.00.00.00",
    );
    check("conj_id=7,ip,actions=drop", "conj_id=7,ip actions=drop");
    assert!(
        err("ip,actions=conjunction(1,1/2),output:1").contains(
            "\"conjunction\" actions may be used along with \"note\" but not any other kind \
             of action (such as the \"output\" action used here)"
        ),
        "{}",
        err("ip,actions=conjunction(1,1/2),output:1")
    );
    for (a, why) in [
        (
            "conjunction(1,1/1)",
            "conjunction must have at least 2 clauses",
        ),
        (
            "conjunction(1,1/65)",
            "conjunction must have at most 64 clauses",
        ),
        ("conjunction(1,0/2)", "clause index must be positive"),
        (
            "conjunction(1,3/2)",
            "clause index must be less than or equal to number of clauses",
        ),
        (
            "conjunction(1)",
            "\"conjunction\" syntax is \"conjunction(id,i/n)\"",
        ),
    ] {
        let e = err(&format!("actions={a}"));
        assert!(e.ends_with(why), "{a}: {e}");
    }
    assert_eq!(
        err("conj_id=1/1,actions=drop"),
        "bad value '1/1' for conj_id: field is not maskable"
    );
    assert_eq!(
        err("actions=set_field:1->conj_id"),
        "field 'conj_id' is read-only"
    );
}

#[test]
fn learn_prints_as_ovs() {
    check(
        "tcp,actions=learn(table=69,delete_learned,cookie=0xab,OXM_OF_METADATA[],eth_type=0x800,\
         NXM_OF_IP_SRC[],ip_dst=10.0.0.1,nw_proto=6,NXM_OF_TCP_SRC[]=NXM_OF_TCP_DST[],\
         load:0x1->NXM_NX_REG10[7])",
        "tcp actions=learn(table=69,delete_learned,cookie=0xab,OXM_OF_METADATA[],\
         eth_type=0x800,NXM_OF_IP_SRC[],ip_dst=10.0.0.1,nw_proto=6,\
         NXM_OF_TCP_SRC[]=NXM_OF_TCP_DST[],load:0x1->NXM_NX_REG10[7])",
    );
    check(
        "ip,actions=learn(table=2,idle_timeout=10,hard_timeout=20,fin_idle_timeout=1,\
         fin_hard_timeout=2,priority=5,send_flow_rem,limit=3,result_dst=reg0[1],\
         NXM_NX_REG0[0..3]=0x5,load:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],\
         output:NXM_OF_IN_PORT[],in_port=3,eth_dst=aa:bb:cc:dd:ee:ff)",
        "ip actions=learn(table=2,idle_timeout=10,hard_timeout=20,fin_idle_timeout=1,\
         fin_hard_timeout=2,priority=5,send_flow_rem,limit=3,result_dst=NXM_NX_REG0[1],\
         NXM_NX_REG0[0..3]=0x5,load:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],\
         output:NXM_OF_IN_PORT[],in_port=3,eth_dst=aa:bb:cc:dd:ee:ff)",
    );
    check(
        "ip,actions=learn(reg1[0..15]=reg2[16..31])",
        "ip actions=learn(table=1,NXM_NX_REG1[0..15]=NXM_NX_REG2[16..31])",
    );
    check("actions=learn()", "actions=learn(table=1)");
}

#[test]
fn learn_is_refused_for_what_ovs_refuses() {
    let e = |a: &str| err(&format!("ip,actions=learn({a})"));
    assert!(e("table=255").contains("table id 255 not valid for `learn' action"));
    assert!(e("foo=1").contains("unknown keyword foo"));
    assert!(e("reg1[0..3]=0x20").contains("does not fit into 4 bits"));
    assert!(e("load:->reg0[]").contains("missing source before `->'"));
    assert!(e("result_dst=reg0[0..1]").contains("must be a single bit"));
    assert!(e("dl_vlan=5").ends_with("experimenter OXM field 'dl_vlan' not supported"));
    assert!(
        e("load:1->dl_vlan_pcp").ends_with("experimenter OXM field 'dl_vlan_pcp' not supported")
    );
    // learn_check(): the learned match needs its prerequisites, the sources theirs.
    assert_eq!(e("NXM_OF_IP_SRC[]"), "prerequisite ip missing for ip_src");
    assert_eq!(
        e("eth_type=0x800,NXM_OF_TCP_SRC[]"),
        "prerequisite tcp missing for tcp_src"
    );
    assert_eq!(e("load:1->eth_type"), "field 'eth_type' is read-only");
}

fn learn_of(s: &str) -> ofproto::learn::Learn {
    match add(s).actions.into_iter().next() {
        Some(OfAction::Learn(l)) => *l,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_learn_teaches_the_flow_ovs_teaches_and_consults_what_it_reads() {
    let l = learn_of(
        "tcp,actions=learn(table=69,idle_timeout=5,fin_idle_timeout=1,cookie=0xab,\
         OXM_OF_METADATA[],eth_type=0x800,NXM_OF_IP_SRC[],ip_dst=10.0.0.10,nw_proto=6,\
         NXM_OF_TCP_SRC[]=NXM_OF_TCP_DST[],load:0x1->NXM_NX_REG10[7],output:NXM_NX_REG1[0..15])",
    );
    let mut k = PipeKey::new();
    k.dp.set_eth_type(0x0800)
        .set_nw_proto(6)
        .set_nw_src(Ipv4Addr::new(10, 0, 0, 1))
        .set_nw_dst(Ipv4Addr::new(10, 0, 0, 10))
        .set_tp_src(5555)
        .set_tp_dst(80);
    k.meta.regs[1] = 3;
    let fm = l.execute(&k);
    assert_eq!(
        fm.to_string(),
        "cookie=0xab, table=69, idle_timeout=5, tcp,metadata=0,nw_src=10.0.0.1,\
         nw_dst=10.0.0.10,tp_src=80 actions=fin_timeout(idle_timeout=1),\
         load:0x1->NXM_NX_REG10[7],output:3"
    );
    let mut wc = ofproto::pipekey::PipeMask::new();
    l.unwildcard(&mut wc);
    assert_eq!(wc.meta.metadata, u64::MAX);
    assert_eq!(wc.dp.nw_src(), Ipv4Addr::BROADCAST);
    assert_eq!(wc.dp.tp_dst(), 0xffff);
    assert_eq!(wc.meta.regs[1], 0xffff);
    // Immediates are not read from the packet.
    assert_eq!(wc.dp.nw_dst(), Ipv4Addr::UNSPECIFIED);
    assert_eq!(FieldId::CONJ_ID.field().name, "conj_id");
}
