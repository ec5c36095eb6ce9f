//! `OutputStore`: the object store a driven run's unit outputs go to (the
//! remote tier's client, `runlog::remote::Remote`, over `s3://bucket/prefix`
//! or `file:///dir`). Writes are create-only (`If-None-Match: *` on S3, an
//! atomic create on a directory), so an object, once named, never changes:
//! the digest the `done` transition records is the digest of the only bytes
//! that name will ever hold. Digests are BLAKE3, as the engine's tags.
//! Every call runs with the GIL released.

use crate::errors;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use runlog::remote::{Put, Remote, RemoteError};

/// The prefix of every digest string (`blake3:<64 hex digits>`).
const DIGEST_PREFIX: &str = "blake3:";

/// `bytes`'s digest as outputs record it.
fn digest_of(bytes: &[u8]) -> String {
    format!("{DIGEST_PREFIX}{}", blake3::hash(bytes).to_hex())
}

/// A remote error as a `runlog` exception: damage is `Corrupt` (with the
/// object's name as its `file`), anything else `Error`. The message names
/// the operation and the object, then each cause.
fn to_pyerr(e: RemoteError) -> PyErr {
    let msg = runlog::engine::ErrorChain(&e).to_string();
    Python::attach(|py| {
        let made = match &e {
            RemoteError::Corrupt { object, offset, .. } => errors::class(py, "Corrupt")
                .and_then(|c| c.call1((msg, object.clone(), *offset, py.None()))),
            _ => errors::class(py, "Error").and_then(|c| c.call1((msg,))),
        };
        match made {
            Ok(obj) => PyErr::from_value(obj),
            Err(err) => err,
        }
    })
}

/// An object store for unit outputs: `s3://bucket/prefix` (endpoint and
/// credentials from the `AWS_*` environment, as the remote tier) or
/// `file:///dir` (created if missing, fsync'd writes). Names are relative to
/// the prefix, `/`-separated.
#[pyclass(module = "runlog", frozen)]
pub struct OutputStore {
    remote: Remote,
}

#[pymethods]
impl OutputStore {
    #[new]
    fn new(py: Python<'_>, url: String) -> PyResult<OutputStore> {
        let remote = py.detach(move || Remote::open(&url)).map_err(to_pyerr)?;
        Ok(OutputStore { remote })
    }

    /// The URL it was opened with.
    #[getter]
    fn url(&self) -> &str {
        self.remote.url()
    }

    /// Writes `data` as `name` only if no object has that name. Returns
    /// `(created, length, digest)`: when another write got there first
    /// (`created` False) the existing object is read back (up to `max_len`
    /// bytes) and its own length and digest returned, never `data`'s.
    #[pyo3(signature = (name, data, max_len))]
    fn put_create(
        &self,
        py: Python<'_>,
        name: String,
        data: &[u8],
        max_len: u64,
    ) -> PyResult<(bool, u64, String)> {
        let bytes = data.to_vec();
        let remote = self.remote.clone();
        py.detach(move || {
            let len = bytes.len() as u64;
            let digest = digest_of(&bytes);
            match remote.put_create("put unit output", &name, bytes)? {
                Put::Created => Ok((true, len, digest)),
                Put::Exists => match remote.get("read existing unit output", &name, max_len)? {
                    Some(b) => Ok((false, b.len() as u64, digest_of(&b))),
                    // Created-then-deleted between the two calls (a gc racing a
                    // live attempt): say so rather than describe bytes not there.
                    None => Err(RemoteError::Corrupt {
                        object: format!("{}/{name}", remote.url().trim_end_matches('/')),
                        offset: None,
                        reason: "a create-only put found the object, then a read found none \
                                 (deleted in between: was gc run beside a live drive?)"
                            .to_string(),
                    }),
                },
            }
        })
        .map_err(to_pyerr)
    }

    /// Reads `name` (at most `max_len` bytes, else `Corrupt`); None when absent.
    fn get<'py>(
        &self,
        py: Python<'py>,
        name: String,
        max_len: u64,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let remote = self.remote.clone();
        let got = py
            .detach(move || remote.get("read unit output", &name, max_len))
            .map_err(to_pyerr)?;
        Ok(got.map(|b| PyBytes::new(py, &b)))
    }

    /// The names of the objects under folder `dir` (relative to the prefix), sorted.
    fn list(&self, py: Python<'_>, dir: String) -> PyResult<Vec<String>> {
        let remote = self.remote.clone();
        py.detach(move || remote.list("list unit outputs", &dir))
            .map_err(to_pyerr)
    }

    /// Deletes `name` (absent already is fine).
    fn delete(&self, py: Python<'_>, name: String) -> PyResult<()> {
        let remote = self.remote.clone();
        py.detach(move || remote.delete("delete unit output", &name))
            .map_err(to_pyerr)
    }

    /// The digest outputs record for `data`: `"blake3:<hex>"`.
    #[staticmethod]
    fn digest(py: Python<'_>, data: &[u8]) -> String {
        let bytes = data.to_vec();
        py.detach(move || digest_of(&bytes))
    }

    fn __repr__(&self) -> String {
        format!("OutputStore({:?})", self.remote.url())
    }
}
