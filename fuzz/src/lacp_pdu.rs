//! Invariant checks of the `lacp_pdu` fuzz target, shared with the crash-regression test
//! (`crates/ofproto/tests/fuzz_regressions.rs` path-imports this file).
//!
//! The input is a frame a bond member with LACP receives (as a partner or an attacker sends
//! it; the slow path hands over every frame of ethertype 0x8809, VLAN tags and all).
//! - what the decoder takes as a LACPDU writes back (`pdu::encode`) to a PDU that decodes to
//!   the same actor and partner; it never takes fewer than 110 bytes;
//! - given to a bond's LACP (twice), the frame is counted each time, as a LACPDU, a marker or a
//!   bad PDU the same way both times, never panics, and `lacp/show` and `lacp/show-stats`
//!   still print both members.

use std::time::{Duration, Instant};

use flow::EthAddr;
use ofproto::bond::{Bond, BondConfig, BondMode};
use ofproto::bond_lacp::LacpConfig;
use ofproto::lacp::{MemberSettings, Settings, pdu, show};

/// Runs the checks on one input.
pub fn check_lacp_pdu(data: &[u8]) {
    check_decoder(data);
    if data.len() >= 14 {
        check_decoder(&data[14..]);
    }
    check_bond(data);
}

fn check_decoder(p: &[u8]) {
    match pdu::decode(p) {
        Ok(pdu::Pdu::Lacp { actor, partner }) => {
            assert!(p.len() >= pdu::PDU_LEN);
            let again = pdu::decode(&pdu::encode(&actor, &partner));
            assert_eq!(again, Ok(pdu::Pdu::Lacp { actor, partner }));
        }
        Ok(pdu::Pdu::Marker) => assert!(p.len() >= pdu::PDU_LEN && p[0] == 2),
        Err(_) => {}
    }
}

fn check_bond(frame: &[u8]) {
    let mac = |n| EthAddr([2, 0, 0, 0, 0, n]);
    let mut c = BondConfig::new(
        "bond0",
        BondMode::BalanceTcp,
        &[("p1", mac(1)), ("p2", mac(2))],
    );
    c.lacp = Some(LacpConfig {
        settings: Settings {
            active: true,
            sys_id: mac(9),
            sys_priority: 65534,
            fast: true,
            fallback_ab: false,
        },
        members: vec![MemberSettings::default(); 2],
    });
    let now = Instant::now();
    let mut b = Bond::new(c, now);
    b.members[0].ofport = Some(1);
    b.members[1].ofport = Some(2);
    b.run(now, |_| true);
    assert!(b.lacp_receive(0, frame, now));
    let first = b.lacp.as_ref().expect("LACP").members[0].stats;
    assert!(b.lacp_receive(0, frame, now));
    b.run(now + Duration::from_millis(10), |_| true);
    let l = b.lacp.as_ref().expect("LACP");
    let s = l.members[0].stats;
    assert_eq!((first.rx, s.rx), (1, 2));
    assert_eq!(s.rx_bad, 2 * first.rx_bad);
    assert_eq!(s.rx_marker, 2 * first.rx_marker);
    let text = show::details(l);
    assert!(text.starts_with("---- bond0 ----\n"));
    assert!(text.contains("\nmember: p1: ") && text.contains("\nmember: p2: "));
    assert!(show::stats(l).contains("  RX PDUs: 2\n"));
}
