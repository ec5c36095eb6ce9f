//! The load: how every open reads a store back (a writer's, a lock-free
//! reader's, `verify`'s, and compaction's rebuild of the state at a cut).
//! The I/O side of recovery: list the directory, read snapshots and segments
//! through the [`Vfs`], feed the pure scan and decision functions, rebuild
//! the state. [`load`] runs its steps in order, each in its own file: what it
//! finds first (`find.rs`), the base (`base.rs`), the replay (`replay.rs`,
//! with the tail cache, `tail.rs`), the verdict (`verdict.rs`), and what it
//! reports (`report.rs`). Beside them: the pure recovery decision
//! (`recovery.rs`), the tail cache's bytes (`tailcache.rs`) and a one-shot
//! writer's catch-up (`catchup.rs`). [`with_retries`] reruns a read-only load
//! that a concurrent compaction raced.

pub(crate) mod base;
pub(crate) mod catchup;
pub(crate) mod find;
internal_mods! {
    recovery;
    tailcache;
}
pub(crate) mod replay;
pub(crate) mod report;
pub(crate) mod tail;
mod verdict;

use self::base::{Base, ChainCheck};
use self::find::{Found, Listing, find};
use self::recovery::{BaseChoice, Verdict};
use self::replay::{Reading, Replayed, Scope, replay_segments};
use self::report::RecoveryReport;
use self::tail::TailDigest;
use self::tailcache::TailCache;
use self::verdict::Decided;
use crate::engine::error::{Error, Result};
use crate::engine::format::Codec;
use crate::engine::io::vfs::{FileBytes, Vfs};
use crate::engine::log::mark::{Mark, MarkFound};
use crate::engine::log::scan::{SegmentScan, UnsyncedTail};
use crate::engine::options::Progress;
use crate::engine::snapshot::SnapshotData;
use crate::engine::snapshot::chain::Link;
use crate::engine::tag::{Key, StoreId};
use std::io;
use std::path::Path;
use std::time::Instant;

/// Decodes a snapshot payload into a state.
pub type DecodeState<'a, S> =
    dyn FnMut(Codec, u64, SnapshotData<'_>) -> std::result::Result<S, String> + 'a;
/// Applies one record payload to a state.
pub type ApplyRecord<'a, S> =
    dyn FnMut(&mut S, Codec, &[u8]) -> std::result::Result<(), String> + 'a;

/// Makes a state, as its snapshot chain left it, the state a tail cache
/// holds (`Machine::decode_tail`).
pub type DecodeTail<S> = fn(&mut S, &[u8]) -> std::result::Result<(), String>;

/// Knobs of one load.
pub struct LoadSpec<'a, S> {
    /// Read files by memory map (only while holding the writer lock).
    pub mapped: bool,
    /// Replay records up to this seq only, reading only segments that start at or below it.
    pub upto: Option<u64>,
    /// Decodes a snapshot payload into a state.
    pub decode_state: &'a mut DecodeState<'a, S>,
    /// Applies one record payload to the state.
    pub apply: &'a mut ApplyRecord<'a, S>,
    /// Called now and then during replay.
    pub progress: Option<&'a (dyn Fn(&Progress) + Send + Sync)>,
    /// The key of a tagged store: every record's and the base snapshot's tag is
    /// checked. Must be given for a tagged store and only for one.
    pub key: Option<&'a Key>,
    /// Reads the tail cache (FORMAT.md §15) with it, and keeps the digest of
    /// the records replayed for a writer to leave one: `None` for a machine
    /// that keeps none. Never used by a load of every segment, one up to a
    /// cut, or one of a tagged store.
    pub decode_tail: Option<DecodeTail<S>>,
}

impl<'a, S> LoadSpec<'a, S> {
    /// The load of a reader that holds no writer lock ([`Reader::state`],
    /// `verify`): files read, not mapped (a segment may be truncated under a
    /// map); every record; no progress. Only what differs is given.
    pub(crate) fn unlocked(
        decode_state: &'a mut DecodeState<'a, S>,
        apply: &'a mut ApplyRecord<'a, S>,
        key: Option<&'a Key>,
        decode_tail: Option<DecodeTail<S>>,
    ) -> Self {
        LoadSpec {
            mapped: false,
            upto: None,
            decode_state,
            apply,
            progress: None,
            key,
            decode_tail,
        }
    }
}

/// The outcome of a load that found no corruption.
pub struct Loaded<S> {
    pub state: S,
    pub listing: Listing,
    /// The snapshot recovery started from.
    #[allow(dead_code)]
    pub base: BaseChoice,
    /// Its chain (FORMAT.md §14): the full snapshot and the deltas over it,
    /// oldest first (empty when recovery started from the empty state).
    pub chain: Vec<Link>,
    /// Scans of `listing.segments[first_scanned..]` (segments wholly at or below
    /// the base snapshot are not read, except by [`load_every_segment`]).
    pub scans: Vec<SegmentScan>,
    /// Index in `listing.segments` of the segment `scans[0]` describes.
    pub first_scanned: usize,
    /// Where the last scanned segment's records stop being known durable.
    pub unsynced: Option<UnsyncedTail>,
    /// The seq a valid durability mark proves durable (0: none), checked
    /// against the log (FORMAT.md §5.7).
    pub proven: u64,
    /// That mark.
    pub mark: Option<Mark>,
    pub verdict: Verdict,
    pub codec: Codec,
    /// The store id of a tagged store (`None`: untagged, or no header was readable).
    pub store_id: Option<StoreId>,
    /// The seq the next record gets.
    pub next_seq: u64,
    pub report: RecoveryReport,
    /// The digest of the records above the base (FORMAT.md §15), when the
    /// load kept one.
    pub tail: Option<TailDigest>,
}

/// The bytes of the file at `path`: mapped (under the writer lock, or an
/// immutable snapshot) or read; `op` names the read in an error.
fn read(vfs: &dyn Vfs, path: &Path, mapped: bool, op: &'static str) -> Result<FileBytes> {
    let r = if mapped {
        vfs.read_mapped(path)
    } else {
        vfs.read(path)
    };
    r.map_err(|e| Error::io(op, path, e))
}

/// True when an error means a file vanished between listing and reading it
/// (a concurrent compaction): a read-only load retries.
pub fn is_vanished(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
}

const READ_RETRIES: usize = 20;

/// Runs a read-only load, retrying when a concurrent compaction deletes a file
/// between listing and reading it.
pub(crate) fn with_retries<T>(mut f: impl FnMut() -> Result<T>) -> Result<T> {
    let mut n = 0;
    loop {
        match f() {
            Err(e) if is_vanished(&e) && n < READ_RETRIES => {
                n += 1;
                std::thread::sleep(std::time::Duration::from_millis(1 << n.min(6)));
            }
            r => return r,
        }
    }
}

/// Loads a store: chooses the base snapshot, replays the log, classifies what it
/// found. Corruption is an error naming file, offset and seq; a torn tail is
/// reported in the verdict and left on disk (the writer decides what to do).
///
/// Reads the base snapshot and the segments that hold records above it, only:
/// a segment whose records are all at or below the base (its successor starts at
/// or below `base + 1`) is kept on disk for the fallback to an older snapshot,
/// and is read only when that fallback happens (the base is then older).
pub fn load<S: Default>(vfs: &dyn Vfs, dir: &Path, spec: LoadSpec<'_, S>) -> Result<Loaded<S>> {
    load_scoped(vfs, dir, spec, false)
}

/// [`load`], reading and checking every segment, also those the base snapshot
/// makes redundant (for `verify`).
pub fn load_every_segment<S: Default>(
    vfs: &dyn Vfs,
    dir: &Path,
    spec: LoadSpec<'_, S>,
) -> Result<Loaded<S>> {
    load_scoped(vfs, dir, spec, true)
}

/// [`load`], or with `every_segment` [`load_every_segment`]: what it finds
/// first, then its three steps, each in its own file (the base, the replay,
/// the verdict).
fn load_scoped<S: Default>(
    vfs: &dyn Vfs,
    dir: &Path,
    mut spec: LoadSpec<'_, S>,
    every_segment: bool,
) -> Result<Loaded<S>> {
    let started = Instant::now();
    let Found {
        mark_found,
        listing,
        detected,
        codec,
        store_id,
    } = find(vfs, dir, spec.key)?;
    let mut report = RecoveryReport {
        codec: detected,
        ..Default::default()
    };
    // A load of the records up to a cut (compaction's rebuild, of closed
    // segments the writer's open already checked) uses a mark only within it.
    let mark = mark_found
        .mark()
        .filter(|m| spec.upto.is_none_or(|u| m.seq < u));
    if let MarkFound::Unreadable(why) = &mark_found {
        report.mark_unreadable = Some(why.clone());
    }

    // 1. The base: the newest snapshot that verifies, decodes, and that the log continues from.
    let store = ChainCheck {
        vfs,
        dir,
        listing: &listing,
        key: spec.key,
        codec,
        store_id: store_id.as_ref(),
    };
    let Base {
        choice: base,
        mut state,
        chain,
    } = base::choose(store, &mut *spec.decode_state, &mut report)?;

    // 2. Replay every record above the base, segment by segment.
    let scope = Scope::above(dir, &listing, base.seq, mark, spec.upto, every_segment);
    let reading = Reading {
        vfs,
        dir,
        codec,
        detected: detected.is_some(),
        store_id: store_id.as_ref(),
        tagging: spec.key.zip(store_id.as_ref()),
    };
    // The tail cache (§15): for a load of the whole log above the base only.
    let decode_tail = spec
        .decode_tail
        .filter(|_| !every_segment && spec.upto.is_none() && spec.key.is_none());
    let cache = tail::standing(vfs, dir, decode_tail.is_some(), base.seq, &mut report);
    let before = report.clone();
    let mut replay = |cache: Option<&TailCache>, report: &mut RecoveryReport| {
        let tail = decode_tail.map(|d| (cache, d));
        replay_segments(&reading, &scope, &mut spec, &mut state, report, tail)
    };
    let replayed = match replay(cache.as_ref(), &mut report)? {
        Some(r) => r,
        None => {
            // Nothing was applied: the state is still the chain's.
            report = before;
            report.tail_cache_ignored = Some(
                "its records are not the log's (another digest, or a log that ends before them)"
                    .into(),
            );
            replay(None, &mut report)?.expect("a replay without a tail cache always completes")
        }
    };
    report.records_from_tail_cache = replayed.from_cache;

    // 3. The decision, the durability mark checked against the log first.
    let Decided {
        proven,
        verdict,
        next_seq,
    } = verdict::decide(&scope, &replayed, spec.upto, &mut report)?;
    let segments = scope.segments.len();
    report.records_replayed = replayed.records;
    report.last_seq = next_seq - 1;
    report.segments = segments;
    report.elapsed = started.elapsed();
    if let Some(p) = spec.progress {
        p(&Progress {
            records: replayed.records,
            bytes: report.bytes_scanned,
            segments,
        });
    }
    let first_scanned = scope.first_scanned;
    let Replayed {
        scans,
        unsynced,
        records,
        digest,
        ..
    } = replayed;
    Ok(Loaded {
        state,
        listing,
        tail: digest.map(|digest| TailDigest {
            base_seq: base.seq,
            last_seq: next_seq - 1,
            digest,
            applied: records,
        }),
        base,
        chain,
        scans,
        first_scanned,
        unsynced,
        proven,
        mark,
        verdict,
        codec,
        store_id,
        next_seq,
        report,
    })
}
