//! The per-packet path allocates nothing once warm: pools recycle buffers and every batch keeps
//! its capacity. Counted with a global allocator that tallies allocations per thread, so tests
//! running side by side (and the harness thread) do not count into each other's figures.

use datapath::dpif::parse_megaflow;
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::Port;
use flow::odp::PortNames;
use hugemem::thread_allocs;
use netdev::memory::{ReplayPort, SampleSpec, SinkPort, plain_frames};

#[global_allocator]
static A: hugemem::CountingAlloc = hugemem::CountingAlloc;

#[test]
fn a_warm_pmd_allocates_nothing_per_packet() {
    // Several flows per burst, a header rewrite, a VLAN push and a recirculation: the paths
    // that move packets between batches.
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    let mut rp = ReplayPort::new("p0", "t", plain_frames(100, 64), 1);
    let mut sink = SinkPort::new("p1", SampleSpec::default());
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: rp.take_rxq(0, 1).unwrap(),
        cycles: 0,
    });
    pmd.add_txq(2, sink.open_txq());
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p1", 2);
    for (k, a) in [
        (
            "in_port(p0),eth_type(0x0800),ipv4(frag=no),udp(dst=2000)",
            "set(eth(dst=52:54:00:00:00:01)),push_vlan(vid=7,pcp=0),recirc(0x3)",
        ),
        (
            "recirc_id(0x3),in_port(p0),eth_type(0x8100),vlan(vid=7,pcp=0),encap(eth_type(0x0800))",
            "pop_vlan,p1",
        ),
    ] {
        pmd.add_flow(parse_megaflow(&names, k, a).unwrap()).unwrap();
    }
    let allocs = warm_allocs(&mut pmd, 5000, 1000);
    assert!(pmd.stats().tx_packets > 0);
    assert_eq!(
        allocs, 0,
        "{allocs} allocations in 1000 warm iterations (32000 packets)"
    );

    // Tunnel termination: tnl_pop (the decap fast path), the tunnel metadata into the next
    // pass's key and a recirculation that keeps it, a GENEVE option in the key.
    let seed = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap");
    for (pcap, kind, pop, inner) in [
        (
            "vxlan_l3vpn_8.pcap",
            datapath::tunnel::TunnelKind::VXLAN,
            "in_port(p0),eth_type(0x0800),ipv4(proto=17,frag=no),udp(dst=4789)",
            "tunnel(tun_id=0x64,src=10.1.2.9,dst=10.1.2.8,flags(-df+csum+key)),in_port(tnl),eth_type(0x0800),ipv4(frag=no)",
        ),
        (
            "geneve_8.pcap",
            datapath::tunnel::TunnelKind::GENEVE,
            "in_port(p0),eth_type(0x0800),ipv4(proto=17,frag=no),udp(dst=6081)",
            "tunnel(tun_id=0x3,geneve({class=0x102,type=0x80,len=4,0x30002}),flags(-df+csum+key)),in_port(tnl),eth_type(0x0800),ipv4(frag=no)",
        ),
    ] {
        let frames: Vec<Vec<u8>> = netdev::pcap::read_file(seed.join(pcap))
            .unwrap()
            .into_iter()
            .map(|r| r.data)
            .collect();
        let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
        let mut rp = ReplayPort::new("p0", "t", frames, 1);
        let mut sink = SinkPort::new("p1", SampleSpec::default());
        let mut tnl = datapath::tunnel::TunnelPort::new("tnl", kind);
        pmd.add_rxq(PolledRxq {
            port_no: 1,
            queue_id: 0,
            rxq: rp.take_rxq(0, 1).unwrap(),
            cycles: 0,
        });
        pmd.add_txq(2, sink.open_txq());
        pmd.add_port_txq(3, tnl.open_txq(), tnl.tunnel());
        let mut names = PortNames::new();
        names.insert("p0", 1);
        names.insert("p1", 2);
        names.insert("tnl", 3);
        for (k, a) in [
            (pop, "tnl_pop(tnl)"),
            (inner, "recirc(0x4)"),
            (&format!("recirc_id(0x4),{inner}"), "p1"),
        ] {
            pmd.add_flow(parse_megaflow(&names, k, a).unwrap()).unwrap();
        }
        let allocs = warm_allocs(&mut pmd, 5000, 1000);
        let s = pmd.stats();
        assert!(
            s.tnl_pops > 0 && s.tx_packets == s.tnl_pops,
            "{pcap}: {s:?}"
        );
        assert_eq!(
            allocs, 0,
            "{pcap}: {allocs} allocations in 1000 warm iterations"
        );
    }
}

/// VXLAN encapsulation as translation emits it for a tunnel output.
const VXLAN_PUSH: &str = "tnl_push(tnl_port(9),header(size=50,type=4,eth(dst=8c:dc:d4:ab:58:48,\
    src=8c:dc:d4:ab:5b:f0,dl_type=0x0800),ipv4(src=10.1.2.8,dst=10.1.2.9,proto=17,\
    tos=0,ttl=64,frag=0x4000),udp(src=0,dst=4789,csum=0x0),\
    vxlan(flags=0x8000000,vni=0x64)),out_port(0))";

/// A PMD polling `rxq` as port `p0` (1), with sinks `p1` (2) and `p2` (3), and one megaflow
/// for its IPv4 packets with `actions`. The sinks are returned to outlive the PMD.
fn two_sinks(rxq: Box<dyn datapath::port::RxQueue>, actions: &str) -> (Pmd, [SinkPort; 2]) {
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    let mut sinks = [
        SinkPort::new("p1", SampleSpec::default()),
        SinkPort::new("p2", SampleSpec::default()),
    ];
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq,
        cycles: 0,
    });
    let mut names = PortNames::new();
    names.insert("p0", 1);
    for (no, s) in (2..).zip(sinks.iter_mut()) {
        pmd.add_txq(no, s.open_txq());
        names.insert(s.name(), no);
    }
    let key = "in_port(p0),eth_type(0x0800),ipv4(frag=no)";
    pmd.add_flow(parse_megaflow(&names, key, actions).unwrap())
        .unwrap();
    (pmd, sinks)
}

/// Allocations of `measured` PMD iterations after `warm` ones, on this thread.
fn warm_allocs(pmd: &mut Pmd, warm: usize, measured: usize) -> u64 {
    for _ in 0..warm {
        pmd.poll_once();
    }
    let before = thread_allocs();
    for _ in 0..measured {
        pmd.poll_once();
    }
    thread_allocs() - before
}

#[test]
fn copies_for_clone_and_non_final_outputs_allocate_nothing_when_warm() {
    // Tunnel output followed by more actions (a clone around tnl_push, as translation emits
    // it), and an output that is not the last action: both work on copies of the group.
    let mut rp = ReplayPort::new("p0", "t", plain_frames(100, 64), 1);
    let (mut pmd, _sinks) = two_sinks(
        rp.take_rxq(0, 1).unwrap(),
        &format!("clone({VXLAN_PUSH},p1),p2,p1"),
    );
    let allocs = warm_allocs(&mut pmd, 5000, 1000);
    assert!(pmd.stats().tx_packets > 0);
    assert_eq!(
        allocs, 0,
        "{allocs} allocations in 1000 warm iterations of clone and copies"
    );
}

/// Delivers the same TCP super-frames over and over, as a `tap` with TSO would: copied into
/// (large) pool buffers, with `gso_size` set and the batch marked.
struct SuperFrames {
    frames: Vec<Vec<u8>>,
    mss: u16,
}

impl datapath::port::RxQueue for SuperFrames {
    fn recv(
        &mut self,
        pool: &mut datapath::packet::Pool,
        batch: &mut datapath::packet::Batch,
    ) -> usize {
        for f in &self.frames {
            let mut p = pool.packet_from(f, 1);
            p.meta.gso_size = self.mss;
            batch.push(p);
        }
        batch.mark_gso();
        self.frames.len()
    }
}

/// A TCP/IPv4 super-frame of `payload` bytes (flow `i`).
fn tcp_super_frame(i: u8, payload: usize) -> Vec<u8> {
    let mut f = vec![
        0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0,
    ];
    f.extend_from_slice(&((40 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, i, 10, 0, 0, 2]);
    f.extend_from_slice(&[0x9c, 0x40, 0x13, 0x89, 0, 0, 0, 1, 0, 0, 0, 1]);
    f.extend_from_slice(&[0x50, 0x18, 0x01, 0xf5, 0, 0, 0, 0]);
    f.extend((0..payload).map(|j| j as u8));
    f
}

#[test]
fn segmenting_super_frames_allocates_nothing_when_warm() {
    // Software segmentation for a port without TSO (p2), and before a tnl_push (in a clone,
    // to p1): segments are pool packets, super-frames sit in large pool buffers.
    let frames = (1..=3).map(|i| tcp_super_frame(i, 60_000)).collect();
    let (mut pmd, _sinks) = two_sinks(
        Box::new(SuperFrames { frames, mss: 1448 }),
        &format!("clone({VXLAN_PUSH},p1),p2"),
    );
    let allocs = warm_allocs(&mut pmd, 200, 200);
    let s = pmd.stats();
    // 60000 / 1448: 42 segments per super-frame, twice (p1 and p2).
    assert_eq!(s.gso_segments, 400 * 3 * 42 * 2, "{s:?}");
    assert_eq!(s.tx_packets, s.gso_segments);
    assert_eq!(
        allocs, 0,
        "{allocs} allocations in 200 warm iterations of segmentation"
    );
}
