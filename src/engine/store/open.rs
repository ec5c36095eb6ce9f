//! Opening a store for writing: the directory, the lock, recovery's load, and
//! the writer's state built from what it found. What recovery must change on
//! disk is planned here and done by [`repair`](crate::engine::shared::repair) before the first
//! write (FORMAT.md §5.5).

use super::Store;
use super::close::spawn_flusher;
use crate::engine::error::{Error, Result};
use crate::engine::format::*;
use crate::engine::io::dir::{check_dir, create_dir_durable};
use crate::engine::io::vfs::{Vfs, VfsFile};
use crate::engine::load::catchup::{CaughtUp, catch_up};
use crate::engine::load::recovery::Verdict;
use crate::engine::load::replay::replay_one;
use crate::engine::load::report::RecoveryReport;
use crate::engine::load::tailcache::{TAIL_CACHE_MIN_RECORDS, TailCache, encode_tail_cache};
use crate::engine::load::{LoadSpec, Loaded, load, with_retries};
use crate::engine::log::gather::Gather;
use crate::engine::log::group::GroupCommit;
use crate::engine::log::lock::{WriterLock, take_lock};
use crate::engine::log::mark::{Mark, MarkWriter};
use crate::engine::log::scan::ScanEnd;
use crate::engine::log::writers::{SyncGuard, SyncState, Writers};
use crate::engine::machine::Machine;
use crate::engine::mutex::lock;
use crate::engine::options::{Options, Stats, SyncPolicy};
use crate::engine::shared::active::{Active, ActiveSegment};
use crate::engine::shared::book::Book;
use crate::engine::shared::live::Live;
use crate::engine::shared::pending::{LastSegment, Pending, TornPlan};
use crate::engine::shared::segment::create_segment;
use crate::engine::shared::slot::{Slot, Stop};
use crate::engine::shared::{Inner, IoLock, Shared};
use crate::engine::tag::{Key, StoreId, new_store_id};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Replays an open makes again when the sync state changed during the last
/// one (§5.8, "The open's replay"): each means another fsync failed, or
/// another writer's open started a new generation, while it ran.
const MAX_REPLAYS: u32 = 8;

/// What a writer's open built from what recovery found.
struct Resumed<M: Machine> {
    inner: Inner<M>,
    codec: Codec,
    report: RecoveryReport,
    /// The watermark the records on disk prove durable.
    durable: u64,
    /// The durability mark found, checked against the log.
    mark: Option<Mark>,
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

/// Recovery's load of the store in `dir` for a writer: by memory map under
/// the writer lock, by plain reads without it (nothing may truncate a mapped
/// segment, §5.6).
fn load_for<M: Machine>(
    vfs: &dyn Vfs,
    dir: &Path,
    opts: &Options,
    mapped: bool,
) -> Result<Loaded<M::State>> {
    let mut decode_state = M::decode_snapshot;
    let mut apply = replay_one::<M>;
    load(
        vfs,
        dir,
        LoadSpec {
            mapped,
            upto: None,
            decode_state: &mut decode_state,
            apply: &mut apply,
            progress: opts.progress.as_deref(),
            key: opts.key.as_ref(),
            decode_tail: M::KEEPS_TAIL_CACHE.then_some(M::decode_tail as _),
        },
    )
}

/// Checks the store's directory, creating it (durably) when `create` asks
/// for a store that does not exist.
fn open_dir(vfs: &dyn Vfs, dir: &Path, create: bool) -> Result<()> {
    match check_dir(vfs, dir) {
        Err(Error::NotFound { .. }) if create => {
            // Another creator may win the race to the name: its directory
            // is as good as ours (checked below, then the lock decides).
            create_dir_durable(vfs, dir, "create store directory")?;
            check_dir(vfs, dir)
        }
        r => r,
    }
}

/// What the open's replay found: the load (`None`: no store yet, and
/// `create` asks for one), and the last segment as a one-shot writer's
/// catch-up left it open for writing.
struct Replay<S> {
    loaded: Option<Loaded<S>>,
    caught: Option<CaughtUp>,
}

/// The writer lock's guard, as [`take_lock`] returns it.
type LockGuard = Box<dyn Send + Sync>;

/// The sync state a writer's open settled its replay on, and the sync
/// lock, held while the open decides on it.
struct Settled<'w> {
    state: Option<SyncState>,
    guard: Option<SyncGuard<'w>>,
}

/// The open's replay and the writer lock, taken (its guard returned): a
/// one-shot writer replays without the writer lock, as a reader does, and
/// under it reads only what was appended since (§5.8); any failure of the
/// lock-free replay is left to the replay under the lock, which any other
/// writer makes.
fn replay_and_lock<M: Machine>(
    vfs: &dyn Vfs,
    dir: &Path,
    opts: &Options,
) -> Result<(LockGuard, Replay<M::State>)> {
    let early = match opts.one_shot {
        true => with_retries(|| load_for::<M>(vfs, dir, opts, false)).ok(),
        false => None,
    };
    let guard = take_lock(vfs, dir, opts.lock_wait)?;
    let (current, caught) = match early {
        Some(mut l) => match catch_up::<M>(vfs, dir, opts.key.as_ref(), &mut l)? {
            Some(c) => (Some(l), Some(c)),
            None => (None, None),
        },
        None => (None, None),
    };
    let loaded = match current {
        Some(l) => Some(l),
        None => match load_for::<M>(vfs, dir, opts, true) {
            Err(Error::NotFound { .. }) if opts.create => None,
            Err(Error::NotFound { .. }) => {
                return Err(Error::NotFound {
                    path: dir.to_path_buf(),
                });
            }
            r => Some(r?),
        },
    };
    Ok((guard, Replay { loaded, caught }))
}

/// The replay settled against the sync state (§5.8, "The open's replay"). A
/// failed fsync in another process may have dropped or changed what the
/// replay read: it is used only when the sync state is as it was `before`
/// the replay, checked under the sync lock, which is returned held, for the
/// decisions made on it (vouch, adopt). Else the log is replayed again under
/// the writer lock, after the failure (and without the catch-up's segment),
/// at most [`MAX_REPLAYS`] times. Returns the replay, the sync state settled
/// on and the sync lock, held.
fn settle_replay<'w, M: Machine>(
    writers: &'w Writers,
    vfs: &dyn Vfs,
    dir: &Path,
    opts: &Options,
    mut before: Option<SyncState>,
    replay: Replay<M::State>,
) -> Result<(Replay<M::State>, Settled<'w>)> {
    let Replay {
        mut loaded,
        mut caught,
    } = replay;
    let mut settled = None;
    let mut sync_guard = None;
    let mut replays = 0;
    while loaded.is_some() {
        let (g, now, current) = writers
            .settle(vfs, before)
            .map_err(|e| Error::io("take the sync lock", dir.join(SYNC_LOCK_FILE), e))?;
        if current {
            (settled, sync_guard) = (now, Some(g));
            break;
        }
        drop(g);
        replays += 1;
        if replays > MAX_REPLAYS {
            return Err(Error::io(
                "replay the log",
                dir.join(SHARED_FILE),
                std::io::Error::other(format!(
                    "the sync state changed during each of {MAX_REPLAYS} replays \
                     (fsyncs failing in other processes)"
                )),
            ));
        }
        before = now;
        caught = None;
        loaded = Some(load_for::<M>(vfs, dir, opts, true)?);
    }
    Ok((
        Replay { loaded, caught },
        Settled {
            state: settled,
            guard: sync_guard,
        },
    ))
}

/// The tail cache (FORMAT.md §15) a one-shot writer leaves for the next
/// open with its batch, when its replay decoded and applied enough of the
/// log: the state it built, encoded.
fn tail_cache_for<M: Machine>(
    opts: &Options,
    loaded: Option<&Loaded<M::State>>,
) -> Option<Vec<u8>> {
    match loaded {
        Some(l) if opts.one_shot && opts.key.is_none() => l
            .tail
            .filter(|t| {
                t.applied >= TAIL_CACHE_MIN_RECORDS
                    && t.last_seq > t.base_seq
                    && t.last_seq + 1 == l.next_seq
                    // Over a whole-state snapshot (format v1) the state
                    // holds the snapshot's entries too: no cache (§15.2).
                    && l.chain.first().is_none_or(|c| c.table)
            })
            .and_then(|t| {
                M::encode_tail(&l.state).map(|payload| {
                    encode_tail_cache(&TailCache {
                        base_seq: t.base_seq,
                        last_seq: t.last_seq,
                        digest: t.digest,
                        payload,
                    })
                })
            }),
        _ => None,
    }
}

impl<M: Machine> Store<M> {
    /// Opens (or, with `opts.create`, creates) the store in `dir` for writing.
    ///
    /// Recovery replays the log over the newest valid snapshot. A torn tail is
    /// copied to a `.broken-<offset>` file beside its segment, then truncated away;
    /// any other damage fails the open with an [`Error::Corrupt`] and changes nothing.
    ///
    /// With [`Options::one_shot`] every write is deferred to the first accepted
    /// append, which releases the lock once written (FORMAT.md §5.8).
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Store<M>> {
        if opts.one_shot {
            return Self::open_deferred(dir, opts);
        }
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
        open_dir(vfs.as_ref(), &dir, opts.create)?;
        // The sync state before any of the log is read: the replay is checked
        // against it once done (§5.8, "The open's replay").
        let writers = Writers::new(vfs.as_ref(), &dir);
        let before = writers.before_replay(vfs.as_ref());
        let (guard, replay) = replay_and_lock::<M>(vfs.as_ref(), &dir, &opts)?;
        let (
            Replay { loaded, caught },
            Settled {
                state: settled,
                guard: sync_guard,
            },
        ) = settle_replay::<M>(&writers, vfs.as_ref(), &dir, &opts, before, replay)?;
        // A state this build must not write to (a newer schema): refused before
        // recovery changes a byte.
        if let Some(l) = &loaded {
            M::check_state(&l.state).map_err(|reason| Error::Unsupported {
                path: dir.clone(),
                reason,
            })?;
        }
        let tail_cache = tail_cache_for::<M>(&opts, loaded.as_ref());
        let mut fresh_header = 0;
        let (inner, codec, store_id, report, durable, marked) = match loaded {
            None => {
                // A store created with a key is tagged, under a new random id.
                let id = opts.key.as_ref().map(|_| new_store_id());
                let tagging = opts.key.as_ref().zip(id.as_ref());
                let (inner, codec, report) = Self::fresh(vfs.as_ref(), &dir, opts.codec, tagging)?;
                let durable = inner.live.last_seq();
                fresh_header = inner.active.end();
                (inner, codec, id, report, durable, None)
            }
            Some(l) => {
                let vouch = |last| writers.vouches(vfs.as_ref(), settled, last);
                let (r, id) = Self::resume_found(&dir, &opts, l, &vouch, caught)?;
                (r.inner, r.codec, id, r.report, r.durable, r.mark)
            }
        };
        // Nothing above the mark: a sync state lost or of another boot is
        // written afresh; one that vouched or must be replaced stays for now.
        if !inner
            .pending()
            .and_then(|p| p.last.as_ref())
            .is_some_and(|l| l.unproven || l.vouched)
        {
            writers
                .adopt(vfs.as_ref(), settled)
                .map_err(|e| Error::io("write the sync state", dir.join(SHARED_FILE), e))?;
        }
        drop(sync_guard);
        if !opts.one_shot {
            writers.long_lived(inner.live.last_seq());
        }
        let tagging = opts.key.clone().zip(store_id);
        let shared = Arc::new(Shared {
            dir,
            vfs,
            codec,
            tagging,
            opts,
            inner: Mutex::new(inner),
            group: GroupCommit::new(durable),
            gather: Gather::default(),
            io: IoLock::default(),
            mark: Mutex::new(MarkWriter::new(marked)),
            compaction: Slot::default(),
            stats: Stats::default(),
            stop: Stop::default(),
            writer_lock: WriterLock::new(guard),
            writers,
            tail_cache: Mutex::new(tail_cache),
        });
        if fresh_header > 0 {
            // The new store's first segment is durable, header and name.
            shared.mark_durable(0, 1, fresh_header);
        }
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

    /// [`Self::resume`] on what the replay found, `l`, once its codec is
    /// settled: a store whose only segment header is torn gets the codec
    /// asked for now (and is tagged when a key is given now); an empty store
    /// that exists with another codec than `create` asks for is refused as
    /// [`Error::Mismatch`], left as it is. Returns the store's id too.
    fn resume_found(
        dir: &Path,
        opts: &Options,
        mut l: Loaded<M::State>,
        vouch: &dyn Fn((u64, u64, u64)) -> bool,
        caught: Option<CaughtUp>,
    ) -> Result<(Resumed<M>, Option<StoreId>)> {
        if l.report.codec.is_none() {
            // Only a torn first segment header: nothing says which codec the
            // store was being created with, so it gets the one asked for now
            // (and is tagged when a key is given now).
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
                path: dir.to_path_buf(),
                reason: format!(
                    "store exists with codec {}, {} was asked for",
                    l.codec.name(),
                    opts.codec.name()
                ),
            });
        }
        let id = l.store_id;
        Ok((Self::resume(dir, l, vouch, caught)?, id))
    }

    fn fresh(
        vfs: &dyn Vfs,
        dir: &Path,
        codec: Codec,
        tagging: Option<(&Key, &StoreId)>,
    ) -> Result<(Inner<M>, Codec, RecoveryReport)> {
        let (active, len) = create_segment(vfs, dir, codec, 1, tagging)?;
        let inner = Inner::new(
            Live::new(M::State::default(), 1),
            ActiveSegment::new(active, len),
            Book::new(vec![1], vec![], Vec::new(), 0),
            None,
        );
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
    ///
    /// `vouch(last)` says whether records above the durable watermark that end
    /// the log at `last` (seq, segment, end) may stay as they are, to be made
    /// durable by the next fsync (FORMAT.md §5.8) instead of copied. `caught`:
    /// the last segment as a catch-up left it open for writing.
    fn resume(
        dir: &Path,
        l: Loaded<M::State>,
        vouch: &dyn Fn((u64, u64, u64)) -> bool,
        caught: Option<CaughtUp>,
    ) -> Result<Resumed<M>> {
        let Loaded {
            state,
            listing,
            chain,
            scans,
            first_scanned,
            unsynced,
            proven,
            mark,
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
                // Only zeros after the records (§3.2): the preallocation stays.
                let alloc = match scan.end {
                    ScanEnd::Preallocated { .. } if cut.is_none() => scan.file_len,
                    _ => end,
                };
                // Every record up to the durability mark, or to the last one's
                // `synced`, and every record of the closed segments before this
                // one, is durable.
                let durable = tail.watermark.unwrap_or(0).max(proven).max(first - 1);
                let records = (next_seq - first).min(scan.count);
                // A segment without records: nothing proves its header and name
                // durable (its creator may have died, or its fsync failed),
                // unless the mark written after its creation does.
                let header_proven = mark.is_some_and(|m| m.segment >= first);
                let above = if records == 0 {
                    !header_proven
                } else {
                    durable < first + records - 1
                };
                let continues = first + scan.count == next_seq;
                // Written by writers of this boot that follow §5.8, none of whose
                // fsyncs failed: the next fsync makes them durable.
                let vouched =
                    above && records > 0 && continues && vouch((next_seq - 1, first, end));
                let path = dir.join(segment_name(first));
                Some(LastSegment {
                    opened: caught.filter(|c| c.path == path).map(|c| c.file),
                    path,
                    first_seq: first,
                    end,
                    alloc,
                    unproven: above && !vouched,
                    vouched,
                    continues,
                    durable,
                })
            }
            _ => None,
        };
        let durable = match &last {
            Some(l) if l.unproven || l.vouched => l.durable.min(next_seq - 1),
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
        let pending = Pending {
            torn,
            last,
            temps: listing.temps.iter().map(|n| dir.join(n)).collect(),
            next_seq,
        };
        let first_seq = segments.last().copied().unwrap_or(next_seq);
        let inner = Inner::new(
            Live::new(state, next_seq),
            ActiveSegment::new(
                Active {
                    file: Box::new(NotOpened),
                    path: dir.join(segment_name(first_seq)),
                    first_seq,
                },
                0,
            ),
            Book::new(
                segments,
                snapshots,
                chain,
                report
                    .bytes_scanned
                    .saturating_sub(report.bytes_below_snapshot),
            ),
            Some(Box::new(pending)),
        );
        report.last_seq = next_seq - 1;
        Ok(Resumed {
            inner,
            codec,
            report,
            durable,
            mark,
        })
    }

    /// The deferred part of the open, now: every replayed record is durable
    /// when it returns, as [`Store::open`] always has.
    fn finish_open(&mut self) -> Result<()> {
        let s = &*self.shared;
        let mut g = lock(&s.inner);
        let quarantined = s.prepare_or_poison(&mut g)?;
        if let Some(t) = self.report.torn_tail.as_mut() {
            t.quarantined_to = quarantined;
        }
        Ok(())
    }
}
