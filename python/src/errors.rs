//! `RunError` → the exceptions of `runlog._errors`: `Refused` (and `NotFound`)
//! when nothing was written because the request was wrong, `Corrupt` and
//! `Tampered` with the file, offset and seq, `Locked` with the holder,
//! `Fenced` with the epochs (the run's remote holds a newer writer), else
//! `Error`. The message is the Rust error's `Display`, cause chain included.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use runlog::engine;
use runlog::remote::RemoteError;
use runlog::run::{self, RunError};

static CLASSES: [PyOnceLock<Py<PyAny>>; 8] = [const { PyOnceLock::new() }; 8];
const NAMES: [&str; 8] = [
    "Error",
    "Refused",
    "NotFound",
    "Corrupt",
    "Tampered",
    "Locked",
    "BatchError",
    "Fenced",
];

/// An exception class of `runlog._errors`, by name.
pub fn class<'py>(py: Python<'py>, name: &str) -> PyResult<&'py Bound<'py, PyAny>> {
    let i = NAMES.iter().position(|n| *n == name).unwrap_or(0);
    CLASSES[i].import(py, "runlog._errors", NAMES[i])
}

/// The message: this error and each cause that adds something (the
/// engine's one chain printer).
pub fn message(e: &RunError) -> String {
    engine::ErrorChain(e).to_string()
}

/// The exception instance for `e` (not raised: [`to_pyerr`] raises it).
pub fn exception<'py>(py: Python<'py>, e: &RunError) -> PyResult<Bound<'py, PyAny>> {
    let msg = message(e);
    let path = |p: &std::path::Path| p.display().to_string();
    match e {
        RunError::NotFound { .. } => class(py, "NotFound")?.call1((msg,)),
        e if e.is_refused() => class(py, "Refused")?.call1((msg,)),
        RunError::Engine { source, .. } => match source {
            engine::Error::Corrupt {
                path: p,
                offset,
                seq,
                ..
            } => class(py, "Corrupt")?.call1((msg, path(p), *offset, *seq)),
            engine::Error::Tampered {
                path: p,
                offset,
                seq,
                ..
            } => class(py, "Tampered")?.call1((msg, path(p), *offset, *seq)),
            engine::Error::Locked {
                path: p, holder, ..
            } => class(py, "Locked")?.call1((msg, path(p), holder.clone())),
            _ => class(py, "Error")?.call1((msg,)),
        },
        RunError::Remote { source, .. } => match &**source {
            RemoteError::Fenced { epoch, newer, .. } => {
                class(py, "Fenced")?.call1((msg, *epoch, *newer))
            }
            _ => class(py, "Error")?.call1((msg,)),
        },
        _ => class(py, "Error")?.call1((msg,)),
    }
}

/// `e` as a raised Python exception.
pub fn to_pyerr(e: RunError) -> PyErr {
    Python::attach(|py| match exception(py, &e) {
        Ok(obj) => PyErr::from_value(obj),
        Err(err) => err,
    })
}

/// A plain `runlog.Error` with `msg` (misuse the run layer cannot see, such
/// as a closed run).
pub fn error(msg: String) -> PyErr {
    Python::attach(
        |py| match class(py, "Error").and_then(|c| c.call1((msg,))) {
            Ok(obj) => PyErr::from_value(obj),
            Err(err) => err,
        },
    )
}

/// `Result<T, RunError>` → `PyResult<T>`.
pub trait IntoPy<T> {
    /// Converts the error.
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, RunError> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_pyerr)
    }
}

static DISCARDED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The `CheckpointDiscarded` warning category.
pub fn discarded(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    DISCARDED.import(py, "runlog._errors", "CheckpointDiscarded")
}

/// The text of a warning of `Runs.start`: `CODE: message`, with the command
/// that brings a finished run back, as the CLI prints it (`runlog: warning
/// CODE: …`, src/cli/commands.rs `warn_all`); the wheel ships that CLI.
pub fn started_text(w: &run::Warning) -> String {
    let archived = std::path::Path::new(&w.archived_to).file_name();
    match archived {
        Some(name) if w.code == run::Warning::RUN_FINISHED_STARTED_FRESH => format!(
            "{}: {}; `runlog archive restore {}` brings it back",
            w.code,
            w.message,
            name.to_string_lossy()
        ),
        _ => format!("{}: {}", w.code, w.message),
    }
}

/// Issues `w` as a `CheckpointDiscarded` warning whose message is
/// [`started_text`] and whose `code`, `changed` and `archived_to` are the
/// library's (so a filter or `-W error` sees which warning it is).
pub fn warn_started(py: Python<'_>, w: &run::Warning) -> PyResult<()> {
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("code", &w.code)?;
    kwargs.set_item("changed", w.changed.clone())?;
    kwargs.set_item("archived_to", &w.archived_to)?;
    let warning = discarded(py)?.call((started_text(w),), Some(&kwargs))?;
    // stacklevel 1: the Python frame that called `Runs.start`.
    py.import("warnings")?
        .call_method1("warn", (warning, py.None(), 1))?;
    Ok(())
}
