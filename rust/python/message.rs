//! `Message`: one message read from a queue.

use std::ops::Range;
use std::sync::Arc;

use pyo3::basic::CompareOp;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMemoryView, PyString, PyTuple};

use super::buffer::PayloadView;
use super::time;
use crate::Mapping;

/// One message: its sequence, timestamp (µs since the epoch, UTC), payload,
/// and optional key and headers.
///
/// >>> msg = q.get(0)
/// >>> msg.seq, msg.payload, msg.datetime.year
/// (0, b'order 1', 2026)
#[pyclass(frozen, module = "litemq", name = "Message")]
pub(crate) struct Message {
    /// Sequence number, 0-based and dense within the queue.
    #[pyo3(get)]
    seq: u64,
    /// When the message was written: µs since the Unix epoch, UTC.
    #[pyo3(get)]
    timestamp: u64,
    payload: Py<PyBytes>,
    key: Option<Py<PyAny>>,
    headers: Option<Py<PyDict>>,
    /// Topic, tags, queue id, priority and expiry; `None` for the common
    /// message that has none of them, so it costs one word.
    fields: Option<Box<Fields>>,
    view: Option<(Arc<Mapping>, Range<usize>)>,
    /// Offset of the frame in its data file.
    frame_at: u64,
    /// The data file, when `view` does not tell it (`get`, `find`,
    /// unpickled); `None` with no view: unknown.
    file: Option<String>,
    /// The codec the payload was stored with, if it was compressed.
    codec: Option<crate::Codec>,
    /// A tombstone: the key's value was deleted.
    tombstone: bool,
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
    ) -> PyResult<Option<Box<Fields>>> {
        if topic.is_none() && tags.len() == 0 && priority == 0 && expires_at.is_none() {
            return Ok(None);
        }
        Ok(Some(Box::new(Fields {
            topic: topic.map(|t| PyString::new(py, t).unbind()),
            tags: PyTuple::new(py, tags)?.unbind(),
            queue_id,
            priority,
            expires_at,
            topic_offset,
        })))
    }

    /// Equal field by field.
    fn same(a: &Option<Box<Fields>>, b: &Option<Box<Fields>>, py: Python<'_>) -> PyResult<bool> {
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
    /// Copies a message borrowed from a tailer; the payload view keeps its
    /// file mapped instead of copying.
    #[inline]
    pub(crate) fn from_borrowed(py: Python<'_>, m: &crate::Message<'_>) -> PyResult<Self> {
        let headers = if m.headers().size_hint().1 == Some(0) {
            None
        } else {
            let dict = PyDict::new(py);
            for h in m.headers() {
                if h.value_is_text {
                    dict.set_item(h.name, utf8(h.value)?)?;
                } else {
                    dict.set_item(h.name, PyBytes::new(py, h.value))?;
                }
            }
            Some(dict.unbind())
        };
        Ok(Message {
            seq: m.seq,
            timestamp: m.timestamp,
            payload: PyBytes::new(py, m.payload).unbind(),
            key: key_object(py, m.key, m.key_is_text())?,
            headers,
            fields: Fields::new(
                py,
                m.topic(),
                m.tags(),
                m.queue_id(),
                m.priority(),
                m.expires_at(),
                m.topic_offset(),
            )?,
            // A compressed payload was decompressed into a copy: the view
            // is of that copy, not of the file.
            // An encrypted one was opened into a copy too.
            view: match (m.codec(), m.is_encrypted()) {
                (None, false) => Some((m.mapping().clone(), m.payload_range())),
                _ => None,
            },
            frame_at: crate::format::position::decode(m.position()).1,
            file: (m.codec().is_some() || m.is_encrypted())
                .then(|| m.mapping().path().display().to_string()),
            codec: m.codec(),
            tombstone: m.is_tombstone(),
        })
    }

    /// Converts an owned message (from `get` and `find`).
    pub(crate) fn from_owned(py: Python<'_>, m: crate::OwnedMessage) -> PyResult<Self> {
        let headers = if m.headers.is_empty() {
            None
        } else {
            let dict = PyDict::new(py);
            for (name, value, is_text) in &m.headers {
                if *is_text {
                    dict.set_item(name, utf8(value)?)?;
                } else {
                    dict.set_item(name, PyBytes::new(py, value))?;
                }
            }
            Some(dict.unbind())
        };
        Ok(Message {
            seq: m.seq,
            timestamp: m.timestamp,
            payload: PyBytes::new(py, &m.payload).unbind(),
            key: key_object(py, m.key.as_deref(), m.key_is_text)?,
            headers,
            fields: Fields::new(
                py,
                m.topic.as_deref(),
                m.tags.iter().map(String::as_str),
                m.queue_id,
                m.priority,
                m.expires_at,
                m.topic_offset,
            )?,
            view: None,
            frame_at: m.offset,
            file: Some(m.file.display().to_string()),
            codec: m.codec,
            tombstone: m.tombstone,
        })
    }
}

#[pymethods]
impl Message {
    /// The payload as `bytes`.
    #[getter]
    fn payload(&self, py: Python<'_>) -> Py<PyBytes> {
        self.payload.clone_ref(py)
    }

    /// The key: `str` if it was given as text, `bytes` if as bytes, or None.
    #[getter]
    fn key(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.key.as_ref().map(|k| k.clone_ref(py))
    }

    /// The headers as a new dict (`str` names; `str` or `bytes` values).
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.headers {
            Some(h) => h.bind(py).copy(),
            None => Ok(PyDict::new(py)),
        }
    }

    /// The topic (`str`), or None.
    #[getter]
    fn topic(&self, py: Python<'_>) -> Option<Py<PyString>> {
        self.fields
            .as_ref()
            .and_then(|f| f.topic.as_ref().map(|t| t.clone_ref(py)))
    }

    /// The tags, a tuple of `str` (empty when none).
    #[getter]
    fn tags<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        match &self.fields {
            Some(f) => f.tags.bind(py).clone(),
            None => PyTuple::empty(py),
        }
    }

    /// The topic's stream the message belongs to (0 unless the topic is sharded).
    #[getter]
    fn queue_id(&self) -> u16 {
        self.fields.as_ref().map_or(0, |f| f.queue_id)
    }

    /// The priority, 0..255 (0 when none was given); work queues serve higher first.
    #[getter]
    fn priority(&self) -> u8 {
        self.fields.as_ref().map_or(0, |f| f.priority)
    }

    /// When the message expires, µs since the Unix epoch (UTC), or None.
    #[getter]
    fn expires_at(&self) -> Option<u64> {
        self.fields.as_ref().and_then(|f| f.expires_at)
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
        self.fields.as_ref().and_then(|f| f.topic_offset)
    }

    /// The codec the payload was stored with (`"zstd"`, `"lz4"`, `"gzip"`),
    /// or None when stored as given. `payload` is always decompressed.
    #[getter]
    fn compression(&self) -> Option<&'static str> {
        self.codec.map(crate::Codec::name)
    }

    /// True when the message is a tombstone (`Appender.delete(key)`): its
    /// key's value was deleted; the payload is empty.
    #[getter]
    fn tombstone(&self) -> bool {
        self.tombstone
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
        match (&self.file, &self.view) {
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
            m.headers.as_ref().map(|h| h.clone_ref(py)),
            m.position(),
            m.fields.as_ref().map(|f| {
                (
                    f.topic.as_ref().map(|t| t.clone_ref(py)),
                    f.tags.clone_ref(py),
                    f.queue_id,
                    f.priority,
                    f.expires_at,
                    f.topic_offset,
                )
            }),
            (m.codec.map(|c| c as u8), m.tombstone),
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
        if let Some(k) = &self.key {
            out.push_str(&format!(", key={}", k.bind(py).repr()?));
        }
        if let Some(h) = &self.headers {
            out.push_str(&format!(", headers={}", h.bind(py).repr()?));
        }
        if self.tombstone {
            out.push_str(", tombstone=True");
        }
        if let Some(c) = self.codec {
            out.push_str(&format!(", compression={:?}", c.name()));
        }
        if let Some(f) = &self.fields {
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
            && match (&self.key, &other.key) {
                (None, None) => true,
                (Some(a), Some(b)) => a.bind(py).eq(b.bind(py))?,
                _ => false,
            }
            && self.headers(py)?.eq(other.headers(py)?)?
            && self.tombstone == other.tombstone
            && Fields::same(&self.fields, &other.fields, py)?;
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
    Message {
        seq,
        timestamp,
        payload,
        key,
        headers,
        fields: fields.map(
            |(topic, tags, queue_id, priority, expires_at, topic_offset)| {
                Box::new(Fields {
                    topic,
                    tags,
                    queue_id,
                    priority,
                    expires_at,
                    topic_offset,
                })
            },
        ),
        view: None,
        frame_at,
        file,
        codec: stored.0.and_then(|c| crate::Codec::try_from(c).ok()),
        tombstone: stored.1,
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
