//! Opening runs for writing: `open`, `init`, restore-or-create `start`, and
//! `change` (one transition: one replay, and a refusal touches no segment).

use super::doc::RunDoc;
use super::error::{Result, RunError};
use super::fingerprint::{changed_parts, format_parts};
use super::handle::Run;
use super::machine::RunKeyed;
use super::runs::Runs;
use super::transition::{Change, InitSpec};
use crate::engine::{self, Keyed, Store};
use serde::Serialize;

/// A warning for the caller (also printed on stderr by the CLI).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Warning {
    /// A stable code, e.g. [`Warning::CHECKPOINT_DISCARDED`].
    pub code: String,
    /// A sentence for humans.
    pub message: String,
    /// The fingerprint parts that changed.
    pub changed: Vec<String>,
    /// Where the discarded run was moved (empty when nothing was moved).
    pub archived_to: String,
}

impl Warning {
    /// The code of the warning `start` emits when it discards a run.
    pub const CHECKPOINT_DISCARDED: &'static str = "CHECKPOINT_DISCARDED";
    /// The code of the warning `start` emits when it archives a finished run and
    /// starts the id afresh (every unit will be done again).
    pub const RUN_FINISHED_STARTED_FRESH: &'static str = "RUN_FINISHED_STARTED_FRESH";
    /// The code of the warning `start` emits when it resumes a live run and some
    /// of what it was given (task, units, dependencies, budgets, launch) differs
    /// from the run: a resumed run keeps its own; `changed` names what was ignored.
    pub const START_ARGS_IGNORED: &'static str = "START_ARGS_IGNORED";
    /// The code of the warning a `spend` gives once its budget's spending has
    /// reached the budget's limit (the spend is recorded all the same).
    pub const BUDGET_EXCEEDED: &'static str = "BUDGET_EXCEEDED";
    /// The code of the warning a long-lived writer (`apply`, a server) gives
    /// when it defers its automatic compaction for want of room on the disk
    /// (FORMAT.md §5.4); appends go on.
    pub const COMPACTION_DEFERRED: &'static str = "COMPACTION_DEFERRED";
}

/// What `start` did.
#[derive(Debug)]
pub struct Started {
    /// The run, open for writing.
    pub run: Run,
    /// True when the live run was restored; false when started fresh.
    pub resumed: bool,
    /// Warnings (a discarded checkpoint).
    pub warnings: Vec<Warning>,
}

impl Runs {
    fn open_store(&self, id: &str, create: bool) -> Result<Run> {
        self.open_store_as(id, create, false)
    }

    /// `deferred`: [`Store::open_deferred`], which writes nothing before the
    /// first accepted append.
    pub(crate) fn open_store_as(&self, id: &str, create: bool, deferred: bool) -> Result<Run> {
        let dir = self.run_dir(id)?;
        if create {
            self.ensure_layout()?;
        }
        // A run missing here but present under the remote root: a new host.
        #[cfg(feature = "remote")]
        crate::remote::restore_if_missing(&dir, id, self.key(), self.remote_root.as_ref())
            .map_err(|e| remote_err("restore the run from its remote", &dir, e))?;
        let opts = self.store_options(create, None);
        // A deferred open applies one change: a one-shot writer (FORMAT.md
        // §5.8), which lets the lock go once its record is written and shares
        // its fdatasync with other writer processes.
        let opts = engine::Options {
            one_shot: deferred,
            ..opts
        };
        #[cfg(feature = "remote")]
        let opts = {
            // A shipped run keeps its delta tables (the shipper sends them with
            // the full table under them, FORMAT.md §13.4), so its writer's
            // overlay stays as small as an unshipped run's.
            let shipped = crate::remote::configured(&dir, self.remote_root.as_ref());
            engine::Options {
                // A shipped run's writer holds the lock across its ship round.
                one_shot: opts.one_shot && !shipped,
                ..opts
            }
        };
        let opened = if deferred {
            Store::<Keyed<RunKeyed>>::open_deferred(&dir, opts)
        } else {
            Store::<Keyed<RunKeyed>>::open(&dir, opts)
        };
        match opened {
            Ok(store) => Ok(Run {
                id: id.to_string(),
                #[cfg(feature = "remote")]
                remote: crate::remote::attach_root(store.dir(), id, self.remote_root.as_ref())
                    .and_then(|()| crate::remote::Replication::load(store.dir()))
                    .map_err(|e| remote_err("read the run's remote", store.dir(), e))?,
                store,
                clock: self.clock.clone(),
            }),
            Err(engine::Error::NotFound { .. }) => Err(self.not_found(id)),
            Err(e) => Err(RunError::engine(id, e)),
        }
    }

    /// Opens an existing run for writing, waiting for the lock as configured.
    pub fn open(&self, id: &str) -> Result<Run> {
        self.open_store(id, false)
    }

    /// Creates run `spec.id`. Refused when a live run with that id exists; a
    /// finished one is archived first.
    pub fn init(&self, spec: InitSpec) -> Result<Run> {
        spec.check().map_err(|e| RunError::Invalid(e.to_string()))?;
        match self.read_run(&spec.id) {
            Ok(r) if r.view().header().is_initialized() && !r.view().header().is_closed() => {
                return Err(refused_live(r.view().header()));
            }
            Ok(_) | Err(RunError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let id = spec.id.clone();
        let run = self.open_store(&id, true)?;
        let doc = run.read(|v| v.header().clone());
        if doc.is_initialized() && !doc.is_closed() {
            // Another init or start made it between the check above and the lock.
            return Err(created_meanwhile(&id));
        }
        let run = if doc.is_closed() {
            self.archive(&id)?;
            drop(run);
            let run = self.open_store(&id, true)?;
            if run.read(|v| v.header().is_initialized()) {
                return Err(created_meanwhile(&id));
            }
            run
        } else {
            run
        };
        match run.apply(Change::Init(spec)) {
            Ok(_) => Ok(run),
            // A failed create (an fsync or a write failed: nothing acknowledged)
            // must not block its retry. The store held no run before (no init
            // record, so no transition at all), so its files go, under the lock
            // still held: the retry finds no run and starts over.
            Err(e) if !e.is_refused() => {
                self.discard_uninitialized(&id);
                drop(run);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Best effort: removes every file of run `id`'s store but its `LOCK`
    /// (held by the caller), leaving the empty directory that reads as no run.
    /// Only for a store that holds no initialized run.
    fn discard_uninitialized(&self, id: &str) {
        let Ok(dir) = self.run_dir(id) else { return };
        let Ok(names) = self.vfs.list(&dir) else {
            return;
        };
        for n in names.iter().filter(|n| *n != "LOCK") {
            let _ = self.vfs.remove(&dir.join(n));
        }
        // Best effort (the files are gone either way); EINTR is retried.
        while let Err(e) = self.vfs.sync_dir(&dir) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                break;
            }
        }
    }

    /// Restore-or-create. The live run with `spec.id` is returned when its
    /// fingerprint equals `spec.fingerprint`; when it differs the old run is
    /// archived and a fresh one started, with a [`Warning::CHECKPOINT_DISCARDED`] warning
    /// naming the changed parts. A finished run is archived and started fresh.
    pub fn start(&self, spec: InitSpec) -> Result<Started> {
        spec.check().map_err(|e| RunError::Invalid(e.to_string()))?;
        let id = spec.id.clone();
        let run = self.open_store(&id, true)?;
        let doc = run.read(|v| v.header().clone());
        let mut warnings = vec![];
        let run = if !doc.is_initialized() {
            run
        } else if doc.is_closed() {
            // A finished run is history: the identical start begins fresh, and
            // says so, since every unit will be done again.
            let to = self.archive(&id)?;
            drop(run);
            warnings.push(Warning {
                code: Warning::RUN_FINISHED_STARTED_FRESH.to_string(),
                message: format!(
                    "run {id} had finished ({}); it was archived to {} and a fresh run started (every unit will run again; the archived run can be moved back under its id)",
                    doc.status,
                    to.display()
                ),
                changed: vec![],
                archived_to: to.display().to_string(),
            });
            self.open_store(&id, true)?
        } else if doc.fingerprint == spec.fingerprint {
            let ignored = run.read(|v| ignored_by_resume(v, &spec))?;
            if !ignored.is_empty() {
                warnings.push(Warning {
                    code: Warning::START_ARGS_IGNORED.to_string(),
                    message: format!(
                        "run {id} was resumed as it is; what differs from it was ignored: {}",
                        ignored.join("; ")
                    ),
                    changed: ignored,
                    archived_to: String::new(),
                });
            }
            return Ok(Started {
                run,
                resumed: true,
                warnings,
            });
        } else {
            let changed = changed_parts(&doc.fingerprint, &spec.fingerprint);
            // Archive while holding the lock: no writer can slip in between.
            let to = self.archive(&id)?;
            drop(run);
            warnings.push(Warning {
                code: Warning::CHECKPOINT_DISCARDED.to_string(),
                message: format!(
                    "run {id}: fingerprint changed ({}: was {:?}, now {:?}); the old run was archived and a fresh one started",
                    changed.join(", "),
                    format_parts(&doc.fingerprint),
                    format_parts(&spec.fingerprint)
                ),
                changed,
                archived_to: to.display().to_string(),
            });
            self.open_store(&id, true)?
        };
        run.apply(Change::Init(spec))?;
        Ok(Started {
            run,
            resumed: false,
            warnings,
        })
    }
}

fn created_meanwhile(id: &str) -> RunError {
    RunError::Invalid(format!(
        "run {id:?} was created meanwhile by another process (a concurrent init or start); nothing was written"
    ))
}

/// What `spec` asks for that the live run it resumes does not have: a resumed
/// run keeps its task, units, dependencies, budgets and launch. Looks up only
/// the units `spec` names.
fn ignored_by_resume(view: &super::view::RunView<'_>, spec: &InitSpec) -> Result<Vec<String>> {
    let doc = view.header();
    let mut out = vec![];
    if spec.task != doc.task {
        out.push(format!(
            "task {:?} (the run's is {:?})",
            spec.task, doc.task
        ));
    }
    let mut new_units = vec![];
    for u in spec.units.iter().chain(spec.deps.keys()) {
        if view.unit(u)?.is_none() && !new_units.contains(u) {
            new_units.push(u.clone());
        }
    }
    for (u, deps) in &spec.deps {
        if let Some(unit) = view.unit(u)?
            && deps.iter().any(|d| !unit.depends_on.contains(d))
        {
            out.push(format!("dependencies of unit {u:?}"));
        }
    }
    if !new_units.is_empty() {
        let shown: Vec<&str> = new_units.iter().take(5).map(String::as_str).collect();
        let more = new_units.len().saturating_sub(shown.len());
        out.push(format!(
            "{} unit(s) the run does not have: {}{}",
            new_units.len(),
            shown.join(", "),
            if more > 0 {
                format!(" … and {more} more")
            } else {
                String::new()
            }
        ));
    }
    for (name, b) in &spec.budgets {
        match doc.budgets.get(name) {
            Some(have) if have.limit == b.limit && have.owner == b.owner => {}
            Some(_) => out.push(format!("budget {name:?} (limit or owner differs)")),
            None => out.push(format!("budget {name:?} (the run has none)")),
        }
    }
    if spec.launch.is_some() && spec.launch != doc.launch {
        out.push("launch".to_string());
    }
    Ok(out)
}

#[cfg(feature = "remote")]
fn remote_err(op: &'static str, dir: &std::path::Path, e: crate::remote::RemoteError) -> RunError {
    RunError::remote(op, dir.display().to_string(), e)
}

fn refused_live(doc: &RunDoc) -> RunError {
    let why = super::rule_error::RuleError::AlreadyInitialized { id: doc.id.clone() };
    RunError::Refused {
        id: doc.id.clone(),
        source: why,
    }
}
