//! How a run ships: every process that opens a run for writing loads the run's
//! `REMOTE` file (config.rs) and, after each accepted change is durable
//! locally, hands its seq here. Replication starts at the first accepted
//! change (so an open whose only change is refused claims and writes nothing
//! remotely), then ships as the policy says: `sync` before the change is
//! reported done, `async` in the background and, for a short-lived process,
//! once more when the run is closed.

use super::client::Remote;
use super::config::{Policy, RemoteConfig};
use super::error::Result;
use super::replica::{RemoteStats, Replication};
use super::shipper::latest_manifest;
use crate::engine::{RealFs, Vfs};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A run's remote, as its writer process sees it.
pub struct RunRemote {
    dir: PathBuf,
    config: RemoteConfig,
    rep: Mutex<Option<Replication>>,
}

impl std::fmt::Debug for RunRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RunRemote({})", self.config.url)
    }
}

impl RunRemote {
    /// The remote of the run in `dir` (`None` when it has none).
    pub fn load(dir: &Path) -> Result<Option<RunRemote>> {
        Ok(RemoteConfig::read(&RealFs, dir)?.map(|config| RunRemote {
            dir: dir.to_path_buf(),
            config,
            rep: Mutex::new(None),
        }))
    }

    /// Seqs up to `seq` are durable locally; under `sync`, returns once the
    /// remote holds them. An error means the change is not acknowledged.
    pub fn acknowledged(&self, seq: u64) -> Result<()> {
        let mut g = self.rep.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
            // Re-read: an earlier process may have claimed since this one opened.
            let config =
                RemoteConfig::read(vfs.as_ref(), &self.dir)?.unwrap_or(self.config.clone());
            let remote = Remote::open(&config.url)?;
            *g = Some(Replication::start(vfs, &self.dir, &config, remote)?);
        }
        match g.as_ref() {
            Some(r) => {
                r.check()?;
                r.acknowledged(seq)
            }
            None => Ok(()),
        }
    }

    /// Replication counters, once started.
    pub fn stats(&self) -> Option<RemoteStats> {
        self.rep
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(Replication::stats)
    }

    /// The remote's URL.
    pub fn url(&self) -> &str {
        &self.config.url
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.config.policy
    }
}

impl Drop for RunRemote {
    fn drop(&mut self) {
        let rep = self.rep.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(r) = rep {
            // async: ship what this process acknowledged locally. A failure
            // leaves it for the next writer (the lag `remote status` shows).
            let _ = r.close();
        }
    }
}

/// A run's remote as its directory and the chain head tell it, read without
/// claiming or shipping anything: what `runlog status` and `runlog remote
/// status` show. Under `async`, `lag` is what losing this host would lose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteLag {
    /// The remote's URL.
    pub url: String,
    /// `sync` or `async`.
    pub policy: String,
    /// The epoch this host claimed (0: none yet).
    pub epoch: u64,
    /// The chain head's epoch (0: no chain yet).
    pub head_epoch: u64,
    /// The chain head's manifest number.
    pub manifest: u64,
    /// The highest seq durable locally (as the caller read it).
    pub durable: u64,
    /// The highest seq the remote chain holds.
    pub shipped: u64,
    /// `durable - shipped` (0 when the chain is ahead).
    pub lag: u64,
    /// A newer epoch holds the chain: this host was fenced.
    pub fenced: bool,
}

impl RemoteLag {
    /// The lag of the run in `dir` whose local log is durable through
    /// `durable` (`None` when the run has no remote). Reads the chain head.
    pub fn read(dir: &Path, durable: u64) -> Result<Option<RemoteLag>> {
        Self::read_within(dir, durable, None)
    }

    /// As [`RemoteLag::read`], but when `within` is set the remote must answer
    /// within it: past it, the pending request is dropped and the read fails
    /// with an error saying no answer came within `within` (nothing is left
    /// running). The run's own files are read before the clock matters.
    pub fn read_within(
        dir: &Path,
        durable: u64,
        within: Option<std::time::Duration>,
    ) -> Result<Option<RemoteLag>> {
        let Some(config) = RemoteConfig::read(&RealFs, dir)? else {
            return Ok(None);
        };
        let remote = Remote::open(&config.url)?;
        let remote = match within {
            Some(d) => remote.with_deadline(d),
            None => remote,
        };
        let head = latest_manifest(&remote)?;
        let shipped = head.as_ref().map_or(0, |h| h.shipped);
        let head_epoch = head.as_ref().map_or(0, |h| h.epoch);
        Ok(Some(RemoteLag {
            policy: config.policy.name().into(),
            epoch: config.epoch,
            head_epoch,
            manifest: head.as_ref().map_or(0, |h| h.number),
            durable,
            shipped,
            lag: durable.saturating_sub(shipped),
            fenced: config.epoch > 0 && head_epoch > config.epoch,
            url: config.url,
        }))
    }
}
