//! The compaction slot: at most one compaction runs at a time, a caller that
//! wants one waits for a running one, a background one is started only into
//! a free slot, and a failed background one leaves its error here. Its fields
//! are its own: compaction claims and frees the slot only through these calls.

use crate::engine::mutex::lock;
use std::sync::{Condvar, Mutex};
use std::thread::JoinHandle;

#[derive(Default)]
struct State {
    running: bool,
    last_error: Option<String>,
    /// `last_error` says why an automatic compaction was deferred.
    deferred: bool,
    handle: Option<JoinHandle<()>>,
}

/// The slot (see the module docs).
#[derive(Default)]
pub(crate) struct Slot {
    state: Mutex<State>,
    freed: Condvar,
}

impl Slot {
    /// Claims the slot, waiting for a running compaction to end first.
    pub(crate) fn claim(&self) {
        let mut c = lock(&self.state);
        while c.running {
            c = self.freed.wait(c).unwrap_or_else(|p| p.into_inner());
        }
        c.running = true;
    }

    /// Claims the slot if it is free, and then starts `work` on a thread
    /// (which must [`Slot::free`] it when done); false when one is running.
    pub(crate) fn spawn_if_free(&self, work: impl FnOnce() + Send + 'static) -> bool {
        let mut c = lock(&self.state);
        if c.running {
            return false;
        }
        c.running = true;
        if let Some(old) = c.handle.take() {
            // Finished already (running was false): reap it.
            let _ = old.join();
        }
        c.handle = Some(std::thread::spawn(work));
        true
    }

    /// Frees the slot, keeping the error of the compaction that held it (or
    /// clearing the last one when it succeeded), and wakes its waiters.
    pub(crate) fn free(&self, error: Option<String>) {
        self.release(error, false);
    }

    /// Frees the slot as [`Slot::free`] does after an automatic compaction
    /// that was deferred, not started: `why` is kept as the last error and
    /// as the deferral.
    pub(crate) fn free_deferred(&self, why: String) {
        self.release(Some(why), true);
    }

    fn release(&self, error: Option<String>, deferred: bool) {
        let mut c = lock(&self.state);
        c.running = false;
        c.last_error = error;
        c.deferred = deferred;
        drop(c);
        self.freed.notify_all();
    }

    /// Records that an automatic compaction was deferred, not started
    /// (FORMAT.md §5.4), unless one is running: `why` is the last error
    /// until a compaction ends.
    pub(crate) fn defer(&self, why: String) {
        let mut c = lock(&self.state);
        if !c.running {
            c.last_error = Some(why);
            c.deferred = true;
        }
    }

    /// Why the last automatic compaction was deferred, until one ends.
    pub(crate) fn deferred(&self) -> Option<String> {
        let c = lock(&self.state);
        c.deferred.then(|| c.last_error.clone()).flatten()
    }

    /// Waits until no compaction holds the slot (at once when none does);
    /// true when it waited.
    pub(crate) fn wait_free(&self) -> bool {
        let mut c = lock(&self.state);
        let waited = c.running;
        while c.running {
            c = self.freed.wait(c).unwrap_or_else(|p| p.into_inner());
        }
        waited
    }

    /// Waits for the background compaction's thread, if any, to end.
    pub(crate) fn wait_idle(&self) {
        let h = lock(&self.state).handle.take();
        if let Some(h) = h {
            let _ = h.join();
        }
    }

    /// The error of the last compaction, if it failed.
    pub(crate) fn last_error(&self) -> Option<String> {
        lock(&self.state).last_error.clone()
    }
}

/// The signal that stops the store's flusher thread.
#[derive(Default)]
pub(crate) struct Stop {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl Stop {
    /// Stops the flusher and wakes it.
    pub(crate) fn stop(&self) {
        *lock(&self.stopped) = true;
        self.cv.notify_all();
    }

    /// Waits up to `every`; true once stopped.
    pub(crate) fn wait(&self, every: std::time::Duration) -> bool {
        let g = lock(&self.stopped);
        let (g, _) = self
            .cv
            .wait_timeout(g, every)
            .unwrap_or_else(|p| p.into_inner());
        *g
    }
}
