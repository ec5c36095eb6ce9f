//! `Run`: a run open for writing. Holds the run's writer lock until dropped;
//! every method stamps its change with the clock and appends it durably.

use super::clock::Clock;
use super::doc::{PhaseStatus, RunDoc, RunStatus, Unit, UnitStatus};
use super::error::{Result, RunError};
use super::json::Json;
use super::machine::RunKeyed;
use super::resume::ResumeSet;
use super::rule_error::RuleError;
use super::transition::{BudgetSpec, Change, Transition};
use super::units::UnitCounts;
use super::view::RunView;
use crate::engine::{CompactReport, Keyed, RecoveryReport, Stats, Store};
use std::path::Path;
use std::sync::Arc;

/// What [`Run::start_units`] did with one unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Now `in_progress`, durably, at this seq.
    Started(u64),
    /// Already done: left as it is, nothing written.
    AlreadyDone,
}

/// A run open for writing.
pub struct Run {
    pub(crate) id: String,
    /// The run's remote (its `REMOTE` file), shipped to after each accepted
    /// change; declared before `store` so it finishes shipping (async) before
    /// the store's writer lock is released.
    #[cfg(feature = "remote")]
    pub(crate) remote: Option<crate::remote::Replication>,
    pub(crate) store: Store<Keyed<RunKeyed>>,
    pub(crate) clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("id", &self.id)
            .field("dir", &self.store.dir())
            .finish_non_exhaustive()
    }
}

impl Run {
    /// The run id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The run's directory.
    pub fn dir(&self) -> &Path {
        self.store.dir()
    }

    /// The run's remote as this handle ships to it: this host's epoch, the
    /// seq durable here, the seq the remote holds and the lag between them
    /// (under `async`, what losing this host would lose). `None` for a run
    /// without a remote, and before this handle's first accepted change
    /// starts shipping. [`Runs::remote_status`](super::Runs::remote_status)
    /// reads the same status from any process.
    #[cfg(feature = "remote")]
    pub fn remote_status(&self) -> Option<crate::remote::RemoteStatus> {
        self.remote
            .as_ref()
            .and_then(crate::remote::Replication::status)
    }

    /// The whole current document, units included (memory in proportion to
    /// the run; [`Run::read`] looks things up instead).
    pub fn doc(&self) -> Result<RunDoc> {
        self.read(|v| v.to_doc())
    }

    /// Reads the current state by lookup.
    pub fn read<R>(&self, f: impl FnOnce(&RunView<'_>) -> R) -> R {
        self.store.read(|s| f(&RunView::new(&self.id, s)))
    }

    /// One unit, by name.
    pub fn unit(&self, name: &str) -> Result<Option<Unit>> {
        self.read(|v| v.unit(name))
    }

    /// How many units have each status.
    pub fn counts(&self) -> UnitCounts {
        self.read(|v| v.counts())
    }

    /// The current resume set.
    pub fn resume_set(&self) -> Result<ResumeSet> {
        self.read(|v| v.resume_set())
    }

    /// The seq of the run's last accepted change (0 when none).
    pub fn last_seq(&self) -> u64 {
        self.store.last_seq()
    }

    /// What recovery found when this handle opened the run.
    pub fn recovery(&self) -> &RecoveryReport {
        self.store.recovery()
    }

    /// The run store's counters since this handle opened it.
    pub fn stats(&self) -> &Stats {
        self.store.stats()
    }

    /// Why the run's last automatic compaction was not started (too little
    /// room on the disk, FORMAT.md §5.4), until a compaction runs again:
    /// [`Store::compaction_deferred`].
    pub fn compaction_deferred(&self) -> Option<String> {
        self.store.compaction_deferred()
    }

    /// The error of the run's last background compaction, or why the last
    /// automatic one was deferred: [`Store::last_compaction_error`].
    pub fn last_compaction_error(&self) -> Option<String> {
        self.store.last_compaction_error()
    }

    /// The engine store underneath: test support (feature `sim`), not the API.
    #[cfg(feature = "sim")]
    #[doc(hidden)]
    pub fn store(&self) -> &Store<Keyed<RunKeyed>> {
        &self.store
    }

    /// Stamps `change` with the clock's current time.
    pub fn stamp(&self, change: Change) -> Transition {
        Transition {
            at: self.clock.now(),
            change,
        }
    }

    /// Applies one change durably; returns its seq. A refused change writes nothing.
    pub fn apply(&self, change: Change) -> Result<u64> {
        let seq = self
            .store
            .append(&self.stamp(change))
            .map_err(|e| RunError::engine(&self.id, e))?;
        self.shipped(seq).map_err(|f| ship_error(&f))?;
        Ok(seq)
    }

    /// Hands an accepted seq to the run's remote (sync: returns once shipped).
    #[cfg(feature = "remote")]
    fn shipped(&self, seq: u64) -> std::result::Result<(), ShipFailure> {
        // It names the remote's URL: where the change failed to go, not the
        // local directory it is durable in.
        match &self.remote {
            Some(r) => r
                .acknowledged(seq)
                .map_err(|e| (r.url().to_string(), Arc::new(e))),
            None => Ok(()),
        }
    }

    #[cfg(not(feature = "remote"))]
    fn shipped(&self, _seq: u64) -> std::result::Result<(), ShipFailure> {
        Ok(())
    }

    /// Hands the snapshot at `k` to the run's remote (returns once shipped).
    #[cfg(feature = "remote")]
    fn snapshot_shipped(&self, k: u64) -> std::result::Result<(), ShipFailure> {
        match &self.remote {
            Some(r) => r
                .ship_snapshot(k)
                .map_err(|e| (r.url().to_string(), Arc::new(e))),
            None => Ok(()),
        }
    }

    #[cfg(not(feature = "remote"))]
    fn snapshot_shipped(&self, _k: u64) -> std::result::Result<(), ShipFailure> {
        Ok(())
    }

    /// Applies changes in order with one write and one fsync; each is accepted
    /// or refused on its own.
    pub fn apply_batch(&self, changes: Vec<Change>) -> Vec<Result<u64>> {
        let at = self.clock.now();
        let ts: Vec<Transition> = changes
            .into_iter()
            .map(|change| Transition {
                at: at.clone(),
                change,
            })
            .collect();
        let local = self.store.append_batch(&ts);
        let top = local.iter().filter_map(|r| r.as_ref().ok()).copied().max();
        // One failed ship fails every accepted change it covered, each with
        // the same typed error (a `Fenced` stays `Fenced`).
        let failed = top.and_then(|s| self.shipped(s).err());
        local
            .into_iter()
            .map(|r| match (r, &failed) {
                (Err(e), _) => Err(RunError::engine(&self.id, e)),
                (Ok(_), Some(f)) => Err(ship_error(f)),
                (Ok(s), None) => Ok(s),
            })
            .collect()
    }

    /// Sets a unit's status (adding it if new); `note` and `deps` replace when given.
    pub fn set_unit(
        &self,
        unit: &str,
        status: UnitStatus,
        note: Option<&str>,
        deps: Option<&[String]>,
    ) -> Result<u64> {
        self.apply(Change::Unit {
            unit: unit.to_string(),
            status,
            note: note.map(str::to_string),
            deps: deps.map(<[String]>::to_vec),
        })
    }

    /// Marks `units` in progress with one write and one fsync, leaving out
    /// those already done: the call a resumed program repeats unchanged after
    /// a kill, where setting a done unit to `in_progress` would be refused.
    /// Returns, for each unit in order, [`Claim::Started`] with its seq,
    /// [`Claim::AlreadyDone`] (nothing written for it), or the error that
    /// refused it (a dependency not done, a bad name, a closed run); each
    /// unit is accepted or refused on its own, as in [`Run::apply_batch`].
    pub fn start_units<S: AsRef<str>>(&self, units: &[S]) -> Vec<Result<Claim>> {
        let mut out: Vec<Option<Result<Claim>>> = Vec::with_capacity(units.len());
        let mut changes = Vec::new();
        for name in units {
            let name = name.as_ref();
            match self.unit(name) {
                Ok(Some(u)) if u.status == UnitStatus::Done => {
                    out.push(Some(Ok(Claim::AlreadyDone)));
                }
                Err(e) => out.push(Some(Err(e))),
                Ok(_) => {
                    out.push(None);
                    changes.push(Change::Unit {
                        unit: name.to_string(),
                        status: UnitStatus::InProgress,
                        note: None,
                        deps: None,
                    });
                }
            }
        }
        // Nothing to write (every unit done): no write, no fsync.
        let results = if changes.is_empty() {
            Vec::new()
        } else {
            self.apply_batch(changes)
        };
        let mut written = results.into_iter();
        out.into_iter()
            .map(|slot| {
                slot.unwrap_or_else(|| match written.next() {
                    Some(Ok(seq)) => Ok(Claim::Started(seq)),
                    // Another thread of this process finished it between
                    // the look-up and the write: done, as if seen done.
                    Some(Err(RunError::Refused {
                        source: RuleError::Demote { .. },
                        ..
                    })) => Ok(Claim::AlreadyDone),
                    Some(Err(e)) => Err(e),
                    None => unreachable!("one result per change written"),
                })
            })
            .collect()
    }

    /// Sets a phase's status.
    pub fn set_phase(&self, phase: &str, status: PhaseStatus) -> Result<u64> {
        self.apply(Change::Phase {
            phase: phase.to_string(),
            status,
        })
    }

    /// Adds open items.
    pub fn add_items(&self, items: Vec<serde_json::Value>) -> Result<u64> {
        self.apply(Change::Items {
            items: items.into_iter().map(Json).collect(),
        })
    }

    /// Resolves an open item.
    pub fn resolve_item(&self, id: &str, note: Option<&str>) -> Result<u64> {
        self.apply(Change::Resolve {
            id: id.to_string(),
            note: note.map(str::to_string),
        })
    }

    /// Declares a budget (or changes its limit or owner; spending is kept).
    pub fn declare_budget(&self, name: &str, limit: Option<f64>, owner: &str) -> Result<u64> {
        self.apply(Change::Budget {
            name: name.to_string(),
            spec: BudgetSpec {
                limit,
                owner: owner.to_string(),
            },
        })
    }

    /// Records spending against a budget.
    pub fn spend(&self, budget: &str, amount: f64) -> Result<u64> {
        self.apply(Change::Spend {
            budget: budget.to_string(),
            amount,
        })
    }

    /// Closes the run.
    pub fn finalize(&self, status: RunStatus, result: Option<&str>) -> Result<u64> {
        self.apply(Change::Finalize {
            status,
            result: result.map(str::to_string),
        })
    }

    /// Snapshots the run and trims its log; a shipped run then ships that
    /// snapshot, whatever its policy, so that a restore fetches it rather
    /// than the log it folded (FORMAT.md §13.4).
    pub fn compact(&self) -> Result<CompactReport> {
        let report = self
            .store
            .compact()
            .map_err(|e| RunError::engine(&self.id, e))?;
        self.snapshot_shipped(report.snapshot_seq)
            .map_err(|f| ship_error(&f))?;
        Ok(report)
    }
}

/// Why shipping to the run's remote failed: its URL and the remote tier's
/// error, shared by every change the ship covered.
#[cfg(feature = "remote")]
type ShipFailure = (String, Arc<crate::remote::RemoteError>);
/// Without the remote tier nothing is shipped, so nothing fails.
#[cfg(not(feature = "remote"))]
type ShipFailure = std::convert::Infallible;

fn ship_error(f: &ShipFailure) -> RunError {
    #[cfg(feature = "remote")]
    {
        RunError::remote("ship to remote", f.0.clone(), f.1.clone())
    }
    #[cfg(not(feature = "remote"))]
    match *f {}
}
