//! The writer, [`Store`]: a state machine kept in memory whose transitions
//! are appended to the log and made durable under the sync policy. This
//! folder holds every method of `Store`: the type and its small methods here,
//! opening in `open.rs`, appending in `append.rs`, the interval flusher, close
//! and drop in `close.rs`; and the compaction the store triggers
//! (`compact::run`, `compact::spawn_background`, `compact::wait_idle`) in
//! `compact.rs`, which works on the writer's shared state and never names
//! `Store`. The state the store's parts share, and its methods, are the
//! `shared` room's.

mod append;
mod close;
pub(crate) mod compact;
mod open;
mod trim;

use self::compact::CompactReport;
use crate::engine::error::Result;
use crate::engine::format::Codec;
use crate::engine::load::report::RecoveryReport;
use crate::engine::machine::Machine;
use crate::engine::mutex::lock;
use crate::engine::options::{Options, Stats};
use crate::engine::shared::Shared;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

/// A store open for writing. Holds the exclusive writer lock until dropped.
///
/// ```
/// # use runlog::engine::Machine;
/// # use serde::{Deserialize, Serialize};
/// # struct Sum;
/// # #[derive(Debug)] struct Zero;
/// # impl std::fmt::Display for Zero { fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result { f.write_str("zero") } }
/// # impl std::error::Error for Zero {}
/// # impl Machine for Sum {
/// #     type State = u64; type Transition = u64; type Error = Zero;
/// #     fn apply(s: &mut u64, t: &u64) -> Result<(), Zero> { if *t == 0 { return Err(Zero) } *s += t; Ok(()) }
/// # }
/// use runlog::engine::{Options, Store};
/// let dir = tempfile::tempdir()?;
/// let store = Store::<Sum>::open(dir.path().join("sum"), Options { create: true, ..Options::default() })?;
/// assert_eq!(store.append(&5)?, 1); // seq 1, durable when it returns
/// assert!(store.append(&0).unwrap_err().is_refused()); // refused: nothing written
/// let seqs: Vec<u64> = store.append_batch(&[1, 2]).into_iter().collect::<Result<_, _>>()?;
/// assert_eq!(seqs, [2, 3]); // one write, one fsync for both
/// assert_eq!(store.read(|s| *s), 8);
/// drop(store);
/// let again = Store::<Sum>::open(dir.path().join("sum"), Options::default())?;
/// assert_eq!((again.read(|s| *s), again.recovery().records_replayed), (8, 3));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Store<M: Machine> {
    pub(crate) shared: Arc<Shared<M>>,
    pub(crate) flusher: Option<JoinHandle<()>>,
    pub(crate) report: RecoveryReport,
    /// Set by [`Store::close`]: its final sync is done, the drop's is not needed.
    pub(crate) closed: bool,
}

impl<M: Machine> Store<M> {
    /// What recovery found when this store was opened.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.report
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The store's codec.
    pub fn codec(&self) -> Codec {
        self.shared.codec
    }

    /// Counters since open.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Reads the current state: every accepted transition, including any whose
    /// fsync is still in flight (those are acknowledged, or the store is poisoned).
    pub fn read<R>(&self, f: impl FnOnce(&M::State) -> R) -> R {
        f(lock(&self.shared.inner).live.state())
    }

    /// The seq of the last accepted transition (0 when none).
    pub fn last_seq(&self) -> u64 {
        lock(&self.shared.inner).live.last_seq()
    }

    /// Writes a snapshot of the current state and deletes the log it makes
    /// unnecessary. Runs on the calling thread; appenders are not blocked while the
    /// state is serialized. Waits for a background compaction to finish first.
    pub fn compact(&self) -> Result<CompactReport> {
        self.shared
            .prepare_or_poison(&mut lock(&self.shared.inner))?;
        compact::run(&self.shared, compact::Kind::Full)
    }

    /// Writes the log since the newest snapshot as a delta table over it
    /// (FORMAT.md §14), on the calling thread: an open then replays none of
    /// it. A state with no table to write it over (a whole-state machine, or
    /// no snapshot yet) gets a full snapshot instead. Deletes what the
    /// previous snapshot made redundant, as [`Store::compact`] does.
    pub fn flush(&self) -> Result<CompactReport> {
        self.shared
            .prepare_or_poison(&mut lock(&self.shared.inner))?;
        compact::run(&self.shared, compact::Kind::Delta)
    }

    /// The error of the last background compaction, if it failed, or why
    /// the last automatic compaction was deferred (see
    /// [`Store::compaction_deferred`]); `None` once a compaction succeeds.
    pub fn last_compaction_error(&self) -> Option<String> {
        self.shared.compaction.last_error()
    }

    /// Why the last automatic compaction was not started, until a
    /// compaction ends: the store's filesystem had less room than twice what
    /// it would write (the log keeps as much room as the compaction takes,
    /// and at least two preallocation steps; FORMAT.md §5.4). Appends go on; the log keeps every record; every
    /// later append looks again. Counted in [`Stats::compactions_deferred`].
    /// An explicit [`Store::compact`] or [`Store::flush`] is never deferred.
    pub fn compaction_deferred(&self) -> Option<String> {
        self.shared.compaction.deferred()
    }
}

/// Opens the store for writing (dropping a torn tail), writes a fresh snapshot of
/// the recovered state and compacts. Returns what recovery found and what
/// compaction did.
pub(crate) fn rebuild_snapshot<M: Machine>(
    dir: &Path,
    opts: Options,
) -> Result<(RecoveryReport, CompactReport)> {
    let store = Store::<M>::open(dir, opts)?;
    let report = store.recovery().clone();
    let c = store.compact()?;
    Ok((report, c))
}
