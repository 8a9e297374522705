//! Bytes across the boundary: bytes-like arguments in, zero-copy payload
//! views out, and Arrow record batches in through Arrow's C data interface
//! (their buffers borrowed, not copied).

use std::ffi::{c_char, c_int, c_void};
use std::ops::Range;
use std::sync::Arc;

use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyCapsule, PyMemoryView, PyString};

use crate::format::typed::arrow_in::ColumnIn;
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

/// One column of a record batch read through Arrow's C data interface
/// ([`with_arrow_batch`]): its name, its format string (the interface's
/// type code: `l` int64, `u` string, `tsu:UTC`, ...) and its buffers.
pub(crate) struct CColumn<'a> {
    pub(crate) name: &'a str,
    pub(crate) format: &'a str,
    /// Nulls in the column (-1: the producer did not count them).
    pub(crate) null_count: i64,
    pub(crate) column: ColumnIn<'a>,
}

/// `struct ArrowSchema` of the Arrow C data interface.
#[repr(C)]
struct ArrowSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

/// `struct ArrowArray` of the Arrow C data interface.
#[repr(C)]
struct ArrowArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

/// How a column's buffers are laid out, from its format string: the only
/// ones [`with_arrow_batch`] reads (the types a typed queue stores).
#[derive(Clone, Copy)]
enum CLayout {
    /// Bit-packed values (`b`).
    Bits,
    /// Values of this many bytes.
    Fixed(usize),
    /// Offsets of 4 (`u`, `z`) or 8 (`U`, `Z`) bytes, then the bytes.
    Var(usize),
}

fn c_layout(format: &str) -> Option<CLayout> {
    Some(match format {
        "b" => CLayout::Bits,
        "c" | "C" => CLayout::Fixed(1),
        "s" | "S" => CLayout::Fixed(2),
        "i" | "I" | "f" | "tdD" => CLayout::Fixed(4),
        "l" | "L" | "g" => CLayout::Fixed(8),
        "u" | "z" => CLayout::Var(4),
        "U" | "Z" => CLayout::Var(8),
        f if f.starts_with("tsu:") => CLayout::Fixed(8),
        f if f.starts_with("d:") && f.matches(',').count() == 1 => CLayout::Fixed(16),
        _ => return None,
    })
}

/// Reads `obj.__arrow_c_array__()` (a `pyarrow.RecordBatch`: a struct
/// array whose children are the columns) and calls `f` with its rows and
/// columns, borrowing the producer's buffers without a copy. `Ok(None)`
/// without calling `f` when the batch is not one this reads: a column of a
/// type a typed queue does not store, a dictionary or nested column, a
/// sliced struct, a row-level null, a buffer it cannot see whole (the
/// caller then takes the Python path, which casts).
#[expect(
    unsafe_code,
    reason = "Arrow's C data interface is raw pointers (docs/DESIGN.md, \"Where unsafe is\")"
)]
pub(crate) fn with_arrow_batch<R>(
    obj: &Bound<'_, PyAny>,
    f: impl FnOnce(usize, &[CColumn<'_>]) -> R,
) -> PyResult<Option<R>> {
    let pair = obj.call_method0("__arrow_c_array__")?;
    let (schema, array): (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>) = pair.extract()?;
    let s = schema
        .pointer_checked(Some(c"arrow_schema"))?
        .cast::<ArrowSchema>();
    let a = array
        .pointer_checked(Some(c"arrow_array"))?
        .cast::<ArrowArray>();
    // SAFETY: the capsules were just made by `__arrow_c_array__` and are
    // held (`schema`, `array`) until this function returns; nothing else
    // holds them, so no other code can release or move their structs. Per
    // the C data interface, a struct whose `release` is set is valid, and
    // so is everything it points to (children, buffers, strings) until it
    // is released. Every buffer is viewed with the length the interface
    // gives it for the column's format, offset and length (`c_column`),
    // and only read.
    let cols = unsafe { c_columns(s.as_ref(), a.as_ref()) };

    Ok(cols.map(|(rows, cols)| f(rows, &cols)))
}

/// The columns of a struct array, or `None` (see [`with_arrow_batch`]).
///
/// # Safety
/// `s` and `a` are an exported schema and array, not released, valid for
/// `'a` (the C data interface's guarantees).
#[expect(
    unsafe_code,
    reason = "Arrow's C data interface is raw pointers (docs/DESIGN.md, \"Where unsafe is\")"
)]
unsafe fn c_columns<'a>(
    s: &'a ArrowSchema,
    a: &'a ArrowArray,
) -> Option<(usize, Vec<CColumn<'a>>)> {
    if s.release.is_none() || a.release.is_none() {
        return None;
    }
    // SAFETY: a valid schema's format is a NUL-terminated string.
    let format = unsafe { c_str(s.format) }?;
    if format != "+s" || a.offset != 0 || a.null_count != 0 || s.n_children != a.n_children {
        return None;
    }
    let rows = usize::try_from(a.length).ok()?;
    let n = usize::try_from(a.n_children).ok()?;
    let mut cols = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: `children` of a valid struct holds `n_children` valid
        // pointers, in both the schema and the array.
        let (cs, ca) = unsafe { (&**s.children.add(i), &**a.children.add(i)) };
        // SAFETY: children of a valid parent are valid (same lifetime).
        cols.push(unsafe { c_column(cs, ca, rows) }?);
    }
    Some((rows, cols))
}

/// One child column (see [`c_columns`]).
///
/// # Safety
/// As [`c_columns`], for a child schema and array.
#[expect(
    unsafe_code,
    reason = "Arrow's C data interface is raw pointers (docs/DESIGN.md, \"Where unsafe is\")"
)]
unsafe fn c_column<'a>(s: &'a ArrowSchema, a: &'a ArrowArray, rows: usize) -> Option<CColumn<'a>> {
    // SAFETY: a valid schema's format and name are NUL-terminated strings.
    let (format, name) = unsafe { (c_str(s.format)?, c_str(s.name)?) };
    if !s.dictionary.is_null() || s.n_children != 0 || a.n_children != 0 {
        return None;
    }
    let layout = c_layout(format)?;
    let offset = usize::try_from(a.offset).ok()?;
    let end = offset.checked_add(rows)?;
    if usize::try_from(a.length).ok()? < rows {
        return None;
    }
    let want_buffers = if let CLayout::Var(_) = layout { 3 } else { 2 };
    if a.n_buffers != want_buffers {
        return None;
    }
    // SAFETY: `buffers` holds `n_buffers` pointers; each non-null one
    // points to a buffer at least as long as the format and `offset +
    // length` require (the interface's layout), which is what each view
    // below takes; the validity bitmap may be null when there are no nulls.
    unsafe {
        let buf = |k: usize, len: usize| -> Option<&'a [u8]> {
            let p = *a.buffers.add(k);
            if len == 0 {
                Some(&[][..])
            } else if p.is_null() {
                None
            } else {
                Some(std::slice::from_raw_parts(p.cast::<u8>(), len))
            }
        };
        let validity = if (*a.buffers).is_null() {
            None
        } else {
            Some(buf(0, end.div_ceil(8))?)
        };
        let (data, offsets, large) = match layout {
            CLayout::Bits => (buf(1, end.div_ceil(8))?, None, false),
            CLayout::Fixed(w) => (buf(1, end.checked_mul(w)?)?, None, false),
            CLayout::Var(w) => {
                let offs = buf(1, (end + 1).checked_mul(w)?)?;
                let last = if w == 8 {
                    i64::from_le_bytes(offs[end * 8..end * 8 + 8].try_into().ok()?)
                } else {
                    i64::from(i32::from_le_bytes(
                        offs[end * 4..end * 4 + 4].try_into().ok()?,
                    ))
                };
                (buf(2, usize::try_from(last).ok()?)?, Some(offs), w == 8)
            }
        };
        Some(CColumn {
            name,
            format,
            null_count: a.null_count,
            column: ColumnIn {
                validity,
                offset,
                data,
                offsets,
                large,
            },
        })
    }
}

/// A C string as `&str` (`None`: null or not UTF-8).
///
/// # Safety
/// `p` is null or a NUL-terminated string valid for `'a`.
#[expect(
    unsafe_code,
    reason = "Arrow's C data interface is raw pointers (docs/DESIGN.md, \"Where unsafe is\")"
)]
unsafe fn c_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: per this function's contract.
    unsafe { std::ffi::CStr::from_ptr(p) }.to_str().ok()
}
