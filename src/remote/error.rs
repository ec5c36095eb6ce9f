//! The remote layer's error: what happened, on which object or file, in which
//! operation (STYLE.md habit 4).

use crate::engine;

/// A remote operation's failure.
#[derive(Debug)]
#[non_exhaustive]
pub enum RemoteError {
    /// A newer writer took the run: this writer stops and acknowledges nothing more.
    Fenced {
        /// This writer's epoch (0: a claimer that holds none yet).
        epoch: u64,
        /// The newer epoch found in the manifest chain.
        newer: u64,
        /// The manifest number that carries it.
        manifest: u64,
    },
    /// The remote chain misses a seq range: restore refuses rather than skip it.
    Gap {
        /// The first missing seq.
        from: u64,
        /// The last missing seq.
        to: u64,
    },
    /// An object's bytes are not what the layout says (checksum, tag, framing, JSON).
    Corrupt {
        /// The object's name.
        object: String,
        /// Byte offset inside the object, where known (`None`: the object as a
        /// whole, or a field of a manifest).
        offset: Option<u64>,
        /// What is wrong.
        reason: String,
    },
    /// The object store refused or failed a request.
    Store {
        /// The operation (`"put chunk"`, `"list manifests"`).
        op: &'static str,
        /// The object or prefix.
        object: String,
        /// The store's error.
        source: object_store::Error,
    },
    /// The local copy and the remote chain disagree (the run was written from two
    /// places, or the local copy is behind the remote).
    Diverged {
        /// Why.
        reason: String,
    },
    /// No manifest under the remote prefix: nothing was ever shipped there.
    NoRemoteRun {
        /// The remote's URL.
        url: String,
    },
    /// A URL or configuration that cannot be used.
    Config(String),
    /// The local store or file the operation read or wrote.
    Local(engine::Error),
}

impl RemoteError {
    pub(crate) fn store(
        op: &'static str,
        object: impl Into<String>,
        source: object_store::Error,
    ) -> Self {
        RemoteError::Store {
            op,
            object: object.into(),
            source,
        }
    }

    pub(crate) fn corrupt(
        object: impl Into<String>,
        offset: Option<u64>,
        reason: impl Into<String>,
    ) -> Self {
        RemoteError::Corrupt {
            object: object.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True for [`RemoteError::Fenced`].
    pub fn is_fenced(&self) -> bool {
        matches!(self, RemoteError::Fenced { .. })
    }
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteError::Fenced {
                epoch: 0,
                newer,
                manifest,
            } => write!(
                f,
                "fenced: manifest {manifest} carries epoch {newer}, written by another writer past what this copy of the run holds (it is behind that manifest or differs from it); this copy claims nothing and writes nothing there"
            ),
            RemoteError::Fenced {
                epoch,
                newer,
                manifest,
            } => write!(
                f,
                "fenced: manifest {manifest} carries epoch {newer}, newer than this writer's epoch {epoch}; another host took the run and this writer stops"
            ),
            RemoteError::Gap { from, to } => write!(
                f,
                "the remote chain misses seqs {from}..={to}: no chunk or snapshot holds them"
            ),
            RemoteError::Corrupt {
                object,
                offset,
                reason,
            } => match offset {
                Some(at) => write!(f, "remote object {object} at byte {at}: {reason}"),
                None => write!(f, "remote object {object}: {reason}"),
            },
            RemoteError::Store { op, object, .. } => write!(f, "{op} {object}"),
            RemoteError::Diverged { reason } => {
                write!(f, "local run and remote disagree: {reason}")
            }
            RemoteError::NoRemoteRun { url } => {
                write!(f, "no run at {url}: no manifest under that prefix")
            }
            RemoteError::Config(why) => f.write_str(why),
            RemoteError::Local(_) => f.write_str("local store"),
        }
    }
}

impl std::error::Error for RemoteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RemoteError::Store { source, .. } => Some(source),
            RemoteError::Local(e) => Some(e),
            _ => None,
        }
    }
}

impl From<engine::Error> for RemoteError {
    fn from(e: engine::Error) -> Self {
        RemoteError::Local(e)
    }
}

/// The remote layer's result.
pub type Result<T> = std::result::Result<T, RemoteError>;
