//! Bytes across the boundary: bytes-like arguments in, zero-copy payload
//! views out.

use std::ffi::{c_int, c_void};
use std::ops::Range;
use std::sync::Arc;

use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};

use crate::Mapping;

/// The bytes of a bytes-like argument: borrowed from a `bytes` object, or
/// copied once out of anything else that has the buffer protocol.
pub(crate) enum BytesArg<'py> {
    Bytes(Bound<'py, PyBytes>),
    Owned(Vec<u8>),
}

impl BytesArg<'_> {
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            BytesArg::Bytes(b) => b.as_bytes(),
            BytesArg::Owned(v) => v,
        }
    }
}

/// Reads a bytes-like object (`bytes`, `bytearray`, `memoryview`, numpy
/// arrays, `array.array`, ...). `what` names the argument in the TypeError.
#[inline]
pub(crate) fn bytes_arg<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<BytesArg<'py>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(BytesArg::Bytes(b.clone()));
    }
    bytes_arg_slow(obj, what)
}

#[cold]
fn bytes_arg_slow<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<BytesArg<'py>> {
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(BytesArg::Owned(b.to_vec()));
    }
    let type_error = || {
        let type_name = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        let hint = if obj.is_instance_of::<PyString>() {
            " (encode str first, e.g. s.encode())"
        } else {
            ""
        };
        PyTypeError::new_err(format!(
            "{what} must be a bytes-like object (bytes, bytearray, memoryview, ...), not {type_name}{hint}"
        ))
    };
    if obj.is_instance_of::<PyString>() {
        return Err(type_error());
    }
    let view = PyMemoryView::from(obj).map_err(|_| type_error())?;
    // tobytes() copies in C order, so non-contiguous views work too.
    let bytes = view.call_method0("tobytes")?.cast_into::<PyBytes>()?;
    Ok(BytesArg::Bytes(bytes))
}

/// Read-only buffer over a payload inside a mapped data file (holding it, or
/// a memoryview made from it, keeps the file mapped), or over a column the
/// engine built for `read_arrow` (handed to pyarrow without a copy).
#[pyclass(frozen, module = "litemq._litemq")]
pub(crate) struct PayloadView {
    bytes: Owner,
}

/// What a view's bytes live in; all are immutable for the view's life.
enum Owner {
    /// Published payload bytes of a mapped data file.
    Mapped(Arc<Mapping>, Range<usize>),
    /// A column the engine built for `read_arrow`, handed over without a
    /// copy: bytes, or the little-endian words of an integer column.
    Bytes(Vec<u8>),
    I64(Vec<i64>),
    I32(Vec<i32>),
}

// Integer columns are exported as their in-memory bytes, which Arrow reads
// as little-endian.
#[cfg(not(target_endian = "little"))]
compile_error!("litemq exports integer columns as little-endian memory");

impl Drop for PayloadView {
    /// A column's memory goes on the shelf for the next read to fill
    /// (`reader::spare`): new memory would have to be zeroed by the kernel.
    fn drop(&mut self) {
        use crate::reader::spare::give;
        match std::mem::replace(&mut self.bytes, Owner::Bytes(Vec::new())) {
            Owner::Mapped(..) => {}
            Owner::Bytes(v) => give(v),
            Owner::I64(v) => give(v),
            Owner::I32(v) => give(v),
        }
    }
}

impl PayloadView {
    /// A view of `mapping.as_slice()[range]`; panics if the range is outside.
    pub(crate) fn new(mapping: Arc<Mapping>, range: Range<usize>) -> Self {
        assert!(range.start <= range.end && range.end <= mapping.as_slice().len());
        PayloadView {
            bytes: Owner::Mapped(mapping, range),
        }
    }

    /// A view that owns `bytes`.
    pub(crate) fn owning(bytes: Vec<u8>) -> Self {
        PayloadView {
            bytes: Owner::Bytes(bytes),
        }
    }

    /// A view of the bytes of an `i64` column (little-endian), owning it.
    pub(crate) fn owning_i64(words: Vec<i64>) -> Self {
        PayloadView {
            bytes: Owner::I64(words),
        }
    }

    /// A view of the bytes of an `i32` column (little-endian), owning it.
    pub(crate) fn owning_i32(words: Vec<i32>) -> Self {
        PayloadView {
            bytes: Owner::I32(words),
        }
    }

    /// Start and length in bytes of what the view exports.
    fn raw(&self) -> (*const u8, usize) {
        match &self.bytes {
            Owner::Mapped(mapping, range) => {
                let b = &mapping.as_slice()[range.clone()];
                (b.as_ptr(), b.len())
            }
            Owner::Bytes(b) => (b.as_ptr(), b.len()),
            Owner::I64(w) => (w.as_ptr().cast(), std::mem::size_of_val(w.as_slice())),
            Owner::I32(w) => (w.as_ptr().cast(), std::mem::size_of_val(w.as_slice())),
        }
    }

    pub(crate) fn memoryview<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyMemoryView>> {
        let owner = Bound::new(py, self)?;
        PyMemoryView::from(owner.as_any())
    }
}

#[pymethods]
impl PayloadView {
    /// Exports the payload bytes read-only (the buffer protocol).
    ///
    /// # Safety
    /// Called by CPython with a valid `view` to fill, as the buffer protocol
    /// requires.
    #[expect(
        unsafe_code,
        reason = "the buffer protocol is an unsafe C interface (docs/DESIGN.md, \"Where unsafe is\")"
    )]
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("payload views are read-only"));
        }
        let (ptr, len) = slf.get().raw();
        // SAFETY: `view` is valid per the protocol. The exported pointer stays
        // valid for as long as the buffer is held: PyBuffer_FillInfo stores a
        // new reference to `slf` in `view.obj`, and `slf` (frozen: its owner
        // never changes) owns either an Arc of the mapping, which is unmapped
        // only when its last Arc drops, or a vector, freed only when `slf`
        // is, and `ptr..ptr + len` are the bytes of that range or vector
        // (`raw`). Mapped bytes are published payload bytes, which nobody
        // writes again (see docs/DESIGN.md); built columns are never written
        // after construction; the view is read-only (readonly = 1).
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                ptr as *mut c_void,
                len as ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if rc == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.raw().1
    }
}
