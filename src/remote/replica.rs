//! Replication policies over a [`Shipper`]: `sync` (an ack waits for the
//! remote; waiters share rounds) and `async` (a background thread ships every
//! interval; an ack comes after the local fsync). [`Replication`] knows only a
//! store directory and the seqs its caller acknowledged locally;
//! [`Replicated`] pairs it with an engine [`Store`].

use super::client::Remote;
use super::config::{Policy, RemoteConfig};
use super::error::{RemoteError, Result};
use super::shipper::{ShipState, Shipper};
use crate::engine::{Machine, RealFs, Store, Vfs};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Replication's counters: `status --json` and [`Replicated::remote_stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteStats {
    /// The remote's URL.
    pub url: String,
    /// `sync` or `async`.
    pub policy: String,
    /// This writer's epoch.
    pub epoch: u64,
    /// The chain head's manifest number.
    pub manifest: u64,
    /// The highest seq acknowledged locally (durable on this host).
    pub durable: u64,
    /// The highest seq the remote chain holds.
    pub shipped: u64,
    /// `durable - shipped`: what a lost host would lose (async only; 0 under sync).
    pub lag: u64,
    /// Manifests landed.
    pub rounds: u64,
    /// Bytes uploaded.
    pub bytes: u64,
    /// The newer epoch, once fenced.
    pub fenced_by: Option<u64>,
    /// The last shipping error (async), cleared by the next round that lands.
    pub last_error: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Core {
    url: String,
    policy: Policy,
    shipper: Mutex<Shipper>,
    /// Highest seq acknowledged locally.
    durable: AtomicU64,
    /// Mirrors the shipper's state for readers that must not wait on a round.
    state: Mutex<ShipState>,
    last_error: Mutex<Option<String>>,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Core {
    fn fenced(&self) -> Option<RemoteError> {
        let s = lock(&self.state);
        s.fenced_by.map(|newer| RemoteError::Fenced {
            epoch: s.epoch,
            newer,
            manifest: s.manifest,
        })
    }

    /// Ships everything acknowledged so far, unless a round already covered `seq`.
    fn ship_to(&self, seq: u64) -> Result<()> {
        if lock(&self.state).shipped >= seq {
            return Ok(());
        }
        // Waiters queue here; whoever gets the shipper next ships every seq
        // acknowledged by then, so one round covers many waiters.
        let mut s = lock(&self.shipper);
        if s.state().shipped >= seq {
            return Ok(());
        }
        let upto = self.durable.load(Ordering::Acquire).max(seq);
        let r = s.ship(upto);
        *lock(&self.state) = s.state().clone();
        match &r {
            Ok(_) => *lock(&self.last_error) = None,
            Err(e) => *lock(&self.last_error) = Some(crate::engine::ErrorChain(e).to_string()),
        }
        r.map(|_| ())
    }
}

/// Replication of one local store directory.
pub struct Replication {
    core: Arc<Core>,
    thread: Option<JoinHandle<()>>,
}

impl Replication {
    /// Starts replicating `dir` as `config` says: claims an epoch when the
    /// config holds none (and records it in `dir/REMOTE`), else continues as
    /// the writer of the recorded epoch ([`RemoteError::Fenced`] when a newer
    /// one took the run).
    pub fn start(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        config: &RemoteConfig,
        remote: Remote,
    ) -> Result<Replication> {
        let shipper = if config.epoch == 0 {
            let s = Shipper::claim(remote, dir, vfs.clone())?;
            let mut c = config.clone();
            c.epoch = s.state().epoch;
            c.write(vfs.as_ref(), dir)?;
            s
        } else {
            Shipper::resume(remote, dir, vfs.clone(), config.epoch)?
        };
        let state = shipper.state().clone();
        let core = Arc::new(Core {
            url: config.url.clone(),
            policy: config.policy,
            durable: AtomicU64::new(state.shipped),
            state: Mutex::new(state),
            shipper: Mutex::new(shipper),
            last_error: Mutex::new(None),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let thread = match config.policy {
            Policy::Sync => None,
            Policy::Async { .. } => {
                let c = core.clone();
                Some(
                    std::thread::Builder::new()
                        .name("runlog-shipper".into())
                        .spawn(move || background(c))
                        .map_err(|e| {
                            RemoteError::Config(format!("start the shipper thread: {e}"))
                        })?,
                )
            }
        };
        Ok(Replication { core, thread })
    }

    /// Refuses new work once fenced: call before appending locally.
    pub fn check(&self) -> Result<()> {
        match self.core.fenced() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Records that `seq` (and every seq before it) is durable locally, and, under
    /// `sync`, waits until the remote holds it. An error means: not acknowledged.
    pub fn acknowledged(&self, seq: u64) -> Result<()> {
        self.core.durable.fetch_max(seq, Ordering::AcqRel);
        match self.core.policy {
            Policy::Sync => self.core.ship_to(seq),
            // The background shipper sends it at its next interval.
            Policy::Async { .. } => Ok(()),
        }
    }

    /// Ships everything acknowledged so far, now, whatever the policy.
    pub fn flush(&self) -> Result<()> {
        let d = self.core.durable.load(Ordering::Acquire);
        self.core.ship_to(d)
    }

    /// The counters.
    pub fn stats(&self) -> RemoteStats {
        let s = lock(&self.core.state).clone();
        let durable = self.core.durable.load(Ordering::Acquire).max(s.shipped);
        RemoteStats {
            url: self.core.url.clone(),
            policy: self.core.policy.name().into(),
            epoch: s.epoch,
            manifest: s.manifest,
            durable,
            shipped: s.shipped,
            lag: durable - s.shipped,
            rounds: s.rounds,
            bytes: s.bytes,
            fenced_by: s.fenced_by,
            last_error: lock(&self.core.last_error).clone(),
        }
    }

    /// Stops the background shipper (async), then ships what is left.
    pub fn close(mut self) -> Result<RemoteStats> {
        self.stop_thread();
        let r = if self.core.fenced().is_none() {
            self.flush()
        } else {
            Ok(())
        };
        r.map(|_| self.stats())
    }

    fn stop_thread(&mut self) {
        *lock(&self.core.stop) = true;
        self.core.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Replication {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

fn background(core: Arc<Core>) {
    let interval = core.policy.interval();
    loop {
        {
            let stop = lock(&core.stop);
            if *stop {
                return;
            }
            let (stop, _) = core
                .wake
                .wait_timeout(stop, interval)
                .unwrap_or_else(|p| p.into_inner());
            if *stop {
                return;
            }
        }
        if core.fenced().is_some() {
            return;
        }
        let d = core.durable.load(Ordering::Acquire);
        // A failure is kept in `last_error` and retried next interval.
        let _ = core.ship_to(d);
    }
}

/// An engine store whose log is replicated: [`Replicated::append`] is
/// acknowledged after the local fsync (`async`) or once the remote holds the
/// record (`sync`). Once fenced it appends nothing.
pub struct Replicated<M: Machine> {
    store: Store<M>,
    replication: Replication,
    dir: PathBuf,
}

impl<M: Machine> std::fmt::Debug for Replicated<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Replicated({}, {:?})",
            self.dir.display(),
            self.replication.stats()
        )
    }
}

impl<M: Machine> Replicated<M> {
    /// Replicates `store` to `remote` as `config` says: claims an epoch when
    /// the config holds none (and records it in the store's `REMOTE` file),
    /// else continues as the writer of the recorded epoch
    /// ([`RemoteError::Fenced`] when a newer one took the run).
    pub fn new(store: Store<M>, remote: Remote, config: &RemoteConfig) -> Result<Replicated<M>> {
        let dir = store.dir().to_path_buf();
        let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
        let replication = Replication::start(vfs, &dir, config, remote)?;
        // Records already in the local store count as acknowledged.
        replication
            .core
            .durable
            .fetch_max(store.last_seq(), Ordering::AcqRel);
        Ok(Replicated {
            store,
            replication,
            dir,
        })
    }

    /// Appends `t`; see the type's documentation for when it returns.
    pub fn append(&self, t: &M::Transition) -> Result<u64> {
        self.replication.check()?;
        let seq = self.store.append(t)?;
        self.replication.acknowledged(seq)?;
        Ok(seq)
    }

    /// Appends a batch: one local fsync and (sync) one remote round for all.
    pub fn append_batch(&self, ts: &[M::Transition]) -> Vec<Result<u64>> {
        if let Err(e) = self.replication.check() {
            let msg = crate::engine::ErrorChain(&e).to_string();
            return ts
                .iter()
                .map(|_| Err(RemoteError::Config(msg.clone())))
                .collect();
        }
        let local = self.store.append_batch(ts);
        let top = local.iter().filter_map(|r| r.as_ref().ok()).copied().max();
        let remote = top.map(|s| self.replication.acknowledged(s));
        local
            .into_iter()
            .map(|r| match (r, &remote) {
                (Err(e), _) => Err(RemoteError::Local(e)),
                (Ok(_), Some(Err(e))) => Err(RemoteError::Config(
                    crate::engine::ErrorChain(e).to_string(),
                )),
                (Ok(s), _) => Ok(s),
            })
            .collect()
    }

    /// The local store.
    pub fn store(&self) -> &Store<M> {
        &self.store
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The replication counters.
    pub fn remote_stats(&self) -> RemoteStats {
        self.replication.stats()
    }

    /// Ships everything acknowledged so far, now.
    pub fn flush(&self) -> Result<()> {
        self.replication.flush()
    }

    /// Stops shipping, ships what is left, closes the store.
    pub fn close(self) -> Result<RemoteStats> {
        let Replicated {
            store, replication, ..
        } = self;
        let r = replication.close();
        drop(store);
        r
    }
}
