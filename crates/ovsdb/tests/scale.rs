//! What 1000 ports cost the client: decoding and applying a monitor reply of 1000 Port and
//! 1000 Interface rows, and applying 1000 single-row updates while a reader holds a snapshot
//! (each update then copies the table it touches). Once in memory with the Open_vSwitch schema,
//! once end to end against a private `ovsdb-server`. The figures are printed; the bounds
//! asserted are loose enough for a debug build on a busy machine.
//!
//! `cargo test --release -p ovsdb --test scale -- --nocapture` prints the figures.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Sandbox, wait_until};
use ovsdb::jsonrpc::{Framer, Message};
use ovsdb::{Datum, Db, Idl, IdlOptions, IdlState, Uuid, ops};
use serde_json::{Value, json};

const N: u128 = 1000;

fn port_uuid(i: u128) -> String {
    Uuid(0x1000_0000_0000 + i).to_string()
}

fn iface_uuid(i: u128) -> String {
    Uuid(0x2000_0000_0000 + i).to_string()
}

/// A monitor_cond_since reply's bytes with N ports and N interfaces, as the server would send.
fn initial_reply() -> Vec<u8> {
    let mut ports = serde_json::Map::new();
    let mut ifaces = serde_json::Map::new();
    for i in 0..N {
        ports.insert(
            port_uuid(i),
            json!({"initial": {"name": format!("p{i}"),
            "interfaces": ["uuid", iface_uuid(i)], "tag": (i % 4000) as i64,
            "external_ids": ["map", [["owner", "test"]]]}}),
        );
        ifaces.insert(iface_uuid(i), json!({"initial": {"name": format!("p{i}"), "type": "dpdkvhostuserclient",
            "options": ["map", [["vhost-server-path", format!("/run/vh{i}")]]],
            "ofport": (i + 1) as i64, "external_ids": ["map", [["iface-id", format!("lp{i}")], ["attached-mac", "00:00:00:00:00:01"]]],
            "statistics": ["map", [["rx_packets", 0], ["tx_packets", 0]]]}}));
    }
    let result = json!([false, Uuid(7).to_string(), {"Port": ports, "Interface": ifaces}]);
    Message::Reply {
        result,
        id: json!("monitor_cond_since"),
    }
    .to_bytes()
}

fn update3(i: u128, n: i64) -> Vec<u8> {
    Message::Notify {
        method: "update3".into(),
        params: json!(["monitor_cond_since", Uuid(8).to_string(),
            {"Interface": {iface_uuid(i): {"modify": {"statistics": ["map", [["rx_packets", n]]]}}}}]),
    }
    .to_bytes()
}

fn decode(bytes: &[u8]) -> Value {
    let mut f = Framer::default();
    f.feed(bytes);
    match f.next_message().unwrap().unwrap() {
        Message::Reply { result, .. } => result,
        Message::Notify { params, .. } => params,
        m => panic!("{m:?}"),
    }
}

/// The shortest of `runs` timings of `f`: on a machine shared with other builds the shortest
/// is the one least disturbed.
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = None;
    for _ in 0..runs {
        let start = Instant::now();
        let out = f();
        let t = start.elapsed();
        if best.as_ref().is_none_or(|(b, _)| t < *b) {
            best = Some((t, out));
        }
    }
    best.unwrap()
}

#[test]
fn thousand_ports_in_memory() {
    let schema = common::schema();
    let bytes = initial_reply();
    let (load, db) = best_of(5, || {
        let reply = decode(&bytes);
        let mut db = Db::new(schema.clone());
        db.apply_update2(&reply[2]).unwrap();
        db
    });
    assert_eq!(db.rows("Interface").count() as u128, N);

    let notes: Vec<Vec<u8>> = (0..N).map(|i| update3(i, i as i64 + 1)).collect();
    let (updates, published) = best_of(5, || {
        let mut published = Arc::new(db.clone());
        for note in &notes {
            // A reader holds the previous snapshot, as the reconciler does.
            let held = Arc::clone(&published);
            let params = decode(note);
            Arc::make_mut(&mut published)
                .apply_update2(&params[2])
                .unwrap();
            drop(held);
        }
        published
    });
    let u: Uuid = iface_uuid(N - 1).parse().unwrap();
    assert_eq!(
        published
            .get("Interface", u, "statistics")
            .get("rx_packets")
            .and_then(|a| a.as_i64()),
        Some(N as i64)
    );
    println!(
        "in memory (best of 5): {} KiB monitor reply of {N} Port + {N} Interface rows decoded and loaded in {:.1} ms; \
         {N} single-row update3 notifications in {:.1} ms ({:.1} us each)",
        bytes.len() / 1024,
        load.as_secs_f64() * 1e3,
        updates.as_secs_f64() * 1e3,
        updates.as_secs_f64() * 1e6 / N as f64
    );
    assert!(load < Duration::from_secs(5) && updates < Duration::from_secs(5));
}

#[test]
fn thousand_ports_against_ovsdb_server() {
    let Some(sb) = Sandbox::start("scale", false) else {
        return;
    };
    sb.vsctl(&["add-br", "br0"]);
    let opts = |lock: Option<&str>| IdlOptions {
        target: sb.target.clone(),
        db: "Open_vSwitch".into(),
        lock: lock.map(str::to_owned),
        columns: vec![
            ("Open_vSwitch".into(), vec![]),
            ("Bridge".into(), vec![]),
            ("Port".into(), vec![]),
            ("Interface".into(), vec![]),
        ],
    };
    // The ports go in with one transaction of the client's own: ovs-vsctl takes tens of seconds
    // over a thousand add-port commands on a busy machine.
    {
        let writer = Idl::start(opts(None));
        assert!(wait_until(Duration::from_secs(30), || writer.state()
            == IdlState::Monitoring));
        let db = writer.snapshot();
        let (br, _) = db.rows("Bridge").next().unwrap();
        let mut txn = Vec::new();
        let mut ports = Vec::new();
        for i in 0..N {
            let (iface, port) = (format!("i{i}"), format!("p{i}"));
            txn.push(ops::insert(
                "Interface",
                &[
                    ("name", Datum::string(&port)),
                    ("type", Datum::string("internal")),
                ],
                Some(&iface),
            ));
            txn.push(ops::insert(
                "Port",
                &[
                    ("name", Datum::string(&port)),
                    ("interfaces", Datum::Set(vec![])),
                ],
                Some(&port),
            ));
            let last = txn.last_mut().unwrap();
            last["row"]["interfaces"] = json!(["named-uuid", iface]);
            ports.push(json!(["named-uuid", port]));
        }
        txn.push(ops::mutate(
            "Bridge",
            br,
            json!([["ports", "insert", ["set", ports]]]),
        ));
        writer.transact(txn).unwrap();
        writer.stop();
    }
    let start = Instant::now();
    let idl = Idl::start(opts(Some("ovs_vswitchd")));
    assert!(wait_until(Duration::from_secs(30), || idl.state()
        == IdlState::Monitoring));
    let load = start.elapsed();
    let db = idl.snapshot();
    assert_eq!(db.rows("Interface").count() as u128, N + 1);
    let ifaces: Vec<Uuid> = db.rows("Interface").map(|(u, _)| u).collect();

    // 1000 transactions, one row each, as the status write-back makes them; timed until the
    // replica holds the last one.
    let start = Instant::now();
    for (n, u) in ifaces.iter().enumerate() {
        idl.transact(vec![
            ops::update("Interface", *u, &[("ofport", Datum::integer(n as i64 + 1))]),
            ops::assert_lock("ovs_vswitchd"),
        ])
        .unwrap();
    }
    let last = *ifaces.last().unwrap();
    assert!(wait_until(Duration::from_secs(30), || idl
        .snapshot()
        .get("Interface", last, "ofport")
        .as_i64()
        == Some(ifaces.len() as i64)));
    let updates = start.elapsed();
    println!(
        "ovsdb-server: {} Interface rows monitored in {:.1} ms from start; {} single-row transactions \
         written and seen back in {:.1} ms ({:.2} ms each)",
        N + 1,
        load.as_secs_f64() * 1e3,
        ifaces.len(),
        updates.as_secs_f64() * 1e3,
        updates.as_secs_f64() * 1e3 / ifaces.len() as f64
    );
    assert!(load < Duration::from_secs(10) && updates < Duration::from_secs(60));
}
