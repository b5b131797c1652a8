//! Tunnel termination in the running datapath: the seeds' VXLAN, GENEVE and MPLSoGRE captures
//! through OVS's own megaflows for them (`crates/flow/tests/data/ovs-dpdk-dumps/*_decap_8.txt`),
//! packets of several input ports in the recirculation queue, tunnel metadata across a second
//! recirculation, tunnel ports added and removed at run time, and the decap fast path kept in
//! step with flow changes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datapath::dpif::{Datapath, DatapathBuilder, DpConfig, parse_megaflow};
use datapath::packet::{Batch, Pool};
use datapath::pmd::{Pmd, PmdConfig, PolledRxq, UpcallHandler, UpcallResult};
use datapath::port::{Port, RxQueue};
use datapath::tunnel::{TunnelKind, TunnelPort};
use flow::odp::PortNames;
use netdev::memory::{SampleSpec, SinkPort};
use netdev::pcap::{PcapWriter, read_file};
use netdev::pcap_port::PcapPort;

fn seed(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap")
        .join(name)
}

fn frames(p: &Path) -> Vec<Vec<u8>> {
    read_file(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .into_iter()
        .map(|r| r.data)
        .collect()
}

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("flowpath-tnl-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn join(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn wait_drained(dp: &Datapath) {
    let t = Instant::now();
    while !dp.drained() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the datapath never went idle"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits (up to 20 s) until `done` holds.
fn wait_for(done: impl Fn() -> bool) {
    let t = Instant::now();
    while !done() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// What a run produced.
struct Out {
    p1: Vec<Vec<u8>>,
    p2: Vec<Vec<u8>>,
    dump: String,
    stats: String,
    perf: String,
    show: String,
}

/// A datapath with `p0` reading `input`, `p1` and `p2` writing captures, and the tunnel ports
/// `tunnels` (numbers 4, 5, ...), `flows` installed before traffic; runs until drained.
fn run(dir: &Dir, input: &Path, tunnels: &[TunnelKind], flows: &[(&str, &str)]) -> Out {
    let mut b = DatapathBuilder::new(DpConfig::default());
    let (o1, o2) = (dir.join("p1.pcap"), dir.join("p2.pcap"));
    b.add_port(
        1,
        Box::new(PcapPort::open("p0", Some(input), None).unwrap()),
    )
    .unwrap();
    b.add_port(2, Box::new(PcapPort::open("p1", None, Some(&o1)).unwrap()))
        .unwrap();
    b.add_port(3, Box::new(PcapPort::open("p2", None, Some(&o2)).unwrap()))
        .unwrap();
    for (i, k) in tunnels.iter().enumerate() {
        b.add_port(4 + i as u32, Box::new(TunnelPort::with_default_name(*k)))
            .unwrap();
    }
    for (k, a) in flows {
        b.add_flow(k, a)
            .unwrap_or_else(|e| panic!("{k} -> {a}: {e}"));
    }
    let dp = b.start().unwrap();
    wait_drained(&dp);
    let out = Out {
        p1: Vec::new(),
        p2: Vec::new(),
        dump: dp.dump_flows(false),
        stats: dp.pmd_stats_show(),
        perf: dp.pmd_perf_show(),
        show: dp.dpif_show(),
    };
    drop(dp.stop());
    Out {
        p1: frames(&o1),
        p2: frames(&o2),
        ..out
    }
}

/// The inner frames of the seed `name` (outer headers of `outer_len` bytes stripped), with
/// the destination MAC rewritten to `dst`.
fn inner_with_dst(name: &str, outer_len: usize, dst: [u8; 6]) -> Vec<Vec<u8>> {
    frames(&seed(name))
        .into_iter()
        .map(|f| {
            let mut g = f[outer_len..].to_vec();
            g[..6].copy_from_slice(&dst);
            g
        })
        .collect()
}

const VXLAN_POP: &str = "recirc_id(0),in_port(p0),packet_type(ns=0,id=0),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),ipv4(dst=10.1.2.8,proto=17,frag=no),udp(dst=4789)";
const VXLAN_INNER: &str = "tunnel(tun_id=0x64,src=10.1.2.9,dst=10.1.2.8,flags(-df+csum+key)),recirc_id(0),in_port(vxlan_sys_4789),packet_type(ns=0,id=0),eth(dst=52:54:00:a0:91:02),eth_type(0x0800),ipv4(dst=192.168.2.16,frag=no)";

/// The VXLAN seeds (outer UDP checksum set, and zero) through OVS's megaflows for them.
#[test]
fn vxlan_seed_through_ovs_megaflows() {
    for (pcap, csum) in [
        ("vxlan_l3vpn_8.pcap", "+csum"),
        ("vxlan_l3vpn_csum0_8.pcap", "-csum"),
    ] {
        let dir = Dir::new("vxlan");
        let inner = VXLAN_INNER.replace("+csum", csum);
        let o = run(
            &dir,
            &seed(pcap),
            &[TunnelKind::VXLAN],
            &[
                (VXLAN_POP, "tnl_pop(vxlan_sys_4789)"),
                (&inner, "set(eth(dst=52:54:00:a0:91:99)),p1"),
            ],
        );
        assert_eq!(
            o.p1,
            inner_with_dst(pcap, 50, [0x52, 0x54, 0, 0xa0, 0x91, 0x99]),
            "{pcap}"
        );
        // Both megaflows credited, as OVS's dumps show them.
        assert_eq!(o.dump.matches("packets:8,").count(), 2, "{}", o.dump);
        // As OVS counts it: the pop is a recirculation, two passes per packet.
        for line in [
            "packet recirculations: 8\n",
            "avg. datapath passes per packet: 2.00\n",
            "of the recirculations, tunnel pops: 8\n",
        ] {
            assert!(o.stats.contains(line), "{line}\n{}", o.stats);
        }
        // The first pass is served by the decap fast path, the second by the caches.
        assert!(o.stats.contains("decap fast path hits: 8\n"), "{}", o.stats);
        for line in ["- Tunnel pops:", "- Decap fast hits:", "- Recirculations:"] {
            assert!(o.perf.contains(line), "{line}\n{}", o.perf);
        }
        assert!(
            o.show
                .contains("vxlan_sys_4789 4/4: (vxlan: packet_type=ptap)"),
            "{}",
            o.show
        );
    }
}

/// The GENEVE seeds: the OVN option is in the key, as the second flow matches it.
#[test]
fn geneve_seed_through_ovs_megaflows() {
    for (pcap, csum) in [("geneve_8.pcap", "+csum"), ("geneve_csum0_8.pcap", "-csum")] {
        let dir = Dir::new("geneve");
        let o = run(
            &dir,
            &seed(pcap),
            &[TunnelKind::GENEVE],
            &[
                (
                    "recirc_id(0),in_port(p0),packet_type(ns=0,id=0),eth(src=ec:0d:9a:44:2c:f5,dst=3c:fd:fe:ee:4a:2c),eth_type(0x0800),ipv4(dst=172.17.2.60,proto=17,frag=no),udp(dst=6081)",
                    "tnl_pop(genev_sys_6081)",
                ),
                (
                    &format!(
                        "tunnel(tun_id=0x3,src=172.17.2.160,dst=172.17.2.60,geneve({{class=0x102,type=0x80,len=4,0x30002}}),flags(-df{csum}+key)),recirc_id(0),in_port(genev_sys_6081),packet_type(ns=0,id=0),eth(dst=fa:16:3e:20:ab:56),eth_type(0x0800),ipv4(frag=no)"
                    ),
                    "set(eth(dst=fa:16:3e:20:ab:99)),p1",
                ),
            ],
        );
        assert_eq!(
            o.p1,
            inner_with_dst(pcap, 58, [0xfa, 0x16, 0x3e, 0x20, 0xab, 0x99]),
            "{pcap}"
        );
    }
}

/// The MPLSoGRE seed: an L3 payload (`packet_type(ns=1,id=0x8847)`) made Ethernet again by
/// `push_eth` and popped to IPv4, by label, as OVS's four megaflows do.
#[test]
fn mplsogre_seed_through_ovs_megaflows() {
    let dir = Dir::new("mplsogre");
    let mut flows = vec![(
        "recirc_id(0),in_port(p0),packet_type(ns=0,id=0),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),ipv4(dst=10.1.2.8,proto=47,frag=no)".to_owned(),
        "tnl_pop(gre_sys)".to_owned(),
    )];
    for label in 812..816 {
        // Even labels to p1, odd to p2.
        flows.push((
            format!(
                "tunnel(tun_id=0x0,src=10.1.2.9,dst=10.1.2.8,flags(-df-csum+key)),recirc_id(0),in_port(gre_sys),packet_type(ns=1,id=0x8847),eth_type(0x8847),mpls(label={label}/0xfffff,tc=0/0,ttl=4/0x0,bos=1/1)"
            ),
            format!(
                "push_eth(src=00:00:00:00:00:00,dst=52:54:00:a0:91:{:02x}),pop_mpls(eth_type=0x800),{}",
                0x10 + label - 812,
                if label % 2 == 0 { "p1" } else { "p2" }
            ),
        ));
    }
    let refs: Vec<(&str, &str)> = flows
        .iter()
        .map(|(k, a)| (k.as_str(), a.as_str()))
        .collect();
    let o = run(&dir, &seed("mplsogre_8.pcap"), &[TunnelKind::Gre], &refs);
    assert_eq!(o.p1.len() + o.p2.len(), 8, "{}", o.stats);
    for (i, f) in frames(&seed("mplsogre_8.pcap")).iter().enumerate() {
        // Ethernet (14) + IPv4 (20) + GRE with key (8), then the label stack entry.
        let lse = u32::from_be_bytes([f[42], f[43], f[44], f[45]]);
        let label = lse >> 12;
        let mut want = vec![0x52, 0x54, 0, 0xa0, 0x91, (0x10 + label - 812) as u8];
        want.extend_from_slice(&[0; 6]);
        want.extend_from_slice(&[0x08, 0x00]);
        want.extend_from_slice(&f[46..]);
        let out = if label % 2 == 0 { &o.p1 } else { &o.p2 };
        assert!(out.contains(&want), "frame {i}, label {label}");
    }
}

/// VXLAN frames interleaved with frames that recirculate: both kinds wait in the
/// recirculation queue, the decapsulated ones as received on the tunnel port, and each must be
/// classified by its own in_port.
#[test]
fn recirculated_packets_are_classified_by_their_own_in_port() {
    let dir = Dir::new("mixed");
    let input = dir.join("mixed.pcap");
    let vxlan = frames(&seed("vxlan_l3vpn_8.pcap"));
    let plain = frames(&seed("plain_8.pcap"));
    let mut w = PcapWriter::create(&input).unwrap();
    for (v, p) in vxlan.iter().zip(&plain) {
        w.write(0, v).unwrap();
        w.write(0, p).unwrap();
    }
    w.finish().unwrap();
    let o = run(
        &dir,
        &input,
        &[TunnelKind::VXLAN],
        &[
            (VXLAN_POP, "tnl_pop(vxlan_sys_4789)"),
            (
                "recirc_id(0),in_port(p0),eth(dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),ipv4(dst=10.1.0.2,frag=no)",
                "recirc(0x9)",
            ),
            ("recirc_id(0x9),in_port(p0)", "p2"),
            ("in_port(vxlan_sys_4789)", "p1"),
        ],
    );
    let inner: Vec<Vec<u8>> = vxlan.iter().map(|f| f[50..].to_vec()).collect();
    assert_eq!(o.p1, inner, "{}", o.stats);
    assert_eq!(o.p2, plain, "{}", o.stats);
}

/// After the pop, a recirculation: the third pass still has the tunnel metadata in its key.
#[test]
fn tunnel_metadata_survives_a_second_recirculation() {
    let dir = Dir::new("recirc");
    let o = run(
        &dir,
        &seed("vxlan_l3vpn_8.pcap"),
        &[TunnelKind::VXLAN],
        &[
            (VXLAN_POP, "tnl_pop(vxlan_sys_4789)"),
            (
                "tunnel(tun_id=0x64,src=10.1.2.9,dst=10.1.2.8,flags(-df+csum+key)),in_port(vxlan_sys_4789)",
                "push_vlan(vid=7,pcp=0),recirc(0x7)",
            ),
            (
                "recirc_id(0x7),tunnel(tun_id=0x64,src=10.1.2.9,dst=10.1.2.8,tp_src=49152/0xc000,tp_dst=4789,flags(-df+csum+key)),in_port(vxlan_sys_4789),eth_type(0x8100),vlan(vid=7,pcp=0),encap(eth_type(0x0800))",
                "pop_vlan,p1",
            ),
            // Another VNI would go elsewhere.
            (
                "recirc_id(0x7),tunnel(tun_id=0x65,src=10.1.2.9,dst=10.1.2.8,flags(-df+csum+key)),in_port(vxlan_sys_4789),eth_type(0x8100),vlan(vid=7,pcp=0),encap(eth_type(0x0800))",
                "p2",
            ),
        ],
    );
    let inner: Vec<Vec<u8>> = frames(&seed("vxlan_l3vpn_8.pcap"))
        .iter()
        .map(|f| f[50..].to_vec())
        .collect();
    assert_eq!(o.p1, inner, "{}", o.stats);
    assert!(o.p2.is_empty());
    assert!(
        o.stats.contains("avg. datapath passes per packet: 3.00\n"),
        "{}",
        o.stats
    );
}

/// Tunnel ports come and go while the datapath runs: flows to a port added at run time
/// decapsulate; once it is gone its megaflows are too and `tnl_pop` to it counts
/// `tunnel_pop_bad_port`; an output to a tunnel port is a tx drop of that port.
#[test]
fn tunnel_ports_are_added_and_removed_at_run_time() {
    let dir = Dir::new("runtime");
    let out = dir.join("p1.pcap");
    let mut b = DatapathBuilder::new(DpConfig::default());
    b.add_port(2, Box::new(PcapPort::open("p1", None, Some(&out)).unwrap()))
        .unwrap();
    let mut dp = b.start().unwrap();
    dp.add_port(
        5,
        Box::new(TunnelPort::with_default_name(TunnelKind::VXLAN)),
    )
    .unwrap();
    assert!(
        dp.dpif_show()
            .contains("vxlan_sys_4789 5/5: (vxlan: packet_type=ptap)")
    );
    dp.add_flow("in_port(1)", "tnl_pop(vxlan_sys_4789)")
        .unwrap();
    dp.add_flow("in_port(vxlan_sys_4789)", "p1").unwrap();
    dp.add_flow("in_port(3)", "vxlan_sys_4789").unwrap();
    dp.add_port(
        1,
        Box::new(PcapPort::open("p0", Some(&seed("vxlan_l3vpn_8.pcap")), None).unwrap()),
    )
    .unwrap();
    dp.add_port(
        3,
        Box::new(PcapPort::open("p2", Some(&seed("plain_8.pcap")), None).unwrap()),
    )
    .unwrap();
    // (`drained` may still be set from before the sources came.)
    wait_for(|| dp.total_stats().tx_packets == 16);
    wait_drained(&dp);
    assert_eq!(dp.total_stats().tnl_pops, 8);
    assert_eq!(dp.port_counters("vxlan_sys_4789").unwrap().tx_dropped, 8);
    let tnl = dp.del_port("vxlan_sys_4789").unwrap();
    assert_eq!(tnl.tunnel(), Some(TunnelKind::VXLAN));
    assert!(!dp.dump_flows(false).contains("in_port(5)"));
    dp.add_port(
        6,
        Box::new(PcapPort::open("p3", Some(&seed("vxlan_l3vpn_8.pcap")), None).unwrap()),
    )
    .unwrap();
    dp.add_flow("in_port(6)", "tnl_pop(5)").unwrap();
    wait_for(|| dp.total_stats().tnl_pop_dropped() == 8);
    let s = dp.total_stats();
    let bad_port = datapath::tunnel::TnlPopDrop::BadPort as usize;
    assert_eq!(s.tnl_pop_drops[bad_port], 8);
    assert_eq!(s.tnl_pops, 8);
    assert!(
        dp.pmd_drop_show()
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["tunnel_pop_bad_port", "8"]),
        "{}",
        dp.pmd_drop_show()
    );
    drop(dp.stop());
    assert_eq!(frames(&out).len(), 8);
}

/// An rx queue the test feeds.
#[derive(Clone, Default)]
struct Feed(Arc<Mutex<Vec<Vec<u8>>>>);

impl Feed {
    fn send(&self, f: &[Vec<u8>]) {
        self.0.lock().unwrap().extend(f.iter().cloned());
    }
}

impl RxQueue for Feed {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let mut q = self.0.lock().unwrap();
        let n = q.len().min(batch.room());
        for f in q.drain(..n) {
            batch.push(pool.packet_from(&f, 1));
        }
        n
    }
}

/// Installs `in_port` + `packet_type` megaflows that pop to port 3, expiring when idle.
struct PopUpcalls;

impl UpcallHandler for PopUpcalls {
    fn upcall(&mut self, _key: &flow::FlowKey, _pkt: &datapath::packet::Packet) -> UpcallResult {
        let mut mask = flow::Mask::new();
        mask.set_recirc_id(u32::MAX).set_packet_type(u32::MAX);
        UpcallResult::Install {
            mask: Box::new(mask),
            actions: vec![flow::odp::Action::TnlPop(3)],
            compiled: vec![datapath::actions::DpAction::TnlPop(3)],
            packet_outs: Vec::new(),
            skb_priority_mask: 0,
        }
    }
}

fn decap_pmd(upcall: Box<dyn UpcallHandler>, max_idle_ms: u64) -> (Pmd, Feed, PortNames) {
    let cfg = PmdConfig {
        max_idle_ms,
        ..PmdConfig::default()
    };
    let mut pmd = Pmd::new(cfg, upcall);
    let feed = Feed::default();
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(feed.clone()),
        cycles: 0,
    });
    let mut sink = SinkPort::new("p1", SampleSpec::default());
    pmd.add_txq(2, sink.open_txq());
    let mut tnl = TunnelPort::with_default_name(TunnelKind::VXLAN);
    pmd.add_port_txq(3, tnl.open_txq(), tnl.tunnel());
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p1", 2);
    names.insert("vxlan_sys_4789", 3);
    (pmd, feed, names)
}

fn poll(pmd: &mut Pmd, n: usize) {
    for _ in 0..n {
        pmd.poll_once();
    }
}

/// The decap fast path follows flow install, modify, delete and idle expiry: after each
/// change the packets go where the flow table says, and its hits are credited to the flow.
#[test]
fn decap_fast_path_follows_flow_changes() {
    let (mut pmd, feed, names) = decap_pmd(Box::new(datapath::pmd::DropUpcalls), 10_000);
    let vxlan = frames(&seed("vxlan_l3vpn_8.pcap"));
    let flow = |a: &str| parse_megaflow(&names, VXLAN_POP, a).unwrap();
    pmd.add_flow(flow("tnl_pop(vxlan_sys_4789)")).unwrap();
    pmd.add_flow(parse_megaflow(&names, "in_port(vxlan_sys_4789)", "p1").unwrap())
        .unwrap();
    feed.send(&vxlan);
    poll(&mut pmd, 2);
    let s = pmd.stats();
    assert_eq!((s.decap_hits, s.tnl_pops, s.tx_packets), (8, 8, 8));
    assert_eq!(
        s.simple_hits + s.emc_hits + s.megaflow_hits,
        8,
        "the second pass only"
    );
    let popped: Vec<u64> = pmd.dump().iter().map(|d| d.flow.stats.packets).collect();
    assert_eq!(popped, vec![8, 8]);
    // Modified to drop: no more pops.
    pmd.mod_flow(flow("drop"), false).unwrap();
    feed.send(&vxlan);
    poll(&mut pmd, 2);
    let s = pmd.stats();
    assert_eq!((s.decap_hits, s.tnl_pops, s.action_drops), (8, 8, 8));
    // And back.
    pmd.mod_flow(flow("tnl_pop(vxlan_sys_4789)"), false)
        .unwrap();
    feed.send(&vxlan);
    poll(&mut pmd, 2);
    assert_eq!((pmd.stats().decap_hits, pmd.stats().tnl_pops), (16, 16));
    // Deleted: the packets miss.
    pmd.del_flow(&flow("drop").m).unwrap();
    feed.send(&vxlan);
    poll(&mut pmd, 2);
    let s = pmd.stats();
    assert_eq!((s.decap_hits, s.tnl_pops, s.lost_upcalls), (16, 16, 8));
    // Flushed after a reinstall: likewise.
    pmd.add_flow(flow("tnl_pop(vxlan_sys_4789)")).unwrap();
    assert_eq!(pmd.del_flows(), 2);
    feed.send(&vxlan);
    poll(&mut pmd, 2);
    assert_eq!(pmd.stats().decap_hits, 16);
}

/// The outer pass fused into the decap takes a batch only whole: with one frame of it for
/// another megaflow (UDP port 4790), the batch goes the usual way, where the tunnel's frames
/// still hit the decap fast path one by one, and the other frame its own megaflow. A batch
/// of tunnel frames alone pops them all.
#[test]
fn a_batch_with_a_frame_for_another_megaflow_still_decapsulates_the_rest() {
    let (mut pmd, feed, names) = decap_pmd(Box::new(datapath::pmd::DropUpcalls), 10_000);
    let mut vxlan = frames(&seed("vxlan_l3vpn_8.pcap"));
    pmd.add_flow(parse_megaflow(&names, VXLAN_POP, "tnl_pop(vxlan_sys_4789)").unwrap())
        .unwrap();
    pmd.add_flow(parse_megaflow(&names, "in_port(vxlan_sys_4789)", "p1").unwrap())
        .unwrap();
    let other = VXLAN_POP.replace("udp(dst=4789)", "udp(dst=4790)");
    pmd.add_flow(parse_megaflow(&names, &other, "p1").unwrap())
        .unwrap();
    feed.send(&vxlan);
    poll(&mut pmd, 2);
    let s = pmd.stats();
    assert_eq!((s.decap_hits, s.tnl_pops, s.tx_packets), (8, 8, 8), "{s:?}");
    assert_eq!(s.megaflow_hits + s.emc_hits + s.simple_hits, 8, "{s:?}");
    pmd.clear_stats();
    vxlan[3][36..38].copy_from_slice(&4790u16.to_be_bytes());
    feed.send(&vxlan);
    poll(&mut pmd, 2);
    let s = pmd.stats();
    assert_eq!((s.decap_hits, s.tnl_pops, s.tx_packets), (7, 7, 8), "{s:?}");
    assert_eq!(s.megaflow_hits + s.emc_hits + s.simple_hits, 8, "{s:?}");
    let counts: Vec<u64> = pmd.dump().iter().map(|d| d.flow.stats.packets).collect();
    assert_eq!(counts.iter().sum::<u64>(), 8 + 8 + 7 + 7 + 1, "{counts:?}");
}

#[test]
fn decap_fast_path_forgets_expired_flows() {
    let (mut pmd, feed, names) = decap_pmd(Box::new(PopUpcalls), 50);
    pmd.add_flow(parse_megaflow(&names, "in_port(vxlan_sys_4789)", "p1").unwrap())
        .unwrap();
    let vxlan = frames(&seed("vxlan_l3vpn_8.pcap"));
    feed.send(&vxlan);
    poll(&mut pmd, 2);
    feed.send(&vxlan);
    poll(&mut pmd, 2);
    let s = pmd.stats();
    assert_eq!((s.upcalls, s.tnl_pops, s.tx_packets), (1, 16, 16));
    assert!(s.decap_hits >= 8, "{s:?}");
    // Idle until the upcall's flow expires (the configured one stays).
    let t = Instant::now();
    while pmd.n_flows() == 2 {
        assert!(t.elapsed() < Duration::from_secs(10), "never expired");
        pmd.poll_once();
        std::thread::sleep(Duration::from_millis(5));
    }
    // A stale fast-path entry would pop these without an upcall.
    feed.send(&vxlan);
    poll(&mut pmd, 2);
    let s = pmd.stats();
    assert_eq!((s.upcalls, s.tnl_pops, s.tx_packets), (2, 24, 24));
}
