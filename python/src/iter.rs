//! Streaming over a run's units: an iterator reads a chunk of units under one
//! short read of the run (the GIL released), hands them out one at a time, and
//! reads the next chunk after the last name it saw. Memory stays one chunk
//! whatever the run's size; a list is built only when the caller asks for one.

use crate::errors::{self, IntoPy};
use crate::objects::Unit;
use pyo3::prelude::*;
use runlog::run::{self, RunError, RunView, UnitStatus};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Weak};

/// Units handed to Python per read of the run.
const CHUNK: usize = 1024;
/// Units looked at per read when filtering by status (bounds the time one read
/// holds the run when few units match).
const SCAN: usize = 16 * CHUNK;

/// What an iterator reads: a writer's live state (held weakly, so an iterator
/// never keeps a closed run's lock) or a lock-free read.
#[derive(Clone)]
pub enum Source {
    Write(Weak<run::Run>, String),
    Read(Arc<run::RunRead>),
}

impl Source {
    /// Runs `f` on the current view; fails when the run was closed.
    pub fn with_view<R>(&self, f: impl FnOnce(&RunView<'_>) -> R) -> PyResult<R> {
        match self {
            Source::Read(r) => Ok(f(&r.view())),
            Source::Write(w, id) => match w.upgrade() {
                Some(run) => Ok(run.read(f)),
                None => Err(errors::error(format!("run {id} is closed"))),
            },
        }
    }
}

/// Where the next chunk begins.
#[derive(Clone)]
enum Pos {
    /// At this name, inclusive (the `start` given).
    From(String),
    /// Just after this name (the last one read).
    After(String),
}

/// One chunk: units from `pos` on whose status is `filter` (all with `None`),
/// where the next chunk begins, and whether the run ended.
type Chunk = (Vec<(String, run::Unit)>, Option<Pos>, bool);

fn read_chunk(
    view: &RunView<'_>,
    pos: Option<&Pos>,
    filter: Option<UnitStatus>,
) -> Result<Chunk, RunError> {
    let (start, skip) = match pos {
        None => (None, None),
        Some(Pos::From(s)) => (Some(s.as_str()), None),
        Some(Pos::After(s)) => (Some(s.as_str()), Some(s.as_str())),
    };
    let mut out = Vec::new();
    let mut next = pos.cloned();
    let mut scanned = 0;
    for entry in view.units_from(start) {
        let (name, unit) = entry?;
        // `units_from` is inclusive: the last name of a chunk comes again.
        if skip == Some(name.as_str()) {
            continue;
        }
        scanned += 1;
        next = Some(Pos::After(name.clone()));
        if filter.is_none_or(|f| unit.status == f) {
            out.push((name, unit));
        }
        if out.len() >= CHUNK || scanned >= SCAN {
            return Ok((out, next, false));
        }
    }
    Ok((out, next, true))
}

/// An iterator over a run's units in name order, read as it goes. Yields
/// `Unit` objects (or names, for `ResumeSet.skip`).
#[pyclass(module = "runlog")]
pub struct UnitIter {
    source: Source,
    filter: Option<UnitStatus>,
    names_only: bool,
    buf: VecDeque<(String, run::Unit)>,
    pos: Option<Pos>,
    ended: bool,
}

impl UnitIter {
    pub fn new(
        source: Source,
        start: Option<String>,
        filter: Option<UnitStatus>,
        names_only: bool,
    ) -> UnitIter {
        UnitIter {
            source,
            filter,
            names_only,
            buf: VecDeque::new(),
            pos: start.map(Pos::From),
            ended: false,
        }
    }
}

#[pymethods]
impl UnitIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(mut slf: PyRefMut<'_, Self>, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        // A filtered chunk can come back empty (SCAN units looked at, none
        // matching): read on until a unit or the end.
        while slf.buf.is_empty() && !slf.ended {
            let source = slf.source.clone();
            let pos = slf.pos.clone();
            let filter = slf.filter;
            let (units, next, ended) = py
                .detach(move || source.with_view(|v| read_chunk(v, pos.as_ref(), filter)))?
                .py_err()?;
            slf.buf.extend(units);
            slf.pos = next;
            slf.ended = ended;
        }
        let Some((name, unit)) = slf.buf.pop_front() else {
            return Ok(None);
        };
        if slf.names_only {
            Ok(Some(name.into_pyobject(py)?.into_any().unbind()))
        } else {
            Ok(Some(Py::new(py, Unit::new(name, unit))?.into_any()))
        }
    }
}

/// The names of the done units, listed as they are iterated (`ResumeSet.skip`):
/// `len()` and `in` answer without listing them; `list(skip)` builds the list.
#[pyclass(module = "runlog", frozen)]
pub struct UnitNames {
    source: Source,
    len: u64,
}

#[pymethods]
impl UnitNames {
    fn __len__(&self) -> usize {
        self.len as usize
    }

    fn __iter__(&self) -> UnitIter {
        UnitIter::new(self.source.clone(), None, Some(UnitStatus::Done), true)
    }

    fn __contains__(&self, py: Python<'_>, name: String) -> PyResult<bool> {
        let source = self.source.clone();
        py.detach(move || source.with_view(|v| v.unit(&name)))?
            .py_err()
            .map(|u| u.is_some_and(|u| u.status == UnitStatus::Done))
    }

    fn __repr__(&self) -> String {
        format!("<{} done units, listed as iterated>", self.len)
    }
}

/// Unit names back to back in one buffer, each found by where it ends: a
/// name costs its bytes and one offset, not a `String` of its own (10M
/// names of 11 bytes: 190 MB, against about 560 MB as `Vec<String>`).
#[derive(Default, PartialEq, Eq)]
pub struct Packed {
    text: String,
    ends: Vec<usize>,
}

impl Packed {
    pub fn push(&mut self, name: &str) {
        self.text.push_str(name);
        self.ends.push(self.text.len());
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = i.checked_sub(1).map_or(0, |j| self.ends[j]);
        self.text.get(start..end)
    }

    fn iter(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

/// A list of unit names kept on the Rust side: `len()`, indexing, `in`,
/// iteration and `==` against a list work without building a Python list
/// (`list(names)` builds one).
#[pyclass(module = "runlog", frozen, sequence)]
pub struct Names {
    names: Arc<Packed>,
}

#[pymethods]
impl Names {
    fn __len__(&self) -> usize {
        self.names.len()
    }

    fn __getitem__(&self, i: isize) -> PyResult<String> {
        let n = self.names.len() as isize;
        let j = if i < 0 { i + n } else { i };
        match (0..n).contains(&j).then(|| self.names.get(j as usize)) {
            Some(Some(name)) => Ok(name.to_string()),
            _ => Err(pyo3::exceptions::PyIndexError::new_err(
                "index out of range",
            )),
        }
    }

    fn __contains__(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    fn __iter__(&self) -> NamesIter {
        NamesIter {
            names: self.names.clone(),
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        if let Ok(o) = other.cast::<Names>() {
            return o.get().names == self.names;
        }
        // A str is a sequence of one-char strs: never equal to a list of names.
        if other.is_instance_of::<pyo3::types::PyString>() {
            return false;
        }
        other.extract::<Vec<String>>().is_ok_and(|o| {
            o.len() == self.names.len() && o.iter().zip(self.names.iter()).all(|(a, b)| a == b)
        })
    }

    fn __repr__(&self) -> String {
        const SHOWN: usize = 10;
        let head: Vec<String> = self
            .names
            .iter()
            .take(SHOWN)
            .map(|n| format!("{n:?}"))
            .collect();
        let more = self.names.len().saturating_sub(SHOWN);
        match more {
            0 => format!("Names([{}])", head.join(", ")),
            m => format!("Names([{}, ... {m} more])", head.join(", ")),
        }
    }
}

/// Iterates a `Names`.
#[pyclass(module = "runlog", frozen)]
pub struct NamesIter {
    names: Arc<Packed>,
    next: std::sync::atomic::AtomicUsize,
}

#[pymethods]
impl NamesIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self) -> Option<String> {
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.names.get(i).map(str::to_string)
    }
}

/// What a resumed run skips, runs, and holds back.
#[pyclass(module = "runlog", frozen)]
pub struct ResumeSet {
    eligible: Py<Names>,
    /// Not-done units with a not-done dependency → the units at the root of
    /// what blocks them.
    #[pyo3(get)]
    dep_blocked: BTreeMap<String, Vec<String>>,
    skip: Py<UnitNames>,
}

#[pymethods]
impl ResumeSet {
    /// Not-done units whose every dependency is done, in name order: run
    /// these. A `Names` (a list kept in Rust).
    #[getter]
    fn eligible(&self, py: Python<'_>) -> Py<Names> {
        self.eligible.clone_ref(py)
    }

    /// The done units to skip: iterable (streamed), with `len()` and `in`.
    #[getter]
    fn skip(&self, py: Python<'_>) -> Py<UnitNames> {
        self.skip.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        format!(
            "ResumeSet(eligible={}, dep_blocked={}, skip=<streamed>)",
            self.eligible.get().names.len(),
            self.dep_blocked.len()
        )
    }
}

/// The resume set of `source`: eligible and held-back units computed in Rust
/// (memory: the units held back, and the eligible names packed), done ones
/// streamed.
pub fn resume(py: Python<'_>, source: Source) -> PyResult<ResumeSet> {
    let s = source.clone();
    let (dep_blocked, eligible, done) = py
        .detach(move || {
            s.with_view(|v| {
                let mut eligible = Packed::default();
                let held = v.resume_streamed(&mut |n| eligible.push(&n))?;
                Ok::<_, RunError>((held, eligible, v.counts().done))
            })
        })?
        .py_err()?;
    Ok(ResumeSet {
        eligible: Py::new(
            py,
            Names {
                names: Arc::new(eligible),
            },
        )?,
        dep_blocked,
        skip: Py::new(py, UnitNames { source, len: done })?,
    })
}
