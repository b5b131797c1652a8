//! A database schema as `get_schema` returns it (RFC 7047 §3.2): tables, their columns and
//! each column's type, with the key and value base types, the element count bounds, enums,
//! ranges and references. The client needs it to read values (a one-element set and a bare atom
//! look alike) and to know each column's default.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::datum::{Atom, Datum, short};

/// The five atomic types of RFC 7047 §3.2 `<atomic-type>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AtomicType {
    #[default]
    Integer,
    Real,
    Boolean,
    String,
    Uuid,
}

impl AtomicType {
    pub fn name(self) -> &'static str {
        match self {
            AtomicType::Integer => "integer",
            AtomicType::Real => "real",
            AtomicType::Boolean => "boolean",
            AtomicType::String => "string",
            AtomicType::Uuid => "uuid",
        }
    }

    fn from_name(s: &str) -> Result<AtomicType, String> {
        Ok(match s {
            "integer" => AtomicType::Integer,
            "real" => AtomicType::Real,
            "boolean" => AtomicType::Boolean,
            "string" => AtomicType::String,
            "uuid" => AtomicType::Uuid,
            _ => return Err(format!("unknown atomic type \"{s}\"")),
        })
    }
}

/// A key or value type with its constraints (RFC 7047 §3.2 `<base-type>`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct BaseType {
    pub atomic: AtomicType,
    /// The allowed values, sorted, when the type is an enumeration.
    pub enum_values: Option<Vec<Atom>>,
    pub min_integer: Option<i64>,
    pub max_integer: Option<i64>,
    pub min_real: Option<f64>,
    pub max_real: Option<f64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    /// For a uuid: the table it references.
    pub ref_table: Option<String>,
    /// For a reference: true when weak (the server drops it when its target goes).
    pub ref_weak: bool,
}

impl BaseType {
    fn from_json(v: &Value) -> Result<BaseType, String> {
        if let Some(name) = v.as_str() {
            return Ok(BaseType {
                atomic: AtomicType::from_name(name)?,
                ..BaseType::default()
            });
        }
        let o = v
            .as_object()
            .ok_or_else(|| format!("bad base type {}", short(v)))?;
        let atomic = AtomicType::from_name(
            o.get("type")
                .and_then(Value::as_str)
                .ok_or("base type without \"type\"")?,
        )?;
        let mut b = BaseType {
            atomic,
            ..BaseType::default()
        };
        if let Some(e) = o.get("enum") {
            let set_ty = ColumnType {
                key: BaseType {
                    atomic,
                    ..BaseType::default()
                },
                value: None,
                min: 0,
                max: None,
            };
            b.enum_values = Some(Datum::from_json_unbounded(e, &set_ty)?.atoms().to_vec());
        }
        b.min_integer = o.get("minInteger").and_then(Value::as_i64);
        b.max_integer = o.get("maxInteger").and_then(Value::as_i64);
        b.min_real = o.get("minReal").and_then(Value::as_f64);
        b.max_real = o.get("maxReal").and_then(Value::as_f64);
        b.min_length = o.get("minLength").and_then(Value::as_u64);
        b.max_length = o.get("maxLength").and_then(Value::as_u64);
        b.ref_table = o.get("refTable").and_then(Value::as_str).map(str::to_owned);
        b.ref_weak = o.get("refType").and_then(Value::as_str) == Some("weak");
        Ok(b)
    }
}

/// A column's type (RFC 7047 §3.2 `<type>`): a set of `key` (a map to `value` when there is
/// one) with between `min` and `max` elements; `max: None` is "unlimited".
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnType {
    pub key: BaseType,
    pub value: Option<BaseType>,
    pub min: u64,
    pub max: Option<u64>,
}

impl Default for ColumnType {
    /// A scalar integer, the simplest column.
    fn default() -> ColumnType {
        ColumnType {
            key: BaseType::default(),
            value: None,
            min: 1,
            max: Some(1),
        }
    }
}

impl ColumnType {
    pub fn from_json(v: &Value) -> Result<ColumnType, String> {
        if v.is_string() {
            return Ok(ColumnType {
                key: BaseType::from_json(v)?,
                ..ColumnType::default()
            });
        }
        let o = v
            .as_object()
            .ok_or_else(|| format!("bad column type {}", short(v)))?;
        let key = BaseType::from_json(o.get("key").ok_or("column type without \"key\"")?)?;
        let value = o.get("value").map(BaseType::from_json).transpose()?;
        let min = match o.get("min") {
            None => 1,
            Some(m) => m
                .as_u64()
                .filter(|&m| m <= 1)
                .ok_or("\"min\" must be 0 or 1")?,
        };
        let max = match o.get("max") {
            None => Some(1),
            Some(Value::String(s)) if s == "unlimited" => None,
            Some(m) => Some(
                m.as_u64()
                    .filter(|&m| m >= 1 && m >= min)
                    .ok_or("bad \"max\"")?,
            ),
        };
        Ok(ColumnType {
            key,
            value,
            min,
            max,
        })
    }

    /// True for a map column.
    pub fn is_map(&self) -> bool {
        self.value.is_some()
    }

    /// True for a column that always holds exactly one atom.
    pub fn is_scalar(&self) -> bool {
        self.value.is_none() && self.min == 1 && self.max == Some(1)
    }
}

/// One column of a table.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ColumnSchema {
    pub ty: ColumnType,
    pub ephemeral: bool,
    pub mutable: bool,
}

/// One table: its columns (without the implicit `_uuid` and `_version`) and properties.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TableSchema {
    pub columns: BTreeMap<String, ColumnSchema>,
    pub max_rows: Option<u64>,
    pub is_root: bool,
    pub indexes: Vec<Vec<String>>,
}

/// A database schema (RFC 7047 §3.2 `<database-schema>`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Schema {
    pub name: String,
    pub version: String,
    pub cksum: Option<String>,
    pub tables: BTreeMap<String, TableSchema>,
}

impl Schema {
    /// Reads a schema from `get_schema`'s result (or a `.ovsschema` file's contents).
    pub fn from_json(v: &Value) -> Result<Schema, String> {
        let o = v.as_object().ok_or("schema is not an object")?;
        let name = o
            .get("name")
            .and_then(Value::as_str)
            .ok_or("schema without \"name\"")?;
        let mut schema = Schema {
            name: name.to_owned(),
            version: o
                .get("version")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            cksum: o.get("cksum").and_then(Value::as_str).map(str::to_owned),
            tables: BTreeMap::new(),
        };
        let tables = o
            .get("tables")
            .and_then(Value::as_object)
            .ok_or("schema without tables")?;
        for (tname, t) in tables {
            let t = t
                .as_object()
                .ok_or_else(|| format!("table {tname} is not an object"))?;
            let mut table = TableSchema {
                max_rows: t.get("maxRows").and_then(Value::as_u64),
                is_root: t.get("isRoot").and_then(Value::as_bool).unwrap_or(false),
                ..TableSchema::default()
            };
            if let Some(indexes) = t.get("indexes").and_then(Value::as_array) {
                for index in indexes {
                    let cols = index.as_array().ok_or("an index is not an array")?;
                    table.indexes.push(
                        cols.iter()
                            .filter_map(|c| c.as_str().map(str::to_owned))
                            .collect(),
                    );
                }
            }
            let columns = t
                .get("columns")
                .and_then(Value::as_object)
                .ok_or_else(|| format!("table {tname} without columns"))?;
            for (cname, c) in columns {
                let c = c
                    .as_object()
                    .ok_or_else(|| format!("column {cname} is not an object"))?;
                let ty = ColumnType::from_json(
                    c.get("type")
                        .ok_or_else(|| format!("column {tname}.{cname} without type"))?,
                )
                .map_err(|e| format!("column {tname}.{cname}: {e}"))?;
                table.columns.insert(
                    cname.clone(),
                    ColumnSchema {
                        ty,
                        ephemeral: c.get("ephemeral").and_then(Value::as_bool).unwrap_or(false),
                        mutable: c.get("mutable").and_then(Value::as_bool).unwrap_or(true),
                    },
                );
            }
            schema.tables.insert(tname.clone(), table);
        }
        Ok(schema)
    }

    pub fn table(&self, table: &str) -> Option<&TableSchema> {
        self.tables.get(table)
    }

    /// The type of `table.column`, if the schema has it.
    pub fn column(&self, table: &str, column: &str) -> Option<&ColumnType> {
        self.tables.get(table)?.columns.get(column).map(|c| &c.ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn column_types() {
        let t = ColumnType::from_json(&json!("string")).unwrap();
        assert!(t.is_scalar() && !t.is_map());
        let t = ColumnType::from_json(&json!({"key": {"type": "string", "enum": ["set", ["secure", "standalone"]]}, "min": 0})).unwrap();
        assert_eq!((t.min, t.max), (0, Some(1)));
        assert_eq!(t.key.enum_values.as_ref().unwrap().len(), 2);
        let t = ColumnType::from_json(&json!({"key": {"type": "string", "enum": "only"}})).unwrap();
        assert_eq!(t.key.enum_values.unwrap(), [Atom::String("only".into())]);
        let t = ColumnType::from_json(&json!({"key": {"type": "integer", "minInteger": 0, "maxInteger": 4095}, "max": 4096, "min": 0})).unwrap();
        assert_eq!(
            (t.key.min_integer, t.key.max_integer, t.max),
            (Some(0), Some(4095), Some(4096))
        );
        let t = ColumnType::from_json(&json!({"key": {"type": "uuid", "refTable": "Port", "refType": "weak"}, "max": "unlimited", "min": 0})).unwrap();
        assert_eq!(t.key.ref_table.as_deref(), Some("Port"));
        assert!(t.key.ref_weak && t.max.is_none());
        let t = ColumnType::from_json(
            &json!({"key": "string", "value": "integer", "min": 0, "max": "unlimited"}),
        )
        .unwrap();
        assert!(t.is_map());
        for bad in [
            json!("float"),
            json!({"min": 0}),
            json!({"key": "string", "min": 2}),
            json!({"key": "string", "max": 0}),
            json!(7),
        ] {
            assert!(ColumnType::from_json(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn vswitch_schema() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/ovsdb/vswitch.ovsschema"
        );
        let s = Schema::from_json(
            &serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap(),
        )
        .unwrap();
        assert_eq!(s.name, "Open_vSwitch");
        assert_eq!(s.version, "8.3.1");
        let ovs = s.table("Open_vSwitch").unwrap();
        assert!(ovs.is_root);
        assert_eq!(ovs.max_rows, Some(1));
        assert!(s.column("Open_vSwitch", "cur_cfg").unwrap().is_scalar());
        let ofport = s.column("Interface", "ofport").unwrap();
        assert_eq!(
            (ofport.min, ofport.max, ofport.key.atomic),
            (0, Some(1), AtomicType::Integer)
        );
        assert!(s.table("Interface").unwrap().columns["statistics"].ephemeral);
        assert!(!s.table("Interface").unwrap().columns["name"].mutable);
        assert_eq!(
            s.table("Bridge").unwrap().indexes,
            [vec!["name".to_owned()]]
        );
        assert_eq!(
            s.column("Bridge", "ports")
                .unwrap()
                .key
                .ref_table
                .as_deref(),
            Some("Port")
        );
        assert!(s.column("Bridge", "nope").is_none());
        assert!(Schema::from_json(&json!({"name": "x"})).is_err());
        assert!(Schema::from_json(&json!([])).is_err());
    }
}
