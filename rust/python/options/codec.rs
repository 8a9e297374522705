//! How payloads are stored: `compression=` (with its level and smallest
//! size) and `encryption_key=` / `encryption_key_file=`.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBool;

use super::super::args::{type_name, Arg};
use super::super::errors::config_error;
use super::values::*;

/// The `compression=` option: a codec name (`"zstd"`, `"lz4"`, `"gzip"`),
/// or False / `"none"` for none.
pub(crate) struct Codec(pub Option<crate::Codec>);

impl<'a, 'py> FromPyObject<'a, 'py> for Codec {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let codec: &Bound<'py, PyAny> = &obj;
        let off = match codec.cast::<PyBool>() {
            Ok(b) if !b.is_true() => true,
            Ok(_) => {
                return Err(PyTypeError::new_err(
                    "compression must be a codec name (\"zstd\", \"lz4\", \"gzip\"), \
                     False or \"none\", not True",
                ))
            }
            Err(_) => false,
        };
        let name: String = if off {
            "none".into()
        } else {
            codec.extract().map_err(|_| {
                PyTypeError::new_err(format!(
                    "compression must be a codec name (\"zstd\", \"lz4\", \"gzip\"), False or \
                     \"none\", not {}",
                    type_name(codec)
                ))
            })?
        };
        if name == "none" {
            return Ok(Codec(None));
        }
        crate::Codec::from_name(&name)
            .map(|c| Codec(Some(c)))
            .ok_or_else(|| {
                config_error(format!(
                    "compression {name:?} is unknown: give \"zstd\", \"lz4\", \"gzip\" or \"none\""
                ))
            })
    }
}

/// `compression_level=`: an int the codec accepts.
pub(crate) struct CompressionLevel(pub i32);

impl<'a, 'py> FromPyObject<'a, 'py> for CompressionLevel {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if !is_int(&obj) {
            return Err(PyTypeError::new_err("compression_level must be an int"));
        }
        obj.extract::<i32>()
            .map(CompressionLevel)
            .map_err(|_| config_error("compression_level is out of range"))
    }
}

/// `compression_min_size=`: payloads smaller are stored as given.
pub(crate) struct CompressionMinSize(pub usize);

impl<'a, 'py> FromPyObject<'a, 'py> for CompressionMinSize {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(CompressionMinSize(
            size_in(&obj, "compression_min_size", 0, u32::MAX.into())? as usize,
        ))
    }
}

/// The `compression=` option with its level and smallest size (`None`: no
/// compression).
pub(crate) fn compression(
    codec: Arg<Codec>,
    level: Option<Arg<CompressionLevel>>,
    min_size: Option<Arg<CompressionMinSize>>,
) -> PyResult<Option<crate::Compression>> {
    let Codec(codec) = codec.get()?;
    let Some(codec) = codec else {
        if level.is_some() || min_size.is_some() {
            return Err(config_error(
                "compression_level and compression_min_size need a codec",
            ));
        }
        return Ok(None);
    };
    let mut c = crate::Compression::new(codec);
    if let Some(CompressionLevel(l)) = Arg::opt(level)? {
        c.level = l;
    }
    if let Some(CompressionMinSize(m)) = Arg::opt(min_size)? {
        c.min_size = m;
    }
    c.validate().map_err(config_error)?;
    Ok(Some(c))
}

/// `encryption_key=`: 32 bytes, bytes-like (the length is checked with the
/// file's, in [`encryption_key`]).
pub(crate) struct EncryptionKey(pub Vec<u8>);

impl<'a, 'py> FromPyObject<'a, 'py> for EncryptionKey {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        super::super::buffer::bytes_arg(&obj, "encryption_key")
            .map(|b| EncryptionKey(b.as_slice().to_vec()))
            .map_err(|_| PyTypeError::new_err("encryption_key must be bytes-like (32 bytes)"))
    }
}

/// The `encryption_key=` / `encryption_key_file=` options: 32 bytes given
/// as a bytes-like object, or read from a file holding the 32 raw bytes or
/// 64 hex digits (surrounding white space ignored). Both at once, or a key
/// of another length, is a `ConfigError`.
pub(crate) fn encryption_key(
    key: Option<Arg<EncryptionKey>>,
    file: Option<std::path::PathBuf>,
) -> PyResult<Option<[u8; 32]>> {
    let bytes = match (key, file) {
        (Some(_), Some(_)) => {
            return Err(config_error(
                "give encryption_key or encryption_key_file, not both",
            ))
        }
        (None, None) => return Ok(None),
        (Some(k), None) => k.get()?.0,
        (None, Some(path)) => {
            let raw = std::fs::read(&path).map_err(|e| {
                pyo3::exceptions::PyOSError::new_err((
                    e.raw_os_error().unwrap_or(0),
                    e.to_string(),
                    path.display().to_string(),
                ))
            })?;
            if raw.len() == 32 {
                raw
            } else {
                std::str::from_utf8(&raw)
                    .ok()
                    .and_then(|t| crate::format::crypto::from_hex(t.trim()))
                    .ok_or_else(|| {
                        config_error(format!(
                            "encryption_key_file {} must hold 32 bytes or 64 hex digits",
                            path.display()
                        ))
                    })?
            }
        }
    };
    let n = bytes.len();
    bytes
        .try_into()
        .map(Some)
        .map_err(|_| config_error(format!("encryption_key must be 32 bytes, not {n}")))
}
