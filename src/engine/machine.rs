//! The trait a store persists: a state, its transitions, `apply`, and how the
//! state is snapshotted (whole, or as tables for a keyed state).

use super::codec::{self, decode_payload};
use super::error::{Error, Result};
use super::format::{self, Codec};
use super::snapshot::{SnapshotData, SnapshotSink};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// What [`Machine::snapshot_sizes`] estimates: the bytes of a full snapshot
/// of the state, and of a delta table of what changed since its newest
/// snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotSizes {
    /// A full snapshot (or table) of the whole state.
    pub full: u64,
    /// A delta table of the entries changed since the newest snapshot.
    pub delta: u64,
}

/// A state machine the store persists: a state, its transitions, and `apply`.
///
/// `apply` must be deterministic (replay after a crash runs it again on the same
/// transitions) and must leave the state unchanged when it returns an error: a
/// refused transition is never written.
pub trait Machine: Send + Sync + 'static {
    /// The state; `Default` is the state of an empty store.
    type State: Serialize + DeserializeOwned + Default + Send + Sync + 'static;
    /// One transition.
    type Transition: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// Why `apply` refused a transition.
    type Error: std::error::Error + Send + Sync + 'static;
    /// Applies `t` to `state`, or refuses it leaving `state` as it was.
    fn apply(state: &mut Self::State, t: &Self::Transition)
    -> std::result::Result<(), Self::Error>;

    /// Decodes the snapshot a store opens from, at `seq`. The default reads a
    /// whole-state snapshot with the store's codec and refuses a table.
    fn decode_snapshot(
        codec: Codec,
        seq: u64,
        snapshot: SnapshotData<'_>,
    ) -> std::result::Result<Self::State, String> {
        let _ = seq;
        match snapshot {
            SnapshotData::Whole(payload) => decode_payload(codec, payload),
            SnapshotData::Table(t) => Err(format!(
                "a table snapshot ({} entries), but this machine keeps its state whole",
                t.len()
            )),
            SnapshotData::Tables(_) => {
                Err("delta tables, but this machine keeps its state whole".into())
            }
        }
    }

    /// Writes the snapshot of `state` (the state after seq `sink.seq()`, rebuilt
    /// by compaction) and returns its size. The default writes it whole.
    fn write_snapshot(state: &Self::State, sink: SnapshotSink<'_>) -> Result<u64> {
        let mut payload = Vec::new();
        // The limit is checked while encoding: a state over it costs the limit,
        // not its own size, and is refused before anything is written.
        let max = sink.max_len().min(format::MAX_SNAPSHOT_LEN);
        codec::encode_payload_within(sink.codec(), state, &mut payload, max).map_err(|stop| {
            match stop {
                codec::EncodeStop::TooLarge => Error::TooLarge {
                    what: "snapshot (encoding stopped at the limit)",
                    len: max + 1,
                    max,
                },
                codec::EncodeStop::Failed(reason) => Error::Codec {
                    path: None,
                    seq: Some(sink.seq()),
                    reason,
                },
            }
        })?;
        sink.whole(&payload)
    }

    /// A copy of the live state cheap enough to take under the writer's lock,
    /// from which a delta flush (FORMAT.md §14.4) writes its table instead of
    /// rebuilding the state from disk: a keyed state's copy shares its tables
    /// and copies its overlay, which holds only what changed since the newest
    /// snapshot. `None`, the default, always rebuilds.
    fn tail_copy(state: &Self::State) -> Option<Self::State> {
        let _ = state;
        None
    }

    /// How many entries `state` holds in memory that its snapshot tables do
    /// not (a keyed state's overlay): what the next compaction frees. Past
    /// [`Options::max_backlog`](super::Options::max_backlog), appends wait for
    /// a running compaction (FORMAT.md §14.6). 0, the default: a state held
    /// whole in memory, which no compaction shrinks.
    fn backlog(state: &Self::State) -> u64 {
        let _ = state;
        0
    }

    /// About how many bytes a snapshot of `state` would take, and a delta of
    /// what changed since its newest snapshot, for the room check before an
    /// automatic compaction (FORMAT.md §5.4). `None`, the default: not known;
    /// the check then counts the newest snapshot's files and every byte of
    /// the log since, an upper bound.
    fn snapshot_sizes(state: &Self::State) -> Option<SnapshotSizes> {
        let _ = state;
        None
    }

    /// Whether this machine keeps a tail cache (FORMAT.md §15): only then do
    /// its opens fold the records they replay into the cache's digest.
    const KEEPS_TAIL_CACHE: bool = false;

    /// The state, for the tail cache (FORMAT.md §15): what an open that
    /// stands on the same snapshot chain needs to arrive at this state without
    /// applying the records since the chain's newest snapshot. `None`, the
    /// default, keeps no cache (and so does a state too large to copy).
    fn encode_tail(state: &Self::State) -> Option<Vec<u8>> {
        let _ = state;
        None
    }

    /// Makes `state`, as the snapshot chain a cache stands on left it, the
    /// state `bytes` ([`Machine::encode_tail`]'s) holds; an error leaves it as
    /// it was. The default refuses every cache.
    fn decode_tail(state: &mut Self::State, bytes: &[u8]) -> std::result::Result<(), String> {
        let _ = (state, bytes);
        Err("this machine keeps no tail cache".into())
    }

    /// Called on the live state, under the writer's lock, once compaction has
    /// installed the snapshot at `seq`: a state that keeps what the snapshot
    /// holds can drop its own copy. The default does nothing.
    fn snapshot_installed(state: &mut Self::State, seq: u64, snapshot: SnapshotData<'_>) {
        let _ = (state, seq, snapshot);
    }

    /// Refuses a state this build must not use: called on every state an open
    /// (writer or reader) arrives at, before anything is written. A run
    /// written by a newer build, for one. `Err` fails the open with
    /// [`Error::Unsupported`]; the default accepts every state.
    fn check_state(state: &Self::State) -> std::result::Result<(), String> {
        let _ = state;
        Ok(())
    }

    /// The store's error for an `apply` that failed with `e`:
    /// [`Error::Refused`] by default. A machine whose `apply` reads its state
    /// from disk (a keyed state's tables) returns [`ApplyError`], and the
    /// damage it met reaches the caller as what it is, not as a refusal.
    fn failure(e: Self::Error) -> Error {
        Error::Refused(Box::new(e))
    }
}

/// Why an `apply` that reads its state from disk failed: the rules refused the
/// transition, or a read of the state met damage (and nothing was changed).
#[derive(Debug)]
pub enum ApplyError<E> {
    /// The rules refused the transition.
    Refused(E),
    /// A read of the state met damage: the store's error, carried as it is.
    Damaged(Error),
}

impl<E> From<E> for ApplyError<E> {
    fn from(e: E) -> Self {
        ApplyError::Refused(e)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> ApplyError<E> {
    /// The store's error: [`Error::Refused`] with the rules' reason, or the
    /// damage itself.
    pub fn into_store_error(self) -> Error {
        match self {
            ApplyError::Refused(e) => Error::Refused(Box::new(e)),
            ApplyError::Damaged(e) => e,
        }
    }
}

// Transparent: it prints as the refusal or the damage, and passes on its cause.
impl<E: std::fmt::Display> std::fmt::Display for ApplyError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyError::Refused(e) => e.fmt(f),
            ApplyError::Damaged(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ApplyError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ApplyError::Refused(e) => e.source(),
            ApplyError::Damaged(e) => std::error::Error::source(e),
        }
    }
}
