use super::super::testutil::{msg, unhex};
use super::*;
use crate::msgtype;
use ofproto::syntax::group::{format_group, format_group_mod};
use ofproto::syntax::{NoPortNames, OFPP_ANY};
use proptest::prelude::*;

/// A group mod's text after its header line, as `ovs-ofctl ofp-print` prints it.
fn mod_text(hex: &str) -> String {
    let b = unhex(&hex.replace([' ', '\n'], ""));
    let m = msgtype::decode(&b).unwrap();
    let v = Version::from_wire(m.version).unwrap();
    let gm = decode_group_mod(&m).unwrap();
    let mut s = String::new();
    format_group_mod(&mut s, &gm, layout15(v), &NoPortNames);
    s
}

/// A description reply's groups, one a line, as `ovs-ofctl ofp-print` prints them.
fn desc_text(hex: &str) -> String {
    let b = unhex(&hex.replace([' ', '\n'], ""));
    let m = msgtype::decode(&b).unwrap();
    let v = Version::from_wire(m.version).unwrap();
    let mut s = String::new();
    for g in decode_group_desc_reply(&m).unwrap() {
        s.push(' ');
        format_group(&mut s, &g, layout15(v), false, &NoPortNames);
    }
    s
}

// OVS 3.1's own vectors (`tests/ofp-print.at`), decoded to the meaning OVS prints.

#[test]
fn nxt_group_mod_of10() {
    let hex = "01 04 00 a8 00 00 00 02 00 00 23 20 00 00 00 1f 00 00 01 00 87 65 43 21
        00 60 00 00 ff ff ff ff
        00 20 00 08 00 00 00 00 00 00 00 08 00 01 00 00 00 00 00 08 00 64 00 00 00 01 00 08 00 00 00 01
        00 20 00 08 00 00 00 01 00 00 00 08 00 02 00 00 00 00 00 08 00 c8 00 00 00 01 00 08 00 00 00 02
        00 20 00 08 00 00 00 02 00 00 00 08 00 03 00 00 00 00 00 08 00 c8 00 00 00 01 00 08 00 00 00 03
        ff ff 00 28 00 00 15 40 00 00 00 01 00 00 00 00 68 61 73 68 00 00 00 00 00 00 00 00 00 00 00 00
        00 00 00 00 00 00 00 07";
    assert_eq!(
        mod_text(hex),
        " ADD group_id=2271560481,type=select,selection_method=hash,selection_method_param=7,\
         bucket=bucket_id:0,weight:100,watch_port:1,actions=output:1,bucket=bucket_id:1,\
         weight:200,watch_port:2,actions=output:2,bucket=bucket_id:2,weight:200,watch_port:3,\
         actions=output:3"
    );
}

#[test]
fn ofpt_group_mod_of11() {
    let hex = "02 0f 00 70 11 22 33 44 00 00 01 00 87 65 43 21
        00 20 00 64 00 00 00 01 ff ff ff ff 00 00 00 00 00 00 00 10 00 00 00 01 00 00 00 00 00 00 00 00
        00 20 00 c8 00 00 00 02 ff ff ff ff 00 00 00 00 00 00 00 10 00 00 00 02 00 00 00 00 00 00 00 00
        00 20 00 c8 00 00 00 03 ff ff ff ff 00 00 00 00 00 00 00 10 00 00 00 03 00 00 00 00 00 00 00 00";
    assert_eq!(
        mod_text(hex),
        " ADD group_id=2271560481,type=select,bucket=weight:100,watch_port:1,actions=output:1,\
         bucket=weight:200,watch_port:2,actions=output:2,bucket=weight:200,watch_port:3,\
         actions=output:3"
    );
}

const OF15_BUCKETS: &str = "00 28 00 10 00 00 00 00
    00 00 00 10 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 08 00 64 00 00 00 01 00 08 00 00 00 01
    00 28 00 10 00 00 00 01 00 00 00 10 00 00 00 02 00 00 00 00 00 00 00 00 00 00 00 08 00 c8 00 00
    00 01 00 08 00 00 00 02 00 28 00 10 00 00 00 02 00 00 00 10 00 00 00 03 00 00 00 00 00 00 00 00
    00 00 00 08 00 c8 00 00 00 01 00 08 00 00 00 03";

#[test]
fn ofpt_group_mod_add_of15() {
    let hex = format!(
        "06 0f 00 b8 11 22 33 44 00 00 01 00 87 65 43 21 00 78 00 00 ff ff ff ff {OF15_BUCKETS}
        ff ff 00 28 00 00 15 40 00 00 00 01 00 00 00 00 68 61 73 68 00 00 00 00 00 00 00 00 00 00 00 00
        00 00 00 00 00 00 00 07"
    );
    assert_eq!(
        mod_text(&hex),
        " ADD group_id=2271560481,type=select,selection_method=hash,selection_method_param=7,\
         bucket=bucket_id:0,weight:100,watch_port:1,actions=output:1,bucket=bucket_id:1,\
         weight:200,watch_port:2,actions=output:2,bucket=bucket_id:2,weight:200,watch_port:3,\
         actions=output:3"
    );
}

#[test]
fn ofpt_group_mod_insert_bucket_of15() {
    let hex = format!(
        "06 0f 00 90 11 22 33 44 00 03 01 00 87 65 43 21 00 78 00 00 ff ff ff fd {OF15_BUCKETS}"
    );
    assert_eq!(
        mod_text(&hex),
        " INSERT_BUCKET command_bucket_id:first,group_id=2271560481,bucket=bucket_id:0,\
         weight:100,watch_port:1,actions=output:1,bucket=bucket_id:1,weight:200,watch_port:2,\
         actions=output:2,bucket=bucket_id:2,weight:200,watch_port:3,actions=output:3"
    );
}

#[test]
fn group_desc_replies_of10_of11_of15() {
    let of10 = "01 11 00 c8 00 00 00 04 ff ff 00 00 00 00 23 20 00 00 00 08 00 00 00 00
        00 b0 01 00 00 00 20 00 00 60 00 00 00 00 00 00
        00 20 00 08 00 00 00 00 00 00 00 08 00 01 00 00 00 00 00 08 00 64 00 00 00 01 00 08 00 00 00 01
        00 20 00 08 00 00 00 01 00 00 00 08 00 02 00 00 00 00 00 08 00 c8 00 00 00 01 00 08 00 00 00 02
        00 20 00 08 00 00 00 02 00 00 00 08 00 03 00 00 00 00 00 08 00 c8 00 00 00 01 00 08 00 00 00 03
        ff ff 00 3b 00 00 15 40 00 00 00 01 00 00 00 00 68 61 73 68 00 00 00 00 00 00 00 00 00 00 00 00
        00 00 00 00 00 00 00 00 80 00 18 04 ff ff ff 00 80 00 1a 02 ff ff 80 00 14 01 ff 00 00 00 00 00";
    let text = " group_id=8192,type=select,selection_method=hash,\
                fields(ip_dst=255.255.255.0,nw_proto,tcp_src),bucket=bucket_id:0,weight:100,\
                watch_port:1,actions=output:1,bucket=bucket_id:1,weight:200,watch_port:2,\
                actions=output:2,bucket=bucket_id:2,weight:200,watch_port:3,actions=output:3";
    assert_eq!(desc_text(of10), text);
    let of15 = format!(
        "06 13 00 d8 00 00 00 02 00 07 00 00 00 00 00 00 00 c8 01 00 00 00 20 00
        00 78 00 00 00 00 00 00 {OF15_BUCKETS}
        ff ff 00 3b 00 00 15 40 00 00 00 01 00 00 00 00 68 61 73 68 00 00 00 00 00 00 00 00 00 00 00 00
        00 00 00 00 00 00 00 00 80 00 18 04 ff ff ff 00 80 00 1a 02 ff ff 80 00 14 01 ff 00 00 00 00 00"
    );
    assert_eq!(desc_text(&of15), text);
    let of11 = "02 13 00 78 00 00 00 02 00 07 00 00 00 00 00 00 00 68 01 00 00 00 20 00
        00 20 00 64 00 00 00 01 ff ff ff ff 00 00 00 00 00 00 00 10 00 00 00 01 00 00 00 00 00 00 00 00
        00 20 00 c8 00 00 00 02 ff ff ff ff 00 00 00 00 00 00 00 10 00 00 00 02 00 00 00 00 00 00 00 00
        00 20 00 c8 00 00 00 03 ff ff ff ff 00 00 00 00 00 00 00 10 00 00 00 03 00 00 00 00 00 00 00 00";
    assert_eq!(
        desc_text(of11),
        " group_id=8192,type=select,bucket=weight:100,watch_port:1,actions=output:1,\
         bucket=weight:200,watch_port:2,actions=output:2,bucket=weight:200,watch_port:3,\
         actions=output:3"
    );
}

/// The description replies encode as OVS's do (the vectors above, re-encoded from their
/// meaning, the compatibility vendor id aside).
#[test]
fn group_desc_replies_encode_as_ovs() {
    for (v, req_hex) in [
        (
            Version::Of11,
            "02 12 00 10 00 00 00 02 00 07 00 00 00 00 00 00",
        ),
        (
            Version::Of15,
            "06 12 00 18 00 00 00 02 00 07 00 00 00 00 00 00 00 00 00 01 00 00 00 00",
        ),
        (
            Version::Of10,
            "01 10 00 20 00 00 00 04 ff ff 00 00 00 00 23 20 00 00 00 08 00 00 00 00 \
             00 00 00 01 00 00 00 00",
        ),
    ] {
        let req = unhex(&req_hex.replace(' ', ""));
        let mut out = Vec::new();
        let id = if v == Version::Of11 { OFPG_ALL } else { 1 };
        encode_group_desc_request(
            v,
            id,
            u32::from_be_bytes([req[4], req[5], req[6], req[7]]),
            &mut out,
        );
        assert_eq!(out, req, "{v:?}");
        assert_eq!(decode_group_desc_request(&msg(&req)), Ok(id));
        let g = GroupDesc {
            group_id: 8192,
            group_type: GroupType::Select,
            buckets: (1..=3u16)
                .map(|p| Bucket {
                    bucket_id: u32::from(p - 1),
                    weight: if p == 1 { 100 } else { 200 },
                    watch_port: u32::from(p),
                    watch_group: ofproto::group::OFPG_ANY,
                    actions: vec![ofproto::syntax::OfAction::Output {
                        port: u32::from(p),
                        max_len: 0,
                    }],
                })
                .collect(),
            props: GroupProps::default(),
        };
        let r = encode_group_desc_reply(&msg(&req), std::slice::from_ref(&g)).unwrap();
        assert_eq!(decode_group_desc_reply(&msg(&r[0])), Ok(vec![g]));
    }
}

#[test]
fn bad_buckets_and_properties_get_ovs_errors() {
    let dec = |hex: &str| {
        let b = unhex(&hex.replace([' ', '\n'], ""));
        decode_group_mod(&msgtype::decode(&b).unwrap())
    };
    // A bucket shorter than its header.
    assert_eq!(
        dec("04 0f 00 18 00 00 00 01 00 00 00 00 00 00 00 01 00 08 00 00 ff ff ff ff"),
        Err(OfpErr::OfpgmfcBadBucket)
    );
    // An all group whose bucket watches port 5 (ovs-ofctl let it through, OVS refused).
    assert_eq!(
        dec("04 0f 00 30 00 00 00 06 00 00 00 00 00 00 00 01
             00 20 00 00 00 00 00 05 ff ff ff ff 00 00 00 00
             00 00 00 10 00 00 00 01 00 00 00 00 00 00 00 00"),
        Err(OfpErr::OfpgmfcWatchUnsupported)
    );
    // An indirect group without a bucket.
    assert_eq!(
        dec("04 0f 00 10 00 00 00 06 00 00 02 00 00 00 00 02"),
        Err(OfpErr::OfpgmfcInvalidGroup)
    );
    // An unknown type.
    assert_eq!(
        dec("04 0f 00 10 00 00 00 06 00 00 09 00 00 00 00 02"),
        Err(OfpErr::OfpgmfcBadType)
    );
    // An unknown command.
    assert_eq!(
        dec("04 0f 00 10 00 00 00 06 00 07 00 00 00 00 00 02"),
        Err(OfpErr::OfpgmfcBadCommand)
    );
    // An OpenFlow 1.5 add whose command bucket id is not "all".
    assert_eq!(
        dec("06 0f 00 18 00 00 00 06 00 00 00 00 00 00 00 02 00 00 00 00 ff ff ff fd"),
        Err(OfpErr::OfpgmfcBadBucket)
    );
    // A selection method that is neither hash nor dp_hash.
    assert_eq!(
        dec("06 0f 00 40 00 00 00 06 00 00 01 00 00 00 00 02 00 00 00 00 ff ff ff ff
             ff ff 00 28 00 00 15 4d 00 00 00 01 00 00 00 00 66 6f 6f 00 00 00 00 00 00 00 00 00 00 00 00 00
             00 00 00 00 00 00 00 00"),
        Err(OfpErr::OfpbpcBadValue)
    );
}

fn bucket15() -> impl Strategy<Value = (u16, u8, Option<u16>)> {
    (0u16..300, 1u8..5, proptest::option::of(1u16..5))
}

proptest! {
    /// Encoding then decoding gives the group mod back, in every version.
    #[test]
    fn group_mod_round_trip(
        v in 1u8..=6,
        t in 0u8..4,
        id in 0u32..=0xffff_ff00,
        buckets in proptest::collection::vec(bucket15(), 1..4),
        method in 0usize..3,
        param: u32,
    ) {
        let v = Version::from_wire(v).unwrap();
        let t = GroupType::from_wire(t).unwrap();
        let buckets: Vec<(u16, u8, Option<u16>)> = if t == GroupType::Indirect {
            buckets[..1].to_vec()
        } else {
            buckets
        };
        let mut gm = GroupMod::new(GroupCommand::Add, id);
        gm.group_type = t;
        for (i, (w, port, watch)) in buckets.into_iter().enumerate() {
            let mut b = Bucket::new(t, vec![ofproto::syntax::OfAction::Output {
                port: u32::from(port),
                max_len: 0,
            }]);
            b.bucket_id = if layout15(v) { 10 * i as u32 + 3 } else { i as u32 };
            match t {
                GroupType::Select => {
                    b.weight = w;
                    b.watch_port = watch.map_or(OFPP_ANY, u32::from);
                }
                GroupType::FastFailover => b.watch_port = u32::from(watch.unwrap_or(1)),
                _ => {}
            }
            gm.buckets.push(b);
        }
        if layout15(v) && t == GroupType::Select && method > 0 {
            gm.props.selection_method = if method == 1 { "hash" } else { "dp_hash" }.into();
            gm.props.selection_method_param = u64::from(param);
            if method == 1 {
                gm.props.fields = vec![
                    (FieldId::IPV4_SRC, 0xffff_ff00),
                    (FieldId::IP_PROTO, 0xff),
                ];
            }
        }
        let mut out = Vec::new();
        encode_group_mod(v, 7, &gm, &mut out).unwrap();
        let m = msgtype::decode(&out).unwrap();
        prop_assert_eq!(decode_group_mod(&m).unwrap(), gm);
    }

    /// Whatever the bytes, decoding answers without panicking.
    #[test]
    fn random_bodies_never_panic(v in 1u8..=6, body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let v = Version::from_wire(v).unwrap();
        for t in [
            MsgType::NxtGroupMod,
            MsgType::Ofpt11GroupMod,
            MsgType::Ofpt15GroupMod,
            MsgType::NxstGroupDescReply,
            MsgType::Ofpst11GroupDescReply,
            MsgType::NxstGroupDescRequest,
            MsgType::Ofpst15GroupDescRequest,
        ] {
            let mut m = Vec::new();
            if t.encode(v, 0, &body, &mut m).is_ok() && let Ok(d) = msgtype::decode(&m) {
                let _ = decode_group_mod(&d);
                let _ = decode_group_desc_reply(&d);
                let _ = decode_group_desc_request(&d);
            }
        }
    }
}
