//! NORMAL's MAC learning as OVS 3.1 keeps it (`ofproto-dpif.at`'s `MAC learning` scenario):
//! `fdb/show` lists entries least recently learned first, an entry that moves becomes the most
//! recent, and a port's removal forgets what was learned on it in every bridge.

use std::sync::Arc;

use ofproto::bridge::{OfPort, VlanMode};
use ofproto::ofproto::Ofproto;

fn switch() -> Arc<Ofproto> {
    let of = Ofproto::new();
    for (br, ports) in [("br0", &[1u32, 2, 3][..]), ("br1", &[4, 5][..])] {
        of.add_bridge(br).unwrap();
        for &n in ports {
            let port = OfPort {
                name: format!("p{n}"),
                ofport: n,
                dp_port: Some(n),
                peer: None,
                vlan: VlanMode::default(),
            };
            of.add_port(br, port).unwrap();
        }
        of.add_flow(br, "actions=NORMAL").unwrap();
    }
    of
}

/// An ARP request from `src` to `dst` arriving on datapath port `in_port`, learned from.
fn arrive(of: &Ofproto, in_port: u32, src: &str, dst: &str) {
    let flow = format!(
        "in_port({in_port}),eth(src={src},dst={dst}),eth_type(0x0806),\
         arp(sip=192.168.0.1,tip=192.168.0.2,op=1,sha={src},tha=00:00:00:00:00:00)"
    );
    of.trace("ovs-netdev", &[flow], true).unwrap();
}

/// `fdb/show` without the ages.
fn fdb(of: &Ofproto, br: &str) -> Vec<String> {
    of.fdb_show(br)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.rsplit_once(' ').unwrap().0.trim_end().to_owned())
        .collect()
}

#[test]
fn entries_in_lru_order_and_forgotten_with_their_port_everywhere() {
    let of = switch();
    let bcast = "ff:ff:ff:ff:ff:ff";
    arrive(&of, 3, "50:54:00:00:00:05", bcast);
    arrive(&of, 1, "50:54:00:00:00:06", "50:54:00:00:00:05");
    assert_eq!(
        fdb(&of, "br0"),
        [
            "    3     0  50:54:00:00:00:05",
            "    1     0  50:54:00:00:00:06"
        ]
    );
    // 05 moves to port 2: it is now the most recently learned.
    arrive(&of, 2, "50:54:00:00:00:05", bcast);
    assert_eq!(
        fdb(&of, "br0"),
        [
            "    1     0  50:54:00:00:00:06",
            "    2     0  50:54:00:00:00:05"
        ]
    );
    arrive(&of, 4, "50:54:00:00:00:06", bcast);
    arrive(&of, 5, "50:54:00:00:00:07", bcast);
    assert_eq!(fdb(&of, "br1").len(), 2);
    // p1 goes: 06, learned there, is forgotten in br1 too.
    of.del_port("p1").unwrap();
    assert_eq!(fdb(&of, "br0"), ["    2     0  50:54:00:00:00:05"]);
    assert_eq!(fdb(&of, "br1"), ["    5     0  50:54:00:00:00:07"]);
}
