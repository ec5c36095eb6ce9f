//! `Runs`: a runs root, found the way the CLI finds it, and the calls that
//! open, create and list the runs under it.

use crate::convert;
use crate::errors::{self, IntoPy};
use crate::objects::{RunSummary, StartWarning};
use crate::run::Run;
use crate::view::{Inner, RunView};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use runlog::engine::{Key, SyncPolicy, VerifyReport};
use runlog::run::{self, InitSpec, Launch, RunError};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The variable naming a key file, as the CLI reads it.
const ENV_KEY_FILE: &str = "RUNLOG_KEY_FILE";

/// The runs under a root directory.
///
/// `root`: the runs root; by default `$RUNLOG_DIR`, else the nearest `.runlog/`
/// in the working directory or above it, else `./.runlog` (as the CLI).
/// `lock_wait`: seconds a writer waits for another writer's lock (0: fail at
/// once with `Locked`). `linger`: seconds an fsync leader waits for other
/// writers to join its fsync (None: no wait; try 0.0002 with many threads).
/// `key_file`: the key of tagged (tamper-evident) runs; by default
/// `$RUNLOG_KEY_FILE`.
#[pyclass(module = "runlog", frozen)]
pub struct Runs {
    inner: run::Runs,
}

fn spec(
    call: &str,
    id: String,
    task: String,
    units: Option<&Bound<'_, PyAny>>,
    deps: Option<&Bound<'_, PyAny>>,
    fingerprint: Option<&Bound<'_, PyDict>>,
    launch: Option<&Bound<'_, PyAny>>,
) -> PyResult<InitSpec> {
    let units = match units.filter(|u| !u.is_none()) {
        Some(u) => convert::names(&format!("{call}(units=...)"), u)?,
        None => Vec::new(),
    };
    let mut dep_map = BTreeMap::new();
    if let Some(d) = deps.filter(|d| !d.is_none()) {
        let d = d.cast::<PyDict>().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err(format!(
                "{call}(deps=...) is a dict of unit name -> list of the names it depends on, not {}",
                type_name(d)
            ))
        })?;
        for (k, v) in d.iter() {
            let unit: String = k.extract().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "{call}(deps=...): a key is {}, not a unit name (str)",
                    type_name(&k)
                ))
            })?;
            let on = convert::names(&format!("{call}(deps={{{unit:?}: ...}})"), &v)?;
            dep_map.insert(unit, on);
        }
    }
    let mut fp = BTreeMap::new();
    if let Some(f) = fingerprint {
        for (k, v) in f.iter() {
            // Parts are strings; a number or path is taken as its str().
            fp.insert(k.extract::<String>()?, v.str()?.extract::<String>()?);
        }
    }
    let launch = launch
        .filter(|l| !l.is_none())
        .map(|l| {
            Launch::from_json(&convert::to_json(l)?)
                .map_err(|e| errors::to_pyerr(RunError::Invalid(e)))
        })
        .transpose()?;
    Ok(InitSpec {
        id,
        task,
        units,
        deps: dep_map,
        launch,
        fingerprint: fp,
        ..InitSpec::default()
    })
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map_or_else(|_| "?".into(), |n| n.to_string())
}

#[pymethods]
impl Runs {
    #[new]
    #[pyo3(signature = (root=None, *, lock_wait=30.0, linger=None, key_file=None))]
    fn new(
        root: Option<PathBuf>,
        lock_wait: f64,
        linger: Option<f64>,
        key_file: Option<PathBuf>,
    ) -> PyResult<Runs> {
        let seconds = |what: &str, s: f64| {
            if s.is_finite() && s >= 0.0 {
                Ok(Duration::from_secs_f64(s.min(1e9)))
            } else {
                Err(PyValueError::new_err(format!(
                    "{what} must be a number of seconds ≥ 0, not {s}"
                )))
            }
        };
        let wait = seconds("lock_wait", lock_wait)?;
        let cwd = std::env::current_dir().map_err(|e| {
            PyValueError::new_err(format!("cannot read the working directory: {e}"))
        })?;
        let env = std::env::var(run::Runs::ENV_DIR).ok();
        let root = run::Runs::locate_root(root.as_deref(), env.as_deref(), &cwd);
        let key_file = key_file.or_else(|| {
            std::env::var_os(ENV_KEY_FILE)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        });
        let key = key_file
            .map(|p| Key::from_file(&p))
            .transpose()
            .map_err(|e| {
                errors::to_pyerr(RunError::Invalid(
                    runlog::engine::ErrorChain(&e).to_string(),
                ))
            })?;
        // As the CLI does: the remote root comes from the environment.
        let remote_root = runlog::remote::RemoteRoot::from_env().map_err(|e| {
            errors::to_pyerr(RunError::Invalid(format!(
                "${}: {}",
                runlog::remote::ENV_REMOTE_ROOT,
                runlog::engine::ErrorChain(&e)
            )))
        })?;
        let mut inner = run::Runs::new(root)
            .with_lock_wait(Some(wait))
            .with_key(key)
            .with_remote_root(remote_root);
        if let Some(l) = linger {
            inner = inner.with_sync(SyncPolicy::Grouped {
                linger: seconds("linger", l)?,
            });
        }
        Ok(Runs { inner })
    }

    /// The runs root directory.
    #[getter]
    fn root(&self) -> String {
        self.inner.root().display().to_string()
    }

    /// Restore-or-create run `id`. The live run is restored when its
    /// fingerprint equals `fingerprint`; when it differs the old run is
    /// archived, a fresh one started, and a `CheckpointDiscarded` warning
    /// issued (also in `run.warnings`). A finished run starts fresh (warning
    /// `RUN_FINISHED_STARTED_FRESH`). Each warning's message starts with its
    /// code, and `.code` holds it, as the CLI prints `warning CODE: …`.
    /// Returns the `Run`, open for writing (`run.resumed` says which).
    #[pyo3(signature = (id, *, task=String::new(), units=None, deps=None, fingerprint=None, launch=None))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        py: Python<'_>,
        id: String,
        task: String,
        units: Option<&Bound<'_, PyAny>>,
        deps: Option<&Bound<'_, PyAny>>,
        fingerprint: Option<&Bound<'_, PyDict>>,
        launch: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Run>> {
        let spec = spec("start", id, task, units, deps, fingerprint, launch)?;
        let runs = self.inner.clone();
        let started = py.detach(move || runs.start(spec)).py_err()?;
        let mut warnings = Vec::new();
        for w in &started.warnings {
            errors::warn_started(py, w)?;
        }
        for w in started.warnings {
            warnings.push(Py::new(py, StartWarning::from(w))?);
        }
        Run::create(py, started.run, started.resumed, warnings)
    }

    /// Creates run `id`; `Refused` when a live run with that id exists (a
    /// finished one is archived first). Returns the `Run`, open for writing.
    #[pyo3(signature = (id, *, task=String::new(), units=None, deps=None, fingerprint=None, launch=None))]
    #[allow(clippy::too_many_arguments)]
    fn init(
        &self,
        py: Python<'_>,
        id: String,
        task: String,
        units: Option<&Bound<'_, PyAny>>,
        deps: Option<&Bound<'_, PyAny>>,
        fingerprint: Option<&Bound<'_, PyDict>>,
        launch: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Run>> {
        let spec = spec("init", id, task, units, deps, fingerprint, launch)?;
        let runs = self.inner.clone();
        let run = py.detach(move || runs.init(spec)).py_err()?;
        Run::create(py, run, false, Vec::new())
    }

    /// Opens existing run `id` for writing, waiting up to `lock_wait` for
    /// the lock (`Locked` after that; `NotFound` when there is no such run).
    fn open(&self, py: Python<'_>, id: String) -> PyResult<Py<Run>> {
        let runs = self.inner.clone();
        let run = py.detach(move || runs.open(&id)).py_err()?;
        Run::create(py, run, true, Vec::new())
    }

    /// One unit transition on run `id` as a one-shot writer (FORMAT.md §5.8),
    /// with the GIL released: the run's writer lock is held only while the
    /// log is replayed up to date and the record written, and the fdatasync
    /// is shared with the other processes and threads writing the run this
    /// way. Returns the seq once durable. For many processes (or threads)
    /// each checkpointing now and then; a process writing a stream holds a
    /// `Run` from `open` instead. While a server holds the run (`runlog
    /// serve`, or `Runs.serve` in another process), the change is handed to
    /// it, which applies it (FORMAT.md §5.9); its errors are the same
    /// exceptions as applied here (`Refused` with its rule, `Corrupt`, …).
    #[pyo3(signature = (id, name, status, note=None, deps=None))]
    fn unit(
        &self,
        py: Python<'_>,
        id: String,
        name: String,
        status: &Bound<'_, PyAny>,
        note: Option<String>,
        deps: Option<Vec<String>>,
    ) -> PyResult<u64> {
        let status = convert::parse::<runlog::run::UnitStatus>("status", status)?;
        let change = run::Change::Unit {
            unit: name,
            status,
            note,
            deps,
        };
        let runs = self.inner.clone();
        py.detach(move || runs.change(&id, change)).py_err()
    }

    /// Serves run `id` to other processes' one-shot writers (`Runs.unit`,
    /// `runlog unit`, …), as `runlog serve` does, on a thread of its own:
    /// takes the writer lock (waiting up to `lock_wait`), binds the run's
    /// socket, and returns the running `Server`. Their changes share its
    /// fdatasyncs; `commit_delay` (0 to 0.1 s) holds a batch while another
    /// connection is open so that more share one. It stops on `stop()`
    /// (or at the end of a `with` block), after `idle` seconds without a
    /// connection, or when a change fails. A tagged run is not served
    /// (`Refused`).
    #[pyo3(signature = (id, commit_delay=0.0, idle=None))]
    fn serve(
        &self,
        py: Python<'_>,
        id: String,
        commit_delay: f64,
        idle: Option<f64>,
    ) -> PyResult<crate::server::Server> {
        crate::server::serve(py, self.inner.clone(), id, commit_delay, idle)
    }

    /// Reads run `id` without a lock and without changing anything: a
    /// `RunView` of the run as of this call.
    fn get(&self, py: Python<'_>, id: String) -> PyResult<RunView> {
        let runs = self.inner.clone();
        let read = py.detach(move || runs.read_run(&id)).py_err()?;
        Ok(RunView {
            id: read.id().to_string(),
            inner: Inner::Read(Arc::new(read)),
        })
    }

    /// Every run under the root, newest first (`RunSummary` objects).
    fn list(&self, py: Python<'_>) -> PyResult<Vec<RunSummary>> {
        let runs = self.inner.clone();
        let list = py.detach(move || runs.list()).py_err()?;
        Ok(list.into_iter().map(RunSummary::from).collect())
    }

    /// The id a unique prefix names (an exact id wins).
    fn resolve(&self, py: Python<'_>, prefix: String) -> PyResult<String> {
        let runs = self.inner.clone();
        py.detach(move || runs.resolve(&prefix)).py_err()
    }

    /// Checks every file of run `id` without a lock and without changing
    /// anything, as `runlog verify` does: a dict with `integrity` ("clean",
    /// "torn_tail", "append_in_progress", "corrupt" or "tampered"),
    /// `last_seq`, for a tail its `path`, `offset`, `bytes` and `reason`, for
    /// damage its `path`, `offset`, `seq` and `reason`, and the lists `snapshot_fallbacks`,
    /// `leftovers` and `quarantined`, and `torn_tail` (a dict or None).
    fn verify<'py>(&self, py: Python<'py>, id: String) -> PyResult<Bound<'py, PyDict>> {
        let runs = self.inner.clone();
        let r = py.detach(move || runs.verify(&id)).py_err()?;
        verify_dict(py, &r)
    }

    /// Removes finished runs (and archived ones) older than `keep_days` days;
    /// returns the ids removed.
    fn gc(&self, py: Python<'_>, keep_days: u64) -> PyResult<Vec<String>> {
        let runs = self.inner.clone();
        let report = py.detach(move || runs.gc(keep_days)).py_err()?;
        Ok(report.removed)
    }

    fn __repr__(&self) -> String {
        format!("Runs({:?})", self.inner.root().display().to_string())
    }
}

/// `Runs.verify`'s dict of a verify report: the library's serialized
/// report (what `runlog verify --json` prints), its keys in snake_case.
fn verify_dict<'py>(py: Python<'py>, r: &VerifyReport) -> PyResult<Bound<'py, PyDict>> {
    let v = serde_json::to_value(r)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    let d = convert::from_json(py, &snake_keys(v))?;
    Ok(d.cast_into::<PyDict>()?)
}

/// `v` with every object key in snake_case (`lastSeq` → `last_seq`).
fn snake_keys(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let mut snake = String::with_capacity(k.len() + 4);
                    for c in k.chars() {
                        if c.is_ascii_uppercase() {
                            snake.push('_');
                            snake.push(c.to_ascii_lowercase());
                        } else {
                            snake.push(c);
                        }
                    }
                    (snake, snake_keys(v))
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(snake_keys).collect()),
        other => other,
    }
}
