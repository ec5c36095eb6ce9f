//! How a store is opened and what it counts: the sync and compaction policies,
//! [`Options`], and [`Stats`].

use super::format::{Codec, MAX_SNAPSHOT_LEN};
use super::io::realfs::RealFs;
use super::io::vfs::Vfs;
use super::tag::Key;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// When an acknowledged append is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// `append` returns only after an fsync that covers its record. Concurrent
    /// appenders share fsyncs (leader/follower), never weakening this. The default.
    #[default]
    Always,
    /// As `Always`, and the thread that leads an fsync first waits up to `linger`
    /// for more appenders to join it: higher throughput with many writers,
    /// more latency for each.
    Grouped {
        /// How long a leader waits for company before its fsync.
        linger: Duration,
    },
    /// `append` returns once the record is written to the OS; a background thread
    /// fsyncs every interval. A crash of the machine (not of the process) loses up
    /// to `interval` of acknowledged appends. `sync()` forces it.
    Interval(Duration),
    /// Never fsync except on `sync()`, compaction and close. A machine crash may
    /// lose everything since the last of those. For tests and bulk loads.
    Never,
}

/// When the store compacts by itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CompactionPolicy {
    /// Only on an explicit [`Store::compact`](super::Store::compact).
    Manual,
    /// In a background thread, when the log written since the last snapshot is
    /// larger than both `min_log_bytes` and `ratio` × the last snapshot's size.
    Auto {
        /// Never compact a log smaller than this.
        min_log_bytes: u64,
        /// Compact when the log exceeds this multiple of the last snapshot size.
        ratio: f64,
    },
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy::Auto {
            min_log_bytes: 64 << 20,
            ratio: 1.0,
        }
    }
}

/// Progress of a replay, passed to the progress callback.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Records replayed so far.
    pub records: u64,
    /// Segment bytes scanned so far.
    pub bytes: u64,
    /// Segments in the log.
    pub segments: usize,
}

/// A callback receiving replay progress.
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

/// How to open a store for writing.
#[derive(Clone)]
pub struct Options {
    /// Create the store if it does not exist (with `codec`).
    pub create: bool,
    /// The codec for a new store; an existing store keeps its own.
    pub codec: Codec,
    /// When appends are durable.
    pub sync: SyncPolicy,
    /// How long to wait for another writer to release the lock (`None`: fail at once).
    pub lock_wait: Option<Duration>,
    /// A segment is closed and a new one started past this size.
    pub segment_bytes: u64,
    /// Binary segments are extended with zeros this many bytes at a time, ahead
    /// of the records, so that appends overwrite allocated blocks in place and an
    /// fdatasync need not also write the file's size (FORMAT.md, "Preallocation").
    /// 0 turns it off. JSONL segments are never preallocated: they stay plain text.
    pub preallocate: u64,
    /// When to compact automatically.
    pub compaction: CompactionPolicy,
    /// Under [`CompactionPolicy::Auto`], a keyed state's log is flushed as a
    /// delta table (FORMAT.md §14) once this many bytes were logged since the
    /// newest snapshot, so that an open never replays more than about this
    /// much; the full table is merged only under the policy's own rule, and
    /// only by a writer that has itself appended this much (a long-lived one).
    /// 0 (the default) writes no deltas: every compaction writes a full snapshot.
    pub delta_bytes: u64,
    /// Most entries the state may hold outside its snapshot tables (a keyed
    /// state's overlay, [`Machine::backlog`](super::Machine::backlog)) before
    /// appends wait for compaction (FORMAT.md §14.6): past it, an append whose
    /// records are durable returns only once the running compaction has
    /// ended, so memory stays bounded when appends outpace compaction. 0: no
    /// bound. Default 262,144.
    pub max_backlog: u64,
    /// The filesystem; tests substitute a simulated one.
    pub vfs: Arc<dyn Vfs>,
    /// Called during replay with progress.
    pub progress: Option<ProgressFn>,
    /// The key of a tagged store (FORMAT.md §10): a store created with a key is
    /// tagged, every record and snapshot carries a tag, and every open checks
    /// them ([`Error::Tampered`](super::Error::Tampered)). A tagged store must be opened with its key and
    /// an untagged one without ([`Error::Key`](super::Error::Key)). Never written into the store.
    pub key: Option<Key>,
    /// The largest whole-state snapshot payload written (at most, and by
    /// default, `MAX_SNAPSHOT_LEN`), checked while encoding: a state past it
    /// is not compacted ([`Error::TooLarge`](super::Error::TooLarge); a background compaction's is in
    /// [`Store::last_compaction_error`](super::Store::last_compaction_error)).
    pub max_snapshot_len: u64,
    /// A one-shot writer, for a process that appends one batch and exits
    /// (FORMAT.md §5.8): the open defers every write, as for a refused append;
    /// the first batch that is accepted is written under the writer lock, which
    /// is then released **before** the fdatasync, so that other writer
    /// processes append meanwhile; its fdatasync is shared with theirs (one
    /// covers the records of all that appended before it started). Later
    /// appends return [`Error::Unsupported`](super::Error::Unsupported). A batch
    /// that makes a compaction due keeps the lock and compacts as any writer.
    pub one_shot: bool,
}

/// [`Options::max_backlog`]'s default: at ~200 bytes an entry (a run's
/// unit), about 50 MB of overlay, and as much again while a compaction
/// rebuilds the state it flushes.
pub(crate) const DEFAULT_MAX_BACKLOG: u64 = 1 << 18;

impl Default for Options {
    fn default() -> Self {
        Options {
            create: false,
            codec: Codec::Binary,
            sync: SyncPolicy::Always,
            lock_wait: None,
            segment_bytes: 64 << 20,
            preallocate: 1 << 20,
            compaction: CompactionPolicy::default(),
            delta_bytes: 0,
            max_backlog: DEFAULT_MAX_BACKLOG,
            vfs: Arc::new(RealFs),
            progress: None,
            key: None,
            max_snapshot_len: MAX_SNAPSHOT_LEN,
            one_shot: false,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("create", &self.create)
            .field("codec", &self.codec)
            .field("sync", &self.sync)
            .field("lock_wait", &self.lock_wait)
            .field("segment_bytes", &self.segment_bytes)
            .field("preallocate", &self.preallocate)
            .field("compaction", &self.compaction)
            .field("delta_bytes", &self.delta_bytes)
            .field("max_backlog", &self.max_backlog)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Counters since open.
#[derive(Debug, Default)]
pub struct Stats {
    /// Records appended.
    pub appends: AtomicU64,
    /// fsyncs of the log issued for acknowledgement.
    pub fsyncs: AtomicU64,
    /// Acknowledgements that another writer process's fsync covered: this
    /// writer found its records under the durability mark and issued none
    /// (FORMAT.md §5.8).
    pub fsyncs_covered: AtomicU64,
    /// Snapshots written (full ones and deltas).
    pub snapshots: AtomicU64,
    /// Of those, delta tables (FORMAT.md §14).
    pub deltas: AtomicU64,
    /// Preallocations that could not be had (a nearly full disk): the zeros
    /// written were given back and appends continued plain (FORMAT.md §3.2).
    pub preallocation_fallbacks: AtomicU64,
    /// Final syncs that failed when the store was dropped (`Interval`,
    /// `Never`): what was written since the last sync may not be durable.
    /// [`Store::close`](super::Store::close) returns the error instead.
    pub close_sync_failures: AtomicU64,
    /// Clean-ups after a compaction that failed (an unlink of a redundant
    /// segment, snapshot or temp file, or the directory fsync after them):
    /// harmless leftovers (FORMAT.md §5.4 step 5), counted, and named by
    /// `verify` as files that could have been removed.
    pub cleanup_failures: AtomicU64,
    /// Tail caches (FORMAT.md §15) that could not be written: the next open
    /// replays instead, nothing else changes.
    pub tail_cache_failures: AtomicU64,
    /// Automatic compactions not started because the store's filesystem had
    /// too little room for what they write plus the log's reserve (FORMAT.md
    /// §5.4): the log keeps every record, and the compaction is tried again
    /// after later appends. [`Store::compaction_deferred`](super::Store::compaction_deferred)
    /// says why.
    pub compactions_deferred: AtomicU64,
    /// Appends that waited for a running compaction because the state held
    /// more than [`Options::max_backlog`] entries outside its tables.
    pub backlog_waits: AtomicU64,
}
