use super::super::testutil::{hex, msg, unhex};
use super::*;

/// Messages of OVS's own tests (`tests/ofp-print.at`), as `ovs-ofctl ofp-print` reads them.
const NXST_REQUEST: &str = "0110004000000004ffff000000002320000000020000000000004000003ffffe00000100000000000000200000\
04ffff00060200000000000000000200010000";
const ONFST_REQUEST: &str = "0412004800000006ffff0000000000004f4e46000000074e00001000003f0004fffffffe0100000000010004\
00000000000020000004ffff00000002010000000001000400000000";
const OFPST_REQUEST: &str = "0512005800000006001000000000000000001000fffffffeffffffff005f00000001000400000000000020000\
000000100000040005f01010001000400000000000040000000000200000040005f02020001000400000000";
const NXST_REPLY: &str = "0111004000000004ffff000000002320000000020000000000200001000580000005001000060100123456789abc\
def0000000020001000000080003000186a0";
const ONFST_REPLY: &str = "0413004800000006ffff0000000000004f4e46000000074e002800010005800000000000000c0000123456789a\
bcdef00001000c80000004000000010000000000080003000186a0";
const OFPST_REPLY: &str = "0513004000000000001000000000000000280002000500000000800000000000123456789abcdef00001000c8000\
0004000000010000000000080004000186a0";

fn version(b: &[u8]) -> Version {
    Version::from_wire(b[0]).unwrap()
}

#[test]
fn requests_of_every_form_decode_and_encode_as_ovs_lays_them_out() {
    for h in [NXST_REQUEST, ONFST_REQUEST, OFPST_REQUEST] {
        let b = unhex(h);
        let m = msg(&b);
        let reqs = decode_flow_monitor_request(&m).unwrap();
        assert!(!reqs.is_empty(), "{h}");
        let mut out = Vec::new();
        encode_flow_monitor_request(&reqs, version(&b), m.xid, &TlvLens::default(), &mut out)
            .unwrap();
        // OVS's sample gives its second ONF monitor a match_len of 0xffff, which OVS does not
        // read: it writes the match's.
        let want = hex(&b).replace("0004ffff00000002", "0004000400000002");
        assert_eq!(hex(&out), want);
    }
    let b = unhex(NXST_REQUEST);
    let r = &decode_flow_monitor_request(&msg(&b)).unwrap();
    assert_eq!((r[0].id, r[0].out_port, r[0].table), (0x4000, 0xfffe, 1));
    assert_eq!(r[0].flags, flags::VALID);
    assert_eq!(r[1].flags, flags::REMOVED);
    let b = unhex(OFPST_REQUEST);
    let r = &decode_flow_monitor_request(&msg(&b)).unwrap();
    assert_eq!(
        r.iter().map(|r| r.command).collect::<Vec<_>>(),
        [
            MonitorCommand::Add,
            MonitorCommand::Modify,
            MonitorCommand::Delete
        ]
    );
}

#[test]
fn replies_of_every_form_decode_and_encode_as_ovs_lays_them_out() {
    for h in [NXST_REPLY, ONFST_REPLY, OFPST_REPLY] {
        let b = unhex(h);
        let m = msg(&b);
        let (updates, more) = decode_flow_update_reply(&m).unwrap();
        assert!(!more);
        assert!(
            matches!(updates.last(), Some(FlowUpdate::Abbrev(100000))),
            "{h}"
        );
        let mut out = Vec::new();
        let mut w = FlowUpdateWriter::new(version(&b), m.xid, &mut out);
        for u in &updates {
            w.push(u, &TlvLens::default()).unwrap();
        }
        w.finish().unwrap();
        assert_eq!(hex(&out), hex(&b));
    }
    let b = unhex(NXST_REPLY);
    let (u, _) = decode_flow_update_reply(&msg(&b)).unwrap();
    let FlowUpdate::Full(f) = &u[0] else {
        panic!("{u:?}")
    };
    assert_eq!(f.event, FlowUpdateEvent::Removed);
    assert_eq!(
        (f.reason, f.priority, f.idle_timeout, f.hard_timeout),
        (5, 0x8000, 5, 16)
    );
    assert_eq!((f.table, f.cookie), (1, 0x123456789abcdef0));
}

#[test]
fn cancels_and_pauses_are_ovs_messages() {
    for h in [
        "0104001400000003000023200000001501023040",
        "04040014000000064f4e46000000074e01023040",
    ] {
        let b = unhex(h);
        let m = msg(&b);
        assert_eq!(decode_flow_monitor_cancel(&m), Ok(0x01023040));
        let mut out = Vec::new();
        encode_flow_monitor_cancel(0x01023040, version(&b), m.xid, &mut out);
        assert_eq!(hex(&out), h);
    }
    // OpenFlow 1.4: a request to delete the monitor.
    let mut out = Vec::new();
    encode_flow_monitor_cancel(7, Version::Of15, 2, &mut out);
    let r = decode_flow_monitor_request(&msg(&out)).unwrap();
    assert_eq!((r[0].id, r[0].command), (7, MonitorCommand::Delete));
    for (paused, v, h) in [
        (true, Version::Of10, "01040010000000000000232000000016"),
        (true, Version::Of13, "04040010000000004f4e46000000074f"),
        (
            true,
            Version::Of14,
            "051300180000000000100000000000000008000500000000",
        ),
        (false, Version::Of10, "01040010000000000000232000000017"),
        (false, Version::Of13, "04040010000000004f4e460000000750"),
        (
            false,
            Version::Of14,
            "051300180000000000100000000000000008000600000000",
        ),
    ] {
        let mut out = Vec::new();
        encode_flow_monitor_pause(paused, v, &mut out);
        assert_eq!(hex(&out), h);
    }
    let b = unhex("051300180000000000100000000000000008000500000000");
    assert_eq!(
        decode_flow_update_reply(&msg(&b)).unwrap().0,
        [FlowUpdate::Paused]
    );
}

#[test]
fn bad_requests_and_replies_get_ovs_errors() {
    // No event asked for.
    let mut b = unhex(NXST_REQUEST);
    b[28..30].copy_from_slice(&0x0011u16.to_be_bytes());
    assert_eq!(
        decode_flow_monitor_request(&msg(&b)),
        Err(OfpErr::OfpmofcBadFlags)
    );
    // Padding not zero.
    let mut b = unhex(NXST_REQUEST);
    b[35] = 1;
    assert_eq!(
        decode_flow_monitor_request(&msg(&b)),
        Err(OfpErr::NxbrcMustBeZero)
    );
    // A request cut short.
    let mut b = unhex(NXST_REQUEST);
    b.truncate(b.len() - 8);
    let n = b.len() as u16;
    b[2..4].copy_from_slice(&n.to_be_bytes());
    assert!(decode_flow_monitor_request(&msg(&b)).is_err());
    // An update of an unknown event, and one longer than its message.
    let mut b = unhex(OFPST_REPLY);
    b[19] = 9;
    assert_eq!(
        decode_flow_update_reply(&msg(&b)),
        Err(OfpErr::NxbrcFmBadEvent)
    );
    let mut b = unhex(OFPST_REPLY);
    b[17] = 0x48;
    assert_eq!(
        decode_flow_update_reply(&msg(&b)),
        Err(OfpErr::OfpbrcBadLen)
    );
}

#[test]
fn a_long_reply_is_split_into_parts() {
    let u = FlowUpdate::Full(Box::new(FlowUpdateFull {
        event: FlowUpdateEvent::Added,
        reason: 0,
        table: 0,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 1,
        cookie: 0,
        match_: PipeMatch::default(),
        actions: vec![],
    }));
    let mut out = Vec::new();
    let mut w = FlowUpdateWriter::new(Version::Of10, 5, &mut out);
    for _ in 0..3000 {
        w.push(&u, &TlvLens::default()).unwrap();
    }
    w.finish().unwrap();
    let mut n = 0;
    let mut rest = &out[..];
    let mut parts = 0;
    while !rest.is_empty() {
        let m = msg(rest);
        let (us, more) = decode_flow_update_reply(&m).unwrap();
        n += us.len();
        parts += 1;
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        rest = &rest[len..];
        assert_eq!(more, !rest.is_empty());
    }
    assert_eq!((n, parts), (3000, 2));
}
