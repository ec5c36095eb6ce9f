//! The writer: a state machine kept in memory, its transitions appended to the
//! log and made durable under the sync policy, snapshots and compaction.
//!
//! Lock order: `inner` before `group`. Nothing holds `group` while taking `inner`.

use super::Machine;
use super::codec::{decode_payload, encode_payload};
use super::compact;
use super::error::{Error, ErrorChain, Result};
use super::format::*;
use super::frame::{encode_record_tagged, encode_segment_header_checked};
use super::group::GroupCommit;
use super::load::{LoadSpec, Loaded, Progress, RecoveryReport, load};
use super::recovery::Verdict;
use super::seal::{Key, StoreId, TAG_LEN, new_store_id, record_tag};
use super::vfs::{LockAttempt, RealFs, Vfs, VfsFile, retry_interrupted, write_all_at};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    /// Only on an explicit [`Store::compact`].
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
    /// The filesystem; tests substitute a simulated one.
    pub vfs: Arc<dyn Vfs>,
    /// Called during replay with progress.
    pub progress: Option<ProgressFn>,
    /// The key of a keyed store (FORMAT.md §10): a store created with a key is
    /// keyed, every record and snapshot carries a tag, and every open checks
    /// them ([`Error::Tampered`]). A keyed store must be opened with its key and
    /// an unkeyed one without ([`Error::Key`]). Never written into the store.
    pub key: Option<Key>,
    /// The largest whole-state snapshot payload written (at most, and by
    /// default, `MAX_SNAPSHOT_LEN`), checked while encoding: a state past it
    /// is not compacted ([`Error::TooLarge`]; a background compaction's is in
    /// [`Store::last_compaction_error`]).
    pub max_snapshot_len: u64,
}

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
            vfs: Arc::new(RealFs),
            progress: None,
            key: None,
            max_snapshot_len: super::format::MAX_SNAPSHOT_LEN,
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
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) file: Box<dyn VfsFile>,
    pub(crate) path: PathBuf,
    pub(crate) first_seq: u64,
}

pub(crate) struct Inner<M: Machine> {
    pub(crate) state: M::State,
    pub(crate) next_seq: u64,
    pub(crate) active: Arc<Active>,
    pub(crate) active_len: u64,
    /// The active segment's file length: `active_len` plus any preallocated zeros.
    pub(crate) active_alloc: u64,
    /// Framed records accepted but not yet written, under `Always`/`Grouped`: they
    /// end at `active_len`. The next fsync leader writes them all with one `pwrite`.
    staged: Vec<u8>,
    payload: Vec<u8>,
    frame: Vec<u8>,
    pub(crate) poisoned: Option<String>,
    /// First seqs of the live segments, oldest first (the last is `active`).
    pub(crate) segments: Vec<u64>,
    /// Seqs of the live snapshots, oldest first.
    pub(crate) snapshots: Vec<u64>,
    pub(crate) log_bytes_since_snapshot: u64,
    pub(crate) last_snapshot_bytes: u64,
    /// The rest of the open, until the first write (`None` once done).
    pending: Option<Box<Pending>>,
}

/// A deferred open rewrites the bytes not known durable together with the first
/// records appended, under their fdatasync, when they are at most this many
/// records and bytes; else it makes them durable on their own first (FORMAT.md §5.5).
const MAX_MERGED_TAIL_RECORDS: u64 = 32;
/// See [`MAX_MERGED_TAIL_RECORDS`].
const MAX_MERGED_TAIL_BYTES: u64 = 64 << 10;

/// What a writer's open leaves for [`Shared::prepare`], done before the first
/// write (FORMAT.md §5.5 steps 3–5). Until then nothing in the store has changed.
pub(crate) struct Pending {
    torn: Option<TornPlan>,
    /// The last segment that survives the torn tail.
    last: Option<LastSegment>,
    /// Leftover temp files of an interrupted snapshot install.
    temps: Vec<PathBuf>,
    /// The seq after the replayed history. The first batch is staged (and its
    /// seqs taken) before `prepare` runs: `Inner::next_seq` may be past it.
    next_seq: u64,
}

struct TornPlan {
    path: PathBuf,
    offset: u64,
    whole_file: bool,
}

struct LastSegment {
    path: PathBuf,
    first_seq: u64,
    /// Where its valid records end (after a torn tail is cut).
    end: u64,
    /// Where the bytes not known durable begin, and those bytes (up to `end`).
    from: u64,
    tail: Vec<u8>,
    /// Records in `tail`.
    records: u64,
    /// The history ends in it: appends continue there.
    continues: bool,
    /// The watermark its records prove durable.
    durable: u64,
}

/// The active segment of a writer whose open is not finished: never written
/// (every path that writes prepares first); an error, not a panic, if it were.
#[derive(Debug)]
struct NotOpened;

impl NotOpened {
    fn err() -> std::io::Error {
        std::io::Error::other("segment not opened: the writer's open is not finished")
    }
}

impl VfsFile for NotOpened {
    fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<usize> {
        Err(Self::err())
    }
    fn sync_data(&self) -> std::io::Result<()> {
        Err(Self::err())
    }
    fn sync_all(&self) -> std::io::Result<()> {
        Err(Self::err())
    }
    fn set_len(&self, _: u64) -> std::io::Result<()> {
        Err(Self::err())
    }
}

/// Counters since open.
#[derive(Debug, Default)]
pub struct Stats {
    /// Records appended.
    pub appends: AtomicU64,
    /// fsyncs of the log issued for acknowledgement.
    pub fsyncs: AtomicU64,
    /// Snapshots written.
    pub snapshots: AtomicU64,
    /// Preallocations that could not be had (a nearly full disk): the zeros
    /// written were given back and appends continued plain (FORMAT.md §3.2).
    pub preallocation_fallbacks: AtomicU64,
    /// Final syncs that failed when the store was dropped (`Interval`,
    /// `Never`): what was written since the last sync may not be durable.
    /// [`Store::close`] returns the error instead.
    pub close_sync_failures: AtomicU64,
    /// Clean-ups after a compaction that failed (an unlink of a redundant
    /// segment, snapshot or temp file, or the directory fsync after them):
    /// harmless leftovers (FORMAT.md §5.4 step 5), counted, and named by
    /// `verify` as files that could have been removed.
    pub cleanup_failures: AtomicU64,
}

pub(crate) struct Shared<M: Machine> {
    pub(crate) dir: PathBuf,
    pub(crate) vfs: Arc<dyn Vfs>,
    pub(crate) codec: Codec,
    /// A keyed store's key and id.
    pub(crate) seal: Option<(Key, StoreId)>,
    pub(crate) opts: Options,
    pub(crate) inner: Mutex<Inner<M>>,
    group: GroupCommit,
    /// Held while staged records are written and fsynced outside `inner`, and by a
    /// rotation, so that a segment is never closed under a write still in flight.
    /// Taken after `inner` (never the other way round).
    io: Mutex<()>,
    pub(crate) compaction: Mutex<compact::CompactionState>,
    pub(crate) compaction_done: Condvar,
    pub(crate) stats: Stats,
    stop: Mutex<bool>,
    stop_cv: Condvar,
    _lock: Box<dyn Send + Sync>,
}

/// A store open for writing. Holds the exclusive writer lock until dropped.
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
/// use runlog::engine::{Options, Store};
/// let dir = tempfile::tempdir()?;
/// let store = Store::<Sum>::open(dir.path().join("sum"), Options { create: true, ..Options::default() })?;
/// assert_eq!(store.append(&5)?, 1); // seq 1, durable when it returns
/// assert!(store.append(&0).unwrap_err().is_refused()); // refused: nothing written
/// let seqs: Vec<u64> = store.append_batch(&[1, 2]).into_iter().collect::<Result<_, _>>()?;
/// assert_eq!(seqs, [2, 3]); // one write, one fsync for both
/// assert_eq!(store.read(|s| *s), 8);
/// drop(store);
/// let again = Store::<Sum>::open(dir.path().join("sum"), Options::default())?;
/// assert_eq!((again.read(|s| *s), again.recovery().records_replayed), (8, 3));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Store<M: Machine> {
    shared: Arc<Shared<M>>,
    flusher: Option<JoinHandle<()>>,
    report: RecoveryReport,
    /// Set by [`Store::close`]: its final sync is done, the drop's is not needed.
    closed: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a runlog mutex leaves consistent data (every update is
    // a single assignment after the I/O it records), so a poisoned mutex is usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn check_dir(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    let mode = vfs.dir_mode(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::NotFound {
            path: dir.to_path_buf(),
        },
        std::io::ErrorKind::InvalidInput => Error::Unsafe {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        },
        _ => Error::io("stat store directory", dir, e),
    })?;
    if mode & 0o022 != 0 {
        return Err(Error::Unsafe {
            path: dir.to_path_buf(),
            reason: format!(
                "the directory is writable by other users (mode {mode:o}); chmod go-w it"
            ),
        });
    }
    Ok(())
}

fn take_lock(vfs: &dyn Vfs, dir: &Path, wait: Option<Duration>) -> Result<Box<dyn Send + Sync>> {
    let path = dir.join(LOCK_FILE);
    let holder = format!("pid {}", std::process::id());
    let started = Instant::now();
    let attempt = match wait {
        None => vfs.try_lock(&path, &holder),
        Some(limit) => vfs.lock_wait(&path, &holder, limit),
    };
    match attempt.map_err(|e| Error::io("lock store", &path, e))? {
        LockAttempt::Acquired(g) => Ok(g),
        LockAttempt::Busy(h) => Err(Error::Locked {
            path,
            holder: h,
            waited: wait.map(|_| started.elapsed()),
        }),
    }
}

/// Creates directory `dir` (0700) if absent, and makes its name durable: the
/// parent is fsynced after a create. `EINTR` is retried; a directory that
/// exists already (a concurrent creator, or an interrupted call that did
/// create it) is not an error, and its parent is fsynced too, since its
/// creator may not have got that far.
pub fn create_dir_durable(vfs: &dyn Vfs, dir: &Path, op: &'static str) -> Result<()> {
    loop {
        match vfs.create_dir(dir) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => break,
            Err(e) => return Err(Error::io(op, dir, e)),
        }
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        retry_interrupted(|| vfs.sync_dir(parent))
            .map_err(|e| Error::io("fsync parent directory", parent, e))?;
    }
    Ok(())
}

/// [`create_dir_durable`] of `dir` and every missing ancestor, outermost
/// first, each name made durable in its parent.
pub fn create_dir_all_durable(vfs: &dyn Vfs, dir: &Path, op: &'static str) -> Result<()> {
    let mut missing = Vec::new();
    let mut d = Some(dir);
    while let Some(p) = d.filter(|p| !p.as_os_str().is_empty()) {
        match vfs.dir_mode(p) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(p),
            Err(e) => return Err(Error::io(op, p, e)),
        }
        d = p.parent();
    }
    for p in missing.into_iter().rev() {
        create_dir_durable(vfs, p, op)?;
    }
    Ok(())
}

/// ENOSPC or EDQUOT: the disk (or the quota) is full.
pub(crate) fn is_out_of_space(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull || matches!(e.raw_os_error(), Some(28 | 122))
}

/// Creates a segment file holding only its header, durably (file and directory).
pub(crate) fn create_segment(
    vfs: &dyn Vfs,
    dir: &Path,
    codec: Codec,
    first_seq: u64,
    seal: Option<(&Key, &StoreId)>,
) -> Result<(Active, u64)> {
    let path = dir.join(segment_name(first_seq));
    let file = vfs
        .create_new(&path)
        .map_err(|e| Error::io("create segment", &path, e))?;
    let check = seal.map(|(key, id)| super::seal::key_check(key, id));
    let header = encode_segment_header_checked(codec, first_seq, seal.map(|s| s.1), check.as_ref());
    write_all_at(file.as_ref(), &header, 0)
        .map_err(|e| Error::io("write segment header", &path, e))?;
    retry_interrupted(|| file.sync_data()).map_err(|e| Error::io("fsync new segment", &path, e))?;
    // The new name must be durable before any record in it is acknowledged.
    retry_interrupted(|| vfs.sync_dir(dir))
        .map_err(|e| Error::io("fsync store directory", dir, e))?;
    Ok((
        Active {
            file,
            path,
            first_seq,
        },
        header.len() as u64,
    ))
}

impl<M: Machine> Store<M> {
    /// Opens (or, with `opts.create`, creates) the store in `dir` for writing.
    ///
    /// Recovery replays the log over the newest valid snapshot. A torn tail is
    /// copied to a `.broken-<offset>` file beside its segment, then truncated away;
    /// any other damage fails the open with an [`Error::Corrupt`] and changes nothing.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Store<M>> {
        let mut store = Self::open_deferred(dir, opts)?;
        store.finish_open()?;
        Ok(store)
    }

    /// [`Store::open`] that changes nothing on disk yet (beyond the `LOCK` file's
    /// holder text, and creating a store that does not exist): the torn-tail
    /// quarantine, the rewrite of the bytes not known durable and the choice of
    /// the active segment wait for the first accepted append (or `sync`,
    /// `compact`), which writes that rewrite together with its records and
    /// covers both with one fsync. A refused append then leaves every segment
    /// and snapshot as it was. The state read before that first write may
    /// include records not yet known durable; nothing is acknowledged on top of
    /// them until they are.
    pub(crate) fn open_deferred(dir: impl AsRef<Path>, opts: Options) -> Result<Store<M>> {
        let dir = dir.as_ref().to_path_buf();
        let vfs = opts.vfs.clone();
        match check_dir(vfs.as_ref(), &dir) {
            Err(Error::NotFound { .. }) if opts.create => {
                // Another creator may win the race to the name: its directory
                // is as good as ours (checked below, then the lock decides).
                create_dir_durable(vfs.as_ref(), &dir, "create store directory")?;
                check_dir(vfs.as_ref(), &dir)?;
            }
            r => r?,
        }
        let guard = take_lock(vfs.as_ref(), &dir, opts.lock_wait)?;
        let mut decode_state = M::decode_snapshot;
        let mut apply = replay_one::<M>;
        let progress = opts.progress.clone();
        let loaded = match load(
            vfs.as_ref(),
            &dir,
            LoadSpec {
                mapped: true,
                upto: None,
                decode_state: &mut decode_state,
                apply: &mut apply,
                progress: progress.as_deref(),
                key: opts.key.as_ref(),
            },
        ) {
            Err(Error::NotFound { .. }) if opts.create => None,
            Err(Error::NotFound { .. }) => return Err(Error::NotFound { path: dir }),
            r => Some(r?),
        };
        // A state this build must not write to (a newer schema): refused before
        // recovery changes a byte.
        if let Some(l) = &loaded {
            M::check_state(&l.state).map_err(|reason| Error::Unsupported {
                path: dir.clone(),
                reason,
            })?;
        }
        let (inner, codec, store_id, report, durable) = match loaded {
            None => {
                // A store created with a key is keyed, under a new random id.
                let id = opts.key.as_ref().map(|_| new_store_id());
                let seal = opts.key.as_ref().zip(id.as_ref());
                let (inner, codec, report) = Self::fresh(vfs.as_ref(), &dir, opts.codec, seal)?;
                let durable = inner.next_seq - 1;
                (inner, codec, id, report, durable)
            }
            Some(mut l) => {
                if l.report.codec.is_none() {
                    // Only a torn first segment header: nothing says which codec the
                    // store was being created with, so it gets the one asked for now
                    // (and is keyed when a key is given now).
                    l.codec = opts.codec;
                    l.report.codec = Some(opts.codec);
                    l.store_id = opts.key.as_ref().map(|_| new_store_id());
                }
                if opts.create
                    && l.codec != opts.codec
                    && l.next_seq == 1
                    && l.report.snapshot_seq.is_none()
                {
                    // An empty store created with another codec: leave it be, say so.
                    return Err(Error::Mismatch {
                        path: dir,
                        reason: format!(
                            "store exists with codec {}, {} was asked for",
                            l.codec.name(),
                            opts.codec.name()
                        ),
                    });
                }
                let id = l.store_id;
                let (inner, codec, report, durable) = Self::resume(&dir, l)?;
                (inner, codec, id, report, durable)
            }
        };
        let seal = opts.key.clone().zip(store_id);
        let shared = Arc::new(Shared {
            dir,
            vfs,
            codec,
            seal,
            opts,
            inner: Mutex::new(inner),
            group: GroupCommit::new(durable),
            io: Mutex::new(()),
            compaction: Mutex::new(compact::CompactionState::default()),
            compaction_done: Condvar::new(),
            stats: Stats::default(),
            stop: Mutex::new(false),
            stop_cv: Condvar::new(),
            _lock: guard,
        });
        let flusher = match shared.opts.sync {
            SyncPolicy::Interval(every) => Some(spawn_flusher(Arc::downgrade(&shared), every)),
            _ => None,
        };
        Ok(Store {
            shared,
            flusher,
            closed: false,
            report,
        })
    }

    fn fresh(
        vfs: &dyn Vfs,
        dir: &Path,
        codec: Codec,
        seal: Option<(&Key, &StoreId)>,
    ) -> Result<(Inner<M>, Codec, RecoveryReport)> {
        let (active, len) = create_segment(vfs, dir, codec, 1, seal)?;
        let inner = Inner {
            state: M::State::default(),
            next_seq: 1,
            active: Arc::new(active),
            active_len: len,
            active_alloc: len,
            staged: Vec::new(),
            payload: Vec::new(),
            frame: Vec::new(),
            poisoned: None,
            segments: vec![1],
            snapshots: vec![],
            log_bytes_since_snapshot: 0,
            last_snapshot_bytes: 0,
            pending: None,
        };
        Ok((
            inner,
            codec,
            RecoveryReport {
                codec: Some(codec),
                ..Default::default()
            },
        ))
    }

    /// Builds the writer's state from what `load` found, without writing: the
    /// torn-tail quarantine, the rewrite of what is not known durable and the
    /// choice of the active segment are left in `Inner::pending` for
    /// [`Shared::prepare`] (FORMAT.md §5.5 steps 3–5). Returns the durable
    /// watermark the records on disk prove.
    fn resume(dir: &Path, l: Loaded<M::State>) -> Result<(Inner<M>, Codec, RecoveryReport, u64)> {
        let Loaded {
            state,
            listing,
            scans,
            first_scanned,
            unsynced,
            unsynced_bytes,
            verdict,
            codec,
            next_seq,
            mut report,
            ..
        } = l;
        let mut segments: Vec<u64> = listing.segments.iter().map(|s| s.0).collect();
        let mut torn = None;
        if let Verdict::TornTail(t) = &verdict {
            let path = dir.join(&listing.segments[first_scanned + t.segment].1);
            if t.whole_file {
                segments.pop();
            }
            torn = Some(TornPlan {
                path,
                offset: t.offset,
                whole_file: t.whole_file,
            });
        }
        // The last segment that survives the torn tail, if its scan is known (a
        // segment left after a whole torn file was closed by a rotation: durable).
        let last_scan = scans.last().filter(|s| s.first_seq.is_some());
        let last = match (segments.last(), last_scan, unsynced) {
            (Some(&first), Some(scan), Some(tail)) if scan.first_seq == Some(first) => {
                let cut = torn.as_ref().filter(|t| !t.whole_file).map(|t| t.offset);
                let end = cut.unwrap_or(scan.valid_len).min(scan.valid_len);
                let from = tail.from.min(end);
                let mut bytes = unsynced_bytes;
                bytes.truncate((end - from) as usize);
                // Every record up to the last one's `synced`, and every record of
                // the closed segments before this one, is durable.
                let durable = tail.watermark.unwrap_or(0).max(first - 1);
                Some(LastSegment {
                    path: dir.join(segment_name(first)),
                    first_seq: first,
                    end,
                    from,
                    tail: bytes,
                    records: (next_seq - 1).saturating_sub(durable),
                    continues: first + scan.count == next_seq,
                    durable,
                })
            }
            _ => None,
        };
        let durable = match &last {
            Some(l) if !l.tail.is_empty() => l.durable.min(next_seq - 1),
            _ => next_seq - 1,
        };
        // A snapshot recovery fell back past is not a base to compact on: the
        // next compaction at its seq rewrites it, and none trims the log to it.
        let snapshots: Vec<u64> = listing
            .snapshots
            .iter()
            .filter(|s| {
                let path = dir.join(&s.1);
                !report.snapshot_fallbacks.iter().any(|(p, _)| *p == path)
            })
            .map(|s| s.0)
            .collect();
        let last_snapshot_bytes = report.snapshot_bytes;
        let pending = Pending {
            torn,
            last,
            temps: listing.temps.iter().map(|n| dir.join(n)).collect(),
            next_seq,
        };
        let first_seq = segments.last().copied().unwrap_or(next_seq);
        let inner = Inner {
            state,
            next_seq,
            active: Arc::new(Active {
                file: Box::new(NotOpened),
                path: dir.join(segment_name(first_seq)),
                first_seq,
            }),
            active_len: 0,
            active_alloc: 0,
            staged: Vec::new(),
            payload: Vec::new(),
            frame: Vec::new(),
            poisoned: None,
            segments,
            snapshots,
            log_bytes_since_snapshot: report
                .bytes_scanned
                .saturating_sub(report.bytes_below_snapshot),
            last_snapshot_bytes,
            pending: Some(Box::new(pending)),
        };
        report.last_seq = next_seq - 1;
        Ok((inner, codec, report, durable))
    }

    /// The deferred part of the open, now; then makes every replayed record
    /// durable, as [`Store::open`] always has.
    fn finish_open(&mut self) -> Result<()> {
        let s = &*self.shared;
        let mut g = lock(&s.inner);
        let quarantined = s.prepare_or_poison(&mut g)?;
        if let Some(t) = self.report.torn_tail.as_mut() {
            t.quarantined_to = quarantined;
        }
        let last = g.next_seq - 1;
        if s.durable() < last {
            // The rewritten tail (staged, or written under `Interval`/`Never`),
            // durable before the open returns. Not an acknowledgement: not
            // counted in `Stats::fsyncs`.
            let a = g.active.clone();
            let staged = std::mem::take(&mut g.staged);
            let at = g.active_len - staged.len() as u64;
            let r = write_all_at(a.file.as_ref(), &staged, at)
                .map_err(|e| Error::io("rewrite last segment", &a.path, e))
                .and_then(|()| {
                    retry_interrupted(|| a.file.sync_data())
                        .map_err(|e| Error::io("fsync replayed segment", &a.path, e))
                });
            if let Err(e) = r {
                s.poison(&mut g, e.poison_cause());
                return Err(e);
            }
            s.group.advance(last);
        }
        Ok(())
    }

    /// What recovery found when this store was opened.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.report
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The store's codec.
    pub fn codec(&self) -> Codec {
        self.shared.codec
    }

    /// Counters since open.
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Appends one transition and returns its seq once durable under the sync policy.
    ///
    /// `M::apply` runs first: a transition it refuses returns [`Error::Refused`] and
    /// nothing is written. `apply` must leave the state unchanged when it refuses.
    pub fn append(&self, t: &M::Transition) -> Result<u64> {
        match self.append_batch(std::slice::from_ref(t)).pop() {
            Some(r) => r,
            None => unreachable!("one result per transition"),
        }
    }

    /// Appends several transitions with one write and one fsync. Each is applied
    /// in order and accepted or refused on its own; the result for each is its seq
    /// or its error. Accepted ones are durable when this returns.
    pub fn append_batch(&self, ts: &[M::Transition]) -> Vec<Result<u64>> {
        let s = &*self.shared;
        let mut results = Vec::with_capacity(ts.len());
        let (last, want_compact) = {
            let mut g = lock(&s.inner);
            if let Some(cause) = &g.poisoned {
                return ts
                    .iter()
                    .map(|_| {
                        Err(Error::Poisoned {
                            cause: cause.clone(),
                        })
                    })
                    .collect();
            }
            let mut batch = std::mem::take(&mut g.frame);
            batch.clear();
            let mut last = None;
            let first = g.next_seq;
            let mut payload = std::mem::take(&mut g.payload);
            // Each record carries the durable watermark it was written under, so
            // recovery can tell a crash's unsynced hole from damage to synced data.
            let synced = s.durable();
            for t in ts {
                results.push(stage(
                    s.codec,
                    s.seal.as_ref(),
                    &mut g,
                    t,
                    synced,
                    &mut payload,
                    &mut batch,
                ));
                if let Some(Ok(seq)) = results.last() {
                    last = Some(*seq);
                }
            }
            let written = if batch.is_empty() {
                Ok(())
            } else {
                s.prepare_or_poison(&mut g).and_then(|_| {
                    // A deferred open that made the replayed tail durable on its
                    // own raised the watermark: the records carry the new one.
                    if s.durable() > synced {
                        reframe(s, ts, &results, s.durable(), &mut payload, &mut batch)?;
                    }
                    s.write_frames(&mut g, &batch, first)
                })
            };
            g.payload = payload;
            g.frame = batch;
            if let Err(e) = written {
                let cause = e.poison_cause();
                s.poison(&mut g, cause.clone());
                return ts
                    .iter()
                    .map(|_| {
                        Err(Error::Poisoned {
                            cause: cause.clone(),
                        })
                    })
                    .collect();
            }
            // Not before a deferred open's first write (all refused so far).
            (last, g.pending.is_none() && s.wants_compaction(&g))
        };
        if let Some(seq) = last {
            s.stats.appends.fetch_add(
                results.iter().filter(|r| r.is_ok()).count() as u64,
                Ordering::Relaxed,
            );
            // Interval and Never acknowledge once written; the flusher (or sync) fsyncs.
            let wait = matches!(s.opts.sync, SyncPolicy::Always | SyncPolicy::Grouped { .. });
            if wait && let Err(e) = s.wait_durable(seq) {
                let cause = e.poison_cause();
                for r in results.iter_mut().filter(|r| r.is_ok()) {
                    *r = Err(Error::Poisoned {
                        cause: cause.clone(),
                    });
                }
                return results;
            }
        }
        if want_compact {
            compact::spawn_background(&self.shared);
        }
        results
    }

    /// Reads the current state: every accepted transition, including any whose
    /// fsync is still in flight (those are acknowledged, or the store is poisoned).
    pub fn read<R>(&self, f: impl FnOnce(&M::State) -> R) -> R {
        f(&lock(&self.shared.inner).state)
    }

    /// The seq of the last accepted transition (0 when none).
    pub fn last_seq(&self) -> u64 {
        lock(&self.shared.inner).next_seq - 1
    }

    /// Makes every accepted transition durable now, whatever the sync policy.
    pub fn sync(&self) -> Result<()> {
        let last = {
            let mut g = lock(&self.shared.inner);
            if let Some(cause) = &g.poisoned {
                return Err(Error::Poisoned {
                    cause: cause.clone(),
                });
            }
            self.shared.prepare_or_poison(&mut g)?;
            g.next_seq - 1
        };
        self.shared.wait_durable(last)
    }

    /// Writes a snapshot of the current state and deletes the log it makes
    /// unnecessary. Runs on the calling thread; appenders are not blocked while the
    /// state is serialized. Waits for a background compaction to finish first.
    pub fn compact(&self) -> Result<compact::CompactReport> {
        self.shared
            .prepare_or_poison(&mut lock(&self.shared.inner))?;
        compact::run(&self.shared)
    }

    /// The error of the last background compaction, if it failed.
    pub fn last_compaction_error(&self) -> Option<String> {
        lock(&self.shared.compaction).last_error.clone()
    }
}

/// Decodes and applies one replayed record.
pub(crate) fn replay_one<M: Machine>(
    s: &mut M::State,
    codec: Codec,
    p: &[u8],
) -> std::result::Result<(), String> {
    let t: M::Transition = decode_payload(codec, p)?;
    M::apply(s, &t).map_err(|e| match M::take_fault(s) {
        Some(fault) => format!("the state it applies to is damaged: {}", ErrorChain(&fault)),
        None => format!("apply refused it: {}", ErrorChain(&e)),
    })
}

fn stage<M: Machine>(
    codec: Codec,
    seal: Option<&(Key, StoreId)>,
    g: &mut Inner<M>,
    t: &M::Transition,
    synced: u64,
    payload: &mut Vec<u8>,
    batch: &mut Vec<u8>,
) -> Result<u64> {
    encode_payload(codec, t, payload).map_err(|reason| Error::Codec {
        path: None,
        seq: None,
        reason,
    })?;
    // A keyed store's tag travels inside the frame and counts against the limit.
    let max = u64::from(MAX_RECORD_LEN) - if seal.is_some() { TAG_LEN as u64 } else { 0 };
    if payload.len() as u64 > max {
        return Err(Error::TooLarge {
            what: "record",
            len: payload.len() as u64,
            max,
        });
    }
    M::apply(&mut g.state, t).map_err(|e| match M::take_fault(&mut g.state) {
        // Damage met while reading the state is not the rules' refusal.
        Some(fault) => fault,
        None => Error::Refused(Box::new(e)),
    })?;
    let seq = g.next_seq;
    let tag = seal.map(|(key, id)| record_tag(key, id, seq, payload));
    encode_record_tagged(codec, seq, synced, payload, tag.as_ref(), batch);
    g.next_seq += 1;
    Ok(seq)
}

/// Frames the accepted transitions of `ts` again under the watermark `synced`.
fn reframe<M: Machine>(
    s: &Shared<M>,
    ts: &[M::Transition],
    results: &[Result<u64>],
    synced: u64,
    payload: &mut Vec<u8>,
    batch: &mut Vec<u8>,
) -> Result<()> {
    batch.clear();
    for (t, r) in ts.iter().zip(results) {
        if let Ok(seq) = r {
            encode_payload(s.codec, t, payload).map_err(|reason| Error::Codec {
                path: None,
                seq: Some(*seq),
                reason,
            })?;
            let tag = s
                .seal
                .as_ref()
                .map(|(key, id)| record_tag(key, id, *seq, payload));
            encode_record_tagged(s.codec, *seq, synced, payload, tag.as_ref(), batch);
        }
    }
    Ok(())
}

impl<M: Machine> Shared<M> {
    /// Finishes a deferred open before anything is written (nothing to do once
    /// done). Returns where a torn tail's bytes were kept. A failure poisons.
    pub(crate) fn prepare_or_poison(&self, g: &mut Inner<M>) -> Result<Option<PathBuf>> {
        let Some(p) = g.pending.take() else {
            return Ok(None);
        };
        self.prepare(g, *p)
            .inspect_err(|e| self.poison(g, e.poison_cause()))
    }

    /// FORMAT.md §5.5 steps 3–5.
    fn prepare(&self, g: &mut Inner<M>, p: Pending) -> Result<Option<PathBuf>> {
        let (vfs, dir) = (self.vfs.as_ref(), self.dir.as_path());
        let mut quarantined = None;
        // Step 3: a torn tail is kept beside its segment (the copy and its name
        // made durable by `quarantine`), then cut off durably.
        if let Some(t) = &p.torn {
            quarantined = Some(super::tools::quarantine(vfs, dir, &t.path, t.offset)?);
            if t.whole_file {
                vfs.remove(&t.path)
                    .map_err(|e| Error::io("remove torn segment", &t.path, e))?;
                // Durable before a segment of the same name may be created again.
                retry_interrupted(|| vfs.sync_dir(dir))
                    .map_err(|e| Error::io("fsync store directory", dir, e))?;
            } else {
                let f = vfs
                    .open_write(&t.path)
                    .map_err(|e| Error::io("open segment", &t.path, e))?;
                retry_interrupted(|| f.set_len(t.offset))
                    .map_err(|e| Error::io("truncate torn tail", &t.path, e))?;
                retry_interrupted(|| f.sync_all())
                    .map_err(|e| Error::io("fsync truncated segment", &t.path, e))?;
            }
        }
        // Step 4. Segments before the last need no fsync here: a rotation fsyncs
        // a segment (sync_all, after cutting it to its records) before the next
        // one is created, and a failed fsync poisons the writer, so the existence
        // of a later segment proves the earlier ones durable. In the last, the
        // records up to the last one's `synced` watermark were fsynced by their
        // writer (a failed fsync poisons, so no record claims a watermark past
        // one), and its header by its creator before any record was written. What
        // remains, `tail`, may be in the page cache only: a killed writer's, or
        // one whose fsync failed (the kernel may then have marked the lost pages
        // clean: a plain fsync would "succeed" without writing them, fsyncgate).
        // So it is rewritten, making what the cache shows dirty again.
        let id = self.seal.as_ref().map(|s| (&s.0, &s.1));
        match p.last {
            Some(l) if l.continues => {
                let file = vfs
                    .open_write(&l.path)
                    .map_err(|e| Error::io("open segment for append", &l.path, e))?;
                if l.from == 0 {
                    // A segment without records: its creator may have been killed
                    // between its fsync and the directory's. Its name must be
                    // durable before a record in it is acknowledged.
                    retry_interrupted(|| vfs.sync_dir(dir))
                        .map_err(|e| Error::io("fsync store directory", dir, e))?;
                }
                // Cut to the records (dropping preallocated zeros; the next append
                // preallocates again), even when the cache shows none: a rotation
                // whose fsync failed may have cut them in the cache only, and
                // the next fsync of this segment (the tail's or a rotation's)
                // makes the size on disk match, so zeros can never end a segment
                // that a later rotation closes.
                retry_interrupted(|| file.set_len(l.end))
                    .map_err(|e| Error::io("trim last segment", &l.path, e))?;
                // Records appended next carry the watermark the disk proves, which a
                // merged rewrite does not raise: each open of a one-shot writer
                // would owe one record more. Past a bound, the tail is made durable
                // on its own first (one more fdatasync, once per that many opens),
                // so the records appended next carry a watermark past it.
                let merge = l.records <= MAX_MERGED_TAIL_RECORDS
                    && l.tail.len() as u64 <= MAX_MERGED_TAIL_BYTES;
                if !l.tail.is_empty() && merge && self.stages() {
                    // Ends where the records begin: the next fsync leader writes
                    // both with one pwrite and one fdatasync. Until then the
                    // watermark stays at what the disk proves (`durable`), so no
                    // record claims the tail durable before it is.
                    let mut staged = l.tail;
                    staged.extend_from_slice(&g.staged);
                    g.staged = staged;
                } else if !l.tail.is_empty() {
                    write_all_at(file.as_ref(), &l.tail, l.from)
                        .map_err(|e| Error::io("rewrite last segment", &l.path, e))?;
                    if !merge {
                        retry_interrupted(|| file.sync_data())
                            .map_err(|e| Error::io("fsync replayed segment", &l.path, e))?;
                        self.group.advance(p.next_seq - 1);
                    }
                }
                g.active = Arc::new(Active {
                    file,
                    path: l.path,
                    first_seq: l.first_seq,
                });
                g.active_len = l.end;
                g.active_alloc = l.end;
            }
            last => {
                if let Some(l) = last {
                    // The history does not continue in it, so it is closed like a
                    // rotation closes a segment: rewritten, cut to its records and
                    // fsynced before the next segment exists.
                    let f = vfs
                        .open_write(&l.path)
                        .map_err(|e| Error::io("open segment", &l.path, e))?;
                    write_all_at(f.as_ref(), &l.tail, l.from)
                        .map_err(|e| Error::io("rewrite last segment", &l.path, e))?;
                    retry_interrupted(|| f.set_len(l.end))
                        .map_err(|e| Error::io("trim last segment", &l.path, e))?;
                    retry_interrupted(|| f.sync_all())
                        .map_err(|e| Error::io("fsync replayed segment", &l.path, e))?;
                }
                let (a, len) = create_segment(vfs, dir, self.codec, p.next_seq, id)?;
                g.segments.push(p.next_seq);
                g.active = Arc::new(a);
                g.active_len = len;
                g.active_alloc = len;
                self.group.advance(p.next_seq - 1);
            }
        }
        // Step 5. No directory fsync when nothing was created or removed: every
        // create and rename the engine makes is followed by its own, and an
        // unlink of a temp that a crash undoes is repeated by the next writer.
        for path in &p.temps {
            // An interrupted snapshot write; the rename never happened, so it holds nothing needed.
            let _ = vfs.remove(path);
        }
        Ok(quarantined)
    }

    /// Puts framed records at the end of the active segment, rotating first when
    /// full: staged for the next fsync leader to write (`Always`/`Grouped`, whose
    /// appenders wait for that fsync anyway), or written now (`Interval`/`Never`,
    /// which acknowledge once written).
    fn write_frames(&self, g: &mut Inner<M>, frames: &[u8], first_in_batch: u64) -> Result<()> {
        if g.active_len + frames.len() as u64 > self.opts.segment_bytes
            && first_in_batch > g.active.first_seq
        {
            self.rotate(g, first_in_batch)?;
        }
        let a = g.active.clone();
        let end = g.active_len + frames.len() as u64;
        self.preallocate(g, end)?;
        if self.stages() {
            g.staged.extend_from_slice(frames);
        } else {
            write_all_at(a.file.as_ref(), frames, g.active_len)
                .map_err(|e| Error::io("append to segment", &a.path, e))?;
        }
        g.active_len = end;
        g.active_alloc = g.active_alloc.max(end);
        g.log_bytes_since_snapshot += frames.len() as u64;
        Ok(())
    }

    /// Whether appends are staged for the fsync leader to write.
    fn stages(&self) -> bool {
        matches!(
            self.opts.sync,
            SyncPolicy::Always | SyncPolicy::Grouped { .. }
        )
    }

    /// Makes sure the active segment's file reaches past `end`: when it does not,
    /// writes zeros from its current end up to the next multiple of the
    /// preallocation step (never past `segment_bytes`). Not fsynced here: the next
    /// fdatasync carries the zeros and the new size, once per step.
    fn preallocate(&self, g: &mut Inner<M>, end: u64) -> Result<()> {
        let step = self.opts.preallocate;
        if step == 0 || self.codec != Codec::Binary || end <= g.active_alloc {
            return Ok(());
        }
        let target = end
            .div_ceil(step)
            .saturating_mul(step)
            .min(self.opts.segment_bytes.max(end));
        let from = g.active_alloc.max(end);
        if target <= from {
            return Ok(());
        }
        // After one failed fill, appends stay plain for this writer: a nearly
        // full disk would fail every fill again, and each costs a write.
        if self.stats.preallocation_fallbacks.load(Ordering::Relaxed) > 0 {
            return Ok(());
        }
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let a = g.active.clone();
        let mut at = from;
        while at < target {
            let n = (target - at).min(ZEROS.len() as u64) as usize;
            if let Err(e) = write_all_at(a.file.as_ref(), &ZEROS[..n], at) {
                if !is_out_of_space(&e) {
                    return Err(Error::io("preallocate segment", &a.path, e));
                }
                // A little space left must not become no space and no progress:
                // give back what the fill took (the file ended at `active_alloc`
                // before it; nothing past that was ever a record) and append plain.
                retry_interrupted(|| a.file.set_len(g.active_alloc))
                    .map_err(|e2| Error::io("give back a failed preallocation", &a.path, e2))?;
                self.stats
                    .preallocation_fallbacks
                    .fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            at += n as u64;
        }
        g.active_alloc = target;
        Ok(())
    }

    /// Closes the active segment (fsynced) and starts a new one at `first_seq`.
    pub(crate) fn rotate(&self, g: &mut Inner<M>, first_seq: u64) -> Result<()> {
        let old = g.active.clone();
        // Wait out a leader's write and fsync, then write what is still staged.
        let _io = lock(&self.io);
        if !g.staged.is_empty() {
            let at = g.active_len - g.staged.len() as u64;
            write_all_at(old.file.as_ref(), &g.staged, at)
                .map_err(|e| Error::io("append to segment", &old.path, e))?;
            g.staged.clear();
        }
        // Cut the preallocated zeros off, so that only the last segment ever ends
        // in zeros (recovery treats zeros anywhere else as damage). Even when the
        // cache shows none: a rotation of this segment whose fsync failed may have
        // cut them in the cache only, and this cut, fsynced below, makes the
        // size on disk match (an open no longer cuts the last segment, §5.5).
        retry_interrupted(|| old.file.set_len(g.active_len))
            .map_err(|e| Error::io("trim preallocated segment", &old.path, e))?;
        g.active_alloc = g.active_len;
        // Every record in the old segment becomes durable before the new one exists:
        // recovery relies on only the last segment ever having a torn tail. fsync,
        // not fdatasync: the trimmed length must be durable too.
        self.group
            .fsync(old.path.display(), || {
                retry_interrupted(|| old.file.sync_all())
            })
            .map_err(|e| Error::io("fsync segment before rotation", &old.path, e))?;
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        let id = self.seal.as_ref().map(|s| (&s.0, &s.1));
        let (active, len) =
            create_segment(self.vfs.as_ref(), &self.dir, self.codec, first_seq, id)?;
        g.active = Arc::new(active);
        g.active_len = len;
        g.active_alloc = len;
        g.segments.push(first_seq);
        self.group.advance(first_seq - 1);
        Ok(())
    }

    /// The durable watermark: every record up to it has been fsynced.
    fn durable(&self) -> u64 {
        self.group.durable()
    }

    pub(crate) fn poison(&self, g: &mut Inner<M>, cause: String) {
        g.poisoned.get_or_insert(cause.clone());
        self.group.fail(cause);
    }

    /// Waits until `seq` is durable, leading an fsync when no one else is.
    pub(crate) fn wait_durable(&self, seq: u64) -> Result<()> {
        let linger = match self.opts.sync {
            SyncPolicy::Grouped { linger } => Some(linger),
            _ => None,
        };
        self.group
            .wait_durable(seq, || {
                if let Some(d) = linger.filter(|d| !d.is_zero()) {
                    std::thread::sleep(d);
                }
                let (target, active, mut staged, at, io) = {
                    let mut g = lock(&self.inner);
                    let io = lock(&self.io);
                    let staged = std::mem::take(&mut g.staged);
                    let at = g.active_len - staged.len() as u64;
                    (g.next_seq - 1, g.active.clone(), staged, at, io)
                };
                self.group.announce(target);
                // One write for every record staged since the last leader, then the
                // fsync, both outside `inner`: appenders keep staging meanwhile.
                if !staged.is_empty() {
                    write_all_at(active.file.as_ref(), &staged, at).map_err(|e| {
                        Error::io("append to segment", &active.path, e).poison_cause()
                    })?;
                }
                let r = self.group.fsync(active.path.display(), || {
                    retry_interrupted(|| active.file.sync_data())
                });
                drop(io);
                self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                if !staged.is_empty() {
                    // Hand the buffer back for reuse.
                    staged.clear();
                    let mut g = lock(&self.inner);
                    if g.staged.is_empty() && g.staged.capacity() < staged.capacity() {
                        g.staged = staged;
                    }
                }
                r.map(|()| target)
                    .map_err(|e| Error::io("fsync segment", &active.path, e).poison_cause())
            })
            .map_err(|cause| {
                lock(&self.inner).poisoned.get_or_insert(cause.clone());
                Error::Poisoned { cause }
            })
    }

    fn wants_compaction(&self, g: &Inner<M>) -> bool {
        match self.opts.compaction {
            CompactionPolicy::Manual => false,
            CompactionPolicy::Auto {
                min_log_bytes,
                ratio,
            } => {
                let log = g.log_bytes_since_snapshot;
                log >= min_log_bytes && (log as f64) >= ratio * g.last_snapshot_bytes as f64
            }
        }
    }
}

fn spawn_flusher<M: Machine>(weak: std::sync::Weak<Shared<M>>, every: Duration) -> JoinHandle<()> {
    std::thread::spawn(move || {
        loop {
            let Some(s) = weak.upgrade() else { return };
            {
                let stop = lock(&s.stop);
                let (stop, _) = s
                    .stop_cv
                    .wait_timeout(stop, every)
                    .unwrap_or_else(|p| p.into_inner());
                if *stop {
                    return;
                }
            }
            let last = {
                let g = lock(&s.inner);
                if g.poisoned.is_some() {
                    return;
                }
                // A deferred open with nothing written has nothing to fsync.
                g.pending.is_none().then(|| g.next_seq - 1)
            };
            if let Some(last) = last
                && s.wait_durable(last).is_err()
            {
                return;
            }
        }
    })
}

impl<M: Machine> Drop for Store<M> {
    fn drop(&mut self) {
        *lock(&self.shared.stop) = true;
        self.shared.stop_cv.notify_all();
        if let Some(h) = self.flusher.take() {
            let _ = h.join();
        }
        compact::wait_idle(&self.shared);
        // A deferred open that wrote nothing leaves the store as it found it.
        if self.needs_final_sync() && self.sync().is_err() {
            // Drop cannot return it: counted, and `close` returns it instead.
            self.shared
                .stats
                .close_sync_failures
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<M: Machine> Store<M> {
    fn needs_final_sync(&self) -> bool {
        !self.closed
            && matches!(
                self.shared.opts.sync,
                SyncPolicy::Interval(_) | SyncPolicy::Never
            )
            && lock(&self.shared.inner).pending.is_none()
    }

    /// Closes the store, returning what dropping it cannot: the final sync's
    /// error under `Interval` and `Never` (when it fails, appends acknowledged
    /// since the last sync may not be durable). Under `Always` and `Grouped`
    /// every acknowledged append is durable already and this is `Ok`.
    pub fn close(mut self) -> Result<()> {
        *lock(&self.shared.stop) = true;
        self.shared.stop_cv.notify_all();
        if let Some(h) = self.flusher.take() {
            let _ = h.join();
        }
        compact::wait_idle(&self.shared);
        let r = if self.needs_final_sync() {
            self.sync()
        } else {
            Ok(())
        };
        self.closed = true;
        r
    }
}
