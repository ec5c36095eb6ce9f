//! The plan a writer's open leaves for its first write (FORMAT.md §5.5 steps
//! 3–5): plain data, made by the open (`store/open.rs`) and carried out by `repair.rs`.

use crate::engine::io::vfs::VfsFile;
use std::path::PathBuf;

/// What a writer's open leaves for `Shared::prepare` (in `repair.rs`), done before the first
/// write (FORMAT.md §5.5 steps 3–5). Until then nothing in the store has changed.
pub(crate) struct Pending {
    pub(crate) torn: Option<TornPlan>,
    /// The last segment that survives the torn tail.
    pub(crate) last: Option<LastSegment>,
    /// Leftover temp files of an interrupted snapshot install.
    pub(crate) temps: Vec<PathBuf>,
    /// The seq after the replayed history. The first batch is staged (and its
    /// seqs taken) before `prepare` runs: `Live::next_seq` may be past it.
    pub(crate) next_seq: u64,
}

/// A torn tail to quarantine and cut.
pub(crate) struct TornPlan {
    pub(crate) path: PathBuf,
    pub(crate) offset: u64,
    pub(crate) whole_file: bool,
}

/// The last surviving segment, as the open found it.
pub(crate) struct LastSegment {
    pub(crate) path: PathBuf,
    /// The segment, open for writing since a one-shot writer's catch-up read
    /// it under the writer lock (held since): the append writes through it.
    pub(crate) opened: Option<Box<dyn VfsFile>>,
    pub(crate) first_seq: u64,
    /// Where its valid records end (after a torn tail is cut).
    pub(crate) end: u64,
    /// The file's length as read: `end` plus preallocated zeros, when only
    /// zeros follow the records (else `end`).
    pub(crate) alloc: u64,
    /// Some of its records are above `durable`: not known durable (a killed
    /// writer's, or one whose fsync failed). The segment is copied to a new
    /// file of the same name before anything is appended (FORMAT.md §5.5).
    pub(crate) unproven: bool,
    /// Some of its records are above `durable`, and the sync state vouches for
    /// them (FORMAT.md §5.8): left as they are, made durable by the next fsync
    /// (the durable watermark stays at `durable` until then).
    pub(crate) vouched: bool,
    /// The history ends in it: appends continue there.
    pub(crate) continues: bool,
    /// The watermark its records, and the durability mark, prove durable.
    pub(crate) durable: u64,
}
