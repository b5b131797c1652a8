//! Invariant checks of the `ovsdb_msg` fuzz target, shared with the crash-regression test
//! (`crates/ovsdb/tests/fuzz_regressions.rs` path-imports this file), so that a committed
//! input is replayed through exactly the checks that found it.
//!
//! The input's first byte picks the size of the reads (1 to 256 bytes); the rest is a byte
//! stream an `ovsdb-server` could send. It goes through the JSON-RPC framer, bounded here to
//! 64 KiB a message, in reads of that size:
//! - the framer never holds more than the bound and one read, and after an error gives only
//!   that error;
//! - every message reads back the same once written again (`Message::to_bytes`);
//! - every params or result that could carry table updates (an `update`, `update2` or
//!   `update3` notification, a monitor reply) is applied to a replica of the Open_vSwitch
//!   schema (`testdata/ovsdb/vswitch.ovsschema`) as RFC 7047 updates and as update2 diffs;
//!   what a replica then holds is sorted and free of duplicates: each value, written and read
//!   again with its column's type, is the same value.

use std::sync::OnceLock;

use ovsdb::jsonrpc::{FrameError, Framer, Message};
use ovsdb::{Datum, Db, Schema};
use serde_json::Value;

const MAX_LEN: usize = 64 * 1024;

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let text = include_str!("../../testdata/ovsdb/vswitch.ovsschema");
        Schema::from_json(&serde_json::from_str(text).expect("schema JSON")).expect("schema")
    })
}

/// Every value the replica holds reads back the same with its column's type.
fn check_replica(db: &Db) {
    for (tname, table) in &db.schema().tables {
        for (uuid, row) in db.rows(tname) {
            for (col, d) in row {
                let ty = &table.columns[col].ty;
                assert!(
                    !d.is_empty(),
                    "{tname} {uuid} {col}: an empty value is stored"
                );
                if ty.max.is_some_and(|max| d.len() as u64 > max) {
                    // update2 diffs can grow a set beyond its bound; the server never sends that.
                    continue;
                }
                let again = Datum::from_json(&d.to_json(), ty)
                    .unwrap_or_else(|e| panic!("{tname} {uuid} {col} {:?}: {e}", d.to_json()));
                assert_eq!(&again, d, "{tname} {uuid} {col}: not sorted or not unique");
                assert_eq!(again.to_json(), d.to_json());
            }
        }
    }
}

fn apply(db1: &mut Db, db2: &mut Db, updates: &Value) {
    if db1.apply_update(updates).is_ok() {
        check_replica(db1);
    }
    if db2.apply_update2(updates).is_ok() {
        check_replica(db2);
    }
}

pub fn check_ovsdb_msg(data: &[u8]) {
    let Some((&sel, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(sel) + 1;
    let mut framer = Framer::new(MAX_LEN);
    let mut db1 = Db::new(schema().clone());
    let mut db2 = Db::new(schema().clone());
    let mut failed: Option<FrameError> = None;
    for piece in stream.chunks(chunk) {
        framer.feed(piece);
        loop {
            match framer.next_message() {
                Ok(Some(msg)) => {
                    assert!(failed.is_none(), "a message after an error");
                    let mut again = Framer::new(MAX_LEN * 4);
                    again.feed(&msg.to_bytes());
                    assert_eq!(
                        again.next_message().expect("rewritten message reads"),
                        Some(msg.clone())
                    );
                    match &msg {
                        Message::Notify { params, .. } => {
                            if let Some(p) = params.as_array() {
                                for updates in p.iter().skip(1) {
                                    apply(&mut db1, &mut db2, updates);
                                }
                            }
                        }
                        Message::Reply { result, .. } => {
                            apply(&mut db1, &mut db2, result);
                            if let Some([_, _, updates]) = result.as_array().map(Vec::as_slice) {
                                apply(&mut db1, &mut db2, updates);
                            }
                        }
                        Message::Request { .. } | Message::Error { .. } => {}
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    if let Some(f) = &failed {
                        assert_eq!(&e, f, "the error changed");
                    }
                    failed = Some(e);
                    break;
                }
            }
        }
        assert!(
            framer.buffered() <= MAX_LEN + chunk,
            "framer holds {} bytes",
            framer.buffered()
        );
    }
}
