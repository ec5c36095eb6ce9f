//! Opening runs for writing: `open`, `init`, restore-or-create `start`, and
//! `change` (one transition: one replay, and a refusal touches no segment).

use super::doc::RunDoc;
use super::error::{Result, RunError};
use super::fingerprint::{changed_parts, format_parts};
use super::handle::Run;
use super::runs::Runs;
use super::transition::{Change, InitSpec, RunKeyed, check_init};
use crate::engine::{self, Keyed, RealFs, Store};
use serde::Serialize;

/// The code of the warning `start` emits when it discards a run.
pub const CHECKPOINT_DISCARDED: &str = "CHECKPOINT_DISCARDED";

/// A warning for the caller (also printed on stderr by the CLI).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Warning {
    /// A stable code, e.g. [`CHECKPOINT_DISCARDED`].
    pub code: String,
    /// A sentence for humans.
    pub message: String,
    /// The fingerprint parts that changed.
    pub changed: Vec<String>,
    /// Where the discarded run was moved.
    pub archived_to: String,
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
    fn open_store_as(&self, id: &str, create: bool, deferred: bool) -> Result<Run> {
        let dir = self.run_dir(id)?;
        if create {
            self.ensure_layout()?;
        }
        // A run missing here but present at $RUNLOG_REMOTE_ROOT/<id>: a new host.
        #[cfg(feature = "remote")]
        crate::remote::restore_if_missing(&dir, id, self.key())
            .map_err(|e| remote_err("restore the run from its remote", &dir, e))?;
        let opts = self.store_options(create, None);
        let opened = if deferred {
            Store::<Keyed<RunKeyed>>::open_deferred(&dir, opts)
        } else {
            Store::<Keyed<RunKeyed>>::open(&dir, opts)
        };
        match opened {
            Ok(store) => Ok(Run {
                id: id.to_string(),
                #[cfg(feature = "remote")]
                remote: crate::remote::attach_env(store.dir(), id)
                    .and_then(|()| crate::remote::RunRemote::load(store.dir()))
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

    /// Applies one change to run `id`: one replay (the writer's open, waiting
    /// for the lock), then the append, where the rules decide. The open defers
    /// every write until the change is accepted, so a refused change leaves every
    /// segment and snapshot as it was (only the `LOCK` file's holder text is
    /// rewritten); an accepted one writes the rewrite the open owes together with
    /// its record, under one fdatasync in the common case.
    pub fn change(&self, id: &str, change: Change) -> Result<u64> {
        self.open_store_as(id, false, true)?.apply(change)
    }

    /// Creates run `spec.id`. Refused when a live run with that id exists; a
    /// finished one is archived first.
    pub fn init(&self, spec: InitSpec) -> Result<Run> {
        check_init(&spec).map_err(|e| RunError::Invalid(e.to_string()))?;
        match self.read_run(&spec.id) {
            Ok(r) if r.view().header().is_initialized() && !r.view().header().is_closed() => {
                return Err(refused_live(r.view().header()));
            }
            Ok(_) | Err(RunError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let run = self.open_store(&spec.id, true)?;
        let doc = run.read(|v| v.header().clone());
        let run = if doc.is_closed() {
            self.archive(&spec.id)?;
            drop(run);
            self.open_store(&spec.id, true)?
        } else {
            run
        };
        run.apply(Change::Init(spec))?;
        Ok(run)
    }

    /// Restore-or-create. The live run with `spec.id` is returned when its
    /// fingerprint equals `spec.fingerprint`; when it differs the old run is
    /// archived and a fresh one started, with a [`CHECKPOINT_DISCARDED`] warning
    /// naming the changed parts. A finished run is archived and started fresh.
    pub fn start(&self, spec: InitSpec) -> Result<Started> {
        check_init(&spec).map_err(|e| RunError::Invalid(e.to_string()))?;
        let id = spec.id.clone();
        let run = self.open_store(&id, true)?;
        let doc = run.read(|v| v.header().clone());
        let mut warnings = vec![];
        let run = if !doc.is_initialized() {
            run
        } else if doc.is_closed() {
            // A finished run is history: the identical start begins fresh.
            self.archive(&id)?;
            drop(run);
            self.open_store(&id, true)?
        } else if doc.fingerprint == spec.fingerprint {
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
                code: CHECKPOINT_DISCARDED.to_string(),
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

#[cfg(feature = "remote")]
fn remote_err(op: &'static str, dir: &std::path::Path, e: crate::remote::RemoteError) -> RunError {
    RunError::io(
        op,
        dir,
        std::io::Error::other(crate::remote::error_chain(&e)),
    )
}

fn refused_live(doc: &RunDoc) -> RunError {
    let why = super::transition::RuleError::AlreadyInitialized { id: doc.id.clone() };
    RunError::engine(&doc.id, engine::Error::Refused(Box::new(why)))
}

/// Reads run state lock-free from a directory (for tools addressing a path).
pub fn read_dir_state(dir: &std::path::Path) -> engine::Result<RunDoc> {
    let (state, _) = engine::read_state::<Keyed<RunKeyed>>(&RealFs, dir)?;
    let id = state.header().doc.id.clone();
    super::view::RunView::new(&id, &state)
        .to_doc()
        .map_err(|e| match e {
            RunError::Engine { source, .. } => source,
            other => engine::Error::Corrupt {
                path: dir.to_path_buf(),
                offset: 0,
                seq: None,
                reason: other.to_string(),
            },
        })
}
