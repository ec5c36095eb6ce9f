//! The engine's one error type. Anything about bytes on disk carries the path,
//! byte offset and seq where known; I/O errors name the operation.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// An engine error.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An I/O operation failed.
    Io {
        /// What the engine was doing, e.g. "fsync segment".
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Bytes on disk are damaged in a way that is not a torn tail. Nothing was modified.
    Corrupt {
        /// The file or directory involved.
        path: PathBuf,
        /// Byte offset within the file.
        offset: u64,
        /// The seq involved, where known.
        seq: Option<u64>,
        /// What is wrong.
        reason: String,
    },
    /// In a keyed store, bytes that pass their checksums fail their keyed tag:
    /// they were changed since they were written (or the key is not the
    /// store's), or a file belongs to another store. Never treated as a torn
    /// tail; nothing was modified.
    Tampered {
        /// The file involved.
        path: PathBuf,
        /// Byte offset within the file (of the record; 0 for a header or snapshot).
        offset: u64,
        /// The seq involved, where known.
        seq: Option<u64>,
        /// What failed.
        what: String,
    },
    /// The key does not fit the store: a keyed store opened without its key, an
    /// unkeyed store opened with one. Nothing was read past the headers.
    Key {
        /// The store directory.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A transition was refused by `apply`; nothing was written.
    Refused(Box<dyn std::error::Error + Send + Sync>),
    /// A transition or state could not be encoded (nothing was written), or a
    /// record on disk could not be decoded into the transition type.
    Codec {
        /// The file or directory involved.
        path: Option<PathBuf>,
        /// The seq involved, where known.
        seq: Option<u64>,
        /// What is wrong.
        reason: String,
    },
    /// A record or snapshot is larger than the format allows.
    TooLarge {
        /// "record" or "snapshot".
        what: &'static str,
        /// The size found.
        len: u64,
        /// The limit it exceeds.
        max: u64,
    },
    /// An earlier write or fsync failed; the store accepts nothing until reopened.
    Poisoned {
        /// The failure that poisoned the store.
        cause: String,
    },
    /// Another writer holds the lock.
    Locked {
        /// The file or directory involved.
        path: PathBuf,
        /// Who holds the lock, as recorded in the lock file (e.g. "pid 4242").
        holder: Option<String>,
        /// How long this open waited, when asked to wait.
        waited: Option<std::time::Duration>,
    },
    /// No store exists at the path (and creation was not asked for).
    NotFound {
        /// The file or directory involved.
        path: PathBuf,
    },
    /// A store exists where a new one was asked for, or with another codec.
    Mismatch {
        /// The file or directory involved.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The store holds what this build must not use (e.g. a state written by a
    /// newer build): refused before anything is written.
    Unsupported {
        /// The store directory.
        path: PathBuf,
        /// What, and what to do.
        reason: String,
    },
    /// The store directory is unsafe to use (a symlink, or writable by others).
    Unsafe {
        /// The file or directory involved.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Result alias for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// True for a refusal by `apply` (nothing was written).
    pub fn is_refused(&self) -> bool {
        matches!(self, Error::Refused(_))
    }

    /// True when bytes on disk are damaged.
    pub fn is_corrupt(&self) -> bool {
        matches!(self, Error::Corrupt { .. })
    }

    /// True when a keyed store's tag check failed.
    pub fn is_tampered(&self) -> bool {
        matches!(self, Error::Tampered { .. })
    }
}

fn seq_part(seq: &Option<u64>) -> String {
    seq.map(|s| format!(", seq {s}")).unwrap_or_default()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => write!(f, "{op} {}: {source}", path.display()),
            Error::Corrupt {
                path,
                offset,
                seq,
                reason,
            } => write!(
                f,
                "corruption in {} at byte offset {offset}{}: {reason}; nothing was modified (run `runlog verify` for a report)",
                path.display(),
                seq_part(seq)
            ),
            Error::Tampered {
                path,
                offset,
                seq,
                what,
            } => write!(
                f,
                "tampering detected in {} at byte offset {offset}{}: {what}; the bytes pass their checksums but not the keyed digest, so they were changed after they were written (or this is not the store's key); nothing was modified",
                path.display(),
                seq_part(seq)
            ),
            Error::Key { path, reason } => write!(f, "{}: {reason}", path.display()),
            Error::Refused(why) => write!(f, "refused: {why}"),
            Error::Codec { path, seq, reason } => {
                write!(f, "encoding error")?;
                if let Some(p) = path {
                    write!(f, " in {}", p.display())?;
                }
                write!(f, "{}: {reason}", seq_part(seq))
            }
            Error::TooLarge { what, len, max } => {
                write!(f, "{what} of {len} bytes exceeds the limit of {max} bytes")
            }
            Error::Poisoned { cause } => write!(
                f,
                "store is poisoned by an earlier failure ({cause}); nothing after it was acknowledged — reopen the store to recover"
            ),
            Error::Locked {
                path,
                holder,
                waited,
            } => {
                write!(f, "store is locked by another writer ({}", path.display())?;
                if let Some(h) = holder {
                    write!(f, ", held by {h}")?;
                }
                if let Some(w) = waited {
                    write!(f, ", waited {:.1}s", w.as_secs_f64())?;
                }
                write!(f, ")")
            }
            Error::NotFound { path } => write!(f, "no runlog store at {}", path.display()),
            Error::Mismatch { path, reason } => write!(f, "{}: {reason}", path.display()),
            Error::Unsupported { path, reason } => write!(f, "{}: {reason}", path.display()),
            Error::Unsafe { path, reason } => {
                write!(f, "refusing to use {}: {reason}", path.display())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Refused(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}
