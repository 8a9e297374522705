//! Archives: CRC-64 of uploaded files, and decoding data files read back as
//! bytes (ranged reads through `pyarrow.fs`) into the column dicts
//! `read_arrow` uses. `python/litemq/archive.py` is the Python side; the
//! checks are in `reader/archived.rs`.

use std::path::Path;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::buffer::bytes_arg;
use super::exit;
use crate::format::crc::{crc64_combine, Crc64};
use crate::format::frame::{frame_size, END_OF_FILE};
use crate::format::header::{INDEX_ENTRY_LEN, INDEX_HEADER_LEN};
use crate::index::dense;
use crate::index::key_index::file as key_index;
use crate::reader::archived;

/// CRC-64/XZ of a bytes-like object (docs/FORMAT.md, "CRC"); with `prev`,
/// the CRC of the bytes before it (a file checked piece by piece), the CRC
/// of both together.
#[pyfunction]
#[pyo3(signature = (data, prev=None))]
pub(crate) fn _crc64(py: Python<'_>, data: &Bound<'_, PyAny>, prev: Option<u64>) -> PyResult<u64> {
    let b = bytes_arg(data, "data")?;
    let s = b.as_slice();
    Ok(exit::detach(py, || {
        let mut d = Crc64::new();
        d.write(s);
        match prev {
            Some(p) => crc64_combine(p, d.finish(), s.len() as u64),
            None => d.finish(),
        }
    }))
}

/// Checks a whole sealed data file (header, footer, `frames_crc`; a
/// version-3 file frame by frame) and returns what it holds as a dict:
/// `version`, `file_number`, `first_seq`, `end_seq`, `first_ts`,
/// `last_ts`, `frames_end`, `frames_crc`, `footer`. CorruptedError naming
/// `name` otherwise.
#[pyfunction]
pub(crate) fn _sealed_summary<'py>(
    py: Python<'py>,
    data: &Bound<'_, PyAny>,
    name: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let b = bytes_arg(data, "data")?;
    let s = b.as_slice();
    let path = Path::new(name);
    let sum = exit::detach(py, || archived::summarize(s, path))?;
    summary_dict(py, &sum)
}

/// As `_sealed_summary`, and then every frame checked on its own (its CRC,
/// its record, the count of sequences to the marker): what `restore`
/// runs on each archived data file. CorruptedError naming `name`.
#[pyfunction]
pub(crate) fn _verify_sealed<'py>(
    py: Python<'py>,
    data: &Bound<'_, PyAny>,
    name: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let b = bytes_arg(data, "data")?;
    let s = b.as_slice();
    let path = Path::new(name);
    let sum = exit::detach(py, || archived::verify(s, path))?;
    summary_dict(py, &sum)
}

fn summary_dict<'py>(
    py: Python<'py>,
    sum: &archived::SealedSummary,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", sum.version)?;
    d.set_item("file_number", sum.file_number)?;
    d.set_item("first_seq", sum.first_seq)?;
    d.set_item("end_seq", sum.end_seq)?;
    d.set_item("first_ts", sum.first_ts)?;
    d.set_item("last_ts", sum.last_ts)?;
    d.set_item("frames_end", sum.frames_end)?;
    d.set_item("frames_crc", sum.frames_crc)?;
    d.set_item("footer", sum.footer)?;
    Ok(d)
}

/// What the two ends of an archived data file `size` bytes long say:
/// `head` its first bytes (the header), `tail` its last 128 (the footer).
/// A dict with `version`, `file_number`, `first_seq`, and from version 4
/// `end_seq`, `first_ts`, `last_ts`, `frames_end`, `frames_crc` (absent for
/// a version-3 file, which has no footer). CorruptedError naming `name`
/// when the header does not decode or a version-4 footer is not valid.
#[pyfunction]
pub(crate) fn _sealed_ends<'py>(
    py: Python<'py>,
    head: &Bound<'_, PyAny>,
    tail: &Bound<'_, PyAny>,
    size: u64,
    name: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let head = bytes_arg(head, "head")?;
    let tail = bytes_arg(tail, "tail")?;
    let (h, f) = archived::ends(head.as_slice(), tail.as_slice(), size, Path::new(name))?;
    let d = PyDict::new(py);
    d.set_item("version", h.version)?;
    d.set_item("file_number", h.file_number)?;
    d.set_item("first_seq", h.first_seq)?;
    if let Some(f) = f {
        d.set_item("end_seq", f.end_seq)?;
        d.set_item("first_ts", f.first_ts)?;
        d.set_item("last_ts", f.last_ts)?;
        d.set_item("frames_end", f.frames_end)?;
        d.set_item("frames_crc", f.frames_crc)?;
    }
    Ok(d)
}

/// `(file_number, first_seq)` of the data file a dense-index header names
/// (its first 64 bytes), or None when they are not a valid header.
#[pyfunction]
pub(crate) fn _dense_header(data: &Bound<'_, PyAny>) -> PyResult<Option<(u64, u64)>> {
    let b = bytes_arg(data, "data")?;
    Ok(dense::DenseHeader::decode(b.as_slice()).map(|h| (h.file_number, h.first_seq)))
}

/// Messages `[start, end)` (at most `max_rows`) of a whole sealed data
/// file given as bytes, checked as by `_sealed_summary`, as the column
/// dict of `Queue._read_batch`.
#[pyfunction]
#[pyo3(signature = (data, name, start, end, max_rows, columns=None, raw=false, unlock=None))]
#[expect(
    clippy::too_many_arguments,
    reason = "mirrors the Python caller's arguments"
)]
pub(crate) fn _decode_sealed<'py>(
    py: Python<'py>,
    data: &Bound<'_, PyAny>,
    name: &str,
    start: u64,
    end: u64,
    max_rows: usize,
    columns: Option<Vec<String>>,
    raw: bool,
    unlock: Option<(Vec<u8>, Option<Vec<u8>>)>,
) -> PyResult<Bound<'py, PyDict>> {
    decode(
        py,
        data,
        name,
        (columns, raw),
        unlock,
        |s, path, cols, qkey| {
            archived::read_sealed(s, path, start, end, max_rows, cols, qkey).map(|c| (c, None))
        },
    )
}

/// `rows` messages from a byte range of a data file: `data` holds the
/// file's bytes from `offset` on, where message `first_seq` starts. Every
/// frame is checked by its own CRC. The column dict of
/// `Queue._read_batch`, plus `next_offset` (the file offset after the last
/// frame read; fewer rows than asked only when a column reached 2 GiB).
/// `head` is the file's first 4096 bytes (its header): a typed file's
/// schema is there, and its row batches are read as their rows; without
/// it the file is read as untyped, where a row batch is damage.
#[pyfunction]
#[pyo3(signature = (data, name, offset, first_seq, rows, columns=None, raw=false, unlock=None, head=None))]
#[expect(
    clippy::too_many_arguments,
    reason = "mirrors the Python caller's arguments"
)]
pub(crate) fn _decode_frames<'py>(
    py: Python<'py>,
    data: &Bound<'_, PyAny>,
    name: &str,
    offset: u64,
    first_seq: u64,
    rows: usize,
    columns: Option<Vec<String>>,
    raw: bool,
    unlock: Option<(Vec<u8>, Option<Vec<u8>>)>,
    head: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let typed = match head {
        Some(h) => archived::typed_head(bytes_arg(h, "head")?.as_slice(), Path::new(name))?,
        None => None,
    };
    decode(
        py,
        data,
        name,
        (columns, raw),
        unlock,
        |s, path, cols, qkey| {
            archived::read_frames_typed(
                s,
                path,
                offset,
                first_seq,
                rows,
                cols,
                qkey,
                typed.as_ref(),
            )
            .map(|(c, next)| (c, Some(next)))
        },
    )
}

/// What `_decode_sealed` and `_decode_frames` share: the bytes, columns and
/// key checked, `read` run without the GIL, its columns as the dict of
/// `Queue._read_batch` (with `next_offset` when `read` gives one).
fn decode<'py, F>(
    py: Python<'py>,
    data: &Bound<'_, PyAny>,
    name: &str,
    (columns, raw): (Option<Vec<String>>, bool),
    unlock: Option<(Vec<u8>, Option<Vec<u8>>)>,
    read: F,
) -> PyResult<Bound<'py, PyDict>>
where
    F: Send
        + FnOnce(
            &[u8],
            &Path,
            crate::ColumnSet,
            Option<&crate::format::crypto::QueueKey>,
        ) -> crate::Result<(crate::Columns, Option<u64>)>,
{
    let b = bytes_arg(data, "data")?;
    let s = b.as_slice();
    let path = Path::new(name);
    let cols = super::batch::column_set(columns, raw)?;
    let qkey = queue_key(path, unlock)?;
    let (c, next) = exit::detach(py, || read(s, path, cols, qkey.as_ref()))?;
    let d = PyDict::new(py);
    super::batch::fill_columns(&d, c)?;
    if let Some(next) = next {
        d.set_item("next_offset", next)?;
    }
    Ok(d)
}

/// The key of an encrypted archive: `unlock` is `(metadata.json bytes,
/// key or None)`, checked as an open checks it (`EncryptionError`,
/// `WrongKeyError`); `None` reads unencrypted files.
fn queue_key(
    path: &Path,
    unlock: Option<(Vec<u8>, Option<Vec<u8>>)>,
) -> PyResult<Option<crate::format::crypto::QueueKey>> {
    let Some((meta, key)) = unlock else {
        return Ok(None);
    };
    let meta: crate::format::metadata::Metadata = serde_json::from_slice(&meta).map_err(|e| {
        crate::Error::corrupted(path, 0, None, format!("metadata.json does not parse: {e}"))
    })?;
    let key = match key {
        Some(k) => Some(crate::config::EncryptionKey(k.try_into().map_err(
            |_| super::errors::config_error("encryption_key must be 32 bytes"),
        )?)),
        None => None,
    };
    Ok(crate::queue::metadata::check_key(
        path,
        key.as_ref(),
        &meta,
    )?)
}

/// Checks an archive's `metadata.json` against the key given (None: no
/// key), as opening its queue would: EncryptionError or WrongKeyError
/// naming `name`. True when the archive is encrypted.
#[pyfunction]
#[pyo3(signature = (metadata, key, name))]
pub(crate) fn _check_archive_key(
    metadata: Vec<u8>,
    key: Option<Vec<u8>>,
    name: &str,
) -> PyResult<bool> {
    Ok(queue_key(Path::new(name), Some((metadata, key)))?.is_some())
}

/// The frame offset a dense-index entry `word` gives for message `seq` of
/// a data file `data_len` bytes long, or None when the entry is not
/// written or fails its check (docs/FORMAT.md, "Dense index files").
#[pyfunction]
pub(crate) fn _dense_offset(word: u64, seq: u64, data_len: usize) -> Option<usize> {
    dense::decode_entry(seq, word, data_len)
}

/// Bytes of a sealed file's sparse (`kind` "index") or dense ("offsets")
/// index that hold its header and used entries for `rows` messages (the
/// rest of the file is a hole of zeros, docs/FORMAT.md). `head` is the
/// index file's first bytes (at least its header for "index", whose
/// interval it reads; a shorter one is all there is: its length).
#[pyfunction]
pub(crate) fn _index_used_len(kind: &str, head: &Bound<'_, PyAny>, rows: u64) -> PyResult<u64> {
    let b = bytes_arg(head, "head")?;
    let h = b.as_slice();
    match kind {
        "offsets" => Ok((dense::DENSE_HEADER_LEN + dense::DENSE_ENTRY_LEN * rows as usize) as u64),
        "index" => {
            let Some(interval) = crate::format::le_u32(h, 12).filter(|_| h.len() >= 16) else {
                return Ok(h.len() as u64);
            };
            let entries = rows.div_ceil(u64::from(interval.max(1)));
            Ok(INDEX_HEADER_LEN as u64 + INDEX_ENTRY_LEN as u64 * entries)
        }
        _ => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "litemq: no index kind {kind:?} (\"index\" or \"offsets\")"
        ))),
    }
}

/// Bytes of the header of a sparse ("index") or dense ("offsets") index.
#[pyfunction]
pub(crate) fn _index_header_len(kind: &str) -> PyResult<u64> {
    match kind {
        "offsets" => Ok(dense::DENSE_HEADER_LEN as u64),
        "index" => Ok(INDEX_HEADER_LEN as u64),
        _ => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "litemq: no index kind {kind:?} (\"index\" or \"offsets\")"
        ))),
    }
}

/// `(offset, length)` of message `seq`'s entry in the dense index of the
/// data file whose first message is `first_seq`.
#[pyfunction]
pub(crate) fn _dense_entry_range(seq: u64, first_seq: u64) -> (u64, u64) {
    let i = seq.saturating_sub(first_seq);
    (
        dense::DENSE_HEADER_LEN as u64 + dense::DENSE_ENTRY_LEN as u64 * i,
        dense::DENSE_ENTRY_LEN as u64,
    )
}

/// Offset of the frame after the one at `at` whose 4-byte length word is
/// `word` (the walker's rule, `format::walk`), or None when the word is 0
/// (nothing there) or the end-of-file marker.
#[pyfunction]
pub(crate) fn _frame_next(at: u64, word: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    let b = bytes_arg(word, "word")?;
    let Some(len) = crate::format::le_u32(b.as_slice(), 0) else {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "litemq: a length word is 4 bytes",
        ));
    };
    Ok(match len {
        0 | END_OF_FILE => None,
        _ => Some(at + frame_size(len as usize) as u64),
    })
}

/// Bytes of a key-index file's trailer, its last.
#[pyfunction]
pub(crate) fn _key_index_trailer_len() -> u64 {
    key_index::TRAILER_LEN
}

/// Whether a key-index file's trailer (its last `_key_index_trailer_len()`
/// bytes) says the file is sealed.
#[pyfunction]
pub(crate) fn _key_index_trailer_sealed(trailer: &Bound<'_, PyAny>) -> PyResult<bool> {
    let b = bytes_arg(trailer, "trailer")?;
    Ok(key_index::trailer_says_sealed(b.as_slice()))
}

/// Registers the layout helpers above (`_index_used_len`, ...), which
/// `archive.py` asks instead of re-deriving the formats' sizes.
pub(crate) fn register_layout(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_index_used_len, m)?)?;
    m.add_function(wrap_pyfunction!(_index_header_len, m)?)?;
    m.add_function(wrap_pyfunction!(_dense_entry_range, m)?)?;
    m.add_function(wrap_pyfunction!(_frame_next, m)?)?;
    m.add_function(wrap_pyfunction!(_key_index_trailer_len, m)?)?;
    m.add_function(wrap_pyfunction!(_key_index_trailer_sealed, m)?)?;
    Ok(())
}
