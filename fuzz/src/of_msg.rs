//! Invariant checks of the `of_msg` fuzz target, shared with the crash-regression test
//! (`crates/openflow/tests/fuzz_regressions.rs` path-imports this file), so that a committed
//! input is replayed through exactly the checks that found it.
//!
//! The input is either a byte stream a peer could send (first byte below 0x80), or one message
//! built around arbitrary bytes (first byte 0x80 and up: the version in its low 3 bits, the
//! next two bytes the message form, the rest the body), so that every form's body decoder is
//! reached with a valid header. Either way:
//! - the stream goes through a connection's receive path (framing, hello, echo, version
//!   checks) in chunks of a size the input picks, which must hold no more than one message
//!   and one read in its buffer;
//! - every message goes through [`openflow::msgs::decode::decode`] and the flow codecs (flow
//!   mods, flow removed, flow and aggregate statistics, flow monitor requests, updates and
//!   cancels): what reads must write again and read
//!   back to the same value (messages) or be a fixed point of write ∘ read (flows, whose
//!   actions the writer may join);
//! - a set-async or get-async reply is read (strictly and loosely) and written again as a
//!   set-async that reads back the same;
//! - every body goes through the action, instruction and match decoders of every version
//!   with the same invariants.
//!
//! "Bounded allocation": what is written again is at most a fixed multiple of what was read
//! (plus the fixed parts of a message); the fuzzer's `-malloc_limit_mb` catches the rest.

use openflow::actions::{self, FlowCtx};
use openflow::conn::rx_stream;
use openflow::flow_mod::{self, Protocol};
use openflow::flow_removed;
use openflow::flow_stats;
use openflow::header::Version;
use openflow::hello::VersionSet;
use openflow::msgs::{decode, encode, flow_monitor};
use openflow::msgtype::{self, MsgType, OfpType};
use openflow::nxm::{self, TlvLens};
use openflow::{match10, match11};

/// What a re-encoding may grow to: `FACTOR` times the input, plus `SLACK` bytes of fixed
/// parts (headers, the fixed matches of OpenFlow 1.0 and 1.1, statistics headers).
const FACTOR: usize = 8;
const SLACK: usize = 1024;

fn bounded(what: &str, input: usize, output: usize) {
    assert!(
        output <= FACTOR * input + SLACK,
        "{what}: {input} bytes read, {output} written"
    );
}

/// Runs every check on `data`.
pub fn check_of_msg(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let msgs = if sel >= 0x80 {
        let Some(m) = build(sel, rest) else { return };
        check_stream(&m, 1 + usize::from(sel >> 3 & 0xf));
        vec![m]
    } else {
        check_stream(rest, 1 + usize::from(sel) * 97);
        split(rest)
    };
    for m in &msgs {
        check_message(m);
        check_async_config(m);
        if let Ok(d) = msgtype::decode(m) {
            check_body(d.body);
        }
    }
    if sel >= 0x80 {
        check_body(rest.get(2..).unwrap_or_default());
    }
}

/// The message of form number `rest[..2]` (among [`MsgType::all`]) in the version `sel`'s low
/// bits name, with the rest of `rest` as its body.
fn build(sel: u8, rest: &[u8]) -> Option<Vec<u8>> {
    let (form, body) = rest.split_at_checked(2)?;
    let n = MsgType::all().count();
    let t = MsgType::all().nth(usize::from(u16::from_be_bytes([form[0], form[1]])) % n)?;
    let v = Version::from_wire(1 + (sel & 7) % 6)?;
    let mut m = Vec::new();
    t.encode(v, 0x1234_5678, body, &mut m).ok()?;
    Some(m)
}

/// The whole messages a stream holds, by their headers' lengths.
fn split(mut b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Ok(Some(n)) = openflow::header::message_len(b) {
        out.push(b[..n].to_vec());
        b = &b[n..];
    }
    out
}

/// A connection's receive path over `stream`, `chunk` bytes a read: it holds at most one
/// message and one read, and what it passes up are whole messages of the stream.
fn check_stream(stream: &[u8], chunk: usize) {
    let run = rx_stream::receive(VersionSet::ALL, stream, chunk);
    assert!(
        run.max_buffered <= openflow::header::MAX_MESSAGE_LEN + 16 * 1024 + chunk,
        "buffered {}",
        run.max_buffered
    );
    let mut total = 0;
    for g in &run.got {
        if let rx_stream::Received::Msg(m) = g {
            let n = usize::from(u16::from_be_bytes([m[2], m[3]]));
            assert_eq!(n, m.len(), "a message passed up is whole");
            total += m.len();
        }
    }
    assert!(total <= stream.len());
    bounded("connection output", stream.len(), run.sent.len());
}

/// A set-async or get-async reply of any form (which the message decoder leaves to the
/// caller, who knows the connection's configuration): what reads, strictly or loosely, writes
/// again as a set-async of every message type and reads back the same.
fn check_async_config(m: &[u8]) {
    use openflow::msgs::async_config::AsyncConfig;
    let Ok(from) = msgtype::decode(m) else { return };
    if !matches!(
        from.msg_type.kind(),
        OfpType::SetAsyncConfig | OfpType::GetAsyncReply
    ) {
        return;
    }
    let Some(v) = Version::from_wire(from.version) else {
        return;
    };
    for loose in [false, true] {
        let Ok(c) = AsyncConfig::decode(&from, &AsyncConfig::default(), loose) else {
            continue;
        };
        let mut out = Vec::new();
        c.encode_set(v, from.xid, 0x3f, &mut out);
        bounded(from.msg_type.name(), m.len(), out.len());
        let again = msgtype::decode(&out).expect("a set-async written reads");
        let back = AsyncConfig::decode(&again, &AsyncConfig::default(), false);
        assert_eq!(
            back,
            Ok(c),
            "{}: read again differently",
            from.msg_type.name()
        );
    }
}

/// One message through the message decoder and the flow codecs.
fn check_message(m: &[u8]) {
    let Ok(from) = msgtype::decode(m) else { return };
    if let Ok(d) = decode::decode(m)
        && let Some(again) = encode::encode(&d, &from)
    {
        let total: usize = again.iter().map(Vec::len).sum();
        bounded(from.msg_type.name(), m.len(), total);
        assert_eq!(
            again.len(),
            1,
            "{}: one message read, more written",
            from.msg_type.name()
        );
        let back = decode::decode(&again[0]);
        assert_eq!(
            back.as_ref(),
            Ok(&d),
            "{}: read again differently",
            from.msg_type.name()
        );
    }
    for table_id in [false, true] {
        // the first pass may fail (bytes no codec takes); what it wrote must then go through
        let Some(Ok(e1)) = flow_written_again(m, table_id) else {
            continue;
        };
        bounded(from.msg_type.name(), m.len(), e1.len());
        match flow_written_again(&e1, table_id) {
            Some(Ok(e2)) => assert_eq!(e1, e2, "{}: not a fixed point", from.msg_type.name()),
            other => panic!("{}: written, then {other:?}", from.msg_type.name()),
        }
    }
}

/// A flow message (flow mod, flow removed, flow or aggregate statistics) read and written
/// again by its codec, `table_id` saying whether OpenFlow 1.0 flow mod commands carry a table
/// id: `None` for another message, an error when the codec does not read it or cannot write
/// it again.
pub fn flow_written_again(m: &[u8], table_id: bool) -> Option<Result<Vec<u8>, String>> {
    let from = msgtype::decode(m).ok()?;
    let v = Version::from_wire(m[0])?;
    let tlv = TlvLens::default();
    let read = |e: openflow::error::OfpErr| format!("the flow codec refuses it: {e}");
    let mut out = Vec::new();
    let written = (|| {
        let (proto, wrote) = match from.msg_type.kind() {
            OfpType::FlowMod => {
                let nxm = flow_mod::is_nx_msg(m, flow_mod::NXT_FLOW_MOD);
                let proto = Protocol {
                    version: v,
                    nxm,
                    table_id,
                };
                let fm = flow_mod::decode_flow_mod(m, table_id).map_err(read)?;
                (
                    proto,
                    flow_mod::encode_flow_mod(&fm, proto, from.xid, &tlv, &mut out),
                )
            }
            OfpType::FlowRemoved => {
                let nxm = v == Version::Of10 && m[1] == 4;
                let proto = Protocol {
                    version: v,
                    nxm,
                    table_id: false,
                };
                let fr = flow_removed::decode_flow_removed(m).map_err(read)?;
                let w = flow_removed::encode_flow_removed(&fr, proto, from.xid, &tlv, &mut out);
                (proto, w)
            }
            OfpType::FlowStatsRequest | OfpType::AggregateStatsRequest => {
                let (proto, ..) = flow_stats::classify(m).ok_or("no flow statistics form")?;
                let r = flow_stats::decode_flow_stats_request(m).map_err(read)?;
                let w = flow_stats::encode_flow_stats_request(&r, proto, from.xid, &tlv, &mut out);
                (proto, w)
            }
            OfpType::FlowStatsReply => {
                let (proto, ..) = flow_stats::classify(m).ok_or("no flow statistics form")?;
                let (f, _) = flow_stats::decode_flow_stats_reply(m).map_err(read)?;
                let w = flow_stats::encode_flow_stats_reply(&f, proto, from.xid, &tlv, &mut out);
                (proto, w)
            }
            OfpType::AggregateStatsReply => {
                let (proto, ..) = flow_stats::classify(m).ok_or("no flow statistics form")?;
                let a = flow_stats::decode_aggregate_reply(m).map_err(read)?;
                (
                    proto,
                    flow_stats::encode_aggregate_reply(&a, proto, from.xid, &mut out),
                )
            }
            OfpType::FlowMonitorStatsRequest => {
                let r = flow_monitor::decode_flow_monitor_request(&from).map_err(read)?;
                let w = flow_monitor::encode_flow_monitor_request(&r, v, from.xid, &tlv, &mut out);
                (Protocol::new(v), w)
            }
            OfpType::FlowMonitorStatsReply => {
                let (updates, _) = flow_monitor::decode_flow_update_reply(&from).map_err(read)?;
                let mut w = flow_monitor::FlowUpdateWriter::new(v, from.xid, &mut out);
                let wrote = updates
                    .iter()
                    .try_for_each(|u| w.push(u, &tlv))
                    .and_then(|()| w.finish());
                (Protocol::new(v), wrote)
            }
            OfpType::FlowMonitorCancel => {
                let id = flow_monitor::decode_flow_monitor_cancel(&from).map_err(read)?;
                flow_monitor::encode_flow_monitor_cancel(id, v, from.xid, &mut out);
                (Protocol::new(v), Ok(()))
            }
            _ => return Ok(None),
        };
        wrote.map_err(|e| format!("the flow codec cannot write it again in {proto:?}: {e}"))?;
        Ok(Some(()))
    })();
    match written {
        Ok(Some(())) => Some(Ok(out)),
        Ok(None) => None,
        Err(e) => Some(Err(e)),
    }
}

/// Read `input`; if it reads and writes again, what is written reads, and writes again to the
/// same bytes.
fn fixed_point<T: std::fmt::Debug>(
    what: &str,
    input: &[u8],
    read: impl Fn(&[u8]) -> Option<T>,
    write: impl Fn(&T, &mut Vec<u8>) -> bool,
) {
    let Some(first) = read(input) else { return };
    let mut e1 = Vec::new();
    if !write(&first, &mut e1) {
        return;
    }
    bounded(what, input.len(), e1.len());
    let second = read(&e1).unwrap_or_else(|| panic!("{what}: {first:?} written does not read"));
    let mut e2 = Vec::new();
    assert!(
        write(&second, &mut e2),
        "{what}: {second:?} read back does not write"
    );
    assert_eq!(
        e1, e2,
        "{what}: not a fixed point: {first:?} then {second:?}"
    );
}

/// Arbitrary bytes as the actions, instructions and matches of every version.
fn check_body(b: &[u8]) {
    for v in Version::ALL {
        fixed_point(
            "actions",
            b,
            |b| actions::decode_actions(v, b).ok(),
            |a, out| actions::encode_actions(v, a, FlowCtx::default(), out).is_ok(),
        );
        fixed_point(
            "instructions",
            b,
            |b| actions::decode_instructions(v, b).ok(),
            |a, out| actions::encode_instructions(v, a, FlowCtx::default(), out).is_ok(),
        );
        if v >= Version::Of12 {
            fixed_point(
                "oxm match",
                b,
                |b| nxm::pull_oxm_match(b).ok().map(|(m, _)| m),
                |m, out| {
                    nxm::put_oxm_match(out, v, m, &TlvLens::default());
                    true
                },
            );
        }
    }
    fixed_point(
        "nx_match",
        b,
        |b| nxm::pull_raw(b, true).ok(),
        |m, out| {
            let n = nxm::put_nx_match(out, &m.match_, m.cookie, m.cookie_mask, &TlvLens::default());
            // the padding is the message's, not the match's
            out.truncate(n);
            true
        },
    );
    if let Ok(m) = match11::decode(b) {
        let e = match11::encode(&m);
        if let Ok(m2) = match11::decode(&e) {
            assert_eq!(match11::encode(&m2), e, "match11: not a fixed point");
        }
    }
    if let Some(b40) = b.first_chunk::<{ match10::OFP10_MATCH_LEN }>() {
        let m = match10::decode(b40);
        let e = match10::encode(&m);
        assert_eq!(
            match10::encode(&match10::decode(&e)),
            e,
            "match10: not a fixed point"
        );
    }
}
