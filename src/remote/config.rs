//! How a run remembers its remote: a small JSON file, `REMOTE`, in the run's
//! directory, written (atomically) when the remote is attached and rewritten
//! when a process here claims an epoch. Every process that opens the run for
//! writing reads it and ships, so a one-shot `runlog unit RUN a done` ships
//! as a long-lived writer does. The engine ignores the file.

use super::error::{RemoteError, Result};
use crate::engine::{Vfs, write_file_atomic};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// The file's name in a run directory.
pub const REMOTE_FILE: &str = "REMOTE";
/// A `REMOTE` file larger than this is refused.
pub const MAX_REMOTE_FILE_LEN: u64 = 64 << 10;

/// When an acknowledged record is on the remote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "policy")]
pub enum Policy {
    /// An ack waits for the chunk holding the record and its manifest to be
    /// durable remotely (one round trip shared by every waiter).
    Sync,
    /// An ack comes after the local fsync; a background shipper sends new
    /// records every `interval_ms`. The remote lags by at most what is reported.
    Async {
        /// Milliseconds between shipping rounds.
        #[serde(rename = "intervalMs")]
        interval_ms: u64,
    },
}

impl Policy {
    /// `sync`, or `async` (every second).
    pub fn parse(s: &str) -> Result<Policy> {
        match s {
            "sync" => Ok(Policy::Sync),
            "async" => Ok(Policy::Async { interval_ms: 1000 }),
            other => Err(RemoteError::Config(format!(
                "replication policy {other:?}: expected sync or async"
            ))),
        }
    }

    /// The async interval (zero for sync).
    pub fn interval(&self) -> Duration {
        match self {
            Policy::Sync => Duration::ZERO,
            Policy::Async { interval_ms } => Duration::from_millis(*interval_ms),
        }
    }

    /// `sync` or `async`.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Sync => "sync",
            Policy::Async { .. } => "async",
        }
    }
}

/// The content of a run's `REMOTE` file.
// No `deny_unknown_fields`: serde refuses it beside `flatten`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteConfig {
    /// The remote's URL.
    pub url: String,
    /// The replication policy.
    #[serde(flatten)]
    pub policy: Policy,
    /// The epoch this directory's last writer claimed; 0 until one claims
    /// (every process claims an epoch of its own, FORMAT.md §13.3).
    pub epoch: u64,
    /// This directory's name in the manifests it writes (FORMAT.md §13.6):
    /// 32 hex digits drawn before its first claim; empty until then.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub holder: String,
    /// Ship rounds a writer of this directory keeps in flight, 1 to 8
    /// (FORMAT.md §13.4; `None`: the default, 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds_in_flight: Option<u64>,
}

impl RemoteConfig {
    /// A directory's first `REMOTE`: `url` under `policy`, no epoch claimed
    /// and no holder drawn yet (the first claim draws it).
    pub fn new(url: impl Into<String>, policy: Policy) -> RemoteConfig {
        RemoteConfig {
            url: url.into(),
            policy,
            epoch: 0,
            holder: String::new(),
            rounds_in_flight: None,
        }
    }

    /// Reads `dir/REMOTE` (`None` when absent).
    pub fn read(vfs: &dyn Vfs, dir: &Path) -> Result<Option<RemoteConfig>> {
        let path = dir.join(REMOTE_FILE);
        let bytes = match vfs.read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(crate::engine::Error::io("read remote file", &path, e).into()),
        };
        let bytes: &[u8] = (*bytes).as_ref();
        let corrupt = |offset: u64, reason: String| {
            RemoteError::Local(crate::engine::Error::Corrupt {
                path: path.clone(),
                offset: Some(offset),
                seq: None,
                reason,
            })
        };
        if bytes.len() as u64 > MAX_REMOTE_FILE_LEN {
            return Err(corrupt(
                0,
                format!("{} bytes, more than {MAX_REMOTE_FILE_LEN}", bytes.len()),
            ));
        }
        serde_json::from_slice(bytes)
            .map(Some)
            .map_err(|e| corrupt(e.column() as u64, format!("not a REMOTE file: {e}")))
    }

    /// `remote` with this directory's rounds in flight, when it sets them.
    pub(crate) fn apply(&self, remote: super::Remote) -> super::Remote {
        match self.rounds_in_flight {
            Some(k) => remote.with_rounds_in_flight(k),
            None => remote,
        }
    }

    /// A holder no other directory is likely to draw: 32 hex digits.
    pub(crate) fn draw_holder() -> String {
        format!("{}{}", nonce(), nonce())
    }

    /// Writes `dir/REMOTE` atomically (temp, fsync, rename, fsync dir).
    pub fn write(&self, vfs: &dyn Vfs, dir: &Path) -> Result<()> {
        let mut bytes = serde_json::to_vec(self).unwrap_or_default();
        bytes.push(b'\n');
        write_file_atomic(vfs, dir, REMOTE_FILE, &bytes).map_err(RemoteError::from)
    }
}

/// 16 hex digits no other process is likely to draw.
pub(crate) fn nonce() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    format!("{:016x}", h.finish())
}
