//! Read-only verification: [`Reader::verify`] classifies every byte of
//! a store ([`Integrity`]) without a lock and without changing anything.

use super::Reader;
use super::settle::{Tail, VERIFY_SETTLE_WAIT, settle};
use crate::engine::error::{Error, Result};
use crate::engine::format::*;
use crate::engine::io::dir::check_dir;
use crate::engine::io::vfs::Vfs;
use crate::engine::load::base::snapshot_parent;
use crate::engine::load::find::list_store;
use crate::engine::load::report::{RecoveryReport, TornTailReport};
use crate::engine::load::{LoadSpec, load_every_segment, with_retries};
use crate::engine::snapshot::SnapshotData;
use crate::engine::snapshot::chain::MAX_DELTA_CHAIN;
use crate::engine::snapshot::table::Table;
use crate::engine::tag::Key;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The classification `verify` reports.
///
/// Damage is not described twice: [`Integrity::Damaged`] holds the very
/// [`Error`] an open of the store returns ([`Error::Corrupt`] or
/// [`Error::Tampered`], same file, offset and seq), so `verify`'s verdict and
/// `open`'s failure are one value.
#[derive(Debug)]
pub enum Integrity {
    /// Every byte accounted for.
    Clean,
    /// Only a torn tail at the end of the last segment (a writer would drop it).
    TornTail {
        /// The file or directory involved.
        path: PathBuf,
        /// Byte offset within the file.
        offset: u64,
        /// Bytes involved.
        bytes: u64,
        /// What is wrong.
        reason: String,
    },
    /// A bad frame at the end of the last segment while a writer held the
    /// writer lock for as long as `verify` waited for it (FORMAT.md §5.6): an
    /// append in progress, not damage. Every record before it is checked.
    /// (It may also be a torn tail that this writer has not cut yet; it cuts
    /// it before it appends.)
    AppendInProgress {
        /// The segment.
        path: PathBuf,
        /// Byte offset within the file where the frame starts.
        offset: u64,
        /// Bytes from there to the end of the file.
        bytes: u64,
        /// What the bytes read as.
        reason: String,
    },
    /// Damage that is not a torn tail, as the error every open returns:
    /// [`Error::Corrupt`], or [`Error::Tampered`] in a tagged store whose bytes
    /// pass their checksums but not their tag.
    Damaged(Error),
}

impl Integrity {
    /// The verdict on damage a read met: [`Error::Corrupt`] and
    /// [`Error::Tampered`] become [`Integrity::Damaged`]; any other error is
    /// not a verdict on the bytes and comes back as it was.
    pub fn from_damage(e: Error) -> Result<Integrity, Error> {
        match e {
            Error::Corrupt { .. } | Error::Tampered { .. } => Ok(Integrity::Damaged(e)),
            e => Err(e),
        }
    }

    /// True when every byte is accounted for.
    pub fn is_clean(&self) -> bool {
        matches!(self, Integrity::Clean)
    }

    /// True when every open reads the store: clean, only a torn tail, or an
    /// append in progress.
    pub fn is_readable(&self) -> bool {
        matches!(
            self,
            Integrity::Clean | Integrity::TornTail { .. } | Integrity::AppendInProgress { .. }
        )
    }

    /// The damage, when there is some: the error an open returns.
    pub fn damage(&self) -> Option<&Error> {
        match self {
            Integrity::Damaged(e) => Some(e),
            _ => None,
        }
    }
}

/// What `verify` found.
#[derive(Debug)]
pub struct VerifyReport {
    /// The classification.
    pub integrity: Integrity,
    /// Details of the scan (empty when corrupt).
    pub recovery: RecoveryReport,
    /// Files a compaction makes redundant but that are still there (a failed
    /// unlink, counted in [`Stats::cleanup_failures`](crate::engine::Stats), or a crash
    /// before the unlinks persisted): harmless, removed by the next
    /// compaction, and named so that the failure is never silent.
    pub leftovers: Vec<PathBuf>,
    /// Quarantined torn tails (`<segment>.broken-<offset>`) in the directory:
    /// bytes a writer cut off, kept for inspection and read by nothing, listed
    /// so that none is ever silent (FORMAT.md §2).
    pub quarantined: Vec<PathBuf>,
}

/// The files FORMAT.md §5.4 step 5 deletes that are still listed: snapshots
/// older than the previous one and in neither its chain nor the newest's, segments wholly at or below the previous
/// snapshot, and temp files of an unfinished install.
fn leftovers(vfs: &dyn Vfs, dir: &Path) -> Vec<PathBuf> {
    let Ok(l) = list_store(vfs, dir) else {
        return vec![];
    };
    let mut out = Vec::new();
    if l.snapshots.len() >= 2 {
        let prev = l.snapshots[l.snapshots.len() - 2].0;
        // The chains of the newest and the previous snapshot stay (§14.5).
        let parent_of = |seq: u64| {
            let (_, name) = l.snapshots.iter().find(|s| s.0 == seq)?;
            snapshot_parent(vfs, &dir.join(name))
        };
        let mut live = Vec::new();
        for top in [l.snapshots[l.snapshots.len() - 1].0, prev] {
            let mut at = Some(top);
            while let Some(seq) = at.filter(|_| live.len() <= 2 * (MAX_DELTA_CHAIN + 1)) {
                live.push(seq);
                at = parent_of(seq);
            }
        }
        for (seq, name) in &l.snapshots[..l.snapshots.len() - 2] {
            if !live.contains(seq) {
                out.push(dir.join(name));
            }
        }
        for w in l.segments.windows(2) {
            if w[1].0 <= prev + 1 {
                out.push(dir.join(&w[0].1));
            }
        }
    }
    out.extend(l.temps.iter().map(|t| dir.join(t)));
    out
}

impl Reader<'_> {
    /// Read-only integrity check of the framing of every file (checksums, seq
    /// continuity, snapshot choice; in a tagged store, every record's and the
    /// base snapshot's tag). Takes no lock, modifies nothing.
    ///
    /// A bad frame at the end of the log is reported as a torn tail only when
    /// a read started after the writer lock was seen free finds it again,
    /// unchanged; while a writer holds the lock it waits for it, up to 2 s,
    /// and then reports [`Integrity::AppendInProgress`] (FORMAT.md §5.6).
    pub fn verify(&self) -> Result<VerifyReport> {
        settled(self.vfs, self.dir, || self.verify_once())
    }

    /// One pass of [`Reader::verify`], its bad frame at the end, if any, not
    /// settled.
    fn verify_once(&self) -> Result<VerifyReport> {
        let (vfs, dir, key) = (self.vfs, self.dir, self.key);
        check_dir(vfs, dir)?;
        let r = with_retries(|| {
            // The base's tables (a full table and its deltas) are kept to check
            // every block below; a whole snapshot was checked whole when it was chosen.
            let mut decode_state = |_: Codec, _: u64, s: SnapshotData<'_>| {
                Ok(match s {
                    SnapshotData::Table(t) => vec![t],
                    SnapshotData::Tables(ts) => ts,
                    SnapshotData::Whole(_) => vec![],
                })
            };
            let mut apply = |_: &mut Vec<Arc<Table>>, _: Codec, _: &[u8]| Ok(());
            load_every_segment::<Vec<Arc<Table>>>(
                vfs,
                dir,
                LoadSpec::unlocked(&mut decode_state, &mut apply, key, None),
            )
        });
        // Open reads a table's blocks only when it looks a key up; verify reads them all.
        let r = r.and_then(|l| {
            for t in &l.state {
                t.verify()?;
            }
            Ok(l)
        });
        let mut report = match r {
            Ok(l) => integrity_of_report(vfs, l.report),
            Err(e) => integrity_of_error(e)?,
        };
        report.leftovers = leftovers(vfs, dir);
        report.quarantined = quarantined(vfs, dir);
        Ok(report)
    }
}

/// Runs a verify pass, then settles a torn tail it reports (FORMAT.md §5.6,
/// `settle.rs`): reported as torn only when the pass made after the writer
/// lock was seen free finds it again, the same; an append in progress when a
/// writer held the lock for all of [`VERIFY_SETTLE_WAIT`].
fn settled(
    vfs: &dyn Vfs,
    dir: &Path,
    mut pass: impl FnMut() -> Result<VerifyReport>,
) -> Result<VerifyReport> {
    let first = pass()?;
    let torn = |r: &VerifyReport| match r.integrity {
        Integrity::TornTail { .. } => r.recovery.torn_tail.clone(),
        _ => None,
    };
    let (mut report, tail) = settle(vfs, dir, VERIFY_SETTLE_WAIT, first, torn, pass)?;
    if tail == Tail::InProgress
        && let Integrity::TornTail {
            path,
            offset,
            bytes,
            reason,
        } = report.integrity
    {
        report.integrity = Integrity::AppendInProgress {
            path,
            offset,
            bytes,
            reason,
        };
        report.recovery.append_in_progress = report.recovery.torn_tail.take();
    }
    Ok(report)
}

/// The quarantine files present (FORMAT.md §2), in name order.
fn quarantined(vfs: &dyn Vfs, dir: &Path) -> Vec<PathBuf> {
    let Ok(mut names) = vfs.list(dir) else {
        return vec![];
    };
    names.sort();
    names
        .into_iter()
        .filter(|n| n.contains(QUARANTINE_MARKER))
        .map(|n| dir.join(n))
        .collect()
}

/// [`Reader::verify`], then the open's own verdict: the state is rebuilt with
/// `M`'s snapshot decoder and `apply`, exactly as a writer's or a reader's open
/// would, so a record that does not decode, one `apply` refuses, or a snapshot
/// whose payload does not decode (FORMAT.md §6) is reported here as it is there,
/// and the base snapshot and every fallback are the ones the open picks.
///
/// `verify` passes only if every open would, with the same file and offset.
pub fn verify_as<M: crate::engine::machine::Machine>(
    vfs: &dyn Vfs,
    dir: &Path,
    key: Option<&Key>,
) -> Result<VerifyReport> {
    let reader = Reader::new(vfs, dir).with_key(key);
    settled(vfs, dir, || verify_as_once::<M>(&reader))
}

/// One pass of [`verify_as`]: the framing, then the open's own verdict, its
/// bad frame at the end, if any, not settled.
fn verify_as_once<M: crate::engine::machine::Machine>(reader: &Reader<'_>) -> Result<VerifyReport> {
    let framing = reader.verify_once()?;
    if !framing.integrity.is_readable() {
        return Ok(framing);
    }
    let r = reader.state_once::<M>().map(|(_, report)| report);
    let mut report = match r {
        Ok(recovery) => integrity_of_report(reader.vfs, recovery),
        Err(e) => integrity_of_error(e)?,
    };
    report.leftovers = framing.leftovers;
    report.quarantined = framing.quarantined;
    Ok(report)
}

/// Whether a whole-file torn tail is a segment whose creator has not written
/// its header yet (FORMAT.md §5.6): nothing but zeros or the start of a binary
/// header, shorter than any header
/// (`TAGGED_SEGMENT_HEADER_LEN` for binary, a JSONL header line is at most
/// `MAX_JSONL_HEADER_LEN`), or the start of a JSONL header line without its
/// newline. A concurrent compaction's rotation shows exactly this to a
/// reader; it is an empty segment, not damage.
fn header_not_written_yet(vfs: &dyn Vfs, t: &TornTailReport) -> bool {
    // Only a rotation's segment (never the first, seq 1): a store whose first
    // segment has no header is a torn creation, reported as such (§5.1).
    let rotated = t
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_segment_name)
        .is_some_and(|first| first > 1);
    if !t.whole_file || !rotated {
        return false;
    }
    let Ok(b) = vfs.read(&t.path) else {
        return false;
    };
    let b: &[u8] = (*b).as_ref();
    let zeros = b.len() < TAGGED_SEGMENT_HEADER_LEN
        && (b.iter().all(|&x| x == 0)
            || SEGMENT_MAGIC.starts_with(b)
            || b.starts_with(&SEGMENT_MAGIC));
    let jsonl_start = b.len() < MAX_JSONL_HEADER_LEN
        && !b.contains(&b'\n')
        && (JSONL_HEADER_PREFIX.starts_with(b) || b.starts_with(JSONL_HEADER_PREFIX));
    zeros || jsonl_start
}

/// `verify`'s reading of a load that succeeded: a segment being created
/// right now is empty, not a torn tail.
fn integrity_of_report(vfs: &dyn Vfs, mut recovery: RecoveryReport) -> VerifyReport {
    if recovery
        .torn_tail
        .as_ref()
        .is_some_and(|t| header_not_written_yet(vfs, t))
    {
        recovery.torn_tail = None;
    }
    VerifyReport {
        integrity: match &recovery.torn_tail {
            None => Integrity::Clean,
            Some(t) => Integrity::TornTail {
                path: t.path.clone(),
                offset: t.offset,
                bytes: t.bytes,
                reason: t.reason.clone(),
            },
        },
        recovery,
        leftovers: vec![],
        quarantined: vec![],
    }
}

impl VerifyReport {
    /// True when every open reads the store as it is: clean or a torn tail
    /// only, and no damaged snapshot skipped on the way to the base.
    pub fn ok(&self) -> bool {
        self.integrity.is_readable() && self.recovery.snapshot_fallbacks.is_empty()
    }
}

/// A load's failure as `verify` reports it: damage is a verdict, anything
/// else (I/O, a missing store, the wrong key) stays an error.
fn integrity_of_error(e: Error) -> Result<VerifyReport> {
    Integrity::from_damage(e).map(|integrity| VerifyReport {
        integrity,
        recovery: RecoveryReport::default(),
        leftovers: vec![],
        quarantined: vec![],
    })
}
