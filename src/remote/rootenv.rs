//! Runs whose remote is a common root: with a [`RemoteRoot`] given to
//! `Runs::with_remote_root` (`s3://bucket/runs`, `file:///dir`), run `ID`
//! lives remotely at `<root>/<ID>`. Opening a run whose local directory is
//! missing restores it from there first (a new host); a run created under it
//! is attached to it with the root's policy.
//!
//! The library reads no environment: the CLI and the Python binding build the
//! root from `RUNLOG_REMOTE_ROOT`, `RUNLOG_REMOTE_POLICY` and
//! `RUNLOG_REMOTE_ROUNDS_IN_FLIGHT` with [`RemoteRoot::from_env`].

use super::chain::latest_manifest;
use super::client::Remote;
use super::config::{Policy, REMOTE_FILE, RemoteConfig};
use super::error::{RemoteError, Result};
use super::layout::MAX_ROUNDS_IN_FLIGHT;
use super::restore::restore;
use crate::engine::{Key, RealFs};
use std::path::Path;

/// The variable the CLI and the Python binding read the remote root from.
pub const ENV_REMOTE_ROOT: &str = "RUNLOG_REMOTE_ROOT";
/// The variable they read that root's policy from (`sync`, the default, or `async`).
pub const ENV_REMOTE_POLICY: &str = "RUNLOG_REMOTE_POLICY";
/// The variable they read the rounds in flight of that root's runs from (1
/// to 8; unset: the default, 4).
pub const ENV_REMOTE_ROUNDS_IN_FLIGHT: &str = "RUNLOG_REMOTE_ROUNDS_IN_FLIGHT";

/// The remote root every run of a runs root ships under, and the policy runs
/// attached through it get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRoot {
    url: String,
    policy: Policy,
    rounds_in_flight: Option<u64>,
}

impl RemoteRoot {
    /// The root at `url` (a trailing `/` is dropped) with `policy`.
    pub fn new(url: &str, policy: Policy) -> RemoteRoot {
        RemoteRoot {
            url: url.trim_end_matches('/').to_string(),
            policy,
            rounds_in_flight: None,
        }
    }

    /// The same root, its runs attached with `rounds` in flight (kept in
    /// their `REMOTE` files; clamped to 1..=8, FORMAT.md §13.4).
    pub fn with_rounds_in_flight(mut self, rounds: u64) -> RemoteRoot {
        self.rounds_in_flight = Some(rounds.clamp(1, MAX_ROUNDS_IN_FLIGHT));
        self
    }

    /// The root `RUNLOG_REMOTE_ROOT` names, with `RUNLOG_REMOTE_POLICY`'s
    /// policy and `RUNLOG_REMOTE_ROUNDS_IN_FLIGHT`'s rounds; `None` when the
    /// first is unset or empty. A value that does not parse is an error
    /// naming its variable.
    pub fn from_env() -> Result<Option<RemoteRoot>> {
        let Some(url) = std::env::var(ENV_REMOTE_ROOT)
            .ok()
            .filter(|r| !r.is_empty())
        else {
            return Ok(None);
        };
        let policy = match std::env::var(ENV_REMOTE_POLICY) {
            Ok(p) if !p.is_empty() => Policy::parse(&p).map_err(|e| {
                RemoteError::Config(format!(
                    "${ENV_REMOTE_POLICY}={p:?}: {}",
                    crate::engine::ErrorChain(&e)
                ))
            })?,
            _ => Policy::Sync,
        };
        let root = RemoteRoot::new(&url, policy);
        match std::env::var(ENV_REMOTE_ROUNDS_IN_FLIGHT) {
            Ok(k) if !k.is_empty() => match k.parse::<u64>() {
                Ok(n) if (1..=MAX_ROUNDS_IN_FLIGHT).contains(&n) => {
                    Ok(Some(root.with_rounds_in_flight(n)))
                }
                _ => Err(RemoteError::Config(format!(
                    "${ENV_REMOTE_ROUNDS_IN_FLIGHT}={k:?}: expected 1 to {MAX_ROUNDS_IN_FLIGHT} (FORMAT.md §13.4)"
                ))),
            },
            _ => Ok(Some(root)),
        }
    }

    /// The root's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The remote config run `id` gets under this root.
    pub fn config(&self, id: &str) -> RemoteConfig {
        let mut config = RemoteConfig::new(format!("{}/{id}", self.url), self.policy);
        config.rounds_in_flight = self.rounds_in_flight;
        config
    }
}

/// Before run `id` is opened at `dir`: a missing directory whose remote
/// under `root` holds the run is restored (true); a run about to be created
/// is attached by writing its `REMOTE` file once the directory exists (see
/// [`attach_root`]).
pub fn restore_if_missing(
    dir: &Path,
    id: &str,
    key: Option<&Key>,
    root: Option<&RemoteRoot>,
) -> Result<bool> {
    let Some(root) = root else {
        return Ok(false);
    };
    if dir.exists() {
        return Ok(false);
    }
    let config = root.config(id);
    let remote = Remote::open(&config.url)?;
    if latest_manifest(&remote)?.is_none() {
        return Ok(false);
    }
    restore(&RealFs, &remote, dir, key)?;
    config.write(&RealFs, dir)?;
    Ok(true)
}

/// Whether run `id` in `dir` ships to a remote: its `REMOTE` file, or the
/// remote root's.
pub fn configured(dir: &Path, root: Option<&RemoteRoot>) -> bool {
    root.is_some() || dir.join(REMOTE_FILE).exists()
}

/// After run `id` was opened at `dir`: attaches it under `root` when the run
/// has no remote yet.
pub fn attach_root(dir: &Path, id: &str, root: Option<&RemoteRoot>) -> Result<()> {
    match root {
        Some(root) if !dir.join(REMOTE_FILE).exists() => root.config(id).write(&RealFs, dir),
        _ => Ok(()),
    }
}
