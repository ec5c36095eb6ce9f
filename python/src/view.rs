//! `RunView`: reading a run by lookup. `Runs.get` returns one over a lock-free
//! read (the state as of that read); `Run` extends it over the live state it
//! writes. Every read happens with the GIL released.

use crate::convert;
use crate::errors::{self, IntoPy};
use crate::iter::{self, ResumeSet, Source, UnitIter};
use crate::objects::{Counts, Status, Unit};
use pyo3::prelude::*;
use runlog::run::{self, UnitStatus};
use std::sync::{Arc, Mutex};

/// What a view reads.
pub enum Inner {
    /// A lock-free read, owned.
    Read(Arc<run::RunRead>),
    /// A run open for writing; `None` once closed (the lock released).
    Write(Mutex<Option<Arc<run::Run>>>),
}

/// A run read by lookup: its status and counts at once, one unit by name,
/// every unit by (streaming) iteration. From `Runs.get` it shows the run as
/// of that call, read without a lock; a `Run` shows its live state.
#[pyclass(module = "runlog", subclass, frozen)]
pub struct RunView {
    pub id: String,
    pub inner: Inner,
}

impl RunView {
    /// The open writer, or `runlog.Error` when the run was closed.
    pub fn writer(&self) -> PyResult<Arc<run::Run>> {
        match &self.inner {
            Inner::Write(slot) => lock(slot)
                .clone()
                .ok_or_else(|| errors::error(format!("run {} is closed", self.id))),
            Inner::Read(_) => Err(errors::error(format!(
                "run {} was opened read-only (Runs.get); use Runs.open to write",
                self.id
            ))),
        }
    }

    /// What iterators and reads use.
    pub fn source(&self) -> PyResult<Source> {
        match &self.inner {
            Inner::Read(r) => Ok(Source::Read(r.clone())),
            Inner::Write(_) => Ok(Source::Write(
                Arc::downgrade(&self.writer()?),
                self.id.clone(),
            )),
        }
    }
}

/// Locks the writer slot (a poisoned lock still holds a valid `Option`).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[pymethods]
impl RunView {
    /// The run id.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// The run's state without its units: status, task, timestamps, counts,
    /// phases, items, budgets, fingerprint.
    fn status(&self, py: Python<'_>) -> PyResult<Status> {
        let s = self.source()?;
        let (doc, counts) = py.detach(move || s.with_view(|v| (v.header().clone(), v.counts())))?;
        Ok(Status::new(doc, counts))
    }

    /// One unit by name (a lookup), or None when the run has no such unit.
    fn unit_status(&self, py: Python<'_>, name: String) -> PyResult<Option<Unit>> {
        let s = self.source()?;
        let u = py.detach(move || s.with_view(|v| v.unit(&name).map(|u| (name, u))))?;
        let (name, u) = u.py_err()?;
        Ok(u.map(|u| Unit::new(name, u)))
    }

    /// How many units have each status.
    fn counts(&self, py: Python<'_>) -> PyResult<Counts> {
        let s = self.source()?;
        Ok(py.detach(move || s.with_view(|v| v.counts()))?.into())
    }

    /// Every unit in name order, from `start` (inclusive) on, only those with
    /// `status` when given. Streams: units are read a chunk at a time.
    #[pyo3(signature = (start=None, status=None))]
    fn iter_units(
        &self,
        start: Option<String>,
        status: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<UnitIter> {
        let filter = status
            .map(|s| convert::parse::<UnitStatus>("status", s))
            .transpose()?;
        Ok(UnitIter::new(self.source()?, start, filter, false))
    }

    /// Iterates every unit (as `iter_units()`).
    fn __iter__(&self) -> PyResult<UnitIter> {
        Ok(UnitIter::new(self.source()?, None, None, false))
    }

    /// The number of units.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let s = self.source()?;
        Ok(py.detach(move || s.with_view(|v| v.counts().total()))? as usize)
    }

    /// What a resumed run skips, runs, and holds back: `.eligible` (list),
    /// `.dep_blocked` (dict), `.skip` (streamed; `len()` and `in` work).
    fn resume(&self, py: Python<'_>) -> PyResult<ResumeSet> {
        iter::resume(py, self.source()?)
    }

    /// The whole run document as a dict, units included: memory in
    /// proportion to the run (use `iter_units` on a large one).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = self.source()?;
        let doc = py.detach(move || s.with_view(|v| v.to_doc()))?.py_err()?;
        convert::from_json(py, &doc)
    }

    fn __repr__(&self) -> String {
        let kind = match &self.inner {
            Inner::Read(_) => "read",
            Inner::Write(slot) if lock(slot).is_some() => "open",
            Inner::Write(_) => "closed",
        };
        format!("<runlog run {:?} ({kind})>", self.id)
    }
}
