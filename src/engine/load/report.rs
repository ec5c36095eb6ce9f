//! What a load reports: [`RecoveryReport`], what recovery found and did
//! (for a writer's open, a reader's state and `verify`), and the torn tail it
//! met ([`TornTailReport`]).

use crate::engine::format::Codec;
use std::path::PathBuf;
use std::time::Duration;

/// What recovery found and did.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    /// The codec of the store.
    pub codec: Option<Codec>,
    /// The seq the starting snapshot covers (None: started from the empty state).
    pub snapshot_seq: Option<u64>,
    /// Newer snapshots that were damaged and skipped, loudly: (path, reason).
    pub snapshot_fallbacks: Vec<(PathBuf, String)>,
    /// Records replayed on top of the snapshot.
    pub records_replayed: u64,
    /// Of those, records a one-shot writer read under the writer lock after
    /// its replay without it: what other writers appended meanwhile
    /// (FORMAT.md §5.8).
    pub records_caught_up: u64,
    /// The last seq in the recovered history (0 when empty).
    pub last_seq: u64,
    /// Segments read.
    pub segments: usize,
    /// Bytes of segment data scanned.
    pub bytes_scanned: u64,
    /// A torn tail that was found (and, for a writer, dropped).
    pub torn_tail: Option<TornTailReport>,
    /// A lock-free reader's bad frame at the end of the log that is not known
    /// to be torn: a writer held the lock while it looked (FORMAT.md §5.6), so
    /// it is an append in progress (or a torn tail that writer drops before
    /// it appends). Not counted, not damage; `torn_tail` is then `None`.
    /// Always `None` for a writer's open, which holds the lock.
    pub append_in_progress: Option<TornTailReport>,
    /// Size of the starting snapshot file.
    pub snapshot_bytes: u64,
    /// Log bytes scanned that the snapshot already covered.
    pub bytes_below_snapshot: u64,
    /// Wall time the recovery took.
    pub elapsed: Duration,
    /// The seq the durability mark (FORMAT.md §5.7) proved durable, when a valid
    /// mark was found (`None`: no mark, or one that failed its checks).
    pub durable_mark: Option<u64>,
    /// Why the durability mark was not used, when a `DURABLE` file was found
    /// that is not a valid mark (a torn write of it: it proves nothing).
    pub mark_unreadable: Option<String>,
    /// Records above the snapshot whose effect the tail cache (FORMAT.md §15)
    /// supplied: checked, not decoded or applied (0: no cache used).
    pub records_from_tail_cache: u64,
    /// Why a `TAIL` file found was not used (a cache is never needed; this
    /// only says why the open replayed instead).
    pub tail_cache_ignored: Option<String>,
}

/// A torn tail found at the end of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTailReport {
    /// The segment it was in.
    pub path: PathBuf,
    /// Offset of its first byte.
    pub offset: u64,
    /// Bytes discarded.
    pub bytes: u64,
    /// The whole file (its header was torn) was discarded.
    pub whole_file: bool,
    /// Why the bytes do not form a record.
    pub reason: String,
    /// Where the discarded bytes were kept (writers only).
    pub quarantined_to: Option<PathBuf>,
    /// The seq of the first record dropped: the one the bad frame was to hold
    /// (the segment's first seq when its header was torn).
    pub first_seq: u64,
    /// Frames in the dropped bytes that pass their checksums (records written
    /// after the damaged one, never acknowledged: none proves it durable).
    pub valid_frames_dropped: u64,
}
