//! The [`Idl`] against a private Debian `ovsdb-server` with the Open_vSwitch schema: initial
//! contents, writes by `ovs-vsctl`, transactions under the lock, lock contention, a server
//! restart, `wait`, and echo on tcp.

mod common;

use std::time::Duration;

use common::{Sandbox, wait_until};
use ovsdb::{Datum, Idl, IdlOptions, IdlState, TxnError, Uuid, ops};

const T: Duration = Duration::from_secs(10);

fn opts(target: &str, lock: Option<&str>) -> IdlOptions {
    IdlOptions {
        target: target.to_owned(),
        db: "Open_vSwitch".to_owned(),
        lock: lock.map(str::to_owned),
        columns: vec![
            ("Open_vSwitch".to_owned(), vec![]),
            (
                "Bridge".to_owned(),
                vec![
                    "name".to_owned(),
                    "ports".to_owned(),
                    "other_config".to_owned(),
                    "datapath_id".to_owned(),
                ],
            ),
            ("Port".to_owned(), vec![]),
            ("Interface".to_owned(), vec![]),
        ],
    }
}

fn bridge_names(idl: &Idl) -> Vec<String> {
    let db = idl.snapshot();
    let mut names: Vec<String> = db
        .rows("Bridge")
        .map(|(_, r)| {
            r.get("name")
                .and_then(Datum::as_str)
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    names.sort();
    names
}

fn monitoring(idl: &Idl) -> bool {
    wait_until(T, || idl.state() == IdlState::Monitoring)
}

fn root_uuid(idl: &Idl) -> Uuid {
    idl.snapshot()
        .rows("Open_vSwitch")
        .next()
        .expect("an Open_vSwitch row")
        .0
}

#[test]
fn initial_contents_and_vsctl_writes() {
    let Some(sb) = Sandbox::start("initial", false) else {
        return;
    };
    sb.vsctl(&[
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "other_config:hwaddr=00:11:22:33:44:55",
    ]);
    let idl = Idl::start(opts(&sb.target, None));
    assert!(monitoring(&idl), "{:?}", idl.last_error());
    assert!(idl.has_lock());
    assert_eq!(bridge_names(&idl), ["br0"]);
    let db = idl.snapshot();
    let (br, row) = db.rows("Bridge").next().unwrap();
    assert_eq!(
        row["other_config"].get("hwaddr").and_then(|a| a.as_str()),
        Some("00:11:22:33:44:55")
    );
    // A column that was not asked for is not there; its default is what `get` gives.
    assert!(!row.contains_key("fail_mode"));
    assert_eq!(db.rows("Port").count(), 1);
    assert_eq!(db.get("Bridge", br, "ports").uuids().len(), 1);
    // Tables not listed are not monitored.
    assert_eq!(db.rows("Controller").count(), 0);

    let seq = idl.seqno();
    sb.vsctl(&[
        "add-port",
        "br0",
        "p1",
        "--",
        "set",
        "interface",
        "p1",
        "type=internal",
    ]);
    let mut now = seq;
    assert!(wait_until(T, || {
        now = idl.wait(now, Duration::from_millis(200));
        idl.snapshot().rows("Interface").count() == 2
    }));
    assert_ne!(idl.seqno(), seq);
    let db = idl.snapshot();
    let p1 = db
        .rows("Interface")
        .find(|(_, r)| r["name"].as_str() == Some("p1"))
        .unwrap()
        .1;
    assert_eq!(p1["type"].as_str(), Some("internal"));
    // The old snapshot did not change.
    assert_eq!(db.rows("Port").count(), 2);

    // A removal of one map key and a set change come through update3's diffs.
    sb.vsctl(&["remove", "bridge", "br0", "other_config", "hwaddr"]);
    sb.vsctl(&["del-port", "br0", "p1"]);
    assert!(wait_until(T, || idl.snapshot().rows("Interface").count() == 1));
    let db = idl.snapshot();
    assert!(db.get("Bridge", br, "other_config").is_empty());
    assert_eq!(db.get("Bridge", br, "ports").uuids().len(), 1);
    idl.stop();
}

#[test]
fn wait_returns_on_change_and_on_timeout() {
    let Some(sb) = Sandbox::start("wait", false) else {
        return;
    };
    let idl = Idl::start(opts(&sb.target, None));
    assert!(monitoring(&idl));
    let seq = idl.seqno();
    let start = std::time::Instant::now();
    assert_eq!(idl.wait(seq, Duration::from_millis(300)), seq);
    assert!(start.elapsed() >= Duration::from_millis(300));
    let writer = std::thread::spawn({
        let target = sb.target.clone();
        move || {
            std::thread::sleep(Duration::from_millis(200));
            std::process::Command::new("ovs-vsctl")
                .args([&format!("--db={target}"), "--no-wait", "add-br", "brw"])
                .status()
                .unwrap();
        }
    });
    let start = std::time::Instant::now();
    let after = idl.wait(seq, T);
    assert_ne!(after, seq);
    assert!(start.elapsed() < T);
    writer.join().unwrap();
    assert!(wait_until(T, || bridge_names(&idl) == ["brw"]));
}

#[test]
fn transact_under_the_lock_and_contention() {
    let Some(sb) = Sandbox::start("lock", false) else {
        return;
    };
    sb.vsctl(&["add-br", "br0"]);
    let first = Idl::start(opts(&sb.target, Some("ovs_vswitchd")));
    assert!(monitoring(&first), "{:?}", first.last_error());
    assert!(first.has_lock());
    let root = root_uuid(&first);
    let r = first
        .transact(vec![
            ops::update("Open_vSwitch", root, &[("cur_cfg", Datum::integer(7))]),
            ops::assert_lock("ovs_vswitchd"),
            ops::comment("flowpath test"),
        ])
        .expect("transaction under the lock");
    assert_eq!(r[0]["count"], 1);
    assert!(wait_until(T, || first
        .snapshot()
        .get("Open_vSwitch", root, "cur_cfg")
        .as_i64()
        == Some(7)));
    assert_eq!(
        sb.vsctl(&["get", "Open_vSwitch", ".", "cur_cfg"]).trim(),
        "7"
    );

    let second = Idl::start(opts(&sb.target, Some("ovs_vswitchd")));
    assert!(wait_until(T, || second.state() == IdlState::LockContended));
    assert!(!second.has_lock());
    // The replica is current even without the lock.
    assert_eq!(bridge_names(&second), ["br0"]);
    let err = second
        .transact(vec![
            ops::update("Open_vSwitch", root, &[("cur_cfg", Datum::integer(8))]),
            ops::assert_lock("ovs_vswitchd"),
        ])
        .unwrap_err();
    assert_eq!(err, TxnError::NotLocked);
    // An operation error is reported as such.
    let err = first
        .transact(vec![ops::update(
            "No_Such_Table",
            root,
            &[("x", Datum::integer(1))],
        )])
        .unwrap_err();
    assert!(matches!(err, TxnError::Error(_)), "{err:?}");
    // A failed wait is a soft error.
    let err = first
        .transact(vec![
            serde_json::json!({"op": "wait", "timeout": 0, "table": "Open_vSwitch",
            "where": ops::where_uuid(root), "columns": ["cur_cfg"], "until": "==",
            "rows": [{"cur_cfg": 99}]}),
        ])
        .unwrap_err();
    assert_eq!(err, TxnError::TryAgain);

    first.stop();
    assert!(wait_until(T, || second.state() == IdlState::Monitoring
        && second.has_lock()));
    second
        .transact(vec![
            ops::update("Open_vSwitch", root, &[("cur_cfg", Datum::integer(8))]),
            ops::assert_lock("ovs_vswitchd"),
        ])
        .expect("the lock passed to the second client");
}

#[test]
fn server_restart_reconnects_and_resynchronises() {
    let Some(sb) = Sandbox::start("restart", false) else {
        return;
    };
    sb.vsctl(&["add-br", "br0"]);
    let idl = Idl::start(opts(&sb.target, Some("ovs_vswitchd")));
    assert!(monitoring(&idl));
    assert_eq!(bridge_names(&idl), ["br0"]);
    sb.kill_server();
    assert!(wait_until(T, || idl.state() == IdlState::Connecting));
    assert!(!idl.has_lock());
    // While the server is away the last contents stay readable.
    assert_eq!(bridge_names(&idl), ["br0"]);
    assert_eq!(
        idl.transact(vec![ops::comment("x")]).unwrap_err(),
        TxnError::Disconnected
    );
    sb.start_server();
    sb.vsctl(&["del-br", "br0", "--", "add-br", "br1"]);
    assert!(
        wait_until(Duration::from_secs(20), || idl.state()
            == IdlState::Monitoring
            && bridge_names(&idl) == ["br1"]),
        "{:?} {:?}",
        idl.state(),
        idl.last_error()
    );
    assert!(idl.has_lock());
}

#[test]
fn echo_is_answered_on_tcp() {
    let Some(sb) = Sandbox::start("echo", true) else {
        return;
    };
    let idl = Idl::start(opts(&sb.tcp_target(), None));
    assert!(monitoring(&idl), "{:?}", idl.last_error());
    let seq = idl.seqno();
    // ovsdb-server probes a tcp client after 5 s of silence and drops it 5 s later if it
    // does not answer; the client probes too. 12 s of silence must not cost the connection.
    std::thread::sleep(Duration::from_secs(12));
    assert_eq!(idl.state(), IdlState::Monitoring);
    assert_eq!(idl.seqno(), seq, "reconnected: {:?}", idl.last_error());
    let log = sb.log();
    assert!(
        log.contains("send request, method=\"echo\""),
        "the server sent no echo"
    );
    assert!(
        log.contains("received reply, result=[], id=\"echo\""),
        "no echo reply"
    );
}
