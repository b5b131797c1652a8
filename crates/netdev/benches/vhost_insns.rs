//! Instruction counts (valgrind/callgrind, via gungraun) of the switch's side of a PVP round
//! trip over vhost-user: a PMD polls a `vhostuser` port whose guest is flowpath's own
//! `virtio_user` driver in this process, takes the guest's transmitted burst, looks it up
//! (one megaflow: back out of the same port) and copies it into the guest's receive ring.
//! Only the switch's polls of the measured rounds are counted (the guest's side is not the
//! switch's cost); each benchmark runs 32 iterations of a 32-frame burst (1024 frames), so
//! `scripts/insns-check` divides by 1024 for instructions per frame, each frame crossing the
//! switch once each way of the guest's rings. 64-byte frames only: a longer frame's copy
//! into the guest is `memcpy` or `rep movsb` as the tx queue's timed trial chooses
//! (`vhost::copy`), which would make the count depend on timing.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use datapath::dpif::parse_megaflow;
use datapath::packet::{Batch, MAX_BURST, Pool};
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, PolledRxq};
use datapath::port::{Port, RxQueue, TxQueue};
use flow::odp::PortNames;
use gungraun::{
    Callgrind, EntryPoint, LibraryBenchmarkConfig, library_benchmark, library_benchmark_group, main,
};
use netdev::memory::plain_frames;
use netdev::vhost::{VhostOptions, VhostPort};
use netdev::virtio_user::{VirtioUserOptions, VirtioUserPort};

const ITERATIONS: usize = 32;

/// The switch with its vhost port, and the guest's driver with its queues.
struct Pvp {
    pmd: Pmd,
    guest_rx: Box<dyn RxQueue>,
    guest_tx: Box<dyn TxQueue>,
    frames: Vec<Vec<u8>>,
    pool: Pool,
    batch: Batch,
    next: usize,
    // Kept open for the run; dropped after it.
    _ports: (VhostPort, VirtioUserPort),
    _dir: PathBuf,
}

impl Pvp {
    /// The guest sends a burst, the switch polls once (through [`switch_poll`], which alone
    /// is counted, when `measured`), the guest takes what came back.
    fn round(&mut self, measured: bool) {
        for _ in 0..MAX_BURST {
            let f = &self.frames[self.next % self.frames.len()];
            self.next += 1;
            let p = self.pool.packet_from(f, 0);
            self.batch.push(p);
        }
        self.guest_tx.send(&mut self.batch, &mut self.pool);
        self.pool.free_batch(&mut self.batch);
        if measured {
            black_box(switch_poll(&mut self.pmd));
        } else {
            black_box(self.pmd.poll_once());
        }
        self.guest_rx.recv(&mut self.pool, &mut self.batch);
        self.pool.free_batch(&mut self.batch);
    }
}

/// The switch's poll in a measured round: the benchmarks' entry point, so that neither the
/// guest's side nor the warm-up's polls are counted.
#[inline(never)]
fn switch_poll(pmd: &mut Pmd) -> usize {
    pmd.poll_once()
}

fn pvp(flows: usize, size: usize) -> Pvp {
    let dir = std::env::temp_dir().join(format!("fp-vhost-insns-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("vm.sock");
    let mut o = VhostOptions::for_kind("vhostuser").unwrap();
    o.path = Some(sock.clone());
    let mut be = VhostPort::open("v", o).unwrap();
    let mut vu = VirtioUserPort::open("vm", VirtioUserOptions::new(&sock)).unwrap();
    let t = Instant::now();
    while !(vu.active_queues() == 1 && be.started_vrings() == 2) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the rings never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut pmd = Pmd::new(PmdConfig::default(), Box::new(DropUpcalls));
    pmd.add_rxq(PolledRxq {
        port_no: 1,
        queue_id: 0,
        rxq: be.take_rxq(0, 1).unwrap(),
        cycles: 0,
    });
    pmd.add_txq(1, be.open_txq());
    let mut names = PortNames::new();
    names.insert("v", 1);
    pmd.add_flow(parse_megaflow(&names, "in_port(v),eth_type(0x0800),ipv4(frag=no)", "v").unwrap())
        .unwrap();
    let guest_rx = vu.take_rxq(0, 1).unwrap();
    let guest_tx = vu.open_txq();
    let mut p = Pvp {
        pmd,
        guest_rx,
        guest_tx,
        frames: plain_frames(flows, size),
        pool: Pool::new(1024, 256),
        batch: Batch::new(),
        next: 0,
        _ports: (be, vu),
        _dir: dir,
    };
    // Warm up: pools recycle, the EMC holds the flows, the tx queue's trial of copy
    // strategies ends (2048 sends).
    for _ in 0..(flows * 2).max(2100) {
        p.round(false);
    }
    p
}

#[library_benchmark(
    config = LibraryBenchmarkConfig::default()
        .tool(Callgrind::default()
            .entry_point(EntryPoint::Custom("*vhost_insns::switch_poll*".to_owned())))
)]
#[bench::pvp_64b_1000(pvp(1000, 64))]
fn pvp_rounds(mut p: Pvp) -> Pvp {
    for _ in 0..ITERATIONS {
        p.round(true);
    }
    p
}

library_benchmark_group!(name = vhost; benchmarks = pvp_rounds);
main!(library_benchmark_groups = vhost);
