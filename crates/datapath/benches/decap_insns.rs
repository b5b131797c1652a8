//! Instruction counts (valgrind/callgrind, via gungraun) of whole PMD iterations that terminate
//! tunnels: the outer frame is received (copied into a pool buffer, as the replay port of the
//! `netdev` benches does), matches a megaflow whose action is `tnl_pop`, and the decapsulated
//! packet makes its second pass (as received on the tunnel port, with the tunnel metadata in
//! its key) to a flow that rewrites and outputs it to a sink. `p2p_vxlan_frames` forwards the
//! same VXLAN frames without decapsulating them, the reference for what one pass costs.
//!
//! `ct_1000` and `ct_nat_1000` run the OVS anchor's conntrack pipeline (two passes, two
//! `ct()`s per packet, 1000 connections), `plain_two_passes` the same two passes without
//! conntrack; `ct_8` and `ct_100000` the same pipeline with 8 and 100 000 connections, to see
//! what grows with the table; `ct_ovn_1000` OVN's ACL pipeline (four `ct()`s in two zones,
//! three passes, `flowpath bench ct_ovn`).
//!
//! Each benchmark runs 32 iterations of a 32-packet burst (1024 packets) after a warm-up in
//! `setup` (every flow three times, at least 4000 bursts); `scripts/insns-check` divides by 1024. Frames: 1000 flows (inner UDP source ports
//! and outer entropy ports), the seeds' shapes (`testdata/pcap/README.md`): VXLAN VNI 100 with
//! the outer UDP checksum set, GENEVE VNI 3 with the OVN option (class 0x0102, type 0x80, 4
//! bytes), MPLSoGRE with GRE key 0 and labels 812-815 over a 64-byte inner frame.

use std::hint::black_box;
use std::sync::Arc;

use datapath::dpif::parse_megaflow;
use datapath::packet::{Batch, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::{RxQueue, TxQueue};
use datapath::tunnel::TunnelKind;
use flow::odp::PortNames;
use gungraun::{library_benchmark, library_benchmark_group, main};

const ITERATIONS: usize = 32;
const FLOWS: usize = 1000;

/// Replays frames forever, copying each into a pool buffer.
struct Replay {
    frames: Arc<[Vec<u8>]>,
    next: usize,
    in_port: u32,
}

impl RxQueue for Replay {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let n = batch.room();
        for _ in 0..n {
            batch.push(pool.packet_from(&self.frames[self.next], self.in_port));
            self.next = (self.next + 1) % self.frames.len();
        }
        n
    }
}

/// Frees what it is sent.
struct Sink;

impl TxQueue for Sink {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        pool.free_batch(batch);
    }
}

fn csum_fill(b: &mut [u8], at: usize, sum: u16) {
    b[at..at + 2].copy_from_slice(&(!sum).to_be_bytes());
}

/// Ethernet / IPv4 (no options, TTL 64) / `l4` with `proto`, checksum filled.
fn eth_ipv4(dst: [u8; 6], src: [u8; 6], ips: ([u8; 4], [u8; 4]), proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = [dst, src].concat();
    f.extend_from_slice(&[8, 0]);
    let tot = (20 + l4.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&tot.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0, 0, 64, proto, 0, 0]);
    f.extend_from_slice(&ips.0);
    f.extend_from_slice(&ips.1);
    let sum = wire::checksum::data(&f[14..34]);
    csum_fill(&mut f, 24, sum);
    f.extend_from_slice(l4);
    f
}

/// The seeds' inner frame: 64 bytes on the wire (60 here), UDP 192.168.1.1:sport ->
/// 192.168.2.16:2000.
fn inner(sport: u16) -> Vec<u8> {
    inner_to(sport, 2)
}

/// As [`inner`], to 192.168.`net`.16.
fn inner_to(sport: u16, net: u8) -> Vec<u8> {
    inner_ports(sport, 2000, net)
}

/// The seeds' inner frame, UDP 192.168.1.1:sport -> 192.168.`net`.16:dport.
fn inner_ports(sport: u16, dport: u16, net: u8) -> Vec<u8> {
    let mut udp = [
        sport.to_be_bytes(),
        dport.to_be_bytes(),
        26u16.to_be_bytes(),
        [0, 0],
    ]
    .concat();
    udp.resize(26, 0);
    eth_ipv4(
        [0x52, 0x54, 0, 0xa0, 0x91, 0x02],
        [0x52, 0x54, 0, 0xa0, 0x81, 0x01],
        ([192, 168, 1, 1], [192, 168, net, 16]),
        17,
        &udp,
    )
}

const OUTER_DST: [u8; 6] = [0x8c, 0xdc, 0xd4, 0xab, 0x5b, 0xf0];
const OUTER_SRC: [u8; 6] = [0x8c, 0xdc, 0xd4, 0xab, 0x58, 0x48];
const REMOTE: [u8; 4] = [10, 1, 2, 9];
const LOCAL: [u8; 4] = [10, 1, 2, 8];

/// Outer Ethernet / IPv4 / UDP to `dport` with its checksum set, carrying `payload`.
fn udp_tunnel(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut u = [
        sport.to_be_bytes(),
        dport.to_be_bytes(),
        len.to_be_bytes(),
        [0, 0],
    ]
    .concat();
    u.extend_from_slice(payload);
    let ph =
        wire::checksum::pseudo_header_v4(&REMOTE.into(), &LOCAL.into(), wire::IpProtocol::UDP, len);
    let sum = wire::checksum::combine(&[ph, wire::checksum::data(&u)]);
    csum_fill(&mut u, 6, sum);
    eth_ipv4(OUTER_DST, OUTER_SRC, (REMOTE, LOCAL), 17, &u)
}

fn vxlan_frames() -> Vec<Vec<u8>> {
    (0..FLOWS)
        .map(|i| {
            let mut p = vec![0x08, 0, 0, 0, 0, 0, 100, 0];
            p.extend(inner(1024 + i as u16));
            udp_tunnel(49152 + i as u16, 4789, &p)
        })
        .collect()
}

fn geneve_frames() -> Vec<Vec<u8>> {
    (0..FLOWS)
        .map(|i| {
            let mut p = vec![0x02, 0, 0x65, 0x58, 0, 0, 3, 0];
            p.extend_from_slice(&[0x01, 0x02, 0x80, 0x01, 0, 3, 0, 2]);
            p.extend(inner(1024 + i as u16));
            udp_tunnel(49152 + i as u16, 6081, &p)
        })
        .collect()
}

fn mplsogre_frames() -> Vec<Vec<u8>> {
    (0..FLOWS)
        .map(|i| {
            let label = 812 + (i as u32 % 4);
            let mut p = vec![0x20, 0x00, 0x88, 0x47, 0, 0, 0, 0];
            p.extend_from_slice(&((label << 12) | 0x100 | 4).to_be_bytes());
            p.extend_from_slice(&inner(1024 + i as u16)[14..]);
            eth_ipv4(OUTER_DST, OUTER_SRC, (REMOTE, LOCAL), 47, &p)
        })
        .collect()
}

/// `mplsogre_frames` without the MPLS entry: GRE carries the IPv4 packet, to 192.168.2-5.16
/// as the labels vary.
fn gre_frames() -> Vec<Vec<u8>> {
    (0..FLOWS)
        .map(|i| {
            let mut p = vec![0x20, 0x00, 0x08, 0x00, 0, 0, 0, 0];
            p.extend_from_slice(&inner_to(1024 + i as u16, 2 + (i % 4) as u8)[14..]);
            eth_ipv4(OUTER_DST, OUTER_SRC, (REMOTE, LOCAL), 47, &p)
        })
        .collect()
}

/// A warm PMD: port 1 replays `frames`, port 2 is a sink, port 3 the tunnel port.
fn pmd(frames: Vec<Vec<u8>>, tunnel: TunnelKind, flows: &[(&str, &str)]) -> Pmd {
    pmd_with(frames, tunnel, flows, |_| {})
}

/// [`pmd`], with `prepare` run on the PMD before its ports and flows are added.
fn pmd_with(
    frames: Vec<Vec<u8>>,
    tunnel: TunnelKind,
    flows: &[(&str, &str)],
    prepare: impl FnOnce(&mut Pmd),
) -> Pmd {
    // Every flow comes round at least three times (a table and caches in their steady state,
    // not still growing: the connection cache is made larger, and empty, as the table grows).
    let warmup = (3 * frames.len() / 32).max(4000);
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    prepare(&mut pmd);
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(Replay {
            frames: frames.into(),
            next: 0,
            in_port: 1,
        }),
        cycles: 0,
    });
    pmd.add_txq(2, Box::new(Sink));
    pmd.add_port_txq(3, Box::new(Sink), Some(tunnel));
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p1", 2);
    names.insert(&tunnel.default_port_name(), 3);
    for (k, a) in flows {
        pmd.add_flow(parse_megaflow(&names, k, a).unwrap()).unwrap();
    }
    // Warm up: pools recycle, the EMC holds the flows (insertion is probabilistic).
    for _ in 0..warmup {
        pmd.poll_once();
    }
    // Everything forwarded: no packet missed the flows (a miss is a lost upcall here).
    let s = pmd.stats();
    assert!(
        s.tx_packets > 0 && s.lost_upcalls == 0,
        "not everything forwarded: {s:?}"
    );
    pmd
}

const POP_VXLAN: (&str, &str) = (
    "in_port(p0),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),ipv4(dst=10.1.2.8,proto=17,frag=no),udp(dst=4789)",
    "tnl_pop(vxlan_sys_4789)",
);

fn p2p_vxlan_frames() -> Pmd {
    pmd(
        vxlan_frames(),
        TunnelKind::VXLAN,
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "p1")],
    )
}

/// Two datapath passes over the VXLAN frames without decapsulating: `recirc`, then output.
fn vxlan_two_passes() -> Pmd {
    pmd(
        vxlan_frames(),
        TunnelKind::VXLAN,
        &[
            ("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "recirc(0x1)"),
            (
                "recirc_id(0x1),in_port(p0),eth_type(0x0800),ipv4(frag=no)",
                "p1",
            ),
        ],
    )
}

fn vxlan_decap() -> Pmd {
    pmd(
        vxlan_frames(),
        TunnelKind::VXLAN,
        &[
            POP_VXLAN,
            (
                "tunnel(tun_id=0x64,src=10.1.2.9,dst=10.1.2.8,tos=0,flags(-df+csum+key)),in_port(vxlan_sys_4789),eth(dst=52:54:00:a0:91:02),eth_type(0x0800),ipv4(dst=192.168.2.16,frag=no)",
                "set(eth(dst=52:54:00:a0:91:99)),p1",
            ),
        ],
    )
}

fn geneve_decap() -> Pmd {
    pmd(
        geneve_frames(),
        TunnelKind::GENEVE,
        &[
            (
                "in_port(p0),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),ipv4(dst=10.1.2.8,proto=17,frag=no),udp(dst=6081)",
                "tnl_pop(genev_sys_6081)",
            ),
            (
                "tunnel(tun_id=0x3,src=10.1.2.9,dst=10.1.2.8,tos=0,geneve({class=0x102,type=0x80,len=4,0x30002}),flags(-df+csum+key)),in_port(genev_sys_6081),eth(dst=52:54:00:a0:91:02),eth_type(0x0800),ipv4(frag=no)",
                "set(eth(dst=fa:16:3e:20:ab:99)),p1",
            ),
        ],
    )
}

fn mplsogre_decap() -> Pmd {
    let mut flows = vec![(
        "in_port(p0),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),ipv4(dst=10.1.2.8,proto=47,frag=no)".to_owned(),
        "tnl_pop(gre_sys)".to_owned(),
    )];
    for label in 812..816 {
        flows.push((
            format!(
                "tunnel(tun_id=0x0,src=10.1.2.9,dst=10.1.2.8,tos=0,flags(-df-csum+key)),in_port(gre_sys),packet_type(ns=1,id=0x8847),eth_type(0x8847),mpls(label={label}/0xfffff,tc=0/0,ttl=4/0x0,bos=1/1)"
            ),
            format!(
                "push_eth(src=00:00:00:00:00:00,dst=52:54:00:a0:91:{:02x}),pop_mpls(eth_type=0x800),p1",
                label - 812 + 0x10
            ),
        ));
    }
    let refs: Vec<(&str, &str)> = flows
        .iter()
        .map(|(k, a)| (k.as_str(), a.as_str()))
        .collect();
    pmd(mplsogre_frames(), TunnelKind::Gre, &refs)
}

/// `mplsogre_decap`'s pipeline without MPLS, as translation makes it for `gre_decap`: what
/// `pop_mpls` costs is the difference.
fn gre_decap() -> Pmd {
    let mut flows = vec![(
        "in_port(p0),eth(src=8c:dc:d4:ab:58:48,dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),ipv4(dst=10.1.2.8,proto=47,frag=no)".to_owned(),
        "tnl_pop(gre_sys)".to_owned(),
    )];
    for net in 2..6 {
        flows.push((
            format!(
                "tunnel(tun_id=0x0,src=10.1.2.9,dst=10.1.2.8,tos=0,flags(-df-csum+key)),in_port(gre_sys),packet_type(ns=1,id=0x800),eth_type(0x0800),ipv4(dst=192.168.{net}.16,frag=no)"
            ),
            format!(
                "push_eth(src=00:00:00:00:00:00,dst=52:54:00:a0:91:{:02x}),p1",
                net - 2 + 0x10
            ),
        ));
    }
    let refs: Vec<(&str, &str)> = flows
        .iter()
        .map(|(k, a)| (k.as_str(), a.as_str()))
        .collect();
    pmd(gre_frames(), TunnelKind::Gre, &refs)
}

/// The seeds' plain 64-byte frames, 1000 flows (UDP source ports).
fn plain_frames() -> Vec<Vec<u8>> {
    plain_frames_n(FLOWS)
}

/// The seeds' plain 64-byte frames, `n` flows: UDP source ports 1000 + i mod 60000,
/// destination ports 2000 + i div 60000.
fn plain_frames_n(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| inner_ports(1000 + (i % 60_000) as u16, 2000 + (i / 60_000) as u16, 2))
        .collect()
}

/// The anchor's `vxlan_encap` (VM -> Phy) as translation makes it: the VXLAN header pushed
/// (VNI 100, no outer UDP checksum, entropy source port) and output to the underlay port.
const PUSH_VXLAN: &str = "tnl_push(tnl_port(vxlan_sys_4789),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x64)),out_port(p1)),p1";

/// p2p on plain frames with `n` flows: the reference of `vxlan_encap_n`.
fn p2p_plain(n: usize) -> Pmd {
    pmd(
        plain_frames_n(n),
        TunnelKind::VXLAN,
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", "p1")],
    )
}

fn vxlan_encap(n: usize) -> Pmd {
    pmd(
        plain_frames_n(n),
        TunnelKind::VXLAN,
        &[("in_port(p0),eth_type(0x0800),ipv4(frag=no)", PUSH_VXLAN)],
    )
}

const PLAIN: &str = "in_port(p0),eth_type(0x0800),ipv4(frag=no)";

/// Two passes over plain frames (`recirc`, then output): the reference the `ct` pipelines are
/// compared with (their cost beyond it is conntrack's).
fn plain_two_passes() -> Pmd {
    let pass2 = format!("recirc_id(0x1),{PLAIN}");
    pmd(
        plain_frames(),
        TunnelKind::VXLAN,
        &[(PLAIN, "recirc(0x1)"), (&pass2, "p1")],
    )
}

/// The OVS anchor's `ct` pipeline as datapath flows: `ct`, recirculate, `ct(commit)` and
/// output for `+new` (one-way UDP stays `+new`); `first`/`commit` vary it for NAT; `n`
/// flows, one connection each.
fn ct_pipeline(first: &str, commit: &str, n: usize) -> Pmd {
    let (k1, k2, k3) = (
        format!("ct_state(-trk),{PLAIN}"),
        format!("ct_state(+new+trk),recirc_id(0x1),{PLAIN}"),
        format!("ct_state(+est+trk),recirc_id(0x1),{PLAIN}"),
    );
    let (a1, a2) = (format!("{first},recirc(0x1)"), format!("{commit},p1"));
    pmd(
        plain_frames_n(n),
        TunnelKind::VXLAN,
        &[(&k1, &a1), (&k2, &a2), (&k3, "p1")],
    )
}

/// `ct` with `n` connections: how its cost grows with the table.
fn ct_n(n: usize) -> Pmd {
    ct_pipeline("ct", "ct(commit)", n)
}

fn ct_nat_1000() -> Pmd {
    ct_pipeline("ct(nat)", "ct(commit,nat(src=10.2.0.1))", FLOWS)
}

/// `flowpath bench ct_ovn`'s megaflows, as translation makes them from its OpenFlow tables
/// (OVN's ACL pipeline of a logical switch, `CT_OVN_FLOWS` in `crates/flowpath`): `ct()` in
/// the inport's zone; the commit with the mark's blocked bit cleared and the label written,
/// then `ct()` in the outport's zone; its commit, and output. Four `ct()`s in three passes,
/// two connections per flow.
fn ct_ovn_1000() -> Pmd {
    const M: &str = "in_port(p0),packet_type(ns=0,id=0),eth_type(0x0800)";
    let state = "ct_state(+new-est-rel-rpl-inv+trk),ct_mark(0/0x1)";
    let (k1, k2, k3) = (
        format!("recirc_id(0),{M},ipv4(frag=no)"),
        format!("{state},recirc_id(0x1),{M},ipv4(proto=17,frag=no)"),
        format!("{state},recirc_id(0x2),{M},ipv4(proto=17,frag=no)"),
    );
    pmd(
        plain_frames(),
        TunnelKind::VXLAN,
        &[
            (&k1, "ct(zone=1),recirc(0x1)"),
            (
                &k2,
                "ct(commit,zone=1,mark=0/0x1,label=0x2a),ct(zone=2),recirc(0x2)",
            ),
            (&k3, "ct(commit,zone=2,mark=0/0x1,label=0x2a),p1"),
        ],
    )
}

/// `ct_1000` with zone 0's UDP timeouts at 0 s (`flowpath bench ct_setup`): every packet's
/// connection has expired when its flow comes round, so each packet sets up a new one (and
/// the PMD expires the one before): the cost of a connection setup.
fn ct_setup_1000() -> Pmd {
    use conntrack::TimeoutClass::{UdpFirst, UdpMultiple, UdpSingle};
    let ct = Arc::new(conntrack::Conntrack::new());
    ct.set_timeouts(Some(0), &[(UdpFirst, 0), (UdpSingle, 0), (UdpMultiple, 0)]);
    let (k1, k2) = (
        format!("ct_state(-trk),{PLAIN}"),
        format!("ct_state(+new+trk),recirc_id(0x1),{PLAIN}"),
    );
    let pmd = pmd_with(
        plain_frames(),
        TunnelKind::VXLAN,
        &[(&k1, "ct,recirc(0x1)"), (&k2, "ct(commit),p1")],
        |p| p.set_conntrack(ct.clone()),
    );
    assert_eq!(
        ct.stats().committed,
        pmd.stats().tx_packets,
        "a setup per packet"
    );
    pmd
}

#[library_benchmark]
#[bench::plain_two_passes(plain_two_passes())]
#[bench::ct_8(ct_n(8))]
#[bench::ct_1000(ct_n(1000))]
#[bench::ct_100000(ct_n(100_000))]
#[bench::ct_nat_1000(ct_nat_1000())]
#[bench::ct_ovn_1000(ct_ovn_1000())]
#[bench::ct_setup_1000(ct_setup_1000())]
#[bench::p2p_vxlan_frames(p2p_vxlan_frames())]
#[bench::vxlan_two_passes(vxlan_two_passes())]
#[bench::vxlan_decap(vxlan_decap())]
#[bench::geneve_decap(geneve_decap())]
#[bench::mplsogre_decap(mplsogre_decap())]
#[bench::gre_decap(gre_decap())]
#[bench::p2p_plain_8(p2p_plain(8))]
#[bench::vxlan_encap_8(vxlan_encap(8))]
#[bench::p2p_plain_1000(p2p_plain(1000))]
#[bench::vxlan_encap_1000(vxlan_encap(1000))]
fn pmd_iterations(mut pmd: Pmd) -> Pmd {
    for _ in 0..ITERATIONS {
        black_box(pmd.poll_once());
    }
    // Hand the PMD back so that tearing it down is not counted.
    pmd
}

library_benchmark_group!(name = decap; benchmarks = pmd_iterations);
main!(library_benchmark_groups = decap);
