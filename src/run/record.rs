//! A unit as a run's table stores it.

use super::clock::{format_rfc3339, parse_rfc3339};
use super::doc::{Unit, UnitStatus};
use super::rule_error::RuleError;
use serde::{Deserialize, Serialize};

/// A unit as a table stores it: timestamps in milliseconds since the epoch
/// (rendered as RFC 3339 only on output); its name is the table key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitRecord {
    /// Its status.
    pub status: UnitStatus,
    /// Units that must be done first.
    pub depends_on: Vec<String>,
    /// A free-text note.
    pub note: String,
    /// How many times it went to `in_progress`.
    pub attempts: u32,
    /// When it was added (ms).
    pub created: i64,
    /// When it last changed (ms).
    pub updated: i64,
    /// When it last went to `in_progress` (ms).
    pub started: Option<i64>,
    /// When it went to `done` (ms).
    pub finished: Option<i64>,
}

fn ms(what: &str, s: &str) -> Result<i64, RuleError> {
    parse_rfc3339(s)
        .ok_or_else(|| RuleError::Invalid(format!("{what} {s:?} is not an RFC 3339 UTC timestamp")))
}

impl UnitRecord {
    /// The record of `u`; its timestamps must be RFC 3339 UTC.
    pub fn from_unit(u: &Unit) -> Result<UnitRecord, RuleError> {
        Ok(UnitRecord {
            status: u.status,
            depends_on: u.depends_on.clone(),
            note: u.note.clone(),
            attempts: u.attempts,
            created: ms("createdAt", &u.created_at)?,
            updated: ms("updatedAt", &u.updated_at)?,
            started: u
                .started_at
                .as_deref()
                .map(|s| ms("startedAt", s))
                .transpose()?,
            finished: u
                .finished_at
                .as_deref()
                .map(|s| ms("finishedAt", s))
                .transpose()?,
        })
    }

    /// The unit as the run document shows it.
    pub fn to_unit(&self) -> Unit {
        Unit {
            status: self.status,
            depends_on: self.depends_on.clone(),
            note: self.note.clone(),
            attempts: self.attempts,
            created_at: format_rfc3339(self.created),
            updated_at: format_rfc3339(self.updated),
            started_at: self.started.map(format_rfc3339),
            finished_at: self.finished.map(format_rfc3339),
        }
    }
}
