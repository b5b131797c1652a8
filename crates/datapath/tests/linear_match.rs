//! The linear match: a port whose megaflows are few, of one mask and apart in one word is
//! looked up by a compare, without the EMC or dpcls; a packet it does not match is a miss. A
//! megaflow of another mask on the port puts its packets back on the EMC and dpcls, and
//! removing it brings the linear match back; unless the masks are a `ct()` pipeline's, one per
//! pass or per connection state of a pass, which keep the linear match, one compare a mask.

mod common;

use common::{Keep, fed_pmd, fed_pmd_with, udp_frame};
use datapath::dpif::parse_megaflow;
use datapath::packet::Packet;
use datapath::pmd::{DropUpcalls, Pmd, PmdConfig, UpcallHandler, UpcallResult};
use flow::odp::PortNames;

/// An IPv4/UDP frame from 10.0.0.1 to `dst`, UDP destination port `dport`.
fn frame(dst: u8, dport: u16) -> Vec<u8> {
    udp_frame(dst, dport, 0)
}

#[test]
fn a_port_with_few_megaflows_of_one_mask_skips_the_emc_and_misses_what_it_does_not_match() {
    let mut names = PortNames::new();
    for (n, p) in [("p0", 1), ("p1", 2), ("p2", 3)] {
        names.insert(n, p);
    }
    // To 10.0.0.2 (any port), to 10.0.0.3 (a megaflow added later), to 10.0.0.4 (none).
    let frames: Vec<Vec<u8>> = (0..30u16)
        .map(|i| frame(2 + (i % 3) as u8, 100 + i))
        .collect();
    // Every megaflow hit enters the EMC, so that the EMC's part shows at once.
    let config = PmdConfig {
        emc_insert_inv_prob: 1,
        ..PmdConfig::default()
    };
    let mut pmd = fed_pmd(config, frames.clone());
    let sinks = [Keep::default(), Keep::default()];
    pmd.add_txq(2, Box::new(sinks[0].clone()));
    pmd.add_txq(3, Box::new(sinks[1].clone()));
    let flow = |dst: u8, out: &str| {
        let m = format!("in_port(p0),eth_type(0x0800),ipv4(dst=10.0.0.{dst},frag=no)");
        parse_megaflow(&names, &m, out).unwrap()
    };
    let to =
        |dst: u8| -> Vec<Vec<u8>> { frames.iter().filter(|f| f[33] == dst).cloned().collect() };
    let take = |k: usize| sinks[k].take();

    pmd.add_flow(flow(2, "p1")).unwrap();
    pmd.poll_once();
    pmd.poll_once();
    let s = pmd.stats();
    assert_eq!(take(0), [to(2), to(2)].concat());
    assert_eq!((s.megaflow_hits, s.emc_hits, s.lost_upcalls), (20, 0, 40));
    assert_eq!(s.subtable_lookups, 20, "one compare a hit");

    // Two megaflows of one mask, apart in the IPv4 destination: still the linear match.
    pmd.add_flow(flow(3, "p2")).unwrap();
    pmd.clear_stats();
    for _ in 0..3 {
        pmd.poll_once();
    }
    let s = pmd.stats();
    let three = |d: u8| [to(d), to(d), to(d)].concat();
    assert_eq!((take(0), take(1)), (three(2), three(3)));
    assert_eq!((s.megaflow_hits, s.emc_hits, s.lost_upcalls), (60, 0, 30));
    assert_eq!(s.subtable_lookups, 60, "one compare a hit");

    // A megaflow of another mask: the EMC and dpcls (the EMC fills as they find packets).
    let other = || {
        let m = "in_port(p0),eth_type(0x0800),ipv4(dst=10.0.0.4,proto=17,frag=no)";
        parse_megaflow(&names, m, "p2").unwrap()
    };
    pmd.add_flow(other()).unwrap();
    pmd.clear_stats();
    for _ in 0..3 {
        pmd.poll_once();
    }
    let s = pmd.stats();
    assert_eq!(take(0), three(2));
    assert_eq!(take(1).len(), 60);
    assert_eq!(s.megaflow_hits + s.emc_hits, 90);
    assert!(s.emc_hits > 0, "{s:?}");

    // Gone again: the linear match, with both.
    pmd.del_flow(&other().m).unwrap();
    pmd.clear_stats();
    pmd.poll_once();
    let s = pmd.stats();
    assert_eq!((take(0), take(1)), (to(2), to(3)));
    assert_eq!((s.megaflow_hits, s.emc_hits, s.lost_upcalls), (20, 0, 10));

    // One: the linear match.
    pmd.del_flow(&flow(2, "p1").m).unwrap();
    pmd.clear_stats();
    pmd.poll_once();
    let s = pmd.stats();
    assert_eq!((take(0), take(1)), (vec![], to(3)));
    assert_eq!((s.megaflow_hits, s.emc_hits, s.lost_upcalls), (10, 0, 20));

    // The megaflow of another mask first: the two that came after it do not fit with it, and
    // are listed from the classifier when it goes.
    pmd.del_flow(&flow(3, "p2").m).unwrap();
    pmd.add_flow(other()).unwrap();
    pmd.add_flow(flow(2, "p1")).unwrap();
    pmd.add_flow(flow(3, "p2")).unwrap();
    pmd.clear_stats();
    pmd.poll_once();
    pmd.poll_once();
    assert!(pmd.stats().emc_hits > 0, "{:?}", pmd.stats());
    pmd.del_flow(&other().m).unwrap();
    let _ = (take(0), take(1));
    pmd.clear_stats();
    pmd.poll_once();
    let s = pmd.stats();
    assert_eq!((take(0), take(1)), (to(2), to(3)));
    assert_eq!((s.megaflow_hits, s.emc_hits, s.lost_upcalls), (20, 0, 10));
}

/// The anchor's `ct()` pipeline (three megaflows of three masks: the first pass's
/// `ct_state(-trk)`, the second's `+new` and `+est`), here looking at the destination too (the
/// anchor's own, which looks at no address, the simple match takes: `simple_match.rs`), takes
/// the linear match on both passes: no EMC, whatever the number of connections, and a packet
/// of no megaflow is a miss.
#[test]
fn a_ct_pipelines_passes_skip_the_emc() {
    let mut names = PortNames::new();
    names.insert("p0", 1);
    names.insert("p1", 2);
    // Ten connections (conntrack checks the IPv4 header's checksum).
    let frames: Vec<Vec<u8>> = (0..10u16)
        .map(|i| {
            let mut f = frame(2, 100 + i);
            let sum = !wire::checksum::data(&f[14..34]);
            f[24..26].copy_from_slice(&sum.to_be_bytes());
            f
        })
        .collect();
    let config = PmdConfig {
        emc_insert_inv_prob: 1,
        ..PmdConfig::default()
    };
    let mut pmd = fed_pmd(config, frames.clone());
    let sink = Keep::default();
    pmd.add_txq(2, Box::new(sink.clone()));
    let plain = "in_port(p0),eth_type(0x0800),ipv4(dst=10.0.0.2,frag=no)";
    for (k, a) in [
        (format!("ct_state(-trk),{plain}"), "ct,recirc(0x1)"),
        (
            format!("ct_state(+new+trk),recirc_id(0x1),{plain}"),
            "ct(commit),p1",
        ),
        (format!("ct_state(+est+trk),recirc_id(0x1),{plain}"), "p1"),
    ] {
        pmd.add_flow(parse_megaflow(&names, &k, a).unwrap())
            .unwrap();
    }
    for _ in 0..3 {
        pmd.poll_once();
    }
    let s = pmd.stats();
    assert_eq!(sink.take(), [&frames[..], &frames, &frames].concat());
    assert_eq!((s.megaflow_hits, s.emc_hits, s.lost_upcalls), (60, 0, 0));
    assert_eq!(s.subtable_lookups, 60, "one a hit");
}

/// Port p0 with a decap megaflow (so extracted without the hash), every EMC insert taken, a
/// sink on p1, the slow path `upcalls`, and ten frames of ten flows to 10.0.0.2 (UDP ports
/// 100-109), fed on every poll.
fn decap_port(upcalls: Box<dyn UpcallHandler>) -> (Pmd, Keep, PortNames, Vec<Vec<u8>>) {
    let mut names = PortNames::new();
    for (n, p) in [("p0", 1), ("p1", 2), ("vxlan", 9)] {
        names.insert(n, p);
    }
    let frames: Vec<Vec<u8>> = (0..10u16).map(|i| frame(2, 100 + i)).collect();
    let config = PmdConfig {
        emc_insert_inv_prob: 1,
        ..PmdConfig::default()
    };
    let mut pmd = fed_pmd_with(config, upcalls, frames.clone());
    let sink = Keep::default();
    pmd.add_txq(2, Box::new(sink.clone()));
    let decap = "in_port(p0),eth_type(0x0800),ipv4(dst=10.0.0.2,proto=17,frag=no),udp(dst=4789)";
    pmd.add_flow(parse_megaflow(&names, decap, "tnl_pop(vxlan)").unwrap())
        .unwrap();
    (pmd, sink, names, frames)
}

/// A port with a decap megaflow extracts its packets without the hash and hashes, for the
/// EMC, those the decap fast path does not find: ten flows of a plain megaflow beside the decap
/// one each get their own EMC entry (a missing or stale hash would put them all in one slot,
/// which keeps two).
#[test]
fn packets_the_decap_fast_path_does_not_find_are_hashed_for_the_emc() {
    let (mut pmd, sink, names, frames) = decap_port(Box::new(DropUpcalls));
    let plain =
        "in_port(p0),eth_type(0x0800),ipv4(dst=10.0.0.2,proto=17,frag=no),udp(dst=100/0xfff0)";
    pmd.add_flow(parse_megaflow(&names, plain, "p1").unwrap())
        .unwrap();
    pmd.poll_once();
    pmd.poll_once();
    let s = pmd.stats();
    assert_eq!(sink.take(), [frames.clone(), frames].concat());
    assert_eq!((s.megaflow_hits, s.emc_hits, s.decap_hits), (10, 10, 0));
}

/// Installs an exact megaflow sending the packet to port 2.
struct ExactToPort2;

impl UpcallHandler for ExactToPort2 {
    fn upcall(&mut self, _key: &flow::FlowKey, _pkt: &Packet) -> UpcallResult {
        let actions = vec![flow::odp::Action::Output(2)];
        let compiled = datapath::actions::compile(&actions).unwrap();
        UpcallResult::Install {
            mask: Box::new(flow::Mask::exact()),
            actions,
            compiled,
            packet_outs: Vec::new(),
            skb_priority_mask: 0,
        }
    }
}

/// On a port extracted without the hash (it has a decap megaflow), a megaflow an upcall
/// installs enters the EMC under the packet's hash, made from its key: ten new flows are ten
/// EMC hits the next time round.
#[test]
fn an_upcall_on_an_unhashed_pass_fills_the_emc_under_the_right_hash() {
    let (mut pmd, sink, _, frames) = decap_port(Box::new(ExactToPort2));
    pmd.poll_once();
    assert_eq!(pmd.stats().upcalls, 10);
    pmd.clear_stats();
    pmd.poll_once();
    let s = pmd.stats();
    assert_eq!(sink.take(), [frames.clone(), frames].concat());
    assert_eq!((s.emc_hits, s.megaflow_hits, s.upcalls), (10, 0, 0));
}
