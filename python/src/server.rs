//! A run's server hosted by Python (`Runs.serve`): the library's server
//! (`runlog::run::Server`, the same one `runlog serve` runs) on a thread of
//! its own, so the Python program that starts it goes on. Other processes'
//! `Runs.unit` calls and `runlog unit` hand it their change. Stopped by
//! `stop()` (or leaving its `with` block), after `idle` seconds without a
//! connection, or by a failed change; `stop()` returns how it went.

use crate::errors::IntoPy;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use runlog::run::{ServeReport, Warning};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A run's server, serving on its own thread (`Runs.serve`).
#[pyclass(module = "runlog", frozen)]
pub struct Server {
    socket: String,
    stop: Arc<AtomicBool>,
    warnings: Arc<Mutex<Vec<Warning>>>,
    thread: Mutex<Option<JoinHandle<ServeReport>>>,
    report: Mutex<Option<ServeReport>>,
}

impl Server {
    /// Starts `server` on a thread.
    pub fn start(server: runlog::run::Server, idle: Option<Duration>) -> Server {
        let stop = Arc::new(AtomicBool::new(false));
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let socket = server.socket().display().to_string();
        let thread = {
            let (stop, warnings) = (stop.clone(), warnings.clone());
            std::thread::spawn(move || {
                let asked = || {
                    stop.load(Ordering::SeqCst)
                        .then(|| "stop() was called".to_string())
                };
                let warn = |w: &Warning| {
                    warnings
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(w.clone())
                };
                server.run(idle, &asked, &warn)
            })
        };
        Server {
            socket,
            stop,
            warnings,
            thread: Mutex::new(Some(thread)),
            report: Mutex::new(None),
        }
    }

    /// Stops the server and waits for it (connections greeted are finished
    /// first); the report, kept for later calls.
    fn finish(&self) -> Result<ServeReport, String> {
        self.stop.store(true, Ordering::SeqCst);
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut report = self.report.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = thread {
            *report = Some(
                t.join()
                    .map_err(|_| "the server's thread panicked".to_string())?,
            );
        }
        report
            .clone()
            .ok_or_else(|| "the server's thread panicked".to_string())
    }
}

#[pymethods]
impl Server {
    /// The socket's path (`SERVE` in the run's directory).
    #[getter]
    fn socket(&self) -> String {
        self.socket.clone()
    }

    /// True while the server serves (it stops by itself after `idle` without
    /// a connection, or when a change fails).
    #[getter]
    fn running(&self) -> bool {
        self.thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|t| !t.is_finished())
    }

    /// Stops the server, waits for the connections it greeted, lets the
    /// writer lock go, and returns how it went: `acked` (changes
    /// acknowledged), `connections`, `fsyncs`, `stopped` (why), `failed`
    /// (a change failed: the run accepts no more writes until reopened) and
    /// `warnings` (codes and messages). Calling it again returns the same.
    fn stop<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let report = py
            .detach(|| self.finish())
            .map_err(pyo3::exceptions::PyRuntimeError::new_err)?;
        let d = PyDict::new(py);
        d.set_item("acked", report.acked)?;
        d.set_item("connections", report.connections)?;
        d.set_item("fsyncs", report.fsyncs)?;
        d.set_item("stopped", &report.stopped)?;
        d.set_item("failed", report.failed)?;
        let warnings: Vec<(String, String)> = self
            .warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|w| (w.code.clone(), w.message.clone()))
            .collect();
        d.set_item("warnings", warnings)?;
        Ok(d)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.stop(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "Server(socket={:?}, running={})",
            self.socket,
            self.running()
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A server nobody stopped stops with its object: the lock is let go.
        let _ = self.finish();
    }
}

/// `Runs.serve`: the server of run `id`, bound and serving.
pub fn serve(
    py: Python<'_>,
    runs: runlog::run::Runs,
    id: String,
    commit_delay: f64,
    idle: Option<f64>,
) -> PyResult<Server> {
    let seconds = |name: &str, s: f64| {
        if s.is_finite() && s >= 0.0 {
            Ok(Duration::from_secs_f64(s))
        } else {
            Err(pyo3::exceptions::PyValueError::new_err(format!(
                "{name} must be a number of seconds, 0 or more (got {s})"
            )))
        }
    };
    let delay = seconds("commit_delay", commit_delay)?;
    let idle = idle.map(|s| seconds("idle", s)).transpose()?;
    let server = py.detach(move || runs.serve(&id, delay)).py_err()?;
    Ok(Server::start(server, idle))
}
