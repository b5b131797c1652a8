//! Unit tests of the datapath flow text format: every attribute and action, literal strings
//! in OVS's exact output form, parsed and printed back, with field values checked.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::*;
use crate::key::{EthAddr, VLAN_CFI, ct_state, nw_frag, tun_flags};

fn key(s: &str) -> DpKey {
    let mut n = PortNames::new();
    let k = parse_key(s, &mut n).unwrap_or_else(|e| panic!("{e}\n{s}"));
    assert_eq!(k.format(Some(&n), None), s);
    k
}

fn acts(s: &str) -> Vec<Action> {
    let mut n = PortNames::new();
    let a = parse_actions(s, &mut n).unwrap_or_else(|e| panic!("{e}\n{s}"));
    assert_eq!(format_actions(&a, Some(&n)), s);
    a
}

#[test]
fn metadata_attributes() {
    let k = key("skb_priority(0x7/0xff),skb_mark(0x10),recirc_id(0x1),dp_hash(0x5/0xf),in_port(3)");
    assert_eq!((k.attrs.skb_priority, k.attrs.skb_priority_mask), (7, 0xff));
    assert_eq!((k.key.pkt_mark(), k.mask.pkt_mark()), (0x10, u32::MAX));
    assert_eq!(k.key.recirc_id(), 1);
    assert_eq!((k.key.dp_hash(), k.mask.dp_hash()), (5, 0xf));
    assert_eq!(k.key.in_port(), 3);
    assert!(!k.attrs.verbose);
    // Verbose: zero masks print.
    let k = key("skb_priority(0/0),skb_mark(0/0),recirc_id(0),dp_hash(0/0),in_port(1/0)");
    assert!(k.attrs.verbose);
    assert_eq!(k.mask.in_port(), 0);
    // Non-verbose printing of the same key omits the wildcarded attributes.
    assert_eq!(k.format(None, Some(false)), "recirc_id(0)");
}

#[test]
fn conntrack_attributes() {
    let k =
        key("ct_state(+new-est+trk),ct_zone(0x5),ct_mark(0x1/0xff),ct_label(0x1020304/0xffffffff)");
    assert_eq!(k.key.ct_state(), ct_state::NEW | ct_state::TRK);
    assert_eq!(
        k.mask.ct_state(),
        ct_state::NEW | ct_state::EST | ct_state::TRK
    );
    assert_eq!(k.key.ct_zone(), 5);
    assert_eq!((k.key.ct_mark(), k.mask.ct_mark()), (1, 0xff));
    assert_eq!(
        (k.key.ct_label(), k.mask.ct_label()),
        (0x1020304, 0xffff_ffff)
    );
    key("ct_state(-new-est-rel-rpl-inv-trk-snat-dnat)");
    // Verbose form is numeric.
    let k = key("ct_state(0x21/0x21),ct_zone(0/0),ct_mark(0/0),ct_label(0/0)");
    assert!(k.attrs.verbose);
    assert_eq!(k.format(None, Some(false)), "ct_state(+new+trk)");
    let k =
        key("ct_tuple4(src=10.0.0.1,dst=10.1.0.2/255.255.0.0,proto=17,tp_src=1025,tp_dst=2000)");
    assert_eq!(k.key.ct_nw_src(), Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(k.mask.ct_nw_dst(), Ipv4Addr::new(255, 255, 0, 0));
    assert_eq!(
        (k.key.ct_nw_proto(), k.key.ct_tp_src(), k.key.ct_tp_dst()),
        (17, 1025, 2000)
    );
    let k = key("ct_tuple6(src=2001:db8::1,dst=2001:db8::2,proto=6,src_port=80,dst_port=443)");
    assert_eq!(
        k.key.ct_ipv6_dst(),
        "2001:db8::2".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(k.key.ct_tp_dst(), 443);
    // OVS's parser spells the ports tp_src/tp_dst; accepted too.
    let mut n = PortNames::new();
    let k2 = parse_key(
        "ct_tuple6(src=2001:db8::1,dst=2001:db8::2,proto=6,tp_src=80,tp_dst=443)",
        &mut n,
    )
    .unwrap();
    assert_eq!(k2, k);
}

#[test]
fn tunnel_attribute() {
    let k = key(
        "tunnel(tun_id=0x64,src=10.1.2.9,dst=10.1.2.8,tos=0x3/0xfc,ttl=64,tp_src=49152,tp_dst=4789,flags(-df+csum+key))",
    );
    assert_eq!(k.key.tun_id(), 0x64);
    assert_eq!(k.key.tun_ipv4_dst(), Ipv4Addr::new(10, 1, 2, 8));
    assert_eq!((k.key.tun_tos(), k.mask.tun_tos()), (3, 0xfc));
    assert_eq!(k.key.tun_flags(), tun_flags::CSUM | tun_flags::KEY);
    assert_eq!(
        k.mask.tun_flags(),
        tun_flags::CSUM | tun_flags::KEY | tun_flags::DONT_FRAGMENT
    );
    let k = key(
        "tunnel(tun_id=0x1/0xff,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::2,ttl=64,flags(df|key))",
    );
    assert_eq!(
        k.key.tun_ipv6_src(),
        "2001:db8::1".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(k.mask.tun_id(), 0xff);
    assert_eq!(k.mask.tun_flags(), 0xf);
    let k = key("tunnel(src=1.1.1.1,vxlan(gbp(id=10,flags=0x1)),flags(+oam))");
    assert_eq!((k.key.tun_gbp_id(), k.key.tun_gbp_flags()), (10, 1));
    assert_eq!(k.key.tun_flags(), tun_flags::OAM);
    let k = key(
        "tunnel(tun_id=0x3,geneve({class=0x102,type=0x80,len=4,0x30002}{class=0xffff,type=0x1/0xf,len=8,0x1020304aabbccdd/0xffff0000ffffffff}),flags(0/0))",
    );
    let mut opts = [0u8; 252];
    let n = k.key.tun_geneve_opts(&mut opts);
    assert_eq!(n, 8 + 12);
    assert_eq!(&opts[..8], &[1, 2, 0x80, 1, 0, 3, 0, 2]);
    assert!(k.attrs.verbose, "flags(0/0) is verbose-only");
    // Option without data, and one whose data mask is zero (printed only when verbose).
    key("tunnel(geneve({class=0x1,type=0x2,len=0}))");
}

#[test]
fn l2_attributes() {
    let k = key("packet_type(ns=1,id=0x8847),eth_type(0x8847),mpls(label=100,tc=3,ttl=64,bos=1)");
    assert_eq!(k.key.packet_type(), (1 << 16) | 0x8847);
    assert_eq!(k.key.mpls_lse0(), 100 << 12 | 3 << 9 | 1 << 8 | 64);
    assert_eq!(k.mask.mpls_lse0(), u32::MAX);
    // Several labels: fields repeat.
    let k = key(
        "eth_type(0x8847),mpls(label=1,tc=0,ttl=64,bos=0,label=2,tc=0,ttl=64,bos=0,label=3,tc=0,ttl=64,bos=1)",
    );
    assert_eq!(k.attrs.mpls_lses, 3);
    assert_eq!(k.key.mpls_lse2() >> 12, 3);
    // A partially masked stack prints every field with its mask.
    key("mpls(label=815/0xfffff,tc=0/0,ttl=4/0x0,bos=1/1)");
    let k = key("eth(src=00:01:02:03:04:05/ff:ff:ff:00:00:00,dst=ff:ff:ff:ff:ff:ff)");
    assert_eq!(k.mask.eth_src(), EthAddr([0xff, 0xff, 0xff, 0, 0, 0]));
    // A lone eth() with no packet_type before it.
    key("in_port(1),eth(),eth_type(0x0800)");
    key("in_port(1),packet_type(ns=0,id=0),eth_type(0x0800)");
}

#[test]
fn vlan_attributes() {
    let k = key(
        "eth_type(0x88a8),vlan(vid=10,pcp=3),encap(eth_type(0x8100),vlan(vid=20/0xff0),encap(eth_type(0x0800),ipv4(proto=6),tcp(dst=80)))",
    );
    assert_eq!(
        (k.key.vlan_tpid(), k.key.vlan_tci()),
        (0x88a8, VLAN_CFI | 10 | 3 << 13)
    );
    assert_eq!(
        (k.key.vlan2_tpid(), k.key.vlan2_tci()),
        (0x8100, VLAN_CFI | 20)
    );
    assert_eq!(k.mask.vlan2_tci(), VLAN_CFI | 0xff0);
    assert_eq!(k.key.eth_type(), 0x0800);
    assert_eq!(k.key.tp_dst(), 80);
    let k = key("eth_type(0x8100),vlan(vid=5,pcp=0,cfi=0)");
    assert_eq!(k.key.vlan_tci(), 5);
    key("eth_type(0x8100),vlan(pcp=5/0x4),encap()");
    let k = key("eth_type(0x8100),vlan(vid=0/0x0,pcp=0/0x0)");
    assert!(k.attrs.verbose);
}

#[test]
fn l3_l4_attributes() {
    let k = key(
        "ipv4(src=10.0.0.1/255.0.0.0,dst=10.0.0.2,proto=6,tos=0x10,ttl=64,frag=later),tcp(src=1/0xff00,dst=2),tcp_flags(+syn-ack)",
    );
    assert_eq!(k.key.nw_frag(), nw_frag::ANY | nw_frag::LATER);
    assert_eq!(k.mask.nw_frag(), nw_frag::MASK);
    assert_eq!((k.key.nw_tos(), k.key.nw_ttl()), (0x10, 64));
    assert_eq!((k.key.tp_src(), k.mask.tp_src()), (1, 0xff00));
    assert_eq!((k.key.tcp_flags(), k.mask.tcp_flags()), (0x2, 0x12));
    key("tcp_flags(syn|ack)");
    key("tcp_flags(0/0)");
    let k = key(
        "ipv6(src=2001:db8::1/ffff:ffff::,dst=::1,label=0x12345,proto=58,tclass=0x3,hlimit=255,frag=no),icmpv6(type=135,code=0),nd(target=fe80::1,sll=00:11:22:33:44:55,tll=00:00:00:00:00:00/00:00:00:00:00:00)",
    );
    assert_eq!(k.key.ipv6_label(), 0x12345);
    assert_eq!((k.key.tp_src(), k.key.tp_dst()), (135, 0));
    assert_eq!(k.key.nd_target(), "fe80::1".parse::<Ipv6Addr>().unwrap());
    assert!(k.attrs.verbose);
    let k = key("arp(sip=1.1.1.1,tip=2.2.2.2,op=1,sha=00:11:22:33:44:55,tha=00:00:00:00:00:00)");
    assert_eq!(
        (k.key.nw_proto(), k.key.nw_dst()),
        (1, Ipv4Addr::new(2, 2, 2, 2))
    );
    let k = key("udp(src=53,dst=5353/0xfff0)");
    assert_eq!(k.mask.tp_dst(), 0xfff0);
    key("sctp(src=1,dst=2)");
    let k = key("icmp(type=8,code=0/0xf0)");
    assert_eq!(
        (k.key.tp_src(), k.mask.tp_src(), k.mask.tp_dst()),
        (8, 0xff, 0xf0)
    );
    key("ipv4(tos=0/0x3,frag=no)");
}

#[test]
fn flow_lines() {
    let mut n = PortNames::new();
    for line in [
        "ufid:f6295150-9399-4436-a6a0-03c28c0f2163, recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no), packets:0, bytes:0, used:never, offloaded:yes, dp:tc, actions:drop",
        "recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no), packets:10, bytes:600, used:1.250s, flags:SFPRU.EC, actions:2,3",
        "in_port(1), actions:drop, dp-extra-info:miniflow_bits(4,1)",
    ] {
        let f = parse_flow(line, &mut n).unwrap_or_else(|e| panic!("{e}\n{line}"));
        assert_eq!(f.to_string(), line);
    }
    let f = parse_flow(
        "recirc_id(0), packets:1, bytes:2, used:1.250s, flags:S., actions:2",
        &mut n,
    )
    .unwrap();
    let s = f.stats.unwrap();
    assert_eq!(
        s.used,
        Some(Used {
            ms: 1250,
            decimals: 3
        })
    );
    assert_eq!(s.tcp_flags, 0x12);
    assert_eq!(f.ufid, None);
}

#[test]
fn port_names_in_keys_and_actions() {
    let mut n = PortNames::new();
    n.insert("p0", 1);
    let f = parse_flow("in_port(p0), actions:tnl_pop(vxlan_sys_4789),vm0", &mut n).unwrap();
    assert_eq!(f.key.in_port(), 1);
    let vx = n.number("vxlan_sys_4789").unwrap();
    assert_eq!(vx, FIRST_ALLOCATED_PORT);
    assert_eq!(
        f.actions,
        vec![Action::TnlPop(vx), Action::Output(FIRST_ALLOCATED_PORT - 1)]
    );
    assert_eq!(
        f.format(Some(&n), None),
        "in_port(p0), actions:tnl_pop(vxlan_sys_4789),vm0"
    );
    assert_eq!(
        f.to_string(),
        "in_port(1), actions:tnl_pop(4294967039),4294967038"
    );
}

#[test]
fn simple_actions() {
    let a = acts(
        "1,pop_vlan,push_vlan(vid=10,pcp=3),push_vlan(tpid=0x88a8,vid=1,pcp=0,cfi=0),pop_eth,ct_clear",
    );
    assert_eq!(
        a[2],
        Action::PushVlan {
            tpid: 0x8100,
            tci: VLAN_CFI | 10 | 3 << 13
        }
    );
    assert_eq!(
        a[3],
        Action::PushVlan {
            tpid: 0x88a8,
            tci: 1
        }
    );
    let a = acts(
        "push_mpls(label=100,tc=0,ttl=64,bos=1,eth_type=0x8847),pop_mpls(eth_type=0x800),add_mpls(label=1,tc=1,ttl=1,bos=0,eth_type=0x8848)",
    );
    assert_eq!(
        a[0],
        Action::PushMpls {
            lse: 100 << 12 | 1 << 8 | 64,
            eth_type: 0x8847
        }
    );
    acts("push_eth(src=00:00:00:00:00:00,dst=52:54:00:a0:91:13)");
    let a =
        acts("recirc(0x1),recirc(0),meter(3),trunc(100),lb_output(1),hash(l4(0)),hash(sym_l4(7))");
    assert_eq!(a[0], Action::Recirc(1));
    assert_eq!(
        a[6],
        Action::Hash {
            alg: HashAlg::SymL4,
            basis: 7
        }
    );
    acts("tnl_pop(2)");
    acts("pop_nsh(),psample(group=1,cookie=0x102)");
    assert_eq!(acts("drop"), vec![]);
    // `actions:` prefix accepted.
    let mut n = PortNames::new();
    assert_eq!(
        parse_actions("actions:1", &mut n).unwrap(),
        vec![Action::Output(1)]
    );
}

#[test]
fn set_actions() {
    let a = acts("set(eth(dst=52:54:00:a0:91:99))");
    let Action::Set(k) = &a[0] else { panic!() };
    assert_eq!(k.mask.eth_src(), EthAddr::ZERO);
    // Fully masked: a plain set, every field printed.
    acts("set(ipv4(src=1.1.1.1,dst=2.2.2.2,proto=6,tos=0,ttl=64,frag=no))");
    acts("set(ipv4(src=1.1.1.1/255.255.255.0))");
    acts("set(tunnel(tun_id=0x64,dst=10.1.2.9,ttl=64,tp_dst=4789,flags(df|key)))");
    acts("set(tcp(dst=80))");
    acts("set(skb_mark(0x1/0xff))");
    acts("set(ipv6(src=2001:db8::1,dst=2001:db8::2,label=0,proto=6,tclass=0,hlimit=64,frag=no))");
    acts("set(mpls(label=1,tc=0,ttl=64,bos=1))");
}

#[test]
fn ct_actions() {
    let a = acts(
        "ct,ct(commit),ct(commit,force_commit,zone=5,mark=0x1/0xff,label=0x1/0xf,helper=ftp,timeout=t1)",
    );
    assert_eq!(a[0], Action::Ct(Box::default()));
    let Action::Ct(ct) = &a[2] else { panic!() };
    assert_eq!(
        (ct.zone, ct.mark, ct.label),
        (5, Some((1, 0xff)), Some((1, 0xf)))
    );
    assert_eq!(ct.helper.as_deref(), Some("ftp"));
    let a = acts(
        "ct(commit,nat(src=10.0.0.1-10.0.0.10:1000-2000,persistent,random)),ct(nat),ct(nat(dst=[2001:db8::1]:80))",
    );
    let Action::Ct(ct) = &a[0] else { panic!() };
    let nat = ct.nat.as_ref().unwrap();
    assert_eq!(nat.kind, Some(NatKind::Src));
    assert_eq!((nat.proto_min, nat.proto_max), (1000, 2000));
    assert!(nat.persistent && nat.random && !nat.hash);
    acts("ct(nat(dst=2001:db8::1))");
    acts("ct(zone=1,nat(src))");
}

#[test]
fn nested_actions() {
    let a = acts("clone(set(eth(dst=00:00:00:00:00:01)),2),3");
    assert!(matches!(&a[0], Action::Clone(v) if v.len() == 2));
    acts("clone(drop)");
    let a = acts("sample(sample=50.0%,actions(1,userspace(pid=3)))");
    let Action::Sample { probability, .. } = a[0] else {
        panic!()
    };
    assert_eq!(probability, u32::MAX / 2 + 1);
    acts("check_pkt_len(size=200,gt(1),le(drop))");
    acts("dec_ttl(le_1(userspace(pid=1,slow_path(ttl))))");
}

#[test]
fn userspace_actions() {
    let a = acts(
        "userspace(pid=1,controller(reason=1,dont_send=0,continuation=0,recirc_id=1,rule_cookie=0,controller_id=0,max_len=65535))",
    );
    let Action::Userspace(u) = &a[0] else {
        panic!()
    };
    assert!(matches!(&u.cookie, UserCookie::Text(t) if t.starts_with("controller(reason=1,")));
    acts("userspace(pid=4294967295,slow_path(match))");
    acts("userspace(pid=0,sFlow(vid=0,pcp=0,output=2))");
    acts(
        "userspace(pid=0,flow_sample(probability=65535,collector_set_id=1,obs_domain_id=2,obs_point_id=3,output_port=4294967295,ingress))",
    );
    let a = acts("userspace(pid=2,userdata(0102abcd),actions,tunnel_out_port=3)");
    let Action::Userspace(u) = &a[0] else {
        panic!()
    };
    assert_eq!(u.cookie, UserCookie::Userdata(vec![1, 2, 0xab, 0xcd]));
    assert!(u.actions);
    assert_eq!(u.tunnel_out_port, Some(3));
    acts("userspace(pid=3)");
}

#[test]
fn tnl_push_actions() {
    let a = acts(
        "tnl_push(tnl_port(2),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x64)),out_port(3))",
    );
    let Action::TnlPush(t) = &a[0] else { panic!() };
    assert_eq!(
        t.header.eth_dst,
        EthAddr([0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48])
    );
    assert_eq!(t.header.dl_type, 0x0800);
    let TnlL4::Vxlan { udp, .. } = t.header.l4 else {
        panic!()
    };
    assert_eq!(udp.dst, 4789);
    let a = acts(
        "tnl_push(tnl_port(6081),header(size=58,type=5,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=6081,csum=0x0),geneve(crit,vni=0x7b,options({class=0xffff,type=0x80,len=4,0xa}))),out_port(100))",
    );
    let Action::TnlPush(t) = &a[0] else { panic!() };
    let TnlL4::Geneve {
        crit, vni, options, ..
    } = &t.header.l4
    else {
        panic!()
    };
    assert!(crit);
    assert_eq!(*vni, 0x7b);
    assert_eq!(options, &[0xff, 0xff, 0x80, 1, 0, 0, 0, 0xa]);
    acts(
        "tnl_push(tnl_port(4),header(size=38,type=3,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),gre((flags=0x2000,proto=0x6558),key=0x1c8)),out_port(100))",
    );
    let a = acts(
        "tnl_push(tnl_port(4),header(size=62,type=109,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x86dd),ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=47,tclass=0x0,hlimit=64),gre((flags=0xa000,proto=0x6558),csum=0x0,key=0x1c8)),out_port(100))",
    );
    let Action::TnlPush(t) = &a[0] else { panic!() };
    assert!(matches!(
        t.header.ip,
        TnlIp::V6 {
            hlimit: 64,
            proto: 47,
            ..
        }
    ));
    // ERSPAN as OVS prints it (odp-util.c), versions 1 and 2, over IPv4 and IPv6.
    let a = acts(
        "tnl_push(tnl_port(6),header(size=50,type=107,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=47,tos=0,ttl=64,frag=0x4000),erspan(ver=1,sid=0x1,idx=0x7)),out_port(100))",
    );
    let Action::TnlPush(t) = &a[0] else { panic!() };
    assert_eq!(
        t.header.l4,
        TnlL4::Erspan {
            ver: 1,
            sid: 1,
            idx: 7,
            dir: 0,
            hwid: 0
        }
    );
    acts(
        "tnl_push(tnl_port(6),header(size=74,type=108,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x86dd),ipv6(src=2001:cafe::88,dst=2001:cafe::92,label=0,proto=47,tclass=0x0,hlimit=64),erspan(ver=2,sid=0x3ff,dir=1,hwid=0x3f)),out_port(100))",
    );
    acts(
        "tnl_push(tnl_port(5),header(size=58,type=110,eth(dst=f8:bc:12:44:34:b6,src=aa:55:aa:55:00:00,dl_type=0x0800),ipv4(src=1.1.2.88,dst=1.1.2.92,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=2152,csum=0x0),gtpu(flags=0x30,msgtype=255,teid=0x7b)),out_port(100))",
    );
}

#[test]
fn unsupported_is_an_error_not_a_panic() {
    let mut n = PortNames::new();
    let e = parse_key("nsh(flags=1)", &mut n).unwrap_err();
    assert_eq!(
        e.to_string(),
        "column 1: unknown key attribute 'nsh', found 'n'"
    );
    let e = parse_key("tunnel(erspan(ver=1,idx=0x7))", &mut n).unwrap_err();
    assert_eq!(e.column(), 8);
    let e = parse_actions("push_nsh(flags=0)", &mut n).unwrap_err();
    assert!(matches!(e.kind, ParseErrorKind::UnknownAction(_)));
    let e = parse_key("in_port(1),in_port(2)", &mut n).unwrap_err();
    assert_eq!(e.column(), 12);
    // Attributes that share key storage cannot both appear.
    let e = parse_key("ipv4(frag=no),udp(dst=1),tcp(dst=2)", &mut n).unwrap_err();
    assert_eq!(
        e.to_string(),
        "column 26: tcp conflicts with udp (they share key fields), found 't'"
    );
}

#[test]
fn a_tunnel_attribute_too_long_for_netlink_is_refused_as_such() {
    // OVS's tunnel.at "too long nested attributes": 8193 `dst=` fields (8 bytes each in
    // netlink) overflow the attribute's 65531 bytes; fewer repeats are a duplicate.
    let fields = |n: usize| vec!["dst=1.1.1.1"; n].join(",");
    let mut n = PortNames::new();
    let e = parse_key(&format!("tunnel({})", fields(8193)), &mut n).unwrap_err();
    assert_eq!((e.offset, &e.kind), (0, &ParseErrorKind::TooLong));
    let e = parse_key(&format!("in_port(1),tunnel({})", fields(8191)), &mut n).unwrap_err();
    assert!(e.to_string().contains("duplicate tunnel field dst"), "{e}");
    let e = parse_key("tunnel(dst=1.1.1.1,src=1.1.1.2,dst=1.1.1.1)", &mut n).unwrap_err();
    assert_eq!(e.offset, 31, "{e}");
}

/// `netdev-dummy/receive`'s packet: an ethertype left out comes from the L3 attribute, as
/// OVS's `odp_flow_key_to_flow()` has it (drop-stats.at's packets give `packet_type(ns=0,id=0)`,
/// `eth()` and `ipv4()` with no `eth_type()`: OVS sends a 106-byte ICMP echo).
#[test]
fn a_packet_key_takes_its_ethertype_from_the_l3_attribute_when_left_out() {
    let pk = |s: &str| {
        let mut n = PortNames::new();
        parse_key(s, &mut n).unwrap().packet_key()
    };
    let eth = "eth(src=3a:6d:d2:09:9c:ab,dst=1e:2c:e9:2a:66:9e)";
    let v4 = format!(
        "in_port(1),packet_type(ns=0,id=0),{eth},ipv4(src=192.168.10.10,dst=192.168.10.30,\
         proto=1,tos=0,ttl=64,frag=no),icmp(type=8,code=0)"
    );
    let k = pk(&v4);
    assert_eq!(k.eth_type(), 0x0800);
    assert_eq!(crate::compose(&k, 64).len(), 14 + 20 + 8 + 64);
    let v6 = format!("in_port(1),{eth},ipv6(src=::1,dst=::2,proto=58,tclass=0,hlimit=64,frag=no)");
    assert_eq!(pk(&v6).eth_type(), 0x86dd);
    let mpls = format!("in_port(1),{eth},mpls(label=10,tc=0,ttl=64,bos=1)");
    assert_eq!(pk(&mpls).eth_type(), 0x8847);
    // Nothing at L3: an 802.3 frame, OVS's FLOW_DL_TYPE_NONE.
    assert_eq!(pk(&format!("in_port(1),{eth}")).eth_type(), 0x05ff);
    // Given, it stays what it is given.
    let given = format!("in_port(1),{eth},eth_type(0x88cc)");
    assert_eq!(pk(&given).eth_type(), 0x88cc);
    // Tagged: the key keeps the ethertype inside the tag.
    let tagged =
        format!("in_port(1),{eth},eth_type(0x8100),vlan(vid=5,pcp=0),encap(eth_type(0x88cc))");
    assert_eq!(pk(&tagged).eth_type(), 0x88cc);
}
