//! The I/O side of recovery: list a store directory, read its snapshots and
//! segments through the [`Vfs`], feed the pure scan and decision functions, and
//! rebuild the state (`replay_one` applies one record of a [`Machine`](crate::engine::machine::Machine)).
//! Shared by the writer's open, read-only opens, `verify` and compaction;
//! `with_retries` reruns a read-only load that a concurrent compaction raced.

pub(crate) mod catchup;
internal_mods! {
    recovery;
    tailcache;
}

use self::recovery::{BaseChoice, Corruption, FileRef, Verdict, choose_base, classify_marked};
use self::tailcache::{TailCache, fold, read_tail_cache};
use crate::engine::error::{Error, Result};
use crate::engine::format::*;
use crate::engine::io::vfs::{FileBytes, Vfs};
use crate::engine::log::frame::decode_segment_header;
use crate::engine::log::frame::open_record;
use crate::engine::log::mark::{Mark, MarkFound, read_mark};
use crate::engine::log::scan::{ScanEnd, SegmentScan, UnsyncedTail, scan_segment_tracked};
use crate::engine::options::Progress;
use crate::engine::snapshot::chain::{Link, MAX_DELTA_CHAIN};
use crate::engine::snapshot::snapfile::decode_snapshot;
use crate::engine::snapshot::table::Table;
use crate::engine::snapshot::{SnapshotData, is_table};
use crate::engine::tag::{Key, StoreId, id_mismatch, snapshot_tag, tags_equal};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The files of a store directory, sorted by seq.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// (first seq, file name) of each segment.
    pub segments: Vec<(u64, String)>,
    /// (seq, file name) of each snapshot.
    pub snapshots: Vec<(u64, String)>,
    /// Leftover temp files from an interrupted snapshot.
    pub temps: Vec<String>,
}

/// The payload of the record with `body` at `offset` of the segment `bytes` read
/// from `path`: the body itself in an untagged store (`tagging` is `None`); in a tagged
/// one, the body with its tag checked and split off, [`Error::Tampered`] when the
/// tag does not match.
pub(crate) fn record_payload<'a>(
    tagging: Option<(&Key, &StoreId)>,
    codec: Codec,
    path: &Path,
    bytes: &[u8],
    offset: u64,
    seq: u64,
    body: &'a [u8],
) -> Result<&'a [u8]> {
    let Some((key, id)) = tagging else {
        return Ok(body);
    };
    open_record(key, id, codec, bytes, offset, seq, body).map_err(|what| Error::Tampered {
        path: path.to_path_buf(),
        offset: Some(offset),
        seq: Some(seq),
        what,
    })
}

/// Lists a store directory. `NotFound` if it does not exist.
pub fn list_store(vfs: &dyn Vfs, dir: &Path) -> Result<Listing> {
    let names = vfs
        .list(dir)
        .map_err(|e| Error::io("list store directory", dir, e))?;
    let mut l = Listing::default();
    for name in names {
        if let Some(s) = parse_segment_name(&name) {
            l.segments.push((s, name));
        } else if let Some(s) = parse_snapshot_name(&name) {
            l.snapshots.push((s, name));
        } else if name.contains(TEMP_MARKER) {
            l.temps.push(name);
        }
    }
    l.segments.sort();
    l.snapshots.sort();
    Ok(l)
}

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

/// The records above a load's base, as a tail cache names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailDigest {
    /// The base snapshot's seq (0: none).
    pub base_seq: u64,
    /// The last record folded (`base_seq` when none).
    pub last_seq: u64,
    /// `tailcache::fold` over `base_seq + 1 ..= last_seq`.
    pub digest: u64,
    /// Of those, the records decoded and applied (not supplied by a cache).
    pub applied: u64,
}

impl TailDigest {
    /// Folds the record `seq` (the next above `last_seq`) into the digest,
    /// for a catch-up extending what the load folded.
    pub fn push(&mut self, seq: u64, payload: &[u8]) {
        self.digest = fold(self.digest, seq, payload);
        self.last_seq = seq;
    }
}

const PROGRESS_EVERY: u64 = 65_536;

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

/// Bytes read from the start of a segment to decode its header: the longest
/// header of either codec (FORMAT.md §3, §10.3).
const SEGMENT_HEAD_READ: usize = if MAX_JSONL_HEADER_LEN > TAGGED_SEGMENT_HEADER_LEN {
    MAX_JSONL_HEADER_LEN
} else {
    TAGGED_SEGMENT_HEADER_LEN
};

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

/// Decodes and applies one replayed record.
pub(crate) fn replay_one<M: crate::engine::machine::Machine>(
    s: &mut M::State,
    codec: Codec,
    p: &[u8],
) -> std::result::Result<(), String> {
    let t: M::Transition = crate::engine::codec::decode_payload(codec, p)?;
    M::apply(s, &t).map_err(|e| match M::failure(e) {
        crate::engine::Error::Refused(why) => {
            format!(
                "apply refused it: {}",
                crate::engine::error::ErrorChain(&*why)
            )
        }
        fault => format!(
            "the state it applies to is damaged: {}",
            crate::engine::error::ErrorChain(&fault)
        ),
    })
}

/// Detects the codec (and a tagged store's id) of a store from its oldest
/// segment with a readable header (reading only the header: the segment may be
/// one the replay does not need), else from its newest readable snapshot.
fn detect_codec(
    vfs: &dyn Vfs,
    dir: &Path,
    l: &Listing,
    key: Option<&Key>,
) -> Result<Option<(Codec, Option<StoreId>)>> {
    for (_, name) in &l.segments {
        let path = dir.join(name);
        let head = vfs
            .read_head(&path, SEGMENT_HEAD_READ)
            .map_err(|e| Error::io("read segment header", &path, e))?;
        if let Ok(h) = decode_segment_header(&head) {
            check_key_check(&path, key, &h)?;
            return Ok(Some((h.codec, h.store_id)));
        }
    }
    for (_, name) in l.snapshots.iter().rev() {
        let path = dir.join(name);
        let bytes = read(vfs, &path, true, "read snapshot")?;
        if is_table((*bytes).as_ref()) {
            if let Ok(t) = Table::from_bytes(path, bytes, key) {
                return Ok(Some((t.codec(), t.store_id())));
            }
            continue;
        }
        if let Ok(v) = decode_snapshot((*bytes).as_ref()) {
            return Ok(Some((v.codec, v.tagging.map(|s| s.0))));
        }
    }
    Ok(None)
}

/// Refuses, at once and as such, a key that is not the one a tagged segment's
/// key check (FORMAT.md §10.6) was made with. A segment without a check (written
/// before key checks) leaves the tags to tell, as before.
pub(crate) fn check_key_check(
    path: &Path,
    key: Option<&Key>,
    h: &crate::engine::log::frame::SegmentHeader,
) -> Result<()> {
    if let (Some(key), Some(id), Some(check)) = (key, h.store_id.as_ref(), h.key_check.as_ref())
        && crate::engine::tag::key_check(key, id) != *check
    {
        return Err(Error::Key {
            path: path.to_path_buf(),
            reason: "wrong key: this is not the key the store was created with (its key check does not match); nothing was read or written".into(),
        });
    }
    Ok(())
}

/// Refuses a key for an untagged store and no key for a tagged one.
pub(crate) fn check_key(dir: &Path, key: Option<&Key>, store_id: Option<&StoreId>) -> Result<()> {
    let reason = match (key, store_id) {
        (None, Some(_)) => "store is tagged; pass its key",
        (Some(_), None) => {
            "store is not tagged, but a key was given; refusing to read unauthenticated data as if it were checked (open it without a key)"
        }
        _ => return Ok(()),
    };
    Err(Error::Key {
        path: dir.to_path_buf(),
        reason: reason.into(),
    })
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

/// What a load finds before it reads a snapshot or a record: the durability
/// mark (read before the listing), the listing, the codec and the store id.
struct Found {
    mark_found: MarkFound,
    listing: Listing,
    /// The codec a readable header named (`None`: a store whose creation a
    /// crash cut short, read as binary).
    detected: Option<Codec>,
    codec: Codec,
    store_id: Option<StoreId>,
}

fn find(vfs: &dyn Vfs, dir: &Path, key: Option<&Key>) -> Result<Found> {
    // Before the listing: a mark is written only after its records were
    // fsynced, so every record it names is whole in what is read after it,
    // even beside a live writer (FORMAT.md §5.7).
    let mark_found = read_mark(vfs, dir)?;
    let listing = list_store(vfs, dir)?;
    if listing.segments.is_empty() && listing.snapshots.is_empty() {
        return Err(Error::NotFound {
            path: dir.to_path_buf(),
        });
    }
    let detected = detect_codec(vfs, dir, &listing, key)?;
    // The oldest readable header names the store; every file read must carry its id.
    let store_id = detected.and_then(|d| d.1);
    if detected.is_some() {
        check_key(dir, key, store_id.as_ref())?;
    }
    let detected = detected.map(|d| d.0);
    let codec = match detected {
        Some(c) => c,
        // A crash while a store was being created can leave its only segment with
        // its name durable but its header torn or empty: no record was ever
        // acknowledged in it, and classify calls it a whole-file torn tail. The
        // codec is unknown (`report.codec` stays None); the caller picks one.
        None if listing.snapshots.is_empty()
            && listing.segments.len() == 1
            && listing.segments[0].0 == 1 =>
        {
            Codec::Binary
        }
        None => {
            return Err(Error::Corrupt {
                path: dir.join(
                    listing
                        .segments
                        .first()
                        .or(listing.snapshots.last())
                        .map(|x| x.1.as_str())
                        .unwrap_or(""),
                ),
                offset: Some(0),
                seq: None,
                reason: "no segment or snapshot with a readable header".into(),
            });
        }
    };
    Ok(Found {
        mark_found,
        listing,
        detected,
        codec,
        store_id,
    })
}

/// The snapshots tried for the base, newest first ([`choose_base`] calls
/// [`BaseTry::snapshot`] for each until one is chosen): what the chosen one
/// holds, and what stopped the others.
struct BaseTry<'a, S> {
    /// The store the snapshots must agree with, and where its files are.
    store: ChainCheck<'a>,
    /// The chosen snapshot's state, its chain and its size.
    state: Option<S>,
    chain: Vec<Link>,
    bytes: u64,
    /// A snapshot that could not be read (one that vanished under a reader
    /// fails the load: a compaction raced it).
    io_error: Option<Error>,
    /// A snapshot whose checksums passed but whose tag or store id did not:
    /// tampering fails the load, never a quiet fallback to an older snapshot.
    tampered: Option<Error>,
}

impl<S> BaseTry<'_, S> {
    /// Tries snapshot `i` of the listing: `Ok` when it verifies and decodes
    /// (kept as the base), else why not.
    fn snapshot(
        &mut self,
        i: usize,
        decode_state: &mut DecodeState<'_, S>,
    ) -> std::result::Result<(), String> {
        if self.tampered.is_some() {
            return Err("not checked: a newer snapshot was tampered with".into());
        }
        let (seq, name) = &self.store.listing.snapshots[i];
        let path = self.store.dir.join(name);
        // Snapshots are immutable once renamed into place (never truncated, only
        // unlinked), so even a lock-free reader may map them.
        let bytes = match read(self.store.vfs, &path, true, "read snapshot") {
            Ok(b) => b,
            Err(e) => {
                let why = crate::engine::ErrorChain(&e).to_string();
                self.io_error.get_or_insert(e);
                return Err(why);
            }
        };
        let bytes_len = (*bytes).as_ref().len() as u64;
        let table_file = is_table((*bytes).as_ref());
        // What the file says of itself, in either shape, and whether a tagged
        // whole snapshot's tag matches (a table checked its own tags on open).
        let mut links = Vec::new();
        let (found_seq, found_codec, found_id, tag_ok, data) = if table_file {
            let t = match Table::from_bytes(path.clone(), bytes, self.store.key) {
                Ok(t) => Arc::new(t),
                Err(e @ (Error::Tampered { .. } | Error::Key { .. })) => {
                    let why = crate::engine::ErrorChain(&e).to_string();
                    self.tampered = Some(e);
                    return Err(why);
                }
                Err(e) => return Err(crate::engine::ErrorChain(&e).to_string()),
            };
            let found = (t.seq(), t.codec(), t.store_id());
            let data = match t.parent() {
                None => {
                    links.push(link_of(&t));
                    SnapshotData::Table(t)
                }
                Some(_) => match self.store.tables(t.clone()) {
                    Ok(tables) => {
                        links = tables.iter().map(|t| link_of(t)).collect();
                        SnapshotData::Tables(tables)
                    }
                    Err(e @ (Error::Tampered { .. } | Error::Key { .. })) => {
                        let why = crate::engine::ErrorChain(&e).to_string();
                        self.tampered = Some(e);
                        return Err(why);
                    }
                    Err(e) if is_vanished(&e) => {
                        let why = crate::engine::ErrorChain(&e).to_string();
                        self.io_error.get_or_insert(e);
                        return Err(why);
                    }
                    Err(e) => return Err(crate::engine::ErrorChain(&e).to_string()),
                },
            };
            (found.0, found.1, found.2, true, data)
        } else {
            let view = decode_snapshot((*bytes).as_ref())?;
            let tag_ok = match (self.store.key.zip(self.store.store_id), view.tagging) {
                (Some((key, id)), Some((_, tag))) => {
                    tags_equal(&snapshot_tag(key, id, view.seq, view.payload), &tag)
                }
                _ => true,
            };
            let id = view.tagging.map(|s| s.0);
            links.push(Link {
                seq: view.seq,
                parent: None,
                bytes: bytes_len,
                table: false,
            });
            (
                view.seq,
                view.codec,
                id,
                tag_ok,
                SnapshotData::Whole(view.payload),
            )
        };
        let (kind, header) = if table_file {
            ("table", "table header")
        } else {
            ("snapshot", "header")
        };
        // Checksums passed: a wrong store id or tag is not damage but tampering,
        // never a reason to fall back quietly to an older snapshot.
        let found = (found_seq, found_codec, found_id.as_ref());
        let what = match misfit(
            kind,
            header,
            found,
            (*seq, self.store.codec, self.store.store_id),
        ) {
            Some(Misfit::Damaged(why)) => return Err(why),
            Some(Misfit::Tampered(what)) => Some(what),
            None if !tag_ok => Some("snapshot tag mismatch".to_string()),
            None => None,
        };
        if let Some(what) = what {
            self.tampered = Some(Error::Tampered {
                path,
                offset: Some(0),
                seq: Some(*seq),
                what: what.clone(),
            });
            return Err(what);
        }
        self.bytes = bytes_len;
        let what = if table_file { "table" } else { "payload" };
        self.state = Some(
            decode_state(self.store.codec, *seq, data)
                .map_err(|e| format!("{what} does not decode: {e}"))?,
        );
        self.chain = links;
        Ok(())
    }
}

/// The store as [`find`] found it, as every segment read checks it: the
/// codec, and the store id (with the key) every header and record must carry.
struct Reading<'a> {
    vfs: &'a dyn Vfs,
    dir: &'a Path,
    codec: Codec,
    /// A header was readable: every segment's must name `store_id`.
    detected: bool,
    store_id: Option<&'a StoreId>,
    tagging: Option<(&'a Key, &'a StoreId)>,
}

/// What replaying the segments above the base found.
struct Replayed {
    scans: Vec<SegmentScan>,
    unsynced: Option<UnsyncedTail>,
    records: u64,
    /// The digest kept (when asked), and the records the cache supplied.
    digest: Option<u64>,
    from_cache: u64,
    /// Where the mark's record ends, as the mark's segment shows it.
    mark_record_end: Option<u64>,
    mark_segment_scanned: bool,
}

/// Replays every record above `base_seq` in `segments` into `state`, segment
/// by segment (every record's checksum and tag checked, also below the
/// base: a fallback may need them), and notes where the mark's record ends.
///
/// With `tail` (FORMAT.md §15) it keeps the digest of the records above the
/// base; with a cache as well, it folds the records up to the cache's last
/// seq into the digest without applying them, and there installs the cache
/// when the digests agree, else stops at once and returns `None`: nothing
/// was applied, and the replay is to run again without the cache.
#[allow(clippy::too_many_arguments)]
fn replay_segments<S>(
    r: &Reading<'_>,
    segments: &[&(u64, String)],
    spec: &mut LoadSpec<'_, S>,
    base_seq: u64,
    mark: Option<Mark>,
    state: &mut S,
    report: &mut RecoveryReport,
    tail: Option<(Option<&TailCache>, DecodeTail<S>)>,
) -> Result<Option<Replayed>> {
    let mut scans = Vec::with_capacity(segments.len());
    let mut unsynced = None;
    let mut replayed = 0u64;
    let mut digest = 0u64;
    let mut waiting = tail.and_then(|t| t.0);
    let (mut from_cache, mut missed) = (0u64, false);
    // Where the mark's record ends, as the mark's segment shows it.
    let mut mark_record_end: Option<u64> = None;
    let mut mark_segment_scanned = false;
    for (i, (first, name)) in segments.iter().enumerate() {
        let path = r.dir.join(name);
        let in_mark_segment = mark.is_some_and(|m| m.segment == *first);
        let mut saw_mark_record = false;
        let bytes = read(r.vfs, &path, spec.mapped, "read segment")?;
        let bytes: &[u8] = (*bytes).as_ref();
        if r.detected
            && let Ok(h) = decode_segment_header(bytes)
            && h.store_id.as_ref() != r.store_id
        {
            return Err(Error::Tampered {
                path,
                offset: Some(0),
                seq: Some(h.first_seq),
                what: id_mismatch("segment", h.store_id.as_ref(), r.store_id),
            });
        }
        let scanned = scan_segment_tracked(bytes, |seq, body, offset| {
            // A tagged store's record passed its checksum; its tag decides whether
            // it is what the writer wrote. Checked for every record, even those
            // the snapshot covers (a fallback may need them).
            let payload = record_payload(r.tagging, r.codec, &path, bytes, offset, seq, body)?;
            if let Some(m) = mark.filter(|_| in_mark_segment) {
                if seq == m.seq {
                    saw_mark_record = true;
                } else if seq == m.seq + 1 {
                    mark_record_end = Some(offset);
                }
            }
            if seq <= base_seq {
                report.bytes_below_snapshot = report.bytes_scanned + offset;
                return Ok(());
            }
            if spec.upto.is_some_and(|u| seq > u) {
                return Ok(());
            }
            if let Some((_, decode_tail)) = tail {
                digest = fold(digest, seq, payload);
                if let Some(c) = waiting {
                    if seq < c.last_seq {
                        return Ok(());
                    }
                    if seq == c.last_seq
                        && digest == c.digest
                        && decode_tail(state, &c.payload).is_ok()
                    {
                        waiting = None;
                        from_cache = seq - base_seq;
                        return Ok(());
                    }
                    missed = true;
                    return Err(Error::Unsupported {
                        path: path.clone(),
                        reason: "the tail cache does not match the log".into(),
                    });
                }
            }
            (spec.apply)(state, r.codec, payload).map_err(|reason| Error::Corrupt {
                path: path.clone(),
                offset: Some(offset),
                seq: Some(seq),
                reason: format!("record cannot be replayed: {reason}"),
            })?;
            replayed += 1;
            if replayed.is_multiple_of(PROGRESS_EVERY)
                && let Some(p) = spec.progress
            {
                p(&Progress {
                    records: replayed,
                    bytes: report.bytes_scanned + offset,
                    segments: segments.len(),
                });
            }
            Ok(())
        });
        let (scan, tail) = match scanned {
            Err(_) if missed => return Ok(None),
            r => r?,
        };
        // Preallocated zeros are not log: they would count towards compaction.
        report.bytes_scanned += match scan.end {
            ScanEnd::Preallocated { offset } => offset,
            _ => bytes.len() as u64,
        };
        if in_mark_segment {
            mark_segment_scanned = true;
            if saw_mark_record && mark_record_end.is_none() {
                mark_record_end = Some(scan.valid_len);
            }
            let empty_segment_mark = mark.is_some_and(|m| m.segment == m.seq + 1);
            if !saw_mark_record && !empty_segment_mark && i + 1 < segments.len() {
                // The segment ended before the mark's record, and the log goes on
                // in the next: the mark names another history than this log's.
                mark_record_end = Some(u64::MAX);
            }
        }
        scans.push(scan);
        unsynced = Some(tail);
    }
    if waiting.is_some() {
        // The log ends before the cache's last record.
        return Ok(None);
    }
    Ok(Some(Replayed {
        scans,
        unsynced,
        records: replayed,
        digest: tail.map(|_| digest),
        from_cache,
        mark_record_end,
        mark_segment_scanned,
    }))
}

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
    let snap_seqs: Vec<u64> = listing.snapshots.iter().map(|s| s.0).collect();
    let log_first = listing.segments.first().map(|s| s.0);
    let mut tried = BaseTry {
        store: ChainCheck {
            vfs,
            dir,
            listing: &listing,
            key: spec.key,
            codec,
            store_id: store_id.as_ref(),
        },
        state: None,
        chain: Vec::new(),
        bytes: 0,
        io_error: None,
        tampered: None,
    };
    let base = choose_base(&snap_seqs, log_first, |i| {
        tried.snapshot(i, &mut *spec.decode_state)
    });
    let BaseTry {
        state: base_state,
        chain,
        bytes: snapshot_bytes,
        io_error,
        tampered,
        ..
    } = tried;
    if let Some(e) = io_error.filter(is_vanished) {
        return Err(e);
    }
    if let Some(e) = tampered {
        return Err(e);
    }
    let base = base.map_err(|c| corruption(dir, &listing, c))?;
    for (i, why) in &base.skipped {
        report
            .snapshot_fallbacks
            .push((dir.join(&listing.snapshots[*i].1), why.clone()));
    }
    report.snapshot_seq = base.snapshot.map(|_| base.seq);
    report.snapshot_bytes = snapshot_bytes;
    let mut state = match base.snapshot {
        Some(_) => base_state.expect("a chosen snapshot was decoded"),
        None => S::default(),
    };

    // 2. Replay every record above the base, segment by segment.
    let first_scanned = if every_segment {
        0
    } else {
        listing
            .segments
            .windows(2)
            .take_while(|w| w[1].0 <= base.seq + 1)
            .count()
    };
    let segments: Vec<&(u64, String)> = listing.segments[first_scanned..]
        .iter()
        .filter(|(first, _)| spec.upto.is_none_or(|u| *first <= u))
        .collect();
    let reading = Reading {
        vfs,
        dir,
        codec,
        detected: detected.is_some(),
        store_id: store_id.as_ref(),
        tagging: spec.key.zip(store_id.as_ref()),
    };
    // The tail cache (§15): read once the base is chosen; one that stands on
    // another snapshot, or cannot be read, is only reported.
    let decode_tail = spec
        .decode_tail
        .filter(|_| !every_segment && spec.upto.is_none() && spec.key.is_none());
    let cache = match decode_tail.map(|_| read_tail_cache(vfs, dir)) {
        Some(Ok(Some(c))) if c.base_seq == base.seq => Some(c),
        Some(Ok(Some(c))) => {
            report.tail_cache_ignored = Some(format!(
                "it stands on the snapshot at seq {}, the open on {}",
                c.base_seq, base.seq
            ));
            None
        }
        Some(Err(why)) => {
            report.tail_cache_ignored = Some(why);
            None
        }
        _ => None,
    };
    let before = report.clone();
    let mut replay = |cache: Option<&TailCache>, report: &mut RecoveryReport| {
        replay_segments(
            &reading,
            &segments,
            &mut spec,
            base.seq,
            mark,
            &mut state,
            report,
            decode_tail.map(|d| (cache, d)),
        )
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
    let Replayed {
        scans,
        unsynced,
        records: replayed,
        digest,
        from_cache,
        mark_record_end,
        mark_segment_scanned,
    } = replayed;
    report.records_from_tail_cache = from_cache;
    let base_seq = base.seq;
    let name_seqs: Vec<u64> = segments.iter().map(|s| s.0).collect();

    // 3. The decision, the durability mark checked against the log first.
    let proven = match mark {
        None => 0,
        Some(m) if m.seq <= base.seq => m.seq,
        Some(m) => {
            check_mark(dir, &listing, m, mark_segment_scanned, mark_record_end)?;
            m.seq
        }
    };
    report.durable_mark = mark.map(|m| m.seq);
    let header_proven = mark.filter(|m| m.seq >= base.seq).map_or(0, |m| m.segment);
    let verdict = classify_marked(&scans, &name_seqs, base.seq, proven, header_proven);
    if let Verdict::Corrupt(c) = &verdict {
        let mut c = c.clone();
        if let FileRef::Segment(i) = &mut c.file {
            *i += first_scanned;
        }
        return Err(corruption(dir, &listing, c));
    }
    let mut next_seq = scans
        .last()
        .map_or(base.seq + 1, |s| s.next_seq.max(base.seq + 1));
    if let Verdict::TornTail(t) = &verdict {
        if t.whole_file {
            next_seq = name_seqs[t.segment].max(base.seq + 1);
        }
        let scan = &scans[t.segment];
        report.torn_tail = Some(TornTailReport {
            path: dir.join(&segments[t.segment].1),
            offset: t.offset,
            bytes: t.bytes,
            whole_file: t.whole_file,
            reason: t.reason.clone(),
            quarantined_to: None,
            first_seq: if t.whole_file {
                name_seqs[t.segment]
            } else {
                scan.next_seq
            },
            valid_frames_dropped: scan.frames_after_end,
        });
    }
    if let Some(u) = spec.upto {
        next_seq = next_seq.min(u + 1);
    }
    report.records_replayed = replayed;
    report.last_seq = next_seq - 1;
    report.segments = segments.len();
    report.elapsed = started.elapsed();
    if let Some(p) = spec.progress {
        p(&Progress {
            records: replayed,
            bytes: report.bytes_scanned,
            segments: segments.len(),
        });
    }
    Ok(Loaded {
        state,
        listing,
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
        tail: digest.map(|digest| TailDigest {
            base_seq,
            last_seq: next_seq - 1,
            digest,
            applied: replayed,
        }),
    })
}

/// Checks a durability mark above the base against the log: the segment it
/// names is in the log, and the record it names ends where it says. A mark is
/// written only after its records were fsynced, and no step of runlog moves or
/// rewrites a record it proves, so a mismatch is damage, never a crash's doing.
fn check_mark(
    dir: &Path,
    listing: &Listing,
    m: Mark,
    segment_scanned: bool,
    record_end: Option<u64>,
) -> Result<()> {
    let path = dir.join(MARK_FILE);
    let corrupt = |reason: String| Error::Corrupt {
        path: path.clone(),
        offset: Some(0),
        seq: Some(m.seq),
        reason,
    };
    if !segment_scanned {
        let listed = listing.segments.iter().any(|s| s.0 == m.segment);
        return Err(corrupt(format!(
            "the durability mark proves records through seq {} durable in {}, {}",
            m.seq,
            segment_name(m.segment),
            if listed {
                "a segment the log does not reach"
            } else {
                "which is missing"
            }
        )));
    }
    if m.segment == m.seq + 1 {
        // An empty segment's mark: the segment exists; its record is in the one before.
        return Ok(());
    }
    match record_end {
        // The record was not reached: classify decides (damage before it, or a
        // log that ends before it, is corruption by the mark's rows).
        None => Ok(()),
        Some(end) if end == m.end => Ok(()),
        Some(end) => Err(corrupt(format!(
            "the durability mark says record {} ends at offset {} of {}, but the log's ends at {}",
            m.seq,
            m.end,
            segment_name(m.segment),
            if end == u64::MAX {
                "no offset (the segment ends before it)".to_string()
            } else {
                format!("offset {end}")
            }
        ))),
    }
}

fn link_of(t: &Table) -> Link {
    Link {
        seq: t.seq(),
        parent: t.parent(),
        bytes: t.size(),
        table: true,
    }
}

/// A snapshot file's identity, as its header states it or as the store
/// expects it: its seq, codec and store id.
type Identity<'a> = (u64, Codec, Option<&'a StoreId>);

/// What is wrong with a snapshot whose checksums passed but whose identity
/// differs from the one its name and the store give it.
enum Misfit {
    /// A wrong seq or codec: damage, the snapshot is skipped.
    Damaged(String),
    /// Another store's file: tampering, never a quiet fallback.
    Tampered(String),
}

/// Compares a snapshot's `found` identity with the `want`ed one; `kind` and
/// `header` name the file's shape in the message ("table", "table header").
fn misfit(kind: &str, header: &str, found: Identity, want: Identity) -> Option<Misfit> {
    if found.0 != want.0 {
        Some(Misfit::Damaged(format!(
            "{header} says seq {}, file name says {}",
            found.0, want.0
        )))
    } else if found.1 != want.1 {
        Some(Misfit::Damaged(format!(
            "{kind} codec {} differs from the log's {}",
            found.1.name(),
            want.1.name()
        )))
    } else if found.2 != want.2 {
        Some(Misfit::Tampered(id_mismatch("snapshot", found.2, want.2)))
    } else {
        None
    }
}

/// What every table under a delta must agree on with the store, and where
/// to find it.
struct ChainCheck<'a> {
    vfs: &'a dyn Vfs,
    dir: &'a Path,
    listing: &'a Listing,
    key: Option<&'a Key>,
    codec: Codec,
    store_id: Option<&'a StoreId>,
}

impl ChainCheck<'_> {
    /// The tables of `newest`'s chain, full table first (FORMAT.md §14.3):
    /// each parent is the listed snapshot of that seq, a table of this store
    /// and codec, until a full table; at most [`MAX_DELTA_CHAIN`] deltas.
    /// Any failure is the error of the table at fault (its path, offset and
    /// what is wrong), which makes the newest snapshot unusable.
    fn tables(&self, newest: Arc<Table>) -> Result<Vec<Arc<Table>>> {
        let mut chain = vec![newest];
        while let Some(p) = chain.last().and_then(|t| t.parent()) {
            let child = chain.last().expect("not empty").path().to_path_buf();
            let corrupt = |reason: String| Error::Corrupt {
                path: child.clone(),
                offset: None,
                seq: Some(p),
                reason,
            };
            if chain.len() > MAX_DELTA_CHAIN {
                return Err(corrupt(format!(
                    "a chain of more than {MAX_DELTA_CHAIN} delta tables"
                )));
            }
            let Some((_, name)) = self.listing.snapshots.iter().find(|s| s.0 == p) else {
                return Err(corrupt(format!(
                    "delta table over {}, which is missing",
                    snapshot_name(p)
                )));
            };
            let path = self.dir.join(name);
            let bytes = read(self.vfs, &path, true, "read snapshot")?;
            if !is_table((*bytes).as_ref()) {
                return Err(corrupt(format!(
                    "delta table over {name}, which is not a table"
                )));
            }
            let t = Table::from_bytes(path.clone(), bytes, self.key)?;
            let found = (t.seq(), t.codec(), t.store_id());
            let want = (p, self.codec, self.store_id);
            match misfit(
                "table",
                "table header",
                (found.0, found.1, found.2.as_ref()),
                want,
            ) {
                None => {}
                Some(Misfit::Damaged(reason)) => {
                    return Err(Error::Corrupt {
                        path,
                        offset: None,
                        seq: Some(p),
                        reason,
                    });
                }
                Some(Misfit::Tampered(what)) => {
                    return Err(Error::Tampered {
                        path,
                        offset: None,
                        seq: Some(p),
                        what,
                    });
                }
            }
            chain.push(Arc::new(t));
        }
        chain.reverse();
        Ok(chain)
    }
}

/// The parent a snapshot file names in its header (FORMAT.md §14), read from
/// its first bytes only: `None` for a full table, a whole snapshot or an
/// unreadable file.
pub(crate) fn snapshot_parent(vfs: &dyn Vfs, path: &Path) -> Option<u64> {
    let head = vfs
        .read_head(
            path,
            crate::engine::snapshot::table::format::TABLE_HEADER_LEN,
        )
        .ok()?;
    crate::engine::snapshot::table::format::file_header_parent(&head)
}

fn corruption(dir: &Path, l: &Listing, c: Corruption) -> Error {
    let name = match c.file {
        FileRef::Segment(i) => l.segments.get(i).map(|s| s.1.as_str()),
        FileRef::Snapshot(i) => l.snapshots.get(i).map(|s| s.1.as_str()),
    };
    Error::Corrupt {
        path: dir.join(name.unwrap_or("")),
        offset: c.offset,
        seq: c.seq,
        reason: c.reason,
    }
}
