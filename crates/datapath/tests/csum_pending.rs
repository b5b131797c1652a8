//! Frames whose TCP or UDP checksum is pending (`datapath::csum_pending`) through a PMD: a
//! port that takes them so gets them still pending (no software pass); every other consumer
//! gets them with a right checksum, computed from the headers they leave with (after
//! `set_field`, NAT, a tunnel push). Checksums are checked with an independent decoder
//! (etherparse).

use std::sync::{Arc, Mutex};

use datapath::dpif::parse_megaflow;
use datapath::packet::{Batch, Packet, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::{RxQueue, TxQueue};
use datapath::tunnel::TunnelKind;
use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use flow::odp::PortNames;

/// Delivers its frames once, each marked by `mark` as its port would (by default with its
/// checksum pending, the batch marked).
struct MarkingRxq {
    frames: Vec<Vec<u8>>,
    mark: fn(&mut Packet, &mut Batch),
}

impl RxQueue for MarkingRxq {
    fn recv(&mut self, pool: &mut Pool, batch: &mut Batch) -> usize {
        let n = self.frames.len().min(batch.room());
        for f in self.frames.drain(..n) {
            let mut p = pool.packet_from(&f, 1);
            (self.mark)(&mut p, batch);
            batch.push(p);
        }
        n
    }
}

/// What a port that hands partial checksums over does to a frame.
fn mark_pending(p: &mut Packet, batch: &mut Batch) {
    p.meta.set_csum_pending(true);
    batch.mark_gso();
}

/// Frames a port was sent, each with whether its checksum was still pending.
type Frames = Vec<(Vec<u8>, bool)>;

/// What a port was sent.
type Sent = Arc<Mutex<Frames>>;

struct CaptureTxq {
    csum: bool,
    sent: Sent,
}

impl TxQueue for CaptureTxq {
    fn send(&mut self, batch: &mut Batch, pool: &mut Pool) {
        let mut s = self.sent.lock().unwrap();
        for p in batch.packets() {
            s.push((p.data().to_vec(), p.meta.csum_pending()));
        }
        pool.free_batch(batch);
    }
    fn tx_csum(&self) -> bool {
        self.csum
    }
}

/// A PMD receiving `frames` pending on port 1 (p0), with capturing ports 2 (p2, completes
/// nothing) and 3 (p3, takes pending checksums), and `flows`. Returns what p2 and p3 got.
fn run(frames: Vec<Vec<u8>>, flows: &[(&str, &str)]) -> (Frames, Frames) {
    run_marked(frames, mark_pending, flows)
}

/// [`run`] of frames that port 1 marks with `mark`.
fn run_marked(
    frames: Vec<Vec<u8>>,
    mark: fn(&mut Packet, &mut Batch),
    flows: &[(&str, &str)],
) -> (Frames, Frames) {
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: Box::new(MarkingRxq { frames, mark }),
        cycles: 0,
    });
    let (s2, s3) = (Sent::default(), Sent::default());
    for (port, csum, sent) in [(2, false, &s2), (3, true, &s3)] {
        let q = CaptureTxq {
            csum,
            sent: sent.clone(),
        };
        pmd.add_txq(port, Box::new(q));
    }
    // Port 9 ("vx"): a VXLAN tunnel port, for `tnl_pop(vx)`.
    let vx = CaptureTxq {
        csum: false,
        sent: Sent::default(),
    };
    pmd.add_port_txq(9, Box::new(vx), Some(TunnelKind::VXLAN));
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p2", 2);
    names.insert("p3", 3);
    names.insert("vx", 9);
    for (k, a) in flows {
        pmd.add_flow(parse_megaflow(&names, k, a).unwrap()).unwrap();
    }
    for _ in 0..5 {
        pmd.poll_once();
    }
    let take = |s: Sent| std::mem::take(&mut *s.lock().unwrap());
    (take(s2), take(s3))
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Tcp4,
    Udp4,
    Tcp6,
    Udp6,
}

const KINDS: [Kind; 4] = [Kind::Tcp4, Kind::Udp4, Kind::Tcp6, Kind::Udp6];

/// A 1500-byte-IP-packet frame of `kind` with a right checksum (etherparse's).
fn frame(kind: Kind) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let (ip, hdr) = match kind {
        Kind::Tcp4 | Kind::Udp4 => (eth.ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64), 20),
        Kind::Tcp6 | Kind::Udp6 => {
            let a = |x| [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, x];
            (eth.ipv6(a(1), a(2), 64), 40)
        }
    };
    let payload =
        |l4: usize| -> Vec<u8> { (0..1500 - hdr - l4).map(|i| (i * 7 + 3) as u8).collect() };
    let mut f = Vec::new();
    match kind {
        Kind::Tcp4 | Kind::Tcp6 => ip
            .tcp(40000, 80, 0x1000_0000, 1000)
            .syn()
            .write(&mut f, &payload(20))
            .unwrap(),
        Kind::Udp4 | Kind::Udp6 => ip.udp(40000, 53).write(&mut f, &payload(8)).unwrap(),
    }
    f
}

/// `frame(kind)` with its checksum field garbage: a pending checksum's field holds anything
/// (the pseudo-header sum, or whatever rewrites left).
fn pending(kind: Kind) -> Vec<u8> {
    let mut f = frame(kind);
    let at = field(&f);
    f[at..at + 2].copy_from_slice(&[0x12, 0x34]);
    f
}

/// Where frame `f`'s TCP or UDP checksum field is.
fn field(f: &[u8]) -> usize {
    let s = SlicedPacket::from_ethernet(f).unwrap();
    let l4 = match &s.net {
        Some(NetSlice::Ipv4(ip)) => 14 + ip.header().slice().len(),
        Some(NetSlice::Ipv6(ip)) => 14 + ip.header().slice().len(),
        _ => panic!("not IP"),
    };
    match s.transport {
        Some(TransportSlice::Tcp(_)) => l4 + 16,
        Some(TransportSlice::Udp(_)) => l4 + 6,
        _ => panic!("not TCP or UDP"),
    }
}

/// Whether frame `f`'s TCP or UDP checksum is right, by etherparse.
fn checksum_right(f: &[u8]) -> bool {
    let s = SlicedPacket::from_ethernet(f).unwrap();
    let want = match (&s.net, &s.transport) {
        (Some(NetSlice::Ipv4(ip)), Some(TransportSlice::Tcp(t))) => t
            .to_header()
            .calc_checksum_ipv4(&ip.header().to_header(), t.payload())
            .unwrap(),
        (Some(NetSlice::Ipv6(ip)), Some(TransportSlice::Tcp(t))) => t
            .to_header()
            .calc_checksum_ipv6(&ip.header().to_header(), t.payload())
            .unwrap(),
        (Some(NetSlice::Ipv4(ip)), Some(TransportSlice::Udp(u))) => u
            .to_header()
            .calc_checksum_ipv4(&ip.header().to_header(), u.payload())
            .unwrap(),
        (Some(NetSlice::Ipv6(ip)), Some(TransportSlice::Udp(u))) => u
            .to_header()
            .calc_checksum_ipv6(&ip.header().to_header(), u.payload())
            .unwrap(),
        _ => panic!("not TCP or UDP over IP"),
    };
    let at = field(f);
    u16::from_be_bytes([f[at], f[at + 1]]) == want
}

fn key(kind: Kind) -> &'static str {
    match kind {
        Kind::Tcp4 | Kind::Udp4 => "in_port(p0),eth_type(0x0800),ipv4(frag=no)",
        Kind::Tcp6 | Kind::Udp6 => "in_port(p0),eth_type(0x86dd),ipv6(frag=no)",
    }
}

#[test]
fn a_port_that_takes_pending_checksums_gets_them_pending_and_another_gets_them_completed() {
    for kind in KINDS {
        let (p2, p3) = run(vec![pending(kind)], &[(key(kind), "p3,p2")]);
        assert_eq!(p3.len(), 1, "{kind:?}");
        assert!(p3[0].1, "{kind:?}: still pending");
        assert_eq!(p3[0].0, pending(kind), "{kind:?}: untouched");
        assert_eq!(p2.len(), 1, "{kind:?}");
        assert!(!p2[0].1, "{kind:?}: completed");
        assert_eq!(p2[0].0, frame(kind), "{kind:?}");
        assert!(checksum_right(&p2[0].0), "{kind:?}");
    }
}

#[test]
fn rewrites_of_addresses_and_ports_leave_the_checksum_to_whoever_sends_the_frame() {
    for kind in KINDS {
        let (ip, l4) = match kind {
            Kind::Tcp4 => (
                "set(ipv4(src=10.9.0.1,dst=10.9.0.2))",
                "set(tcp(src=1,dst=2))",
            ),
            Kind::Udp4 => (
                "set(ipv4(src=10.9.0.1,dst=10.9.0.2))",
                "set(udp(src=1,dst=2))",
            ),
            Kind::Tcp6 => (
                "set(ipv6(src=fd09::1,dst=fd09::2))",
                "set(tcp(src=1,dst=2))",
            ),
            Kind::Udp6 => (
                "set(ipv6(src=fd09::1,dst=fd09::2))",
                "set(udp(src=1,dst=2))",
            ),
        };
        let actions = format!("{ip},{l4},p3,p2");
        let (p2, p3) = run(vec![pending(kind)], &[(key(kind), &actions)]);
        assert!(p3[0].1, "{kind:?}: still pending");
        assert!(!p2[0].1, "{kind:?}");
        assert!(checksum_right(&p2[0].0), "{kind:?}");
        let s = SlicedPacket::from_ethernet(&p2[0].0).unwrap();
        let ports = match s.transport {
            Some(TransportSlice::Tcp(t)) => (t.source_port(), t.destination_port()),
            Some(TransportSlice::Udp(u)) => (u.source_port(), u.destination_port()),
            _ => panic!(),
        };
        assert_eq!(ports, (1, 2), "{kind:?}: rewritten");
        // What a device completing p3's copy from its headers finds is right as well.
        let mut p = Packet::from_slice(&p3[0].0);
        assert!(datapath::csum_pending::complete(&mut p));
        assert_eq!(p.data(), &p2[0].0[..], "{kind:?}");
    }
}

#[test]
fn nat_of_a_pending_frame_gives_a_right_checksum() {
    for kind in [Kind::Tcp4, Kind::Udp4] {
        let k = key(kind);
        let tracked = format!("ct_state(+trk),recirc_id(0x1),{k}");
        let flows = [
            (k, "ct(commit,nat(src=10.2.0.1)),recirc(0x1)"),
            (tracked.as_str(), "p2"),
        ];
        let (p2, _) = run(vec![pending(kind)], &flows);
        assert_eq!(p2.len(), 1, "{kind:?}");
        let s = SlicedPacket::from_ethernet(&p2[0].0).unwrap();
        let Some(NetSlice::Ipv4(ip)) = &s.net else {
            panic!()
        };
        assert_eq!(ip.header().source(), [10, 2, 0, 1], "{kind:?}: NAT ran");
        assert!(checksum_right(&p2[0].0), "{kind:?}");
    }
}

#[test]
fn conntrack_takes_a_pending_checksum_as_valid() {
    for kind in KINDS {
        let k = key(kind);
        let new = format!("ct_state(+new+trk),recirc_id(0x1),{k}");
        let inv = format!("ct_state(+inv+trk),recirc_id(0x1),{k}");
        let flows = [
            (k, "ct,recirc(0x1)"),
            (new.as_str(), "p2"),
            (inv.as_str(), "p3"),
        ];
        let (p2, p3) = run(vec![pending(kind)], &flows);
        assert_eq!((p2.len(), p3.len()), (1, 0), "{kind:?}: +new, not +inv");
        assert!(checksum_right(&p2[0].0), "{kind:?}");
    }
}

#[test]
fn conntrack_takes_checksums_the_device_verified_and_checks_the_others() {
    // A device that verified a frame's checksums (DPDK's RX_*_CKSUM_GOOD) is trusted, as
    // OVS's conntrack trusts them: a frame whose checksum field is wrong but was marked good
    // is +new (the check it saves is a pass over the payload); unmarked, or with only the
    // IPv4 header's verified, it is +inv.
    use datapath::packet::{RX_CSUM_IP_GOOD, RX_CSUM_L4_GOOD};
    fn both(p: &mut Packet, _: &mut Batch) {
        p.meta.rx_csum = RX_CSUM_IP_GOOD | RX_CSUM_L4_GOOD;
    }
    fn ip_only(p: &mut Packet, _: &mut Batch) {
        p.meta.rx_csum = RX_CSUM_IP_GOOD;
    }
    fn none(_: &mut Packet, _: &mut Batch) {}
    type Mark = fn(&mut Packet, &mut Batch);
    let marks: [(Mark, bool, &str); 3] = [
        (both, true, "both good"),
        (ip_only, false, "IP good"),
        (none, false, "none"),
    ];
    for kind in KINDS {
        let k = key(kind);
        let new = format!("ct_state(+new+trk),recirc_id(0x1),{k}");
        let inv = format!("ct_state(+inv+trk),recirc_id(0x1),{k}");
        let flows = [
            (k, "ct,recirc(0x1)"),
            (new.as_str(), "p2"),
            (inv.as_str(), "p3"),
        ];
        for (mark, trusted, what) in marks {
            let (p2, p3) = run_marked(vec![pending(kind)], mark, &flows);
            let want = if trusted { (1, 0) } else { (0, 1) };
            assert_eq!((p2.len(), p3.len()), want, "{kind:?}, {what}");
        }
    }
}

#[test]
fn a_tunnel_push_encapsulates_a_completed_inner_checksum() {
    let push = "tnl_push(tnl_port(9),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,\
                src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,\
                tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),\
                vxlan(flags=0x8000000,vni=0x64)),out_port(0))";
    for kind in KINDS {
        let actions = format!("{push},p3");
        let (_, p3) = run(vec![pending(kind)], &[(key(kind), &actions)]);
        assert_eq!(p3.len(), 1, "{kind:?}");
        assert!(!p3[0].1, "{kind:?}: nothing pending after the push");
        let inner = &p3[0].0[50..];
        assert_eq!(inner, &frame(kind)[..], "{kind:?}");
    }
}

#[test]
fn a_tunnel_pop_of_a_frame_whose_outer_checksum_is_pending_checks_it_completed() {
    // A kernel VTEP's VXLAN frame over a veth: its outer UDP checksum partial
    // (TP_STATUS_CSUMNOTREADY), the inner frame whole. The pop verifies the outer checksum,
    // so it is completed first, in the decap fast path (the whole batch popped in place) as
    // in the actions; before, the fast path refused the frame (`tunnel_pop_error`).
    let inner = frame(Kind::Udp4);
    let mut vxlan = vec![0x08, 0, 0, 0, 0, 0, 100, 0];
    vxlan.extend_from_slice(&inner);
    let mut outer = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 9], [2, 0, 0, 0, 0, 1])
        .ipv4([10, 99, 0, 2], [10, 99, 0, 1], 64)
        .udp(40000, 4789)
        .write(&mut outer, &vxlan)
        .unwrap();
    let at = field(&outer);
    outer[at..at + 2].copy_from_slice(&[0x12, 0x34]);
    let decap = "in_port(p0),eth_type(0x0800),ipv4(dst=10.99.0.1,proto=17,frag=no),udp(dst=4789)";
    let flows = [
        (decap, "tnl_pop(vx)"),
        ("in_port(vx),eth_type(0x0800),ipv4(frag=no)", "p2"),
    ];
    let (p2, _) = run(vec![outer.clone(); 4], &flows);
    assert_eq!(p2.len(), 4, "every frame popped");
    for (f, pending) in &p2 {
        assert_eq!(*f, inner);
        assert!(!pending);
    }
}

#[test]
fn a_truncated_copy_is_of_the_completed_frame() {
    for kind in KINDS {
        let (p2, p3) = run(vec![pending(kind)], &[(key(kind), "trunc(100),p2,p3")]);
        assert_eq!(p2[0].0, frame(kind)[..100], "{kind:?}");
        assert!(!p3[0].1, "{kind:?}");
        assert_eq!(p3[0].0, frame(kind), "{kind:?}");
    }
}

#[test]
fn headers_that_stop_parsing_are_completed_before_the_action() {
    // An MPLS push hides the IP header: the checksum is completed first.
    for kind in [Kind::Tcp4, Kind::Udp6] {
        let (_, p3) = run(
            vec![pending(kind)],
            &[(
                key(kind),
                "push_mpls(label=7,tc=0,ttl=64,bos=1,eth_type=0x8847),p3",
            )],
        );
        assert!(!p3[0].1, "{kind:?}");
        let mut want = frame(kind);
        want.splice(12..14, [0x88, 0x47, 0, 0, 0x71, 64]);
        assert_eq!(p3[0].0, want, "{kind:?}");
    }
}

#[test]
fn a_vlan_pushed_past_the_tags_a_pending_checksum_is_found_behind_completes_it_first() {
    // Three tags: still found, handed on pending. A fourth: completed before it is pushed,
    // where it would otherwise leave with whatever its field held.
    for (pushes, pending_after) in [(3, true), (4, false)] {
        for kind in [Kind::Tcp4, Kind::Udp6] {
            let push = "push_vlan(vid=10,pcp=0),";
            let actions = format!("{}p3,p2", push.repeat(pushes));
            let (p2, p3) = run(vec![pending(kind)], &[(key(kind), &actions)]);
            let mut want = frame(kind);
            for _ in 0..pushes {
                want.splice(12..12, [0x81, 0x00, 0, 10]);
            }
            assert_eq!(p2[0].0, want, "{kind:?}, {pushes} tags: completed at p2");
            assert_eq!(p3[0].1, pending_after, "{kind:?}, {pushes} tags");
            if !pending_after {
                assert_eq!(p3[0].0, want, "{kind:?}, {pushes} tags: completed at p3");
            }
        }
    }
}
