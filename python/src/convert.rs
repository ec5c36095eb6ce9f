//! Values across the boundary: statuses as the Python string enums, RFC 3339
//! timestamps as aware `datetime`s, JSON values through the standard `json`
//! module (one encoder, the one users already trust).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyAny;
use runlog::run::SystemClock;
use std::str::FromStr;

static UNIT_STATUS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static RUN_STATUS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static PHASE_STATUS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static DATETIME: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static JSON_DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static JSON_LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Which of the Python enums a status belongs to.
#[derive(Clone, Copy)]
pub enum Enum {
    Unit,
    Run,
    Phase,
}

/// The Python enum member for `value` (`UnitStatus("done")`, …).
pub fn status<'py>(py: Python<'py>, which: Enum, value: &str) -> PyResult<Bound<'py, PyAny>> {
    let (cell, name) = match which {
        Enum::Unit => (&UNIT_STATUS, "UnitStatus"),
        Enum::Run => (&RUN_STATUS, "RunStatus"),
        Enum::Phase => (&PHASE_STATUS, "PhaseStatus"),
    };
    cell.import(py, "runlog._types", name)?.call1((value,))
}

/// Parses a status given as a string or an enum member (a `str` subclass).
pub fn parse<T: FromStr<Err = String>>(what: &str, value: &Bound<'_, PyAny>) -> PyResult<T> {
    let s: String = value
        .extract()
        .map_err(|_| PyValueError::new_err(format!("{what} must be a string or a status enum")))?;
    s.parse::<T>()
        .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// An aware UTC `datetime` from an RFC 3339 timestamp as the run stores it.
pub fn datetime<'py>(py: Python<'py>, ts: &str) -> PyResult<Bound<'py, PyAny>> {
    let ms = SystemClock::parse_rfc3339(ts)
        .ok_or_else(|| PyValueError::new_err(format!("timestamp {ts:?} is not RFC 3339")))?;
    DATETIME
        .import(py, "runlog._types", "_datetime")?
        .call1((ms,))
}

/// `datetime` for an optional timestamp (`None` stays `None`).
pub fn opt_datetime<'py>(py: Python<'py>, ts: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
    match ts {
        Some(ts) => datetime(py, ts),
        None => Ok(py.None().into_bound(py)),
    }
}

/// A Python value (anything `json.dumps` takes) as a JSON value.
pub fn to_json(value: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let py = value.py();
    let text: String = JSON_DUMPS
        .import(py, "json", "dumps")?
        .call1((value,))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| PyValueError::new_err(format!("not JSON: {e}")))
}

/// A JSON value (or anything serializable to one) as a Python value.
pub fn from_json<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(v)
        .map_err(|e| PyValueError::new_err(format!("cannot encode as JSON: {e}")))?;
    JSON_LOADS.import(py, "json", "loads")?.call1((text,))
}

/// A list of unit names given as `what` (`"start(units=...)"`): any iterable
/// of `str` but a single `str`, which would otherwise be taken letter by
/// letter or refused in PyO3's words.
pub fn names(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    use pyo3::exceptions::PyTypeError;
    let type_name = |v: &Bound<'_, PyAny>| {
        v.get_type()
            .name()
            .map_or_else(|_| "?".into(), |n| n.to_string())
    };
    if let Ok(s) = value.extract::<String>() {
        return Err(PyTypeError::new_err(format!(
            "{what} is a list of unit names, not one str: write [{s:?}]"
        )));
    }
    let iter = value.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} is a list of unit names, not {}",
            type_name(value)
        ))
    })?;
    let mut out = Vec::new();
    for (i, item) in iter.enumerate() {
        let item = item?;
        out.push(item.extract::<String>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{what}: item {i} is {}, not a unit name (str)",
                type_name(&item)
            ))
        })?);
    }
    Ok(out)
}
