//! Builders for the operations of a `transact` request (RFC 7047 §5.2), as JSON values ready to
//! follow the database name in the request's params. Rows are named by uuid (`where _uuid ==`),
//! which is how a client that owns only some columns writes without touching the others.

use serde_json::{Map, Value, json};

use crate::datum::{Datum, Uuid};

/// The condition `_uuid == uuid`.
pub fn where_uuid(uuid: Uuid) -> Value {
    json!([["_uuid", "==", ["uuid", uuid.to_string()]]])
}

fn row_json(row: &[(&str, Datum)]) -> Value {
    let mut m = Map::new();
    for (c, d) in row {
        m.insert((*c).to_owned(), d.to_json());
    }
    Value::Object(m)
}

/// `update`: sets the given columns of the row `uuid`, leaving the others alone.
pub fn update(table: &str, uuid: Uuid, row: &[(&str, Datum)]) -> Value {
    json!({"op": "update", "table": table, "where": where_uuid(uuid), "row": row_json(row)})
}

/// `insert`: a new row; `uuid_name` lets later operations of the same transaction refer to it
/// as `["named-uuid", NAME]`.
pub fn insert(table: &str, row: &[(&str, Datum)], uuid_name: Option<&str>) -> Value {
    let mut op = json!({"op": "insert", "table": table, "row": row_json(row)});
    if let Some(name) = uuid_name {
        op["uuid-name"] = json!(name);
    }
    op
}

/// `mutate`: applies `mutations` (an array of `[column, mutator, value]`) to the row `uuid`.
pub fn mutate(table: &str, uuid: Uuid, mutations: Value) -> Value {
    json!({"op": "mutate", "table": table, "where": where_uuid(uuid), "mutations": mutations})
}

/// `delete` of the row `uuid`.
pub fn delete(table: &str, uuid: Uuid) -> Value {
    json!({"op": "delete", "table": table, "where": where_uuid(uuid)})
}

/// `assert`: the transaction fails with "not owner" unless this client holds `lock`.
pub fn assert_lock(lock: &str) -> Value {
    json!({"op": "assert", "lock": lock})
}

/// `comment`: text the server writes to its log with the transaction.
pub fn comment(text: &str) -> Value {
    json!({"op": "comment", "comment": text})
}
