//! A balanced bond's bucket loads count the packet whose miss installed a megaflow, as OVS's
//! translation with statistics does (`bond_account()`), not only the packets that hit it.

mod common;

use ofproto::bond::{BondConfig, BondMode};

#[test]
fn a_missed_packet_counts_for_its_bucket_load() {
    let of = common::switch_with_flows(3, &["actions=NORMAL"]);
    let mac = |n: u8| flow::EthAddr([2, 0, 0, 0, 0, n]);
    let c = BondConfig::new(
        "bond0",
        BondMode::BalanceSlb,
        &[("p1", mac(1)), ("p2", mac(2))],
    );
    assert!(of.set_bonds("br0", vec![c]).unwrap());
    // From p3 to an unknown address: flooded, to the bond through the bucket of its source.
    let frame = [[0x50, 0x54, 0, 0, 0, 9], [0x50, 0x54, 0, 0, 0, 3]].concat();
    let frame = [frame.as_slice(), &[0x88, 0xb5], &[0u8; 46]].concat();
    let pkt = datapath::packet::Packet::from_slice(&frame);
    let mut key = flow::FlowKey::new();
    flow::extract(&frame, &mut key);
    key.set_in_port(3);
    let mut h = of.upcall_handler();
    for _ in 0..3 {
        let _ = h.upcall(&key, &pkt);
    }
    of.settle_credits();
    let load: u64 = of.bonds()[0].load.iter().sum();
    assert_eq!(load, 3 * frame.len() as u64);
    let loaded = of.bonds()[0].load.iter().filter(|&&l| l > 0).count();
    assert_eq!(loaded, 1, "one bucket: the source's");
}
