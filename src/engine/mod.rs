//! The storage engine: a generic state machine whose transitions are appended to
//! an fsync'd log and whose state is periodically snapshotted. It knows nothing of
//! runs. FORMAT.md describes every byte it writes.
//!
//! The API: [`Store`] with its [`Options`], [`SyncPolicy`] and [`CompactionPolicy`];
//! the [`Machine`] it persists, or a [`KeyedMachine`] whose state is a sorted map
//! ([`Keyed`], [`KeyedState`], table snapshots through [`SnapshotSink`] and
//! [`Table`]); the lock-free readers [`read_state`], [`verify`] and
//! [`for_each_record`]; the I/O seam [`Vfs`] with [`RealFs`]; the store [`Key`];
//! and [`Error`].
//!
//! Framing, scanning, recovery, the group commit and the simulator are
//! crate-private. Under the `sim` feature (off by default; this crate's own tests,
//! fuzz targets and benches turn it on) they are public but hidden from the docs:
//! test support, not part of the API, and free to change in any release.

/// Declares crate-private modules that the `sim` feature makes public, hidden
/// from the docs, for tests, fuzz targets and benches (not part of the API).
macro_rules! internal_mods {
    ($($name:ident;)*) => {$(
        #[cfg(feature = "sim")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "sim"))]
        pub(crate) mod $name;
    )*};
}

mod append;
mod chain;
mod codec;
mod compact;
mod dir;
mod error;
mod files;
mod keyed;
mod load;
mod lock;
mod merge;
mod open;
mod options;
mod pending;
mod realfs;
mod repair;
mod segment;
mod shared;
mod snapshot;
mod store;
mod trim;
mod verify;
mod walk;
internal_mods! {
    format;
    frame;
    group;
    mark;
    recovery;
    scan;
    snapfile;
    table;
    tag;
    vfs;
}
/// The simulated filesystem (crashes and faults) for tests, fuzz targets and
/// benches: test support under the `sim` feature, not part of the API.
#[cfg(feature = "sim")]
#[doc(hidden)]
pub mod sim;

pub use codec::{decode_payload, encode_payload};
pub use compact::CompactReport;
pub use dir::{create_dir_all_durable, create_dir_durable};
pub use error::{Error, ErrorChain, Result};
pub use files::write_file_atomic;
pub use format::Codec;
pub use keyed::{Damaged, Entries, Keyed, KeyedMachine, KeyedState, WholeState};
#[cfg(feature = "remote")]
pub(crate) use load::snapshot_parent;
pub use load::{Progress, RecoveryReport, TornTailReport};
pub use options::{CompactionPolicy, Options, Stats, SyncPolicy};
pub use realfs::RealFs;
pub use snapshot::{SnapshotData, SnapshotSink};
pub use store::Store;
pub use table::{Table, TableIter, TableSpec, TableWriter};
pub use tag::Key;
pub use verify::{Integrity, VerifyReport, verify, verify_as, verify_with_key};
pub use vfs::{FileBytes, LockAttempt, Vfs, VfsFile};
pub use walk::{for_each_record, for_each_record_with_key};

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

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

    /// Why the last `apply` failed, when the cause was damage found while
    /// reading the state rather than a refusal by the rules. The default: never.
    fn take_fault(state: &mut Self::State) -> Option<Error> {
        let _ = state;
        None
    }
}

/// Reads a store without taking the writer lock and without modifying any file.
///
/// ```
/// # use runlog::engine::Machine;
/// # use serde::{Deserialize, Serialize};
/// # struct Sum;
/// # #[derive(Debug)] struct Zero;
/// # impl std::fmt::Display for Zero { fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result { f.write_str("zero") } }
/// # impl std::error::Error for Zero {}
/// # impl Machine for Sum {
/// #     type State = u64; type Transition = u64; type Error = Zero;
/// #     fn apply(s: &mut u64, t: &u64) -> Result<(), Zero> { if *t == 0 { return Err(Zero) } *s += t; Ok(()) }
/// # }
/// use runlog::engine::{Options, RealFs, Store, read_state};
/// let dir = tempfile::tempdir()?;
/// let writer = Store::<Sum>::open(dir.path(), Options { create: true, ..Options::default() })?;
/// writer.append(&7)?;
/// // Beside the live writer: no lock taken, no byte changed.
/// let (state, report) = read_state::<Sum>(&RealFs, dir.path())?;
/// assert_eq!((state, report.last_seq), (7, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
/// Sees every transition acknowledged before it started; a torn tail (possibly a
/// record being written right now) is ignored and reported, not truncated.
pub fn read_state<M: Machine>(vfs: &dyn Vfs, dir: &Path) -> Result<(M::State, RecoveryReport)> {
    read_state_with_key::<M>(vfs, dir, None)
}

/// [`read_state`] of a keyed store (with its key: every record's and the
/// snapshot's tag is checked, a mismatch is [`Error::Tampered`]), or of an
/// unkeyed one (`None`). The wrong choice is [`Error::Key`].
pub fn read_state_with_key<M: Machine>(
    vfs: &dyn Vfs,
    dir: &Path,
    key: Option<&Key>,
) -> Result<(M::State, RecoveryReport)> {
    dir::check_dir(vfs, dir)?;
    load::with_retries(|| {
        let mut decode_state = M::decode_snapshot;
        let mut apply = load::replay_one::<M>;
        let l = load::load(
            vfs,
            dir,
            load::LoadSpec {
                mapped: false,
                upto: None,
                decode_state: &mut decode_state,
                apply: &mut apply,
                progress: None,
                key,
            },
        )?;
        M::check_state(&l.state).map_err(|reason| Error::Unsupported {
            path: dir.to_path_buf(),
            reason,
        })?;
        Ok((l.state, l.report))
    })
}

/// Opens the store for writing (dropping a torn tail), writes a fresh snapshot of
/// the recovered state and compacts. Returns what recovery found and what
/// compaction did.
pub fn rebuild_snapshot<M: Machine>(
    dir: &Path,
    opts: Options,
) -> Result<(RecoveryReport, CompactReport)> {
    let store = Store::<M>::open(dir, opts)?;
    let report = store.recovery().clone();
    let c = store.compact()?;
    Ok((report, c))
}
