//! Topic arguments: the selector of `Queue.tailer(topic=..., tags=...,
//! queue_id=...)`, the tags of `append`, and `Queue._topics()`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use super::args::{type_name, Arg};
use super::options;
use crate::format::record::validate_topic;
use crate::TopicSelector;

/// The tags of an iterable of `str` (a single `str` is refused: it would
/// be read as its characters).
pub(crate) fn tag_strings<'py>(tags: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyString>>> {
    let mut out = Vec::new();
    each_tag(tags, &mut |t| out.push(t))?;
    Ok(out)
}

/// As [`tag_strings`], handing each tag to `each` (an appender keeps a
/// message's few tags without a heap allocation).
pub(crate) fn each_tag<'py>(
    tags: &Bound<'py, PyAny>,
    each: &mut dyn FnMut(Bound<'py, PyString>),
) -> PyResult<()> {
    if tags.is_instance_of::<PyString>() || tags.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(
            "tags must be an iterable of str (a list or tuple), not a single str; \
             write tags=[\"paid\"]",
        ));
    }
    // A list or tuple (the usual tags) is read by index: no iterator.
    if let Ok(list) = tags.cast::<pyo3::types::PyList>() {
        for t in list.iter() {
            each(tag_string(t)?);
        }
        return Ok(());
    }
    if let Ok(tuple) = tags.cast::<pyo3::types::PyTuple>() {
        for t in tuple.iter() {
            each(tag_string(t)?);
        }
        return Ok(());
    }
    let iter = tags.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "tags must be an iterable of str, not {}",
            type_name(tags)
        ))
    })?;
    for tag in iter {
        each(tag_string(tag?)?);
    }
    Ok(())
}

fn tag_string(tag: Bound<'_, PyAny>) -> PyResult<Bound<'_, PyString>> {
    tag.cast_into::<PyString>().map_err(|e| {
        PyTypeError::new_err(format!(
            "tags must be str, not {}",
            type_name(e.into_inner().as_any())
        ))
    })
}

/// `tags=`: an iterable of `str` (a single `str` is refused: it would be
/// read as its characters).
pub(crate) struct Tags(pub Vec<String>);

impl<'a, 'py> FromPyObject<'a, 'py> for Tags {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        tag_strings(&obj)?
            .iter()
            .map(|s| s.to_str().map(str::to_string))
            .collect::<PyResult<Vec<_>>>()
            .map(Tags)
    }
}

/// `queue_id=`: one stream of a sharded topic, 0 to 65535.
pub(crate) struct QueueId(pub u16);

impl<'a, 'py> FromPyObject<'a, 'py> for QueueId {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(QueueId(
            options::int_in(&obj, "queue_id", 0, u16::MAX.into())? as u16,
        ))
    }
}

/// The selector of a topic tailer; `None` when no argument asks for one.
pub(crate) fn selector_arg(
    topic: Option<String>,
    tags: Option<Arg<Tags>>,
    queue_id: Option<Arg<QueueId>>,
) -> PyResult<Option<TopicSelector>> {
    if topic.is_none() && tags.is_none() && queue_id.is_none() {
        return Ok(None);
    }
    if let Some(t) = &topic {
        validate_topic(t).map_err(PyValueError::new_err)?;
    } else if queue_id.is_some() {
        return Err(PyValueError::new_err(
            "queue_id needs a topic: q.tailer(topic=..., queue_id=...)",
        ));
    }
    let tags = Arg::opt(tags)?.map_or_else(Vec::new, |Tags(t)| t);
    let queue_id = Arg::opt(queue_id)?.map(|QueueId(q)| q);
    Ok(Some(TopicSelector {
        topic,
        queue_id,
        tags,
    }))
}
