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
use crate::engine::{RealFs, Vfs};
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
