//! The run layer's error: a refusal (nothing written; exit 2) or a failure
//! (I/O, corruption, lock timeout; exit 1), with the run it concerns.
//! `Display` says what happened at this layer; the cause is the `source()`
//! (print the chain with [`engine::ErrorChain`]).

use super::rule_error::RuleError;
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
    /// No archived run has this name (`Runs::restore_archived`): none is
    /// under `archive/` by that name, or the name is not one an archived run
    /// can have (`<id>.<timestamp>`, no path). Nothing was read or written.
    NotArchived {
        /// The name asked for.
        name: String,
        /// The directory archived runs are kept in.
        archive: PathBuf,
    },
    /// A prefix matches several runs.
    Ambiguous {
        /// The prefix.
        prefix: String,
        /// The matching ids.
        matches: Vec<String>,
    },
    /// The run's rules refused a transition; nothing was written.
    Refused {
        /// The run's id.
        id: String,
        /// The rule that refused it.
        source: RuleError,
    },
    /// An engine error about a run.
    Engine {
        /// The run's id.
        id: String,
        /// The engine's error.
        source: engine::Error,
    },
    /// The run's saved checkpoint (`Runs::restore`) does not decode as the
    /// state type asked for: the stored data and the caller disagree (exit 1).
    Checkpoint {
        /// The run's id.
        id: String,
        /// The decoder's error.
        source: serde_json::Error,
    },
    /// The remote tier failed or refused (shipping to, restoring from or
    /// reading a run's remote). `Fenced`, `Gap` and the rest stay typed in
    /// `source`; a refused request (a URL or policy that cannot be used, no
    /// run at the URL) is exit 2, anything else exit 1.
    #[cfg(feature = "remote")]
    Remote {
        /// What was being done (`"ship to remote"`, `"restore the run from its remote"`).
        op: &'static str,
        /// Where: the remote's URL, or the local directory the remote is for.
        at: String,
        /// The remote tier's error. Shared, so every change of a batch that
        /// one failed ship left unacknowledged carries the same typed error.
        source: std::sync::Arc<crate::remote::RemoteError>,
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
    /// The run's server refused the change (nothing written) or failed it
    /// with an error this build cannot read typed (a server of another
    /// build): `message` is the server's report. Every error this build
    /// knows crosses the socket as itself ([`Runs::change_waiting`]).
    ///
    /// [`Runs::change_waiting`]: super::Runs::change_waiting
    Served {
        /// The run's id.
        id: String,
        /// The server's report.
        message: String,
        /// True when refused (exit 2), false when failed (exit 1).
        refused: bool,
    },
}

/// Result alias for the run layer.
pub type Result<T, E = RunError> = std::result::Result<T, E>;

impl RunError {
    /// An engine error about run `id`; the rules' refusal keeps its type.
    pub(crate) fn engine(id: &str, source: engine::Error) -> RunError {
        match source {
            engine::Error::Refused(why) => match why.downcast::<RuleError>() {
                Ok(rule) => RunError::Refused {
                    id: id.to_string(),
                    source: *rule,
                },
                Err(other) => RunError::Engine {
                    id: id.to_string(),
                    source: engine::Error::Refused(other),
                },
            },
            source => RunError::Engine {
                id: id.to_string(),
                source,
            },
        }
    }

    /// The rule that refused the transition, when the rules refused it.
    pub fn rule(&self) -> Option<&RuleError> {
        match self {
            RunError::Refused { source, .. } => Some(source),
            _ => None,
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        RunError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// A remote-tier error while doing `op` at `at` (a URL or a directory).
    #[cfg(feature = "remote")]
    pub(crate) fn remote(
        op: &'static str,
        at: impl Into<String>,
        source: impl Into<std::sync::Arc<crate::remote::RemoteError>>,
    ) -> Self {
        RunError::Remote {
            op,
            at: at.into(),
            source: source.into(),
        }
    }

    /// The remote tier's error, when the remote tier failed.
    #[cfg(feature = "remote")]
    pub fn remote_error(&self) -> Option<&crate::remote::RemoteError> {
        match self {
            RunError::Remote { source, .. } => Some(source),
            _ => None,
        }
    }

    /// True when nothing was written because the request was refused (exit 2).
    pub fn is_refused(&self) -> bool {
        match self {
            RunError::Invalid(_)
            | RunError::NotFound { .. }
            | RunError::NotArchived { .. }
            | RunError::Ambiguous { .. }
            | RunError::Refused { .. } => true,
            RunError::Served { refused, .. } => *refused,
            // A tagged store asked for without its key (or the reverse): the
            // request is what is wrong, and nothing was read or written.
            RunError::Engine { source, .. } => {
                source.is_refused() || matches!(source, crate::engine::Error::Key { .. })
            }
            #[cfg(feature = "remote")]
            RunError::Remote { source, .. } => matches!(
                **source,
                crate::remote::RemoteError::Config(_)
                    | crate::remote::RemoteError::NoRemoteRun { .. }
            ),
            RunError::Checkpoint { .. } | RunError::Io { .. } => false,
        }
    }

    /// True when a change was handed to the run's server, which may have
    /// applied it, and no answer came (the server died, or the connection
    /// broke): look at the run before doing the change again.
    pub fn outcome_unknown(&self) -> bool {
        matches!(self, RunError::Io { op, .. } if *op == super::serve::HANDED_OVER)
    }

    /// True when the run's writer lock was held by another writer for
    /// longer than the lock wait.
    pub fn is_locked(&self) -> bool {
        matches!(
            self,
            RunError::Engine {
                source: engine::Error::Locked { .. },
                ..
            }
        )
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
            RunError::NotArchived { name, .. } if !super::id::is_archive_name(name) => write!(
                f,
                "refused: {name:?} is not the name of an archived run (an archived run is named <id>.<timestamp>)"
            ),
            RunError::NotArchived { name, archive } => write!(
                f,
                "refused: no archived run {name:?} under {}",
                archive.display()
            ),
            RunError::Ambiguous { prefix, matches } => write!(
                f,
                "refused: {prefix:?} matches several runs ({}); give more of the id",
                matches.join(", ")
            ),
            RunError::Refused { id, .. } => write!(f, "run {id}: refused"),
            RunError::Engine { id, .. } => write!(f, "run {id}"),
            RunError::Checkpoint { id, .. } => write!(
                f,
                "run {id}: the saved checkpoint does not decode as the state asked for"
            ),
            #[cfg(feature = "remote")]
            RunError::Remote { op, at, .. } if self.is_refused() => write!(f, "refused: {op} {at}"),
            #[cfg(feature = "remote")]
            RunError::Remote { op, at, .. } => write!(f, "{op} {at}"),
            RunError::Io { op, path, .. } => write!(f, "{op} {}", path.display()),
            RunError::Served { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Refused { source, .. } => Some(source),
            RunError::Engine { source, .. } => Some(source),
            RunError::Io { source, .. } => Some(source),
            #[cfg(feature = "remote")]
            RunError::Remote { source, .. } => Some(&**source),
            RunError::Checkpoint { source, .. } => Some(source),
            _ => None,
        }
    }
}
