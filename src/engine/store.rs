//! The writer: [`Store`], a state machine kept in memory whose transitions are
//! appended to the log and made durable under the sync policy. This file holds
//! the type, its small methods, the interval flusher, and close/drop; opening
//! is in `open.rs`, appending in `append.rs`, rotation in `segment.rs`, and
//! compaction (which the store triggers through `compact::run` and
//! `compact::spawn_background`) in `compact.rs`.

use super::Machine;
use super::compact::{self, CompactReport};
use super::error::Result;
use super::format::Codec;
use super::load::RecoveryReport;
use super::mutex::lock;
use super::options::{Stats, SyncPolicy};
use super::shared::Shared;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

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

pub(crate) fn spawn_flusher<M: Machine>(
    weak: std::sync::Weak<Shared<M>>,
    every: Duration,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        loop {
            let Some(s) = weak.upgrade() else { return };
            if s.stop.wait(every) {
                return;
            }
            let last = {
                let g = lock(&s.inner);
                if g.poison.is_set() {
                    return;
                }
                // A deferred open with nothing written has nothing to fsync.
                g.prepared().then(|| g.live.last_seq())
            };
            if let Some(last) = last
                && s.wait_durable(last).is_err()
            {
                return;
            }
        }
    })
}

impl<M: Machine> Drop for Store<M> {
    fn drop(&mut self) {
        self.shared.stop.stop();
        if let Some(h) = self.flusher.take() {
            let _ = h.join();
        }
        compact::wait_idle(&self.shared);
        self.flush_due_delta();
        // A deferred open that wrote nothing leaves the store as it found it.
        if self.needs_final_sync() && self.sync().is_err() {
            // Drop cannot return it: counted, and `close` returns it instead.
            self.shared
                .stats
                .close_sync_failures
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<M: Machine> Store<M> {
    /// A closing writer leaves its tail flushed (FORMAT.md §14.4): when a
    /// delta is due, because the background compaction that ended last began
    /// before the last appends, it is written now, after every acknowledgement,
    /// so the next process to open the store does not pay for it. A full merge
    /// that is due is left to the next long-lived writer. A failure is kept for
    /// `last_compaction_error` and loses nothing (the log still holds the tail).
    fn flush_due_delta(&self) {
        let due = !self.shared.released() && {
            let g = lock(&self.shared.inner);
            !g.poison.is_set()
                && g.prepared()
                && matches!(
                    self.shared.next_compaction(&g, g.live.last_seq()),
                    Some(Some(_))
                )
        };
        if !self.closed && due {
            let _ = compact::run(&self.shared, compact::Kind::Policy);
        }
    }

    fn needs_final_sync(&self) -> bool {
        !self.closed
            && matches!(
                self.shared.opts.sync,
                SyncPolicy::Interval(_) | SyncPolicy::Never
            )
            && lock(&self.shared.inner).prepared()
    }

    /// Closes the store, returning what dropping it cannot: the final sync's
    /// error under `Interval` and `Never` (when it fails, appends acknowledged
    /// since the last sync may not be durable). Under `Always` and `Grouped`
    /// every acknowledged append is durable already and this is `Ok`.
    pub fn close(mut self) -> Result<()> {
        self.shared.stop.stop();
        if let Some(h) = self.flusher.take() {
            let _ = h.join();
        }
        compact::wait_idle(&self.shared);
        self.flush_due_delta();
        let r = if self.needs_final_sync() {
            self.sync()
        } else {
            Ok(())
        };
        self.closed = true;
        r
    }
}
