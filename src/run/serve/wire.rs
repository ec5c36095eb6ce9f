//! A refused or failed change's error on the serve socket: the `detail` of
//! an error ack (docs/CLI.md, "serve"). The server writes the [`RunError`]
//! it met; the client reads it back as the same variant, with the same
//! fields, so a change's error does not depend on whether a server applied
//! it: `rule()` gives the same [`RuleError`], `Corrupt`, `Tampered`,
//! `Locked`, `Poisoned` and a remote's `Fenced` stay what they are.
//!
//! The form is this file's own (serde mirrors of the error types, by value),
//! not a promise of the public types. What cannot cross exactly crosses as
//! its text: an I/O error that is not the OS's keeps its kind and message;
//! the cause of a machine's own refusal and a checkpoint's decode error
//! keep their message; an object store's error reads back as its `Generic`
//! variant (exactly, when it was one; else with the whole text as its cause). A detail this build cannot read
//! (another build's variant) leaves the client with the ack's message
//! ([`RunError::Served`]). Strings the types hold as `&'static str` (what
//! was being done) are interned, at most [`MAX_INTERNED`] of them.

use crate::engine;
use crate::run::error::RunError;
use crate::run::rule_error::RuleError;
use crate::run::{RunStatus, UnitStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// The most distinct `&'static str` texts read from servers that this
/// process keeps; past it, such a text reads as [`UNKNOWN_OP`].
const MAX_INTERNED: usize = 256;
/// What an operation's text reads as once [`MAX_INTERNED`] are kept.
const UNKNOWN_OP: &str = "an operation of the run's server";

/// `e`'s detail, or `None` when it has none (a path that is not UTF-8).
pub(crate) fn to_wire(e: &RunError) -> Option<Value> {
    serde_json::to_value(Run::from(e)).ok()
}

/// The error a detail describes, or `None` when it is not one this build reads.
pub(crate) fn from_wire(v: &Value) -> Option<RunError> {
    Run::deserialize(v).ok().map(RunError::from)
}

/// A `&'static str` for `s`: the same one for the same text, leaked once.
fn intern(s: &str) -> &'static str {
    static KEPT: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    intern_in(&mut KEPT.lock().unwrap_or_else(|p| p.into_inner()), s)
}

fn intern_in(kept: &mut Vec<&'static str>, s: &str) -> &'static str {
    if let Some(k) = kept.iter().find(|k| **k == s) {
        return k;
    }
    if kept.len() >= MAX_INTERNED {
        return UNKNOWN_OP;
    }
    let k: &'static str = Box::leak(s.to_owned().into_boxed_str());
    kept.push(k);
    k
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Run {
    Invalid {
        why: String,
    },
    NotFound {
        id: String,
        root: PathBuf,
    },
    NotArchived {
        name: String,
        archive: PathBuf,
    },
    Ambiguous {
        prefix: String,
        matches: Vec<String>,
    },
    Refused {
        id: String,
        rule: Rule,
    },
    Engine {
        id: String,
        error: Engine,
    },
    Checkpoint {
        id: String,
        message: String,
    },
    #[cfg(feature = "remote")]
    Remote {
        op: String,
        at: String,
        error: remote::Remote,
    },
    Io {
        op: String,
        path: PathBuf,
        error: Io,
    },
    Served {
        id: String,
        message: String,
        refused: bool,
    },
}

impl From<&RunError> for Run {
    fn from(e: &RunError) -> Run {
        match e {
            RunError::Invalid(why) => Run::Invalid { why: why.clone() },
            RunError::NotFound { id, root } => Run::NotFound {
                id: id.clone(),
                root: root.clone(),
            },
            RunError::NotArchived { name, archive } => Run::NotArchived {
                name: name.clone(),
                archive: archive.clone(),
            },
            RunError::Ambiguous { prefix, matches } => Run::Ambiguous {
                prefix: prefix.clone(),
                matches: matches.clone(),
            },
            RunError::Refused { id, source } => Run::Refused {
                id: id.clone(),
                rule: Rule::from(source),
            },
            RunError::Engine { id, source } => Run::Engine {
                id: id.clone(),
                error: Engine::from(source),
            },
            RunError::Checkpoint { id, source } => Run::Checkpoint {
                id: id.clone(),
                message: source.to_string(),
            },
            #[cfg(feature = "remote")]
            RunError::Remote { op, at, source } => Run::Remote {
                op: op.to_string(),
                at: at.clone(),
                error: remote::Remote::from(&**source),
            },
            RunError::Io { op, path, source } => Run::Io {
                op: op.to_string(),
                path: path.clone(),
                error: Io::from(source),
            },
            RunError::Served {
                id,
                message,
                refused,
            } => Run::Served {
                id: id.clone(),
                message: message.clone(),
                refused: *refused,
            },
        }
    }
}

impl From<Run> for RunError {
    fn from(w: Run) -> RunError {
        match w {
            Run::Invalid { why } => RunError::Invalid(why),
            Run::NotFound { id, root } => RunError::NotFound { id, root },
            Run::NotArchived { name, archive } => RunError::NotArchived { name, archive },
            Run::Ambiguous { prefix, matches } => RunError::Ambiguous { prefix, matches },
            Run::Refused { id, rule } => RunError::Refused {
                id,
                source: rule.into(),
            },
            Run::Engine { id, error } => RunError::Engine {
                id,
                source: error.into(),
            },
            Run::Checkpoint { id, message } => RunError::Checkpoint {
                id,
                source: serde::de::Error::custom(message),
            },
            #[cfg(feature = "remote")]
            Run::Remote { op, at, error } => RunError::Remote {
                op: intern(&op),
                at,
                source: std::sync::Arc::new(error.into()),
            },
            Run::Io { op, path, error } => RunError::Io {
                op: intern(&op),
                path,
                source: error.into(),
            },
            Run::Served {
                id,
                message,
                refused,
            } => RunError::Served {
                id,
                message,
                refused,
            },
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
enum Rule {
    NotInitialized,
    AlreadyInitialized {
        id: String,
    },
    Closed {
        id: String,
        status: RunStatus,
        op: String,
    },
    Demote {
        unit: String,
        to: UnitStatus,
    },
    DepsNotDone {
        unit: String,
        roots: Vec<String>,
    },
    OpenUnits {
        units: BTreeMap<String, UnitStatus>,
    },
    UnknownItem {
        id: String,
        resolved: bool,
    },
    UnknownBudget {
        name: String,
    },
    Invalid {
        why: String,
    },
}

impl From<&RuleError> for Rule {
    fn from(r: &RuleError) -> Rule {
        match r.clone() {
            RuleError::NotInitialized => Rule::NotInitialized,
            RuleError::AlreadyInitialized { id } => Rule::AlreadyInitialized { id },
            RuleError::Closed { id, status, op } => Rule::Closed {
                id,
                status,
                op: op.to_string(),
            },
            RuleError::Demote { unit, to } => Rule::Demote { unit, to },
            RuleError::DepsNotDone { unit, roots } => Rule::DepsNotDone { unit, roots },
            RuleError::OpenUnits { units } => Rule::OpenUnits { units },
            RuleError::UnknownItem { id, resolved } => Rule::UnknownItem { id, resolved },
            RuleError::UnknownBudget { name } => Rule::UnknownBudget { name },
            RuleError::Invalid(why) => Rule::Invalid { why },
        }
    }
}

impl From<Rule> for RuleError {
    fn from(r: Rule) -> RuleError {
        match r {
            Rule::NotInitialized => RuleError::NotInitialized,
            Rule::AlreadyInitialized { id } => RuleError::AlreadyInitialized { id },
            Rule::Closed { id, status, op } => RuleError::Closed {
                id,
                status,
                op: intern(&op),
            },
            Rule::Demote { unit, to } => RuleError::Demote { unit, to },
            Rule::DepsNotDone { unit, roots } => RuleError::DepsNotDone { unit, roots },
            Rule::OpenUnits { units } => RuleError::OpenUnits { units },
            Rule::UnknownItem { id, resolved } => RuleError::UnknownItem { id, resolved },
            Rule::UnknownBudget { name } => RuleError::UnknownBudget { name },
            Rule::Invalid { why } => RuleError::Invalid(why),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Engine {
    Io {
        op: String,
        path: PathBuf,
        error: Io,
    },
    Corrupt {
        path: PathBuf,
        offset: Option<u64>,
        seq: Option<u64>,
        reason: String,
    },
    Tampered {
        path: PathBuf,
        offset: Option<u64>,
        seq: Option<u64>,
        what: String,
    },
    Key {
        path: PathBuf,
        reason: String,
    },
    Refused {
        message: String,
    },
    Codec {
        path: Option<PathBuf>,
        seq: Option<u64>,
        reason: String,
    },
    TooLarge {
        what: String,
        len: u64,
        max: u64,
    },
    Poisoned {
        cause: String,
    },
    TableWriterFailed {
        path: PathBuf,
    },
    Locked {
        path: PathBuf,
        holder: Option<String>,
        waited: Option<Duration>,
    },
    NotFound {
        path: PathBuf,
    },
    Mismatch {
        path: PathBuf,
        reason: String,
    },
    Unsupported {
        path: PathBuf,
        reason: String,
    },
    Unsafe {
        path: PathBuf,
        reason: String,
    },
}

impl From<&engine::Error> for Engine {
    fn from(e: &engine::Error) -> Engine {
        use engine::Error as E;
        match e {
            E::Io { op, path, source } => Engine::Io {
                op: op.to_string(),
                path: path.clone(),
                error: Io::from(source),
            },
            E::Corrupt {
                path,
                offset,
                seq,
                reason,
            } => Engine::Corrupt {
                path: path.clone(),
                offset: *offset,
                seq: *seq,
                reason: reason.clone(),
            },
            E::Tampered {
                path,
                offset,
                seq,
                what,
            } => Engine::Tampered {
                path: path.clone(),
                offset: *offset,
                seq: *seq,
                what: what.clone(),
            },
            E::Key { path, reason } => Engine::Key {
                path: path.clone(),
                reason: reason.clone(),
            },
            E::Refused(why) => Engine::Refused {
                message: engine::ErrorChain(&**why).to_string(),
            },
            E::Codec { path, seq, reason } => Engine::Codec {
                path: path.clone(),
                seq: *seq,
                reason: reason.clone(),
            },
            E::TooLarge { what, len, max } => Engine::TooLarge {
                what: what.to_string(),
                len: *len,
                max: *max,
            },
            E::Poisoned { cause } => Engine::Poisoned {
                cause: cause.clone(),
            },
            E::TableWriterFailed { path } => Engine::TableWriterFailed { path: path.clone() },
            E::Locked {
                path,
                holder,
                waited,
            } => Engine::Locked {
                path: path.clone(),
                holder: holder.clone(),
                waited: *waited,
            },
            E::NotFound { path } => Engine::NotFound { path: path.clone() },
            E::Mismatch { path, reason } => Engine::Mismatch {
                path: path.clone(),
                reason: reason.clone(),
            },
            E::Unsupported { path, reason } => Engine::Unsupported {
                path: path.clone(),
                reason: reason.clone(),
            },
            E::Unsafe { path, reason } => Engine::Unsafe {
                path: path.clone(),
                reason: reason.clone(),
            },
        }
    }
}

impl From<Engine> for engine::Error {
    fn from(w: Engine) -> engine::Error {
        use engine::Error as E;
        match w {
            Engine::Io { op, path, error } => E::Io {
                op: intern(&op),
                path,
                source: error.into(),
            },
            Engine::Corrupt {
                path,
                offset,
                seq,
                reason,
            } => E::Corrupt {
                path,
                offset,
                seq,
                reason,
            },
            Engine::Tampered {
                path,
                offset,
                seq,
                what,
            } => E::Tampered {
                path,
                offset,
                seq,
                what,
            },
            Engine::Key { path, reason } => E::Key { path, reason },
            Engine::Refused { message } => E::Refused(message.into()),
            Engine::Codec { path, seq, reason } => E::Codec { path, seq, reason },
            Engine::TooLarge { what, len, max } => E::TooLarge {
                what: intern(&what),
                len,
                max,
            },
            Engine::Poisoned { cause } => E::Poisoned { cause },
            Engine::TableWriterFailed { path } => E::TableWriterFailed { path },
            Engine::Locked {
                path,
                holder,
                waited,
            } => E::Locked {
                path,
                holder,
                waited,
            },
            Engine::NotFound { path } => E::NotFound { path },
            Engine::Mismatch { path, reason } => E::Mismatch { path, reason },
            Engine::Unsupported { path, reason } => E::Unsupported { path, reason },
            Engine::Unsafe { path, reason } => E::Unsafe { path, reason },
        }
    }
}

/// An I/O error: the OS's by its number (read back exactly), any other by
/// its kind and message.
#[derive(Serialize, Deserialize)]
struct Io {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    os: Option<i32>,
    kind: String,
    message: String,
}

/// The kinds an I/O error that is not the OS's crosses with; any other
/// reads back as `Other`, its message kept.
const KINDS: [io::ErrorKind; 22] = {
    use io::ErrorKind as K;
    [
        K::NotFound,
        K::PermissionDenied,
        K::ConnectionRefused,
        K::ConnectionReset,
        K::ConnectionAborted,
        K::NotConnected,
        K::AddrInUse,
        K::AddrNotAvailable,
        K::BrokenPipe,
        K::AlreadyExists,
        K::WouldBlock,
        K::InvalidInput,
        K::InvalidData,
        K::TimedOut,
        K::WriteZero,
        K::Interrupted,
        K::Unsupported,
        K::UnexpectedEof,
        K::OutOfMemory,
        K::StorageFull,
        K::QuotaExceeded,
        K::Other,
    ]
};

impl From<&io::Error> for Io {
    fn from(e: &io::Error) -> Io {
        Io {
            os: e.raw_os_error(),
            kind: format!("{:?}", e.kind()),
            message: match e.get_ref() {
                Some(inner) => engine::ErrorChain(inner).to_string(),
                None => e.to_string(),
            },
        }
    }
}

impl From<Io> for io::Error {
    fn from(w: Io) -> io::Error {
        if let Some(code) = w.os {
            return io::Error::from_raw_os_error(code);
        }
        let kind = KINDS
            .into_iter()
            .find(|k| format!("{k:?}") == w.kind)
            .unwrap_or(io::ErrorKind::Other);
        io::Error::new(kind, w.message)
    }
}

#[cfg(feature = "remote")]
mod remote {
    use super::{Engine, intern};
    use crate::remote::RemoteError;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    pub(super) enum Remote {
        Fenced {
            epoch: u64,
            newer: u64,
            manifest: u64,
        },
        Gap {
            from: u64,
            to: u64,
        },
        Corrupt {
            object: String,
            offset: Option<u64>,
            reason: String,
        },
        Store {
            op: String,
            object: String,
            /// The object store's name, for its `Generic` error (which
            /// reads back exactly); none for any other, which reads back as
            /// `Generic` with the whole text as its cause.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            store: Option<String>,
            message: String,
        },
        Diverged {
            reason: String,
        },
        NoRemoteRun {
            url: String,
        },
        Config {
            why: String,
        },
        Local {
            error: Engine,
        },
    }

    impl From<&RemoteError> for Remote {
        fn from(e: &RemoteError) -> Remote {
            match e {
                RemoteError::Fenced {
                    epoch,
                    newer,
                    manifest,
                } => Remote::Fenced {
                    epoch: *epoch,
                    newer: *newer,
                    manifest: *manifest,
                },
                RemoteError::Gap { from, to } => Remote::Gap {
                    from: *from,
                    to: *to,
                },
                RemoteError::Corrupt {
                    object,
                    offset,
                    reason,
                } => Remote::Corrupt {
                    object: object.clone(),
                    offset: *offset,
                    reason: reason.clone(),
                },
                RemoteError::Store { op, object, source } => {
                    let (store, message) = match source {
                        object_store::Error::Generic { store, source } => (
                            Some(store.to_string()),
                            crate::engine::ErrorChain(&**source).to_string(),
                        ),
                        other => (None, crate::engine::ErrorChain(other).to_string()),
                    };
                    Remote::Store {
                        op: op.to_string(),
                        object: object.clone(),
                        store,
                        message,
                    }
                }
                RemoteError::Diverged { reason } => Remote::Diverged {
                    reason: reason.clone(),
                },
                RemoteError::NoRemoteRun { url } => Remote::NoRemoteRun { url: url.clone() },
                RemoteError::Config(why) => Remote::Config { why: why.clone() },
                RemoteError::Local(e) => Remote::Local {
                    error: Engine::from(e),
                },
            }
        }
    }

    impl From<Remote> for RemoteError {
        fn from(w: Remote) -> RemoteError {
            match w {
                Remote::Fenced {
                    epoch,
                    newer,
                    manifest,
                } => RemoteError::Fenced {
                    epoch,
                    newer,
                    manifest,
                },
                Remote::Gap { from, to } => RemoteError::Gap { from, to },
                Remote::Corrupt {
                    object,
                    offset,
                    reason,
                } => RemoteError::Corrupt {
                    object,
                    offset,
                    reason,
                },
                Remote::Store {
                    op,
                    object,
                    store,
                    message,
                } => RemoteError::Store {
                    op: intern(&op),
                    object,
                    source: object_store::Error::Generic {
                        store: store.map_or("object store", |s| intern(&s)),
                        source: message.into(),
                    },
                },
                Remote::Diverged { reason } => RemoteError::Diverged { reason },
                Remote::NoRemoteRun { url } => RemoteError::NoRemoteRun { url },
                Remote::Config { why } => RemoteError::Config(why),
                Remote::Local { error } => RemoteError::Local(error.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ErrorChain;

    fn engine_errors() -> Vec<engine::Error> {
        use engine::Error as E;
        let p = || PathBuf::from("/runs/r/log/00000001.seg");
        vec![
            E::Io {
                op: "fdatasync segment",
                path: p(),
                source: io::Error::from_raw_os_error(libc::EIO),
            },
            E::Io {
                op: "write segment",
                path: p(),
                source: io::Error::new(io::ErrorKind::StorageFull, "no room"),
            },
            E::Corrupt {
                path: p(),
                offset: Some(4096),
                seq: Some(7),
                reason: "checksum mismatch".into(),
            },
            E::Tampered {
                path: p(),
                offset: None,
                seq: Some(3),
                what: "record tag".into(),
            },
            E::Key {
                path: p(),
                reason: "store is tagged".into(),
            },
            E::Refused("a machine's own refusal".into()),
            E::Codec {
                path: None,
                seq: Some(2),
                reason: "bad record".into(),
            },
            E::TooLarge {
                what: "record",
                len: 9,
                max: 8,
            },
            E::Poisoned {
                cause: "fdatasync segment /x: EIO".into(),
            },
            E::TableWriterFailed { path: p() },
            E::Locked {
                path: p(),
                holder: Some("pid 12".into()),
                waited: Some(Duration::from_millis(1500)),
            },
            E::NotFound { path: p() },
            E::Mismatch {
                path: p(),
                reason: "codec".into(),
            },
            E::Unsupported {
                path: p(),
                reason: "newer".into(),
            },
            E::Unsafe {
                path: p(),
                reason: "symlink".into(),
            },
        ]
    }

    fn every_error() -> Vec<RunError> {
        let id = || "r1".to_string();
        let rules = vec![
            RuleError::NotInitialized,
            RuleError::AlreadyInitialized { id: id() },
            RuleError::Closed {
                id: id(),
                status: RunStatus::Done,
                op: "unit",
            },
            RuleError::Demote {
                unit: "u".into(),
                to: UnitStatus::Blocked,
            },
            RuleError::DepsNotDone {
                unit: "u".into(),
                roots: vec!["a".into(), "b".into()],
            },
            RuleError::OpenUnits {
                units: [("u".to_string(), UnitStatus::Pending)].into(),
            },
            RuleError::UnknownItem {
                id: "item-9".into(),
                resolved: true,
            },
            RuleError::UnknownBudget { name: "usd".into() },
            RuleError::Invalid("bad".into()),
        ];
        let mut all: Vec<RunError> = vec![
            RunError::Invalid("bad id".into()),
            RunError::NotFound {
                id: id(),
                root: "/runs".into(),
            },
            RunError::NotArchived {
                name: "r1.x".into(),
                archive: "/runs/archive".into(),
            },
            RunError::Ambiguous {
                prefix: "r".into(),
                matches: vec!["r1".into(), "r2".into()],
            },
            RunError::Checkpoint {
                id: id(),
                source: serde::de::Error::custom("missing field `x`"),
            },
            RunError::Io {
                op: "list runs",
                path: "/runs".into(),
                source: io::Error::from_raw_os_error(libc::EACCES),
            },
            RunError::Served {
                id: id(),
                message: "refused: x".into(),
                refused: true,
            },
        ];
        all.extend(
            rules
                .into_iter()
                .map(|source| RunError::Refused { id: id(), source }),
        );
        all.extend(
            engine_errors()
                .into_iter()
                .map(|source| RunError::Engine { id: id(), source }),
        );
        #[cfg(feature = "remote")]
        {
            use crate::remote::RemoteError as R;
            let remotes = vec![
                R::Fenced {
                    epoch: 1,
                    newer: 2,
                    manifest: 3,
                },
                R::Gap { from: 4, to: 9 },
                R::Corrupt {
                    object: "o".into(),
                    offset: Some(1),
                    reason: "crc".into(),
                },
                R::Store {
                    op: "put manifest",
                    object: "m".into(),
                    source: object_store::Error::Generic {
                        store: "remote",
                        source: "503".into(),
                    },
                },
                R::Diverged { reason: "x".into() },
                R::NoRemoteRun {
                    url: "s3://b".into(),
                },
                R::Config("bad url".into()),
                R::Local(engine_errors().remove(2)),
            ];
            all.extend(remotes.into_iter().map(|r| RunError::Remote {
                op: "ship to remote",
                at: "s3://b/r1".into(),
                source: std::sync::Arc::new(r),
            }));
        }
        all
    }

    /// What a caller can see of an error: its chain, its exit code, its rule,
    /// and its fields (Debug, which prints every field but an opaque cause's
    /// type).
    fn seen(e: &RunError) -> (String, u8, Option<RuleError>, bool, bool) {
        (
            ErrorChain(e).to_string(),
            e.exit_code(),
            e.rule().cloned(),
            e.is_locked(),
            e.outcome_unknown(),
        )
    }

    #[test]
    fn every_error_reads_back_as_the_same_variant_saying_the_same() {
        for e in every_error() {
            let back = from_wire(&to_wire(&e).unwrap()).unwrap();
            assert_eq!(seen(&back), seen(&e), "{e:?}");
            assert_eq!(
                std::mem::discriminant(&back),
                std::mem::discriminant(&e),
                "{e:?}"
            );
            if let (RunError::Engine { source: a, .. }, RunError::Engine { source: b, .. }) =
                (&back, &e)
            {
                assert_eq!(std::mem::discriminant(a), std::mem::discriminant(b));
                if let (engine::Error::Io { source: x, .. }, engine::Error::Io { source: y, .. }) =
                    (a, b)
                {
                    assert_eq!((x.kind(), x.raw_os_error()), (y.kind(), y.raw_os_error()));
                }
            }
            #[cfg(feature = "remote")]
            if let Some(r) = e.remote_error() {
                let b = back.remote_error().unwrap();
                assert_eq!(std::mem::discriminant(b), std::mem::discriminant(r));
                assert_eq!(b.is_fenced(), r.is_fenced());
            }
        }
    }

    #[test]
    fn a_detail_this_build_cannot_read_is_none() {
        for v in [
            serde_json::json!({}),
            serde_json::json!({"kind": "from_the_future"}),
            serde_json::json!({"kind": "refused", "id": "r", "rule": {"rule": "new_rule"}}),
            serde_json::json!("refused"),
        ] {
            assert!(from_wire(&v).is_none(), "{v}");
        }
    }

    #[test]
    fn interned_texts_are_kept_once_and_capped() {
        let mut kept = vec![];
        let a = intern_in(&mut kept, "an op from a server");
        assert!(std::ptr::eq(a, intern_in(&mut kept, "an op from a server")));
        for i in 0..MAX_INTERNED + 10 {
            let _ = intern_in(&mut kept, &format!("op {i}"));
        }
        assert_eq!(kept.len(), MAX_INTERNED);
        assert_eq!(intern_in(&mut kept, "yet another op"), UNKNOWN_OP);
        assert!(
            std::ptr::eq(a, intern_in(&mut kept, "an op from a server")),
            "kept"
        );
    }
}
