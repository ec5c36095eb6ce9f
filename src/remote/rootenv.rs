//! Runs whose remote comes from the environment: with `RUNLOG_REMOTE_ROOT`
//! set (`s3://bucket/runs`, `file:///dir`), run `ID` lives remotely at
//! `<root>/<ID>`. Opening a run whose local directory is missing restores it
//! from there first (a new host); a run created with the variable set is
//! attached to it (policy from `RUNLOG_REMOTE_POLICY`: `sync`, the default, or
//! `async`).

use super::client::Remote;
use super::config::{Policy, REMOTE_FILE, RemoteConfig};
use super::error::Result;
use super::restore::restore;
use super::shipper::latest_manifest;
use crate::engine::{Key, RealFs};
use std::path::Path;

/// The variable naming the remote root of every run.
pub const ENV_REMOTE_ROOT: &str = "RUNLOG_REMOTE_ROOT";
/// The variable naming the policy of runs attached through it.
pub const ENV_REMOTE_POLICY: &str = "RUNLOG_REMOTE_POLICY";

/// The remote config run `id` gets from the environment, if any.
pub fn env_config(id: &str) -> Result<Option<RemoteConfig>> {
    let Some(root) = std::env::var(ENV_REMOTE_ROOT)
        .ok()
        .filter(|r| !r.is_empty())
    else {
        return Ok(None);
    };
    let policy = match std::env::var(ENV_REMOTE_POLICY) {
        Ok(p) if !p.is_empty() => Policy::parse(&p)?,
        _ => Policy::Sync,
    };
    Ok(Some(RemoteConfig {
        url: format!("{}/{id}", root.trim_end_matches('/')),
        policy,
        epoch: 0,
    }))
}

/// Before run `id` is opened at `dir`: a missing directory whose remote holds
/// the run is restored (true); a run about to be created is attached by
/// writing its `REMOTE` file once the directory exists (see [`attach_env`]).
pub fn restore_if_missing(dir: &Path, id: &str, key: Option<&Key>) -> Result<bool> {
    if dir.exists() {
        return Ok(false);
    }
    let Some(config) = env_config(id)? else {
        return Ok(false);
    };
    let remote = Remote::open(&config.url)?;
    if latest_manifest(&remote)?.is_none() {
        return Ok(false);
    }
    restore(&RealFs, &remote, dir, key)?;
    config.write(&RealFs, dir)?;
    Ok(true)
}

/// Whether run `id` in `dir` ships to a remote: its `REMOTE` file, or one
/// `$RUNLOG_REMOTE_ROOT` would give it (an unreadable setting counts as one).
pub fn configured(dir: &Path, id: &str) -> bool {
    dir.join(REMOTE_FILE).exists() || !matches!(env_config(id), Ok(None))
}

/// After run `id` was opened at `dir`: attaches the environment's remote when
/// the run has none yet.
pub fn attach_env(dir: &Path, id: &str) -> Result<()> {
    if dir.join(REMOTE_FILE).exists() {
        return Ok(());
    }
    match env_config(id)? {
        Some(config) => config.write(&RealFs, dir),
        None => Ok(()),
    }
}
