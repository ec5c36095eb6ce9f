//! The writer lock: one writer per store, through the `LOCK` file.

use super::error::{Error, Result};
use super::format::LOCK_FILE;
use super::vfs::{LockAttempt, Vfs};
use std::path::Path;
use std::time::{Duration, Instant};

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
