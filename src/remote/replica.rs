//! [`Replication`]: the one handle on a store directory's replication, under
//! a policy: `sync` (an ack waits for the remote; waiters share rounds) or
//! `async` (a background thread ships every interval; an ack comes after the
//! local fsync). It is started now over an engine [`Store`]
//! ([`Replication::start`]) or loaded from a directory's `REMOTE` file and
//! started at the first acknowledged change ([`Replication::load`]: how every
//! process that opens a run for writing ships, so an open whose only change is
//! refused claims and writes nothing remotely). Behind it, [`Shipping`]: the
//! shipper behind a mutex and, under `async`, the background thread.

use super::client::Remote;
use super::config::{Policy, RemoteConfig};
use super::error::{RemoteError, Result};
use super::shipper::{ShipState, Shipper, Step, send};
use super::status::RemoteStatus;
use crate::engine::{Machine, RealFs, Store, Vfs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Core {
    url: String,
    policy: Policy,
    shipper: Mutex<Shipper>,
    /// Signalled whenever an outcome is recorded in the shipper.
    settled: Condvar,
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

    /// Returns once the remote holds `seq` (every seq acknowledged by then
    /// rides along). Waiters share the shipper: each, under its lock, takes
    /// the next step ([`Shipper::step`]); a PUT is made outside it, so up to
    /// the remote's rounds in flight are under way at once, and each outcome
    /// recorded wakes the others. A waiter makes at most one PUT that fails:
    /// its error is what it returns.
    fn ship_to(&self, seq: u64) -> Result<()> {
        if lock(&self.state).shipped >= seq {
            return Ok(());
        }
        self.rounds(Ok(seq))
    }

    /// Rounds until the remote holds record `seq` (`Ok`), or until its
    /// newest table covers seq `k` (`Err(k)`: a round of a snapshot alone,
    /// when no record follows it).
    fn rounds(&self, upto: std::result::Result<u64, u64>) -> Result<()> {
        let mut s = lock(&self.shipper);
        loop {
            let step = match upto {
                Ok(seq) => s.step(seq, self.durable.load(Ordering::Acquire).max(seq)),
                Err(k) => s.step_snapshot(k),
            };
            *lock(&self.state) = s.state().clone();
            let (n, bytes) = match step {
                Ok(Step::Done) => {
                    *lock(&self.last_error) = None;
                    return Ok(());
                }
                Ok(Step::Wait) => {
                    s = self.settled.wait(s).unwrap_or_else(|p| p.into_inner());
                    continue;
                }
                Ok(Step::Send(n, bytes)) => (n, bytes),
                Err(e) => return Err(self.failed(e)),
            };
            let (remote, epoch) = (s.remote().clone(), s.state().epoch);
            drop(s);
            let (outcome, r) = send(&remote, n, &bytes, epoch);
            s = lock(&self.shipper);
            s.record(n, outcome);
            *lock(&self.state) = s.state().clone();
            self.settled.notify_all();
            if let Err(e) = r {
                return Err(self.failed(e));
            }
        }
    }

    /// Keeps `e` as the last error (for status) and returns it.
    fn failed(&self, e: RemoteError) -> RemoteError {
        *lock(&self.last_error) = Some(crate::engine::ErrorChain(&e).to_string());
        e
    }
}

/// A started replication: the shipper, the seqs acknowledged locally and,
/// under `async`, the background thread. What a [`Replication`] holds once
/// started.
struct Shipping {
    core: Arc<Core>,
    thread: Option<JoinHandle<()>>,
}

impl Shipping {
    /// Starts replicating `dir` as `config` says: claims an epoch of its own
    /// and records it in `dir/REMOTE` ([`RemoteError::Fenced`] when another
    /// directory took the run).
    fn start(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        config: &RemoteConfig,
        remote: Remote,
    ) -> Result<Shipping> {
        // The holder is on disk before the first claim that names it, so a
        // claim that landed is this directory's whatever happens next.
        let mut c = config.clone();
        if c.holder.is_empty() {
            c.holder = RemoteConfig::draw_holder();
            c.write(vfs.as_ref(), dir)?;
        }
        let shipper = Shipper::claim(remote, dir, vfs.clone(), &c)?;
        c.epoch = shipper.state().epoch;
        c.write(vfs.as_ref(), dir)?;
        let state = shipper.state().clone();
        let core = Arc::new(Core {
            url: config.url.clone(),
            policy: config.policy,
            durable: AtomicU64::new(state.shipped),
            state: Mutex::new(state),
            shipper: Mutex::new(shipper),
            settled: Condvar::new(),
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
        Ok(Shipping { core, thread })
    }

    /// Refuses new work once fenced.
    fn check(&self) -> Result<()> {
        match self.core.fenced() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Records that `seq` (and every seq before it) is durable locally, and,
    /// under `sync`, waits until the remote holds it.
    fn acknowledged(&self, seq: u64) -> Result<()> {
        self.core.durable.fetch_max(seq, Ordering::AcqRel);
        match self.core.policy {
            Policy::Sync => self.core.ship_to(seq),
            // The background shipper sends it at its next interval.
            Policy::Async { .. } => Ok(()),
        }
    }

    /// Ships everything acknowledged so far, now, whatever the policy.
    fn flush(&self) -> Result<()> {
        let d = self.core.durable.load(Ordering::Acquire);
        self.core.ship_to(d)
    }

    fn ship_snapshot(&self, k: u64) -> Result<()> {
        self.flush()?;
        self.core.rounds(Err(k))
    }

    fn status(&self) -> RemoteStatus {
        let s = lock(&self.core.state).clone();
        let durable = self.core.durable.load(Ordering::Acquire).max(s.shipped);
        RemoteStatus {
            url: self.core.url.clone(),
            policy: self.core.policy.name().into(),
            epoch: s.epoch,
            head_epoch: s.fenced_by.unwrap_or(s.epoch),
            manifest: s.manifest,
            durable,
            shipped: s.shipped,
            lag: durable - s.shipped,
            fenced: s.fenced_by.is_some(),
            rounds_in_flight: s.rounds_in_flight,
            rounds: Some(s.rounds),
            bytes: Some(s.bytes),
            last_error: lock(&self.core.last_error).clone(),
        }
    }

    /// Stops the background shipper (async), then ships what is left.
    fn close(mut self) -> Result<RemoteStatus> {
        self.stop_thread();
        let r = if self.core.fenced().is_none() {
            self.flush()
        } else {
            Ok(())
        };
        r.map(|_| self.status())
    }

    fn stop_thread(&mut self) {
        *lock(&self.core.stop) = true;
        self.core.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Shipping {
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

/// A store directory replicated to a remote: the writer appends locally, then
/// hands each acknowledged seq here ([`Replication::acknowledged`], or
/// [`Replication::append`] for both steps), which returns once the remote
/// holds it (`sync`) or at once, the background shipper sending it within the
/// interval (`async`). Once fenced by a newer writer it acknowledges nothing.
///
/// Dropping it (or [`Replication::close`]) stops the background shipper and
/// ships what is left; drop it before the store it ships, so a store's next
/// writer finds the chain caught up.
pub struct Replication {
    dir: PathBuf,
    config: RemoteConfig,
    /// Taken while starting, so one handle claims once.
    starting: Mutex<()>,
    live: OnceLock<Shipping>,
}

impl std::fmt::Debug for Replication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Replication({} to {}, {:?})",
            self.dir.display(),
            self.config.url,
            self.status()
        )
    }
}

impl Replication {
    /// Replicates `store` to `remote` as `config` says, starting now: claims
    /// an epoch of its own and records it in the store's `REMOTE` file
    /// (FORMAT.md §13.3; [`RemoteError::Fenced`] when another directory took
    /// the run). The records already in the store count as acknowledged.
    pub fn start<M: Machine>(
        store: &Store<M>,
        remote: Remote,
        config: &RemoteConfig,
    ) -> Result<Replication> {
        let dir = store.dir().to_path_buf();
        let live = Shipping::start(Arc::new(RealFs), &dir, config, remote)?;
        live.core
            .durable
            .fetch_max(store.last_seq(), Ordering::AcqRel);
        Ok(Replication {
            dir,
            config: config.clone(),
            starting: Mutex::new(()),
            live: OnceLock::from(live),
        })
    }

    /// The replication of the store in `dir` as its `REMOTE` file says
    /// (`None` when it has none), started at the first
    /// [`Replication::acknowledged`]: only then is the remote opened and an
    /// epoch claimed or resumed.
    pub fn load(dir: &Path) -> Result<Option<Replication>> {
        Ok(RemoteConfig::read(&RealFs, dir)?.map(|config| Replication {
            dir: dir.to_path_buf(),
            config,
            starting: Mutex::new(()),
            live: OnceLock::new(),
        }))
    }

    /// The started replication, starting it if need be.
    fn live(&self) -> Result<&Shipping> {
        if let Some(s) = self.live.get() {
            return Ok(s);
        }
        let _starting = lock(&self.starting);
        if let Some(s) = self.live.get() {
            return Ok(s);
        }
        let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
        // Re-read: an earlier process may have claimed since this one loaded it.
        let config =
            RemoteConfig::read(vfs.as_ref(), &self.dir)?.unwrap_or_else(|| self.config.clone());
        let remote = config.apply(Remote::open(&config.url)?);
        let started = Shipping::start(vfs, &self.dir, &config, remote)?;
        Ok(self.live.get_or_init(|| started))
    }

    /// Refuses new work once fenced: call before appending locally. A
    /// replication not started yet knows of no fence.
    pub fn check(&self) -> Result<()> {
        self.live.get().map_or(Ok(()), Shipping::check)
    }

    /// Records that `seq` (and every seq before it) is durable locally,
    /// starting the replication if need be, and, under `sync`, waits until
    /// the remote holds it. An error means: not acknowledged.
    pub fn acknowledged(&self, seq: u64) -> Result<()> {
        let live = self.live()?;
        live.check()?;
        live.acknowledged(seq)
    }

    /// Appends `t` to `store` (the store this replicates) and acknowledges
    /// it: returns as [`Replication::acknowledged`] does.
    pub fn append<M: Machine>(&self, store: &Store<M>, t: &M::Transition) -> Result<u64> {
        self.check_store(store.dir())?;
        self.check()?;
        let seq = store.append(t)?;
        self.acknowledged(seq)?;
        Ok(seq)
    }

    /// Appends a batch to `store` (the store this replicates): one local fsync
    /// and (sync) one remote round for all.
    pub fn append_batch<M: Machine>(
        &self,
        store: &Store<M>,
        ts: &[M::Transition],
    ) -> Vec<Result<u64>> {
        if let Err(e) = self.check_store(store.dir()).and_then(|()| self.check()) {
            let msg = crate::engine::ErrorChain(&e).to_string();
            return ts
                .iter()
                .map(|_| Err(RemoteError::Config(msg.clone())))
                .collect();
        }
        let local = store.append_batch(ts);
        let top = local.iter().filter_map(|r| r.as_ref().ok()).copied().max();
        let remote = top.map(|s| self.acknowledged(s));
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

    /// Refuses a store other than the one this replicates.
    fn check_store(&self, dir: &Path) -> Result<()> {
        if dir == self.dir {
            return Ok(());
        }
        Err(RemoteError::Config(format!(
            "append to {}: this replication ships {}",
            dir.display(),
            self.dir.display()
        )))
    }

    /// Ships everything acknowledged so far, now, whatever the policy.
    pub fn flush(&self) -> Result<()> {
        self.live.get().map_or(Ok(()), Shipping::flush)
    }

    /// Ships everything acknowledged so far, then the local snapshot at
    /// `k` (or a newer one) unless the remote's newest table covers `k`
    /// already, whatever the policy: after an explicit compaction, so that a
    /// restore fetches that table rather than the log before it.
    pub fn ship_snapshot(&self, k: u64) -> Result<()> {
        self.live.get().map_or(Ok(()), |s| s.ship_snapshot(k))
    }

    /// This handle's status: this host's epoch, the seq durable here, the seq
    /// the remote holds and the lag between them, the rounds and bytes
    /// shipped. `None` before the replication started.
    pub fn status(&self) -> Option<RemoteStatus> {
        self.live.get().map(Shipping::status)
    }

    /// The remote's URL.
    pub fn url(&self) -> &str {
        &self.config.url
    }

    /// Stops the background shipper (async), ships what is left and returns
    /// the status (`None` when the replication never started).
    pub fn close(mut self) -> Result<Option<RemoteStatus>> {
        self.live.take().map(Shipping::close).transpose()
    }
}

impl Drop for Replication {
    fn drop(&mut self) {
        if let Some(live) = self.live.take() {
            // Ship what this process acknowledged locally. A failure leaves
            // it for the next writer (the lag `RemoteStatus::read` shows).
            let _ = live.close();
        }
    }
}
