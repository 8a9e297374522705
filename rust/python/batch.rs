//! Plain-data conversions for `Queue.read_arrow()`: the engine's columns
//! become dicts of ints and `bytes` buffers.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::buffer::PayloadView;

/// An `i64` column handed over without a copy (little-endian bytes).
fn i64_column(py: Python<'_>, v: Vec<i64>) -> PyResult<Bound<'_, PayloadView>> {
    Bound::new(py, PayloadView::owning_i64(v))
}

/// An `i32` column (offsets) handed over without a copy.
fn i32_column(py: Python<'_>, v: Vec<i32>) -> PyResult<Bound<'_, PayloadView>> {
    Bound::new(py, PayloadView::owning_i32(v))
}

/// A data column handed to Python without a copy (a buffer-protocol object
/// `pyarrow.py_buffer` wraps as it is).
fn data_column<'py>(py: Python<'py>, v: Vec<u8>) -> PyResult<Bound<'py, PayloadView>> {
    Bound::new(py, PayloadView::owning(v))
}

/// Fills `d` with the columns of `b`: buffers in Arrow layout (little-endian),
/// each a buffer object that owns the engine's vector (no copy; validity
/// bitmaps and header names, small, as `bytes`), counts as ints.
pub(crate) fn fill_columns(d: &Bound<'_, PyDict>, mut b: crate::Columns) -> PyResult<()> {
    b.finish(); // every read did; a batch handed over is complete whatever made it
    let py = d.py();
    d.set_item("rows", b.rows)?;
    d.set_item("next_seq", b.next_seq)?;
    d.set_item("seq", i64_column(py, b.seq)?)?;
    d.set_item("timestamp", i64_column(py, b.timestamp)?)?;
    d.set_item("key_valid", PyBytes::new(py, &b.key_valid))?;
    d.set_item("key_nulls", b.key_nulls)?;
    d.set_item("key_offsets", i32_column(py, b.key_offsets)?)?;
    d.set_item("key_data", data_column(py, b.key_data)?)?;
    d.set_item("key_text", PyBytes::new(py, &b.key_text))?;
    d.set_item("headers_valid", PyBytes::new(py, &b.headers_valid))?;
    d.set_item("headers_nulls", b.headers_nulls)?;
    d.set_item("headers_offsets", i32_column(py, b.headers_offsets)?)?;
    d.set_item(
        "header_name_offsets",
        i32_column(py, b.header_name_offsets)?,
    )?;
    d.set_item("header_name_data", PyBytes::new(py, &b.header_name_data))?;
    d.set_item(
        "header_value_offsets",
        i32_column(py, b.header_value_offsets)?,
    )?;
    d.set_item("header_value_data", data_column(py, b.header_value_data)?)?;
    d.set_item("header_value_text", PyBytes::new(py, &b.header_value_text))?;
    d.set_item("payload_offsets", i32_column(py, b.payload_offsets)?)?;
    d.set_item("payload_data", data_column(py, b.payload_data)?)?;
    d.set_item("topic_valid", PyBytes::new(py, &b.topic_valid))?;
    d.set_item("topic_nulls", b.topic_nulls)?;
    d.set_item("topic_offsets", i32_column(py, b.topic_offsets)?)?;
    d.set_item("topic_data", data_column(py, b.topic_data)?)?;
    d.set_item("queue_id", i32_column(py, b.queue_id)?)?;
    d.set_item("tags_offsets", i32_column(py, b.tags_offsets)?)?;
    d.set_item("tag_offsets", i32_column(py, b.tag_offsets)?)?;
    d.set_item("tag_data", data_column(py, b.tag_data)?)?;
    d.set_item("priority", data_column(py, b.priority)?)?;
    d.set_item("expires_valid", PyBytes::new(py, &b.expires_valid))?;
    d.set_item("expires_nulls", b.expires_nulls)?;
    d.set_item("expires_at", i64_column(py, b.expires_at)?)?;
    d.set_item("codec_valid", PyBytes::new(py, &b.codec_valid))?;
    d.set_item("codec_nulls", b.codec_nulls)?;
    d.set_item("codec_offsets", i32_column(py, b.codec_offsets)?)?;
    d.set_item("codec_data", PyBytes::new(py, &b.codec_data))?;
    d.set_item("raw_len", i64_column(py, b.raw_len)?)?;
    let fields = pyo3::types::PyList::empty(py);
    for f in b.fields {
        let c = PyDict::new(py);
        c.set_item("name", &f.def.name)?;
        c.set_item("kind", f.def.kind.name())?;
        c.set_item("valid", PyBytes::new(py, &f.valid))?;
        c.set_item("nulls", f.nulls)?;
        c.set_item("ints", i64_column(py, f.ints)?)?;
        c.set_item("offsets", i32_column(py, f.offsets)?)?;
        c.set_item("data", data_column(py, f.data)?)?;
        fields.append(c)?;
    }
    d.set_item("fields", fields)?;
    Ok(())
}

/// The columns named in `columns` (`None`: every one), as a
/// [`crate::ColumnSet`]; `raw` keeps payloads as stored. `seq` and
/// `timestamp` are always filled; an unknown name is a ValueError.
pub(crate) fn column_set(columns: Option<Vec<String>>, raw: bool) -> PyResult<crate::ColumnSet> {
    let mut set = match columns {
        None => crate::ColumnSet::ALL,
        Some(names) => {
            let mut set = crate::ColumnSet::NONE;
            for name in names {
                let flag = match name.as_str() {
                    "seq" | "timestamp" => continue,
                    // The text columns are views of the same buffers.
                    "key" | "key_text" => &mut set.key,
                    "headers" | "headers_text" => &mut set.headers,
                    "payload" => &mut set.payload,
                    "topic" => &mut set.topic,
                    "queue_id" => &mut set.queue_id,
                    "tags" => &mut set.tags,
                    "priority" => &mut set.priority,
                    "expires_at" => &mut set.expires_at,
                    "codec" => &mut set.codec,
                    "raw_len" => &mut set.raw_len,
                    other => {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "unknown column {other:?}"
                        )))
                    }
                };
                *flag = true;
            }
            set
        }
    };
    set.raw = raw;
    Ok(set)
}
