//! A tagged packet's megaflow matches its VLAN ID and CFI, as OVS's userspace datapath makes
//! it (`dpif-netdev.c`: a megaflow that does not match the TCI gets VID and CFI exact, since
//! the datapath key cannot say "any tag or none"). Expected text: OVS 3.1's `dpif/dump-flows`
//! for `in_port=1,actions=output:2` after one packet tagged VLAN 1000, PCP 5:
//! `recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),vlan(vid=1000,pcp=5/0x0),
//! encap(eth_type(0x0800),ipv4(frag=no)), ... actions:2`.

use std::sync::Arc;

use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;

fn switch(flows: &str) -> Arc<Ofproto> {
    let of = Ofproto::new();
    of.add_bridge("br0").unwrap();
    for (n, o) in [("p1", 1), ("p2", 2)] {
        let port = OfPort {
            name: n.into(),
            ofport: o,
            dp_port: Some(o),
            peer: None,
            vlan: VlanMode::default(),
        };
        of.add_port("br0", port).unwrap();
    }
    of.add_flows("br0", flows).unwrap();
    of
}

/// A UDP frame from 50:54:00:00:00:01, tagged with `tci` when it is not zero.
fn frame(tci: u16) -> Vec<u8> {
    let mut f = vec![0x50, 0x54, 0, 0, 0, 2, 0x50, 0x54, 0, 0, 0, 1];
    if tci != 0 {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[
        0x45, 0, 0, 28, 0, 1, 0, 0, 33, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
    f
}

/// The megaflows the datapath installs for `frames` received on port 1.
fn megaflows(flows: &str, frames: Vec<Vec<u8>>) -> String {
    use datapath::dpif::{DatapathBuilder, DpConfig};
    use netdev::memory::{ReplayPort, SampleSpec, SinkPort};
    use std::time::{Duration, Instant};

    let of = switch(flows);
    let mut b = DatapathBuilder::new(DpConfig::default());
    let o = of.clone();
    b.set_upcall(Box::new(move || o.upcall_handler()));
    b.add_port(1, Box::new(ReplayPort::new("p1", "gen", frames, 1)))
        .unwrap();
    let keep = SampleSpec { max: 0, every: 1 };
    b.add_port(2, Box::new(SinkPort::new("p2", keep))).unwrap();
    let mut dp = b.start().unwrap();
    let t = Instant::now();
    while dp.port_counters("p2").unwrap().tx_packets < 1000 {
        assert!(t.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(10));
    }
    // What the revalidator makes of them: nothing stale.
    let r = of.revalidate(&mut dp);
    assert_eq!(r.removed, 0, "{r:?}");
    let dump = dp.dump_flows(false);
    drop(dp.stop());
    dump
}

#[test]
fn a_tagged_packets_megaflow_matches_vid_and_cfi() {
    let dump = megaflows("in_port=1,actions=output:2\n", vec![frame(5 << 13 | 1000)]);
    assert!(
        dump.lines().any(|l| l.starts_with(
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x8100),\
             vlan(vid=1000,pcp=5/0x0),encap(eth_type(0x0800),ipv4(frag=no)), packets:"
        ) && l.ends_with("actions:2")),
        "{dump}"
    );
}

#[test]
fn tagged_and_untagged_packets_get_megaflows_of_their_own() {
    let dump = megaflows(
        "in_port=1,actions=output:2\n",
        vec![frame(0), frame(5 << 13 | 1000)],
    );
    let lines: Vec<&str> = dump
        .lines()
        .filter(|l| l.starts_with("recirc_id"))
        .collect();
    assert_eq!(lines.len(), 2, "{dump}");
    assert!(
        lines.iter().any(|l| l.starts_with(
            "recirc_id(0),in_port(1),packet_type(ns=0,id=0),eth_type(0x0800),ipv4(frag=no), \
             packets:"
        )),
        "{dump}"
    );
}
