//! How a store stops: the interval flusher (`SyncPolicy::Interval`'s fsync
//! thread), [`Store::close`], which returns the final sync's error, and the
//! drop, which does the same and counts a failure it cannot return. A closing
//! writer first flushes a delta that is due (FORMAT.md §14.4).

use super::{Store, compact};
use crate::engine::error::Result;
use crate::engine::machine::Machine;
use crate::engine::mutex::lock;
use crate::engine::options::SyncPolicy;
use crate::engine::shared::Shared;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

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
