//! The writer's poison: once a write or an fsync of the log has failed, the
//! writer accepts nothing more (the kernel may have dropped the pages it
//! failed to write, so nothing after them can be acknowledged).
//!
//! Its field is its own. What it keeps: once set it stays set, with its first
//! cause. [`Shared::poison`](super::Shared::poison) sets it together
//! with the group commit's failure, so that waiters see it too.

use crate::engine::error::{Error, Result};

#[derive(Debug, Default)]
pub(crate) struct Poison(Option<String>);

impl Poison {
    /// Poisons the writer with `cause`, unless it is already (the first cause
    /// stays).
    pub(crate) fn set(&mut self, cause: String) {
        self.0.get_or_insert(cause);
    }

    /// Why the writer is poisoned, if it is.
    pub(crate) fn cause(&self) -> Option<&String> {
        self.0.as_ref()
    }

    /// Whether the writer is poisoned.
    pub(crate) fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// `Err(Error::Poisoned)` once the writer is poisoned.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.0 {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }
}
