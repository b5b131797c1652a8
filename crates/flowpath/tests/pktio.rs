//! Packets between the switch and its controllers, over `br0.mgmt` with a small OpenFlow 1.3
//! client: packet-ins from packets injected on dummy ports (`netdev-dummy/receive`), a
//! `controller(pause)` round trip that goes on with a register changed and the user data
//! given, a packet-out through a `resubmit`, a flow-removed on a hard timeout, and a client
//! that never reads costing the switch bounded memory.

mod common;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::ofctl::{read_msg, unhex};
use common::{Reap, scratch_dir, start_switch};
use ofproto::fields::FieldId;
use ofproto::syntax::OfAction;
use openflow::header::Version;
use openflow::msgs::nicira::{PacketInFormat, encode_set_packet_in_format};
use openflow::msgs::packet_in::{NO_BUFFER, PacketIn};
use openflow::msgs::packet_out::{OFPP_CONTROLLER, PacketOut, port_match};
use openflow::msgtype::{self, MsgType};
use openflow::nxm::TlvLens;

const CONFIG: &str = r#"
[[bridge]]
name = "br0"
flows = [
  "table=0,in_port=1,actions=load:7->NXM_NX_REG1[],controller(pause,userdata=aa.bb),load:8->NXM_NX_REG2[],resubmit(,1)",
  "table=0,in_port=2,actions=clone(controller,controller,controller,controller),clone(controller,controller,controller,controller),clone(controller,controller,controller,controller),clone(controller,controller,controller,controller),clone(controller,controller,controller,controller),clone(controller,controller,controller,controller),clone(controller,controller,controller,controller),clone(controller,controller,controller,controller)",
  "table=1,cookie=0x42,actions=controller",
  "table=2,send_flow_rem,hard_timeout=1,priority=3,ip,actions=drop",
]

[[bridge.port]]
name = "p1"
type = "dummy"
ofport = 1

[[bridge.port]]
name = "p2"
type = "dummy"
ofport = 2
"#;

/// An IPv4/UDP frame from 10.0.0.1 to 10.0.0.2.
const UDP: &str =
    "50540000000250540000000108004500001c00010000401166c40a0000010a0000020001000200080000";

fn switch(tag: &str) -> (Reap, PathBuf, common::RmDir) {
    let (dir, guard) = scratch_dir(tag);
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let rundir = dir.join("run");
    let sw = start_switch(&cfg, &rundir);
    let t = Instant::now();
    while !rundir.join("br0.mgmt").exists() {
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
    (sw, rundir, guard)
}

fn receive(rundir: &Path, port: &str, hex: &str) {
    let o = Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .args(["ctl", "--rundir"])
        .arg(rundir)
        .args(["netdev-dummy/receive", port, hex])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
}

/// An OpenFlow 1.3 connection past its hellos that asked for whole packets (a service
/// connection gets no asynchronous message before) in `format`.
fn controller(rundir: &Path, format: PacketInFormat) -> UnixStream {
    let mut s = UnixStream::connect(rundir.join("br0.mgmt")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&unhex("04000010000000000001000800000010"))
        .unwrap();
    assert_eq!(read_msg(&mut s).unwrap()[1], 0);
    // OFPT_SET_CONFIG, miss_send_len 0xffff.
    s.write_all(&unhex("0409000c000000020000ffff")).unwrap();
    let mut m = Vec::new();
    encode_set_packet_in_format(format, Version::Of13, 3, &mut m);
    s.write_all(&m).unwrap();
    s
}

/// The next message of one of `types`, the others skipped.
fn next_of(s: &mut UnixStream, types: &[MsgType]) -> Vec<u8> {
    loop {
        let m = read_msg(s).unwrap();
        if msgtype::decode(&m).is_ok_and(|d| types.contains(&d.msg_type)) {
            return m;
        }
    }
}

fn next_packet_in(s: &mut UnixStream) -> PacketIn {
    let m = next_of(
        s,
        &[
            MsgType::Ofpt13PacketIn,
            MsgType::NxtPacketIn,
            MsgType::NxtPacketIn2,
        ],
    );
    PacketIn::decode(&msgtype::decode(&m).unwrap()).unwrap()
}

fn reg(pi: &PacketIn, n: usize) -> u128 {
    FieldId::reg(n).field().get(pi.metadata.key())
}

#[test]
fn a_paused_pipeline_resumes_with_its_registers_and_goes_on() {
    let (_sw, rundir, _g) = switch("fp-pktio-pause");
    let mut c = controller(&rundir, PacketInFormat::NxtPacketIn2);
    receive(&rundir, "p1", UDP);
    let paused = next_packet_in(&mut c);
    assert_eq!(paused.userdata, vec![0xaa, 0xbb]);
    assert_eq!(reg(&paused, 1), 7);
    assert_eq!(reg(&paused, 2), 0);
    assert_eq!(paused.packet, unhex(UDP));
    let cont = paused.continuation.clone().expect("a continuation");
    assert!(!cont.actions.is_empty());
    c.write_all(&paused.encode_resume(Version::Of13, &TlvLens::default()))
        .unwrap();
    let after = next_packet_in(&mut c);
    assert_eq!((after.table_id, after.cookie), (1, 0x42));
    assert_eq!((reg(&after, 1), reg(&after, 2)), (7, 8));
    assert!(after.continuation.is_none());

    // A continuation for another bridge (or from another run) is refused.
    let mut forged = paused.clone();
    forged.continuation.as_mut().unwrap().bridge = [1; 16];
    c.write_all(&forged.encode_resume(Version::Of13, &TlvLens::default()))
        .unwrap();
    let e = next_of(&mut c, &[MsgType::OfptError]);
    // NXR_STALE: Nicira's experimenter error 35 in OpenFlow 1.2 and later.
    assert_eq!(&e[8..16], &[0xff, 0xff, 0, 35, 0, 0, 0x23, 0x20], "{e:?}");
}

#[test]
fn a_packet_out_goes_through_a_resubmit_and_its_packet_in_comes_back() {
    let (_sw, rundir, _g) = switch("fp-pktio-out");
    let mut c = controller(&rundir, PacketInFormat::Standard);
    let po = PacketOut {
        buffer_id: NO_BUFFER,
        metadata: port_match(OFPP_CONTROLLER),
        actions: vec![OfAction::Resubmit {
            port: None,
            table: Some(1),
            ct: false,
        }],
        packet: unhex(UDP),
    };
    let mut m = Vec::new();
    po.encode(Version::Of13, 9, &TlvLens::default(), &mut m)
        .unwrap();
    c.write_all(&m).unwrap();
    let pi = next_packet_in(&mut c);
    assert_eq!(pi.packet, unhex(UDP));
    assert_eq!(pi.metadata.key().dp.in_port(), OFPP_CONTROLLER);
    assert_eq!((pi.table_id, pi.cookie), (1, 0x42));

    // A buffered packet this switch does not have: OFPBRC_BUFFER_UNKNOWN (type 1, code 8).
    let mut bad = po.clone();
    bad.buffer_id = 5;
    bad.packet.clear();
    let mut m = Vec::new();
    bad.encode(Version::Of13, 10, &TlvLens::default(), &mut m)
        .unwrap();
    c.write_all(&m).unwrap();
    let e = next_of(&mut c, &[MsgType::OfptError]);
    assert_eq!(&e[8..12], &[0, 1, 0, 8]);
}

#[test]
fn a_rule_that_expires_is_told_to_the_controller() {
    let (_sw, rundir, _g) = switch("fp-pktio-removed");
    let mut c = controller(&rundir, PacketInFormat::Standard);
    let m = next_of(&mut c, &[MsgType::Ofpt11FlowRemoved]);
    let d = msgtype::decode(&m).unwrap();
    // Table 2, priority 3, reason hard (1).
    assert_eq!(u16::from_be_bytes([d.body[8], d.body[9]]), 3);
    assert_eq!(d.body[10], 1);
    assert_eq!(d.body[11], 2);
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_controller_that_never_reads_costs_bounded_memory() {
    let (sw, rundir, _g) = switch("fp-pktio-slow");
    let _silent = controller(&rundir, PacketInFormat::NxtPacketIn2);
    // 1400-byte frames, each sent to the controller 32 times.
    let big = format!("{}{}", &UDP[..UDP.len() - 8], "00".repeat(1350));
    receive(&rundir, "p2", &big);
    std::thread::sleep(Duration::from_millis(300));
    let before = rss_kb(sw.0.id());
    for _ in 0..40 {
        receive(&rundir, "p2", &big);
    }
    std::thread::sleep(Duration::from_millis(300));
    let after = rss_kb(sw.0.id());
    // 1280 packet-ins of 1.4 kB, kept, would be 1.8 MB more at least; the connection's queue
    // of asynchronous messages holds 100 of them, and the rest are dropped.
    assert!(after < before + 1024, "{before} kB -> {after} kB");
    // The switch still answers a new controller.
    let mut c = controller(&rundir, PacketInFormat::Standard);
    receive(&rundir, "p1", UDP);
    assert!(!next_packet_in(&mut c).packet.is_empty());
}
