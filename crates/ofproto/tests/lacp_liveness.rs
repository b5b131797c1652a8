//! A port whose LACP does not let it carry traffic is not live (OVS's `may_enable_port()`), be
//! it a bond member or a Port of one Interface: what fast-failover groups and the `bundle`
//! action see, and OpenFlow 1.4's `LIVE` port state.

mod common;

use flow::EthAddr;
use ofproto::bond::{BondConfig, BondMode};
use ofproto::bond_lacp::LacpConfig;
use ofproto::lacp::{MemberSettings, Settings};
use ofproto::lacp_port::LacpPortConfig;
use ofproto::ofproto::Ofproto;

fn mac(n: u8) -> EthAddr {
    EthAddr([2, 0, 0, 0, 0, n])
}

fn lacp(members: usize) -> LacpConfig {
    LacpConfig {
        settings: Settings {
            active: true,
            sys_id: mac(9),
            sys_priority: 65534,
            fast: true,
            fallback_ab: false,
        },
        members: vec![MemberSettings::default(); members],
    }
}

fn live(of: &Ofproto, ofport: u32) -> bool {
    let p = of.pipe.read().unwrap();
    p.bridge("br0").unwrap().port_live(ofport)
}

#[test]
fn ports_whose_lacp_has_no_partner_in_sync_are_not_live() {
    let of = common::switch_with_flows(3, &["actions=NORMAL"]);
    let mut c = BondConfig::new(
        "bond0",
        BondMode::BalanceTcp,
        &[("p1", mac(1)), ("p2", mac(2))],
    );
    c.lacp = Some(lacp(2));
    assert!(of.set_bonds("br0", vec![c.clone()]).unwrap());
    let single = LacpPortConfig {
        name: "p3".into(),
        member: "p3".into(),
        mac: mac(3),
        lacp: lacp(1),
    };
    assert!(of.set_lacp_ports("br0", vec![single]).unwrap());
    of.run_bonds();
    assert!(!live(&of, 1) && !live(&of, 2) && !live(&of, 3));
    // Without LACP they are live again.
    c.lacp = None;
    assert!(of.set_bonds("br0", vec![c]).unwrap());
    assert!(of.set_lacp_ports("br0", Vec::new()).unwrap());
    of.run_bonds();
    assert!(live(&of, 1) && live(&of, 2) && live(&of, 3));
}
