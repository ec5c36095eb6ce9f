//! The remote verbs (issue 15): `restore RUN --remote URL`, `verify RUN
//! --remote URL`, `gc --remote URL`, `remote attach RUN URL` and `remote
//! status RUN`. Argument parsing only; the work is in `runlog::remote`.

use clap::Subcommand;
use runlog::run::{RunError, Runs};
use std::time::Duration;

/// How long `status` (and each `status --watch` refresh) waits for the remote
/// before it shows the local state alone and says the remote was not reached.
pub const STATUS_DEADLINE: Duration = Duration::from_secs(2);
/// How often `status --watch` re-reads the remote (in the background: a
/// redraw never waits for it).
pub const WATCH_REMOTE_EVERY: Duration = Duration::from_secs(3);

/// `runlog remote …`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum RemoteCommand {
    /// Attach a remote to a run: this host claims the next epoch now, and every
    /// later writer of the run ships to it (the URL is kept in the run's REMOTE file).
    Attach {
        /// The run id (a unique prefix will do).
        run: String,
        /// s3://bucket/prefix (endpoint and keys from AWS_* variables) or file:///path.
        url: String,
        /// sync: a change is done once the remote holds it; async: once fsynced locally,
        /// shipped in the background.
        #[arg(long, default_value = "sync")]
        policy: String,
        /// Milliseconds between async shipping rounds.
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
        /// Ship rounds a writer keeps in flight at once, 1 to 8 (default 4): more
        /// cut a sync commit's wait toward one round trip, at more PUTs.
        #[arg(long)]
        rounds_in_flight: Option<u64>,
    },
    /// Show a run's remote: epoch, chain head, seq shipped, and the lag behind the local log.
    Status {
        /// The run id (a unique prefix will do).
        run: String,
    },
}

#[cfg(feature = "remote")]
mod imp {
    use super::*;
    use crate::ui::feed::deadline_text;
    use runlog::engine::RealFs;
    use runlog::remote::{
        Policy, Remote, RemoteConfig, RemoteError, RemoteStatus, Replication, gc, is_deadline,
        restore, verify_remote,
    };
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Condvar, Mutex};

    pub(super) fn fail(what: &str, e: RemoteError) -> RunError {
        RunError::Remote {
            op: "remote",
            at: what.into(),
            source: e.into(),
        }
    }

    fn print(json: bool, value: serde_json::Value, text: String) -> Result<u8, RunError> {
        if json {
            println!("{value}");
        } else {
            println!("{text}");
        }
        Ok(crate::cli::EXIT_DONE)
    }

    /// One line on a run's remote: where, what is shipped, the lag, the epochs.
    pub(crate) fn lag_line(l: &RemoteStatus) -> String {
        format!(
            "remote {} ({}); local seq {}, shipped {}, lag {}; this host's epoch {}, chain head epoch {}{}",
            l.url,
            l.policy,
            l.durable,
            l.shipped,
            l.lag,
            l.epoch,
            l.head_epoch,
            if l.fenced {
                " (this host is fenced)"
            } else {
                ""
            }
        )
    }

    /// `status RUN`'s remote part, for a run durable through `durable`: the
    /// lag as JSON and as a line (`None` without a remote). A remote that
    /// cannot be read is reported, not fatal: the local status stands. The
    /// remote gets [`STATUS_DEADLINE`] to answer; past it the request is
    /// dropped and the part says it was not reached within it.
    pub fn status_remote(
        dir: &std::path::Path,
        durable: u64,
    ) -> Option<(serde_json::Value, String)> {
        match RemoteStatus::read(dir, durable, Some(STATUS_DEADLINE)) {
            Ok(None) => None,
            Ok(Some(l)) => Some((serde_json::to_value(&l).unwrap_or_default(), lag_line(&l))),
            Err(e) if is_deadline(&e) => {
                let within = deadline_text(STATUS_DEADLINE);
                let why = runlog::engine::ErrorChain(&e).to_string();
                Some((
                    serde_json::json!({"error": why, "notReachedWithin": within}),
                    format!("remote: not reached within {within} (local state shown): {why}"),
                ))
            }
            Err(e) => {
                let why = runlog::engine::ErrorChain(&e).to_string();
                Some((
                    serde_json::json!({"error": why}),
                    format!("remote: cannot read it: {why}"),
                ))
            }
        }
    }

    /// `status --watch`'s remote part: a background thread re-reads the lag
    /// every [`WATCH_REMOTE_EVERY`] (each read bounded by
    /// [`STATUS_DEADLINE`]) and a redraw takes the latest result without
    /// waiting. The thread holds no lock and writes nothing; it ends with the
    /// process.
    pub struct RemoteWatch {
        durable: Arc<AtomicU64>,
        latest: Arc<(Mutex<Option<Part>>, Condvar)>,
    }

    /// A remote part: JSON and line.
    type Part = (serde_json::Value, String);

    impl RemoteWatch {
        /// Starts watching the remote of the run in `dir`, durable through
        /// `durable` now (`None` when the run has no remote).
        pub fn start(dir: &std::path::Path, durable: u64) -> Option<RemoteWatch> {
            // A REMOTE file that cannot be read still gets a line (the error).
            if matches!(RemoteConfig::read(&RealFs, dir), Ok(None)) {
                return None;
            }
            let w = RemoteWatch {
                durable: Arc::new(AtomicU64::new(durable)),
                latest: Arc::new((Mutex::new(None), Condvar::new())),
            };
            let (dir, seq, latest) = (dir.to_path_buf(), w.durable.clone(), w.latest.clone());
            let spawned = std::thread::Builder::new()
                .name("runlog-watch-remote".into())
                .spawn(move || {
                    loop {
                        let part =
                            status_remote(&dir, seq.load(Ordering::Relaxed)).unwrap_or_else(|| {
                                (
                                    serde_json::json!({"error": "the run has no remote now"}),
                                    "remote: the run has no remote now".to_string(),
                                )
                            });
                        let (m, cv) = &*latest;
                        *m.lock().unwrap_or_else(|p| p.into_inner()) = Some(part);
                        cv.notify_all();
                        std::thread::sleep(WATCH_REMOTE_EVERY);
                    }
                });
            if let Err(e) = spawned {
                let (m, _) = &*w.latest;
                *m.lock().unwrap_or_else(|p| p.into_inner()) = Some((
                    serde_json::json!({"error": format!("start the remote reader: {e}")}),
                    format!("remote: cannot read it: start the remote reader: {e}"),
                ));
            }
            Some(w)
        }

        /// The local log is now durable through `seq` (the next read uses it).
        pub fn set_durable(&self, seq: u64) {
            self.durable.store(seq, Ordering::Relaxed);
        }

        /// Waits until the first read has finished (at most a little over
        /// [`STATUS_DEADLINE`], which bounds the read): the first frame shows
        /// the remote as `status` does.
        pub fn wait_first(&self) {
            let (m, cv) = &*self.latest;
            let g = m.lock().unwrap_or_else(|p| p.into_inner());
            let _ = cv
                .wait_timeout_while(g, STATUS_DEADLINE + Duration::from_secs(1), |v| v.is_none())
                .unwrap_or_else(|p| p.into_inner());
        }

        /// The latest remote part (JSON, line); never waits for the remote.
        pub fn latest(&self) -> (serde_json::Value, String) {
            let (m, _) = &*self.latest;
            m.lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_else(|| {
                    (
                        serde_json::json!({"error": "not read yet"}),
                        "remote: not read yet".to_string(),
                    )
                })
        }
    }

    /// `restore RUN --remote URL`.
    pub fn restore_run(runs: &Runs, json: bool, run: &str, url: &str) -> Result<u8, RunError> {
        let dir = runs.run_dir(run)?;
        let remote = Remote::open(url).map_err(|e| fail(url, e))?;
        let r = restore(&RealFs, &remote, &dir, runs.key()).map_err(|e| fail(url, e))?;
        // The restored run remembers its remote; its next writer claims an epoch.
        RemoteConfig::new(url.to_string(), Policy::Sync)
            .write(&RealFs, &dir)
            .map_err(|e| fail(url, e))?;
        print(
            json,
            serde_json::json!({"run": run, "restoredTo": dir.display().to_string(), "manifest": r.manifest,
                "epoch": r.epoch, "snapshot": r.snapshot, "chunks": r.chunks, "lastSeq": r.last_seq, "bytes": r.bytes}),
            format!(
                "restored run {run} into {} from manifest {} (epoch {}): through seq {}, {} chunks, {} bytes",
                dir.display(),
                r.manifest,
                r.epoch,
                r.last_seq,
                r.chunks,
                r.bytes
            ),
        )
    }

    /// `verify RUN --remote URL`.
    pub fn verify(runs: &Runs, json: bool, run: &str, url: &str) -> Result<u8, RunError> {
        let remote = Remote::open(url).map_err(|e| fail(url, e))?;
        let r = verify_remote(&RealFs, &remote, runs.key()).map_err(|e| fail(url, e))?;
        print(
            json,
            serde_json::json!({"run": run, "remote": url, "integrity": "clean", "manifest": r.manifest,
                "epoch": r.epoch, "lastSeq": r.last_seq, "chunks": r.chunks}),
            format!(
                "{url}: clean: manifest {} (epoch {}), seqs through {}, {} chunks checked",
                r.manifest, r.epoch, r.last_seq, r.chunks
            ),
        )
    }

    /// `gc --remote URL --keep-manifests K`.
    pub fn gc_remote(json: bool, url: &str, keep: usize) -> Result<u8, RunError> {
        let remote = Remote::open(url).map_err(|e| fail(url, e))?;
        let r = gc(&remote, keep).map_err(|e| fail(url, e))?;
        print(
            json,
            serde_json::json!({"remote": url, "keptManifests": r.kept_manifests,
                "deletedManifests": r.deleted_manifests, "deletedObjects": r.deleted_objects}),
            format!(
                "{url}: kept {} manifests; deleted {} manifests and {} objects",
                r.kept_manifests.len(),
                r.deleted_manifests.len(),
                r.deleted_objects.len()
            ),
        )
    }

    /// `remote attach|status`.
    pub fn dispatch(runs: &Runs, json: bool, cmd: RemoteCommand) -> Result<u8, RunError> {
        match cmd {
            RemoteCommand::Attach {
                run,
                url,
                policy,
                interval_ms,
                rounds_in_flight,
            } => {
                let id = runs.resolve(&run)?;
                let mut policy = Policy::parse(&policy).map_err(|e| fail(&url, e))?;
                if let Some(k) = rounds_in_flight.filter(|k| !(1..=8).contains(k)) {
                    return Err(fail(
                        &url,
                        RemoteError::Config(format!(
                            "--rounds-in-flight {k}: expected 1 to 8 (FORMAT.md §13.4)"
                        )),
                    ));
                }
                if let Policy::Async { interval_ms: i } = &mut policy {
                    *i = interval_ms.max(1);
                }
                let config = RemoteConfig {
                    url: url.clone(),
                    policy,
                    epoch: 0,
                    holder: String::new(),
                    rounds_in_flight,
                };
                // Under the run's writer lock: claim, ship what the run holds.
                let handle = runs.open(&id)?;
                let dir = handle.dir().to_path_buf();
                config.write(&RealFs, &dir).map_err(|e| fail(&url, e))?;
                let rep = Replication::load(&dir)
                    .map_err(|e| fail(&url, e))?
                    .ok_or_else(|| RunError::Invalid("REMOTE file vanished".into()))?;
                rep.acknowledged(handle.last_seq())
                    .map_err(|e| fail(&url, e))?;
                let status = rep.status();
                drop(rep);
                drop(handle);
                let epoch = status.as_ref().map_or(0, |s| s.epoch);
                print(
                    json,
                    serde_json::json!({"run": id, "remote": url, "policy": config.policy.name(), "epoch": epoch}),
                    format!(
                        "run {id}: attached {url} ({}), this host holds epoch {epoch}",
                        config.policy.name()
                    ),
                )
            }
            RemoteCommand::Status { run } => {
                let id = runs.resolve(&run)?;
                let l = runs
                    .remote_status(&id, None)?
                    .ok_or_else(|| RunError::Invalid(format!("run {id} has no remote")))?;
                print(
                    json,
                    serde_json::json!({"run": id, "remote": l.url, "policy": l.policy,
                        "epoch": l.epoch, "headEpoch": l.head_epoch, "manifest": l.manifest,
                        "durable": l.durable, "shipped": l.shipped, "lag": l.lag,
                        "fenced": l.fenced, "roundsInFlight": l.rounds_in_flight}),
                    format!("run {id}: {}", lag_line(&l)),
                )
            }
        }
    }
}

#[cfg(not(feature = "remote"))]
mod imp {
    use super::*;
    fn off() -> RunError {
        RunError::Invalid("this runlog was built without the `remote` feature".into())
    }
    /// Refused: built without `remote`.
    pub fn restore_run(_: &Runs, _: bool, _: &str, _: &str) -> Result<u8, RunError> {
        Err(off())
    }
    /// Refused: built without `remote`.
    pub fn verify(_: &Runs, _: bool, _: &str, _: &str) -> Result<u8, RunError> {
        Err(off())
    }
    /// Refused: built without `remote`.
    pub fn gc_remote(_: bool, _: &str, _: usize) -> Result<u8, RunError> {
        Err(off())
    }
    /// No remote part without `remote`.
    pub fn status_remote(_: &std::path::Path, _: u64) -> Option<(serde_json::Value, String)> {
        None
    }
    /// No remote to watch without `remote`.
    pub enum RemoteWatch {}
    impl RemoteWatch {
        /// `None`: built without `remote`.
        pub fn start(_: &std::path::Path, _: u64) -> Option<RemoteWatch> {
            None
        }
        /// Never called: no value exists.
        pub fn set_durable(&self, _: u64) {
            match *self {}
        }
        /// Never called: no value exists.
        pub fn wait_first(&self) {
            match *self {}
        }
        /// Never called: no value exists.
        pub fn latest(&self) -> (serde_json::Value, String) {
            match *self {}
        }
    }
    /// Refused: built without `remote`.
    pub fn dispatch(_: &Runs, _: bool, _: RemoteCommand) -> Result<u8, RunError> {
        Err(off())
    }
}

pub use imp::{RemoteWatch, dispatch, gc_remote, restore_run, status_remote, verify};
