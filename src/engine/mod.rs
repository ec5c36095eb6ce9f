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
/// `name;` declares the module `name` here; `room::name;` re-exports, under
/// `sim` only, a module a room declares (with this macro) at its old short
/// path, `runlog::engine::name`, which the tests, fuzz targets and benches
/// use.
macro_rules! internal_mods {
    () => {};
    ($name:ident; $($rest:tt)*) => {
        #[cfg(feature = "sim")]
        #[doc(hidden)]
        pub mod $name;
        #[cfg(not(feature = "sim"))]
        pub(crate) mod $name;
        internal_mods!($($rest)*);
    };
    ($room:ident :: $name:ident; $($rest:tt)*) => {
        #[cfg(feature = "sim")]
        #[doc(hidden)]
        pub use $room::$name;
        internal_mods!($($rest)*);
    };
}

// The vocabulary every room uses: errors, options, the machine, the bytes'
// names and tags, payload encoding, the one way to take a mutex.
mod codec;
mod error;
mod machine;
mod mutex;
mod options;
/// The seam the remote tier ships the log's bytes through (crate-private).
#[cfg(feature = "remote")]
pub(crate) mod wire;

// The rooms, from the ground up: each imports only the rooms before it.
mod io;
mod load;
mod log;
mod read;
mod shared;
mod snapshot;
mod store;

internal_mods! {
    format;
    tag;
    io::vfs;
    log::frame;
    log::group;
    log::mark;
    log::scan;
    log::writers;
    snapshot::snapfile;
    snapshot::table;
    load::recovery;
    load::tailcache;
}
/// The simulated filesystem (crashes and faults) for tests, fuzz targets and
/// benches: test support under the `sim` feature, not part of the API.
#[cfg(feature = "sim")]
#[doc(hidden)]
pub use io::sim;

pub use error::{Error, ErrorChain};
pub use format::Codec;
pub(crate) use io::dir::create_dir_all_durable;
sim_pub_use!(io::dir::remove_dir_all);
#[cfg(feature = "remote")]
pub(crate) use io::files::write_file_atomic;
pub use io::realfs::RealFs;
pub use io::vfs::{FileData, LockAttempt, SharedFile, Vfs, VfsFile};
#[cfg(feature = "remote")]
pub(crate) use load::base::snapshot_parent;
pub use load::report::{RecoveryReport, TornTailReport};
pub use machine::{ApplyError, Machine, SnapshotSizes};
pub use options::{CompactionPolicy, Options, Progress, Stats, SyncPolicy};
pub use read::Reader;
pub(crate) use read::verify::verify_as;
pub use read::verify::{Integrity, VerifyReport};
pub use snapshot::keyed::{Keyed, KeyedMachine, KeyedState};
pub use snapshot::table::{Table, TableSpec, TableWriter};
pub use snapshot::{SnapshotData, SnapshotSink};
pub use store::Store;
pub use store::compact::CompactReport;
pub(crate) use store::rebuild_snapshot;
pub use tag::Key;
