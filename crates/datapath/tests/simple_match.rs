//! The simple match: megaflows that look at no packet field but the ethertype, VLAN TCI and
//! fragment flags are found from a packet's metadata once the frame is known to be of the
//! common shape (Ethernet, IPv4 without options, not a fragment), without its key, hash or the
//! EMC. Every packet must still go where its whole key says, whatever the mix of frames and
//! megaflows on the port, the flow statistics (TCP flags included) must be what the EMC path
//! credits, and the simple match must follow flow changes.

mod common;

use common::{Keep, fed_pmd};
use datapath::dpif::parse_megaflow;
use datapath::pmd::{Pmd, PmdConfig};
use flow::FlowKey;
use flow::odp::PortNames;

fn ipv4(proto: u8, vhl: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
    let opts = usize::from(vhl & 15) * 4 - 20;
    let tot = (20 + opts + l4.len()) as u16;
    f.extend_from_slice(&[vhl, 0]);
    f.extend_from_slice(&tot.to_be_bytes());
    f.extend_from_slice(&[0, 1]);
    f.extend_from_slice(&frag.to_be_bytes());
    f.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend(std::iter::repeat_n(1u8, opts));
    f.extend_from_slice(l4);
    f.resize(f.len().max(60), 0);
    f
}

/// A TCP header from port 1000 to 2000 with `flags`.
fn tcp(flags: u8) -> Vec<u8> {
    let mut h = vec![0x03, 0xe8, 0x07, 0xd0, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags];
    h.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    h
}

/// Frames of every shape: the simple match takes the first three.
fn frames() -> Vec<Vec<u8>> {
    let udp = [0x03, 0xe8, 0x07, 0xd0, 0, 12, 0, 0, 1, 2, 3, 4];
    let mut v = vec![
        ipv4(17, 0x45, 0, &udp),
        ipv4(6, 0x45, 0x4000, &tcp(0x02)),
        ipv4(47, 0x45, 0, &[0, 0, 0x08, 0x00]),
        // ICMP (its type and code take the general parser), an option, a first fragment, a
        // later fragment.
        ipv4(1, 0x45, 0, &[8, 0, 0, 0, 0, 1, 0, 1]),
        ipv4(17, 0x46, 0, &udp),
        ipv4(17, 0x45, 0x2000, &udp),
        ipv4(17, 0x45, 0x0010, &udp),
    ];
    // IPv6 / UDP.
    let mut v6 = vec![
        2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd, 0x60, 0, 0, 0, 0, 12, 17,
    ];
    v6.push(64);
    v6.extend_from_slice(&[0xfe; 32]);
    v6.extend_from_slice(&udp);
    v.push(v6);
    // ARP.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.resize(60, 0);
    v.push(arp);
    // The UDP frame with a VLAN tag.
    let plain = ipv4(17, 0x45, 0, &udp);
    let mut tagged = plain[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0, 0, 5]);
    tagged.extend_from_slice(&plain[12..]);
    v.push(tagged);
    // An IPv4 length past the frame's end, and a runt.
    let mut long = plain.clone();
    long[16..18].copy_from_slice(&200u16.to_be_bytes());
    v.push(long);
    v.push(plain[..20].to_vec());
    v
}

const SIMPLE: &str = "in_port(p0),eth_type(0x0800),ipv4(frag=no)";

/// The flows on `p0`: the simple one to `p1`, and ones the simple match cannot take.
fn flows(simple_action: &str) -> Vec<(&'static str, String)> {
    vec![
        (SIMPLE, simple_action.to_string()),
        ("in_port(p0),eth_type(0x0800),ipv4(frag=first)", "p2".into()),
        ("in_port(p0),eth_type(0x0800),ipv4(frag=later)", "p2".into()),
        ("in_port(p0),eth_type(0x86dd),ipv6(frag=no)", "p3".into()),
        ("in_port(p0),eth_type(0x0806)", "p3".into()),
    ]
}

fn names() -> PortNames {
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p1", 2);
    names.insert("p2", 3);
    names.insert("p3", 4);
    names
}

struct Rig {
    pmd: Pmd,
    sinks: Vec<(u32, Keep)>,
}

fn rig(frames: Vec<Vec<u8>>, flows: &[(&str, String)]) -> Rig {
    let mut pmd = fed_pmd(PmdConfig::default(), frames);
    let mut sinks = Vec::new();
    for port in 2..=4 {
        let k = Keep::default();
        pmd.add_txq(port, Box::new(k.clone()));
        sinks.push((port, k));
    }
    for (k, a) in flows {
        pmd.add_flow(parse_megaflow(&names(), k, a).unwrap())
            .unwrap();
    }
    Rig { pmd, sinks }
}

impl Rig {
    /// What each port was sent since the last call.
    fn take(&self) -> Vec<(u32, Vec<Vec<u8>>)> {
        self.sinks.iter().map(|(p, k)| (*p, k.take())).collect()
    }
}

/// Where the whole key of each frame says it goes: the output port of the one megaflow of
/// `flows` that matches it, as the EMC and dpcls would find it.
fn expected(frames: &[Vec<u8>], flows: &[(&str, String)]) -> Vec<(u32, Vec<Vec<u8>>)> {
    let parsed: Vec<_> = flows
        .iter()
        .map(|(k, a)| parse_megaflow(&names(), k, a).unwrap())
        .collect();
    let mut out: Vec<(u32, Vec<Vec<u8>>)> = (2..=4).map(|p| (p, Vec::new())).collect();
    for f in frames {
        let mut key = FlowKey::new();
        key.set_in_port(1);
        flow::extract(f, &mut key);
        let hits: Vec<_> = parsed.iter().filter(|m| m.m.matches(&key)).collect();
        assert!(hits.len() <= 1, "overlapping test flows");
        if let Some(m) = hits.first()
            && let [datapath::actions::DpAction::Output(p)] = &m.actions[..]
        {
            out[*p as usize - 2].1.push(f.clone());
        }
    }
    out
}

#[test]
fn every_packet_goes_where_its_whole_key_says() {
    let frames = frames();
    let flows = flows("p1");
    let mut r = rig(frames.clone(), &flows);
    let want = expected(&frames, &flows);
    // The simple megaflow takes, by its whole key, the plain frames and also the shapes the
    // simple match declines (an option, a tag, bad lengths): those must reach it through the
    // EMC and dpcls. Every port gets something, so the test covers what it means to.
    assert_eq!(want[0].1[..3], frames[..3]);
    assert!(want.iter().all(|(_, f)| f.len() > 1) && want[0].1.len() > 3);
    let others = (frames.len() - 3) as u64;
    for round in 1..=3u64 {
        r.pmd.poll_once();
        assert_eq!(r.take(), want, "round {round}");
        let s = r.pmd.stats();
        assert_eq!(s.simple_hits, 3 * round, "the plain IPv4 frames");
        assert_eq!(
            s.emc_hits + s.megaflow_hits,
            others * round,
            "the other shapes"
        );
        assert_eq!(s.upcalls + s.lost_upcalls, 0);
    }
    // The simple megaflow's statistics: its packets, bytes and TCP flags.
    let dump = r.pmd.dump();
    let simple = dump
        .iter()
        .find(|d| d.flow.actions[..] == [datapath::actions::DpAction::Output(2)])
        .unwrap();
    let bytes: usize = want[0].1.iter().map(Vec::len).sum();
    assert_eq!(simple.flow.stats.packets, 3 * want[0].1.len() as u64);
    assert_eq!(simple.flow.stats.bytes, 3 * bytes as u64);
    assert_eq!(simple.flow.stats.tcp_flags, 0x02, "the SYN");
}

#[test]
fn the_simple_match_follows_flow_changes() {
    let frames = frames();
    let mut r = rig(frames.clone(), &flows("p1"));
    // The frames the simple megaflow takes (3 of them through the simple match).
    let mine = expected(&frames, &flows("p1"))[0].1.len();
    r.pmd.poll_once();
    assert_eq!(r.pmd.stats().simple_hits, 3);
    let plain = |r: &Rig| r.take()[0].1.len();
    assert_eq!(plain(&r), mine);

    // Recirculating is the simple match's too (the next pass finds the keys without packet
    // fields by the simple match, or extracts them): the frames miss in the second pass,
    // which has no megaflow, and nothing reaches p1.
    let m = |a: &str| parse_megaflow(&names(), SIMPLE, a).unwrap();
    r.pmd.mod_flow(m("recirc(0x1)"), false).unwrap();
    let before = r.pmd.stats();
    r.pmd.poll_once();
    let s = r.pmd.stats();
    assert_eq!(s.simple_hits, 6);
    assert_eq!(plain(&r), 0);
    let missed = s.upcalls + s.lost_upcalls - before.upcalls - before.lost_upcalls;
    assert_eq!(
        missed, mine as u64,
        "the recirculated frames, in their second pass"
    );

    // Back to an output: simple again.
    r.pmd.mod_flow(m("p1"), false).unwrap();
    r.pmd.poll_once();
    assert_eq!(r.pmd.stats().simple_hits, 9);
    assert_eq!(plain(&r), mine);

    // Deleted: the frames miss.
    assert!(r.pmd.del_flow(&m("p1").m).is_some());
    let before = r.pmd.stats();
    r.pmd.poll_once();
    let s = r.pmd.stats();
    assert_eq!(s.simple_hits, 9);
    assert_eq!(plain(&r), 0);
    let missed = s.upcalls + s.lost_upcalls - before.upcalls - before.lost_upcalls;
    assert_eq!(missed, mine as u64);
}

/// A simple megaflow for a recirculation does not catch the first pass: only packets whose
/// metadata it matches are its.
#[test]
fn metadata_decides() {
    let frames = frames();
    let flows = vec![
        (SIMPLE, "recirc(0x7)".to_string()),
        (
            "recirc_id(0x7),in_port(p0),eth_type(0x0800),ipv4(frag=no)",
            "p2".into(),
        ),
    ];
    let mut r = rig(frames.clone(), &flows);
    r.pmd.poll_once();
    let got = r.take();
    let mine = expected(&frames, &self::flows("p1"))[0].1.clone();
    assert_eq!(got[1].1, mine);
    let s = r.pmd.stats();
    assert_eq!(s.simple_hits, 6, "the plain frames, in both passes");
    assert_eq!(s.recirculations, mine.len() as u64);
}

/// Recirculated packets of two recirculation ids in one batch: each goes by its own id's simple
/// megaflow, although the batch's first packet found the other one.
#[test]
fn a_batch_of_two_recirculation_ids() {
    let udp = [0x03, 0xe8, 0x07, 0xd0, 0, 12, 0, 0, 1, 2, 3, 4];
    let (u, t) = (ipv4(17, 0x45, 0, &udp), ipv4(6, 0x45, 0, &tcp(0x10)));
    let frames = vec![u.clone(), t.clone(), u.clone(), t.clone()];
    let flows = vec![
        (
            "in_port(p0),eth_type(0x0800),ipv4(proto=17,frag=no)",
            "recirc(0x1)".to_string(),
        ),
        (
            "in_port(p0),eth_type(0x0800),ipv4(proto=6,frag=no)",
            "recirc(0x2)".to_string(),
        ),
        (
            "recirc_id(0x1),in_port(p0),eth_type(0x0800),ipv4(frag=no)",
            "p1".into(),
        ),
        (
            "recirc_id(0x2),in_port(p0),eth_type(0x0800),ipv4(frag=no)",
            "p2".into(),
        ),
    ];
    let mut r = rig(frames, &flows);
    r.pmd.poll_once();
    let got = r.take();
    assert_eq!(got[0].1, vec![u.clone(), u]);
    assert_eq!(got[1].1, vec![t.clone(), t]);
    assert_eq!(r.pmd.stats().simple_hits, 8, "both passes");
}

/// A megaflow that pushes a tunnel header is the simple match's too (VM → tunnel, the
/// anchor's `vxlan_encap`): the UDP source port comes from the inner headers, not from the
/// hash the simple match does not compute. Every frame, whichever lookup found its megaflow,
/// leaves with what the action pushes on the frame alone.
#[test]
fn a_tunnel_push_is_simple_and_pushes_what_the_action_does() {
    let push = "tnl_push(tnl_port(9),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),vxlan(flags=0x8000000,vni=0x64)),out_port(2))";
    let frames = frames();
    let pushing = flows(&format!("{push},p1"));
    let mut r = rig(frames.clone(), &pushing);
    // What the action makes of each frame the megaflow takes by its whole key.
    let compiled =
        datapath::actions::compile(&flow::odp::parse_actions(push, &mut names()).unwrap()).unwrap();
    let datapath::actions::DpAction::TnlPush(t) = &compiled[0] else {
        panic!("not a push")
    };
    let want: Vec<Vec<u8>> = expected(&frames, &flows("p1"))[0]
        .1
        .iter()
        .map(|f| {
            let mut key = FlowKey::new();
            let ex = flow::extract(f, &mut key);
            let mut p = datapath::packet::Packet::from_slice(f);
            (p.meta.l3, p.meta.l4) = (ex.layers.l3, ex.layers.l4);
            datapath::rewrite::tnl_push(&mut p, t).unwrap();
            p.data().to_vec()
        })
        .collect();
    assert!(want.len() > 3, "plain frames and others");
    for round in 1..=2u64 {
        r.pmd.poll_once();
        assert_eq!(r.take()[0].1, want, "round {round}");
        assert_eq!(
            r.pmd.stats().simple_hits,
            3 * round,
            "the plain IPv4 frames"
        );
    }
}

/// `f` (from [`ipv4`]) with its IPv4 header checksum, and its TCP checksum if it is TCP, as
/// conntrack checks them.
fn checksummed(mut f: Vec<u8>) -> Vec<u8> {
    let hl = usize::from(f[14] & 15) * 4;
    let sum = !wire::checksum::data(&f[14..14 + hl]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    if f[23] == 6 {
        let tot = usize::from(u16::from_be_bytes([f[16], f[17]]));
        let l4 = 14 + hl..14 + tot;
        let pseudo = wire::checksum::pseudo_header_v4(
            &std::net::Ipv4Addr::new(f[26], f[27], f[28], f[29]),
            &std::net::Ipv4Addr::new(f[30], f[31], f[32], f[33]),
            wire::IpProtocol(6),
            (tot - hl) as u16,
        );
        let c = !wire::checksum::combine(&[pseudo, wire::checksum::data(&f[l4.clone()])]);
        f[l4.start + 16..l4.start + 18].copy_from_slice(&c.to_be_bytes());
    }
    f
}

/// The anchor's `ct()` pipeline with its second pass split by protocol: both passes look at
/// no packet field the simple match does not read, so it finds both, the second from the
/// first's keys (no packet field in them) by the packets' metadata and protocol. Every packet
/// goes by its own protocol wherever it is in the burst; a burst with a frame of another
/// shape (an IPv4 option), which the first pass extracts whole, goes right too.
#[test]
fn a_ct_pipelines_passes_are_found_by_the_simple_match_and_the_protocol() {
    let udp = [0x03, 0xe8, 0x07, 0xd0, 0, 12, 0, 0, 1, 2, 3, 4];
    let (u, t) = (
        checksummed(ipv4(17, 0x45, 0, &udp)),
        checksummed(ipv4(6, 0x45, 0x4000, &tcp(0x02))),
    );
    let opt = checksummed(ipv4(17, 0x46, 0, &udp));
    let pass = |p: &str| format!("recirc_id(0x1),in_port(p0),eth_type(0x0800),ipv4({p}frag=no)");
    let pipeline = [
        (
            format!("ct_state(-trk),{SIMPLE}"),
            "ct,recirc(0x1)".to_string(),
        ),
        (format!("ct_state(+trk),{}", pass("proto=17,")), "p1".into()),
        (format!("ct_state(+trk),{}", pass("proto=6,")), "p2".into()),
    ];
    let flows: Vec<(&str, String)> = pipeline
        .iter()
        .map(|(k, a)| (k.as_str(), a.clone()))
        .collect();
    for (burst, simple_share) in [
        (
            vec![u.clone(), t.clone(), u.clone(), t.clone(), t.clone()],
            1.0,
        ),
        (
            vec![t.clone(), u.clone(), opt.clone(), t.clone(), u.clone()],
            0.8,
        ),
    ] {
        let mut rig = rig(burst.clone(), &flows);
        for _ in 0..3 {
            rig.pmd.poll_once();
        }
        let by_proto = |p: u8| -> Vec<Vec<u8>> {
            let one: Vec<_> = burst.iter().filter(|f| f[23] == p).cloned().collect();
            [&one[..], &one, &one].concat()
        };
        assert_eq!(
            rig.take(),
            [(2, by_proto(17)), (3, by_proto(6)), (4, vec![])],
            "UDP to p1, TCP to p2, in order"
        );
        let s = rig.pmd.stats();
        assert_eq!(s.lost_upcalls, 0);
        let hits = (s.simple_hits + s.megaflow_hits + s.emc_hits) as f64;
        assert_eq!(hits, 30.0, "a hit a packet in each pass");
        assert_eq!(s.simple_hits as f64, 30.0 * simple_share, "{s:?}");
    }
}
