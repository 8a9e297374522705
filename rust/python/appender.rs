//! `Appender`: writes messages to a queue.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyRange, PyString, PyTuple};

use super::aio::Notifier;
use super::args::{name, type_name, Arg, Micros};
use super::buffer::{bytes_arg, BytesArg};
use super::exit;
use super::fork::ForkSafe;
use super::topic::QueueId;
use super::typed::{self, Decoders};
use super::{options, topic};
use crate::format::record::{Compress, HeaderField};
use crate::{Clock, Codec, Compression, Record, SystemClock};

/// Writes messages to a queue; get one from `Queue.appender()`.
///
/// Safe to share between threads. Appends return once the message is handed
/// to the queue's I/O thread (or, with `flush="sync"`, once it is on disk).
/// An append that raises PoisonedError was not stored; one that raises
/// MaybeStoredError (a PoisonedError) may be in the queue: the writer failed
/// after writing it, so read before retrying.
///
/// >>> app = q.appender()
/// >>> app.append(b"order 1")
/// 0
/// >>> app.append_batch([b"a", b"b"])
/// range(1, 3)
/// >>> app.flush()
#[pyclass(frozen, module = "litemq", name = "Appender")]
pub(crate) struct Appender {
    inner: ForkSafe<crate::Appender>,
    /// Appends wait for the disk (flush="sync"): release the GIL for them.
    blocking: bool,
    path: String,
    /// A typed queue's schema: appends take events, encoded into rows.
    typed: Option<Arc<Decoders>>,
    /// An encrypted queue: its events are appended one record each (row
    /// batches are not sealed).
    encrypted: bool,
}

impl Appender {
    pub(crate) fn new(inner: crate::Appender, blocking: bool, path: String) -> Self {
        Appender {
            inner: ForkSafe::new(inner),
            blocking,
            path,
            typed: None,
            encrypted: false,
        }
    }

    /// The appender of a typed queue (`typed`: its schema; `encrypted`:
    /// the queue is), or as it is.
    pub(crate) fn typed(self, typed: Option<Arc<Decoders>>, encrypted: bool) -> Self {
        Appender {
            typed,
            encrypted,
            ..self
        }
    }

    /// `append_batch` on a typed queue: events, or a `pyarrow.RecordBatch`
    /// or `Table` (column-wise), encoded into one block of rows, appended as
    /// row batches. Nothing is stored when an event or a column is refused.
    fn append_typed_batch<'py>(
        &self,
        py: Python<'py>,
        t: &Decoders,
        items: &Bound<'py, PyAny>,
        compress_together: bool,
    ) -> PyResult<Bound<'py, PyRange>> {
        let app = self.inner.get()?;
        if compress_together && self.encrypted {
            // Said in append_batch's words (the engine names append_rows).
            return Err(PyValueError::new_err(
                "compress_together is not available on an encrypted queue (row batches are \
                 not sealed): without it each event is a sealed record of its own",
            ));
        }
        let compress = if compress_together {
            let c = app.compression().ok_or_else(|| {
                PyValueError::new_err(
                    "compress_together needs a codec: give the queue a compression option",
                )
            })?;
            Some((c.codec, c.level))
        } else {
            None
        };
        let mut block = Vec::new();
        let helper = py.import("litemq._typed")?;
        let count = if helper
            .getattr("is_arrow_data")?
            .call1((items,))?
            .is_truthy()?
        {
            // A RecordBatch, or a Table's batches: each read through the C
            // data interface when its columns are the schema's, else (and a
            // Table without batches, whose columns must still be checked)
            // through `arrow_batches`, which maps by name and casts.
            let parts: Vec<Bound<'py, PyAny>> = if items.hasattr("__arrow_c_array__")? {
                vec![items.clone()]
            } else {
                items.call_method0("to_batches")?.extract()?
            };
            let slow = |data: &Bound<'py, PyAny>, block: &mut Vec<u8>| -> PyResult<usize> {
                let batches = helper
                    .getattr("arrow_batches")?
                    .call1((data, t.current_json()))?;
                let mut count = 0usize;
                for b in batches.try_iter()? {
                    let (rows, cols): (usize, Vec<Bound<'py, PyAny>>) = b?.extract()?;
                    typed::encode_arrow(t, &cols, rows, block)?;
                    count += rows;
                }
                Ok(count)
            };
            let mut count = if parts.is_empty() {
                slow(items, &mut block)?
            } else {
                0
            };
            for part in &parts {
                count += match typed::encode_c_batch(t, part, &mut block)? {
                    Some(rows) => rows,
                    None => slow(part, &mut block)?,
                };
            }
            count
        } else {
            if items.is_instance_of::<PyBytes>() || items.is_instance_of::<PyString>() {
                return Err(PyTypeError::new_err(
                    "append_batch takes an iterable of events or a pyarrow RecordBatch/Table",
                ));
            }
            let mut count = 0usize;
            for (i, ev) in items.try_iter()?.enumerate() {
                t.encode(&ev?, &mut block)
                    .map_err(|e| typed::in_item(py, e, i))?;
                count += 1;
            }
            count
        };
        let range = if self.encrypted && compress.is_none() {
            // Row batches are not sealed: each row is a record of its own.
            let starts = t.row_starts(&block, count)?;
            let records: Vec<Record<'_>> = starts
                .windows(2)
                .map(|w| Record::new(&block[w[0]..w[1]]))
                .collect();
            exit::detach(py, || app.append_records(&records))?
        } else {
            // Every row was just written by `encode`/`encode_arrow`, which
            // check each value: the engine walks their lengths only.
            let version = t.current().version;
            exit::detach(py, || {
                app.append_encoded_rows(&block, count, compress, version)
            })?
        };
        PyRange::new(py, range.start as isize, range.end as isize)
    }
}

/// A key argument: `str` (stored as text) or bytes-like.
enum KeyArg<'py> {
    Text(Bound<'py, PyString>),
    Bytes(BytesArg<'py>),
}

impl KeyArg<'_> {
    fn parse<'py>(key: &Bound<'py, PyAny>) -> PyResult<KeyArg<'py>> {
        if let Ok(s) = key.cast::<PyString>() {
            return Ok(KeyArg::Text(s.clone()));
        }
        bytes_arg(key, "key").map(KeyArg::Bytes).map_err(|_| {
            PyTypeError::new_err(format!(
                "key must be str or bytes-like, not {}",
                type_name(key)
            ))
        })
    }

    fn as_bytes(&self) -> PyResult<&[u8]> {
        Ok(match self {
            KeyArg::Text(s) => s.to_str()?.as_bytes(),
            KeyArg::Bytes(b) => b.as_slice(),
        })
    }

    fn is_text(&self) -> bool {
        matches!(self, KeyArg::Text(_))
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for KeyArg<'py> {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        KeyArg::parse(&obj.to_owned())
    }
}

/// Header names and values, kept alive while the record borrows them.
struct HeadersArg<'py> {
    fields: Vec<(Bound<'py, PyString>, KeyArg<'py>)>,
}

impl<'py> HeadersArg<'py> {
    fn parse(headers: &Bound<'py, PyAny>) -> PyResult<Self> {
        let items = if let Ok(d) = headers.cast::<PyDict>() {
            d.items().into_any()
        } else if headers.hasattr("items")? {
            headers.call_method0("items")?
        } else {
            return Err(PyTypeError::new_err(format!(
                "headers must be a mapping of str to str or bytes, not {}",
                type_name(headers)
            )));
        };
        let mut fields = Vec::new();
        for item in items.try_iter()? {
            let (name, value): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item?.extract()?;
            let name = name.cast_into::<PyString>().map_err(|e| {
                PyTypeError::new_err(format!(
                    "header names must be str, not {}",
                    type_name(e.into_inner().as_any())
                ))
            })?;
            let value = KeyArg::parse(&value).map_err(|_| {
                PyTypeError::new_err(format!(
                    "header {name} must have a str or bytes value, not {}",
                    type_name(&value)
                ))
            })?;
            fields.push((name, value));
        }
        Ok(HeadersArg { fields })
    }

    fn borrow(&self) -> PyResult<Vec<HeaderField<'_>>> {
        self.fields
            .iter()
            .map(|(name, value)| {
                Ok(HeaderField {
                    name: name.to_str()?,
                    value: value.as_bytes()?,
                    value_is_text: value.is_text(),
                })
            })
            .collect()
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for HeadersArg<'py> {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        HeadersArg::parse(&obj.to_owned())
    }
}

/// `topic=`: a `str`.
struct Topic<'py>(Bound<'py, PyString>);

impl<'a, 'py> FromPyObject<'a, 'py> for Topic<'py> {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        obj.to_owned()
            .cast_into::<PyString>()
            .map(Topic)
            .map_err(|e| {
                PyTypeError::new_err(format!(
                    "topic must be str, not {}",
                    type_name(e.into_inner().as_any())
                ))
            })
    }
}

/// `tags=` of a message: an iterable of `str`, held (see [`TagArgs`]).
struct TagList<'py>(TagArgs<'py>);

impl<'a, 'py> FromPyObject<'a, 'py> for TagList<'py> {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let mut tags = TagArgs::default();
        topic::each_tag(&obj.to_owned(), &mut |tag| tags.push(tag))?;
        Ok(TagList(tags))
    }
}

/// `priority=`: 0 to 255, higher first.
struct Priority(u8);

impl<'a, 'py> FromPyObject<'a, 'py> for Priority {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Priority(
            options::int_in(&obj, "priority", 0, u8::MAX.into())? as u8,
        ))
    }
}

/// `ttl=`: how long the message lives, in µs (a `timedelta`, seconds or
/// `"30m"`).
struct Ttl(u64);

impl<'a, 'py> FromPyObject<'a, 'py> for Ttl {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Ttl(options::age(&obj, "ttl")?))
    }
}

/// `compress=` as given: a bool or a codec name (resolved against the
/// queue's compression by [`compress_arg`]).
enum CompressArg {
    Flag(bool),
    Codec(String),
}

impl<'a, 'py> FromPyObject<'a, 'py> for CompressArg {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = obj.cast::<pyo3::types::PyBool>() {
            return Ok(CompressArg::Flag(b.is_true()));
        }
        if let Ok(name) = obj.cast::<PyString>() {
            return Ok(CompressArg::Codec(name.to_str()?.to_owned()));
        }
        Err(PyTypeError::new_err(format!(
            "compress must be a bool or a codec name (\"zstd\", \"lz4\", \"gzip\"), not {}",
            type_name(&obj)
        )))
    }
}

/// The entry `name` of a batch item dict, as the keyword argument of the
/// same name arrives (`None` and absent: not set).
fn entry<'py, T>(d: &Bound<'py, PyDict>, name: &str) -> PyResult<Option<Arg<T>>>
where
    T: for<'a> FromPyObject<'a, 'py>,
    for<'a> <T as FromPyObject<'a, 'py>>::Error: Into<PyErr>,
{
    match d.get_item(name)? {
        Some(v) if !v.is_none() => Ok(Some(v.extract::<Arg<T>>()?)),
        _ => Ok(None),
    }
}

/// Tags a message keeps without a heap allocation (most have a few).
const INLINE_TAGS: usize = 4;

/// The tags of one message: held (the strings stay alive while a blocking
/// append lets go of the GIL), the first [`INLINE_TAGS`] inline.
#[derive(Default)]
struct TagArgs<'py> {
    few: [Option<Bound<'py, PyString>>; INLINE_TAGS],
    n: usize,
    /// All of them, when there are more.
    more: Vec<Bound<'py, PyString>>,
}

impl<'py> TagArgs<'py> {
    fn push(&mut self, tag: Bound<'py, PyString>) {
        if self.more.is_empty() && self.n < INLINE_TAGS {
            self.few[self.n] = Some(tag);
            self.n += 1;
            return;
        }
        if self.more.is_empty() {
            self.more
                .extend(self.few.iter_mut().filter_map(Option::take));
            self.n = 0;
        }
        self.more.push(tag);
    }

    fn borrow(&self) -> PyResult<TagStrs<'_>> {
        if !self.more.is_empty() {
            let tags = self.more.iter().map(|t| t.to_str());
            return Ok(TagStrs::Many(tags.collect::<PyResult<Vec<_>>>()?));
        }
        let mut few = [""; INLINE_TAGS];
        for (s, t) in few.iter_mut().zip(self.few.iter().flatten()) {
            *s = t.to_str()?;
        }
        Ok(TagStrs::Few(few, self.n))
    }
}

/// The tags of one message as `&str`, for a [`Record`].
enum TagStrs<'a> {
    Few([&'a str; INLINE_TAGS], usize),
    Many(Vec<&'a str>),
}

impl TagStrs<'_> {
    fn as_slice(&self) -> &[&str] {
        match self {
            TagStrs::Few(few, n) => &few[..*n],
            TagStrs::Many(v) => v,
        }
    }
}

/// Topic, tags, queue id, priority and expiry of one message, parsed once.
#[derive(Default)]
struct FieldsArg<'py> {
    topic: Option<Bound<'py, PyString>>,
    tags: TagArgs<'py>,
    queue_id: u16,
    priority: u8,
    expires_at: Option<u64>,
    compress: Compress,
}

impl<'py> FieldsArg<'py> {
    /// Parses the keyword arguments `append` and batch dicts share; `None`
    /// and absent mean "not set". `ttl` and `expires_at` exclude each other.
    #[expect(
        clippy::too_many_arguments,
        reason = "one per keyword argument of append, plus the queue's compression"
    )]
    fn parse(
        topic: Option<Arg<Topic<'py>>>,
        tags: Option<Arg<TagList<'py>>>,
        queue_id: Option<Arg<QueueId>>,
        priority: Option<Arg<Priority>>,
        ttl: Option<Arg<Ttl>>,
        expires_at: Option<Arg<Micros<name::ExpiresAt>>>,
        compress: Option<Arg<CompressArg>>,
        queue_compression: Option<Compression>,
    ) -> PyResult<Self> {
        let mut out = FieldsArg::default();
        if let Some(c) = Arg::opt(compress)? {
            out.compress = compress_arg(c, queue_compression)?;
        }
        if let Some(Topic(t)) = Arg::opt(topic)? {
            out.topic = Some(t);
        }
        if let Some(TagList(t)) = Arg::opt(tags)? {
            out.tags = t;
        }
        if let Some(QueueId(q)) = Arg::opt(queue_id)? {
            out.queue_id = q;
        }
        if let Some(Priority(p)) = Arg::opt(priority)? {
            out.priority = p;
        }
        match (ttl, expires_at) {
            (Some(_), Some(_)) => {
                return Err(PyTypeError::new_err("give ttl or expires_at, not both"))
            }
            (Some(ttl), None) => {
                let Ttl(ttl) = ttl.get()?;
                out.expires_at = Some(SystemClock.now_micros().saturating_add(ttl));
            }
            (None, Some(at)) => out.expires_at = Some(at.get()?.0),
            (None, None) => {}
        }
        Ok(out)
    }

    /// The string fields borrowed for a [`Record`].
    fn borrow(&self) -> PyResult<(Option<&str>, TagStrs<'_>)> {
        let topic = self.topic.as_ref().map(|t| t.to_str()).transpose()?;
        Ok((topic, self.tags.borrow()?))
    }
}

/// Parses `compress=`: True (the queue's codec and level, else zstd), False
/// (stored as given), or a codec name (the queue's level when it is the
/// queue's codec, else the codec's default). An explicit request ignores the
/// queue's `compression_min_size`; the 5 % rule still holds.
fn compress_arg(arg: CompressArg, queue: Option<Compression>) -> PyResult<Compress> {
    let name = match arg {
        CompressArg::Flag(false) => return Ok(Compress::Never),
        CompressArg::Flag(true) => {
            let c = queue.unwrap_or_else(|| Compression::new(Codec::Zstd));
            return Ok(Compress::With(Compression { min_size: 0, ..c }));
        }
        CompressArg::Codec(name) => name,
    };
    let codec = Codec::from_name(&name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "compress must be True, False, \"zstd\", \"lz4\" or \"gzip\", not {name:?}"
        ))
    })?;
    let level = match queue {
        Some(q) if q.codec == codec => q.level,
        _ => codec.default_level(),
    };
    Ok(Compress::With(Compression {
        codec,
        level,
        min_size: 0,
    }))
}

/// Everything a record borrows from its Python arguments, borrowed at once.
struct Borrowed<'a> {
    headers: Vec<HeaderField<'a>>,
    topic: Option<&'a str>,
    tags: TagStrs<'a>,
}

impl<'a> Borrowed<'a> {
    fn new(headers: Option<&'a HeadersArg<'_>>, fields: &'a FieldsArg<'_>) -> PyResult<Self> {
        let (topic, tags) = fields.borrow()?;
        Ok(Borrowed {
            headers: match headers {
                Some(h) => h.borrow()?,
                None => Vec::new(),
            },
            topic,
            tags,
        })
    }

    fn record(
        &'a self,
        payload: &'a [u8],
        key: Option<&'a KeyArg<'_>>,
        fields: &FieldsArg<'_>,
    ) -> PyResult<Record<'a>> {
        Ok(Record {
            payload,
            key: key.map(KeyArg::as_bytes).transpose()?,
            key_is_text: key.is_some_and(KeyArg::is_text),
            headers: &self.headers,
            topic: self.topic,
            queue_id: fields.queue_id,
            tags: self.tags.as_slice(),
            expires_at: fields.expires_at,
            priority: fields.priority,
            compress: fields.compress,
            tombstone: false,
        })
    }
}

/// One item of `append_batch`, parsed but still borrowing Python objects.
struct ItemArg<'py> {
    payload: BytesArg<'py>,
    key: Option<KeyArg<'py>>,
    headers: Option<HeadersArg<'py>>,
    fields: FieldsArg<'py>,
    /// `"tombstone": True`: the item deletes its key's value.
    tombstone: bool,
}

/// The entries a batch item dict may have.
const ITEM_ENTRIES: [&str; 11] = [
    "payload",
    "key",
    "headers",
    "topic",
    "tags",
    "queue_id",
    "priority",
    "ttl",
    "expires_at",
    "compress",
    "tombstone",
];

impl<'py> ItemArg<'py> {
    fn parse(
        item: &Bound<'py, PyAny>,
        index: usize,
        queue_compression: Option<Compression>,
    ) -> PyResult<Self> {
        let context = |e: PyErr| {
            let py = item.py();
            let new = if e.is_instance_of::<PyTypeError>(py) {
                PyTypeError::new_err(format!("append_batch item {index}: {}", e.value(py)))
            } else if e.is_instance_of::<PyValueError>(py) {
                PyValueError::new_err(format!("append_batch item {index}: {}", e.value(py)))
            } else {
                return e;
            };
            new.set_cause(py, Some(e));
            new
        };
        if let Ok(t) = item.cast::<PyTuple>() {
            let (payload, key, headers) = match t.len() {
                2 => (t.get_item(0)?, t.get_item(1)?.extract()?, None),
                3 => (
                    t.get_item(0)?,
                    t.get_item(1)?.extract()?,
                    t.get_item(2)?.extract()?,
                ),
                n => {
                    return Err(PyTypeError::new_err(format!(
                        "append_batch item {index}: a tuple must be (payload, key) or \
                         (payload, key, headers), got {n} items"
                    )))
                }
            };
            return Self::from_parts(&payload, key, headers).map_err(context);
        }
        if let Ok(d) = item.cast::<PyDict>() {
            let tombstone = match d.get_item("tombstone")? {
                Some(t) => t.extract::<bool>().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "append_batch item {index}: 'tombstone' must be a bool, not {}",
                        type_name(&t)
                    ))
                })?,
                None => false,
            };
            let payload = match d.get_item("payload")? {
                Some(p) => p,
                // A tombstone has no payload.
                None if tombstone => PyBytes::new(item.py(), b"").into_any(),
                None => {
                    return Err(PyTypeError::new_err(format!(
                        "append_batch item {index}: a dict needs a 'payload' entry"
                    )))
                }
            };
            for k in d.keys() {
                let k: String = k.extract().unwrap_or_default();
                if !ITEM_ENTRIES.contains(&k.as_str()) {
                    return Err(PyTypeError::new_err(format!(
                        "append_batch item {index}: unexpected dict entry {k:?} \
                         (expected {})",
                        ITEM_ENTRIES.join(", ")
                    )));
                }
            }
            let mut parsed = Self::from_parts(&payload, entry(d, "key")?, entry(d, "headers")?)
                .map_err(context)?;
            parsed.fields = FieldsArg::parse(
                entry(d, "topic")?,
                entry(d, "tags")?,
                entry(d, "queue_id")?,
                entry(d, "priority")?,
                entry(d, "ttl")?,
                entry(d, "expires_at")?,
                entry(d, "compress")?,
                queue_compression,
            )
            .map_err(context)?;
            parsed.tombstone = tombstone;
            return Ok(parsed);
        }
        Self::from_parts(item, None, None).map_err(context)
    }

    fn from_parts(
        payload: &Bound<'py, PyAny>,
        key: Option<Arg<KeyArg<'py>>>,
        headers: Option<Arg<HeadersArg<'py>>>,
    ) -> PyResult<Self> {
        Ok(ItemArg {
            payload: bytes_arg(payload, "payload")?,
            key: Arg::opt(key)?,
            headers: Arg::opt(headers)?,
            fields: FieldsArg::default(),
            tombstone: false,
        })
    }
}

#[pymethods]
impl Appender {
    /// Appends one message and returns its sequence number.
    ///
    /// `payload` is any bytes-like object; `key` a `str` or bytes (returned
    /// as given, and searchable with `Queue.find`); `headers` a mapping of
    /// `str` to `str` or bytes. `topic` (a `str`) and `tags` (a list of
    /// `str`) classify the message; `queue_id` (0..65535, with a topic)
    /// names one ordered stream of a sharded topic; `priority` (0..255,
    /// higher first) orders work-queue delivery; `ttl` (a `timedelta`,
    /// seconds or a string such as `"30m"`) or `expires_at` (an aware
    /// `datetime` or µs since the epoch) sets when the message expires.
    /// `compress` overrides the queue's `compression` for this message:
    /// True (the queue's codec, else zstd), False, or `"zstd"`, `"lz4"`,
    /// `"gzip"`; the payload is stored compressed only if that saves at
    /// least 5 %. Compression runs here, on the calling thread.
    ///
    /// On a typed queue (`Queue(path, schema=...)`) `payload` is the event:
    /// a dict, a dataclass instance or a `msgspec.Struct` with the schema's
    /// fields, stored as one row (a nullable field left out is null). A
    /// missing, extra, mistyped or out-of-range field raises `SchemaError`
    /// naming it (nothing stored); so do bytes.
    ///
    /// >>> app.append(b"order 1", key="customer-7", headers={"source": "web"})
    /// 0
    /// >>> app.append(b"paid", topic="orders", tags=["paid", "eu"], priority=5, ttl="1h")
    /// 1
    #[pyo3(signature = (
        payload, key=None, headers=None, *,
        topic=None, tags=None, queue_id=None, priority=None, ttl=None, expires_at=None,
        compress=None
    ))]
    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the Python keyword arguments"
    )]
    fn append<'py>(
        &self,
        py: Python<'py>,
        payload: &Bound<'py, PyAny>,
        key: Option<Arg<KeyArg<'py>>>,
        headers: Option<Arg<HeadersArg<'py>>>,
        topic: Option<Arg<Topic<'py>>>,
        tags: Option<Arg<TagList<'py>>>,
        queue_id: Option<Arg<QueueId>>,
        priority: Option<Arg<Priority>>,
        ttl: Option<Arg<Ttl>>,
        expires_at: Option<Arg<Micros<name::ExpiresAt>>>,
        compress: Option<Arg<CompressArg>>,
    ) -> PyResult<u64> {
        let app = self.inner.get()?;
        // A typed queue stores the row of the event given as `payload`.
        let row;
        let arg;
        let bytes: &[u8] = match &self.typed {
            Some(t) => {
                let mut out = Vec::new();
                t.encode(payload, &mut out)?;
                row = out;
                &row
            }
            None => {
                arg = bytes_arg(payload, "payload")?;
                arg.as_slice()
            }
        };
        let plain = key.is_none()
            && headers.is_none()
            && topic.is_none()
            && tags.is_none()
            && queue_id.is_none()
            && priority.is_none()
            && ttl.is_none()
            && expires_at.is_none()
            && compress.is_none();
        if plain {
            // Several writer processes: under this process's lease the append
            // returns at once, and releasing the GIL would cost more than it.
            // If the lease ends meanwhile, this one append waits for this
            // process's I/O thread (which never takes the GIL) holding it.
            if self.blocking && app.may_wait() {
                return Ok(exit::detach(py, || app.append(bytes))?);
            }
            return Ok(app.append(bytes)?);
        }
        let key = Arg::opt(key)?;
        let headers = Arg::opt(headers)?;
        let fields = FieldsArg::parse(
            topic,
            tags,
            queue_id,
            priority,
            ttl,
            expires_at,
            compress,
            app.compression(),
        )?;
        let borrowed = Borrowed::new(headers.as_ref(), &fields)?;
        let record = borrowed.record(bytes, key.as_ref(), &fields)?;
        if self.blocking {
            return Ok(exit::detach(py, || app.append_record(&record))?);
        }
        Ok(app.append_record(&record)?)
    }

    /// Appends many messages in one call and returns the range of their
    /// sequence numbers.
    ///
    /// Items are bytes-like payloads, `(payload, key)` or
    /// `(payload, key, headers)` tuples, or dicts with `payload` and optional
    /// `key`, `headers`, `topic`, `tags`, `queue_id`, `priority`, `ttl`,
    /// `expires_at` and `compress` entries (as the keyword arguments of
    /// `append`); `{"key": k, "tombstone": True}` (no payload) deletes `k`'s
    /// value, as `delete(k)` does.
    ///
    /// With `compress_together=True` the messages are compressed together
    /// in blocks of up to 64 KiB (format 9 batches, Kafka's record
    /// batches) with the queue's `compression` codec and level: far better
    /// ratios for small messages than one by one. Each message keeps its
    /// own sequence, `get(seq)` decompresses one block; keys and tombstones
    /// are indexed, so `Queue.find` and `Queue.get_latest` see them. A block
    /// that would not save 5 % is stored as plain messages. Refused with
    /// ValueError (nothing appended): no `compression` option on the queue,
    /// items with a topic, tags, expiry or `compress` of their own, an
    /// encrypted queue, or declared field indexes.
    ///
    /// On a typed queue, `items` is a list of events (as `append` takes) or
    /// a `pyarrow.RecordBatch` or `Table` whose columns are the schema's
    /// fields (each cast to the field's type when it differs; a lossy cast,
    /// a missing non-nullable column, an extra column or a null in a
    /// non-nullable field raises `SchemaError`): encoded in Rust, column by
    /// column, and appended as row batches (FORMAT.md "Typed records"),
    /// compressed with the queue's codec when `compress_together=True`. On
    /// an encrypted queue each row is a sealed record of its own, and
    /// `compress_together=True` raises ValueError. Nothing of the call is
    /// stored when an event or column is refused.
    ///
    /// >>> app.append_batch([b"a", (b"b", "key-b"), {"payload": b"c", "headers": {"h": "v"}}])
    /// range(1, 4)
    #[pyo3(signature = (items, *, compress_together = false))]
    fn append_batch<'py>(
        &self,
        py: Python<'py>,
        items: &Bound<'py, PyAny>,
        compress_together: bool,
    ) -> PyResult<Bound<'py, PyRange>> {
        if let Some(t) = &self.typed {
            return self.append_typed_batch(py, t, items, compress_together);
        }
        let app = self.inner.get()?;
        if items.is_instance_of::<PyBytes>() || items.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "append_batch takes an iterable of messages, not a single bytes or str; \
                 use append() for one message",
            ));
        }
        let objects: Vec<Bound<'py, PyAny>> = if let Ok(list) = items.cast::<PyList>() {
            list.iter().collect()
        } else if let Ok(tuple) = items.cast::<PyTuple>() {
            tuple.iter().collect()
        } else {
            items
                .try_iter()
                .map_err(|_| {
                    PyTypeError::new_err(format!(
                        "append_batch takes an iterable of messages, not {}",
                        type_name(items)
                    ))
                })?
                .collect::<PyResult<_>>()?
        };
        // Fast path: every item is `bytes`.
        let mut plain: Vec<&[u8]> = Vec::with_capacity(objects.len());
        for obj in &objects {
            match obj.cast::<PyBytes>() {
                Ok(b) => plain.push(b.as_bytes()),
                Err(_) => break,
            }
        }
        let range = if compress_together && plain.len() == objects.len() {
            let records: Vec<Record<'_>> = plain.iter().map(|p| Record::new(p)).collect();
            exit::detach(py, || app.append_batch_together(&records, None))?
        } else if plain.len() == objects.len() {
            exit::detach(py, || app.append_batch(plain.iter().copied()))?
        } else {
            drop(plain);
            let parsed = objects
                .iter()
                .enumerate()
                .map(|(i, obj)| ItemArg::parse(obj, i, app.compression()))
                .collect::<PyResult<Vec<_>>>()?;
            let borrowed = parsed
                .iter()
                .map(|item| Borrowed::new(item.headers.as_ref(), &item.fields))
                .collect::<PyResult<Vec<_>>>()?;
            let records = parsed
                .iter()
                .zip(&borrowed)
                .map(|(item, b)| {
                    let r = b.record(item.payload.as_slice(), item.key.as_ref(), &item.fields)?;
                    Ok(Record {
                        tombstone: item.tombstone,
                        ..r
                    })
                })
                .collect::<PyResult<Vec<_>>>()?;
            if compress_together {
                exit::detach(py, || app.append_batch_together(&records, None))?
            } else {
                exit::detach(py, || app.append_records(&records))?
            }
        };
        PyRange::new(py, range.start as isize, range.end as isize)
    }

    /// Deletes `key`'s value: appends a tombstone for it (a message with that
    /// key, no payload and `tombstone` True) and returns its sequence.
    /// `Queue.get_latest(key)` returns None from then on, until the key is
    /// appended again. Tailers return tombstones like other messages.
    ///
    /// >>> app.delete("customer-7")
    /// 8
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        let app = self.inner.get()?;
        let key = KeyArg::parse(key)?;
        let record = Record {
            key: Some(key.as_bytes()?),
            key_is_text: key.is_text(),
            tombstone: true,
            ..Record::new(b"")
        };
        if self.blocking {
            return Ok(exit::detach(py, || app.append_record(&record))?);
        }
        Ok(app.append_record(&record)?)
    }

    /// Seals the file being written once every earlier append is in it, so
    /// it can be archived (`litemq archive`), indexed by topic or deleted by
    /// retention; the next append starts a new file. Returns once that is on
    /// disk, as `flush` does (a flush alone when the file holds no message).
    /// Not available with several writer processes (ValueError).
    ///
    /// >>> app.roll()
    fn roll(&self, py: Python<'_>) -> PyResult<()> {
        let app = self.inner.get()?;
        Ok(exit::detach(py, || app.roll())?)
    }

    /// Blocks until every earlier append is written and on disk (msync).
    ///
    /// >>> app.append(b"important")
    /// 7
    /// >>> app.flush()   # durable from here on
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let app = self.inner.get()?;
        Ok(exit::detach(py, || app.flush())?)
    }

    /// Refuses pickling and copying: an appender feeds this process's I/O thread.
    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(format!(
            "a litemq.Appender cannot be pickled or copied: it feeds this process's I/O \
             thread; pass the queue's path ({:?}) and call litemq.Queue(path).appender() \
             in the other process (one writer process at a time unless multi_writer=True)",
            self.path
        )))
    }

    /// `flush` for asyncio: awaits until every message appended before the
    /// call is written and msync'd, without a thread blocked per flush (the
    /// I/O thread reports the durable mark to the event loop). Cancelling
    /// the await does not cancel the flush.
    ///
    /// >>> await app.flush_async()
    fn flush_async<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import("litemq._aio")?.getattr("flush")?.call1((slf,))
    }

    /// Asks for a flush and reports `token` to `notifier` when it is durable.
    fn _flush_notify(&self, py: Python<'_>, notifier: &Notifier, token: u64) -> PyResult<()> {
        let app = self.inner.get()?;
        let notify = notifier.notify(token);
        exit::detach(py, || app.flush_then(notify));
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("<litemq.Appender for {:?}>", self.path)
    }
}
