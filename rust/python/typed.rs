//! Typed queues in Python: events (dicts, dataclass instances, msgspec
//! Structs) to rows and rows back to dicts of the current schema
//! (FORMAT.md "Typed records"; the schema itself comes from
//! `litemq.schema` as JSON).
//!
//! [`Decoders`] holds every version of a queue's schema with its row layout
//! and, per version, where each field of the current version lies in it
//! (renames followed through every version's aliases), so a message of any
//! version decodes under the current field names.

use std::path::Path;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};

use super::args::type_name;
use super::buffer::{bytes_arg, BytesArg};
use super::exit;
use crate::format::typed::arrow_in::{encode_columns, ColumnIn};
use crate::format::typed::{
    decode_row, encode_row, FieldType, RowLayout, Schema, SchemaVersions, Value,
};
use crate::Error;

/// Every version of a queue's schema, ready to encode events of the
/// current one and decode rows of any.
pub(crate) struct Decoders {
    /// The current version: events are encoded in it, rows decoded into it.
    current: Schema,
    /// Its JSON (`litemq._typed.arrow_batches` maps Arrow columns by it).
    current_json: String,
    /// One per version, version `i + 1` at `i`.
    layouts: Vec<RowLayout>,
    /// Per version: for each current field, its index in that version.
    projections: Vec<Vec<Option<usize>>>,
    /// The current fields' names, as Python strings (dict keys).
    names: Vec<Py<PyString>>,
}

fn schema_err(msg: impl Into<String>) -> PyErr {
    Error::Schema(msg.into()).into()
}

impl Decoders {
    pub(crate) fn new(py: Python<'_>, versions: &SchemaVersions) -> PyResult<Decoders> {
        let current = versions
            .current()
            .ok_or_else(|| schema_err("the queue has no schema"))?;
        let layouts = versions.versions.iter().map(RowLayout::of).collect();
        let projections = (1..=versions.versions.len() as u32)
            .map(|v| project(versions, v))
            .collect();
        let names = current
            .fields
            .iter()
            .map(|f| PyString::intern(py, &f.name).unbind())
            .collect();
        Ok(Decoders {
            current: current.clone(),
            current_json: current.to_json(),
            layouts,
            projections,
            names,
        })
    }

    /// The current version.
    pub(crate) fn current(&self) -> &Schema {
        &self.current
    }

    /// The current version's JSON.
    pub(crate) fn current_json(&self) -> &str {
        &self.current_json
    }

    fn current_layout(&self) -> &RowLayout {
        // One layout per version, and `new` checked there is one.
        &self.layouts[self.layouts.len() - 1]
    }

    /// Appends the row of `event` (current version) to `out`; a missing,
    /// extra or mistyped field raises `SchemaError` naming it, and `out`
    /// is then as it was.
    pub(crate) fn encode(&self, event: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
        let values = self.values_of(event)?;
        encode_row(self.current(), self.current_layout(), &values, out).map_err(|e| schema_err(e.0))
    }

    /// Where each of the `count` rows of `block` (current version, as
    /// [`Decoders::encode`] wrote them) starts, and last where it ends.
    pub(crate) fn row_starts(&self, block: &[u8], count: usize) -> PyResult<Vec<usize>> {
        self.current_layout()
            .split_block(block, count)
            .map_err(|why| schema_err(format!("rows of the batch: {why}")))
    }

    /// The values of `event`, one per current field.
    fn values_of(&self, event: &Bound<'_, PyAny>) -> PyResult<Vec<Value>> {
        let schema = self.current();
        let get = Event::of(event)?;
        get.check_names(schema)?;
        schema
            .fields
            .iter()
            .map(|f| {
                let v = get.field(&f.name)?;
                match v {
                    None if f.nullable => Ok(Value::Null),
                    None => Err(schema_err(format!(
                        "field {:?} ({}) is missing from the event",
                        f.name,
                        f.ty.name()
                    ))),
                    Some(v) if v.is_none() => Ok(Value::Null),
                    Some(v) => to_value(&v, f.ty).map_err(|why| {
                        schema_err(format!("field {:?} ({}): {why}", f.name, f.ty.name()))
                    }),
                }
            })
            .collect()
    }

    /// The dict of `row`, a row of version `version`, under the current
    /// fields' names: a field the version lacks is None, a renamed one
    /// under its current name, a narrower value as it is.
    pub(crate) fn decode<'py>(
        &self,
        py: Python<'py>,
        row: &[u8],
        version: u32,
        at: Option<(std::path::PathBuf, u64, Option<u64>)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let i = (version as usize)
            .checked_sub(1)
            .filter(|&i| i < self.layouts.len())
            .ok_or_else(|| {
                schema_err(format!(
                    "the message is of schema version {version}, which this handle does not \
                     know (it knows 1 to {}): open the queue again to read it",
                    self.layouts.len()
                ))
            })?;
        let values = decode_row(&self.layouts[i], row).map_err(|why| {
            let (path, offset, seq) = at.unwrap_or_default();
            Error::corrupted(
                path,
                offset,
                seq,
                format!("typed row of schema version {version}: {why}"),
            )
        })?;
        let d = PyDict::new(py);
        for ((name, at), f) in self
            .names
            .iter()
            .zip(&self.projections[i])
            .zip(&self.current().fields)
        {
            let v = match at {
                Some(j) => to_python(py, &values[*j], f.ty)?,
                None => py.None().into_bound(py),
            };
            d.set_item(name.bind(py), v)?;
        }
        Ok(d)
    }
}

/// For each field of the current version, its index in version `v`:
/// followed back one version at a time through its name or aliases.
fn project(versions: &SchemaVersions, v: u32) -> Vec<Option<usize>> {
    let all = &versions.versions;
    let last = all.len() - 1;
    all[last]
        .fields
        .iter()
        .map(|f| {
            let mut at = last;
            let mut field = f;
            while at + 1 > v as usize {
                let older = &all[at - 1];
                let found = older
                    .fields
                    .iter()
                    .find(|o| o.name == field.name || field.aliases.contains(&o.name))?;
                field = found;
                at -= 1;
            }
            all[at].fields.iter().position(|o| o.name == field.name)
        })
        .collect()
}

/// How an event gives its fields: a mapping, or the attributes of a
/// dataclass instance or a msgspec Struct.
enum Event<'a, 'py> {
    Dict(&'a Bound<'py, PyDict>),
    Attrs(&'a Bound<'py, PyAny>, Vec<String>),
}

impl<'a, 'py> Event<'a, 'py> {
    fn of(event: &'a Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(d) = event.cast::<PyDict>() {
            return Ok(Event::Dict(d));
        }
        if event.is_instance_of::<PyBytes>()
            || event.is_instance_of::<PyString>()
            || event.is_instance_of::<pyo3::types::PyByteArray>()
            || event.is_instance_of::<pyo3::types::PyMemoryView>()
        {
            return Err(schema_err(format!(
                "a typed queue stores events, not {}: pass a dict, a dataclass instance \
                 or a msgspec.Struct with the schema's fields",
                type_name(event)
            )));
        }
        let ty = event.get_type();
        let names: Option<Vec<String>> = if let Ok(f) = ty.getattr("__struct_fields__") {
            Some(f.extract()?)
        } else if let Ok(f) = ty.getattr("__dataclass_fields__") {
            let d = f.cast_into::<PyDict>()?;
            Some(d.keys().extract()?)
        } else {
            None
        };
        match names {
            Some(n) if !event.is_instance_of::<pyo3::types::PyType>() => Ok(Event::Attrs(event, n)),
            _ => Err(schema_err(format!(
                "a typed queue stores events: a dict, a dataclass instance or a msgspec.Struct, \
                 not {}",
                type_name(event)
            ))),
        }
    }

    /// A field the event has that the schema lacks raises, naming it.
    fn check_names(&self, schema: &Schema) -> PyResult<()> {
        let known = |n: &str| schema.fields.iter().any(|f| f.name == n);
        let extra = match self {
            Event::Dict(d) => {
                let mut extra = None;
                for k in d.keys() {
                    let name = k.cast::<PyString>().map_err(|_| {
                        schema_err(format!(
                            "event keys are field names (str), not {}",
                            type_name(&k)
                        ))
                    })?;
                    let name = name.to_str()?;
                    if !known(name) {
                        extra = Some(name.to_string());
                        break;
                    }
                }
                extra
            }
            Event::Attrs(_, names) => names.iter().find(|n| !known(n)).cloned(),
        };
        match extra {
            Some(name) => Err(schema_err(format!(
                "field {name:?} is not in the queue's schema (its fields: {})",
                schema
                    .fields
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            None => Ok(()),
        }
    }

    fn field(&self, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        match self {
            Event::Dict(d) => d.get_item(name),
            Event::Attrs(obj, names) => {
                if names.iter().any(|n| n == name) {
                    Ok(Some(obj.getattr(name)?))
                } else {
                    Ok(None)
                }
            }
        }
    }
}

/// Python's datetime pieces, looked up once.
struct Pieces {
    datetime: Py<PyAny>,
    date: Py<PyAny>,
    epoch: Py<PyAny>,
    one_us: Py<PyAny>,
    decimal: Py<PyAny>,
    date_from_ordinal: Py<PyAny>,
}

static PIECES: PyOnceLock<Pieces> = PyOnceLock::new();

fn pieces(py: Python<'_>) -> PyResult<&'static Pieces> {
    PIECES.get_or_try_init(py, || {
        let m = py.import("datetime")?;
        let datetime = m.getattr("datetime")?;
        let utc = m.getattr("timezone")?.getattr("utc")?;
        let kw = PyDict::new(py);
        kw.set_item("tzinfo", utc)?;
        let epoch = datetime.call((1970, 1, 1), Some(&kw))?;
        let kw = PyDict::new(py);
        kw.set_item("microseconds", 1)?;
        let one_us = m.getattr("timedelta")?.call((), Some(&kw))?;
        let date = m.getattr("date")?;
        Ok(Pieces {
            datetime: datetime.unbind(),
            date_from_ordinal: date.getattr("fromordinal")?.unbind(),
            date: date.unbind(),
            epoch: epoch.unbind(),
            one_us: one_us.unbind(),
            decimal: py.import("decimal")?.getattr("Decimal")?.unbind(),
        })
    })
}

/// Days from 0001-01-01 (ordinal 1) to 1970-01-01.
const EPOCH_ORDINAL: i64 = 719_163;

fn int_of(v: &Bound<'_, PyAny>) -> Option<Result<i128, String>> {
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        return None;
    }
    Some(v.extract::<i128>().map_err(|_| "out of range".to_string()))
}

/// `v` as the value of a field of type `ty`; the reason when it is not one.
fn to_value(v: &Bound<'_, PyAny>, ty: FieldType) -> Result<Value, String> {
    let py = v.py();
    let want = |what: &str| format!("expected {what}, got {}", type_name(v));
    let range = |n: i128| -> Result<i64, String> {
        i64::try_from(n).map_err(|_| "out of range".to_string())
    };
    Ok(match ty {
        FieldType::Bool => match v.cast::<PyBool>() {
            Ok(b) => Value::Bool(b.is_true()),
            Err(_) => return Err(want("a bool")),
        },
        FieldType::Int8 | FieldType::Int16 | FieldType::Int32 | FieldType::Int64 => {
            match int_of(v) {
                Some(n) => Value::Int(range(n?)?),
                None => return Err(want("an int")),
            }
        }
        FieldType::UInt8 | FieldType::UInt16 | FieldType::UInt32 | FieldType::UInt64 => {
            match int_of(v) {
                Some(n) => Value::UInt(u64::try_from(n?).map_err(|_| "out of range")?),
                None => return Err(want("an int")),
            }
        }
        FieldType::Float32 | FieldType::Float64 => {
            if v.is_instance_of::<PyFloat>() || int_of(v).is_some() {
                Value::Float(v.extract::<f64>().map_err(|e| e.to_string())?)
            } else {
                return Err(want("a float"));
            }
        }
        FieldType::TimestampUs => {
            if let Some(n) = int_of(v) {
                return Ok(Value::Int(range(n?)?));
            }
            let p = pieces(py).map_err(|e| e.to_string())?;
            if !v.is_instance(p.datetime.bind(py)).unwrap_or(false) {
                return Err(want("a datetime or an int (µs since the epoch)"));
            }
            let aware = v
                .call_method0("utcoffset")
                .map(|o| !o.is_none())
                .unwrap_or(false);
            if !aware {
                return Err(format!(
                    "a naive datetime ({v}): give a timezone-aware one \
                     (e.g. datetime.now(timezone.utc))"
                ));
            }
            let us = v
                .sub(p.epoch.bind(py))
                .and_then(|d| d.floor_div(p.one_us.bind(py)))
                .and_then(|n| n.extract::<i64>())
                .map_err(|e| e.to_string())?;
            Value::Int(us)
        }
        FieldType::Date32 => {
            if let Some(n) = int_of(v) {
                return Ok(Value::Int(range(n?)?));
            }
            let p = pieces(py).map_err(|e| e.to_string())?;
            let is_date = v.is_instance(p.date.bind(py)).unwrap_or(false)
                && !v.is_instance(p.datetime.bind(py)).unwrap_or(false);
            if !is_date {
                return Err(want("a date or an int (days since 1970-01-01)"));
            }
            let ordinal: i64 = v
                .call_method0("toordinal")
                .and_then(|o| o.extract())
                .map_err(|e| e.to_string())?;
            Value::Int(ordinal - EPOCH_ORDINAL)
        }
        FieldType::Decimal128 { scale, .. } => Value::Decimal(decimal_units(v, scale)?),
        FieldType::String => match v.cast::<PyString>() {
            Ok(s) => Value::Str(s.to_str().map_err(|e| e.to_string())?.to_owned()),
            Err(_) => return Err(want("a str")),
        },
        FieldType::Binary => {
            if v.is_instance_of::<PyString>() {
                return Err(want("bytes"));
            }
            match bytes_arg(v, "value") {
                Ok(b) => Value::Bytes(b.as_slice().to_vec()),
                Err(_) => return Err(want("bytes")),
            }
        }
    })
}

/// A `Decimal` (or an int) as its value × 10^scale, refused when that is
/// not a whole number (more digits after the point than the scale).
fn decimal_units(v: &Bound<'_, PyAny>, scale: u8) -> Result<i128, String> {
    let py = v.py();
    if let Some(n) = int_of(v) {
        return n?
            .checked_mul(10i128.pow(u32::from(scale)))
            .ok_or_else(|| "out of range".to_string());
    }
    let p = pieces(py).map_err(|e| e.to_string())?;
    if !v.is_instance(p.decimal.bind(py)).unwrap_or(false) {
        return Err(format!(
            "expected a Decimal or an int, got {}",
            type_name(v)
        ));
    }
    let finite = v
        .call_method0("is_finite")
        .and_then(|b| b.extract::<bool>())
        .unwrap_or(false);
    if !finite {
        return Err(format!("{v} is not a finite number"));
    }
    // (sign, digits, exponent): exact, whatever the context's precision.
    let (sign, digits, exp): (i32, Vec<u8>, i64) = v
        .call_method0("as_tuple")
        .and_then(|t| t.extract())
        .map_err(|e| e.to_string())?;
    let shift = exp + i64::from(scale);
    let mut n: i128 = 0;
    let too_many = || "more digits than its precision".to_string();
    for d in &digits {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(i128::from(*d)))
            .ok_or_else(too_many)?;
    }
    if shift >= 0 {
        for _ in 0..shift {
            n = n.checked_mul(10).ok_or_else(too_many)?;
        }
    } else {
        let cut = 10i128
            .checked_pow((-shift) as u32)
            .ok_or_else(|| format!("{v} has more digits after the point than the scale {scale}"))?;
        if n % cut != 0 {
            return Err(format!(
                "{v} has more digits after the point than the scale {scale}"
            ));
        }
        n /= cut;
    }
    Ok(if sign == 1 { -n } else { n })
}

/// `v` (a value of a field of type `ty` in its version) as Python sees
/// the current field of type `ty`.
fn to_python<'py>(py: Python<'py>, v: &Value, ty: FieldType) -> PyResult<Bound<'py, PyAny>> {
    Ok(match (v, ty) {
        (Value::Null, _) => py.None().into_bound(py),
        (Value::Bool(b), _) => PyBool::new(py, *b).to_owned().into_any(),
        (Value::Int(n), FieldType::TimestampUs) => {
            let p = pieces(py)?;
            p.epoch.bind(py).add(p.one_us.bind(py).mul(*n)?)?
        }
        (Value::Int(n), FieldType::Date32) => {
            let p = pieces(py)?;
            p.date_from_ordinal.bind(py).call1((*n + EPOCH_ORDINAL,))?
        }
        (Value::Int(n), _) => n.into_pyobject(py)?.into_any(),
        (Value::UInt(n), _) => n.into_pyobject(py)?.into_any(),
        (Value::Float(x), _) => x.into_pyobject(py)?.into_any(),
        (Value::Decimal(d), FieldType::Decimal128 { scale, .. }) => {
            let p = pieces(py)?;
            p.decimal.bind(py).call1((format!("{d}E-{scale}"),))?
        }
        (Value::Decimal(d), _) => d.into_pyobject(py)?.into_any(),
        (Value::Str(s), _) => PyString::new(py, s).into_any(),
        (Value::Bytes(b), _) => PyBytes::new(py, b).into_any(),
    })
}

/// One version's JSON as a schema, its version number forced to 1 (a
/// declared schema's number is the queue's to give).
pub(crate) fn parse_new(text: &str) -> PyResult<Schema> {
    let mut v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| schema_err(format!("schema JSON: {e}")))?;
    if let Some(o) = v.as_object_mut() {
        o.insert("version".into(), 1.into());
    }
    Schema::from_json_value(&v).map_err(|e| schema_err(e.0))
}

/// A queue handle's [`Decoders`], rebuilt when the engine's schema
/// versions change (an evolution declared by this handle).
#[derive(Default)]
pub(crate) struct TypedCache(std::sync::Mutex<Option<Versioned>>);

/// Decoders and the versions they were built from.
type Versioned = (Arc<SchemaVersions>, Arc<Decoders>);

impl TypedCache {
    /// The decoders of `queue`'s schema versions now; None when untyped.
    pub(crate) fn get(
        &self,
        py: Python<'_>,
        queue: &crate::Queue,
    ) -> PyResult<Option<Arc<Decoders>>> {
        let Some(versions) = queue.schema_versions() else {
            return Ok(None);
        };
        let mut cached = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((known, d)) = &*cached {
            if Arc::ptr_eq(known, &versions) || **known == *versions {
                return Ok(Some(d.clone()));
            }
        }
        let d = Arc::new(Decoders::new(py, &versions)?);
        *cached = Some((versions, d.clone()));
        Ok(Some(d))
    }
}

/// `err`, raised by the `i`th event of an `append_batch`, with the item
/// named (a SchemaError stays one).
pub(crate) fn in_item(py: Python<'_>, err: PyErr, i: usize) -> PyErr {
    if !super::errors::is_schema(py, &err) {
        return err;
    }
    let text = err.value(py).to_string();
    let why = text.strip_prefix("schema: ").unwrap_or(&text);
    let new = schema_err(format!("append_batch item {i}: {why}"));
    new.set_cause(py, Some(err));
    new
}

/// Appends the rows of one Arrow record batch to `out`: `cols` are the
/// current schema's fields in order, each `(validity, offset, data,
/// offsets, large)` as `litemq._typed.arrow_batches` gives them.
pub(crate) fn encode_arrow(
    t: &Decoders,
    cols: &[Bound<'_, PyAny>],
    rows: usize,
    out: &mut Vec<u8>,
) -> PyResult<()> {
    let owned = cols
        .iter()
        .map(column_bytes)
        .collect::<PyResult<Vec<_>>>()?;
    let ins: Vec<ColumnIn<'_>> = owned
        .iter()
        .map(|c| ColumnIn {
            validity: c.validity.as_ref().map(|b| b.as_slice()),
            offset: c.offset,
            data: c.data.as_ref().map_or(&[][..], |b| b.as_slice()),
            offsets: c.offsets.as_ref().map(|b| b.as_slice()),
            large: c.large,
        })
        .collect();
    encode_columns(t.current(), t.current_layout(), &ins, rows, out).map_err(|e| schema_err(e.0))
}

/// Appends the rows of a `pyarrow.RecordBatch` read through Arrow's C data
/// interface, its buffers borrowed: no Python object per column (the
/// Python path cost 13 µs a 1,000-row batch of 6 columns, more than
/// encoding its rows). True when done; false when the batch's columns are
/// not the current schema's fields, in order, of exactly its types (a
/// `large_string`/`large_binary` one too): the caller takes the Python
/// path, which maps columns by name and casts.
pub(crate) fn encode_c_batch(
    t: &Decoders,
    batch: &Bound<'_, PyAny>,
    out: &mut Vec<u8>,
) -> PyResult<Option<usize>> {
    let fields = &t.current().fields;
    let done = super::buffer::with_arrow_batch(batch, |rows, cols| {
        let same = cols.len() == fields.len()
            && cols
                .iter()
                .zip(fields)
                .all(|(c, f)| c.name == f.name && c_format_fits(c.format, f.ty));
        if !same {
            return Ok(None);
        }
        for (c, f) in cols.iter().zip(fields) {
            let has_null = |v: &[u8]| {
                (0..rows).any(|r| {
                    let i = c.column.offset + r;
                    v[i >> 3] & (1 << (i & 7)) == 0
                })
            };
            let nulls = match c.column.validity {
                Some(v) if c.null_count != 0 => c.null_count > 0 || has_null(v),
                _ => false,
            };
            if nulls && !f.nullable {
                // The words `arrow_batches` uses for the same batch.
                return Err(schema_err(format!(
                    "field '{}' is not nullable and its column holds nulls",
                    f.name
                )));
            }
        }
        let ins: Vec<ColumnIn<'_>> = cols.iter().map(|c| c.column).collect();
        encode_columns(t.current(), t.current_layout(), &ins, rows, out)
            .map(|()| Some(rows))
            .map_err(|e| schema_err(e.0))
    })?;
    done.unwrap_or(Ok(None))
}

/// True when an Arrow C format string is field type `ty` as
/// `litemq.schema.arrow_type` maps it (strings and binaries also large).
fn c_format_fits(format: &str, ty: FieldType) -> bool {
    match ty {
        FieldType::Bool => format == "b",
        FieldType::Int8 => format == "c",
        FieldType::Int16 => format == "s",
        FieldType::Int32 => format == "i",
        FieldType::Int64 => format == "l",
        FieldType::UInt8 => format == "C",
        FieldType::UInt16 => format == "S",
        FieldType::UInt32 => format == "I",
        FieldType::UInt64 => format == "L",
        FieldType::Float32 => format == "f",
        FieldType::Float64 => format == "g",
        FieldType::TimestampUs => format == "tsu:UTC",
        FieldType::Date32 => format == "tdD",
        FieldType::Decimal128 { precision, scale } => format == format!("d:{precision},{scale}"),
        FieldType::String => format == "u" || format == "U",
        FieldType::Binary => format == "z" || format == "Z",
    }
}

/// One column's buffers, held while the rows are encoded from them.
struct ColumnBytes<'py> {
    validity: Option<BytesArg<'py>>,
    offset: usize,
    data: Option<BytesArg<'py>>,
    offsets: Option<BytesArg<'py>>,
    large: bool,
}

fn column_bytes<'py>(col: &Bound<'py, PyAny>) -> PyResult<ColumnBytes<'py>> {
    let (validity, offset, data, offsets, large): (
        Bound<'py, PyAny>,
        usize,
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
        bool,
    ) = col.extract()?;
    let buf = |b: &Bound<'py, PyAny>, what: &str| -> PyResult<Option<BytesArg<'py>>> {
        if b.is_none() {
            return Ok(None);
        }
        bytes_arg(b, what).map(Some)
    };
    Ok(ColumnBytes {
        validity: buf(&validity, "validity")?,
        offset,
        data: buf(&data, "data")?,
        offsets: buf(&offsets, "offsets")?,
        large,
    })
}

/// The typed queues this process has open, for `Message.value`: a message
/// finds its queue's decoders by its data file's directory.
static TYPED_QUEUES: std::sync::Mutex<Vec<std::sync::Weak<dyn TypedHandle>>> =
    std::sync::Mutex::new(Vec::new());

/// An open queue handle as `Message.value` needs it (the bindings' queue
/// core, `open_queues::Core`, which holds the tailers that make messages:
/// a trait, so that this file does not import it back).
pub(crate) trait TypedHandle: Send + Sync {
    /// The engine's queue.
    fn queue(&self) -> &crate::Queue;
    /// Its decoders.
    fn typed(&self) -> &TypedCache;
}

/// Remembers a typed queue handle for [`value_of`].
pub(crate) fn register(handle: Arc<dyn TypedHandle>) {
    let mut all = TYPED_QUEUES.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|c| c.strong_count() > 0);
    all.push(Arc::downgrade(&handle));
}

/// The open typed queue holding data file `file` (the handle opened
/// deepest above it), if any.
fn core_for_file(file: &Path) -> Option<Arc<dyn TypedHandle>> {
    let all = TYPED_QUEUES.lock().unwrap_or_else(|e| e.into_inner());
    all.iter()
        .filter_map(std::sync::Weak::upgrade)
        .filter(|c| file.starts_with(c.queue().path()))
        .max_by_key(|c| c.queue().path().as_os_str().len())
}

/// `Message.value`: the dict of `row`, a row of schema version `version`
/// of a message of data file `file` (`at`: file, frame offset, sequence,
/// for damage). In the current version of the handle's schema; a version
/// newer than the handle knows (another process evolved the schema since)
/// in that version's own fields. `SchemaError` when no typed queue holding
/// the file is open in this process.
pub(crate) fn value_of<'py>(
    py: Python<'py>,
    row: &[u8],
    version: u32,
    at: (std::path::PathBuf, u64, Option<u64>),
) -> PyResult<Bound<'py, PyDict>> {
    let no_handle = || {
        schema_err(format!(
            "message {} is an event of a typed queue that no handle in this process \
             has open: open it (litemq.Queue(path)) to decode its value",
            at.2.unwrap_or_default()
        ))
    };
    let core = core_for_file(&at.0).ok_or_else(no_handle)?;
    let d = core.typed().get(py, core.queue())?.ok_or_else(no_handle)?;
    if (version as usize) <= d.layouts.len() {
        return d.decode(py, row, version, Some(at));
    }
    let newer = exit::detach(py, || core.queue().schema_of_version(version))?;
    let Some(schema) = newer else {
        return d.decode(py, row, version, Some(at)); // says which versions it knows
    };
    let (path, offset, seq) = at;
    let values = decode_row(&RowLayout::of(&schema), row).map_err(|why| {
        Error::corrupted(
            path,
            offset,
            seq,
            format!("typed row of schema version {version}: {why}"),
        )
    })?;
    let out = PyDict::new(py);
    for (f, v) in schema.fields.iter().zip(&values) {
        out.set_item(&f.name, to_python(py, v, f.ty)?)?;
    }
    Ok(out)
}

/// The predicate `field op value` on a typed queue's current schema, for
/// `Queue::typed_where`: `value` converted as the field's events are
/// (`between` takes a pair, `in` a list).
pub(crate) fn predicate(
    d: &Decoders,
    field: &str,
    op: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<crate::TypedPredicate> {
    use pyo3::exceptions::PyValueError;
    let f = d
        .current()
        .fields
        .iter()
        .find(|f| f.name == field)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "where: {field:?} is not a field of the queue's schema"
            ))
        })?;
    let op = crate::TypedOp::parse(op)?;
    let items: Vec<Bound<'_, PyAny>> = match op {
        crate::TypedOp::Between | crate::TypedOp::In => {
            if value.is_instance_of::<PyString>() || value.is_instance_of::<PyBytes>() {
                return Err(PyValueError::new_err(
                    "where: 'between' takes a (low, high) pair, 'in' a list of values",
                ));
            }
            value.try_iter()?.collect::<PyResult<_>>()?
        }
        _ => vec![value.clone()],
    };
    let values = items
        .iter()
        .map(|v| {
            to_value(v, f.ty).map_err(|why| {
                PyValueError::new_err(format!("where: {v} for field {field:?}: {why}"))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(crate::TypedPredicate {
        field: field.to_string(),
        op,
        values,
    })
}

/// A typed read's rows as the dict `Queue._read_typed` and
/// `Tailer._read_typed_columns` return: `rows`, `next` (the sequence to
/// read on from), `seq` and `timestamp` (i64 words), and `columns`, one
/// `(validity or None, data, offsets or None)` per field, in Arrow's
/// layout, handed over without a copy.
pub(crate) fn typed_columns<'py>(
    py: Python<'py>,
    b: crate::TypedBatch,
) -> PyResult<Bound<'py, PyDict>> {
    use super::buffer::PayloadView;
    let d = PyDict::new(py);
    d.set_item("rows", b.rows)?;
    d.set_item("next", b.next_seq)?;
    d.set_item("seq", PayloadView::owning_i64(b.seq).memoryview(py)?)?;
    d.set_item(
        "timestamp",
        PayloadView::owning_i64(b.timestamp).memoryview(py)?,
    )?;
    let cols = PyList::empty(py);
    for c in b.columns.columns {
        let validity = match c.nulls {
            0 => None,
            _ => Some(PayloadView::owning(c.valid).memoryview(py)?),
        };
        let offsets = match c.ty.is_var() {
            true => Some(PayloadView::owning_i32(c.offsets).memoryview(py)?),
            false => None,
        };
        cols.append((
            validity,
            PayloadView::owning(c.data).memoryview(py)?,
            offsets,
        ))?;
    }
    d.set_item("columns", cols)?;
    Ok(d)
}

/// The typed columns of rows another reader took as payloads (an archive's
/// per-file batch): row `i` is `data[offsets[i]..offsets[i + 1]]` (`i64`
/// offsets, Arrow's `large_binary`), a row of schema version
/// `file_version` of `versions_json` (metadata.json's `schema` object),
/// read in its newest version; `fields` of it (names), in that order. An
/// empty payload (a tombstone) is no row: `keep` says which rows are, as
/// `pyarrow.compute.filter` takes it. A damaged row is CorruptedError
/// naming `name` and the row's sequence (`seqs`: the rows' `int64`
/// sequences, a buffer, as the batch's `seq` column holds them).
#[pyfunction]
#[expect(
    clippy::too_many_arguments,
    reason = "the rows' buffers, their sequences and what to read them as"
)]
pub(crate) fn _typed_rows<'py>(
    py: Python<'py>,
    versions_json: &str,
    file_version: u32,
    fields: Vec<String>,
    data: &Bound<'py, PyAny>,
    offsets: &Bound<'py, PyAny>,
    seqs: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<Bound<'py, PyDict>> {
    use crate::format::typed::{Projection, TypedColumns};
    let json: serde_json::Value = serde_json::from_str(versions_json)
        .map_err(|e| schema_err(format!("schema versions: {e}")))?;
    let versions = SchemaVersions::from_json_value(&json).map_err(|e| schema_err(e.0))?;
    let current = versions
        .current()
        .ok_or_else(|| schema_err("the archive's queue has no schema"))?;
    let wanted = current
        .field_indexes(&fields)
        .map_err(|e| schema_err(e.0))?;
    let file = versions.get(file_version).ok_or_else(|| {
        Error::corrupted(
            Path::new(name),
            52,
            None,
            format!("data file of schema version {file_version}, which the archive's metadata does not list"),
        )
    })?;
    let proj = Projection::new(&versions, file, &wanted).map_err(|e| schema_err(e.0))?;
    let (data, offsets) = (bytes_arg(data, "data")?, bytes_arg(offsets, "offsets")?);
    let seqs = bytes_arg(seqs, "seqs")?;
    let (data, offsets, seqs) = (data.as_slice(), offsets.as_slice(), seqs.as_slice());
    let word = |b: &[u8], i: usize| crate::format::le_u64(b, i * 8).unwrap_or(0);
    let rows = seqs.len() / 8;
    let mut cols = TypedColumns::new(current, &wanted, rows);
    let mut keep = Vec::with_capacity(rows);
    for i in 0..rows {
        let seq = word(seqs, i);
        let row = &data[word(offsets, i) as usize..word(offsets, i + 1) as usize];
        keep.push(!row.is_empty());
        if row.is_empty() {
            continue;
        }
        match cols.push_row(&proj, row) {
            Ok(true) => {}
            Ok(false) => {
                return Err(schema_err(format!(
                    "{name}: a string or binary column of the file passes 2 GiB: read it by ranges"
                )))
            }
            Err(d) => return Err(Error::corrupted(Path::new(name), 0, Some(seq), d.why).into()),
        }
    }
    let b = crate::TypedBatch {
        rows: cols.rows,
        columns: cols,
        ..crate::TypedBatch::default()
    };
    let d = typed_columns(py, b)?;
    d.set_item("keep", keep)?;
    Ok(d)
}
