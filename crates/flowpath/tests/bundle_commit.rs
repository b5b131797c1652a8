//! A long bundle commit does not stop the switch's OpenFlow server: while one connection's
//! commit of many flow mods is carried out, another connection's echo requests are answered;
//! the committing connection's own later requests (a barrier, an echo) are answered after the
//! commit's reply and in their order, as OVS answers a connection's requests; and the flows are
//! all in once the commit replies. A group mod the commit carries out is forwarded to the
//! connections that asked (requestforward).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::ofctl::{client_of, hex, read_msg, unhex};
use common::{scratch_dir, start_switch};
use ofproto::syntax::{FlowKind, NoPortNames, parse_flow};
use openflow::flow_mod::{FlowMod, FlowModCommand, NO_BUFFER, Protocol, encode_flow_mod};
use openflow::header::Version;
use openflow::msgs::bundle::{BundleAdd, BundleCtrl, BundleCtrlType};

const CONFIG: &str = r#"
[[bridge]]
name = "br0"

[[bridge.port]]
name = "p1"
type = "dummy"
ofport = 1
"#;

/// Flow mods in the bundle: enough that the commit takes a while, even in an optimised build.
const N_FLOWS: u32 = 20_000;

const OFPT_ECHO_REQUEST: u8 = 2;
const OFPT_ECHO_REPLY: u8 = 3;
const OFPT_BARRIER_REPLY: u8 = 21;
const OFPT_BUNDLE_CONTROL: u8 = 33;

/// An OpenFlow 1.4 connection to `mgmt`, past its hellos.
fn client(mgmt: &Path) -> UnixStream {
    client_of(mgmt, 5, Duration::from_secs(120))
}

fn simple(t: u8, xid: u32) -> Vec<u8> {
    let mut m = vec![5, t, 0, 8];
    m.extend(xid.to_be_bytes());
    m
}

fn xid(m: &[u8]) -> u32 {
    u32::from_be_bytes([m[4], m[5], m[6], m[7]])
}

fn ctrl(t: BundleCtrlType, xid: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let c = BundleCtrl {
        bundle_id: 1,
        ctrl_type: t,
        flags: 1,
    };
    c.encode(Version::Of14, xid, &mut out).unwrap();
    out
}

/// The bundle's adds: `N_FLOWS` distinct flows, each in its own bundle add message.
fn bundle_adds() -> Vec<u8> {
    let proto = Protocol::new(Version::Of14);
    let mut out = Vec::new();
    for i in 0..N_FLOWS {
        let text = format!(
            "priority={},ip,nw_src=192.168.{}.{},actions=output:1",
            100 + i % 7,
            i >> 8,
            i & 255
        );
        let fm = FlowMod {
            command: FlowModCommand::Add,
            spec: parse_flow(&text, FlowKind::Add, &NoPortNames).unwrap(),
            buffer_id: NO_BUFFER,
        };
        let mut m = Vec::new();
        encode_flow_mod(&fm, proto, 1000 + i, &Default::default(), &mut m).unwrap();
        let add = BundleAdd {
            bundle_id: 1,
            flags: 1,
            msg: &m,
        };
        add.encode(Version::Of14, &mut out).unwrap();
    }
    out
}

/// Whether nothing waits to be read on `s` (what does is read, and the test fails).
fn nothing_to_read(s: &mut UnixStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let r = s.read(&mut [0; 8]);
    s.set_nonblocking(false).unwrap();
    matches!(r, Err(e) if e.kind() == ErrorKind::WouldBlock)
}

/// The number of flows on br0, from an OpenFlow 1.4 aggregate statistics request.
fn flow_count(s: &mut UnixStream) -> u32 {
    let mut req = unhex("05120038000000090002000000000000ff000000ffffffffffffffff00000000");
    req.extend([0; 16]);
    req.extend(unhex("0001000400000000"));
    s.write_all(&req).unwrap();
    let r = read_msg(s).unwrap();
    assert_eq!((r[1], xid(&r)), (19, 9), "{}", hex(&r));
    u32::from_be_bytes([r[32], r[33], r[34], r[35]])
}

/// The switch of [`CONFIG`] in scratch directory `name`, and br0's management socket once it
/// listens; the guards keep both until dropped.
fn switch(name: &str) -> ((common::Reap, common::RmDir), PathBuf) {
    let (dir, g) = scratch_dir(name);
    let cfg = dir.join("sw.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let rundir = dir.join("run");
    let sw = start_switch(&cfg, &rundir);
    let mgmt = rundir.join("br0.mgmt");
    let t = Instant::now();
    while !mgmt.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no {}",
            mgmt.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    ((sw, g), mgmt)
}

#[test]
fn echo_requests_are_answered_while_a_big_bundle_commits_and_replies_stay_in_order() {
    let (_sw, mgmt) = switch("fp-bundle-commit");
    let mut a = client(&mgmt);
    let mut b = client(&mgmt);
    let before = flow_count(&mut b);
    // The bundle opened and filled; the barrier's reply says every add was taken.
    let adds = bundle_adds();
    let writer = {
        let mut w = a.try_clone().unwrap();
        std::thread::spawn(move || {
            w.write_all(&ctrl(BundleCtrlType::OpenRequest, 1)).unwrap();
            w.write_all(&adds).unwrap();
            w.write_all(&simple(20, 2)).unwrap();
        })
    };
    let open = read_msg(&mut a).unwrap();
    assert_eq!(
        (open[1], xid(&open)),
        (OFPT_BUNDLE_CONTROL, 1),
        "{}",
        hex(&open)
    );
    let barrier = read_msg(&mut a).unwrap();
    assert_eq!(
        (barrier[1], xid(&barrier)),
        (OFPT_BARRIER_REPLY, 2),
        "{}",
        hex(&barrier)
    );
    writer.join().unwrap();
    // The commit, then a barrier and an echo on the same connection; then, on the other
    // connection, an echo: its reply comes while the commit is still under way.
    let mut then = ctrl(BundleCtrlType::CommitRequest, 3);
    then.extend(simple(20, 4));
    then.extend(simple(OFPT_ECHO_REQUEST, 5));
    a.write_all(&then).unwrap();
    b.write_all(&simple(OFPT_ECHO_REQUEST, 6)).unwrap();
    let echo = read_msg(&mut b).unwrap();
    assert_eq!(
        (echo[1], xid(&echo)),
        (OFPT_ECHO_REPLY, 6),
        "{}",
        hex(&echo)
    );
    assert!(
        nothing_to_read(&mut a),
        "the commit replied before an echo on another connection was answered"
    );
    // The committing connection's replies, in its requests' order: the commit's first.
    let replies: Vec<Vec<u8>> = (0..3).map(|_| read_msg(&mut a).unwrap()).collect();
    let got: Vec<(u8, u32)> = replies.iter().map(|m| (m[1], xid(m))).collect();
    assert_eq!(
        got,
        [
            (OFPT_BUNDLE_CONTROL, 3),
            (OFPT_BARRIER_REPLY, 4),
            (OFPT_ECHO_REPLY, 5)
        ]
    );
    // The reply's flags are 0, whatever the request's, as OVS's.
    let mut commit_reply = ctrl(BundleCtrlType::CommitReply, 3);
    commit_reply[15] = 0;
    assert_eq!(hex(&replies[0]), hex(&commit_reply));
    // Every flow is in, whichever connection asks.
    assert_eq!(flow_count(&mut b), before + N_FLOWS);
    assert_eq!(flow_count(&mut a), before + N_FLOWS);
    let mut rest = Vec::new();
    a.set_nonblocking(true).unwrap();
    assert!(matches!(a.read_to_end(&mut rest), Err(e) if e.kind() == ErrorKind::WouldBlock));
    assert!(rest.is_empty(), "{}", hex(&rest));
}

/// A group mod committed in a bundle is forwarded to the connections that asked for request
/// forwards, as one outside a bundle is (OVS's `connmgr_send_requestforward()` at the
/// commit).
#[test]
fn a_group_mod_committed_in_a_bundle_is_forwarded_to_who_asked() {
    let (_sw, mgmt) = switch("fp-bundle-forward");
    let mut a = client(&mgmt);
    let mut b = client(&mgmt);
    // b: OFPT_SET_ASYNC with OFPACPT_REQUESTFORWARD_MASTER, group and meter mods; a barrier
    // so that it is in force before the bundle.
    b.write_all(&unhex("051c001000000002000b000800000003"))
        .unwrap();
    b.write_all(&simple(20, 3)).unwrap();
    assert_eq!(read_msg(&mut b).unwrap()[1], OFPT_BARRIER_REPLY);
    // ADD group_id=1,type=all,bucket=actions=drop, xid 9, in a bundle.
    let gm = unhex(
        "050f0020000000090000000000000001\
                    00100000ffffffffffffffff00000000",
    );
    let mut add = Vec::new();
    let bundled = BundleAdd {
        bundle_id: 1,
        flags: 1,
        msg: &gm,
    };
    bundled.encode(Version::Of14, &mut add).unwrap();
    a.write_all(&ctrl(BundleCtrlType::OpenRequest, 1)).unwrap();
    a.write_all(&add).unwrap();
    a.write_all(&ctrl(BundleCtrlType::CommitRequest, 4))
        .unwrap();
    for want in [1, 4] {
        let r = read_msg(&mut a).unwrap();
        assert_eq!((r[1], xid(&r)), (OFPT_BUNDLE_CONTROL, want), "{}", hex(&r));
    }
    // OFPT_REQUESTFORWARD (type 32) carrying the group mod, its xid kept.
    b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let fwd = read_msg(&mut b).expect("the request forward");
    assert_eq!(fwd[1], 32, "{}", hex(&fwd));
    assert_eq!(hex(&fwd[8..]), hex(&gm));
    assert!(nothing_to_read(&mut a));
}
