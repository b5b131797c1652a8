//! The client's replica of the monitored tables: rows by uuid, table by table, and how the
//! server's notifications change them: RFC 7047's `update` (`old`/`new` rows) and OVS's
//! `update2`/`update3` (`initial`, `insert`, `delete` and `modify`, where a modify carries a diff
//! per column: the new value of a scalar column, the elements to toggle in a set, and for a map
//! the keys to add, to remove (named with their current value) or to change).
//!
//! Tables and rows sit behind `Arc`s so that a snapshot handed to another thread is a shallow
//! copy, and a later update copies only the table and the row it touches.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::datum::{Atom, Datum, Uuid, short};
use crate::schema::{ColumnType, Schema, TableSchema};

/// One row: column name to value. A column the row does not hold has its type's default
/// ([`ColumnType::default_datum`]); [`Db::get`] fills it in.
pub type Row = BTreeMap<String, Datum>;

type Table = BTreeMap<Uuid, Arc<Row>>;

/// A replica of a database's monitored contents, with its schema.
#[derive(Clone, Debug, Default)]
pub struct Db {
    schema: Arc<Schema>,
    tables: BTreeMap<String, Arc<Table>>,
    /// Each table's columns' defaults, made once from the schema, so that [`Db::get`] lends
    /// a value rather than making one: a reconfiguration reads every column of every row.
    defaults: Arc<BTreeMap<String, BTreeMap<String, Datum>>>,
}

/// What [`Db::get`] lends for a row or column that is not there.
static EMPTY: Datum = Datum::Empty;

/// One row's cells ([`Db::row_cells`]).
#[derive(Clone, Copy)]
pub struct Cells<'a> {
    row: &'a Row,
    defaults: Option<&'a BTreeMap<String, Datum>>,
}

impl<'a> Cells<'a> {
    /// The value of `column`, its default when the row does not hold it, empty when the
    /// table has no such column.
    pub fn get(&self, column: &str) -> &'a Datum {
        match self.row.get(column) {
            Some(d) => d,
            None => self.defaults.and_then(|d| d.get(column)).unwrap_or(&EMPTY),
        }
    }
}

impl Db {
    /// An empty replica with a (so far empty) table for every table of `schema`.
    pub fn new(schema: Schema) -> Db {
        let tables = schema
            .tables
            .keys()
            .map(|t| (t.clone(), Arc::default()))
            .collect();
        let defaults = schema
            .tables
            .iter()
            .map(|(t, ts)| {
                let cols = ts
                    .columns
                    .iter()
                    .map(|(c, cs)| (c.clone(), cs.ty.default_datum()))
                    .collect();
                (t.clone(), cols)
            })
            .collect();
        Db {
            schema: Arc::new(schema),
            tables,
            defaults: Arc::new(defaults),
        }
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The rows of `table` in uuid order (none for a table the schema does not have).
    pub fn rows(&self, table: &str) -> impl Iterator<Item = (Uuid, &Row)> {
        self.tables
            .get(table)
            .into_iter()
            .flat_map(|t| t.iter().map(|(u, r)| (*u, &**r)))
    }

    /// Number of rows in `table`.
    pub fn len(&self, table: &str) -> usize {
        self.tables.get(table).map_or(0, |t| t.len())
    }

    /// Cells in the replica: each table's rows times its schema's columns, as OVS's IDL
    /// counts them for `memory/show` (`idl-cells-DATABASE`).
    pub fn cells(&self) -> usize {
        self.tables
            .iter()
            .map(|(name, t)| t.len() * self.schema.tables.get(name).map_or(0, |s| s.columns.len()))
            .sum()
    }

    pub fn row(&self, table: &str, uuid: Uuid) -> Option<&Row> {
        self.tables.get(table)?.get(&uuid).map(|r| &**r)
    }

    /// The value of `column` in the row, its default when the row does not hold it, and empty
    /// when there is no such row or column.
    pub fn get(&self, table: &str, uuid: Uuid, column: &str) -> &Datum {
        self.row_cells(table, uuid)
            .map_or(&EMPTY, |r| r.get(column))
    }

    /// The row's cells with their defaults filled in, for reading several columns of one row
    /// without finding the row again for each.
    pub fn row_cells(&self, table: &str, uuid: Uuid) -> Option<Cells<'_>> {
        Some(Cells {
            row: self.row(table, uuid)?,
            defaults: self.defaults.get(table),
        })
    }

    /// Empties every table (the schema stays).
    pub fn clear(&mut self) {
        for t in self.tables.values_mut() {
            *t = Arc::default();
        }
    }

    /// Applies RFC 7047 `<table-updates>` (a `monitor` reply or an `update` notification's
    /// second parameter): a row with `new` and no `old` is inserted, with both it is modified
    /// (the columns in `new` replace the row's), with `old` alone it is deleted.
    pub fn apply_update(&mut self, table_updates: &Value) -> Result<(), String> {
        self.for_each_row_update(table_updates, |ts, table, uuid, ru| {
            let ru = ru
                .as_object()
                .ok_or_else(|| format!("bad <row-update> {}", short(ru)))?;
            match ru.get("new") {
                None | Some(Value::Null) => {
                    table.remove(&uuid);
                }
                Some(new) => match (ru.contains_key("old"), table.get_mut(&uuid)) {
                    (true, Some(row)) => {
                        let row = Arc::make_mut(row);
                        for (c, d) in read_columns(ts, new)? {
                            set_column(row, c, d);
                        }
                    }
                    _ => {
                        table.insert(uuid, Arc::new(read_row(ts, new)?));
                    }
                },
            }
            Ok(())
        })
    }

    /// Applies OVS's `<table-updates2>` (the `monitor_cond` reply, an `update2` notification's
    /// second parameter, the `monitor_cond_since` reply's and an `update3` notification's third).
    pub fn apply_update2(&mut self, table_updates: &Value) -> Result<(), String> {
        self.for_each_row_update(table_updates, |ts, table, uuid, ru| {
            let ru = ru
                .as_object()
                .ok_or_else(|| format!("bad <row-update2> {}", short(ru)))?;
            let mut ops = ru.iter();
            let (Some((op, body)), None) = (ops.next(), ops.next()) else {
                return Err(format!(
                    "a <row-update2> has one member: {}",
                    short(&Value::Object(ru.clone()))
                ));
            };
            match op.as_str() {
                "initial" | "insert" => {
                    table.insert(uuid, Arc::new(read_row(ts, body)?));
                }
                "delete" => {
                    table.remove(&uuid);
                }
                "modify" => {
                    let Some(row) = table.get_mut(&uuid) else {
                        return Err(format!("modify of a row not in the replica: {uuid}"));
                    };
                    let diff = body
                        .as_object()
                        .ok_or_else(|| format!("bad modify {}", short(body)))?;
                    let row = Arc::make_mut(row);
                    for (c, v) in diff {
                        let Some(col) = ts.columns.get(c) else {
                            continue;
                        };
                        let diff = Datum::from_json_unbounded(v, &col.ty)
                            .map_err(|e| format!("column {c}: {e}"))?;
                        let old = row.remove(c).unwrap_or_else(|| col.ty.default_datum());
                        set_column(row, c.clone(), apply_diff(old, diff, &col.ty));
                    }
                }
                _ => return Err(format!("unknown <row-update2> member \"{op}\"")),
            }
            Ok(())
        })
    }

    /// Walks `{table: {uuid: row-update}}`, skipping tables the schema does not have.
    fn for_each_row_update(
        &mut self,
        table_updates: &Value,
        mut f: impl FnMut(&TableSchema, &mut Table, Uuid, &Value) -> Result<(), String>,
    ) -> Result<(), String> {
        let tus = table_updates
            .as_object()
            .ok_or_else(|| format!("<table-updates> is not an object: {}", short(table_updates)))?;
        for (tname, rows) in tus {
            let rows = rows
                .as_object()
                .ok_or_else(|| format!("bad <table-update> {}", short(rows)))?;
            let (Some(ts), Some(table)) =
                (self.schema.tables.get(tname), self.tables.get_mut(tname))
            else {
                continue;
            };
            let table = Arc::make_mut(table);
            for (u, ru) in rows {
                let uuid = u.parse()?;
                f(ts, table, uuid, ru).map_err(|e| format!("{tname} row {u}: {e}"))?;
            }
        }
        Ok(())
    }
}

/// Reads a `<row>` object's columns, leaving out those the schema does not know (`_version`,
/// say).
fn read_columns(ts: &TableSchema, v: &Value) -> Result<Vec<(String, Datum)>, String> {
    let o: &Map<String, Value> = v
        .as_object()
        .ok_or_else(|| format!("bad <row> {}", short(v)))?;
    let mut columns = Vec::with_capacity(o.len());
    for (c, v) in o {
        let Some(col) = ts.columns.get(c) else {
            continue;
        };
        let d = Datum::from_json(v, &col.ty).map_err(|e| format!("column {c}: {e}"))?;
        columns.push((c.clone(), d));
    }
    Ok(columns)
}

/// Reads a whole `<row>`.
fn read_row(ts: &TableSchema, v: &Value) -> Result<Row, String> {
    let mut row = Row::new();
    for (c, d) in read_columns(ts, v)? {
        set_column(&mut row, c, d);
    }
    Ok(row)
}

/// Stores a column's value; an empty value (the default of every non-scalar column) is not
/// stored, so that a row reads the same whichever notification form brought it.
fn set_column(row: &mut Row, column: String, d: Datum) {
    if d.is_empty() {
        row.remove(&column);
    } else {
        row.insert(column, d);
    }
}

/// Applies an update2 "modify" diff to a column's old value (OVS `ovsdb-server(7)`, "update2
/// notification"): a column of at most one element takes the diff as its new value (empty
/// included); in a larger set each element of the diff toggles; a larger map removes a key the
/// diff names with its current value, changes a key named with another value, and adds a key it
/// does not have.
fn apply_diff(old: Datum, diff: Datum, ty: &ColumnType) -> Datum {
    if ty.max == Some(1) {
        return diff;
    }
    if ty.is_map() {
        let mut pairs = match old {
            Datum::Map(p) => p,
            _ => Vec::new(),
        };
        for (k, v) in diff.pairs() {
            match pairs.binary_search_by(|(pk, _)| pk.ovsdb_cmp(k)) {
                Ok(i) if pairs[i].1 == *v => {
                    pairs.remove(i);
                }
                Ok(i) => pairs[i].1 = v.clone(),
                Err(i) => pairs.insert(i, (k.clone(), v.clone())),
            }
        }
        return Datum::Map(pairs);
    }
    let mut atoms: Vec<Atom> = match old {
        Datum::Set(a) => a,
        _ => Vec::new(),
    };
    for a in diff.atoms() {
        match atoms.binary_search_by(|x| x.ovsdb_cmp(a)) {
            Ok(i) => {
                atoms.remove(i);
            }
            Err(i) => atoms.insert(i, a.clone()),
        }
    }
    Datum::Set(atoms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const U1: &str = "00000000-0000-0000-0000-000000000001";
    const U2: &str = "00000000-0000-0000-0000-000000000002";
    const P1: &str = "00000000-0000-0000-0000-0000000000a1";
    const P2: &str = "00000000-0000-0000-0000-0000000000a2";

    fn db() -> Db {
        Db::new(
            Schema::from_json(&json!({"name": "T", "tables": {"Bridge": {"columns": {
                "name": {"type": "string"},
                "ports": {"type": {"key": {"type": "uuid", "refTable": "Port"}, "min": 0, "max": "unlimited"}},
                "fail_mode": {"type": {"key": "string", "min": 0, "max": 1}},
                "other_config": {"type": {"key": "string", "value": "string", "min": 0, "max": "unlimited"}},
                "stp_enable": {"type": "boolean"}}},
                "Port": {"columns": {"name": {"type": "string"}}}}}))
            .unwrap(),
        )
    }

    fn u(s: &str) -> Uuid {
        s.parse().unwrap()
    }

    #[test]
    fn update2_initial_insert_delete() {
        let mut db = db();
        db.apply_update2(&json!({"Bridge": {
            U2: {"initial": {"name": "br1"}},
            U1: {"initial": {"name": "br0", "ports": ["set", [["uuid", P2], ["uuid", P1]]],
                             "other_config": ["map", [["k", "v"]]]}}}}))
            .unwrap();
        let names: Vec<_> = db
            .rows("Bridge")
            .map(|(_, r)| r["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["br0", "br1"], "uuid order");
        assert_eq!(db.get("Bridge", u(U1), "ports").uuids(), [u(P1), u(P2)]);
        // Columns at their default are not sent; `get` supplies them.
        assert_eq!(
            *db.get("Bridge", u(U2), "stp_enable"),
            Datum::boolean(false)
        );
        assert_eq!(*db.get("Bridge", u(U2), "fail_mode"), Datum::Empty);
        assert_eq!(*db.get("Bridge", u(U2), "no_such_column"), Datum::Empty);
        assert_eq!(*db.get("Nope", u(U2), "name"), Datum::Empty);
        db.apply_update2(
            &json!({"Port": {P1: {"insert": {"name": "p1"}}}, "Bridge": {U2: {"delete": null}}}),
        )
        .unwrap();
        assert_eq!(db.len("Bridge"), 1);
        assert_eq!(db.row("Port", u(P1)).unwrap()["name"], Datum::string("p1"));
        assert!(db.row("Bridge", u(U2)).is_none());
        db.clear();
        assert_eq!(db.rows("Bridge").count() + db.rows("Port").count(), 0);
    }

    #[test]
    fn update2_modify_semantics() {
        let mut db = db();
        db.apply_update2(
            &json!({"Bridge": {U1: {"initial": {"name": "br0", "ports": ["uuid", P1],
            "fail_mode": "secure", "other_config": ["map", [["a", "1"], ["b", "2"]]]}}}}),
        )
        .unwrap();
        // Set: each element of the diff toggles (P1 goes, P2 comes).
        // At most one element: the diff is the new value.
        // Map: "a" named with its value goes, "b" with another value changes, "c" is added.
        db.apply_update2(&json!({"Bridge": {U1: {"modify": {
            "ports": ["set", [["uuid", P1], ["uuid", P2]]],
            "fail_mode": "standalone",
            "other_config": ["map", [["a", "1"], ["b", "3"], ["c", "4"]]],
            "name": "renamed", "stp_enable": true}}}}))
            .unwrap();
        let get = |c| db.get("Bridge", u(U1), c);
        assert_eq!(get("ports").uuids(), [u(P2)]);
        assert_eq!(get("fail_mode").as_str(), Some("standalone"));
        assert_eq!(
            get("other_config").to_json(),
            json!(["map", [["b", "3"], ["c", "4"]]])
        );
        assert_eq!(get("name").as_str(), Some("renamed"));
        assert_eq!(get("stp_enable").as_bool(), Some(true));
        // Toggling the last element empties the column; a removed row key empties the map.
        db.apply_update2(
            &json!({"Bridge": {U1: {"modify": {"ports": ["uuid", P2], "fail_mode": ["set", []],
            "other_config": ["map", [["b", "3"], ["c", "4"]]]}}}}),
        )
        .unwrap();
        let row = db.row("Bridge", u(U1)).unwrap();
        assert!(
            !row.contains_key("ports")
                && !row.contains_key("fail_mode")
                && !row.contains_key("other_config")
        );
        // Back from empty.
        db.apply_update2(&json!({"Bridge": {U1: {"modify": {"ports": ["uuid", P1], "other_config": ["map", [["z", ""]]]}}}})).unwrap();
        assert_eq!(db.get("Bridge", u(U1), "ports").uuids(), [u(P1)]);
        assert_eq!(
            db.get("Bridge", u(U1), "other_config")
                .get("z")
                .and_then(Atom::as_str),
            Some("")
        );
    }

    #[test]
    fn update_rfc7047() {
        let mut db = db();
        db.apply_update(&json!({"Bridge": {U1: {"new": {"name": "br0", "ports": ["set", []], "other_config": ["map", [["a", "1"]]]}}}})).unwrap();
        assert_eq!(db.get("Bridge", u(U1), "name").as_str(), Some("br0"));
        db.apply_update(
            &json!({"Bridge": {U1: {"old": {"other_config": ["map", [["a", "1"]]]},
            "new": {"name": "br0", "other_config": ["map", []]}}}}),
        )
        .unwrap();
        assert!(db.get("Bridge", u(U1), "other_config").is_empty());
        assert_eq!(db.get("Bridge", u(U1), "name").as_str(), Some("br0"));
        db.apply_update(&json!({"Bridge": {U1: {"old": {"name": "br0"}}}}))
            .unwrap();
        assert!(db.row("Bridge", u(U1)).is_none());
    }

    #[test]
    fn snapshots_are_copy_on_write() {
        let mut db = db();
        db.apply_update2(&json!({"Bridge": {U1: {"initial": {"name": "a"}}}, "Port": {P1: {"initial": {"name": "p"}}}})).unwrap();
        let snap = Arc::new(db);
        let mut next = (*snap).clone();
        next.apply_update2(&json!({"Bridge": {U1: {"modify": {"name": "b"}}}}))
            .unwrap();
        assert_eq!(snap.get("Bridge", u(U1), "name").as_str(), Some("a"));
        assert_eq!(next.get("Bridge", u(U1), "name").as_str(), Some("b"));
        // The untouched table is still shared.
        assert!(Arc::ptr_eq(&snap.tables["Port"], &next.tables["Port"]));
    }

    #[test]
    fn bad_updates_are_errors() {
        let mut db = db();
        for bad in [
            json!([]),
            json!({"Bridge": []}),
            json!({"Bridge": {"not-a-uuid": {"insert": {}}}}),
            json!({"Bridge": {U1: {"insert": {"name": 5}}}}),
            json!({"Bridge": {U1: {"insert": {}, "delete": null}}}),
            json!({"Bridge": {U1: {"upsert": {}}}}),
            json!({"Bridge": {U1: {"modify": {"name": "x"}}}}),
            json!({"Bridge": {U1: {"insert": []}}}),
            json!({"Bridge": {U1: {"insert": {"ports": ["set", [["uuid", P1], ["uuid", P1]]]}}}}),
        ] {
            assert!(db.apply_update2(&bad).is_err(), "{bad}");
        }
        assert!(db.apply_update(&json!({"Bridge": {U1: 3}})).is_err());
        // Unknown tables and columns are skipped.
        db.apply_update2(&json!({"Nope": {U1: {"insert": {}}}, "Bridge": {U2: {"insert": {"_version": ["uuid", U1], "x": 1}}}})).unwrap();
        assert!(db.row("Bridge", u(U2)).unwrap().is_empty());
    }
}
