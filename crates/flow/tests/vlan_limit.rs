//! `vlan-limit` (OVS's `flow_vlan_limit`): with 1, a double-tagged frame's inner tag is
//! payload (its TPID is the ethertype, L3 unparsed); with 0 or 2, both tags are in the key.
//! The limit is one setting for the process, so this binary has only this test.

use flow::key::{FlowKey, VLAN_CFI};
use flow::vlan_limit::{set_vlan_limit, vlan_limit};

fn qinq_udp() -> Vec<u8> {
    let mut p = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xa8, 0x00, 0x64];
    p.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a, 0x08, 0x00]);
    // IPv4 (no options, checksum left 0) carrying UDP 5 -> 6.
    p.extend_from_slice(&[
        0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    p.extend_from_slice(&[0, 5, 0, 6, 0, 8, 0, 0]);
    p
}

#[test]
fn the_limit_decides_how_many_tags_the_key_holds() {
    let p = qinq_udp();
    let mut k = FlowKey::new();
    for (limit, want) in [(0, 2), (2, 2), (5, 2), (-1, 2), (1, 1)] {
        set_vlan_limit(limit);
        assert_eq!(vlan_limit(), want, "vlan-limit {limit}");
        let x = flow::extract(&p, &mut k);
        assert_eq!(x.malformed, None);
        assert_eq!((k.vlan_tpid(), k.vlan_tci()), (0x88a8, 100 | VLAN_CFI));
        if want == 2 {
            assert_eq!((k.vlan2_tpid(), k.vlan2_tci()), (0x8100, 10 | VLAN_CFI));
            assert_eq!((k.eth_type(), k.nw_proto(), k.tp_dst()), (0x0800, 17, 6));
        } else {
            assert_eq!(k.vlan2_tci(), 0);
            assert_eq!((k.eth_type(), k.nw_proto(), k.tp_dst()), (0x8100, 0, 0));
        }
    }
}
