//! The run layer's error: a refusal (nothing written; exit 2) or a failure
//! (I/O, corruption, lock timeout; exit 1), with the run it concerns.

use crate::engine;
use std::fmt;
use std::path::PathBuf;

/// A run-layer error.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    /// A malformed argument (bad id, status, JSON…); nothing was written.
    Invalid(String),
    /// No run with this id (or prefix) exists.
    NotFound {
        /// The id or prefix asked for.
        id: String,
        /// The runs root searched.
        root: PathBuf,
    },
    /// A prefix matches several runs.
    Ambiguous {
        /// The prefix.
        prefix: String,
        /// The matching ids.
        matches: Vec<String>,
    },
    /// An engine error about a run (a refusal by the rules is `engine::Error::Refused`).
    Engine {
        /// The run's id.
        id: String,
        /// The engine's error.
        source: engine::Error,
    },
    /// An I/O error outside a store (runs root, archive, gc).
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Result alias for the run layer.
pub type Result<T, E = RunError> = std::result::Result<T, E>;

impl RunError {
    pub(crate) fn engine(id: &str, source: engine::Error) -> RunError {
        RunError::Engine {
            id: id.to_string(),
            source,
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        RunError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// True when nothing was written because the request was refused (exit 2).
    pub fn is_refused(&self) -> bool {
        match self {
            RunError::Invalid(_) | RunError::NotFound { .. } | RunError::Ambiguous { .. } => true,
            // A keyed store asked for without its key (or the reverse): the
            // request is what is wrong, and nothing was read or written.
            RunError::Engine { source, .. } => {
                source.is_refused() || matches!(source, crate::engine::Error::Key { .. })
            }
            RunError::Io { .. } => false,
        }
    }

    /// The CLI exit status: 2 refused, 1 failed.
    pub fn exit_code(&self) -> u8 {
        if self.is_refused() { 2 } else { 1 }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Invalid(why) => write!(f, "refused: {why}"),
            RunError::NotFound { id, root } => {
                write!(f, "refused: no run {id:?} under {}", root.display())
            }
            RunError::Ambiguous { prefix, matches } => write!(
                f,
                "refused: {prefix:?} matches several runs ({}); give more of the id",
                matches.join(", ")
            ),
            RunError::Engine { id, source } => write!(f, "run {id}: {source}"),
            RunError::Io { op, path, source } => write!(f, "{op} {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Engine { source, .. } => Some(source),
            RunError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
