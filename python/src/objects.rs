//! The read-only objects the package returns: `Unit`, `Counts`, `Status`,
//! `RunSummary`, `StartWarning`. Each wraps the Rust value and converts a field
//! when it is read (statuses to enums, timestamps to `datetime`).

use crate::convert::{self, Enum};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use runlog::run;

/// One unit of work, as read.
#[pyclass(module = "runlog", frozen)]
pub struct Unit {
    name: String,
    unit: run::Unit,
}

impl Unit {
    pub fn new(name: String, unit: run::Unit) -> Unit {
        Unit { name, unit }
    }
}

#[pymethods]
impl Unit {
    /// The unit's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
    /// Its status (a `UnitStatus`).
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::status(py, Enum::Unit, self.unit.status.as_str())
    }
    /// The units it depends on.
    #[getter]
    fn deps(&self) -> Vec<String> {
        self.unit.depends_on.clone()
    }
    /// Its note ("" when none).
    #[getter]
    fn note(&self) -> &str {
        &self.unit.note
    }
    /// How many times it went to `in_progress`.
    #[getter]
    fn attempts(&self) -> u32 {
        self.unit.attempts
    }
    /// Where its result is kept, when a driver put it in an object store
    /// (FORMAT.md §12.2): a dict with `store`, `name`, `len`, `digest`,
    /// `kind`, `attempt` and `claim` (None where not recorded); None unless
    /// the unit is done and its note records one.
    #[getter]
    fn output<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, pyo3::types::PyDict>>> {
        let Some(o) = self.unit.output() else {
            return Ok(None);
        };
        let d = pyo3::types::PyDict::new(py);
        d.set_item("store", o.store)?;
        d.set_item("name", o.name)?;
        d.set_item("len", o.len)?;
        d.set_item("digest", o.digest)?;
        d.set_item("kind", o.kind)?;
        d.set_item("attempt", o.attempt)?;
        d.set_item("claim", o.claim)?;
        Ok(Some(d))
    }
    /// When it was added.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::datetime(py, &self.unit.created_at)
    }
    /// When it last changed.
    #[getter]
    fn updated_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::datetime(py, &self.unit.updated_at)
    }
    /// When it last went to `in_progress` (None if never).
    #[getter]
    fn started_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::opt_datetime(py, self.unit.started_at.as_deref())
    }
    /// When it went to `done` (None if not done).
    #[getter]
    fn finished_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::opt_datetime(py, self.unit.finished_at.as_deref())
    }
    fn __repr__(&self) -> String {
        format!(
            "Unit(name={:?}, status={:?}, attempts={})",
            self.name,
            self.unit.status.as_str(),
            self.unit.attempts
        )
    }
}

/// How many units have each status.
#[pyclass(module = "runlog", frozen, eq)]
#[derive(PartialEq)]
pub struct Counts {
    /// Units `pending`.
    #[pyo3(get)]
    pending: u64,
    /// Units `in_progress`.
    #[pyo3(get)]
    in_progress: u64,
    /// Units `done`.
    #[pyo3(get)]
    done: u64,
    /// Units `blocked`.
    #[pyo3(get)]
    blocked: u64,
    /// Units `dep_blocked`.
    #[pyo3(get)]
    dep_blocked: u64,
}

impl From<run::UnitCounts> for Counts {
    fn from(c: run::UnitCounts) -> Counts {
        Counts {
            pending: c.pending,
            in_progress: c.in_progress,
            done: c.done,
            blocked: c.blocked,
            dep_blocked: c.dep_blocked,
        }
    }
}

#[pymethods]
impl Counts {
    /// Units in all.
    #[getter]
    fn total(&self) -> u64 {
        self.pending + self.in_progress + self.done + self.blocked + self.dep_blocked
    }
    fn __repr__(&self) -> String {
        format!(
            "Counts(pending={}, in_progress={}, done={}, blocked={}, dep_blocked={})",
            self.pending, self.in_progress, self.done, self.blocked, self.dep_blocked
        )
    }
}

/// A run's state without its units: what `run.status()` returns.
#[pyclass(module = "runlog", frozen)]
pub struct Status {
    doc: run::RunDoc,
    counts: run::UnitCounts,
}

impl Status {
    pub fn new(doc: run::RunDoc, counts: run::UnitCounts) -> Status {
        Status { doc, counts }
    }
}

#[pymethods]
impl Status {
    /// The run id.
    #[getter]
    fn id(&self) -> &str {
        &self.doc.id
    }
    /// What the run does.
    #[getter]
    fn task(&self) -> &str {
        &self.doc.task
    }
    /// Its status (a `RunStatus`).
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::status(py, Enum::Run, self.doc.status.as_str())
    }
    /// True once finalized: the run accepts no further transition.
    #[getter]
    fn closed(&self) -> bool {
        self.doc.is_closed()
    }
    /// When it was created.
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::datetime(py, &self.doc.created_at)
    }
    /// When it last changed.
    #[getter]
    fn updated_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::datetime(py, &self.doc.updated_at)
    }
    /// When it was finalized (None while running).
    #[getter]
    fn finished_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::opt_datetime(py, self.doc.finished_at.as_deref())
    }
    /// The result given to `finalize` (None before).
    #[getter]
    fn result(&self) -> Option<&str> {
        self.doc.result.as_deref()
    }
    /// Unit counts by status.
    #[getter]
    fn counts(&self) -> Counts {
        self.counts.into()
    }
    /// Phase name → its `PhaseStatus`.
    #[getter]
    fn phases<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, p) in &self.doc.phases {
            d.set_item(name, convert::status(py, Enum::Phase, p.status.as_str())?)?;
        }
        Ok(d)
    }
    /// Open items: dicts with `id`, `at` and `item` (the value given).
    #[getter]
    fn open_items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::from_json(py, &self.doc.open_items)
    }
    /// Resolved items: dicts with `id`, `at`, `item`, `resolvedAt`, `note`.
    #[getter]
    fn resolved_items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::from_json(py, &self.doc.resolved_items)
    }
    /// Budget name → dict with `limit`, `owner`, `spent`, `exhaustedAt`.
    #[getter]
    fn budgets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::from_json(py, &self.doc.budgets)
    }
    /// The fingerprint the run was started with.
    #[getter]
    fn fingerprint(&self) -> std::collections::BTreeMap<String, String> {
        self.doc.fingerprint.clone()
    }
    /// The header as a dict (the JSON document's fields, `units` empty).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::from_json(py, &self.doc)
    }
    fn __repr__(&self) -> String {
        format!(
            "Status(id={:?}, status={:?}, done={}/{})",
            self.doc.id,
            self.doc.status.as_str(),
            self.counts.done,
            self.counts.total()
        )
    }
}

/// One run of `Runs.list()`.
#[pyclass(module = "runlog", frozen)]
pub struct RunSummary {
    s: run::RunSummary,
}

impl From<run::RunSummary> for RunSummary {
    fn from(s: run::RunSummary) -> RunSummary {
        RunSummary { s }
    }
}

#[pymethods]
impl RunSummary {
    /// The run id.
    #[getter]
    fn id(&self) -> &str {
        &self.s.id
    }
    /// Its status (None when the run cannot be read or was never initialized).
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.s.status {
            Some(st) => convert::status(py, Enum::Run, st.as_str()),
            None => Ok(py.None().into_bound(py)),
        }
    }
    /// Its task.
    #[getter]
    fn task(&self) -> &str {
        &self.s.task
    }
    /// When it was created (None when unreadable).
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let ts = Some(self.s.created_at.as_str()).filter(|t| !t.is_empty());
        convert::opt_datetime(py, ts)
    }
    /// Units done.
    #[getter]
    fn units_done(&self) -> usize {
        self.s.units_done
    }
    /// Units in all.
    #[getter]
    fn units_total(&self) -> usize {
        self.s.units_total
    }
    fn __repr__(&self) -> String {
        format!(
            "RunSummary(id={:?}, done={}/{})",
            self.s.id, self.s.units_done, self.s.units_total
        )
    }
}

/// A warning from `Runs.start` (also issued as a `CheckpointDiscarded` warning).
#[pyclass(module = "runlog", frozen)]
pub struct StartWarning {
    /// A stable code, e.g. `"CHECKPOINT_DISCARDED"`.
    #[pyo3(get)]
    code: String,
    /// A sentence for humans.
    #[pyo3(get)]
    message: String,
    /// The fingerprint parts that changed.
    #[pyo3(get)]
    changed: Vec<String>,
    /// Where the discarded run was moved.
    #[pyo3(get)]
    archived_to: String,
}

impl From<run::Warning> for StartWarning {
    fn from(w: run::Warning) -> StartWarning {
        StartWarning {
            code: w.code,
            message: w.message,
            changed: w.changed,
            archived_to: w.archived_to,
        }
    }
}

#[pymethods]
impl StartWarning {
    fn __repr__(&self) -> String {
        format!(
            "StartWarning(code={:?}, changed={:?})",
            self.code, self.changed
        )
    }
}
