//! The engine's one way to take a mutex.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, poisoned or not. A panic while holding a runlog mutex leaves
/// consistent data (every update is a single assignment after the I/O it
/// records), so a poisoned mutex is usable.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
