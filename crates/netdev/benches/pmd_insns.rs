//! Instruction counts (valgrind/callgrind, via gungraun) of whole PMD iterations: replay rx
//! (copy into pool buffers), extraction, EMC, megaflow classifier, grouped actions, tx to a
//! sink. Each benchmark runs 32 iterations of a 32-packet burst (1024 packets) after a warm-up
//! in `setup`; divide by 1024 for instructions per packet (`scripts/insns-check` does).

use std::hint::black_box;

use datapath::dpif::parse_megaflow;
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::Port;
use flow::odp::PortNames;
use gungraun::{library_benchmark, library_benchmark_group, main};
use netdev::memory::{ReplayPort, SampleSpec, SinkPort, plain_frames};

const ITERATIONS: usize = 32;

fn pmd(flows: usize, key: &str, actions: &str, emc: u32) -> Pmd {
    let cfg = PmdConfig {
        emc_insert_inv_prob: emc,
        ..PmdConfig::default()
    };
    let mut pmd = Pmd::new(cfg, Box::new(DropUpcalls));
    let mut rp = ReplayPort::new("p0", "bench", plain_frames(flows, 64), 1);
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
    pmd.add_flow(parse_megaflow(&names, key, actions).unwrap())
        .unwrap();
    // Warm up: pools recycle, the EMC holds the flows (insertion is probabilistic).
    for _ in 0..(flows * 4).max(2000) {
        pmd.poll_once();
    }
    pmd
}

const L3_KEY: &str = "in_port(p0),eth(dst=8c:dc:d4:ab:5b:f0),eth_type(0x0800),ipv4(dst=10.1.0.0/255.255.0.0,frag=no)";
const L3_ACTIONS: &str = "set(eth(dst=52:54:00:00:00:01)),p1";

fn p2p(flows: usize) -> Pmd {
    pmd(
        flows,
        "in_port(p0),eth_type(0x0800),ipv4(frag=no)",
        "p1",
        100,
    )
}

fn p2p_l3(flows: usize) -> Pmd {
    pmd(flows, L3_KEY, L3_ACTIONS, 100)
}

fn p2p_l3_no_emc(flows: usize) -> Pmd {
    pmd(flows, L3_KEY, L3_ACTIONS, 0)
}

#[library_benchmark]
#[bench::p2p_1000(p2p(1000))]
#[bench::p2p_l3_1000(p2p_l3(1000))]
#[bench::p2p_l3_1000_emc_off(p2p_l3_no_emc(1000))]
fn pmd_iterations(mut pmd: Pmd) -> Pmd {
    for _ in 0..ITERATIONS {
        black_box(pmd.poll_once());
    }
    // Hand the PMD back so that tearing it down is not counted.
    pmd
}

library_benchmark_group!(name = pmd; benchmarks = pmd_iterations);
main!(library_benchmark_groups = pmd);
