//! `pmd-rxq-assign` and `dpif-netdev/pmd-rxq-rebalance` with two PMD threads: every rx queue is
//! polled by exactly one PMD before and after a rebalance, forwarding goes on across it, and no
//! packet that was received is lost in the handover.

use std::time::{Duration, Instant};

use datapath::dpif::{DatapathBuilder, DpConfig, RxqAssign};
use netdev::memory::{ReplayPort, SampleSpec, SinkPort, plain_frames};

/// The (port, queue) pairs `pmd-rxq-show` lists, per PMD.
fn shown_queues(show: &str) -> Vec<Vec<(String, u32)>> {
    let mut pmds = Vec::new();
    for line in show.lines() {
        if line.starts_with("pmd thread") {
            pmds.push(Vec::new());
        } else if let Some(rest) = line.trim().strip_prefix("port: ") {
            let mut w = rest.split_whitespace();
            let name = w.next().unwrap().to_owned();
            assert_eq!(w.next(), Some("queue-id:"), "{line}");
            let q = w.next().unwrap().parse().unwrap();
            pmds.last_mut().expect("a pmd line first").push((name, q));
        }
    }
    pmds
}

fn sink_tx(dp: &datapath::dpif::Datapath) -> u64 {
    dp.port_counters("s").unwrap().tx_packets
}

fn wait_for_more(dp: &datapath::dpif::Datapath, than: u64) -> u64 {
    let t = Instant::now();
    loop {
        let n = sink_tx(dp);
        if n > than + 10_000 {
            return n;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "forwarding stalled at {n}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn rebalance_moves_queues_keeps_forwarding_and_loses_nothing() {
    for algo in [RxqAssign::Cycles, RxqAssign::Group, RxqAssign::RoundRobin] {
        let cfg = DpConfig {
            pmd_cores: vec![None, None],
            rxq_assign: algo,
            ..DpConfig::default()
        };
        let mut b = DatapathBuilder::new(cfg);
        let frames = plain_frames(64, 64);
        b.add_port(1, Box::new(ReplayPort::new("a", "gen", frames.clone(), 3)))
            .unwrap();
        b.add_port(2, Box::new(ReplayPort::new("b", "gen", frames, 1)))
            .unwrap();
        b.add_port(3, Box::new(SinkPort::new("s", SampleSpec::default())))
            .unwrap();
        // Port a's packets are forwarded, port b's miss and are dropped: unequal queue loads.
        b.add_flow("in_port(a),eth_type(0x0800),ipv4(frag=no)", "s")
            .unwrap();
        let mut dp = b.start().unwrap();

        let before = shown_queues(&dp.pmd_rxq_show());
        assert_eq!(before.len(), 2, "{algo:?}");
        let mut all: Vec<_> = before.concat();
        all.sort();
        let expect = vec![
            ("a".to_owned(), 0),
            ("a".to_owned(), 1),
            ("a".to_owned(), 2),
            ("b".to_owned(), 0),
        ];
        assert_eq!(all, expect, "{algo:?}: every queue once");

        let n = wait_for_more(&dp, 0);
        let moved = dp.rxq_rebalance();
        let after = shown_queues(&dp.pmd_rxq_show());
        let mut all: Vec<_> = after.concat();
        all.sort();
        assert_eq!(
            all, expect,
            "{algo:?}: every queue once after rebalance\n{moved}"
        );
        wait_for_more(&dp, n);

        // After the stop, every packet port a delivered reached the sink: none was lost when
        // its queues changed threads.
        let ports = dp.stop();
        let counters = |name: &str| {
            let (_, p) = ports.iter().find(|(_, p)| p.name() == name).unwrap();
            p.counters()
        };
        let (a, s) = (counters("a"), counters("s"));
        assert!(a.rx_packets > 0);
        assert_eq!(a.rx_packets, s.tx_packets, "{algo:?}");
    }
}
