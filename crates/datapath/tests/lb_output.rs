//! `lb_output(ID)`: one megaflow spreads connections over a bond's members by their 5-tuple
//! hash, every packet of a connection to the same member, each bucket's packets counted; a
//! bucket without a member drops, an unknown bond sends nothing.

mod common;

use std::sync::Arc;
use std::sync::mpsc::channel;

use common::{Keep, fed_pmd, udp_frame};
use datapath::bond::{BUCKETS, NO_MEMBER};
use datapath::dpif::parse_megaflow;
use datapath::pmd::{Pmd, PmdCmd, PmdConfig};
use flow::odp::PortNames;

/// A PMD fed `frames` on port 1, bond 7 with even buckets on port 2 and odd on port 3
/// (`members` overrides), and one megaflow for every UDP frame with `actions`.
fn bonded(frames: Vec<Vec<u8>>, members: [u32; BUCKETS], actions: &str) -> (Pmd, [Keep; 2]) {
    let mut names = PortNames::new();
    for (n, p) in [("p0", 1), ("p1", 2), ("p2", 3)] {
        names.insert(n, p);
    }
    let mut pmd = fed_pmd(PmdConfig::default(), frames);
    let sinks = [Keep::default(), Keep::default()];
    pmd.add_txq(2, Box::new(sinks[0].clone()));
    pmd.add_txq(3, Box::new(sinks[1].clone()));
    let (done, _) = channel();
    pmd.handle(PmdCmd::SetBond(7, Some(Arc::new(members)), done));
    let m = "in_port(p0),eth_type(0x0800),ipv4(proto=17,frag=no)";
    pmd.add_flow(parse_megaflow(&names, m, actions).unwrap())
        .unwrap();
    (pmd, sinks)
}

fn alternating() -> [u32; BUCKETS] {
    std::array::from_fn(|i| 2 + (i % 2) as u32)
}

fn bucket_bytes(pmd: &mut Pmd) -> Vec<u64> {
    let (tx, rx) = channel();
    pmd.handle(PmdCmd::BondBytes(7, tx));
    rx.recv().unwrap().map(|b| b.to_vec()).unwrap_or_default()
}

#[test]
fn connections_spread_over_the_members_and_stay_on_theirs() {
    // 32 connections (by destination port), each twice.
    let frames: Vec<Vec<u8>> = (0..64u16)
        .map(|i| udp_frame(2, 100 + i % 32, i as u8))
        .collect();
    let (mut pmd, sinks) = bonded(frames.clone(), alternating(), "lb_output(7)");
    pmd.poll_once();
    pmd.poll_once();
    let (a, b) = (sinks[0].take(), sinks[1].take());
    assert_eq!(a.len() + b.len(), 64);
    assert!(a.len() >= 8 && b.len() >= 8, "{} {}", a.len(), b.len());
    let port_of = |f: &Vec<u8>| [f[36], f[37]];
    for f in &a {
        assert!(
            b.iter().all(|g| port_of(g) != port_of(f)),
            "a connection on both"
        );
    }
    assert_eq!(pmd.dump().len(), 1);
    let bytes = bucket_bytes(&mut pmd);
    assert_eq!(bytes.iter().sum::<u64>(), 64 * frames[0].len() as u64);
}

#[test]
fn a_bucket_without_member_drops_and_an_unknown_bond_sends_nothing() {
    let frames: Vec<Vec<u8>> = (0..16u16).map(|i| udp_frame(2, 100 + i, 0)).collect();
    let (mut pmd, sinks) = bonded(frames.clone(), [NO_MEMBER; BUCKETS], "lb_output(7)");
    pmd.poll_once();
    assert!(sinks[0].take().is_empty() && sinks[1].take().is_empty());
    assert_eq!(bucket_bytes(&mut pmd).iter().sum::<u64>(), 0);
    // Bond 8 is unknown: the next output still gets the packets.
    let (mut pmd, sinks) = bonded(frames, alternating(), "lb_output(8),3");
    pmd.poll_once();
    assert_eq!((sinks[0].take().len(), sinks[1].take().len()), (0, 16));
}

#[test]
fn an_output_that_is_not_the_last_sends_copies() {
    let frames: Vec<Vec<u8>> = (0..16u16).map(|i| udp_frame(2, 100 + i, 0)).collect();
    let (mut pmd, sinks) = bonded(frames, [2; BUCKETS], "lb_output(7),3");
    pmd.poll_once();
    assert_eq!((sinks[0].take().len(), sinks[1].take().len()), (16, 16));
}
