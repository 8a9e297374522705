//! `retention=` and `apply_retention(policy)`: a `litemq.Retention`, checked,
//! into the engine's `RetentionPolicy`.

use std::time::Duration;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBool;

use super::super::args::type_name;
use super::super::errors::config_error;
use super::values::*;
use crate::RetentionPolicy;

/// A `litemq.Retention`'s fields, checked: `(max_age_us, max_bytes,
/// max_files, protect_unconsumed)`.
pub(super) type RetentionFields = (Option<u64>, Option<u64>, Option<u64>, bool);

pub(super) fn retention_fields(policy: &Bound<'_, PyAny>) -> PyResult<RetentionFields> {
    let optional = |name: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        let value = policy.getattr(name)?;
        Ok((!value.is_none()).then_some(value))
    };
    let max_age = optional("max_age")?
        .map(|v| age(&v, "max_age"))
        .transpose()?;
    let max_bytes = optional("max_bytes")?
        .map(|v| size(&v, "max_bytes", Some(U64_MAX)).map(|n| n as u64))
        .transpose()?;
    let max_files = match optional("max_files")? {
        None => None,
        Some(files) if !is_int(&files) => {
            return Err(PyTypeError::new_err(format!(
                "max_files must be an int, not {}",
                type_name(&files)
            )))
        }
        Some(files) => match int_value(&files)? {
            Int::Negative | Int::Value(0) => {
                return Err(config_error(format!(
                    "max_files must be at least 1 (the file being written stays), got {files}"
                )))
            }
            Int::Value(n) if n <= u128::from(U64_MAX) => Some(n as u64),
            _ => {
                return Err(config_error(format!(
                    "max_files must be at most {U64_MAX}, got {files}"
                )))
            }
        },
    };
    let protect = policy.getattr("protect_unconsumed")?;
    let protect_unconsumed = match protect.cast::<PyBool>() {
        Ok(b) => b.is_true(),
        Err(_) => {
            return Err(PyTypeError::new_err(format!(
                "protect_unconsumed must be True or False, not {}",
                type_name(&protect)
            )))
        }
    };
    Ok((max_age, max_bytes, max_files, protect_unconsumed))
}

/// The engine's policy for a `litemq.Retention` given as `what` (the
/// `retention` option, `apply_retention`'s `policy`).
pub(crate) fn retention(policy: &Bound<'_, PyAny>, what: &str) -> PyResult<RetentionPolicy> {
    let py = policy.py();
    if !policy.is_instance(classes(py)?.retention.bind(py))? {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a litemq.Retention(...), not {}",
            type_name(policy)
        )));
    }
    let (max_age_us, max_bytes, max_files, protect_unconsumed) = retention_fields(policy)?;
    let policy = RetentionPolicy {
        max_age: max_age_us.map(Duration::from_micros),
        max_bytes,
        max_files: max_files.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        protect_unconsumed,
    };
    policy.validate()?;
    Ok(policy)
}
