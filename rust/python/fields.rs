//! Secondary-index arguments: `Queue(indexes={...})`, `add_index` and the
//! predicate of `Queue.where(field, op, value)`, checked once and turned
//! into typed values.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PyMapping, PyString, PyTuple};

use super::args::type_name;
use crate::{FieldIndexDef, FieldKind, FieldQuery, KeyPredicate};

/// The indexes of `indexes={"customer": "str", "price": "int"}`.
pub(crate) fn indexes_arg(obj: &Bound<'_, PyAny>) -> PyResult<Vec<FieldIndexDef>> {
    let map = obj.cast::<PyMapping>().map_err(|_| {
        PyTypeError::new_err(format!(
            "indexes must be a dict of header name to \"str\" or \"int\", not {}",
            type_name(obj)
        ))
    })?;
    let mut out = Vec::new();
    for item in map.items()?.iter() {
        let (name, kind): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let (Ok(name), Ok(kind)) = (name.cast::<PyString>(), kind.cast::<PyString>()) else {
            return Err(PyTypeError::new_err(
                "indexes must map str header names to \"str\" or \"int\"",
            ));
        };
        out.push(FieldIndexDef::new(name.to_str()?, kind.to_str()?)?);
    }
    Ok(out)
}

/// The declared indexes as a dict of name to type.
pub(crate) fn indexes_dict<'py>(
    py: Python<'py>,
    defs: &[FieldIndexDef],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for def in defs {
        d.set_item(&def.name, def.kind.name())?;
    }
    Ok(d)
}

/// The key of one query value for a field of kind `kind`.
fn key_arg(def: &FieldIndexDef, value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    match def.kind {
        FieldKind::Str => match value.cast::<PyString>() {
            Ok(s) => Ok(s.to_str()?.as_bytes().to_vec()),
            Err(_) => Err(PyTypeError::new_err(format!(
                "index {:?} holds str values; got {}",
                def.name,
                type_name(value)
            ))),
        },
        FieldKind::Int => {
            if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
                return Err(PyTypeError::new_err(format!(
                    "index {:?} holds int values; got {}",
                    def.name,
                    type_name(value)
                )));
            }
            let v: i64 = value.extract().map_err(|_| {
                PyValueError::new_err(format!(
                    "index {:?} holds signed 64-bit ints; {value} is out of range",
                    def.name
                ))
            })?;
            Ok(crate::format::fields::int_key(v).to_vec())
        }
    }
}

/// The query of `where(field, op, value)` on declared index `def`.
pub(crate) fn query_arg(
    def: FieldIndexDef,
    op: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<FieldQuery> {
    let any = match op {
        "=" | "==" => vec![KeyPredicate::Eq(key_arg(&def, value)?)],
        "between" => {
            let pair = value
                .cast::<PyTuple>()
                .map(|t| t.as_any().clone())
                .or_else(|_| value.cast::<PyList>().map(|l| l.as_any().clone()))
                .ok()
                .filter(|p| p.len().ok() == Some(2))
                .ok_or_else(|| {
                    PyTypeError::new_err(
                        "\"between\" takes a (low, high) tuple, both ends included",
                    )
                })?;
            let lo = key_arg(&def, &pair.get_item(0)?)?;
            let hi = key_arg(&def, &pair.get_item(1)?)?;
            vec![KeyPredicate::Between(lo, hi)]
        }
        "in" => {
            if value.is_instance_of::<PyString>() || value.is_instance_of::<PyBytes>() {
                return Err(PyTypeError::new_err(
                    "\"in\" takes a list of values, not a single str",
                ));
            }
            let mut any = Vec::new();
            for v in value.try_iter().map_err(|_| {
                PyTypeError::new_err(format!(
                    "\"in\" takes a list of values, not {}",
                    type_name(value)
                ))
            })? {
                any.push(KeyPredicate::Eq(key_arg(&def, &v?)?));
            }
            any
        }
        // Open ranges: no key is above 9 bytes of 0xFF (an int key has 8
        // bytes, UTF-8 never holds 0xFF), none below the empty one.
        ">=" => vec![KeyPredicate::Between(key_arg(&def, value)?, vec![0xFF; 9])],
        "<=" => vec![KeyPredicate::Between(Vec::new(), key_arg(&def, value)?)],
        "prefix" if def.kind == FieldKind::Str => {
            vec![KeyPredicate::Prefix(key_arg(&def, value)?)]
        }
        "prefix" => {
            return Err(PyValueError::new_err(format!(
                "\"prefix\" is for str indexes; {:?} is an int index",
                def.name
            )))
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "op must be \"=\", \"between\", \"in\", \">=\", \"<=\" or \"prefix\", got {other:?}"
            )))
        }
    };
    Ok(FieldQuery { def, any })
}
