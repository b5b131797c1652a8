//! A differential check: after a scripted set of `ovs-vsctl` changes, what the [`Idl`]'s
//! replica holds equals what Debian's `ovsdb-client dump` prints for the same database, table
//! by table, row by row and column by column.

mod common;

use std::time::Duration;

use common::{Sandbox, wait_until};
use ovsdb::{Datum, Db, Idl, IdlOptions, IdlState, Uuid};
use serde_json::Value;

/// Every difference between the replica and the dump, as lines.
fn differences(db: &Db, dump: &str) -> Vec<String> {
    let mut diffs = Vec::new();
    let mut tables = 0;
    for t in serde_json::Deserializer::from_str(dump).into_iter::<Value>() {
        let t = t.expect("ovsdb-client dump prints JSON");
        let table = t["caption"]
            .as_str()
            .unwrap()
            .trim_end_matches(" table")
            .to_owned();
        tables += 1;
        let headings: Vec<&str> = t["headings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap())
            .collect();
        let rows = t["data"].as_array().unwrap();
        if rows.len() != db.rows(&table).count() {
            diffs.push(format!(
                "{table}: {} rows in the dump, {} in the replica",
                rows.len(),
                db.rows(&table).count()
            ));
        }
        for row in rows {
            let row = row.as_array().unwrap();
            let uuid: Uuid = row[0][1].as_str().unwrap().parse().unwrap();
            if db.row(&table, uuid).is_none() {
                diffs.push(format!("{table} {uuid}: not in the replica"));
                continue;
            }
            for (col, v) in headings.iter().zip(row).skip(1) {
                let ty = db
                    .schema()
                    .column(&table, col)
                    .unwrap_or_else(|| panic!("{table}.{col}"));
                let want =
                    Datum::from_json(v, ty).unwrap_or_else(|e| panic!("{table}.{col} {v}: {e}"));
                let got = db.get(&table, uuid, col);
                if *got != want {
                    diffs.push(format!(
                        "{table} {uuid} {col}: dump {v}, replica {}",
                        got.to_json()
                    ));
                }
            }
        }
    }
    assert_eq!(tables, db.schema().tables.len(), "the dump has every table");
    diffs
}

#[test]
fn replica_equals_ovsdb_client_dump() {
    let Some(sb) = Sandbox::start("dump", false) else {
        return;
    };
    if std::process::Command::new("ovsdb-client")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: ovsdb-client is not installed");
        return;
    }
    let idl = Idl::start(IdlOptions {
        target: sb.target.clone(),
        db: "Open_vSwitch".to_owned(),
        lock: None,
        columns: Vec::new(),
    });
    sb.vsctl(&[
        "add-br",
        "br0",
        "--",
        "set",
        "bridge",
        "br0",
        "datapath_type=netdev",
        "fail_mode=secure",
        "protocols=OpenFlow13,OpenFlow10",
        "other_config:hwaddr=00:00:00:00:00:01",
    ]);
    assert!(wait_until(Duration::from_secs(10), || idl.state()
        == IdlState::Monitoring));
    let script: &[&[&str]] = &[
        &[
            "add-port",
            "br0",
            "p1",
            "--",
            "set",
            "interface",
            "p1",
            "type=internal",
            "ofport_request=7",
        ],
        &[
            "add-port",
            "br0",
            "v1",
            "--",
            "set",
            "interface",
            "v1",
            "type=vxlan",
            "options:remote_ip=10.0.0.2",
            "options:key=flow",
        ],
        &[
            "add-port",
            "br0",
            "t1",
            "tag=10",
            "--",
            "set",
            "port",
            "t1",
            "trunks=30,20,10",
            "vlan_mode=native-untagged",
        ],
        &["add-br", "br1"],
        &[
            "add-port",
            "br1",
            "vh",
            "--",
            "set",
            "interface",
            "vh",
            "type=dpdkvhostuserclient",
            "options:vhost-server-path=/tmp/vh",
        ],
        &[
            "set-controller",
            "br0",
            "tcp:127.0.0.1:6653",
            "unix:/tmp/ctl",
        ],
        &[
            "set",
            "Open_vSwitch",
            ".",
            "other_config:pmd-cpu-mask=0x6",
            "other_config:emc-insert-inv-prob=10",
            "external_ids:system-id=abc",
        ],
        &[
            "set",
            "interface",
            "p1",
            "mtu_request=9000",
            "external_ids:iface-id=lp1",
            "external_ids:attached-mac=\"00:00:00:00:00:02\"",
        ],
        &["remove", "bridge", "br0", "protocols", "OpenFlow10"],
        &["remove", "port", "t1", "trunks", "20"],
        &["set", "port", "t1", "tag=11"],
        &[
            "remove",
            "Open_vSwitch",
            ".",
            "other_config",
            "emc-insert-inv-prob",
        ],
        &[
            "set",
            "interface",
            "v1",
            "options:key=5",
            "options:dst_port=4790",
        ],
        &["del-port", "br1", "vh"],
        &[
            "--",
            "--id=@m",
            "create",
            "mirror",
            "name=m0",
            "select_all=true",
            "--",
            "add",
            "bridge",
            "br0",
            "mirrors",
            "@m",
        ],
        &[
            "set",
            "bridge",
            "br1",
            "stp_enable=true",
            "external_ids:note=\"a b\"",
        ],
        &["del-br", "br1"],
        &["clear", "bridge", "br0", "mirrors"],
    ];
    for args in script {
        sb.vsctl(args);
    }
    let mut diffs = Vec::new();
    let same = wait_until(Duration::from_secs(10), || {
        let dump = sb.ovsdb_client("dump", &["Open_vSwitch"]);
        diffs = differences(&idl.snapshot(), &dump);
        diffs.is_empty()
    });
    assert!(
        same,
        "the replica differs from ovsdb-client dump:\n{}",
        diffs.join("\n")
    );
    assert_eq!(
        idl.snapshot().rows("Interface").count(),
        4,
        "br0, p1, v1, t1"
    );
}
