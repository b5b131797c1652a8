//! The datapath end to end: pcap ports in and out, megaflows installed as `dpctl/add-flow`
//! would, PMD threads forwarding, and the capture that comes out checked byte for byte.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use datapath::dpif::{Datapath, DatapathBuilder, DpConfig};
use netdev::pcap::{PcapWriter, read_file};
use netdev::pcap_port::PcapPort;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcap")
        .join(name)
}

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("flowpath-dp-{tag}-{}", std::process::id()));
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

/// What one run produced.
struct Out {
    dump: String,
    dump_verbose: String,
    stats: String,
    drops: String,
    p1: Vec<Vec<u8>>,
    p2: Vec<Vec<u8>>,
}

/// A datapath with `p0` reading `input` and `p1`, `p2` writing captures in `dir`, with `flows`
/// installed before traffic; runs until the input is exhausted.
fn run(dir: &Dir, input: &Path, flows: &[(&str, &str)], emc: u32) -> Out {
    let mut cfg = DpConfig::default();
    cfg.pmd.emc_insert_inv_prob = emc;
    let mut b = DatapathBuilder::new(cfg);
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
    for (k, a) in flows {
        b.add_flow(k, a).unwrap();
    }
    let dp = b.start().unwrap();
    wait_drained(&dp);
    let out = Out {
        dump: dp.dump_flows(false),
        dump_verbose: dp.dump_flows(true),
        stats: dp.pmd_stats_show(),
        drops: dp.pmd_drop_show(),
        p1: Vec::new(),
        p2: Vec::new(),
    };
    drop(dp.stop());
    let frames = |p: &Path| read_file(p).unwrap().into_iter().map(|r| r.data).collect();
    Out {
        p1: frames(&o1),
        p2: frames(&o2),
        ..out
    }
}

fn input_frames(name: &str) -> Vec<Vec<u8>> {
    read_file(fixture(name))
        .unwrap()
        .into_iter()
        .map(|r| r.data)
        .collect()
}

#[test]
fn l3_flow_rewrites_and_forwards_every_packet_in_order() {
    let dir = Dir::new("l3");
    for emc in [100, 1, 0] {
        let o = run(
            &dir,
            &fixture("plain_8.pcap"),
            &[(
                "in_port(p0),eth(dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),ipv4(dst=10.1.0.0/255.255.0.0,frag=no)",
                "set(eth(dst=52:54:00:00:00:01)),p1",
            )],
            emc,
        );
        let want: Vec<Vec<u8>> = input_frames("plain_8.pcap")
            .into_iter()
            .map(|mut f| {
                f[..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
                f
            })
            .collect();
        assert_eq!(o.p1, want, "emc-insert-inv-prob {emc}");
        assert!(o.p2.is_empty());
        assert!(o.stats.contains("packets received: 8\n"), "{}", o.stats);
        assert!(
            o.dump.contains(", packets:8, bytes:480, used:"),
            "{}",
            o.dump
        );
    }
}

#[test]
fn dump_flows_prints_ovs_format() {
    let dir = Dir::new("dump");
    let o = run(
        &dir,
        &fixture("plain_8.pcap"),
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "p1")],
        100,
    );
    let lines: Vec<&str> = o.dump.lines().collect();
    assert_eq!(lines[0], "flow-dump from pmd on cpu core: -1");
    assert!(
        lines[1].starts_with(
            "recirc_id(0),in_port(1),eth_type(0x0800),ipv4(frag=no), packets:8, bytes:480, used:"
        ),
        "{}",
        lines[1]
    );
    assert!(lines[1].ends_with(", actions:2"), "{}", lines[1]);
    // Verbose: ufid, names, dp:ovs; and it parses back as a datapath flow.
    let v = o.dump_verbose.lines().nth(1).unwrap();
    assert!(v.starts_with("ufid:"), "{v}");
    assert!(
        v.contains("in_port(p0)") && v.contains("dp:ovs, actions:p1"),
        "{v}"
    );
    flow::odp::parse_flow(v, &mut flow::odp::PortNames::new()).unwrap();
}

#[test]
fn packets_that_miss_are_dropped_and_counted() {
    let dir = Dir::new("miss");
    // Only UDP port 1025 matches; the other seven frames of plain_8 miss every flow.
    let o = run(
        &dir,
        &fixture("plain_8.pcap"),
        &[(
            "in_port(p0),eth_type(0x0800),ipv4(proto=17,frag=no),udp(src=1025)",
            "p2",
        )],
        100,
    );
    assert_eq!(o.p2.len(), 1);
    assert_eq!(&o.p2[0][34..36], &1025u16.to_be_bytes());
    assert!(o.p1.is_empty());
    assert!(
        o.stats.contains("miss with failed upcall: 7\n"),
        "{}",
        o.stats
    );
}

#[test]
fn clone_trunc_and_two_outputs() {
    let dir = Dir::new("clone");
    let o = run(
        &dir,
        &fixture("plain_8.pcap"),
        &[(
            "in_port(p0),eth_type(0x0800),ipv4(frag=no)",
            "clone(set(eth(src=00:00:00:00:00:99)),p2),trunc(20),p2,p1",
        )],
        100,
    );
    let input = input_frames("plain_8.pcap");
    assert_eq!(
        o.p1, input,
        "the original is untouched by the clone and the truncation"
    );
    assert_eq!(o.p2.len(), 16);
    for (i, f) in input.iter().enumerate() {
        // Per flow group the clone's output comes first, then the truncated copy.
        let mut c = f.clone();
        c[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0x99]);
        assert!(o.p2.contains(&c), "clone of frame {i}");
        assert!(o.p2.contains(&f[..20].to_vec()), "truncated frame {i}");
    }
}

#[test]
fn recirculation_runs_a_second_pass() {
    let dir = Dir::new("recirc");
    let o = run(
        &dir,
        &fixture("plain_8.pcap"),
        &[
            (
                "recirc_id(0),in_port(p0),eth_type(0x0800),ipv4(frag=no)",
                "push_vlan(vid=10,pcp=0),recirc(0x5)",
            ),
            (
                "recirc_id(0x5),in_port(p0),eth_type(0x8100),vlan(vid=10,pcp=0),encap(eth_type(0x0800))",
                "p1",
            ),
        ],
        100,
    );
    assert_eq!(o.p1.len(), 8);
    for (f, g) in input_frames("plain_8.pcap").iter().zip(&o.p1) {
        assert_eq!(&g[..12], &f[..12]);
        assert_eq!(&g[12..16], &[0x81, 0x00, 0x00, 0x0a]);
        assert_eq!(&g[16..], &f[12..]);
    }
    assert!(
        o.stats.contains("packet recirculations: 8\n"),
        "{}",
        o.stats
    );
    assert!(
        o.stats.contains("avg. datapath passes per packet: 2.00\n"),
        "{}",
        o.stats
    );
}

/// OVS's "Encap Decap MPLS xlate action" (mpls-xlate.at) as its datapath runs it: the frame
/// goes out carried whole in MPLS (`add_mpls`, `push_eth`) on p1, and, in the same pass, is
/// taken apart again (`pop_eth`, `pop_mpls(eth_type=0x6558)`) and recirculated, the second
/// pass sending the original frame to p2.
#[test]
fn add_mpls_carries_the_frame_and_pop_mpls_gives_it_back() {
    let dir = Dir::new("addmpls");
    let o = run(
        &dir,
        &fixture("plain_8.pcap"),
        &[
            (
                "recirc_id(0),in_port(p0),eth_type(0x0800),ipv4(frag=no)",
                "add_mpls(label=0,tc=0,ttl=64,bos=1,eth_type=0x8847),\
                 push_eth(src=00:00:00:00:00:01,dst=00:00:00:00:00:02),p1,\
                 pop_eth,pop_mpls(eth_type=0x6558),recirc(0x1)",
            ),
            (
                "recirc_id(0x1),in_port(p0),eth_type(0x0800),ipv4(frag=no)",
                "p2",
            ),
        ],
        100,
    );
    let input = input_frames("plain_8.pcap");
    assert_eq!(o.p1.len(), 8);
    for (f, g) in input.iter().zip(&o.p1) {
        assert_eq!(
            &g[..18],
            &[
                0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x88, 0x47, 0, 0, 0x01, 0x40
            ]
        );
        assert_eq!(&g[18..], &f[..]);
    }
    assert_eq!(o.p2, input);
    assert!(
        o.drops.contains("header rewrites not applied: 0\n"),
        "{}",
        o.drops
    );
}

#[test]
fn endless_recirculation_stops_at_the_depth_limit() {
    let dir = Dir::new("loop");
    let o = run(
        &dir,
        &fixture("plain_8.pcap"),
        &[
            (
                "recirc_id(0),in_port(p0),eth_type(0x0800),ipv4(frag=no)",
                "recirc(0x1)",
            ),
            (
                "recirc_id(0x1),in_port(p0),eth_type(0x0800),ipv4(frag=no)",
                "recirc(0x1)",
            ),
        ],
        100,
    );
    assert!(o.p1.is_empty() && o.p2.is_empty());
    // Eight passes by recirculation per packet, then the drop.
    assert!(
        o.stats.contains("packet recirculations: 64\n"),
        "{}",
        o.stats
    );
}

#[test]
fn malformed_frames_do_not_disturb_forwarding() {
    let dir = Dir::new("malformed");
    // A capture of broken frames followed by good ones.
    let input = dir.join("mixed.pcap");
    let mut w = PcapWriter::create(&input).unwrap();
    for f in input_frames("truncated.pcap")
        .iter()
        .chain(input_frames("plain_8.pcap").iter())
    {
        w.write(0, f).unwrap();
    }
    w.finish().unwrap();
    let o = run(
        &dir,
        &input,
        &[("in_port(p0),eth_type(0x0800),ipv4(proto=17,frag=no)", "p1")],
        100,
    );
    let good = input_frames("plain_8.pcap");
    for g in &good {
        assert!(o.p1.contains(g));
    }
}

fn wait_drained(dp: &Datapath) {
    let t = Instant::now();
    while !dp.drained() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the datapath never went idle"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn drops_and_malformed_frames_are_counted_by_reason() {
    let dir = Dir::new("drops");
    // Only IPv4 has a flow; the rest of the truncated fixtures miss (lost upcalls). A flow
    // with empty actions drops IPv4 frames that have no UDP header.
    let o = run(
        &dir,
        &fixture("truncated.pcap"),
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "drop")],
        100,
    );
    let count = |label: &str| -> u64 {
        let l = o
            .drops
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("{label}: {}", o.drops));
        l.split_whitespace().last().unwrap().parse().unwrap()
    };
    for reason in [
        "runt",
        "tcp_truncated",
        "sctp_truncated",
        "ipv4_bad_total_len",
        "nd_invalid",
    ] {
        assert!(count(reason) >= 1, "{reason}: {}", o.drops);
    }
    assert!(count("actions without output") >= 1, "{}", o.drops);
    assert!(
        count("missed, upcall failed or over budget") >= 1,
        "{}",
        o.drops
    );
    assert!(o.p1.is_empty() && o.p2.is_empty());
}

/// A slow path that installs `eth_type` megaflows forwarding to port 2.
struct ForwardByEthType;

/// A megaflow on the packet's `eth_type` that outputs to `port` (or drops), sending
/// `packet_outs` first.
fn install_by_eth_type(
    port: Option<u32>,
    packet_outs: Vec<datapath::pmd::PacketOut>,
) -> datapath::pmd::UpcallResult {
    let mut mask = flow::Mask::new();
    mask.set_eth_type(u16::MAX);
    datapath::pmd::UpcallResult::Install {
        mask: Box::new(mask),
        actions: port.map(flow::odp::Action::Output).into_iter().collect(),
        compiled: port
            .map(datapath::actions::DpAction::Output)
            .into_iter()
            .collect(),
        packet_outs,
        skb_priority_mask: 0,
    }
}

impl datapath::pmd::UpcallHandler for ForwardByEthType {
    fn upcall(
        &mut self,
        _key: &flow::FlowKey,
        _pkt: &datapath::packet::Packet,
    ) -> datapath::pmd::UpcallResult {
        install_by_eth_type(Some(2), Vec::new())
    }
}

/// A PMD polling `p0` (replaying `plain_8.pcap`) and sending to `p1` (writing `out`), with
/// `upcall` as its slow path; the ports are returned to be dropped after the PMD (to flush).
fn pcap_pmd(
    cfg: datapath::pmd::PmdConfig,
    upcall: Box<dyn datapath::pmd::UpcallHandler>,
    out: &Path,
) -> (datapath::pmd::Pmd, PcapPort, PcapPort) {
    use datapath::port::Port;
    let mut pmd = datapath::pmd::Pmd::new(cfg, upcall);
    let mut p0 = PcapPort::open("p0", Some(&fixture("plain_8.pcap")), None).unwrap();
    let mut p1 = PcapPort::open("p1", None, Some(out)).unwrap();
    pmd.add_rxq(datapath::pmd::PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: p0.take_rxq(0, 1).unwrap(),
        cycles: 0,
    });
    pmd.add_txq(2, p1.open_txq());
    (pmd, p0, p1)
}

#[test]
fn only_upcall_installed_flows_expire_when_idle() {
    let dir = Dir::new("expire");
    let cfg = datapath::pmd::PmdConfig {
        max_idle_ms: 50,
        ..Default::default()
    };
    let (mut pmd, _p0, _p1) = pcap_pmd(cfg, Box::new(ForwardByEthType), &dir.join("out.pcap"));
    let mut names = flow::odp::PortNames::new();
    names.insert("p0", 1);
    names.insert("p1", 2);
    // A configured flow that sees traffic (UDP dport 2000) and one that never does (IPv6).
    for (k, a) in [
        (
            "in_port(p0),eth_type(0x0800),ipv4(proto=17,frag=no),udp(src=1024)",
            "p1",
        ),
        ("in_port(p0),eth_type(0x86dd),ipv6(frag=no)", "drop"),
    ] {
        pmd.add_flow(datapath::dpif::parse_megaflow(&names, k, a).unwrap())
            .unwrap();
    }
    for _ in 0..10 {
        pmd.poll_once();
    }
    // Seven frames missed the UDP flow: one upcall installed an eth_type(0x0800) megaflow.
    // (Megaflows must not overlap in a real switch; here the test wants both kinds.)
    assert_eq!(pmd.stats().upcalls, 1);
    assert_eq!(pmd.n_flows(), 3);
    let t = Instant::now();
    while pmd.n_flows() == 3 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the idle upcall flow never expired"
        );
        pmd.poll_once();
        std::thread::sleep(Duration::from_millis(5));
    }
    // Give housekeeping another round: the configured flows, used or not, stay.
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(1500) {
        pmd.poll_once();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(pmd.n_flows(), 2, "a configured flow expired");
    assert!(pmd.dump().iter().all(|d| !d.flow.expires));
}

/// A slow path that drops what misses and sends a packet of its own once per upcall, as
/// translation does for an unresolved tunnel neighbour.
struct AskOnce;

const REQUEST: [u8; 42] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1, 2, 0,
    0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
];

impl datapath::pmd::UpcallHandler for AskOnce {
    fn upcall(
        &mut self,
        _key: &flow::FlowKey,
        _pkt: &datapath::packet::Packet,
    ) -> datapath::pmd::UpcallResult {
        let ask = datapath::pmd::PacketOut {
            frame: REQUEST.to_vec(),
            in_port: u32::MAX,
            actions: vec![datapath::actions::DpAction::Output(2)],
        };
        install_by_eth_type(None, vec![ask])
    }
}

#[test]
fn packets_the_slow_path_sends_go_out_once_per_upcall() {
    let dir = Dir::new("packet_out");
    let (mut pmd, _p0, p1) = pcap_pmd(Default::default(), Box::new(AskOnce), &dir.join("out.pcap"));
    for _ in 0..10 {
        pmd.poll_once();
    }
    drop(pmd);
    drop(p1);
    // Eight IPv4 frames: one upcall installs the drop megaflow and sends one request.
    let out = netdev::pcap::read_file(dir.join("out.pcap")).unwrap();
    let frames: Vec<&[u8]> = out.iter().map(|r| &r.data[..]).collect();
    assert_eq!(frames, vec![&REQUEST[..]]);
}

/// `pmd-stats-show` counts the packets the simple match found on OVS's "simple match hits"
/// line, and none of them as EMC or megaflow hits.
#[test]
fn pmd_stats_show_counts_simple_match_hits() {
    let dir = Dir::new("simple");
    let o = run(
        &dir,
        &fixture("plain_8.pcap"),
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "p1")],
        100,
    );
    assert_eq!(o.p1, input_frames("plain_8.pcap"));
    for line in [
        "simple match hits: 8\n",
        "emc hits: 0\n",
        "megaflow hits: 0\n",
    ] {
        assert!(o.stats.contains(line), "{line}{}", o.stats);
    }
}
