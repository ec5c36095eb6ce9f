//! The storage engine: a generic state machine whose transitions are appended to
//! an fsync'd log and whose state is periodically snapshotted. It knows nothing of
//! runs. FORMAT.md describes every byte it writes.
//!
//! The API: [`Store`] with its [`Options`], [`SyncPolicy`] and [`CompactionPolicy`];
//! the [`Machine`] it persists, or a [`KeyedMachine`] whose state is a sorted map
//! ([`Keyed`], [`KeyedState`], table snapshots through [`SnapshotSink`] and
//! [`Table`]); the lock-free [`Reader`] (a store's state, its verification,
//! its records); the I/O seam [`Vfs`] with [`RealFs`]; the store [`Key`]; and
//! [`Error`].
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

mod active;
mod append;
mod book;
mod catchup;
mod chain;
mod codec;
mod compact;
mod dir;
mod error;
mod files;
mod gather;
mod keyed;
mod live;
mod load;
mod lock;
mod machine;
mod merge;
mod mutex;
mod open;
mod options;
mod pending;
mod poison;
mod reader;
mod realfs;
mod repair;
mod scratch;
mod segment;
mod settle;
mod shared;
mod slot;
mod snapshot;
mod store;
mod trim;
mod verify;
mod walk;
/// The seam the remote tier ships the log's bytes through (crate-private).
#[cfg(feature = "remote")]
pub(crate) mod wire;
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
    tailcache;
    vfs;
    writers;
}
/// The simulated filesystem (crashes and faults) for tests, fuzz targets and
/// benches: test support under the `sim` feature, not part of the API.
#[cfg(feature = "sim")]
#[doc(hidden)]
pub mod sim;

pub use compact::CompactReport;
pub(crate) use dir::create_dir_all_durable;
sim_pub_use!(dir::remove_dir_all);
pub use error::{Error, ErrorChain, Result};
#[cfg(feature = "remote")]
pub(crate) use files::write_file_atomic;
pub use format::Codec;
pub use keyed::{Entries, Keyed, KeyedMachine, KeyedState, WholeState};
#[cfg(feature = "remote")]
pub(crate) use load::snapshot_parent;
pub use load::{RecoveryReport, TornTailReport};
pub use machine::{ApplyError, Machine, SnapshotSizes};
pub use options::{CompactionPolicy, Options, Progress, Stats, SyncPolicy};
pub use reader::Reader;
pub use realfs::RealFs;
pub use snapshot::{SnapshotData, SnapshotSink};
pub use store::Store;
pub use table::{Table, TableIter, TableSpec, TableWriter};
pub use tag::Key;
pub(crate) use verify::verify_as;
pub use verify::{Integrity, VerifyReport};
pub use vfs::{FileBytes, FileData, LockAttempt, SharedFile, Vfs, VfsFile};

use std::path::Path;

/// Opens the store for writing (dropping a torn tail), writes a fresh snapshot of
/// the recovered state and compacts. Returns what recovery found and what
/// compaction did.
pub(crate) fn rebuild_snapshot<M: Machine>(
    dir: &Path,
    opts: Options,
) -> Result<(RecoveryReport, CompactReport)> {
    let store = Store::<M>::open(dir, opts)?;
    let report = store.recovery().clone();
    let c = store.compact()?;
    Ok((report, c))
}
