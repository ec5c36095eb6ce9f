//! Whole-state checkpoints at safe points, beside the per-unit transitions.
//!
//! `restore(fingerprint)` returns the last saved state of the live run with
//! that fingerprint, or nothing (a changed fingerprint discards it, with a
//! warning). `checkpoint(state)` saves the state durably and only then looks
//! for a stop request (SIGTERM, an exhausted budget, a cancel), so work stops
//! only at a safe point, never between a write and the checkpoint recording it.

use super::doc::{Fingerprint, RunStatus};
use super::error::{Result, RunError};
use super::handle::Run;
use super::json::Json;
use super::open::Warning;
use super::runs::Runs;
use super::transition::{Change, InitSpec};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// Why work should stop.
#[derive(Debug, Clone, PartialEq)]
pub enum StopReason {
    /// SIGTERM arrived (or the caller's signal handler set the flag).
    Signal,
    /// The caller cancelled.
    Cancelled,
    /// A budget ran out.
    BudgetExhausted {
        /// The budget.
        budget: String,
        /// Its owner.
        owner: String,
    },
}

const NONE: u8 = 0;
const SIGNAL: u8 = 1;
const CANCEL: u8 = 2;

/// A shared stop request. Clones share it; wire it to a signal handler or a
/// cancel button. With [`StopFlag::watching_sigterm`] it also reports the
/// process-wide SIGTERM flag set by its SIGTERM handler.
#[derive(Debug, Clone, Default)]
pub struct StopFlag {
    state: Arc<AtomicU8>,
    sigterm: bool,
}

impl StopFlag {
    /// A flag nobody has set.
    pub fn new() -> StopFlag {
        StopFlag::default()
    }

    /// A flag that also reports SIGTERM (installs the handler).
    pub fn watching_sigterm() -> StopFlag {
        let installed = crate::sys::install_sigterm_handler();
        StopFlag {
            state: Arc::default(),
            sigterm: installed,
        }
    }

    /// Asks for a stop because of a signal.
    pub fn signal(&self) {
        let _ = self
            .state
            .compare_exchange(NONE, SIGNAL, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Asks for a stop because the caller cancelled.
    pub fn cancel(&self) {
        let _ = self
            .state
            .compare_exchange(NONE, CANCEL, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The stop asked for, if any.
    pub fn requested(&self) -> Option<StopReason> {
        if self.sigterm && crate::sys::sigterm_received() {
            return Some(StopReason::Signal);
        }
        match self.state.load(Ordering::SeqCst) {
            SIGNAL => Some(StopReason::Signal),
            CANCEL => Some(StopReason::Cancelled),
            _ => None,
        }
    }
}

/// A run used through whole-state checkpoints.
#[derive(Debug)]
pub struct Checkpoints {
    run: Run,
    stop: StopFlag,
}

/// What `restore` found.
#[derive(Debug)]
pub struct Restored<S> {
    /// The run, for checkpoints and per-unit transitions.
    pub checkpoints: Checkpoints,
    /// The last saved state, or `None` when starting over.
    pub state: Option<S>,
    /// A [`super::Warning::CHECKPOINT_DISCARDED`] warning when the fingerprint changed.
    pub warnings: Vec<Warning>,
}

impl Runs {
    /// Restores the last checkpoint of run `id` when its fingerprint matches,
    /// else starts it fresh (see [`Runs::start`]).
    pub fn restore<S: DeserializeOwned>(
        &self,
        id: &str,
        task: &str,
        fingerprint: Fingerprint,
        stop: StopFlag,
    ) -> Result<Restored<S>> {
        let started = self.start(InitSpec {
            id: id.to_string(),
            task: task.to_string(),
            fingerprint,
            ..InitSpec::default()
        })?;
        let saved = started.run.read(|d| d.header().checkpoint.clone());
        let state =
            match saved {
                Some(c) => Some(serde_json::from_value(c.state.0).map_err(|source| {
                    RunError::Checkpoint {
                        id: id.to_string(),
                        source,
                    }
                })?),
                None => None,
            };
        Ok(Restored {
            checkpoints: Checkpoints {
                run: started.run,
                stop,
            },
            state,
            warnings: started.warnings,
        })
    }
}

impl Checkpoints {
    /// Saves `state` durably, then says whether to stop: `None`, keep
    /// working; `Some(why)`, stop now (the state just saved is the one to
    /// resume from).
    pub fn checkpoint<S: Serialize>(&self, state: &S) -> Result<Option<StopReason>> {
        let value = serde_json::to_value(state)
            .map_err(|e| RunError::Invalid(format!("checkpoint state is not JSON: {e}")))?;
        self.run.apply(Change::Checkpoint { state: Json(value) })?;
        // The state is saved: only now may a stop take effect.
        if let Some(r) = self.stop.requested() {
            return Ok(Some(r));
        }
        let exhausted = self.run.read(|d| {
            d.header()
                .exhausted_budget()
                .map(|(n, b)| (n.clone(), b.owner.clone()))
        });
        Ok(exhausted.map(|(budget, owner)| StopReason::BudgetExhausted { budget, owner }))
    }

    /// The run underneath, for per-unit transitions and spending.
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// The stop flag.
    pub fn stop_flag(&self) -> &StopFlag {
        &self.stop
    }

    /// Marks the work complete: finalizes the run `done`, so the identical
    /// `restore` afterwards starts fresh.
    pub fn complete(self, result: Option<&str>) -> Result<()> {
        self.run.finalize(RunStatus::Done, result).map(|_| ())
    }

    /// Abandons the work: finalizes the run `aborted`.
    pub fn cancel(self, reason: Option<&str>) -> Result<()> {
        self.run.finalize(RunStatus::Aborted, reason).map(|_| ())
    }
}
