//! Opening runs for writing: `open`, `init`, restore-or-create `start`, and
//! `change` (one transition, checked lock-free first so a refusal touches nothing).

use super::doc::RunDoc;
use super::error::{Result, RunError};
use super::fingerprint::{changed_parts, format_parts};
use super::handle::Run;
use super::runs::Runs;
use super::transition::{Change, InitSpec, RunKeyed, Transition, check_init};
use crate::engine::{self, Keyed, Machine, RealFs, Store};
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
        let dir = self.run_dir(id)?;
        if create {
            self.ensure_layout()?;
        }
        match Store::<Keyed<RunKeyed>>::open(&dir, self.store_options(create, None)) {
            Ok(store) => Ok(Run {
                id: id.to_string(),
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

    /// Applies one change to run `id`. The change is first tried, lock-free, on
    /// the state as read now: a refusal returns before the lock is even taken,
    /// so no byte of the run changes. Then the run is opened (waiting for the
    /// lock) and the change appended, where the rules decide again.
    pub fn change(&self, id: &str, change: Change) -> Result<u64> {
        let mut read = self.read_run(id)?;
        let probe = Transition {
            at: self.clock.now(),
            change,
        };
        Keyed::<RunKeyed>::apply(&mut read.state, &probe).map_err(|e| {
            let e = Keyed::<RunKeyed>::take_fault(&mut read.state)
                .unwrap_or_else(|| engine::Error::Refused(Box::new(e)));
            RunError::engine(id, e)
        })?;
        self.open(id)?.apply(probe.change)
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
