//! `conjunction(...)`, `conj_id` and `learn(...)` in `ovs-ofctl` syntax: printed as
//! `ovs-ofctl parse-flow` prints them (OVS 3.1), parsed back, refused with OVS's reasons; and
//! what a learn teaches for a packet.

use std::net::Ipv4Addr;

use ofproto::fields::FieldId;
use ofproto::learn::Learn;
use ofproto::pipekey::{PipeKey, PipeMask};
use ofproto::syntax::{FlowKind, FlowSpec, NoPortNames, OfAction, parse_flow};

fn add(s: &str) -> FlowSpec {
    parse_flow(s, FlowKind::Add, &NoPortNames).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn err(s: &str) -> String {
    match parse_flow(s, FlowKind::Add, &NoPortNames) {
        Ok(f) => panic!("{s}: accepted as {f}"),
        Err(e) => e.to_string(),
    }
}

fn check(s: &str, printed: &str) {
    let f = add(s);
    assert_eq!(f.to_string(), printed, "{s}");
    assert_eq!(add(printed), f, "{printed} does not parse back");
}

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

fn learn_of(s: &str) -> Learn {
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
    let mut wc = PipeMask::new();
    l.unwildcard(&mut wc);
    assert_eq!(wc.meta.metadata, u64::MAX);
    assert_eq!(wc.dp.nw_src(), Ipv4Addr::BROADCAST);
    assert_eq!(wc.dp.tp_dst(), 0xffff);
    assert_eq!(wc.meta.regs[1], 0xffff);
    // Immediates are not read from the packet.
    assert_eq!(wc.dp.nw_dst(), Ipv4Addr::UNSPECIFIED);
    assert_eq!(FieldId::CONJ_ID.field().name, "conj_id");
}
