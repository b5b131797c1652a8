//! The OpenFlow pipeline driving the datapath: misses translated into megaflows with prefix-wide
//! masks, packets forwarded by them, revalidation after a table change, and the megaflow
//! property (every packet a cached megaflow covers gets the actions a fresh translation gives).

use std::sync::Arc;
use std::time::{Duration, Instant};

use datapath::dpif::{Datapath, DatapathBuilder, DpConfig};
use flow::FlowKey;
use netdev::memory::{ReplayPort, SampleSpec, SinkPort};
use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;
use ofproto::xlate::translate;
use proptest::prelude::*;

fn udp(dst: [u8; 4], sport: u16) -> Vec<u8> {
    let mut p = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    p.extend_from_slice(&[0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1]);
    p.extend_from_slice(&dst);
    p.extend_from_slice(&[(sport >> 8) as u8, sport as u8, 7, 208, 0, 8, 0, 0]);
    p.resize(60, 0);
    p
}

fn port(name: &str, ofport: u32, dp: u32) -> OfPort {
    OfPort {
        name: name.into(),
        ofport,
        dp_port: Some(dp),
        peer: None,
        vlan: VlanMode::default(),
    }
}

fn routes() -> Arc<Ofproto> {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    for (n, o) in [("p0", 1), ("p1", 2), ("p2", 3)] {
        of.add_port("br0", port(n, o, o)).unwrap();
    }
    of.add_flows(
        "br0",
        "priority=16,ip,nw_dst=10.1.0.0/16,actions=mod_dl_dst:52:54:00:00:00:01,output:p1\n\
         priority=24,ip,nw_dst=10.2.3.0/24,actions=output:3\n\
         priority=0,actions=drop\n",
    )
    .unwrap();
    of
}

fn start(of: &Arc<Ofproto>, frames: Vec<Vec<u8>>) -> Datapath {
    let mut b = DatapathBuilder::new(DpConfig::default());
    let o = of.clone();
    b.set_upcall(Box::new(move || o.upcall_handler()));
    b.add_port(1, Box::new(ReplayPort::new("p0", "gen", frames, 1)))
        .unwrap();
    let keep = SampleSpec { max: 64, every: 1 };
    b.add_port(2, Box::new(SinkPort::new("p1", keep))).unwrap();
    b.add_port(3, Box::new(SinkPort::new("p2", keep))).unwrap();
    b.start().unwrap()
}

fn wait_tx(dp: &Datapath, port: &str, more_than: u64) -> u64 {
    let t = Instant::now();
    loop {
        let n = dp.port_counters(port).unwrap().tx_packets;
        if n > more_than {
            return n;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{port} stuck at {n}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn routes_become_prefix_wide_megaflows_and_revalidate() {
    let of = routes();
    // 64 destinations in 10.1/16 and 64 in 10.2.3/24, and some nowhere.
    let mut frames = Vec::new();
    for i in 0..64u8 {
        frames.push(udp([10, 1, i, 7], 1000 + u16::from(i)));
        frames.push(udp([10, 2, 3, i], 2000 + u16::from(i)));
        frames.push(udp([192, 168, i, 1], 3000));
    }
    let mut dp = start(&of, frames);
    let n1 = wait_tx(&dp, "p1", 1000);
    let n2 = wait_tx(&dp, "p2", 1000);
    assert!(n1 > 0 && n2 > 0);

    // One megaflow per route and one for the misses: /16, /24 and a few bits of nw_dst. A
    // megaflow prints the address of the packet that installed it under the prefix, as OVS
    // does (the first frame of each route: 10.1.0.7 and 10.2.3.0).
    let dump = dp.dump_flows(false);
    let lines: Vec<&str> = dump
        .lines()
        .filter(|l| l.starts_with("recirc_id"))
        .collect();
    assert!(lines.len() <= 4, "{dump}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("ipv4(dst=10.1.0.7/255.255.0.0,frag=no)")
                && l.contains("actions:set(eth(dst=52:54:00:00:00:01)),2")),
        "{dump}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("ipv4(dst=10.2.3.0/255.255.255.0,frag=no)")
                && l.ends_with("actions:3")),
        "{dump}"
    );
    assert!(lines.iter().any(|l| l.ends_with("actions:drop")), "{dump}");

    // Statistics reach the rules.
    of.revalidate(&mut dp);
    let flows = of.dump_flows("br0", None).unwrap();
    let l16 = flows.lines().find(|l| l.contains("priority=16")).unwrap();
    assert!(!l16.contains("n_packets=0,"), "{flows}");
    // And the table's lookup counters (`dump-tables`): every packet looked table 0 up and
    // matched (the priority-0 rule takes the rest); no other table was looked up.
    {
        let p = of.pipe.read().unwrap();
        let stats = &p.bridge("br0").unwrap().table_stats;
        let (lookups, matched) = stats.get(0);
        assert!(lookups > 0 && matched == lookups, "{lookups} {matched}");
        assert_eq!(stats.get(1), (0, 0));
    }

    // A table change: the /16 now goes to p2. Revalidation removes the stale megaflow and
    // the next packets take the new path.
    of.mod_flows("br0", "ip,nw_dst=10.1.0.0/16,actions=output:3", false)
        .unwrap();
    let r = of.revalidate(&mut dp);
    assert!(r.removed >= 1, "{r:?}");
    let before = dp.port_counters("p1").unwrap().tx_packets;
    let n2 = dp.port_counters("p2").unwrap().tx_packets;
    wait_tx(&dp, "p2", n2 + 5000);
    std::thread::sleep(Duration::from_millis(50));
    let after = dp.port_counters("p1").unwrap().tx_packets;
    assert!(
        after - before < 200,
        "p1 still receiving: {before} -> {after}"
    );
    // Installed again by whichever 10.1.x.7 packet came first after the revalidation.
    let dump = dp.dump_flows(false);
    assert!(
        dump.lines().any(|l| l.contains("ipv4(dst=10.1.")
            && l.contains(".7/255.255.0.0,frag=no)")
            && l.ends_with("actions:3")),
        "{dump}"
    );
    drop(dp.stop());
}

#[test]
fn normal_learns_and_fdb_show_lists_what_it_learned() {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    for o in 1..=3 {
        of.add_port("br0", port(&format!("p{o}"), o, o)).unwrap();
    }
    of.add_flow("br0", "actions=NORMAL").unwrap();
    let mut k = FlowKey::new();
    k.set_in_port(2)
        .set_eth_src(flow::EthAddr([2, 0, 0, 0, 0, 0x22]))
        .set_eth_dst(flow::EthAddr([2, 0, 0, 0, 0, 0x11]))
        .set_eth_type(0x0800);
    // Unknown destination: flooded to the other ports, and the source is learned.
    let x = translate(&of.pipe.read().unwrap(), &k, true, None);
    assert_eq!(
        x.actions,
        vec![flow::odp::Action::Output(1), flow::odp::Action::Output(3)]
    );
    assert_eq!(x.learned, vec![0]);
    let fdb = of.fdb_show("br0").unwrap();
    assert!(
        fdb.lines()
            .any(|l| l.trim_start().starts_with("2     0  02:00:00:00:00:22")),
        "{fdb}"
    );
    // The reply goes to the learned port only.
    let mut r = FlowKey::new();
    r.set_in_port(1)
        .set_eth_src(flow::EthAddr([2, 0, 0, 0, 0, 0x11]))
        .set_eth_dst(flow::EthAddr([2, 0, 0, 0, 0, 0x22]))
        .set_eth_type(0x0800);
    let x = translate(&of.pipe.read().unwrap(), &r, true, None);
    assert_eq!(x.actions, vec![flow::odp::Action::Output(2)]);
    assert!(of.fdb_show("br9").is_err());
}

/// A flow of a small random table, in ovs-ofctl syntax.
fn rule() -> impl Strategy<Value = String> {
    let m = prop_oneof![
        Just("ip".to_string()),
        Just("udp".to_string()),
        Just("tcp".to_string()),
        Just("arp".to_string()),
        (0u8..4, prop_oneof![Just(8u8), Just(16), Just(24), Just(32)])
            .prop_map(|(x, l)| format!("ip,nw_dst=10.{x}.{x}.0/{l}")),
        (0u8..4, 8u8..=32).prop_map(|(x, l)| format!("ip,nw_src=10.{x}.0.0/{l}")),
        (1u16..4).prop_map(|p| format!("udp,tp_dst={}", 52 + p)),
        (0u16..4).prop_map(|p| format!("tcp,tp_src=0x{:x}/0xfff0", p << 4)),
        (1u32..4).prop_map(|p| format!("in_port={p}")),
        (0u8..3).prop_map(|v| format!("dl_vlan={v}")),
        Just("dl_dst=01:00:00:00:00:00/01:00:00:00:00:00".to_string()),
    ];
    let a = prop_oneof![
        Just("output:2".to_string()),
        Just("output:3".to_string()),
        Just("drop".to_string()),
        Just("mod_dl_src:02:00:00:00:00:09,output:1".to_string()),
        Just("dec_ttl,output:2".to_string()),
        Just("mod_nw_dst:10.9.9.9,output:3".to_string()),
        Just("mod_tp_dst:99,output:2".to_string()),
        Just("load:1->NXM_NX_REG0[],resubmit(,1)".to_string()),
        Just("resubmit(,2)".to_string()),
        Just("NORMAL".to_string()),
        Just("push_vlan:0x8100,mod_vlan_vid:7,output:3".to_string()),
        Just("strip_vlan,output:2".to_string()),
        Just("FLOOD".to_string()),
    ];
    (0u8..3, 0u16..50, m, a)
        .prop_map(|(t, p, m, a)| format!("table={t},priority={p},{m},actions={a}"))
}

fn packet() -> impl Strategy<Value = FlowKey> {
    (
        1u32..4,
        prop_oneof![Just(0x0800u16), Just(0x0806), Just(0x86dd)],
        (0u8..4, 0u8..4, any::<u8>()),
        (0u8..4, any::<u8>()),
        prop_oneof![Just(6u8), Just(17), Just(1)],
        (50u16..60, any::<u16>()),
        (any::<bool>(), 0u16..3),
        (1u8..4, any::<bool>()),
    )
        .prop_map(
            |(in_port, et, (a, b, c), (s, s2), proto, (dport, sport), (tagged, vid), (ttl, mc))| {
                let mut k = FlowKey::new();
                k.set_in_port(in_port)
                    .set_eth_type(et)
                    .set_eth_src(flow::EthAddr([2, 0, 0, 0, 0, in_port as u8]))
                    .set_eth_dst(flow::EthAddr([if mc { 1 } else { 2 }, 0, 0, 0, 0, a]));
                if tagged {
                    k.set_vlan_tci(0x1000 | vid).set_vlan_tpid(0x8100);
                }
                if et == 0x0800 {
                    k.set_nw_dst([10, a, b, c].into())
                        .set_nw_src([10, s, s2, 1].into())
                        .set_nw_proto(proto)
                        .set_nw_ttl(ttl);
                    if proto != 1 {
                        k.set_tp_dst(dport).set_tp_src(sport);
                    }
                } else if et == 0x0806 {
                    k.set_nw_dst([10, a, b, c].into()).set_nw_proto(1);
                }
                k
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// For random tables and packets: a packet that a cached megaflow covers (its key agrees
    /// with the megaflow's key on every bit of the mask) gets exactly the datapath actions a
    /// fresh translation gives it. MAC learning is off so translations do not change state.
    #[test]
    fn megaflows_agree_with_fresh_translations(
        rules in proptest::collection::vec(rule(), 1..20),
        packets in proptest::collection::vec(packet(), 2..40),
    ) {
        let of = Ofproto::new();
        of.add_bridge("br0").unwrap();
        for o in 1..=3 {
            of.add_port("br0", port(&format!("p{o}"), o, o)).unwrap();
        }
        for r in &rules {
            of.add_flow("br0", r).unwrap();
        }
        let pipe = of.pipe.read().unwrap();
        let mut cache: Vec<(flow::Match, Vec<flow::odp::Action>)> = Vec::new();
        for k in &packets {
            let fresh = translate(&pipe, k, false, None);
            if let Some((m, acts)) = cache.iter().find(|(m, _)| m.matches(k)) {
                prop_assert_eq!(
                    &fresh.actions, acts,
                    "megaflow {:?} covers the packet but its actions differ", m
                );
            } else {
                cache.push((flow::Match::new(k, &fresh.mask), fresh.actions));
            }
        }
    }
}

/// A megaflow removed and installed again (same match, so the same ufid) starts counting from
/// zero: its packets reach the rule in full, whether or not a revalidation round ran between
/// the removal and the new install. (The round after `revalidator/purge` once measured the new
/// flow against the old one's count and lost what lay under it.)
#[test]
fn a_megaflow_installed_again_credits_its_rule_from_zero() {
    use netdev::dummy::{DummyPort, injector};
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    for (n, o) in [("reinstall-p1", 1), ("reinstall-p2", 2)] {
        of.add_port("br0", port(n, o, o)).unwrap();
    }
    of.add_flows("br0", "cookie=0x1,in_port=1,actions=output:2\n")
        .unwrap();
    let mut b = DatapathBuilder::new(DpConfig::default());
    let o = of.clone();
    b.set_upcall(Box::new(move || o.upcall_handler()));
    b.add_port(1, Box::new(DummyPort::new("reinstall-p1")))
        .unwrap();
    b.add_port(2, Box::new(DummyPort::new("reinstall-p2")))
        .unwrap();
    let mut dp = b.start().unwrap();
    let inj = injector("reinstall-p1").unwrap();
    let send = |n: usize| {
        inj.inject(vec![udp([10, 0, 0, 2], 7); n]).unwrap();
        assert!(inj.settle(Duration::from_secs(20)));
    };
    let n_packets = |of: &Ofproto| {
        let flows = of.dump_flows("br0", None).unwrap();
        let l = flows.lines().find(|l| l.contains("cookie=0x1")).unwrap();
        l.split("n_packets=")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    // Settle waits for a poll before the port's first packet too.
    let t = Instant::now();
    while !inj.settle(Duration::from_secs(1)) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no PMD polls the port"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    send(4);
    of.revalidate(&mut dp);
    assert_eq!(n_packets(&of), 4);
    dp.del_flows();
    // The same flow again, fewer packets than before, then a round, then more.
    send(2);
    of.revalidate(&mut dp);
    assert_eq!(n_packets(&of), 6);
    send(3);
    of.revalidate(&mut dp);
    assert_eq!(n_packets(&of), 9);
    drop(dp.stop());
}
