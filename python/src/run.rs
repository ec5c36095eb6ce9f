//! `Run`: a run open for writing, holding its writer lock until `close()` (or
//! the end of a `with` block). Every write is durable (fsync'd) when the call
//! returns, and runs with the GIL released, so Python threads writing one run
//! share its group commit.

use crate::convert;
use crate::errors::{self, IntoPy};
use crate::objects::StartWarning;
use crate::view::{Inner, RunView, lock};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use runlog::run::{self, BudgetSpec, Change, Json, PhaseStatus, RunStatus, UnitStatus};
use std::sync::{Arc, Mutex};

/// A run open for writing (from `Runs.start`, `Runs.init` or `Runs.open`).
/// Also a `RunView` of its live state. Use it in a `with` block, or call
/// `close()`, to release the writer lock.
#[pyclass(module = "runlog", extends = RunView, frozen)]
pub struct Run {
    resumed: bool,
    warnings: Vec<Py<StartWarning>>,
}

impl Run {
    /// A `Run` object over `run`.
    pub fn create(
        py: Python<'_>,
        run: run::Run,
        resumed: bool,
        warnings: Vec<Py<StartWarning>>,
    ) -> PyResult<Py<Run>> {
        let view = RunView {
            id: run.id().to_string(),
            inner: Inner::Write(Mutex::new(Some(Arc::new(run)))),
        };
        Py::new(
            py,
            PyClassInitializer::from(view).add_subclass(Run { resumed, warnings }),
        )
    }
}

fn writer(slf: &Bound<'_, Run>) -> PyResult<Arc<run::Run>> {
    slf.as_super().get().writer()
}

/// Applies one change with the GIL released; returns its seq.
fn apply(slf: &Bound<'_, Run>, change: Change) -> PyResult<u64> {
    let run = writer(slf)?;
    slf.py().detach(move || run.apply(change)).py_err()
}

/// One entry of a `units` batch: `(name, status)`, `(name, status, note)` or a
/// dict with `name`, `status` and optional `note` and `deps`.
fn batch_entry(entry: &Bound<'_, PyAny>) -> PyResult<Change> {
    let bad = || {
        pyo3::exceptions::PyValueError::new_err(
            "each transition is (name, status), (name, status, note) or a dict \
             {\"name\": ..., \"status\": ..., \"note\": ..., \"deps\": [...]}",
        )
    };
    let (name, status, note, deps) = if let Ok(d) = entry.cast::<PyDict>() {
        let name = d.get_item("name")?.ok_or_else(bad)?;
        let status = d.get_item("status")?.ok_or_else(bad)?;
        let note = d.get_item("note")?.filter(|n| !n.is_none());
        let deps = d.get_item("deps")?.filter(|n| !n.is_none());
        (name, status, note, deps)
    } else if let Ok(t) = entry.cast::<PyTuple>() {
        match t.len() {
            2 => (t.get_item(0)?, t.get_item(1)?, None, None),
            3 => (t.get_item(0)?, t.get_item(1)?, Some(t.get_item(2)?), None),
            _ => return Err(bad()),
        }
    } else {
        return Err(bad());
    };
    Ok(Change::Unit {
        unit: name.extract()?,
        status: convert::parse::<UnitStatus>("status", &status)?,
        note: note.map(|n| n.extract()).transpose()?,
        deps: deps.map(|d| d.extract()).transpose()?,
    })
}

/// The `BatchError` for a batch's results (each a seq, or `None` for a unit
/// left as it was), its message naming the first failure in full.
fn batch_error<T: for<'py> IntoPyObject<'py> + Clone>(
    py: Python<'_>,
    results: &[Result<T, run::RunError>],
) -> PyResult<PyErr> {
    let n = results.len();
    let list = PyList::empty(py);
    let mut failed = 0;
    for r in results {
        match r {
            Ok(v) => list.append(v.clone())?,
            Err(e) => {
                failed += 1;
                list.append(errors::exception(py, e)?)?
            }
        }
    }
    let first = results.iter().find_map(|r| r.as_ref().err());
    let msg = format!(
        "{failed} of {n} transitions failed, the others were written; first: {}",
        first.map(errors::message).unwrap_or_default()
    );
    let err = errors::class(py, "BatchError")?.call1((msg, list))?;
    Ok(PyErr::from_value(err))
}

#[pymethods]
impl Run {
    /// True when `Runs.start` restored the live run; False when it started fresh.
    #[getter]
    fn resumed(&self) -> bool {
        self.resumed
    }

    /// Warnings from `Runs.start` (`StartWarning`: its `code`, e.g. `CHECKPOINT_DISCARDED` or `RUN_FINISHED_STARTED_FRESH`).
    #[getter]
    fn warnings(&self, py: Python<'_>) -> Vec<Py<StartWarning>> {
        self.warnings.iter().map(|w| w.clone_ref(py)).collect()
    }

    /// The run's directory.
    #[getter]
    fn dir(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(writer(slf)?.dir().display().to_string())
    }

    /// True once `close()` released the writer lock.
    #[getter]
    fn closed(slf: &Bound<'_, Self>) -> bool {
        match &slf.as_super().get().inner {
            Inner::Write(slot) => lock(slot).is_none(),
            Inner::Read(_) => true,
        }
    }

    /// Sets unit `name` to `status` (adding it when new); `note` and `deps`
    /// replace the unit's when given. Durable when it returns; returns the seq.
    /// Raises `Refused` (nothing written) when the run's rules say no.
    #[pyo3(signature = (name, status, note=None, deps=None))]
    fn unit(
        slf: &Bound<'_, Self>,
        name: String,
        status: &Bound<'_, PyAny>,
        note: Option<String>,
        deps: Option<Vec<String>>,
    ) -> PyResult<u64> {
        let status = convert::parse::<UnitStatus>("status", status)?;
        apply(
            slf,
            Change::Unit {
                unit: name,
                status,
                note,
                deps,
            },
        )
    }

    /// Many unit transitions with one write and one fsync: each entry is
    /// `(name, status)`, `(name, status, note)` or a dict with `name`,
    /// `status`, `note`, `deps`. Each is accepted or refused on its own, in
    /// order. Returns the seqs; when any failed, raises `BatchError`, whose
    /// `results` holds each seq or exception (the accepted ones were written).
    fn units(slf: &Bound<'_, Self>, batch: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
        let mut changes = Vec::new();
        for entry in batch.try_iter()? {
            changes.push(batch_entry(&entry?)?);
        }
        let run = writer(slf)?;
        let py = slf.py();
        let results = py.detach(move || run.apply_batch(changes));
        if results.iter().all(Result::is_ok) {
            return Ok(results.into_iter().flatten().collect());
        }
        Err(batch_error(py, &results)?)
    }

    /// Marks `names` in progress with one write and one fsync, leaving out
    /// the units already done: the call a resumed program repeats unchanged
    /// (`unit(name, "in_progress")` on a done unit is refused). Returns the
    /// names now in progress, in order. When any is refused (a dependency not
    /// done, a closed run), raises `BatchError`, whose `results` holds each
    /// seq, `None` for a unit already done, or the exception.
    fn start_units(slf: &Bound<'_, Self>, names: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let list = convert::names("start_units(names)", names)?;
        let run = writer(slf)?;
        let py = slf.py();
        let asked = list.clone();
        let results = py.detach(move || run.start_units(&asked));
        if results.iter().all(Result::is_ok) {
            return Ok(list
                .into_iter()
                .zip(results)
                .filter(|(_, r)| matches!(r, Ok(run::Claim::Started(_))))
                .map(|(n, _)| n)
                .collect());
        }
        let seqs: Vec<Result<Option<u64>, run::RunError>> = results
            .into_iter()
            .map(|r| {
                r.map(|c| match c {
                    run::Claim::Started(seq) => Some(seq),
                    run::Claim::AlreadyDone => None,
                })
            })
            .collect();
        Err(batch_error(py, &seqs)?)
    }

    /// Sets phase `name` to `status` (a `PhaseStatus` or its string).
    fn phase(slf: &Bound<'_, Self>, name: String, status: &Bound<'_, PyAny>) -> PyResult<u64> {
        let status = convert::parse::<PhaseStatus>("status", status)?;
        apply(
            slf,
            Change::Phase {
                phase: name,
                status,
            },
        )
    }

    /// Adds open items (any JSON-serializable values); each gets an id
    /// `item-<n>`, listed in `status().open_items`.
    #[pyo3(signature = (*items))]
    fn item(slf: &Bound<'_, Self>, items: &Bound<'_, PyTuple>) -> PyResult<u64> {
        let items = items
            .iter()
            .map(|i| convert::to_json(&i).map(Json))
            .collect::<PyResult<Vec<_>>>()?;
        apply(slf, Change::Items { items })
    }

    /// Resolves open item `item_id` (`"item-1"`, …), with an optional note.
    #[pyo3(signature = (item_id, note=None))]
    fn resolve(slf: &Bound<'_, Self>, item_id: String, note: Option<String>) -> PyResult<u64> {
        apply(slf, Change::Resolve { id: item_id, note })
    }

    /// Declares budget `name` (or changes its limit or owner; spending is kept).
    /// `limit=None` tracks spending without a limit.
    #[pyo3(signature = (name, limit=None, owner=String::new()))]
    fn budget(
        slf: &Bound<'_, Self>,
        name: String,
        limit: Option<f64>,
        owner: String,
    ) -> PyResult<u64> {
        apply(
            slf,
            Change::Budget {
                name,
                spec: BudgetSpec { limit, owner },
            },
        )
    }

    /// Records spending `amount` (finite, ≥ 0) against budget `budget`.
    fn spend(slf: &Bound<'_, Self>, budget: String, amount: f64) -> PyResult<u64> {
        apply(slf, Change::Spend { budget, amount })
    }

    /// Saves a whole-state checkpoint (any JSON-serializable value).
    fn checkpoint(slf: &Bound<'_, Self>, state: &Bound<'_, PyAny>) -> PyResult<u64> {
        let state = Json(convert::to_json(state)?);
        apply(slf, Change::Checkpoint { state })
    }

    /// Closes the run with `status` (`done`, `needs_attention` or `aborted`)
    /// (default `done`) and an optional result text. The run accepts nothing after.
    #[pyo3(signature = (status=None, result=None))]
    fn finalize(
        slf: &Bound<'_, Self>,
        status: Option<&Bound<'_, PyAny>>,
        result: Option<String>,
    ) -> PyResult<u64> {
        let status = match status {
            Some(s) => convert::parse::<RunStatus>("status", s)?,
            None => RunStatus::Done,
        };
        apply(slf, Change::Finalize { status, result })
    }

    /// Snapshots the run and trims its log (runs also compact by themselves).
    fn compact(slf: &Bound<'_, Self>) -> PyResult<()> {
        let run = writer(slf)?;
        slf.py().detach(move || run.compact()).py_err().map(drop)
    }

    /// Releases the writer lock. Calls already running finish first; later
    /// writes raise `runlog.Error`. Closing twice does nothing.
    fn close(slf: &Bound<'_, Self>) {
        let taken = match &slf.as_super().get().inner {
            Inner::Write(slot) => lock(slot).take(),
            Inner::Read(_) => None,
        };
        // Dropping the store closes its files: no GIL needed for that.
        slf.py().detach(move || drop(taken));
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(slf: &Bound<'_, Self>, _exc: &Bound<'_, PyTuple>) -> bool {
        Run::close(slf);
        false
    }
}
