//! The slow path's time budget: while a PMD forwards cached traffic, misses beyond the budget
//! wait in a queue (and their port is not polled while its share of the queue is full) instead
//! of being dropped. So a finite source of new flows loses nothing and keeps its order, and the
//! cached traffic keeps flowing meanwhile.

use std::time::{Duration, Instant};

use datapath::dpif::{DatapathBuilder, DpConfig};
use datapath::packet::Packet;
use datapath::pmd::{UpcallHandler, UpcallResult};
use flow::odp::Action;
use flow::{FlowKey, Mask};
use netdev::memory::{ReplayPort, SampleSpec, SinkPort, plain_frames};
use netdev::pcap::{PcapWriter, read_file};
use netdev::pcap_port::PcapPort;

/// Installs an exact megaflow sending the packet to port 3.
struct ExactToPort3;

impl UpcallHandler for ExactToPort3 {
    fn upcall(&mut self, _key: &FlowKey, _pkt: &Packet) -> UpcallResult {
        let actions = vec![Action::Output(3)];
        let compiled = datapath::actions::compile(&actions).unwrap();
        UpcallResult::Install {
            mask: Box::new(Mask::exact()),
            actions,
            compiled,
            packet_outs: Vec::new(),
            skb_priority_mask: 0,
        }
    }
}

#[test]
fn misses_over_budget_wait_in_order_and_none_is_lost() {
    let dir = std::env::temp_dir().join(format!("flowpath-budget-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // 1000 new flows, each a miss.
    let frames = plain_frames(1000, 64);
    let input = dir.join("new.pcap");
    let mut w = PcapWriter::create(&input).unwrap();
    for f in &frames {
        w.write(0, f).unwrap();
    }
    drop(w);
    let output = dir.join("out.pcap");

    let mut cfg = DpConfig::default();
    // A tight budget, so that the cached traffic's presence makes misses wait.
    cfg.pmd.upcall_share_pct = 2;
    let mut b = DatapathBuilder::new(cfg);
    b.set_upcall(Box::new(|| {
        Box::new(ExactToPort3) as Box<dyn UpcallHandler>
    }));
    b.add_port(
        1,
        Box::new(PcapPort::open("new", Some(&input), None).unwrap()),
    )
    .unwrap();
    b.add_port(
        2,
        Box::new(ReplayPort::new("cached", "gen", plain_frames(8, 64), 1)),
    )
    .unwrap();
    b.add_port(
        3,
        Box::new(PcapPort::open("out", None, Some(&output)).unwrap()),
    )
    .unwrap();
    b.add_port(4, Box::new(SinkPort::new("sink", SampleSpec::default())))
        .unwrap();
    b.add_flow("in_port(cached),eth_type(0x0800),ipv4(frag=no)", "sink")
        .unwrap();
    let dp = b.start().unwrap();
    let t = Instant::now();
    loop {
        let out = dp.port_counters("out").unwrap().tx_packets;
        if out >= frames.len() as u64 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "only {out} forwarded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = dp.total_stats();
    let sink = dp.port_counters("sink").unwrap().tx_packets;
    drop(dp.stop());

    assert_eq!(stats.lost_upcalls, 0);
    assert!(
        stats.deferred_upcalls > 0,
        "the budget never made a miss wait"
    );
    assert!(sink > 10_000, "cached traffic stalled: {sink}");
    let got: Vec<Vec<u8>> = read_file(&output)
        .unwrap()
        .into_iter()
        .map(|r| r.data)
        .collect();
    assert_eq!(got.len(), frames.len());
    assert!(got == frames, "the new flows' packets came out reordered");
    let _ = std::fs::remove_dir_all(&dir);
}
