//! A typed queue's schema: fields, their types, versions and the rules of
//! evolution (FORMAT.md "Typed records").

use serde_json::{json, Value as Json};

/// Why a schema, an evolution or an event was refused: the message names
/// the field and says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError(pub String);

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, SchemaError> {
    Err(SchemaError(msg.into()))
}

/// A field's type: what its fixed slot holds (FORMAT.md's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// 1 byte, 0 or 1.
    Bool,
    /// Signed integer of 1, 2, 4 or 8 bytes.
    Int8,
    /// See [`FieldType::Int8`].
    Int16,
    /// See [`FieldType::Int8`].
    Int32,
    /// See [`FieldType::Int8`].
    Int64,
    /// Unsigned integer of 1, 2, 4 or 8 bytes.
    UInt8,
    /// See [`FieldType::UInt8`].
    UInt16,
    /// See [`FieldType::UInt8`].
    UInt32,
    /// See [`FieldType::UInt8`].
    UInt64,
    /// IEEE 754 single.
    Float32,
    /// IEEE 754 double.
    Float64,
    /// i64 µs since the Unix epoch, UTC.
    TimestampUs,
    /// i32 days since 1970-01-01.
    Date32,
    /// i128, the value × 10^scale.
    Decimal128 {
        /// Digits, 1..=38.
        precision: u8,
        /// Digits after the point, 0..=precision.
        scale: u8,
    },
    /// UTF-8 text in the var area (slot: u32 end).
    String,
    /// Bytes in the var area (slot: u32 end).
    Binary,
}

impl FieldType {
    /// The kind of a secondary index on a field of this type
    /// (`crate::format::fields`): `str` for string and binary, `int` for
    /// bool, the signed integers, uint8 to uint32, timestamp and date;
    /// `None` for floats, decimals and uint64 (no index: `where()` scans
    /// them).
    pub fn index_kind(&self) -> Option<crate::format::fields::FieldKind> {
        use crate::format::fields::FieldKind;
        match self {
            FieldType::String | FieldType::Binary => Some(FieldKind::Str),
            FieldType::Bool
            | FieldType::Int8
            | FieldType::Int16
            | FieldType::Int32
            | FieldType::Int64
            | FieldType::UInt8
            | FieldType::UInt16
            | FieldType::UInt32
            | FieldType::TimestampUs
            | FieldType::Date32 => Some(FieldKind::Int),
            FieldType::UInt64
            | FieldType::Float32
            | FieldType::Float64
            | FieldType::Decimal128 { .. } => None,
        }
    }

    /// The name in the schema JSON (`int64`, `decimal128(10,2)`, ...).
    pub fn name(&self) -> String {
        match self {
            FieldType::Bool => "bool".into(),
            FieldType::Int8 => "int8".into(),
            FieldType::Int16 => "int16".into(),
            FieldType::Int32 => "int32".into(),
            FieldType::Int64 => "int64".into(),
            FieldType::UInt8 => "uint8".into(),
            FieldType::UInt16 => "uint16".into(),
            FieldType::UInt32 => "uint32".into(),
            FieldType::UInt64 => "uint64".into(),
            FieldType::Float32 => "float32".into(),
            FieldType::Float64 => "float64".into(),
            FieldType::TimestampUs => "timestamp_us".into(),
            FieldType::Date32 => "date32".into(),
            FieldType::Decimal128 { precision, scale } => {
                format!("decimal128({precision},{scale})")
            }
            FieldType::String => "string".into(),
            FieldType::Binary => "binary".into(),
        }
    }

    /// The type named `s` (see [`FieldType::name`]).
    pub fn parse(s: &str) -> Result<FieldType, SchemaError> {
        Ok(match s {
            "bool" => FieldType::Bool,
            "int8" => FieldType::Int8,
            "int16" => FieldType::Int16,
            "int32" => FieldType::Int32,
            "int64" => FieldType::Int64,
            "uint8" => FieldType::UInt8,
            "uint16" => FieldType::UInt16,
            "uint32" => FieldType::UInt32,
            "uint64" => FieldType::UInt64,
            "float32" => FieldType::Float32,
            "float64" => FieldType::Float64,
            "timestamp_us" => FieldType::TimestampUs,
            "date32" => FieldType::Date32,
            "string" => FieldType::String,
            "binary" => FieldType::Binary,
            _ => {
                let ps = s
                    .strip_prefix("decimal128(")
                    .and_then(|r| r.strip_suffix(')'))
                    .and_then(|r| r.split_once(','))
                    .and_then(|(p, s)| Some((p.parse::<u8>().ok()?, s.parse::<u8>().ok()?)));
                match ps {
                    Some((precision, scale))
                        if (1..=38).contains(&precision) && scale <= precision =>
                    {
                        FieldType::Decimal128 { precision, scale }
                    }
                    _ => return err(format!("unknown field type {s:?}")),
                }
            }
        })
    }

    /// Bytes of the fixed slot.
    pub fn width(&self) -> usize {
        match self {
            FieldType::Bool | FieldType::Int8 | FieldType::UInt8 => 1,
            FieldType::Int16 | FieldType::UInt16 => 2,
            FieldType::Int32 | FieldType::UInt32 | FieldType::Float32 | FieldType::Date32 => 4,
            FieldType::Int64 | FieldType::UInt64 | FieldType::Float64 | FieldType::TimestampUs => 8,
            FieldType::Decimal128 { .. } => 16,
            FieldType::String | FieldType::Binary => 4,
        }
    }

    /// True for the types whose bytes are in the var area.
    pub fn is_var(&self) -> bool {
        matches!(self, FieldType::String | FieldType::Binary)
    }

    /// True when every value of `self` is a value of `to` (an evolution
    /// may change a field's type from `self` to `to`).
    pub fn widens_to(&self, to: &FieldType) -> bool {
        use FieldType::*;
        if self == to {
            return true;
        }
        let rank = |t: &FieldType| match t {
            Int8 => Some((true, 1)),
            Int16 => Some((true, 2)),
            Int32 => Some((true, 4)),
            Int64 => Some((true, 8)),
            UInt8 => Some((false, 1)),
            UInt16 => Some((false, 2)),
            UInt32 => Some((false, 4)),
            UInt64 => Some((false, 8)),
            _ => None,
        };
        match (rank(self), rank(to)) {
            (Some((fs, fw)), Some((ts, tw))) => (fs == ts && tw > fw) || (!fs && ts && tw > fw),
            _ => matches!((self, to), (Float32, Float64)),
        }
    }
}

/// Names a field may not have: the columns every read has already.
pub const RESERVED_NAMES: &[&str] = &[
    "seq",
    "timestamp",
    "key",
    "headers",
    "payload",
    "topic",
    "queue_id",
    "tags",
    "priority",
    "expires_at",
    "codec",
    "raw_len",
    "key_text",
    "headers_text",
];

/// One field of a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field's name (1..=255 bytes of UTF-8).
    pub name: String,
    /// Its type.
    pub ty: FieldType,
    /// Whether a row may lack a value.
    pub nullable: bool,
    /// Names it had in earlier versions.
    pub aliases: Vec<String>,
}

/// One version of a queue's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// 1 for a queue's first schema, +1 per evolution.
    pub version: u32,
    /// The fields, in row order.
    pub fields: Vec<Field>,
}

impl Schema {
    /// Checks the rules of FORMAT.md: 1..=1024 fields, names unique,
    /// 1..=255 bytes, not reserved, aliases not clashing with names.
    pub fn check(&self) -> Result<(), SchemaError> {
        if self.fields.is_empty() || self.fields.len() > super::MAX_FIELDS {
            return err(format!(
                "a schema has 1 to {} fields, not {}",
                super::MAX_FIELDS,
                self.fields.len()
            ));
        }
        if self.version == 0 {
            return err("schema versions start at 1");
        }
        let mut seen = std::collections::HashSet::new();
        for f in &self.fields {
            if f.name.is_empty() || f.name.len() > 255 {
                return err(format!(
                    "field name {:?}: names are 1 to 255 bytes of UTF-8",
                    f.name
                ));
            }
            if RESERVED_NAMES.contains(&f.name.as_str()) {
                return err(format!(
                    "field {:?}: the name is a column every read has already \
                     (reserved: {})",
                    f.name,
                    RESERVED_NAMES.join(", ")
                ));
            }
            if !seen.insert(f.name.as_str()) {
                return err(format!("field {:?} appears twice", f.name));
            }
        }
        for f in &self.fields {
            for a in &f.aliases {
                if a != &f.name && seen.contains(a.as_str()) {
                    return err(format!(
                        "field {:?}: its alias {a:?} is the name of another field",
                        f.name
                    ));
                }
            }
        }
        let json = self.to_json();
        if json.len() > super::MAX_SCHEMA_JSON {
            return err(format!(
                "the schema's JSON is {} bytes; a data file's header holds at most {}",
                json.len(),
                super::MAX_SCHEMA_JSON
            ));
        }
        Ok(())
    }

    /// The JSON object FORMAT.md describes, written compactly.
    pub fn to_json_value(&self) -> Json {
        json!({
            "version": self.version,
            "fields": self.fields.iter().map(|f| json!({
                "name": f.name,
                "type": f.ty.name(),
                "nullable": f.nullable,
                "aliases": f.aliases,
            })).collect::<Vec<_>>(),
        })
    }

    /// [`Schema::to_json_value`] as text (serde_json keeps the keys in the
    /// order written: the `preserve_order`-free map sorts them, so the text
    /// is built by hand to keep FORMAT.md's order).
    pub fn to_json(&self) -> String {
        let mut s = format!("{{\"version\":{},\"fields\":[", self.version);
        for (i, f) in self.fields.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!(
                "{{\"name\":{},\"type\":{},\"nullable\":{},\"aliases\":{}}}",
                Json::from(f.name.as_str()),
                Json::from(f.ty.name()),
                f.nullable,
                Json::from(f.aliases.clone()),
            ));
        }
        s.push_str("]}");
        s
    }

    /// Parses and checks one schema version's JSON object.
    pub fn from_json_value(v: &Json) -> Result<Schema, SchemaError> {
        let version = v
            .get("version")
            .and_then(Json::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| SchemaError("schema without a version number".into()))?;
        let fields = v
            .get("fields")
            .and_then(Json::as_array)
            .ok_or_else(|| SchemaError("schema without a list of fields".into()))?;
        let mut out = Vec::with_capacity(fields.len());
        for f in fields {
            let name = f
                .get("name")
                .and_then(Json::as_str)
                .ok_or_else(|| SchemaError("a field without a name".into()))?;
            let ty = f
                .get("type")
                .and_then(Json::as_str)
                .ok_or_else(|| SchemaError(format!("field {name:?} has no type")))?;
            let ty =
                FieldType::parse(ty).map_err(|e| SchemaError(format!("field {name:?}: {e}")))?;
            let nullable = match f.get("nullable") {
                None => true,
                Some(b) => b.as_bool().ok_or_else(|| {
                    SchemaError(format!("field {name:?}: nullable is not a bool"))
                })?,
            };
            let aliases = match f.get("aliases") {
                None => vec![],
                Some(a) => a
                    .as_array()
                    .and_then(|a| a.iter().map(|s| s.as_str().map(String::from)).collect())
                    .ok_or_else(|| {
                        SchemaError(format!("field {name:?}: aliases is not a list of names"))
                    })?,
            };
            out.push(Field {
                name: name.to_string(),
                ty,
                nullable,
                aliases,
            });
        }
        let s = Schema {
            version,
            fields: out,
        };
        s.check()?;
        Ok(s)
    }

    /// Parses one schema version's JSON text.
    pub fn from_json(s: &str) -> Result<Schema, SchemaError> {
        let v: Json =
            serde_json::from_str(s).map_err(|e| SchemaError(format!("schema JSON: {e}")))?;
        Schema::from_json_value(&v)
    }

    /// The indexes of the fields named `names` (names or aliases), in that
    /// order; an unknown name is an error listing the fields.
    pub fn field_indexes<S: AsRef<str>>(&self, names: &[S]) -> Result<Vec<usize>, SchemaError> {
        names
            .iter()
            .map(|n| {
                let n = n.as_ref();
                self.find(n).ok_or_else(|| {
                    SchemaError(format!(
                        "no field {n:?} in the queue's schema (fields: {})",
                        self.fields
                            .iter()
                            .map(|f| f.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
            })
            .collect()
    }

    /// The index of the field named `name`, or whose aliases hold it.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name).or_else(|| {
            self.fields
                .iter()
                .position(|f| f.aliases.iter().any(|a| a == name))
        })
    }

    /// Same fields, types, nullability and aliases (versions aside).
    pub fn same_fields(&self, other: &Schema) -> bool {
        self.fields == other.fields
    }

    /// Checks that `new` may follow `self` (FORMAT.md "Evolution"): the
    /// error names the field and says why.
    pub fn check_evolution(&self, new: &Schema) -> Result<(), SchemaError> {
        for nf in &new.fields {
            let old = self
                .fields
                .iter()
                .find(|of| of.name == nf.name || nf.aliases.iter().any(|a| a == &of.name));
            match old {
                None if !nf.nullable => {
                    return err(format!(
                        "field {:?} is new and not nullable: rows written before it \
                         have no value for it (add it as nullable)",
                        nf.name
                    ))
                }
                None => {}
                Some(of) => {
                    if !of.ty.widens_to(&nf.ty) {
                        return err(format!(
                            "field {:?} changes type from {} to {}: only widening \
                             (int8→int16→int32→int64, uint to a wider int, \
                             float32→float64) keeps the rows already written readable",
                            nf.name,
                            of.ty.name(),
                            nf.ty.name()
                        ));
                    }
                    if of.nullable && !nf.nullable {
                        return err(format!(
                            "field {:?} becomes non-nullable: rows already written \
                             may be null there",
                            nf.name
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Every version of a queue's schema, oldest first (`metadata.json`
/// `schema.versions`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SchemaVersions {
    /// The versions; the last is current. Version `i + 1` is at `i`.
    pub versions: Vec<Schema>,
}

impl SchemaVersions {
    /// The current version, if the queue is typed.
    pub fn current(&self) -> Option<&Schema> {
        self.versions.last()
    }

    /// Version `v` (1-based).
    pub fn get(&self, v: u32) -> Option<&Schema> {
        self.versions.get((v as usize).checked_sub(1)?)
    }

    /// `metadata.json`'s `schema` object.
    pub fn to_json_value(&self) -> Json {
        json!({ "versions": self.versions.iter().map(Schema::to_json_value).collect::<Vec<_>>() })
    }

    /// Parses `metadata.json`'s `schema` object: versions 1, 2, ... in
    /// order, each a valid evolution of the one before.
    pub fn from_json_value(v: &Json) -> Result<SchemaVersions, SchemaError> {
        let list = v
            .get("versions")
            .and_then(Json::as_array)
            .ok_or_else(|| SchemaError("schema without versions".into()))?;
        let mut versions: Vec<Schema> = Vec::with_capacity(list.len());
        for (i, s) in list.iter().enumerate() {
            let s = Schema::from_json_value(s)?;
            if s.version as usize != i + 1 {
                return err(format!(
                    "schema version {} listed as the {}th",
                    s.version,
                    i + 1
                ));
            }
            if let Some(prev) = versions.last() {
                prev.check_evolution(&s)?;
            }
            versions.push(s);
        }
        if versions.is_empty() {
            return err("schema without versions");
        }
        Ok(SchemaVersions { versions })
    }

    /// The versions after declaring `new` (its `version` is ignored): the
    /// same list when it has the current version's fields, one more
    /// version when it is a valid evolution, else the error saying why.
    pub fn declare(&self, new: &Schema) -> Result<SchemaVersions, SchemaError> {
        let next = self.versions.len() as u32 + 1;
        let candidate =
            Schema {
                version: self.current().map_or(1, |c| {
                    if c.same_fields(new) {
                        c.version
                    } else {
                        next
                    }
                }),
                fields: new.fields.clone(),
            };
        candidate.check()?;
        let mut out = self.clone();
        match self.current() {
            Some(c) if c.same_fields(new) => {}
            Some(c) => {
                c.check_evolution(&candidate)?;
                out.versions.push(candidate);
            }
            None => out.versions.push(candidate),
        }
        Ok(out)
    }
}

impl From<SchemaError> for crate::error::Error {
    fn from(e: SchemaError) -> Self {
        crate::error::Error::Schema(e.0)
    }
}
