//! A pass's packets are grouped by megaflow: groups run in order of first appearance, each
//! group's packets in arrival order, and each megaflow's statistics count its own packets,
//! however the flows interleave in the burst.

mod common;

use common::{Keep, fed_pmd, udp_frame};
use datapath::dpif::parse_megaflow;
use datapath::pmd::{Pmd, PmdConfig};
use flow::odp::PortNames;

/// An IPv4/UDP frame to port `dport`, numbered `seq` in its payload.
fn frame(dport: u16, seq: u8) -> Vec<u8> {
    udp_frame(2, dport, seq)
}

#[test]
fn interleaved_flows_keep_their_order_and_their_counts() {
    let mut names = PortNames::new();
    for (n, p) in [("p0", 1), ("p1", 2), ("p2", 3)] {
        names.insert(n, p);
    }
    // A different megaflow for each of 5 destination ports (32 frames, every interleaving of
    // them in turn): 1 and 2 go to p1, 3 and 4 to p2, 5 to both.
    let outs = ["p1", "p1", "p2", "p2", "p1,p2"];
    let order: Vec<u16> = (0..32u16).map(|i| 1 + (i * 7 + i / 5) % 5).collect();
    let frames: Vec<Vec<u8>> = order
        .iter()
        .enumerate()
        .map(|(i, &d)| frame(d, i as u8))
        .collect();
    let mut pmd = fed_pmd(PmdConfig::default(), frames.clone());
    let sinks = [Keep::default(), Keep::default()];
    pmd.add_txq(2, Box::new(sinks[0].clone()));
    pmd.add_txq(3, Box::new(sinks[1].clone()));
    for (d, out) in (1..=5u16).zip(outs) {
        let m = format!("in_port(p0),eth_type(0x0800),ipv4(proto=17,frag=no),udp(dst={d})");
        pmd.add_flow(parse_megaflow(&names, &m, out).unwrap())
            .unwrap();
    }
    pmd.poll_once();
    // Groups in order of first appearance, each in arrival order.
    let mut firsts: Vec<u16> = Vec::new();
    for &d in &order {
        if !firsts.contains(&d) {
            firsts.push(d);
        }
    }
    for (k, sink) in sinks.iter().enumerate() {
        let port = ["p1", "p2"][k];
        let want: Vec<Vec<u8>> = firsts
            .iter()
            .filter(|&&d| outs[usize::from(d) - 1].contains(port))
            .flat_map(|&d| {
                frames
                    .iter()
                    .zip(&order)
                    .filter(move |(_, o)| **o == d)
                    .map(|(f, _)| f.clone())
            })
            .collect();
        assert_eq!(sink.take(), want, "{port}");
    }
    for d in pmd.dump() {
        let dport = d.flow.m.key().tp_dst();
        let n = order.iter().filter(|&&o| o == dport).count() as u64;
        assert_eq!(d.flow.stats.packets, n, "udp dst {dport}");
    }
    assert_eq!(pmd.dump().len(), 5);
}

/// The stages are timed one iteration in [`STAGE_SAMPLE`], each sample counted that many
/// times; the upcall stage whenever upcalls run; busy cycles and packets every iteration.
#[test]
fn stages_are_timed_one_iteration_in_eight() {
    use datapath::pmd::{STAGE_SAMPLE, Stage};
    let frames: Vec<Vec<u8>> = (0..4).map(|i| frame(1, i)).collect();
    let mut pmd = fed_pmd(PmdConfig::default(), frames);
    let mut names = PortNames::new();
    names.insert("p0", 1);
    let stages = |pmd: &Pmd| {
        let s = pmd.stats();
        Stage::ALL.map(|st| s.stage_cycles[st as usize])
    };
    // No megaflow: every packet an upcall (which DropUpcalls loses), timed every time.
    let upcall = Stage::Upcall as usize;
    let mut last = stages(&pmd);
    for i in 0..2 * STAGE_SAMPLE {
        let busy = pmd.stats().busy_cycles;
        pmd.poll_once();
        let now = stages(&pmd);
        assert!(pmd.stats().busy_cycles > busy, "iteration {i}");
        assert!(now[upcall] > last[upcall], "iteration {i}: the upcalls");
        for st in Stage::ALL {
            let k = st as usize;
            if k != upcall {
                let timed = i.is_multiple_of(STAGE_SAMPLE);
                assert_eq!(now[k] > last[k], timed, "iteration {i}, {}", st.name());
                if timed {
                    assert_eq!((now[k] - last[k]) % STAGE_SAMPLE, 0, "{}", st.name());
                }
            }
        }
        last = now;
    }
    assert_eq!(pmd.stats().lost_upcalls, 4 * 2 * STAGE_SAMPLE);
}
