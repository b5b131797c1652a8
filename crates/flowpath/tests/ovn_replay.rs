//! OVN's `ovn-controller` 23.03 replayed against flowpath: the OpenFlow conversation it had
//! with `ovs-vswitchd` 3.1 on `br-int.mgmt` (`testdata/openflow/ovn/conversation.txt`, recorded
//! by `scripts/record-ovn-openflow` for a topology with ACLs, a conjunctive ACL, a load
//! balancer, a router with SNAT, DHCP and a metered log ACL) is sent again, message for
//! message, on as many connections as it had, to `flowpath run` with a bridge br-int. The
//! switch must answer no message with an error, and `ovs-ofctl dump-flows` and `dump-groups`
//! of br-int must then print what they printed against `ovs-vswitchd`.
//!
//! What does not work yet is listed in `testdata/openflow/ovn/flowpath-known-failures.txt`,
//! each entry under the reason it fails for; the test fails on any difference not listed and
//! on any listed entry that no longer differs, so that the list shrinks as the features land.
//!
//! Bundles are replayed as recorded, and also unpacked (each bundled message sent on its own,
//! the bundle controls left out): OVN's first bundle holds every flow and group, and one
//! message it refuses would leave the whole table empty and hide which flows work. The
//! unpacked replay names the refused messages; the recorded one must then fail exactly in the
//! bundles that hold them.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::ofctl::{ofctl, ovs_ofctl_missing, unhex};
use common::{scratch_dir, start_switch};
use openflow::msgs::bundle::{BundleAdd, BundleCtrl};
use openflow::msgtype::{self, OfpType};

const CONVERSATION: &str = include_str!("../../../testdata/openflow/ovn/conversation.txt");
const OVS_FLOWS: &str = include_str!("../../../testdata/openflow/ovn/dump-flows.txt");
const OVS_GROUPS: &str = include_str!("../../../testdata/openflow/ovn/dump-groups.txt");

/// What fails today (see [`known`]).
const KNOWN: &str = include_str!("../../../testdata/openflow/ovn/flowpath-known-failures.txt");

/// The entries of [`KNOWN`], each with its reason: a line `reason: WHY` gives the reason of
/// the entries after it, until the next. An entry is `refused ERROR: MSG` for a message
/// flowpath refuses (MSG as [`printed`] prints it), `missing: LINE` or `extra: LINE` for a
/// `dump-flows` or `dump-groups` line printed against `ovs-vswitchd` only, or against flowpath
/// only (a line missing because its message was refused is not listed again).
/// `OVN_REPLAY_PRINT=1` prints what a replay finds.
fn known() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut reason: Option<&str> = None;
    for l in KNOWN
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        if let Some(r) = l.strip_prefix("reason: ") {
            reason = Some(r);
            continue;
        }
        let r = reason.unwrap_or_else(|| panic!("no reason for {l}"));
        assert!(
            out.insert(l.to_owned(), r.to_owned()).is_none(),
            "twice: {l}"
        );
    }
    out
}

/// One recorded message.
struct Recorded {
    conn: u32,
    to_switch: bool,
    bytes: Vec<u8>,
}

fn conversation() -> Vec<Recorded> {
    CONVERSATION
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Recorded {
                conn: f[0].parse().unwrap(),
                to_switch: f[1] == "c2s",
                bytes: unhex(f[3]),
            }
        })
        .collect()
}

/// A connection to br-int.mgmt, what it receives collected by a thread.
struct Conn {
    stream: UnixStream,
    got: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Conn {
    fn open(path: &Path) -> Conn {
        let stream = UnixStream::connect(path).unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let (mut r, g) = (stream.try_clone().unwrap(), got.clone());
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            while let Ok(n) = r.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                while buf.len() >= 8 {
                    let len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
                    if len < 8 || buf.len() < len {
                        break;
                    }
                    g.lock().unwrap().push(buf.drain(..len).collect());
                }
            }
        });
        Conn { stream, got }
    }

    /// Sends a barrier and waits for its reply: everything sent before is handled.
    fn sync(&mut self, xid: u32) {
        let mut b = vec![6, 20, 0, 8];
        b.extend_from_slice(&xid.to_be_bytes());
        self.stream.write_all(&b).unwrap();
        let t = Instant::now();
        loop {
            let done = self
                .got
                .lock()
                .unwrap()
                .iter()
                .any(|m| m[1] == 21 && u32::from_be_bytes([m[4], m[5], m[6], m[7]]) == xid);
            if done {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "no barrier reply");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The messages a replay sends: bundles as recorded, or unpacked.
fn to_send(rec: &[Recorded], unpack: bool) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    for r in rec.iter().filter(|r| r.to_switch) {
        let Ok(d) = msgtype::decode(&r.bytes) else {
            out.push((r.conn, r.bytes.clone()));
            continue;
        };
        match d.msg_type.kind() {
            // answers to the switch's echo requests: nothing to answer here
            OfpType::EchoReply => {}
            OfpType::BundleControl if unpack => {}
            OfpType::BundleAddMessage if unpack => {
                let (add, _) = BundleAdd::decode(&d).unwrap();
                out.push((r.conn, add.msg.to_vec()));
            }
            _ => out.push((r.conn, r.bytes.clone())),
        }
    }
    out
}

/// What a replay gave.
struct Replay {
    /// Each error the switch answered with: connection, xid, the message it refused, the error.
    errors: Vec<(u32, u32, Vec<u8>, String)>,
    /// `dump-flows` of br-int after it.
    flows: String,
    /// `dump-groups` of br-int after it.
    groups: String,
}

/// Replays the conversation on a fresh switch, bundles as recorded or unpacked.
fn replay(unpack: bool) -> Replay {
    // each replay its own directory: the two tests may replay at the same time
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let (dir, _g) = scratch_dir(&format!("fp-ovn-replay-{n}"));
    let cfg = dir.join("sw.toml");
    let mut c = "[[bridge]]\nname = \"br-int\"\n".to_owned();
    if secure_supported(&dir) {
        c += "fail-mode = \"secure\"\n";
    }
    for (i, name) in ["orec-vm1", "orec-vm2"].iter().enumerate() {
        c += &format!(
            "\n[[bridge.port]]\nname = \"{name}\"\ntype = \"dummy\"\nofport = {}\n",
            i + 1
        );
    }
    std::fs::write(&cfg, c).unwrap();
    let rundir = dir.join("run");
    let _sw = start_switch(&cfg, &rundir);
    let mgmt = rundir.join("br-int.mgmt");
    let t = Instant::now();
    while !mgmt.exists() {
        assert!(t.elapsed().as_secs() < 10, "no br-int.mgmt");
        std::thread::sleep(Duration::from_millis(20));
    }
    let rec = conversation();
    let mut conns: BTreeMap<u32, Conn> = BTreeMap::new();
    let mut sent: BTreeMap<(u32, u32), Vec<u8>> = BTreeMap::new();
    for (conn, m) in to_send(&rec, unpack) {
        let c = conns.entry(conn).or_insert_with(|| Conn::open(&mgmt));
        c.stream.write_all(&m).unwrap();
        let xid = u32::from_be_bytes([m[4], m[5], m[6], m[7]]);
        sent.entry((conn, xid)).or_insert(m);
    }
    for c in conns.values_mut() {
        c.sync(0xfff0_0001);
    }
    // every request is answered with its reply (or refused with an error)
    let answered = |n: u32, xid: u32, kind: OfpType| {
        conns[&n].got.lock().unwrap().iter().any(|m| {
            msgtype::decode(m).is_ok_and(|d| {
                d.xid == xid && (d.msg_type.kind() == kind || d.msg_type.kind() == OfpType::Error)
            })
        })
    };
    for ((n, xid), m) in &sent {
        let Ok(d) = msgtype::decode(m) else { continue };
        let reply = match d.msg_type.kind() {
            OfpType::EchoRequest => OfpType::EchoReply,
            OfpType::BarrierRequest => OfpType::BarrierReply,
            OfpType::GetConfigRequest => OfpType::GetConfigReply,
            OfpType::NxtTlvTableRequest => OfpType::NxtTlvTableReply,
            OfpType::MeterFeaturesStatsRequest => OfpType::MeterFeaturesStatsReply,
            OfpType::BundleControl => OfpType::BundleControl,
            _ => continue,
        };
        assert!(
            answered(*n, *xid, reply),
            "no {reply:?} to {}",
            d.msg_type.name()
        );
    }
    let mut errors = Vec::new();
    for (&n, c) in &conns {
        for m in c.got.lock().unwrap().iter().filter(|m| m[1] == 1) {
            let xid = u32::from_be_bytes([m[4], m[5], m[6], m[7]]);
            let e = openflow::error::decode(m)
                .and_then(|e| e.error)
                .map_or("(unknown error)".to_owned(), |e| e.to_string());
            let what = sent.get(&(n, xid)).cloned().unwrap_or_default();
            errors.push((n, xid, what, e));
        }
    }
    let dump = |cmd: &str| {
        let o = ofctl(&rundir, &format!("-O OpenFlow15 {cmd} {}", mgmt.display()));
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    };
    let flows = dump("--no-stats --no-names dump-flows");
    let groups = dump("--no-names dump-groups");
    Replay {
        errors,
        flows,
        groups,
    }
}

/// Whether this flowpath's configuration has a bridge's `fail-mode`.
fn secure_supported(dir: &Path) -> bool {
    let f = dir.join("probe.toml");
    std::fs::write(
        &f,
        "[[bridge]]\nname = \"br-int\"\nfail-mode = \"secure\"\n",
    )
    .unwrap();
    let ok = std::process::Command::new(env!("CARGO_BIN_EXE_flowpath"))
        .arg("check-config")
        .arg(&f)
        .output()
        .unwrap()
        .status
        .success();
    if !ok {
        eprintln!("note: no fail-mode in the configuration: br-int is standalone");
    }
    ok
}

/// What `ovs-ofctl ofp-print` makes of a message, without its header line's name, version
/// and xid: `CMD REST` for a flow or group mod, REST as `dump-flows` or `dump-groups` would
/// print the flow or group (a flow's table always named, its cookie left out).
fn printed(m: &[u8]) -> String {
    let hex: String = m.iter().map(|b| format!("{b:02x}")).collect();
    let o = std::process::Command::new("ovs-ofctl")
        .args(["ofp-print", &hex])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let text = text.split_once("):").map_or(&*text, |(_, r)| r);
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    let mut table = "table=0,".to_owned();
    for (i, w) in words.iter().enumerate() {
        if let Some(t) = w.strip_prefix("table:").filter(|_| i == 1) {
            table = format!("table={t},");
        } else if !w.starts_with("cookie:") {
            out.push(*w);
        }
    }
    if m[1] == 14 && out.len() > 1 {
        // a flow mod: CMD table=T, REST
        format!("{} {table} {}", out[0], out[1..].join(" "))
    } else {
        out.join(" ")
    }
}

/// A `dump-flows` or `dump-groups` line as [`printed`] prints the flow or group.
fn dump_key(line: &str) -> String {
    let l = line.trim();
    let l = match l.split_once(", ") {
        Some((c, r)) if c.starts_with("cookie=") => r,
        _ => l,
    };
    if l.starts_with("table=") || l.starts_with("group_id=") {
        l.to_owned()
    } else {
        format!("table=0, {l}")
    }
}

/// Lines of a dump that are flows or groups (not the reply's header), sorted.
fn dump_lines(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with(' '))
        .map(|l| l.trim().to_owned())
        .collect();
    v.sort();
    v
}

/// `missing: LINE` and `extra: LINE` between what OVS printed and what flowpath printed;
/// a line missing because its flow or group mod was refused (`explained`: what [`printed`]
/// makes of the refused messages, command word left out) is not repeated.
fn dump_diffs(ovs: &str, ours: &str, explained: &BTreeSet<String>) -> Vec<String> {
    let (a, b) = (dump_lines(ovs), dump_lines(ours));
    let mut out = Vec::new();
    for l in &a {
        if b.binary_search(l).is_err() && !explained.contains(&dump_key(l)) {
            out.push(format!("missing: {l}"));
        }
    }
    for l in &b {
        if a.binary_search(l).is_err() {
            out.push(format!("extra: {l}"));
        }
    }
    out
}

/// The differences of a replay with bundles unpacked: `refused ERROR: MSG` for each message
/// refused (MSG as [`printed`]), then the dump differences they do not explain.
fn differences() -> (BTreeSet<String>, BTreeSet<(u32, u32)>) {
    let r = replay(true);
    let mut found = BTreeSet::new();
    let mut explained = BTreeSet::new();
    for (_, _, msg, err) in &r.errors {
        let p = printed(msg);
        if let Some((_, rest)) = p.split_once(' ') {
            explained.insert(rest.to_owned());
        }
        found.insert(format!("refused {err}: {p}"));
    }
    found.extend(dump_diffs(OVS_FLOWS, &r.flows, &explained));
    found.extend(dump_diffs(OVS_GROUPS, &r.groups, &explained));
    let refused = r.errors.iter().map(|(c, x, _, _)| (*c, *x)).collect();
    (found, refused)
}

/// Every difference is listed in [`KNOWN`], and every entry there is still a difference.
#[test]
fn ovn_controller_conversation_replays_unpacked() {
    if ovs_ofctl_missing() {
        eprintln!("skipped: ovs-ofctl is not installed");
        return;
    }
    let (found, _) = differences();
    let known: BTreeSet<String> = known().into_keys().collect();
    let new: Vec<_> = found.difference(&known).collect();
    let gone: Vec<_> = known.difference(&found).collect();
    if std::env::var_os("OVN_REPLAY_PRINT").is_some() {
        for f in &found {
            println!("{f}");
        }
    }
    assert!(
        new.is_empty() && gone.is_empty(),
        "new failures (not in flowpath-known-failures.txt):\n{}\n\nlisted in flowpath-known-failures.txt but passing now (take them out):\n{}",
        new.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        gone.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    );
}

/// As recorded, with OVN's atomic bundles: errors come exactly from the bundles that hold a
/// message the unpacked replay saw refused (and from the refused messages sent outside
/// bundles), and with nothing refused the switch ends with OVS's flows and groups.
#[test]
fn ovn_controller_conversation_replays_as_recorded() {
    if ovs_ofctl_missing() {
        eprintln!("skipped: ovs-ofctl is not installed");
        return;
    }
    let (_, refused) = differences();
    // the bundle of each bundled message, by (connection, xid)
    let mut bundle_of = BTreeMap::new();
    for r in conversation().iter().filter(|r| r.to_switch) {
        let Ok(d) = msgtype::decode(&r.bytes) else {
            continue;
        };
        let id = match d.msg_type.kind() {
            OfpType::BundleAddMessage => BundleAdd::decode(&d).ok().map(|(a, _)| a.bundle_id),
            OfpType::BundleControl => BundleCtrl::decode(&d).ok().map(|c| c.bundle_id),
            _ => None,
        };
        if let Some(id) = id {
            bundle_of.insert((r.conn, d.xid), (r.conn, id));
        }
    }
    let failing: BTreeSet<_> = refused.iter().filter_map(|k| bundle_of.get(k)).collect();
    let r = replay(false);
    let mut failed = BTreeSet::new();
    for (c, x, msg, err) in &r.errors {
        match bundle_of.get(&(*c, *x)) {
            Some(b) => {
                assert!(
                    failing.contains(b),
                    "bundle {b:?} refused ({err}) for no known reason"
                );
                failed.insert(b);
            }
            None => assert!(
                refused.contains(&(*c, *x)),
                "refused {err}: {}, which the unpacked replay takes",
                printed(msg)
            ),
        }
    }
    let missed: Vec<_> = failing.difference(&failed).collect();
    assert!(
        missed.is_empty(),
        "bundles that should fail and did not: {missed:?}"
    );
    if refused.is_empty() {
        // With nothing refused, the dumps differ from OVS's only as the known list says.
        let none = BTreeSet::new();
        let known = known();
        let d: Vec<String> = dump_diffs(OVS_FLOWS, &r.flows, &none)
            .into_iter()
            .chain(dump_diffs(OVS_GROUPS, &r.groups, &none))
            .filter(|l| !known.contains_key(l))
            .collect();
        assert!(d.is_empty(), "{}", d.join("\n"));
    }
}
