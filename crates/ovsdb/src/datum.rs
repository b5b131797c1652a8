//! OVSDB values (RFC 7047 §5.1): atoms (integer, real, boolean, string, uuid) and datums, the
//! value of one column: a set of atoms or a map of atom pairs, kept sorted and free of
//! duplicates in OVSDB's own order so that two equal values compare equal and print alike.
//!
//! On the wire a one-element set is its bare atom, other sets are `["set",[...]]`, maps
//! `["map",[[k,v],...]]` and uuids `["uuid","..."]`; `["named-uuid",NAME]` appears only in
//! transactions the client writes, never in what the server sends, so it is refused here.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

use crate::schema::{AtomicType, ColumnType};

/// A row's or a transaction's UUID, held as one 128-bit number so that its order is the order
/// OVSDB sorts uuids in (the four 32-bit words of its text, most significant first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uuid(pub u128);

impl Uuid {
    /// The all-zero uuid, which `monitor_cond_since` takes as "I have nothing".
    pub const ZERO: Uuid = Uuid(0);
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        write!(
            f,
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            (v >> 96) as u32,
            (v >> 80) as u16,
            (v >> 64) as u16,
            (v >> 48) as u16,
            v & 0xffff_ffff_ffff
        )
    }
}

impl FromStr for Uuid {
    type Err = String;

    /// Parses the 36-character form; hex digits in either case, as OVS accepts.
    fn from_str(s: &str) -> Result<Uuid, String> {
        let b = s.as_bytes();
        if b.len() != 36 {
            return Err(format!("\"{s}\" is not a valid UUID"));
        }
        let mut v: u128 = 0;
        for (i, &c) in b.iter().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                if c != b'-' {
                    return Err(format!("\"{s}\" is not a valid UUID"));
                }
                continue;
            }
            let d = (c as char)
                .to_digit(16)
                .ok_or_else(|| format!("\"{s}\" is not a valid UUID"))?;
            v = (v << 4) | u128::from(d);
        }
        Ok(Uuid(v))
    }
}

/// One OVSDB atomic value.
#[derive(Clone, Debug, PartialEq)]
pub enum Atom {
    Integer(i64),
    Real(f64),
    Boolean(bool),
    String(String),
    Uuid(Uuid),
}

impl Atom {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Atom::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Atom::Integer(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Atom::Boolean(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_uuid(&self) -> Option<Uuid> {
        match self {
            Atom::Uuid(u) => Some(*u),
            _ => None,
        }
    }

    /// The atom's wire form (RFC 7047 §5.1 `<atom>`).
    pub fn to_json(&self) -> Value {
        match self {
            Atom::Integer(n) => json!(n),
            Atom::Real(r) => json!(r),
            Atom::Boolean(b) => json!(b),
            Atom::String(s) => json!(s),
            Atom::Uuid(u) => json!(["uuid", u.to_string()]),
        }
    }

    /// Reads an atom of type `ty` from its wire form. Only the atomic type is checked: the
    /// server enforces ranges and enums on what it stores.
    pub fn from_json(v: &Value, ty: AtomicType) -> Result<Atom, String> {
        let bad = || format!("expected {}, got {}", ty.name(), short(v));
        match ty {
            AtomicType::Integer => v.as_i64().map(Atom::Integer).ok_or_else(bad),
            AtomicType::Real => match v {
                Value::Number(n) => n.as_f64().map(Atom::Real).ok_or_else(bad),
                _ => Err(bad()),
            },
            AtomicType::Boolean => v.as_bool().map(Atom::Boolean).ok_or_else(bad),
            AtomicType::String => v
                .as_str()
                .map(|s| Atom::String(s.to_owned()))
                .ok_or_else(bad),
            AtomicType::Uuid => match v.as_array().map(Vec::as_slice) {
                Some([Value::String(tag), Value::String(u)]) if tag == "uuid" => {
                    u.parse().map(Atom::Uuid)
                }
                _ => Err(bad()),
            },
        }
    }

    /// OVSDB's order: numbers numerically, false before true, strings bytewise, uuids by
    /// value. Atoms of different types (never in one column) order by type.
    pub fn ovsdb_cmp(&self, other: &Atom) -> Ordering {
        match (self, other) {
            (Atom::Integer(a), Atom::Integer(b)) => a.cmp(b),
            (Atom::Real(a), Atom::Real(b)) => a.total_cmp(b),
            (Atom::Boolean(a), Atom::Boolean(b)) => a.cmp(b),
            (Atom::String(a), Atom::String(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Atom::Uuid(a), Atom::Uuid(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Atom::Integer(_) => 0,
            Atom::Real(_) => 1,
            Atom::Boolean(_) => 2,
            Atom::String(_) => 3,
            Atom::Uuid(_) => 4,
        }
    }
}

/// The value of one column: a set of atoms (a scalar column holds a one-element set) or a map.
/// Elements are sorted in OVSDB's order with no duplicate (key).
///
/// All empty values are equal: `Empty`, an empty `Set` and an empty `Map` differ only in how
/// they are written (an empty map column must be written `["map",[]]`, which an empty `Map`
/// does; [`Datum::from_string_map`] makes one).
#[derive(Clone, Debug, Default)]
pub enum Datum {
    #[default]
    Empty,
    Set(Vec<Atom>),
    Map(Vec<(Atom, Atom)>),
}

impl PartialEq for Datum {
    fn eq(&self, other: &Datum) -> bool {
        match (self, other) {
            (Datum::Set(a), Datum::Set(b)) => a == b,
            (Datum::Map(a), Datum::Map(b)) => a == b,
            _ => self.is_empty() && other.is_empty(),
        }
    }
}

impl Datum {
    /// Reads a column value of type `ty` (RFC 7047 §5.1 `<value>`): checks the atomic types
    /// and the number of elements, sorts, and refuses duplicates as OVSDB does.
    pub fn from_json(v: &Value, ty: &ColumnType) -> Result<Datum, String> {
        let d = Datum::from_json_unbounded(v, ty)?;
        let n = d.len() as u64;
        if n < ty.min || ty.max.is_some_and(|max| n > max) {
            return Err(format!(
                "{n} element(s) where the type allows {}..{}",
                ty.min,
                ty.max.map_or("unlimited".to_owned(), |m| m.to_string())
            ));
        }
        Ok(d)
    }

    /// As [`Datum::from_json`] without the element-count check: an update2 "modify" diff of a
    /// one-element column may name both the old and the new element.
    pub(crate) fn from_json_unbounded(v: &Value, ty: &ColumnType) -> Result<Datum, String> {
        let tagged = |tag: &str| -> Option<&Vec<Value>> {
            match v.as_array().map(Vec::as_slice) {
                Some([Value::String(t), Value::Array(elems)]) if t == tag => Some(elems),
                _ => None,
            }
        };
        if let Some(value_ty) = &ty.value {
            let elems = tagged("map").ok_or_else(|| format!("expected a map, got {}", short(v)))?;
            let mut pairs = Vec::with_capacity(elems.len());
            for e in elems {
                let [k, val] = e.as_array().map(Vec::as_slice).unwrap_or(&[]) else {
                    return Err(format!("a map element is not a pair: {}", short(e)));
                };
                pairs.push((
                    Atom::from_json(k, ty.key.atomic)?,
                    Atom::from_json(val, value_ty.atomic)?,
                ));
            }
            pairs.sort_by(|a, b| a.0.ovsdb_cmp(&b.0));
            if pairs.windows(2).any(|w| w[0].0.ovsdb_cmp(&w[1].0).is_eq()) {
                return Err("map contains duplicate key".to_owned());
            }
            return Ok(if pairs.is_empty() {
                Datum::Empty
            } else {
                Datum::Map(pairs)
            });
        }
        let mut atoms = match tagged("set") {
            Some(elems) => elems
                .iter()
                .map(|e| Atom::from_json(e, ty.key.atomic))
                .collect::<Result<Vec<_>, _>>()?,
            None => vec![Atom::from_json(v, ty.key.atomic)?],
        };
        atoms.sort_by(Atom::ovsdb_cmp);
        if atoms.windows(2).any(|w| w[0].ovsdb_cmp(&w[1]).is_eq()) {
            return Err("set contains duplicate value".to_owned());
        }
        Ok(if atoms.is_empty() {
            Datum::Empty
        } else {
            Datum::Set(atoms)
        })
    }

    /// The wire form: a bare atom for a one-element set, `["set",[...]]` otherwise (also for
    /// `Empty`), `["map",[[k,v],...]]` for a map.
    pub fn to_json(&self) -> Value {
        match self {
            Datum::Empty => json!(["set", []]),
            Datum::Set(atoms) if atoms.len() == 1 => atoms[0].to_json(),
            Datum::Set(atoms) => {
                json!(["set", atoms.iter().map(Atom::to_json).collect::<Vec<_>>()])
            }
            Datum::Map(pairs) => json!([
                "map",
                pairs
                    .iter()
                    .map(|(k, v)| json!([k.to_json(), v.to_json()]))
                    .collect::<Vec<_>>()
            ]),
        }
    }

    /// Number of elements (set members or map pairs).
    pub fn len(&self) -> usize {
        match self {
            Datum::Empty => 0,
            Datum::Set(a) => a.len(),
            Datum::Map(p) => p.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn single(&self) -> Option<&Atom> {
        match self {
            Datum::Set(a) if a.len() == 1 => Some(&a[0]),
            _ => None,
        }
    }

    /// The one string of a one-element set.
    pub fn as_str(&self) -> Option<&str> {
        self.single().and_then(Atom::as_str)
    }

    pub fn as_i64(&self) -> Option<i64> {
        self.single().and_then(Atom::as_i64)
    }

    pub fn as_bool(&self) -> Option<bool> {
        self.single().and_then(Atom::as_bool)
    }

    pub fn as_uuid(&self) -> Option<Uuid> {
        self.single().and_then(Atom::as_uuid)
    }

    /// The set's elements, in order (empty for a map).
    pub fn atoms(&self) -> &[Atom] {
        match self {
            Datum::Set(a) => a,
            _ => &[],
        }
    }

    /// The map's pairs, in key order (empty for a set).
    pub fn pairs(&self) -> &[(Atom, Atom)] {
        match self {
            Datum::Map(p) => p,
            _ => &[],
        }
    }

    pub fn uuids(&self) -> Vec<Uuid> {
        self.atoms().iter().filter_map(Atom::as_uuid).collect()
    }

    pub fn integers(&self) -> Vec<i64> {
        self.atoms().iter().filter_map(Atom::as_i64).collect()
    }

    pub fn strings(&self) -> Vec<String> {
        self.atoms()
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect()
    }

    /// Looks a string key up in a map.
    pub fn get(&self, key: &str) -> Option<&Atom> {
        let pairs = self.pairs();
        pairs
            .binary_search_by(|(k, _)| match k {
                Atom::String(s) => s.as_bytes().cmp(key.as_bytes()),
                other => other.rank().cmp(&3),
            })
            .ok()
            .map(|i| &pairs[i].1)
    }

    /// A string-to-string map's pairs (pairs of other types are left out).
    pub fn string_map(&self) -> BTreeMap<String, String> {
        self.pairs()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned())))
            .collect()
    }

    /// A string-to-string map; an empty one still writes as `["map",[]]`.
    pub fn from_string_map(m: &BTreeMap<String, String>) -> Datum {
        // BTreeMap<String> iterates in byte order, which is OVSDB's string order.
        Datum::Map(
            m.iter()
                .map(|(k, v)| (Atom::String(k.clone()), Atom::String(v.clone())))
                .collect(),
        )
    }

    pub fn string(s: &str) -> Datum {
        Datum::Set(vec![Atom::String(s.to_owned())])
    }

    pub fn integer(n: i64) -> Datum {
        Datum::Set(vec![Atom::Integer(n)])
    }

    pub fn boolean(b: bool) -> Datum {
        Datum::Set(vec![Atom::Boolean(b)])
    }

    pub fn uuid(u: Uuid) -> Datum {
        Datum::Set(vec![Atom::Uuid(u)])
    }

    /// A set of `atoms`, sorted and deduplicated into OVSDB's order.
    pub fn set(mut atoms: Vec<Atom>) -> Datum {
        atoms.sort_by(Atom::ovsdb_cmp);
        atoms.dedup_by(|a, b| a.ovsdb_cmp(b).is_eq());
        Datum::Set(atoms)
    }
}

impl AtomicType {
    pub(crate) fn default_atom(self) -> Atom {
        match self {
            AtomicType::Integer => Atom::Integer(0),
            AtomicType::Real => Atom::Real(0.0),
            AtomicType::Boolean => Atom::Boolean(false),
            AtomicType::String => Atom::String(String::new()),
            AtomicType::Uuid => Atom::Uuid(Uuid::ZERO),
        }
    }
}

impl ColumnType {
    /// The value a column has when a row does not mention it: the atomic type's default for a
    /// column that always holds exactly one element, empty otherwise (RFC 7047 §5.2.1).
    pub fn default_datum(&self) -> Datum {
        if self.min == 1 && self.value.is_none() {
            Datum::Set(vec![self.key.atomic.default_atom()])
        } else {
            Datum::Empty
        }
    }
}

/// A short rendering of an offending JSON value for error messages.
pub(crate) fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        let mut end = 60;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::BaseType;

    fn ty(v: Value) -> ColumnType {
        ColumnType::from_json(&v).unwrap()
    }

    #[test]
    fn uuid_text_round_trip_and_order() {
        let s = "550e8400-e29b-41d4-a716-446655440000";
        let u: Uuid = s.parse().unwrap();
        assert_eq!(u.to_string(), s);
        assert_eq!(
            "550E8400-E29B-41D4-A716-446655440000"
                .parse::<Uuid>()
                .unwrap(),
            u
        );
        for bad in [
            "",
            "550e8400e29b41d4a716446655440000",
            "550e8400-e29b-41d4-a716-44665544000g",
            "550e8400-e29b-41d4-a716_446655440000",
        ] {
            assert!(bad.parse::<Uuid>().is_err(), "{bad}");
        }
        // OVSDB compares the text's 32-bit words most significant first: numeric order.
        let a: Uuid = "00000001-0000-0000-0000-000000000000".parse().unwrap();
        let b: Uuid = "00000000-ffff-ffff-ffff-ffffffffffff".parse().unwrap();
        assert!(b < a);
    }

    #[test]
    fn one_element_set_is_a_bare_atom() {
        let t = ty(json!({"key": "string", "min": 0, "max": 1}));
        let d = Datum::from_json(&json!("x"), &t).unwrap();
        assert_eq!(d, Datum::string("x"));
        assert_eq!(d.to_json(), json!("x"));
        assert_eq!(Datum::from_json(&json!(["set", ["x"]]), &t).unwrap(), d);
        assert_eq!(d.as_str(), Some("x"));
        let empty = Datum::from_json(&json!(["set", []]), &t).unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty, Datum::Empty);
        assert_eq!(empty.to_json(), json!(["set", []]));
        assert_eq!(empty.as_str(), None);
        // Two elements where at most one is allowed.
        assert!(Datum::from_json(&json!(["set", ["a", "b"]]), &t).is_err());
        // A scalar column needs its one element.
        assert!(Datum::from_json(&json!(["set", []]), &ty(json!("integer"))).is_err());
    }

    #[test]
    fn sets_sort_as_ovsdb_and_refuse_duplicates() {
        let t = ty(json!({"key": "integer", "min": 0, "max": "unlimited"}));
        let d = Datum::from_json(&json!(["set", [3, -1, 2]]), &t).unwrap();
        assert_eq!(d.integers(), [-1, 2, 3]);
        assert_eq!(d.to_json(), json!(["set", [-1, 2, 3]]));
        assert!(Datum::from_json(&json!(["set", [1, 1]]), &t).is_err());
        let t = ty(json!({"key": "string", "min": 0, "max": "unlimited"}));
        let d = Datum::from_json(&json!(["set", ["b", "B", "a", "é"]]), &t).unwrap();
        // Bytewise: upper case before lower case, UTF-8 after ASCII.
        assert_eq!(d.strings(), ["B", "a", "b", "é"]);
        let t = ty(json!({"key": "uuid", "min": 0, "max": "unlimited"}));
        let d = Datum::from_json(
            &json!([
                "set",
                [
                    ["uuid", "ffffffff-0000-0000-0000-000000000000"],
                    ["uuid", "0fffffff-0000-0000-0000-000000000001"]
                ]
            ]),
            &t,
        )
        .unwrap();
        assert_eq!(
            d.uuids()[0].to_string(),
            "0fffffff-0000-0000-0000-000000000001"
        );
        let t = ty(json!({"key": "boolean", "min": 0, "max": 2}));
        assert_eq!(
            Datum::from_json(&json!(["set", [true, false]]), &t)
                .unwrap()
                .atoms(),
            [Atom::Boolean(false), Atom::Boolean(true)]
        );
        assert_eq!(
            Datum::set(vec![Atom::Integer(2), Atom::Integer(1), Atom::Integer(2)]).integers(),
            [1, 2]
        );
    }

    #[test]
    fn maps() {
        let t = ty(json!({"key": "string", "value": "string", "min": 0, "max": "unlimited"}));
        let d = Datum::from_json(&json!(["map", [["b", "2"], ["a", "1"]]]), &t).unwrap();
        assert_eq!(d.to_json(), json!(["map", [["a", "1"], ["b", "2"]]]));
        assert_eq!(d.get("b").and_then(Atom::as_str), Some("2"));
        assert_eq!(d.get("c"), None);
        let m = d.string_map();
        assert_eq!(Datum::from_string_map(&m), d);
        assert_eq!(
            Datum::from_string_map(&BTreeMap::new()).to_json(),
            json!(["map", []])
        );
        assert!(Datum::from_json(&json!(["map", [["a", "1"], ["a", "2"]]]), &t).is_err());
        // A map column's value must be tagged "map".
        assert!(Datum::from_json(&json!(["set", []]), &t).is_err());
        assert!(Datum::from_json(&json!(["map", [["a"]]]), &t).is_err());
        let empty = Datum::from_json(&json!(["map", []]), &t).unwrap();
        assert!(empty.is_empty() && empty.string_map().is_empty());
        // Integer keys sort numerically.
        let t =
            ty(json!({"key": "integer", "value": {"type": "uuid"}, "min": 0, "max": "unlimited"}));
        let u = json!(["uuid", "550e8400-e29b-41d4-a716-446655440000"]);
        let d = Datum::from_json(&json!(["map", [[10, u], [9, u]]]), &t).unwrap();
        assert_eq!(d.pairs()[0].0, Atom::Integer(9));
        assert_eq!(d.atoms(), []);
    }

    #[test]
    fn atoms_of_each_type() {
        let base = |a| ColumnType {
            key: BaseType {
                atomic: a,
                ..BaseType::default()
            },
            ..ColumnType::default()
        };
        let real = Datum::from_json(&json!(1), &base(AtomicType::Real)).unwrap();
        assert_eq!(real.atoms(), [Atom::Real(1.0)]);
        assert_eq!(
            Datum::from_json(&json!(1.5), &base(AtomicType::Real))
                .unwrap()
                .to_json(),
            json!(1.5)
        );
        assert!(Datum::from_json(&json!(1.5), &base(AtomicType::Integer)).is_err());
        assert!(Datum::from_json(&json!("1"), &base(AtomicType::Integer)).is_err());
        assert_eq!(
            Datum::from_json(&json!(true), &base(AtomicType::Boolean))
                .unwrap()
                .as_bool(),
            Some(true)
        );
        assert!(Datum::from_json(&json!(["named-uuid", "x"]), &base(AtomicType::Uuid)).is_err());
        assert!(Datum::from_json(&json!(["uuid", "nope"]), &base(AtomicType::Uuid)).is_err());
        assert_eq!(Datum::integer(-5).to_json(), json!(-5));
        assert_eq!(Datum::boolean(false).to_json(), json!(false));
        assert_eq!(
            Datum::uuid(Uuid(1)).to_json(),
            json!(["uuid", "00000000-0000-0000-0000-000000000001"])
        );
        assert_eq!(Atom::Uuid(Uuid(1)).as_uuid(), Some(Uuid(1)));
        assert_eq!(Datum::integer(3).as_i64(), Some(3));
        assert_eq!(Datum::integer(3).as_str(), None);
    }

    #[test]
    fn defaults() {
        assert_eq!(ty(json!("integer")).default_datum(), Datum::integer(0));
        assert_eq!(ty(json!("string")).default_datum(), Datum::string(""));
        assert_eq!(
            ty(json!({"key": "integer", "min": 0})).default_datum(),
            Datum::Empty
        );
    }
}
