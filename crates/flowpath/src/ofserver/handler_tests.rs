//! The handler against what `ovs-vswitchd` 3.1 answered for bridge br0 (`hwaddr`
//! aa:bb:cc:dd:ee:01) with dummy port p1 (`testdata/openflow/ovs-replies.txt`, recorded by
//! `scripts/capture-ovs-replies`): the same bytes for the same requests, the port's address
//! aside (OVS numbers its dummy ports' addresses in creation order).

use std::sync::mpsc;

use datapath::dpif::{DatapathBuilder, DpConfig};
use ofproto::bridge::{OfPort, VlanMode};
use ofproto::syntax::OFPP_LOCAL;
use openflow::conn::{ConnEvent, ConnId, ConnInfo, Handler, Role as ConnRole, Target};
use openflow::header::Version;
use openflow::msgs::role::Role;
use proptest::prelude::*;

use super::OfHandler;

const OVS: &str = include_str!("../../../../testdata/openflow/ovs-replies.txt");

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The recorded lines of `kind` for `label`.
fn ovs(label: &str, kind: &str) -> Vec<String> {
    OVS.lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            (f.next() == Some(label) && f.next() == Some(kind))
                .then(|| f.next().unwrap_or("").to_owned())
        })
        .collect()
}

/// A handler for br0 as recorded, and the sender of its connection events.
fn handler() -> (OfHandler, mpsc::SyncSender<ConnEvent>) {
    let of = ofproto::ofproto::Ofproto::new();
    of.add_bridge("br0").unwrap();
    let mac = flow::EthAddr([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x01]);
    of.set_bridge_addrs("br0", Some(mac), Vec::new()).unwrap();
    for (name, ofport, dp) in [("br0", OFPP_LOCAL, 100), ("p1", 1, 1)] {
        let p = OfPort {
            name: name.into(),
            ofport,
            dp_port: Some(dp),
            peer: None,
            vlan: VlanMode::default(),
        };
        of.add_port("br0", p).unwrap();
    }
    // OVS's new bridge's one flow.
    of.add_flow("br0", crate::switch::DEFAULT_FLOW).unwrap();
    let dp = DatapathBuilder::new(DpConfig::default()).start().unwrap();
    let (tx, rx) = mpsc::sync_channel(16);
    let lp = openflow::conn::EventLoop::new().unwrap().handle();
    let mut h = OfHandler::new(of, std::sync::Arc::new(std::sync::Mutex::new(dp)), rx, lp).unwrap();
    h.listener_bridge
        .insert(Target::PUnix("/run/br0.mgmt".into()), "br0".into());
    (h, tx)
}

/// Connection `id` of `version` on br0.
fn connect(tx: &mpsc::SyncSender<ConnEvent>, id: u64, version: Version) -> ConnInfo {
    tx.send(ConnEvent::Connected {
        id: ConnId(id),
        role: ConnRole::Service,
        version,
        target: Target::PUnix("/run/br0.mgmt".into()),
    })
    .unwrap();
    ConnInfo {
        id: ConnId(id),
        version,
        role: ConnRole::Service,
        monitor_backlog: (0, 0),
    }
}

fn answer(h: &mut OfHandler, c: &ConnInfo, req: &[u8]) -> String {
    let mut out = Vec::new();
    h.handle(c, req, &mut out);
    hex(&out)
}

#[test]
fn requests_are_answered_with_ovs_s_bytes() {
    let (mut h, tx) = handler();
    for (n, label) in [
        "features-of10",
        "features-of13",
        "get-config-of13",
        "port-desc-of10",
        "port-desc-of13",
        "port-desc-of15",
        "desc-of13",
        "table-stats-of10",
        "table-stats-of13",
        "meter-features-of13",
        "meter-features-of15",
        "tlv-table-of15",
        "get-async-of13",
        "get-async-of14",
        "role-of13",
        "meter-mod-del-all-of15",
        "queue-get-config-of10",
        "queue-get-config-of13",
        "queue-desc-of14",
        "table-desc-of14",
        "group-features-of10",
        "group-stats-of10",
        "group-features-of13",
        "group-stats-of13",
        "flow-monitor-of10",
        "flow-monitor-of13",
        "flow-monitor-of15",
        "flow-monitor-cancel-unknown-of10",
    ]
    .into_iter()
    .enumerate()
    {
        let req = unhex(&ovs(label, "request")[0]);
        let c = connect(&tx, n as u64, Version::from_wire(req[0]).unwrap());
        // OVS numbered its dummy port's address 0x0e; this switch's p1 is datapath port 1.
        let want = ovs(label, "reply")
            .concat()
            .replace("aa55aa55000e", "aa55aa550001");
        let got = answer(&mut h, &c, &req);
        // The first difference, not 40 000 hex digits.
        let at = got
            .bytes()
            .zip(want.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        assert!(
            got == want,
            "{label}: differs at hex digit {at} of {} (OVS {}): ...{}",
            got.len(),
            want.len(),
            &got[at.saturating_sub(16)..(at + 48).min(got.len())]
        );
    }
}

#[test]
fn table_features_split_as_ovs_splits_them() {
    let (mut h, tx) = handler();
    for (i, label) in ["table-features-of13", "table-features-of15"]
        .iter()
        .enumerate()
    {
        let req = unhex(&ovs(label, "request")[0]);
        let c = connect(&tx, i as u64, Version::from_wire(req[0]).unwrap());
        let mut out = Vec::new();
        h.handle(&c, &req, &mut out);
        let mut sizes = Vec::new();
        let mut rest = &out[..];
        while rest.len() >= 4 {
            let n = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
            sizes.push(n.to_string());
            rest = &rest[n..];
        }
        assert_eq!(sizes.join(","), ovs(label, "sizes")[0], "{label}");
        assert_eq!(hex(&out[..16]), ovs(label, "headers")[0], "{label}");
    }
}

#[test]
fn settings_are_kept_per_connection() {
    let (mut h, tx) = handler();
    let a = connect(&tx, 1, Version::Of13);
    let b = connect(&tx, 2, Version::Of13);
    // SET_CONFIG miss_send_len=0xffff on a, then GET_CONFIG on both.
    assert_eq!(answer(&mut h, &a, &unhex("0409000c000000010000ffff")), "");
    let get = unhex("0407000800000002");
    assert_eq!(answer(&mut h, &a, &get), "0408000c000000020000ffff");
    assert_eq!(answer(&mut h, &b, &get), "0408000c0000000200000000");
    assert!(
        h.conns[&ConnId(1)].receives_async(openflow::msgs::async_config::AsyncMsg::PortStatus, 0)
    );
    assert!(
        !h.conns[&ConnId(2)].receives_async(openflow::msgs::async_config::AsyncMsg::PortStatus, 0)
    );
    // A group mod is served (an add of group 1 without buckets); adding it again is
    // OFPGMFC_GROUP_EXISTS with the request.
    let gm = "040f0010000000030000000000000001";
    assert_eq!(answer(&mut h, &a, &unhex(gm)), "");
    let want = format!("0401001c0000000300060000{gm}");
    assert_eq!(answer(&mut h, &a, &unhex(gm)), want);
}

/// Any bytes as a message of any version and type: an answer or an error, never a panic.
#[test]
fn random_messages_never_panic() {
    let (h, tx) = handler();
    let h = std::cell::RefCell::new(h);
    let id = std::cell::Cell::new(0);
    let strategy = (
        1u8..=6,
        any::<u8>(),
        proptest::collection::vec(any::<u8>(), 0..200),
    );
    proptest::test_runner::TestRunner::default()
        .run(&strategy, |(v, t, body)| {
            id.set(id.get() + 1);
            let c = connect(&tx, id.get(), Version::from_wire(v).unwrap());
            let mut m = vec![v, t, 0, 0, 0, 0, 0, 1];
            m.extend_from_slice(&body);
            let len = m.len() as u16;
            m[2..4].copy_from_slice(&len.to_be_bytes());
            let mut out = Vec::new();
            h.borrow_mut().handle(&c, &m, &mut out);
            Ok(())
        })
        .unwrap();
}

/// OVS's `update_want_packet_in_on_miss()`: while an OpenFlow 1.0 to 1.2 connection with
/// controller id 0 is attached, a table miss goes to the controller ("Default Table Miss"
/// scenarios); OpenFlow 1.3 made it a drop.
#[test]
fn misses_go_to_the_controller_while_an_openflow_1_0_connection_is_attached() {
    let (mut h, tx) = handler();
    h.of.del_flows("br0", None, false).unwrap();
    let miss = |h: &OfHandler| {
        let t = h.of.trace("br0", &["in_port=1,tcp".into()], false).unwrap();
        t.lines()
            .find_map(|l| l.strip_prefix("Datapath actions: "))
            .unwrap()
            .to_owned()
    };
    let c13 = connect(&tx, 1, Version::Of13);
    answer(&mut h, &c13, &unhex("0402000800000001"));
    assert_eq!(miss(&h), "drop");
    let c10 = connect(&tx, 2, Version::Of10);
    answer(&mut h, &c10, &unhex("0102000800000002"));
    assert!(
        miss(&h).starts_with("userspace(pid=0,controller(reason=0,"),
        "{}",
        miss(&h)
    );
    h.forget_conn(ConnId(2));
    assert_eq!(miss(&h), "drop");
}

/// The messages queued for connection `id` by others' requests.
fn outbox_for(h: &mut OfHandler, id: u64) -> Vec<String> {
    h.outbox
        .iter()
        .filter(|(c, _)| *c == ConnId(id))
        .map(|(_, m)| hex(m))
        .collect()
}

/// OVS's `ofconn_set_role()`: a new primary demotes the old one, which is told so with a
/// role status from OpenFlow 1.3 on (OFPT_ROLE_STATUS in 1.4, the ONF's in 1.3, nothing
/// before); an older generation id is stale.
#[test]
fn a_new_primary_demotes_the_old_one_with_a_role_status() {
    let (mut h, tx) = handler();
    let c14 = connect(&tx, 1, Version::Of14);
    let c13 = connect(&tx, 2, Version::Of13);
    let c12 = connect(&tx, 3, Version::Of12);
    // OFPT_ROLE_REQUEST role=primary generation_id=GENERATION, xid 5.
    let primary = |v: u8, generation: u8| {
        unhex(
            &format!("{v:02x}180018 00000005 00000002 00000000 00000000000000{generation:02x}")
                .replace(' ', ""),
        )
    };
    // Primary with generation 1, then 2 and 3: each demotes the one before.
    let reply = answer(&mut h, &c14, &primary(5, 1));
    assert_eq!(reply, "051900180000000500000002000000000000000000000001");
    answer(&mut h, &c13, &primary(4, 2));
    // OFPT_ROLE_STATUS role=secondary reason=primary_request generation_id=2.
    assert_eq!(
        outbox_for(&mut h, 1),
        ["051e00180000000000000003000000000000000000000002"]
    );
    answer(&mut h, &c12, &primary(3, 3));
    // The ONF's role status: experimenter 0x4f4e4600, type 1911.
    assert_eq!(
        outbox_for(&mut h, 2),
        ["04040020000000004f4e46000000077700000003000000000000000000000003"]
    );
    assert_eq!(h.conns[&ConnId(1)].role, Role::Secondary);
    assert_eq!(h.conns[&ConnId(2)].role, Role::Secondary);
    // Going back to generation 2 is stale; the 1.2 connection is demoted silently.
    let stale = answer(&mut h, &c14, &primary(5, 2));
    assert!(stale.starts_with("0501"), "{stale}");
    assert_eq!(&stale[16..24], "000b0000", "OFPRRFC_STALE: {stale}");
    h.outbox.clear();
    answer(&mut h, &c14, &primary(5, 4));
    assert!(outbox_for(&mut h, 3).is_empty());
    assert_eq!(h.conns[&ConnId(3)].role, Role::Secondary);
}

/// OVS's `connmgr_send_requestforward()`: a group mod goes to the bridge's other connections
/// that asked for request forwards (here as secondaries, with `NXT_SET_ASYNC_CONFIG2`, which
/// also gives these service connections a `miss_send_len`), not back to its sender.
#[test]
fn group_mods_are_forwarded_to_the_connections_that_asked() {
    let (mut h, tx) = handler();
    let c1 = connect(&tx, 1, Version::Of13);
    let c2 = connect(&tx, 2, Version::Of13);
    let c3 = connect(&tx, 3, Version::Of13);
    // c1 secondary, c2 primary; c1 and c2 ask for request forwards in both roles.
    answer(
        &mut h,
        &c1,
        &unhex("041800180000000300000003000000008000000000000002"),
    );
    answer(
        &mut h,
        &c2,
        &unhex("041800180000000300000002000000008000000000000003"),
    );
    let set_async = "0404002800000002000023200000001b000a000800000003000b000800000003\
                     0002000800000002";
    for c in [&c1, &c2] {
        assert_eq!(answer(&mut h, c, &unhex(set_async)), "");
    }
    h.outbox.clear();
    // ADD group_id=1,type=all,bucket=actions=drop, xid 9.
    let gm = "040f0020000000090000000000000001".to_owned() + "00100000ffffffffffffffff00000000";
    assert_eq!(answer(&mut h, &c2, &unhex(&gm)), "");
    let fwd = outbox_for(&mut h, 1);
    assert_eq!(fwd.len(), 1, "{:?}", h.outbox);
    // ONFT13_REQUESTFORWARD (experimenter type 2350) with the group mod, its xid kept.
    assert_eq!(
        fwd[0],
        format!("04040030000000004f4e46000000092e{gm}"),
        "{:?}",
        h.outbox
    );
    assert!(outbox_for(&mut h, 2).is_empty());
    assert!(outbox_for(&mut h, 3).is_empty());
    // A secondary service connection may still modify (OVS refuses only controllers):
    // adding the group again is OFPGMFC_GROUP_EXISTS, not OFPBRC_IS_SLAVE.
    let refused = answer(&mut h, &c1, &unhex(&gm));
    assert!(refused.starts_with("040100"), "{refused}");
    assert_eq!(&refused[16..24], "00060000", "{refused}");
    let _ = c3;
}

/// Meter mods are forwarded as group mods are, but only to OpenFlow 1.3 and later
/// connections, which have meters (OVS's `connmgr_send_requestforward()`).
#[test]
fn meter_mods_are_forwarded_only_to_connections_that_have_meters() {
    let (mut h, tx) = handler();
    let c10 = connect(&tx, 1, Version::Of10);
    let c13 = connect(&tx, 2, Version::Of13);
    let source = connect(&tx, 3, Version::Of13);
    // NXT_SET_ASYNC_CONFIG2: request forwards of both reasons when primary (or equal).
    let set_async = |v: u8| {
        unhex(&format!(
            "{v:02x}04001800000002000023200000001b000b000800000003"
        ))
    };
    assert_eq!(answer(&mut h, &c10, &set_async(1)), "");
    assert_eq!(answer(&mut h, &c13, &set_async(4)), "");
    // ADD meter=1 kbps bands=type=drop rate=1000, xid 7.
    let mm = "041d0020000000070000000100000001".to_owned() + "00010010000003e80000000000000000";
    assert_eq!(answer(&mut h, &source, &unhex(&mm)), "");
    assert!(outbox_for(&mut h, 1).is_empty(), "{:?}", h.outbox);
    assert!(outbox_for(&mut h, 3).is_empty(), "{:?}", h.outbox);
    // ONFT13_REQUESTFORWARD with the meter mod, its xid kept.
    assert_eq!(
        outbox_for(&mut h, 2),
        [format!("04040030000000004f4e46000000092e{mm}")]
    );
}
