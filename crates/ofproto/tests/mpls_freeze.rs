//! An MPLS pop followed by actions that need the IP header: translation freezes, the datapath
//! pops and recirculates, and the next pass runs the frozen actions, as OVS 3.1 does
//! (`ofproto-dpif-xlate.c`, `recirc_for_mpls()`). The expected texts are Open vSwitch 3.1's
//! own output for the same flows (a private `ovs-vswitchd --enable-dummy` with ports p1 and p2
//! at OpenFlow ports 1 and 2, `ovs-appctl ofproto/trace`).

use std::sync::Arc;

use flow::FlowKey;
use flow::odp::Action;
use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;
use ofproto::xlate::translate;

fn switch(flows: &str) -> Arc<Ofproto> {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    for (n, o) in [("p1", 1), ("p2", 2)] {
        let port = OfPort {
            name: n.into(),
            ofport: o,
            dp_port: Some(o),
            peer: None,
            vlan: VlanMode::default(),
        };
        of.add_port("br0", port).unwrap();
    }
    of.add_flows("br0", flows).unwrap();
    of
}

fn text(actions: &[Action]) -> String {
    flow::odp::format_actions(actions, None)
}

fn trace(of: &Ofproto, flow: &str) -> String {
    of.trace("br0", &[flow.to_owned()], false).unwrap()
}

/// An MPLS packet with one label (bottom of stack) carrying IPv4/UDP, as the datapath
/// extracts it: the MPLS key only.
fn mpls_key() -> FlowKey {
    let mut k = FlowKey::new();
    k.set_in_port(1)
        .set_eth_src(flow::EthAddr([0x50, 0x54, 0, 0, 0, 1]))
        .set_eth_dst(flow::EthAddr([0x50, 0x54, 0, 0, 0, 2]))
        .set_eth_type(0x8847)
        .set_mpls_lse0(10 << 12 | 0x100 | 64);
    k
}

/// The same packet after the pop, as the next pass extracts it.
fn popped_key(recirc_id: u32) -> FlowKey {
    let mut k = FlowKey::new();
    k.set_in_port(1)
        .set_recirc_id(recirc_id)
        .set_eth_src(flow::EthAddr([0x50, 0x54, 0, 0, 0, 1]))
        .set_eth_dst(flow::EthAddr([0x50, 0x54, 0, 0, 0, 2]))
        .set_eth_type(0x0800)
        .set_nw_src([10, 0, 0, 1].into())
        .set_nw_dst([10, 0, 0, 2].into())
        .set_nw_proto(17)
        .set_nw_ttl(33)
        .set_tp_src(1)
        .set_tp_dst(2);
    k
}

#[test]
fn dec_ttl_after_pop_mpls_recirculates_and_the_next_pass_decrements_the_ip_ttl() {
    let of = switch("in_port=1,mpls,actions=pop_mpls:0x0800,dec_ttl,output:2\n");
    let pipe = of.pipe.read().unwrap();
    let first = translate(&pipe, &mpls_key(), true, None);
    assert_eq!(
        first.actions,
        vec![Action::PopMpls { eth_type: 0x0800 }, Action::Recirc(1)]
    );
    assert_eq!(first.failed, None);
    // OVS's megaflow: mpls(label=10/0x0,tc=0/0,ttl=64/0x0,bos=1/1): only the bottom of stack.
    assert_eq!(first.mask.mpls_lse0(), 0x100);
    let second = translate(&pipe, &popped_key(1), true, None);
    assert_eq!(text(&second.actions), "set(ipv4(ttl=32)),2");
}

#[test]
fn the_trace_of_both_passes_is_ovs_31s() {
    let of = switch(
        "table=0,in_port=1,mpls,actions=pop_mpls:0x0800,resubmit(,1),output:2\n\
         table=1,ip,actions=dec_ttl,set_field:10.0.0.9->ip_dst,output:1\n",
    );
    let first = trace(
        &of,
        "in_port=1,dl_type=0x8847,mpls_label=10,mpls_ttl=64,mpls_bos=1",
    );
    assert!(
        first.ends_with(
            "bridge(\"br0\")\n\
             -------------\n \
             0. mpls,in_port=1, priority 32768\n    \
             pop_mpls:0x0800\n\n\
             Final flow: ip,in_port=1,vlan_tci=0x0000,dl_src=00:00:00:00:00:00,\
             dl_dst=00:00:00:00:00:00,nw_src=0.0.0.0,nw_dst=0.0.0.0,nw_proto=0,nw_tos=0,\
             nw_ecn=0,nw_ttl=0,nw_frag=no\n\
             Megaflow: recirc_id=0,eth,mpls,in_port=1,mpls_bos=1\n\
             Datapath actions: pop_mpls(eth_type=0x800),recirc(0x1)\n"
        ),
        "{first}"
    );
    let second = trace(
        &of,
        "recirc_id=1,in_port=1,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,udp,\
         nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_ttl=33,tp_src=1,tp_dst=2",
    );
    let want = "\
bridge(\"br0\")
-------------
    thaw
            Resuming from table 0
        Restoring actions: resubmit(,1),unroll_xlate(table=0, cookie=0),output:2
    resubmit(,1)
     1. ip, priority 32768
            dec_ttl
            mod_nw_dst:10.0.0.9
            output:1
             >> skipping output to input port
    unroll_xlate(table=0, cookie=0)
    restored state: table=0, cookie=0
    output:2

Final flow: recirc_id=0x1,eth,udp,in_port=1,vlan_tci=0x0000,dl_src=50:54:00:00:00:01,\
dl_dst=50:54:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.9,nw_tos=0,nw_ecn=0,nw_ttl=32,\
nw_frag=no,tp_src=1,tp_dst=2
Megaflow: recirc_id=0x1,eth,udp,in_port=1,nw_dst=10.0.0.2,nw_ttl=33,nw_frag=no
Datapath actions: set(ipv4(dst=10.0.0.9,ttl=32)),2
";
    assert!(second.ends_with(want), "{second}");
}

#[test]
fn l2_actions_after_the_pop_need_no_recirculation() {
    let of =
        switch("in_port=1,mpls,actions=pop_mpls:0x0800,mod_dl_dst:50:54:00:00:00:09,output:2\n");
    let x = translate(&of.pipe.read().unwrap(), &mpls_key(), true, None);
    assert_eq!(
        text(&x.actions),
        "pop_mpls(eth_type=0x800),set(eth(dst=50:54:00:00:00:09)),2"
    );
}

#[test]
fn packet_ins_carry_ovs_reason_recirc_id_and_dont_send() {
    // OVS 3.1 `dpif/dump-flows` after one packet each:
    //   ...,ipv4(frag=no), ... actions:userspace(pid=0,controller(reason=6,dont_send=0,
    //       continuation=0,recirc_id=1,rule_cookie=0,controller_id=0,max_len=65535))
    //   ...,ipv4(proto=17,ttl=9,frag=no), ... actions:set(ipv4(ttl=8)),userspace(pid=0,
    //       controller(reason=1,dont_send=0,continuation=0,recirc_id=2,rule_cookie=0x7,
    //       controller_id=4,max_len=65535))
    // and `ofproto/trace` of the first: the same action with dont_send=1.
    let of = switch(
        "priority=0,actions=CONTROLLER:65535\n\
         table=0,priority=5,in_port=2,actions=resubmit(,3)\n\
         table=3,cookie=0x7,priority=5,actions=dec_ttl,controller(id=4)\n",
    );
    let pipe = of.pipe.read().unwrap();
    let mut miss = popped_key(0);
    miss.set_nw_ttl(33);
    let x = translate(&pipe, &miss, true, None);
    assert_eq!(
        text(&x.actions),
        "userspace(pid=0,controller(reason=6,dont_send=0,continuation=0,recirc_id=1,\
         rule_cookie=0,controller_id=0,max_len=65535))"
    );
    let mut other = popped_key(0);
    other.set_in_port(2).set_nw_ttl(9);
    let x = translate(&pipe, &other, true, None);
    assert_eq!(
        text(&x.actions),
        "set(ipv4(ttl=8)),userspace(pid=0,controller(reason=1,dont_send=0,continuation=0,\
         recirc_id=2,rule_cookie=0x7,controller_id=4,max_len=65535))"
    );
    // A revalidation (no side effects, no trace) gives the same actions.
    let again = translate(&pipe, &other, false, None);
    assert_eq!(again.actions, x.actions);
    drop(pipe);
    let t = trace(&of, "in_port=1");
    assert!(
        t.ends_with(
            "Datapath actions: userspace(pid=0,controller(reason=6,dont_send=1,continuation=0,\
             recirc_id=1,rule_cookie=0,controller_id=0,max_len=65535))\n"
        ),
        "{t}"
    );
}

/// An Ethernet frame carrying one MPLS label (10, bottom of stack, TTL 64) over IPv4/UDP with
/// IP TTL 33.
fn mpls_frame() -> Vec<u8> {
    let mut f = vec![0x50, 0x54, 0, 0, 0, 2, 0x50, 0x54, 0, 0, 0, 1, 0x88, 0x47];
    f.extend_from_slice(&[0x00, 0x00, 0xa1, 64]);
    let mut ip = vec![
        0x45, 0, 0, 28, 0, 1, 0, 0, 33, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    let sum = !wire::checksum::data(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
    f
}

#[test]
fn the_datapath_forwards_the_popped_packet_with_its_ttl_decremented() {
    use datapath::dpif::{DatapathBuilder, DpConfig};
    use netdev::memory::{ReplayPort, SampleSpec, SinkPort};
    use std::time::{Duration, Instant};

    let of = switch("in_port=1,mpls,actions=pop_mpls:0x0800,dec_ttl,output:2\n");
    let mut b = DatapathBuilder::new(DpConfig::default());
    let o = of.clone();
    b.set_upcall(Box::new(move || o.upcall_handler()));
    b.add_port(
        1,
        Box::new(ReplayPort::new("p1", "gen", vec![mpls_frame()], 1)),
    )
    .unwrap();
    let sink = SinkPort::new("p2", SampleSpec { max: 4, every: 1 });
    let samples = sink.samples();
    b.add_port(2, Box::new(sink)).unwrap();
    let dp = b.start().unwrap();
    let t = Instant::now();
    while samples.lock().unwrap().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{}",
            dp.dump_flows(false)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let got = samples.lock().unwrap()[0].clone();
    let dump = dp.dump_flows(false);
    drop(dp.stop());
    assert_eq!(&got[12..14], &[0x08, 0x00], "{got:02x?}");
    let ip = &got[14..34];
    assert_eq!(ip[8], 32, "IP TTL");
    assert_eq!(wire::checksum::data(ip), 0xffff, "IP checksum");
    assert!(
        dump.lines().any(|l| l.starts_with("recirc_id(0),")
            && l.contains("actions:pop_mpls(eth_type=0x800),recirc(0x1)")),
        "{dump}"
    );
}

/// A push onto a stack of labels matches every label already there whole (OVS's
/// `flow_push_mpls()`; OVS 3.1 installs `mpls(label=20,tc=0,ttl=32,bos=0,label=20,tc=0,ttl=32,
/// bos=1)` without masks for two labels and `push_mpls`).
#[test]
fn a_push_onto_labels_matches_each_label_whole() {
    let of = switch("in_port=1,actions=push_mpls:0x8847,output:2\n");
    let mut k = mpls_key();
    k.set_mpls_lse0(20 << 12 | 32)
        .set_mpls_lse1(20 << 12 | 0x100 | 32);
    let x = {
        let p = of.pipe.read().unwrap();
        translate(&p, &k, false, None)
    };
    assert_eq!(
        text(&x.actions),
        "push_mpls(label=20,tc=0,ttl=32,bos=0,eth_type=0x8847),2"
    );
    assert_eq!(
        (x.mask.mpls_lse0(), x.mask.mpls_lse1()),
        (u32::MAX, u32::MAX)
    );
}

/// The labels a patch port's peer bridge pushed are popped when the packet comes back to an
/// output in the first bridge (OVS's `MPLS xlate action - patch-port`, its datapath actions).
#[test]
fn labels_pushed_beyond_a_patch_port_are_popped_on_the_way_back() {
    let of = Ofproto::new();
    let port = |name: &str, ofport, dp_port, peer: Option<&str>| OfPort {
        name: name.into(),
        ofport,
        dp_port,
        peer: peer.map(String::from),
        vlan: VlanMode::default(),
    };
    of.add_bridge("br0").unwrap();
    of.add_bridge("br1").unwrap();
    of.add_port("br0", port("br0", 0xfffe, Some(100), None))
        .unwrap();
    of.add_port("br0", port("p0", 1, Some(1), None)).unwrap();
    of.add_port("br0", port("p1", 2, None, Some("p2"))).unwrap();
    of.add_port("br1", port("p2", 1, None, Some("p1"))).unwrap();
    of.add_port("br1", port("p3", 3, Some(3), None)).unwrap();
    of.add_flow("br0", "in_port=LOCAL,ip,actions=2,1,1")
        .unwrap();
    of.add_flow("br1", "in_port=1,ip,actions=dec_ttl,push_mpls:0x8847,3")
        .unwrap();
    let t = of
        .trace(
            "in_port(100),eth(src=f8:bc:12:44:34:b6,dst=f8:bc:12:46:58:e0),eth_type(0x0800),\
             ipv4(src=10.1.1.22,dst=10.0.0.3,proto=6,tos=0,ttl=64,frag=no),tcp(src=53295,dst=8080)",
            &[],
            false,
        )
        .unwrap();
    assert!(
        t.ends_with(
            "Datapath actions: set(ipv4(ttl=63)),push_mpls(label=0,tc=0,ttl=63,bos=1,\
             eth_type=0x8847),3,pop_mpls(eth_type=0x800),set(ipv4(ttl=64)),1,1\n"
        ),
        "{t}"
    );
}

/// A label written after translation pushed it is no part of what the megaflow matches: the
/// packet had no label (OVS's `xlate_wc_finish()`). OVS 3.1's trace of the same flow (sent
/// with OpenFlow 1.3) says `Megaflow: recirc_id=0,eth,ip,in_port=1,nw_tos=0,nw_ttl=64,nw_frag=no`.
#[test]
fn a_pushed_label_written_is_not_matched() {
    let of = switch("in_port=1,ip,actions=push_mpls:0x8847,set_field:5->mpls_label,output:2");
    let t = trace(
        &of,
        "in_port=1,dl_src=50:54:00:00:00:01,dl_dst=50:54:00:00:00:02,udp,nw_src=10.0.0.1,\
         nw_tos=0,nw_ecn=0,nw_ttl=64,nw_dst=10.0.0.2,udp_src=5000,udp_dst=53",
    );
    assert!(
        t.contains("\nMegaflow: recirc_id=0,eth,ip,in_port=1,nw_tos=0,nw_ttl=64,nw_frag=no\n"),
        "{t}"
    );
    assert!(
        t.ends_with("Datapath actions: push_mpls(label=5,tc=0,ttl=64,bos=1,eth_type=0x8847),2\n"),
        "{t}"
    );
}
