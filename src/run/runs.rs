//! The runs root: where run directories live, run id validation, prefix
//! resolution, listing, archiving and garbage collection.
//!
//! Layout: `<root>/runs/<id>/` holds one engine store per run;
//! `<root>/archive/<id>.<timestamp>/` holds runs set aside by a discarding
//! `start` (or a re-`init` over a finished run).

use super::clock::{Clock, SystemClock, parse_rfc3339};
use super::doc::{RunDoc, RunStatus, Unit};
use super::error::{Result, RunError};
use super::health::Assessment;
use super::id::{check_run_id, is_archive_name};
use super::machine::RunKeyed;
use super::view::RunRead;
use crate::engine::{self, Codec, Key, Keyed, RealFs, SyncPolicy, Vfs};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Subdirectory of the root holding live runs.
pub const RUNS_SUBDIR: &str = "runs";
/// Subdirectory of the root holding archived runs.
pub const ARCHIVE_SUBDIR: &str = "archive";
/// The runs root's name when found by walking up from the working directory.
pub(crate) const DEFAULT_ROOT_NAME: &str = ".runlog";
/// How long writers wait for the lock by default.
pub(crate) const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(30);

/// One line of `status --list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    /// The run id.
    pub id: String,
    /// Its status (`null` while a store exists but was never initialized).
    pub status: Option<RunStatus>,
    /// Its task.
    pub task: String,
    /// When it was created.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// Units done.
    pub units_done: usize,
    /// Units in all.
    pub units_total: usize,
    /// Why the run could not be read (then the other fields are empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A run that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unreadable {
    /// The run id (or the archived directory's name).
    pub id: String,
    /// The error, as the reader reported it.
    pub error: String,
}

/// One archived run: a directory under `archive/`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchivedRun {
    /// The directory's name under `archive/` (`<id>.<timestamp>[.N]`), which
    /// `restore` takes.
    pub name: String,
    /// What the run was, as a `status --list` row (`error` set when unreadable).
    #[serde(flatten)]
    pub summary: RunSummary,
}

/// What `gc` removed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GcReport {
    /// Terminal runs removed.
    pub removed: Vec<String>,
    /// Archived runs removed (directory names under `archive/`).
    pub removed_archived: Vec<String>,
    /// Terminal runs kept because another process held them (skipped at once).
    pub skipped_locked: Vec<String>,
    /// Runs (and archived runs) that could not be read, so were left alone.
    pub skipped_unreadable: Vec<Unreadable>,
}

/// A runs root and how runs under it are opened.
#[derive(Clone)]
pub struct Runs {
    pub(crate) root: PathBuf,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) lock_wait: Option<Duration>,
    pub(crate) codec: Codec,
    pub(crate) sync: SyncPolicy,
    pub(crate) key: Option<Key>,
    pub(crate) compaction: engine::CompactionPolicy,
    pub(crate) vfs: Arc<dyn Vfs>,
    /// Where runs ship when they have no `REMOTE` file of their own.
    #[cfg(feature = "remote")]
    pub(crate) remote_root: Option<crate::remote::RemoteRoot>,
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runs")
            .field("root", &self.root)
            .field("lock_wait", &self.lock_wait)
            .field("codec", &self.codec)
            .finish_non_exhaustive()
    }
}

impl Runs {
    /// The environment variable naming the runs root.
    pub const ENV_DIR: &'static str = "RUNLOG_DIR";

    /// Finds the runs root: `explicit` (`--dir`), else `env` (`$RUNLOG_DIR`,
    /// when non-empty), else the nearest `.runlog/` directory in `cwd` or
    /// above it, else `cwd/.runlog` (created by the first write).
    pub fn locate_root(explicit: Option<&Path>, env: Option<&str>, cwd: &Path) -> PathBuf {
        if let Some(d) = explicit {
            return d.to_path_buf();
        }
        if let Some(e) = env.filter(|e| !e.is_empty()) {
            return PathBuf::from(e);
        }
        cwd.ancestors()
            .map(|a| a.join(DEFAULT_ROOT_NAME))
            .find(|p| p.is_dir())
            .unwrap_or_else(|| cwd.join(DEFAULT_ROOT_NAME))
    }

    /// Checks a run id: 1–128 bytes of ASCII letters, digits, `-`, `_` and
    /// `.`, starting with a letter or a digit, with no `..` and not ending in
    /// `.` (docs/CLI.md states the rule). Every method that takes an id checks
    /// it; this is for a caller that checks one before it has a run.
    pub fn check_id(id: &str) -> std::result::Result<(), String> {
        check_run_id(id)
    }

    /// Runs under `root`, with the system clock, a 30 s lock wait and the JSONL codec.
    pub fn new(root: impl Into<PathBuf>) -> Runs {
        Runs {
            root: root.into(),
            clock: Arc::new(SystemClock),
            lock_wait: Some(DEFAULT_LOCK_WAIT),
            codec: Codec::Jsonl,
            sync: SyncPolicy::Always,
            key: None,
            compaction: RUN_COMPACTION,
            vfs: Arc::new(RealFs),
            #[cfg(feature = "remote")]
            remote_root: None,
        }
    }

    /// The remote root runs ship under (default none): run `ID` lives at
    /// `<root>/<ID>`. Opening a run for writing that is missing here but
    /// present there restores it first (a new host); a run opened for writing
    /// with no remote of its own is attached there. Reading a run never
    /// touches the remote.
    #[cfg(feature = "remote")]
    pub fn with_remote_root(mut self, root: Option<crate::remote::RemoteRoot>) -> Runs {
        self.remote_root = root;
        self
    }

    /// The filesystem runs are read and written through (default [`RealFs`]);
    /// tests substitute a counting or simulated one. The runs root's layout and
    /// archive moves still use the real filesystem.
    pub fn with_vfs(mut self, vfs: Arc<dyn Vfs>) -> Runs {
        self.vfs = vfs;
        self
    }

    /// The key runs are read and written with (`None`: untagged runs). A run
    /// created with a key is tagged: each of its records and snapshots carries a
    /// tag, checked whenever it is read or opened. A tagged run needs its
    /// key and an untagged one refuses a key.
    pub fn with_key(mut self, key: Option<Key>) -> Runs {
        self.key = key;
        self
    }

    /// The key given by [`Runs::with_key`].
    pub fn key(&self) -> Option<&Key> {
        self.key.as_ref()
    }

    /// The sync policy of runs opened for writing from now on (default `Always`;
    /// `Grouped` when many threads write to one run).
    pub fn with_sync(mut self, sync: SyncPolicy) -> Runs {
        self.sync = sync;
        self
    }

    /// Uses `clock` for every timestamp.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Runs {
        self.clock = clock;
        self
    }

    /// How long writers wait for another writer (`None`: fail at once).
    pub fn with_lock_wait(mut self, wait: Option<Duration>) -> Runs {
        self.lock_wait = wait;
        self
    }

    /// How long writers wait for another writer ([`Runs::with_lock_wait`]).
    pub fn lock_wait(&self) -> Option<Duration> {
        self.lock_wait
    }

    /// When runs opened for writing from now on compact by themselves
    /// (default `Auto { min_log_bytes: 4 MiB, ratio: 0.1 }`; `Manual` for a
    /// bulk load compacted once at the end).
    pub fn with_compaction(mut self, policy: engine::CompactionPolicy) -> Runs {
        self.compaction = policy;
        self
    }

    /// The codec of runs created from now on.
    pub fn with_codec(mut self, codec: Codec) -> Runs {
        self.codec = codec;
        self
    }

    /// The runs root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The directory archived runs are moved to (`<root>/archive`).
    pub fn archive_dir(&self) -> PathBuf {
        self.root.join(ARCHIVE_SUBDIR)
    }

    /// The directory of run `id` (validated; it may not exist).
    pub fn run_dir(&self, id: &str) -> Result<PathBuf> {
        check_run_id(id).map_err(RunError::Invalid)?;
        Ok(self.root.join(RUNS_SUBDIR).join(id))
    }

    pub(crate) fn ensure_layout(&self) -> Result<()> {
        // Each new directory's name is made durable in its parent (issue 11):
        // the root, `runs/` and `archive/` survive a crash after the first init.
        for sub in [RUNS_SUBDIR, ARCHIVE_SUBDIR] {
            let p = self.root.join(sub);
            engine::create_dir_all_durable(self.vfs.as_ref(), &p, "create runs root")
                .map_err(|e| io_error("create runs root", &p, e))?;
        }
        Ok(())
    }

    /// The ids of every run directory, sorted.
    pub fn ids(&self) -> Result<Vec<String>> {
        let dir = self.root.join(RUNS_SUBDIR);
        let mut ids: Vec<String> = self
            .list_dirs(&dir, "list runs")?
            .into_iter()
            .filter(|name| check_run_id(name).is_ok())
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// Resolves an id or a unique prefix of one (an exact match wins).
    pub fn resolve(&self, id_or_prefix: &str) -> Result<String> {
        check_run_id(id_or_prefix).map_err(RunError::Invalid)?;
        let ids = self.ids()?;
        if ids.iter().any(|i| i == id_or_prefix) {
            return Ok(id_or_prefix.to_string());
        }
        let matches: Vec<String> = ids
            .into_iter()
            .filter(|i| i.starts_with(id_or_prefix))
            .collect();
        match matches.len() {
            1 => Ok(matches.into_iter().next().unwrap_or_default()),
            0 => Err(self.not_found(id_or_prefix)),
            _ => Err(RunError::Ambiguous {
                prefix: id_or_prefix.to_string(),
                matches,
            }),
        }
    }

    pub(crate) fn not_found(&self, id: &str) -> RunError {
        RunError::NotFound {
            id: id.to_string(),
            root: self.root.clone(),
        }
    }

    /// Reads run `id` (exact) without a lock and without modifying anything:
    /// the run-level fields and counts at once, units by lookup or iteration.
    pub fn read_run(&self, id: &str) -> Result<RunRead> {
        let dir = self.run_dir(id)?;
        match engine::Reader::new(self.vfs.as_ref(), &dir)
            .with_key(self.key())
            .state::<Keyed<RunKeyed>>()
        {
            Ok((state, recovery)) => Ok(RunRead {
                id: id.to_string(),
                state,
                recovery,
            }),
            Err(engine::Error::NotFound { .. }) => Err(self.not_found(id)),
            Err(e) => Err(RunError::engine(id, e)),
        }
    }

    /// Whether a writer holds run `id`'s lock right now (a look that never
    /// waits and writes nothing: [`engine::Reader::writer_active`]): a
    /// long-lived writer (`runlog serve`, `apply`, an open `Run`) holds it
    /// between its changes, a one-shot one only while it writes.
    pub fn writer_active(&self, id: &str) -> Result<bool> {
        let dir = self.run_dir(id)?;
        Ok(engine::Reader::new(self.vfs.as_ref(), &dir).writer_active())
    }

    /// The health of run `id` as `read` shows it, at `now_ms` (ms since the
    /// epoch): [`Assessment::of`], looking at its writer lock only when that
    /// decides it.
    pub fn health(&self, read: &RunRead, now_ms: i64) -> Assessment {
        let view = read.view();
        Assessment::of(view.header(), &view.counts(), now_ms, || {
            self.writer_active(read.id()).unwrap_or(false)
        })
    }

    /// Checks every file of run `id` (exact) without a lock and without
    /// modifying anything: the verdict of the open itself (every record
    /// decoded and applied by the run's rules, every table block of the
    /// snapshot chain checked), so it is clean exactly when the run opens.
    /// Damage is in the report, not an error: [`engine::Integrity`] names its
    /// file and offset; an error means the run could not be checked at all.
    pub fn verify(&self, id: &str) -> Result<engine::VerifyReport> {
        let dir = self.run_dir(id)?;
        match engine::verify_as::<Keyed<RunKeyed>>(self.vfs.as_ref(), &dir, self.key()) {
            Ok(r) => Ok(r),
            // An empty run directory is no run, as for every other call.
            Err(engine::Error::NotFound { .. }) => Err(self.not_found(id)),
            Err(e) => Err(RunError::engine(id, e)),
        }
    }

    /// Rebuilds run `id`'s snapshot from its log: opens it for writing
    /// (recovery drops a torn tail, as any writer's open does) and compacts it
    /// in full. Returns what recovery found and what the compaction wrote.
    pub fn rebuild_snapshot(
        &self,
        id: &str,
    ) -> Result<(engine::RecoveryReport, engine::CompactReport)> {
        let dir = self.run_dir(id)?;
        engine::rebuild_snapshot::<Keyed<RunKeyed>>(&dir, self.store_options(false, None)).map_err(
            |e| match e {
                engine::Error::NotFound { .. } => self.not_found(id),
                e => RunError::engine(id, e),
            },
        )
    }

    /// Run `id`'s remote status: its local durable seq (read lock-free)
    /// against what its remote's chain head holds, read without claiming or
    /// shipping anything; `None` when the run has no remote. `within` bounds
    /// the wait for the remote's answer.
    #[cfg(feature = "remote")]
    pub fn remote_status(
        &self,
        id: &str,
        within: Option<Duration>,
    ) -> Result<Option<crate::remote::RemoteStatus>> {
        let durable = self.read_run(id)?.recovery().last_seq;
        let dir = self.run_dir(id)?;
        crate::remote::RemoteStatus::read(&dir, durable, within)
            .map_err(|e| RunError::remote("remote", id, e))
    }

    /// Reads run `id` whole, units included (memory in proportion to the run;
    /// [`Runs::read_run`] looks things up instead).
    pub fn read(&self, id: &str) -> Result<RunDoc> {
        self.read_run(id)?.view().to_doc()
    }

    /// Reads unit `unit` of run `id` (exact) by lookup, without a lock and
    /// without modifying anything: `None` when the run has no such unit.
    pub fn unit(&self, id: &str, unit: &str) -> Result<Option<Unit>> {
        self.read_run(id)?.view().unit(unit)
    }

    /// Resolves a prefix and reads that run: (id, document).
    pub fn read_prefix(&self, id_or_prefix: &str) -> Result<(String, RunDoc)> {
        let id = self.resolve(id_or_prefix)?;
        let doc = self.read(&id)?;
        Ok((id, doc))
    }

    /// Every run, newest first. A run that cannot be read is listed with its
    /// error (and no status), never as an empty run.
    pub fn list(&self) -> Result<Vec<RunSummary>> {
        let mut out = vec![];
        for id in self.ids()? {
            out.push(match self.read_run(&id) {
                Ok(read) => summary(id, &read.view()),
                Err(e) => unreadable_summary(id, &e),
            });
        }
        out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    /// Every archived run (directories under `archive/`), newest first.
    /// `gc` removes those last updated more than its `--keep-days` ago.
    pub fn list_archived(&self) -> Result<Vec<ArchivedRun>> {
        let archive = self.root.join(ARCHIVE_SUBDIR);
        let mut out = vec![];
        for name in self.list_dirs(&archive, "list archived runs")? {
            if name.starts_with(REMOVING_PREFIX) {
                continue;
            }
            let summary = match self.read_archived(&name) {
                Ok(read) => summary(read.id.clone(), &read.view()),
                Err(err) => unreadable_summary(String::new(), &err),
            };
            out.push(ArchivedRun { name, summary });
        }
        out.sort_by(|a, b| {
            (b.summary.updated_at.cmp(&a.summary.updated_at)).then(a.name.cmp(&b.name))
        });
        Ok(out)
    }

    fn read_archived(&self, name: &str) -> Result<RunRead> {
        let not_archived = || RunError::NotArchived {
            name: name.to_string(),
            archive: self.root.join(ARCHIVE_SUBDIR),
        };
        if !is_archive_name(name) {
            return Err(not_archived());
        }
        let dir = self.root.join(ARCHIVE_SUBDIR).join(name);
        match engine::Reader::new(self.vfs.as_ref(), &dir)
            .with_key(self.key())
            .state::<Keyed<RunKeyed>>()
        {
            Ok((state, recovery)) => {
                let id = state.header().doc.id.clone();
                Ok(RunRead {
                    id,
                    state,
                    recovery,
                })
            }
            Err(engine::Error::NotFound { .. }) => Err(not_archived()),
            Err(e) => Err(RunError::engine(name, e)),
        }
    }

    /// Moves archived run `name` (a directory under `archive/`) back to
    /// `runs/<id>`, and returns its id. Refused while a run with that id
    /// exists: finish it and archive it (a `start` over a finished run does),
    /// or remove it, first.
    pub fn restore_archived(&self, name: &str) -> Result<String> {
        let read = self.read_archived(name)?;
        let doc = read.view().header().clone();
        if !doc.is_initialized() {
            return Err(RunError::Invalid(format!(
                "archived run {name:?} was never initialized; nothing to restore"
            )));
        }
        let id = doc.id;
        let to = self.run_dir(&id)?;
        if self.exists(&to)? {
            return Err(RunError::Invalid(format!(
                "a run {id:?} exists at {}; it must be gone before {name:?} can take its place",
                to.display()
            )));
        }
        self.ensure_layout()?;
        let from = self.root.join(ARCHIVE_SUBDIR).join(name);
        // Hold the archived run's writer lock across the move: `gc` takes it
        // before deleting an archived run, so the two never act on one
        // directory at once (a run moved back half deleted), and neither do
        // two restores. A lock held elsewhere refuses at once.
        let store = self.lock_archived(&from, name)?;
        self.vfs
            .rename(&from, &to)
            .map_err(|e| RunError::io("restore archived run", &from, e))?;
        drop(store);
        // Both directory entries changed: make the move durable on each side.
        self.sync_dir(&self.root.join(ARCHIVE_SUBDIR))?;
        self.sync_dir(&self.root.join(RUNS_SUBDIR))?;
        Ok(id)
    }

    /// Takes the writer lock of the archived run at `dir` (named `name`) without
    /// waiting (`Locked`, naming the holder, when another process has it): the
    /// store, open, holds it until dropped.
    fn lock_archived(&self, dir: &Path, name: &str) -> Result<engine::Store<Keyed<RunKeyed>>> {
        engine::Store::<Keyed<RunKeyed>>::open(dir, self.store_options(false, Some(None)))
            .map_err(|e| RunError::engine(name, e))
    }

    /// Moves the run directory `runs/<id>` to `archive/<id>.<timestamp>` and
    /// returns the new path. The caller holds the run's writer lock.
    pub(crate) fn archive(&self, id: &str) -> Result<PathBuf> {
        self.move_to_archive(id, "")
    }

    /// Moves `runs/<id>` under `archive/` as `<prefix><id>.<timestamp>` (a
    /// free name), each directory's change made durable.
    fn move_to_archive(&self, id: &str, prefix: &str) -> Result<PathBuf> {
        self.ensure_layout()?;
        let from = self.run_dir(id)?;
        let stamp: String = self
            .clock
            .now()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        let archive = self.root.join(ARCHIVE_SUBDIR);
        let taken = self
            .vfs
            .list(&archive)
            .map_err(|e| RunError::io("list archived runs", &archive, e))?;
        for n in 0..1000 {
            let name = match n {
                0 => format!("{prefix}{id}.{stamp}"),
                n => format!("{prefix}{id}.{stamp}.{n}"),
            };
            if taken.contains(&name) {
                continue;
            }
            let to = archive.join(name);
            self.vfs
                .rename(&from, &to)
                .map_err(|e| RunError::io("archive run", &from, e))?;
            self.sync_dir(&self.root.join(RUNS_SUBDIR))?;
            self.sync_dir(&archive)?;
            return Ok(to);
        }
        Err(RunError::Invalid(format!(
            "too many archived copies of {id} at {stamp}"
        )))
    }

    /// Whether anything is at `path` (its parent listed through the Vfs).
    fn exists(&self, path: &Path) -> Result<bool> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(true);
        };
        match self.vfs.list(parent) {
            Ok(names) => Ok(names.iter().any(|n| std::ffi::OsStr::new(n) == name)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(RunError::io("list directory", parent, e)),
        }
    }

    /// The directories in `dir` (none when it is absent).
    fn list_dirs(&self, dir: &Path, op: &'static str) -> Result<Vec<String>> {
        match self.vfs.list_dirs(dir) {
            Ok(names) => Ok(names),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(vec![]),
            Err(e) => Err(RunError::io(op, dir, e)),
        }
    }

    /// fsyncs directory `dir`, making the names changed in it durable.
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.vfs
            .sync_dir(dir)
            .map_err(|e| RunError::io("fsync directory", dir, e))
    }

    /// Removes `dir` and everything in it (a name nothing reads: gc renamed it).
    fn remove_tree(&self, dir: &Path, op: &'static str) -> Result<()> {
        engine::remove_dir_all(self.vfs.as_ref(), dir, op).map_err(|e| io_error(op, dir, e))
    }

    /// Removes terminal runs finished at least `keep_days` days ago, and archived
    /// runs last updated that long ago. A run another process holds is skipped.
    pub fn gc(&self, keep_days: u64) -> Result<GcReport> {
        let now = self.clock.now_millis();
        let keep_ms = (keep_days as i64).saturating_mul(86_400_000);
        let old = |ts: Option<&str>| {
            ts.and_then(parse_rfc3339)
                .is_some_and(|t| now.saturating_sub(t) >= keep_ms)
        };
        let mut report = GcReport::default();
        for id in self.ids()? {
            let read = match self.read_run(&id) {
                Ok(r) => r,
                Err(e) => {
                    report.skipped_unreadable.push(Unreadable {
                        id,
                        error: e.to_string(),
                    });
                    continue;
                }
            };
            let doc = read.view().header();
            if !(doc.is_closed() && old(doc.finished_at.as_deref())) {
                continue;
            }
            // Hold the writer lock while the directory leaves `runs/`, so no writer
            // is mid-transition in it; then delete it outside `runs/`. A run in
            // use is skipped at once (no wait), and reported.
            let dir = self.run_dir(&id)?;
            let opts = self.store_options(false, Some(None));
            let store = match engine::Store::<Keyed<RunKeyed>>::open(&dir, opts) {
                Ok(s) => s,
                Err(engine::Error::Locked { .. }) => {
                    report.skipped_locked.push(id);
                    continue;
                }
                Err(e) => return Err(RunError::engine(&id, e)),
            };
            if !store.read(|d| d.header().doc.is_closed()) {
                continue;
            }
            // To a hidden name under `archive/` first: a crash during the
            // deletion leaves nothing that lists, restores or reads as a run
            // (the next gc finishes it).
            let moved = self.move_to_archive(&id, REMOVING_PREFIX)?;
            drop(store);
            self.remove_tree(&moved, "remove run")?;
            report.removed.push(id);
        }
        let archive = self.root.join(ARCHIVE_SUBDIR);
        for name in self.list_dirs(&archive, "list archived runs")? {
            let path = archive.join(&name);
            if name.starts_with(REMOVING_PREFIX) {
                // A removal a crash interrupted: no run can be restored
                // from it (its name is hidden), so finish it.
                self.remove_tree(&path, "remove archived run")?;
                continue;
            }
            let state = match engine::Reader::new(self.vfs.as_ref(), &path)
                .with_key(self.key())
                .state::<Keyed<RunKeyed>>()
            {
                Ok((state, _)) => state,
                Err(err) => {
                    report.skipped_unreadable.push(Unreadable {
                        id: format!("{ARCHIVE_SUBDIR}/{name}"),
                        error: err.to_string(),
                    });
                    continue;
                }
            };
            if old(Some(state.header().doc.updated_at.as_str())) {
                // Under its writer lock (as `restore_archived` moves it), the
                // run leaves the archive's names by a rename to a hidden one,
                // then is deleted: a restore never meets it half deleted.
                let store = match engine::Store::<Keyed<RunKeyed>>::open(
                    &path,
                    self.store_options(false, Some(None)),
                ) {
                    Ok(s) => s,
                    Err(engine::Error::Locked { .. }) => {
                        report
                            .skipped_locked
                            .push(format!("{ARCHIVE_SUBDIR}/{name}"));
                        continue;
                    }
                    // Restored (moved away) since it was read.
                    Err(engine::Error::NotFound { .. }) => continue,
                    Err(e) => return Err(RunError::engine(&name, e)),
                };
                let doomed = archive.join(format!("{REMOVING_PREFIX}{name}"));
                self.vfs
                    .rename(&path, &doomed)
                    .map_err(|e| RunError::io("remove archived run", &path, e))?;
                drop(store);
                self.sync_dir(&archive)?;
                self.remove_tree(&doomed, "remove archived run")?;
                report.removed_archived.push(name);
            }
        }
        Ok(report)
    }

    pub(crate) fn store_options(
        &self,
        create: bool,
        lock_wait: Option<Option<Duration>>,
    ) -> engine::Options {
        engine::Options {
            create,
            codec: self.codec,
            lock_wait: lock_wait.unwrap_or(self.lock_wait),
            sync: self.sync,
            key: self.key.clone(),
            compaction: self.compaction,
            delta_bytes: RUN_DELTA_BYTES,
            preallocate: RUN_PREALLOCATE,
            vfs: self.vfs.clone(),
            ..engine::Options::default()
        }
    }
}

/// The `status --list` row of a readable run.
fn summary(id: String, view: &super::view::RunView<'_>) -> RunSummary {
    let doc = view.header();
    let counts = view.counts();
    // A store with no initialized run (its first record missing or torn) is
    // not an empty run: say so rather than list "0/0".
    let error = (!doc.is_initialized()).then(|| {
        format!("holds no initialized run (its first record is missing or torn); verifying run {id} says more")
    });
    RunSummary {
        status: doc.is_initialized().then_some(doc.status),
        task: doc.task.clone(),
        created_at: doc.created_at.clone(),
        updated_at: doc.updated_at.clone(),
        units_done: counts.done as usize,
        units_total: counts.total() as usize,
        error,
        id,
    }
}

/// The `status --list` row of a run that could not be read.
fn unreadable_summary(id: String, e: &RunError) -> RunSummary {
    RunSummary {
        id,
        status: None,
        task: String::new(),
        created_at: String::new(),
        updated_at: String::new(),
        units_done: 0,
        units_total: 0,
        error: Some(match e {
            // The engine's text names library API; say it in a row's words.
            RunError::Engine {
                source: engine::Error::Key { reason, .. },
                ..
            } if reason.starts_with("store is tagged") => {
                "a tagged run: it can't be read without its key".to_string()
            }
            RunError::NotFound { .. } => {
                "its directory holds no run store (empty, or partly created)".to_string()
            }
            // The row names the run: its error is the cause, file and offset
            // and all (the run error's own text is only "run ID").
            RunError::Engine { source, .. } => engine::ErrorChain(source).to_string(),
            e => engine::ErrorChain(e).to_string(),
        }),
    }
}

/// An engine error from a directory operation on the runs root (not on a
/// store) as the run layer's I/O error: `Io` keeps its operation and path.
fn io_error(op: &'static str, path: &Path, e: engine::Error) -> RunError {
    match e {
        engine::Error::Io { op, path, source } => RunError::Io { op, path, source },
        e => RunError::io(op, path, std::io::Error::other(e.to_string())),
    }
}

/// The prefix of an archived run `gc` is deleting (hidden: no archive name
/// starts with a dot, as no run id does).
const REMOVING_PREFIX: &str = ".removing.";

/// When a run compacts by itself: once the log since the last snapshot passes
/// 4 MiB and a tenth of that snapshot. Every process that opens the run
/// replays that log, so it is kept short; the tenth bounds how often a large
/// table is rewritten (each compaction streams the whole table once).
pub(crate) const RUN_COMPACTION: engine::CompactionPolicy = engine::CompactionPolicy::Auto {
    min_log_bytes: 4 << 20,
    ratio: 0.1,
};

/// A run's log is flushed as a delta table once 16 KiB (about a hundred
/// transitions) were logged since its newest snapshot: every process that
/// opens a live run replays at most about that much, whatever the run's size
/// (FORMAT.md §14). 16 KiB, not more: each one-shot writer replays the tail
/// (JSON decoding and the run's rules, about 6,000 instructions a record),
/// while a flush of a hundred records is one small table, made once per
/// hundred calls (docs/PERFORMANCE.md, "What a one-shot call costs beyond the floor", has the measurement). The
/// full table is merged under [`RUN_COMPACTION`], by long-lived writers only.
pub const RUN_DELTA_BYTES: u64 = 16 << 10;

/// How far ahead a binary run's active segment is filled with zeros
/// (`engine::Options::preallocate`, FORMAT.md §3.2): 64 KiB, not the engine's
/// 1 MiB, because every one-shot writer reads the zeros after the last record
/// to the end of the file, twice (its replay, and its catch-up under the lock),
/// while a fill every 64 KiB of records costs a long-lived writer almost
/// nothing.
pub const RUN_PREALLOCATE: u64 = 64 << 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_like_ids_are_refused() {
        let long = "a".repeat(300);
        for bad in [
            "..", ".", "a/b", "a\\b", "/x", "a\0b", &long, "%2e%2e", "", "a b", "-x", "--id",
            ".hidden", "x..", "a..b", "x.", "_x", "a*", "a$b", "a;b", "~x",
        ] {
            assert!(check_run_id(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["a", "run-1.2_x", "9lives", "a-", "a_", &"b".repeat(128)] {
            assert!(check_run_id(good).is_ok(), "{good:?} refused");
        }
    }
}
