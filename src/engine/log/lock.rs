//! The writer lock: one writer per store, through the `LOCK` file.

use crate::engine::error::{Error, Result};
use crate::engine::format::LOCK_FILE;
use crate::engine::io::vfs::{LockAttempt, Vfs};
use crate::engine::mutex::lock;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The writer lock as a store holds it: from the open until the store is
/// dropped, or, for a one-shot writer, until its batch is written
/// (FORMAT.md §5.8). Its field is its own, and it keeps this: once let go,
/// the lock is never held again by this store.
pub(crate) struct WriterLock(Mutex<Option<Box<dyn Send + Sync>>>);

impl WriterLock {
    /// Holds `guard`, what [`take_lock`] returned.
    pub(crate) fn new(guard: Box<dyn Send + Sync>) -> Self {
        WriterLock(Mutex::new(Some(guard)))
    }

    /// Lets the lock go (a one-shot writer whose batch is written).
    pub(crate) fn release(&self) {
        *lock(&self.0) = None;
    }

    /// Whether the lock is still held.
    pub(crate) fn held(&self) -> bool {
        lock(&self.0).is_some()
    }
}

pub(crate) fn take_lock(
    vfs: &dyn Vfs,
    dir: &Path,
    wait: Option<Duration>,
) -> Result<Box<dyn Send + Sync>> {
    let path = dir.join(LOCK_FILE);
    let holder = format!("pid {}", std::process::id());
    let started = Instant::now();
    let attempt = match wait {
        None => vfs.try_lock(&path, &holder),
        Some(limit) => vfs.lock_wait(&path, &holder, limit),
    };
    match attempt.map_err(|e| Error::io("lock store", &path, e))? {
        LockAttempt::Acquired(g) => Ok(g),
        LockAttempt::Busy(h) => Err(Error::Locked {
            path,
            holder: h,
            waited: wait.map(|_| started.elapsed()),
        }),
    }
}
