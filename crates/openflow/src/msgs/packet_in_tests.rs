use super::*;
use crate::msgs::testutil::{hex, unhex};
use crate::msgtype;
use ofproto::fields::FieldId;
use ofproto::pipekey::{PipeKey, PipeMask};

const ALL: [Version; 6] = Version::ALL;

fn metadata(port: u32, reg0: u128, meta: u128) -> PipeMatch {
    let mut k = PipeKey::new();
    let mut m = PipeMask::new();
    for (f, v) in [
        (FieldId::IN_PORT, u128::from(port)),
        (FieldId::reg(0), reg0),
        (FieldId::METADATA, meta),
    ] {
        if v != 0 || f == FieldId::IN_PORT {
            f.field().set(&mut k, v);
            f.field().unwildcard(&mut m);
        }
    }
    PipeMatch::new(&k, &m)
}

fn sample() -> PacketIn {
    PacketIn {
        packet: (0..64u8).collect(),
        total_len: 64,
        buffer_id: NO_BUFFER,
        reason: PacketInReason::Action,
        table_id: 3,
        cookie: 0x1234,
        metadata: metadata(1, 5, 0xfeed),
        userdata: vec![1, 2, 3],
        continuation: None,
    }
}

fn round_trip(pi: &PacketIn, v: Version, f: PacketInFormat) -> PacketIn {
    let b = pi.encode(v, f, &TlvLens::default());
    let m = msgtype::decode(&b).unwrap_or_else(|e| panic!("{v:?} {f:?}: {e:?} {}", hex(&b)));
    PacketIn::decode(&m).unwrap_or_else(|e| panic!("{v:?} {f:?}: {e:?} {}", hex(&b)))
}

#[test]
fn nicira_forms_round_trip_in_every_version() {
    let pi = sample();
    for v in ALL {
        let got = round_trip(&pi, v, PacketInFormat::NxtPacketIn2);
        assert_eq!(got, pi, "{v:?}");
        let got = round_trip(&pi, v, PacketInFormat::NxtPacketIn);
        assert_eq!(
            got,
            PacketIn {
                userdata: vec![],
                ..pi.clone()
            },
            "{v:?}"
        );
    }
}

#[test]
fn standard_forms_carry_what_their_version_has() {
    let pi = sample();
    for v in ALL {
        let got = round_trip(&pi, v, PacketInFormat::Standard);
        assert_eq!(got.packet, pi.packet);
        assert_eq!(got.total_len, 64);
        assert_eq!(got.metadata.key().dp.in_port(), 1);
        if v >= Version::Of12 {
            assert_eq!(got.metadata, pi.metadata, "{v:?}");
        }
        if v >= Version::Of13 {
            assert_eq!(got.cookie, 0x1234);
        }
        if v >= Version::Of11 {
            assert_eq!(got.table_id, 3);
        }
    }
}

#[test]
fn reasons_are_the_nearest_each_version_has() {
    use PacketInReason::*;
    assert_eq!(ExplicitMiss.wire(Version::Of10), 1);
    assert_eq!(ExplicitMiss.wire(Version::Of13), 0);
    assert_eq!(ImplicitMiss.wire(Version::Of10), 0);
    assert_eq!(Group.wire(Version::Of13), 1);
    assert_eq!(Group.wire(Version::Of14), 4);
    assert_eq!(InvalidTtl.wire(Version::Of10), 2);
}

#[test]
fn an_ofp10_packet_in_is_laid_out_as_ovs_sends_it() {
    let pi = PacketIn {
        packet: unhex("ffffffffffff0000000000010806"),
        total_len: 14,
        reason: PacketInReason::NoMatch,
        metadata: metadata(0xfffe, 0, 0),
        ..sample()
    };
    let b = pi.encode(Version::Of10, PacketInFormat::Standard, &TlvLens::default());
    assert_eq!(
        hex(&b),
        "010a002000000000ffffffff000efffe0000ffffffffffff0000000000010806"
    );
}

#[test]
fn a_continuation_round_trips() {
    let pi = PacketIn {
        continuation: Some(Continuation {
            bridge: [7; 16],
            stack: vec![vec![1, 2, 3], vec![0xff; 16]],
            mirrors: 0x3,
            conntracked: true,
            actions: vec![
                ActionGroup {
                    table: 0,
                    cookie: 0,
                    actions: vec![OfAction::Output {
                        port: 2,
                        max_len: 0,
                    }],
                },
                ActionGroup {
                    table: 1,
                    cookie: 0xabc,
                    actions: vec![OfAction::Output {
                        port: 3,
                        max_len: 0,
                    }],
                },
            ],
            action_set: vec![OfAction::Output {
                port: 1,
                max_len: 0,
            }],
            odp_port: 4,
        }),
        ..sample()
    };
    for v in ALL {
        assert_eq!(
            round_trip(&pi, v, PacketInFormat::NxtPacketIn2),
            pi,
            "{v:?}"
        );
        let b = pi.encode_resume(v, &TlvLens::default());
        let m = msgtype::decode(&b).unwrap();
        assert_eq!(m.msg_type, MsgType::NxtResume);
        let r = PacketIn::decode(&m).unwrap();
        assert_eq!(r.continuation, pi.continuation);
        assert!(r.userdata.is_empty());
    }
}

#[test]
fn a_packet_in2_without_a_packet_or_with_a_short_full_len_is_refused() {
    let mut b = Vec::new();
    let at = start(MsgType::NxtPacketIn2, Version::Of13, 0, &mut b);
    put_prop(&mut b, NXPINT_TABLE_ID, &[1]);
    finish(&mut b, at).unwrap();
    let m = msgtype::decode(&b).unwrap();
    assert_eq!(PacketIn::decode(&m), Err(OfpErr::OfpbrcBadLen));
    let mut b = Vec::new();
    let at = start(MsgType::NxtPacketIn2, Version::Of13, 0, &mut b);
    put_prop(&mut b, NXPINT_PACKET, &[1; 20]);
    put_prop(&mut b, NXPINT_FULL_LEN, &10u32.to_be_bytes());
    finish(&mut b, at).unwrap();
    let m = msgtype::decode(&b).unwrap();
    assert_eq!(PacketIn::decode(&m), Err(OfpErr::OfpbrcBadLen));
}

#[test]
fn random_bytes_never_panic() {
    let seeds = [
        sample().encode(
            Version::Of13,
            PacketInFormat::NxtPacketIn2,
            &TlvLens::default(),
        ),
        sample().encode(
            Version::Of10,
            PacketInFormat::NxtPacketIn,
            &TlvLens::default(),
        ),
        sample().encode(Version::Of15, PacketInFormat::Standard, &TlvLens::default()),
        sample().encode(Version::Of10, PacketInFormat::Standard, &TlvLens::default()),
    ];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..20_000 {
        let mut b = seeds[(next() % 4) as usize].clone();
        for _ in 0..(next() % 6) {
            let i = (next() as usize) % b.len();
            b[i] = next() as u8;
        }
        b.truncate(8.max((next() as usize) % (b.len() + 1)));
        let n = b.len() as u16;
        b[2..4].copy_from_slice(&n.to_be_bytes());
        if let Ok(m) = msgtype::decode(&b) {
            let _ = PacketIn::decode(&m);
        }
    }
}
