//! `Message`: one message read from a queue.

use std::ops::Range;
use std::sync::Arc;

use pyo3::basic::CompareOp;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMemoryView, PyString, PyTuple};

use super::buffer::PayloadView;
use super::time;
use crate::reader::tailer::BareMessage;
use crate::Mapping;

/// One message: its sequence, timestamp (µs since the epoch, UTC), payload,
/// and optional key and headers.
///
/// >>> msg = q.get(0)
/// >>> msg.seq, msg.payload, msg.datetime.year
/// (0, b'order 1', 2026)
// No `freelist`: pyo3's takes a mutex per allocation and per free, which
// counted more instructions per message than Python's own allocator
// (callgrind, tailer iteration and read_batch of 100-byte messages).
#[pyclass(frozen, module = "litemq", name = "Message")]
pub(crate) struct Message {
    /// Sequence number, 0-based and dense within the queue.
    #[pyo3(get)]
    seq: u64,
    /// When the message was written: µs since the Unix epoch, UTC.
    #[pyo3(get)]
    timestamp: u64,
    /// The payload as `bytes`.
    // A `Py` field of a frozen class: Python reads it as a struct member,
    // without a call into Rust. With the layout above, callgrind counted
    // 2,108 instructions per message of tailer iteration against 2,260
    // (100-byte messages); the wall clock did not tell them apart.
    #[pyo3(get)]
    payload: Py<PyBytes>,
    // The file and range `payload_view` shows. The `Arc` costs two atomic
    // operations per message; iteration without any view was within 1 %
    // (1 M x 100 B, read ahead), so it stays.
    view: Option<(Arc<Mapping>, Range<usize>)>,
    /// Offset of the frame in its data file.
    frame_at: u64,
    /// Everything the common message (no key, headers, record fields,
    /// compression or tombstone) lacks: `None` for it, so a message read
    /// by a tailer is six words instead of fourteen, and none of those
    /// parts is looked at twice.
    rare: Option<Box<Rare>>,
}

/// The parts of a message most messages do not have.
struct Rare {
    key: Option<Py<PyAny>>,
    headers: Option<Py<PyDict>>,
    /// Topic, tags, queue id, priority and expiry, when it has any.
    fields: Option<Fields>,
    /// The data file, when `view` does not tell it (`find`, `get_latest`,
    /// unpickled, a compressed or encrypted payload); `None` with no view:
    /// unknown.
    file: Option<String>,
    /// The codec the payload was stored with, if it was compressed.
    codec: Option<crate::Codec>,
    /// A tombstone: the key's value was deleted.
    tombstone: bool,
    /// The schema version of its row (0: untyped), for a message whose
    /// data file no `view` tells.
    schema_version: u32,
}

impl Rare {
    /// `None` when every part is absent.
    fn boxed(self) -> Option<Box<Rare>> {
        let none = self.key.is_none()
            && self.headers.is_none()
            && self.fields.is_none()
            && self.file.is_none()
            && self.codec.is_none()
            && !self.tombstone;
        (!none).then(|| Box::new(self))
    }
}

/// The format-6 record fields of a message that has any.
struct Fields {
    topic: Option<Py<PyString>>,
    tags: Py<PyTuple>,
    queue_id: u16,
    priority: u8,
    expires_at: Option<u64>,
    /// The offset in its topic stream, when read by a topic tailer (not
    /// compared by `==`: it says how the message was read).
    topic_offset: Option<u64>,
}

impl Fields {
    /// `None` when the message has none of the fields.
    fn new<'a>(
        py: Python<'_>,
        topic: Option<&str>,
        tags: impl ExactSizeIterator<Item = &'a str>,
        queue_id: u16,
        priority: u8,
        expires_at: Option<u64>,
        topic_offset: Option<u64>,
    ) -> PyResult<Option<Fields>> {
        if topic.is_none() && tags.len() == 0 && priority == 0 && expires_at.is_none() {
            return Ok(None);
        }
        Ok(Some(Fields {
            topic: topic.map(|t| PyString::new(py, t).unbind()),
            tags: PyTuple::new(py, tags)?.unbind(),
            queue_id,
            priority,
            expires_at,
            topic_offset,
        }))
    }

    /// Equal field by field.
    fn same(a: Option<&Fields>, b: Option<&Fields>, py: Python<'_>) -> PyResult<bool> {
        Ok(match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => {
                a.queue_id == b.queue_id
                    && a.priority == b.priority
                    && a.expires_at == b.expires_at
                    && match (&a.topic, &b.topic) {
                        (None, None) => true,
                        (Some(x), Some(y)) => x.bind(py).to_str()? == y.bind(py).to_str()?,
                        _ => false,
                    }
                    && a.tags.bind(py).eq(b.tags.bind(py))?
            }
            _ => false,
        })
    }
}

fn key_object(py: Python<'_>, key: Option<&[u8]>, is_text: bool) -> PyResult<Option<Py<PyAny>>> {
    Ok(match key {
        None => None,
        Some(k) if is_text => Some(PyString::new(py, utf8(k)?).into_any().unbind()),
        Some(k) => Some(PyBytes::new(py, k).into_any().unbind()),
    })
}

fn utf8(b: &[u8]) -> PyResult<&str> {
    std::str::from_utf8(b)
        .map_err(|e| PyValueError::new_err(format!("stored text is not UTF-8: {e}")))
}

impl Message {
    /// The payload as `bytes`.
    pub(crate) fn payload(&self, py: Python<'_>) -> Py<PyBytes> {
        self.payload.clone_ref(py)
    }

    /// The message's sequence.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// Offset of the message's frame in its data file.
    pub(crate) fn frame_at(&self) -> usize {
        self.frame_at as usize
    }

    /// A bare message of a run (see `crate::reader::tailer::RunFrame::bare`): its
    /// payload copied, and viewed in `mapping`.
    #[inline]
    pub(crate) fn bare(
        py: Python<'_>,
        seq: u64,
        m: &BareMessage<'_>,
        mapping: &Arc<Mapping>,
        frame_at: usize,
    ) -> Self {
        Message {
            seq,
            timestamp: m.timestamp,
            payload: PyBytes::new(py, m.payload).unbind(),
            view: Some((
                mapping.clone(),
                m.payload_at..m.payload_at + m.payload.len(),
            )),
            frame_at: frame_at as u64,
            rare: None,
        }
    }

    /// Copies a message borrowed from a tailer; the payload view keeps its
    /// file mapped instead of copying.
    #[inline]
    pub(crate) fn from_borrowed(py: Python<'_>, m: &crate::Message<'_>) -> PyResult<Self> {
        let codec = m.codec();
        let sealed = codec.is_some() || m.is_encrypted();
        // The common message has none of the rare parts: check cheaply
        // before building any of them.
        let plain = m.key.is_none()
            && m.headers().size_hint().1 == Some(0)
            && !sealed
            && !m.is_tombstone()
            && m.topic().is_none()
            && m.tags().len() == 0
            && m.priority() == 0
            && m.expires_at().is_none();
        let rare = if plain {
            None
        } else {
            Rare {
                key: key_object(py, m.key, m.key_is_text())?,
                headers: headers_dict(py, m.headers().map(|h| (h.name, h.value, h.value_is_text)))?,
                fields: Fields::new(
                    py,
                    m.topic(),
                    m.tags(),
                    m.queue_id(),
                    m.priority(),
                    m.expires_at(),
                    m.topic_offset(),
                )?,
                // A compressed payload was decompressed into a copy, an
                // encrypted one opened into a copy: no view tells the file.
                file: sealed.then(|| m.mapping().path().display().to_string()),
                codec,
                tombstone: m.is_tombstone(),
                schema_version: if sealed { m.schema_version() } else { 0 },
            }
            .boxed()
        };
        Ok(Message {
            seq: m.seq,
            timestamp: m.timestamp,
            payload: PyBytes::new(py, m.payload).unbind(),
            // The view is of the file only when the payload is stored as is.
            view: (!sealed).then(|| (m.mapping().clone(), m.payload_range())),
            frame_at: crate::format::position::decode(m.position()).1,
            rare,
        })
    }

    /// Converts an owned message (from `get` and `find`).
    pub(crate) fn from_owned(py: Python<'_>, m: crate::OwnedMessage) -> PyResult<Self> {
        let rare = Rare {
            key: key_object(py, m.key.as_deref(), m.key_is_text)?,
            headers: headers_dict(
                py,
                m.headers
                    .iter()
                    .map(|(name, value, is_text)| (name.as_str(), value.as_slice(), *is_text)),
            )?,
            fields: Fields::new(
                py,
                m.topic.as_deref(),
                m.tags.iter().map(String::as_str),
                m.queue_id,
                m.priority,
                m.expires_at,
                m.topic_offset,
            )?,
            // The path's own buffer when it is UTF-8 (as `display` would
            // print it otherwise), not a formatted copy.
            file: Some(
                m.file
                    .into_os_string()
                    .into_string()
                    .unwrap_or_else(|p| p.to_string_lossy().into_owned()),
            ),
            codec: m.codec,
            tombstone: m.tombstone,
            schema_version: m.schema_version,
        };
        Ok(Message {
            seq: m.seq,
            timestamp: m.timestamp,
            payload: PyBytes::new(py, &m.payload).unbind(),
            view: None,
            frame_at: m.offset,
            rare: rare.boxed(),
        })
    }

    fn rare(&self) -> Option<&Rare> {
        self.rare.as_deref()
    }

    fn fields(&self) -> Option<&Fields> {
        self.rare().and_then(|r| r.fields.as_ref())
    }
}

/// The headers as a dict, `None` when there are none.
fn headers_dict<'a>(
    py: Python<'_>,
    headers: impl Iterator<Item = (&'a str, &'a [u8], bool)>,
) -> PyResult<Option<Py<PyDict>>> {
    let mut dict: Option<Bound<'_, PyDict>> = None;
    for (name, value, is_text) in headers {
        let d = dict.get_or_insert_with(|| PyDict::new(py));
        if is_text {
            d.set_item(name, utf8(value)?)?;
        } else {
            d.set_item(name, PyBytes::new(py, value))?;
        }
    }
    Ok(dict.map(Bound::unbind))
}

#[pymethods]
impl Message {
    /// The key: `str` if it was given as text, `bytes` if as bytes, or None.
    #[getter]
    fn key(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.rare()
            .and_then(|r| r.key.as_ref())
            .map(|k| k.clone_ref(py))
    }

    /// The headers as a new dict (`str` names; `str` or `bytes` values).
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match self.rare().and_then(|r| r.headers.as_ref()) {
            Some(h) => h.bind(py).copy(),
            None => Ok(PyDict::new(py)),
        }
    }

    /// The topic (`str`), or None.
    #[getter]
    fn topic(&self, py: Python<'_>) -> Option<Py<PyString>> {
        self.fields()
            .and_then(|f| f.topic.as_ref().map(|t| t.clone_ref(py)))
    }

    /// The tags, a tuple of `str` (empty when none).
    #[getter]
    fn tags<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        match self.fields() {
            Some(f) => f.tags.bind(py).clone(),
            None => PyTuple::empty(py),
        }
    }

    /// The topic's stream the message belongs to (0 unless the topic is sharded).
    #[getter]
    fn queue_id(&self) -> u16 {
        self.fields().map_or(0, |f| f.queue_id)
    }

    /// The priority, 0..255 (0 when none was given); work queues serve higher first.
    #[getter]
    fn priority(&self) -> u8 {
        self.fields().map_or(0, |f| f.priority)
    }

    /// When the message expires, µs since the Unix epoch (UTC), or None.
    #[getter]
    fn expires_at(&self) -> Option<u64> {
        self.fields().and_then(|f| f.expires_at)
    }

    /// The message's offset in its topic stream (its topic and queue id):
    /// 0, 1, 2, ... over that stream's messages still in the queue, as
    /// RocketMQ's consume-queue offset. Set on messages read by a topic
    /// tailer (`q.tailer(topic=...)`), None otherwise.
    ///
    /// >>> [m.topic_offset for m in q.tailer(topic="orders")]
    /// [0, 1, 2]
    #[getter]
    fn topic_offset(&self) -> Option<u64> {
        self.fields().and_then(|f| f.topic_offset)
    }

    /// The codec the payload was stored with (`"zstd"`, `"lz4"`, `"gzip"`),
    /// or None when stored as given. `payload` is always decompressed.
    #[getter]
    fn compression(&self) -> Option<&'static str> {
        self.rare().and_then(|r| r.codec).map(crate::Codec::name)
    }

    /// True when the message is a tombstone (`Appender.delete(key)`): its
    /// key's value was deleted; the payload is empty.
    #[getter]
    fn tombstone(&self) -> bool {
        self.rare().is_some_and(|r| r.tombstone)
    }

    /// A typed queue's event (`Queue(path, schema=...)`) as a dict of the
    /// queue's current schema fields, decoded from the row `payload` holds:
    /// a field the message's schema version lacks is None, a renamed field
    /// is under its current name (a message of a version newer than the
    /// handle's schema, evolved by another process since, in that version's
    /// fields). None for a message of an untyped queue, a tombstone, or a
    /// message unpickled. Needs a handle of the queue open in this process
    /// (the one it was read from, usually): `SchemaError` otherwise.
    ///
    /// >>> q.get(0).value
    /// {'time': 1764667800000000, 'symbol': 'AAPL', 'price': 189.5, 'size': 100, 'side': 1, 'id': 1}
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        if self.tombstone() {
            return Ok(None);
        }
        let (file, version) = match (&self.view, self.rare()) {
            (Some((map, _)), _) => (map.path().to_path_buf(), schema_version_of(map)),
            (None, Some(r)) => match &r.file {
                Some(f) => (std::path::PathBuf::from(f), r.schema_version),
                None => return Ok(None),
            },
            (None, None) => return Ok(None),
        };
        if version == 0 {
            return Ok(None);
        }
        let at = (file, self.frame_at, Some(self.seq));
        super::typed::value_of(py, self.payload.bind(py).as_bytes(), version, at).map(Some)
    }

    /// The timestamp as a timezone-aware `datetime` in UTC.
    #[getter]
    fn datetime<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        time::to_datetime(py, self.timestamp)
    }

    /// A read-only `memoryview` of the payload without copying it: it points
    /// into the mapped data file and keeps the file mapped while it lives.
    /// For a compressed message (`compression` is not None) it is a view of
    /// the decompressed copy `payload` holds: the stored bytes are never
    /// handed out as the payload. So is a message of a batch compressed
    /// together (`append_batch(..., compress_together=True)`), whose
    /// `compression` is the batch's codec.
    ///
    /// >>> view = msg.payload_view()
    /// >>> bytes(view[:5])
    /// b'order'
    fn payload_view<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyMemoryView>> {
        match &self.view {
            Some((mapping, range)) => {
                PayloadView::new(mapping.clone(), range.clone()).memoryview(py)
            }
            None => PyMemoryView::from(self.payload.bind(py).as_any()),
        }
    }

    /// Where the message was read from, for debugging: `(path of the data
    /// file, offset of its frame)`, or None when not known. Kept by pickling.
    /// For a message of a batch compressed together, the batch's frame,
    /// which its other messages share.
    ///
    /// >>> q.get(0).position
    /// ('/tmp/orders/2026/11/21/20261121-0001.data', 4096)
    #[getter]
    fn position(&self) -> Option<(String, u64)> {
        match (self.rare().and_then(|r| r.file.as_ref()), &self.view) {
            (Some(f), _) => Some((f.clone(), self.frame_at)),
            (None, Some((map, _))) => Some((map.path().display().to_string(), self.frame_at)),
            (None, None) => None,
        }
    }

    /// Pickles as its values (the payload is copied; `position` is kept):
    /// a message can cross to another process (multiprocessing, Spark).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let m = slf.get();
        let restore = py.import("litemq._litemq")?.getattr("_restore_message")?;
        let args = (
            m.seq,
            m.timestamp,
            m.payload.clone_ref(py),
            m.key(py),
            m.rare()
                .and_then(|r| r.headers.as_ref())
                .map(|h| h.clone_ref(py)),
            m.position(),
            m.fields().map(|f| {
                (
                    f.topic.as_ref().map(|t| t.clone_ref(py)),
                    f.tags.clone_ref(py),
                    f.queue_id,
                    f.priority,
                    f.expires_at,
                    f.topic_offset,
                )
            }),
            (
                m.rare().and_then(|r| r.codec).map(|c| c as u8),
                m.tombstone(),
            ),
        );
        (restore, args).into_pyobject(py).map(|t| t.into_any())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let payload = self.payload.bind(py);
        let shown = if payload.as_bytes().len() > 32 {
            format!(
                "{}... ({} bytes)",
                PyBytes::new(py, &payload.as_bytes()[..32]).repr()?,
                payload.as_bytes().len()
            )
        } else {
            payload.repr()?.to_string()
        };
        let mut out = format!(
            "Message(seq={}, timestamp={}, payload={shown}",
            self.seq, self.timestamp
        );
        if let Some(k) = self.rare().and_then(|r| r.key.as_ref()) {
            out.push_str(&format!(", key={}", k.bind(py).repr()?));
        }
        if let Some(h) = self.rare().and_then(|r| r.headers.as_ref()) {
            out.push_str(&format!(", headers={}", h.bind(py).repr()?));
        }
        if self.tombstone() {
            out.push_str(", tombstone=True");
        }
        if let Some(c) = self.rare().and_then(|r| r.codec) {
            out.push_str(&format!(", compression={:?}", c.name()));
        }
        if let Some(f) = self.fields() {
            if let Some(t) = &f.topic {
                out.push_str(&format!(", topic={}", t.bind(py).repr()?));
            }
            if f.queue_id != 0 {
                out.push_str(&format!(", queue_id={}", f.queue_id));
            }
            if !f.tags.bind(py).is_empty() {
                out.push_str(&format!(", tags={}", f.tags.bind(py).repr()?));
            }
            if f.priority != 0 {
                out.push_str(&format!(", priority={}", f.priority));
            }
            if let Some(at) = f.expires_at {
                out.push_str(&format!(", expires_at={at}"));
            }
            if let Some(o) = f.topic_offset {
                out.push_str(&format!(", topic_offset={o}"));
            }
        }
        out.push(')');
        Ok(out)
    }

    fn __richcmp__(
        &self,
        other: &Bound<'_, PyAny>,
        op: CompareOp,
        py: Python<'_>,
    ) -> PyResult<Py<PyAny>> {
        let Ok(other) = other.cast::<Message>() else {
            return Ok(py.NotImplemented());
        };
        let other = other.get();
        let equal = self.seq == other.seq
            && self.timestamp == other.timestamp
            && self.payload.bind(py).as_bytes() == other.payload.bind(py).as_bytes()
            && match (
                self.rare().and_then(|r| r.key.as_ref()),
                other.rare().and_then(|r| r.key.as_ref()),
            ) {
                (None, None) => true,
                (Some(a), Some(b)) => a.bind(py).eq(b.bind(py))?,
                _ => false,
            }
            && self.headers(py)?.eq(other.headers(py)?)?
            && self.tombstone() == other.tombstone()
            && Fields::same(self.fields(), other.fields(), py)?;
        Ok(match op {
            CompareOp::Eq => equal.into_pyobject(py)?.to_owned().into_any().unbind(),
            CompareOp::Ne => (!equal).into_pyobject(py)?.to_owned().into_any().unbind(),
            _ => py.NotImplemented(),
        })
    }

    fn __hash__(&self) -> u64 {
        // Messages are values; two equal messages share seq and timestamp.
        self.seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ self.timestamp
    }
}

/// The schema version data file `map`'s header records: bytes 52..56 of a
/// file of format 12 or later (FORMAT.md "Typed records"), 0 before. The
/// header was checked when the file was listed.
fn schema_version_of(map: &Mapping) -> u32 {
    const TYPED_SINCE: u32 = 12;
    let head = map.as_slice();
    match crate::format::le_u32(head, 8) {
        Some(v) if v >= TYPED_SINCE => crate::format::le_u32(head, 52).unwrap_or(0),
        _ => 0,
    }
}

/// Rebuilds a pickled `Message` (see `Message.__reduce__`).
#[pyfunction]
#[pyo3(signature = (seq, timestamp, payload, key, headers, position, fields=None, stored=(None, false)))]
#[expect(clippy::too_many_arguments, reason = "one per value __reduce__ gives")]
pub(crate) fn _restore_message(
    seq: u64,
    timestamp: u64,
    payload: Py<PyBytes>,
    key: Option<Py<PyAny>>,
    headers: Option<Py<PyDict>>,
    position: Option<(String, u64)>,
    fields: Option<PickledFields>,
    stored: (Option<u8>, bool),
) -> Message {
    let (file, frame_at) = match position {
        Some((f, at)) => (Some(f), at),
        None => (None, 0),
    };
    let rare = Rare {
        key,
        headers,
        fields: fields.map(
            |(topic, tags, queue_id, priority, expires_at, topic_offset)| Fields {
                topic,
                tags,
                queue_id,
                priority,
                expires_at,
                topic_offset,
            },
        ),
        file,
        codec: stored.0.and_then(|c| crate::Codec::try_from(c).ok()),
        tombstone: stored.1,
        // Not pickled: `value` of an unpickled message is None.
        schema_version: 0,
    };
    Message {
        seq,
        timestamp,
        payload,
        view: None,
        frame_at,
        rare: rare.boxed(),
    }
}

/// `(topic, tags, queue_id, priority, expires_at, topic_offset)` as
/// `__reduce__` gives them.
type PickledFields = (
    Option<Py<PyString>>,
    Py<PyTuple>,
    u16,
    u8,
    Option<u64>,
    Option<u64>,
);
