//! The engine's one error type. Anything about bytes on disk carries the path,
//! byte offset and seq where known; I/O errors name the operation.
//!
//! `Display` says what happened at this layer and never repeats the cause;
//! `source()` carries the cause. [`ErrorChain`] prints the whole chain once.

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
        /// Byte offset within the file, where known (`None`: the damage is
        /// the file's as a whole, or found where no offset is kept).
        offset: Option<u64>,
        /// The seq involved, where known.
        seq: Option<u64>,
        /// What is wrong.
        reason: String,
    },
    /// In a tagged store, bytes that pass their checksums fail their tag:
    /// they were changed since they were written (or the key is not the
    /// store's), or a file belongs to another store. Never treated as a torn
    /// tail; nothing was modified.
    Tampered {
        /// The file involved.
        path: PathBuf,
        /// Byte offset within the file, where known (of the record; the
        /// header's for a header or a whole snapshot).
        offset: Option<u64>,
        /// The seq involved, where known.
        seq: Option<u64>,
        /// What failed.
        what: String,
    },
    /// The key does not fit the store: a tagged store opened without its key, an
    /// untagged store opened with one. Nothing was read past the headers.
    Key {
        /// The store directory.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A transition was refused by `apply`; nothing was written. The machine's
    /// own error is the `source()`, and [`Error::refusal`] gives it back typed.
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
    /// A write or fsync failed; the store accepts nothing until reopened.
    Poisoned {
        /// The failure that poisoned the store: what failed and where.
        cause: String,
    },
    /// A [`TableWriter`](super::TableWriter) was used after one of its writes
    /// failed (that failure was returned then): it accepts nothing more, its
    /// temp file is removed when it is dropped, and no snapshot is installed.
    /// The store is not poisoned by it.
    TableWriterFailed {
        /// The writer's temp file.
        path: PathBuf,
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

    /// True when a tagged store's tag check failed.
    pub fn is_tampered(&self) -> bool {
        matches!(self, Error::Tampered { .. })
    }

    /// The machine's own refusal, typed: `Some` when this is [`Error::Refused`]
    /// and `apply` refused with an `E`.
    pub fn refusal<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Error::Refused(why) => why.downcast_ref::<E>(),
            _ => None,
        }
    }

    /// The text a store poisoned by this failure keeps: the failure itself with
    /// its causes, once (a failure that is already the poison is not nested).
    pub(crate) fn poison_cause(&self) -> String {
        match self {
            Error::Poisoned { cause } => cause.clone(),
            e => ErrorChain(e).to_string(),
        }
    }
}

/// An error and its causes on one line, `what: cause: cause`, each printed
/// once. The CLI reports errors with it; `anyhow`'s `{:#}` prints the same.
///
/// ```
/// use runlog::engine::{Error, ErrorChain};
/// let e = Error::Io {
///     op: "fsync segment",
///     path: "/s/seg".into(),
///     source: std::io::Error::other("disk on fire"),
/// };
/// assert_eq!(e.to_string(), "fsync segment /s/seg");
/// assert_eq!(ErrorChain(&e).to_string(), "fsync segment /s/seg: disk on fire");
/// ```
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A cause whose text its parent already printed (many libraries put
        // their source in their own message) is not repeated: errors print once.
        let mut text = self.0.to_string();
        let mut cause = self.0.source();
        while let Some(e) = cause {
            let t = e.to_string();
            if !text.contains(&t) {
                text.push_str(": ");
                text.push_str(&t);
            }
            cause = e.source();
        }
        f.write_str(&text)
    }
}

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn seq_part(seq: &Option<u64>) -> String {
    seq.map(|s| format!(", seq {s}")).unwrap_or_default()
}

/// " at byte offset N", or nothing when the offset is not known.
fn offset_part(offset: &Option<u64>) -> String {
    offset
        .map(|o| format!(" at byte offset {o}"))
        .unwrap_or_default()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, .. } => write!(f, "{op} {}", path.display()),
            Error::Corrupt {
                path,
                offset,
                seq,
                reason,
            } => write!(
                f,
                "corruption in {}{}{}: {reason}; nothing was modified",
                path.display(),
                offset_part(offset),
                seq_part(seq)
            ),
            Error::Tampered {
                path,
                offset,
                seq,
                what,
            } => write!(
                f,
                "tampering detected in {}{}{}: {what}; the bytes pass their checksums but not their tag, so they were changed after they were written (or this is not the store's key); nothing was modified",
                path.display(),
                offset_part(offset),
                seq_part(seq)
            ),
            Error::Key { path, reason } => write!(f, "{}: {reason}", path.display()),
            Error::Refused(_) => write!(f, "refused"),
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
                "{cause}; the store accepts no more writes and acknowledged nothing after this failure: reopen it to recover"
            ),
            Error::TableWriterFailed { path } => write!(
                f,
                "table writer for {} used after an earlier write to it failed: it accepts nothing more and installs no snapshot",
                path.display()
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
